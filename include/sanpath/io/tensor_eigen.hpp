#pragma once
/// \file tensor_eigen.hpp
/// Row-major tensors (safetensors order: the last index varies fastest) and
/// Eigen's column-major matrices: the one place where elements are moved
/// between the two orders.

#include "sanpath/io/safetensors.hpp"

#include <Eigen/Core>

#include <cstdint>
#include <functional>
#include <string>

namespace sanpath {

/// A block of a row-major tensor T with `width` columns: rows [row, row +
/// rows), columns [col, col + cols). Its Eigen image is the block itself
/// (rows × cols) or, with `transpose`, its transpose (cols × rows). A vector
/// of n elements is T with one row of width n.
struct TensorBlock {
  std::int64_t row = 0, rows = 0, col = 0, cols = 0;
  bool transpose = false;
  Eigen::Index image_rows() const { return static_cast<Eigen::Index>(transpose ? cols : rows); }
  Eigen::Index image_cols() const { return static_cast<Eigen::Index>(transpose ? rows : cols); }
};

/// Reads elements [first, first + count) of T (row-major) into out[0 .. count).
using TensorReader = std::function<void(std::size_t first, std::size_t count, double* out)>;

/// image = block of T, read through `read`; `image` is sized image_rows × image_cols.
void read_block(const TensorBlock& block, std::int64_t width, const TensorReader& read, Eigen::Map<Eigen::MatrixXd> image);
/// The inverse: writes `image` into the block of T, whose row-major values start at `values`.
void write_block(const TensorBlock& block, std::int64_t width, const Eigen::Ref<const Eigen::MatrixXd>& image,
                 double* values);

/// A 2-D tensor as a matrix (rows × cols), a tensor as a vector of its values.
Eigen::MatrixXd to_matrix(const Tensor& t);
Eigen::VectorXd to_vector(const Tensor& t);
/// A matrix as a 2-D tensor [rows, cols], a vector as a 1-D tensor.
Tensor make_tensor(const std::string& name, const Eigen::MatrixXd& m, const std::string& dtype = "F64");
Tensor make_tensor(const std::string& name, const Eigen::VectorXd& v, const std::string& dtype = "F64");

}  // namespace sanpath

#include "sanpath/io/tensor_eigen.hpp"

#include <algorithm>
#include <vector>

namespace sanpath {

namespace {

using RowMajorMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Rows of a block are moved in chunks: a chunk is read contiguously from T
/// and written to the image as a block, so neither side is walked element by
/// element with a large stride.
constexpr std::int64_t kChunkRows = 64;

}  // namespace

void read_block(const TensorBlock& b, std::int64_t width, const TensorReader& read, Eigen::Map<Eigen::MatrixXd> image) {
  const auto at = [&](std::int64_t r) { return static_cast<std::size_t>((b.row + r) * width + b.col); };
  if (b.transpose && b.cols == width) {  // whole rows of T are whole columns of the image
    read(at(0), static_cast<std::size_t>(b.rows * b.cols), image.data());
    return;
  }
  std::vector<double> buf(static_cast<std::size_t>(std::min(b.rows, kChunkRows) * b.cols));
  for (std::int64_t r = 0; r < b.rows; r += kChunkRows) {
    const std::int64_t k = std::min(kChunkRows, b.rows - r);
    for (std::int64_t i = 0; i < k; ++i)
      read(at(r + i), static_cast<std::size_t>(b.cols), buf.data() + i * b.cols);
    const Eigen::Map<const RowMajorMatrix> chunk(buf.data(), k, b.cols);
    if (b.transpose)
      image.middleCols(r, k) = chunk.transpose();
    else
      image.middleRows(r, k) = chunk;
  }
}

void write_block(const TensorBlock& b, std::int64_t width, const Eigen::Ref<const Eigen::MatrixXd>& image,
                 double* values) {
  std::vector<double> buf(static_cast<std::size_t>(std::min(b.rows, kChunkRows) * b.cols));
  for (std::int64_t r = 0; r < b.rows; r += kChunkRows) {
    const std::int64_t k = std::min(kChunkRows, b.rows - r);
    Eigen::Map<RowMajorMatrix> chunk(buf.data(), k, b.cols);
    if (b.transpose)
      chunk = image.middleCols(r, k).transpose();
    else
      chunk = image.middleRows(r, k);
    for (std::int64_t i = 0; i < k; ++i)
      std::copy_n(buf.data() + i * b.cols, b.cols, values + (b.row + r + i) * width + b.col);
  }
}

namespace {

TensorReader from_values(const Tensor& t) {
  return [&t](std::size_t first, std::size_t count, double* out) {
    std::copy_n(t.values.data() + first, count, out);
  };
}

}  // namespace

Eigen::MatrixXd to_matrix(const Tensor& t) {
  const std::int64_t r = t.shape.at(0), c = t.shape.at(1);
  Eigen::MatrixXd m(r, c);
  read_block({0, r, 0, c, false}, c, from_values(t), Eigen::Map<Eigen::MatrixXd>(m.data(), r, c));
  return m;
}

Eigen::VectorXd to_vector(const Tensor& t) {
  const auto n = static_cast<std::int64_t>(t.values.size());
  Eigen::VectorXd v(n);
  read_block({0, 1, 0, n, true}, n, from_values(t), Eigen::Map<Eigen::MatrixXd>(v.data(), n, 1));
  return v;
}

Tensor make_tensor(const std::string& name, const Eigen::MatrixXd& m, const std::string& dtype) {
  Tensor t{name, dtype, {m.rows(), m.cols()}, std::vector<double>(static_cast<std::size_t>(m.size()))};
  write_block({0, m.rows(), 0, m.cols(), false}, m.cols(), m, t.values.data());
  return t;
}

Tensor make_tensor(const std::string& name, const Eigen::VectorXd& v, const std::string& dtype) {
  return Tensor{name, dtype, {v.size()}, std::vector<double>(v.data(), v.data() + v.size())};
}

}  // namespace sanpath

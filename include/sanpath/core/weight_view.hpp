#pragma once
/// \file weight_view.hpp
/// Weights read where they lie: a matrix whose entries are floats stored in
/// a mapped checkpoint (F64, F32, F16 or BF16, little-endian), gathered by
/// byte offsets, so that the double products (core/linalg.hpp) pack their
/// panels straight from the file without a copy of the model in doubles.
/// Every one of these formats is exact in double: a product of a view
/// gives the same bits as the product of its decoded matrix.

#include <Eigen/Core>

#include <cstdint>
#include <cstring>

namespace sanpath {

/// The stored float formats a view reads.
enum class StoredFloat { f64, f32, f16, bf16 };

/// Bytes of one element.
constexpr std::size_t stored_size(StoredFloat t) {
  return t == StoredFloat::f64 ? 8 : t == StoredFloat::f32 ? 4 : 2;
}

/// The double of one stored value, from its bits in the host's order (exact;
/// NaN and Inf kept).
inline double f64_from_bits(std::uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}
inline double f32_from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return static_cast<double>(f);
}
/// BF16 is the upper half of an F32: its bits shifted up by 16 are that float.
inline double bf16_from_bits(std::uint16_t h) { return f32_from_bits(static_cast<std::uint32_t>(h) << 16); }
/// F16 straight to the bits of the double: normal values re-biased (exponent
/// e − 15 + 1023, fraction shifted up by 42), Inf and NaN kept so,
/// subnormals and zeros as m · 2^−24 (exact) with the sign set.
inline double f16_from_bits(std::uint16_t h) {
  const std::uint64_t sign = static_cast<std::uint64_t>(h & 0x8000U) << 48;
  const std::uint64_t e = (h >> 10) & 31U, m = h & 0x3ffU;
  const std::uint64_t normal = sign | ((e == 31 ? 2047 : e + 1008) << 52) | (m << 42);  // 31: Inf or NaN
  const double tiny = static_cast<double>(m) * 0x1p-24;
  std::uint64_t subnormal;
  std::memcpy(&subnormal, &tiny, 8);
  return f64_from_bits(e == 0 ? subnormal | sign : normal);  // a select, no branch: decoding loops vectorise
}

/// The element of type T at p, as double (host byte order).
template <StoredFloat T> inline double load_stored(const unsigned char* p) {
  if constexpr (T == StoredFloat::f64) {
    std::uint64_t u;
    std::memcpy(&u, p, 8);
    return f64_from_bits(u);
  } else if constexpr (T == StoredFloat::f32) {
    std::uint32_t u;
    std::memcpy(&u, p, 4);
    return f32_from_bits(u);
  } else {
    std::uint16_t u;
    std::memcpy(&u, p, 2);
    return T == StoredFloat::f16 ? f16_from_bits(u) : bf16_from_bits(u);
  }
}

/// A rows × cols matrix of stored floats: entry (i, j) is the element of
/// type `type` at base + row_offsets[i] + col_offsets[j] (bytes). A torch
/// Linear weight T [out, in] seen as x·W's W = Tᵀ has row_offsets[i] =
/// i·size and col_offsets[j] = j·in·size; blocks of fused tensors, heads
/// side by side and the key/value heads a group of query heads shares are
/// other offsets into the same bytes. The view owns nothing: the bytes and
/// the offset arrays outlive it (model/mapped_layer.hpp holds them).
struct WeightView {
  const unsigned char* base = nullptr;
  StoredFloat type = StoredFloat::f64;
  const std::int64_t* row_offsets = nullptr;
  const std::int64_t* col_offsets = nullptr;
  Eigen::Index rows = 0, cols = 0;

  double operator()(Eigen::Index i, Eigen::Index j) const {
    const unsigned char* p = base + row_offsets[i] + col_offsets[j];
    switch (type) {
      case StoredFloat::f64: return load_stored<StoredFloat::f64>(p);
      case StoredFloat::f32: return load_stored<StoredFloat::f32>(p);
      case StoredFloat::f16: return load_stored<StoredFloat::f16>(p);
      case StoredFloat::bf16: break;
    }
    return load_stored<StoredFloat::bf16>(p);
  }
  /// Columns [first, first + count).
  WeightView middle_cols(Eigen::Index first, Eigen::Index count) const {
    WeightView v = *this;
    v.col_offsets += first;
    v.cols = count;
    return v;
  }
  /// The matrix in doubles (for the products of the multiprecision tiers).
  Eigen::MatrixXd decode() const {
    Eigen::MatrixXd m(rows, cols);
    for (Eigen::Index j = 0; j < cols; ++j)
      for (Eigen::Index i = 0; i < rows; ++i) m(i, j) = (*this)(i, j);
    return m;
  }
};

}  // namespace sanpath

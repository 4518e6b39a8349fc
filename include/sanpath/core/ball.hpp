#pragma once
/// \file ball.hpp
/// The radius side of ball arithmetic (math.md §10): upper bounds of
/// non-negative reals far outside double's exponent range (a radius of
/// 2^(1−p) · |x| at p = 32,772 bits), matrices of such bounds sharing one
/// exponent, and their products. Every operation rounds up, so a radius is
/// never smaller than the error it bounds. Scalars round to nearest and then
/// step one unit up (no rounding mode needed); matrix products run sanpath's
/// double kernel under FE_UPWARD, where every fused multiply-add of a sum of
/// non-negative terms rounds up (core/dgemm.hpp: the kernel rounds as the
/// calling thread's mode says, on every thread of the product).
///
/// \code
///   UpperBound u = UpperBound::pow2(1 - 257);               // 2^-256
///   RadiusMatrix r = RadiusMatrix::abs_of(Xmid);            // ≥ |X̃| entrywise
///   RadiusMatrix e = product_up(r, RadiusMatrix::of(W.cwiseAbs()));  // ≥ |X̃|·|W|
///   UpperBound f = frobenius_up(e);                        // ≥ ‖e‖_F
/// \endcode

#include "sanpath/core/scalar.hpp"

#include <mpfr.h>

#include <Eigen/Core>

#include <climits>
#include <vector>

namespace sanpath {

using MatrixXd = Eigen::MatrixXd;

/// The smallest double above x ≥ 0 (x itself for +inf).
double next_up(double x);
/// Upper bounds of a + b and a·b for a, b ≥ 0.
inline double add_up(double a, double b) { return next_up(a + b); }
inline double mul_up(double a, double b) { return next_up(a * b); }

/// A non-negative real bounded from above by m · 2^e: m = 0, or m in
/// [0.5, 1), or +inf (no bound). Exact for zeros and powers of two.
struct UpperBound {
  double m = 0;
  long e = 0;

  /// x ≥ 0 exactly (a double is a power of two times [0.5, 1)).
  static UpperBound of(double x);
  /// 2^k exactly.
  static UpperBound pow2(long k);
  /// ≥ |x| for an MPFR value (x finite; +inf bound for NaN or infinity).
  static UpperBound abs_of(mpfr_srcptr x);
  static UpperBound infinite();

  bool is_zero() const { return m == 0; }
  bool is_finite() const;
  /// A double ≥ value · 2^(−exponent); values below 2^(−1000) of the scale
  /// give 2^(−1000) (still an upper bound), values above double's range +inf.
  double scaled(long exponent) const;
  /// The exact value as an MPFR number of 64 bits (m has 53).
  BigReal to_big() const;
  /// log2 of the bound, rounded up to an integer (for choosing scales);
  /// LONG_MIN for zero.
  long log2_ceil() const;
};

UpperBound operator+(const UpperBound& a, const UpperBound& b);
UpperBound operator*(const UpperBound& a, const UpperBound& b);
UpperBound max(const UpperBound& a, const UpperBound& b);
/// ≥ √a.
UpperBound sqrt_up(const UpperBound& a);
/// ≥ expm1(a) for a ≤ 1 (a(1 + a)); +inf above 1.
UpperBound expm1_up(const UpperBound& a);
/// Whether a ≤ b (both finite, or b infinite).
bool operator<=(const UpperBound& a, const UpperBound& b);

/// Entrywise upper bounds of a matrix: entry (i, j) ≤ m(i, j) · 2^exp.
/// m holds doubles ≥ 0 (or +inf); exp is shared by every entry.
struct RadiusMatrix {
  MatrixXd m;
  long exp = 0;

  static RadiusMatrix zero(Eigen::Index rows, Eigen::Index cols);
  /// A matrix of non-negative doubles, exactly.
  static RadiusMatrix of(MatrixXd values);
  /// ≥ |M| entrywise for a matrix of MPFR values.
  template <class S> static RadiusMatrix abs_of(const Matrix<S>& M);

  Eigen::Index rows() const { return m.rows(); }
  Eigen::Index cols() const { return m.cols(); }
  /// Entry (i, j) as an UpperBound.
  UpperBound at(Eigen::Index i, Eigen::Index j) const;
  /// The largest entry.
  UpperBound max_entry() const;
  /// Rescales so that the largest finite entry is below 1 (values unchanged
  /// or raised; +inf entries stay +inf).
  void normalize();
  RadiusMatrix transpose() const { return {m.transpose(), exp}; }
  RadiusMatrix block(Eigen::Index row, Eigen::Index col, Eigen::Index rows, Eigen::Index cols) const {
    return {m.block(row, col, rows, cols), exp};
  }
};

/// Entrywise a + b, rounded up.
RadiusMatrix operator+(const RadiusMatrix& a, const RadiusMatrix& b);
/// Every entry times s, rounded up.
RadiusMatrix operator*(const RadiusMatrix& a, const UpperBound& s);
/// Upper bound of the product a·b (both non-negative): the double kernel under FE_UPWARD.
RadiusMatrix product_up(const RadiusMatrix& a, const RadiusMatrix& b);
/// Builds a matrix from per-entry bounds f(i, j) → UpperBound.
template <class F> RadiusMatrix radius_from(Eigen::Index rows, Eigen::Index cols, F&& f);

/// Upper bounds of norms (math.md §3) of a matrix of non-negative bounds.
UpperBound frobenius_up(const RadiusMatrix& a);
UpperBound norm_1_up(const RadiusMatrix& a);
UpperBound norm_inf_up(const RadiusMatrix& a);
/// ≥ the mean over the rows of each column (a 1×cols matrix).
RadiusMatrix column_means_up(const RadiusMatrix& a);
/// ≥ the Euclidean norm of each row (a rows×1 matrix).
RadiusMatrix row_norms_up(const RadiusMatrix& a);
/// The smaller of two bounds of the same entries, entry by entry (shapes equal).
RadiusMatrix min(const RadiusMatrix& a, const RadiusMatrix& b);
/// Entry (i, j) capped by rows(i, j / width): an entrywise radius tightened
/// by bounds of the Euclidean norms of its rows' blocks of `width` columns
/// (|x_j| ≤ ‖x‖₂ for every entry of a block).
RadiusMatrix capped_by_rows(const RadiusMatrix& a, const RadiusMatrix& rows, Eigen::Index width);

/// ≥ ‖W‖₂, the largest singular value of a double matrix: ‖G⁴‖_F^(1/8) for
/// the Gram matrix G = AᵀA of A = W or Wᵀ (the smaller Gram), from three
/// products in double (AᵀA, then B ← BᵀB twice), each product's rounding
/// bounded (γ_k·‖B‖²_F for k terms, plus underflow) and carried back through
/// the square roots: ‖B‖₂² ≤ ‖fl(BᵀB)‖₂ + that error. Within 1.2× of ‖W‖₂
/// for a Gaussian matrix of width 768 while the Gram is at most 1024 wide;
/// wider, by blocks of 512 columns of A, ‖A‖₂² ≤ Σ_b ‖A_b‖₂². Never above
/// the Frobenius norm (also a bound).
UpperBound spectral_norm_up(const MatrixXd& W);

// ---- templates ----------------------------------------------------------------

template <class S> RadiusMatrix RadiusMatrix::abs_of(const Matrix<S>& M) {
  static_assert(is_mpfr_v<S>, "RadiusMatrix::abs_of: an MPFR matrix");
  return radius_from(M.rows(), M.cols(), [&](Eigen::Index i, Eigen::Index j) {
    return UpperBound::abs_of(M(i, j).backend().data());
  });
}

template <class F> RadiusMatrix radius_from(Eigen::Index rows, Eigen::Index cols, F&& f) {
  std::vector<UpperBound> b(static_cast<std::size_t>(rows * cols));
  long e = LONG_MIN;
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) {
      UpperBound& x = b[static_cast<std::size_t>(j * rows + i)];
      x = f(i, j);
      if (!x.is_zero() && x.is_finite() && x.e > e) e = x.e;  // +inf stays +inf at any exponent
    }
  RadiusMatrix r;
  r.exp = e == LONG_MIN ? 0 : e;
  r.m.resize(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) r.m(i, j) = b[static_cast<std::size_t>(j * rows + i)].scaled(r.exp);
  return r;
}

}  // namespace sanpath

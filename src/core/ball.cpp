#include "sanpath/core/ball.hpp"

#include "sanpath/core/linalg.hpp"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace sanpath {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr long kFloor = -1000;  // scaled values below 2^-1000 are raised to it

/// ≥ x · 2^s for x ≥ 0 and s ≤ 0 (exact unless the result would fall below 2^-1000).
double shift_up(double x, long s) {
  if (x == 0 || !std::isfinite(x)) return x;
  int ex = 0;
  std::frexp(x, &ex);
  if (ex + s < kFloor) return std::ldexp(1.0, static_cast<int>(kFloor));
  return std::ldexp(x, static_cast<int>(s));
}

/// Restores the thread's rounding mode on scope exit.
class RoundUpward {
 public:
  RoundUpward() : saved_(std::fegetround()) { std::fesetround(FE_UPWARD); }
  ~RoundUpward() { std::fesetround(saved_); }
  RoundUpward(const RoundUpward&) = delete;
  RoundUpward& operator=(const RoundUpward&) = delete;

 private:
  int saved_;
};

}  // namespace

double next_up(double x) { return std::isinf(x) ? x : std::nextafter(x, kInf); }

UpperBound UpperBound::of(double x) {
  if (!(x >= 0)) throw std::logic_error("UpperBound::of: a negative or NaN value");
  if (x == 0) return {};
  if (std::isinf(x)) return infinite();
  int e = 0;
  const double m = std::frexp(x, &e);
  return {m, e};
}

UpperBound UpperBound::pow2(long k) { return {0.5, k + 1}; }

UpperBound UpperBound::infinite() { return {kInf, 0}; }

UpperBound UpperBound::abs_of(mpfr_srcptr x) {
  if (mpfr_zero_p(x)) return {};
  if (!mpfr_number_p(x)) return infinite();
  long exp = 0;
  const double d = mpfr_get_d_2exp(&exp, x, MPFR_RNDA);  // |d| rounded away from zero
  UpperBound r = of(std::fabs(d));
  r.e += exp;
  return r;
}

bool UpperBound::is_finite() const { return std::isfinite(m); }

double UpperBound::scaled(long exponent) const {
  if (m == 0) return 0;
  if (!is_finite()) return kInf;
  const long s = e - exponent;
  if (s < kFloor) return std::ldexp(1.0, static_cast<int>(kFloor));
  if (s > 1023) return kInf;
  return std::ldexp(m, static_cast<int>(s));  // ≥ 2^-1001: normal, exact
}

BigReal UpperBound::to_big() const {
  BigReal x(0, 20);  // 20 digits: 68 bits, m has 53
  if (!is_finite()) {
    mpfr_set_inf(x.backend().data(), 1);
    return x;
  }
  mpfr_set_d(x.backend().data(), m, MPFR_RNDN);  // exact
  mpfr_mul_2si(x.backend().data(), x.backend().data(), e, MPFR_RNDN);  // exact
  return x;
}

long UpperBound::log2_ceil() const { return m == 0 ? LONG_MIN : e; }

UpperBound operator+(const UpperBound& a, const UpperBound& b) {
  if (a.is_zero()) return b;
  if (b.is_zero()) return a;
  if (!a.is_finite() || !b.is_finite()) return UpperBound::infinite();
  const long e = std::max(a.e, b.e);
  UpperBound r = UpperBound::of(add_up(a.scaled(e), b.scaled(e)));
  r.e += e;
  return r;
}

UpperBound operator*(const UpperBound& a, const UpperBound& b) {
  if (a.is_zero() || b.is_zero()) return {};
  if (!a.is_finite() || !b.is_finite()) return UpperBound::infinite();
  UpperBound r = UpperBound::of(mul_up(a.m, b.m));
  r.e += a.e + b.e;
  return r;
}

bool operator<=(const UpperBound& a, const UpperBound& b) {
  if (a.is_zero() || !b.is_finite()) return true;
  if (b.is_zero() || !a.is_finite()) return false;
  return a.e < b.e || (a.e == b.e && a.m <= b.m);
}

UpperBound max(const UpperBound& a, const UpperBound& b) { return a <= b ? b : a; }

UpperBound sqrt_up(const UpperBound& a) {
  if (a.is_zero() || !a.is_finite()) return a;
  const long q = a.e >= 0 ? a.e / 2 : -((1 - a.e) / 2);  // floor(e / 2)
  const long r = a.e - 2 * q;                             // 0 or 1
  UpperBound s = UpperBound::of(next_up(std::sqrt(r ? 2 * a.m : a.m)));
  s.e += q;
  return s;
}

UpperBound expm1_up(const UpperBound& a) {
  if (!(a <= UpperBound::of(1.0))) return UpperBound::infinite();
  return a * (UpperBound::of(1.0) + a);  // expm1(x) ≤ x + x² for 0 ≤ x ≤ 1
}

RadiusMatrix RadiusMatrix::zero(Eigen::Index rows, Eigen::Index cols) { return {MatrixXd::Zero(rows, cols), 0}; }

RadiusMatrix RadiusMatrix::of(MatrixXd values) {
  RadiusMatrix r{std::move(values), 0};
  r.normalize();
  return r;
}

UpperBound RadiusMatrix::at(Eigen::Index i, Eigen::Index j) const {
  UpperBound b = UpperBound::of(m(i, j));
  if (!b.is_zero()) b.e += exp;
  return b;
}

UpperBound RadiusMatrix::max_entry() const {
  if (m.size() == 0) return {};
  UpperBound b = UpperBound::of(m.maxCoeff());
  if (!b.is_zero()) b.e += exp;
  return b;
}

void RadiusMatrix::normalize() {
  double mx = 0;  // the largest finite entry: +inf entries stay +inf at any exponent
  for (Eigen::Index i = 0; i < m.size(); ++i)
    if (std::isfinite(m(i)) && m(i) > mx) mx = m(i);
  if (mx == 0) return;
  int k = 0;
  std::frexp(mx, &k);
  if (k == 0) return;
  if (k > 0) {
    m = m.unaryExpr([k](double x) { return shift_up(x, -k); });
  } else {
    m = m.unaryExpr([k](double x) { return x == 0 ? 0.0 : std::ldexp(x, -k); });  // scaling up: exact
  }
  exp += k;
}

RadiusMatrix operator+(const RadiusMatrix& a, const RadiusMatrix& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) throw std::logic_error("RadiusMatrix +: shapes differ");
  RadiusMatrix x = a, y = b;
  x.normalize();
  y.normalize();
  if (x.m.size() == 0 || x.m.maxCoeff() == 0) return y;
  if (y.m.maxCoeff() == 0) return x;
  const long e = std::max(x.exp, y.exp);
  RadiusMatrix r{MatrixXd(a.rows(), a.cols()), e};
  for (Eigen::Index j = 0; j < r.cols(); ++j)
    for (Eigen::Index i = 0; i < r.rows(); ++i)
      r.m(i, j) = add_up(shift_up(x.m(i, j), x.exp - e), shift_up(y.m(i, j), y.exp - e));
  return r;
}

RadiusMatrix operator*(const RadiusMatrix& a, const UpperBound& s) {
  if (s.is_zero()) return RadiusMatrix::zero(a.rows(), a.cols());
  RadiusMatrix r{a.m.unaryExpr([&](double x) { return x == 0 ? 0.0 : mul_up(x, s.m); }), a.exp + s.e};
  r.normalize();
  return r;
}

RadiusMatrix product_up(const RadiusMatrix& a, const RadiusMatrix& b) {
  RadiusMatrix x = a, y = b;
  x.normalize();
  y.normalize();
  RadiusMatrix r;
  {
    RoundUpward up;  // every FMA of the kernel rounds up, on every thread of the product
    gemm(x.m, y.m, r.m);
  }
  // inf · 0 (a void radius times an exact zero) is NaN: no bound, so +inf.
  r.m = r.m.unaryExpr([](double v) { return std::isnan(v) ? kInf : v; });
  r.exp = x.exp + y.exp;
  r.normalize();
  return r;
}

UpperBound frobenius_up(const RadiusMatrix& a) {
  RadiusMatrix x = a;
  x.normalize();
  double s = 0;
  for (Eigen::Index j = 0; j < x.cols(); ++j)
    for (Eigen::Index i = 0; i < x.rows(); ++i) s = add_up(s, mul_up(x.m(i, j), x.m(i, j)));
  UpperBound r = UpperBound::of(next_up(std::sqrt(s)));
  if (!r.is_zero()) r.e += x.exp;
  return r;
}

UpperBound norm_1_up(const RadiusMatrix& a) {
  double best = 0;
  for (Eigen::Index j = 0; j < a.cols(); ++j) {
    double s = 0;
    for (Eigen::Index i = 0; i < a.rows(); ++i) s = add_up(s, a.m(i, j));
    best = std::max(best, s);
  }
  UpperBound r = UpperBound::of(best);
  if (!r.is_zero()) r.e += a.exp;
  return r;
}

UpperBound norm_inf_up(const RadiusMatrix& a) { return norm_1_up(a.transpose()); }

RadiusMatrix column_means_up(const RadiusMatrix& a) {
  RadiusMatrix r{MatrixXd::Zero(1, a.cols()), a.exp};
  const double n = static_cast<double>(a.rows());
  for (Eigen::Index j = 0; j < a.cols(); ++j) {
    double s = 0;
    for (Eigen::Index i = 0; i < a.rows(); ++i) s = add_up(s, a.m(i, j));
    r.m(0, j) = a.rows() ? next_up(s / n) : 0.0;
  }
  return r;
}

RadiusMatrix row_norms_up(const RadiusMatrix& a) {
  RadiusMatrix x = a;
  x.normalize();
  RadiusMatrix r{MatrixXd::Zero(a.rows(), 1), x.exp};
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    double s = 0;
    for (Eigen::Index j = 0; j < x.cols(); ++j)
      if (x.m(i, j) != 0) s = add_up(s, mul_up(x.m(i, j), x.m(i, j)));  // zeros add nothing, not an ulp of 0
    r.m(i, 0) = s == 0 ? 0.0 : next_up(std::sqrt(s));
  }
  r.normalize();
  return r;
}

namespace {

/// a and b on one exponent (the larger), each entry raised where it falls below the floor.
std::pair<RadiusMatrix, RadiusMatrix> aligned(RadiusMatrix x, RadiusMatrix y) {
  x.normalize();
  y.normalize();
  // the larger exponent of the two that carry a finite nonzero entry (zeros and +inf keep at any)
  const auto has_finite = [](const RadiusMatrix& r) {
    return (r.m.array().isFinite() && r.m.array() > 0).any();
  };
  long e = 0;
  if (has_finite(x) && has_finite(y))
    e = std::max(x.exp, y.exp);
  else if (has_finite(x) || has_finite(y))
    e = has_finite(x) ? x.exp : y.exp;
  for (RadiusMatrix* r : {&x, &y}) {
    const long s = r->exp - e;  // ≤ 0 but for a matrix of zeros and +inf, unchanged by any shift
    r->m = r->m.unaryExpr([s](double v) { return s <= 0 ? shift_up(v, s) : v; });
    r->exp = e;
  }
  return {std::move(x), std::move(y)};
}

}  // namespace

RadiusMatrix min(const RadiusMatrix& a, const RadiusMatrix& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) throw std::logic_error("RadiusMatrix min: shapes differ");
  auto [x, y] = aligned(a, b);
  RadiusMatrix r{x.m.cwiseMin(y.m), x.exp};
  r.normalize();
  return r;
}

RadiusMatrix capped_by_rows(const RadiusMatrix& a, const RadiusMatrix& rows, Eigen::Index width) {
  if (width < 1 || rows.rows() != a.rows() || rows.cols() * width < a.cols())
    throw std::logic_error("capped_by_rows: the row bounds do not cover the matrix");
  RadiusMatrix spread{MatrixXd(a.rows(), a.cols()), rows.exp};
  for (Eigen::Index j = 0; j < a.cols(); ++j) spread.m.col(j) = rows.m.col(j / width);
  return min(a, spread);
}

namespace {

/// ≥ ‖M‖_F (+inf beyond double's range), summed at the scale of the largest
/// entry: entries pushed below the normal range there square to less than
/// the 2^-1074 that mul_up's rounding adds.
double frobenius_double_up(const MatrixXd& M) {
  const double largest = M.size() ? M.cwiseAbs().maxCoeff() : 0.0;
  if (largest == 0) return 0.0;
  int k = 0;
  std::frexp(largest, &k);
  double s = 0;
  for (Eigen::Index j = 0; j < M.cols(); ++j)
    for (Eigen::Index i = 0; i < M.rows(); ++i) {
      const double x = std::fabs(std::ldexp(M(i, j), -k));
      s = add_up(s, mul_up(x, x));
    }
  return std::ldexp(next_up(std::sqrt(s)), k);
}

/// ≥ ‖A‖₂ for ‖A‖_F ≤ 1 (no overflow below): B_0 = A, B_{t+1} = fl(B_tᵀB_t)
/// with |fl(B_tᵀB_t) − B_tᵀB_t| ≤ γ_k|B_t|ᵀ|B_t| + k·2^-1073 entrywise (k
/// terms, any order and rounding mode, underflow included), whose Frobenius
/// norm is at most e_t = γ_k‖B_t‖²_F + c·k·2^-1073 (c×c entries); then
/// ‖B_t‖₂² = ‖B_tᵀB_t‖₂ ≤ ‖B_{t+1}‖₂ + e_t, from ‖B_m‖₂ ≤ ‖B_m‖_F back to A.
double gram_chain_up(const MatrixXd& A, int squarings) {
  std::vector<double> err;
  MatrixXd B = A;
  for (int t = 0; t < squarings; ++t) {
    const auto k = static_cast<double>(B.rows()), c = static_cast<double>(B.cols());
    const double ku = k * 0x1p-52;  // exact while k < 2^53
    if (!(ku <= 0x1p-10)) return std::numeric_limits<double>::infinity();
    const double gamma = mul_up(ku, 1.002);  // ≥ ku/(1 − ku) for ku ≤ 2^-10
    const double f = frobenius_double_up(B);
    err.push_back(add_up(mul_up(gamma, mul_up(f, f)), mul_up(mul_up(c, k), 0x1p-1073)));
    MatrixXd G;
    gemm(MatrixXd(B.transpose()), B, G);
    B = std::move(G);
  }
  double b = frobenius_double_up(B);
  for (int t = squarings - 1; t >= 0; --t) b = next_up(std::sqrt(add_up(b, err[static_cast<std::size_t>(t)])));
  return b;
}

}  // namespace

UpperBound spectral_norm_up(const MatrixXd& W) {
  if (W.size() == 0) return {};
  if (!W.allFinite()) return UpperBound::infinite();
  const double frobenius = frobenius_double_up(W);
  if (frobenius == 0) return {};
  if (std::isinf(frobenius)) return UpperBound::infinite();
  // A = W·2^-e with ‖A‖_F ≤ 1 (exact but for entries pushed below the normal
  // range: each within 2^-1075, so ‖W·2^-e − A‖₂ ≤ √(rc)·2^-1074).
  int e = 0;
  std::frexp(frobenius, &e);
  const MatrixXd tall = W.rows() >= W.cols() ? W : MatrixXd(W.transpose());
  const MatrixXd A = tall.unaryExpr([e](double v) { return std::ldexp(v, -e); });
  const Eigen::Index width = A.cols() <= 1024 ? A.cols() : 512;  // ‖A‖₂² ≤ Σ_b ‖A_b‖₂² over column blocks
  double squares = 0;
  for (Eigen::Index first = 0; first < A.cols(); first += width) {
    const double b = gram_chain_up(A.middleCols(first, std::min(width, A.cols() - first)), 3);
    squares = add_up(squares, mul_up(b, b));
  }
  const double size = static_cast<double>(W.rows()) * static_cast<double>(W.cols());
  const double scaled = add_up(next_up(std::sqrt(squares)), mul_up(next_up(std::sqrt(size)), 0x1p-1074));
  UpperBound r = UpperBound::of(scaled);
  r.e += e;
  return r <= UpperBound::of(frobenius) ? r : UpperBound::of(frobenius);
}

}  // namespace sanpath

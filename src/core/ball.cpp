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
  if (m.size() == 0) return;
  const double mx = m.maxCoeff();
  if (mx == 0 || !std::isfinite(mx)) return;
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

}  // namespace sanpath

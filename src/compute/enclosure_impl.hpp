#pragma once
#include "sanpath/compute/enclosure.hpp"
#include "sanpath/compute/norms.hpp"
#include "compute/forward_impl.hpp"  // detail::pack_into, score_scale, window_of, add_row
#include "compute/embed_impl.hpp"  // embed_pixels
#include "sanpath/core/errors.hpp"

#include <mpfr.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <tuple>
#include <utility>
#include <string>
#include <stdexcept>

namespace sanpath {
namespace enclosure_detail {

/// The enclosed passes run at the MPFR tiers; their double instantiations
/// throw this (the arguments, unused, are only named).
template <class... T> [[noreturn]] void refuse_double(const T&...) {
  throw std::invalid_argument("certified enclosures: run at an MPFR tier (a precision in bits), not in double");
}

/// u = 2^(1−p): twice the unit roundoff of a p-bit tier. Every bound below
/// is stated with u, so each keeps a factor of two in hand.
inline UpperBound unit(long p) { return UpperBound::pow2(1 - p); }

/// γ_k = k·u/(1 − k·u) ≤ 1.002·k·u while k·u ≤ 2^-10; +inf beyond (the
/// enclosure is then void, and says so by an infinite radius).
inline UpperBound gamma_up(Eigen::Index k, long p) {
  const UpperBound ku = UpperBound::of(static_cast<double>(std::max<Eigen::Index>(k, 1))) * unit(p);
  if (!(ku <= UpperBound::pow2(-10))) return UpperBound::infinite();
  return ku * UpperBound::of(1.002);
}

template <class S> RadiusMatrix abs_of(const Matrix<S>& M) { return RadiusMatrix::abs_of(M); }

template <class S> BallMatrix<S> columns(const BallMatrix<S>& B, Eigen::Index first, Eigen::Index count) {
  return {B.mid.middleCols(first, count), B.rad.block(0, first, B.rad.rows(), count)};
}

/// rad += u·|mid|: the rounding of an elementwise operation that produced mid.
template <class S> void add_rounding(BallMatrix<S>& B, long p, double factor = 1.0) {
  B.rad = B.rad + abs_of(B.mid) * (UpperBound::of(factor) * unit(p));
}

/// A·W with W exact (a model's weights): (r_A + γ_k|Ã|)·|W|.
template <class S> BallMatrix<S> times_weights(const BallMatrix<S>& A, const MatrixXd& W, long p) {
  BallMatrix<S> C;
  gemm_weights(A.mid, W, C.mid);
  const RadiusMatrix left = A.rad + abs_of(A.mid) * gamma_up(W.rows(), p);
  C.rad = product_up(left, RadiusMatrix::of(W.cwiseAbs()));
  return C;
}

/// A·B (transpose_b: A·Bᵀ) of two balls: |Ã|·(r_B + γ_k|B̃|) + r_A·(|B̃| + r_B).
template <class S> BallMatrix<S> times(const BallMatrix<S>& A, const BallMatrix<S>& B, bool transpose_b, long p) {
  BallMatrix<S> C;
  if (transpose_b)
    gemm_nt(A.mid, B.mid, C.mid);
  else
    gemm(A.mid, B.mid, C.mid);
  RadiusMatrix absB = abs_of(B.mid), rB = B.rad;
  if (transpose_b) {
    absB = absB.transpose();
    rB = rB.transpose();
  }
  const UpperBound g = gamma_up(A.mid.cols(), p);
  C.rad = product_up(abs_of(A.mid), rB + absB * g) + product_up(A.rad, absB + rB);
  return C;
}

/// B + 1bᵀ with b rounded to S from its double (exact at every MPFR tier).
template <class S> void add_bias(BallMatrix<S>& B, const RowVector<S>& b, long p) {
  detail::add_row(B.mid, b);
  add_rounding(B, p);
}

/// Row softmax of a ball of logits (the header's bound), masked as row_softmax.
template <class S> BallMatrix<S> softmax(const BallMatrix<S>& A, MaskKind mask, Eigen::Index window, long p) {
  const Eigen::Index n = A.mid.rows(), m = A.mid.cols();
  BallMatrix<S> P{row_softmax(A.mid, mask, window), RadiusMatrix{}};
  // Per row: ε (the computed row against the exact softmax of Ã, relative)
  // and expm1(2r) (logits moved by at most r); unset: only the radius 1 holds.
  std::vector<std::optional<std::pair<UpperBound, UpperBound>>> row(static_cast<std::size_t>(n));
  mpfr_t span;
  mpfr_init2(span, 64);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto [first, last] = detail::visible_keys(i, m, mask, window);
    UpperBound r;
    const S* mx = &A.mid(i, first);
    const S* mn = mx;
    for (Eigen::Index j = first; j < last; ++j) {
      r = max(r, A.rad.at(i, j));
      if (A.mid(i, j) > *mx) mx = &A.mid(i, j);
      if (A.mid(i, j) < *mn) mn = &A.mid(i, j);
    }
    mpfr_sub(span, mx->backend().data(), mn->backend().data(), MPFR_RNDU);
    const double D = UpperBound::abs_of(span).scaled(0);
    const double terms = mul_up(1.02, add_up(static_cast<double>(last - first) + 4.0, mul_up(2.0, D)));
    const UpperBound eps = UpperBound::of(terms) * unit(p);
    const UpperBound e2r = expm1_up(UpperBound::of(2.0) * r);
    // Beyond these the first-order bounds do not hold: a radius of 1 always does.
    if (eps <= UpperBound::pow2(-20) && e2r.is_finite()) row[static_cast<std::size_t>(i)] = std::make_pair(eps, e2r);
  }
  const UpperBound one = UpperBound::of(1.0), c102 = UpperBound::of(1.02);
  P.rad = radius_from(n, m, [&](Eigen::Index i, Eigen::Index j) {
    const auto [first, last] = detail::visible_keys(i, m, mask, window);
    if (j < first || j >= last) return UpperBound{};  // masked: exactly 0 in both
    const auto& f = row[static_cast<std::size_t>(i)];
    if (!f) return one;
    const auto& [eps, e2r] = *f;
    // With P = softmax(Ã) (exact), P̃ the computed row and P' = softmax(A):
    // |P̃ − P| ≤ 1.02·ε·P̃ (rounding), |P' − P| ≤ P·expm1(2r) and, as both rows
    // sum to 1, ≤ (1 − P)·expm1(2r) (the other entries' changes); with
    // P ≤ 1.02·P̃ and 1 − P ≤ (1 − P̃) + 1.02·ε·P̃. An underflowed P̃ = 0 stands for 1.
    const bool zero = mpfr_zero_p(P.mid(i, j).backend().data());
    const UpperBound pt = zero ? one : UpperBound::abs_of(P.mid(i, j).backend().data());
    mpfr_ui_sub(span, 1, P.mid(i, j).backend().data(), MPFR_RNDU);
    const UpperBound rest = (zero ? one : UpperBound::abs_of(span)) + c102 * eps * pt;
    const UpperBound mass = c102 * pt <= rest ? c102 * pt : rest;
    const UpperBound b = mass * e2r + c102 * eps * pt;
    return b <= one ? b : one;
  });
  mpfr_clear(span);
  return P;
}

// ---- interval arithmetic for the row-wise maps ---------------------------------
// LayerNorm, RMSNorm and the activations are evaluated on each entry's
// interval [mid − rad, mid + rad] with every MPFR operation rounded outward
// (MPFR's functions are correctly rounded in the direction asked, erf and
// tanh included), so the result interval contains the map's exact value on
// every point of the ball without any derivative bound; the ball's midpoint
// stays the forward pass's own value and its radius covers the interval.

template <class S> struct Iv {
  S lo, hi;
};

template <class S> mpfr_ptr ptr(S& x) { return x.backend().data(); }
template <class S> mpfr_srcptr ptr(const S& x) { return x.backend().data(); }

template <class S> Iv<S> iv_point(const S& x) { return {x, x}; }

template <class S> Iv<S> iv_of(const S& mid, const UpperBound& r) {
  Iv<S> v{mid, mid};
  if (r.is_zero()) return v;
  const BigReal b = r.to_big();
  mpfr_sub(ptr(v.lo), ptr(mid), b.backend().data(), MPFR_RNDD);
  mpfr_add(ptr(v.hi), ptr(mid), b.backend().data(), MPFR_RNDU);
  return v;
}

/// A decimal constant (LayerNorm's eps, 0.044715) as the interval around its exact value.
template <class S> Iv<S> iv_decimal(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);  // the decimal it was written as
  const std::string text(buf, r.ptr);
  Iv<S> v;
  mpfr_set_str(ptr(v.lo), text.c_str(), 10, MPFR_RNDD);
  mpfr_set_str(ptr(v.hi), text.c_str(), 10, MPFR_RNDU);
  return v;
}

template <class S> Iv<S> iv_add(const Iv<S>& a, const Iv<S>& b) {
  Iv<S> v;
  mpfr_add(ptr(v.lo), ptr(a.lo), ptr(b.lo), MPFR_RNDD);
  mpfr_add(ptr(v.hi), ptr(a.hi), ptr(b.hi), MPFR_RNDU);
  return v;
}

template <class S> Iv<S> iv_sub(const Iv<S>& a, const Iv<S>& b) {
  Iv<S> v;
  mpfr_sub(ptr(v.lo), ptr(a.lo), ptr(b.hi), MPFR_RNDD);
  mpfr_sub(ptr(v.hi), ptr(a.hi), ptr(b.lo), MPFR_RNDU);
  return v;
}

template <class S> Iv<S> iv_mul(const Iv<S>& a, const Iv<S>& b) {
  Iv<S> v;
  S t;
  bool first = true;
  for (const S* x : {&a.lo, &a.hi})
    for (const S* y : {&b.lo, &b.hi}) {
      mpfr_mul(ptr(t), ptr(*x), ptr(*y), MPFR_RNDD);
      if (first || t < v.lo) v.lo = t;
      mpfr_mul(ptr(t), ptr(*x), ptr(*y), MPFR_RNDU);
      if (first || t > v.hi) v.hi = t;
      first = false;
    }
  return v;
}

template <class S> Iv<S> iv_sqr(const Iv<S>& a) {
  Iv<S> v;
  if (mpfr_sgn(ptr(a.lo)) >= 0) {
    mpfr_sqr(ptr(v.lo), ptr(a.lo), MPFR_RNDD);
    mpfr_sqr(ptr(v.hi), ptr(a.hi), MPFR_RNDU);
  } else if (mpfr_sgn(ptr(a.hi)) <= 0) {
    mpfr_sqr(ptr(v.lo), ptr(a.hi), MPFR_RNDD);
    mpfr_sqr(ptr(v.hi), ptr(a.lo), MPFR_RNDU);
  } else {
    v.lo = S(0);
    S t;
    mpfr_sqr(ptr(v.hi), ptr(a.lo), MPFR_RNDU);
    mpfr_sqr(ptr(t), ptr(a.hi), MPFR_RNDU);
    if (t > v.hi) v.hi = t;
  }
  return v;
}

/// a / k for a positive integer k.
template <class S> Iv<S> iv_div_int(const Iv<S>& a, long k) {
  Iv<S> v;
  mpfr_div_si(ptr(v.lo), ptr(a.lo), k, MPFR_RNDD);
  mpfr_div_si(ptr(v.hi), ptr(a.hi), k, MPFR_RNDU);
  return v;
}

/// a / 2 (exact but where it underflows: rounded outward there).
template <class S> Iv<S> iv_half(Iv<S> a) {
  mpfr_div_2ui(ptr(a.lo), ptr(a.lo), 1, MPFR_RNDD);
  mpfr_div_2ui(ptr(a.hi), ptr(a.hi), 1, MPFR_RNDU);
  return a;
}

/// 1/√a for a > 0 (throws when a may be ≤ 0: the enclosure is void).
template <class S> Iv<S> iv_rsqrt(const Iv<S>& a) {
  if (mpfr_sgn(ptr(a.lo)) <= 0)
    throw NumericalError("certified enclosures: a normalisation's variance + eps is not bounded away from 0 at " +
                         std::to_string(precision_bits_v<S>) + " bits");
  Iv<S> v;
  mpfr_sqrt(ptr(v.hi), ptr(a.lo), MPFR_RNDD);
  mpfr_ui_div(ptr(v.hi), 1, ptr(v.hi), MPFR_RNDU);
  mpfr_sqrt(ptr(v.lo), ptr(a.hi), MPFR_RNDU);
  mpfr_ui_div(ptr(v.lo), 1, ptr(v.lo), MPFR_RNDD);
  return v;
}

/// tanh on an interval (increasing), rounded outward.
template <class S> Iv<S> iv_tanh(const Iv<S>& a) {
  Iv<S> v;
  mpfr_tanh(ptr(v.lo), ptr(a.lo), MPFR_RNDD);
  mpfr_tanh(ptr(v.hi), ptr(a.hi), MPFR_RNDU);
  return v;
}

/// The ball around `mid` covering v: radius max(hi − mid, mid − lo), rounded up.
template <class S> UpperBound radius_around(const S& mid, const Iv<S>& v) {
  mpfr_t a, b;
  mpfr_inits2(64, a, b, static_cast<mpfr_ptr>(nullptr));
  mpfr_sub(a, ptr(v.hi), ptr(mid), MPFR_RNDU);
  mpfr_sub(b, ptr(mid), ptr(v.lo), MPFR_RNDU);
  if (mpfr_cmp(b, a) > 0) mpfr_set(a, b, MPFR_RNDU);
  if (mpfr_sgn(a) < 0) mpfr_set_zero(a, 1);
  const UpperBound r = UpperBound::abs_of(a);
  mpfr_clears(a, b, static_cast<mpfr_ptr>(nullptr));
  return r;
}

/// LayerNorm (rms: RMSNorm, with gain 1 + g when unit_offset) of one row of
/// intervals, in place: the interval of every output entry over the box.
template <class S>
void normalize_row(std::vector<Iv<S>>& c, const VectorXd& gain, const VectorXd& bias, double eps, bool rms,
                   bool unit_offset) {
  const auto d = static_cast<long>(c.size());
  if (!rms) {
    Iv<S> mean = iv_point(S(0));
    for (const Iv<S>& cj : c) mean = iv_add(mean, cj);
    mean = iv_div_int(mean, d);
    for (Iv<S>& cj : c) cj = iv_sub(cj, mean);
  }
  Iv<S> var = iv_point(S(0));
  for (const Iv<S>& cj : c) var = iv_add(var, iv_sqr(cj));
  const Iv<S> inv = iv_rsqrt(iv_add(iv_div_int(var, d), iv_decimal<S>(eps)));
  for (long j = 0; j < d; ++j) {
    Iv<S> g = iv_point(S(gain(j)));
    if (unit_offset) g = iv_add(iv_point(S(1)), g);
    c[static_cast<std::size_t>(j)] =
        iv_add(iv_mul(iv_mul(c[static_cast<std::size_t>(j)], inv), g), iv_point(S(bias(j))));
  }
}

/// A ball around `mid` (n × d) covering the intervals row_interval(i) gives for each row.
template <class S, class F> BallMatrix<S> ball_around(Matrix<S> mid, F&& row_interval) {
  const Eigen::Index n = mid.rows(), d = mid.cols();
  std::vector<UpperBound> rad(static_cast<std::size_t>(n * d));
  detail::run_blocks(static_cast<std::size_t>(n), n * d >= 4096 ? product_threads() : 1, [&](std::size_t iu) {
    check_interrupt();
    const auto i = static_cast<Eigen::Index>(iu);
    const std::vector<Iv<S>> y = row_interval(i);
    for (Eigen::Index j = 0; j < d; ++j)
      rad[static_cast<std::size_t>(j * n + i)] = radius_around(mid(i, j), y[static_cast<std::size_t>(j)]);
  });
  BallMatrix<S> B{std::move(mid), RadiusMatrix{}};
  B.rad = radius_from(n, d, [&](Eigen::Index i, Eigen::Index j) { return rad[static_cast<std::size_t>(j * n + i)]; });
  return B;
}

/// LayerNorm or RMSNorm of every row of a ball, math.md §2 and §8, its
/// midpoint as layer_norm / rms_norm compute it.
template <class S>
BallMatrix<S> normalize(const BallMatrix<S>& X, const VectorXd& gain, const VectorXd& bias, double eps, bool rms,
                        bool unit_offset) {
  return ball_around(rms ? rms_norm(X.mid, gain, bias, eps, unit_offset) : layer_norm(X.mid, gain, bias, eps),
                     [&](Eigen::Index i) {
                       std::vector<Iv<S>> c(static_cast<std::size_t>(X.mid.cols()));
                       for (Eigen::Index j = 0; j < X.mid.cols(); ++j)
                         c[static_cast<std::size_t>(j)] = iv_of(X.mid(i, j), X.rad.at(i, j));
                       normalize_row(c, gain, bias, eps, rms, unit_offset);
                       return c;
                     });
}

/// The upper end y.hi of f over a = [lo, hi] for an increasing f with slope
/// ≤ `slope`, given y.lo = f(a.lo) rounded down: where a is a few units wide
/// (the point arguments of the centred MLP), the bound f(a.lo) + slope·(hi − lo)
/// ≤ succ(y.lo) + slope·(hi − lo), which spares a second evaluation of f;
/// otherwise upper(y.hi, a.hi), f rounded up.
template <class S, class F> void increasing_upper(Iv<S>& y, const Iv<S>& a, double slope, F&& upper) {
  S width;
  mpfr_sub(ptr(width), ptr(a.hi), ptr(a.lo), MPFR_RNDU);
  const long p = precision_bits_v<S>;
  const bool narrow = mpfr_zero_p(ptr(width)) ||
                      (mpfr_regular_p(ptr(a.lo)) && mpfr_get_exp(ptr(width)) <= mpfr_get_exp(ptr(a.lo)) - (p - 16));
  if (!narrow || !mpfr_number_p(ptr(y.lo))) {
    upper(ptr(y.hi), ptr(a.hi));
    return;
  }
  mpfr_mul_d(ptr(width), ptr(width), slope, MPFR_RNDU);
  y.hi = y.lo;
  mpfr_nextabove(ptr(y.hi));
  mpfr_add(ptr(y.hi), ptr(y.hi), ptr(width), MPFR_RNDU);
}

/// 1/√2 rounded outward (GELU's x/√2).
template <class S> Iv<S> iv_inverse_sqrt2() {
  Iv<S> s;
  mpfr_sqrt_ui(ptr(s.lo), 2, MPFR_RNDU);
  mpfr_ui_div(ptr(s.lo), 1, ptr(s.lo), MPFR_RNDD);
  mpfr_sqrt_ui(ptr(s.hi), 2, MPFR_RNDD);
  mpfr_ui_div(ptr(s.hi), 1, ptr(s.hi), MPFR_RNDU);
  return s;
}

/// The tanh GELUs' c: √(2/π) (gelu_tanh), rounded outward, or the decimal
/// 0.7978845608 (gelu_fast).
template <class S> Iv<S> iv_tanh_gelu_scale(Activation act) {
  if (act == Activation::gelu_fast) return iv_decimal<S>(0.7978845608);
  Iv<S> c;
  mpfr_const_pi(ptr(c.hi), MPFR_RNDD);
  mpfr_ui_div(ptr(c.hi), 2, ptr(c.hi), MPFR_RNDU);
  mpfr_sqrt(ptr(c.hi), ptr(c.hi), MPFR_RNDU);
  mpfr_const_pi(ptr(c.lo), MPFR_RNDU);
  mpfr_ui_div(ptr(c.lo), 2, ptr(c.lo), MPFR_RNDD);
  mpfr_sqrt(ptr(c.lo), ptr(c.lo), MPFR_RNDD);
  return c;
}

/// act(x) on an interval (math.md §2: relu, gelu = x·Φ(x), gelu_tanh and
/// gelu_fast = ½x(1 + tanh(c(x + 0.044715x³))), silu = x·σ(x)).
template <class S> Iv<S> iv_activate(const Iv<S>& x, Activation act) {
  Iv<S> v;
  switch (act) {
    case Activation::relu:
      v.lo = x.lo > 0 ? x.lo : S(0);
      v.hi = x.hi > 0 ? x.hi : S(0);
      return v;
    case Activation::gelu: {
      const Iv<S> a = iv_mul(x, iv_inverse_sqrt2<S>());
      Iv<S> e;  // erf is increasing, with slope ≤ 2/√π < 1.1284
      mpfr_erf(ptr(e.lo), ptr(a.lo), MPFR_RNDD);
      increasing_upper(e, a, 1.1284, [](mpfr_ptr y, mpfr_srcptr v) { mpfr_erf(y, v, MPFR_RNDU); });
      return iv_half(iv_mul(x, iv_add(iv_point(S(1)), e)));
    }
    case Activation::gelu_tanh:
    case Activation::gelu_fast: {
      const Iv<S> c = iv_tanh_gelu_scale<S>(act);
      const Iv<S> cube = iv_mul(x, iv_sqr(x));
      const Iv<S> a = iv_mul(c, iv_add(x, iv_mul(iv_decimal<S>(0.044715), cube)));
      Iv<S> t;  // tanh is increasing, with slope ≤ 1
      mpfr_tanh(ptr(t.lo), ptr(a.lo), MPFR_RNDD);
      increasing_upper(t, a, 1.0, [](mpfr_ptr y, mpfr_srcptr v) { mpfr_tanh(y, v, MPFR_RNDU); });
      return iv_half(iv_mul(x, iv_add(iv_point(S(1)), t)));
    }
    case Activation::silu: {
      Iv<S> sg;  // σ(x) = 1/(1 + e^{−x}) is increasing
      S t;
      mpfr_neg(ptr(t), ptr(x.lo), MPFR_RNDN);  // exact
      mpfr_exp(ptr(t), ptr(t), MPFR_RNDU);
      mpfr_add_ui(ptr(t), ptr(t), 1, MPFR_RNDU);
      mpfr_ui_div(ptr(sg.lo), 1, ptr(t), MPFR_RNDD);
      mpfr_neg(ptr(t), ptr(x.hi), MPFR_RNDN);
      mpfr_exp(ptr(t), ptr(t), MPFR_RNDD);
      mpfr_add_ui(ptr(t), ptr(t), 1, MPFR_RNDD);
      mpfr_ui_div(ptr(sg.hi), 1, ptr(t), MPFR_RNDU);
      return iv_mul(x, sg);
    }
  }
  throw std::logic_error("iv_activate: unknown activation");
}

// ---- positions: rotary angles, T5's bucket bias, Gemma 2's soft cap ---------------

/// θ^(−2i/r) for θ ≥ 1 (`base`, enclosed), rounded outward: the exponent
/// −2i/r ≤ 0 enclosed first; the power rises with it and falls with θ.
template <class S> Iv<S> inverse_frequency(const Iv<S>& base, long i, long r) {
  if (mpfr_cmp_ui(ptr(base.lo), 1) < 0)
    throw std::invalid_argument("certified enclosures: a position base below 1 is not enclosed");
  Iv<S> e, f;
  mpfr_set_si(ptr(e.lo), -2 * i, MPFR_RNDN);  // exact
  mpfr_div_si(ptr(e.hi), ptr(e.lo), r, MPFR_RNDU);
  mpfr_div_si(ptr(e.lo), ptr(e.lo), r, MPFR_RNDD);
  mpfr_pow(ptr(f.lo), ptr(base.hi), ptr(e.lo), MPFR_RNDD);
  mpfr_pow(ptr(f.hi), ptr(base.lo), ptr(e.hi), MPFR_RNDU);
  return f;
}

/// The radii of computed cos and sin values (`c`, `s`) of the angle q·f
/// (q an integer of either sign, f in `freq`): the angle enclosed in
/// directed rounding, then cos and sin at one end, widened by the angle's
/// width (both are 1-Lipschitz).
template <class S> std::pair<UpperBound, UpperBound> angle_radii(const Iv<S>& freq, long q, const S& c, const S& s) {
  Iv<S> angle, cv, sv;
  S t, width;
  mpfr_mul_si(ptr(angle.lo), ptr(freq.lo), q, MPFR_RNDD);
  mpfr_mul_si(ptr(t), ptr(freq.hi), q, MPFR_RNDD);
  if (t < angle.lo) angle.lo = t;
  mpfr_mul_si(ptr(angle.hi), ptr(freq.hi), q, MPFR_RNDU);
  mpfr_mul_si(ptr(t), ptr(freq.lo), q, MPFR_RNDU);
  if (t > angle.hi) angle.hi = t;
  mpfr_sub(ptr(width), ptr(angle.hi), ptr(angle.lo), MPFR_RNDU);
  mpfr_cos(ptr(cv.lo), ptr(angle.lo), MPFR_RNDD);
  mpfr_sub(ptr(cv.lo), ptr(cv.lo), ptr(width), MPFR_RNDD);
  mpfr_cos(ptr(cv.hi), ptr(angle.lo), MPFR_RNDU);
  mpfr_add(ptr(cv.hi), ptr(cv.hi), ptr(width), MPFR_RNDU);
  mpfr_sin(ptr(sv.lo), ptr(angle.lo), MPFR_RNDD);
  mpfr_sub(ptr(sv.lo), ptr(sv.lo), ptr(width), MPFR_RNDD);
  mpfr_sin(ptr(sv.hi), ptr(angle.lo), MPFR_RNDU);
  mpfr_add(ptr(sv.hi), ptr(sv.hi), ptr(width), MPFR_RNDU);
  return {radius_around(c, cv), radius_around(s, sv)};
}

/// rotary_table() as balls: each midpoint the forward pass's own cos or sin,
/// each radius covering cos and sin of the exact angle p·θ^(−2i/r)/f (θ and
/// the linear factor f the config's decimals).
template <class S> struct BallRotary {
  RotaryTable<S> mid;
  RadiusMatrix rcos, rsin;
};

template <class S>
BallRotary<S> rotary_enclosed(Eigen::Index n, int r, double theta, double linear_factor = 1.0) {
  BallRotary<S> t{rotary_table<S>(n, r, theta, linear_factor), {}, {}};  // throws for an odd r
  const Eigen::Index half = r / 2;
  const Iv<S> base = iv_decimal<S>(theta);
  // 1/f for the linear factor f (its decimal, enclosed), outward.
  std::optional<Iv<S>> inverse_factor;
  if (linear_factor != 1.0) {
    const Iv<S> f = iv_decimal<S>(linear_factor);
    if (mpfr_sgn(ptr(f.lo)) <= 0) throw std::invalid_argument("certified enclosures: a rotary factor ≤ 0 is not enclosed");
    inverse_factor.emplace();
    mpfr_ui_div(ptr(inverse_factor->lo), 1, ptr(f.hi), MPFR_RNDD);
    mpfr_ui_div(ptr(inverse_factor->hi), 1, ptr(f.lo), MPFR_RNDU);
  }
  std::vector<UpperBound> rc(static_cast<std::size_t>(n * half)), rs(rc.size());
  for (Eigen::Index i = 0; i < half; ++i) {
    Iv<S> freq = inverse_frequency(base, static_cast<long>(i), r);
    if (inverse_factor) freq = iv_mul(freq, *inverse_factor);
    for (Eigen::Index q = 0; q < n; ++q) {
      const auto k = static_cast<std::size_t>(i * n + q);
      std::tie(rc[k], rs[k]) = angle_radii(freq, static_cast<long>(q), t.mid.cos(q, i), t.mid.sin(q, i));
    }
  }
  t.rcos = radius_from(n, half, [&](Eigen::Index q, Eigen::Index i) { return rc[static_cast<std::size_t>(i * n + q)]; });
  t.rsin = radius_from(n, half, [&](Eigen::Index q, Eigen::Index i) { return rs[static_cast<std::size_t>(i * n + q)]; });
  return t;
}

/// xlnet_sinusoid() as a ball: row r ↔ p = r − (n − 1) (clamped), the sines
/// of p·10000^(−2k/d) then the cosines, each radius covering the exact value.
template <class S> BallMatrix<S> xlnet_sinusoid_enclosed(Eigen::Index n, int d, int clamp_len) {
  BallMatrix<S> R{xlnet_sinusoid<S>(n, d, clamp_len), RadiusMatrix{}};  // throws for an odd d
  const Eigen::Index half = d / 2, rows = R.mid.rows();
  const Iv<S> base = iv_point(S(10000));
  std::vector<UpperBound> rad(static_cast<std::size_t>(rows * d));
  for (Eigen::Index k = 0; k < half; ++k) {
    const Iv<S> freq = inverse_frequency(base, static_cast<long>(k), d);
    for (Eigen::Index r = 0; r < rows; ++r) {
      Eigen::Index q = r - (n - 1);
      if (clamp_len > 0) q = std::max<Eigen::Index>(-clamp_len, std::min<Eigen::Index>(clamp_len, q));
      std::tie(rad[static_cast<std::size_t>((half + k) * rows + r)], rad[static_cast<std::size_t>(k * rows + r)]) =
          angle_radii(freq, static_cast<long>(q), R.mid(r, half + k), R.mid(r, k));
    }
  }
  R.rad = radius_from(rows, d, [&](Eigen::Index r, Eigen::Index j) { return rad[static_cast<std::size_t>(j * rows + r)]; });
  return R;
}

/// Rotates the first 2·half columns of every head block (`heads` blocks of
/// `width` columns) as apply_rotary does, on a ball: the pair (x, y) of a row
/// becomes x·c − y·s (and y·c + x·s), whose exact value moves from the
/// computed one by at most r_x(|c̃| + r_c) + |x̃|r_c + r_y(|s̃| + r_s) + |ỹ|r_s
/// plus the three roundings, u·(|x̃c̃| + |ỹs̃| + |result|). `own`, where
/// given, receives the last two parts alone: the rotation's own error at
/// the midpoint (the centred balls' row bounds, enclosure_centred_impl.hpp).
template <class S>
void rotate_heads(BallMatrix<S>& M, const BallRotary<S>& t, Eigen::Index heads, Eigen::Index width, long p,
                  RadiusMatrix* own = nullptr) {
  const Eigen::Index n = M.mid.rows(), half = t.mid.cos.cols();
  const Matrix<S> before = M.mid;
  const RadiusMatrix r0 = M.rad;
  for (Eigen::Index h = 0; h < heads; ++h) apply_rotary(M.mid, t.mid, h * width);
  const UpperBound u = unit(p);
  const auto abs = [](const S& x) { return UpperBound::abs_of(x.backend().data()); };
  std::vector<UpperBound> own_part(own ? static_cast<std::size_t>(n * M.mid.cols()) : 0);
  M.rad = radius_from(n, M.mid.cols(), [&](Eigen::Index i, Eigen::Index j) {
    const Eigen::Index h = j / width, k = j % width;
    if (k >= 2 * half) return r0.at(i, j);  // partial rotary: not rotated
    const bool first = k < half;
    const Eigen::Index pair = first ? k : k - half;
    const Eigen::Index jx = h * width + (first ? pair : pair + half), jy = h * width + (first ? pair + half : pair);
    const UpperBound ax = abs(before(i, jx)), ay = abs(before(i, jy));
    const UpperBound c = abs(t.mid.cos(i, pair)), s = abs(t.mid.sin(i, pair));
    const UpperBound rc = t.rcos.at(i, pair), rs = t.rsin.at(i, pair);
    const UpperBound mine = ax * rc + ay * rs + u * (ax * c + ay * s + abs(M.mid(i, j)));
    if (own) own_part[static_cast<std::size_t>(j * n + i)] = mine;
    return r0.at(i, jx) * (c + rc) + r0.at(i, jy) * (s + rs) + mine;
  });
  if (own)
    *own = radius_from(n, M.mid.cols(),
                       [&](Eigen::Index i, Eigen::Index j) { return own_part[static_cast<std::size_t>(j * n + i)]; });
}

/// What a pass encloses once from n and shares with every layer (as PositionTables).
template <class S> struct BallPositions {
  Eigen::Index n = 0;  ///< the tokens
  std::vector<BallRotary<S>> rotary;   ///< rotary models: one per distinct (base, factor), detail::rotary_plan
  std::vector<std::size_t> rotary_of;  ///< layer l's table
  std::optional<BallMatrix<S>> sinusoid;  ///< XLNet: (2n − 1) × d
  const BallRotary<S>& rotary_at(int l) const { return rotary.at(rotary_of.at(static_cast<std::size_t>(l))); }
  static BallPositions make(const Architecture& a, Eigen::Index n) {
    BallPositions t;
    t.n = n;
    const detail::RotaryPlan plan = detail::rotary_plan(a);
    for (const Architecture::LayerRotary& r : plan.tables)
      t.rotary.push_back(rotary_enclosed<S>(n, a.rotated_dims(), r.theta, r.linear_factor));
    t.rotary_of = plan.of_layer;
    if (a.xlnet_relative) t.sinusoid = xlnet_sinusoid_enclosed<S>(n, a.d_model, a.clamp_len);
    return t;
  }
};

/// c·tanh(A/c) on a ball of logits (Gemma 2): the midpoint as attention()
/// computes it, the radius covering the interval (tanh is increasing).
template <class S> void soft_cap(BallMatrix<S>& A, double softcap) {
  using std::tanh;
  const Eigen::Index n = A.mid.rows(), m = A.mid.cols();
  const S cap = decimal_constant<S>(softcap);
  const Iv<S> c = iv_decimal<S>(softcap);
  if (mpfr_sgn(ptr(c.lo)) <= 0) throw std::invalid_argument("certified enclosures: a soft cap ≤ 0 is not enclosed");
  Iv<S> inv;
  mpfr_ui_div(ptr(inv.lo), 1, ptr(c.hi), MPFR_RNDD);
  mpfr_ui_div(ptr(inv.hi), 1, ptr(c.lo), MPFR_RNDU);
  std::vector<UpperBound> rad(static_cast<std::size_t>(n * m));
  for (Eigen::Index j = 0; j < m; ++j)
    for (Eigen::Index i = 0; i < n; ++i) {
      const Iv<S> x = iv_tanh(iv_mul(iv_of(A.mid(i, j), A.rad.at(i, j)), inv));
      A.mid(i, j) = cap * S(tanh(S(A.mid(i, j) / cap)));
      rad[static_cast<std::size_t>(j * n + i)] = radius_around(A.mid(i, j), iv_mul(c, x));
    }
  A.rad = radius_from(n, m, [&](Eigen::Index i, Eigen::Index j) { return rad[static_cast<std::size_t>(j * n + i)]; });
}

/// A + XLNet's relative term (families.md): logit (i, j) gains column
/// relative_column(i, j, n) of B (n × (2n − 1)), each sum rounded once.
template <class S> void add_relative(BallMatrix<S>& A, const BallMatrix<S>& B, long p) {
  const Eigen::Index n = A.mid.rows();
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < n; ++i) A.mid(i, j) += B.mid(i, detail::relative_column(i, j, n));
  const RadiusMatrix rA = A.rad;
  A.rad = radius_from(n, n, [&](Eigen::Index i, Eigen::Index j) {
    return rA.at(i, j) + B.rad.at(i, detail::relative_column(i, j, n));
  });
  add_rounding(A, p);
}

/// A + T5's bucket bias of head h (families.md; the table's doubles are exact), each sum rounded once.
template <class S>
void add_bucket_bias(BallMatrix<S>& A, const Architecture& a, const MatrixXd& table, Eigen::Index h, long p) {
  const Eigen::Index n = A.mid.rows();
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < n; ++i) A.mid(i, j) += S(detail::bucket_bias(a, table, i, j, h));
  add_rounding(A, p);
}

/// A times the score scale s (math.md §1, families.md): |s − s̃| ≤ 4u·s̃ (a
/// decimal, a square root and a quotient, each rounded once), so
/// |A s − RN(Ã s̃)| ≤ r_A·s̃(1 + 8u) + 8u·|result|.
template <class S> void scale_scores(BallMatrix<S>& A, const Architecture& a, long p) {
  const S scale = detail::score_scale<S>(a);
  const UpperBound s_up =
      UpperBound::abs_of(scale.backend().data()) * (UpperBound::of(1.0) + UpperBound::of(8.0) * unit(p));
  A.mid *= scale;
  A.rad = A.rad * s_up;
  add_rounding(A, p, 8.0);
}

/// X + Y, rounded once per entry.
template <class S> BallMatrix<S> sum(const BallMatrix<S>& X, const BallMatrix<S>& Y, long p) {
  BallMatrix<S> Z{X.mid + Y.mid, X.rad + Y.rad};
  add_rounding(Z, p);
  return Z;
}


/// The ball arithmetic for detail::layer_map, detail::attention and
/// detail::mlp (compute/layer_impl.hpp) over one layer's packed weights
/// (`w` the attention's, `mlp_w` the MLP's: the same but in a path's
/// sub-network), each operation enclosed at p bits, its midpoint the
/// direct pass's value.
template <class S> struct BallLayer {
  using Value = BallMatrix<S>;
  const Architecture& a;
  const detail::PackedLayer<S>& w;
  const detail::PackedLayer<S>& mlp_w;
  const LayerWeights& lw;
  const BallPositions<S>& pos;
  int layer;  ///< from 0: its rotary table
  MaskKind mask;
  Eigen::Index window;
  long p;
  std::vector<BallMatrix<S>>* record_to;  ///< the heads' attention balls, when set

  Value attention(const Value& X) { return detail::attention(*this, a, X); }
  Value mlp(const Value& Z) { return detail::mlp(*this, lw.gated(), Z); }
  Value norm(const Value& X, detail::NormAt at) const {
    const auto [g, b] = detail::norm_parameters(lw, at);
    const detail::NormForm f = detail::norm_form(a, at);
    return normalize(X, *g, b ? *b : VectorXd::Zero(g->size()).eval(), f.eps, f.kind == NormKind::rms, f.unit_offset);
  }
  void add(Value& Y, const Value& X) const { Y = sum(Y, X, p); }

  Value project(const Value& X, detail::Projection which) const {
    BallMatrix<S> out = times_weights(X, detail::weights_of(w, lw, which), p);
    if (const RowVector<S>* b = detail::bias_of(w, mlp_w, which)) add_bias(out, *b, p);
    return out;
  }
  void rotate(Value& M) const { rotate_heads(M, pos.rotary_at(layer), a.heads, a.d_qk, p); }
  /// Q + 1 rᵀ, each sum rounded once.
  Value offset(const Value& Q, detail::QueryOffset o) const {
    const RowVector<S>& r = o == detail::QueryOffset::content ? w.rw : w.rr;
    Value out = Q;
    detail::add_row(out.mid, r);
    add_rounding(out, p);
    return out;
  }
  Value relative_keys() const {
    if (!pos.sinusoid || pos.sinusoid->mid.rows() != 2 * pos.n - 1)
      throw std::logic_error("attention: XLNet's sinusoid table is missing or of another length");
    return times_weights(*pos.sinusoid, w.WR, p);
  }
  static Value columns(const Value& M, Eigen::Index first, Eigen::Index count) {
    return enclosure_detail::columns(M, first, count);
  }
  Value times_nt(const Value& A, const Value& B) const { return enclosure_detail::times(A, B, true, p); }
  Value times(const Value& A, const Value& B) const { return enclosure_detail::times(A, B, false, p); }
  /// The logits (+ XLNet's relative term from B, + T5's exact bucket bias,
  /// each sum rounded once), scaled, soft-capped, then the row softmax.
  Value weights(Value A, const Value* B, Eigen::Index h) const {
    if (B) add_relative(A, *B, p);
    if (a.rel_buckets > 0) add_bucket_bias(A, a, w.pos_bias, h, p);
    scale_scores(A, a, p);
    if (a.softcap) soft_cap(A, *a.softcap);
    return softmax(A, mask, window, p);
  }
  /// Blocks of `width` columns side by side under one radius (radius_from picks the common exponent).
  static Value side_by_side(std::vector<Value>& blocks, Eigen::Index width) {
    const Eigen::Index n = blocks.front().mid.rows(), m = static_cast<Eigen::Index>(blocks.size()) * width;
    Value out{Matrix<S>(n, m), RadiusMatrix{}};
    for (std::size_t k = 0; k < blocks.size(); ++k)
      out.mid.middleCols(static_cast<Eigen::Index>(k) * width, width) = blocks[k].mid;
    out.rad = radius_from(n, m, [&](Eigen::Index i, Eigen::Index j) {
      return blocks[static_cast<std::size_t>(j / width)].rad.at(i, j % width);
    });
    return out;
  }
  bool recording() const { return record_to != nullptr; }
  void record(std::vector<Value>& Ps) const { *record_to = std::move(Ps); }
  /// Heads side by side, as the direct pass runs them (each head's products then serial).
  template <class F> void for_heads(Eigen::Index H, F&& f) const {
    detail::run_blocks(static_cast<std::size_t>(H), product_threads(), [&](std::size_t h) {
      check_interrupt();
      f(static_cast<Eigen::Index>(h));
    });
  }
  /// act on every entry: the midpoint the direct pass's, the radius covering act over the entry's interval.
  void activate(Value& Hid) const {
    const Eigen::Index n = Hid.mid.rows(), m = Hid.mid.cols();
    std::vector<UpperBound> rad(static_cast<std::size_t>(n * m));
    detail::for_each_entry<S>(n, m, [&](Eigen::Index i, Eigen::Index j) {
      const Iv<S> y = iv_activate(iv_of(Hid.mid(i, j), Hid.rad.at(i, j)), a.activation);
      Hid.mid(i, j) = sanpath::activate(Hid.mid(i, j), a.activation);
      rad[static_cast<std::size_t>(j * n + i)] = radius_around(Hid.mid(i, j), y);
    });
    Hid.rad = radius_from(n, m, [&](Eigen::Index i, Eigen::Index j) { return rad[static_cast<std::size_t>(j * n + i)]; });
  }
  /// Hid ← act(G) ∘ Hid likewise.
  void gate(Value& Hid, const Value& G) const {
    const Eigen::Index n = Hid.mid.rows(), m = Hid.mid.cols();
    std::vector<UpperBound> rad(static_cast<std::size_t>(n * m));
    detail::for_each_entry<S>(n, m, [&](Eigen::Index i, Eigen::Index j) {
      const Iv<S> y = iv_mul(iv_activate(iv_of(G.mid(i, j), G.rad.at(i, j)), a.activation),
                             iv_of(Hid.mid(i, j), Hid.rad.at(i, j)));
      Hid.mid(i, j) *= sanpath::activate(G.mid(i, j), a.activation);  // the direct pass's value
      rad[static_cast<std::size_t>(j * n + i)] = radius_around(Hid.mid(i, j), y);
    });
    Hid.rad = radius_from(n, m, [&](Eigen::Index i, Eigen::Index j) { return rad[static_cast<std::size_t>(j * n + i)]; });
  }
};

/// One layer of `variant` (detail::layer_map in the ball arithmetic).
template <class S>
BallMatrix<S> layer_map(const Architecture& a, const Variant& variant, const detail::PackedLayer<S>& w,
                        const LayerWeights& lw, const BallMatrix<S>& X, Eigen::Index window,
                        const BallPositions<S>& pos, int layer, long p, std::vector<BallMatrix<S>>* record = nullptr) {
  BallLayer<S> ar{a, w, w, lw, pos, layer, variant.mask, window, p, record};
  return detail::layer_map(ar, a, variant, X);
}

/// Directed norms of an MPFR matrix M, or of M − 1cᵀ for a centre c (round
/// toward `rnd` at every step: |M_ij − c_j| is formed as the difference of
/// the larger and the smaller, rounded toward `rnd`).
template <class S>
BigReal directed_norm(const Matrix<S>& M, char which, mpfr_rnd_t rnd, const RowVector<S>* c = nullptr) {
  const long p = precision_bits_v<S>;
  BigReal out(0, decimal_digits(p) + 2);
  mpfr_ptr r = out.backend().data();
  mpfr_set_zero(r, 1);
  mpfr_t s, t;
  mpfr_init2(s, p);
  mpfr_init2(t, p);
  const auto abs_entry = [&](Eigen::Index i, Eigen::Index j) {
    mpfr_srcptr m = M(i, j).backend().data();
    if (!c) {
      mpfr_abs(t, m, MPFR_RNDN);  // exact
      return;
    }
    mpfr_srcptr cj = (*c)(j).backend().data();
    if (mpfr_cmp(m, cj) >= 0)
      mpfr_sub(t, m, cj, rnd);
    else
      mpfr_sub(t, cj, m, rnd);
  };
  if (which == 'F') {
    mpfr_set_zero(s, 1);
    for (Eigen::Index j = 0; j < M.cols(); ++j)
      for (Eigen::Index i = 0; i < M.rows(); ++i) {
        abs_entry(i, j);
        mpfr_sqr(t, t, rnd);
        mpfr_add(s, s, t, rnd);
      }
    mpfr_sqrt(r, s, rnd);
  } else {
    const bool by_cols = which == '1';
    const Eigen::Index outer = by_cols ? M.cols() : M.rows(), inner = by_cols ? M.rows() : M.cols();
    for (Eigen::Index o = 0; o < outer; ++o) {
      mpfr_set_zero(s, 1);
      for (Eigen::Index k = 0; k < inner; ++k) {
        if (by_cols)
          abs_entry(k, o);
        else
          abs_entry(o, k);
        mpfr_add(s, s, t, rnd);
      }
      if (mpfr_cmp(s, r) > 0) mpfr_set(r, s, rnd);
    }
  }
  mpfr_clear(s);
  mpfr_clear(t);
  return out;
}

/// [lo − ρ, hi + ρ] ∩ [0, ∞), rounded outward: the enclosure of a non-negative
/// quantity that moves by at most ρ.
inline Interval widened(Interval v, const UpperBound& rho) {
  const BigReal r = rho.to_big();
  mpfr_sub(v.lo.backend().data(), v.lo.backend().data(), r.backend().data(), MPFR_RNDD);
  if (mpfr_sgn(v.lo.backend().data()) < 0) mpfr_set_zero(v.lo.backend().data(), 1);
  mpfr_add(v.hi.backend().data(), v.hi.backend().data(), r.backend().data(), MPFR_RNDU);
  return v;
}

/// [N_down(M̃) − ρ, N_up(M̃) + ρ] ∩ [0, ∞) for a norm N and ‖M − M̃‖ ≤ ρ
/// (of M − 1cᵀ and M̃ − 1cᵀ with a centre c: the same ρ bounds their difference).
template <class S>
Interval norm_interval(const Matrix<S>& mid, char which, const UpperBound& rho, const RowVector<S>* c = nullptr) {
  return widened({directed_norm(mid, which, MPFR_RNDD, c), directed_norm(mid, which, MPFR_RNDU, c)}, rho);
}

/// √(a·b) of two norm intervals, rounded outward.
inline Interval composite(const Interval& one, const Interval& inf) {
  Interval v = one;
  mpfr_mul(v.lo.backend().data(), one.lo.backend().data(), inf.lo.backend().data(), MPFR_RNDD);
  mpfr_sqrt(v.lo.backend().data(), v.lo.backend().data(), MPFR_RNDD);
  mpfr_mul(v.hi.backend().data(), one.hi.backend().data(), inf.hi.backend().data(), MPFR_RNDU);
  mpfr_sqrt(v.hi.backend().data(), v.hi.backend().data(), MPFR_RNDU);
  return v;
}

/// Removes the column means of M in place (mid and radius) and returns
/// them as a ball: for the exact M in the ball, its exact column means lie in
/// the returned ball and its exact centred rows in M's new ball:
///   mean: mean(r_M) + (2n + 8)·u·max_i|M̃_ij| (the computed mean: n terms);
///   rows: r_M + the mean's radius + u·|result| (the subtraction).
/// (2n + 8)·u·max_i|M̃_ij|: the rounding of the computed column means of M̃ (1×d).
template <class S> RadiusMatrix mean_rounding(const Matrix<S>& M, long p) {
  const Eigen::Index n = M.rows(), d = M.cols();
  const RadiusMatrix absM = abs_of(M);
  RadiusMatrix col_max{MatrixXd(1, d), absM.exp};
  for (Eigen::Index j = 0; j < d; ++j) col_max.m(0, j) = n > 0 ? absM.m.col(j).maxCoeff() : 0.0;
  return col_max * (UpperBound::of(2.0 * static_cast<double>(n) + 8.0) * unit(p));
}

template <class S> BallMatrix<S> take_mean(BallMatrix<S>& M, long p) {
  const Eigen::Index n = M.mid.rows();
  BallMatrix<S> mean{column_means(M.mid), RadiusMatrix{}};
  mean.rad = column_means_up(M.rad) + mean_rounding(M.mid, p);
  M.mid = residual(M.mid, RowVector<S>(mean.mid));
  M.rad = M.rad + RadiusMatrix{mean.rad.m.replicate(n, 1), mean.rad.exp};
  add_rounding(M, p);
  return mean;
}

/// The optimal-centre residual of the exact X whose residual about some
/// centre R encloses (ResidualEnclosure, Center::optimal): the norms of
/// R − 1c*ᵀ at optimal_residual's best centre c* of the midpoint, and the
/// lower end √(min_c‖·‖₁ · L_∞): min_c‖R̃ − 1cᵀ‖₁ exactly at the column
/// medians (a minimiser, math.md §3) in directed rounding, and
/// L_∞ = optimal_residual's min_inf.lower, a weak-duality bound already
/// shrunk by (n + d + 8)ε for its own rounding (so the value it bounds,
/// evaluated exactly, is at most (1 + 4(n + d + 8)ε) times it); each widened
/// by ‖R − R̃‖ in its norm.
/// Bounds of ‖M − M̃‖ in the 1-, ∞- and Frobenius norms from an entrywise
/// radius, tightened by bounds of its rows' Euclidean norms where given
/// (rows, n×1): Σ_j|Δ_ij| ≤ √d‖Δ_i‖₂ and ‖Δ‖_F = ‖(‖Δ_i‖₂)_i‖₂.
struct RadiusNorms {
  UpperBound one, inf, frobenius;
};
inline RadiusNorms radius_norms(const RadiusMatrix& rad, const RadiusMatrix* rows) {
  RadiusNorms r{norm_1_up(rad), norm_inf_up(rad), frobenius_up(rad)};
  if (rows == nullptr || rows->m.size() == 0) return r;
  const UpperBound root_d = sqrt_up(UpperBound::of(static_cast<double>(rad.cols())));
  const UpperBound inf = root_d * rows->max_entry(), frobenius = frobenius_up(*rows);
  if (inf <= r.inf) r.inf = inf;
  if (frobenius <= r.frobenius) r.frobenius = frobenius;
  return r;
}

template <class S> void optimal_centre_norms(const BallMatrix<S>& R, const RadiusMatrix* R_rows, ResidualEnclosure& e) {
  const RadiusNorms rho = radius_norms(R.rad, R_rows);
  const UpperBound rho_one = rho.one, rho_inf = rho.inf;
  const OptimalResidual<S> best = optimal_residual(R.mid);
  e.res_one = norm_interval(R.mid, '1', rho_one, &best.best_center);
  e.res_inf = norm_interval(R.mid, 'I', rho_inf, &best.best_center);
  e.res_frobenius = norm_interval(R.mid, 'F', rho.frobenius, &best.best_center);
  e.res_composite = composite(e.res_one, e.res_inf);

  const RowVector<S> medians = column_medians(R.mid);
  const Interval min_one = norm_interval(R.mid, '1', rho_one, &medians);
  const long p = precision_bits_v<S>;
  const Eigen::Index n = R.mid.rows(), d = R.mid.cols();
  Interval dual{BigReal(0, decimal_digits(p) + 2), BigReal(0, decimal_digits(p) + 2)};
  mpfr_set(dual.lo.backend().data(), best.min_inf.lower.backend().data(), MPFR_RNDD);  // exact: as many bits
  const BigReal shrink = (UpperBound::of(4.0 * static_cast<double>(n + d + 8)) * unit(p)).to_big();
  BigReal factor(0, decimal_digits(p + 64));
  mpfr_add_ui(factor.backend().data(), shrink.backend().data(), 1, MPFR_RNDU);
  mpfr_mul(dual.hi.backend().data(), best.min_inf.lower.backend().data(), factor.backend().data(), MPFR_RNDU);
  e.res_composite_lower = composite(min_one, widened(dual, rho_inf));
}

/// The residual norms of math.md §3 from an enclosure R of the exact
/// residual about some centre (the mean, for Center::mean) and an enclosure
/// X of the layer output itself.
/// R_rows, X_rows (n×1, optional): bounds of the Euclidean norms of the
/// rows of R − R̃ and X − X̃ (radius_norms).
template <class S>
ResidualEnclosure residual_enclosure(const BallMatrix<S>& R, const BallMatrix<S>& X, Center center = Center::mean,
                                     const RadiusMatrix* R_rows = nullptr, const RadiusMatrix* X_rows = nullptr) {
  if (center == Center::median)
    throw std::invalid_argument("certified enclosures: the median centre is not enclosed; use the mean or the optimal centre");
  ResidualEnclosure e;
  if (center == Center::optimal) {
    optimal_centre_norms(R, R_rows, e);
  } else {
    const RadiusNorms rho = radius_norms(R.rad, R_rows);
    e.res_one = norm_interval(R.mid, '1', rho.one);
    e.res_inf = norm_interval(R.mid, 'I', rho.inf);
    e.res_frobenius = norm_interval(R.mid, 'F', rho.frobenius);
    e.res_composite = composite(e.res_one, e.res_inf);
  }
  const RadiusNorms rho_x = radius_norms(X.rad, X_rows);
  const Interval x_one = norm_interval(X.mid, '1', rho_x.one);
  const Interval x_inf = norm_interval(X.mid, 'I', rho_x.inf);
  e.norm_frobenius = norm_interval(X.mid, 'F', rho_x.frobenius);
  e.norm_composite = composite(x_one, x_inf);
  e.relative_residual = e.res_composite;
  mpfr_div(e.relative_residual.lo.backend().data(), e.res_composite.lo.backend().data(),
           e.norm_composite.hi.backend().data(), MPFR_RNDD);
  // The centring has induced norm 2(1 − 1/n) in the 1- and the ∞-norm, so
  // the mean's relative residual is below 2 even where ‖X‖ is not bounded
  // away from 0. The best centre c* is a number chosen on the midpoint: as X
  // tends to 0 in its ball, ‖X − 1c*ᵀ‖/‖X‖ has no bound, so a ball reaching
  // ‖X‖ = 0 is refused rather than given one.
  mpfr_ptr hi = e.relative_residual.hi.backend().data();
  const bool zero_norm = mpfr_zero_p(e.norm_composite.lo.backend().data());
  if (center == Center::optimal && zero_norm)
    throw std::runtime_error("certified enclosures: the enclosure of ‖X‖ reaches 0, so the relative residual at the "
                             "optimal centre has no bound at " + std::to_string(precision_bits_v<S>) +
                             " bits; raise the precision");
  if (zero_norm)
    mpfr_set_ui(hi, 2, MPFR_RNDU);
  else
    mpfr_div(hi, e.res_composite.hi.backend().data(), e.norm_composite.lo.backend().data(), MPFR_RNDU);
  if (center == Center::mean && mpfr_cmp_ui(hi, 2) > 0) mpfr_set_ui(hi, 2, MPFR_RNDU);
  return e;
}


}  // namespace enclosure_detail

template <class S>
EnclosedTrace<S> forward_enclosed(const Model& model, const Variant& variant, const Matrix<S>& X0,
                                  const EnclosureOptions& options) {
  return forward_enclosed(model, variant, BallMatrix<S>{X0, RadiusMatrix::zero(X0.rows(), X0.cols())}, options);
}

template <class S> BallMatrix<S> embed_enclosed(const Model& model, const std::vector<long>& ids) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(model, ids);
  } else {
    namespace E = enclosure_detail;
    Matrix<S> mid = embed_tokens<S>(model, ids);  // checks the ids and the model
    const Embeddings& e = *model.embeddings();
    const long p = precision_bits_v<S>;
    const Eigen::Index n = mid.rows(), w = e.word.cols();
    const auto word = [&](Eigen::Index i, Eigen::Index j) {
      return S(e.word(e.word_row(ids[static_cast<std::size_t>(i)]), j));  // exact
    };
    const EmbeddingRecipe& r = e.steps();
    const bool types = r.token_type && e.token_type.rows() > 0;
    const auto refuse = [&](const char* steps) {
      throw std::invalid_argument(model.source() + ": certified enclosures: embeddings that take " + steps +
                                  " are not supported yet (math.md §10); give --input or --random-input");
    };
    if (r.project_in) {  // E_i (· mapping when non-empty) + position row i, as embed_tokens
      if (types || r.scale_by_root_width || r.layer_norm || r.map_after_norm)
        refuse("project_in with a token type, √w, a LayerNorm or a mapping");
      BallMatrix<S> T{Matrix<S>(n, w), RadiusMatrix::zero(n, w)};
      for (Eigen::Index j = 0; j < w; ++j)
        for (Eigen::Index i = 0; i < n; ++i) T.mid(i, j) = word(i, j);
      if (e.mapping.size() > 0) T = E::times_weights(T, e.mapping, p);
      if (r.positions)
        for (Eigen::Index j = 0; j < T.mid.cols(); ++j)
          for (Eigen::Index i = 0; i < n; ++i) T.mid(i, j) += S(e.position(i, j));
      E::add_rounding(T, p);
      return T;
    }
    if (r.scale_by_root_width) {  // √w · E[ids], √w exact in the enclosure
      if (r.positions || types || r.layer_norm || r.map_after_norm)
        refuse("√w with positions, a token type, a LayerNorm or a mapping");
      E::Iv<S> root;
      mpfr_sqrt_ui(E::ptr(root.lo), static_cast<unsigned long>(w), MPFR_RNDD);
      mpfr_sqrt_ui(E::ptr(root.hi), static_cast<unsigned long>(w), MPFR_RNDU);
      return E::ball_around(std::move(mid), [&](Eigen::Index i) {
        std::vector<E::Iv<S>> c(static_cast<std::size_t>(w));
        for (Eigen::Index j = 0; j < w; ++j) c[static_cast<std::size_t>(j)] = E::iv_mul(E::iv_point(word(i, j)), root);
        return c;
      });
    }
    if (!r.positions && !types && !r.layer_norm && !r.map_after_norm)
      return {std::move(mid), RadiusMatrix::zero(n, w)};  // the rows as stored
    if (r.map_after_norm && !r.layer_norm) refuse("a mapping without a LayerNorm");
    // word + position (+ token type 0), then LayerNorm: on intervals from the exact stored rows
    const auto summed = [&](Eigen::Index i) {
      std::vector<E::Iv<S>> c(static_cast<std::size_t>(w));
      for (Eigen::Index j = 0; j < w; ++j) {
        E::Iv<S> v = E::iv_point(word(i, j));
        if (r.positions) v = E::iv_add(v, E::iv_point(S(e.position(i, j))));
        if (types) v = E::iv_add(v, E::iv_point(S(e.token_type(0, j))));
        c[static_cast<std::size_t>(j)] = v;
      }
      if (r.layer_norm) E::normalize_row(c, e.ln_g, e.ln_b, e.ln_eps, false, false);
      return c;
    };
    if (!r.map_after_norm) return E::ball_around(std::move(mid), summed);
    // The normalised rows (of width w), then the mapping to d and its bias
    Matrix<S> sums(n, w);  // as embed_tokens sums them
    for (Eigen::Index j = 0; j < w; ++j)
      for (Eigen::Index i = 0; i < n; ++i) {
        S v = word(i, j);
        if (r.positions) v += S(e.position(i, j));
        if (types) v += S(e.token_type(0, j));
        sums(i, j) = v;
      }
    BallMatrix<S> N = E::ball_around(layer_norm(sums, e.ln_g, e.ln_b, e.ln_eps), summed);
    BallMatrix<S> out = E::times_weights(N, e.mapping, p);
    E::add_bias(out, detail::row_of<S>(e.mapping_b), p);
    return out;
  }
}

template <class S> BallMatrix<S> pixels_enclosed(const Model& model, const InputSpec& spec) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(model, spec);
  } else {
    namespace E = enclosure_detail;
    Matrix<S> mid = embed_pixels<S>(model, spec);  // checks the image against the model
    const Embeddings& e = *model.embeddings();
    const long C = spec.pixel_shape[0], Hh = spec.pixel_shape[1], Ww = spec.pixel_shape[2];
    const long ps = e.patch_size, g = e.patch_grid(), d = model.arch().d_model, K = C * ps * ps;
    // Row k + 1 (patch k) is b + Σ_q W_q x_q + pos summed term by term in S: K products and K + 1 sums,
    // so each entry is within γ_{K+2}·(|b| + Σ|W||x| + |pos|) of the exact value; the CLS row's one sum
    // within u·|result|.
    MatrixXd patches(g * g, K);  // |x| of every patch, in embed_pixels' order
    for (long r = 0; r < g; ++r)
      for (long sc = 0; sc < g; ++sc) {
        Eigen::Index q = 0;
        for (long c = 0; c < C; ++c)
          for (long i = 0; i < ps; ++i)
            for (long j = 0; j < ps; ++j)
              patches(r * g + sc, q++) =
                  std::abs(spec.pixels[static_cast<std::size_t>((c * Hh + r * ps + i) * Ww + sc * ps + j)]);
      }
    const RadiusMatrix terms =
        product_up(RadiusMatrix::of(std::move(patches)), RadiusMatrix::of(e.patch.cwiseAbs().transpose()));
    const UpperBound gamma = E::gamma_up(K + 2, precision_bits_v<S>), u = E::unit(precision_bits_v<S>);
    const Eigen::Index rows = mid.rows();
    RadiusMatrix rad = radius_from(rows, d, [&](Eigen::Index row, Eigen::Index o) {
      if (row == 0) return UpperBound::abs_of(mid(0, o).backend().data()) * u;
      const UpperBound outside = UpperBound::of(std::abs(e.patch_b(o))) + UpperBound::of(std::abs(e.position(row, o)));
      return (terms.at(row - 1, o) + outside) * gamma;
    });
    return {std::move(mid), std::move(rad)};
  }
}

template <class S> BallMatrix<S> input_enclosed(const Model& model, const InputSpec& input) {
  switch (input.kind) {
    case InputSpec::Kind::tokens:
      return embed_enclosed<S>(model, input.tokens);
    case InputSpec::Kind::pixels:
      return pixels_enclosed<S>(model, input);
    case InputSpec::Kind::matrix:
    case InputSpec::Kind::random:
      break;
  }
  Matrix<S> X = make_input<S>(model, input);  // numbers given are taken as exact
  const Eigen::Index rows = X.rows(), cols = X.cols();
  return {std::move(X), RadiusMatrix::zero(rows, cols)};
}

template <class S>
EnclosedTrace<S> forward_enclosed(const Model& model, const Variant& variant, const BallMatrix<S>& X0,
                                  const EnclosureOptions& options) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(model, variant, X0, options);
  } else {
    namespace E = enclosure_detail;
    const Architecture& a = model.arch();
    detail::check_input(model, variant, X0.mid.rows(), X0.mid.cols());
    const long p = precision_bits_v<S>;
    const UpperBound scale = UpperBound::of(options.radius_scale);
    EnclosedTrace<S> t;
    t.variant = variant;
    t.X.push_back(X0);
    detail::PackedLayer<S> w;
    const auto pos = E::BallPositions<S>::make(a, X0.mid.rows());
    for (int l = 0; l < a.layers; ++l) {
      check_interrupt();
      const std::shared_ptr<const LayerWeights> held = model.layer_for_pass(l);
      detail::pack_into(w, a, *held, variant.mlp != MlpKind::none);
      std::vector<BallMatrix<S>>* record = nullptr;
      if (options.record_attention) record = &t.P.emplace_back();
      BallMatrix<S> Z = E::layer_map(a, variant, w, *held, t.X.back(), detail::window_of(a, l), pos, l, p, record);
      Z.rad = Z.rad * scale;
      t.X.push_back(std::move(Z));
      if (options.on_layer) options.on_layer(l + 1, a.layers);
    }
    return t;
  }
}

template <class S> ResidualEnclosure enclose_residual(const BallMatrix<S>& X, Center center) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(X, center);
  } else {
    namespace E = enclosure_detail;
    BallMatrix<S> R = X;
    E::take_mean(R, precision_bits_v<S>);
    return E::residual_enclosure(R, X, center);
  }
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_ENCLOSURE_DIRECT(S)                                                                     \
  template sanpath::EnclosedTrace<S> sanpath::forward_enclosed<S>(const sanpath::Model&, const sanpath::Variant&, \
                                                                  const sanpath::Matrix<S>&,                   \
                                                                  const sanpath::EnclosureOptions&);            \
  template sanpath::EnclosedTrace<S> sanpath::forward_enclosed<S>(const sanpath::Model&, const sanpath::Variant&, \
                                                                  const sanpath::BallMatrix<S>&,               \
                                                                  const sanpath::EnclosureOptions&);            \
  template sanpath::BallMatrix<S> sanpath::embed_enclosed<S>(const sanpath::Model&, const std::vector<long>&);   \
  template sanpath::BallMatrix<S> sanpath::pixels_enclosed<S>(const sanpath::Model&, const sanpath::InputSpec&);   \
  template sanpath::BallMatrix<S> sanpath::input_enclosed<S>(const sanpath::Model&, const sanpath::InputSpec&);    \
  template sanpath::ResidualEnclosure sanpath::enclose_residual<S>(const sanpath::BallMatrix<S>&, sanpath::Center);

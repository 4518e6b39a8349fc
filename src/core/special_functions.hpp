#pragma once
// expm1, log1p, erf and erfc for every working scalar: std:: for double,
// MPFR's correctly rounded functions (round to nearest) for the
// multiprecision tiers. Used where 1 + x or e^x − 1 must keep the relative
// accuracy of a tiny x (the centred pass's softmax, math.md §7; the measures
// of collapsed layers) and for the centred pass's GELU differences.
#include "sanpath/core/scalar.hpp"

#include <cmath>

namespace sanpath {

namespace detail {
/// f(x): MPFR's `mf` rounded to nearest at the multiprecision tiers, `df` for double.
template <class S, class D> S mpfr_or_std(const S& x, int (*mf)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t), D&& df) {
  if constexpr (is_mpfr_v<S>) {
    S r;
    mf(r.backend().data(), x.backend().data(), MPFR_RNDN);
    return r;
  } else {
    return df(x);
  }
}
}  // namespace detail

template <class S> S expm1_of(const S& x) {
  return detail::mpfr_or_std(x, mpfr_expm1, [](double v) { return std::expm1(v); });
}
template <class S> S log1p_of(const S& x) {
  return detail::mpfr_or_std(x, mpfr_log1p, [](double v) { return std::log1p(v); });
}
template <class S> S erf_of(const S& x) {
  return detail::mpfr_or_std(x, mpfr_erf, [](double v) { return std::erf(v); });
}
template <class S> S erfc_of(const S& x) {
  return detail::mpfr_or_std(x, mpfr_erfc, [](double v) { return std::erfc(v); });
}

}  // namespace sanpath

#pragma once
// expm1 and log1p for every working scalar: std:: for double, MPFR's
// correctly rounded functions (round to nearest) for the multiprecision tiers.
// Used where 1 + x or e^x − 1 must keep the relative accuracy of a tiny x
// (the centred pass's softmax, math.md §7; the measures of collapsed layers).
#include "sanpath/core/scalar.hpp"

#include <cmath>

namespace sanpath {

template <class S> S expm1_of(const S& x) {
  if constexpr (is_mpfr_v<S>) {
    S r;
    mpfr_expm1(r.backend().data(), x.backend().data(), MPFR_RNDN);
    return r;
  } else {
    return std::expm1(x);
  }
}

template <class S> S log1p_of(const S& x) {
  if constexpr (is_mpfr_v<S>) {
    S r;
    mpfr_log1p(r.backend().data(), x.backend().data(), MPFR_RNDN);
    return r;
  } else {
    return std::log1p(x);
  }
}

}  // namespace sanpath

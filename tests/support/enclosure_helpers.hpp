#pragma once
// Helpers of the tests that hold enclosures (math.md §10) against values of a
// far higher tier: the value as a BigReal at its own precision, and the
// digits an interval proves of its own midpoint.
#include "sanpath/core/quantity.hpp"

#include <mpfr.h>

namespace sanpath::test {

/// x exactly, as a BigReal of 1300 decimal digits (4,318 bits: every tier up to 4,098 bits fits).
template <class T> BigReal exact_big(const T& x) {
  BigReal r(0, 1300);
  mpfr_set(r.backend().data(), x.backend().data(), MPFR_RNDN);
  return r;
}

/// The digits `iv` proves of its own midpoint.
inline int digits_of(const Interval& iv) {
  BigReal mid = iv.lo;
  mpfr_add(mid.backend().data(), iv.lo.backend().data(), iv.hi.backend().data(), MPFR_RNDN);
  mpfr_div_2ui(mid.backend().data(), mid.backend().data(), 1, MPFR_RNDN);
  return proven_digits(iv, mid, 200);
}

}  // namespace sanpath::test

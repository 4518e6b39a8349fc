#pragma once
/// \file dispatch.hpp
/// From a run-time Precision to a scalar type: with_scalar. It reaches the
/// tiers this build compiled (core/tiers.hpp, generated from CMake's
/// SANPATH_TIERS); only the sources that dispatch include it, so a build
/// that changes its tiers recompiles those and the new tiers' units only.

#include "sanpath/core/scalar.hpp"
#include "sanpath/core/tiers.hpp"

#include <stdexcept>
#include <string>

namespace sanpath {

/// Calls `f(scalar_tag<S>{})` with the scalar type of `p` and returns its
/// result. Instantiates `f` for double and every tier compiled: keep `f`
/// light and call explicitly instantiated library functions from it.
template <class F> decltype(auto) with_scalar(const Precision& p, F&& f) {
  if (p.native_double) return f(scalar_tag<double>{});
#define SANPATH_DISPATCH_TIER(D) \
  if (p.bits == scalar_traits<mpfr_real<D>>::bits) return f(scalar_tag<mpfr_real<D>>{});
  SANPATH_BUILT_TIERS(SANPATH_DISPATCH_TIER)
#undef SANPATH_DISPATCH_TIER
  throw std::invalid_argument("precision: no tier with " + std::to_string(p.bits) + " bits in this build (" +
                              Precision::ladder_description() + ")");
}

}  // namespace sanpath

// The norms of compute/norms.hpp at double and at every tier of the whole
// ladder, whatever tiers the build compiles for the other modules
// (SANPATH_TIERS): the measures take norms of their Gram matrices one tier
// above the working one (measures_impl.hpp), which may be a tier the build
// does not compile. Cheap: about a second a tier.
#include "compute/norms_impl.hpp"

#define SANPATH_INSTANTIATE_NORMS_TIER(D) SANPATH_INSTANTIATE_NORMS(sanpath::mpfr_real<D>)
SANPATH_INSTANTIATE_NORMS(double)
SANPATH_FOR_EACH_LADDER_TIER(SANPATH_INSTANTIATE_NORMS_TIER)

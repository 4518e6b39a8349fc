// The products of core/linalg.hpp at double and at every tier of the whole
// ladder, whatever tiers the build compiles for the other modules
// (SANPATH_TIERS): the bounds' exact weight products use them up to 1025
// bits, and each tier's fixed-point kernel is tested in every build.
#include "core/linalg_impl.hpp"

#define SANPATH_INSTANTIATE_LINALG_TIER(D) SANPATH_INSTANTIATE_LINALG(sanpath::mpfr_real<D>)
SANPATH_INSTANTIATE_LINALG(double)
SANPATH_FOR_EACH_LADDER_TIER(SANPATH_INSTANTIATE_LINALG_TIER)

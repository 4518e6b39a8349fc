#pragma once
// The one list of templated modules. Each module's implementation header
// (src/<module>_impl.hpp) defines SANPATH_INSTANTIATE_<MODULE>(S); the
// generated per-scalar TUs call SANPATH_INSTANTIATE_ALL once.
#include "sanpath/scalar.hpp"

using sanpath::mpfr_real;

#include "linalg_impl.hpp"
#include "forward_impl.hpp"

#define SANPATH_INSTANTIATE_ALL(S) \
  SANPATH_INSTANTIATE_FORWARD(S)

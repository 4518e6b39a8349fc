#pragma once
// The one list of templated modules. Each module's implementation header
// (src/<module>_impl.hpp) defines SANPATH_INSTANTIATE_<MODULE>(S); the
// generated per-scalar TUs call SANPATH_INSTANTIATE_ALL once.
#include "sanpath/scalar.hpp"

using sanpath::mpfr_real;

#include "linalg_impl.hpp"
#include "forward_impl.hpp"
#include "paths_impl.hpp"
#include "norms_impl.hpp"
#include "input_impl.hpp"
#include "analysis_impl.hpp"

#define SANPATH_INSTANTIATE_ALL(S) \
  SANPATH_INSTANTIATE_PATHS(S) \
  SANPATH_INSTANTIATE_FORWARD(S) \
  SANPATH_INSTANTIATE_NORMS(S) \
  SANPATH_INSTANTIATE_INPUT(S) \
  SANPATH_INSTANTIATE_ANALYSIS(S)

#pragma once
/// \file top_paths.hpp
/// The K path terms of largest ‖T‖_{1,∞} (T = P_path X W_path, paths.hpp) by
/// branch and bound over the path tree, without visiting every path: the
/// same K records, in the same order and bit for bit, as
/// enumerate_paths with top_k = K, at sizes where enumeration is out of
/// reach (13^12 ≈ 2.3·10^13 paths at BERT-base size).
///
/// A node at depth D holds Y = P_prefix X W_prefix (n×d). Every completion
/// is T = P_suf Y W_suf with P_suf a product of row-stochastic matrices, so
/// (rows of T are convex combinations of rows of Y W_suf; r2 = largest row
/// 2-norm, ‖·‖_2 spectral, ‖P‖_∞ = 1):
///
///   ‖T‖_∞ ≤ √d · r2(Y) · ω_D,
///   ‖T‖_1 ≤ min(n · r2(Y), π_D · √n · ‖Y‖_F) · ω_D,
///   ω_D = Π_{l>D} max over allowed choices of ‖W_h^l‖_2 (1 for skip),
///   π_D = min(n, Π_{l>D} max over allowed choices of ‖P_h^l‖_1),
///
/// and ‖T‖_{1,∞} ≤ √(‖T‖_1 ‖T‖_∞). ‖W_h‖_2 is bounded by ‖W_V^h‖_2 ‖W_O^h‖_2
/// (eigenvalues of the d_v×d_v Gram matrices, in double, enlarged by a
/// relative 10^-6 that also covers the rounding of the walk). A subtree is
/// skipped when its bound is below the current K-th value; a head child is
/// skipped before it is formed when the same bound, applied to
/// r2(Y)·‖W_h‖_2 and √‖P_h‖_1·‖Y‖_F·‖W_h‖_2, is. The threshold starts at the
/// K-th largest term among the paths of length ≤ 1 (formed first, cheap).
///
/// Threads and ranks: the tree is split into the subtree tasks of paths.hpp
/// (fixed by the filter), taken in rounds of 128 tasks. Every task of a
/// round prunes against the best bound of the rounds before it (the K-th
/// largest term found so far) and its own K best; the round's tasks run on
/// the threads and, under MPI, are shared over the ranks, whose K best meet
/// before the next round. The rounds do not depend on the threads or ranks,
/// so neither do the records nor the node counts.

#include "sanpath/compute/paths.hpp"

#include <cstdint>
#include <vector>

namespace sanpath {

struct TopPathsOptions {
  std::size_t k = 10;  ///< at least 1
  PathFilter filter;   ///< as for enumerate_paths
  int threads = 1;     ///< 0: hardware concurrency
};

template <class S> struct TopPathsResult {
  /// The K (or fewer, when fewer paths pass the filter) best records, larger
  /// ‖T‖_{1,∞} first, ties in enumeration order.
  std::vector<PathRecord<S>> records;
  PathCount paths;              ///< paths passing the filter (exact)
  std::uint64_t nodes = 0;      ///< tree nodes formed (one product step each, prefix steps of tasks included)
  std::uint64_t skipped = 0;    ///< head children skipped before being formed
  std::uint64_t leaves = 0;     ///< complete paths evaluated (their norms computed)
};

/// Throws std::invalid_argument like enumerate_paths (bad trace, variant or
/// filter) and for k = 0.
template <class S>
TopPathsResult<S> top_paths(const Model& model, const ForwardTrace<S>& trace, const TopPathsOptions& options);

#define SANPATH_DECLARE_TOP_PATHS(S)                                                                     \
  extern template TopPathsResult<S> top_paths<S>(const Model&, const ForwardTrace<S>&, const TopPathsOptions&);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_TOP_PATHS)
#undef SANPATH_DECLARE_TOP_PATHS

}  // namespace sanpath

#pragma once
/// \file rerun.hpp
/// Path effectiveness as the paper's official code measures it: paths
/// re-run as sub-networks, for every variant. A path is a head sequence as
/// in paths.hpp (`heads[l-1]`: a head 0..H-1, or -1 for the skip branch).
/// Its sub-network F_path maps X (n×d) layer by layer:
/// - a layer the path skips is the identity;
/// - a layer where it takes head h runs with head h alone, its attention
///   recomputed from the sub-network's own state Y (query/key biases and
///   rotary embeddings as the model has them),
///     \f$ A_h(Y) = \mathrm{rowsoftmax}((Y W_Q^h + 1b_Q^T)(Y W_K^h + 1b_K^T)^T/\sqrt{d_{qk}}) (Y W_V^h + \beta 1b_V^T) W_O^h + \beta 1b_O^T \f$,
///   then the rest of the variant as configured — LayerNorm (post: LN_1 of
///   A_h(Y); pre: A_h of LN_1(Y)) and the MLP half (math.md §2) — without the
///   skip term: the skip connection is the path's other branch.
/// β = 0 for attention-only variants (mlp none, layernorm none): F_path is
/// then the path term P_path X W_path of math.md §4 with P recomputed, and
/// the bias term 1bᵀ (attention-independent) is added once to the estimate.
/// β = 1 otherwise: each sub-network carries the value and output biases
/// (as a layer with one head does), and no separate bias term is added.
///
/// Estimate of the paths of length k: every path when count_k ≤ N (each
/// once, exact), otherwise N paths drawn uniformly with replacement
/// (paths.hpp random_path) scaled to the unbiased estimator
///   \f$ \hat S_k = \frac{count_k}{N} \sum_{i=1}^{N} F_{path_i}(X) \f$,
/// count_k = C(L,k)·H^k (H^L at k = L without skip, 0 otherwise). The
/// truncated network is \f$ \hat X_{\le k} = [\beta = 0] 1b^T + \sum_{j\le k} \hat S_j \f$.
/// For an attention-only variant whose attention does not depend on its
/// input (or L = 1) the sub-networks reproduce the frozen path terms, so
/// enumerating every path gives exact_effectiveness's X_{≤k}.

#include "sanpath/compute/effectiveness.hpp"
#include "sanpath/compute/path_counts.hpp"
#include "sanpath/core/scalar.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/model/task_head.hpp"

#include <cstdint>
#include <vector>

namespace sanpath {

/// F_path(X0) for `variant` (see above); X0: n×d_model. Throws
/// std::invalid_argument when `heads` has not L entries, a head is out of
/// range, -1 appears without skip, or the model cannot run `variant`.
template <class S>
Matrix<S> rerun_path(const Model& model, const Variant& variant, const Matrix<S>& X0, const std::vector<int>& heads);

struct RerunOptions {
  std::uint64_t samples = 16;  ///< N per length and repetition, at least 1
  int repeats = 5;             ///< R repetitions with different draws, at least 1
  /// Repetition r, length k draws from Rng(seed + (r·(L+1) + k + 1)·0x9E3779B97F4A7C15).
  std::uint64_t seed = 0;
  int threads = 1;  ///< 0: hardware concurrency; results do not depend on it
};

/// One length k: per repetition r, the truncation's distance
/// ‖X̂_{≤k} − X^L‖_F / ‖X^L‖_F, the task head's comparison with X^L, and,
/// with reference truncations, the gap ‖X̂_{≤k} − X_{≤k}‖_F / ‖X^L‖_F.
template <class S> struct RerunPoint {
  int length = 0;
  PathCount count;             ///< paths of length k
  bool all_paths = false;      ///< count_k ≤ N: every path once (the repetitions coincide)
  std::uint64_t evaluated = 0;  ///< sub-networks run per repetition
  std::vector<S> distance;     ///< per repetition
  std::vector<HeadAgreement<S>> head;  ///< per repetition, with a task head
  std::vector<S> gap;                  ///< per repetition, with reference truncations
};

template <class S> struct RerunEffectiveness {
  std::vector<RerunPoint<S>> points;  ///< k = 0..L
  S output_frobenius{};               ///< ‖X^L‖_F
};

/// The re-run effectiveness curve of `variant` on X0, against the full
/// output XL (forward of the same variant). `head` may be null. `reference`,
/// when not null, holds the exact truncations X_{≤k}, k = 0..L
/// (exact_effectiveness) for the gaps. Deterministic for a seed, at any
/// thread count. Throws std::invalid_argument on bad options or shapes.
template <class S>
RerunEffectiveness<S> rerun_effectiveness(const Model& model, const Variant& variant, const Matrix<S>& X0,
                                          const Matrix<S>& XL, const TaskHead* head, const RerunOptions& options,
                                          const std::vector<Matrix<S>>* reference = nullptr);

#define SANPATH_DECLARE_RERUN(S)                                                                               \
  extern template Matrix<S> rerun_path<S>(const Model&, const Variant&, const Matrix<S>&, const std::vector<int>&); \
  extern template RerunEffectiveness<S> rerun_effectiveness<S>(const Model&, const Variant&, const Matrix<S>&,  \
                                                               const Matrix<S>&, const TaskHead*,               \
                                                               const RerunOptions&, const std::vector<Matrix<S>>*);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_RERUN)
#undef SANPATH_DECLARE_RERUN

}  // namespace sanpath

#pragma once
/// \file effectiveness.hpp
/// Path effectiveness (the paper's "ensembles of shallow networks"
/// experiment) in the exact, frozen-attention sense of math.md §4: keep the
/// paths of length at most k,
///
///   \f$ X_{\le k} = \sum_{j \le k} S_j + 1 b^T \f$  (S_j: length sums, paths.hpp),
///
/// and measure what the truncated network still does: its relative distance
/// \f$ \|X_{\le k} - X^L\|_F / \|X^L\|_F \f$ to the forward output and, with a
/// task head (model/task_head.hpp), how often the head's prediction (argmax,
/// first index on ties) on \f$ X_{\le k} \f$ agrees with the one on \f$ X^L \f$
/// and the mean Kullback–Leibler divergence \f$ KL(p(X^L) \| p(X_{\le k})) \f$
/// of the softmax distributions. X_{≤L} is X^L up to rounding (Theorem 2.1).
/// Attention-only variants only (paths.hpp's require_attention_only).

#include "sanpath/compute/forward.hpp"
#include "sanpath/core/scalar.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/model/task_head.hpp"

#include <optional>
#include <vector>

namespace sanpath {

/// Logits of `head` on X (n×d): classifier 1×C (from row 0), language
/// model n×V (one row per position). Throws std::invalid_argument when X
/// has not d columns.
template <class S> Matrix<S> task_logits(const TaskHead& head, const Matrix<S>& X);

/// Row by row comparison of two logit matrices of the same shape.
template <class S> struct HeadAgreement {
  long agree = 0;        ///< rows whose argmax is the same
  long predictions = 0;  ///< rows
  S mean_kl{};           ///< mean over rows of KL(softmax(reference) ‖ softmax(logits))
};

/// Throws std::invalid_argument on a shape mismatch or no rows.
template <class S> HeadAgreement<S> compare_logits(const Matrix<S>& reference, const Matrix<S>& logits);

template <class S> struct EffectivenessPoint {
  int length = 0;                             ///< k
  S distance{};                               ///< ‖X_{≤k} − X^L‖_F / ‖X^L‖_F
  std::optional<HeadAgreement<S>> head;       ///< with a task head
};

template <class S> struct Effectiveness {
  std::vector<EffectivenessPoint<S>> points;  ///< k = 0..L
  S output_frobenius{};                       ///< ‖X^L‖_F
};

/// The exact effectiveness curve from the length sums of `trace` (attention
/// recorded, attention-only variant). `head` may be null. `threads` as in
/// length_sums. `truncations`, when not null, receives X_{≤k} (n×d) for
/// k = 0..L. Throws std::invalid_argument like length_sums.
template <class S>
Effectiveness<S> exact_effectiveness(const Model& model, const ForwardTrace<S>& trace, const TaskHead* head,
                                     int threads = 1, std::vector<Matrix<S>>* truncations = nullptr);

#define SANPATH_DECLARE_EFFECTIVENESS(S)                                                                     \
  extern template Matrix<S> task_logits<S>(const TaskHead&, const Matrix<S>&);                              \
  extern template HeadAgreement<S> compare_logits<S>(const Matrix<S>&, const Matrix<S>&);                   \
  extern template Effectiveness<S> exact_effectiveness<S>(const Model&, const ForwardTrace<S>&, const TaskHead*, \
                                                          int, std::vector<Matrix<S>>*);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_EFFECTIVENESS)
#undef SANPATH_DECLARE_EFFECTIVENESS

}  // namespace sanpath

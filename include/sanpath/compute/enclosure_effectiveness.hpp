#pragma once
/// \file enclosure_effectiveness.hpp
/// Path effectiveness (compute/effectiveness.hpp, math.md §4) in ball
/// arithmetic (math.md §10), from the length sums' balls of an enclosed
/// direct pass that kept its attention matrices (enclosure_paths.hpp):
///
///  - the distance of the truncation X_{≤k} = Σ_{j≤k} S_j + 1bᵀ to X^L,
///    ‖X_{≤k} − X^L‖_F / ‖X^L‖_F, for k < L as ‖Σ_{j>k} S_j‖_F / ‖X^L‖_F
///    (the same real number by Theorem 2.1, without the cancellation of
///    X_{≤k} − X^L); for k = L, where it is 0, the enclosure of the
///    reconstruction ‖Σ_j S_j + 1bᵀ − X^L‖_F / ‖X^L‖_F, whose lower end is 0
///    and whose upper end is what the balls leave;
///  - with a task head (model/task_head.hpp), the head's logits on X^L and on
///    the ball of X_{≤k} (the pooler's tanh and LN_f on intervals, MPFR's
///    directed functions), the agreement of their argmax (first index on
///    ties) counted as the predictions proven to agree and those that may
///    agree (a row whose argmax the logits' enclosures do not decide may go
///    either way), and the mean KL(p(X^L) ‖ p(X_{≤k})) enclosed through the
///    log-softmax on intervals (exp and log rounded outward), its lower end
///    raised to 0 where it falls below (KL ≥ 0, Gibbs).
///
/// \code
///   EnclosureOptions opt;
///   opt.record_attention = true;
///   const auto t = forward_enclosed<mpfr_real<38>>(model, Variant::san(), X0, opt);
///   const EnclosedEffectiveness e = enclose_effectiveness(model, t, &head);
///   e.points[1].distance.hi;  // ≥ ‖X_{≤1} − X^L‖_F / ‖X^L‖_F
/// \endcode

#include "sanpath/compute/enclosure.hpp"
#include "sanpath/model/task_head.hpp"

#include <optional>
#include <vector>

namespace sanpath {

/// A task head's predictions on X_{≤k} against those on X^L, enclosed.
struct EnclosedAgreement {
  long agree_fewest = 0;  ///< rows whose argmax is proven the same on both
  long agree_most = 0;    ///< rows whose argmax may be the same (≥ agree_fewest)
  long predictions = 0;   ///< rows
  Interval mean_kl;       ///< mean over rows of KL(softmax(X^L row) ‖ softmax(X_{≤k} row))
};

struct EnclosedEffectivenessPoint {
  int length = 0;                          ///< k
  Interval distance;                       ///< ‖X_{≤k} − X^L‖_F / ‖X^L‖_F
  std::optional<EnclosedAgreement> head;   ///< with a task head
};

struct EnclosedEffectiveness {
  std::vector<EnclosedEffectivenessPoint> points;  ///< k = 0..L
  Interval output_frobenius;                       ///< ‖X^L‖_F
};

/// The effectiveness curve of an enclosed attention-only trace with its
/// attention matrices (S an MPFR tier; double throws). `head` may be null.
/// Throws std::invalid_argument as enclose_length_sums, and when the head's
/// width is not d_model; NumericalError when ‖X^L‖'s enclosure reaches 0 or
/// a LayerNorm's variance is not bounded away from 0.
template <class S>
EnclosedEffectiveness enclose_effectiveness(const Model& model, const EnclosedTrace<S>& trace, const TaskHead* head);

#define SANPATH_DECLARE_ENCLOSED_EFFECTIVENESS(S)                                                     \
  extern template EnclosedEffectiveness enclose_effectiveness<S>(const Model&, const EnclosedTrace<S>&, \
                                                                 const TaskHead*);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_ENCLOSED_EFFECTIVENESS)
#undef SANPATH_DECLARE_ENCLOSED_EFFECTIVENESS

}  // namespace sanpath

#pragma once
/// \file enclosure_rerun.hpp
/// The re-run effectiveness curve (compute/rerun.hpp: paths re-run as
/// sub-networks with their own attention, the unbiased estimator
/// Ŝ_k = count_k/N · Σ F_path, the bias term of attention-only variants) in
/// ball arithmetic (math.md §10): every sub-network runs on balls from an
/// enclosed pass's X^0, the same paths drawn as rerun_effectiveness draws,
/// and per repetition
///
///  - the distance ‖X̂_{≤k} − X^L‖_F / ‖X^L‖_F against the enclosure of X^L;
///  - with a task head, the agreement of the argmax of its logits on X̂_{≤k}
///    with those on X^L (proven to agree, may agree) and the mean KL, as
///    enclose_effectiveness encloses them;
///  - for attention-only variants, whose trace kept its attention matrices,
///    the gap ‖X̂_{≤k} − X_{≤k}‖_F / ‖X^L‖_F to the exact truncation
///    X_{≤k} = Σ_{j≤k} S_j + 1bᵀ (the length sums' balls).
///
/// \code
///   EnclosureOptions opt;
///   opt.record_attention = true;  // attention-only variants
///   const auto t = forward_enclosed<mpfr_real<77>>(model, Variant::san(), X0, opt);
///   RerunOptions ro;
///   ro.samples = 8;
///   const EnclosedRerun e = enclose_rerun(model, t, &head, ro);
///   e.points[2].distance[0].hi;  // ≥ repetition 0's ‖X̂_{≤2} − X^L‖_F / ‖X^L‖_F
/// \endcode
#include "sanpath/compute/enclosure.hpp"
#include "sanpath/compute/enclosure_effectiveness.hpp"
#include "sanpath/compute/path_counts.hpp"
#include "sanpath/compute/rerun.hpp"
#include "sanpath/model/task_head.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace sanpath {

/// One length k, per repetition (as RerunPoint: X̂_{≤k} sums the draws of
/// every length up to k, so repetitions differ where a shorter length was
/// drawn even when every path of length k was run).
struct EnclosedRerunPoint {
  int length = 0;
  PathCount count;              ///< paths of length k
  bool all_paths = false;       ///< count_k ≤ N: every path once (the repetitions coincide)
  std::uint64_t evaluated = 0;  ///< sub-networks run per repetition
  std::vector<Interval> distance;        ///< ‖X̂_{≤k} − X^L‖_F / ‖X^L‖_F
  std::vector<EnclosedAgreement> head;   ///< with a task head
  std::vector<Interval> gap;             ///< attention-only: ‖X̂_{≤k} − X_{≤k}‖_F / ‖X^L‖_F
};

struct EnclosedRerun {
  std::vector<EnclosedRerunPoint> points;  ///< k = 0..L
  Interval output_frobenius;               ///< ‖X^L‖_F
};

/// The re-run curve of the enclosed trace `t` of t.variant (S an MPFR tier;
/// double throws), drawing the paths as rerun_effectiveness(…, options)
/// does. Attention-only variants need the trace's attention matrices (the
/// bias term and the gaps come from the length sums' balls). `head` may be
/// null. Throws std::invalid_argument as rerun_effectiveness and
/// enclose_length_sums; NumericalError when ‖X^L‖'s enclosure reaches 0 or a
/// LayerNorm's variance is not bounded away from 0.
template <class S>
EnclosedRerun enclose_rerun(const Model& model, const EnclosedTrace<S>& t, const TaskHead* head,
                            const RerunOptions& options);

#define SANPATH_DECLARE_ENCLOSED_RERUN(S)                                                             \
  extern template EnclosedRerun enclose_rerun<S>(const Model&, const EnclosedTrace<S>&, const TaskHead*, \
                                                 const RerunOptions&);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_ENCLOSED_RERUN)
#undef SANPATH_DECLARE_ENCLOSED_RERUN

}  // namespace sanpath

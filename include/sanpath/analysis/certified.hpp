#pragma once
/// \file certified.hpp
/// The certified forward analysis (`--check certified`, math.md §10): the
/// centred pass (auto, but where a gated MLP runs: compute/enclosure_centred.hpp)
/// or the direct pass (compute/enclosure.hpp) in ball arithmetic at an MPFR tier,
/// every layer's residual norms enclosed, every printed digit proven by its
/// enclosure (Quantity::enclosure, proven_digits). With --precision auto the
/// tier starts at the bits the digits asked need and rises until every
/// nonzero value proves them, or the ceiling is reached (then said so).
/// With --precision double the double run's values are printed, each with
/// the digits one enclosed run proves (its tier recorded as the check).
///
/// \code
///   PrecisionRequest r;
///   r.check = CheckMethod::certified;
///   const ForwardAnalysis a = analyze_forward(model, Variant::san(), InputSpec::from_random(spec), r);
///   a.layers[3].relative_residual.enclosure->lo;  // ≤ the exact value ≤ ...->hi
/// \endcode

#include "sanpath/analysis/forward.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/rerun.hpp"

namespace sanpath {

/// What analyze_forward runs for request.check == certified. Throws
/// std::invalid_argument naming what certified runs do not cover yet: a
/// median centre, measures, emulation. Token ids go
/// through embed_enclosed, ViT's pixels through its patch embedding on
/// balls; matrices and random inputs are taken as exact.
ForwardAnalysis analyze_forward_certified(const Model& model, const Variant& variant, const InputSpec& input,
                                          const PrecisionRequest& request, Center center = Center::mean,
                                          const ProgressFn& progress = {});

/// What analyze_length_sums runs for request.check == certified: the direct
/// pass in ball arithmetic with its attention matrices kept, then the
/// length sums on balls (compute/enclosure_paths.hpp); every S_k's norms and
/// share and ‖X^L‖_F with the digits their enclosures prove, the
/// reconstruction error as the bound its enclosure proves ("< 1e-N": its
/// exact value is 0). Auto rises from the bits the digits asked need until
/// every nonzero value proves them or the ceiling is reached. Throws
/// std::invalid_argument for --precision double (the sums are enclosed at an
/// MPFR tier) and as analyze_length_sums.
LengthSumsReport analyze_length_sums_certified(const Model& model, const Variant& variant, const InputSpec& input,
                                               const PrecisionRequest& request, const ProgressFn& progress = {});

/// What analyze_enumeration runs for request.check == certified. The paths
/// are chosen at the tier the enclosures start at, without a check run:
/// those passing the filter, or a top-K selection and its order (recorded
/// as PathEnumerationReport::selected_at; the selection itself is not
/// proven). Then each path's four norms (enclose_path_terms) and, when
/// every path passes the filter, the reconstruction error (as
/// analyze_length_sums_certified's) get the digits their enclosures prove;
/// auto rises a tier at a time until every path proves the digits asked or
/// the ceiling is reached. Throws std::invalid_argument for --precision
/// double, and as analyze_enumeration.
PathEnumerationReport analyze_enumeration_certified(const Model& model, const Variant& variant,
                                                    const InputSpec& input, const PrecisionRequest& request,
                                                    const EnumerationRequest& enumeration,
                                                    const ProgressFn& progress = {});

/// What analyze_effectiveness runs for request.check == certified: the
/// direct pass in ball arithmetic with its attention matrices kept, then the
/// effectiveness curve on balls (compute/enclosure_effectiveness.hpp): every
/// distance and mean KL with the digits its enclosure proves (the distance
/// at k = L, 0 exactly, as the bound its enclosure proves), the agreement as
/// the predictions proven to agree (EffectivenessEntry::agree) and those
/// that may (agree_most). Auto rises from the bits the digits asked need
/// until every distance and KL of k < L proves them or the ceiling is
/// reached (an undecided argmax does not make it rise: an exact tie never
/// decides). Throws std::invalid_argument for --precision double and as
/// analyze_effectiveness.
EffectivenessReport analyze_effectiveness_certified(const Model& model, const Variant& variant,
                                                    const InputSpec& input, const PrecisionRequest& request,
                                                    const TaskHead* head, const ProgressFn& progress = {});

/// What analyze_rerun runs for request.check == certified: the exact
/// sense as analyze_effectiveness_certified (attention-only variants), and
/// the sub-networks of every repetition in ball arithmetic from an enclosed
/// direct pass (its attention recorded for attention-only variants: the
/// bias term and the gaps), one tier up at a time from start_bits until
/// every repetition's values prove the digits asked (or the ceiling).
/// Refuses --precision double, and as analyze_rerun.
RerunReport analyze_rerun_certified(const Model& model, const Variant& variant, const InputSpec& input,
                                    const PrecisionRequest& request, const RerunRequest& rerun, const TaskHead* head,
                                    const ProgressFn& progress = {});

}  // namespace sanpath

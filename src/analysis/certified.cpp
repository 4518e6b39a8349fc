#include "sanpath/analysis/certified.hpp"

#include "sanpath/compute/enclosure.hpp"
#include "sanpath/compute/enclosure_centred.hpp"
#include "sanpath/compute/enclosure_effectiveness.hpp"
#include "sanpath/compute/enclosure_paths.hpp"
#include "sanpath/compute/enclosure_rerun.hpp"
#include "sanpath/compute/paths.hpp"
#include "sanpath/core/errors.hpp"
#include "sanpath/core/dispatch.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

namespace sanpath {

namespace {

void refuse(const std::string& what) {
  throw std::invalid_argument("--check certified: " + what + " (math.md §10: not enclosed yet)");
}

/// The pass that encloses `request`: an explicit --method as asked;
/// otherwise the request's own method, except that a gated MLP is enclosed
/// by the direct balls. The centred balls take it entrywise, without row
/// bounds, and lose digits faster where nothing collapses: a 12-layer Llama
/// (d 64, 8 tokens) needs 513 bits both ways, 1.14 s centred against 0.26 s
/// direct; llama-stories260k's SAN + MLP keeps 30 digits centred against
/// 46 direct at 257 bits (llama-tinystories-xs's, where it collapses
/// further: 257 bits centred, 1025 direct).
ForwardMethod enclosed_method(const Model& model, const Variant& variant, const PrecisionRequest& request) {
  const ForwardMethod m = request.resolved_method();
  if (request.method || m != ForwardMethod::centred) return m;
  return model.arch().gated_mlp && variant.mlp != MlpKind::none ? ForwardMethod::direct : m;
}

void check_request(const PrecisionRequest& request, Center center) {
  if (center == Center::median) refuse("the median centre; use --center mean or optimal");
  if (!request.measures.empty()) refuse("--measures");
  if (request.emulate) refuse("--emulate");
}

/// The enclosures of every layer at tier p, by the direct or the centred pass.
std::vector<ResidualEnclosure> enclose_at(const Precision& p, const Model& model, const Variant& variant,
                                          const InputSpec& input, ForwardMethod method, Center center,
                                          const ProgressFn& progress) {
  return with_scalar(p, [&](auto tag) -> std::vector<ResidualEnclosure> {
    using S = typename decltype(tag)::type;
    if constexpr (!is_mpfr_v<S>) {
      throw std::logic_error("analyze_forward_certified: double reached the enclosed pass");
    } else {
      const bool centred = method == ForwardMethod::centred;
      EnclosureOptions opt;
      opt.on_layer = layer_progress(progress, std::string("enclosed ") + (centred ? "centred" : "direct") +
                                                  " pass at " + p.name(),
                                    model.arch().layers);
      const BallMatrix<S> X0 = input_enclosed<S>(model, input);
      std::vector<ResidualEnclosure> out;
      if (centred) {
        const EnclosedCentredTrace<S> t = forward_centred_enclosed<S>(model, variant, X0, opt);
        for (std::size_t l = 0; l < t.R.size(); ++l) out.push_back(enclose_centred_residual(t, static_cast<int>(l), center));
      } else {
        const EnclosedTrace<S> t = forward_enclosed<S>(model, variant, X0, opt);
        for (const BallMatrix<S>& X : t.X) out.push_back(enclose_residual(X, center));
      }
      return out;
    }
  });
}

/// A value with the digits its enclosure proves (at most `most`: what the
/// printed value can carry; it prints min(proven, asked) of them): `printed`
/// (a double run's value) or else the enclosure's midpoint. A value none of
/// whose digits is proven is printed as the bound it is known by: |x| ≤
/// max(|lo|, |hi|) < the next power of ten.
Quantity proven_quantity(const Interval& iv, const BigReal* printed, int asked, int most) {
  Quantity q;
  q.asked = asked;
  q.enclosure = iv;
  if (printed) {
    q.value = *printed;
  } else {
    const mpfr_prec_t prec =
        std::max(mpfr_get_prec(iv.lo.backend().data()), mpfr_get_prec(iv.hi.backend().data())) + 2;
    q.value = BigReal(0, static_cast<unsigned>(std::ceil(prec * 0.30103)) + 2);
    mpfr_add(q.value.backend().data(), iv.lo.backend().data(), iv.hi.backend().data(), MPFR_RNDN);
    mpfr_div_2ui(q.value.backend().data(), q.value.backend().data(), 1, MPFR_RNDN);
  }
  const int d = proven_digits(iv, q.value, most);
  q.digits = d;
  if (d == 0 && !(mpfr_zero_p(iv.lo.backend().data()) && mpfr_zero_p(iv.hi.backend().data()))) {
    q.below_resolution = true;
    q.bound = power_of_ten_above(abs(iv.lo) > abs(iv.hi) ? abs(iv.lo) : abs(iv.hi));
  }
  return q;
}

/// Layer l's report from its enclosures; with `computed` (a double run's
/// report of the layer) its values are the ones printed, with the digits proven.
LayerReport layer_report(int l, const ResidualEnclosure& e, int asked, int most,
                         const LayerReport* computed = nullptr) {
  // An end that overflowed or is NaN bounds nothing: the enclosure is void at this tier (a tier up may not be).
  for (const Interval* iv : {&e.res_one, &e.res_inf, &e.res_composite, &e.res_frobenius, &e.norm_composite,
                             &e.norm_frobenius, &e.relative_residual})
    if (!mpfr_number_p(iv->lo.backend().data()) || !mpfr_number_p(iv->hi.backend().data()))
      throw NumericalError("certified enclosures: layer " + std::to_string(l) +
                           ": the balls grew without bound, so no digit and no bound of its norms is proven at "
                           "this precision");
  const auto value = [&](const Quantity LayerReport::*q) { return computed ? &((*computed).*q).value : nullptr; };
  LayerReport r;
  r.layer = l;
  r.res_one = proven_quantity(e.res_one, value(&LayerReport::res_one), asked, most);
  r.res_inf = proven_quantity(e.res_inf, value(&LayerReport::res_inf), asked, most);
  r.res_composite = proven_quantity(e.res_composite, value(&LayerReport::res_composite), asked, most);
  r.res_frobenius = proven_quantity(e.res_frobenius, value(&LayerReport::res_frobenius), asked, most);
  r.norm_composite = proven_quantity(e.norm_composite, value(&LayerReport::norm_composite), asked, most);
  r.norm_frobenius = proven_quantity(e.norm_frobenius, value(&LayerReport::norm_frobenius), asked, most);
  r.relative_residual = proven_quantity(e.relative_residual, value(&LayerReport::relative_residual), asked, most);
  if (e.res_composite_lower) {
    const BigReal* printed = computed && computed->res_composite_lower ? &computed->res_composite_lower->value : nullptr;
    r.res_composite_lower = proven_quantity(*e.res_composite_lower, printed, asked, most);
  }
  int least = most;
  for (const Quantity* q : {&r.res_one, &r.res_inf, &r.res_composite, &r.res_frobenius, &r.norm_composite,
                            &r.norm_frobenius, &r.relative_residual})
    least = std::min(least, *q->digits);
  if (r.res_composite_lower) least = std::min(least, *r.res_composite_lower->digits);
  r.digits = least;
  return r;
}

/// How fast a pass's radii outgrow the true errors (ball arithmetic adds errors in absolute value; a
/// product of width k moves an entrywise radius by about √k/2 times what it moves a vector): the bits a
/// certified run adds to the digits asked before it starts, a margin and so many a layer. Measured
/// (docs/performance.md, "Where a certified run starts"):
///  - the direct pass: 64 and 16 a layer (4 to 5.5 digits a layer, tests/compute/test_enclosure.cpp);
///  - the centred pass without an MLP, whose attention carries row norms through the weights
///    (enclosure_centred_impl.hpp): 32 and log2(d) + 2 a layer (7 bits at d = 32, 11.6 at d = 768);
///  - the centred pass with an MLP and skip connections, whose rows do not collapse (row bounds
///    through LayerNorm and the MLP as well): 32 and log2(d) + 7 a layer (5.8 bits at
///    d = 64, 11.6 at 96, 15.8 at 768);
///  - the centred pass with an MLP and no skip (collapsing rows, c's error carried into them second
///    order): 32 and log2(d) + 8 a layer (9.6 bits measured at d = 32, 17.4 at 768).
struct Growth {
  long margin = 64;
  double per_layer = 16;
};

Growth growth_of(ForwardMethod method, const Architecture& a, const Variant& variant) {
  if (method != ForwardMethod::centred) return {};
  if (variant.mlp == MlpKind::none) return {32, std::log2(std::max(a.d_model, 2)) + 2};
  if (variant.skip) return {32, std::log2(std::max(a.d_model, 2)) + 7};  // rows not collapsed: row bounds
  return {32, std::log2(std::max(a.d_model, 2)) + 8};
}

long start_bits(int asked, int layers, const Growth& g = {}) {
  return static_cast<long>(std::ceil(asked * 3.3219280948873623 + g.per_layer * layers)) + g.margin;
}

/// The least digits proven of a value that is not exactly zero (more bits prove more).
int least_digits(const std::vector<LayerReport>& layers) {
  int least = std::numeric_limits<int>::max();
  for (const LayerReport& r : layers) least = std::min(least, *r.digits);
  return least;
}

/// The tier a certified run starts at: start_bits for `digits` (0: the
/// digits asked) on the request's ladder (an MPFR tier: 65 bits at least),
/// or the fixed tier.
Precision start_tier(const PrecisionRequest& request, int layers, const Growth& g = {}, int digits = 0) {
  if (!request.automatic) return request.fixed;
  const Precision p = request.tier_for(std::max(65L, start_bits(digits > 0 ? digits : request.target_digits, layers, g)));
  return p.native_double ? Precision::at_least(65) : p;
}

/// attempt(p), or nullopt when its balls grew too wide at tier p to bound a
/// denominator away from 0 (NumericalError: the enclosure is void there, a
/// tier up may not be) and `can_rise`; rethrown otherwise.
template <class F> auto attempt_or_rise(const Precision& p, bool can_rise, F&& attempt) -> std::optional<decltype(attempt(p))> {
  try {
    return attempt(p);
  } catch (const NumericalError&) {
    if (!can_rise) throw;
    return std::nullopt;
  }
}

/// Runs `attempt` (the least digits it proves at a tier) at start_tier, then
/// with --precision auto one tier up at a time until it proves the digits
/// asked or the ceiling stops it; records the tiers run in `r`.
template <class F> void climb(Provenance& r, const PrecisionRequest& request, int layers, F&& attempt) {
  Precision p = start_tier(request, layers);
  if (request.automatic) r.ceiling_bits = request.ceiling();
  for (;;) {
    const bool can_rise = request.automatic && request.rises_from(p);
    const std::optional<int> least = attempt_or_rise(p, can_rise, attempt);
    r.tried_bits.push_back(p.bits);
    r.precision = p;
    if (!request.automatic || (least && *least >= request.target_digits)) return;
    if (!can_rise) {
      r.ceiling_reached = true;  // the digits asked need more bits than allowed
      return;
    }
    p = p.next();
  }
}

/// `use` of the enclosed direct pass at tier p with its attention matrices kept.
template <class R, class F>
R with_recorded_trace(const Precision& p, const Model& model, const Variant& variant, const InputSpec& input,
                      const ProgressFn& progress, F&& use) {
  return with_scalar(p, [&](auto tag) -> R {
    using S = typename decltype(tag)::type;
    if constexpr (!is_mpfr_v<S>) {
      throw std::logic_error("certified path decomposition: double reached the enclosed pass");
    } else {
      EnclosureOptions opt;
      opt.record_attention = true;
      opt.on_layer = layer_progress(progress, "enclosed direct pass at " + p.name(), model.arch().layers);
      const EnclosedTrace<S> t = forward_enclosed<S>(model, variant, input_enclosed<S>(model, input), opt);
      return use(t);
    }
  });
}

/// What every certified analysis of the path decomposition (the direct pass in balls) requires: an
/// attention-only variant the model supports, at an MPFR tier (`what` is refused in double).
void require_decomposition(const Model& model, const Variant& variant, const PrecisionRequest& request,
                           const std::string& what) {
  require_attention_only(variant);
  model.check_supports(variant);
  if (!request.automatic && request.fixed.native_double)
    refuse("--precision double for " + what + " (enclosed at an MPFR tier: give a precision in bits or auto)");
}

/// require_decomposition, then the fields such a report starts with.
void start_decomposition(PathReportBase& r, const Model& model, const Variant& variant,
                         const PrecisionRequest& request, const std::string& what) {
  require_decomposition(model, variant, request, what);
  r.variant = variant;
  r.method = ForwardMethod::direct;  // the decomposition is of the direct pass
  r.chosen_by = ForwardMethod::direct;
  r.check_method = CheckMethod::certified;
  r.layers = model.arch().layers;
  r.heads = model.arch().heads;
}

}  // namespace

ForwardAnalysis analyze_forward_certified(const Model& model, const Variant& variant, const InputSpec& input,
                                          const PrecisionRequest& request, Center center,
                                          const ProgressFn& progress) {
  model.check_supports(variant);
  check_request(request, center);
  ForwardAnalysis out;
  out.variant = variant;
  out.center = center;
  // Auto runs the centred pass where it is enclosed (as uncertified runs
  // do); --method direct or a fixed precision the direct pass.
  const ForwardMethod method = enclosed_method(model, variant, request);
  out.method = method;
  out.chosen_by = method;
  out.check_method = CheckMethod::certified;
  const int asked = request.target_digits;
  if (!request.automatic && request.fixed.native_double) {
    // Double proven after the fact: the double run's values, each with the
    // digits that one enclosed run (far tighter than double's own errors:
    // start_bits for 17 digits) proves; recorded as the check. The enclosed
    // run is the centred pass where it covers the model (it encloses the same
    // exact values, with radii relative to the residual: 181 s against 235 s
    // on BERT-base's full model), unless --method direct asks for the direct one.
    PrecisionRequest plain = request;
    plain.check = CheckMethod::automatic;
    plain.confirm = false;
    plain.method = ForwardMethod::direct;
    ForwardAnalysis d = analyze_forward(model, variant, input, plain, center, progress);
    PrecisionRequest centred = request;
    centred.automatic = true;  // double's enclosed run: the centred pass where it is enclosed, unless asked otherwise
    const ForwardMethod enclosed_by = enclosed_method(model, variant, centred);
    Precision p = start_tier(centred, model.arch().layers, growth_of(enclosed_by, model.arch(), variant), 17);
    std::optional<std::vector<ResidualEnclosure>> enclosures;
    while (!enclosures) {
      enclosures = attempt_or_rise(p, centred.rises_from(p), [&](const Precision& at) {
        return enclose_at(at, model, variant, input, enclosed_by, center, progress);
      });
      if (!enclosures) p = p.next();
    }
    for (std::size_t l = 0; l < enclosures->size(); ++l)
      d.layers[l] = layer_report(static_cast<int>(l), (*enclosures)[l], asked, 17, &d.layers[l]);
    d.check = p;
    d.check_method = CheckMethod::certified;
    return d;
  }
  // Auto: start_bits, then up to the tier the residuals need.
  Precision p = start_tier(request, model.arch().layers, growth_of(method, model.arch(), variant));
  if (request.automatic) out.ceiling_bits = request.ceiling();
  for (;;) {
    const bool can_rise = request.automatic && request.rises_from(p);
    const std::optional<std::vector<ResidualEnclosure>> tried = attempt_or_rise(p, can_rise, [&](const Precision& at) {
      return enclose_at(at, model, variant, input, method, center, progress);
    });
    out.tried_bits.push_back(p.bits);
    if (!tried) {  // void at this tier: one up
      p = p.next();
      continue;
    }
    const std::vector<ResidualEnclosure>& enclosures = *tried;
    out.precision = p;
    out.layers.clear();
    for (std::size_t l = 0; l < enclosures.size(); ++l)
      out.layers.push_back(layer_report(static_cast<int>(l), enclosures[l], asked, decimal_digits(p.bits)));
    if (!request.automatic || least_digits(out.layers) >= asked) break;
    if (!can_rise) {
      out.ceiling_reached = true;  // the digits asked need more bits than allowed
      break;
    }
    // Direct: jump to the tier the smallest residual seen needs (the digits
    // asked beside its cancellation) rather than one tier at a time. The
    // centred pass has no such cancellation: one tier up.
    double deepest = 0;  // log10 of the smallest relative residual's upper end
    for (const ResidualEnclosure& e : method == ForwardMethod::direct ? enclosures : std::vector<ResidualEnclosure>{})
      if (!mpfr_inf_p(e.relative_residual.hi.backend().data()) && !mpfr_zero_p(e.relative_residual.hi.backend().data()))
        deepest = std::min(deepest, log10_abs(e.relative_residual.hi));
    const double need = (asked - deepest) * 3.3219280948873623 + 64;
    const Precision jump = request.tier_for(static_cast<long>(std::min(need, 1e15)));
    p = jump.bits > p.bits ? jump : p.next();
  }
  return out;
}

LengthSumsReport analyze_length_sums_certified(const Model& model, const Variant& variant, const InputSpec& input,
                                               const PrecisionRequest& request, const ProgressFn& progress) {
  LengthSumsReport r;
  start_decomposition(r, model, variant, request, "the length sums");
  const Architecture& a = model.arch();
  const int asked = request.target_digits;
  const std::vector<PathCount> counts = count_paths_by_length(a.layers, a.heads, variant.skip);
  climb(r, request, a.layers, [&](const Precision& p) {
    const EnclosedLengthSums s = with_recorded_trace<EnclosedLengthSums>(
        p, model, variant, input, progress, [&](const auto& t) {
          report_progress(progress, "enclosed length sums at " + p.name(), 0, 0);
          r.tokens = static_cast<long>(t.X[0].mid.rows());
          return enclose_length_sums(model, t);
        });
    const int most = decimal_digits(p.bits);
    r.lengths.clear();
    PathCount total = 0;
    int least = most;
    for (std::size_t k = 0; k < counts.size(); ++k) {
      LengthSumEntry e;
      e.length = static_cast<int>(k);
      e.count = counts[k].str();
      total += counts[k];
      if (s.terms[k]) {
        e.frobenius = proven_quantity(s.terms[k]->norm_frobenius, nullptr, asked, most);
        e.residual = proven_quantity(s.terms[k]->res_composite, nullptr, asked, most);
      } else {  // no path of this length: S_k = 0 exactly
        e.frobenius = proven_quantity(s.share[k], nullptr, asked, most);
        e.residual = e.frobenius;
      }
      e.share = proven_quantity(s.share[k], nullptr, asked, most);
      e.digits = std::min({*e.frobenius.digits, *e.residual.digits, *e.share.digits});
      if (s.terms[k]) least = std::min(least, *e.digits);
      r.lengths.push_back(std::move(e));
    }
    r.total_count = total.str();
    r.output_frobenius = proven_quantity(s.output_frobenius, nullptr, asked, most);
    r.decomposition_error = proven_quantity(s.error, nullptr, asked, most);
    return std::min(least, *r.output_frobenius.digits);
  });
  return r;
}

PathEnumerationReport analyze_enumeration_certified(const Model& model, const Variant& variant,
                                                    const InputSpec& input, const PrecisionRequest& request,
                                                    const EnumerationRequest& enumeration,
                                                    const ProgressFn& progress) {
  require_decomposition(model, variant, request, "path terms");
  const int asked = request.target_digits;
  // The paths (which pass the filter; a top-K selection and its order) at
  // the tier the enclosures start at, without a check run.
  PrecisionRequest plain = request;
  plain.check = CheckMethod::automatic;
  plain.confirm = false;
  plain.automatic = false;
  plain.fixed = start_tier(request, model.arch().layers);
  PathEnumerationReport r = analyze_enumeration(model, variant, input, plain, enumeration, progress);
  r.check.reset();
  r.check_method = CheckMethod::certified;
  r.tried_bits.clear();
  r.chosen_by = ForwardMethod::direct;
  r.selected_at = r.precision;
  std::vector<std::vector<int>> heads;
  heads.reserve(r.paths.size());
  for (const PathTermEntry& e : r.paths) heads.push_back(e.heads);
  climb(r, request, model.arch().layers, [&](const Precision& p) {
    std::optional<Interval> error;
    const std::vector<EnclosedPathTerm> terms = with_recorded_trace<std::vector<EnclosedPathTerm>>(
        p, model, variant, input, progress, [&](const auto& t) {
          report_progress(progress, "enclosed path terms at " + p.name(), 0, static_cast<long>(heads.size()));
          if (r.all_paths) error = enclose_length_sums(model, t).error;
          return enclose_path_terms(model, t, heads);
        });
    const int most = decimal_digits(p.bits);
    int least = most;
    for (std::size_t i = 0; i < terms.size(); ++i) {
      PathTermEntry& e = r.paths[i];
      e.norm_composite = proven_quantity(terms[i].norm_composite, nullptr, asked, most);
      e.norm_frobenius = proven_quantity(terms[i].norm_frobenius, nullptr, asked, most);
      e.residual_composite = proven_quantity(terms[i].residual_composite, nullptr, asked, most);
      e.stochastic_residual = proven_quantity(terms[i].stochastic_residual, nullptr, asked, most);
      e.digits = std::min({*e.norm_composite.digits, *e.norm_frobenius.digits, *e.residual_composite.digits,
                           *e.stochastic_residual.digits});
      least = std::min(least, *e.digits);
    }
    if (error) r.decomposition_error = proven_quantity(*error, nullptr, asked, most);
    return least;
  });
  return r;
}

EffectivenessReport analyze_effectiveness_certified(const Model& model, const Variant& variant,
                                                    const InputSpec& input, const PrecisionRequest& request,
                                                    const TaskHead* head, const ProgressFn& progress) {
  EffectivenessReport r;
  start_decomposition(r, model, variant, request, "the effectiveness curve");
  const Architecture& a = model.arch();
  const int asked = request.target_digits;
  if (head) {
    r.head = head->kind;
    r.outputs = head->outputs();
  }
  const std::vector<PathCount> counts = count_paths_by_length(a.layers, a.heads, variant.skip);
  climb(r, request, a.layers, [&](const Precision& p) {
    const EnclosedEffectiveness e = with_recorded_trace<EnclosedEffectiveness>(
        p, model, variant, input, progress, [&](const auto& t) {
          report_progress(progress, "enclosed effectiveness at " + p.name(), 0, 0);
          r.tokens = static_cast<long>(t.X[0].mid.rows());
          return enclose_effectiveness(model, t, head);
        });
    const int most = decimal_digits(p.bits);
    r.lengths.clear();
    PathCount upto = 0;
    int least = most;
    for (std::size_t k = 0; k < e.points.size(); ++k) {
      const EnclosedEffectivenessPoint& x = e.points[k];
      EffectivenessEntry entry;
      entry.length = x.length;
      upto += counts[k];
      entry.count = upto.str();
      entry.distance = proven_quantity(x.distance, nullptr, asked, most);
      int digits = *entry.distance.digits;
      if (x.head) {
        r.predictions = x.head->predictions;
        entry.agree = x.head->agree_fewest;
        entry.agree_most = x.head->agree_most;
        entry.kl = proven_quantity(x.head->mean_kl, nullptr, asked, most);
        digits = std::min(digits, *entry.kl->digits);
      }
      entry.digits = digits;
      if (k + 1 < e.points.size()) least = std::min(least, digits);  // k = L: 0 exactly, a bound
      r.lengths.push_back(std::move(entry));
    }
    r.output_frobenius = proven_quantity(e.output_frobenius, nullptr, asked, most);
    return std::min(least, *r.output_frobenius.digits);
  });
  return r;
}

RerunReport analyze_rerun_certified(const Model& model, const Variant& variant, const InputSpec& input,
                                    const PrecisionRequest& request, const RerunRequest& rerun, const TaskHead* head,
                                    const ProgressFn& progress) {
  model.check_supports(variant);
  if (!request.automatic && request.fixed.native_double)
    refuse("--precision double for the re-run sub-networks (enclosed at an MPFR tier: give a precision in bits or "
           "auto)");
  const bool exact = variant.attention_only();
  RerunReport r;
  if (exact) {
    r.exact = analyze_effectiveness_certified(model, variant, input, request, head,
                                              prefixed_progress(progress, "exact: "));
    static_cast<PathReportBase&>(r) = static_cast<const PathReportBase&>(*r.exact);
    r.tried_bits.clear();  // the re-runs' own climb below (the exact sense keeps its own)
    r.ceiling_reached = false;
  } else {
    r.variant = variant;
    r.method = ForwardMethod::direct;  // the sub-networks start from the direct pass's X^0 and end at its X^L
    r.chosen_by = ForwardMethod::direct;
    r.check_method = CheckMethod::certified;
    r.layers = model.arch().layers;
    r.heads = model.arch().heads;
  }
  r.request = rerun;
  if (head) {
    r.head = head->kind;
    r.outputs = head->outputs();
  }
  const RerunOptions options = rerun_options(rerun);
  const int asked = request.target_digits;
  climb(r, request, model.arch().layers, [&](const Precision& p) {
    const EnclosedRerun e = with_scalar(p, [&](auto tag) -> EnclosedRerun {
      using S = typename decltype(tag)::type;
      if constexpr (!is_mpfr_v<S>) {
        throw std::logic_error("certified re-runs: double reached the enclosed pass");
      } else {
        EnclosureOptions opt;
        opt.record_attention = exact;
        opt.on_layer = layer_progress(progress, "re-run: enclosed direct pass at " + p.name(), model.arch().layers);
        const EnclosedTrace<S> t = forward_enclosed<S>(model, variant, input_enclosed<S>(model, input), opt);
        r.tokens = static_cast<long>(t.X[0].mid.rows());
        report_progress(progress, "re-run: enclosed sub-networks at " + p.name(), 0, 0);
        return enclose_rerun(model, t, head, options);
      }
    });
    const int most = decimal_digits(p.bits);
    int least = most;
    // The statistics over the repetitions, from each one's proven value
    // (only the first when every path of the length was run).
    const auto over_repeats = [&](const std::vector<Interval>& each, bool all_paths, std::vector<Quantity>& q) {
      const std::size_t R = all_paths ? 1 : each.size();
      for (std::size_t i = 0; i < R; ++i) {
        q.push_back(proven_quantity(each[i], nullptr, asked, most));
        // A value none of whose digits is proven counts once it is known to be
        // nonzero; one whose enclosure keeps 0 may be 0 exactly (the gap of a
        // length whose every path was run with attention that cannot change),
        // which no tier proves otherwise.
        if (!q.back().below_resolution) least = std::min(least, *q.back().digits);
      }
      return summarize(q);
    };
    r.lengths.clear();
    for (const EnclosedRerunPoint& x : e.points) {
      RerunEntry entry;
      entry.length = x.length;
      entry.count = x.count.str();
      entry.all_paths = x.all_paths;
      entry.evaluated = x.evaluated;
      entry.distance = over_repeats(x.distance, x.all_paths, entry.distance_each);
      if (!x.gap.empty()) entry.gap = over_repeats(x.gap, x.all_paths, entry.gap_each);
      if (!x.head.empty()) {
        std::vector<Interval> kl;
        const std::size_t R = x.all_paths ? 1 : x.head.size();
        for (std::size_t i = 0; i < R; ++i) {
          entry.agree.push_back(x.head[i].agree_fewest);
          entry.agree_most.push_back(x.head[i].agree_most);
          r.predictions = x.head[i].predictions;
        }
        for (const EnclosedAgreement& h : x.head) kl.push_back(h.mean_kl);
        entry.kl = over_repeats(kl, false, entry.kl_each);
      }
      r.lengths.push_back(std::move(entry));
    }
    r.output_frobenius = proven_quantity(e.output_frobenius, nullptr, asked, most);
    return std::min(least, *r.output_frobenius.digits);
  });
  return r;
}

}  // namespace sanpath

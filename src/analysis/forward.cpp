#include "sanpath/analysis/forward.hpp"
#include "sanpath/analysis/certified.hpp"
#include "sanpath/compute/forward_centred.hpp"

#include "sanpath/analysis/double_check.hpp"
#include "sanpath/core/errors.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/core/progress.hpp"
#include "sanpath/core/dispatch.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace sanpath {

std::string to_string(ForwardMethod m) { return m == ForwardMethod::centred ? "centred" : "direct"; }

ForwardMethod parse_method(const std::string& text) {
  if (text == "direct") return ForwardMethod::direct;
  if (text == "centred") return ForwardMethod::centred;
  throw std::invalid_argument("method: '" + text + "' is not one of direct, centred");
}

ForwardMethod PrecisionRequest::resolved_method() const {
  if (method) return *method;
  return automatic ? ForwardMethod::centred : ForwardMethod::direct;
}

bool reads_weights_in_place(const PrecisionRequest& req, Center center) {
  if (req.automatic || !req.fixed.native_double || req.emulate || req.resolved_method() != ForwardMethod::direct)
    return false;
  if (!req.confirm) return true;
  try {
    return uses_rounding_check(req.check, req.fixed, center);
  } catch (const std::invalid_argument&) {
    return false;  // refused when the analysis runs, with its message
  }
}

long PrecisionRequest::ceiling() const {
  if (!automatic) return Precision::max_bits();
  const long top = max_bits > 0 ? std::min(max_bits, Precision::max_bits()) : Precision::max_bits();
  if (top < 53) throw std::invalid_argument("precision: the auto ceiling of " + std::to_string(top) + " bits is below 53");
  return top;
}

Precision PrecisionRequest::tier_for(long need) const {
  const long top = ceiling();
  const Precision p = Precision::at_least(std::max(53L, std::min(need, top)));
  if (p.bits <= top) return p;
  Precision best = Precision::at_least(53);
  for (long t : Precision::tiers())
    if (t <= top) best = Precision::at_least(t);
  return best;
}

bool PrecisionRequest::rises_from(const Precision& p) const { return !p.is_top() && p.next().bits <= ceiling(); }

std::optional<Precision> PrecisionRequest::confirming_tier(const Precision& p) {
  if (!p.is_top()) return p.next();
  const std::vector<long>& tiers = Precision::tiers();
  if (tiers.size() < 2) return std::nullopt;
  return Precision::at_least(tiers[tiers.size() - 2]);
}

PrecisionRequest PrecisionRequest::parse(const std::string& text) {
  PrecisionRequest r;
  if (text == "auto") return r;
  r.automatic = false;
  r.fixed = Precision::parse(text);
  return r;
}

int PrecisionRequest::checked_digits(int digits) {
  if (digits < 1 || digits > 100000) throw std::invalid_argument(std::to_string(digits) + " is outside [1, 100000]");
  return digits;
}

long PrecisionRequest::checked_max_bits(long bits) {
  if (bits != 0 && (bits < 53 || bits > Precision::max_bits()))
    throw std::invalid_argument(std::to_string(bits) + " is outside [53, " + std::to_string(Precision::max_bits()) +
                                "]");
  return bits;
}

std::string PrecisionRequest::describe() const {
  return (automatic ? "auto (" + std::to_string(target_digits) + " digits wanted)" : fixed.name()) + ", " +
         to_string(resolved_method()) + " pass";
}

namespace {

std::vector<LayerStats> measure_at(const Precision& p, const Model& model, const Variant& variant,
                                   const InputSpec& input, Center center, ForwardMethod method,
                                   const ProgressFn& progress, const std::string& stage,
                                   const MeasureSet& measures = {}, long perturb_bits = 0) {
  const std::function<void(int, int)> on_layer = layer_progress(progress, stage, model.arch().layers);
  std::vector<LayerStats> stats = with_scalar(p, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return measure_layers<S>(model, variant, input, center, method, on_layer, measures, perturb_bits);
  });
  // Double's exponent range ends at 1.8e308: a pass that overflowed into
  // inf/NaN measured nothing. (MPFR exponents do not overflow in practice.)
  for (std::size_t l = 0; l < stats.size(); ++l) {
    const LayerStats& s = stats[l];
    for (const BigReal* v : {&s.norm_composite, &s.norm_frobenius, &s.res_composite, &s.res_one, &s.res_inf,
                             &s.res_frobenius, &s.relative_residual})
      if (!mpfr_number_p(v->backend().data()))
        throw NumericalError(model.source() + ": layer " + std::to_string(l) + ": the forward pass at " + p.name() +
                             " overflowed (values beyond the range of the working precision); run at --precision 65 "
                             "or higher, whose exponent range does not overflow");
  }
  return stats;
}

std::string pass_name(ForwardMethod method) { return method == ForwardMethod::centred ? "centred pass" : "forward pass"; }

/// The smallest relative residual of any layer; one that rounded to exactly
/// 0 is unresolved and counts as one unit of the working precision.
BigReal smallest_relative_residual(const std::vector<LayerStats>& stats, const Precision& p) {
  const BigReal unit = pow(BigReal(2, 30), BigReal(-p.bits, 30));
  BigReal rho_min(1, 30);
  for (const LayerStats& s : stats) {
    const BigReal rho = s.relative_residual > 0 ? s.relative_residual : unit;
    if (rho < rho_min) rho_min = rho;
  }
  return rho_min;
}

/// The bits of the direct pass that resolve the smallest relative residual
/// of `stats` with the digits asked.
long direct_bits_needed(const std::vector<LayerStats>& stats, const Precision& p, const Model& model,
                        const InputSpec& input, const PrecisionRequest& request) {
  return bits_to_resolve(smallest_relative_residual(stats, p), request.target_digits, input.rows(&model),
                         model.arch().d_model, model.arch().layers);
}

/// The auto ladder on the direct pass: passes from 128 bits up, each tier
/// chosen by bits_to_resolve. A fixed request is measured once when
/// `measured` is given, else returned without running anything.
PrecisionChoice direct_ladder(const Model& model, const Variant& variant, const InputSpec& input,
                              const PrecisionRequest& request, Center center, const ProgressFn& progress,
                              std::vector<LayerStats>* measured) {
  PrecisionChoice out;
  const ForwardMethod method = request.resolved_method();
  Precision p = request.automatic ? request.tier_for(128) : request.fixed;
  if (!request.automatic && measured == nullptr) {
    out.precision = p;
    out.tried_bits.push_back(p.bits);
    return out;
  }
  std::vector<LayerStats> stats;
  for (;;) {
    stats = measure_at(p, model, variant, input, center, method, progress, pass_name(method) + " at " + p.name(),
                       request.measures);
    out.tried_bits.push_back(p.bits);
    if (!request.automatic) break;
    const long need = direct_bits_needed(stats, p, model, input, request);
    if (need <= p.bits) break;
    const Precision q = request.tier_for(need);
    if (q.bits <= p.bits) {  // the tier needed lies above the ceiling
      out.ceiling_reached = true;
      break;
    }
    p = q;
  }
  out.precision = p;
  if (measured != nullptr) *measured = std::move(stats);
  return out;
}

/// Auto, centred: the tier for request.target_digits digits of any residual.
/// No cancellation: the digits plus the bits rounding typically costs, that
/// is √(n·d) for the products and √3 a layer for the relative error a layer
/// multiplies by about 3 (the cubic map of Theorem 2.2), and 8 bits of room.
/// A first guess, not a bound: the confirming run one tier up decides, and
/// auto escalates when it falls short. (Measured losses: 15 bits on issue
/// 12's 10-layer model, 18 on a 12-layer BERT-base-shaped SAN at n = 128;
/// this guess allows 20 and 26.)
Precision centred_start(const Model& model, const InputSpec& input, const PrecisionRequest& request) {
  const double nd = static_cast<double>(std::max(2L, input.rows(&model) * model.arch().d_model));
  const double need = request.target_digits * std::log2(10.0) + 0.5 * std::log2(nd) +
                      0.5 * std::log2(3.0) * model.arch().layers + 8.0;
  return request.tier_for(static_cast<long>(std::ceil(need)));
}

/// The measures of one layer, confirmed by the check run's (`ck`, null: no
/// check run). Measures that tend to 0 (µ, the SVD residual, the
/// companions of the measures that tend to 1) are residuals: an exact 0 of
/// a nonzero X is rounding, below resolution. The attention measures keep
/// clear of what underflow took from P (clear_of_underflow). A measure the
/// check run did not compute (undefined there) is not reported.
std::vector<MeasureReport> measure_reports(const LayerStats& s, const LayerStats* ck, long bits, int asked, long n,
                                           long d) {
  std::vector<MeasureReport> out;
  for (const MeasureValue& v : s.measures) {
    const MeasureValue* check = nullptr;
    if (ck) {
      for (const MeasureValue& c : ck->measures)
        if (c.name == v.name) check = &c;
      if (check == nullptr) continue;
    }
    const bool residual = v.name == "mu" || v.name == "svd_residual" || v.name == "one_minus_cosine" ||
                          v.name == "stable_rank_minus_one" || v.name == "effective_rank_minus_one";
    const BigReal scale = v.name == "mu" ? s.norm_frobenius : BigReal(1, 30);
    const BigReal* cv = check ? &check->value : nullptr;
    const Quantity q = residual ? confirmed_residual(v.value, cv, bits, asked, scale, n, d)
                                : confirmed(v.value, cv, bits, asked);
    // The check run's exponent range is the pass's: what underflow took, it took in both.
    out.push_back({v.name, clear_of_underflow(q, v.value, check && check->flushed > v.flushed ? check->flushed
                                                                                              : v.flushed)});
  }
  return out;
}

/// The reports of every layer: `stats` at precision p, confirmed by `checked`
/// (null: no check run) at `check_bits`, printed to at most `asked` digits.
std::vector<LayerReport> layer_reports(const std::vector<LayerStats>& stats, const std::vector<LayerStats>* ck,
                                       const Precision& p, long check_bits, int asked, long n, long d) {
  std::vector<LayerReport> out;
  const long bits = ck ? std::min(p.bits, check_bits) : p.bits;  // digits the confirmation can give
  for (std::size_t l = 0; l < stats.size(); ++l) {
    const LayerStats& s = stats[l];
    const LayerStats& c = ck ? (*ck)[l] : s;
    LayerReport r;
    r.layer = static_cast<int>(l);
    const auto residual = [&](const BigReal& v, const BigReal& cv, const BigReal& norm) {
      // Without a check run (--no-confirm) the value as computed, unconfirmed.
      return confirmed_residual(v, ck ? &cv : nullptr, bits, asked, norm, n, d);
    };
    const auto value = [&](const BigReal& v, const BigReal& cv) {
      return confirmed(v, ck ? &cv : nullptr, bits, asked);
    };
    r.res_one = residual(s.res_one, c.res_one, s.norm_composite);
    r.res_inf = residual(s.res_inf, c.res_inf, s.norm_composite);
    r.res_composite = residual(s.res_composite, c.res_composite, s.norm_composite);
    r.res_frobenius = residual(s.res_frobenius, c.res_frobenius, s.norm_frobenius);
    if (s.res_composite_lower) {
      r.res_composite_lower = residual(*s.res_composite_lower, *c.res_composite_lower, s.norm_composite);
      // Digits of math.md's quantity, not only of this bound's value.
      limit_digits(*r.res_composite_lower, s.res_composite_lower_digits);
      // [composite_lower, composite] is an enclosure: print it outward.
      r.res_composite_lower->rounding = Rounding::down;
      r.res_composite.rounding = Rounding::up;
    }
    r.norm_composite = value(s.norm_composite, c.norm_composite);
    r.norm_frobenius = value(s.norm_frobenius, c.norm_frobenius);
    r.relative_residual = residual(s.relative_residual, c.relative_residual, BigReal(1, 30));
    r.measures = measure_reports(s, ck ? &c : nullptr, bits, asked, n, d);
    const Quantity* lower = r.res_composite_lower ? &*r.res_composite_lower : &r.res_composite;
    // With a check run, a value below resolution has 0 confirmed digits.
    if (ck) {
      r.digits = least_digits({&r.res_composite, lower, &r.res_one, &r.res_inf, &r.res_frobenius, &r.norm_composite,
                               &r.norm_frobenius, &r.relative_residual})
                     .value_or(0);
      for (const MeasureReport& m : r.measures) r.digits = std::min(*r.digits, m.value.digits.value_or(0));
    }
    out.push_back(std::move(r));
  }
  return out;
}

/// The least digits the confirmation gave any quantity that more precision
/// can improve: the lower end of the optimal centre's enclosure is limited by
/// its linear program, and an exact 0 (identical rows) has no digits to gain
/// unless the (perturbed) confirming run `ck` found a nonzero residual there:
/// then the rows became identical by rounding, and more bits resolve them.
int least_rounding_digits(const std::vector<LayerReport>& layers, const std::vector<LayerStats>& ck) {
  int least = std::numeric_limits<int>::max();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerReport& r = layers[l];
    for (const Quantity* q : {&r.res_composite, &r.res_one, &r.res_inf, &r.res_frobenius, &r.norm_composite,
                              &r.norm_frobenius, &r.relative_residual})
      if (q->value != 0) least = std::min(least, q->digits.value_or(0));
    if (r.relative_residual.value == 0 && l < ck.size() && ck[l].relative_residual != 0) least = 0;
  }
  return least;
}

}  // namespace

PrecisionChoice choose_precision(const Model& model, const Variant& variant, const InputSpec& input,
                                 const PrecisionRequest& request, Center center, const ProgressFn& progress) {
  model.check_supports(variant);
  if (!request.automatic || request.resolved_method() == ForwardMethod::direct)
    return direct_ladder(model, variant, input, request, center, progress, nullptr);
  // One centred pass measures every residual to the digits asked; the
  // direct pass then needs the bits of its smallest one.
  const Precision c = centred_start(model, input, request);
  const std::vector<LayerStats> stats = measure_at(c, model, variant, input, center, ForwardMethod::centred, progress,
                                                   pass_name(ForwardMethod::centred) + " at " + c.name());
  const long need = direct_bits_needed(stats, c, model, input, request);
  PrecisionChoice out;
  out.method = ForwardMethod::centred;
  out.precision = request.tier_for(need);
  out.ceiling_reached = out.precision.bits < need;
  out.tried_bits = {c.bits, out.precision.bits};
  return out;
}

ForwardAnalysis analyze_forward(const Model& model, const Variant& variant, const InputSpec& input,
                                const PrecisionRequest& request, Center center, const ProgressFn& progress) {
  if (request.check == CheckMethod::certified)
    return analyze_forward_certified(model, variant, input, request, center, progress);
  model.check_supports(variant);
  ForwardAnalysis out;
  out.variant = variant;
  out.center = center;
  out.method = request.resolved_method();
  const long n = input.rows(&model), d = model.arch().d_model;
  const bool escalate = request.automatic && out.method == ForwardMethod::centred;
  // Every working run made, by precision, and every confirming run, by its
  // precision and the working run's. A confirming run is perturbed at the
  // resolution of the coarser of the two runs (ForwardOptions::perturb_bits,
  // math.md §6 "What a confirmation proves"), so it never becomes a working
  // run: one tier up, at a sixteenth of the working run's rounding unit; at the
  // top tier, whose check is the tier below, at a few of its own units (a
  // perturbation below them would round away, and rows equal by rounding would
  // stay equal in both runs).
  std::map<long, std::vector<LayerStats>> runs;
  std::map<std::pair<long, long>, std::vector<LayerStats>> checks;
  const auto perturbation = [](const Precision& working, const Precision& check) {
    return check.bits > working.bits ? working.bits + 4 : check.bits - 2;
  };
  std::optional<std::vector<LayerStats>> rounding_runs;  // the rounding check's values
  // Double confirmed by the rounding check: the pass at q and its check,
  // the three passes at once (double_check.hpp); returns the pass's values.
  const auto rounding_checked = [&](const Precision& q) {
    const ProgressFn shared = serialized_progress(progress);  // the three passes may run at once
    RoundingCheckedRuns r = measure_with_rounding_check(
        model, input, pass_name(out.method) + " at " + q.name(), [&](const InputSpec& in, const std::string& stage) {
          return measure_at(q, model, variant, in, center, out.method, shared, stage, request.measures);
        });
    rounding_runs = std::move(r.checked);
    return std::move(r.nearest);
  };
  Precision p;
  if (escalate) {
    out.chosen_by = ForwardMethod::centred;
    p = centred_start(model, input, request);
    const std::string stage = pass_name(out.method) + " at " + p.name();
    const bool rounding = request.confirm && uses_rounding_check(request.check, p, center);
    if (rounding) {
      runs[p.bits] = rounding_checked(p);
    } else if (request.confirm && !p.is_top()) {
      // The working run and its confirmation one tier up (the loop below
      // finds it made), side by side when they can be.
      const Precision check = p.next();
      const ProgressFn shared = serialized_progress(progress);
      std::vector<LayerStats> working, confirming;
      run_side_by_side(
          [&] { working = measure_at(p, model, variant, input, center, out.method, shared, stage, request.measures); },
          [&] {
            confirming = measure_at(check, model, variant, input, center, out.method, shared,
                                    "confirming run at " + check.name(), request.measures, perturbation(p, check));
          });
      runs[p.bits] = std::move(working);
      checks[{check.bits, p.bits}] = std::move(confirming);
    } else {
      runs[p.bits] = measure_at(p, model, variant, input, center, out.method, progress, stage, request.measures);
    }
    out.tried_bits.push_back(p.bits);
  } else {
    std::vector<LayerStats> stats;
    // A fixed double is measured with its rounding check (the ladder
    // measures every other request).
    const bool rounding =
        !request.automatic && request.confirm && uses_rounding_check(request.check, request.fixed, center);
    if (rounding) stats = rounding_checked(request.fixed);
    const PrecisionChoice choice =
        direct_ladder(model, variant, input, request, center, progress, rounding ? nullptr : &stats);
    p = choice.precision;
    out.chosen_by = choice.method;
    out.tried_bits = choice.tried_bits;
    out.ceiling_reached = choice.ceiling_reached;
    runs[p.bits] = std::move(stats);
  }
  if (request.automatic) out.ceiling_bits = request.ceiling();
  for (;;) {
    std::optional<Precision> check;
    const std::vector<LayerStats>* ck = nullptr;
    const bool rounding = request.confirm && uses_rounding_check(request.check, p, center);
    if (rounding) {
      // Double: the same pass rounded upward and downward (double_check.hpp).
      check = p;
      out.check_method = CheckMethod::rounding;
      if (!rounding_runs) throw std::logic_error("analyze_forward: a rounding check that was not run");
      ck = &*rounding_runs;
    } else if (request.confirm) {
      check = PrecisionRequest::confirming_tier(p);
    }
    if (runs.find(p.bits) == runs.end())
      runs.emplace(p.bits, measure_at(p, model, variant, input, center, out.method, progress,
                                      pass_name(out.method) + " at " + p.name(), request.measures));
    if (check && !rounding) {
      auto it = checks.find({check->bits, p.bits});
      if (it == checks.end()) {
        const std::string stage = "confirming run at " + check->name() +
                                  (check->bits < p.bits ? " (the tier below: there is no higher tier)" : "");
        it = checks
                 .emplace(std::make_pair(check->bits, p.bits),
                          measure_at(*check, model, variant, input, center, out.method, progress, stage,
                                     request.measures, perturbation(p, *check)))
                 .first;
      }
      ck = &it->second;
    }
    out.precision = p;
    out.check = check;
    out.layers = layer_reports(runs.at(p.bits), ck, p, check ? check->bits : p.bits, request.target_digits, n, d);
    if (!escalate || !check) break;
    if (least_rounding_digits(out.layers, *ck) >= request.target_digits) break;
    if (!request.rises_from(p)) {
      out.ceiling_reached = true;  // the digits asked need a precision above the ceiling
      break;
    }
    p = *check;
    out.tried_bits.push_back(p.bits);
  }
  if (request.emulate)
    out.emulation =
        analyze_emulation(model, variant, input, *request.emulate, center, request.measures, request.target_digits, out);
  return out;
}

}  // namespace sanpath

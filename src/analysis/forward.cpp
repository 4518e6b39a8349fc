#include "sanpath/analysis/forward.hpp"

#include "sanpath/analysis/double_check.hpp"
#include "sanpath/core/errors.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sanpath {

PrecisionRequest PrecisionRequest::parse(const std::string& text) {
  PrecisionRequest r;
  if (text == "auto") return r;
  r.automatic = false;
  r.fixed = Precision::parse(text);
  return r;
}

std::string PrecisionRequest::describe() const {
  return automatic ? "auto (" + std::to_string(target_digits) + " digits wanted)" : fixed.name();
}

std::string ProgressStep::message() const {
  return total > 0 ? stage + " [" + std::to_string(done) + "/" + std::to_string(total) + "]" : stage;
}

ProgressStep ProgressStep::parse(const std::string& message) {
  ProgressStep step{message, 0, 0};
  const std::size_t open = message.rfind(" [");
  if (open == std::string::npos || message.empty() || message.back() != ']') return step;
  const std::string count = message.substr(open + 2, message.size() - open - 3);
  const std::size_t slash = count.find('/');
  const auto digits = [](const std::string& t) {
    return !t.empty() && t.size() < 18 && t.find_first_not_of("0123456789") == std::string::npos;
  };
  if (slash == std::string::npos || !digits(count.substr(0, slash)) || !digits(count.substr(slash + 1))) return step;
  const long done = std::stol(count.substr(0, slash)), total = std::stol(count.substr(slash + 1));
  if (total <= 0 || done > total) return step;
  return {message.substr(0, open), done, total};
}

void report_progress(const ProgressFn& progress, const std::string& stage, long done, long total) {
  if (progress) progress(ProgressStep{stage, done, total}.message());
}

ProgressFn prefixed_progress(const ProgressFn& progress, const std::string& prefix) {
  if (!progress) return {};
  return [progress, prefix](const std::string& message) { progress(prefix + message); };
}

long bits_to_resolve(const BigReal& rho, int digits, long n, long d, int depth) {
  const double log2_rho = log10_abs(rho) / std::log10(2.0);
  const double growth = 2.0 * std::log2(static_cast<double>(std::max(2L, n * d))) + 4.0 * depth + 16.0;
  return static_cast<long>(std::ceil(-log2_rho + digits * std::log2(10.0) + growth));
}

namespace {

std::vector<LayerStats> measure_at(const Precision& p, const Model& model, const Variant& variant,
                                   const InputSpec& input, Center center, const ProgressFn& progress,
                                   const std::string& stage) {
  std::function<void(int, int)> on_layer;
  if (progress) {
    report_progress(progress, stage, 0, model.arch().layers);
    on_layer = [&](int l, int layers) { report_progress(progress, stage, l, layers); };
  }
  std::vector<LayerStats> stats = with_scalar(p, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return measure_layers<S>(model, variant, input, center, on_layer);
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

Quantity report(const BigReal& v, const std::vector<LayerStats>* check, const BigReal& c, long bits) {
  return check ? confirm(v, c, bits) : Quantity::unconfirmed(v);
}

/// A residual computed as exactly 0 is not a measurement: the rows became
/// identical in rounding. Report it as below the resolution of the working
/// precision relative to the matrix norm (2^(1-bits)·‖X‖·n·d), never as 0.
Quantity residual_report(const BigReal& v, const std::vector<LayerStats>* check, const BigReal& c, long bits,
                         const BigReal& norm, long n, long d) {
  if (v == 0) {
    const BigReal unit = pow(BigReal(2, 30), BigReal(1 - bits, 30));
    const BigReal floor = norm > 0 ? BigReal(norm * unit * BigReal(n * d, 30)) : unit;
    return below_resolution(v, floor);
  }
  return report(v, check, c, bits);
}

}  // namespace

namespace {

/// The auto loop of choose_precision. `measured` (may be null) receives the
/// measurements at the chosen precision (a fixed request is then measured
/// once); without it a fixed request returns without running anything.
PrecisionChoice choose_and_measure(const Model& model, const Variant& variant, const InputSpec& input,
                                   const PrecisionRequest& request, Center center, const ProgressFn& progress,
                                   std::vector<LayerStats>* measured) {
  PrecisionChoice out;
  const long max_bits = request.max_bits > 0 ? std::min(request.max_bits, Precision::max_bits()) : Precision::max_bits();
  if (request.automatic && max_bits < 53)
    throw std::invalid_argument("precision: the auto ceiling of " + std::to_string(max_bits) + " bits is below 53");
  Precision p = request.automatic ? Precision::at_least(std::min(128L, max_bits)) : request.fixed;
  if (!request.automatic && measured == nullptr) {
    out.precision = p;
    out.tried_bits.push_back(p.bits);
    return out;
  }
  std::vector<LayerStats> stats;
  for (;;) {
    stats = measure_at(p, model, variant, input, center, progress, "forward pass at " + p.name());
    out.tried_bits.push_back(p.bits);
    if (!request.automatic) break;
    // A residual that rounded to exactly 0 is unresolved: count it as one
    // unit of the working precision, so the next tier is tried.
    const BigReal unit = pow(BigReal(2, 30), BigReal(-p.bits, 30));
    BigReal rho_min(1, 30);
    for (const LayerStats& s : stats) {
      const BigReal rho = s.relative_residual > 0 ? s.relative_residual : unit;
      if (rho < rho_min) rho_min = rho;
    }
    const long need = bits_to_resolve(rho_min, request.target_digits, input.rows(), model.arch().d_model,
                                      model.arch().layers);
    if (need <= p.bits) break;
    if (p.bits >= max_bits || p.is_top()) {
      out.ceiling_reached = true;
      break;
    }
    Precision q = Precision::at_least(std::min(need, max_bits));
    if (q.bits > max_bits) {
      out.ceiling_reached = true;
      break;
    }
    p = q;
  }
  out.precision = p;
  if (measured != nullptr) *measured = std::move(stats);
  return out;
}

}  // namespace

PrecisionChoice choose_precision(const Model& model, const Variant& variant, const InputSpec& input,
                                 const PrecisionRequest& request, Center center, const ProgressFn& progress) {
  model.check_supports(variant);
  return choose_and_measure(model, variant, input, request, center, progress, nullptr);
}

ForwardAnalysis analyze_forward(const Model& model, const Variant& variant, const InputSpec& input,
                                const PrecisionRequest& request, Center center, const ProgressFn& progress) {
  model.check_supports(variant);
  ForwardAnalysis out;
  out.variant = variant;
  out.center = center;
  std::vector<LayerStats> stats;
  const PrecisionChoice choice = choose_and_measure(model, variant, input, request, center, progress, &stats);
  const Precision p = choice.precision;
  out.tried_bits = choice.tried_bits;
  out.ceiling_reached = choice.ceiling_reached;
  out.precision = p;
  std::vector<LayerStats> checked;
  if (request.confirm && uses_rounding_check(request.check, p, center)) {
    out.check = p;
    out.check_method = CheckMethod::rounding;
    checked = rounding_check(stats, model, input, [&](const InputSpec& in, const std::string& stage) {
      return measure_at(p, model, variant, in, center, progress, stage);
    });
  } else if (request.confirm && !p.is_top()) {
    out.check = p.next();
    checked =
        measure_at(*out.check, model, variant, input, center, progress, "confirming run at " + out.check->name());
  }
  const std::vector<LayerStats>* ck = checked.empty() ? nullptr : &checked;
  for (std::size_t l = 0; l < stats.size(); ++l) {
    const LayerStats& s = stats[l];
    const LayerStats& c = ck ? checked[l] : s;
    LayerReport r;
    r.layer = static_cast<int>(l);
    const long n = input.rows(), d = model.arch().d_model;
    const auto residual = [&](const BigReal& v, const BigReal& cv, const BigReal& norm) {
      return residual_report(v, ck, cv, p.bits, norm, n, d);
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
    r.norm_composite = report(s.norm_composite, ck, c.norm_composite, p.bits);
    r.norm_frobenius = report(s.norm_frobenius, ck, c.norm_frobenius, p.bits);
    r.relative_residual = residual(s.relative_residual, c.relative_residual, BigReal(1, 30));
    if (ck) {
      int d = r.res_composite.digits.value_or(0);
      for (const Quantity* q : {&r.res_one, &r.res_inf, &r.res_frobenius, &r.norm_composite, &r.norm_frobenius,
                                &r.relative_residual})
        d = std::min(d, q->digits.value_or(0));
      if (r.res_composite_lower) d = std::min(d, r.res_composite_lower->digits.value_or(0));
      r.digits = d;
    }
    out.layers.push_back(std::move(r));
  }
  return out;
}

}  // namespace sanpath

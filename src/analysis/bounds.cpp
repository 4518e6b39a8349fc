#include "sanpath/analysis/bounds.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sanpath {

namespace {

bool is_finite(const BigReal& x) { return mpfr_number_p(x.backend().data()) != 0; }

/// x·(1 + dir·2·10^−digits), rounded outwards (dir = +1 up, −1 down), at
/// x's own precision; a lower end that would turn negative becomes 0.
BigReal widen(const BigReal& x, int digits, int dir) {
  const mpfr_prec_t prec = mpfr_get_prec(x.backend().data());
  BigReal out = x;  // keeps x's precision
  mpfr_t f;
  mpfr_init2(f, prec + 32);
  mpfr_set_si(f, -digits, MPFR_RNDN);
  mpfr_exp10(f, f, dir > 0 ? MPFR_RNDU : MPFR_RNDD);  // 10^−d
  mpfr_mul_2si(f, f, 1, MPFR_RNDN);                   // 2·10^−d (exact)
  if (dir > 0) {
    mpfr_add_ui(f, f, 1, MPFR_RNDU);
    mpfr_mul(out.backend().data(), x.backend().data(), f, MPFR_RNDU);
  } else {
    mpfr_ui_sub(f, 1, f, MPFR_RNDD);
    if (mpfr_sgn(f) <= 0) {
      mpfr_set_ui(out.backend().data(), 0, MPFR_RNDN);
    } else {
      mpfr_mul(out.backend().data(), x.backend().data(), f, MPFR_RNDD);
    }
  }
  mpfr_clear(f);
  return out;
}

std::string join_depths(const std::vector<int>& ls) {
  std::string s;
  for (std::size_t i = 0; i < ls.size(); ++i) s += (i ? ", " : "") + std::to_string(ls[i]);
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------
// γ
// ---------------------------------------------------------------------------

BigReal BoundsRequest::parse_gamma(const std::string& text) {
  BigReal g(0);
  mpfr_set_prec(g.backend().data(), precision_bits_v<WeightReal>);  // 1025 bits, as the weight quantities
  const bool blank = text.find_first_not_of(" \t") == std::string::npos;
  char* end = nullptr;
  if (!blank) mpfr_strtofr(g.backend().data(), text.c_str(), &end, 10, MPFR_RNDN);
  if (blank || end == text.c_str() || *end != '\0') throw std::invalid_argument("gamma: '" + text + "' is not a number");
  if (!is_finite(g) || !(g > 0)) throw std::invalid_argument("gamma: '" + text + "' must be a finite number > 0");
  return g;
}

std::string gamma_string(const BigReal& gamma) {
  if (!is_finite(gamma) || gamma <= 0) return to_sci(gamma, 17);
  const mpfr_prec_t prec = mpfr_get_prec(gamma.backend().data());
  for (int sig = 1; sig <= 40; ++sig) {
    const std::string s = to_sci(gamma, sig);
    BigReal back(0);
    mpfr_set_prec(back.backend().data(), prec);
    mpfr_set_str(back.backend().data(), s.c_str(), 10, MPFR_RNDN);
    if (back != gamma) continue;
    // Plain fixed-point form for ordinary magnitudes: "1", "0.5", "2.25".
    const double l = log10_abs(gamma);
    if (l >= -4 && l < 15) {
      std::string f = to_decimal(gamma, sig);
      if (f.find('.') != std::string::npos) {
        while (!f.empty() && f.back() == '0') f.pop_back();
        if (!f.empty() && f.back() == '.') f.pop_back();
      }
      return f;
    }
    return s;
  }
  return to_sci(gamma, 17);
}

// ---------------------------------------------------------------------------
// Measured residuals
// ---------------------------------------------------------------------------

ResidualSeries measure_residuals(const Model& model, const Variant& variant, const InputSpec& input,
                                 const PrecisionRequest& request, const ProgressFn& progress) {
  model.check_supports(variant);
  const std::vector<long>& tiers = Precision::tiers();
  PrecisionRequest req = request;
  // Default auto ceiling: the tier below the top, so the top confirms it.
  if (req.automatic && req.max_bits == 0 && tiers.size() >= 2) req.max_bits = tiers[tiers.size() - 2];
  const ForwardAnalysis fa = analyze_forward(model, variant, input, req, Center::optimal, progress);

  ResidualSeries s;
  s.variant = variant;
  s.method = fa.method;
  s.precision = fa.precision;
  s.check = fa.check;
  s.tried_bits = fa.tried_bits;
  s.ceiling_reached = fa.ceiling_reached;
  if (req.automatic) s.ceiling_bits = req.max_bits > 0 ? std::min(req.max_bits, Precision::max_bits()) : Precision::max_bits();

  const long n = input.rows(), d = model.arch().d_model;
  const int L = model.arch().layers;
  for (const LayerReport& r : fa.layers) {
    MeasuredDepth m;
    m.layer = r.layer;
    m.upper = r.res_composite;
    m.lower = r.res_composite_lower ? *r.res_composite_lower : r.res_composite;
    m.relative = r.relative_residual;
    s.depths.push_back(std::move(m));
  }

  const long p_bits = fa.precision.native_double ? 53 : fa.precision.bits;
  // The enclosures the verdicts use.
  for (MeasuredDepth& m : s.depths) {
    MeasuredResidual& e = m.enclosure;
    if (m.upper.below_resolution) {
      e.lower = BigReal(0);
      e.upper = m.upper.bound;
      e.below_resolution = true;
      s.upper_bound_only.push_back(m.layer);
    } else {
      int du = 0, dl = 0;
      if (m.upper.digits) {
        du = *m.upper.digits;
      } else {
        // Unconfirmed: the centred pass keeps its relative accuracy at any
        // size, the direct pass loses the bits of the cancellation.
        du = resolved_digits(fa.method == ForwardMethod::centred ? BigReal(1) : m.relative.value, p_bits, n, d, L);
      }
      if (m.lower.digits) {
        dl = *m.lower.digits;
      } else {
        dl = du;
      }
      e.upper = widen(m.upper.value, std::max(du, 1), +1);
      e.lower = m.lower.below_resolution ? BigReal(0) : widen(m.lower.value, std::max(dl, 1), -1);
      if (e.lower > e.upper) e.lower = e.upper;  // cannot happen for lower ≤ upper; kept as a guard
    }
    if (m.upper.digits && m.lower.digits) m.digits = std::min(*m.upper.digits, *m.lower.digits);
  }

  // The plain statement on precision and resolution.
  std::string note = "measured with the " + to_string(fa.method) + " forward pass at " + s.precision.name();
  if (s.check) {
    note += s.check->bits < p_bits ? ", checked against " + s.check->name() + " (the tier below: there is no higher tier)"
                                   : ", confirmed by a run at " + s.check->name();
  } else {
    note += ", no confirming run: resolution is judged from the rounding floor, a heuristic (digits and "
            "verdicts are not confirmed)";
  }
  if (s.tried_bits.size() > 1) {
    note += " (auto tried";
    for (std::size_t i = 0; i < s.tried_bits.size(); ++i) note += (i ? ", " : " ") + std::to_string(s.tried_bits[i]);
    note += " bits)";
  }
  note += ".";
  if (!s.upper_bound_only.empty()) {
    const std::vector<int>& u = s.upper_bound_only;
    note += std::string(u.size() == 1 ? " Depth " : " Depths ") + join_depths(u) + (u.size() == 1 ? " is" : " are") +
            " below what " + s.precision.name() +
            " resolves: the measured value is an upper bound (< 1e-N) and the verdict is decided on that upper bound.";
  }
  if (s.ceiling_reached) {
    note += " The auto precision ceiling of " + std::to_string(s.ceiling_bits) + " bits was reached";
    if (s.ceiling_bits < Precision::max_bits() && s.check && s.check->bits > p_bits)
      note += " (the top tier, " + std::to_string(Precision::max_bits()) + " bits, confirms it)";
    note += s.upper_bound_only.empty() ? ": every depth is resolved, the smallest with fewer digits than requested."
                                       : ": no higher precision is available to resolve the rest.";
  }
  s.note = note;
  return s;
}

// ---------------------------------------------------------------------------
// analyze_bounds
// ---------------------------------------------------------------------------

BoundsAnalysis analyze_bounds(const Model& model, const Variant& variant, const InputSpec& input,
                              const BoundsRequest& request, const ProgressFn& progress) {
  model.check_supports(variant);
  if (!is_finite(request.gamma) || !(request.gamma > 0))
    throw std::invalid_argument("gamma must be a finite number > 0, got " + to_sci(request.gamma, 6));
  BoundsAnalysis out;
  out.request = request;
  // Checked before any forward pass: an explicit theorem must fit.
  out.coverage = Coverage::of(model, variant);
  const TheoremChoice choice = select_theorem(variant, model.arch().heads, request.theorem, out.coverage);
  out.weights = weight_quantities(model);
  if (choice.applicable && choice.theorem == Theorem::cor_3_2 && !out.weights.lambda)
    throw std::invalid_argument("Corollary 3.2: the model has no MLP weights in some layer, lambda is undefined");

  out.measured = measure_residuals(model, variant, input, request.precision,
                                   variant.skip ? prefixed_progress(progress, "with skip: ") : progress);
  std::vector<MeasuredResidual> ms;
  for (const MeasuredDepth& m : out.measured.depths) ms.push_back(m.enclosure);
  BoundInputs bi;
  bi.weights = out.weights;
  bi.variant = variant;
  bi.gamma = request.gamma;
  bi.theorem = request.theorem;
  bi.coverage = out.coverage;
  out.report = compare_bounds(bi, ms);
  // â_l and q_l are point estimates from two measurements: meaningless when
  // either is only an upper bound (below resolution), so they are dropped.
  for (DepthComparison& dc : out.report.depths) {
    const std::size_t l = static_cast<std::size_t>(dc.layer);
    if (ms[l].below_resolution || ms[l - 1].below_resolution) {
      dc.cubic_constant.reset();
      dc.order.reset();
    }
  }

  if (variant.skip) {
    Variant off = variant;
    off.skip = false;
    out.without_skip =
        measure_residuals(model, off, input, request.precision, prefixed_progress(progress, "without skip: "));
  }

  // Notes, in reading order.
  const std::string g = "gamma = " + gamma_string(request.gamma) +
                        (request.gamma == 1 ? " (the ICML 2021 statement)" : " (arXiv v2's factor, user-given)");
  if (out.report.theorem.applicable) {
    out.notes.push_back(out.report.theorem.reason + " " + g + ".");
    if (!out.report.note.empty()) out.notes.push_back(out.report.note);
    int held = 0, violated = 0, undecided = 0, on_upper = 0;
    for (const DepthComparison& dc : out.report.depths) {
      held += dc.verdict == Verdict::holds;
      violated += dc.verdict == Verdict::violated;
      undecided += dc.verdict == Verdict::undecided;
      on_upper += dc.measured.below_resolution;
    }
    std::string v = "Verdicts: " + std::to_string(held) + " HOLDS, " + std::to_string(violated) + " VIOLATED, " +
                    std::to_string(undecided) + " UNDECIDED of " + std::to_string(out.report.depths.size()) +
                    " depths";
    if (on_upper > 0)
      v += " (" + std::to_string(on_upper) + " decided on an upper bound of the measured residual)";
    v += ".";
    if (violated > 0)
      v += " A VIOLATED depth with gamma = 1 contradicts the theorem as stated in ICML 2021: keep the weights and "
           "the input.";
    out.notes.push_back(v);
  } else {
    const std::string& why = out.report.theorem.reason;
    const std::string prefix = "not applicable: ";
    out.notes.push_back("The theorem does not apply: " + (why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why) +
                        " Measured residuals are reported without a bound; " + g + ".");
  }
  out.notes.push_back(out.measured.note);
  if (out.without_skip) {
    const ResidualSeries& w = *out.without_skip;
    std::string s = "Side by side: the same model and input with skip off (" + to_string(w.variant, VariantStyle::prose) +
                    ") measured at " + w.precision.name() + ".";
    const std::size_t L = out.measured.depths.size() - 1;
    const MeasuredDepth& with_last = out.measured.depths[L];
    const MeasuredDepth& without_last = w.depths[L];
    const auto short_text = [](const MeasuredDepth& m) {
      if (m.upper.below_resolution) return m.upper.str();
      return to_sci(m.upper.value, std::min(6, std::max(1, m.upper.digits.value_or(6))));
    };
    s += " At depth " + std::to_string(L) + ": r_" + std::to_string(L) + " = " + short_text(with_last) +
         " with skip, " + short_text(without_last) + " without (r_0 = " + short_text(out.measured.depths.front()) +
         ").";
    if (!w.upper_bound_only.empty()) s += " " + w.note;
    out.notes.push_back(s);
  }
  return out;
}

}  // namespace sanpath

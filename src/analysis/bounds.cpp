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
  static_cast<Provenance&>(s) = fa;
  s.variant = variant;

  const long n = input.rows(&model), d = model.arch().d_model;
  const int L = model.arch().layers;
  for (const LayerReport& r : fa.layers) {
    MeasuredDepth m;
    m.layer = r.layer;
    m.upper = r.res_composite;
    m.lower = r.res_composite_lower ? *r.res_composite_lower : r.res_composite;
    m.relative = r.relative_residual;
    s.depths.push_back(std::move(m));
  }

  const long p_bits = s.bits();
  const bool certified = fa.check_method == CheckMethod::certified;
  // The enclosures the verdicts use.
  for (MeasuredDepth& m : s.depths) {
    MeasuredResidual& e = m.enclosure;
    if (certified) {
      // Proven ends (math.md §10): the upper end's enclosure bounds the
      // residual at the best centre, so r_l from above; the lower end's
      // bounds r_l from below. Nothing to widen.
      e.lower = m.lower.enclosure->lo;
      e.upper = m.upper.enclosure->hi;
      e.below_resolution = m.upper.below_resolution;
      if (e.below_resolution) s.upper_bound_only.push_back(m.layer);
    } else if (m.upper.below_resolution) {
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
  out.verdicts_proven = out.measured.check_method == CheckMethod::certified && out.weights.exact_products;
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

  return out;
}

}  // namespace sanpath

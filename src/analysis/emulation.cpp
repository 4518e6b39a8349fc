#include "sanpath/analysis/forward.hpp"
#include "sanpath/compute/embed.hpp"
#include "sanpath/core/dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sanpath {

namespace {

/// The statistics and measures of the finite layers of an emulated pass at precision p.
std::vector<LayerStats> measure_emulated(const Precision& p, const std::vector<Matrix<double>>& X,
                                         const std::vector<std::vector<Matrix<double>>>& P, Center center,
                                         const MeasureSet& measures) {
  return with_scalar(p, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return measure_matrices<S>(X, P, center, measures);
  });
}

/// Significant digits of `emulated` that agree with `exact`.
std::optional<int> correct_digits(const Quantity& emulated, const Quantity& exact) {
  if (exact.below_resolution || emulated.below_resolution) return std::nullopt;
  const int known = std::min(exact.digits.value_or(17), emulated.digits.value_or(17));
  if (emulated.value == exact.value) return known;
  if (exact.value == 0) return 0;
  const BigReal rel = BigReal(abs(BigReal(emulated.value - exact.value)) / abs(exact.value));
  const double digits = std::floor(-log10_abs(rel));
  return static_cast<int>(std::clamp(digits, 0.0, static_cast<double>(known)));
}

const Quantity* find(const std::vector<MeasureReport>& in, const std::string& name) {
  for (const MeasureReport& m : in)
    if (m.name == name) return &m.value;
  return nullptr;
}

}  // namespace

EmulationReport analyze_emulation(const Model& model, const Variant& variant, const InputSpec& input,
                                  EmulatedFormat format, Center center, const MeasureSet& measures, int asked,
                                  const ForwardAnalysis& exact) {
  const EmulatedTrace t =
      emulate_forward(model, variant, make_input<double>(model, input), format, measures.any_attention());
  const std::size_t finite = t.overflow_layer < 0 ? t.X.size() : static_cast<std::size_t>(t.overflow_layer);
  const std::vector<Matrix<double>> X(t.X.begin(), t.X.begin() + static_cast<std::ptrdiff_t>(finite));
  // The emulated values are exact data: measured at 128 bits or the exact run's tier, confirmed one tier up.
  const Precision p = exact.precision.native_double ? Precision::at_least(128) : exact.precision;
  const Precision q = PrecisionRequest::confirming_tier(p).value_or(p);
  const std::vector<LayerStats> a = measure_emulated(p, X, t.P, center, measures);
  const std::vector<LayerStats> b = measure_emulated(q, X, t.P, center, measures);
  const long bits = std::min(p.bits, q.bits);
  EmulationReport out;
  out.format = format;
  out.overflow = t.overflow;
  std::vector<std::string> names = {"relative_residual"};
  for (std::size_t l = 0; l < t.X.size(); ++l) {
    EmulatedLayerReport r;
    r.layer = static_cast<int>(l);
    const LayerReport& x = exact.layers.at(l);
    for (const MeasureReport& m : x.measures)
      if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
    if (l >= finite) {
      r.non_finite = true;
      out.layers.push_back(std::move(r));
      continue;
    }
    r.relative_residual = confirmed(a[l].relative_residual, &b[l].relative_residual, bits, asked);
    r.correct_digits.emplace_back("relative_residual", correct_digits(r.relative_residual, x.relative_residual));
    for (const MeasureValue& v : a[l].measures) {
      const BigReal* check = nullptr;
      for (const MeasureValue& c : b[l].measures)
        if (c.name == v.name) check = &c.value;
      if (check == nullptr) continue;
      r.measures.push_back({v.name, confirmed(v.value, check, bits, asked)});
      const Quantity* e = find(x.measures, v.name);
      r.correct_digits.emplace_back(v.name, e ? correct_digits(r.measures.back().value, *e) : std::nullopt);
    }
    out.layers.push_back(std::move(r));
  }
  for (const std::string& name : names) {
    std::optional<int> first;
    for (const EmulatedLayerReport& r : out.layers) {
      if (r.non_finite) {
        first = r.layer;
        break;
      }
      const auto it = std::find_if(r.correct_digits.begin(), r.correct_digits.end(),
                                   [&](const auto& c) { return c.first == name; });
      if (it != r.correct_digits.end() && it->second && *it->second == 0) {
        first = r.layer;
        break;
      }
    }
    out.first_layer_without_digit.emplace_back(name, first);
  }
  return out;
}

}  // namespace sanpath

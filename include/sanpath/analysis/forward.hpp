#pragma once
/// \file forward.hpp
/// Forward analysis: runs the forward pass at a chosen or automatic
/// precision, directly (math.md §1–2) or centred (X = 1cᵀ + R, math.md §7),
/// measures every layer's residual (math.md §3), and confirms each reported
/// number by a second run one precision tier higher (math.md §6) or, for
/// double, by passes in directed rounding (double_check.hpp). This is what
/// `sanpath forward` prints. Shapes: X^l is n × d (n = input.rows(), d =
/// d_model), layers l = 0..L; the relative residual of layer l is
/// ‖X^l − 1cᵀ‖_{1,∞} / ‖X^l‖_{1,∞} (math.md §3, c the centre).
///
/// \code
///   const Model model = load_model("gpt2-capp");
///   const InputSpec x = InputSpec::from_tokens({1, 5, 9, 13, 2, 7});
///   const ForwardAnalysis a = analyze_forward(model, Variant::san(), x, PrecisionRequest{});
///   for (const LayerReport& r : a.layers) std::cout << r.relative_residual.str() << "\n";  // "< 1e-N" below resolution
/// \endcode

#include "sanpath/model/input.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/compute/emulate.hpp"
#include "sanpath/compute/measures.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/core/progress.hpp"
#include "sanpath/analysis/confirmation.hpp"
#include "sanpath/analysis/provenance.hpp"
#include "sanpath/core/quantity.hpp"
#include "sanpath/core/scalar.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// How to choose the working precision.
struct PrecisionRequest {
  bool automatic = true;
  Precision fixed = Precision::double_precision();  ///< when !automatic
  /// Significant digits asked for: auto wants them for the smallest
  /// residual; every mode prints at most this many of each value's
  /// confirmed digits (Quantity::asked).
  int target_digits = 20;
  /// auto: never go above this many bits (default: the top tier).
  long max_bits = 0;
  /// Make the check run that confirms digits.
  bool confirm = true;
  /// The measures of math.md §9 to report beside the residuals, computed
  /// and confirmed in the same runs (they travel with the request so that
  /// every analysis built on analyze_forward reports them).
  MeasureSet measures;
  /// Also evaluate the model as a framework in this format would (math.md §9,
  /// docs/math.md §9) and report it beside the exact values (ForwardAnalysis::emulation).
  std::optional<EmulatedFormat> emulate;
  /// The forward pass; unset: centred when automatic, direct at a fixed precision.
  std::optional<ForwardMethod> method;

  /// The method used for this request (see `method`); the centred pass covers every model.
  ForwardMethod resolved_method() const;

  /// The precision ladder every analysis climbs (auto's working tiers, the
  /// confirming tier, certified climbs): the highest tier a run may use —
  /// auto: max_bits, clamped to the top tier (std::invalid_argument below 53);
  /// fixed: the top tier (its confirming run sits above it).
  long ceiling() const;
  /// The smallest tier with at least `need` bits (53 at least), or the
  /// largest tier within ceiling() when that one is above it.
  Precision tier_for(long need) const;
  /// Whether the tier above p exists and lies within ceiling().
  bool rises_from(const Precision& p) const;
  /// The tier that confirms a run at p: the next tier up, or at the top the
  /// tier below (nullopt in a build of one tier).
  static std::optional<Precision> confirming_tier(const Precision& p);
  CheckMethod check = CheckMethod::automatic;

  /// "auto", "double" or a number of bits; throws std::invalid_argument.
  static PrecisionRequest parse(const std::string& text);
  /// The ranges of target_digits and max_bits (`--digits`, `--max-bits`,
  /// Python digits=, max_bits=): digits in [1, 100000]; bits 0 (the top
  /// tier) or in [53, Precision::max_bits()]. Return the value or throw
  /// std::invalid_argument ("0 is outside [1, 100000]") for the caller to
  /// name the option.
  static int checked_digits(int digits);
  static long checked_max_bits(long bits);
  std::string describe() const;
};

/// Whether every pass of `req` is a direct pass in double (the rounding
/// check's three, or one without confirmation; no emulated format): passes
/// that read a streamed layer's matrices where they lie in the checkpoint
/// (LayerForm::mapped), so that streaming a batch's layers costs no
/// decoding and holds a few layers instead of the model in doubles.
bool reads_weights_in_place(const PrecisionRequest& req, Center center);

/// Per-layer residual statistics as exact-to-the-working-precision values.
struct LayerStats {
  BigReal res_one, res_inf, res_composite, res_frobenius;
  /// optimal centre only: the enclosure of the composite residual
  std::optional<BigReal> res_composite_lower;
  /// optimal centre only: how many significant digits res_composite_lower can
  /// have as math.md's sqrt(min_c‖·‖_1 · min_c‖·‖_∞), given the width of the
  /// enclosure of min_c‖·‖_∞ it was computed from (nullopt: no limit)
  std::optional<int> res_composite_lower_digits;
  BigReal norm_composite, norm_frobenius;
  BigReal relative_residual;  ///< res_composite / norm_composite
  /// The measures asked for (math.md §9), in measure_value_names order.
  std::vector<MeasureValue> measures;
};

/// Measures every X^l of a forward pass of `model` in scalar S, evaluated by
/// `method`. Centred: the residuals are those of R (res(X) = res(R) for every
/// centre, math.md §7), the norms those of 1cᵀ + R.
/// `on_layer(l, L)` (may be empty) is called after layer l of the pass.
/// `measures`: the measures of math.md §9 of every layer (the attention
/// measures from layer 1 on), from (c, R) of the centred pass or from the
/// column means of the direct pass's X.
template <class S>
std::vector<LayerStats> measure_layers(const Model& model, const Variant& variant, const InputSpec& input,
                                       Center center, ForwardMethod method = ForwardMethod::direct,
                                       const std::function<void(int, int)>& on_layer = {},
                                       const MeasureSet& measures = {}, long perturb_bits = 0);

/// The statistics and measures (as measure_layers) of given matrices X^l,
/// l = 0..L (n×d, exact in double: an emulated pass's values), at scalar S;
/// P[l−1] the attention of layer l (may be empty without attention measures).
template <class S>
std::vector<LayerStats> measure_matrices(const std::vector<Matrix<double>>& X,
                                         const std::vector<std::vector<Matrix<double>>>& P, Center center,
                                         const MeasureSet& measures);

/// A measure of one layer, reported.
struct MeasureReport {
  std::string name;  ///< a measure_value_names name
  Quantity value;
};

/// One layer of the report: every number with its confirmed digits.
struct LayerReport {
  int layer = 0;
  Quantity res_one, res_inf, res_composite, res_frobenius;
  std::optional<Quantity> res_composite_lower;
  Quantity norm_composite, norm_frobenius;
  Quantity relative_residual;
  /// The measures asked for (PrecisionRequest::measures), in measure_value_names order.
  std::vector<MeasureReport> measures;
  /// Least number of digits confirmed among this layer's quantities
  /// (nullopt when there was no check run).
  std::optional<int> digits;
};

/// One layer of the emulated model (math.md §9): its relative residual and
/// measures, computed exactly from the emulated X^l and confirmed one tier
/// up, and how many significant digits of each agree with the exact model's.
struct EmulatedLayerReport {
  int layer = 0;
  /// X^l has an entry ±inf or NaN (an overflow at or before this layer): nothing is measured.
  bool non_finite = false;
  Quantity relative_residual;
  std::vector<MeasureReport> measures;
  /// name ("relative_residual", then the measures) → correct significant
  /// digits of the emulated value against the exact one: ⌊−log10(|e − x|/|x|)⌋,
  /// at most the digits either is known to; nullopt where the exact value is
  /// only an upper bound.
  std::vector<std::pair<std::string, std::optional<int>>> correct_digits;
};

/// The model evaluated as a low-precision framework would, beside the exact one.
struct EmulationReport {
  EmulatedFormat format = EmulatedFormat::bf16;
  std::vector<EmulatedLayerReport> layers;  ///< l = 0..L
  std::optional<std::string> overflow;      ///< the first non-finite value, where it arose
  /// name → the first layer whose emulated value has no correct digit (a
  /// non-finite layer counts), nullopt when every layer keeps one.
  std::vector<std::pair<std::string, std::optional<int>>> first_layer_without_digit;
};

/// The forward analysis: its provenance (method, working and confirming
/// precision, precisions tried, ceiling: the top precision did not resolve
/// everything) and every layer's report.
struct ForwardAnalysis : Provenance {
  Variant variant;
  Center center = Center::mean;
  std::vector<LayerReport> layers;  ///< layer 0 = input, l = output of layer l
  /// With PrecisionRequest::emulate: the emulated model beside the exact one.
  std::optional<EmulationReport> emulation;
};

/// The emulated pass of `model` on `input` in `format` (emulate_forward),
/// its relative residuals (for `center`) and measures computed exactly from
/// the emulated values (at `exact`'s tier, at least 128 bits, confirmed one
/// tier up), and their correct digits against `exact`, the exact analysis of
/// the same model, variant and input, each printed to at most `asked`
/// significant digits. Layers from the first non-finite one on
/// are not measured. Throws std::invalid_argument as emulate_forward does.
EmulationReport analyze_emulation(const Model& model, const Variant& variant, const InputSpec& input,
                                  EmulatedFormat format, Center center, const MeasureSet& measures, int asked,
                                  const ForwardAnalysis& exact);

/// The working precision of a request for computations on the direct pass.
struct PrecisionChoice {
  Precision precision;
  /// auto: the precisions run, in order (fixed: the one precision); with the
  /// centred method the centred run's precision, then the chosen one.
  std::vector<long> tried_bits;
  bool ceiling_reached = false;  ///< auto: the precision needed is above request.max_bits
  /// The pass that measured the residuals the choice rests on (fixed: direct, nothing is run).
  ForwardMethod method = ForwardMethod::direct;
};

/// The precision at which computations on the *direct* forward pass (the
/// path decomposition) resolve every layer's residual. Fixed requests: the
/// requested precision, nothing is run. Auto: the smallest relative residual
/// of any layer (for `center`) is measured, and the tier bits_to_resolve
/// gives for request.target_digits digits is chosen, up to request.max_bits
/// (math.md §6). Direct method: passes from 128 bits up until a tier
/// resolves (analyze_forward's direct choice). Centred method: one centred
/// pass at the tier for the digits asked measures it.
PrecisionChoice choose_precision(const Model& model, const Variant& variant, const InputSpec& input,
                                 const PrecisionRequest& request, Center center = Center::mean,
                                 const ProgressFn& progress = {});

/// Runs and confirms. Auto, direct: choose_precision's tier, confirmed one
/// tier up. Auto, centred: the tier for request.target_digits digits
/// (digits·log2 10 + 2·log2(n·d) + log2(3)·L + 16 bits: no cancellation),
/// confirmed one tier up; when the confirmation
/// leaves a layer with fewer digits than asked, the confirming tier becomes
/// the working one and the next confirms it, up to request.max_bits. At the
/// top tier the tier below confirms. A residual without a confirmed digit is
/// an upper bound (Quantity::below_resolution); without any check run (no
/// confirm) every value is the one computed, unconfirmed (no digit count),
/// except an exact 0 residual of a nonzero matrix, which is rounding (an
/// upper bound at the working precision's resolution). Throws
/// std::invalid_argument for bad inputs.
ForwardAnalysis analyze_forward(const Model& model, const Variant& variant, const InputSpec& input,
                                const PrecisionRequest& request, Center center = Center::mean,
                                const ProgressFn& progress = {});

#define SANPATH_DECLARE_ANALYSIS(S)                                                                       \
  extern template std::vector<LayerStats> measure_layers<S>(const Model&, const Variant&, const InputSpec&, \
                                                            Center, ForwardMethod,                          \
                                                            const std::function<void(int, int)>&,           \
                                                            const MeasureSet&, long);                      \
  extern template std::vector<LayerStats> measure_matrices<S>(const std::vector<Matrix<double>>&,          \
                                                              const std::vector<std::vector<Matrix<double>>>&, \
                                                              Center, const MeasureSet&);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_ANALYSIS)
#undef SANPATH_DECLARE_ANALYSIS

}  // namespace sanpath

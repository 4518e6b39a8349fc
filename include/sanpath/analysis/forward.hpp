#pragma once
/// \file analysis.hpp
/// Forward analysis: runs the forward pass at a chosen or automatic
/// precision, measures every layer's residual (math.md §3), and confirms
/// each reported number by a second run one precision tier higher
/// (math.md §6) or, for double, by passes in directed rounding
/// (double_check.hpp). This is what `sanpath forward` prints.

#include "sanpath/model/input.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/core/quantity.hpp"
#include "sanpath/core/scalar.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// How the digits of a pass are confirmed: `mpfr` re-runs one precision tier
/// up; `rounding` re-runs a double pass rounded upward and downward
/// (double_check.hpp); `automatic` is rounding for double with a mean or
/// median centre, mpfr otherwise.
enum class CheckMethod { automatic, rounding, mpfr };

/// How to choose the working precision.
struct PrecisionRequest {
  bool automatic = true;
  Precision fixed = Precision::double_precision();  ///< when !automatic
  /// auto: significant digits wanted for the smallest residual.
  int target_digits = 20;
  /// auto: never go above this many bits (default: the top tier).
  long max_bits = 0;
  /// Make the check run that confirms digits.
  bool confirm = true;
  CheckMethod check = CheckMethod::automatic;

  /// "auto", "double" or a number of bits; throws std::invalid_argument.
  static PrecisionRequest parse(const std::string& text);
  std::string describe() const;
};

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
};

/// Measures every X^l of a forward pass of `model` in scalar S.
/// `on_layer(l, L)` (may be empty) is called after layer l of the pass.
template <class S>
std::vector<LayerStats> measure_layers(const Model& model, const Variant& variant, const InputSpec& input,
                                       Center center, const std::function<void(int, int)>& on_layer = {});

/// One layer of the report: every number with its confirmed digits.
struct LayerReport {
  int layer = 0;
  Quantity res_one, res_inf, res_composite, res_frobenius;
  std::optional<Quantity> res_composite_lower;
  Quantity norm_composite, norm_frobenius;
  Quantity relative_residual;
  /// Least number of digits confirmed among this layer's quantities
  /// (nullopt when there was no check run).
  std::optional<int> digits;
};

struct ForwardAnalysis {
  Variant variant;
  Center center = Center::mean;
  Precision precision;              ///< the working precision of the reported values
  std::optional<Precision> check;   ///< the confirming run's precision
  CheckMethod check_method = CheckMethod::mpfr;  ///< rounding or mpfr, when `check` is set
  std::vector<long> tried_bits;     ///< auto: the precisions tried, in order
  bool ceiling_reached = false;     ///< auto: the top precision did not resolve everything
  std::vector<LayerReport> layers;  ///< layer 0 = input, l = output of layer l
};

/// Progress callback: (message). May be empty. A message is a stage
/// ("forward pass at 2051 bits"), optionally ending in a count " [i/n]"
/// (i of n units of that stage done, see ProgressStep); a terminal display
/// draws counted messages as a bar with rate and ETA.
using ProgressFn = std::function<void(const std::string&)>;

/// A progress message split into its stage and its optional count.
struct ProgressStep {
  std::string stage;
  long done = 0;
  long total = 0;  ///< 0: no count
  /// "stage [done/total]", or "stage" when total is 0.
  std::string message() const;
  /// Inverse of message(): a trailing " [i/n]" with 0 <= i <= n, n > 0, is
  /// the count; any other message is a stage without count.
  static ProgressStep parse(const std::string& message);
};

/// Calls `progress` (when set) with ProgressStep{stage, done, total}.message().
void report_progress(const ProgressFn& progress, const std::string& stage, long done, long total);

/// A callback that prefixes every message of `progress` with `prefix` (the
/// count stays at the end); empty when `progress` is empty.
ProgressFn prefixed_progress(const ProgressFn& progress, const std::string& prefix);

/// The working precision of a request, as analyze_forward chooses it.
struct PrecisionChoice {
  Precision precision;
  std::vector<long> tried_bits;  ///< auto: the precisions tried, in order (fixed: the one precision)
  bool ceiling_reached = false;  ///< auto: the top precision did not resolve everything
};

/// Fixed requests: the requested precision, nothing is run. Auto: forward
/// passes from 128 bits up, each tier chosen by bits_to_resolve so that the
/// smallest relative residual of any layer (for `center`) is resolved with
/// request.target_digits digits, up to request.max_bits (math.md §6).
/// analyze_forward uses exactly this choice; other analyses of the same
/// forward pass (path decomposition) reuse it.
PrecisionChoice choose_precision(const Model& model, const Variant& variant, const InputSpec& input,
                                 const PrecisionRequest& request, Center center = Center::mean,
                                 const ProgressFn& progress = {});

/// Runs and confirms. Throws std::invalid_argument for bad inputs.
ForwardAnalysis analyze_forward(const Model& model, const Variant& variant, const InputSpec& input,
                                const PrecisionRequest& request, Center center = Center::mean,
                                const ProgressFn& progress = {});

/// Bits needed so that a relative residual `rho` is resolved with `digits`
/// significant digits, with a margin for rounding growth over `depth`
/// layers of n×d products.
long bits_to_resolve(const BigReal& rho, int digits, long n, long d, int depth);

#define SANPATH_DECLARE_ANALYSIS(S)                                                                       \
  extern template std::vector<LayerStats> measure_layers<S>(const Model&, const Variant&, const InputSpec&, \
                                                            Center, const std::function<void(int, int)>&);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_ANALYSIS)
#undef SANPATH_DECLARE_ANALYSIS

}  // namespace sanpath

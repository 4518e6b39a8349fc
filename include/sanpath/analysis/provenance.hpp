#pragma once
/// \file provenance.hpp
/// How the numbers of an analysis were obtained (math.md §6): the forward
/// pass and the working precision that computed them, the run that confirmed
/// their digits, and the precisions an automatic request tried on the way.
/// Every analysis result carries one (ForwardAnalysis, PathReportBase,
/// ResidualSeries derive from it); report/ turns it into the "precision: …"
/// line and the JSON fields precision_bits, check_precision_bits, ….
///
/// \code
///   const ForwardAnalysis a = analyze_forward(model, variant, input, PrecisionRequest{});
///   const Provenance& p = a;                    // 257 bits, confirmed at 513, say
///   if (p.check && !p.checked_below()) { ... }  // digits confirmed one tier up
/// \endcode

#include "sanpath/core/scalar.hpp"

#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// How the forward pass is evaluated. direct: X^l as one matrix; its residual
/// loses log2(‖X‖/‖res X‖) bits to cancellation, so a collapsed residual needs
/// that many bits more. centred: X^l = 1cᵀ + R carried as two parts (math.md
/// §7); every residual keeps the working precision's relative accuracy.
enum class ForwardMethod { direct, centred };

/// "direct" or "centred".
std::string to_string(ForwardMethod);
/// Parses "direct|centred". Throws std::invalid_argument naming the text.
ForwardMethod parse_method(const std::string& text);

/// How the digits of a pass are confirmed: `mpfr` re-runs one precision tier
/// up; `rounding` re-runs a double pass rounded upward and downward
/// (double_check.hpp); `automatic` is rounding for double with a mean or
/// median centre, mpfr otherwise.
/// `certified` proves digits instead (math.md §10): ball arithmetic
/// through the pass encloses every exact value (analysis/certified.hpp).
enum class CheckMethod { automatic, rounding, mpfr, certified };

struct Provenance {
  ForwardMethod method = ForwardMethod::direct;  ///< the pass that computed the reported values
  Precision precision;                           ///< working precision of the reported values
  /// The confirming run's precision: one tier up, the tier below when
  /// `precision` is the top tier (values are then confirmed to its digits),
  /// `precision` itself for the rounding check of double; none: no check run.
  std::optional<Precision> check;
  CheckMethod check_method = CheckMethod::mpfr;  ///< rounding or mpfr, when `check` is set
  /// auto: the precisions run, in order (fixed: the one precision, or empty
  /// when nothing chose it); see PrecisionChoice.
  std::vector<long> tried_bits;
  /// The pass whose residuals chose the working precision (PrecisionChoice::method).
  ForwardMethod chosen_by = ForwardMethod::direct;
  /// auto: the ceiling stopped the search before every value was resolved.
  bool ceiling_reached = false;
  long ceiling_bits = 0;  ///< auto: the highest working precision allowed (0: not recorded)

  /// Bits of the working precision (53 for double).
  long bits() const { return precision.native_double ? 53 : precision.bits; }
  /// The confirming run is below the working precision (top tier checked by the tier below).
  bool checked_below() const { return check && check->bits < precision.bits; }
};

}  // namespace sanpath

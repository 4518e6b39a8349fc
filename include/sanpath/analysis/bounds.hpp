#pragma once
/// \file bounds.hpp
/// The bounds of math.md §5 on concrete weights against measured residuals:
/// the weight quantities and the selected theorem (compute/bounds.hpp), and the
/// measured residual r_l = ‖res(X^l)‖_{1,∞} (optimal centre, an enclosure)
/// of every depth from a forward pass at a precision that resolves it
/// (analyze_forward with Center::optimal, math.md §6). This is what
/// `sanpath bounds` prints. The uniform bound at depth l is
/// r_l ≤ a^{(3^l − 1)/2} · r_0^{3^l} with a = 4γβHλ/√d_qk (λ: Corollary
/// 3.2 only; math.md §5); the verdict compares it with the enclosure of the
/// measured r_l.
///
/// \code
///   const BoundsAnalysis b = analyze_bounds(model, Variant::san(), x, BoundsRequest{});
///   for (const DepthComparison& d : b.report.depths)
///     std::cout << d.layer << " " << to_string(d.verdict) << "\n";  // HOLDS, VIOLATED or UNDECIDED
/// \endcode
///
/// From a measurement to the enclosure the verdict uses (MeasuredDepth):
///  - the upper end is below resolution (Quantity::below_resolution): only
///    |r_l| < bound is known; the enclosure is [0, bound] with
///    `below_resolution` set, so the verdict is decided on that upper bound
///    and the reports say so;
///  - otherwise [lower, upper] of the optimal-centre enclosure, each end
///    widened outwards by twice its unconfirmed part: with d digits
///    confirmed by the check run (|v − v_check| ≤ 10^−d |v_check|), lower·(1 −
///    2·10^−d) and upper·(1 + 2·10^−d). The factor 2 covers the check run's
///    own error, which agreement alone does not bound. The widening is
///    negligible next to the bound's distance in almost every case (the
///    margins are hundreds of orders of magnitude), but it keeps a verdict
///    decided on the last digits honest (UNDECIDED rather than a HOLDS the
///    rounding could reverse). A lower end below resolution becomes 0.
///
/// Precision. Automatic requests raise the working precision until every
/// depth's residual is resolved (analyze_forward's rule: request.target_digits
/// digits for the smallest relative residual) or a ceiling is reached: any
/// depth below what the ceiling resolves is an upper bound and
/// `ceiling_reached` says the ceiling stopped the search. The
/// default ceiling is the tier below the top (16387 bits), so that every value
/// is confirmed by a run at the top tier (32772 bits); residuals below what it
/// resolves (relative residuals below about 1e-4900) are reported as upper
/// bounds, and `ceiling_reached` is set. A request at the top tier itself
/// (fixed 32772 bits, or --max-bits 32772) is checked against the tier below:
/// a value is then confirmed only as far as the lower tier agrees, so
/// residuals the lower tier does not resolve become upper bounds too. Without
/// a check run (PrecisionRequest::confirm false) a value is taken as resolved
/// when it lies above the working precision's rounding floor (the rule of
/// bits_to_resolve with one digit), and as an upper bound otherwise. That
/// rule is a heuristic (large attention logits cancel more digits than it
/// allows for), so the precision note (report/) then says that nothing is
/// confirmed.

#include "sanpath/analysis/forward.hpp"
#include "sanpath/compute/bounds.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/core/quantity.hpp"
#include "sanpath/core/scalar.hpp"

#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// What to evaluate and at which precision.
struct BoundsRequest {
  Theorem theorem = Theorem::automatic;  ///< auto | 2.2 | 2.3 | 3.2
  BigReal gamma = BigReal(1);            ///< the paper's γ (arXiv v2), > 0; default 1 (ICML 2021)
  PrecisionRequest precision;            ///< auto by default

  /// Parses a decimal γ ("1", "0.5", "2e-3") at 1025 bits, rounded to
  /// nearest. Throws std::invalid_argument for text that is not a finite
  /// number > 0.
  static BigReal parse_gamma(const std::string& text);
};

/// The measured residual r_l at one depth.
struct MeasuredDepth {
  int layer = 0;   ///< 0 = the input X^0, l = output of layer l
  Quantity lower;  ///< lower end of the optimal-centre enclosure, with confirmed digits
  Quantity upper;  ///< upper end (the least composite residual over the candidate centres)
  Quantity relative;  ///< upper / ‖X^l‖_{1,∞} (what the precision is chosen for)
  /// The enclosure the verdict uses (see the file comment): [0, bound] with
  /// below_resolution set when the upper end is not resolved; otherwise
  /// [lower, upper] widened by the unconfirmed digits.
  MeasuredResidual enclosure;
  /// Least confirmed (certified: proven) digits of lower and upper; nullopt without a check run.
  std::optional<int> digits;
};

/// Residuals r_0..r_L of one variant and the provenance of their values
/// (check: one tier up, the tier below at the top tier; ceiling_reached: the
/// ceiling stopped the search before every depth was resolved; ceiling_bits:
/// auto's highest working precision). report/ states it in a sentence
/// (residual_series_note).
struct ResidualSeries : Provenance {
  Variant variant;
  std::vector<MeasuredDepth> depths;   ///< r_0..r_L (size L + 1)
  /// Depths whose residual is only an upper bound (below resolution).
  std::vector<int> upper_bound_only;
};

struct BoundsAnalysis {
  BoundsRequest request;
  WeightQuantities weights;  ///< β_{l,h}, β_l, β, λ_l (1025 bits)
  /// compare_bounds on `measured`: theorem, a, a_l, contraction radius,
  /// vacuity, β_l, and per depth the bounds, verdicts, slack, â_l and q_l.
  /// When no theorem applies: theorem.applicable false, no bounds, verdicts
  /// NOT_APPLICABLE, and report.theorem.reason says why.
  BoundsReport report;
  ResidualSeries measured;  ///< the analysed variant
  /// Skip on only: the same model and input with skip off (mlp and layernorm
  /// as analysed), side by side with `measured` (Claim 3.1).
  std::optional<ResidualSeries> without_skip;
  /// Structure the theorems do not cover (rotary embeddings: §5's cubic
  /// bounds; gated MLP: Corollary 3.2); the reports state it in a sentence.
  Coverage coverage;
  /// The verdicts HOLDS and VIOLATED are proofs (math.md §10): the measured
  /// residuals were enclosed by a certified run (precision.check certified:
  /// every end of each r_l's enclosure, r_0 included, computed with its
  /// rounding bounded) and the weight products were exact, so the bound's
  /// enclosure contains the exact formula's value.
  bool verdicts_proven = false;

  bool applicable() const { return report.theorem.applicable; }
  const Precision& precision() const { return measured.precision; }
  const std::optional<Precision>& check() const { return measured.check; }
};

/// Measures r_0..r_L of `model` under `variant` on `input` and evaluates the
/// requested theorem against them (see the file comment for precision and
/// enclosures). Throws std::invalid_argument for a bad input, γ ≤ 0, or an
/// explicit theorem that does not fit the variant (e.g. 2.2 with H > 1;
/// the message names the reason) — checked before any forward pass.
BoundsAnalysis analyze_bounds(const Model& model, const Variant& variant, const InputSpec& input,
                              const BoundsRequest& request, const ProgressFn& progress = {});

/// The measured residuals alone (what analyze_bounds uses), for one variant.
ResidualSeries measure_residuals(const Model& model, const Variant& variant, const InputSpec& input,
                                 const PrecisionRequest& request, const ProgressFn& progress = {});

/// γ as printed with every result: the shortest decimal that reads back to
/// the same 1025-bit value when possible, e.g. "1", "0.5", "2.5e-7".
std::string gamma_string(const BigReal& gamma);

}  // namespace sanpath

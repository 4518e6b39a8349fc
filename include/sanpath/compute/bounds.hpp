#pragma once
/// \file bounds.hpp
/// The bounds of math.md §5: the weight quantities β, λ; the theorems'
/// constant a; the doubly exponential bound r_L ≤ a^{(3^L−1)/2} r_0^{3^L}
/// (uniform) and its layerwise form, held as base-2 logarithms in
/// multiprecision (`LogReal`) because their magnitudes leave every floating
/// format after a few layers; and the per-depth verdict against measured
/// residual enclosures.
///
/// Precisions. Weight quantities are computed once, at the 1025-bit tier
/// (`WeightReal`): weights are doubles, so the products W_Q W_Kᵀ and W_V W_O
/// are exact there (106-bit products, sums exact unless the weights span
/// ~900 binades) and every norm carries only its few summation roundings.
/// The products themselves run at the lowest tier that holds every exact
/// entry (exact_weight_product: 257 bits for trained weights), with the same
/// values, bit for bit, at about a tenth of the cost.
/// Logarithms are held at 4098 bits (`LogReal::Log`), so 3^L and the integer
/// part of log10 of the bound are exact up to L ≈ 2500.

#include "sanpath/model/model.hpp"
#include "sanpath/core/scalar.hpp"

#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// Working scalar of the weight quantities: the 1025-bit MPFR tier.
using WeightReal = mpfr_real<308>;

// ---------------------------------------------------------------------------
// Log-form arithmetic
// ---------------------------------------------------------------------------

/// A nonnegative real x held as log2 x (a signed multiprecision number;
/// −inf for x = 0). Products, quotients, powers and comparisons are exact
/// up to the 4098-bit rounding of the logarithm, whatever the magnitude:
/// 2^(−3^1000) is an ordinary value. Printing never goes through double and
/// never shows 0 or inf for a nonzero value.
class LogReal {
 public:
  /// The 4098-bit fixed-precision type of the logarithm.
  using Log = mpfr_real<1233>;
  static constexpr long bits = precision_bits_v<Log>;

  /// Zero (log2 = −inf).
  LogReal();
  static LogReal zero() { return LogReal(); }
  static LogReal one();
  /// From a value x ≥ 0 (finite). Throws std::invalid_argument for a
  /// negative, infinite or NaN x.
  static LogReal from_value(const BigReal& x);
  /// From log2 x (finite; −inf gives zero). Throws for NaN / +inf.
  static LogReal from_log2(const Log& log2x);
  static LogReal from_log2(const BigReal& log2x);
  /// From log10 x (finite; −inf gives zero). Throws for NaN / +inf.
  static LogReal from_log10(const BigReal& log10x);

  bool is_zero() const;
  /// log2 x at 4098 bits (−inf for zero).
  const Log& log2() const { return log2_; }
  /// log10 x = log2 x · log10 2 at 4098 bits (−inf for zero).
  BigReal log10() const;
  /// x itself as a BigReal at 4098 bits when it lies inside MPFR's exponent
  /// range (|log2 x| < ~2^30), else nullopt. Relative accuracy
  /// ≈ |log2 x|·2^−4098.
  std::optional<BigReal> value() const;

  /// x in scientific notation with `significant` digits and its true
  /// exponent, e.g. "2.3e-48213": the exponent is floor(log10 x) and the
  /// mantissa 10^frac(log10 x). "0" only for zero. Same format as to_sci.
  std::string to_string(int significant = 17) const;
  /// log10 x as a decimal string (see to_decimal); "-inf" for zero.
  std::string log10_string(int significant = 17) const;

  LogReal operator*(const LogReal& o) const;
  /// Throws std::domain_error when dividing by zero.
  LogReal operator/(const LogReal& o) const;
  /// x^e for e ≥ 0 (x^0 = 1, also for x = 0); x ≠ 0 for e < 0, else
  /// std::domain_error.
  LogReal pow(const Log& e) const;
  LogReal pow(long e) const { return pow(Log(e)); }
  LogReal sqrt() const { return pow(Log(0.5)); }
  /// x · 2^k (k any finite real): widens or narrows by a factor.
  LogReal times_pow2(const Log& k) const;

  friend bool operator<(const LogReal& a, const LogReal& b) { return a.log2_ < b.log2_; }
  friend bool operator>(const LogReal& a, const LogReal& b) { return b < a; }
  friend bool operator<=(const LogReal& a, const LogReal& b) { return !(b < a); }
  friend bool operator>=(const LogReal& a, const LogReal& b) { return !(a < b); }
  friend bool operator==(const LogReal& a, const LogReal& b) { return a.log2_ == b.log2_; }
  friend bool operator!=(const LogReal& a, const LogReal& b) { return !(a == b); }

 private:
  explicit LogReal(Log l) : log2_(std::move(l)) {}
  Log log2_;
};

/// A (possibly huge) real as a plain decimal string with `significant`
/// significant digits: fixed-point ("-48212.637018838464", the integer part
/// always complete), scientific only when |x| < 1e-3 ("1.5e-7"); "0" for 0,
/// "inf"/"-inf"/"nan" for those. Used for log10 values and slacks.
std::string to_decimal(const BigReal& x, int significant = 17);

/// Uniform form (Theorems 2.2/2.3, Corollary 3.2):
/// \f$ r_L \le a^{(3^L-1)/2} r_0^{3^L} \f$ at depth L ≥ 0 (L = 0 gives r_0).
LogReal uniform_bound(const LogReal& a, const LogReal& r0, int depth);
/// Layerwise form: \f$ \log r_L \le \sum_{k=1}^{L} 3^{L-k}\log a_k + 3^L \log r_0 \f$,
/// L = a_layers.size() (a_layers[k-1] = a_k), via r_l ≤ a_l r_{l−1}^3.
LogReal layerwise_bound(const std::vector<LogReal>& a_layers, const LogReal& r0);

// ---------------------------------------------------------------------------
// Weight quantities
// ---------------------------------------------------------------------------

/// Certified upper bound of the activation's Lipschitz constant at 1025 bits:
/// relu 1, gelu 1.1290, gelu_tanh 1.1300, silu 1.0999 (decimal constants
/// rounded up).
BigReal activation_lipschitz(Activation act);

/// One head: W_QK = W_Q W_Kᵀ (d×d), W_h = W_V W_O (d×d).
struct HeadQuantities {
  BigReal qk_norm_1;     ///< ‖W_QK‖_1
  BigReal vo_composite;  ///< ‖W_h‖_{1,∞}
  BigReal beta;          ///< β_{l,h} = ‖W_QK‖_1 · ‖W_h‖_{1,∞}
};

struct LayerQuantities {
  std::vector<HeadQuantities> heads;
  BigReal beta;  ///< β_l = max_h β_{l,h}
  /// λ_l = Lip(act)·‖W_1‖_{1,∞}·‖W_2‖_{1,∞}; nullopt without MLP weights
  /// and for a gated MLP (no global Lipschitz constant, math.md §8).
  std::optional<BigReal> lambda;
};

/// A·B (or A·Bᵀ with `transpose_b`) of double matrices with every entry
/// exact, as 1025-bit numbers: computed at the lowest tier that holds each
/// exact entry (128, 257 or 513 bits, from the exponent spans of A and B and
/// the inner dimension; 257 bits for trained weights), else at 1025 bits, so
/// the values are those of the 1025-bit product, bit for bit, at a fraction
/// of its cost.
Matrix<WeightReal> exact_weight_product(const MatrixXd& A, const MatrixXd& B, bool transpose_b);

/// Every weight quantity of a model (all BigReal at 1025 bits).
struct WeightQuantities {
  int heads = 0;
  int d_model = 0, d_qk = 0, d_v = 0, d_ff = 0;
  Activation activation = Activation::relu;
  std::vector<LayerQuantities> layers;
  BigReal beta;                   ///< β = max_l β_l
  std::optional<BigReal> lambda;  ///< max_l λ_l when every layer has an MLP
  /// Bound on the relative rounding error of every a (and a_l) computed from
  /// these quantities: K·2^−1025 with K = 2(d_qk + d_v + 2 d_model + d_ff) + 64
  /// (recursive-summation counts with a factor 2 to spare; assumes the
  /// weight products are exact, see the file comment).
  BigReal relative_error;
  /// Every W_Q W_Kᵀ and W_V W_O entry was computed exactly (so relative_error
  /// bounds every rounding): false only for weights spanning ~900 binades
  /// (possible for F64 weights only; F32, BF16 and F16 span at most 277).
  bool exact_products = true;
  int depth() const { return static_cast<int>(layers.size()); }
};

/// β_{l,h}, β_l, β, λ_l, λ of `model` at 1025 bits.
WeightQuantities weight_quantities(const Model& model);

// ---------------------------------------------------------------------------
// Theorem selection
// ---------------------------------------------------------------------------

/// `automatic` is a request only; `none` is the outcome "not applicable".
enum class Theorem { automatic, thm_2_2, thm_2_3, cor_3_2, none };

/// "auto", "2.2", "2.3", "3.2", "none".
std::string to_string(Theorem t);
/// Accepts "auto", "2.2", "2.3", "3.2" (also "thm2.2", "thm2.3", "cor3.2").
/// Throws std::invalid_argument naming `what`.
Theorem parse_theorem(const std::string& text, const std::string& what = "theorem");

/// Structure of the model outside the theorems' hypotheses (math.md §8):
/// rotary position embeddings make the attention logits depend on positions,
/// so the cubic bounds of §5 do not apply; a gated MLP has no global
/// Lipschitz constant, so Corollary 3.2 does not apply.
/// Likewise (families.md): T5's bucket bias and XLNet's relative terms add
/// position-dependent logits, Gemma 2's soft-cap makes them non-bilinear, and
/// Qwen3's and Gemma 3's query/key norms make them products of normalised rows.
struct Coverage {
  bool rotary = false;          ///< the model rotates queries and keys
  bool gated_mlp = false;       ///< the variant runs a gated (SwiGLU, GeGLU) MLP
  bool position_terms = false;  ///< T5 bucket bias or XLNet relative attention
  bool softcap = false;         ///< soft-capped logits (Gemma 2)
  bool query_key_norm = false;  ///< normalised query and key rows (Qwen3, Gemma 3)
  static Coverage of(const Model& model, const Variant& variant) {
    const Architecture& a = model.arch();
    return {a.rotary(), a.gated_mlp && variant.mlp != MlpKind::none, a.rel_buckets > 0 || a.xlnet_relative,
            a.softcap.has_value(), a.query_key_norm.has_value()};
  }
  bool any() const { return rotary || gated_mlp || position_terms || softcap || query_key_norm; }
};

struct TheoremChoice {
  Theorem theorem = Theorem::none;
  bool applicable = false;
  std::string reason;  ///< plain sentence: why this theorem, or why none applies
};

/// auto: 2.2 if H = 1 and mlp none, 2.3 if mlp none, 3.2 if mlp plain; not
/// applicable (no throw) with skip on (Claim 3.1), layernorm ≠ none, mlp
/// residual, or structure `coverage` flags. An explicit request that does
/// not match throws std::invalid_argument with the reason (e.g. 2.2 with H > 1).
TheoremChoice select_theorem(const Variant& variant, int heads, Theorem requested = Theorem::automatic,
                             const Coverage& coverage = {});

// ---------------------------------------------------------------------------
// Bounds against measurements
// ---------------------------------------------------------------------------

/// Everything the bound needs besides the measurements.
struct BoundInputs {
  WeightQuantities weights;
  Variant variant;
  BigReal gamma = BigReal(1);  ///< the paper's γ (arXiv v2); > 0, default 1
  Theorem theorem = Theorem::automatic;
  Coverage coverage{};  ///< structure outside the theorems (makes them not applicable)
};

/// A measured residual r_l = ‖res(X^l)‖_{1,∞} as an enclosure [lower, upper]
/// (a point when lower == upper). `below_resolution`: the residual is below
/// what the working precision resolves; `upper` is only an upper bound
/// (normally lower = 0 then).
struct MeasuredResidual {
  BigReal lower, upper;
  bool below_resolution = false;
};

/// The bound at one depth: `value` is the formula at r_0's upper end; the
/// enclosure [lower, upper] contains the exact formula at the true r_0:
/// lower at r_0's lower end, upper at its upper end, each widened by the
/// propagated rounding (weight quantities at 1025 bits, logarithms at
/// 4098 bits).
struct BoundEnclosure {
  LogReal value, lower, upper;
};

enum class Verdict { holds, violated, undecided, not_applicable };
/// "HOLDS", "VIOLATED", "UNDECIDED", "NOT_APPLICABLE".
std::string to_string(Verdict v);

/// HOLDS if measured.upper ≤ bound.lower; VIOLATED if measured.lower >
/// bound.upper; UNDECIDED otherwise (math.md §5). Compared in log form, the
/// measured logarithms widened by their own 4098-bit rounding.
Verdict decide(const MeasuredResidual& measured, const BoundEnclosure& bound);

/// One depth l = 1..L.
struct DepthComparison {
  int layer = 0;
  std::optional<BigReal> a_layer;                  ///< a_l from layer l alone
  std::optional<BoundEnclosure> bound;             ///< uniform form (the theorem)
  std::optional<BoundEnclosure> layerwise_bound;   ///< layerwise form, a_k for k ≤ l
  MeasuredResidual measured;
  Verdict verdict = Verdict::not_applicable;            ///< against `bound`
  Verdict layerwise_verdict = Verdict::not_applicable;  ///< against `layerwise_bound`
  /// log10(bound.value / measured.upper); nullopt when either is zero or
  /// no bound applies. Negative means the measurement exceeds the bound.
  std::optional<BigReal> slack_log10;
  /// â_l = r_l / r_{l−1}^3 from the upper ends of the two enclosures (a
  /// point estimate, not an enclosure); nullopt when either upper end is 0.
  std::optional<LogReal> cubic_constant;
  /// q_l = log r_l / log r_{l−1} from the upper ends; nullopt when either
  /// is 0 or r_{l−1} = 1.
  std::optional<BigReal> order;
};

/// How the uniform bound behaves with depth, at r_0's upper end (math.md §5).
enum class Contraction {
  not_applicable,  ///< no theorem applies (theorem.reason says why)
  a_zero,          ///< a = 0 (β = 0 or λ = 0): the bound is 0 at every depth ≥ 1
  r0_zero,         ///< r_0 = 0: the bound is 0 at every depth
  vacuous,         ///< √a·r_0 ≥ 1: the bound does not shrink with depth
  contracting      ///< √a·r_0 < 1: the bound shrinks doubly exponentially with depth
};

struct BoundsReport {
  BigReal gamma;
  TheoremChoice theorem;
  std::optional<BigReal> a;  ///< uniform constant 4γβHλ/√d_qk (H, λ as the theorem uses them)
  /// a^{−1/2}; nullopt when no theorem applies or a = 0 (then every r_0 contracts).
  std::optional<BigReal> contraction_radius;
  /// sqrt(a)·r_0 ≥ 1 at r_0's upper end: the bound does not shrink with depth.
  bool vacuous = false;
  Contraction contraction = Contraction::not_applicable;
  /// sqrt(a)·r_0 at r_0's upper end (vacuous or contracting only).
  std::optional<LogReal> sqrt_a_r0;
  std::vector<BigReal> beta;                   ///< β_l, l = 1..L (always)
  std::vector<std::optional<BigReal>> lambda;  ///< λ_l, l = 1..L
  std::vector<DepthComparison> depths;         ///< l = 1..L
};

/// Evaluates the selected theorem at every depth l = 1..L from r_0 =
/// measured[0] and compares with measured[l]. `measured` holds depths
/// 0..L (size L + 1). Throws std::invalid_argument for a wrong size, an
/// invalid enclosure (negative, NaN, lower > upper), γ ≤ 0, an explicit
/// theorem that does not match the variant, or Corollary 3.2 without λ.
BoundsReport compare_bounds(const BoundInputs& inputs, const std::vector<MeasuredResidual>& measured);

}  // namespace sanpath

#include "sanpath/compute/bounds.hpp"

#include "sanpath/core/linalg.hpp"
#include "compute/norms_impl.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace sanpath {

namespace {

using Log = LogReal::Log;
using W = WeightReal;

constexpr long weight_bits = precision_bits_v<W>;

/// log10 2 at 4098 bits.
const Log& log10_of_2() {
  static const Log c = [] {
    Log two(2), r;
    mpfr_log10(r.backend().data(), two.backend().data(), MPFR_RNDN);
    return r;
  }();
  return c;
}

/// log2 10 at 4098 bits.
const Log& log2_of_10() {
  static const Log c = [] {
    Log ten(10), r;
    mpfr_log2(r.backend().data(), ten.backend().data(), MPFR_RNDN);
    return r;
  }();
  return c;
}

Log minus_infinity() {
  Log r;
  mpfr_set_inf(r.backend().data(), -1);
  return r;
}

bool is_finite(const BigReal& x) { return mpfr_number_p(x.backend().data()) != 0; }

/// Integer-valued Log as a decimal string (exact: "%.0Rf" of an integer).
std::string integer_string(const Log& x) {
  char* out = nullptr;
  if (mpfr_asprintf(&out, "%.0Rf", x.backend().data()) < 0 || out == nullptr)
    throw std::runtime_error("LogReal: mpfr_asprintf failed");
  std::string s(out);
  mpfr_free_str(out);
  return s == "-0" ? "0" : s;
}

/// Rounding allowance of one log-form evaluation, in units of |log2| sums:
/// 16 units of the 4098-bit roundoff covers the few correctly rounded
/// operations (log2, the products by 3^L, the sum) of every formula here.
const Log& log_eta() {
  static const Log eta = [] {
    Log one(1), r;
    mpfr_mul_2si(r.backend().data(), one.backend().data(), -(LogReal::bits - 4), MPFR_RNDN);
    return r;
  }();
  return eta;
}

}  // namespace

// ---------------------------------------------------------------------------
// LogReal
// ---------------------------------------------------------------------------

LogReal::LogReal() : log2_(minus_infinity()) {}

LogReal LogReal::one() { return LogReal(Log(0)); }

LogReal LogReal::from_value(const BigReal& x) {
  const mpfr_srcptr v = x.backend().data();
  if (mpfr_nan_p(v)) throw std::invalid_argument("LogReal: value is NaN");
  if (mpfr_inf_p(v)) throw std::invalid_argument("LogReal: value is infinite");
  if (mpfr_sgn(v) < 0) throw std::invalid_argument("LogReal: value " + to_sci(x, 6) + " is negative");
  if (mpfr_zero_p(v)) return LogReal();
  Log l;
  mpfr_log2(l.backend().data(), v, MPFR_RNDN);
  return LogReal(std::move(l));
}

LogReal LogReal::from_log2(const Log& log2x) {
  const mpfr_srcptr v = log2x.backend().data();
  if (mpfr_nan_p(v)) throw std::invalid_argument("LogReal: log2 is NaN");
  if (mpfr_inf_p(v) && mpfr_sgn(v) > 0) throw std::invalid_argument("LogReal: log2 is +inf");
  return LogReal(log2x);
}

LogReal LogReal::from_log2(const BigReal& log2x) {
  Log l;
  mpfr_set(l.backend().data(), log2x.backend().data(), MPFR_RNDN);
  return from_log2(l);
}

LogReal LogReal::from_log10(const BigReal& log10x) {
  Log l;
  mpfr_set(l.backend().data(), log10x.backend().data(), MPFR_RNDN);
  if (mpfr_inf_p(l.backend().data()) && mpfr_sgn(l.backend().data()) < 0) return LogReal();
  return from_log2(Log(l * log2_of_10()));
}

bool LogReal::is_zero() const {
  const mpfr_srcptr v = log2_.backend().data();
  return mpfr_inf_p(v) && mpfr_sgn(v) < 0;
}

BigReal LogReal::log10() const {
  if (is_zero()) return BigReal(log2_);
  return BigReal(Log(log2_ * log10_of_2()));
}

std::optional<BigReal> LogReal::value() const {
  if (is_zero()) return BigReal(Log(0));
  // Keep two binades of margin inside MPFR's current exponent range.
  const Log hi(static_cast<double>(mpfr_get_emax() - 2)), lo(static_cast<double>(mpfr_get_emin() + 2));
  if (log2_ >= hi || log2_ <= lo) return std::nullopt;
  Log r;
  mpfr_exp2(r.backend().data(), log2_.backend().data(), MPFR_RNDN);
  return BigReal(r);
}

std::string LogReal::to_string(int significant) const {
  if (is_zero()) return "0";
  if (significant < 1) significant = 1;
  const Log t = log2_ * log10_of_2();
  Log e;
  mpfr_floor(e.backend().data(), t.backend().data());
  const Log frac = t - e;  // exact: e is t's integer part, in [0, 1)
  Log mant;
  mpfr_exp10(mant.backend().data(), frac.backend().data(), MPFR_RNDN);  // in [1, 10]
  // to_sci prints "d.ddd…e0", or "1.00…e1" when rounding carried to 10.
  const std::string m = to_sci(BigReal(mant), significant);
  const auto pos = m.find('e');
  if (pos == std::string::npos) throw std::runtime_error("LogReal: unexpected mantissa '" + m + "'");
  const long carry = std::stol(m.substr(pos + 1));
  return m.substr(0, pos) + "e" + integer_string(Log(e + Log(carry)));
}

std::string LogReal::log10_string(int significant) const {
  if (is_zero()) return "-inf";
  return to_decimal(log10(), significant);
}

LogReal LogReal::operator*(const LogReal& o) const {
  if (is_zero() || o.is_zero()) return LogReal();
  return LogReal(Log(log2_ + o.log2_));
}

LogReal LogReal::operator/(const LogReal& o) const {
  if (o.is_zero()) throw std::domain_error("LogReal: division by zero");
  if (is_zero()) return LogReal();
  return LogReal(Log(log2_ - o.log2_));
}

LogReal LogReal::pow(const Log& e) const {
  if (mpfr_nan_p(e.backend().data()) || mpfr_inf_p(e.backend().data()))
    throw std::domain_error("LogReal: power with a non-finite exponent");
  if (e == 0) return one();
  if (is_zero()) {
    if (e < 0) throw std::domain_error("LogReal: zero to a negative power");
    return LogReal();
  }
  return LogReal(Log(log2_ * e));
}

LogReal LogReal::times_pow2(const Log& k) const {
  if (mpfr_nan_p(k.backend().data()) || mpfr_inf_p(k.backend().data()))
    throw std::domain_error("LogReal: scaling by a non-finite power of 2");
  if (is_zero()) return LogReal();
  return LogReal(Log(log2_ + k));
}

std::string to_decimal(const BigReal& x, int significant) {
  const mpfr_srcptr v = x.backend().data();
  if (mpfr_nan_p(v)) return "nan";
  if (mpfr_inf_p(v)) return mpfr_sgn(v) > 0 ? "inf" : "-inf";
  if (mpfr_zero_p(v)) return "0";
  if (significant < 1) significant = 1;
  if (log10_abs(x) < -3) return to_sci(x, significant);
  // Number of integer digits minus one (a digit more or less only changes
  // how many decimals are shown).
  const long e = static_cast<long>(std::floor(log10_abs(x)));
  const long decimals = std::max(0L, static_cast<long>(significant) - 1 - e);
  char* out = nullptr;
  if (mpfr_asprintf(&out, "%.*Rf", static_cast<int>(decimals), v) < 0 || out == nullptr)
    throw std::runtime_error("to_decimal: mpfr_asprintf failed");
  std::string s(out);
  mpfr_free_str(out);
  return s;
}

// ---------------------------------------------------------------------------
// Bound formulas
// ---------------------------------------------------------------------------

namespace {

/// 3^L at 4098 bits (exact for L ≤ 2584).
Log three_to(int depth) {
  Log three(3), r;
  mpfr_pow_ui(r.backend().data(), three.backend().data(), static_cast<unsigned long>(depth), MPFR_RNDN);
  return r;
}

Log abs_log2(const LogReal& x) { return x.is_zero() ? Log(0) : Log(abs(x.log2())); }

}  // namespace

LogReal uniform_bound(const LogReal& a, const LogReal& r0, int depth) {
  if (depth < 0) throw std::invalid_argument("uniform_bound: depth " + std::to_string(depth) + " is negative");
  const Log c2 = three_to(depth);
  const Log c1 = Log(c2 - 1) / 2;
  return a.pow(c1) * r0.pow(c2);
}

LogReal layerwise_bound(const std::vector<LogReal>& a_layers, const LogReal& r0) {
  LogReal r = r0;
  for (const LogReal& a : a_layers) r = a * r.pow(3);
  return r;
}

// ---------------------------------------------------------------------------
// Weight quantities
// ---------------------------------------------------------------------------

BigReal activation_lipschitz(Activation act) {
  const char* text = "1";
  switch (act) {
    case Activation::relu: text = "1"; break;
    case Activation::gelu: text = "1.1290"; break;
    case Activation::gelu_tanh:
    case Activation::gelu_fast: text = "1.1300"; break;
    case Activation::silu: text = "1.0999"; break;  // max of σ(x)(1 + x(1 − σ(x))) ≈ 1.09984
  }
  W x;
  // Rounded up: the decimal constant is an upper bound, so is its binary value.
  mpfr_set_str(x.backend().data(), text, 10, MPFR_RNDU);
  return BigReal(x);
}

namespace {

/// max − min of the binary exponents (ilogb) of the nonzero entries of M;
/// 0 when it has none.
int exponent_span(const MatrixXd& M) {
  int lo = std::numeric_limits<int>::max(), hi = std::numeric_limits<int>::min();
  for (Eigen::Index j = 0; j < M.cols(); ++j)
    for (Eigen::Index i = 0; i < M.rows(); ++i)
      if (M(i, j) != 0) {
        const int e = std::ilogb(M(i, j));
        lo = std::min(lo, e);
        hi = std::max(hi, e);
      }
  return hi >= lo ? hi - lo : 0;
}

/// f(C) for C = A·op(B) at the lowest tier that holds every exact entry
/// (exact_weight_product).
template <class F>
decltype(auto) with_exact_product(const MatrixXd& A, const MatrixXd& B, bool transpose_b, F&& f, bool* exact = nullptr) {
  // An entry Σ_p a_p b_p of doubles (a = m·2^(e−52), |a| < 2^(e+1)) is an
  // integer multiple of 2^(E_min − 104) below k·2^(E_max + 2), E = e_a + e_b
  // over the nonzero products: it has at most span_A + span_B + 106 +
  // ⌈log2 k⌉ significant bits. The products of linalg.hpp align the rows and
  // columns exactly at W ≥ p + 48 bits (every span here is below that),
  // form the exact integer dot product and round it once to p bits: no
  // rounding at all when p holds those bits. One bit is kept to spare.
  const long k = A.cols();
  const long bits =
      exponent_span(A) + exponent_span(B) + 106 + static_cast<long>(std::ceil(std::log2(std::max(k, 1L)))) + 1;
  const auto at = [&](auto tag) -> decltype(auto) {
    using S = typename decltype(tag)::type;
    Matrix<S> C;
    if (transpose_b) {
      gemm_nt(convert<S>(A), convert<S>(B), C);
    } else {
      gemm(convert<S>(A), convert<S>(B), C);
    }
    return f(C);
  };
  if (bits <= precision_bits_v<mpfr_real<38>>) return at(scalar_tag<mpfr_real<38>>{});
  if (bits <= precision_bits_v<mpfr_real<77>>) return at(scalar_tag<mpfr_real<77>>{});
  if (bits <= precision_bits_v<mpfr_real<154>>) return at(scalar_tag<mpfr_real<154>>{});
  if (exact && bits > precision_bits_v<W>) *exact = false;
  return at(scalar_tag<W>{});  // exact unless the weights span ~900 binades (bounds.hpp)
}

/// ‖C‖_1 and ‖C‖_∞ of a double or MPFR matrix of at most 1025 bits, every
/// |entry| added exactly into 1025-bit sums in the order of norms.hpp
/// (columns in turn, each row's sum across them): norm_1 and norm_inf of C
/// converted to 1025 bits, bit for bit, without the converted copy.
struct OneInf {
  W one, inf;
};
template <class S> OneInf one_and_inf(const Matrix<S>& C) {
  std::vector<W> row(static_cast<std::size_t>(C.rows()), W(0));
  W one(0), col(0);
  for (Eigen::Index j = 0; j < C.cols(); ++j) {
    col = W(0);
    for (Eigen::Index i = 0; i < C.rows(); ++i) {
      mpfr_ptr r = row[static_cast<std::size_t>(i)].backend().data();
      if constexpr (std::is_same_v<S, double>) {
        const double x = std::fabs(C(i, j));
        mpfr_add_d(col.backend().data(), col.backend().data(), x, MPFR_RNDN);
        mpfr_add_d(r, r, x, MPFR_RNDN);
      } else if (mpfr_srcptr x = C(i, j).backend().data(); mpfr_sgn(x) >= 0) {
        mpfr_add(col.backend().data(), col.backend().data(), x, MPFR_RNDN);
        mpfr_add(r, r, x, MPFR_RNDN);
      } else {
        mpfr_sub(col.backend().data(), col.backend().data(), x, MPFR_RNDN);
        mpfr_sub(r, r, x, MPFR_RNDN);
      }
    }
    if (col > one) one = col;
  }
  W inf(0);
  for (const W& r : row)
    if (r > inf) inf = r;
  return {one, inf};
}

/// ‖C‖_{1,∞} as norms.hpp's norm_composite of C at 1025 bits.
template <class S> W composite_norm(const Matrix<S>& C) {
  const OneInf n = one_and_inf(C);
  return norms_detail::geometric_mean(n.one, n.inf);
}

}  // namespace

Matrix<W> exact_weight_product(const MatrixXd& A, const MatrixXd& B, bool transpose_b) {
  return with_exact_product(A, B, transpose_b, [](const auto& C) -> Matrix<W> {
    if constexpr (std::is_same_v<std::decay_t<decltype(C)>, Matrix<W>>) {
      return C;
    } else {
      return convert<W>(C);  // exact: W holds more bits than the tier
    }
  });
}

WeightQuantities weight_quantities(const Model& model) {
  const Architecture& arch = model.arch();
  WeightQuantities q;
  q.heads = arch.heads;
  q.d_model = arch.d_model;
  q.d_qk = arch.d_qk;
  q.d_v = arch.d_v;
  q.d_ff = arch.d_ff;
  q.activation = arch.activation;
  const W lip(activation_lipschitz(arch.activation));
  W beta_max(0), lambda_max(0);
  bool every_lambda = true;
  for (int l = 0; l < arch.layers; ++l) {
    const LayerWeights& lw = model.layer(l);
    LayerQuantities lq;
    W beta_l(0);
    for (const HeadWeights& hw : lw.heads) {
      // ‖W_Q W_Kᵀ‖_1 (d×d_qk · (d×d_qk)ᵀ) and ‖W_V W_O‖_{1,∞} (d×d_v · d_v×d)
      // of the exact products, as norm_1 and norm_composite at 1025 bits.
      const W n1 = with_exact_product(
          hw.W_Q, hw.W_K, true, [](const auto& C) { return one_and_inf(C).one; }, &q.exact_products);
      const W comp = with_exact_product(
          hw.W_V, hw.W_O, false, [](const auto& C) { return composite_norm(C); }, &q.exact_products);
      const W beta = n1 * comp;
      if (beta > beta_l) beta_l = beta;
      lq.heads.push_back({BigReal(n1), BigReal(comp), BigReal(beta)});
    }
    lq.beta = BigReal(beta_l);
    if (beta_l > beta_max) beta_max = beta_l;
    if (lw.has_mlp() && !lw.gated()) {
      const W lambda = lip * composite_norm(lw.W_1) * composite_norm(lw.W_2);
      lq.lambda = BigReal(lambda);
      if (lambda > lambda_max) lambda_max = lambda;
    } else {
      every_lambda = false;
    }
    q.layers.push_back(std::move(lq));
  }
  q.beta = BigReal(beta_max);
  if (every_lambda && !q.layers.empty()) q.lambda = BigReal(lambda_max);
  const long k = 2L * (arch.d_qk + arch.d_v + 2L * arch.d_model + arch.d_ff) + 64;
  W rel(k);
  mpfr_mul_2si(rel.backend().data(), rel.backend().data(), -weight_bits, MPFR_RNDU);
  q.relative_error = BigReal(rel);
  return q;
}

// ---------------------------------------------------------------------------
// Theorem selection
// ---------------------------------------------------------------------------

std::string to_string(Theorem t) {
  switch (t) {
    case Theorem::automatic: return "auto";
    case Theorem::thm_2_2: return "2.2";
    case Theorem::thm_2_3: return "2.3";
    case Theorem::cor_3_2: return "3.2";
    case Theorem::none: return "none";
  }
  return "?";
}

Theorem parse_theorem(const std::string& text, const std::string& what) {
  if (text == "auto") return Theorem::automatic;
  if (text == "2.2" || text == "thm2.2") return Theorem::thm_2_2;
  if (text == "2.3" || text == "thm2.3") return Theorem::thm_2_3;
  if (text == "3.2" || text == "cor3.2") return Theorem::cor_3_2;
  throw std::invalid_argument(what + ": '" + text + "' is not one of auto, 2.2, 2.3, 3.2");
}

namespace {

std::string theorem_name(Theorem t) {
  switch (t) {
    case Theorem::thm_2_2: return "Theorem 2.2";
    case Theorem::thm_2_3: return "Theorem 2.3";
    case Theorem::cor_3_2: return "Corollary 3.2";
    default: return "theorem " + to_string(t);
  }
}

/// Why no bound of this form covers the variant; empty when one may.
std::string not_covered(const Variant& v, const Coverage& cov) {
  if (v.skip)
    return "with skip connections no bound of this form holds (the paper's Claim 3.1: infinitely many "
           "parameterisations keep r_L >= r_0); see the measured residuals and the path-length split instead";
  if (v.layernorm != LayerNormKind::none)
    return "the theorems do not cover LayerNorm (layernorm " + to_string(v.layernorm) +
           "); they are stated for layernorm none";
  if (v.mlp == MlpKind::residual)
    return "Corollary 3.2 covers a plain MLP (X' = f(Z)), not an MLP with its own residual (X' = Z + f(Z), "
           "mlp residual)";
  if (cov.rotary)
    return "the cubic bounds do not cover rotary position embeddings (the attention logits depend on positions, "
           "math.md §8)";
  if (cov.position_terms)
    return "the cubic bounds do not cover position terms in the attention logits (T5's bucket bias, XLNet's "
           "relative attention: rows of P differ even for a rank-1 input, families.md)";
  if (cov.softcap)
    return "the cubic bounds do not cover soft-capped logits c·tanh(s·q·k/c) (Gemma 2, families.md)";
  if (cov.query_key_norm)
    return "the cubic bounds do not cover query/key norms (each logit is a product of normalised rows, not a "
           "quadratic form in X: Qwen3, Gemma 3, families.md)";
  if (cov.gated_mlp)
    return "Corollary 3.2 does not cover the gated (SwiGLU) MLP, which has no global Lipschitz constant (math.md §8)";
  return {};
}

}  // namespace

TheoremChoice select_theorem(const Variant& variant, int heads, Theorem requested, const Coverage& coverage) {
  if (heads < 1) throw std::invalid_argument("theorem: the model has " + std::to_string(heads) + " heads");
  const std::string uncovered = not_covered(variant, coverage);
  TheoremChoice c;
  if (requested == Theorem::automatic) {
    if (!uncovered.empty()) {
      c.theorem = Theorem::none;
      c.applicable = false;
      c.reason = "not applicable: " + uncovered + ".";
      return c;
    }
    if (variant.mlp == MlpKind::plain)
      c.theorem = Theorem::cor_3_2;
    else
      c.theorem = heads == 1 ? Theorem::thm_2_2 : Theorem::thm_2_3;
  } else if (requested == Theorem::none) {
    throw std::invalid_argument("theorem: 'none' is not a theorem to request");
  } else {
    const std::string name = theorem_name(requested);
    if (!uncovered.empty()) throw std::invalid_argument(name + " does not apply: " + uncovered);
    if (requested == Theorem::thm_2_2 && heads != 1)
      throw std::invalid_argument("Theorem 2.2 needs a single head (H = 1), the model has H = " +
                                  std::to_string(heads) + " heads; use 2.3 or auto");
    if ((requested == Theorem::thm_2_2 || requested == Theorem::thm_2_3) && variant.mlp != MlpKind::none)
      throw std::invalid_argument(name + " covers attention-only networks (mlp none), this variant has mlp " +
                                  to_string(variant.mlp) + "; use 3.2 or auto");
    if (requested == Theorem::cor_3_2 && variant.mlp != MlpKind::plain)
      throw std::invalid_argument("Corollary 3.2 covers a plain MLP (mlp plain), this variant has mlp " +
                                  to_string(variant.mlp) + "; use " + (heads == 1 ? "2.2" : "2.3") + " or auto");
    c.theorem = requested;
  }
  c.applicable = true;
  switch (c.theorem) {
    case Theorem::thm_2_2:
      c.reason = "Theorem 2.2: single-head SAN (skip off, mlp none, layernorm none), a = 4*gamma*beta/sqrt(d_qk).";
      break;
    case Theorem::thm_2_3:
      c.reason = "Theorem 2.3: SAN with H heads (skip off, mlp none, layernorm none), a = 4*gamma*beta*H/sqrt(d_qk).";
      break;
    default:
      c.reason = "Corollary 3.2: SAN with a plain MLP (skip off, mlp plain, layernorm none), "
                 "a = 4*gamma*beta*H*lambda/sqrt(d_qk).";
      break;
  }
  return c;
}

// ---------------------------------------------------------------------------
// Verdicts
// ---------------------------------------------------------------------------

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::holds: return "HOLDS";
    case Verdict::violated: return "VIOLATED";
    case Verdict::undecided: return "UNDECIDED";
    case Verdict::not_applicable: return "NOT_APPLICABLE";
  }
  return "?";
}

namespace {

/// A measured end in log form, widened outwards (dir = +1 up, −1 down) by
/// its own 4098-bit rounding.
LogReal widened(const BigReal& x, int dir) {
  const LogReal l = LogReal::from_value(x);
  if (l.is_zero()) return l;
  const Log w = log_eta() * Log(abs(l.log2()) + 1);
  return l.times_pow2(dir > 0 ? w : Log(-w));
}

void check_measured(const MeasuredResidual& m, const std::string& where) {
  if (!is_finite(m.lower) || !is_finite(m.upper))
    throw std::invalid_argument(where + ": lower and upper must be finite");
  if (m.lower < 0) throw std::invalid_argument(where + ": lower " + to_sci(m.lower, 6) + " is negative");
  if (m.lower > m.upper)
    throw std::invalid_argument(where + ": lower " + to_sci(m.lower, 6) + " exceeds upper " + to_sci(m.upper, 6));
}

}  // namespace

Verdict decide(const MeasuredResidual& measured, const BoundEnclosure& bound) {
  check_measured(measured, "measured residual");
  if (widened(measured.upper, +1) <= bound.lower) return Verdict::holds;
  if (widened(measured.lower, -1) > bound.upper) return Verdict::violated;
  return Verdict::undecided;
}

// ---------------------------------------------------------------------------
// compare_bounds
// ---------------------------------------------------------------------------

namespace {

/// The bound at one end of r_0 and its rounding allowance (a log2 width).
struct Evaluated {
  LogReal value;
  Log width;
};

/// Enclosure from evaluations at r_0's lower and upper ends.
BoundEnclosure enclose(const Evaluated& at_lower, const Evaluated& at_upper) {
  return {at_upper.value, at_lower.value.times_pow2(Log(-at_lower.width)), at_upper.value.times_pow2(at_upper.width)};
}

/// Running layerwise evaluation from one end of r_0: r_l = a_l r_{l−1}^3,
/// S_l = 3 S_{l−1} + |log2 a_l| (the sum of |terms| the rounding scales with).
struct LayerwiseRun {
  LogReal r;
  Log s;
  void step(const LogReal& a) {
    r = a * r.pow(3);
    s = Log(3 * s + abs_log2(a));
  }
};

}  // namespace

BoundsReport compare_bounds(const BoundInputs& inputs, const std::vector<MeasuredResidual>& measured) {
  const WeightQuantities& wq = inputs.weights;
  const int L = wq.depth();
  if (L < 1) throw std::invalid_argument("bounds: the weight quantities have no layers");
  if (static_cast<int>(measured.size()) != L + 1)
    throw std::invalid_argument("bounds: need measured residuals at depths 0.." + std::to_string(L) + " (" +
                                std::to_string(L + 1) + " values), got " + std::to_string(measured.size()));
  for (int l = 0; l <= L; ++l) check_measured(measured[static_cast<std::size_t>(l)], "measured residual at depth " + std::to_string(l));
  if (!is_finite(inputs.gamma) || !(inputs.gamma > 0))
    throw std::invalid_argument("bounds: gamma must be a finite number > 0, got " + to_sci(inputs.gamma, 6));
  if (wq.d_qk < 1) throw std::invalid_argument("bounds: d_qk must be at least 1");

  BoundsReport rep;
  rep.gamma = inputs.gamma;
  rep.theorem = select_theorem(inputs.variant, wq.heads, inputs.theorem, inputs.coverage);
  for (const LayerQuantities& lq : wq.layers) {
    rep.beta.push_back(lq.beta);
    rep.lambda.push_back(lq.lambda);
  }

  // Measured-only quantities, from the upper ends.
  rep.depths.resize(static_cast<std::size_t>(L));
  for (int l = 1; l <= L; ++l) {
    DepthComparison& d = rep.depths[static_cast<std::size_t>(l - 1)];
    d.layer = l;
    d.measured = measured[static_cast<std::size_t>(l)];
    const LogReal cur = LogReal::from_value(measured[static_cast<std::size_t>(l)].upper);
    const LogReal prev = LogReal::from_value(measured[static_cast<std::size_t>(l - 1)].upper);
    if (!cur.is_zero() && !prev.is_zero()) {
      d.cubic_constant = cur / prev.pow(3);
      if (prev.log2() != 0) d.order = BigReal(Log(cur.log2() / prev.log2()));
    }
  }
  if (!rep.theorem.applicable) return rep;

  // a = 4γβ·H·λ/√d_qk with the factors the theorem uses.
  const bool use_heads = rep.theorem.theorem != Theorem::thm_2_2;  // 2.2 has H = 1 anyway
  const bool use_lambda = rep.theorem.theorem == Theorem::cor_3_2;
  if (use_lambda && !wq.lambda)
    throw std::invalid_argument("Corollary 3.2: the model has no MLP weights in some layer, lambda is undefined");
  const W factor = W(4) * W(inputs.gamma) * (use_heads ? W(wq.heads) : W(1)) / sqrt(W(wq.d_qk));
  const W a = factor * W(wq.beta) * (use_lambda ? W(*wq.lambda) : W(1));
  rep.a = BigReal(a);
  std::vector<LogReal> a_log;
  for (const LayerQuantities& lq : wq.layers) {
    const W al = factor * W(lq.beta) * (use_lambda ? W(*lq.lambda) : W(1));
    a_log.push_back(LogReal::from_value(BigReal(al)));
    rep.depths[a_log.size() - 1].a_layer = BigReal(al);
  }
  const LogReal A = LogReal::from_value(*rep.a);

  // Rounding allowances. e_a bounds |log2 of the relative error of a| (and
  // of every a_l): |log2(1 + δ)| ≤ 1.5|δ| for |δ| ≤ 2^−900.
  const Log e_a = Log(wq.relative_error) * Log(1.5);
  const Log& eta = log_eta();
  const LogReal R_lo = LogReal::from_value(measured[0].lower);
  const LogReal R_hi = LogReal::from_value(measured[0].upper);

  // Contraction radius and vacuity at r_0's upper end.
  if (A.is_zero()) {
    rep.contraction = Contraction::a_zero;
  } else {
    rep.contraction_radius = BigReal(W(1) / sqrt(a));
    if (R_hi.is_zero()) {
      rep.contraction = Contraction::r0_zero;
    } else {
      rep.sqrt_a_r0 = A.sqrt() * R_hi;
      rep.vacuous = *rep.sqrt_a_r0 >= LogReal::one();
      rep.contraction = rep.vacuous ? Contraction::vacuous : Contraction::contracting;
    }
  }

  LayerwiseRun lw_lo{R_lo, abs_log2(R_lo)}, lw_hi{R_hi, abs_log2(R_hi)};
  for (int l = 1; l <= L; ++l) {
    DepthComparison& d = rep.depths[static_cast<std::size_t>(l - 1)];
    const Log c2 = three_to(l);
    const Log c1 = Log(c2 - 1) / 2;
    const Log weights_width = c1 * e_a;
    // Uniform form: width = c1·e_a + η·(c1|log2 a| + c2|log2 r_0|).
    const auto uniform_at = [&](const LogReal& r0) {
      const Log s = c1 * abs_log2(A) + c2 * abs_log2(r0);
      return Evaluated{uniform_bound(A, r0, l), Log(weights_width + eta * s)};
    };
    d.bound = enclose(uniform_at(R_lo), uniform_at(R_hi));
    // Layerwise form: the recursion rounds once per layer, each rounding
    // scaled by at most the final sum S_l: width = c1·e_a + (l + 1)·η·S_l.
    lw_lo.step(a_log[static_cast<std::size_t>(l - 1)]);
    lw_hi.step(a_log[static_cast<std::size_t>(l - 1)]);
    const Log steps(l + 1);
    d.layerwise_bound = enclose(Evaluated{lw_lo.r, Log(weights_width + steps * eta * lw_lo.s)},
                                Evaluated{lw_hi.r, Log(weights_width + steps * eta * lw_hi.s)});

    d.verdict = decide(d.measured, *d.bound);
    d.layerwise_verdict = decide(d.measured, *d.layerwise_bound);
    const LogReal m_hi = LogReal::from_value(d.measured.upper);
    if (!m_hi.is_zero() && !d.bound->value.is_zero()) d.slack_log10 = (d.bound->value / m_hi).log10();
  }
  return rep;
}

}  // namespace sanpath

#include "support/helpers.hpp"

#include "sanpath/compute/bounds.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/model/random.hpp"

#include <boost/multiprecision/cpp_int.hpp>
#include <boost/multiprecision/gmp.hpp>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace sanpath;
using boost::multiprecision::cpp_int;
using W = WeightReal;

namespace {

/// The 8194-bit tier: "high precision" for the independent evaluations.
using Hi = mpfr_real<2466>;

/// A decimal string as a BigReal of `digits10` decimal digits.
BigReal big(const char* text, unsigned digits10 = 2466) {
  BigReal x(0, digits10);
  mpfr_set_str(x.backend().data(), text, 10, MPFR_RNDN);
  return x;
}

/// |a − b| / |b| in units of 2^(1−bits) (never through double).
BigReal rel_err_in_eps(const BigReal& a, const BigReal& b, long bits) {
  Hi x(a), y(b);
  Hi eps(1);
  mpfr_mul_2si(eps.backend().data(), eps.backend().data(), 1 - bits, MPFR_RNDN);
  return BigReal(Hi(abs(x - y) / abs(y) / eps));
}

constexpr long log_bits = LogReal::bits;
constexpr long w_bits = precision_bits_v<W>;

// ---- hand-built models -----------------------------------------------------

MatrixXd mat(std::initializer_list<std::initializer_list<double>> rows) {
  MatrixXd m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows.begin()->size()));
  Eigen::Index i = 0;
  for (const auto& r : rows) {
    Eigen::Index j = 0;
    for (double v : r) m(i, j++) = v;
    ++i;
  }
  return m;
}

HeadWeights head(MatrixXd WQ, MatrixXd WK, MatrixXd WV, MatrixXd WO) {
  HeadWeights h;
  h.b_Q = VectorXd::Zero(WQ.cols());
  h.b_K = VectorXd::Zero(WK.cols());
  h.b_V = VectorXd::Zero(WV.cols());
  h.W_Q = std::move(WQ);
  h.W_K = std::move(WK);
  h.W_V = std::move(WV);
  h.W_O = std::move(WO);
  return h;
}

/// A model from per-layer heads; optional MLP (W_1, W_2) shared by all layers.
Model make_model(std::vector<std::vector<HeadWeights>> heads, const MatrixXd& W1 = {}, const MatrixXd& W2 = {},
                 Activation act = Activation::relu) {
  Architecture a;
  a.layers = static_cast<int>(heads.size());
  a.heads = static_cast<int>(heads[0].size());
  a.d_model = static_cast<int>(heads[0][0].W_Q.rows());
  a.d_qk = static_cast<int>(heads[0][0].W_Q.cols());
  a.d_v = static_cast<int>(heads[0][0].W_V.cols());
  a.d_ff = static_cast<int>(W1.cols());
  a.activation = act;
  std::vector<LayerWeights> layers;
  for (auto& hs : heads) {
    LayerWeights lw;
    lw.heads = std::move(hs);
    lw.b_O = VectorXd::Zero(a.d_model);
    if (W1.size() > 0) {
      lw.W_1 = W1;
      lw.W_2 = W2;
      lw.b_1 = VectorXd::Zero(W1.cols());
      lw.b_2 = VectorXd::Zero(a.d_model);
    }
    layers.push_back(std::move(lw));
  }
  return Model(a, std::move(layers), std::nullopt, "test");
}

/// d = d_qk = d_v = 1, one head per layer, W_Q = v, W_K = W_V = W_O = 1:
/// β_l = ‖v·1‖_1·‖1‖_{1,∞} = |v| (no square root rounds), so with γ = 1,
/// H = 1: a_l = 4|v|/√1 = 4|v| exactly.
Model scalar_model(const std::vector<double>& v) {
  std::vector<std::vector<HeadWeights>> heads;
  for (double x : v) heads.push_back({head(mat({{x}}), mat({{1}}), mat({{1}}), mat({{1}}))});
  return make_model(std::move(heads));
}

MeasuredResidual point(const BigReal& x) { return {x, x, false}; }

}  // namespace

// ---------------------------------------------------------------------------
// Log-form arithmetic and printing
// ---------------------------------------------------------------------------

TEST_CASE("LogReal prints 1e-48213-style values with their true exponent") {
  // log10 x = -48212.5: x = 10^0.5 · 10^-48213, 10^0.5 = 3.16227766016837933199889...
  const LogReal x = LogReal::from_log10(big("-48212.5"));
  CHECK(x.to_string() == "3.1622776601683793e-48213");
  CHECK(x.to_string(2) == "3.2e-48213");
  CHECK(x.to_string(1) == "3e-48213");
  CHECK(x.log10_string() == "-48212.500000000000");  // 17 significant digits
  // The reciprocal: log10 = +48212.5.
  CHECK((LogReal::one() / x).to_string(5) == "3.1623e48212");
  // log10 x = -48213 exactly: mantissa 1.
  CHECK(LogReal::from_log10(big("-48213")).to_string(5) == "1.0000e-48213");
  // log10 x = -48212 - 1e-36: mantissa 10^(1 - 1e-36) = 9.99…98, rounds up to
  // 10 at 5 digits, so the exponent carries: 1.0000e-48212.
  CHECK(LogReal::from_log10(big("-48212.000000000000000000000000000001")).to_string(5) == "1.0000e-48212");
  // log10 2^-1000000 = -301029.99566398119…, 10^0.00433601880… = 1.0100340…:
  // 2^-1000000 = 1.0100e-301030 (a value MPFR can also hold directly).
  const LogReal p = LogReal::from_log2(big("-1000000"));
  CHECK(p.to_string(5) == "1.0100e-301030");
  CHECK(p.to_string(8) == "1.0100341e-301030");
  CHECK(to_sci(*p.value(), 8) == "1.0100341e-301030");
  // Zero prints as 0, never as a tiny number; nothing nonzero prints as 0.
  CHECK(LogReal::zero().to_string() == "0");
  CHECK(LogReal::zero().log10_string() == "-inf");
  CHECK(LogReal::zero().is_zero());
  CHECK_FALSE(LogReal::from_log2(big("-1e300")).is_zero());
  CHECK(LogReal::from_log2(big("-1e300")).to_string(3).find("e-3") != std::string::npos);
}

TEST_CASE("LogReal agrees with to_sci on representable values and keeps its arithmetic exact") {
  for (const char* s : {"0.000123456789", "1", "7.5", "123456.789", "3.3e-700", "2.5e900"}) {
    const BigReal x = big(s, 60);
    CAPTURE(s);
    CHECK(LogReal::from_value(x).to_string(15) == to_sci(x, 15));
    CHECK(rel_err_in_eps(*LogReal::from_value(x).value(), x, 190) <= 8);
  }
  const LogReal a = LogReal::from_value(big("0.75"));
  const LogReal b = LogReal::from_value(big("3"));
  CHECK(rel_err_in_eps(*(a * b).value(), big("2.25"), log_bits) <= 8);
  CHECK(rel_err_in_eps(*(a / b).value(), big("0.25"), log_bits) <= 8);
  CHECK(rel_err_in_eps(*b.pow(5).value(), big("243"), log_bits) <= 8);
  CHECK(rel_err_in_eps(*b.sqrt().value(), BigReal(sqrt(Hi(3))), log_bits) <= 8);
  CHECK(a < b);
  CHECK(b > a);
  CHECK(LogReal::zero() < a);
  CHECK(LogReal::zero() <= LogReal::zero());
  CHECK(LogReal::zero().pow(3).is_zero());
  CHECK(LogReal::zero().pow(0) == LogReal::one());
  CHECK_THROWS_AS(a / LogReal::zero(), std::domain_error);
  CHECK_THROWS_AS(LogReal::from_value(big("-1")), std::invalid_argument);
  // Far outside MPFR's exponent range: still ordered, no value() though.
  const LogReal tiny = LogReal::from_log2(big("-1e400"));
  CHECK_FALSE(tiny.value().has_value());
  CHECK(tiny < LogReal::from_log2(big("-1e399")));
  CHECK(LogReal::zero() < tiny);
}

TEST_CASE("to_decimal prints logarithms and slacks as plain decimals") {
  CHECK(to_decimal(big("-48212.637", 40), 8) == "-48212.637");
  CHECK(to_decimal(big("2.5", 40), 3) == "2.50");
  CHECK(to_decimal(big("0.00015", 40), 2) == "1.5e-4");
  CHECK(to_decimal(BigReal(0)) == "0");
}

// ---------------------------------------------------------------------------
// Bound formulas
// ---------------------------------------------------------------------------

TEST_CASE("log-form uniform bound equals direct evaluation wherever the latter is representable") {
  // Direct: a^((3^L-1)/2) · r0^(3^L) with mpfr pow at 8194 bits. Representable
  // (log2 above MPFR's emin ≈ -2^30) up to L = 18 for r0 = 0.3.
  const BigReal a = big("1.7"), r0 = big("0.3");
  const LogReal la = LogReal::from_value(a), lr = LogReal::from_value(r0);
  for (int L = 0; L <= 18; ++L) {
    const double n3 = std::pow(3.0, L);  // exact in double for L <= 33
    const BigReal direct = BigReal(pow(Hi(a), Hi((n3 - 1) / 2)) * pow(Hi(r0), Hi(n3)));
    REQUIRE(mpfr_regular_p(direct.backend().data()));
    const LogReal b = uniform_bound(la, lr, L);
    const auto v = b.value();
    REQUIRE(v.has_value());
    // The log has |log2| ≈ 1.74·3^L and 4098-bit relative rounding: the value's
    // relative error is a few 4098-bit epsilons times |log2|.
    const BigReal tol = BigReal(Hi(Hi(abs(b.log2())) * 4 + 16));
    CAPTURE(L, to_sci(direct, 20), b.to_string(20));
    CHECK(rel_err_in_eps(*v, direct, log_bits) <= tol);
    CHECK(b.to_string(12) == to_sci(direct, 12));
  }
  // At L = 19 the direct value underflows MPFR's range; the log form does not.
  const double n3 = std::pow(3.0, 19);
  const Hi direct19 = pow(Hi(a), Hi((n3 - 1) / 2)) * pow(Hi(r0), Hi(n3));
  CHECK(direct19 == 0);
  CHECK_FALSE(uniform_bound(la, lr, 19).is_zero());
}

TEST_CASE("log-form layerwise bound equals direct evaluation") {
  // log r_L = Σ_k 3^(L-k) log a_k + 3^L log r0, directly as a product of powers.
  const std::vector<const char*> as = {"1.1", "2.5", "0.7", "3.25", "0.9", "1.6", "0.05", "4"};
  const BigReal r0 = big("0.45");
  std::vector<LogReal> la;
  for (std::size_t L = 1; L <= as.size(); ++L) {
    la.push_back(LogReal::from_value(big(as[L - 1])));
    Hi direct = pow(Hi(r0), Hi(std::pow(3.0, static_cast<double>(L))));
    for (std::size_t k = 1; k <= L; ++k) direct *= pow(Hi(big(as[k - 1])), Hi(std::pow(3.0, static_cast<double>(L - k))));
    const LogReal b = layerwise_bound(la, LogReal::from_value(r0));
    CAPTURE(L);
    CHECK(rel_err_in_eps(*b.value(), BigReal(direct), log_bits) <= BigReal(Hi(Hi(abs(b.log2())) * 4 * L + 16)));
  }
}

TEST_CASE("the bound at L = 1000 is finite and printed with its exact exponent") {
  // a = 1.5, r0 = 0.5 (both exact in binary). log10 r_1000 =
  // ((3^1000-1)/2)·log10 1.5 + 3^1000·log10 0.5, the dominant term
  // 3^1000·(log10 0.5 + log10(1.5)/2) ≈ -1.32e477·0.213 ≈ -2.8e476 (477 digits).
  // Independently: 3^1000 as an exact integer (cpp_int), logs at 8194 bits.
  const cpp_int n = boost::multiprecision::pow(cpp_int(3), 1000);
  const Hi N(n.str().c_str());  // 3^1000 < 2^1585: exact at 8194 bits
  const Hi t = Hi(N - 1) / 2 * log10(Hi(1.5)) + N * log10(Hi(0.5));
  const Hi E = floor(t);
  boost::multiprecision::mpz_int e;
  mpfr_get_z(e.backend().data(), E.backend().data(), MPFR_RNDN);
  const std::string exponent = e.str();
  CHECK(exponent.size() == 478);  // '-' and 477 digits
  const std::string mant = to_sci(BigReal(Hi(pow(Hi(10), Hi(t - E)))), 17);
  REQUIRE(mant.substr(mant.size() - 2) == "e0");
  const std::string expected = mant.substr(0, mant.size() - 2) + "e" + exponent;

  const LogReal b = uniform_bound(LogReal::from_value(big("1.5")), LogReal::from_value(big("0.5")), 1000);
  CHECK_FALSE(b.is_zero());
  CHECK(mpfr_number_p(b.log2().backend().data()));
  CHECK_FALSE(b.value().has_value());  // far beyond any floating format
  CHECK(b.to_string() == expected);
  // log10 itself: the integer part has the same leading digits as the exponent
  // (floor of a negative number differs from truncation in the last digit).
  CHECK(b.log10_string(500).substr(0, 470) == exponent.substr(0, 470));
}

TEST_CASE("uniform bound >= layerwise bound when every a_l <= a") {
  Rng rng(7);
  const LogReal a = LogReal::from_value(big("3.5"));
  const LogReal r0 = LogReal::from_value(big("0.2"));
  std::vector<LogReal> al, equal;
  for (int L = 1; L <= 40; ++L) {
    // a_l = a · u with u uniform in (0, 1]
    al.push_back(a * LogReal::from_value(BigReal(1.0 - rng.uniform(), 17)));
    equal.push_back(a);
    const LogReal u = uniform_bound(a, r0, L), lw = layerwise_bound(al, r0);
    CAPTURE(L, u.to_string(), lw.to_string());
    CHECK(lw <= u);
    // With every a_l = a the two forms agree up to rounding.
    const LogReal same = layerwise_bound(equal, r0);
    const Hi diff = abs(Hi(same.log2()) - Hi(u.log2()));
    Hi tol(abs(Hi(u.log2())));
    mpfr_mul_2si(tol.backend().data(), tol.backend().data(), 8 - log_bits, MPFR_RNDN);  // 2^8 epsilons
    CHECK(diff <= tol);
  }
}

// ---------------------------------------------------------------------------
// Weight quantities
// ---------------------------------------------------------------------------

TEST_CASE("beta of hand-built weights equals the hand-computed value") {
  // Layer 1, head 1: W_QK = W_Q W_Kᵀ = [[1,2],[0,1]]·[[1,1],[0,1]] = [[1,3],[0,1]],
  //   ‖W_QK‖_1 = max column abs sum = max(1+0, 3+1) = 4;
  //   W_h = W_V W_O = I·[[1,2],[3,4]]: ‖·‖_1 = max(1+3, 2+4) = 6,
  //   ‖·‖_∞ = max(1+2, 3+4) = 7, ‖·‖_{1,∞} = √42; β_{1,1} = 4√42 ≈ 25.92.
  // Layer 1, head 2: W_QK = I·2I = 2I (‖·‖_1 = 2), W_h = 3I (composite 3): β = 6.
  // Layer 2, head 1: W_QK = [[1,-1],[1,1]] (columns 2, 2: ‖·‖_1 = 2),
  //   W_h = diag(0.5, 0.25) (‖·‖_1 = ‖·‖_∞ = 0.5): β = 1.
  // Layer 2, head 2: W_Q = 0, so W_QK = 0 and β = 0.
  // β_1 = 4√42, β_2 = 1, β = 4√42. H = 2, d_qk = 2, γ = 1 (Theorem 2.3):
  //   a = 4·4√42·2/√2 = 32√21 ≈ 146.6, a_1 = a, a_2 = 4·1·2/√2 = 4√2.
  const MatrixXd I = MatrixXd::Identity(2, 2);
  const Model m = make_model({{head(mat({{1, 2}, {0, 1}}), mat({{1, 0}, {1, 1}}), I, mat({{1, 2}, {3, 4}})),
                               head(I, 2 * I, I, 3 * I)},
                              {head(mat({{1, -1}, {1, 1}}), I, mat({{0.5, 0}, {0, 0.25}}), I),
                               head(MatrixXd::Zero(2, 2), I, I, I)}});
  const WeightQuantities q = weight_quantities(m);
  REQUIRE(q.layers.size() == 2);
  const auto& h11 = q.layers[0].heads[0];
  CHECK(h11.qk_norm_1 == 4);
  CHECK(rel_err_in_eps(h11.vo_composite, BigReal(sqrt(W(42))), w_bits) <= 4);
  CHECK(rel_err_in_eps(h11.beta, BigReal(W(4) * sqrt(W(42))), w_bits) <= 4);
  // The composite is evaluated as sqrt(‖·‖_1)·sqrt(‖·‖_∞): a rounding or two
  // even when the exact value is an integer.
  CHECK(q.layers[0].heads[1].qk_norm_1 == 2);
  CHECK(rel_err_in_eps(q.layers[0].heads[1].vo_composite, big("3"), w_bits) <= 4);
  CHECK(rel_err_in_eps(q.layers[0].heads[1].beta, big("6"), w_bits) <= 4);
  CHECK(q.layers[0].beta == h11.beta);
  CHECK(rel_err_in_eps(q.layers[1].heads[0].beta, big("1"), w_bits) <= 4);
  CHECK(q.layers[1].heads[1].beta == 0);
  CHECK(q.layers[1].beta == q.layers[1].heads[0].beta);
  CHECK(q.beta == h11.beta);
  CHECK_FALSE(q.lambda.has_value());
  CHECK(q.heads == 2);
  CHECK(q.d_qk == 2);
  // Every quantity carries the 1025-bit precision.
  CHECK(mpfr_get_prec(q.beta.backend().data()) == w_bits);

  // The theorem's constants from these quantities.
  BoundInputs in{q, Variant::san(), BigReal(1), Theorem::automatic};
  const std::vector<MeasuredResidual> meas(3, point(big("0.001", 40)));
  const BoundsReport r = compare_bounds(in, meas);
  CHECK(r.theorem.theorem == Theorem::thm_2_3);
  REQUIRE(r.a.has_value());
  CHECK(rel_err_in_eps(*r.a, BigReal(W(32) * sqrt(W(21))), w_bits) <= 16);
  CHECK(rel_err_in_eps(*r.depths[0].a_layer, BigReal(W(32) * sqrt(W(21))), w_bits) <= 16);
  CHECK(rel_err_in_eps(*r.depths[1].a_layer, BigReal(W(4) * sqrt(W(2))), w_bits) <= 16);
  // r* = a^(-1/2) = (32√21)^(-1/2)
  CHECK(rel_err_in_eps(*r.contraction_radius, BigReal(W(1) / sqrt(W(32) * sqrt(W(21)))), w_bits) <= 16);
  CHECK(r.beta.size() == 2);
  // Layerwise form: equal to the uniform one at depth 1 (a_1 = a), strictly
  // below it at depth 2 (a_2 = 4√2 < a).
  CHECK(r.depths[0].layerwise_bound->value == r.depths[0].bound->value);
  CHECK(r.depths[1].layerwise_bound->value < r.depths[1].bound->value);
  CHECK(r.depths[1].layerwise_bound->upper < r.depths[1].bound->lower);
  // γ scales a linearly.
  in.gamma = big("0.25", 40);
  CHECK(rel_err_in_eps(*compare_bounds(in, meas).a, BigReal(W(8) * sqrt(W(21))), w_bits) <= 16);
}

TEST_CASE("lambda of a plain MLP") {
  const MatrixXd I = MatrixXd::Identity(3, 3);
  const std::vector<std::vector<HeadWeights>> heads = {{head(I, I, I, I)}, {head(I, I, I, I)}};
  // ReLU with identity weights: Lip = 1, ‖I‖_{1,∞} = 1, so λ = 1 exactly.
  const WeightQuantities relu = weight_quantities(make_model(heads, I, I, Activation::relu));
  REQUIRE(relu.lambda.has_value());
  CHECK(*relu.lambda == 1);
  CHECK(*relu.layers[1].lambda == 1);
  // GELU, W_1 = 2I (composite 2), W_2 = [[1,1,0],[0,1,0],[0,0,1]] (‖·‖_1 = 2,
  // ‖·‖_∞ = 2, composite 2): λ = 1.1290·2·2 = 4.516, with 1.1290 rounded up.
  const MatrixXd W2 = mat({{1, 1, 0}, {0, 1, 0}, {0, 0, 1}});
  const WeightQuantities g = weight_quantities(make_model(heads, 2 * I, W2, Activation::gelu));
  const BigReal expect = BigReal(W(4) * W(big("1.1290")));
  CHECK(rel_err_in_eps(*g.lambda, expect, w_bits) <= 4);
  CHECK(activation_lipschitz(Activation::relu) == 1);
  CHECK(activation_lipschitz(Activation::gelu) >= big("1.1290"));
  CHECK(activation_lipschitz(Activation::gelu_tanh) >= big("1.1300"));
  CHECK(activation_lipschitz(Activation::gelu_tanh) < big("1.13000000001"));
  // Corollary 3.2 uses H·λ: a = 4·β·H·λ/√d_qk with β = 1 (W_QK = I, W_h = I),
  // H = 1, λ = 1, d_qk = 3: a = 4/√3.
  BoundInputs in{relu, Variant{false, MlpKind::plain, LayerNormKind::none, MaskKind::none}, BigReal(1),
                 Theorem::automatic};
  const BoundsReport r = compare_bounds(in, std::vector<MeasuredResidual>(3, point(big("0.01", 40))));
  CHECK(r.theorem.theorem == Theorem::cor_3_2);
  CHECK(rel_err_in_eps(*r.a, BigReal(W(4) / sqrt(W(3))), w_bits) <= 16);
}

TEST_CASE("the activation Lipschitz constants bound the sampled slopes") {
  // Difference quotients never exceed the largest |derivative| (mean value
  // theorem); the constants should be upper bounds and not loose.
  for (Activation act : {Activation::gelu, Activation::gelu_tanh}) {
    double slope = 0;
    const double h = 1e-4;
    for (double x = -8; x < 8; x += h) {
      const double s = std::fabs(activate<double>(x + h, act) - activate<double>(x, act)) / h;
      slope = std::max(slope, s);
    }
    CAPTURE(to_string(act), slope);
    CHECK(BigReal(slope, 17) <= activation_lipschitz(act));
    CHECK(slope > 1.128);
  }
}

// ---------------------------------------------------------------------------
// Verdicts
// ---------------------------------------------------------------------------

TEST_CASE("verdict logic on constructed enclosures") {
  // Bound enclosure [0.9e-10, 1.1e-10], value 1e-10.
  const BoundEnclosure bound{LogReal::from_value(big("1e-10")), LogReal::from_value(big("0.9e-10")),
                             LogReal::from_value(big("1.1e-10"))};
  const auto m = [](const char* lo, const char* hi, bool below = false) {
    return MeasuredResidual{big(lo, 40), big(hi, 40), below};
  };
  CHECK(decide(m("1e-12", "2e-12"), bound) == Verdict::holds);
  CHECK(decide(m("0.5e-10", "0.89e-10"), bound) == Verdict::holds);
  // An exact tie with the bound's lower end is UNDECIDED: the measured end is
  // widened by its own rounding before the comparison.
  CHECK(decide(MeasuredResidual{big("0.5e-10"), big("0.9e-10"), false}, bound) == Verdict::undecided);
  CHECK(decide(m("3e-10", "4e-10"), bound) == Verdict::violated);
  CHECK(decide(m("5e-11", "2e-10"), bound) == Verdict::undecided);   // straddles
  CHECK(decide(m("1e-10", "1e-10"), bound) == Verdict::undecided);   // inside the bound's own width
  // Below resolution: only an upper end is known (lower 0).
  CHECK(decide(m("0", "1e-20", true), bound) == Verdict::holds);
  CHECK(decide(m("0", "1e-5", true), bound) == Verdict::undecided);  // cannot be VIOLATED
  // Huge magnitudes: a bound of ~1e-48213 against a measured 1e-100.
  const LogReal tiny = LogReal::from_log10(big("-48212.5"));
  const BoundEnclosure tb{tiny, tiny.times_pow2(LogReal::Log(-1)), tiny.times_pow2(LogReal::Log(1))};
  CHECK(decide(m("1e-100", "1e-100"), tb) == Verdict::violated);
  CHECK(decide(m("0", "1e-100", true), tb) == Verdict::undecided);
  CHECK(decide(m("0", "0"), tb) == Verdict::holds);
  CHECK(to_string(Verdict::holds) == "HOLDS");
  CHECK(to_string(Verdict::violated) == "VIOLATED");
  CHECK(to_string(Verdict::undecided) == "UNDECIDED");
  CHECK_THROWS_AS(decide(m("2", "1"), bound), std::invalid_argument);
}

TEST_CASE("compare_bounds on a model with exact constants") {
  // One head, d = 1, v = 1/8 per layer: β_l = 1/8, a = a_l = 4·(1/8) = 1/2
  // (Theorem 2.2). From r0 = 1/2: bound r_1 = a·r0^3 = 2^-4, r_2 = a^4·r0^9 = 2^-13.
  const Model model = scalar_model({0.125, 0.125});
  BoundInputs in{weight_quantities(model), Variant::san(), BigReal(1), Theorem::automatic};
  const BigReal half = big("0.5", 40);
  // r_1 measured exactly at the bound (a tie: UNDECIDED within the rounding),
  // r_2 below resolution with upper end 2^-20.
  std::vector<MeasuredResidual> meas = {point(half), point(big("0.0625", 40)),
                                        MeasuredResidual{BigReal(0), big("9.5367431640625e-7", 40), true}};
  const BoundsReport r = compare_bounds(in, meas);
  CHECK(r.theorem.theorem == Theorem::thm_2_2);
  CHECK(*r.a == half);
  CHECK_FALSE(r.vacuous);  // sqrt(1/2)·1/2 ≈ 0.354 < 1
  CHECK(r.contraction == Contraction::contracting);
  REQUIRE(r.sqrt_a_r0);
  CHECK(*r.sqrt_a_r0 < LogReal::one());
  CHECK(rel_err_in_eps(*r.contraction_radius, BigReal(sqrt(W(2))), w_bits) <= 4);
  REQUIRE(r.depths.size() == 2);
  const DepthComparison& d1 = r.depths[0];
  const DepthComparison& d2 = r.depths[1];
  CHECK(d1.layer == 1);
  CHECK(d1.bound->value.log2() == -4);
  CHECK(d1.bound->lower < d1.bound->value);
  CHECK(d1.bound->value < d1.bound->upper);
  CHECK(d1.layerwise_bound->value == d1.bound->value);
  // For a point r_0 the enclosure is only the rounding: upper/lower < 2^(2^-900).
  Hi width = Hi((d1.bound->upper / d1.bound->lower).log2());
  mpfr_mul_2si(width.backend().data(), width.backend().data(), 900, MPFR_RNDN);
  CHECK(width > 0);
  CHECK(width < 1);
  CHECK(d2.bound->value.log2() == -13);
  CHECK(d2.bound->value.to_string(5) == "1.2207e-4");  // 2^-13 = 1.220703125e-4
  CHECK(d1.verdict == Verdict::undecided);
  CHECK(d2.verdict == Verdict::holds);
  CHECK(d2.layerwise_verdict == Verdict::holds);
  // slack_2 = log10(2^-13 / 2^-20) = 7·log10 2; slack_1 = 0.
  CHECK(rel_err_in_eps(*d2.slack_log10, BigReal(Hi(7 * log10(Hi(2)))), log_bits) <= 8);
  CHECK(*d1.slack_log10 == 0);
  // â_1 = 2^-4 / (2^-1)^3 = 1/2 = a_1; â_2 = 2^-20 / 2^-12 = 2^-8.
  CHECK(d1.cubic_constant->log2() == -1);
  CHECK(*d1.a_layer == half);
  CHECK(d2.cubic_constant->log2() == -8);
  // q_1 = log 2^-4 / log 2^-1 = 4, q_2 = -20 / -4 = 5.
  CHECK(*d1.order == 4);
  CHECK(*d2.order == 5);

  // A measurement above the bound's upper end: VIOLATED, negative slack.
  meas[1] = MeasuredResidual{big("0.07", 40), big("0.08", 40), false};
  const BoundsReport v = compare_bounds(in, meas);
  CHECK(v.depths[0].verdict == Verdict::violated);
  CHECK(*v.depths[0].slack_log10 < 0);

  // γ = 16: a = 8, sqrt(8)·1/2 ≈ 1.41 >= 1: vacuous, said plainly.
  in.gamma = big("16", 40);
  const BoundsReport vac = compare_bounds(in, meas);
  CHECK(vac.vacuous);
  CHECK(vac.contraction == Contraction::vacuous);
  REQUIRE(vac.sqrt_a_r0);
  CHECK(*vac.sqrt_a_r0 >= LogReal::one());
  CHECK(vac.gamma == 16);

  // Bad inputs.
  in.gamma = BigReal(0);
  CHECK_THROWS_AS(compare_bounds(in, meas), std::invalid_argument);
  in.gamma = BigReal(1);
  CHECK_THROWS_AS(compare_bounds(in, {point(half)}), std::invalid_argument);
  meas[1] = MeasuredResidual{big("0.2", 40), big("0.1", 40), false};
  CHECK_THROWS_WITH(compare_bounds(in, meas), Catch::Contains("depth 1"));
}

TEST_CASE("compare_bounds at depth 1000 prints bounds with exponents") {
  // 1000 layers of v = 1/8: a = a_l = 1/2; r0 = 1/2; r_L ≤ 2^-((3^L+1)/2 + 3^L… )
  // log2 r_1000 = -(3^1000-1)/2 - 3^1000 = -(3·3^1000 - 1)/2.
  const Model model = scalar_model(std::vector<double>(1000, 0.125));
  BoundInputs in{weight_quantities(model), Variant::san(), BigReal(1), Theorem::automatic};
  std::vector<MeasuredResidual> meas(1001, MeasuredResidual{BigReal(0), big("1e-1000", 40), true});
  meas[0] = point(big("0.5", 40));
  const BoundsReport r = compare_bounds(in, meas);
  REQUIRE(r.depths.size() == 1000);
  const DepthComparison& last = r.depths.back();
  CHECK(last.layer == 1000);
  const cpp_int n = boost::multiprecision::pow(cpp_int(3), 1000);
  const Hi expected_log2 = -(Hi(3) * Hi(n.str()) - 1) / 2;
  CHECK(Hi(last.bound->value.log2()) == expected_log2);
  const Hi t = expected_log2 * log10(Hi(2));
  boost::multiprecision::mpz_int e;
  const Hi E = floor(t);
  mpfr_get_z(e.backend().data(), E.backend().data(), MPFR_RNDN);
  const std::string s = last.bound->value.to_string(5);
  CAPTURE(s.substr(0, 40));
  CHECK(s.substr(s.find('e') + 1) == e.str());
  // Against a below-resolution measurement < 1e-1000 = 2^-3321.9…: HOLDS while
  // the bound 2^-(3^(l+1)-1)/2 is above it (l ≤ 7: 2^-3280), UNDECIDED after
  // (l = 8: 2^-9841), never VIOLATED (the lower end is 0).
  CHECK(r.depths[0].verdict == Verdict::holds);
  CHECK(r.depths[6].verdict == Verdict::holds);
  CHECK(r.depths[7].verdict == Verdict::undecided);
  CHECK(last.verdict == Verdict::undecided);
  CHECK(last.slack_log10.has_value());
  CHECK(*last.slack_log10 < 0);
}

// ---------------------------------------------------------------------------
// Theorem selection
// ---------------------------------------------------------------------------

TEST_CASE("theorem selection for each variant") {
  const Variant san = Variant::san();
  Variant plain = san;
  plain.mlp = MlpKind::plain;
  Variant residual = san;
  residual.mlp = MlpKind::residual;
  Variant skip = san;
  skip.skip = true;
  Variant post = san;
  post.layernorm = LayerNormKind::post;
  Variant pre = plain;
  pre.layernorm = LayerNormKind::pre;

  CHECK(select_theorem(san, 1).theorem == Theorem::thm_2_2);
  CHECK(select_theorem(Variant::san(MaskKind::causal), 1).theorem == Theorem::thm_2_2);
  CHECK(select_theorem(san, 4).theorem == Theorem::thm_2_3);
  CHECK(select_theorem(plain, 1).theorem == Theorem::cor_3_2);
  CHECK(select_theorem(plain, 4).theorem == Theorem::cor_3_2);
  for (const Variant& v : {skip, post, pre, residual}) {
    const TheoremChoice c = select_theorem(v, 2);
    CHECK_FALSE(c.applicable);
    CHECK(c.theorem == Theorem::none);
    CHECK(c.reason.rfind("not applicable: ", 0) == 0);
  }
  CHECK_THAT(select_theorem(skip, 2).reason, Catch::Contains("Claim 3.1"));
  CHECK_THAT(select_theorem(post, 2).reason, Catch::Contains("LayerNorm"));
  CHECK_THAT(select_theorem(residual, 2).reason, Catch::Contains("plain MLP"));

  // Explicit requests must match.
  CHECK(select_theorem(san, 1, Theorem::thm_2_2).theorem == Theorem::thm_2_2);
  CHECK(select_theorem(san, 1, Theorem::thm_2_3).theorem == Theorem::thm_2_3);
  CHECK_THROWS_WITH(select_theorem(san, 3, Theorem::thm_2_2), Catch::Contains("H = 1"));
  CHECK_THROWS_WITH(select_theorem(plain, 3, Theorem::thm_2_3), Catch::Contains("mlp none"));
  CHECK_THROWS_WITH(select_theorem(san, 3, Theorem::cor_3_2), Catch::Contains("mlp plain"));
  CHECK_THROWS_WITH(select_theorem(skip, 1, Theorem::thm_2_2), Catch::Contains("Claim 3.1"));
  CHECK_THROWS_AS(select_theorem(residual, 1, Theorem::cor_3_2), std::invalid_argument);

  CHECK(parse_theorem("auto") == Theorem::automatic);
  CHECK(parse_theorem("2.2") == Theorem::thm_2_2);
  CHECK(parse_theorem("cor3.2") == Theorem::cor_3_2);
  CHECK(to_string(Theorem::thm_2_3) == "2.3");
  CHECK_THROWS_WITH(parse_theorem("4.1"), Catch::Contains("'4.1'"));
}

TEST_CASE("compare_bounds without an applicable theorem still reports the measurements") {
  const Model model = scalar_model({0.125, 0.125});
  Variant skip = Variant::san();
  skip.skip = true;
  const BoundInputs in{weight_quantities(model), skip, BigReal(1), Theorem::automatic};
  const std::vector<MeasuredResidual> meas = {point(big("0.5", 40)), point(big("0.25", 40)), point(big("0.125", 40))};
  const BoundsReport r = compare_bounds(in, meas);
  CHECK_FALSE(r.theorem.applicable);
  CHECK_FALSE(r.a.has_value());
  CHECK(r.contraction == Contraction::not_applicable);
  CHECK_THAT(r.theorem.reason, Catch::Contains("Claim 3.1"));
  CHECK(r.beta.size() == 2);
  for (const DepthComparison& d : r.depths) {
    CHECK(d.verdict == Verdict::not_applicable);
    CHECK_FALSE(d.bound.has_value());
    CHECK_FALSE(d.slack_log10.has_value());
    CHECK(d.cubic_constant.has_value());
  }
  // â_1 = 0.25 / 0.125 = 2, q_2 = log 2^-3 / log 2^-2 = 1.5
  CHECK(r.depths[0].cubic_constant->log2() == 1);
  CHECK(*r.depths[1].order == big("1.5", 40));
  // An explicit theorem on this variant is an error.
  BoundInputs explicit_in = in;
  explicit_in.theorem = Theorem::thm_2_2;
  CHECK_THROWS_AS(compare_bounds(explicit_in, meas), std::invalid_argument);
}

// ---- the weight products at the lowest exact tier ---------------------------

namespace {

/// A rows×cols matrix of doubles with full 53-bit mantissas, random signs,
/// and exponents drawn in [−span, 0] (plus a few zeros).
MatrixXd spread_matrix(Eigen::Index rows, Eigen::Index cols, int span, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> m(1.0, 2.0);
  std::uniform_int_distribution<int> e(-span, 0);
  MatrixXd out(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i)
      out(i, j) = (g() % 17 == 0) ? 0.0 : std::ldexp(g() % 2 ? m(g) : -m(g), e(g));
  return out;
}

/// The number of entries where exact_weight_product differs from the
/// product computed at 1025 bits (exact, bounds.hpp).
long differences(const MatrixXd& A, const MatrixXd& B, bool transpose_b) {
  const Matrix<W> fast = exact_weight_product(A, B, transpose_b);
  Matrix<W> full;
  if (transpose_b) {
    gemm_nt(convert<W>(A), convert<W>(B), full);
  } else {
    gemm(convert<W>(A), convert<W>(B), full);
  }
  REQUIRE(fast.rows() == full.rows());
  REQUIRE(fast.cols() == full.cols());
  long n = 0;
  for (Eigen::Index j = 0; j < full.cols(); ++j)
    for (Eigen::Index i = 0; i < full.rows(); ++i) n += fast(i, j) != full(i, j);
  return n;
}

}  // namespace

TEST_CASE("exact_weight_product: the 1025-bit product bit for bit, at every tier it picks") {
  // Spans (binades of A and of B) that call for the 128-, 257-, 513- and
  // 1025-bit tiers: 2·span + 106 + ⌈log2 48⌉ + 1 bits.
  for (int span : {4, 40, 150, 300}) {
    CAPTURE(span);
    const MatrixXd A = spread_matrix(24, 48, span, 1 + span), B = spread_matrix(30, 48, span, 2 + span);
    CHECK(differences(A, B, true) == 0);
    CHECK(differences(A, B.transpose(), false) == 0);
  }
  // A product that needs more than 257 bits is not computed at 257: with
  // terms 2^150 apart, rounding at 257 bits would change entries.
  const MatrixXd A = spread_matrix(16, 32, 150, 7), B = spread_matrix(16, 32, 150, 8);
  Matrix<mpfr_real<77>> at257;
  gemm_nt(convert<mpfr_real<77>>(A), convert<mpfr_real<77>>(B), at257);
  Matrix<W> full;
  gemm_nt(convert<W>(A), convert<W>(B), full);
  long rounded = 0;
  for (Eigen::Index j = 0; j < full.cols(); ++j)
    for (Eigen::Index i = 0; i < full.rows(); ++i) rounded += W(at257(i, j)) != full(i, j);
  CHECK(rounded > 0);  // the case is one a too-low tier would get wrong
  CHECK(differences(A, B, true) == 0);
}

TEST_CASE("exact_weight_product and the head norms on trained weights: every head of the shared checkpoints") {
  const std::string dir = test::real_models_dir();
  if (dir.empty()) {
    if (std::getenv("CI")) FAIL("CI: the shared real-models folder is missing");
    WARN("shared real-models folder absent: skipped");
    return;
  }
  for (const std::string name : {"bert-ticket-classifier", "gpt2-capp", "llama-stories260k"}) {
    CAPTURE(name);
    const Model m = load_model(dir + "/" + name);
    const WeightQuantities q = weight_quantities(m);
    for (int l = 0; l < m.arch().layers; ++l)
      for (std::size_t h = 0; h < m.layer(l).heads.size(); ++h) {
        const HeadWeights& w = m.layer(l).heads[h];
        CHECK(differences(w.W_Q, w.W_K, true) == 0);
        CHECK(differences(w.W_V, w.W_O, false) == 0);
        // The norms as norms.hpp computes them on the 1025-bit products.
        Matrix<W> QK, VO;
        gemm_nt(convert<W>(w.W_Q), convert<W>(w.W_K), QK);
        gemm(convert<W>(w.W_V), convert<W>(w.W_O), VO);
        const HeadQuantities& got = q.layers[static_cast<std::size_t>(l)].heads[h];
        CHECK(got.qk_norm_1 == BigReal(norm_1(QK)));
        CHECK(got.vo_composite == BigReal(norm_composite(VO)));
        CHECK(got.beta == BigReal(norm_1(QK) * norm_composite(VO)));
      }
    for (int l = 0; l < m.arch().layers; ++l) {
      const LayerWeights& lw = m.layer(l);
      const std::optional<BigReal>& lambda = q.layers[static_cast<std::size_t>(l)].lambda;
      REQUIRE(lambda.has_value() == (lw.has_mlp() && !lw.gated()));
      if (lambda)
        CHECK(*lambda == BigReal(W(activation_lipschitz(m.arch().activation)) * norm_composite(convert<W>(lw.W_1)) *
                                 norm_composite(convert<W>(lw.W_2))));
    }
  }
}

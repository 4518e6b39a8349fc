// The centred forward pass (math.md §7) against the direct pass of math.md §2
// run at a much higher precision (1025 or 8194 bits), where the direct pass
// resolves the residual: the residual R must keep the working precision's
// relative accuracy, measured in units of the tier's epsilon relative to ‖R‖.
#include "support/helpers.hpp"
#include "support/width8_models.hpp"

#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/forward_centred.hpp"
#include "compute/forward_centred_impl.hpp"  // centred::head_attention
#include "sanpath/compute/norms.hpp"
#include "sanpath/core/errors.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/model/random.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace sanpath;
using Ref = mpfr_real<308>;  // 1025 bits: the reference for inputs of ordinary size

namespace {

Model test_model(int L, Activation act, std::uint64_t seed, double std, int H = 2, bool shared = false) {
  return test::width8_model(L, act, seed, std, H, shared);
}

MatrixXd test_input(std::uint64_t seed, int n = 6) { return test::width8_input(seed, n); }

/// max|a − b| / max|b| in units of S's epsilon (b at a higher precision T).
template <class S, class T> double error_in_eps(const Matrix<S>& a, const Matrix<T>& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  T diff(0), scale(0);
  for (Eigen::Index j = 0; j < b.cols(); ++j)
    for (Eigen::Index i = 0; i < b.rows(); ++i) {
      const T e = abs(T(a(i, j)) - b(i, j));
      if (e > diff) diff = e;
      if (abs(b(i, j)) > scale) scale = abs(b(i, j));
    }
  REQUIRE(scale > 0);
  return static_cast<double>(BigReal(to_big(T(diff / scale)) / test::epsilon_of<S>()));
}

std::string describe(const Variant& v, Activation act) {
  std::ostringstream s;
  s << "skip " << (v.skip ? "on" : "off") << ", mlp " << to_string(v.mlp) << ", layernorm "
    << to_string(v.layernorm) << ", mask " << to_string(v.mask) << ", activation " << to_string(act);
  return s.str();
}

std::vector<std::pair<Variant, Activation>> all_variants() {
  std::vector<std::pair<Variant, Activation>> out;
  for (bool skip : {false, true})
    for (MlpKind mlp : {MlpKind::none, MlpKind::plain, MlpKind::residual})
      for (LayerNormKind ln : {LayerNormKind::none, LayerNormKind::pre, LayerNormKind::post})
        for (MaskKind mask : {MaskKind::none, MaskKind::causal})
          for (Activation act : {Activation::relu, Activation::gelu, Activation::gelu_tanh}) {
            if (mlp == MlpKind::none && act != Activation::gelu) continue;  // the activation is unused
            out.push_back({Variant{skip, mlp, ln, mask}, act});
          }
  return out;
}

/// Centred at S against direct at T: X^l and R^l = X^l − 1 mean(X^l)ᵀ of the
/// direct pass, every layer, within `tol` epsilons of S. Returns the largest error.
template <class S, class T>
double compare(const CentredTrace<S>& c, const ForwardTrace<T>& ref, double tol) {
  REQUIRE(c.layers() == ref.layers());
  double worst = 0;
  for (int l = 0; l <= ref.layers(); ++l) {
    const Matrix<T>& X = ref.X[static_cast<std::size_t>(l)];
    const Matrix<T> R = residual(X, column_means(X));
    // The reference resolves R: its own error is far below S's epsilon.
    REQUIRE(BigReal(to_big(norm_frobenius(R)) / to_big(norm_frobenius(X))) >
            BigReal(to_big(std::numeric_limits<T>::epsilon())) * 1e30 / test::epsilon_of<S>());
    const double eR = error_in_eps(c.R[static_cast<std::size_t>(l)], R);
    const double eX = error_in_eps(c.X(l), X);
    CAPTURE(l, eR, eX, tol);
    CHECK(eR <= tol);
    CHECK(eX <= tol);
    worst = std::max({worst, eR, eX});
  }
  return worst;
}

}  // namespace

TEST_CASE("centred and direct passes agree for every variant (double, 128 and 257 bits)") {
  int k = 0;
  double worst[3] = {0, 0, 0};
  for (const auto& [v, act] : all_variants()) {
    ++k;
    INFO(describe(v, act));
    const Model m = test_model(3, act, 100 + static_cast<std::uint64_t>(k), 0.5);
    const MatrixXd X0 = test_input(200 + static_cast<std::uint64_t>(k));
    ForwardOptions opt;
    opt.record_attention = false;
    const ForwardTrace<Ref> ref = forward<Ref>(m, v, convert<Ref>(X0), opt);
    worst[0] = std::max(worst[0], compare(forward_centred<double>(m, v, X0, opt), ref, 2048));
    worst[1] = std::max(worst[1], compare(forward_centred<mpfr_real<38>>(m, v, convert<mpfr_real<38>>(X0), opt), ref, 2048));
    worst[2] = std::max(worst[2], compare(forward_centred<mpfr_real<77>>(m, v, convert<mpfr_real<77>>(X0), opt), ref, 2048));
  }
  WARN("largest errors in epsilons: double " << worst[0] << ", 128 bits " << worst[1] << ", 257 bits " << worst[2]);
}

TEST_CASE("shared layers (ALBERT-style) run like the direct pass") {
  const Variant v{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  const Model m = test_model(4, Activation::gelu, 7, 0.5, 2, true);
  const MatrixXd X0 = test_input(8);
  const ForwardTrace<Ref> ref = forward<Ref>(m, v, convert<Ref>(X0));
  compare(forward_centred<mpfr_real<77>>(m, v, convert<mpfr_real<77>>(X0)), ref, 64);
}

TEMPLATE_TEST_CASE("recorded attention: rows sum to 1, Π and P match the direct softmax; causal ones are lower-triangular",
                   "", double, mpfr_real<77>) {
  using S = TestType;
  for (MaskKind mask : {MaskKind::none, MaskKind::causal})
    for (double std : {0.3, 2.0}) {  // |S_ij| ≤ ½ (expm1 rows) and large logits (softmax rows)
      INFO("mask " << to_string(mask) << ", weight std " << std);
      const Model m = test_model(2, Activation::gelu, 31, std);
      const Variant v = Variant::san(mask);
      const MatrixXd X0 = test_input(32);
      const CentredTrace<S> c = forward_centred<S>(m, v, convert<S>(X0));
      const ForwardTrace<Ref> ref = forward<Ref>(m, v, convert<Ref>(X0));
      REQUIRE(c.Pi.size() == 2);
      REQUIRE(c.P.size() == 2);
      for (std::size_t l = 0; l < 2; ++l) {
        REQUIRE(c.Pi[l].size() == 2);
        for (std::size_t h = 0; h < 2; ++h) {
          const Matrix<S>& Pi = c.Pi[l][h];
          const Matrix<S>& P = c.P[l][h];
          for (Eigen::Index i = 0; i < P.rows(); ++i) {
            S sp(0), sa(0);
            for (Eigen::Index j = 0; j < P.cols(); ++j) {
              sp += Pi(i, j);
              sa += P(i, j);
              if (mask == MaskKind::causal && j > i) {
                REQUIRE(Pi(i, j) == 0);
                REQUIRE(P(i, j) == 0);
              }
              if (mask == MaskKind::none) REQUIRE(Pi(i, j) == Pi(0, j));  // one π for every row
            }
            CAPTURE(i);
            REQUIRE(test::error_in_eps(sp, S(1)) <= 8);
            REQUIRE(test::error_in_eps(sa, S(1)) <= 8);
          }
          // The direct pass's P (1025 bits) to working precision. With weight std 2 the
          // logits reach ~10³: any evaluation at working precision then has errors
          // ε·|logit| in P (the condition number of the softmax), hence the looser bound.
          CHECK(error_in_eps(P, ref.P[l][h]) <= (std < 1 ? 16 : 16384));
        }
      }
    }
}

TEMPLATE_TEST_CASE("saturated attention: E from expm1(S) keeps the weight off the dominant key (math.md 7.1)", "",
                   mpfr_real<38>, mpfr_real<77>) {
  // π = softmax(v) puts 1 − ~1e-189 on key 2: π_2 rounds to 1 at 128 and 257 bits.
  // E_ij = π_j (e_ij − Σ_k π_k e_ik)/(1 + Σ_k π_k e_ik) is checked entry by entry
  // against the same formula at 4,098 bits (where nothing rounds away), and every
  // row of E must sum to 0 relative to its entries. Written as e_ij − s_i, row
  // i's E_i2 came out 0 and the rows summed to −E_i2's true value instead.
  using S = TestType;
  using Big = mpfr_real<1233>;
  const Eigen::Index n = 5;
  Matrix<Big> v(n, 1), Sm(n, n);
  for (Eigen::Index j = 0; j < n; ++j) v(j, 0) = Big(-435) - Big(static_cast<double>(j)) / Big(7);
  v(2, 0) = Big(0);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) Sm(i, j) = Big(static_cast<double>((3 * i + 5 * j) % 11) - 5.0) / Big(1e4);
  // The reference takes the very inputs the working precision holds.
  const Matrix<S> vs = convert<S>(v), Ss = convert<S>(Sm);
  // Π = 1 softmax(v)ᵀ, as the centred pass forms it for §1's attention without a mask.
  const auto attend = [n](const auto& v1, const auto& S1) {
    using T = typename std::decay_t<decltype(v1)>::Scalar;
    Matrix<T> Pi = row_softmax(Matrix<T>(v1.transpose()), MaskKind::none).replicate(n, 1);
    return centred::head_attention(std::move(Pi), [&](Eigen::Index, Eigen::Index j) -> const T& { return v1(j, 0); },
                                   S1, MaskKind::none, 0, false, false);
  };
  const auto att = attend(vs, Ss);
  const Matrix<Big> vb = convert<Big>(vs), Sb = convert<Big>(Ss);
  const auto ref = attend(vb, Sb);
  REQUIRE(att.all_small);
  REQUIRE(att.Pi(0, 2) == S(1));  // the premise: π_2 is 1 at the working precision
  for (Eigen::Index i = 0; i < n; ++i) {
    S sum(0), size(0);
    for (Eigen::Index j = 0; j < n; ++j) {
      CAPTURE(i, j);
      REQUIRE(ref.E(i, j) != 0);
      CHECK(test::error_in_eps(att.E(i, j), S(ref.E(i, j))) <= 64);
      sum += att.E(i, j);
      size += abs(att.E(i, j));
    }
    CHECK(to_big(S(abs(sum))) <= to_big(size) * test::epsilon_of<S>() * 16);
  }
}

TEST_CASE("a residual far below the working epsilon keeps its relative accuracy in every variant (257 bits)") {
  // X0 = 1 c0ᵀ + R0 with ‖R0‖ ≈ 1e-40‖c0‖: beyond 257 bits (77 digits), resolved
  // by the direct pass at 2051 bits (617 digits) through two layers. Exercises the
  // small-residual forms: expm1 attention rows, the LayerNorm identity, the
  // activation differences (gelu's series, gelu_tanh's sinh form, relu's pattern).
  using Big = mpfr_real<617>;
  using S = mpfr_real<77>;
  int k = 0;
  double worst = 0;
  for (const auto& [v, act] : all_variants()) {
    ++k;
    INFO(describe(v, act));
    const Model m = test_model(2, act, 300 + static_cast<std::uint64_t>(k), 0.5);
    const MatrixXd X = test_input(400 + static_cast<std::uint64_t>(k));
    RowVector<S> c0(8);
    Matrix<S> R0(6, 8);
    Matrix<Big> X0(6, 8);
    for (Eigen::Index j = 0; j < 8; ++j) {
      c0(j) = S(X(0, j));
      for (Eigen::Index i = 0; i < 6; ++i) {
        R0(i, j) = S(X(i, j) - X(0, j)) * S("1e-40");  // exact in neither: X0 below is formed from these values
        X0(i, j) = Big(c0(j)) + Big(R0(i, j));
      }
    }
    ForwardOptions opt;
    opt.record_attention = false;
    const ForwardTrace<Big> ref = forward<Big>(m, v, X0, opt);
    worst = std::max(worst, compare(forward_centred<S>(m, v, c0, R0, opt), ref, 64));
  }
  WARN("largest error in epsilons at 257 bits: " << worst);
}

TEST_CASE("relu pre-activations that change sign between c and c + r_i stay exact") {
  // Attention output 0 (W_O = 0, b_O = 0) and skip on: the MLP sees X0 itself,
  // and b_1 = −c0ᵀW_1 puts every centre pre-activation at ~0, so the rows'
  // pre-activations fall on both sides.
  using S = mpfr_real<77>;
  const Model base = test_model(2, Activation::relu, 77, 0.5);
  std::vector<LayerWeights> layers = base.layers();
  const MatrixXd X0 = test_input(78);
  const Eigen::RowVectorXd c0 = X0.colwise().mean();
  for (LayerWeights& lw : layers) {
    for (HeadWeights& hw : lw.heads) hw.W_O.setZero();
    lw.b_O.setZero();
    lw.b_1 = -(c0 * lw.W_1).transpose();
  }
  const Model m(base.arch(), layers, std::nullopt, "relu-model");
  // The sign changes really happen (counted at 1025 bits on layer 1's input).
  const Matrix<Ref> H = product(convert<Ref>(X0), convert<Ref>(layers[0].W_1));
  const Matrix<Ref> hc = product(Matrix<Ref>(convert<Ref>(MatrixXd(c0))), convert<Ref>(layers[0].W_1));
  int changes = 0;
  for (Eigen::Index j = 0; j < H.cols(); ++j)
    for (Eigen::Index i = 0; i < H.rows(); ++i) {
      const Ref hcj = hc(0, j) + Ref(layers[0].b_1(j)), hij = H(i, j) + Ref(layers[0].b_1(j));
      if ((hcj > 0) != (hij > 0)) ++changes;
    }
  REQUIRE(changes >= 10);
  for (MlpKind mlp : {MlpKind::plain, MlpKind::residual}) {
    const Variant v{true, mlp, LayerNormKind::none, MaskKind::none};
    INFO("mlp " << to_string(mlp));
    const ForwardTrace<Ref> ref = forward<Ref>(m, v, convert<Ref>(X0));
    compare(forward_centred<S>(m, v, convert<S>(X0)), ref, 64);
    compare(forward_centred<double>(m, v, X0), ref, 64);
  }
}

TEST_CASE("double: a residual that underflows is an error naming the layer, never silent zeros or NaN") {
  RandomModelSpec s;
  s.arch = {8, 1, 8, 4, 4, 0, Variant::san(), Activation::gelu, 1e-5, false};
  s.std = 1.5;
  s.seed = 5;
  const Model m = random_model(s);
  const MatrixXd X0 = test_input(6);
  ForwardOptions opt;
  opt.record_attention = false;
  REQUIRE_THROWS_AS(forward_centred<double>(m, Variant::san(), X0, opt), NumericalError);
  try {
    forward_centred<double>(m, Variant::san(), X0, opt);
  } catch (const NumericalError& e) {
    REQUIRE_THAT(e.what(), Catch::Matchers::Contains("layer ") && Catch::Matchers::Contains("underflow"));
  }
  // The same pass at 257 bits keeps a nonzero residual at every layer.
  const CentredTrace<mpfr_real<77>> t = forward_centred<mpfr_real<77>>(m, Variant::san(), convert<mpfr_real<77>>(X0), opt);
  for (const auto& R : t.R) REQUIRE(norm_frobenius(R) > 0);
}

TEST_CASE("deep pure SAN: residual norms at 257 bits match a 100,000-bit mpmath evaluation to 60+ digits") {
  // n = 6, d = 8, L = 9, one head, large weights: the residual collapses like
  // 3^l to far below 1e-5000. The reference is tests/reference/sanpath_ref.py
  // (mpmath, written from math.md, not from this code): the direct pass at
  // 100,000 bits, which still resolves the residual at every depth.
  using S = mpfr_real<77>;
  RandomModelSpec s;
  s.arch = {9, 1, 8, 4, 4, 0, Variant::san(), Activation::gelu, 1e-5, false};
  s.std = 1.0;
  s.bias_std = 0.1;
  s.seed = 91;
  const Model m = random_model(s);
  const MatrixXd X0 = test_input(92);
  const nlohmann::json ref = test::reference_residual_norms(m, X0, "centred_deep", "--bits 100000 --digits 80");
  REQUIRE(ref["layers"].size() == 10);

  ForwardOptions opt;
  opt.record_attention = false;
  const CentredTrace<S> t = forward_centred<S>(m, Variant::san(), convert<S>(X0), opt);
  REQUIRE(t.layers() == 9);
  double deepest = 0;
  for (int l = 0; l <= 9; ++l) {
    const auto& rec = ref["layers"][static_cast<std::size_t>(l)];
    CAPTURE(l, rec.dump());
    REQUIRE(rec["resolved_digits"].get<int>() >= 100);  // the reference's own digits
    BigReal r(0, 100);  // 100 digits
    REQUIRE(mpfr_set_str(r.backend().data(), rec["residual_frobenius"].get<std::string>().c_str(), 10, MPFR_RNDN) == 0);
    const BigReal mine = to_big(norm_frobenius(t.R[static_cast<std::size_t>(l)]));
    const int digits = agreeing_digits(mine, r, 80);
    CAPTURE(to_sci(mine, 30), digits);
    CHECK(digits >= 60);
    deepest = log10_abs(r);
  }
  REQUIRE(deepest < -5000);  // the case is as deep as it claims
}

namespace {

/// The features of one family (math.md §7.1: every family in the centred
/// pass) on a width-8 architecture, and the variants to run.
struct FeatureCase {
  const char* name;
  Architecture arch;
  std::vector<Variant> variants;
};

std::vector<FeatureCase> feature_cases() {
  const Variant full{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  const Variant san_causal{false, MlpKind::none, LayerNormKind::none, MaskKind::causal};
  const Variant san{false, MlpKind::none, LayerNormKind::none, MaskKind::none};
  const Variant mlp_pre{false, MlpKind::plain, LayerNormKind::pre, MaskKind::none};
  Architecture base{3, 2, 8, 4, 4, 16, Variant{}, Activation::gelu, 1e-5};
  std::vector<FeatureCase> out;
  {  // Llama / Mistral / Qwen2: RMSNorm, rotary, gated silu MLP, grouped keys and values.
    Architecture a = base;
    a.norm = NormKind::rms;
    a.rope_theta = 10000.0;
    a.gated_mlp = true;
    a.activation = Activation::silu;
    a.kv_heads = 1;
    a.variant = full;
    out.push_back({"llama", a, {full, san_causal, san, mlp_pre}});
  }
  {  // Gemma: gain 1 + w, gelu_tanh gate, its own score scale.
    Architecture a = out.back().arch;
    a.norm_unit_offset = true;
    a.activation = Activation::gelu_tanh;
    a.score_scale_base = 3.0;
    out.push_back({"gemma", a, {full, san_causal}});
  }
  {  // Gemma 2: soft cap (small, so it bends the logits), sandwich norms, a window on alternate layers.
    Architecture a = out.back().arch;
    a.softcap = 1.5;
    a.sandwich_norms = true;
    a.attention_window = 3;
    a.window_layers = {true, false, true};
    out.push_back({"gemma2", a, {full, san_causal, san}});
  }
  {  // GPT-NeoX / Phi: LayerNorm, partial rotary, parallel block.
    Architecture a = base;
    a.rope_theta = 10000.0;
    a.rotary_dims = 2;
    a.parallel_residual = true;
    a.activation = Activation::gelu_tanh;
    a.own_norm_placement_only = true;
    a.variant = full;
    out.push_back({"gpt_neox", a, {full, san_causal, Variant{false, MlpKind::residual, LayerNormKind::pre, MaskKind::causal}}});
  }
  {  // T5 encoder: RMSNorm, bucket bias, no score scale, relu.
    Architecture a = base;
    a.norm = NormKind::rms;
    a.rel_buckets = 8;
    a.rel_max_distance = 16;
    a.score_scale_base = 1.0;
    a.activation = Activation::relu;
    a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none};
    out.push_back({"t5", a, {a.variant, san}});
  }
  {  // XLNet: relative position and content terms, post-norm.
    Architecture a = base;
    a.xlnet_relative = true;
    a.variant = Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
    out.push_back({"xlnet", a, {a.variant, san}});
  }
  return out;
}

}  // namespace

TEST_CASE("every family's features: centred and direct passes agree (128 and 257 bits, math.md 7.1)") {
  std::uint64_t seed = 500;
  for (const FeatureCase& f : feature_cases())
    for (const Variant& v : f.variants) {
      INFO(f.name << ": " << describe(v, f.arch.activation));
      const Model m = test::width8_model_of(f.arch, ++seed, 0.5);
      const MatrixXd X0 = test_input(++seed);
      const ForwardTrace<Ref> ref = forward<Ref>(m, v, convert<Ref>(X0));
      compare(forward_centred<double>(m, v, X0), ref, 2048);
      compare(forward_centred<mpfr_real<38>>(m, v, convert<mpfr_real<38>>(X0)), ref, 2048);
      compare(forward_centred<mpfr_real<77>>(m, v, convert<mpfr_real<77>>(X0)), ref, 2048);
    }
}

TEST_CASE("soft cap pieces: tanh(u) - u keeps its relative accuracy where u is tiny (math.md 7.1)") {
  using T = mpfr_real<77>;
  using S308 = mpfr_real<308>;
  for (const char* text : {"1e-30", "-3e-5", "0.25", "-0.99", "1.5"}) {
    const T u(text);
    const mpfr_real<308> ref = tanh(mpfr_real<308>(text)) - mpfr_real<308>(text);
    const T got = centred::tanh_minus_identity(u);
    CAPTURE(text);
    const double rel = static_cast<double>(mpfr_real<308>(abs(S308(got) - ref) / abs(ref)));
    CHECK(rel < 8 * static_cast<double>(std::numeric_limits<T>::epsilon()));
  }
}

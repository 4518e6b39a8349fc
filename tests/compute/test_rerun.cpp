// Re-run sub-networks (compute/rerun.hpp): a 1-layer sub-network through
// head h against that head's output written out in the test with Eigen, for
// variants with and without LayerNorm and MLP; every path of an attention-only
// model whose attention does not depend on its input (or of depth 1)
// reproduces the exact frozen-attention sense; the count_k/N scaling on a
// model whose paths of one length are all equal; determinism across threads.
#include "support/attention_models.hpp"
#include "support/helpers.hpp"

#include "sanpath/compute/effectiveness.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/rerun.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/model/random.hpp"

#include <cmath>

using namespace sanpath;
using sanpath::test::attention_model;
using sanpath::test::gaussian_input;

namespace {

MatrixXd softmax_rows(const MatrixXd& A, bool causal) {
  MatrixXd P = MatrixXd::Zero(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    const Eigen::Index last = causal ? i + 1 : A.cols();
    const double m = A.row(i).head(last).maxCoeff();
    double sum = 0;
    for (Eigen::Index j = 0; j < last; ++j) sum += P(i, j) = std::exp(A(i, j) - m);
    P.row(i).head(last) /= sum;
  }
  return P;
}

MatrixXd layer_norm_rows(const MatrixXd& X, const VectorXd& g, const VectorXd& b, double eps) {
  MatrixXd Y(X.rows(), X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const double mean = X.row(i).mean();
    const double var = (X.row(i).array() - mean).square().mean();
    Y.row(i) = ((X.row(i).array() - mean) / std::sqrt(var + eps)).matrix().cwiseProduct(g.transpose()) + b.transpose();
  }
  return Y;
}

/// Head h of layer 0 alone, from the weights: softmax(Q Kᵀ/√d_qk)(X W_V + β b_V) W_O + β b_O.
MatrixXd head_output(const Model& m, int h, const MatrixXd& X, bool biases, bool causal) {
  const HeadWeights& w = m.layer(0).heads[static_cast<std::size_t>(h)];
  const MatrixXd Q = (X * w.W_Q).rowwise() + w.b_Q.transpose();
  const MatrixXd K = (X * w.W_K).rowwise() + w.b_K.transpose();
  MatrixXd V = X * w.W_V;
  if (biases) V.rowwise() += w.b_V.transpose();
  MatrixXd out = softmax_rows(Q * K.transpose() / std::sqrt(double(m.arch().d_qk)), causal) * V * w.W_O;
  if (biases) out.rowwise() += m.layer(0).b_O.transpose();
  return out;
}

/// A random 1-layer model with an MLP (gelu) and LayerNorm weights that are not the identity.
Model mlp_model(std::uint64_t seed) {
  RandomModelSpec s;
  s.arch.layers = 1;
  s.arch.heads = 3;
  s.arch.d_model = 8;
  s.arch.d_qk = 4;
  s.arch.d_v = 4;
  s.arch.d_ff = 12;
  s.arch.activation = Activation::gelu;
  s.arch.variant = Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  s.std = 0.4;
  s.bias_std = 0.2;
  s.seed = seed;
  const Model base = random_model(s);
  std::vector<LayerWeights> layers = base.layers();
  Rng rng(seed + 1);
  for (VectorXd* v : {&layers[0].ln1_g, &layers[0].ln1_b, &layers[0].ln2_g, &layers[0].ln2_b})
    for (Eigen::Index i = 0; i < v->size(); ++i) (*v)(i) = (v == &layers[0].ln1_g || v == &layers[0].ln2_g ? 1.0 : 0.0) + 0.3 * rng.gaussian();
  return Model(base.arch(), layers);
}

/// `m` with W_Q = W_K = 0 and b_Q = b_K = 0 (uniform attention, whatever the
/// input); `same` also makes every layer layer 0 and every head head 0.
Model uniform_attention(const Model& m, bool same) {
  std::vector<LayerWeights> layers = m.layers();
  for (LayerWeights& lw : layers) {
    if (same) lw = layers[0];
    for (HeadWeights& hw : lw.heads) {
      if (same) hw = lw.heads[0];
      hw.W_Q.setZero();
      hw.W_K.setZero();
      hw.b_Q.setZero();
      hw.b_K.setZero();
    }
  }
  return Model(m.arch(), layers);
}

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

}  // namespace

TEST_CASE("a 1-layer sub-network through head h is that head's own output", "[rerun]") {
  SECTION("attention only, skip on and off, with and without a causal mask") {
    for (const bool skip : {true, false})
      for (const MaskKind mask : {MaskKind::none, MaskKind::causal}) {
        const Model m = attention_model(1, 3, 6, 3, skip, 0.7, 11, mask);
        const Variant v{skip, MlpKind::none, LayerNormKind::none, mask};
        const MatrixXd X = gaussian_input(5, 6, 12);
        for (int h = 0; h < 3; ++h) {
          CAPTURE(skip, h, mask == MaskKind::causal);
          // Attention-only: the path term P_h X W_V W_O, biases apart (the bias term).
          test::require_matrix_near<double>(rerun_path<double>(m, v, X, {h}),
                                            head_output(m, h, X, false, mask == MaskKind::causal), 64);
        }
        if (skip) test::require_matrix_near<double>(rerun_path<double>(m, v, X, {-1}), X, 0);
      }
  }
  SECTION("post-LayerNorm, with and without the MLP") {
    const Model m = mlp_model(21);
    const MatrixXd X = gaussian_input(5, 8, 22);
    const LayerWeights& lw = m.layer(0);
    for (int h = 0; h < 3; ++h) {
      CAPTURE(h);
      const MatrixXd Z = layer_norm_rows(head_output(m, h, X, true, false), lw.ln1_g, lw.ln1_b, m.arch().ln_eps);
      test::require_matrix_near<double>(
          rerun_path<double>(m, Variant{true, MlpKind::none, LayerNormKind::post, MaskKind::none}, X, {h}), Z, 256);
      MatrixXd hid = (Z * lw.W_1).rowwise() + lw.b_1.transpose();
      hid = hid.unaryExpr(&gelu);
      const MatrixXd f = (hid * lw.W_2).rowwise() + lw.b_2.transpose();
      const MatrixXd expected = layer_norm_rows(Z + f, lw.ln2_g, lw.ln2_b, m.arch().ln_eps);
      test::require_matrix_near<double>(
          rerun_path<double>(m, Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none}, X, {h}),
          expected, 512);
    }
  }
  SECTION("pre-LayerNorm: attention of LN_1(X)") {
    const Model m = mlp_model(31);
    const MatrixXd X = gaussian_input(4, 8, 32);
    const LayerWeights& lw = m.layer(0);
    const MatrixXd expected = head_output(m, 1, layer_norm_rows(X, lw.ln1_g, lw.ln1_b, m.arch().ln_eps), true, false);
    test::require_matrix_near<double>(
        rerun_path<double>(m, Variant{true, MlpKind::none, LayerNormKind::pre, MaskKind::none}, X, {1}), expected, 256);
  }
  SECTION("bad paths are refused") {
    const Model m = attention_model(2, 2, 4, 2, false, 0.5, 3);
    const Variant v{false, MlpKind::none, LayerNormKind::none, MaskKind::none};
    const MatrixXd X = gaussian_input(3, 4, 4);
    CHECK_THROWS_AS(rerun_path<double>(m, v, X, {0}), std::invalid_argument);
    CHECK_THROWS_AS(rerun_path<double>(m, v, X, {0, 2}), std::invalid_argument);
    CHECK_THROWS_AS(rerun_path<double>(m, v, X, {-1, 0}), std::invalid_argument);  // skip is off
  }
}

TEMPLATE_TEST_CASE("every path re-run gives the exact sense when the attention does not depend on the states",
                   "[rerun]", double, mpfr_real<38>) {
  using S = TestType;
  struct Case {
    Model model;
    Variant variant;
  };
  const Case cases[] = {
      // Depth 1: the sub-network's attention input is X^0, as in the forward pass.
      {attention_model(1, 3, 6, 3, true, 0.8, 41), Variant{true, MlpKind::none, LayerNormKind::none, MaskKind::none}},
      // Uniform attention at any depth, skip on and off, causal.
      {uniform_attention(attention_model(3, 2, 6, 3, true, 0.6, 42), false),
       Variant{true, MlpKind::none, LayerNormKind::none, MaskKind::none}},
      {uniform_attention(attention_model(3, 2, 6, 3, true, 0.6, 43, MaskKind::causal), false),
       Variant{true, MlpKind::none, LayerNormKind::none, MaskKind::causal}},
      {uniform_attention(attention_model(2, 3, 6, 3, false, 0.6, 44), false),
       Variant{false, MlpKind::none, LayerNormKind::none, MaskKind::none}},
  };
  for (const Case& c : cases) {
    const int L = c.model.arch().layers;
    CAPTURE(L, c.variant.skip);
    const Matrix<S> X0 = convert<S>(gaussian_input(5, 6, 45, 0.5));
    const ForwardTrace<S> t = forward<S>(c.model, c.variant, X0);
    std::vector<Matrix<S>> truncations;
    const Effectiveness<S> exact = exact_effectiveness<S>(c.model, t, nullptr, 1, &truncations);
    RerunOptions o;
    o.samples = 1000;  // above every count_k: every path once
    o.repeats = 2;
    const RerunEffectiveness<S> r = rerun_effectiveness<S>(c.model, c.variant, X0, t.X.back(), nullptr, o, &truncations);
    REQUIRE(r.points.size() == static_cast<std::size_t>(L) + 1);
    for (std::size_t k = 0; k < r.points.size(); ++k) {
      CAPTURE(k);
      const RerunPoint<S>& p = r.points[k];
      REQUIRE(p.all_paths);
      REQUIRE(p.evaluated == p.count);
      REQUIRE(p.distance.size() == 2);
      CHECK(p.distance[0] == p.distance[1]);
      // The two truncations differ by rounding only (relative to ‖X^L‖_F).
      CHECK(to_big(p.gap[0]) / test::epsilon_of<S>() < 512);
      CHECK(test::error_in_eps<S>(p.distance[0], exact.points[k].distance, S(1)) < 512);
    }
  }
}

TEST_CASE("a sample of N < count_k paths is scaled by count_k / N", "[rerun]") {
  // Shared layers, identical heads, uniform attention: all paths of one length
  // have the same term, so count_k/N · Σ of any N of them is S_k exactly.
  const Model m = uniform_attention(attention_model(4, 3, 6, 3, true, 0.5, 51), true);
  const Variant v{true, MlpKind::none, LayerNormKind::none, MaskKind::none};
  const MatrixXd X0 = gaussian_input(4, 6, 52);
  const ForwardTrace<double> t = forward<double>(m, v, X0);
  std::vector<MatrixXd> truncations;
  const Effectiveness<double> exact = exact_effectiveness<double>(m, t, nullptr, 1, &truncations);
  RerunOptions o;
  o.samples = 3;
  o.repeats = 3;
  o.seed = 7;
  const RerunEffectiveness<double> r = rerun_effectiveness<double>(m, v, X0, t.X.back(), nullptr, o, &truncations);
  for (std::size_t k = 0; k < r.points.size(); ++k) {
    CAPTURE(k);
    CHECK(r.points[k].all_paths == (k == 0));  // counts 1, 12, 54, 108, 81
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(r.points[k].gap[i] / std::numeric_limits<double>::epsilon() < 512);
      CHECK(test::error_in_eps<double>(r.points[k].distance[i], exact.points[k].distance, 1.0) < 512);
    }
  }
}

TEST_CASE("re-runs are deterministic for a seed at any thread count and every variant", "[rerun]") {
  const Model m = mlp_model(61);
  const MatrixXd X0 = gaussian_input(5, 8, 62);
  for (const Variant& v : {Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none},
                           Variant{true, MlpKind::none, LayerNormKind::none, MaskKind::none},
                           Variant{false, MlpKind::plain, LayerNormKind::pre, MaskKind::causal}}) {
    const MatrixXd XL = forward<double>(m, v, X0).X.back();
    RerunOptions o;
    o.samples = 2;
    o.repeats = 4;
    o.seed = 5;
    o.threads = 1;
    const RerunEffectiveness<double> a = rerun_effectiveness<double>(m, v, X0, XL, nullptr, o);
    o.threads = 3;
    const RerunEffectiveness<double> b = rerun_effectiveness<double>(m, v, X0, XL, nullptr, o);
    o.seed = 6;
    const RerunEffectiveness<double> c = rerun_effectiveness<double>(m, v, X0, XL, nullptr, o);
    bool differs = false;
    for (std::size_t k = 0; k < a.points.size(); ++k) {
      CHECK(a.points[k].distance == b.points[k].distance);  // bit for bit
      differs = differs || a.points[k].distance != c.points[k].distance;
    }
    // One layer of 3 heads with skip: length 1 has 3 paths > N = 2, so the seed matters.
    if (v.skip) CHECK(differs);
  }
}

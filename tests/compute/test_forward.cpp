// The forward pass against math.md §1–2, checked with an independent naive
// implementation written here with plain loops at 257 bits (no library
// products, packing or softmax), and with closed-form special cases.
#include "support/helpers.hpp"

#include "sanpath/compute/forward.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/model/random.hpp"

#include <boost/math/constants/constants.hpp>
#include <algorithm>
#include <cmath>
#include <limits>

using namespace sanpath;
using R = mpfr_real<77>;  // the reference precision (257 bits)

namespace {

Model small_model(const Variant& own, int L, int H, int d, int dqk, int dff, std::uint64_t seed, double std = 0.3,
                  Activation act = Activation::gelu) {
  RandomModelSpec s;
  s.arch = {L, H, d, dqk, dqk, dff, own, act, 1e-5, false};
  s.std = std;
  s.bias_std = 0.1;
  s.seed = seed;
  return random_model(s);
}

// --- the naive reference, straight from math.md, entry by entry ---
Matrix<R> ref_matmul(const Matrix<R>& A, const Matrix<R>& B) {
  Matrix<R> C(A.rows(), B.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < B.cols(); ++j) {
      R s(0);
      for (Eigen::Index k = 0; k < A.cols(); ++k) s += A(i, k) * B(k, j);
      C(i, j) = s;
    }
  return C;
}
Matrix<R> ref_affine(const Matrix<R>& X, const MatrixXd& W, const VectorXd& b) {
  Matrix<R> Y = ref_matmul(X, convert<R>(W));
  for (Eigen::Index i = 0; i < Y.rows(); ++i)
    for (Eigen::Index j = 0; j < Y.cols(); ++j) Y(i, j) += R(b(j));
  return Y;
}
Matrix<R> ref_ln(const Matrix<R>& X, const VectorXd& g, const VectorXd& b, const std::string& eps) {
  Matrix<R> Y(X.rows(), X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    R m(0), v(0);
    for (Eigen::Index j = 0; j < X.cols(); ++j) m += X(i, j);
    m /= X.cols();
    for (Eigen::Index j = 0; j < X.cols(); ++j) v += (X(i, j) - m) * (X(i, j) - m);
    v /= X.cols();
    for (Eigen::Index j = 0; j < X.cols(); ++j) Y(i, j) = (X(i, j) - m) / sqrt(v + R(eps)) * R(g(j)) + R(b(j));
  }
  return Y;
}
Matrix<R> ref_attn(const Matrix<R>& X, const LayerWeights& w, bool causal) {
  const Eigen::Index n = X.rows();
  Matrix<R> out = Matrix<R>::Zero(n, X.cols());
  for (const HeadWeights& h : w.heads) {
    const Matrix<R> Q = ref_affine(X, h.W_Q, h.b_Q), K = ref_affine(X, h.W_K, h.b_K), V = ref_affine(X, h.W_V, h.b_V);
    Matrix<R> P(n, n);
    for (Eigen::Index i = 0; i < n; ++i) {
      R total(0);
      for (Eigen::Index j = 0; j < n; ++j) {
        if (causal && j > i) {
          P(i, j) = 0;
          continue;
        }
        R a(0);
        for (Eigen::Index k = 0; k < Q.cols(); ++k) a += Q(i, k) * K(j, k);
        P(i, j) = exp(a / sqrt(R(Q.cols())));  // no max subtraction: logits are small here
        total += P(i, j);
      }
      for (Eigen::Index j = 0; j < n; ++j) P(i, j) /= total;
    }
    out += ref_matmul(ref_matmul(P, V), convert<R>(h.W_O));
  }
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < out.cols(); ++j) out(i, j) += R(w.b_O(j));
  return out;
}
Matrix<R> ref_mlp(const Matrix<R>& Z, const LayerWeights& w) {
  Matrix<R> Hd = ref_affine(Z, w.W_1, w.b_1);
  for (Eigen::Index i = 0; i < Hd.rows(); ++i)
    for (Eigen::Index j = 0; j < Hd.cols(); ++j) {
      const R x = Hd(i, j);
      Hd(i, j) = x * (1 + erf(x / sqrt(R(2)))) / 2;  // gelu, erf form
    }
  return ref_affine(Hd, w.W_2, w.b_2);
}
Matrix<R> ref_forward(const Model& m, const Variant& v, Matrix<R> X) {
  for (int l = 0; l < m.arch().layers; ++l) {
    const LayerWeights& w = m.layer(l);
    const bool causal = v.mask == MaskKind::causal;
    Matrix<R> Z;
    if (v.layernorm == LayerNormKind::pre)
      Z = ref_attn(ref_ln(X, w.ln1_g, w.ln1_b, "1e-5"), w, causal);
    else
      Z = ref_attn(X, w, causal);
    if (v.skip) Z += X;
    if (v.layernorm == LayerNormKind::post) Z = ref_ln(Z, w.ln1_g, w.ln1_b, "1e-5");
    if (v.mlp == MlpKind::none) {
      X = Z;
      continue;
    }
    Matrix<R> F = ref_mlp(v.layernorm == LayerNormKind::pre ? ref_ln(Z, w.ln2_g, w.ln2_b, "1e-5") : Z, w);
    if (v.mlp == MlpKind::residual) F += Z;
    if (v.layernorm == LayerNormKind::post) F = ref_ln(F, w.ln2_g, w.ln2_b, "1e-5");
    X = F;
  }
  return X;
}

std::vector<Variant> all_variants() {
  std::vector<Variant> vs;
  for (bool skip : {false, true})
    for (MlpKind mlp : {MlpKind::none, MlpKind::plain, MlpKind::residual})
      for (LayerNormKind ln : {LayerNormKind::none, LayerNormKind::pre, LayerNormKind::post})
        for (MaskKind mask : {MaskKind::none, MaskKind::causal}) vs.push_back({skip, mlp, ln, mask});
  return vs;
}

}  // namespace

TEST_CASE("every variant matches the naive math.md reference at 257 bits") {
  const Model m = small_model({true, MlpKind::residual, LayerNormKind::post, MaskKind::none}, 2, 2, 6, 3, 8, 11);
  RandomInputSpec in;
  in.n = 5;
  in.d = 6;
  in.seed = 3;
  const MatrixXd X0 = random_input(in);
  for (const Variant& v : all_variants()) {
    CAPTURE(v.skip, to_string(v.mlp), to_string(v.layernorm), to_string(v.mask));
    const ForwardTrace<R> t = forward<R>(m, v, convert<R>(X0));
    const Matrix<R> ref = ref_forward(m, v, convert<R>(X0));
    // Different summation orders: a few hundred epsilons at most.
    test::require_matrix_near<R>(t.X.back(), ref, 512);
    // Double agrees with the 257-bit reference to double precision.
    const ForwardTrace<double> td = forward<double>(m, v, X0);
    Matrix<double> refd(ref.rows(), ref.cols());
    for (Eigen::Index i = 0; i < ref.rows(); ++i)
      for (Eigen::Index j = 0; j < ref.cols(); ++j) refd(i, j) = static_cast<double>(ref(i, j));
    test::require_matrix_near<double>(td.X.back(), refd, 1000);
  }
}

TEMPLATE_TEST_CASE("attention matrices are row-stochastic; causal ones are lower-triangular", "", double, R) {
  using S = TestType;
  const Model m = small_model({false, MlpKind::none, LayerNormKind::none, MaskKind::causal}, 3, 2, 8, 4, 0, 5, 1.0);
  RandomInputSpec in;
  in.n = 7;
  in.d = 8;
  in.seed = 9;
  for (MaskKind mask : {MaskKind::none, MaskKind::causal}) {
    const ForwardTrace<S> t = forward<S>(m, Variant::san(mask), convert<S>(random_input(in)));
    REQUIRE(t.P.size() == 3);
    for (const auto& layer : t.P) {
      REQUIRE(layer.size() == 2);
      for (const Matrix<S>& P : layer) {
        for (Eigen::Index i = 0; i < P.rows(); ++i) {
          S sum(0);
          for (Eigen::Index j = 0; j < P.cols(); ++j) {
            CHECK(P(i, j) >= 0);
            if (mask == MaskKind::causal && j > i) CHECK(P(i, j) == 0);
            sum += P(i, j);
          }
          CHECK(test::error_in_eps<S>(sum, S(1)) <= 16);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("W_QK = 0 gives uniform attention and an exactly rank-1 SAN output", "", double, R) {
  using S = TestType;
  Model base = small_model(Variant::san(), 1, 3, 6, 2, 0, 21, 0.5);
  std::vector<LayerWeights> layers = base.layers();
  for (HeadWeights& h : layers[0].heads) h.W_Q.setZero(), h.b_Q.setZero();
  const Model m(base.arch(), layers, std::nullopt, "W_Q = 0");
  RandomInputSpec in;
  in.n = 5;
  in.d = 6;
  in.seed = 2;
  const ForwardTrace<S> t = forward<S>(m, Variant::san(), convert<S>(random_input(in)));
  for (const Matrix<S>& P : t.P[0])
    for (Eigen::Index i = 0; i < P.rows(); ++i)
      for (Eigen::Index j = 0; j < P.cols(); ++j) CHECK(P(i, j) == P(0, 0));
  CHECK(test::error_in_eps<S>(t.P[0][0](0, 0), S(1) / S(5)) <= 2);
  // Identical rows in every precision, double included: each entry of a
  // product is one chain of FMAs over the inner index in index order
  // (core/dgemm.hpp), the same for every row, whatever the CPU.
  const Matrix<S>& Y = t.X.back();
  for (Eigen::Index i = 1; i < Y.rows(); ++i)
    for (Eigen::Index j = 0; j < Y.cols(); ++j) CHECK(Y(i, j) == Y(0, j));  // identical rows: rank 1 exactly
}

TEST_CASE("softmax subtracts the row maximum: logits of magnitude 1e6 give no NaN") {
  Matrix<double> A(2, 3);
  A << 1e6, 1e6 - 1, -1e6, -1e6, -1e6, -1e6 + 2;
  const Matrix<double> P = row_softmax<double>(A, MaskKind::none);
  CHECK(P(0, 0) == Approx(1 / (1 + std::exp(-1.0))));
  CHECK(P(0, 2) == 0.0);
  CHECK(P(1, 2) == Approx(1 / (1 + 2 * std::exp(-2.0))));
  Matrix<R> AR = convert<R>(A);
  const Matrix<R> PR = row_softmax<R>(AR, MaskKind::none);
  CHECK(test::error_in_eps<R>(PR(0, 0), R(1) / (1 + exp(R(-1)))) <= 4);
  CHECK(PR(0, 2) > 0);  // e^-2e6 is representable in MPFR
}

TEST_CASE("activations: gelu and gelu_tanh at known points") {
  // gelu(1) = Φ(1) = 0.8413447460685429..., gelu(-1) = -(1-Φ(1)).
  CHECK(activate<double>(1.0, Activation::gelu) == Approx(0.8413447460685429).epsilon(1e-15));
  CHECK(activate<double>(-1.0, Activation::gelu) == Approx(-0.15865525393145707).epsilon(1e-14));
  CHECK(activate<double>(-2.0, Activation::relu) == 0.0);
  // gelu_tanh(1) = 0.5(1 + tanh(sqrt(2/pi)·1.044715)) computed independently at 257 bits.
  const R c = sqrt(R(2) / boost::math::constants::pi<R>());
  const R expect = (1 + tanh(c * R("1.044715"))) / 2;
  CHECK(test::error_in_eps<R>(activate<R>(R(1), Activation::gelu_tanh), expect) <= 8);
}

TEST_CASE("pi_constant is pi in every scalar") {
  // Against Boost's own π and a 60-digit decimal literal.
  CHECK(pi_constant<double>() == boost::math::constants::pi<double>());
  CHECK(pi_constant<R>() == boost::math::constants::pi<R>());
  using Big = mpfr_real<9864>;
  const Big pi = pi_constant<Big>();
  CHECK(test::error_in_eps<Big>(pi, boost::math::constants::pi<Big>()) <= 0.5);
  const mpfr_real<60> literal("3.14159265358979323846264338327950288419716939937510582097494");
  CHECK(abs(mpfr_real<60>(pi) - literal) < mpfr_real<60>("1e-58"));
}

TEST_CASE("the forward pass rejects inputs of the wrong width and variants without weights") {
  const Model m = small_model(Variant::san(), 1, 1, 4, 2, 0, 1);
  CHECK_THROWS_WITH(forward<double>(m, Variant::san(), Matrix<double>::Zero(3, 5)), Catch::Contains("d_model = 4"));
  CHECK_THROWS_WITH(forward<double>(m, {false, MlpKind::plain, LayerNormKind::none, MaskKind::none},
                                    Matrix<double>::Zero(3, 4)),
                    Catch::Contains("no MLP weights"));
}

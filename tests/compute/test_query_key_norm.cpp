// The query/key norm and the per-layer rotary of Qwen3 and Gemma 3
// (families.md, "Qwen3 and Gemma 3"), written once in compute/layer_impl.hpp:
// a case worked out by hand, a naive forward written from families.md alone
// (local and global layers, both rotary bases, the linear factor, the gain
// 1 + w), and every other arithmetic against the direct pass at 257 bits —
// the centred pair, the ball (it must contain the value) and fp32.
#include "support/helpers.hpp"

#include "sanpath/compute/emulate.hpp"
#include "sanpath/compute/enclosure.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/forward_centred.hpp"
#include "sanpath/model/random.hpp"

#include <cmath>
#include <limits>

using namespace sanpath;
using R = mpfr_real<77>;  // 257 bits

namespace {

/// M rounded to double, entry by entry.
MatrixXd to_double(const Matrix<R>& M) {
  MatrixXd out(M.rows(), M.cols());
  for (Eigen::Index k = 0; k < M.size(); ++k) out(k) = static_cast<double>(M(k));
  return out;
}

/// Relative error of x against the reference y, in units of double's epsilon.
double eps_error(double x, double y) { return std::abs(x - y) / (std::abs(y) * 2.220446049250313e-16); }

/// A Gemma-3-shaped architecture: L layers, heads of d_h, query/key norms
/// with gain 1 + w, layers 0..L−2 local (window W, base 10⁴), the last global
/// (base 10⁶, linear factor 8), pre-RMSNorm with gain 1 + w.
Architecture gemma3_like(int layers, int heads, int d, int dh, Eigen::Index window) {
  Architecture a;
  a.layers = layers;
  a.heads = heads;
  a.d_model = d;
  a.d_qk = a.d_v = dh;
  a.d_ff = 2 * d;
  a.variant = Variant{true, MlpKind::none, LayerNormKind::pre, MaskKind::causal};
  a.norm = NormKind::rms;
  a.norm_unit_offset = true;
  a.ln_eps = 1e-6;
  a.rope_theta = 1e6;
  a.query_key_norm = Architecture::QueryKeyNorm{1e-6, true};
  for (int l = 0; l < layers; ++l)
    a.layer_rotary.push_back(l + 1 < layers ? Architecture::LayerRotary{10000.0, 1.0}
                                            : Architecture::LayerRotary{1e6, 8.0});
  a.attention_window = static_cast<int>(window);
  for (int l = 0; l < layers; ++l) a.window_layers.push_back(l + 1 < layers);
  return a;
}

Model random_of(const Architecture& a, std::uint64_t seed) {
  RandomModelSpec s;
  s.arch = a;
  s.std = 0.4;
  s.seed = seed;
  return random_model(s);
}

MatrixXd test_input(Eigen::Index n, int d) {
  MatrixXd X(n, d);
  for (Eigen::Index i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) X(i, j) = std::sin(1.0 + 0.7 * double(i) + 1.3 * double(j)) + 0.1 * double(j % 3);
  return X;
}

/// The forward pass of math.md §2 (skip, pre-norm, no MLP) with families.md's
/// attention written out from the text alone, in double: per head the
/// projection, the norm N(u; 1 + γ), the rotation by p·θ_l^(−2i/d_h)/f_l, the
/// scaled product, the causal mask (and i − j < W on local layers), softmax.
MatrixXd naive(const Model& m, const MatrixXd& X0) {
  const Architecture& a = m.arch();
  const int H = a.heads, dh = a.d_qk;
  const Eigen::Index n = X0.rows();
  const auto rms = [&](const MatrixXd& X, const VectorXd& g, double eps) {
    MatrixXd Y = X;
    for (Eigen::Index i = 0; i < X.rows(); ++i) {
      const double s = std::sqrt(X.row(i).squaredNorm() / double(X.cols()) + eps);
      for (Eigen::Index j = 0; j < X.cols(); ++j) Y(i, j) = X(i, j) / s * (1.0 + g(j));
    }
    return Y;
  };
  MatrixXd X = X0;
  for (int l = 0; l < a.layers; ++l) {
    const LayerWeights& w = m.layer(l);
    const MatrixXd Y = rms(X, w.ln1_g, a.ln_eps);
    const double theta = a.layer_rotary[static_cast<std::size_t>(l)].theta;
    const double f = a.layer_rotary[static_cast<std::size_t>(l)].linear_factor;
    const bool local = l + 1 < a.layers;
    MatrixXd out = MatrixXd::Zero(n, a.d_model);
    for (int h = 0; h < H; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      MatrixXd Q = rms(Y * hw.W_Q, w.q_norm, a.query_key_norm->eps);
      MatrixXd K = rms(Y * hw.W_K, w.k_norm, a.query_key_norm->eps);
      const MatrixXd V = Y * hw.W_V;
      for (MatrixXd* M : {&Q, &K})
        for (Eigen::Index p = 0; p < n; ++p)
          for (int i = 0; i < dh / 2; ++i) {
            const double angle = double(p) * std::pow(theta, -2.0 * i / dh) / f;
            const double x = (*M)(p, i), y = (*M)(p, i + dh / 2);
            (*M)(p, i) = x * std::cos(angle) - y * std::sin(angle);
            (*M)(p, i + dh / 2) = y * std::cos(angle) + x * std::sin(angle);
          }
      MatrixXd P = Q * K.transpose() / std::sqrt(double(dh));
      for (Eigen::Index i = 0; i < n; ++i) {
        double mx = -HUGE_VAL, sum = 0;
        const auto visible = [&](Eigen::Index j) { return j <= i && (!local || i - j < a.attention_window); };
        for (Eigen::Index j = 0; j < n; ++j)
          if (visible(j)) mx = std::max(mx, P(i, j));
        for (Eigen::Index j = 0; j < n; ++j) sum += P(i, j) = visible(j) ? std::exp(P(i, j) - mx) : 0.0;
        P.row(i) /= sum;
      }
      out += P * V * hw.W_O;
    }
    X = X + out;
  }
  return X;
}

}  // namespace

TEST_CASE("query/key norm before a rotation with a linear factor, worked out by hand") {
  // d = d_h = 2, one head, W_Q = W_K = W_V = W_O = I, no bias, SAN with a
  // causal mask; the norm N(u; γ) = u/sqrt(mean(u²)) ∘ γ (eps 0) with
  // γ_q = (1, 2), γ_k = (3, 1); rotary base 1 (θ_0 = 1) and factor 2: row p
  // turns by p/2 rad. Tokens x_0 = (1, 0), x_1 = (0, 1), so
  // q̂_1 = (0, 2√2), k̂_0 = (3√2, 0), k̂_1 = (0, √2); rotated:
  // q̃_1 = 2√2(−sin ½, cos ½), k̃_0 = (3√2, 0), k̃_1 = √2(−sin ½, cos ½).
  // Scores s = 1/√2: S_10 = −6√2 sin ½, S_11 = 2√2.
  Architecture a;
  a.layers = 1;
  a.heads = 1;
  a.d_model = a.d_qk = a.d_v = 2;
  a.variant = Variant::san(MaskKind::causal);
  a.norm = NormKind::rms;
  a.rope_theta = 1.0;
  a.query_key_norm = Architecture::QueryKeyNorm{0.0, false};
  a.layer_rotary = {Architecture::LayerRotary{1.0, 2.0}};
  LayerWeights w;
  HeadWeights hw;
  hw.W_Q = hw.W_K = hw.W_V = hw.W_O = MatrixXd::Identity(2, 2);
  hw.b_Q = hw.b_K = hw.b_V = VectorXd::Zero(2);
  w.heads.push_back(hw);
  w.b_O = VectorXd::Zero(2);
  w.q_norm = (VectorXd(2) << 1, 2).finished();
  w.k_norm = (VectorXd(2) << 3, 1).finished();
  const Model m(a, {w});
  const MatrixXd X = MatrixXd::Identity(2, 2);
  ForwardOptions record;
  record.record_attention = true;
  // At 257 bits against the formula evaluated at 257 bits: p10 = σ(−x), x = S_11 − S_10 ≈ 6.9, so the
  // few roundings in x (relative u each) move p10 by about x·u relative: 64 units of R's epsilon.
  {
    using std::exp;
    using std::sin;
    using std::sqrt;
    const R s2 = sqrt(R(2)), x = R(2) * s2 + R(6) * s2 * sin(R(0.5));
    const R p10 = R(1) / (R(1) + exp(x));
    const ForwardTrace<R> t = forward<R>(m, a.variant, convert<R>(X), record);
    const R eps = std::numeric_limits<R>::epsilon();
    CHECK(static_cast<double>(abs(t.P[0][0](1, 0) - p10) / (p10 * eps)) < 64);
    // Values are not normalised: row 1 = p10·x_0 + (1 − p10)·x_1.
    CHECK(static_cast<double>(abs(t.X[1](1, 0) - p10) / (p10 * eps)) < 64);
    CHECK(static_cast<double>(abs(t.X[1](1, 1) - (R(1) - p10)) / eps) < 64);
    CHECK(t.X[1](0, 0) == 1);  // row 0 sees itself alone
  }
  // In double likewise: the same bound in units of double's epsilon.
  const double s2 = std::sqrt(2.0), s10 = -6 * s2 * std::sin(0.5), s11 = 2 * s2;
  const double p10 = 1 / (1 + std::exp(s11 - s10));
  const ForwardTrace<double> t = forward<double>(m, a.variant, X, record);
  REQUIRE(t.P.size() == 1);
  CHECK(t.P[0][0](0, 0) == 1);
  CHECK(eps_error(t.P[0][0](1, 0), p10) < 64);
  CHECK(eps_error(t.X[1](1, 0), p10) < 64);
  CHECK(eps_error(t.X[1](1, 1), 1 - p10) < 64);
}

TEST_CASE("Gemma-3-shaped layers: local and global rotary, window, gain 1 + w, against a naive forward") {
  const Model m = random_of(gemma3_like(3, 2, 8, 4, 3), 17);
  const MatrixXd X0 = test_input(6, 8);
  const MatrixXd ref = naive(m, X0);
  const ForwardTrace<R> t = forward<R>(m, m.arch().variant, convert<R>(X0));
  const MatrixXd got = to_double(t.X.back());
  double worst = 0;
  for (Eigen::Index i = 0; i < ref.rows(); ++i)
    for (Eigen::Index j = 0; j < ref.cols(); ++j) worst = std::max(worst, eps_error(got(i, j), ref(i, j)));
  CAPTURE(worst);
  CHECK(worst < 4096);  // the naive forward's own double rounding over three layers
  // Without the per-layer rotary (every layer at 10⁶, factor 1) the output differs: the feature is read.
  Architecture flat = m.arch();
  flat.layer_rotary.clear();
  std::vector<LayerWeights> layers;
  for (int l = 0; l < flat.layers; ++l) layers.push_back(m.layer(l));
  const Model m_flat(flat, layers);
  const MatrixXd other = to_double(forward<R>(m_flat, flat.variant, convert<R>(X0)).X.back());
  CHECK((other - got).cwiseAbs().maxCoeff() > 1e-6);
}

TEST_CASE("query/key norms in every arithmetic: centred, ball and fp32 against the direct pass") {
  const Model m = random_of(gemma3_like(4, 2, 8, 4, 4), 23);
  const MatrixXd X0 = test_input(7, 8);
  for (const Variant v : {m.arch().variant, Variant::san(MaskKind::causal)}) {
    CAPTURE(v.skip, to_string(v.layernorm));
    const ForwardTrace<R> direct = forward<R>(m, v, convert<R>(X0));
    // The centred pass: X^l = 1cᵀ + R agrees with the direct pass to its precision.
    const CentredTrace<R> centred = forward_centred<R>(m, v, convert<R>(X0));
    for (int l = 1; l <= m.arch().layers; ++l) {
      const Matrix<R> diff = centred.X(l) - direct.X[static_cast<std::size_t>(l)];
      R worst(0), scale(0);
      for (Eigen::Index k = 0; k < diff.size(); ++k) {
        worst = std::max<R>(worst, abs(diff(k)));
        scale = std::max<R>(scale, abs(direct.X[static_cast<std::size_t>(l)](k)));
      }
      CAPTURE(l);
      CHECK(double(worst / scale) < 1e-70);
    }
    // The ball contains the 257-bit value (its own midpoint is a 128-bit run).
    using B = mpfr_real<38>;
    const EnclosedTrace<B> ball = forward_enclosed<B>(m, v, convert<B>(X0));
    const Matrix<R>& exact = direct.X.back();
    const BallMatrix<B>& enc = ball.X.back();
    int outside = 0;
    for (Eigen::Index i = 0; i < exact.rows(); ++i)
      for (Eigen::Index j = 0; j < exact.cols(); ++j) {
        const double gap = std::abs(double(R(enc.mid(i, j)) - exact(i, j)));
        if (!(gap <= enc.rad.at(i, j).scaled(0))) ++outside;
      }
    CHECK(outside == 0);
    // fp32 (math.md §9) stays within fp32's reach of the exact output.
    const EmulatedTrace e = emulate_forward(m, v, X0, EmulatedFormat::fp32, false);
    const MatrixXd X32 = e.X.back(), Xd = to_double(exact);
    CHECK((X32 - Xd).cwiseAbs().maxCoeff() / Xd.cwiseAbs().maxCoeff() < 1e-4);
  }
}

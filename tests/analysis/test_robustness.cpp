// Numerical robustness of the forward pass at the edges: attention logits of
// magnitude 1e6 (softmax must subtract the row maximum, in double and in
// MPFR), fully saturated one-hot attention, and weights at the extremes of
// F16 and BF16 (largest finite, smallest subnormal) read from a safetensors
// file and carried exactly into the forward pass.
#include "support/helpers.hpp"

#include "sanpath/analysis/forward.hpp"
#include "sanpath/core/errors.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/core/linalg.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <algorithm>
#include <string>
#include <vector>

using namespace sanpath;
using sanpath::test::epsilon_of;
using sanpath::test::tmp_path;

namespace {

/// One layer, one head, d = d_qk = d_v = 4, pure SAN, no biases except b_Q
/// and b_K. Queries are constant: q_i = (s, 0, 0, 0) (W_Q = 0, b_Q = s e_0);
/// keys read the first feature: k_j = s x_j0 e_0 (W_K = s e_0 e_0ᵀ). So the
/// logit of every row is A_ij = s² x_j0 / √4: with s² = 2·10⁶ the logits are
/// 10⁶·x_j0. W_V = W_O = I.
Model saturating_model(double s, int layers = 1) {
  Architecture a;
  a.layers = layers;
  a.heads = 1;
  a.d_model = a.d_qk = a.d_v = 4;
  a.d_ff = 0;
  a.variant = Variant::san();
  LayerWeights w;
  HeadWeights h;
  h.W_Q = MatrixXd::Zero(4, 4);
  h.W_K = MatrixXd::Zero(4, 4);
  h.W_K(0, 0) = s;
  h.W_V = MatrixXd::Identity(4, 4);
  h.W_O = MatrixXd::Identity(4, 4);
  h.b_Q = VectorXd::Zero(4);
  h.b_Q(0) = s;
  h.b_K = VectorXd::Zero(4);
  h.b_V = VectorXd::Zero(4);
  w.heads = {h};
  w.b_O = VectorXd::Zero(4);
  return Model(a, std::vector<LayerWeights>(static_cast<std::size_t>(layers), w), std::nullopt, "saturating");
}

/// Rows: first feature x_j0 in {1, -1, 0.5, -0.25, 0}; the rest distinct.
MatrixXd logit_input() {
  MatrixXd X(5, 4);
  X << 1.0, 0.1, 0.2, 0.3,    //
      -1.0, 0.4, 0.5, 0.6,    //
      0.5, 0.7, 0.8, 0.9,     //
      -0.25, 1.0, 1.1, 1.2,   //
      0.0, 1.3, 1.4, 1.5;
  return X;
}

/// Every entry finite, P row-stochastic within a few epsilons, entries in [0, 1].
template <class S> void require_sane(const ForwardTrace<S>& t) {
  using std::abs;
  using std::isfinite;
  for (const Matrix<S>& X : t.X)
    for (Eigen::Index j = 0; j < X.cols(); ++j)
      for (Eigen::Index i = 0; i < X.rows(); ++i) {
        CAPTURE(i, j);
        REQUIRE(isfinite(X(i, j)));
      }
  for (const auto& layer : t.P)
    for (const Matrix<S>& P : layer)
      for (Eigen::Index i = 0; i < P.rows(); ++i) {
        S sum(0);
        for (Eigen::Index j = 0; j < P.cols(); ++j) {
          CAPTURE(i, j);
          REQUIRE(isfinite(P(i, j)));
          REQUIRE(P(i, j) >= 0);
          REQUIRE(P(i, j) <= 1);
          sum += P(i, j);
        }
        const BigReal err = to_big(S(abs(S(sum - S(1))))) / epsilon_of<S>();
        CAPTURE(i, to_sci(err));
        REQUIRE(err <= 8);
      }
}

template <class S> void check_huge_logits() {
  const double s = std::sqrt(2e6);
  const Model m = saturating_model(s);
  const Matrix<S> X0 = convert<S>(logit_input());
  const ForwardTrace<S> t = forward<S>(m, m.arch().variant, X0);
  require_sane(t);
  const Matrix<S>& P = t.P[0][0];
  // Row maximum 1e6 at token 0, the next logit 5e5 below it: P is one-hot
  // at token 0 up to exp(-5e5) (0 in double, tiny but exact in MPFR).
  for (Eigen::Index i = 0; i < P.rows(); ++i) {
    CAPTURE(i);
    REQUIRE(P(i, 0) == 1);  // 1 - exp(-5e5) rounds to 1 in every tier up to 32772 bits
    for (Eigen::Index j = 1; j < P.cols(); ++j) {
      if constexpr (is_mpfr_v<S>) {
        REQUIRE(P(i, j) > 0);  // MPFR's exponent range holds exp(-2e6)
        REQUIRE(log10_abs(to_big(P(i, j))) < -200000);
      } else {
        REQUIRE(P(i, j) == 0);
      }
    }
    // X^1 = P X^0 (W_V = W_O = I, no bias): every row is token 0's row.
    for (Eigen::Index j = 0; j < 4; ++j) REQUIRE(t.X[1](i, j) == X0(0, j));
  }
}

template <class S> void check_negative_logits() {
  // Logits -1e6·x_j0 with the largest at token 1 (x = -1): still no NaN.
  const double s = std::sqrt(2e6);
  const Model m = saturating_model(s);
  MatrixXd X = logit_input();
  X.col(0) *= -1.0;
  const ForwardTrace<S> t = forward<S>(m, m.arch().variant, convert<S>(X));
  require_sane(t);
  for (Eigen::Index i = 0; i < 5; ++i) REQUIRE(t.P[0][0](i, 1) == 1);
}

/// An F16/BF16 bit pattern in a safetensors F16 tensor, rewritten over a
/// native model's W_Q (d×d_qk = 4×4) of layer 0, head 0.
std::string with_half_weights(const std::string& path, const std::string& dtype, const std::vector<std::uint16_t>& wq) {
  using json = nlohmann::json;
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)])) << (8 * i);
  json h = json::parse(bytes.substr(8, n));
  const std::string data = bytes.substr(8 + n);
  // Re-pack every tensor in offset order, W_Q as 16-bit values.
  std::vector<std::pair<std::uint64_t, std::string>> order;
  for (auto& [k, v] : h.items())
    if (k != "__metadata__") order.emplace_back(v["data_offsets"][0].get<std::uint64_t>(), k);
  std::sort(order.begin(), order.end());
  std::string out_data;
  for (const auto& [begin, name] : order) {
    json& v = h[name];
    const std::uint64_t b = v["data_offsets"][0], e = v["data_offsets"][1];
    std::string chunk = data.substr(b, e - b);
    if (name == "layers.0.heads.0.W_Q") {
      REQUIRE(wq.size() == 16);
      chunk.clear();
      for (const std::uint16_t u : wq) {
        chunk.push_back(static_cast<char>(u & 0xff));
        chunk.push_back(static_cast<char>(u >> 8));
      }
      v["dtype"] = dtype;
    }
    v["data_offsets"] = {out_data.size(), out_data.size() + chunk.size()};
    out_data += chunk;
  }
  const std::string header = h.dump();
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  file += header + out_data;
  const std::string out_path = tmp_path("robust_" + dtype + ".safetensors");
  std::ofstream(out_path, std::ios::binary | std::ios::trunc) << file;
  return out_path;
}

Model small_native(const std::string& name) {
  Architecture a;
  a.layers = 2;
  a.heads = 1;
  a.d_model = a.d_qk = a.d_v = 4;
  a.d_ff = 0;
  a.variant = Variant::san();
  LayerWeights w;
  HeadWeights h;
  h.W_Q = MatrixXd::Identity(4, 4) * 0.5;
  h.W_K = MatrixXd::Identity(4, 4) * 0.25;
  h.W_V = MatrixXd::Identity(4, 4);
  h.W_O = MatrixXd::Identity(4, 4);
  h.b_Q = h.b_K = h.b_V = VectorXd::Zero(4);
  w.heads = {h};
  w.b_O = VectorXd::Zero(4);
  Model m(a, {w, w}, std::nullopt, name);
  save_native(m, tmp_path(name));
  return m;
}

}  // namespace

TEST_CASE("softmax with logits of magnitude 1e6 gives no NaN, in double and MPFR", "[robustness]") {
  SECTION("double") { check_huge_logits<double>(); }
  SECTION("128 bits") { check_huge_logits<mpfr_real<38>>(); }
  SECTION("1025 bits") { check_huge_logits<mpfr_real<308>>(); }
  SECTION("negative logits, double") { check_negative_logits<double>(); }
  SECTION("negative logits, 257 bits") { check_negative_logits<mpfr_real<77>>(); }
}

TEST_CASE("row_softmax: logits near the double range, infinities of the difference", "[robustness]") {
  MatrixXd A(3, 3);
  A << 1e308, -1e308, 0.0,  //
      -1e300, -1e300, -1e300,  //
      1e6, 1e6 - 1, -1e6;
  const MatrixXd P = row_softmax<double>(A, MaskKind::none);
  REQUIRE(P.allFinite());
  REQUIRE(P(0, 0) == 1.0);
  REQUIRE(P(0, 1) == 0.0);  // exp(-2e308) = exp(-inf) = 0, not NaN
  for (int j = 0; j < 3; ++j) REQUIRE(std::abs(P(1, j) - 1.0 / 3) <= 2 * std::numeric_limits<double>::epsilon());
  REQUIRE(std::abs(P(2, 0) - 1 / (1 + std::exp(-1.0))) <= 4 * std::numeric_limits<double>::epsilon());
  const MatrixXd C = row_softmax<double>(A, MaskKind::causal);
  REQUIRE(C.allFinite());
  REQUIRE(C(0, 0) == 1.0);
  REQUIRE(C(0, 1) == 0.0);
}

TEST_CASE("fully saturated (one-hot) attention: exact rows, residual below resolution, not 0", "[robustness]") {
  // Layer 1 attends one-hot to token 0: X^1 = 1 x_0ᵀ exactly. Layers 2, 3
  // see identical rows (all logits 1e6, uniform attention): the rows stay
  // identical to each other and within a few epsilons of x_0.
  const Model m = saturating_model(std::sqrt(2e6), 3);
  const ForwardTrace<double> t = forward<double>(m, m.arch().variant, logit_input());
  require_sane(t);
  for (Eigen::Index i = 0; i < 5; ++i)
    for (Eigen::Index j = 0; j < 4; ++j) {
      CAPTURE(i, j);
      REQUIRE(t.X[1](i, j) == logit_input()(0, j));
      for (std::size_t l = 2; l <= 3; ++l) {
        REQUIRE(t.X[l](i, j) == t.X[l](0, j));
        REQUIRE(std::abs(t.X[l](i, j) - logit_input()(0, j)) <= 8 * std::numeric_limits<double>::epsilon());
      }
    }

  // Causal mask: row 0 sees only itself, every row's maximum is token 0.
  Variant causal = m.arch().variant;
  causal.mask = MaskKind::causal;
  const ForwardTrace<mpfr_real<77>> tc = forward<mpfr_real<77>>(m, causal, convert<mpfr_real<77>>(logit_input()));
  require_sane(tc);
  for (Eigen::Index i = 0; i < 5; ++i)
    for (Eigen::Index j = i + 1; j < 5; ++j) REQUIRE(tc.P[0][0](i, j) == 0);

  // The analysis reports the residual of identical rows as below the
  // resolution of double (or a few epsilons of rounding in the centre),
  // never as 0 or NaN.
  PrecisionRequest req;
  req.automatic = false;
  req.fixed = Precision::double_precision();
  req.confirm = false;
  const ForwardAnalysis a = analyze_forward(m, m.arch().variant, InputSpec::from_matrix(logit_input(), "X"), req);
  REQUIRE(a.layers.size() == 4);
  for (std::size_t l = 1; l < 4; ++l) {
    const Quantity& q = a.layers[l].relative_residual;
    CAPTURE(l, q.str());
    REQUIRE(q.str() != "0");
    REQUIRE(q.str() != "nan");
    REQUIRE(q.value <= 16 * std::numeric_limits<double>::epsilon());
    if (q.value == 0) REQUIRE(q.below_resolution);
  }
}

TEST_CASE("weights at the F16 and BF16 extremes load exactly and run", "[robustness]") {
  const Model base = small_native("robust_base.safetensors");
  // Row-major 4×4: 65504 (largest finite F16), 2^-24 (smallest subnormal),
  // -65504, 2^-14 (smallest normal), -0, 1, and the largest subnormal.
  const std::vector<std::uint16_t> f16 = {0x7BFF, 0x0001, 0xFBFF, 0x0400, 0x8000, 0x3C00, 0x03FF, 0x0000,
                                          0x0000, 0x0000, 0x3C00, 0x0000, 0x8001, 0x0000, 0x0000, 0x3C00};
  const std::string path = with_half_weights(tmp_path("robust_base.safetensors"), "F16", f16);
  const SafetensorsFile file = SafetensorsFile::read(path);
  REQUIRE(file.at("layers.0.heads.0.W_Q").dtype == "F16");
  const Model m = load_model(path);
  const MatrixXd& W = m.layer(0).heads[0].W_Q;
  REQUIRE(W(0, 0) == 65504.0);
  REQUIRE(W(0, 1) == std::ldexp(1.0, -24));
  REQUIRE(W(0, 2) == -65504.0);
  REQUIRE(W(0, 3) == std::ldexp(1.0, -14));
  REQUIRE(W(1, 0) == 0.0);
  REQUIRE(std::signbit(W(1, 0)));
  REQUIRE(W(1, 1) == 1.0);
  REQUIRE(W(1, 2) == std::ldexp(1023.0, -24));
  REQUIRE(W(3, 0) == -std::ldexp(1.0, -24));
  // The other layer is untouched.
  REQUIRE(m.layer(1).heads[0].W_Q == base.layer(1).heads[0].W_Q);

  // Logits of order 65504·|x|: the forward pass stays finite in double and
  // agrees with 257 bits.
  MatrixXd X(3, 4);
  X << 1, -2, 3, 0.5,  //
      -1, 0.25, 2, 1,  //
      0.5, 1, -1, 2;
  const ForwardTrace<double> td = forward<double>(m, m.arch().variant, X);
  const ForwardTrace<mpfr_real<77>> tm = forward<mpfr_real<77>>(m, m.arch().variant, convert<mpfr_real<77>>(X));
  require_sane(td);
  require_sane(tm);
  for (Eigen::Index i = 0; i < 3; ++i)
    for (Eigen::Index j = 0; j < 4; ++j) {
      CAPTURE(i, j);
      const BigReal ref = to_big(tm.X[2](i, j));
      const BigReal diff = abs(BigReal(to_big(td.X[2](i, j)) - ref));
      REQUIRE(diff <= 1e-10 * (abs(ref) + 1));  // double vs 257 bits on a well-conditioned pass
    }

  // BF16: largest finite 0x7F7F = (2 - 2^-7)·2^127, smallest subnormal 2^-133.
  std::vector<std::uint16_t> bf16(16, 0);
  bf16[0] = 0x7F7F;
  bf16[1] = 0x0001;
  bf16[2] = 0xFF7F;
  const Model mb = load_model(with_half_weights(tmp_path("robust_base.safetensors"), "BF16", bf16));
  const MatrixXd& B = mb.layer(0).heads[0].W_Q;
  REQUIRE(B(0, 0) == std::ldexp(255.0, 120));
  REQUIRE(B(0, 1) == std::ldexp(1.0, -133));
  REQUIRE(B(0, 2) == -std::ldexp(255.0, 120));
}

TEST_CASE("a double forward pass that overflows is a NumericalError, not a table of zeros", "[robustness]") {
  // W_V = W_O = 1e100·I: ‖X^l‖ grows by 1e200 per layer, beyond 1.8e308 at layer 2.
  Architecture a;
  a.layers = 3;
  a.heads = 1;
  a.d_model = a.d_qk = a.d_v = 2;
  a.d_ff = 0;
  a.variant = Variant::san();
  LayerWeights w;
  HeadWeights h;
  h.W_Q = h.W_K = MatrixXd::Identity(2, 2);
  h.W_V = h.W_O = MatrixXd::Identity(2, 2) * 1e100;
  h.b_Q = h.b_K = h.b_V = VectorXd::Zero(2);
  w.heads = {h};
  w.b_O = VectorXd::Zero(2);
  const Model m(a, {w, w, w}, std::nullopt, "huge.safetensors");
  MatrixXd X(2, 2);
  X << 1, 2, 3, -1;
  const InputSpec in = InputSpec::from_matrix(X, "X");
  PrecisionRequest req;
  req.automatic = false;
  req.fixed = Precision::double_precision();
  req.confirm = false;
  REQUIRE_THROWS_AS(analyze_forward(m, a.variant, in, req), NumericalError);
  REQUIRE_THROWS_WITH(analyze_forward(m, a.variant, in, req),
                      Catch::StartsWith("huge.safetensors: layer 2: the forward pass at double overflowed"));
  // MPFR's exponent range holds 1e600 exactly: 65 bits measures it.
  req.fixed = Precision::at_least(65);
  const ForwardAnalysis r = analyze_forward(m, a.variant, in, req);
  REQUIRE(r.layers.size() == 4);
  REQUIRE(log10_abs(r.layers[3].norm_composite.value) > 600);
}

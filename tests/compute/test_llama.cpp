// The Llama family (math.md §8): rotary rotation and RMSNorm against values
// worked out by hand, grouped-query attention against a naive forward on the
// raw HuggingFace tensors, init layouts against the native file of the same
// weights, and the two real TinyStories Llamas against the logits and greedy
// tokens of an independent float64 numpy forward (SOURCES.md).
#include "support/helpers.hpp"
#include "support/llama_helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/model/random.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace sanpath;
using sanpath::test::llama_arch;
using sanpath::test::random_llama;
using sanpath::test::real_models_dir;
using sanpath::test::tmp_path;
using json = nlohmann::json;
using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using R = mpfr_real<77>;  // 257 bits

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return json::parse(in);
}

/// The shared folder, or "": a missing folder fails under CI.
std::string shared_models_or_skip() {
  const std::string root = real_models_dir();
  if (root.empty()) {
    if (std::getenv("CI")) FAIL("the shared real-models folder is missing and CI is set");
    WARN("no real checkpoints in the shared folder; skipped");
  }
  return root;
}

}  // namespace

TEST_CASE("rotary rotation of a query row, by hand") {
  // d_h = 4, θ = 100: θ_0 = 1, θ_1 = 100^(−1/2) = 0.1. Row p is rotated by
  // p rad on the pair (0, 2) and by p/10 rad on the pair (1, 3).
  Matrix<double> M(3, 4);
  M << 1, 2, 3, 4,  //
      1, 0, 0, 0,   //
      1, 2, 3, 4;
  const RotaryTable<double> t = rotary_table<double>(3, 4, 100.0);
  apply_rotary(M, t, 0);
  // Position 0: unchanged.
  CHECK(M(0, 0) == 1);
  CHECK(M(0, 1) == 2);
  CHECK(M(0, 2) == 3);
  CHECK(M(0, 3) == 4);
  // Position 1, (1, 0, 0, 0): the pair (0, 2) = (1, 0) turns to (cos 1, sin 1).
  CHECK(M(1, 0) == Approx(0.5403023058681398).epsilon(1e-15));
  CHECK(M(1, 2) == Approx(0.8414709848078965).epsilon(1e-15));
  CHECK(M(1, 1) == 0);
  CHECK(M(1, 3) == 0);
  // Position 2: (1, 3) by 2 rad, (2, 4) by 0.2 rad.
  const double c2 = -0.4161468365471424, s2 = 0.9092974268256817;  // cos 2, sin 2
  const double c02 = 0.9800665778412416, s02 = 0.19866933079506122;  // cos 0.2, sin 0.2
  CHECK(M(2, 0) == Approx(1 * c2 - 3 * s2).epsilon(1e-14));
  CHECK(M(2, 2) == Approx(3 * c2 + 1 * s2).epsilon(1e-14));
  CHECK(M(2, 1) == Approx(2 * c02 - 4 * s02).epsilon(1e-14));
  CHECK(M(2, 3) == Approx(4 * c02 + 2 * s02).epsilon(1e-14));
  // At 257 bits the same rotation agrees with the 257-bit cos/sin of the angles.
  Matrix<R> Mr(3, 4);
  Mr << 1, 2, 3, 4, 1, 0, 0, 0, 1, 2, 3, 4;
  apply_rotary(Mr, rotary_table<R>(3, 4, 100.0), 0);
  const R two(2), fifth = R(2) / R(10);
  CHECK(test::error_in_eps<R>(Mr(2, 0), R(cos(two) - R(3) * sin(two))) < 8);
  CHECK(test::error_in_eps<R>(Mr(2, 3), R(R(4) * cos(fifth) + R(2) * sin(fifth))) < 8);
  CHECK_THROWS_AS(rotary_table<double>(2, 3, 100.0), std::invalid_argument);
}

TEST_CASE("RMSNorm by hand") {
  // x = (1, 2, 3, 4): mean(x²) = 30/4 = 7.5; gain (1, 2, 1, 2), eps 0.
  Matrix<double> X(1, 4);
  X << 1, 2, 3, 4;
  VectorXd g(4), b = VectorXd::Zero(4);
  g << 1, 2, 1, 2;
  const Matrix<double> Y = rms_norm(X, g, b, 0.0);
  const double r = std::sqrt(7.5);
  CHECK(Y(0, 0) == Approx(1 / r).epsilon(1e-15));
  CHECK(Y(0, 1) == Approx(4 / r).epsilon(1e-15));
  CHECK(Y(0, 2) == Approx(3 / r).epsilon(1e-15));
  CHECK(Y(0, 3) == Approx(8 / r).epsilon(1e-15));
  // eps enters under the root: mean(x²) = 1 for (1, −1), eps = 3 gives x/2.
  Matrix<R> Z(1, 2);
  Z << 1, -1;
  const Matrix<R> Zn = rms_norm(Z, VectorXd::Ones(2), VectorXd::Zero(2), 3.0);
  CHECK(Zn(0, 0) == R(0.5));
  CHECK(Zn(0, 1) == R(-0.5));
  CHECK(activate(R(0), Activation::silu) == 0);
  CHECK(activate(2.0, Activation::silu) == Approx(2.0 / (1.0 + std::exp(-2.0))).epsilon(1e-15));
}

TEST_CASE("a 1-layer 2-head rotary model, worked out by hand") {
  // d = 4, two heads of d_h = 2, θ = 1 (θ_0 = 1: position p turns by p
  // rad), RMSNorm gains 1, eps 0, mlp none, skip off; each head selects its
  // two features for Q, K, V and writes them back (W_O = selectionᵀ). Tokens
  // x_0 = (1, 0, 0, 1), x_1 = (0, 1, 1, 0): mean(x²) = 1/2, so RMS(X) = √2·X.
  Architecture a;
  a.layers = 1;
  a.heads = 2;
  a.d_model = 4;
  a.d_qk = a.d_v = 2;
  a.variant = Variant{false, MlpKind::none, LayerNormKind::pre, MaskKind::causal};
  a.ln_eps = 0;
  a.norm = NormKind::rms;
  a.rope_theta = 1.0;
  LayerWeights w;
  for (int h = 0; h < 2; ++h) {
    HeadWeights hw;
    MatrixXd sel = MatrixXd::Zero(4, 2);
    sel(2 * h, 0) = sel(2 * h + 1, 1) = 1;
    hw.W_Q = hw.W_K = hw.W_V = sel;
    hw.W_O = sel.transpose();
    hw.b_Q = hw.b_K = hw.b_V = VectorXd::Zero(2);
    w.heads.push_back(hw);
  }
  w.b_O = VectorXd::Zero(4);
  w.ln1_g = w.ln2_g = VectorXd::Ones(4);
  w.ln1_b = w.ln2_b = VectorXd::Zero(4);
  const Model m(a, {w});
  Matrix<double> X(2, 4);
  X << 1, 0, 0, 1,  //
      0, 1, 1, 0;
  const ForwardTrace<double> t = forward<double>(m, a.variant, X);
  const double s = std::sqrt(2.0), s1 = std::sin(1.0);
  // Head 1 (features 0, 1): y_0 = (√2, 0), y_1 = (0, √2). q_1 = k_1 = √2(−sin 1, cos 1),
  // k_0 = (√2, 0). Logits of row 1: q_1·k_0/√2 = −√2 sin 1, q_1·k_1/√2 = √2.
  const double p10 = 1 / (1 + std::exp(s - (-s * s1)));
  // Head 2 (features 2, 3): y_0 = (0, √2), y_1 = (√2, 0). k_0 = (0, √2),
  // q_1 = k_1 = √2(cos 1, sin 1). Logits: √2 sin 1 and √2.
  const double p10b = 1 / (1 + std::exp(s - s * s1));
  REQUIRE(t.P.size() == 1);
  CHECK(t.P[0][0](0, 0) == 1);
  CHECK(t.P[0][0](1, 0) == Approx(p10).epsilon(1e-14));
  CHECK(t.P[0][1](1, 0) == Approx(p10b).epsilon(1e-14));
  // Outputs: row 0 = y_0 (each head attends to itself only); row 1 mixes the
  // *unrotated* values: head 1 → p10·(√2, 0) + (1 − p10)·(0, √2).
  const Matrix<double>& Y = t.X[1];
  CHECK(Y(0, 0) == Approx(s).epsilon(1e-15));
  CHECK(Y(0, 3) == Approx(s).epsilon(1e-15));
  CHECK(Y(1, 0) == Approx(p10 * s).epsilon(1e-14));
  CHECK(Y(1, 1) == Approx((1 - p10) * s).epsilon(1e-14));
  CHECK(Y(1, 2) == Approx((1 - p10b) * s).epsilon(1e-14));
  CHECK(Y(1, 3) == Approx(p10b * s).epsilon(1e-14));
}

namespace {

/// A naive forward of a Llama checkpoint folder from its raw tensors (HF
/// semantics, written independently of the library): attention-only layers
/// with RMSNorm, rotary, grouped-query attention, causal mask, skip on, then
/// the SwiGLU MLP with its residual. Returns X^L.
MatrixXd naive_llama(const std::string& dir, const MatrixXd& X0) {
  const json c = read_json(dir + "/config.json");
  const auto f = SafetensorsFile::read(dir + "/model.safetensors");
  const int L = c["num_hidden_layers"], H = c["num_attention_heads"], Hkv = c["num_key_value_heads"],
            dh = c["head_dim"];
  const double eps = c["rms_norm_eps"], theta = c["rope_theta"];
  const bool qwen2 = c["model_type"] == "qwen2";
  const auto W = [&](const std::string& k) {  // torch [out, in]
    const Tensor& t = f.at(k);
    return MatrixXd(Eigen::Map<const RowMajor>(t.values.data(), t.shape[0], t.shape[1]));
  };
  const auto V = [&](const std::string& k) {
    const Tensor& t = f.at(k);
    return VectorXd(Eigen::Map<const VectorXd>(t.values.data(), static_cast<Eigen::Index>(t.values.size())));
  };
  const auto rms = [&](const MatrixXd& X, const VectorXd& g) {
    MatrixXd Y = X;
    for (Eigen::Index i = 0; i < X.rows(); ++i) Y.row(i) = X.row(i) / std::sqrt(X.row(i).squaredNorm() / X.cols() + eps);
    for (Eigen::Index i = 0; i < X.rows(); ++i) Y.row(i) = Y.row(i).cwiseProduct(g.transpose());
    return Y;
  };
  const Eigen::Index n = X0.rows();
  const auto rope = [&](MatrixXd& M, int head) {
    for (Eigen::Index p = 0; p < n; ++p)
      for (int i = 0; i < dh / 2; ++i) {
        const double ang = double(p) * std::pow(theta, -2.0 * i / dh);
        const double x = M(p, head * dh + i), y = M(p, head * dh + i + dh / 2);
        M(p, head * dh + i) = x * std::cos(ang) - y * std::sin(ang);
        M(p, head * dh + i + dh / 2) = y * std::cos(ang) + x * std::sin(ang);
      }
  };
  MatrixXd X = X0;
  for (int l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const MatrixXd Y = rms(X, V(p + "input_layernorm.weight"));
    MatrixXd Q = Y * W(p + "self_attn.q_proj.weight").transpose(), K = Y * W(p + "self_attn.k_proj.weight").transpose(),
             Vv = Y * W(p + "self_attn.v_proj.weight").transpose();
    if (qwen2) {
      Q.rowwise() += V(p + "self_attn.q_proj.bias").transpose();
      K.rowwise() += V(p + "self_attn.k_proj.bias").transpose();
      Vv.rowwise() += V(p + "self_attn.v_proj.bias").transpose();
    }
    for (int h = 0; h < H; ++h) rope(Q, h);
    for (int g = 0; g < Hkv; ++g) rope(K, g);
    MatrixXd heads(n, H * dh);
    for (int h = 0; h < H; ++h) {
      const int g = h / (H / Hkv);
      MatrixXd A = Q.middleCols(h * dh, dh) * K.middleCols(g * dh, dh).transpose() / std::sqrt(double(dh));
      for (Eigen::Index i = 0; i < n; ++i) {
        const double mx = A.row(i).head(i + 1).maxCoeff();
        double sum = 0;
        for (Eigen::Index j = 0; j < n; ++j) sum += A(i, j) = j <= i ? std::exp(A(i, j) - mx) : 0.0;
        A.row(i) /= sum;
      }
      heads.middleCols(h * dh, dh) = A * Vv.middleCols(g * dh, dh);
    }
    const MatrixXd Z = X + heads * W(p + "self_attn.o_proj.weight").transpose();
    const MatrixXd Z2 = rms(Z, V(p + "post_attention_layernorm.weight"));
    MatrixXd G = Z2 * W(p + "mlp.gate_proj.weight").transpose();
    const MatrixXd U = Z2 * W(p + "mlp.up_proj.weight").transpose();
    G = G.array() / (1.0 + (-G.array()).exp()) * U.array();
    X = Z + G * W(p + "mlp.down_proj.weight").transpose();
  }
  return X;
}

}  // namespace

TEST_CASE("grouped-query attention: H_kv = 1 and H_kv = H against a naive forward of the raw tensors") {
  for (const int kv : {1, 2, 4}) {
    for (const std::string layout : {"llama", "qwen2"}) {
      CAPTURE(kv, layout);
      RandomModelSpec s;
      s.arch = llama_arch(2, 4, kv, 16, 4, 24);
      s.std = 0.3;
      s.bias_std = layout == "qwen2" ? 0.2 : 0.0;
      s.seed = 11 + static_cast<std::uint64_t>(kv);
      const Model m = random_model(s);
      // The heads of a group hold the same K, V; different groups differ.
      CHECK(m.layer(0).heads[3].W_K == m.layer(0).heads[m.arch().kv_head_of(3) * 4 / kv].W_K);
      if (kv > 1) CHECK(m.layer(0).heads[0].W_V != m.layer(0).heads[3].W_V);
      const std::string dir = tmp_path("gqa_" + layout + std::to_string(kv));
      save_hf(m, dir, parse_layout(layout));
      const auto f = SafetensorsFile::read(dir + "/model.safetensors");
      CHECK(f.at("model.layers.0.self_attn.k_proj.weight").shape == std::vector<std::int64_t>{kv * 4, 16});
      Rng rng(3);
      MatrixXd X0(7, 16);
      for (Eigen::Index j = 0; j < 16; ++j)
        for (Eigen::Index i = 0; i < 7; ++i) X0(i, j) = rng.gaussian();
      const ForwardTrace<double> t = forward<double>(load_model(dir), m.arch().variant, X0);
      const MatrixXd ref = naive_llama(dir, X0);
      test::require_matrix_near<double>(t.X.back(), ref, 64);
    }
  }
  // A group whose heads disagree is refused on construction.
  Model m = random_llama(1, 4, 2, 8, 2, 8, 5);
  std::vector<LayerWeights> layers = m.layers();
  layers[0].heads[1].W_V(0, 0) += 1;
  CHECK_THROWS_WITH(Model(m.arch(), layers), Catch::Contains("layer 0 head 1 W_K") && Catch::Contains("head 0"));
  Architecture bad = m.arch();
  bad.kv_heads = 3;
  CHECK_THROWS_WITH(Model(bad, m.layers()), Catch::Contains("kv_heads"));
}

TEST_CASE("init layouts load back with bit-identical forward passes to the native file of the same weights") {
  const Model m = random_llama(2, 4, 2, 16, 4, 24, 21, 50);
  const std::string native = tmp_path("llama_native.safetensors");
  save_native(m, native);
  const Model mn = load_model(native);
  const InputSpec in = InputSpec::from_tokens({1, 7, 3, 49, 0, 12});
  const ForwardTrace<double> ref = forward<double>(mn, mn.arch().variant, make_input<double>(mn, in));
  const ForwardTrace<R> ref_r = forward<R>(mn, mn.arch().variant, make_input<R>(mn, in));
  for (const std::string layout : {"llama", "mistral", "qwen2"}) {
    CAPTURE(layout);
    const std::string dir = tmp_path("llama_layout_" + layout);
    save_hf(m, dir, parse_layout(layout));
    const Model ml = load_model(dir);
    CHECK(ml.arch().kv_heads == 2);
    CHECK(ml.arch().norm == NormKind::rms);
    const ForwardTrace<double> t = forward<double>(ml, ml.arch().variant, make_input<double>(ml, in));
    const ForwardTrace<R> tr = forward<R>(ml, ml.arch().variant, make_input<R>(ml, in));
    for (int l = 0; l <= 2; ++l) {
      CHECK(t.X[static_cast<std::size_t>(l)] == ref.X[static_cast<std::size_t>(l)]);
      CHECK(tr.X[static_cast<std::size_t>(l)] == ref_r.X[static_cast<std::size_t>(l)]);
    }
  }
  // The family's structure is required by the writer: a BERT-style model is refused.
  RandomModelSpec s;
  s.arch.layers = 1;
  s.arch.heads = 2;
  s.arch.d_model = 8;
  s.arch.d_qk = s.arch.d_v = 4;
  s.arch.d_ff = 8;
  CHECK_THROWS_WITH(save_hf(random_model(s), tmp_path("llama_refused"), Layout::llama), Catch::Contains("RMSNorm"));
}

TEST_CASE("configurations math.md §8 does not define are refused naming the key") {
  const Model m = random_llama(1, 2, 1, 8, 4, 8, 2);
  const std::string dir = tmp_path("llama_refuse_cfg");
  save_hf(m, dir, Layout::llama);
  const json base = read_json(dir + "/config.json");
  const auto with = [&](const std::string& key, const json& v) {
    json c = base;
    c[key] = v;
    std::ofstream(dir + "/config.json") << c.dump();
  };
  with("rope_scaling", json{{"type", "linear"}, {"factor", 2.0}});
  CHECK_THROWS_WITH(load_model(dir), Catch::Contains("config.json: rope_scaling"));
  with("partial_rotary_factor", 0.5);
  CHECK_THROWS_WITH(load_model(dir), Catch::Contains("config.json: partial_rotary_factor"));
  with("hidden_act", "gelu");
  CHECK_THROWS_WITH(load_model(dir), Catch::Contains("config.json: hidden_act"));
  with("num_key_value_heads", 3);
  CHECK_THROWS_WITH(load_model(dir), Catch::Contains("config.json: num_key_value_heads"));
  // Mistral's sliding window: accepted, sequences longer than it are refused.
  json c = base;
  c["model_type"] = "mistral";
  c["sliding_window"] = 3;
  std::ofstream(dir + "/config.json") << c.dump();
  const Model mm = load_model(dir);
  MatrixXd X = MatrixXd::Ones(3, 8);
  CHECK_NOTHROW(forward<double>(mm, mm.arch().variant, Matrix<double>(X)));
  X = MatrixXd::Ones(4, 8);
  CHECK_THROWS_WITH(forward<double>(mm, mm.arch().variant, Matrix<double>(X)), Catch::Contains("sliding_window"));
}

TEST_CASE("the real TinyStories Llamas reproduce the independent float64 reference", "[real]") {
  const std::string root = shared_models_or_skip();
  if (root.empty()) return;
  for (const std::string name : {"llama-stories260k", "llama-tinystories-xs"}) {
    CAPTURE(name);
    const std::string dir = root + "/" + name;
    const Model m = load_model(dir);
    CHECK(m.arch().heads == 8);
    CHECK(m.arch().kv_heads == 4);
    CHECK(m.arch().d_qk == 8);
    REQUIRE(m.embeddings());
    // The final RMSNorm and the tied LM head, from the file and config (not the library).
    const auto f = SafetensorsFile::read(dir + "/model.safetensors");
    const Tensor& norm_t = f.at("model.norm.weight");
    const VectorXd g = Eigen::Map<const VectorXd>(norm_t.values.data(), 64);
    const double eps = read_json(dir + "/config.json")["rms_norm_eps"];
    const MatrixXd& E = m.embeddings()->word;  // vocab×d: the tied head
    const auto logits = [&](const std::vector<long>& ids) {
      const ForwardTrace<double> t =
          forward<double>(m, m.arch().variant, embed_tokens<double>(m, ids), ForwardOptions{false, {}});
      MatrixXd Y = t.X.back();
      for (Eigen::Index i = 0; i < Y.rows(); ++i)
        Y.row(i) = (Y.row(i) / std::sqrt(Y.row(i).squaredNorm() / 64 + eps)).cwiseProduct(g.transpose());
      return MatrixXd(Y * E.transpose());
    };
    const json ref = read_json(dir + "/reference_logits.json");
    const std::vector<long> ids = ref["input_ids"].get<std::vector<long>>();
    const MatrixXd Lg = logits(ids);
    const std::vector<long> argmax = ref["argmax_per_position"].get<std::vector<long>>();
    for (Eigen::Index i = 0; i < Lg.rows(); ++i) {
      Eigen::Index k = 0;
      Lg.row(i).maxCoeff(&k);
      CHECK(k == argmax[static_cast<std::size_t>(i)]);
    }
    const std::vector<double> last = ref["last_position_logits"].get<std::vector<double>>();
    REQUIRE(static_cast<Eigen::Index>(last.size()) == Lg.cols());
    double worst = 0;
    for (Eigen::Index j = 0; j < Lg.cols(); ++j)
      worst = std::max(worst, std::abs(Lg(Lg.rows() - 1, j) - last[static_cast<std::size_t>(j)]));
    CAPTURE(worst);
    CHECK(worst < 1e-5);  // the reference holds 6 decimals
    // Greedy decoding from token 1.
    const json greedy = read_json(dir + "/reference_greedy.json");
    const std::vector<long> want = greedy["greedy_ids"].get<std::vector<long>>();
    std::vector<long> seq = greedy["prompt_ids"].get<std::vector<long>>();
    while (seq.size() < want.size()) {
      const MatrixXd Lq = logits(seq);
      Eigen::Index k = 0;
      Lq.row(Lq.rows() - 1).maxCoeff(&k);
      seq.push_back(static_cast<long>(k));
    }
    CHECK(seq == want);
    // And at 257 bits the last layer agrees with double to double's rounding.
    const ForwardTrace<R> tr = forward<R>(m, m.arch().variant, embed_tokens<R>(m, ids), ForwardOptions{false, {}});
    const ForwardTrace<double> td = forward<double>(m, m.arch().variant, embed_tokens<double>(m, ids), ForwardOptions{false, {}});
    const Matrix<double> back = tr.X.back().unaryExpr([](const R& x) { return static_cast<double>(x); });
    CHECK((back - td.X.back()).cwiseAbs().maxCoeff() < 1e-10 * td.X.back().cwiseAbs().maxCoeff());
  }
}

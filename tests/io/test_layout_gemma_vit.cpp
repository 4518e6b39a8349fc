// The Gemma, Gemma 2 and ViT layouts (families.md): hand-made checkpoints
// worked out by hand (Gemma's 1 + w gains and √d embedding scale, Gemma 2's
// soft-capped and rescaled scores, sliding window and four norms, ViT's patch
// order, CLS row and positions), write/load round trips of random models bit
// for bit, and the configurations families.md §6 refuses, each naming
// config.json and its key. One file (over 600 lines) because the three
// families share its hand-made checkpoint writers and round-trip checks.
#include "support/checkpoint_helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/tensor_eigen.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/random.hpp"

#include <array>
#include <cmath>

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void write_folder(const std::string& dir, const std::vector<Tensor>& ts, const json& config) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_safetensors(dir + "/model.safetensors", ts);
  write_json(dir + "/config.json", config);
}

/// A Gemma or Gemma 2 checkpoint written tensor by tensor: weights in the
/// x·W form of math.md §1 (the file holds their torch Linear transposes),
/// every layer the same, every norm weight a constant w (gain 1 + w).
struct HandGemma {
  bool two = false;
  int layers = 1, d = 4, H = 1, Hkv = 1, dh = 2, ff = 2, vocab = 3;
  MatrixXd Wq, Wk, Wv, Wo, gate, up, down, embed;
  double in = 0, post_attn = 0, pre_ff = 0, post_ff = 0;
  json extra = json::object();  // config keys added or replaced

  void draw(std::uint64_t seed) {
    Gen g{std::mt19937_64(seed), false};
    Wq = g.mat(d, H * dh);
    Wk = g.mat(d, Hkv * dh);
    Wv = g.mat(d, Hkv * dh);
    Wo = g.mat(H * dh, d);
    gate = g.mat(d, ff);
    up = g.mat(d, ff);
    down = g.mat(ff, d);
    embed = g.mat(vocab, d);
  }
  json config() const {
    json c = {{"architectures", {two ? "Gemma2ForCausalLM" : "GemmaForCausalLM"}},
              {"model_type", two ? "gemma2" : "gemma"},
              {"num_hidden_layers", layers},
              {"num_attention_heads", H},
              {"num_key_value_heads", Hkv},
              {"hidden_size", d},
              {"head_dim", dh},
              {"intermediate_size", ff},
              {"vocab_size", vocab},
              {"hidden_act", "gelu"},  // ignored: no hidden_activation means the tanh form
              {"rms_norm_eps", 1e-6},
              {"rope_theta", 10000.0}};
    if (two) c["query_pre_attn_scalar"] = dh;
    for (auto it = extra.begin(); it != extra.end(); ++it) c[it.key()] = it.value();
    return c;
  }
  void write(const std::string& dir) const {
    std::vector<Tensor> ts;
    const auto lin = [&](const std::string& name, const MatrixXd& M) {
      ts.push_back(make_tensor(name, MatrixXd(M.transpose())));
    };
    const auto gain = [&](const std::string& name, double w) {
      ts.push_back(make_tensor(name, VectorXd(VectorXd::Constant(d, w))));
    };
    for (int l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      lin(p + "self_attn.q_proj.weight", Wq);
      lin(p + "self_attn.k_proj.weight", Wk);
      lin(p + "self_attn.v_proj.weight", Wv);
      lin(p + "self_attn.o_proj.weight", Wo);
      lin(p + "mlp.gate_proj.weight", gate);
      lin(p + "mlp.up_proj.weight", up);
      lin(p + "mlp.down_proj.weight", down);
      gain(p + "input_layernorm.weight", in);
      gain(p + "post_attention_layernorm.weight", post_attn);
      if (two) {
        gain(p + "pre_feedforward_layernorm.weight", pre_ff);
        gain(p + "post_feedforward_layernorm.weight", post_ff);
      }
    }
    ts.push_back(make_tensor("model.embed_tokens.weight", embed));
    gain("model.norm.weight", 0.5);                        // final norm: ignored
    ts.push_back(make_tensor("lm_head.weight", embed));   // ignored
    write_folder(dir, ts, config());
  }
};

HandGemma hand_gemma(bool two, int layers = 1, std::uint64_t seed = 7) {
  HandGemma g;
  g.two = two;
  g.layers = layers;
  g.draw(seed);
  return g;
}

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

/// Row-wise x / sqrt(mean(x²) + eps) · gain.
MatrixXd rms(const MatrixXd& X, double gain, double eps = 1e-6) {
  MatrixXd Y = X;
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    Y.row(i) = X.row(i) / std::sqrt(X.row(i).squaredNorm() / static_cast<double>(X.cols()) + eps) * gain;
  return Y;
}

/// The GeGLU MLP (tanh GELU), no biases.
MatrixXd geglu(const MatrixXd& Z, const HandGemma& g) {
  const MatrixXd G = Z * g.gate, U = Z * g.up;
  MatrixXd Hd(G.rows(), G.cols());
  for (Eigen::Index j = 0; j < G.cols(); ++j)
    for (Eigen::Index i = 0; i < G.rows(); ++i) Hd(i, j) = gelu_tanh(G(i, j)) * U(i, j);
  return Hd * g.down;
}

MatrixXd input_matrix(Eigen::Index n, Eigen::Index d, std::uint64_t seed) {
  Gen g{std::mt19937_64(seed), false};
  return g.mat(n, d) * 2.0;
}

Matrix<double> last(const Model& m, const Matrix<double>& X0) {
  return forward<double>(m, m.arch().variant, X0, {false}).X.back();
}

VariantOverride with_layernorm(LayerNormKind k) {
  VariantOverride o;
  o.layernorm = k;
  return o;
}

}  // namespace

// ---- Gemma ------------------------------------------------------------------------------

TEST_CASE("Gemma: norm gains are 1 + w, embeddings scaled by √d, the tanh GELU by default", "[checkpoint][hf][gemma]") {
  HandGemma g = hand_gemma(false);
  const std::string dir = fresh("gemma_hand");

  // w = −1 on both norms: the attention and MLP inputs are exactly zero.
  g.in = -1;
  g.post_attn = -1;
  g.write(dir);
  Model m = load_model(dir);
  CHECK(m.arch().norm == NormKind::rms);
  CHECK(m.arch().norm_unit_offset);
  CHECK(m.arch().activation == Activation::gelu_tanh);  // hidden_act "gelu" is ignored
  CHECK(m.arch().variant == Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal});
  CHECK(m.arch().own_norm_placement_only);
  CHECK(m.arch().rope_theta == 10000.0);
  CHECK(m.arch().ln_eps == 1e-6);
  CHECK(m.layer(0).ln1_g == VectorXd::Constant(4, -1.0));  // stored as w, not 1 + w
  CHECK(m.layer(0).ln1_b == VectorXd::Zero(4));
  REQUIRE(m.embeddings());
  CHECK(m.embeddings()->kind == Layout::gemma);

  // X^0 = √d·E[ids] = 2·E[ids] exactly (d = 4).
  const std::vector<long> ids = {2, 0, 1};
  const Matrix<double> X0 = make_input<double>(m, InputSpec::from_tokens(ids));
  REQUIRE(X0.rows() == 3);
  for (Eigen::Index i = 0; i < 3; ++i)
    for (Eigen::Index j = 0; j < 4; ++j) CHECK(X0(i, j) == 2.0 * g.embed(ids[static_cast<std::size_t>(i)], j));
  CHECK(embed_tokens<double>(m, ids) == X0);
  CHECK(last(m, X0) == X0);

  // w = 0.5 before the MLP: X^1 = X^0 + f(1.5·RMS(X^0)), worked out by hand.
  g.post_attn = 0.5;
  g.write(dir);
  m = load_model(dir);
  const MatrixXd X0d = X0;
  const MatrixXd want = X0d + geglu(rms(X0d, 1.5), g);
  test::require_matrix_near<double>(last(m, X0), want, 64);
  CHECK((last(m, X0) - X0d).cwiseAbs().maxCoeff() > 1e-3);

  // hidden_activation decides when present.
  g.extra = {{"hidden_activation", "gelu"}};
  g.write(dir);
  CHECK(load_model(dir).arch().activation == Activation::gelu);
  g.extra = {{"hidden_activation", "gelu_new"}, {"hidden_act", "relu"}};
  g.write(dir);
  CHECK(load_model(dir).arch().activation == Activation::gelu_tanh);

  // Only its own placement or none: layernorm post is refused.
  CHECK_THROWS_WITH(m.resolve(with_layernorm(LayerNormKind::post)), Catch::Contains("layernorm: post"));
  CHECK_NOTHROW(m.resolve(with_layernorm(LayerNormKind::none)));
}

TEST_CASE("Gemma: head_dim from config.json, key/value head ⌊h/(H/H_kv)⌋, with or without model.", "[checkpoint][hf][gemma]") {
  HandGemma g;
  g.d = 4;
  g.H = 4;
  g.Hkv = 2;
  g.dh = 6;  // H·d_h = 24 ≠ d
  g.ff = 5;
  g.draw(3);
  const std::string dir = fresh("gemma_gqa");
  g.write(dir);
  const Model m = load_model(dir);
  CHECK(m.arch().d_qk == 6);
  CHECK(m.arch().d_v == 6);
  CHECK(m.arch().kv_heads == 2);
  for (int h = 0; h < 4; ++h) {
    CAPTURE(h);
    const HeadWeights& hw = m.layer(0).heads[static_cast<std::size_t>(h)];
    const int kv = h / 2;
    CHECK(hw.W_Q == g.Wq.middleCols(h * 6, 6));
    CHECK(hw.W_K == g.Wk.middleCols(kv * 6, 6));
    CHECK(hw.W_V == g.Wv.middleCols(kv * 6, 6));
    CHECK(hw.W_O == g.Wo.middleRows(h * 6, 6));
    CHECK(hw.b_Q == VectorXd::Zero(6));
  }
  CHECK(m.layer(0).W_gate == g.gate);
  CHECK(m.layer(0).W_1 == g.up);
  CHECK(m.layer(0).W_2 == g.down);
  CHECK(m.layer(0).b_O == VectorXd::Zero(4));

  // A GemmaModel saved on its own: no "model." prefix, no lm_head.
  const std::string bare = fresh("gemma_bare");
  std::vector<Tensor> ts = SafetensorsFile::read(dir + "/model.safetensors").tensors();
  std::vector<Tensor> kept;
  for (Tensor t : ts) {
    if (t.name == "lm_head.weight") continue;
    t.name = t.name.substr(std::string("model.").size());
    kept.push_back(t);
  }
  write_folder(bare, kept, read_json(dir + "/config.json"));
  const Model b = load_model(bare);
  require_same_layers(b, m);
  require_same_embeddings(b, m);
}

// ---- Gemma 2 ----------------------------------------------------------------------------

TEST_CASE("Gemma 2: scores c·tanh(s·q·k/c) with s = query_pre_attn_scalar^(-1/2), by hand", "[checkpoint][hf][gemma2]") {
  HandGemma g = hand_gemma(true);
  g.d = 2;
  g.dh = 2;
  g.draw(11);
  g.Wq << 2, 0.5, -1, 1.5;
  g.Wk << 1, -0.5, 0.5, 2;
  const double c = 2.0, base = 3.0;  // base ≠ head_dim = 2
  g.extra = {{"attn_logit_softcapping", c}, {"query_pre_attn_scalar", base}};
  const std::string dir = fresh("gemma2_softcap");
  g.write(dir);
  const Model m = load_model(dir);
  CHECK(m.arch().softcap == c);
  CHECK(m.arch().score_scale_base == base);
  CHECK(m.arch().sandwich_norms);
  CHECK(m.arch().attention_window == 4096);
  CHECK(m.embeddings()->kind == Layout::gemma2);

  MatrixXd X0(3, 2);
  X0 << 1.5, -0.5, 0.75, 2, -1.25, 1;
  // The SAN keeps the rotary, scale, cap and mask; its input is X0 itself.
  const ForwardTrace<double> t = forward<double>(m, Variant::san(MaskKind::causal), Matrix<double>(X0));
  const MatrixXd& P = t.P.at(0).at(0);

  // d_h = 2: one rotary pair, θ_0 = 1, position p rotates by p radians.
  const auto rotated = [](const Eigen::RowVectorXd& v, double p) {
    Eigen::RowVectorXd r(2);
    r << v(0) * std::cos(p) - v(1) * std::sin(p), v(1) * std::cos(p) + v(0) * std::sin(p);
    return r;
  };
  const auto probabilities = [&](double s, std::optional<double> cap) {
    MatrixXd Pw = MatrixXd::Zero(3, 3);
    for (int i = 0; i < 3; ++i) {
      const Eigen::RowVectorXd q = rotated(X0.row(i) * g.Wq, i);
      std::vector<double> a;
      for (int j = 0; j <= i; ++j) {
        const double logit = s * q.dot(rotated(X0.row(j) * g.Wk, j));
        a.push_back(cap ? *cap * std::tanh(logit / *cap) : logit);
      }
      const double top = *std::max_element(a.begin(), a.end());
      double sum = 0;
      for (double& x : a) sum += (x = std::exp(x - top));
      for (int j = 0; j <= i; ++j) Pw(i, j) = a[static_cast<std::size_t>(j)] / sum;
    }
    return Pw;
  };
  const MatrixXd want = probabilities(1 / std::sqrt(base), c);
  test::require_matrix_near<double>(P, want, 64);
  // The test tells the cap and the scale apart.
  CHECK((want - probabilities(1 / std::sqrt(base), std::nullopt)).cwiseAbs().maxCoeff() > 1e-2);
  CHECK((want - probabilities(1 / std::sqrt(2.0), c)).cwiseAbs().maxCoeff() > 1e-3);

  // attn_logit_softcapping null: no cap.
  g.extra["attn_logit_softcapping"] = nullptr;
  g.write(dir);
  const Model nc = load_model(dir);
  CHECK(!nc.arch().softcap);
  const ForwardTrace<double> u = forward<double>(nc, Variant::san(MaskKind::causal), Matrix<double>(X0));
  test::require_matrix_near<double>(u.P.at(0).at(0), probabilities(1 / std::sqrt(base), std::nullopt), 64);
}

TEST_CASE("Gemma 2: the sliding window applies on sliding layers only, under the causal mask", "[checkpoint][hf][gemma2]") {
  HandGemma g = hand_gemma(true, 2, 13);
  g.H = 2;
  g.Hkv = 1;
  g.draw(13);
  g.extra = {{"sliding_window", 2}};
  const std::string dir = fresh("gemma2_window");
  const MatrixXd X0 = input_matrix(4, g.d, 5);
  // Whether every P of `layer` has the window's zeros (j ≤ i − 2) and no other.
  const auto check_layer = [&](const ForwardTrace<double>& t, int layer, bool window, bool causal) {
    for (const MatrixXd& P : t.P.at(static_cast<std::size_t>(layer)))
      for (Eigen::Index i = 0; i < 4; ++i)
        for (Eigen::Index j = 0; j < 4; ++j) {
          CAPTURE(layer, i, j, P(i, j));
          const bool hidden = (causal && j > i) || (window && causal && j <= i - 2);
          if (hidden)
            CHECK(P(i, j) == 0);
          else
            CHECK(P(i, j) > 0);
        }
  };
  SECTION("without layer_types: even layers slide") {
    g.write(dir);
    const Model m = load_model(dir);
    CHECK(m.arch().attention_window == 2);
    CHECK(m.arch().window_layers == std::vector<bool>{true, false});
    const ForwardTrace<double> t = forward<double>(m, m.arch().variant, Matrix<double>(X0));
    check_layer(t, 0, true, true);
    check_layer(t, 1, false, true);
    // mask none: neither the causal mask nor the window.
    VariantOverride o;
    o.mask = MaskKind::none;
    const ForwardTrace<double> n = forward<double>(m, m.resolve(o), Matrix<double>(X0));
    check_layer(n, 0, true, false);
    check_layer(n, 1, false, false);
  }
  SECTION("layer_types decides") {
    g.extra["layer_types"] = {"full_attention", "sliding_attention"};
    g.write(dir);
    const Model m = load_model(dir);
    CHECK(m.arch().window_layers == std::vector<bool>{false, true});
    const ForwardTrace<double> t = forward<double>(m, m.arch().variant, Matrix<double>(X0));
    check_layer(t, 0, false, true);
    check_layer(t, 1, true, true);
  }
  SECTION("sliding_window null: no window") {
    g.extra["sliding_window"] = nullptr;
    g.write(dir);
    const Model m = load_model(dir);
    CHECK(m.arch().attention_window == 0);
    CHECK(m.arch().window_layers.empty());
    const ForwardTrace<double> t = forward<double>(m, m.arch().variant, Matrix<double>(X0));
    check_layer(t, 0, false, true);
    check_layer(t, 1, false, true);
  }
}

TEST_CASE("Gemma 2: four norms, post_attention_layernorm on the attention output", "[checkpoint][hf][gemma2]") {
  HandGemma g = hand_gemma(true, 1, 17);
  const std::string dir = fresh("gemma2_norms");
  const MatrixXd X0 = input_matrix(3, g.d, 9);
  const auto run = [&](double in, double post_attn, double pre_ff, double post_ff) {
    g.in = in;
    g.post_attn = post_attn;
    g.pre_ff = pre_ff;
    g.post_ff = post_ff;
    g.write(dir);
    const Model m = load_model(dir);
    return MatrixXd(last(m, Matrix<double>(X0)));
  };
  // Gain 0 after the attention kills its branch; gain 0 after the MLP (or
  // before it: f(0) = 0) kills the MLP's.
  CHECK(run(0, -1, 0, -1) == X0);
  CHECK(run(0, -1, -1, 0) == X0);
  // Attention killed after it (post_attention) or before it (input):
  // X^1 = X^0 + RMS(f(RMS(X^0)·1.5))·1.25.
  const MatrixXd after = run(0, -1, 0.5, 0.25), before = run(-1, 0, 0.5, 0.25);
  const MatrixXd want = X0 + rms(geglu(rms(X0, 1.5), g), 1.25);
  test::require_matrix_near<double>(after, want, 64);
  CHECK(before == after);
  // Either branch alone is alive (the checks above are not vacuous). Read as
  // Gemma 1 reads it (post_attention_layernorm before the MLP), the first
  // check would have kept the attention branch.
  CHECK((run(0, 0, 0, -1) - X0).cwiseAbs().maxCoeff() > 1e-3);
  CHECK((run(0, -1, 0, 0.25) - X0).cwiseAbs().maxCoeff() > 1e-3);
}

// ---- ViT --------------------------------------------------------------------------------

TEST_CASE("ViT: X^0 is [cls; patches row-major] + positions, pixels channel-first", "[checkpoint][hf][vit]") {
  for (const int C : {1, 2}) {
    CAPTURE(C);
    const int d = 2, S = 4, p = 2, ff = 3, n = 5;
    Gen g{std::mt19937_64(5), false};
    const std::string v = "vit.";
    std::vector<Tensor> ts;
    const std::vector<double> cls = {0.5, -0.75};
    RowMajor pos(n, d);
    for (int k = 0; k < n; ++k) {
      pos(k, 0) = 0.25 * k;
      pos(k, 1) = -0.125 * k - 1;
    }
    // Output 0 reads pixel (c = C−1, i = 0, j = 1) of its patch, output 1 (c = 0, i = 1, j = 0).
    RowMajor W = RowMajor::Zero(d, C * p * p);
    W(0, (C - 1) * p * p + 0 * p + 1) = 1;
    W(1, 0 * p * p + 1 * p + 0) = 1;
    const std::vector<double> b = {100, 200};
    ts.push_back(Tensor{v + "embeddings.cls_token", "F64", {1, 1, d}, cls});
    ts.push_back(Tensor{v + "embeddings.position_embeddings", "F64", {1, n, d},
                        std::vector<double>(pos.data(), pos.data() + pos.size())});
    ts.push_back(Tensor{v + "embeddings.patch_embeddings.projection.weight", "F64", {d, C, p, p},
                        std::vector<double>(W.data(), W.data() + W.size())});
    ts.push_back(Tensor{v + "embeddings.patch_embeddings.projection.bias", "F64", {d}, b});
    const std::string l = v + "encoder.layer.0.";
    for (const char* name : {"query", "key", "value"})  // qkv_bias false: no biases
      ts.push_back(make_tensor(l + "attention.attention." + name + ".weight", g.mat(d, d)));
    ts.push_back(make_tensor(l + "attention.output.dense.weight", g.mat(d, d)));
    ts.push_back(make_tensor(l + "attention.output.dense.bias", g.vec(d)));
    ts.push_back(make_tensor(l + "intermediate.dense.weight", g.mat(ff, d)));
    ts.push_back(make_tensor(l + "intermediate.dense.bias", g.vec(ff)));
    ts.push_back(make_tensor(l + "output.dense.weight", g.mat(d, ff)));
    ts.push_back(make_tensor(l + "output.dense.bias", g.vec(d)));
    for (const char* name : {"layernorm_before", "layernorm_after"}) {
      ts.push_back(make_tensor(l + name + ".weight", g.vec(d)));
      ts.push_back(make_tensor(l + name + ".bias", g.vec(d)));
    }
    ts.push_back(make_tensor(v + "layernorm.weight", g.vec(d)));  // unused
    ts.push_back(make_tensor(v + "layernorm.bias", g.vec(d)));
    ts.push_back(make_tensor("classifier.weight", g.mat(3, d)));
    ts.push_back(make_tensor("classifier.bias", g.vec(3)));
    const json config = {{"architectures", {"ViTForImageClassification"}},
                         {"model_type", "vit"},
                         {"hidden_size", d},
                         {"num_hidden_layers", 1},
                         {"num_attention_heads", 1},
                         {"intermediate_size", ff},
                         {"image_size", S},
                         {"patch_size", p},
                         {"num_channels", C},
                         {"qkv_bias", false}};
    const std::string dir = fresh("vit_hand");
    write_folder(dir, ts, config);
    const Model m = load_model(dir);
    CHECK(m.arch().variant == Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none});
    CHECK(m.arch().activation == Activation::gelu);
    CHECK(m.arch().ln_eps == 1e-12);
    CHECK(m.arch().norm == NormKind::layer);
    CHECK(!m.arch().own_norm_placement_only);
    CHECK(m.layer(0).heads[0].b_K == VectorXd::Zero(d));
    REQUIRE(m.embeddings());
    const Embeddings& e = *m.embeddings();
    CHECK(e.kind == Layout::vit);
    CHECK(e.image_size == S);
    CHECK(e.patch_size == p);
    CHECK(e.channels == C);
    CHECK(e.patch(0, (C - 1) * 4 + 1) == 1);  // column c·p² + i·p + j

    // Pixel [c, y, x] = 100c + 10y + x.
    std::vector<double> px;
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x) px.push_back(100.0 * c + 10.0 * y + x);
    const auto pixel = [&](int c, int y, int x) { return px[static_cast<std::size_t>((c * S + y) * S + x)]; };
    const InputSpec image = InputSpec::from_pixels(px, {C, S, S}, "test");
    const Matrix<double> X0 = make_input<double>(m, image);
    REQUIRE(X0.rows() == n);
    REQUIRE(X0.cols() == d);
    CHECK(image.rows(&m) == n);
    CHECK(X0(0, 0) == cls[0] + pos(0, 0));
    CHECK(X0(0, 1) == cls[1] + pos(0, 1));
    for (int r = 0; r < 2; ++r)
      for (int s = 0; s < 2; ++s) {
        const int k = r * 2 + s;
        CAPTURE(r, s);
        CHECK(X0(1 + k, 0) == (b[0] + pixel(C - 1, 2 * r, 2 * s + 1)) + pos(1 + k, 0));
        CHECK(X0(1 + k, 1) == (b[1] + pixel(0, 2 * r + 1, 2 * s)) + pos(1 + k, 1));
      }
    // No mask: every attention entry positive.
    const ForwardTrace<double> t = forward<double>(m, m.arch().variant, X0);
    CHECK((t.P.at(0).at(0).array() > 0).all());
    // Post-LN is defined for ViT (families.md §5).
    CHECK_NOTHROW(m.resolve(with_layernorm(LayerNormKind::post)));

    // Images of another size or channel count, and token ids, are refused.
    std::vector<double> big(static_cast<std::size_t>(C * 36), 0.0);
    require_error([&] { make_input<double>(m, InputSpec::from_pixels(big, {C, 6, 6}, "test")); }, "test",
                  "pixel_values", {"image_size"});
    std::vector<double> more(static_cast<std::size_t>((C + 1) * 16), 0.0);
    require_error([&] { make_input<double>(m, InputSpec::from_pixels(more, {C + 1, S, S}, "test")); }, "test",
                  "pixel_values", {"num_channels"});
    CHECK_THROWS_WITH(make_input<double>(m, InputSpec::from_tokens({1, 2})), Catch::Contains("tokens"));

    // config.json: a square list is an image size; a non-square one is refused.
    json square = config;
    square["image_size"] = {S, S};
    write_json(dir + "/config.json", square);
    CHECK(load_model(dir).embeddings()->image_size == S);
    json wide = config;
    wide["image_size"] = {S, S + 2};
    write_json(dir + "/config.json", wide);
    require_error([&] { load_model(dir); }, dir + "/config.json", "image_size", {"square"});
    wide = config;
    wide["patch_size"] = {2, 1};
    write_json(dir + "/config.json", wide);
    require_error([&] { load_model(dir); }, dir + "/config.json", "patch_size", {"square"});
    // A position table of another length than ⌊S/p⌋² + 1.
    json other = config;
    other["image_size"] = 6;
    write_json(dir + "/config.json", other);
    CHECK_THROWS_WITH(load_model(dir), Catch::Contains("position_embeddings") && Catch::Contains("[1, 10, 2]"));
    other = config;
    other["hidden_act"] = "silu";
    write_json(dir + "/config.json", other);
    require_error([&] { load_model(dir); }, dir + "/config.json", "hidden_act");
  }
}

// ---- round trips ------------------------------------------------------------------------

namespace {

/// `m` with every norm gain (and LayerNorm bias) drawn, so that a swapped
/// norm cannot go unnoticed, and embeddings `emb`.
Model with_drawn_norms(const Model& m, const Architecture& a, std::optional<Embeddings> emb, std::uint64_t seed,
                       bool biases) {
  Gen g{std::mt19937_64(seed), false};
  std::vector<LayerWeights> layers = m.layers();
  const Eigen::Index d = a.d_model;
  for (LayerWeights& w : layers) {
    w.ln1_g = g.vec(d);
    w.ln2_g = g.vec(d);
    if (biases) {
      w.ln1_b = g.vec(d);
      w.ln2_b = g.vec(d);
    }
    if (a.sandwich_norms) {
      w.ln3_g = g.vec(d);
      w.ln4_g = g.vec(d);
    }
  }
  return Model(a, layers, std::move(emb), "round trip");
}

void require_same_extras(const Model& x, const Model& y) {
  require_same_arch(x.arch(), y.arch());
  const Architecture &a = x.arch(), &b = y.arch();
  CHECK(a.norm_unit_offset == b.norm_unit_offset);
  CHECK(a.score_scale_base == b.score_scale_base);
  CHECK(a.softcap == b.softcap);
  CHECK(a.sandwich_norms == b.sandwich_norms);
  CHECK(a.window_layers == b.window_layers);
  CHECK(a.rotary_dims == b.rotary_dims);
  CHECK(a.own_norm_placement_only == b.own_norm_placement_only);
  require_same_layers(x, y);
  for (int l = 0; l < a.layers; ++l) {
    require_same(x.layer(l).ln3_g, y.layer(l).ln3_g, "ln3_g");
    require_same(x.layer(l).ln4_g, y.layer(l).ln4_g, "ln4_g");
  }
  require_same_embeddings(x, y);
  if (x.embeddings()) {
    const Embeddings &e = *x.embeddings(), &f = *y.embeddings();
    require_same(e.patch, f.patch, "patch");
    require_same(e.patch_b, f.patch_b, "patch_b");
    require_same(e.cls, f.cls, "cls");
    CHECK(e.image_size == f.image_size);
    CHECK(e.patch_size == f.patch_size);
    CHECK(e.channels == f.channels);
  }
}

RandomModelSpec gemma_spec(std::uint64_t seed) {
  RandomModelSpec s;
  s.arch.layers = 3;
  s.arch.heads = 4;
  s.arch.kv_heads = 2;
  s.arch.d_model = 8;
  s.arch.d_qk = s.arch.d_v = 6;  // ≠ d/H
  s.arch.d_ff = 12;
  s.arch.activation = Activation::gelu_tanh;
  s.arch.ln_eps = 1e-6;
  s.std = 0.3;
  s.bias_std = 0.1;
  s.seed = seed;
  return s;
}

Model random_gemma(RandomModelSpec s, Layout layout, std::uint64_t seed) {
  RandomModelSpec base = s;
  base.arch.sandwich_norms = false;  // the ln3/ln4 gains are drawn below
  const Model m0 = random_model(base);
  Gen g{std::mt19937_64(seed + 100), false};
  Embeddings e;
  e.kind = layout;
  e.word = g.mat(20, s.arch.d_model);
  e.ln_eps = s.arch.ln_eps;  // the loader gives the embeddings the model's epsilon
  return with_drawn_norms(m0, s.arch, e, seed, false);
}

}  // namespace

TEST_CASE("Gemma and Gemma 2: written and loaded back bit for bit", "[checkpoint][hf][gemma][gemma2]") {
  struct Case {
    Layout layout;
    FamilyOptions o;
    const char* name;
  };
  FamilyOptions windowed, unwindowed;
  windowed.sliding_window = 3;
  windowed.softcap = 0;
  windowed.query_pre_attn_scalar = 10;
  unwindowed.sliding_window = 0;
  unwindowed.softcap = 30;
  for (const Case& c : {Case{Layout::gemma, {}, "gemma"}, Case{Layout::gemma2, {}, "gemma2 defaults"},
                        Case{Layout::gemma2, windowed, "gemma2 window 3, no cap"},
                        Case{Layout::gemma2, unwindowed, "gemma2 no window, cap 30"}}) {
    CAPTURE(c.name);
    RandomModelSpec s = gemma_spec(31);
    family_structure(c.layout, s, c.o);
    CHECK(s.arch.norm_unit_offset);
    CHECK(s.arch.gated_mlp);
    CHECK(s.arch.own_norm_placement_only);
    CHECK(s.arch.rope_theta == 10000.0);
    CHECK(s.arch.activation == Activation::gelu_tanh);  // the user's, kept
    CHECK(s.arch.sandwich_norms == (c.layout == Layout::gemma2));
    const Model m = random_gemma(s, c.layout, 31);
    if (c.layout == Layout::gemma2) {
      CHECK(m.arch().score_scale_base == (c.o.query_pre_attn_scalar ? 10.0 : 6.0));
      const double cap = c.o.softcap.value_or(50.0);
      CHECK(m.arch().softcap == (cap > 0 ? std::optional<double>(cap) : std::nullopt));
      if (c.o.sliding_window == 3) CHECK(m.arch().window_layers == std::vector<bool>{true, false, true});
    }
    const std::string dir = fresh("gemma_round_trip");
    save_hf(m, dir, c.layout, "F64");
    const json cfg = read_json(dir + "/config.json");
    CHECK(cfg.at("model_type") == to_string(c.layout));
    CHECK(cfg.at("head_dim") == 6);
    CHECK(cfg.at("attention_bias") == true);
    const Model b = load_model(dir);
    require_same_extras(b, m);
    const InputSpec in = InputSpec::from_tokens({2, 19, 0, 7, 7, 11});
    const ForwardTrace<double> x = forward<double>(m, m.arch().variant, make_input<double>(m, in));
    const ForwardTrace<double> y = forward<double>(b, b.arch().variant, make_input<double>(b, in));
    for (std::size_t l = 0; l < x.X.size(); ++l) CHECK(x.X[l] == y.X[l]);
    // Streamed, and the first layers only.
    LoadOptions streamed;
    streamed.layers = LoadOptions::Layers::streamed;
    const Model st = load_model(dir, streamed);
    CHECK(forward<double>(st, st.arch().variant, make_input<double>(st, in), {false}).X.back() == x.X.back());
    LoadOptions first;
    first.first_layers = 2;
    const Model fl = load_model(dir, first);
    CHECK(fl.arch().layers == 2);
    CHECK(forward<double>(fl, fl.arch().variant, make_input<double>(fl, in), {false}).X.back() == x.X[2]);
  }
  // The writer refuses what the layout cannot hold.
  RandomModelSpec s = gemma_spec(4);
  family_structure(Layout::gemma, s, {});
  const Model m = random_gemma(s, Layout::gemma, 4);
  require_error([&] { save_hf(m, fresh("gemma_as_gemma2"), Layout::gemma2); }, fresh("gemma_as_gemma2"),
                "sandwich_norms");
  require_error([&] { save_hf(m, fresh("gemma_as_vit"), Layout::vit); }, fresh("gemma_as_vit"), "d_qk");
  // Option values the family refuses, and options it does not have.
  RandomModelSpec t = gemma_spec(4);
  FamilyOptions bad;
  bad.sliding_window = -1;
  CHECK_THROWS_WITH(family_structure(Layout::gemma2, t, bad), Catch::StartsWith("sliding_window:"));
  bad = {};
  bad.softcap = 50;
  CHECK_THROWS_WITH(family_structure(Layout::gemma, t, bad), Catch::StartsWith("softcap:"));
}

TEST_CASE("ViT: written and loaded back bit for bit", "[checkpoint][hf][vit]") {
  for (const double bias_std : {0.0, 0.1}) {
    CAPTURE(bias_std);
    RandomModelSpec s;
    s.arch.layers = 2;
    s.arch.heads = 2;
    s.arch.d_model = 8;
    s.arch.d_qk = s.arch.d_v = 4;
    s.arch.d_ff = 12;
    s.arch.activation = Activation::gelu;
    s.arch.ln_eps = 1e-12;
    s.std = 0.3;
    s.bias_std = bias_std;
    s.seed = 8;
    s.embeddings = Layout::vit;
    FamilyOptions o;
    o.image_size = 8;
    o.patch_size = 4;
    o.channels = 2;
    family_structure(Layout::vit, s, o);
    CHECK(s.image_size == 8);
    CHECK(s.patch_size == 4);
    CHECK(s.channels == 2);
    CHECK(s.arch.variant == Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none});
    CHECK(!s.arch.own_norm_placement_only);
    const Model m0 = random_model(s);
    Gen g{std::mt19937_64(99), false};
    Embeddings e;
    e.kind = Layout::vit;
    e.image_size = 8;
    e.patch_size = 4;
    e.channels = 2;
    e.patch = g.mat(8, 2 * 16);
    e.patch_b = g.vec(8);
    e.cls = g.vec(8);
    e.position = g.mat(5, 8);
    e.ln_eps = m0.arch().ln_eps;
    const Model m = with_drawn_norms(m0, m0.arch(), e, 9, true);
    const std::string dir = fresh("vit_round_trip");
    save_hf(m, dir, Layout::vit, "F64");
    const json cfg = read_json(dir + "/config.json");
    CHECK(cfg.at("architectures") == json{"ViTModel"});
    CHECK(cfg.at("qkv_bias") == (bias_std > 0));
    const auto file = SafetensorsFile::read(dir + "/model.safetensors");
    CHECK(file.at("embeddings.cls_token").shape == std::vector<std::int64_t>{1, 1, 8});
    CHECK(file.at("embeddings.position_embeddings").shape == std::vector<std::int64_t>{1, 5, 8});
    CHECK(file.at("embeddings.patch_embeddings.projection.weight").shape == std::vector<std::int64_t>{8, 2, 4, 4});
    CHECK((file.find("encoder.layer.0.attention.attention.query.bias") != nullptr) == (bias_std > 0));
    const Model b = load_model(dir);
    require_same_extras(b, m);
    std::vector<double> px;
    Gen pg{std::mt19937_64(3), false};
    for (int k = 0; k < 2 * 8 * 8; ++k) px.push_back(pg.next());
    const InputSpec in = InputSpec::from_pixels(px, {2, 8, 8}, "image");
    const ForwardTrace<double> x = forward<double>(m, m.arch().variant, make_input<double>(m, in));
    const ForwardTrace<double> y = forward<double>(b, b.arch().variant, make_input<double>(b, in));
    for (std::size_t l = 0; l < x.X.size(); ++l) CHECK(x.X[l] == y.X[l]);
    LoadOptions streamed;
    streamed.layers = LoadOptions::Layers::streamed;
    const Model st = load_model(dir, streamed);
    CHECK(forward<double>(st, st.arch().variant, make_input<double>(st, in), {false}).X.back() == x.X.back());
  }
  RandomModelSpec s;
  FamilyOptions o;
  o.image_size = 8;
  o.patch_size = 16;
  CHECK_THROWS_WITH(family_structure(Layout::vit, s, o), Catch::StartsWith("patch_size:"));
}

// ---- refusals ---------------------------------------------------------------------------

TEST_CASE("Gemma and Gemma 2: configurations families.md §6 refuses, naming config.json and the key", "[checkpoint][hf][gemma][gemma2]") {
  for (const bool two : {false, true}) {
    CAPTURE(two);
    HandGemma g = hand_gemma(two, 2, 21);
    g.H = 4;
    g.Hkv = 2;
    g.draw(21);
    const std::string dir = fresh("gemma_refusals");
    g.write(dir);
    const json base = read_json(dir + "/config.json");
    const std::string cfg = dir + "/config.json";
    const auto refused = [&](const std::string& key, const json& value, const std::string& part = "") {
      CAPTURE(key, value.dump());
      json c = base;
      if (value.is_discarded())
        c.erase(key);
      else
        c[key] = value;
      write_json(cfg, c);
      require_error([&] { load_model(dir); }, cfg, key, {part});
    };
    refused("rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}});
    refused("rope_parameters", {{"rope_type", "yarn"}, {"rope_theta", 10000.0}}, "yarn");
    refused("partial_rotary_factor", 0.5);
    refused("head_dim", 3, "odd");
    refused("use_bidirectional_attention", true);
    refused("hidden_activation", "relu", "relu");
    refused("num_key_value_heads", 3);
    refused("layer_types", {"full_attention"}, "1 entries");
    refused("layer_types", {"full_attention", "chunked_attention"}, "chunked_attention");
    refused("num_attention_heads", json(json::value_t::discarded), "missing");
    refused("head_dim", json(json::value_t::discarded), "missing");
    if (two)
      refused("query_pre_attn_scalar", json(json::value_t::discarded), "missing");
    else
      refused("layer_types", {"sliding_attention", "full_attention"}, "sliding");
    refused("model_type", two ? "gemma3n" : "recurrent_gemma", "not a layout");  // gemma3, gemma3_text: layout_gemma3.cpp
    // rope_parameters of the default type: its rope_theta is θ.
    json c = base;
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500.0}};
    write_json(cfg, c);
    CHECK(load_model(dir).arch().rope_theta == 500.0);
    // Null keys are absent ones: rope_scaling null, hidden_activation null.
    c = base;
    c["rope_scaling"] = nullptr;
    c["hidden_activation"] = nullptr;
    write_json(cfg, c);
    CHECK(load_model(dir).arch().activation == Activation::gelu_tanh);
  }
}

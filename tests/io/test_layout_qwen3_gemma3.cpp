// The Qwen3 and Gemma 3 layouts (families.md, "Qwen3 and Gemma 3 (text) —
// query/key norms"): hand-made checkpoints whose every tensor differs, read
// into their per-head slots and the query/key norm gains; the config keys
// with their defaults, Gemma 3's layer pattern, both rotary bases and the
// linear factor, a multimodal gemma3 file's language model; F16/BF16 and
// sharded files; write/load round trips bit for bit (one file, sharded,
// streamed, first layers, native); every refusal of families.md §6, one line
// naming config.json and its key; and every pass accepting what was read
// (their numbers: tests/compute/test_query_key_norm.cpp).
#include "support/checkpoint_helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/tensor_eigen.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/random.hpp"

#include <cstring>

namespace {

using sanpath::test::error_of;
using sanpath::test::fresh;
using sanpath::test::Gen;
using sanpath::test::read_json;
using sanpath::test::require_error;
using sanpath::test::write_json;

/// The tensors of `ts` written to `path` in `dtype` (F64, F32, F16 or BF16).
/// Every value must be exact in the dtype (the hand-made weights below are
/// multiples of 1/64 below 4 in magnitude): F16 and BF16 keep the top bits of
/// the float, which is then exact.
void write_in(const std::string& path, const std::vector<Tensor>& ts, const std::string& dtype) {
  if (dtype == "F64" || dtype == "F32") {
    std::vector<Tensor> out = ts;
    for (Tensor& t : out) t.dtype = dtype;
    write_safetensors(path, out, {{"format", "pt"}});
    return;
  }
  json h = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const Tensor& t : ts) {
    const std::size_t begin = data.size();
    for (const double v : t.values) {
      const float f = static_cast<float>(v);
      REQUIRE(static_cast<double>(f) == v);
      std::uint32_t u;
      std::memcpy(&u, &f, 4);
      std::uint16_t half = static_cast<std::uint16_t>(u >> 16);  // BF16: the upper half
      if (dtype == "F16") {
        // Normal numbers: sign, exponent rebiased from 127 to 15, the top 10 mantissa bits.
        const std::uint32_t exponent = (u >> 23) & 0xff;
        half = v == 0 ? 0
                      : static_cast<std::uint16_t>(((u >> 16) & 0x8000) | ((exponent - 127 + 15) << 10) |
                                                   ((u >> 13) & 0x3ff));
        REQUIRE((u & 0x1fff) == 0);
      } else {
        REQUIRE((u & 0xffff) == 0);
      }
      data.append(reinterpret_cast<const char*>(&half), 2);
    }
    h[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t len = text.size();
  std::memcpy(out.data(), &len, 8);  // little-endian hosts, as the CI
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out << text << data;
}

/// Values that every dtype holds exactly: multiples of 1/64 in (−2, 2), never 0.
struct Exact {
  std::mt19937_64 rng;
  double next() {
    const long k = static_cast<long>(rng() % 255) - 127;  // −127..127
    return (k == 0 ? 1.0 : static_cast<double>(k)) / 64.0;
  }
  MatrixXd mat(Eigen::Index r, Eigen::Index c) {
    MatrixXd m(r, c);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = next();
    return m;
  }
  VectorXd vec(Eigen::Index n) { return mat(n, 1); }
};

/// One layer of a hand-made checkpoint, in the x·W form of math.md §1 (the
/// file holds the torch Linear transposes).
struct HandLayer {
  MatrixXd Wq, Wk, Wv, Wo, gate, up, down;
  VectorXd bq, bk, bv, bo, q_norm, k_norm, in, post_attn, pre_ff, post_ff;
};

/// A Qwen3 or Gemma 3 checkpoint written tensor by tensor: every weight of
/// every layer drawn apart, so that a tensor read into the wrong slot, head
/// or layer cannot go unnoticed.
struct Hand {
  bool gemma3 = false;
  int layers = 2, d = 4, H = 4, Hkv = 2, dh = 4, ff = 3, vocab = 6;
  bool bias = false;
  std::vector<HandLayer> w;
  MatrixXd embed;
  json extra = json::object();  // config keys added or replaced (null values kept)
  std::vector<std::string> drop;  // config keys removed

  void draw(std::uint64_t seed) {
    Exact g{std::mt19937_64(seed)};
    w.assign(static_cast<std::size_t>(layers), {});
    for (HandLayer& x : w) {
      x.Wq = g.mat(d, H * dh);
      x.Wk = g.mat(d, Hkv * dh);
      x.Wv = g.mat(d, Hkv * dh);
      x.Wo = g.mat(H * dh, d);
      x.bq = g.vec(H * dh);
      x.bk = g.vec(Hkv * dh);
      x.bv = g.vec(Hkv * dh);
      x.bo = g.vec(d);
      x.q_norm = g.vec(dh);
      x.k_norm = g.vec(dh);
      x.gate = g.mat(d, ff);
      x.up = g.mat(d, ff);
      x.down = g.mat(ff, d);
      x.in = g.vec(d);
      x.post_attn = g.vec(d);
      x.pre_ff = g.vec(d);
      x.post_ff = g.vec(d);
    }
    embed = g.mat(vocab, d);
  }
  json text_config() const {
    json c = {{"num_hidden_layers", layers}, {"num_attention_heads", H}, {"num_key_value_heads", Hkv},
              {"hidden_size", d},           {"head_dim", dh},           {"intermediate_size", ff},
              {"vocab_size", vocab}};
    if (gemma3) c["query_pre_attn_scalar"] = dh;
    if (bias) c["attention_bias"] = true;
    for (auto it = extra.begin(); it != extra.end(); ++it) c[it.key()] = it.value();
    for (const std::string& k : drop) c.erase(k);
    return c;
  }
  json config() const {
    json c = text_config();
    c["model_type"] = gemma3 ? "gemma3_text" : "qwen3";
    c["architectures"] = {gemma3 ? "Gemma3ForCausalLM" : "Qwen3ForCausalLM"};
    for (const std::string& k : drop) c.erase(k);
    return c;
  }
  std::vector<Tensor> tensors(const std::string& prefix = "model.") const {
    std::vector<Tensor> ts;
    const auto lin = [&](const std::string& name, const MatrixXd& M) {
      ts.push_back(make_tensor(name, MatrixXd(M.transpose())));
    };
    const auto vec = [&](const std::string& name, const VectorXd& v) { ts.push_back(make_tensor(name, v)); };
    for (int l = 0; l < layers; ++l) {
      const HandLayer& x = w[static_cast<std::size_t>(l)];
      const std::string p = prefix + "layers." + std::to_string(l) + ".";
      lin(p + "self_attn.q_proj.weight", x.Wq);
      lin(p + "self_attn.k_proj.weight", x.Wk);
      lin(p + "self_attn.v_proj.weight", x.Wv);
      lin(p + "self_attn.o_proj.weight", x.Wo);
      if (bias) {
        vec(p + "self_attn.q_proj.bias", x.bq);
        vec(p + "self_attn.k_proj.bias", x.bk);
        vec(p + "self_attn.v_proj.bias", x.bv);
        vec(p + "self_attn.o_proj.bias", x.bo);
      }
      vec(p + "self_attn.q_norm.weight", x.q_norm);
      vec(p + "self_attn.k_norm.weight", x.k_norm);
      lin(p + "mlp.gate_proj.weight", x.gate);
      lin(p + "mlp.up_proj.weight", x.up);
      lin(p + "mlp.down_proj.weight", x.down);
      vec(p + "input_layernorm.weight", x.in);
      vec(p + "post_attention_layernorm.weight", x.post_attn);
      if (gemma3) {
        vec(p + "pre_feedforward_layernorm.weight", x.pre_ff);
        vec(p + "post_feedforward_layernorm.weight", x.post_ff);
      }
    }
    ts.push_back(make_tensor(prefix + "embed_tokens.weight", embed));
    vec(prefix + "norm.weight", VectorXd::Constant(d, 0.5));  // final norm: ignored
    return ts;
  }
  void write(const std::string& dir, const std::string& dtype = "F64") const {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::vector<Tensor> ts = tensors();
    ts.push_back(make_tensor("lm_head.weight", embed));  // ignored
    write_in(dir + "/model.safetensors", ts, dtype);
    write_json(dir + "/config.json", config());
  }
};

Hand hand(bool gemma3, std::uint64_t seed = 7) {
  Hand h;
  h.gemma3 = gemma3;
  h.draw(seed);
  return h;
}

/// Every tensor of `h` where families.md's per-head table (§4) puts it.
void require_slots(const Model& m, const Hand& h) {
  const int dh = h.dh, group = h.H / h.Hkv;
  REQUIRE(m.arch().layers == h.layers);
  for (int l = 0; l < h.layers; ++l) {
    CAPTURE(l);
    const HandLayer& x = h.w[static_cast<std::size_t>(l)];
    const LayerWeights& w = m.layer(l);
    for (int hd = 0; hd < h.H; ++hd) {
      CAPTURE(hd);
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(hd)];
      const int g = hd / group;  // ⌊h / (H/H_kv)⌋
      CHECK(hw.W_Q == x.Wq.middleCols(hd * dh, dh));
      CHECK(hw.W_K == x.Wk.middleCols(g * dh, dh));
      CHECK(hw.W_V == x.Wv.middleCols(g * dh, dh));
      CHECK(hw.W_O == x.Wo.middleRows(hd * dh, dh));
      CHECK(hw.b_Q == (h.bias ? VectorXd(x.bq.segment(hd * dh, dh)) : VectorXd::Zero(dh)));
      CHECK(hw.b_K == (h.bias ? VectorXd(x.bk.segment(g * dh, dh)) : VectorXd::Zero(dh)));
      CHECK(hw.b_V == (h.bias ? VectorXd(x.bv.segment(g * dh, dh)) : VectorXd::Zero(dh)));
    }
    CHECK(w.b_O == (h.bias ? x.bo : VectorXd::Zero(h.d)));
    CHECK(w.q_norm == x.q_norm);  // stored as w, whatever the gain form
    CHECK(w.k_norm == x.k_norm);
    CHECK(w.W_gate == x.gate);
    CHECK(w.W_1 == x.up);
    CHECK(w.W_2 == x.down);
    CHECK(w.b_1 == VectorXd::Zero(h.ff));
    CHECK(w.b_2 == VectorXd::Zero(h.d));
    CHECK(w.ln1_g == x.in);
    CHECK(w.ln1_b == VectorXd::Zero(h.d));
    CHECK(w.ln2_b == VectorXd::Zero(h.d));
    if (h.gemma3) {
      CHECK(w.ln3_g == x.post_attn);  // on the attention output
      CHECK(w.ln2_g == x.pre_ff);
      CHECK(w.ln4_g == x.post_ff);
    } else {
      CHECK(w.ln2_g == x.post_attn);  // before the MLP
      CHECK(w.ln3_g.size() == 0);
    }
  }
  REQUIRE(m.embeddings());
  CHECK(m.embeddings()->word == h.embed);
}

using Rot = Architecture::LayerRotary;
std::vector<std::pair<double, double>> rotaries(const Architecture& a) {
  std::vector<std::pair<double, double>> out;
  for (const Rot& r : a.layer_rotary) out.emplace_back(r.theta, r.linear_factor);
  return out;
}

}  // namespace

// ---- Qwen3 -----------------------------------------------------------------------------

TEST_CASE("Qwen3: every tensor in its per-head slot, q_norm and k_norm gains w, the config's defaults",
          "[checkpoint][hf][qwen3]") {
  Hand h = hand(false);
  const std::string dir = fresh("qwen3_hand");
  h.write(dir);
  const Model m = load_model(dir);
  const Architecture& a = m.arch();
  CHECK(a.d_qk == 4);
  CHECK(a.d_v == 4);
  CHECK(a.kv_heads == 2);
  CHECK(a.norm == NormKind::rms);
  CHECK(!a.norm_unit_offset);  // Llama's form: the gain is w
  CHECK(a.activation == Activation::silu);
  CHECK(a.gated_mlp);
  CHECK(a.variant == Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal});
  CHECK(a.own_norm_placement_only);
  CHECK(a.rope_theta == 10000.0);  // HF's default
  CHECK(a.ln_eps == 1e-6);
  REQUIRE(a.query_key_norm);
  CHECK(a.query_key_norm->eps == 1e-6);  // rms_norm_eps
  CHECK(!a.query_key_norm->unit_offset);
  CHECK(a.layer_rotary.empty());  // one base for every layer
  CHECK(!a.score_scale_base);     // head_dim^(-1/2)
  CHECK(!a.softcap);
  CHECK(!a.sandwich_norms);
  CHECK(a.attention_window == 0);
  require_slots(m, h);
  CHECK(m.embeddings()->kind == Layout::qwen3);
  CHECK(structure_notes(a) == "query/key norm (gain w)");

  // X^0 = E[ids], unscaled.
  const std::vector<long> ids = {5, 0, 3, 3};
  const Matrix<double> X0 = embed_tokens<double>(m, ids);
  for (Eigen::Index i = 0; i < 4; ++i)
    for (Eigen::Index j = 0; j < 4; ++j) CHECK(X0(i, j) == h.embed(ids[static_cast<std::size_t>(i)], j));

  // attention_bias: q, k, v and o all have biases (Qwen2's o_proj has none).
  h.bias = true;
  h.extra = {{"rms_norm_eps", 1e-5}, {"rope_theta", 1000000.0}};
  h.write(dir);
  const Model b = load_model(dir);
  require_slots(b, h);
  CHECK(b.arch().rope_theta == 1000000.0);
  CHECK(b.arch().query_key_norm->eps == 1e-5);
  CHECK(b.arch().ln_eps == 1e-5);

  // A Qwen3Model saved on its own: no "model." prefix, no lm_head.
  const std::string bare = fresh("qwen3_bare");
  fs::create_directories(bare);
  write_safetensors(bare + "/model.safetensors", h.tensors(""));
  write_json(bare + "/config.json", h.config());
  require_slots(load_model(bare), h);

  // num_key_value_heads absent or null: H (no grouping).
  Hand full = hand(false, 9);
  full.Hkv = full.H;
  full.draw(9);
  full.drop = {"num_key_value_heads"};
  full.write(dir);
  CHECK(load_model(dir).arch().key_value_heads() == 4);
  full.drop.clear();
  full.extra = {{"num_key_value_heads", nullptr}};
  full.write(dir);
  require_slots(load_model(dir), full);

  // 5.x files: rope_parameters instead of rope_theta.
  h.extra = {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 500000.0}}}};
  h.write(dir);
  CHECK(load_model(dir).arch().rope_theta == 500000.0);
  // Both, agreeing; rope_scaling {"rope_type": "default"} and layer_types all full are no-ops.
  h.extra = {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 500000.0}}},
             {"rope_theta", 500000.0},
             {"rope_scaling", {{"rope_type", "default"}}},
             {"layer_types", {"full_attention", "full_attention"}},
             {"use_sliding_window", false},
             {"sliding_window", 4096},
             {"max_window_layers", 1}};
  h.write(dir);
  CHECK(load_model(dir).arch().rope_theta == 500000.0);
  CHECK(load_model(dir).arch().attention_window == 0);

  // head_dim absent is 128 (HF's default), not d/H.
  h.extra = json::object();
  h.drop = {"head_dim"};
  h.write(dir);
  require_error([&] { load_model(dir); }, dir + "/model.safetensors", "model.layers.0.self_attn.k_norm.weight",
                {"[128]"});
}

TEST_CASE("Qwen3 and Gemma 3: F32, F16, BF16 and sharded files read the same weights", "[checkpoint][hf][qwen3][gemma3]") {
  for (const bool g3 : {false, true}) {
    const Hand h = hand(g3, 21);
    const std::string ref = fresh("qk_dtype_ref");
    h.write(ref);
    const Model m = load_model(ref);
    for (const char* dtype : {"F32", "F16", "BF16"}) {
      CAPTURE(g3, dtype);
      const std::string dir = fresh(std::string("qk_dtype_") + dtype);
      h.write(dir, dtype);
      const Model x = load_model(dir);
      sanpath::test::require_same_layers(x, m);
      sanpath::test::require_same_embeddings(x, m);
    }
    // Two shards and an index.
    const std::string sharded = fresh("qk_sharded");
    fs::create_directories(sharded);
    std::vector<Tensor> ts = h.tensors();
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    std::vector<Tensor> part[2];
    std::uint64_t bytes = 0;
    for (std::size_t t = 0; t < ts.size(); ++t) {
      const std::size_t k = t < ts.size() / 2 ? 0 : 1;
      part[k].push_back(ts[t]);
      bytes += static_cast<std::uint64_t>(ts[t].numel()) * 8;  // F64
      index["weight_map"][ts[t].name] = "model-0000" + std::to_string(k + 1) + "-of-00002.safetensors";
    }
    for (std::size_t k = 0; k < 2; ++k)
      write_safetensors(sharded + "/model-0000" + std::to_string(k + 1) + "-of-00002.safetensors", part[k]);
    index["metadata"]["total_size"] = bytes;
    write_json(sharded + "/model.safetensors.index.json", index);
    write_json(sharded + "/config.json", h.config());
    const Model s = load_model(sharded);
    sanpath::test::require_same_layers(s, m);
    sanpath::test::require_same_embeddings(s, m);
  }
}

// ---- Gemma 3 ---------------------------------------------------------------------------

TEST_CASE("Gemma 3: every tensor in its slot, gains 1 + w, embeddings scaled by √d, the config's defaults",
          "[checkpoint][hf][gemma3]") {
  const Hand h = hand(true);
  const std::string dir = fresh("gemma3_hand");
  h.write(dir);
  const Model m = load_model(dir);
  const Architecture& a = m.arch();
  CHECK(a.norm == NormKind::rms);
  CHECK(a.norm_unit_offset);
  CHECK(a.sandwich_norms);
  CHECK(a.activation == Activation::gelu_tanh);  // hidden_activation's default gelu_pytorch_tanh
  CHECK(a.variant == Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal});
  CHECK(a.own_norm_placement_only);
  REQUIRE(a.query_key_norm);
  CHECK(a.query_key_norm->unit_offset);
  CHECK(a.query_key_norm->eps == 1e-6);
  CHECK(a.score_scale_base == 4.0);  // query_pre_attn_scalar as written
  CHECK(!a.softcap);
  CHECK(a.kv_heads == 2);
  require_slots(m, h);
  CHECK(m.embeddings()->kind == Layout::gemma3);
  CHECK(!m.embeddings()->placeholder_id);

  // Without layer_types and sliding_window_pattern, P = 6: layers 0 and 1 slide,
  // with the default window 4096; the default bases 10000 (sliding) and 1e6 (full).
  CHECK(a.attention_window == 4096);
  CHECK(a.window_layers == std::vector<bool>{true, true});
  CHECK(a.rope_theta == 1000000.0);
  CHECK(rotaries(a) == std::vector<std::pair<double, double>>{{10000.0, 1.0}, {10000.0, 1.0}});

  // X^0 = √d·E[ids] = 2·E[ids] exactly (d = 4).
  const std::vector<long> ids = {1, 5, 0};
  const Matrix<double> X0 = embed_tokens<double>(m, ids);
  for (Eigen::Index i = 0; i < 3; ++i)
    for (Eigen::Index j = 0; j < 4; ++j) CHECK(X0(i, j) == 2.0 * h.embed(ids[static_cast<std::size_t>(i)], j));

  // Absent keys take Gemma3TextConfig's defaults: query_pre_attn_scalar 256,
  // and with the sizes absent the file no longer fits (26 layers, width 2304).
  Hand d = h;
  d.drop = {"query_pre_attn_scalar"};
  d.write(dir);
  CHECK(load_model(dir).arch().score_scale_base == 256.0);
  d.drop = {"num_hidden_layers"};
  d.write(dir);
  require_error([&] { load_model(dir); }, dir + "/model.safetensors", "tensors",
                {"312 missing for a gemma3 checkpoint: model.layers.2."});
  d.drop = {"hidden_size"};
  d.write(dir);
  require_error([&] { load_model(dir); }, dir + "/model.safetensors", "model.embed_tokens.weight", {"2304"});
  // hidden_activation decides; hidden_act plays no role.
  d.drop.clear();
  d.extra = {{"hidden_activation", "gelu"}, {"hidden_act", "relu"}};
  d.write(dir);
  CHECK(load_model(dir).arch().activation == Activation::gelu);
}

TEST_CASE("Gemma 3: the layer pattern, the local and global bases and the linear factor", "[checkpoint][hf][gemma3]") {
  Hand h = hand(true, 3);
  h.layers = 7;
  h.draw(3);
  const std::string dir = fresh("gemma3_pattern");
  const auto load_with = [&](const json& extra) {
    h.extra = extra;
    h.write(dir);
    return load_model(dir);
  };
  using Pairs = std::vector<std::pair<double, double>>;
  const double G = 1000000.0, Lc = 10000.0;

  SECTION("P = 6 by default: (l + 1) mod 6 = 0 attends fully (not Gemma 2's even layers)") {
    const Model m = load_with({{"sliding_window", 3}, {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}});
    CHECK(m.arch().attention_window == 3);
    CHECK(m.arch().window_layers == std::vector<bool>{true, true, true, true, true, false, true});
    // The linear factor reaches the full-attention layer only.
    CHECK(rotaries(m.arch()) == Pairs{{Lc, 1}, {Lc, 1}, {Lc, 1}, {Lc, 1}, {Lc, 1}, {G, 8}, {Lc, 1}});
    CHECK(structure_notes(m.arch()).find("rotary per layer (base 10000 on 6 of 7 layers; base 1e+06 linear factor 8 "
                                         "on 1 of 7 layers)") != std::string::npos);
    CHECK(structure_notes(m.arch()).find("query/key norm (gain 1 + w)") != std::string::npos);
    CHECK(structure_notes(m.arch()).find("sliding window 3 on 6 of 7 layers") != std::string::npos);
  }
  SECTION("sliding_window_pattern, rope_local_base_freq, rope_theta, the older key type") {
    const Model m = load_with({{"sliding_window_pattern", 3},
                               {"_sliding_window_pattern", 3},
                               {"rope_local_base_freq", 500.0},
                               {"rope_theta", 40000.0},
                               {"rope_scaling", {{"type", "linear"}, {"factor", 2.5}}}});
    CHECK(m.arch().window_layers == std::vector<bool>{true, true, false, true, true, false, true});
    CHECK(rotaries(m.arch()) ==
          Pairs{{500, 1}, {500, 1}, {40000, 2.5}, {500, 1}, {500, 1}, {40000, 2.5}, {500, 1}});
    CHECK(m.arch().rope_theta == 40000.0);
  }
  SECTION("layer_types decides over the pattern; rope_scaling default is factor 1") {
    const json types = {"full_attention",    "sliding_attention", "full_attention", "sliding_attention",
                        "sliding_attention", "sliding_attention", "full_attention"};
    const Model m = load_with({{"layer_types", types},
                               {"sliding_window_pattern", 2},
                               {"_sliding_window_pattern", 5},
                               {"rope_scaling", {{"rope_type", "default"}, {"factor", 3.0}}}});
    CHECK(m.arch().window_layers == std::vector<bool>{false, true, false, true, true, true, false});
    CHECK(rotaries(m.arch()) == Pairs{{G, 1}, {Lc, 1}, {G, 1}, {Lc, 1}, {Lc, 1}, {Lc, 1}, {G, 1}});
  }
  SECTION("5.x rope_parameters keyed by layer type, agreeing with the older keys") {
    const json rp = {{"full_attention", {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 200000.0}}},
                     {"sliding_attention", {{"rope_type", "default"}}}};
    const Model m = load_with({{"sliding_window_pattern", 4},
                               {"rope_parameters", rp},
                               {"rope_theta", 200000.0},
                               {"rope_local_base_freq", 700.0},
                               {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}}});
    CHECK(rotaries(m.arch()) == Pairs{{700, 1}, {700, 1}, {700, 1}, {200000, 4}, {700, 1}, {700, 1}, {700, 1}});
    // Without the older keys: each entry's base, else the defaults; a sliding entry may scale too.
    const json alone = {{"full_attention", {{"rope_type", "default"}}},
                        {"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 300.0}}}};
    const Model n = load_with({{"sliding_window_pattern", 4}, {"rope_parameters", alone}});
    CHECK(rotaries(n.arch()) == Pairs{{300, 2}, {300, 2}, {300, 2}, {G, 1}, {300, 2}, {300, 2}, {300, 2}});
  }
  SECTION("one base and factor 1 everywhere: no rotary per layer") {
    const Model m = load_with({{"sliding_window_pattern", 1}, {"rope_theta", 10000.0}});  // every layer full
    CHECK(m.arch().window_layers.empty());  // no layer slides
    CHECK(m.arch().attention_window == 0);
    CHECK(m.arch().layer_rotary.empty());
    CHECK(m.arch().rope_theta == 10000.0);
    // Every layer full: sliding_window may then be null.
    CHECK(load_with({{"sliding_window_pattern", 1}, {"sliding_window", nullptr}}).arch().attention_window == 0);
  }
  SECTION("the first layers: the pattern and the bases of those kept") {
    h.extra = {{"sliding_window_pattern", 2}};
    h.write(dir);
    LoadOptions o;
    o.first_layers = 3;
    const Model m = load_model(dir, o);
    CHECK(m.arch().layers == 3);
    CHECK(m.arch().window_layers == std::vector<bool>{true, false, true});
    CHECK(rotaries(m.arch()) == Pairs{{Lc, 1}, {G, 1}, {Lc, 1}});
    CHECK(m.layer(2).q_norm == h.w[2].q_norm);
  }
}

TEST_CASE("Gemma 3: a multimodal gemma3 file is read as its language model on token input", "[checkpoint][hf][gemma3]") {
  Hand h = hand(true, 5);
  const std::string text = fresh("gemma3_text_only");
  h.write(text);
  const Model want = load_model(text);
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    CAPTURE(prefix);
    const std::string dir = fresh("gemma3_multimodal");
    fs::create_directories(dir);
    std::vector<Tensor> ts = h.tensors(prefix);
    const std::string outer = prefix == "model.language_model." ? "model." : "";
    ts.push_back(make_tensor(outer + "vision_tower.vision_model.embeddings.patch_embedding.weight", MatrixXd(MatrixXd::Ones(3, 2))));
    ts.push_back(make_tensor(outer + "multi_modal_projector.mm_input_projection_weight", MatrixXd(MatrixXd::Ones(2, 2))));
    ts.push_back(make_tensor("lm_head.weight", h.embed));
    write_safetensors(dir + "/model.safetensors", ts);
    json tc = h.text_config();
    tc["model_type"] = "gemma3_text";
    json c = {{"model_type", "gemma3"},
              {"architectures", {"Gemma3ForConditionalGeneration"}},
              {"text_config", tc},
              {"vision_config", {{"hidden_size", 1152}}},
              {"image_token_index", 4},
              {"mm_tokens_per_image", 256}};
    write_json(dir + "/config.json", c);
    const Model m = load_model(dir);
    sanpath::test::require_same_layers(m, want);
    sanpath::test::require_same_arch(m.arch(), want.arch());
    CHECK(m.embeddings()->word == h.embed);
    CHECK(m.embeddings()->kind == Layout::gemma3);
    // image_token_index stands for an image feature: refused as a token.
    CHECK(m.embeddings()->placeholder_id == 4L);
    CHECK_NOTHROW(embed_tokens<double>(m, {1, 5, 3}));
    CHECK_THROWS_WITH(embed_tokens<double>(m, {1, 4}), Catch::Contains("tokens: id 4 stands for an image feature"));
    // The text_config keys are read with text_config's name; its defaults hold there too.
    c["text_config"]["rope_scaling"] = {{"rope_type", "yarn"}};
    write_json(dir + "/config.json", c);
    require_error([&] { load_model(dir); }, dir + "/config.json: text_config", "rope_scaling", {"yarn"});
    // image_token_index's default 262144 lies outside this vocabulary: no placeholder.
    c["text_config"].erase("rope_scaling");
    c.erase("image_token_index");
    write_json(dir + "/config.json", c);
    CHECK(!load_model(dir).embeddings()->placeholder_id);
    // A missing text_config; another text model type.
    c.erase("text_config");
    write_json(dir + "/config.json", c);
    require_error([&] { load_model(dir); }, dir + "/config.json", "text_config", {"missing"});
    tc["model_type"] = "gemma3n_text";
    c["text_config"] = tc;
    write_json(dir + "/config.json", c);
    require_error([&] { load_model(dir); }, dir + "/config.json: text_config", "model_type", {"gemma3n_text"});
  }
}

// ---- refusals ---------------------------------------------------------------------------

TEST_CASE("Qwen3 and Gemma 3: what families.md §6 refuses, one line naming config.json and the key",
          "[checkpoint][hf][qwen3][gemma3]") {
  struct Case {
    bool gemma3;
    json extra;
    std::string key;
    std::vector<std::string> drop = {};
  };
  const json lin8 = {{"rope_type", "linear"}, {"factor", 8.0}};
  const std::vector<Case> cases = {
      // Qwen3
      {false, {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}}, "rope_scaling"},
      {false, {{"rope_scaling", lin8}}, "rope_scaling"},
      {false, {{"rope_scaling", {{"rope_type", "default"}, {"factor", 2.0}}}}, "rope_scaling"},
      {false, {{"rope_parameters", {{"rope_type", "yarn"}}}}, "rope_parameters"},
      {false, {{"rope_theta", 1e6}, {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e4}}}},
       "rope_parameters"},
      {false, {{"partial_rotary_factor", 0.5}}, "partial_rotary_factor"},
      {false, {{"use_sliding_window", true}}, "use_sliding_window"},
      {false, {{"layer_types", {"full_attention"}}}, "layer_types"},
      {false, {{"layer_types", {"full_attention", "sliding_attention"}}}, "layer_types"},
      {false, {{"hidden_act", "gelu"}}, "hidden_act"},
      {false, {{"head_dim", nullptr}}, "head_dim"},
      {false, {{"head_dim", 3}}, "head_dim"},
      {false, {{"num_key_value_heads", 3}}, "num_key_value_heads"},
      {false, {}, "hidden_size", {"hidden_size"}},
      {false, {{"model_type", "qwen3_moe"}}, "model_type"},
      {false, {{"model_type", "qwen3_next"}}, "model_type"},
      // Gemma 3
      {true, {{"use_bidirectional_attention", true}}, "use_bidirectional_attention"},
      {true, {{"attn_logit_softcapping", 50.0}}, "attn_logit_softcapping"},
      {true, {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 8.0}}}}, "rope_scaling"},
      {true, {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 0.5}}}}, "rope_scaling"},
      {true, {{"rope_scaling", {{"rope_type", "linear"}, {"factor", "8"}}}}, "rope_scaling"},
      {true, {{"rope_scaling", {{"rope_type", "linear"}}}}, "rope_scaling"},
      {true, {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}, {"original_max_position_embeddings", 8}}}},
       "rope_scaling"},
      {true, {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e6}}}}, "rope_parameters"},
      {true, {{"rope_theta", 1e6}, {"rope_parameters", {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e5}}}}}},
       "rope_parameters.full_attention"},
      {true, {{"rope_local_base_freq", 1e4},
              {"rope_parameters", {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10.0}}}}}},
       "rope_parameters.sliding_attention"},
      {true, {{"rope_scaling", lin8}, {"rope_parameters", {{"full_attention", {{"rope_type", "default"}}}}}},
       "rope_parameters.full_attention"},
      {true, {{"rope_parameters", {{"full_attention", {{"rope_type", "dynamic"}, {"factor", 2.0}}}}}},
       "rope_parameters.full_attention"},
      {true, {{"partial_rotary_factor", 0.5}}, "partial_rotary_factor"},
      {true, {{"head_dim", 3}}, "head_dim"},
      {true, {{"num_key_value_heads", 3}}, "num_key_value_heads"},
      {true, {{"layer_types", {"sliding_attention"}}}, "layer_types"},
      {true, {{"layer_types", {"sliding_attention", "chunked_attention"}}}, "layer_types"},
      {true, {{"sliding_window", nullptr}}, "sliding_window"},
      {true, {{"sliding_window", 0}}, "sliding_window"},
      {true, {{"sliding_window_pattern", 0}}, "sliding_window_pattern"},
      {true, {{"sliding_window_pattern", nullptr}}, "sliding_window_pattern"},
      {true, {{"sliding_window_pattern", 6}, {"_sliding_window_pattern", 2}}, "_sliding_window_pattern"},
      {true, {{"hidden_activation", "relu"}}, "hidden_activation"},
      {true, {{"hidden_activation", nullptr}}, "hidden_activation"},
      {true, {{"rms_norm_eps", nullptr}}, "rms_norm_eps"},
      {true, {{"rope_theta", nullptr}}, "rope_theta"},
      {true, {{"query_pre_attn_scalar", 0}}, "query_pre_attn_scalar"},
      {true, {{"model_type", "gemma3n_text"}}, "model_type"},
      {true, {{"model_type", "gemma3n"}}, "model_type"},
      {true, {{"model_type", "t5gemma"}}, "model_type"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.gemma3, c.extra.dump(), c.key);
    Hand h = hand(c.gemma3, 2);
    json extra = c.extra.is_object() ? c.extra : json::object();
    const bool typed = extra.contains("model_type");
    const json type = typed ? extra["model_type"] : json();
    if (typed) extra.erase("model_type");
    h.extra = extra;
    h.drop = c.drop;
    const std::string dir = fresh("qk_refused");
    h.write(dir);
    if (typed) {
      json cfg = read_json(dir + "/config.json");
      cfg["model_type"] = type;
      write_json(dir + "/config.json", cfg);
    }
    require_error([&] { load_model(dir); }, dir + "/config.json", c.key);
  }
  // Token inputs: an id outside [0, vocab_size) and an empty sequence.
  const std::string dir = fresh("qk_tokens");
  hand(false).write(dir);
  const Model m = load_model(dir);
  CHECK_THROWS_WITH(embed_tokens<double>(m, {0, 6}), Catch::Contains("outside the vocabulary [0, 6)"));
  CHECK_THROWS_WITH(embed_tokens<double>(m, {}), Catch::Contains("tokens: the sequence is empty"));
}

TEST_CASE("Qwen3 and Gemma 3: what was read runs in the passes, the query/key norm and rotary per layer included",
          "[checkpoint][hf][qwen3][gemma3]") {
  for (const bool g3 : {false, true}) {
    const Hand h = hand(g3);
    const std::string dir = fresh("qk_runs");
    h.write(dir);
    const Model m = load_model(dir);
    REQUIRE(m.arch().query_key_norm);
    for (const Variant& v : {m.arch().variant, Variant::san(MaskKind::causal)}) {
      CHECK_NOTHROW(m.check_supports(v));
      const ForwardTrace<double> t = forward<double>(m, v, embed_tokens<double>(m, {1, 2, 3}));
      CHECK(t.X.back().allFinite());
    }
  }
  // Rotary per layer alone runs too, and is read: two bases give another output than one.
  RandomModelSpec s;
  s.arch.layers = 2;
  s.arch.heads = 1;
  s.arch.d_model = 4;
  s.arch.d_qk = s.arch.d_v = 4;
  s.arch.d_ff = 0;
  s.arch.variant = Variant::san(MaskKind::causal);
  s.arch.rope_theta = 10000.0;
  s.arch.layer_rotary = {{10000.0, 1.0}, {100.0, 2.0}};
  s.std = 0.5;  // logits of order 1: the rotation moves P visibly
  const Model r = random_model(s);
  s.arch.layer_rotary.clear();
  const Model flat = random_model(s);  // the same seed: the same weights
  const MatrixXd X = MatrixXd::Identity(4, 4);
  REQUIRE(r.arch().layer_rotary.size() == 2);
  const MatrixXd a = forward<double>(r, r.arch().variant, X).X.back();
  const MatrixXd b = forward<double>(flat, flat.arch().variant, X).X.back();
  CHECK((a - b).cwiseAbs().maxCoeff() > 1e-9);
}

// ---- writing ----------------------------------------------------------------------------

namespace {

RandomModelSpec qk_spec(std::uint64_t seed) {
  RandomModelSpec s;
  s.arch.layers = 4;
  s.arch.heads = 4;
  s.arch.kv_heads = 2;
  s.arch.d_model = 8;
  s.arch.d_qk = s.arch.d_v = 6;  // ≠ d/H
  s.arch.d_ff = 12;
  s.std = 0.3;
  s.bias_std = 0.1;
  s.seed = seed;
  s.vocab = 20;
  return s;
}

/// A random model of `layout` with every norm gain drawn (random_model's are the unit).
Model random_in(Layout layout, const FamilyOptions& o, std::uint64_t seed, double rope_theta = 10000.0) {
  RandomModelSpec s = qk_spec(seed);
  const FamilyDefaults def = family_defaults(layout);
  s.arch.activation = def.activation;
  s.arch.ln_eps = def.ln_eps;
  s.arch.rope_theta = rope_theta;
  s.embeddings = layout;
  family_structure(layout, s, o);
  const Model m = random_model(s);
  std::vector<LayerWeights> layers = m.layers();
  Gen g{std::mt19937_64(seed + 50), false};
  for (LayerWeights& w : layers) {
    w.ln1_g = g.vec(8);
    w.ln2_g = g.vec(8);
    if (m.arch().sandwich_norms) {
      w.ln3_g = g.vec(8);
      w.ln4_g = g.vec(8);
    }
  }
  return Model(m.arch(), layers, m.embeddings(), "random " + to_string(layout));
}

void require_same_model(const Model& x, const Model& y) {
  sanpath::test::require_same_arch(x.arch(), y.arch());
  sanpath::test::require_same_layers(x, y);
  sanpath::test::require_same_embeddings(x, y);
}

}  // namespace

TEST_CASE("Qwen3 and Gemma 3: written and read back bit for bit (one file, sharded, streamed, first layers, native)",
          "[checkpoint][hf][qwen3][gemma3]") {
  struct Case {
    Layout layout;
    FamilyOptions o;
    double rope_theta;
    const char* name;
  };
  FamilyOptions patterned, windowless;
  patterned.sliding_window = 3;
  patterned.layer_pattern = 2;
  patterned.rope_local_base = 500.0;
  patterned.rope_linear_factor = 4.0;
  patterned.query_pre_attn_scalar = 10.0;
  windowless.sliding_window = 0;
  for (const Case& c : {Case{Layout::qwen3, {}, 1000000.0, "qwen3"}, Case{Layout::gemma3, {}, 1000000.0, "gemma3 defaults"},
                        Case{Layout::gemma3, patterned, 20000.0, "gemma3 window 3, P 2, bases 500 and 20000, factor 4"},
                        Case{Layout::gemma3, windowless, 10000.0, "gemma3 no window"}}) {
    CAPTURE(c.name);
    const Model m = random_in(c.layout, c.o, 31, c.rope_theta);
    const Architecture& a = m.arch();
    REQUIRE(a.query_key_norm);
    CHECK(a.query_key_norm->unit_offset == (c.layout == Layout::gemma3));
    CHECK(a.query_key_norm->eps == 1e-6);
    CHECK(m.layer(1).q_norm != m.layer(1).k_norm);  // the gains are drawn
    if (c.layout == Layout::gemma3) {
      CHECK(a.score_scale_base == (c.o.query_pre_attn_scalar ? 10.0 : 6.0));
      CHECK(a.sandwich_norms);
      if (c.o.layer_pattern) {
        CHECK(a.window_layers == std::vector<bool>{true, false, true, false});
        CHECK(rotaries(a) == std::vector<std::pair<double, double>>{{500, 1}, {20000, 4}, {500, 1}, {20000, 4}});
      } else if (c.o.sliding_window == 0) {
        CHECK(a.window_layers.empty());
        CHECK(a.layer_rotary.empty());  // every layer full, rope_theta, factor 1
      } else {
        CHECK(a.window_layers == std::vector<bool>(4, true));  // P = 6: none of 4 layers is full
        CHECK(rotaries(a) == std::vector<std::pair<double, double>>(4, {10000, 1}));
      }
    }
    const std::string dir = fresh("qk_round_trip");
    save_hf(m, dir, c.layout, "F64");
    const json cfg = read_json(dir + "/config.json");
    CHECK(cfg.at("model_type") == (c.layout == Layout::qwen3 ? "qwen3" : "gemma3_text"));
    CHECK(cfg.at("head_dim") == 6);
    CHECK(cfg.at("attention_bias") == true);
    if (c.o.layer_pattern) {
      CHECK(cfg.at("sliding_window_pattern") == 2);
      CHECK(cfg.at("rope_local_base_freq") == 500.0);
      CHECK(cfg.at("rope_scaling") == json{{"rope_type", "linear"}, {"factor", 4.0}});
    }
    const Model b = load_model(dir);
    require_same_model(b, m);
    // Streamed: each layer as a pass reads it.
    LoadOptions streamed;
    streamed.layers = LoadOptions::Layers::streamed;
    const Model st = load_model(dir, streamed);
    REQUIRE(st.streamed());
    for (int l = 0; l < 4; ++l) {
      const std::shared_ptr<const LayerWeights> w = st.layer_for_pass(l);
      CHECK(w->q_norm == m.layer(l).q_norm);
      CHECK(w->k_norm == m.layer(l).k_norm);
      CHECK(w->heads[3].W_K == m.layer(l).heads[3].W_K);
    }
    // The first two layers.
    LoadOptions first;
    first.first_layers = 2;
    const Model fl = load_model(dir, first);
    CHECK(fl.arch().layers == 2);
    CHECK(fl.layer(1).k_norm == m.layer(1).k_norm);
    CHECK(fl.arch().layer_rotary.size() == (a.layer_rotary.empty() ? 0u : 2u));
    // F32: the weights rounded to float, read back as written.
    const std::string f32 = fresh("qk_round_trip_f32");
    save_hf(m, f32, c.layout, "F32");
    const Model b32 = load_model(f32);
    CHECK(b32.layer(2).q_norm == m.layer(2).q_norm.cast<float>().cast<double>());
    // Native: an exact round trip of the model, features included.
    const std::string native = fresh("qk_round_trip.safetensors");
    save_native(m, native);
    require_same_model(load_model(native), m);
    LoadOptions first3;
    first3.first_layers = 3;
    const Model nfl = load_model(native, first3);
    CHECK(nfl.arch().layers == 3);
    CHECK(nfl.arch().window_layers.size() == (a.window_layers.empty() ? 0u : 3u));
  }
}

TEST_CASE("Qwen3 and Gemma 3: the writers refuse what a layout cannot hold, and the options they lack",
          "[checkpoint][hf][qwen3][gemma3]") {
  FamilyOptions windowless;
  windowless.sliding_window = 0;
  const Model q = random_in(Layout::qwen3, {}, 4);
  const Model g = random_in(Layout::gemma3, windowless, 4);  // one base: no rotary per layer
  const Model g6 = random_in(Layout::gemma3, {}, 4, 1e6);    // local and global bases
  // A feature no other layout carries is never dropped in writing.
  for (const Layout other : {Layout::llama, Layout::qwen2, Layout::gemma2, Layout::gemma}) {
    CAPTURE(to_string(other));
    const std::string dir = fresh("qk_as_other");
    require_error([&] { save_hf(q, dir, other); }, dir, "query_key_norm");
  }
  const std::string dir = fresh("qk_cross");
  require_error([&] { save_hf(q, dir, Layout::gemma3); }, dir, "norm_unit_offset");
  require_error([&] { save_hf(g, dir, Layout::qwen3); }, dir, "norm");
  require_error([&] { save_hf(g6, dir, Layout::qwen3); }, dir, "layer_rotary");
  require_error([&] { save_hf(g6, dir, Layout::gemma2); }, dir, "query_key_norm");
  // A model with rotary per layer that Gemma 3's two layer types cannot express.
  Architecture a = g6.arch();
  a.layer_rotary = {{1.0, 1.0}, {2.0, 1.0}, {3.0, 1.0}, {4.0, 1.0}};  // four sliding layers, four bases
  const Model odd(a, g6.layers(), g6.embeddings(), "odd");
  require_error([&] { save_hf(odd, dir, Layout::gemma3); }, dir, "layer_rotary");
  // Family options: Qwen3 has none; Gemma 3 refuses bad values naming the option.
  RandomModelSpec s = qk_spec(1);
  s.arch.activation = Activation::silu;
  FamilyOptions o;
  o.layer_pattern = 2;
  CHECK_THROWS_WITH(family_structure(Layout::qwen3, s, o), Catch::StartsWith("layer_pattern: not an option"));
  CHECK_THROWS_WITH(family_structure(Layout::gemma2, s, o), Catch::StartsWith("layer_pattern: not an option"));
  s.arch.activation = Activation::gelu_tanh;
  o.layer_pattern = 0;
  CHECK_THROWS_WITH(family_structure(Layout::gemma3, s, o), Catch::StartsWith("layer_pattern:"));
  o = {};
  o.rope_linear_factor = 0.5;
  CHECK_THROWS_WITH(family_structure(Layout::gemma3, s, o), Catch::StartsWith("rope_linear_factor:"));
  o = {};
  o.softcap = 30;
  CHECK_THROWS_WITH(family_structure(Layout::gemma3, s, o), Catch::StartsWith("softcap: not an option"));
  o = {};
  CHECK_THROWS_WITH(family_structure(Layout::qwen3, s, o), Catch::StartsWith("activation:"));
}

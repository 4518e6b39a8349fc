// The GPT-NeoX, Phi and OPT layouts (families.md, "GPT-NeoX (Pythia), Phi and
// OPT checkpoints"): hand-made checkpoints whose entries name their place
// (GPT-NeoX's per-head interleaved query_key_value), partial rotary and the
// parallel block against hand evaluations, OPT's position offset and
// projection, round trips of random models through each layout, and every
// refusal naming config.json and its key.
#include "support/checkpoint_helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/tensor_eigen.hpp"
#include "sanpath/model/random.hpp"

#include <cmath>
#include <cstring>
#include <iterator>

namespace {

std::string config_path(const std::string& dir) { return (fs::path(dir) / "config.json").string(); }

void write_folder(const std::string& dir, const std::vector<Tensor>& ts, const json& config) {
  fs::create_directories(dir);
  write_safetensors(dir + "/model.safetensors", ts);
  write_json(config_path(dir), config);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Appends raw tensors (any dtype, little-endian bytes) to a safetensors file.
struct Raw {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
};
void append_raw(const std::string& path, const std::vector<Raw>& extra) {
  const std::string all = file_bytes(path);
  std::uint64_t n = 0;
  std::memcpy(&n, all.data(), 8);
  json h = json::parse(all.substr(8, n));
  std::string data = all.substr(8 + n);
  for (const Raw& r : extra) {
    h[r.name] = {{"dtype", r.dtype}, {"shape", r.shape}, {"data_offsets", {data.size(), data.size() + r.bytes.size()}}};
    data += r.bytes;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t len = text.size();
  std::memcpy(out.data(), &len, 8);  // little-endian hosts only, as the CI
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out << text << data;
}
std::string f32_bytes(std::initializer_list<float> v) {
  std::string s;
  for (const float x : v) s.append(reinterpret_cast<const char*>(&x), 4);
  return s;
}

/// Causal row softmax of logits A (n × n), entries j > i exactly 0.
MatrixXd causal_softmax(const MatrixXd& A) {
  MatrixXd P = MatrixXd::Zero(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    const double m = A.row(i).head(i + 1).maxCoeff();
    double sum = 0;
    for (Eigen::Index j = 0; j <= i; ++j) sum += P(i, j) = std::exp(A(i, j) - m);
    P.row(i).head(i + 1) /= sum;
  }
  return P;
}

// ---- GPT-NeoX ------------------------------------------------------------------

struct NeoxSizes {
  int layers = 2, heads = 2, dh = 4, ff = 3, vocab = 5;
  int d() const { return heads * dh; }
};

/// Entry (row, k) of layer l's query_key_value, row = h·3d_h + c·d_h + j: the
/// value names (l, h, c, j, k). Its bias entry names (l, h, c, j), negated.
double qkv_entry(int l, int h, int c, int j, int k) { return 10000.0 * l + 1000.0 * h + 100.0 * c + 10.0 * j + k + 1; }
double qkv_bias(int l, int h, int c, int j) { return -(10000.0 * l + 1000.0 * h + 100.0 * c + 10.0 * j + 1); }

std::vector<Tensor> neox_tensors(const NeoxSizes& z, const std::string& prefix, bool bias) {
  Gen g{std::mt19937_64(3), false};
  const int d = z.d();
  std::vector<Tensor> ts;
  for (int l = 0; l < z.layers; ++l) {
    const std::string p = prefix + "layers." + std::to_string(l) + ".";
    ts.push_back(make_tensor(p + "input_layernorm.weight", g.vec(d)));
    ts.push_back(make_tensor(p + "input_layernorm.bias", g.vec(d)));
    ts.push_back(make_tensor(p + "post_attention_layernorm.weight", g.vec(d)));
    ts.push_back(make_tensor(p + "post_attention_layernorm.bias", g.vec(d)));
    MatrixXd qkv(3 * d, d);
    VectorXd qb(3 * d);
    for (int h = 0; h < z.heads; ++h)
      for (int c = 0; c < 3; ++c)
        for (int j = 0; j < z.dh; ++j) {
          const int row = h * 3 * z.dh + c * z.dh + j;
          qb(row) = qkv_bias(l, h, c, j);
          for (int k = 0; k < d; ++k) qkv(row, k) = qkv_entry(l, h, c, j, k);
        }
    ts.push_back(make_tensor(p + "attention.query_key_value.weight", qkv));
    if (bias) ts.push_back(make_tensor(p + "attention.query_key_value.bias", qb));
    ts.push_back(make_tensor(p + "attention.dense.weight", g.mat(d, d)));
    if (bias) ts.push_back(make_tensor(p + "attention.dense.bias", g.vec(d)));
    ts.push_back(make_tensor(p + "mlp.dense_h_to_4h.weight", g.mat(z.ff, d)));
    ts.push_back(make_tensor(p + "mlp.dense_h_to_4h.bias", g.vec(z.ff)));
    ts.push_back(make_tensor(p + "mlp.dense_4h_to_h.weight", g.mat(d, z.ff)));
    ts.push_back(make_tensor(p + "mlp.dense_4h_to_h.bias", g.vec(d)));
  }
  ts.push_back(make_tensor(prefix + "embed_in.weight", g.mat(z.vocab, d)));
  ts.push_back(make_tensor(prefix + "final_layer_norm.weight", g.vec(d)));
  ts.push_back(make_tensor(prefix + "final_layer_norm.bias", g.vec(d)));
  ts.push_back(make_tensor("embed_out.weight", g.mat(z.vocab, d)));
  return ts;
}

json neox_config(const NeoxSizes& z) {
  return {{"architectures", {"GPTNeoXForCausalLM"}},
          {"model_type", "gpt_neox"},
          {"num_hidden_layers", z.layers},
          {"num_attention_heads", z.heads},
          {"hidden_size", z.d()},
          {"intermediate_size", z.ff},
          {"rotary_pct", 0.5},
          {"vocab_size", z.vocab},
          {"max_position_embeddings", 16}};
}

const Tensor& tensor(const std::vector<Tensor>& ts, const std::string& name) {
  for (const Tensor& t : ts)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  return ts.front();
}

// ---- random models of a family ------------------------------------------------------

RandomModelSpec family_spec(Layout layout, const FamilyOptions& o, int kv_heads = 0) {
  RandomModelSpec s;
  Architecture& a = s.arch;
  a.layers = 2;
  a.heads = 4;
  a.d_model = 32;
  a.d_qk = a.d_v = 8;
  a.d_ff = 12;
  a.activation = Activation::gelu_tanh;
  a.ln_eps = 1e-5;
  a.kv_heads = kv_heads;
  s.std = 0.3;
  s.bias_std = 0.1;
  s.seed = 5;
  s.vocab = 11;
  s.max_positions = 7;
  s.embeddings = layout;
  family_structure(layout, s, o);
  return s;
}

Model family_model(Layout layout, const FamilyOptions& o, int kv_heads = 0) {
  return random_model(family_spec(layout, o, kv_heads));
}

/// save_hf then load_model gives back `m` bit for bit (weights, structure,
/// forward pass), and saving the loaded model writes the same bytes.
void check_round_trip(const Model& m, Layout layout, const std::string& name) {
  const std::string dir = fresh(name), again = fresh(name + "_again");
  save_hf(m, dir, layout, "F64");
  const Model r = load_model(dir);
  require_same_arch(r.arch(), m.arch());
  CHECK(r.arch().rotary_dims == m.arch().rotary_dims);
  CHECK(r.arch().parallel_residual == m.arch().parallel_residual);
  CHECK(r.arch().own_norm_placement_only == m.arch().own_norm_placement_only);
  require_same_layers(r, m);
  require_same_embeddings(r, m);
  const std::vector<long> ids{3, 1, 4, 1, 5};
  require_same(forward<double>(r, r.arch().variant, embed_tokens<double>(r, ids)).X.back(),
               forward<double>(m, m.arch().variant, embed_tokens<double>(m, ids)).X.back(), "X^L");
  save_hf(r, again, layout, "F64");
  CHECK(file_bytes(again + "/model.safetensors") == file_bytes(dir + "/model.safetensors"));
  CHECK(file_bytes(again + "/config.json") == file_bytes(dir + "/config.json"));
}

Model with_layers(const Model& m, std::vector<LayerWeights> layers) {
  return Model(m.arch(), std::move(layers), m.embeddings(), "edited");
}

}  // namespace

TEST_CASE("GPT-NeoX: query_key_value is interleaved per head, row h·3d_h + c·d_h + j", "[checkpoint][hf][gpt_neox]") {
  const NeoxSizes z;
  const int d = z.d(), dh = z.dh;
  const std::vector<Tensor> ts = neox_tensors(z, "gpt_neox.", true);
  const std::string dir = fresh("neox_qkv");
  write_folder(dir, ts, neox_config(z));
  // Buffers of old files, skipped by name whatever their dtype.
  append_raw(dir + "/model.safetensors",
             {{"gpt_neox.layers.0.attention.bias", "BOOL", {1, 1, 4, 4}, std::string(16, '\1')},
              {"gpt_neox.layers.1.attention.bias", "U8", {1, 1, 4, 4}, std::string(16, '\1')},
              {"gpt_neox.layers.0.attention.masked_bias", "F32", {}, f32_bytes({-1e9f})},
              {"gpt_neox.layers.0.attention.rotary_emb.inv_freq", "F32", {1}, f32_bytes({1.0f})}});
  const Model m = load_model(dir);
  const Architecture& a = m.arch();
  CHECK(a.variant == Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal});
  CHECK(a.parallel_residual);  // use_parallel_residual defaults to true
  CHECK(a.own_norm_placement_only);
  CHECK(a.activation == Activation::gelu);
  CHECK(a.ln_eps == 1e-5);
  CHECK(a.norm == NormKind::layer);
  CHECK(a.d_qk == dh);
  CHECK(a.rotary_dims == 2);  // int(4 · 0.5)
  REQUIRE(a.rope_theta);
  CHECK(*a.rope_theta == 10000.0);
  for (int l = 0; l < z.layers; ++l) {
    const LayerWeights& w = m.layer(l);
    const std::string p = "gpt_neox.layers." + std::to_string(l) + ".";
    for (int h = 0; h < z.heads; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      const MatrixXd* W[3] = {&hw.W_Q, &hw.W_K, &hw.W_V};
      const VectorXd* b[3] = {&hw.b_Q, &hw.b_K, &hw.b_V};
      for (int c = 0; c < 3; ++c) {
        REQUIRE(W[c]->rows() == d);
        REQUIRE(W[c]->cols() == dh);
        for (int j = 0; j < dh; ++j) {
          CAPTURE(l, h, c, j);
          CHECK((*b[c])(j) == qkv_bias(l, h, c, j));
          for (int k = 0; k < d; ++k) CHECK((*W[c])(k, j) == qkv_entry(l, h, c, j, k));
        }
      }
      // W_O^h[j, :] = dense.weight[:, h·d_h + j].
      const MatrixXd dense = to_matrix(tensor(ts, p + "attention.dense.weight"));
      require_same(hw.W_O, MatrixXd(dense.middleCols(h * dh, dh).transpose()), "W_O");
    }
    // Not GPT-2's [Q | K | V]: stored row d_h (= 4) is head 0's key, not head 1's query.
    CHECK(w.heads[0].W_K(0, 0) == qkv_entry(l, 0, 1, 0, 0));
    CHECK(w.heads[1].W_Q(0, 0) == qkv_entry(l, 1, 0, 0, 0));
    require_same(w.b_O, to_vector(tensor(ts, p + "attention.dense.bias")), "b_O");
    require_same(w.ln1_g, to_vector(tensor(ts, p + "input_layernorm.weight")), "ln1_g");
    require_same(w.ln1_b, to_vector(tensor(ts, p + "input_layernorm.bias")), "ln1_b");
    require_same(w.ln2_g, to_vector(tensor(ts, p + "post_attention_layernorm.weight")), "ln2_g");
    require_same(w.ln2_b, to_vector(tensor(ts, p + "post_attention_layernorm.bias")), "ln2_b");
    require_same(w.W_1, MatrixXd(to_matrix(tensor(ts, p + "mlp.dense_h_to_4h.weight")).transpose()), "W_1");
    require_same(w.b_1, to_vector(tensor(ts, p + "mlp.dense_h_to_4h.bias")), "b_1");
    require_same(w.W_2, MatrixXd(to_matrix(tensor(ts, p + "mlp.dense_4h_to_h.weight")).transpose()), "W_2");
    require_same(w.b_2, to_vector(tensor(ts, p + "mlp.dense_4h_to_h.bias")), "b_2");
  }
  REQUIRE(m.embeddings());
  CHECK(m.embeddings()->kind == Layout::gpt_neox);
  require_same(m.embeddings()->word, to_matrix(tensor(ts, "gpt_neox.embed_in.weight")), "word");

  SECTION("a file saved from the bare model (no prefix) reads the same") {
    std::vector<Tensor> bare = ts;
    for (Tensor& t : bare)
      if (t.name.rfind("gpt_neox.", 0) == 0) t.name = t.name.substr(9);
    const std::string dir2 = fresh("neox_qkv_bare");
    write_folder(dir2, bare, neox_config(z));
    const Model b = load_model(dir2);
    require_same_layers(b, m);
    require_same_embeddings(b, m);
  }
  SECTION("attention_bias false: the two attention biases are absent and zero") {
    const std::string dir2 = fresh("neox_no_bias");
    json c = neox_config(z);
    c["attention_bias"] = false;
    write_folder(dir2, neox_tensors(z, "gpt_neox.", false), c);
    const Model b = load_model(dir2);
    for (int l = 0; l < z.layers; ++l) {
      CHECK((b.layer(l).b_O.array() == 0).all());
      for (const HeadWeights& hw : b.layer(l).heads) {
        CHECK((hw.b_Q.array() == 0).all());
        CHECK((hw.b_K.array() == 0).all());
        CHECK((hw.b_V.array() == 0).all());
      }
      require_same(b.layer(l).heads[1].W_V, m.layer(l).heads[1].W_V, "W_V");
    }
  }
  SECTION("first layers and streamed layers read the same tensors") {
    LoadOptions first;
    first.first_layers = 1;
    const Model f1 = load_model(dir, first);
    CHECK(f1.arch().layers == 1);
    require_same(f1.layer(0).heads[1].W_K, m.layer(0).heads[1].W_K, "W_K");
    LoadOptions streamed;
    streamed.layers = LoadOptions::Layers::streamed;
    const Model s = load_model(dir, streamed);
    REQUIRE(s.streamed());
    const std::vector<long> ids{0, 4, 2};
    // Small inputs only (the encoded weights are large): compare X^L exactly.
    const Matrix<double> X0 = embed_tokens<double>(m, ids) * 1e-4;
    require_same(forward<double>(s, s.arch().variant, X0).X.back(), forward<double>(m, m.arch().variant, X0).X.back(),
                 "X^L");
  }
}

TEST_CASE("GPT-NeoX partial rotary by hand: r = 2 of d_h = 4, θ_0 = base^0 = 1, entries >= r not rotated",
          "[checkpoint][hf][gpt_neox]") {
  // One layer, one head, d = d_h = 4; Q = K = V = X (identity projections, no
  // biases), dense the identity. rotary_pct 0.5: r = 2, the pair (0, 1) turns
  // by p·θ_0 = p rad at position p; entries 2, 3 are left alone.
  const MatrixXd I = MatrixXd::Identity(4, 4);
  MatrixXd qkv(12, 4);
  qkv << I, I, I;
  const VectorXd z4 = VectorXd::Zero(4), one4 = VectorXd::Ones(4);
  const std::vector<Tensor> ts = {
      make_tensor("layers.0.input_layernorm.weight", one4),
      make_tensor("layers.0.input_layernorm.bias", z4),
      make_tensor("layers.0.post_attention_layernorm.weight", one4),
      make_tensor("layers.0.post_attention_layernorm.bias", z4),
      make_tensor("layers.0.attention.query_key_value.weight", qkv),
      make_tensor("layers.0.attention.query_key_value.bias", VectorXd(VectorXd::Zero(12))),
      make_tensor("layers.0.attention.dense.weight", I),
      make_tensor("layers.0.attention.dense.bias", z4),
      make_tensor("layers.0.mlp.dense_h_to_4h.weight", MatrixXd(MatrixXd::Zero(1, 4))),
      make_tensor("layers.0.mlp.dense_h_to_4h.bias", VectorXd(VectorXd::Zero(1))),
      make_tensor("layers.0.mlp.dense_4h_to_h.weight", MatrixXd(MatrixXd::Zero(4, 1))),
      make_tensor("layers.0.mlp.dense_4h_to_h.bias", z4)};
  const std::string dir = fresh("neox_rotary_hand");
  write_folder(dir, ts,
               {{"model_type", "gpt_neox"},
                {"num_hidden_layers", 1},
                {"num_attention_heads", 1},
                {"hidden_size", 4},
                {"intermediate_size", 1},
                {"rotary_pct", 0.5},
                {"rotary_emb_base", 10000}});
  const Model m = load_model(dir);
  CHECK(m.arch().rotary_dims == 2);
  Matrix<double> X(3, 4);
  X << 0.3, -0.2, 0.5, 0.1,  //
      0.7, 0.4, -0.3, 0.2,   //
      -0.1, 0.9, 0.2, -0.6;
  const ForwardTrace<double> t = forward<double>(m, Variant::san(MaskKind::causal), X);
  // Hand: R_p x = (x_0 cos p − x_1 sin p, x_1 cos p + x_0 sin p, x_2, x_3),
  // A_ij = (R_i x_i)·(R_j x_j)/√4.
  MatrixXd R = X;
  for (int p = 0; p < 3; ++p) {
    R(p, 0) = X(p, 0) * std::cos(p) - X(p, 1) * std::sin(p);
    R(p, 1) = X(p, 1) * std::cos(p) + X(p, 0) * std::sin(p);
  }
  const MatrixXd P = causal_softmax(R * R.transpose() / 2.0);
  REQUIRE(t.P.size() == 1);
  const Matrix<double>& Pt = t.P[0][0];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      CAPTURE(i, j);
      if (j > i)
        CHECK(Pt(i, j) == 0);
      else
        CHECK(Pt(i, j) == Approx(P(i, j)).epsilon(1e-14));
    }
  // The same numbers from an independent evaluation (Python, math module).
  CHECK(Pt(1, 0) == Approx(0.3706867968839843).epsilon(1e-13));
  CHECK(Pt(2, 0) == Approx(0.26892252654481735).epsilon(1e-13));
  CHECK(Pt(2, 1) == Approx(0.2107855250716904).epsilon(1e-13));
  // Rotating the whole head (pairs (0, 2), (1, 3), θ_1 = 0.01) or nothing
  // would give P(1, 0) = 0.4456… or 0.4037…: the test tells them apart.
  CHECK(std::abs(Pt(1, 0) - 0.4456491464056349) > 1e-2);
  CHECK(std::abs(Pt(1, 0) - 0.40371730070321216) > 1e-2);
  // Values are not rotated: X^1 = P X (W_V, W_O identities).
  const MatrixXd Y = P * X;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 4; ++k) CHECK(t.X[1](i, k) == Approx(Y(i, k)).epsilon(1e-14).margin(1e-15));
}

TEST_CASE("Phi: one LayerNorm in ln1 and ln2, grouped heads, the parallel block by hand", "[checkpoint][hf][phi]") {
  const int L = 1, H = 4, Hkv = 2, dh = 4, d = H * dh, ff = 6, n = 4;
  Gen g{std::mt19937_64(11), false};
  const VectorXd ln_g = g.vec(d), ln_b = g.vec(d);
  const MatrixXd Wq = g.mat(H * dh, d), Wk = g.mat(Hkv * dh, d), Wv = g.mat(Hkv * dh, d), Wd = g.mat(d, H * dh);
  const VectorXd bq = g.vec(H * dh), bk = g.vec(Hkv * dh), bv = g.vec(Hkv * dh), bd = g.vec(d);
  const MatrixXd fc1 = g.mat(ff, d), fc2 = g.mat(d, ff);
  const VectorXd b1 = g.vec(ff), b2 = g.vec(d);
  const std::string p = "model.layers.0.";
  const std::vector<Tensor> ts = {make_tensor(p + "input_layernorm.weight", ln_g),
                                  make_tensor(p + "input_layernorm.bias", ln_b),
                                  make_tensor(p + "self_attn.q_proj.weight", Wq),
                                  make_tensor(p + "self_attn.q_proj.bias", bq),
                                  make_tensor(p + "self_attn.k_proj.weight", Wk),
                                  make_tensor(p + "self_attn.k_proj.bias", bk),
                                  make_tensor(p + "self_attn.v_proj.weight", Wv),
                                  make_tensor(p + "self_attn.v_proj.bias", bv),
                                  make_tensor(p + "self_attn.dense.weight", Wd),
                                  make_tensor(p + "self_attn.dense.bias", bd),
                                  make_tensor(p + "mlp.fc1.weight", fc1),
                                  make_tensor(p + "mlp.fc1.bias", b1),
                                  make_tensor(p + "mlp.fc2.weight", fc2),
                                  make_tensor(p + "mlp.fc2.bias", b2),
                                  make_tensor("model.embed_tokens.weight", g.mat(7, d)),
                                  make_tensor("model.final_layernorm.weight", g.vec(d)),
                                  make_tensor("model.final_layernorm.bias", g.vec(d)),
                                  make_tensor("lm_head.weight", g.mat(7, d)),
                                  make_tensor("lm_head.bias", g.vec(7))};
  const json config = {{"architectures", {"PhiForCausalLM"}},
                       {"model_type", "phi"},
                       {"num_hidden_layers", L},
                       {"num_attention_heads", H},
                       {"num_key_value_heads", Hkv},
                       {"hidden_size", d},
                       {"intermediate_size", ff},
                       {"vocab_size", 7},
                       {"resid_pdrop", 0.1},
                       {"embd_pdrop", 0.0}};
  const std::string dir = fresh("phi_hand");
  write_folder(dir, ts, config);
  const Model m = load_model(dir);
  const Architecture& a = m.arch();
  CHECK(a.parallel_residual);
  CHECK(a.own_norm_placement_only);
  CHECK(a.activation == Activation::gelu_tanh);  // hidden_act defaults to gelu_new
  CHECK(a.ln_eps == 1e-5);
  CHECK(a.key_value_heads() == Hkv);
  CHECK(a.rotary_dims == 2);  // int(4 · 0.5)
  REQUIRE(a.rope_theta);
  CHECK(*a.rope_theta == 10000.0);
  const LayerWeights& w = m.layer(0);
  require_same(w.ln1_g, ln_g, "ln1_g");
  require_same(w.ln2_g, ln_g, "ln2_g");
  require_same(w.ln1_b, ln_b, "ln1_b");
  require_same(w.ln2_b, ln_b, "ln2_b");
  for (int h = 0; h < H; ++h) {
    const int kv = h * Hkv / H;
    const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
    require_same(hw.W_Q, MatrixXd(Wq.middleRows(h * dh, dh).transpose()), "W_Q");
    require_same(hw.W_K, MatrixXd(Wk.middleRows(kv * dh, dh).transpose()), "W_K");
    require_same(hw.b_V, VectorXd(bv.segment(kv * dh, dh)), "b_V");
    require_same(hw.W_O, MatrixXd(Wd.middleCols(h * dh, dh).transpose()), "W_O");
  }

  // X' = X + Attn(LN X) + f(LN X), evaluated from the stored tensors.
  const MatrixXd X = g.mat(n, d);
  const MatrixXd Y = layer_norm<double>(X, ln_g, ln_b, 1e-5);
  MatrixXd heads(n, H * dh);
  for (int h = 0; h < H; ++h) {
    const int kv = h * Hkv / H;
    MatrixXd Q = Y * Wq.middleRows(h * dh, dh).transpose(), K = Y * Wk.middleRows(kv * dh, dh).transpose(),
             V = Y * Wv.middleRows(kv * dh, dh).transpose();
    Q.rowwise() += bq.segment(h * dh, dh).transpose();
    K.rowwise() += bk.segment(kv * dh, dh).transpose();
    V.rowwise() += bv.segment(kv * dh, dh).transpose();
    for (int q = 0; q < n; ++q)  // r = 2: the pair (0, 1) turns by q·θ_0 = q rad
      for (MatrixXd* M : {&Q, &K}) {
        const double x0 = (*M)(q, 0), x1 = (*M)(q, 1);
        (*M)(q, 0) = x0 * std::cos(q) - x1 * std::sin(q);
        (*M)(q, 1) = x1 * std::cos(q) + x0 * std::sin(q);
      }
    heads.middleCols(h * dh, dh) = causal_softmax(Q * K.transpose() / 2.0) * V;
  }
  MatrixXd attn = heads * Wd.transpose();
  attn.rowwise() += bd.transpose();
  MatrixXd hid = Y * fc1.transpose();
  hid.rowwise() += b1.transpose();
  for (Eigen::Index i = 0; i < hid.size(); ++i) hid.data()[i] = activate<double>(hid.data()[i], Activation::gelu_tanh);
  MatrixXd mlp = hid * fc2.transpose();
  mlp.rowwise() += b2.transpose();
  const MatrixXd expect = X + attn + mlp;
  const ForwardTrace<double> t = forward<double>(m, a.variant, Matrix<double>(X));
  test::require_matrix_near<double>(t.X[1], expect, 1000);

  SECTION("the writer stores input_layernorm once and refuses ln2 != ln1") {
    const std::string out = fresh("phi_hand_saved");
    save_hf(m, out, Layout::phi, "F64");
    const auto f = SafetensorsFile::read(out + "/model.safetensors");
    CHECK(f.find("model.layers.0.input_layernorm.weight") != nullptr);
    CHECK(f.find("model.layers.0.post_attention_layernorm.weight") == nullptr);
    std::vector<LayerWeights> layers = m.layers();
    layers[0].ln2_g(3) += 1;
    const std::string bad = fresh("phi_ln2");
    require_error([&] { save_hf(with_layers(m, layers), bad, Layout::phi, "F64"); }, bad, "layer 0 ln2_g",
                  {"input_layernorm"});
  }
}

TEST_CASE("OPT: positions offset by 2, project_in before the positions, e != d", "[checkpoint][hf][opt]") {
  const int d = 4, e = 2, H = 2, ff = 3, V = 5, P = 3;
  Gen g{std::mt19937_64(17), false};
  const MatrixXd word = g.mat(V, e), project_in = g.mat(d, e);
  MatrixXd positions = g.mat(P + 2, d);
  positions.topRows(2).setConstant(1e6);  // rows 0 and 1 are never used
  const std::string p = "decoder.layers.0.";
  std::vector<Tensor> ts = {make_tensor("decoder.embed_tokens.weight", word),
                            make_tensor("decoder.embed_positions.weight", positions),
                            make_tensor("decoder.project_in.weight", project_in),
                            make_tensor("decoder.project_out.weight", g.mat(e, d)),
                            make_tensor("decoder.final_layer_norm.weight", g.vec(d)),
                            make_tensor("decoder.final_layer_norm.bias", g.vec(d))};
  const MatrixXd Wq = g.mat(d, d), Wo = g.mat(d, d);
  const VectorXd bq = g.vec(d);
  ts.push_back(make_tensor(p + "self_attn.q_proj.weight", Wq));
  ts.push_back(make_tensor(p + "self_attn.q_proj.bias", bq));
  for (const char* k : {"k_proj", "v_proj"}) {
    ts.push_back(make_tensor(p + "self_attn." + k + ".weight", g.mat(d, d)));
    ts.push_back(make_tensor(p + "self_attn." + k + ".bias", g.vec(d)));
  }
  ts.push_back(make_tensor(p + "self_attn.out_proj.weight", Wo));
  ts.push_back(make_tensor(p + "self_attn.out_proj.bias", g.vec(d)));
  const VectorXd ln1_g = g.vec(d), ln2_g = g.vec(d);
  ts.push_back(make_tensor(p + "self_attn_layer_norm.weight", ln1_g));
  ts.push_back(make_tensor(p + "self_attn_layer_norm.bias", g.vec(d)));
  ts.push_back(make_tensor(p + "final_layer_norm.weight", ln2_g));
  ts.push_back(make_tensor(p + "final_layer_norm.bias", g.vec(d)));
  ts.push_back(make_tensor(p + "fc1.weight", g.mat(ff, d)));
  ts.push_back(make_tensor(p + "fc1.bias", g.vec(ff)));
  ts.push_back(make_tensor(p + "fc2.weight", g.mat(d, ff)));
  ts.push_back(make_tensor(p + "fc2.bias", g.vec(d)));
  const json config = {{"architectures", {"OPTForCausalLM"}},
                       {"model_type", "opt"},
                       {"num_hidden_layers", 1},
                       {"num_attention_heads", H},
                       {"hidden_size", d},
                       {"ffn_dim", ff},
                       {"word_embed_proj_dim", e},
                       {"max_position_embeddings", P},
                       {"vocab_size", V},
                       {"do_layer_norm_before", true}};
  const std::string dir = fresh("opt_project");
  write_folder(dir, ts, config);
  const Model m = load_model(dir);
  const Architecture& a = m.arch();
  CHECK(a.variant == Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal});
  CHECK(a.activation == Activation::relu);
  CHECK(a.ln_eps == 1e-5);
  CHECK(a.own_norm_placement_only);
  CHECK_FALSE(a.rotary());
  CHECK_FALSE(a.parallel_residual);
  const LayerWeights& w = m.layer(0);
  require_same(w.ln1_g, ln1_g, "ln1_g (self_attn_layer_norm)");
  require_same(w.ln2_g, ln2_g, "ln2_g (the layer's final_layer_norm)");
  for (int h = 0; h < H; ++h) {
    const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
    // q_proj used unscaled (families.md §4): the usual 1/√d_h does the scaling.
    require_same(hw.W_Q, MatrixXd(Wq.middleRows(h * 2, 2).transpose()), "W_Q");
    require_same(hw.b_Q, VectorXd(bq.segment(h * 2, 2)), "b_Q");
    require_same(hw.W_O, MatrixXd(Wo.middleCols(h * 2, 2).transpose()), "W_O");
  }
  REQUIRE(m.embeddings());
  const Embeddings& emb = *m.embeddings();
  CHECK(emb.kind == Layout::opt);
  require_same(emb.mapping, MatrixXd(project_in.transpose()), "mapping");
  require_same(emb.position, MatrixXd(positions.bottomRows(P)), "position");
  CHECK(emb.max_positions() == P);

  // X^0_i = embed_tokens[t_i] · project_inᵀ + embed_positions[i + 2].
  const std::vector<long> ids{3, 0, 4};
  const Matrix<double> X0 = embed_tokens<double>(m, ids);
  REQUIRE(X0.rows() == 3);
  REQUIRE(X0.cols() == d);
  for (int i = 0; i < 3; ++i) {
    const Eigen::RowVectorXd projected = word.row(ids[static_cast<std::size_t>(i)]) * project_in.transpose();
    for (int k = 0; k < d; ++k) {
      CAPTURE(i, k);
      CHECK(X0(i, k) == Approx(projected(k) + positions(i + 2, k)).epsilon(1e-14).margin(1e-15));
    }
  }
  CHECK(X0.cwiseAbs().maxCoeff() < 10);  // the huge rows 0 and 1 never enter
  // An input longer than max_position_embeddings is refused.
  CHECK_THROWS_AS(embed_tokens<double>(m, {1, 1, 1, 1}), std::invalid_argument);

  SECTION("e != d without project_in is refused, naming word_embed_proj_dim") {
    std::vector<Tensor> without;
    for (const Tensor& t : ts)
      if (t.name != "decoder.project_in.weight") without.push_back(t);
    const std::string dir2 = fresh("opt_no_project_in");
    write_folder(dir2, without, config);
    require_error([&] { load_model(dir2); }, config_path(dir2), "word_embed_proj_dim", {"project_in"});
  }
}

TEST_CASE("OPT: post-LN (do_layer_norm_before false), no biases, no LayerNorm affine, model.decoder. prefix",
          "[checkpoint][hf][opt]") {
  const int d = 4, H = 2, ff = 3, V = 5, P = 3;
  Gen g{std::mt19937_64(19), false};
  const MatrixXd word = g.mat(V, d);
  MatrixXd positions = g.mat(P + 2, d);
  positions.topRows(2).setConstant(-1e6);
  const std::string p = "model.decoder.layers.0.";
  std::vector<Tensor> ts = {make_tensor("model.decoder.embed_tokens.weight", word),
                            make_tensor("model.decoder.embed_positions.weight", positions)};
  for (const char* k : {"q_proj", "k_proj", "v_proj", "out_proj"})
    ts.push_back(make_tensor(p + "self_attn." + k + ".weight", g.mat(d, d)));
  ts.push_back(make_tensor(p + "fc1.weight", g.mat(ff, d)));
  ts.push_back(make_tensor(p + "fc2.weight", g.mat(d, ff)));
  const std::string dir = fresh("opt_post");
  write_folder(dir, ts,
               {{"model_type", "opt"},
                {"num_hidden_layers", 1},
                {"num_attention_heads", H},
                {"hidden_size", d},
                {"ffn_dim", ff},
                {"activation_function", "gelu"},
                {"do_layer_norm_before", false},
                {"enable_bias", false},
                {"layer_norm_elementwise_affine", false}});
  const Model m = load_model(dir);
  CHECK(m.arch().variant == Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::causal});
  CHECK(m.arch().activation == Activation::gelu);
  const LayerWeights& w = m.layer(0);
  CHECK((w.ln1_g.array() == 1).all());
  CHECK((w.ln2_g.array() == 1).all());
  CHECK((w.ln1_b.array() == 0).all());
  CHECK((w.ln2_b.array() == 0).all());
  CHECK((w.b_O.array() == 0).all());
  CHECK((w.b_1.array() == 0).all());
  CHECK((w.b_2.array() == 0).all());
  for (const HeadWeights& hw : w.heads) CHECK((hw.b_Q.array() == 0).all());
  REQUIRE(m.embeddings());
  CHECK(m.embeddings()->mapping.size() == 0);
  CHECK(m.embeddings()->max_positions() == P);  // no max_position_embeddings key: the table's rows − 2
  // X^0_i = embed_tokens[t_i] + embed_positions[i + 2], exactly.
  const std::vector<long> ids{2, 2, 0};
  const Matrix<double> X0 = embed_tokens<double>(m, ids);
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < d; ++k) CHECK(X0(i, k) == word(ids[static_cast<std::size_t>(i)], k) + positions(i + 2, k));
  // The layernorm option takes none or the model's own placement (post).
  VariantOverride pre;
  pre.layernorm = LayerNormKind::pre;
  require_error([&] { m.resolve(pre); }, dir, "layernorm", {"post"});
  VariantOverride none;
  none.layernorm = LayerNormKind::none;
  CHECK_NOTHROW(m.resolve(none));
  // Streamed: every layer has its LayerNorm (gain 1, bias 0) though no tensor holds it.
  LoadOptions streamed;
  streamed.layers = LoadOptions::Layers::streamed;
  const Model s = load_model(dir, streamed);
  require_same(forward<double>(s, s.arch().variant, X0).X.back(), forward<double>(m, m.arch().variant, X0).X.back(),
               "X^L");
}

TEST_CASE("GPT-NeoX, Phi, OPT: save_hf then load_model gives the model back bit for bit", "[checkpoint][hf]") {
  FamilyOptions neox;  // rotary_fraction 0.25: r = int(8 · 0.25) = 2; parallel
  check_round_trip(family_model(Layout::gpt_neox, neox), Layout::gpt_neox, "rt_neox");
  FamilyOptions sequential;
  sequential.parallel_residual = false;
  sequential.rotary_fraction = 0.0;
  const Model seq = family_model(Layout::gpt_neox, sequential);
  CHECK_FALSE(seq.arch().rotary());
  CHECK_FALSE(seq.arch().parallel_residual);
  check_round_trip(seq, Layout::gpt_neox, "rt_neox_seq");
  FamilyOptions whole;
  whole.rotary_fraction = 1.0;
  const Model wh = family_model(Layout::gpt_neox, whole);
  CHECK(wh.arch().rotated_dims() == 8);
  check_round_trip(wh, Layout::gpt_neox, "rt_neox_whole");
  FamilyOptions third;
  third.rotary_fraction = 0.3;  // int(8 · 0.3) = 2 (2.4 truncated)
  const Model th = family_model(Layout::gpt_neox, third);
  CHECK(th.arch().rotary_dims == 2);
  check_round_trip(th, Layout::gpt_neox, "rt_neox_third");

  FamilyOptions phi;  // partial_rotary_factor 0.5: r = 4
  const Model ph = family_model(Layout::phi, phi, 2);
  CHECK(ph.arch().rotary_dims == 4);
  CHECK(ph.arch().key_value_heads() == 2);
  check_round_trip(ph, Layout::phi, "rt_phi_grouped");
  phi.rotary_fraction = 0.25;
  check_round_trip(family_model(Layout::phi, phi), Layout::phi, "rt_phi");

  FamilyOptions opt;
  opt.embed_dim = 6;  // e != d: project_in drawn
  const Model op = family_model(Layout::opt, opt);
  REQUIRE(op.embeddings());
  CHECK(op.embeddings()->word.cols() == 6);
  check_round_trip(op, Layout::opt, "rt_opt_project");
  FamilyOptions post;
  post.pre_norm = false;
  const Model po = family_model(Layout::opt, post);
  CHECK(po.arch().variant.layernorm == LayerNormKind::post);
  check_round_trip(po, Layout::opt, "rt_opt_post");
}

TEST_CASE("GPT-NeoX, Phi, OPT: refused configurations name config.json and the key", "[checkpoint][hf]") {
  const NeoxSizes z;
  const std::vector<Tensor> ts = neox_tensors(z, "gpt_neox.", true);
  const auto refused = [&](const std::string& name, const std::function<void(json&)>& edit, const std::string& key,
                           std::initializer_list<std::string> parts) {
    const std::string dir = fresh(name);
    json c = neox_config(z);
    edit(c);
    write_folder(dir, ts, c);
    require_error([&] { load_model(dir); }, config_path(dir), key, parts);
  };
  refused("neox_rope_scaling", [](json& c) { c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; },
          "rope_scaling", {"null"});
  refused("neox_rope_type",
          [](json& c) { c["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 10000.0}}; },
          "rope_parameters.rope_type", {"default"});
  refused("neox_odd_r", [](json& c) { c["rotary_pct"] = 0.75; }, "rotary_pct", {"odd", "= 3"});
  refused("neox_odd_r_parameters",
          [](json& c) {
            c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500.0}, {"partial_rotary_factor", 0.25}};
          },
          "rope_parameters.partial_rotary_factor", {"odd"});
  refused("neox_fraction", [](json& c) { c["rotary_pct"] = 1.5; }, "rotary_pct", {"[0, 1]"});
  refused("neox_heads", [](json& c) { c["num_attention_heads"] = 3; }, "hidden_size", {"not divisible"});
  refused("neox_act", [](json& c) { c["hidden_act"] = "silu"; }, "hidden_act", {"silu"});

  SECTION("rope_parameters replaces rotary_pct and rotary_emb_base") {
    const std::string dir = fresh("neox_rope_parameters");
    json c = neox_config(z);
    c["rotary_pct"] = 0.75;  // would be odd: replaced
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500.0}, {"partial_rotary_factor", 1.0}};
    write_folder(dir, ts, c);
    const Model m = load_model(dir);
    CHECK(m.arch().rotated_dims() == 4);
    CHECK(*m.arch().rope_theta == 500.0);
  }
  SECTION("rotary_pct giving r = 0: no rotation") {
    const std::string dir = fresh("neox_no_rotary");
    json c = neox_config(z);
    c["rotary_pct"] = 0.2;  // int(4 · 0.2) = int(0.8) = 0
    write_folder(dir, ts, c);
    const Model m = load_model(dir);
    CHECK_FALSE(m.arch().rotary());
    CHECK(m.arch().rotary_dims == 0);
  }
  SECTION("mlp plain on a parallel block, another layernorm placement") {
    const std::string dir = fresh("neox_parallel_plain");
    write_folder(dir, ts, neox_config(z));
    const Model m = load_model(dir);
    VariantOverride plain;
    plain.mlp = MlpKind::plain;
    require_error([&] { m.resolve(plain); }, dir, "mlp", {"parallel block"});
    VariantOverride post;
    post.layernorm = LayerNormKind::post;
    require_error([&] { m.resolve(post); }, dir, "layernorm");
    const Model ph = family_model(Layout::phi, FamilyOptions{});
    CHECK_THROWS_AS(ph.resolve(plain), std::invalid_argument);
  }
  SECTION("Phi: qk_layernorm, num_key_value_heads not dividing num_attention_heads") {
    const Model ph = family_model(Layout::phi, FamilyOptions{});
    const std::string dir = fresh("phi_refusals");
    save_hf(ph, dir, Layout::phi, "F64");
    json c = read_json(config_path(dir));
    c["qk_layernorm"] = true;
    write_json(config_path(dir), c);
    require_error([&] { load_model(dir); }, config_path(dir), "qk_layernorm");
    c["qk_layernorm"] = false;
    c["num_key_value_heads"] = 3;
    write_json(config_path(dir), c);
    require_error([&] { load_model(dir); }, config_path(dir), "num_key_value_heads", {"does not divide"});
    c["num_key_value_heads"] = nullptr;  // null: H
    c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
    write_json(config_path(dir), c);
    require_error([&] { load_model(dir); }, config_path(dir), "rope_scaling");
    c["rope_scaling"] = nullptr;
    c["partial_rotary_factor"] = 0.375;  // int(8 · 0.375) = 3
    write_json(config_path(dir), c);
    require_error([&] { load_model(dir); }, config_path(dir), "partial_rotary_factor", {"odd"});
  }
  SECTION("writers refuse models the layout cannot express") {
    const std::string dir = fresh("refused_save");
    const Model grouped = family_model(Layout::phi, FamilyOptions{}, 2);
    require_error([&] { save_hf(grouped, dir, Layout::gpt_neox, "F64"); }, dir, "kv_heads");
    const Model rotary = family_model(Layout::gpt_neox, FamilyOptions{});
    require_error([&] { save_hf(rotary, dir, Layout::opt, "F64"); }, dir, "rope_theta");
    FamilyOptions seq;
    seq.parallel_residual = false;
    require_error([&] { save_hf(family_model(Layout::gpt_neox, seq), dir, Layout::phi, "F64"); }, dir,
                  "parallel_residual");
    RandomModelSpec s = family_spec(Layout::opt, FamilyOptions{});
    s.arch.ln_eps = 1e-6;
    require_error([&] { save_hf(random_model(s), dir, Layout::opt, "F64"); }, dir, "ln_eps", {"1e-5"});
  }
  SECTION("family options: odd r, a fraction outside [0, 1], options of another family") {
    RandomModelSpec s = family_spec(Layout::gpt_neox, FamilyOptions{});
    FamilyOptions o;
    o.rotary_fraction = 0.375;  // int(8 · 0.375) = 3
    CHECK_THROWS_WITH(family_structure(Layout::gpt_neox, s, o), Catch::Matchers::StartsWith("rotary_fraction:") &&
                                                                    Catch::Matchers::Contains("odd"));
    CHECK_THROWS_WITH(family_structure(Layout::phi, s, o), Catch::Matchers::StartsWith("rotary_fraction:"));
    o.rotary_fraction = 1.5;
    CHECK_THROWS_WITH(family_structure(Layout::gpt_neox, s, o), Catch::Matchers::Contains("[0, 1]"));
    FamilyOptions parallel;
    parallel.parallel_residual = true;
    CHECK_THROWS_WITH(family_structure(Layout::phi, s, parallel), Catch::Matchers::StartsWith("parallel_residual:"));
    FamilyOptions embed;
    embed.embed_dim = 0;
    CHECK_THROWS_WITH(family_structure(Layout::opt, s, embed), Catch::Matchers::StartsWith("embed_dim:"));
  }
}

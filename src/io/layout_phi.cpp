// Phi-1, Phi-1.5, Phi-2 (families.md, "GPT-NeoX (Pythia), Phi and OPT
// checkpoints" §3): torch Linear weights with biases, grouped key/value heads,
// partial rotary embeddings, and a parallel block fed by one LayerNorm:
// X' = X + Attn(LN X) + f(LN X), causal mask.
//
// Mapping onto the per-head form: query head h owns rows [h·d_h, (h+1)·d_h)
// of q_proj and columns of dense; key/value head g the same rows of k_proj,
// v_proj, copied into every query head h with ⌊h·H_kv/H⌋ = g (as the Llama
// family's). The layer's one input_layernorm is loaded into ln1 AND ln2
// (identical copies: the parallel block's two branches read LN_1 and LN_2);
// the writer stores it once and refuses a model whose ln1 and ln2 differ.
// fc1 / fc2 → W_1 / W_2; embed_tokens → the token rows. final_layernorm and
// lm_head are outside the analysed stack and ignored on reading.
//
// Refused, naming the config.json key: rope_scaling other than null,
// rope_parameters.rope_type other than "default", a rotary fraction outside
// [0, 1] or giving an odd r, hidden_size not divisible by
// num_attention_heads, num_attention_heads not divisible by
// num_key_value_heads, qk_layernorm true, an activation outside gelu,
// gelu_new, gelu_pytorch_tanh, relu.
#include "hf_layout.hpp"

#include <string>
#include <utility>

namespace sanpath::io {

namespace phi_layout {  // this file's pieces (named: the library compiles in unity batches)

/// The slots of layer l (names without the prefix); `a` gives the key/value
/// head of each query head.
void layer_slots(const Architecture& a, int l, LayerWeights& w, Slots& s) {
  const std::string p = "layers." + str(l) + ".";
  const std::int64_t d = a.d_model, ff = a.d_ff;
  w.heads.resize(static_cast<std::size_t>(a.heads));
  // One LayerNorm, read into both ln1 and ln2.
  Slot& g = s.add(p + "input_layernorm.weight", {d});
  Slot& b = s.add(p + "input_layernorm.bias", {d});
  for (VectorXd* v : {&w.ln1_g, &w.ln2_g}) g.pieces.push_back({nullptr, v, TensorBlock{0, 1, 0, d, true}});
  for (VectorXd* v : {&w.ln1_b, &w.ln2_b}) b.pieces.push_back({nullptr, v, TensorBlock{0, 1, 0, d, true}});
  s.grouped_attention(p + "self_attn.", a, w, true, "dense", true);
  s.dense(p + "mlp.fc1", Storage::linear, w.W_1, w.b_1, d, ff);
  s.dense(p + "mlp.fc2", Storage::linear, w.W_2, w.b_2, ff, d);
}

Model load(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& store,
           const std::string& source, const LoadOptions& options) {
  const TensorStore& f = *store;
  const std::string type = to_string(fam.layout);
  Architecture a;
  read_shape(c, bert_keys, a);  // hidden_size not divisible by num_attention_heads: refused
  const int H = a.heads;
  const int Hkv = c.positive_int_or("num_key_value_heads", H);
  if (Hkv > H || H % Hkv != 0)
    fail(c.path, "num_key_value_heads", str(Hkv) + " does not divide num_attention_heads = " + str(H));
  a.kv_heads = Hkv == H ? 0 : Hkv;  // null or H: no grouping
  a.d_ff = c.positive_int("intermediate_size");
  a.activation = c.activation("hidden_act", "gelu_new");
  a.ln_eps = c.eps_or("layer_norm_eps", 1e-5);
  if (c.bool_or("qk_layernorm", false))
    fail(c.path, "qk_layernorm", "true is not supported (no LayerNorm on queries and keys, families.md)");
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.norm = NormKind::layer;
  a.parallel_residual = true;
  a.own_norm_placement_only = true;
  const auto [r, base] = read_partial_rotary(c, a.d_qk, "partial_rotary_factor", 0.5, "rope_theta");
  set_partial_rotary(a, r, base);
  const std::string prefix = prefix_in_use(f, "model.");

  if (static_cast<std::size_t>(a.layers) > f.size())
    fail(c.path, "num_hidden_layers",
         str(a.layers) + " layers, but " + f.path() + " holds only " + std::to_string(f.size()) +
             " tensors (a layer has 14)");
  const LayerPrefix cut = layer_prefix(options, a.layers, c.path, "num_hidden_layers", source);
  a.layers = cut.layers;
  const LayerSlots slots_of = [a](int l, LayerWeights& w, Slots& s) { layer_slots(a, l, w, s); };
  Walk w = begin_walk(fam, c, store, prefix, options, a.layers, slots_of);
  add_word_table(w, "embed_tokens.weight", c.size_or_any("vocab_size"), a.d_model);
  return finish_walk(w, a, cut.source);
}

/// Embeddings whose X^0 is the token rows alone, unscaled (what embed_tokens holds).

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const Needs need{folder, type};
  const int L = a.layers, H = a.heads, Hkv = a.key_value_heads(), d = a.d_model, dh = a.d_qk;
  need.equal_heads(a);
  need(a.parallel_residual, "parallel_residual", "a parallel block (X' = X + Attn(LN X) + f(LN X))");
  need.only(a, written::rotary | written::parallel | written::grouped);
  need(a.activation != Activation::silu, "activation", "gelu, gelu_tanh (gelu_new) or relu");
  need.layer_norm_layers(model);
  for (int l = 0; l < L; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = "layer " + str(l) + " ";
    need(w.ln1_g == w.ln2_g && w.ln1_b == w.ln2_b, p + "ln2_g",
         "one LayerNorm per layer (input_layernorm feeds both branches); ln2 differs from ln1");
  }
  const auto& emb = model.embeddings();
  if (emb && !plain_token_rows(emb->kind))
    fail(folder, "embeddings",
         "kind " + to_string(emb->kind) + " cannot be written in the " + type +
             " layout (token rows alone, no positions)");

  const std::string p0 = fam.prefix;
  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  emit_layers(model, [&a](int l, LayerWeights& w, Slots& s) { layer_slots(a, l, w, s); }, p0, dtype, folder, ts);
  add(p0 + "final_layernorm.weight", VectorXd(VectorXd::Ones(d)));
  add(p0 + "final_layernorm.bias", VectorXd(VectorXd::Zero(d)));
  const int r = a.rotary() ? a.rotated_dims() : 0;
  json c = {{"architectures", {fam.architecture + "ForCausalLM"}},
            {"model_type", type},
            {"num_hidden_layers", L},
            {"num_attention_heads", H},
            {"num_key_value_heads", Hkv},
            {"hidden_size", d},
            {"intermediate_size", a.d_ff},
            {"hidden_act", hf_activation_name(a.activation)},
            {"layer_norm_eps", a.ln_eps},
            {"partial_rotary_factor", written_rotary_fraction(r, dh)},
            {"rope_theta", a.rotary() ? *a.rope_theta : 10000.0},
            {"rope_scaling", nullptr},
            {"qk_layernorm", false},
            {"max_position_embeddings", 2048},
            {"tie_word_embeddings", false},
            {"torch_dtype", dtype == "F64" ? "float64" : "float32"}};
  if (emb) {
    add(p0 + "embed_tokens.weight", emb->word);
    // The LM head (outside the analysis): the token table and a zero bias.
    add("lm_head.weight", emb->word);
    add("lm_head.bias", VectorXd(VectorXd::Zero(emb->word.rows())));
    c["vocab_size"] = emb->word.rows();
  }
  write_checkpoint(folder, ts, c);
}

void structure(RandomModelSpec& spec, const FamilyOptions& o) {
  Architecture& a = spec.arch;
  const int r = random_rotary_dims(o.rotary_fraction.value_or(0.5), a.d_qk);
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.norm = NormKind::layer;
  a.gated_mlp = false;
  a.parallel_residual = true;
  a.own_norm_placement_only = true;
  set_partial_rotary(a, r, a.rope_theta.value_or(10000.0));
}

}  // namespace phi_layout

Family phi_family() {
  using namespace phi_layout;
  Family f;
  f.layout = Layout::phi;
  f.prefix = "model.";
  f.model_types = {"phi"};
  f.display = "Phi";
  f.key_value_heads = true;
  f.architecture = "Phi";
  f.tensor_mark = ".self_attn.dense.";
  f.load = load;
  f.save = save;
  f.structure = structure;
  f.options = {"rotary_fraction"};
  return f;
}

}  // namespace sanpath::io

// GPT-NeoX / Pythia (families.md, "GPT-NeoX (Pythia), Phi and OPT
// checkpoints" §2): torch Linear weights ([out, in], y = x Wᵀ + b), LayerNorm
// with bias, partial rotary embeddings on the first r = int(d_h·rotary_pct)
// entries of each head, a parallel block (use_parallel_residual) or a
// sequential pre-LN one, causal mask.
//
// Mapping onto the per-head form: the fused query_key_value is interleaved
// PER HEAD, row h·3d_h + c·d_h + j holding entry j of head h's component c
// (0 query, 1 key, 2 value), so W_Q^h[:, j] = weight[h·3d_h + j, :] and so on
// (not GPT-2's [Q | K | V]); dense's columns [h·d_h, (h+1)·d_h) are W_O^h's
// rows; input_layernorm / post_attention_layernorm → ln1 / ln2;
// dense_h_to_4h / dense_4h_to_h → W_1 / W_2; embed_in → the token rows. With
// attention_bias false the query_key_value and dense biases are absent
// (zero). The tensors that do not feed the hidden states (final_layer_norm,
// embed_out) and the buffers of old files (attention.bias,
// attention.masked_bias, attention.rotary_emb.inv_freq, any dtype) are
// ignored: only the tensors named below are located and decoded.
//
// Refused, naming the config.json key: rope_scaling other than null,
// rope_parameters.rope_type other than "default", a rotary fraction outside
// [0, 1] or giving an odd r, hidden_size not divisible by
// num_attention_heads, an activation outside gelu, gelu_new,
// gelu_pytorch_tanh, relu.
#include "hf_layout.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace sanpath::io {

namespace gpt_neox_layout {  // this file's pieces (named: the library compiles in unity batches)

/// A double as JSON shows it (for messages).
std::string number(double x) { return brief(json(x)); }

}  // namespace gpt_neox_layout

// ---- partial rotary embeddings (families.md §1), shared with layout_phi.cpp ----

/// {r, ϑ}: r = int(d_h·φ) (the double product truncated toward zero) and the
/// base ϑ, from config.json's `fraction_key` and `base_key` (defaults
/// `fraction_default` and 10000), or from rope_parameters'
/// partial_rotary_factor and rope_theta where that object gives them.
/// Refuses, naming the key: rope_scaling not null, rope_parameters.rope_type
/// other than "default", φ outside [0, 1], ϑ not finite and > 0, an odd r.
std::pair<int, double> read_partial_rotary(const HfConfig& c, int dh, const std::string& fraction_key,
                                           double fraction_default, const std::string& base_key) {
  if (c.has("rope_scaling"))
    fail(c.path, "rope_scaling", brief(c.j.at("rope_scaling")) + " is not supported (null only, families.md)");
  std::string fkey = fraction_key, bkey = base_key;
  json fraction = c.has(fraction_key) ? c.j.at(fraction_key) : json(fraction_default);
  json base = c.has(base_key) ? c.j.at(base_key) : json(10000.0);
  if (c.has("rope_parameters")) {
    const json& rp = c.j.at("rope_parameters");
    if (!rp.is_object()) fail(c.path, "rope_parameters", "must be an object, got " + brief(rp));
    const auto given = [&](const char* k) { return rp.contains(k) && !rp.at(k).is_null(); };
    if (given("rope_type") && !(rp.at("rope_type").is_string() && rp.at("rope_type").get<std::string>() == "default"))
      fail(c.path, "rope_parameters.rope_type", brief(rp.at("rope_type")) + " is not supported (\"default\" only)");
    if (given("partial_rotary_factor")) {
      fraction = rp.at("partial_rotary_factor");
      fkey = "rope_parameters.partial_rotary_factor";
    }
    if (given("rope_theta")) {
      base = rp.at("rope_theta");
      bkey = "rope_parameters.rope_theta";
    }
  }
  if (!fraction.is_number() || !std::isfinite(fraction.get<double>()) || fraction.get<double>() < 0 ||
      fraction.get<double>() > 1)
    fail(c.path, fkey, "must be a number in [0, 1], got " + brief(fraction));
  if (!base.is_number() || !std::isfinite(base.get<double>()) || !(base.get<double>() > 0))
    fail(c.path, bkey, "must be a finite number > 0, got " + brief(base));
  const int r = static_cast<int>(static_cast<double>(dh) * fraction.get<double>());  // truncated toward zero
  if (r % 2 != 0)
    fail(c.path, fkey,
         brief(fraction) + " gives r = int(" + str(dh) + " · " + brief(fraction) + ") = " + str(r) +
             " rotary dimensions per head, an odd number (refused: rotary embeddings rotate pairs)");
  return {r, base.get<double>()};
}

/// a's rotary fields for r rotated entries per head: r = 0 none (rope_theta
/// unset); r = d_qk as rotary_dims 0 (the whole head); any other r as itself.
void set_partial_rotary(Architecture& a, int r, double base) {
  a.rotary_dims = 0;
  a.rope_theta.reset();
  if (r == 0) return;
  a.rope_theta = base;
  a.rotary_dims = r == a.d_qk ? 0 : r;
}

/// The fraction written for r of d_h: r/d_h, nudged up by an ulp where
/// d_h·φ would round below r, so that reading gives back int(d_h·φ) = r.
double written_rotary_fraction(int r, int dh) {
  double phi = static_cast<double>(r) / static_cast<double>(dh);
  while (static_cast<int>(static_cast<double>(dh) * phi) < r) phi = std::nextafter(phi, 2.0);
  return phi;
}

/// r = int(d_h·φ) for a random model's FamilyOptions::rotary_fraction φ;
/// std::invalid_argument("rotary_fraction: …") for φ outside [0, 1] or an odd r.
int random_rotary_dims(double phi, int dh) {
  using namespace gpt_neox_layout;
  if (!std::isfinite(phi) || phi < 0 || phi > 1)
    throw std::invalid_argument("rotary_fraction: " + number(phi) + " is outside [0, 1]");
  const int r = static_cast<int>(static_cast<double>(dh) * phi);
  if (r % 2 != 0)
    throw std::invalid_argument("rotary_fraction: " + number(phi) + " gives r = int(" + str(dh) + " · " + number(phi) +
                                ") = " + str(r) + " rotary dimensions per head, an odd number");
  return r;
}

namespace gpt_neox_layout {  // this file's pieces (named: the library compiles in unity batches)

/// The slots of layer l (names without the prefix).
void layer_slots(const Dims& k, bool attention_bias, int l, LayerWeights& w, Slots& s) {
  const std::string p = "layers." + str(l) + ".";
  const std::int64_t d = k.d, dh = k.dh;
  w.heads.resize(static_cast<std::size_t>(k.heads));
  s.layernorm(p + "input_layernorm", w.ln1_g, w.ln1_b, d, false);
  s.layernorm(p + "post_attention_layernorm", w.ln2_g, w.ln2_b, d, false);
  // Fused Q, K, V interleaved per head: rows [h·3d_h + c·d_h, h·3d_h + (c+1)·d_h).
  Slot& qkv = s.add(p + "attention.query_key_value.weight", {3 * d, d});
  Slot* qkv_b = attention_bias ? &s.add(p + "attention.query_key_value.bias", {3 * d}) : nullptr;
  for (int h = 0; h < k.heads; ++h) {
    HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
    MatrixXd* W[3] = {&hw.W_Q, &hw.W_K, &hw.W_V};
    VectorXd* b[3] = {&hw.b_Q, &hw.b_K, &hw.b_V};
    for (int c = 0; c < 3; ++c) {
      const std::int64_t row = (3 * std::int64_t(h) + c) * dh;
      qkv.pieces.push_back({W[c], nullptr, TensorBlock{row, dh, 0, d, true}});
      if (qkv_b)
        qkv_b->pieces.push_back({nullptr, b[c], TensorBlock{0, 1, row, dh, true}});
      else
        *b[c] = VectorXd::Zero(dh);
    }
  }
  // dense [d, d]: head h owns its columns [h·d_h, (h+1)·d_h) (rows of M).
  Slot& dense = s.add(p + "attention.dense.weight", {d, d});
  for (int h = 0; h < k.heads; ++h)
    dense.pieces.push_back({&w.heads[static_cast<std::size_t>(h)].W_O, nullptr,
                            TensorBlock{0, d, std::int64_t(h) * dh, dh, true}});
  if (attention_bias)
    s.vector(p + "attention.dense.bias", w.b_O, d);
  else
    w.b_O = VectorXd::Zero(d);
  s.dense(p + "mlp.dense_h_to_4h", Storage::linear, w.W_1, w.b_1, d, k.ff);
  s.dense(p + "mlp.dense_4h_to_h", Storage::linear, w.W_2, w.b_2, k.ff, d);
}

Model load(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& store,
           const std::string& source, const LoadOptions& options) {
  const TensorStore& f = *store;
  const std::string type = to_string(fam.layout);
  Architecture a;
  read_shape(c, bert_keys, a);  // hidden_size not divisible by num_attention_heads: refused
  a.d_ff = c.positive_int("intermediate_size");
  a.activation = c.activation("hidden_act", "gelu");
  a.ln_eps = c.eps_or("layer_norm_eps", 1e-5);
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.norm = NormKind::layer;
  a.parallel_residual = c.bool_or("use_parallel_residual", true);
  a.own_norm_placement_only = true;
  const auto [r, base] = read_partial_rotary(c, a.d_qk, "rotary_pct", 0.25, "rotary_emb_base");
  set_partial_rotary(a, r, base);
  const bool attention_bias = c.bool_or("attention_bias", true);
  const std::string prefix = prefix_in_use(f, "gpt_neox.");

  if (static_cast<std::size_t>(a.layers) > f.size())
    fail(c.path, "num_hidden_layers",
         str(a.layers) + " layers, but " + f.path() + " holds only " + std::to_string(f.size()) +
             " tensors (a layer has " + (attention_bias ? "12" : "10") + ")");
  const LayerPrefix cut = layer_prefix(options, a.layers, c.path, "num_hidden_layers", source);
  a.layers = cut.layers;
  const Dims k{a.heads, a.d_model, a.d_qk, a.d_ff};
  const LayerSlots slots_of = [k, attention_bias](int l, LayerWeights& w, Slots& s) {
    layer_slots(k, attention_bias, l, w, s);
  };
  Walk w = begin_walk(fam, c, store, prefix, options, a.layers, slots_of);
  add_word_table(w, "embed_in.weight", c.size_or_any("vocab_size"), a.d_model);
  return finish_walk(w, a, cut.source);
}

/// Embeddings whose X^0 is the token rows alone, unscaled (what embed_in holds).

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const Needs need{folder, type};
  need.equal_heads(a);
  need.only(a, written::rotary | written::parallel);
  need(a.activation != Activation::silu, "activation", "gelu, gelu_tanh (gelu_new) or relu");
  need.layer_norm_layers(model);
  const int L = a.layers, H = a.heads, d = a.d_model, dh = a.d_qk, ff = a.d_ff;
  const auto& emb = model.embeddings();
  if (emb && !plain_token_rows(emb->kind))
    fail(folder, "embeddings",
         "kind " + to_string(emb->kind) + " cannot be written in the " + type +
             " layout (token rows alone, no positions)");

  const std::string p0 = fam.prefix;
  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  const Dims k{H, d, dh, ff};
  emit_layers(model, [k](int l, LayerWeights& w, Slots& s) { layer_slots(k, true, l, w, s); }, p0, dtype, folder, ts);
  add(p0 + "final_layer_norm.weight", VectorXd(VectorXd::Ones(d)));
  add(p0 + "final_layer_norm.bias", VectorXd(VectorXd::Zero(d)));
  const int r = a.rotary() ? a.rotated_dims() : 0;
  json c = {{"architectures", {fam.architecture + "ForCausalLM"}},
            {"model_type", type},
            {"num_hidden_layers", L},
            {"num_attention_heads", H},
            {"hidden_size", d},
            {"intermediate_size", ff},
            {"hidden_act", hf_activation_name(a.activation)},
            {"rotary_pct", written_rotary_fraction(r, dh)},
            {"rotary_emb_base", a.rotary() ? *a.rope_theta : 10000.0},
            {"rope_scaling", nullptr},
            {"layer_norm_eps", a.ln_eps},
            {"use_parallel_residual", a.parallel_residual},
            {"attention_bias", true},
            {"max_position_embeddings", 2048},
            {"tie_word_embeddings", false},
            {"torch_dtype", dtype == "F64" ? "float64" : "float32"}};
  if (emb) {
    add(p0 + "embed_in.weight", emb->word);
    add("embed_out.weight", emb->word);  // the LM head (outside the analysis): the token table
    c["vocab_size"] = emb->word.rows();
  }
  write_checkpoint(folder, ts, c);
}

void structure(RandomModelSpec& spec, const FamilyOptions& o) {
  Architecture& a = spec.arch;
  const int r = random_rotary_dims(o.rotary_fraction.value_or(0.25), a.d_qk);
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.norm = NormKind::layer;
  a.gated_mlp = false;
  a.parallel_residual = o.parallel_residual.value_or(true);
  a.own_norm_placement_only = true;
  set_partial_rotary(a, r, a.rope_theta.value_or(10000.0));
}

}  // namespace gpt_neox_layout

Family gpt_neox_family() {
  using namespace gpt_neox_layout;
  Family f;
  f.layout = Layout::gpt_neox;
  f.prefix = "gpt_neox.";
  f.model_types = {"gpt_neox"};
  f.display = "GPT-NeoX";
  f.architecture = "GPTNeoX";
  f.tensor_mark = ".attention.query_key_value.";
  f.load = load;
  f.save = save;
  f.structure = structure;
  f.options = {"rotary_fraction", "parallel_residual"};
  return f;
}

}  // namespace sanpath::io

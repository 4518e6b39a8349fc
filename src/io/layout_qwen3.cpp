// Qwen3 (families.md, "Qwen3 and Gemma 3 (text) — query/key norms" §2):
// math.md §8's Llama layer with a query/key norm. torch Linear weights
// ([out, in], y = x Wᵀ), RMSNorm with the stored gain w, rotary positions on
// the whole head with one base, grouped-query attention with head_dim read
// from config.json (default 128, independent of d/H), a SwiGLU MLP and
// unscaled token embeddings.
//
// The layers' tensors are read and written through the slots of
// hf_layout.hpp's LlamaShapedLayer (with the query/key norm).
//
// Mapping onto the per-head form: query head h owns rows [h·d_h, (h+1)·d_h)
// of q_proj and the same columns of o_proj; key/value head g the rows
// [g·d_h, (g+1)·d_h) of k_proj, v_proj, copied into every query head h with
// ⌊h·H_kv/H⌋ = g. self_attn.q_norm / k_norm → LayerWeights::q_norm / k_norm
// (Architecture::query_key_norm, gain w, eps rms_norm_eps). gate_proj →
// W_gate, up_proj → W_1, down_proj → W_2 (no MLP biases);
// input_layernorm → ln1, post_attention_layernorm (before the MLP) → ln2,
// ln*_b zero. attention_bias gives q, k, v and o their biases. model.norm
// and lm_head are ignored; the writer stores a unit model.norm and ties the
// LM head. What families.md §6 refuses is refused naming the config key.
#include "hf_layout.hpp"

#include <cmath>
#include <string>

namespace sanpath::io {

namespace qwen3_layout {  // this file's pieces (named: the library compiles in unity batches)

/// The one rope_type families.md accepts for Qwen3, from an object of
/// config.json (rope_scaling or rope_parameters) named `key`.
void require_default_rope_type(const HfConfig& c, const std::string& key, const json& v) {
  for (const char* k : {"rope_type", "type"})
    if (v.contains(k) && !(v.at(k).is_string() && v.at(k).get<std::string>() == "default"))
      fail(c.path, key, std::string(k) + " " + brief(v.at(k)) + " is not supported (\"default\" only: no scaled rotary)");
}

/// θ: rope_theta, or rope_parameters.rope_theta (5.x files); both present must agree.
double rope_theta(const HfConfig& c) {
  if (c.has("rope_scaling")) {
    const json& v = c.j.at("rope_scaling");
    if (!v.is_object()) fail(c.path, "rope_scaling", brief(v) + " is not supported (null or {\"rope_type\": \"default\"})");
    for (auto it = v.begin(); it != v.end(); ++it)
      if (it.key() != "rope_type" && it.key() != "type")
        fail(c.path, "rope_scaling", brief(v) + " is not supported (null or {\"rope_type\": \"default\"})");
    require_default_rope_type(c, "rope_scaling", v);
  }
  double theta = c.positive_number_or("rope_theta", 10000.0);
  if (c.has("rope_parameters")) {
    const json& rp = c.j.at("rope_parameters");
    if (!rp.is_object()) fail(c.path, "rope_parameters", "must be an object, got " + brief(rp));
    require_default_rope_type(c, "rope_parameters", rp);
    if (rp.contains("partial_rotary_factor") && !rp.at("partial_rotary_factor").is_null() &&
        rp.at("partial_rotary_factor") != json(1) && rp.at("partial_rotary_factor") != json(1.0))
      fail(c.path, "rope_parameters",
           "partial_rotary_factor " + brief(rp.at("partial_rotary_factor")) + " is not supported (the whole head is rotated)");
    if (rp.contains("rope_theta") && !rp.at("rope_theta").is_null()) {
      const json& t = rp.at("rope_theta");
      if (!t.is_number() || !std::isfinite(t.get<double>()) || !(t.get<double>() > 0))
        fail(c.path, "rope_parameters", "rope_theta must be a finite number > 0, got " + brief(t));
      if (c.has("rope_theta") && t.get<double>() != theta)
        fail(c.path, "rope_parameters",
             "rope_theta " + brief(t) + " disagrees with rope_theta " + brief(c.j.at("rope_theta")));
      theta = t.get<double>();
    }
  }
  if (c.has("partial_rotary_factor") && c.positive_number_or("partial_rotary_factor", 1.0) != 1.0)
    fail(c.path, "partial_rotary_factor",
         brief(c.j.at("partial_rotary_factor")) + " is not supported (the whole head is rotated)");
  return theta;
}

Model load(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& store,
           const std::string& source, const LoadOptions& options) {
  const TensorStore& f = *store;
  const std::string& config_path = c.path;
  const int L = c.positive_int("num_hidden_layers");
  const int H = c.positive_int("num_attention_heads");
  const int d = c.positive_int("hidden_size");
  const int ff = c.positive_int("intermediate_size");
  const int Hkv = c.positive_int_or("num_key_value_heads", H);  // null means H too
  if (Hkv > H || H % Hkv != 0)
    fail(config_path, "num_key_value_heads", str(Hkv) + " does not divide num_attention_heads = " + str(H));
  if (c.j.contains("head_dim") && c.j.at("head_dim").is_null())
    fail(config_path, "head_dim", "null is not supported (give the width of a head; absent means 128)");
  const int dh = c.positive_int_or("head_dim", 128);
  if (dh % 2 != 0) fail(config_path, "head_dim", str(dh) + " is odd; rotary embeddings rotate pairs");
  const std::string act = c.string_or("hidden_act", "silu");
  if (act != "silu") fail(config_path, "hidden_act", "'" + act + "' is not supported (silu only)");
  const double theta = rope_theta(c);
  if (c.bool_or("use_sliding_window", false))
    fail(config_path, "use_sliding_window",
         "true is not supported (how HuggingFace assigns the window to layers, and its mask, changed across versions)");
  if (c.has("layer_types")) {
    const json& v = c.j.at("layer_types");
    if (!v.is_array()) fail(config_path, "layer_types", "must be a list of " + str(L) + " layer types, got " + brief(v));
    if (v.size() != static_cast<std::size_t>(L))
      fail(config_path, "layer_types", "has " + std::to_string(v.size()) + " entries for num_hidden_layers = " + str(L));
    for (std::size_t l = 0; l < v.size(); ++l)
      if (v.at(l) != json("full_attention"))
        fail(config_path, "layer_types",
             "entry " + std::to_string(l) + " is " + brief(v.at(l)) + " (full_attention only: no sliding window)");
  }
  const bool bias = c.bool_or("attention_bias", false);  // q, k, v and o alike
  const double eps = c.eps_or("rms_norm_eps", 1e-6);

  Architecture a = llama_shaped_architecture(L, H, Hkv, d, dh, ff, eps);
  a.activation = Activation::silu;
  a.rope_theta = theta;
  a.own_norm_placement_only = true;
  a.query_key_norm = Architecture::QueryKeyNorm{eps, false};

  const LlamaShapedLayer shape{bias, bias, true, false};
  const LayerPrefix cut = shape.kept_layers(f, L, config_path, options, source, "qwen3");
  a.layers = cut.layers;
  const std::string prefix = prefix_in_use(f, "model.");  // a Qwen3Model saved on its own has none
  Walk w = begin_walk(fam, c, store, prefix, options, a.layers, shape.layer_slots(a));
  // E[ids], unscaled; vocab_size is required when the file has the table.
  if (f.find(prefix + "embed_tokens.weight")) add_word_table(w, "embed_tokens.weight", c.positive_int("vocab_size"), d);
  return finish_walk(w, a, cut.source);
}

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const Needs need{folder, type};
  need(a.norm == NormKind::rms && !a.norm_unit_offset, "norm", "RMSNorm with the stored gain w");
  need(a.query_key_norm && !a.query_key_norm->unit_offset, "query_key_norm", "a query/key norm with the stored gain w");
  need(a.query_key_norm->eps == a.ln_eps, "query_key_norm.eps", "the query/key norm's eps equal to ln_eps (one rms_norm_eps)");
  require_llama_shaped(a, folder, type, 0);
  need(a.gated_mlp && a.activation == Activation::silu, "activation", "a gated MLP with silu (SwiGLU)");
  const int d = a.d_model;
  const bool bias = llama_shaped_layers_have_bias(model, folder, type);
  const auto& emb = model.embeddings();
  if (emb && emb->kind != Layout::qwen3 && !rotary_family(emb->kind))
    fail(folder, "embeddings", "kind " + to_string(emb->kind) + " cannot be written in the " + type + " layout");

  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  emit_layers(model, LlamaShapedLayer{bias, bias, true, false}.layer_slots(a), "model.", dtype, folder, ts);
  add("model.norm.weight", VectorXd(VectorXd::Ones(d)));
  json c = llama_shaped_config(a, "Qwen3ForCausalLM", "qwen3", dtype);
  c["hidden_act"] = "silu";
  c["attention_bias"] = bias;
  c["use_sliding_window"] = false;
  if (emb) {
    add("model.embed_tokens.weight", emb->word);
    c["vocab_size"] = emb->word.rows();
  }
  write_checkpoint(folder, ts, c);
}

/// A random Qwen3's structure (families.md §2) on spec.arch: the sizes,
/// rope_theta and ln_eps kept.
void structure(RandomModelSpec& spec, const FamilyOptions&) {
  Architecture& a = spec.arch;
  if (a.activation != Activation::silu)
    throw std::invalid_argument("activation: the qwen3 layout takes silu (SwiGLU), not " + to_string(a.activation));
  llama_shaped_structure(a, "qwen3", 10000.0);
  a.query_key_norm = Architecture::QueryKeyNorm{a.ln_eps, false};
}

}  // namespace qwen3_layout

Family qwen3_family() {
  Family f;
  f.layout = Layout::qwen3;
  f.prefix = "model.";
  f.model_types = {"qwen3"};
  f.display = "Qwen3";
  f.key_value_heads = true;
  f.architecture = "Qwen3For";  // not Qwen3MoeForCausalLM
  f.tensor_mark = ".self_attn.q_norm.";
  f.load = qwen3_layout::load;
  f.save = qwen3_layout::save;
  f.structure = qwen3_layout::structure;
  return f;
}

}  // namespace sanpath::io

// Qwen3 (families.md, "Qwen3 and Gemma 3 (text) — query/key norms" §2):
// math.md §8's Llama layer with a query/key norm. torch Linear weights
// ([out, in], y = x Wᵀ), RMSNorm with the stored gain w, rotary positions on
// the whole head with one base, grouped-query attention with head_dim read
// from config.json (default 128, independent of d/H), a SwiGLU MLP and
// unscaled token embeddings.
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

  Architecture a;
  a.layers = L;
  a.heads = H;
  a.d_model = d;
  a.d_qk = a.d_v = dh;
  a.d_ff = ff;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.activation = Activation::silu;
  a.ln_eps = eps;
  a.norm = NormKind::rms;
  a.kv_heads = Hkv;
  a.rope_theta = theta;
  a.gated_mlp = true;
  a.own_norm_placement_only = true;
  a.query_key_norm = Architecture::QueryKeyNorm{eps, false};

  if (static_cast<std::size_t>(L) > f.size())
    fail(config_path, "num_hidden_layers",
         str(L) + " layers, but " + f.path() + " holds only " + std::to_string(f.size()) +
             " tensors (a qwen3 layer has 11)");
  const LayerPrefix cut = layer_prefix(options, L, config_path, "num_hidden_layers", source);
  a.layers = cut.layers;
  const std::string prefix = prefix_in_use(f, "model.");  // a Qwen3Model saved on its own has none
  // Layer l's slots (kept by a streamed model: everything by value).
  const LayerSlots slots_of = [a, d, dh, ff, bias](int l, LayerWeights& w, Slots& s) {
    const std::string p = "layers." + str(l) + ".";
    s.grouped_attention(p + "self_attn.", a, w, bias, "o_proj", bias);
    s.vector(p + "self_attn.q_norm.weight", w.q_norm, dh);
    s.vector(p + "self_attn.k_norm.weight", w.k_norm, dh);
    s.gated_mlp(p + "mlp.", w, d, ff);
    s.vector(p + "input_layernorm.weight", w.ln1_g, d);
    s.vector(p + "post_attention_layernorm.weight", w.ln2_g, d);
    w.ln1_b = w.ln2_b = VectorXd::Zero(d);
  };
  Walk w = begin_walk(fam, c, store, prefix, options, a.layers, slots_of);
  // E[ids], unscaled; vocab_size is required when the file has the table.
  if (f.find(prefix + "embed_tokens.weight")) add_word_table(w, "embed_tokens.weight", c.positive_int("vocab_size"), d);
  return finish_walk(w, a, cut.source);
}

bool is_zero(const VectorXd& v) { return (v.array() == 0).all(); }

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const auto need = [&](bool ok, const std::string& field, const std::string& what) {
    if (!ok) fail(folder, field, "the " + type + " layout needs " + what);
  };
  need(a.norm == NormKind::rms && !a.norm_unit_offset, "norm", "RMSNorm with the stored gain w");
  need(a.query_key_norm && !a.query_key_norm->unit_offset, "query_key_norm", "a query/key norm with the stored gain w");
  need(a.query_key_norm->eps == a.ln_eps, "query_key_norm.eps", "the query/key norm's eps equal to ln_eps (one rms_norm_eps)");
  need(a.rotary() && a.layer_rotary.empty(), "rope_theta", "rotary embeddings with one base");
  need(a.rotary_dims == 0 || a.rotary_dims == a.d_qk, "rotary_dims", "rotary embeddings on the whole head");
  need(a.gated_mlp && a.activation == Activation::silu, "activation", "a gated MLP with silu (SwiGLU)");
  need(a.d_qk == a.d_v, "d_v", "d_v = d_qk (head_dim)");
  need(!a.parallel_residual, "parallel_residual", "sequential attention and MLP halves");
  need(!a.sandwich_norms, "sandwich_norms", "two norms per layer");
  need(!a.score_scale_base, "score_scale_base", "the score scale head_dim^(-1/2)");
  need(!a.softcap, "softcap", "no logit soft-cap");
  need(a.attention_window == 0, "attention_window", "no sliding window");
  need(a.rel_buckets == 0, "rel_buckets", "no relative position bias");
  need(!a.xlnet_relative, "xlnet_relative", "no relative attention terms");
  const int L = a.layers, H = a.heads, Hkv = a.key_value_heads(), d = a.d_model, dh = a.d_qk;
  bool bias = false;
  for (int l = 0; l < L; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = "layer " + str(l) + " ";
    need(w.has_mlp() && w.gated(), p + "W_gate", "gated MLP weights");
    need(w.has_layernorm(), p + "ln1_g", "RMSNorm weights");
    need(is_zero(w.ln1_b) && is_zero(w.ln2_b), p + "ln1_b", "zero RMSNorm biases");
    need(is_zero(w.b_1) && is_zero(w.b_2), p + "b_1", "zero MLP biases");
    bias = bias || !is_zero(w.b_O);
    for (const HeadWeights& hw : w.heads) bias = bias || !is_zero(hw.b_Q) || !is_zero(hw.b_K) || !is_zero(hw.b_V);
  }
  const auto& emb = model.embeddings();
  if (emb && emb->kind != Layout::qwen3 && !rotary_family(emb->kind))
    fail(folder, "embeddings", "kind " + to_string(emb->kind) + " cannot be written in the " + type + " layout");

  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  for (int l = 0; l < L; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = "model.layers." + str(l) + ".";
    const auto [Wq, Wk, Wv, Wo, bq, bk, bv] = projections_of(a, w);
    add(p + "input_layernorm.weight", w.ln1_g);
    add(p + "self_attn.q_proj.weight", MatrixXd(Wq.transpose()));
    add(p + "self_attn.k_proj.weight", MatrixXd(Wk.transpose()));
    add(p + "self_attn.v_proj.weight", MatrixXd(Wv.transpose()));
    add(p + "self_attn.o_proj.weight", MatrixXd(Wo.transpose()));
    if (bias) {
      add(p + "self_attn.q_proj.bias", bq);
      add(p + "self_attn.k_proj.bias", bk);
      add(p + "self_attn.v_proj.bias", bv);
      add(p + "self_attn.o_proj.bias", w.b_O);
    }
    add(p + "self_attn.q_norm.weight", w.q_norm);
    add(p + "self_attn.k_norm.weight", w.k_norm);
    add(p + "post_attention_layernorm.weight", w.ln2_g);
    add(p + "mlp.gate_proj.weight", MatrixXd(w.W_gate.transpose()));
    add(p + "mlp.up_proj.weight", MatrixXd(w.W_1.transpose()));
    add(p + "mlp.down_proj.weight", MatrixXd(w.W_2.transpose()));
  }
  add("model.norm.weight", VectorXd(VectorXd::Ones(d)));
  json c = {{"architectures", {"Qwen3ForCausalLM"}},
            {"model_type", "qwen3"},
            {"num_hidden_layers", L},
            {"num_attention_heads", H},
            {"num_key_value_heads", Hkv},
            {"hidden_size", d},
            {"head_dim", dh},
            {"intermediate_size", a.d_ff},
            {"hidden_act", "silu"},
            {"rms_norm_eps", a.ln_eps},
            {"rope_theta", *a.rope_theta},
            {"rope_scaling", nullptr},
            {"attention_bias", bias},
            {"use_sliding_window", false},
            {"tie_word_embeddings", true},
            {"torch_dtype", dtype == "F64" ? "float64" : "float32"}};
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
  if (a.d_v != a.d_qk)
    throw std::invalid_argument("d_v: the qwen3 layout needs d_v = d_qk (head_dim), got d_qk " +
                                std::to_string(a.d_qk) + ", d_v " + std::to_string(a.d_v));
  if (a.d_qk % 2 != 0)
    throw std::invalid_argument("d_qk: the qwen3 layout rotates pairs; head_dim must be even, got " +
                                std::to_string(a.d_qk));
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.norm = NormKind::rms;
  a.norm_unit_offset = false;
  a.gated_mlp = true;
  if (!a.rope_theta) a.rope_theta = 10000.0;
  a.rotary_dims = 0;
  a.layer_rotary.clear();
  a.parallel_residual = false;
  a.own_norm_placement_only = true;
  a.sandwich_norms = false;
  a.score_scale_base.reset();
  a.softcap.reset();
  a.attention_window = 0;
  a.window_layers.clear();
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

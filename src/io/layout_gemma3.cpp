// Gemma 3, text (families.md, "Qwen3 and Gemma 3 (text) — query/key norms"
// §3): `model_type` gemma3_text, and the language model of a gemma3
// (multimodal) file on token input. Gemma 2's layer (four RMSNorms with gains
// 1 + w, GeGLU, √d-scaled token embeddings, the score scale
// query_pre_attn_scalar^(−1/2), a window on the sliding layers) with a
// query/key norm (gain 1 + w), no soft-cap, and rotary per layer type: the
// sliding layers rotate with rope_local_base_freq, the full-attention ones
// with rope_theta and a linear rope_scaling factor.
//
// The layers' tensors are read and written through the slots of
// hf_layout.hpp's LlamaShapedLayer (four norms, the query/key norm).
//
// Mapping onto the per-head form: as Gemma 2's (layout_gemma.cpp):
// input_layernorm → ln1, post_attention_layernorm (on the attention output) →
// ln3, pre_feedforward_layernorm → ln2, post_feedforward_layernorm → ln4;
// self_attn.q_norm / k_norm → LayerWeights::q_norm / k_norm
// (Architecture::query_key_norm, unit offset, eps rms_norm_eps). The layer
// pattern becomes Architecture::window_layers (with attention_window W) and
// the bases and factors Architecture::layer_rotary (left empty where every
// layer has rope_theta and factor 1). A gemma3 file's image_token_index
// becomes Embeddings::placeholder_id. The final norm, lm_head and a
// multimodal file's vision tower and projector are ignored. What families.md
// §6 refuses is refused naming the config key.
#include "hf_layout.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace sanpath::io {

namespace gemma3_layout {  // this file's pieces (named: the library compiles in unity batches)

/// The keys of Gemma3TextConfig's table that null does not stand for
/// anything in (families.md §3): present with null, they are refused.
const char* const kNotNull[] = {"vocab_size",          "hidden_size",       "intermediate_size",
                                "num_hidden_layers",   "num_attention_heads", "num_key_value_heads",
                                "head_dim",            "hidden_activation", "rms_norm_eps",
                                "rope_theta",          "rope_local_base_freq", "query_pre_attn_scalar"};

/// A rotary base and linear factor (θ_t, f_t).
using Rotary = std::pair<double, double>;

double positive_in(const HfConfig& c, const std::string& key, const json& v, const std::string& name) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
    fail(c.path, key, name + " must be a finite number > 0, got " + brief(v));
  return v.get<double>();
}

/// The factor of a rope_scaling object or of a rope_parameters entry
/// (`key` names it): "default" gives 1, "linear" its factor (≥ 1); its
/// keys are rope_type, type, factor, and rope_theta where `theta_allowed`.
double linear_factor(const HfConfig& c, const std::string& key, const json& v, bool theta_allowed) {
  if (!v.is_object()) fail(c.path, key, "must be an object or null, got " + brief(v));
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it.key() != "rope_type" && it.key() != "type" && it.key() != "factor" &&
        !(theta_allowed && it.key() == "rope_theta"))
      fail(c.path, key,
           "key '" + it.key() + "' is not supported (rope_type, type, factor" + (theta_allowed ? ", rope_theta" : "") +
               ")");
  const json* type = nullptr;
  for (const char* k : {"rope_type", "type"})
    if (v.contains(k) && !v.at(k).is_null()) {
      type = &v.at(k);
      break;
    }
  if (!type) fail(c.path, key, "has no rope_type");
  if (!type->is_string()) fail(c.path, key, "rope_type must be a string, got " + brief(*type));
  const std::string t = type->get<std::string>();
  if (t == "default") return 1.0;
  if (t != "linear") fail(c.path, key, "rope_type '" + t + "' is not supported (default, linear)");
  if (!v.contains("factor") || !v.at("factor").is_number() || !std::isfinite(v.at("factor").get<double>()) ||
      !(v.at("factor").get<double>() >= 1))
    fail(c.path, key, "the linear factor must be a number >= 1, got " + (v.contains("factor") ? brief(v.at("factor")) : "none"));
  return v.at("factor").get<double>();
}

/// (θ, f) of the full-attention and of the sliding layers, from rope_theta,
/// rope_local_base_freq and rope_scaling, or from rope_parameters keyed by
/// layer type (5.x); where both forms are given they must agree.
std::pair<Rotary, Rotary> rotaries(const HfConfig& c) {
  if (c.has("partial_rotary_factor") && c.positive_number_or("partial_rotary_factor", 1.0) != 1.0)
    fail(c.path, "partial_rotary_factor",
         brief(c.j.at("partial_rotary_factor")) + " is not supported (the whole head is rotated)");
  Rotary full{c.positive_number_or("rope_theta", 1000000.0), 1.0};
  Rotary sliding{c.positive_number_or("rope_local_base_freq", 10000.0), 1.0};
  if (c.has("rope_scaling")) full.second = linear_factor(c, "rope_scaling", c.j.at("rope_scaling"), false);
  if (!c.has("rope_parameters")) return {full, sliding};
  const json& rp = c.j.at("rope_parameters");
  if (!rp.is_object()) fail(c.path, "rope_parameters", "must be an object keyed by layer type, got " + brief(rp));
  for (auto it = rp.begin(); it != rp.end(); ++it)
    if (it.key() != "full_attention" && it.key() != "sliding_attention")
      fail(c.path, "rope_parameters",
           "is not keyed by layer type (full_attention, sliding_attention): key '" + it.key() + "'");
  const auto entry = [&](const char* type, Rotary legacy, bool theta_given, bool factor_given,
                         const char* theta_key) -> Rotary {
    if (!rp.contains(type)) return legacy;
    const std::string key = std::string("rope_parameters.") + type;
    const json& e = rp.at(type);
    Rotary r{legacy.first, linear_factor(c, key, e, true)};
    if (e.contains("rope_theta") && !e.at("rope_theta").is_null()) {
      r.first = positive_in(c, key, e.at("rope_theta"), "rope_theta");
      if (theta_given && r.first != legacy.first)
        fail(c.path, key, "rope_theta " + brief(e.at("rope_theta")) + " disagrees with " + theta_key + " " +
                              brief(c.j.at(theta_key)));
    }
    if (factor_given && r.second != legacy.second)
      fail(c.path, key, "disagrees with rope_scaling " + brief(c.j.at("rope_scaling")));
    return r;
  };
  full = entry("full_attention", full, c.has("rope_theta"), c.has("rope_scaling"), "rope_theta");
  sliding = entry("sliding_attention", sliding, c.has("rope_local_base_freq"), false, "rope_local_base_freq");
  return {full, sliding};
}

/// Which of the L layers slide: layer_types, or else layer l attends fully
/// iff (l + 1) mod P = 0, P = sliding_window_pattern.
std::vector<bool> sliding_layers(const HfConfig& c, int L) {
  std::vector<bool> out(static_cast<std::size_t>(L));
  if (c.has("layer_types")) {
    const json& v = c.j.at("layer_types");
    if (!v.is_array()) fail(c.path, "layer_types", "must be a list of " + str(L) + " layer types, got " + brief(v));
    if (v.size() != static_cast<std::size_t>(L))
      fail(c.path, "layer_types", "has " + std::to_string(v.size()) + " entries for num_hidden_layers = " + str(L));
    for (int l = 0; l < L; ++l) {
      const json& e = v.at(static_cast<std::size_t>(l));
      const std::string s = e.is_string() ? e.get<std::string>() : std::string();
      if (s != "sliding_attention" && s != "full_attention")
        fail(c.path, "layer_types", "entry " + str(l) + " is " + brief(e) + " (sliding_attention or full_attention only)");
      out[static_cast<std::size_t>(l)] = s == "sliding_attention";
    }
    return out;
  }
  if (c.j.contains("sliding_window_pattern") && c.j.at("sliding_window_pattern").is_null())
    fail(c.path, "sliding_window_pattern", "null is not supported without layer_types (a positive integer; absent: 6)");
  const int P = c.positive_int_or("sliding_window_pattern", 6);
  if (c.has("_sliding_window_pattern")) {
    const json& v = c.j.at("_sliding_window_pattern");
    if (v != json(P))
      fail(c.path, "_sliding_window_pattern",
           brief(v) + " contradicts sliding_window_pattern " + str(P) + " (ambiguous layer pattern)");
  }
  for (int l = 0; l < L; ++l) out[static_cast<std::size_t>(l)] = (l + 1) % P != 0;
  return out;
}

/// a.layer_rotary for the sliding layers `sliding` (a.layers entries):
/// empty where every layer would have a.rope_theta and factor 1.
void set_layer_rotary(Architecture& a, const std::vector<bool>& sliding, Rotary full, Rotary local) {
  a.rope_theta = full.first;
  a.layer_rotary.clear();
  bool uniform = true;
  for (int l = 0; l < a.layers; ++l) {
    const Rotary r = sliding[static_cast<std::size_t>(l)] ? local : full;
    a.layer_rotary.push_back({r.first, r.second});
    uniform = uniform && r.first == full.first && r.second == 1.0;
  }
  if (uniform) a.layer_rotary.clear();
}

Model load(const Family& fam, const HfConfig& outer, const std::shared_ptr<const TensorStore>& store,
           const std::string& source, const LoadOptions& options) {
  const TensorStore& f = *store;
  // A multimodal gemma3 file: the language model its text_config describes.
  const bool multimodal = outer.string_or("model_type", "") == "gemma3";
  std::optional<long> image_token;
  HfConfig c = outer;
  if (multimodal) {
    if (!outer.j.contains("text_config") || !outer.j.at("text_config").is_object())
      fail(outer.path, "text_config",
           "missing or not an object (a gemma3 file's language model is described by its text_config)");
    c = HfConfig{outer.path + ": text_config", outer.j.at("text_config")};
    if (c.has("model_type") && c.string_or("model_type", "") != "gemma3_text")
      fail(c.path, "model_type", "'" + c.string_or("model_type", "") + "' is not gemma3_text");
    image_token = outer.natural_or("image_token_index", 262144);
  }
  const std::string& config_path = c.path;
  for (const char* k : kNotNull)
    if (c.j.contains(k) && c.j.at(k).is_null()) fail(config_path, k, "null is not supported (absent means the default)");
  const int L = c.positive_int_or("num_hidden_layers", 26);
  const int H = c.positive_int_or("num_attention_heads", 8);
  const int Hkv = c.positive_int_or("num_key_value_heads", 4);
  const int d = c.positive_int_or("hidden_size", 2304);
  const int dh = c.positive_int_or("head_dim", 256);
  const int ff = c.positive_int_or("intermediate_size", 9216);
  const int vocab = c.positive_int_or("vocab_size", 262208);
  if (Hkv > H || H % Hkv != 0)
    fail(config_path, "num_key_value_heads", str(Hkv) + " does not divide num_attention_heads = " + str(H));
  if (dh % 2 != 0) fail(config_path, "head_dim", str(dh) + " is odd; rotary embeddings rotate pairs");
  const std::string act = c.string_or("hidden_activation", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh" && act != "gelu_new" && act != "gelu")
    fail(config_path, "hidden_activation", "'" + act + "' is not supported (gelu_pytorch_tanh, gelu_new, gelu)");
  if (c.bool_or("use_bidirectional_attention", false))
    fail(config_path, "use_bidirectional_attention", "true is not supported (Gemma 3 attends causally)");
  if (c.has("attn_logit_softcapping"))
    fail(config_path, "attn_logit_softcapping",
         brief(c.j.at("attn_logit_softcapping")) +
             " is not supported (null only: HuggingFace's Gemma 3 attention never applies it)");
  const auto [full, local] = rotaries(c);
  const double scalar = c.positive_number_or("query_pre_attn_scalar", 256.0);
  const bool bias = c.bool_or("attention_bias", false);
  const double eps = c.eps_or("rms_norm_eps", 1e-6);
  std::vector<bool> sliding = sliding_layers(c, L);
  int window = 0;
  if (std::find(sliding.begin(), sliding.end(), true) != sliding.end()) {
    if (c.j.contains("sliding_window") && c.j.at("sliding_window").is_null())
      fail(config_path, "sliding_window", "null, but some layers slide (a window of at least 1 is needed)");
    window = c.positive_int_or("sliding_window", 4096);
  }

  Architecture a = llama_shaped_architecture(L, H, Hkv, d, dh, ff, eps);
  a.activation = act == "gelu" ? Activation::gelu : Activation::gelu_tanh;
  a.norm_unit_offset = true;
  a.own_norm_placement_only = true;
  a.sandwich_norms = true;
  a.score_scale_base = scalar;
  a.query_key_norm = Architecture::QueryKeyNorm{eps, true};

  const LlamaShapedLayer shape{bias, bias, true, true};
  const LayerPrefix cut = shape.kept_layers(f, L, config_path, options, source, "gemma3");
  a.layers = cut.layers;
  sliding.resize(static_cast<std::size_t>(a.layers));
  if (window > 0) {
    a.attention_window = window;
    a.window_layers = sliding;
  }
  set_layer_rotary(a, sliding, full, local);
  // CausalLM files: "model."; a text model saved on its own: none; the
  // language model of a multimodal file: as 4.50 wrote it, or since 4.52.
  const std::string prefix =
      multimodal ? (!prefix_in_use(f, "language_model.model.").empty() ? "language_model.model." : "model.language_model.")
                 : prefix_in_use(f, "model.");
  Walk w = begin_walk(fam, c, store, prefix, options, a.layers, shape.layer_slots(a));
  // √d · E[ids] (embed.hpp).
  if (f.find(prefix + "embed_tokens.weight")) add_word_table(w, "embed_tokens.weight", vocab, d);
  // The image token stands for an image feature: refused as a token (Embeddings::placeholder_id).
  if (image_token && *image_token < vocab) w.emb.placeholder_id = *image_token;
  return finish_walk(w, a, cut.source);
}

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const Needs need{folder, type};
  need(a.norm == NormKind::rms && a.norm_unit_offset, "norm_unit_offset", "RMSNorm with gains 1 + w");
  need(a.query_key_norm && a.query_key_norm->unit_offset, "query_key_norm", "a query/key norm with gains 1 + w");
  need(a.query_key_norm->eps == a.ln_eps, "query_key_norm.eps", "the query/key norm's eps equal to ln_eps (one rms_norm_eps)");
  require_llama_shaped(a, folder, type, written::sandwich | written::score_scale | written::window);
  need(a.gated_mlp && (a.activation == Activation::gelu || a.activation == Activation::gelu_tanh), "activation",
       "a gated MLP with gelu or gelu_tanh (GeGLU)");
  need(a.sandwich_norms, "sandwich_norms", "four norms per layer (post-attention and post-feedforward)");
  need(a.attention_window == 0 || !a.window_layers.empty(), "window_layers", "the layers its sliding window applies to");
  const int L = a.layers, d = a.d_model, dh = a.d_qk;
  // The sliding layers share one base and factor 1; the full ones rope_theta and one factor >= 1.
  std::optional<double> local, factor;
  for (int l = 0; l < L; ++l) {
    const double theta = a.rope_base(l), f = a.rope_linear_factor(l);
    if (a.window_applies(l)) {
      need(f == 1.0 && (!local || *local == theta), "layer_rotary",
           "one rotary base and factor 1 on every sliding layer (rope_local_base_freq)");
      local = theta;
    } else {
      need(theta == *a.rope_theta && f >= 1.0 && (!factor || *factor == f), "layer_rotary",
           "rope_theta and one linear factor >= 1 on every full-attention layer");
      factor = f;
    }
  }
  const bool bias = llama_shaped_layers_have_bias(model, folder, type);
  const auto& emb = model.embeddings();
  if (emb && emb->kind != Layout::gemma3)
    fail(folder, "embeddings", "kind " + to_string(emb->kind) + " cannot be written in the " + type + " layout");
  if (emb && emb->placeholder_id)
    fail(folder, "embeddings.placeholder_id", "a gemma3_text checkpoint has no image token (it is a multimodal file's)");

  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  emit_layers(model, LlamaShapedLayer{bias, bias, true, true}.layer_slots(a), "model.", dtype, folder, ts);
  add("model.norm.weight", VectorXd(VectorXd::Zero(d)));  // gain 1 + 0: neutral
  json types = json::array();
  for (int l = 0; l < L; ++l) types.push_back(a.window_applies(l) ? "sliding_attention" : "full_attention");
  const double f = factor.value_or(1.0);
  json c = llama_shaped_config(a, "Gemma3ForCausalLM", "gemma3_text", dtype);
  c["hidden_activation"] = a.activation == Activation::gelu ? "gelu" : "gelu_pytorch_tanh";
  c["rope_local_base_freq"] = local.value_or(10000.0);
  c["rope_scaling"] = f == 1.0 ? json(nullptr) : json{{"rope_type", "linear"}, {"factor", f}};
  c["query_pre_attn_scalar"] = a.score_scale_base ? *a.score_scale_base : static_cast<double>(dh);
  c["sliding_window"] = a.attention_window > 0 ? json(a.attention_window) : json(nullptr);
  c["layer_types"] = types;
  c["attention_bias"] = bias;
  c["attn_logit_softcapping"] = nullptr;
  // The pattern too where the layers follow one (transformers 4.50 reads it, not layer_types).
  for (int P = 1; P <= L + 1; ++P) {
    bool follows = true;
    for (int l = 0; l < L; ++l) follows = follows && a.window_applies(l) == ((l + 1) % P != 0);
    if (follows) {
      c["sliding_window_pattern"] = P;
      break;
    }
  }
  if (emb) {
    add("model.embed_tokens.weight", emb->word);
    c["vocab_size"] = emb->word.rows();
  }
  write_checkpoint(folder, ts, c);
}

/// A random Gemma 3's structure (families.md §3) on spec.arch: the sizes,
/// rope_theta (the global base) and ln_eps kept; sliding_window (4096; 0:
/// none), layer_pattern P (6), rope_local_base (10000), rope_linear_factor
/// (1) and query_pre_attn_scalar (head_dim) from `o`.
void structure(RandomModelSpec& spec, const FamilyOptions& o) {
  Architecture& a = spec.arch;
  if (a.activation != Activation::gelu && a.activation != Activation::gelu_tanh)
    throw std::invalid_argument("activation: the gemma3 layout takes gelu or gelu_tanh (GeGLU), not " +
                                to_string(a.activation));
  llama_shaped_structure(a, "gemma3", 1000000.0);
  const int window = o.sliding_window.value_or(4096);
  if (window < 0) throw std::invalid_argument("sliding_window: must be >= 0 (0: none), got " + std::to_string(window));
  const int P = o.layer_pattern.value_or(6);
  if (P < 1) throw std::invalid_argument("layer_pattern: must be >= 1, got " + std::to_string(P));
  const double local = o.rope_local_base.value_or(10000.0);
  if (!std::isfinite(local) || !(local > 0))
    throw std::invalid_argument("rope_local_base: must be a finite number > 0, got " + std::to_string(local));
  const double factor = o.rope_linear_factor.value_or(1.0);
  if (!std::isfinite(factor) || !(factor >= 1))
    throw std::invalid_argument("rope_linear_factor: must be a finite number >= 1, got " + std::to_string(factor));
  const double scalar = o.query_pre_attn_scalar.value_or(static_cast<double>(a.d_qk));
  if (!std::isfinite(scalar) || !(scalar > 0))
    throw std::invalid_argument("query_pre_attn_scalar: must be a finite number > 0, got " + std::to_string(scalar));
  a.norm_unit_offset = true;
  a.sandwich_norms = true;
  a.score_scale_base = scalar;
  a.query_key_norm = Architecture::QueryKeyNorm{a.ln_eps, true};
  // Without a window every layer attends fully (a sliding layer needs one).
  std::vector<bool> sliding(static_cast<std::size_t>(std::max(a.layers, 0)), false);
  if (window > 0)
    for (int l = 0; l < a.layers; ++l) sliding[static_cast<std::size_t>(l)] = (l + 1) % P != 0;
  if (std::find(sliding.begin(), sliding.end(), true) != sliding.end()) {
    a.attention_window = window;
    a.window_layers = sliding;
  }
  set_layer_rotary(a, sliding, {*a.rope_theta, factor}, {local, 1.0});
}

}  // namespace gemma3_layout

Family gemma3_family() {
  Family f;
  f.layout = Layout::gemma3;
  f.prefix = "model.";
  f.model_types = {"gemma3_text", "gemma3"};
  f.display = "Gemma 3";
  f.key_value_heads = true;
  f.architecture = "Gemma3For";  // Gemma3ForCausalLM, Gemma3ForConditionalGeneration (not Gemma3n…)
  f.tensor_mark = ".self_attn.q_norm.";
  f.second_mark = ".pre_feedforward_layernorm.";
  f.load = gemma3_layout::load;
  f.save = gemma3_layout::save;
  f.structure = gemma3_layout::structure;
  f.options = {"sliding_window", "query_pre_attn_scalar", "layer_pattern", "rope_local_base", "rope_linear_factor"};
  return f;
}

}  // namespace sanpath::io

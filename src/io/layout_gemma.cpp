// Gemma and Gemma 2 (families.md, "Gemma, Gemma 2 and ViT checkpoints"):
// torch Linear weights ([out, in], y = x Wᵀ), RMSNorm with gains 1 + w,
// rotary positions on the whole head, grouped-query attention with head_dim
// read from config.json (q_proj has H·d_h rows, independent of d/H), a GeGLU
// MLP and √d-scaled token embeddings. Gemma 2 adds the score scale
// query_pre_attn_scalar^(−1/2), the logit soft-cap and a sliding window on
// some layers, and four norms per layer.
//
// The layers' tensors are read and written through the slots of
// hf_layout.hpp's LlamaShapedLayer (two norms, or Gemma 2's four).
//
// Mapping onto the per-head form: query head h owns rows [h·d_h, (h+1)·d_h)
// of q_proj and the same columns of o_proj; key/value head g the rows
// [g·d_h, (g+1)·d_h) of k_proj, v_proj, copied into every query head h with
// ⌊h·H_kv/H⌋ = g. gate_proj → W_gate, up_proj → W_1, down_proj → W_2 (no
// MLP biases). Norm gains w are stored as they are in the file (ln*_g = w;
// Architecture::norm_unit_offset makes the gain 1 + w), ln*_b zero. Gemma:
// input_layernorm → ln1, post_attention_layernorm (before the MLP) → ln2.
// Gemma 2: input_layernorm → ln1, post_attention_layernorm (on the attention
// output) → ln3, pre_feedforward_layernorm → ln2, post_feedforward_layernorm
// → ln4. model.norm and lm_head are not part of the analysed layers and are
// ignored; the writer stores a neutral model.norm (w = 0) and ties the LM
// head. What families.md §6 refuses is refused naming the config key.
#include "hf_layout.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace sanpath::io {

namespace gemma_layout {  // this file's pieces (named: the library compiles in unity batches)

/// hidden_activation (families.md §1): absent or null is the tanh form,
/// whatever hidden_act says.
Activation hidden_activation(const HfConfig& c) {
  if (!c.has("hidden_activation")) return Activation::gelu_tanh;
  const std::string s = c.string_or("hidden_activation", "");
  if (s == "gelu_pytorch_tanh" || s == "gelu_new") return Activation::gelu_tanh;
  if (s == "gelu") return Activation::gelu;
  fail(c.path, "hidden_activation", "'" + s + "' is not supported (gelu_pytorch_tanh, gelu_new, gelu)");
}

/// The config.json spelling of a Gemma activation.
std::string activation_name(Activation a) { return a == Activation::gelu ? "gelu" : "gelu_pytorch_tanh"; }

/// A number of `key` in config.json's object `parent` (named `where`): finite and > 0.
double positive_in(const HfConfig& c, const json& v, const std::string& where, const std::string& name) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
    fail(c.path, where, name + " must be a finite number > 0, got " + brief(v));
  return v.get<double>();
}

/// θ, refusing the rotary settings families.md §6 does not define:
/// rope_scaling, rope_parameters of another rope_type (θ is then
/// rope_parameters.rope_theta), a partial rotary factor.
double rope_theta(const HfConfig& c) {
  if (c.has("rope_scaling"))
    fail(c.path, "rope_scaling", brief(c.j.at("rope_scaling")) + " is not supported (null only: no scaled rotary)");
  double theta = c.positive_number_or("rope_theta", 10000.0);
  if (c.has("rope_parameters")) {
    const json& rp = c.j.at("rope_parameters");
    if (!rp.is_object()) fail(c.path, "rope_parameters", "must be an object, got " + brief(rp));
    std::string type = "default";
    for (const char* k : {"rope_type", "type"})
      if (rp.contains(k) && !rp.at(k).is_null()) {
        if (!rp.at(k).is_string()) fail(c.path, "rope_parameters", std::string(k) + " must be a string, got " + brief(rp.at(k)));
        type = rp.at(k).get<std::string>();
        break;
      }
    if (type != "default")
      fail(c.path, "rope_parameters", "rope_type '" + type + "' is not supported (\"default\" only: no scaled rotary)");
    if (rp.contains("rope_theta") && !rp.at("rope_theta").is_null())
      theta = positive_in(c, rp.at("rope_theta"), "rope_parameters", "rope_theta");
    if (rp.contains("partial_rotary_factor") && !rp.at("partial_rotary_factor").is_null() &&
        positive_in(c, rp.at("partial_rotary_factor"), "rope_parameters", "partial_rotary_factor") != 1.0)
      fail(c.path, "rope_parameters",
           "partial_rotary_factor " + brief(rp.at("partial_rotary_factor")) + " is not supported (the whole head is rotated)");
  }
  if (c.has("partial_rotary_factor") && c.positive_number_or("partial_rotary_factor", 1.0) != 1.0)
    fail(c.path, "partial_rotary_factor",
         brief(c.j.at("partial_rotary_factor")) + " is not supported (the whole head is rotated)");
  return theta;
}

/// Which of the L layers are "sliding_attention" (layer_types), or without
/// layer_types the even ones on Gemma 2 and none on Gemma.
std::vector<bool> sliding_layers(const HfConfig& c, int L, bool gemma2) {
  std::vector<bool> out(static_cast<std::size_t>(L));
  if (!c.has("layer_types")) {
    for (int l = 0; l < L; ++l) out[static_cast<std::size_t>(l)] = gemma2 && l % 2 == 0;
    return out;
  }
  const json& v = c.j.at("layer_types");
  if (!v.is_array()) fail(c.path, "layer_types", "must be a list of " + str(L) + " layer types, got " + brief(v));
  if (v.size() != static_cast<std::size_t>(L))
    fail(c.path, "layer_types",
         "has " + std::to_string(v.size()) + " entries for num_hidden_layers = " + str(L));
  for (int l = 0; l < L; ++l) {
    const json& e = v.at(static_cast<std::size_t>(l));
    const std::string s = e.is_string() ? e.get<std::string>() : std::string();
    if (s != "sliding_attention" && s != "full_attention")
      fail(c.path, "layer_types",
           "entry " + str(l) + " is " + brief(e) + " (sliding_attention or full_attention only)");
    if (s == "sliding_attention" && !gemma2)
      fail(c.path, "layer_types", "entry " + str(l) + " is sliding_attention; gemma has no sliding window");
    out[static_cast<std::size_t>(l)] = s == "sliding_attention";
  }
  return out;
}

/// A key whose absence means `fallback` and whose null means none.
template <class T, class Read>
std::optional<T> nullable(const HfConfig& c, const std::string& key, T fallback, Read read) {
  if (!c.j.contains(key)) return fallback;
  if (c.j.at(key).is_null()) return std::nullopt;
  return read(key);
}

Model load(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& store,
           const std::string& source, const LoadOptions& options) {
  const TensorStore& f = *store;
  const std::string& config_path = c.path;
  const std::string type = to_string(fam.layout);
  const bool two = fam.layout == Layout::gemma2;
  const int L = c.positive_int("num_hidden_layers");
  const int H = c.positive_int("num_attention_heads");
  const int Hkv = c.positive_int("num_key_value_heads");
  const int d = c.positive_int("hidden_size");
  const int dh = c.positive_int("head_dim");
  const int ff = c.positive_int("intermediate_size");
  if (Hkv > H || H % Hkv != 0)
    fail(config_path, "num_key_value_heads", str(Hkv) + " does not divide num_attention_heads = " + str(H));
  if (dh % 2 != 0) fail(config_path, "head_dim", str(dh) + " is odd; rotary embeddings rotate pairs");
  const double theta = rope_theta(c);
  if (c.bool_or("use_bidirectional_attention", false))
    fail(config_path, "use_bidirectional_attention", "true is not supported (Gemma attends causally)");
  const Activation act = hidden_activation(c);
  const bool bias = c.bool_or("attention_bias", false);

  Architecture a = llama_shaped_architecture(L, H, Hkv, d, dh, ff, c.eps_or("rms_norm_eps", 1e-6));
  a.activation = act;
  a.norm_unit_offset = true;
  a.rope_theta = theta;
  a.own_norm_placement_only = true;
  const std::vector<bool> sliding = sliding_layers(c, L, two);
  if (two) {
    if (!c.has("query_pre_attn_scalar"))
      fail(config_path, "query_pre_attn_scalar", "missing (gemma2 scales the scores by its inverse square root)");
    a.score_scale_base = c.positive_number_or("query_pre_attn_scalar", 1.0);
    a.softcap = nullable(c, "attn_logit_softcapping", 50.0,
                         [&](const std::string& k) { return c.positive_number_or(k, 50.0); });
    const std::optional<int> window =
        nullable(c, "sliding_window", 4096, [&](const std::string& k) { return c.positive_int(k); });
    a.sandwich_norms = true;
    if (window) {
      a.attention_window = *window;
      a.window_layers = sliding;
    }
  }

  const LlamaShapedLayer shape{bias, bias, false, two};
  const LayerPrefix cut = shape.kept_layers(f, L, config_path, options, source, type);
  a.layers = cut.layers;
  if (!a.window_layers.empty()) a.window_layers.resize(static_cast<std::size_t>(a.layers));
  const std::string prefix = prefix_in_use(f, "model.");  // GemmaModel saved on its own has none
  Walk w = begin_walk(fam, c, store, prefix, options, a.layers, shape.layer_slots(a));
  // √d · E[ids] (embed.hpp); vocab_size is required when the file has the table.
  if (f.find(prefix + "embed_tokens.weight")) add_word_table(w, "embed_tokens.weight", c.positive_int("vocab_size"), d);
  return finish_walk(w, a, cut.source);
}

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const bool two = fam.layout == Layout::gemma2;
  const Needs need{folder, type};
  need(a.norm == NormKind::rms && a.norm_unit_offset, "norm_unit_offset", "RMSNorm with gains 1 + w");
  require_llama_shaped(a, folder, type,
                       two ? written::sandwich | written::score_scale | written::softcap | written::window : 0u);
  need(a.gated_mlp && (a.activation == Activation::gelu || a.activation == Activation::gelu_tanh), "activation",
       "a gated MLP with gelu or gelu_tanh (GeGLU)");
  if (two) {
    need(a.sandwich_norms, "sandwich_norms", "four norms per layer (post-attention and post-feedforward)");
    need(a.attention_window == 0 || !a.window_layers.empty(), "window_layers",
         "the layers its sliding window applies to");
  }
  const int L = a.layers, d = a.d_model, dh = a.d_qk;
  const bool bias = llama_shaped_layers_have_bias(model, folder, type);
  const auto& emb = model.embeddings();
  if (emb && emb->kind != Layout::gemma && emb->kind != Layout::gemma2)
    fail(folder, "embeddings", "kind " + to_string(emb->kind) + " cannot be written in the " + type + " layout");

  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  emit_layers(model, LlamaShapedLayer{bias, bias, false, two}.layer_slots(a), "model.", dtype, folder, ts);
  add("model.norm.weight", VectorXd(VectorXd::Zero(d)));  // gain 1 + 0: neutral
  json c = llama_shaped_config(a, fam.architecture + "ForCausalLM", type, dtype);
  c["hidden_activation"] = c["hidden_act"] = activation_name(a.activation);
  c["attention_bias"] = bias;
  if (two) {
    c["query_pre_attn_scalar"] = a.score_scale_base ? *a.score_scale_base : static_cast<double>(dh);
    c["attn_logit_softcapping"] = a.softcap ? json(*a.softcap) : json(nullptr);
    c["sliding_window"] = a.attention_window > 0 ? json(a.attention_window) : json(nullptr);
    if (a.attention_window > 0) {
      json types = json::array();
      for (int l = 0; l < L; ++l) types.push_back(a.window_applies(l) ? "sliding_attention" : "full_attention");
      c["layer_types"] = types;
    }
  }
  if (emb) {
    add("model.embed_tokens.weight", emb->word);
    c["vocab_size"] = emb->word.rows();
  }
  write_checkpoint(folder, ts, c);
}

/// The structure both families share (families.md §1), on spec.arch.
void gemma_common(RandomModelSpec& spec, const std::string& layout) {
  Architecture& a = spec.arch;
  if (a.activation != Activation::gelu && a.activation != Activation::gelu_tanh)
    throw std::invalid_argument("activation: the " + layout + " layout takes gelu or gelu_tanh (GeGLU), not " +
                                to_string(a.activation));
  llama_shaped_structure(a, layout, 10000.0);
  a.norm_unit_offset = true;
}

void gemma_structure(RandomModelSpec& spec, const FamilyOptions&) { gemma_common(spec, "gemma"); }

void gemma2_structure(RandomModelSpec& spec, const FamilyOptions& o) {
  gemma_common(spec, "gemma2");
  Architecture& a = spec.arch;
  const int window = o.sliding_window.value_or(4096);
  if (window < 0) throw std::invalid_argument("sliding_window: must be >= 0 (0: none), got " + std::to_string(window));
  const double cap = o.softcap.value_or(50.0);
  if (!std::isfinite(cap) || cap < 0)
    throw std::invalid_argument("softcap: must be a finite number >= 0 (0: none), got " + std::to_string(cap));
  const double scalar = o.query_pre_attn_scalar.value_or(static_cast<double>(a.d_qk));
  if (!std::isfinite(scalar) || !(scalar > 0))
    throw std::invalid_argument("query_pre_attn_scalar: must be a finite number > 0, got " + std::to_string(scalar));
  a.sandwich_norms = true;
  a.score_scale_base = scalar;
  if (cap > 0) a.softcap = cap;
  if (window > 0) {
    a.attention_window = window;
    a.window_layers.assign(static_cast<std::size_t>(std::max(a.layers, 0)), false);
    for (int l = 0; l < a.layers; l += 2) a.window_layers[static_cast<std::size_t>(l)] = true;
  }
}

Family make(Layout layout, const std::string& display, const std::string& architecture, const std::string& mark,
            void (*structure)(RandomModelSpec&, const FamilyOptions&), std::vector<std::string> options) {
  Family f;
  f.layout = layout;
  f.prefix = "model.";
  f.model_types = {to_string(layout)};
  f.display = display;
  f.key_value_heads = true;
  f.architecture = architecture;
  f.tensor_mark = mark;
  f.load = load;
  f.save = save;
  f.structure = structure;
  f.options = std::move(options);
  return f;
}

}  // namespace gemma_layout

// Gemma's tensor names are Llama's: the names identify llama.
Family gemma_family() { return gemma_layout::make(Layout::gemma, "Gemma", "Gemma", "", gemma_layout::gemma_structure, {}); }
Family gemma2_family() {
  using namespace gemma_layout;
  return make(Layout::gemma2, "Gemma 2", "Gemma2", ".pre_feedforward_layernorm.", gemma2_structure,
              {"sliding_window", "softcap", "query_pre_attn_scalar"});
}

}  // namespace sanpath::io

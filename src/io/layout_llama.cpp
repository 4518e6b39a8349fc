// Llama, Mistral, Qwen2 (math.md §8): torch Linear weights ([out, in],
// y = x Wᵀ), RMSNorm, rotary positions, grouped-query attention, SwiGLU.
// The family has its own walk of config.json (biases present or absent by
// model_type and config, and the refusals below); its layers' tensors are
// read and written through the slots of hf_layout.hpp's LlamaShapedLayer,
// which it shares with Gemma, Qwen3 and Gemma 3 (decode_slots: decoded
// straight into the per-head matrices, finiteness tested in the same pass).
//
// Mapping onto the per-head form: query head h owns rows [h·d_h, (h+1)·d_h)
// of q_proj and columns of o_proj; key/value head g the rows [g·d_h,
// (g+1)·d_h) of k_proj, v_proj, copied into every query head h with
// ⌊h·H_kv/H⌋ = g. gate_proj → W_gate, up_proj → W_1, down_proj → W_2;
// input_layernorm / post_attention_layernorm → ln1_g / ln2_g (RMSNorm, zero
// ln*_b); embed_tokens → the token table. Biases absent from the layout are
// zero. model.norm and lm_head are not part of the analysed layers (like
// GPT-2's ln_f) and are ignored on reading; the writer stores a unit
// model.norm and ties the LM head. Configurations §8 does not define are
// refused naming the key: rope_scaling other than null, a partial rotary
// factor, hidden_act other than silu, mlp_bias. A sliding window is kept as
// Architecture::attention_window.
#include "hf_layout.hpp"

#include <string>

namespace sanpath::io {

namespace llama_layout {  // this file's pieces (named: the library compiles in unity batches)

Model load(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& store,
           const std::string& source, const LoadOptions& options) {
  const TensorStore& f = *store;
  const std::string& config_path = c.path;
  const json& config = c.j;
  const std::string type = to_string(fam.layout);
  const int L = c.positive_int("num_hidden_layers");
  const int H = c.positive_int("num_attention_heads");
  const int d = c.positive_int("hidden_size");
  const int ff = c.positive_int("intermediate_size");
  const int Hkv = c.positive_int_or("num_key_value_heads", H);
  if (Hkv > H || H % Hkv != 0)
    fail(config_path, "num_key_value_heads", str(Hkv) + " does not divide num_attention_heads = " + str(H));
  if (!c.has("head_dim") && d % H != 0)
    fail(config_path, "hidden_size", str(d) + " is not divisible by num_attention_heads = " + str(H));
  const int dh = c.positive_int_or("head_dim", d / H);
  if (dh % 2 != 0) fail(config_path, "head_dim", str(dh) + " is odd; rotary embeddings rotate pairs");
  const std::string act = c.string_or("hidden_act", "silu");
  if (act != "silu") fail(config_path, "hidden_act", "'" + act + "' is not supported (silu only, math.md §8)");
  if (c.has("rope_scaling"))
    fail(config_path, "rope_scaling", brief(config.at("rope_scaling")) + " is not supported (null only, math.md §8)");
  for (const char* k : {"partial_rotary_factor", "rotary_pct"})
    if (c.has(k) && c.positive_number_or(k, 1.0) != 1.0)
      fail(config_path, k, brief(config.at(k)) + " is not supported (the whole head is rotated, math.md §8)");
  if (c.bool_or("mlp_bias", false)) fail(config_path, "mlp_bias", "true is not supported (math.md §8: no MLP biases)");
  const bool qwen2 = type == "qwen2";
  const bool qkv_bias = qwen2 || c.bool_or("attention_bias", false);
  const bool o_bias = !qwen2 && c.bool_or("attention_bias", false);
  // Mistral applies sliding_window when set; Qwen2 only with use_sliding_window.
  int window = 0;
  if (c.has("sliding_window") && (type == "mistral" || (qwen2 && c.bool_or("use_sliding_window", false))))
    window = c.positive_int("sliding_window");

  Architecture a = llama_shaped_architecture(L, H, Hkv, d, dh, ff, c.eps_or("rms_norm_eps", 1e-6));
  a.activation = Activation::silu;
  a.rope_theta = c.positive_number_or("rope_theta", 10000.0);
  a.attention_window = window;

  const LlamaShapedLayer shape{qkv_bias, o_bias, false, false};
  const LayerPrefix cut = shape.kept_layers(f, L, config_path, options, source, type);
  a.layers = cut.layers;
  Walk w = begin_walk(fam, c, store, "model.", options, a.layers, shape.layer_slots(a));
  w.slots.add("norm.weight", {d});  // checked, not used (like GPT-2's ln_f)
  const TensorInfo* table = f.find("model.embed_tokens.weight");
  add_word_table(w, "embed_tokens.weight",
                 c.has("vocab_size") ? c.positive_int("vocab_size") : table ? table->shape.at(0) : 0, d);
  return finish_walk(w, a, cut.source);
}

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const Needs need_arch{folder, type};
  need_arch(a.norm == NormKind::rms && !a.norm_unit_offset, "norm", "RMSNorm with the stored gain w");
  require_llama_shaped(a, folder, type, type == "llama" ? 0u : unsigned{written::window});
  need_arch(a.gated_mlp && a.activation == Activation::silu, "W_gate", "a gated MLP with silu");
  const bool qwen2 = type == "qwen2";
  const int L = a.layers, H = a.heads, d = a.d_model;
  if (llama_shaped_layers_have_bias(model, folder, type))
    for (int l = 0; l < L; ++l) {
      const LayerWeights& w = model.layer(l);
      const std::string p = "layer " + str(l) + " ";
      need_arch(is_zero(w.b_O), p + "b_O", "zero output biases");
      if (!qwen2)
        for (int h = 0; h < H; ++h) {
          const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
          need_arch(is_zero(hw.b_Q) && is_zero(hw.b_K) && is_zero(hw.b_V), p + "head " + str(h) + " b_Q",
                    "zero query/key/value biases (qwen2 has them)");
        }
    }
  const auto& emb = model.embeddings();
  if (emb && !rotary_family(emb->kind))
    fail(folder, "embeddings", "only token embeddings without positions can be written in the " + type + " layout");

  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  emit_layers(model, LlamaShapedLayer{qwen2, false, false, false}.layer_slots(a), "model.", dtype, folder, ts);
  add("model.norm.weight", VectorXd(VectorXd::Ones(d)));
  json c = llama_shaped_config(a, fam.architecture + "ForCausalLM", type, dtype);
  c["hidden_act"] = "silu";
  if (type == "llama") {
    c["attention_bias"] = false;
    c["mlp_bias"] = false;
  }
  if (type == "mistral") c["sliding_window"] = a.attention_window > 0 ? json(a.attention_window) : json(nullptr);
  if (qwen2) {
    c["use_sliding_window"] = a.attention_window > 0;
    if (a.attention_window > 0) c["sliding_window"] = a.attention_window;
  }
  if (emb) {
    add("model.embed_tokens.weight", emb->word);
    c["vocab_size"] = emb->word.rows();
  }
  write_checkpoint(folder, ts, c);
}

Family make(Layout layout, const std::string& architecture, const std::string& mark) {
  Family f;
  f.layout = layout;
  f.prefix = "model.";
  f.model_types = {to_string(layout)};
  f.display = architecture;  // "Llama", "Mistral", "Qwen2"
  f.key_value_heads = true;
  f.architecture = architecture;
  f.tensor_mark = mark;
  f.load = load;
  f.save = save;
  return f;
}

}  // namespace llama_layout

// Tensor names do not tell the three apart: the names identify llama.
Family llama_family() { return llama_layout::make(Layout::llama, "Llama", ".self_attn.q_proj."); }
Family mistral_family() { return llama_layout::make(Layout::mistral, "Mistral", ""); }
Family qwen2_family() { return llama_layout::make(Layout::qwen2, "Qwen2", ""); }

}  // namespace sanpath::io

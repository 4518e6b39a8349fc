// GPT-2: Conv1D weights ([in, out], y = x W + b), the fused c_attn = Q | K |
// V, pre-LN, causal; ln_f and lm_head are not part of the analysis.
#include "hf_layout.hpp"

#include <climits>

namespace sanpath::io {

namespace gpt2_layout {  // this file's pieces (named: the library compiles in unity batches)

const ShapeKeys keys{"n_layer", "n_head", "n_embd", "n_inner", "activation_function"};

void read_config(const HfConfig& c, Architecture& a, EmbeddingSizes& e) {
  read_shape(c, keys, a);
  const int d = a.d_model;
  const std::int64_t ff = c.has(keys.d_ff) ? c.positive_int(keys.d_ff) : 4 * static_cast<std::int64_t>(d);
  if (ff > INT_MAX) fail(c.path, "n_embd", str(d) + " is too large (the default n_inner = 4·n_embd exceeds 2^31 - 1)");
  a.d_ff = static_cast<int>(ff);
  if (!c.bool_or("scale_attn_weights", true))
    fail(c.path, "scale_attn_weights", "false is not supported (scores are always scaled by 1/sqrt(d_qk))");
  if (c.bool_or("scale_attn_by_inverse_layer_idx", false))
    fail(c.path, "scale_attn_by_inverse_layer_idx", "true is not supported (scores are scaled by 1/sqrt(d_qk) only)");
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.activation = c.activation(keys.activation, "gelu_new");
  a.ln_eps = c.eps_or("layer_norm_epsilon", 1e-5);
  e.vocab = c.size_or_any("vocab_size");
  e.positions = c.size_or_any("n_positions");
  e.width = d;
}

void layer(const Dims& k, int l, LayerWeights& w, Slots& s) {
  const std::string p = "h." + str(l) + ".";
  s.layernorm(p + "ln_1", w.ln1_g, w.ln1_b, k.d, false);
  Slot& W = s.add(p + "attn.c_attn.weight", {k.d, 3 * static_cast<std::int64_t>(k.d)});
  Slot& b = s.add(p + "attn.c_attn.bias", {3 * static_cast<std::int64_t>(k.d)});
  s.heads_in(W, b, Storage::conv1d, w, 'Q', 0, k);
  s.heads_in(W, b, Storage::conv1d, w, 'K', k.d, k);
  s.heads_in(W, b, Storage::conv1d, w, 'V', 2 * static_cast<std::int64_t>(k.d), k);
  s.heads_out(p + "attn.c_proj", Storage::conv1d, w, k);
  s.layernorm(p + "ln_2", w.ln2_g, w.ln2_b, k.d, false);
  s.dense(p + "mlp.c_fc", Storage::conv1d, w.W_1, w.b_1, k.d, k.ff);
  s.dense(p + "mlp.c_proj", Storage::conv1d, w.W_2, w.b_2, k.ff, k.d);
}

void embeddings(const Dims&, const EmbeddingSizes& e, Embeddings& emb, Slots& s) {
  s.table("wte.weight", emb.word, e.vocab, e.width);
  s.table("wpe.weight", emb.position, e.positions, e.width);
}

json write_config(const Model& m, const EmbeddingSizes* e) {
  const Architecture& a = m.arch();
  json c = shape_config(a, keys, "GPT2Model", "gpt2");
  c["layer_norm_epsilon"] = a.ln_eps;
  if (e) {
    c["vocab_size"] = e->vocab;
    c["n_positions"] = e->positions;
    c["n_ctx"] = e->positions;
  }
  return c;
}

}  // namespace gpt2_layout

Family gpt2_family() {
  using namespace gpt2_layout;
  Family f{Layout::gpt2, "transformer.", {"gpt2"}, "GPT2", ".attn.c_attn."};
  f.display = "GPT-2";
  return f.described_by(read_config, write_config, layer, embeddings);
}

}  // namespace sanpath::io

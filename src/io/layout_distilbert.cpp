// DistilBERT: BERT's post-LN structure with its own names and config keys,
// no token types, LayerNorm epsilon 1e-12 (not in config.json).
#include "hf_layout.hpp"

namespace sanpath::io {

namespace distilbert_layout {  // this file's pieces (named: the library compiles in unity batches)

const ShapeKeys keys{"n_layers", "n_heads", "dim", "hidden_dim", "activation"};

void read_config(const HfConfig& c, Architecture& a, EmbeddingSizes& e) {
  read_shape(c, keys, a);
  a.d_ff = c.positive_int(keys.d_ff);
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  a.activation = c.activation(keys.activation, "gelu");
  a.ln_eps = 1e-12;
  e.vocab = c.size_or_any("vocab_size");
  e.positions = c.size_or_any("max_position_embeddings");
  e.width = a.d_model;
}

void layer(const Dims& k, int l, LayerWeights& w, Slots& s) {
  const std::string p = "transformer.layer." + str(l) + ".";
  s.heads_in_linear(p + "attention.", {"q_lin", "k_lin", "v_lin"}, w, k);
  s.heads_out(p + "attention.out_lin", Storage::linear, w, k);
  s.layernorm(p + "sa_layer_norm", w.ln1_g, w.ln1_b, k.d, false);
  s.dense(p + "ffn.lin1", Storage::linear, w.W_1, w.b_1, k.d, k.ff);
  s.dense(p + "ffn.lin2", Storage::linear, w.W_2, w.b_2, k.ff, k.d);
  s.layernorm(p + "output_layer_norm", w.ln2_g, w.ln2_b, k.d, false);
}

void embeddings(const Dims&, const EmbeddingSizes& e, Embeddings& emb, Slots& s) {
  s.table("embeddings.word_embeddings.weight", emb.word, e.vocab, e.width);
  s.table("embeddings.position_embeddings.weight", emb.position, e.positions, e.width);
  s.layernorm("embeddings.LayerNorm", emb.ln_g, emb.ln_b, e.width, false);
}

json write_config(const Model& m, const EmbeddingSizes* e) {
  json c = shape_config(m.arch(), keys, "DistilBertModel", "distilbert");
  if (e) {
    c["vocab_size"] = e->vocab;
    c["max_position_embeddings"] = e->positions;
  }
  return c;
}

}  // namespace distilbert_layout

Family distilbert_family() {
  using namespace distilbert_layout;
  Family f{Layout::distilbert, "distilbert.", {"distilbert"}, "DistilBert", ".attention.q_lin."};
  f.display = "DistilBERT";
  f.fixed_ln_eps = 1e-12;
  return f.described_by(read_config, write_config, layer, embeddings);
}

}  // namespace sanpath::io

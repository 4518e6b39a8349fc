// ALBERT: one layer group of one layer shared by every layer, BERT's
// post-LN structure, embeddings of width e mapped into d_model.
#include "hf_layout.hpp"

namespace sanpath::io {

namespace albert_layout {  // this file's pieces (named: the library compiles in unity batches)

void read_config(const HfConfig& c, Architecture& a, EmbeddingSizes& e) {
  read_shape(c, bert_keys, a);
  a.d_ff = c.positive_int(bert_keys.d_ff);
  e.width = c.positive_int_or("embedding_size", 128);
  if (c.positive_int_or("num_hidden_groups", 1) != 1)
    fail(c.path, "num_hidden_groups", "only 1 layer group is supported, got " + brief(c.j.at("num_hidden_groups")));
  if (c.positive_int_or("inner_group_num", 1) != 1)
    fail(c.path, "inner_group_num", "only 1 layer per group is supported, got " + brief(c.j.at("inner_group_num")));
  c.require_absolute_positions();
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  a.activation = c.activation(bert_keys.activation, "gelu_new");
  a.ln_eps = c.eps_or("layer_norm_eps", 1e-12);
  a.shared_layers = true;
  e.vocab = c.size_or_any("vocab_size");
  e.positions = c.size_or_any("max_position_embeddings");
  e.types = c.size_or_any("type_vocab_size");
}

void layer(const Dims& k, int, LayerWeights& w, Slots& s) {
  const std::string p = "encoder.albert_layer_groups.0.albert_layers.0.";
  s.heads_in_linear(p + "attention.", {"query", "key", "value"}, w, k);
  s.heads_out(p + "attention.dense", Storage::linear, w, k);
  s.layernorm(p + "attention.LayerNorm", w.ln1_g, w.ln1_b, k.d);
  s.dense(p + "ffn", Storage::linear, w.W_1, w.b_1, k.d, k.ff);
  s.dense(p + "ffn_output", Storage::linear, w.W_2, w.b_2, k.ff, k.d);
  s.layernorm(p + "full_layer_layer_norm", w.ln2_g, w.ln2_b, k.d);
}

void embeddings(const Dims& k, const EmbeddingSizes& e, Embeddings& emb, Slots& s) {
  s.table("embeddings.word_embeddings.weight", emb.word, e.vocab, e.width);
  s.table("embeddings.position_embeddings.weight", emb.position, e.positions, e.width);
  s.table("embeddings.token_type_embeddings.weight", emb.token_type, e.types, e.width);
  s.layernorm("embeddings.LayerNorm", emb.ln_g, emb.ln_b, e.width);
  s.dense("encoder.embedding_hidden_mapping_in", Storage::linear, emb.mapping, emb.mapping_b, e.width, k.d);
}

json write_config(const Model& m, const EmbeddingSizes* e) {
  const Architecture& a = m.arch();
  json c = shape_config(a, bert_keys, "AlbertModel", "albert");
  c["layer_norm_eps"] = a.ln_eps;
  c["position_embedding_type"] = "absolute";
  c["num_hidden_groups"] = 1;
  c["inner_group_num"] = 1;
  c["embedding_size"] = e ? e->width : a.d_model;
  if (e) {
    c["vocab_size"] = e->vocab;
    c["max_position_embeddings"] = e->positions;
    c["type_vocab_size"] = e->types;
  }
  return c;
}

}  // namespace albert_layout

Family albert_family() {
  using namespace albert_layout;
  Family f{Layout::albert, "albert.", {"albert"}, "Albert", "albert_layer_groups."};
  f.display = "ALBERT";
  f.shared_layers = true;
  return f.described_by(read_config, write_config, layer, embeddings);
}

}  // namespace sanpath::io

// BERT and RoBERTa (RoBERTa is BERT's structure under the "roberta." prefix,
// its position table starting at row padding_idx + 1): torch Linear
// weights, post-LN, GELU, token types.
#include "hf_layout.hpp"

namespace sanpath::io {

namespace bert_layout {  // this file's pieces (named: the library compiles in unity batches)

void read_config(const HfConfig& c, Architecture& a, EmbeddingSizes& e) {
  read_shape(c, bert_keys, a);
  a.d_ff = c.positive_int(bert_keys.d_ff);
  c.require_absolute_positions();
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  a.activation = c.activation(bert_keys.activation, "gelu");
  a.ln_eps = c.eps_or("layer_norm_eps", 1e-12);
  e.vocab = c.size_or_any("vocab_size");
  e.positions = c.size_or_any("max_position_embeddings");
  e.types = c.size_or_any("type_vocab_size");
  e.width = a.d_model;
}

void read_roberta_config(const HfConfig& c, Architecture& a, EmbeddingSizes& e) {
  read_config(c, a, e);
  e.position_offset = c.natural_or("pad_token_id", 1) + 1;
}

void layer(const Dims& k, int l, LayerWeights& w, Slots& s) {
  const std::string p = "encoder.layer." + str(l) + ".";
  s.heads_in_linear(p + "attention.self.", {"query", "key", "value"}, w, k);
  s.heads_out(p + "attention.output.dense", Storage::linear, w, k);
  s.layernorm(p + "attention.output.LayerNorm", w.ln1_g, w.ln1_b, k.d);
  s.dense(p + "intermediate.dense", Storage::linear, w.W_1, w.b_1, k.d, k.ff);
  s.dense(p + "output.dense", Storage::linear, w.W_2, w.b_2, k.ff, k.d);
  s.layernorm(p + "output.LayerNorm", w.ln2_g, w.ln2_b, k.d);
}

void embeddings(const Dims&, const EmbeddingSizes& e, Embeddings& emb, Slots& s) {
  s.table("embeddings.word_embeddings.weight", emb.word, e.vocab, e.width);
  s.table("embeddings.position_embeddings.weight", emb.position, e.positions, e.width, e.position_offset);
  s.table("embeddings.token_type_embeddings.weight", emb.token_type, e.types, e.width);
  s.layernorm("embeddings.LayerNorm", emb.ln_g, emb.ln_b, e.width);
  // RoBERTa counts positions from pad_token_id + 1 and gives the padding token none (Embeddings::padding_id).
  if (e.position_offset > 0) emb.padding_id = e.position_offset - 1;
}

json config(const Model& m, const EmbeddingSizes* e, const char* architecture, const char* model_type) {
  const Architecture& a = m.arch();
  json c = shape_config(a, bert_keys, architecture, model_type);
  c["layer_norm_eps"] = a.ln_eps;
  c["position_embedding_type"] = "absolute";
  if (e) {
    c["vocab_size"] = e->vocab;
    c["max_position_embeddings"] = e->positions;
    c["type_vocab_size"] = e->types;
  }
  return c;
}

json write_bert(const Model& m, const EmbeddingSizes* e) { return config(m, e, "BertModel", "bert"); }

json write_roberta(const Model& m, const EmbeddingSizes* e) {
  json c = config(m, e, "RobertaModel", "roberta");
  c["pad_token_id"] = 1;
  return c;
}

}  // namespace bert_layout

Family bert_family() {
  using namespace bert_layout;
  Family f{Layout::bert, "bert.", {"bert"}, "Bert", "encoder.layer."};
  f.display = "BERT";
  return f.described_by(read_config, write_bert, layer, embeddings);
}

Family roberta_family() {
  using namespace bert_layout;
  Family f{Layout::roberta, "roberta.", {"roberta"}, "Roberta", "roberta.encoder.layer."};
  f.display = "RoBERTa";
  f.written_position_offset = 2;  // pad_token_id 1, written by write_roberta
  return f.described_by(read_roberta_config, write_roberta, layer, embeddings);
}

}  // namespace sanpath::io

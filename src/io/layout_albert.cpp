// ALBERT: one layer group of one layer shared by every layer, BERT's
// post-LN structure, embeddings of width e mapped into d_model.
#include "hf_layout.hpp"

namespace sanpath::io {

namespace {

void read_config(const HfConfig& c, Architecture& a, EmbeddingSizes& e) {
  a.layers = c.positive_int("num_hidden_layers");
  a.heads = c.positive_int("num_attention_heads");
  a.d_qk = a.d_v = c.head_width("hidden_size", "num_attention_heads");
  a.d_model = c.positive_int("hidden_size");
  a.d_ff = c.positive_int("intermediate_size");
  e.width = c.positive_int_or("embedding_size", 128);
  if (c.positive_int_or("num_hidden_groups", 1) != 1)
    fail(c.path, "num_hidden_groups", "only 1 layer group is supported, got " + brief(c.j.at("num_hidden_groups")));
  if (c.positive_int_or("inner_group_num", 1) != 1)
    fail(c.path, "inner_group_num", "only 1 layer per group is supported, got " + brief(c.j.at("inner_group_num")));
  c.require_absolute_positions();
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  a.activation = c.activation("hidden_act", "gelu_new");
  a.ln_eps = c.eps_or("layer_norm_eps", 1e-12);
  a.shared_layers = true;
  e.vocab = c.size_or_any("vocab_size");
  e.positions = c.size_or_any("max_position_embeddings");
  e.types = c.size_or_any("type_vocab_size");
}

void layer(const Dims& k, int, LayerWeights& w, Slots& s) {
  const std::string p = "encoder.albert_layer_groups.0.albert_layers.0.";
  const std::pair<char, const char*> qkv[] = {{'Q', "query"}, {'K', "key"}, {'V', "value"}};
  for (const auto& [which, name] : qkv) {
    const std::string key = p + "attention." + name;
    Slot& W = s.add(key + ".weight", {k.d, k.d});
    Slot& b = s.add(key + ".bias", {k.d});
    s.heads_in(W, b, Storage::linear, w, which, 0, k);
  }
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
  json c = {{"architectures", {"AlbertModel"}},
            {"model_type", "albert"},
            {"num_hidden_layers", a.layers},
            {"num_attention_heads", a.heads},
            {"hidden_size", a.d_model},
            {"intermediate_size", a.d_ff},
            {"hidden_act", hf_activation_name(a.activation)},
            {"layer_norm_eps", a.ln_eps},
            {"position_embedding_type", "absolute"},
            {"num_hidden_groups", 1},
            {"inner_group_num", 1},
            {"embedding_size", e ? e->width : a.d_model}};
  if (e) {
    c["vocab_size"] = e->vocab;
    c["max_position_embeddings"] = e->positions;
    c["type_vocab_size"] = e->types;
  }
  return c;
}

}  // namespace

Family albert_family() {
  Family f{Layout::albert, "albert.", {"albert"}, "Albert", "albert_layer_groups."};
  f.shared_layers = true;
  f.read_config = read_config;
  f.write_config = write_config;
  f.layer = layer;
  f.embeddings = embeddings;
  return f;
}

}  // namespace sanpath::io

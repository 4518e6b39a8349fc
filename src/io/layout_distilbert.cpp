// DistilBERT: BERT's post-LN structure with its own names and config keys,
// no token types, LayerNorm epsilon 1e-12 (not in config.json).
#include "hf_layout.hpp"

namespace sanpath::io {

namespace {

void read_config(const HfConfig& c, Architecture& a, EmbeddingSizes& e) {
  a.layers = c.positive_int("n_layers");
  a.heads = c.positive_int("n_heads");
  a.d_qk = a.d_v = c.head_width("dim", "n_heads");
  a.d_model = c.positive_int("dim");
  a.d_ff = c.positive_int("hidden_dim");
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  a.activation = c.activation("activation", "gelu");
  a.ln_eps = 1e-12;
  e.vocab = c.size_or_any("vocab_size");
  e.positions = c.size_or_any("max_position_embeddings");
  e.width = a.d_model;
}

void layer(const Dims& k, int l, LayerWeights& w, Slots& s) {
  const std::string p = "transformer.layer." + str(l) + ".";
  const std::pair<char, const char*> qkv[] = {{'Q', "q_lin"}, {'K', "k_lin"}, {'V', "v_lin"}};
  for (const auto& [which, name] : qkv) {
    const std::string key = p + "attention." + name;
    Slot& W = s.add(key + ".weight", {k.d, k.d});
    Slot& b = s.add(key + ".bias", {k.d});
    s.heads_in(W, b, Storage::linear, w, which, 0, k);
  }
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
  const Architecture& a = m.arch();
  json c = {{"architectures", {"DistilBertModel"}},
            {"model_type", "distilbert"},
            {"n_layers", a.layers},
            {"n_heads", a.heads},
            {"dim", a.d_model},
            {"hidden_dim", a.d_ff},
            {"activation", hf_activation_name(a.activation)}};
  if (e) {
    c["vocab_size"] = e->vocab;
    c["max_position_embeddings"] = e->positions;
  }
  return c;
}

}  // namespace

Family distilbert_family() {
  Family f{Layout::distilbert, "distilbert.", {"distilbert"}, "DistilBert", ".attention.q_lin."};
  f.fixed_ln_eps = 1e-12;
  f.read_config = read_config;
  f.write_config = write_config;
  f.layer = layer;
  f.embeddings = embeddings;
  return f;
}

}  // namespace sanpath::io

// The T5 encoder (families.md, "T5 encoder"): T5EncoderModel checkpoints and
// the encoder half of T5ForConditionalGeneration / T5Model (v1.0, v1.1,
// Flan-T5). Every decoder.* tensor and lm_head.weight is ignored; a config
// with is_decoder true is refused.
//
// Mapping onto the per-head form (torch Linear weights, [out, in]): head h
// owns rows [h·d_kv, (h+1)·d_kv) of q, k, v (W_Q^h = q[rows]ᵀ, d×d_kv) and
// columns [h·d_kv, (h+1)·d_kv) of o (W_O^h = o[:, cols]ᵀ, d_kv×d); H·d_kv
// need not equal d. wi → W_1 (non-gated), wi_0 → W_gate and wi_1 → W_1
// (gated), wo → W_2; layer.0.layer_norm / layer.1.layer_norm → ln1_g / ln2_g
// (RMSNorm without unit offset, zero ln*_b); no biases exist anywhere (zero).
// Block 0's relative_attention_bias (nb × H) is the table of every block
// (LayerWeights::pos_bias, the same copy in each layer); the logits are not
// scaled (score_scale_base 1). shared.weight or encoder.embed_tokens.weight
// (tied: either may be the only stored copy) is the token table.
// encoder.final_layer_norm is after the analysed stack: checked, not used.
// The writer stores a T5EncoderModel: the bias table in block 0 only, a unit
// final norm, the token table as shared.weight.
#include "hf_layout.hpp"

#include <stdexcept>
#include <string>

namespace sanpath::io {

namespace t5_layout {  // this file's pieces (named: the library compiles in unity batches)

/// config.json's feed_forward_proj, read as HF reads it.
struct FeedForward {
  bool gated = false;
  Activation act = Activation::relu;
  std::string fn;  ///< HF's dense_act_fn for it ("gelu_new" for "gated-gelu")
};

/// The activations feed_forward_proj may name, and their HF names.
bool t5_activation(const std::string& name, Activation& act) {
  if (name == "relu") act = Activation::relu;
  else if (name == "gelu") act = Activation::gelu;
  else if (name == "gelu_new") act = Activation::gelu_tanh;
  else if (name == "silu") act = Activation::silu;
  else return false;
  return true;
}

FeedForward read_feed_forward(const HfConfig& c) {
  const std::string proj = c.string_or("feed_forward_proj", "relu");
  FeedForward ff;
  std::string act = proj;
  const auto dash = proj.find('-');
  if (dash != std::string::npos) {
    if (proj.compare(0, dash, "gated") != 0 || proj.find('-', dash + 1) != std::string::npos)
      fail(c.path, "feed_forward_proj",
           "'" + proj + "' is not of the form ACT or gated-ACT (ACT: relu, gelu, gelu_new, silu)");
    ff.gated = true;
    act = proj.substr(dash + 1);
  }
  if (!t5_activation(act, ff.act))
    fail(c.path, "feed_forward_proj",
         "'" + proj + "': activation '" + act + "' is not supported (relu, gelu, gelu_new, silu)");
  ff.fn = act;
  if (proj == "gated-gelu") {  // HF's remap: v1.1 and Flan-T5 use the tanh form
    ff.act = Activation::gelu_tanh;
    ff.fn = "gelu_new";
  }
  if (c.has("dense_act_fn")) {
    const std::string saved = c.string_or("dense_act_fn", "");
    if (saved != ff.fn)
      fail(c.path, "dense_act_fn",
           "'" + saved + "' contradicts feed_forward_proj '" + proj + "' (which means " + ff.fn + ")");
  }
  if (c.has("is_gated_act") && c.bool_or("is_gated_act", false) != ff.gated)
    fail(c.path, "is_gated_act",
         std::string(ff.gated ? "false" : "true") + " contradicts feed_forward_proj '" + proj + "'");
  return ff;
}

/// me = ⌊⌊nb/2⌋/2⌋ ≥ 1 and md > me, else `refuse(key, why)`.
template <class Refuse> void check_buckets(int nb, int md, const char* nb_key, const char* md_key, Refuse refuse) {
  const int me = nb / 2 / 2;
  if (me < 1)
    refuse(nb_key, std::to_string(nb) + " buckets leave no exact bucket (⌊⌊nb/2⌋/2⌋ = " + std::to_string(me) +
                       "; at least 4 buckets are needed)");
  if (md <= me)
    refuse(md_key, std::to_string(md) + " does not exceed the " + std::to_string(me) + " exact buckets of " +
                       std::to_string(nb) + " buckets");
}

const char* const kBias = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";

/// The sizes of a T5 encoder layer and its slots (names as stored).
struct T5Layer {
  int H, d, dkv, ff, nb;
  bool gated;
  /// The slots of layer l; `with_bias`: block 0's bias table into this layer's pos_bias.
  void slots(int l, LayerWeights& w, Slots& s, bool with_bias) const {
    const std::int64_t hd = std::int64_t(H) * dkv;
    const std::string p = "encoder.block." + str(l) + ".";
    w.heads.resize(static_cast<std::size_t>(H));
    const auto heads_in = [&](const char* key, MatrixXd HeadWeights::*W, VectorXd HeadWeights::*b) {
      Slot& weight = s.add(p + "layer.0.SelfAttention." + key + ".weight", {hd, d});
      for (int h = 0; h < H; ++h) {
        HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
        weight.pieces.push_back({&(hw.*W), nullptr, TensorBlock{std::int64_t(h) * dkv, dkv, 0, d, true}});
        hw.*b = VectorXd::Zero(dkv);
      }
    };
    heads_in("q", &HeadWeights::W_Q, &HeadWeights::b_Q);
    heads_in("k", &HeadWeights::W_K, &HeadWeights::b_K);
    heads_in("v", &HeadWeights::W_V, &HeadWeights::b_V);
    Slot& o = s.add(p + "layer.0.SelfAttention.o.weight", {d, hd});
    for (int h = 0; h < H; ++h)
      o.pieces.push_back({&w.heads[static_cast<std::size_t>(h)].W_O, nullptr,
                          TensorBlock{0, d, std::int64_t(h) * dkv, dkv, true}});
    w.b_O = VectorXd::Zero(d);
    if (with_bias) s.add(kBias, {nb, H}).pieces.push_back({&w.pos_bias, nullptr, TensorBlock{0, nb, 0, H, false}});
    const auto linear = [&](const std::string& key, MatrixXd& W, std::int64_t out, std::int64_t in) {
      s.add(p + key + ".weight", {out, in}).pieces.push_back({&W, nullptr, TensorBlock{0, out, 0, in, true}});
    };
    if (gated) {
      linear("layer.1.DenseReluDense.wi_0", w.W_gate, ff, d);
      linear("layer.1.DenseReluDense.wi_1", w.W_1, ff, d);
    } else {
      linear("layer.1.DenseReluDense.wi", w.W_1, ff, d);
    }
    linear("layer.1.DenseReluDense.wo", w.W_2, d, ff);
    w.b_1 = VectorXd::Zero(ff);
    w.b_2 = VectorXd::Zero(d);
    s.vector(p + "layer.0.layer_norm.weight", w.ln1_g, d);
    s.vector(p + "layer.1.layer_norm.weight", w.ln2_g, d);
    w.ln1_b = w.ln2_b = VectorXd::Zero(d);
  }
};

Model load(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& store,
           const std::string& source, const LoadOptions& options) {
  const TensorStore& f = *store;
  const std::string& config_path = c.path;
  const std::string type = to_string(fam.layout);
  if (c.bool_or("is_decoder", false))
    fail(config_path, "is_decoder", "true: a T5 decoder stack is not part of the t5 layout (the encoder only)");
  const int L = c.positive_int("num_layers");
  const int H = c.positive_int("num_heads");
  const int d = c.positive_int("d_model");
  const int dkv = c.positive_int("d_kv");
  const int ff = c.positive_int("d_ff");
  const int nb = c.positive_int_or("relative_attention_num_buckets", 32);
  const int md = c.positive_int_or("relative_attention_max_distance", 128);
  check_buckets(nb, md, "relative_attention_num_buckets", "relative_attention_max_distance",
                [&](const char* key, const std::string& why) { fail(config_path, key, why); });
  const FeedForward act = read_feed_forward(c);

  Architecture a;
  a.layers = L;
  a.heads = H;
  a.d_model = d;
  a.d_qk = a.d_v = dkv;
  a.d_ff = ff;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none};
  a.activation = act.act;
  a.gated_mlp = act.gated;
  a.ln_eps = c.eps_or("layer_norm_epsilon", 1e-6);
  a.norm = NormKind::rms;
  a.rel_buckets = nb;
  a.rel_max_distance = md;
  a.score_scale_base = 1.0;  // T5 does not scale its logits
  a.own_norm_placement_only = true;

  if (static_cast<std::size_t>(L) > f.size())
    fail(config_path, "num_layers",
         str(L) + " layers, but " + f.path() + " holds only " + std::to_string(f.size()) +
             " tensors (a layer has 8 or 9)");
  if (!f.find(kBias))
    fail(f.path(), kBias, "missing: block 0 holds the relative position bias table every block uses");
  const LayerPrefix cut = layer_prefix(options, L, config_path, "num_layers", source);
  a.layers = cut.layers;
  const T5Layer k{H, d, dkv, ff, nb, act.gated};
  const auto layer_slots = [k](int l, LayerWeights& w, Slots& s, bool with_bias) { k.slots(l, w, s, with_bias); };
  const LayerSlots slots_of = [layer_slots](int l, LayerWeights& w, Slots& s) { layer_slots(l, w, s, true); };
  Walk w = begin_walk(fam, c, store, "", options, 0, slots_of);  // resident layers listed here:
  if (!w.streamed) {
    w.layers.resize(static_cast<std::size_t>(a.layers));
    for (std::size_t l = 0; l < w.layers.size(); ++l) layer_slots(static_cast<int>(l), w.layers[l], w.slots, false);
    Slot& bias = w.slots.add(kBias, {nb, H});  // one read of the table, into every layer
    for (LayerWeights& lw : w.layers)
      bias.pieces.push_back({&lw.pos_bias, nullptr, TensorBlock{0, nb, 0, H, false}});
  }
  w.slots.add("encoder.final_layer_norm.weight", {d});  // checked, not used (after the analysed stack)

  // The token table: shared.weight, or encoder.embed_tokens.weight where it is the only copy.
  const char* word_key = f.find("shared.weight") ? "shared.weight"
                         : f.find("encoder.embed_tokens.weight") ? "encoder.embed_tokens.weight"
                                                                 : nullptr;
  if (word_key) {
    const std::int64_t vocab = c.has("vocab_size") ? c.positive_int("vocab_size") : f.find(word_key)->shape.at(0);
    add_word_table(w, word_key, vocab, d);
    if (std::string(word_key) == "shared.weight" && f.find("encoder.embed_tokens.weight"))
      w.slots.add("encoder.embed_tokens.weight", {vocab, d});  // the tied copy: checked, not read twice
  }
  return finish_walk(w, a, cut.source);
}

/// feed_forward_proj for a gated or plain MLP with `act`; false where T5 has no spelling.
bool feed_forward_name(bool gated, Activation act, std::string& proj, std::string& fn) {
  fn = hf_activation_name(act);  // relu, gelu, gelu_new, silu
  if (!gated) {
    proj = fn;
    return true;
  }
  if (act == Activation::gelu) return false;  // "gated-gelu" means gelu_new
  proj = act == Activation::gelu_tanh ? "gated-gelu" : "gated-" + fn;
  return true;
}

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const Needs need{folder, type};
  need(a.rel_buckets > 0, "rel_buckets", "T5's relative position bias (rel_buckets > 0)");
  check_buckets(a.rel_buckets, a.rel_max_distance, "rel_buckets", "rel_max_distance",
                [&](const char* key, const std::string& why) { fail(folder, key, why); });
  need(a.norm == NormKind::rms && !a.norm_unit_offset, "norm", "RMSNorm with the gain as stored (no 1 + w)");
  need(a.score_scale_base && *a.score_scale_base == 1.0, "score_scale_base", "unscaled logits (score_scale_base 1)");
  need.only(a, written::buckets | written::score_scale | written::gated | written::shared);
  need(a.d_qk == a.d_v, "d_qk", "d_qk = d_v (d_kv)");
  std::string proj, fn;
  need(feed_forward_name(a.gated_mlp, a.activation, proj, fn), "activation",
       "relu, gelu, gelu_tanh or silu (a gated MLP: relu, gelu_tanh or silu; \"gated-gelu\" means gelu_tanh)");
  const int L = a.layers, H = a.heads, d = a.d_model, dkv = a.d_qk;
  for (int l = 0; l < L; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = "layer " + str(l) + " ";
    need(w.has_mlp() && w.gated() == a.gated_mlp, p + "W_1", a.gated_mlp ? "gated MLP weights" : "MLP weights");
    need(w.has_layernorm(), p + "ln1_g", "RMSNorm weights");
    need(is_zero(w.ln1_b) && is_zero(w.ln2_b), p + "ln1_b", "zero RMSNorm biases");
    need(is_zero(w.b_O) && is_zero(w.b_1) && is_zero(w.b_2), p + "b_O", "zero output and MLP biases");
    for (int h = 0; h < H; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      need(is_zero(hw.b_Q) && is_zero(hw.b_K) && is_zero(hw.b_V), p + "head " + str(h) + " b_Q",
           "zero query/key/value biases");
    }
    if (l > 0 && !(w.pos_bias.array() == model.layer(0).pos_bias.array()).all())
      fail(folder, p + "pos_bias", "differs from layer 0's; the " + type + " layout stores one table (block 0's)");
  }
  const auto& emb = model.embeddings();
  if (emb && emb->kind != Layout::t5)
    fail(folder, "embeddings", "kind " + to_string(emb->kind) + " cannot be written in the " + type +
                                   " layout (token rows only, kind t5)");

  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  if (emb) add("shared.weight", emb->word);
  const T5Layer k{H, d, dkv, a.d_ff, a.rel_buckets, a.gated_mlp};
  emit_layers(model, [k](int l, LayerWeights& w, Slots& s) { k.slots(l, w, s, l == 0); }, "", dtype, folder, ts);
  add("encoder.final_layer_norm.weight", VectorXd(VectorXd::Ones(d)));
  json c = {{"architectures", {"T5EncoderModel"}},
            {"model_type", type},
            {"d_model", d},
            {"num_heads", H},
            {"d_kv", dkv},
            {"num_layers", L},
            {"d_ff", a.d_ff},
            {"relative_attention_num_buckets", a.rel_buckets},
            {"relative_attention_max_distance", a.rel_max_distance},
            {"layer_norm_epsilon", a.ln_eps},
            {"feed_forward_proj", proj},
            {"dense_act_fn", fn},
            {"is_gated_act", a.gated_mlp},
            {"is_decoder", false},
            {"is_encoder_decoder", false},
            {"use_cache", false},
            {"torch_dtype", dtype == "F64" ? "float64" : "float32"}};
  if (emb) c["vocab_size"] = emb->word.rows();
  write_checkpoint(folder, ts, c);
}

void structure(RandomModelSpec& spec, const FamilyOptions& o) {
  Architecture& a = spec.arch;
  const int nb = o.rel_buckets.value_or(32), md = o.rel_max_distance.value_or(128);
  if (nb < 1) throw std::invalid_argument("rel_buckets: must be positive, got " + std::to_string(nb));
  if (md < 1) throw std::invalid_argument("rel_max_distance: must be positive, got " + std::to_string(md));
  check_buckets(nb, md, "rel_buckets", "rel_max_distance", [](const char* key, const std::string& why) {
    throw std::invalid_argument(std::string(key) + ": " + why);
  });
  if (a.d_qk != a.d_v)
    throw std::invalid_argument("d_v: the t5 layout has one head width d_kv (d_qk = d_v), got d_qk " +
                                std::to_string(a.d_qk) + ", d_v " + std::to_string(a.d_v));
  if (a.kv_heads != 0 && a.kv_heads != a.heads)
    throw std::invalid_argument("kv_heads: the t5 layout has one key/value head per query head");
  if (a.d_ff < 1) throw std::invalid_argument("d_ff: the t5 layout needs an MLP (d_ff >= 1)");
  if (spec.bias_std != 0) throw std::invalid_argument("bias_std: the t5 layout has no biases (0 only)");
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none};
  a.norm = NormKind::rms;
  a.norm_unit_offset = false;
  a.kv_heads = 0;
  a.rope_theta.reset();
  a.rotary_dims = 0;
  a.parallel_residual = false;
  a.sandwich_norms = false;
  a.softcap.reset();
  a.attention_window = 0;
  a.window_layers.clear();
  a.xlnet_relative = false;
  a.clamp_len = 0;
  a.rel_buckets = nb;
  a.rel_max_distance = md;
  a.score_scale_base = 1.0;
  a.own_norm_placement_only = true;
  a.gated_mlp = o.gated.value_or(false);
  if (a.gated_mlp) a.activation = Activation::gelu_tanh;  // "gated-gelu" (v1.1, Flan-T5)
  spec.embeddings = Layout::t5;
}

}  // namespace t5_layout

Family t5_family() {
  using namespace t5_layout;
  Family f;
  f.layout = Layout::t5;
  f.prefix = "";
  f.model_types = {"t5"};
  f.display = "T5 encoder";
  f.architecture = "T5";
  f.tensor_mark = ".DenseReluDense.";
  f.load = load;
  f.save = save;
  f.structure = structure;
  f.options = {"rel_buckets", "rel_max_distance", "gated"};
  return f;
}

}  // namespace sanpath::io

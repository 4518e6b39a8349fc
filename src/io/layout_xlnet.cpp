// XLNet (families.md, "XLNet"): XLNetModel (no prefix) and the XLNetFor* /
// XLNetLMHeadModel heads (prefix "transformer."). Only the content stream
// is read: mask_emb, r_s_bias and seg_embed do not enter it (the segment
// term is constant along each row for one segment and cancels in the
// softmax); r_s_bias and seg_embed are checked, mask_emb ignored.
//
// Mapping onto the per-head form: rel_attn.q, .k, .v, .r are [d, H, d_h]
// with W_Q^h = q[:, h, :] (d×d_h), likewise W_K, W_V, W_R; rel_attn.o is
// [d, H, d_h] with W_O^h = o[:, h, :]ᵀ (d_h×d); r_w_bias / r_r_bias [H, d_h]
// give row h to HeadWeights::r_w / r_r. No q/k/v/o biases exist (zero).
// rel_attn.layer_norm → ln1 (after the attention residual), ff.layer_norm →
// ln2, ff.layer_1 / ff.layer_2 → W_1, b_1 / W_2, b_2 (torch Linear). The
// layer as trained is post-norm; attn_type "uni" is the "bi" model with the
// causal mask. word_embedding is the token table (no positions, no norm).
//
// The three-index tensors are read whole into one column (the slot walk
// addresses matrices) and split into heads after decoding, for resident and
// streamed layers alike. The writer stores an XLNetModel (no prefix) with
// zero r_s_bias, seg_embed and mask_emb.
#include "hf_layout.hpp"

#include <climits>
#include <stdexcept>
#include <string>

namespace sanpath::io {

namespace xlnet_layout {  // this file's pieces (named: the library compiles in unity batches)

Activation read_activation(const HfConfig& c) {
  const std::string act = c.string_or("ff_activation", "gelu");
  if (act == "gelu") return Activation::gelu;
  if (act == "gelu_new") return Activation::gelu_tanh;
  if (act == "relu") return Activation::relu;
  if (act == "silu" || act == "swish") return Activation::silu;
  fail(c.path, "ff_activation", "'" + act + "' is not supported (gelu, gelu_new, relu, silu, swish)");
}

/// clamp_len: an integer, > 0 clamps i − j (HF's default −1: none); 0 for none.
int read_clamp(const HfConfig& c) {
  if (!c.has("clamp_len")) return 0;
  const json& v = c.j.at("clamp_len");
  const bool in_range = v.is_number_unsigned() ? v.get<std::uint64_t>() <= INT_MAX
                        : v.is_number_integer() ? v.get<std::int64_t>() >= INT_MIN && v.get<std::int64_t>() <= INT_MAX
                                                : false;
  if (!in_range) fail(c.path, "clamp_len", "must be an integer (<= 0: no clamp), got " + brief(v));
  const int clamp = v.get<int>();
  return clamp > 0 ? clamp : 0;
}

/// The slots of layer l (names without the prefix). A [d, H, d_h] tensor
/// is d rows of H·d_h entries: head h owns the columns [h·d_h, (h+1)·d_h),
/// W_O^h their transpose.
void layer_slots(const Dims& k, int l, LayerWeights& w, Slots& s) {
  const int H = k.heads, d = k.d, dh = k.dh, ff = k.ff;
  const std::string p = "layer." + str(l) + ".";
  w.heads.resize(static_cast<std::size_t>(H));
  const auto three = [&](const char* key, MatrixXd HeadWeights::*W, bool transposed) {
    Slot& slot = s.add(p + "rel_attn." + key, {d, H, dh});
    for (int h = 0; h < H; ++h)
      slot.pieces.push_back({&(w.heads[static_cast<std::size_t>(h)].*W), nullptr,
                             TensorBlock{0, d, std::int64_t(h) * dh, dh, transposed}});
  };
  three("q", &HeadWeights::W_Q, false);
  three("k", &HeadWeights::W_K, false);
  three("v", &HeadWeights::W_V, false);
  three("o", &HeadWeights::W_O, true);
  three("r", &HeadWeights::W_R, false);
  const auto per_head = [&](const char* key, VectorXd HeadWeights::*v) {
    Slot& slot = s.add(p + "rel_attn." + key, {H, dh});
    for (int h = 0; h < H; ++h)
      slot.pieces.push_back({nullptr, &(w.heads[static_cast<std::size_t>(h)].*v),
                             TensorBlock{std::int64_t(h), 1, 0, dh, true}});
  };
  per_head("r_w_bias", &HeadWeights::r_w);
  per_head("r_r_bias", &HeadWeights::r_r);
  s.add(p + "rel_attn.r_s_bias", {H, dh});      // checked, not used: the segment term cancels
  s.add(p + "rel_attn.seg_embed", {2, H, dh});  // likewise
  for (HeadWeights& hw : w.heads) hw.b_Q = hw.b_K = hw.b_V = VectorXd::Zero(dh);
  w.b_O = VectorXd::Zero(d);
  s.layernorm(p + "rel_attn.layer_norm", w.ln1_g, w.ln1_b, d, false);
  s.dense(p + "ff.layer_1", Storage::linear, w.W_1, w.b_1, d, ff);
  s.dense(p + "ff.layer_2", Storage::linear, w.W_2, w.b_2, ff, d);
  s.layernorm(p + "ff.layer_norm", w.ln2_g, w.ln2_b, d, false);
}

Model load(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& store,
           const std::string& source, const LoadOptions& options) {
  const TensorStore& f = *store;
  const std::string& config_path = c.path;
  const std::string type = to_string(fam.layout);
  const int L = c.positive_int("n_layer");
  const int H = c.positive_int("n_head");
  const int d = c.positive_int("d_model");
  const int ff = c.positive_int("d_inner");
  if (d % 2 != 0)
    fail(config_path, "d_model", str(d) + " is odd; XLNet's sinusoid R(p) has d/2 sines and d/2 cosines");
  if (d % H != 0) fail(config_path, "d_model", str(d) + " is not divisible by n_head = " + str(H));
  const int dh = c.positive_int_or("d_head", d / H);
  if (dh != d / H) fail(config_path, "d_head", str(dh) + " differs from d_model / n_head = " + str(d / H));
  const Activation act = read_activation(c);
  const double eps = c.eps_or("layer_norm_eps", 1e-12);
  const std::string attn = c.string_or("attn_type", "bi");
  if (attn != "bi" && attn != "uni")
    fail(config_path, "attn_type", "'" + attn + "' is not supported (bi, or uni: the causal mask)");
  if (c.bool_or("bi_data", false))
    fail(config_path, "bi_data", "true is not supported (it runs a sequence forward and backward as a pair)");
  const int clamp = read_clamp(c);
  if (c.bool_or("same_length", false) && attn == "uni")
    fail(config_path, "same_length", "true with attn_type uni is not supported (it hides keys beyond the causal mask)");

  Architecture a;
  a.layers = L;
  a.heads = H;
  a.d_model = d;
  a.d_qk = a.d_v = dh;
  a.d_ff = ff;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::post, attn == "uni" ? MaskKind::causal : MaskKind::none};
  a.activation = act;
  a.ln_eps = eps;
  a.norm = NormKind::layer;
  a.xlnet_relative = true;
  a.clamp_len = clamp;
  a.own_norm_placement_only = true;

  if (static_cast<std::size_t>(L) > f.size())
    fail(config_path, "n_layer",
         str(L) + " layers, but " + f.path() + " holds only " + std::to_string(f.size()) +
             " tensors (a layer has 17)");
  const LayerPrefix cut = layer_prefix(options, L, config_path, "n_layer", source);
  a.layers = cut.layers;
  const std::string prefix = prefix_in_use(f, fam.prefix);
  // Layer l's slots (kept by a streamed model: everything by value).
  const LayerSlots slots_of = [k = Dims{H, d, dh, ff}](int l, LayerWeights& w, Slots& s) { layer_slots(k, l, w, s); };
  Walk w = begin_walk(fam, c, store, prefix, options, a.layers, slots_of);
  const TensorInfo* table = f.find(prefix + "word_embedding.weight");
  add_word_table(w, "word_embedding.weight",
                 c.has("vocab_size") ? c.positive_int("vocab_size") : table ? table->shape.at(0) : 0, d);
  return finish_walk(w, a, cut.source);
}

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const Needs need{folder, type};
  const int L = a.layers, H = a.heads, d = a.d_model, dh = a.d_qk;
  need(a.xlnet_relative, "xlnet_relative", "XLNet's relative attention (W_R, r_w, r_r)");
  need(d % 2 == 0, "d_model", "an even d_model");
  need.equal_heads(a);
  need(!a.score_scale_base || *a.score_scale_base == double(a.d_qk), "score_scale_base",
       "logits scaled by 1/sqrt(d_head)");
  need.only(a, written::xlnet | written::score_scale);
  need.layer_norm_layers(model);
  for (int l = 0; l < L; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = "layer " + str(l) + " ";
    need(is_zero(w.b_O), p + "b_O", "a zero output bias");
    for (int h = 0; h < H; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      need(is_zero(hw.b_Q) && is_zero(hw.b_K) && is_zero(hw.b_V), p + "head " + str(h) + " b_Q",
           "zero query/key/value biases");
    }
  }
  const auto& emb = model.embeddings();
  if (emb && emb->kind != Layout::xlnet)
    fail(folder, "embeddings", "kind " + to_string(emb->kind) + " cannot be written in the " + type +
                                   " layout (token rows only, kind xlnet)");

  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  if (emb) add("word_embedding.weight", emb->word);
  {
    Tensor mask = make_tensor("mask_emb", MatrixXd(MatrixXd::Zero(1, d)), dtype);  // [1, 1, d]
    mask.shape = {1, 1, d};
    ts.push_back(std::move(mask));
  }
  emit_layers(model, [k = Dims{H, d, dh, a.d_ff}](int l, LayerWeights& w, Slots& s) { layer_slots(k, l, w, s); }, "",
              dtype, folder, ts);
  json c = {{"architectures", {"XLNetModel"}},
            {"model_type", type},
            {"d_model", d},
            {"n_head", H},
            {"d_head", dh},
            {"n_layer", L},
            {"d_inner", a.d_ff},
            {"ff_activation", hf_activation_name(a.activation)},
            {"layer_norm_eps", a.ln_eps},
            {"attn_type", a.variant.mask == MaskKind::causal ? "uni" : "bi"},
            {"bi_data", false},
            {"clamp_len", a.clamp_len > 0 ? a.clamp_len : -1},
            {"same_length", false},
            {"untie_r", true},
            {"mem_len", nullptr},
            {"reuse_len", nullptr},
            {"torch_dtype", dtype == "F64" ? "float64" : "float32"}};
  if (emb) c["vocab_size"] = emb->word.rows();
  write_checkpoint(folder, ts, c);
}

void structure(RandomModelSpec& spec, const FamilyOptions& o) {
  Architecture& a = spec.arch;
  const int clamp = o.clamp_len.value_or(0);
  if (clamp < 0) throw std::invalid_argument("clamp_len: must be >= 0 (0: no clamp), got " + std::to_string(clamp));
  if (a.d_model % 2 != 0)
    throw std::invalid_argument("d_model: the xlnet layout needs an even d_model (the sinusoid pairs sin and cos), "
                                "got " + std::to_string(a.d_model));
  if (a.heads < 1 || a.d_model % a.heads != 0 || a.d_qk != a.d_model / a.heads || a.d_v != a.d_qk)
    throw std::invalid_argument("d_qk: the xlnet layout needs d_qk = d_v = d_model / heads (d_head)");
  if (a.kv_heads != 0 && a.kv_heads != a.heads)
    throw std::invalid_argument("kv_heads: the xlnet layout has one key/value head per query head");
  if (a.d_ff < 1) throw std::invalid_argument("d_ff: the xlnet layout needs an MLP (d_ff >= 1)");
  if (spec.bias_std != 0)
    throw std::invalid_argument("bias_std: the xlnet layout has no query/key/value/output biases (0 only)");
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::post,
                      o.causal.value_or(false) ? MaskKind::causal : MaskKind::none};
  a.norm = NormKind::layer;
  a.norm_unit_offset = false;
  a.kv_heads = 0;
  a.rope_theta.reset();
  a.rotary_dims = 0;
  a.gated_mlp = false;
  a.parallel_residual = false;
  a.sandwich_norms = false;
  a.softcap.reset();
  a.score_scale_base.reset();
  a.attention_window = 0;
  a.window_layers.clear();
  a.rel_buckets = a.rel_max_distance = 0;
  a.xlnet_relative = true;
  a.clamp_len = clamp;
  a.own_norm_placement_only = true;
  spec.embeddings = Layout::xlnet;
}

}  // namespace xlnet_layout

Family xlnet_family() {
  using namespace xlnet_layout;
  Family f;
  f.layout = Layout::xlnet;
  f.prefix = "transformer.";
  f.model_types = {"xlnet"};
  f.display = "XLNet";
  f.architecture = "XLNet";
  f.tensor_mark = ".rel_attn.r_w_bias";
  f.load = load;
  f.save = save;
  f.structure = structure;
  f.options = {"clamp_len", "causal"};
  return f;
}

}  // namespace sanpath::io

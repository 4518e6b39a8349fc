// OPT (families.md, "GPT-NeoX (Pythia), Phi and OPT checkpoints" §4): torch
// Linear weights ([out, in], y = x Wᵀ + b), LayerNorm (eps 1e-5, fixed),
// learned positions with an offset of 2, an optional projection of the token
// rows (word_embed_proj_dim e ≠ d), pre-LN or post-LN sequential blocks
// (do_layer_norm_before), causal mask, no rotary.
//
// Mapping onto the per-head form: head h owns rows [h·d_h, (h+1)·d_h) of
// q_proj, k_proj, v_proj (weight and bias, used unscaled: HF's d_h^(−1/2) on
// the query is math.md §1's 1/√d_qk) and columns of out_proj;
// self_attn_layer_norm / the layer's final_layer_norm → ln1 / ln2; fc1 / fc2
// → W_1 / W_2. Embeddings (kind opt): embed_tokens → word (vocab × e),
// embed_positions' stored rows 2.. → position (row i is token i's; rows 0 and
// 1 are never used), project_in [d, e] → mapping (e × d, its transpose);
// project_out is checked, not used. With enable_bias false the Linear biases
// are absent (zero); with layer_norm_elementwise_affine false the LayerNorm
// parameters are absent (gain 1, bias 0). The decoder-level final_layer_norm
// and any LM head are outside the analysed stack and ignored.
//
// Refused, naming the config.json key: hidden_size not divisible by
// num_attention_heads, an activation outside gelu, gelu_new,
// gelu_pytorch_tanh, relu, word_embed_proj_dim ≠ hidden_size without
// project_in.weight (checked when the file has embeddings).
#include "hf_layout.hpp"

#include <stdexcept>
#include <string>

namespace sanpath::io {

namespace opt_layout {  // this file's pieces (named: the library compiles in unity batches)

/// OPT's LayerNorm epsilon (there is no config key).
constexpr double kOptEps = 1e-5;
/// Stored position rows before token 0's.
constexpr int kPositionOffset = 2;

const ShapeKeys keys{"num_hidden_layers", "num_attention_heads", "hidden_size", "ffn_dim", "activation_function"};

/// The prefix in use: "model.decoder." (OPTForCausalLM) or "decoder."
/// (OPTModel, the facebook/opt-* files); "model.decoder." when neither is
/// found (the missing names are then listed with it).
std::string prefix_of(const TensorStore& f) {
  bool bare = false;
  for (const TensorInfo* t : f.tensors()) {
    if (t->name.rfind("model.decoder.", 0) == 0) return "model.decoder.";
    bare = bare || t->name.rfind("decoder.", 0) == 0;
  }
  return bare ? "decoder." : "model.decoder.";
}

/// The slots of layer l (names without the prefix).
void layer_slots(const Dims& k, bool bias, bool affine, int l, LayerWeights& w, Slots& s) {
  const std::string p = "layers." + str(l) + ".";
  const std::int64_t d = k.d, dh = k.dh;
  w.heads.resize(static_cast<std::size_t>(k.heads));
  const auto layernorm = [&](const std::string& key, VectorXd& g, VectorXd& b) {
    if (affine) {
      s.layernorm(key, g, b, d, false);
    } else {
      g = VectorXd::Ones(d);
      b = VectorXd::Zero(d);
    }
  };
  const auto bias_of = [&](const std::string& key, VectorXd& b, std::int64_t n) {
    if (bias)
      s.vector(key + ".bias", b, n);
    else
      b = VectorXd::Zero(n);
  };
  layernorm(p + "self_attn_layer_norm", w.ln1_g, w.ln1_b);
  const char* names[3] = {"q_proj", "k_proj", "v_proj"};
  MatrixXd HeadWeights::*W[3] = {&HeadWeights::W_Q, &HeadWeights::W_K, &HeadWeights::W_V};
  VectorXd HeadWeights::*b[3] = {&HeadWeights::b_Q, &HeadWeights::b_K, &HeadWeights::b_V};
  for (int c = 0; c < 3; ++c) {
    const std::string key = p + "self_attn." + names[c];
    Slot& weight = s.add(key + ".weight", {d, d});
    Slot* b_slot = bias ? &s.add(key + ".bias", {d}) : nullptr;
    for (int h = 0; h < k.heads; ++h) {
      HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      const std::int64_t o = std::int64_t(h) * dh;
      weight.pieces.push_back({&(hw.*W[c]), nullptr, TensorBlock{o, dh, 0, d, true}});
      if (b_slot)
        b_slot->pieces.push_back({nullptr, &(hw.*b[c]), TensorBlock{0, 1, o, dh, true}});
      else
        hw.*b[c] = VectorXd::Zero(dh);
    }
  }
  // out_proj [d, d]: head h owns its columns [h·d_h, (h+1)·d_h) (rows of M).
  Slot& out = s.add(p + "self_attn.out_proj.weight", {d, d});
  for (int h = 0; h < k.heads; ++h)
    out.pieces.push_back({&w.heads[static_cast<std::size_t>(h)].W_O, nullptr,
                          TensorBlock{0, d, std::int64_t(h) * dh, dh, true}});
  bias_of(p + "self_attn.out_proj", w.b_O, d);
  layernorm(p + "final_layer_norm", w.ln2_g, w.ln2_b);
  s.add(p + "fc1.weight", {k.ff, d}).pieces.push_back({&w.W_1, nullptr, TensorBlock{0, k.ff, 0, d, true}});
  bias_of(p + "fc1", w.b_1, k.ff);
  s.add(p + "fc2.weight", {d, k.ff}).pieces.push_back({&w.W_2, nullptr, TensorBlock{0, d, 0, k.ff, true}});
  bias_of(p + "fc2", w.b_2, d);
}

Model load(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& store,
           const std::string& source, const LoadOptions& options) {
  const TensorStore& f = *store;
  const std::string type = to_string(fam.layout);
  Architecture a;
  read_shape(c, keys, a);  // hidden_size not divisible by num_attention_heads: refused
  a.d_ff = c.positive_int("ffn_dim");
  a.activation = c.activation("activation_function", "relu");
  a.ln_eps = kOptEps;
  const bool pre = c.bool_or("do_layer_norm_before", true);
  a.variant = Variant{true, MlpKind::residual, pre ? LayerNormKind::pre : LayerNormKind::post, MaskKind::causal};
  a.norm = NormKind::layer;
  a.own_norm_placement_only = true;
  const bool bias = c.bool_or("enable_bias", true);
  const bool affine = c.bool_or("layer_norm_elementwise_affine", true);
  c.bool_or("_remove_final_layer_norm", false);  // a boolean if present; LN_f is not used
  const int d = a.d_model;
  const int e_dim = c.positive_int_or("word_embed_proj_dim", d);
  const std::int64_t P = c.size_or_any("max_position_embeddings");
  const std::string prefix = prefix_of(f);

  if (static_cast<std::size_t>(a.layers) > f.size())
    fail(c.path, "num_hidden_layers",
         str(a.layers) + " layers, but " + f.path() + " holds only " + std::to_string(f.size()) + " tensors");
  const LayerPrefix cut = layer_prefix(options, a.layers, c.path, "num_hidden_layers", source);
  a.layers = cut.layers;
  const Dims k{a.heads, d, a.d_qk, a.d_ff};
  const LayerSlots slots_of = [k, bias, affine](int l, LayerWeights& w, Slots& s) {
    layer_slots(k, bias, affine, l, w, s);
  };
  Walk w = begin_walk(fam, c, store, prefix, options, a.layers, slots_of);
  // Without elementwise affine the LayerNorm has no tensors, but every layer has one (gain 1, bias 0).
  w.streamed_layernorm = true;
  Slots& s = w.slots;
  Embeddings& e = w.emb;
  if (add_word_table(w, "embed_tokens.weight", c.size_or_any("vocab_size"), e_dim)) {
    s.table("embed_positions.weight", e.position, P == kAny ? kAny : P + kPositionOffset, d, kPositionOffset);
    if (e_dim != d) {
      if (!f.find(prefix + "project_in.weight"))
        fail(c.path, "word_embed_proj_dim",
             str(e_dim) + " differs from hidden_size = " + str(d) + ", but " + f.path() + " has no " + prefix +
                 "project_in.weight to map the token rows to width " + str(d));
      // project_in [d, e]: x·project_inᵀ, i.e. mapping = its transpose (e × d).
      s.add("project_in.weight", {d, e_dim}).pieces.push_back({&e.mapping, nullptr, TensorBlock{0, d, 0, e_dim, true}});
      s.add("project_out.weight", {e_dim, d});  // the LM head's: checked, not used
    }
  }
  return finish_walk(w, a, cut.source);
}

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const Needs need{folder, type};
  const int L = a.layers, H = a.heads, d = a.d_model, dh = a.d_qk, ff = a.d_ff;
  need.equal_heads(a);
  need.only(a, 0);
  need(a.ln_eps == kOptEps, "ln_eps", "LayerNorm epsilon 1e-5 (fixed by the format); the model has " + brief(a.ln_eps));
  need(a.activation != Activation::silu, "activation", "gelu, gelu_tanh (gelu_new) or relu");
  need.layer_norm_layers(model);
  const auto& emb = model.embeddings();
  int e_dim = d;
  if (emb) {
    if (emb->kind != Layout::opt)
      fail(folder, "embeddings", "kind " + to_string(emb->kind) + " cannot be written in the " + type + " layout");
    e_dim = static_cast<int>(emb->word.cols());
    if (emb->mapping.size() > 0 && e_dim == d)
      fail(folder, "embeddings.mapping",
           "the " + type + " layout has project_in only when word_embed_proj_dim differs from hidden_size (both " +
               str(d) + ")");
  }
  const bool pre = a.variant.layernorm != LayerNormKind::post;

  const std::string p0 = fam.prefix;
  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  const Dims k{H, d, dh, ff};
  emit_layers(model, [k](int l, LayerWeights& w, Slots& s) { layer_slots(k, true, true, l, w, s); }, p0, dtype, folder,
              ts);
  if (pre) {  // LN_f exists only with do_layer_norm_before (outside the analysis: unit)
    add(p0 + "final_layer_norm.weight", VectorXd(VectorXd::Ones(d)));
    add(p0 + "final_layer_norm.bias", VectorXd(VectorXd::Zero(d)));
  }
  json c = {{"architectures", {fam.architecture + "ForCausalLM"}},
            {"model_type", type},
            {"num_hidden_layers", L},
            {"num_attention_heads", H},
            {"hidden_size", d},
            {"ffn_dim", ff},
            {"activation_function", hf_activation_name(a.activation)},
            {"do_layer_norm_before", pre},
            {"word_embed_proj_dim", e_dim},
            {"max_position_embeddings", 2048},
            {"enable_bias", true},
            {"layer_norm_elementwise_affine", true},
            {"_remove_final_layer_norm", false},
            {"tie_word_embeddings", true},
            {"pad_token_id", 1},
            {"bos_token_id", 2},
            {"eos_token_id", 2},
            {"torch_dtype", dtype == "F64" ? "float64" : "float32"}};
  if (emb) {
    const Eigen::Index P = emb->position.rows();
    MatrixXd positions = MatrixXd::Zero(P + kPositionOffset, d);  // rows 0 and 1 are never used
    positions.bottomRows(P) = emb->position;
    add(p0 + "embed_tokens.weight", emb->word);
    add(p0 + "embed_positions.weight", positions);
    if (e_dim != d) {
      add(p0 + "project_in.weight", MatrixXd(emb->mapping.transpose()));  // [d, e]
      // project_out [e, d] belongs to the LM head (outside the analysis):
      // written as the adjoint of project_in, x ↦ x·mappingᵀ.
      add(p0 + "project_out.weight", emb->mapping);
    }
    c["vocab_size"] = emb->word.rows();
    c["max_position_embeddings"] = P;
  }
  write_checkpoint(folder, ts, c);
}

void structure(RandomModelSpec& spec, const FamilyOptions& o) {
  Architecture& a = spec.arch;
  if (o.embed_dim) {
    if (*o.embed_dim < 1) throw std::invalid_argument("embed_dim: must be at least 1, got " + str(*o.embed_dim));
    spec.embed_dim = *o.embed_dim;
  }
  const bool pre = o.pre_norm.value_or(true);
  a.variant = Variant{true, MlpKind::residual, pre ? LayerNormKind::pre : LayerNormKind::post, MaskKind::causal};
  a.norm = NormKind::layer;
  a.ln_eps = kOptEps;  // fixed by the format
  a.gated_mlp = false;
  a.parallel_residual = false;
  a.rope_theta.reset();
  a.rotary_dims = 0;
  a.own_norm_placement_only = true;
}

}  // namespace opt_layout

Family opt_family() {
  using namespace opt_layout;
  Family f;
  f.layout = Layout::opt;
  f.prefix = "model.decoder.";
  f.model_types = {"opt"};
  f.display = "OPT";
  f.architecture = "OPT";
  f.tensor_mark = ".self_attn_layer_norm.";
  f.load = load;
  f.save = save;
  f.structure = structure;
  f.options = {"embed_dim", "pre_norm"};
  return f;
}

}  // namespace sanpath::io

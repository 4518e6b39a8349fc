// ViT (families.md, "Gemma, Gemma 2 and ViT checkpoints"): torch Linear
// weights ([out, in], y = x Wᵀ + b), pre-LN layers (layernorm_before → ln1,
// layernorm_after → ln2), q/k/v biases when qkv_bias, no mask, no rotary.
// The embedding cuts an image [C, S, S] into ⌊S/p⌋² patches: the stride-p
// Conv2d weight [d, C, p, p] is held as d × (C·p·p) with column c·p² + i·p + j
// (the tensor's row-major flattening of its last three axes), its bias as
// patch_b, cls_token [1, 1, d] as cls and position_embeddings [1, N+1, d] as
// the (N+1) × d position rows (row 0 the CLS token's). The prefix "vit."
// (ViTForImageClassification) or none (ViTModel); vit.layernorm, pooler.*
// and classifier.* do not feed the hidden states and are ignored. The
// writer stores a ViTModel: no prefix, a neutral layernorm and pooler.
#include "hf_layout.hpp"

#include "sanpath/core/errors.hpp"
#include "sanpath/core/resources.hpp"

#include <climits>
#include <stdexcept>
#include <string>

namespace sanpath::io {

namespace vit_layout {  // this file's pieces (named: the library compiles in unity batches)

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

const std::string kProjection = "embeddings.patch_embeddings.projection.";

/// image_size or patch_size: an integer, or a list of two equal ones;
/// non-square sizes are refused.
int square_size(const HfConfig& c, const std::string& key, int fallback) {
  if (!c.has(key)) return fallback;
  const json& v = c.j.at(key);
  if (!v.is_array()) return c.positive_int(key);
  const auto positive = [](const json& x) {
    return x.is_number_integer() && x.get<std::int64_t>() >= 1 && x.get<std::int64_t>() <= INT_MAX;
  };
  if (v.size() != 2 || !positive(v[0]) || !positive(v[1]))
    fail(c.path, key, "must be a positive integer or a list of two, got " + brief(v));
  if (v[0] != v[1]) fail(c.path, key, brief(v) + " is not square (only square images and patches are supported)");
  return v[0].get<int>();
}

/// Decodes the whole of tensor `name` (present and of the expected shape:
/// decode_slots checked it) into out[0 .. count), NaN/Inf refused.
void decode_whole(const TensorStore& f, const std::string& name, double* out, std::size_t count) {
  const TensorInfo* t = f.find(name);
  if (!t) throw std::logic_error("decode_whole: " + name + " was not checked");
  const SafetensorsMap& file = f.file_of(*t);
  file.decode_finite(*t, 0, count, out);
  file.release(*t);
}

/// The slots of layer l (names without the prefix); without `qkv_bias` the
/// query, key and value biases are zero and not stored.
void layer_slots(const Dims& k, bool qkv_bias, int l, LayerWeights& w, Slots& s) {
  const std::string q = "encoder.layer." + str(l) + ".";
  s.layernorm(q + "layernorm_before", w.ln1_g, w.ln1_b, k.d, false);
  const char* const names[3] = {"query", "key", "value"};
  if (qkv_bias) {
    s.heads_in_linear(q + "attention.attention.", names, w, k);
  } else {
    Slot no_bias;  // the bias pieces go nowhere: the biases are zero
    const char which[3] = {'Q', 'K', 'V'};
    for (int i = 0; i < 3; ++i) {
      Slot& W = s.add(q + "attention.attention." + names[i] + ".weight", {k.d, k.d});
      s.heads_in(W, no_bias, Storage::linear, w, which[i], 0, k);
    }
    for (HeadWeights& hw : w.heads) hw.b_Q = hw.b_K = hw.b_V = VectorXd::Zero(k.dh);
  }
  s.heads_out(q + "attention.output.dense", Storage::linear, w, k);
  s.layernorm(q + "layernorm_after", w.ln2_g, w.ln2_b, k.d, false);
  s.dense(q + "intermediate.dense", Storage::linear, w.W_1, w.b_1, k.d, k.ff);
  s.dense(q + "output.dense", Storage::linear, w.W_2, w.b_2, k.ff, k.d);
}

Model load(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& store,
           const std::string& source, const LoadOptions& options) {
  const TensorStore& f = *store;
  const std::string& config_path = c.path;
  const std::string type = to_string(fam.layout);
  Architecture a;
  read_shape(c, bert_keys, a);
  a.d_ff = c.positive_int(bert_keys.d_ff);
  a.activation = c.activation(bert_keys.activation, "gelu");
  a.ln_eps = c.eps_or("layer_norm_eps", 1e-12);
  a.norm = NormKind::layer;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none};
  const bool qkv_bias = c.bool_or("qkv_bias", true);
  const int S = square_size(c, "image_size", 224);
  const int p = square_size(c, "patch_size", 16);
  const int C = c.positive_int_or("num_channels", 3);
  if (p > S) fail(config_path, "patch_size", str(p) + " exceeds image_size = " + str(S));
  const std::int64_t g = S / p, N = g * g;

  if (static_cast<std::size_t>(a.layers) > f.size())
    fail(config_path, bert_keys.layers,
         str(a.layers) + " layers, but " + f.path() + " holds only " + std::to_string(f.size()) +
             " tensors (a vit layer has " + (qkv_bias ? "16" : "13") + ")");
  const LayerPrefix cut = layer_prefix(options, a.layers, config_path, bert_keys.layers, source);
  a.layers = cut.layers;
  const std::string prefix = prefix_in_use(f, "vit.");
  const Dims k{a.heads, a.d_model, a.d_qk, a.d_ff};
  // Layer l's slots (kept by a streamed model: everything by value).
  const LayerSlots slots_of = [k, qkv_bias](int l, LayerWeights& w, Slots& s) { layer_slots(k, qkv_bias, l, w, s); };
  const bool streamed = options.layers == LoadOptions::Layers::streamed;
  std::vector<LayerWeights> layers(static_cast<std::size_t>(streamed ? 0 : a.layers));
  Slots s;
  for (std::size_t l = 0; l < layers.size(); ++l) slots_of(static_cast<int>(l), layers[l], s);
  // The embeddings: present when any of their tensors is, then all are
  // needed. The rank-3 and rank-4 tables are checked here and decoded below.
  const int d = a.d_model;
  const bool with_emb = f.find(prefix + "embeddings.cls_token") || f.find(prefix + "embeddings.position_embeddings") ||
                        f.find(prefix + kProjection + "weight");
  Embeddings e;
  if (with_emb) {
    s.add("embeddings.cls_token", {1, 1, d});
    s.add("embeddings.position_embeddings", {1, N + 1, d});
    s.add(kProjection + "weight", {d, C, p, p});
    s.vector(kProjection + "bias", e.patch_b, d);
  }
  std::optional<StreamedLayers> stream;
  if (streamed) stream = stream_layers(a.layers, slots_of, store, prefix, config_path, type);
  decode_slots(s, f, prefix, config_path, type);
  std::optional<Embeddings> emb;
  if (with_emb) {
    const std::int64_t cols = std::int64_t(C) * p * p;
    // Decoded row-major, then copied into the column-major tables.
    require_memory(mul_sat(2 * sizeof(double), static_cast<std::uint64_t>((N + 1 + cols + 1) * d)),
                   printable(f.path() + ": embeddings"), "the ViT position and patch tables as doubles");
    e.kind = Layout::vit;
    e.recipe = embedding_recipe(e.kind);
    e.image_size = S;
    e.patch_size = p;
    e.channels = C;
    e.ln_eps = a.ln_eps;
    e.cls.resize(d);
    decode_whole(f, prefix + "embeddings.cls_token", e.cls.data(), static_cast<std::size_t>(d));
    RowMajor pos(N + 1, d);
    decode_whole(f, prefix + "embeddings.position_embeddings", pos.data(), static_cast<std::size_t>(pos.size()));
    e.position = pos;
    RowMajor patch(d, cols);  // row o: W[o, c, i, j] at column c·p² + i·p + j
    decode_whole(f, prefix + kProjection + "weight", patch.data(), static_cast<std::size_t>(patch.size()));
    e.patch = patch;
    emb = std::move(e);
  }
  if (stream) return Model(a, stream->source, stream->parts, std::move(emb), cut.source);
  return Model(a, std::move(layers), std::move(emb), cut.source, FiniteWeights::checked_by_loader);
}

/// A tensor of `shape` holding the row-major matrix `m` (prod(shape) = m.size()).
Tensor shaped(const std::string& name, const RowMajor& m, Shape shape, const std::string& dtype) {
  return Tensor{name, dtype, std::move(shape), std::vector<double>(m.data(), m.data() + m.size())};
}

void save(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string type = to_string(fam.layout);
  const Needs need{folder, type};
  const int L = a.layers, H = a.heads, d = a.d_model;
  need.equal_heads(a);
  need(a.activation != Activation::silu, "activation", "relu, gelu or gelu_tanh");
  need.only(a, written::shared);
  need.layer_norm_layers(model);
  bool qkv_bias = false;
  for (int l = 0; l < L; ++l) {
    const LayerWeights& w = model.layer(l);
    for (const HeadWeights& hw : w.heads) qkv_bias = qkv_bias || !is_zero(hw.b_Q) || !is_zero(hw.b_K) || !is_zero(hw.b_V);
  }
  const auto& emb = model.embeddings();
  if (emb && emb->kind != Layout::vit)
    fail(folder, "embeddings", "kind " + to_string(emb->kind) + " cannot be written in the " + type + " layout");

  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(make_tensor(name, m, dtype)); };
  emit_layers(model, [k = Dims{H, d, a.d_qk, a.d_ff}, qkv_bias](int l, LayerWeights& w, Slots& s) {
    layer_slots(k, qkv_bias, l, w, s);
  }, "", dtype, folder, ts);
  // Unused by the analysis; neutral, so that HF loads a complete ViTModel.
  add("layernorm.weight", VectorXd(VectorXd::Ones(d)));
  add("layernorm.bias", VectorXd(VectorXd::Zero(d)));
  add("pooler.dense.weight", MatrixXd(MatrixXd::Identity(d, d)));
  add("pooler.dense.bias", VectorXd(VectorXd::Zero(d)));
  json c = shape_config(a, bert_keys, "ViTModel", "vit");
  c["layer_norm_eps"] = a.ln_eps;
  c["qkv_bias"] = qkv_bias;
  if (emb) {
    const std::int64_t C = emb->channels, p = emb->patch_size;
    ts.push_back(shaped("embeddings.cls_token", RowMajor(emb->cls.transpose()), {1, 1, d}, dtype));
    ts.push_back(shaped("embeddings.position_embeddings", RowMajor(emb->position), {1, emb->position.rows(), d}, dtype));
    ts.push_back(shaped(kProjection + "weight", RowMajor(emb->patch), {d, C, p, p}, dtype));
    add(kProjection + "bias", emb->patch_b);
    c["image_size"] = emb->image_size;
    c["patch_size"] = emb->patch_size;
    c["num_channels"] = emb->channels;
  }
  c["torch_dtype"] = dtype == "F64" ? "float64" : "float32";
  write_checkpoint(folder, ts, c);
}

void vit_structure(RandomModelSpec& spec, const FamilyOptions& o) {
  const int S = o.image_size.value_or(224), p = o.patch_size.value_or(16), C = o.channels.value_or(3);
  if (S < 1) throw std::invalid_argument("image_size: must be at least 1, got " + std::to_string(S));
  if (p < 1) throw std::invalid_argument("patch_size: must be at least 1, got " + std::to_string(p));
  if (C < 1) throw std::invalid_argument("channels: must be at least 1, got " + std::to_string(C));
  if (p > S)
    throw std::invalid_argument("patch_size: " + std::to_string(p) + " exceeds image_size " + std::to_string(S));
  Architecture& a = spec.arch;
  if (a.activation == Activation::silu)
    throw std::invalid_argument("activation: the vit layout takes relu, gelu or gelu_tanh, not silu");
  if (a.heads < 1 || a.d_model % a.heads != 0 || a.d_qk != a.d_model / a.heads || a.d_v != a.d_qk)
    throw std::invalid_argument("d_qk: the vit layout needs d_qk = d_v = d_model / heads, got d_model " +
                                std::to_string(a.d_model) + ", heads " + std::to_string(a.heads) + ", d_qk " +
                                std::to_string(a.d_qk) + ", d_v " + std::to_string(a.d_v));
  if (a.kv_heads != 0 && a.kv_heads != a.heads)
    throw std::invalid_argument("kv_heads: the vit layout has one key/value head per query head");
  spec.image_size = S;
  spec.patch_size = p;
  spec.channels = C;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none};
  a.norm = NormKind::layer;
  a.norm_unit_offset = false;
  a.gated_mlp = false;
  a.rope_theta.reset();
  a.rotary_dims = 0;
  a.kv_heads = 0;
  a.parallel_residual = false;
  a.own_norm_placement_only = false;  // families.md §5: ViT takes post as well
  a.sandwich_norms = false;
  a.score_scale_base.reset();
  a.softcap.reset();
  a.attention_window = 0;
  a.window_layers.clear();
}

}  // namespace vit_layout

Family vit_family() {
  using namespace vit_layout;
  Family f;
  f.layout = Layout::vit;
  f.prefix = "vit.";
  f.model_types = {"vit"};
  f.display = "ViT";
  f.input = InputKind::pixels;
  f.architecture = "ViT";
  f.tensor_mark = "embeddings.cls_token";
  f.load = load;
  f.save = save;
  f.structure = vit_structure;
  f.options = {"image_size", "patch_size", "channels"};
  return f;
}

}  // namespace sanpath::io

#include "sanpath/core/errors.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/model/layer_source.hpp"
#include "sanpath/model/shared_layers.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace sanpath {

Eigen::Index Embeddings::word_row(long id) const {
  if (id < 0 || id >= vocab_size())
    throw std::logic_error("Embeddings::word_row: token id " + std::to_string(id) + " outside the vocabulary [0, " +
                           std::to_string(vocab_size()) + ")");
  if (placeholder_id && id == *placeholder_id)
    throw std::invalid_argument("tokens: id " + std::to_string(id) +
                                " stands for an image feature (the multimodal file's image_token_index), which token "
                                "input does not produce");
  if (padding_id && id == *padding_id)
    throw std::invalid_argument("tokens: id " + std::to_string(id) +
                                " is the padding token (pad_token_id), which has no position of its own; give the "
                                "sequence without padding");
  if (!word_ids) return static_cast<Eigen::Index>(id);
  const auto it = std::lower_bound(word_ids->begin(), word_ids->end(), id);
  if (it == word_ids->end() || *it != id)
    throw std::logic_error("embeddings.word: the row of token " + std::to_string(id) +
                           " was not loaded (the model was loaded with " + std::to_string(word_ids->size()) + " of its " +
                           std::to_string(vocab) + " word rows; load it with the token ids it will embed)");
  return static_cast<Eigen::Index>(it - word_ids->begin());
}

Variant VariantOverride::apply(Variant v) const {
  if (skip) v.skip = *skip;
  if (mlp) v.mlp = *mlp;
  if (layernorm) v.layernorm = *layernorm;
  if (mask) v.mask = *mask;
  return v;
}

std::string to_string(const Variant& v, VariantStyle style) {
  const char* sep = style == VariantStyle::pairs ? "=" : " ";
  const char* gap = style == VariantStyle::pairs ? " " : ", ";
  return std::string("skip") + sep + (v.skip ? "on" : "off") + gap + "mlp" + sep + to_string(v.mlp) + gap +
         "layernorm" + sep + to_string(v.layernorm) + gap + "mask" + sep + to_string(v.mask);
}

std::string to_string(MlpKind k) {
  switch (k) {
    case MlpKind::none: return "none";
    case MlpKind::plain: return "plain";
    case MlpKind::residual: return "residual";
  }
  return "?";
}
std::string to_string(LayerNormKind k) {
  switch (k) {
    case LayerNormKind::none: return "none";
    case LayerNormKind::pre: return "pre";
    case LayerNormKind::post: return "post";
  }
  return "?";
}
std::string to_string(MaskKind k) { return k == MaskKind::causal ? "causal" : "none"; }
std::string to_string(Activation a) {
  switch (a) {
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::silu: return "silu";
    case Activation::gelu_fast: return "gelu_fast";
  }
  return "?";
}
std::string to_string(NormKind k) { return k == NormKind::rms ? "rms" : "layer"; }

namespace {
[[noreturn]] void bad_choice(const std::string& what, const std::string& text, const char* allowed) {
  throw std::invalid_argument(printable(what + ": '" + text + "' is not one of " + allowed));
}
}  // namespace

MlpKind parse_mlp(const std::string& t, const std::string& what) {
  if (t == "none") return MlpKind::none;
  if (t == "plain") return MlpKind::plain;
  if (t == "residual") return MlpKind::residual;
  bad_choice(what, t, "none, plain, residual");
}
LayerNormKind parse_layernorm(const std::string& t, const std::string& what) {
  if (t == "none") return LayerNormKind::none;
  if (t == "pre") return LayerNormKind::pre;
  if (t == "post") return LayerNormKind::post;
  bad_choice(what, t, "none, pre, post");
}
MaskKind parse_mask(const std::string& t, const std::string& what) {
  if (t == "none") return MaskKind::none;
  if (t == "causal") return MaskKind::causal;
  bad_choice(what, t, "none, causal");
}
Activation parse_activation(const std::string& t, const std::string& what) {
  if (t == "relu") return Activation::relu;
  if (t == "gelu") return Activation::gelu;
  if (t == "gelu_tanh" || t == "gelu_new" || t == "gelu_pytorch_tanh") return Activation::gelu_tanh;
  if (t == "silu" || t == "swish") return Activation::silu;
  if (t == "gelu_fast") return Activation::gelu_fast;
  bad_choice(what, t, "relu, gelu, gelu_tanh (gelu_new), silu, gelu_fast");
}
namespace {
constexpr Layout all_layouts[] = {Layout::bert,  Layout::gpt2,  Layout::albert,   Layout::roberta,
                                  Layout::distilbert, Layout::llama, Layout::mistral, Layout::qwen2,
                                  Layout::xlnet, Layout::t5,    Layout::gpt_neox, Layout::phi,
                                  Layout::opt,   Layout::gemma, Layout::gemma2,   Layout::vit,
                                  Layout::qwen3, Layout::gemma3};
}  // namespace
std::string to_string(Layout l) {
  switch (l) {
    case Layout::bert: return "bert";
    case Layout::gpt2: return "gpt2";
    case Layout::albert: return "albert";
    case Layout::roberta: return "roberta";
    case Layout::distilbert: return "distilbert";
    case Layout::llama: return "llama";
    case Layout::mistral: return "mistral";
    case Layout::qwen2: return "qwen2";
    case Layout::xlnet: return "xlnet";
    case Layout::t5: return "t5";
    case Layout::gpt_neox: return "gpt_neox";
    case Layout::phi: return "phi";
    case Layout::opt: return "opt";
    case Layout::gemma: return "gemma";
    case Layout::gemma2: return "gemma2";
    case Layout::vit: return "vit";
    case Layout::qwen3: return "qwen3";
    case Layout::gemma3: return "gemma3";
  }
  return "?";
}
std::string layout_names() {
  std::string out;
  for (const Layout l : all_layouts) out += (out.empty() ? "" : "|") + to_string(l);
  return out;
}
Layout parse_layout(const std::string& t) {
  for (const Layout l : all_layouts)
    if (t == to_string(l)) return l;
  std::string names;
  for (const Layout l : all_layouts) names += (names.empty() ? "" : ", ") + to_string(l);
  bad_choice("layout", t, names.c_str());
}
std::string structure_notes(const Architecture& a) {
  std::vector<std::string> parts;
  const auto num = [](double x) {
    std::ostringstream o;
    o << x;
    return o.str();
  };
  if (a.rotary() && a.rotary_dims > 0 && a.rotary_dims < a.d_qk)
    parts.push_back("partial rotary (" + std::to_string(a.rotary_dims) + " of " + std::to_string(a.d_qk) + " dims)");
  if (a.parallel_residual) parts.push_back("parallel block");
  if (a.norm_unit_offset) parts.push_back("RMSNorm gain 1 + w");
  if (a.gated_mlp && a.activation != Activation::silu) parts.push_back("GeGLU MLP with " + to_string(a.activation));
  if (a.sandwich_norms) parts.push_back("post-sublayer norms");
  if (a.query_key_norm)
    parts.push_back(std::string("query/key norm (gain ") + (a.query_key_norm->unit_offset ? "1 + w" : "w") + ")");
  if (!a.layer_rotary.empty()) {
    // The distinct (base, factor) pairs in order of first use, each with its layer count.
    std::vector<std::pair<Architecture::LayerRotary, int>> kinds;
    for (const Architecture::LayerRotary& r : a.layer_rotary) {
      auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) {
        return k.first.theta == r.theta && k.first.linear_factor == r.linear_factor;
      });
      if (it == kinds.end()) kinds.push_back({r, 1});
      else ++it->second;
    }
    std::string s;
    for (const auto& [r, n] : kinds)
      s += (s.empty() ? "" : "; ") + std::string("base ") + num(r.theta) +
           (r.linear_factor != 1 ? " linear factor " + num(r.linear_factor) : "") + " on " + std::to_string(n) +
           " of " + std::to_string(a.layers) + " layers";
    parts.push_back("rotary per layer (" + s + ")");
  }
  if (a.score_scale_base) parts.push_back("score scale " + num(*a.score_scale_base) + "^-1/2");
  if (a.softcap) parts.push_back("logit soft-cap " + num(*a.softcap));
  if (!a.window_layers.empty()) {
    int n = 0;
    for (bool w : a.window_layers) n += w;
    parts.push_back("sliding window " + std::to_string(a.attention_window) + " on " + std::to_string(n) + " of " +
                    std::to_string(a.layers) + " layers");
  }
  if (a.rel_buckets > 0)
    parts.push_back("T5 bucket bias (" + std::to_string(a.rel_buckets) + " buckets, max distance " +
                    std::to_string(a.rel_max_distance) + ")");
  if (a.xlnet_relative)
    parts.push_back(std::string("XLNet relative attention") +
                    (a.clamp_len > 0 ? " (clamp_len " + std::to_string(a.clamp_len) + ")" : ""));
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

bool token_rows_only(Layout l) {
  return rotary_family(l) || l == Layout::xlnet || l == Layout::t5 || l == Layout::gpt_neox || l == Layout::phi ||
         l == Layout::gemma || l == Layout::gemma2 || l == Layout::qwen3 || l == Layout::gemma3;
}
EmbeddingRecipe embedding_recipe(Layout l) {
  EmbeddingRecipe r;  // BERT's: word + position + token type 0, then LayerNorm
  switch (l) {
    case Layout::bert:
    case Layout::roberta:
      return r;
    case Layout::albert:
      r.map_after_norm = true;
      return r;
    case Layout::distilbert:
      r.token_type = false;
      return r;
    case Layout::gpt2:
      r.token_type = r.layer_norm = false;
      return r;
    case Layout::opt:
      r.project_in = true;
      r.token_type = r.layer_norm = false;
      return r;
    case Layout::vit:
      r.patches = true;
      r.token_type = r.layer_norm = false;
      return r;
    case Layout::llama:
    case Layout::mistral:
    case Layout::qwen2:
    case Layout::xlnet:
    case Layout::t5:
    case Layout::gpt_neox:
    case Layout::phi:
    case Layout::gemma:
    case Layout::gemma2:
    case Layout::qwen3:
    case Layout::gemma3:
      r.positions = r.token_type = r.layer_norm = false;
      r.scale_by_root_width = l == Layout::gemma || l == Layout::gemma2 || l == Layout::gemma3;
      return r;
  }
  throw std::logic_error("embedding_recipe: unknown layout");
}
const EmbeddingRecipe& Embeddings::steps() const {
  if (!recipe) throw std::logic_error("Embeddings::steps: the recipe is unset (embeddings outside a Model)");
  return *recipe;
}
bool rotary_family(Layout l) { return l == Layout::llama || l == Layout::mistral || l == Layout::qwen2; }
bool parse_on_off(const std::string& t, const std::string& what) {
  if (t == "on") return true;
  if (t == "off") return false;
  bad_choice(what, t, "on, off");
}

namespace {

struct Checker {
  const std::string& source;
  bool check_finite = true;
  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw std::invalid_argument(source + ": " + field + ": " + why);
  }
  template <class M> void shape(const M& m, Eigen::Index rows, Eigen::Index cols, const std::string& field) const {
    if (m.rows() != rows || m.cols() != cols)
      fail(field, "shape [" + std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + "], expected [" +
                      std::to_string(rows) + ", " + std::to_string(cols) + "]");
    finite(m, field);
  }
  void vec(const VectorXd& v, Eigen::Index n, const std::string& field) const {
    if (v.size() != n) fail(field, "length " + std::to_string(v.size()) + ", expected " + std::to_string(n));
    finite(v, field);
  }
  template <class M> void finite(const M& m, const std::string& field) const {
    if (!check_finite || m.allFinite()) return;  // the vectorised test; the loop below finds the culprit
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      for (Eigen::Index i = 0; i < m.rows(); ++i)
        if (!std::isfinite(m(i, j)))
          fail(field, std::string(std::isnan(m(i, j)) ? "NaN" : "Inf") + " at [" + std::to_string(i) + ", " +
                          std::to_string(j) + "]");
  }
};

}  // namespace

/// A streamed model's source, what its layers hold, and the buffers its
/// passes read layers into (kept for the next read, so that a pass does not
/// ask the kernel for a layer's worth of fresh pages at every step).
struct Model::Stream {
  std::shared_ptr<const LayerSource> source;
  LayerParts parts;
  std::mutex mu;
  std::vector<std::unique_ptr<LayerWeights>> free;
};

namespace {
/// Embeddings whose recipe is stated: an unset one becomes the family's.
std::optional<Embeddings> stated(std::optional<Embeddings> e) {
  if (e && !e->recipe) e->recipe = embedding_recipe(e->kind);
  return e;
}
}  // namespace

Model::Model(Architecture arch, std::vector<LayerWeights> layers, std::optional<Embeddings> embeddings,
             std::string source, FiniteWeights finite)
    : arch_(arch), layers_(std::move(layers)), embeddings_(stated(std::move(embeddings))), source_(std::move(source)) {
  validate(finite);
}

Model::Model(Architecture arch, std::shared_ptr<const LayerSource> layers, LayerParts parts,
             std::optional<Embeddings> embeddings, std::string source)
    : arch_(arch), embeddings_(stated(std::move(embeddings))), source_(std::move(source)) {
  if (!layers) throw std::logic_error("Model: a streamed model needs a layer source");
  stream_ = std::make_shared<Stream>();
  stream_->source = std::move(layers);
  stream_->parts = parts;
  validate(FiniteWeights::checked_by_loader);
}

const LayerWeights& Model::layer(int l) const {
  if (stream_)
    throw std::invalid_argument(source_ + ": layers: streamed from the checkpoint one at a time (forward passes "
                                          "only); this analysis needs every layer in memory: load the model whole, or "
                                          "its first layers only");
  return layers_.at(static_cast<std::size_t>(l));
}

std::shared_ptr<const LayerWeights> Model::layer_for_pass(int l, LayerForm form) const {
  if (!stream_) return {std::shared_ptr<const LayerWeights>(), &layers_.at(static_cast<std::size_t>(l))};
  if (l < 0 || l >= arch_.layers) throw std::out_of_range("Model::layer_for_pass: no layer " + std::to_string(l));
  if (SharedLayers::Member* m = SharedLayers::current(*this)) return m->shared_.take(m->index_, l, form);
  return read_for_pass(l, form);
}

std::shared_ptr<const LayerWeights> Model::read_for_pass(int l, LayerForm form) const {
  std::unique_ptr<LayerWeights> buffer;
  {
    std::lock_guard<std::mutex> lock(stream_->mu);
    if (!stream_->free.empty()) {
      buffer = std::move(stream_->free.back());
      stream_->free.pop_back();
    }
  }
  if (!buffer) buffer = std::make_unique<LayerWeights>();
  stream_->source->read(l, *buffer, form);
  validate_layer(l, *buffer, false);
  // The buffer goes back to the pool (which outlives the model's copies
  // while any pointer is held) when the pass lets go of it.
  std::shared_ptr<Stream> pool = stream_;
  LayerWeights* raw = buffer.release();
  return std::shared_ptr<const LayerWeights>(raw, [pool](const LayerWeights* w) {
    std::unique_ptr<LayerWeights> back(const_cast<LayerWeights*>(w));
    back->mapped.reset();  // the mapped pages go back now, not at the buffer's next use
    std::lock_guard<std::mutex> lock(pool->mu);
    pool->free.push_back(std::move(back));
  });
}

void Model::validate(FiniteWeights finite) const {
  const Checker c{source_, finite == FiniteWeights::check};
  const Architecture& a = arch_;
  if (a.layers < 1) c.fail("layers", "must be at least 1, got " + std::to_string(a.layers));
  if (a.heads < 1) c.fail("heads", "must be at least 1, got " + std::to_string(a.heads));
  if (a.d_model < 1) c.fail("d_model", "must be at least 1, got " + std::to_string(a.d_model));
  if (a.d_qk < 1) c.fail("d_qk", "must be at least 1, got " + std::to_string(a.d_qk));
  if (a.d_v < 1) c.fail("d_v", "must be at least 1, got " + std::to_string(a.d_v));
  if (a.d_ff < 0) c.fail("d_ff", "must not be negative");
  if (!(a.ln_eps >= 0) || !std::isfinite(a.ln_eps)) c.fail("ln_eps", "must be finite and >= 0");
  if (a.kv_heads < 0 || a.key_value_heads() > a.heads || a.heads % a.key_value_heads() != 0)
    c.fail("kv_heads", std::to_string(a.kv_heads) + " does not divide heads = " + std::to_string(a.heads));
  if (a.attention_window < 0) c.fail("attention_window", "must not be negative");
  if (a.rope_theta) {
    if (!std::isfinite(*a.rope_theta) || !(*a.rope_theta > 0)) c.fail("rope_theta", "must be finite and > 0");
    if (a.rotated_dims() % 2 != 0 || a.rotated_dims() > a.d_qk || a.rotary_dims < 0)
      c.fail(a.rotary_dims > 0 ? "rotary_dims" : "d_qk",
             "rotary embeddings rotate an even number of entries, at most d_qk = " + std::to_string(a.d_qk) +
                 ", got " + std::to_string(a.rotated_dims()));
  } else if (a.rotary_dims != 0) {
    c.fail("rotary_dims", "set without rope_theta");
  }
  if (a.score_scale_base && (!std::isfinite(*a.score_scale_base) || !(*a.score_scale_base > 0)))
    c.fail("score_scale_base", "must be finite and > 0");
  if (a.softcap && (!std::isfinite(*a.softcap) || !(*a.softcap > 0))) c.fail("softcap", "must be finite and > 0");
  if (!a.window_layers.empty()) {
    if (static_cast<int>(a.window_layers.size()) != a.layers)
      c.fail("window_layers", "has " + std::to_string(a.window_layers.size()) + " entries for " +
                                  std::to_string(a.layers) + " layers");
    if (a.attention_window < 1) c.fail("attention_window", "window_layers needs a window of at least 1");
  }
  if (a.query_key_norm && (!std::isfinite(a.query_key_norm->eps) || !(a.query_key_norm->eps >= 0)))
    c.fail("query_key_norm.eps", "must be finite and >= 0");
  if (!a.layer_rotary.empty()) {
    if (!a.rotary()) c.fail("layer_rotary", "set without rope_theta");
    if (static_cast<int>(a.layer_rotary.size()) != a.layers)
      c.fail("layer_rotary", "has " + std::to_string(a.layer_rotary.size()) + " entries for " +
                                 std::to_string(a.layers) + " layers");
    for (std::size_t l = 0; l < a.layer_rotary.size(); ++l) {
      const Architecture::LayerRotary& r = a.layer_rotary[l];
      if (!std::isfinite(r.theta) || !(r.theta > 0) || !std::isfinite(r.linear_factor) || !(r.linear_factor > 0))
        c.fail("layer_rotary", "layer " + std::to_string(l) + ": the base and the linear factor must be finite and > 0");
    }
  }
  if (a.rel_buckets < 0 || a.rel_max_distance < 0) c.fail("rel_buckets", "must not be negative");
  if (a.rel_buckets > 0) {
    const int me = a.rel_buckets / 2 / 2;
    if (me < 1) c.fail("rel_buckets", std::to_string(a.rel_buckets) + " buckets leave no exact bucket (need >= 4)");
    if (a.rel_max_distance <= me)
      c.fail("rel_max_distance", std::to_string(a.rel_max_distance) + " must exceed the exact buckets " +
                                     std::to_string(me));
  }
  if (a.xlnet_relative && a.d_model % 2 != 0)
    c.fail("d_model", "XLNet's sinusoid needs an even d_model, got " + std::to_string(a.d_model));
  if (a.clamp_len < 0) c.fail("clamp_len", "must not be negative");
  if (!stream_ && static_cast<int>(layers_.size()) != a.layers)
    c.fail("layers", "config says " + std::to_string(a.layers) + " layers, weights have " +
                         std::to_string(layers_.size()));
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l)
    validate_layer(l, layers_[static_cast<std::size_t>(l)], finite == FiniteWeights::check);
  check_weights_for(a.variant);
  const Eigen::Index d = a.d_model;
  if (embeddings_) {
    const Embeddings& e = *embeddings_;
    const EmbeddingRecipe& r = e.steps();
    if (r.project_in && r.map_after_norm)
      c.fail("embeddings.recipe", "project_in and map_after_norm both read the mapping; a recipe takes one");
    if (r.patches && (r.project_in || r.token_type || r.scale_by_root_width || r.layer_norm || r.map_after_norm))
      c.fail("embeddings.recipe", "patches take only the position rows");
    const Eigen::Index width = r.map_after_norm || (r.project_in && e.mapping.size() > 0) ? e.word.cols() : d;
    if (r.patches) {
      // Pixels, not tokens: patch projection, CLS and positions (families.md).
      const long C = e.channels, S = e.image_size, p = e.patch_size;
      if (C < 1 || S < 1 || p < 1 || p > S)
        c.fail("embeddings.patch_size", "image " + std::to_string(S) + ", patch " + std::to_string(p) + ", " +
                                            std::to_string(C) + " channels: need 1 <= patch <= image, channels >= 1");
      const long g = e.patch_grid();
      c.shape(e.patch, d, C * p * p, "embeddings.patch");
      c.vec(e.patch_b, d, "embeddings.patch_b");
      c.vec(e.cls, d, "embeddings.cls");
      c.shape(e.position, g * g + 1, d, "embeddings.position");
      if (e.word.size() > 0) c.fail("embeddings.word", "a vit model has no word table");
      return;
    }
    if (e.vocab_size() < 1) c.fail("embeddings.word", "empty vocabulary");
    if (e.placeholder_id && (*e.placeholder_id < 0 || *e.placeholder_id >= e.vocab_size()))
      c.fail("embeddings.placeholder_id", std::to_string(*e.placeholder_id) + " is outside the vocabulary [0, " +
                                              std::to_string(e.vocab_size()) + ")");
    if (e.padding_id && (*e.padding_id < 0 || *e.padding_id >= e.vocab_size()))
      c.fail("embeddings.padding_id", std::to_string(*e.padding_id) + " is outside the vocabulary [0, " +
                                          std::to_string(e.vocab_size()) + ")");
    if (e.word_ids) {
      const std::vector<long>& ids = *e.word_ids;
      for (std::size_t k = 0; k < ids.size(); ++k)
        if (ids[k] < 0 || ids[k] >= e.vocab || (k > 0 && ids[k] <= ids[k - 1]))
          c.fail("embeddings.word_ids", "must be sorted, distinct ids in [0, " + std::to_string(e.vocab) + ")");
      c.shape(e.word, static_cast<Eigen::Index>(ids.size()), width, "embeddings.word");
    } else {
      c.shape(e.word, e.word.rows(), width, "embeddings.word");
    }
    if (r.positions)  // added after project_in: width d
      c.shape(e.position, e.position.rows(), r.project_in ? d : width, "embeddings.position");
    else if (e.position.size() > 0)
      c.fail("embeddings.position", "a llama embedding has no position table (rotary positions)");
    if (rotary_family(e.kind) && !a.rotary())
      c.fail("embeddings.kind", "llama embeddings carry no positions; the model needs rope_theta");
    if (e.kind == Layout::distilbert) {
      if (e.token_type.size() > 0) c.fail("embeddings.token_type", "a distilbert model has no token types");
    } else if (r.token_type) {
      if (e.token_type.rows() < 1) c.fail("embeddings.token_type", "missing");
      c.shape(e.token_type, e.token_type.rows(), width, "embeddings.token_type");
    }
    if (r.layer_norm) {
      c.vec(e.ln_g, width, "embeddings.ln_g");
      c.vec(e.ln_b, width, "embeddings.ln_b");
    }
    if (r.map_after_norm) {
      c.shape(e.mapping, width, d, "embeddings.mapping");
      c.vec(e.mapping_b, d, "embeddings.mapping_b");
    }
    if (r.project_in && e.mapping.size() > 0) c.shape(e.mapping, e.word.cols(), d, "embeddings.mapping");
  }
}

void Model::validate_layer(int l, const LayerWeights& w, bool finite) const {
  const Checker c{source_, finite};
  const Architecture& a = arch_;
  const Eigen::Index d = a.d_model;
  const std::string p = "layer " + std::to_string(l) + " ";
  if (static_cast<int>(w.heads.size()) != a.heads)
    c.fail(p + "heads", "config says " + std::to_string(a.heads) + ", weights have " + std::to_string(w.heads.size()));
  const MappedLayer* m = w.mapped.get();
  // A matrix given as a view (every head's side by side) or decoded per head.
  const auto viewed = [&](const MappedMatrix MappedLayer::*which) { return m && (m->*which).present(); };
  const auto view_shape = [&](const MappedMatrix& v, Eigen::Index rows, Eigen::Index cols, const std::string& field) {
    if (v.rows() != rows || v.cols() != cols)
      c.fail(field, "is " + std::to_string(v.rows()) + " x " + std::to_string(v.cols()) + " in the checkpoint, expected " +
                        std::to_string(rows) + " x " + std::to_string(cols));
  };
  const Eigen::Index H = a.heads;
  if (viewed(&MappedLayer::WQ)) view_shape(m->WQ, d, H * a.d_qk, p + "W_Q");
  if (viewed(&MappedLayer::WK)) view_shape(m->WK, d, H * a.d_qk, p + "W_K");
  if (viewed(&MappedLayer::WV)) view_shape(m->WV, d, H * a.d_v, p + "W_V");
  if (viewed(&MappedLayer::WO)) view_shape(m->WO, H * a.d_v, d, p + "W_O");
  // Query heads of one key/value group read the same stored entries.
  const auto same_block = [](const MappedMatrix& v, Eigen::Index width, int h, int g) {
    const auto first = v.col_offsets.begin();
    return std::equal(first + h * width, first + (h + 1) * width, first + g * width);
  };
  for (int h = 0; h < a.heads; ++h) {
    const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
    const std::string q = p + "head " + std::to_string(h) + " ";
    if (!viewed(&MappedLayer::WQ)) c.shape(hw.W_Q, d, a.d_qk, q + "W_Q");
    if (!viewed(&MappedLayer::WK)) c.shape(hw.W_K, d, a.d_qk, q + "W_K");
    if (!viewed(&MappedLayer::WV)) c.shape(hw.W_V, d, a.d_v, q + "W_V");
    if (!viewed(&MappedLayer::WO)) c.shape(hw.W_O, a.d_v, d, q + "W_O");
    c.vec(hw.b_Q, a.d_qk, q + "b_Q");
    c.vec(hw.b_K, a.d_qk, q + "b_K");
    c.vec(hw.b_V, a.d_v, q + "b_V");
    const int first = static_cast<int>(static_cast<long long>(a.kv_head_of(h)) * a.heads / a.key_value_heads());
    const HeadWeights& g = w.heads[static_cast<std::size_t>(first)];
    const bool same_k = viewed(&MappedLayer::WK) ? same_block(m->WK, a.d_qk, h, first) : hw.W_K == g.W_K;
    const bool same_v = viewed(&MappedLayer::WV) ? same_block(m->WV, a.d_v, h, first) : hw.W_V == g.W_V;
    if (first != h && (!same_k || hw.b_K != g.b_K || !same_v || hw.b_V != g.b_V))
      c.fail(q + "W_K", "differs from head " + std::to_string(first) + ", which shares its key/value head " +
                            std::to_string(a.kv_head_of(h)) + " (kv_heads = " + std::to_string(a.kv_heads) + ")");
  }
  if (a.xlnet_relative) {
    if (viewed(&MappedLayer::WR)) view_shape(m->WR, d, H * a.d_qk, p + "W_R");
    for (int h = 0; h < a.heads; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      const std::string q = p + "head " + std::to_string(h) + " ";
      if (!viewed(&MappedLayer::WR)) c.shape(hw.W_R, d, a.d_qk, q + "W_R");
      c.vec(hw.r_w, a.d_qk, q + "r_w");
      c.vec(hw.r_r, a.d_qk, q + "r_r");
    }
  }
  if (a.rel_buckets > 0) c.shape(w.pos_bias, a.rel_buckets, a.heads, p + "pos_bias");
  if (a.query_key_norm) {
    c.vec(w.q_norm, a.d_qk, p + "q_norm");
    c.vec(w.k_norm, a.d_qk, p + "k_norm");
  } else if (w.q_norm.size() > 0 || w.k_norm.size() > 0) {
    c.fail(p + "q_norm", "query/key norm weights present but the architecture has no query/key norm");
  }
  if (a.sandwich_norms && (w.has_layernorm() || w.ln3_g.size() || w.ln4_g.size())) {
    c.vec(w.ln3_g, d, p + "ln3_g");
    c.vec(w.ln4_g, d, p + "ln4_g");
  }
  c.vec(w.b_O, d, p + "b_O");
  if (w.has_mlp() || a.d_ff > 0) {
    if (a.d_ff < 1) c.fail(p + "W_1", "MLP weights present but d_ff is 0");
    if (viewed(&MappedLayer::W1)) view_shape(m->W1, d, a.d_ff, p + "W_1");
    else c.shape(w.W_1, d, a.d_ff, p + "W_1");
    c.vec(w.b_1, a.d_ff, p + "b_1");
    if (viewed(&MappedLayer::W2)) view_shape(m->W2, a.d_ff, d, p + "W_2");
    else c.shape(w.W_2, a.d_ff, d, p + "W_2");
    c.vec(w.b_2, d, p + "b_2");
    if (a.gated_mlp && viewed(&MappedLayer::Wgate)) view_shape(m->Wgate, d, a.d_ff, p + "W_gate");
    else if (a.gated_mlp) c.shape(w.W_gate, d, a.d_ff, p + "W_gate");
    else if (w.gated()) c.fail(p + "W_gate", "gate weights present but the architecture is not gated");
  } else if (w.gated()) {
    c.fail(p + "W_gate", "gate weights present without W_1, W_2");
  }
  if (w.has_layernorm() || w.ln1_b.size() || w.ln2_g.size() || w.ln2_b.size()) {
    c.vec(w.ln1_g, d, p + "ln1_g");
    c.vec(w.ln1_b, d, p + "ln1_b");
    c.vec(w.ln2_g, d, p + "ln2_g");
    c.vec(w.ln2_b, d, p + "ln2_b");
  }
}

void Model::check_supports(const Variant& v) const { check_weights_for(v); }

void Model::check_weights_for(const Variant& v) const {
  const auto has_mlp = [&](int l) {
    return stream_ ? stream_->parts.mlp : layers_[static_cast<std::size_t>(l)].has_mlp();
  };
  const auto has_layernorm = [&](int l) {
    return stream_ ? stream_->parts.layernorm : layers_[static_cast<std::size_t>(l)].has_layernorm();
  };
  if (v.mlp != MlpKind::none)
    for (int l = 0; l < arch_.layers; ++l)
      if (!has_mlp(l))
        throw std::invalid_argument(source_ + ": mlp: variant mlp=" + to_string(v.mlp) + " but layer " +
                                    std::to_string(l) + " has no MLP weights");
  if (arch_.parallel_residual && v.mlp == MlpKind::plain)
    throw std::invalid_argument(source_ + ": mlp: plain is not defined for a parallel block (its MLP branch has no "
                                          "residual of its own); use none or residual");
  if (arch_.parallel_residual && v.layernorm == LayerNormKind::post)
    throw std::invalid_argument(source_ + ": layernorm: post is not defined for a parallel block; use none or pre");
  if (arch_.own_norm_placement_only && v.layernorm != LayerNormKind::none &&
      v.layernorm != arch_.variant.layernorm)
    throw std::invalid_argument(source_ + ": layernorm: " + to_string(v.layernorm) +
                                " is not this model's placement; use none or " + to_string(arch_.variant.layernorm));
  if (v.layernorm != LayerNormKind::none)
    for (int l = 0; l < arch_.layers; ++l)
      if (!has_layernorm(l))
        throw std::invalid_argument(source_ + ": layernorm: variant layernorm=" + to_string(v.layernorm) +
                                    " but layer " + std::to_string(l) + " has no LayerNorm weights");
}

Variant Model::resolve(const VariantOverride& o) const {
  const Variant v = o.apply(arch_.variant);
  check_supports(v);
  return v;
}

}  // namespace sanpath

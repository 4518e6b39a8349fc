#include "sanpath/core/errors.hpp"
#include "sanpath/io/checkpoint.hpp"

#include "io/layout_llama.hpp"
#include "sanpath/io/atomic_file.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/core/resources.hpp"

#include <nlohmann/json.hpp>

#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace sanpath {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using RowMajorMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Shape = std::vector<std::int64_t>;

constexpr std::int64_t kAny = -1;  // wildcard dimension in an expected shape
const char* const kNativeConfigKey = "sanpath.config";
constexpr int kNativeVersion = 1;


[[noreturn]] void fail(const std::string& where, const std::string& field, const std::string& why) {
  throw std::invalid_argument(printable(where + ": " + field + ": " + why));
}

/// Nesting limit of config.json and of the native configuration (real ones
/// nest 3 levels); printing a value nested millions of levels deep would
/// exhaust the stack.
constexpr int kMaxJsonDepth = 64;
struct TooDeep {};

/// json::parse that throws TooDeep beyond kMaxJsonDepth (and json::exception).
json parse_json_limited(const std::string& text) {
  return json::parse(text, [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw TooDeep{};
    return true;
  });
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + (s[i] == kAny ? "*" : std::to_string(s[i]));
  return out + "]";
}

std::string brief(const json& j) {
  std::string s = j.dump(-1, ' ', true, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string str(int v) { return std::to_string(v); }

// ---- tensors <-> Eigen ------------------------------------------------------

MatrixXd to_matrix(const Tensor& t) {
  const auto r = static_cast<Eigen::Index>(t.shape.at(0)), c = static_cast<Eigen::Index>(t.shape.at(1));
  return Eigen::Map<const RowMajorMatrix>(t.values.data(), r, c);
}

VectorXd to_vector(const Tensor& t) {
  return Eigen::Map<const VectorXd>(t.values.data(), static_cast<Eigen::Index>(t.values.size()));
}

Tensor make_tensor(const std::string& name, const MatrixXd& m, const std::string& dtype) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {m.rows(), m.cols()};
  t.values.resize(static_cast<std::size_t>(m.size()));
  Eigen::Map<RowMajorMatrix>(t.values.data(), m.rows(), m.cols()) = m;
  return t;
}

Tensor make_tensor(const std::string& name, const VectorXd& v, const std::string& dtype) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {v.size()};
  t.values.assign(v.data(), v.data() + v.size());
  return t;
}

bool same(const MatrixXd& a, const MatrixXd& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && (a.array() == b.array()).all();
}
bool same(const VectorXd& a, const VectorXd& b) { return a.size() == b.size() && (a.array() == b.array()).all(); }

bool same_layer(const LayerWeights& a, const LayerWeights& b) {
  if (a.heads.size() != b.heads.size()) return false;
  for (std::size_t h = 0; h < a.heads.size(); ++h) {
    const HeadWeights &x = a.heads[h], &y = b.heads[h];
    if (!same(x.W_Q, y.W_Q) || !same(x.W_K, y.W_K) || !same(x.W_V, y.W_V) || !same(x.W_O, y.W_O) ||
        !same(x.b_Q, y.b_Q) || !same(x.b_K, y.b_K) || !same(x.b_V, y.b_V))
      return false;
  }
  return same(a.b_O, b.b_O) && same(a.W_1, b.W_1) && same(a.W_2, b.W_2) && same(a.b_1, b.b_1) &&
         same(a.b_2, b.b_2) && same(a.ln1_g, b.ln1_g) && same(a.ln1_b, b.ln1_b) && same(a.ln2_g, b.ln2_g) &&
         same(a.ln2_b, b.ln2_b);
}

// ---- full projections <-> heads ------------------------------------------
// Full projections in the x·W convention: Q = X Wq + bq with Wq d×(H·d_h);
// head h owns columns [h·d_h, (h+1)·d_h) of Wq, Wk, Wv and rows of Wo.

struct FullAttention {
  MatrixXd Wq, Wk, Wv, Wo;
  VectorXd bq, bk, bv, bo;
};

void split_heads(const FullAttention& f, int heads, int dh, LayerWeights& w) {
  w.heads.resize(static_cast<std::size_t>(heads));
  for (int h = 0; h < heads; ++h) {
    HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
    hw.W_Q = f.Wq.middleCols(h * dh, dh);
    hw.W_K = f.Wk.middleCols(h * dh, dh);
    hw.W_V = f.Wv.middleCols(h * dh, dh);
    hw.W_O = f.Wo.middleRows(h * dh, dh);
    hw.b_Q = f.bq.segment(h * dh, dh);
    hw.b_K = f.bk.segment(h * dh, dh);
    hw.b_V = f.bv.segment(h * dh, dh);
  }
  w.b_O = f.bo;
}

FullAttention join_heads(const LayerWeights& w, int d, int dh) {
  const auto H = static_cast<int>(w.heads.size());
  FullAttention f;
  f.Wq.resize(d, H * dh);
  f.Wk.resize(d, H * dh);
  f.Wv.resize(d, H * dh);
  f.Wo.resize(H * dh, d);
  f.bq.resize(H * dh);
  f.bk.resize(H * dh);
  f.bv.resize(H * dh);
  for (int h = 0; h < H; ++h) {
    const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
    f.Wq.middleCols(h * dh, dh) = hw.W_Q;
    f.Wk.middleCols(h * dh, dh) = hw.W_K;
    f.Wv.middleCols(h * dh, dh) = hw.W_V;
    f.Wo.middleRows(h * dh, dh) = hw.W_O;
    f.bq.segment(h * dh, dh) = hw.b_Q;
    f.bk.segment(h * dh, dh) = hw.b_K;
    f.bv.segment(h * dh, dh) = hw.b_V;
  }
  f.bo = w.b_O;
  return f;
}

// ---- reading config.json --------------------------------------------------

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "file", fs::exists(path) ? "cannot be opened" : "does not exist");
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = parse_json_limited(ss.str());
  } catch (const json::exception& e) {
    fail(path, "json", std::string("not valid JSON: ") + e.what());
  } catch (const TooDeep&) {
    fail(path, "json", "nested deeper than " + str(kMaxJsonDepth) + " levels");
  }
  if (!j.is_object()) fail(path, "json", std::string("must be a JSON object, got ") + j.type_name());
  return j;
}

/// config.json of a HuggingFace checkpoint, with typed, validated access.
struct HfConfig {
  std::string path;
  json j;

  bool has(const std::string& key) const { return j.contains(key) && !j.at(key).is_null(); }
  int positive_int(const std::string& key) const {
    if (!has(key)) fail(path, key, "missing");
    const json& v = j.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > INT_MAX)
      fail(path, key, "must be a positive integer, got " + brief(v));
    return v.get<int>();
  }
  int positive_int_or(const std::string& key, int fallback) const { return has(key) ? positive_int(key) : fallback; }
  double eps_or(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      fail(path, key, "must be a finite number >= 0, got " + brief(v));
    return v.get<double>();
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = j.at(key);
    if (!v.is_string()) fail(path, key, "must be a string, got " + brief(v));
    return v.get<std::string>();
  }
  bool bool_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j.at(key);
    if (!v.is_boolean()) fail(path, key, "must be true or false, got " + brief(v));
    return v.get<bool>();
  }
  Activation activation(const std::string& key, const std::string& fallback) const {
    const std::string a = string_or(key, fallback);
    if (a == "gelu") return Activation::gelu;
    if (a == "gelu_new" || a == "gelu_pytorch_tanh") return Activation::gelu_tanh;
    if (a == "relu") return Activation::relu;
    fail(path, key, "'" + a + "' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu)");
  }
  /// head width: hidden / heads, which must divide.
  int head_width(const std::string& hidden_key, const std::string& heads_key) const {
    const int d = positive_int(hidden_key), H = positive_int(heads_key);
    if (d % H != 0)
      fail(path, hidden_key, str(d) + " is not divisible by " + heads_key + " = " + str(H));
    return d / H;
  }
};

// ---- collecting the tensors a layout needs -----------------------------------

/// Looks up the tensors a layout needs (under an optional prefix), then
/// reports all missing names in one error and shape mismatches by name.
class Wanted {
 public:
  Wanted(const SafetensorsFile& file, std::string prefix, std::string config_path)
      : file_(file), prefix_(std::move(prefix)), config_path_(std::move(config_path)) {}

  /// `key` (without the prefix) with shape `shape` (kAny = any size);
  /// `alias` is an older spelling accepted instead.
  void need(const std::string& key, Shape shape, const std::string& alias = "") {
    Item it;
    it.shape = std::move(shape);
    it.tensor = file_.find(prefix_ + key);
    if (!it.tensor && !alias.empty()) it.tensor = file_.find(prefix_ + alias);
    if (!it.tensor) missing_.push_back(prefix_ + key);
    items_[key] = it;
  }
  /// Does the file hold `key` under the prefix?
  bool has(const std::string& key) const { return file_.find(prefix_ + key) != nullptr; }

  /// Throws for missing tensors (all of them listed) and wrong shapes.
  void check(const std::string& layout) const {
    if (!missing_.empty()) {
      std::string list;
      const std::size_t shown = std::min<std::size_t>(missing_.size(), 5);
      for (std::size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + missing_[i];
      if (missing_.size() > shown) list += " (and " + std::to_string(missing_.size() - shown) + " more)";
      fail(file_.path(), "tensors",
           std::to_string(missing_.size()) + " missing for a " + layout + " checkpoint: " + list);
    }
    for (const auto& [key, it] : items_) {
      const Shape& got = it.tensor->shape;
      bool ok = got.size() == it.shape.size();
      for (std::size_t i = 0; ok && i < got.size(); ++i) ok = it.shape[i] == kAny || it.shape[i] == got[i];
      if (!ok)
        fail(file_.path(), it.tensor->name,
             "shape " + shape_str(got) + ", expected " + shape_str(it.shape) + " from " + config_path_);
    }
  }
  const Tensor& tensor(const std::string& key) const { return *items_.at(key).tensor; }
  MatrixXd mat(const std::string& key) const { return to_matrix(tensor(key)); }
  /// The transpose of a torch Linear weight: [out, in] -> in×out.
  MatrixXd linear(const std::string& key) const { return mat(key).transpose(); }
  VectorXd vec(const std::string& key) const { return to_vector(tensor(key)); }

 private:
  struct Item {
    Shape shape;
    const Tensor* tensor = nullptr;
  };
  const SafetensorsFile& file_;
  std::string prefix_, config_path_;
  std::map<std::string, Item> items_;
  std::vector<std::string> missing_;
};

/// The prefix in use: `prefix` if any tensor name starts with it, else "".
std::string detect_prefix(const SafetensorsFile& f, const std::string& prefix) {
  for (const Tensor& t : f.tensors())
    if (t.name.compare(0, prefix.size(), prefix) == 0) return prefix;
  return "";
}

/// A layer count that no file could hold (every layer has `per_layer`
/// tensors of its own) is refused before millions of missing names are listed.
void check_layer_count(const HfConfig& c, const std::string& key, int layers, const SafetensorsFile& f,
                       int per_layer, const std::string& layout) {
  if (static_cast<std::size_t>(layers) > f.tensors().size())
    fail(c.path, key,
         str(layers) + " layers, but " + f.path() + " holds only " + std::to_string(f.tensors().size()) +
             " tensors (a " + layout + " layer has " + str(per_layer) + ")");
}

/// Models keep one copy of the weights per layer: refuse a shared-layer
/// model whose copies would exceed the memory budget (ResourceError).
void check_shared_copies(const std::string& where, const std::string& key, int layers, const LayerWeights& w) {
  std::uint64_t doubles = static_cast<std::uint64_t>(w.b_O.size() + w.W_1.size() + w.W_2.size() + w.b_1.size() +
                                                     w.b_2.size() + w.ln1_g.size() + w.ln1_b.size() +
                                                     w.ln2_g.size() + w.ln2_b.size());
  for (const HeadWeights& h : w.heads)
    doubles += static_cast<std::uint64_t>(h.W_Q.size() + h.W_K.size() + h.W_V.size() + h.W_O.size() + h.b_Q.size() +
                                          h.b_K.size() + h.b_V.size());
  require_memory(mul_sat(static_cast<std::uint64_t>(layers), mul_sat(doubles, 8)), printable(where + ": " + key),
                 str(layers) + " copies of the shared layer weights");
}

// ---- HuggingFace layouts ------------------------------------------------------

Model load_bert(const HfConfig& c, const SafetensorsFile& f, const std::string& source) {
  const int L = c.positive_int("num_hidden_layers");
  const int H = c.positive_int("num_attention_heads");
  const int dh = c.head_width("hidden_size", "num_attention_heads");
  const int d = c.positive_int("hidden_size");
  const int ff = c.positive_int("intermediate_size");
  const std::string pet = c.string_or("position_embedding_type", "absolute");
  if (pet != "absolute") fail(c.path, "position_embedding_type", "'" + pet + "' is not supported (absolute only)");

  Architecture a;
  a.layers = L;
  a.heads = H;
  a.d_model = d;
  a.d_qk = a.d_v = dh;
  a.d_ff = ff;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  a.activation = c.activation("hidden_act", "gelu");
  a.ln_eps = c.eps_or("layer_norm_eps", 1e-12);

  check_layer_count(c, "num_hidden_layers", L, f, 16, "bert");
  Wanted w(f, detect_prefix(f, "bert."), c.path);
  const auto linear = [&](const std::string& k, std::int64_t out, std::int64_t in) {
    w.need(k + ".weight", {out, in});
    w.need(k + ".bias", {out});
  };
  const auto layernorm = [&](const std::string& k, std::int64_t n) {
    w.need(k + ".weight", {n}, k + ".gamma");
    w.need(k + ".bias", {n}, k + ".beta");
  };
  for (int l = 0; l < L; ++l) {
    const std::string p = "encoder.layer." + str(l) + ".";
    for (const char* qkv : {"query", "key", "value"}) linear(p + "attention.self." + qkv, d, d);
    linear(p + "attention.output.dense", d, d);
    layernorm(p + "attention.output.LayerNorm", d);
    linear(p + "intermediate.dense", ff, d);
    linear(p + "output.dense", d, ff);
    layernorm(p + "output.LayerNorm", d);
  }
  const bool with_emb = w.has("embeddings.word_embeddings.weight");
  if (with_emb) {
    w.need("embeddings.word_embeddings.weight", {c.has("vocab_size") ? c.positive_int("vocab_size") : kAny, d});
    w.need("embeddings.position_embeddings.weight",
           {c.has("max_position_embeddings") ? c.positive_int("max_position_embeddings") : kAny, d});
    w.need("embeddings.token_type_embeddings.weight",
           {c.has("type_vocab_size") ? c.positive_int("type_vocab_size") : kAny, d});
    layernorm("embeddings.LayerNorm", d);
  }
  w.check("bert");

  const auto ln_g = [&](const std::string& k) { return w.vec(k + ".weight"); };
  const auto ln_b = [&](const std::string& k) { return w.vec(k + ".bias"); };
  std::vector<LayerWeights> layers(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l) {
    const std::string p = "encoder.layer." + str(l) + ".";
    const std::string s = p + "attention.self.";
    FullAttention fa{w.linear(s + "query.weight"), w.linear(s + "key.weight"), w.linear(s + "value.weight"),
                     w.linear(p + "attention.output.dense.weight"), w.vec(s + "query.bias"), w.vec(s + "key.bias"),
                     w.vec(s + "value.bias"), w.vec(p + "attention.output.dense.bias")};
    LayerWeights& lw = layers[static_cast<std::size_t>(l)];
    split_heads(fa, H, dh, lw);
    lw.W_1 = w.linear(p + "intermediate.dense.weight");
    lw.b_1 = w.vec(p + "intermediate.dense.bias");
    lw.W_2 = w.linear(p + "output.dense.weight");
    lw.b_2 = w.vec(p + "output.dense.bias");
    lw.ln1_g = ln_g(p + "attention.output.LayerNorm");
    lw.ln1_b = ln_b(p + "attention.output.LayerNorm");
    lw.ln2_g = ln_g(p + "output.LayerNorm");
    lw.ln2_b = ln_b(p + "output.LayerNorm");
  }
  std::optional<Embeddings> emb;
  if (with_emb) {
    Embeddings e;
    e.kind = EmbeddingKind::bert;
    e.word = w.mat("embeddings.word_embeddings.weight");
    e.position = w.mat("embeddings.position_embeddings.weight");
    e.token_type = w.mat("embeddings.token_type_embeddings.weight");
    e.ln_g = ln_g("embeddings.LayerNorm");
    e.ln_b = ln_b("embeddings.LayerNorm");
    e.ln_eps = a.ln_eps;
    emb = std::move(e);
  }
  return Model(a, std::move(layers), std::move(emb), source);
}

Model load_gpt2(const HfConfig& c, const SafetensorsFile& f, const std::string& source) {
  const int L = c.positive_int("n_layer");
  const int H = c.positive_int("n_head");
  const int dh = c.head_width("n_embd", "n_head");
  const int d = c.positive_int("n_embd");
  const std::int64_t ff64 = c.has("n_inner") ? c.positive_int("n_inner") : 4 * static_cast<std::int64_t>(d);
  if (ff64 > INT_MAX) fail(c.path, "n_embd", str(d) + " is too large (the default n_inner = 4·n_embd exceeds 2^31 - 1)");
  const int ff = static_cast<int>(ff64);
  if (!c.bool_or("scale_attn_weights", true))
    fail(c.path, "scale_attn_weights", "false is not supported (scores are always scaled by 1/sqrt(d_qk))");
  if (c.bool_or("scale_attn_by_inverse_layer_idx", false))
    fail(c.path, "scale_attn_by_inverse_layer_idx", "true is not supported (scores are scaled by 1/sqrt(d_qk) only)");

  Architecture a;
  a.layers = L;
  a.heads = H;
  a.d_model = d;
  a.d_qk = a.d_v = dh;
  a.d_ff = ff;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.activation = c.activation("activation_function", "gelu_new");
  a.ln_eps = c.eps_or("layer_norm_epsilon", 1e-5);

  check_layer_count(c, "n_layer", L, f, 12, "gpt2");
  Wanted w(f, detect_prefix(f, "transformer."), c.path);
  const auto conv1d = [&](const std::string& k, std::int64_t in, std::int64_t out) {
    w.need(k + ".weight", {in, out});
    w.need(k + ".bias", {out});
  };
  for (int l = 0; l < L; ++l) {
    const std::string p = "h." + str(l) + ".";
    conv1d(p + "attn.c_attn", d, 3 * static_cast<std::int64_t>(d));
    conv1d(p + "attn.c_proj", d, d);
    conv1d(p + "mlp.c_fc", d, ff);
    conv1d(p + "mlp.c_proj", ff, d);
    for (const char* ln : {"ln_1", "ln_2"}) {
      w.need(p + ln + ".weight", {d});
      w.need(p + ln + ".bias", {d});
    }
  }
  const bool with_emb = w.has("wte.weight");
  if (with_emb) {
    w.need("wte.weight", {c.has("vocab_size") ? c.positive_int("vocab_size") : kAny, d});
    w.need("wpe.weight", {c.has("n_positions") ? c.positive_int("n_positions") : kAny, d});
  }
  w.check("gpt2");

  std::vector<LayerWeights> layers(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l) {
    const std::string p = "h." + str(l) + ".";
    const MatrixXd qkv = w.mat(p + "attn.c_attn.weight");
    const VectorXd qkv_b = w.vec(p + "attn.c_attn.bias");
    FullAttention fa{qkv.middleCols(0, d), qkv.middleCols(d, d), qkv.middleCols(2 * d, d),
                     w.mat(p + "attn.c_proj.weight"), qkv_b.segment(0, d), qkv_b.segment(d, d),
                     qkv_b.segment(2 * d, d), w.vec(p + "attn.c_proj.bias")};
    LayerWeights& lw = layers[static_cast<std::size_t>(l)];
    split_heads(fa, H, dh, lw);
    lw.W_1 = w.mat(p + "mlp.c_fc.weight");
    lw.b_1 = w.vec(p + "mlp.c_fc.bias");
    lw.W_2 = w.mat(p + "mlp.c_proj.weight");
    lw.b_2 = w.vec(p + "mlp.c_proj.bias");
    lw.ln1_g = w.vec(p + "ln_1.weight");
    lw.ln1_b = w.vec(p + "ln_1.bias");
    lw.ln2_g = w.vec(p + "ln_2.weight");
    lw.ln2_b = w.vec(p + "ln_2.bias");
  }
  std::optional<Embeddings> emb;
  if (with_emb) {
    Embeddings e;
    e.kind = EmbeddingKind::gpt2;
    e.word = w.mat("wte.weight");
    e.position = w.mat("wpe.weight");
    e.ln_eps = a.ln_eps;
    emb = std::move(e);
  }
  return Model(a, std::move(layers), std::move(emb), source);
}

Model load_albert(const HfConfig& c, const SafetensorsFile& f, const std::string& source) {
  const int L = c.positive_int("num_hidden_layers");
  const int H = c.positive_int("num_attention_heads");
  const int dh = c.head_width("hidden_size", "num_attention_heads");
  const int d = c.positive_int("hidden_size");
  const int ff = c.positive_int("intermediate_size");
  const int e_size = c.positive_int_or("embedding_size", 128);
  if (c.positive_int_or("num_hidden_groups", 1) != 1)
    fail(c.path, "num_hidden_groups", "only 1 layer group is supported, got " + brief(c.j.at("num_hidden_groups")));
  if (c.positive_int_or("inner_group_num", 1) != 1)
    fail(c.path, "inner_group_num", "only 1 layer per group is supported, got " + brief(c.j.at("inner_group_num")));
  const std::string pet = c.string_or("position_embedding_type", "absolute");
  if (pet != "absolute") fail(c.path, "position_embedding_type", "'" + pet + "' is not supported (absolute only)");

  Architecture a;
  a.layers = L;
  a.heads = H;
  a.d_model = d;
  a.d_qk = a.d_v = dh;
  a.d_ff = ff;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  a.activation = c.activation("hidden_act", "gelu_new");
  a.ln_eps = c.eps_or("layer_norm_eps", 1e-12);
  a.shared_layers = true;

  Wanted w(f, detect_prefix(f, "albert."), c.path);
  const auto linear = [&](const std::string& k, std::int64_t out, std::int64_t in) {
    w.need(k + ".weight", {out, in});
    w.need(k + ".bias", {out});
  };
  const auto layernorm = [&](const std::string& k, std::int64_t n) {
    w.need(k + ".weight", {n}, k + ".gamma");
    w.need(k + ".bias", {n}, k + ".beta");
  };
  const std::string p = "encoder.albert_layer_groups.0.albert_layers.0.";
  for (const char* m : {"query", "key", "value", "dense"}) linear(p + "attention." + m, d, d);
  layernorm(p + "attention.LayerNorm", d);
  linear(p + "ffn", ff, d);
  linear(p + "ffn_output", d, ff);
  layernorm(p + "full_layer_layer_norm", d);
  const bool with_emb = w.has("embeddings.word_embeddings.weight");
  if (with_emb) {
    w.need("embeddings.word_embeddings.weight", {c.has("vocab_size") ? c.positive_int("vocab_size") : kAny, e_size});
    w.need("embeddings.position_embeddings.weight",
           {c.has("max_position_embeddings") ? c.positive_int("max_position_embeddings") : kAny, e_size});
    w.need("embeddings.token_type_embeddings.weight",
           {c.has("type_vocab_size") ? c.positive_int("type_vocab_size") : kAny, e_size});
    layernorm("embeddings.LayerNorm", e_size);
    linear("encoder.embedding_hidden_mapping_in", d, e_size);
  }
  w.check("albert");

  LayerWeights lw;
  const std::string s = p + "attention.";
  FullAttention fa{w.linear(s + "query.weight"), w.linear(s + "key.weight"), w.linear(s + "value.weight"),
                   w.linear(s + "dense.weight"),  w.vec(s + "query.bias"),   w.vec(s + "key.bias"),
                   w.vec(s + "value.bias"),       w.vec(s + "dense.bias")};
  split_heads(fa, H, dh, lw);
  lw.W_1 = w.linear(p + "ffn.weight");
  lw.b_1 = w.vec(p + "ffn.bias");
  lw.W_2 = w.linear(p + "ffn_output.weight");
  lw.b_2 = w.vec(p + "ffn_output.bias");
  lw.ln1_g = w.vec(s + "LayerNorm.weight");
  lw.ln1_b = w.vec(s + "LayerNorm.bias");
  lw.ln2_g = w.vec(p + "full_layer_layer_norm.weight");
  lw.ln2_b = w.vec(p + "full_layer_layer_norm.bias");
  check_shared_copies(c.path, "num_hidden_layers", L, lw);
  std::vector<LayerWeights> layers(static_cast<std::size_t>(L), lw);

  std::optional<Embeddings> emb;
  if (with_emb) {
    Embeddings e;
    e.kind = EmbeddingKind::albert;
    e.word = w.mat("embeddings.word_embeddings.weight");
    e.position = w.mat("embeddings.position_embeddings.weight");
    e.token_type = w.mat("embeddings.token_type_embeddings.weight");
    e.ln_g = w.vec("embeddings.LayerNorm.weight");
    e.ln_b = w.vec("embeddings.LayerNorm.bias");
    e.ln_eps = a.ln_eps;
    e.mapping = w.linear("encoder.embedding_hidden_mapping_in.weight");
    e.mapping_b = w.vec("encoder.embedding_hidden_mapping_in.bias");
    emb = std::move(e);
  }
  return Model(a, std::move(layers), std::move(emb), source);
}

HfLayout detect_layout(const HfConfig& c, const SafetensorsFile& f) {
  if (c.has("model_type")) {
    const std::string t = c.string_or("model_type", "");
    if (t == "bert") return HfLayout::bert;
    if (t == "gpt2") return HfLayout::gpt2;
    if (t == "albert") return HfLayout::albert;
    if (detail::is_llama_family(t)) return parse_hf_layout(t);
    fail(c.path, "model_type", "'" + t + "' is not supported (bert, gpt2, albert, llama, mistral, qwen2)");
  }
  if (c.has("architectures") && c.j.at("architectures").is_array())
    for (const json& arch : c.j.at("architectures")) {
      if (!arch.is_string()) continue;
      const std::string s = arch.get<std::string>();
      if (s.rfind("Bert", 0) == 0) return HfLayout::bert;
      if (s.rfind("GPT2", 0) == 0) return HfLayout::gpt2;
      if (s.rfind("Albert", 0) == 0) return HfLayout::albert;
      if (s.rfind("Llama", 0) == 0) return HfLayout::llama;
      if (s.rfind("Mistral", 0) == 0) return HfLayout::mistral;
      if (s.rfind("Qwen2", 0) == 0) return HfLayout::qwen2;
    }
  for (const Tensor& t : f.tensors()) {
    if (t.name.find("albert_layer_groups.") != std::string::npos) return HfLayout::albert;
    if (t.name.find(".attn.c_attn.") != std::string::npos) return HfLayout::gpt2;
    if (t.name.find("encoder.layer.") != std::string::npos) return HfLayout::bert;
    if (t.name.find(".self_attn.q_proj.") != std::string::npos) return HfLayout::llama;
  }
  fail(c.path, "model_type",
       "missing, and neither architectures nor the tensor names identify a BERT, GPT-2 or ALBERT checkpoint");
}

Model load_hf(const std::string& config_path, const std::string& weights_path, const std::string& source) {
  HfConfig c{config_path, read_json_file(config_path)};
  const SafetensorsFile f = SafetensorsFile::read(weights_path);
  switch (detect_layout(c, f)) {
    case HfLayout::bert: return load_bert(c, f, source);
    case HfLayout::gpt2: return load_gpt2(c, f, source);
    case HfLayout::albert: return load_albert(c, f, source);
    case HfLayout::llama:
    case HfLayout::mistral:
    case HfLayout::qwen2: return detail::load_llama_family(c.path, c.j, f, source);
  }
  throw std::logic_error("load_hf: unknown layout");
}

// ---- native format ------------------------------------------------------------

std::string kind_name(EmbeddingKind k) {
  switch (k) {
    case EmbeddingKind::bert: return "bert";
    case EmbeddingKind::gpt2: return "gpt2";
    case EmbeddingKind::albert: return "albert";
    case EmbeddingKind::llama: return "llama";
  }
  return "?";
}

/// Reads the native configuration from __metadata__, naming its fields on error.
struct NativeConfig {
  std::string path;
  json j;
  std::string field(const std::string& key) const { return std::string("__metadata__.") + kNativeConfigKey + "." + key; }
  const json& get(const std::string& key) const {
    if (!j.contains(key)) fail(path, field(key), "missing");
    return j.at(key);
  }
  int integer(const std::string& key, int min) const {
    const json& v = get(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < min || v.get<std::int64_t>() > INT_MAX)
      fail(path, field(key), "must be an integer >= " + str(min) + ", got " + brief(v));
    return v.get<int>();
  }
  bool boolean(const std::string& key) const {
    const json& v = get(key);
    if (!v.is_boolean()) fail(path, field(key), "must be true or false, got " + brief(v));
    return v.get<bool>();
  }
  std::string string(const std::string& key) const {
    const json& v = get(key);
    if (!v.is_string()) fail(path, field(key), "must be a string, got " + brief(v));
    return v.get<std::string>();
  }
  double number(const std::string& key) const {
    const json& v = get(key);
    if (!v.is_number()) fail(path, field(key), "must be a number, got " + brief(v));
    return v.get<double>();
  }
};

Model load_native(const SafetensorsFile& f) {
  const std::string& path = f.path();
  NativeConfig c{path, {}};
  try {
    c.j = parse_json_limited(f.metadata().at(kNativeConfigKey));
  } catch (const json::exception& e) {
    fail(path, std::string("__metadata__.") + kNativeConfigKey, std::string("not valid JSON: ") + e.what());
  } catch (const TooDeep&) {
    fail(path, std::string("__metadata__.") + kNativeConfigKey, "nested deeper than " + str(kMaxJsonDepth) + " levels");
  }
  if (!c.j.is_object()) fail(path, std::string("__metadata__.") + kNativeConfigKey, "must be a JSON object");
  const int version = c.integer("version", 1);
  if (version != kNativeVersion)
    fail(path, c.field("version"), "version " + str(version) + " is not supported (expected " + str(kNativeVersion) + ")");

  Architecture a;
  a.layers = c.integer("layers", 1);
  a.heads = c.integer("heads", 1);
  a.d_model = c.integer("d_model", 1);
  a.d_qk = c.integer("d_qk", 1);
  a.d_v = c.integer("d_v", 1);
  a.d_ff = c.integer("d_ff", 0);
  a.variant.skip = c.boolean("skip");
  a.variant.mlp = parse_mlp(c.string("mlp"), path + ": " + c.field("mlp"));
  a.variant.layernorm = parse_layernorm(c.string("layernorm"), path + ": " + c.field("layernorm"));
  a.variant.mask = parse_mask(c.string("mask"), path + ": " + c.field("mask"));
  a.activation = parse_activation(c.string("activation"), path + ": " + c.field("activation"));
  a.ln_eps = c.number("ln_eps");
  a.shared_layers = c.boolean("shared_layers");
  // Llama-family fields (math.md §8), absent for the other architectures.
  if (c.j.contains("norm")) {
    const std::string nk = c.string("norm");
    if (nk != "rms" && nk != "layer") fail(path, c.field("norm"), "'" + nk + "' is not one of layer, rms");
    a.norm = nk == "rms" ? NormKind::rms : NormKind::layer;
  }
  if (c.j.contains("kv_heads")) a.kv_heads = c.integer("kv_heads", 1);
  if (c.j.contains("rope_theta")) a.rope_theta = c.number("rope_theta");
  if (c.j.contains("gated_mlp")) a.gated_mlp = c.boolean("gated_mlp");
  if (c.j.contains("attention_window")) a.attention_window = c.integer("attention_window", 0);
  const int stored = c.integer("stored_layers", 1);
  if (stored != a.layers && !(stored == 1 && a.shared_layers))
    fail(path, c.field("stored_layers"),
         str(stored) + " stored layers for " + str(a.layers) + " layers (only shared layers may be stored once)");
  // Counts that no file could hold (every head has 7 tensors of its own) are
  // refused before anything is allocated or listed for them.
  if (static_cast<std::uint64_t>(stored) * static_cast<std::uint64_t>(a.heads) > f.tensors().size())
    fail(path, c.field(stored > 1 ? "stored_layers" : "heads"),
         str(stored) + " stored layers × " + str(a.heads) + " heads, but the file holds only " +
             std::to_string(f.tensors().size()) + " tensors (7 per head)");

  std::set<std::string> used;
  std::vector<std::string> missing;
  const auto find = [&](const std::string& name, bool required) -> const Tensor* {
    const Tensor* t = f.find(name);
    if (t) used.insert(name);
    else if (required) missing.push_back(name);
    return t;
  };
  const auto mat = [&](const std::string& name, bool required, MatrixXd& out) {
    if (const Tensor* t = find(name, required)) {
      if (t->shape.size() != 2) fail(path, name, "must have 2 dimensions, got shape " + shape_str(t->shape));
      out = to_matrix(*t);
    }
  };
  const auto vec = [&](const std::string& name, bool required, VectorXd& out) {
    if (const Tensor* t = find(name, required)) {
      if (t->shape.size() != 1) fail(path, name, "must have 1 dimension, got shape " + shape_str(t->shape));
      out = to_vector(*t);
    }
  };

  std::vector<LayerWeights> layers(static_cast<std::size_t>(stored));
  for (int l = 0; l < stored; ++l) {
    LayerWeights& w = layers[static_cast<std::size_t>(l)];
    const std::string p = "layers." + str(l) + ".";
    w.heads.resize(static_cast<std::size_t>(a.heads));
    for (int h = 0; h < a.heads; ++h) {
      HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      const std::string q = p + "heads." + str(h) + ".";
      mat(q + "W_Q", true, hw.W_Q);
      mat(q + "W_K", true, hw.W_K);
      mat(q + "W_V", true, hw.W_V);
      mat(q + "W_O", true, hw.W_O);
      vec(q + "b_Q", true, hw.b_Q);
      vec(q + "b_K", true, hw.b_K);
      vec(q + "b_V", true, hw.b_V);
    }
    vec(p + "b_O", true, w.b_O);
    mat(p + "W_1", a.d_ff > 0, w.W_1);
    vec(p + "b_1", a.d_ff > 0, w.b_1);
    mat(p + "W_2", a.d_ff > 0, w.W_2);
    vec(p + "b_2", a.d_ff > 0, w.b_2);
    mat(p + "W_gate", a.d_ff > 0 && a.gated_mlp, w.W_gate);
    const bool ln = f.find(p + "ln1_g") != nullptr;
    vec(p + "ln1_g", ln, w.ln1_g);
    vec(p + "ln1_b", ln, w.ln1_b);
    vec(p + "ln2_g", ln, w.ln2_g);
    vec(p + "ln2_b", ln, w.ln2_b);
  }
  if (stored != a.layers) {
    check_shared_copies(path, c.field("layers"), a.layers, layers.front());
    layers.resize(static_cast<std::size_t>(a.layers), layers.front());
  }

  std::optional<Embeddings> emb;
  const json& ej = c.get("embeddings");
  if (!ej.is_null()) {
    if (!ej.is_object()) fail(path, c.field("embeddings"), "must be null or an object, got " + brief(ej));
    NativeConfig ec{path, ej};
    Embeddings e;
    const std::string kind = ec.string("kind");
    if (kind == "bert") e.kind = EmbeddingKind::bert;
    else if (kind == "gpt2") e.kind = EmbeddingKind::gpt2;
    else if (kind == "albert") e.kind = EmbeddingKind::albert;
    else if (kind == "llama") e.kind = EmbeddingKind::llama;
    else fail(path, c.field("embeddings.kind"), "'" + kind + "' is not one of bert, gpt2, albert, llama");
    e.ln_eps = ec.number("ln_eps");
    const bool not_gpt2 = e.kind == EmbeddingKind::bert || e.kind == EmbeddingKind::albert,
               albert = e.kind == EmbeddingKind::albert;
    mat("embeddings.word", true, e.word);
    mat("embeddings.position", e.has_position_table(), e.position);
    mat("embeddings.token_type", not_gpt2, e.token_type);
    vec("embeddings.ln_g", not_gpt2, e.ln_g);
    vec("embeddings.ln_b", not_gpt2, e.ln_b);
    mat("embeddings.mapping", albert, e.mapping);
    vec("embeddings.mapping_b", albert, e.mapping_b);
    emb = std::move(e);
  }
  if (!missing.empty()) {
    std::string list;
    const std::size_t shown = std::min<std::size_t>(missing.size(), 5);
    for (std::size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > shown) list += " (and " + std::to_string(missing.size() - shown) + " more)";
    fail(path, "tensors", std::to_string(missing.size()) + " missing: " + list);
  }
  for (const Tensor& t : f.tensors())
    if (!used.count(t.name)) fail(path, t.name, "unexpected tensor in a sanpath native file");
  return Model(a, std::move(layers), std::move(emb), path);
}

// ---- writing ----------------------------------------------------------------------

void check_dtype(const std::string& where, const std::string& dtype) {
  if (dtype != "F64" && dtype != "F32") fail(where, "dtype", "'" + dtype + "' is not one of F64, F32");
}

}  // namespace

HfLayout parse_hf_layout(const std::string& t) {
  if (t == "bert") return HfLayout::bert;
  if (t == "gpt2") return HfLayout::gpt2;
  if (t == "albert") return HfLayout::albert;
  if (t == "llama") return HfLayout::llama;
  if (t == "mistral") return HfLayout::mistral;
  if (t == "qwen2") return HfLayout::qwen2;
  throw std::invalid_argument("layout: '" + t + "' is not one of bert, gpt2, albert, llama, mistral, qwen2");
}

std::string to_string(HfLayout l) {
  switch (l) {
    case HfLayout::bert: return "bert";
    case HfLayout::gpt2: return "gpt2";
    case HfLayout::albert: return "albert";
    case HfLayout::llama: return "llama";
    case HfLayout::mistral: return "mistral";
    case HfLayout::qwen2: return "qwen2";
  }
  return "?";
}

Model load_model(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) fail(path, "file", "does not exist");
  if (fs::is_directory(st)) {
    const std::string config = (fs::path(path) / "config.json").string();
    const std::string weights = (fs::path(path) / "model.safetensors").string();
    if (!fs::exists(weights)) {
      if (fs::exists(fs::path(path) / "model.safetensors.index.json"))
        fail(path, "model.safetensors", "sharded checkpoints (model.safetensors.index.json) are not supported");
      if (fs::exists(fs::path(path) / "pytorch_model.bin"))
        fail(path, "model.safetensors", "missing; only safetensors weights are supported, not pytorch_model.bin");
      fail(path, "model.safetensors", "missing");
    }
    if (!fs::exists(config)) fail(path, "config.json", "missing");
    return load_hf(config, weights, path);
  }
  const SafetensorsFile f = SafetensorsFile::read(path);
  if (f.metadata().count(kNativeConfigKey)) return load_native(f);
  const fs::path beside = fs::path(path).parent_path() / "config.json";
  if (fs::exists(beside)) return load_hf(beside.string(), path, path);
  fail(path, std::string("__metadata__.") + kNativeConfigKey,
       "missing: not a sanpath native file, and no config.json beside it for a HuggingFace checkpoint");
}

void save_native(const Model& model, const std::string& path) {
  const Architecture& a = model.arch();
  const std::string dt = "F64";
  bool store_once = a.shared_layers && a.layers > 1;
  for (int l = 1; store_once && l < a.layers; ++l) store_once = same_layer(model.layer(0), model.layer(l));
  const int stored = store_once ? 1 : a.layers;

  json c = {{"version", kNativeVersion},
            {"layers", a.layers},
            {"heads", a.heads},
            {"d_model", a.d_model},
            {"d_qk", a.d_qk},
            {"d_v", a.d_v},
            {"d_ff", a.d_ff},
            {"skip", a.variant.skip},
            {"mlp", to_string(a.variant.mlp)},
            {"layernorm", to_string(a.variant.layernorm)},
            {"mask", to_string(a.variant.mask)},
            {"activation", to_string(a.activation)},
            {"ln_eps", a.ln_eps},
            {"shared_layers", a.shared_layers},
            {"stored_layers", stored},
            {"source", model.source()},
            {"embeddings", nullptr}};
  if (a.norm != NormKind::layer) c["norm"] = to_string(a.norm);
  if (a.kv_heads > 0) c["kv_heads"] = a.kv_heads;
  if (a.rope_theta) c["rope_theta"] = *a.rope_theta;
  if (a.gated_mlp) c["gated_mlp"] = true;
  if (a.attention_window > 0) c["attention_window"] = a.attention_window;

  std::vector<Tensor> ts;
  const auto add_m = [&](const std::string& name, const MatrixXd& m) {
    if (m.rows() > 0 || m.cols() > 0) ts.push_back(make_tensor(name, m, dt));
  };
  const auto add_v = [&](const std::string& name, const VectorXd& v) {
    if (v.size() > 0) ts.push_back(make_tensor(name, v, dt));
  };
  for (int l = 0; l < stored; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = "layers." + str(l) + ".";
    for (int h = 0; h < a.heads; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      const std::string q = p + "heads." + str(h) + ".";
      add_m(q + "W_Q", hw.W_Q);
      add_m(q + "W_K", hw.W_K);
      add_m(q + "W_V", hw.W_V);
      add_m(q + "W_O", hw.W_O);
      add_v(q + "b_Q", hw.b_Q);
      add_v(q + "b_K", hw.b_K);
      add_v(q + "b_V", hw.b_V);
    }
    add_v(p + "b_O", w.b_O);
    add_m(p + "W_1", w.W_1);
    add_v(p + "b_1", w.b_1);
    add_m(p + "W_2", w.W_2);
    add_v(p + "b_2", w.b_2);
    add_m(p + "W_gate", w.W_gate);
    add_v(p + "ln1_g", w.ln1_g);
    add_v(p + "ln1_b", w.ln1_b);
    add_v(p + "ln2_g", w.ln2_g);
    add_v(p + "ln2_b", w.ln2_b);
  }
  if (const auto& e = model.embeddings()) {
    c["embeddings"] = {{"kind", kind_name(e->kind)}, {"ln_eps", e->ln_eps}};
    add_m("embeddings.word", e->word);
    add_m("embeddings.position", e->position);
    add_m("embeddings.token_type", e->token_type);
    add_v("embeddings.ln_g", e->ln_g);
    add_v("embeddings.ln_b", e->ln_b);
    add_m("embeddings.mapping", e->mapping);
    add_v("embeddings.mapping_b", e->mapping_b);
  }
  write_safetensors(path, ts, {{"format", "sanpath"}, {kNativeConfigKey, c.dump()}});
}

void save_hf(const Model& model, const std::string& folder, HfLayout layout, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string lname = to_string(layout);
  check_dtype(folder, dtype);
  if (detail::is_llama_family(lname)) return detail::save_llama_family(model, folder, lname, dtype);
  const int d = a.d_model, H = a.heads, L = a.layers;
  if (d % H != 0 || a.d_qk != d / H || a.d_v != d / H)
    fail(folder, "d_qk", "the " + lname + " layout needs d_qk = d_v = d_model / heads; model has d_model " + str(d) +
                             ", heads " + str(H) + ", d_qk " + str(a.d_qk) + ", d_v " + str(a.d_v));
  const int dh = d / H;
  for (int l = 0; l < L; ++l) {
    if (!model.layer(l).has_mlp()) fail(folder, "layer " + str(l) + " W_1", "the " + lname + " layout needs MLP weights");
    if (!model.layer(l).has_layernorm())
      fail(folder, "layer " + str(l) + " ln1_g", "the " + lname + " layout needs LayerNorm weights");
  }
  const auto& emb = model.embeddings();
  const EmbeddingKind want = layout == HfLayout::bert ? EmbeddingKind::bert
                             : layout == HfLayout::gpt2 ? EmbeddingKind::gpt2
                                                        : EmbeddingKind::albert;
  if (emb && emb->kind != want)
    fail(folder, "embeddings", "kind " + kind_name(emb->kind) + " cannot be written in the " + lname + " layout");
  if (emb && layout != HfLayout::gpt2 && emb->ln_eps != a.ln_eps)
    fail(folder, "embeddings.ln_eps", "differs from ln_eps; a " + lname + " config.json has one layer_norm_eps");
  if (layout == HfLayout::albert)
    for (int l = 1; l < L; ++l)
      if (!same_layer(model.layer(0), model.layer(l)))
        fail(folder, "layers", "the albert layout shares one layer, but layer " + str(l) + " differs from layer 0");

  const auto act_name = [&]() -> std::string {
    switch (a.activation) {
      case Activation::relu: return "relu";
      case Activation::gelu: return "gelu";
      case Activation::gelu_tanh: return "gelu_new";
      case Activation::silu: return "silu";
    }
    return "?";
  }();

  std::vector<Tensor> ts;
  const auto add_m = [&](const std::string& name, const MatrixXd& m) { ts.push_back(make_tensor(name, m, dtype)); };
  const auto add_v = [&](const std::string& name, const VectorXd& v) { ts.push_back(make_tensor(name, v, dtype)); };
  json c;
  const std::string torch_dtype = dtype == "F64" ? "float64" : "float32";

  if (layout == HfLayout::gpt2) {
    const std::string P = "transformer.";
    for (int l = 0; l < L; ++l) {
      const LayerWeights& w = model.layer(l);
      const FullAttention fa = join_heads(w, d, dh);
      const std::string p = P + "h." + str(l) + ".";
      MatrixXd qkv(d, 3 * d);
      qkv << fa.Wq, fa.Wk, fa.Wv;
      VectorXd qkv_b(3 * d);
      qkv_b << fa.bq, fa.bk, fa.bv;
      add_v(p + "ln_1.weight", w.ln1_g);
      add_v(p + "ln_1.bias", w.ln1_b);
      add_m(p + "attn.c_attn.weight", qkv);
      add_v(p + "attn.c_attn.bias", qkv_b);
      add_m(p + "attn.c_proj.weight", fa.Wo);
      add_v(p + "attn.c_proj.bias", fa.bo);
      add_v(p + "ln_2.weight", w.ln2_g);
      add_v(p + "ln_2.bias", w.ln2_b);
      add_m(p + "mlp.c_fc.weight", w.W_1);
      add_v(p + "mlp.c_fc.bias", w.b_1);
      add_m(p + "mlp.c_proj.weight", w.W_2);
      add_v(p + "mlp.c_proj.bias", w.b_2);
    }
    c = {{"architectures", {"GPT2Model"}},
         {"model_type", "gpt2"},
         {"n_layer", L},
         {"n_head", H},
         {"n_embd", d},
         {"n_inner", a.d_ff},
         {"activation_function", act_name},
         {"layer_norm_epsilon", a.ln_eps},
         {"torch_dtype", torch_dtype}};
    if (emb) {
      add_m(P + "wte.weight", emb->word);
      add_m(P + "wpe.weight", emb->position);
      c["vocab_size"] = emb->word.rows();
      c["n_positions"] = emb->position.rows();
      c["n_ctx"] = emb->position.rows();
    }
  } else {
    const bool bert = layout == HfLayout::bert;
    const std::string P = bert ? "bert." : "albert.";
    const auto linear = [&](const std::string& k, const MatrixXd& W, const VectorXd& b) {
      add_m(k + ".weight", W.transpose());  // torch Linear stores [out, in]
      add_v(k + ".bias", b);
    };
    const auto layernorm = [&](const std::string& k, const VectorXd& g, const VectorXd& b) {
      add_v(k + ".weight", g);
      add_v(k + ".bias", b);
    };
    for (int l = 0; l < (bert ? L : 1); ++l) {
      const LayerWeights& w = model.layer(l);
      const FullAttention fa = join_heads(w, d, dh);
      if (bert) {
        const std::string p = P + "encoder.layer." + str(l) + ".";
        linear(p + "attention.self.query", fa.Wq, fa.bq);
        linear(p + "attention.self.key", fa.Wk, fa.bk);
        linear(p + "attention.self.value", fa.Wv, fa.bv);
        linear(p + "attention.output.dense", fa.Wo, fa.bo);
        layernorm(p + "attention.output.LayerNorm", w.ln1_g, w.ln1_b);
        linear(p + "intermediate.dense", w.W_1, w.b_1);
        linear(p + "output.dense", w.W_2, w.b_2);
        layernorm(p + "output.LayerNorm", w.ln2_g, w.ln2_b);
      } else {
        const std::string p = P + "encoder.albert_layer_groups.0.albert_layers.0.";
        linear(p + "attention.query", fa.Wq, fa.bq);
        linear(p + "attention.key", fa.Wk, fa.bk);
        linear(p + "attention.value", fa.Wv, fa.bv);
        linear(p + "attention.dense", fa.Wo, fa.bo);
        layernorm(p + "attention.LayerNorm", w.ln1_g, w.ln1_b);
        linear(p + "ffn", w.W_1, w.b_1);
        linear(p + "ffn_output", w.W_2, w.b_2);
        layernorm(p + "full_layer_layer_norm", w.ln2_g, w.ln2_b);
      }
    }
    c = {{"architectures", {bert ? "BertModel" : "AlbertModel"}},
         {"model_type", bert ? "bert" : "albert"},
         {"num_hidden_layers", L},
         {"num_attention_heads", H},
         {"hidden_size", d},
         {"intermediate_size", a.d_ff},
         {"hidden_act", act_name},
         {"layer_norm_eps", a.ln_eps},
         {"position_embedding_type", "absolute"},
         {"torch_dtype", torch_dtype}};
    if (!bert) {
      c["num_hidden_groups"] = 1;
      c["inner_group_num"] = 1;
      c["embedding_size"] = emb ? emb->word.cols() : d;
    }
    if (emb) {
      add_m(P + "embeddings.word_embeddings.weight", emb->word);
      add_m(P + "embeddings.position_embeddings.weight", emb->position);
      add_m(P + "embeddings.token_type_embeddings.weight", emb->token_type);
      layernorm(P + "embeddings.LayerNorm", emb->ln_g, emb->ln_b);
      if (!bert) linear(P + "encoder.embedding_hidden_mapping_in", emb->mapping, emb->mapping_b);
      c["vocab_size"] = emb->word.rows();
      c["max_position_embeddings"] = emb->position.rows();
      c["type_vocab_size"] = emb->token_type.rows();
    }
  }

  std::error_code ec;
  fs::create_directories(folder, ec);
  if (!fs::is_directory(folder)) fail(folder, "folder", "cannot be created" + (ec ? ": " + ec.message() : std::string()));
  write_safetensors((fs::path(folder) / "model.safetensors").string(), ts, {{"format", "pt"}});
  write_file_atomic((fs::path(folder) / "config.json").string(), c.dump(2) + "\n");
}

}  // namespace sanpath

#include "io/layout_llama.hpp"

#include "sanpath/core/errors.hpp"
#include "sanpath/io/atomic_file.hpp"

#include <climits>
#include <cmath>
#include <filesystem>
#include <stdexcept>

namespace sanpath::detail {

namespace {

using json = nlohmann::json;
using RowMajorMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

[[noreturn]] void fail(const std::string& where, const std::string& field, const std::string& why) {
  throw std::invalid_argument(printable(where + ": " + field + ": " + why));
}

std::string str(long long v) { return std::to_string(v); }

std::string brief(const json& j) {
  std::string s = j.dump(-1, ' ', true, json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

/// Typed access to config.json.
struct Config {
  const std::string& path;
  const json& j;
  bool has(const std::string& k) const { return j.contains(k) && !j.at(k).is_null(); }
  int positive_int(const std::string& k) const {
    if (!has(k)) fail(path, k, "missing");
    const json& v = j.at(k);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > INT_MAX)
      fail(path, k, "must be a positive integer, got " + brief(v));
    return v.get<int>();
  }
  int positive_int_or(const std::string& k, int fallback) const { return has(k) ? positive_int(k) : fallback; }
  double positive_number_or(const std::string& k, double fallback, bool zero_ok) const {
    if (!has(k)) return fallback;
    const json& v = j.at(k);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || (!zero_ok && v.get<double>() == 0))
      fail(path, k, std::string("must be a finite number ") + (zero_ok ? ">= 0" : "> 0") + ", got " + brief(v));
    return v.get<double>();
  }
  bool bool_or(const std::string& k, bool fallback) const {
    if (!has(k)) return fallback;
    if (!j.at(k).is_boolean()) fail(path, k, "must be true or false, got " + brief(j.at(k)));
    return j.at(k).get<bool>();
  }
  std::string string_or(const std::string& k, const std::string& fallback) const {
    if (!has(k)) return fallback;
    if (!j.at(k).is_string()) fail(path, k, "must be a string, got " + brief(j.at(k)));
    return j.at(k).get<std::string>();
  }
};

/// A tensor of the file with the expected shape ([rows, cols] or [rows]).
const Tensor& need(const SafetensorsFile& f, const std::string& name, std::vector<std::int64_t> shape,
                   const std::string& config_path) {
  const Tensor* t = f.find(name);
  if (!t) fail(f.path(), name, "missing (a Llama-family checkpoint needs it)");
  if (t->shape != shape) {
    std::string want = "[", got = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + str(shape[i]);
    for (std::size_t i = 0; i < t->shape.size(); ++i) got += (i ? ", " : "") + str(t->shape[i]);
    fail(f.path(), name, "shape " + got + "], expected " + want + "] from " + config_path);
  }
  return *t;
}

/// A torch Linear weight [out, in] as the x·W matrix in×out.
MatrixXd linear(const Tensor& t) {
  return Eigen::Map<const RowMajorMatrix>(t.values.data(), t.shape[0], t.shape[1]).transpose();
}
VectorXd vector_of(const Tensor& t) {
  return Eigen::Map<const VectorXd>(t.values.data(), static_cast<Eigen::Index>(t.values.size()));
}

Tensor tensor_of(const std::string& name, const MatrixXd& m, const std::string& dtype) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {m.rows(), m.cols()};
  t.values.resize(static_cast<std::size_t>(m.size()));
  Eigen::Map<RowMajorMatrix>(t.values.data(), m.rows(), m.cols()) = m;
  return t;
}
Tensor tensor_of(const std::string& name, const VectorXd& v, const std::string& dtype) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {v.size()};
  t.values.assign(v.data(), v.data() + v.size());
  return t;
}

}  // namespace

bool is_llama_family(const std::string& t) { return t == "llama" || t == "mistral" || t == "qwen2"; }

Model load_llama_family(const std::string& config_path, const json& config, const SafetensorsFile& f,
                        const std::string& source) {
  const Config c{config_path, config};
  const std::string type = c.string_or("model_type", "llama");
  const int L = c.positive_int("num_hidden_layers");
  const int H = c.positive_int("num_attention_heads");
  const int d = c.positive_int("hidden_size");
  const int ff = c.positive_int("intermediate_size");
  const int Hkv = c.positive_int_or("num_key_value_heads", H);
  if (Hkv > H || H % Hkv != 0)
    fail(config_path, "num_key_value_heads", str(Hkv) + " does not divide num_attention_heads = " + str(H));
  if (!c.has("head_dim") && d % H != 0)
    fail(config_path, "hidden_size", str(d) + " is not divisible by num_attention_heads = " + str(H));
  const int dh = c.positive_int_or("head_dim", d / H);
  if (dh % 2 != 0) fail(config_path, "head_dim", str(dh) + " is odd; rotary embeddings rotate pairs");
  const std::string act = c.string_or("hidden_act", "silu");
  if (act != "silu") fail(config_path, "hidden_act", "'" + act + "' is not supported (silu only, math.md §8)");
  if (c.has("rope_scaling"))
    fail(config_path, "rope_scaling", brief(config.at("rope_scaling")) + " is not supported (null only, math.md §8)");
  for (const char* k : {"partial_rotary_factor", "rotary_pct"})
    if (c.has(k) && c.positive_number_or(k, 1.0, false) != 1.0)
      fail(config_path, k, brief(config.at(k)) + " is not supported (the whole head is rotated, math.md §8)");
  if (c.bool_or("mlp_bias", false)) fail(config_path, "mlp_bias", "true is not supported (math.md §8: no MLP biases)");
  const bool qwen2 = type == "qwen2";
  const bool qkv_bias = qwen2 || c.bool_or("attention_bias", false);
  const bool o_bias = !qwen2 && c.bool_or("attention_bias", false);
  // Mistral applies sliding_window when set; Qwen2 only with use_sliding_window.
  int window = 0;
  if (c.has("sliding_window") && (type == "mistral" || (qwen2 && c.bool_or("use_sliding_window", false))))
    window = c.positive_int("sliding_window");

  Architecture a;
  a.layers = L;
  a.heads = H;
  a.d_model = d;
  a.d_qk = a.d_v = dh;
  a.d_ff = ff;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.activation = Activation::silu;
  a.ln_eps = c.positive_number_or("rms_norm_eps", 1e-6, true);
  a.norm = NormKind::rms;
  a.kv_heads = Hkv;
  a.rope_theta = c.positive_number_or("rope_theta", 10000.0, false);
  a.gated_mlp = true;
  a.attention_window = window;

  if (static_cast<std::size_t>(L) > f.tensors().size())
    fail(config_path, "num_hidden_layers",
         str(L) + " layers, but " + f.path() + " holds only " + str(static_cast<long long>(f.tensors().size())) +
             " tensors (a layer has 9)");
  const std::int64_t q_out = std::int64_t(H) * dh, kv_out = std::int64_t(Hkv) * dh;
  std::vector<LayerWeights> layers(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l) {
    const std::string p = "model.layers." + str(l) + ".";
    const auto lin = [&](const std::string& k, std::int64_t out, std::int64_t in) {
      return linear(need(f, p + k + ".weight", {out, in}, config_path));
    };
    const auto bias = [&](const std::string& k, std::int64_t n, bool present) -> VectorXd {
      return present ? vector_of(need(f, p + k + ".bias", {n}, config_path)) : VectorXd::Zero(n);
    };
    const MatrixXd Wq = lin("self_attn.q_proj", q_out, d), Wk = lin("self_attn.k_proj", kv_out, d),
                   Wv = lin("self_attn.v_proj", kv_out, d), Wo = lin("self_attn.o_proj", d, q_out);
    const VectorXd bq = bias("self_attn.q_proj", q_out, qkv_bias), bk = bias("self_attn.k_proj", kv_out, qkv_bias),
                   bv = bias("self_attn.v_proj", kv_out, qkv_bias);
    LayerWeights& w = layers[static_cast<std::size_t>(l)];
    w.heads.resize(static_cast<std::size_t>(H));
    for (int h = 0; h < H; ++h) {
      const int g = a.kv_head_of(h);
      HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      hw.W_Q = Wq.middleCols(h * dh, dh);
      hw.b_Q = bq.segment(h * dh, dh);
      hw.W_K = Wk.middleCols(g * dh, dh);
      hw.b_K = bk.segment(g * dh, dh);
      hw.W_V = Wv.middleCols(g * dh, dh);
      hw.b_V = bv.segment(g * dh, dh);
      hw.W_O = Wo.middleRows(h * dh, dh);
    }
    w.b_O = bias("self_attn.o_proj", d, o_bias);
    w.W_gate = lin("mlp.gate_proj", ff, d);
    w.W_1 = lin("mlp.up_proj", ff, d);
    w.W_2 = lin("mlp.down_proj", d, ff);
    w.b_1 = VectorXd::Zero(ff);
    w.b_2 = VectorXd::Zero(d);
    w.ln1_g = vector_of(need(f, p + "input_layernorm.weight", {d}, config_path));
    w.ln2_g = vector_of(need(f, p + "post_attention_layernorm.weight", {d}, config_path));
    w.ln1_b = w.ln2_b = VectorXd::Zero(d);
  }
  need(f, "model.norm.weight", {d}, config_path);
  std::optional<Embeddings> emb;
  if (f.find("model.embed_tokens.weight")) {
    const std::int64_t vocab = c.has("vocab_size") ? c.positive_int("vocab_size") : f.find("model.embed_tokens.weight")->shape.at(0);
    const Tensor& t = need(f, "model.embed_tokens.weight", {vocab, d}, config_path);
    Embeddings e;
    e.kind = EmbeddingKind::llama;
    e.word = Eigen::Map<const RowMajorMatrix>(t.values.data(), t.shape[0], t.shape[1]);
    e.ln_eps = a.ln_eps;
    emb = std::move(e);
  }
  return Model(a, std::move(layers), std::move(emb), source);
}

void save_llama_family(const Model& model, const std::string& folder, const std::string& type,
                       const std::string& dtype) {
  const Architecture& a = model.arch();
  if (!is_llama_family(type)) fail(folder, "layout", "'" + type + "' is not one of llama, mistral, qwen2");
  if (dtype != "F64" && dtype != "F32") fail(folder, "dtype", "'" + dtype + "' is not one of F64, F32");
  const auto need_arch = [&](bool ok, const std::string& field, const std::string& what) {
    if (!ok) fail(folder, field, "the " + type + " layout needs " + what);
  };
  need_arch(a.norm == NormKind::rms, "norm", "RMSNorm");
  need_arch(a.rotary(), "rope_theta", "rotary embeddings");
  need_arch(a.gated_mlp && a.activation == Activation::silu, "W_gate", "a gated MLP with silu");
  need_arch(a.d_qk == a.d_v, "d_qk", "d_qk = d_v");
  const bool qwen2 = type == "qwen2";
  const int L = a.layers, H = a.heads, Hkv = a.key_value_heads(), d = a.d_model, dh = a.d_qk;
  const auto zero = [](const VectorXd& v) { return (v.array() == 0).all(); };
  for (int l = 0; l < L; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = "layer " + str(l) + " ";
    need_arch(w.has_mlp() && w.gated(), p + "W_gate", "gated MLP weights");
    need_arch(w.has_layernorm(), p + "ln1_g", "RMSNorm weights");
    need_arch(zero(w.ln1_b) && zero(w.ln2_b), p + "ln1_b", "zero RMSNorm biases");
    need_arch(zero(w.b_O) && zero(w.b_1) && zero(w.b_2), p + "b_O", "zero output and MLP biases");
    if (!qwen2)
      for (int h = 0; h < H; ++h) {
        const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
        need_arch(zero(hw.b_Q) && zero(hw.b_K) && zero(hw.b_V), p + "head " + str(h) + " b_Q",
                  "zero query/key/value biases (qwen2 has them)");
      }
  }
  const auto& emb = model.embeddings();
  if (emb && emb->kind != EmbeddingKind::llama)
    fail(folder, "embeddings", "only token embeddings without positions can be written in the " + type + " layout");

  std::vector<Tensor> ts;
  const auto add = [&](const std::string& name, const auto& m) { ts.push_back(tensor_of(name, m, dtype)); };
  for (int l = 0; l < L; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = "model.layers." + str(l) + ".";
    MatrixXd Wq(d, H * dh), Wk(d, Hkv * dh), Wv(d, Hkv * dh), Wo(H * dh, d);
    VectorXd bq(H * dh), bk(Hkv * dh), bv(Hkv * dh);
    for (int h = 0; h < H; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      const int g = a.kv_head_of(h);
      Wq.middleCols(h * dh, dh) = hw.W_Q;
      bq.segment(h * dh, dh) = hw.b_Q;
      Wk.middleCols(g * dh, dh) = hw.W_K;  // identical within a group (Model validates)
      bk.segment(g * dh, dh) = hw.b_K;
      Wv.middleCols(g * dh, dh) = hw.W_V;
      bv.segment(g * dh, dh) = hw.b_V;
      Wo.middleRows(h * dh, dh) = hw.W_O;
    }
    add(p + "input_layernorm.weight", w.ln1_g);
    add(p + "self_attn.q_proj.weight", MatrixXd(Wq.transpose()));
    add(p + "self_attn.k_proj.weight", MatrixXd(Wk.transpose()));
    add(p + "self_attn.v_proj.weight", MatrixXd(Wv.transpose()));
    if (qwen2) {
      add(p + "self_attn.q_proj.bias", bq);
      add(p + "self_attn.k_proj.bias", bk);
      add(p + "self_attn.v_proj.bias", bv);
    }
    add(p + "self_attn.o_proj.weight", MatrixXd(Wo.transpose()));
    add(p + "post_attention_layernorm.weight", w.ln2_g);
    add(p + "mlp.gate_proj.weight", MatrixXd(w.W_gate.transpose()));
    add(p + "mlp.up_proj.weight", MatrixXd(w.W_1.transpose()));
    add(p + "mlp.down_proj.weight", MatrixXd(w.W_2.transpose()));
  }
  add("model.norm.weight", VectorXd(VectorXd::Ones(d)));
  static const std::map<std::string, std::string> arch_name = {
      {"llama", "LlamaForCausalLM"}, {"mistral", "MistralForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}};
  json c = {{"architectures", {arch_name.at(type)}},
            {"model_type", type},
            {"num_hidden_layers", L},
            {"num_attention_heads", H},
            {"num_key_value_heads", Hkv},
            {"hidden_size", d},
            {"head_dim", dh},
            {"intermediate_size", a.d_ff},
            {"hidden_act", "silu"},
            {"rms_norm_eps", a.ln_eps},
            {"rope_theta", *a.rope_theta},
            {"rope_scaling", nullptr},
            {"tie_word_embeddings", true},
            {"torch_dtype", dtype == "F64" ? "float64" : "float32"}};
  if (type == "llama") {
    c["attention_bias"] = false;
    c["mlp_bias"] = false;
  }
  if (type == "mistral") c["sliding_window"] = a.attention_window > 0 ? json(a.attention_window) : json(nullptr);
  if (qwen2) {
    c["use_sliding_window"] = a.attention_window > 0;
    if (a.attention_window > 0) c["sliding_window"] = a.attention_window;
  }
  if (type == "llama" && a.attention_window > 0)
    fail(folder, "attention_window", "the llama layout has no sliding window");
  if (emb) {
    add("model.embed_tokens.weight", emb->word);
    c["vocab_size"] = emb->word.rows();
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (!fs::is_directory(folder)) fail(folder, "folder", "cannot be created" + (ec ? ": " + ec.message() : std::string()));
  write_safetensors((fs::path(folder) / "model.safetensors").string(), ts, {{"format", "pt"}});
  write_file_atomic((fs::path(folder) / "config.json").string(), c.dump(2) + "\n");
}

}  // namespace sanpath::detail

#include "native.hpp"

#include "hf_config.hpp"
#include "hf_layout.hpp"

#include "sanpath/core/resources.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/tensor_eigen.hpp"

#include <climits>
#include <set>

namespace sanpath {

namespace io {

constexpr int kNativeVersion = 1;

namespace {



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

/// The prefix of the names of layer l's tensors in a native file.
std::string layer_tensors(int l) { return "layers." + str(l) + "."; }

}  // namespace

Model load_native(const SafetensorsMap& f, const LoadOptions& options) {
  const std::string& path = f.path();
  NativeConfig c{path, parse_json(f.metadata().at(kNativeConfigKey), path, std::string("__metadata__.") + kNativeConfigKey)};
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
  // Fields of the families of families.md, absent for the others.
  if (c.j.contains("rotary_dims")) a.rotary_dims = c.integer("rotary_dims", 0);
  if (c.j.contains("parallel_residual")) a.parallel_residual = c.boolean("parallel_residual");
  if (c.j.contains("norm_unit_offset")) a.norm_unit_offset = c.boolean("norm_unit_offset");
  if (c.j.contains("score_scale_base")) a.score_scale_base = c.number("score_scale_base");
  if (c.j.contains("softcap")) a.softcap = c.number("softcap");
  if (c.j.contains("sandwich_norms")) a.sandwich_norms = c.boolean("sandwich_norms");
  if (c.j.contains("window_layers")) {
    const json& v = c.get("window_layers");
    if (!v.is_array()) fail(path, c.field("window_layers"), "must be an array of true/false, got " + brief(v));
    for (const json& x : v) {
      if (!x.is_boolean()) fail(path, c.field("window_layers"), "must be an array of true/false, got " + brief(v));
      a.window_layers.push_back(x.get<bool>());
    }
  }
  if (c.j.contains("rel_buckets")) a.rel_buckets = c.integer("rel_buckets", 0);
  if (c.j.contains("rel_max_distance")) a.rel_max_distance = c.integer("rel_max_distance", 0);
  if (c.j.contains("xlnet_relative")) a.xlnet_relative = c.boolean("xlnet_relative");
  if (c.j.contains("clamp_len")) a.clamp_len = c.integer("clamp_len", 0);
  if (c.j.contains("own_norm_placement_only")) a.own_norm_placement_only = c.boolean("own_norm_placement_only");
  if (c.j.contains("query_key_norm")) {
    const json& v = c.get("query_key_norm");
    if (!v.is_object()) fail(path, c.field("query_key_norm"), "must be an object {eps, unit_offset}, got " + brief(v));
    NativeConfig q{path, v};
    a.query_key_norm = Architecture::QueryKeyNorm{q.number("eps"), q.boolean("unit_offset")};
  }
  if (c.j.contains("layer_rotary")) {
    const json& v = c.get("layer_rotary");
    const auto bad = [&] { fail(path, c.field("layer_rotary"), "must be an array of [base, linear factor], got " + brief(v)); };
    if (!v.is_array()) bad();
    for (const json& x : v) {
      if (!x.is_array() || x.size() != 2 || !x[0].is_number() || !x[1].is_number()) bad();
      a.layer_rotary.push_back({x[0].get<double>(), x[1].get<double>()});
    }
  }
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

  // With first_layers, the stored layers past the cut are neither decoded nor
  // required (as in the HuggingFace layouts); a layer stored once for all is kept.
  const LayerPrefix cut = layer_prefix(options, a.layers, path, c.field("layers"), path);
  const int read = stored == a.layers ? cut.layers : stored;
  const auto past_cut = [&](const std::string& name) {
    for (int l = read; l < stored; ++l)
      if (name.rfind(layer_tensors(l), 0) == 0) return true;
    return false;
  };

  // Every other tensor of a native file is used (others are refused below):
  // the decoded values, refused above the memory budget before any is made.
  std::uint64_t values = 0;
  for (const TensorInfo& t : f.tensors())
    if (!past_cut(t.name)) values = add_sat(values, static_cast<std::uint64_t>(t.numel()));
  require_memory(mul_sat(values, sizeof(double)), printable(path + ": weights"),
                 std::to_string(values) + " values decoded as doubles");

  std::set<std::string> used;
  std::vector<std::string> missing;
  const auto find = [&](const std::string& name, bool required) -> const TensorInfo* {
    const TensorInfo* t = f.find(name);
    if (t) used.insert(name);
    else if (required) missing.push_back(name);
    return t;
  };
  const auto reader = [&](const TensorInfo& t) -> TensorReader {
    return [&f, &t](std::size_t first, std::size_t count, double* out) { f.decode(t, first, count, out); };
  };
  const auto mat = [&](const std::string& name, bool required, MatrixXd& out) {
    if (const TensorInfo* t = find(name, required)) {
      if (t->shape.size() != 2) fail(path, name, "must have 2 dimensions, got shape " + shape_str(t->shape));
      out.resize(t->shape[0], t->shape[1]);
      read_block({0, t->shape[0], 0, t->shape[1], false}, t->shape[1], reader(*t),
                 Eigen::Map<MatrixXd>(out.data(), out.rows(), out.cols()));
    }
  };
  const auto vec = [&](const std::string& name, bool required, VectorXd& out) {
    if (const TensorInfo* t = find(name, required)) {
      if (t->shape.size() != 1) fail(path, name, "must have 1 dimension, got shape " + shape_str(t->shape));
      out.resize(t->shape[0]);
      read_block({0, 1, 0, t->shape[0], true}, t->shape[0], reader(*t), Eigen::Map<MatrixXd>(out.data(), out.size(), 1));
    }
  };

  std::vector<LayerWeights> layers(static_cast<std::size_t>(read));
  for (int l = 0; l < read; ++l) {
    LayerWeights& w = layers[static_cast<std::size_t>(l)];
    const std::string p = layer_tensors(l);
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
      mat(q + "W_R", a.xlnet_relative, hw.W_R);
      vec(q + "r_w", a.xlnet_relative, hw.r_w);
      vec(q + "r_r", a.xlnet_relative, hw.r_r);
    }
    vec(p + "b_O", true, w.b_O);
    mat(p + "pos_bias", a.rel_buckets > 0, w.pos_bias);
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
    vec(p + "ln3_g", ln && a.sandwich_norms, w.ln3_g);
    vec(p + "ln4_g", ln && a.sandwich_norms, w.ln4_g);
    vec(p + "q_norm", a.query_key_norm.has_value(), w.q_norm);
    vec(p + "k_norm", a.query_key_norm.has_value(), w.k_norm);
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
    try {
      e.kind = parse_layout(kind);
    } catch (const std::invalid_argument&) {
      fail(path, c.field("embeddings.kind"), "'" + kind + "' is not one of " + layout_names());
    }
    e.ln_eps = ec.number("ln_eps");
    if (ec.j.contains("placeholder_id")) e.placeholder_id = ec.integer("placeholder_id", 0);
    if (ec.j.contains("padding_id")) e.padding_id = ec.integer("padding_id", 0);
    // The file names the family; its recipe says which tables it holds.
    const EmbeddingRecipe& r = e.recipe.emplace(embedding_recipe(e.kind));
    mat("embeddings.word", !r.patches, e.word);
    mat("embeddings.position", r.positions, e.position);
    mat("embeddings.token_type", r.token_type, e.token_type);
    vec("embeddings.ln_g", r.layer_norm, e.ln_g);
    vec("embeddings.ln_b", r.layer_norm, e.ln_b);
    mat("embeddings.mapping", r.map_after_norm, e.mapping);  // project_in: present when e ≠ d
    vec("embeddings.mapping_b", r.map_after_norm, e.mapping_b);
    if (r.patches) {
      e.image_size = ec.integer("image_size", 1);
      e.patch_size = ec.integer("patch_size", 1);
      e.channels = ec.integer("channels", 1);
      mat("embeddings.patch", true, e.patch);
      vec("embeddings.patch_b", true, e.patch_b);
      vec("embeddings.cls", true, e.cls);
    }
    emb = std::move(e);
  }
  if (!missing.empty()) {
    std::string list;
    const std::size_t shown = std::min<std::size_t>(missing.size(), 5);
    for (std::size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > shown) list += " (and " + std::to_string(missing.size() - shown) + " more)";
    fail(path, "tensors", std::to_string(missing.size()) + " missing: " + list);
  }
  for (const TensorInfo& t : f.tensors())
    if (!used.count(t.name) && !past_cut(t.name)) fail(path, t.name, "unexpected tensor in a sanpath native file");
  a.layers = cut.layers;
  layers.resize(static_cast<std::size_t>(a.layers));
  // The per-layer entries of the layers kept.
  if (!a.window_layers.empty()) a.window_layers.resize(static_cast<std::size_t>(a.layers));
  if (!a.layer_rotary.empty()) a.layer_rotary.resize(static_cast<std::size_t>(a.layers));
  return Model(a, std::move(layers), std::move(emb), cut.source);
}


}  // namespace io

using io::json;
using io::kNativeConfigKey;
using io::str;
using io::same_layer;
using io::kNativeVersion;

namespace {

/// The native form of a model: its configuration and its tensors (F64).
struct NativeForm {
  json config;
  std::vector<Tensor> tensors;
};

NativeForm native_form(const Model& model, const std::string& where) {
  io::require_savable_embeddings(model, where);
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
  if (a.rotary_dims > 0) c["rotary_dims"] = a.rotary_dims;
  if (a.parallel_residual) c["parallel_residual"] = true;
  if (a.norm_unit_offset) c["norm_unit_offset"] = true;
  if (a.score_scale_base) c["score_scale_base"] = *a.score_scale_base;
  if (a.softcap) c["softcap"] = *a.softcap;
  if (a.sandwich_norms) c["sandwich_norms"] = true;
  if (!a.window_layers.empty()) c["window_layers"] = a.window_layers;
  if (a.rel_buckets > 0) {
    c["rel_buckets"] = a.rel_buckets;
    c["rel_max_distance"] = a.rel_max_distance;
  }
  if (a.xlnet_relative) c["xlnet_relative"] = true;
  if (a.clamp_len > 0) c["clamp_len"] = a.clamp_len;
  if (a.own_norm_placement_only) c["own_norm_placement_only"] = true;
  if (a.query_key_norm)
    c["query_key_norm"] = {{"eps", a.query_key_norm->eps}, {"unit_offset", a.query_key_norm->unit_offset}};
  if (!a.layer_rotary.empty()) {
    json v = json::array();
    for (const Architecture::LayerRotary& r : a.layer_rotary) v.push_back({r.theta, r.linear_factor});
    c["layer_rotary"] = v;
  }

  std::vector<Tensor> ts;
  const auto add_m = [&](const std::string& name, const MatrixXd& m) {
    if (m.rows() > 0 || m.cols() > 0) ts.push_back(make_tensor(name, m, dt));
  };
  const auto add_v = [&](const std::string& name, const VectorXd& v) {
    if (v.size() > 0) ts.push_back(make_tensor(name, v, dt));
  };
  for (int l = 0; l < stored; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = io::layer_tensors(l);
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
      add_m(q + "W_R", hw.W_R);
      add_v(q + "r_w", hw.r_w);
      add_v(q + "r_r", hw.r_r);
    }
    add_v(p + "b_O", w.b_O);
    add_m(p + "pos_bias", w.pos_bias);
    add_m(p + "W_1", w.W_1);
    add_v(p + "b_1", w.b_1);
    add_m(p + "W_2", w.W_2);
    add_v(p + "b_2", w.b_2);
    add_m(p + "W_gate", w.W_gate);
    add_v(p + "ln1_g", w.ln1_g);
    add_v(p + "ln1_b", w.ln1_b);
    add_v(p + "ln2_g", w.ln2_g);
    add_v(p + "ln2_b", w.ln2_b);
    add_v(p + "ln3_g", w.ln3_g);
    add_v(p + "ln4_g", w.ln4_g);
    add_v(p + "q_norm", w.q_norm);
    add_v(p + "k_norm", w.k_norm);
  }
  if (const auto& e = model.embeddings()) {
    c["embeddings"] = {{"kind", to_string(e->kind)}, {"ln_eps", e->ln_eps}};
    if (e->placeholder_id) c["embeddings"]["placeholder_id"] = *e->placeholder_id;
    if (e->padding_id) c["embeddings"]["padding_id"] = *e->padding_id;
    if (e->pixels()) {
      c["embeddings"]["image_size"] = e->image_size;
      c["embeddings"]["patch_size"] = e->patch_size;
      c["embeddings"]["channels"] = e->channels;
      add_m("embeddings.patch", e->patch);
      add_v("embeddings.patch_b", e->patch_b);
      add_v("embeddings.cls", e->cls);
    }
    add_m("embeddings.word", e->word);
    add_m("embeddings.position", e->position);
    add_m("embeddings.token_type", e->token_type);
    add_v("embeddings.ln_g", e->ln_g);
    add_v("embeddings.ln_b", e->ln_b);
    add_m("embeddings.mapping", e->mapping);
    add_v("embeddings.mapping_b", e->mapping_b);
  }
  return {std::move(c), std::move(ts)};
}

}  // namespace

std::vector<Tensor> native_tensors(const Model& model) { return native_form(model, model.source()).tensors; }

std::string native_config(const Model& model) { return native_form(model, model.source()).config.dump(); }

void save_native(const Model& model, const std::string& path) {
  const NativeForm f = native_form(model, path);
  write_safetensors(path, f.tensors, {{"format", "sanpath"}, {kNativeConfigKey, f.config.dump()}});
}

}  // namespace sanpath

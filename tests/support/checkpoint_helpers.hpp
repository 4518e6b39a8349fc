#pragma once
// Shared by the checkpoint tests: random models whose every weight differs
// (so that a swapped tensor cannot go unnoticed), exact comparisons that name
// the field, one-line error checks, and editing of written checkpoints.
#include "support/helpers.hpp"

#include "sanpath/io/safetensors.hpp"
#include "sanpath/model/model.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>

using namespace sanpath;
using sanpath::test::tmp_path;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace sanpath::test {

/// Uniform values in [-1, 1) from a fixed-seed 64-bit Mersenne twister (the
/// engine's output is specified by the standard); optionally rounded to float
/// so that F32 checkpoints hold them exactly.
struct Gen {
  std::mt19937_64 rng;
  bool f32;
  double next() {
    const double u = static_cast<double>(rng() >> 11) * std::ldexp(1.0, -52) - 1.0;
    return f32 ? static_cast<double>(static_cast<float>(u)) : u;
  }
  MatrixXd mat(Eigen::Index r, Eigen::Index c) {
    MatrixXd m(r, c);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = next();
    return m;
  }
  VectorXd vec(Eigen::Index n) {
    VectorXd v(n);
    for (Eigen::Index i = 0; i < n; ++i) v[i] = next();
    return v;
  }
};

struct Spec {
  int layers = 3, heads = 2, d = 8, d_ff = 12;
  bool f32 = false;
  bool mlp = true, layernorm = true;
  bool shared = false;
  std::optional<Layout> emb;
  int e = 0;  // ALBERT embedding width (0: d)
  Variant variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  Activation act = Activation::gelu;
  double ln_eps = 1e-12;
  std::uint64_t seed = 1;
};

/// A model with every weight random (LayerNorm gains and biases too, so that
/// a swapped tensor cannot go unnoticed).
inline Model make_model(const Spec& s) {
  Gen g{std::mt19937_64(s.seed), s.f32};
  Architecture a;
  a.layers = s.layers;
  a.heads = s.heads;
  a.d_model = s.d;
  a.d_qk = a.d_v = s.d / s.heads;
  a.d_ff = s.mlp ? s.d_ff : 0;
  a.variant = s.variant;
  a.activation = s.act;
  a.ln_eps = s.ln_eps;
  a.shared_layers = s.shared;
  std::vector<LayerWeights> layers;
  for (int l = 0; l < s.layers; ++l) {
    if (s.shared && l > 0) {
      layers.push_back(layers.front());
      continue;
    }
    LayerWeights w;
    for (int h = 0; h < s.heads; ++h) {
      HeadWeights hw;
      hw.W_Q = g.mat(s.d, a.d_qk);
      hw.W_K = g.mat(s.d, a.d_qk);
      hw.W_V = g.mat(s.d, a.d_v);
      hw.W_O = g.mat(a.d_v, s.d);
      hw.b_Q = g.vec(a.d_qk);
      hw.b_K = g.vec(a.d_qk);
      hw.b_V = g.vec(a.d_v);
      w.heads.push_back(std::move(hw));
    }
    w.b_O = g.vec(s.d);
    if (s.mlp) {
      w.W_1 = g.mat(s.d, s.d_ff);
      w.b_1 = g.vec(s.d_ff);
      w.W_2 = g.mat(s.d_ff, s.d);
      w.b_2 = g.vec(s.d);
    }
    if (s.layernorm) {
      w.ln1_g = g.vec(s.d);
      w.ln1_b = g.vec(s.d);
      w.ln2_g = g.vec(s.d);
      w.ln2_b = g.vec(s.d);
    }
    layers.push_back(w);
  }
  std::optional<Embeddings> emb;
  if (s.emb) {
    Embeddings e;
    e.kind = *s.emb;
    const int width = e.kind == Layout::albert && s.e > 0 ? s.e : s.d;
    e.word = g.mat(11, width);
    e.position = g.mat(7, width);
    e.ln_eps = s.ln_eps;
    if (e.kind != Layout::gpt2 && e.kind != Layout::distilbert) e.token_type = g.mat(2, width);
    if (e.kind != Layout::gpt2) {
      e.ln_g = g.vec(width);
      e.ln_b = g.vec(width);
    }
    if (e.kind == Layout::albert) {
      e.mapping = g.mat(width, s.d);
      e.mapping_b = g.vec(s.d);
    }
    emb = e;
  }
  return Model(a, layers, emb, "random");
}

/// Exact equality, with the field named on failure.
template <class M> inline void require_same(const M& a, const M& b, const std::string& what) {
  CAPTURE(what);
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  for (Eigen::Index j = 0; j < a.cols(); ++j)
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      if (a(i, j) != b(i, j)) {
        CAPTURE(i, j, a(i, j), b(i, j));
        REQUIRE(a(i, j) == b(i, j));
      }
}

inline void require_same_layers(const Model& x, const Model& y) {
  REQUIRE(x.arch().layers == y.arch().layers);
  REQUIRE(x.arch().heads == y.arch().heads);
  REQUIRE(x.arch().d_model == y.arch().d_model);
  REQUIRE(x.arch().d_qk == y.arch().d_qk);
  REQUIRE(x.arch().d_v == y.arch().d_v);
  REQUIRE(x.arch().d_ff == y.arch().d_ff);
  for (int l = 0; l < x.arch().layers; ++l) {
    const LayerWeights &a = x.layer(l), &b = y.layer(l);
    const std::string p = "layer " + std::to_string(l) + " ";
    for (int h = 0; h < x.arch().heads; ++h) {
      const HeadWeights &u = a.heads.at(static_cast<std::size_t>(h)), &v = b.heads.at(static_cast<std::size_t>(h));
      const std::string q = p + "head " + std::to_string(h) + " ";
      require_same(u.W_Q, v.W_Q, q + "W_Q");
      require_same(u.W_K, v.W_K, q + "W_K");
      require_same(u.W_V, v.W_V, q + "W_V");
      require_same(u.W_O, v.W_O, q + "W_O");
      require_same(u.b_Q, v.b_Q, q + "b_Q");
      require_same(u.b_K, v.b_K, q + "b_K");
      require_same(u.b_V, v.b_V, q + "b_V");
      require_same(u.W_R, v.W_R, q + "W_R");
      require_same(u.r_w, v.r_w, q + "r_w");
      require_same(u.r_r, v.r_r, q + "r_r");
    }
    require_same(a.b_O, b.b_O, p + "b_O");
    require_same(a.W_1, b.W_1, p + "W_1");
    require_same(a.b_1, b.b_1, p + "b_1");
    require_same(a.W_2, b.W_2, p + "W_2");
    require_same(a.W_gate, b.W_gate, p + "W_gate");
    require_same(a.b_2, b.b_2, p + "b_2");
    require_same(a.ln1_g, b.ln1_g, p + "ln1_g");
    require_same(a.ln1_b, b.ln1_b, p + "ln1_b");
    require_same(a.ln2_g, b.ln2_g, p + "ln2_g");
    require_same(a.ln2_b, b.ln2_b, p + "ln2_b");
    require_same(a.ln3_g, b.ln3_g, p + "ln3_g");
    require_same(a.ln4_g, b.ln4_g, p + "ln4_g");
    require_same(a.pos_bias, b.pos_bias, p + "pos_bias");
    require_same(a.q_norm, b.q_norm, p + "q_norm");
    require_same(a.k_norm, b.k_norm, p + "k_norm");
  }
}

inline void require_same_embeddings(const Model& x, const Model& y) {
  REQUIRE(x.embeddings().has_value() == y.embeddings().has_value());
  if (!x.embeddings()) return;
  const Embeddings &a = *x.embeddings(), &b = *y.embeddings();
  REQUIRE(a.kind == b.kind);
  REQUIRE(a.ln_eps == b.ln_eps);
  require_same(a.word, b.word, "word");
  require_same(a.position, b.position, "position");
  require_same(a.token_type, b.token_type, "token_type");
  require_same(a.ln_g, b.ln_g, "ln_g");
  require_same(a.ln_b, b.ln_b, "ln_b");
  require_same(a.mapping, b.mapping, "mapping");
  require_same(a.mapping_b, b.mapping_b, "mapping_b");
  require_same(a.patch, b.patch, "patch");
  require_same(a.patch_b, b.patch_b, "patch_b");
  require_same(a.cls, b.cls, "cls");
  REQUIRE(a.image_size == b.image_size);
  REQUIRE(a.patch_size == b.patch_size);
  REQUIRE(a.channels == b.channels);
}

inline void require_same_arch(const Architecture& a, const Architecture& b) {
  CHECK(a.layers == b.layers);
  CHECK(a.heads == b.heads);
  CHECK(a.d_model == b.d_model);
  CHECK(a.d_qk == b.d_qk);
  CHECK(a.d_v == b.d_v);
  CHECK(a.d_ff == b.d_ff);
  CHECK(a.variant == b.variant);
  CHECK(a.activation == b.activation);
  CHECK(a.ln_eps == b.ln_eps);
  CHECK(a.shared_layers == b.shared_layers);
  CHECK(a.norm == b.norm);
  CHECK(a.kv_heads == b.kv_heads);
  CHECK(a.rope_theta == b.rope_theta);
  CHECK(a.rotary_dims == b.rotary_dims);
  CHECK(a.parallel_residual == b.parallel_residual);
  CHECK(a.norm_unit_offset == b.norm_unit_offset);
  CHECK(a.score_scale_base == b.score_scale_base);
  CHECK(a.softcap == b.softcap);
  CHECK(a.sandwich_norms == b.sandwich_norms);
  CHECK(a.window_layers == b.window_layers);
  CHECK(a.rel_buckets == b.rel_buckets);
  CHECK(a.rel_max_distance == b.rel_max_distance);
  CHECK(a.xlnet_relative == b.xlnet_relative);
  CHECK(a.clamp_len == b.clamp_len);
  CHECK(a.own_norm_placement_only == b.own_norm_placement_only);
  CHECK(a.gated_mlp == b.gated_mlp);
  CHECK(a.attention_window == b.attention_window);
  REQUIRE(a.query_key_norm.has_value() == b.query_key_norm.has_value());
  if (a.query_key_norm) {
    CHECK(a.query_key_norm->eps == b.query_key_norm->eps);
    CHECK(a.query_key_norm->unit_offset == b.query_key_norm->unit_offset);
  }
  REQUIRE(a.layer_rotary.size() == b.layer_rotary.size());
  for (std::size_t l = 0; l < a.layer_rotary.size(); ++l) {
    CAPTURE(l);
    CHECK(a.layer_rotary[l].theta == b.layer_rotary[l].theta);
    CHECK(a.layer_rotary[l].linear_factor == b.layer_rotary[l].linear_factor);
  }
}

inline std::string fresh(const std::string& name) {
  const std::string p = tmp_path(name);
  fs::remove_all(p);
  return p;
}

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

/// Requires `f` to throw one line starting with "<where>: <field>:" that contains every `parts`.
inline void require_error(const std::function<void()>& f, const std::string& where, const std::string& field,
                   std::initializer_list<std::string> parts = {}) {
  const std::string msg = error_of(f);
  CAPTURE(msg, where, field);
  REQUIRE(!msg.empty());
  REQUIRE(msg.rfind(where + ": " + field + ":", 0) == 0);
  REQUIRE(msg.find('\n') == std::string::npos);
  for (const std::string& p : parts) {
    CAPTURE(p);
    REQUIRE(msg.find(p) != std::string::npos);
  }
}

inline json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}
inline void write_json(const std::string& path, const json& j) { std::ofstream(path, std::ios::trunc) << j.dump(2); }

/// Rewrites a checkpoint's tensors through `edit` (metadata kept).
inline void edit_tensors(const std::string& path, const std::function<void(std::vector<Tensor>&)>& edit) {
  const auto f = SafetensorsFile::read(path);
  std::vector<Tensor> ts = f.tensors();
  edit(ts);
  write_safetensors(path, ts, f.metadata());
}

}  // namespace sanpath::test

using namespace sanpath::test;

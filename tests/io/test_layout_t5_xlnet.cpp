// The relative-position encoders (families.md, "Relative-position encoders:
// XLNet and the T5 encoder"): T5's buckets at their boundaries, XLNet's
// relative shift and bias terms and T5's bias without 1/√d_kv against
// logits worked out from the raw stored tensors, the encoder half of a
// T5ForConditionalGeneration file, exact round trips, and the refusals.
#include "support/checkpoint_helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/model/random.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace {

const std::string kT5Bias = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";

/// A stored F64 tensor of `shape` with values from `g` (row-major).
Tensor raw(const std::string& name, std::vector<std::int64_t> shape, Gen& g) {
  std::int64_t n = 1;
  for (const std::int64_t s : shape) n *= s;
  Tensor t{name, "F64", std::move(shape), std::vector<double>(static_cast<std::size_t>(n))};
  for (double& v : t.values) v = g.next();
  return t;
}

void write_folder(const std::string& dir, const std::vector<Tensor>& ts, const json& config) {
  fs::create_directories(dir);
  write_safetensors(dir + "/model.safetensors", ts);
  write_json(dir + "/config.json", config);
}

/// Row-wise softmax with the row maximum subtracted.
MatrixXd softmax_rows(const MatrixXd& A) {
  MatrixXd P(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    const double m = A.row(i).maxCoeff();
    double sum = 0;
    for (Eigen::Index j = 0; j < A.cols(); ++j) sum += P(i, j) = std::exp(A(i, j) - m);
    P.row(i) /= sum;
  }
  return P;
}

/// LayerNorm (biased variance) and RMSNorm of each row.
MatrixXd layer_norm_rows(const MatrixXd& X, const std::vector<double>& g, const std::vector<double>& b, double eps) {
  MatrixXd Y(X.rows(), X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const double mean = X.row(i).mean();
    const double var = (X.row(i).array() - mean).square().mean();
    for (Eigen::Index c = 0; c < X.cols(); ++c)
      Y(i, c) = (X(i, c) - mean) / std::sqrt(var + eps) * g[std::size_t(c)] + b[std::size_t(c)];
  }
  return Y;
}
MatrixXd rms_rows(const MatrixXd& X, const std::vector<double>& g, double eps) {
  MatrixXd Y(X.rows(), X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const double r = std::sqrt(X.row(i).squaredNorm() / double(X.cols()) + eps);
    for (Eigen::Index c = 0; c < X.cols(); ++c) Y(i, c) = X(i, c) / r * g[std::size_t(c)];
  }
  return Y;
}

/// x·W for a torch Linear weight stored [out, in] (y[o] = Σ_i x[i]·T[o, i]) plus an optional bias.
MatrixXd linear(const MatrixXd& X, const Tensor& T, const Tensor* bias = nullptr) {
  const auto out = T.shape[0], in = T.shape[1];
  MatrixXd Y(X.rows(), out);
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (std::int64_t o = 0; o < out; ++o) {
      double s = bias ? bias->values[std::size_t(o)] : 0.0;
      for (std::int64_t c = 0; c < in; ++c) s += X(i, c) * T.values[std::size_t(o * in + c)];
      Y(i, o) = s;
    }
  return Y;
}

// ---- XLNet, by hand ----------------------------------------------------------------

/// A 1-layer XLNet checkpoint (d = 4, H = 2, d_h = 2, d_inner = 3) whose
/// every tensor is random, r_s_bias and seg_embed included.
struct XlnetHand {
  static constexpr int d = 4, H = 2, dh = 2, ff = 3;
  std::map<std::string, Tensor> t;
  json config;
  explicit XlnetHand(int clamp_len, const std::string& attn_type = "bi") {
    Gen g{std::mt19937_64(77), false};
    for (const char* k : {"q", "k", "v", "o", "r"}) put(raw(std::string("layer.0.rel_attn.") + k, {d, H, dh}, g));
    for (const char* k : {"r_w_bias", "r_r_bias", "r_s_bias"})
      put(raw(std::string("layer.0.rel_attn.") + k, {H, dh}, g));
    put(raw("layer.0.rel_attn.seg_embed", {2, H, dh}, g));
    put(raw("layer.0.rel_attn.layer_norm.weight", {d}, g));
    put(raw("layer.0.rel_attn.layer_norm.bias", {d}, g));
    put(raw("layer.0.ff.layer_1.weight", {ff, d}, g));
    put(raw("layer.0.ff.layer_1.bias", {ff}, g));
    put(raw("layer.0.ff.layer_2.weight", {d, ff}, g));
    put(raw("layer.0.ff.layer_2.bias", {d}, g));
    put(raw("layer.0.ff.layer_norm.weight", {d}, g));
    put(raw("layer.0.ff.layer_norm.bias", {d}, g));
    put(raw("word_embedding.weight", {9, d}, g));
    put(raw("mask_emb", {1, 1, d}, g));
    config = {{"model_type", "xlnet"}, {"architectures", {"XLNetModel"}}, {"d_model", d}, {"n_head", H},
              {"d_head", dh}, {"n_layer", 1}, {"d_inner", ff}, {"ff_activation", "gelu"},
              {"layer_norm_eps", 1e-12}, {"attn_type", attn_type}, {"bi_data", false},
              {"clamp_len", clamp_len}, {"same_length", false}, {"vocab_size", 9}};
  }
  void put(Tensor x) { t[x.name] = std::move(x); }
  void write(const std::string& dir, const std::string& prefix = "") const {
    std::vector<Tensor> ts;
    for (const auto& [name, x] : t) {
      ts.push_back(x);
      ts.back().name = prefix + name;
    }
    write_folder(dir, ts, config);
  }
  /// x[a, h, e] of a [*, H, d_h] tensor.
  double at3(const std::string& name, int a, int h, int e) const {
    return t.at("layer.0.rel_attn." + name).values[std::size_t((a * H + h) * dh + e)];
  }
  double at2(const std::string& name, int h, int e) const {
    return t.at("layer.0.rel_attn." + name).values[std::size_t(h * dh + e)];
  }
  /// Rows of X projected by q, k, v or r for head h (n × d_h).
  MatrixXd project(const MatrixXd& X, const std::string& name, int h) const {
    MatrixXd Y = MatrixXd::Zero(X.rows(), dh);
    for (Eigen::Index i = 0; i < X.rows(); ++i)
      for (int e = 0; e < dh; ++e)
        for (int a = 0; a < d; ++a) Y(i, e) += X(i, a) * at3(name, a, h, e);
    return Y;
  }
  /// R(p) = [sin(pθ_0), sin(pθ_1), cos(pθ_0), cos(pθ_1)], θ_k = 10000^(−2k/d).
  static std::vector<double> sinusoid(long p) {
    std::vector<double> R(d);
    for (int k = 0; k < d / 2; ++k) {
      const double theta = std::pow(10000.0, -2.0 * k / d);
      R[std::size_t(k)] = std::sin(double(p) * theta);
      R[std::size_t(k + d / 2)] = std::cos(double(p) * theta);
    }
    return R;
  }
  /// A_h of families.md §1, segment term included (one segment: s_0).
  MatrixXd logits(const MatrixXd& X, int h, int clamp) const {
    const Eigen::Index n = X.rows();
    const MatrixXd Q = project(X, "q", h), K = project(X, "k", h);
    MatrixXd A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        long p = long(i - j);
        if (clamp > 0) p = std::max<long>(-clamp, std::min<long>(clamp, p));
        const std::vector<double> R = sinusoid(p);
        double content = 0, position = 0, segment = 0;
        for (int e = 0; e < dh; ++e) {
          double rk = 0;
          for (int a = 0; a < d; ++a) rk += R[std::size_t(a)] * at3("r", a, h, e);
          content += (Q(i, e) + at2("r_w_bias", h, e)) * K(j, e);
          position += (Q(i, e) + at2("r_r_bias", h, e)) * rk;
          segment += (Q(i, e) + at2("r_s_bias", h, e)) * at3("seg_embed", 0, h, e);
        }
        A(i, j) = (content + position + segment) / std::sqrt(double(dh));
      }
    return A;
  }
  /// Attn(X) = Σ_h P_h V_h W_O^h with out[i, c] = Σ_{h,e} a_h[i, e]·o[c, h, e].
  MatrixXd attention(const MatrixXd& X, const std::vector<MatrixXd>& P) const {
    MatrixXd out = MatrixXd::Zero(X.rows(), d);
    for (int h = 0; h < H; ++h) {
      const MatrixXd a = P[std::size_t(h)] * project(X, "v", h);
      for (Eigen::Index i = 0; i < X.rows(); ++i)
        for (int c = 0; c < d; ++c)
          for (int e = 0; e < dh; ++e) out(i, c) += a(i, e) * at3("o", c, h, e);
    }
    return out;
  }
  const std::vector<double>& vals(const std::string& name) const { return t.at(name).values; }
};

MatrixXd three_tokens() {
  MatrixXd X(3, 4);
  X << 0.5, -1.0, 0.25, 0.75,  //
      -0.5, 0.25, 1.0, -0.25,  //
      1.0, 0.5, -0.75, 0.125;
  return X;
}

}  // namespace

TEST_CASE("T5 buckets at their boundaries (exact integer form)", "[checkpoint][hf][t5]") {
  const auto b = [](long delta) { return t5_bucket(delta, 32, 128); };
  // Keys before the query (Δ ≤ 0): 0..7 exact, then logarithmic up to 15.
  for (long a = 0; a <= 7; ++a) CHECK(b(-a) == a);
  for (long a = 8; a <= 11; ++a) CHECK(b(-a) == 8);
  for (long a = 12; a <= 15; ++a) CHECK(b(-a) == 9);
  for (long a = 16; a <= 22; ++a) CHECK(b(-a) == 10);
  for (long a = 23; a <= 31; ++a) CHECK(b(-a) == 11);
  CHECK(b(-32) == 12);
  CHECK(b(-64) == 14);
  CHECK(b(-90) == 14);
  CHECK(b(-91) == 15);
  CHECK(b(-128) == 15);
  CHECK(b(-100000) == 15);
  // Keys after it: the same, offset by 16.
  for (long a = 1; a <= 7; ++a) CHECK(b(a) == 16 + a);
  for (long a = 8; a <= 11; ++a) CHECK(b(a) == 24);
  CHECK(b(16) == 26);
  CHECK(b(32) == 28);
  CHECK(b(64) == 30);
  CHECK(b(90) == 30);
  CHECK(b(91) == 31);
  CHECK(b(100000) == 31);
  // Where a float32 or double logarithm lands one bucket off: exact k = 3
  // (nb 34: me 8, bucket 11), k = 5 (exact 5.9999995; nb 30: me 7, bucket 12),
  // k = 4 (nb 32, md 50: bucket 12).
  CHECK(t5_bucket(-12, 34, 27) == 11);
  CHECK(t5_bucket(12, 34, 27) == 17 + 11);
  CHECK(t5_bucket(-206, 30, 636) == 12);
  CHECK(t5_bucket(206, 30, 636) == 15 + 12);
  CHECK(t5_bucket(-20, 32, 50) == 12);
  CHECK(t5_bucket(20, 32, 50) == 16 + 12);
  CHECK(t5_bucket(-19, 32, 50) == 11);
  // me = ⌊⌊nb/2⌋/2⌋ < 1 and md ≤ me are refused.
  CHECK_THROWS_AS(t5_bucket(0, 3, 128), std::invalid_argument);
  CHECK(t5_bucket(-1, 4, 128) == 1);  // me = 1: the smallest table
  CHECK_THROWS_AS(t5_bucket(0, 32, 8), std::invalid_argument);
  CHECK(t5_bucket(-9, 32, 9) == 15);  // md = me + 1
}

TEST_CASE("XLNet: relative shift, r_w, r_r and the cancelling segment term, by hand", "[checkpoint][hf][xlnet]") {
  const MatrixXd X = three_tokens();
  for (const int clamp : {-1, 1}) {
    CAPTURE(clamp);
    const XlnetHand hand(clamp);
    const std::string dir = fresh("xlnet_hand_" + std::to_string(clamp + 1));
    hand.write(dir, clamp > 0 ? "transformer." : "");  // both prefixes load
    const Model m = load_model(dir);
    CHECK(m.arch().xlnet_relative);
    CHECK(m.arch().clamp_len == std::max(clamp, 0));
    CHECK(m.arch().variant == Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none});
    CHECK(m.embeddings()->kind == Layout::xlnet);
    // SAN: X^1 = Attn(X), P from the raw tensors.
    const ForwardTrace<double> t = forward<double>(m, Variant::san(), X);
    std::vector<MatrixXd> P;
    for (int h = 0; h < XlnetHand::H; ++h) {
      CAPTURE(h);
      P.push_back(softmax_rows(hand.logits(X, h, clamp)));
      test::require_matrix_near<double>(t.P[0][std::size_t(h)], P.back(), 32);
    }
    test::require_matrix_near<double>(t.X[1], hand.attention(X, P), 64);
    if (clamp > 0) {
      // Clamping changes p = ±2 (entries (2, 0) and (0, 2)) and nothing else.
      const MatrixXd unclamped = softmax_rows(hand.logits(X, 0, 0));
      CHECK(std::abs(unclamped(2, 0) - P[0](2, 0)) > 1e-9);
      CHECK(std::abs(unclamped(1, 0) - P[0](1, 0)) == 0.0);  // row 1 has |p| ≤ 1 only
    }
    // As trained: Z = LN_1(X + Attn(X)), X' = LN_2(Z + f(Z)), f = gelu(Z W_1ᵀ + b_1) W_2ᵀ + b_2.
    const auto v = [&](const std::string& k) { return hand.vals(k); };
    const MatrixXd Z = layer_norm_rows(X + hand.attention(X, P), v("layer.0.rel_attn.layer_norm.weight"),
                                       v("layer.0.rel_attn.layer_norm.bias"), 1e-12);
    MatrixXd F = linear(Z, hand.t.at("layer.0.ff.layer_1.weight"), &hand.t.at("layer.0.ff.layer_1.bias"));
    F = F.unaryExpr([](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); });
    F = linear(F, hand.t.at("layer.0.ff.layer_2.weight"), &hand.t.at("layer.0.ff.layer_2.bias"));
    const MatrixXd Y =
        layer_norm_rows(Z + F, v("layer.0.ff.layer_norm.weight"), v("layer.0.ff.layer_norm.bias"), 1e-12);
    test::require_matrix_near<double>(forward<double>(m, m.arch().variant, X).X[1], Y, 512);
  }
  // attn_type "uni": the same logits under the causal mask.
  const XlnetHand hand(-1, "uni");
  const std::string dir = fresh("xlnet_hand_uni");
  hand.write(dir);
  const Model m = load_model(dir);
  CHECK(m.arch().variant.mask == MaskKind::causal);
  const ForwardTrace<double> t = forward<double>(m, m.arch().variant, X);
  for (int h = 0; h < XlnetHand::H; ++h) {
    const MatrixXd A = hand.logits(X, h, 0);
    const MatrixXd& Ph = t.P[0][std::size_t(h)];
    CHECK(Ph(0, 0) == 1.0);
    CHECK(Ph(0, 1) == 0.0);
    CHECK(Ph(1, 2) == 0.0);
    const MatrixXd row1 = softmax_rows(A.block(1, 0, 1, 2));
    CHECK(Ph(1, 0) == Approx(row1(0, 0)).epsilon(1e-14));
    test::require_matrix_near<double>(Ph.row(2), softmax_rows(A.row(2)), 32);
  }
}

TEST_CASE("T5: bucket bias added to unscaled logits, by hand", "[checkpoint][hf][t5]") {
  // d = 4, H = 2, d_kv = 3 (H·d_kv = 6 ≠ d), nb = 8, md = 3, n = 4: every bucket is used.
  const int d = 4, H = 2, dkv = 3, ff = 5, nb = 8, md = 3;
  const std::map<long, int> bucket = {{-3, 3}, {-2, 2}, {-1, 1}, {0, 0}, {1, 5}, {2, 6}, {3, 7}};
  for (const auto& [delta, k] : bucket) CHECK(t5_bucket(delta, nb, md) == k);
  Gen g{std::mt19937_64(5), false};
  std::map<std::string, Tensor> t;
  const auto put = [&](Tensor x) { t[x.name] = std::move(x); };
  const std::string p = "encoder.block.0.";
  for (const char* k : {"q", "k", "v"}) put(raw(p + "layer.0.SelfAttention." + k + ".weight", {H * dkv, d}, g));
  put(raw(p + "layer.0.SelfAttention.o.weight", {d, H * dkv}, g));
  put(raw(kT5Bias, {nb, H}, g));
  for (double& x : t.at(kT5Bias).values) x *= 3;  // a bias that moves the softmax
  put(raw(p + "layer.0.layer_norm.weight", {d}, g));
  put(raw(p + "layer.1.DenseReluDense.wi.weight", {ff, d}, g));
  put(raw(p + "layer.1.DenseReluDense.wo.weight", {d, ff}, g));
  put(raw(p + "layer.1.layer_norm.weight", {d}, g));
  put(raw("encoder.final_layer_norm.weight", {d}, g));
  put(raw("shared.weight", {10, d}, g));
  std::vector<Tensor> ts;
  for (const auto& kv : t) ts.push_back(kv.second);
  const json config = {{"model_type", "t5"}, {"architectures", {"T5EncoderModel"}}, {"d_model", d}, {"num_heads", H},
                       {"d_kv", dkv}, {"num_layers", 1}, {"d_ff", ff}, {"relative_attention_num_buckets", nb},
                       {"relative_attention_max_distance", md}, {"layer_norm_epsilon", 1e-6},
                       {"feed_forward_proj", "relu"}, {"is_decoder", false}, {"vocab_size", 10}};
  const std::string dir = fresh("t5_hand");
  write_folder(dir, ts, config);
  const Model m = load_model(dir);
  CHECK(m.arch().rel_buckets == nb);
  CHECK(m.arch().rel_max_distance == md);
  CHECK(m.arch().score_scale_base == 1.0);
  CHECK(m.arch().variant == Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none});
  CHECK(m.embeddings()->kind == Layout::t5);

  MatrixXd X(4, 4);
  X << 0.5, -1.0, 0.25, 0.75,  //
      -0.5, 0.25, 1.0, -0.25,  //
      1.0, 0.5, -0.75, 0.125,  //
      0.25, 0.0, 0.5, -1.0;
  // Head h: rows [h·d_kv, (h+1)·d_kv) of q, k, v; columns of o.
  const auto head = [&](const MatrixXd& Y, const char* k, int h) {
    return MatrixXd(linear(Y, t.at(p + "layer.0.SelfAttention." + k + ".weight")).middleCols(h * dkv, dkv));
  };
  const Tensor& T = t.at(kT5Bias);
  const auto attention = [&](const MatrixXd& Y, std::vector<MatrixXd>& P) {
    MatrixXd heads(Y.rows(), H * dkv);
    for (int h = 0; h < H; ++h) {
      MatrixXd A = head(Y, "q", h) * head(Y, "k", h).transpose();  // no 1/√d_kv
      for (Eigen::Index i = 0; i < A.rows(); ++i)
        for (Eigen::Index j = 0; j < A.cols(); ++j)
          A(i, j) += T.values[std::size_t(bucket.at(long(j - i)) * H + h)];  // B_h[i, j] = T[bucket(j − i), h]
      P.push_back(softmax_rows(A));
      heads.middleCols(h * dkv, dkv) = P.back() * head(Y, "v", h);
    }
    return linear(heads, t.at(p + "layer.0.SelfAttention.o.weight"));
  };
  std::vector<MatrixXd> P;
  const MatrixXd san = attention(X, P);
  const ForwardTrace<double> tr = forward<double>(m, Variant::san(), X);
  for (int h = 0; h < H; ++h) {
    CAPTURE(h);
    test::require_matrix_near<double>(tr.P[0][std::size_t(h)], P[std::size_t(h)], 32);
  }
  test::require_matrix_near<double>(tr.X[1], san, 64);
  // As trained: Z = X + Attn(RMS_1 X), X' = Z + relu(RMS_2(Z) W_iᵀ) W_oᵀ.
  std::vector<MatrixXd> P1;
  const MatrixXd Z = X + attention(rms_rows(X, t.at(p + "layer.0.layer_norm.weight").values, 1e-6), P1);
  MatrixXd F = linear(rms_rows(Z, t.at(p + "layer.1.layer_norm.weight").values, 1e-6),
                      t.at(p + "layer.1.DenseReluDense.wi.weight"));
  F = F.cwiseMax(0.0);
  const MatrixXd Y = Z + linear(F, t.at(p + "layer.1.DenseReluDense.wo.weight"));
  test::require_matrix_near<double>(forward<double>(m, m.arch().variant, X).X[1], Y, 256);
}

namespace {

RandomModelSpec t5_spec(std::uint64_t seed) {
  RandomModelSpec s;
  s.arch.layers = 3;
  s.arch.heads = 2;
  s.arch.d_model = 8;
  s.arch.d_qk = s.arch.d_v = 3;  // H·d_kv = 6 ≠ d
  s.arch.d_ff = 12;
  s.arch.activation = Activation::relu;
  s.arch.ln_eps = 1e-6;
  s.std = 0.5;
  s.seed = seed;
  s.vocab = 20;
  return s;
}

RandomModelSpec xlnet_spec(std::uint64_t seed) {
  RandomModelSpec s;
  s.arch.layers = 2;
  s.arch.heads = 2;
  s.arch.d_model = 8;
  s.arch.d_qk = s.arch.d_v = 4;
  s.arch.d_ff = 10;
  s.arch.activation = Activation::gelu;
  s.arch.ln_eps = 1e-12;
  s.std = 0.5;
  s.seed = seed;
  s.vocab = 20;
  return s;
}

Model random_in(Layout layout, RandomModelSpec s, const FamilyOptions& o) {
  family_structure(layout, s, o);
  return random_model(s);
}

/// The family fields and weights the shared helpers do not compare.
void require_same_relative(const Model& x, const Model& y) {
  const Architecture &a = x.arch(), &b = y.arch();
  CHECK(a.rel_buckets == b.rel_buckets);
  CHECK(a.rel_max_distance == b.rel_max_distance);
  CHECK(a.score_scale_base == b.score_scale_base);
  CHECK(a.xlnet_relative == b.xlnet_relative);
  CHECK(a.clamp_len == b.clamp_len);
  CHECK(a.own_norm_placement_only == b.own_norm_placement_only);
  for (int l = 0; l < a.layers; ++l) {
    const std::string p = "layer " + std::to_string(l) + " ";
    require_same(x.layer(l).pos_bias, y.layer(l).pos_bias, p + "pos_bias");
    for (int h = 0; h < a.heads; ++h) {
      const HeadWeights &u = x.layer(l).heads[std::size_t(h)], &v = y.layer(l).heads[std::size_t(h)];
      const std::string q = p + "head " + std::to_string(h) + " ";
      require_same(u.W_R, v.W_R, q + "W_R");
      require_same(u.r_w, v.r_w, q + "r_w");
      require_same(u.r_r, v.r_r, q + "r_r");
    }
  }
}

Matrix<double> last_layer(const Model& m, const std::vector<long>& ids) {
  return forward<double>(m, m.arch().variant, make_input<double>(m, InputSpec::from_tokens(ids))).X.back();
}

void require_round_trip(const Model& m, Layout layout, const std::string& name) {
  const std::string dir = fresh(name);
  save_hf(m, dir, layout, "F64");
  const Model b = load_model(dir);
  require_same_arch(b.arch(), m.arch());
  require_same_relative(b, m);
  require_same_layers(b, m);
  require_same_embeddings(b, m);
  const std::vector<long> ids = {3, 0, 19, 7, 7, 1, 12};
  const Matrix<double> X = last_layer(m, ids);
  require_same(last_layer(b, ids), X, "X^L");
  LoadOptions o;
  o.layers = LoadOptions::Layers::streamed;
  const Model s = load_model(dir, o);
  REQUIRE(s.streamed());
  require_same(last_layer(s, ids), X, "X^L, streamed");
  o.layers = LoadOptions::Layers::resident;
  o.first_layers = 1;
  const Model first = load_model(dir, o);
  REQUIRE(first.arch().layers == 1);
  require_same(first.layer(0).pos_bias, m.layer(0).pos_bias, "first layer pos_bias");
  require_same(first.layer(0).heads[1].W_R, m.layer(0).heads[1].W_R, "first layer W_R");
}

}  // namespace

TEST_CASE("T5 and XLNet round trips are bit-identical (F64)", "[checkpoint][hf]") {
  SECTION("t5, relu, nb 16, md 40") {
    FamilyOptions o;
    o.rel_buckets = 16;
    o.rel_max_distance = 40;
    const Model m = random_in(Layout::t5, t5_spec(3), o);
    CHECK(!m.arch().gated_mlp);
    CHECK(m.arch().activation == Activation::relu);
    require_round_trip(m, Layout::t5, "t5_round_relu");
    CHECK(read_json(tmp_path("t5_round_relu") + "/config.json").at("feed_forward_proj") == "relu");
  }
  SECTION("t5, gated-gelu, defaults 32 / 128") {
    FamilyOptions o;
    o.gated = true;
    const Model m = random_in(Layout::t5, t5_spec(4), o);
    CHECK(m.arch().gated_mlp);
    CHECK(m.arch().activation == Activation::gelu_tanh);
    CHECK(m.arch().rel_buckets == 32);
    CHECK(m.arch().rel_max_distance == 128);
    require_round_trip(m, Layout::t5, "t5_round_gated");
    const json c = read_json(tmp_path("t5_round_gated") + "/config.json");
    CHECK(c.at("feed_forward_proj") == "gated-gelu");
    CHECK(c.at("dense_act_fn") == "gelu_new");
    CHECK(c.at("is_gated_act") == true);
  }
  SECTION("xlnet, bi") {
    const Model m = random_in(Layout::xlnet, xlnet_spec(5), FamilyOptions{});
    CHECK(m.arch().variant.mask == MaskKind::none);
    require_round_trip(m, Layout::xlnet, "xlnet_round_bi");
    const json c = read_json(tmp_path("xlnet_round_bi") + "/config.json");
    CHECK(c.at("attn_type") == "bi");
    CHECK(c.at("clamp_len") == -1);
  }
  SECTION("xlnet, uni, clamp_len 2") {
    FamilyOptions o;
    o.causal = true;
    o.clamp_len = 2;
    RandomModelSpec s = xlnet_spec(6);
    s.arch.activation = Activation::silu;
    const Model m = random_in(Layout::xlnet, s, o);
    CHECK(m.arch().variant.mask == MaskKind::causal);
    CHECK(m.arch().clamp_len == 2);
    require_round_trip(m, Layout::xlnet, "xlnet_round_uni");
    const json c = read_json(tmp_path("xlnet_round_uni") + "/config.json");
    CHECK(c.at("attn_type") == "uni");
    CHECK(c.at("clamp_len") == 2);
    CHECK(c.at("ff_activation") == "silu");
    const auto f = SafetensorsFile::read(tmp_path("xlnet_round_uni") + "/model.safetensors");
    CHECK(f.at("layer.1.rel_attn.q").shape == std::vector<std::int64_t>{8, 2, 4});
    CHECK(f.at("mask_emb").shape == std::vector<std::int64_t>{1, 1, 8});
    // W_Q^h = q[:, h, :], W_O^h = o[:, h, :]ᵀ.
    const HeadWeights& hw = m.layer(1).heads[1];
    const Tensor &q = f.at("layer.1.rel_attn.q"), &ot = f.at("layer.1.rel_attn.o");
    for (int a = 0; a < 8; ++a)
      for (int e = 0; e < 4; ++e) {
        CAPTURE(a, e);
        CHECK(hw.W_Q(a, e) == q.values[std::size_t((a * 2 + 1) * 4 + e)]);
        CHECK(hw.W_O(e, a) == ot.values[std::size_t((a * 2 + 1) * 4 + e)]);
      }
  }
}

TEST_CASE("T5: the encoder of a T5ForConditionalGeneration file; either copy of the token table",
          "[checkpoint][hf][t5]") {
  const Model m = random_in(Layout::t5, t5_spec(8), FamilyOptions{});
  const std::string dir = fresh("t5_conditional");
  save_hf(m, dir, Layout::t5);
  // The encoder-decoder file: decoder.* tensors (a bias table of its own),
  // lm_head and both copies of the tied table.
  json c = read_json(dir + "/config.json");
  c["architectures"] = {"T5ForConditionalGeneration"};
  c["is_encoder_decoder"] = true;
  c["num_decoder_layers"] = 2;
  write_json(dir + "/config.json", c);
  edit_tensors(dir + "/model.safetensors", [](std::vector<Tensor>& ts) {
    Gen g{std::mt19937_64(9), false};
    ts.push_back(raw("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", {32, 2}, g));
    ts.push_back(raw("decoder.block.0.layer.0.SelfAttention.q.weight", {6, 8}, g));
    ts.push_back(raw("decoder.block.0.layer.1.EncDecAttention.q.weight", {6, 8}, g));
    ts.push_back(raw("decoder.block.1.layer.2.DenseReluDense.wi.weight", {12, 8}, g));
    ts.push_back(raw("decoder.final_layer_norm.weight", {8}, g));
    ts.push_back(raw("decoder.embed_tokens.weight", {20, 8}, g));
    ts.push_back(raw("lm_head.weight", {20, 8}, g));
    for (const Tensor& t : std::vector<Tensor>(ts))
      if (t.name == "shared.weight") {
        ts.push_back(t);
        ts.back().name = "encoder.embed_tokens.weight";
      }
  });
  const Model both = load_model(dir);
  require_same_arch(both.arch(), m.arch());
  require_same_relative(both, m);
  require_same_layers(both, m);
  require_same_embeddings(both, m);

  // shared.weight alone (what save_hf writes) and encoder.embed_tokens.weight alone.
  for (const std::string keep : {"shared.weight", "encoder.embed_tokens.weight"}) {
    CAPTURE(keep);
    const std::string drop = keep == "shared.weight" ? "encoder.embed_tokens.weight" : "shared.weight";
    edit_tensors(dir + "/model.safetensors", [&](std::vector<Tensor>& ts) {
      if (std::none_of(ts.begin(), ts.end(), [&](const Tensor& t) { return t.name == keep; }))
        for (const Tensor& t : std::vector<Tensor>(ts))
          if (t.name == drop) {
            ts.push_back(t);
            ts.back().name = keep;
          }
      ts.erase(std::remove_if(ts.begin(), ts.end(), [&](const Tensor& t) { return t.name == drop; }), ts.end());
    });
    const Model one = load_model(dir);
    require_same_embeddings(one, m);
    require_same_layers(one, m);
  }
}

TEST_CASE("T5 and XLNet refusals name config.json and the key", "[checkpoint][hf]") {
  SECTION("t5") {
    const Model m = random_in(Layout::t5, t5_spec(10), FamilyOptions{});
    const std::string dir = fresh("t5_refusals");
    save_hf(m, dir, Layout::t5);
    const std::string cfg = dir + "/config.json";
    const json good = read_json(cfg);
    const auto refused = [&](const json& edit, const std::string& key, std::initializer_list<std::string> parts = {}) {
      json c = good;
      c.merge_patch(edit);
      write_json(cfg, c);
      require_error([&] { load_model(dir); }, cfg, key, parts);
      write_json(cfg, good);
    };
    refused({{"is_decoder", true}}, "is_decoder");
    refused({{"feed_forward_proj", "gated-foo"}}, "feed_forward_proj", {"foo"});
    refused({{"feed_forward_proj", "swish"}}, "feed_forward_proj");
    refused({{"feed_forward_proj", "relu-gated"}}, "feed_forward_proj");
    refused({{"feed_forward_proj", "gated-gelu"}, {"dense_act_fn", "gelu"}, {"is_gated_act", true}}, "dense_act_fn",
            {"gelu_new"});
    refused({{"feed_forward_proj", "gelu"}}, "dense_act_fn");  // the saved dense_act_fn is relu
    refused({{"is_gated_act", true}}, "is_gated_act");
    refused({{"relative_attention_num_buckets", 3}}, "relative_attention_num_buckets");
    refused({{"relative_attention_max_distance", 8}}, "relative_attention_max_distance");
    // Without the saved derivations, "gated-gelu" needs wi_0 and wi_1.
    json c = good;
    c.erase("dense_act_fn");
    c.erase("is_gated_act");
    c["feed_forward_proj"] = "gated-gelu";
    write_json(cfg, c);
    require_error([&] { load_model(dir); }, dir + "/model.safetensors", "tensors", {"wi_0"});
    write_json(cfg, good);
    // Block 0's bias table missing.
    edit_tensors(dir + "/model.safetensors", [](std::vector<Tensor>& ts) {
      ts.erase(std::remove_if(ts.begin(), ts.end(), [](const Tensor& t) { return t.name == kT5Bias; }), ts.end());
    });
    require_error([&] { load_model(dir); }, dir + "/model.safetensors", kT5Bias, {"missing"});
  }
  SECTION("xlnet") {
    const Model m = random_in(Layout::xlnet, xlnet_spec(11), FamilyOptions{});
    const std::string dir = fresh("xlnet_refusals");
    save_hf(m, dir, Layout::xlnet);
    const std::string cfg = dir + "/config.json";
    const json good = read_json(cfg);
    const auto refused = [&](const json& edit, const std::string& key) {
      json c = good;
      c.merge_patch(edit);
      write_json(cfg, c);
      require_error([&] { load_model(dir); }, cfg, key);
      write_json(cfg, good);
    };
    refused({{"attn_type", "xyz"}}, "attn_type");
    refused({{"bi_data", true}}, "bi_data");
    refused({{"d_head", 2}}, "d_head");
    refused({{"same_length", true}, {"attn_type", "uni"}}, "same_length");
    refused({{"d_model", 7}, {"n_head", 1}, {"d_head", 7}}, "d_model");
    refused({{"d_model", 6}, {"n_head", 4}}, "d_model");
    refused({{"ff_activation", "tanh"}}, "ff_activation");
    refused({{"clamp_len", 1.5}}, "clamp_len");
    // same_length with "bi" has no effect: loads.
    json c = good;
    c["same_length"] = true;
    write_json(cfg, c);
    CHECK(load_model(dir).arch().variant.mask == MaskKind::none);
  }
  SECTION("writers and structures") {
    // A T5 model whose layers' bias tables differ cannot be stored (block 0's only).
    const Model m = random_in(Layout::t5, t5_spec(12), FamilyOptions{});
    std::vector<LayerWeights> layers = m.layers();
    layers[1].pos_bias(0, 0) += 1;
    const Model odd(m.arch(), layers, m.embeddings(), "odd");
    const std::string dir = fresh("t5_refused_writer");
    require_error([&] { save_hf(odd, dir, Layout::t5); }, dir, "layer 1 pos_bias");
    // A gated MLP with erf gelu has no feed_forward_proj ("gated-gelu" is the tanh form).
    RandomModelSpec s = t5_spec(13);
    FamilyOptions gated;
    gated.gated = true;
    family_structure(Layout::t5, s, gated);
    s.arch.activation = Activation::gelu;
    require_error([&] { save_hf(random_model(s), dir, Layout::t5); }, dir, "activation");
    // Each layout refuses the other's models.
    require_error([&] { save_hf(m, dir, Layout::xlnet); }, dir, "xlnet_relative");
    require_error([&] { save_hf(random_in(Layout::xlnet, xlnet_spec(14), {}), dir, Layout::t5); }, dir, "rel_buckets");
    // Options: values the models would refuse.
    const auto option_error = [](Layout l, const FamilyOptions& o, const std::string& option) {
      RandomModelSpec spec = l == Layout::t5 ? t5_spec(1) : xlnet_spec(1);
      const std::string msg = [&] {
        try {
          family_structure(l, spec, o);
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
        return std::string();
      }();
      CAPTURE(msg, option);
      CHECK(msg.rfind(option + ":", 0) == 0);
    };
    FamilyOptions o;
    o.rel_buckets = 3;
    option_error(Layout::t5, o, "rel_buckets");
    o.rel_buckets = 32;
    o.rel_max_distance = 8;
    option_error(Layout::t5, o, "rel_max_distance");
    FamilyOptions x;
    x.clamp_len = -1;
    option_error(Layout::xlnet, x, "clamp_len");
    FamilyOptions wrong;
    wrong.rel_buckets = 32;
    option_error(Layout::xlnet, wrong, "rel_buckets");
  }
}

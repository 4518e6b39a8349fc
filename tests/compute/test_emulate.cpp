// The emulated formats (compute/emulate.hpp, math.md §9). Expected values
// come from arithmetic worked out by hand (roundings, products, a one-layer
// model) and from an independent step-by-step pass written here from the
// rules alone: naive loops, its own rounding (scaling and nearbyint, and for
// fp16 also GCC's _Float16 conversion), its own fmaf chains. One piece (over
// 600 lines): that reference and the cases that compare against it.
#include "support/helpers.hpp"
#include "support/llama_helpers.hpp"

#include "sanpath/compute/emulate.hpp"
#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/model/random.hpp"

#include <cfenv>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

using namespace sanpath;
using MatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>;

namespace {

constexpr EmulatedFormat kFormats[] = {EmulatedFormat::fp32, EmulatedFormat::bf16, EmulatedFormat::fp16};

bool same_bits(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

/// Every entry the same double, bit for bit (NaN matches NaN); CAPTUREs the first difference.
void require_same_bits(const Matrix<double>& a, const Matrix<double>& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  for (Eigen::Index j = 0; j < a.cols(); ++j)
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      if (!same_bits(a(i, j), b(i, j))) {
        CAPTURE(i, j, a(i, j), b(i, j));
        REQUIRE(same_bits(a(i, j), b(i, j)));
      }
}

using sanpath::test::Restore;

// ---- an independent reference: rounding --------------------------------------------

/// rnd_F(x) without the library: fp32 by the cast; bf16 and fp16 by scaling
/// x to an integer significand of p bits (or the subnormal grid below 2^emin)
/// and nearbyint, in round-to-nearest-even.
double ref_round(double x, EmulatedFormat f) {
  const int mode = std::fegetround();
  std::fesetround(FE_TONEAREST);
  double y = x;
  if (f == EmulatedFormat::fp32) {
    y = static_cast<float>(x);
  } else if (std::isfinite(x) && x != 0) {
    const bool half = f == EmulatedFormat::fp16;
    const int p = half ? 11 : 8, emin = half ? -14 : -126;
    const double largest = half ? 65504.0 : 0x1.fep127;
    int e = 0;
    std::frexp(x, &e);                               // |x| in [2^(e−1), 2^e)
    const int q = std::max(e - 1, emin) - (p - 1);  // the unit in the last place at x
    y = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
    if (std::fabs(y) > largest) y = std::copysign(HUGE_VAL, x);
    if (y == 0) y = std::copysign(0.0, x);
  }
  std::fesetround(mode);
  return y;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__FLT16_MANT_DIG__)
/// fp16 by GCC's own conversion (libgcc's one rounding from double): a second
/// opinion on ref_round where the compiler has _Float16 (clang 14 has not).
bool has_compiler_fp16() { return true; }
double compiler_fp16(double x) { return static_cast<double>(static_cast<_Float16>(x)); }
#else
bool has_compiler_fp16() { return false; }
double compiler_fp16(double x) { return x; }
#endif

float rf(float x, EmulatedFormat f) { return static_cast<float>(ref_round(x, f)); }

// ---- an independent reference: the pass, step by step ---------------------------------

MatF ref_weights(const MatrixXd& W, EmulatedFormat f) {
  MatF out(W.rows(), W.cols());
  for (Eigen::Index i = 0; i < W.rows(); ++i)
    for (Eigen::Index j = 0; j < W.cols(); ++j) out(i, j) = static_cast<float>(ref_round(W(i, j), f));
  return out;
}

MatF ref_row(const VectorXd& v, EmulatedFormat f) { return ref_weights(v.transpose(), f); }

/// A·B: every entry an fmaf chain over p ascending from +0, rounded to F.
MatF ref_matmul(const MatF& A, const MatF& B, EmulatedFormat f) {
  MatF C(A.rows(), B.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < B.cols(); ++j) {
      float acc = 0.0f;
      for (Eigen::Index p = 0; p < A.cols(); ++p) acc = std::fmaf(A(i, p), B(p, j), acc);
      C(i, j) = rf(acc, f);
    }
  return C;
}

void ref_add_row(MatF& M, const MatF& b, EmulatedFormat f) {
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) M(i, j) = rf(M(i, j) + b(0, j), f);
}

MatF ref_norm(const Architecture& a, const MatF& X, const MatF& g, const MatF& b, EmulatedFormat f) {
  MatF Y(X.rows(), X.cols());
  const float d = static_cast<float>(X.cols()), eps = static_cast<float>(a.ln_eps);
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    if (a.norm == NormKind::rms) {
      float s = 0.0f;
      for (Eigen::Index j = 0; j < X.cols(); ++j) {
        const float sq = X(i, j) * X(i, j);
        s = s + sq;
      }
      const float ms = s / d;
      const float inv = 1.0f / std::sqrt(ms + eps);
      for (Eigen::Index j = 0; j < X.cols(); ++j) {
        const float gain = a.norm_unit_offset ? 1.0f + g(0, j) : g(0, j);
        const float t = X(i, j) * inv;
        Y(i, j) = rf(t * gain, f);
      }
      continue;
    }
    float s = 0.0f;
    for (Eigen::Index j = 0; j < X.cols(); ++j) s = s + X(i, j);
    const float mu = s / d;
    float v = 0.0f;
    for (Eigen::Index j = 0; j < X.cols(); ++j) {
      const float dj = X(i, j) - mu;
      const float sq = dj * dj;
      v = v + sq;
    }
    const float var = v / d;
    const float inv = 1.0f / std::sqrt(var + eps);
    for (Eigen::Index j = 0; j < X.cols(); ++j) {
      const float dj = X(i, j) - mu;
      const float t = dj * inv;
      const float tg = t * g(0, j);
      Y(i, j) = rf(tg + b(0, j), f);
    }
  }
  return Y;
}

float ref_act(float x, Activation act, EmulatedFormat f) {
  if (act == Activation::relu) return x > 0.0f ? x : 0.0f;
  const float half_x = 0.5f * x;
  if (act == Activation::gelu) {
    const float t = x * 0.70710678118654752440f;
    const float one_plus = 1.0f + static_cast<float>(std::erf(double(t)));
    return rf(half_x * one_plus, f);
  }
  if (act == Activation::gelu_tanh) {
    const float x2 = x * x;
    const float u = x2 * x;
    const float k = 0.044715f * u;
    const float in = 0.79788456080286535588f * (x + k);
    const float one_plus = 1.0f + static_cast<float>(std::tanh(double(in)));
    return rf(half_x * one_plus, f);
  }
  if (act == Activation::gelu_fast) {  // 0.5x(1 + tanh(x·0.7978845608·(1 + 0.044715·x·x))), HF's order
    const float kx = 0.044715f * x;
    const float kxx = kx * x;
    const float s = 1.0f + kxx;
    const float cx = x * 0.7978845608f;
    const float in = cx * s;
    const float one_plus = 1.0f + static_cast<float>(std::tanh(double(in)));
    return rf(half_x * one_plus, f);
  }
  const float den = 1.0f + static_cast<float>(std::exp(-double(x)));  // silu
  return rf(x / den, f);
}

struct RefTrace {
  std::vector<MatF> X;
  std::vector<std::vector<MatF>> P;
};

/// The pass of math.md §9 in naive loops, per head, from the model's doubles.
RefTrace ref_forward(const Model& model, const Variant& v, const MatrixXd& X0, EmulatedFormat f) {
  const Architecture& a = model.arch();
  const Eigen::Index n = X0.rows(), H = a.heads, dq = a.d_qk, dv = a.d_v, d = a.d_model;
  RefTrace t;
  t.X.push_back(ref_weights(X0, f));
  for (int l = 0; l < a.layers; ++l) {
    const LayerWeights& w = model.layer(l);
    const MatF& X = t.X.back();
    const bool pre = v.layernorm == LayerNormKind::pre, post = v.layernorm == LayerNormKind::post;
    MatF g1, b1n, g2, b2n;
    if (v.layernorm != LayerNormKind::none) {
      g1 = ref_row(w.ln1_g, f), b1n = ref_row(w.ln1_b, f), g2 = ref_row(w.ln2_g, f), b2n = ref_row(w.ln2_b, f);
    }
    const MatF In = pre ? ref_norm(a, X, g1, b1n, f) : X;
    // XLNet's sinusoid (2n − 1) × d, row r ↔ p = r − (n − 1), sin then cos halves.
    MatF Rsin;
    if (a.xlnet_relative) {
      Rsin.resize(2 * n - 1, d);
      for (Eigen::Index r = 0; r < 2 * n - 1; ++r)
        for (Eigen::Index k = 0; k < d / 2; ++k) {
          Eigen::Index p = r - (n - 1);
          if (a.clamp_len > 0) p = std::max<Eigen::Index>(-a.clamp_len, std::min<Eigen::Index>(a.clamp_len, p));
          const float freq = static_cast<float>(std::pow(10000.0, -2.0 * double(k) / double(d)));
          const float angle = static_cast<float>(p) * freq;
          Rsin(r, k) = rf(static_cast<float>(std::sin(double(angle))), f);
          Rsin(r, d / 2 + k) = rf(static_cast<float>(std::cos(double(angle))), f);
        }
    }
    const Eigen::Index window = a.window_applies(l) ? a.attention_window : 0;
    MatF concat(n, H * dv);
    t.P.emplace_back();
    for (Eigen::Index h = 0; h < H; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      MatF Q = ref_matmul(In, ref_weights(hw.W_Q, f), f), K = ref_matmul(In, ref_weights(hw.W_K, f), f),
           V = ref_matmul(In, ref_weights(hw.W_V, f), f);
      ref_add_row(Q, ref_row(hw.b_Q, f), f);
      ref_add_row(K, ref_row(hw.b_K, f), f);
      ref_add_row(V, ref_row(hw.b_V, f), f);
      if (a.rope_theta) {
        const Eigen::Index r = a.rotated_dims(), half = r / 2;  // the first r entries (partial rotary)
        for (MatF* M : {&Q, &K}) {
          const MatF R = *M;
          for (Eigen::Index p = 0; p < n; ++p)
            for (Eigen::Index i = 0; i < r; ++i) {
              const Eigen::Index k = i % half;
              const float inv = static_cast<float>(std::pow(*a.rope_theta, -2.0 * double(k) / double(r)));
              const float angle = static_cast<float>(p) * inv;
              const float c = rf(static_cast<float>(std::cos(double(angle))), f);
              const float s = rf(static_cast<float>(std::sin(double(angle))), f);
              const float rot = i < half ? -R(p, i + half) : R(p, i - half);
              (*M)(p, i) = rf(rf(R(p, i) * c, f) + rf(rot * s, f), f);
            }
        }
      }
      const double base = a.score_scale_base.value_or(double(dq));
      const float scale = static_cast<float>(base == 1.0 ? 1.0 : 1.0 / std::sqrt(base));
      MatF S;
      if (a.xlnet_relative) {  // (q + r_w)·k_j + (q + r_r)·(R(i − j) W_R), each product rounded, then their sum
        MatF Qw = Q, Qr = Q;
        ref_add_row(Qw, ref_row(hw.r_w, f), f);
        ref_add_row(Qr, ref_row(hw.r_r, f), f);
        S = ref_matmul(Qw, K.transpose(), f);
        const MatF B = ref_matmul(Qr, ref_matmul(Rsin, ref_weights(hw.W_R, f), f).transpose(), f);
        for (Eigen::Index i = 0; i < n; ++i)
          for (Eigen::Index j = 0; j < n; ++j) S(i, j) = rf(S(i, j) + B(i, i - j + n - 1), f);
      } else {
        S = ref_matmul(Q, K.transpose(), f);
      }
      if (a.rel_buckets > 0)  // T5's bias T[bucket(j − i), h], in F, added and rounded
        for (Eigen::Index i = 0; i < n; ++i)
          for (Eigen::Index j = 0; j < n; ++j) {
            const int b = t5_bucket(static_cast<long>(j - i), a.rel_buckets, a.rel_max_distance);
            S(i, j) = rf(S(i, j) + static_cast<float>(ref_round(w.pos_bias(b, h), f)), f);
          }
      MatF Ph = MatF::Zero(n, n);
      for (Eigen::Index i = 0; i < n; ++i) {
        const Eigen::Index last = v.mask == MaskKind::causal ? i + 1 : n;
        const Eigen::Index first = v.mask == MaskKind::causal && window > 0 ? std::max<Eigen::Index>(0, i - window + 1) : 0;
        std::vector<float> s, e;
        for (Eigen::Index j = first; j < last; ++j) {
          float x = rf(S(i, j) * scale, f);
          if (a.softcap) {  // c·tanh(x/c): the quotient, the tanh and the product each rounded to F
            const float c = static_cast<float>(*a.softcap);
            const float q = rf(x / c, f);
            const float t = rf(static_cast<float>(std::tanh(double(q))), f);
            x = rf(c * t, f);
          }
          s.push_back(x);
        }
        e.resize(s.size());
        float m = s[0];
        for (const float x : s) m = x > m ? x : m;
        float sum = 0.0f;
        for (std::size_t j = 0; j < s.size(); ++j) {
          const float diff = s[j] - m;
          e[j] = static_cast<float>(std::exp(double(diff)));
          sum = sum + e[j];
        }
        for (Eigen::Index j = first; j < last; ++j) Ph(i, j) = rf(e[std::size_t(j - first)] / sum, f);
      }
      concat.middleCols(h * dv, dv) = ref_matmul(Ph, V, f);
      t.P.back().push_back(Ph);
    }
    MatF WO(H * dv, d);
    for (Eigen::Index h = 0; h < H; ++h)
      WO.middleRows(h * dv, dv) = ref_weights(w.heads[static_cast<std::size_t>(h)].W_O, f);
    MatF Z = ref_matmul(concat, WO, f);
    ref_add_row(Z, ref_row(w.b_O, f), f);
    auto add = [&](MatF& A, const MatF& B) {
      for (Eigen::Index i = 0; i < A.size(); ++i) A.data()[i] = rf(A.data()[i] + B.data()[i], f);
    };
    auto mlp = [&](const MatF& Zin) {
      MatF Hd = ref_matmul(Zin, ref_weights(w.W_1, f), f);
      ref_add_row(Hd, ref_row(w.b_1, f), f);
      if (w.gated()) {
        const MatF G = ref_matmul(Zin, ref_weights(w.W_gate, f), f);
        for (Eigen::Index i = 0; i < Hd.size(); ++i)
          Hd.data()[i] = rf(ref_act(G.data()[i], a.activation, f) * Hd.data()[i], f);
      } else {
        for (Eigen::Index i = 0; i < Hd.size(); ++i) Hd.data()[i] = ref_act(Hd.data()[i], a.activation, f);
      }
      MatF Out = ref_matmul(Hd, ref_weights(w.W_2, f), f);
      ref_add_row(Out, ref_row(w.b_2, f), f);
      return Out;
    };
    // Gemma 2's sandwich norms: RMSNorm (gain 1 + w, no bias) of each sublayer's output.
    const bool sandwich = a.sandwich_norms && pre;
    const MatF zero = MatF::Zero(1, d);
    if (sandwich) Z = ref_norm(a, Z, ref_row(w.ln3_g, f), zero, f);
    if (a.parallel_residual) {  // (Attn + f) + X, each sum rounded
      if (v.mlp != MlpKind::none) add(Z, mlp(pre ? ref_norm(a, X, g2, b2n, f) : X));
      if (v.skip) add(Z, X);
      t.X.push_back(Z);
      continue;
    }
    if (v.skip) add(Z, X);
    if (post) Z = ref_norm(a, Z, g1, b1n, f);
    if (v.mlp == MlpKind::none) {
      t.X.push_back(Z);
      continue;
    }
    MatF Out = mlp(pre ? ref_norm(a, Z, g2, b2n, f) : Z);
    if (sandwich) Out = ref_norm(a, Out, ref_row(w.ln4_g, f), zero, f);
    if (v.mlp == MlpKind::residual) add(Out, Z);
    if (post) Out = ref_norm(a, Out, g2, b2n, f);
    t.X.push_back(Out);
  }
  return t;
}

/// A random model whose LayerNorm gains and biases are drawn too (random_model sets them to 1 and 0).
Model with_random_norms(const Model& m, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<LayerWeights> layers = m.layers();
  for (LayerWeights& w : layers)
    for (VectorXd* v : {&w.ln1_g, &w.ln2_g, &w.ln3_g, &w.ln4_g})  // ln3, ln4: sandwich norms, where present
      for (Eigen::Index j = 0; j < v->size(); ++j) (*v)(j) = 1.0 + 0.25 * rng.gaussian();
  if (m.arch().norm == NormKind::layer)
    for (LayerWeights& w : layers)
      for (VectorXd* v : {&w.ln1_b, &w.ln2_b})
        for (Eigen::Index j = 0; j < v->size(); ++j) (*v)(j) = 0.25 * rng.gaussian();
  return Model(m.arch(), layers, m.embeddings(), m.source());
}

/// Two heads, post-LayerNorm, skip, mlp residual; weights N(0, std²), biases N(0, bias_std²).
Model bert_like(Activation act, std::uint64_t seed, int layers = 2, int d = 8, int ff = 12, double std = 0.5,
                double bias_std = 0.3) {
  RandomModelSpec s;
  s.arch.layers = layers;
  s.arch.heads = 2;
  s.arch.d_model = d;
  s.arch.d_qk = s.arch.d_v = d / 2;
  s.arch.d_ff = ff;
  s.arch.variant = Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  s.arch.activation = act;
  s.arch.ln_eps = 1e-5;
  s.std = std;
  s.bias_std = bias_std;
  s.seed = seed;
  return with_random_norms(random_model(s), seed + 100);
}

MatrixXd input_of(int n, int d, std::uint64_t seed, double spread = 1.0) {
  RandomInputSpec r;
  r.n = n;
  r.d = d;
  r.seed = seed;
  r.spread = spread;
  return random_input(r);
}

/// emulate_forward against ref_forward, bit for bit, X and P.
void check_against_reference(const Model& m, const Variant& v, const MatrixXd& X0, EmulatedFormat f) {
  CAPTURE(to_string(f), to_string(v));
  const EmulatedTrace t = emulate_forward(m, v, X0, f, true);
  const RefTrace r = ref_forward(m, v, X0, f);
  REQUIRE(t.layers() == m.arch().layers);
  REQUIRE_FALSE(t.overflow);
  for (std::size_t l = 0; l < t.X.size(); ++l) {
    CAPTURE(l);
    require_same_bits(t.X[l], r.X[l].cast<double>());
  }
  for (std::size_t l = 0; l < t.P.size(); ++l)
    for (std::size_t h = 0; h < t.P[l].size(); ++h) {
      CAPTURE(l, h);
      require_same_bits(t.P[l][h], r.P[l][h].cast<double>());
    }
}

}  // namespace

// ---- formats and rounding ---------------------------------------------------------------

TEST_CASE("emulated formats: names") {
  for (const EmulatedFormat f : kFormats) CHECK(parse_emulated_format(to_string(f)) == f);
  CHECK(to_string(EmulatedFormat::bf16) == "bf16");
  try {
    parse_emulated_format("fp8");
    FAIL("fp8 was accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "emulate: 'fp8' is not one of fp32, bf16, fp16");
  }
}

TEST_CASE("rounding to fp32: ties to even, subnormals, overflow, NaN") {
  const auto r = [](double x) { return round_to_format(x, EmulatedFormat::fp32); };
  CHECK(r(1 + 0x1p-24) == 1.0);                   // a tie: 1 is even
  CHECK(r(1 + 3 * 0x1p-24) == 1 + 0x1p-22);       // a tie: 1 + 2^-23 is odd
  CHECK(r(1 + 0x1p-24 + 0x1p-50) == 1 + 0x1p-23); // above the tie
  CHECK(r(1.5 * 0x1p-149) == 0x1p-148);           // subnormal tie: 2^-148 is even
  CHECK(r(0x1p-150) == 0.0);                      // half the smallest subnormal: to 0
  CHECK(r(0x1p-150 + 0x1p-170) == 0x1p-149);
  CHECK(std::signbit(r(-0x1p-151)));              // a zero of the sign
  CHECK(r(0x1.fffffep127 + 0x1p103) == HUGE_VAL); // FLT_MAX + half an ulp: the tie overflows
  CHECK(r(0x1.fffffep127 + 0x1p102) == 0x1.fffffep127);
  CHECK(r(-1e300) == -HUGE_VAL);
  CHECK(std::isnan(r(std::nan(""))));
  CHECK(r(-HUGE_VAL) == -HUGE_VAL);
  CHECK(round_to_format(0.1f, EmulatedFormat::fp32) == 0.1f);  // the identity on floats
}

TEST_CASE("rounding to bf16: ties to even, subnormals, overflow, NaN") {
  const auto r = [](double x) { return round_to_format(x, EmulatedFormat::bf16); };
  const auto rf32 = [](float x) { return round_to_format(x, EmulatedFormat::bf16); };
  CHECK(r(1 + 0x1p-8) == 1.0);
  CHECK(r(1 + 3 * 0x1p-8) == 1 + 0x1p-6);
  CHECK(r(257.0) == 256.0);  // the unit at 256 is 2: 257 is a tie, 256 even
  CHECK(r(259.0) == 260.0);
  CHECK(r(1 + 0x1p-8 + 0x1p-40) == 1 + 0x1p-7);  // one rounding from double: the tail decides
  CHECK(r(0x1p-134) == 0.0);                     // half of bf16's smallest subnormal 2^-133
  CHECK(r(3 * 0x1p-134) == 0x1p-132);
  CHECK(r(5 * 0x1p-135) == 0x1p-133);
  CHECK(r(0x1.fep127) == 0x1.fep127);
  CHECK(r(0x1.fep127 + 0x1p119) == HUGE_VAL);  // the tie above the largest: even is 2^128
  CHECK(r(0x1.fep127 + 0x1p118) == 0x1.fep127);
  CHECK(std::isnan(r(std::nan(""))));
  CHECK(std::signbit(r(-0x1p-140)));
  // From float (bit arithmetic): the same cases where they are floats.
  CHECK(rf32(1 + 0x1p-8f) == 1.0f);
  CHECK(rf32(1 + 3 * 0x1p-8f) == 1 + 0x1p-6f);
  CHECK(rf32(0x1p-134f) == 0.0f);
  CHECK(rf32(3 * 0x1p-134f) == 0x1p-132f);
  CHECK(rf32(0x1.fep127f + 0x1p119f) == HUGE_VALF);
  CHECK(rf32(HUGE_VALF) == HUGE_VALF);
  CHECK(std::isnan(rf32(std::numeric_limits<float>::quiet_NaN())));
  float snan = std::numeric_limits<float>::signaling_NaN();
  CHECK(std::isnan(rf32(snan)));
  std::uint32_t u = 0x7f800001u;  // a NaN whose payload lies in the dropped half only
  std::memcpy(&snan, &u, sizeof snan);
  CHECK(std::isnan(rf32(snan)));
}

TEST_CASE("rounding to fp16: ties to even, subnormals, overflow, NaN") {
  const auto r = [](double x) { return round_to_format(x, EmulatedFormat::fp16); };
  CHECK(r(1 + 0x1p-11) == 1.0);
  CHECK(r(1 + 3 * 0x1p-11) == 1 + 0x1p-9);
  CHECK(r(65504.0) == 65504.0);
  CHECK(r(65519.0) == 65504.0);
  CHECK(r(65520.0) == HUGE_VAL);  // the tie above 65504 rounds to 2^16: overflow
  CHECK(r(-70000.0) == -HUGE_VAL);
  CHECK(r(0x1p-25) == 0.0);      // half the smallest subnormal 2^-24
  CHECK(r(3 * 0x1p-25) == 0x1p-23);
  CHECK(r(5 * 0x1p-26) == 0x1p-24);
  CHECK(r(0x1p-14 - 0x1p-25) == 0x1p-14);  // the tie between 1023·2^-24 (odd) and 2^-14
  CHECK(r(0x1p-14 - 0x1p-24) == 0x1p-14 - 0x1p-24);
  CHECK(std::signbit(r(-1e-10)));
  CHECK(std::isnan(r(std::nan(""))));
  CHECK(round_to_format(65520.0f, EmulatedFormat::fp16) == HUGE_VALF);
  CHECK(round_to_format(1 + 3 * 0x1p-11f, EmulatedFormat::fp16) == 1 + 0x1p-9f);
}

TEST_CASE("rounding: every format against an independent rounding, any rounding mode") {
  Restore restore;
  Rng rng(7);
  for (const EmulatedFormat f : kFormats)
    for (const int mode : {FE_TONEAREST, FE_UPWARD, FE_TOWARDZERO}) {
      CAPTURE(to_string(f), mode);
      for (int i = 0; i < 20000; ++i) {
        // Values over the whole range of the formats, subnormals and overflow included.
        const double x = (rng.uniform() - 0.5) * std::ldexp(1.0, static_cast<int>(rng.below(300)) - 160);
        const auto xf = static_cast<float>(x);
        std::fesetround(mode);
        const double got = round_to_format(x, f);
        const float gotf = round_to_format(xf, f);
        std::fesetround(FE_TONEAREST);
        CAPTURE(x);
        REQUIRE(same_bits(got, ref_round(x, f)));
        REQUIRE(same_bits(gotf, ref_round(xf, f)));
        if (f == EmulatedFormat::fp16 && has_compiler_fp16()) REQUIRE(same_bits(got, compiler_fp16(x)));
      }
    }
}

// ---- products -------------------------------------------------------------------------------

TEST_CASE("emulated product: one fmaf chain in increasing p from +0, rounded once") {
  // (1 + 2^-12)² = 1 + 2^-11 + 2^-24 is not a float. In order p = 0, 1 the
  // chain is −(1 + 2^-11), then fmaf adds the exact square: 2^-24. A product
  // rounded before the sum, or the reverse order, gives 0.
  Matrix<double> A(1, 2), B(2, 1);
  A << 1, 1 + 0x1p-12;
  B << -(1 + 0x1p-11), 1 + 0x1p-12;
  CHECK(emulated_product(A, B, EmulatedFormat::fp32)(0, 0) == 0x1p-24);
  // bf16 operands accumulated in fp32: (1 + 2^-7)² − (1 + 2^-6) = 2^-14.
  A << 1, 1 + 0x1p-7;
  B << -(1 + 0x1p-6), 1 + 0x1p-7;
  CHECK(emulated_product(A, B, EmulatedFormat::bf16)(0, 0) == 0x1p-14);
  // One rounding to bf16 at the end: 1 + 2^-8 + 2^-9 is three quarters of
  // bf16's unit above 1, so 1 + 2^-7; rounding after every step would give 1.
  Matrix<double> a(1, 3), b(3, 1);
  a << 1, 0x1p-8, 0x1p-9;
  b << 1, 1, 1;
  CHECK(emulated_product(a, b, EmulatedFormat::bf16)(0, 0) == 1 + 0x1p-7);
  // Catastrophic order: 2^24 + 1 is a tie in fp32 (to 2^24), then − 2^24: 0, not 1.
  a << 0x1p24, 1, -0x1p24;
  CHECK(emulated_product(a, b, EmulatedFormat::fp32)(0, 0) == 0.0);
  // The operands are rounded to F first: 1 + 2^-9 is 1 in bf16.
  a << 1 + 0x1p-9, 0, 0;
  CHECK(emulated_product(a, b, EmulatedFormat::bf16)(0, 0) == 1.0);
  // fp16: 300 · 300 = 90000 overflows, fp32 keeps it.
  Matrix<double> c(1, 1), e(1, 1);
  c << 300;
  e << 300;
  CHECK(emulated_product(c, e, EmulatedFormat::fp16)(0, 0) == HUGE_VAL);
  CHECK(emulated_product(c, e, EmulatedFormat::fp32)(0, 0) == 90000.0);
  CHECK_THROWS_AS(emulated_product(a, a, EmulatedFormat::fp32), std::invalid_argument);
#if defined(__x86_64__)
  // Subnormals are kept even when the caller flushes them (MXCSR FTZ and DAZ on):
  // 2^-140 · 2^-1 = 2^-141, a binary32 subnormal, and 2^-141 · 2 = 2^-140.
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);
  c << 0x1p-140;
  e << 0.5;
  const double tiny = emulated_product(c, e, EmulatedFormat::fp32)(0, 0);
  c << 0x1p-141;
  e << 2;
  const double back = emulated_product(c, e, EmulatedFormat::fp32)(0, 0);
  const unsigned after = _mm_getcsr();
  _mm_setcsr(csr);
  CHECK(tiny == 0x1p-141);
  CHECK(back == 0x1p-140);
  CHECK((after & 0x8040u) == 0x8040u);  // the caller's flags are back
#endif
}

TEST_CASE("emulated product: every instruction-set level and thread count, against the chain") {
  Restore restore;
  Rng rng(11);
  // Edge tiles of every microkernel, inner blocks beyond 256, and sizes that split across threads.
  const Eigen::Index shapes[][3] = {{1, 1, 1}, {7, 300, 5}, {49, 33, 17}, {97, 513, 131}, {130, 260, 300}};
  for (const auto& s : shapes) {
    Matrix<double> A(s[0], s[1]), B(s[1], s[2]);
    for (Eigen::Index i = 0; i < A.size(); ++i) A.data()[i] = rng.gaussian() * std::ldexp(1.0, int(rng.below(20)) - 10);
    for (Eigen::Index i = 0; i < B.size(); ++i) B.data()[i] = rng.gaussian();
    for (const EmulatedFormat f : kFormats) {
      MatF Af(A.rows(), A.cols()), Bf(B.rows(), B.cols());
      for (Eigen::Index i = 0; i < A.size(); ++i) Af.data()[i] = static_cast<float>(ref_round(A.data()[i], f));
      for (Eigen::Index i = 0; i < B.size(); ++i) Bf.data()[i] = static_cast<float>(ref_round(B.data()[i], f));
      const Matrix<double> want = ref_matmul(Af, Bf, f).cast<double>();
      for (const std::string& level : supported_double_products_isas())
        for (const int threads : {1, 0}) {
          CAPTURE(s[0], s[1], s[2], to_string(f), level, threads);
          set_double_products_isa(level);
          set_product_threads(threads);
          require_same_bits(emulated_product(A, B, f), want);
        }
    }
  }
}

// ---- the pass -----------------------------------------------------------------------------

namespace {

/// One head, d = d_qk = d_v = 2, every projection the identity, no biases,
/// no norm, no MLP, no skip: X^1 = P X^0, and P = X^1 when X^0 = I.
Architecture identity_arch(int n_layers = 1) {
  Architecture a;
  a.layers = n_layers;
  a.heads = 1;
  a.d_model = a.d_qk = a.d_v = 2;
  a.variant = Variant{false, MlpKind::none, LayerNormKind::none, MaskKind::none};
  return a;
}

LayerWeights identity_layer() {
  LayerWeights w;
  HeadWeights h;
  h.W_Q = h.W_K = h.W_V = h.W_O = MatrixXd::Identity(2, 2);
  h.b_Q = h.b_K = h.b_V = VectorXd::Zero(2);
  w.heads = {h};
  w.b_O = VectorXd::Zero(2);
  return w;
}

}  // namespace

TEST_CASE("emulate fp32: a one-layer model by hand") {
  // d = 2, one head with W_Q = W_K = W_V = W_O = I, skip on, LayerNorm post
  // (gain 1, bias (0.5, 0)), relu MLP plain with W_1 = W_2 = I, b_1 = (0, −1).
  // Both rows are (1, 2): every score is 5·2^(-1/2) rounded, the softmax
  // gives 1/2 and 1/2 exactly, P V = (1, 2). Z = X + Attn = (2, 4); the
  // LayerNorm: μ = 3, δ = (−1, 1), var = 1, 1 + fl32(1e-5) rounds to
  // 1.0000100136 ≠ 1, so inv = fl32(1/sqrt(...)) < 1 and y = (−inv + 0.5, inv).
  Architecture a = identity_arch();
  a.d_ff = 2;
  a.variant = Variant{true, MlpKind::plain, LayerNormKind::post, MaskKind::none};
  a.activation = Activation::relu;
  a.ln_eps = 1e-5;
  LayerWeights w = identity_layer();
  w.W_1 = w.W_2 = MatrixXd::Identity(2, 2);
  w.b_1 = (VectorXd(2) << 0, -1).finished();
  w.b_2 = VectorXd::Zero(2);
  w.ln1_g = w.ln2_g = VectorXd::Ones(2);
  w.ln1_b = w.ln2_b = (VectorXd(2) << 0.5, 0).finished();
  const Model m(a, {w});
  MatrixXd X0(2, 2);
  X0 << 1, 2, 1, 2;
  const EmulatedTrace t = emulate_forward(m, a.variant, X0, EmulatedFormat::fp32, true);
  REQUIRE(t.layers() == 1);
  CHECK(t.P[0][0] == MatrixXd::Constant(2, 2, 0.5));
  const float inv = 1.0f / std::sqrt(1.0f + static_cast<float>(1e-5));  // fl32 of each step (no contraction in the tests either)
  CHECK(inv < 1.0f);
  // After the attention block: row (−inv + 0.5, inv). The MLP: relu((−inv + 0.5, inv) + (0, −1)) = (0, 0)
  // since −inv + 0.5 < 0 and inv − 1 < 0; plus b_2 = 0: (0, 0), then LayerNorm of a constant row:
  // δ = 0, y = b = (0.5, 0).
  const MatrixXd want = (MatrixXd(2, 2) << 0.5, 0, 0.5, 0).finished();
  CHECK(t.X[1] == want);
  REQUIRE_FALSE(t.overflow);
  // Without the MLP the block's own output shows: (0.5 − inv, inv) in fp32 steps.
  const Variant attention_only{true, MlpKind::none, LayerNormKind::post, MaskKind::none};
  const EmulatedTrace u = emulate_forward(m, attention_only, X0, EmulatedFormat::fp32, false);
  CHECK(u.P.empty());
  CHECK(u.X[1](0, 0) == double(-inv + 0.5f));
  CHECK(u.X[1](1, 1) == double(inv));
}

TEST_CASE("emulate: BERT-like layers against the step-by-step reference, every format") {
  for (const Activation act : {Activation::gelu, Activation::gelu_tanh, Activation::relu}) {
    const Model m = bert_like(act, 3 + static_cast<std::uint64_t>(act));
    const MatrixXd X0 = input_of(5, 8, 21);
    for (const EmulatedFormat f : kFormats) {
      check_against_reference(m, m.arch().variant, X0, f);
      // GPT-2's arrangement: pre-LayerNorm, causal; and the SAN; and mlp plain.
      check_against_reference(m, Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal}, X0, f);
      check_against_reference(m, Variant::san(), X0, f);
      check_against_reference(m, Variant{false, MlpKind::plain, LayerNormKind::none, MaskKind::causal}, X0, f);
    }
  }
  // ALBERT's shared layers (rounded once, used by every layer), and a family's own score scale.
  const Model one = bert_like(Activation::gelu_tanh, 41, 1);
  Architecture shared = one.arch();
  shared.layers = 3;
  shared.shared_layers = true;
  const Model albert(shared, std::vector<LayerWeights>(3, one.layer(0)), std::nullopt, "albert-like");
  Architecture scaled = one.arch();
  scaled.score_scale_base = 2.0;
  const Model own_scale(scaled, one.layers(), std::nullopt, "scale-2");
  scaled.score_scale_base = 1.0;
  const Model unscaled(scaled, one.layers(), std::nullopt, "scale-1");
  const MatrixXd X0 = input_of(6, 8, 5);
  for (const EmulatedFormat f : kFormats)
    for (const Model* m : {&albert, &own_scale, &unscaled}) {
      CAPTURE(m->source());
      check_against_reference(*m, m->arch().variant, X0, f);
    }
}

TEST_CASE("emulate: the Llama family against the step-by-step reference, every format") {
  // RMSNorm, rotary, grouped-query attention (4 query heads, 2 key/value heads), SwiGLU.
  RandomModelSpec s;
  s.arch = test::llama_arch(2, 4, 2, 16, 4, 24);
  s.std = 0.3;
  s.bias_std = 0.2;  // q/k/v biases (Qwen2)
  s.seed = 5;
  const Model m = with_random_norms(random_model(s), 9);
  const MatrixXd X0 = input_of(7, 16, 3);
  for (const EmulatedFormat f : kFormats) {
    check_against_reference(m, m.arch().variant, X0, f);
    check_against_reference(m, Variant{true, MlpKind::plain, LayerNormKind::none, MaskKind::none}, X0, f);
  }
  // Gemma's unit-offset gains and a GeGLU (gelu_tanh gate).
  Architecture g = m.arch();
  g.norm_unit_offset = true;
  g.activation = Activation::gelu_tanh;
  const Model gemma(g, m.layers(), std::nullopt, "gemma-like");
  for (const EmulatedFormat f : kFormats) check_against_reference(gemma, g.variant, X0, f);
}

namespace {

/// The softmax of math.md §9 rule 5 on a row of two scores in F, by hand.
std::pair<float, float> softmax2(float a0, float a1, EmulatedFormat f) {
  const float m = a0 > a1 ? a0 : a1;
  const float e0 = static_cast<float>(std::exp(double(a0 - m))), e1 = static_cast<float>(std::exp(double(a1 - m)));
  const float sum = e0 + e1;
  return {rf(e0 / sum, f), rf(e1 / sum, f)};
}

}  // namespace

TEST_CASE("emulate by hand: T5's bucket bias and the soft cap, n = 2, d = 2") {
  // X^0 = I: the raw scores are I exactly. T5 (8 buckets, distance 16): key
  // j − i = 0 in bucket 0, +1 in bucket 5, −1 in bucket 1; scale 1; cap c = 2:
  // a = rnd(2·rnd(tanh(rnd(rnd(s + T)/2)))).
  Architecture a = identity_arch();
  a.rel_buckets = 8;
  a.rel_max_distance = 16;
  a.score_scale_base = 1.0;
  a.softcap = 2.0;
  REQUIRE(t5_bucket(0, 8, 16) == 0);
  REQUIRE(t5_bucket(1, 8, 16) == 5);
  REQUIRE(t5_bucket(-1, 8, 16) == 1);
  LayerWeights w = identity_layer();
  w.pos_bias = MatrixXd::Zero(8, 1);
  w.pos_bias(0, 0) = 0.3;
  w.pos_bias(5, 0) = -0.7;
  w.pos_bias(1, 0) = 1.55;
  const Model m(a, {w});
  const MatrixXd X0 = MatrixXd::Identity(2, 2);
  for (const EmulatedFormat f : kFormats) {
    CAPTURE(to_string(f));
    auto T = [&](double t) { return static_cast<float>(ref_round(t, f)); };
    auto capped = [&](float s, double t) {
      const float x = rf(s + T(t), f);
      const float q = rf(x / 2.0f, f);
      return rf(2.0f * rf(static_cast<float>(std::tanh(double(q))), f), f);
    };
    // Row 0: keys 0 (δ = 0, score 1) and 1 (δ = +1, score 0); row 1: δ = −1 (0) and 0 (1).
    const auto [p00, p01] = softmax2(capped(1.0f, 0.3), capped(0.0f, -0.7), f);
    const auto [p10, p11] = softmax2(capped(0.0f, 1.55), capped(1.0f, 0.3), f);
    const EmulatedTrace t = emulate_forward(m, a.variant, X0, f, true);
    CHECK(t.P[0][0] == (MatrixXd(2, 2) << p00, p01, p10, p11).finished());
    CHECK(t.X[1] == t.P[0][0]);  // P·I·I, every product exact
    if (f == EmulatedFormat::bf16) CHECK(T(1.55) == 1.546875f);  // the table itself rounds
  }
}

TEST_CASE("emulate by hand: a sliding window of 1 leaves each row its own key") {
  Architecture a = identity_arch(2);
  a.variant.mask = MaskKind::causal;
  a.attention_window = 1;
  a.window_layers = {true, false};  // layer 1 windowed, layer 2 plain causal
  const Model m(a, {identity_layer(), identity_layer()});
  MatrixXd X0(3, 2);
  X0 << 1, 0, 0.5, 0.25, -1, 2;  // three tokens: longer than the window, not refused (it is applied)
  for (const EmulatedFormat f : kFormats) {
    const EmulatedTrace t = emulate_forward(m, a.variant, X0, f, true);
    CHECK(t.P[0][0] == MatrixXd::Identity(3, 3));
    CHECK(t.X[1] == X0);  // every entry exact in F
    CHECK(t.P[1][0](1, 0) > 0);  // layer 2 sees the earlier key again
    CHECK(t.P[1][0](0, 1) == 0);
  }
}

TEST_CASE("emulate by hand: XLNet's content and position terms, n = 2, d = 2") {
  // q_i = k_i = e_i; r_w = (0.5, 0), r_r = (0, 0.25); W_R = I so R W_R = R,
  // R's row for p = i − j: (sin p, cos p) (freq 10000^0 = 1) rounded to F.
  // a_ij = rnd(rnd((e_i + r_w)·e_j) + rnd((e_i + r_r)·R(i − j))), scale 2^(−1/2).
  Architecture a = identity_arch();
  a.xlnet_relative = true;
  LayerWeights w = identity_layer();
  w.heads[0].W_R = MatrixXd::Identity(2, 2);
  w.heads[0].r_w = (VectorXd(2) << 0.5, 0).finished();
  w.heads[0].r_r = (VectorXd(2) << 0, 0.25).finished();
  const Model m(a, {w});
  const MatrixXd X0 = MatrixXd::Identity(2, 2);
  for (const EmulatedFormat f : kFormats) {
    CAPTURE(to_string(f));
    auto R = [&](int p) {
      return std::pair{rf(static_cast<float>(std::sin(double(p))), f), rf(static_cast<float>(std::cos(double(p))), f)};
    };
    const float s = static_cast<float>(1.0 / std::sqrt(2.0));
    auto score = [&](int i, int j) {
      const float qw[2] = {(i == 0 ? 1.0f : 0.0f) + 0.5f, i == 1 ? 1.0f : 0.0f};
      const float qr[2] = {i == 0 ? 1.0f : 0.0f, (i == 1 ? 1.0f : 0.0f) + 0.25f};
      const float content = rf(qw[j], f);  // (q + r_w)·e_j
      const auto [sn, cs] = R(i - j);
      const float position = rf(std::fmaf(qr[1], cs, qr[0] * sn), f);  // a chain of two from +0: exact first product
      return rf(rf(content + position, f) * s, f);
    };
    const auto [p00, p01] = softmax2(score(0, 0), score(0, 1), f);
    const auto [p10, p11] = softmax2(score(1, 0), score(1, 1), f);
    const EmulatedTrace t = emulate_forward(m, a.variant, X0, f, true);
    CHECK(t.P[0][0] == (MatrixXd(2, 2) << p00, p01, p10, p11).finished());
  }
}

TEST_CASE("emulate by hand: the parallel block sums (Attn + f) + X, each sum rounded") {
  // One token (P = 1), identities: Attn(X) = X; relu MLP with W_1 = W_2 = I,
  // b_1 = (0, −1): f(X) = relu(X + b_1). X = (1 + 2^−7, 3): (X + f) + X =
  // (3·(1 + 2^−7), 8); 3·(1 + 2^−7) = 11.0000011₂ needs 9 bits: in bf16 a tie,
  // to even 3.03125; exact in fp16 and fp32.
  Architecture a = identity_arch();
  a.d_ff = 2;
  a.activation = Activation::relu;
  a.parallel_residual = true;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::none, MaskKind::none};
  LayerWeights w = identity_layer();
  w.W_1 = w.W_2 = MatrixXd::Identity(2, 2);
  w.b_1 = (VectorXd(2) << 0, -1).finished();
  w.b_2 = VectorXd::Zero(2);
  const Model m(a, {w});
  const MatrixXd X0 = (MatrixXd(1, 2) << 1.0 + 0x1p-7, 3).finished();
  CHECK(emulate_forward(m, a.variant, X0, EmulatedFormat::bf16, false).X[1] ==
        (MatrixXd(1, 2) << 3.03125, 8).finished());
  CHECK(emulate_forward(m, a.variant, X0, EmulatedFormat::fp32, false).X[1] ==
        (MatrixXd(1, 2) << 3.0234375, 8).finished());
  // Without the MLP the block is Attn(X) + X.
  const Variant no_mlp{true, MlpKind::none, LayerNormKind::none, MaskKind::none};
  CHECK(emulate_forward(m, no_mlp, X0, EmulatedFormat::bf16, false).X[1] ==
        (MatrixXd(1, 2) << 2.015625, 6).finished());
}

TEST_CASE("emulate by hand: Gemma 2's sandwich norm after the attention") {
  // One token, identities, pre-RMSNorm (unit offset: gain fl32(1 + w)) with
  // ln1 gains 1 + 0, ln3 gains 1 + (1, −0.5) = (2, 0.5), skip:
  // X' = X + N_3(Attn(N_1 X)) = X + N_3(N_1 X), N(x)_j = rnd(fl32(x_j·inv)·g_j), inv = 1/sqrt(ms + eps) in fp32.
  Architecture a = identity_arch();
  a.norm = NormKind::rms;
  a.norm_unit_offset = true;
  a.sandwich_norms = true;
  a.ln_eps = 1e-6;
  a.variant = Variant{true, MlpKind::none, LayerNormKind::pre, MaskKind::none};
  LayerWeights w = identity_layer();
  w.ln1_g = w.ln2_g = w.ln4_g = VectorXd::Zero(2);
  w.ln3_g = (VectorXd(2) << 1, -0.5).finished();
  w.ln1_b = w.ln2_b = VectorXd::Zero(2);
  const Model m(a, {w});
  const MatrixXd X0 = (MatrixXd(1, 2) << 3, 4).finished();
  for (const EmulatedFormat f : kFormats) {
    CAPTURE(to_string(f));
    auto rms = [&](float x0, float x1, float g0, float g1) {
      const float sq0 = x0 * x0, sq1 = x1 * x1;
      const float ms = (sq0 + sq1) / 2.0f;
      const float inv = 1.0f / std::sqrt(ms + static_cast<float>(1e-6));
      const float y0 = x0 * inv, y1 = x1 * inv;
      return std::pair{rf(y0 * g0, f), rf(y1 * g1, f)};
    };
    const auto [n0, n1] = rms(3.0f, 4.0f, 1.0f, 1.0f);  // N_1 X; attention of one token returns it
    const auto [s0, s1] = rms(n0, n1, 2.0f, 0.5f);      // N_3
    const EmulatedTrace t = emulate_forward(m, a.variant, X0, f, false);
    CHECK(t.X[1] == (MatrixXd(1, 2) << rf(3.0f + s0, f), rf(4.0f + s1, f)).finished());
    CHECK(s0 > 1.5f);  // ≈ 2·0.849: the sandwich gain shows
  }
}

TEST_CASE("emulate: every family's features against the step-by-step reference, every format") {
  const Variant full{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  const Variant san_causal{false, MlpKind::none, LayerNormKind::none, MaskKind::causal};
  struct Case {
    const char* name;
    Architecture arch;
    std::vector<Variant> variants;
  };
  std::vector<Case> cases;
  Architecture gemma2 = test::llama_arch(3, 2, 1, 8, 4, 16);  // RMSNorm, rotary, grouped keys, gated
  gemma2.norm_unit_offset = true;
  gemma2.activation = Activation::gelu_tanh;
  gemma2.score_scale_base = 3.0;
  gemma2.softcap = 1.5;  // small: it bends the scores
  gemma2.sandwich_norms = true;
  gemma2.attention_window = 3;
  gemma2.window_layers = {true, false, true};
  cases.push_back({"gemma2", gemma2, {full, san_causal, Variant::san()}});
  Architecture neox{3, 2, 8, 4, 4, 16, full, Activation::gelu, 1e-5};  // GPT-NeoX: partial rotary, parallel
  neox.rope_theta = 10000.0;
  neox.rotary_dims = 2;
  neox.parallel_residual = true;
  neox.own_norm_placement_only = true;
  cases.push_back({"gpt_neox", neox, {full, san_causal, Variant{false, MlpKind::residual, LayerNormKind::pre, MaskKind::causal}}});
  Architecture phi = neox;  // Phi: the same block with gelu_fast
  phi.activation = Activation::gelu_fast;
  cases.push_back({"phi", phi, {full}});
  Architecture t5{2, 2, 8, 4, 4, 16, Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none},
                  Activation::relu, 1e-6};
  t5.norm = NormKind::rms;
  t5.rel_buckets = 8;
  t5.rel_max_distance = 16;
  t5.score_scale_base = 1.0;
  cases.push_back({"t5", t5, {t5.variant, Variant::san()}});
  Architecture xlnet{2, 2, 8, 4, 4, 16, Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none},
                     Activation::gelu, 1e-12};
  xlnet.xlnet_relative = true;
  cases.push_back({"xlnet", xlnet, {xlnet.variant, Variant::san()}});
  xlnet.clamp_len = 2;
  cases.push_back({"xlnet-clamped", xlnet, {xlnet.variant}});
  std::uint64_t seed = 60;
  for (const Case& c : cases) {
    CAPTURE(c.name);
    RandomModelSpec s;
    s.arch = c.arch;
    s.std = 0.5;
    s.bias_std = c.arch.norm == NormKind::rms ? 0.0 : 0.2;
    s.seed = ++seed;
    const Model m = with_random_norms(random_model(s), ++seed);
    const MatrixXd X0 = input_of(6, 8, ++seed);
    for (const Variant& v : c.variants)
      for (const EmulatedFormat f : kFormats) check_against_reference(m, v, X0, f);
  }
}

TEST_CASE("emulate: the same bits on every level, thread count and rounding mode") {
  Restore restore;
  // Sizes with edge tiles everywhere and an MLP product with inner dimension 300 > 256.
  const Model bert = bert_like(Activation::gelu, 17, 2, 48, 300);
  const Model llama = test::random_llama(2, 4, 2, 32, 8, 80, 23);
  for (const Model* m : {&bert, &llama}) {
    const MatrixXd X0 = input_of(37, m->arch().d_model, 4);
    for (const EmulatedFormat f : kFormats) {
      set_double_products_isa("generic");
      set_product_threads(1);
      const EmulatedTrace base = emulate_forward(*m, m->arch().variant, X0, f, true);
      for (const std::string& level : supported_double_products_isas())
        for (const int mode : {FE_TONEAREST, FE_UPWARD}) {
          CAPTURE(to_string(f), level, mode);
          set_double_products_isa(level);
          set_product_threads(0);
          std::fesetround(mode);
          const EmulatedTrace t = emulate_forward(*m, m->arch().variant, X0, f, true);
          CHECK(std::fegetround() == mode);  // the pass restores the caller's mode
          std::fesetround(FE_TONEAREST);
          for (std::size_t l = 0; l < t.X.size(); ++l) require_same_bits(t.X[l], base.X[l]);
          for (std::size_t l = 0; l < t.P.size(); ++l)
            for (std::size_t h = 0; h < t.P[l].size(); ++h) require_same_bits(t.P[l][h], base.P[l][h]);
        }
    }
  }
}

TEST_CASE("emulate fp32 stays within fp32's reach of the double pass") {
  // Not the contract (that is the reference above), a sanity check of scale:
  // a 2-layer model in fp32 agrees with the double pass to ~1e-5 relative.
  const Model m = bert_like(Activation::gelu, 31, 2, 16, 32);
  const MatrixXd X0 = input_of(9, 16, 8);
  const ForwardTrace<double> exact = forward<double>(m, m.arch().variant, X0);
  const EmulatedTrace t = emulate_forward(m, m.arch().variant, X0, EmulatedFormat::fp32, false);
  const EmulatedTrace b = emulate_forward(m, m.arch().variant, X0, EmulatedFormat::bf16, false);
  const double scale = exact.X.back().cwiseAbs().maxCoeff();
  const double err32 = (t.X.back() - exact.X.back()).cwiseAbs().maxCoeff() / scale;
  const double err16 = (b.X.back() - exact.X.back()).cwiseAbs().maxCoeff() / scale;
  CAPTURE(err32, err16);
  CHECK(err32 < 100 * 0x1p-24);
  CHECK(err32 > 0);
  CHECK(err16 < 100 * 0x1p-8);
  CHECK(err16 > err32);
}

TEST_CASE("emulate fp16: an overflow is reported with its layer and operation, and propagates") {
  // Two layers, skip on, mlp residual, no norms: X^1 ≈ X^0 ≈ 8. Layer 2's
  // W_1 has entries 4096: Z·W_1 ≈ 4·8·4096 passes 65504 in fp16, not in bf16/fp32.
  const Model base = bert_like(Activation::relu, 3, 2, 4, 4, 0.1, 0.0);
  std::vector<LayerWeights> layers = base.layers();
  layers[1].W_1 = MatrixXd::Constant(4, 4, 4096.0);
  const Model m(base.arch(), layers);
  const Variant v{true, MlpKind::residual, LayerNormKind::none, MaskKind::none};
  MatrixXd X0 = MatrixXd::Constant(3, 4, 8.0);
  X0(0, 0) = 9;  // |Z| ≈ 8 per entry: Σ 4 · 8 · 4096 ≈ 131072 > 65504
  const EmulatedTrace t = emulate_forward(m, v, X0, EmulatedFormat::fp16, false);
  REQUIRE(t.overflow);
  CHECK(*t.overflow == "layer 2, MLP: overflow to inf (fp16's largest finite value is 65504)");
  CHECK(t.overflow_layer == 2);
  CHECK(t.X[1].allFinite());
  CHECK_FALSE(t.X[2].allFinite());
  for (const EmulatedFormat f : {EmulatedFormat::bf16, EmulatedFormat::fp32}) {
    const EmulatedTrace u = emulate_forward(m, v, X0, f, false);
    CHECK_FALSE(u.overflow);
    CHECK(u.overflow_layer == -1);
    CHECK(u.X[2].allFinite());
  }
  // An input beyond fp16 is the input's overflow, layer 0.
  X0(1, 1) = 1e5;
  const EmulatedTrace in = emulate_forward(m, v, X0, EmulatedFormat::fp16, false);
  REQUIRE(in.overflow);
  CHECK(*in.overflow == "input: overflow to inf (fp16's largest finite value is 65504)");
  CHECK(in.overflow_layer == 0);
}

TEST_CASE("emulate: what it refuses, naming the cause") {
  // RMSNorm has no bias in the rules: a nonzero one is refused, naming the layer.
  const Model llama = test::random_llama(2, 2, 2, 8, 4, 8, 3);
  std::vector<LayerWeights> layers = llama.layers();
  layers[1].ln2_b(0) = 0.5;
  const Model biased(llama.arch(), layers, std::nullopt, "rms-bias");
  try {
    emulate_forward(biased, llama.arch().variant, input_of(3, 8, 1), EmulatedFormat::fp32, false);
    FAIL("an RMSNorm bias was emulated");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).rfind("rms-bias: emulate: an RMSNorm bias (layer 2) is not emulated", 0) == 0);
  }
  CHECK_NOTHROW(emulate_forward(biased, Variant{true, MlpKind::residual, LayerNormKind::none, MaskKind::causal},
                                input_of(3, 8, 1), EmulatedFormat::fp32, false));
  // A sliding window shorter than the input is refused like forward() refuses it.
  Architecture mistral = llama.arch();
  mistral.attention_window = 2;
  const Model windowed(mistral, llama.layers(), std::nullopt, "windowed");
  CHECK_THROWS_AS(emulate_forward(windowed, mistral.variant, input_of(3, 8, 1), EmulatedFormat::fp32, false),
                  std::invalid_argument);
  CHECK_NOTHROW(emulate_forward(windowed, mistral.variant, input_of(2, 8, 1), EmulatedFormat::fp32, false));
  // Shapes and variants are checked like forward()'s.
  const Model bert = bert_like(Activation::gelu, 2);
  CHECK_THROWS_AS(emulate_forward(bert, bert.arch().variant, input_of(3, 6, 1), EmulatedFormat::fp16, false),
                  std::invalid_argument);
}

TEST_CASE("emulate: the real checkpoints run, fp32 close to the double pass") {
  const std::string root = test::real_models_dir();
  if (root.empty()) return;
  for (const char* name : {"bert-ticket-classifier", "gpt2-capp", "llama-stories260k"}) {
    const std::string path = root + "/" + name;
    if (!std::filesystem::exists(path)) continue;
    CAPTURE(name);
    const Model m = load_model(path);
    const MatrixXd X0 = make_input<double>(m, InputSpec::from_tokens({1, 5, 9, 12, 7, 3}));
    const ForwardTrace<double> exact = forward<double>(m, m.arch().variant, X0, {false, {}});
    const EmulatedTrace t = emulate_forward(m, m.arch().variant, X0, EmulatedFormat::fp32, false);
    REQUIRE_FALSE(t.overflow);
    const double scale = exact.X.back().cwiseAbs().maxCoeff();
    CHECK((t.X.back() - exact.X.back()).cwiseAbs().maxCoeff() / scale < 1e-4);
    const EmulatedTrace b = emulate_forward(m, m.arch().variant, X0, EmulatedFormat::bf16, false);
    CHECK(b.X.back().allFinite());
    for (Eigen::Index i = 0; i < b.X.back().size(); ++i)
      REQUIRE(b.X.back().data()[i] == round_to_format(b.X.back().data()[i], EmulatedFormat::bf16));
  }
}

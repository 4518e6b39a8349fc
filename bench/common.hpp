#pragma once
// Shared pieces of the benchmarks: the model shapes of docs/performance.md,
// operation counts, peak memory, and full-precision random operands.
#include "sanpath/compute/forward.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/model/random.hpp"

#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdint>
#include <string>

namespace sanpath::bench {

/// Peak resident set size of this process so far, in MiB.
inline double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

/// Architecture with d_qk = d_v given, d_ff = 4d when `mlp`.
inline Architecture arch(int L, int H, int d, int dqk, bool mlp, const Variant& v) {
  Architecture a;
  a.layers = L;
  a.heads = H;
  a.d_model = d;
  a.d_qk = dqk;
  a.d_v = dqk;
  a.d_ff = mlp ? 4 * d : 0;
  a.variant = v;
  a.activation = Activation::gelu_tanh;  // numpy has tanh, not erf: the peer computes the same
  a.ln_eps = 1e-12;
  return a;
}

/// BERT-base as a full transformer: post-LayerNorm, residual MLP (d_ff 3072).
inline Variant bert_variant() { return {true, MlpKind::residual, LayerNormKind::post, MaskKind::none}; }
inline Architecture bert_base(bool mlp = true, Variant v = bert_variant()) { return arch(12, 12, 768, 64, mlp, v); }

inline Model make_model(const Architecture& a, std::uint64_t seed = 1) {
  RandomModelSpec s;
  s.arch = a;
  s.std = 0.02;
  s.bias_std = 0.02;
  s.seed = seed;
  return random_model(s);
}

inline MatrixXd make_input(int n, int d, std::uint64_t seed = 2) {
  RandomInputSpec s;
  s.n = n;
  s.d = d;
  s.seed = seed;
  s.offset = 1.0;
  s.spread = 1.0;
  return random_input(s);
}

/// Multiply-adds of the products of one forward pass (what gemm computes).
inline double forward_macs(const Architecture& a, int n, bool with_mlp) {
  const double N = n, d = a.d_model, H = a.heads, q = a.d_qk, v = a.d_v;
  double layer = N * d * H * (2 * q + v)  // Q, K, V
                 + H * N * N * (q + v)     // scores and P·V
                 + N * H * v * d;          // output map
  if (with_mlp) layer += 2 * N * d * a.d_ff;
  return a.layers * layer;
}

/// The products of one forward pass, as a list of (m, k, n) shapes.
struct Shape {
  int m, k, n;
  bool trans;  ///< A·Bᵀ (B stored n×k)
};
inline std::vector<Shape> forward_shapes(const Architecture& a, int n, bool with_mlp) {
  std::vector<Shape> s;
  const int d = a.d_model, H = a.heads, q = a.d_qk, v = a.d_v;
  for (int l = 0; l < a.layers; ++l) {
    s.push_back({n, d, H * q, false});
    s.push_back({n, d, H * q, false});
    s.push_back({n, d, H * v, false});
    for (int h = 0; h < H; ++h) {
      s.push_back({n, q, n, true});
      s.push_back({n, n, v, false});
    }
    s.push_back({n, H * v, d, false});
    if (with_mlp) {
      s.push_back({n, d, a.d_ff, false});
      s.push_back({n, a.d_ff, d, false});
    }
  }
  return s;
}

/// Path-tree step count ((H+1)^L - 1 with skip) and the steps that also
/// multiply the stochastic prefix (all but the first non-skip step of a path).
struct TreeCounts {
  double steps = 0, prefix_products = 0;
};
inline TreeCounts tree_counts(int L, int H) {
  double p = 1;
  for (int l = 0; l < L; ++l) p *= (H + 1);
  return {p - 1, p - 1 - double(L) * H};
}

/// Multiply-adds of one path-tree step (factored maps when 2·d_v < d):
/// Y·W_V, ·W_O, P_h·(…), and P_h·P_prefix.
inline double step_macs(int n, int d, int dv) {
  const double N = n, D = d, V = dv;
  return (2 * V < D ? N * D * V * 2 : N * D * D) + N * N * D;
}
inline double prefix_macs(int n) { return double(n) * n * n; }

/// Multiply-adds of length_sums (skip on, factored): per layer l and length
/// k ≤ l+1 one head sum: S·W_Vp, H × P_h·U_h, cat·W_Op.
inline double length_sum_macs(const Architecture& a, int n) {
  const double N = n, D = a.d_model, H = a.heads, V = a.d_v;
  const double head_sum = N * D * H * V * 2 + H * N * N * V;
  const double pairs = double(a.layers) * (a.layers + 1) / 2;
  return pairs * head_sum;
}

/// A full-precision random value: p random bits, exponent in [-2, 2], random sign.
inline void random_full(mpfr_ptr x, gmp_randstate_t state) {
  mpfr_urandomb(x, state);
  while (mpfr_zero_p(x)) mpfr_urandomb(x, state);
  const long e = static_cast<long>(gmp_urandomm_ui(state, 5)) - 2;
  mpfr_mul_2si(x, x, e, MPFR_RNDN);
  if (gmp_urandomb_ui(state, 1)) mpfr_neg(x, x, MPFR_RNDN);
}

template <class S> Matrix<S> random_full_matrix(Eigen::Index r, Eigen::Index c, gmp_randstate_t state) {
  Matrix<S> M(r, c);
  for (Eigen::Index j = 0; j < c; ++j)
    for (Eigen::Index i = 0; i < r; ++i) random_full(M(i, j).backend().data(), state);
  return M;
}

}  // namespace sanpath::bench

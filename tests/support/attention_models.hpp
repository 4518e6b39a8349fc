#pragma once
// Random attention-only models and Gaussian inputs for the path tests.
#include "sanpath/model/random.hpp"

namespace sanpath::test {

/// L layers of H heads, d_qk = d_v = dh, no MLP or LayerNorm weights;
/// weights N(0, std²), biases N(0, 0.1²).
inline Model attention_model(int L, int H, int d, int dh, bool skip, double std, std::uint64_t seed,
                             MaskKind mask = MaskKind::none) {
  RandomModelSpec s;
  s.arch.layers = L;
  s.arch.heads = H;
  s.arch.d_model = d;
  s.arch.d_qk = dh;
  s.arch.d_v = dh;
  s.arch.d_ff = 0;
  s.arch.variant = Variant{skip, MlpKind::none, LayerNormKind::none, mask};
  s.std = std;
  s.bias_std = 0.1;
  s.seed = seed;
  return random_model(s);
}

/// n×d entries offset + N(0, 1).
inline MatrixXd gaussian_input(int n, int d, std::uint64_t seed, double offset = 0) {
  Rng rng(seed);
  MatrixXd X(n, d);
  for (Eigen::Index j = 0; j < d; ++j)
    for (Eigen::Index i = 0; i < n; ++i) X(i, j) = offset + rng.gaussian();
  return X;
}

}  // namespace sanpath::test

#pragma once
// Width-8 random models and inputs shared by the centred-pass and enclosure
// tests (tests/compute/test_forward_centred.cpp, test_enclosure.cpp).
#include "sanpath/model/random.hpp"

#include <cstdint>
#include <vector>

namespace sanpath::test {

/// A random model of every part (d = 8, d_qk = d_v = 4, d_ff = 16), with
/// LayerNorm gains ~ 1 ± 0.3 and biases ~ ±0.1.
inline Model width8_model(int L, Activation act, std::uint64_t seed, double std, int H = 2, bool shared = false) {
  RandomModelSpec s;
  s.arch = {L, H, 8, 4, 4, 16, Variant{}, act, 1e-5, shared};
  s.std = std;
  s.bias_std = 0.1;
  s.seed = seed;
  const Model m = random_model(s);
  std::vector<LayerWeights> layers = m.layers();
  Rng rng(seed + 1000);
  for (LayerWeights& lw : layers)
    for (Eigen::Index j = 0; j < lw.ln1_g.size(); ++j) {
      lw.ln1_g(j) = 1 + 0.3 * rng.gaussian();
      lw.ln2_g(j) = 1 + 0.3 * rng.gaussian();
      lw.ln1_b(j) = 0.1 * rng.gaussian();
      lw.ln2_b(j) = 0.1 * rng.gaussian();
    }
  return Model(m.arch(), layers, std::nullopt, "test-model");
}

/// X = 1cᵀ + R, n × 8: c ~ N(0, 1) per column, R spread 0.5.
inline MatrixXd width8_input(std::uint64_t seed, int n = 6) {
  RandomInputSpec in;
  in.n = n;
  in.d = 8;
  in.seed = seed;
  in.offset = 1.0;
  in.spread = 0.5;
  return random_input(in);
}

}  // namespace sanpath::test

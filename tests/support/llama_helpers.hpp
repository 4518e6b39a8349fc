#pragma once
// Random models of the Llama family (math.md §8) for tests: RMSNorm,
// rotary positions, grouped-query attention, SwiGLU MLP.
#include "sanpath/model/random.hpp"

#include <cstdint>

namespace sanpath::test {

inline Architecture llama_arch(int layers, int heads, int kv_heads, int d, int dh, int ff) {
  Architecture a;
  a.layers = layers;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.d_model = d;
  a.d_qk = a.d_v = dh;
  a.d_ff = ff;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.activation = Activation::silu;
  a.ln_eps = 1e-5;
  a.norm = NormKind::rms;
  a.rope_theta = 10000.0;
  a.gated_mlp = true;
  return a;
}

/// Weights N(0, 0.3²) from `seed`; `vocab` > 0 adds a token table.
inline Model random_llama(int layers, int heads, int kv_heads, int d, int dh, int ff, std::uint64_t seed,
                          int vocab = 0) {
  RandomModelSpec s;
  s.arch = llama_arch(layers, heads, kv_heads, d, dh, ff);
  s.std = 0.3;
  s.seed = seed;
  s.vocab = vocab;
  return random_model(s);
}

}  // namespace sanpath::test

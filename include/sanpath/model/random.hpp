#pragma once
/// \file random.hpp
/// Seeded, platform-independent randomness: a xoshiro256** generator with
/// its own Gaussian (Box–Muller) and uniform-integer mappings (the standard
/// distributions are implementation-defined), random models of given sizes
/// and random inputs with a controllable initial residual.

#include "sanpath/model/model.hpp"

#include <cstdint>
#include <optional>

namespace sanpath {

/// xoshiro256** seeded through splitmix64. Same sequence on every platform.
class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  /// Uniform double in [0, 1) with 53 random bits.
  double uniform();
  /// Uniform integer in [0, n), unbiased (rejection). n >= 1.
  std::uint64_t below(std::uint64_t n);
  /// Standard normal (Box–Muller, both values used).
  double gaussian();

 private:
  std::uint64_t s_[4];
  std::optional<double> spare_;
};

enum class InitKind { gaussian, xavier };

/// A random model: sizes and structure in `arch` (d_qk, d_v, d_ff must be
/// set; d_ff = 0 means no MLP weights), weights N(0, std²) (gaussian) or
/// N(0, 2/(fan_in+fan_out)) (Xavier normal); biases N(0, bias_std²);
/// LayerNorm gains 1 and biases 0. `shared_layers`: one layer's weights are
/// reused by all layers (ALBERT-style). `vocab` > 0 adds embeddings of kind
/// `embeddings` (word vocab×d, position max_positions×d; one token type for
/// bert and roberta; LayerNorm gain 1, bias 0 but for gpt2; albert is not
/// drawn).
/// Llama family (arch.gated_mlp, rotary, kv_heads): heads of a key/value
/// group share the group's first K, V; only the q/k/v biases are drawn
/// (output and MLP biases zero); W_gate drawn like W_1; embeddings are the
/// token rows alone. A query/key norm's gains q_norm, k_norm are the unit
/// gain plus N(0, std²) each, drawn last in their layer.
struct RandomModelSpec {
  Architecture arch;
  InitKind init = InitKind::gaussian;
  double std = 0.02;
  double bias_std = 0.0;
  std::uint64_t seed = 0;
  int vocab = 0;
  int max_positions = 512;
  Layout embeddings = Layout::bert;
  /// ViT embeddings (embeddings = vit; vocab and max_positions unused):
  /// patch projection, CLS and (⌊S/p⌋² + 1) position rows drawn like the
  /// word table, patch bias by bias_std.
  int image_size = 0, patch_size = 0, channels = 3;
  /// OPT: the word table's width e (0: d); e ≠ d draws project_in (e×d).
  int embed_dim = 0;
};

/// Throws std::invalid_argument (naming the field) for absurd sizes.
Model random_model(const RandomModelSpec& spec);

/// A random input X = 1 cᵀ + R (n×d): c ~ N(0, offset²) per column, R has
/// N(0, spread²) entries with its column means removed. When `residual` is
/// set, R is rescaled so that the mean-centred composite residual
/// ‖X − 1 mean(X)ᵀ‖_{1,∞} equals it (up to double rounding of X).
struct RandomInputSpec {
  int n = 16;
  int d = 0;
  std::uint64_t seed = 0;
  double offset = 1.0;
  double spread = 1.0;
  std::optional<double> residual;
};

MatrixXd random_input(const RandomInputSpec& spec);

}  // namespace sanpath

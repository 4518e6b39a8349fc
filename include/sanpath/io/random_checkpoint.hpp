#pragma once
/// \file random_checkpoint.hpp
/// The random models of `sanpath init` and of Python's `random_model`: one
/// description (InitOptions), validated and turned into a RandomModelSpec by
/// one call, so that the same options give the same model and the same
/// refusals on both sides. In io/ because a layout family brings its
/// structure (family_structure, the family registry).
///
/// \code
///   InitOptions o;
///   o.layers = 2; o.heads = 4; o.d_model = 32; o.layout = "gpt_neox"; o.vocab = 64;
///   o.family_options.rotary_fraction = 0.5;
///   const RandomCheckpoint c = plan_random_checkpoint(o, OptionSpelling::cli);
///   write_random_checkpoint(c, random_model(c.spec), "tiny-pythia");  // init --layout gpt_neox
/// \endcode

#include "sanpath/io/checkpoint.hpp"
#include "sanpath/model/random.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace sanpath {

/// How the messages of plan_random_checkpoint name an option: as the CLI
/// spells it ("--kv-heads", "--mlp none") or as Python's keyword arguments
/// ("kv_heads", "mlp='none'").
enum class OptionSpelling { cli, python };

/// Everything `sanpath init` takes. Unset optionals are the defaults the
/// comments give.
struct InitOptions {
  int layers = 6, heads = 4, d_model = 64;
  std::optional<int> d_qk, d_v;  ///< per head (default d_model / heads, which must divide)
  std::optional<int> head_dim;   ///< both d_qk and d_v (config.json's head_dim); not with d_qk or d_v
  std::optional<int> d_ff;       ///< MLP width (default 4 d_model; 0: no MLP weights, needs mlp none)
  std::string init = "gaussian";  ///< gaussian | xavier
  double std = 0.02, bias_std = 0.0;
  std::uint64_t seed = 0;
  bool shared_layers = false;
  std::optional<std::string> activation;  ///< default gelu, a layout family's own
  std::optional<double> ln_eps;           ///< default 1e-12, the Llama family's 1e-5, a family's own
  int vocab = 0, max_positions = 512;
  /// Over BERT's structure (the Llama family's); refused by the own-structure families.
  VariantOverride variant;
  std::optional<std::string> layout;   ///< a HuggingFace layout (layout_families()); nullopt or "native": a native file
  std::optional<std::string> family;   ///< "llama": a native file of the Llama family's structure
  std::optional<int> kv_heads;         ///< the families with key/value heads (and family llama); unset or 0: heads
  double rope_theta = 10000.0;
  FamilyOptions family_options;        ///< the own-structure families' options (families.md)
  std::string dtype = "F64";           ///< tensors of a HuggingFace layout, as save_hf takes it (native: F64)
};

/// A validated random model: what to draw and how to write it.
struct RandomCheckpoint {
  RandomModelSpec spec;
  std::optional<Layout> layout;  ///< nullopt: a native file
  std::string dtype = "F64";
};

/// Validates `o` as `sanpath init` does and builds its spec. Throws
/// std::invalid_argument with a one-line message naming the option as
/// `spelling` spells it ("--heads: must be at least 1").
RandomCheckpoint plan_random_checkpoint(const InitOptions& o, OptionSpelling spelling);

/// Writes `model` (random_model(c.spec)) as `c` says: save_native to a
/// .safetensors file, or save_hf to a folder in c.layout with c.dtype.
void write_random_checkpoint(const RandomCheckpoint& c, const Model& model, const std::string& out);

}  // namespace sanpath

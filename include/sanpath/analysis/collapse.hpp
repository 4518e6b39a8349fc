#pragma once
/// \file experiment.hpp
/// The paper's Section 4 experiment: the per-layer relative residual of one
/// model under four variants — SAN, SAN+MLP, SAN+skip and the full model —
/// measured side by side at automatic high precision.

#include "sanpath/analysis/forward.hpp"
#include "sanpath/model/random.hpp"

#include <string>
#include <vector>

namespace sanpath {

/// One named variant of the experiment.
struct NamedVariant {
  std::string name;
  Variant variant;
};

/// The four variants, keeping the model's own LayerNorm placement and mask:
/// SAN = skip off, mlp none, layernorm none (math.md §2);
/// SAN+MLP = skip off, mlp residual, own layernorm (the paper's surgery);
/// SAN+skip = skip on, mlp none, own layernorm;
/// full = the model's own variant.
std::vector<NamedVariant> collapse_variants(const Variant& own);

/// The embedded default: a seeded random BERT-shaped model (post-LN, GELU,
/// MLP width 4d, BERT initialisation std 0.02) with L = 12 (BERT-base's
/// depth), H = 4, d = 32, d_qk = d_v = 8, and a random input of n = 8 tokens
/// (seed 1). The centred pass (math.md §7) resolves the SAN's residual at
/// every layer, exponents in the hundreds of thousands, in seconds.
RandomModelSpec default_collapse_model();
RandomInputSpec default_collapse_input();

struct CollapseResult {
  std::vector<NamedVariant> variants;
  std::vector<ForwardAnalysis> analyses;  ///< one per variant, same order
};

/// Runs every variant through analyze_forward (relative residuals with the
/// mean centre). Variants the model cannot run (no MLP weights) are skipped.
CollapseResult run_collapse(const Model& model, const InputSpec& input, const PrecisionRequest& precision,
                            const ProgressFn& progress = {});

}  // namespace sanpath

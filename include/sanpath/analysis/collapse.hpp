#pragma once
/// \file collapse.hpp
/// The paper's Section 4 experiment: the per-layer relative residual of one
/// model under four variants — SAN, SAN+MLP, SAN+skip and the full model —
/// measured side by side at automatic high precision.
///
/// \code
///   const Model model = random_model(default_collapse_model());
///   const CollapseResult r = run_collapse(model, InputSpec::from_random(default_collapse_input()), {});
///   // r.analyses[i] is variant r.variants[i]'s ForwardAnalysis (one LayerReport per layer)
/// \endcode

#include "sanpath/analysis/forward.hpp"
#include "sanpath/model/random.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace sanpath {

/// One named variant of the experiment.
struct NamedVariant {
  std::string name;
  Variant variant;
};

/// Which definitions of the four curves (math.md §2).
/// theory: SAN = skip off, mlp none, layernorm none (the theorems' SAN);
///   SAN+MLP = skip off, mlp residual, own layernorm; SAN+skip = skip on,
///   mlp none, own layernorm; full = the model's own variant.
/// paper: the paper's Section 4 (Figure 2, the official notebook's surgery):
///   SAN = skip off, mlp none, layernorm post (X' = LN_1(Attn(X)): with mlp
///   none LN_2 is not applied); SAN+MLP = skip off, mlp residual, layernorm
///   post; SAN+skip = skip on, mlp none, layernorm post; transformer = the
///   model's own variant. The mask is always the model's own.
enum class CollapseConventions { theory, paper };
/// "theory" / "paper".
std::string to_string(CollapseConventions c);
/// "theory|paper"; throws std::invalid_argument naming `what`.
CollapseConventions parse_conventions(const std::string& text, const std::string& what = "conventions");

/// The four variants of `conventions` for a model whose own variant is `own`;
/// `paper_norm` is the placement the paper's conventions give the SAN,
/// SAN+MLP and SAN+skip (post; see paper_layernorm).
std::vector<NamedVariant> collapse_variants(const Variant& own,
                                            CollapseConventions conventions = CollapseConventions::theory,
                                            LayerNormKind paper_norm = LayerNormKind::post);
/// The placement the paper's conventions use for model `a`: post, or the
/// model's own where its family allows no other (Architecture::
/// own_norm_placement_only: GPT-NeoX, Phi, OPT, Gemma, T5 are pre-norm).
LayerNormKind paper_layernorm(const Architecture& a);

/// The embedded default: a seeded random BERT-shaped model (post-LN, GELU,
/// MLP width 4d, BERT initialisation std 0.02) with L = 12 (BERT-base's
/// depth), H = 4, d = 32, d_qk = d_v = 8, and a random input of n = 8 tokens
/// (seed 1). The centred pass (math.md §7) resolves the SAN's residual at
/// every layer, exponents in the hundreds of thousands, in seconds.
RandomModelSpec default_collapse_model();
RandomInputSpec default_collapse_input();

struct CollapseResult {
  CollapseConventions conventions = CollapseConventions::theory;
  std::vector<NamedVariant> variants;
  std::vector<ForwardAnalysis> analyses;  ///< one per variant, same order
};

/// Runs every variant through analyze_forward (relative residuals with the
/// mean centre). Variants the model cannot run (no MLP weights) are skipped.
CollapseResult run_collapse(const Model& model, const InputSpec& input, const PrecisionRequest& precision,
                            const ProgressFn& progress = {},
                            CollapseConventions conventions = CollapseConventions::theory);

}  // namespace sanpath

#include "sanpath/analysis/collapse.hpp"

#include <stdexcept>

namespace sanpath {

std::string to_string(CollapseConventions c) { return c == CollapseConventions::paper ? "paper" : "theory"; }

CollapseConventions parse_conventions(const std::string& text, const std::string& what) {
  if (text == "theory") return CollapseConventions::theory;
  if (text == "paper") return CollapseConventions::paper;
  throw std::invalid_argument(what + ": '" + text + "' is not one of paper, theory");
}

LayerNormKind paper_layernorm(const Architecture& a) {
  return a.own_norm_placement_only && a.variant.layernorm != LayerNormKind::none ? a.variant.layernorm
                                                                                : LayerNormKind::post;
}

std::vector<NamedVariant> collapse_variants(const Variant& own, CollapseConventions conventions,
                                            LayerNormKind paper_norm) {
  std::vector<NamedVariant> v;
  if (conventions == CollapseConventions::paper) {
    const LayerNormKind post = paper_norm;
    v.push_back({"SAN", {false, MlpKind::none, post, own.mask}});
    v.push_back({"SAN+MLP", {false, MlpKind::residual, post, own.mask}});
    v.push_back({"SAN+skip", {true, MlpKind::none, post, own.mask}});
    v.push_back({"transformer", own});
    return v;
  }
  v.push_back({"SAN", Variant::san(own.mask)});
  v.push_back({"SAN+MLP", {false, MlpKind::residual, own.layernorm, own.mask}});
  v.push_back({"SAN+skip", {true, MlpKind::none, own.layernorm, own.mask}});
  v.push_back({"full", own});
  return v;
}

RandomModelSpec default_collapse_model() {
  RandomModelSpec s;
  s.arch.layers = 12;
  s.arch.heads = 4;
  s.arch.d_model = 32;
  s.arch.d_qk = 8;
  s.arch.d_v = 8;
  s.arch.d_ff = 128;
  s.arch.variant = {true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  s.arch.activation = Activation::gelu;
  s.arch.ln_eps = 1e-12;
  s.init = InitKind::gaussian;
  s.std = 0.02;
  s.seed = 0;
  return s;
}

RandomInputSpec default_collapse_input() {
  RandomInputSpec s;
  s.n = 8;
  s.seed = 1;
  return s;
}

CollapseResult run_collapse(const Model& model, const InputSpec& input, const PrecisionRequest& precision,
                            const ProgressFn& progress, CollapseConventions conventions) {
  // A variant the weights cannot run is left out below; a feature no pass
  // computes is refused: the SAN needs no MLP or norm weights, so it fails
  // only on those.
  model.check_supports(Variant::san(model.arch().variant.mask));
  CollapseResult r;
  r.conventions = conventions;
  const std::vector<NamedVariant> all =
      collapse_variants(model.arch().variant, conventions, paper_layernorm(model.arch()));
  for (std::size_t i = 0; i < all.size(); ++i) {
    const NamedVariant& nv = all[i];
    try {
      model.check_supports(nv.variant);
    } catch (const std::invalid_argument&) {
      continue;
    }
    const std::string prefix = nv.name + " (" + std::to_string(i + 1) + "/" + std::to_string(all.size()) + "): ";
    r.analyses.push_back(
        analyze_forward(model, nv.variant, input, precision, Center::mean, prefixed_progress(progress, prefix)));
    r.variants.push_back(nv);
  }
  return r;
}

}  // namespace sanpath

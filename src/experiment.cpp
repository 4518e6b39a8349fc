#include "sanpath/experiment.hpp"

namespace sanpath {

std::vector<NamedVariant> collapse_variants(const Variant& own) {
  std::vector<NamedVariant> v;
  v.push_back({"SAN", Variant::san(own.mask)});
  v.push_back({"SAN+MLP", {false, MlpKind::residual, own.layernorm, own.mask}});
  v.push_back({"SAN+skip", {true, MlpKind::none, own.layernorm, own.mask}});
  v.push_back({"full", own});
  return v;
}

RandomModelSpec default_collapse_model() {
  RandomModelSpec s;
  s.arch.layers = 5;
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
                            const ProgressFn& progress) {
  CollapseResult r;
  for (const NamedVariant& nv : collapse_variants(model.arch().variant)) {
    try {
      model.check_supports(nv.variant);
    } catch (const std::invalid_argument&) {
      continue;
    }
    if (progress) progress(nv.name);
    r.analyses.push_back(analyze_forward(model, nv.variant, input, precision, Center::mean, progress));
    r.variants.push_back(nv);
  }
  return r;
}

}  // namespace sanpath

// The collapse experiment (analysis/collapse.hpp): its four variants follow
// math.md §2, variants the weights cannot run are left out, and every curve
// is the forward analysis of its variant.
#include "support/helpers.hpp"

#include "sanpath/analysis/collapse.hpp"
#include "sanpath/model/random.hpp"

using namespace sanpath;

namespace {

RandomModelSpec small(int d_ff, Variant own) {
  RandomModelSpec s;
  s.arch.layers = 2;
  s.arch.heads = 2;
  s.arch.d_model = 6;
  s.arch.d_qk = 3;
  s.arch.d_v = 3;
  s.arch.d_ff = d_ff;
  s.arch.variant = own;
  s.std = 0.4;
  s.seed = 12;
  return s;
}

InputSpec input() {
  RandomInputSpec r;
  r.n = 5;
  r.seed = 2;
  return InputSpec::from_random(r);
}

}  // namespace

TEST_CASE("collapse variants: SAN, SAN+MLP, SAN+skip, full, keeping LayerNorm placement and mask", "[collapse]") {
  const Variant gpt2{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  const std::vector<NamedVariant> v = collapse_variants(gpt2);
  REQUIRE(v.size() == 4);
  CHECK(v[0].name == "SAN");
  CHECK(v[0].variant == Variant{false, MlpKind::none, LayerNormKind::none, MaskKind::causal});
  CHECK(v[1].name == "SAN+MLP");
  CHECK(v[1].variant == Variant{false, MlpKind::residual, LayerNormKind::pre, MaskKind::causal});
  CHECK(v[2].name == "SAN+skip");
  CHECK(v[2].variant == Variant{true, MlpKind::none, LayerNormKind::pre, MaskKind::causal});
  CHECK(v[3].name == "full");
  CHECK(v[3].variant == gpt2);
}

TEST_CASE("run_collapse: one forward analysis per variant the model can run", "[collapse]") {
  const PrecisionRequest req = PrecisionRequest::parse("128");
  SECTION("a model with MLP and LayerNorm runs all four") {
    const Model m = random_model(small(8, {true, MlpKind::residual, LayerNormKind::post, MaskKind::none}));
    const CollapseResult r = run_collapse(m, input(), req);
    REQUIRE(r.variants.size() == 4);
    REQUIRE(r.analyses.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) {
      CAPTURE(r.variants[i].name);
      const ForwardAnalysis alone = analyze_forward(m, r.variants[i].variant, input(), req);
      REQUIRE(r.analyses[i].variant == r.variants[i].variant);
      REQUIRE(r.analyses[i].layers.size() == 3);
      for (std::size_t l = 0; l < 3; ++l)
        CHECK(r.analyses[i].layers[l].relative_residual.value == alone.layers[l].relative_residual.value);
    }
    // Layer 0 is the input: the same for every curve.
    CHECK(r.analyses[0].layers[0].relative_residual.value == r.analyses[3].layers[0].relative_residual.value);
  }
  SECTION("without MLP weights, SAN+MLP is left out") {
    const Model m = random_model(small(0, {true, MlpKind::none, LayerNormKind::post, MaskKind::none}));
    const CollapseResult r = run_collapse(m, input(), req);
    REQUIRE(r.variants.size() == 3);
    CHECK(r.variants[0].name == "SAN");
    CHECK(r.variants[1].name == "SAN+skip");
    CHECK(r.variants[2].name == "full");
  }
  SECTION("progress reports every variant, prefixed with its name") {
    const Model m = random_model(small(8, {true, MlpKind::residual, LayerNormKind::post, MaskKind::none}));
    std::vector<ProgressStep> steps;
    run_collapse(m, input(), req, [&](const ProgressStep& s) { steps.push_back(s); });
    REQUIRE_FALSE(steps.empty());
    CHECK_THAT(steps.front().stage, Catch::StartsWith("SAN (1/4): "));
    CHECK_THAT(steps.back().stage, Catch::StartsWith("full (4/4): "));
    CHECK(steps.back().done == steps.back().total);
  }
}

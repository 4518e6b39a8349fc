// The validated Model (model/model.hpp): construction refuses bad shapes and
// non-finite weights with a one-line message naming the source and the field;
// variants, their overrides, their spellings and their one text form.
#include "support/helpers.hpp"

#include "sanpath/model/model.hpp"
#include "sanpath/model/random.hpp"

#include <cmath>
#include <limits>

using namespace sanpath;

namespace {

RandomModelSpec small_spec(int d_ff = 6, LayerNormKind ln = LayerNormKind::post) {
  RandomModelSpec s;
  s.arch.layers = 2;
  s.arch.heads = 2;
  s.arch.d_model = 4;
  s.arch.d_qk = 3;
  s.arch.d_v = 2;
  s.arch.d_ff = d_ff;
  s.arch.variant = {true, d_ff > 0 ? MlpKind::residual : MlpKind::none, ln, MaskKind::none};
  s.bias_std = 0.1;
  s.seed = 4;
  return s;
}

/// Rebuilds `m` with `edit` applied to a copy of its layers.
template <class F> Model rebuilt(const Model& m, F edit, const std::string& source = "edited.safetensors") {
  std::vector<LayerWeights> layers = m.layers();
  Architecture a = m.arch();
  edit(a, layers);
  return Model(a, std::move(layers), m.embeddings(), source);
}

}  // namespace

TEST_CASE("a model refuses wrong shapes, naming the source, layer, head and field", "[model]") {
  const Model m = random_model(small_spec());
  CHECK_THROWS_WITH(rebuilt(m, [](Architecture&, std::vector<LayerWeights>& w) { w[1].heads[0].W_K.resize(4, 2); }),
                    "edited.safetensors: layer 1 head 0 W_K: shape [4, 2], expected [4, 3]");
  CHECK_THROWS_WITH(rebuilt(m, [](Architecture&, std::vector<LayerWeights>& w) { w[0].b_O.resize(3); }),
                    "edited.safetensors: layer 0 b_O: length 3, expected 4");
  CHECK_THROWS_WITH(rebuilt(m, [](Architecture&, std::vector<LayerWeights>& w) { w.pop_back(); }),
                    "edited.safetensors: layers: config says 2 layers, weights have 1");
  CHECK_THROWS_WITH(rebuilt(m, [](Architecture&, std::vector<LayerWeights>& w) { w[0].heads.pop_back(); }),
                    "edited.safetensors: layer 0 heads: config says 2, weights have 1");
  CHECK_THROWS_WITH(rebuilt(m, [](Architecture& a, std::vector<LayerWeights>&) { a.d_qk = 0; }),
                    "edited.safetensors: d_qk: must be at least 1, got 0");
  CHECK_THROWS_WITH(rebuilt(m, [](Architecture& a, std::vector<LayerWeights>&) { a.ln_eps = -1; }),
                    "edited.safetensors: ln_eps: must be finite and >= 0");
}

TEST_CASE("a model refuses NaN and Inf weights with their position", "[model]") {
  const Model m = random_model(small_spec());
  CHECK_THROWS_WITH(rebuilt(m,
                            [](Architecture&, std::vector<LayerWeights>& w) {
                              w[1].heads[1].W_O(1, 3) = std::numeric_limits<double>::quiet_NaN();
                            }),
                    "edited.safetensors: layer 1 head 1 W_O: NaN at [1, 3]");
  CHECK_THROWS_WITH(rebuilt(m,
                            [](Architecture&, std::vector<LayerWeights>& w) {
                              w[0].W_2(5, 0) = -std::numeric_limits<double>::infinity();
                            }),
                    "edited.safetensors: layer 0 W_2: Inf at [5, 0]");
  CHECK_THROWS_WITH(rebuilt(m,
                            [](Architecture&, std::vector<LayerWeights>& w) {
                              w[0].ln2_g(2) = std::numeric_limits<double>::infinity();
                            }),
                    "edited.safetensors: layer 0 ln2_g: Inf at [2, 0]");
}

TEST_CASE("variants the weights cannot run are refused; overrides apply field by field", "[model]") {
  // Random models always carry LayerNorm weights (gains 1): drop them here.
  const Model no_mlp = rebuilt(random_model(small_spec(0, LayerNormKind::none)),
                               [](Architecture&, std::vector<LayerWeights>& w) {
                                 for (LayerWeights& l : w) l.ln1_g = l.ln1_b = l.ln2_g = l.ln2_b = VectorXd();
                               },
                               "model");
  CHECK_FALSE(no_mlp.layer(0).has_mlp());
  CHECK_FALSE(no_mlp.layer(0).has_layernorm());
  CHECK_THROWS_WITH(no_mlp.check_supports({false, MlpKind::plain, LayerNormKind::none, MaskKind::none}),
                    "model: mlp: variant mlp=plain but layer 0 has no MLP weights");
  CHECK_THROWS_WITH(no_mlp.check_supports({false, MlpKind::none, LayerNormKind::pre, MaskKind::none}),
                    "model: layernorm: variant layernorm=pre but layer 0 has no LayerNorm weights");

  const Model full = random_model(small_spec());
  VariantOverride o;
  o.skip = false;
  o.mask = MaskKind::causal;
  const Variant v = full.resolve(o);
  CHECK(v == Variant{false, MlpKind::residual, LayerNormKind::post, MaskKind::causal});
  o.mlp = MlpKind::none;
  o.layernorm = LayerNormKind::none;
  CHECK(full.resolve(o) == Variant::san(MaskKind::causal));
  CHECK(full.resolve({}) == full.arch().variant);
  CHECK(Variant::san().attention_only());
  CHECK_FALSE(full.arch().variant.attention_only());
}

TEST_CASE("variant spellings parse and print back", "[model]") {
  CHECK(parse_mlp("plain") == MlpKind::plain);
  CHECK(parse_layernorm("pre") == LayerNormKind::pre);
  CHECK(parse_mask("causal") == MaskKind::causal);
  CHECK(parse_activation("gelu_new") == Activation::gelu_tanh);
  CHECK(parse_activation("relu") == Activation::relu);
  CHECK(parse_on_off("on", "skip"));
  CHECK_FALSE(parse_on_off("off", "skip"));
  CHECK_THROWS_WITH(parse_mlp("gated", "--mlp"), Catch::StartsWith("--mlp: 'gated' is not one of"));
  CHECK_THROWS_WITH(parse_on_off("yes", "--skip"), Catch::StartsWith("--skip: 'yes' is not one of"));
  for (MlpKind k : {MlpKind::none, MlpKind::plain, MlpKind::residual}) CHECK(parse_mlp(to_string(k)) == k);
  for (LayerNormKind k : {LayerNormKind::none, LayerNormKind::pre, LayerNormKind::post})
    CHECK(parse_layernorm(to_string(k)) == k);
  for (Activation k : {Activation::relu, Activation::gelu, Activation::gelu_tanh})
    CHECK(parse_activation(to_string(k)) == k);

  const Variant v{true, MlpKind::residual, LayerNormKind::post, MaskKind::causal};
  CHECK(to_string(v) == "skip=on mlp=residual layernorm=post mask=causal");
  CHECK(to_string(Variant::san(), VariantStyle::prose) == "skip off, mlp none, layernorm none, mask none");
}

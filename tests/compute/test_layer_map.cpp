// detail::layer_map (compute/layer_impl.hpp), the one place the block shapes
// live, run in a symbolic arithmetic whose values are the expressions the
// layer builds. Every pass (direct, centred, ball, centred ball, emulated,
// a path's sub-network) applies its sub-layers in this order, so each
// expected string below is math.md §2 / families.md written out by hand.
#include "compute/layer_impl.hpp"

#include <catch2/catch.hpp>

#include <string>

using sanpath::Architecture;
using sanpath::LayerNormKind;
using sanpath::MaskKind;
using sanpath::MlpKind;
using sanpath::Variant;
using sanpath::detail::NormAt;

namespace {

/// Values are expressions: A(·) the attention, f(·) the MLP, N1..N4 the norms, + the sum.
struct Symbolic {
  using Value = std::string;
  Value attention(const Value& X) const { return "A(" + X + ")"; }
  Value mlp(const Value& Z) const { return "f(" + Z + ")"; }
  Value norm(const Value& X, NormAt at) const {
    switch (at) {
      case NormAt::ln1:
        return "N1(" + X + ")";
      case NormAt::ln2:
        return "N2(" + X + ")";
      case NormAt::ln3:
        return "N3(" + X + ")";
      case NormAt::ln4:
        return "N4(" + X + ")";
      case NormAt::query:
      case NormAt::key:
        break;  // inside the attention: not a block's norm
    }
    return "?";
  }
  static void add(Value& Y, const Value& X) { Y = "(" + Y + " + " + X + ")"; }
};

std::string layer(const Architecture& a, bool skip, MlpKind mlp, LayerNormKind norm) {
  Variant v;
  v.skip = skip;
  v.mlp = mlp;
  v.layernorm = norm;
  v.mask = MaskKind::none;
  Symbolic ar;
  return sanpath::detail::layer_map(ar, a, v, std::string("X"));
}

}  // namespace

TEST_CASE("layer_map: math.md §2's four variants, sequential block", "[layer_map]") {
  const Architecture a;  // no sandwich norms, no parallel block
  // SAN: attention alone.
  CHECK(layer(a, false, MlpKind::none, LayerNormKind::none) == "A(X)");
  // Skip: X + Attn(X).
  CHECK(layer(a, true, MlpKind::none, LayerNormKind::none) == "(A(X) + X)");
  // Skip and a residual MLP, no norm: Z = X + Attn X, X' = Z + f(Z).
  CHECK(layer(a, true, MlpKind::residual, LayerNormKind::none) == "(f((A(X) + X)) + (A(X) + X))");
  // A plain MLP: X' = f(Z) (no residual around it).
  CHECK(layer(a, true, MlpKind::plain, LayerNormKind::none) == "f((A(X) + X))");
  // Pre-norm (GPT-2, Llama): Z = X + Attn(N1 X), X' = Z + f(N2 Z).
  CHECK(layer(a, true, MlpKind::residual, LayerNormKind::pre) ==
        "(f(N2((A(N1(X)) + X))) + (A(N1(X)) + X))");
  // Post-norm (BERT): Z = N1(X + Attn X), X' = N2(Z + f(Z)).
  CHECK(layer(a, true, MlpKind::residual, LayerNormKind::post) ==
        "N2((f(N1((A(X) + X))) + N1((A(X) + X))))");
  // Post-norm without skip or MLP: N1(Attn X).
  CHECK(layer(a, false, MlpKind::none, LayerNormKind::post) == "N1(A(X))");
}

TEST_CASE("layer_map: Gemma 2's sandwich norms act under pre-norm only", "[layer_map]") {
  Architecture a;
  a.sandwich_norms = true;
  // Z = X + N3(Attn(N1 X)), X' = Z + N4(f(N2 Z)) (families.md, Gemma 2).
  CHECK(layer(a, true, MlpKind::residual, LayerNormKind::pre) ==
        "(N4(f(N2((N3(A(N1(X))) + X)))) + (N3(A(N1(X))) + X))");
  // Without the pre-norm variant the sandwich gains are not applied.
  CHECK(layer(a, true, MlpKind::residual, LayerNormKind::none) == "(f((A(X) + X)) + (A(X) + X))");
  // A SAN with pre-norm still normalises the attention's output.
  CHECK(layer(a, false, MlpKind::none, LayerNormKind::pre) == "N3(A(N1(X)))");
}

TEST_CASE("layer_map: the parallel block sums attention, MLP and skip of one input", "[layer_map]") {
  Architecture a;
  a.parallel_residual = true;
  // GPT-NeoX, Phi: X' = Attn(N1 X) + f(N2 X) + X, summed in this order.
  CHECK(layer(a, true, MlpKind::residual, LayerNormKind::pre) == "((A(N1(X)) + f(N2(X))) + X)");
  CHECK(layer(a, false, MlpKind::residual, LayerNormKind::pre) == "(A(N1(X)) + f(N2(X)))");
  CHECK(layer(a, true, MlpKind::none, LayerNormKind::pre) == "(A(N1(X)) + X)");
  CHECK(layer(a, true, MlpKind::residual, LayerNormKind::none) == "((A(X) + f(X)) + X)");
}

TEST_CASE("layer_map: norm_parameters names each norm's weights", "[layer_map]") {
  sanpath::LayerWeights lw;
  lw.ln1_g = sanpath::VectorXd::Constant(2, 1.0);
  lw.ln1_b = sanpath::VectorXd::Constant(2, 2.0);
  lw.ln2_g = sanpath::VectorXd::Constant(2, 3.0);
  lw.ln2_b = sanpath::VectorXd::Constant(2, 4.0);
  lw.ln3_g = sanpath::VectorXd::Constant(2, 5.0);
  lw.ln4_g = sanpath::VectorXd::Constant(2, 6.0);
  const auto [g1, b1] = sanpath::detail::norm_parameters(lw, NormAt::ln1);
  const auto [g2, b2] = sanpath::detail::norm_parameters(lw, NormAt::ln2);
  const auto [g3, b3] = sanpath::detail::norm_parameters(lw, NormAt::ln3);
  const auto [g4, b4] = sanpath::detail::norm_parameters(lw, NormAt::ln4);
  CHECK(((*g1)(0) == 1.0 && (*b1)(0) == 2.0));
  CHECK(((*g2)(0) == 3.0 && (*b2)(0) == 4.0));
  CHECK(((*g3)(0) == 5.0 && b3 == nullptr));  // the sandwich norms have no bias
  CHECK(((*g4)(0) == 6.0 && b4 == nullptr));
}

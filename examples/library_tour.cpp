// The library tour of docs/tour.md: the relative residual of every layer of a
// pure self-attention network (no skip connections, no MLP, no LayerNorm),
// every doubly exponentially collapsed residual resolved by the centred pass.
#include <sanpath/analysis/forward.hpp>
#include <sanpath/analysis/collapse.hpp>
#include <sanpath/model/random.hpp>

#include <iostream>

int main() {
  // The embedded default of `sanpath collapse`: a seeded random BERT-shaped
  // model (L = 12, H = 4, d = 32) and a random input of 8 tokens.
  const sanpath::Model model = sanpath::random_model(sanpath::default_collapse_model());
  const auto input = sanpath::InputSpec::from_random(sanpath::default_collapse_input());

  // Automatic precision on the centred pass, every number confirmed by a
  // run one tier higher.
  const sanpath::ForwardAnalysis a =
      sanpath::analyze_forward(model, sanpath::Variant::san(), input, sanpath::PrecisionRequest{});

  std::cout << "precision: " << a.precision.name() << ", checked at " << a.check->name() << "\n";
  for (const sanpath::LayerReport& layer : a.layers)
    std::cout << "layer " << layer.layer << ": relative residual " << layer.relative_residual.str() << " ("
              << layer.relative_residual.digits.value_or(0) << " digits confirmed)\n";
}

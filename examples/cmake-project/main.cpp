// Consumes the installed library: a random 4-layer SAN, its residual per
// layer at automatic precision, and the exact number of its head paths.
#include <sanpath/sanpath.hpp>  // the umbrella header: everything the library offers

#include <iostream>

int main() {
  sanpath::RandomModelSpec spec;
  spec.arch.layers = 4;
  spec.arch.heads = 2;
  spec.arch.d_model = 8;
  spec.arch.d_qk = spec.arch.d_v = 4;
  spec.arch.d_ff = 0;
  spec.arch.variant = sanpath::Variant::san();
  spec.seed = 3;
  const sanpath::Model model = sanpath::random_model(spec);
  sanpath::RandomInputSpec in;
  in.n = 5;
  in.seed = 2;
  const sanpath::ForwardAnalysis a = sanpath::analyze_forward(
      model, model.arch().variant, sanpath::InputSpec::from_random(in), sanpath::PrecisionRequest{});
  for (const sanpath::LayerReport& l : a.layers)
    std::cout << "layer " << l.layer << ": " << l.relative_residual.str() << "\n";
  const sanpath::PathCounts counts = sanpath::count_paths({spec.arch.layers, spec.arch.heads, true});
  std::cout << "paths with skip connections: " << sanpath::to_decimal(counts.total) << "\n";
}

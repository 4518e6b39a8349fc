// Enumerates every path of a small SAN (Theorem 2.1: the output is a sum of
// one term P_path X W_path per head sequence) with a visitor, keeps the five
// terms of largest ‖T‖_{1,∞} and prints them.
#include <sanpath/compute/forward.hpp>
#include <sanpath/compute/embed.hpp>
#include <sanpath/model/input.hpp>
#include <sanpath/compute/paths.hpp>
#include <sanpath/model/random.hpp>

#include <algorithm>
#include <iostream>
#include <vector>

int main() {
  // A random SAN: L = 3 layers of H = 3 heads, d = 16, so 27 paths.
  sanpath::RandomModelSpec spec;
  spec.arch.layers = 3;
  spec.arch.heads = 3;
  spec.arch.d_model = 16;
  spec.arch.d_qk = spec.arch.d_v = 4;
  spec.arch.d_ff = 0;
  spec.arch.variant = sanpath::Variant::san();
  spec.std = 0.3;
  spec.seed = 7;
  const sanpath::Model model = sanpath::random_model(spec);

  // Forward pass at 128 bits, recording the attention matrices P_h^l.
  using S = sanpath::mpfr_real<38>;
  sanpath::RandomInputSpec in;
  in.n = 6;
  in.seed = 1;
  const sanpath::Matrix<S> X = sanpath::make_input<S>(model, sanpath::InputSpec::from_random(in));
  const sanpath::ForwardTrace<S> trace = sanpath::forward<S>(model, model.arch().variant, X);

  // The visitor sees every path once, in enumeration order.
  std::vector<sanpath::PathRecord<S>> all;
  sanpath::EnumerationOptions options;
  const auto result =
      sanpath::enumerate_paths<S>(model, trace, options, [&](const sanpath::PathRecord<S>& r) { all.push_back(r); });
  std::partial_sort(all.begin(), all.begin() + 5, all.end(),
                    [](const auto& a, const auto& b) { return a.norm_composite > b.norm_composite; });

  std::cout << result.paths << " paths; the five largest terms:\n";
  for (int i = 0; i < 5; ++i) {
    std::cout << "  heads";
    for (int h : all[static_cast<std::size_t>(i)].heads) std::cout << ' ' << h + 1;  // math.md numbers heads from 1
    std::cout << "  |T|_{1,inf} = "
              << sanpath::to_sci(sanpath::to_big(all[static_cast<std::size_t>(i)].norm_composite), 6)
              << "  |res(T)|_{1,inf} = "
              << sanpath::to_sci(sanpath::to_big(all[static_cast<std::size_t>(i)].residual_composite), 6) << "\n";
  }
}

// Evaluates the bound of Theorem 2.3 on a random SAN: the weight quantities
// β_l, the constant a = 4γβH/√d_qk, and per depth the bound (held as a
// logarithm, printed with its full exponent) against the measured residual
// r_l = ‖res(X^l)‖_{1,∞} with the optimal centre, and the verdict.
#include <sanpath/analysis/bounds.hpp>
#include <sanpath/model/random.hpp>

#include <iostream>

int main() {
  // A random SAN (skip off, mlp none, layernorm none): L = 4, H = 2, d = 16.
  sanpath::RandomModelSpec spec;
  spec.arch.layers = 4;
  spec.arch.heads = 2;
  spec.arch.d_model = 16;
  spec.arch.d_qk = spec.arch.d_v = 8;
  spec.arch.d_ff = 0;
  spec.arch.variant = sanpath::Variant::san();
  spec.std = 0.05;
  spec.seed = 11;
  const sanpath::Model model = sanpath::random_model(spec);

  // A small initial residual, inside the contraction radius a^(-1/2).
  sanpath::RandomInputSpec in;
  in.n = 6;
  in.seed = 5;
  in.residual = 0.05;

  sanpath::BoundsRequest request;  // theorem auto, γ = 1, automatic precision
  const sanpath::BoundsAnalysis b =
      sanpath::analyze_bounds(model, model.arch().variant, sanpath::InputSpec::from_random(in), request);
  const sanpath::BoundsReport& r = b.report;

  std::cout << "theorem " << sanpath::to_string(r.theorem.theorem) << ", gamma " << sanpath::gamma_string(r.gamma)
            << ", a = " << sanpath::to_sci(*r.a, 6) << "\n";
  for (const sanpath::DepthComparison& d : r.depths)
    std::cout << "depth " << d.layer
              << ": beta_l = " << sanpath::to_sci(r.beta[static_cast<std::size_t>(d.layer - 1)], 4)
              << "  measured r_l <= " << sanpath::to_sci(d.measured.upper, 6) << "  bound "
              << d.bound->value.to_string(6) << "  " << sanpath::to_string(d.verdict) << "\n";
}

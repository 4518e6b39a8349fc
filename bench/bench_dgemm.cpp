// Double GEMM rate of sanpath's kernel (gemm<double>, one thread) on the
// products of a BERT-base layer at n = 128, at every instruction-set level
// this CPU runs. Prints one JSON object: {"level": {"shape": GFLOP/s}, ...,
// "layer": {"level": GFLOP/s}}. bench/dgemm_rate.py runs it beside
// bench_dgemm_eigen (Eigen built with -march=native) and prints the ratios.
#include "dgemm_shapes.hpp"

#include "sanpath/core/linalg.hpp"

#include <cstdio>
#include <random>
#include <string>

int main(int argc, char** argv) {
  sanpath::set_product_threads(1);
  std::mt19937_64 g(1);
  std::normal_distribution<double> nd;
  const std::string only = argc > 1 ? argv[1] : "";
  std::printf("{");
  bool first_level = true;
  std::string layer = "\"layer\": {";
  for (const std::string& level : sanpath::supported_double_products_isas()) {
    if (!only.empty() && level != only) continue;
    sanpath::set_double_products_isa(level);
    std::printf("%s\"%s\": {", first_level ? "" : ", ", level.c_str());
    double flops = 0, secs = 0;
    bool first = true;
    for (const DgemmShape& s : kDgemmShapes) {
      sanpath::Matrix<double> A(s.m, s.k), B(s.nt ? s.n : s.k, s.nt ? s.k : s.n);
      for (double& x : A.reshaped()) x = nd(g);
      for (double& x : B.reshaped()) x = nd(g);
      sanpath::Matrix<double> C;
      const double t = seconds_per_call([&] { s.nt ? sanpath::gemm_nt(A, B, C) : sanpath::gemm(A, B, C); });
      const double f = 2.0 * double(s.m) * double(s.k) * double(s.n);
      std::printf("%s\"%s\": %.3f", first ? "" : ", ", s.name, f / t * 1e-9);
      flops += f * s.per_layer;
      secs += t * s.per_layer;
      first = false;
    }
    std::printf("}");
    layer += std::string(first_level ? "" : ", ") + "\"" + level + "\": " + std::to_string(flops / secs * 1e-9);
    first_level = false;
  }
  std::printf(", %s}}\n", layer.c_str());
}

// The peer of bench_dgemm: Eigen's double product, one thread, built for
// this CPU (-march=native: its AVX2/AVX-512 kernels), on the same shapes.
// Links nothing of sanpath. Prints {"eigen": {"shape": GFLOP/s}, "layer":
// {"eigen": GFLOP/s}, "simd": "..."}.
#include "dgemm_shapes.hpp"

#include <Eigen/Core>

#include <cstdio>

int main() {
  Eigen::setNbThreads(1);
  std::printf("{\"eigen\": {");
  double flops = 0, secs = 0;
  bool first = true;
  for (const DgemmShape& s : kDgemmShapes) {
    const Eigen::MatrixXd A = Eigen::MatrixXd::Random(s.m, s.k);
    const Eigen::MatrixXd B = Eigen::MatrixXd::Random(s.nt ? s.n : s.k, s.nt ? s.k : s.n);
    Eigen::MatrixXd C;
    const double t = seconds_per_call([&] {
      if (s.nt) {
        C.noalias() = A * B.transpose();
      } else {
        C.noalias() = A * B;
      }
    });
    const double f = 2.0 * double(s.m) * double(s.k) * double(s.n);
    std::printf("%s\"%s\": %.3f", first ? "" : ", ", s.name, f / t * 1e-9);
    flops += f * s.per_layer;
    secs += t * s.per_layer;
    first = false;
  }
  std::printf("}, \"layer\": {\"eigen\": %.3f}, \"simd\": \"%s\"}\n", flops / secs * 1e-9,
              Eigen::SimdInstructionSetsInUse());
}

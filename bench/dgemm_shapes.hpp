#pragma once
// The double products of one BERT-base layer at n = 128 tokens (d 768,
// H 12, d_h 64, d_ff 3072), as the forward pass calls them: C = A·B with A
// m×k, B k×n (column-major); "nt": B given n×k and read transposed. Shared
// by bench_dgemm (sanpath's kernel) and bench_dgemm_eigen (Eigen built for
// this CPU), which must not be linked together (Eigen's alignment and
// kernels differ between the two builds).
#include <chrono>

struct DgemmShape {
  const char* name;
  long m, k, n;
  bool nt;
  int per_layer;  // how many of it one layer runs
};

inline constexpr DgemmShape kDgemmShapes[] = {
    {"q/k/v/out  128x768 * 768x768", 128, 768, 768, false, 4},
    {"mlp up     128x768 * 768x3072", 128, 768, 3072, false, 1},
    {"mlp down   128x3072 * 3072x768", 128, 3072, 768, false, 1},
    {"scores     128x64 * (128x64)^T", 128, 64, 128, true, 12},
    {"P*V        128x128 * 128x64", 128, 128, 64, false, 12},
};

/// Seconds per call of `call` (after one warm-up call), timed over enough
/// calls to take 0.2 s.
template <class F> double seconds_per_call(F&& call) {
  call();
  for (int reps = 1;; reps *= 2) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) call();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.2) return s / reps;
  }
}

// Multiprecision products C = A·B, A n×n, B n×d (the P·V shape of attention),
// on full-precision random entries (every significand bit random):
//   raw      a plain MPFR loop, C(i,j) = Σ_p mpfr_fma into preallocated values,
//            one element at a time (A row-major, B column-major: contiguous)
//   sanpath  sanpath::gemm, one and two threads (the AVX-512 IFMA kernel when
//            the CPU has it), and one thread on the portable GMP kernel
//   eigen    Eigen's generic product on the Boost.Multiprecision type
//   arb      Arb's arb_mat_mul on exact balls (zero radius) at the same precision
// Counter macs = n·n·d.
#include "common.hpp"

#ifdef SANPATH_BENCH_HAVE_ARB
#include <arb_mat.h>
#include <flint/flint.h>
#endif

using namespace sanpath;
using namespace sanpath::bench;

namespace {

constexpr int N = 64, D = 256;

struct Rand {
  gmp_randstate_t s;
  Rand() {
    gmp_randinit_default(s);
    gmp_randseed_ui(s, 12345);
  }
  ~Rand() { gmp_randclear(s); }
};

void raw_loop(benchmark::State& state, long prec) {
  Rand r;
  std::vector<__mpfr_struct> A(N * N), B(N * D), C(N * D);
  for (auto* v : {&A, &B, &C})
    for (auto& x : *v) {
      mpfr_init2(&x, prec);
      random_full(&x, r.s);
    }
  for (auto _ : state) {
    for (int j = 0; j < D; ++j)
      for (int i = 0; i < N; ++i) {
        mpfr_ptr c = &C[static_cast<std::size_t>(i + j * N)];
        mpfr_set_zero(c, 1);
        for (int p = 0; p < N; ++p)
          mpfr_fma(c, &A[static_cast<std::size_t>(i * N + p)], &B[static_cast<std::size_t>(p + j * N)], c, MPFR_RNDN);
      }
    benchmark::ClobberMemory();
  }
  for (auto* v : {&A, &B, &C})
    for (auto& x : *v) mpfr_clear(&x);
  state.counters["macs"] = double(N) * N * D;
  state.counters["bits"] = double(prec);
}

template <class S> void sanpath_gemm(benchmark::State& state, int threads, bool ifma = true) {
  Rand r;
  const Matrix<S> A = random_full_matrix<S>(N, N, r.s), B = random_full_matrix<S>(N, D, r.s);
  Matrix<S> C;
  set_product_threads(threads);
  allow_ifma_products(ifma);
  for (auto _ : state) {
    gemm(A, B, C);
    benchmark::ClobberMemory();
  }
  allow_ifma_products(true);
  set_product_threads(0);
  state.counters["ifma"] = ifma && ifma_products_active() ? 1 : 0;
  state.counters["macs"] = double(N) * N * D;
  state.counters["bits"] = double(precision_bits_v<S>);
  state.counters["threads"] = threads == 0 ? product_threads() : threads;
}

template <class S> void eigen_generic(benchmark::State& state) {
  Rand r;
  const Matrix<S> A = random_full_matrix<S>(N, N, r.s), B = random_full_matrix<S>(N, D, r.s);
  Matrix<S> C(N, D);
  for (auto _ : state) {
    C.noalias() = A * B;
    benchmark::ClobberMemory();
  }
  state.counters["macs"] = double(N) * N * D;
  state.counters["bits"] = double(precision_bits_v<S>);
}

#ifdef SANPATH_BENCH_HAVE_ARB
void arb_product(benchmark::State& state, long prec) {
  Rand r;
  flint_set_num_threads(1);
  arb_mat_t A, B, C;
  arb_mat_init(A, N, N);
  arb_mat_init(B, N, D);
  arb_mat_init(C, N, D);
  mpfr_t x;
  mpfr_init2(x, prec);
  for (arb_mat_struct* M : {A, B})
    for (slong i = 0; i < arb_mat_nrows(M); ++i)
      for (slong j = 0; j < arb_mat_ncols(M); ++j) {
        random_full(x, r.s);
        arf_set_mpfr(arb_midref(arb_mat_entry(M, i, j)), x);
        mag_zero(arb_radref(arb_mat_entry(M, i, j)));
      }
  for (auto _ : state) {
    arb_mat_mul(C, A, B, prec);
    benchmark::ClobberMemory();
  }
  mpfr_clear(x);
  arb_mat_clear(A);
  arb_mat_clear(B);
  arb_mat_clear(C);
  state.counters["macs"] = double(N) * N * D;
  state.counters["bits"] = double(prec);
}
#endif

template <class S> void register_tier(int iters_fast, int iters_slow) {
  const long p = precision_bits_v<S>;
  const std::string b = "products/" + std::to_string(p) + "/";
  benchmark::RegisterBenchmark((b + "raw").c_str(), [=](benchmark::State& s) { raw_loop(s, p); })
      ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iters_fast);
  benchmark::RegisterBenchmark((b + "sanpath/threads:1").c_str(), [](benchmark::State& s) { sanpath_gemm<S>(s, 1); })
      ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iters_fast);
  benchmark::RegisterBenchmark((b + "sanpath/threads:2").c_str(), [](benchmark::State& s) { sanpath_gemm<S>(s, 2); })
      ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iters_fast);
  benchmark::RegisterBenchmark((b + "sanpath_portable/threads:1").c_str(),
                               [](benchmark::State& s) { sanpath_gemm<S>(s, 1, false); })
      ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iters_fast);
  benchmark::RegisterBenchmark((b + "eigen").c_str(), [](benchmark::State& s) { eigen_generic<S>(s); })
      ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iters_slow);
#ifdef SANPATH_BENCH_HAVE_ARB
  benchmark::RegisterBenchmark((b + "arb").c_str(), [=](benchmark::State& s) { arb_product(s, p); })
      ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iters_fast);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  register_tier<mpfr_real<77>>(3, 1);   // 257 bits
  register_tier<mpfr_real<154>>(2, 1);  // 513 bits
  register_tier<mpfr_real<308>>(1, 1);  // 1025 bits
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

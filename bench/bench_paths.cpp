// Path terms on attention-only models (skip on): depth-first enumeration of
// the path tree against the same products in a tight gemm loop, the length
// sums on the BERT-base shape, and the branch-and-bound top-10 on it (the
// forward pass and the search, as `sanpath paths --enumerate --top 10` runs
// them; 13^12 ≈ 2.3·10^13 paths). Counters: steps (tree nodes with a
// product), macs, peak_rss_MiB (of the whole process: run one benchmark per
// process to read it per configuration).
#include "common.hpp"

#include "sanpath/compute/paths.hpp"
#include "sanpath/compute/top_paths.hpp"

using namespace sanpath;
using namespace sanpath::bench;

namespace {

Variant san_skip() { return {true, MlpKind::none, LayerNormKind::none, MaskKind::none}; }

/// records: a visitor receives every path's record (prefix products P_path
/// and norms per leaf); otherwise the walk only sums the terms by length.
template <class S> void enumerate(benchmark::State& state, int L, int H, int n, int d, int threads, bool records_wanted = true) {
  const Architecture a = arch(L, H, d, d / H, false, san_skip());
  const Model model = make_model(a);
  const ForwardTrace<S> t = forward<S>(model, a.variant, convert<S>(make_input(n, d)));
  EnumerationOptions o;
  o.threads = threads;
  o.accumulate = !records_wanted;
  std::uint64_t paths = 0;
  set_product_threads(1);  // the enumeration's own threads only
  for (auto _ : state) {
    std::uint64_t records = 0;
    const EnumerationResult<S> r =
        records_wanted ? enumerate_paths<S>(model, t, o, [&](const PathRecord<S>&) { ++records; })
                       : enumerate_paths<S>(model, t, o, {});
    paths = r.paths;
    benchmark::DoNotOptimize(records);
  }
  set_product_threads(0);
  const TreeCounts c = tree_counts(L, H);
  state.counters["paths"] = static_cast<double>(paths);
  state.counters["steps"] = c.steps;
  state.counters["macs"] = c.steps * step_macs(n, d, d / H) + (records_wanted ? c.prefix_products * prefix_macs(n) : 0);
  state.counters["threads"] = threads;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

/// The products of every tree step, back to back with the library's gemm
/// (with the prefix products P_h·P of a walk with records, or without).
template <class S> void gemm_loop(benchmark::State& state, int L, int H, int n, int d, bool prefix_wanted = true) {
  const int dv = d / H;
  const Matrix<S> Y = convert<S>(make_input(n, d)), WV = convert<S>(MatrixXd::Random(d, dv)),
                  WO = convert<S>(MatrixXd::Random(dv, d));
  MatrixXd p = MatrixXd::Random(n, n).cwiseAbs();
  for (Eigen::Index i = 0; i < n; ++i) p.row(i) /= p.row(i).sum();
  const Matrix<S> P = convert<S>(p);
  Matrix<S> t1, t2, Yn, Pn;
  const TreeCounts c = tree_counts(L, H);
  const auto steps = static_cast<std::int64_t>(c.steps);
  const auto prefix = prefix_wanted ? static_cast<std::int64_t>(c.prefix_products) : 0;
  set_product_threads(1);
  for (auto _ : state) {
    for (std::int64_t s = 0; s < steps; ++s) {
      gemm(Y, WV, t1);
      gemm(t1, WO, t2);
      gemm(P, t2, Yn);
      if (s < prefix) gemm(P, P, Pn);
    }
    benchmark::DoNotOptimize(Yn.data());
  }
  set_product_threads(0);
  state.counters["steps"] = c.steps;
  state.counters["macs"] = c.steps * step_macs(n, d, dv) + double(prefix) * prefix_macs(n);
  state.counters["threads"] = 1;
}

template <class S> void sums(benchmark::State& state, const Architecture& a, int n, int threads) {
  const Model model = make_model(a);
  const ForwardTrace<S> t = forward<S>(model, a.variant, convert<S>(make_input(n, a.d_model)));
  set_product_threads(threads);
  for (auto _ : state) {
    const LengthSums<S> r = length_sums<S>(model, t, threads);
    benchmark::DoNotOptimize(r.terms.back().sum.data());
  }
  set_product_threads(0);
  state.counters["macs"] = length_sum_macs(a, n);
  state.counters["threads"] = threads;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

/// Forward pass (attention recorded) and the top-K search, per iteration.
void top_k(benchmark::State& state, int n, std::size_t k, int threads) {
  const Architecture a = arch(12, 12, 768, 64, false, san_skip());
  const Model model = make_model(a);
  const MatrixXd X0 = make_input(n, a.d_model);
  TopPathsOptions o;
  o.k = k;
  o.threads = threads;
  set_product_threads(threads);
  TopPathsResult<double> r;
  for (auto _ : state) {
    const ForwardTrace<double> t = forward<double>(model, a.variant, X0);
    r = top_paths<double>(model, t, o);
    benchmark::DoNotOptimize(r.records.data());
  }
  set_product_threads(0);
  state.counters["paths"] = static_cast<double>(r.paths);
  state.counters["nodes"] = static_cast<double>(r.nodes);
  state.counters["leaves"] = static_cast<double>(r.leaves);
  state.counters["threads"] = threads;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

std::string shape(int L, int H, int n, int d) {
  return "L" + std::to_string(L) + "H" + std::to_string(H) + "n" + std::to_string(n) + "d" + std::to_string(d);
}

}  // namespace

int main(int argc, char** argv) {
  for (int L : {4, 5}) {
    const int H = 8, n = 32, d = 64, iters = L == 4 ? 3 : 1;
    for (int t : {1, 2})
      benchmark::RegisterBenchmark(("enumerate/double/" + shape(L, H, n, d) + "/threads:" + std::to_string(t)).c_str(),
                                   [=](benchmark::State& s) { enumerate<double>(s, L, H, n, d, t); })
          ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iters);
    benchmark::RegisterBenchmark(("gemm_loop/double/" + shape(L, H, n, d)).c_str(),
                                 [=](benchmark::State& s) { gemm_loop<double>(s, L, H, n, d); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iters);
    // The walk alone: sums by length, no records (so no prefix products either).
    for (int t : {1, 2})
      benchmark::RegisterBenchmark(("enumerate_sums/double/" + shape(L, H, n, d) + "/threads:" + std::to_string(t)).c_str(),
                                   [=](benchmark::State& s) { enumerate<double>(s, L, H, n, d, t, false); })
          ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iters);
    benchmark::RegisterBenchmark(("gemm_loop_steps/double/" + shape(L, H, n, d)).c_str(),
                                 [=](benchmark::State& s) { gemm_loop<double>(s, L, H, n, d, false); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iters);
  }
  {  // one MPFR row: 257 bits, smaller tree
    const int L = 4, H = 4, n = 16, d = 32;
    for (int t : {1, 2})
      benchmark::RegisterBenchmark(("enumerate/257/" + shape(L, H, n, d) + "/threads:" + std::to_string(t)).c_str(),
                                   [=](benchmark::State& s) { enumerate<mpfr_real<77>>(s, L, H, n, d, t); })
          ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
    benchmark::RegisterBenchmark(("gemm_loop/257/" + shape(L, H, n, d)).c_str(),
                                 [=](benchmark::State& s) { gemm_loop<mpfr_real<77>>(s, L, H, n, d); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
    for (int t : {1, 2})
      benchmark::RegisterBenchmark(("enumerate_sums/257/" + shape(L, H, n, d) + "/threads:" + std::to_string(t)).c_str(),
                                   [=](benchmark::State& s) { enumerate<mpfr_real<77>>(s, L, H, n, d, t, false); })
          ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
    benchmark::RegisterBenchmark(("gemm_loop_steps/257/" + shape(L, H, n, d)).c_str(),
                                 [=](benchmark::State& s) { gemm_loop<mpfr_real<77>>(s, L, H, n, d, false); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
  }
  const Architecture bert_san = bert_base(false, san_skip());
  for (int t : {1, 2})
    benchmark::RegisterBenchmark(("length_sums/bert/double/threads:" + std::to_string(t)).c_str(),
                                 [=](benchmark::State& s) { sums<double>(s, bert_san, 128, t); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
  for (int t : {1, 2})
    benchmark::RegisterBenchmark(("top_paths/bert/double/n32/k10/threads:" + std::to_string(t)).c_str(),
                                 [=](benchmark::State& s) { top_k(s, 32, 10, t); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

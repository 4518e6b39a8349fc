// Scaling of forward passes, length sums and path enumeration with n, d, L,
// H and the precision. Every benchmark reports its multiply-add count
// (macs) and the process's peak memory (peak_rss_MiB): bench/run runs each in
// its own process and compares time growth with operation-count growth.
#include "common.hpp"

#include "sanpath/compute/paths.hpp"

using namespace sanpath;
using namespace sanpath::bench;

namespace {

Variant san_skip() { return {true, MlpKind::none, LayerNormKind::none, MaskKind::none}; }

template <class S> void fwd(benchmark::State& state, const Architecture& a, int n) {
  const Model model = make_model(a);
  const Matrix<S> X0 = convert<S>(make_input(n, a.d_model));
  set_product_threads(1);
  for (auto _ : state) {
    ForwardTrace<S> t = forward<S>(model, a.variant, X0);
    benchmark::DoNotOptimize(t.X.back().data());
  }
  set_product_threads(0);
  state.counters["macs"] = forward_macs(a, n, a.variant.mlp != MlpKind::none);
  state.counters["bits"] = double(precision_bits_v<S>);
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

void sums(benchmark::State& state, const Architecture& a, int n) {
  const Model model = make_model(a);
  const ForwardTrace<double> t = forward<double>(model, a.variant, make_input(n, a.d_model));
  set_product_threads(1);
  for (auto _ : state) {
    const LengthSums<double> r = length_sums<double>(model, t, 1);
    benchmark::DoNotOptimize(r.terms.back().sum.data());
  }
  set_product_threads(0);
  state.counters["macs"] = length_sum_macs(a, n);
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

void enumerate(benchmark::State& state, int L, int H, int n, int d) {
  const Architecture a = arch(L, H, d, d / H, false, san_skip());
  const Model model = make_model(a);
  const ForwardTrace<double> t = forward<double>(model, a.variant, make_input(n, d));
  EnumerationOptions o;
  o.threads = 1;
  set_product_threads(1);
  for (auto _ : state) {
    std::uint64_t records = 0;
    const EnumerationResult<double> r =
        enumerate_paths<double>(model, t, o, [&](const PathRecord<double>&) { ++records; });
    benchmark::DoNotOptimize(r.paths);
  }
  set_product_threads(0);
  const TreeCounts c = tree_counts(L, H);
  state.counters["steps"] = c.steps;
  state.counters["macs"] = c.steps * step_macs(n, d, d / H) + c.prefix_products * prefix_macs(n);
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

std::string shape(int n, int d, int L, int H) {
  return "n" + std::to_string(n) + "d" + std::to_string(d) + "L" + std::to_string(L) + "H" + std::to_string(H);
}

template <class S> void register_precision(const std::string& name) {
  const Architecture a = arch(2, 2, 64, 32, false, Variant::san());
  benchmark::RegisterBenchmark(("scale/precision/" + name).c_str(), [=](benchmark::State& s) { fwd<S>(s, a, 32); })
      ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
}

}  // namespace

int main(int argc, char** argv) {
  struct Cfg {
    int n, d, L, H;
  };
  const Cfg cfgs[] = {{64, 256, 4, 4}, {128, 256, 4, 4}, {64, 512, 4, 4}, {64, 256, 8, 4}, {64, 256, 4, 8}};
  for (const Cfg& c : cfgs) {
    const Architecture full = arch(c.L, c.H, c.d, 32, true, {true, MlpKind::residual, LayerNormKind::post, MaskKind::none});
    benchmark::RegisterBenchmark(("scale/forward/" + shape(c.n, c.d, c.L, c.H)).c_str(),
                                 [=](benchmark::State& s) { fwd<double>(s, full, c.n); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
    const Architecture as = arch(c.L, c.H, c.d, 32, false, san_skip());
    benchmark::RegisterBenchmark(("scale/length_sums/" + shape(c.n, c.d, c.L, c.H)).c_str(),
                                 [=](benchmark::State& s) { sums(s, as, c.n); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
  }
  const Cfg trees[] = {{16, 64, 4, 4}, {32, 64, 4, 4}, {16, 128, 4, 4}, {16, 64, 5, 4}, {16, 64, 4, 8}};
  for (const Cfg& c : trees)
    benchmark::RegisterBenchmark(("scale/enumerate/" + shape(c.n, c.d, c.L, c.H)).c_str(),
                                 [=](benchmark::State& s) { enumerate(s, c.L, c.H, c.n, c.d); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
  register_precision<double>("double");
  register_precision<mpfr_real<38>>("128");
  register_precision<mpfr_real<77>>("257");
  register_precision<mpfr_real<154>>("513");
  register_precision<mpfr_real<308>>("1025");
  register_precision<mpfr_real<617>>("2051");

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

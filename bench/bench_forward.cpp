// Forward passes: BERT-base in double against plain Eigen GEMMs of the same
// shapes, and SANs at 513 bits (the 512-bit target; MPFR tiers carry p+1 bits).
// Counters: macs (multiply-adds of the pass's products), peak_rss_MiB.
#include "common.hpp"

#include "sanpath/analysis/forward.hpp"

using namespace sanpath;
using namespace sanpath::bench;

namespace {

template <class S>
void run_forward(benchmark::State& state, const Architecture& a, int n, int threads) {
  const Model model = make_model(a);
  const Matrix<S> X0 = convert<S>(make_input(n, a.d_model));
  set_product_threads(threads);
  for (auto _ : state) {
    ForwardTrace<S> t = forward<S>(model, a.variant, X0);
    benchmark::DoNotOptimize(t.X.back().data());
  }
  set_product_threads(0);
  state.counters["macs"] = forward_macs(a, n, a.variant.mlp != MlpKind::none);
  state.counters["threads"] = threads;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

/// The products of the BERT-base pass, each `C.noalias() = A*B` with plain
/// Eigen (one thread), operands preallocated.
void plain_eigen(benchmark::State& state) {
  const Architecture a = bert_base();
  const std::vector<Shape> shapes = forward_shapes(a, 128, true);
  struct Operands {
    MatrixXd A, B, C;
  };
  std::vector<Operands> ops;
  for (const Shape& s : shapes) {
    Operands o;
    o.A = MatrixXd::Random(s.m, s.k);
    o.B = s.trans ? MatrixXd::Random(s.n, s.k) : MatrixXd::Random(s.k, s.n);
    o.C.resize(s.m, s.n);
    ops.push_back(std::move(o));
  }
  for (auto _ : state) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      Operands& o = ops[i];
      if (shapes[i].trans)
        o.C.noalias() = o.A * o.B.transpose();
      else
        o.C.noalias() = o.A * o.B;
      benchmark::DoNotOptimize(o.C.data());
    }
  }
  state.counters["macs"] = forward_macs(a, 128, true);
  state.counters["threads"] = 1;
}

/// The library call behind `sanpath forward --precision double --no-confirm`
/// and Python's sanpath.forward(..., precision="double", confirm=False):
/// analyze_forward on BERT-base (make_model, = bench_export bert) with the
/// random input of make_input(128, 768) as an InputSpec. The Python side is
/// bench/peers/forward_python.py on the same model and input.
void analyze_double(benchmark::State& state) {
  const Architecture a = bert_base();
  const Model model = make_model(a);
  RandomInputSpec in;
  in.n = 128;
  in.d = a.d_model;
  in.seed = 2;
  const InputSpec input = InputSpec::from_random(in);
  PrecisionRequest req;
  req.automatic = false;
  req.fixed = Precision::double_precision();
  req.confirm = false;
  for (auto _ : state) {
    const ForwardAnalysis r = analyze_forward(model, a.variant, input, req);
    benchmark::DoNotOptimize(r.layers.data());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Architecture bert = bert_base();
  for (int t : {1, 2})
    benchmark::RegisterBenchmark(("forward/bert/double/threads:" + std::to_string(t)).c_str(),
                                 [=](benchmark::State& s) { run_forward<double>(s, bert, 128, t); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
  benchmark::RegisterBenchmark("analyze/bert/double", analyze_double)
      ->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->Iterations(3);
  benchmark::RegisterBenchmark("gemm/bert/eigen", plain_eigen)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

  const Architecture san = arch(6, 8, 256, 32, false, Variant::san());
  for (int t : {1, 2})
    benchmark::RegisterBenchmark(("forward/san513/L6H8n64d256/threads:" + std::to_string(t)).c_str(),
                                 [=](benchmark::State& s) { run_forward<mpfr_real<154>>(s, san, 64, t); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
  // = bench_export san-small: the big SAN with 4 layers, which mpmath finishes in about a minute
  const Architecture small = arch(4, 8, 256, 32, false, Variant::san());
  for (int t : {1, 2})
    benchmark::RegisterBenchmark(("forward/san513/L4H8n64d256/threads:" + std::to_string(t)).c_str(),
                                 [=](benchmark::State& s) { run_forward<mpfr_real<154>>(s, small, 64, t); })
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

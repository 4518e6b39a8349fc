#pragma once
// Length sums (math.md §4: the sum of all path terms of each length, by the
// recursion over layers, without enumerating) and uniform sampling of paths
// of one length. Part of the PATHS module: included by paths_impl.hpp, whose
// SANPATH_INSTANTIATE_PATHS instantiates them; they use its value maps.
#include "sanpath/compute/paths.hpp"

namespace sanpath {

namespace detail {

/// M = Σ_h P_h (S W_h) for one layer. Factored maps: the heads are folded
/// into two wide products, U = S·[W_V^1 … W_V^H] and
/// M = [P_1 U_1 … P_H U_H]·[W_O^1; …; W_O^H]; otherwise per head.
template <class S> struct HeadSumWork {
  Matrix<S> U, Uh, PU, cat, t1, t2;
};

template <class S>
void head_sum(const LayerMaps<S>& m, const std::vector<Matrix<S>>& P, const Matrix<S>& Sm, Eigen::Index dv,
              Matrix<S>& M, HeadSumWork<S>& w) {
  const auto H = static_cast<Eigen::Index>(P.size());
  if (m.factored) {
    gemm(Sm, m.WVp, w.U);
    if (w.cat.rows() != Sm.rows() || w.cat.cols() != H * dv) w.cat.resize(Sm.rows(), H * dv);
    for (Eigen::Index h = 0; h < H; ++h) {
      w.Uh = w.U.middleCols(h * dv, dv);
      gemm(P[static_cast<std::size_t>(h)], w.Uh, w.PU);
      w.cat.middleCols(h * dv, dv) = w.PU;
    }
    gemm(w.cat, m.WOp, M);
  } else {
    for (Eigen::Index h = 0; h < H; ++h) {
      gemm(Sm, m.W[static_cast<std::size_t>(h)], w.t1);
      gemm(P[static_cast<std::size_t>(h)], w.t1, h == 0 ? M : w.t2);
      if (h > 0) M += w.t2;
    }
  }
}

}  // namespace detail

template <class S> LengthSums<S> length_sums(const Model& model, const ForwardTrace<S>& trace, int threads) {
  detail::check_trace(model, trace);
  const Architecture& a = model.arch();
  const int L = a.layers;
  const bool skip = trace.variant.skip;
  const Eigen::Index n = trace.X[0].rows(), d = trace.X[0].cols();
  const auto Lz = static_cast<std::size_t>(L);
  const int nthreads = resolve_threads(threads);

  // Sk[k] = S_k^l; an empty matrix stands for 0.
  std::vector<Matrix<S>> Sk(Lz + 1), M(Lz + 1);
  Sk[0] = trace.X[0];
  detail::BiasAccumulator<S> bias(d);
  for (int l = 0; l < L; ++l) {
    const detail::LayerMaps<S> maps = detail::layer_maps<S>(a, model.layer(l), true);
    const auto& P = trace.P[static_cast<std::size_t>(l)];
    // Lengths updated by this layer: k = 1..l+1 with S_{k-1} nonzero.
    std::vector<std::size_t> ks;
    for (std::size_t k = 1; k <= static_cast<std::size_t>(l) + 1; ++k)
      if (Sk[k - 1].size() != 0) ks.push_back(k);
    auto work = [&](std::size_t first, std::size_t stride) {
      detail::HeadSumWork<S> w;
      for (std::size_t i = first; i < ks.size(); i += stride) detail::head_sum(maps, P, Sk[ks[i] - 1], a.d_v, M[ks[i]], w);
    };
    const std::size_t T = std::min<std::size_t>(static_cast<std::size_t>(nthreads), ks.size());
    if (T <= 1) {
      work(0, 1);
    } else {
      std::vector<std::thread> pool;
      std::exception_ptr error;
      std::mutex mu;
      for (std::size_t t = 0; t < T; ++t)
        pool.emplace_back([&, t] {
          MpfrThreadCaches caches;
          SerialProductsScope serial;  // the workers are the parallelism: products inside run serially
          try {
            work(t, T);
          } catch (...) {
            std::lock_guard<std::mutex> lock(mu);
            if (!error) error = std::current_exception();
          }
        });
      for (auto& th : pool) th.join();
      if (error) std::rethrow_exception(error);
    }
    // S_k^l = [skip] S_k^{l-1} + M_k, descending k so S_{k-1}^{l-1} is read first
    // (M already holds every product, so the order only matters for the swap).
    for (auto it = ks.rbegin(); it != ks.rend(); ++it) {
      const std::size_t k = *it;
      if (skip && Sk[k].size() != 0)
        Sk[k] += M[k];
      else
        Sk[k].swap(M[k]);
    }
    if (!skip)
      for (std::size_t k = 0; k <= static_cast<std::size_t>(l); ++k) Sk[k].resize(0, 0);
    bias.add_layer(maps, a.heads, skip);
  }

  LengthSums<S> out;
  out.bias = bias.value();
  const Matrix<S>& XL = trace.X.back();
  out.output_frobenius = norm_frobenius(XL);
  const std::vector<PathCount> counts = count_paths_by_length(L, a.heads, skip);
  out.reconstruction = detail::zeros<S>(n, d);
  out.terms.resize(Lz + 1);
  for (std::size_t k = 0; k <= Lz; ++k) {
    LengthSum<S>& t = out.terms[k];
    t.length = static_cast<int>(k);
    t.count = counts[k];
    t.sum = Sk[k].size() != 0 ? std::move(Sk[k]) : detail::zeros<S>(n, d);
    t.frobenius = norm_frobenius(t.sum);
    t.residual_composite = detail::mean_residual_composite(t.sum);
    t.share = out.output_frobenius != 0 ? S(t.frobenius / out.output_frobenius) : S(0);
    out.reconstruction += t.sum;
  }
  out.reconstruction.rowwise() += out.bias;
  out.error = relative_max_error(out.reconstruction, XL);
  return out;
}

namespace detail {
/// Sampled paths per shared block of sample_paths.
inline constexpr std::size_t sample_block = 64;

template <class S> MeanInterval<S> mean_interval(const std::vector<S>& v) {
  using std::sqrt;
  const S N = S(static_cast<double>(v.size()));
  S sum(0);
  for (const S& x : v) sum += x;
  MeanInterval<S> r;
  r.mean = sum / N;
  S ss(0);
  for (const S& x : v) {
    const S c = x - r.mean;
    ss += c * c;
  }
  r.stddev = sqrt(S(ss / S(N - S(1))));
  const S half = decimal_constant<S>(1.959963984540054) * r.stddev / sqrt(N);
  r.low = r.mean - half;
  r.high = r.mean + half;
  return r;
}
}  // namespace detail

template <class S>
std::vector<LengthSample<S>> sample_paths(const Model& model, const ForwardTrace<S>& trace, const SampleOptions& options) {
  detail::check_trace(model, trace);
  const int L = model.arch().layers, H = model.arch().heads;
  const bool skip = trace.variant.skip;
  if (options.samples < 2)
    throw std::invalid_argument("path sampling: samples: at least 2 are needed for a confidence interval, got " +
                                std::to_string(options.samples));
  for (int k : options.lengths)
    if (k < 0 || k > L || (!skip && k != L))
      throw std::invalid_argument("path sampling: length " + std::to_string(k) + " has no paths (" +
                                  (skip ? "lengths run over 0.." + std::to_string(L)
                                        : "without skip every path has length " + std::to_string(L)) +
                                  ")");
  const std::vector<PathCount> counts = count_paths_by_length(L, H, skip);
  const detail::PathContext<S> ctx(model, trace);
  const detail::PathPlan plan = detail::make_path_plan(L, H, skip, {});  // sample paths are complete prefixes
  std::vector<LengthSample<S>> out;
  // Per length: the paths first (one generator, in sample order), then
  // their terms in blocks shared over the threads and ranks (items numbered
  // over every length): the values, and so the statistics, depend on neither.
  const std::size_t block = detail::sample_block;
  SharedJob job("block of " + std::to_string(block) + " sampled paths",
                "blocks of " + std::to_string(block) + " sampled paths");
  std::size_t first = 0;
  for (int k : options.lengths) {
    Rng rng(options.seed + static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ULL);
    std::vector<std::vector<int>> paths(options.samples);
    for (auto& heads : paths) heads = random_path(rng, L, H, skip, k);
    std::vector<S> norms(paths.size()), residuals(paths.size());
    const std::size_t blocks = (paths.size() + block - 1) / block;
    const auto begin = [&](std::size_t item) { return (item - first) * block; };
    const auto end = [&](std::size_t item) { return std::min(paths.size(), (item - first + 1) * block); };
    job.round(
        first, blocks, detail::task_parallel_for(options.threads),
        [&](std::size_t item) {
          detail::PathWalker<S> walker(ctx, plan, false);
          for (std::size_t i = begin(item); i < end(item); ++i)
            walker.run(paths[i], [&](const std::vector<int>&, int, const Matrix<S>& T, const Matrix<S>*) {
              norms[i] = norm_composite(T);
              residuals[i] = detail::mean_residual_composite(T);
            });
        },
        [&](std::size_t item) {
          ByteWriter w;
          for (std::size_t i = begin(item); i < end(item); ++i) w(norms[i], residuals[i]);
          return w.bytes();
        },
        [&](std::size_t item, const std::string& bytes) {
          ByteReader r(bytes);
          for (std::size_t i = begin(item); i < end(item); ++i) r(norms[i], residuals[i]);
          r.finish();
        });
    first += blocks;
    LengthSample<S> ls;
    ls.length = k;
    ls.samples = options.samples;
    ls.population = counts[static_cast<std::size_t>(k)];
    ls.norm = detail::mean_interval(norms);
    ls.residual = detail::mean_interval(residuals);
    out.push_back(std::move(ls));
  }
  return out;
}

}  // namespace sanpath

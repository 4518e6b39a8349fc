#pragma once
#include "sanpath/compute/top_paths.hpp"
#include "compute/paths_impl.hpp"

#include <Eigen/Eigenvalues>

#include <cmath>

namespace sanpath {
namespace detail {

/// Upper bound on ‖W_V W_O‖_2 from the d_v×d_v Gram matrices, in double,
/// enlarged by a relative 10^-6.
inline double value_output_spectral_bound(const HeadWeights& hw) {
  const auto top = [](const MatrixXd& gram) {
    Eigen::SelfAdjointEigenSolver<MatrixXd> es(gram, Eigen::EigenvaluesOnly);
    return std::sqrt(std::max(0.0, es.eigenvalues().maxCoeff()));
  };
  const MatrixXd gv = hw.W_V.transpose() * hw.W_V, go = hw.W_O * hw.W_O.transpose();
  // Gram entries and eigenvalues carry relative rounding ~d·2^-53 of the largest.
  const double s = top(gv) * top(go);
  return s * (1 + 1e-6) + 1e-300;
}

/// r2 = largest row 2-norm and ‖Y‖_F of a node's term (double: scaled by a
/// power of two so that tiny or huge entries neither underflow nor overflow).
template <class S> void row_and_frobenius(const Matrix<S>& Y, S& r2, S& fro) {
  using std::sqrt;
  if constexpr (std::is_same_v<S, double>) {
    const double amax = Y.cwiseAbs().maxCoeff();
    if (amax == 0 || !std::isfinite(amax)) {
      r2 = fro = amax;
      return;
    }
    int e = 0;
    std::frexp(amax, &e);
    const double sc = std::ldexp(1.0, -e);
    double best = 0, total = 0;
    for (Eigen::Index i = 0; i < Y.rows(); ++i) {
      double row = 0;
      for (Eigen::Index j = 0; j < Y.cols(); ++j) {
        const double v = Y(i, j) * sc;
        row += v * v;
      }
      best = std::max(best, row);
      total += row;
    }
    r2 = std::ldexp(std::sqrt(best), e);
    fro = std::ldexp(std::sqrt(total), e);
  } else {
    S best(0), total(0), row, v;
    for (Eigen::Index i = 0; i < Y.rows(); ++i) {
      row = 0;
      for (Eigen::Index j = 0; j < Y.cols(); ++j) {
        v = Y(i, j);
        v *= Y(i, j);
        row += v;
      }
      if (row > best) best = row;
      total += row;
    }
    r2 = sqrt(best);
    fro = sqrt(total);
  }
}

/// The bounds of top_paths.hpp: per-layer constants, suffix products and
/// the node / child tests against a threshold.
template <class S> class SubtreeBound {
 public:
  SubtreeBound(const Model& model, const ForwardTrace<S>& trace, const PathPlan& plan) {
    using std::sqrt;
    const int L = plan.layers;
    const Eigen::Index n = trace.X[0].rows(), d = trace.X[0].cols();
    n_ = S(static_cast<double>(n));
    sqrt_n_ = sqrt(n_);
    sqrt_d_ = sqrt(S(static_cast<double>(d)));
    slack_ = S(1) + S(1e-6);
    const auto Lz = static_cast<std::size_t>(L);
    w2_.assign(Lz, std::vector<S>(static_cast<std::size_t>(plan.heads), S(0)));
    sqrt_p1_ = w2_;
    omega_.assign(Lz + 1, S(1));
    pi_.assign(Lz + 1, S(1));
    std::vector<S> wmax(Lz, S(0)), pmax(Lz, S(0));
    for (int l = 0; l < L; ++l) {
      const auto li = static_cast<std::size_t>(l);
      for (const int c : plan.choices[li]) {
        if (c < 0) {
          if (wmax[li] < 1) wmax[li] = 1;
          if (pmax[li] < 1) pmax[li] = 1;
          continue;
        }
        const auto hi = static_cast<std::size_t>(c);
        w2_[li][hi] = S(value_output_spectral_bound(model.layer(l).heads[hi]));
        const S p1 = norm_1(trace.P[li][hi]) * slack_;
        sqrt_p1_[li][hi] = sqrt(p1);
        if (w2_[li][hi] > wmax[li]) wmax[li] = w2_[li][hi];
        if (p1 > pmax[li]) pmax[li] = p1;
      }
    }
    for (int l = L - 1; l >= 0; --l) {
      const auto li = static_cast<std::size_t>(l);
      omega_[li] = omega_[li + 1] * wmax[li];
      pi_[li] = pi_[li + 1] * pmax[li];
    }
    for (auto& p : pi_)
      if (p > n_) p = n_;
  }

  /// Upper bound on ‖T‖_{1,∞} over the completions of a node at `depth`
  /// whose term has largest row 2-norm r2 and Frobenius norm fro.
  S bound(int depth, const S& r2, const S& fro) const {
    using std::sqrt;
    const auto D = static_cast<std::size_t>(depth);
    S one = n_ * r2;
    const S alt = pi_[D] * sqrt_n_ * fro;
    if (alt < one) one = alt;
    return sqrt(S(one * sqrt_d_ * r2)) * omega_[D] * slack_;
  }
  /// The same for the child through head h of layer l, before it is formed.
  S child_bound(int l, int h, const S& r2, const S& fro) const {
    const auto li = static_cast<std::size_t>(l), hi = static_cast<std::size_t>(h);
    const S& w = w2_[li][hi];
    return bound(l + 1, S(r2 * w), S(fro * sqrt_p1_[li][hi] * w));
  }

 private:
  S n_, sqrt_n_, sqrt_d_, slack_;
  std::vector<std::vector<S>> w2_, sqrt_p1_;
  std::vector<S> omega_, pi_;
};

/// The pruning visitor of one task: prunes against max(seed, the task's own K-th best).
template <class S> class TaskPruner {
 public:
  TaskPruner(const SubtreeBound<S>& b, const S& seed, const TopK<S>& top, int layers)
      : b_(b), seed_(seed), top_(top), r2_(static_cast<std::size_t>(layers) + 1),
        fro_(static_cast<std::size_t>(layers) + 1) {}
  void start(const Matrix<S>& X) { row_and_frobenius(X, r2_[0], fro_[0]); }
  bool child(int l, int h, const Matrix<S>&) {
    const auto li = static_cast<std::size_t>(l);
    if (below(b_.child_bound(l, h, r2_[li], fro_[li]))) {
      ++skipped;
      return false;
    }
    ++nodes;
    return true;
  }
  bool node(int depth, const Matrix<S>& Y) {
    const auto di = static_cast<std::size_t>(depth);
    row_and_frobenius(Y, r2_[di], fro_[di]);
    return !below(b_.bound(depth, r2_[di], fro_[di]));
  }
  std::uint64_t nodes = 0, skipped = 0;

 private:
  bool below(const S& v) const {
    if (v < seed_) return true;
    const PathRecord<S>* k = top_.kth();
    return k != nullptr && v < k->norm_composite;
  }
  const SubtreeBound<S>& b_;
  const S& seed_;
  const TopK<S>& top_;
  std::vector<S> r2_, fro_;
};

/// Subtree tasks per round of top_paths (fixed: the pruning, and so the
/// node counts, must not depend on the threads or ranks).
inline constexpr std::size_t top_paths_round = 128;

/// Does `heads` pass the plan (allowed choices, length range)?
inline bool plan_allows(const PathPlan& plan, const std::vector<int>& heads) {
  int len = 0;
  for (std::size_t l = 0; l < heads.size(); ++l) {
    const auto& ch = plan.choices[l];
    if (std::find(ch.begin(), ch.end(), heads[l]) == ch.end()) return false;
    len += heads[l] >= 0 ? 1 : 0;
  }
  return len >= plan.kmin && len <= plan.kmax;
}

}  // namespace detail

template <class S>
TopPathsResult<S> top_paths(const Model& model, const ForwardTrace<S>& trace, const TopPathsOptions& options) {
  detail::check_trace(model, trace);
  if (options.k < 1) throw std::invalid_argument("top paths: k must be at least 1");
  const int L = model.arch().layers, H = model.arch().heads;
  const bool skip = trace.variant.skip;
  const detail::PathPlan plan = detail::make_path_plan(L, H, skip, options.filter);
  TopPathsResult<S> result;
  result.paths = 0;
  for (const auto& c : detail::plan_counts(plan)) result.paths += c;
  if (result.paths == 0) return result;

  const detail::PathContext<S> ctx(model, trace);
  const detail::SubtreeBound<S> bound(model, trace, plan);

  // Seed threshold: the K-th largest term among the paths of length ≤ 1.
  S seed(0);
  if (skip) {
    const detail::PathPlan full = detail::make_path_plan(L, H, skip, {});
    detail::PathWalker<S> walker(ctx, full, false);
    detail::TopK<S> top(options.k);
    std::vector<int> heads(static_cast<std::size_t>(L), -1);
    const auto offer = [&] {
      if (!detail::plan_allows(plan, heads)) return;
      walker.run(heads, [&](const std::vector<int>& hs, int len, const Matrix<S>& T, const Matrix<S>*) {
        top.offer(detail::make_record<S>(hs, len, T, nullptr, ctx.n, false));
      });
    };
    offer();
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        heads[static_cast<std::size_t>(l)] = h;
        offer();
        heads[static_cast<std::size_t>(l)] = -1;
      }
    if (const auto* k = top.kth()) seed = k->norm_composite;
  }

  // Rounds of subtree tasks: every task of a round prunes against the
  // threshold of the rounds before it (the K-th best found so far, or the
  // seed) and its own K best. The rounds are fixed by the filter alone, so
  // records and counts do not depend on threads or ranks.
  const std::vector<std::vector<int>> prefixes = detail::task_prefixes(plan, 256);
  const std::size_t ntasks = prefixes.size();
  struct TaskResult {
    std::vector<PathRecord<S>> records;
    std::uint64_t nodes = 0, skipped = 0, leaves = 0;
  };
  auto run_task = [&](std::size_t i, const S& threshold, TaskResult& r) {
    detail::PathWalker<S> walker(ctx, plan, true);
    detail::TopK<S> top(options.k);
    detail::TaskPruner<S> pruner(bound, threshold, top, L);
    pruner.start(trace.X[0]);
    walker.run(
        prefixes[i],
        [&](const std::vector<int>& heads, int len, const Matrix<S>& T, const Matrix<S>* P) {
          ++r.leaves;
          top.offer(detail::make_record(heads, len, T, P, ctx.n, true));
        },
        pruner);
    r.records = top.take_sorted();
    r.nodes = pruner.nodes;
    r.skipped = pruner.skipped;
  };

  SharedJob job("path subtree", "path subtrees");
  detail::TopK<S> top(options.k);
  S threshold = seed;
  for (std::size_t first = 0; first < ntasks; first += detail::top_paths_round) {
    const std::size_t count = std::min(detail::top_paths_round, ntasks - first);
    std::vector<TaskResult> results(count);
    job.round(
        first, count, detail::task_parallel_for(options.threads),
        [&](std::size_t i) { run_task(i, threshold, results[i - first]); },
        [&](std::size_t i) {
          const TaskResult& r = results[i - first];
          ByteWriter w;
          w(r.records, r.nodes, r.skipped, r.leaves);
          return w.bytes();
        },
        [&](std::size_t i, const std::string& bytes) {
          TaskResult& r = results[i - first];
          ByteReader reader(bytes);
          reader(r.records, r.nodes, r.skipped, r.leaves);
          reader.finish();
        });
    for (TaskResult& r : results) {
      result.nodes += r.nodes;
      result.skipped += r.skipped;
      result.leaves += r.leaves;
      for (auto& rec : r.records) top.offer(std::move(rec));
    }
    if (const PathRecord<S>* kth = top.kth())
      if (kth->norm_composite > threshold) threshold = kth->norm_composite;
  }
  result.records = top.take_sorted();
  return result;
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_TOP_PATHS(S)                                                         \
  template sanpath::TopPathsResult<S> sanpath::top_paths<S>(const sanpath::Model&,               \
                                                            const sanpath::ForwardTrace<S>&,      \
                                                            const sanpath::TopPathsOptions&);

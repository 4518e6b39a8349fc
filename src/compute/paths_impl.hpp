#pragma once
#include "sanpath/compute/paths.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/compute/norms.hpp"
#include "compute/record_norms_impl.hpp"
#include "sanpath/core/bytes.hpp"
#include "sanpath/core/distributed.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>

namespace sanpath {

/// PathRecord's encoding (bytes.hpp; found by argument-dependent lookup).
template <class A, class S> void fields(A& a, PathRecord<S>& r) {
  a(r.heads, r.length, r.norm_composite, r.norm_frobenius, r.residual_composite, r.stochastic_residual);
}

namespace detail {

/// The path tree after filtering (non-template, src/paths.cpp). choices[l]:
/// the allowed choices at layer l+1 in enumeration order (-1 = skip first,
/// then heads ascending). min_add[l] / max_add[l]: fewest / most non-skip
/// layers among layers l+1..L (suffix counts, size L+1).
struct PathPlan {
  int layers = 0, heads = 0;
  bool skip = false;
  int kmin = 0, kmax = 0;
  std::vector<std::vector<int>> choices;
  std::vector<int> min_add, max_add;
  bool empty = false;  ///< some layer allows nothing, or the range is unreachable
  /// A node at `depth` (layers done) with `len` non-skip layers has a
  /// completion whose length lies in [kmin, kmax].
  bool reachable(int depth, int len) const {
    const auto d = static_cast<std::size_t>(depth);
    return len + min_add[d] <= kmax && len + max_add[d] >= kmin;
  }
};

/// Validates the filter and builds the plan.
PathPlan make_path_plan(int layers, int heads, bool skip, const PathFilter& filter);
/// Exact counts by length k = 0..L of the plan's paths.
std::vector<PathCount> plan_counts(const PathPlan& plan);
/// Task prefixes: the reachable nodes of the shallowest depth D with at
/// least `target` nodes (or D = L), in enumeration order. Each prefix has D
/// choices. Depends only on the plan (never on the thread count).
std::vector<std::vector<int>> task_prefixes(const PathPlan& plan, std::size_t target);

/// The value-output maps of one layer in S. Factored (when 2·d_v < d, the
/// cheaper form): Y W_h is evaluated as (Y W_V^h) W_O^h. Otherwise the d×d
/// products W_h = W_V^h W_O^h are formed once. `c` = c_l (1×d).
/// Per-head matrices (WV, WO or W) for the path walk; packed ones (WVp
/// d×H·d_v, WOp H·d_v×d) for the length sums in factored form.
template <class S> struct LayerMaps {
  bool factored = false;
  std::vector<Matrix<S>> WV, WO, W;
  Matrix<S> WVp, WOp;
  Matrix<S> c;
};

inline bool use_factored(const Architecture& a) { return 2 * a.d_v < a.d_model; }

template <class S> LayerMaps<S> layer_maps(const Architecture& a, const LayerWeights& w, bool packed) {
  const Eigen::Index d = a.d_model, dv = a.d_v, H = a.heads;
  LayerMaps<S> m;
  m.factored = use_factored(a);
  m.c = convert<S>(w.b_O.transpose());
  Matrix<S> bv, t;
  if (m.factored && packed) {
    MatrixXd WV(d, H * dv), WO(H * dv, d);
    for (Eigen::Index h = 0; h < H; ++h) {
      WV.middleCols(h * dv, dv) = w.heads[static_cast<std::size_t>(h)].W_V;
      WO.middleRows(h * dv, dv) = w.heads[static_cast<std::size_t>(h)].W_O;
    }
    m.WVp = convert<S>(WV);
    m.WOp = convert<S>(WO);
  }
  for (Eigen::Index h = 0; h < H; ++h) {
    const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
    Matrix<S> WV = convert<S>(hw.W_V), WO = convert<S>(hw.W_O);
    bv = convert<S>(hw.b_V.transpose());
    gemm(bv, WO, t);  // b_V^h W_O^h as a row: (W_O^hᵀ b_V^h)ᵀ
    m.c += t;
    if (m.factored) {
      if (!packed) {
        m.WV.push_back(std::move(WV));
        m.WO.push_back(std::move(WO));
      }
    } else {
      Matrix<S> Wh;
      gemm(WV, WO, Wh);
      m.W.push_back(std::move(Wh));
    }
  }
  return m;
}

/// out = Y W_h (per-head form). tmp: scratch.
template <class S>
void apply_head(const LayerMaps<S>& m, int h, const Matrix<S>& Y, Matrix<S>& out, Matrix<S>& tmp) {
  const auto i = static_cast<std::size_t>(h);
  if (m.factored) {
    gemm(Y, m.WV[i], tmp);
    gemm(tmp, m.WO[i], out);
  } else {
    gemm(Y, m.W[i], out);
  }
}

template <class S> Matrix<S> zeros(Eigen::Index r, Eigen::Index c) {
  Matrix<S> z(r, c);
  z.setConstant(S(0));
  return z;
}

/// b^L from per-layer maps: b^l = [skip] b^{l-1} + Σ_h b^{l-1} W_h + c_l.
template <class S> class BiasAccumulator {
 public:
  explicit BiasAccumulator(Eigen::Index d) : b_(zeros<S>(1, d)) {}
  void add_layer(const LayerMaps<S>& m, int heads, bool skip) {
    Matrix<S> acc = skip ? b_ : zeros<S>(1, b_.cols());
    Matrix<S> out, tmp;
    if (m.factored && m.WV.empty()) {  // packed form: all heads at once
      gemm(b_, m.WVp, tmp);
      gemm(tmp, m.WOp, out);
      acc += out;
    } else {
      for (int h = 0; h < heads; ++h) {
        apply_head(m, h, b_, out, tmp);
        acc += out;
      }
    }
    acc += m.c;
    b_ = std::move(acc);
  }
  RowVector<S> value() const { return b_.row(0); }

 private:
  Matrix<S> b_;
};

/// Checks that `t` is an attention-only trace of `model` with attention.
template <class S> void check_trace(const Model& model, const ForwardTrace<S>& t) {
  require_attention_only(t.variant);
  const Architecture& a = model.arch();
  auto fail = [](const std::string& m) { throw std::invalid_argument("path decomposition: " + m); };
  if (t.layers() != a.layers)
    fail("the trace has " + std::to_string(t.layers()) + " layers, the model " + std::to_string(a.layers));
  if (t.X.empty() || t.X[0].cols() != a.d_model || t.X[0].rows() < 1)
    fail("the trace's input is not n×d_model with d_model = " + std::to_string(a.d_model));
  const Eigen::Index n = t.X[0].rows();
  if (t.X.back().rows() != n || t.X.back().cols() != a.d_model) fail("the trace's output has the wrong shape");
  if (static_cast<int>(t.P.size()) != a.layers)
    fail("the trace has no attention matrices (run forward with record_attention)");
  for (int l = 0; l < a.layers; ++l) {
    const auto& Pl = t.P[static_cast<std::size_t>(l)];
    if (static_cast<int>(Pl.size()) != a.heads)
      fail("layer " + std::to_string(l + 1) + " of the trace has " + std::to_string(Pl.size()) +
           " attention matrices, the model " + std::to_string(a.heads) + " heads");
    for (const auto& P : Pl)
      if (P.rows() != n || P.cols() != n) fail("an attention matrix of layer " + std::to_string(l + 1) + " is not n×n");
  }
}

/// Everything the walk reads: the trace and every layer's maps (per head).
template <class S> struct PathContext {
  const ForwardTrace<S>& trace;
  int L, H;
  Eigen::Index n, d;
  bool skip;
  std::vector<LayerMaps<S>> maps;

  PathContext(const Model& model, const ForwardTrace<S>& t)
      : trace(t), L(model.arch().layers), H(model.arch().heads), n(t.X[0].rows()), d(t.X[0].cols()),
        skip(t.variant.skip) {
    maps.reserve(static_cast<std::size_t>(L));
    for (int l = 0; l < L; ++l) maps.push_back(layer_maps<S>(model.arch(), model.layer(l), false));
  }
  RowVector<S> bias() const {
    BiasAccumulator<S> b(d);
    for (const auto& m : maps) b.add_layer(m, H, skip);
    return b.value();
  }
};


/// Depth-first walk of the path tree. A node at depth l holds
/// Y_l = P^l_{h_l} Y_{l-1} W^l_{h_l} (Y_0 = X) and, when wanted, the prefix
/// P_l = P^l_{h_l} P_{l-1} (null for the identity); a skip child reuses its
/// parent's matrices. One walker per thread (it owns the workspace).
template <class S> class PathWalker {
 public:
  PathWalker(const PathContext<S>& ctx, const PathPlan& plan, bool need_prefix_P,
             const std::atomic<bool>* stop = nullptr)
      : ctx_(ctx), plan_(plan), need_P_(need_prefix_P), stop_(stop),
        Y_(static_cast<std::size_t>(ctx.L) + 1), P_(static_cast<std::size_t>(ctx.L) + 1),
        heads_(static_cast<std::size_t>(ctx.L), -1) {}

  /// Walks the subtree below `prefix` (choices of layers 1..D), calling
  /// leaf(heads, length, T, P_path or nullptr for I) for every completed
  /// path passing the plan.
  template <class Leaf> void run(const std::vector<int>& prefix, Leaf&& leaf) {
    run(prefix, leaf, NoPruning{});
  }

  /// As above, skipping subtrees: before a head child of layer l (0-based)
  /// is formed, prune.child(l, h, Y) (Y the parent's term) may refuse it;
  /// every node entered, prefix nodes included, is then offered to
  /// prune.node(depth, Y) (Y = P_prefix X W_prefix, depth = layers done),
  /// which may refuse its subtree. Refused prefix nodes end the walk.
  template <class Leaf, class Prune> void run(const std::vector<int>& prefix, Leaf&& leaf, Prune&& prune) {
    const Matrix<S>* Y = &ctx_.trace.X[0];
    const Matrix<S>* P = nullptr;
    int len = 0;
    for (std::size_t l = 0; l < prefix.size(); ++l) {
      const int c = prefix[l];
      heads_[l] = c;
      if (c >= 0) {
        if (!prune.child(static_cast<int>(l), c, *Y)) return;
        P = step(static_cast<int>(l), c, *Y, P);
        Y = &Y_[l + 1];
        ++len;
      }
      if (!prune.node(static_cast<int>(l) + 1, *Y)) return;
    }
    descend(static_cast<int>(prefix.size()), len, Y, P, leaf, prune);
  }

 private:
  /// Child of layer l (0-based) through head h: writes Y_[l+1] (and P_[l+1]);
  /// returns the child's prefix pointer.
  const Matrix<S>* step(int l, int h, const Matrix<S>& Y, const Matrix<S>* P) {
    const auto li = static_cast<std::size_t>(l);
    const Matrix<S>& Ph = ctx_.trace.P[li][static_cast<std::size_t>(h)];
    apply_head(ctx_.maps[li], h, Y, t2_, t1_);
    gemm(Ph, t2_, Y_[li + 1]);
    if (!need_P_) return nullptr;
    if (P == nullptr) return &Ph;  // P_h · I
    gemm(Ph, *P, P_[li + 1]);
    return &P_[li + 1];
  }

  struct NoPruning {
    bool child(int, int, const Matrix<S>&) const { return true; }
    bool node(int, const Matrix<S>&) const { return true; }
  };

  template <class Leaf, class Prune>
  void descend(int depth, int len, const Matrix<S>* Y, const Matrix<S>* P, Leaf& leaf, Prune& prune) {
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) return;
    if (depth == ctx_.L) {
      leaf(heads_, len, *Y, P);
      return;
    }
    const auto di = static_cast<std::size_t>(depth);
    for (const int c : plan_.choices[di]) {
      const int nl = len + (c >= 0 ? 1 : 0);
      if (!plan_.reachable(depth + 1, nl)) continue;
      heads_[di] = c;
      if (c < 0) {
        if (prune.node(depth + 1, *Y)) descend(depth + 1, nl, Y, P, leaf, prune);
      } else {
        if (!prune.child(depth, c, *Y)) continue;
        const Matrix<S>* np = step(depth, c, *Y, P);
        if (prune.node(depth + 1, Y_[di + 1])) descend(depth + 1, nl, &Y_[di + 1], np, leaf, prune);
      }
    }
    heads_[di] = -1;
  }

  const PathContext<S>& ctx_;
  const PathPlan& plan_;
  bool need_P_;
  const std::atomic<bool>* stop_;
  std::vector<Matrix<S>> Y_, P_;
  Matrix<S> t1_, t2_;
  std::vector<int> heads_;
};

/// Total order of top-K: larger ‖T‖_{1,∞} first, then enumeration order.
template <class S> bool ranks_before(const PathRecord<S>& a, const PathRecord<S>& b) {
  if (a.norm_composite != b.norm_composite) return a.norm_composite > b.norm_composite;
  return a.heads < b.heads;
}

/// Keeps the K best records (a heap whose front is the worst kept).
template <class S> class TopK {
 public:
  explicit TopK(std::size_t k) : k_(k) {}
  void offer(PathRecord<S>&& r) {
    auto cmp = [](const PathRecord<S>& a, const PathRecord<S>& b) { return ranks_before(a, b); };
    if (heap_.size() < k_) {
      heap_.push_back(std::move(r));
      std::push_heap(heap_.begin(), heap_.end(), cmp);
    } else if (k_ > 0 && ranks_before(r, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), cmp);
      heap_.back() = std::move(r);
      std::push_heap(heap_.begin(), heap_.end(), cmp);
    }
  }
  /// The K-th best record when K are kept, else null.
  const PathRecord<S>* kth() const { return k_ > 0 && heap_.size() == k_ ? &heap_.front() : nullptr; }
  std::vector<PathRecord<S>> take_sorted() {
    std::sort(heap_.begin(), heap_.end(), [](const PathRecord<S>& a, const PathRecord<S>& b) { return ranks_before(a, b); });
    return std::move(heap_);
  }

 private:
  std::size_t k_;
  std::vector<PathRecord<S>> heap_;
};

/// Output of one task (one subtree): records in enumeration order (or the
/// task's top K), per-length sums (empty matrices for lengths not met).
template <class S> struct TaskOutput {
  std::vector<PathRecord<S>> records;
  std::vector<Matrix<S>> sums;
  std::uint64_t paths = 0;
};

/// Runs task(k) for k = 0..n−1 on min(threads, n) workers (0: every core),
/// each with serial products and its own MPFR caches; the calling thread
/// alone when one worker suffices. Rethrows the exception of the lowest
/// failing k after every worker has stopped.
inline ParallelFor task_parallel_for(int threads) {
  return [threads](std::size_t n, const std::function<void(std::size_t)>& task) {
    const std::size_t workers = std::min(static_cast<std::size_t>(resolve_threads(threads)), n);
    if (workers <= 1) {
      for (std::size_t k = 0; k < n; ++k) task(k);
      return;
    }
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::vector<std::exception_ptr> errors(n);
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < workers; ++t)
      pool.emplace_back([&] {
        MpfrThreadCaches caches;
        SerialProductsScope serial;  // the workers are the parallelism: products inside run serially
        for (std::size_t k = next++; k < n && !failed.load(); k = next++) {
          try {
            task(k);
          } catch (...) {
            errors[k] = std::current_exception();
            failed = true;
          }
        }
      });
    for (auto& t : pool) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  };
}

/// A matrix's exact bytes (bytes.hpp): its shape, then its entries column by column.
template <class S> void put_matrix(ByteWriter& w, const Matrix<S>& m) {
  w(static_cast<std::int64_t>(m.rows()), static_cast<std::int64_t>(m.cols()));
  for (Eigen::Index j = 0; j < m.cols(); ++j)
    for (Eigen::Index i = 0; i < m.rows(); ++i) w(m(i, j));
}
template <class S> void get_matrix(ByteReader& r, Matrix<S>& m) {
  std::int64_t rows = 0, cols = 0;
  r(rows, cols);
  if (rows < 0 || cols < 0 || (rows > 0 && cols > (std::int64_t{1} << 40) / rows))
    throw std::runtime_error("bytes: a matrix of " + std::to_string(rows) + "×" + std::to_string(cols) + " entries");
  m.resize(rows, cols);
  for (Eigen::Index j = 0; j < m.cols(); ++j)
    for (Eigen::Index i = 0; i < m.rows(); ++i) r(m(i, j));
}

/// A task's output as it travels between ranks, every value exactly.
template <class S> std::string task_bytes(const TaskOutput<S>& t) {
  ByteWriter w;
  w(t.paths, t.records, static_cast<std::uint64_t>(t.sums.size()));
  for (const Matrix<S>& m : t.sums) put_matrix(w, m);
  return w.bytes();
}
template <class S> void task_from_bytes(const std::string& bytes, TaskOutput<S>& t) {
  ByteReader r(bytes);
  std::uint64_t sums = 0;
  r(t.paths, t.records, sums);
  if (sums > 1u << 20) throw std::runtime_error("bytes: " + std::to_string(sums) + " length sums in one path subtree");
  t.sums.resize(static_cast<std::size_t>(sums));
  for (Matrix<S>& m : t.sums) get_matrix(r, m);
  r.finish();
}

}  // namespace detail

template <class S>
EnumerationResult<S> enumerate_paths(const Model& model, const ForwardTrace<S>& trace,
                                     const EnumerationOptions& options, const PathVisitor<S>& visitor) {
  detail::check_trace(model, trace);
  const int L = model.arch().layers, H = model.arch().heads;
  const bool skip = trace.variant.skip;
  const detail::PathPlan plan = detail::make_path_plan(L, H, skip, options.filter);
  PathCount total = 0;
  for (const auto& c : detail::plan_counts(plan)) total += c;
  if (total > options.max_paths) throw PathLimitError(total, options.max_paths);

  const detail::PathContext<S> ctx(model, trace);
  EnumerationResult<S> result;
  result.bias = ctx.bias();
  if (options.accumulate) result.sums.assign(static_cast<std::size_t>(L) + 1, detail::zeros<S>(ctx.n, ctx.d));
  if (total == 0) return result;

  const bool want_records = static_cast<bool>(visitor);
  const std::size_t top_k = options.top_k;
  const std::vector<std::vector<int>> prefixes = detail::task_prefixes(plan, 256);
  const std::size_t ntasks = prefixes.size();

  auto run_task = [&](std::size_t i, detail::PathWalker<S>& walker, detail::TaskOutput<S>& out) {
    std::optional<detail::TopK<S>> top;
    if (top_k > 0) top.emplace(top_k);
    if (options.accumulate) out.sums.resize(static_cast<std::size_t>(L) + 1);
    walker.run(prefixes[i], [&](const std::vector<int>& heads, int len, const Matrix<S>& T, const Matrix<S>* P) {
      ++out.paths;
      if (options.accumulate) {
        Matrix<S>& acc = out.sums[static_cast<std::size_t>(len)];
        if (acc.size() == 0)
          acc = T;
        else
          acc += T;
      }
      if (!want_records) return;
      PathRecord<S> r = detail::make_record(heads, len, T, P, ctx.n, true);
      if (top)
        top->offer(std::move(r));
      else
        out.records.push_back(std::move(r));
    });
    if (top) out.records = top->take_sorted();
  };

  std::optional<detail::TopK<S>> global_top;
  if (top_k > 0) global_top.emplace(top_k);
  auto consume = [&](detail::TaskOutput<S>& out) {
    result.paths += out.paths;
    if (options.accumulate)
      for (std::size_t k = 0; k < out.sums.size(); ++k)
        if (out.sums[k].size() != 0) result.sums[k] += out.sums[k];
    if (!want_records) return;
    for (auto& r : out.records) {
      if (global_top)
        global_top->offer(std::move(r));
      else
        visitor(r);
    }
  };

  const int threads = static_cast<int>(std::min<std::size_t>(
      static_cast<std::size_t>(resolve_threads(options.threads)), ntasks));
  SharedJob job("path subtree", "path subtrees");
  if (job.distributed()) {
    // Under MPI: rounds of subtrees shared over the ranks, each round's
    // outputs consumed in task order, exactly as one process consumes them.
    const std::size_t round = static_cast<std::size_t>(job.ranks()) * 4 * static_cast<std::size_t>(std::max(threads, 1));
    for (std::size_t first = 0; first < ntasks; first += round) {
      const std::size_t count = std::min(round, ntasks - first);
      std::vector<detail::TaskOutput<S>> outs(count);
      job.round(
          first, count, detail::task_parallel_for(threads),
          [&](std::size_t i) {
            detail::PathWalker<S> walker(ctx, plan, want_records);
            run_task(i, walker, outs[i - first]);
          },
          [&](std::size_t i) { return detail::task_bytes(outs[i - first]); },
          [&](std::size_t i, const std::string& bytes) { detail::task_from_bytes(bytes, outs[i - first]); });
      for (detail::TaskOutput<S>& out : outs) consume(out);
    }
  } else if (threads <= 1) {
    detail::PathWalker<S> walker(ctx, plan, want_records);
    for (std::size_t i = 0; i < ntasks; ++i) {
      detail::TaskOutput<S> out;
      run_task(i, walker, out);
      consume(out);
    }
  } else {
    // Workers take tasks in order, at most `window` ahead of the emission;
    // the calling thread consumes finished tasks in task order.
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<bool> stop{false};
    std::exception_ptr error;
    std::size_t next = 0, consumed = 0;
    const std::size_t window = 2 * static_cast<std::size_t>(threads);
    std::vector<std::optional<detail::TaskOutput<S>>> done(ntasks);
    auto worker = [&] {
      SerialProductsScope serial;  // the workers are the parallelism: products inside run serially
      try {
        detail::PathWalker<S> walker(ctx, plan, want_records, &stop);
        for (;;) {
          std::size_t i;
          {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return stop.load() || next >= ntasks || next < consumed + window; });
            if (stop.load() || next >= ntasks) break;
            i = next++;
          }
          detail::TaskOutput<S> out;
          run_task(i, walker, out);
          {
            std::lock_guard<std::mutex> lock(mu);
            done[i] = std::move(out);
          }
          cv.notify_all();
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        stop = true;
      }
      cv.notify_all();
    };
    std::vector<std::thread> pool;
    auto finish = [&] {
      {
        std::lock_guard<std::mutex> lock(mu);
        stop = true;
      }
      cv.notify_all();
      for (auto& t : pool) t.join();
    };
    try {
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&worker] {
          MpfrThreadCaches caches;
          worker();
        });
      for (std::size_t i = 0; i < ntasks; ++i) {
        detail::TaskOutput<S> out;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return done[i].has_value() || stop.load(); });
          if (!done[i].has_value()) break;  // a worker failed
          out = std::move(*done[i]);
          done[i].reset();
        }
        consume(out);
        {
          std::lock_guard<std::mutex> lock(mu);
          consumed = i + 1;
        }
        cv.notify_all();
      }
    } catch (...) {
      finish();
      throw;
    }
    finish();
    if (error) std::rethrow_exception(error);
  }
  if (global_top && want_records)
    for (const auto& r : global_top->take_sorted()) visitor(r);
  return result;
}

template <class S>
PathRecord<S> evaluate_path(const Model& model, const ForwardTrace<S>& trace, const std::vector<int>& heads,
                            Matrix<S>* term) {
  detail::check_trace(model, trace);
  const int L = model.arch().layers, H = model.arch().heads;
  PathFilter f;
  f.allowed_heads.reserve(static_cast<std::size_t>(L));
  if (static_cast<int>(heads.size()) != L)
    throw std::invalid_argument("evaluate_path: the path has " + std::to_string(heads.size()) +
                                " choices, the model " + std::to_string(L) + " layers");
  for (int c : heads) f.allowed_heads.push_back({c});
  const detail::PathPlan plan = detail::make_path_plan(L, H, trace.variant.skip, f);
  const detail::PathContext<S> ctx(model, trace);
  detail::PathWalker<S> walker(ctx, plan, true);
  PathRecord<S> rec;
  walker.run(heads, [&](const std::vector<int>& hs, int len, const Matrix<S>& T, const Matrix<S>* P) {
    rec = detail::make_record(hs, len, T, P, ctx.n, true);
    if (term != nullptr) *term = T;
  });
  return rec;
}

template <class S> BigReal relative_max_error(const Matrix<S>& approx, const Matrix<S>& exact) {
  using std::abs;
  if (approx.rows() != exact.rows() || approx.cols() != exact.cols())
    throw std::invalid_argument("relative_max_error: shapes " + std::to_string(approx.rows()) + "×" +
                                std::to_string(approx.cols()) + " and " + std::to_string(exact.rows()) + "×" +
                                std::to_string(exact.cols()) + " differ");
  S scale(0), err(0);
  for (Eigen::Index j = 0; j < exact.cols(); ++j)
    for (Eigen::Index i = 0; i < exact.rows(); ++i) {
      const S e = abs(exact(i, j));
      if (e > scale) scale = e;
      const S diff = abs(S(approx(i, j) - exact(i, j)));
      if (diff > err) err = diff;
    }
  if (scale == 0) return to_big(err);
  return to_big(S(err / scale));
}

template <class S>
BigReal enumeration_error(const Model& model, const ForwardTrace<S>& trace, int threads, std::uint64_t max_paths) {
  EnumerationOptions o;
  o.threads = threads;
  o.max_paths = max_paths;
  o.accumulate = true;
  const EnumerationResult<S> r = enumerate_paths<S>(model, trace, o, {});
  Matrix<S> total = detail::zeros<S>(trace.X[0].rows(), trace.X[0].cols());
  for (const auto& s : r.sums) total += s;
  total.rowwise() += r.bias;
  return relative_max_error(total, trace.X.back());
}

}  // namespace sanpath

// Length sums and sampling (the same module, kept in their own file).
#include "compute/length_sums_impl.hpp"

#define SANPATH_INSTANTIATE_PATHS(S)                                                                                  \
  template sanpath::EnumerationResult<S> sanpath::enumerate_paths<S>(                                                  \
      const sanpath::Model&, const sanpath::ForwardTrace<S>&, const sanpath::EnumerationOptions&,                      \
      const sanpath::PathVisitor<S>&);                                                                                 \
  template sanpath::PathRecord<S> sanpath::evaluate_path<S>(const sanpath::Model&, const sanpath::ForwardTrace<S>&,    \
                                                            const std::vector<int>&, sanpath::Matrix<S>*);             \
  template sanpath::BigReal sanpath::relative_max_error<S>(const sanpath::Matrix<S>&, const sanpath::Matrix<S>&);     \
  template sanpath::BigReal sanpath::enumeration_error<S>(const sanpath::Model&, const sanpath::ForwardTrace<S>&, int, \
                                                          std::uint64_t);                                              \
  template sanpath::LengthSums<S> sanpath::length_sums<S>(const sanpath::Model&, const sanpath::ForwardTrace<S>&, int); \
  template std::vector<sanpath::LengthSample<S>> sanpath::sample_paths<S>(                                             \
      const sanpath::Model&, const sanpath::ForwardTrace<S>&, const sanpath::SampleOptions&);

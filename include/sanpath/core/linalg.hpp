#pragma once
/// \file linalg.hpp
/// Dense products in a working scalar. Double goes through sanpath's packed
/// kernel (the same bits on every CPU, see double_products_isa); MPFR tiers through a fixed-point kernel: the rows of A and the
/// columns of op(B) are aligned to their largest exponent as integers of W
/// bits (W = 52·⌈(p+49)/52⌉ − 1 up to 1025 bits, 64·⌈(p+56)/64⌉ above; p the
/// tier's precision, so W ≥ p + 48), each entry is the exact integer dot
/// product of those, rounded once to the tier. Its error is at most ½ ulp
/// plus 3k·2^(e_i+f_j−W) (e_i, f_j the row and column exponents), never above
/// the classical bound γ_k Σ|a_ip b_pj| of a sequential mpfr_fma loop:
/// entries for which that cannot be guaranteed (rows and columns whose
/// magnitudes cross by more than W−p−4 binades), and products with NaN or
/// infinite entries, fall back to that loop (mpfr_fma into the preallocated
/// entry, no temporaries). The integer dot products run on AVX-512 IFMA
/// (eight at a time, 52-bit limbs) when the CPU has it and W allows (tiers up
/// to 1025 bits), otherwise on GMP's mpn_mul_n; both compute the same
/// integers, so results do not depend on the kernel.
///
/// Large products are split into blocks of rows or columns fixed by the
/// shapes alone and run on up to product_threads() threads: results do not
/// depend on the thread count.

#include "sanpath/core/scalar.hpp"
#include "sanpath/core/weight_view.hpp"

#include <atomic>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace sanpath {

/// C = A·B.  A: m×k, B: k×n, C resized to m×n.
template <class S> void gemm(const Matrix<S>& A, const Matrix<S>& B, Matrix<S>& C);
/// C = A·Bᵀ.  A: m×k, B: n×k, C resized to m×n.
template <class S> void gemm_nt(const Matrix<S>& A, const Matrix<S>& B, Matrix<S>& C);
/// C = A·W with W in double (a model's weights): the same result as
/// gemm(A, convert<S>(W), C), bit for bit, without converting W to S.
/// A: m×k, W: k×n, C resized to m×n.
template <class S> void gemm_weights(const Matrix<S>& A, const Matrix<double>& W, Matrix<S>& C);
/// C = A·W with W stored floats read where they lie (a mapped checkpoint,
/// core/weight_view.hpp): the same result as gemm_weights(A, W.decode(), C),
/// bit for bit; in double W's panels are packed straight from its bytes.
template <class S> void gemm_weights(const Matrix<S>& A, const WeightView& W, Matrix<S>& C);
/// C = A·Wᵀ with W in double (a torch Linear weight, [out, in]): the same
/// result as gemm_nt(A, convert<S>(W), C), bit for bit, without converting
/// or transposing W. A: m×k, W: n×k, C resized to m×n.
template <class S> void gemm_weights_nt(const Matrix<S>& A, const Matrix<double>& W, Matrix<S>& C);

/// Convenience: returns A·B.
template <class S> Matrix<S> product(const Matrix<S>& A, const Matrix<S>& B) {
  Matrix<S> C;
  gemm(A, B, C);
  return C;
}

/// Sets the threads sanpath may use: large products, passes run side by
/// side, path shards and the inputs of a batch share them. 0 (the default)
/// for the hardware concurrency, 1 for everything serial. Results never
/// depend on it. Thread-safe.
void set_product_threads(int threads);

/// Threads one large product (or parallel section) started from this thread
/// may use: the setting above, at most the cap of the innermost
/// ProductThreadsScope alive on this thread and the current share of its
/// ThreadGroupScope.
int product_threads();

/// `threads` resolved: 0 means product_threads(); a positive count is
/// itself. Throws std::invalid_argument naming a negative count.
int resolve_threads(int threads);

/// The largest thread count sanpath accepts.
inline constexpr int kMaxThreads = 4096;

/// Throws std::invalid_argument "--threads: N is not a thread count in
/// [0, 4096] (0: all cores)" unless 0 ≤ threads ≤ kMaxThreads.
void check_thread_count(long threads);

/// The threads that part `index` of `parts` parts sharing `total` threads
/// gets: total/parts, the first total%parts parts one more, at least 1.
int thread_share(int total, int parts, int index);

/// Whether MPFR products may use the AVX-512 IFMA kernel (default true; it
/// is used only when the CPU has it). false forces the portable GMP kernel,
/// for comparisons: results are identical. Thread-safe.
void allow_ifma_products(bool allowed);

/// Whether MPFR products of tiers up to 1025 bits run on the IFMA kernel.
bool ifma_products_active();

/// The instruction-set level of the double products: "avx512", "avx2" or
/// "generic". Every level computes the same bits: each entry of a product is
/// one chain of fused multiply-adds over the inner index, in index order
/// (generic x86-64 takes them from std::fma, exact in software where the CPU
/// has none). By default the best level of this CPU; the environment variable
/// SANPATH_ISA=generic|avx2|avx512 chooses one (read at the first product;
/// an unknown name or a level the CPU lacks throws std::invalid_argument
/// naming the variable).
std::string double_products_isa();

/// The levels this CPU runs, lowest first.
std::vector<std::string> supported_double_products_isas();

/// Forces the level of the double products (tests, comparisons); throws
/// std::invalid_argument for an unknown name or a level the CPU lacks.
void set_double_products_isa(const std::string& level);

/// While alive, products and parallel sections started from the
/// constructing thread use at most `cap` threads (≥ 1). Scopes nest: the
/// innermost cap applies, never above an outer one.
class ProductThreadsScope {
 public:
  explicit ProductThreadsScope(int cap);
  ~ProductThreadsScope();
  ProductThreadsScope(const ProductThreadsScope&) = delete;
  ProductThreadsScope& operator=(const ProductThreadsScope&) = delete;

 private:
  int previous_;
};

/// Threads shared by tasks that run at once (passes side by side, the inputs
/// of a batch): while r of its `tasks` tasks run, task i's products may use
/// thread_share(total, r, i) threads, so the threads of a task that has
/// ended go to those still running (their later products use them).
class ThreadGroup {
 public:
  ThreadGroup(int total, int tasks);
  /// The threads task `index` may use now.
  int share(int index) const;
  /// One task has ended.
  void leave();

 private:
  int total_;
  std::atomic<int> running_;
};

/// Task `index` of `group`, running on the constructing thread for the
/// scope's life: its products and parallel sections use the task's share
/// of the group (never above an outer cap or share), and its end hands its
/// threads to the tasks still running. The group must outlive the scope.
class ThreadGroupScope {
 public:
  ThreadGroupScope(ThreadGroup& group, int index);
  ~ThreadGroupScope();
  ThreadGroupScope(const ThreadGroupScope&) = delete;
  ThreadGroupScope& operator=(const ThreadGroupScope&) = delete;

 private:
  ThreadGroup& group_;
  const ThreadGroup* previous_group_;
  int previous_index_;
  int previous_cap_;
};

/// While alive, products started from the constructing thread run serially.
/// The library's own worker threads (path enumeration, length sums, product
/// blocks) hold one, so parallel work is never nested.
class SerialProductsScope {
 public:
  SerialProductsScope() : cap_(1) {}

 private:
  ProductThreadsScope cap_;
};

/// Runs two independent passes: side by side, `second` on a new thread and
/// `first` on this one, when products may use two or more threads (each
/// pass then gets half of them for its own products, and all of them once
/// the other has ended); otherwise (or when no
/// thread can be started) one after the other on this thread. On two cores
/// one pass a core beats two passes one after the other on both cores, since
/// the products of a pass scale less than 2× on two threads. Returns when
/// both have finished; an exception of either is rethrown then (first's
/// before second's).
void run_side_by_side(const std::function<void()>& first, const std::function<void()>& second);

/// Runs independent tasks at once, each on a thread of its own (the first
/// on this thread; every thread starts in this thread's rounding mode), when
/// products may use two or more threads and every thread can be started;
/// the tasks then share product_threads() as a ThreadGroup, each using its
/// share for its own products, and a task that ends hands its threads to
/// those still running. Otherwise one after the other on this
/// thread. Each task is told which: true when they all run together (no
/// task starts before every thread is there). Returns when all have
/// finished, rethrowing the exception of the first task (in order) that
/// threw. More tasks than threads share the cores, one product thread each.
void run_at_once(const std::vector<std::function<void(bool together)>>& tasks);

/// Converts a double matrix exactly into scalar S.
template <class S, class Derived> Matrix<S> convert(const Eigen::MatrixBase<Derived>& m) {
  if constexpr (std::is_same_v<S, double>) {
    return m;
  } else {
    Matrix<S> out(m.rows(), m.cols());
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      for (Eigen::Index i = 0; i < m.rows(); ++i) out(i, j) = S(m(i, j));
    return out;
  }
}

#define SANPATH_DECLARE_LINALG(S)                                                      \
  extern template void gemm<S>(const Matrix<S>&, const Matrix<S>&, Matrix<S>&);       \
  extern template void gemm_nt<S>(const Matrix<S>&, const Matrix<S>&, Matrix<S>&);     \
  extern template void gemm_weights<S>(const Matrix<S>&, const Matrix<double>&, Matrix<S>&); \
  extern template void gemm_weights<S>(const Matrix<S>&, const WeightView&, Matrix<S>&);           \
  extern template void gemm_weights_nt<S>(const Matrix<S>&, const Matrix<double>&, Matrix<S>&);
// At double and every tier of the ladder (src/core/linalg_tiers.cpp).
#define SANPATH_DECLARE_LINALG_TIER(D) SANPATH_DECLARE_LINALG(::sanpath::mpfr_real<D>)
SANPATH_DECLARE_LINALG(double)
SANPATH_FOR_EACH_LADDER_TIER(SANPATH_DECLARE_LINALG_TIER)
#undef SANPATH_DECLARE_LINALG_TIER
#undef SANPATH_DECLARE_LINALG

}  // namespace sanpath

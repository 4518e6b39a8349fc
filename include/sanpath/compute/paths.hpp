#pragma once
/// \file paths.hpp
/// Path decomposition of attention-only networks (math.md §4, the paper's
/// Theorem 2.1). With the attention matrices P_h^l of a forward pass frozen,
///
///   \f$ X^L = \sum_{path} P_{path} X W_{path} + 1 b^T \f$,
///   \f$ P_{path} = P^L_{h_L} \cdots P^1_{h_1} \f$,
///   \f$ W_{path} = W^1_{h_1} \cdots W^L_{h_L} \f$,  \f$ W_h = W_V^h W_O^h \f$.
///
/// A path is a head sequence: `heads[l-1]` is the choice at layer l, a head
/// 0..H-1 (0-based, math.md's h_l = heads[l-1] + 1) or -1 for the skip
/// connection (only with skip on; P = I, W = I). Its length is the number of
/// non-skip layers.
///
/// Three ways to look at the terms, all from a ForwardTrace<S> recorded with
/// attention:
/// - enumeration (enumerate_paths): walks the path tree depth first, one
///   left and one right product per tree node, streams one small record per
///   path to a visitor in a deterministic order (independent of the thread
///   count); filters by length, allowed heads per layer, top-K; refuses
///   above a path-count limit before doing any work;
/// - length sums (length_sums): the sum of all terms of each length by the
///   recursion of math.md §4, without enumerating, at any size;
/// - sampling (sample_paths): uniform random paths of a given length, mean
///   and 95% confidence interval of the term norms.
///
/// Only attention-only variants (mlp none, layernorm none; skip on or off)
/// are decomposable: every entry point throws std::invalid_argument for
/// other variants. Matrix products go through gemm (linalg.hpp); norms are
/// those of norms.hpp (composite = sqrt(‖·‖_1 ‖·‖_∞); residuals with the
/// mean centre). The value-output maps are applied in S as Y W_h =
/// (Y W_V^h) W_O^h when 2·d_v < d (cheaper, and no d×d matrix per head is
/// stored: BERT-base sizes fit), otherwise through W_h = W_V^h W_O^h formed
/// once; T is always evaluated as P_h (Y W_h), layer by layer.
///
/// Threads: the work is split into subtrees fixed by the filter alone (the
/// shallowest depth with at least 256 nodes); workers fill per-subtree
/// buffers of records and the calling thread hands them to the visitor in
/// enumeration order. MPFR must be thread-safe (Debian's is built with TLS).
///
/// Ranks (distributed.hpp): under MPI the subtrees of enumerate_paths and
/// top_paths, and the blocks of sampled paths, are shared round robin over
/// the ranks in rounds (SharedJob); every rank receives every record and sum
/// exactly and goes on as one process does, so every rank returns the same
/// result, bit for bit, as one process.

#include "sanpath/core/errors.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/path_counts.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/core/scalar.hpp"

#include <boost/multiprecision/cpp_int.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sanpath {

/// Default limit of enumerate_paths: 10^7 paths.
inline constexpr std::uint64_t default_max_paths = 10'000'000;

/// Which paths to visit. Lengths: [min_length, max_length] (max_length < 0
/// means L); a single length k is min = max = k. `allowed_heads`: empty for
/// no restriction, otherwise one entry per layer (index l-1 for layer l)
/// listing the allowed choices (heads 0..H-1, and -1 for skip when skip is
/// on); order and duplicates do not matter; an empty entry allows no path.
struct PathFilter {
  int min_length = 0;
  int max_length = -1;
  std::vector<std::vector<int>> allowed_heads;

  static PathFilter length(int k) { return {k, k, {}}; }
  static PathFilter lengths(int kmin, int kmax) { return {kmin, kmax, {}}; }
};

/// Exact numbers of paths by length k = 0..L that pass `filter` (lengths
/// outside the range count 0), by the product over layers of
/// ([skip allowed] + (allowed heads)·x). Without a filter: C(L,k)·H^k with
/// skip, H^L at k = L only without. Throws std::invalid_argument for an
/// invalid filter (see validate_filter).
std::vector<PathCount> count_paths_by_length(int layers, int heads, bool skip, const PathFilter& filter = {});
/// Σ_k count_paths_by_length(...)[k].
PathCount count_filtered_paths(int layers, int heads, bool skip, const PathFilter& filter = {});

/// Throws std::invalid_argument (one line, naming the field) unless
/// 0 <= min_length <= max_length <= L (max_length < 0 reads as L),
/// allowed_heads is empty or has L entries, each choice is in [0, H) or is
/// -1 with skip on.
void validate_filter(const PathFilter& filter, int layers, int heads, bool skip);

/// Thrown by enumerate_paths (before any work) when the exact number of
/// paths to visit exceeds the limit. A ResourceError (std::runtime_error);
/// the message names the exact count in decimal, the limit, and points to
/// length sums (--sums) and sampling (--sample).
class PathLimitError : public ResourceError {
 public:
  PathLimitError(const PathCount& count, std::uint64_t limit);
  const PathCount& count() const { return count_; }
  std::uint64_t limit() const { return limit_; }

 private:
  PathCount count_;
  std::uint64_t limit_;
};

/// Throws std::invalid_argument unless `v` is attention-only (mlp none,
/// layernorm none), naming the variant.
void require_attention_only(const Variant& v);

/// One enumerated path. Norms of the term T = P_path X W_path (n×d) and of
/// its stochastic factor P_path (n×n; I for the all-skip path).
template <class S> struct PathRecord {
  std::vector<int> heads;  ///< per layer: head 0..H-1 or -1 (skip)
  int length = 0;          ///< number of non-skip layers
  S norm_composite{};      ///< ‖T‖_{1,∞}
  S norm_frobenius{};      ///< ‖T‖_F
  S residual_composite{};  ///< ‖res(T)‖_{1,∞}, mean centre
  S stochastic_residual{}; ///< ‖res(P_path)‖_{1,∞}, mean centre
};

/// Receives each path's record (called from the calling thread only).
template <class S> using PathVisitor = std::function<void(const PathRecord<S>&)>;

struct EnumerationOptions {
  PathFilter filter;
  /// 0: every path is visited, in enumeration order: depth first, at each
  /// layer skip first then heads ascending (lexicographic order of `heads`
  /// with -1 first). K > 0: only the K paths of largest ‖T‖_{1,∞} are
  /// visited, after the walk, in descending norm (ties in enumeration order).
  std::size_t top_k = 0;
  /// Worker threads (0: hardware concurrency). Records and sums are
  /// identical, value for value and in order, for every thread count.
  int threads = 1;
  /// Refuse (PathLimitError) when more paths than this pass the filter.
  std::uint64_t max_paths = default_max_paths;
  /// Also sum the terms of the visited paths by length (all paths passing
  /// the filter, independently of top_k).
  bool accumulate = false;
};

template <class S> struct EnumerationResult {
  std::uint64_t paths = 0;  ///< paths that passed the filter (were walked)
  /// accumulate: sums[k] = Σ T over walked paths of length k (n×d), k = 0..L.
  std::vector<Matrix<S>> sums;
  RowVector<S> bias;  ///< b^L (1×d): b^0 = 0, b^l = (S^l)ᵀ b^{l−1} + c_l (math.md §4)
};

/// Walks the path tree of `trace` (attention recorded, variant
/// attention-only, same model). Throws std::invalid_argument on a bad trace
/// or filter, PathLimitError above options.max_paths. `visitor` may be empty.
template <class S>
EnumerationResult<S> enumerate_paths(const Model& model, const ForwardTrace<S>& trace,
                                     const EnumerationOptions& options, const PathVisitor<S>& visitor);

/// The record and (if `term` is non-null) the term T of one path.
/// `heads`: L choices as in PathRecord. Same arithmetic as enumeration, so
/// the record is identical to the enumerated one.
template <class S>
PathRecord<S> evaluate_path(const Model& model, const ForwardTrace<S>& trace, const std::vector<int>& heads,
                            Matrix<S>* term = nullptr);

/// Largest |approx_ij − exact_ij| relative to the largest |exact_ij| (absolute
/// when exact is 0), computed in S and returned at S's precision.
/// Throws std::invalid_argument on a shape mismatch.
template <class S> BigReal relative_max_error(const Matrix<S>& approx, const Matrix<S>& exact);

/// Theorem 2.1 by enumeration: relative_max_error(Σ_paths T + 1 bᵀ, X^L)
/// over every path (no filter). Throws like enumerate_paths above `max_paths`.
template <class S>
BigReal enumeration_error(const Model& model, const ForwardTrace<S>& trace, int threads = 1,
                          std::uint64_t max_paths = default_max_paths);

/// Sum of the terms of one length k (math.md §4).
template <class S> struct LengthSum {
  int length = 0;
  PathCount count;         ///< number of paths of length k (exact)
  Matrix<S> sum;           ///< S_k^L = Σ_{|path| = k} T_path (n×d)
  S frobenius{};           ///< ‖S_k‖_F
  S residual_composite{};  ///< ‖res(S_k)‖_{1,∞}, mean centre
  /// ‖S_k‖_F / ‖X^L‖_F with X^L the forward output. Shares do not add up to
  /// 1 in general (terms of different lengths may cancel; the bias is apart).
  S share{};
};

template <class S> struct LengthSums {
  std::vector<LengthSum<S>> terms;  ///< k = 0..L (terms[k].length == k)
  RowVector<S> bias;                ///< b^L
  Matrix<S> reconstruction;         ///< Σ_k S_k + 1 bᵀ
  S output_frobenius{};             ///< ‖X^L‖_F
  BigReal error;                    ///< relative_max_error(reconstruction, X^L)
};

/// Length sums by the recursion S_k^0 = [k = 0] X, S_k^l = [skip] S_k^{l-1}
/// + Σ_h P_h^l (S_{k-1}^{l-1} W_h^l), evaluated for all k at once layer by
/// layer (memory O(L·n·d) plus one layer's weights; O(L²·H) head products
/// with skip, O(L·H) without). `threads` (0: hardware) split the lengths of
/// a layer; results do not depend on it.
template <class S> LengthSums<S> length_sums(const Model& model, const ForwardTrace<S>& trace, int threads = 1);

/// A uniformly random path of length k: k distinct layers chosen uniformly
/// (partial Fisher–Yates with Rng::below), then a head uniformly per chosen
/// layer, so each of the C(L,k)·H^k paths has the same probability. Without
/// skip k must be L. Throws std::invalid_argument otherwise.
std::vector<int> random_path(Rng& rng, int layers, int heads, bool skip, int length);

struct SampleOptions {
  std::vector<int> lengths;    ///< lengths to sample (each in [0, L]; L only without skip)
  std::uint64_t samples = 1000;  ///< per length, with replacement; at least 2
  std::uint64_t seed = 0;      ///< length k uses Rng(seed + k·0x9E3779B97F4A7C15)
  /// Workers for the terms (0: product_threads()), blocks of 64 sampled
  /// paths each; the statistics do not depend on it.
  int threads = 1;
};

/// Sample mean, standard deviation (N−1) and the normal-approximation 95%
/// confidence interval of the mean: mean ± 1.959963984540054·sd/√N.
template <class S> struct MeanInterval {
  S mean{}, stddev{}, low{}, high{};
};

template <class S> struct LengthSample {
  int length = 0;
  std::uint64_t samples = 0;
  PathCount population;          ///< C(L,k)·H^k (H^L without skip)
  MeanInterval<S> norm;          ///< of ‖T‖_{1,∞}
  MeanInterval<S> residual;      ///< of ‖res(T)‖_{1,∞}, mean centre
};

/// Samples random paths per length (deterministic for a seed; independent
/// of which other lengths are requested). Throws std::invalid_argument on
/// a bad trace, length or sample count.
template <class S>
std::vector<LengthSample<S>> sample_paths(const Model& model, const ForwardTrace<S>& trace,
                                          const SampleOptions& options);

#define SANPATH_DECLARE_PATHS(S)                                                                              \
  extern template EnumerationResult<S> enumerate_paths<S>(const Model&, const ForwardTrace<S>&,               \
                                                          const EnumerationOptions&, const PathVisitor<S>&);  \
  extern template PathRecord<S> evaluate_path<S>(const Model&, const ForwardTrace<S>&, const std::vector<int>&, \
                                                 Matrix<S>*);                                                 \
  extern template BigReal relative_max_error<S>(const Matrix<S>&, const Matrix<S>&);                          \
  extern template BigReal enumeration_error<S>(const Model&, const ForwardTrace<S>&, int, std::uint64_t);     \
  extern template LengthSums<S> length_sums<S>(const Model&, const ForwardTrace<S>&, int);                    \
  extern template std::vector<LengthSample<S>> sample_paths<S>(const Model&, const ForwardTrace<S>&,          \
                                                               const SampleOptions&);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_PATHS)
#undef SANPATH_DECLARE_PATHS

}  // namespace sanpath

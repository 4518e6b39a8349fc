#pragma once
/// \file paths.hpp
/// Reports of the path decomposition (math.md §4) with the accuracy of every
/// number stated (math.md §6): what `sanpath paths` prints. Each analysis
/// runs the forward pass of `input` at the working precision p of the
/// request — fixed, or for auto the precision analyze_forward would choose
/// (choose_precision, mean centre) — records the attention matrices, computes
/// its quantities from that trace (paths.hpp), then does all of it again at
/// p.next() and confirms each value against its second computation
/// (sanpath::confirm). A value that disagrees in every digit is reported as
/// below resolution ("< 1e-N"); a residual computed as exactly 0 although
/// its matrix is not 0 likewise (rows identical in rounding is not a
/// measurement). Counts are exact decimal strings. Auto resolves the
/// residuals of the layers' outputs; single path terms may collapse much
/// further (long paths with skip on) and then print as such bounds: ask for
/// more bits with a fixed precision to resolve them.
///
/// Shapes: a path term T = P_path X^0 W_path is n × d like X^L; S_k is the
/// sum of the terms of length k, and Σ_k S_k + 1bᵀ = X^L (Theorem 2.1).
///
/// \code
///   Variant v = Variant::san();
///   v.skip = true;  // attention-only with skip connections: (H+1)^L paths
///   const LengthSumsReport r = analyze_length_sums(model, v, x, PrecisionRequest{});
///   for (const LengthSumEntry& e : r.lengths) std::cout << e.length << " " << e.share.str() << "\n";
/// \endcode
///
/// Every entry point throws std::invalid_argument (the message of
/// require_attention_only) for variants that are not attention-only, and
/// std::invalid_argument for bad inputs, filters, lengths or sample counts.

#include "sanpath/analysis/forward.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/compute/paths.hpp"
#include "sanpath/model/task_head.hpp"
#include "sanpath/core/quantity.hpp"
#include "sanpath/core/scalar.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// What every path report shares: the analysed variant and the provenance
/// of its numbers (the direct pass; check: the confirming run's tier,
/// PrecisionRequest::confirming_tier, none when not requested;
/// ceiling_reached: the top precision did not resolve every layer's residual).
struct PathReportBase : Provenance {
  Variant variant;
  int layers = 0, heads = 0;       ///< L and H of the model
  long tokens = 0;                 ///< n, rows of X^0
};

// ------------------------------------------------------------ length sums

/// The sum S_k of all path terms of length k (math.md §4).
struct LengthSumEntry {
  int length = 0;
  std::string count;          ///< number of paths of length k, exact decimal (C(L,k)·H^k; H^L or 0 without skip)
  Quantity frobenius;         ///< ‖S_k‖_F
  Quantity residual;          ///< ‖res(S_k)‖_{1,∞}, mean centre
  Quantity share;             ///< ‖S_k‖_F / ‖X^L‖_F (shares need not add up to 1)
  std::optional<int> digits;  ///< least confirmed digits of the three (nullopt: no check run)
};

struct LengthSumsReport : PathReportBase {
  std::vector<LengthSumEntry> lengths;  ///< k = 0..L, lengths[k].length == k
  std::string total_count;              ///< Σ_k count: (H+1)^L with skip, H^L without
  /// Theorem 2.1: max |Σ_k S_k + 1bᵀ − X^L| / max |X^L| at the working
  /// precision, confirmed against the check run (rounding error: it is
  /// usually reported as a bound "< 1e-N").
  Quantity decomposition_error;
  Quantity output_frobenius;  ///< ‖X^L‖_F
};

/// Length sums of every k = 0..L (no enumeration; any size).
LengthSumsReport analyze_length_sums(const Model& model, const Variant& variant, const InputSpec& input,
                                     const PrecisionRequest& request, const ProgressFn& progress = {});

// ------------------------------------------------------------ enumeration

/// Which paths to enumerate and how.
struct EnumerationRequest {
  /// Lengths and allowed heads per layer (paths.hpp; heads 0-based, -1 skip).
  PathFilter filter;
  /// 0: every path passing the filter, in enumeration order; K > 0: the K
  /// of largest ‖T‖_{1,∞} at the working precision, in descending order.
  std::size_t top_k = 0;
  int threads = 1;  ///< 0: hardware concurrency; results do not depend on it
  /// Without top_k: refuse (PathLimitError, a ResourceError) when more paths
  /// pass the filter. A top-K selection is a branch-and-bound search
  /// (top_paths.hpp) that does not visit every path: no limit.
  std::uint64_t limit = default_max_paths;
};

/// The branch-and-bound search of a top-K selection (top_paths.hpp).
struct PathSearchStats {
  std::uint64_t nodes = 0;    ///< tree nodes formed
  std::uint64_t skipped = 0;  ///< head children skipped before being formed
  std::uint64_t leaves = 0;   ///< complete paths evaluated
};

/// One path term T = P_path X W_path.
struct PathTermEntry {
  std::vector<int> heads;        ///< per layer: head 0..H-1, -1 = skip connection
  int length = 0;                ///< non-skip layers
  Quantity norm_frobenius;       ///< ‖T‖_F
  Quantity norm_composite;       ///< ‖T‖_{1,∞}
  Quantity residual_composite;   ///< ‖res(T)‖_{1,∞}, mean centre
  Quantity stochastic_residual;  ///< ‖res(P_path)‖_{1,∞}, mean centre
  std::optional<int> digits;     ///< least confirmed digits of the four
};

struct PathEnumerationReport : PathReportBase {
  EnumerationRequest request;
  std::string walked;                ///< paths that passed the filter, exact decimal
  std::string total_count;           ///< all paths of the network, exact decimal
  bool all_paths = false;            ///< the filter lets every path through
  std::vector<PathTermEntry> paths;  ///< enumeration order, or top-K order
  std::optional<PathSearchStats> search;  ///< top-K: the search at the working precision
  /// Certified runs: the tier that chose the paths (a top-K selection and
  /// its order); the enclosures may have needed a higher one (`precision`).
  std::optional<Precision> selected_at;
  /// Theorem 2.1 over every path, as LengthSumsReport::decomposition_error;
  /// only when all_paths (a partial sum does not reconstruct X^L).
  std::optional<Quantity> decomposition_error;
};

/// Enumerates path terms, or (top_k > 0) selects the K largest by branch
/// and bound (top_paths.hpp: the same K as a full walk, at any size). The
/// confirming run evaluates the same paths (matched by head sequence) at
/// p.next(): by a second walk, or, for a top-K selection, path by path
/// (evaluate_path). The decomposition error (every path passes the filter)
/// is the walk's, or for a top-K selection the length-sum reconstruction
/// error, at each precision (both are rounding errors, only their size
/// enters the bound). Throws PathLimitError before any forward pass when,
/// without top_k, more than request.limit paths pass the filter, and
/// ResourceError when the kept records would exceed the memory budget.
PathEnumerationReport analyze_enumeration(const Model& model, const Variant& variant, const InputSpec& input,
                                          const PrecisionRequest& request, const EnumerationRequest& enumeration,
                                          const ProgressFn& progress = {});

/// Streams the terms of the paths passing `filter` to `visit` one at a
/// time, in enumeration order, without keeping them: memory does not grow
/// with the number of paths. Each term is confirmed against the same path
/// evaluated alone (evaluate_path, the enumeration's own arithmetic) on the
/// forward pass at p.next(), so the entries equal analyze_enumeration's
/// without top-K. Throws like analyze_enumeration (PathLimitError above
/// `limit`, before any forward pass); an exception thrown by `visit` stops
/// the walk and propagates. Returns the variant and precisions used.
PathReportBase stream_enumeration(const Model& model, const Variant& variant, const InputSpec& input,
                                  const PrecisionRequest& request, const PathFilter& filter, std::uint64_t limit,
                                  const std::function<void(const PathTermEntry&)>& visit,
                                  const ProgressFn& progress = {});

// --------------------------------------------------------------- sampling

/// Sample mean, standard deviation and the 95% confidence interval of the
/// mean (normal approximation, paths.hpp's MeanInterval).
struct SampleStatistic {
  Quantity mean, stddev, low, high;
};

struct LengthSampleEntry {
  int length = 0;
  std::uint64_t samples = 0;
  std::string population;     ///< paths of this length, exact decimal
  SampleStatistic norm;       ///< of ‖T‖_{1,∞}
  SampleStatistic residual;   ///< of ‖res(T)‖_{1,∞}, mean centre
  std::optional<int> digits;  ///< least confirmed digits of the means and interval ends (not the stddevs)
};

struct PathSampleReport : PathReportBase {
  std::uint64_t seed = 0;
  std::vector<LengthSampleEntry> lengths;  ///< in the order requested
};

/// Uniform random paths per length (paths.hpp's sample_paths: the same
/// paths at both precisions for a seed). `lengths` empty: every length that
/// has paths (0..L with skip, L without). At least 2 samples.
PathSampleReport analyze_samples(const Model& model, const Variant& variant, const InputSpec& input,
                                 const PrecisionRequest& request, const std::vector<int>& lengths,
                                 std::uint64_t samples, std::uint64_t seed, const ProgressFn& progress = {});

// ---------------------------------------------------------- effectiveness

/// The network truncated to the paths of length at most k
/// (compute/effectiveness.hpp): X_{≤k} = Σ_{j≤k} S_j + 1bᵀ.
struct EffectivenessEntry {
  int length = 0;             ///< k
  std::string count;          ///< paths of length at most k, exact decimal
  Quantity distance;          ///< ‖X_{≤k} − X^L‖_F / ‖X^L‖_F
  /// With a task head: predictions (argmax) of the head on X_{≤k} equal to
  /// those on X^L, out of EffectivenessReport::predictions; the check run's
  /// count (nullopt without a check run). A count the two runs disagree on
  /// is not confirmed.
  std::optional<long> agree, agree_check;
  /// Certified runs (no check run): `agree` counts the predictions proven to
  /// agree, agree_most those that may (a row whose argmax the logits'
  /// enclosures leave undecided); equal when every argmax is decided.
  std::optional<long> agree_most;
  std::optional<Quantity> kl;  ///< mean KL(p(X^L) ‖ p(X_{≤k})) of the head's softmax
  std::optional<int> digits;   ///< least confirmed digits of distance and kl
};

struct EffectivenessReport : PathReportBase {
  std::optional<TaskHeadKind> head;  ///< the checkpoint's task head, if any
  long outputs = 0;                  ///< classes or vocabulary size of the head
  long predictions = 0;              ///< predictions per truncation (1 per sequence / n per sequence)
  std::vector<EffectivenessEntry> lengths;  ///< k = 0..L
  Quantity output_frobenius;                ///< ‖X^L‖_F
};

/// The exact effectiveness curve for k = 0..L from the length sums (any
/// size), with the task head's agreement and KL when `head` is given.
/// request.check == certified: analyze_effectiveness_certified (certified.hpp).
EffectivenessReport analyze_effectiveness(const Model& model, const Variant& variant, const InputSpec& input,
                                          const PrecisionRequest& request, const TaskHead* head,
                                          const ProgressFn& progress = {});

// ---------------------------------------------------------------- helpers

/// Parses allowed heads per layer: L entries separated by '/', each a
/// comma-separated list of 0-based heads, `skip` (or -1) for the skip
/// connection, `*` for every choice of that layer; e.g. "0,1/*/skip,3".
/// Validated against (layers, heads, skip); throws std::invalid_argument
/// naming the layer and item.
std::vector<std::vector<int>> parse_heads_per_layer(const std::string& text, int layers, int heads, bool skip);

/// Theorem 2.1 holds "to the working precision" when the decomposition
/// error at p is at most 2^(-bits/2) (half the working digits; rounding
/// leaves about 2^-bits times a modest growth factor, while a term missed or
/// wrong leaves an error of the order of the term, independent of p).
BigReal decomposition_tolerance(const Precision& p);
bool decomposition_holds(const Quantity& error, const Precision& p);
/// `--verify-decomposition` (Python verify_decomposition=True): throws
/// NumericalError "<what>: Theorem 2.1 fails[ for <which>]: the
/// reconstruction error E exceeds the tolerance T at P" unless
/// decomposition_holds(error, p).
void verify_decomposition(const Quantity& error, const Precision& p, const std::string& what,
                          const std::string& which = "");

}  // namespace sanpath

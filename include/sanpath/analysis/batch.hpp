#pragma once
/// \file batch.hpp
/// Batches of inputs: the same analysis on b input sequences (of any
/// lengths), each at its own automatic precision and confirmed by its own
/// second run, and per-layer statistics of the relative residual over the
/// batch — what the paper's Figure 2 plots (a mean over 32 sequences with
/// its standard deviation). Inputs run on several threads; every result is
/// stored by input index, so the output does not depend on the thread count.
///
/// \code
///   const std::vector<InputSpec> xs = {InputSpec::from_tokens({1, 2, 3}), InputSpec::from_tokens({4, 5, 6, 7})};
///   const BatchForwardAnalysis b = analyze_forward_batch(model, Variant::san(), xs, {}, Center::mean, 2);
///   b.layers[l].mean.str();  // mean relative residual of layer l over the batch
/// \endcode

#include "sanpath/analysis/bounds.hpp"
#include "sanpath/analysis/collapse.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/serialize.hpp"
#include "sanpath/core/distributed.hpp"
#include "sanpath/core/quantity.hpp"

#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sanpath {

/// Statistics of positive values x_1..x_b (b ≥ 1), each a Quantity:
/// mean = Σx_i/b; stddev = sqrt(Σ(x_i − mean)²/(b − 1)) (the sample standard
/// deviation, numpy ddof=1 / torch.std); min, median (mean of the two middle
/// values for even b), max.
/// Digits: with d_i confirmed digits x_i is known to a relative error
/// 10^(1−d_i); a mean, an order statistic or a median of positive values is
/// then known to the least d_i. The standard deviation moves by at most
/// sqrt(b/(b−1))·max_i |δx_i|, which limits its digits (below resolution when
/// none remain). Values that are only upper bounds (below resolution) make
/// mean, min, median and max upper bounds; the standard deviation is then
/// unknown.
struct BatchStatistic {
  long count = 0;
  Quantity mean;
  std::optional<Quantity> stddev;  ///< nullopt for b = 1 or when a value is only an upper bound
  Quantity min, median, max;
};
BatchStatistic summarize(const std::vector<Quantity>& values);

/// The statistics of one measure (math.md §9) over a batch.
struct MeasureStatistic {
  std::string name;  ///< a measure_value_names name
  BatchStatistic statistic;
};

/// The statistics of every measure the first of `layers` reports and every
/// other reports too (one layer of each input of a batch), in its order.
std::vector<MeasureStatistic> summarize_measures(const std::vector<const LayerReport*>& layers);

/// Σ w_i·x_i / Σ w_i of positive values x_i with weights w_i ≥ 1: the mean
/// over pooled items when x_i is itself the mean over the w_i items of input
/// i (e.g. a mean KL over an input's predictions). Digits and upper bounds as
/// summarize's mean. Throws std::invalid_argument for no values, a weight
/// below 1 or sizes that differ.
Quantity weighted_mean(const std::vector<Quantity>& values, const std::vector<long>& weights);

/// Runs `task(i)` for i = 0..count−1, sharing `threads` threads (0:
/// product_threads(), all cores by default): min(threads, count) inputs at
/// once, each with its thread_share for its own products (one worker: the
/// calling thread, with every thread for its products). When
/// tasks throw, the exception of the lowest failing index is rethrown after
/// every started task has finished.
void for_each_input(std::size_t count, int threads, const std::function<void(std::size_t)>& task);

/// run(i, progress of input i) for every input i (after
/// check_batch_inputs), on `threads` workers (for_each_input), the results
/// in input order. Under MPI (distributed.hpp) the inputs are shared over
/// the ranks and every rank returns every result, exactly as computed
/// (serialize.hpp). Throws std::invalid_argument for an empty batch.
template <class R, class F>
std::vector<R> map_inputs(const Model& model, const std::vector<InputSpec>& inputs, int threads,
                          const ProgressFn& progress, F&& run);

/// Progress of input i of a batch: messages prefixed "input i/b: ",
/// serialised by a lock (callable from several threads). Empty when
/// `progress` is empty.
ProgressFn batch_progress(const ProgressFn& progress, std::size_t i, std::size_t count);

/// Checks every token input against the model's embeddings before any work
/// (a batch fails at once, not after hours): an empty sequence, one longer
/// than the position table or an id outside the vocabulary throws
/// std::invalid_argument naming the input's source (for a token file
/// "<file>: line <k>") and the token.
void check_batch_inputs(const Model& model, const std::vector<InputSpec>& inputs);

/// analyze_forward on every input, and the statistics of each layer's
/// relative residual. layers[l] summarises runs[·].layers[l].relative_residual.
struct BatchForwardAnalysis {
  std::vector<ForwardAnalysis> runs;  ///< one per input, in input order
  std::vector<BatchStatistic> layers;
  std::vector<std::vector<MeasureStatistic>> measures;  ///< measures[l]: the measures asked, at layer l
};
BatchForwardAnalysis analyze_forward_batch(const Model& model, const Variant& variant,
                                           const std::vector<InputSpec>& inputs, const PrecisionRequest& request,
                                           Center center, int threads, const ProgressFn& progress = {});

/// run_collapse on every input (after check_batch_inputs). layers[v][l] summarises the relative residual
/// of variant v at layer l over the batch.
struct BatchCollapseResult {
  CollapseConventions conventions = CollapseConventions::theory;
  std::vector<NamedVariant> variants;
  std::vector<CollapseResult> runs;  ///< one per input, in input order
  std::vector<std::vector<BatchStatistic>> layers;
  std::vector<std::vector<std::vector<MeasureStatistic>>> measures;  ///< measures[v][l], as layers[v][l]
  /// With --emulate: emulated[v][l], the statistics of the emulated model's
  /// relative residual over the batch (nullopt where an input's layer is
  /// non-finite), and emulated_correct[v][l], the least correct digits of
  /// any input's (nullopt where one is unknown).
  std::vector<std::vector<std::optional<BatchStatistic>>> emulated;
  std::vector<std::vector<std::optional<int>>> emulated_correct;
};
BatchCollapseResult run_collapse_batch(const Model& model, const std::vector<InputSpec>& inputs,
                                       const PrecisionRequest& precision, CollapseConventions conventions,
                                       int threads, const ProgressFn& progress = {});

/// analyze_length_sums on every input (after check_batch_inputs), each at
/// its own precision. lengths[k] summarises the share ‖S_k‖_F / ‖X^L‖_F of
/// length k (scale-free, comparable across inputs); decomposition_error
/// summarises Theorem 2.1's reconstruction error of every input.
struct BatchLengthSums {
  std::vector<LengthSumsReport> runs;  ///< one per input, in input order
  std::vector<BatchStatistic> lengths;  ///< k = 0..L
  BatchStatistic decomposition_error;
};
BatchLengthSums analyze_length_sums_batch(const Model& model, const Variant& variant,
                                          const std::vector<InputSpec>& inputs, const PrecisionRequest& request,
                                          int threads, const ProgressFn& progress = {});

/// How many inputs got each verdict at one depth.
struct VerdictCounts {
  long holds = 0, violated = 0, undecided = 0, not_applicable = 0;
};

/// analyze_bounds on every input (after check_batch_inputs). relative[l]
/// summarises the measured r_l / ‖X^l‖_{1,∞} (upper end of the optimal-centre
/// enclosure, depths l = 0..L); verdicts[l − 1] counts the verdicts of the
/// uniform bound at depth l = 1..L. The weights' constants (β, a) do not
/// depend on the input: every run carries the same.
struct BatchBounds {
  std::vector<BoundsAnalysis> runs;  ///< one per input, in input order
  std::vector<BatchStatistic> relative;
  std::vector<VerdictCounts> verdicts;
};
BatchBounds analyze_bounds_batch(const Model& model, const Variant& variant, const std::vector<InputSpec>& inputs,
                                 const BoundsRequest& request, int threads, const ProgressFn& progress = {});

template <class R, class F>
std::vector<R> map_inputs(const Model& model, const std::vector<InputSpec>& inputs, int threads,
                          const ProgressFn& progress, F&& run) {
  if (inputs.empty()) throw std::invalid_argument("batch: no inputs");
  check_batch_inputs(model, inputs);
  std::vector<R> out(inputs.size());
  share_items(
      inputs.size(),
      [threads](std::size_t n, const std::function<void(std::size_t)>& task) { for_each_input(n, threads, task); },
      [&](std::size_t i) { out[i] = run(i, batch_progress(progress, i, inputs.size())); },
      [&](std::size_t i) { return to_bytes(out[i]); },
      [&](std::size_t i, const std::string& bytes) { from_bytes(bytes, out[i]); });
  return out;
}

}  // namespace sanpath

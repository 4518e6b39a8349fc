#pragma once
/// \file effectiveness_batch.hpp
/// Path effectiveness over a batch of inputs (what `sanpath paths
/// --effectiveness [--rerun N]` prints for --tokens-file, an [b, n, d]
/// --input or --random-input N --batch B): every input's own result
/// (paths.hpp analyze_effectiveness, rerun.hpp analyze_rerun) at its own
/// automatic precision and confirmed by its own check run, computed on
/// several threads and stored by input index (the output does not depend on
/// the thread count), and per length k the statistics over the batch:
///
///  - distance ‖X_{≤k} − X^L‖_F / ‖X^L‖_F: batch.hpp summarize over the
///    inputs (mean, sample std, min, median, max);
///  - with a task head, pooled over every prediction of the batch: agreeing
///    predictions / all predictions (the BERT classifier makes one prediction
///    per input, GPT-2's LM head one per position, so the denominator is b or
///    Σ_i n_i), and the mean KL over all predictions, Σ_i w_i·KL_i / Σ_i w_i
///    with KL_i input i's mean over its w_i predictions (batch.hpp
///    weighted_mean).
///
/// Re-run sense: input i draws its paths with the seed rerun_input_seed(seed,
/// i) (input 0 with `seed` itself), so draws depend on the input's index,
/// never on scheduling. Its distance and gap enter the batch statistics as
/// its mean over its R repetitions (one value when every path of the length
/// was run); the agreement is pooled over inputs × repetitions (Σ_i Σ_r
/// agree_ir / Σ_i R_i·predictions_i) and the KL is the mean over those same
/// predictions.
///
/// \code
///   const BatchEffectiveness b = analyze_effectiveness_batch(model, v, inputs, {}, &head, 2);
///   b.lengths[k].distance.mean.str();  // mean distance over the batch
///   b.lengths[k].head->agree;          // agreeing predictions of all b inputs
/// \endcode

#include "sanpath/analysis/batch.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/rerun.hpp"
#include "sanpath/model/task_head.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// A task head's predictions pooled over a batch.
struct PooledAgreement {
  long agree = 0;                   ///< agreeing predictions, summed over the batch
  std::optional<long> agree_check;  ///< the same on the check runs (nullopt: some input had none)
  /// Certified runs: the predictions that may agree (`agree`: those proven to).
  std::optional<long> agree_most;
  long predictions = 0;             ///< all predictions of the batch
  Quantity kl;                      ///< mean KL(p(X^L) ‖ p(·)) over all predictions
};

/// One truncation length k over the batch (exact sense).
struct BatchEffectivenessEntry {
  int length = 0;
  std::string count;                    ///< paths of length ≤ k, exact decimal
  BatchStatistic distance;              ///< over the inputs
  std::optional<PooledAgreement> head;  ///< with a task head
};

struct BatchEffectiveness {
  std::vector<EffectivenessReport> runs;         ///< one per input, in input order
  std::vector<BatchEffectivenessEntry> lengths;  ///< k = 0..L
};

/// analyze_effectiveness on every input and the statistics above. Throws
/// like analyze_effectiveness, and like check_batch_inputs for bad inputs.
BatchEffectiveness analyze_effectiveness_batch(const Model& model, const Variant& variant,
                                               const std::vector<InputSpec>& inputs, const PrecisionRequest& request,
                                               const TaskHead* head, int threads, const ProgressFn& progress = {});

/// The statistics of the exact sense over per-input reports (all of one
/// model and variant): what analyze_effectiveness_batch returns in lengths.
std::vector<BatchEffectivenessEntry> effectiveness_statistics(const std::vector<const EffectivenessReport*>& runs);

/// One length k of the re-run sense over the batch.
struct BatchRerunEntry {
  int length = 0;
  std::string count;            ///< paths of length k, exact decimal
  bool all_paths = false;       ///< every path of length k was run once (each input: one value)
  std::uint64_t evaluated = 0;  ///< sub-networks run per input and repetition
  BatchStatistic distance;      ///< over the inputs of each input's mean over its repetitions
  std::optional<BatchStatistic> gap;    ///< likewise, with the exact sense
  std::optional<PooledAgreement> head;  ///< pooled over inputs × repetitions
};

struct BatchRerun {
  RerunRequest request;                ///< as given (threads: over the inputs)
  std::vector<std::uint64_t> seeds;    ///< each input's rerun_input_seed
  std::vector<RerunReport> runs;       ///< one per input, in input order
  /// The exact sense over the batch (attention-only variants).
  std::optional<std::vector<BatchEffectivenessEntry>> exact;
  std::vector<BatchRerunEntry> lengths;  ///< k = 0..L
};

/// The re-run seed of input `index`: seed + index·0xD1B54A32D192ED03 (mod
/// 2^64; an odd constant other than the golden-ratio step of the draws of
/// compute/rerun.hpp, so inputs do not share draw streams).
std::uint64_t rerun_input_seed(std::uint64_t seed, std::size_t index);

/// analyze_rerun on every input (with its rerun_input_seed; rerun.threads
/// run the inputs, each input's sub-networks serially when b > 1) and the
/// statistics above.
BatchRerun analyze_rerun_batch(const Model& model, const Variant& variant, const std::vector<InputSpec>& inputs,
                               const PrecisionRequest& request, const RerunRequest& rerun, const TaskHead* head,
                               const ProgressFn& progress = {});

}  // namespace sanpath

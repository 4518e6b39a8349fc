#pragma once
/// \file rerun.hpp
/// Path effectiveness in both senses (what `sanpath paths --effectiveness
/// --rerun N` prints): the paper's official procedure — N paths of each
/// length re-run as sub-networks with their own attention, for every variant
/// (compute/rerun.hpp: what a sub-network is, the unbiased estimator
/// count_k/N·Σ, the bias term) — repeated R times with different draws, and,
/// for attention-only variants, the exact frozen-attention curve
/// (analyze_effectiveness) and the gap between the two.
///
/// Precision: the re-runs use the working precision of the exact sense
/// (attention-only variants) or of analyze_forward's choice for the variant
/// (others), and are confirmed by the same draws at p.next(): the paths
/// drawn do not depend on the precision. Each repetition's value is
/// confirmed, then summarised over the repetitions (batch.hpp summarize:
/// mean, sample standard deviation, min, median, max).

#include "sanpath/analysis/batch.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/compute/rerun.hpp"
#include "sanpath/model/task_head.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sanpath {

struct RerunRequest {
  std::uint64_t samples = 16;  ///< N paths per length and repetition (every path when fewer exist), ≥ 1
  int repeats = 5;             ///< R repetitions with different draws, ≥ 1
  std::uint64_t seed = 0;      ///< compute/rerun.hpp RerunOptions::seed
  int threads = 1;             ///< 0: all cores; results do not depend on it

  /// The ranges of samples and repeats (`--rerun N`, `--repeats R`, Python
  /// rerun=, repeats=): at least 1 each. Return the value or throw
  /// std::invalid_argument ("at least 1 repetition") for the caller to name
  /// the option.
  static std::uint64_t checked_samples(std::uint64_t samples);
  static int checked_repeats(int repeats);
  /// The same from decimal text (a Python int written out): also "'-1' is
  /// not an integer in [0, 2^64)", and repeats above 2^31 - 1 "too large".
  static std::uint64_t parsed_samples(const std::string& text);
  static int parsed_repeats(const std::string& text);
};

/// The compute layer's options for `r` (compute/rerun.hpp).
RerunOptions rerun_options(const RerunRequest& r);

/// The re-run truncation X̂_{≤k} of one length k, over the repetitions.
struct RerunEntry {
  int length = 0;
  std::string count;            ///< paths of length k, exact decimal
  bool all_paths = false;       ///< every path of length k was run once: one value, no spread
  std::uint64_t evaluated = 0;  ///< sub-networks run per repetition
  BatchStatistic distance;      ///< of ‖X̂_{≤k} − X^L‖_F / ‖X^L‖_F
  /// With a task head: per repetition, predictions on X̂_{≤k} equal to those
  /// on X^L (out of RerunReport::predictions), and the check run's counts.
  std::vector<long> agree, agree_check;
  std::optional<BatchStatistic> kl;  ///< of the mean KL(p(X^L) ‖ p(X̂_{≤k}))
  /// With the exact sense: of ‖X̂_{≤k} − X_{≤k}‖_F / ‖X^L‖_F.
  std::optional<BatchStatistic> gap;
  /// Certified runs (--check certified): per repetition, the predictions
  /// that may agree (`agree` then counts those proven to agree; an argmax
  /// the logits' enclosures leave undecided may go either way), and the
  /// values of each repetition's distance, KL and gap with their enclosures
  /// and the digits these prove (math.md §10). Empty otherwise.
  std::vector<long> agree_most;
  std::vector<Quantity> distance_each, kl_each, gap_each;
};

struct RerunReport : PathReportBase {
  RerunRequest request;
  /// The exact sense (attention-only variants), at the same precisions.
  std::optional<EffectivenessReport> exact;
  std::optional<TaskHeadKind> head;  ///< the checkpoint's task head, if any
  long outputs = 0;                  ///< classes or vocabulary size of the head
  long predictions = 0;              ///< predictions per truncation
  std::vector<RerunEntry> lengths;   ///< k = 0..L
  Quantity output_frobenius;         ///< ‖X^L‖_F of the variant
};

/// Both senses of path effectiveness on `input`. With request.check ==
/// certified the re-runs run in ball arithmetic (compute/enclosure_rerun.hpp:
/// the same draws) at the tier that proves their digits, and every
/// repetition's value has the digits its enclosure proves; the statistics
/// over the repetitions are taken as for a batch. Throws
/// std::invalid_argument for a bad request, input or variant the model
/// cannot run.
RerunReport analyze_rerun(const Model& model, const Variant& variant, const InputSpec& input,
                          const PrecisionRequest& request, const RerunRequest& rerun, const TaskHead* head,
                          const ProgressFn& progress = {});

}  // namespace sanpath

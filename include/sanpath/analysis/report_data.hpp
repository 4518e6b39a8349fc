#pragma once
/// \file report_data.hpp
/// Everything one report of a model shows, gathered by calling the analyses:
/// the four collapse variants, the bounds of the SAN and the path-length
/// split of the attention-only network with skip connections. report/
/// renders it (HTML) without computing anything.
///
/// \code
///   ReportRequest req;
///   req.info = {"gpt2-capp", "--tokens 1,5,9"};
///   const HtmlReport data = build_report(model, InputSpec::from_tokens({1, 5, 9}), req);
///   write_html_report("report.html", data);  // report/html_report.hpp
/// \endcode

#include "sanpath/analysis/batch.hpp"
#include "sanpath/analysis/bounds.hpp"
#include "sanpath/analysis/collapse.hpp"
#include "sanpath/analysis/effectiveness_batch.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/rerun.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/model/task_head.hpp"

#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// Describes the analysed setting in reports.
struct RunInfo {
  std::string model;  ///< where the model came from
  std::string input;  ///< InputSpec::describe()
  /// Why the run has no task head, when it has none (io/task_head.hpp's
  /// task_head_absence): the effectiveness sections say it.
  TaskHeadAbsence head_absence = TaskHeadAbsence::not_read;
};

/// What to compute and how to describe it.
struct ReportRequest {
  PrecisionRequest precision;         ///< for every analysis of the report
  BoundsRequest bounds;               ///< γ and theorem of the bounds section (its precision is `precision`)
  RunInfo info;                       ///< where the model and the input came from (printed)
  CollapseConventions conventions = CollapseConventions::theory;  ///< of the collapse section
  std::string generator = "sanpath";  ///< printed in the footer, e.g. "sanpath 0.1.0"
  std::optional<TaskHead> head;       ///< the checkpoint's task head (effectiveness section), if any
  /// The effectiveness section's re-run sub-networks (analyze_rerun); none: the exact sense only.
  std::optional<RerunRequest> rerun;
};

/// Everything the report shows, as the library computed it.
struct HtmlReport {
  RunInfo info;
  std::string generator;
  Architecture arch;
  PrecisionRequest precision;
  CollapseResult collapse;  ///< the four variants (those the model can run); a batch: its first input
  /// A batch: the collapse section shows mean ± standard deviation over it.
  std::optional<BatchCollapseResult> batch;
  Variant bounds_variant;   ///< the SAN: skip off, mlp none, layernorm none, the model's mask
  BoundsAnalysis bounds;
  Variant paths_variant;  ///< skip on, mlp none, layernorm none, the model's mask
  LengthSumsReport lengths;
  EffectivenessReport effectiveness;  ///< on paths_variant (a batch: its first input)
  std::optional<RerunReport> rerun;   ///< on paths_variant, when requested (its exact sense is `effectiveness`)
  /// A batch: the effectiveness section over every input (rerun_batch when
  /// re-runs were requested, else effectiveness_batch).
  std::optional<BatchEffectiveness> effectiveness_batch;
  std::optional<BatchRerun> rerun_batch;
};

/// Runs run_collapse, analyze_bounds on the SAN variant, and
/// analyze_length_sums and analyze_effectiveness (with request.head; with
/// request.rerun, analyze_rerun) on the attention-only variant with skip connections, all on `input` at
/// `request.precision`. Progress messages are prefixed with the section
/// ("collapse: ", "bounds: ", "path lengths: ", "effectiveness: "). A
/// certified request (CheckMethod::certified) certifies the collapse,
/// bounds and path-length sections; the effectiveness section, not enclosed
/// yet, is confirmed (CheckMethod::automatic) instead; mpfr confirms every
/// section one tier up; rounding, which the path sections cannot honour,
/// throws std::invalid_argument (require_check, CheckScope::paths).
HtmlReport build_report(const Model& model, const InputSpec& input, const ReportRequest& request,
                        const ProgressFn& progress = {});
/// A batch: the collapse section runs run_collapse_batch and the
/// effectiveness section analyze_effectiveness_batch (or, with re-runs,
/// analyze_rerun_batch) on every input (`threads` as for_each_input), drawn
/// as mean lines with ±std bands; the bounds and path-length sections
/// analyse the first input (said so where they are shown).
HtmlReport build_report(const Model& model, const std::vector<InputSpec>& inputs, const ReportRequest& request,
                        int threads, const ProgressFn& progress = {});

}  // namespace sanpath

#pragma once
/// \file format.hpp
/// Report formatting: JSON, CSV and plain-text tables of the analyses. The
/// last stage of the data flow; no mathematics here. Every high-precision
/// number is a decimal string (Quantity::str()).

#include "sanpath/analysis/batch.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/analysis/collapse.hpp"
#include "sanpath/analysis/report_data.hpp"
#include "sanpath/compute/bounds.hpp"
#include "sanpath/model/model.hpp"

#include <string>
#include <vector>

namespace sanpath {

enum class Format { table, json, csv };
/// "table|json|csv"; throws std::invalid_argument.
Format parse_format(const std::string& text);

std::string format_forward(const ForwardAnalysis& a, const Model& model, const RunInfo& info, Format f);
std::string format_collapse(const CollapseResult& r, const Model& model, const RunInfo& info, Format f);

/// A model in one line, as every report's model line states it: "<source> (L=…, H=…[, H_kv=…], d=…, d_qk=…,
/// d_ff=…[, shared layers][; its structure][; layers streamed from the checkpoint])" (Python's repr of a Model).
std::string describe(const Model& model);

/// One sentence on the curves of `c` (printed with every collapse result).
/// `paper_norm`: the placement the paper's conventions used (paper_layernorm).
std::string describe(CollapseConventions c, LayerNormKind paper_norm = LayerNormKind::post);

/// A table cell of a batch statistic: "mean ± std [d]" (mean to at most 5
/// and std to at most 2 significant digits, never more than confirmed; d =
/// the mean's confirmed digits).
std::string mean_std_cell(const BatchStatistic& s);

/// A batch of inputs. JSON: {"model", "input", "batch": b, "variant",
/// "center", "statistics": "…", "layers": [{"layer", "relative_residual":
/// {"mean", "stddev", "min", "median", "max", "digits": {…}}}], "inputs":
/// [{"input", precision fields, "layers": [as format_forward]}]}. Table: one
/// row per layer (mean ± std, min, median, max). CSV: one row per layer.
std::string format_forward_batch(const BatchForwardAnalysis& a, const std::vector<InputSpec>& inputs,
                                 const Model& model, const RunInfo& info, Format f);
/// A batch of inputs for the collapse experiment. JSON: {"model", "input",
/// "batch", "conventions", "statistics", "variants": [{"name", "variant",
/// "layers": [{"layer", "relative_residual": {statistics}}], "inputs":
/// [{"input", precision fields, "layers": […]}]}]}. Table: mean ± std per
/// variant and layer.
std::string format_collapse_batch(const BatchCollapseResult& r, const std::vector<InputSpec>& inputs,
                                  const Model& model, const RunInfo& info, Format f);

/// "skip=off mlp=none layernorm=none mask=none".
std::string describe(const Variant& v);

// Path decomposition reports (src/io/format_paths.cpp).
struct PathGraphSpec;
struct PathCounts;
struct LengthSumsReport;
struct PathEnumerationReport;
struct PathSampleReport;
struct EffectivenessReport;
struct RerunReport;
struct BatchLengthSums;
struct BatchEffectiveness;
struct BatchRerun;

/// `sanpath graph`. JSON: {"total": "…", "by_length": [{"length": k,
/// "count": "…"}, …] (k = 0..L), "layers", "heads", "skip", "vertices",
/// "edges"}; counts are exact decimal strings.
std::string format_path_counts(const PathGraphSpec& spec, const PathCounts& counts, Format f);
/// `sanpath paths --sums`. JSON: {"length_sums": [{"length": k, "count":
/// "…", "norm": {"frobenius": "…"}, "residual": {"composite": "…"},
/// "share": "…", "digits": d}, …], "decomposition_error": "…", …}.
std::string format_length_sums(const LengthSumsReport& r, const Model& model, const RunInfo& info, Format f);
/// `sanpath paths --enumerate`. JSON: {"paths": [{"heads": [h_1, …, h_L]
/// (0-based, null = skip), "length": k, "term_norm": {"frobenius": "…",
/// "composite": "…"}, "term_residual": {"composite": "…"},
/// "stochastic_residual": {"composite": "…"}, "digits": d}, …],
/// "decomposition_error": "…" (only when every path is enumerated), …}.
std::string format_enumeration(const PathEnumerationReport& r, const Model& model, const RunInfo& info, Format f);
/// `sanpath paths --sample`. JSON: {"samples": [{"length": k, "samples": N,
/// "population": "…", "term_norm": {"composite": {"mean", "stddev",
/// "stddev_digits", "ci95": [low, high]}}, "term_residual": {"composite":
/// {…}}, "digits": d (of the means and interval ends)}, …], "seed"}.
std::string format_samples(const PathSampleReport& r, const Model& model, const RunInfo& info, Format f);

/// Why a run has no task head, in one line: the text after "task head: " in
/// the tables and JSON's "head_note" (TaskHeadAbsence).
std::string task_head_note(TaskHeadAbsence why);
/// `sanpath paths --effectiveness`. JSON: {"effectiveness": [{"length": k,
/// "paths": "…" (of length ≤ k), "distance": "…", "agree": a, "agree_check":
/// b, "kl": "…", "digits": d}, …] (agree, agree_check and kl are null
/// without a task head), "head": {"kind", "outputs", "predictions"} or null
/// and then "head_note": why there is none (task_head_note), "output_norm":
/// {"frobenius": "…"}, …}.
std::string format_effectiveness(const EffectivenessReport& r, const Model& model, const RunInfo& info, Format f);
/// `sanpath paths --effectiveness --rerun N`. JSON: {"effectiveness":
/// [{"length": k, "paths": "…" (of length k), "paths_run": m, "all_paths",
/// "exact": {as format_effectiveness's rows} or null, "rerun": {"distance":
/// {statistics over the repetitions}, "gap": {…} or null, "agree": [per
/// repetition] or null, "agree_check", "kl": {…} or null}}, …], "rerun":
/// {"samples", "repeats", "seed", "estimator"}, "exact": bool, "head" (and
/// "head_note" without one), "output_norm", …}.
std::string format_rerun(const RerunReport& r, const Model& model, const RunInfo& info, Format f);
/// `sanpath paths --sums` on a batch. JSON: {"model", "input", "batch": b,
/// "variant", "statistics", "lengths": [{"length": k, "count": "…",
/// "share": {statistics of ‖S_k‖_F/‖X^L‖_F}}], "decomposition_error":
/// {statistics}, "inputs": [{"input": "…", …as format_length_sums}]}. Table:
/// one row per length (mean ± std, min, median, max). CSV: one row per length.
std::string format_length_sums_batch(const BatchLengthSums& b, const std::vector<InputSpec>& inputs,
                                     const Model& model, const RunInfo& info, Format f);
/// `sanpath paths --effectiveness` on a batch (analysis/effectiveness_batch.hpp).
/// JSON: {"model", "input", "batch": b, "variant", "statistics", "head":
/// {"kind", "outputs", "predictions" (of the whole batch)} or null (and
/// "head_note"),
/// "effectiveness": [{"length": k, "paths": "…" (of length ≤ k), "distance":
/// {statistics}, "head": {"agree", "agree_check", "predictions", "kl",
/// "kl_digits"} (pooled over the batch) or null}], "inputs": [{"input", …as
/// format_effectiveness}]}. Table: one row per length. CSV: one row per length.
std::string format_effectiveness_batch(const BatchEffectiveness& b, const std::vector<InputSpec>& inputs,
                                       const Model& model, const RunInfo& info, Format f);
/// `sanpath paths --effectiveness --rerun N` on a batch. JSON: {"model",
/// "input", "batch", "variant", "statistics", "rerun": {"samples",
/// "repeats", "seed", "input_seeds", "estimator", "over_the_batch"}, "exact":
/// bool, "head" (and "head_note"), "effectiveness": [{"length", "paths", "paths_run",
/// "all_paths", "exact": {"paths", "distance", "head"} or null, "rerun":
/// {"distance", "gap", "head"}}], "inputs": [{"input", …as format_rerun}]}.
std::string format_rerun_batch(const BatchRerun& b, const std::vector<InputSpec>& inputs, const Model& model,
                               const RunInfo& info, Format f);

// Bounds reports (src/io/format_bounds.cpp).
struct BoundsAnalysis;
struct BoundsSearchResult;
struct BatchBounds;
struct ResidualSeries;

/// `sanpath bounds`. JSON: {"gamma", "theorem" ("2.2|2.3|3.2|none"),
/// "applicable", "a", "contraction_radius", "vacuous", "vacuity",
/// "not_applicable", "beta": [β_l], "lambda", precision fields, "r0",
/// "depths": [{"layer", "bound", "log10_bound", "layerwise_bound",
/// "measured": {"lower", "upper", "below_resolution", …}, "verdict",
/// "slack_log10", "cubic_constant", "a_layer", "order", …}], "without_skip"
/// (skip on), "beyond_theorems" (only when coverage.any(): {"rotary",
/// "gated_mlp", "statement"}), "notes"}; every number a decimal string with its true
/// exponent, null when absent. Table: one row per depth for a reader.
std::string format_bounds(const BoundsAnalysis& a, const Model& model, const RunInfo& info, Format f);
/// The plain sentence on structure the theorems do not cover (math.md §8),
/// e.g. "Beyond the theorems: ... rotary ..."; empty when coverage.any() is false.
std::string coverage_sentence(const Coverage& coverage);
/// The sentence on how the bound behaves with depth (BoundsReport::contraction),
/// e.g. "sqrt(a)*r_0 = 0.354 < 1: the bound shrinks doubly exponentially …";
/// why no theorem applies when none does.
std::string contraction_sentence(const BoundsReport& report);
/// The sentence on the precision and resolution of a residual series: the
/// pass and precisions, the depths that are only upper bounds, the ceiling.
std::string residual_series_note(const ResidualSeries& series);
/// The notes of a bounds analysis, in reading order: which theorem and why
/// (or why none applies), contraction/vacuity, verdict counts, precision and
/// resolution, the skip-off comparison (skip on).
std::vector<std::string> bounds_notes(const BoundsAnalysis& a);
/// `sanpath bounds --search`: the search, the saved files and the re-check.
std::string format_bounds_search(const BoundsSearchResult& r, Format f);
/// `sanpath bounds` on a batch. JSON: {"model", "input", "batch", "variant",
/// "statistics", "gamma", "theorem", "a", "depths": [{"layer", "relative":
/// {statistics of the measured r_l/‖X^l‖_{1,∞}}, "verdicts": {"HOLDS": n, …}
/// (l ≥ 1)}], "inputs": [{"input": "…", …as format_bounds}]}. Table: one row
/// per depth. CSV: one row per depth.
std::string format_bounds_batch(const BatchBounds& b, const std::vector<InputSpec>& inputs, const Model& model,
                                const RunInfo& info, Format f);

}  // namespace sanpath

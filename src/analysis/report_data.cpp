#include "sanpath/analysis/report_data.hpp"
#include "sanpath/analysis/double_check.hpp"  // require_check

#include <stdexcept>

namespace sanpath {

namespace {

/// Throws std::invalid_argument for a check the path sections cannot honour (rounding).
void check_request(const ReportRequest& request) { require_check(request.precision.check, CheckScope::paths); }

/// The report of `input` around its collapse result: bounds and path lengths,
/// and (`effectiveness`) the effectiveness section of that input alone.
HtmlReport report_on(const Model& model, const InputSpec& input, const ReportRequest& request,
                     CollapseResult collapse, bool effectiveness, const ProgressFn& progress) {
  HtmlReport r;
  r.info = request.info;
  r.generator = request.generator;
  r.arch = model.arch();
  r.precision = request.precision;
  r.collapse = std::move(collapse);
  r.bounds_variant = Variant::san(model.arch().variant.mask);
  BoundsRequest bounds = request.bounds;
  bounds.precision = request.precision;  // one precision request for the whole report
  r.bounds = analyze_bounds(model, r.bounds_variant, input, bounds, prefixed_progress(progress, "bounds: "));
  r.paths_variant = {true, MlpKind::none, LayerNormKind::none, model.arch().variant.mask};
  r.lengths = analyze_length_sums(model, r.paths_variant, input, request.precision,
                                  prefixed_progress(progress, "path lengths: "));
  if (!effectiveness) return r;
  const TaskHead* head = request.head ? &*request.head : nullptr;
  if (request.rerun) {
    r.rerun = analyze_rerun(model, r.paths_variant, input, request.precision, *request.rerun,
                            head,
                            prefixed_progress(progress, "effectiveness: "));
    r.effectiveness = *r.rerun->exact;
  } else {
    r.effectiveness =
        analyze_effectiveness(model, r.paths_variant, input, request.precision, head,
                              prefixed_progress(progress, "effectiveness: "));
  }
  return r;
}

}  // namespace

HtmlReport build_report(const Model& model, const InputSpec& input, const ReportRequest& request,
                        const ProgressFn& progress) {
  check_request(request);
  CollapseResult collapse = run_collapse(model, input, request.precision, prefixed_progress(progress, "collapse: "),
                                         request.conventions);
  return report_on(model, input, request, std::move(collapse), true, progress);
}

HtmlReport build_report(const Model& model, const std::vector<InputSpec>& inputs, const ReportRequest& request,
                        int threads, const ProgressFn& progress) {
  if (inputs.empty()) throw std::invalid_argument("report: no inputs");
  check_request(request);
  BatchCollapseResult batch = run_collapse_batch(model, inputs, request.precision, request.conventions, threads,
                                                 prefixed_progress(progress, "collapse: "));
  HtmlReport r = report_on(model, inputs.front(), request, batch.runs.front(), false, progress);
  r.batch = std::move(batch);
  const TaskHead* head = request.head ? &*request.head : nullptr;
  const ProgressFn p = prefixed_progress(progress, "effectiveness: ");
  if (request.rerun) {
    RerunRequest rerun = *request.rerun;
    rerun.threads = threads;
    r.rerun_batch =
        analyze_rerun_batch(model, r.paths_variant, inputs, request.precision, rerun, head, p);
    r.rerun = r.rerun_batch->runs.front();
    r.effectiveness = *r.rerun->exact;
  } else {
    r.effectiveness_batch =
        analyze_effectiveness_batch(model, r.paths_variant, inputs, request.precision, head,
                                    threads, p);
    r.effectiveness = r.effectiveness_batch->runs.front();
  }
  return r;
}

}  // namespace sanpath

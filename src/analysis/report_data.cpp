#include "sanpath/analysis/report_data.hpp"

namespace sanpath {

HtmlReport build_report(const Model& model, const InputSpec& input, const ReportRequest& request,
                        const ProgressFn& progress) {
  HtmlReport r;
  r.info = request.info;
  r.generator = request.generator;
  r.arch = model.arch();
  r.precision = request.precision;
  r.collapse = run_collapse(model, input, request.precision, prefixed_progress(progress, "collapse: "));
  r.bounds_variant = Variant::san(model.arch().variant.mask);
  BoundsRequest bounds = request.bounds;
  bounds.precision = request.precision;  // one precision request for the whole report
  r.bounds = analyze_bounds(model, r.bounds_variant, input, bounds, prefixed_progress(progress, "bounds: "));
  r.paths_variant = {true, MlpKind::none, LayerNormKind::none, model.arch().variant.mask};
  r.lengths = analyze_length_sums(model, r.paths_variant, input, request.precision,
                                  prefixed_progress(progress, "path lengths: "));
  return r;
}

}  // namespace sanpath

#pragma once
/// \file html_report.hpp
/// The one-file HTML report of `sanpath report`: every chart an inline SVG
/// (svg_plot.hpp), no script, no external resource, so it opens offline in
/// any browser. It shows
///  - the relative residual per layer of SAN, SAN+MLP, SAN+skip and the full
///    model (run_collapse) on a log10 axis, values below resolution as
///    upper-bound marks;
///  - the bound of Theorem 2.2/2.3 for the SAN against its measured
///    residual r_l = ‖res(X^l)‖_{1,∞} (analyze_bounds), with a table of β_l,
///    a_l, a and the verdict per depth;
///  - the path-length distribution of the attention-only network with skip
///    connections (analyze_length_sums): the exact number of paths of each
///    length and each length's share ‖S_k‖_F/‖X^L‖_F of the output;
///  - how much of that network is in its paths of length ≤ k
///    (analyze_effectiveness): the distance of the truncation X_{≤k} to the
///    output and, with the checkpoint's task head, the share of predictions
///    that agree with the full network's and the mean KL; with re-runs
///    (analyze_rerun), the paper's sub-network procedure beside it: mean
///    distance with a ±std band over the draws, the gap between the two
///    senses, and the mean agreement;
///  - the model, input and precisions used.
/// build_report (analysis/report_data.hpp) gathers the data by calling the
/// analyses; render_html only formats it (no mathematics beyond scaling the
/// axes).

#include "sanpath/analysis/report_data.hpp"
#include "sanpath/report/format.hpp"

#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// The report as one self-contained HTML document (UTF-8). Element ids the
/// tests rely on: svg#chart-collapse (series groups #chart-collapse-san,
/// -san-mlp, -san-skip, -full), svg#chart-bounds (#chart-bounds-measured,
/// #chart-bounds-uniform, #chart-bounds-layerwise), svg#chart-path-counts,
/// svg#chart-path-shares, svg#chart-effectiveness (series
/// #chart-effectiveness-distance; with re-runs also -rerun and -gap), with a task head svg#chart-effectiveness-head
/// (#chart-effectiveness-head-agree; with re-runs also -agree-rerun), table#table-effectiveness, table#table-collapse (cells carry data-variant and
/// data-layer), table#table-bounds, table#table-paths, table#table-setup.
std::string render_html(const HtmlReport& report);

/// render_html written to `path` atomically (write_file_atomic).
void write_html_report(const std::string& path, const HtmlReport& report);

}  // namespace sanpath

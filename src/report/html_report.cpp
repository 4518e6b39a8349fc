#include "sanpath/report/html_report.hpp"

#include "sanpath/io/atomic_file.hpp"
#include "sanpath/report/format.hpp"
#include "sanpath/report/svg_plot.hpp"
#include "report/html_parts.hpp"
#include "report/provenance_text.hpp"
#include "report/text_table.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace sanpath {

// ---------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------

namespace {

using html_parts::band_of;
using html_parts::effectiveness_section;
using html_parts::point_of;
using svg::escape;

/// log10 of a LogReal as a double (−inf for 0, ±inf beyond double's range).
double log10_of(const LogReal& v) {
  if (v.is_zero()) return -INFINITY;
  return v.log10().convert_to<double>();
}

std::string variant_id(const std::string& name) {
  std::string id;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      id += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!id.empty() && id.back() != '-')
      id += '-';
  }
  while (!id.empty() && id.back() == '-') id.pop_back();
  return id.empty() ? "series" : id;
}

std::string variant_color(const std::string& name) {
  if (name == "SAN") return "#d62728";
  if (name == "SAN+MLP") return "#1f77b4";
  if (name == "SAN+skip") return "#2ca02c";
  if (name == "full" || name == "transformer") return "#7b3fa0";
  return "#555555";
}

/// A decimal BigReal in short scientific notation (never 0 for nonzero).
std::string sci(const BigReal& x, int significant = 6) { return to_sci(x, significant); }

std::string verdict_cell(Verdict v) {
  const std::string t = to_string(v);
  std::string cls = "verdict";
  if (v == Verdict::holds)
    cls += " holds";
  else if (v == Verdict::violated)
    cls += " violated";
  else if (v == Verdict::undecided)
    cls += " undecided";
  return "<td class=\"" + cls + "\">" + escape(t) + "</td>";
}

std::string measured_text(const MeasuredResidual& m) {
  if (m.below_resolution) return "&lt; " + escape(sci(m.upper, 2));
  if (m.lower == m.upper) return escape(sci(m.upper));
  return "[" + escape(sci(m.lower)) + ", " + escape(sci(m.upper)) + "]";
}

// ----------------------------------------------------------------- sections

void setup_section(std::ostringstream& o, const HtmlReport& r) {
  const Architecture& a = r.arch;
  o << "<section id=\"setup\">\n<h2>Model, input and precision</h2>\n<table id=\"table-setup\" class=\"kv\">\n";
  const auto row = [&](const std::string& k, const std::string& v) {
    o << "<tr><th>" << escape(k) << "</th><td>" << escape(v) << "</td></tr>\n";
  };
  row("model", r.info.model);
  row("sizes", "L = " + std::to_string(a.layers) + " layers, H = " + std::to_string(a.heads) +
                   " heads, d = " + std::to_string(a.d_model) + ", d_qk = " + std::to_string(a.d_qk) +
                   ", d_v = " + std::to_string(a.d_v) + ", d_ff = " + std::to_string(a.d_ff) +
                   (a.shared_layers ? ", weights shared across layers" : ""));
  std::string family;
  if (a.norm == NormKind::rms) family += ", RMSNorm";
  if (a.rotary()) {
    std::ostringstream theta;
    theta << *a.rope_theta;
    family += ", rotary position embeddings (θ = " + theta.str() + ")";
  }
  if (a.key_value_heads() != a.heads)
    family += ", grouped-query attention (" + std::to_string(a.key_value_heads()) + " key/value heads)";
  if (a.gated_mlp) family += ", gated MLP";
  if (const std::string notes = structure_notes(a); !notes.empty()) family += ", " + notes;
  row("own structure", to_string(a.variant, VariantStyle::prose) + ", activation " + to_string(a.activation) + family);
  row("input", r.info.input);
  if (r.collapse.conventions == CollapseConventions::paper) row("collapse conventions", describe(r.collapse.conventions, paper_layernorm(r.arch)));
  const bool in_double = !r.precision.automatic && r.precision.fixed.native_double;
  row("precision requested",
      r.precision.describe() + (r.precision.check == CheckMethod::certified
                                    ? ", certified: every digit proven by ball arithmetic (math.md §10)"
                                : !r.precision.confirm ? ""
                                : in_double && r.precision.check != CheckMethod::mpfr
                                    ? ", confirmed (by directed rounding where it applies, see below)"
                                    : ", confirmed one tier up"));
  using provenance_text::cell;
  using provenance_text::View;
  for (std::size_t i = 0; i < r.collapse.variants.size(); ++i)
    row("precision used: " + r.collapse.variants[i].name, cell(r.collapse.analyses[i], View::forward));
  row("precision used: bounds", cell(r.bounds.measured, View::bounds));
  row("precision used: path lengths", cell(r.lengths, View::paths));
  o << "</table>\n</section>\n";
}

/// One chart per measure (--measures, math.md §9): every variant, with bands for a batch.
void measure_charts(std::ostringstream& o, const CollapseResult& c, const BatchCollapseResult* batch) {
  std::vector<std::string> names;
  for (const std::string& n : measure_value_names(MeasureSet::all(), true))
    for (const ForwardAnalysis& a : c.analyses)
      for (const LayerReport& l : a.layers)
        for (const MeasureReport& m : l.measures)
          if (m.name == n && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  if (names.empty()) return;
  o << "<h3>Measures (math.md §9)</h3>\n<p>The measures the newer literature reports, computed from the same "
       "runs and confirmed like the residual (digits in the JSON output). Near rank 1 the cosine, the stable and "
       "the effective rank tend to 1: their companions one_minus_cosine, stable_rank_minus_one and "
       "effective_rank_minus_one carry the digits of collapsed layers.</p>\n";
  for (const std::string& name : names) {
    svg::Chart ch;
    ch.id = "chart-measure-" + name;
    ch.title = name + " per layer" + (batch ? ": mean ± standard deviation over " +
                                                  std::to_string(batch->runs.size()) + " inputs"
                                            : "");
    ch.width = 1000;
    ch.height = 360;
    ch.x = {"layer l (0 = input)", false, true, {}, {}};
    ch.y = {name + " (log scale)", true, false, {}, {}};
    for (std::size_t i = 0; i < c.variants.size(); ++i) {
      const std::string& v = c.variants[i].name;
      svg::Series s{v, variant_id(v), variant_color(v), svg::SeriesStyle::line, false, {}};
      if (v == "SAN+skip") s.line_width = 4.5;
      if (batch) {
        for (std::size_t l = 0; l < batch->measures[i].size(); ++l)
          for (const MeasureStatistic& m : batch->measures[i][l])
            if (m.name == name) {
              const double x = static_cast<double>(l);
              s.points.push_back(
                  point_of(x, m.statistic.mean, v + ", layer " + std::to_string(l) + ": " + mean_std_cell(m.statistic)));
              if (const auto band = band_of(x, m.statistic)) s.band.push_back(*band);
            }
      } else {
        for (const LayerReport& l : c.analyses[i].layers)
          for (const MeasureReport& m : l.measures)
            if (m.name == name)
              s.points.push_back(point_of(l.layer, m.value, v + ", layer " + std::to_string(l.layer) + ": " +
                                                                m.value.shown()));
      }
      if (!s.points.empty()) ch.series.push_back(std::move(s));
    }
    o << "<figure>" << svg::render(ch) << "</figure>\n";
  }
}

void collapse_section(std::ostringstream& o, const HtmlReport& r) {
  const CollapseResult& c = r.collapse;
  const BatchCollapseResult* batch = r.batch ? &*r.batch : nullptr;
  svg::Chart ch;
  ch.id = "chart-collapse";
  ch.title = batch ? "Relative residual per layer: mean ± standard deviation over " +
                         std::to_string(batch->runs.size()) + " inputs"
                   : "Relative residual per layer";
  ch.width = 1000;
  ch.height = 460;
  ch.x = {"layer l (0 = input)", false, true, {}, {}};
  ch.y = {"‖X − 1 mean(X)ᵀ‖₁,∞ / ‖X‖₁,∞ (log scale)", true, false, {}, {}};
  for (std::size_t i = 0; i < c.variants.size(); ++i) {
    const std::string& name = c.variants[i].name;
    svg::Series s{name, variant_id(name), variant_color(name), svg::SeriesStyle::line, false, {}};
    // SAN+skip and full often coincide on a log axis: SAN+skip is drawn
    // wider underneath, so both stay visible.
    if (name == "SAN+skip") s.line_width = 4.5;
    if (batch) {
      for (std::size_t l = 0; l < batch->layers[i].size(); ++l) {
        const BatchStatistic& st = batch->layers[i][l];
        const double x = static_cast<double>(l);
        s.points.push_back(point_of(x, st.mean, name + ", layer " + std::to_string(l) + ": " + mean_std_cell(st)));
        if (const auto band = band_of(x, st)) s.band.push_back(*band);
      }
    } else {
      for (const LayerReport& l : c.analyses[i].layers)
        s.points.push_back(point_of(l.layer, l.relative_residual,
                                    name + ", layer " + std::to_string(l.layer) + ": " + l.relative_residual.shown()));
    }
    ch.series.push_back(std::move(s));
  }
  o << "<section id=\"collapse\">\n<h2>1. Rank collapse: relative residual per layer</h2>\n";
  o << "<p>The paper's Section 4 experiment on this model: the residual of every layer's output X<sup>l</sup> "
       "around its mean row, relative to the norm of X<sup>l</sup>, for the four variants. A pure SAN "
       "(no skip connections, no MLP, no LayerNorm) collapses doubly exponentially; the residual is computed at "
       "the precision it needs, so exponents far below double's 1e-308 appear as they are.</p>\n";
  if (batch)
    o << "<p>A batch of " << batch->runs.size()
      << " inputs: lines are the mean over the inputs, shaded bands the mean ± the sample standard deviation "
         "(where mean − std ≤ 0 the band reaches the bottom of the chart); every input ran at its own precision "
         "with its own confirming run. Conventions: "
      << escape(describe(batch->conventions, paper_layernorm(r.arch)))
      << ". The bounds and path-length sections below analyse the first input of the batch; the effectiveness "
         "section runs over the whole batch.</p>\n";
  o << "<figure>" << svg::render(ch) << "</figure>\n";
  o << "<table id=\"table-collapse\" class=\"num\">\n<thead><tr><th>layer</th>";
  for (const NamedVariant& v : c.variants) o << "<th>" << escape(v.name) << "</th>";
  o << "</tr></thead>\n<tbody>\n";
  const std::size_t rows = c.analyses.empty() ? 0 : c.analyses.front().layers.size();
  for (std::size_t l = 0; l < rows; ++l) {
    o << "<tr><th>" << l << "</th>";
    for (std::size_t i = 0; i < c.variants.size(); ++i) {
      o << "<td data-variant=\"" << escape(c.variants[i].name) << "\" data-layer=\"" << l << "\">";
      if (batch) {
        o << escape(mean_std_cell(batch->layers[i][l])) << "</td>";
        continue;
      }
      const LayerReport& lr = c.analyses[i].layers[l];
      o << escape(lr.relative_residual.shown()) << " <span class=\"digits\">["
        << html_parts::digits_text(lr.relative_residual.shown_digits())
        << "]</span></td>";
    }
    o << "</tr>\n";
  }
  o << "</tbody>\n</table>\n<p class=\"caption\">"
    << (r.precision.check == CheckMethod::certified
            ? "In brackets the digits printed, each proven by enclosures"
            : "In brackets the digits printed, each confirmed by the second run")
    << (batch ? " (of the mean)" : "") << ". Variants: ";
  for (std::size_t i = 0; i < c.variants.size(); ++i)
    o << (i ? "; " : "") << "<b>" << escape(c.variants[i].name) << "</b> "
      << escape(to_string(c.variants[i].variant, VariantStyle::prose));
  o << ".</p>\n";
  measure_charts(o, c, batch);
  o << "</section>\n";
}

/// With a batch: the paragraph saying that a section analyses its first input only.
void first_input_note(std::ostringstream& o, const HtmlReport& r) {
  if (!r.batch) return;
  o << "<p class=\"scope\"><b>First input only:</b> this section analyses the first input of the batch of "
    << r.batch->runs.size() << " inputs, not the whole batch.</p>\n";
}

void bounds_section(std::ostringstream& o, const HtmlReport& r) {
  const BoundsReport& b = r.bounds.report;
  const std::vector<MeasuredDepth>& depths = r.bounds.measured.depths;
  svg::Chart ch;
  ch.id = "chart-bounds";
  ch.title = "SAN: measured residual r_l and the bound";
  ch.width = 1000;
  ch.height = 460;
  ch.x = {"layer l (0 = input)", false, true, {}, {}};
  ch.y = {"r_l = ‖res(X^l)‖₁,∞, optimal centre (log scale)", true, false, {}, {}};
  svg::Series meas{"measured r_l", "measured", variant_color("SAN"), svg::SeriesStyle::line, false, {}};
  for (const MeasuredDepth& m : depths)
    meas.points.push_back(point_of(m.layer, m.upper, "r_" + std::to_string(m.layer) + " ≤ " + m.upper.shown()));
  svg::Series uni{"bound (theorem)", "uniform", "#111111", svg::SeriesStyle::line, true, {}};
  svg::Series lw{"bound, layerwise", "layerwise", "#e07b00", svg::SeriesStyle::line, true, {}};
  if (b.theorem.applicable && !depths.empty()) {
    // Both forms start at r_0 (depth 0).
    uni.points.push_back(point_of(0, depths.front().upper, "r_0 = " + depths.front().upper.shown()));
    lw.points.push_back(uni.points.back());
  }
  for (const DepthComparison& d : b.depths) {
    if (d.bound)
      uni.points.push_back({static_cast<double>(d.layer), log10_of(d.bound->value), svg::Mark::value,
                            "bound at depth " + std::to_string(d.layer) + ": " + d.bound->value.to_string(6)});
    if (d.layerwise_bound)
      lw.points.push_back(
          {static_cast<double>(d.layer), log10_of(d.layerwise_bound->value), svg::Mark::value,
           "layerwise bound at depth " + std::to_string(d.layer) + ": " + d.layerwise_bound->value.to_string(6)});
  }
  if (uni.points.size() < 2) uni.points.clear();
  if (lw.points.size() < 2) lw.points.clear();
  // Axis scaling: the measured values set the range; a bound that runs far
  // beyond it (vacuous, or many more decades down) is clipped and named.
  double mlo = INFINITY, mhi = -INFINITY;
  for (const svg::Point& p : meas.points) {
    if (!std::isfinite(p.y)) continue;
    mlo = std::min(mlo, p.y);
    mhi = std::max(mhi, p.y);
  }
  if (std::isfinite(mlo)) {
    const double margin = std::max(mhi - mlo, 20.0);
    const double lo_limit = std::floor(mlo - margin), hi_limit = std::ceil(mhi + margin);
    double lo = mlo, hi = mhi;
    std::vector<std::string> outside;
    for (const svg::Series* s : {&uni, &lw})
      for (const svg::Point& p : s->points) {
        if (!std::isfinite(p.y) || p.y < lo_limit || p.y > hi_limit) {
          if (s == &uni) outside.push_back("depth " + std::to_string(static_cast<int>(p.x)));
          continue;
        }
        lo = std::min(lo, p.y);
        hi = std::max(hi, p.y);
      }
    if (!outside.empty()) {
      ch.y.min = std::floor(lo);
      ch.y.max = std::max(std::ceil(hi), std::floor(lo) + 1);
      std::string list;
      for (const std::string& s : outside) list += (list.empty() ? "" : ", ") + s;
      ch.note = "The bound leaves the chart at " + list + " (values in the table).";
    }
  }
  ch.series.push_back(std::move(meas));
  if (!uni.points.empty()) ch.series.push_back(std::move(uni));
  if (!lw.points.empty()) ch.series.push_back(std::move(lw));

  o << "<section id=\"bounds\">\n<h2>2. The bound for the SAN</h2>\n";
  first_input_note(o, r);
  o << "<p>Theorems 2.2/2.3 (and Corollary 3.2) bound the residual of a pure SAN: r<sub>L</sub> ≤ "
       "a<sup>(3<sup>L</sup>−1)/2</sup> r<sub>0</sub><sup>3<sup>L</sup></sup> with a = 4γβH/√d<sub>qk</sub>. "
       "Here r<sub>l</sub> is the absolute composite residual with the optimal centre (an enclosure), "
       "evaluated on the SAN variant ("
    << escape(to_string(r.bounds_variant, VariantStyle::prose)) << "). The layerwise form uses each layer's own a<sub>l</sub>.</p>\n";
  if (r.bounds.coverage.any()) o << "<p class=\"note\">" << escape(coverage_sentence(r.bounds.coverage)) << "</p>\n";
  o << "<figure>" << svg::render(ch) << "</figure>\n";
  o << "<table id=\"table-bounds-summary\" class=\"kv\">\n";
  const auto row = [&](const std::string& k, const std::string& v) {
    o << "<tr><th>" << escape(k) << "</th><td>" << escape(v) << "</td></tr>\n";
  };
  row("theorem", b.theorem.applicable ? (b.theorem.theorem == Theorem::cor_3_2 ? "Corollary " : "Theorem ") +
                                            to_string(b.theorem.theorem)
                                      : "none applies");
  row("γ", gamma_string(b.gamma));
  row("a", b.a ? sci(*b.a) : "–");
  row("contraction radius a^(−1/2)", b.contraction_radius ? sci(*b.contraction_radius) : "–");
  row("β = max_l β_l", sci(r.bounds.weights.beta));
  if (!depths.empty()) row("r_0", depths.front().upper.shown());
  for (const std::string& n : bounds_notes(r.bounds)) row("note", n);
  o << "</table>\n";
  o << "<table id=\"table-bounds\" class=\"num\">\n<thead><tr><th>layer l</th><th>β<sub>l</sub></th>"
       "<th>a<sub>l</sub></th><th>measured r<sub>l</sub></th><th>bound (theorem)</th><th>verdict</th>"
       "<th>bound (layerwise)</th><th>verdict</th><th>â<sub>l</sub> = r<sub>l</sub>/r<sub>l−1</sub><sup>3</sup></th>"
       "<th>order q<sub>l</sub></th></tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < b.depths.size(); ++i) {
    const DepthComparison& d = b.depths[i];
    o << "<tr><th>" << d.layer << "</th>";
    o << "<td>" << (i < b.beta.size() ? escape(sci(b.beta[i])) : "–") << "</td>";
    o << "<td>" << (d.a_layer ? escape(sci(*d.a_layer)) : "–") << "</td>";
    o << "<td>" << measured_text(d.measured) << "</td>";
    o << "<td>" << (d.bound ? escape(d.bound->value.to_string(6)) : "–") << "</td>" << verdict_cell(d.verdict);
    o << "<td>" << (d.layerwise_bound ? escape(d.layerwise_bound->value.to_string(6)) : "–") << "</td>"
      << verdict_cell(d.layerwise_verdict);
    o << "<td>" << (d.cubic_constant ? escape(d.cubic_constant->to_string(4)) : "–") << "</td>";
    o << "<td>" << (d.order ? escape(to_decimal(*d.order, 4)) : "–") << "</td>";
    o << "</tr>\n";
  }
  o << "</tbody>\n</table>\n<p class=\"caption\">HOLDS: the measured enclosure lies below the bound's; VIOLATED: "
       "above it; UNDECIDED: they overlap. Bounds are held as logarithms, so no exponent is too large to "
       "print.</p>\n</section>\n";
}

void paths_section(std::ostringstream& o, const HtmlReport& r) {
  const LengthSumsReport& p = r.lengths;
  svg::Chart counts;
  counts.id = "chart-path-counts";
  counts.title = "Number of paths of each length (exact)";
  counts.x = {"path length k (heads on the path)", false, true, {}, {}};
  counts.y = {"paths (log scale)", true, false, {}, {}};
  svg::Series cs{"paths of length k", "count", "#4c72b0", svg::SeriesStyle::bars, false, {}};
  svg::Chart shares;
  shares.id = "chart-path-shares";
  shares.title = "Share of the output carried by each length";
  shares.x = counts.x;
  shares.y = {"‖S_k‖_F / ‖X^L‖_F (log scale)", true, false, {}, {}};
  svg::Series ss{"share of length k", "share", "#c44e52", svg::SeriesStyle::line, false, {}};
  for (const LengthSumEntry& e : p.lengths) {
    const double k = e.length;
    cs.points.push_back(
        {k, log10_abs(BigReal(e.count)), svg::Mark::value, std::to_string(e.length) + ": " + e.count + " paths"});
    ss.points.push_back(point_of(k, e.share, "length " + std::to_string(e.length) + ": share " + e.share.shown()));
  }
  counts.series.push_back(std::move(cs));
  shares.series.push_back(std::move(ss));
  counts.width = shares.width = 560;
  counts.height = shares.height = 380;

  o << "<section id=\"paths\">\n<h2>3. Path lengths (attention only, with skip connections)</h2>\n";
  first_input_note(o, r);
  o << "<p>With skip connections the output is a sum over paths through the heads (Theorem 2.1); a path's "
       "length is the number of heads it passes, and the paths of length k sum to S<sub>k</sub>. Short paths "
       "are few; the right chart shows how much of the output each length carries. Variant: "
    << escape(to_string(r.paths_variant, VariantStyle::prose)) << " (the SAN+skip network without LayerNorm, where the "
    << "decomposition is exact). Precision: " << escape(provenance_text::cell(p, provenance_text::View::paths)) << ".</p>\n";
  o << "<figure class=\"pair\">" << svg::render(counts) << svg::render(shares) << "</figure>\n";
  o << "<table id=\"table-paths\" class=\"num\">\n<thead><tr><th>length k</th><th>paths (exact)</th>"
       "<th>share ‖S<sub>k</sub>‖<sub>F</sub>/‖X<sup>L</sup>‖<sub>F</sub></th><th>‖S<sub>k</sub>‖<sub>F</sub></th>"
       "<th>‖res(S<sub>k</sub>)‖<sub>1,∞</sub></th><th>digits</th></tr></thead>\n<tbody>\n";
  for (const LengthSumEntry& e : p.lengths) {
    o << "<tr><th>" << e.length << "</th><td class=\"count\">" << escape(e.count) << "</td><td>"
      << escape(e.share.shown()) << "</td><td>" << escape(e.frobenius.shown()) << "</td><td>"
      << escape(e.residual.shown())
      << "</td><td>" << html_parts::digits_text(text_table::shown_least(e.digits, e.share)) << "</td></tr>\n";
  }
  o << "</tbody>\n</table>\n<p class=\"caption\">" << escape(p.total_count)
    << " paths in all. Decomposition check (Theorem 2.1): max |Σ<sub>k</sub> S<sub>k</sub> + 1bᵀ − X<sup>L</sup>| / "
       "max |X<sup>L</sup>|: "
    << escape(p.decomposition_error.shown()) << ".</p>\n</section>\n";
}

const char* kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #111;
       max-width: 1160px; margin: 24px auto; padding: 0 20px; line-height: 1.45; background: #fff; }
h1 { font-size: 26px; margin-bottom: 4px; }
h2 { font-size: 20px; margin-top: 36px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.lead { color: #333; margin-top: 0; }
figure { margin: 12px 0; }
figure.pair { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { border: 1px solid #e5e5e5; max-width: 100%; height: auto; }
table { border-collapse: collapse; margin: 10px 0; font-size: 14px; }
th, td { border: 1px solid #d0d0d0; padding: 3px 8px; vertical-align: top; }
thead th { background: #f3f3f3; }
table.num td { text-align: right; font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
               font-size: 13px; white-space: nowrap; }
table.kv th { text-align: left; background: #f7f7f7; font-weight: 600; white-space: nowrap; }
td.count { max-width: 420px; overflow-wrap: anywhere; white-space: normal !important; }
span.digits { color: #777; }
td.verdict { font-family: inherit; font-weight: 600; text-align: center; }
td.holds { color: #1a7f37; } td.violated { color: #c62828; } td.undecided { color: #9a6700; }
p.caption { color: #444; font-size: 13px; }
footer { margin-top: 40px; color: #666; font-size: 13px; border-top: 1px solid #ddd; padding-top: 8px; }
)";

}  // namespace

std::string render_html(const HtmlReport& r) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
       "<meta name=\"generator\" content=\""
    << escape(r.generator) << "\">\n<title>sanpath report: " << escape(r.info.model) << "</title>\n<style>" << kStyle
    << "</style>\n</head>\n<body>\n";
  o << "<h1>Rank collapse report</h1>\n<p class=\"lead\">Model <b>" << escape(r.info.model) << "</b>, input "
    << escape(r.info.input)
    << ". The quantities of Dong, Cordonnier &amp; Loukas, <i>Attention is not all you need: pure attention "
       "loses rank doubly exponentially with depth</i> (ICML 2021, arXiv 2103.03404), evaluated on these "
       "weights.</p>\n";
  setup_section(o, r);
  collapse_section(o, r);
  bounds_section(o, r);
  paths_section(o, r);
  effectiveness_section(o, r);
  o << "<footer>Made by " << escape(r.generator)
    << ". Definitions (norms, residual centres, path terms, bounds, precision): docs/math.md of sanpath.</footer>\n";
  o << "</body>\n</html>\n";
  return o.str();
}

void write_html_report(const std::string& path, const HtmlReport& report) {
  write_file_atomic(path, render_html(report));
}

}  // namespace sanpath

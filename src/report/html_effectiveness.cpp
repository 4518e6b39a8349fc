// Section 4 of the HTML report: how much of the model is in its paths of
// length ≤ k, for one input or over a batch. No mathematics here.
#include "report/html_parts.hpp"

#include "sanpath/report/format.hpp"
#include "report/provenance_text.hpp"
#include "report/text_table.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace sanpath::html_parts {

namespace {

using svg::escape;

/// Mean of the per-repetition agreement counts as a fraction of the predictions.
double mean_agreement(const std::vector<long>& agree, long predictions) {
  double sum = 0;
  for (long a : agree) sum += static_cast<double>(a);
  return sum / static_cast<double>(agree.size()) / static_cast<double>(std::max(1L, predictions));
}

/// The pooled agreement as a fraction of its predictions.
double pooled_fraction(const PooledAgreement& p) {
  return static_cast<double>(p.agree) / static_cast<double>(std::max(1L, p.predictions));
}

std::string pooled_text(const PooledAgreement& p) {
  return text_table::agreement_text(p.agree, std::nullopt, p.agree_most, p.predictions);
}

/// A mean line with its ±std band over the batch.
svg::Series mean_series(const std::string& name, const std::string& id, const std::string& color, bool dashed,
                        const std::vector<std::pair<int, const BatchStatistic*>>& points, const std::string& what) {
  svg::Series s{name, id, color, svg::SeriesStyle::line, dashed, {}};
  for (const auto& [k, st] : points) {
    s.points.push_back(point_of(k, st->mean, "k ≤ " + std::to_string(k) + ": " + what + " " + mean_std_cell(*st)));
    if (const auto band = band_of(k, *st)) s.band.push_back(*band);
  }
  return s;
}

/// Section 4 over a batch: mean curves with ±std bands, agreement pooled over every prediction.
void batch_section(std::ostringstream& o, const HtmlReport& r) {
  const BatchRerun* rr = r.rerun_batch ? &*r.rerun_batch : nullptr;
  const std::vector<BatchEffectivenessEntry>& exact = rr ? *rr->exact : r.effectiveness_batch->lengths;
  const std::size_t b = rr ? rr->runs.size() : r.effectiveness_batch->runs.size();
  const std::optional<TaskHeadKind> head = r.effectiveness.head;
  svg::Chart chart;
  chart.id = "chart-effectiveness";
  chart.title = "The network kept to its paths of length ≤ k: mean ± std over " + std::to_string(b) + " inputs";
  chart.x = {"longest path kept k", false, true, {}, {}};
  chart.y = {"‖X≤k − X^L‖_F / ‖X^L‖_F (log scale)", true, false, {}, {}};
  std::vector<std::pair<int, const BatchStatistic*>> points;
  for (const BatchEffectivenessEntry& x : exact) points.emplace_back(x.length, &x.distance);
  chart.series.push_back(mean_series(rr ? "exact" : "distance to the output", "distance", "#4c72b0", false, points,
                                     "distance"));
  if (rr) {
    std::vector<std::pair<int, const BatchStatistic*>> re, gap;
    for (const BatchRerunEntry& x : rr->lengths) {
      re.emplace_back(x.length, &x.distance);
      if (x.gap) gap.emplace_back(x.length, &*x.gap);
    }
    chart.series.push_back(mean_series("re-run (mean ± std)", "rerun", "#dd8452", true, re, "re-run distance"));
    chart.series.push_back(mean_series("gap", "gap", "#55a868", true, gap, "gap"));
  }
  chart.width = 560;
  chart.height = 380;
  std::string agree_chart;
  if (head) {
    svg::Chart a;
    a.id = "chart-effectiveness-head";
    a.title = "Predictions of the " + to_string(*head) + " head that agree with the full network, over the batch";
    a.x = chart.x;
    a.y = {"agreeing predictions (fraction)", false, false, 0.0, 1.0};
    svg::Series s{rr ? "exact" : "agreement", "agree", "#c44e52", svg::SeriesStyle::line, false, {}};
    for (const BatchEffectivenessEntry& x : exact)
      s.points.push_back({static_cast<double>(x.length), pooled_fraction(*x.head), svg::Mark::value,
                          "k ≤ " + std::to_string(x.length) + ": " + pooled_text(*x.head)});
    a.series.push_back(std::move(s));
    if (rr) {
      svg::Series t{"re-run", "agree-rerun", "#dd8452", svg::SeriesStyle::line, true, {}};
      for (const BatchRerunEntry& x : rr->lengths)
        t.points.push_back({static_cast<double>(x.length), pooled_fraction(*x.head), svg::Mark::value,
                            "k ≤ " + std::to_string(x.length) + ": re-run agreement " + pooled_text(*x.head)});
      a.series.push_back(std::move(t));
    }
    a.width = 560;
    a.height = 380;
    agree_chart = svg::render(a);
  }
  o << "<section id=\"effectiveness\">\n<h2>4. How much of the model is in its short paths</h2>\n";
  o << "<p>Over the whole batch of " << b << " inputs. Keeping only the paths of length ≤ k gives X<sub>≤k</sub> = "
       "Σ<sub>j≤k</sub> S<sub>j</sub> + 1bᵀ (attention frozen: exact, from the length sums). The left chart shows "
       "the mean over the inputs of its distance to the output of the same network, with a ±std band; "
    << (head ? "the right one the share of all predictions of the batch (the checkpoint's " + escape(to_string(*head)) +
                   " head: " + (*head == TaskHeadKind::classifier ? "one per input" : "one per position") +
                   ") on X<sub>≤k</sub> that agree with those on X<sup>L</sup>; the mean KL is over the same "
                   "predictions."
             : "the task head: " + escape(task_head_note(r.info.head_absence)) +
                   ", so no predictions are compared.")
    << " Variant: " << escape(to_string(r.paths_variant, VariantStyle::prose))
    << ". Every input ran at its own precision with its own "
    << (r.precision.check == CheckMethod::certified ? "enclosures" : "confirming run") << ".</p>\n";
  if (rr)
    o << "<p>Dashed: the paper's own procedure (as <code>sanpath paths --effectiveness --rerun</code>): per length k, "
      << rr->request.samples << " paths (every path when there are no more) re-run as sub-networks, summed as "
         "count<sub>k</sub>/N · Σ (unbiased) plus the bias term, "
      << rr->request.repeats << " draws per input (input i seeded by " << rr->request.seed
      << " + i·0xD1B54A32D192ED03); each input enters the mean ± std with its mean over its draws, the agreement "
         "is counted over inputs × draws. The gap is ‖X̂<sub>≤k</sub> − X<sub>≤k</sub>‖<sub>F</sub>/‖X<sup>L</sup>‖"
         "<sub>F</sub>.</p>\n";
  o << "<figure class=\"pair\">" << svg::render(chart) << agree_chart << "</figure>\n";
  o << "<table id=\"table-effectiveness\" class=\"num\">\n<thead><tr><th>k</th><th>paths of length ≤ k</th>"
       "<th>‖X<sub>≤k</sub> − X<sup>L</sup>‖<sub>F</sub>/‖X<sup>L</sup>‖<sub>F</sub> (mean ± std [digits])</th>";
  if (head) o << "<th>agreeing predictions</th><th>mean KL</th>";
  if (rr) {
    o << "<th>re-run distance (mean ± std [digits])</th><th>gap</th>";
    if (head) o << "<th>re-run agreement</th><th>re-run mean KL</th>";
  }
  o << "</tr></thead>\n<tbody>\n";
  for (std::size_t k = 0; k < exact.size(); ++k) {
    const BatchEffectivenessEntry& x = exact[k];
    o << "<tr><th>" << x.length << "</th><td class=\"count\">" << escape(x.count) << "</td><td>"
      << escape(mean_std_cell(x.distance)) << "</td>";
    if (head) o << "<td>" << pooled_text(*x.head) << "</td><td>" << escape(x.head->kl.shown()) << "</td>";
    if (rr) {
      const BatchRerunEntry& y = rr->lengths[k];
      o << "<td>" << escape(mean_std_cell(y.distance)) << "</td><td>" << escape(y.gap ? mean_std_cell(*y.gap) : "")
        << "</td>";
      if (head) o << "<td>" << pooled_text(*y.head) << "</td><td>" << escape(y.head->kl.shown()) << "</td>";
    }
    o << "</tr>\n";
  }
  o << "</tbody>\n</table>\n</section>\n";
}

}  // namespace

void effectiveness_section(std::ostringstream& o, const HtmlReport& r) {
  if (r.effectiveness_batch || r.rerun_batch) {
    batch_section(o, r);
    return;
  }
  const EffectivenessReport& e = r.effectiveness;
  const RerunReport* rr = r.rerun ? &*r.rerun : nullptr;
  svg::Chart chart;
  chart.id = "chart-effectiveness";
  chart.title = "The network kept to its paths of length ≤ k";
  chart.x = {"longest path kept k", false, true, {}, {}};
  chart.y = {"‖X≤k − X^L‖_F / ‖X^L‖_F (log scale)", true, false, {}, {}};
  svg::Series dist{rr ? "exact" : "distance to the output", "distance", "#4c72b0",
                   svg::SeriesStyle::line, false, {}};
  for (const EffectivenessEntry& x : e.lengths)
    dist.points.push_back(
        point_of(x.length, x.distance, "k ≤ " + std::to_string(x.length) + ": distance " + x.distance.shown()));
  chart.series.push_back(std::move(dist));
  if (rr) {
    svg::Series re{"re-run (mean ± std)", "rerun", "#dd8452", svg::SeriesStyle::line, true, {}};
    svg::Series gap{"gap", "gap", "#55a868", svg::SeriesStyle::line, true, {}};
    for (const RerunEntry& x : rr->lengths) {
      const std::string k = "k ≤ " + std::to_string(x.length);
      re.points.push_back(point_of(x.length, x.distance.mean, k + ": re-run distance " + mean_std_cell(x.distance)));
      if (const auto band = band_of(x.length, x.distance)) re.band.push_back(*band);
      if (x.gap) gap.points.push_back(point_of(x.length, x.gap->mean, k + ": gap " + mean_std_cell(*x.gap)));
    }
    chart.series.push_back(std::move(re));
    chart.series.push_back(std::move(gap));
  }
  chart.width = 560;
  chart.height = 380;
  std::string agree_chart;
  if (e.head) {
    svg::Chart a;
    a.id = "chart-effectiveness-head";
    a.title = "Predictions of the " + to_string(*e.head) + " head that agree with the full network";
    a.x = chart.x;
    a.y = {"agreeing predictions (fraction)", false, false, 0.0, 1.0};
    svg::Series s{rr ? "exact" : "agreement", "agree", "#c44e52", svg::SeriesStyle::line, false, {}};
    for (const EffectivenessEntry& x : e.lengths)
      s.points.push_back({static_cast<double>(x.length),
                          static_cast<double>(*x.agree) / static_cast<double>(std::max(1L, e.predictions)),
                          svg::Mark::value,
                          "k ≤ " + std::to_string(x.length) + ": " +
                              text_table::agreement_text(*x.agree, x.agree_check, x.agree_most, e.predictions)});
    a.series.push_back(std::move(s));
    if (rr) {
      svg::Series t{"re-run (mean)", "agree-rerun", "#dd8452", svg::SeriesStyle::line, true, {}};
      for (const RerunEntry& x : rr->lengths) {
        const double f = mean_agreement(x.agree, rr->predictions);
        t.points.push_back({static_cast<double>(x.length), f, svg::Mark::value,
                            "k ≤ " + std::to_string(x.length) + ": re-run agreement " +
                                text_table::mean_agreement_text(x.agree, x.agree_check, x.agree_most, rr->predictions)});
      }
      a.series.push_back(std::move(t));
    }
    a.width = 560;
    a.height = 380;
    agree_chart = svg::render(a);
  }
  o << "<section id=\"effectiveness\">\n<h2>4. How much of the model is in its short paths</h2>\n";
  o << "<p>Keeping only the paths of length ≤ k gives X<sub>≤k</sub> = Σ<sub>j≤k</sub> S<sub>j</sub> + 1bᵀ "
       "(attention frozen: exact, from the length sums). The left chart shows its distance to the output of the "
       "same network; "
    << (e.head ? "the right one how many predictions of the checkpoint's " + escape(to_string(*e.head)) +
                     " head on X<sub>≤k</sub> agree with those on X<sup>L</sup>."
               : "the task head: " + escape(task_head_note(r.info.head_absence)) +
                     ", so no predictions are compared.")
    << " Variant: " << escape(to_string(r.paths_variant, VariantStyle::prose))
    << ". Precision: " << escape(provenance_text::cell(e, provenance_text::View::paths)) << ".</p>\n";
  if (rr)
    o << "<p>Dashed: the paper's own procedure (as <code>sanpath paths --effectiveness --rerun</code>): per length k, "
      << rr->request.samples << " paths (every path when there are no more) re-run as sub-networks, each layer "
         "with the path's head alone and its attention recomputed from the path's own states, summed as "
         "count<sub>k</sub>/N · Σ (unbiased) plus the bias term; mean over "
      << rr->request.repeats << " draws (seed " << rr->request.seed
      << ") with a ±std band, and the gap ‖X̂<sub>≤k</sub> − X<sub>≤k</sub>‖<sub>F</sub>/‖X<sup>L</sup>‖<sub>F</sub> "
         "between the two senses. Precision: "
      << escape(provenance_text::cell(*rr, provenance_text::View::paths)) << ".</p>\n";
  o << "<figure class=\"pair\">" << svg::render(chart) << agree_chart << "</figure>\n";
  o << "<table id=\"table-effectiveness\" class=\"num\">\n<thead><tr><th>k</th><th>paths of length ≤ k</th>"
       "<th>‖X<sub>≤k</sub> − X<sup>L</sup>‖<sub>F</sub>/‖X<sup>L</sup>‖<sub>F</sub></th>";
  if (e.head) o << "<th>agreeing predictions</th><th>mean KL</th>";
  o << "<th>digits</th>";
  if (rr) {
    o << "<th>re-run distance (mean ± std [digits])</th><th>gap</th>";
    if (e.head) o << "<th>re-run agreement (mean)</th>";
  }
  o << "</tr></thead>\n<tbody>\n";
  for (std::size_t k = 0; k < e.lengths.size(); ++k) {
    const EffectivenessEntry& x = e.lengths[k];
    o << "<tr><th>" << x.length << "</th><td class=\"count\">" << escape(x.count) << "</td><td>"
      << escape(x.distance.shown()) << "</td>";
    if (e.head)
      o << "<td>" << escape(text_table::agreement_text(*x.agree, x.agree_check, x.agree_most, e.predictions))
        << "</td><td>" << escape(x.kl->shown()) << "</td>";
    o << "<td>" << digits_text(text_table::shown_least(x.digits, x.distance)) << "</td>";
    if (rr) {
      const RerunEntry& y = rr->lengths[k];
      o << "<td>" << escape(mean_std_cell(y.distance)) << "</td><td>" << escape(y.gap ? mean_std_cell(*y.gap) : "")
        << "</td>";
      if (e.head) o << "<td>" << escape(text_table::mean_agreement_text(y.agree, y.agree_check, y.agree_most, rr->predictions)) << "</td>";
    }
    o << "</tr>\n";
  }
  o << "</tbody>\n</table>\n</section>\n";
}

}  // namespace sanpath::html_parts

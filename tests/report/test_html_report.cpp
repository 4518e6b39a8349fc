// The HTML report: gathered by build_report from the library's analyses and
// rendered without any external resource; the numbers in its tables are the
// analyses' own strings, and values below resolution become upper-bound marks.
#include "sanpath/report/html_report.hpp"

#include "sanpath/model/random.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/task_head.hpp"
#include "sanpath/report/svg_plot.hpp"
#include "support/helpers.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

using namespace sanpath;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

Model tiny_san(int layers) {
  RandomModelSpec s;
  s.arch.layers = layers;
  s.arch.heads = 2;
  s.arch.d_model = 8;
  s.arch.d_qk = s.arch.d_v = 4;
  s.arch.d_ff = 0;
  s.arch.variant = Variant::san();
  s.std = 0.05;
  s.seed = 3;
  return random_model(s);
}

InputSpec tiny_input() {
  RandomInputSpec r;
  r.n = 5;
  r.seed = 2;
  return InputSpec::from_random(r);
}

}  // namespace

TEST_CASE("the report holds every chart and the analyses' numbers") {
  const Model m = tiny_san(3);
  ReportRequest req;
  req.info = {"tiny <san> & co", "random input"};
  req.generator = "sanpath test";
  int messages = 0;
  const HtmlReport r = build_report(m, tiny_input(), req, [&](const ProgressStep&) { ++messages; });
  CHECK(messages > 0);
  // A SAN has no MLP weights: SAN, SAN+skip and full run, SAN+MLP does not.
  REQUIRE(r.collapse.variants.size() == 3);
  CHECK(r.bounds_variant == Variant::san());
  CHECK(r.paths_variant.skip);
  CHECK(r.paths_variant.attention_only());
  REQUIRE(r.lengths.lengths.size() == 4);

  const std::string html = render_html(r);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  for (const char* id : {"id=\"chart-collapse\"", "id=\"chart-bounds\"", "id=\"chart-path-counts\"",
                         "id=\"chart-path-shares\"", "id=\"table-setup\"", "id=\"table-collapse\"",
                         "id=\"table-bounds\"", "id=\"table-paths\"", "id=\"chart-collapse-san\"",
                         "id=\"chart-collapse-san-skip\"", "id=\"chart-collapse-full\"", "id=\"chart-bounds-uniform\"",
                         "id=\"chart-effectiveness\"", "id=\"chart-effectiveness-distance\"",
                         "id=\"table-effectiveness\""})
    CHECK(html.find(id) != std::string::npos);
  // No task head in a model built in memory: the distance chart only.
  CHECK(count(html, "<svg ") == 5);
  CHECK(html.find("chart-effectiveness-head") == std::string::npos);
  REQUIRE(r.effectiveness.lengths.size() == 4);
  CHECK(!r.effectiveness.head);
  for (const EffectivenessEntry& e : r.effectiveness.lengths)
    CHECK(html.find("<td>" + svg::escape(e.distance.shown()) + "</td>") != std::string::npos);
  // Escaped, self-contained.
  CHECK(html.find("tiny &lt;san&gt; &amp; co") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  // Each table cell is the analysis' own string.
  for (std::size_t i = 0; i < r.collapse.variants.size(); ++i)
    for (const LayerReport& l : r.collapse.analyses[i].layers) {
      const std::string cell = "data-variant=\"" + r.collapse.variants[i].name + "\" data-layer=\"" +
                               std::to_string(l.layer) + "\">" + l.relative_residual.shown();
      CHECK(html.find(cell) != std::string::npos);
    }
  for (const LengthSumEntry& e : r.lengths.lengths) CHECK(html.find(">" + e.count + "<") != std::string::npos);
  CHECK(html.find(r.lengths.total_count + " paths in all") != std::string::npos);
  for (const DepthComparison& d : r.bounds.report.depths) {
    REQUIRE(d.bound);
    CHECK(html.find(d.bound->value.to_string(6)) != std::string::npos);
  }
}

TEST_CASE("a certified report: every section proven; with re-runs the effectiveness section confirmed, said so") {
  const Model m = tiny_san(3);
  ReportRequest req;
  req.precision.check = CheckMethod::certified;
  const HtmlReport r = build_report(m, tiny_input(), req);
  for (const ForwardAnalysis& a : r.collapse.analyses) {
    CHECK(a.check_method == CheckMethod::certified);
    for (const LayerReport& l : a.layers) CHECK(l.relative_residual.enclosure);
  }
  CHECK(r.bounds.measured.check_method == CheckMethod::certified);
  CHECK(r.lengths.check_method == CheckMethod::certified);
  for (const LengthSumEntry& e : r.lengths.lengths) CHECK(e.share.enclosure);
  // without re-runs the effectiveness section is enclosed too
  CHECK(r.effectiveness.check_method == CheckMethod::certified);
  CHECK_FALSE(r.effectiveness.check);
  for (const EffectivenessEntry& e : r.effectiveness.lengths) CHECK(e.distance.enclosure);
  const std::string html = render_html(r);
  CHECK(html.find("In brackets the digits printed, each proven by enclosures") != std::string::npos);
  CHECK(html.find("each confirmed by the second run") == std::string::npos);
  CHECK(html.find("not enclosed yet") == std::string::npos);
  CHECK(html.find("certified: every digit proven by ball arithmetic (math.md §10)") != std::string::npos);
  // with the re-run sub-networks (in balls too) the section is still proven, each repetition enclosed
  RerunRequest rerun;
  rerun.samples = 2;
  rerun.repeats = 1;
  req.rerun = rerun;
  const HtmlReport rr = build_report(m, tiny_input(), req);
  CHECK(rr.lengths.check_method == CheckMethod::certified);
  CHECK(rr.effectiveness.check_method == CheckMethod::certified);
  REQUIRE(rr.rerun);
  CHECK(rr.rerun->check_method == CheckMethod::certified);
  for (const RerunEntry& e : rr.rerun->lengths) {
    REQUIRE_FALSE(e.distance_each.empty());
    for (const Quantity& q : e.distance_each) CHECK(q.enclosure);
  }
  const std::string html_rr = render_html(rr);
  CHECK(html_rr.find("not enclosed yet") == std::string::npos);
  CHECK(html_rr.find("certified: every digit proven by ball arithmetic (math.md §10)") != std::string::npos);
  // a check the path sections cannot honour is refused (require_check, CheckScope::paths)
  req.precision.check = CheckMethod::rounding;
  CHECK_THROWS_WITH(build_report(m, tiny_input(), req),
                    Catch::StartsWith("'rounding' is not a check path analyses can honour"));
}

TEST_CASE("values below resolution are drawn as upper-bound marks") {
  // In double precision the SAN's residual falls below 1e-16 within a few
  // layers: those values are only bounds and must not be plotted as values.
  const Model m = tiny_san(6);
  ReportRequest req;
  req.precision = PrecisionRequest::parse("double");
  req.info = {"tiny", "random"};
  const HtmlReport r = build_report(m, tiny_input(), req);
  int below = 0;
  for (const LayerReport& l : r.collapse.analyses[0].layers) below += l.relative_residual.below_resolution;
  REQUIRE(below > 0);
  const std::string html = render_html(r);
  const std::size_t start = html.find("id=\"chart-collapse-san\"");
  REQUIRE(start != std::string::npos);
  const std::string san = html.substr(start, html.find("</g>", start) - start);
  CHECK(count(san, "class=\"upper-bound\"") == static_cast<std::size_t>(below));
  CHECK(count(san, "class=\"point\"") == r.collapse.analyses[0].layers.size() - static_cast<std::size_t>(below));
  CHECK(html.find("below resolution") != std::string::npos);
}

TEST_CASE("the report is written atomically") {
  const Model m = tiny_san(2);
  ReportRequest req;
  req.info = {"tiny", "random"};
  const HtmlReport r = build_report(m, tiny_input(), req);
  const std::string path = std::string(SANPATH_TEST_TMP) + "/report.html";
  write_html_report(path, r);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == render_html(r));
  CHECK_THROWS_AS(write_html_report(std::string(SANPATH_TEST_TMP) + "/no/such/dir/report.html", r),
                  std::invalid_argument);
}

TEST_CASE("a batch: mean ± std cells and bands in the collapse chart; other sections on the first input") {
  const Model m = tiny_san(3);
  ReportRequest req;
  req.info = {"tiny", "a batch"};
  req.conventions = CollapseConventions::paper;
  std::vector<InputSpec> inputs;
  for (int i = 0; i < 3; ++i) {
    RandomInputSpec r;
    r.n = 4 + i;
    r.seed = 20 + static_cast<std::uint64_t>(i);
    inputs.push_back(InputSpec::from_random(r));
  }
  // Variants the model cannot run are skipped (no MLP weights: SAN+MLP).
  const HtmlReport r = build_report(m, inputs, req, 2);
  REQUIRE(r.batch);
  REQUIRE(r.batch->runs.size() == 3);
  CHECK(r.collapse.conventions == CollapseConventions::paper);
  const std::string html = render_html(r);
  const std::size_t variants = r.batch->variants.size();
  CHECK(variants >= 3);
  CHECK(count(html, "class=\"band\"") >= 1);
  // Every cell of the collapse table is the batch's own mean ± std text.
  for (std::size_t v = 0; v < variants; ++v) {
    const std::string cell = "data-variant=\"" + r.batch->variants[v].name + "\" data-layer=\"1\">" +
                             mean_std_cell(r.batch->layers[v][1]) + "</td>";
    CHECK(html.find(cell) != std::string::npos);
  }
  CHECK(html.find("analyse the first input of the batch") != std::string::npos);
  CHECK(count(html, "<b>First input only:</b>") == 2);  // the bounds and path-length sections say so
  CHECK(html.find("collapse conventions") != std::string::npos);
  // The effectiveness section is over the whole batch: its cells are the batch statistics.
  REQUIRE(r.effectiveness_batch);
  CHECK_FALSE(r.rerun_batch);
  REQUIRE(r.effectiveness_batch->runs.size() == 3);
  CHECK(html.find("Over the whole batch of 3 inputs") != std::string::npos);
  for (const BatchEffectivenessEntry& e : r.effectiveness_batch->lengths)
    CHECK(html.find("<td>" + svg::escape(mean_std_cell(e.distance)) + "</td>") != std::string::npos);
  // Its first input's exact curve is that input's own run.
  CHECK(r.effectiveness.lengths[1].distance.str() == r.effectiveness_batch->runs[0].lengths[1].distance.str());
  // The sections beside the collapse analyse input 0.
  CHECK(r.bounds.measured.depths.size() == 4);
  for (std::size_t v = 0; v < variants; ++v)
    CHECK(r.collapse.analyses[v].layers[2].relative_residual.str() ==
          r.batch->runs[0].analyses[v].layers[2].relative_residual.str());
}

TEST_CASE("with a task head the report shows the agreement per k", "[real]") {
  const std::string dir = sanpath::test::real_models_dir();
  if (dir.empty()) return;  // skipped outside CI (real_models_dir says so)
  const std::string path = dir + "/bert-ticket-classifier";
  const Model m = load_model(path);
  ReportRequest req;
  req.info = {path, "tokens"};
  req.head = read_task_head(path, m);
  REQUIRE(req.head);
  const HtmlReport r = build_report(m, InputSpec::from_tokens({2, 15, 27, 3}), req);
  REQUIRE(r.effectiveness.head == TaskHeadKind::classifier);
  REQUIRE(r.effectiveness.lengths.size() == 3);
  CHECK(*r.effectiveness.lengths.back().agree == 1);  // the full network agrees with itself
  const std::string html = render_html(r);
  CHECK(html.find("id=\"chart-effectiveness-head\"") != std::string::npos);
  CHECK(html.find("id=\"chart-effectiveness-head-agree\"") != std::string::npos);
  CHECK(count(html, "<svg ") == 6);
  CHECK(html.find("<td>1/1</td>") != std::string::npos);
}

TEST_CASE("with re-runs the effectiveness section draws both senses and the gap", "[real]") {
  const std::string dir = sanpath::test::real_models_dir();
  if (dir.empty()) return;  // skipped outside CI (real_models_dir says so)
  const std::string path = dir + "/bert-ticket-classifier";
  const Model m = load_model(path);
  ReportRequest req;
  req.info = {path, "tokens"};
  req.head = read_task_head(path, m);
  RerunRequest rr;
  rr.samples = 16;  // every path of the 2-layer, 4-head model: one value per length
  rr.repeats = 2;
  req.rerun = rr;
  const HtmlReport r = build_report(m, InputSpec::from_tokens({2, 15, 27, 3}), req);
  REQUIRE(r.rerun);
  REQUIRE(r.rerun->exact);
  // The section's exact sense is the re-run report's own.
  for (std::size_t k = 0; k < r.effectiveness.lengths.size(); ++k)
    CHECK(r.effectiveness.lengths[k].distance.str() == r.rerun->exact->lengths[k].distance.str());
  const std::string html = render_html(r);
  for (const char* id : {"chart-effectiveness-rerun", "chart-effectiveness-gap", "chart-effectiveness-head-agree-rerun"})
    CHECK(html.find(std::string("id=\"") + id + "\"") != std::string::npos);
  CHECK(html.find("re-run distance (mean ± std [digits])") != std::string::npos);
  for (const RerunEntry& e : r.rerun->lengths) {
    CHECK(e.all_paths);
    CHECK(html.find("<td>" + mean_std_cell(e.distance) + "</td>") != std::string::npos);
  }
}

TEST_CASE("a batch with re-runs: both senses over the batch, agreement pooled over every prediction", "[real]") {
  const std::string dir = sanpath::test::real_models_dir();
  if (dir.empty()) return;  // skipped outside CI (real_models_dir says so)
  const std::string path = dir + "/bert-ticket-classifier";
  const Model m = load_model(path);
  ReportRequest req;
  req.info = {path, "tokens"};
  req.head = read_task_head(path, m);
  RerunRequest rr;
  rr.samples = 4;  // 8 paths of length 1 and 16 of length 2: sampled, 2 draws each
  rr.repeats = 2;
  req.rerun = rr;
  const std::vector<InputSpec> inputs = {InputSpec::from_tokens({2, 15, 27, 3}), InputSpec::from_tokens({2, 40, 8, 11, 3}),
                                         InputSpec::from_tokens({2, 100, 3})};
  const HtmlReport r = build_report(m, inputs, req, 2);
  REQUIRE(r.rerun_batch);
  REQUIRE(r.rerun_batch->exact);
  CHECK_FALSE(r.effectiveness_batch);
  const std::string html = render_html(r);
  for (std::size_t k = 0; k < r.rerun_batch->lengths.size(); ++k) {
    const BatchRerunEntry& e = r.rerun_batch->lengths[k];
    const BatchEffectivenessEntry& x = (*r.rerun_batch->exact)[k];
    // One prediction per input (a classifier), times the draws of a sampled length.
    CHECK(x.head->predictions == 3);
    CHECK(e.head->predictions == (e.all_paths ? 3 : 6));
    long agree = 0;
    for (const RerunReport& run : r.rerun_batch->runs)
      for (long a : run.lengths[k].agree) agree += a;
    CHECK(e.head->agree == agree);
    CHECK(html.find("<td>" + std::to_string(e.head->agree) + "/" + std::to_string(e.head->predictions) + "</td>") !=
          std::string::npos);
    CHECK(html.find("<td>" + svg::escape(mean_std_cell(e.distance)) + "</td>") != std::string::npos);
  }
  CHECK(html.find("id=\"chart-effectiveness-rerun\"") != std::string::npos);
}

// The SVG chart module: tick placement and labels on log10 axes that span
// thousands of decades, point marks, clipping, escaping and ids.
#include "sanpath/report/svg_plot.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <string>

using namespace sanpath::svg;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

Chart two_series() {
  Chart c;
  c.id = "chart-test";
  c.title = "Residual <per> layer & more";
  c.x = {"layer", false, true, {}, {}};
  c.y = {"relative residual", true, false, {}, {}};
  Series a{"SAN", "san", "#d62728", SeriesStyle::line, false, {}};
  a.points = {
      {0, -0.2, Mark::value, "6.0e-1"}, {1, -2.3, Mark::value, "5.0e-3"}, {2, -3000, Mark::upper_bound, "< 1e-3000"}};
  Series b{"bound", "bound", "#111", SeriesStyle::line, true, {}};
  b.points = {{1, -1, Mark::value, ""}, {2, -2500, Mark::value, ""}};
  c.series = {a, b};
  return c;
}

}  // namespace

TEST_CASE("log10 tick labels print the exponent, however large") {
  CHECK(log10_label(0) == "1");
  CHECK(log10_label(1) == "10");
  CHECK(log10_label(-1) == "1e-1");
  CHECK(log10_label(-100) == "1e-100");
  CHECK(log10_label(-3000) == "1e-3000");
  CHECK(log10_label(5) == "1e5");
  CHECK(log10_label(-4.5) == "3.2e-5");  // 10^-4.5 = 3.16e-5
  CHECK(log10_label(-0.0001) == "1");    // rounds to the decade
}

TEST_CASE("linear tick labels carry the decimals of the step") {
  CHECK(linear_label(0.5, 0.1) == "0.5");
  CHECK(linear_label(3, 1) == "3");
  CHECK(linear_label(0.25, 0.05) == "0.25");
  CHECK(linear_label(-1e-17, 0.1) == "0.0");  // no "-0.0"
}

TEST_CASE("nice ticks: 1-2-5 steps inside the range") {
  const auto t = nice_ticks(-498, 0, 8, true);
  REQUIRE(t.size() >= 2);
  CHECK(t.size() <= 8);
  CHECK(t.front() >= -498);
  CHECK(t.back() == 0);
  CHECK(t[1] - t[0] == 100);
  const auto u = nice_ticks(0, 5, 12, true);
  CHECK(u == std::vector<double>{0, 1, 2, 3, 4, 5});
  const auto v = nice_ticks(0, 1, 6, false);
  CHECK(v.size() == 6);
  CHECK(v[1] == Approx(0.2));
  CHECK(nice_ticks(1, 1, 5, false).empty());
}

TEST_CASE("log axes widen to whole decades; fixed ends are kept") {
  Axis y{"y", true, false, {}, {}};
  auto r = axis_range(y, {-0.19, -0.18});
  CHECK(r.first == -1);
  CHECK(r.second == 0);
  r = axis_range(y, {-497.3, -0.2});
  CHECK(r.first == -498);
  CHECK(r.second == 0);
  y.min = -10;
  r = axis_range(y, {-497.3, -0.2});
  CHECK(r.first == -10);
  Axis x{"x", false, true, {}, {}};
  r = axis_range(x, {0, 5});
  CHECK(r.first == -0.5);
  CHECK(r.second == 5.5);
}

TEST_CASE("a chart is one svg element with ids, series, marks and a legend") {
  const std::string s = render(two_series());
  CHECK(s.rfind("<svg ", 0) == 0);
  CHECK(count(s, "<svg ") == 1);
  CHECK(count(s, "</svg>") == 1);
  CHECK(s.find("id=\"chart-test\"") != std::string::npos);
  CHECK(s.find("id=\"chart-test-san\"") != std::string::npos);
  CHECK(s.find("id=\"chart-test-bound\"") != std::string::npos);
  CHECK(count(s, "class=\"series ") == 2);
  CHECK(count(s, "class=\"upper-bound\"") == 1);  // the SAN's layer-2 value
  CHECK(count(s, "class=\"point\"") == 4);        // 2 SAN values + 2 bound points
  CHECK(s.find("stroke-dasharray") != std::string::npos);
  CHECK(s.find(">1e-3000<") != std::string::npos);  // an axis tick at the bottom decade
  CHECK(s.find("<title>&lt; 1e-3000</title>") != std::string::npos);
  CHECK(s.find("Residual &lt;per&gt; layer &amp; more") != std::string::npos);
  CHECK(s.find("below resolution") != std::string::npos);
  CHECK(s.find("http") == s.find("http://www.w3.org/2000/svg"));  // no external reference but the namespace
  // The upper-bound mark is not joined to the line: one segment for two values.
  const std::regex line("id=\"chart-test-san\"[^]*?<path class=\"line\" d=\"M[0-9.]+,[0-9.]+ L[0-9.]+,[0-9.]+\"");
  CHECK(std::regex_search(s, line));
}

TEST_CASE("every coordinate is finite, also for values far outside a fixed range") {
  Chart c = two_series();
  c.y.min = -10;
  c.y.max = 0;
  c.note = "bound leaves the chart below";
  const std::string s = render(c);
  CHECK(s.find("nan") == std::string::npos);
  CHECK(s.find("inf") == std::string::npos);
  CHECK(s.find("clip-path=\"url(#chart-test-clip)\"") != std::string::npos);
  CHECK(s.find("bound leaves the chart below") != std::string::npos);
}

TEST_CASE("bars stand on the axis bottom; non-finite values are left out") {
  Chart c;
  c.id = "bars";
  c.title = "paths";
  c.x = {"length", false, true, {}, {}};
  c.y = {"count", true, false, {}, {}};
  Series b{"paths", "count", "#333", SeriesStyle::bars, false, {}};
  b.points = {{0, 0, Mark::value, "1"}, {1, 1.3, Mark::value, "20"}, {2, -INFINITY, Mark::value, "0"}};
  c.series = {b};
  const std::string s = render(c);
  CHECK(count(s, "class=\"bar\"") == 2);
  CHECK(s.find("nan") == std::string::npos);
}

TEST_CASE("bad ids and empty ranges are refused") {
  Chart c = two_series();
  c.id = "1bad id";
  CHECK_THROWS_AS(render(c), std::invalid_argument);
  c = two_series();
  c.series[0].id = "";
  CHECK_THROWS_AS(render(c), std::invalid_argument);
  c = two_series();
  c.y.min = 0;
  c.y.max = -1;
  CHECK_THROWS_AS(render(c), std::invalid_argument);
}

TEST_CASE("a band is one shaded path under its line; a non-finite lower edge reaches the bottom") {
  Chart c = two_series();
  c.y.min = -4;
  c.y.max = 0;
  c.series[0].band = {{0, -0.5, -0.1}, {1, -INFINITY, -2.0}};
  const std::string s = render(c);
  CHECK(count(s, "class=\"band\"") == 1);
  CHECK(s.find("nan") == std::string::npos);
  CHECK(s.find("inf") == std::string::npos);
  // The band belongs to the SAN's group and comes before its line.
  const std::size_t group = s.find("id=\"chart-test-san\""), band = s.find("class=\"band\""),
                    line = s.find("class=\"line\"", group);
  CHECK(group < band);
  CHECK(band < line);
  // Its lower edge at x = 1 is the plot's bottom: the same y as the axis frame's lower side.
  const std::regex frame("<rect x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"[0-9.]+\" height=\"([0-9.]+)\" fill=\"none\"");
  std::smatch m;
  REQUIRE(std::regex_search(s, m, frame));
  const double bottom = std::stod(m[2]) + std::stod(m[3]);
  const std::regex path("class=\"band\" d=\"M[0-9.]+,[0-9.]+ L[0-9.]+,[0-9.]+ L[0-9.]+,([0-9.]+) L");
  REQUIRE(std::regex_search(s, m, path));
  CHECK(std::abs(std::stod(m[1]) - bottom) < 0.01);
}

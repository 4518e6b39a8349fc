#pragma once
/// \file svg_plot.hpp
/// Small self-contained SVG charts for the HTML report: lines with point
/// markers and bars, a linear or log10 y axis, ticks, labels, legend and a
/// tooltip per point. Values on a log axis arrive already as log10 of the
/// quantity (a double), so 1e-3000 is the ordinary value −3000; tick labels
/// read "1e-3000". No mathematics here beyond mapping values to pixels.

#include <optional>
#include <string>
#include <vector>

namespace sanpath::svg {

/// How a point is drawn. `upper_bound`: only known to lie below y (a value
/// below the resolution of the working precision); drawn as a downward
/// triangle at y, not joined to the line.
enum class Mark { value, upper_bound };

struct Point {
  double x = 0;
  double y = 0;  ///< in axis units (log10 of the quantity on a log axis)
  Mark mark = Mark::value;
  std::string tip;  ///< tooltip text (e.g. the exact decimal value); empty: none
};

enum class SeriesStyle { line, bars };

/// One x of a shaded band around a line (e.g. mean ± standard deviation),
/// from lo to hi in axis units. A non-finite lo reaches the bottom of the
/// plot (on a log axis, mean − std ≤ 0 has no logarithm).
struct BandPoint {
  double x = 0;
  double lo = 0, hi = 0;
};

struct Series {
  std::string name;   ///< legend text
  std::string id;     ///< element id suffix: letters, digits, '-' or '_'
  std::string color;  ///< CSS colour
  SeriesStyle style = SeriesStyle::line;
  bool dashed = false;
  std::vector<Point> points;  ///< non-finite y are left out
  double line_width = 2.2;    ///< wider under a later series shows both where they coincide
  std::vector<BandPoint> band = {};  ///< lines only: drawn shaded under the line (path.band); empty: none
};

struct Axis {
  std::string label;
  bool log10 = false;    ///< values are log10 of the quantity; ticks at integer exponents, "1e-100"
  bool integer = false;  ///< ticks only at integers (layers, lengths)
  /// Range; from the data when unset (log axes widen to whole decades).
  std::optional<double> min, max;
};

struct Chart {
  std::string id;     ///< id of the <svg> element
  std::string title;  ///< drawn above the plot
  Axis x, y;
  std::vector<Series> series;
  int width = 780;
  int height = 440;
  /// Data outside a fixed y range is clipped to the plot area and named in
  /// this note (drawn under the plot), e.g. "bound leaves the chart below".
  std::string note;
};

/// The chart as one <svg> element (inline in HTML: no external resources,
/// fonts from the page). A log axis without fixed ends widens to whole tick
/// steps (so its ends carry labels); bars on a log axis stand on a floor one
/// decade below their smallest value, so that a count of 1 is visible. Throws std::invalid_argument for an empty or
/// malformed id, or a range with max <= min.
std::string render(const Chart& chart);

/// Range of an axis from its data: [min, max] of the finite values, padded
/// by 5% (linear) or widened to whole decades (log); a single value gets a
/// unit range around it. Fixed ends of `axis` are kept.
std::pair<double, double> axis_range(const Axis& axis, const std::vector<double>& values);

/// "Nice" tick positions (1, 2 or 5 × 10^k steps, integer steps when
/// `integer`) inside [lo, hi], at most `max_ticks` of them (at least 2 when
/// the range allows).
std::vector<double> nice_ticks(double lo, double hi, int max_ticks, bool integer);

/// Tick label of a log10 value e: "1" (e = 0), "10" (e = 1), else "1e<e>"
/// ("1e-100", "1e5"); non-integer e: mantissa·10^floor(e), "3.2e-5".
std::string log10_label(double e);
/// Tick label of a linear value, with as many decimals as `step` needs.
std::string linear_label(double v, double step);

/// Escapes &, <, >, " and ' for XML text and attribute values.
std::string escape(const std::string& text);

}  // namespace sanpath::svg

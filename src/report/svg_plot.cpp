#include "sanpath/report/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace sanpath::svg {

namespace {

/// Pixel coordinates with two decimals ("123.45").
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

bool valid_id(const std::string& id) {
  if (id.empty() || !std::isalpha(static_cast<unsigned char>(id[0]))) return false;
  return std::all_of(id.begin(), id.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; });
}

/// Linear map of [lo, hi] onto [a, b].
struct Scale {
  double lo, hi, a, b;
  double operator()(double v) const { return a + (v - lo) / (hi - lo) * (b - a); }
};

// Layout (pixels).
constexpr double kLeft = 84, kTop = 44, kBottom = 58, kLegend = 200, kNote = 22;

}  // namespace

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string log10_label(double e) {
  if (!std::isfinite(e)) return e < 0 ? "0" : "inf";
  const double r = std::round(e);
  if (std::abs(e - r) < 1e-9) {
    if (r == 0) return "1";
    if (r == 1) return "10";
    char buf[32];
    std::snprintf(buf, sizeof buf, "1e%.0f", r);
    return buf;
  }
  const double k = std::floor(e);
  const double m = std::round(std::pow(10.0, e - k) * 10) / 10;  // one decimal
  if (m >= 10) return log10_label(k + 1);                        // rounds up to the next decade
  if (m <= 1) return log10_label(k);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1fe%.0f", m, k);
  return buf;
}

std::string linear_label(double v, double step) {
  int decimals = 0;
  if (step > 0 && step < 1) decimals = std::min(12, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  if (std::abs(v) < step * 1e-9) v = 0;  // no "-0"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::vector<double> nice_ticks(double lo, double hi, int max_ticks, bool integer) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi) || max_ticks < 2) return ticks;
  const double raw = (hi - lo) / (max_ticks - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag * 10;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  if (integer) step = std::max(1.0, std::round(step));
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (double t = first; t <= hi + step * 1e-9; t += step) ticks.push_back(std::abs(t) < step * 1e-12 ? 0.0 : t);
  return ticks;
}

std::pair<double, double> axis_range(const Axis& axis, const std::vector<double>& values) {
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (!std::isfinite(lo)) {
    lo = 0;
    hi = 1;
  } else if (axis.log10) {
    lo = std::floor(lo);
    hi = std::ceil(hi);
    if (hi - lo < 1) hi = lo + 1;
  } else if (hi == lo) {
    lo -= 0.5;
    hi += 0.5;
  } else {
    const double pad = (hi - lo) * 0.05;
    if (!axis.integer) {
      lo -= pad;
      hi += pad;
    } else {
      lo -= 0.5;
      hi += 0.5;
    }
  }
  if (axis.min) lo = *axis.min;
  if (axis.max) hi = *axis.max;
  return {lo, hi};
}

std::string render(const Chart& c) {
  if (!valid_id(c.id))
    throw std::invalid_argument("svg chart: id '" + c.id + "' is empty or not [A-Za-z][A-Za-z0-9_-]*");
  for (const Series& s : c.series)
    if (!valid_id(s.id))
      throw std::invalid_argument("svg chart " + c.id + ": series id '" + s.id + "' is empty or malformed");

  std::vector<double> xs, ys;
  bool any_bound = false;
  for (const Series& s : c.series)
    for (const Point& p : s.points) {
      xs.push_back(p.x);
      if (std::isfinite(p.y)) ys.push_back(p.y);
      any_bound = any_bound || p.mark == Mark::upper_bound;
    }
  for (const Series& s : c.series)
    for (const BandPoint& b : s.band)
      for (double v : {b.lo, b.hi})
        if (std::isfinite(v)) ys.push_back(v);
  // Bars stand on the bottom of the axis: include a half unit either side.
  const bool has_bars =
      std::any_of(c.series.begin(), c.series.end(), [](const Series& s) { return s.style == SeriesStyle::bars; });
  Axis xa = c.x;
  auto [x0, x1] = axis_range(xa, xs);
  if (has_bars && !xa.min && !xa.max && !xs.empty()) {
    x0 = *std::min_element(xs.begin(), xs.end()) - 0.6;
    x1 = *std::max_element(xs.begin(), xs.end()) + 0.6;
  }
  auto [y0, y1] = axis_range(c.y, ys);
  if (c.y.log10 && has_bars && !c.y.min && !ys.empty()) y0 -= 1;
  if (c.y.log10 && y1 > y0) {
    const auto t = nice_ticks(y0, y1, 8, true);
    const double step = t.size() > 1 ? t[1] - t[0] : 1;
    if (!c.y.min) y0 = std::floor(y0 / step + 1e-9) * step;
    if (!c.y.max) y1 = std::ceil(y1 / step - 1e-9) * step;
  }
  if (!(x1 > x0) || !(y1 > y0)) throw std::invalid_argument("svg chart " + c.id + ": axis range is empty (max <= min)");

  const double W = c.width, H = c.height;
  const double right = W - kLegend;
  const double bottom = H - kBottom - (c.note.empty() ? 0 : kNote);
  const Scale sx{x0, x1, kLeft, right};
  const Scale sy{y0, y1, bottom, kTop};
  const std::string clip = c.id + "-clip";

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" << c.id << "\" class=\"chart\" width=\"" << c.width
    << "\" height=\"" << c.height << "\" viewBox=\"0 0 " << c.width << ' ' << c.height
    << "\" role=\"img\" aria-label=\"" << escape(c.title)
    << "\" font-family=\"system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif\">\n";
  o << "<title>" << escape(c.title) << "</title>\n";
  o << "<defs><clipPath id=\"" << clip << "\"><rect x=\"" << px(kLeft) << "\" y=\"" << px(kTop - 1) << "\" width=\""
    << px(right - kLeft) << "\" height=\"" << px(bottom - kTop + 2) << "\"/></clipPath></defs>\n";
  o << "<rect x=\"0\" y=\"0\" width=\"" << c.width << "\" height=\"" << c.height << "\" fill=\"#ffffff\"/>\n";
  o << "<text class=\"chart-title\" x=\"" << px(kLeft)
    << "\" y=\"24\" font-size=\"16\" font-weight=\"600\" fill=\"#111\">" << escape(c.title) << "</text>\n";

  // Grid, ticks and tick labels.
  o << "<g class=\"axis y-axis\" font-size=\"12\" fill=\"#333\">\n";
  const auto yt = c.y.log10 ? nice_ticks(y0, y1, 8, true) : nice_ticks(y0, y1, 8, c.y.integer);
  const double ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double t : yt) {
    const double y = sy(t);
    o << "<line x1=\"" << px(kLeft) << "\" x2=\"" << px(right) << "\" y1=\"" << px(y) << "\" y2=\"" << px(y)
      << "\" stroke=\"#e3e3e3\" stroke-width=\"1\"/>";
    o << "<text class=\"tick\" x=\"" << px(kLeft - 8) << "\" y=\"" << px(y + 4) << "\" text-anchor=\"end\">"
      << escape(c.y.log10 ? log10_label(t) : linear_label(t, ystep)) << "</text>\n";
  }
  o << "<text class=\"axis-label\" transform=\"translate(18," << px((kTop + bottom) / 2)
    << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">" << escape(c.y.label) << "</text>\n</g>\n";

  o << "<g class=\"axis x-axis\" font-size=\"12\" fill=\"#333\">\n";
  const auto xt = nice_ticks(x0, x1, 12, c.x.integer || has_bars);
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1;
  for (double t : xt) {
    const double x = sx(t);
    o << "<line x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << px(bottom) << "\" y2=\"" << px(bottom + 5)
      << "\" stroke=\"#555\"/>";
    o << "<text class=\"tick\" x=\"" << px(x) << "\" y=\"" << px(bottom + 19) << "\" text-anchor=\"middle\">"
      << escape(c.x.log10 ? log10_label(t) : linear_label(t, xstep)) << "</text>\n";
  }
  o << "<text class=\"axis-label\" x=\"" << px((kLeft + right) / 2) << "\" y=\"" << px(bottom + 42)
    << "\" text-anchor=\"middle\" font-size=\"13\">" << escape(c.x.label) << "</text>\n</g>\n";
  o << "<rect x=\"" << px(kLeft) << "\" y=\"" << px(kTop) << "\" width=\"" << px(right - kLeft) << "\" height=\""
    << px(bottom - kTop) << "\" fill=\"none\" stroke=\"#555\" stroke-width=\"1\"/>\n";

  // Series.
  std::size_t nbars = 0, bar_index = 0;
  for (const Series& s : c.series) nbars += s.style == SeriesStyle::bars;
  const double unit = std::abs(sx(x0 + 1) - sx(x0));
  for (const Series& s : c.series) {
    o << "<g class=\"series series-" << (s.style == SeriesStyle::bars ? "bars" : "line") << "\" id=\"" << c.id << '-'
      << s.id << "\" data-name=\"" << escape(s.name) << "\" clip-path=\"url(#" << clip << ")\">\n";
    if (s.style == SeriesStyle::bars) {
      const double bw = std::min(40.0, unit * 0.7 / static_cast<double>(std::max<std::size_t>(nbars, 1)));
      const double off = (static_cast<double>(bar_index) - (static_cast<double>(nbars) - 1) / 2) * bw;
      for (const Point& p : s.points) {
        if (!std::isfinite(p.y)) continue;
        const double top = sy(std::min(std::max(p.y, y0), y1));
        o << "<rect class=\"bar\" x=\"" << px(sx(p.x) + off - bw / 2) << "\" y=\"" << px(top) << "\" width=\"" << px(bw)
          << "\" height=\"" << px(std::max(0.0, bottom - top)) << "\" fill=\"" << escape(s.color) << "\"";
        if (!p.tip.empty()) {
          o << "><title>" << escape(p.tip) << "</title></rect>\n";
        } else {
          o << "/>\n";
        }
      }
      ++bar_index;
    } else {
      if (!s.band.empty()) {
        std::string d;
        for (const BandPoint& b : s.band)
          d += (d.empty() ? "M" : " L") + px(sx(b.x)) + ',' + px(sy(std::isfinite(b.hi) ? b.hi : y1));
        for (auto b = s.band.rbegin(); b != s.band.rend(); ++b)
          d += " L" + px(sx(b->x)) + ',' + px(sy(std::isfinite(b->lo) ? b->lo : y0));
        o << "<path class=\"band\" d=\"" << d << " Z\" fill=\"" << escape(s.color)
          << "\" fill-opacity=\"0.18\" stroke=\"none\"/>\n";
      }
      // The line joins consecutive measured values; upper bounds break it.
      std::string d;
      bool pen = false;
      for (const Point& p : s.points) {
        if (!std::isfinite(p.y) || p.mark == Mark::upper_bound) {
          pen = false;
          continue;
        }
        d += (pen ? " L" : (d.empty() ? "M" : " M")) + px(sx(p.x)) + ',' + px(sy(p.y));
        pen = true;
      }
      if (!d.empty())
        o << "<path class=\"line\" d=\"" << d << "\" fill=\"none\" stroke=\"" << escape(s.color) << "\" stroke-width=\""
          << px(s.line_width) << "\"" << (s.dashed ? " stroke-dasharray=\"7 5\"" : "") << "/>\n";
      for (const Point& p : s.points) {
        if (!std::isfinite(p.y)) continue;
        const double x = sx(p.x), y = sy(p.y);
        std::string tag;
        if (p.mark == Mark::upper_bound) {
          tag = "path";
          o << "<path class=\"upper-bound\" d=\"M" << px(x - 6) << ',' << px(y - 5) << " L" << px(x + 6) << ','
            << px(y - 5) << " L" << px(x) << ',' << px(y + 6) << " Z\" fill=\"" << escape(s.color) << "\"";
        } else if (s.dashed) {
          tag = "rect";
          o << "<rect class=\"point\" x=\"" << px(x - 3.5) << "\" y=\"" << px(y - 3.5)
            << "\" width=\"7\" height=\"7\" fill=\"#fff\" stroke=\"" << escape(s.color) << "\" stroke-width=\"1.8\"";
        } else {
          tag = "circle";
          o << "<circle class=\"point\" cx=\"" << px(x) << "\" cy=\"" << px(y) << "\" r=\"3.8\" fill=\""
            << escape(s.color) << "\"";
        }
        if (!p.tip.empty()) {
          o << "><title>" << escape(p.tip) << "</title></" << tag << ">\n";
        } else {
          o << "/>\n";
        }
      }
    }
    o << "</g>\n";
  }

  // Legend, right of the plot.
  o << "<g class=\"legend\" font-size=\"13\" fill=\"#222\">\n";
  double ly = kTop + 8;
  const double lx = right + 16;
  for (const Series& s : c.series) {
    o << "<g class=\"legend-item\" data-name=\"" << escape(s.name) << "\">";
    if (s.style == SeriesStyle::bars) {
      o << "<rect x=\"" << px(lx) << "\" y=\"" << px(ly - 6) << "\" width=\"22\" height=\"12\" fill=\""
        << escape(s.color) << "\"/>";
    } else {
      o << "<line x1=\"" << px(lx) << "\" x2=\"" << px(lx + 22) << "\" y1=\"" << px(ly) << "\" y2=\"" << px(ly)
        << "\" stroke=\"" << escape(s.color) << "\" stroke-width=\"2.2\""
        << (s.dashed ? " stroke-dasharray=\"7 5\"" : "") << "/>";
    }
    o << "<text x=\"" << px(lx + 30) << "\" y=\"" << px(ly + 4.5) << "\">" << escape(s.name) << "</text></g>\n";
    ly += 22;
  }
  if (any_bound) {
    ly += 6;
    o << "<g class=\"legend-item legend-upper-bound\"><path d=\"M" << px(lx + 5) << ',' << px(ly - 5) << " L"
      << px(lx + 17) << ',' << px(ly - 5) << " L" << px(lx + 11) << ',' << px(ly + 6) << " Z\" fill=\"#666\"/>"
      << "<text x=\"" << px(lx + 30) << "\" y=\"" << px(ly + 4.5) << "\">below resolution:</text>"
      << "<text x=\"" << px(lx + 30) << "\" y=\"" << px(ly + 20.5) << "\">value &lt; marker</text></g>\n";
  }
  o << "</g>\n";
  if (!c.note.empty())
    o << "<text class=\"note\" x=\"" << px(kLeft) << "\" y=\"" << px(H - 10) << "\" font-size=\"12\" fill=\"#555\">"
      << escape(c.note) << "</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace sanpath::svg

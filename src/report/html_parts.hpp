#pragma once
// Parts shared by the sections of the HTML report (html_report.cpp,
// html_effectiveness.cpp): chart points of reported quantities and the
// effectiveness section. Internal (not installed).
#include "sanpath/report/html_report.hpp"
#include "sanpath/report/svg_plot.hpp"

#include <cmath>
#include <optional>
#include <sstream>
#include <string>

namespace sanpath::html_parts {

/// log10 |x| of a reported quantity and how to mark it: a value below
/// resolution is drawn at its bound as an upper-bound mark.
inline svg::Point point_of(double x, const Quantity& q, const std::string& tip) {
  if (q.below_resolution) return {x, log10_abs(q.bound), svg::Mark::upper_bound, tip};
  return {x, log10_abs(q.value), svg::Mark::value, tip};
}

inline std::string digits_text(const std::optional<int>& d) { return d ? std::to_string(*d) : "–"; }

/// log10(mean − std) and log10(mean + std) of a batch statistic: the band
/// drawn around the mean (lo is −inf when mean − std ≤ 0). nullopt when the
/// standard deviation is unknown or below resolution.
inline std::optional<svg::BandPoint> band_of(double x, const BatchStatistic& s) {
  if (!s.stddev || s.stddev->below_resolution || s.mean.below_resolution) return std::nullopt;
  const BigReal lo = s.mean.value - s.stddev->value, hi = s.mean.value + s.stddev->value;
  return svg::BandPoint{x, lo > 0 ? log10_abs(lo) : -INFINITY, log10_abs(hi)};
}

/// Section 4: the network kept to its paths of length ≤ k (one input, or
/// the batch of r.effectiveness_batch / r.rerun_batch).
void effectiveness_section(std::ostringstream& o, const HtmlReport& r);

}  // namespace sanpath::html_parts

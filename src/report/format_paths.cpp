// Formatting of the path decomposition reports (path counts, length sums,
// enumerated terms, samples) as JSON, CSV and tables. No mathematics here:
// every number is already a Quantity or an exact count.
#include "sanpath/compute/path_graph.hpp"
#include "sanpath/report/format.hpp"
#include "report/json_parts.hpp"
#include "report/path_parts.hpp"
#include "report/provenance_text.hpp"
#include "report/text_table.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/rerun.hpp"
#include "report/model_line.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

namespace sanpath {

using nlohmann::ordered_json;

namespace {

using json_parts::model_json;
using json_parts::variant_json;
using path_parts::add_common;
using text_table::digits_text;
using path_parts::digits_value;
using path_parts::header_text;
using path_parts::intervals;

using text_table::columns;
using text_table::pad;


/// "0 - 3" (0-based heads, '-' for the skip connection).
std::string heads_text(const std::vector<int>& heads) {
  std::string s;
  for (std::size_t l = 0; l < heads.size(); ++l) {
    if (l) s += ' ';
    s += heads[l] < 0 ? std::string("-") : std::to_string(heads[l]);
  }
  return s;
}

ordered_json heads_json(const std::vector<int>& heads) {
  ordered_json a = ordered_json::array();
  for (int h : heads) a.push_back(h < 0 ? ordered_json(nullptr) : ordered_json(h));
  return a;
}

std::string tolerance_text(const PathReportBase& r) {
  return "tolerance 2^-" + std::to_string(r.bits() / 2) + " = " +
         to_sci(decomposition_tolerance(r.precision), 2);
}

/// The row's "digits" count the means and interval ends; the spread has its own.
ordered_json statistic_json(const SampleStatistic& s) {
  return {{"mean", s.mean.str()},
          {"stddev", s.stddev.str()},
          {"stddev_digits", digits_value(s.stddev.digits)},
          {"ci95", {s.low.str(), s.high.str()}}};
}

}  // namespace

// ------------------------------------------------------------ path counts

std::string format_path_counts(const PathGraphSpec& spec, const PathCounts& counts, Format f) {
  const PathGraphSize size = path_graph_size(spec);
  if (f == Format::json) {
    ordered_json j;
    j["total"] = to_decimal(counts.total);
    ordered_json by = ordered_json::array();
    for (std::size_t k = 0; k < counts.by_length.size(); ++k)
      by.push_back({{"length", k}, {"count", to_decimal(counts.by_length[k])}});
    j["by_length"] = by;
    j["layers"] = spec.layers;
    j["heads"] = spec.heads;
    j["skip"] = spec.skip ? "on" : "off";
    j["vertices"] = size.vertices;
    j["edges"] = size.edges;
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "length,count\n";
    for (std::size_t k = 0; k < counts.by_length.size(); ++k) o << k << ',' << to_decimal(counts.by_length[k]) << '\n';
    return o.str();
  }
  o << "head-path graph: L=" << spec.layers << " layers, H=" << spec.heads << " heads, skip "
    << (spec.skip ? "on" : "off") << "; " << size.vertices << " vertices, " << size.edges << " edges\n";
  o << "paths: " << to_decimal(counts.total) << (spec.skip ? "  (= (H+1)^L)" : "  (= H^L)") << "\n\n";
  o << pad("length", 8) << "paths (exact)\n";
  std::size_t omitted = 0;
  for (std::size_t k = 0; k < counts.by_length.size(); ++k) {
    if (counts.by_length[k] == 0) {
      ++omitted;
      continue;
    }
    o << pad(std::to_string(k), 8) << to_decimal(counts.by_length[k]) << "\n";
  }
  if (omitted) o << "(" << omitted << " lengths have no paths: without skip every path has length L)\n";
  return text_table::trim_line_ends(o.str());
}

// ------------------------------------------------------------ length sums

namespace {

/// "holds" or "FAILS", with "proven" when the error's enclosure is the evidence.
std::string verdict_text(const Quantity& error, const PathReportBase& r) {
  if (!decomposition_holds(error, r.precision)) return "FAILS";
  return r.check_method == CheckMethod::certified ? "holds, proven: the upper end of its enclosure" : "holds";
}

}  // namespace

std::string format_length_sums(const LengthSumsReport& r, const Model& model, const RunInfo& info, Format f) {
  if (f == Format::json) {
    ordered_json j;
    ordered_json rows = ordered_json::array();
    for (const LengthSumEntry& e : r.lengths) {
      ordered_json row = {{"length", e.length},
                          {"count", e.count},
                          {"norm", {{"frobenius", e.frobenius.str()}}},
                          {"residual", {{"composite", e.residual.str()}}},
                          {"share", e.share.str()},
                          {"digits", digits_value(e.digits)},
                          {"digits_by_quantity",
                           {{"frobenius", digits_value(e.frobenius.digits)},
                            {"residual", digits_value(e.residual.digits)},
                            {"share", digits_value(e.share.digits)}}}};
      if (e.frobenius.enclosure)
        row["intervals"] = intervals({{"frobenius", &e.frobenius}, {"residual", &e.residual}, {"share", &e.share}});
      rows.push_back(std::move(row));
    }
    j["length_sums"] = rows;
    j["decomposition_error"] = r.decomposition_error.str();
    j["decomposition_error_digits"] = digits_value(r.decomposition_error.digits);
    j["decomposition_tolerance"] = to_sci(decomposition_tolerance(r.precision), 2);
    j["decomposition_holds"] = decomposition_holds(r.decomposition_error, r.precision);
    j["total_paths"] = r.total_count;
    j["output_norm"] = {{"frobenius", r.output_frobenius.str()}};
    if (r.output_frobenius.enclosure)
      j["intervals"] = intervals({{"decomposition_error", &r.decomposition_error},
                                  {"output_frobenius", &r.output_frobenius}});
    add_common(j, r, model, info);
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "length,count,frobenius,residual_composite,share,digits\n";
    for (const LengthSumEntry& e : r.lengths)
      o << e.length << ',' << e.count << ',' << e.frobenius.str() << ',' << e.residual.str() << ',' << e.share.str()
        << ',' << (e.digits ? std::to_string(*e.digits) : "") << '\n';
    return o.str();
  }
  o << "Length sums S_k = Σ_{|path| = k} P_path X W_path (Theorem 2.1), without enumerating paths\n";
  o << header_text(r, model, info);
  o << "paths: " << r.total_count
    << "; share = ‖S_k‖_F / ‖X^L‖_F with ‖X^L‖_F = " << r.output_frobenius.shown()
    << "\n\n";
  o << pad("length", 8) << pad("‖S_k‖_F", 26) << pad("‖res(S_k)‖_{1,∞}", 26) << pad("share", 26) << pad("digits", 13)
    << "paths (exact)\n";
  for (const LengthSumEntry& e : r.lengths)
    o << pad(std::to_string(e.length), 8) << pad(e.frobenius.shown(), 26) << pad(e.residual.shown(), 26)
      << pad(e.share.shown(), 26) << pad(digits_text(text_table::shown_least(e.digits, e.share)), 13) << e.count
      << "\n";
  bool cut = false;
  for (const LengthSumEntry& e : r.lengths)
    cut = cut || text_table::cut(e.frobenius) || text_table::cut(e.residual) || text_table::cut(e.share);
  if (!r.lengths.empty()) o << text_table::cut_note(cut, r.lengths.front().share);
  o << "\ndecomposition error max|Σ_k S_k + 1bᵀ − X^L| / max|X^L| = " << r.decomposition_error.shown() << " ("
    << verdict_text(r.decomposition_error, r) << ", " << tolerance_text(r) << ")\n";
  return text_table::trim_line_ends(o.str());
}

// ------------------------------------------------------------ enumeration

std::string format_enumeration(const PathEnumerationReport& r, const Model& model, const RunInfo& info, Format f) {
  if (f == Format::json) {
    ordered_json j;
    ordered_json rows = ordered_json::array();
    for (const PathTermEntry& e : r.paths) {
      ordered_json row = {{"heads", heads_json(e.heads)},
                          {"length", e.length},
                          {"term_norm", {{"frobenius", e.norm_frobenius.str()}, {"composite", e.norm_composite.str()}}},
                          {"term_residual", {{"composite", e.residual_composite.str()}}},
                          {"stochastic_residual", {{"composite", e.stochastic_residual.str()}}},
                          {"digits", digits_value(e.digits)}};
      if (e.norm_composite.enclosure)
        row["intervals"] = intervals({{"term_norm_frobenius", &e.norm_frobenius},
                                      {"term_norm_composite", &e.norm_composite},
                                      {"term_residual_composite", &e.residual_composite},
                                      {"stochastic_residual_composite", &e.stochastic_residual}});
      rows.push_back(std::move(row));
    }
    j["paths"] = rows;
    if (r.decomposition_error) {
      j["decomposition_error"] = r.decomposition_error->str();
      j["decomposition_error_digits"] = digits_value(r.decomposition_error->digits);
      j["decomposition_tolerance"] = to_sci(decomposition_tolerance(r.precision), 2);
      j["decomposition_holds"] = decomposition_holds(*r.decomposition_error, r.precision);
      if (r.decomposition_error->enclosure)
        j["intervals"] = intervals({{"decomposition_error", &*r.decomposition_error}});
    }
    if (r.selected_at) j["selected_at_bits"] = r.selected_at->bits;
    j["walked_paths"] = r.walked;
    j["total_paths"] = r.total_count;
    j["all_paths"] = r.all_paths;
    j["top"] = r.request.top_k;
    if (r.search)
      j["search"] = {{"method", "branch and bound"},
                     {"nodes", r.search->nodes},
                     {"skipped_children", r.search->skipped},
                     {"leaves", r.search->leaves}};
    add_common(j, r, model, info);
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    for (int l = 1; l <= r.layers; ++l) o << 'h' << l << ',';
    o << "length,norm_frobenius,norm_composite,residual_composite,stochastic_residual,digits\n";
    for (const PathTermEntry& e : r.paths) {
      for (int h : e.heads) {
        if (h >= 0) o << h;
        o << ',';
      }
      o << e.length << ',' << e.norm_frobenius.str() << ',' << e.norm_composite.str() << ','
        << e.residual_composite.str() << ',' << e.stochastic_residual.str() << ','
        << (e.digits ? std::to_string(*e.digits) : "") << '\n';
    }
    return o.str();
  }
  o << "Path terms T = P_path X W_path (Theorem 2.1)\n";
  o << header_text(r, model, info);
  o << "paths: " << r.walked << " of " << r.total_count << " pass the filter";
  if (r.request.top_k > 0) {
    o << "; the " << std::min<std::size_t>(r.request.top_k, r.paths.size()) << " of largest ‖T‖_{1,∞} shown";
    if (r.selected_at) o << " (selected at " << r.selected_at->name() << ", their values proven)";
  }
  if (r.search)
    o << "\nbranch and bound: " << r.search->nodes << " tree nodes formed, " << r.search->skipped
      << " children skipped by their bound, " << r.search->leaves << " paths evaluated";
  o << "\nheads per layer are 0-based, '-' is the skip connection\n\n";
  std::size_t hw = columns("heads") + 2;
  for (const PathTermEntry& e : r.paths) hw = std::max(hw, columns(heads_text(e.heads)) + 2);
  o << pad("heads", hw) << pad("length", 8) << pad("‖T‖_{1,∞}", 26) << pad("‖T‖_F", 26) << pad("‖res(T)‖_{1,∞}", 26)
    << pad("‖res(P)‖_{1,∞}", 26) << "digits\n";
  for (const PathTermEntry& e : r.paths)
    o << pad(heads_text(e.heads), hw) << pad(std::to_string(e.length), 8) << pad(e.norm_composite.shown(), 26)
      << pad(e.norm_frobenius.shown(), 26) << pad(e.residual_composite.shown(), 26)
      << pad(e.stochastic_residual.shown(), 26)
      << digits_text(text_table::shown_least(e.digits, e.norm_composite)) << "\n";
  bool cut = false;
  for (const PathTermEntry& e : r.paths)
    for (const Quantity* q : {&e.norm_composite, &e.norm_frobenius, &e.residual_composite, &e.stochastic_residual})
      cut = cut || text_table::cut(*q);
  if (!r.paths.empty()) o << text_table::cut_note(cut, r.paths.front().norm_composite);
  if (r.decomposition_error)
    o << "\ndecomposition error max|Σ_paths T + 1bᵀ − X^L| / max|X^L| = " << r.decomposition_error->shown() << " ("
      << verdict_text(*r.decomposition_error, r) << ", " << tolerance_text(r) << ")\n";
  else
    o << "\n(no decomposition error: not every path passes the filter)\n";
  return text_table::trim_line_ends(o.str());
}

// --------------------------------------------------------------- sampling

std::string format_samples(const PathSampleReport& r, const Model& model, const RunInfo& info, Format f) {
  if (f == Format::json) {
    ordered_json j;
    ordered_json rows = ordered_json::array();
    for (const LengthSampleEntry& e : r.lengths)
      rows.push_back({{"length", e.length},
                      {"samples", e.samples},
                      {"population", e.population},
                      {"term_norm", {{"composite", statistic_json(e.norm)}}},
                      {"term_residual", {{"composite", statistic_json(e.residual)}}},
                      {"digits", digits_value(e.digits)}});
    j["samples"] = rows;
    j["seed"] = r.seed;
    add_common(j, r, model, info);
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "length,samples,population,norm_mean,norm_stddev,norm_ci95_low,norm_ci95_high,residual_mean,"
         "residual_stddev,residual_ci95_low,residual_ci95_high,digits,norm_stddev_digits,residual_stddev_digits\n";
    for (const LengthSampleEntry& e : r.lengths)
      o << e.length << ',' << e.samples << ',' << e.population << ',' << e.norm.mean.str() << ',' << e.norm.stddev.str()
        << ',' << e.norm.low.str() << ',' << e.norm.high.str() << ',' << e.residual.mean.str() << ','
        << e.residual.stddev.str() << ',' << e.residual.low.str() << ',' << e.residual.high.str() << ','
        << (e.digits ? std::to_string(*e.digits) : "") << ','
        << (e.norm.stddev.digits ? std::to_string(*e.norm.stddev.digits) : "") << ','
        << (e.residual.stddev.digits ? std::to_string(*e.residual.stddev.digits) : "") << '\n';
    return o.str();
  }
  o << "Random path terms T = P_path X W_path, uniform among the paths of each length\n";
  o << header_text(r, model, info);
  o << "seed " << r.seed << "; mean and 95% confidence interval of the mean (normal approximation)\n\n";
  o << pad("length", 8) << pad("samples", 9) << pad("mean ‖T‖_{1,∞}", 26) << pad("95% CI", 52)
    << pad("mean ‖res(T)‖_{1,∞}", 26) << pad("95% CI", 52) << pad("digits", 13) << "paths of this length\n";
  for (const LengthSampleEntry& e : r.lengths)
    o << pad(std::to_string(e.length), 8) << pad(std::to_string(e.samples), 9) << pad(e.norm.mean.shown(), 26)
      << pad("[" + e.norm.low.shown() + ", " + e.norm.high.shown() + "]", 52) << pad(e.residual.mean.shown(), 26)
      << pad("[" + e.residual.low.shown() + ", " + e.residual.high.shown() + "]", 52)
      << pad(digits_text(text_table::shown_least(e.digits, e.norm.mean)), 13)
      << e.population << "\n";
  bool cut = false;
  for (const LengthSampleEntry& e : r.lengths)
    for (const Quantity* q :
         {&e.norm.mean, &e.norm.low, &e.norm.high, &e.residual.mean, &e.residual.low, &e.residual.high})
      cut = cut || text_table::cut(*q);
  if (!r.lengths.empty()) o << text_table::cut_note(cut, r.lengths.front().norm.mean);
  return text_table::trim_line_ends(o.str());
}

}  // namespace sanpath

// ------------------------------------------------------------ batch of sums

namespace sanpath {

std::string format_length_sums_batch(const BatchLengthSums& b, const std::vector<InputSpec>& inputs,
                                     const Model& model, const RunInfo& info, Format f) {
  using json_parts::statistic_json;
  const LengthSumsReport& first = b.runs.front();
  if (f == Format::json) {
    ordered_json j;
    j["model"] = model_json(model, info);
    j["input"] = info.input;
    j["batch"] = b.runs.size();
    j["variant"] = variant_json(first.variant);
    j["statistics"] = json_parts::statistics_text;
    ordered_json rows = ordered_json::array();
    for (std::size_t k = 0; k < b.lengths.size(); ++k)
      rows.push_back({{"length", k}, {"count", first.lengths[k].count}, {"share", statistic_json(b.lengths[k])}});
    j["lengths"] = rows;
    j["decomposition_error"] = statistic_json(b.decomposition_error);
    j["inputs"] = json_parts::each_input_json(b.runs, inputs, info, [&](const LengthSumsReport& r, const RunInfo& i) {
      return format_length_sums(r, model, i, Format::json);
    });
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "length,count,share_mean,share_stddev,share_min,share_median,share_max,share_digits\n";
    for (std::size_t k = 0; k < b.lengths.size(); ++k) {
      const BatchStatistic& s = b.lengths[k];
      o << k << ',' << first.lengths[k].count << ',' << s.mean.str() << ',' << (s.stddev ? s.stddev->str() : "")
        << ',' << s.min.str() << ',' << s.median.str() << ',' << s.max.str() << ','
        << (s.mean.digits ? std::to_string(*s.mean.digits) : "") << '\n';
    }
    return o.str();
  }
  std::vector<long> bits;
  bool confirmed = true, proven = true;
  for (const LengthSumsReport& r : b.runs) {
    bits.push_back(provenance_text::bits_of(r.precision));
    confirmed = confirmed && r.check.has_value();
    proven = proven && r.check_method == CheckMethod::certified;
  }
  o << "Length sums S_k = Σ_{|path| = k} P_path X W_path (Theorem 2.1) over a batch of " << b.runs.size()
    << " inputs\n";
  o << report_text::model_line(info.model, model.arch());
  o << "input: " << info.input << "\n";
  o << "variant: " << to_string(first.variant) << "\n";
  o << json_parts::batch_precision_range(bits, confirmed, proven) << "\n";
  o << "share = ‖S_k‖_F / ‖X^L‖_F of each input; " << json_parts::statistics_text
    << "; digits of the mean in brackets\n\n";
  o << pad("length", 8) << pad("share (mean ± std)", 34) << pad("min", 14) << pad("median", 14) << pad("max", 14)
    << "paths (exact)\n";
  for (std::size_t k = 0; k < b.lengths.size(); ++k) {
    o << pad(std::to_string(k), 8) << pad(mean_std_cell(b.lengths[k]), 34);
    for (const std::string& c : json_parts::min_median_max_cells(b.lengths[k])) o << pad(c, 14);
    o << first.lengths[k].count << "\n";
  }
  o << "\ndecomposition error max|Σ_k S_k + 1bᵀ − X^L| / max|X^L|, largest over the inputs: "
    << b.decomposition_error.max.shown() << "\n";
  return text_table::trim_line_ends(o.str());
}

}  // namespace sanpath

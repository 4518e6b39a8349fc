#include "sanpath/report/format.hpp"
#include "sanpath/analysis/double_check.hpp"
#include "report/json_parts.hpp"
#include "report/provenance_text.hpp"
#include "report/text_table.hpp"
#include "report/model_line.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace sanpath {

using nlohmann::ordered_json;

Format parse_format(const std::string& t) {
  if (t == "table") return Format::table;
  if (t == "json") return Format::json;
  if (t == "csv") return Format::csv;
  throw std::invalid_argument("format: '" + t + "' is not one of table, json, csv");
}

namespace {

using json_parts::model_json;
using json_parts::optional_digits_json;
using json_parts::variant_json;

ordered_json precision_json(const ForwardAnalysis& a) {
  return provenance_text::json(a, provenance_text::View::forward);
}

/// Confirmed digits of every quantity of a layer (null: no check run).
ordered_json quantity_digits_json(const LayerReport& r) {
  ordered_json j = {{"residual_composite", optional_digits_json(r.res_composite.digits)},
                    {"residual_one", optional_digits_json(r.res_one.digits)},
                    {"residual_inf", optional_digits_json(r.res_inf.digits)},
                    {"residual_frobenius", optional_digits_json(r.res_frobenius.digits)},
                    {"norm_composite", optional_digits_json(r.norm_composite.digits)},
                    {"norm_frobenius", optional_digits_json(r.norm_frobenius.digits)},
                    {"relative_residual", optional_digits_json(r.relative_residual.digits)}};
  if (r.res_composite_lower) j["residual_composite_lower"] = optional_digits_json(r.res_composite_lower->digits);
  for (const MeasureReport& m : r.measures) j[m.name] = optional_digits_json(m.value.digits);
  return j;
}

/// The measures of a layer (math.md §9), by name; absent without --measures.
void add_measures_json(ordered_json& layer, const LayerReport& r) {
  if (r.measures.empty()) return;
  ordered_json m = ordered_json::object();
  for (const MeasureReport& x : r.measures) m[x.name] = x.value.str();
  layer["measures"] = m;
}

/// The measure columns of a forward table or CSV: every name any layer reports, in order.
std::vector<std::string> measure_columns(const std::vector<LayerReport>& layers) {
  std::vector<std::string> names;
  for (const LayerReport& r : layers)
    for (const MeasureReport& m : r.measures)
      if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
  // Keep report order (layer 0 lacks the attention measures, which come last).
  std::vector<std::string> ordered;
  for (const std::string& n : measure_value_names(MeasureSet::all(), true))
    if (std::find(names.begin(), names.end(), n) != names.end()) ordered.push_back(n);
  return ordered;
}

/// Layer r's measure `name`, or nullptr when it has none (layer 0's attention measures).
const Quantity* find_measure(const LayerReport& r, const std::string& name) {
  for (const MeasureReport& m : r.measures)
    if (m.name == name) return &m.value;
  return nullptr;
}

const std::optional<int>* find_correct(const EmulatedLayerReport& r, const std::string& name) {
  for (const auto& [n, d] : r.correct_digits)
    if (n == name) return &d;
  return nullptr;
}

/// The emulated model (--emulate): per layer its relative residual and
/// measures, their confirmed digits and their digits correct against the
/// exact values; the first layer where each has none left; the overflow.
ordered_json emulation_json(const EmulationReport& e) {
  ordered_json j;
  j["format"] = to_string(e.format);
  j["rule"] = "math.md §9: weights, biases and X^0 rounded to the format, products accumulated in fp32 and rounded "
              "once, every other operation computed in fp32 and rounded to the format; the emulated values' residuals "
              "and measures computed exactly";
  j["overflow"] = e.overflow ? ordered_json(*e.overflow) : ordered_json(nullptr);
  ordered_json first = ordered_json::object();
  for (const auto& [name, layer] : e.first_layer_without_digit)
    first[name] = layer ? ordered_json(*layer) : ordered_json(nullptr);
  j["first_layer_without_correct_digit"] = first;
  ordered_json layers = ordered_json::array();
  for (const EmulatedLayerReport& r : e.layers) {
    ordered_json L = {{"layer", r.layer}};
    if (r.non_finite) {
      L["non_finite"] = true;
      layers.push_back(L);
      continue;
    }
    L["relative_residual"] = r.relative_residual.str();
    ordered_json digits = {{"relative_residual", optional_digits_json(r.relative_residual.digits)}};
    if (!r.measures.empty()) {
      ordered_json m = ordered_json::object();
      for (const MeasureReport& x : r.measures) {
        m[x.name] = x.value.str();
        digits[x.name] = optional_digits_json(x.value.digits);
      }
      L["measures"] = m;
    }
    L["digits_by_quantity"] = digits;
    ordered_json correct = ordered_json::object();
    for (const auto& [name, d] : r.correct_digits) correct[name] = optional_digits_json(d);
    L["correct_digits"] = correct;
    layers.push_back(L);
  }
  j["layers"] = layers;
  return j;
}

std::string correct_text(const std::optional<int>* d) {
  if (d == nullptr || !*d) return "?";
  return std::to_string(**d);
}

/// "bf16 value [digits] {correct}" of one emulated quantity.
std::string emulated_cell(const Quantity& q, const std::optional<int>* correct) {
  return text_table::with_digits(q) + " {" + correct_text(correct) + "}";
}

/// The lines that close an emulation table: where each quantity lost its last correct digit, and the overflow.
std::string emulation_footer(const EmulationReport& e) {
  std::string s = "first layer without a correct digit:";
  bool any = false;
  for (const auto& [name, layer] : e.first_layer_without_digit) {
    s += std::string(any ? "," : "") + " " + name + " " + (layer ? std::to_string(*layer) : "none");
    any = true;
  }
  s += "; overflow: " + (e.overflow ? *e.overflow : std::string("none")) + "\n";
  return s;
}

/// The emulation table of one forward analysis: a row per layer, the relative
/// residual and every measure of the emulated model.
std::string emulation_table(const EmulationReport& e, const std::vector<std::string>& measures) {
  std::vector<std::string> names = {"relative_residual"};
  names.insert(names.end(), measures.begin(), measures.end());
  const auto cell = [&](const EmulatedLayerReport& r, const std::string& name) -> std::string {
    if (r.non_finite) return "non-finite";
    if (name == "relative_residual") return emulated_cell(r.relative_residual, find_correct(r, name));
    for (const MeasureReport& m : r.measures)
      if (m.name == name) return emulated_cell(m.value, find_correct(r, name));
    return "–";
  };
  std::vector<std::size_t> width;
  for (const std::string& n : names) {
    std::size_t w = text_table::columns(n) + 2;
    for (const EmulatedLayerReport& r : e.layers) w = std::max(w, text_table::columns(cell(r, n)) + 2);
    width.push_back(w);
  }
  std::ostringstream o;
  o << to_string(e.format) << " emulation (math.md §9): the model evaluated as a " << to_string(e.format)
    << " framework would, its values measured exactly; " << text_table::brackets_text
    << "; digits that agree with the exact model in braces\n";
  o << text_table::pad("layer", 7);
  for (std::size_t i = 0; i < names.size(); ++i) o << text_table::pad(names[i], width[i]);
  o << "\n";
  for (const EmulatedLayerReport& r : e.layers) {
    o << text_table::pad(std::to_string(r.layer), 7);
    for (std::size_t i = 0; i < names.size(); ++i) o << text_table::pad(cell(r, names[i]), width[i]);
    o << "\n";
  }
  o << emulation_footer(e);
  return o.str();
}

/// Certified runs: each quantity's enclosure [lo, hi] (enclosure_text).
ordered_json intervals_json(const LayerReport& r) {
  ordered_json j = ordered_json::object();
  const auto add = [&](const char* name, const Quantity& q) {
    if (const auto t = enclosure_text(q)) j[name] = {t->first, t->second};
  };
  add("residual_composite", r.res_composite);
  add("residual_one", r.res_one);
  add("residual_inf", r.res_inf);
  add("residual_frobenius", r.res_frobenius);
  add("norm_composite", r.norm_composite);
  add("norm_frobenius", r.norm_frobenius);
  add("relative_residual", r.relative_residual);
  if (r.res_composite_lower) add("residual_composite_lower", *r.res_composite_lower);
  return j;
}

ordered_json layer_json(const LayerReport& r) {
  ordered_json res = {{"composite", r.res_composite.str()},
                      {"one", r.res_one.str()},
                      {"inf", r.res_inf.str()},
                      {"frobenius", r.res_frobenius.str()}};
  if (r.res_composite_lower) res["composite_lower"] = r.res_composite_lower->str();
  ordered_json j = {{"layer", r.layer},
                    {"residual", res},
                    {"norm", {{"composite", r.norm_composite.str()}, {"frobenius", r.norm_frobenius.str()}}},
                    {"relative_residual", r.relative_residual.str()}};
  add_measures_json(j, r);
  j["digits"] = optional_digits_json(r.digits);
  j["digits_by_quantity"] = quantity_digits_json(r);
  if (r.relative_residual.enclosure) j["intervals"] = intervals_json(r);
  return j;
}

using text_table::digits_text;

/// One row per layer, one column per measure (math.md §9), each value with
/// its digits printed in brackets; "–" where a layer has no such measure.
std::string measures_table(const std::vector<LayerReport>& layers, const std::vector<std::string>& names) {
  const auto cell = [](const Quantity* q) { return q == nullptr ? std::string("–") : text_table::with_digits(*q); };
  std::vector<std::size_t> width;
  for (const std::string& n : names) {
    std::size_t w = text_table::columns(n) + 2;
    for (const LayerReport& r : layers) w = std::max(w, text_table::columns(cell(find_measure(r, n))) + 2);
    width.push_back(w);
  }
  std::ostringstream o;
  o << "measures (math.md §9); " << text_table::brackets_text << ":\n";
  o << text_table::pad("layer", 7);
  for (std::size_t i = 0; i < names.size(); ++i) o << text_table::pad(names[i], width[i]);
  o << "\n";
  for (const LayerReport& r : layers) {
    o << text_table::pad(std::to_string(r.layer), 7);
    for (std::size_t i = 0; i < names.size(); ++i) o << text_table::pad(cell(find_measure(r, names[i])), width[i]);
    o << "\n";
  }
  return o.str();
}

std::string precision_line(const ForwardAnalysis& a) { return provenance_text::line(a, provenance_text::View::forward); }

using text_table::pad;

}  // namespace

std::string format_forward(const ForwardAnalysis& a, const Model& model, const RunInfo& info, Format f) {
  if (f == Format::json) {
    ordered_json j;
    j["model"] = model_json(model, info);
    j["input"] = info.input;
    j.update(precision_json(a));
    j["variant"] = variant_json(a.variant);
    j["center"] = to_string(a.center);
    ordered_json layers = ordered_json::array();
    for (const LayerReport& r : a.layers) layers.push_back(layer_json(r));
    j["layers"] = layers;
    if (a.emulation) j["emulation"] = emulation_json(*a.emulation);
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  const std::vector<std::string> measures = measure_columns(a.layers);
  if (f == Format::csv) {
    o << "layer,residual_composite,residual_one,residual_inf,residual_frobenius,norm_composite,norm_frobenius,"
         "relative_residual";
    for (const std::string& m : measures) o << ',' << m;
    o << ",digits\n";
    for (const LayerReport& r : a.layers) {
      o << r.layer << ',' << r.res_composite.str() << ',' << r.res_one.str() << ',' << r.res_inf.str() << ','
        << r.res_frobenius.str() << ',' << r.norm_composite.str() << ',' << r.norm_frobenius.str() << ','
        << r.relative_residual.str();
      for (const std::string& m : measures) {
        const Quantity* q = find_measure(r, m);
        o << ',' << (q ? q->str() : std::string());
      }
      o << ',' << (r.digits ? std::to_string(*r.digits) : "") << '\n';
    }
    return o.str();
  }
  o << report_text::model_line(info.model, model.arch(), {false, false, false, model.streamed()});
  o << "input: " << info.input << "\n";
  o << "variant: " << to_string(a.variant) << ", centre: " << to_string(a.center) << "\n";
  o << precision_line(a) << "\n\n";
  // Columns as wide as their values (26 at least): --digits may ask for many.
  std::vector<std::string> rel, res, norm;
  for (const LayerReport& r : a.layers) {
    rel.push_back(r.relative_residual.shown());
    res.push_back(r.res_composite.shown());
    norm.push_back(r.norm_composite.shown());
  }
  const std::size_t w_rel = text_table::width_of(rel, 26), w_res = text_table::width_of(res, 26),
                    w_norm = text_table::width_of(norm, 26);
  o << pad("layer", 7) << pad("relative residual", w_rel) << pad("residual ‖·‖_{1,∞}", w_res + 2)
    << pad("‖X‖_{1,∞}", w_norm) << "digits\n";
  for (std::size_t i = 0; i < a.layers.size(); ++i)
    o << pad(std::to_string(a.layers[i].layer), 7) << pad(rel[i], w_rel) << pad(res[i], w_res) << pad(norm[i], w_norm)
      << digits_text(text_table::shown_least(a.layers[i].digits, a.layers[i].relative_residual)) << "\n";
  bool cut = false;
  for (const LayerReport& r : a.layers)
    for (const Quantity* q : {&r.relative_residual, &r.res_composite, &r.norm_composite})
      cut = cut || text_table::cut(*q);
  if (!a.layers.empty()) o << text_table::cut_note(cut, a.layers.front().relative_residual);
  if (!measures.empty()) o << "\n" << measures_table(a.layers, measures);
  if (a.emulation) o << "\n" << emulation_table(*a.emulation, measures);
  if (a.center == Center::optimal)
    o << "\noptimal centre: the residual column is the upper end of the enclosure; lower ends in --format json\n";
  return text_table::trim_line_ends(o.str());
}

std::string describe(const Model& model) {
  return report_text::model_description(model.source(), model.arch(), {true, true, true, model.streamed()});
}

std::string describe(CollapseConventions c, LayerNormKind paper_norm) {
  if (c == CollapseConventions::paper && paper_norm != LayerNormKind::post)
    return "paper (Figure 2's curves; this model's family allows its own norm placement only, so SAN = Attn(LN_1(X)), "
           "SAN+MLP and SAN+skip keep layernorm " + to_string(paper_norm) + "; transformer = the model as trained)";
  if (c == CollapseConventions::paper)
    return "paper (Figure 2: SAN = LN_1(Attn(X)), i.e. layernorm post with mlp none: LN_1 only, no LN_2; SAN+MLP "
           "and SAN+skip with layernorm post; transformer = the model as trained)";
  return "theory (SAN without LayerNorm, as in the theorems; --conventions paper for Figure 2's)";
}

namespace {

/// The first lines of every collapse table: experiment, model, input, conventions.
void collapse_header(std::ostringstream& o, const Model& model, const RunInfo& info, CollapseConventions c) {
  o << "Rank collapse, the paper's Section 4 experiment (Dong, Cordonnier & Loukas, ICML 2021)\n";
  o << report_text::model_line(info.model, model.arch(), {true, true, false, model.streamed()});
  o << "input: " << info.input << "\n";
  o << "conventions: " << describe(c, paper_layernorm(model.arch())) << "\n";
}

}  // namespace

std::string format_collapse(const CollapseResult& r, const Model& model, const RunInfo& info, Format f) {
  if (f == Format::json) {
    ordered_json j;
    j["model"] = model_json(model, info);
    j["input"] = info.input;
    j["conventions"] = to_string(r.conventions);
    ordered_json vs = ordered_json::array();
    for (std::size_t i = 0; i < r.variants.size(); ++i) {
      const ForwardAnalysis& a = r.analyses[i];
      ordered_json v = {{"name", r.variants[i].name}, {"variant", variant_json(a.variant)}};
      v.update(precision_json(a));
      ordered_json layers = ordered_json::array();
      for (const LayerReport& lr : a.layers) layers.push_back(layer_json(lr));
      v["layers"] = layers;
      if (a.emulation) v["emulation"] = emulation_json(*a.emulation);
      vs.push_back(v);
    }
    j["variants"] = vs;
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  std::vector<LayerReport> every_layer;  // the measure columns any variant reports
  for (const ForwardAnalysis& a : r.analyses) every_layer.insert(every_layer.end(), a.layers.begin(), a.layers.end());
  const std::vector<std::string> measures = measure_columns(every_layer);
  if (f == Format::csv) {
    o << "variant,layer,relative_residual";
    for (const std::string& m : measures) o << ',' << m;
    o << ",digits,precision_bits\n";
    for (std::size_t i = 0; i < r.variants.size(); ++i)
      for (const LayerReport& lr : r.analyses[i].layers) {
        o << r.variants[i].name << ',' << lr.layer << ',' << lr.relative_residual.str();
        for (const std::string& m : measures) {
          const Quantity* q = find_measure(lr, m);
          o << ',' << (q ? q->str() : std::string());
        }
        o << ',' << (lr.digits ? std::to_string(*lr.digits) : "") << ',' << r.analyses[i].precision.bits << '\n';
      }
    return o.str();
  }
  collapse_header(o, model, info, r.conventions);
  const std::size_t rows = r.analyses.empty() ? 0 : r.analyses[0].layers.size();
  // One table of layers × variants, `cell(a, l)` the text of analysis a's layer l.
  const auto grid = [&](const std::function<std::string(const ForwardAnalysis&, std::size_t)>& cell) {
    std::size_t width = 30;  // wider when an exponent needs it (deep collapses)
    for (const ForwardAnalysis& a : r.analyses)
      for (std::size_t l = 0; l < rows; ++l) width = std::max(width, text_table::columns(cell(a, l)) + 2);
    o << pad("layer", 7);
    for (const NamedVariant& v : r.variants) o << pad(v.name, width);
    o << "\n";
    for (std::size_t l = 0; l < rows; ++l) {
      o << pad(std::to_string(l), 7);
      for (const ForwardAnalysis& a : r.analyses) o << pad(cell(a, l), width);
      o << "\n";
    }
    o << "\n";
  };
  // The quantity `of` gives each layer, every printed number with its own
  // confirmed digits (as in the HTML report).
  const auto table = [&](const std::function<const Quantity*(const LayerReport&)>& of) {
    grid([&](const ForwardAnalysis& a, std::size_t l) {
      const Quantity* q = l < a.layers.size() ? of(a.layers[l]) : nullptr;
      return q == nullptr ? std::string("–") : text_table::with_digits(*q);
    });
  };
  const bool proven = !r.analyses.empty() && std::all_of(r.analyses.begin(), r.analyses.end(), [](const ForwardAnalysis& a) {
    return a.check_method == CheckMethod::certified;
  });
  o << "relative residual ‖X − 1 mean(X)ᵀ‖_{1,∞} / ‖X‖_{1,∞} per layer; "
    << (proven ? text_table::brackets_proven_text : text_table::brackets_text) << "\n\n";
  table([](const LayerReport& lr) { return &lr.relative_residual; });
  for (const std::string& m : measures) {
    o << m << " (math.md §9) per layer\n\n";
    table([&](const LayerReport& lr) { return find_measure(lr, m); });
  }
  if (!r.analyses.empty() && r.analyses.front().emulation) {
    const EmulationReport& e0 = *r.analyses.front().emulation;
    o << to_string(e0.format) << " emulation (math.md §9): relative residual of the model evaluated as a "
      << to_string(e0.format)
      << " framework would, measured exactly; " << text_table::brackets_text
      << "; digits that agree with the exact model in braces; every measure in --format json\n\n";
    grid([&](const ForwardAnalysis& a, std::size_t l) -> std::string {
      if (!a.emulation || l >= a.emulation->layers.size()) return "–";
      const EmulatedLayerReport& er = a.emulation->layers[l];
      if (er.non_finite) return "non-finite";
      return emulated_cell(er.relative_residual, find_correct(er, "relative_residual"));
    });
    for (std::size_t i = 0; i < r.variants.size(); ++i)
      if (r.analyses[i].emulation) o << pad(r.variants[i].name + ":", 10) << emulation_footer(*r.analyses[i].emulation);
    o << "\n";
  }
  for (std::size_t i = 0; i < r.variants.size(); ++i)
    o << pad(r.variants[i].name + ":", 10) << to_string(r.variants[i].variant) << "; " << precision_line(r.analyses[i])
      << "\n";
  return text_table::trim_line_ends(o.str());
}

namespace {

using json_parts::statistic_json;

using json_parts::statistics_text;

/// At most `digits` significant digits of q (a table cell; JSON has them all).
std::string short_str(Quantity q, int digits) {
  limit_digits(q, digits);
  return q.shown();
}

/// "128 bits" or "128–257 bits (by input)", with how digits were confirmed.
std::string batch_precision_text(const std::vector<const ForwardAnalysis*>& runs) {
  long lo = 0, hi = 0;
  bool confirmed = true, proven = !runs.empty(), ceiling = false;
  for (const ForwardAnalysis* a : runs) {
    const long b = provenance_text::bits_of(a->precision);
    lo = lo == 0 ? b : std::min(lo, b);
    hi = std::max(hi, b);
    confirmed = confirmed && a->check.has_value();
    proven = proven && a->check_method == CheckMethod::certified;
    ceiling = ceiling || a->ceiling_reached;
  }
  std::string s = "precision: " + (lo == hi ? std::to_string(lo) + " bits" : std::to_string(lo) + "–" +
                                                                               std::to_string(hi) + " bits (by input)");
  s += proven      ? ", digits proven per input: every value enclosed by ball arithmetic (math.md §10)"
       : confirmed ? ", digits confirmed per input by a run one tier up"
                   : ", not every input confirmed";
  if (ceiling) s += "; CEILING REACHED for some input: its smallest residuals are not resolved";
  return s;
}

ordered_json input_run_json(const ForwardAnalysis& a, const InputSpec& in) {
  ordered_json j;
  j["input"] = in.describe();
  j.update(precision_json(a));
  ordered_json layers = ordered_json::array();
  for (const LayerReport& r : a.layers) layers.push_back(layer_json(r));
  j["layers"] = layers;
  if (a.emulation) j["emulation"] = emulation_json(*a.emulation);
  return j;
}

/// measures[l] (may be empty: no measures asked) beside each layer's statistics.
ordered_json statistics_layers_json(const std::vector<BatchStatistic>& layers,
                                    const std::vector<std::vector<MeasureStatistic>>& measures) {
  ordered_json out = ordered_json::array();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    ordered_json j = {{"layer", l}, {"relative_residual", statistic_json(layers[l])}};
    if (l < measures.size() && !measures[l].empty()) {
      ordered_json m = ordered_json::object();
      for (const MeasureStatistic& x : measures[l]) m[x.name] = statistic_json(x.statistic);
      j["measures"] = m;
    }
    out.push_back(j);
  }
  return out;
}

/// The names of the measures any layer of `measures` has, in report order.
std::vector<std::string> measure_statistic_names(const std::vector<std::vector<MeasureStatistic>>& measures) {
  std::vector<std::string> out;
  for (const std::string& n : measure_value_names(MeasureSet::all(), true))
    for (const std::vector<MeasureStatistic>& layer : measures)
      if (std::any_of(layer.begin(), layer.end(), [&](const MeasureStatistic& m) { return m.name == n; }) &&
          std::find(out.begin(), out.end(), n) == out.end())
        out.push_back(n);
  return out;
}

const BatchStatistic* find_statistic(const std::vector<MeasureStatistic>& layer, const std::string& name) {
  for (const MeasureStatistic& m : layer)
    if (m.name == name) return &m.statistic;
  return nullptr;
}

std::string statistics_csv_row(const BatchStatistic& s) {
  return s.mean.str() + ',' + (s.stddev ? s.stddev->str() : std::string()) + ',' + s.min.str() + ',' +
         s.median.str() + ',' + s.max.str() + ',' + (s.mean.digits ? std::to_string(*s.mean.digits) : std::string());
}

}  // namespace

std::string mean_std_cell(const BatchStatistic& s) {
  Quantity mean = s.mean;
  limit_digits(mean, 5);
  const std::optional<int> d = mean.shown_digits();
  std::string cell = mean.shown();
  if (s.stddev) cell += " ± " + short_str(*s.stddev, 2);
  return cell + " [" + (d ? std::to_string(*d) : std::string("?")) + "]";
}

std::string format_forward_batch(const BatchForwardAnalysis& a, const std::vector<InputSpec>& inputs,
                                 const Model& model, const RunInfo& info, Format f) {
  const Variant& variant = a.runs.front().variant;
  const Center center = a.runs.front().center;
  if (f == Format::json) {
    ordered_json j;
    j["model"] = model_json(model, info);
    j["input"] = info.input;
    j["batch"] = a.runs.size();
    j["variant"] = variant_json(variant);
    j["center"] = to_string(center);
    j["statistics"] = statistics_text;
    j["layers"] = statistics_layers_json(a.layers, a.measures);
    ordered_json runs = ordered_json::array();
    for (std::size_t i = 0; i < a.runs.size(); ++i) runs.push_back(input_run_json(a.runs[i], inputs[i]));
    j["inputs"] = runs;
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  const std::vector<std::string> measures = measure_statistic_names(a.measures);
  if (f == Format::csv) {
    // With measures, a first column says which quantity a row summarises.
    if (measures.empty()) {
      o << "layer,mean,stddev,min,median,max,digits\n";
      for (std::size_t l = 0; l < a.layers.size(); ++l) o << l << ',' << statistics_csv_row(a.layers[l]) << '\n';
      return o.str();
    }
    o << "quantity,layer,mean,stddev,min,median,max,digits\n";
    for (std::size_t l = 0; l < a.layers.size(); ++l)
      o << "relative_residual," << l << ',' << statistics_csv_row(a.layers[l]) << '\n';
    for (const std::string& m : measures)
      for (std::size_t l = 0; l < a.measures.size(); ++l)
        if (const BatchStatistic* st = find_statistic(a.measures[l], m))
          o << m << ',' << l << ',' << statistics_csv_row(*st) << '\n';
    return o.str();
  }
  std::vector<const ForwardAnalysis*> runs;
  for (const ForwardAnalysis& r : a.runs) runs.push_back(&r);
  o << report_text::model_line(info.model, model.arch(), {false, false, false, model.streamed()});
  o << "input: " << info.input << "\n";
  o << "variant: " << to_string(variant) << ", centre: " << to_string(center) << "\n";
  o << batch_precision_text(runs) << "\n";
  o << "relative residual ‖res(X)‖_{1,∞}/‖X‖_{1,∞} " << statistics_text << "; digits of the mean in brackets\n\n";
  o << pad("layer", 7) << pad("mean ± std", 34) << pad("min", 14) << pad("median", 14) << "max\n";
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    const BatchStatistic& s = a.layers[l];
    o << pad(std::to_string(l), 7) << pad(mean_std_cell(s), 34) << pad(short_str(s.min, 5), 14)
      << pad(short_str(s.median, 5), 14) << short_str(s.max, 5) << "\n";
  }
  if (!measures.empty()) {
    o << "\nmeasures (math.md §9), mean ± std over the inputs; digits of the mean in brackets\n";
    o << pad("layer", 7);
    for (const std::string& m : measures) o << pad(m, 34);
    o << "\n";
    for (std::size_t l = 0; l < a.measures.size(); ++l) {
      o << pad(std::to_string(l), 7);
      for (const std::string& m : measures) {
        const BatchStatistic* st = find_statistic(a.measures[l], m);
        o << pad(st ? mean_std_cell(*st) : "–", 34);
      }
      o << "\n";
    }
  }
  o << "\nevery input's own values (and the unabridged statistics) in --format json\n";
  return text_table::trim_line_ends(o.str());
}

std::string format_collapse_batch(const BatchCollapseResult& r, const std::vector<InputSpec>& inputs,
                                  const Model& model, const RunInfo& info, Format f) {
  if (f == Format::json) {
    ordered_json j;
    j["model"] = model_json(model, info);
    j["input"] = info.input;
    j["batch"] = r.runs.size();
    j["conventions"] = to_string(r.conventions);
    j["statistics"] = statistics_text;
    ordered_json vs = ordered_json::array();
    for (std::size_t v = 0; v < r.variants.size(); ++v) {
      ordered_json runs = ordered_json::array();
      for (std::size_t i = 0; i < r.runs.size(); ++i) runs.push_back(input_run_json(r.runs[i].analyses[v], inputs[i]));
      vs.push_back({{"name", r.variants[v].name},
                    {"variant", variant_json(r.variants[v].variant)},
                    {"layers", statistics_layers_json(r.layers[v], r.measures[v])},
                    {"inputs", runs}});
    }
    j["variants"] = vs;
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  std::vector<std::vector<MeasureStatistic>> every_layer;  // the measures any variant reports
  for (const auto& v : r.measures) every_layer.insert(every_layer.end(), v.begin(), v.end());
  const std::vector<std::string> measures = measure_statistic_names(every_layer);
  if (f == Format::csv) {
    // With measures, a column says which quantity a row summarises.
    o << (measures.empty() ? "variant,layer,mean,stddev,min,median,max,digits\n"
                           : "variant,quantity,layer,mean,stddev,min,median,max,digits\n");
    for (std::size_t v = 0; v < r.variants.size(); ++v)
      for (std::size_t l = 0; l < r.layers[v].size(); ++l)
        o << r.variants[v].name << ',' << (measures.empty() ? "" : "relative_residual,") << l << ','
          << statistics_csv_row(r.layers[v][l]) << '\n';
    for (const std::string& m : measures)
      for (std::size_t v = 0; v < r.variants.size(); ++v)
        for (std::size_t l = 0; l < r.measures[v].size(); ++l)
          if (const BatchStatistic* st = find_statistic(r.measures[v][l], m))
            o << r.variants[v].name << ',' << m << ',' << l << ',' << statistics_csv_row(*st) << '\n';
    return o.str();
  }
  collapse_header(o, model, info, r.conventions);
  o << "relative residual ‖X − 1 mean(X)ᵀ‖_{1,∞} / ‖X‖_{1,∞} per layer, mean ± sample standard deviation over "
    << r.runs.size() << " inputs; digits of the mean in brackets; min, median, max in --format json\n\n";
  o << pad("layer", 7);
  for (const NamedVariant& v : r.variants) o << pad(v.name, 34);
  o << "\n";
  const std::size_t rows = r.layers.empty() ? 0 : r.layers.front().size();
  for (std::size_t l = 0; l < rows; ++l) {
    o << pad(std::to_string(l), 7);
    for (const std::vector<BatchStatistic>& v : r.layers) o << pad(mean_std_cell(v[l]), 34);
    o << "\n";
  }
  o << "\n";
  for (const std::string& m : measures) {
    o << m << " (math.md §9) per layer, mean ± std over the inputs\n\n" << pad("layer", 7);
    for (const NamedVariant& v : r.variants) o << pad(v.name, 34);
    o << "\n";
    for (std::size_t l = 0; l < rows; ++l) {
      o << pad(std::to_string(l), 7);
      for (const auto& v : r.measures) {
        const BatchStatistic* st = l < v.size() ? find_statistic(v[l], m) : nullptr;
        o << pad(st ? mean_std_cell(*st) : "–", 34);
      }
      o << "\n";
    }
    o << "\n";
  }
  if (!r.emulated.empty()) {
    const std::string format = to_string(r.runs.front().analyses.front().emulation->format);
    o << format << " emulation (math.md §9): relative residual of the model evaluated as a " << format
      << " framework would, measured exactly, mean ± std over the inputs; digits of the mean in brackets, the least "
         "digits of any input that agree with the exact model in braces; every input's measures in --format json\n\n"
      << pad("layer", 7);
    for (const NamedVariant& v : r.variants) o << pad(v.name, 38);
    o << "\n";
    for (std::size_t l = 0; l < rows; ++l) {
      o << pad(std::to_string(l), 7);
      for (std::size_t v = 0; v < r.emulated.size(); ++v) {
        const std::optional<BatchStatistic>& st = r.emulated[v][l];
        const std::optional<int>& c = r.emulated_correct[v][l];
        o << pad(st ? mean_std_cell(*st) + " {" + (c ? std::to_string(*c) : std::string("?")) + "}" : "non-finite", 38);
      }
      o << "\n";
    }
    o << "\n";
  }
  for (std::size_t v = 0; v < r.variants.size(); ++v) {
    std::vector<const ForwardAnalysis*> runs;
    for (const CollapseResult& c : r.runs) runs.push_back(&c.analyses[v]);
    o << pad(r.variants[v].name + ":", 13) << to_string(r.variants[v].variant) << "; " << batch_precision_text(runs)
      << "\n";
  }
  return text_table::trim_line_ends(o.str());
}

}  // namespace sanpath

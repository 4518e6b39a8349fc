#include "sanpath/report/format.hpp"
#include "sanpath/analysis/double_check.hpp"
#include "report/json_parts.hpp"
#include "report/text_table.hpp"

#include <nlohmann/json.hpp>

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

std::string describe(const Variant& v) {
  return "skip=" + std::string(v.skip ? "on" : "off") + " mlp=" + to_string(v.mlp) +
         " layernorm=" + to_string(v.layernorm) + " mask=" + to_string(v.mask);
}

namespace {

using json_parts::model_json;
using json_parts::variant_json;

ordered_json digits_json(const std::optional<int>& d) { return d ? ordered_json(*d) : ordered_json(nullptr); }

ordered_json precision_json(const ForwardAnalysis& a) {
  ordered_json j;
  j["precision_bits"] = a.precision.native_double ? 53 : a.precision.bits;
  j["precision"] = a.precision.name();
  j["check_precision_bits"] = a.check ? ordered_json(a.check->native_double ? 53 : a.check->bits) : ordered_json(nullptr);
  j["check_method"] = a.check ? ordered_json(to_string(a.check_method)) : ordered_json(nullptr);
  j["tried_bits"] = a.tried_bits;
  j["ceiling_reached"] = a.ceiling_reached;
  return j;
}

/// Confirmed digits of every quantity of a layer (null: no check run).
ordered_json quantity_digits_json(const LayerReport& r) {
  ordered_json j = {{"residual_composite", digits_json(r.res_composite.digits)},
                    {"residual_one", digits_json(r.res_one.digits)},
                    {"residual_inf", digits_json(r.res_inf.digits)},
                    {"residual_frobenius", digits_json(r.res_frobenius.digits)},
                    {"norm_composite", digits_json(r.norm_composite.digits)},
                    {"norm_frobenius", digits_json(r.norm_frobenius.digits)},
                    {"relative_residual", digits_json(r.relative_residual.digits)}};
  if (r.res_composite_lower) j["residual_composite_lower"] = digits_json(r.res_composite_lower->digits);
  return j;
}

ordered_json layer_json(const LayerReport& r) {
  ordered_json res = {{"composite", r.res_composite.str()},
                      {"one", r.res_one.str()},
                      {"inf", r.res_inf.str()},
                      {"frobenius", r.res_frobenius.str()}};
  if (r.res_composite_lower) res["composite_lower"] = r.res_composite_lower->str();
  return {{"layer", r.layer},
          {"residual", res},
          {"norm", {{"composite", r.norm_composite.str()}, {"frobenius", r.norm_frobenius.str()}}},
          {"relative_residual", r.relative_residual.str()},
          {"digits", digits_json(r.digits)},
          {"digits_by_quantity", quantity_digits_json(r)}};
}

std::string digits_text(const std::optional<int>& d) { return d ? std::to_string(*d) : "unconfirmed"; }

std::string precision_line(const ForwardAnalysis& a) {
  std::string s = "precision: " + a.precision.name();
  if (a.check && a.check_method == CheckMethod::rounding)
    s += ", digits confirmed by double runs rounded upward and downward (margin 10x)";
  else if (a.check)
    s += ", digits confirmed by a run at " + a.check->name();
  else
    s += ", no confirming run (digits unconfirmed)";
  if (a.tried_bits.size() > 1) {
    s += "; auto tried";
    for (long b : a.tried_bits) s += " " + std::to_string(b);
    s += " bits";
  }
  if (a.ceiling_reached) s += "; CEILING REACHED: the smallest residuals are not resolved";
  return s;
}

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
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "layer,residual_composite,residual_one,residual_inf,residual_frobenius,norm_composite,norm_frobenius,"
         "relative_residual,digits\n";
    for (const LayerReport& r : a.layers)
      o << r.layer << ',' << r.res_composite.str() << ',' << r.res_one.str() << ',' << r.res_inf.str() << ','
        << r.res_frobenius.str() << ',' << r.norm_composite.str() << ',' << r.norm_frobenius.str() << ','
        << r.relative_residual.str() << ',' << (r.digits ? std::to_string(*r.digits) : "") << '\n';
    return o.str();
  }
  o << "model: " << info.model << " (L=" << model.arch().layers << ", H=" << model.arch().heads
    << ", d=" << model.arch().d_model << ")\n";
  o << "input: " << info.input << "\n";
  o << "variant: " << describe(a.variant) << ", centre: " << to_string(a.center) << "\n";
  o << precision_line(a) << "\n\n";
  o << pad("layer", 7) << pad("relative residual", 26) << pad("residual ‖·‖_{1,∞}", 28) << pad("‖X‖_{1,∞}", 26)
    << "digits\n";
  for (const LayerReport& r : a.layers)
    o << pad(std::to_string(r.layer), 7) << pad(r.relative_residual.str(), 26) << pad(r.res_composite.str(), 26)
      << pad(r.norm_composite.str(), 26) << digits_text(r.digits) << "\n";
  if (a.center == Center::optimal)
    o << "\noptimal centre: the residual column is the upper end of the enclosure; lower ends in --format json\n";
  return text_table::trim_line_ends(o.str());
}

std::string format_collapse(const CollapseResult& r, const Model& model, const RunInfo& info, Format f) {
  if (f == Format::json) {
    ordered_json j;
    j["model"] = model_json(model, info);
    j["input"] = info.input;
    ordered_json vs = ordered_json::array();
    for (std::size_t i = 0; i < r.variants.size(); ++i) {
      const ForwardAnalysis& a = r.analyses[i];
      ordered_json v = {{"name", r.variants[i].name}, {"variant", variant_json(a.variant)}};
      v.update(precision_json(a));
      ordered_json layers = ordered_json::array();
      for (const LayerReport& lr : a.layers) layers.push_back(layer_json(lr));
      v["layers"] = layers;
      vs.push_back(v);
    }
    j["variants"] = vs;
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "variant,layer,relative_residual,digits,precision_bits\n";
    for (std::size_t i = 0; i < r.variants.size(); ++i)
      for (const LayerReport& lr : r.analyses[i].layers)
        o << r.variants[i].name << ',' << lr.layer << ',' << lr.relative_residual.str() << ','
          << (lr.digits ? std::to_string(*lr.digits) : "") << ',' << r.analyses[i].precision.bits << '\n';
    return o.str();
  }
  o << "Rank collapse, the paper's Section 4 experiment (Dong, Cordonnier & Loukas, ICML 2021)\n";
  o << "model: " << info.model << " (L=" << model.arch().layers << ", H=" << model.arch().heads
    << ", d=" << model.arch().d_model << ", d_qk=" << model.arch().d_qk << ", d_ff=" << model.arch().d_ff << ")\n";
  o << "input: " << info.input << "\n";
  o << "relative residual ‖X − 1 mean(X)ᵀ‖_{1,∞} / ‖X‖_{1,∞} per layer; digits confirmed in brackets\n\n";
  o << pad("layer", 7);
  for (const NamedVariant& v : r.variants) o << pad(v.name, 30);
  o << "\n";
  const std::size_t rows = r.analyses.empty() ? 0 : r.analyses[0].layers.size();
  for (std::size_t l = 0; l < rows; ++l) {
    o << pad(std::to_string(l), 7);
    for (const ForwardAnalysis& a : r.analyses) {
      const LayerReport& lr = a.layers[l];
      std::string cell = lr.relative_residual.str();
      // The printed number's own confirmed digits (as in the HTML report).
      const std::optional<int>& dg = lr.relative_residual.digits;
      cell += " [" + (dg ? std::to_string(*dg) : std::string("?")) + "]";
      o << pad(cell, 30);
    }
    o << "\n";
  }
  o << "\n";
  for (std::size_t i = 0; i < r.variants.size(); ++i)
    o << pad(r.variants[i].name + ":", 10) << describe(r.variants[i].variant) << "; " << precision_line(r.analyses[i])
      << "\n";
  return text_table::trim_line_ends(o.str());
}

}  // namespace sanpath

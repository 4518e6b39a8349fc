#pragma once
// Parts shared by the formatters of the path reports (format_paths.cpp,
// format_effectiveness.cpp): the fields and header lines every path report
// has. Internal (not installed).
#include "report/json_parts.hpp"
#include "report/provenance_text.hpp"
#include "sanpath/analysis/paths.hpp"
#include "report/model_line.hpp"

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>

namespace sanpath::path_parts {

using nlohmann::ordered_json;

inline ordered_json digits_value(const std::optional<int>& d) { return d ? ordered_json(*d) : ordered_json(nullptr); }

/// Certified runs: each quantity's enclosure [lo, hi] (enclosure_text).
inline ordered_json intervals(std::initializer_list<std::pair<const char*, const Quantity*>> qs) {
  ordered_json iv = ordered_json::object();
  for (const auto& [name, q] : qs)
    if (const auto t = enclosure_text(*q)) iv[name] = {t->first, t->second};
  return iv;
}

/// The fields every path report shares, appended after its own.
inline void add_common(ordered_json& j, const PathReportBase& r, const Model& model, const RunInfo& info) {
  j.update(provenance_text::json(r, provenance_text::View::paths));
  j["variant"] = json_parts::variant_json(r.variant);
  j["model"] = json_parts::model_json(model, info);
  j["input"] = info.input;
  j["tokens"] = r.tokens;
}

inline std::string header_text(const PathReportBase& r, const Model& model, const RunInfo& info) {
  std::ostringstream o;
  o << report_text::model_line(info.model, model.arch());
  o << "input: " << info.input << "\n";
  o << "variant: " << to_string(r.variant) << "\n";
  o << provenance_text::line(r, provenance_text::View::paths) << "\n";
  return o.str();
}

}  // namespace sanpath::path_parts

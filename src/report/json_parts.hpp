#pragma once
// JSON objects shared by the formatters (format*.cpp): the variant and the
// model, the same in every command's output. Internal (not installed).
#include "sanpath/report/format.hpp"
#include "sanpath/model/model.hpp"

#include <nlohmann/json.hpp>

namespace sanpath::json_parts {

using ordered_json = nlohmann::ordered_json;

inline ordered_json variant_json(const Variant& v) {
  return {{"skip", v.skip ? "on" : "off"},
          {"mlp", to_string(v.mlp)},
          {"layernorm", to_string(v.layernorm)},
          {"mask", to_string(v.mask)}};
}

/// The model: where it came from, its shape and its own structure.
inline ordered_json model_json(const Model& m, const RunInfo& info) {
  const Architecture& a = m.arch();
  return {{"source", info.model}, {"layers", a.layers}, {"heads", a.heads},   {"d_model", a.d_model},
          {"d_qk", a.d_qk},       {"d_v", a.d_v},       {"d_ff", a.d_ff},     {"activation", to_string(a.activation)},
          {"shared_layers", a.shared_layers},           {"own_variant", variant_json(a.variant)}};
}

/// Significant digits, or null when unconfirmed.
inline ordered_json optional_digits_json(const std::optional<int>& d) { return d ? ordered_json(*d) : ordered_json(nullptr); }

/// {"mean", "stddev", "min", "median", "max", "digits": {…}} of a batch.hpp statistic.
inline ordered_json statistic_json(const BatchStatistic& s) {
  const ordered_json null = nullptr;
  return {{"mean", s.mean.str()},
          {"stddev", s.stddev ? ordered_json(s.stddev->str()) : null},
          {"min", s.min.str()},
          {"median", s.median.str()},
          {"max", s.max.str()},
          {"digits",
           {{"mean", optional_digits_json(s.mean.digits)},
            {"stddev", s.stddev ? optional_digits_json(s.stddev->digits) : null},
            {"min", optional_digits_json(s.min.digits)},
            {"median", optional_digits_json(s.median.digits)},
            {"max", optional_digits_json(s.max.digits)}}}};
}

}  // namespace sanpath::json_parts

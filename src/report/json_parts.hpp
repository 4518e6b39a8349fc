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

}  // namespace sanpath::json_parts

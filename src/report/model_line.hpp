#pragma once
// The "model: …" line that opens every text report, written once.
// Internal (not installed).
#include "sanpath/model/model.hpp"

#include <string>

namespace sanpath::report_text {

/// Sizes a report states beyond L, H and d.
struct ModelSizes {
  bool d_qk = false;
  bool d_ff = false;
  bool shared_layers = false;  ///< ", shared layers" for a model whose layers share one set of weights
  bool streamed = false;       ///< "; layers streamed from the checkpoint" (Model::streamed)
};

/// "<name> (L=…, H=…[, H_kv=…], d=…[, d_qk=…][, d_ff=…][, shared layers][; layers streamed from the
/// checkpoint])": the model as every report names it.
/// H_kv is stated for grouped-query attention (fewer key/value heads than
/// heads), whatever `sizes` asks.
inline std::string model_description(const std::string& name, const Architecture& a, ModelSizes sizes = {}) {
  std::string s = name + " (L=" + std::to_string(a.layers) + ", H=" + std::to_string(a.heads);
  if (a.key_value_heads() != a.heads) s += ", H_kv=" + std::to_string(a.key_value_heads());
  s += ", d=" + std::to_string(a.d_model);
  if (sizes.d_qk) s += ", d_qk=" + std::to_string(a.d_qk);
  if (sizes.d_ff) s += ", d_ff=" + std::to_string(a.d_ff);
  if (sizes.shared_layers && a.shared_layers) s += ", shared layers";
  if (const std::string notes = structure_notes(a); !notes.empty()) s += "; " + notes;
  if (sizes.streamed) s += "; layers streamed from the checkpoint";
  return s + ")";
}

/// "model: " + model_description + "\n", the line that opens every text report.
inline std::string model_line(const std::string& name, const Architecture& a, ModelSizes sizes = {}) {
  return "model: " + model_description(name, a, sizes) + "\n";
}

}  // namespace sanpath::report_text

#pragma once
/// \file format.hpp
/// Report formatting: JSON, CSV and plain-text tables of the analyses. The
/// last stage of the data flow; no mathematics here. Every high-precision
/// number is a decimal string (Quantity::str()).

#include "sanpath/analysis.hpp"
#include "sanpath/experiment.hpp"
#include "sanpath/model.hpp"

#include <string>

namespace sanpath {

enum class Format { table, json, csv };
/// "table|json|csv"; throws std::invalid_argument.
Format parse_format(const std::string& text);

/// Describes the analysed setting in reports.
struct RunInfo {
  std::string model;  ///< where the model came from
  std::string input;  ///< InputSpec::describe()
};

std::string format_forward(const ForwardAnalysis& a, const Model& model, const RunInfo& info, Format f);
std::string format_collapse(const CollapseResult& r, const Model& model, const RunInfo& info, Format f);

/// "skip=off mlp=none layernorm=none mask=none".
std::string describe(const Variant& v);

}  // namespace sanpath

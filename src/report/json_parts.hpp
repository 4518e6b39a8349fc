#pragma once
// JSON objects shared by the formatters (format*.cpp): the variant and the
// model, the same in every command's output. Internal (not installed).
#include "sanpath/report/format.hpp"
#include "sanpath/model/model.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

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
          {"shared_layers", a.shared_layers},           {"own_variant", variant_json(a.variant)},
          {"layers_streamed", m.streamed()}};
}

/// What the statistics of a batch are (printed with every batch result).
inline const char* const statistics_text =
    "over the batch: mean, sample standard deviation (divisor b-1), min, median, max of each input's own value";

/// A statistic's min, median and max as table cells, each with at most 5 significant digits.
inline std::vector<std::string> min_median_max_cells(const BatchStatistic& s) {
  std::vector<std::string> cells;
  for (Quantity q : {s.min, s.median, s.max}) {
    limit_digits(q, 5);
    cells.push_back(q.shown());
  }
  return cells;
}

/// "precision: 128 bits" or "precision: 128–257 bits (by input)" of a batch
/// whose inputs ran at `bits`, and whether every input was proven by
/// enclosures (certified runs) or else confirmed by a check run.
inline std::string batch_precision_range(const std::vector<long>& bits, bool all_confirmed, bool all_proven) {
  long lo = bits.empty() ? 0 : bits.front(), hi = lo;
  for (long b : bits) {
    lo = std::min(lo, b);
    hi = std::max(hi, b);
  }
  std::string s = "precision: " + (lo == hi ? std::to_string(lo) + " bits"
                                            : std::to_string(lo) + "–" + std::to_string(hi) + " bits (by input)");
  return s + (all_proven      ? ", digits proven per input: every value enclosed by ball arithmetic (math.md §10)"
              : all_confirmed ? ", digits confirmed per input by a run one tier up"
                              : ", not every input confirmed");
}

/// Each input's own result of a batch: format_json(run, info of that input)
/// (its single-run JSON), without the model (the batch prints it once).
template <class Run, class F>
ordered_json each_input_json(const std::vector<Run>& runs, const std::vector<InputSpec>& inputs, const RunInfo& info,
                             F&& format_json) {
  ordered_json out = ordered_json::array();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    ordered_json one = ordered_json::parse(format_json(runs[i], RunInfo{info.model, inputs[i].describe(), info.head_absence}));
    one.erase("model");
    out.push_back(std::move(one));
  }
  return out;
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

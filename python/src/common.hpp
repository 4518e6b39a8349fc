#pragma once
// What the binding files of sanpath._sanpath share: numbers as Python sees
// them, array and option conversions, and the result holders that format
// themselves through the library's report formatters. No mathematics here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "sanpath/analysis/bounds.hpp"
#include "sanpath/analysis/collapse.hpp"
#include "sanpath/analysis/double_check.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/compute/path_graph.hpp"
#include "sanpath/core/linalg.hpp"  // check_thread_count
#include "sanpath/io/task_head.hpp"
#include "sanpath/report/format.hpp"

#include <algorithm>
#include <cfloat>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sanpath_py {

namespace py = pybind11;
using namespace sanpath;
using ModelPtr = std::shared_ptr<Model>;

// ------------------------------------------------------------------ numbers

/// A reported high-precision number (Quantity) as Python sees it.
struct Number {
  Quantity q;

  std::string str() const { return q.str(); }
  /// Decimal with up to `n` significant digits, never more than confirmed.
  std::string decimal(std::optional<int> n) const {
    if (q.below_resolution) throw std::domain_error("below resolution: only the bound " + q.str() + " is known");
    int digits = q.digits.value_or(17);
    if (n) digits = std::min(digits, *n);
    return to_sci(q.value, std::max(digits, 1), q.rounding);
  }
  double to_float() const {
    if (q.below_resolution)
      throw std::domain_error("below resolution: only the bound " + q.str() + " is known (see .bound)");
    const BigReal a = abs(q.value);
    if (a == 0) return 0.0;
    if (a > BigReal(DBL_MAX, 17) || a < BigReal(DBL_MIN, 17))
      throw std::overflow_error(q.str() + " is outside the range of a double (use .log10, str() or .mpf())");
    return q.value.convert_to<double>();
  }
  std::optional<double> log10_abs() const {
    if (q.below_resolution || q.value == 0) return std::nullopt;
    return static_cast<double>(log10(abs(q.value)).convert_to<double>());
  }
};

inline Number number(const Quantity& q) { return Number{q}; }
inline std::optional<Number> number(const std::optional<Quantity>& q) {
  if (!q) return std::nullopt;
  return Number{*q};
}

inline py::int_ exact_int(const std::string& decimal) {
  PyObject* v = PyLong_FromString(decimal.c_str(), nullptr, 10);
  if (!v) throw py::error_already_set();
  return py::reinterpret_steal<py::int_>(v);
}
inline py::int_ exact_int(const BigInt& x) { return exact_int(to_decimal(x)); }

// ------------------------------------------------------------- conversions

/// Runs a library parse or check of the value of a CLI option, its error
/// message prefixed with the option as the CLI prints it ("--method: ...").
template <class F> auto as_option(const std::string& option, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(option + ": " + e.what());
  }
}

inline VariantOverride overrides(const std::optional<std::string>& skip, const std::optional<std::string>& mlp,
                                 const std::optional<std::string>& layernorm,
                                 const std::optional<std::string>& mask) {
  VariantOverride o;
  if (skip) o.skip = parse_on_off(*skip, "skip");
  if (mlp) o.mlp = parse_mlp(*mlp);
  if (layernorm) o.layernorm = parse_layernorm(*layernorm);
  if (mask) o.mask = parse_mask(*mask);
  return o;
}

/// The request of --precision, --digits, --max-bits, --no-confirm (confirm =
/// false), --method (nullopt: the request's default), --check, --measures and --emulate.
inline PrecisionRequest precision_request(const std::string& precision, int digits, std::optional<long> max_bits,
                                          bool confirm, const std::optional<std::string>& method,
                                          const std::string& check, const std::string& measures = "none",
                                          const std::optional<std::string>& emulate = std::nullopt) {
  PrecisionRequest r = as_option("--precision", [&] { return PrecisionRequest::parse(precision); });
  // The ranges the CLI enforces, by the same library checks and with its messages.
  r.target_digits = as_option("--digits", [&] { return PrecisionRequest::checked_digits(digits); });
  r.max_bits = as_option("--max-bits", [&] { return PrecisionRequest::checked_max_bits(max_bits.value_or(0)); });
  r.confirm = confirm;
  if (method) r.method = as_option("--method", [&] { return parse_method(*method); });
  r.check = as_option("--check", [&] { return parse_check_method(check); });
  r.measures = as_option("--measures", [&] { return MeasureSet::parse(measures); });
  if (emulate) r.emulate = as_option("--emulate", [&] { return parse_emulated_format(*emulate); });
  return r;
}

/// Refuses a --check that does not apply to the request's precision or `center` (as the CLI).
inline void check_applies(const PrecisionRequest& r, Center center) {
  as_option("--check", [&] {
    return uses_rounding_check(r.check, r.automatic ? Precision::at_least(128) : r.fixed, center);
  });
}

/// Refuses a --check that the analyses of `scope` cannot honour (as the CLI: require_check).
inline void check_honoured(const PrecisionRequest& r, CheckScope scope) {
  as_option("--check", [&] {
    require_check(r.check, scope);
    return 0;
  });
}

inline CollapseConventions conventions_of(const std::string& text) {
  return as_option("--conventions", [&] { return parse_conventions(text, "conventions"); });
}

/// As the CLI: a model loaded from a checkpoint brings its task head (the
/// effectiveness curves); models from arrays or random weights have none.
inline std::optional<TaskHead> task_head_of(const Model& model) {
  if (!std::filesystem::exists(model.source())) return std::nullopt;
  return read_task_head(model.source(), model);
}

/// Refuses a negative --threads with the CLI's message.
inline void check_threads(int threads) { sanpath::check_thread_count(threads); }

/// Each input's description (InputSpec::describe), in order.
inline std::vector<std::string> descriptions(const std::vector<InputSpec>& inputs) {
  std::vector<std::string> out;
  for (const InputSpec& in : inputs) out.push_back(in.describe());
  return out;
}

inline py::dict variant_dict(const Variant& v) {
  py::dict d;
  d["skip"] = v.skip;
  d["mlp"] = to_string(v.mlp);
  d["layernorm"] = to_string(v.layernorm);
  d["mask"] = to_string(v.mask);
  return d;
}

inline std::optional<std::string> precision_name(const std::optional<Precision>& p) {
  if (!p) return std::nullopt;
  return p->name();
}

// ----------------------------------------------------------------- results

/// What every result keeps to format itself as the CLI does.
struct Formatted {
  ModelPtr model;
  RunInfo info;
};

/// Each input's own result (holder One of report runs[i]) of a batch result,
/// formatted with the batch's model and input i's description.
template <class One, class Report>
std::vector<One> per_input(const Formatted& batch, const std::vector<InputSpec>& inputs,
                           const std::vector<Report>& runs) {
  std::vector<One> out;
  for (std::size_t i = 0; i < runs.size(); ++i)
    out.push_back(One{{batch.model, {batch.info.model, inputs[i].describe(), batch.info.head_absence}}, runs[i]});
  return out;
}

struct ForwardResult : Formatted {
  ForwardAnalysis a;
  std::string format(const std::string& f) const { return format_forward(a, *model, info, parse_format(f)); }
};
struct CollapseResultPy : Formatted {
  CollapseResult r;
  std::string format(const std::string& f) const { return format_collapse(r, *model, info, parse_format(f)); }
};
struct BoundsResult : Formatted {
  BoundsAnalysis a;
  std::string format(const std::string& f) const { return format_bounds(a, *model, info, parse_format(f)); }
};

/// Several inputs as the CLI's batch options give them, with the CLI's
/// description of the batch (printed as the result's "input").
struct Batch {
  std::vector<InputSpec> inputs;
  std::string description;
};

// Registration of the binding files (each adds its functions and classes to the module).
void register_batches(py::module_& m);
void register_effectiveness(py::module_& m);
void register_emulate(py::module_& m);
void register_search(py::module_& m);

}  // namespace sanpath_py

// Path effectiveness (`sanpath paths --effectiveness`, analysis/paths.hpp):
// the network truncated to its paths of length ≤ k, k = 0..L; over a batch
// (analysis/effectiveness_batch.hpp); with `--rerun N`, also the paper's
// re-run sub-networks (analysis/rerun.hpp), on one input or a batch.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "sanpath/analysis/effectiveness_batch.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/rerun.hpp"
#include "sanpath/core/resources.hpp"

#include "common.hpp"
#include "run.hpp"

namespace sanpath_py {

namespace {

struct EffectivenessResult : Formatted {
  EffectivenessReport r;
  std::string format(const std::string& f) const {
    return format_effectiveness(r, *model, info, parse_format(f));
  }
};

struct EffectivenessBatchResult : Formatted {
  BatchEffectiveness b;
  std::vector<InputSpec> inputs;
  std::string format(const std::string& f) const {
    return format_effectiveness_batch(b, inputs, *model, info, parse_format(f));
  }
};

struct RerunResult : Formatted {
  RerunReport r;
  std::string format(const std::string& f) const { return format_rerun(r, *model, info, parse_format(f)); }
};

struct RerunBatchResult : Formatted {
  BatchRerun b;
  std::vector<InputSpec> inputs;
  std::string format(const std::string& f) const {
    return format_rerun_batch(b, inputs, *model, info, parse_format(f));
  }
};

/// `--rerun N --repeats R --seed S --threads T` as a request: Python's ints
/// written out and read by the library, with the CLI's ranges and messages
/// (the option named as in Python).
RerunRequest rerun_request(const py::int_& samples, const py::int_& repeats, const py::int_& seed, int threads) {
  check_threads(threads);
  RerunRequest rr;
  const auto text = [](const py::int_& x) { return py::str(py::handle(x)).cast<std::string>(); };
  rr.samples = as_option("rerun", [&] { return RerunRequest::parsed_samples(text(samples)); });
  rr.repeats = as_option("repeats", [&] { return RerunRequest::parsed_repeats(text(repeats)); });
  rr.seed = as_option("seed", [&] { return parse_uint64(text(seed)); });
  rr.threads = threads;
  return rr;
}

/// A per-repetition count as the CLI's JSON has it: None when empty.
std::optional<std::vector<long>> counts(const std::vector<long>& v) {
  if (v.empty()) return std::nullopt;
  return v;
}

/// Per-repetition values as Numbers: None when empty (runs that are not certified).
std::optional<std::vector<Number>> numbers(const std::vector<Quantity>& v) {
  if (v.empty()) return std::nullopt;
  std::vector<Number> out;
  for (const Quantity& q : v) out.push_back(number(q));
  return out;
}

/// Why a result has no head: the model's reason, or that the call asked for none.
TaskHeadAbsence head_absence(const Model& model, bool use_head) {
  return use_head ? task_head_absence(model) : TaskHeadAbsence::declined;
}

/// The properties an effectiveness result (holder H of report `r`) shares
/// with the re-run one: task head, output norm, variant, precisions.
template <class H> void def_report_properties(py::class_<H>& c) {
  c.def_property_readonly("head",
                          [](const H& h) -> std::optional<std::string> {
                            if (!h.r.head) return std::nullopt;
                            return to_string(*h.r.head);
                          })
      .def_property_readonly("head_note",
                             [](const H& h) -> std::optional<std::string> {
                               if (h.r.head) return std::nullopt;
                               return task_head_note(h.info.head_absence);
                             })
      .def_property_readonly("outputs", [](const H& h) { return h.r.outputs; })
      .def_property_readonly("predictions", [](const H& h) { return h.r.predictions; })
      .def_property_readonly("output_frobenius", [](const H& h) { return number(h.r.output_frobenius); })
      .def_property_readonly("variant", [](const H& h) { return variant_dict(h.r.variant); })
      .def_property_readonly("precision", [](const H& h) { return h.r.precision.name(); })
      .def_property_readonly("check", [](const H& h) { return precision_name(h.r.check); });
}

}  // namespace

void register_effectiveness(py::module_& m) {
  py::class_<EffectivenessEntry>(m, "EffectivenessEntry")
      .def_readonly("length", &EffectivenessEntry::length, "k: the paths kept have length at most k.")
      .def_property_readonly("count", [](const EffectivenessEntry& e) { return exact_int(e.count); })
      .def_property_readonly("distance", [](const EffectivenessEntry& e) { return number(e.distance); })
      .def_readonly("agree", &EffectivenessEntry::agree)
      .def_readonly("agree_check", &EffectivenessEntry::agree_check)
      .def_readonly("agree_most", &EffectivenessEntry::agree_most,
                    "check='certified': the predictions that may agree (agree: those proven to); None otherwise.")
      .def_property_readonly("kl", [](const EffectivenessEntry& e) { return number(e.kl); })
      .def_readonly("digits", &EffectivenessEntry::digits);
  py::class_<EffectivenessResult> effectiveness(m, "EffectivenessResult");
  effectiveness.def("format", &EffectivenessResult::format)
      .def_property_readonly("lengths", [](const EffectivenessResult& r) { return r.r.lengths; });
  def_report_properties(effectiveness);
  py::class_<PooledAgreement>(m, "PooledAgreement")
      .def_readonly("agree", &PooledAgreement::agree)
      .def_readonly("agree_check", &PooledAgreement::agree_check)
      .def_readonly("agree_most", &PooledAgreement::agree_most)
      .def_readonly("predictions", &PooledAgreement::predictions)
      .def_property_readonly("kl", [](const PooledAgreement& p) { return number(p.kl); });
  py::class_<BatchEffectivenessEntry>(m, "BatchEffectivenessEntry")
      .def_readonly("length", &BatchEffectivenessEntry::length)
      .def_property_readonly("count", [](const BatchEffectivenessEntry& e) { return exact_int(e.count); })
      .def_readonly("distance", &BatchEffectivenessEntry::distance)
      .def_readonly("head", &BatchEffectivenessEntry::head);
  py::class_<EffectivenessBatchResult>(m, "EffectivenessBatchResult")
      .def("format", &EffectivenessBatchResult::format)
      .def_property_readonly("lengths", [](const EffectivenessBatchResult& r) { return r.b.lengths; })
      .def_property_readonly("runs", [](const EffectivenessBatchResult& r) {
        return per_input<EffectivenessResult>(r, r.inputs, r.b.runs);
      })
      .def_property_readonly("inputs", [](const EffectivenessBatchResult& r) { return descriptions(r.inputs); });

  py::class_<RerunEntry>(m, "RerunEntry")
      .def_readonly("length", &RerunEntry::length, "k: the re-run paths have length exactly k.")
      .def_property_readonly("count", [](const RerunEntry& e) { return exact_int(e.count); })
      .def_readonly("all_paths", &RerunEntry::all_paths)
      .def_readonly("evaluated", &RerunEntry::evaluated)
      .def_readonly("distance", &RerunEntry::distance)
      .def_readonly("gap", &RerunEntry::gap)
      .def_property_readonly("agree", [](const RerunEntry& e) { return counts(e.agree); })
      .def_property_readonly("agree_check", [](const RerunEntry& e) { return counts(e.agree_check); })
      .def_property_readonly("agree_most", [](const RerunEntry& e) { return counts(e.agree_most); },
                             "check='certified': per repetition, the predictions that may agree (None otherwise).")
      .def_property_readonly("distance_each", [](const RerunEntry& e) { return numbers(e.distance_each); },
                             "check='certified': each repetition's distance with its interval (None otherwise).")
      .def_property_readonly("kl_each", [](const RerunEntry& e) { return numbers(e.kl_each); })
      .def_property_readonly("gap_each", [](const RerunEntry& e) { return numbers(e.gap_each); })
      .def_readonly("kl", &RerunEntry::kl);
  py::class_<RerunResult> rerun(m, "RerunResult");
  rerun.def("format", &RerunResult::format)
      .def_property_readonly("lengths", [](const RerunResult& r) { return r.r.lengths; })
      .def_property_readonly("exact", [](const RerunResult& r) -> std::optional<EffectivenessResult> {
        if (!r.r.exact) return std::nullopt;
        return EffectivenessResult{static_cast<const Formatted&>(r), *r.r.exact};
      })
      .def_property_readonly("samples", [](const RerunResult& r) { return r.r.request.samples; })
      .def_property_readonly("repeats", [](const RerunResult& r) { return r.r.request.repeats; })
      .def_property_readonly("seed", [](const RerunResult& r) { return r.r.request.seed; });
  def_report_properties(rerun);
  py::class_<BatchRerunEntry>(m, "BatchRerunEntry")
      .def_readonly("length", &BatchRerunEntry::length)
      .def_property_readonly("count", [](const BatchRerunEntry& e) { return exact_int(e.count); })
      .def_readonly("all_paths", &BatchRerunEntry::all_paths)
      .def_readonly("evaluated", &BatchRerunEntry::evaluated)
      .def_readonly("distance", &BatchRerunEntry::distance)
      .def_readonly("gap", &BatchRerunEntry::gap)
      .def_readonly("head", &BatchRerunEntry::head);
  py::class_<RerunBatchResult>(m, "RerunBatchResult")
      .def("format", &RerunBatchResult::format)
      .def_property_readonly("lengths", [](const RerunBatchResult& r) { return r.b.lengths; })
      .def_property_readonly("exact", [](const RerunBatchResult& r) { return r.b.exact; })
      .def_property_readonly("runs", [](const RerunBatchResult& r) {
        return per_input<RerunResult>(r, r.inputs, r.b.runs);
      })
      .def_property_readonly("seeds", [](const RerunBatchResult& r) { return r.b.seeds; })
      .def_property_readonly("samples", [](const RerunBatchResult& r) { return r.b.request.samples; })
      .def_property_readonly("repeats", [](const RerunBatchResult& r) { return r.b.request.repeats; })
      .def_property_readonly("seed", [](const RerunBatchResult& r) { return r.b.request.seed; })
      .def_property_readonly("inputs", [](const RerunBatchResult& r) { return descriptions(r.inputs); });
  m.def("effectiveness_batch", [](ModelPtr model, const Batch& batch, const std::string& name,
                                  std::optional<std::string> skip, std::optional<std::string> mlp,
                                  std::optional<std::string> layernorm, std::optional<std::string> mask,
                                  const PrecisionRequest& req, bool use_head, int threads, py::object progress) {
    check_honoured(req, CheckScope::paths);
    check_threads(threads);
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    const std::optional<TaskHead> head = use_head ? task_head_of(*model) : std::nullopt;
    ProgressBridge bridge(progress);
    EffectivenessBatchResult r{{model, {name, batch.description, head_absence(*model, use_head)}}, {}, batch.inputs};
    r.b = run_released(
        [&] {
          return analyze_effectiveness_batch(*model, v, batch.inputs, req, head ? &*head : nullptr, threads,
                                             bridge.fn());
        },
        &bridge);
    return r;
  });
  m.def("effectiveness", [](ModelPtr model, const InputSpec& input, const std::string& name,
                            std::optional<std::string> skip, std::optional<std::string> mlp,
                            std::optional<std::string> layernorm, std::optional<std::string> mask,
                            const PrecisionRequest& req, bool use_head, py::object progress) {
    check_honoured(req, CheckScope::paths);
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    const std::optional<TaskHead> head = use_head ? task_head_of(*model) : std::nullopt;
    ProgressBridge bridge(progress);
    EffectivenessResult r{{model, {name, input.describe(), head_absence(*model, use_head)}}, {}};
    r.r = run_released(
        [&] { return analyze_effectiveness(*model, v, input, req, head ? &*head : nullptr, bridge.fn()); }, &bridge);
    return r;
  });
  m.def("effectiveness_rerun", [](ModelPtr model, const InputSpec& input, const std::string& name,
                                  std::optional<std::string> skip, std::optional<std::string> mlp,
                                  std::optional<std::string> layernorm, std::optional<std::string> mask,
                                  const PrecisionRequest& req, bool use_head, const py::int_& samples,
                                  const py::int_& repeats, const py::int_& seed, int threads, py::object progress) {
    check_honoured(req, CheckScope::paths);
    const RerunRequest rr = rerun_request(samples, repeats, seed, threads);
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    const std::optional<TaskHead> head = use_head ? task_head_of(*model) : std::nullopt;
    ProgressBridge bridge(progress);
    RerunResult r{{model, {name, input.describe(), head_absence(*model, use_head)}}, {}};
    r.r = run_released(
        [&] { return analyze_rerun(*model, v, input, req, rr, head ? &*head : nullptr, bridge.fn()); }, &bridge);
    return r;
  });
  m.def("effectiveness_rerun_batch", [](ModelPtr model, const Batch& batch, const std::string& name,
                                        std::optional<std::string> skip, std::optional<std::string> mlp,
                                        std::optional<std::string> layernorm, std::optional<std::string> mask,
                                        const PrecisionRequest& req, bool use_head, const py::int_& samples,
                                        const py::int_& repeats, const py::int_& seed, int threads,
                                        py::object progress) {
    check_honoured(req, CheckScope::paths);
    const RerunRequest rr = rerun_request(samples, repeats, seed, threads);
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    const std::optional<TaskHead> head = use_head ? task_head_of(*model) : std::nullopt;
    ProgressBridge bridge(progress);
    RerunBatchResult r{{model, {name, batch.description, head_absence(*model, use_head)}}, {}, batch.inputs};
    r.b = run_released(
        [&] { return analyze_rerun_batch(*model, v, batch.inputs, req, rr, head ? &*head : nullptr, bridge.fn()); },
        &bridge);
    return r;
  });
}

}  // namespace sanpath_py

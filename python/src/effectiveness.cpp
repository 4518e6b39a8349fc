// Path effectiveness (`sanpath paths --effectiveness`, analysis/paths.hpp):
// the network truncated to its paths of length ≤ k, k = 0..L; over a batch
// (analysis/effectiveness_batch.hpp).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "sanpath/analysis/effectiveness_batch.hpp"
#include "sanpath/analysis/paths.hpp"

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

}  // namespace

void register_effectiveness(py::module_& m) {
  py::class_<EffectivenessEntry>(m, "EffectivenessEntry")
      .def_readonly("length", &EffectivenessEntry::length, "k: the paths kept have length at most k.")
      .def_property_readonly("count", [](const EffectivenessEntry& e) { return exact_int(e.count); })
      .def_property_readonly("distance", [](const EffectivenessEntry& e) { return number(e.distance); })
      .def_readonly("agree", &EffectivenessEntry::agree)
      .def_readonly("agree_check", &EffectivenessEntry::agree_check)
      .def_property_readonly("kl", [](const EffectivenessEntry& e) { return number(e.kl); })
      .def_readonly("digits", &EffectivenessEntry::digits);
  py::class_<EffectivenessResult>(m, "EffectivenessResult")
      .def("format", &EffectivenessResult::format)
      .def_property_readonly("lengths", [](const EffectivenessResult& r) { return r.r.lengths; })
      .def_property_readonly("head", [](const EffectivenessResult& r) -> std::optional<std::string> {
        if (!r.r.head) return std::nullopt;
        return to_string(*r.r.head);
      })
      .def_property_readonly("outputs", [](const EffectivenessResult& r) { return r.r.outputs; })
      .def_property_readonly("predictions", [](const EffectivenessResult& r) { return r.r.predictions; })
      .def_property_readonly("output_frobenius", [](const EffectivenessResult& r) { return number(r.r.output_frobenius); })
      .def_property_readonly("variant", [](const EffectivenessResult& r) { return variant_dict(r.r.variant); })
      .def_property_readonly("precision", [](const EffectivenessResult& r) { return r.r.precision.name(); })
      .def_property_readonly("check", [](const EffectivenessResult& r) { return precision_name(r.r.check); });
  py::class_<PooledAgreement>(m, "PooledAgreement")
      .def_readonly("agree", &PooledAgreement::agree)
      .def_readonly("agree_check", &PooledAgreement::agree_check)
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
        std::vector<EffectivenessResult> out;
        for (std::size_t i = 0; i < r.b.runs.size(); ++i)
          out.push_back(EffectivenessResult{{r.model, {r.info.model, r.inputs[i].describe()}}, r.b.runs[i]});
        return out;
      })
      .def_property_readonly("inputs", [](const EffectivenessBatchResult& r) {
        std::vector<std::string> out;
        for (const InputSpec& in : r.inputs) out.push_back(in.describe());
        return out;
      });
  m.def("effectiveness_batch", [](ModelPtr model, const Batch& batch, const std::string& name,
                                  std::optional<std::string> skip, std::optional<std::string> mlp,
                                  std::optional<std::string> layernorm, std::optional<std::string> mask,
                                  const PrecisionRequest& req, bool use_head, int threads, py::object progress) {
    if (threads < 0) throw std::invalid_argument("--threads: " + std::to_string(threads) + " is negative");
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    const std::optional<TaskHead> head = use_head ? task_head_of(*model) : std::nullopt;
    ProgressBridge bridge(progress);
    EffectivenessBatchResult r{{model, {name, batch.description}}, {}, batch.inputs};
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
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    const std::optional<TaskHead> head = use_head ? task_head_of(*model) : std::nullopt;
    ProgressBridge bridge(progress);
    EffectivenessResult r{{model, {name, input.describe()}}, {}};
    r.r = run_released(
        [&] { return analyze_effectiveness(*model, v, input, req, head ? &*head : nullptr, bridge.fn()); }, &bridge);
    return r;
  });
}

}  // namespace sanpath_py

// The emulated forward pass (compute/emulate.hpp): the raw trace of a model
// evaluated in fp32, bf16 or fp16 as math.md §9 says, for the integration
// into the CLI and reports that comes later and for independent references.
#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/emulate.hpp"

#include "common.hpp"
#include "run.hpp"

namespace sanpath_py {

void register_emulate(py::module_& m) {
  m.def(
      "emulate_trace",
      [](ModelPtr model, const InputSpec& input, const std::string& format, std::optional<std::string> skip,
         std::optional<std::string> mlp, std::optional<std::string> layernorm, std::optional<std::string> mask,
         bool record_attention) {
        const EmulatedFormat f = parse_emulated_format(format);
        const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
        const EmulatedTrace t = run_released([&] {
          return emulate_forward(*model, v, make_input<double>(*model, input), f, record_attention);
        });
        py::dict d;
        d["X"] = py::cast(t.X);
        d["P"] = py::cast(t.P);
        d["overflow"] = py::cast(t.overflow);
        d["overflow_layer"] = t.overflow_layer;
        return d;
      },
      py::arg("model"), py::arg("input"), py::arg("format"), py::arg("skip") = py::none(),
      py::arg("mlp") = py::none(), py::arg("layernorm") = py::none(), py::arg("mask") = py::none(),
      py::arg("record_attention") = false,
      "The model evaluated as a framework in `format` (fp32, bf16, fp16) would: a dict with X (the L+1 layer "
      "outputs, float64 arrays n x d holding values of the format), P (per layer, per head n x n, or empty), "
      "overflow (the first operation that gave inf or NaN, or None) and overflow_layer (-1 when none).");
}

}  // namespace sanpath_py

// Batches of inputs (analysis/batch.hpp): the Batch holder, its constructors
// (as the CLI's --tokens-file, --input with X [b, n, d], --random-input N
// --batch B) and the batch forms of forward and collapse.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "sanpath/analysis/batch.hpp"
#include "sanpath/io/image.hpp"
#include "sanpath/io/inputs.hpp"

#include "common.hpp"
#include "run.hpp"

#include <array>
#include <variant>

namespace sanpath_py {

namespace {

struct ForwardBatchResult : Formatted {
  BatchForwardAnalysis a;
  std::vector<InputSpec> inputs;
  std::string format(const std::string& f) const {
    return format_forward_batch(a, inputs, *model, info, parse_format(f));
  }
};

struct CollapseBatchResult : Formatted {
  BatchCollapseResult r;
  std::vector<InputSpec> inputs;
  std::string format(const std::string& f) const {
    return format_collapse_batch(r, inputs, *model, info, parse_format(f));
  }
};

/// The CLI's description of a batch read from the tensor X [b, n, d] of `source`.
Batch tensor_batch(std::vector<InputSpec> inputs, const std::string& source) {
  Batch b{std::move(inputs), {}};
  b.description = describe_batch(b.inputs, source + " (X of shape [b, n, d])");
  return b;
}

/// The CLI's description of the images read from a tensor pixel_values [b, C, S, S] of `source` (--pixels).
Batch pixel_batch(std::vector<InputSpec> inputs, const std::string& source) {
  Batch b{std::move(inputs), {}};
  b.description = describe_batch(b.inputs, source + " (pixel_values of shape [b, C, S, S])");
  return b;
}

}  // namespace

namespace {

/// [{measure name: statistics} per layer], in report order.
py::list measure_statistics(const std::vector<std::vector<MeasureStatistic>>& layers) {
  py::list out;
  for (const std::vector<MeasureStatistic>& layer : layers) {
    py::dict d;
    for (const MeasureStatistic& m : layer) d[py::str(m.name)] = py::cast(m.statistic);
    out.append(d);
  }
  return out;
}

}  // namespace

void register_batches(py::module_& m) {
  py::class_<Batch>(m, "Batch", "Several inputs analysed together (the CLI's batch options).")
      .def("__len__", [](const Batch& b) { return b.inputs.size(); })
      .def("describe", [](const Batch& b) { return b.description; })
      .def_property_readonly("inputs", [](const Batch& b) { return b.inputs; });

  m.def("batch_tokens", [](const std::vector<std::vector<long>>& sequences, const std::string& name) {
    if (sequences.empty()) throw std::invalid_argument(name + ": no token sequence");
    Batch b;
    for (std::size_t i = 0; i < sequences.size(); ++i)
      b.inputs.push_back(InputSpec::from_tokens(sequences[i], name + "[" + std::to_string(i) + "]"));
    b.description = describe_batch(b.inputs, name);
    return b;
  });
  m.def("batch_token_file", [](const std::string& path) {
    Batch b{read_token_file(path), {}};
    b.description = describe_batch(b.inputs, path);
    return b;
  });
  // Input k is X[k] (an [n, d] slice of the C-contiguous [b, n, d] array), named "<name>[k]" as the CLI names
  // the slices of a file's X.
  m.def("batch_matrices", [](const py::array_t<double, py::array::c_style | py::array::forcecast>& X,
                             const std::string& name) {
    if (X.ndim() != 3)
      throw std::invalid_argument(name + ": X: shape has " + std::to_string(X.ndim()) +
                                  " dimensions, expected [b, n, d_model]");
    if (X.shape(0) < 1) throw std::invalid_argument(name + ": X: batch dimension is 0");
    const Eigen::Index n = X.shape(1), d = X.shape(2);
    std::vector<InputSpec> inputs;
    for (py::ssize_t k = 0; k < X.shape(0); ++k) {
      const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> slice(
          X.data(k, 0, 0), n, d);
      inputs.push_back(InputSpec::from_matrix(MatrixXd(slice), name + "[" + std::to_string(k) + "]"));
    }
    return tensor_batch(std::move(inputs), name);
  });
  m.def("input_file", [](const std::string& path) -> std::variant<InputSpec, Batch> {
    std::vector<InputSpec> inputs = read_input_tensor(path);
    if (inputs.front().source == path) return std::move(inputs.front());  // X of shape [n, d]
    return tensor_batch(std::move(inputs), path);
  });
  // Images for a ViT model, as --pixels reads them (io/inputs.hpp read_pixels): an array [C, H, W] is one image
  // named `name`, [b, C, H, W] b images named "<name>[i]"; the errors are read_pixels' and from_pixels'.
  m.def("input_pixels", [](const py::array_t<double, py::array::c_style | py::array::forcecast>& x,
                           const std::string& name) -> std::variant<InputSpec, Batch> {
    const py::ssize_t dims = x.ndim();
    if (dims != 3 && dims != 4)
      throw std::invalid_argument(name + ": pixel_values: shape has " + std::to_string(dims) +
                                  " dimensions, expected [C, H, W] or [b, C, H, W]");
    const std::array<long, 3> shape{static_cast<long>(x.shape(dims - 3)), static_cast<long>(x.shape(dims - 2)),
                                    static_cast<long>(x.shape(dims - 1))};
    if (dims == 3) return InputSpec::from_pixels(std::vector<double>(x.data(), x.data() + x.size()), shape, name);
    const py::ssize_t b = x.shape(0);
    if (b < 1) throw std::invalid_argument(name + ": pixel_values: batch dimension is 0");
    const py::ssize_t per = x.size() / b;
    std::vector<InputSpec> inputs;
    for (py::ssize_t k = 0; k < b; ++k) {
      const double* first = x.data() + per * k;
      inputs.push_back(InputSpec::from_pixels(std::vector<double>(first, first + per), shape,
                                              name + "[" + std::to_string(k) + "]"));
    }
    return pixel_batch(std::move(inputs), name);
  });
  // Images for a ViT model, as --image reads them (io/image.hpp read_images): one file is one image named by its
  // path; several files, or a folder, a Batch. With `model`, a model that takes no images is refused.
  m.def(
      "images_file",
      [](const std::vector<std::string>& paths, const std::string& model_path,
         const Model* model) -> std::variant<InputSpec, Batch> {
        std::vector<InputSpec> inputs = read_images(paths, model_path, model);
        if (!image_batch(paths)) return std::move(inputs.front());
        Batch b{std::move(inputs), {}};
        b.description = describe_batch(b.inputs, paths.size() == 1 ? paths.front() : std::string("images"));
        return b;
      },
      py::arg("paths"), py::arg("model_path"), py::arg("model") = nullptr);
  m.def("pixels_file", [](const std::string& path) -> std::variant<InputSpec, Batch> {
    std::vector<InputSpec> inputs = read_pixels(path);
    if (inputs.front().source == path) return std::move(inputs.front());  // pixel_values of shape [C, H, W]
    return pixel_batch(std::move(inputs), path);
  });
  m.def("batch_random", [](int n, int count, std::uint64_t seed, double spread, std::optional<double> residual) {
    as_option("--batch", [&] { return checked_random_count(count, "inputs"); });
    RandomInputSpec r;
    r.n = n;
    r.seed = seed;
    r.spread = spread;
    r.residual = residual;
    Batch b{random_input_batch(r, count), {}};
    const std::uint64_t last = seed + static_cast<std::uint64_t>(count) - 1;
    b.description =
        describe_batch(b.inputs, "--random-input (seeds " + std::to_string(seed) + ".." + std::to_string(last) + ")");
    return b;
  });

  py::class_<BatchStatistic>(m, "BatchStatistic",
                             "Statistics of one quantity over a batch: mean, sample std (ddof=1), min, median, max.")
      .def_readonly("count", &BatchStatistic::count)
      .def_property_readonly("mean", [](const BatchStatistic& s) { return number(s.mean); })
      .def_property_readonly("stddev", [](const BatchStatistic& s) { return number(s.stddev); })
      .def_property_readonly("min", [](const BatchStatistic& s) { return number(s.min); })
      .def_property_readonly("median", [](const BatchStatistic& s) { return number(s.median); })
      .def_property_readonly("max", [](const BatchStatistic& s) { return number(s.max); });

  py::class_<ForwardBatchResult>(m, "ForwardBatchResult")
      .def("format", &ForwardBatchResult::format)
      .def_property_readonly("layers", [](const ForwardBatchResult& r) { return r.a.layers; })
      .def_property_readonly("measures", [](const ForwardBatchResult& r) { return measure_statistics(r.a.measures); })
      .def_property_readonly("runs", [](const ForwardBatchResult& r) {
        return per_input<ForwardResult>(r, r.inputs, r.a.runs);
      })
      .def_property_readonly("inputs", [](const ForwardBatchResult& r) { return descriptions(r.inputs); });
  m.def("forward_batch", [](ModelPtr model, const Batch& batch, const std::string& name,
                            std::optional<std::string> skip, std::optional<std::string> mlp,
                            std::optional<std::string> layernorm, std::optional<std::string> mask,
                            const PrecisionRequest& req, const std::string& center, int threads, py::object progress) {
    check_threads(threads);
    const Center c = as_option("--center", [&] { return parse_center(center); });
    check_applies(req, c);
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    ProgressBridge bridge(progress);
    ForwardBatchResult r{{model, {name, batch.description}}, {}, batch.inputs};
    r.a = run_released([&] { return analyze_forward_batch(*model, v, batch.inputs, req, c, threads, bridge.fn()); },
                       &bridge);
    return r;
  });

  py::class_<CollapseBatchResult>(m, "CollapseBatchResult")
      .def("format", &CollapseBatchResult::format)
      .def_property_readonly("variants", [](const CollapseBatchResult& r) {
        std::vector<std::string> names;
        for (const NamedVariant& v : r.r.variants) names.push_back(v.name);
        return names;
      })
      .def_property_readonly("layers", [](const CollapseBatchResult& r) { return r.r.layers; })
      .def_property_readonly("measures",
                             [](const CollapseBatchResult& r) {
                               py::list out;
                               for (const auto& v : r.r.measures) out.append(measure_statistics(v));
                               return out;
                             })
      .def_property_readonly("runs", [](const CollapseBatchResult& r) {
        return per_input<CollapseResultPy>(r, r.inputs, r.r.runs);
      })
      .def_property_readonly("conventions", [](const CollapseBatchResult& r) { return to_string(r.r.conventions); })
      .def_property_readonly("inputs", [](const CollapseBatchResult& r) { return descriptions(r.inputs); });
  m.def("collapse_batch", [](ModelPtr model, const Batch& batch, const std::string& name, const PrecisionRequest& req,
                             const std::string& conventions, int threads, py::object progress) {
    check_threads(threads);
    check_applies(req, Center::mean);
    const CollapseConventions c = conventions_of(conventions);
    ProgressBridge bridge(progress);
    CollapseBatchResult r{{model, {name, batch.description}}, {}, batch.inputs};
    r.r = run_released([&] { return run_collapse_batch(*model, batch.inputs, req, c, threads, bridge.fn()); },
                       &bridge);
    return r;
  });
}

}  // namespace sanpath_py

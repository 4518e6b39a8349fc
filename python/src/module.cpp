// sanpath._sanpath: the compiled half of the Python package. A thin binding:
// every function converts its arguments, calls one library entry point with
// the GIL released, and wraps the result; formatting goes through the
// library's report formatters. The Pythonic surface is the package sanpath/
// (results, inputs, models, analyses, settings; __init__ re-exports them).
// Batches, effectiveness and the bounds search are registered from their own
// files (batch.cpp, effectiveness.cpp, search.cpp); common.hpp is shared.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/functional.h>
#include <pybind11/eigen.h>

#include "sanpath/analysis/bounds.hpp"
#include "sanpath/analysis/collapse.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/compute/path_graph.hpp"
#include "sanpath/core/errors.hpp"
#include "sanpath/core/distributed.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/core/resources.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/families.hpp"
#include "sanpath/io/random_checkpoint.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/io/task_head.hpp"
#include "sanpath/report/format.hpp"
#include "sanpath/report/html_report.hpp"

#include "common.hpp"
#include "run.hpp"

#include <sstream>
#include <variant>

namespace py = pybind11;
using namespace sanpath;
using namespace sanpath_py;

namespace {

// ------------------------------------------------------------- conversions

Tensor to_tensor(const std::string& name,
                 const py::array_t<double, py::array::c_style | py::array::forcecast>& a) {
  Tensor t;
  t.name = name;
  t.dtype = "F64";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) t.shape.push_back(static_cast<std::int64_t>(a.shape(i)));
  t.values.assign(a.data(), a.data() + a.size());
  return t;
}

py::array_t<double> to_array(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  py::array_t<double> out(shape);
  std::copy(t.values.begin(), t.values.end(), out.mutable_data());
  return out;
}

// ----------------------------------------------------------------- results

struct LengthSumsResult : Formatted {
  LengthSumsReport r;
  std::string format(const std::string& f) const { return format_length_sums(r, *model, info, parse_format(f)); }
};
struct EnumerationResultPy : Formatted {
  PathEnumerationReport r;
  std::string format(const std::string& f) const { return format_enumeration(r, *model, info, parse_format(f)); }
};
struct SampleResult : Formatted {
  PathSampleReport r;
  std::string format(const std::string& f) const { return format_samples(r, *model, info, parse_format(f)); }
};
struct GraphResult {
  PathGraphSpec spec;
  PathCounts counts;
  std::string format(const std::string& f) const { return format_path_counts(spec, counts, parse_format(f)); }
};

// --------------------------------------------------- streaming enumeration

/// A Python iterator over stream_enumeration: a worker thread walks the
/// paths and hands each entry over a bounded queue, so memory does not grow
/// with the number of paths. Closing (or dropping) the iterator stops the walk.
class PathStream {
 public:
  PathStream(ModelPtr model, Variant variant, InputSpec input, PrecisionRequest request, PathFilter filter,
             std::uint64_t limit)
      : model_(std::move(model)) {
    clear_interrupt();
    worker_ = std::thread([this, variant, input = std::move(input), request, filter, limit] {
      try {
        base_ = stream_enumeration(*model_, variant, input, request, filter, limit, [this](const PathTermEntry& e) {
          std::unique_lock<std::mutex> lk(mu_);
          space_.wait(lk, [this] { return queue_.size() < kCapacity || stop_; });
          if (stop_) throw Stopped{};
          queue_.push_back(e);
          ready_.notify_all();
        });
      } catch (const Stopped&) {
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
      ready_.notify_all();
    });
  }
  ~PathStream() { close(); }
  PathStream(const PathStream&) = delete;
  PathStream& operator=(const PathStream&) = delete;

  /// The next entry; nullopt at the end. Raises what the walk raised.
  std::optional<PathTermEntry> next() {
    std::optional<PathTermEntry> out;
    std::exception_ptr error;
    const bool got = sanpath_py::wait_released([&] {
      std::unique_lock<std::mutex> lk(mu_);
      if (!ready_.wait_for(lk, std::chrono::milliseconds(50), [this] { return !queue_.empty() || done_; }))
        return false;
      if (!queue_.empty()) {
        out = std::move(queue_.front());
        queue_.pop_front();
        space_.notify_all();
      } else {
        error = error_;
        error_ = nullptr;
      }
      return true;
    });
    if (!got) {  // KeyboardInterrupt is pending: stop the walk, raise it
      close();
      throw py::error_already_set();
    }
    if (error) std::rethrow_exception(error);
    return out;
  }

  void close() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      space_.notify_all();
    }
    if (worker_.joinable()) {
      request_interrupt();  // a walk still in its forward passes stops at the next check
      py::gil_scoped_release release;
      worker_.join();
    }
  }
  const PathReportBase& base() const { return base_; }

 private:
  struct Stopped {};
  static constexpr std::size_t kCapacity = 256;
  ModelPtr model_;
  PathReportBase base_;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<PathTermEntry> queue_;
  std::exception_ptr error_;
  bool done_ = false, stop_ = false;
  std::thread worker_;
};

// ---------------------------------------------------------------- exceptions

PyObject* new_exception(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  const std::string qualified = std::string("sanpath._sanpath.") + name;
  PyObject* e = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (!e) throw py::error_already_set();
  m.add_object(name, py::handle(e));
  return e;
}

/// --emulate's report as plain Python: {"format", "overflow", "first_layer_without_correct_digit",
/// "layers": [{"layer", "non_finite", "relative_residual", "measures", "correct_digits"}]}.
py::dict emulation_dict(const EmulationReport& e) {
  py::dict d;
  d["format"] = to_string(e.format);
  d["overflow"] = e.overflow ? py::object(py::str(*e.overflow)) : py::object(py::none());
  py::dict first;
  for (const auto& [name, layer] : e.first_layer_without_digit) first[py::str(name)] = py::cast(layer);
  d["first_layer_without_correct_digit"] = first;
  py::list layers;
  for (const EmulatedLayerReport& r : e.layers) {
    py::dict L;
    L["layer"] = r.layer;
    L["non_finite"] = r.non_finite;
    L["relative_residual"] = r.non_finite ? py::object(py::none()) : py::cast(number(r.relative_residual));
    py::dict m, correct;
    for (const MeasureReport& x : r.measures) m[py::str(x.name)] = number(x.value);
    for (const auto& [name, digits] : r.correct_digits) correct[py::str(name)] = py::cast(digits);
    L["measures"] = m;
    L["correct_digits"] = correct;
    layers.append(L);
  }
  d["layers"] = layers;
  return d;
}

}  // namespace

PYBIND11_MODULE(_sanpath, m) {
  m.doc() = "sanpath's compiled core; use the package `sanpath`.";

  // Errors: InputError (exit code 3 of the CLI), NumericalError (4), ResourceError (5).
  PyObject* base = new_exception(m, "Error", py::make_tuple(py::handle(PyExc_Exception)),
                                 "Base of sanpath's errors; the message is the CLI's one-line message.");
  static PyObject* input_error =
      new_exception(m, "InputError", py::make_tuple(py::handle(base), py::handle(PyExc_ValueError)),
                    "Bad input: a missing or malformed file, bad shapes, NaN/Inf, a bad option value.");
  static PyObject* numerical_error =
      new_exception(m, "NumericalError", py::make_tuple(py::handle(base), py::handle(PyExc_ArithmeticError)),
                    "A result could not be obtained or certified.");
  static PyObject* resource_error =
      new_exception(m, "ResourceError", py::make_tuple(py::handle(base), py::handle(PyExc_MemoryError)),
                    "A path count, memory or size limit.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Interrupted& e) {
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    } catch (const ResourceError& e) {
      PyErr_SetString(resource_error, e.what());
    } catch (const std::length_error& e) {
      PyErr_SetString(resource_error, e.what());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(resource_error, "memory: allocation failed");
    } catch (const NumericalError& e) {
      PyErr_SetString(numerical_error, e.what());
    } catch (const std::invalid_argument& e) {
      PyErr_SetString(input_error, e.what());
    } catch (const std::domain_error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::overflow_error& e) {
      PyErr_SetString(PyExc_OverflowError, e.what());
    }
  });

  // ---- numbers
  py::class_<Number>(m, "Number", "A reported high-precision number and its confirmed digits.")
      .def("__str__", &Number::str)
      .def("__float__", &Number::to_float)
      .def("decimal", &Number::decimal, py::arg("digits") = py::none(),
           "Decimal string with up to `digits` significant digits (never more than confirmed).")
      .def_property_readonly("log10", &Number::log10_abs,
                             "log10 of |value| as a float (any magnitude); None when zero or below resolution.")
      .def_property_readonly("digits", [](const Number& n) { return n.q.digits; },
                             "Significant decimal digits confirmed by the check run (None: no check run).")
      .def_property_readonly("below_resolution", [](const Number& n) { return n.q.below_resolution; },
                             "True when only an upper bound of |value| is known.")
      .def_property_readonly("bound", [](const Number& n) -> std::optional<std::string> {
        if (!n.q.below_resolution) return std::nullopt;
        return to_sci(n.q.bound, 1);
      }, "The power of ten above |value| when below resolution, as a decimal string; else None.")
      .def_property_readonly("interval", [](const Number& n) { return enclosure_text(n.q); },
                             "check='certified': the enclosure (lo, hi) of the exact value as decimal strings "
                             "rounded outward (math.md §10), `digits` then being the digits it proves; else None.");

  // ---- models
  py::class_<Model, ModelPtr>(m, "Model")
      .def("__repr__", [](const Model& x) { return "<sanpath.Model " + describe(x) + ">"; })
      .def_property_readonly("layers", [](const Model& x) { return x.arch().layers; })
      .def_property_readonly("heads", [](const Model& x) { return x.arch().heads; })
      .def_property_readonly("d_model", [](const Model& x) { return x.arch().d_model; })
      .def_property_readonly("d_qk", [](const Model& x) { return x.arch().d_qk; })
      .def_property_readonly("d_v", [](const Model& x) { return x.arch().d_v; })
      .def_property_readonly("d_ff", [](const Model& x) { return x.arch().d_ff; })
      .def_property_readonly("variant", [](const Model& x) { return variant_dict(x.arch().variant); })
      .def_property_readonly("activation", [](const Model& x) { return to_string(x.arch().activation); })
      .def_property_readonly("ln_eps", [](const Model& x) { return x.arch().ln_eps; })
      .def_property_readonly("shared_layers", [](const Model& x) { return x.arch().shared_layers; })
      .def_property_readonly("source", &Model::source)
      .def_property_readonly("vocab_size", [](const Model& x) -> std::optional<int> {
        if (!x.embeddings()) return std::nullopt;
        return x.embeddings()->vocab_size();
      })
      .def("native_tensors", [](const Model& x) {
        py::dict out;
        for (const Tensor& t : native_tensors(x)) out[py::str(t.name)] = to_array(t);
        return out;
      })
      .def("native_config", [](const Model& x) { return native_config(x); })
      .def("save", [](const Model& x, const std::string& path) { save_native(x, path); })
      .def("save_hf", [](const Model& x, const std::string& folder, const std::string& layout,
                         const std::string& dtype) { save_hf(x, folder, parse_layout(layout), dtype); });

  m.def(
      "load_model",
      // Python's values written out and read by the library, with the CLI's ranges and messages.
      [](const std::string& path, const py::object& first_layers, const py::object& stream_layers) {
        const auto text = [](const py::object& x) { return py::str(x).cast<std::string>(); };
        LoadOptions o;
        if (!first_layers.is_none())
          o.first_layers = as_option("first_layers", [&] { return parse_first_layers(text(first_layers)); });
        o.layers = parse_stream_layers(text(stream_layers));
        return run_released([&] { return std::make_shared<Model>(load_model(path, o)); });
      },
      py::arg("path"), py::arg("first_layers") = py::none(), py::arg("stream_layers") = "off");
  m.def("model_from_tensors", [](const std::vector<std::pair<std::string, py::array_t<double, py::array::c_style |
                                                                                          py::array::forcecast>>>& arrays,
                                 const std::string& config, const std::string& source) {
    std::vector<Tensor> tensors;
    tensors.reserve(arrays.size());
    for (const auto& [name, a] : arrays) tensors.push_back(to_tensor(name, a));
    return run_released([&] { return std::make_shared<Model>(model_from_tensors(std::move(tensors), config, source)); });
  });
  // The family options of `init --layout X` (io/checkpoint.hpp), unset = the family's default.
  py::class_<FamilyOptions>(m, "FamilyOptions", "The family options of a random model in a layout (init --layout).")
      .def(py::init<>())
      .def_readwrite("rotary_fraction", &FamilyOptions::rotary_fraction)
      .def_readwrite("parallel_residual", &FamilyOptions::parallel_residual)
      .def_readwrite("sliding_window", &FamilyOptions::sliding_window)
      .def_readwrite("softcap", &FamilyOptions::softcap)
      .def_readwrite("query_pre_attn_scalar", &FamilyOptions::query_pre_attn_scalar)
      .def_readwrite("rel_buckets", &FamilyOptions::rel_buckets)
      .def_readwrite("rel_max_distance", &FamilyOptions::rel_max_distance)
      .def_readwrite("gated", &FamilyOptions::gated)
      .def_readwrite("clamp_len", &FamilyOptions::clamp_len)
      .def_readwrite("causal", &FamilyOptions::causal)
      .def_readwrite("image_size", &FamilyOptions::image_size)
      .def_readwrite("patch_size", &FamilyOptions::patch_size)
      .def_readwrite("channels", &FamilyOptions::channels)
      .def_readwrite("embed_dim", &FamilyOptions::embed_dim)
      .def_readwrite("pre_norm", &FamilyOptions::pre_norm)
      .def_readwrite("layer_pattern", &FamilyOptions::layer_pattern)
      .def_readwrite("rope_local_base", &FamilyOptions::rope_local_base)
      .def_readwrite("rope_linear_factor", &FamilyOptions::rope_linear_factor);
  // `sanpath init`'s model: the library validates and builds it (io/random_checkpoint.hpp), naming the
  // options as Python's keywords. Unset optionals take the defaults `init` takes.
  m.def("random_model", [](int layers, int heads, int d_model, std::optional<int> d_qk, std::optional<int> d_v,
                           std::optional<int> head_dim, std::optional<int> d_ff, const std::string& init, double std,
                           double bias_std, std::uint64_t seed, bool shared_layers,
                           const std::optional<std::string>& activation, std::optional<double> ln_eps, int vocab,
                           int max_positions, const std::optional<std::string>& skip,
                           const std::optional<std::string>& mlp, const std::optional<std::string>& layernorm,
                           const std::optional<std::string>& mask, const std::optional<std::string>& layout,
                           const std::optional<std::string>& family, std::optional<int> kv_heads, double rope_theta,
                           const FamilyOptions& family_options) {
    InitOptions o;
    o.layers = layers;
    o.heads = heads;
    o.d_model = d_model;
    o.d_qk = d_qk;
    o.d_v = d_v;
    o.head_dim = head_dim;
    o.d_ff = d_ff;
    o.init = init;
    o.std = std;
    o.bias_std = bias_std;
    o.seed = seed;
    o.shared_layers = shared_layers;
    o.activation = activation;
    o.ln_eps = ln_eps;
    o.vocab = vocab;
    o.max_positions = max_positions;
    o.variant = overrides(skip, mlp, layernorm, mask);
    o.layout = layout;
    o.family = family;
    o.kv_heads = kv_heads;
    o.rope_theta = rope_theta;
    o.family_options = family_options;
    const RandomCheckpoint c = plan_random_checkpoint(o, OptionSpelling::python);
    return run_released([&] { return std::make_shared<Model>(random_model(c.spec)); });
  });
  m.def("kernels", [] {
    py::dict k;
    k["double_products"] = double_products_isa();
    k["double_products_levels"] = supported_double_products_isas();
    k["multiprecision_products"] = ifma_products_active() ? "AVX-512 IFMA kernel" : "GMP kernel";
    k["multiprecision_tiers"] = Precision::tiers();
    k["mpi"] = mpi_library();
    return k;
  });
  m.def("distribution_notes", [] { return distribution_notes(); });
  // The family registry (io/families.hpp): sanpath.FAMILIES and sanpath.LAYOUTS.
  m.def("layout_families", [] {
    py::list out;
    for (const LayoutFamily& f : layout_families()) {
      py::dict d;
      d["name"] = f.name;
      d["display"] = f.display;
      d["model_types"] = py::tuple(py::cast(f.model_types));
      d["input"] = to_string(f.input);
      d["key_value_heads"] = f.key_value_heads;
      d["own_structure"] = f.own_structure;
      d["options"] = py::tuple(py::cast(f.options));
      out.append(d);
    }
    return out;
  });
  m.def("default_collapse_model", [] { return std::make_shared<Model>(random_model(default_collapse_model())); });

  // ---- inputs
  py::class_<InputSpec>(m, "Input")
      .def("describe", &InputSpec::describe)
      // An image's token count depends on the model (patches + CLS): None.
      .def_property_readonly("rows", [](const InputSpec& s) -> std::optional<long> {
        if (s.kind == InputSpec::Kind::pixels) return std::nullopt;
        return s.rows(nullptr);
      })
      // An image's values [C, H, W] as the model is fed them (float64); None for other inputs.
      .def_property_readonly("pixel_values", [](const InputSpec& s) -> std::optional<py::array_t<double>> {
        if (s.kind != InputSpec::Kind::pixels) return std::nullopt;
        py::array_t<double> a({s.pixel_shape[0], s.pixel_shape[1], s.pixel_shape[2]});
        std::copy(s.pixels.begin(), s.pixels.end(), a.mutable_data());
        return a;
      })
      .def_property_readonly("kind", [](const InputSpec& s) {
        switch (s.kind) {
          case InputSpec::Kind::matrix: return "matrix";
          case InputSpec::Kind::tokens: return "tokens";
          case InputSpec::Kind::pixels: return "pixels";
          case InputSpec::Kind::random: break;
        }
        return "random";
      });
  m.def("input_tokens", [](const std::vector<long>& ids) { return InputSpec::from_tokens(ids); });
  // A C-contiguous float64 array is mapped, not converted; the library keeps its own column-major copy.
  m.def("input_matrix", [](const Eigen::Ref<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>& X,
                           const std::string& source) { return InputSpec::from_matrix(MatrixXd(X), source); });
  m.def("input_random", [](int n, std::uint64_t seed, double spread, std::optional<double> residual) {
    as_option("--random-input", [&] { return checked_random_count(n, "tokens"); });
    RandomInputSpec r;
    r.n = n;
    r.seed = seed;
    r.spread = spread;
    r.residual = residual;
    return InputSpec::from_random(r);
  });
  m.def("default_collapse_input", [] { return InputSpec::from_random(default_collapse_input()); });

  // ---- analyses
  py::class_<PrecisionRequest>(m, "PrecisionRequest", "How to choose the working precision (the CLI's precision options).")
      .def("describe", &PrecisionRequest::describe);
  m.def("precision_request", &precision_request, py::arg("precision"), py::arg("digits"), py::arg("max_bits"),
        py::arg("confirm"), py::arg("method"), py::arg("check"), py::arg("measures") = "none",
        py::arg("emulate") = py::none());

  m.def("resolve_variant", [](const Model& model, std::optional<std::string> skip, std::optional<std::string> mlp,
                              std::optional<std::string> layernorm, std::optional<std::string> mask) {
    return variant_dict(model.resolve(overrides(skip, mlp, layernorm, mask)));
  });

  py::class_<LayerReport>(m, "LayerReport")
      .def_readonly("layer", &LayerReport::layer)
      .def_property_readonly("relative_residual", [](const LayerReport& l) { return number(l.relative_residual); })
      .def_property_readonly("residual", [](const LayerReport& l) { return number(l.res_composite); })
      .def_property_readonly("residual_lower", [](const LayerReport& l) { return number(l.res_composite_lower); })
      .def_property_readonly("residual_one", [](const LayerReport& l) { return number(l.res_one); })
      .def_property_readonly("residual_inf", [](const LayerReport& l) { return number(l.res_inf); })
      .def_property_readonly("residual_frobenius", [](const LayerReport& l) { return number(l.res_frobenius); })
      .def_property_readonly("norm", [](const LayerReport& l) { return number(l.norm_composite); })
      .def_property_readonly("norm_frobenius", [](const LayerReport& l) { return number(l.norm_frobenius); })
      .def_property_readonly("measures",
                             [](const LayerReport& l) {
                               py::dict d;  // in report order (dicts keep insertion order)
                               for (const MeasureReport& m : l.measures) d[py::str(m.name)] = number(m.value);
                               return d;
                             })
      .def_readonly("digits", &LayerReport::digits);

  py::class_<ForwardResult>(m, "ForwardResult")
      .def("format", &ForwardResult::format)
      .def_property_readonly("layers", [](const ForwardResult& r) { return r.a.layers; })
      .def_property_readonly("variant", [](const ForwardResult& r) { return variant_dict(r.a.variant); })
      .def_property_readonly("precision", [](const ForwardResult& r) { return r.a.precision.name(); })
      .def_property_readonly("check", [](const ForwardResult& r) { return precision_name(r.a.check); })
      .def_property_readonly("tried_bits", [](const ForwardResult& r) { return r.a.tried_bits; })
      .def_property_readonly("ceiling_reached", [](const ForwardResult& r) { return r.a.ceiling_reached; })
      .def_property_readonly("emulation", [](const ForwardResult& r) -> py::object {
        if (!r.a.emulation) return py::none();
        return emulation_dict(*r.a.emulation);
      });

  m.def("forward", [](ModelPtr model, const InputSpec& input, const std::string& name,
                      std::optional<std::string> skip, std::optional<std::string> mlp,
                      std::optional<std::string> layernorm, std::optional<std::string> mask,
                      const PrecisionRequest& req, const std::string& center, py::object progress) {
    const Center c = as_option("--center", [&] { return parse_center(center); });
    check_applies(req, c);
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    ProgressBridge bridge(progress);
    ForwardResult r{{model, {name, input.describe()}}, {}};
    r.a = run_released([&] { return analyze_forward(*model, v, input, req, c, bridge.fn()); }, &bridge);
    return r;
  });

  py::class_<CollapseResultPy>(m, "CollapseResult")
      .def("format", &CollapseResultPy::format)
      .def_property_readonly("variants", [](const CollapseResultPy& r) {
        std::vector<std::string> names;
        for (const NamedVariant& v : r.r.variants) names.push_back(v.name);
        return names;
      })
      .def_property_readonly("analyses", [](const CollapseResultPy& r) {
        std::vector<ForwardResult> out;
        for (const ForwardAnalysis& a : r.r.analyses) out.push_back(ForwardResult{{r.model, r.info}, a});
        return out;
      })
      .def_property_readonly("conventions", [](const CollapseResultPy& r) { return to_string(r.r.conventions); });
  m.def("collapse", [](ModelPtr model, const InputSpec& input, const std::string& name, const PrecisionRequest& req,
                       const std::string& conventions, py::object progress) {
    check_applies(req, Center::mean);
    const CollapseConventions c = conventions_of(conventions);
    ProgressBridge bridge(progress);
    CollapseResultPy r{{model, {name, input.describe()}}, {}};
    r.r = run_released([&] { return run_collapse(*model, input, req, bridge.fn(), c); }, &bridge);
    return r;
  });

  // ---- paths
  py::class_<LengthSumEntry>(m, "LengthSum")
      .def_readonly("length", &LengthSumEntry::length)
      .def_property_readonly("count", [](const LengthSumEntry& e) { return exact_int(e.count); })
      .def_property_readonly("frobenius", [](const LengthSumEntry& e) { return number(e.frobenius); })
      .def_property_readonly("residual", [](const LengthSumEntry& e) { return number(e.residual); })
      .def_property_readonly("share", [](const LengthSumEntry& e) { return number(e.share); })
      .def_readonly("digits", &LengthSumEntry::digits);
  py::class_<LengthSumsResult>(m, "LengthSumsResult")
      .def("format", &LengthSumsResult::format)
      .def_property_readonly("lengths", [](const LengthSumsResult& r) { return r.r.lengths; })
      .def_property_readonly("total", [](const LengthSumsResult& r) { return exact_int(r.r.total_count); })
      .def_property_readonly("decomposition_error", [](const LengthSumsResult& r) { return number(r.r.decomposition_error); })
      .def_property_readonly("output_frobenius", [](const LengthSumsResult& r) { return number(r.r.output_frobenius); })
      .def_property_readonly("precision", [](const LengthSumsResult& r) { return r.r.precision.name(); })
      .def_property_readonly("check", [](const LengthSumsResult& r) { return precision_name(r.r.check); })
      .def_property_readonly("decomposition_holds", [](const LengthSumsResult& r) {
        return decomposition_holds(r.r.decomposition_error, r.r.precision);
      });
  m.def("length_sums", [](ModelPtr model, const InputSpec& input, const std::string& name,
                          std::optional<std::string> skip, std::optional<std::string> mlp,
                          std::optional<std::string> layernorm, std::optional<std::string> mask,
                          const PrecisionRequest& req, bool verify, py::object progress) {
    check_honoured(req, CheckScope::paths);
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    ProgressBridge bridge(progress);
    LengthSumsResult r{{model, {name, input.describe()}}, {}};
    r.r = run_released([&] { return analyze_length_sums(*model, v, input, req, bridge.fn()); }, &bridge);
    if (verify) verify_decomposition(r.r.decomposition_error, r.r.precision, "--verify-decomposition");
    return r;
  });

  py::class_<PathTermEntry>(m, "PathTerm")
      .def_readonly("heads", &PathTermEntry::heads, "Per layer: head 0..H-1, -1 = skip connection.")
      .def_readonly("length", &PathTermEntry::length)
      .def_property_readonly("norm", [](const PathTermEntry& e) { return number(e.norm_composite); })
      .def_property_readonly("norm_frobenius", [](const PathTermEntry& e) { return number(e.norm_frobenius); })
      .def_property_readonly("residual", [](const PathTermEntry& e) { return number(e.residual_composite); })
      .def_property_readonly("stochastic_residual", [](const PathTermEntry& e) { return number(e.stochastic_residual); })
      .def_readonly("digits", &PathTermEntry::digits);
  py::class_<EnumerationResultPy>(m, "EnumerationResult")
      .def("format", &EnumerationResultPy::format)
      .def_property_readonly("paths", [](const EnumerationResultPy& r) { return r.r.paths; })
      .def_property_readonly("walked", [](const EnumerationResultPy& r) { return exact_int(r.r.walked); })
      .def_property_readonly("total", [](const EnumerationResultPy& r) { return exact_int(r.r.total_count); })
      .def_property_readonly("decomposition_error", [](const EnumerationResultPy& r) { return number(r.r.decomposition_error); })
      .def_property_readonly("precision", [](const EnumerationResultPy& r) { return r.r.precision.name(); })
      .def_property_readonly(
          "selected_at_bits",
          [](const EnumerationResultPy& r) { return r.r.selected_at ? std::optional<long>(r.r.selected_at->bits) : std::nullopt; },
          "check='certified': the bits of the tier that chose the paths (None otherwise).");

  const auto filter_of = [](const Model& model, const Variant& v, std::optional<int> length,
                            std::optional<std::pair<int, int>> lengths, std::optional<std::string> heads_per_layer) {
    PathFilter f;
    if (length) f = PathFilter::length(*length);
    if (lengths) f = PathFilter::lengths(lengths->first, lengths->second);
    if (heads_per_layer)
      f.allowed_heads = parse_heads_per_layer(*heads_per_layer, model.arch().layers, model.arch().heads, v.skip);
    validate_filter(f, model.arch().layers, model.arch().heads, v.skip);
    return f;
  };
  m.def("enumerate_paths", [filter_of](ModelPtr model, const InputSpec& input, const std::string& name,
                              std::optional<std::string> skip, std::optional<std::string> mlp,
                              std::optional<std::string> layernorm, std::optional<std::string> mask,
                              const PrecisionRequest& req,
                              std::optional<int> length, std::optional<std::pair<int, int>> lengths,
                              std::optional<std::string> heads_per_layer, std::size_t top, int threads,
                              std::uint64_t limit, bool verify, py::object progress) {
    check_honoured(req, CheckScope::paths);
    // As `paths --enumerate --verify-decomposition`: Theorem 2.1 sums every path.
    if (verify && (length || lengths || heads_per_layer))
      throw std::invalid_argument("verify_decomposition: the reconstruction is checked on every path only: use it "
                                  "with length_sums, or without length, lengths and heads_per_layer");
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    EnumerationRequest er;
    er.filter = filter_of(*model, v, length, lengths, heads_per_layer);
    er.top_k = top;
    er.threads = threads;
    er.limit = limit;
    ProgressBridge bridge(progress);
    EnumerationResultPy r{{model, {name, input.describe()}}, {}};
    r.r = run_released([&] { return analyze_enumeration(*model, v, input, req, er, bridge.fn()); }, &bridge);
    if (verify && r.r.decomposition_error)
      verify_decomposition(*r.r.decomposition_error, r.r.precision, "verify_decomposition");
    return r;
  });

  py::class_<PathStream>(m, "PathStream")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", [](PathStream& s) {
        std::optional<PathTermEntry> e = s.next();
        if (!e) throw py::stop_iteration();
        return *e;
      })
      .def("close", &PathStream::close)
      .def_property_readonly("precision", [](const PathStream& s) { return s.base().precision.name(); })
      .def_property_readonly("check", [](const PathStream& s) { return precision_name(s.base().check); });
  m.def("iter_paths", [filter_of](ModelPtr model, const InputSpec& input, std::optional<std::string> skip,
                                  std::optional<std::string> mlp, std::optional<std::string> layernorm,
                                  std::optional<std::string> mask, const PrecisionRequest& req,
                                  std::optional<int> length,
                                  std::optional<std::pair<int, int>> lengths,
                                  std::optional<std::string> heads_per_layer, std::uint64_t limit) {
    check_honoured(req, CheckScope::paths);
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    require_attention_only(v);
    const PathFilter f = filter_of(*model, v, length, lengths, heads_per_layer);
    return std::make_unique<PathStream>(model, v, input, req, f, limit);
  });

  py::class_<SampleResult>(m, "SampleResult").def("format", &SampleResult::format);
  m.def("sample_paths", [](ModelPtr model, const InputSpec& input, const std::string& name,
                           std::optional<std::string> skip, std::optional<std::string> mlp,
                           std::optional<std::string> layernorm, std::optional<std::string> mask,
                           const PrecisionRequest& req,
                           const std::vector<int>& lengths, std::uint64_t samples, std::uint64_t seed,
                           py::object progress) {
    check_honoured(req, CheckScope::path_sampling);
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    ProgressBridge bridge(progress);
    SampleResult r{{model, {name, input.describe()}}, {}};
    r.r = run_released([&] { return analyze_samples(*model, v, input, req, lengths, samples, seed, bridge.fn()); },
                       &bridge);
    return r;
  });

  py::class_<GraphResult>(m, "GraphResult")
      .def("format", &GraphResult::format)
      .def_property_readonly("total", [](const GraphResult& g) { return exact_int(g.counts.total); })
      .def_property_readonly("by_length", [](const GraphResult& g) {
        py::list out;
        for (const BigInt& c : g.counts.by_length) out.append(exact_int(c));
        return out;
      })
      .def_property_readonly("vertices", [](const GraphResult& g) { return path_graph_size(g.spec).vertices; })
      .def_property_readonly("edges", [](const GraphResult& g) { return path_graph_size(g.spec).edges; })
      .def("dot", [](const GraphResult& g) {
        std::ostringstream out;
        write_dot(out, PathGraph(g.spec));
        return out.str();
      });
  m.def("path_counts", [](int layers, int heads, bool skip) {
    GraphResult g;
    g.spec.layers = layers;
    g.spec.heads = heads;
    g.spec.skip = skip;
    validate(g.spec);
    g.counts = run_released([&] { return count_paths(g.spec); });
    return g;
  });

  // ---- bounds
  py::class_<MeasuredDepth>(m, "MeasuredDepth")
      .def_readonly("layer", &MeasuredDepth::layer)
      .def_property_readonly("lower", [](const MeasuredDepth& d) { return number(d.lower); })
      .def_property_readonly("upper", [](const MeasuredDepth& d) { return number(d.upper); })
      .def_property_readonly("relative", [](const MeasuredDepth& d) { return number(d.relative); })
      .def_readonly("digits", &MeasuredDepth::digits);
  py::class_<BoundsResult>(m, "BoundsResult")
      .def("format", &BoundsResult::format)
      .def_property_readonly("applicable", [](const BoundsResult& r) { return r.a.applicable(); })
      .def_property_readonly("theorem", [](const BoundsResult& r) { return to_string(r.a.report.theorem.theorem); })
      .def_property_readonly("measured", [](const BoundsResult& r) { return r.a.measured.depths; })
      .def_property_readonly("verdicts", [](const BoundsResult& r) {
        std::vector<std::string> out;
        for (const DepthComparison& d : r.a.report.depths) out.push_back(to_string(d.verdict));
        return out;
      })
      .def_property_readonly("verdicts_proven", [](const BoundsResult& r) { return r.a.verdicts_proven; })
      .def_property_readonly("notes", [](const BoundsResult& r) { return bounds_notes(r.a); })
      .def_property_readonly("precision", [](const BoundsResult& r) { return r.a.precision().name(); });
  m.def("bounds", [](ModelPtr model, const InputSpec& input, const std::string& name, std::optional<std::string> skip,
                     std::optional<std::string> mlp, std::optional<std::string> layernorm,
                     std::optional<std::string> mask, const PrecisionRequest& req, const std::string& theorem,
                     const std::string& gamma, py::object progress) {
    BoundsRequest br;
    br.precision = req;
    br.theorem = as_option("--theorem", [&] { return parse_theorem(theorem); });
    br.gamma = as_option("--gamma", [&] { return BoundsRequest::parse_gamma(gamma); });
    const Variant v = model->resolve(overrides(skip, mlp, layernorm, mask));
    as_option("--theorem", [&] { return select_theorem(v, model->arch().heads, br.theorem, Coverage::of(*model, v)); });
    ProgressBridge bridge(progress);
    BoundsResult r{{model, {name, input.describe()}}, {}};
    r.a = run_released([&] { return analyze_bounds(*model, v, input, br, bridge.fn()); }, &bridge);
    return r;
  });

  // ---- report
  // A batch (`input` a Batch): the collapse section shows mean ± std over the inputs, as `sanpath report` with a batch.
  m.def("report_html", [](ModelPtr model, const std::variant<InputSpec, Batch>& input, const std::string& name,
                          const PrecisionRequest& precision, const std::string& gamma, const std::string& conventions,
                          int threads, std::uint64_t rerun, int repeats, const std::string& generator,
                          std::optional<std::string> out, py::object progress) {
    check_honoured(precision, CheckScope::paths);
    ReportRequest req;
    as_option("repeats", [&] { return RerunRequest::checked_repeats(repeats); });
    if (rerun > 0) {  // as `sanpath report --rerun N --repeats R`
      RerunRequest rr;
      rr.samples = rerun;
      rr.repeats = repeats;
      req.rerun = rr;
    }
    req.precision = precision;
    req.bounds.gamma = as_option("--gamma", [&] { return BoundsRequest::parse_gamma(gamma); });
    req.generator = generator;
    req.conventions = conventions_of(conventions);
    const Batch* batch = std::get_if<Batch>(&input);
    req.info = {name, batch ? batch->description : std::get<InputSpec>(input).describe(),
                task_head_absence(*model)};
    req.head = task_head_of(*model);
    ProgressBridge bridge(progress);
    const HtmlReport report = run_released([&] {
      return batch ? build_report(*model, batch->inputs, req, threads, bridge.fn())
                   : build_report(*model, std::get<InputSpec>(input), req, bridge.fn());
    }, &bridge);
    if (out) {
      write_html_report(*out, report);
      return std::string();
    }
    return render_html(report);
  });

  register_batches(m);
  register_effectiveness(m);
  register_emulate(m);
  register_search(m);

  // ---- resources
  m.def("set_memory_budget", [](std::optional<std::string> size) {
    set_memory_budget(size ? std::optional<std::uint64_t>(parse_byte_size(*size, "memory budget")) : std::nullopt);
  });
  m.def("memory_budget", [] { return memory_budget(); });
  m.def("set_threads", [](int threads) {
    check_thread_count(threads);
    set_product_threads(threads);
  });
  m.def("threads", [] { return product_threads(); });
}

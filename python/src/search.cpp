// `sanpath bounds --search` (analysis/search.hpp): a seeded search over
// small random SANs for weights and inputs closest to the bound.
#include <pybind11/eigen.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "sanpath/analysis/search.hpp"

#include "common.hpp"
#include "run.hpp"

namespace sanpath_py {

namespace {

struct SearchResult {
  BoundsSearchResult r;
  ModelPtr model;  ///< the best model (shared with the re-check's result)
  std::string format(const std::string& f) const { return format_bounds_search(r, parse_format(f)); }
};

double to_double(const BigReal& x) { return x.convert_to<double>(); }

}  // namespace

void register_search(py::module_& m) {
  py::class_<SearchStep>(m, "SearchStep")
      .def_readonly("iteration", &SearchStep::iteration)
      .def_property_readonly("log10_ratio", [](const SearchStep& s) { return to_double(s.log10_ratio); })
      .def_readonly("depth", &SearchStep::depth);
  py::class_<SearchResult>(m, "BoundsSearchResult")
      .def("format", &SearchResult::format)
      .def_property_readonly("model", [](const SearchResult& s) { return s.model; })
      .def_property_readonly("X", [](const SearchResult& s) { return s.r.X; })
      .def_property_readonly("log10_ratio", [](const SearchResult& s) { return to_double(s.r.log10_ratio); })
      .def_property_readonly("depth", [](const SearchResult& s) { return s.r.depth; })
      .def_property_readonly("evaluations", [](const SearchResult& s) { return s.r.evaluations; })
      .def_property_readonly("improvements", [](const SearchResult& s) { return s.r.improvements; })
      .def_property_readonly("recheck", [](const SearchResult& s) -> std::optional<BoundsResult> {
        if (!s.r.recheck || !s.model) return std::nullopt;
        const std::string name = s.r.model_path.empty() ? "bounds search (best model)" : s.r.model_path;
        const std::string input = "X (" + std::to_string(s.r.X.rows()) + "×" + std::to_string(s.r.X.cols()) + ")";
        return BoundsResult{{s.model, {name, input}}, *s.r.recheck};
      })
      .def_property_readonly("recheck_log10_ratio", [](const SearchResult& s) -> std::optional<double> {
        if (!s.r.recheck_log10_ratio) return std::nullopt;
        return to_double(*s.r.recheck_log10_ratio);
      })
      .def_property_readonly("recheck_depth", [](const SearchResult& s) { return s.r.recheck_depth; })
      .def_property_readonly("violated", [](const SearchResult& s) { return s.r.violated; })
      .def_property_readonly("model_path", [](const SearchResult& s) { return s.r.model_path; })
      .def_property_readonly("input_path", [](const SearchResult& s) { return s.r.input_path; })
      .def("save", [](SearchResult& s, const std::string& path) { save_search_result(s.r, path); });
  m.def("search_input_path", &search_input_path);
  m.def("bounds_search", [](int layers, int heads, int d_model, int d_qk, int tokens, std::uint64_t seed,
                            int iterations, long search_bits, const std::string& theorem, const std::string& gamma,
                            const PrecisionRequest& recheck, py::object progress) {
    BoundsSearchSpec spec;
    spec.layers = layers;
    spec.heads = heads;
    spec.d_model = d_model;
    spec.d_qk = d_qk;
    spec.tokens = tokens;
    spec.seed = seed;
    spec.iterations = iterations;
    spec.search_bits = search_bits;
    spec.theorem = as_option("--theorem", [&] { return parse_theorem(theorem); });
    spec.gamma = as_option("--gamma", [&] { return BoundsRequest::parse_gamma(gamma); });
    spec.recheck = recheck;
    as_option("--search", [&] {
      spec.validate();
      return 0;
    });
    ProgressBridge bridge(progress);
    SearchResult s;
    s.r = run_released([&] { return search_bounds(spec, bridge.fn()); }, &bridge);
    if (s.r.model) s.model = std::make_shared<Model>(*s.r.model);
    return s;
  });
}

}  // namespace sanpath_py

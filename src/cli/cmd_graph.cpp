#include "common.hpp"

#include "sanpath/core/errors.hpp"
#include "sanpath/compute/path_graph.hpp"
#include "sanpath/io/atomic_file.hpp"

#include <sstream>

namespace sanpath::cli {

void register_graph(CLI::App& app) {
  auto* cmd = app.add_subcommand("graph", "Head-path graph of an L-layer, H-head network: exact path counts, DOT");
  struct Opts {
    int layers = 0, heads = 0;
    std::string skip, dot;
    OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--layers", o->layers, "number of layers L (1.." + std::to_string(max_path_graph_size) + ")")
      ->required();
  cmd->add_option("--heads", o->heads, "heads per layer H (1.." + std::to_string(max_path_graph_size) + ")")
      ->required();
  cmd->add_option("--skip", o->skip, "skip connections: on|off (on: one skip vertex per layer, paths of length 0..L)")
      ->required();
  cmd->add_option("--dot", o->dot,
                  "also write the graph in Graphviz DOT to this file (atomically; at most " +
                      std::to_string(max_explicit_edges) + " edges; default: no DOT file)");
  o->out.add(*cmd);
  cmd->footer(
      "\nCounts the paths of the head-path DAG of math.md §4 (a path picks one head, or the skip connection, per "
      "layer; its length is the number of heads it picks) exactly, by length: C(L,k)·H^k with skip, H^L without; "
      "total (H+1)^L or H^L. Counts are exact integers of any size (JSON: decimal strings).\n\nExamples:\n"
      "  sanpath graph --layers 12 --heads 12 --skip on\n"
      "  sanpath graph --layers 3 --heads 2 --skip off --dot paths.dot --format json\n");
  cmd->callback([o] {
    const Format fmt = o->out.parsed();
    PathGraphSpec spec;
    spec.layers = o->layers;
    spec.heads = o->heads;
    spec.skip = as_usage("--skip", [&] { return parse_on_off(o->skip, "skip"); });
    as_usage("--layers/--heads", [&] { validate(spec); });
    if (path_count_work(spec) > max_path_count_work)
      throw ResourceError("path counts by length of layers=" + std::to_string(spec.layers) +
                          ", heads=" + std::to_string(spec.heads) + " with skip need about " +
                          std::to_string(static_cast<long long>(path_count_work(spec))) +
                          " limb operations, above the limit of " +
                          std::to_string(static_cast<long long>(max_path_count_work)) + " (the total is (H+1)^L)");
    if (!o->dot.empty()) {
      const PathGraphSize size = path_graph_size(spec);
      if (size.edges > max_explicit_edges)
        throw ResourceError("--dot: the graph has " + std::to_string(size.edges) + " edges, more than the " +
                            std::to_string(max_explicit_edges) + " a DOT file is written for");
      std::ostringstream dot;
      write_dot(dot, PathGraph(spec));
      write_file_atomic(o->dot, dot.str());
    }
    o->out.emit(format_path_counts(spec, count_paths(spec), fmt));
  });
}

}  // namespace sanpath::cli

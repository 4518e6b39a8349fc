#include "sanpath/compute/path_graph.hpp"

// GCC 12 at -O2 reports -Wmaybe-uninitialized inside Boost 1.74's
// adjacency_list edge iterator (a boost::optional member), which
// write_graphviz uses: a false positive, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <boost/graph/graphviz.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <ostream>
#include <sstream>
#include <stdexcept>

namespace sanpath {

PathGraphSize path_graph_size(const PathGraphSpec& spec) {
  validate(spec);
  const std::int64_t L = spec.layers;
  const std::int64_t V = spec.heads + (spec.skip ? 1 : 0);
  return {L * V + 2, V + (L - 1) * V * V + V};  // <= 1e5·1e5² ≈ 1e15: fits
}

// ---------------------------------------------------------------- the graph

namespace {

/// Vertex count of an explicit graph, after the refusal of huge ones.
std::size_t explicit_vertices(const PathGraphSpec& spec) {
  const PathGraphSize size = path_graph_size(spec);
  if (size.edges > max_explicit_edges)
    throw std::invalid_argument("path graph: " + to_string(spec) + " has " + std::to_string(size.edges) +
                                " edges, more than the " + std::to_string(max_explicit_edges) +
                                " an explicit graph may have (path counts need no graph)");
  return static_cast<std::size_t>(size.vertices);
}

}  // namespace

PathGraph::PathGraph(PathGraphSpec spec)
    : spec_(spec), per_layer_(spec.heads + (spec.skip ? 1 : 0)), g_(explicit_vertices(spec)) {
  const int L = spec_.layers, H = spec_.heads;
  g_[source()] = {PathVertexKind::source, 0, -1};
  for (int l = 1; l <= L; ++l) {
    for (int h = 0; h < H; ++h) g_[head_vertex(l, h)] = {PathVertexKind::head, l, h};
    if (spec_.skip) g_[skip_vertex(l)] = {PathVertexKind::skip, l, -1};
  }
  g_[sink()] = {PathVertexKind::sink, L + 1, -1};

  // Layer by layer: source -> layer 1, layer l-1 -> layer l, layer L -> sink.
  const auto first = [&](int l) { return static_cast<Vertex>(1 + static_cast<std::int64_t>(l - 1) * per_layer_); };
  for (int j = 0; j < per_layer_; ++j) boost::add_edge(source(), first(1) + j, g_);
  for (int l = 2; l <= L; ++l)
    for (int i = 0; i < per_layer_; ++i)
      for (int j = 0; j < per_layer_; ++j) boost::add_edge(first(l - 1) + i, first(l) + j, g_);
  for (int i = 0; i < per_layer_; ++i) boost::add_edge(first(L) + i, sink(), g_);
}

PathGraph::Vertex PathGraph::sink() const {
  return static_cast<Vertex>(static_cast<std::int64_t>(spec_.layers) * per_layer_ + 1);
}

PathGraph::Vertex PathGraph::head_vertex(int layer, int head) const {
  if (layer < 1 || layer > spec_.layers) throw std::out_of_range("path graph: layer " + std::to_string(layer) + " out of range");
  if (head < 0 || head >= spec_.heads) throw std::out_of_range("path graph: head " + std::to_string(head) + " out of range");
  return static_cast<Vertex>(1 + static_cast<std::int64_t>(layer - 1) * per_layer_ + head);
}

PathGraph::Vertex PathGraph::skip_vertex(int layer) const {
  if (!spec_.skip) throw std::logic_error("path graph: no skip vertices (skip is off)");
  if (layer < 1 || layer > spec_.layers) throw std::out_of_range("path graph: layer " + std::to_string(layer) + " out of range");
  return static_cast<Vertex>(1 + static_cast<std::int64_t>(layer - 1) * per_layer_ + spec_.heads);
}

std::string PathGraph::label(Vertex v) const {
  const PathVertex& p = g_[v];
  switch (p.kind) {
    case PathVertexKind::source: return "src";
    case PathVertexKind::sink: return "sink";
    case PathVertexKind::skip: return "L" + std::to_string(p.layer) + " skip";
    case PathVertexKind::head: return "L" + std::to_string(p.layer) + " h" + std::to_string(p.head);
  }
  return "?";
}

// ----------------------------------------------------------------- counting


// ---------------------------------------------------------------------- DOT

void write_dot(std::ostream& out, const PathGraph& pg) {
  const PathGraph::Graph& g = pg.graph();
  const PathGraphSpec& s = pg.spec();
  const int per_layer = s.heads + (s.skip ? 1 : 0);
  const auto vertex_writer = [&pg](std::ostream& os, PathGraph::Vertex v) {
    os << "[label=" << boost::escape_dot_string(pg.label(v)) << "]";
  };
  const auto graph_writer = [&](std::ostream& os) {
    os << "rankdir=LR;\n";
    os << "{rank=min; " << pg.source() << ";}\n";
    for (int l = 1; l <= s.layers; ++l) {
      os << "{rank=same;";
      const PathGraph::Vertex first = pg.head_vertex(l, 0);
      for (int j = 0; j < per_layer; ++j) os << ' ' << first + static_cast<PathGraph::Vertex>(j) << ';';
      os << "}\n";
    }
    os << "{rank=max; " << pg.sink() << ";}\n";
  };
  boost::write_graphviz(out, g, vertex_writer, boost::default_writer(), graph_writer);
}

std::string to_decimal(const BigInt& x) { return x.str(); }

}  // namespace sanpath

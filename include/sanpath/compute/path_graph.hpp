#pragma once
/// \file path_graph.hpp
/// The head-path DAG of math.md §4 (Boost.Graph) and its Graphviz DOT output.
///
/// The DAG has a source, one vertex per (layer l = 1..L, head h = 0..H-1),
/// with skip connections one extra "skip" vertex per layer, and a sink;
/// edges go from every vertex of layer l−1 (the source for l = 1) to every
/// vertex of layer l, and from every vertex of layer L to the sink. A
/// source→sink path picks one vertex per layer, i.e. one head sequence
/// (h_1, …, h_L) of math.md §4: graph head h is math.md's h_l = h + 1, the
/// skip vertex is h_l = 0 ("the path takes the skip connection"). The
/// length of a path is its number of non-skip vertices (source and sink
/// excluded), so lengths run over 0..L.
///
/// Counting never builds the graph (compute/path_counts.hpp): every vertex
/// of a layer has the same in-neighbours, so the per-vertex dynamic
/// programme collapses to one count vector per layer. The explicit Boost
/// graph is for DOT output (and, in the tests, for checking the counts on
/// small sizes); it is refused above max_explicit_edges edges.

#include "sanpath/compute/path_counts.hpp"

#include <boost/graph/adjacency_list.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace sanpath {

/// Largest number of edges PathGraph builds explicitly.
inline constexpr std::int64_t max_explicit_edges = 1000000;

/// Vertex and edge numbers of the DAG, in closed form (no graph is built):
/// with V = H + [skip] vertices per layer, vertices = L·V + 2 and
/// edges = V + (L−1)·V² + V. Validates the spec.
struct PathGraphSize {
  std::int64_t vertices = 0;
  std::int64_t edges = 0;
};
PathGraphSize path_graph_size(const PathGraphSpec& spec);

enum class PathVertexKind { source, head, skip, sink };

/// Bundled vertex property. `layer`: 0 for the source, 1..L for layer
/// vertices, L+1 for the sink. `head`: 0..H−1 for head vertices, −1 otherwise.
struct PathVertex {
  PathVertexKind kind = PathVertexKind::source;
  int layer = 0;
  int head = -1;
};

/// The explicit layered DAG. Vertex indices: source 0; layer l (1-based),
/// slot j (heads j = 0..H−1, then the skip vertex j = H) at 1 + (l−1)·V + j;
/// sink L·V + 1. Edges are inserted layer by layer, so vertex index order
/// is a topological order.
class PathGraph {
 public:
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, PathVertex>;
  using Vertex = boost::graph_traits<Graph>::vertex_descriptor;

  /// Validates `spec`; throws std::invalid_argument naming the edge count
  /// when it exceeds max_explicit_edges (counts still work without a graph).
  explicit PathGraph(PathGraphSpec spec);

  const Graph& graph() const { return g_; }
  const PathGraphSpec& spec() const { return spec_; }
  Vertex source() const { return 0; }
  Vertex sink() const;
  /// Head vertex of layer `layer` (1..L), head `head` (0..H−1).
  Vertex head_vertex(int layer, int head) const;
  /// Skip vertex of layer `layer` (1..L); throws std::logic_error without skip.
  Vertex skip_vertex(int layer) const;
  /// "src", "L<l> h<h>", "L<l> skip", "sink".
  std::string label(Vertex v) const;

 private:
  PathGraphSpec spec_;
  int per_layer_;  ///< V = H + [skip]
  Graph g_;
};

/// Graphviz DOT of the graph (boost::write_graphviz): vertices labelled as
/// PathGraph::label, left to right, one `{rank=same; …}` group per layer
/// (L groups), the source at rank=min and the sink at rank=max.
void write_dot(std::ostream& out, const PathGraph& graph);

/// Exact decimal digits of an integer (with a leading '-' if negative).
std::string to_decimal(const BigInt& x);

}  // namespace sanpath

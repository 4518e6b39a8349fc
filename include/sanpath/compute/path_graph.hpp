#pragma once
/// \file graph.hpp
/// The head-path DAG of math.md §4 (Boost.Graph), exact path counts
/// (boost::multiprecision::cpp_int) and Graphviz DOT output.
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
/// Counting never builds the graph: every vertex of a layer has the same
/// in-neighbours (all of the previous layer), so the per-vertex dynamic
/// programme collapses to one count vector per layer (see count_paths).
/// The explicit Boost graph is for DOT output and for checking the counts on
/// small sizes; it is refused above max_explicit_edges edges.

#include <boost/graph/adjacency_list.hpp>
#include <boost/multiprecision/cpp_int.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace sanpath {

/// Exact integer for path counts (arbitrary precision).
using BigInt = boost::multiprecision::cpp_int;

/// Sizes of the head-path DAG. `layers` = L, `heads` = H, each in
/// [1, max_path_graph_size]; `skip`: one skip vertex per layer.
struct PathGraphSpec {
  int layers = 1;
  int heads = 1;
  bool skip = false;
};

/// Upper limit of PathGraphSpec::layers and ::heads.
inline constexpr int max_path_graph_size = 100000;
/// Largest number of edges PathGraph builds explicitly.
inline constexpr std::int64_t max_explicit_edges = 1000000;

/// Throws std::invalid_argument (one line, naming the field) unless
/// 1 <= layers, heads <= max_path_graph_size.
void validate(const PathGraphSpec& spec);

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

/// Numbers of source→sink paths: by_length[k], k = 0..L, counts the paths
/// with k non-skip vertices; total = Σ_k by_length[k].
struct PathCounts {
  BigInt total;
  std::vector<BigInt> by_length;
};

/// Path counts by dynamic programming over the layers in topological order
/// (source, layer 1, …, layer L, sink). With a_l[k] the number of paths of
/// length k from the source into layer l, summed over the layer's vertices:
/// a_0 = e_0 and \f$ a_l[k] = H\,a_{l-1}[k-1] + [\mathrm{skip}]\,a_{l-1}[k] \f$
/// (each of the H head vertices extends every path by one, the skip vertex
/// by none); the sink receives a_L. This is the per-vertex DP of the graph
/// aggregated per layer, valid because a layer's vertices share their
/// in-neighbours. Cost: O(L²) multiply-adds of a big integer by a word
/// (O(L) without skip), on integers of up to L·log2(H+1) bits; no graph.
/// Throws std::invalid_argument for an invalid spec or when the estimated
/// work (path_count_work) exceeds max_path_count_work.
PathCounts count_paths(const PathGraphSpec& spec);

/// Estimated work of count_paths in 64-bit limb operations (with skip about
/// L³·(log2 H / 6 + 1/4) / 64; without skip L²·log2 H / 256, so every valid
/// spec without skip is countable, ~1 s at L = H = 100000).
double path_count_work(const PathGraphSpec& spec);
/// Refusal threshold of count_paths and closed_form_counts: about 3 s of
/// count_paths on one core (measured ~3·10^8 units/s; (1000,1000) with skip
/// is 3.2·10^7, about 0.1 s; (2000,1000) 2.5·10^8; (3000,100000) is refused).
inline constexpr double max_path_count_work = 1e9;

/// The same counts by the per-vertex DP on an explicit graph: vertices in
/// topological order (boost::topological_sort), each vertex's by-length
/// vector is the sum of its in-neighbours' vectors, shifted by one at head
/// vertices. Cost O(E·L) big-integer additions: a check for small graphs;
/// throws std::invalid_argument when E·(L+1) exceeds max_graph_count_work.
PathCounts count_paths_on_graph(const PathGraph& graph);
inline constexpr double max_graph_count_work = 5e7;

/// Closed forms of math.md §4, computed independently of any DP: with skip
/// by_length[k] = C(L,k)·H^k and total = (H+1)^L; without skip only
/// by_length[L] = H^L = total. Binomials by the multiplicative formula
/// C(L,k) = C(L,k−1)·(L−k+1)/k, H^k by repeated multiplication, the total
/// by boost::multiprecision::pow (so Σ_k by_length[k] = total is the
/// binomial theorem, a check). Same refusal as count_paths.
PathCounts closed_form_counts(const PathGraphSpec& spec);

/// Total number of paths only, (H+1)^L or H^L: cheap for every valid spec.
BigInt total_paths(const PathGraphSpec& spec);

/// Graphviz DOT of the graph (boost::write_graphviz): vertices labelled as
/// PathGraph::label, left to right, one `{rank=same; …}` group per layer
/// (L groups), the source at rank=min and the sink at rank=max.
void write_dot(std::ostream& out, const PathGraph& graph);

/// Exact decimal digits of an integer (with a leading '-' if negative).
std::string to_decimal(const BigInt& x);

}  // namespace sanpath

#pragma once
// Independent path counts for the tests of compute/path_counts.hpp: the
// per-vertex dynamic programme on an explicit Boost graph, and the closed
// forms of math.md §4. Neither shares code with the library's counting.
#include "sanpath/compute/path_graph.hpp"

#include <boost/graph/topological_sort.hpp>

#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace sanpath::test {

/// Refusal threshold of count_paths_on_graph: E·(L+1) big-integer additions.
inline constexpr double max_graph_count_work = 5e7;

/// The counts by the per-vertex DP on an explicit graph: vertices in
/// topological order (boost::topological_sort), each vertex's by-length
/// vector is the sum of its in-neighbours' vectors, shifted by one at head
/// vertices. Cost O(E·L) big-integer additions.
inline PathCounts count_paths_on_graph(const PathGraph& pg) {
  const PathGraph::Graph& g = pg.graph();
  const int L = pg.spec().layers;
  const double work = static_cast<double>(boost::num_edges(g)) * (L + 1);
  if (work > max_graph_count_work)
    throw std::invalid_argument("count_paths_on_graph: " + to_string(pg.spec()) + " needs about " +
                                std::to_string(work) + " big-integer additions");
  std::vector<PathGraph::Vertex> order;
  order.reserve(boost::num_vertices(g));
  boost::topological_sort(g, std::back_inserter(order));  // reverse topological order
  std::vector<std::vector<BigInt>> c(boost::num_vertices(g));
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const PathGraph::Vertex v = *it;
    std::vector<BigInt>& cv = c[v];
    if (cv.empty()) cv.assign(static_cast<std::size_t>(L) + 1, BigInt(0));
    if (v == pg.source()) cv[0] = 1;
    auto edges = boost::out_edges(v, g);
    for (auto e = edges.first; e != edges.second; ++e) {
      std::vector<BigInt>& cw = c[boost::target(*e, g)];
      if (cw.empty()) cw.assign(static_cast<std::size_t>(L) + 1, BigInt(0));
      // A path arriving at w through v has v's length plus 1 if w is a head.
      const bool w_head = g[boost::target(*e, g)].kind == PathVertexKind::head;
      for (int k = 0; k <= L; ++k) {
        const BigInt& x = cv[static_cast<std::size_t>(k)];
        if (x == 0) continue;
        const int kk = k + (w_head ? 1 : 0);
        if (kk > L) throw std::logic_error("count_paths_on_graph: path longer than the number of layers");
        cw[static_cast<std::size_t>(kk)] += x;
      }
    }
    if (v != pg.sink()) std::vector<BigInt>().swap(cv);  // consumed: every out-edge is done
  }
  PathCounts out;
  out.by_length = std::move(c[pg.sink()]);
  out.total = 0;
  for (const BigInt& x : out.by_length) out.total += x;
  return out;
}

/// Closed forms of math.md §4: with skip by_length[k] = C(L,k)·H^k and
/// total = (H+1)^L; without skip only by_length[L] = H^L = total. Binomials
/// by the multiplicative formula, H^k by repeated multiplication, the total
/// by boost::multiprecision::pow (so Σ_k by_length[k] = total is the
/// binomial theorem, a check).
inline PathCounts closed_form_counts(const PathGraphSpec& spec) {
  validate(spec);
  if (path_count_work(spec) > max_path_count_work)
    throw std::invalid_argument("closed_form_counts: " + to_string(spec) + " is above the counting limit");
  const int L = spec.layers;
  PathCounts out;
  out.total = boost::multiprecision::pow(BigInt(spec.heads + (spec.skip ? 1 : 0)), static_cast<unsigned>(L));
  out.by_length.assign(static_cast<std::size_t>(L) + 1, BigInt(0));
  if (!spec.skip) {
    out.by_length[static_cast<std::size_t>(L)] = boost::multiprecision::pow(BigInt(spec.heads), static_cast<unsigned>(L));
    return out;
  }
  BigInt binom = 1;  // C(L, k)
  BigInt power = 1;  // H^k
  for (int k = 0; k <= L; ++k) {
    if (k > 0) {
      binom *= static_cast<unsigned>(L - k + 1);
      binom /= static_cast<unsigned>(k);  // exact: C(L,k−1)·(L−k+1) = C(L,k)·k
      power *= static_cast<unsigned>(spec.heads);
    }
    out.by_length[static_cast<std::size_t>(k)] = binom * power;
  }
  return out;
}

}  // namespace sanpath::test

#include "sanpath/compute/path_graph.hpp"

// GCC 12 at -O2 reports -Wmaybe-uninitialized inside Boost 1.74's
// adjacency_list edge iterator (a boost::optional member), which
// write_graphviz uses: a false positive, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <boost/graph/graphviz.hpp>
#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <ostream>
#include <sstream>
#include <stdexcept>

namespace sanpath {

namespace {

void check_size(const char* field, int value) {
  if (value < 1 || value > max_path_graph_size)
    throw std::invalid_argument(std::string("path graph: ") + field + " must be in [1, " +
                                std::to_string(max_path_graph_size) + "], got " + std::to_string(value));
}

std::string spec_text(const PathGraphSpec& s) {
  return "layers=" + std::to_string(s.layers) + ", heads=" + std::to_string(s.heads) +
         ", skip=" + (s.skip ? "on" : "off");
}

std::string sci(double x) {
  std::ostringstream os;
  os.precision(2);
  os << std::scientific << x;
  return os.str();
}

void check_count_work(const PathGraphSpec& spec, const char* who) {
  const double work = path_count_work(spec);
  if (work > max_path_count_work)
    throw std::invalid_argument(std::string(who) + ": " + spec_text(spec) + " needs about " + sci(work) +
                                " limb operations (limit " + sci(max_path_count_work) +
                                "); use total_paths for the total alone");
}

}  // namespace

void validate(const PathGraphSpec& spec) {
  check_size("layers", spec.layers);
  check_size("heads", spec.heads);
}

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
    throw std::invalid_argument("path graph: " + spec_text(spec) + " has " + std::to_string(size.edges) +
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

double path_count_work(const PathGraphSpec& spec) {
  validate(spec);
  const double L = spec.layers;
  const double lg = std::log2(static_cast<double>(spec.heads));
  constexpr double per_op = 4.0;  // fixed cost of one big-integer operation, in limbs
  // Units are limbs touched, calibrated so that 10^9 units take about 3 s.
  // Without skip one word multiplication per layer: Σ_l l·log2 H / 64 limbs,
  // half weighted (one pass instead of the multiply and add passes below).
  if (!spec.skip) return L * L * lg / 256.0 + L * per_op;
  // Σ_l Σ_{k<=l} log2(C(l,k)·H^k) bits ≈ L³·(log2 H / 6 + 0.24).
  return L * L * L * (lg / 6.0 + 0.24) / 64.0 + L * L / 2.0 * per_op;
}

PathCounts count_paths(const PathGraphSpec& spec) {
  check_count_work(spec, "count_paths");
  const int L = spec.layers;
  const unsigned H = static_cast<unsigned>(spec.heads);
  PathCounts out;
  std::vector<BigInt>& a = out.by_length;
  a.assign(static_cast<std::size_t>(L) + 1, BigInt(0));
  if (!spec.skip) {
    // Only length l reaches layer l: a_l[l] = H·a_{l−1}[l−1].
    BigInt x = 1;
    for (int l = 1; l <= L; ++l) x *= H;
    a[static_cast<std::size_t>(L)] = x;
    out.total = x;
    return out;
  }
  // Source: the empty path, length 0. Layer l: k from high to low so that
  // a[k−1] still holds layer l−1 when a[k] is updated in place.
  a[0] = 1;
  for (int l = 1; l <= L; ++l)
    for (int k = l; k >= 1; --k) a[static_cast<std::size_t>(k)] += a[static_cast<std::size_t>(k - 1)] * H;
  // Sink: the sum over layer L.
  out.total = 0;
  for (const BigInt& c : a) out.total += c;
  return out;
}

PathCounts count_paths_on_graph(const PathGraph& pg) {
  const PathGraph::Graph& g = pg.graph();
  const int L = pg.spec().layers;
  const double work = static_cast<double>(boost::num_edges(g)) * (L + 1);
  if (work > max_graph_count_work)
    throw std::invalid_argument("count_paths_on_graph: " + spec_text(pg.spec()) + " needs about " + sci(work) +
                                " big-integer additions (limit " + sci(max_graph_count_work) + ")");
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

PathCounts closed_form_counts(const PathGraphSpec& spec) {
  check_count_work(spec, "closed_form_counts");
  const int L = spec.layers;
  PathCounts out;
  out.total = total_paths(spec);
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

BigInt total_paths(const PathGraphSpec& spec) {
  validate(spec);
  const unsigned base = static_cast<unsigned>(spec.heads) + (spec.skip ? 1U : 0U);
  return boost::multiprecision::pow(BigInt(base), static_cast<unsigned>(spec.layers));
}

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

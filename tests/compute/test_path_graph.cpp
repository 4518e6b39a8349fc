// The head-path DAG: exact path counts (layer DP, per-vertex DP on the Boost
// graph, closed forms, brute-force DFS), graph shape, DOT output, refusals.
#include <catch2/catch.hpp>

#include "sanpath/compute/path_graph.hpp"
#include "support/path_count_oracles.hpp"

#include <chrono>
#include <cmath>
#include <functional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using sanpath::BigInt;
using sanpath::PathCounts;
using sanpath::PathGraph;
using sanpath::PathGraphSpec;

namespace {

/// b^e by repeated multiplication (independent of the library).
BigInt power(unsigned b, int e) {
  BigInt x = 1;
  for (int i = 0; i < e; ++i) x *= b;
  return x;
}

/// C(n,k) by Pascal's triangle (independent of the library's formula).
std::vector<BigInt> pascal_row(int n) {
  std::vector<BigInt> row{1};
  for (int i = 1; i <= n; ++i) {
    std::vector<BigInt> next(static_cast<std::size_t>(i) + 1, BigInt(0));
    for (int k = 0; k <= i; ++k) {
      if (k > 0) next[k] += row[k - 1];
      if (k < i) next[k] += row[k];
    }
    row.swap(next);
  }
  return row;
}

void require_same(const PathCounts& a, const PathCounts& b) {
  REQUIRE(a.by_length.size() == b.by_length.size());
  for (std::size_t k = 0; k < a.by_length.size(); ++k) {
    CAPTURE(k, sanpath::to_decimal(a.by_length[k]), sanpath::to_decimal(b.by_length[k]));
    REQUIRE(a.by_length[k] == b.by_length[k]);
  }
  CAPTURE(sanpath::to_decimal(a.total), sanpath::to_decimal(b.total));
  REQUIRE(a.total == b.total);
}

BigInt sum(const std::vector<BigInt>& v) {
  BigInt s = 0;
  for (const BigInt& x : v) s += x;
  return s;
}

/// Source→sink paths of the Boost graph by depth-first search, by length
/// (number of head vertices on the path); knows nothing of the layering.
std::vector<BigInt> dfs_counts(const PathGraph& pg) {
  const PathGraph::Graph& g = pg.graph();
  std::vector<BigInt> by_length(static_cast<std::size_t>(pg.spec().layers) + 1, BigInt(0));
  std::function<void(PathGraph::Vertex, int)> walk = [&](PathGraph::Vertex v, int len) {
    if (g[v].kind == sanpath::PathVertexKind::head) ++len;
    if (v == pg.sink()) {
      REQUIRE(len < static_cast<int>(by_length.size()));
      by_length[static_cast<std::size_t>(len)] += 1;
      return;
    }
    auto out = boost::out_edges(v, g);
    for (auto e = out.first; e != out.second; ++e) walk(boost::target(*e, g), len);
  };
  walk(pg.source(), 0);
  return by_length;
}

std::size_t count_occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
  return n;
}

template <class F> std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no std::invalid_argument thrown>";
}

}  // namespace

TEST_CASE("closed forms: known values beyond 64 bits", "[graph]") {
  const PathCounts c = sanpath::test::closed_form_counts({24, 12, true});
  REQUIRE(c.by_length.size() == 25);
  REQUIRE(sanpath::to_decimal(c.total) == "542800770374370512771595361");  // 13^24
  const BigInt two64 = BigInt(1) << 64;
  REQUIRE(c.total > two64);
  REQUIRE(c.by_length[0] == 1);
  REQUIRE(c.by_length[1] == 24 * 12);
  REQUIRE(sanpath::to_decimal(c.by_length[24]) == "79496847203390844133441536");  // 12^24
  REQUIRE(sum(c.by_length) == c.total);

  const PathCounts big = sanpath::test::closed_form_counts({96, 64, true});
  const BigInt mod20 = power(10, 20);
  REQUIRE(sanpath::to_decimal(big.total % mod20) == "95967197418212890625");           // 65^96 mod 10^20
  REQUIRE(sanpath::to_decimal(big.by_length[48] % mod20) == "93140681048562073600");  // C(96,48)·64^48 mod 10^20
}

TEST_CASE("layer DP equals the closed forms on a grid of sizes", "[graph]") {
  for (int L = 1; L <= 12; ++L)
    for (int H = 1; H <= 9; ++H)
      for (bool skip : {false, true}) {
        CAPTURE(L, H, skip);
        const PathGraphSpec spec{L, H, skip};
        const PathCounts dp = sanpath::count_paths(spec);
        require_same(dp, sanpath::test::closed_form_counts(spec));
        REQUIRE(sum(dp.by_length) == dp.total);
        REQUIRE(dp.total == sanpath::total_paths(spec));
        if (skip) {
          REQUIRE(dp.total == power(static_cast<unsigned>(H) + 1, L));
          const std::vector<BigInt> binom = pascal_row(L);
          for (int k = 0; k <= L; ++k) REQUIRE(dp.by_length[k] == binom[k] * power(static_cast<unsigned>(H), k));
        } else {
          for (int k = 0; k < L; ++k) REQUIRE(dp.by_length[k] == 0);
          REQUIRE(dp.by_length[L] == power(static_cast<unsigned>(H), L));
          REQUIRE(dp.total == dp.by_length[L]);
        }
      }
}

TEST_CASE("layer DP equals the closed forms far beyond 64 bits", "[graph]") {
  const std::vector<PathGraphSpec> specs = {{24, 12, true}, {24, 12, false}, {96, 64, true}, {96, 64, false},
                                            {200, 7, true}, {300, 1, true},  {1, 100000, true},
                                            {100, 100000, false}, {2000, 3, false}};
  for (const PathGraphSpec& spec : specs) {
    CAPTURE(spec.layers, spec.heads, spec.skip);
    const PathCounts dp = sanpath::count_paths(spec);
    require_same(dp, sanpath::test::closed_form_counts(spec));
    REQUIRE(sum(dp.by_length) == dp.total);
    const unsigned base = static_cast<unsigned>(spec.heads) + (spec.skip ? 1U : 0U);
    REQUIRE(dp.total == power(base, spec.layers));
  }
  // (96, 64) with skip: 65^96 has floor(96·log10 65) + 1 = 175 digits.
  REQUIRE(sanpath::to_decimal(sanpath::count_paths({96, 64, true}).total).size() == 175);
}

TEST_CASE("counts at L = H = 1000 are fast and exact", "[graph][slow]") {
  const PathGraphSpec spec{1000, 1000, true};
  const auto t0 = std::chrono::steady_clock::now();
  const PathCounts dp = sanpath::count_paths(spec);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CAPTURE(seconds);
  REQUIRE(dp.by_length.size() == 1001);
  // 1001^1000 has floor(1000·log10 1001) + 1 = 3001 digits.
  const std::string total = sanpath::to_decimal(dp.total);
  REQUIRE(total.size() == static_cast<std::size_t>(std::floor(1000 * std::log10(1001.0))) + 1);
  REQUIRE(total.size() == 3001);
  REQUIRE(dp.total == sanpath::total_paths(spec));
  REQUIRE(sum(dp.by_length) == dp.total);
  require_same(dp, sanpath::test::closed_form_counts(spec));
  REQUIRE(seconds < 10.0);  // about 0.1 s in Release; generous for Debug builds

  // Without skip: 1000^1000 = 10^3000 exactly.
  const PathCounts plain = sanpath::count_paths({1000, 1000, false});
  REQUIRE(sanpath::to_decimal(plain.total) == "1" + std::string(3000, '0'));
  REQUIRE(plain.by_length[1000] == plain.total);
  REQUIRE(sum(plain.by_length) == plain.total);
}

TEST_CASE("total_paths works at the largest valid size", "[graph]") {
  const BigInt t = sanpath::total_paths({100000, 100000, true});
  // 100001^100000 lies in [2^m, 2^(m+1)) with m = floor(100000·log2 100001).
  REQUIRE(boost::multiprecision::msb(t) == static_cast<unsigned>(std::floor(100000 * std::log2(100001.0))));
}

TEST_CASE("small graphs: vertex and edge numbers and structure", "[graph]") {
  struct Case {
    PathGraphSpec spec;
    std::size_t vertices, edges;
  };
  // V = H + [skip] per layer: vertices L·V + 2, edges V + (L−1)·V² + V.
  const std::vector<Case> cases = {{{1, 1, false}, 3, 2},   {{1, 1, true}, 4, 4},    {{2, 3, true}, 10, 24},
                                   {{3, 2, false}, 8, 12},  {{4, 3, false}, 14, 33}, {{5, 1, true}, 12, 20}};
  for (const Case& c : cases) {
    CAPTURE(c.spec.layers, c.spec.heads, c.spec.skip);
    const PathGraph pg(c.spec);
    const PathGraph::Graph& g = pg.graph();
    REQUIRE(boost::num_vertices(g) == c.vertices);
    REQUIRE(boost::num_edges(g) == c.edges);
    const sanpath::PathGraphSize size = sanpath::path_graph_size(c.spec);
    REQUIRE(size.vertices == static_cast<std::int64_t>(c.vertices));
    REQUIRE(size.edges == static_cast<std::int64_t>(c.edges));
    // Every edge goes one layer forward; in- and out-degrees are those of a
    // complete layered graph (out_edges, not boost::edges: the latter trips
    // a false GCC -Wmaybe-uninitialized in Boost 1.74).
    const std::size_t V = static_cast<std::size_t>(c.spec.heads + (c.spec.skip ? 1 : 0));
    std::vector<std::size_t> in_degree(boost::num_vertices(g), 0);
    for (PathGraph::Vertex v = 0; v < boost::num_vertices(g); ++v) {
      const int l = g[v].layer;
      REQUIRE(boost::out_degree(v, g) == (v == pg.sink() ? 0 : l == c.spec.layers ? 1 : V));
      auto out = boost::out_edges(v, g);
      for (auto e = out.first; e != out.second; ++e) {
        REQUIRE(g[boost::target(*e, g)].layer == l + 1);
        ++in_degree[boost::target(*e, g)];
      }
    }
    for (PathGraph::Vertex v = 0; v < boost::num_vertices(g); ++v)
      REQUIRE(in_degree[v] == (v == pg.source() ? 0 : g[v].layer == 1 ? 1 : V));
    REQUIRE(g[pg.source()].kind == sanpath::PathVertexKind::source);
    REQUIRE(g[pg.sink()].kind == sanpath::PathVertexKind::sink);
    REQUIRE(g[pg.sink()].layer == c.spec.layers + 1);
    REQUIRE(g[pg.head_vertex(1, 0)].kind == sanpath::PathVertexKind::head);
    REQUIRE(pg.label(pg.head_vertex(c.spec.layers, c.spec.heads - 1)) ==
            "L" + std::to_string(c.spec.layers) + " h" + std::to_string(c.spec.heads - 1));
    if (c.spec.skip) {
      REQUIRE(g[pg.skip_vertex(1)].kind == sanpath::PathVertexKind::skip);
      REQUIRE(pg.label(pg.skip_vertex(1)) == "L1 skip");
    } else {
      REQUIRE_THROWS_AS(pg.skip_vertex(1), std::logic_error);
    }
    REQUIRE(pg.label(pg.source()) == "src");
    REQUIRE(pg.label(pg.sink()) == "sink");
  }
}

TEST_CASE("brute-force DFS on the Boost graph agrees with every count", "[graph]") {
  for (int L = 1; L <= 6; ++L)
    for (int H = 1; H <= 4; ++H)
      for (bool skip : {false, true}) {
        CAPTURE(L, H, skip);
        const PathGraphSpec spec{L, H, skip};
        const PathGraph pg(spec);
        const std::vector<BigInt> dfs = dfs_counts(pg);
        const PathCounts dp = sanpath::count_paths(spec);
        REQUIRE(dfs == dp.by_length);
        REQUIRE(sum(dfs) == dp.total);
        require_same(sanpath::test::count_paths_on_graph(pg), dp);
      }
  // A larger graph for the per-vertex DP only (DFS would visit 9^20 paths).
  const PathGraphSpec spec{20, 8, true};
  require_same(sanpath::test::count_paths_on_graph(PathGraph(spec)), sanpath::test::closed_form_counts(spec));
}

TEST_CASE("DOT output is valid text with one rank group per layer", "[graph]") {
  for (const PathGraphSpec& spec : {PathGraphSpec{3, 2, true}, PathGraphSpec{4, 3, false}, PathGraphSpec{1, 1, false}}) {
    CAPTURE(spec.layers, spec.heads, spec.skip);
    const PathGraph pg(spec);
    std::ostringstream os;
    sanpath::write_dot(os, pg);
    const std::string dot = os.str();
    CAPTURE(dot);
    REQUIRE(dot.rfind("digraph G {\n", 0) == 0);
    REQUIRE(dot.size() >= 2);
    REQUIRE(dot.substr(dot.size() - 2) == "}\n");
    REQUIRE(count_occurrences(dot, "{") == count_occurrences(dot, "}"));
    REQUIRE(count_occurrences(dot, "rank=same") == static_cast<std::size_t>(spec.layers));
    REQUIRE(count_occurrences(dot, "\"src\"") == 0);  // plain identifiers are not quoted
    REQUIRE(dot.find("[label=src]") != std::string::npos);
    REQUIRE(dot.find("[label=sink]") != std::string::npos);
    REQUIRE(dot.find("[label=\"L1 h0\"]") != std::string::npos);
    REQUIRE((dot.find("[label=\"L1 skip\"]") != std::string::npos) == spec.skip);

    // Every line between the header and the closing brace is one statement.
    const std::regex node(R"(\d+\[label=("[^"]*"|[A-Za-z_]\w*)\];)");
    const std::regex edge(R"(\d+->\d+ ;)");
    const std::regex rank(R"(\{rank=(same|min|max);( \d+;)+\})");
    const std::regex attr(R"(rankdir=LR;)");
    std::size_t nodes = 0, edges = 0, ranks = 0;
    std::istringstream lines(dot);
    std::string line;
    std::getline(lines, line);  // header
    while (std::getline(lines, line)) {
      if (line == "}") break;
      CAPTURE(line);
      if (std::regex_match(line, node)) ++nodes;
      else if (std::regex_match(line, edge)) ++edges;
      else if (std::regex_match(line, rank)) ++ranks;
      else REQUIRE(std::regex_match(line, attr));
    }
    REQUIRE(!std::getline(lines, line));  // nothing after the closing brace
    REQUIRE(nodes == boost::num_vertices(pg.graph()));
    REQUIRE(edges == boost::num_edges(pg.graph()));
    REQUIRE(ranks == static_cast<std::size_t>(spec.layers) + 2);  // + source and sink
    // Each layer's rank group lists exactly that layer's vertices.
    const std::string first = "{rank=same; " + std::to_string(pg.head_vertex(1, 0)) + ";";
    REQUIRE(dot.find(first) != std::string::npos);
  }
}

TEST_CASE("bad specs throw one-line messages naming the field", "[graph]") {
  const std::vector<std::pair<PathGraphSpec, std::string>> bad = {
      {{0, 4, false}, "layers"}, {{-3, 4, true}, "layers"}, {{100001, 4, false}, "layers"},
      {{4, 0, false}, "heads"},  {{4, -1, true}, "heads"},  {{4, 100001, true}, "heads"}};
  for (const auto& item : bad) {
    const PathGraphSpec spec = item.first;
    const std::string& field = item.second;
    CAPTURE(spec.layers, spec.heads, field);
    for (const std::string& msg :
         {message_of([&] { sanpath::validate(spec); }), message_of([&] { PathGraph g(spec); }),
          message_of([&] { sanpath::count_paths(spec); }), message_of([&] { sanpath::test::closed_form_counts(spec); }),
          message_of([&] { sanpath::total_paths(spec); }), message_of([&] { sanpath::path_graph_size(spec); })}) {
      CAPTURE(msg);
      REQUIRE(msg.find(field) != std::string::npos);
      REQUIRE(msg.find('\n') == std::string::npos);
    }
  }
  REQUIRE_NOTHROW(sanpath::validate({100000, 100000, true}));
}

TEST_CASE("huge sizes: no explicit graph, counts still work or are refused", "[graph]") {
  const PathGraphSpec spec{1000, 1000, true};
  const sanpath::PathGraphSize size = sanpath::path_graph_size(spec);
  REQUIRE(size.edges == 1001 + 999LL * 1001 * 1001 + 1001);
  const std::string msg = message_of([&] { PathGraph g(spec); });
  CAPTURE(msg);
  REQUIRE(msg.find(std::to_string(size.edges)) != std::string::npos);
  REQUIRE(msg.find('\n') == std::string::npos);
  REQUIRE(sanpath::count_paths(spec).total == sanpath::total_paths(spec));

  // The largest explicit graph is allowed, one edge more is not.
  REQUIRE(sanpath::path_graph_size({2, 999, true}).edges == 1000 + 1000000 + 1000);
  REQUIRE_THROWS_AS(PathGraph({2, 999, true}), std::invalid_argument);
  REQUIRE(sanpath::path_graph_size({2, 998, true}).edges <= sanpath::max_explicit_edges);
  REQUIRE_NOTHROW(PathGraph({2, 998, true}));

  // Counting by length at the largest sizes would take hours: refused.
  const std::string refused = message_of([] { sanpath::count_paths({100000, 100000, true}); });
  CAPTURE(refused);
  REQUIRE(refused.find("limit") != std::string::npos);
  REQUIRE(refused.find("layers=100000") != std::string::npos);
  REQUIRE_THROWS_AS(sanpath::test::closed_form_counts({100000, 100000, true}), std::invalid_argument);
  // Without skip every valid size is countable (one number per layer).
  const PathGraphSpec plain{100000, 100000, false};
  const PathCounts c = sanpath::count_paths(plain);
  REQUIRE(c.total == sanpath::total_paths(plain));
  REQUIRE(c.by_length.back() == c.total);
  REQUIRE(c.by_length.front() == 0);
  // Per-vertex DP refuses graphs with too many edge-length additions.
  REQUIRE_THROWS_AS(sanpath::test::count_paths_on_graph(PathGraph({500, 40, false})), std::invalid_argument);
}

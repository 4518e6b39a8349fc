// Branch-and-bound top-K paths (top_paths.hpp) against exhaustive
// enumeration (enumerate_paths with top_k): the same records bit for bit, in
// the same order, for several shapes, filters, precisions and thread counts;
// visited-node counts independent of the thread count; fewer nodes than the
// tree has when the bound bites.
#include "support/attention_models.hpp"
#include "support/helpers.hpp"

#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/top_paths.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/model/random.hpp"

#include <cstring>

using namespace sanpath;
using sanpath::test::attention_model;

namespace {

MatrixXd test_input(int n, int d, std::uint64_t seed) { return test::gaussian_input(n, d, seed, 0.5); }

template <class S> bool same_value(const S& a, const S& b) {
  if constexpr (std::is_same_v<S, double>)
    return std::memcmp(&a, &b, sizeof(double)) == 0;
  else
    return mpfr_equal_p(a.backend().data(), b.backend().data()) != 0;
}

template <class S> void require_same_records(const std::vector<PathRecord<S>>& got, const std::vector<PathRecord<S>>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].heads == want[i].heads);
    CHECK(got[i].length == want[i].length);
    CHECK(same_value(got[i].norm_composite, want[i].norm_composite));
    CHECK(same_value(got[i].norm_frobenius, want[i].norm_frobenius));
    CHECK(same_value(got[i].residual_composite, want[i].residual_composite));
    CHECK(same_value(got[i].stochastic_residual, want[i].stochastic_residual));
  }
}

template <class S> void compare_with_enumeration(const Model& m, const MatrixXd& X0, std::size_t k, const PathFilter& f) {
  const ForwardTrace<S> t = forward<S>(m, m.arch().variant, convert<S>(X0));
  EnumerationOptions eo;
  eo.top_k = k;
  eo.filter = f;
  std::vector<PathRecord<S>> want;
  const EnumerationResult<S> er = enumerate_paths<S>(m, t, eo, [&](const PathRecord<S>& r) { want.push_back(r); });
  std::optional<std::uint64_t> nodes;
  for (const int threads : {1, 2, 3}) {
    CAPTURE(threads);
    TopPathsOptions o;
    o.k = k;
    o.filter = f;
    o.threads = threads;
    const TopPathsResult<S> r = top_paths<S>(m, t, o);
    CHECK(r.paths == er.paths);
    require_same_records(r.records, want);
    if (nodes) CHECK(r.nodes == *nodes);
    nodes = r.nodes;
  }
}

}  // namespace

TEST_CASE("top_paths equals exhaustive top-K on random models", "[top_paths]") {
  struct Case {
    int L, H, d, dh, n;
    bool skip;
    double std;
    MaskKind mask;
    std::size_t k;
  };
  const Case cases[] = {
      {1, 1, 4, 2, 3, true, 0.5, MaskKind::none, 1},      {1, 3, 4, 2, 3, false, 0.5, MaskKind::none, 2},
      {3, 2, 6, 3, 5, true, 0.4, MaskKind::none, 4},      {4, 3, 8, 2, 4, true, 0.6, MaskKind::causal, 7},
      {5, 3, 12, 4, 6, true, 0.3, MaskKind::none, 10},    {4, 2, 6, 3, 5, false, 0.7, MaskKind::none, 5},
      {6, 2, 16, 4, 8, true, 0.2, MaskKind::none, 3},     {5, 4, 10, 2, 4, true, 1.2, MaskKind::none, 50},
      {3, 2, 6, 3, 5, true, 0.4, MaskKind::none, 1000},
  };
  std::uint64_t seed = 1;
  for (const Case& c : cases) {
    CAPTURE(c.L, c.H, c.d, c.skip, c.std, c.k);
    const Model m = attention_model(c.L, c.H, c.d, c.dh, c.skip, c.std, seed, c.mask);
    const MatrixXd X0 = test_input(c.n, c.d, seed + 100);
    ++seed;
    compare_with_enumeration<double>(m, X0, c.k, {});
    if (c.L >= 3) compare_with_enumeration<double>(m, X0, c.k, PathFilter::lengths(1, c.L - 1));
  }
}

TEST_CASE("top_paths with a head filter and in multiprecision", "[top_paths]") {
  const Model m = attention_model(4, 3, 8, 2, true, 0.5, 9, MaskKind::none);
  const MatrixXd X0 = test_input(5, 8, 4);
  PathFilter f;
  f.allowed_heads = {{-1, 0, 2}, {1}, {-1, 0, 1, 2}, {-1, 2}};
  compare_with_enumeration<double>(m, X0, 6, f);
  compare_with_enumeration<mpfr_real<38>>(m, X0, 6, {});
  compare_with_enumeration<mpfr_real<77>>(m, X0, 3, PathFilter::length(2));
}

TEST_CASE("top_paths prunes: a contracting model visits a small part of its tree", "[top_paths]") {
  // Value-output maps of spectral norm well below 1: terms shrink with their
  // length, so the K best are short and long subtrees are cut.
  const Model m = attention_model(8, 4, 16, 4, true, 0.15, 21, MaskKind::none);
  const ForwardTrace<double> t = forward<double>(m, m.arch().variant, test_input(6, 16, 2));
  TopPathsOptions o;
  o.k = 5;
  const TopPathsResult<double> r = top_paths<double>(m, t, o);
  REQUIRE(r.records.size() == 5);
  CHECK(r.paths == PathCount(390625));  // 5^8
  CAPTURE(r.nodes, r.leaves, r.skipped);
  CHECK(r.nodes < 390625 / 10);
  CHECK(r.leaves < 390625 / 10);
  EnumerationOptions eo;
  eo.top_k = 5;
  std::vector<PathRecord<double>> want;
  enumerate_paths<double>(m, t, eo, [&](const PathRecord<double>& rec) { want.push_back(rec); });
  require_same_records(r.records, want);
}

TEST_CASE("top_paths rejects k = 0 and non-decomposable variants", "[top_paths]") {
  const Model m = attention_model(2, 2, 4, 2, true, 0.5, 3, MaskKind::none);
  const ForwardTrace<double> t = forward<double>(m, m.arch().variant, test_input(3, 4, 1));
  TopPathsOptions o;
  o.k = 0;
  CHECK_THROWS_AS(top_paths<double>(m, t, o), std::invalid_argument);
}

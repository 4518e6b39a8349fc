// Path decomposition (paths.hpp): Theorem 2.1 by enumeration and by length
// sums at several precisions, thread-count independence, filters against
// brute force, the path-count guard, sampling.
#include "support/helpers.hpp"

#include "sanpath/compute/forward.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/compute/paths.hpp"
#include "sanpath/model/random.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

using namespace sanpath;
using sanpath::test::epsilon_of;

namespace {

/// A random attention-only model built directly: weights N(0, w_std²)
/// (queries/keys N(0, qk_std²) so attention is far from uniform), biases
/// N(0, b_std²). `uniform`: (layer, head) pairs whose W_Q and b_Q are 0, so
/// that head's attention is exactly uniform (P = 11ᵀ/n).
struct Spec {
  int L = 3, H = 2, d = 6, dqk = 3, dv = 2;
  bool skip = false;
  MaskKind mask = MaskKind::none;
  std::uint64_t seed = 1;
  double w_std = 0.45, qk_std = 1.0, b_std = 0.2;
  std::vector<std::pair<int, int>> uniform;
};

MatrixXd gaussian(Rng& rng, Eigen::Index r, Eigen::Index c, double std) {
  MatrixXd m(r, c);
  for (Eigen::Index j = 0; j < c; ++j)
    for (Eigen::Index i = 0; i < r; ++i) m(i, j) = std * rng.gaussian();
  return m;
}

Model make_model(const Spec& s) {
  Rng rng(s.seed);
  Architecture a;
  a.layers = s.L;
  a.heads = s.H;
  a.d_model = s.d;
  a.d_qk = s.dqk;
  a.d_v = s.dv;
  a.d_ff = 0;
  a.variant = Variant{s.skip, MlpKind::none, LayerNormKind::none, s.mask};
  std::vector<LayerWeights> layers(static_cast<std::size_t>(s.L));
  for (int l = 0; l < s.L; ++l) {
    LayerWeights& w = layers[static_cast<std::size_t>(l)];
    for (int h = 0; h < s.H; ++h) {
      HeadWeights hw;
      hw.W_Q = gaussian(rng, s.d, s.dqk, s.qk_std);
      hw.W_K = gaussian(rng, s.d, s.dqk, s.qk_std);
      hw.W_V = gaussian(rng, s.d, s.dv, s.w_std);
      hw.W_O = gaussian(rng, s.dv, s.d, s.w_std);
      hw.b_Q = gaussian(rng, s.dqk, 1, s.b_std);
      hw.b_K = gaussian(rng, s.dqk, 1, s.b_std);
      hw.b_V = gaussian(rng, s.dv, 1, s.b_std);
      if (std::find(s.uniform.begin(), s.uniform.end(), std::make_pair(l, h)) != s.uniform.end()) {
        hw.W_Q.setZero();
        hw.b_Q.setZero();
      }
      w.heads.push_back(std::move(hw));
    }
    w.b_O = gaussian(rng, s.d, 1, s.b_std);
  }
  return Model(a, std::move(layers), std::nullopt, "test model");
}

MatrixXd make_input(int n, int d, std::uint64_t seed) {
  Rng rng(seed);
  return gaussian(rng, n, d, 1.0);
}

template <class S> ForwardTrace<S> run(const Model& m, const MatrixXd& X0) {
  return forward<S>(m, m.arch().variant, convert<S>(X0));
}

/// Bitwise equality of two scalars (value, sign of zero, NaN-ness).
template <class S> bool same_bits(const S& a, const S& b) {
  if constexpr (std::is_same_v<S, double>) {
    return std::memcmp(&a, &b, sizeof(double)) == 0;
  } else {
    mpfr_srcptr x = a.backend().data(), y = b.backend().data();
    if (mpfr_nan_p(x) || mpfr_nan_p(y)) return mpfr_nan_p(x) && mpfr_nan_p(y);
    return mpfr_get_prec(x) == mpfr_get_prec(y) && mpfr_equal_p(x, y) != 0 && mpfr_signbit(x) == mpfr_signbit(y);
  }
}

template <class S> bool same_record(const PathRecord<S>& a, const PathRecord<S>& b) {
  return a.heads == b.heads && a.length == b.length && same_bits(a.norm_composite, b.norm_composite) &&
         same_bits(a.norm_frobenius, b.norm_frobenius) && same_bits(a.residual_composite, b.residual_composite) &&
         same_bits(a.stochastic_residual, b.stochastic_residual);
}

template <class S> bool same_matrix(const Matrix<S>& a, const Matrix<S>& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Eigen::Index j = 0; j < a.cols(); ++j)
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      if (!same_bits(a(i, j), b(i, j))) return false;
  return true;
}

template <class S>
std::vector<PathRecord<S>> collect(const Model& m, const ForwardTrace<S>& t, const EnumerationOptions& o,
                                   EnumerationResult<S>* result = nullptr) {
  std::vector<PathRecord<S>> out;
  auto r = enumerate_paths<S>(m, t, o, [&](const PathRecord<S>& rec) { out.push_back(rec); });
  if (result) *result = std::move(r);
  return out;
}

/// Both Theorem 2.1 errors (enumeration, length sums) at scalar S, in units
/// of 2^-B (B = precision bits).
template <class S> std::pair<BigReal, BigReal> theorem_errors(const Model& m, const MatrixXd& X0) {
  const ForwardTrace<S> t = run<S>(m, X0);
  const BigReal e1 = enumeration_error<S>(m, t);
  const BigReal e2 = length_sums<S>(m, t).error;
  const BigReal unit = pow(BigReal(2), -precision_bits_v<S>);
  return {e1 / unit, e2 / unit};
}

std::vector<Spec> theorem_specs() {
  std::vector<Spec> specs;
  for (bool skip : {false, true}) {
    Spec a;  // factored value-output maps (2·d_v < d)
    a.skip = skip;
    a.L = 3;
    a.H = 3;
    a.seed = 11;
    specs.push_back(a);
    Spec b;  // d×d products W_h (d_v = d), causal mask
    b.skip = skip;
    b.mask = MaskKind::causal;
    b.L = 4;
    b.H = 2;
    b.d = 4;
    b.dqk = 2;
    b.dv = 4;
    b.seed = 12;
    specs.push_back(b);
  }
  return specs;
}

}  // namespace

TEST_CASE("Theorem 2.1: terms plus bias equal the forward output, with errors shrinking with precision",
          "[paths]") {
  // Modest factor: a few hundred roundings per entry at most in these sizes.
  const double factor = 64;
  for (const Spec& s : theorem_specs()) {
    const Model m = make_model(s);
    const MatrixXd X0 = make_input(5, s.d, s.seed + 100);
    CAPTURE(s.skip, s.L, s.H, s.d, s.dv);
    const auto [d_enum, d_sums] = theorem_errors<double>(m, X0);
    const auto [e65, s65] = theorem_errors<mpfr_real<19>>(m, X0);
    const auto [e257, s257] = theorem_errors<mpfr_real<77>>(m, X0);
    const auto [e1025, s1025] = theorem_errors<mpfr_real<308>>(m, X0);
    CAPTURE(to_sci(d_enum), to_sci(e65), to_sci(e257), to_sci(e1025));
    CAPTURE(to_sci(d_sums), to_sci(s65), to_sci(s257), to_sci(s1025));
    // In units of 2^-B: a modest factor at every precision.
    for (const BigReal& e : {d_enum, e65, e257, e1025, d_sums, s65, s257, s1025}) REQUIRE(e <= factor);
    // Absolute errors shrink with precision (2^-65 > 2^-257 > 2^-1025 scale).
    const BigReal u65 = pow(BigReal(2), -65), u257 = pow(BigReal(2), -257), u1025 = pow(BigReal(2), -1025);
    REQUIRE(e65 * u65 > 0);
    REQUIRE(e257 * u257 < e65 * u65);
    REQUIRE(e1025 * u1025 < e257 * u257);
    REQUIRE(s257 * u257 < s65 * u65);
    REQUIRE(s1025 * u1025 < s257 * u257);
  }
}

TEST_CASE("Theorem 2.1 with grouped-query attention and rotary embeddings (Llama, attention-only)", "[paths]") {
  // P_h comes from the rotary forward pass; W_h = W_V^{kv(h)} W_O^h.
  for (const bool skip : {false, true})
    for (const int kv : {1, 3}) {
      CAPTURE(skip, kv);
      RandomModelSpec s;
      Architecture& a = s.arch;
      a.layers = 3;
      a.heads = 3;
      a.kv_heads = kv;
      a.d_model = 6;
      a.d_qk = a.d_v = 2;
      a.d_ff = 5;
      a.variant = Variant{skip, MlpKind::none, LayerNormKind::none, MaskKind::causal};
      a.norm = NormKind::rms;
      a.rope_theta = 10000.0;
      a.gated_mlp = true;
      a.activation = Activation::silu;
      s.std = 0.5;
      s.bias_std = 0.2;
      s.seed = 40 + static_cast<std::uint64_t>(kv);
      const Model m = random_model(s);
      const MatrixXd X0 = make_input(5, 6, 7);
      const auto [d_enum, d_sums] = theorem_errors<double>(m, X0);
      const auto [e257, s257] = theorem_errors<mpfr_real<77>>(m, X0);
      CAPTURE(to_sci(d_enum), to_sci(d_sums), to_sci(e257), to_sci(s257));
      for (const BigReal& e : {d_enum, d_sums, e257, s257}) REQUIRE(e <= 64);
    }
}

TEMPLATE_TEST_CASE("length sums equal the enumeration sums grouped by length", "[paths]", double, mpfr_real<77>) {
  using S = TestType;
  for (const Spec& s : theorem_specs()) {
    const Model m = make_model(s);
    const ForwardTrace<S> t = run<S>(m, make_input(5, s.d, 3));
    CAPTURE(s.skip, s.d, s.dv);
    EnumerationOptions o;
    o.accumulate = true;
    EnumerationResult<S> er;
    const auto records = collect<S>(m, t, o, &er);
    const LengthSums<S> ls = length_sums<S>(m, t);
    REQUIRE(ls.terms.size() == static_cast<std::size_t>(s.L) + 1);
    REQUIRE(er.sums.size() == ls.terms.size());
    std::map<int, long> per_length;
    for (const auto& r : records) ++per_length[r.length];
    for (int k = 0; k <= s.L; ++k) {
      CAPTURE(k);
      const LengthSum<S>& term = ls.terms[static_cast<std::size_t>(k)];
      REQUIRE(term.length == k);
      REQUIRE(term.count == per_length[k]);
      if (!s.skip && k < s.L) {
        REQUIRE(term.count == 0);
        REQUIRE(term.frobenius == 0);
      }
      sanpath::test::require_matrix_near<S>(er.sums[static_cast<std::size_t>(k)], term.sum, 64);
    }
    // b^L agrees between both routes.
    sanpath::test::require_matrix_near<S>(er.bias, ls.bias, 16);
    // Share is ‖S_k‖_F / ‖X^L‖_F.
    for (const auto& term : ls.terms) REQUIRE(same_bits(term.share, S(term.frobenius / ls.output_frobenius)));
    // Multi-threaded length sums are identical to single-threaded ones.
    const LengthSums<S> ls2 = length_sums<S>(m, t, 2);
    for (std::size_t k = 0; k < ls.terms.size(); ++k) REQUIRE(same_matrix(ls.terms[k].sum, ls2.terms[k].sum));
    REQUIRE(same_matrix(ls.reconstruction, ls2.reconstruction));
  }
}

TEMPLATE_TEST_CASE("enumeration is identical for every thread count", "[paths]", double, mpfr_real<77>) {
  using S = TestType;
  Spec s;
  s.L = 5;
  s.H = 3;
  s.skip = true;  // 4^5 = 1024 paths: tasks at depth 4 with subtrees below
  s.seed = 5;
  const Model m = make_model(s);
  const ForwardTrace<S> t = run<S>(m, make_input(4, s.d, 6));
  for (std::size_t top_k : {std::size_t(0), std::size_t(17)}) {
    CAPTURE(top_k);
    EnumerationOptions o;
    o.accumulate = true;
    o.top_k = top_k;
    EnumerationResult<S> r1;
    const auto a = collect<S>(m, t, o, &r1);
    REQUIRE(r1.paths == 1024);
    REQUIRE(a.size() == (top_k ? top_k : 1024));
    for (int threads : {2, 3}) {
      o.threads = threads;
      EnumerationResult<S> r2;
      const auto b = collect<S>(m, t, o, &r2);
      CAPTURE(threads);
      REQUIRE(r2.paths == r1.paths);
      REQUIRE(b.size() == a.size());
      for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(same_record(a[i], b[i]));
      for (std::size_t k = 0; k < r1.sums.size(); ++k) REQUIRE(same_matrix(r1.sums[k], r2.sums[k]));
    }
  }
  // A visitor that throws stops the workers and the exception reaches the caller.
  EnumerationOptions ot;
  ot.threads = 2;
  long seen = 0;
  REQUIRE_THROWS_AS(enumerate_paths<S>(m, t, ot,
                                       [&](const PathRecord<S>&) {
                                         if (++seen == 10) throw std::runtime_error("visitor stops");
                                       }),
                    std::runtime_error);
  REQUIRE(seen == 10);
  // Enumeration order: lexicographic in the head sequence, skip (-1) first.
  EnumerationOptions o;
  const auto all = collect<S>(m, t, o);
  for (std::size_t i = 1; i < all.size(); ++i) REQUIRE(all[i - 1].heads < all[i].heads);
  // A single path evaluated alone gives the enumerated record.
  for (std::size_t i : {std::size_t(0), std::size_t(1), std::size_t(500), std::size_t(1023)})
    REQUIRE(same_record(evaluate_path<S>(m, t, all[i].heads), all[i]));
}

TEMPLATE_TEST_CASE("a path through a uniform-attention head has a rank-1 stochastic factor", "[paths]", double,
                   mpfr_real<77>) {
  using S = TestType;
  const BigReal eps = epsilon_of<S>();
  for (bool skip : {false, true}) {
    CAPTURE(skip);
    Spec s;
    s.L = 3;
    s.H = 2;
    s.skip = skip;
    s.seed = 21;
    s.uniform = {{1, 0}};  // layer 2, head 0: W_Q = 0, b_Q = 0
    const Model m = make_model(s);
    const int n = 6;
    const ForwardTrace<S> t = run<S>(m, make_input(n, s.d, 22));
    // P = 11ᵀ/n.
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) REQUIRE(t.P[1][0](i, j) == S(1) / S(n));
    long through = 0, other = 0;
    for (const auto& r : collect<S>(m, t, EnumerationOptions{})) {
      CAPTURE(r.heads, to_sci(to_big(r.stochastic_residual)), to_sci(to_big(r.residual_composite)));
      if (r.heads[1] == 0) {
        ++through;
        // Identical rows up to rounding: P_path = (…)·1πᵀ or 1πᵀ·(…).
        REQUIRE(to_big(r.stochastic_residual) <= 16 * eps);
        REQUIRE(to_big(r.residual_composite) <= 64 * eps * to_big(r.norm_composite));
      } else {
        ++other;
        REQUIRE(to_big(r.stochastic_residual) > BigReal(1e-8));  // far above rounding
        REQUIRE(to_big(r.residual_composite) > BigReal(1e-8) * to_big(r.norm_composite));
      }
    }
    REQUIRE(through == (skip ? 9 : 4));
    REQUIRE(other == (skip ? 18 : 4));
  }
}

TEST_CASE("the path-count guard refuses before enumerating, naming the exact count", "[paths]") {
  Spec s;
  s.L = 3;
  s.H = 5;
  s.skip = true;
  const Model m = make_model(s);
  const ForwardTrace<double> t = run<double>(m, make_input(3, s.d, 1));
  EnumerationOptions o;
  o.max_paths = 100;
  long visited = 0;
  auto count = [&](const PathRecord<double>&) { ++visited; };
  try {
    enumerate_paths<double>(m, t, o, count);
    FAIL("no refusal");
  } catch (const PathLimitError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    REQUIRE(e.count() == 216);
    REQUIRE(e.limit() == 100);
    REQUIRE(what.find("216 paths") != std::string::npos);
    REQUIRE(what.find("limit of 100") != std::string::npos);
    REQUIRE(what.find("--sums") != std::string::npos);
    REQUIRE(what.find("--sample") != std::string::npos);
  }
  REQUIRE(visited == 0);
  REQUIRE_THROWS_AS(enumerate_paths<double>(m, t, o, count), ResourceError);
  // A filter brings the count under the limit: 3·5 paths of length 1.
  o.filter = PathFilter::length(1);
  REQUIRE(enumerate_paths<double>(m, t, o, count).paths == 15);
  REQUIRE(visited == 15);
  // Exactly at the limit passes.
  o.filter = {};
  o.max_paths = 216;
  REQUIRE(enumerate_paths<double>(m, t, o, {}).paths == 216);

  // Counts beyond 64 bits: L = 24, H = 12 with skip has 13^24 paths.
  Spec big;
  big.L = 24;
  big.H = 12;
  big.d = 2;
  big.dqk = 1;
  big.dv = 1;
  big.skip = true;
  const Model mb = make_model(big);
  const ForwardTrace<double> tb = run<double>(mb, make_input(2, big.d, 1));
  try {
    enumerate_paths<double>(mb, tb, EnumerationOptions{}, {});
    FAIL("no refusal");
  } catch (const PathLimitError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    REQUIRE(what.find("542800770374370512771595361 paths") != std::string::npos);
    REQUIRE(what.find("limit of 10000000") != std::string::npos);
  }
  // The length sums work at that size.
  REQUIRE(length_sums<double>(mb, tb).error < 1e-12);
}

TEST_CASE("exact path counts by length, with and without filters", "[paths]") {
  using boost::multiprecision::pow;
  // Closed forms: C(L,k)·H^k with skip, H^L at k = L without.
  const auto c = count_paths_by_length(5, 4, true);
  const long binom[] = {1, 5, 10, 10, 5, 1};
  for (int k = 0; k <= 5; ++k) REQUIRE(c[static_cast<std::size_t>(k)] == binom[k] * pow(PathCount(4), k));
  const auto c2 = count_paths_by_length(5, 4, false);
  for (int k = 0; k < 5; ++k) REQUIRE(c2[static_cast<std::size_t>(k)] == 0);
  REQUIRE(c2[5] == 1024);
  REQUIRE(count_filtered_paths(24, 12, true) == pow(PathCount(13), 24));
  REQUIRE(count_filtered_paths(24, 12, true).str() == "542800770374370512771595361");
  // A length range: Σ_{k=1..2} C(3,k) 5^k = 15 + 75.
  REQUIRE(count_filtered_paths(3, 5, true, PathFilter::lengths(1, 2)) == 90);
  // Heads per layer: product of the allowed counts.
  PathFilter f;
  f.allowed_heads = {{-1, 0, 1}, {2}, {0, 0, 3, -1}};
  REQUIRE(count_filtered_paths(3, 5, true, f) == 3 * 1 * 3);
  f.min_length = 3;
  REQUIRE(count_filtered_paths(3, 5, true, f) == 2 * 1 * 2);
  // Invalid filters.
  REQUIRE_THROWS_AS(count_filtered_paths(3, 5, false, f), std::invalid_argument);  // -1 without skip
  REQUIRE_THROWS_AS(count_filtered_paths(3, 5, true, PathFilter::lengths(2, 1)), std::invalid_argument);
  REQUIRE_THROWS_AS(count_filtered_paths(3, 5, true, PathFilter::length(4)), std::invalid_argument);
  PathFilter g;
  g.allowed_heads = {{0}, {5}, {0}};
  REQUIRE_THROWS_AS(count_filtered_paths(3, 5, true, g), std::invalid_argument);
  g.allowed_heads = {{0}, {1}};
  REQUIRE_THROWS_AS(count_filtered_paths(3, 5, true, g), std::invalid_argument);
  g.allowed_heads = {{0}, {}, {1}};
  REQUIRE(count_filtered_paths(3, 5, true, g) == 0);
}

TEMPLATE_TEST_CASE("filters select the expected subsets of all records", "[paths]", double, mpfr_real<19>) {
  using S = TestType;
  Spec s;
  s.L = 4;
  s.H = 3;
  s.skip = true;
  s.seed = 31;
  const Model m = make_model(s);
  const ForwardTrace<S> t = run<S>(m, make_input(5, s.d, 32));
  const auto all = collect<S>(m, t, EnumerationOptions{});
  REQUIRE(all.size() == 256);

  auto check = [&](const EnumerationOptions& o, auto keep) {
    std::vector<PathRecord<S>> expected;
    for (const auto& r : all)
      if (keep(r)) expected.push_back(r);
    if (o.top_k > 0) {
      std::stable_sort(expected.begin(), expected.end(), [](const PathRecord<S>& a, const PathRecord<S>& b) {
        return a.norm_composite > b.norm_composite;  // stable: ties stay in enumeration order
      });
      if (expected.size() > o.top_k) expected.resize(o.top_k);
    }
    for (int threads : {1, 2}) {
      EnumerationOptions oo = o;
      oo.threads = threads;
      EnumerationResult<S> res;
      const auto got = collect<S>(m, t, oo, &res);
      CAPTURE(threads, o.top_k, o.filter.min_length, o.filter.max_length);
      REQUIRE(got.size() == expected.size());
      for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(same_record(got[i], expected[i]));
      const auto n = static_cast<std::size_t>(std::count_if(all.begin(), all.end(), keep));
      REQUIRE(res.paths == n);
      REQUIRE(count_filtered_paths(s.L, s.H, s.skip, o.filter) == n);
    }
  };

  EnumerationOptions o;
  o.filter = PathFilter::length(2);
  check(o, [](const PathRecord<S>& r) { return r.length == 2; });
  o.filter = PathFilter::lengths(1, 3);
  check(o, [](const PathRecord<S>& r) { return r.length >= 1 && r.length <= 3; });
  o.filter = PathFilter::lengths(0, 0);
  check(o, [](const PathRecord<S>& r) { return r.length == 0; });

  const std::vector<std::vector<int>> allowed = {{-1, 0}, {2, 1}, {-1}, {0, 1, 2}};
  auto in_allowed = [&](const PathRecord<S>& r) {
    for (std::size_t l = 0; l < allowed.size(); ++l)
      if (std::find(allowed[l].begin(), allowed[l].end(), r.heads[l]) == allowed[l].end()) return false;
    return true;
  };
  o.filter = {};
  o.filter.allowed_heads = allowed;
  check(o, in_allowed);
  o.filter.min_length = 3;
  o.filter.max_length = 3;
  check(o, [&](const PathRecord<S>& r) { return in_allowed(r) && r.length == 3; });

  o.filter = {};
  o.top_k = 7;
  check(o, [](const PathRecord<S>&) { return true; });
  o.filter = PathFilter::length(2);
  check(o, [](const PathRecord<S>& r) { return r.length == 2; });
  o.top_k = 1000;  // more than there are
  check(o, [](const PathRecord<S>& r) { return r.length == 2; });
}

TEMPLATE_TEST_CASE("sampling is deterministic and its mean agrees with the enumerated mean", "[paths]", double,
                   mpfr_real<19>) {
  using S = TestType;
  Spec s;
  s.L = 3;
  s.H = 3;
  s.skip = true;
  s.seed = 41;
  const Model m = make_model(s);
  const ForwardTrace<S> t = run<S>(m, make_input(5, s.d, 42));
  SampleOptions so;
  so.lengths = {2};
  so.samples = 3000;
  so.seed = 7;
  const auto a = sample_paths<S>(m, t, so);
  const auto b = sample_paths<S>(m, t, so);
  REQUIRE(a.size() == 1);
  REQUIRE(a[0].length == 2);
  REQUIRE(a[0].samples == 3000);
  REQUIRE(a[0].population == 27);  // C(3,2)·3²
  REQUIRE(same_bits(a[0].residual.mean, b[0].residual.mean));
  REQUIRE(same_bits(a[0].residual.high, b[0].residual.high));
  REQUIRE(same_bits(a[0].norm.mean, b[0].norm.mean));
  // Another seed gives another sample.
  so.seed = 8;
  REQUIRE_FALSE(same_bits(sample_paths<S>(m, t, so)[0].residual.mean, a[0].residual.mean));
  // A length's sample does not depend on the other lengths requested.
  so.seed = 7;
  so.lengths = {1, 2, 3};
  const auto c = sample_paths<S>(m, t, so);
  REQUIRE(c.size() == 3);
  REQUIRE(same_bits(c[1].residual.mean, a[0].residual.mean));
  REQUIRE(c[0].population == 9);
  REQUIRE(c[2].population == 27);

  // The population mean (all 27 paths of length 2) lies in the 95% intervals.
  EnumerationOptions o;
  o.filter = PathFilter::length(2);
  S res_sum(0), norm_sum(0);
  long count = 0;
  for (const auto& r : collect<S>(m, t, o)) {
    res_sum += r.residual_composite;
    norm_sum += r.norm_composite;
    ++count;
  }
  REQUIRE(count == 27);
  const S res_mean = res_sum / S(27), norm_mean = norm_sum / S(27);
  CAPTURE(to_sci(to_big(res_mean)), to_sci(to_big(a[0].residual.low)), to_sci(to_big(a[0].residual.high)));
  REQUIRE(a[0].residual.low <= res_mean);
  REQUIRE(res_mean <= a[0].residual.high);
  REQUIRE(a[0].norm.low <= norm_mean);
  REQUIRE(norm_mean <= a[0].norm.high);
  REQUIRE(a[0].residual.low < a[0].residual.mean);
  REQUIRE(a[0].residual.stddev > 0);

  // Invalid requests.
  so.lengths = {4};
  REQUIRE_THROWS_AS(sample_paths<S>(m, t, so), std::invalid_argument);
  so.lengths = {2};
  so.samples = 1;
  REQUIRE_THROWS_AS(sample_paths<S>(m, t, so), std::invalid_argument);
}

TEST_CASE("random paths are uniform over the paths of one length", "[paths]") {
  Rng rng(3);
  std::map<std::vector<int>, long> seen;
  const long draws = 12000;
  for (long i = 0; i < draws; ++i) {
    const auto p = random_path(rng, 3, 2, true, 2);
    REQUIRE(p.size() == 3);
    REQUIRE(std::count(p.begin(), p.end(), -1) == 1);
    ++seen[p];
  }
  REQUIRE(seen.size() == 12);  // C(3,2)·2²
  for (const auto& [p, n] : seen) {
    CAPTURE(p, n);
    REQUIRE(std::abs(n - draws / 12) < 150);  // 5 standard deviations
  }
  REQUIRE_THROWS_AS(random_path(rng, 3, 2, false, 2), std::invalid_argument);
  REQUIRE(random_path(rng, 3, 2, false, 3).size() == 3);
}

TEST_CASE("the decomposition is refused for variants that are not attention-only", "[paths]") {
  Spec s;
  const Model m = make_model(s);
  ForwardTrace<double> t = run<double>(m, make_input(3, s.d, 1));
  t.variant.mlp = MlpKind::residual;
  t.variant.layernorm = LayerNormKind::post;
  try {
    length_sums<double>(m, t);
    FAIL("no refusal");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CAPTURE(what);
    REQUIRE(what.find("attention-only") != std::string::npos);
    REQUIRE(what.find("mlp residual") != std::string::npos);
    REQUIRE(what.find("layernorm post") != std::string::npos);
  }
  REQUIRE_THROWS_AS(enumerate_paths<double>(m, t, EnumerationOptions{}, {}), std::invalid_argument);
  REQUIRE_THROWS_AS(sample_paths<double>(m, t, SampleOptions{{3}, 10, 0}), std::invalid_argument);
  // A trace without attention matrices cannot be decomposed.
  ForwardOptions fo;
  fo.record_attention = false;
  const ForwardTrace<double> bare = forward<double>(m, m.arch().variant, make_input(3, s.d, 1), fo);
  REQUIRE_THROWS_AS(length_sums<double>(m, bare), std::invalid_argument);
}

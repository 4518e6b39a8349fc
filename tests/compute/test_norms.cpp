// Tests of sanpath/norms.hpp: hand-computed norms, means and medians, exact
// zero residuals, the optimal-centre enclosure (ordering, certification
// against sampled centres, two cases with a known optimum) and translation
// invariance. Scalars: double and mpfr_real<77>.
#include "support/helpers.hpp"

#include "sanpath/compute/norms.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace sanpath;
using sanpath::test::error_in_eps;

namespace {

/// A small matrix of exact double literals, converted to S.
template <class S> Matrix<S> mat(std::initializer_list<std::initializer_list<double>> rows) {
  const Eigen::Index n = static_cast<Eigen::Index>(rows.size());
  const Eigen::Index d = n ? static_cast<Eigen::Index>(rows.begin()->size()) : 0;
  Matrix<S> M(n, d);
  Eigen::Index i = 0;
  for (const auto& r : rows) {
    Eigen::Index j = 0;
    for (double v : r) M(i, j++) = S(v);
    ++i;
  }
  return M;
}

/// Deterministic generator: mt19937_64's output is fixed by the standard;
/// the mappings below are our own (std distributions are not portable).
struct Gen {
  std::mt19937_64 bits;
  explicit Gen(std::uint64_t seed) : bits(seed) {}
  double uniform() { return static_cast<double>(bits() >> 11) * 0x1.0p-53; }
  double gaussian() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  int below(int k) { return static_cast<int>(bits() % static_cast<std::uint64_t>(k)); }
};

/// Random test matrices of several kinds (all double-valued).
Eigen::MatrixXd random_matrix(Gen& g, Eigen::Index n, Eigen::Index d, int kind) {
  Eigen::MatrixXd X(n, d);
  for (Eigen::Index j = 0; j < d; ++j)
    for (Eigen::Index i = 0; i < n; ++i) X(i, j) = g.gaussian();
  switch (kind) {
    case 1:  // rows of very different sizes
      for (Eigen::Index i = 0; i < n; ++i) X.row(i) *= std::exp(1.5 * g.gaussian());
      break;
    case 2: {  // near rank collapse: large common row plus a tiny residual
      Eigen::RowVectorXd c(d);
      for (Eigen::Index j = 0; j < d; ++j) c(j) = 1e3 * g.gaussian();
      X = (1e-7 * X).rowwise() + c;
      break;
    }
    case 3:  // heavy tails
      X = X.unaryExpr([](double v) { return v * v * v; });
      break;
    case 4:  // small integers, many ties
      for (Eigen::Index j = 0; j < d; ++j)
        for (Eigen::Index i = 0; i < n; ++i) X(i, j) = static_cast<double>(g.below(5) - 2);
      break;
    case 5:  // identical rows and one outlier row
      for (Eigen::Index i = 1; i < n; ++i) X.row(i) = X.row(0);
      X.row(n - 1) *= 3.0;
      break;
    default:
      break;
  }
  return X;
}

template <class S> Matrix<S> to_s(const Eigen::MatrixXd& X) {
  Matrix<S> out(X.rows(), X.cols());
  for (Eigen::Index j = 0; j < X.cols(); ++j)
    for (Eigen::Index i = 0; i < X.rows(); ++i) out(i, j) = S(X(i, j));
  return out;
}

template <class S> void require_same(const Norms<S>& a, const Norms<S>& b) {
  REQUIRE(a.one == b.one);
  REQUIRE(a.inf == b.inf);
  REQUIRE(a.composite == b.composite);
  REQUIRE(a.frobenius == b.frobenius);
}

template <class S> void require_eps(const S& a, const S& b, double units) {
  const BigReal e = error_in_eps(a, b);
  CAPTURE(to_sci(to_big(a)), to_sci(to_big(b)), to_sci(e), units);
  REQUIRE(e <= units);
}

template <class S> S eps_of() { return std::numeric_limits<S>::epsilon(); }

/// Checks every ordering and consistency property of optimal_residual.
template <class S> OptimalResidual<S> check_enclosure(const Matrix<S>& X) {
  using std::abs;
  const OptimalResidual<S> r = optimal_residual(X);
  const Norms<S> at_mean = residual_norms(X, Center::mean);
  const Norms<S> at_median = residual_norms(X, Center::median);
  CAPTURE(X.rows(), X.cols(), to_sci(to_big(r.composite.lower)), to_sci(to_big(r.composite.upper)),
          to_sci(to_big(at_mean.composite)), to_sci(to_big(at_median.composite)));
  REQUIRE(r.composite.lower >= 0);
  REQUIRE(r.composite.lower <= r.composite.upper);
  REQUIRE(r.composite.upper <= at_mean.composite);
  REQUIRE(r.composite.upper <= at_median.composite);
  REQUIRE(r.min_inf.lower >= 0);
  REQUIRE(r.min_inf.lower <= r.min_inf.upper);
  REQUIRE(r.min_inf.upper <= at_mean.inf);
  REQUIRE(r.min_inf.upper <= at_median.inf);
  REQUIRE(r.min_one == at_median.one);
  // The farthest pair of rows is a dual certificate, so the lower end is at
  // least max_ik ‖x_i − x_k‖_1 / 2 (up to the lower end's own rounding cover).
  S pair(0);
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index k = i + 1; k < X.rows(); ++k) {
      S v(0);
      for (Eigen::Index j = 0; j < X.cols(); ++j) v += abs(S(X(i, j) - X(k, j)));
      if (v > pair) pair = v;
    }
  pair /= 2;
  REQUIRE(r.min_inf.lower >= pair * (S(1) - S(static_cast<double>(2 * (X.rows() + X.cols() + 8))) * eps_of<S>()));
  // The median minimises ‖·‖_1; the computed sums may differ by rounding.
  REQUIRE(r.min_one <= at_mean.one * (S(1) + S(4 * (X.rows() + 4)) * eps_of<S>()));
  REQUIRE(r.best_center.size() == X.cols());
  REQUIRE(r.at_best.composite == r.composite.upper);
  require_same(r.at_best, norms_of(residual(X, r.best_center)));
  require_same(residual_norms(X, Center::optimal), r.at_best);
  return r;
}

/// The lower bounds are certificates: no centre may beat them. Samples
/// centres around the best one and the median, at several scales.
template <class S> void check_certified(const Matrix<S>& X, const OptimalResidual<S>& r, Gen& g, int samples) {
  const Eigen::Index d = X.cols();
  const RowVector<S> med = column_medians(X);
  S spread(0);
  for (Eigen::Index j = 0; j < d; ++j) {
    S lo = X(0, j), hi = X(0, j);
    for (Eigen::Index i = 1; i < X.rows(); ++i) {
      lo = std::min(lo, S(X(i, j)));
      hi = std::max(hi, S(X(i, j)));
    }
    spread = std::max(spread, S(hi - lo));
  }
  for (int k = 0; k < samples; ++k) {
    const RowVector<S>& base = k % 2 ? med : r.best_center;
    const double scale = std::ldexp(1.0, -2 * (k % 12));
    RowVector<S> c = base;
    for (Eigen::Index j = 0; j < d; ++j) c(j) += S(scale * g.gaussian()) * spread;
    const Norms<S> nm = norms_of(residual(X, c));
    CAPTURE(k, scale);
    REQUIRE(nm.composite >= r.composite.lower);
    REQUIRE(nm.inf >= r.min_inf.lower);
    REQUIRE(nm.one >= r.min_one * (S(1) - S(4 * (X.rows() + 4)) * eps_of<S>()));
  }
}

/// Exact min over c of sqrt(Σ|x_i − c| · max|x_i − c|) for one column, by
/// hand: on each piece between breakpoints (data, midrange) both factors are
/// linear, so the product is a quadratic minimised at an end or its vertex.
double one_column_optimum(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  auto f = [&](double c) {
    double a = 0, b = 0;
    for (double v : x) {
      a += std::abs(v - c);
      b = std::max(b, std::abs(v - c));
    }
    return a * b;
  };
  std::vector<double> br = x;
  br.push_back(0.5 * (x.front() + x.back()));
  std::sort(br.begin(), br.end());
  double best = f(br[0]);
  for (std::size_t k = 0; k + 1 < br.size(); ++k) {
    const double p = br[k], q = br[k + 1];
    best = std::min(best, f(q));
    if (!(q > p)) continue;
    // f = (α c + β)(γ c + δ) on [p, q]; slopes from the piece's midpoint.
    const double m = 0.5 * (p + q);
    const double gamma = m > 0.5 * (x.front() + x.back()) ? 1.0 : -1.0;
    double alpha = 0;
    for (double v : x) alpha += m > v ? 1.0 : -1.0;
    double a_m = 0;
    for (double v : x) a_m += std::abs(v - m);
    const double b_m = std::max(m - x.front(), x.back() - m);
    const double beta = a_m - alpha * m, delta = b_m - gamma * m;
    if (alpha * gamma > 0) {
      const double v = -(alpha * delta + beta * gamma) / (2 * alpha * gamma);
      if (v > p && v < q) best = std::min(best, f(v));
    }
  }
  return std::sqrt(best);
}

}  // namespace

TEST_CASE("Center spellings round-trip and bad text is named", "[norms]") {
  for (Center c : {Center::mean, Center::median, Center::optimal}) REQUIRE(parse_center(to_string(c)) == c);
  REQUIRE(to_string(Center::median) == "median");
  try {
    parse_center("average");
    FAIL("parse_center accepted 'average'");
  } catch (const std::invalid_argument& e) {
    REQUIRE(std::string(e.what()).find("'average'") != std::string::npos);
  }
  REQUIRE_THROWS_AS(parse_center(""), std::invalid_argument);
}

TEMPLATE_TEST_CASE("norms of small matrices computed by hand", "[norms]", double, mpfr_real<77>) {
  using S = TestType;
  using std::sqrt;
  // |M| column sums 5, 7, 9; row sums 6, 15; Σ squares 91.
  const Matrix<S> M = mat<S>({{1, -2, 3}, {-4, 5, -6}});
  REQUIRE(norm_1(M) == 9);
  REQUIRE(norm_inf(M) == 15);
  require_eps(norm_composite(M), S(sqrt(S(135))), 2);
  require_eps(norm_frobenius(M), S(sqrt(S(91))), 4);
  const Norms<S> all = norms_of(M);
  REQUIRE(all.one == norm_1(M));
  REQUIRE(all.inf == norm_inf(M));
  REQUIRE(all.composite == norm_composite(M));
  REQUIRE(all.frobenius == norm_frobenius(M));

  // A column: ‖·‖_1 = 7, ‖·‖_∞ = 4, Frobenius 5, composite 2√7.
  const Matrix<S> v = mat<S>({{3}, {-4}});
  REQUIRE(norm_1(v) == 7);
  REQUIRE(norm_inf(v) == 4);
  REQUIRE(norm_frobenius(v) == 5);
  require_eps(norm_composite(v), S(2 * sqrt(S(7))), 2);

  // Transposes swap the induced norms.
  const Matrix<S> Mt = M.transpose();
  REQUIRE(norm_1(Mt) == 15);
  REQUIRE(norm_inf(Mt) == 9);

  // No entries: every norm is 0.
  const Norms<S> none = norms_of(Matrix<S>(0, 3));
  REQUIRE(none.one == 0);
  REQUIRE(none.inf == 0);
  REQUIRE(none.composite == 0);
  REQUIRE(none.frobenius == 0);
}

TEST_CASE("Frobenius in double neither underflows nor overflows", "[norms]") {
  Matrix<double> tiny = mat<double>({{3e-200, 4e-200}});
  Matrix<double> huge = mat<double>({{3e200}, {-4e200}});
  REQUIRE(std::abs(norm_frobenius(tiny) / 5e-200 - 1) <= 4 * eps_of<double>());
  REQUIRE(std::abs(norm_frobenius(huge) / 5e200 - 1) <= 4 * eps_of<double>());
  // 1e-200 · 1e-200 underflows; the composite must not.
  REQUIRE(norm_composite(tiny) > 0);
}

TEMPLATE_TEST_CASE("column means and medians", "[norms]", double, mpfr_real<77>) {
  using S = TestType;
  // Columns: odd n = 3.
  const Matrix<S> odd = mat<S>({{3, 1, -7}, {1, 9, -7}, {2, 4, 2}});
  const RowVector<S> mo = column_medians(odd);
  REQUIRE(mo(0) == 2);
  REQUIRE(mo(1) == 4);
  REQUIRE(mo(2) == -7);  // a tie at the middle
  const RowVector<S> ao = column_means(odd);
  REQUIRE(ao(0) == 2);
  require_eps(ao(1), S(S(14) / S(3)), 2);  // 1 + 11/3, rounded twice
  REQUIRE(ao(2) == -4);

  // Even n = 4: midpoint of the two middle values.
  const Matrix<S> even = mat<S>({{4, 5, 0.5}, {1, 5, -1}, {3, 1, 8}, {2, 5, 0.25}});
  const RowVector<S> me = column_medians(even);
  REQUIRE(me(0) == 2.5);  // middle values 2 and 3
  REQUIRE(me(1) == 5);    // middle values 5 and 5
  REQUIRE(me(2) == 0.375);  // middle values 0.25 and 0.5
  REQUIRE(column_means(even)(0) == 2.5);

  // One row: the row itself.
  const Matrix<S> one = mat<S>({{-1, 2.5}});
  REQUIRE(column_medians(one) == one.row(0));
  REQUIRE(column_means(one) == one.row(0));

  REQUIRE_THROWS_AS(column_medians(Matrix<S>(0, 2)), std::invalid_argument);
  REQUIRE_THROWS_AS(column_means(Matrix<S>(0, 2)), std::invalid_argument);
  Matrix<S> bad = odd;
  bad(1, 2) = std::numeric_limits<S>::quiet_NaN();
  REQUIRE_THROWS_WITH(column_medians(bad), Catch::Contains("(1, 2)"));
  REQUIRE_THROWS_AS(optimal_residual(bad), std::invalid_argument);
  REQUIRE_THROWS_AS(residual(odd, RowVector<S>(2)), std::invalid_argument);
}

TEMPLATE_TEST_CASE("the median minimises the 1-norm of the residual", "[norms]", double, mpfr_real<77>) {
  using S = TestType;
  Gen g(7);
  for (Eigen::Index n : {1, 2, 5, 8}) {
    const Matrix<S> X = to_s<S>(random_matrix(g, n, 4, 0));
    const RowVector<S> med = column_medians(X);
    const S best = norm_1(residual(X, med));
    for (int k = 0; k < 50; ++k) {
      RowVector<S> c = med;
      c(g.below(4)) += S(std::ldexp(g.gaussian(), -g.below(30)));
      REQUIRE(norm_1(residual(X, c)) >= best);
    }
  }
}

TEMPLATE_TEST_CASE("the residual of an exactly rank-1 matrix is exactly 0", "[norms]", double, mpfr_real<77>) {
  using S = TestType;
  Gen g(11);
  for (Eigen::Index n : {1, 2, 7, 8}) {
    RowVector<S> c(5);
    for (Eigen::Index j = 0; j < c.size(); ++j) c(j) = S(g.gaussian() * 1e3 / 3.0);
    const Matrix<S> X = Matrix<S>::Ones(n, 1) * c;
    for (Center centre : {Center::mean, Center::median}) {
      const RowVector<S> m = centre == Center::mean ? column_means(X) : column_medians(X);
      REQUIRE(m == c);
      REQUIRE(residual(X, m).isZero(0));
      const Norms<S> nm = residual_norms(X, centre);
      REQUIRE(nm.one == 0);
      REQUIRE(nm.inf == 0);
      REQUIRE(nm.composite == 0);
      REQUIRE(nm.frobenius == 0);
    }
    const OptimalResidual<S> r = optimal_residual(X);
    REQUIRE(r.composite.lower == 0);
    REQUIRE(r.composite.upper == 0);
    REQUIRE(r.min_inf.upper == 0);
  }
}

TEMPLATE_TEST_CASE("the optimal enclosure is ordered and certified on random matrices", "[norms]", double,
                   mpfr_real<77>) {
  using S = TestType;
  const bool mp = is_mpfr_v<S>;
  Gen g(2024);
  const std::vector<std::pair<Eigen::Index, Eigen::Index>> shapes =
      mp ? std::vector<std::pair<Eigen::Index, Eigen::Index>>{{1, 3}, {2, 3}, {5, 1}, {7, 4}, {16, 8}, {33, 17}}
         : std::vector<std::pair<Eigen::Index, Eigen::Index>>{{1, 1}, {1, 5}, {2, 3},  {3, 1},   {5, 1},  {4, 4},
                                                              {7, 3}, {16, 8}, {33, 17}, {64, 40}, {20, 100}};
  for (const auto& [n, d] : shapes)
    for (int kind = 0; kind < 6; ++kind) {
      CAPTURE(n, d, kind);
      const Matrix<S> X = to_s<S>(random_matrix(g, n, d, kind));
      const OptimalResidual<S> r = check_enclosure(X);
      check_certified(X, r, g, mp ? 24 : 60);
    }
}

TEST_CASE("the search is effective on Gaussian matrices", "[norms]") {
  // The ∞-norm LP: solved (n·d ≤ 2^12), its enclosure is as narrow as double
  // rounding of the search allows; beyond, the heuristic encloses it to a few
  // per cent. The composite's upper end improves on the mean and median centres.
  Gen g(5);
  for (const auto& [n, d] : std::vector<std::pair<int, int>>{{16, 16}, {64, 32}, {128, 256}}) {
    const Matrix<double> X = random_matrix(g, n, d, 0);
    const OptimalResidual<double> r = optimal_residual(X);
    CAPTURE(n, d, r.min_inf.lower, r.min_inf.upper, r.composite.lower, r.composite.upper);
    REQUIRE(r.min_inf.upper <= (n * d <= 4096 ? 1 + 1e-12 : 1.05) * r.min_inf.lower);
    REQUIRE(r.composite.upper < residual_norms(X, Center::median).composite);
    REQUIRE(r.composite.upper < residual_norms(X, Center::mean).composite);
  }
}

TEMPLATE_TEST_CASE("two rows: the optimum is known in closed form", "[norms]", double, mpfr_real<77>) {
  using S = TestType;
  using std::abs;
  using std::sqrt;
  // For n = 2 every c_j in [min, max] gives column sums δ_j = |x_j − y_j| and
  // the two row sums add up to Σδ, so min ‖·‖_1 = max δ, min ‖·‖_∞ = Σδ/2,
  // both at the midpoint, and min composite = sqrt(max δ · Σδ / 2).
  // Here δ = (3, 4, 2): 4 · 4.5 = 18.
  const Matrix<S> X = mat<S>({{1, 5, -2}, {4, 1, 0}});
  const OptimalResidual<S> r = check_enclosure(X);
  const S opt = sqrt(S(18));
  REQUIRE(r.min_one == 4);
  REQUIRE(r.min_inf.upper == 4.5);
  REQUIRE(r.min_inf.lower <= 4.5);
  require_eps(r.min_inf.lower, S(4.5), 16);
  require_eps(r.composite.upper, opt, 4);
  require_eps(r.composite.lower, opt, 16);
  REQUIRE(r.composite.lower <= opt * (S(1) + S(2) * eps_of<S>()));
  REQUIRE(r.composite.upper >= opt * (S(1) - S(2) * eps_of<S>()));

  // Random pairs of rows, same closed form.
  Gen g(3);
  for (int k = 0; k < 20; ++k) {
    const Eigen::Index d = 1 + g.below(40);
    // Not kind 2: there the double midpoint of 1e3-sized entries is off by
    // far more than ε relative to their 1e-7-sized difference.
    const int kinds[] = {0, 1, 3, 4};
    const Matrix<S> Y = to_s<S>(random_matrix(g, 2, d, kinds[k % 4]));
    S dmax(0), dsum(0);
    for (Eigen::Index j = 0; j < d; ++j) {
      const S dj = abs(S(Y(0, j) - Y(1, j)));
      dsum += dj;
      if (dj > dmax) dmax = dj;
    }
    const S best = sqrt(S(dmax * dsum / S(2)));
    const OptimalResidual<S> q = check_enclosure(Y);
    CAPTURE(k, d, to_sci(to_big(best)));
    const double tol = 4.0 * static_cast<double>(d + 10);
    REQUIRE(q.composite.lower <= best * (S(1) + S(tol) * eps_of<S>()));
    REQUIRE(q.composite.upper >= best * (S(1) - S(tol) * eps_of<S>()));
    require_eps(q.composite.upper, best, tol);
    require_eps(q.composite.lower, best, tol);
  }
}

TEMPLATE_TEST_CASE("one column: medians, midrange and an exact optimum", "[norms]", double, mpfr_real<77>) {
  using S = TestType;
  using std::sqrt;
  // x = (0, 0, 4): with c in [0, 2], ‖·‖_1 = 4 + c and ‖·‖_∞ = 4 − c, so the
  // product 16 − c² is least at c = 2 (the midrange): min composite √12;
  // min ‖·‖_1 = 4 (median 0), min ‖·‖_∞ = 2 (midrange).
  const Matrix<S> X = mat<S>({{0}, {0}, {4}});
  const OptimalResidual<S> r = check_enclosure(X);
  const S opt = sqrt(S(12));
  REQUIRE(r.min_one == 4);
  REQUIRE(r.min_inf.lower <= 2);
  REQUIRE(r.min_inf.upper >= 2);
  REQUIRE(r.composite.lower <= opt);
  REQUIRE(r.composite.upper >= opt * (S(1) - S(2) * eps_of<S>()));
  REQUIRE(r.composite.upper <= opt * S(1.01));  // the search gets close
  REQUIRE(r.min_inf.lower >= S(1.98));

  // Random columns against the piecewise-quadratic minimum (double), which
  // first reproduces the hand value above and a second one: x = (0, 1, 1, 1)
  // has ‖·‖_1‖·‖_∞ = (3 − 2c)(1 − c) on [0, 1/2] and (3 − 2c)c on [1/2, 1],
  // least (= 1) at c = 1/2 and c = 1, so the optimum is √1 = 1.
  REQUIRE(one_column_optimum({0, 0, 4}) == Approx(std::sqrt(12.0)).epsilon(1e-15));
  REQUIRE(one_column_optimum({0, 1, 1, 1}) == Approx(1.0).epsilon(1e-15));
  Gen g(17);
  for (int k = 0; k < 30; ++k) {
    const Eigen::Index n = 1 + g.below(25);
    const int kinds[] = {0, 1, 3, 4, 5};  // not kind 2: see the two-row case
    const Eigen::MatrixXd x = random_matrix(g, n, 1, kinds[k % 5]);
    const std::vector<double> xs(x.data(), x.data() + n);
    const double best = one_column_optimum(xs);
    const double halfrange = 0.5 * (x.maxCoeff() - x.minCoeff());
    const OptimalResidual<S> q = check_enclosure(to_s<S>(x));
    CAPTURE(k, n, best, halfrange);
    const double slack = 1e-12 * (1 + best);  // `best` itself is a double computation
    REQUIRE(q.composite.lower <= S(best + slack));
    REQUIRE(q.composite.upper >= S(best - slack));
    REQUIRE(q.min_inf.lower <= S(halfrange * (1 + 1e-15)));
    REQUIRE(q.min_inf.upper >= S(halfrange * (1 - 1e-15)));
  }
}

TEMPLATE_TEST_CASE("residual norms are invariant under X -> X + 1 v^T", "[norms]", double, mpfr_real<77>) {
  using S = TestType;
  using std::abs;
  Gen g(99);
  for (const auto& [n, d] : std::vector<std::pair<int, int>>{{1, 4}, {2, 5}, {6, 6}, {9, 3}, {24, 12}}) {
    // Double: integer data so X + 1vᵀ is exact; MPFR: double data, exact in
    // 256 bits. Either way the translated matrix is computed exactly.
    Eigen::MatrixXd Xd = random_matrix(g, n, d, 0);
    Eigen::RowVectorXd v(d);
    for (int j = 0; j < d; ++j) v(j) = 1e3 * g.gaussian();
    if (!is_mpfr_v<S>) {
      Xd = (20 * Xd).array().round().matrix();
      v = v.array().round().matrix();
    }
    const Matrix<S> X = to_s<S>(Xd);
    Matrix<S> Y = X;
    for (int j = 0; j < d; ++j)
      for (int i = 0; i < n; ++i) Y(i, j) += S(v(j));
    CAPTURE(n, d);
    // Median: the shifted median is exact, so the residual is identical.
    require_same(residual_norms(Y, Center::median), residual_norms(X, Center::median));
    // Mean and the searched centres round differently: bound the difference
    // by the rounding of entries of size up to max|Y|.
    const S big = S(Y.cwiseAbs().maxCoeff());
    const S tol = S(8 * (n + d)) * eps_of<S>() * big * S(std::max(n, d));
    auto near = [&](const Norms<S>& a, const Norms<S>& b) {
      CAPTURE(to_sci(to_big(a.composite)), to_sci(to_big(b.composite)), to_sci(to_big(tol)));
      REQUIRE(abs(S(a.one - b.one)) <= tol);
      REQUIRE(abs(S(a.inf - b.inf)) <= tol);
      REQUIRE(abs(S(a.composite - b.composite)) <= tol);
      REQUIRE(abs(S(a.frobenius - b.frobenius)) <= tol);
    };
    near(residual_norms(Y, Center::mean), residual_norms(X, Center::mean));
    const OptimalResidual<S> rx = optimal_residual(X), ry = optimal_residual(Y);
    near(ry.at_best, rx.at_best);
    // The lower bounds only use X − 1 med^T and exact weighted medians.
    REQUIRE(ry.composite.lower == rx.composite.lower);
    REQUIRE(ry.min_inf.lower == rx.min_inf.lower);
    REQUIRE(ry.min_one == rx.min_one);
    REQUIRE(abs(S(ry.composite.upper - rx.composite.upper)) <= tol);
  }
}

TEST_CASE("optimal_residual at 512 x 1024 in double", "[.][perf]") {
  Gen g(1);
  const Matrix<double> X = random_matrix(g, 512, 1024, 1);
  const auto t0 = std::chrono::steady_clock::now();
  const OptimalResidual<double> r = optimal_residual(X);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("512x1024 double: " << s << " s, composite in [" << r.composite.lower << ", " << r.composite.upper
                           << "], inf in [" << r.min_inf.lower << ", " << r.min_inf.upper << "]");
  REQUIRE(r.composite.lower <= r.composite.upper);
}

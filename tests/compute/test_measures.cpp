// Tests of sanpath/compute/measures.hpp (math.md §9, docs/math.md §8):
// hand-computed measures of small matrices, a rank-1 X, attention matrices
// with known entropy, and collapsed layers (R ≪ c) against a brute force at
// 2051 bits (Eigen's Jacobi SVD of X = 1cᵀ + R formed exactly) and against
// the scaling laws of the companions. Errors are in units of the working
// scalar's epsilon.
#include "support/helpers.hpp"

#include "sanpath/compute/forward_centred.hpp"  // use_full_mpfr_exponent_range
#include "sanpath/compute/measures.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/core/linalg.hpp"

#include <Eigen/SVD>

#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace sanpath;
using sanpath::test::error_in_eps;

namespace {

template <class S> std::map<std::string, BigReal> by_name(const std::vector<MeasureValue>& v) {
  std::map<std::string, BigReal> out;
  for (const MeasureValue& m : v) out[m.name] = m.value;
  return out;
}

/// X = 1cᵀ + R split into its column means and mean residual.
template <class S> std::map<std::string, BigReal> measures_of(const Matrix<S>& X, const MeasureSet& m = MeasureSet::all()) {
  const RowVector<S> c = column_means<S>(X);
  return by_name<S>(output_measures<S>(c, residual<S>(X, c), norm_composite<S>(X), m));
}

template <class S> S value(const std::map<std::string, BigReal>& m, const std::string& name) {
  REQUIRE(m.count(name) == 1);
  return S(m.at(name));
}

/// Deterministic c and R (column sums of R exactly 0 to working precision).
template <class S> void random_pair(int n, int d, std::uint64_t seed, RowVector<S>& c, Matrix<S>& R) {
  std::mt19937_64 g(seed);
  const auto u = [&] { return static_cast<double>(g() >> 11) * 0x1p-53 - 0.5; };
  c.resize(d);
  R.resize(n, d);
  for (int j = 0; j < d; ++j) c(j) = S(u());
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) R(i, j) = S(u());
  const RowVector<S> mean = R.colwise().sum() / S(n);
  for (int i = 0; i < n; ++i) R.row(i) -= mean;
}

/// The measures of X = 1cᵀ + R by brute force at 2051 bits: X formed exactly,
/// its SVD by Eigen's Jacobi SVD, the cosine pair by pair.
struct Brute {
  using B = mpfr_real<617>;
  B stable_minus_one, effective_minus_one, svd_residual, one_minus_cosine;
};
template <class S> Brute brute_force(const RowVector<S>& c, const Matrix<S>& R) {
  using B = Brute::B;
  Matrix<B> X = convert<B>(R);
  for (Eigen::Index i = 0; i < X.rows(); ++i) X.row(i) += convert<B>(c);
  const Eigen::JacobiSVD<Matrix<B>> svd(X, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const auto& s = svd.singularValues();
  Brute b;
  b.stable_minus_one = B(X.squaredNorm()) / (s(0) * s(0)) - 1;
  const B total = s.sum();
  B H = 0;
  for (Eigen::Index k = 0; k < s.size(); ++k)
    if (s(k) > 0) H -= (s(k) / total) * log(B(s(k) / total));
  b.effective_minus_one = exp(H) - 1;
  const Matrix<B> Z = X - s(0) * svd.matrixU().col(0) * svd.matrixV().col(0).transpose();
  b.svd_residual = norm_composite<B>(Z) / norm_composite<B>(X);
  B cs = 0;
  long pairs = 0;
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index j = i + 1; j < X.rows(); ++j, ++pairs)
      cs += B(X.row(i).dot(X.row(j))) / sqrt(B(X.row(i).squaredNorm() * X.row(j).squaredNorm()));
  b.one_minus_cosine = 1 - cs / pairs;
  return b;
}

template <class S> void require_near(const BigReal& got, const Brute::B& want, double eps_units) {
  CHECK(error_in_eps<S>(S(got), S(want)) < eps_units);
}

}  // namespace

TEST_CASE("measures: names, sets and parsing", "[measures]") {
  CHECK(MeasureSet::parse("all") == MeasureSet::all());
  CHECK(MeasureSet::parse("none").empty());
  const MeasureSet m = MeasureSet::parse("cosine,mu");
  CHECK(m.list() == std::vector<Measure>{Measure::mu, Measure::cosine});
  CHECK(m.str() == "mu,cosine");
  CHECK(MeasureSet::all().str() == "all");
  CHECK_FALSE(m.any_attention());
  CHECK(MeasureSet::parse("first_token_mass").any_attention());
  CHECK_THROWS_WITH(MeasureSet::parse("mu,rank"),
                    "measures: 'rank' is not one of mu, svd_residual, cosine, stable_rank, effective_rank, "
                    "attention_entropy, first_token_mass, all or none");
  CHECK_THROWS_AS(MeasureSet::parse(""), std::invalid_argument);
  CHECK(measure_value_names(MeasureSet::all(), false) ==
        std::vector<std::string>{"mu", "svd_residual", "cosine", "one_minus_cosine", "stable_rank",
                                 "stable_rank_minus_one", "effective_rank", "effective_rank_minus_one"});
  CHECK(measure_value_names(MeasureSet::all(), true).size() == 10);
}

TEMPLATE_TEST_CASE("measures: a 2x2 matrix by hand", "[measures]", double, mpfr_real<38>) {
  using S = TestType;
  // X = [[2, 0], [0, 1]]: σ = 2, 1; rows orthogonal.
  Matrix<S> X(2, 2);
  X << S(2), S(0), S(0), S(1);
  const auto m = measures_of<S>(X);
  CHECK(error_in_eps<S>(value<S>(m, "mu"), sqrt(S(5) / S(2))) < 4);  // R = ±(1, −½)
  CHECK(error_in_eps<S>(value<S>(m, "stable_rank"), S(5) / S(4)) < 8);
  CHECK(error_in_eps<S>(value<S>(m, "stable_rank_minus_one"), S(1) / S(4)) < 8);
  // p = (2/3, 1/3): exp(H) = 3 / 2^(2/3)
  const S eff = S(3) / pow(S(2), S(2) / S(3));
  CHECK(error_in_eps<S>(value<S>(m, "effective_rank"), eff) < 16);
  CHECK(error_in_eps<S>(value<S>(m, "effective_rank_minus_one"), S(eff - 1)) < 16);
  // X − 2 e1 e1ᵀ = [[0,0],[0,1]]: composite 1; ‖X‖_{1,∞} = 2.
  CHECK(error_in_eps<S>(value<S>(m, "svd_residual"), S(1) / S(2)) < 16);
  CHECK(error_in_eps<S>(value<S>(m, "cosine"), S(0), S(1)) < 8);
  CHECK(error_in_eps<S>(value<S>(m, "one_minus_cosine"), S(1)) < 8);
}

TEMPLATE_TEST_CASE("measures: a rank-1 X has its companions exactly 0", "[measures]", double, mpfr_real<77>) {
  using S = TestType;
  RowVector<S> c(3);
  c << S(0.5), S(-1.25), S(3);
  const Matrix<S> R = Matrix<S>::Zero(4, 3);
  const auto m = by_name<S>(output_measures<S>(c, R, S(1), MeasureSet::all()));
  CHECK(S(m.at("mu")) == 0);
  CHECK(S(m.at("svd_residual")) == 0);
  CHECK(S(m.at("one_minus_cosine")) == 0);
  CHECK(S(m.at("stable_rank_minus_one")) == 0);
  CHECK(S(m.at("effective_rank_minus_one")) == 0);
  CHECK(S(m.at("stable_rank")) == 1);
  // A zero row: the cosine is undefined and not reported; the rest is.
  const auto z = by_name<S>(output_measures<S>(RowVector<S>::Zero(3), R, S(0), MeasureSet::parse("cosine,mu")));
  CHECK(z.count("cosine") == 0);
  CHECK(z.count("mu") == 1);
}

TEMPLATE_TEST_CASE("measures: ordinary layers against a 2051-bit brute force", "[measures]", double,
                   mpfr_real<38>) {
  using S = TestType;
  for (const auto& [n, d] : std::vector<std::pair<int, int>>{{5, 8}, {9, 4}, {6, 6}}) {
    RowVector<S> c;
    Matrix<S> R;
    random_pair<S>(n, d, 7 + static_cast<std::uint64_t>(n), c, R);
    Matrix<S> X = R;
    for (int i = 0; i < n; ++i) X.row(i) += c;
    const auto m = by_name<S>(output_measures<S>(c, R, norm_composite<S>(X), MeasureSet::all()));
    const Brute b = brute_force<S>(c, R);
    INFO("n = " << n << ", d = " << d);
    require_near<S>(m.at("stable_rank_minus_one"), b.stable_minus_one, 64);
    require_near<S>(m.at("effective_rank_minus_one"), b.effective_minus_one, 64);
    require_near<S>(m.at("svd_residual"), b.svd_residual, 64);
    require_near<S>(m.at("one_minus_cosine"), b.one_minus_cosine, 64);
  }
}

TEST_CASE("measures: collapsed layers keep their digits (R = 1e-50 c at 128 bits)", "[measures]") {
  using S = mpfr_real<38>;
  for (const auto& [n, d] : std::vector<std::pair<int, int>>{{5, 8}, {9, 4}}) {
    RowVector<S> c;
    Matrix<S> R;
    random_pair<S>(n, d, 3, c, R);
    R *= S("1e-50");
    const Matrix<S> X = R.rowwise() + c;
    const auto m = by_name<S>(output_measures<S>(c, R, norm_composite<S>(X), MeasureSet::all()));
    const Brute b = brute_force<S>(c, R);
    INFO("n = " << n << ", d = " << d);
    // The companions are of order 1e-100 (squares) and 1e-48 (effective rank); X itself rounds them away.
    CHECK(S(m.at("one_minus_cosine")) < S("1e-90"));
    require_near<S>(m.at("one_minus_cosine"), b.one_minus_cosine, 64);
    require_near<S>(m.at("stable_rank_minus_one"), b.stable_minus_one, 64);
    require_near<S>(m.at("effective_rank_minus_one"), b.effective_minus_one, 64);
    require_near<S>(m.at("svd_residual"), b.svd_residual, 64);
  }
}

TEST_CASE("measures: at 1e-400000 the companions follow their scaling laws", "[measures]") {
  // With R = t R_0, 1 − cosine and σ_2²/σ_1² scale as t² and the SVD residual
  // and µ as t, up to relative terms of order t: t = 1e-50 (the regime checked
  // above against the brute force) fixes the constants to 1e-50, far below
  // 128 bits' ε = 5.9e-39, so t = 1e-400000 must agree to a few ε.
  using S = mpfr_real<38>;
  use_full_mpfr_exponent_range();
  RowVector<S> c;
  Matrix<S> R0;
  random_pair<S>(6, 5, 11, c, R0);
  const auto at = [&](const S& t) {
    const Matrix<S> R = R0 * t;
    const Matrix<S> X = R.rowwise() + c;
    return by_name<S>(output_measures<S>(c, R, norm_composite<S>(X), MeasureSet::all()));
  };
  const S t1("1e-50"), t2("1e-400000");
  const auto a = at(t1), b = at(t2);
  const auto ratio = [](const BigReal& x, const S& t, int power) { return S(S(x) / pow(t, power)); };
  // R0·t rounds once per entry: the two runs see R's that differ by an ε each.
  CHECK(error_in_eps<S>(ratio(b.at("one_minus_cosine"), t2, 2), ratio(a.at("one_minus_cosine"), t1, 2)) < 64);
  CHECK(error_in_eps<S>(ratio(b.at("stable_rank_minus_one"), t2, 2), ratio(a.at("stable_rank_minus_one"), t1, 2)) <
        64);
  CHECK(error_in_eps<S>(ratio(b.at("svd_residual"), t2, 1), ratio(a.at("svd_residual"), t1, 1)) < 64);
  CHECK(error_in_eps<S>(ratio(b.at("mu"), t2, 1), ratio(a.at("mu"), t1, 1)) < 8);
}

TEMPLATE_TEST_CASE("measures: attention entropy and first-token mass by hand", "[measures]", double,
                   mpfr_real<38>) {
  using S = TestType;
  using std::log;
  const int n = 4;
  // Head 1: uniform rows; head 2: causal, row i uniform over the first i + 1 keys.
  Matrix<S> U = Matrix<S>::Constant(n, n, S(1) / S(n));
  Matrix<S> C = Matrix<S>::Zero(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) C(i, j) = S(1) / S(i + 1);
  const auto m = by_name<S>(attention_measures<S>({U, C}, MeasureSet::all()));
  S entropy = S(n) * log(S(n));
  S first = S(n) / S(n);
  for (int i = 0; i < n; ++i) {
    entropy += log(S(i + 1));
    first += S(1) / S(i + 1);
  }
  CHECK(error_in_eps<S>(value<S>(m, "attention_entropy"), S(entropy / S(2 * n))) < 16);
  CHECK(error_in_eps<S>(value<S>(m, "first_token_mass"), S(first / S(2 * n))) < 8);
  CHECK(attention_measures<S>({U}, MeasureSet::parse("mu")).empty());
}

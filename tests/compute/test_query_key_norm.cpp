// The query/key norm (src/compute/query_key_norm_impl.hpp) against values
// worked out by hand: one RMSNorm per head's block of columns (not over the
// whole row), eps inside the square root, gains w and 1 + w, rows apart.
#include "compute/query_key_norm_impl.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using namespace sanpath;

namespace {

/// |a − b| in units of double's epsilon times max(1, |b|).
double ulps_apart(double a, double b) {
  return std::fabs(a - b) / (std::numeric_limits<double>::epsilon() * std::max(1.0, std::fabs(b)));
}

void require_near(const Matrix<double>& got, const Matrix<double>& want, double ulps = 4) {
  REQUIRE(got.rows() == want.rows());
  REQUIRE(got.cols() == want.cols());
  for (Eigen::Index i = 0; i < want.rows(); ++i)
    for (Eigen::Index j = 0; j < want.cols(); ++j) {
      CAPTURE(i, j, got(i, j), want(i, j));
      CHECK(ulps_apart(got(i, j), want(i, j)) <= ulps);
    }
}

}  // namespace

TEST_CASE("query_key_norm: one RMSNorm per head, gain w") {
  // Two heads of width 2. Row 0: head 0 (1, 1) has mean square 1, head 1
  // (3, −3) has 9; over the whole row it would be 5. Row 1: (0.5, −0.5) mean
  // square 1/4, (4, 0) mean square 8.
  Matrix<double> Q(2, 4);
  Q << 1, 1, 3, -3,  //
      0.5, -0.5, 4, 0;
  VectorXd w(2);
  w << 2, -0.25;
  query_key_norm(Q, 2, 2, w, 0.0, false);
  Matrix<double> want(2, 4);
  want << 1 * 2, 1 * -0.25, 1 * 2, -1 * -0.25,  // (1, 1)/1 ∘ w, (3, −3)/3 ∘ w
      1 * 2, -1 * -0.25, std::sqrt(2.0) * 2, 0;  // (0.5, −0.5)/0.5 ∘ w, (4, 0)/√8 ∘ w
  require_near(Q, want);
}

TEST_CASE("query_key_norm: eps inside the square root, gain 1 + w") {
  // (2, 2): mean square 4, + eps 5 = 9, root 3: (2/3, 2/3) ∘ (1 + w).
  // (0, 0): stays 0 (eps > 0). One head of width 2 per row.
  Matrix<double> K(2, 2);
  K << 2, 2,  //
      0, 0;
  VectorXd w(2);
  w << 1, -0.5;  // gains 2 and 0.5
  query_key_norm(K, 1, 2, w, 5.0, true);
  Matrix<double> want(2, 2);
  want << 2.0 / 3 * 2, 2.0 / 3 * 0.5,  //
      0, 0;
  require_near(K, want);
  // The same weights as a gain w: (2/3, 2/3) ∘ (1, −0.5).
  Matrix<double> K2(1, 2);
  K2 << 2, 2;
  query_key_norm(K2, 1, 2, w, 5.0, false);
  Matrix<double> want2(1, 2);
  want2 << 2.0 / 3, -1.0 / 3;
  require_near(K2, want2);
}

TEST_CASE("query_key_norm: a head of width 4, the decimal eps, shapes refused") {
  // (1, 2, 2, 4): mean square (1 + 4 + 4 + 16)/4 = 6.25, + eps 1e-6: the
  // root √6.250001; gain 1.
  Matrix<double> Q(1, 4);
  Q << 1, 2, 2, 4;
  const VectorXd one = VectorXd::Ones(4);
  query_key_norm(Q, 1, 4, one, 1e-6, false);
  const double r = std::sqrt(6.250001);
  Matrix<double> want(1, 4);
  want << 1 / r, 2 / r, 2 / r, 4 / r;
  require_near(Q, want);
  Matrix<double> bad(1, 5);
  CHECK_THROWS_AS(query_key_norm(bad, 1, 4, one, 0.0, false), std::invalid_argument);
  CHECK_THROWS_AS(query_key_norm(Q, 2, 2, one, 0.0, false), std::invalid_argument);
}

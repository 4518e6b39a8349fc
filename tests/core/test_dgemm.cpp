// sanpath's double kernel (core/dgemm.hpp behind gemm<double>, gemm_nt and
// gemm_weights): every entry of C is the chain c ← fma(a_ip, b_pj, c) over
// p = 0, 1, …, k−1 from +0. The reference here is that chain written out
// with std::fma, one entry at a time; every instruction-set level this CPU
// runs, every thread count and every rounding mode must give it bit for bit.
// (test_linalg.cpp measures the same products against exact ones.)
#include "support/helpers.hpp"

#include "sanpath/core/linalg.hpp"

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace sanpath;
using Eigen::MatrixXd;

namespace {

/// Random signs and mantissas, exponents over ±`spread` binades; every
/// second row `row_scale` binades away (magnitudes that cross).
MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, int spread = 0,
                       int row_scale = 0) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> e(-spread, spread);
  MatrixXd m(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) m(i, j) = std::ldexp(u(g), e(g) + (i % 2 == 1 ? row_scale : 0));
  return m;
}

/// The chain of FMAs, entry by entry, in the calling thread's rounding mode.
MatrixXd fma_chain(const MatrixXd& A, const MatrixXd& B) {
  MatrixXd C(A.rows(), B.cols());
  for (Eigen::Index j = 0; j < B.cols(); ++j)
    for (Eigen::Index i = 0; i < A.rows(); ++i) {
      double c = 0.0;
      for (Eigen::Index p = 0; p < A.cols(); ++p) c = std::fma(A(i, p), B(p, j), c);
      C(i, j) = c;
    }
  return C;
}

/// Same bits (NaN compared as NaN: its payload is not part of the contract).
bool same_bits(const MatrixXd& a, const MatrixXd& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Eigen::Index j = 0; j < a.cols(); ++j)
    for (Eigen::Index i = 0; i < a.rows(); ++i) {
      if (std::isnan(a(i, j)) || std::isnan(b(i, j))) {
        if (std::isnan(a(i, j)) != std::isnan(b(i, j))) return false;
        continue;
      }
      if (std::memcmp(&a(i, j), &b(i, j), sizeof(double)) != 0) return false;
    }
  return true;
}

using sanpath::test::Restore;

struct Shape {
  Eigen::Index m, k, n;
};

/// gemm, gemm_nt and gemm_weights of A (m×k) and B (k×n) at every level this
/// CPU runs and in every rounding mode, against the chain.
void check_everywhere(const MatrixXd& A, const MatrixXd& B) {
  Restore restore;
  const MatrixXd Bt = B.transpose();
  for (const int mode : {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    std::fesetround(mode);
    const MatrixXd want = fma_chain(A, B);
    for (const std::string& level : supported_double_products_isas()) {
      CAPTURE(level, mode, A.rows(), A.cols(), B.cols());
      set_double_products_isa(level);
      MatrixXd C, Cnt, Cw;
      gemm(A, B, C);
      gemm_nt(A, Bt, Cnt);
      gemm_weights(A, B, Cw);
      REQUIRE(same_bits(C, want));
      REQUIRE(same_bits(Cnt, want));
      REQUIRE(same_bits(Cw, want));
    }
  }
}

}  // namespace

TEST_CASE("the double kernel is the chain of FMAs on every level and in every rounding mode", "[dgemm]") {
  REQUIRE(!supported_double_products_isas().empty());
  REQUIRE(supported_double_products_isas().front() == "generic");
  // Odd shapes around every level's tile (4×4, 8×6, 24×8) and block (k 256,
  // m 96, n 1536) edges, and one product past each block size.
  const std::vector<Shape> shapes = {{1, 1, 1},   {3, 5, 2},    {7, 13, 9},   {25, 3, 17}, {24, 256, 8},
                                     {23, 257, 7}, {97, 300, 13}, {5, 11, 1537}, {49, 513, 50}};
  std::uint64_t seed = 3;
  for (const Shape& s : shapes) {
    seed += 2;
    check_everywhere(random_matrix(s.m, s.k, seed), random_matrix(s.k, s.n, seed + 1));
  }
  // Exponents over ±300 binades, and rows 2^600 apart: cancellation and
  // absorption happen in the chain as the reference has them.
  check_everywhere(random_matrix(30, 40, 41, 300), random_matrix(40, 11, 42, 300));
  check_everywhere(random_matrix(12, 70, 43, 4, 600), random_matrix(70, 9, 44, 4));
}

TEST_CASE("the double kernel: signed zeros, subnormals, infinities and NaN as the chain has them", "[dgemm]") {
  MatrixXd A = random_matrix(9, 10, 51), B = random_matrix(10, 7, 52);
  A(0, 3) = -0.0;
  A(1, 0) = std::numeric_limits<double>::denorm_min();
  A(2, 4) = std::numeric_limits<double>::infinity();
  B(5, 1) = -std::numeric_limits<double>::infinity();
  B(6, 2) = std::numeric_limits<double>::quiet_NaN();
  B.col(3).setZero();
  A.row(4) *= std::ldexp(1.0, -1070);  // subnormal products
  B(4, 2) = std::ldexp(1.0, 1000);
  A(5, 4) = std::ldexp(1.0, 1000);  // an overflow to infinity
  check_everywhere(A, B);
  // −0·x over a whole chain: +0 in round-to-nearest (the chain starts at +0).
  const MatrixXd negz = MatrixXd::Constant(2, 3, -0.0), ones = MatrixXd::Ones(3, 2);
  MatrixXd C;
  gemm(negz, ones, C);
  CHECK(!std::signbit(C(0, 0)));
}

TEST_CASE("the double kernel gives the same bits on 1, 2 and 3 threads", "[dgemm]") {
  Restore restore;
  // Above the split threshold (2^21 multiply-adds), by columns and by rows.
  for (const Shape& s : std::vector<Shape>{{128, 768, 300}, {700, 64, 90}}) {
    const MatrixXd A = random_matrix(s.m, s.k, 61, 3), B = random_matrix(s.k, s.n, 62, 3);
    std::vector<MatrixXd> got;
    for (const int threads : {1, 2, 3}) {
      set_product_threads(threads);
      MatrixXd C;
      gemm(A, B, C);
      got.push_back(C);
    }
    CAPTURE(s.m, s.k, s.n);
    REQUIRE(same_bits(got[0], got[1]));
    REQUIRE(same_bits(got[0], got[2]));
    set_product_threads(1);
    REQUIRE(same_bits(got[0], fma_chain(A, B)));
  }
}

TEST_CASE("the double kernel's level: named, and refused when unknown", "[dgemm]") {
  Restore restore;
  const std::vector<std::string> levels = supported_double_products_isas();
  for (const std::string& level : levels) {
    set_double_products_isa(level);
    CHECK(double_products_isa() == level);
  }
  CHECK_THROWS_WITH(set_double_products_isa("sse9"), Catch::Contains("unknown level 'sse9'"));
  if (levels.size() < 3) CHECK_THROWS_WITH(set_double_products_isa("avx512"), Catch::Contains("cannot run"));
}

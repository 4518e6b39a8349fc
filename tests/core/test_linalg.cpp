// The products of core/linalg.hpp in every precision tier, against exact dot
// products. For MPFR tiers the contract is: every entry within ½ ulp of the
// exact value plus 3k·2^(e_i+f_j−W) with W ≥ p + 48 (e_i, f_j the exponents of
// row i of A and column j of B), whichever kernel runs (AVX-512 IFMA or GMP,
// bit-identical) and whatever the thread count (bit-identical). Double goes
// through sanpath's kernel, one chain of k FMAs per entry: the classical bound
// γ_k Σ_p |a_ip b_pj| ≤ (k/2)·eps·(1 + 2^-20)·Σ_p |a_ip b_pj| (k·eps < 2^-20),
// on every instruction-set level (test_dgemm.cpp: the levels are bit-identical).
#include "support/helpers.hpp"

#include "sanpath/core/linalg.hpp"

#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace sanpath;
using Eigen::MatrixXd;

namespace {

/// A matrix of doubles with random signs and mantissas, and exponents spread
/// over ±`spread` binades (0: entries in [-1, 1]). Rows scaled by `row_scale`
/// binades apart test magnitudes that cross (the kernel's fallback path).
MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, int spread = 0, int row_scale = 0) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> e(-spread, spread);
  MatrixXd m(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i)
      m(i, j) = std::ldexp(u(g), e(g) + (row_scale != 0 && i % 2 == 1 ? row_scale : 0));
  return m;
}

/// Entries of S with all of S's bits random (not only a double's 53), so the
/// fixed-point conversion of every limb is exercised.
template <class S> Matrix<S> full_precision(const MatrixXd& m, std::uint64_t seed) {
  Matrix<S> out = convert<S>(m);
  if constexpr (is_mpfr_v<S>) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      for (Eigen::Index i = 0; i < m.rows(); ++i) {
        // x·(1 + δ) with δ a product of small randoms: fills the low limbs.
        S delta(u(g));
        for (int t = 0; t < 6; ++t) delta *= S(u(g) * 1e-9);
        out(i, j) *= S(1) + delta;
      }
  }
  return out;
}

/// Checks C (from gemm) against the exact products of A and B, entry by
/// entry, in units of S's epsilon: |c − exact| ≤ eps·(½|exact| + slack_ij),
/// slack_ij = k·2^-40·max_p|a_ip|·max_p|b_pj| for MPFR tiers (the 3k·2^(e+f−W)
/// term with W ≥ p + 48, with room); for double eps·(k/2)·(1 + 2^-20)·Σ_p|a_ip b_pj|.
template <class S> void require_products_exact(const Matrix<S>& A, const Matrix<S>& B, const Matrix<S>& C) {
  REQUIRE(C.rows() == A.rows());
  REQUIRE(C.cols() == B.cols());
  // Exact arithmetic in raw MPFR: products of p-bit numbers over a few hundred
  // binades, summed, fit in 4p + 512 bits (every operation below is exact).
  const long p = precision_bits_v<S>;
  const mpfr_prec_t wide = 4 * p + 512;
  mpfr_t exact, abs_sum, prod, a, b, amax, bmax, c, err, allowed;
  for (mpfr_ptr x : {exact, abs_sum, prod, a, b, amax, bmax, c, err, allowed}) mpfr_init2(x, wide);
  const auto load = [](mpfr_ptr dst, const S& v) {
    if constexpr (is_mpfr_v<S>) {
      mpfr_set(dst, v.backend().data(), MPFR_RNDN);
    } else {
      mpfr_set_d(dst, v, MPFR_RNDN);
    }
  };
  const Eigen::Index k = A.cols();
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < B.cols(); ++j) {
      mpfr_set_zero(exact, 1);
      mpfr_set_zero(abs_sum, 1);
      mpfr_set_zero(amax, 1);
      mpfr_set_zero(bmax, 1);
      for (Eigen::Index q = 0; q < k; ++q) {
        load(a, A(i, q));
        load(b, B(q, j));
        mpfr_mul(prod, a, b, MPFR_RNDN);
        mpfr_add(exact, exact, prod, MPFR_RNDN);
        mpfr_abs(prod, prod, MPFR_RNDN);
        mpfr_add(abs_sum, abs_sum, prod, MPFR_RNDN);
        mpfr_abs(a, a, MPFR_RNDN);
        mpfr_abs(b, b, MPFR_RNDN);
        mpfr_max(amax, amax, a, MPFR_RNDN);
        mpfr_max(bmax, bmax, b, MPFR_RNDN);
      }
      load(c, C(i, j));
      mpfr_sub(err, c, exact, MPFR_RNDN);
      mpfr_abs(err, err, MPFR_RNDN);
      // allowed = eps·(½|exact| + slack), slack as documented above.
      if constexpr (is_mpfr_v<S>) {
        mpfr_mul(allowed, amax, bmax, MPFR_RNDN);
        mpfr_mul_si(allowed, allowed, static_cast<long>(k), MPFR_RNDN);
        mpfr_mul_2si(allowed, allowed, -40, MPFR_RNDN);
        mpfr_abs(prod, exact, MPFR_RNDN);
        mpfr_mul_2si(prod, prod, -1, MPFR_RNDN);
        mpfr_add(allowed, allowed, prod, MPFR_RNDN);
      } else {
        mpfr_mul_si(allowed, abs_sum, static_cast<long>(k), MPFR_RNDN);
        mpfr_mul_2si(allowed, allowed, -1, MPFR_RNDN);
        mpfr_mul_2si(prod, allowed, -20, MPFR_RNDN);
        mpfr_add(allowed, allowed, prod, MPFR_RNDN);
      }
      mpfr_mul_2si(allowed, allowed, 1 - p, MPFR_RNDN);  // eps = 2^(1-p)
      if (mpfr_greater_p(err, allowed)) {
        const BigReal e(err), lim(allowed), x(exact), got(c);
        CAPTURE(p, i, j, k, to_sci(got), to_sci(x), to_sci(e), to_sci(lim));
        FAIL("product entry outside its error bound");
      }
    }
  for (mpfr_ptr x : {exact, abs_sum, prod, a, b, amax, bmax, c, err, allowed}) mpfr_clear(x);
}

template <class S> bool bit_identical(const Matrix<S>& a, const Matrix<S>& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Eigen::Index j = 0; j < a.cols(); ++j)
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      if (!(a(i, j) == b(i, j))) return false;
  return true;
}

struct Shape {
  Eigen::Index m, k, n;
};

/// Runs gemm and gemm_nt on one shape and checks them, then checks that the
/// GMP kernel and 1 or 2 threads give bit-identical results.
template <class S> void check_shape(const Shape& s, std::uint64_t seed, int spread, int row_scale) {
  CAPTURE(precision_bits_v<S>, s.m, s.k, s.n, spread, row_scale);
  const Matrix<S> A = full_precision<S>(random_matrix(s.m, s.k, seed, spread, row_scale), seed + 1);
  const Matrix<S> B = full_precision<S>(random_matrix(s.k, s.n, seed + 2, spread), seed + 3);
  const Matrix<S> Bt = B.transpose();
  Matrix<S> C, Cnt;
  set_product_threads(2);
  gemm(A, B, C);
  gemm_nt(A, Bt, Cnt);
  require_products_exact(A, B, C);
  REQUIRE(bit_identical(C, Cnt));  // A·B and A·(Bᵀ)ᵀ: the same dot products
  set_product_threads(1);
  Matrix<S> serial;
  gemm(A, B, serial);
  REQUIRE(bit_identical(C, serial));
  if constexpr (is_mpfr_v<S>) {
    allow_ifma_products(false);  // the portable GMP kernel computes the same integers
    Matrix<S> portable;
    gemm(A, B, portable);
    allow_ifma_products(true);
    REQUIRE(bit_identical(C, portable));
  }
  set_product_threads(0);
  // Weights held in double, with zeros and subnormals among them: gemm_weights
  // reads them into fixed point directly and must give gemm's result on the
  // same values converted to S, bit for bit (fallback entries included).
  MatrixXd Wd = random_matrix(s.k, s.n, seed + 4, spread);
  for (Eigen::Index j = 0; j < Wd.cols(); ++j)
    for (Eigen::Index i = 0; i < Wd.rows(); ++i) {
      if ((i + 2 * j) % 7 == 3) Wd(i, j) = 0.0;
      if ((i + 3 * j) % 11 == 5) Wd(i, j) = std::ldexp(Wd(i, j), -1060);  // subnormal
    }
  // Then weights whose columns span few binades (as trained and random
  // weights do): the IFMA kernel holds them at two limbs; a column spanning
  // exactly 50 binades still fits, one spanning 51 sends the product back to
  // the full width. Every case must give gemm's result (and the GMP
  // kernel's, at full width) bit for bit.
  MatrixXd narrow = random_matrix(s.k, s.n, seed + 5, 0);
  for (Eigen::Index j = 0; j < narrow.cols(); ++j)
    for (Eigen::Index i = 0; i < narrow.rows(); ++i)
      if ((i + 2 * j) % 7 == 3) narrow(i, j) = 0.0;
  MatrixXd edge50 = narrow, edge51 = narrow;
  if (s.k >= 2 && s.n >= 1) {
    edge50(0, 0) = 1.0;
    edge50(1, 0) = std::ldexp(-1.75, -50);  // exponents 1 and −49: 50 binades
    edge51(0, 0) = 1.0;
    edge51(1, 0) = std::ldexp(1.25, -51);  // 51 binades
  }
  for (const MatrixXd* w : {&Wd, &narrow, &edge50, &edge51}) {
    Matrix<S> Cw, Cref;
    gemm_weights(A, *w, Cw);
    gemm(A, convert<S>(*w), Cref);
    REQUIRE(bit_identical(Cw, Cref));  // shapes with n < 8 < m put the weights on the broadcast side
    // the same weights stored as a torch Linear ([out, in]): A·Wᵀ, as gemm_nt on the converted values
    const MatrixXd linear = w->transpose();
    Matrix<S> Cl, Cl_ref;
    gemm_weights_nt(A, linear, Cl);
    gemm_nt(A, convert<S>(linear), Cl_ref);
    REQUIRE(bit_identical(Cl, Cl_ref));
    REQUIRE(bit_identical(Cl, Cw));
    if constexpr (is_mpfr_v<S>) {
      allow_ifma_products(false);
      Matrix<S> portable;
      gemm_weights(A, *w, portable);
      allow_ifma_products(true);
      REQUIRE(bit_identical(Cw, portable));
    }
  }
}

template <class S> void check_tier() {
  // Odd and degenerate shapes, inner sizes around limb and block boundaries,
  // and one product big enough to be split over threads.
  const std::vector<Shape> shapes = {{1, 1, 1}, {3, 5, 2}, {7, 13, 9}, {2, 64, 3}, {17, 1, 11}, {33, 65, 5}};
  std::uint64_t seed = 11;
  for (const Shape& s : shapes) check_shape<S>(s, seed += 7, 0, 0);
  check_shape<S>({9, 31, 7}, 101, 60, 0);    // exponents spread over ±60 binades
  check_shape<S>({6, 12, 5}, 103, 4, 400);  // rows 2^400 apart: magnitudes cross, fallback entries
  // Large enough for the blocked, threaded path (the result must not depend on it).
  if constexpr (precision_bits_v<S> <= 1025) check_shape<S>({96, 40, 80}, 107, 2, 0);
  // Inner size above the IFMA kernel's flush interval (4096/(2L) − 1 terms,
  // 681 at 65 bits): partial sums carried across flushes.
  if constexpr (precision_bits_v<S> <= 1025) check_shape<S>({3, 700, 9}, 109, 1, 0);
  // Empty products: k = 0 gives zeros; m = 0 or n = 0 gives empty results.
  for (const Shape& s : std::vector<Shape>{{4, 0, 3}, {0, 5, 3}, {4, 5, 0}}) {
    CAPTURE(s.m, s.k, s.n);
    const Matrix<S> A = convert<S>(random_matrix(s.m, s.k, 5)), B = convert<S>(random_matrix(s.k, s.n, 6));
    Matrix<S> C;
    gemm(A, B, C);
    REQUIRE(C.rows() == s.m);
    REQUIRE(C.cols() == s.n);
    for (Eigen::Index j = 0; j < C.cols(); ++j)
      for (Eigen::Index i = 0; i < C.rows(); ++i) REQUIRE(C(i, j) == S(0));
  }
}

}  // namespace

TEST_CASE("gemm in double is within the classical bound of exact products, on every level", "[linalg]") {
  const std::string level = double_products_isa();
  for (const std::string& l : supported_double_products_isas()) {
    CAPTURE(l);
    set_double_products_isa(l);
    check_tier<double>();
  }
  set_double_products_isa(level);
}

// Every MPFR tier of the ladder, built or not (SANPATH_TIERS chooses
// the other modules' only): the fixed-point kernels switch limb sizes with the
// precision (IFMA up to 1025 bits, GMP above), so each tier is its own case.
#define SANPATH_TIER_CASE(D)                                                                          \
  TEST_CASE("gemm at " #D " digits: correctly rounded up to the kernel's guard, kernels and threads " \
            "bit-identical",                                                                           \
            "[linalg]") {                                                                              \
    check_tier<mpfr_real<D>>();                                                                        \
  }
SANPATH_FOR_EACH_LADDER_TIER(SANPATH_TIER_CASE)
#undef SANPATH_TIER_CASE

TEST_CASE("gemm_weights with a NaN or infinite weight follows IEEE semantics like gemm", "[linalg]") {
  using S = mpfr_real<38>;
  const Matrix<S> A = convert<S>(random_matrix(3, 4, 21));
  MatrixXd W = random_matrix(4, 2, 22);
  W(1, 0) = std::numeric_limits<double>::quiet_NaN();
  W(2, 1) = std::numeric_limits<double>::infinity();
  Matrix<S> Cw, Cref;
  gemm_weights(A, W, Cw);
  gemm(A, convert<S>(W), Cref);
  for (Eigen::Index j = 0; j < 2; ++j)
    for (Eigen::Index i = 0; i < 3; ++i) {
      CAPTURE(i, j);
      REQUIRE(boost::multiprecision::isnan(Cw(i, j)) == boost::multiprecision::isnan(Cref(i, j)));
      REQUIRE(boost::multiprecision::isinf(Cw(i, j)) == boost::multiprecision::isinf(Cref(i, j)));
      if (!boost::multiprecision::isnan(Cw(i, j))) REQUIRE(Cw(i, j) == Cref(i, j));
    }
  REQUIRE(boost::multiprecision::isnan(Cw(0, 0)));
}

TEST_CASE("gemm refuses mismatched inner sizes", "[linalg]") {
  Matrix<mpfr_real<38>> A(2, 3), B(4, 2), C;
  A.setZero();
  B.setZero();
  CHECK_THROWS_AS(gemm(A, B, C), std::invalid_argument);
  CHECK_THROWS_AS(gemm_nt(A, B, C), std::invalid_argument);
  CHECK_THROWS_AS(gemm_weights(A, MatrixXd(4, 2), C), std::invalid_argument);
  CHECK_THROWS_AS(gemm_weights_nt(A, MatrixXd(2, 4), C), std::invalid_argument);
}

TEST_CASE("threads: shares, caps and passes side by side split the budget", "[linalg][threads]") {
  // thread_share: total/parts, the first total%parts one more, at least 1.
  CHECK(thread_share(16, 2, 0) == 8);
  CHECK(thread_share(16, 2, 1) == 8);
  CHECK(thread_share(7, 3, 0) == 3);
  CHECK(thread_share(7, 3, 1) == 2);
  CHECK(thread_share(7, 3, 2) == 2);
  CHECK(thread_share(2, 4, 3) == 1);
  CHECK(resolve_threads(5) == 5);
  CHECK_THROWS_WITH(resolve_threads(-1), "threads: -1 is negative");
  CHECK_THROWS_WITH(check_thread_count(-1), "--threads: -1 is not a thread count in [0, 4096] (0: all cores)");
  CHECK_THROWS_WITH(check_thread_count(4097), "--threads: 4097 is not a thread count in [0, 4096] (0: all cores)");
  CHECK_NOTHROW(check_thread_count(0));

  set_product_threads(6);
  CHECK(product_threads() == 6);
  CHECK(resolve_threads(0) == 6);
  {
    ProductThreadsScope cap(4);
    CHECK(product_threads() == 4);
    {
      ProductThreadsScope wider(5);  // never above an outer cap
      CHECK(product_threads() == 4);
      SerialProductsScope serial;
      CHECK(product_threads() == 1);
    }
    CHECK(product_threads() == 4);
  }
  CHECK(product_threads() == 6);

  // Tasks run at once share the budget for their own products: 6 over 4
  // tasks is 2, 2, 1, 1; over 2 tasks, 3 each (read while all of them run).
  for (const int tasks : {2, 4}) {
    CAPTURE(tasks);
    std::vector<int> seen(static_cast<std::size_t>(tasks), 0);
    std::vector<bool> together(static_cast<std::size_t>(tasks), false);
    std::atomic<int> arrived{0}, read{0};
    std::vector<std::function<void(bool)>> work;
    for (int i = 0; i < tasks; ++i)
      work.push_back([&, i](bool t) {
        ++arrived;
        while (arrived.load() < tasks) std::this_thread::yield();
        seen[static_cast<std::size_t>(i)] = product_threads();
        together[static_cast<std::size_t>(i)] = t;
        ++read;
        while (read.load() < tasks) std::this_thread::yield();
      });
    run_at_once(work);
    for (int i = 0; i < tasks; ++i) {
      CHECK(seen[static_cast<std::size_t>(i)] == thread_share(6, tasks, i));
      CHECK(together[static_cast<std::size_t>(i)]);
    }
    CHECK(product_threads() == 6);
  }
  // A task that ends hands its threads to the one still running.
  {
    std::atomic<bool> first_done{false};
    int before = 0, after = 0;
    run_side_by_side([&] { first_done = true; },
                     [&] {
                       before = product_threads();  // 3, or 6 if the first task has already ended
                       while (!first_done.load()) std::this_thread::yield();
                       for (int spin = 0; spin < 1000000 && product_threads() != 6; ++spin) std::this_thread::yield();
                       after = product_threads();
                     });
    CHECK((before == 3 || before == 6));
    CHECK(after == 6);
  }
  // A cap is kept inside a group.
  {
    ProductThreadsScope cap(2);
    int inside = 0;
    run_side_by_side([&] { inside = product_threads(); }, [] {});
    CHECK((inside == 1 || inside == 2));
  }
  // One thread: the tasks run one after the other, each with that thread.
  set_product_threads(1);
  std::vector<int> seen(2, 0);
  run_side_by_side([&] { seen[0] = product_threads(); }, [&] { seen[1] = product_threads(); });
  CHECK(seen == std::vector<int>{1, 1});
  set_product_threads(0);
}

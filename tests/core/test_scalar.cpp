#include "support/helpers.hpp"

#include "sanpath/core/linalg.hpp"
#include "sanpath/core/quantity.hpp"
#include "sanpath/core/dispatch.hpp"

using namespace sanpath;

TEST_CASE("precision tiers: parsing, rounding up, limits") {
  CHECK(Precision::parse("double").native_double);
  const Precision p = Precision::parse("256");
  CHECK_FALSE(p.native_double);
  CHECK(p.bits == 257);
  CHECK(Precision::parse("53").bits == 65);
  CHECK(Precision::parse("20000").bits >= 20000);
  CHECK(Precision::max_bits() >= 20000);
  CHECK_THROWS_WITH(Precision::parse("52"), Catch::Contains("below the minimum of 53"));
  CHECK_THROWS_WITH(Precision::parse("1000000"), Catch::Contains("above the supported maximum"));
  CHECK_THROWS_WITH(Precision::parse("12abc"), Catch::Contains("'12abc'"));
  CHECK(Precision::parse("1025").next().bits == 2051);
  CHECK(Precision::double_precision().next().bits == 128);
}

TEST_CASE("with_scalar dispatches to a type of exactly the tier's precision") {
  for (long bits : Precision::tiers()) {
    const long got = with_scalar(Precision{false, bits}, [](auto tag) {
      using S = typename decltype(tag)::type;
      if constexpr (is_mpfr_v<S>) {
        return static_cast<long>(mpfr_get_prec(S(1).backend().data()));
      } else {
        return 53L;
      }
    });
    CHECK(got == bits);
  }
}

TEST_CASE("NumTraits of a tier use the tier's epsilon, not double's") {
  using R = mpfr_real<77>;
  const R eps = Eigen::NumTraits<R>::epsilon();
  // epsilon = 2^(1-257) for a 257-bit significand.
  CHECK(eps == boost::multiprecision::pow(R(2), R(1 - 257)));
  // dummy_precision = 2^-(3/4·257) = 2^-192: far below double's 1e-12, above eps.
  CHECK(Eigen::NumTraits<R>::dummy_precision() == boost::multiprecision::pow(R(2), R(-192)));
  CHECK(Eigen::NumTraits<R>::lowest() < R(0));
  CHECK(boost::multiprecision::isinf(Eigen::NumTraits<R>::infinity()));
  CHECK(Eigen::NumTraits<R>::highest() > R(1e300));
}

TEST_CASE("to_sci prints every magnitude with its true exponent") {
  BigReal::default_precision(40);
  const BigReal tiny = boost::multiprecision::pow(BigReal(10), BigReal(-1234));
  CHECK(to_sci(tiny) == "1.0000000000000000e-1234");
  CHECK(to_sci(tiny, 3) == "1.00e-1234");
  const BigReal huge = boost::multiprecision::pow(BigReal(2), BigReal(100000));
  // 2^100000 = 9.990020930143845...e30102 (log10 2^100000 = 30102.9995...)
  CHECK(to_sci(huge, 4) == "9.990e30102");
  CHECK(to_sci(BigReal(0)) == "0");
  CHECK(to_sci(BigReal(-0.5)) == "-5.0000000000000000e-1");
  CHECK(to_sci(1.0) == "1.0000000000000000e0");
}

TEST_CASE("agreeing digits and confirmed quantities") {
  BigReal::default_precision(50);
  const BigReal a("1.2345678901234567890");
  CHECK(agreeing_digits(a, a, 40) == 40);
  CHECK(agreeing_digits(BigReal("1.2345"), BigReal("1.2346"), 40) == 4);  // rel. diff 8.1e-5
  const Quantity q = confirm(BigReal("3.0e-50"), BigReal("7.0e-60"), 53);
  CHECK(q.below_resolution);
  CHECK(q.str() == "< 1e-49");
  const Quantity r = confirm(BigReal("1.2345"), BigReal("1.2346"), 200);
  CHECK(r.digits == 4);
  CHECK(r.str() == "1.235e0");
}

TEST_CASE("confirmed digits keep the printed value within one unit of its last digit") {
  BigReal::default_precision(40);
  // A case met on the gpt2-sized test SAN (tests/cli/reference_paths.sh): the
  // value agrees with the reference to 15 significant digits (relative
  // difference 5.6e-16), but rounded to 15 digits it prints 9.19822364779909,
  // 1.002 units of its last digit from the reference 9.19822364779907998.
  const BigReal ref("9.19822364779907998"), v("9.198223647799085118");
  CHECK(agreeing_digits(v, ref, 40) == 15);
  const Quantity q = confirm(v, ref, 200);
  CHECK(q.digits == 14);
  CHECK(q.str() == "9.1982236477991e0");  // 2.0e-14 from the reference: 0.2 units
  // No digit is taken where the rounded value stays within one unit:
  // 1.2345 vs 1.2346 agree to 4 digits and 1.235 is 0.4 units from 1.2346.
  CHECK(confirm(BigReal("1.2345"), BigReal("1.2346"), 200).digits == 4);
  // 9.9551 vs 9.9460: relative difference 9.1e-4, 3 digits agree; printed
  // to 3 digits 9.96 is 1.4 units from 9.946, to 2 digits 1.0e1 is 0.05.
  CHECK(agreeing_digits(BigReal("9.9551"), BigReal("9.9460"), 40) == 3);
  const Quantity t = confirm(BigReal("9.9551"), BigReal("9.9460"), 200);
  CHECK(t.digits == 2);
  CHECK(t.str() == "1.0e1");
  // The check run is no closer to the exact value than the working run (it is
  // perturbed and rounded too): its distance from the value counts as its
  // error. 9.99790 vs 9.99705 agree to 4 digits (relative 8.5e-5), and 9.998
  // is 0.95 units from 9.99705, but 0.95 + 0.85 units from the value's side
  // exceed one: the exact value may be 1.8 units away. 3 digits: 1.00e1.
  CHECK(agreeing_digits(BigReal("9.99790"), BigReal("9.99705"), 40) == 4);
  const Quantity w = confirm(BigReal("9.99790"), BigReal("9.99705"), 200);
  CHECK(w.digits == 3);
  CHECK(w.str() == "1.00e1");
}

TEST_CASE("enclosure ends print rounded outward") {
  BigReal::default_precision(40);
  const BigReal third = BigReal(1) / 3, neg = -third;
  CHECK(to_sci(third, 3) == "3.33e-1");
  CHECK(to_sci(third, 3, Rounding::down) == "3.33e-1");
  CHECK(to_sci(third, 3, Rounding::up) == "3.34e-1");
  CHECK(to_sci(neg, 3, Rounding::down) == "-3.34e-1");  // toward −∞
  CHECK(to_sci(neg, 3, Rounding::up) == "-3.33e-1");
  CHECK(to_sci(BigReal(0.25), 2, Rounding::up) == "2.5e-1");  // exact: no change
  Quantity q = Quantity::unconfirmed(BigReal(2) / 3);
  q.digits = 5;
  q.rounding = Rounding::down;
  CHECK(q.str() == "6.6666e-1");
  q.rounding = Rounding::up;
  CHECK(q.str() == "6.6667e-1");
}

TEST_CASE("digits of a value derived from an enclosure's lower end") {
  BigReal::default_precision(60);
  // [L, U] = [1, 1 + 1e-10]: relative error of sqrt(c·L) below (U − L)/2L = 5e-11.
  CHECK(lower_end_digits(BigReal(1), BigReal("1.0000000001")) == 10);
  CHECK(lower_end_digits(BigReal(1), BigReal("1.5")) == 0);   // (0.5)/2 = 0.25: no digit certain
  CHECK(lower_end_digits(BigReal(2), BigReal(2)) == std::nullopt);  // exact: no limit
  CHECK(lower_end_digits(BigReal(0), BigReal(1)) == 0);
  Quantity q = confirm(BigReal("1.234567890123"), BigReal("1.234567890123"), 200);
  REQUIRE(q.digits);
  CHECK(*q.digits > 12);
  limit_digits(q, 4);
  CHECK(q.digits == 4);
  CHECK(q.str() == "1.235e0");
  limit_digits(q, std::nullopt);
  CHECK(q.digits == 4);
  Quantity u = Quantity::unconfirmed(BigReal(1));
  limit_digits(u, 7);
  CHECK(u.digits == 7);
}

TEMPLATE_TEST_CASE("gemm matches a naive triple loop", "", double, mpfr_real<77>) {
  using S = TestType;
  Matrix<S> A(3, 4), B(4, 2);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) A(i, j) = S(i + 2 * j + 1) / S(7);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) B(i, j) = S(3 * i - j) / S(5);
  Matrix<S> C, Ct;
  gemm(A, B, C);
  Matrix<S> Bt = B.transpose();
  gemm_nt(A, Bt, Ct);
  Matrix<S> ref = Matrix<S>::Zero(3, 2);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 4; ++k) ref(i, j) += A(i, k) * B(k, j);
  test::require_matrix_near<S>(C, ref, 8);
  test::require_matrix_near<S>(Ct, ref, 8);
  CHECK_THROWS(gemm(A, A, C));
}

// The confirmation helpers every analysis uses (analysis/confirmation.hpp):
// expected values from the rules of math.md §6 worked out by hand.
#include "support/helpers.hpp"

#include "sanpath/analysis/confirmation.hpp"

#include <cmath>
#include <mpfr.h>

using namespace sanpath;

namespace {

BigReal big(const char* text) { return BigReal(text, 100); }

}  // namespace

TEST_CASE("confirmed: no check run, agreement, disagreement in every digit", "[confirmation]") {
  const Quantity u = confirmed(big("1.25"), nullptr, 257, 20);
  CHECK_FALSE(u.digits);
  CHECK_FALSE(u.below_resolution);
  CHECK(u.value == big("1.25"));

  const BigReal same = big("1.25");
  const Quantity a = confirmed(big("1.25"), &same, 257, 20);
  REQUIRE(a.digits);
  CHECK(*a.digits == decimal_digits(257));  // every digit 257 bits carry agrees
  CHECK(a.asked == 20);
  CHECK(a.shown() == "1.2500000000000000000e0");  // a table: the 20 digits asked of the 77 confirmed
  CHECK(a.str() == "1.25" + std::string(74, '0') + "e0");  // JSON: all 77
  CHECK(u.asked == 20);
  CHECK(u.str() == "1.2500000000000000e0");  // unconfirmed: the 17 digits of a double

  // 1 against −1: no digit agrees; |v| + |v − c| = 3, so |x| < 10.
  const BigReal minus_one = big("-1");
  const Quantity d = confirmed(big("1"), &minus_one, 257, 20);
  CHECK(d.below_resolution);
  CHECK(d.str() == "< 1e1");
}

TEST_CASE("confirmed_residual: an exact zero is rounding unless the matrix is zero", "[confirmation]") {
  const BigReal zero = big("0");
  // ‖M‖ = 1.5, n·d = 32, 257 bits: 1.5·32·2^-256 = 4.1e-76 < 1e-75.
  const Quantity r = confirmed_residual(zero, &zero, 257, 20, big("1.5"), 4, 8);
  CHECK(r.below_resolution);
  CHECK(r.str() == "< 1e-75");
  // M = 0: its residual is exactly 0, confirmed like any value.
  const Quantity z = confirmed_residual(zero, &zero, 257, 20, zero, 4, 8);
  CHECK_FALSE(z.below_resolution);
  CHECK(z.value == 0);
  REQUIRE(z.digits);
  // A nonzero residual is confirmed as a value.
  const BigReal c = big("2.5e-40");
  const Quantity v = confirmed_residual(big("2.5e-40"), &c, 257, 20, big("1.5"), 4, 8);
  CHECK_FALSE(v.below_resolution);
  CHECK(v.digits == decimal_digits(257));
  CHECK(v.shown() == "2.5000000000000000000e-40");
  CHECK(v.str() == "2.5" + std::string(75, '0') + "e-40");
  CHECK(r.asked == 20);
}

TEST_CASE("least_digits: the least count, none when a value has none", "[confirmation]") {
  Quantity a, b, c;
  a.digits = 5;
  b.digits = 3;
  CHECK(least_digits({&a, &b}) == 3);
  CHECK(least_digits({&a}) == 5);
  CHECK_FALSE(least_digits({&a, &b, &c}));  // c: no check run, or below resolution
  CHECK_FALSE(least_digits({}));
}

TEST_CASE("rounding_unit is 2^(1-bits)", "[confirmation]") {
  CHECK(rounding_unit(53) == BigReal(std::ldexp(1.0, -52)));
  CHECK(rounding_unit(1025) == BigReal(std::ldexp(1.0, -1024)));  // subnormal in double, still exact
}

// What underflow may take (MeasureValue::flushed): exact value in [value, value + flushed].
TEST_CASE("clear_of_underflow: no 0 printed, only the digits the allowance leaves", "[confirmation]") {
  const BigReal flushed = big("1e-50"), same = big("0"), v = big("1.234567890123456789e-40"), zero = big("0");
  // A 0 both runs agree on: below the allowance, no digit confirmed, never "0".
  const Quantity z = clear_of_underflow(confirmed(zero, &same, 257, 20), zero, flushed);
  CHECK(z.below_resolution);
  CHECK(z.digits == 0);
  CHECK(z.str() == "< 1e-49");
  // 1.23e-40 ± 1e-50: ten digits of it hold (log10(v/flushed) = 10.09), nine are kept.
  const Quantity a = clear_of_underflow(confirmed(v, &v, 257, 20), v, flushed);
  REQUIRE(a.digits);
  CHECK(*a.digits == 9);
  CHECK_FALSE(a.below_resolution);
  // Within a digit of the allowance: a bound above value + allowance.
  const BigReal near = big("3e-50");
  const Quantity n = clear_of_underflow(confirmed(near, &near, 257, 20), near, flushed);
  CHECK(n.below_resolution);
  CHECK(n.str() == "< 1e-49");
  // No allowance: as given.
  const Quantity g = clear_of_underflow(confirmed(v, &v, 257, 20), v, zero);
  CHECK(g.digits == decimal_digits(257));
}

TEST_CASE("power_of_ten_above at MPFR's widest exponents", "[confirmation]") {
  // x = 2^(emin_min + 67) = 2^(68 − 2^62): log10 x = (68 − 2^62)·log10 2 =
  // −1388255822130839262.600046… (mpmath, 60 digits), so the power of ten above it
  // is 1e-1388255822130839262. A double's log10 is off by hundreds there.
  const mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
  BigReal x(1, 40);
  mpfr_mul_2si(x.backend().data(), x.backend().data(), mpfr_get_emin_min() + 67, MPFR_RNDN);
  const BigReal b = power_of_ten_above(x);
  CHECK(b > x);
  CHECK(b / x < BigReal(10));
  CHECK(to_sci(b, 1) == "1e-1388255822130839262");
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
}

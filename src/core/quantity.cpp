#include "sanpath/core/quantity.hpp"

#include <algorithm>
#include <cmath>

namespace sanpath {

BigReal power_of_ten_above(const BigReal& x) {
  const double l = log10_abs(x);
  const long e = static_cast<long>(std::floor(l)) + 1;
  BigReal ten(10, 30);
  return pow(ten, BigReal(e, 30));
}

std::string Quantity::str() const {
  if (below_resolution) return "< " + to_sci(bound, 1);
  int sig = digits ? *digits : 17;
  if (asked) sig = std::min(sig, *asked);
  return to_sci(value, std::max(sig, 1), rounding);
}

Quantity Quantity::unconfirmed(const BigReal& v) {
  Quantity q;
  q.value = v;
  return q;
}

std::optional<int> lower_end_digits(const BigReal& L, const BigReal& U) {
  if (!(U > L)) return std::nullopt;
  if (!(L > 0)) return 0;
  const double rel = log10_abs(BigReal((U - L) / (2 * L)));
  return std::max(0, static_cast<int>(std::floor(-rel)));
}

void limit_digits(Quantity& q, std::optional<int> max_digits) {
  if (!max_digits || q.below_resolution) return;
  q.digits = std::min(q.digits.value_or(*max_digits), *max_digits);
}

namespace {

/// Whether `value` printed to `digits` significant digits (rounded to
/// nearest, as Quantity::str prints it) is within one unit of its last digit
/// of `check`.
bool printed_within_last_unit(const BigReal& value, const BigReal& check, int digits) {
  const unsigned prec = std::max(value.precision(), check.precision()) + 10;
  const BigReal printed(to_sci(value, digits), prec);
  const BigReal big = max(abs(printed), abs(check));
  if (big == 0) return true;
  const long e = static_cast<long>(std::floor(log10_abs(big)));
  const BigReal unit = pow(BigReal(10, prec), BigReal(e - digits + 1, prec));
  return abs(BigReal(printed - check, prec)) <= unit;
}

}  // namespace

Quantity confirm(const BigReal& value, const BigReal& check, long bits) {
  Quantity q;
  q.value = value;
  const int max_digits = decimal_digits(bits);
  int d = agreeing_digits(value, check, max_digits);
  // Agreement of the unrounded value to d digits leaves it up to one unit of
  // the d-th digit from `check`; rounded for printing it can be 1.5 units
  // away. Keep only the digits whose printed value is within one unit.
  while (d > 0 && !printed_within_last_unit(value, check, d)) --d;
  q.digits = d;
  if (d == 0 && value != check) {
    q.below_resolution = true;
    q.bound = power_of_ten_above(BigReal(abs(value) + abs(value - check)));
  }
  return q;
}

Quantity below_resolution(const BigReal& value, const BigReal& bound) {
  Quantity q;
  q.value = value;
  q.below_resolution = true;
  q.bound = power_of_ten_above(bound);
  return q;
}

}  // namespace sanpath

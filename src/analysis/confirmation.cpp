#include "sanpath/analysis/confirmation.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>

namespace sanpath {

Quantity confirmed(const BigReal& value, const BigReal* check, long bits, int asked) {
  Quantity q = check ? confirm(value, *check, bits) : Quantity::unconfirmed(value);
  q.asked = asked;
  return q;
}

BigReal rounding_unit(long bits) { return pow(BigReal(2, 30), BigReal(1 - bits, 30)); }

Quantity confirmed_residual(const BigReal& value, const BigReal* check, long bits, int asked, const BigReal& norm,
                            long n, long d) {
  if (value == 0 && norm != 0) {
    Quantity q = below_resolution(value, BigReal(abs(norm) * rounding_unit(bits) * BigReal(n * d, 30)));
    if (check) q.digits = 0;  // checked, like every value below resolution: no digit confirmed
    q.asked = asked;
    return q;
  }
  return confirmed(value, check, bits, asked);
}

Quantity clear_of_underflow(Quantity q, const BigReal& value, const BigReal& flushed) {
  if (flushed == 0 || q.below_resolution) return q;
  if (value != 0) {
    // An error of at most `flushed` leaves the digits above its own: log10(|value|/flushed) − 1 of them.
    const double room = std::floor(log10_abs(BigReal(abs(value) / flushed))) - 1.0;
    if (room >= 1.0) {
      if (q.digits && *q.digits > room) q.digits = static_cast<int>(room);
      return q;
    }
  }
  Quantity b = below_resolution(value, BigReal(abs(value) + flushed));
  if (q.digits) b.digits = 0;  // checked: no digit confirmed
  b.asked = q.asked;
  return b;
}

std::optional<int> least_digits(std::initializer_list<const Quantity*> qs) {
  std::optional<int> least;
  for (const Quantity* q : qs) {
    if (!q->digits) return std::nullopt;
    least = std::min(least.value_or(*q->digits), *q->digits);
  }
  return least;
}

long bits_to_resolve(const BigReal& rho, int digits, long n, long d, int depth) {
  const double log2_rho = log10_abs(rho) / std::log10(2.0);
  const double growth = 2.0 * std::log2(static_cast<double>(std::max(2L, n * d))) + 4.0 * depth + 16.0;
  return static_cast<long>(std::ceil(-log2_rho + digits * std::log2(10.0) + growth));
}

int resolved_digits(const BigReal& rho, long bits, long n, long d, int depth) {
  if (rho == 0) return 0;
  const long growth = bits_to_resolve(BigReal(1), 0, n, d, depth);  // the allowance alone (rho = 1, no digits)
  const double left = static_cast<double>(bits - growth) + log10_abs(rho) / std::log10(2.0);
  const double digits = std::floor(left * std::log10(2.0));
  return digits < 0 ? 0 : static_cast<int>(std::min(digits, static_cast<double>(decimal_digits(bits))));
}

}  // namespace sanpath

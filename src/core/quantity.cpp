#include "sanpath/core/quantity.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace sanpath {

bool contains(const Interval& v, const BigReal& x) {
  return mpfr_cmp(v.lo.backend().data(), x.backend().data()) <= 0 &&
         mpfr_cmp(x.backend().data(), v.hi.backend().data()) <= 0;
}

int proven_digits(const Interval& v, const BigReal& value, int max_digits) {
  mpfr_srcptr lo = v.lo.backend().data(), hi = v.hi.backend().data(), x = value.backend().data();
  if (!mpfr_number_p(lo) || !mpfr_number_p(hi) || !mpfr_number_p(x) || max_digits < 1) return 0;
  if (mpfr_zero_p(lo) && mpfr_zero_p(hi)) return mpfr_zero_p(x) ? max_digits : 0;  // exactly zero
  if (mpfr_sgn(lo) <= 0 && mpfr_sgn(hi) >= 0) return 0;                              // the sign is unknown
  if (mpfr_zero_p(x)) return 0;
  const mpfr_prec_t prec =
      std::max<mpfr_prec_t>({mpfr_get_prec(x), mpfr_get_prec(lo), mpfr_get_prec(hi), 64}) + 4 * max_digits + 64;
  mpfr_t w, t, vd, vu, unit, bound;
  mpfr_inits2(64, w, t, static_cast<mpfr_ptr>(nullptr));
  mpfr_inits2(prec, vd, vu, unit, bound, static_cast<mpfr_ptr>(nullptr));
  mpfr_sub(w, hi, lo, MPFR_RNDU);
  mpfr_abs(t, x, MPFR_RNDD);
  mpfr_div(w, w, t, MPFR_RNDU);  // (hi − lo)/|x|, rounded up
  // First guess from the relative width, one digit high: each d is then checked exactly.
  int d = max_digits;
  const double wd = mpfr_get_d(w, MPFR_RNDU);
  if (wd > 0 && std::isfinite(wd))
    d = static_cast<int>(std::clamp(std::floor(1 - std::log10(wd)) + 1, 0.0, double(max_digits)));
  if (!std::isfinite(wd)) d = 0;
  int proven = 0;
  std::vector<char> buf(static_cast<std::size_t>(max_digits) + 64);
  for (; d >= 1; --d) {
    // v: `value` printed with d digits (round to nearest), 0.DIGITS × 10^e10; its last digit's unit 10^(e10 − d)
    mpfr_exp_t e10 = 0;
    mpfr_get_str(buf.data(), &e10, 10, static_cast<std::size_t>(d), x, MPFR_RNDN);
    std::string digits(buf.data());
    const bool neg = !digits.empty() && digits[0] == '-';
    if (neg) digits.erase(0, 1);
    const std::string text = std::string(neg ? "-0." : "0.") + digits + "e" + std::to_string(static_cast<long>(e10));
    mpfr_set_str(vd, text.c_str(), 10, MPFR_RNDD);
    mpfr_set_str(vu, text.c_str(), 10, MPFR_RNDU);
    mpfr_set_si(unit, 10, MPFR_RNDN);
    mpfr_pow_si(unit, unit, static_cast<long>(e10) - d, MPFR_RNDD);  // a smaller unit is the stricter test
    // proven: every point of [lo, hi] within one unit of v's last digit
    mpfr_sub(bound, vu, unit, MPFR_RNDU);  // ≥ v − unit
    const bool low_ok = mpfr_cmp(lo, bound) >= 0;
    mpfr_add(bound, vd, unit, MPFR_RNDD);  // ≤ v + unit
    if (low_ok && mpfr_cmp(hi, bound) <= 0) {
      proven = d;
      break;
    }
  }
  mpfr_clears(w, t, vd, vu, unit, bound, static_cast<mpfr_ptr>(nullptr));
  return proven;
}

std::optional<std::pair<std::string, std::string>> enclosure_text(const Quantity& q) {
  if (!q.enclosure) return std::nullopt;
  const int digits = std::max(6, q.digits.value_or(0) + 3);
  return std::make_pair(to_sci(q.enclosure->lo, digits, Rounding::down), to_sci(q.enclosure->hi, digits, Rounding::up));
}

BigReal power_of_ten_above(const BigReal& x) {
  // e = ⌊log10|x|⌋ + 1 from log10 rounded up, in MPFR: a double's log10 is off by
  // hundreds at MPFR's widest exponents (|log10 x| up to 1.4e18), where the bound
  // 10^e could fall below x.
  BigReal e(0, 40);
  mpfr_t magnitude;  // |x|, exact
  mpfr_init2(magnitude, mpfr_get_prec(x.backend().data()));
  mpfr_abs(magnitude, x.backend().data(), MPFR_RNDN);
  mpfr_log10(e.backend().data(), magnitude, MPFR_RNDU);
  mpfr_clear(magnitude);
  mpfr_floor(e.backend().data(), e.backend().data());
  mpfr_add_ui(e.backend().data(), e.backend().data(), 1, MPFR_RNDN);  // exact: an integer of at most 62 bits
  BigReal out(10, 30);
  mpfr_pow(out.backend().data(), out.backend().data(), e.backend().data(), MPFR_RNDU);
  if (!(out > abs(x)))  // 10^e out of this thread's MPFR exponent range: no bound to print
    throw std::logic_error("power_of_ten_above: 10^" + e.str() + " is outside this thread's MPFR exponent range");
  return out;
}

std::string Quantity::str() const {
  if (below_resolution) return "< " + to_sci(bound, 1);
  const int sig = digits ? *digits : std::min(17, asked.value_or(17));
  return to_sci(value, std::max(sig, 1), rounding);
}

std::optional<int> Quantity::shown_digits() const {
  if (!digits || !asked) return digits;
  return std::min(*digits, *asked);
}

std::string Quantity::shown() const {
  if (below_resolution) return "< " + to_sci(bound, 1);
  const int sig = digits ? *shown_digits() : std::min(17, asked.value_or(17));
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
/// of the exact value, as far as the check run can tell. The check run is
/// perturbed by a rounding unit of the working precision and rounded itself
/// (analysis/forward.cpp), so it is no closer to the exact value than the
/// working run: the two runs' difference stands for the check's own error,
/// and |printed − check| + |value − check| must fit in the unit.
bool printed_within_last_unit(const BigReal& value, const BigReal& check, int digits) {
  const unsigned prec = std::max(value.precision(), check.precision()) + 10;
  const BigReal printed(to_sci(value, digits), prec);
  const BigReal big = max(abs(printed), abs(check));
  if (big == 0) return true;
  const long e = static_cast<long>(std::floor(log10_abs(big)));
  const BigReal unit = pow(BigReal(10, prec), BigReal(e - digits + 1, prec));
  const BigReal off(abs(BigReal(printed - check, prec)) + abs(BigReal(value - check, prec)), prec);
  return off <= unit;
}

}  // namespace

Quantity confirm(const BigReal& value, const BigReal& check, long bits) {
  Quantity q;
  q.value = value;
  const int max_digits = decimal_digits(bits);
  int d = agreeing_digits(value, check, max_digits);
  // Agreement of the unrounded value to d digits leaves it up to one unit of
  // the d-th digit from `check`; rounded for printing it can be 1.5 units
  // away, and `check` is itself off by about |value − check|. Keep only the
  // digits whose printed value is within one unit with that error added.
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

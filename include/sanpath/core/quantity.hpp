#pragma once
/// \file quantity.hpp
/// A reported number and what is known of its accuracy: its value at the
/// working precision, the significant decimal digits confirmed by a second
/// run at higher precision, and whether it is below what the precision
/// resolves (then only an upper bound is known and printed as "< 1e-N").

#include "sanpath/core/scalar.hpp"

#include <optional>
#include <string>
#include <utility>

namespace sanpath {

/// A closed interval [lo, hi] containing an exact real value (lo ≤ hi):
/// an enclosure (math.md §10), its ends rounded outward.
struct Interval {
  BigReal lo, hi;
};

struct Quantity {
  BigReal value;
  /// Significant decimal digits confirmed by the check run; nullopt when no
  /// check run was made.
  std::optional<int> digits;
  /// True when the value is rounding noise: only `bound` is known, |x| < bound.
  bool below_resolution = false;
  BigReal bound;  ///< a power of ten above |x| when below_resolution
  /// How str() rounds to its digits: down for the lower end of an
  /// enclosure, up for the upper end (the printed interval still encloses).
  Rounding rounding = Rounding::nearest;
  /// The significant digits asked for (--digits): a table cell (shown())
  /// prints no more. nullopt: every confirmed digit.
  std::optional<int> asked;
  /// Certified runs (math.md §10): an enclosure of the exact value; `digits`
  /// are then the digits it proves (proven_digits), not confirmed ones.
  std::optional<Interval> enclosure;

  /// Decimal string of every confirmed significant digit (at least 1): the
  /// string `digits` counts, printed by JSON, CSV and Python; without a digit
  /// count (no check run) min(17, asked), the digits that hold a double;
  /// "< 1e-N" when below resolution. Never "0" for a nonzero value, never "inf".
  std::string str() const;
  /// A table cell: str() cut to min(digits, asked) significant digits;
  /// shown_digits() counts them (nullopt without a check run).
  std::string shown() const;
  std::optional<int> shown_digits() const;
  /// A value with no check run.
  static Quantity unconfirmed(const BigReal& v);
};

/// Whether the exact value enclosed by `v` lies in it: lo ≤ x ≤ hi.
bool contains(const Interval& v, const BigReal& x);

/// The significant digits `v` proves (math.md §10) for `value` (a point of
/// v, the value to print): the largest d ≤ max_digits such that `value`
/// printed with d digits (rounded to nearest) is within one unit of its last
/// digit of every point of [lo, hi] — the printed value is then a faithful
/// rounding of the exact one, the same promise as a confirmed digit; 0 when
/// none (an interval containing 0, or unbounded), max_digits for an exact zero.
int proven_digits(const Interval& v, const BigReal& value, int max_digits);

/// The enclosure of a certified quantity as decimal strings [lo, hi] rounded
/// outward, three digits beyond those proven (at least six); nullopt without one.
std::optional<std::pair<std::string, std::string>> enclosure_text(const Quantity& q);

/// Significant digits that a value computed from the lower end L of an
/// enclosure [L, U] of a positive quantity T carries as sqrt(c·T):
/// floor(−log10((U − L) / 2L)); nullopt when U ≤ L (no limit), 0 when L ≤ 0.
std::optional<int> lower_end_digits(const BigReal& L, const BigReal& U);

/// Limits q's digits to `max_digits` (when given): the value is known to no
/// more digits than that for a reason other than rounding (e.g. the width of
/// an enclosure it was derived from). Values below resolution are unchanged.
void limit_digits(Quantity& q, std::optional<int> max_digits);

/// Compares a value computed at `bits` with the same quantity from a run at
/// higher precision. Digits = agreeing significant digits, at most what
/// `bits` carries, and no more than keep the value, printed rounded to that
/// many digits, within one unit of its last digit of `check` once the
/// check's own error, taken as |value − check|, is added. When none
/// agree the value is declared below resolution with bound = the next power
/// of ten above |value| + |value − check|.
Quantity confirm(const BigReal& value, const BigReal& check, long bits);

/// Marks a value below resolution without a check run: |x| < bound.
Quantity below_resolution(const BigReal& value, const BigReal& bound);

/// The smallest power of ten strictly above |x| (x > 0), as BigReal.
BigReal power_of_ten_above(const BigReal& x);

}  // namespace sanpath

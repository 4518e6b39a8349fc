#pragma once
/// \file confirmation.hpp
/// Confirmation of reported numbers (math.md §6), in one place for every
/// analysis: a value computed at the working precision is compared with the
/// same quantity from a second run (sanpath::confirm: the agreeing digits; no
/// agreeing digit means below resolution, an upper bound "< 1e-N"); a
/// residual computed as exactly 0 is rounding, not a measurement; without a
/// check run a value is the one computed, unconfirmed.
///
/// \code
///   // v at 257 bits, c the same residual from the run at 513 bits:
///   Quantity q = confirmed_residual(v, &c, 257, 20, norm_X, n, d);
///   q.str();  // "1.2345678901234567890e-40" (20 digits asked), or "< 1e-75" when below resolution
/// \endcode

#include "sanpath/core/quantity.hpp"
#include "sanpath/core/scalar.hpp"

#include <initializer_list>
#include <optional>

namespace sanpath {

/// `value` confirmed by `check` (sanpath::confirm at `bits`), or unconfirmed
/// when `check` is null (no check run); printed to at most `asked`
/// significant digits (Quantity::asked: the digits asked, --digits).
Quantity confirmed(const BigReal& value, const BigReal* check, long bits, int asked);

/// A residual ‖res(M)‖ of an n×d matrix M of norm `norm`: like `confirmed`,
/// except that an exact 0 of a nonzero M is rounding (its rows became
/// identical), reported below the resolution 2^(1−bits)·‖M‖·n·d of the
/// working precision, never as 0 (0 confirmed digits when `check` is given,
/// as for any value below resolution). The residual of M = 0 is exactly 0.
Quantity confirmed_residual(const BigReal& value, const BigReal* check, long bits, int asked, const BigReal& norm,
                            long n, long d);

/// `q`, the report of `value`, where underflow may have taken up to
/// `flushed` from it (MeasureValue::flushed: the exact value lies in
/// [value, value + flushed]), which a check run at the same exponent range
/// cannot see. An exact 0 is reported below `flushed`, never as 0; a nonzero
/// value keeps the digits an error of `flushed` leaves, and with none is
/// reported below |value| + `flushed`. `q` as given when `flushed` is 0.
Quantity clear_of_underflow(Quantity q, const BigReal& value, const BigReal& flushed);

/// The least confirmed digits of `qs`; nullopt when one of them has no digit
/// count (no check run, or a value below resolution without one).
std::optional<int> least_digits(std::initializer_list<const Quantity*> qs);

/// 2^(1−bits): the unit roundoff bound of `bits`-bit arithmetic (twice the unit roundoff).
BigReal rounding_unit(long bits);

/// Bits needed so that a relative residual `rho` is resolved with `digits`
/// significant digits, with a margin for rounding growth over `depth`
/// layers of n×d products:
/// −log2 ρ + digits·log2 10 + 2·log2(n·d) + 4·depth + 16.
long bits_to_resolve(const BigReal& rho, int digits, long n, long d, int depth);

/// Significant decimal digits `bits` bits resolve in a relative residual
/// `rho` of the direct pass: bits_to_resolve inverted (the bits left after
/// the rounding growth allowance), in [0, decimal_digits(bits)]; 0 for rho = 0.
int resolved_digits(const BigReal& rho, long bits, long n, long d, int depth);

}  // namespace sanpath

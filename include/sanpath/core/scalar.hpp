#pragma once
/// \file scalar.hpp
/// Precision. Computations run in native `double` or in an MPFR-backed real
/// (Boost.Multiprecision, fixed precision, expression templates off) taken
/// from a fixed ladder of tiers and dispatched at run time. Results leave the
/// templated kernels as `BigReal` (variable-precision MPFR that keeps the
/// precision of the value it was made from), so reports are tier-independent.
/// This header also owns the complete Eigen::NumTraits of the MPFR tiers.

#include <boost/multiprecision/mpfr.hpp>
#include <Eigen/Core>

#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace sanpath {

/// MPFR real with `Digits10` decimal digits; MPFR precision
/// digits10_2_2(Digits10) bits.
template <unsigned Digits10>
using mpfr_real = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<Digits10>,
                                                boost::multiprecision::et_off>;

/// Dense matrices and vectors of a working scalar (column-major, Eigen).
template <class S> using Matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
template <class S> using Vector = Eigen::Matrix<S, Eigen::Dynamic, 1>;
template <class S> using RowVector = Eigen::Matrix<S, 1, Eigen::Dynamic>;

/// Tier-independent result value: keeps the precision of its source.
using BigReal = boost::multiprecision::mpfr_float;

template <class T> struct scalar_traits;
template <> struct scalar_traits<double> {
  static constexpr bool is_mpfr = false;
  static constexpr long bits = 53;
};
template <unsigned D> struct scalar_traits<mpfr_real<D>> {
  static constexpr bool is_mpfr = true;
  static constexpr long bits = static_cast<long>(D * 1000UL / 301UL + ((D * 1000UL) % 301 ? 2U : 1U));
};
template <class S> inline constexpr bool is_mpfr_v = scalar_traits<S>::is_mpfr;
/// Binary precision (bits of significand) of a scalar type.
template <class S> inline constexpr long precision_bits_v = scalar_traits<S>::bits;

/// The ladder of MPFR tiers (decimal digits). Binary precisions: 65, 128,
/// 257, 513, 1025, 2051, 4098, 8194, 16387, 32772 bits.
#define SANPATH_FOR_EACH_LADDER_TIER(X) X(19) X(38) X(77) X(154) X(308) X(617) X(1233) X(2466) X(4932) X(9864)
/// Double plus every tier of the ladder, as scalar types. Every templated
/// kernel is declared `extern template` at each of them in its header and
/// explicitly instantiated in src/ at double and at each tier the build
/// compiles (CMake's SANPATH_TIERS, default all; see
/// SANPATH_TEMPLATE_MODULES in CMakeLists.txt); the products of
/// core/linalg.hpp and the norms of compute/norms.hpp exist at every tier in
/// every build. with_scalar (core/dispatch.hpp) reaches the compiled tiers
/// only.
#define SANPATH_FOR_EACH_SCALAR(X) \
  X(double) X(::sanpath::mpfr_real<19>) X(::sanpath::mpfr_real<38>) X(::sanpath::mpfr_real<77>) \
  X(::sanpath::mpfr_real<154>) X(::sanpath::mpfr_real<308>) X(::sanpath::mpfr_real<617>)        \
  X(::sanpath::mpfr_real<1233>) X(::sanpath::mpfr_real<2466>) X(::sanpath::mpfr_real<4932>)     \
  X(::sanpath::mpfr_real<9864>)

/// A working precision: native double, or an MPFR tier.
struct Precision {
  bool native_double = true;
  long bits = 53;  ///< significand bits of the tier actually used

  static Precision double_precision() { return {}; }
  /// Smallest MPFR tier with at least `bits` bits. Throws
  /// std::invalid_argument below 53 or above max_bits() (naming the build's
  /// cut of the ladder when there is one).
  static Precision at_least(long bits);
  /// Parses "double", "auto" is not a precision (callers handle it), or a
  /// number of bits. Throws std::invalid_argument naming the text.
  static Precision parse(const std::string& text);
  /// Largest supported precision in bits: the top tier this build compiled.
  static long max_bits();
  /// Every MPFR tier this build compiled (SANPATH_TIERS), ascending.
  static const std::vector<long>& tiers();
  /// The tiers in words, e.g. "128, 257 bits (built with
  /// -DSANPATH_TIERS=128,257; the whole ladder is ...)".
  static std::string ladder_description();
  /// The next tier up (confirmation runs); double -> the 128-bit tier.
  /// Throws std::out_of_range at the top tier.
  Precision next() const;
  bool is_top() const;
  /// Unit roundoff 2^(1-bits) as a decimal-free log2: 1 - bits.
  long log2_epsilon() const { return 1 - bits; }
  std::string name() const;  ///< "double" or "<bits> bits"
  friend bool operator==(const Precision& a, const Precision& b) {
    return a.native_double == b.native_double && a.bits == b.bits;
  }
};

/// Tag carrying a scalar type through run-time dispatch.
template <class S> struct scalar_tag { using type = S; };

/// Converts a working scalar to a result value at the scalar's precision.
template <class S> BigReal to_big(const S& x) {
  if constexpr (is_mpfr_v<S>) {
    return BigReal(x);
  } else {
    return BigReal(x, 17);  // 17 digits (57 bits) hold a double exactly
  }
}

/// Decimal string in scientific notation with `significant` digits,
/// e.g. "3.1415926535897931e-1234"; "0" only for an exact zero; never
/// rounds a tiny or huge value to 0 or inf (MPFR exponents are unbounded
/// for practical purposes). NaN prints as "nan". `rounding` directs the
/// decimal rounding: down (toward −∞) for the lower end of an enclosure, up
/// for the upper end, so that the printed interval still encloses.
enum class Rounding { nearest, down, up };
std::string to_sci(const BigReal& x, int significant = 17, Rounding rounding = Rounding::nearest);
inline std::string to_sci(double x, int significant = 17, Rounding rounding = Rounding::nearest) {
  return to_sci(BigReal(x, 17), significant, rounding);
}

/// log10 |x| as a double (finite for every nonzero MPFR value; -inf for 0).
double log10_abs(const BigReal& x);

/// Number of leading decimal digits on which `a` agrees with the more
/// precise `reference`: floor(-log10(|a-ref|/|ref|)), clamped to
/// [0, max_digits]; max_digits when they are equal.
int agreeing_digits(const BigReal& a, const BigReal& reference, int max_digits);

/// Decimal digits carried by a precision of `bits` bits: floor(bits·log10 2).
int decimal_digits(long bits);

/// Held by a worker thread the library starts: frees that thread's MPFR
/// caches (constants, exp tables) when it ends, which would otherwise outlive
/// the thread (LeakSanitizer reports them).
class MpfrThreadCaches {
 public:
  MpfrThreadCaches() = default;
  ~MpfrThreadCaches();
  MpfrThreadCaches(const MpfrThreadCaches&) = delete;
  MpfrThreadCaches& operator=(const MpfrThreadCaches&) = delete;
};

}  // namespace sanpath

namespace Eigen {
/// Complete NumTraits for the MPFR tiers (Boost 1.74's eigen.hpp is
/// incomplete for Eigen 3.4). Tolerances follow the tier's own epsilon.
template <unsigned D>
struct NumTraits<sanpath::mpfr_real<D>> : GenericNumTraits<sanpath::mpfr_real<D>> {
  using Real = sanpath::mpfr_real<D>;
  using NonInteger = Real;
  using Literal = Real;
  using Nested = Real;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = 1,
    RequireInitialization = 1,
    ReadCost = 20,
    AddCost = 30,
    MulCost = 60
  };
  static Real epsilon() { return std::numeric_limits<Real>::epsilon(); }
  static Real dummy_precision() {
    // Like double's 1e-12 against eps 2.2e-16: about 3/4 of the digits.
    using std::pow;
    return pow(Real(2), Real(-(sanpath::precision_bits_v<Real> * 3) / 4));
  }
  static int digits10() { return std::numeric_limits<Real>::digits10; }
  static int digits() { return std::numeric_limits<Real>::digits; }
  static Real highest() { return (std::numeric_limits<Real>::max)(); }
  static Real lowest() { return -(std::numeric_limits<Real>::max)(); }
  static Real infinity() { return std::numeric_limits<Real>::infinity(); }
  static Real quiet_NaN() { return std::numeric_limits<Real>::quiet_NaN(); }
};

/// Mixed products with double are not provided: convert first.
}  // namespace Eigen

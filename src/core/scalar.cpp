#include "sanpath/core/scalar.hpp"

#include "sanpath/core/tiers.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace sanpath {

const std::vector<long>& Precision::tiers() {
  static const std::vector<long> bits = [] {
    std::vector<long> v;
#define SANPATH_TIER_BITS(D) v.push_back(scalar_traits<mpfr_real<D>>::bits);
    SANPATH_BUILT_TIERS(SANPATH_TIER_BITS)
#undef SANPATH_TIER_BITS
    return v;
  }();
  return bits;
}

long Precision::max_bits() { return tiers().back(); }

std::string Precision::ladder_description() {
  std::string out;
  for (long t : tiers()) out += (out.empty() ? "" : ", ") + std::to_string(t);
  out += " bits";
#if SANPATH_LADDER_CUT
  out += std::string(" (built with -DSANPATH_TIERS=") + SANPATH_TIERS_OPTION +
         "; the whole ladder is 65, 128, 257, ..., 32772 bits: configure with -DSANPATH_TIERS=all)";
#endif
  return out;
}

Precision Precision::at_least(long bits) {
  if (bits < 53)
    throw std::invalid_argument("precision: " + std::to_string(bits) +
                                " bits is below the minimum of 53 (use 'double' for native double)");
  for (long t : tiers())
    if (t >= bits) return Precision{false, t};
  const std::string top = std::to_string(max_bits()) + " bits";
#if SANPATH_LADDER_CUT
  const std::string above = "above this build's top tier of " + top + " (built with -DSANPATH_TIERS=" +
                            SANPATH_TIERS_OPTION + "; configure with -DSANPATH_TIERS=all and rebuild for tiers up to 32772 bits)";
#else
  const std::string above = "above the supported maximum of " + top;
#endif
  throw std::invalid_argument("precision: " + std::to_string(bits) + " bits is " + above);
}

Precision Precision::parse(const std::string& text) {
  if (text == "double") return double_precision();
  std::size_t used = 0;
  long bits = 0;
  try {
    bits = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument("precision: '" + text + "' is not 'double', 'auto' or a number of bits");
  return at_least(bits);
}

bool Precision::is_top() const { return !native_double && bits == max_bits(); }

Precision Precision::next() const {
  if (native_double) return at_least(128);
  for (long t : tiers())
    if (t > bits) return Precision{false, t};
  throw std::out_of_range("precision: no tier above " + std::to_string(bits) + " bits");
}

std::string Precision::name() const { return native_double ? "double" : std::to_string(bits) + " bits"; }

std::string to_sci(const BigReal& x, int significant, Rounding rounding) {
  const mpfr_srcptr v = x.backend().data();
  if (mpfr_nan_p(v)) return "nan";
  if (mpfr_inf_p(v)) return mpfr_sgn(v) > 0 ? "inf" : "-inf";
  if (mpfr_zero_p(v)) return "0";
  if (significant < 1) significant = 1;
  char* out = nullptr;
  // %.*Re: one digit before the point, significant-1 after, exponent in
  // decimal however large.
  const char* format = rounding == Rounding::down ? "%.*RDe" : rounding == Rounding::up ? "%.*RUe" : "%.*RNe";
  if (mpfr_asprintf(&out, format, significant - 1, v) < 0 || out == nullptr)
    throw std::runtime_error("to_sci: mpfr_asprintf failed");
  std::string s(out);
  mpfr_free_str(out);
  // MPFR prints e+05 / e-05; normalise to e5 / e-5 (no plus, no zero pad).
  const auto e = s.find('e');
  if (e != std::string::npos) {
    std::string mant = s.substr(0, e);
    long exp10 = std::stol(s.substr(e + 1));
    s = mant + "e" + std::to_string(exp10);
  }
  return s;
}

double log10_abs(const BigReal& x) {
  const mpfr_srcptr v = x.backend().data();
  if (mpfr_zero_p(v)) return -HUGE_VAL;
  long exp2 = 0;
  const double mant = mpfr_get_d_2exp(&exp2, v, MPFR_RNDN);  // |mant| in [0.5, 1)
  return std::log10(std::fabs(mant)) + static_cast<double>(exp2) * std::log10(2.0);
}

int agreeing_digits(const BigReal& a, const BigReal& reference, int max_digits) {
  if (a == reference) return max_digits;
  if (reference == 0) return 0;
  const BigReal rel = abs(a - reference) / abs(reference);
  const double d = std::floor(-log10_abs(rel));
  if (!(d > 0)) return 0;
  return d > max_digits ? max_digits : static_cast<int>(d);
}

int decimal_digits(long bits) { return static_cast<int>(std::floor(static_cast<double>(bits) * std::log10(2.0))); }

MpfrThreadCaches::~MpfrThreadCaches() { mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); }

namespace {

/// Boost 1.74 fills std::numeric_limits of an MPFR number lazily, on the
/// first call, without a lock (a flag set before the value), and its
/// start-up initializer fills only the expression-templates-on type, not
/// mpfr_real's. Threads meeting a limit for the first time at once (the
/// rounding check's three passes in Eigen's eigensolver) could read an
/// unset epsilon or min. Every tier's limits are filled here, before main
/// and before any thread of the library starts; min() takes MPFR's default
/// exponent range, whatever range a caller sets later.
template <class T> void fill_limits() {
  using L = std::numeric_limits<T>;
  (void)L::epsilon();
  (void)L::round_error();
  (void)(L::min)();
  (void)(L::max)();
  (void)L::infinity();
  (void)L::quiet_NaN();
}

struct LimitsAtStartup {
  LimitsAtStartup() {
#define SANPATH_FILL_LIMITS(D) fill_limits<mpfr_real<D>>();
    SANPATH_FOR_EACH_LADDER_TIER(SANPATH_FILL_LIMITS)
#undef SANPATH_FILL_LIMITS
  }
};
const LimitsAtStartup limits_at_startup;

}  // namespace

}  // namespace sanpath

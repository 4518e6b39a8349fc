#include "sanpath/core/bytes.hpp"

#include <cstring>
#include <stdexcept>

namespace sanpath {

namespace {
// BigReal kinds: a finite nonzero value carries its significand.
enum : std::uint64_t { kPositiveZero = 0, kNegativeZero = 1, kNaN = 2, kPlusInf = 3, kMinusInf = 4,
                       kFinite = 5 };
}  // namespace

void ByteWriter::put_u64(std::uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out_.append(b, 8);
}

void ByteWriter::put(double x) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  put_u64(bits);
}

void ByteWriter::put(const std::string& s) {
  put_u64(s.size());
  out_ += s;
}

void ByteWriter::put_mpfr(mpfr_srcptr v) {
  put_u64(static_cast<std::uint64_t>(mpfr_get_prec(v)));
  if (mpfr_nan_p(v)) return put_u64(kNaN);
  if (mpfr_inf_p(v)) return put_u64(mpfr_signbit(v) ? kMinusInf : kPlusInf);
  if (mpfr_zero_p(v)) return put_u64(mpfr_signbit(v) ? kNegativeZero : kPositiveZero);
  put_u64(kFinite);
  // Base 16 with the digit count chosen by MPFR, 1 + ceil((p - 1)/4) for p
  // bits: exact for a power-of-two base. v = 0.digits × 16^exponent.
  mpfr_exp_t exponent = 0;
  char* digits = mpfr_get_str(nullptr, &exponent, 16, 0, v, MPFR_RNDN);
  if (digits == nullptr) throw std::runtime_error("bytes: mpfr_get_str failed");
  const std::string text(digits);
  mpfr_free_str(digits);
  put(text);
  put_u64(static_cast<std::uint64_t>(static_cast<std::int64_t>(exponent)));
}

std::string_view ByteReader::take(std::size_t n) {
  if (in_.size() - at_ < n) throw std::runtime_error("bytes: the encoding ends early");
  const std::string_view s = in_.substr(at_, n);
  at_ += n;
  return s;
}

std::uint64_t ByteReader::get_u64() {
  const std::string_view b = take(8);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
  return v;
}

std::uint64_t ByteReader::get_count(std::size_t each) {
  const std::uint64_t n = get_u64();
  if (n > (in_.size() - at_) / each) throw std::runtime_error("bytes: a length exceeds the bytes left");
  return n;
}

void ByteReader::finish() const {
  if (at_ != in_.size()) throw std::runtime_error("bytes: " + std::to_string(in_.size() - at_) + " bytes left unread");
}

void ByteReader::get(double& x) {
  const std::uint64_t bits = get_u64();
  std::memcpy(&x, &bits, sizeof x);
}

void ByteReader::get(std::string& s) {
  const std::uint64_t n = get_count();
  s = std::string(take(n));
}

void ByteReader::get(bool& b) {
  const std::uint64_t v = get_u64();
  if (v > 1) out_of_range(v);
  b = v != 0;
}

void ByteReader::out_of_range(std::uint64_t v) {
  throw std::runtime_error("bytes: the value " + std::to_string(v) + " is out of its type's range");
}

void ByteReader::get(BigReal& x) {
  BigReal v;
  get_mpfr(v.backend().data(), false);
  x = std::move(v);  // moves keep the precision read (mpfr_swap)
}

void ByteReader::get_mpfr(mpfr_ptr p, bool fixed) {
  const std::uint64_t prec = get_u64();
  if (prec < MPFR_PREC_MIN || prec > static_cast<std::uint64_t>(MPFR_PREC_MAX))
    throw std::runtime_error("bytes: a precision of " + std::to_string(prec) + " bits");
  if (fixed && static_cast<mpfr_prec_t>(prec) != mpfr_get_prec(p))
    throw std::runtime_error("bytes: a value of " + std::to_string(prec) + " bits where one of " +
                             std::to_string(mpfr_get_prec(p)) + " bits belongs");
  mpfr_set_prec(p, static_cast<mpfr_prec_t>(prec));
  switch (get_u64()) {
    case kPositiveZero: mpfr_set_zero(p, +1); return;
    case kNegativeZero: mpfr_set_zero(p, -1); return;
    case kNaN: mpfr_set_nan(p); return;
    case kPlusInf: mpfr_set_inf(p, +1); return;
    case kMinusInf: mpfr_set_inf(p, -1); return;
    case kFinite: break;
    default: throw std::runtime_error("bytes: an unknown kind of real");
  }
  std::string digits;
  get(digits);
  const auto exponent = static_cast<std::int64_t>(get_u64());
  const bool negative = !digits.empty() && digits[0] == '-';
  const std::string significand = digits.substr(negative ? 1 : 0);
  if (significand.empty() || significand[0] == '0' ||
      significand.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw std::runtime_error("bytes: a malformed significand");
  // 0.digits first (a value in [1/16, 1), inside every exponent range), then
  // its binary exponent moved by 4·exponent: exact, never rounded through the
  // current exponent range.
  const std::string text = std::string(negative ? "-" : "") + "0." + significand;
  char* end = nullptr;
  if (mpfr_strtofr(p, text.c_str(), &end, 16, MPFR_RNDN) != 0 || end != text.c_str() + text.size())
    throw std::runtime_error("bytes: a significand of more bits than its precision");
  constexpr std::int64_t kMaxExponent = (std::int64_t{1} << 61) - 1;  // 4·exponent fits 64 bits
  if (exponent < -kMaxExponent || exponent > kMaxExponent) throw std::runtime_error("bytes: an exponent out of range");
  const std::int64_t e = static_cast<std::int64_t>(mpfr_get_exp(p)) + 4 * exponent;
  if (e < mpfr_get_emin_min() || e > mpfr_get_emax_max()) throw std::runtime_error("bytes: an exponent out of range");
  if (e < mpfr_get_emin() || e > mpfr_get_emax()) {
    // As forward_centred: this thread takes the largest range MPFR allows.
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
  }
  if (mpfr_set_exp(p, static_cast<mpfr_exp_t>(e)) != 0) throw std::runtime_error("bytes: an exponent out of range");
}

}  // namespace sanpath

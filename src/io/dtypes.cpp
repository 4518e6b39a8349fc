// The safetensors dtypes: element sizes and decoders (dtypes.hpp).
#include "dtypes.hpp"

#include "sanpath/core/weight_view.hpp"  // the float formats' bits
#include "sanpath/io/safetensors.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace sanpath {
namespace io {

const char* const kDecodedDtypes = "F64, F32, F16, BF16, F8_E5M2, F8_E4M3, I64, I32, I16, I8, U64, U32, U16, U8, BOOL";
const char* const kKnownDtypes =
    "F64, F32, F16, BF16, F8_E5M2, F8_E4M3, I64, I32, I16, I8, U64, U32, U16, U8, BOOL; "
    "F8_E8M0, F6_E2M3, F6_E3M2, F4, C64 in tensors that are not decoded";

std::size_t dtype_bits(const std::string& t) {
  if (const std::size_t bytes = dtype_size(t)) return 8 * bytes;
  if (t == "F8_E8M0") return 8;
  if (t == "F6_E2M3" || t == "F6_E3M2") return 6;
  if (t == "F4") return 4;
  if (t == "C64") return 64;
  return 0;
}

std::uint64_t load_le(const unsigned char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

namespace {

/// A binary floating format with `ebits` exponent and `mbits` fraction bits,
/// IEEE conventions (all-ones exponent: inf if fraction 0, else NaN).
double decode_ieee_small(std::uint32_t bits, int ebits, int mbits) {
  const bool neg = (bits >> (ebits + mbits)) & 1u;
  const std::uint32_t e = (bits >> mbits) & ((1u << ebits) - 1u);
  const std::uint32_t m = bits & ((1u << mbits) - 1u);
  const int bias = (1 << (ebits - 1)) - 1;
  double v;
  if (e == (1u << ebits) - 1u) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - mbits);  // subnormal (or zero)
  } else {
    v = std::ldexp(static_cast<double>((1u << mbits) | m), static_cast<int>(e) - bias - mbits);
  }
  return neg ? -v : v;
}

/// OCP FP8 E4M3 ("fn"): bias 7, no infinities, NaN only at S.1111.111.
double decode_f8_e4m3(std::uint32_t bits) {
  const bool neg = (bits >> 7) & 1u;
  const std::uint32_t e = (bits >> 3) & 15u;
  const std::uint32_t m = bits & 7u;
  double v;
  if (e == 15 && m == 7)
    v = std::numeric_limits<double>::quiet_NaN();
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), -9);
  else
    v = std::ldexp(static_cast<double>(8u | m), static_cast<int>(e) - 10);
  return neg ? -v : v;
}

template <class Int> double as_int(std::uint64_t raw) {
  using U = std::make_unsigned_t<Int>;
  const U u = static_cast<U>(raw);
  Int i;
  std::memcpy(&i, &u, sizeof i);
  return static_cast<double>(i);
}

/// Whether out[0 .. n) are all finite (no early exit: the loop vectorises).
bool all_finite(const double* out, std::size_t n) {
  std::uint64_t bad = 0;  // an integer flag: GCC 12 keeps a bool-flag loop scalar
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t u;
    std::memcpy(&u, out + i, 8);
    bad |= static_cast<std::uint64_t>((u & 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL);
  }
  return bad == 0;
}

}  // namespace

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
namespace {

/// Decodes n IEEE values with bits U in the host's byte order into out,
/// each by `decode_bits`; false when any has an all-ones exponent (NaN or
/// Inf). The flag is an integer and the pointers do not alias, so the loop
/// vectorises (a bool flag kept GCC 12 to one element at a time).
template <class U, class DecodeBits>
bool host_order_finite(const unsigned char* __restrict p, std::size_t n, double* __restrict out, U exponent,
                       DecodeBits decode_bits) {
  U bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, p + sizeof(U) * i, sizeof(U));
    bad |= static_cast<U>((u & exponent) == exponent);
    out[i] = decode_bits(u);
  }
  return bad == 0;
}

}  // namespace
#endif

bool decode_all(const std::string& dtype, const unsigned char* p, std::size_t n, double* out) {
  const auto each = [&](std::size_t size, auto&& one) {
    for (std::size_t i = 0; i < n; ++i) out[i] = one(p + i * size);
  };
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // The host's own order: plain copies, the test of the exponent bits in
  // the same pass.
  if (dtype == "F64") return host_order_finite<std::uint64_t>(p, n, out, 0x7ff0000000000000ULL, f64_from_bits);
  if (dtype == "F32") return host_order_finite<std::uint32_t>(p, n, out, 0x7f800000U, f32_from_bits);
  if (dtype == "BF16") return host_order_finite<std::uint16_t>(p, n, out, 0x7f80U, bf16_from_bits);
  if (dtype == "F16") return host_order_finite<std::uint16_t>(p, n, out, 0x7c00U, f16_from_bits);
#endif
  if (dtype == "F64")
    each(8, [](const unsigned char* q) {
      const std::uint64_t u = load_le(q, 8);
      double d;
      std::memcpy(&d, &u, 8);
      return d;
    });
  else if (dtype == "F32")
    each(4, [](const unsigned char* q) {
      const auto u = static_cast<std::uint32_t>(load_le(q, 4));
      float f;
      std::memcpy(&f, &u, 4);
      return static_cast<double>(f);
    });
  else if (dtype == "F16")
    each(2, [](const unsigned char* q) { return decode_f16(static_cast<std::uint16_t>(load_le(q, 2))); });
  else if (dtype == "BF16")
    each(2, [](const unsigned char* q) { return decode_bf16(static_cast<std::uint16_t>(load_le(q, 2))); });
  else if (dtype == "F8_E5M2")
    each(1, [](const unsigned char* q) { return decode_ieee_small(q[0], 5, 2); });
  else if (dtype == "F8_E4M3")
    each(1, [](const unsigned char* q) { return decode_f8_e4m3(q[0]); });
  else if (dtype == "I64")
    each(8, [](const unsigned char* q) { return as_int<std::int64_t>(load_le(q, 8)); });
  else if (dtype == "I32")
    each(4, [](const unsigned char* q) { return as_int<std::int32_t>(load_le(q, 4)); });
  else if (dtype == "I16")
    each(2, [](const unsigned char* q) { return as_int<std::int16_t>(load_le(q, 2)); });
  else if (dtype == "I8")
    each(1, [](const unsigned char* q) { return as_int<std::int8_t>(q[0]); });
  else if (dtype == "U64")
    each(8, [](const unsigned char* q) { return static_cast<double>(load_le(q, 8)); });
  else if (dtype == "U32")
    each(4, [](const unsigned char* q) { return static_cast<double>(load_le(q, 4)); });
  else if (dtype == "U16")
    each(2, [](const unsigned char* q) { return static_cast<double>(load_le(q, 2)); });
  else if (dtype == "U8")
    each(1, [](const unsigned char* q) { return static_cast<double>(q[0]); });
  else if (dtype == "BOOL")
    each(1, [](const unsigned char* q) { return q[0] != 0 ? 1.0 : 0.0; });
  else
    throw std::logic_error("decode_all: unknown dtype " + dtype);
  return all_finite(out, n);
}

namespace {

/// Elements tested per chunk: without an early exit inside a chunk the loop
/// vectorises; a chunk with a hit is searched again for its first one.
constexpr std::size_t kScanChunk = 4096;

/// first_nonfinite for elements of Size bytes whose value is not finite
/// when (bits & mask) == mask (all-ones exponent, IEEE formats).
template <std::size_t Size, class U> std::size_t first_with_all_ones(const unsigned char* p, std::size_t n, U mask) {
  const auto bits = [p](std::size_t i) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    U u;
    std::memcpy(&u, p + Size * i, Size);
    return u;
#else
    return static_cast<U>(load_le(p + Size * i, Size));
#endif
  };
  for (std::size_t start = 0; start < n; start += kScanChunk) {
    const std::size_t end = std::min(n, start + kScanChunk);
    U bad = 0;  // an integer flag: the loop vectorises (a bool one did not)
    for (std::size_t i = start; i < end; ++i) bad |= static_cast<U>((bits(i) & mask) == mask);
    if (bad == 0) continue;
    for (std::size_t i = start; i < end; ++i)
      if ((bits(i) & mask) == mask) return i;
  }
  return n;
}

}  // namespace

std::size_t first_nonfinite(const std::string& dtype, const unsigned char* p, std::size_t n) {
  if (dtype == "F64") return first_with_all_ones<8, std::uint64_t>(p, n, 0x7ff0000000000000ULL);
  if (dtype == "F32") return first_with_all_ones<4, std::uint32_t>(p, n, 0x7f800000U);
  if (dtype == "F16") return first_with_all_ones<2, std::uint16_t>(p, n, 0x7c00U);
  if (dtype == "BF16") return first_with_all_ones<2, std::uint16_t>(p, n, 0x7f80U);
  if (dtype == "F8_E5M2") return first_with_all_ones<1, std::uint8_t>(p, n, 0x7cU);
  if (dtype == "F8_E4M3") return first_with_all_ones<1, std::uint8_t>(p, n, 0x7fU);  // NaN only: S.1111.111
  return n;
}

}  // namespace io

double decode_f16(std::uint16_t bits) { return io::decode_ieee_small(bits, 5, 10); }
double decode_bf16(std::uint16_t bits) { return io::decode_ieee_small(bits, 8, 7); }

std::size_t dtype_size(const std::string& t) {
  if (t == "F64" || t == "I64" || t == "U64") return 8;
  if (t == "F32" || t == "I32" || t == "U32") return 4;
  if (t == "F16" || t == "BF16" || t == "I16" || t == "U16") return 2;
  if (t == "F8_E5M2" || t == "F8_E4M3" || t == "I8" || t == "U8" || t == "BOOL") return 1;
  return 0;
}

}  // namespace sanpath

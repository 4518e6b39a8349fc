#pragma once
// The dtypes of the safetensors format: names, element sizes and the
// decoders of io/safetensors.cpp (little-endian bytes → double).

#include <cstddef>
#include <cstdint>
#include <string>

namespace sanpath::io {

/// The dtypes sanpath decodes, and those it reads past without decoding
/// (for messages).
extern const char* const kDecodedDtypes;
extern const char* const kKnownDtypes;

/// Bits of one element of a safetensors dtype: the dtypes sanpath decodes
/// (dtype_size) and those of the format it reads past but cannot decode;
/// 0 if unknown.
std::size_t dtype_bits(const std::string& dtype);

/// The unsigned integer in the `n` ≤ 8 little-endian bytes at `p`.
std::uint64_t load_le(const unsigned char* p, std::size_t n);

/// Decodes `n` elements of `dtype` (one dtype_size() knows) from `p` into
/// `out`, one dispatch per tensor. Returns whether every value is finite.
bool decode_all(const std::string& dtype, const unsigned char* p, std::size_t n, double* out);

/// The index of the first of `n` elements of `dtype` at `p` that is NaN or
/// infinite, tested on the exponent bits without decoding; `n` if none
/// (integer dtypes: always `n`).
std::size_t first_nonfinite(const std::string& dtype, const unsigned char* p, std::size_t n);

}  // namespace sanpath::io

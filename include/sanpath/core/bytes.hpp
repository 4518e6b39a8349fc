#pragma once
/// \file bytes.hpp
/// Exact byte encodings of values, for results that travel between processes
/// (MPI ranks, distributed.hpp). Every value reads back bit for bit: integers
/// as 64-bit little-endian, doubles by their bits, BigReal as its precision
/// and its exact base-16 significand and exponent, strings by length. A
/// struct is encoded by a `fields(archive, object)` function, found by
/// argument-dependent lookup, that names its members once for both
/// directions:
///
/// \code
///   template <class A> void fields(A& a, Quantity& q) {
///     a(q.value, q.digits, q.below_resolution, q.bound, q.rounding, q.asked);  // every member
///   }
///   ByteWriter w;  w(q);            // w.bytes(): the encoding
///   ByteReader r(w.bytes());  Quantity back;  r(back);  r.finish();
/// \endcode
///
/// A type without public members to name (a class with an invariant) is
/// encoded through its accessors: `A::reading` tells the two directions
/// apart (`if constexpr (A::reading) { …read, then rebuild… } else { …write… }`).
///
/// MPFR values carry their precision; a fixed-precision tier (mpfr_real<D>)
/// reads back only into the same tier. A value whose exponent lies outside
/// the reading thread's MPFR exponent range (a centred pass's, made under
/// use_full_mpfr_exponent_range) widens that thread's range to the largest
/// MPFR allows, as forward_centred does, instead of overflowing.

#include "sanpath/core/scalar.hpp"

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace sanpath {

class ByteWriter {
 public:
  static constexpr bool reading = false;
  /// Appends every argument, in order.
  template <class... Ts> void operator()(const Ts&... xs) { (put(xs), ...); }
  const std::string& bytes() const { return out_; }

  void put(bool b) { put_u64(b ? 1 : 0); }
  void put(double x);
  void put(const std::string& s);
  void put(const BigReal& x) { put_mpfr(x.backend().data()); }
  template <unsigned D> void put(const mpfr_real<D>& x) { put_mpfr(x.backend().data()); }
  template <class T> void put(const T& x) {
    if constexpr (std::is_enum_v<T>) {
      put(static_cast<std::underlying_type_t<T>>(x));
    } else if constexpr (std::is_integral_v<T>) {
      put_u64(static_cast<std::uint64_t>(x));
    } else {
      fields(*this, const_cast<T&>(x));  // NOLINT: fields() only reads through a writer
    }
  }
  template <class T> void put(const std::optional<T>& x) {
    put(x.has_value());
    if (x) put(*x);
  }
  template <class T, class U> void put(const std::pair<T, U>& x) {
    put(x.first);
    put(x.second);
  }
  template <class T> void put(const std::vector<T>& xs) {
    put_u64(xs.size());
    for (const T& x : xs) put(x);
  }
  template <class K, class V> void put(const std::map<K, V>& xs) {
    put_u64(xs.size());
    for (const auto& [k, v] : xs) {
      put(k);
      put(v);
    }
  }

 private:
  void put_u64(std::uint64_t v);
  void put_mpfr(mpfr_srcptr v);
  std::string out_;
};

/// Reads what a ByteWriter wrote, in the same order. Throws
/// std::runtime_error when the bytes end early or hold an impossible value.
class ByteReader {
 public:
  static constexpr bool reading = true;
  explicit ByteReader(std::string_view bytes) : in_(bytes) {}
  template <class... Ts> void operator()(Ts&... xs) { (get(xs), ...); }
  /// Throws std::runtime_error unless every byte was read.
  void finish() const;

  void get(bool& b);
  void get(double& x);
  void get(std::string& s);
  void get(BigReal& x);
  /// Throws unless the value was written at this tier's precision.
  template <unsigned D> void get(mpfr_real<D>& x) {
    mpfr_real<D> v;
    get_mpfr(v.backend().data(), true);
    x = std::move(v);
  }
  template <class T> void get(T& x) {
    if constexpr (std::is_enum_v<T>) {
      std::underlying_type_t<T> u{};
      get(u);
      x = static_cast<T>(u);
    } else if constexpr (std::is_integral_v<T>) {
      const std::uint64_t v = get_u64();
      static_assert(sizeof(T) <= sizeof(std::uint64_t), "bytes: integers of at most 64 bits");
      if constexpr (std::is_signed_v<T>) {
        const auto s = static_cast<std::int64_t>(v);
        if constexpr (sizeof(T) < sizeof(std::int64_t))
          if (s < std::numeric_limits<T>::min() || s > std::numeric_limits<T>::max()) out_of_range(v);
        x = static_cast<T>(s);
      } else {
        if constexpr (sizeof(T) < sizeof(std::uint64_t))
          if (v > std::numeric_limits<T>::max()) out_of_range(v);
        x = static_cast<T>(v);
      }
    } else {
      fields(*this, x);
    }
  }
  template <class T> void get(std::optional<T>& x) {
    bool present = false;
    get(present);
    if (!present) {
      x.reset();
      return;
    }
    get(x.emplace());  // read in place (a moved temporary trips GCC 12's -Wmaybe-uninitialized)
  }
  template <class T, class U> void get(std::pair<T, U>& x) {
    get(x.first);
    get(x.second);
  }
  template <class T> void get(std::vector<T>& xs) {
    const std::uint64_t n = get_count(8);
    xs.clear();
    xs.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        bool b = false;
        get(b);
        xs.push_back(b);
      } else {
        get(xs.emplace_back());
      }
    }
  }
  template <class K, class V> void get(std::map<K, V>& xs) {
    const std::uint64_t n = get_count(16);
    xs.clear();
    for (std::uint64_t i = 0; i < n; ++i) {
      K k{};
      V v{};
      get(k);
      get(v);
      if (!xs.emplace(std::move(k), std::move(v)).second) throw std::runtime_error("bytes: a key twice in a map");
    }
  }

 private:
  std::uint64_t get_u64();
  /// A length of items of at least `each` bytes (every encoding takes 8 or
  /// more): at most what the bytes left can hold, so that no corrupt length
  /// makes a large allocation.
  std::uint64_t get_count(std::size_t each = 1);
  /// Reads an MPFR value into p (its precision set from the bytes; with
  /// `fixed`, the bytes must hold p's own precision).
  void get_mpfr(mpfr_ptr p, bool fixed);
  [[noreturn]] static void out_of_range(std::uint64_t v);
  std::string_view take(std::size_t n);
  std::string_view in_;
  std::size_t at_ = 0;
};

}  // namespace sanpath

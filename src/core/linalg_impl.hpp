#pragma once
// The products of core/linalg.hpp. One piece (over 600 lines) on purpose:
// the fixed-point conversion, the GMP and AVX-512 IFMA kernels and the mpfr_fma
// fallback share one data layout (FixedVectors) and one error analysis (the
// guard W − p ≥ 48 and the crossing-magnitude test); apart they would hide it.
#include "sanpath/core/linalg.hpp"

#include "core/dgemm.hpp"

// The AVX-512 IFMA kernel is compiled on x86-64 with GCC or Clang (and used
// only when the CPU has the instructions, see ifma_products_active()).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SANPATH_IFMA_KERNEL 1
#else
#define SANPATH_IFMA_KERNEL 0
#endif

#include <gmp.h>
#include <mpfr.h>

#if SANPATH_IFMA_KERNEL
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <climits>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace sanpath {
namespace detail {

inline void check_inner(Eigen::Index a, Eigen::Index b, const char* what) {
  if (a != b)
    throw std::invalid_argument(std::string(what) + ": inner dimensions " + std::to_string(a) + " and " +
                                std::to_string(b) + " differ");
}

/// Runs work(b) for b = 0..blocks-1, on up to `threads` threads (the calling
/// thread is one of them). Workers hold a SerialProductsScope, round as the
/// calling thread does (fegetround: the rounding check's directed passes)
/// and take its MPFR exponent range (thread-local in MPFR).
/// The first exception thrown by a block is rethrown after every thread has joined.
template <class F> void run_blocks(std::size_t blocks, int threads, F&& work) {
  const std::size_t t = std::min<std::size_t>(blocks, static_cast<std::size_t>(std::max(threads, 1)));
  if (t <= 1) {
    for (std::size_t b = 0; b < blocks; ++b) work(b);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex mu;
  const int rounding = std::fegetround();
  const mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  auto body = [&] {
    SerialProductsScope serial;
    std::fesetround(rounding);  // per thread; the pool's threads end with the call
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    for (;;) {
      const std::size_t b = next.fetch_add(1);
      if (b >= blocks || failed.load()) return;
      try {
        work(b);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  try {
    for (std::size_t i = 1; i < t; ++i)
      pool.emplace_back([&body] {
        MpfrThreadCaches caches;  // the pool's threads end with the call
        body();
      });
  } catch (...) {
    // Could not start a thread: the threads already running and this one finish the work.
  }
  body();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

/// How a product is cut for threads: blocks of `width` columns of C (or
/// rows when C has too few columns). Depends on the shapes only.
struct ProductSplit {
  bool by_columns = true;
  Eigen::Index width = 0, count = 1;
};

inline ProductSplit split_product(Eigen::Index m, Eigen::Index n, Eigen::Index width) {
  ProductSplit s;
  s.width = width;
  if (n >= 2 * width) {
    s.by_columns = true;
    s.count = (n + width - 1) / width;
  } else if (m >= 2 * width) {
    s.by_columns = false;
    s.count = (m + width - 1) / width;
  } else {
    s.by_columns = true;
    s.width = std::max<Eigen::Index>(n, 1);
    s.count = 1;
  }
  return s;
}

// ---- double ---------------------------------------------------------------------

/// The blocks of an m×n double product with inner size k, as every double
/// product splits them: block(row0, rows, col0, cols) for blocks of 128
/// columns (or rows) of C on product_threads() threads when the product is
/// large (≥ 2^21 multiply-adds), else once for the whole of C. Each entry is
/// one chain of FMAs over p whatever its block (core/dgemm.hpp), so the
/// split changes no bit.
template <class Block> void split_double_product(Eigen::Index m, Eigen::Index n, Eigen::Index k, const Block& block) {
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int threads = work >= double(1 << 21) ? product_threads() : 1;
  const ProductSplit s = split_product(m, n, 128);
  if (threads <= 1 || s.count <= 1) {
    block(0, m, 0, n);
    return;
  }
  run_blocks(static_cast<std::size_t>(s.count), threads, [&](std::size_t b) {
    const Eigen::Index lo = static_cast<Eigen::Index>(b) * s.width;
    if (s.by_columns) block(0, m, lo, std::min(s.width, n - lo));
    else block(lo, std::min(s.width, m - lo), 0, n);
  });
}

/// C = A·op(B) by sanpath's double kernel (core/dgemm.hpp: every entry one
/// chain of FMAs over p, the same bits on every instruction-set level).
template <bool Trans> void double_gemm(const Matrix<double>& A, const Matrix<double>& B, Matrix<double>& C) {
  const Eigen::Index m = A.rows(), k = A.cols(), n = Trans ? B.rows() : B.cols();
  const DoubleIsa isa = double_isa();
  C.resize(m, n);
  const Eigen::Index lda = std::max<Eigen::Index>(m, 1), ldb = std::max<Eigen::Index>(B.rows(), 1),
                     ldc = std::max<Eigen::Index>(m, 1);
  split_double_product(m, n, k, [&](Eigen::Index i0, Eigen::Index rows, Eigen::Index j0, Eigen::Index cols) {
    const double* Bj = Trans ? B.data() + j0 : B.data() + j0 * ldb;
    dgemm(isa, rows, cols, k, A.data() + i0, lda, Bj, ldb, Trans, C.data() + i0 + j0 * ldc, ldc);
  });
}

/// C = A·W, W a view of stored floats (core/weight_view.hpp), split as
/// double_gemm: the same bits as double_gemm on W.decode().
inline void double_gemm_view(const Matrix<double>& A, const WeightView& W, Matrix<double>& C) {
  const Eigen::Index m = A.rows(), k = A.cols(), n = W.cols;
  const DoubleIsa isa = double_isa();
  C.resize(m, n);
  const Eigen::Index lda = std::max<Eigen::Index>(m, 1), ldc = std::max<Eigen::Index>(m, 1);
  split_double_product(m, n, k, [&](Eigen::Index i0, Eigen::Index rows, Eigen::Index j0, Eigen::Index cols) {
    dgemm_view(isa, rows, k, A.data() + i0, lda, W.middle_cols(j0, cols), C.data() + i0 + j0 * ldc, ldc);
  });
}

// ---- MPFR -----------------------------------------------------------------------

/// The reference kernel: C(i,j) = Σ_p A(i,p)·op(B)(p,j) by mpfr_fma into the
/// preallocated entry, p ascending. Used for products with NaN or infinite
/// entries and for the rare entries the fixed-point kernel cannot guarantee.
template <class S, class GetA, class GetB>
void fma_entry(mpfr_ptr c, Eigen::Index k, const GetA& a, const GetB& b) {
  mpfr_set_zero(c, 1);
  for (Eigen::Index p = 0; p < k; ++p) {
    mpfr_srcptr bp = b(p);
    if (mpfr_zero_p(bp)) continue;
    mpfr_fma(c, a(p), bp, c, MPFR_RNDN);
  }
}

constexpr long fixed_limb_bits = GMP_NUMB_BITS;
/// Guard bits of the fixed-point kernel beyond the tier's precision (at least).
constexpr long fixed_min_guard = 56;
/// Exponent of an exact zero in the fixed-point operands.
constexpr long fixed_zero_exp = LONG_MIN / 4;
/// Exponents beyond this (in magnitude) send a product to the reference kernel.
constexpr long fixed_max_exp = 1L << 60;
/// What an entry's exponent reads as when the vector cannot be in fixed point
/// (NaN, infinite, or beyond fixed_max_exp).
constexpr long fixed_bad_exp = LONG_MIN / 2;

/// Limbs per fixed-point integer for precision p.
constexpr long fixed_limbs(long prec) { return (prec + fixed_min_guard + fixed_limb_bits - 1) / fixed_limb_bits; }

/// `count` vectors of length k (rows of A, or columns of op(B)) in fixed
/// point of width W bits: entry (r, p) is ±mag·2^(top[r] - W), mag < 2^W in
/// nl = ⌈W/64⌉ limbs, mag = ⌊|x|·2^(W - top[r])⌋ (exact unless x is more than
/// W - p binades below the vector's largest entry).
struct FixedVectors {
  Eigen::Index count = 0, k = 0;
  long W = 0, nl = 0;
  std::vector<mp_limb_t> mag;           ///< (r·k + p)·nl
  std::vector<unsigned char> neg;       ///< r·k + p
  std::vector<long> exps;               ///< r·k + p; fixed_zero_exp for 0
  std::vector<long> top, spread;        ///< per vector: largest exponent, largest − smallest (nonzero)
  std::vector<unsigned char> all_zero;  ///< per vector

  void resize(Eigen::Index c, Eigen::Index kk, long width) {
    count = c;
    k = kk;
    W = width;
    nl = (width + fixed_limb_bits - 1) / fixed_limb_bits;
    const auto ck = static_cast<std::size_t>(c) * static_cast<std::size_t>(kk);
    mag.assign(ck * static_cast<std::size_t>(nl), 0);
    neg.assign(ck, 0);
    exps.assign(ck, fixed_zero_exp);
    top.assign(static_cast<std::size_t>(c), fixed_zero_exp);
    spread.assign(static_cast<std::size_t>(c), 0);
    all_zero.assign(static_cast<std::size_t>(c), 1);
  }

  /// Fills vector r from get(p) (p = 0..k-1), MPFR entries. Returns false if
  /// an entry is NaN or infinite, or an exponent is out of the kernel's range.
  template <class Get> bool fill(Eigen::Index r, const Get& get) {
    return fill_with(
        r,
        [&](Eigen::Index p) -> long {
          mpfr_srcptr x = get(p);
          if (mpfr_zero_p(x)) return fixed_zero_exp;
          if (!mpfr_regular_p(x)) return fixed_bad_exp;
          const long e = static_cast<long>(mpfr_get_exp(x));
          return e > fixed_max_exp || e < -fixed_max_exp ? fixed_bad_exp : e;
        },
        [&](Eigen::Index p, long e_top, mp_limb_t* dst) {
          mpfr_srcptr x = get(p);
          const auto* M = static_cast<const mp_limb_t*>(mpfr_custom_get_significand(x));
          const long nlp = (static_cast<long>(mpfr_get_prec(x)) + fixed_limb_bits - 1) / fixed_limb_bits;
          // |x| = M·2^(e - 64·nlp); mag = ⌊|x|·2^(W - top)⌋ = M shifted by s bits.
          const long s = W - fixed_limb_bits * nlp - e_top;
          if (s >= 0) {
            const long q = s / fixed_limb_bits, b = s % fixed_limb_bits;
            if (b != 0) {
              const mp_limb_t out = mpn_lshift(dst + q, M, nlp, static_cast<unsigned>(b));
              if (q + nlp < nl) dst[q + nlp] = out;  // otherwise out == 0: M·2^s < 2^W
            } else {
              std::copy(M, M + nlp, dst + q);
            }
          } else {
            const long t = -s, q = t / fixed_limb_bits, b = t % fixed_limb_bits;
            if (q >= nlp) return mpfr_signbit(x) != 0;  // below the window: truncated to 0
            if (b != 0)
              mpn_rshift(dst, M + q, nlp - q, static_cast<unsigned>(b));
            else
              std::copy(M + q, M + nlp, dst);
          }
          return mpfr_signbit(x) != 0;
        });
  }

  /// fill() from doubles: x = M·2^(e−53) with M < 2^53 an integer and e the
  /// exponent MPFR gives x, so the vector is the one fill() makes from the
  /// same values held in MPFR, bit for bit.
  template <class Get> bool fill_double(Eigen::Index r, const Get& get) {
    return fill_with(
        r,
        [&](Eigen::Index p) -> long {
          const double x = get(p);
          if (x == 0.0) return fixed_zero_exp;
          if (!std::isfinite(x)) return fixed_bad_exp;
          return double_parts(x).exp;
        },
        [&](Eigen::Index p, long e_top, mp_limb_t* dst) {
          const double x = get(p);
          const std::uint64_t M = double_parts(x).significand;
          // mag = ⌊M·2^(e−53)·2^(W−top)⌋ < 2^W, e − top = −e_top.
          const long s = W - e_top - 53;
          if (s >= 0) {
            const long q = s / fixed_limb_bits, b = s % fixed_limb_bits;
            dst[q] = static_cast<mp_limb_t>(M << b);
            if (b != 0 && q + 1 < nl) dst[q + 1] = static_cast<mp_limb_t>(M >> (fixed_limb_bits - b));
          } else if (-s < fixed_limb_bits) {
            dst[0] = static_cast<mp_limb_t>(M >> -s);
          }
          return std::signbit(x);
        });
  }

 private:
  /// |x| = significand·2^(exp − 53), significand < 2^53 (2^52 ≤ it for
  /// normal x): frexp's exponent and its fraction scaled to an integer, read
  /// from the bits (subnormals through frexp). x finite and nonzero.
  struct DoubleParts {
    long exp;
    std::uint64_t significand;
  };
  static DoubleParts double_parts(double x) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    const auto biased = static_cast<long>((bits >> 52) & 0x7ff);
    constexpr std::uint64_t fraction = (std::uint64_t(1) << 52) - 1;
    if (biased != 0) return {biased - 1022, (bits & fraction) | (std::uint64_t(1) << 52)};
    int e = 0;
    const double f = std::frexp(std::fabs(x), &e);
    return {e, static_cast<std::uint64_t>(std::ldexp(f, 53))};
  }

  /// The shared walk: exponent(p) gives an entry's exponent (fixed_zero_exp
  /// for 0, fixed_bad_exp to refuse); put(p, top − e, dst) writes its
  /// magnitude into the zeroed limbs dst and returns its sign.
  template <class Exponent, class Put> bool fill_with(Eigen::Index r, const Exponent& exponent, const Put& put) {
    const auto base = static_cast<std::size_t>(r) * static_cast<std::size_t>(k);
    long hi = fixed_zero_exp, lo = LONG_MAX;
    for (Eigen::Index p = 0; p < k; ++p) {
      const long e = exponent(p);
      if (e == fixed_zero_exp) continue;
      if (e == fixed_bad_exp) return false;
      exps[base + static_cast<std::size_t>(p)] = e;
      hi = std::max(hi, e);
      lo = std::min(lo, e);
    }
    const auto ri = static_cast<std::size_t>(r);
    if (hi == fixed_zero_exp) return true;  // all zero: mags stay 0
    top[ri] = hi;
    spread[ri] = hi - lo;
    all_zero[ri] = 0;
    for (Eigen::Index p = 0; p < k; ++p) {
      const std::size_t idx = base + static_cast<std::size_t>(p);
      if (exps[idx] == fixed_zero_exp) continue;
      neg[idx] = put(p, hi - exps[idx], &mag[idx * static_cast<std::size_t>(nl)]) ? 1 : 0;
    }
    return true;
  }
};

/// What the fixed-point kernel may do for one entry.
enum class FixedCheck { zero, compute, reference };

/// Entry (ra of A, rb of B): an exact zero (a vector is zero, or no product
/// is nonzero), computable within the guarantee, or for the reference
/// kernel (the magnitudes of the two vectors cross by more than guard-4
/// binades, so the truncated small entries could matter). `width`: the
/// tier's fixed-point width (guard = width − prec), whatever width a narrow
/// operand is held at.
inline FixedCheck fixed_check(const FixedVectors& A, Eigen::Index ra, const FixedVectors& B, Eigen::Index rb,
                              long prec, long width) {
  const auto ia = static_cast<std::size_t>(ra), ib = static_cast<std::size_t>(rb);
  if (A.all_zero[ia] || B.all_zero[ib]) return FixedCheck::zero;
  const long guard = width - prec;
  if (A.spread[ia] + B.spread[ib] <= guard - 4) return FixedCheck::compute;
  const Eigen::Index k = A.k;
  const long* ea = &A.exps[ia * static_cast<std::size_t>(k)];
  const long* eb = &B.exps[ib * static_cast<std::size_t>(k)];
  long emax = fixed_zero_exp;
  for (Eigen::Index p = 0; p < k; ++p)
    if (ea[p] != fixed_zero_exp && eb[p] != fixed_zero_exp) emax = std::max(emax, ea[p] + eb[p]);
  if (emax == fixed_zero_exp) return FixedCheck::zero;
  return emax < A.top[ia] + B.top[ib] - guard + 4 ? FixedCheck::reference : FixedCheck::compute;
}

/// Scratch of one thread: the two accumulators (positive and negative
/// products, 2·nl+1 limbs each), one product and the difference.
struct FixedScratch {
  std::vector<mp_limb_t> acc, prod, diff;
  explicit FixedScratch(long nl)
      : acc(2 * static_cast<std::size_t>(2 * nl + 1)), prod(2 * static_cast<std::size_t>(nl)),
        diff(static_cast<std::size_t>(2 * nl + 1)) {}
};

/// c = Σ_p a_p b_p for fixed-point vectors ra of A and rb of op(B) with GMP:
/// exact integer accumulation (mpn_mul_n, mpn_add_n), one rounding. The
/// caller has checked the entry (fixed_check == compute).
inline void fixed_entry_mpn(mpfr_ptr c, const FixedVectors& A, Eigen::Index ra, const FixedVectors& B,
                            Eigen::Index rb, FixedScratch& w) {
  const auto ia = static_cast<std::size_t>(ra), ib = static_cast<std::size_t>(rb);
  const Eigen::Index k = A.k;
  const long nl = A.nl;
  const std::size_t base_a = ia * static_cast<std::size_t>(k), base_b = ib * static_cast<std::size_t>(k);
  const long* ea = &A.exps[base_a];
  const long* eb = &B.exps[base_b];
  const std::size_t len = static_cast<std::size_t>(2 * nl + 1);
  mp_limb_t* acc = w.acc.data();
  std::fill(acc, acc + 2 * len, mp_limb_t(0));
  const mp_limb_t* ma = &A.mag[base_a * static_cast<std::size_t>(nl)];
  const mp_limb_t* mb = &B.mag[base_b * static_cast<std::size_t>(nl)];
  const unsigned char* sa = &A.neg[base_a];
  const unsigned char* sb = &B.neg[base_b];
  mp_limb_t* prod = w.prod.data();
  for (Eigen::Index p = 0; p < k; ++p) {
    if (ea[p] == fixed_zero_exp || eb[p] == fixed_zero_exp) continue;
    mpn_mul_n(prod, ma + p * nl, mb + p * nl, nl);
    mp_limb_t* dst = acc + (sa[p] ^ sb[p]) * len;
    dst[2 * nl] += mpn_add_n(dst, dst, prod, 2 * nl);
  }
  const mp_limb_t* pos = acc;
  const mp_limb_t* negv = acc + len;
  const int cmp = mpn_cmp(pos, negv, static_cast<mp_size_t>(len));
  if (cmp == 0) {
    mpfr_set_zero(c, 1);
    return;
  }
  mp_limb_t* d = w.diff.data();
  if (cmp > 0)
    mpn_sub_n(d, pos, negv, static_cast<mp_size_t>(len));
  else
    mpn_sub_n(d, negv, pos, static_cast<mp_size_t>(len));
  mpz_t z;
  mpz_roinit_n(z, d, cmp > 0 ? static_cast<mp_size_t>(len) : -static_cast<mp_size_t>(len));
  mpfr_set_z_2exp(c, z, static_cast<mpfr_exp_t>(A.top[ia] + B.top[ib] - 2 * A.W), MPFR_RNDN);
}

// ---- AVX-512 IFMA kernel --------------------------------------------------------
//
// The same exact integers Σ_p a'_p b'_p, eight dot products at once: the
// values are offset to a'' = a' + 2^W ∈ (0, 2^(W+1)) and cut into L limbs of
// 52 bits (W = 52L - 1); vpmadd52lo/hi accumulate the 52-bit halves of every
// limb product in 64-bit lanes, flushed into multi-limb sums before they can
// overflow; Σ a'b' = Σ a''b'' - 2^W(Σa' + Σb') - k·2^(2W). Selected at run
// time (cpu_has_ifma); every tier uses width W = 52L-1 up to 1025 bits so
// that both kernels compute the same integers and give identical results.

/// 52-bit limbs of the IFMA kernel for precision p (guard W - p ≥ 48).
constexpr int ifma_limbs(long prec) { return static_cast<int>((prec + 49 + 51) / 52); }
constexpr int ifma_max_limbs = 21;  // 1025 bits (the accumulators must fit in registers)

/// Fixed-point width of a tier: 52L - 1 where the IFMA kernel applies, else 64·⌈(p+56)/64⌉.
constexpr long fixed_width(long prec) {
  return ifma_limbs(prec) <= ifma_max_limbs ? 52L * ifma_limbs(prec) - 1 : fixed_limbs(prec) * fixed_limb_bits;
}

#if SANPATH_IFMA_KERNEL
/// acc[t - T0][lane] += the 52-bit halves of a_u·b_v[lane] landing at limb t
/// (lo at u+v, hi at u+v+1), for t in [T0, T0+T), over `terms` terms.
/// a: terms × LA limbs; b: terms × LB limbs × 8 lanes; acc: T × 8.
template <int LA, int LB, int T0, int T>
__attribute__((target("avx512f,avx512ifma"))) void ifma_accumulate(const std::uint64_t* a, const std::uint64_t* b,
                                                                   long terms, std::uint64_t* acc) {
  __m512i r[T];
#pragma GCC unroll 64
  for (int t = 0; t < T; ++t) r[t] = _mm512_loadu_si512(acc + 8 * t);
  for (long p = 0; p < terms; ++p) {
    const std::uint64_t* ap = a + p * LA;
    const std::uint64_t* bp = b + p * LB * 8;
#pragma GCC unroll 64
    for (int u = 0; u < LA; ++u) {
      const __m512i au = _mm512_set1_epi64(static_cast<long long>(ap[u]));
#pragma GCC unroll 64
      for (int v = 0; v < LB; ++v) {
        const int tl = u + v - T0, th = u + v + 1 - T0;
        if (tl >= 0 && tl < T) r[tl] = _mm512_madd52lo_epu64(r[tl], au, _mm512_loadu_si512(bp + 8 * v));
        if (th >= 0 && th < T) r[th] = _mm512_madd52hi_epu64(r[th], au, _mm512_loadu_si512(bp + 8 * v));
      }
    }
  }
#pragma GCC unroll 64
  for (int t = 0; t < T; ++t) _mm512_storeu_si512(acc + 8 * t, r[t]);
}

/// The LA + LB limb sums of a chunk: one pass, or two where the
/// accumulators would not fit in the registers.
template <int LA, int LB>
void ifma_chunk(const std::uint64_t* a, const std::uint64_t* b, long terms, std::uint64_t* acc) {
  constexpr int T = LA + LB;
  if constexpr (T <= 24) {
    ifma_accumulate<LA, LB, 0, T>(a, b, terms, acc);
  } else {
    ifma_accumulate<LA, LB, 0, T / 2>(a, b, terms, acc);
    ifma_accumulate<LA, LB, T / 2, T - T / 2>(a, b, terms, acc + 8 * (T / 2));
  }
}
#endif

/// An array of GMP integers (initialised, cleared on destruction).
class MpzArray {
 public:
  explicit MpzArray(std::size_t n) : v_(n) {
    for (auto& z : v_) mpz_init(&z);
  }
  ~MpzArray() {
    for (auto& z : v_) mpz_clear(&z);
  }
  MpzArray(const MpzArray&) = delete;
  MpzArray& operator=(const MpzArray&) = delete;
  mpz_ptr operator[](std::size_t i) { return &v_[i]; }
  mpz_srcptr operator[](std::size_t i) const { return &v_[i]; }

 private:
  std::vector<__mpz_struct> v_;
};

constexpr std::uint64_t limb52_mask = (std::uint64_t(1) << 52) - 1;
/// Exact sums of 52-bit limbs over up to 2^64 terms.
__extension__ typedef unsigned __int128 limb52_sum;

/// Writes the L 52-bit limbs of 2^W ± mag (W = 52L - 1, mag < 2^W in nl
/// limbs, nl = ⌈W/64⌉) to out[0], out[stride], ...: the limbs of mag, negated modulo
/// 2^(52L) when neg (2^(52L) − mag), plus 2^W in the top limb.
template <int L> void offset_limbs52(const mp_limb_t* mag, bool neg, std::uint64_t* out, std::size_t stride) {
  constexpr long nl = (52L * L - 1 + fixed_limb_bits - 1) / fixed_limb_bits;
  std::uint64_t borrow = 0;
#pragma GCC unroll 32
  for (int u = 0; u < L; ++u) {
    const long pos = 52L * u, li = pos / 64, sh = pos % 64;
    std::uint64_t x = li < nl ? mag[li] >> sh : 0;
    if (sh > 12 && li + 1 < nl) x |= mag[li + 1] << (64 - sh);
    x &= limb52_mask;
    if (neg) {
      const std::uint64_t t = x + borrow;  // ≤ 2^52
      x = (std::uint64_t(0) - t) & limb52_mask;
      borrow = t != 0 ? 1 : 0;
    }
    if (u == L - 1) x = (x + (std::uint64_t(1) << 51)) & limb52_mask;  // < 2^52: 2^W ± mag ∈ (0, 2^(W+1))
    out[static_cast<std::size_t>(u) * stride] = x;
  }
}

/// out[0, n64) = Σ_u s[u]·2^(52u) (u < nd), the s[u] < 2^120; n64 64-bit
/// limbs must hold the value.
inline void limb52_sums_to_limbs(const limb52_sum* s, std::size_t s_stride, int nd, mp_limb_t* out, std::size_t n64) {
  std::fill(out, out + n64, mp_limb_t(0));
  limb52_sum carry = 0;
  for (long u = 0; u < nd || carry != 0; ++u) {
    if (u < nd) carry += s[static_cast<std::size_t>(u) * s_stride];
    const auto d = static_cast<std::uint64_t>(carry) & limb52_mask;
    carry >>= 52;
    const long pos = 52L * u;
    const auto li = static_cast<std::size_t>(pos / 64);
    const auto sh = static_cast<unsigned>(pos % 64);
    out[li] |= static_cast<mp_limb_t>(d << sh);
    if (sh > 12) out[li + 1] |= static_cast<mp_limb_t>(d >> (64 - sh));
  }
}

/// R = −2^W·Σ_p x''_p + extra, for the L limbs of the offset entries x''
/// (their column sums S[u] = Σ_p limb u of x''_p); tmp: scratch limbs.
inline void offset_correction(const limb52_sum* S, std::size_t s_stride, int L, long W, mpz_srcptr extra, mpz_ptr R,
                              std::vector<mp_limb_t>& tmp) {
  limb52_sums_to_limbs(S, s_stride, L, tmp.data(), tmp.size());
  mpz_t sum;
  mpz_roinit_n(sum, tmp.data(), static_cast<mp_size_t>(tmp.size()));
  mpz_mul_2exp(R, sum, static_cast<mp_bitcnt_t>(W));
  mpz_sub(R, extra, R);
}

/// 64-bit limbs that hold Σ_u s[u]·2^(52u) for nd sums s[u] < 2^120.
constexpr std::size_t limb52_sums_limbs(int nd) { return static_cast<std::size_t>((52L * (nd + 1)) / 64 + 2); }

#if SANPATH_IFMA_KERNEL
/// Every entry of C = A·op(B) through the IFMA kernel: lanes run over the
/// vectors of `Lv` (blocks of 8), the broadcast operand over those of `Bv`;
/// entry(b, l) gives the MPFR destination of broadcast vector b, lane vector
/// l, and fallback(b, l, c) computes an entry with the reference kernel.
/// LB and LL: the 52-bit limbs of the broadcast and the lane vectors (their
/// widths 52·LB − 1 and 52·LL − 1; a narrow operand holds the same values
/// exactly, see mpfr_gemm); `guard_width`: the tier's width, which
/// fixed_check's guarantee is stated in.
template <int LB, int LL, class Entry, class Fallback>
void ifma_gemm(const FixedVectors& Bv, const FixedVectors& Lv, long prec, long guard_width, int threads,
               const Entry& entry, const Fallback& fallback) {
  const Eigen::Index k = Bv.k, nb = Bv.count, nlanes = Lv.count;
  const long Wb = Bv.W, Wl = Lv.W, nlb = Bv.nl, nll = Lv.nl;
  const auto ku = static_cast<std::size_t>(k), LBu = static_cast<std::size_t>(LB), LLu = static_cast<std::size_t>(LL);
  constexpr int T = LB + LL;
  constexpr auto Tu = static_cast<std::size_t>(T);
  // Each accumulator takes at most 2·min(LB, LL) halves a term: lanes < 2^64 while terms·2·max·2^52 < 2^64.
  constexpr long flush_terms = 4096 / (2 * std::max(LB, LL)) - 1;
  constexpr std::size_t n64_offsets = limb52_sums_limbs(std::max(LB, LL)), n64_products = limb52_sums_limbs(T);
  // Broadcast operand: count × k × LB limbs, and its corrections
  // Rb = −2^Wl·Σ_p b''_p + k·2^(Wb+Wl) (see below).
  std::vector<std::uint64_t> bl(static_cast<std::size_t>(nb) * ku * LBu);
  MpzArray Rb(static_cast<std::size_t>(nb)), K(1);
  mpz_set_ui(K[0], static_cast<unsigned long>(k));
  mpz_mul_2exp(K[0], K[0], static_cast<mp_bitcnt_t>(Wb + Wl));
  run_blocks(static_cast<std::size_t>(nb), threads, [&](std::size_t v) {
    std::vector<limb52_sum> S(LBu, 0);
    std::vector<mp_limb_t> tmp(n64_offsets);
    for (Eigen::Index p = 0; p < k; ++p) {
      const std::size_t idx = v * ku + static_cast<std::size_t>(p);
      std::uint64_t* limbs = &bl[idx * LBu];
      offset_limbs52<LB>(&Bv.mag[idx * static_cast<std::size_t>(nlb)], Bv.neg[idx] != 0, limbs, 1);
      for (std::size_t u = 0; u < LBu; ++u) S[u] += limbs[u];
    }
    offset_correction(S.data(), 1, LB, Wl, K[0], Rb[v], tmp);
  });
  // Σ b'l' = Σ b''l'' − 2^Wl·Σb' − 2^Wb·Σl' − k·2^(Wb+Wl) with b'' = b' + 2^Wb, l'' = l' + 2^Wl:
  // = D − 2^Wl·Σb'' − 2^Wb·Σl'' + k·2^(Wb+Wl) = D + Rb + Rl.
  const std::size_t lane_blocks = static_cast<std::size_t>((nlanes + 7) / 8);
  run_blocks(lane_blocks, threads, [&](std::size_t blk) {
    const Eigen::Index l0 = static_cast<Eigen::Index>(blk) * 8;
    const int lanes = static_cast<int>(std::min<Eigen::Index>(8, nlanes - l0));
    // Lane operand of this block: k × LL × 8 (missing lanes are zero and
    // ignored), and its corrections Rl = −2^Wb·Σ_p l''_p.
    std::vector<std::uint64_t> ll(ku * LLu * 8, 0);
    std::vector<limb52_sum> S(LLu * 8, 0);
    for (int q = 0; q < lanes; ++q)
      for (Eigen::Index p = 0; p < k; ++p) {
        const std::size_t idx = static_cast<std::size_t>(l0 + q) * ku + static_cast<std::size_t>(p);
        std::uint64_t* limbs = &ll[static_cast<std::size_t>(p) * LLu * 8 + static_cast<std::size_t>(q)];
        offset_limbs52<LL>(&Lv.mag[idx * static_cast<std::size_t>(nll)], Lv.neg[idx] != 0, limbs, 8);
        for (std::size_t u = 0; u < LLu; ++u) S[u * 8 + static_cast<std::size_t>(q)] += limbs[u * 8];
      }
    MpzArray Rl(8), Z(1), zero(1);
    std::vector<mp_limb_t> tmp(std::max(n64_offsets, n64_products));
    for (int q = 0; q < lanes; ++q)
      offset_correction(&S[static_cast<std::size_t>(q)], 8, LL, Wb, zero[0], Rl[static_cast<std::size_t>(q)], tmp);
    std::vector<std::uint64_t> acc(Tu * 8);
    std::vector<limb52_sum> D(Tu * 8);  // D[t·8 + q]: limb t of lane q's Σ b''l'', summed over the flushes
    for (Eigen::Index b = 0; b < nb; ++b) {
      std::fill(D.begin(), D.end(), limb52_sum(0));
      for (Eigen::Index p0 = 0; p0 < k; p0 += flush_terms) {
        const long terms = static_cast<long>(std::min<Eigen::Index>(flush_terms, k - p0));
        std::fill(acc.begin(), acc.end(), std::uint64_t(0));
        ifma_chunk<LB, LL>(&bl[(static_cast<std::size_t>(b) * ku + static_cast<std::size_t>(p0)) * LBu],
                           &ll[static_cast<std::size_t>(p0) * LLu * 8], terms, acc.data());
        for (std::size_t t = 0; t < Tu * 8; ++t) D[t] += acc[t];
      }
      for (int q = 0; q < lanes; ++q) {
        const Eigen::Index l = l0 + q;
        mpfr_ptr c = entry(b, l);
        const FixedCheck st = fixed_check(Bv, b, Lv, l, prec, guard_width);
        if (st == FixedCheck::zero) {
          mpfr_set_zero(c, 1);
          continue;
        }
        if (st == FixedCheck::reference) {
          fallback(b, l, c);
          continue;
        }
        limb52_sums_to_limbs(&D[static_cast<std::size_t>(q)], 8, T, tmp.data(), n64_products);
        mpz_t d;
        mpz_roinit_n(d, tmp.data(), static_cast<mp_size_t>(n64_products));
        mpz_add(Z[0], d, Rb[static_cast<std::size_t>(b)]);
        mpz_add(Z[0], Z[0], Rl[static_cast<std::size_t>(q)]);
        mpfr_set_z_2exp(c, Z[0], static_cast<mpfr_exp_t>(Bv.top[static_cast<std::size_t>(b)] +
                                                        Lv.top[static_cast<std::size_t>(l)] - Wb - Wl),
                        MPFR_RNDN);
      }
    }
  });
}
#endif

/// C = A·op(B) in an MPFR tier (see linalg.hpp for the arithmetic). B holds
/// S, or doubles (the model's weights): those are read into fixed point
/// directly, and converted to S only if the reference kernel needs them.
template <class S, bool Trans, class BScalar>
void mpfr_gemm(const Matrix<S>& A, const Matrix<BScalar>& B, Matrix<S>& C) {
  constexpr bool b_double = std::is_same_v<BScalar, double>;
  const Eigen::Index m = A.rows(), k = A.cols(), n = Trans ? B.rows() : B.cols();
  auto a_at = [&](Eigen::Index i, Eigen::Index p) -> mpfr_srcptr { return A(i, p).backend().data(); };
  Matrix<S> B_converted;  // doubles as S, made once if the reference kernel runs
  std::once_flag converted;
  auto b_at = [&](Eigen::Index p, Eigen::Index j) -> mpfr_srcptr {
    if constexpr (b_double) {
      std::call_once(converted, [&] { B_converted = convert<S>(B); });
      return Trans ? B_converted(j, p).backend().data() : B_converted(p, j).backend().data();
    } else {
      return Trans ? B(j, p).backend().data() : B(p, j).backend().data();
    }
  };
  if (C.rows() != m || C.cols() != n) C.resize(m, n);
  if (m == 0 || n == 0) return;
  constexpr long prec = precision_bits_v<S>;
  constexpr long W = fixed_width(prec);
  const long nl = (W + fixed_limb_bits - 1) / fixed_limb_bits;
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                      static_cast<double>(nl) * static_cast<double>(nl);
  const int threads = work >= double(1 << 20) ? product_threads() : 1;
  auto reference = [&](Eigen::Index i, Eigen::Index j, mpfr_ptr c) {
    fma_entry<S>(
        c, k, [&](Eigen::Index p) { return a_at(i, p); }, [&](Eigen::Index p) { return b_at(p, j); });
  };

  // Operands in fixed point: rows of A, columns of op(B). Doubles B for the
  // IFMA kernel are tried narrow first (two limbs: width narrow_width):
  // where every column's exponents span at most narrow_width − 53 binades,
  // each entry is exact there, and its integer is the full-width one divided
  // by 2^(W − narrow_width) (exact too), so the sums, hence C, are the same
  // bit for bit at a third of the limb products (257 bits) or less.
  constexpr int narrow_limbs = 2;
  constexpr long narrow_width = 52L * narrow_limbs - 1;
#if SANPATH_IFMA_KERNEL
  constexpr bool narrow_possible = b_double && ifma_limbs(prec) <= ifma_max_limbs && ifma_limbs(prec) > narrow_limbs;
  bool narrow = narrow_possible && ifma_products_active();
#else
  bool narrow = false;
#endif
  FixedVectors FA, FB;
  FA.resize(m, k, W);
  FB.resize(n, k, narrow ? narrow_width : W);
  std::atomic<bool> finite{true};
  const Eigen::Index cb = 32;  // vectors per conversion block
  const std::size_t blocks_a = static_cast<std::size_t>((m + cb - 1) / cb);
  const std::size_t blocks_b = static_cast<std::size_t>((n + cb - 1) / cb);
  run_blocks(blocks_a + blocks_b, threads, [&](std::size_t blk) {
    const bool is_a = blk < blocks_a;
    const Eigen::Index lo = static_cast<Eigen::Index>(is_a ? blk : blk - blocks_a) * cb;
    const Eigen::Index hi = std::min(lo + cb, is_a ? m : n);
    for (Eigen::Index r = lo; r < hi && finite.load(std::memory_order_relaxed); ++r) {
      bool ok = true;
      if (is_a) {
        ok = FA.fill(r, [&](Eigen::Index p) { return a_at(r, p); });
      } else if constexpr (b_double) {
        ok = FB.fill_double(r, [&](Eigen::Index p) { return Trans ? B(r, p) : B(p, r); });
      } else {
        ok = FB.fill(r, [&](Eigen::Index p) { return b_at(p, r); });
      }
      if (!ok) finite = false;
    }
  });
  if constexpr (b_double) {
    if (narrow && finite.load()) {
      for (Eigen::Index r = 0; r < n && narrow; ++r)
        narrow = FB.all_zero[static_cast<std::size_t>(r)] || FB.spread[static_cast<std::size_t>(r)] <= narrow_width - 53;
      if (!narrow) {  // some column spans too many binades: the full width
        FB.resize(n, k, W);
        run_blocks(blocks_b, threads, [&](std::size_t blk) {
          const Eigen::Index lo = static_cast<Eigen::Index>(blk) * cb, hi = std::min(lo + cb, n);
          for (Eigen::Index r = lo; r < hi; ++r) FB.fill_double(r, [&](Eigen::Index p) { return Trans ? B(r, p) : B(p, r); });
        });
      }
    }
  }
  if (!finite.load()) {  // NaN or infinite entries: IEEE semantics of the reference kernel
    const ProductSplit s = split_product(m, n, 16);
    run_blocks(static_cast<std::size_t>(s.count), threads, [&](std::size_t blk) {
      const Eigen::Index lo = static_cast<Eigen::Index>(blk) * s.width;
      const Eigen::Index j0 = s.by_columns ? lo : 0, j1 = s.by_columns ? std::min(lo + s.width, n) : n;
      const Eigen::Index i0 = s.by_columns ? 0 : lo, i1 = s.by_columns ? m : std::min(lo + s.width, m);
      for (Eigen::Index j = j0; j < j1; ++j)
        for (Eigen::Index i = i0; i < i1; ++i) reference(i, j, C(i, j).backend().data());
    });
    return;
  }

#if SANPATH_IFMA_KERNEL
  constexpr int L = ifma_limbs(prec);
  if constexpr (L <= ifma_max_limbs) {
    if (ifma_products_active()) {
      // Lanes over the longer side, so that blocks of 8 are full.
      const auto at_ij = [&](Eigen::Index i, Eigen::Index j) { return C(i, j).backend().data(); };
      const auto ref_ij = [&](Eigen::Index i, Eigen::Index j, mpfr_ptr c) { reference(i, j, c); };
      const auto at_ji = [&](Eigen::Index j, Eigen::Index i) { return C(i, j).backend().data(); };
      const auto ref_ji = [&](Eigen::Index j, Eigen::Index i, mpfr_ptr c) { reference(i, j, c); };
      const bool lanes_b = n >= m || n >= 8;
      if constexpr (narrow_possible) {  // double weights only: no narrow kernel for S × S products
        if (narrow) {
          if (lanes_b)
            ifma_gemm<L, narrow_limbs>(FA, FB, prec, W, threads, at_ij, ref_ij);
          else
            ifma_gemm<narrow_limbs, L>(FB, FA, prec, W, threads, at_ji, ref_ji);
          return;
        }
      }
      if (lanes_b)
        ifma_gemm<L, L>(FA, FB, prec, W, threads, at_ij, ref_ij);
      else
        ifma_gemm<L, L>(FB, FA, prec, W, threads, at_ji, ref_ji);
      return;
    }
  }
#endif

  // Portable kernel: blocks of 16 columns (or rows) of C; each entry is independent.
  const ProductSplit s = split_product(m, n, 16);
  run_blocks(static_cast<std::size_t>(s.count), threads, [&](std::size_t blk) {
    FixedScratch w(nl);
    const Eigen::Index lo = static_cast<Eigen::Index>(blk) * s.width;
    const Eigen::Index j0 = s.by_columns ? lo : 0, j1 = s.by_columns ? std::min(lo + s.width, n) : n;
    const Eigen::Index i0 = s.by_columns ? 0 : lo, i1 = s.by_columns ? m : std::min(lo + s.width, m);
    for (Eigen::Index j = j0; j < j1; ++j)
      for (Eigen::Index i = i0; i < i1; ++i) {
        mpfr_ptr c = C(i, j).backend().data();
        switch (fixed_check(FA, i, FB, j, prec, W)) {
          case FixedCheck::zero:
            mpfr_set_zero(c, 1);
            break;
          case FixedCheck::compute:
            fixed_entry_mpn(c, FA, i, FB, j, w);
            break;
          case FixedCheck::reference:
            reference(i, j, c);
            break;
        }
      }
  });
}

}  // namespace detail

template <class S> void gemm(const Matrix<S>& A, const Matrix<S>& B, Matrix<S>& C) {
  detail::check_inner(A.cols(), B.rows(), "gemm");
  if constexpr (is_mpfr_v<S>) {
    detail::mpfr_gemm<S, false>(A, B, C);
  } else {
    detail::double_gemm<false>(A, B, C);
  }
}

template <class S> void gemm_nt(const Matrix<S>& A, const Matrix<S>& B, Matrix<S>& C) {
  detail::check_inner(A.cols(), B.cols(), "gemm_nt");
  if constexpr (is_mpfr_v<S>) {
    detail::mpfr_gemm<S, true>(A, B, C);
  } else {
    detail::double_gemm<true>(A, B, C);
  }
}

template <class S> void gemm_weights(const Matrix<S>& A, const Matrix<double>& W, Matrix<S>& C) {
  detail::check_inner(A.cols(), W.rows(), "gemm_weights");
  if constexpr (is_mpfr_v<S>) {
    detail::mpfr_gemm<S, false>(A, W, C);
  } else {
    detail::double_gemm<false>(A, W, C);
  }
}

template <class S> void gemm_weights(const Matrix<S>& A, const WeightView& W, Matrix<S>& C) {
  detail::check_inner(A.cols(), W.rows, "gemm_weights");
  if constexpr (is_mpfr_v<S>) {
    detail::mpfr_gemm<S, false>(A, W.decode(), C);
  } else {
    detail::double_gemm_view(A, W, C);
  }
}

template <class S> void gemm_weights_nt(const Matrix<S>& A, const Matrix<double>& W, Matrix<S>& C) {
  detail::check_inner(A.cols(), W.cols(), "gemm_weights_nt");
  if constexpr (is_mpfr_v<S>) {
    detail::mpfr_gemm<S, true>(A, W, C);
  } else {
    detail::double_gemm<true>(A, W, C);
  }
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_LINALG(S)                                                       \
  template void sanpath::gemm<S>(const sanpath::Matrix<S>&, const sanpath::Matrix<S>&,     \
                                 sanpath::Matrix<S>&);                                      \
  template void sanpath::gemm_nt<S>(const sanpath::Matrix<S>&, const sanpath::Matrix<S>&,  \
                                    sanpath::Matrix<S>&);                                   \
  template void sanpath::gemm_weights<S>(const sanpath::Matrix<S>&, const sanpath::Matrix<double>&, \
                                         sanpath::Matrix<S>&); \
  template void sanpath::gemm_weights<S>(const sanpath::Matrix<S>&, const sanpath::WeightView&,          \
                                         sanpath::Matrix<S>&);                                           \
  template void sanpath::gemm_weights_nt<S>(const sanpath::Matrix<S>&, const sanpath::Matrix<double>&, \
                                            sanpath::Matrix<S>&);

#include "core/dgemm.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

// The AVX2 and AVX-512 microkernels are compiled on x86-64 with GCC or Clang,
// each function for its own target (the rest of the file, and every inline
// function it shares with the library, stays generic x86-64), and run only
// when the CPU has the instructions.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SANPATH_DGEMM_X86 1
#include <immintrin.h>
#else
#define SANPATH_DGEMM_X86 0
#endif

namespace sanpath {
namespace detail {

namespace {

using Index = Eigen::Index;

// Block sizes, fixed (never read from the cache sizes: they do not change a
// bit of C anyway, since every entry is one chain of FMAs over p).
constexpr Index kKc = 256;   // inner-index block: a packed panel of A and of B
constexpr Index kMc = 96;    // rows of A packed at once (a multiple of every MR)
constexpr Index kNc = 1536;  // columns of B packed at once (a multiple of every NR)

// ---- microkernels: c[i + j·ldc] (i < MR, j < NR) ← chain of FMAs over the
// kc packed steps (a: MR values per step, b: NR per step), from +0 when
// `first`, else from the values in c.

template <int MR, int NR> void kernel_generic(Index kc, const double* a, const double* b, double* c, Index ldc,
                                             bool first) {
  double acc[NR][MR];
  for (int j = 0; j < NR; ++j)
    for (int i = 0; i < MR; ++i) acc[j][i] = first ? 0.0 : c[i + j * ldc];
  for (Index p = 0; p < kc; ++p, a += MR, b += NR)
    for (int j = 0; j < NR; ++j)
      for (int i = 0; i < MR; ++i) acc[j][i] = std::fma(a[i], b[j], acc[j][i]);
  for (int j = 0; j < NR; ++j)
    for (int i = 0; i < MR; ++i) c[i + j * ldc] = acc[j][i];
}

#if SANPATH_DGEMM_X86
__attribute__((target("avx2,fma"))) void kernel_avx2(Index kc, const double* a, const double* b, double* c,
                                                     Index ldc, bool first) {
  // MR = 8 (two registers of four), NR = 6: twelve accumulators.
  __m256d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (first) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_pd();
  } else {
    c00 = _mm256_loadu_pd(c), c01 = _mm256_loadu_pd(c + 4);
    c10 = _mm256_loadu_pd(c + ldc), c11 = _mm256_loadu_pd(c + ldc + 4);
    c20 = _mm256_loadu_pd(c + 2 * ldc), c21 = _mm256_loadu_pd(c + 2 * ldc + 4);
    c30 = _mm256_loadu_pd(c + 3 * ldc), c31 = _mm256_loadu_pd(c + 3 * ldc + 4);
    c40 = _mm256_loadu_pd(c + 4 * ldc), c41 = _mm256_loadu_pd(c + 4 * ldc + 4);
    c50 = _mm256_loadu_pd(c + 5 * ldc), c51 = _mm256_loadu_pd(c + 5 * ldc + 4);
  }
  for (Index p = 0; p < kc; ++p, a += 8, b += 6) {
    const __m256d a0 = _mm256_loadu_pd(a), a1 = _mm256_loadu_pd(a + 4);
    __m256d bj = _mm256_broadcast_sd(b);
    c00 = _mm256_fmadd_pd(a0, bj, c00), c01 = _mm256_fmadd_pd(a1, bj, c01);
    bj = _mm256_broadcast_sd(b + 1);
    c10 = _mm256_fmadd_pd(a0, bj, c10), c11 = _mm256_fmadd_pd(a1, bj, c11);
    bj = _mm256_broadcast_sd(b + 2);
    c20 = _mm256_fmadd_pd(a0, bj, c20), c21 = _mm256_fmadd_pd(a1, bj, c21);
    bj = _mm256_broadcast_sd(b + 3);
    c30 = _mm256_fmadd_pd(a0, bj, c30), c31 = _mm256_fmadd_pd(a1, bj, c31);
    bj = _mm256_broadcast_sd(b + 4);
    c40 = _mm256_fmadd_pd(a0, bj, c40), c41 = _mm256_fmadd_pd(a1, bj, c41);
    bj = _mm256_broadcast_sd(b + 5);
    c50 = _mm256_fmadd_pd(a0, bj, c50), c51 = _mm256_fmadd_pd(a1, bj, c51);
  }
  _mm256_storeu_pd(c, c00), _mm256_storeu_pd(c + 4, c01);
  _mm256_storeu_pd(c + ldc, c10), _mm256_storeu_pd(c + ldc + 4, c11);
  _mm256_storeu_pd(c + 2 * ldc, c20), _mm256_storeu_pd(c + 2 * ldc + 4, c21);
  _mm256_storeu_pd(c + 3 * ldc, c30), _mm256_storeu_pd(c + 3 * ldc + 4, c31);
  _mm256_storeu_pd(c + 4 * ldc, c40), _mm256_storeu_pd(c + 4 * ldc + 4, c41);
  _mm256_storeu_pd(c + 5 * ldc, c50), _mm256_storeu_pd(c + 5 * ldc + 4, c51);
}

__attribute__((target("avx512f"))) void kernel_avx512(Index kc, const double* a, const double* b, double* c,
                                                      Index ldc, bool first) {
  // MR = 24 (three registers of eight), NR = 8: twenty-four accumulators,
  // named one by one so that they stay in registers at every optimisation
  // level (an array of them is kept in memory at -O1, the sanitizer build's).
#define SANPATH_ACC(j) __m512d c##j##0, c##j##1, c##j##2;
  SANPATH_ACC(0) SANPATH_ACC(1) SANPATH_ACC(2) SANPATH_ACC(3) SANPATH_ACC(4) SANPATH_ACC(5) SANPATH_ACC(6) SANPATH_ACC(7)
#undef SANPATH_ACC
#define SANPATH_LOAD(j)                                                                                     \
  c##j##0 = first ? _mm512_setzero_pd() : _mm512_loadu_pd(c + (j)*ldc);                                    \
  c##j##1 = first ? _mm512_setzero_pd() : _mm512_loadu_pd(c + (j)*ldc + 8);                                \
  c##j##2 = first ? _mm512_setzero_pd() : _mm512_loadu_pd(c + (j)*ldc + 16);
  SANPATH_LOAD(0) SANPATH_LOAD(1) SANPATH_LOAD(2) SANPATH_LOAD(3) SANPATH_LOAD(4) SANPATH_LOAD(5) SANPATH_LOAD(6)
  SANPATH_LOAD(7)
#undef SANPATH_LOAD
  for (Index p = 0; p < kc; ++p, a += 24, b += 8) {
    const __m512d a0 = _mm512_loadu_pd(a), a1 = _mm512_loadu_pd(a + 8), a2 = _mm512_loadu_pd(a + 16);
#define SANPATH_FMA(j)                                  \
  {                                                     \
    const __m512d bj = _mm512_set1_pd(b[j]);            \
    c##j##0 = _mm512_fmadd_pd(a0, bj, c##j##0);         \
    c##j##1 = _mm512_fmadd_pd(a1, bj, c##j##1);         \
    c##j##2 = _mm512_fmadd_pd(a2, bj, c##j##2);         \
  }
    SANPATH_FMA(0) SANPATH_FMA(1) SANPATH_FMA(2) SANPATH_FMA(3) SANPATH_FMA(4) SANPATH_FMA(5) SANPATH_FMA(6)
    SANPATH_FMA(7)
#undef SANPATH_FMA
  }
#define SANPATH_STORE(j)                         \
  _mm512_storeu_pd(c + (j)*ldc, c##j##0);        \
  _mm512_storeu_pd(c + (j)*ldc + 8, c##j##1);    \
  _mm512_storeu_pd(c + (j)*ldc + 16, c##j##2);
  SANPATH_STORE(0) SANPATH_STORE(1) SANPATH_STORE(2) SANPATH_STORE(3) SANPATH_STORE(4) SANPATH_STORE(5)
  SANPATH_STORE(6) SANPATH_STORE(7)
#undef SANPATH_STORE
}
#endif

using Kernel = void (*)(Index, const double*, const double*, double*, Index, bool);

struct Level {
  int mr, nr;
  Kernel kernel;
};

Level level_of(DoubleIsa isa) {
#if SANPATH_DGEMM_X86
  if (isa == DoubleIsa::avx512) return {24, 8, kernel_avx512};
  if (isa == DoubleIsa::avx2) return {8, 6, kernel_avx2};
#endif
  (void)isa;
  return {4, 4, kernel_generic<4, 4>};
}

/// Packs rows [0, rows) of the kc×? block of A starting at (i0, p0) into
/// panels of MR rows (step-major within a panel), zero-padded to MR.
void pack_a(const double* A, Index lda, Index rows, Index kc, int mr, double* dst) {
  for (Index i0 = 0; i0 < rows; i0 += mr) {
    const Index h = std::min<Index>(mr, rows - i0);
    for (Index p = 0; p < kc; ++p, dst += mr) {
      const double* src = A + i0 + p * lda;
      Index i = 0;
      for (; i < h; ++i) dst[i] = src[i];
      for (; i < mr; ++i) dst[i] = 0.0;
    }
  }
}

/// Packs columns [0, cols) of op(B)'s kc-row block into panels of NR columns,
/// zero-padded to NR. op(B)(p, j) = B[p + j·ldb], or B[j + p·ldb] transposed.
void pack_b(const double* B, Index ldb, bool trans, Index cols, Index kc, int nr, double* dst) {
  for (Index j0 = 0; j0 < cols; j0 += nr) {
    const Index w = std::min<Index>(nr, cols - j0);
    for (Index p = 0; p < kc; ++p, dst += nr) {
      Index j = 0;
      if (trans) {
        const double* src = B + j0 + p * ldb;
        for (; j < w; ++j) dst[j] = src[j];
      } else {
        const double* src = B + p + j0 * ldb;
        for (; j < w; ++j) dst[j] = src[j * ldb];
      }
      for (; j < nr; ++j) dst[j] = 0.0;
    }
  }
}

/// A buffer of doubles starting on a 64-byte boundary: the microkernels'
/// 512-bit loads of packed panels then never straddle two cache lines.
class AlignedBuffer {
 public:
  double* get(std::size_t n) {
    data_.resize(n + 8);
    const auto address = reinterpret_cast<std::uintptr_t>(data_.data());
    return data_.data() + ((64 - address % 64) % 64) / sizeof(double);
  }

 private:
  std::vector<double> data_;
};

/// A thread's packing buffers, kept between calls (products come in many
/// small pieces: a head's scores, a row block).
struct PackBuffers {
  AlignedBuffer a, b, tile;
};

PackBuffers& buffers() {
  thread_local PackBuffers b;
  return b;
}

std::atomic<int> forced_isa{-1};

DoubleIsa isa_from_environment() {
  const char* env = std::getenv("SANPATH_ISA");
  const DoubleIsa cpu = cpu_double_isa();
  if (env == nullptr || *env == '\0') return cpu;
  const std::string name(env);
  const std::optional<DoubleIsa> level = isa_from_name(name);
  if (!level) throw std::invalid_argument("SANPATH_ISA=" + name + ": unknown level (levels: " + isa_names() + ")");
  const DoubleIsa want = *level;
  if (static_cast<int>(want) > static_cast<int>(cpu))
    throw std::invalid_argument("SANPATH_ISA=" + name + ": this CPU lacks " +
                                (want == DoubleIsa::avx512 ? "AVX-512F" : "AVX2 and FMA") +
                                " (it runs up to " + isa_name(cpu) + ")");
  return want;
}

}  // namespace

const char* isa_name(DoubleIsa isa) {
  switch (isa) {
    case DoubleIsa::avx512:
      return "avx512";
    case DoubleIsa::avx2:
      return "avx2";
    case DoubleIsa::generic:
      break;
  }
  return "generic";
}

std::optional<DoubleIsa> isa_from_name(const std::string& name) {
  for (const DoubleIsa isa : {DoubleIsa::generic, DoubleIsa::avx2, DoubleIsa::avx512})
    if (name == isa_name(isa)) return isa;
  return std::nullopt;
}

const char* isa_names() { return "generic, avx2, avx512"; }

DoubleIsa cpu_double_isa() {
#if SANPATH_DGEMM_X86
  static const DoubleIsa best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return DoubleIsa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return DoubleIsa::avx2;
    return DoubleIsa::generic;
  }();
  return best;
#else
  return DoubleIsa::generic;
#endif
}

DoubleIsa double_isa() {
  const int forced = forced_isa.load();
  if (forced >= 0) return static_cast<DoubleIsa>(forced);
  static const DoubleIsa chosen = isa_from_environment();  // a throw is thrown again at the next call
  return chosen;
}

void set_double_isa(DoubleIsa isa) {
  if (static_cast<int>(isa) > static_cast<int>(cpu_double_isa()))
    throw std::invalid_argument(std::string("double products: this CPU cannot run level ") + isa_name(isa) +
                                " (it runs up to " + isa_name(cpu_double_isa()) + ")");
  forced_isa.store(static_cast<int>(isa));
}

void dgemm(DoubleIsa isa, Index m, Index n, Index k, const double* A, Index lda, const double* B, Index ldb,
           bool trans_b, double* C, Index ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (Index j = 0; j < n; ++j) std::fill(C + j * ldc, C + j * ldc + m, 0.0);
    return;
  }
  const Level lv = level_of(isa);
  const Index mr = lv.mr, nr = lv.nr;
  PackBuffers& buf = buffers();
  const Index kc_max = std::min(k, kKc);
  const Index mc_max = std::min(m, kMc), nc_max = std::min(n, kNc);
  double* const pa = buf.a.get(static_cast<std::size_t>(((mc_max + mr - 1) / mr) * mr * kc_max));
  double* const pb = buf.b.get(static_cast<std::size_t>(((nc_max + nr - 1) / nr) * nr * kc_max));
  double* const tile = buf.tile.get(static_cast<std::size_t>(mr * nr));
  for (Index jc = 0; jc < n; jc += kNc) {
    const Index nc = std::min(kNc, n - jc);
    for (Index pc = 0; pc < k; pc += kKc) {
      const Index kc = std::min(kKc, k - pc);
      const bool first = pc == 0;
      pack_b(trans_b ? B + jc + pc * ldb : B + pc + jc * ldb, ldb, trans_b, nc, kc, nr, pb);
      for (Index ic = 0; ic < m; ic += kMc) {
        const Index mc = std::min(kMc, m - ic);
        pack_a(A + ic + pc * lda, lda, mc, kc, mr, pa);
        for (Index jr = 0; jr < nc; jr += nr) {
          const Index w = std::min(nr, nc - jr);
          const double* b = pb + (jr / nr) * nr * kc;
          for (Index ir = 0; ir < mc; ir += mr) {
            const Index h = std::min(mr, mc - ir);
            const double* a = pa + (ir / mr) * mr * kc;
            double* c = C + (ic + ir) + (jc + jr) * ldc;
            if (h == mr && w == nr) {
              lv.kernel(kc, a, b, c, ldc, first);
              continue;
            }
            // An edge tile: through a full-size tile; the padding's entries are dropped.
            if (!first)
              for (Index j = 0; j < w; ++j) std::memcpy(tile + j * mr, c + j * ldc, sizeof(double) * h);
            lv.kernel(kc, a, b, tile, mr, first);
            for (Index j = 0; j < w; ++j) std::memcpy(c + j * ldc, tile + j * mr, sizeof(double) * h);
          }
        }
      }
    }
  }
}

}  // namespace detail
}  // namespace sanpath

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
// `first`, else from the values in c. T is double (dgemm) or float (sgemm);
// std::fma and the vector FMAs round once, as the calling thread's mode says.

template <class T, int MR, int NR> void kernel_generic(Index kc, const T* a, const T* b, T* c, Index ldc, bool first) {
  T acc[NR][MR];
  for (int j = 0; j < NR; ++j)
    for (int i = 0; i < MR; ++i) acc[j][i] = first ? T(0) : c[i + j * ldc];
  for (Index p = 0; p < kc; ++p, a += MR, b += NR)
    for (int j = 0; j < NR; ++j)
      for (int i = 0; i < MR; ++i) acc[j][i] = std::fma(a[i], b[j], acc[j][i]);
  for (int j = 0; j < NR; ++j)
    for (int i = 0; i < MR; ++i) c[i + j * ldc] = acc[j][i];
}

#if SANPATH_DGEMM_X86
// One register type per level and element type, with the five operations a
// microkernel needs: zero, load, store, broadcast, fused multiply-add. The
// kernels below are written once per level for both element types.
#define SANPATH_AVX2 __attribute__((target("avx2,fma"), always_inline)) static inline
#define SANPATH_AVX512 __attribute__((target("avx512f"), always_inline)) static inline
#define SANPATH_VECTOR(Name, T, Target, Reg, lanes, suffix, splat)                                   \
  template <> struct Name<T> {                                                                        \
    using R = Reg;                                                                                    \
    static constexpr int width = lanes;                                                               \
    Target R zero() { return suffix(setzero)(); }                                                     \
    Target R load(const T* p) { return suffix(loadu)(p); }                                            \
    Target void store(T* p, R v) { suffix(storeu)(p, v); }                                            \
    Target R broadcast(const T* p) { return splat(*p); }                                              \
    Target R fma(R a, R b, R c) { return suffix(fmadd)(a, b, c); }                                    \
  };
template <class T> struct Avx2Vector;
template <class T> struct Avx512Vector;
#define SANPATH_PD256(op) _mm256_##op##_pd
#define SANPATH_PS256(op) _mm256_##op##_ps
#define SANPATH_PD512(op) _mm512_##op##_pd
#define SANPATH_PS512(op) _mm512_##op##_ps
SANPATH_VECTOR(Avx2Vector, double, SANPATH_AVX2, __m256d, 4, SANPATH_PD256, _mm256_set1_pd)
SANPATH_VECTOR(Avx2Vector, float, SANPATH_AVX2, __m256, 8, SANPATH_PS256, _mm256_set1_ps)
SANPATH_VECTOR(Avx512Vector, double, SANPATH_AVX512, __m512d, 8, SANPATH_PD512, _mm512_set1_pd)
SANPATH_VECTOR(Avx512Vector, float, SANPATH_AVX512, __m512, 16, SANPATH_PS512, _mm512_set1_ps)
#undef SANPATH_PD256
#undef SANPATH_PS256
#undef SANPATH_PD512
#undef SANPATH_PS512
#undef SANPATH_VECTOR
#undef SANPATH_AVX2
#undef SANPATH_AVX512

template <class T>
__attribute__((target("avx2,fma"))) void kernel_avx2(Index kc, const T* a, const T* b, T* c, Index ldc, bool first) {
  // MR = two registers (8 doubles, 16 floats), NR = 6: twelve accumulators.
  using V = Avx2Vector<T>;
  constexpr int w = V::width;
  typename V::R c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (first) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = V::zero();
  } else {
    c00 = V::load(c), c01 = V::load(c + w);
    c10 = V::load(c + ldc), c11 = V::load(c + ldc + w);
    c20 = V::load(c + 2 * ldc), c21 = V::load(c + 2 * ldc + w);
    c30 = V::load(c + 3 * ldc), c31 = V::load(c + 3 * ldc + w);
    c40 = V::load(c + 4 * ldc), c41 = V::load(c + 4 * ldc + w);
    c50 = V::load(c + 5 * ldc), c51 = V::load(c + 5 * ldc + w);
  }
  for (Index p = 0; p < kc; ++p, a += 2 * w, b += 6) {
    const typename V::R a0 = V::load(a), a1 = V::load(a + w);
    typename V::R bj = V::broadcast(b);
    c00 = V::fma(a0, bj, c00), c01 = V::fma(a1, bj, c01);
    bj = V::broadcast(b + 1);
    c10 = V::fma(a0, bj, c10), c11 = V::fma(a1, bj, c11);
    bj = V::broadcast(b + 2);
    c20 = V::fma(a0, bj, c20), c21 = V::fma(a1, bj, c21);
    bj = V::broadcast(b + 3);
    c30 = V::fma(a0, bj, c30), c31 = V::fma(a1, bj, c31);
    bj = V::broadcast(b + 4);
    c40 = V::fma(a0, bj, c40), c41 = V::fma(a1, bj, c41);
    bj = V::broadcast(b + 5);
    c50 = V::fma(a0, bj, c50), c51 = V::fma(a1, bj, c51);
  }
  V::store(c, c00), V::store(c + w, c01);
  V::store(c + ldc, c10), V::store(c + ldc + w, c11);
  V::store(c + 2 * ldc, c20), V::store(c + 2 * ldc + w, c21);
  V::store(c + 3 * ldc, c30), V::store(c + 3 * ldc + w, c31);
  V::store(c + 4 * ldc, c40), V::store(c + 4 * ldc + w, c41);
  V::store(c + 5 * ldc, c50), V::store(c + 5 * ldc + w, c51);
}

template <class T>
__attribute__((target("avx512f"))) void kernel_avx512(Index kc, const T* a, const T* b, T* c, Index ldc, bool first) {
  // MR = three registers (24 doubles, 48 floats), NR = 8: twenty-four
  // accumulators, named one by one so that they stay in registers at every
  // optimisation level (an array of them is kept in memory at -O1, the
  // sanitizer build's).
  using V = Avx512Vector<T>;
  constexpr int w = V::width;
#define SANPATH_ACC(j) typename V::R c##j##0, c##j##1, c##j##2;
  SANPATH_ACC(0) SANPATH_ACC(1) SANPATH_ACC(2) SANPATH_ACC(3) SANPATH_ACC(4) SANPATH_ACC(5) SANPATH_ACC(6) SANPATH_ACC(7)
#undef SANPATH_ACC
#define SANPATH_LOAD(j)                                                  \
  c##j##0 = first ? V::zero() : V::load(c + (j)*ldc);                    \
  c##j##1 = first ? V::zero() : V::load(c + (j)*ldc + w);                \
  c##j##2 = first ? V::zero() : V::load(c + (j)*ldc + 2 * w);
  SANPATH_LOAD(0) SANPATH_LOAD(1) SANPATH_LOAD(2) SANPATH_LOAD(3) SANPATH_LOAD(4) SANPATH_LOAD(5) SANPATH_LOAD(6)
  SANPATH_LOAD(7)
#undef SANPATH_LOAD
  for (Index p = 0; p < kc; ++p, a += 3 * w, b += 8) {
    const typename V::R a0 = V::load(a), a1 = V::load(a + w), a2 = V::load(a + 2 * w);
#define SANPATH_FMA(j)                                  \
  {                                                     \
    const typename V::R bj = V::broadcast(b + (j));     \
    c##j##0 = V::fma(a0, bj, c##j##0);                  \
    c##j##1 = V::fma(a1, bj, c##j##1);                  \
    c##j##2 = V::fma(a2, bj, c##j##2);                  \
  }
    SANPATH_FMA(0) SANPATH_FMA(1) SANPATH_FMA(2) SANPATH_FMA(3) SANPATH_FMA(4) SANPATH_FMA(5) SANPATH_FMA(6)
    SANPATH_FMA(7)
#undef SANPATH_FMA
  }
#define SANPATH_STORE(j)                         \
  V::store(c + (j)*ldc, c##j##0);                \
  V::store(c + (j)*ldc + w, c##j##1);            \
  V::store(c + (j)*ldc + 2 * w, c##j##2);
  SANPATH_STORE(0) SANPATH_STORE(1) SANPATH_STORE(2) SANPATH_STORE(3) SANPATH_STORE(4) SANPATH_STORE(5)
  SANPATH_STORE(6) SANPATH_STORE(7)
#undef SANPATH_STORE
}
#endif

template <class T> using Kernel = void (*)(Index, const T*, const T*, T*, Index, bool);

template <class T> struct Level {
  int mr, nr;
  Kernel<T> kernel;
};

template <class T> Level<T> level_of(DoubleIsa isa) {
#if SANPATH_DGEMM_X86
  constexpr int lanes512 = 64 / sizeof(T), lanes256 = 32 / sizeof(T);
  if (isa == DoubleIsa::avx512) return {3 * lanes512, 8, kernel_avx512<T>};
  if (isa == DoubleIsa::avx2) return {2 * lanes256, 6, kernel_avx2<T>};
#endif
  (void)isa;
  return {4, 4, kernel_generic<T, 4, 4>};
}

/// Packs rows [0, rows) of the kc×? block of A starting at (i0, p0) into
/// panels of MR rows (step-major within a panel), zero-padded to MR.
template <class T> void pack_a(const T* A, Index lda, Index rows, Index kc, int mr, T* dst) {
  for (Index i0 = 0; i0 < rows; i0 += mr) {
    const Index h = std::min<Index>(mr, rows - i0);
    for (Index p = 0; p < kc; ++p, dst += mr) {
      const T* src = A + i0 + p * lda;
      Index i = 0;
      for (; i < h; ++i) dst[i] = src[i];
      for (; i < mr; ++i) dst[i] = T(0);
    }
  }
}

/// Packs columns [0, cols) of op(B)'s kc-row block into panels of NR columns,
/// zero-padded to NR. op(B)(p, j) = B[p + j·ldb], or B[j + p·ldb] transposed.
template <class T> void pack_b(const T* B, Index ldb, bool trans, Index cols, Index kc, int nr, T* dst) {
  for (Index j0 = 0; j0 < cols; j0 += nr) {
    const Index w = std::min<Index>(nr, cols - j0);
    for (Index p = 0; p < kc; ++p, dst += nr) {
      Index j = 0;
      if (trans) {
        const T* src = B + j0 + p * ldb;
        for (; j < w; ++j) dst[j] = src[j];
      } else {
        const T* src = B + p + j0 * ldb;
        for (; j < w; ++j) dst[j] = src[j * ldb];
      }
      for (; j < nr; ++j) dst[j] = T(0);
    }
  }
}

/// A buffer of T starting on a 64-byte boundary: the microkernels'
/// 512-bit loads of packed panels then never straddle two cache lines.
/// Whether offsets[0 .. n) step by `step` bytes from offsets[0].
inline bool steps_by(const std::int64_t* offsets, Index n, std::int64_t step) {
  for (Index x = 1; x < n; ++x)
    if (offsets[x] - offsets[x - 1] != step) return false;
  return true;
}

/// pack_b's layout from a view of stored floats: columns [jc, jc + cols)
/// and inner indices [pc, pc + kc) of W, each element decoded (exactly) as
/// it is packed. The loops follow the stored order: along a panel's columns
/// where they lie next to each other (a Conv1D weight), down each column
/// where its entries do (a torch Linear weight, Wᵀ stored), else by both
/// offsets.
template <StoredFloat F>
void pack_view(const WeightView& W, Index jc, Index pc, Index cols, Index kc, int nr, double* dst) {
  constexpr auto e = static_cast<std::int64_t>(stored_size(F));
  const std::int64_t* rows = W.row_offsets + pc;
  const bool down_columns = steps_by(rows, kc, e);
  for (Index j0 = 0; j0 < cols; j0 += nr, dst += nr * kc) {
    const Index w = std::min<Index>(nr, cols - j0);
    const std::int64_t* col = W.col_offsets + jc + j0;
    if (w < nr)
      for (Index p = 0; p < kc; ++p)
        for (Index j = w; j < nr; ++j) dst[p * nr + j] = 0.0;
    if (steps_by(col, w, e)) {
      for (Index p = 0; p < kc; ++p) {
        const unsigned char* src = W.base + rows[p] + col[0];
        double* out = dst + p * nr;
        for (Index j = 0; j < w; ++j) out[j] = load_stored<F>(src + j * e);
      }
    } else if (down_columns) {
      for (Index j = 0; j < w; ++j) {
        const unsigned char* src = W.base + rows[0] + col[j];
        double* out = dst + j;
        for (Index p = 0; p < kc; ++p) out[p * nr] = load_stored<F>(src + p * e);
      }
    } else {
      for (Index p = 0; p < kc; ++p) {
        const unsigned char* src = W.base + rows[p];
        double* out = dst + p * nr;
        for (Index j = 0; j < w; ++j) out[j] = load_stored<F>(src + col[j]);
      }
    }
  }
}

template <class T> class AlignedBuffer {
 public:
  T* get(std::size_t n) {
    data_.resize(n + 64 / sizeof(T));
    const auto address = reinterpret_cast<std::uintptr_t>(data_.data());
    return data_.data() + ((64 - address % 64) % 64) / sizeof(T);
  }

 private:
  std::vector<T> data_;
};

/// A thread's packing buffers, kept between calls (products come in many
/// small pieces: a head's scores, a row block).
template <class T> struct PackBuffers {
  AlignedBuffer<T> a, b, tile;
};

template <class T> PackBuffers<T>& buffers() {
  thread_local PackBuffers<T> b;
  return b;
}

/// dgemm and sgemm: the blocked loops over packed panels, one microkernel call per MR×NR tile of C.
/// C = A·B, B's panels packed by pack_b_block(jc, pc, nc, kc, nr, dst):
/// columns [jc, jc + nc) and inner indices [pc, pc + kc) of B, nr columns at
/// a time, into dst as pack_b lays them out.
template <class T, class PackB>
void packed_gemm(DoubleIsa isa, Index m, Index n, Index k, const T* A, Index lda, const PackB& pack_b_block, T* C,
                 Index ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (Index j = 0; j < n; ++j) std::fill(C + j * ldc, C + j * ldc + m, T(0));
    return;
  }
  const Level<T> lv = level_of<T>(isa);
  const Index mr = lv.mr, nr = lv.nr;
  PackBuffers<T>& buf = buffers<T>();
  const Index kc_max = std::min(k, kKc);
  const Index mc_max = std::min(m, kMc), nc_max = std::min(n, kNc);
  T* const pa = buf.a.get(static_cast<std::size_t>(((mc_max + mr - 1) / mr) * mr * kc_max));
  T* const pb = buf.b.get(static_cast<std::size_t>(((nc_max + nr - 1) / nr) * nr * kc_max));
  T* const tile = buf.tile.get(static_cast<std::size_t>(mr * nr));
  for (Index jc = 0; jc < n; jc += kNc) {
    const Index nc = std::min(kNc, n - jc);
    for (Index pc = 0; pc < k; pc += kKc) {
      const Index kc = std::min(kKc, k - pc);
      const bool first = pc == 0;
      pack_b_block(jc, pc, nc, kc, static_cast<int>(nr), pb);
      for (Index ic = 0; ic < m; ic += kMc) {
        const Index mc = std::min(kMc, m - ic);
        pack_a(A + ic + pc * lda, lda, mc, kc, mr, pa);
        for (Index jr = 0; jr < nc; jr += nr) {
          const Index w = std::min(nr, nc - jr);
          const T* b = pb + (jr / nr) * nr * kc;
          for (Index ir = 0; ir < mc; ir += mr) {
            const Index h = std::min(mr, mc - ir);
            const T* a = pa + (ir / mr) * mr * kc;
            T* c = C + (ic + ir) + (jc + jr) * ldc;
            if (h == mr && w == nr) {
              lv.kernel(kc, a, b, c, ldc, first);
              continue;
            }
            // An edge tile: through a full-size tile; the padding's entries are dropped.
            if (!first)
              for (Index j = 0; j < w; ++j) std::memcpy(tile + j * mr, c + j * ldc, sizeof(T) * h);
            lv.kernel(kc, a, b, tile, mr, first);
            for (Index j = 0; j < w; ++j) std::memcpy(c + j * ldc, tile + j * mr, sizeof(T) * h);
          }
        }
      }
    }
  }
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

namespace {

/// packed_gemm with B a plain matrix (ldb; read transposed with trans_b).
template <class T>
void strided_gemm(DoubleIsa isa, Index m, Index n, Index k, const T* A, Index lda, const T* B, Index ldb,
                  bool trans_b, T* C, Index ldc) {
  packed_gemm(isa, m, n, k, A, lda,
              [&](Index jc, Index pc, Index nc, Index kc, int nr, T* dst) {
                pack_b(trans_b ? B + jc + pc * ldb : B + pc + jc * ldb, ldb, trans_b, nc, kc, nr, dst);
              },
              C, ldc);
}

template <StoredFloat F>
void view_gemm(DoubleIsa isa, Index m, Index k, const double* A, Index lda, const WeightView& W, double* C,
               Index ldc) {
  packed_gemm(isa, m, W.cols, k, A, lda,
              [&](Index jc, Index pc, Index nc, Index kc, int nr, double* dst) {
                pack_view<F>(W, jc, pc, nc, kc, nr, dst);
              },
              C, ldc);
}

}  // namespace

void dgemm(DoubleIsa isa, Index m, Index n, Index k, const double* A, Index lda, const double* B, Index ldb,
           bool trans_b, double* C, Index ldc) {
  strided_gemm(isa, m, n, k, A, lda, B, ldb, trans_b, C, ldc);
}

void dgemm_view(DoubleIsa isa, Index m, Index k, const double* A, Index lda, const WeightView& W, double* C,
                Index ldc) {
  if (W.rows != k) throw std::logic_error("dgemm_view: the view has " + std::to_string(W.rows) + " rows, A " +
                                          std::to_string(k) + " columns");
  switch (W.type) {
    case StoredFloat::f64:
      return view_gemm<StoredFloat::f64>(isa, m, k, A, lda, W, C, ldc);
    case StoredFloat::f32:
      return view_gemm<StoredFloat::f32>(isa, m, k, A, lda, W, C, ldc);
    case StoredFloat::f16:
      return view_gemm<StoredFloat::f16>(isa, m, k, A, lda, W, C, ldc);
    case StoredFloat::bf16:
      break;
  }
  view_gemm<StoredFloat::bf16>(isa, m, k, A, lda, W, C, ldc);
}

void sgemm(DoubleIsa isa, Index m, Index n, Index k, const float* A, Index lda, const float* B, Index ldb,
           bool trans_b, float* C, Index ldc) {
  strided_gemm(isa, m, n, k, A, lda, B, ldb, trans_b, C, ldc);
}

}  // namespace detail
}  // namespace sanpath

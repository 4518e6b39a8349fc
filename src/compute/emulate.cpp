// The emulated formats of math.md §9 (compute/emulate.hpp): a forward pass
// held in binary32 whose every operation rounds once to fp32, bf16 or fp16
// as the rules there say, in the layer order of forward_impl.hpp's layer_map.
// One piece (over 600 lines) on purpose: the roundings are inlined into every
// operation's loop and the operations share one context (format, overflow
// watch, instruction-set level); apart they would need a private header that
// only this pass reads.
#include "sanpath/compute/emulate.hpp"

#include "sanpath/compute/forward.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/core/resources.hpp"
#include "core/dgemm.hpp"
#include "core/linalg_impl.hpp"  // detail::run_blocks, detail::split_product
#include "compute/layer_impl.hpp"  // detail::layer_map

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <type_traits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SANPATH_EMULATE_X86 1
#include <immintrin.h>
#else
#define SANPATH_EMULATE_X86 0
#endif

namespace sanpath {

namespace {

using Index = Eigen::Index;
using MatF = Matrix<float>;
using RowF = RowVector<float>;

// ---- formats and rounding ----------------------------------------------------

/// A format's name, significand bits (with the hidden one), smallest normal
/// exponent, largest finite value and that value as the overflow message prints it.
struct FormatInfo {
  const char* name;
  int precision, emin;
  double largest;
  const char* largest_text;
};

FormatInfo info_of(EmulatedFormat f) {
  switch (f) {
    case EmulatedFormat::bf16:
      return {"bf16", 8, -126, 0x1.fep127, "3.3895314e38"};
    case EmulatedFormat::fp16:
      return {"fp16", 11, -14, 65504.0, "65504"};
    case EmulatedFormat::fp32:
      break;
  }
  return {"fp32", 24, -126, 0x1.fffffep127, "3.4028235e38"};
}

/// x rounded to `p` significand bits with smallest normal exponent `emin`
/// (subnormals below it), ties to even, on the integers of x's bit pattern
/// (no floating-point operation, so no rounding mode); ±inf beyond `largest`.
double round_bits(double x, int p, int emin, double largest) {
  if (!(std::fabs(x) <= DBL_MAX) || x == 0) return x;  // NaN, ±inf, ±0
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  const bool negative = (u >> 63) != 0;
  const int biased = static_cast<int>((u >> 52) & 0x7ff);
  const std::uint64_t fraction = u & ((std::uint64_t(1) << 52) - 1);
  // x = m·2^e with m an integer of at most 53 bits; x lies in [2^E, 2^(E+1)).
  const std::uint64_t m = biased == 0 ? fraction : (fraction | (std::uint64_t(1) << 52));
  const int e = biased == 0 ? -1074 : biased - 1075;
  const int E = biased == 0 ? -1023 : biased - 1023;  // a double subnormal lies far below every emin
  const int quantum = std::max(E, emin) - (p - 1);  // the exponent of F's unit in the last place at x
  const int drop = quantum - e;                     // ≥ 0: F has fewer bits than double
  std::uint64_t r = 0;
  if (drop == 0) {
    r = m;
  } else if (drop < 64) {
    r = m >> drop;
    const std::uint64_t rest = m & ((std::uint64_t(1) << drop) - 1), half = std::uint64_t(1) << (drop - 1);
    if (rest > half || (rest == half && (r & 1) != 0)) ++r;
  }  // drop ≥ 64: m < 2^53 is below half a unit, r = 0
  // r·2^quantum, exact (r ≤ 2^p, quantum ≥ emin − p + 1 is a normal exponent) or, only for |x| near
  // DBL_MAX, beyond every format's largest value whatever the rounding mode.
  const std::uint64_t power_bits = static_cast<std::uint64_t>(quantum + 1023) << 52;
  double power;
  std::memcpy(&power, &power_bits, sizeof power);
  double y = static_cast<double>(r) * power;
  if (y > largest) y = HUGE_VAL;
  return negative ? -y : y;
}

/// bfloat16 from binary32: the upper half of the bit pattern, rounded to
/// nearest even by adding 0x7fff plus the kept part's lowest bit (a carry
/// runs into the exponent, up to infinity); a NaN stays a NaN (quieted).
float bf16_of_float(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    u = (u | 0x00400000u) & 0xffff0000u;
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
  }
  float y;
  std::memcpy(&y, &u, sizeof y);
  return y;
}

/// round_bits for x in F's normal range (the common case) by rounding the
/// bit pattern in place: adding half a unit of the kept part less one, plus
/// its lowest bit, ties to even (a carry runs into the exponent); the rest
/// (subnormal in F, ±inf, NaN) through round_bits. The same results.
inline double round_normal(double x, int p, int emin, double largest) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint64_t magnitude = u & ~(std::uint64_t(1) << 63);
  if (magnitude < (static_cast<std::uint64_t>(emin + 1023) << 52) || magnitude >= (std::uint64_t(0x7ff) << 52))
    return round_bits(x, p, emin, largest);
  const int drop = 53 - p;
  u += (std::uint64_t(1) << (drop - 1)) - 1 + ((u >> drop) & 1);
  u &= ~((std::uint64_t(1) << drop) - 1);
  double y;
  std::memcpy(&y, &u, sizeof y);
  return std::fabs(y) > largest ? std::copysign(HUGE_VAL, x) : y;
}

/// fp16 from binary32 the same way: 13 bits dropped for |x| ≥ 2^-14.
inline float fp16_of_float(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude < 0x38800000u || magnitude >= 0x7f800000u)
    return static_cast<float>(round_bits(x, 11, -14, 65504.0));
  u += 0xfffu + ((u >> 13) & 1u);
  u &= ~0x1fffu;
  float y;
  std::memcpy(&y, &u, sizeof y);
  return std::fabs(y) > 65504.0f ? std::copysign(HUGE_VALF, x) : y;
}

inline float rnd(float x, EmulatedFormat f) {
  switch (f) {
    case EmulatedFormat::bf16:
      return bf16_of_float(x);
    case EmulatedFormat::fp16:
      return fp16_of_float(x);
    case EmulatedFormat::fp32:
      break;
  }
  return x;
}

inline float rnd(double x, EmulatedFormat f) {
  const FormatInfo i = info_of(f);
  return static_cast<float>(round_normal(x, i.precision, i.emin, i.largest));  // exact: a value of F
}

/// Round to nearest even with subnormals kept (no flush to zero, no
/// denormals-are-zero) in this thread, as math.md §9 computes; the scope
/// restores the thread's environment. Worker threads call set() themselves.
class EmulationFpScope {
 public:
  EmulationFpScope() {
    std::fegetenv(&saved_);
    set();
  }
  ~EmulationFpScope() { std::fesetenv(&saved_); }
  EmulationFpScope(const EmulationFpScope&) = delete;
  EmulationFpScope& operator=(const EmulationFpScope&) = delete;
  static void set() {
    std::fesetround(FE_TONEAREST);
#if SANPATH_EMULATE_X86
    _mm_setcsr(_mm_getcsr() & ~0x8040u);  // MXCSR's FTZ (bit 15) and DAZ (bit 6) off
#endif
  }

 private:
  std::fenv_t saved_;
};

// ---- overflow watch ------------------------------------------------------------

/// Records the first operation whose rounded results include a non-finite
/// value (math.md §9): an operation begins, its results are noted (from
/// any thread), and when it ends the first one with a non-finite result
/// names itself.
class OverflowWatch {
 public:
  explicit OverflowWatch(EmulatedFormat f) : format_(f) {}
  void begin(int layer, const char* op) {
    layer_ = layer;
    op_ = op;
    flags_.store(0);
  }
  /// Notes n results at v (stride 1).
  void note(const float* v, std::size_t n) {
    if (found()) return;
    std::uint32_t top = 0;  // the largest |v| as bits: ≥ 0x7f800000 iff a value is ±inf or NaN
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t u;
      std::memcpy(&u, v + i, sizeof u);
      top = std::max(top, u & 0x7fffffffu);
    }
    if (top < 0x7f800000u) return;
    int flags = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (std::isnan(v[i]))
        flags |= 1;
      else if (std::isinf(v[i]))
        flags |= 2;
    flags_.fetch_or(flags);
  }
  void note(const MatF& M) { note(M.data(), static_cast<std::size_t>(M.size())); }
  void end(EmulatedTrace& t) {
    const int flags = flags_.load();
    if (found() || flags == 0) return;
    const std::string where = layer_ == 0 ? std::string(op_) : "layer " + std::to_string(layer_) + ", " + op_;
    t.overflow = where + ((flags & 2) != 0 ? std::string(": overflow to inf (") + to_string(format_) +
                                                 "'s largest finite value is " + info_of(format_).largest_text + ")"
                                           : std::string(": NaN from finite ") + to_string(format_) + " inputs");
    t.overflow_layer = layer_;
    found_ = true;
  }
  bool found() const { return found_; }

 private:
  EmulatedFormat format_;
  int layer_ = 0;
  const char* op_ = "";
  std::atomic<int> flags_{0};
  bool found_ = false;
};

// ---- the operations of math.md §9 -------------------------------------------------

/// What every operation reads: the format and the overflow watch.
struct Context {
  EmulatedFormat f;
  OverflowWatch watch;
  detail::DoubleIsa isa;
};

/// C = rnd_F(A·op(B)) for column-major operands (rule 2), on this thread.
void matmul_block(const Context& c, Index m, Index n, Index k, const float* A, Index lda, const float* B, Index ldb,
                  bool trans_b, float* C, Index ldc) {
  detail::sgemm(c.isa, m, n, k, A, lda, B, ldb, trans_b, C, ldc);
  if (c.f == EmulatedFormat::fp32) return;
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < m; ++i) C[i + j * ldc] = rnd(C[i + j * ldc], c.f);
}

/// C = rnd_F(A·B), A m×k, B k×n: blocks of 128 columns (or rows) of C on
/// product_threads() threads when large; every entry is its own chain, so
/// the split changes no bit.
MatF matmul(Context& c, const MatF& A, const MatF& B) {
  if (A.cols() != B.rows())
    throw std::invalid_argument("emulate: product: inner dimensions " + std::to_string(A.cols()) + " and " +
                                std::to_string(B.rows()) + " differ");
  const Index m = A.rows(), k = A.cols(), n = B.cols();
  MatF C(m, n);
  const Index lda = std::max<Index>(m, 1), ldb = std::max<Index>(k, 1), ldc = lda;
  const double work = double(m) * double(n) * double(k);
  const int threads = work >= double(1 << 21) ? product_threads() : 1;
  const detail::ProductSplit s = detail::split_product(m, n, 128);
  if (threads <= 1 || s.count <= 1) {
    matmul_block(c, m, n, k, A.data(), lda, B.data(), ldb, false, C.data(), ldc);
  } else {
    detail::run_blocks(static_cast<std::size_t>(s.count), threads, [&](std::size_t b) {
      EmulationFpScope::set();
      const Index lo = static_cast<Index>(b) * s.width;
      if (s.by_columns)
        matmul_block(c, m, std::min(s.width, n - lo), k, A.data(), lda, B.data() + lo * ldb, ldb, false,
                     C.data() + lo * ldc, ldc);
      else
        matmul_block(c, std::min(s.width, m - lo), n, k, A.data() + lo, lda, B.data(), ldb, false, C.data() + lo,
                     ldc);
    });
  }
  c.watch.note(C);
  return C;
}

/// M ← rnd_F(fl32(M + 1bᵀ)) (rule 3).
void add_row(Context& c, MatF& M, const RowF& b) {
  for (Index j = 0; j < M.cols(); ++j)
    for (Index i = 0; i < M.rows(); ++i) M(i, j) = rnd(M(i, j) + b(j), c.f);
  c.watch.note(M);
}

/// M ← rnd_F(fl32(M + N)) (rule 3).
void add_in_format(Context& c, MatF& M, const MatF& N) {
  float* m = M.data();
  const float* n = N.data();
  for (Index i = 0; i < M.size(); ++i) m[i] = rnd(m[i] + n[i], c.f);
  c.watch.note(M);
}

/// LayerNorm or RMSNorm of every row, one fused operation each (rule 6).
/// g, b: the gains and biases in F; RMSNorm's unit-offset gains (Gemma) are fl32(1 + g).
MatF norm_in_format(Context& c, const detail::NormForm& form, const MatF& X, const RowF& g, const RowF& b) {
  const Index n = X.rows(), d = X.cols();
  const float dd = static_cast<float>(d), eps = static_cast<float>(form.eps);
  const bool rms = form.kind == NormKind::rms;
  MatF Y(n, d);
  RowF gain = g;
  if (rms && form.unit_offset)
    for (Index j = 0; j < d; ++j) gain(j) = 1.0f + g(j);
  std::vector<float> delta(static_cast<std::size_t>(d));
  for (Index i = 0; i < n; ++i) {
    if (rms) {
      float sum = 0.0f;
      for (Index j = 0; j < d; ++j) sum += X(i, j) * X(i, j);
      const float ms = sum / dd;
      const float inv = 1.0f / std::sqrt(ms + eps);
      for (Index j = 0; j < d; ++j) Y(i, j) = rnd((X(i, j) * inv) * gain(j), c.f);
      continue;
    }
    float sum = 0.0f;
    for (Index j = 0; j < d; ++j) sum += X(i, j);
    const float mu = sum / dd;
    float sq = 0.0f;
    for (Index j = 0; j < d; ++j) {
      delta[static_cast<std::size_t>(j)] = X(i, j) - mu;
      sq += delta[static_cast<std::size_t>(j)] * delta[static_cast<std::size_t>(j)];
    }
    const float var = sq / dd;
    const float inv = 1.0f / std::sqrt(var + eps);
    for (Index j = 0; j < d; ++j) Y(i, j) = rnd((delta[static_cast<std::size_t>(j)] * inv) * gain(j) + b(j), c.f);
  }
  c.watch.note(Y);
  return Y;
}

/// An activation, fused: its fp32 formula of rule 7, one rounding to F.
float activate_in_format(float x, Activation act, EmulatedFormat f) {
  switch (act) {
    case Activation::relu:
      return x > 0.0f ? x : 0.0f;
    case Activation::gelu: {
      const float t = x * 0.70710678118654752440f;
      return rnd((0.5f * x) * (1.0f + static_cast<float>(std::erf(static_cast<double>(t)))), f);
    }
    case Activation::gelu_tanh: {
      const float u = (x * x) * x;
      const float in = 0.79788456080286535588f * (x + 0.044715f * u);
      return rnd((0.5f * x) * (1.0f + static_cast<float>(std::tanh(static_cast<double>(in)))), f);
    }
    case Activation::gelu_fast: {  // HF's order: x·0.7978845608·(1 + 0.044715·x·x)
      const float s = 1.0f + (0.044715f * x) * x;
      const float in = (x * 0.7978845608f) * s;
      return rnd((0.5f * x) * (1.0f + static_cast<float>(std::tanh(static_cast<double>(in)))), f);
    }
    case Activation::silu:
      return rnd(x / (1.0f + static_cast<float>(std::exp(-static_cast<double>(x)))), f);
  }
  throw std::logic_error("emulate: unknown activation " + to_string(act));
}

/// The rotary angles of rule 8 in F: cos and sin of fl32(p · inv_i), n × r/2
/// (r = rotated_dims(): the whole head, or the first r entries of partial
/// rotary), inv_i = fl32(θ^(−2i/r)), divided in fp32 by a linear factor f ≠ 1
/// (HF divides its fp32 inverse frequencies by f; families.md, Gemma 3).
struct Rotary {
  MatF cos, sin;
};

Rotary rotary_of(const Architecture& a, Index n, EmulatedFormat f, const Architecture::LayerRotary& base) {
  const int dh = a.rotated_dims();
  if (dh < 2 || dh % 2 != 0) throw std::invalid_argument("rotary: head size must be even, got " + std::to_string(dh));
  const Index half = dh / 2;
  Rotary r{MatF(n, half), MatF(n, half)};
  for (Index i = 0; i < half; ++i) {
    auto inv = static_cast<float>(std::pow(base.theta, (-2.0 * static_cast<double>(i)) / dh));
    if (base.linear_factor != 1.0) inv /= static_cast<float>(base.linear_factor);
    for (Index p = 0; p < n; ++p) {
      const float angle = static_cast<float>(p) * inv;
      r.cos(p, i) = rnd(static_cast<float>(std::cos(static_cast<double>(angle))), f);
      r.sin(p, i) = rnd(static_cast<float>(std::sin(static_cast<double>(angle))), f);
    }
  }
  return r;
}

/// Rotates the r columns from `first` of M, row p by position p, rotate-half layout (rule 8);
/// the head's other columns stay.
void rotate_in_format(const Context& c, const Rotary& r, MatF& M, Index first) {
  const Index half = r.cos.cols();
  for (Index i = 0; i < half; ++i)
    for (Index p = 0; p < M.rows(); ++p) {
      const float x = M(p, first + i), y = M(p, first + i + half), co = r.cos(p, i), si = r.sin(p, i);
      M(p, first + i) = rnd(rnd(x * co, c.f) + rnd(-y * si, c.f), c.f);
      M(p, first + i + half) = rnd(rnd(y * co, c.f) + rnd(x * si, c.f), c.f);
    }
}

/// XLNet's sinusoid in F (rule 10): (2n − 1) × d, row r ↔ p = r − (n − 1)
/// (clamped to ±clamp_len when > 0), column k < d/2 sin(angle_k), d/2 + k
/// cos(angle_k), angle_k = fl32((float)p · (float)pow_d(10000, −2k/d)).
MatF sinusoid_of(const Architecture& a, Index n, EmulatedFormat f) {
  const Index d = a.d_model, half = d / 2, rows = 2 * n - 1;
  if (d < 2 || d % 2 != 0) throw std::invalid_argument("xlnet: d_model must be even, got " + std::to_string(d));
  MatF R(rows, d);
  for (Index k = 0; k < half; ++k) {
    const auto freq = static_cast<float>(std::pow(10000.0, (-2.0 * static_cast<double>(k)) / static_cast<double>(d)));
    for (Index r = 0; r < rows; ++r) {
      Index p = r - (n - 1);
      if (a.clamp_len > 0) p = std::max<Index>(-a.clamp_len, std::min<Index>(a.clamp_len, p));
      const float angle = static_cast<float>(p) * freq;
      R(r, k) = rnd(static_cast<float>(std::sin(static_cast<double>(angle))), f);
      R(r, half + k) = rnd(static_cast<float>(std::cos(static_cast<double>(angle))), f);
    }
  }
  return R;
}

/// The scores the query row i sees, keys [first, last) (rules 4, 10–12):
/// a_j = rnd_F(A_ij) from the raw fp32 chain of q_i·k_j; XLNet adds
/// rnd_F(B_i,i−j+n−1) (the position term's chain), T5 its bucket bias
/// T_F[bucket(j − i), h], each sum rounded; then the scale, then the soft
/// cap c·tanh(a/c) rounded at each of its three steps. Written to a[j].
struct ScoreTerms {
  const MatF* B = nullptr;         ///< XLNet: raw chains (q_i + r_r)·(R W_R)_k, n × (2n − 1)
  const MatF* pos_bias = nullptr;  ///< T5: the bucket table in F, buckets × H
  Index head = 0;
  float scale = 1.0f;
  std::optional<float> cap;
};

void score_row(const Context& c, const Architecture& a, const MatF& A, const ScoreTerms& s, Index i, Index first,
               Index last, float* out) {
  const Index n = A.rows();
  for (Index j = first; j < last; ++j) {
    float x = rnd(A(i, j), c.f);
    if (s.B) x = rnd(x + rnd((*s.B)(i, detail::relative_column(i, j, n)), c.f), c.f);
    if (s.pos_bias)
      x = rnd(x + detail::bucket_bias(a, *s.pos_bias, i, j, s.head), c.f);
    x = rnd(x * s.scale, c.f);
    if (s.cap) {
      const float t = rnd(x / *s.cap, c.f);
      x = rnd(*s.cap * rnd(static_cast<float>(std::tanh(static_cast<double>(t))), c.f), c.f);
    }
    out[j] = x;
  }
}

/// P's row i from the scores a[first..last) (rule 5), the fused softmax;
/// the keys outside [first, last) exactly 0 (never formed).
void softmax_row(Context& c, Index i, Index first, Index last, MatF& P, float* a) {
  c.watch.note(a + first, static_cast<std::size_t>(last - first));
  float m = a[first];
  for (Index j = first + 1; j < last; ++j)
    if (a[j] > m) m = a[j];
  float sum = 0.0f;
  for (Index j = first; j < last; ++j) {
    a[j] = static_cast<float>(std::exp(static_cast<double>(a[j] - m)));
    sum += a[j];
  }
  for (Index j = 0; j < first; ++j) P(i, j) = 0.0f;
  for (Index j = first; j < last; ++j) P(i, j) = rnd(a[j] / sum, c.f);
  for (Index j = last; j < P.cols(); ++j) P(i, j) = 0.0f;
}

template <class Dst, class Src> void round_into(Dst&& dst, const Src& src, EmulatedFormat f) {
  for (Index j = 0; j < src.cols(); ++j)
    for (Index i = 0; i < src.rows(); ++i) dst(i, j) = rnd(static_cast<double>(src(i, j)), f);
}

/// The matrices of one layer to round (rule 1), cut into pieces of about
/// 2^16 entries (whole columns) that run on product_threads() threads.
class WeightRounding {
 public:
  explicit WeightRounding(EmulatedFormat f) : f_(f) {}
  /// dst (rows × cols, leading dimension ldd) ← rnd_F(src) (leading dimension lds).
  void add(float* dst, Index ldd, const double* src, Index lds, Index rows, Index cols) {
    const Index step = std::max<Index>(1, (Index(1) << 16) / std::max<Index>(rows, 1));
    for (Index j = 0; j < cols; j += step) pieces_.push_back({dst + j * ldd, ldd, src + j * lds, lds, rows,
                                                             std::min(step, cols - j)});
  }
  /// The block of dst starting at entry `offset` ← rnd_F(src).
  void add(MatF& dst, Index offset, const MatrixXd& src) {
    add(dst.data() + offset, dst.rows(), src.data(), src.rows(), src.rows(), src.cols());
  }
  void add(RowF& dst, const VectorXd& src) {
    dst.resize(src.size());
    add(dst.data(), 1, src.data(), 1, 1, src.size());
  }
  void run() {
    detail::run_blocks(pieces_.size(), product_threads(), [&](std::size_t b) {
      EmulationFpScope::set();  // the float conversions of subnormal values: no flush to zero
      const Piece& p = pieces_[b];
      for (Index j = 0; j < p.cols; ++j)
        for (Index i = 0; i < p.rows; ++i) p.dst[i + j * p.ldd] = rnd(p.src[i + j * p.lds], f_);
    });
    pieces_.clear();
  }

 private:
  struct Piece {
    float* dst;
    Index ldd;
    const double* src;
    Index lds, rows, cols;
  };
  EmulatedFormat f_;
  std::vector<Piece> pieces_;
};

/// A layer's weights in F, heads stacked as forward_impl.hpp's PackedLayer.
struct LayerF {
  MatF WQ, WK, WV, WO, W1, W2, Wgate;
  RowF bQ, bK, bV, bO, b1, b2, ln1_g, ln1_b, ln2_g, ln2_b;
  MatF WR;          ///< XLNet: W_R of every head, d × (H·d_qk)
  RowF rw, rr;      ///< XLNet: r_w, r_r of every head (H·d_qk)
  MatF pos_bias;    ///< T5: the bucket table, buckets × H
  RowF ln3_g, ln4_g, zero;  ///< Gemma 2's sandwich gains; `zero` their (absent) bias
  RowF q_norm, k_norm, zero_head;  ///< the query/key norms' gains (d_qk); `zero_head` their (absent) bias
};

/// Rounds the weights layer `w` uses under `variant` (rule 1) into `p`.
void round_layer(Context& c, const Architecture& a, const Variant& variant, const LayerWeights& w, LayerF& p) {
  const Index d = a.d_model, H = a.heads, dq = a.d_qk, dv = a.d_v;
  WeightRounding r(c.f);
  p.WQ.resize(d, H * dq);
  p.WK.resize(d, H * dq);
  p.WV.resize(d, H * dv);
  p.WO.resize(H * dv, d);
  p.bQ.resize(H * dq);
  p.bK.resize(H * dq);
  p.bV.resize(H * dv);
  for (Index h = 0; h < H; ++h) {
    const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
    r.add(p.WQ, h * dq * d, hw.W_Q);  // columns h·d_qk onwards
    r.add(p.WK, h * dq * d, hw.W_K);
    r.add(p.WV, h * dv * d, hw.W_V);
    r.add(p.WO, h * dv, hw.W_O);  // rows h·d_v onwards
    r.add(p.bQ.data() + h * dq, 1, hw.b_Q.data(), 1, 1, dq);
    r.add(p.bK.data() + h * dq, 1, hw.b_K.data(), 1, 1, dq);
    r.add(p.bV.data() + h * dv, 1, hw.b_V.data(), 1, 1, dv);
  }
  r.add(p.bO, w.b_O);
  if (a.xlnet_relative) {
    p.WR.resize(d, H * dq);
    p.rw.resize(H * dq);
    p.rr.resize(H * dq);
    for (Index h = 0; h < H; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      r.add(p.WR, h * dq * d, hw.W_R);
      r.add(p.rw.data() + h * dq, 1, hw.r_w.data(), 1, 1, dq);
      r.add(p.rr.data() + h * dq, 1, hw.r_r.data(), 1, 1, dq);
    }
  }
  if (a.rel_buckets > 0) {
    p.pos_bias.resize(w.pos_bias.rows(), w.pos_bias.cols());
    r.add(p.pos_bias, 0, w.pos_bias);
  }
  const bool mlp = variant.mlp != MlpKind::none, norms = variant.layernorm != LayerNormKind::none;
  if (mlp) {
    p.W1.resize(w.W_1.rows(), w.W_1.cols());
    p.W2.resize(w.W_2.rows(), w.W_2.cols());
    p.Wgate.resize(w.W_gate.rows(), w.W_gate.cols());  // 0 × 0 without a gate
    r.add(p.W1, 0, w.W_1);
    r.add(p.W2, 0, w.W_2);
    r.add(p.Wgate, 0, w.W_gate);
    r.add(p.b1, w.b_1);
    r.add(p.b2, w.b_2);
  }
  if (norms)
    for (auto [dst, src] : {std::pair{&p.ln1_g, &w.ln1_g}, {&p.ln1_b, &w.ln1_b}, {&p.ln2_g, &w.ln2_g},
                            {&p.ln2_b, &w.ln2_b}})
      r.add(*dst, *src);
  const bool sandwich = a.sandwich_norms && variant.layernorm == LayerNormKind::pre;
  if (sandwich) {
    r.add(p.ln3_g, w.ln3_g);
    r.add(p.ln4_g, w.ln4_g);
    p.zero = RowF::Zero(d);
  }
  if (a.query_key_norm) {
    r.add(p.q_norm, w.q_norm);
    r.add(p.k_norm, w.k_norm);
    p.zero_head = RowF::Zero(a.d_qk);
  }
  r.run();
  for (const MatF* M : {&p.WQ, &p.WK, &p.WV, &p.WO}) c.watch.note(*M);
  std::vector<const RowF*> rows{&p.bQ, &p.bK, &p.bV, &p.bO};
  if (mlp) {
    for (const MatF* M : {&p.W1, &p.W2, &p.Wgate}) c.watch.note(*M);
    rows.insert(rows.end(), {&p.b1, &p.b2});
  }
  if (norms) rows.insert(rows.end(), {&p.ln1_g, &p.ln1_b, &p.ln2_g, &p.ln2_b});
  if (sandwich) rows.insert(rows.end(), {&p.ln3_g, &p.ln4_g});
  if (a.query_key_norm) rows.insert(rows.end(), {&p.q_norm, &p.k_norm});
  if (a.xlnet_relative) {
    c.watch.note(p.WR);
    rows.insert(rows.end(), {&p.rw, &p.rr});
  }
  if (a.rel_buckets > 0) c.watch.note(p.pos_bias);
  for (const RowF* v : rows) c.watch.note(v->data(), static_cast<std::size_t>(v->size()));
}

/// What a pass computes once from n and every layer reads: the rotary
/// angles (rule 8) and XLNet's sinusoid (rule 10), in F.
struct Positions {
  Index n = 0;  ///< the tokens
  std::vector<Rotary> rotary;          ///< rotary models: one per distinct (base, factor), detail::rotary_plan
  std::vector<std::size_t> rotary_of;  ///< layer l's table (from 0)
  std::optional<MatF> sinusoid;
};

/// The emulated format's arithmetic for detail::layer_map, detail::attention
/// and detail::mlp (compute/layer_impl.hpp): every operation in F as math.md
/// §9 rounds it (rules 2–8, 10–12), each sub-layer watched under its name
/// for the overflow report.
struct EmulatedLayer {
  using Value = MatF;
  Context& c;
  EmulatedTrace& t;
  int l;  ///< the layer, from 1
  const Architecture& a;
  const LayerF& w;
  MaskKind mask;
  Index window;
  const Positions& pos;
  std::vector<Matrix<double>>* P;

  template <class Step> auto watched(const char* op, Step&& step) {
    c.watch.begin(l, op);
    if constexpr (std::is_void_v<decltype(step())>) {
      step();
      c.watch.end(t);
    } else {
      auto result = step();
      c.watch.end(t);
      return result;
    }
  }
  MatF attention(const MatF& X) { return watched("attention", [&] { return detail::attention(*this, a, X); }); }
  MatF mlp(const MatF& Z) { return watched("MLP", [&] { return detail::mlp(*this, w.Wgate.size() > 0, Z); }); }
  MatF norm(const MatF& X, detail::NormAt at) {
    const RowF* g = &w.ln1_g;
    const RowF* b = &w.ln1_b;
    switch (at) {
      case detail::NormAt::ln1:
        break;
      case detail::NormAt::ln2:
        g = &w.ln2_g, b = &w.ln2_b;
        break;
      case detail::NormAt::ln3:
        g = &w.ln3_g, b = &w.zero;
        break;
      case detail::NormAt::ln4:
        g = &w.ln4_g, b = &w.zero;
        break;
      case detail::NormAt::query:
        g = &w.q_norm, b = &w.zero_head;
        break;
      case detail::NormAt::key:
        g = &w.k_norm, b = &w.zero_head;
        break;
    }
    const detail::NormForm form = detail::norm_form(a, at);
    // The query/key norms are inside the attention, watched as a whole.
    if (at == detail::NormAt::query || at == detail::NormAt::key) return norm_in_format(c, form, X, *g, *b);
    return watched(form.kind == NormKind::rms ? "RMSNorm" : "LayerNorm",
                   [&] { return norm_in_format(c, form, X, *g, *b); });
  }
  void add(MatF& Y, const MatF& X) {
    watched("residual", [&] { add_in_format(c, Y, X); });
  }

  /// X W in F, then the bias (rules 2, 3).
  MatF project(const MatF& X, detail::Projection which) {
    MatF out = matmul(c, X, *detail::of<const MatF*>(which, {&w.WQ, &w.WK, &w.WV, &w.WO, &w.WR, &w.W1, &w.Wgate, &w.W2}));
    const RowF* b = detail::of<const RowF*>(which, {&w.bQ, &w.bK, &w.bV, &w.bO, nullptr, &w.b1, nullptr, &w.b2});
    if (b) add_row(c, out, *b);
    return out;
  }
  /// Every head's rotated columns (rule 8).
  void rotate(MatF& M) {
    const Rotary& table = pos.rotary.at(pos.rotary_of.at(static_cast<std::size_t>(l - 1)));
    for (Index h = 0; h < a.heads; ++h) rotate_in_format(c, table, M, h * a.d_qk);
    c.watch.note(M);
  }
  MatF offset(const MatF& Q, detail::QueryOffset o) {
    MatF out = Q;
    add_row(c, out, o == detail::QueryOffset::content ? w.rw : w.rr);
    return out;
  }
  MatF relative_keys() {
    if (!pos.sinusoid || pos.sinusoid->rows() != 2 * pos.n - 1)
      throw std::logic_error("emulate: XLNet's sinusoid is missing or of another length");
    return matmul(c, *pos.sinusoid, w.WR);
  }
  static MatF columns(const MatF& M, Index first, Index count) { return M.middleCols(first, count); }
  /// A Bᵀ as raw fp32 chains: the scores round them (rule 4, score_row).
  MatF times_nt(const MatF& A, const MatF& B) const {
    MatF C(A.rows(), B.rows());
    detail::sgemm(c.isa, A.rows(), B.rows(), A.cols(), A.data(), A.rows(), B.data(), B.rows(), true, C.data(),
                  A.rows());
    return C;
  }
  /// P V in F (rule 2), on this head's thread.
  MatF times(const MatF& A, const MatF& B) const {
    MatF C(A.rows(), B.cols());
    matmul_block(c, A.rows(), B.cols(), A.cols(), A.data(), A.rows(), B.data(), B.rows(), false, C.data(), A.rows());
    return C;
  }
  /// P's rows (rules 4, 5, 10–12): each row's scores over the keys the mask
  /// and window leave, then the fused softmax.
  MatF weights(const MatF& A, const MatF* B, Index h) {
    const Index n = A.rows();
    ScoreTerms terms;
    terms.head = h;
    double scale = 1.0 / std::sqrt(static_cast<double>(a.d_qk));
    if (a.score_scale_base) scale = *a.score_scale_base == 1.0 ? 1.0 : 1.0 / std::sqrt(*a.score_scale_base);
    terms.scale = static_cast<float>(scale);
    if (a.softcap) terms.cap = static_cast<float>(*a.softcap);
    if (a.rel_buckets > 0) terms.pos_bias = &w.pos_bias;
    terms.B = B;
    MatF Ph(n, n);
    std::vector<float> row(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i) {
      const auto [first, last] = detail::visible_keys(i, n, mask, window);
      score_row(c, a, A, terms, i, first, last, row.data());
      softmax_row(c, i, first, last, Ph, row.data());
    }
    c.watch.note(Ph);
    return Ph;
  }
  MatF side_by_side(std::vector<MatF>& blocks, Index width) {
    MatF out(blocks.front().rows(), static_cast<Index>(blocks.size()) * width);
    for (std::size_t k = 0; k < blocks.size(); ++k) out.middleCols(static_cast<Index>(k) * width, width) = blocks[k];
    c.watch.note(out);
    return out;
  }
  bool recording() const { return P != nullptr; }
  void record(std::vector<MatF>& Ps) const {
    for (const MatF& Ph : Ps) P->push_back(Ph.cast<double>());
  }
  /// Heads in parallel where it pays; every head in F's floating-point environment.
  template <class F> void for_heads(Index H, F&& f) const {
    const double n = double(pos.n);
    const double work = double(H) * n * n * double(a.d_qk + a.d_v);
    detail::run_blocks(static_cast<std::size_t>(H), work >= double(1 << 20) ? product_threads() : 1,
                       [&](std::size_t h) {
                         EmulationFpScope::set();
                         check_interrupt();
                         f(static_cast<Index>(h));
                       });
  }
  /// act on every entry, fused (rule 7).
  void activate(MatF& Hid) const {
    float* h = Hid.data();
    for (Index i = 0; i < Hid.size(); ++i) h[i] = activate_in_format(h[i], a.activation, c.f);
    c.watch.note(Hid);
  }
  /// Hid ← rnd_F(act(G) · Hid) (rule 7).
  void gate(MatF& Hid, const MatF& G) const {
    float* h = Hid.data();
    const float* g = G.data();
    for (Index i = 0; i < Hid.size(); ++i) h[i] = rnd(activate_in_format(g[i], a.activation, c.f) * h[i], c.f);
    c.watch.note(Hid);
  }
};

/// Whether every entry of v is zero (RMSNorm layers of the Llama family carry zero biases).
bool all_zero(const VectorXd& v) { return (v.array() == 0.0).all(); }

}  // namespace

std::string to_string(EmulatedFormat f) { return info_of(f).name; }

EmulatedFormat parse_emulated_format(const std::string& text) {
  for (const EmulatedFormat f : {EmulatedFormat::fp32, EmulatedFormat::bf16, EmulatedFormat::fp16})
    if (text == to_string(f)) return f;
  throw std::invalid_argument("emulate: '" + text + "' is not one of fp32, bf16, fp16");
}

double round_to_format(double x, EmulatedFormat f) { return rnd(x, f); }

float round_to_format(float x, EmulatedFormat f) { return rnd(x, f); }

Matrix<double> emulated_product(const Matrix<double>& A, const Matrix<double>& B, EmulatedFormat f) {
  const EmulationFpScope fp;
  Context c{f, OverflowWatch(f), detail::double_isa()};
  MatF Af(A.rows(), A.cols()), Bf(B.rows(), B.cols());
  round_into(Af, A, f);
  round_into(Bf, B, f);
  return matmul(c, Af, Bf).cast<double>();
}

EmulatedTrace emulate_forward(const Model& model, const Variant& variant, const Matrix<double>& X0, EmulatedFormat f,
                              bool record_attention) {
  const Architecture& a = model.arch();
  detail::check_input(model, variant, X0.rows(), X0.cols());
  const auto n = static_cast<std::uint64_t>(X0.rows());
  require_memory(mul_sat(forward_scalar_count(a, n, variant.mlp != MlpKind::none, record_attention), 8),
                 model.source() + ": emulated forward pass",
                 describe_forward_estimate(a, n, record_attention, false, 53));

  const EmulationFpScope fp;
  Context c{f, OverflowWatch(f), detail::double_isa()};
  EmulatedTrace t;
  t.format = f;
  t.X.reserve(static_cast<std::size_t>(a.layers) + 1);
  if (record_attention) t.P.resize(static_cast<std::size_t>(a.layers));
  MatF X(X0.rows(), X0.cols());
  c.watch.begin(0, "input");
  round_into(X, X0, f);
  c.watch.note(X);
  c.watch.end(t);
  t.X.push_back(X.cast<double>());
  Positions pos;
  pos.n = X0.rows();
  const detail::RotaryPlan plan = detail::rotary_plan(a);
  for (const Architecture::LayerRotary& r : plan.tables) pos.rotary.push_back(rotary_of(a, X0.rows(), f, r));
  pos.rotary_of = plan.of_layer;
  if (a.xlnet_relative) pos.sinusoid = sinusoid_of(a, X0.rows(), f);
  LayerF w;
  for (int l = 0; l < a.layers; ++l) {
    check_interrupt();
    if (l == 0 || !a.shared_layers) {  // shared layers: rounded once
      const std::shared_ptr<const LayerWeights> held = model.layer_for_pass(l);
      if (a.norm == NormKind::rms && variant.layernorm != LayerNormKind::none &&
          !(all_zero(held->ln1_b) && all_zero(held->ln2_b)))
        throw std::invalid_argument(model.source() + ": emulate: an RMSNorm bias (layer " + std::to_string(l + 1) +
                                    ") is not emulated; math.md §9's RMSNorm has gains only");
      c.watch.begin(l + 1, "weights");
      round_layer(c, a, variant, *held, w);
      c.watch.end(t);
    }
    std::vector<Matrix<double>>* P = record_attention ? &t.P[static_cast<std::size_t>(l)] : nullptr;
    EmulatedLayer ar{c, t, l + 1, a, w, variant.mask, a.window_applies(l) ? a.attention_window : 0, pos, P};
    X = detail::layer_map(ar, a, variant, X);
    t.X.push_back(X.cast<double>());
  }
  return t;
}

}  // namespace sanpath

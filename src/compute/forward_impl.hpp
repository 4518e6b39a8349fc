#pragma once
#include "sanpath/compute/forward.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/core/resources.hpp"
#include "sanpath/model/random.hpp"  // Rng: the perturbation's signs
#include "core/linalg_impl.hpp"  // detail::run_blocks
#include "compute/layer_impl.hpp"  // layer_map over an arithmetic


#include <cfenv>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace sanpath {

template <class S> S decimal_constant(double x) {
  if constexpr (is_mpfr_v<S>) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, x);  // shortest round trip
    return S(std::string(buf, r.ptr));
  } else {
    return x;
  }
}

template <class S> S pi_constant() {
  if constexpr (is_mpfr_v<S>) {
    S pi;
    mpfr_const_pi(pi.backend().data(), MPFR_RNDN);
    return pi;
  } else {
    return 3.141592653589793238462643383279502884;
  }
}

/// A double libm result (exp, erf, tanh) moved `ulps` units in the current
/// rounding direction. libm's functions are not correctly rounded and their
/// error hardly depends on the rounding mode, so without this the directed
/// passes of the rounding check (analysis/double_check.hpp) would repeat the
/// same function error and miss it; in round-to-nearest y is unchanged.
/// A finite nonzero y is stepped on its bit pattern (what std::nextafter
/// returns, without a library call per element); 0, infinities and NaN go
/// through std::nextafter. `mode` is std::fegetround()'s, read once per
/// matrix by the callers (glibc's fegetround reads the x87 control word: read
/// per element it was 5 % of a double pass).
inline double toward_rounding(double y, int ulps, int mode) {
  if (mode != FE_UPWARD && mode != FE_DOWNWARD) return y;
  const bool up = mode == FE_UPWARD;
  for (int i = 0; i < ulps; ++i) {
    if (y == 0 || !std::isfinite(y)) {
      y = std::nextafter(y, up ? HUGE_VAL : -HUGE_VAL);
      continue;
    }
    std::uint64_t u;
    std::memcpy(&u, &y, sizeof u);
    if ((y > 0) == up)
      ++u;  // away from zero (the largest finite double steps to infinity, as nextafter does)
    else
      --u;  // toward zero (the smallest subnormal steps to a zero of its sign, as nextafter does)
    std::memcpy(&y, &u, sizeof y);
  }
  return y;
}

template <class S> Matrix<S> row_softmax(const Matrix<S>& A, MaskKind mask, Eigen::Index window) {
  using std::exp;
  const Eigen::Index n = A.rows(), m = A.cols();
  Matrix<S> P(n, m);
  const int mode = std::fegetround();
  for (Eigen::Index i = 0; i < n; ++i) {
    check_interrupt();  // a row costs n exp() calls: seconds at the top tiers
    const auto [first, last] = detail::visible_keys(i, m, mask, window);
    for (Eigen::Index j = 0; j < first; ++j) P(i, j) = S(0);
    S mx = A(i, first);
    for (Eigen::Index j = first + 1; j < last; ++j)
      if (A(i, j) > mx) mx = A(i, j);
    S sum(0);
    for (Eigen::Index j = first; j < last; ++j) {
      if constexpr (is_mpfr_v<S>) {  // in place: no temporaries (same roundings)
        mpfr_ptr p = P(i, j).backend().data();
        mpfr_sub(p, A(i, j).backend().data(), mx.backend().data(), MPFR_RNDN);
        mpfr_exp(p, p, MPFR_RNDN);
      } else {
        P(i, j) = toward_rounding(exp(S(A(i, j) - mx)), 1, mode);  // glibc exp: < 1 ulp
      }
      sum += P(i, j);
    }
    for (Eigen::Index j = first; j < last; ++j) P(i, j) /= sum;
    for (Eigen::Index j = last; j < m; ++j) P(i, j) = S(0);
  }
  return P;
}

template <class S> Matrix<S> layer_norm(const Matrix<S>& X, const VectorXd& gain, const VectorXd& bias, double eps) {
  using std::sqrt;
  const Eigen::Index n = X.rows(), d = X.cols();
  const S e = decimal_constant<S>(eps);
  const S dd = S(static_cast<double>(d));
  Matrix<S> Y(n, d);
  for (Eigen::Index i = 0; i < n; ++i) {
    S mean(0);
    for (Eigen::Index j = 0; j < d; ++j) mean += X(i, j);
    mean /= dd;
    S var(0);
    for (Eigen::Index j = 0; j < d; ++j) {
      const S c = X(i, j) - mean;
      var += c * c;
    }
    var /= dd;
    const S inv = S(1) / sqrt(S(var + e));
    for (Eigen::Index j = 0; j < d; ++j) Y(i, j) = (X(i, j) - mean) * inv * S(gain(j)) + S(bias(j));
  }
  return Y;
}

template <class S>
Matrix<S> rms_norm(const Matrix<S>& X, const VectorXd& gain, const VectorXd& bias, double eps, bool unit_offset) {
  using std::sqrt;
  const Eigen::Index n = X.rows(), d = X.cols();
  const S e = decimal_constant<S>(eps);
  const S dd = S(static_cast<double>(d));
  RowVector<S> g(d);
  for (Eigen::Index j = 0; j < d; ++j) g(j) = unit_offset ? S(S(1) + S(gain(j))) : S(gain(j));
  Matrix<S> Y(n, d);
  for (Eigen::Index i = 0; i < n; ++i) {
    S ms(0);
    for (Eigen::Index j = 0; j < d; ++j) ms += X(i, j) * X(i, j);
    ms /= dd;
    const S inv = S(1) / sqrt(S(ms + e));
    for (Eigen::Index j = 0; j < d; ++j) Y(i, j) = X(i, j) * inv * g(j) + S(bias(j));
  }
  return Y;
}

template <class S> Matrix<S> xlnet_sinusoid(Eigen::Index n, int d, int clamp_len) {
  using std::pow;
  using std::sin;
  using std::cos;
  if (d < 2 || d % 2 != 0) throw std::invalid_argument("xlnet: d_model must be even, got " + std::to_string(d));
  const Eigen::Index half = d / 2, rows = 2 * n - 1;
  Matrix<S> R(rows, d);
  const S base(10000);
  for (Eigen::Index k = 0; k < half; ++k) {
    const S freq = pow(base, S(S(-2 * static_cast<double>(k)) / S(static_cast<double>(d))));
    for (Eigen::Index r = 0; r < rows; ++r) {
      Eigen::Index p = r - (n - 1);
      if (clamp_len > 0) p = std::max<Eigen::Index>(-clamp_len, std::min<Eigen::Index>(clamp_len, p));
      const S angle = S(static_cast<double>(p)) * freq;
      R(r, k) = sin(angle);
      R(r, half + k) = cos(angle);
    }
  }
  return R;
}

template <class S> RotaryTable<S> rotary_table(Eigen::Index n, int d_h, double theta, double linear_factor) {
  using std::cos;
  using std::pow;
  using std::sin;
  if (d_h < 2 || d_h % 2 != 0) throw std::invalid_argument("rotary: head size must be even, got " + std::to_string(d_h));
  const Eigen::Index half = d_h / 2;
  const S base = decimal_constant<S>(theta);
  const std::optional<S> factor = linear_factor != 1.0 ? std::optional<S>(decimal_constant<S>(linear_factor)) : std::nullopt;
  RotaryTable<S> t;
  t.cos.resize(n, half);
  t.sin.resize(n, half);
  for (Eigen::Index i = 0; i < half; ++i) {
    S freq = pow(base, S(S(-2 * static_cast<double>(i)) / S(static_cast<double>(d_h))));
    if (factor) freq /= *factor;  // linear scaling: positions divided by f (families.md, Gemma 3)
    for (Eigen::Index p = 0; p < n; ++p) {
      const S angle = S(static_cast<double>(p)) * freq;
      t.cos(p, i) = cos(angle);
      t.sin(p, i) = sin(angle);
    }
  }
  return t;
}

template <class S> void apply_rotary(Matrix<S>& M, const RotaryTable<S>& t, Eigen::Index first_col) {
  const Eigen::Index half = t.cos.cols();
  if (M.rows() > t.cos.rows() || first_col < 0 || first_col + 2 * half > M.cols())
    throw std::logic_error("apply_rotary: block outside the matrix or the table");
  for (Eigen::Index i = 0; i < half; ++i)
    for (Eigen::Index p = 0; p < M.rows(); ++p) {
      const S a = M(p, first_col + i), b = M(p, first_col + i + half);
      M(p, first_col + i) = a * t.cos(p, i) - b * t.sin(p, i);
      M(p, first_col + i + half) = b * t.cos(p, i) + a * t.sin(p, i);
    }
}

namespace detail {

/// ForwardOptions::perturb_bits on the input M of layer `layer` (nothing at b = 0, for double or for
/// layer 0, whose input is the model's: data, not a result a run rounded).
template <class S> void perturb_entries(Matrix<S>& M, long bits, int layer) {
  if constexpr (is_mpfr_v<S>) {
    if (bits <= 0 || layer == 0) return;
    Rng signs(static_cast<std::uint64_t>(layer));  // the same signs on every machine, entry by entry
    S step;
    for (Eigen::Index j = 0; j < M.cols(); ++j)
      for (Eigen::Index i = 0; i < M.rows(); ++i) {
        mpfr_ptr x = M(i, j).backend().data();
        mpfr_mul_2si(step.backend().data(), x, -bits, MPFR_RNDN);
        if (signs.next() & 1) mpfr_neg(step.backend().data(), step.backend().data(), MPFR_RNDN);
        mpfr_add(x, x, step.backend().data(), MPFR_RNDN);
      }
  } else {
    (void)M, (void)bits, (void)layer;
  }
}


/// activate() in a rounding mode the caller has read (toward_rounding).
template <class S> S activate(const S& x, Activation act, [[maybe_unused]] int mode) {
  using std::erf;
  using std::exp;
  using std::sqrt;
  using std::tanh;
  switch (act) {
    case Activation::relu:
      return x > 0 ? x : S(0);
    case Activation::gelu: {
      const S inv_sqrt2 = S(1) / sqrt(S(2));
      S e = erf(S(x * inv_sqrt2));
      if constexpr (std::is_same_v<S, double>) e = toward_rounding(e, 2, mode);  // glibc erf: < 3 ulp
      return S(x * (S(1) + e)) / S(2);
    }
    case Activation::gelu_tanh:
    case Activation::gelu_fast: {
      // gelu_fast: HF's literal 0.7978845608 for √(2/π) (families.md).
      const S c = act == Activation::gelu_fast ? decimal_constant<S>(0.7978845608) : S(sqrt(S(2) / pi_constant<S>()));
      const S k = decimal_constant<S>(0.044715);
      S t = tanh(S(c * (x + k * x * x * x)));
      if constexpr (std::is_same_v<S, double>) t = toward_rounding(t, 3, mode);  // glibc tanh: < 5 ulp
      return S(x * (S(1) + t)) / S(2);
    }
    case Activation::silu:
      return x / S(S(1) + exp(S(-x)));
  }
  throw std::logic_error("activate: unknown activation");
}

}  // namespace detail

template <class S> S activate(const S& x, Activation act) { return detail::activate(x, act, std::fegetround()); }

namespace detail {

/// Per-layer weights, heads packed side by side so one product computes
/// every head's Q (resp. K, V): WQ d×(H·d_qk), WO (H·d_v)×d. The matrices
/// stay in double (gemm_weights reads them exactly in any tier); the biases
/// are converted to S.
template <class S> struct PackedLayer {
  MatrixXd WQ, WK, WV, WO;
  RowVector<S> bQ, bK, bV, bO;
  RowVector<S> b1, b2;
  MatrixXd WR;           ///< XLNet: W_R of every head, d×(H·d_qk)
  RowVector<S> rw, rr;   ///< XLNet: r_w, r_r of every head (H·d_qk)
  MatrixXd pos_bias;     ///< T5: bucket table, nb × (heads packed)
  /// A layer read mapped (model/mapped_layer.hpp): the matrices it gives
  /// as views are read there, and the dense ones above are not filled.
  std::shared_ptr<const MappedLayer> mapped;
  /// The view of one matrix, or null where it is dense.
  const MappedMatrix* view(MappedMatrix MappedLayer::*m) const {
    return mapped && (mapped.get()->*m).present() ? &(mapped.get()->*m) : nullptr;
  }
};

/// out = X·W for one of a layer's large matrices: read where it lies when
/// `view` is set (the same bits, core/linalg.hpp), else the dense `W`.
template <class S> void project(const Matrix<S>& X, const MappedMatrix* view, const MatrixXd& W, Matrix<S>& out) {
  if (view) gemm_weights(X, view->view(), out);
  else gemm_weights(X, W, out);
}

/// Projection p's dense matrix and bias in a pass's tables: the attention's
/// packed in `w`, the MLP's matrices in `lw` and its biases in `mlp_w` (the
/// same layer but in a path's sub-network).
template <class S> const MatrixXd& weights_of(const PackedLayer<S>& w, const LayerWeights& lw, Projection p) {
  return *of<const MatrixXd*>(p, {&w.WQ, &w.WK, &w.WV, &w.WO, &w.WR, &lw.W_1, &lw.W_gate, &lw.W_2});
}
template <class S> const RowVector<S>* bias_of(const PackedLayer<S>& w, const PackedLayer<S>& mlp_w, Projection p) {
  return of<const RowVector<S>*>(p, {&w.bQ, &w.bK, &w.bV, &w.bO, nullptr, &mlp_w.b1, nullptr, &mlp_w.b2});
}

/// What a pass computes once from n and shares with every layer: the
/// rotary angles (rotary models) and XLNet's sinusoid (2n−1 rows).
template <class S> struct PositionTables {
  Eigen::Index n = 0;  ///< the tokens
  std::vector<RotaryTable<S>> rotary;  ///< rotary models: one per distinct (base, factor), rotary_plan
  std::vector<std::size_t> rotary_of;  ///< layer l's table
  std::optional<Matrix<S>> sinusoid;
  /// Layer l's rotary table (rotary models).
  const RotaryTable<S>& rotary_at(int l) const { return rotary.at(rotary_of.at(static_cast<std::size_t>(l))); }
  static PositionTables make(const Architecture& a, Eigen::Index n) {
    PositionTables t;
    t.n = n;
    const RotaryPlan plan = rotary_plan(a);
    for (const Architecture::LayerRotary& r : plan.tables)
      t.rotary.push_back(rotary_table<S>(n, a.rotated_dims(), r.theta, r.linear_factor));
    t.rotary_of = plan.of_layer;
    if (a.xlnet_relative) t.sinusoid = xlnet_sinusoid<S>(n, a.d_model, a.clamp_len);
    return t;
  }
};

template <class S> RowVector<S> row_of(const VectorXd& v) { return convert<S>(v.transpose()); }

/// Packs layer `w` into `p`, reusing its storage: a pass packs every layer
/// into one PackedLayer, so that it does not ask the kernel for fresh pages
/// at every layer (above glibc's mmap threshold each new matrix would be
/// fresh pages: 0.5 GiB of them per layer of a Llama-7B).
template <class S> void pack_into(PackedLayer<S>& p, const Architecture& a, const LayerWeights& w, bool with_mlp) {
  const Eigen::Index d = a.d_model, H = a.heads, dq = a.d_qk, dv = a.d_v;
  p.mapped = w.mapped;
  const bool dense_q = !p.view(&MappedLayer::WQ), dense_k = !p.view(&MappedLayer::WK),
             dense_v = !p.view(&MappedLayer::WV), dense_o = !p.view(&MappedLayer::WO);
  if (dense_q) p.WQ.resize(d, H * dq);
  if (dense_k) p.WK.resize(d, H * dq);
  if (dense_v) p.WV.resize(d, H * dv);
  if (dense_o) p.WO.resize(H * dv, d);
  VectorXd bQ(H * dq), bK(H * dq), bV(H * dv);
  for (Eigen::Index h = 0; h < H; ++h) {
    const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
    if (dense_q) p.WQ.middleCols(h * dq, dq) = hw.W_Q;
    if (dense_k) p.WK.middleCols(h * dq, dq) = hw.W_K;
    if (dense_v) p.WV.middleCols(h * dv, dv) = hw.W_V;
    if (dense_o) p.WO.middleRows(h * dv, dv) = hw.W_O;
    bQ.segment(h * dq, dq) = hw.b_Q;
    bK.segment(h * dq, dq) = hw.b_K;
    bV.segment(h * dv, dv) = hw.b_V;
  }
  p.bQ = row_of<S>(bQ);
  p.bK = row_of<S>(bK);
  p.bV = row_of<S>(bV);
  p.bO = row_of<S>(w.b_O);
  if (a.xlnet_relative) {
    const bool dense_r = !p.view(&MappedLayer::WR);
    if (dense_r) p.WR.resize(d, H * dq);
    VectorXd rw(H * dq), rr(H * dq);
    for (Eigen::Index h = 0; h < H; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      if (dense_r) p.WR.middleCols(h * dq, dq) = hw.W_R;
      rw.segment(h * dq, dq) = hw.r_w;
      rr.segment(h * dq, dq) = hw.r_r;
    }
    p.rw = row_of<S>(rw);
    p.rr = row_of<S>(rr);
  }
  if (a.rel_buckets > 0) p.pos_bias = w.pos_bias;
  if (with_mlp) {
    p.b1 = row_of<S>(w.b_1);
    p.b2 = row_of<S>(w.b_2);
  }
}

template <class S> PackedLayer<S> pack(const Architecture& a, const LayerWeights& w, bool with_mlp) {
  PackedLayer<S> p;
  pack_into(p, a, w, with_mlp);
  return p;
}

/// Head h of layer `w` alone, as a one-head PackedLayer (the path
/// sub-networks of rerun.hpp): its projections, biases, position terms and
/// the layer's b_O.
template <class S> PackedLayer<S> pack_head(const Architecture& a, const LayerWeights& w, int h) {
  const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
  PackedLayer<S> p;
  p.WQ = hw.W_Q;  // weights stay in double (PackedLayer)
  p.WK = hw.W_K;
  p.WV = hw.W_V;
  p.WO = hw.W_O;
  p.bQ = row_of<S>(hw.b_Q);
  p.bK = row_of<S>(hw.b_K);
  p.bV = row_of<S>(hw.b_V);
  p.bO = row_of<S>(w.b_O);
  if (a.xlnet_relative) {
    p.WR = hw.W_R;
    p.rw = row_of<S>(hw.r_w);
    p.rr = row_of<S>(hw.r_r);
  }
  if (a.rel_buckets > 0) p.pos_bias = w.pos_bias.col(h);
  return p;
}

template <class S> void add_row(Matrix<S>& M, const RowVector<S>& b) {
  for (Eigen::Index j = 0; j < M.cols(); ++j)
    for (Eigen::Index i = 0; i < M.rows(); ++i) M(i, j) += b(j);
}

/// out = X·W + 1 biasᵀ (project(), then the bias where given).
template <class S>
void project_into(const Matrix<S>& X, const MappedMatrix* view, const MatrixXd& W, Matrix<S>& out,
                  const RowVector<S>* bias) {
  project(X, view, W, out);
  if (bias) add_row(out, *bias);
}

/// The score scale s of math.md §1 (d_qk^(−1/2)) or the family's own
/// (Architecture::score_scale_base), in S.
template <class S> S score_scale(const Architecture& a) {
  using std::sqrt;
  if (a.score_scale_base) {
    if (*a.score_scale_base == 1.0) return S(1);
    return S(1) / sqrt(decimal_constant<S>(*a.score_scale_base));
  }
  return S(1) / sqrt(S(static_cast<double>(a.d_qk)));
}

/// Double gelu_tanh on a whole matrix with Eigen's SIMD exp (tanh has no SIMD
/// form for double): ½x(1 + tanh y) = x / (1 + e^{-2y}), y = √(2/π)(x + 0.044715x³);
/// a few ulp from activate(), and accurate where 1 + tanh y cancels (x ≪ 0).
/// Returns false, doing nothing, for other scalars and activations.
template <class S> bool activate_simd(Matrix<S>& M, Activation act) {
  if constexpr (std::is_same_v<S, double>) {
    if (act == Activation::gelu_tanh || act == Activation::gelu_fast) {
      const double c = -2.0 * (act == Activation::gelu_fast ? 0.7978845608 : std::sqrt(2.0 / pi_constant<double>()));
      auto x = M.array();
      M.array() = x / (1.0 + (c * (x + 0.044715 * x * x * x)).exp());
      if (const int mode = std::fegetround(); mode != FE_TONEAREST)  // Eigen's exp: < 3 ulp
        M = M.unaryExpr([mode](double y) { return toward_rounding(y, 3, mode); });
      return true;
    }
  }
  return false;
}

/// Calls f(i, j) for every entry of a rows×cols matrix, in blocks of 64
/// columns on product_threads() threads when there are many entries. Each
/// entry is computed alone, in the caller's rounding mode: the result does
/// not depend on the thread count.
template <class S, class F> void for_each_entry(Eigen::Index rows, Eigen::Index cols, F&& f) {
  constexpr Eigen::Index width = 64;
  const double work = double(rows) * double(cols) * (is_mpfr_v<S> ? 64.0 : 1.0);
  const auto blocks = static_cast<std::size_t>((cols + width - 1) / width);
  run_blocks(blocks, work >= double(1 << 16) ? product_threads() : 1, [&](std::size_t b) {
    const Eigen::Index first = static_cast<Eigen::Index>(b) * width, last = std::min(cols, first + width);
    for (Eigen::Index j = first; j < last; ++j)
      for (Eigen::Index i = 0; i < rows; ++i) f(i, j);
  });
}

/// A norm of `form` with gain g and bias b (null: none) on every row of X.
template <class S> Matrix<S> norm(const NormForm& form, const Matrix<S>& X, const VectorXd& g, const VectorXd* b) {
  const VectorXd zero = b ? VectorXd() : VectorXd::Zero(g.size());
  const VectorXd& bias = b ? *b : zero;
  return form.kind == NormKind::rms ? rms_norm(X, g, bias, form.eps, form.unit_offset) : layer_norm(X, g, bias, form.eps);
}



/// The window layer l applies (0: none).
inline Eigen::Index window_of(const Architecture& a, int l) { return a.window_applies(l) ? a.attention_window : 0; }

/// The direct pass's arithmetic for layer_impl.hpp's layer_map, attention
/// and mlp: matrices of S over one layer's packed weights (`w` the
/// attention's, `mlp_w` the MLP's: the same but in a path's sub-network,
/// rerun_impl.hpp).
template <class S> struct PointLayer {
  using Value = Matrix<S>;
  const Architecture& a;
  const PackedLayer<S>& w;
  const PackedLayer<S>& mlp_w;
  const LayerWeights& lw;
  const PositionTables<S>& pos;
  int layer;  ///< from 0: its rotary table
  MaskKind mask;
  Eigen::Index window;
  std::vector<Matrix<S>>* P;  ///< the heads' attention matrices are appended here when set

  Value attention(const Value& X) { return detail::attention(*this, a, X); }
  Value mlp(const Value& Z) { return detail::mlp(*this, lw.gated(), Z); }
  Value norm(const Value& X, NormAt at) const {
    const auto [g, b] = norm_parameters(lw, at);
    return detail::norm(norm_form(a, at), X, *g, b);
  }
  static void add(Value& Y, const Value& X) { Y += X; }

  Value project(const Value& X, Projection p) const {
    Value out;
    project_into(X,
                 of<const MappedMatrix*>(p, {w.view(&MappedLayer::WQ), w.view(&MappedLayer::WK), w.view(&MappedLayer::WV),
                                             w.view(&MappedLayer::WO), w.view(&MappedLayer::WR),
                                             mlp_w.view(&MappedLayer::W1), mlp_w.view(&MappedLayer::Wgate),
                                             mlp_w.view(&MappedLayer::W2)}),
                 weights_of(w, lw, p), out, bias_of(w, mlp_w, p));
    return out;
  }
  void rotate(Value& M) const {
    for (Eigen::Index h = 0; h < a.heads; ++h) apply_rotary(M, pos.rotary_at(layer), h * a.d_qk);
  }
  Value offset(const Value& Q, QueryOffset o) const {
    Value out = Q;
    add_row(out, o == QueryOffset::content ? w.rw : w.rr);
    return out;
  }
  Value relative_keys() const {
    if (!pos.sinusoid || pos.sinusoid->rows() != 2 * pos.n - 1)
      throw std::logic_error("attention: XLNet's sinusoid table is missing or of another length");
    return project(*pos.sinusoid, Projection::R);
  }
  static Value columns(const Value& M, Eigen::Index first, Eigen::Index count) { return M.middleCols(first, count); }
  static Value times_nt(const Value& A, const Value& B) {
    Value C;
    gemm_nt(A, B, C);
    return C;
  }
  static Value times(const Value& A, const Value& B) {
    Value C;
    gemm(A, B, C);
    return C;
  }
  /// The logits A (+ XLNet's relative term from B, + T5's bucket bias),
  /// scaled by score_scale(a), soft-capped (Gemma 2), then the masked row softmax.
  Value weights(Value A, const Value* B, Eigen::Index h) const {
    using std::tanh;
    const Eigen::Index n = A.rows();
    if (B)
      for (Eigen::Index j = 0; j < n; ++j)
        for (Eigen::Index i = 0; i < n; ++i) A(i, j) += (*B)(i, relative_column(i, j, n));
    if (a.rel_buckets > 0)
      for (Eigen::Index j = 0; j < n; ++j)
        for (Eigen::Index i = 0; i < n; ++i) A(i, j) += S(bucket_bias(a, w.pos_bias, i, j, h));
    A *= score_scale<S>(a);
    if (a.softcap) {  // c·tanh(A/c)
      const S cap = decimal_constant<S>(*a.softcap);
      const int mode = std::fegetround();
      for (Eigen::Index j = 0; j < n; ++j)
        for (Eigen::Index i = 0; i < n; ++i) {
          S t = tanh(S(A(i, j) / cap));
          if constexpr (std::is_same_v<S, double>) t = toward_rounding(t, 3, mode);
          A(i, j) = cap * t;
        }
    }
    return row_softmax(A, mask, window);
  }
  static Value side_by_side(std::vector<Value>& blocks, Eigen::Index width) {
    Value out(blocks.front().rows(), static_cast<Eigen::Index>(blocks.size()) * width);
    for (std::size_t k = 0; k < blocks.size(); ++k) out.middleCols(static_cast<Eigen::Index>(k) * width, width) = blocks[k];
    return out;
  }
  bool recording() const { return P != nullptr; }
  void record(std::vector<Value>& Ps) const {
    for (auto& Ph : Ps) P->push_back(std::move(Ph));
  }
  /// Heads in parallel (each head's products then run serially): the
  /// softmax exponentials dominate at high precision. Same operations per
  /// head for any thread count.
  template <class F> void for_heads(Eigen::Index H, F&& f) const {
    const double n = double(pos.n);
    const double work = double(H) * n * n * double(a.d_qk + a.d_v) * (is_mpfr_v<S> ? 64.0 : 1.0);
    run_blocks(static_cast<std::size_t>(H), work >= double(1 << 20) ? product_threads() : 1, [&](std::size_t h) {
      check_interrupt();
      f(static_cast<Eigen::Index>(h));
    });
  }
  void activate(Value& Hid) const {
    if (activate_simd(Hid, a.activation)) return;
    const int mode = std::fegetround();
    for_each_entry<S>(Hid.rows(), Hid.cols(), [&](Eigen::Index i, Eigen::Index j) {
      Hid(i, j) = detail::activate(Hid(i, j), a.activation, mode);
    });
  }
  void gate(Value& Hid, const Value& G) const {
    const int mode = std::fegetround();
    for_each_entry<S>(Hid.rows(), Hid.cols(), [&](Eigen::Index i, Eigen::Index j) {
      Hid(i, j) *= detail::activate(G(i, j), a.activation, mode);
    });
  }
};

/// One layer X → X' of `variant` (layer_impl.hpp's layer_map in the direct pass's arithmetic).
template <class S>
Matrix<S> layer_map(const Architecture& a, const Variant& variant, const PackedLayer<S>& w, const LayerWeights& lw,
                    const Matrix<S>& X, std::vector<Matrix<S>>* P, const PositionTables<S>& pos, int layer,
                    Eigen::Index window) {
  PointLayer<S> ar{a, w, w, lw, pos, layer, variant.mask, window, P};
  return layer_map(ar, a, variant, X);
}

/// The key (column) of P with the largest column sum: the one rows attend
/// to most (the centred pass splits P V = 1 V_kᵀ + (P − 1e_kᵀ) V on it).
template <class S> Eigen::Index heaviest_key(const Matrix<S>& P) {
  Eigen::Index k = 0;
  S best(-1);
  for (Eigen::Index j = 0; j < P.cols(); ++j) {
    S col(0);
    for (Eigen::Index i = 0; i < P.rows(); ++i) col += P(i, j);
    if (col > best) {
      best = col;
      k = j;
    }
  }
  return k;
}

}  // namespace detail

template <class S>
ForwardTrace<S> forward(const Model& model, const Variant& variant, const Matrix<S>& X0, const ForwardOptions& options) {
  const Architecture& a = model.arch();
  detail::check_input(model, variant, X0.rows(), X0.cols());
  if constexpr (is_mpfr_v<S>) use_full_mpfr_exponent_range();
  const bool with_mlp = variant.mlp != MlpKind::none;
  // Refuse before allocating anything when the peak memory exceeds the budget.
  const auto n = static_cast<std::uint64_t>(X0.rows());
  require_memory(mul_sat(forward_scalar_count(a, n, with_mlp, options.record_attention),
                         scalar_bytes(is_mpfr_v<S>, precision_bits_v<S>)),
                 model.source() + ": forward pass",
                 describe_forward_estimate(a, n, options.record_attention, is_mpfr_v<S>, precision_bits_v<S>));
  ForwardTrace<S> t;
  t.variant = variant;
  t.X.reserve(static_cast<std::size_t>(a.layers) + 1);
  t.X.push_back(X0);
  if (options.record_attention) t.P.resize(static_cast<std::size_t>(a.layers));
  const detail::PositionTables<S> pos = detail::PositionTables<S>::make(a, X0.rows());
  detail::PackedLayer<S> w;
  for (int l = 0; l < a.layers; ++l) {
    check_interrupt();
    // Read now if streamed; a double pass reads the large matrices where they lie.
    const std::shared_ptr<const LayerWeights> held =
        model.layer_for_pass(l, std::is_same_v<S, double> ? LayerForm::mapped : LayerForm::decoded);
    const LayerWeights& lw = *held;
    detail::pack_into(w, a, lw, with_mlp);
    std::vector<Matrix<S>>* P = options.record_attention ? &t.P[static_cast<std::size_t>(l)] : nullptr;
    detail::perturb_entries(t.X.back(), options.perturb_bits, l);
    t.X.push_back(detail::layer_map(a, variant, w, lw, t.X.back(), P, pos, l, detail::window_of(a, l)));
    if (options.on_layer) options.on_layer(l + 1, a.layers);
  }
  return t;
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_FORWARD(S)                                                                            \
  template sanpath::ForwardTrace<S> sanpath::forward<S>(const sanpath::Model&, const sanpath::Variant&,           \
                                                        const sanpath::Matrix<S>&, const sanpath::ForwardOptions&); \
  template sanpath::Matrix<S> sanpath::row_softmax<S>(const sanpath::Matrix<S>&, sanpath::MaskKind, Eigen::Index); \
  template sanpath::Matrix<S> sanpath::xlnet_sinusoid<S>(Eigen::Index, int, int);                                  \
  template sanpath::Matrix<S> sanpath::layer_norm<S>(const sanpath::Matrix<S>&, const sanpath::VectorXd&,         \
                                                     const sanpath::VectorXd&, double);                           \
  template S sanpath::activate<S>(const S&, sanpath::Activation);                                                 \
  template sanpath::Matrix<S> sanpath::rms_norm<S>(const sanpath::Matrix<S>&, const sanpath::VectorXd&,           \
                                                   const sanpath::VectorXd&, double, bool);                       \
  template sanpath::RotaryTable<S> sanpath::rotary_table<S>(Eigen::Index, int, double, double);                   \
  template void sanpath::apply_rotary<S>(sanpath::Matrix<S>&, const sanpath::RotaryTable<S>&, Eigen::Index);     \
  template S sanpath::decimal_constant<S>(double);                                                                \
  template S sanpath::pi_constant<S>();

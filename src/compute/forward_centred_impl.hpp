#pragma once
/// \file forward_centred_impl.hpp
/// The centred forward pass of math.md §7 (see forward_centred.hpp). Every
/// quantity that is small because R is small is computed from R directly —
/// never as a difference of two numbers of the size of c — so R keeps the
/// relative accuracy of the working precision at any depth.
#include "sanpath/compute/forward_centred.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/core/errors.hpp"
#include "core/special_functions.hpp"  // expm1_of, erf_of, erfc_of
#include "compute/forward_impl.hpp"  // detail::pack, detail::add_row, row_softmax, layer_norm's conventions


#include <cmath>
#include <stdexcept>

namespace sanpath {

template <class S> Matrix<S> CentredTrace<S>::X(int l) const {
  Matrix<S> out = R.at(static_cast<std::size_t>(l));
  detail::add_row(out, c.at(static_cast<std::size_t>(l)));
  return out;
}

namespace centred {

/// X = 1 cᵀ + R.
template <class S> struct Split {
  RowVector<S> c;
  Matrix<S> R;
};

/// Removes the column means of M (n×k) and returns them (1×k).
template <class S> RowVector<S> take_mean(Matrix<S>& M) {
  RowVector<S> m = column_means(M);
  for (Eigen::Index j = 0; j < M.cols(); ++j)
    for (Eigen::Index i = 0; i < M.rows(); ++i) M(i, j) -= m(j);
  return m;
}

/// 1 g(c)ᵀ + Δ → (g(c) + mean Δ, Δ − 1 mean(Δ)ᵀ).
template <class S> Split<S> recentre(RowVector<S> gc, Matrix<S> Delta) {
  gc += take_mean(Delta);
  return {std::move(gc), std::move(Delta)};
}

/// cW = cᵀW and RW = R W in one product of the stacked rows [cᵀ; R]: each
/// entry of a product depends only on its own row and column, so these are
/// bit for bit the two products, with W read into fixed point once.
template <class S>
void times_split(const RowVector<S>& c, const Matrix<S>& R, const MatrixXd& W, Matrix<S>& cW, Matrix<S>& RW) {
  Matrix<S> stacked(R.rows() + 1, R.cols()), both;
  stacked.row(0) = c;
  stacked.bottomRows(R.rows()) = R;
  gemm_weights(stacked, W, both);
  cW = both.topRows(1);
  RW = both.bottomRows(R.rows());
}

/// One head's attention P = rowsoftmax(1vᵀ + S) = Π + E (math.md §7), Π the
/// masked row softmax of v. Rows with max|S_ij| ≤ ½ use e = expm1(S) and
/// s_i = Σ_k Π_ik e_ik, E_ij = Π_ij (e_ij − s_i)/(1 + s_i) and
/// P_ij = Π_ij (1 + e_ij)/(1 + s_i) (no cancellation against 1), with the
/// numerator in math.md §7.1's saturated form (see saturated_numerators);
/// other rows take P from the stable softmax of v + S and E = P − Π.
template <class S> struct HeadAttention {
  Matrix<S> Pi, E;
  Matrix<S> P;  ///< empty unless asked for, under a mask or when a row took the softmax form
  bool all_small = true;  ///< every row took the expm1 form
};

/// |x| > y for y ≥ 0, without forming |x|.
template <class S> bool abs_greater(const S& x, const S& y) {
  if constexpr (is_mpfr_v<S>) {
    return mpfr_cmpabs(x.backend().data(), y.backend().data()) > 0;
  } else {
    return std::abs(x) > y;
  }
}

/// e_j − Σ_k π_k e_k for first ≤ j < last (the keys the row sees), written into num, without subtracting
/// the dominant term (math.md §7.1 "Saturated rows"): with m the key of
/// largest π, t = Σ_{k≠m} π_k (e_m − e_k) and e_j − Σ_k π_k e_k =
/// (e_j − e_m) + t (num_m = t), since 1 − π_m = Σ_{k≠m} π_k. Written as
/// e_j − s, the sum s holds π_m e_m, and where π_m rounds to 1 (a row whose
/// attention sits on one key, π_m = 1 − 10⁻¹⁸⁹) every tier below some 630
/// bits returns the same wrong numerator, 0 at j = m.
template <class S, class Pi>
void saturated_numerators(const Pi& pi, const std::vector<S>& e, Eigen::Index first, Eigen::Index last,
                          std::vector<S>& num) {
  Eigen::Index m = first;
  for (Eigen::Index j = first + 1; j < last; ++j)
    if (pi(j) > pi(m)) m = j;
  const S& em = e[static_cast<std::size_t>(m)];
  S t(0), d;
  for (Eigen::Index k = first; k < last; ++k) {
    if (k == m) continue;
    if constexpr (is_mpfr_v<S>) {  // in place: no temporary number per operation
      mpfr_sub(d.backend().data(), em.backend().data(), e[static_cast<std::size_t>(k)].backend().data(), MPFR_RNDN);
      mpfr_mul(d.backend().data(), d.backend().data(), pi(k).backend().data(), MPFR_RNDN);
      mpfr_add(t.backend().data(), t.backend().data(), d.backend().data(), MPFR_RNDN);
    } else {
      t += pi(k) * S(em - e[static_cast<std::size_t>(k)]);
    }
  }
  for (Eigen::Index j = first; j < last; ++j) {
    S& out = num[static_cast<std::size_t>(j)];
    if (j == m) {
      out = t;
    } else if constexpr (is_mpfr_v<S>) {
      mpfr_sub(out.backend().data(), e[static_cast<std::size_t>(j)].backend().data(), em.backend().data(), MPFR_RNDN);
      mpfr_add(out.backend().data(), out.backend().data(), t.backend().data(), MPFR_RNDN);
    } else {
      out = S(e[static_cast<std::size_t>(j)] - em) + t;
    }
  }
}

/// P = Π + E for one head from Π = rowsoftmax(A⁰ + A¹) (masked, n×n), the
/// second-order logits Sm and `logit(i, j)` = (A⁰ + A¹)_ij up to terms
/// constant along row i (read only on rows with some |S_ij| > ½). `rows_differ`:
/// Π's rows are not all one row (a mask, positions), so P is formed for the
/// caller's P − 1e_kᵀ.
template <class S, class Logit>
HeadAttention<S> head_attention(Matrix<S> Pi_in, const Logit& logit, const Matrix<S>& Sm, MaskKind mask,
                                Eigen::Index window, bool rows_differ, bool want_P) {
  using std::abs;
  const Eigen::Index n = Sm.rows();
  HeadAttention<S> out;
  out.Pi = std::move(Pi_in);
  const S half = S(1) / S(2);
  // P is read (attention()'s second form) where Π's rows differ or some row has
  // |S_ij| > ½, and recorded when asked; otherwise only Π and E are.
  bool need_P = rows_differ || want_P;
  for (Eigen::Index j = 0; j < n && !need_P; ++j)
    for (Eigen::Index i = 0; i < n && !need_P; ++i) need_P = abs_greater(Sm(i, j), half);
  out.E = Matrix<S>::Zero(n, n);
  if (need_P) out.P = Matrix<S>::Zero(n, n);
  const Matrix<S>& Pi = out.Pi;
  std::vector<S> e(static_cast<std::size_t>(n)), num(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto [first, last] = detail::visible_keys(i, n, mask, window);
    bool small = true;
    for (Eigen::Index j = first; j < last && small; ++j) small = !abs_greater(Sm(i, j), half);
    if (small) {
      const auto pi = [&](Eigen::Index j) -> const S& { return Pi(i, j); };
      if constexpr (is_mpfr_v<S>) {
        // Each operation in place: the same correctly rounded results as the
        // double branch's expressions, without a temporary number per operation.
        S s(0), t, inv, pij;
        for (Eigen::Index j = first; j < last; ++j) {
          mpfr_ptr ej = e[static_cast<std::size_t>(j)].backend().data();
          mpfr_expm1(ej, Sm(i, j).backend().data(), MPFR_RNDN);
          mpfr_mul(t.backend().data(), Pi(i, j).backend().data(), ej, MPFR_RNDN);
          mpfr_add(s.backend().data(), s.backend().data(), t.backend().data(), MPFR_RNDN);
        }
        saturated_numerators(pi, e, first, last, num);
        mpfr_add_ui(t.backend().data(), s.backend().data(), 1, MPFR_RNDN);
        mpfr_ui_div(inv.backend().data(), 1, t.backend().data(), MPFR_RNDN);
        for (Eigen::Index j = first; j < last; ++j) {
          mpfr_mul(pij.backend().data(), Pi(i, j).backend().data(), inv.backend().data(), MPFR_RNDN);
          mpfr_mul(out.E(i, j).backend().data(), pij.backend().data(), num[static_cast<std::size_t>(j)].backend().data(),
                   MPFR_RNDN);
          if (need_P) {
            mpfr_add_ui(t.backend().data(), e[static_cast<std::size_t>(j)].backend().data(), 1, MPFR_RNDN);
            mpfr_mul(out.P(i, j).backend().data(), pij.backend().data(), t.backend().data(), MPFR_RNDN);
          }
        }
      } else {
        S s(0);
        for (Eigen::Index j = first; j < last; ++j) {
          e[static_cast<std::size_t>(j)] = expm1_of(Sm(i, j));
          s += Pi(i, j) * e[static_cast<std::size_t>(j)];
        }
        saturated_numerators(pi, e, first, last, num);
        const S inv = S(1) / S(S(1) + s);
        for (Eigen::Index j = first; j < last; ++j) {
          const S pij = Pi(i, j) * inv;
          out.E(i, j) = pij * num[static_cast<std::size_t>(j)];
          if (need_P) out.P(i, j) = pij * S(S(1) + e[static_cast<std::size_t>(j)]);
        }
      }
    } else {
      out.all_small = false;
      Matrix<S> logits(1, last - first);
      for (Eigen::Index j = first; j < last; ++j) logits(0, j - first) = logit(i, j) + Sm(i, j);
      const Matrix<S> P = row_softmax(logits, MaskKind::none);
      for (Eigen::Index j = first; j < last; ++j) {
        out.P(i, j) = P(0, j - first);
        out.E(i, j) = P(0, j - first) - Pi(i, j);
      }
    }
  }
  return out;
}

/// tanh y1 − tanh y0 (dy = y1 − y0, given to its own accuracy) without
/// cancellation: sinh(dy) sech y1 sech y0, written with exponentials of
/// non-positive arguments as 2 e^{−2m}(−expm1(−2|dy|)) / ((1 + e^{−2|y1|})(1 + e^{−2|y0|})),
/// m = min(|y0|, |y1|) where y0 and y1 have one sign, else 0.
template <class S> S tanh_difference(const S& y0, const S& y1, const S& dy) {
  using std::abs;
  using std::exp;
  using std::min;
  const S m = (y0 >= 0) == (y1 >= 0) ? S(min(abs(y0), abs(y1))) : S(0);
  S dt = S(2) * exp(S(-2 * m)) * S(-expm1_of(S(-2 * abs(dy)))) /
         S(S(S(1) + exp(S(-2 * abs(y1)))) * S(S(1) + exp(S(-2 * abs(y0)))));
  return dy < 0 ? S(-dt) : dt;
}

/// tanh u − u without cancellation: (sinh u − u cosh u)/cosh u with
/// sinh u − u cosh u = −Σ_{k≥1} 2k u^{2k+1}/(2k+1)! (terms of one sign) for |u| ≤ 1.
template <class S> S tanh_minus_identity(const S& u) {
  using std::abs;
  using std::cosh;
  using std::tanh;
  if (abs(u) > S(1)) return tanh(u) - u;
  const S u2 = u * u, eps = std::numeric_limits<S>::epsilon();
  S term = u, sum(0);  // term = u^{2k+1}/(2k+1)!
  for (int k = 1; k < 4 * static_cast<int>(precision_bits_v<S>) + 8; ++k) {
    term = term * u2 / S(static_cast<double>((2 * k) * (2 * k + 1)));
    const S add = S(static_cast<double>(2 * k)) * term;
    sum += add;
    if (abs(add) <= eps * abs(sum) / 4) break;
  }
  return -sum / cosh(u);
}

/// The logits of one head split by order in R (math.md §7.1): from the raw
/// pieces Â⁰ (of the centre), Â¹ (linear in R) and Â² (the rest), all scaled,
/// a soft cap κ tanh(Â/κ) gives A⁰ = κT, A¹ = sech²(Â⁰/κ) Â¹ and
/// S = sech²(Â⁰/κ)(Â² + κ(tanh u − u) − Â¹ T t)/(1 + T t), T = tanh(Â⁰/κ),
/// u = (Â¹ + Â²)/κ, t = tanh u, for |u| ≤ ½; above, where 1 + T t may
/// cancel, S = κ(tanh(Â⁰/κ + u) − T) − A¹ by tanh_difference. A0 becomes
/// A⁰ + A¹ and A2 becomes S.
template <class S>
void cap_logits(const S& cap, Matrix<S>& A0, Matrix<S>& A1, Matrix<S>& A2) {
  using std::abs;
  using std::cosh;
  using std::tanh;
  const S half = S(1) / S(2);
  for (Eigen::Index j = 0; j < A0.cols(); ++j)
    for (Eigen::Index i = 0; i < A0.rows(); ++i) {
      const S z = A0(i, j) / cap, T = tanh(z), ch = cosh(z), sech2 = S(1) / S(ch * ch);
      const S u = S(A1(i, j) + A2(i, j)) / cap, first = sech2 * A1(i, j);
      if (abs(u) <= half) {  // 1 + T t ≥ 1 − tanh ½
        const S t = tanh(u);
        A2(i, j) = sech2 * S(A2(i, j) + cap * tanh_minus_identity(u) - A1(i, j) * T * t) / S(S(1) + T * t);
      } else {  // κ(tanh(z + u) − tanh z) − A¹, the difference without cancellation (T t may be near −1)
        A2(i, j) = cap * tanh_difference(z, S(z + u), u) - first;
      }
      A0(i, j) = cap * T + first;
    }
}

/// One head's logits where Π's rows differ by position (rotary, XLNet's
/// relative terms, T5's bucket bias, a soft cap): L = A⁰ + A¹ and S = A² from
/// the centre's rotated query and key rows Q0, K0 (n×d_qk: row i at position
/// i) and the residual's dQ, dK, never as a difference of logits.
template <class S>
void positional_logits(const Architecture& a, const detail::PackedLayer<S>& w, const Matrix<S>& RK, Eigen::Index h, const Matrix<S>& Q0, const Matrix<S>& dQ,
                       const Matrix<S>& K0, const Matrix<S>& dK, const S& scale, Matrix<S>& L, Matrix<S>& Sm) {
  const Eigen::Index n = Q0.rows(), dq = a.d_qk;
  Matrix<S> A1, T;
  if (a.xlnet_relative) {
    // [(q_i + r_w)·k_j + (q_i + r_r)·(R(i − j) W_R)] with q = q⁰ + δq, k = k⁰ + δk.
    Matrix<S> Qw = Q0, Qr = Q0, Bc, Br;
    for (Eigen::Index c = 0; c < dq; ++c)
      for (Eigen::Index i = 0; i < n; ++i) {
        Qw(i, c) += w.rw(h * dq + c);
        Qr(i, c) += w.rr(h * dq + c);
      }
    const Matrix<S> RKh = RK.middleCols(h * dq, dq);
    gemm_nt(Qw, K0, L);
    gemm_nt(Qr, RKh, Bc);  // n × (2n−1), column k ↔ p = k − (n−1)
    gemm_nt(Qw, dK, A1);
    gemm_nt(dQ, K0, T);
    A1 += T;
    gemm_nt(dQ, RKh, Br);
    for (Eigen::Index j = 0; j < n; ++j)
      for (Eigen::Index i = 0; i < n; ++i) {
        L(i, j) += Bc(i, detail::relative_column(i, j, n));
        A1(i, j) += Br(i, detail::relative_column(i, j, n));
      }
  } else {
    gemm_nt(Q0, K0, L);
    gemm_nt(Q0, dK, A1);
    gemm_nt(dQ, K0, T);
    A1 += T;
  }
  if (a.rel_buckets > 0)  // T5: B_h[i, j] = T[bucket(j − i), h], part of A⁰
    for (Eigen::Index j = 0; j < n; ++j)
      for (Eigen::Index i = 0; i < n; ++i)
        L(i, j) += S(detail::bucket_bias(a, w.pos_bias, i, j, h));
  gemm_nt(dQ, dK, Sm);
  L *= scale;
  A1 *= scale;
  Sm *= scale;
  if (a.softcap) {
    cap_logits(decimal_constant<S>(*a.softcap), L, A1, Sm);
  } else {
    L += A1;
  }
}

/// Attn(1cᵀ + R) as (c_a, R_a) (math.md §7, §7.1). V = 1 c_vᵀ + R W_V and
/// P V = 1 c_vᵀ + P R W_V. Where the logits are math.md §1's bilinear ones
/// (no rotary, relative terms or soft cap), per head q0 = W_Qᵀc + b_Q,
/// v_j = q0ᵀW_Kᵀr_j·s, S = R W_Q (R W_K)ᵀ·s and Π the masked softmax of v;
/// otherwise Π = rowsoftmax(A⁰ + A¹) and S from positional_logits. Without a
/// mask, with Π = 1πᵀ and every |S_ij| ≤ ½, P R W_V = 1 πᵀR W_V + E R W_V:
/// π's part goes to the centre and the residual gets E R W_V (third order in
/// R) centred; otherwise P R W_V = 1 (R W_V)_kᵀ + (P − 1e_kᵀ) R W_V, k the key
/// of largest column sum of P, and the second term is centred (first order in
/// R where Π's rows differ; rows that all attend to k nearly alone keep their
/// differences' digits). W_O is applied after centring.
template <class S>
Split<S> attention(const Architecture& a, const detail::PackedLayer<S>& w, const LayerWeights& lw,
                   const detail::PositionTables<S>& pos, int layer, const Split<S>& x, MaskKind mask,
                   Eigen::Index window, std::vector<Matrix<S>>* Pis, std::vector<Matrix<S>>* Ps) {
  const Eigen::Index n = x.R.rows(), H = a.heads, dq = a.d_qk, dv = a.d_v;
  const bool bilinear = detail::bilinear_logits(a);
  Matrix<S> q0, QR, cv, VR, k0, KR;
  times_split(x.c, x.R, w.WQ, q0, QR);
  times_split(x.c, x.R, w.WV, cv, VR);
  detail::add_row(q0, w.bQ);
  detail::add_row(cv, w.bV);
  if (bilinear) {
    gemm_weights(x.R, w.WK, KR);
  } else {
    times_split(x.c, x.R, w.WK, k0, KR);
    detail::add_row(k0, w.bK);
  }
  if (a.query_key_norm)  // every head's query and key rows, as row-wise maps on the pair (math.md §7.1)
    for (Eigen::Index h = 0; h < H; ++h)
      for (const auto& [centre, rest, at] : {std::tuple{&q0, &QR, detail::NormAt::query},
                                              std::tuple{&k0, &KR, detail::NormAt::key}}) {
        const Split<S> y = norm_centred(detail::norm_form(a, at),
                                        Split<S>{centre->middleCols(h * dq, dq), rest->middleCols(h * dq, dq)},
                                        *detail::norm_parameters(lw, at).first, VectorXd::Zero(dq).eval());
        centre->middleCols(h * dq, dq) = y.c;
        rest->middleCols(h * dq, dq) = y.R;
      }
  // The centre's query and key at every position, and the residual's, rotated by position.
  Matrix<S> Q0, K0, RK;
  if (!bilinear) {
    Q0 = q0.replicate(n, 1);
    K0 = k0.replicate(n, 1);
    if (a.rotary())
      for (Eigen::Index h = 0; h < H; ++h)
        for (Matrix<S>* M : {&Q0, &K0, &QR, &KR}) apply_rotary(*M, pos.rotary_at(layer), h * dq);
    if (a.xlnet_relative) gemm_weights(*pos.sinusoid, w.WR, RK);
  }
  const S scale = detail::score_scale<S>(a);
  Matrix<S> Mc = cv;            // 1×H·d_v: centre of the heads' values
  Matrix<S> Mr(n, H * dv);      // n×H·d_v: the rest
  std::vector<Matrix<S>> Pi_h(static_cast<std::size_t>(H)), P_h(static_cast<std::size_t>(H));
  const double head_work = double(H) * double(n) * double(n) * double(dq + dv) * (is_mpfr_v<S> ? 64.0 : 1.0);
  detail::run_blocks(static_cast<std::size_t>(H), head_work >= double(1 << 20) ? product_threads() : 1,
                     [&](std::size_t hu) {
                       check_interrupt();
                       if constexpr (is_mpfr_v<S>) use_full_mpfr_exponent_range();  // per thread
                       const auto h = static_cast<Eigen::Index>(hu);
                       const Matrix<S> Qh = QR.middleCols(h * dq, dq), Kh = KR.middleCols(h * dq, dq),
                                       Vh = VR.middleCols(h * dv, dv);
                       Matrix<S> v, L, Sm, PV;
                       HeadAttention<S> att;
                       if (bilinear) {
                         const Matrix<S> q0h = q0.middleCols(h * dq, dq).transpose();
                         gemm(Kh, q0h, v);  // n×1
                         v *= scale;
                         gemm_nt(Qh, Kh, Sm);
                         Sm *= scale;
                         // Without a mask every row of Π is the softmax of vᵀ: one row's exponentials,
                         // the very roundings row_softmax makes in each of the n identical rows.
                         Matrix<S> Pi = mask == MaskKind::none
                                            ? Matrix<S>(row_softmax(Matrix<S>(v.transpose()), MaskKind::none).replicate(n, 1))
                                            : row_softmax(Matrix<S>(v.transpose().replicate(n, 1)), mask, window);
                         att = head_attention(std::move(Pi), [&](Eigen::Index, Eigen::Index j) -> const S& { return v(j, 0); },
                                              Sm, mask, window, mask != MaskKind::none, Pis != nullptr);
                       } else {
                         positional_logits(a, w, RK, h, Matrix<S>(Q0.middleCols(h * dq, dq)), Qh,
                                           Matrix<S>(K0.middleCols(h * dq, dq)), Kh, scale, L, Sm);
                         att = head_attention(row_softmax(L, mask, window),
                                              [&](Eigen::Index i, Eigen::Index j) -> const S& { return L(i, j); }, Sm,
                                              mask, window, true, Pis != nullptr);
                       }
                       if (bilinear && mask == MaskKind::none && att.all_small) {
                         // P V = 1 πᵀV + E V: π's part is a centre; E V (third order) keeps its digits.
                         gemm(att.E, Vh, PV);
                         const Matrix<S> pi = att.Pi.topRows(1);
                         Matrix<S> piV;
                         gemm(pi, Vh, piV);
                         Mc.middleCols(h * dv, dv) += piV;
                       } else {
                         // Π's rows differ (a mask, positions) or large S makes P far from Π:
                         // P V = 1 V_kᵀ + (P − 1e_kᵀ) V for the key k of most weight, and
                         // (P − 1e_kᵀ) V = Σ_{j≠k} P_ij (V_j − V_k) (rows of P sum to 1): rows that
                         // all (nearly) attend to k keep their digits, and so does a weight far
                         // below 1 on a key whose value differs where the heavy keys' values are
                         // equal (their terms vanish exactly instead of cancelling).
                         const Eigen::Index k = detail::heaviest_key(att.P);
                         Matrix<S> Vd = Vh;
                         for (Eigen::Index c = 0; c < dv; ++c)
                           for (Eigen::Index j = 0; j < n; ++j)
                             if (j != k) Vd(j, c) -= Vh(k, c);
                         Vd.row(k).setZero();
                         gemm(att.P, Vd, PV);
                         Mc.middleCols(h * dv, dv) += Vh.row(k);
                       }
                       Mr.middleCols(h * dv, dv) = PV;  // disjoint columns per head
                       if (Pis) {
                         Pi_h[hu] = std::move(att.Pi);
                         P_h[hu] = std::move(att.P);  // as formed: Π + E would lose P's small entries where E = P − Π
                       }
                     });
  if (Pis)
    for (auto& P : Pi_h) Pis->push_back(std::move(P));
  if (Ps)
    for (auto& P : P_h) Ps->push_back(std::move(P));
  const RowVector<S> shift = take_mean(Mr);
  Mc += shift;
  Matrix<S> c_out;
  Split<S> out;
  times_split(RowVector<S>(Mc), Mr, w.WO, c_out, out.R);
  out.c = c_out;
  out.c += w.bO;
  return out;
}

/// N(1cᵀ + R) as (c', R') for the model's norm N (math.md §7's row-wise
/// rule): LayerNorm, or RMSNorm with gain g or 1 + g (Architecture::norm,
/// norm_unit_offset). LayerNorm is invariant under x → x + t1, so it reads
/// ĉ = c − mean(c)1 and r̃_i = r_i − mean(r_i)1; RMSNorm reads ĉ = c, r̃_i = r_i.
/// With m(y) = |y|²/d (the variance, resp. the mean square), s² = m(ĉ) + eps and
/// δm_i = (2ĉ·r̃_i + |r̃_i|²)/d (= m(ĉ + r̃_i) − m(ĉ)):
/// Δ_i = γ ∘ (r̃_i/s'_i − ĉ δm_i/(s s'_i (s + s'_i))), s'_i² = s² + δm_i.
template <class S>
Split<S> norm_centred(const detail::NormForm& form, const Split<S>& x, const VectorXd& gain, const VectorXd& bias) {
  using std::abs;
  using std::sqrt;
  const bool layer = form.kind == NormKind::layer;
  const Eigen::Index n = x.R.rows(), d = x.R.cols();
  const S e = decimal_constant<S>(form.eps);
  const S dd = S(static_cast<double>(d));
  RowVector<S> g(d);
  for (Eigen::Index j = 0; j < d; ++j) g(j) = form.unit_offset && !layer ? S(S(1) + S(gain(j))) : S(gain(j));
  // y − mean(y)1 for LayerNorm, y itself for RMSNorm.
  const auto reduce = [&](auto& y) {
    if (!layer) return;
    S m(0);
    for (Eigen::Index j = 0; j < d; ++j) m += y(j);
    m /= dd;
    for (Eigen::Index j = 0; j < d; ++j) y(j) -= m;
  };
  RowVector<S> ch = x.c;
  reduce(ch);
  S vc(0);
  for (Eigen::Index j = 0; j < d; ++j) vc += ch(j) * ch(j);
  vc /= dd;
  const S s = sqrt(S(vc + e));
  RowVector<S> gc(d);
  for (Eigen::Index j = 0; j < d; ++j) gc(j) = ch(j) / s * g(j) + S(bias(j));
  Matrix<S> Delta(n, d);
  RowVector<S> rt(d), y(d);
  for (Eigen::Index i = 0; i < n; ++i) {
    check_interrupt();
    rt = x.R.row(i);
    reduce(rt);
    S cr(0), rr(0);
    for (Eigen::Index j = 0; j < d; ++j) {
      cr += ch(j) * rt(j);
      rr += rt(j) * rt(j);
    }
    S dm = S(S(2) * cr + rr) / dd;
    if (abs(dm) * 2 > vc) {  // not small: m(ĉ + r̃_i) from the row itself, as the direct pass does
      for (Eigen::Index j = 0; j < d; ++j) y(j) = ch(j) + rt(j);
      reduce(y);
      S m(0);
      for (Eigen::Index j = 0; j < d; ++j) m += y(j) * y(j);
      dm = m / dd - vc;
    }
    const S s1 = sqrt(S(vc + e + dm));
    const S k = dm / S(s * s1 * S(s + s1));
    for (Eigen::Index j = 0; j < d; ++j) Delta(i, j) = S(rt(j) / s1 - ch(j) * k) * g(j);
  }
  return recentre(std::move(gc), std::move(Delta));
}

/// act(h + δ) − act(h) with the relative accuracy of δ's size (see
/// forward_centred.hpp): relu by its sign pattern (exact up to one rounding);
/// gelu_tanh by tanh y1 − tanh y0 = sinh(Δy) sech y1 sech y0 with
/// Δy = a δ (1 + k(x1² + x1 h + h²)); gelu = xΦ(x) as δΦ(x1) + h(Φ(x1) − Φ(h)),
/// the difference by the series φ(h) Σ_k He_k(−h) δ^{k+1}/(k+1)! when
/// |δ|(1+|h|) ≤ ½, else by complementary error functions of like sign.
template <class S> struct ActivationDifference {
  Activation act;
  S half, a, k, inv_sqrt2, inv_sqrt2pi, eps;

  explicit ActivationDifference(Activation activation) : act(activation) {
    using std::sqrt;
    const S pi = pi_constant<S>();
    half = S(1) / S(2);
    a = activation == Activation::gelu_fast ? decimal_constant<S>(0.7978845608)  // HF's literal
                                            : S(sqrt(S(S(2) / pi)));            // gelu_tanh: y = a (x + k x³)
    k = decimal_constant<S>(0.044715);
    inv_sqrt2 = S(1) / sqrt(S(2));           // Φ(x) = ½ erfc(−x/√2)
    inv_sqrt2pi = S(1) / sqrt(S(S(2) * pi));  // φ(0)
    eps = std::numeric_limits<S>::epsilon();
  }

  S operator()(const S& h, const S& delta) const {
    using std::abs;
    using std::exp;
    using std::min;
    const S x1 = h + delta;
    switch (act) {
      case Activation::relu:
        if (h > 0) return x1 > 0 ? delta : S(-h);
        return x1 > 0 ? x1 : S(0);
      case Activation::gelu_tanh:
      case Activation::gelu_fast: {
        const S y0 = a * (h + k * h * h * h), y1 = a * (x1 + k * x1 * x1 * x1);
        const S dy = a * delta * S(S(1) + k * S(x1 * x1 + x1 * h + h * h));
        const S one_p_t1 = S(2) / S(S(1) + exp(S(-2 * y1)));
        return half * S(delta * one_p_t1 + h * tanh_difference(y0, y1, dy));
      }
      case Activation::gelu: {
        const S Phi1 = half * erfc_of(S(-x1 * inv_sqrt2));
        S dPhi;
        if (abs(delta) * S(S(1) + abs(h)) <= half) {
          // t_k = He_k(x) δ^k / k!, x = −h: t_{k+1} = (x δ t_k − δ² t_{k−1})/(k+1).
          const S xd = -h * delta, d2 = delta * delta;
          S prev(1), cur = xd, sum = S(1) + xd / S(2);
          for (int j = 1; j < 4 * static_cast<int>(precision_bits_v<S>) + 64; ++j) {
            const S next = S(xd * cur - d2 * prev) / S(j + 1);
            prev = cur;
            cur = next;
            const S term = cur / S(j + 2);
            sum += term;
            if (abs(term) <= eps * abs(sum) / 8 && abs(prev) <= eps * abs(sum)) break;
          }
          dPhi = inv_sqrt2pi * exp(S(-h * h / 2)) * delta * sum;
        } else if (h <= 0 && x1 <= 0) {
          dPhi = half * S(erfc_of(S(-x1 * inv_sqrt2)) - erfc_of(S(-h * inv_sqrt2)));
        } else if (h >= 0 && x1 >= 0) {
          dPhi = half * S(erfc_of(S(h * inv_sqrt2)) - erfc_of(S(x1 * inv_sqrt2)));
        } else {
          dPhi = half * S(erf_of(S(x1 * inv_sqrt2)) - erf_of(S(h * inv_sqrt2)));
        }
        return delta * Phi1 + h * dPhi;
      }
      case Activation::silu: {
        // x σ(x), σ(x) = ½(1 + tanh(x/2)): δ σ(x1) + h (σ(x1) − σ(h)), the difference of σ by tanh_difference.
        const S sigma1 = S(1) / S(S(1) + exp(S(-x1)));
        return delta * sigma1 + h * half * tanh_difference(S(h * half), S(x1 * half), S(delta * half));
      }
    }
    throw std::logic_error("activation difference: no centred form for this activation");
  }
};

/// f(1cᵀ + R) for the MLP f(z) = act(z W_1 + b_1) W_2 + b_2: with
/// h = cᵀW_1 + b_1 and D = R W_1 (exact split of the pre-activations),
/// A_ij = act(h_j + D_ij) − act(h_j); c' = (act(h) + mean A) W_2 + b_2,
/// R' = (A − 1 mean(A)ᵀ) W_2. The gated MLP f(z) = (act(z W_gate) ∘ (z W_1 + b_1)) W_2 + b_2
/// splits its gate the same way (h_g = cᵀW_gate, D_g = R W_gate) and its
/// hidden row as A_ij = act(h_g + D_g)_ij D_ij + h_j (act(h_g + D_g) − act(h_g))_ij.
template <class S>
Split<S> mlp_centred(const Architecture& a, const detail::PackedLayer<S>& w, const LayerWeights& lw,
                     const Split<S>& x) {
  Matrix<S> hc, D;
  times_split(x.c, x.R, lw.W_1, hc, D);
  detail::add_row(hc, w.b1);
  const ActivationDifference<S> diff(a.activation);
  if (lw.gated()) {
    Matrix<S> gc, G;
    times_split(x.c, x.R, lw.W_gate, gc, G);
    for (Eigen::Index j = 0; j < D.cols(); ++j) {
      if (j % 64 == 0) check_interrupt();
      for (Eigen::Index i = 0; i < D.rows(); ++i)
        D(i, j) = activate(S(gc(0, j) + G(i, j)), a.activation) * D(i, j) + hc(0, j) * diff(gc(0, j), G(i, j));
    }
    for (Eigen::Index j = 0; j < hc.cols(); ++j) hc(0, j) *= activate(gc(0, j), a.activation);
  } else {
    for (Eigen::Index j = 0; j < D.cols(); ++j) {
      if (j % 64 == 0) check_interrupt();
      for (Eigen::Index i = 0; i < D.rows(); ++i) D(i, j) = diff(hc(0, j), D(i, j));
    }
    for (Eigen::Index j = 0; j < hc.cols(); ++j) hc(0, j) = activate(hc(0, j), a.activation);
  }
  hc += take_mean(D);
  Matrix<S> c_out;
  Split<S> out;
  times_split(RowVector<S>(hc), D, lw.W_2, c_out, out.R);
  out.c = c_out;
  out.c += w.b2;
  return out;
}

/// The centred pair's arithmetic for detail::layer_map (compute/layer_impl.hpp):
/// each sub-layer maps (c, R) to its own centred pair (math.md §7.1), and a
/// sum adds centres and residuals apart.
template <class S> struct CentredLayer {
  using Value = Split<S>;
  const Architecture& a;
  const detail::PackedLayer<S>& w;
  const LayerWeights& lw;
  const detail::PositionTables<S>& pos;
  int layer;  ///< from 0: its rotary table
  MaskKind mask;
  Eigen::Index window;
  std::vector<Matrix<S>>* Pi;  ///< the heads' Π, when set
  std::vector<Matrix<S>>* P;   ///< the heads' P, when set

  Value attention(const Value& x) const { return centred::attention(a, w, lw, pos, layer, x, mask, window, Pi, P); }
  Value mlp(const Value& z) const { return mlp_centred(a, w, lw, z); }
  Value norm(const Value& x, detail::NormAt at) const {
    const auto [g, b] = detail::norm_parameters(lw, at);
    return norm_centred(detail::norm_form(a, at), x, *g, b ? *b : VectorXd::Zero(g->size()).eval());
  }
  static void add(Value& y, const Value& x) {
    y.c += x.c;
    y.R += x.R;
  }
};

/// One layer (c, R) → (c', R') of `variant` (detail::layer_map on the pair).
template <class S>
Split<S> layer_map(const Architecture& a, const Variant& variant, const detail::PackedLayer<S>& w,
                   const LayerWeights& lw, const Split<S>& x, const detail::PositionTables<S>& pos, int layer,
                   Eigen::Index window, std::vector<Matrix<S>>* Pi, std::vector<Matrix<S>>* P) {
  CentredLayer<S> ar{a, w, lw, pos, layer, variant.mask, window, Pi, P};
  return detail::layer_map(ar, a, variant, x);
}

/// Throws NumericalError when R is not finite, or (double) when a nonzero R
/// became exactly zero at a size where that is underflow, not mathematics.
template <class S> void check_layer(const Model& model, int layer, const Matrix<S>& before, const Matrix<S>& after) {
  using std::abs;
  using std::isfinite;
  bool all_zero = true;
  for (Eigen::Index j = 0; j < after.cols(); ++j)
    for (Eigen::Index i = 0; i < after.rows(); ++i) {
      const S& v = after(i, j);
      if constexpr (is_mpfr_v<S>) {
        if (!mpfr_number_p(v.backend().data()))
          throw NumericalError(model.source() + ": centred forward pass: layer " + std::to_string(layer) +
                               ": the residual R is not finite");
      } else {
        if (!isfinite(v))
          throw NumericalError(model.source() + ": centred forward pass: layer " + std::to_string(layer) +
                               ": the residual R is not finite");
      }
      if (v != 0) all_zero = false;
    }
  if constexpr (!is_mpfr_v<S>) {
    if (all_zero) {
      const double before_max = before.size() ? before.cwiseAbs().maxCoeff() : 0.0;
      if (before_max > 0 && before_max < 1e-50)
        throw NumericalError(model.source() + ": centred forward pass: layer " + std::to_string(layer) +
                             ": the residual R underflowed double's range (below ~1e-308) to all zeros; "
                             "use an MPFR precision");
    }
  }
}

}  // namespace centred

template <class S>
CentredTrace<S> forward_centred(const Model& model, const Variant& variant, const Matrix<S>& X0,
                                const ForwardOptions& options) {
  Matrix<S> R0 = X0;
  const RowVector<S> c0 = X0.rows() > 0 ? centred::take_mean(R0) : RowVector<S>(X0.cols());
  return forward_centred(model, variant, c0, R0, options);
}

template <class S>
CentredTrace<S> forward_centred(const Model& model, const Variant& variant, const RowVector<S>& c0,
                                const Matrix<S>& R0, const ForwardOptions& options) {
  const Architecture& a = model.arch();
  detail::check_input(model, variant, R0.rows(), R0.cols());
  if (c0.cols() != R0.cols())
    throw std::invalid_argument(model.source() + ": input: the centre has " + std::to_string(c0.cols()) +
                                " columns and R " + std::to_string(R0.cols()));
  if constexpr (is_mpfr_v<S>) use_full_mpfr_exponent_range();
  const bool with_mlp = variant.mlp != MlpKind::none;
  const auto n = static_cast<std::uint64_t>(R0.rows());
  // The direct pass's count, plus Π beside E when recorded, the heads' n×n temporaries and the centres.
  std::uint64_t count = forward_scalar_count(a, n, with_mlp, options.record_attention);
  const std::uint64_t L = static_cast<std::uint64_t>(std::max(a.layers, 0));
  const std::uint64_t H = static_cast<std::uint64_t>(std::max(a.heads, 1));
  count = add_sat(count, options.record_attention ? mul_sat(mul_sat(L, H), mul_sat(n, n)) : 0);
  // P, S and v's rows of the heads in flight; A⁰ + A¹, A¹ and three products more where positions enter the logits.
  const bool bilinear = detail::bilinear_logits(a);
  count = add_sat(count, mul_sat(mul_sat(bilinear ? 3 : 8, H), mul_sat(n, n)));
  count = add_sat(count, mul_sat(L + 1, static_cast<std::uint64_t>(a.d_model)));
  require_memory(mul_sat(count, scalar_bytes(is_mpfr_v<S>, precision_bits_v<S>)),
                 model.source() + ": centred forward pass",
                 describe_forward_estimate(a, n, options.record_attention, is_mpfr_v<S>, precision_bits_v<S>));
  CentredTrace<S> t;
  t.variant = variant;
  t.c.reserve(static_cast<std::size_t>(a.layers) + 1);
  t.R.reserve(static_cast<std::size_t>(a.layers) + 1);
  {
    centred::Split<S> x0{c0, R0};
    x0.c += centred::take_mean(x0.R);
    t.c.push_back(std::move(x0.c));
    t.R.push_back(std::move(x0.R));
  }
  if (options.record_attention) {
    t.Pi.resize(static_cast<std::size_t>(a.layers));
    t.P.resize(static_cast<std::size_t>(a.layers));
  }
  const detail::PositionTables<S> pos = detail::PositionTables<S>::make(a, R0.rows());
  detail::PackedLayer<S> w;
  for (int l = 0; l < a.layers; ++l) {
    check_interrupt();
    const std::shared_ptr<const LayerWeights> held = model.layer_for_pass(l);  // read now if streamed
    const LayerWeights& lw = *held;
    detail::pack_into(w, a, lw, with_mlp);
    std::vector<Matrix<S>>* Pi = options.record_attention ? &t.Pi[static_cast<std::size_t>(l)] : nullptr;
    std::vector<Matrix<S>>* P = options.record_attention ? &t.P[static_cast<std::size_t>(l)] : nullptr;
    centred::Split<S> x{t.c.back(), t.R.back()};
    detail::perturb_entries(x.R, options.perturb_bits, l);
    centred::Split<S> xn = centred::layer_map(a, variant, w, lw, x, pos, l, detail::window_of(a, l), Pi, P);
    centred::check_layer(model, l + 1, x.R, xn.R);
    t.c.push_back(std::move(xn.c));
    t.R.push_back(std::move(xn.R));
    if (options.on_layer) options.on_layer(l + 1, a.layers);
  }
  return t;
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_CENTRED(S)                                                                          \
  template sanpath::CentredTrace<S> sanpath::forward_centred<S>(const sanpath::Model&, const sanpath::Variant&, \
                                                                const sanpath::Matrix<S>&,                      \
                                                                const sanpath::ForwardOptions&);                \
  template sanpath::CentredTrace<S> sanpath::forward_centred<S>(const sanpath::Model&, const sanpath::Variant&, \
                                                                const sanpath::RowVector<S>&,                   \
                                                                const sanpath::Matrix<S>&,                      \
                                                                const sanpath::ForwardOptions&);                \
  template sanpath::Matrix<S> sanpath::CentredTrace<S>::X(int) const;

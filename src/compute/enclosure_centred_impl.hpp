#pragma once
/// \file enclosure_centred_impl.hpp
/// The centred pass in ball arithmetic (enclosure_centred.hpp). The
/// ENCLOSURE template module instantiates this file, which brings the direct
/// pass (enclosure_impl.hpp) with it: one unit per tier for both.
#include "sanpath/compute/enclosure_centred.hpp"
#include "sanpath/compute/forward_centred.hpp"  // use_full_mpfr_exponent_range
#include "compute/enclosure_impl.hpp"

namespace sanpath {
namespace enclosure_detail {

/// X = 1cᵀ + R, both enclosed entrywise, and by bounds of the Euclidean
/// norms of their rows where known (c_rows 1×1, R_rows n×1; empty: only the
/// entrywise radius).
template <class S> struct BallSplit {
  BallMatrix<S> c, R;
  RadiusMatrix c_rows{}, R_rows{};
};

// ---- balls with row bounds ---------------------------------------------------
// A product by weights moves an entrywise radius by |W| (for a Gaussian W
// of width d about √d/2 times what W does to a vector: 4.5 bits a product
// at d = 768) but a row's Euclidean norm by at most ‖W‖₂ (about 1 bit):
// through the attention the radii are carried both ways, each entry capped
// by its row's bound.

/// A ball whose rows' blocks of `width` columns (the heads) also have
/// bounds of the Euclidean norm of their distance to the midpoint:
/// rows(i, b) ≥ ‖X_i − X̃_i‖₂ over block b. Every entry of B.rad is already
/// capped by its block's bound.
template <class S> struct RowBall {
  BallMatrix<S> B;
  RadiusMatrix rows;
  Eigen::Index width = 0;
};

/// ≥ ‖r_i‖₂ over each block of `width` columns (rows × blocks).
inline RadiusMatrix block_row_norms(const RadiusMatrix& r, Eigen::Index width) {
  const Eigen::Index blocks = width > 0 ? (r.cols() + width - 1) / width : 0;
  if (blocks == 1) return row_norms_up(r);
  std::vector<RadiusMatrix> parts;
  for (Eigen::Index b = 0; b < blocks; ++b)
    parts.push_back(row_norms_up(r.block(0, b * width, r.rows(), std::min(width, r.cols() - b * width))));
  return radius_from(r.rows(), blocks, [&](Eigen::Index i, Eigen::Index b) { return parts[static_cast<std::size_t>(b)].at(i, 0); });
}

/// The bounds intersected with those of the entrywise radius, and every entry capped by its block's.
template <class S> void tighten(RowBall<S>& X) {
  if (X.B.mid.cols() == 0) return;
  const RadiusMatrix derived = block_row_norms(X.B.rad, X.width);
  X.rows = X.rows.m.size() ? min(X.rows, derived) : derived;
  X.B.rad = capped_by_rows(X.B.rad, X.rows, X.width);
}

/// B with one block of row bounds: `rows` where given (n×1), else its radius's.
template <class S> RowBall<S> row_ball(BallMatrix<S> B, RadiusMatrix rows = {}) {
  RowBall<S> X{std::move(B), std::move(rows), 0};
  X.width = X.B.mid.cols();
  tighten(X);
  return X;
}

/// Block b (of X.width columns).
template <class S> RowBall<S> block(const RowBall<S>& X, Eigen::Index b) {
  return {columns(X.B, b * X.width, X.width), X.rows.block(0, b, X.rows.rows(), 1), X.width};
}

/// One block over all the columns: ‖x‖₂² = Σ_b ‖x_b‖₂².
template <class S> RowBall<S> whole(RowBall<S> X) {
  if (X.rows.cols() > 1) X.rows = row_norms_up(X.rows);
  X.width = X.B.mid.cols();
  tighten(X);
  return X;
}

/// rows + u·‖X̃_i‖₂ per block: the bounds after an elementwise operation
/// that produced X̃ with one rounding per entry.
template <class S> void add_rounding_rows(RowBall<S>& X, long p) {
  X.rows = X.rows + block_row_norms(abs_of(X.B.mid), X.width) * unit(p);
}

/// A·W (times_weights) with W's blocks of `width` columns bounded in norm
/// (sigma[b] ≥ ‖W_b‖₂): ‖((A − Ã)W)_i,b‖₂ ≤ ν_i·σ_b, plus the product's
/// rounding γ_k(|Ã||W|)_ij in norm.
template <class S>
RowBall<S> times_weights_rows(const RowBall<S>& A, const MatrixXd& W, const std::vector<UpperBound>& sigma,
                              Eigen::Index width, long p) {
  RowBall<S> C{BallMatrix<S>{}, RadiusMatrix{}, width};
  gemm_weights(A.B.mid, W, C.B.mid);
  const RadiusMatrix absW = RadiusMatrix::of(W.cwiseAbs());
  const RadiusMatrix rounding = product_up(abs_of(A.B.mid) * gamma_up(W.rows(), p), absW);
  C.B.rad = rounding + product_up(A.B.rad, absW);
  const RadiusMatrix rounding_rows = block_row_norms(rounding, width);
  C.rows = radius_from(C.B.mid.rows(), static_cast<Eigen::Index>(sigma.size()), [&](Eigen::Index i, Eigen::Index b) {
    return rounding_rows.at(i, b) + A.rows.at(i, 0) * sigma[static_cast<std::size_t>(b)];
  });
  tighten(C);
  return C;
}

/// A·Bᵀ of two one-block row balls (scores), entrywise: the bound of times()
/// or, where smaller, by Cauchy–Schwarz ‖Ã_i‖ν^B_j + ν^A_i(‖B̃_j‖ + ν^B_j),
/// both plus the rounding γ_k(|Ã||B̃|ᵀ)_ij.
template <class S> BallMatrix<S> times_nt_rows(const RowBall<S>& A, const RowBall<S>& B, long p) {
  BallMatrix<S> C;
  gemm_nt(A.B.mid, B.B.mid, C.mid);
  const RadiusMatrix absA = abs_of(A.B.mid), absBt = abs_of(B.B.mid).transpose(), rBt = B.B.rad.transpose();
  const RadiusMatrix rounding = product_up(absA, absBt) * gamma_up(A.B.mid.cols(), p);
  const RadiusMatrix entrywise = product_up(absA, rBt) + product_up(A.B.rad, absBt + rBt);
  const RadiusMatrix a = row_norms_up(absA), b = row_norms_up(absBt.transpose()).transpose(), nBt = B.rows.transpose();
  const RadiusMatrix normwise = product_up(a, nBt) + product_up(A.rows, b + nBt);
  C.rad = rounding + min(entrywise, normwise);
  return C;
}

/// A·V of an entrywise ball A (probabilities) and a one-block row ball V:
/// ‖((AV) − ÃṼ)_i‖₂ ≤ Σ_j (|Ã_ij| + r_ij)ν_j + r_ij‖Ṽ_j‖, plus the rounding
/// γ_k Σ_j |Ã_ij|‖Ṽ_j‖ (the norm of γ_k(|Ã||Ṽ|)_i).
template <class S> RowBall<S> times_rows(const BallMatrix<S>& A, const RowBall<S>& V, long p) {
  RowBall<S> C{times(A, V.B, false, p), RadiusMatrix{}, V.width};
  const RadiusMatrix absA = abs_of(A.mid), v = row_norms_up(abs_of(V.B.mid));
  C.rows = product_up(absA + A.rad, V.rows) + product_up(A.rad, v) +
           product_up(absA, v) * gamma_up(A.mid.cols(), p);
  tighten(C);
  return C;
}

/// X + Y (sum), the row bounds added.
template <class S> RowBall<S> sum_rows(const RowBall<S>& X, const RowBall<S>& Y, long p) {
  RowBall<S> Z{sum(X.B, Y.B, p), X.rows + Y.rows, X.width};
  add_rounding_rows(Z, p);
  tighten(Z);
  return Z;
}

/// take_mean on a one-block row ball: the mean's row bound mean_i(ν_i) plus
/// its rounding's norm; the centred rows' ν_i + that + u‖result_i‖₂.
template <class S> RowBall<S> take_mean_rows(RowBall<S>& M, long p) {
  const RadiusMatrix mean_rows = column_means_up(M.rows) + row_norms_up(mean_rounding(M.B.mid, p));
  RowBall<S> mean{take_mean(M.B, p), mean_rows, M.width};
  M.rows = M.rows + RadiusMatrix{mean_rows.m.replicate(M.rows.rows(), 1), mean_rows.exp};
  add_rounding_rows(M, p);
  tighten(M);
  tighten(mean);
  return mean;
}

/// add_bias with the row bounds.
template <class S> void add_bias_rows(RowBall<S>& X, const RowVector<S>& b, long p) {
  add_bias(X.B, b, p);
  add_rounding_rows(X, p);
  tighten(X);
}


template <class S> Iv<S> iv_neg(const Iv<S>& a) {
  Iv<S> v;
  mpfr_neg(ptr(v.lo), ptr(a.hi), MPFR_RNDN);  // exact
  mpfr_neg(ptr(v.hi), ptr(a.lo), MPFR_RNDN);
  return v;
}

/// exp and expm1 (increasing), rounded outward.
template <class S> Iv<S> iv_exp(const Iv<S>& a, bool minus_one) {
  Iv<S> v;
  const auto f = minus_one ? mpfr_expm1 : mpfr_exp;
  f(ptr(v.lo), ptr(a.lo), MPFR_RNDD);
  f(ptr(v.hi), ptr(a.hi), MPFR_RNDU);
  return v;
}

/// a / b for b > 0 (a softmax's denominator, 1 + s with s > −1).
template <class S> Iv<S> iv_div_positive(const Iv<S>& a, const Iv<S>& b) {
  if (mpfr_sgn(ptr(b.lo)) <= 0)
    throw NumericalError("certified enclosures: a softmax denominator is not bounded away from 0 at " +
                         std::to_string(precision_bits_v<S>) + " bits");
  Iv<S> v;
  mpfr_div(ptr(v.lo), ptr(a.lo), mpfr_sgn(ptr(a.lo)) < 0 ? ptr(b.lo) : ptr(b.hi), MPFR_RNDD);
  mpfr_div(ptr(v.hi), ptr(a.hi), mpfr_sgn(ptr(a.hi)) < 0 ? ptr(b.hi) : ptr(b.lo), MPFR_RNDU);
  return v;
}

/// [mid − r_mid − extra, mid + r_mid + extra].
template <class S> Iv<S> iv_widened(const S& mid, const UpperBound& r, const UpperBound& extra) {
  return iv_of(mid, r + extra);
}

/// The intersection of two intervals that both contain the same exact value.
template <class S> Iv<S> iv_meet(Iv<S> x, const Iv<S>& y) {
  if (y.lo > x.lo) x.lo = y.lo;
  if (y.hi < x.hi) x.hi = y.hi;
  return x;
}

/// The ball of n×d intervals filled by fill(i, row) (row: the d intervals of
/// row i): midpoints rounded to nearest, radii covering. Rows in parallel,
/// each worker with MPFR's full exponent range.
template <class S, class F> BallMatrix<S> ball_of_rows(Eigen::Index n, Eigen::Index d, F&& fill) {
  Matrix<S> mid(n, d);
  std::vector<UpperBound> rad(static_cast<std::size_t>(n * d));
  detail::run_blocks(static_cast<std::size_t>(n), n * d >= 4096 ? product_threads() : 1, [&](std::size_t iu) {
    use_full_mpfr_exponent_range();
    check_interrupt();
    const auto i = static_cast<Eigen::Index>(iu);
    std::vector<Iv<S>> row(static_cast<std::size_t>(d));
    fill(i, row);
    for (Eigen::Index j = 0; j < d; ++j) {
      const Iv<S>& v = row[static_cast<std::size_t>(j)];
      mpfr_add(ptr(mid(i, j)), ptr(v.lo), ptr(v.hi), MPFR_RNDN);
      mpfr_div_2ui(ptr(mid(i, j)), ptr(mid(i, j)), 1, MPFR_RNDN);
      rad[static_cast<std::size_t>(j * n + i)] = radius_around(mid(i, j), v);
    }
  });
  BallMatrix<S> B{std::move(mid), RadiusMatrix{}};
  B.rad = radius_from(n, d, [&](Eigen::Index i, Eigen::Index j) { return rad[static_cast<std::size_t>(j * n + i)]; });
  return B;
}

/// Rows [first, first + count) of a ball.
template <class S> BallMatrix<S> rows_of(const BallMatrix<S>& B, Eigen::Index first, Eigen::Index count) {
  return {B.mid.middleRows(first, count), B.rad.block(first, 0, count, B.rad.cols())};
}

/// Balls side by side (the same rows).
template <class S> BallMatrix<S> side_by_side(const std::vector<BallMatrix<S>>& parts) {
  Eigen::Index cols = 0;
  for (const BallMatrix<S>& b : parts) cols += b.mid.cols();
  const Eigen::Index rows = parts.empty() ? 0 : parts.front().mid.rows();
  BallMatrix<S> out{Matrix<S>(rows, cols), RadiusMatrix{}};
  std::vector<std::pair<std::size_t, Eigen::Index>> owner;  // column → (part, column in it)
  Eigen::Index at = 0;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    out.mid.middleCols(at, parts[k].mid.cols()) = parts[k].mid;
    for (Eigen::Index j = 0; j < parts[k].mid.cols(); ++j) owner.emplace_back(k, j);
    at += parts[k].mid.cols();
  }
  out.rad = radius_from(rows, cols, [&](Eigen::Index i, Eigen::Index j) {
    const auto& [k, jj] = owner[static_cast<std::size_t>(j)];
    return parts[k].rad.at(i, jj);
  });
  return out;
}

/// Row balls of one block each, side by side: one block each.
template <class S> RowBall<S> side_by_side_rows(const std::vector<RowBall<S>>& parts) {
  std::vector<BallMatrix<S>> balls;
  for (const RowBall<S>& x : parts) balls.push_back(x.B);
  RowBall<S> X{side_by_side(balls), RadiusMatrix{}, parts.empty() ? 0 : parts.front().width};
  X.rows = radius_from(X.B.mid.rows(), static_cast<Eigen::Index>(parts.size()), [&](Eigen::Index i, Eigen::Index b) {
    return parts[static_cast<std::size_t>(b)].rows.at(i, 0);
  });
  return X;
}

/// Row entries [first, last) of a matrix whose rows sum to `total` exactly
/// (a softmax's: 1; E = P − Π's: 0): a row of one entry is `total`;
/// otherwise the widest interval is intersected with total − Σ of the
/// others. Evaluated alone, an entry of a softmax row on
/// intervals carries the logits' whole radius (numerator and denominator
/// move together, intervals do not know it: 1 ± 2r for the key a saturated
/// row sits on); the others are small and their radii relative to them, so
/// 1 − their sum is tight where that entry's own interval is not.
template <class S> void sum_to(std::vector<Iv<S>>& row, Eigen::Index first, Eigen::Index last, long total) {
  if (last - first == 1) row[static_cast<std::size_t>(first)] = iv_point(S(total));  // one key: exact
  if (last - first < 2) return;
  Eigen::Index m = first;
  S width, widest;
  for (Eigen::Index j = first; j < last; ++j) {
    const Iv<S>& x = row[static_cast<std::size_t>(j)];
    mpfr_sub(ptr(width), ptr(x.hi), ptr(x.lo), MPFR_RNDU);
    if (j == first || width > widest) {
      widest = width;
      m = j;
    }
  }
  Iv<S> rest = iv_point(S(0));
  for (Eigen::Index j = first; j < last; ++j)
    if (j != m) rest = iv_add(rest, row[static_cast<std::size_t>(j)]);
  row[static_cast<std::size_t>(m)] = iv_meet(row[static_cast<std::size_t>(m)], iv_sub(iv_point(S(total)), rest));
}

/// The softmax of row entries [first, last) of logit intervals, in place:
/// exp(x − t)/Σ exp(x − t) with t near the largest logit (any shift is
/// exact for a softmax), then sum_to 1.
template <class S> void iv_softmax(std::vector<Iv<S>>& x, Eigen::Index first, Eigen::Index last) {
  S top = x[static_cast<std::size_t>(first)].lo;
  for (Eigen::Index j = first; j < last; ++j)
    if (x[static_cast<std::size_t>(j)].lo > top) top = x[static_cast<std::size_t>(j)].lo;
  Iv<S> sum = iv_point(S(0));
  for (Eigen::Index j = first; j < last; ++j) {
    Iv<S>& v = x[static_cast<std::size_t>(j)];
    v = iv_exp(iv_sub(v, iv_point(top)), false);
    sum = iv_add(sum, v);
  }
  for (Eigen::Index j = first; j < last; ++j)
    x[static_cast<std::size_t>(j)] = iv_div_positive(x[static_cast<std::size_t>(j)], sum);
  sum_to(x, first, last, 1);
}

/// One head's P R_V split as 1 wᵀ + F (w: 1×d_v, F: n×d_v), from the
/// first-order logits `logit(i, j)` (an interval of A⁰ + A¹, math.md §7.1)
/// and the second-order ball S (n×n): see the header. `rows_differ`: Π's
/// rows are not all one row (a mask, a window, positions). Every entry of
/// Π, e, s, E and P is an interval.
template <class S> struct RowSplit {
  RowBall<S> c, R;
};
template <class S, class Logit>
RowSplit<S> head_split(const Logit& logit, bool rows_differ, const BallMatrix<S>& Sm, const RowBall<S>& RV,
                       MaskKind mask, Eigen::Index window, long p) {
  const Eigen::Index n = Sm.mid.rows();
  // Π's row i over the keys [first, last) it sees: the softmax of the first-order logits.
  const auto pi_row = [&](Eigen::Index i, Eigen::Index first, Eigen::Index last) {
    std::vector<Iv<S>> a(static_cast<std::size_t>(n), iv_point(S(0)));
    for (Eigen::Index j = first; j < last; ++j) a[static_cast<std::size_t>(j)] = logit(i, j);
    iv_softmax(a, first, last);
    return a;
  };
  const std::vector<Iv<S>> pi_all = rows_differ ? std::vector<Iv<S>>{} : pi_row(0, 0, n);
  // Row i of E (Π's rows alike) or of P (they differ). Rows whose logits S
  // all lie within ½ of 0: from e = expm1(S) and s = Σ Π e (no cancellation
  // against 1); other rows: P from the stable softmax of (A⁰ + A¹) + S
  // (1 + s would cancel), and E = P − Π.
  const S half = S(1) / S(2);
  const BallMatrix<S> A = ball_of_rows<S>(n, n, [&](Eigen::Index i, std::vector<Iv<S>>& row) {
    const auto [first, last] = detail::visible_keys(i, n, mask, window);
    const std::vector<Iv<S>> pi = rows_differ ? pi_row(i, first, last) : pi_all;
    for (Eigen::Index j = 0; j < n; ++j)
      if (j < first || j >= last) row[static_cast<std::size_t>(j)] = iv_point(S(0));  // masked: exactly 0
    bool small = true;
    for (Eigen::Index j = first; j < last; ++j) small = small && abs(Sm.mid(i, j)) <= half;
    if (!small) {
      std::vector<Iv<S>> logits(static_cast<std::size_t>(n));
      for (Eigen::Index j = first; j < last; ++j)
        logits[static_cast<std::size_t>(j)] = iv_add(logit(i, j), iv_of(Sm.mid(i, j), Sm.rad.at(i, j)));
      iv_softmax(logits, first, last);
      for (Eigen::Index j = first; j < last; ++j) {
        const Iv<S>& P = logits[static_cast<std::size_t>(j)];
        row[static_cast<std::size_t>(j)] = rows_differ ? P : iv_sub(P, pi[static_cast<std::size_t>(j)]);
      }
      if (!rows_differ) sum_to(row, first, last, 0);
      return;
    }
    std::vector<Iv<S>> e(static_cast<std::size_t>(n));
    Iv<S> s = iv_point(S(0));
    for (Eigen::Index j = first; j < last; ++j) {
      e[static_cast<std::size_t>(j)] = iv_exp(iv_of(Sm.mid(i, j), Sm.rad.at(i, j)), true);
      s = iv_add(s, iv_mul(pi[static_cast<std::size_t>(j)], e[static_cast<std::size_t>(j)]));
    }
    const Iv<S> one = iv_point(S(1)), denominator = iv_add(one, s);
    for (Eigen::Index j = first; j < last; ++j) {
      const Iv<S>& ej = e[static_cast<std::size_t>(j)];
      const Iv<S> top = rows_differ ? iv_add(one, ej) : iv_sub(ej, s);
      row[static_cast<std::size_t>(j)] = iv_div_positive(iv_mul(pi[static_cast<std::size_t>(j)], top), denominator);
    }
    sum_to(row, first, last, rows_differ ? 1 : 0);
  });
  RowSplit<S> out;
  if (!rows_differ) {
    // P R_V = 1 πᵀR_V + E R_V.
    const BallMatrix<S> pi = ball_of_rows<S>(1, n, [&](Eigen::Index, std::vector<Iv<S>>& row) { row = pi_all; });
    out.c = times_rows(pi, RV, p);
    out.R = times_rows(A, RV, p);
    return out;
  }
  // P R_V = 1 (R_V)_kᵀ + (P − 1e_kᵀ) R_V, k the key of largest column sum;
  // (P − 1e_kᵀ)_ik = −Σ_{j≠k} P_ij on the intervals of P's row.
  const Eigen::Index k = detail::heaviest_key(A.mid);
  const BallMatrix<S> F = ball_of_rows<S>(n, n, [&](Eigen::Index i, std::vector<Iv<S>>& row) {
    Iv<S> rest = iv_point(S(0));
    for (Eigen::Index j = 0; j < n; ++j) {
      row[static_cast<std::size_t>(j)] = iv_of(A.mid(i, j), A.rad.at(i, j));
      if (mpfr_zero_p(ptr(A.mid(i, j))) && A.rad.at(i, j).is_zero()) row[static_cast<std::size_t>(j)] = iv_point(S(0));
      if (j != k) rest = iv_add(rest, row[static_cast<std::size_t>(j)]);
    }
    row[static_cast<std::size_t>(k)] = iv_neg(rest);
  });
  out.c = {rows_of(RV.B, k, 1), RV.rows.block(k, 0, 1, 1), RV.width};
  out.R = times_rows(F, RV, p);
  return out;
}

/// 1 g(c)ᵀ + Δ → (g(c) + mean Δ, Δ − 1 mean(Δ)ᵀ), with the row bounds
/// (those of g(c) and Δ where given, else their radii's).
template <class S> BallSplit<S> recentre(RowBall<S> gc, RowBall<S> Delta, long p) {
  tighten(gc);
  tighten(Delta);
  const RowBall<S> mean = take_mean_rows(Delta, p);
  RowBall<S> c = sum_rows(gc, mean, p);
  return {std::move(c.B), std::move(Delta.B), std::move(c.rows), std::move(Delta.rows)};
}

/// A rows × cols matrix of the bound b.
inline RadiusMatrix filled(Eigen::Index rows, Eigen::Index cols, const UpperBound& b) {
  return {MatrixXd::Constant(rows, cols, b.m), b.e};
}

/// X evaluated at midpoints within its radii ρ, moved by the inputs' errors:
/// every radius widened by entry(i, j), and row i's bound row(i) + ‖ρ_i‖₂
/// (row(i) = +inf: the widened radii's own, as tighten derives).
template <class S, class Entry, class Row> void moved_by(RowBall<S>& X, Entry&& entry, Row&& row) {
  const RadiusMatrix rho_rows = row_norms_up(X.B.rad);
  X.B.rad = X.B.rad + radius_from(X.B.mid.rows(), X.B.mid.cols(), entry);
  X.rows = radius_from(X.B.mid.rows(), 1, [&](Eigen::Index i, Eigen::Index) {
    const UpperBound r = row(i);
    return r.is_finite() ? r + rho_rows.at(i, 0) : r;
  });
}

/// The largest of |values| as an upper bound (exact).
inline UpperBound largest_abs(const VectorXd& values) {
  return UpperBound::of(values.size() ? values.cwiseAbs().maxCoeff() : 0.0);
}

/// |r̃_ij| + r_ij, the reach of row i's residual beyond the centre.
template <class S> UpperBound reach(const BallMatrix<S>& R, Eigen::Index i, Eigen::Index j) {
  return UpperBound::abs_of(R.mid(i, j).backend().data()) + R.rad.at(i, j);
}

/// √a for a > 0, rounded outward (throws when a may be ≤ 0).
template <class S> Iv<S> iv_sqrt_positive(const Iv<S>& a) {
  if (mpfr_sgn(ptr(a.lo)) <= 0)
    throw NumericalError("certified enclosures: a LayerNorm variance + eps is not bounded away from 0 at " +
                         std::to_string(precision_bits_v<S>) + " bits");
  Iv<S> v;
  mpfr_sqrt(ptr(v.lo), ptr(a.lo), MPFR_RNDD);
  mpfr_sqrt(ptr(v.hi), ptr(a.hi), MPFR_RNDU);
  return v;
}

/// x − mean(x) of a row of intervals.
template <class S> std::vector<Iv<S>> iv_centred(std::vector<Iv<S>> x) {
  Iv<S> mean = iv_point(S(0));
  for (const Iv<S>& v : x) mean = iv_add(mean, v);
  mean = iv_div_int(mean, static_cast<long>(x.size()));
  for (Iv<S>& v : x) v = iv_sub(v, mean);
  return x;
}

/// ≥ 1 / min s(w) over the rows w within ν of a row x̃ with √(var(x̃) + eps)
/// in `s` (s(w) = √(var(w) + eps)): d·var(w) = ‖ŵ‖² ≥ (‖x̂‖ − ν)² where
/// ‖x̂‖² = d(s² − eps). RMSNorm is the same map without the centring
/// (ŵ = w, var the mean square), so this and the two bounds below hold for it
/// as they are.
template <class S> UpperBound inverse_scale_up(const Iv<S>& s, const UpperBound& nu, const Iv<S>& eps, long d) {
  S t;
  mpfr_sqr(ptr(t), ptr(s.lo), MPFR_RNDD);
  mpfr_sub(ptr(t), ptr(t), ptr(eps.hi), MPFR_RNDD);
  if (mpfr_sgn(ptr(t)) < 0) mpfr_set_zero(ptr(t), 1);
  mpfr_mul_si(ptr(t), ptr(t), d, MPFR_RNDD);
  mpfr_sqrt(ptr(t), ptr(t), MPFR_RNDD);  // ≤ ‖x̂‖
  if (!nu.is_finite()) mpfr_set_zero(ptr(t), 1);
  else mpfr_sub(ptr(t), ptr(t), nu.to_big().backend().data(), MPFR_RNDD);
  if (mpfr_sgn(ptr(t)) < 0) mpfr_set_zero(ptr(t), 1);
  mpfr_sqr(ptr(t), ptr(t), MPFR_RNDD);
  mpfr_div_si(ptr(t), ptr(t), d, MPFR_RNDD);
  mpfr_add(ptr(t), ptr(t), ptr(eps.lo), MPFR_RNDD);
  mpfr_sqrt(ptr(t), ptr(t), MPFR_RNDD);  // ≤ s(w), > 0 with eps > 0
  if (mpfr_sgn(ptr(t)) <= 0) return UpperBound::infinite();
  mpfr_ui_div(ptr(t), 1, ptr(t), MPFR_RNDU);
  return UpperBound::abs_of(ptr(t));
}

/// ≥ max|γ| / min s(w), a Lipschitz constant of w ↦ LN(w) (or RMSNorm) over the rows w
/// within ν of x̃ (inverse_scale_up): ‖DLN(w)‖₂ = max|γ|/s(w) (the centring
/// is a projection and the normalisation's Jacobian (I − ŵŵᵀ/(d s²))/s has
/// norm 1/s).
template <class S>
UpperBound norm_lipschitz(const Iv<S>& s, const UpperBound& nu, const Iv<S>& eps, long d, const UpperBound& gmax) {
  return inverse_scale_up(s, nu, eps, d) * gmax;
}

/// ≥ ‖D²LN(w)‖ (or RMSNorm's; as a bilinear map, Euclidean norms) over the rows w within ν
/// of x̃: with y = ŵ and σ = s(w), g(y) = y/σ has
/// D²g[u, v] = −(u yᵀv + v yᵀu + y uᵀv)/(dσ³) + 3y (yᵀu)(yᵀv)/(d²σ⁵), and
/// ‖y‖ ≤ √d σ bounds its first three terms by ‖u‖‖v‖/(√d σ²) each and the
/// last by 3‖u‖‖v‖/(√d σ²): 6 max|γ| / (√d min s(w)²) (the centring is a
/// projection, γ scales each entry).
template <class S>
UpperBound norm_curvature(const Iv<S>& s, const UpperBound& nu, const Iv<S>& eps, long d, const UpperBound& gmax) {
  const UpperBound inv = inverse_scale_up(s, nu, eps, d);
  const UpperBound six_over_root_d = UpperBound::of(6.0 / std::sqrt(static_cast<double>(d)) * (1 + 1e-14));  // ≥ 6/√d
  return six_over_root_d * inv * inv * gmax;
}

/// N(1cᵀ + R) for LayerNorm or RMSNorm (gain γ = g, or 1 + g), enclosed
/// through the identity of forward_centred's norm_centred (exact for every
/// r_i, and without cancellation against c): with ĉ = c − mean(c) and
/// r̃_i = r_i − mean(r_i) (LayerNorm; RMSNorm: ĉ = c, r̃_i = r_i),
/// s² = |ĉ|²/d + eps, δv_i = (2ĉ·r̃_i + |r̃_i|²)/d and s'_i² = s² + δv_i,
/// N(c + r_i) − N(c) = γ ∘ (r̃_i/s'_i − ĉ δv_i/(s s'_i (s + s'_i))),
/// every operation on intervals: over the boxes of c and r_i (entrywise), or
/// with row bounds at the midpoints within ρ_i plus, in norm,
///   Lip_i·ν^R_i + min(Lip_i·ν^c + Lip_c·ν^c, K_i·‖r̃_i‖·ν^c)
/// (norm_lipschitz: the norm moves a row by at most Lip times its distance,
/// not by the boxes' √d-fold sum; the difference's own move with c is
/// LN(c + r̃) − LN(c̃ + r̃) − (LN(c) − LN(c̃)), within the curvature bound K_i
/// of norm_curvature times ‖r̃_i‖ν^c: second order where R has
/// collapsed below c's error); LN(c) likewise at the midpoint within Lip_c·ν^c.
template <class S>
BallSplit<S> norm_centred(const detail::NormForm& form, const BallSplit<S>& x, const VectorXd& gain,
                          const VectorXd& bias, bool row_bounds, long p) {
  const Eigen::Index n = x.R.mid.rows(), d = x.R.mid.cols();
  const bool layer = form.kind == NormKind::layer, unit_offset = form.unit_offset && !layer;
  std::vector<Iv<S>> c(static_cast<std::size_t>(d)), c_mid(c.size()), g(c.size());
  for (Eigen::Index j = 0; j < d; ++j) {
    c[static_cast<std::size_t>(j)] = iv_of(x.c.mid(0, j), x.c.rad.at(0, j));
    c_mid[static_cast<std::size_t>(j)] = iv_point(x.c.mid(0, j));
    g[static_cast<std::size_t>(j)] = unit_offset ? iv_add(iv_point(S(1)), iv_point(S(gain(j)))) : iv_point(S(gain(j)));
  }
  // x − mean(x) for LayerNorm, x itself for RMSNorm.
  const auto reduce = [layer](std::vector<Iv<S>> y) { return layer ? iv_centred(std::move(y)) : y; };
  const Iv<S> eps_iv = iv_decimal<S>(form.eps);
  // ĉ, s² = var(c) + eps and s of a centre row (boxes or points).
  struct Centre {
    std::vector<Iv<S>> ch;
    Iv<S> s2, s;
  };
  const auto centre_of = [&](const std::vector<Iv<S>>& cv) {
    Centre k{reduce(cv), iv_point(S(0)), iv_point(S(0))};
    for (const Iv<S>& v : k.ch) k.s2 = iv_add(k.s2, iv_sqr(v));
    k.s2 = iv_add(iv_div_int(k.s2, static_cast<long>(d)), eps_iv);
    k.s = iv_sqrt_positive(k.s2);
    return k;
  };
  // The identity on row r (boxes or points) about centre k; returns s'.
  const auto difference = [&](const Centre& k, std::vector<Iv<S>> r, std::vector<Iv<S>>& row) {
    r = reduce(std::move(r));
    Iv<S> cr = iv_point(S(0)), rr = iv_point(S(0));
    for (Eigen::Index j = 0; j < d; ++j) {
      cr = iv_add(cr, iv_mul(k.ch[static_cast<std::size_t>(j)], r[static_cast<std::size_t>(j)]));
      rr = iv_add(rr, iv_sqr(r[static_cast<std::size_t>(j)]));
    }
    const Iv<S> dv = iv_div_int(iv_add(iv_add(cr, cr), rr), static_cast<long>(d));
    const Iv<S> s1 = iv_sqrt_positive(iv_add(k.s2, dv));
    const Iv<S> q = iv_div_positive(dv, iv_mul(iv_mul(k.s, s1), iv_add(k.s, s1)));
    for (Eigen::Index j = 0; j < d; ++j) {
      const auto ju = static_cast<std::size_t>(j);
      row[ju] = iv_mul(iv_sub(iv_div_positive(r[ju], s1), iv_mul(k.ch[ju], q)), g[ju]);
    }
    return s1;
  };
  const Centre box = centre_of(c);
  std::vector<Iv<S>> gc_iv = row_bounds ? c_mid : c;
  normalize_row(gc_iv, gain, bias, form.eps, !layer, unit_offset);
  RowBall<S> gc = row_ball(ball_of_rows<S>(1, d, [&](Eigen::Index, std::vector<Iv<S>>& row) { row = gc_iv; }));
  const RadiusMatrix R_rows = x.R_rows.m.size() ? x.R_rows : row_norms_up(x.R.rad);
  const UpperBound nu_c = x.c_rows.m.size() ? x.c_rows.at(0, 0) : row_norms_up(x.c.rad).at(0, 0);
  const UpperBound gmax = unit_offset ? UpperBound::of(1.0) + largest_abs(gain) : largest_abs(gain);  // ≥ max|γ|
  Centre point;
  UpperBound c_moves;  // Lip_c·ν^c ≥ ‖LN(c) − LN(c̃)‖₂
  if (row_bounds) {
    point = centre_of(c_mid);
    c_moves = norm_lipschitz(point.s, nu_c, eps_iv, static_cast<long>(d), gmax) * nu_c;
    gc.B.rad = gc.B.rad + filled(1, d, c_moves);
    gc.rows = gc.rows + filled(1, 1, c_moves);
  }
  std::vector<UpperBound> moves(static_cast<std::size_t>(n), UpperBound::infinite());  // with row bounds: the rows' moves
  const RadiusMatrix r_norms = row_bounds ? row_norms_up(RadiusMatrix::abs_of(x.R.mid)) : RadiusMatrix{};
  RowBall<S> Delta = row_ball(ball_of_rows<S>(n, d, [&](Eigen::Index i, std::vector<Iv<S>>& row) {
    const UpperBound nu_r = R_rows.at(i, 0);
    std::vector<Iv<S>> r(static_cast<std::size_t>(d));
    if (row_bounds) {
      for (Eigen::Index j = 0; j < d; ++j) r[static_cast<std::size_t>(j)] = iv_point(x.R.mid(i, j));
      const Iv<S> s1 = difference(point, std::move(r), row);
      const UpperBound lip = norm_lipschitz(s1, nu_c + nu_r, eps_iv, static_cast<long>(d), gmax);
      const UpperBound r_norm = r_norms.at(i, 0);
      const UpperBound first_order = lip * nu_c + c_moves,
                       second_order = norm_curvature(point.s, nu_c + r_norm, eps_iv, static_cast<long>(d), gmax) *
                                      r_norm * nu_c;
      moves[static_cast<std::size_t>(i)] = lip * nu_r + (second_order <= first_order ? second_order : first_order);
      if (moves[static_cast<std::size_t>(i)].is_finite()) return;
      r.assign(static_cast<std::size_t>(d), Iv<S>{});  // s(w) not bounded away from 0 within the bounds: the boxes
    }
    for (Eigen::Index j = 0; j < d; ++j) r[static_cast<std::size_t>(j)] = iv_of(x.R.mid(i, j), x.R.rad.at(i, j));
    difference(box, std::move(r), row);
  }));
  if (row_bounds) {
    const auto moved = [&](Eigen::Index i) { return moves[static_cast<std::size_t>(i)]; };
    moved_by(Delta, [&](Eigen::Index i, Eigen::Index) { return moved(i).is_finite() ? moved(i) : UpperBound{}; }, moved);
  }
  return recentre(std::move(gc), std::move(Delta), p);
}

/// The rows of a one-row ball (its bounds too) repeated n times: the
/// centre's query or key at every position.
template <class S> RowBall<S> repeated(const RowBall<S>& x, Eigen::Index n) {
  return {{x.B.mid.replicate(n, 1), RadiusMatrix{x.B.rad.m.replicate(n, 1), x.B.rad.exp}},
          RadiusMatrix{x.rows.m.replicate(n, 1), x.rows.exp}, x.width};
}

/// rotate_heads on a row ball with one block per head: the exact rotation
/// keeps each block's distance to the midpoint (it is orthogonal on the
/// block), so the bounds move only by the rotation's own error at the
/// midpoint (cos, sin and roundings: rotate_heads' `own` part).
template <class S> void rotate_rows(RowBall<S>& M, const BallRotary<S>& t, Eigen::Index heads, long p) {
  RadiusMatrix own;
  rotate_heads(M.B, t, heads, M.width, p, &own);
  M.rows = M.rows + block_row_norms(own, M.width);
  tighten(M);
}

/// cosh on an interval, least at the point of a nearest 0; rounded outward.
template <class S> Iv<S> iv_cosh(const Iv<S>& a) {
  Iv<S> ch;
  if (mpfr_sgn(ptr(a.lo)) > 0) {
    mpfr_cosh(ptr(ch.lo), ptr(a.lo), MPFR_RNDD);
    mpfr_cosh(ptr(ch.hi), ptr(a.hi), MPFR_RNDU);
  } else if (mpfr_sgn(ptr(a.hi)) < 0) {
    mpfr_cosh(ptr(ch.lo), ptr(a.hi), MPFR_RNDD);
    mpfr_cosh(ptr(ch.hi), ptr(a.lo), MPFR_RNDU);
  } else {
    mpfr_set_ui(ptr(ch.lo), 1, MPFR_RNDN);
    mpfr_cosh(ptr(ch.hi), mpfr_cmpabs(ptr(a.lo), ptr(a.hi)) > 0 ? ptr(a.lo) : ptr(a.hi), MPFR_RNDU);
  }
  return ch;
}

/// Gemma 2's soft cap κ tanh(·/κ) on logits split as F + S (F = A⁰ + A¹,
/// S second order, math.md §7.1): F ← κ tanh(F/κ) (soft_cap) and
/// S ← κ(tanh(a + b) − tanh a), a = F/κ, b = S/κ, on the intersection of
/// two enclosures: κ sinh b / (cosh a · cosh(a + b)), relative to S where
/// it is small (the addition formula's denominator 1 + tanh a · tanh b,
/// near 0 where a and b are large and of opposite signs, never formed), and
/// the difference of the two tanh intervals, tight where a or a + b
/// saturates (each within sech² times its argument's radius).
template <class S> void soft_cap_split(BallMatrix<S>& F, BallMatrix<S>& Sm, double softcap) {
  const Iv<S> cap = iv_decimal<S>(softcap);
  if (mpfr_sgn(ptr(cap.lo)) <= 0) throw std::invalid_argument("certified enclosures: a soft cap ≤ 0 is not enclosed");
  const Iv<S> inv = iv_div_positive(iv_point(S(1)), cap);
  const Eigen::Index n = F.mid.rows(), m = F.mid.cols();
  Sm = ball_of_rows<S>(n, m, [&](Eigen::Index i, std::vector<Iv<S>>& row) {
    for (Eigen::Index j = 0; j < m; ++j) {
      const Iv<S> a = iv_mul(iv_of(F.mid(i, j), F.rad.at(i, j)), inv), b = iv_mul(iv_of(Sm.mid(i, j), Sm.rad.at(i, j)), inv);
      Iv<S> sinh_b;  // increasing
      mpfr_sinh(ptr(sinh_b.lo), ptr(b.lo), MPFR_RNDD);
      mpfr_sinh(ptr(sinh_b.hi), ptr(b.hi), MPFR_RNDU);
      const Iv<S> ab = iv_add(a, b);
      row[static_cast<std::size_t>(j)] = iv_mul(cap, iv_meet(iv_div_positive(sinh_b, iv_mul(iv_cosh(a), iv_cosh(ab))),
                                                             iv_sub(iv_tanh(ab), iv_tanh(a))));
    }
  });
  soft_cap(F, softcap);
}



/// Attn(1cᵀ + R) as an enclosed split (math.md §7, §7.1, with the header's
/// rules). Queries, keys and values are q0 = cᵀW_Q + b_Q (and k0, c_v) plus
/// R W_Q (R W_K, R W_V); the query/key norms map each head's pair as row-wise
/// maps (norm_centred); then per head either math.md §1's bilinear logits
/// (v_j = q0·(R W_K)_j and S = R W_Q (R W_K)ᵀ, scaled; Π the softmax of v)
/// or, where positions enter (rotary angles on the centre's rows at every
/// position and on the residual's, XLNet's relative terms, T5's bucket bias,
/// a soft cap), A⁰ + A¹ = Q0 K0ᵀ + Q0 (δK)ᵀ + δQ K0ᵀ (+ the position terms)
/// and S = δQ (δK)ᵀ, never a difference of logits; head_split gives
/// P R_V under the mask and the layer's window.
template <class S>
BallSplit<S> attention_centred(const Architecture& a, const detail::PackedLayer<S>& w, const LayerWeights& lw,
                               const BallPositions<S>& pos, int layer, const BallSplit<S>& x, MaskKind mask,
                               Eigen::Index window, bool row_bounds, long p) {
  const Eigen::Index n = x.R.mid.rows(), H = a.heads, dq = a.d_qk, dv = a.d_v;
  const bool bilinear = detail::bilinear_logits(a);
  // ‖W‖₂ bounds: the query, key and value heads', W_O's whole (none: +inf).
  std::vector<UpperBound> sQ(static_cast<std::size_t>(H), UpperBound::infinite()), sK(sQ), sV(sQ), sO(1, sQ[0]);
  if (row_bounds) detail::run_blocks(static_cast<std::size_t>(3 * H + 1), product_threads(), [&](std::size_t t) {
    const auto h = static_cast<Eigen::Index>(t % static_cast<std::size_t>(H));
    if (t == static_cast<std::size_t>(3 * H))
      sO[0] = spectral_norm_up(w.WO);
    else if (t < static_cast<std::size_t>(H))
      sQ[t] = spectral_norm_up(w.WQ.middleCols(h * dq, dq));
    else if (t < static_cast<std::size_t>(2 * H))
      sK[t - static_cast<std::size_t>(H)] = spectral_norm_up(w.WK.middleCols(h * dq, dq));
    else
      sV[t - static_cast<std::size_t>(2 * H)] = spectral_norm_up(w.WV.middleCols(h * dv, dv));
  });
  const RowBall<S> xc = row_ball(x.c, x.c_rows), xR = row_ball(x.R, x.R_rows);
  RowBall<S> q0 = times_weights_rows(xc, w.WQ, sQ, dq, p), cv = times_weights_rows(xc, w.WV, sV, dv, p), k0;
  add_bias_rows(q0, w.bQ, p);
  add_bias_rows(cv, w.bV, p);
  RowBall<S> QR = times_weights_rows(xR, w.WQ, sQ, dq, p), KR = times_weights_rows(xR, w.WK, sK, dq, p);
  const RowBall<S> VR = times_weights_rows(xR, w.WV, sV, dv, p);
  if (!bilinear) {
    k0 = times_weights_rows(xc, w.WK, sK, dq, p);
    add_bias_rows(k0, w.bK, p);
  }
  if (a.query_key_norm)  // every head's query and key rows (families.md), as row-wise maps on the pair
    for (const auto& [centre, rest, at] : {std::tuple{&q0, &QR, detail::NormAt::query},
                                            std::tuple{&k0, &KR, detail::NormAt::key}}) {
      std::vector<RowBall<S>> cs, rs;
      for (Eigen::Index h = 0; h < H; ++h) {
        const RowBall<S> ch = block(*centre, h), rh = block(*rest, h);
        const BallSplit<S> y = norm_centred(detail::norm_form(a, at), BallSplit<S>{ch.B, rh.B, ch.rows, rh.rows},
                                            *detail::norm_parameters(lw, at).first, VectorXd::Zero(dq).eval(),
                                            row_bounds, p);
        cs.push_back({y.c, y.c_rows, dq});
        rs.push_back({y.R, y.R_rows, dq});
      }
      *centre = side_by_side_rows(cs);
      *rest = side_by_side_rows(rs);
    }
  // Where positions enter: the centre's query and key at every position, all rotated by position.
  RowBall<S> Q0, K0, RK;
  if (!bilinear) {
    Q0 = repeated(q0, n);
    K0 = repeated(k0, n);
    if (a.rotary())
      for (RowBall<S>* M : {&Q0, &K0, &QR, &KR}) rotate_rows(*M, pos.rotary_at(layer), H, p);
    if (a.xlnet_relative) {
      RK = {times_weights(*pos.sinusoid, w.WR, p), RadiusMatrix{}, dq};
      tighten(RK);
    }
  }
  std::vector<RowSplit<S>> parts(static_cast<std::size_t>(H));
  detail::run_blocks(static_cast<std::size_t>(H), product_threads(), [&](std::size_t hu) {
    use_full_mpfr_exponent_range();
    check_interrupt();
    const auto h = static_cast<Eigen::Index>(hu);
    const RowBall<S> QRh = block(QR, h), KRh = block(KR, h);
    BallMatrix<S> Sm = times_nt_rows(QRh, KRh, p);
    scale_scores(Sm, a, p);
    if (bilinear) {
      BallMatrix<S> v = times_nt_rows(KRh, block(q0, h), p);  // n×1
      scale_scores(v, a, p);
      parts[hu] = head_split([&](Eigen::Index, Eigen::Index j) { return iv_of(v.mid(j, 0), v.rad.at(j, 0)); },
                             mask != MaskKind::none, Sm, block(VR, h), mask, window, p);
      return;
    }
    // XLNet: content queries q + r_w against the keys, position queries q + r_r against the sinusoid times W_R.
    RowBall<S> Qc = block(Q0, h);
    if (a.xlnet_relative) add_bias_rows(Qc, RowVector<S>(w.rw.middleCols(h * dq, dq)), p);
    const RowBall<S> K0h = block(K0, h);
    BallMatrix<S> F = sum(sum(times_nt_rows(Qc, K0h, p), times_nt_rows(Qc, KRh, p), p), times_nt_rows(QRh, K0h, p), p);
    if (a.xlnet_relative) {
      RowBall<S> Qp = block(Q0, h);
      add_bias_rows(Qp, RowVector<S>(w.rr.middleCols(h * dq, dq)), p);
      const RowBall<S> RKh = block(RK, h);
      add_relative(F, times_nt_rows(Qp, RKh, p), p);
      add_relative(F, times_nt_rows(QRh, RKh, p), p);
    }
    if (a.rel_buckets > 0) add_bucket_bias(F, a, w.pos_bias, h, p);
    scale_scores(F, a, p);
    if (a.softcap) soft_cap_split(F, Sm, *a.softcap);
    parts[hu] = head_split([&](Eigen::Index i, Eigen::Index j) { return iv_of(F.mid(i, j), F.rad.at(i, j)); }, true,
                           Sm, block(VR, h), mask, window, p);
  });
  std::vector<RowBall<S>> centre, rest;
  for (RowSplit<S>& part : parts) {
    centre.push_back(std::move(part.c));
    rest.push_back(std::move(part.R));
  }
  RowBall<S> Mr = whole(side_by_side_rows(rest));
  RowBall<S> Mc = sum_rows(whole(cv), whole(side_by_side_rows(centre)), p);
  Mc = sum_rows(Mc, take_mean_rows(Mr, p), p);
  const Eigen::Index d = w.WO.cols();
  RowBall<S> c = times_weights_rows(Mc, w.WO, sO, d, p), R = times_weights_rows(Mr, w.WO, sO, d, p);
  add_bias_rows(c, w.bO, p);
  return {std::move(c.B), std::move(R.B), std::move(c.rows), std::move(R.rows)};
}

/// The standard normal density φ(x) = exp(−x²/2)/√(2π) on an interval.
template <class S> Iv<S> iv_normal_density(const Iv<S>& x) {
  Iv<S> g = iv_half(iv_neg(iv_sqr(x)));
  g = iv_exp(g, false);
  Iv<S> root;  // √(2π)
  mpfr_const_pi(ptr(root.lo), MPFR_RNDD);
  mpfr_mul_2ui(ptr(root.lo), ptr(root.lo), 1, MPFR_RNDD);
  mpfr_sqrt(ptr(root.lo), ptr(root.lo), MPFR_RNDD);
  mpfr_const_pi(ptr(root.hi), MPFR_RNDU);
  mpfr_mul_2ui(ptr(root.hi), ptr(root.hi), 1, MPFR_RNDU);
  mpfr_sqrt(ptr(root.hi), ptr(root.hi), MPFR_RNDU);
  return iv_div_positive(g, root);
}

/// The tanh GELU's parts on an interval: t = tanh(u), u = c(x + kx³),
/// u' = c(1 + 3kx²), u'' = 6ckx (c = √(2/π), or 0.7978845608 for gelu_fast).
template <class S> struct TanhGeluParts {
  Iv<S> t, du, ddu;
};
template <class S> TanhGeluParts<S> iv_tanh_gelu_parts(const Iv<S>& x, Activation act) {
  const Iv<S> c = iv_tanh_gelu_scale<S>(act);
  const Iv<S> k = iv_decimal<S>(0.044715), x2 = iv_sqr(x), one = iv_point(S(1));
  const Iv<S> u = iv_mul(c, iv_add(x, iv_mul(k, iv_mul(x, x2))));
  TanhGeluParts<S> parts;
  parts.t = iv_tanh(u);
  parts.du = iv_mul(c, iv_add(one, iv_mul(iv_point(S(3)), iv_mul(k, x2))));
  parts.ddu = iv_mul(iv_mul(iv_point(S(6)), iv_mul(c, k)), x);
  return parts;
}

/// σ(x) = 1/(1 + e^{−x}) on an interval.
template <class S> Iv<S> iv_sigmoid(const Iv<S>& x) {
  const Iv<S> one = iv_point(S(1));
  return iv_div_positive(one, iv_add(one, iv_exp(iv_neg(x), false)));
}

/// act'(x) on an interval (a bound of every difference quotient of act over
/// it: relu's is [0, 1] across 0).
template <class S> Iv<S> iv_derivative(const Iv<S>& x, Activation act) {
  const Iv<S> one = iv_point(S(1));
  switch (act) {
    case Activation::relu: {
      Iv<S> v;
      v.lo = x.lo > 0 ? S(1) : S(0);
      v.hi = x.hi > 0 ? S(1) : S(0);
      return v;
    }
    case Activation::gelu: {  // Φ(x) + x φ(x)
      const Iv<S> a = iv_mul(x, iv_inverse_sqrt2<S>());
      Iv<S> Phi;
      mpfr_erf(ptr(Phi.lo), ptr(a.lo), MPFR_RNDD);
      mpfr_erf(ptr(Phi.hi), ptr(a.hi), MPFR_RNDU);
      Phi = iv_half(iv_add(one, Phi));
      return iv_add(Phi, iv_mul(x, iv_normal_density(x)));
    }
    case Activation::gelu_tanh:
    case Activation::gelu_fast: {  // ½(1 + t) + ½ x (1 − t²) u'
      const TanhGeluParts<S> g = iv_tanh_gelu_parts(x, act);
      return iv_half(iv_add(iv_add(one, g.t), iv_mul(iv_mul(x, iv_sub(one, iv_sqr(g.t))), g.du)));
    }
    case Activation::silu: {  // σ(1 + x(1 − σ))
      const Iv<S> sg = iv_sigmoid(x);
      return iv_mul(sg, iv_add(one, iv_mul(x, iv_sub(one, sg))));
    }
  }
  throw std::logic_error("iv_derivative: unknown activation");
}

/// ≥ |act''| over an interval, a bound of every difference quotient of act'
/// over it: gelu φ(x)(2 − x²); the tanh GELUs (1 − t²)(u' + ½x(u'' − 2t u'²));
/// silu σ(1 − σ)(2 + x(1 − 2σ)); relu 0 on one side of 0 and +inf across it
/// (its derivative jumps there).
template <class S> UpperBound second_derivative_bound(const Iv<S>& x, Activation act) {
  const Iv<S> one = iv_point(S(1));
  Iv<S> v;
  switch (act) {
    case Activation::relu:
      return mpfr_sgn(ptr(x.lo)) > 0 || mpfr_sgn(ptr(x.hi)) < 0 ? UpperBound{} : UpperBound::infinite();
    case Activation::gelu:
      v = iv_mul(iv_normal_density(x), iv_sub(iv_point(S(2)), iv_sqr(x)));
      break;
    case Activation::gelu_tanh:
    case Activation::gelu_fast: {
      const TanhGeluParts<S> g = iv_tanh_gelu_parts(x, act);
      const Iv<S> half_x = iv_half(x);
      const Iv<S> inner = iv_sub(g.ddu, iv_mul(iv_point(S(2)), iv_mul(g.t, iv_sqr(g.du))));
      v = iv_mul(iv_sub(one, iv_sqr(g.t)), iv_add(g.du, iv_mul(half_x, inner)));
      break;
    }
    case Activation::silu: {
      const Iv<S> sg = iv_sigmoid(x);
      const Iv<S> spread = iv_mul(sg, iv_sub(one, sg));
      v = iv_mul(spread, iv_add(iv_point(S(2)), iv_mul(x, iv_sub(one, iv_mul(iv_point(S(2)), sg)))));
      break;
    }
  }
  return max(UpperBound::abs_of(ptr(v.lo)), UpperBound::abs_of(ptr(v.hi)));
}

/// Intervals at a wider precision (the difference act(h + δ) − act(h) where
/// |δ| is between u and 2^-8 of |h|: its cancellation costs up to p bits).
template <class S> struct wider;
template <unsigned D> struct wider<mpfr_real<D>> {
  using type = mpfr_real<2 * D + 2>;
};

template <class T, class S> Iv<T> iv_convert(const Iv<S>& a) {  // exact: T has more bits
  Iv<T> v;
  mpfr_set(ptr(v.lo), ptr(a.lo), MPFR_RNDD);
  mpfr_set(ptr(v.hi), ptr(a.hi), MPFR_RNDU);
  return v;
}

/// act(h + δ) − act(h) for h, δ in intervals, |δ| measured against
/// t = max(1, |h|): by the mean value form act'(h ± (|δ| + r_h))·δ when
/// |δ| ≤ 2^-p·t (relu: also whenever the box stays on one side of 0, where
/// it is exact); as the difference of the two evaluations when |δ| > 2^-8·t
/// (at most 8 bits lost to cancellation); in between, at the midpoint h̃ and
/// twice the bits (the cancellation of up to p bits then costs none), plus
/// r_h·max|act'(y + δ) − act'(y)| over y ∈ h̃ ± r_h for h's own radius.
/// `act_moved`: act(h + δ) where the caller has it (the gated MLP's gate).
template <class S>
Iv<S> activation_difference(const S& h_mid, const UpperBound& h_rad, const Iv<S>& h, const Iv<S>& act_h,
                            const Iv<S>& delta, const UpperBound& reach, Activation act, long p,
                            const Iv<S>* act_moved = nullptr) {
  const UpperBound scale = max(UpperBound::of(1.0), UpperBound::abs_of(h_mid.backend().data()));
  const Iv<S> box = iv_widened(h_mid, h_rad, reach);
  const bool one_side = mpfr_sgn(ptr(box.lo)) > 0 || mpfr_sgn(ptr(box.hi)) < 0;
  if (reach <= scale * UpperBound::pow2(-p) || (act == Activation::relu && one_side))
    return iv_mul(iv_derivative(box, act), delta);
  if (!(reach <= scale * UpperBound::pow2(-8)))
    return iv_sub(act_moved ? *act_moved : iv_activate(iv_add(h, delta), act), act_h);
  // A = [act(h̃ + δ) − act(h̃)] + [g(h) − g(h̃)], g(y) = act(y + δ) − act(y), h̃ the
  // midpoint (a point: no dependency between the two evaluations); the first
  // at twice the bits, the second within r_h·max|g'| over Y = h̃ ± r_h, where
  // g'(y) = act'(y + δ) − act'(y) (relative to δ: no cancellation against c).
  using T = typename wider<S>::type;
  const Iv<T> hw = iv_convert<T>(iv_point(h_mid)), dw = iv_convert<T>(delta);
  const Iv<T> first = iv_sub(iv_activate(iv_add(hw, dw), act), iv_activate(hw, act));
  Iv<S> v;
  mpfr_set(ptr(v.lo), ptr(first.lo), MPFR_RNDD);
  mpfr_set(ptr(v.hi), ptr(first.hi), MPFR_RNDU);
  if (h_rad.is_zero()) return v;
  const Iv<S> Y = iv_of(h_mid, h_rad);
  const Iv<S> slope = iv_sub(iv_derivative(iv_add(Y, delta), act), iv_derivative(Y, act));
  UpperBound steepest = max(UpperBound::abs_of(ptr(slope.lo)), UpperBound::abs_of(ptr(slope.hi)));
  const Iv<S> second = iv_of(S(0), steepest * h_rad);
  return iv_add(v, second);
}

/// The MLP's output pair from its hidden rows 1 gcᵀ + A (gc 1 × m, A n × m):
/// A recentred into gc, then c' = gc W_2 + b_2 and R' = A W_2 (s2: ‖W_2‖₂
/// for the row bounds, or +inf).
template <class S>
BallSplit<S> mlp_out(RowBall<S> gc, RowBall<S> A, const detail::PackedLayer<S>& w, const LayerWeights& lw,
                     const std::vector<UpperBound>& s2, long p) {
  const Eigen::Index d = lw.W_2.cols();
  BallSplit<S> y = recentre(std::move(gc), std::move(A), p);
  RowBall<S> c = times_weights_rows(row_ball(y.c, y.c_rows), lw.W_2, s2, d, p),
             R = times_weights_rows(row_ball(y.R, y.R_rows), lw.W_2, s2, d, p);
  add_bias_rows(c, w.b2, p);
  return {std::move(c.B), std::move(R.B), std::move(c.rows), std::move(R.rows)};
}

/// The gated MLP f(z) = (act(z W_gate) ∘ (z W_1 + b_1)) W_2 + b_2 on
/// 1cᵀ + R, entrywise: with g = cᵀW_gate, G = R W_gate, h = cᵀW_1 + b_1 and
/// D = R W_1, the hidden rows are act(g) ∘ h + A_i with
///   A_ij = act(g_j + G_ij)·D_ij + h_j·(act(g_j + G_ij) − act(g_j)),
/// the difference by activation_difference (relative to G_ij, as the plain
/// MLP's); every factor's radius is relative to what it multiplies, so A
/// keeps R's digits. c' = (act(g) ∘ h + mean A) W_2 + b_2, R' = (A − 1
/// mean(A)ᵀ) W_2; A's row bounds are its radii's.
template <class S>
BallSplit<S> gated_mlp_centred(const Architecture& a, const detail::PackedLayer<S>& w, const LayerWeights& lw,
                               const BallSplit<S>& x, long p) {
  const std::vector<UpperBound> none(1, UpperBound::infinite());
  const Eigen::Index m = lw.W_1.cols();
  const RowBall<S> xc = row_ball(x.c, x.c_rows), xR = row_ball(x.R, x.R_rows);
  RowBall<S> h = times_weights_rows(xc, lw.W_1, none, m, p);
  add_bias_rows(h, w.b1, p);
  const RowBall<S> g = times_weights_rows(xc, lw.W_gate, none, m, p), D = times_weights_rows(xR, lw.W_1, none, m, p),
                   G = times_weights_rows(xR, lw.W_gate, none, m, p);
  const auto column = [](const RowBall<S>& B, Eigen::Index i, Eigen::Index j) {
    return iv_of(B.B.mid(i, j), B.B.rad.at(i, j));
  };
  std::vector<Iv<S>> gv(static_cast<std::size_t>(m)), act_g(gv), hv(gv);  // the centre's g, act(g), h
  for (Eigen::Index j = 0; j < m; ++j) {
    const auto ju = static_cast<std::size_t>(j);
    gv[ju] = column(g, 0, j);
    act_g[ju] = iv_activate(gv[ju], a.activation);
    hv[ju] = column(h, 0, j);
  }
  BallMatrix<S> A = ball_of_rows<S>(D.B.mid.rows(), m, [&](Eigen::Index i, std::vector<Iv<S>>& row) {
    for (Eigen::Index j = 0; j < m; ++j) {
      const auto ju = static_cast<std::size_t>(j);
      const Iv<S> Gij = column(G, i, j);
      const Iv<S> gate = iv_activate(iv_add(gv[ju], Gij), a.activation);
      const Iv<S> moved = activation_difference(g.B.mid(0, j), g.B.rad.at(0, j), gv[ju], act_g[ju], Gij,
                                                reach(G.B, i, j), a.activation, p, &gate);
      row[ju] = iv_add(iv_mul(gate, column(D, i, j)), iv_mul(hv[ju], moved));
    }
  });
  RowBall<S> gc = row_ball(ball_of_rows<S>(1, m, [&](Eigen::Index, std::vector<Iv<S>>& row) {
    for (std::size_t j = 0; j < row.size(); ++j) row[j] = iv_mul(act_g[j], hv[j]);
  }));
  return mlp_out(std::move(gc), row_ball(std::move(A)), w, lw, none, p);
}

/// The MLP f(z) = act(z W_1 + b_1) W_2 + b_2 on 1cᵀ + R: with h = cᵀW_1 + b_1
/// and D = R W_1, A_ij = act(h_j + D_ij) − act(h_j) (activation_difference);
/// c' = (act(h) + mean A) W_2 + b_2, R' = (A − 1 mean(A)ᵀ) W_2.
///
/// Entrywise (row_bounds off): A_ij over the boxes of h_j and D_ij. With row
/// bounds, A_ij is evaluated at the midpoints, Ã_ij = A(h̃_j, D̃_ij) within
/// ρ_ij, and
///   A(h, D) − A(h̃, D̃) = [act(h + D) − act(h + D̃)] + [g(h) − g(h̃)],
///   g(y) = act(y + D̃) − act(y),
/// the first within L_j·|D − D̃| and the second within r^h_j·min(2L_j,
/// M_j|D̃_ij|) (|g'(y)| = |act'(y + D̃) − act'(y)| ≤ M_j|D̃_ij|), where
/// L_j ≥ |act'| and M_j ≥ |act''| over the hull of column j's arguments
/// (h̃_j ± r^h_j widened by every row's D_ij box and by 0). So ‖A_i − Ã_i‖₂ ≤
/// max_j L_j·ν^D_i + min(2 max_j L_j·ν^h, ‖E_i‖₂) + ‖ρ_i‖₂ with E_ij the
/// second term's bound: the row bounds ν^D_i ≥ ‖D_i − D̃_i‖₂ and ν^h ≥
/// ‖h − h̃‖₂ move by ‖W_1‖₂ and the act's Lipschitz constant, not by |W_1|
/// entrywise, and where R has collapsed far below the error of h = cᵀW_1 +
/// b_1, h's error enters second order, relative to D̃_i (math.md §10).
template <class S>
BallSplit<S> mlp_centred(const Architecture& a, const detail::PackedLayer<S>& w, const LayerWeights& lw,
                         const BallSplit<S>& x, bool row_bounds, long p) {
  if (lw.gated()) return gated_mlp_centred(a, w, lw, x, p);
  // ‖W_1‖₂ and ‖W_2‖₂ (none: +inf, the entrywise radii alone).
  std::vector<UpperBound> s1(1, UpperBound::infinite()), s2(s1);
  if (row_bounds) detail::run_blocks(2, product_threads(), [&](std::size_t t) {
    (t == 0 ? s1 : s2)[0] = spectral_norm_up(t == 0 ? lw.W_1 : lw.W_2);
  });
  const Eigen::Index m = lw.W_1.cols();
  RowBall<S> h = times_weights_rows(row_ball(x.c, x.c_rows), lw.W_1, s1, m, p);
  add_bias_rows(h, w.b1, p);
  const RowBall<S> D = times_weights_rows(row_ball(x.R, x.R_rows), lw.W_1, s1, m, p);
  const Eigen::Index n = D.B.mid.rows();
  std::vector<Iv<S>> hv(static_cast<std::size_t>(m)), act_h(static_cast<std::size_t>(m)),
      act_mid(static_cast<std::size_t>(m));
  std::vector<UpperBound> L(static_cast<std::size_t>(m)), M(L);  // ≥ |act'|, |act''| over column j's hull
  detail::run_blocks(static_cast<std::size_t>(m), n * m >= 4096 ? product_threads() : 1, [&](std::size_t ju) {
    use_full_mpfr_exponent_range();
    const auto j = static_cast<Eigen::Index>(ju);
    hv[ju] = iv_of(h.B.mid(0, j), h.B.rad.at(0, j));
    act_h[ju] = iv_activate(hv[ju], a.activation);
    if (!row_bounds) return;
    act_mid[ju] = iv_activate(iv_point(h.B.mid(0, j)), a.activation);
    // [min(0, min_i D̃_ij), max(0, max_i D̃_ij)] ± max_i r^D_ij ⊇ every row's D_ij box and 0
    Iv<S> spread = iv_point(S(0));
    UpperBound widest;
    for (Eigen::Index i = 0; i < n; ++i) {
      if (D.B.mid(i, j) < spread.lo) spread.lo = D.B.mid(i, j);
      if (D.B.mid(i, j) > spread.hi) spread.hi = D.B.mid(i, j);
      widest = max(widest, D.B.rad.at(i, j));
    }
    const Iv<S> widened = iv_add(spread, iv_of(S(0), widest));
    const Iv<S> hull = iv_add(hv[ju], widened);
    const Iv<S> slope = iv_derivative(hull, a.activation);
    L[ju] = max(UpperBound::abs_of(ptr(slope.lo)), UpperBound::abs_of(ptr(slope.hi)));
    M[ju] = second_derivative_bound(hull, a.activation);
  });
  UpperBound Lmax;
  for (const UpperBound& Lj : L) Lmax = max(Lmax, Lj);
  const UpperBound nu_h = h.rows.at(0, 0);
  BallMatrix<S> A = ball_of_rows<S>(n, m, [&](Eigen::Index i, std::vector<Iv<S>>& row) {
    for (Eigen::Index j = 0; j < m; ++j) {
      const auto ju = static_cast<std::size_t>(j);
      if (row_bounds) {
        const S& dm = D.B.mid(i, j);
        row[ju] = activation_difference(h.B.mid(0, j), UpperBound{}, iv_point(h.B.mid(0, j)), act_mid[ju],
                                        iv_point(dm), UpperBound::abs_of(ptr(dm)), a.activation, p);
      } else {
        row[ju] = activation_difference(h.B.mid(0, j), h.B.rad.at(0, j), hv[ju], act_h[ju],
                                        iv_of(D.B.mid(i, j), D.B.rad.at(i, j)), reach(D.B, i, j), a.activation, p);
      }
    }
  });
  RowBall<S> Ar{std::move(A), RadiusMatrix{}, m};
  if (row_bounds) {
    // ρ_i (the radii so far) + L_j r^D_ij + E_ij entrywise, and
    // max L·ν^D_i + min(2 max L·ν^h, ‖E_i‖₂) + ‖ρ_i‖₂ in norm.
    const RadiusMatrix E = radius_from(n, m, [&](Eigen::Index i, Eigen::Index j) {
      const auto ju = static_cast<std::size_t>(j);
      const UpperBound first = UpperBound::of(2.0) * L[ju], second = M[ju] * UpperBound::abs_of(ptr(D.B.mid(i, j)));
      return h.B.rad.at(0, j) * (second <= first ? second : first);
    });
    const RadiusMatrix E_rows = row_norms_up(E);
    const UpperBound h_moves = UpperBound::of(2.0) * Lmax * nu_h;
    moved_by(
        Ar, [&](Eigen::Index i, Eigen::Index j) { return L[static_cast<std::size_t>(j)] * D.B.rad.at(i, j) + E.at(i, j); },
        [&](Eigen::Index i) {
          const UpperBound e = E_rows.at(i, 0);
          return Lmax * D.rows.at(i, 0) + (e <= h_moves ? e : h_moves);
        });
  }
  // act(h): over h's box, or with row bounds at h̃ within ρ + L∘r^h entrywise, ‖ρ‖₂ + max L·ν^h in norm.
  RowBall<S> gc = row_ball(ball_of_rows<S>(1, m, [&](Eigen::Index, std::vector<Iv<S>>& row) {
    row = row_bounds ? act_mid : act_h;
  }));
  if (row_bounds) {
    gc.B.rad = gc.B.rad + radius_from(1, m, [&](Eigen::Index, Eigen::Index j) {
      return L[static_cast<std::size_t>(j)] * h.B.rad.at(0, j);
    });
    gc.rows = gc.rows + filled(1, 1, Lmax * nu_h);
  }
  return mlp_out(std::move(gc), std::move(Ar), w, lw, s2, p);
}

template <class S> BallSplit<S> added(const BallSplit<S>& y, const BallSplit<S>& x, long p) {
  RowBall<S> c = sum_rows(row_ball(y.c, y.c_rows), row_ball(x.c, x.c_rows), p),
             R = sum_rows(row_ball(y.R, y.R_rows), row_ball(x.R, x.R_rows), p);
  return {std::move(c.B), std::move(R.B), std::move(c.rows), std::move(R.rows)};
}

/// The centred ball's arithmetic for detail::layer_map (compute/layer_impl.hpp):
/// every attention, norm and MLP.
template <class S> struct CentredBallLayer {
  using Value = BallSplit<S>;
  const Architecture& a;
  const detail::PackedLayer<S>& w;
  const LayerWeights& lw;
  const BallPositions<S>& pos;
  int layer;  ///< from 0: its rotary table
  MaskKind mask;
  Eigen::Index window;
  bool row_bounds;
  long p;

  Value attention(const Value& x) const {
    return attention_centred(a, w, lw, pos, layer, x, mask, window, row_bounds, p);
  }
  Value mlp(const Value& z) const { return mlp_centred(a, w, lw, z, row_bounds, p); }
  Value norm(const Value& x, detail::NormAt at) const {
    const auto [g, b] = detail::norm_parameters(lw, at);
    return norm_centred(detail::norm_form(a, at), x, *g, b ? *b : VectorXd::Zero(g->size()).eval(), row_bounds, p);
  }
  void add(Value& y, const Value& x) const { y = added(y, x, p); }
};

}  // namespace enclosure_detail

template <class S>
EnclosedCentredTrace<S> forward_centred_enclosed(const Model& model, const Variant& variant, const BallMatrix<S>& X0,
                                                 const EnclosureOptions& options) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(model, variant, X0, options);
  } else {
    namespace E = enclosure_detail;
    const Architecture& a = model.arch();
    detail::check_input(model, variant, X0.mid.rows(), X0.mid.cols());
    use_full_mpfr_exponent_range();
    const long p = precision_bits_v<S>;
    const UpperBound scale = UpperBound::of(options.radius_scale);
    const bool with_mlp = variant.mlp != MlpKind::none;
    EnclosedCentredTrace<S> t;
    t.variant = variant;
    const auto record = [&t](const E::BallSplit<S>& x) {
      t.c.push_back(x.c);
      t.R.push_back(x.R);
      t.c_rows.push_back(x.c_rows.m.size() ? x.c_rows : row_norms_up(x.c.rad));
      t.R_rows.push_back(x.R_rows.m.size() ? x.R_rows : row_norms_up(x.R.rad));
    };
    E::BallSplit<S> x{BallMatrix<S>{}, X0};
    x.c = E::take_mean(x.R, p);
    record(x);
    const auto pos = E::BallPositions<S>::make(a, X0.mid.rows());
    detail::PackedLayer<S> w;
    for (int l = 0; l < a.layers; ++l) {
      check_interrupt();
      const std::shared_ptr<const LayerWeights> held = model.layer_for_pass(l);
      const LayerWeights& lw = *held;
      detail::pack_into(w, a, lw, with_mlp);
      E::CentredBallLayer<S> ar{a, w, lw, pos, l, variant.mask, detail::window_of(a, l), options.row_bounds, p};
      E::BallSplit<S> z = detail::layer_map(ar, a, variant, x);
      z.c.rad = z.c.rad * scale;
      z.R.rad = z.R.rad * scale;
      if (z.c_rows.m.size()) z.c_rows = z.c_rows * scale;
      if (z.R_rows.m.size()) z.R_rows = z.R_rows * scale;
      x = std::move(z);
      record(x);
      if (options.on_layer) options.on_layer(l + 1, a.layers);
    }
    return t;
  }
}

namespace enclosure_detail {

/// enclose_centred_residual with the row bounds of c and R where given.
template <class S>
ResidualEnclosure centred_residual(const BallMatrix<S>& c, const BallMatrix<S>& R, Center center,
                                   const RadiusMatrix* c_rows, const RadiusMatrix* R_rows) {
  use_full_mpfr_exponent_range();
  const Eigen::Index n = R.mid.rows();
  // X = 1cᵀ + R, rounded once per entry; its rows within ν^R_i + ν^c + u‖X̃_i‖₂.
  RowBall<S> X{BallMatrix<S>{R.mid, R.rad + RadiusMatrix{c.rad.m.replicate(n, 1), c.rad.exp}}, RadiusMatrix{},
               R.mid.cols()};
  detail::add_row(X.B.mid, RowVector<S>(c.mid));
  add_rounding(X.B, precision_bits_v<S>);
  if (c_rows != nullptr && R_rows != nullptr) {
    X.rows = *R_rows + RadiusMatrix{c_rows->m.replicate(n, 1), c_rows->exp};
    add_rounding_rows(X, precision_bits_v<S>);
  }
  tighten(X);
  return residual_enclosure(R, X.B, center, R_rows, &X.rows);
}

}  // namespace enclosure_detail

template <class S>
ResidualEnclosure enclose_centred_residual(const BallMatrix<S>& c, const BallMatrix<S>& R, Center center) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(c, R, center);
  } else {
    return enclosure_detail::centred_residual(c, R, center, nullptr, nullptr);
  }
}

template <class S> ResidualEnclosure enclose_centred_residual(const EnclosedCentredTrace<S>& t, int layer, Center center) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(t, layer, center);
  } else {
    const auto l = static_cast<std::size_t>(layer);
    if (layer < 0 || l >= t.R.size()) throw std::out_of_range("enclose_centred_residual: no layer " + std::to_string(layer));
    return enclosure_detail::centred_residual(t.c[l], t.R[l], center, &t.c_rows[l], &t.R_rows[l]);
  }
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_ENCLOSURE(S)                                                                       \
  SANPATH_INSTANTIATE_ENCLOSURE_DIRECT(S)                                                                      \
  template sanpath::EnclosedCentredTrace<S> sanpath::forward_centred_enclosed<S>(                              \
      const sanpath::Model&, const sanpath::Variant&, const sanpath::BallMatrix<S>&,                           \
      const sanpath::EnclosureOptions&);                                                                       \
  template sanpath::ResidualEnclosure sanpath::enclose_centred_residual<S>(const sanpath::BallMatrix<S>&,       \
                                                                          const sanpath::BallMatrix<S>&,       \
                                                                          sanpath::Center);                    \
  template sanpath::ResidualEnclosure sanpath::enclose_centred_residual<S>(                                    \
      const sanpath::EnclosedCentredTrace<S>&, int, sanpath::Center);

#pragma once
/// \file measures_impl.hpp
/// The measures of math.md §9 (see compute/measures.hpp and docs/math.md §8).
///
/// Spectral measures. X = 1cᵀ + R with 1ᵀR = 0. Q, the Householder
/// reflection that sends 1/√n to e_1, gives QX = [√n cᵀ; R̃] where R̃'s rows
/// are R_i + R_0/(√n − 1) (i ≥ 1; row 0 of QR is 0). A second reflection
/// H_w (w = c/‖c‖ ↦ ∓e_1) on the right leaves N = QXH_w with one large
/// entry ±√n‖c‖ at (0,0), zeros on the rest of row 0, and everything else of
/// the size of R. K = N (n ≤ d) or Nᵀ has the singular values of X; its
/// Gram G = KKᵀ (the smaller side) is formed in about twice the working
/// bits. When R is small against c (‖G_22‖_F < 2^(−b/8)·G_00, b the Gram's
/// bits), the leading eigenvector [1; y] of G is found by the fixed point
/// y = (g + G_22 y)/λ, λ = G_00 + gᵀy (each step gains b/8 bits or more),
/// and the reflection H_u that sends e_1 to it, applied to K from rows of the
/// size of R only, deflates it: H_uK = [σ_1 ṽᵀ; D]. Then σ_2, σ_3, … are the
/// singular values of D, Σ_{k≥2} σ_k² = ‖D‖_F², and X − σ_1u_1v_1ᵀ =
/// Q·(H_u[0; D])·H_w: every quantity that is small because R is small is
/// computed from numbers of R's size, never as a difference of two of c's.
/// Otherwise (no scale separation) G's eigenpairs are computed directly.
#include "sanpath/compute/measures.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/core/linalg.hpp"
#include "core/special_functions.hpp"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

namespace sanpath {
namespace detail {

/// The tier with about twice the digits of tier D (the top tier: itself).
constexpr unsigned wider_digits(unsigned d) {
  return d == 19 ? 38 : d == 38 ? 77 : d == 77 ? 154 : d == 154 ? 308 : d == 308 ? 617 : d == 617 ? 1233
       : d == 1233 ? 2466 : d == 2466 ? 4932 : 9864;
}
/// The scalar of the Gram matrix of a working scalar S (double: 128 bits).
template <class S> struct wider {
  using type = mpfr_real<38>;
};
template <unsigned D> struct wider<mpfr_real<D>> {
  using type = mpfr_real<wider_digits(D)>;
};

template <class T> T power_of_two(long e) {
  using std::ldexp;
  return ldexp(T(1), static_cast<int>(e));
}

/// The singular values of X = 1cᵀ + R and its rank-1 residual.
template <class T> struct Spectrum {
  bool defined = false;      ///< false for X = 0
  T sigma1_sq;               ///< σ_1²
  T rest_sq_sum;             ///< Σ_{k≥2} σ_k², without cancellation against σ_1²
  std::vector<T> rest;       ///< σ_2 ≥ σ_3 ≥ … ≥ 0 (when asked)
  Matrix<T> rank1_residual;  ///< X − σ_1 u_1 v_1ᵀ, n×d (when asked)
};

/// Y ← Y − β (Y h) hᵀ: the rows of Y reflected by I − β h hᵀ.
template <class T> void reflect_rows(Matrix<T>& Y, const Vector<T>& h, const T& beta) {
  if (Y.rows() == 0) return;
  const Vector<T> Yh = Y * h;
  Y.noalias() -= (beta * Yh) * h.transpose();
}

/// Y ← Y − β h (hᵀ Y): the columns of Y reflected by I − β h hᵀ.
template <class T> void reflect_columns(Matrix<T>& Y, const Vector<T>& h, const T& beta) {
  if (Y.cols() == 0) return;
  const RowVector<T> hY = h.transpose() * Y;
  Y.noalias() -= (beta * h) * hY;
}

template <class T>
Spectrum<T> spectrum(const RowVector<T>& c, const Matrix<T>& R, bool want_rest, bool want_residual) {
  using std::sqrt;
  const Eigen::Index n = R.rows(), d = R.cols();
  Spectrum<T> out;
  const T norm_c = sqrt(T(c.squaredNorm()));
  const T sqrt_n = sqrt(T(n));
  // N = Q X H_w: row 0 carries √n‖c‖, rows 1.. the reflected R.
  Matrix<T> N = Matrix<T>::Zero(n, d);
  if (n > 1) {
    const RowVector<T> shift = R.row(0) / T(sqrt_n - 1);
    for (Eigen::Index i = 1; i < n; ++i) N.row(i) = R.row(i) + shift;
  }
  Vector<T> h;
  T beta = 0;
  const bool reflect_w = norm_c > 0;
  if (reflect_w) {
    h = (c / norm_c).transpose();
    const T sign = h(0) < 0 ? T(-1) : T(1);
    h(0) += sign;  // (I − β h hᵀ) w = −sign·e_1
    beta = T(2) / T(h.squaredNorm());
    Matrix<T> lower = N.bottomRows(n - 1);
    reflect_rows(lower, h, beta);
    N.bottomRows(n - 1) = lower;
    N(0, 0) = -sign * sqrt_n * norm_c;
  }
  const bool transposed = n > d;
  const Matrix<T> K = transposed ? Matrix<T>(N.transpose()) : N;
  const Eigen::Index a = K.rows(), m = a - 1;
  Matrix<T> G;
  gemm_nt(K, K, G);
  Matrix<T> Z;  // (I − ũũᵀ)K when asked
  const T g00 = G(0, 0);
  const T g22 = m > 0 ? T(G.bottomRightCorner(m, m).norm()) : T(0);
  const long bits = precision_bits_v<T>;
  if (g00 > 0 && g22 < power_of_two<T>(-bits / 8) * g00) {
    // Deflation: the leading eigenvector [1; y] of G by its fixed point.
    const Vector<T> g = G.col(0).tail(m);
    const Matrix<T> G22 = G.bottomRightCorner(m, m);
    Vector<T> y = g / g00;
    T lambda = g00 + T(g.dot(y));
    const T eps = power_of_two<T>(1 - bits);
    for (int it = 0; it < 64 && m > 0; ++it) {
      Vector<T> next = (g + G22 * y) / lambda;
      const T change = (next - y).norm();
      y = std::move(next);
      lambda = g00 + T(g.dot(y));
      if (change <= eps * T(y.norm())) break;
    }
    const T yy = y.squaredNorm();
    Matrix<T> D = K.bottomRows(m);
    T alpha = 1, kappa = 0;
    if (yy > 0) {
      // Rows 1.. of H_u K, H_u = I − (u − e_1)(u − e_1)ᵀ/(1 − α), u = α[1; y].
      alpha = T(1) / sqrt(T(1 + yy));
      kappa = T(1 + alpha) / yy;
      const RowVector<T> t = y.transpose() * K.bottomRows(m);
      D.noalias() += (alpha * y) * K.row(0);
      D.noalias() -= (kappa * y) * t;
    }
    out.defined = true;
    out.sigma1_sq = lambda;
    out.rest_sq_sum = D.squaredNorm();
    if (want_rest && m > 0) {
      Matrix<T> GD;
      gemm_nt(D, D, GD);
      const Eigen::SelfAdjointEigenSolver<Matrix<T>> es(GD, Eigen::EigenvaluesOnly);
      if (es.info() != Eigen::Success) throw std::runtime_error("measures: the eigenvalues of a Gram matrix did not converge");
      for (Eigen::Index k = 0; k < m; ++k) out.rest.push_back(sqrt(std::max(T(es.eigenvalues()(k)), T(0))));
    }
    if (want_residual) {
      // H_u [0; D]: row 0 = α Σ_k y_k D_k, rows k = D_k − κ y_k Σ_j y_j D_j.
      Z = Matrix<T>::Zero(a, K.cols());
      Z.bottomRows(m) = D;
      if (yy > 0) {
        const RowVector<T> t2 = y.transpose() * D;
        Z.row(0) = alpha * t2;
        Z.bottomRows(m).noalias() -= (kappa * y) * t2;
      }
    }
  } else {
    const Eigen::SelfAdjointEigenSolver<Matrix<T>> es(G, want_residual ? Eigen::ComputeEigenvectors
                                                                       : Eigen::EigenvaluesOnly);
    if (es.info() != Eigen::Success) throw std::runtime_error("measures: the eigenvalues of a Gram matrix did not converge");
    const T top = es.eigenvalues()(m);
    if (!(top > 0)) return out;  // X = 0: no spectrum to speak of
    out.defined = true;
    out.sigma1_sq = top;
    out.rest_sq_sum = 0;
    for (Eigen::Index k = 0; k < m; ++k) {
      const T lk = std::max(T(es.eigenvalues()(k)), T(0));
      out.rest_sq_sum += lk;
      if (want_rest) out.rest.push_back(sqrt(lk));
    }
    if (want_residual) {
      const Vector<T> u = es.eigenvectors().col(m);
      const RowVector<T> uK = u.transpose() * K;
      Z = K;
      Z.noalias() -= u * uK;
    }
  }
  std::sort(out.rest.begin(), out.rest.end(), std::greater<T>());
  if (want_residual) {
    // X − σ_1u_1v_1ᵀ = Q Z_N H_w.
    Matrix<T> Y = transposed ? Matrix<T>(Z.transpose()) : Z;
    if (reflect_w) reflect_rows(Y, h, beta);
    if (n > 1) {
      Vector<T> v = Vector<T>::Constant(n, T(1) / sqrt_n);
      v(0) -= 1;
      reflect_columns(Y, v, T(T(2) / T(v.squaredNorm())));
    }
    out.rank1_residual = std::move(Y);
  }
  return out;
}

/// The mean cosine over pairs i < j, as 1 − cosine: with x̂_i = x_i/‖x_i‖
/// and e_i = x̂_i − c/‖c‖ (formed from r_i without cancellation),
/// Σ_{i<j} (1 − cos_ij) = ½ Σ_{i<j} ‖x̂_i − x̂_j‖² = (n/2) Σ_i ‖e_i − ē‖², so
/// the mean is Σ_i ‖e_i − ē‖²/(n − 1). False when undefined (n < 2, a zero row).
template <class S> bool one_minus_cosine(const RowVector<S>& c, const Matrix<S>& R, S& out) {
  using std::sqrt;
  const Eigen::Index n = R.rows();
  if (n < 2) return false;
  const S norm_c = sqrt(S(c.squaredNorm()));
  Matrix<S> E(n, R.cols());
  for (Eigen::Index i = 0; i < n; ++i) {
    const S norm_x = sqrt(S((c + R.row(i)).squaredNorm()));
    if (!(norm_x > 0)) return false;
    E.row(i) = R.row(i) / norm_x;
    if (norm_c > 0) {
      // ‖x_i‖ − ‖c‖ = (2cᵀr_i + ‖r_i‖²)/(‖x_i‖ + ‖c‖)
      const S gap = S(S(2) * S(c.dot(R.row(i))) + S(R.row(i).squaredNorm())) / S(norm_x + norm_c);
      E.row(i) -= c * S(gap / S(norm_x * norm_c));
    }
  }
  const RowVector<S> mean = E.colwise().sum() / S(n);
  S sum = 0;
  for (Eigen::Index i = 0; i < n; ++i) sum += (E.row(i) - mean).squaredNorm();
  out = sum / S(n - 1);
  return true;
}

}  // namespace detail

template <class S>
std::vector<MeasureValue> output_measures(const RowVector<S>& c, const Matrix<S>& R, const S& norm_x,
                                          const MeasureSet& m) {
  using T = typename detail::wider<S>::type;
  using std::log;
  using std::sqrt;
  std::vector<MeasureValue> out;
  if (m.has(Measure::mu)) out.push_back({"mu", to_big(norm_frobenius(R))});
  const bool svd = m.has(Measure::svd_residual), stable = m.has(Measure::stable_rank),
             effective = m.has(Measure::effective_rank);
  detail::Spectrum<T> sp;
  if (svd || stable || effective) sp = detail::spectrum<T>(convert<T>(c), convert<T>(R), effective, svd);
  // Values are reported at the working precision S: the Gram's extra bits only keep its squares exact.
  const auto at_s = [](const T& x) { return to_big(S(x)); };
  if (svd && sp.defined && norm_x > 0)
    out.push_back({"svd_residual", at_s(T(norm_composite(sp.rank1_residual) / T(norm_x)))});
  if (m.has(Measure::cosine)) {
    S omc;
    if (detail::one_minus_cosine(c, R, omc)) {
      out.push_back({"cosine", to_big(S(S(1) - omc))});
      out.push_back({"one_minus_cosine", to_big(omc)});
    }
  }
  if (stable && sp.defined) {
    const T excess = sp.rest_sq_sum / sp.sigma1_sq;
    out.push_back({"stable_rank", at_s(T(1 + excess))});
    out.push_back({"stable_rank_minus_one", at_s(excess)});
  }
  if (effective && sp.defined) {
    // p_1 = 1 − q with q = Σ_{k≥2} σ_k / Σ_j σ_j: −p_1 ln p_1 = −(1 − q)·log1p(−q).
    const T sigma1 = sqrt(sp.sigma1_sq);
    T rest = 0;
    for (const T& s : sp.rest) rest += s;
    const T total = sigma1 + rest;
    const T q = rest / total;
    T entropy = -T(1 - q) * log1p_of(T(-q));
    for (const T& s : sp.rest)
      if (s > 0) {
        const T p = s / total;
        entropy -= p * log(p);
      }
    const T excess = expm1_of(entropy);
    out.push_back({"effective_rank", at_s(T(1 + excess))});
    out.push_back({"effective_rank_minus_one", at_s(excess)});
  }
  return out;
}

template <class S> std::vector<MeasureValue> attention_measures(const std::vector<Matrix<S>>& P, const MeasureSet& m) {
  using std::log;
  std::vector<MeasureValue> out;
  if (P.empty() || P.front().rows() == 0) return out;
  const S rows = S(static_cast<long>(P.size()) * static_cast<long>(P.front().rows()));
  if (m.has(Measure::attention_entropy)) {
    // Row by row, the largest entry p_m by −p_m·log1p(−q), q = Σ_{j≠m} p_j:
    // where a row sits on one key (p_m = 1 − 10⁻¹⁸⁹) p_m rounds to 1 at every
    // tier below ~630 bits and −p_m log p_m, of the size of q, would vanish
    // at all of them alike (math.md §7.1 "Saturated rows").
    S sum = 0;
    for (const Matrix<S>& Ph : P)
      for (Eigen::Index i = 0; i < Ph.rows(); ++i) {
        Eigen::Index top = 0;
        for (Eigen::Index j = 1; j < Ph.cols(); ++j)
          if (Ph(i, j) > Ph(i, top)) top = j;
        S q = 0;
        for (Eigen::Index j = 0; j < Ph.cols(); ++j) {
          const S& p = Ph(i, j);
          if (j == top || !(p > 0)) continue;
          q += p;
          sum -= p * log(p);
        }
        if (Ph(i, top) > 0) sum -= Ph(i, top) * log1p_of(S(-q));
      }
    out.push_back({"attention_entropy", to_big(S(sum / rows))});
  }
  if (m.has(Measure::first_token_mass)) {
    S sum = 0;
    for (const Matrix<S>& Ph : P) sum += Ph.col(0).sum();
    out.push_back({"first_token_mass", to_big(S(sum / rows))});
  }
  return out;
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_MEASURES(S)                                                                          \
  template std::vector<sanpath::MeasureValue> sanpath::output_measures<S>(                                      \
      const sanpath::RowVector<S>&, const sanpath::Matrix<S>&, const S&, const sanpath::MeasureSet&);            \
  template std::vector<sanpath::MeasureValue> sanpath::attention_measures<S>(const std::vector<sanpath::Matrix<S>>&, \
                                                                             const sanpath::MeasureSet&);

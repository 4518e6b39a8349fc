#pragma once
// Implementation of sanpath/norms.hpp, explicitly instantiated per scalar
// through SANPATH_INSTANTIATE_NORMS(S), at every tier of the ladder (norms_tiers.cpp).
//
// optimal_residual works in three stages:
//  1. in S: sort every column once (row order, shared by all stages), take
//     the medians, and scale the median-centred residual into a double
//     matrix D = (X - 1 med^T) / s with |D| <= 1 (translation and scaling
//     make the search problem on D equivalent to the one on X);
//  2. in double (norms_detail::search_centres, src/norms.cpp): a bounded heuristic
//     finds candidate centres and row weights for the ∞-norm LP's dual;
//  3. in S: the candidates are mapped back (c = med + s·c_D) and evaluated,
//     and the dual weights (integers, so their sums are exact) are turned
//     into a certified lower bound with exact weighted medians of X.
// Only stage 3 produces reported numbers; stage 2 only chooses.
#include "sanpath/compute/norms.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace sanpath {
/// Helpers of the norms module only (kept apart from other modules' detail).
namespace norms_detail {

/// Output of the double-precision centre search on D (n×d, |D| <= 1).
struct CentreSearch {
  Eigen::RowVectorXd inf_centre;        ///< 1×d, best centre found for min_c ‖D − 1cᵀ‖_∞
  Eigen::RowVectorXd composite_centre;  ///< 1×d, best composite centre found
  /// Candidate dual weights, each n nonnegative integers summing below 2^52:
  /// the LP's duals, the multiplicative-weights game's, and the farthest pair
  /// of rows (weights 1, 1: the bound max_ik ‖x_i − x_k‖_1 / 2).
  std::vector<std::vector<std::uint64_t>> dual_weights;
};

/// Largest n·d for which the ∞-norm LP is handed to the simplex solver
/// (norms_lp.cpp), and its iteration limit (not a time limit: results must
/// not depend on the machine); beyond either only the bounded
/// heuristic runs and the enclosure may be wider.
constexpr Eigen::Index kCentreLpMaxEntries = Eigen::Index(1) << 12;
constexpr int kCentreLpIterations = 100000;

/// Solves min_c ‖D − 1cᵀ‖_∞ as an LP in double (norms_lp.cpp): on success
/// `centre` is the optimal centre and `weights` the optimal dual row weights
/// (nonnegative, summing to 1 up to rounding). False when D is too large, the
/// iteration limit is hit or the solver fails.
bool solve_centre_lp(const Eigen::MatrixXd& D, Eigen::RowVectorXd& centre, Eigen::VectorXd& weights);

/// Bounded heuristic search (norms.cpp). `order[j*n + k]` is the row of the
/// k-th smallest entry of column j. Deterministic.
CentreSearch search_centres(const Eigen::MatrixXd& D, const std::vector<std::int32_t>& order);

template <class S> double to_double(const S& x) {
  if constexpr (is_mpfr_v<S>) {
    return x.template convert_to<double>();
  } else {
    return x;
  }
}

/// t = |t| in place (no temporary for MPFR).
template <class S> void make_abs(S& t) {
  if constexpr (is_mpfr_v<S>) {
    mpfr_abs(t.backend().data(), t.backend().data(), MPFR_RNDN);
  } else {
    t = std::abs(t);
  }
}

template <class S> bool is_finite_value(const S& x) {
  using std::isfinite;
  return static_cast<bool>(isfinite(x));
}

/// sqrt(a)·sqrt(b): the composite of two norms without underflow in double.
template <class S> S geometric_mean(const S& a, const S& b) {
  using std::sqrt;
  return S(sqrt(a) * sqrt(b));
}

/// The four norms of X − 1cᵀ (c == nullptr: of X itself) in one column-major
/// pass. Every entry is formed as one rounded subtraction, so the result is
/// bit-identical to norms_of(residual(X, c)).
template <class S> Norms<S> centred_norms(const Matrix<S>& X, const RowVector<S>* c) {
  using std::sqrt;
  const Eigen::Index n = X.rows(), d = X.cols();
  if (c && c->size() != d)
    throw std::invalid_argument("residual: centre has " + std::to_string(c->size()) + " entries, X has " +
                                std::to_string(d) + " columns");
  std::vector<S> row(static_cast<std::size_t>(n), S(0));
  S one(0), col(0), t(0), sq(0), ssq(0), scale(0);
  for (Eigen::Index j = 0; j < d; ++j) {
    col = S(0);
    for (Eigen::Index i = 0; i < n; ++i) {
      t = X(i, j);
      if (c) t -= (*c)(j);
      make_abs(t);
      col += t;
      row[static_cast<std::size_t>(i)] += t;
      if constexpr (is_mpfr_v<S>) {
        sq = t;
        sq *= t;
        ssq += sq;
      } else {
        // Scaled sum of squares (no overflow/underflow): Σ t² = scale²·ssq.
        if (t != 0) {
          if (scale < t) {
            const S q = scale / t;
            ssq = S(1) + ssq * q * q;
            scale = t;
          } else {
            const S q = t / scale;
            ssq += q * q;
          }
        }
      }
    }
    if (col > one) one = col;
  }
  S inf(0);
  for (const S& r : row)
    if (r > inf) inf = r;
  Norms<S> out;
  out.one = one;
  out.inf = inf;
  out.composite = geometric_mean(one, inf);
  if constexpr (is_mpfr_v<S>) {
    out.frobenius = sqrt(ssq);
  } else {
    out.frobenius = scale * sqrt(ssq);
  }
  return out;
}

template <class S> void require_rows(const Matrix<S>& X, const char* what) {
  if (X.rows() < 1) throw std::invalid_argument(std::string(what) + ": X has no rows");
}

template <class S> void require_finite(const Matrix<S>& X, const char* what) {
  for (Eigen::Index j = 0; j < X.cols(); ++j)
    for (Eigen::Index i = 0; i < X.rows(); ++i)
      if (!is_finite_value(X(i, j)))
        throw std::invalid_argument(std::string(what) + ": X has a non-finite entry at (" + std::to_string(i) +
                                    ", " + std::to_string(j) + ")");
}

/// Sorted row order of every column: order[j*n + k] = row of the k-th
/// smallest X(·, j). Sorts on the double image first (monotone, so it agrees
/// with S's order) and falls back to S only between equal doubles.
template <class S> std::vector<std::int32_t> column_order(const Matrix<S>& X) {
  const Eigen::Index n = X.rows(), d = X.cols();
  if (n > std::numeric_limits<std::int32_t>::max())
    throw std::invalid_argument("norms: X has too many rows (" + std::to_string(n) + ")");
  std::vector<std::int32_t> order(static_cast<std::size_t>(n * d));
  std::vector<double> key(static_cast<std::size_t>(n));
  for (Eigen::Index j = 0; j < d; ++j) {
    for (Eigen::Index i = 0; i < n; ++i) key[static_cast<std::size_t>(i)] = to_double(X(i, j));
    std::int32_t* p = order.data() + j * n;
    std::iota(p, p + n, 0);
    std::sort(p, p + n, [&](std::int32_t a, std::int32_t b) {
      const double ka = key[static_cast<std::size_t>(a)], kb = key[static_cast<std::size_t>(b)];
      if (ka != kb) return ka < kb;
      return X(a, j) < X(b, j);
    });
  }
  return order;
}

/// Medians from a column order; even n: midpoint of the two middle values,
/// kept inside [low, high] (any point there minimises the column's 1-norm).
template <class S> RowVector<S> medians_from_order(const Matrix<S>& X, const std::vector<std::int32_t>& order) {
  const Eigen::Index n = X.rows(), d = X.cols();
  RowVector<S> m(d);
  for (Eigen::Index j = 0; j < d; ++j) {
    const std::int32_t* p = order.data() + j * n;
    const S& hi = X(p[n / 2], j);
    if (n % 2 == 1) {
      m(j) = hi;
      continue;
    }
    const S& lo = X(p[n / 2 - 1], j);
    S mid = S(lo + hi) / S(2);
    if (!is_finite_value(mid)) mid = S(lo / S(2)) + S(hi / S(2));
    if (mid < lo) mid = lo;
    if (mid > hi) mid = hi;
    m(j) = mid;
  }
  return m;
}

/// Certified lower bound for min_c max_i Σ_j |X_ij − c_j| from integer row
/// weights q (weak duality): Σ_j min_{c_j} Σ_i q_i |X_ij − c_j| / Σ q, each
/// inner minimum at an exact weighted median (integer cumulative sums).
/// Unshrunk: the caller covers the rounding of this evaluation.
template <class S>
S dual_bound(const Matrix<S>& X, const std::vector<std::int32_t>& order, const std::vector<std::uint64_t>& q) {
  const Eigen::Index n = X.rows(), d = X.cols();
  std::uint64_t W = 0;
  for (std::uint64_t v : q) W += v;
  if (W == 0) return S(0);
  std::vector<S> qs(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i)
    qs[static_cast<std::size_t>(i)] = S(static_cast<double>(q[static_cast<std::size_t>(i)]));
  S g(0), col(0), t(0);
  for (Eigen::Index j = 0; j < d; ++j) {
    const std::int32_t* p = order.data() + j * n;
    std::uint64_t cum = 0;
    Eigen::Index k = 0;
    for (; k < n - 1; ++k) {
      cum += q[static_cast<std::size_t>(p[k])];
      if (2 * cum >= W) break;
    }
    const S& m = X(p[k], j);
    col = S(0);
    for (Eigen::Index i = 0; i < n; ++i) {
      if (q[static_cast<std::size_t>(i)] == 0) continue;
      t = X(i, j);
      t -= m;
      t *= qs[static_cast<std::size_t>(i)];
      if (t < 0)
        col -= t;
      else
        col += t;
    }
    g += col;
  }
  return S(g / S(static_cast<double>(W)));
}

}  // namespace norms_detail

template <class S> S norm_1(const Matrix<S>& M) { return norms_detail::centred_norms<S>(M, nullptr).one; }

template <class S> S norm_inf(const Matrix<S>& M) { return norms_detail::centred_norms<S>(M, nullptr).inf; }

template <class S> S norm_composite(const Matrix<S>& M) { return norms_detail::centred_norms<S>(M, nullptr).composite; }

template <class S> S norm_frobenius(const Matrix<S>& M) { return norms_detail::centred_norms<S>(M, nullptr).frobenius; }

template <class S> Norms<S> norms_of(const Matrix<S>& M) { return norms_detail::centred_norms<S>(M, nullptr); }

template <class S> RowVector<S> column_means(const Matrix<S>& X) {
  norms_detail::require_rows(X, "column_means");
  const Eigen::Index n = X.rows(), d = X.cols();
  const S nn = S(static_cast<double>(n));
  RowVector<S> m(d);
  S sum(0), t(0);
  for (Eigen::Index j = 0; j < d; ++j) {
    const S& x0 = X(0, j);
    sum = S(0);
    for (Eigen::Index i = 1; i < n; ++i) {
      t = X(i, j);
      t -= x0;
      sum += t;
    }
    sum /= nn;
    m(j) = x0;
    m(j) += sum;
  }
  return m;
}

template <class S> RowVector<S> column_medians(const Matrix<S>& X) {
  norms_detail::require_rows(X, "column_medians");
  norms_detail::require_finite(X, "column_medians");
  return norms_detail::medians_from_order(X, norms_detail::column_order(X));
}

template <class S> Matrix<S> residual(const Matrix<S>& X, const RowVector<S>& c) {
  if (c.size() != X.cols())
    throw std::invalid_argument("residual: centre has " + std::to_string(c.size()) + " entries, X has " +
                                std::to_string(X.cols()) + " columns");
  Matrix<S> R(X.rows(), X.cols());
  for (Eigen::Index j = 0; j < X.cols(); ++j)
    for (Eigen::Index i = 0; i < X.rows(); ++i) {
      R(i, j) = X(i, j);
      R(i, j) -= c(j);
    }
  return R;
}

template <class S> OptimalResidual<S> optimal_residual(const Matrix<S>& X) {
  norms_detail::require_rows(X, "optimal_residual");
  norms_detail::require_finite(X, "optimal_residual");
  const Eigen::Index n = X.rows(), d = X.cols();
  const std::vector<std::int32_t> order = norms_detail::column_order(X);
  const RowVector<S> med = norms_detail::medians_from_order(X, order);
  const RowVector<S> mean = column_means(X);
  const Norms<S> at_med = norms_detail::centred_norms(X, &med);
  const Norms<S> at_mean = norms_detail::centred_norms(X, &mean);

  OptimalResidual<S> out;
  out.min_one = at_med.one;
  // Candidates in order of preference on ties: median, mean, then searched.
  out.best_center = med;
  out.at_best = at_med;
  out.min_inf.upper = at_med.inf;
  auto consider = [&](const RowVector<S>& c, const Norms<S>& nm) {
    if (nm.inf < out.min_inf.upper) out.min_inf.upper = nm.inf;
    if (nm.composite < out.at_best.composite) {
      out.at_best = nm;
      out.best_center = c;
    }
  };
  consider(mean, at_mean);

  // Scale of the median-centred residual: s = max |X_ij − med_j|.
  S s(0), t(0);
  for (Eigen::Index j = 0; j < d; ++j) {
    const std::int32_t* p = order.data() + j * n;
    t = X(p[n - 1], j);
    t -= med(j);
    if (t > s) s = t;
    t = med(j);
    t -= X(p[0], j);
    if (t > s) s = t;
  }
  S lb_inf(0);
  if (s > 0) {
    // D only steers the search: one division, then products.
    const S inv_s = S(1) / s;
    Eigen::MatrixXd D(n, d);
    for (Eigen::Index j = 0; j < d; ++j)
      for (Eigen::Index i = 0; i < n; ++i) {
        t = X(i, j);
        t -= med(j);
        t *= inv_s;
        D(i, j) = norms_detail::to_double(t);
      }
    const norms_detail::CentreSearch found = norms_detail::search_centres(D, order);
    for (const Eigen::RowVectorXd* cd : {&found.inf_centre, &found.composite_centre}) {
      RowVector<S> c(d);
      for (Eigen::Index j = 0; j < d; ++j) {
        c(j) = S((*cd)(j));
        c(j) *= s;
        c(j) += med(j);
      }
      consider(c, norms_detail::centred_norms(X, &c));
    }
    for (const std::vector<std::uint64_t>& q : found.dual_weights) {
      S v = norms_detail::dual_bound(X, order, q);
      if (v > lb_inf) lb_inf = std::move(v);
    }
  }
  out.composite.upper = out.at_best.composite;

  // Rounding of the lower bounds' own evaluation: below (n + d + 8)·u
  // relative (u = eps/2); shrink by (n + d + 8)·eps, a factor 2 to spare.
  const S eps = std::numeric_limits<S>::epsilon();
  S shrink = S(1) - eps * S(static_cast<double>(n + d + 8));
  if (shrink < 0) shrink = S(0);
  out.min_inf.lower = S(lb_inf * shrink);
  out.composite.lower = S(norms_detail::geometric_mean(out.min_one, lb_inf) * shrink);
  if (out.min_inf.lower > out.min_inf.upper) out.min_inf.lower = out.min_inf.upper;
  if (out.composite.lower > out.composite.upper) out.composite.lower = out.composite.upper;
  return out;
}

template <class S> Norms<S> residual_norms(const Matrix<S>& X, Center c) {
  switch (c) {
    case Center::mean: {
      const RowVector<S> m = column_means(X);
      return norms_detail::centred_norms(X, &m);
    }
    case Center::median: {
      const RowVector<S> m = column_medians(X);
      return norms_detail::centred_norms(X, &m);
    }
    case Center::optimal:
      return optimal_residual(X).at_best;
  }
  throw std::logic_error("residual_norms: unknown centre");
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_NORMS(S)                                                                            \
  template S sanpath::norm_1<S>(const sanpath::Matrix<S>&);                                                     \
  template S sanpath::norm_inf<S>(const sanpath::Matrix<S>&);                                                   \
  template S sanpath::norm_composite<S>(const sanpath::Matrix<S>&);                                             \
  template S sanpath::norm_frobenius<S>(const sanpath::Matrix<S>&);                                             \
  template sanpath::RowVector<S> sanpath::column_means<S>(const sanpath::Matrix<S>&);                           \
  template sanpath::RowVector<S> sanpath::column_medians<S>(const sanpath::Matrix<S>&);                         \
  template sanpath::Matrix<S> sanpath::residual<S>(const sanpath::Matrix<S>&, const sanpath::RowVector<S>&);    \
  template sanpath::Norms<S> sanpath::norms_of<S>(const sanpath::Matrix<S>&);                                   \
  template sanpath::OptimalResidual<S> sanpath::optimal_residual<S>(const sanpath::Matrix<S>&);                 \
  template sanpath::Norms<S> sanpath::residual_norms<S>(const sanpath::Matrix<S>&, sanpath::Center);

#pragma once
/// \file norms.hpp
/// Norms and the residual of math.md §3: the induced 1- and ∞-norms, the
/// composite \f$\|M\|_{1,\infty}=\sqrt{\|M\|_1\|M\|_\infty}\f$, Frobenius, and
/// the residual \f$X-\mathbf 1c^T\f$ for a centre c (mean, median, or the
/// optimal centre, which is enclosed rather than computed).

#include "sanpath/core/scalar.hpp"

#include <string>

namespace sanpath {

/// Which centre c a residual \f$X-\mathbf 1c^T\f$ subtracts.
enum class Center { mean, median, optimal };

/// "mean", "median" or "optimal".
std::string to_string(Center);
/// Parses "mean|median|optimal". Throws std::invalid_argument naming the text.
Center parse_center(const std::string& text);

/// Induced 1-norm: \f$\max_j \sum_i |M_{ij}|\f$ (largest column abs-sum).
/// M: any shape; 0 when M has no entries.
template <class S> S norm_1(const Matrix<S>& M);

/// Induced ∞-norm: \f$\max_i \sum_j |M_{ij}|\f$ (largest row abs-sum).
/// M: any shape; 0 when M has no entries.
template <class S> S norm_inf(const Matrix<S>& M);

/// The paper's composite \f$\|M\|_{1,\infty}=\sqrt{\|M\|_1\,\|M\|_\infty}\f$
/// (evaluated as \f$\sqrt{\|M\|_1}\sqrt{\|M\|_\infty}\f$ so double cannot underflow).
template <class S> S norm_composite(const Matrix<S>& M);

/// Frobenius norm \f$\sqrt{\sum_{ij} M_{ij}^2}\f$ (scaled in double against
/// overflow/underflow; plain sum of squares in MPFR).
template <class S> S norm_frobenius(const Matrix<S>& M);

/// Column means of X (n×d, n ≥ 1), a 1×d row:
/// \f$c_j = X_{0j} + \frac1n\sum_i (X_{ij}-X_{0j})\f$ (exact for a constant column).
/// Throws std::invalid_argument when X has no rows.
template <class S> RowVector<S> column_means(const Matrix<S>& X);

/// Column medians of X (n×d, n ≥ 1, finite), a 1×d row: the exact minimiser
/// of \f$\|X-\mathbf 1c^T\|_1\f$; for even n the midpoint of the two middle
/// values. Throws std::invalid_argument when X has no rows or a non-finite entry.
template <class S> RowVector<S> column_medians(const Matrix<S>& X);

/// The residual \f$X-\mathbf 1c^T\f$: X n×d, c 1×d, result n×d.
/// Throws std::invalid_argument when c has not d entries.
template <class S> Matrix<S> residual(const Matrix<S>& X, const RowVector<S>& c);

/// All four norms of one matrix.
template <class S> struct Norms {
  S one, inf, composite, frobenius;
};

/// The four norms of M in one pass; each equals the corresponding norm_*.
template <class S> Norms<S> norms_of(const Matrix<S>& M);

/// A closed interval [lower, upper].
template <class S> struct Enclosure {
  S lower, upper;
};

/// The optimal-centre residual of math.md §3, enclosed.
template <class S> struct OptimalResidual {
  Enclosure<S> composite;    ///< encloses \f$\min_c \|X-\mathbf 1c^T\|_{1,\infty}\f$
  S min_one;                 ///< \f$\min_c \|X-\mathbf 1c^T\|_1\f$ (exact: median centre)
  Enclosure<S> min_inf;      ///< encloses \f$\min_c \|X-\mathbf 1c^T\|_\infty\f$
  RowVector<S> best_center;  ///< 1×d, the centre achieving composite.upper
  Norms<S> at_best;          ///< norms of \f$X-\mathbf 1\,\mathrm{best\_center}^T\f$; at_best.composite == composite.upper
};

/// Encloses \f$\min_c\|X-\mathbf 1c^T\|_{1,\infty}\f$ for X n×d (n ≥ 1, finite).
/// lower = \f$\sqrt{\min_c\|\cdot\|_1\cdot L_\infty}\f$, \f$L_\infty\f$ the best of three
/// weak-duality bounds for the ∞-norm LP, \f$\sum_j\min_{c_j}\sum_i w_i|X_{ij}-c_j|\f$ for
/// row weights w summing to 1 (exact weighted medians, shrunk by \f$(n+d+8)\varepsilon\f$ to
/// cover its own rounding): the LP's optimal duals (GLPK simplex in double, when n·d ≤ 2^12),
/// a multiplicative-weights game's, and the farthest pair of rows (weights ½, ½:
/// \f$\max_{ik}\|x_i-x_k\|_1/2\f$). With the LP solved, min_inf is enclosed to about
/// double rounding, so lower is math.md's quantity to about 15 digits (see min_inf).
/// upper = least composite over the mean, the median, the best ∞-norm centre (the LP's)
/// and a refined composite centre. lower ≤ upper ≤ min(mean, median composite) holds for
/// the computed values. The search runs in double on \f$(X-\mathbf 1\,\mathrm{med}^T)/s\f$
/// with bounded work: R = clamp(2^24/(n d), 160, 1024) multiplicative-weights rounds
/// on the LP, the LP (dual simplex, iteration-limited), 2 × R/2 rounds of a scalarised composite game, at
/// most 4 + 4 coordinate-descent sweeps (each round or sweep O(n d)); sorting costs
/// O(d n log n). Throws std::invalid_argument when X has no rows or a non-finite entry.
template <class S> OptimalResidual<S> optimal_residual(const Matrix<S>& X);

/// Residual norms for a centre: mean / median are the plain residual; optimal gives the
/// norms at the best centre (use optimal_residual for the enclosure).
template <class S> Norms<S> residual_norms(const Matrix<S>& X, Center c);

#define SANPATH_DECLARE_NORMS(S)                                                    \
  extern template S norm_1<S>(const Matrix<S>&);                                    \
  extern template S norm_inf<S>(const Matrix<S>&);                                  \
  extern template S norm_composite<S>(const Matrix<S>&);                            \
  extern template S norm_frobenius<S>(const Matrix<S>&);                            \
  extern template RowVector<S> column_means<S>(const Matrix<S>&);                   \
  extern template RowVector<S> column_medians<S>(const Matrix<S>&);                 \
  extern template Matrix<S> residual<S>(const Matrix<S>&, const RowVector<S>&);     \
  extern template Norms<S> norms_of<S>(const Matrix<S>&);                           \
  extern template OptimalResidual<S> optimal_residual<S>(const Matrix<S>&);         \
  extern template Norms<S> residual_norms<S>(const Matrix<S>&, Center);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_NORMS)
#undef SANPATH_DECLARE_NORMS

}  // namespace sanpath

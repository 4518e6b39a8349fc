#pragma once
// The composite norms of one enumerated path (its record), next to the plain
// ones of norms_impl.hpp: the same arithmetic in the same order, fused so that
// a record costs less than its products. Used by the path walk (paths_impl.hpp).
#include "sanpath/compute/norms.hpp"
#include "sanpath/compute/paths.hpp"

#include <cmath>
#include <type_traits>
#include <vector>

namespace sanpath {
namespace detail {

/// ‖res(M)‖_{1,∞} with the mean centre.
template <class S> S mean_residual_composite(const Matrix<S>& M) { return norm_composite(residual(M, column_means(M))); }

/// Record norms in double without the scalar bookkeeping of norms.hpp (the
/// records of an enumeration otherwise cost more than its products). The
/// composite norms (plain and mean-centred) are bit-identical to
/// norm_composite and mean_residual_composite: every entry is rounded the
/// same way and every sum runs in the same order (column sums down a column,
/// eight columns at a time; row sums along a row, vectorised over rows). The
/// Frobenius norm scales by a power of two instead of the running rescaling
/// of norms_of (same accuracy, may differ in the last bits). Every function
/// returns false, leaving the work to norms.hpp, when M has a non-finite
/// entry (or its sums overflow).
class RecordNorms {
 public:
  /// plain = ‖M‖_{1,∞} (when `plain` is non-null) and centred = ‖M − 1 mean(M)ᵀ‖_{1,∞}
  /// with column_means' formula x_0j + Σ_{i≥1}(x_ij − x_0j)/n, in one set of passes.
  bool composites(const Matrix<double>& M, double* plain, double& centred) {
    const Eigen::Index n = M.rows(), d = M.cols();
    const auto du = static_cast<std::size_t>(d), nu = static_cast<std::size_t>(n);
    mean_.resize(du);
    col_.resize(du);
    colc_.resize(du);
    double* mean = mean_.data();
    double* col = col_.data();
    // Pass 1, down the columns: Σ_{i≥1}(x_ij − x_0j) and (plain) Σ_i |x_ij|.
    if (plain != nullptr)
      column_pass(M, mean, col);
    else
      column_pass(M, mean, nullptr);
    const double nn = static_cast<double>(n);
    for (Eigen::Index j = 0; j < d; ++j) mean[j] = M(0, j) + mean[j] / nn;
    // Pass 2, down the columns: Σ_i |x_ij − c_j|.
    centred_column_pass(M, mean, colc_.data());
    // Pass 3, along the rows (vectorised over rows): Σ_j |x_ij − c_j| and Σ_j |x_ij|.
    rowc_.assign(nu, 0.0);
    double* rowc = rowc_.data();
    if (plain != nullptr) {
      row_.assign(nu, 0.0);
      double* row = row_.data();
      for (Eigen::Index j = 0; j < d; ++j) {
        const double* x = M.col(j).data();
        const double cj = mean[j];
        for (Eigen::Index i = 0; i < n; ++i) {
          row[i] += std::abs(x[i]);
          rowc[i] += std::abs(x[i] - cj);
        }
      }
    } else {
      for (Eigen::Index j = 0; j < d; ++j) {
        const double* x = M.col(j).data();
        const double cj = mean[j];
        for (Eigen::Index i = 0; i < n; ++i) rowc[i] += std::abs(x[i] - cj);
      }
    }
    bool finite = true;
    centred = composite_of(colc_, rowc_, finite);
    if (plain != nullptr) *plain = composite_of(col_, row_, finite);
    return finite;
  }

  /// ‖M‖_F: Σ (2^-e x)² with 2^e the binade of max |x|, then scaled back.
  /// Call after composite(M, ...) returned true (M finite).
  static double frobenius(const Matrix<double>& M) {
    const double amax = M.cwiseAbs().maxCoeff();
    if (amax == 0) return 0;
    int e = 0;
    std::frexp(amax, &e);
    if (e > 1000 || e < -1000) return norm_frobenius(M);
    const double s = std::ldexp(1.0, -e);
    return std::ldexp(std::sqrt((M * s).squaredNorm()), e);
  }

 private:
  /// √(max col)·√(max row) as geometric_mean(‖·‖_1, ‖·‖_∞); clears `finite` on a non-finite sum.
  static double composite_of(const std::vector<double>& col, const std::vector<double>& row, bool& finite) {
    double one = 0, inf = 0;
    for (const double v : col) {
      finite = finite && std::isfinite(v);
      if (v > one) one = v;
    }
    for (const double v : row) {
      finite = finite && std::isfinite(v);
      if (v > inf) inf = v;
    }
    return std::sqrt(one) * std::sqrt(inf);
  }

  /// diff[j] = Σ_{i≥1}(x_ij − x_0j) and abs[j] = Σ_i |x_ij| (if non-null), i
  /// ascending from +0, eight columns at a time so the sums overlap.
  static void column_pass(const Matrix<double>& M, double* diff, double* abs) {
    const Eigen::Index n = M.rows(), d = M.cols();
    Eigen::Index j = 0;
    for (; j + 8 <= d; j += 8) {
      double a[8] = {0, 0, 0, 0, 0, 0, 0, 0}, b[8] = {0, 0, 0, 0, 0, 0, 0, 0}, x0[8];
      const double* x[8];
      for (int q = 0; q < 8; ++q) {
        x[q] = M.col(j + q).data();
        x0[q] = x[q][0];
      }
      if (abs != nullptr)
        for (int q = 0; q < 8; ++q) b[q] += std::abs(x0[q]);
      for (Eigen::Index i = 1; i < n; ++i)
        for (int q = 0; q < 8; ++q) {
          a[q] += x[q][i] - x0[q];
          if (abs != nullptr) b[q] += std::abs(x[q][i]);
        }
      for (int q = 0; q < 8; ++q) {
        diff[j + q] = a[q];
        if (abs != nullptr) abs[j + q] = b[q];
      }
    }
    for (; j < d; ++j) {
      const double* x = M.col(j).data();
      double a = 0, b = std::abs(x[0]);
      for (Eigen::Index i = 1; i < n; ++i) {
        a += x[i] - x[0];
        b += std::abs(x[i]);
      }
      diff[j] = a;
      if (abs != nullptr) abs[j] = b;
    }
  }

  /// out[j] = Σ_i |x_ij − c_j|, i ascending from +0, eight columns at a time.
  static void centred_column_pass(const Matrix<double>& M, const double* c, double* out) {
    const Eigen::Index n = M.rows(), d = M.cols();
    Eigen::Index j = 0;
    for (; j + 8 <= d; j += 8) {
      double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const double* x[8];
      for (int q = 0; q < 8; ++q) x[q] = M.col(j + q).data();
      for (Eigen::Index i = 0; i < n; ++i)
        for (int q = 0; q < 8; ++q) a[q] += std::abs(x[q][i] - c[j + q]);
      for (int q = 0; q < 8; ++q) out[j + q] = a[q];
    }
    for (; j < d; ++j) {
      const double* x = M.col(j).data();
      double a = 0;
      for (Eigen::Index i = 0; i < n; ++i) a += std::abs(x[i] - c[j]);
      out[j] = a;
    }
  }

  std::vector<double> mean_, col_, colc_, row_, rowc_;
};

/// Record norms in an MPFR tier: the operations of norms.hpp in the same
/// order (bit-identical to norms_of and mean_residual_composite), on values
/// kept from record to record instead of a residual matrix and fresh
/// temporaries per call.
template <class S> class RecordNormsMp {
 public:
  /// norms_of(M).composite and .frobenius.
  void plain(const Matrix<S>& M, S& composite, S& frobenius) {
    using std::sqrt;
    reset_rows(M.rows());
    one_ = 0;
    ssq_ = 0;
    for (Eigen::Index j = 0; j < M.cols(); ++j) {
      col_ = 0;
      for (Eigen::Index i = 0; i < M.rows(); ++i) {
        t_ = M(i, j);
        mpfr_abs(t_.backend().data(), t_.backend().data(), MPFR_RNDN);
        col_ += t_;
        row_[static_cast<std::size_t>(i)] += t_;
        sq_ = t_;
        sq_ *= t_;
        ssq_ += sq_;
      }
      if (col_ > one_) one_ = col_;
    }
    composite = S(sqrt(one_) * sqrt(max_row()));
    frobenius = sqrt(ssq_);
  }

  /// norm_composite(residual(M, column_means(M))).
  S mean_residual_composite(const Matrix<S>& M) {
    using std::sqrt;
    const Eigen::Index n = M.rows(), d = M.cols();
    if (static_cast<Eigen::Index>(mean_.size()) < d) mean_.resize(static_cast<std::size_t>(d));
    const S nn = S(static_cast<double>(n));
    for (Eigen::Index j = 0; j < d; ++j) {
      const S& x0 = M(0, j);
      col_ = 0;
      for (Eigen::Index i = 1; i < n; ++i) {
        t_ = M(i, j);
        t_ -= x0;
        col_ += t_;
      }
      col_ /= nn;
      S& m = mean_[static_cast<std::size_t>(j)];
      m = x0;
      m += col_;
    }
    reset_rows(n);
    one_ = 0;
    for (Eigen::Index j = 0; j < d; ++j) {
      col_ = 0;
      for (Eigen::Index i = 0; i < n; ++i) {
        t_ = M(i, j);
        t_ -= mean_[static_cast<std::size_t>(j)];
        mpfr_abs(t_.backend().data(), t_.backend().data(), MPFR_RNDN);
        col_ += t_;
        row_[static_cast<std::size_t>(i)] += t_;
      }
      if (col_ > one_) one_ = col_;
    }
    return S(sqrt(one_) * sqrt(max_row()));
  }

 private:
  void reset_rows(Eigen::Index n) {
    if (static_cast<Eigen::Index>(row_.size()) < n) row_.resize(static_cast<std::size_t>(n));
    rows_ = n;
    for (Eigen::Index i = 0; i < n; ++i) row_[static_cast<std::size_t>(i)] = 0;
  }
  const S& max_row() {
    inf_ = 0;
    for (Eigen::Index i = 0; i < rows_; ++i)
      if (row_[static_cast<std::size_t>(i)] > inf_) inf_ = row_[static_cast<std::size_t>(i)];
    return inf_;
  }
  std::vector<S> row_, mean_;
  Eigen::Index rows_ = 0;
  S one_, inf_, col_, t_, sq_, ssq_;
};

template <class S>
PathRecord<S> make_record(const std::vector<int>& heads, int len, const Matrix<S>& T, const Matrix<S>* P,
                          Eigen::Index n, bool with_P) {
  PathRecord<S> r;
  r.heads = heads;
  r.length = len;
  if constexpr (std::is_same_v<S, double>) {
    thread_local RecordNorms k;
    if (k.composites(T, &r.norm_composite, r.residual_composite) &&
        (!with_P || P == nullptr || k.composites(*P, nullptr, r.stochastic_residual))) {
      r.norm_frobenius = RecordNorms::frobenius(T);
      if (!with_P)
        r.stochastic_residual = 0;
      else if (P == nullptr)
        r.stochastic_residual = mean_residual_composite<double>(Matrix<double>::Identity(n, n));
      return r;
    }
  }
  if constexpr (is_mpfr_v<S>) {
    thread_local RecordNormsMp<S> k;
    k.plain(T, r.norm_composite, r.norm_frobenius);
    r.residual_composite = k.mean_residual_composite(T);
    if (!with_P)
      r.stochastic_residual = S(0);
    else if (P != nullptr)
      r.stochastic_residual = k.mean_residual_composite(*P);
    else
      r.stochastic_residual = mean_residual_composite<S>(Matrix<S>::Identity(n, n));
    return r;
  }
  const Norms<S> nt = norms_of(T);
  r.norm_composite = nt.composite;
  r.norm_frobenius = nt.frobenius;
  r.residual_composite = mean_residual_composite(T);
  if (with_P) {
    if (P != nullptr) {
      r.stochastic_residual = mean_residual_composite(*P);
    } else {
      const Matrix<S> I = Matrix<S>::Identity(n, n);
      r.stochastic_residual = mean_residual_composite(I);
    }
  } else {
    r.stochastic_residual = S(0);
  }
  return r;
}

}  // namespace detail
}  // namespace sanpath

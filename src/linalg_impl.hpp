#pragma once
#include "sanpath/linalg.hpp"

#include <stdexcept>

namespace sanpath {
namespace detail {

inline void check_inner(Eigen::Index a, Eigen::Index b, const char* what) {
  if (a != b)
    throw std::invalid_argument(std::string(what) + ": inner dimensions " + std::to_string(a) + " and " +
                                std::to_string(b) + " differ");
}

/// In-place MPFR product C = A·op(B); op(B) = B (trans=false) or Bᵀ.
/// Each entry accumulates with mpfr_fma into the preallocated C(i,j); the
/// column of A is walked contiguously (column-major).
template <class S> void mpfr_gemm(const Matrix<S>& A, const Matrix<S>& B, Matrix<S>& C, bool trans) {
  const Eigen::Index m = A.rows(), k = A.cols(), n = trans ? B.rows() : B.cols();
  if (C.rows() != m || C.cols() != n) C.resize(m, n);
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < m; ++i) mpfr_set_zero(C(i, j).backend().data(), 1);
  for (Eigen::Index j = 0; j < n; ++j) {
    for (Eigen::Index p = 0; p < k; ++p) {
      mpfr_srcptr b = trans ? B(j, p).backend().data() : B(p, j).backend().data();
      if (mpfr_zero_p(b)) continue;
      for (Eigen::Index i = 0; i < m; ++i) {
        mpfr_ptr c = C(i, j).backend().data();
        mpfr_fma(c, A(i, p).backend().data(), b, c, MPFR_RNDN);
      }
    }
  }
}

}  // namespace detail

template <class S> void gemm(const Matrix<S>& A, const Matrix<S>& B, Matrix<S>& C) {
  detail::check_inner(A.cols(), B.rows(), "gemm");
  if constexpr (is_mpfr_v<S>) {
    detail::mpfr_gemm(A, B, C, false);
  } else {
    C.noalias() = A * B;
  }
}

template <class S> void gemm_nt(const Matrix<S>& A, const Matrix<S>& B, Matrix<S>& C) {
  detail::check_inner(A.cols(), B.cols(), "gemm_nt");
  if constexpr (is_mpfr_v<S>) {
    detail::mpfr_gemm(A, B, C, true);
  } else {
    C.noalias() = A * B.transpose();
  }
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_LINALG(S)                                                       \
  template void sanpath::gemm<S>(const sanpath::Matrix<S>&, const sanpath::Matrix<S>&,     \
                                 sanpath::Matrix<S>&);                                      \
  template void sanpath::gemm_nt<S>(const sanpath::Matrix<S>&, const sanpath::Matrix<S>&,  \
                                    sanpath::Matrix<S>&);

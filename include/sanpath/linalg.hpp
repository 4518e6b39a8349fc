#pragma once
/// \file linalg.hpp
/// Dense products in a working scalar. Double goes through Eigen's blocked
/// GEMM; MPFR tiers through an in-place kernel (mpfr_fma into preallocated
/// entries, no temporaries) because Eigen's generic product on Boost types
/// allocates a temporary per operation.

#include "sanpath/scalar.hpp"

namespace sanpath {

/// C = A·B.  A: m×k, B: k×n, C resized to m×n.
template <class S> void gemm(const Matrix<S>& A, const Matrix<S>& B, Matrix<S>& C);
/// C = A·Bᵀ.  A: m×k, B: n×k, C resized to m×n.
template <class S> void gemm_nt(const Matrix<S>& A, const Matrix<S>& B, Matrix<S>& C);

/// Convenience: returns A·B.
template <class S> Matrix<S> product(const Matrix<S>& A, const Matrix<S>& B) {
  Matrix<S> C;
  gemm(A, B, C);
  return C;
}

/// Converts a double matrix exactly into scalar S.
template <class S, class Derived> Matrix<S> convert(const Eigen::MatrixBase<Derived>& m) {
  if constexpr (std::is_same_v<S, double>) {
    return m;
  } else {
    Matrix<S> out(m.rows(), m.cols());
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      for (Eigen::Index i = 0; i < m.rows(); ++i) out(i, j) = S(m(i, j));
    return out;
  }
}

#define SANPATH_DECLARE_LINALG(S)                                                      \
  extern template void gemm<S>(const Matrix<S>&, const Matrix<S>&, Matrix<S>&);       \
  extern template void gemm_nt<S>(const Matrix<S>&, const Matrix<S>&, Matrix<S>&);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_LINALG)
#undef SANPATH_DECLARE_LINALG

}  // namespace sanpath

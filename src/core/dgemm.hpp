#pragma once
// sanpath's double GEMM (core/linalg.hpp's products of doubles): panels packed
// BLIS-style, fixed block sizes, and every entry of C summed over the inner
// index p = 0, 1, …, k−1 in that order by fused multiply-adds starting from
// +0:  c ← fma(a_ip, b_pj, c).  The microkernels of the three instruction-set
// levels (AVX-512F, AVX2+FMA, generic x86-64 with std::fma, correctly rounded
// in software where the CPU has no FMA) differ only in how many entries they
// carry at once, so C is the same to the bit on every level, machine and
// thread count, in every rounding mode (the FMAs round as the calling
// thread's mode says).
#include "sanpath/core/weight_view.hpp"

#include <Eigen/Core>

#include <optional>
#include <string>

namespace sanpath {
namespace detail {

enum class DoubleIsa { generic = 0, avx2 = 1, avx512 = 2 };

/// "generic", "avx2" or "avx512".
const char* isa_name(DoubleIsa isa);

/// The level named "generic", "avx2" or "avx512"; nullopt for another name.
std::optional<DoubleIsa> isa_from_name(const std::string& name);

/// The names of the levels, for messages: "generic, avx2, avx512".
const char* isa_names();

/// The best level this CPU runs.
DoubleIsa cpu_double_isa();

/// The level the products use: SANPATH_ISA when set (read once; an unknown
/// name or a level the CPU lacks throws std::invalid_argument naming the
/// variable), else cpu_double_isa(); set_double_isa overrides both.
DoubleIsa double_isa();

/// Forces a level; throws std::invalid_argument when the CPU lacks it.
void set_double_isa(DoubleIsa isa);

/// C = A·op(B) on one thread at level `isa`: A m×k (column-major, leading
/// dimension lda), op(B) k×n, that is B k×n (ldb) or, with trans_b, B n×k
/// (ldb) read transposed; C m×n (ldc), overwritten. k = 0 gives C = 0.
void dgemm(DoubleIsa isa, Eigen::Index m, Eigen::Index n, Eigen::Index k, const double* A, Eigen::Index lda,
           const double* B, Eigen::Index ldb, bool trans_b, double* C, Eigen::Index ldc);

/// C = A·W on one thread at level `isa`, W (k × W.cols) a view of stored
/// floats whose panels are packed straight from its bytes: the same bits as
/// dgemm on W.decode() (every stored format is exact in double).
void dgemm_view(DoubleIsa isa, Eigen::Index m, Eigen::Index k, const double* A, Eigen::Index lda,
                const WeightView& W, double* C, Eigen::Index ldc);

/// The same product in binary32 (compute/emulate.hpp's matrix products), by
/// the same packing and the same levels: every entry of C is the chain
/// c ← fmaf(a_ip, b_pj, c) over p = 0, 1, …, k−1 from +0.0f, so C is the same
/// to the bit on every level, machine and thread count. Subnormals are kept
/// (the microkernels leave MXCSR as the calling thread set it).
void sgemm(DoubleIsa isa, Eigen::Index m, Eigen::Index n, Eigen::Index k, const float* A, Eigen::Index lda,
           const float* B, Eigen::Index ldb, bool trans_b, float* C, Eigen::Index ldc);

}  // namespace detail
}  // namespace sanpath

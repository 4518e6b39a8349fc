#pragma once
/// \file forward_centred.hpp
/// The centred forward pass of math.md §7: every layer's output is carried
/// as X^l = 1 c[l]ᵀ + R[l] (c: 1×d row means, R: n×d with column sums 0 to
/// working precision) and each layer maps (c, R) → (c', R') without forming
/// X, so a residual far below ‖X‖·ε keeps the working precision's relative
/// accuracy. MPFR numbers use the largest exponent range MPFR allows.

#include "sanpath/compute/forward.hpp"
#include "sanpath/core/scalar.hpp"

#include <vector>

namespace sanpath {

/// X^l = 1 c[l]ᵀ + R[l] for l = 0..L (c: 1×d row means, R: n×d with column sums 0 to working precision).
template <class S> struct CentredTrace {
  Variant variant;
  std::vector<RowVector<S>> c;
  std::vector<Matrix<S>> R;
  /// When recorded: attention of layer l, head h (n×n each): Pi[l-1][h] has rows π^(i) (all rows
  /// equal without mask), P[l-1][h] the attention P = Π + E of math.md §7, each entry as the pass
  /// formed it (Π + E where E came from expm1(S), the softmax of v + S on other rows).
  std::vector<std::vector<Matrix<S>>> Pi, P;
  int layers() const { return static_cast<int>(R.size()) - 1; }
  Matrix<S> X(int l) const;  ///< 1 c[l]ᵀ + R[l] (rounds R away when tiny: only for ‖X‖ and checks)
};

/// Runs `model` on X0 (n×d_model) with the layer map of `variant`, centred
/// (math.md §7, §7.1). Every family and variant forward() runs: skip, mlp
/// none/plain/residual (plain or gated, every activation), LayerNorm and
/// RMSNorm (gain g or 1 + g) before, after or around each sublayer (sandwich
/// norms), sequential and parallel blocks, masks and sliding windows, rotary
/// (whole or partial), XLNet's relative terms, T5's bucket bias, soft caps,
/// grouped keys and values, biases, shared layers. Attention: P = Π + E with
/// Π = rowsoftmax(A⁰ + A¹) (the logits of the centre and their part linear in
/// R; for math.md §1's bilinear logits the softmax of one vector v) and
/// E_ij = Π_ij (e_ij − Σ_k Π_ik e_ik)/(1 + Σ_k Π_ik e_ik), e = expm1(S), S the
/// second-order logits (rows with max|S_ij| > 1/2 take E = P − Π from the
/// stable softmax). Row-wise maps g (the norms, the MLP's activation) add
/// Δ_i = g(c + r_i) − g(c), evaluated by cancellation-free identities: the
/// norms through 1/s' − 1/s = −δm/(s s'(s + s')), gelu_tanh and silu through
/// tanh a − tanh b = sinh(a − b) sech a sech b, gelu through a Hermite series
/// of Φ(h + δ) − Φ(h) (|δ|(1+|h|) ≤ ½) or complementary error functions,
/// relu exactly by the sign pattern. The cost of a layer is that of forward()
/// at the same precision (four products of n×n logits per head where
/// positions enter them, against one).
/// Throws std::invalid_argument like forward(); NumericalError naming the
/// layer when R turns non-finite, or (double) underflows to all-zero from a
/// nonzero residual.
template <class S>
CentredTrace<S> forward_centred(const Model& model, const Variant& variant, const Matrix<S>& X0,
                                const ForwardOptions& options = {});

/// The same from an input given as X0 = 1 c0ᵀ + R0 (c0: 1×d_model, R0:
/// n×d_model), so that R0 may be far below ‖c0‖·ε. R0's column means are
/// moved into c0 first.
template <class S>
CentredTrace<S> forward_centred(const Model& model, const Variant& variant, const RowVector<S>& c0,
                                const Matrix<S>& R0, const ForwardOptions& options = {});

#define SANPATH_DECLARE_CENTRED(S)                                                                             \
  extern template CentredTrace<S> forward_centred<S>(const Model&, const Variant&, const Matrix<S>&,            \
                                                     const ForwardOptions&);                                   \
  extern template CentredTrace<S> forward_centred<S>(const Model&, const Variant&, const RowVector<S>&,         \
                                                     const Matrix<S>&, const ForwardOptions&);                 \
  extern template Matrix<S> CentredTrace<S>::X(int) const;
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_CENTRED)
#undef SANPATH_DECLARE_CENTRED

}  // namespace sanpath

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

/// Runs `model` on X0 (n×d_model) with the layer map of `variant`, centred.
/// Every variant forward() runs (skip, mlp none/plain/residual with every
/// activation, layernorm none/pre/post, mask none/causal, biases, shared
/// layers). Attention: P = rowsoftmax(1vᵀ + S) = Π + E with
/// E_ij = π_j (e_ij − Σ_k π_k e_ik)/(1 + Σ_k π_k e_ik), e = expm1(S) (rows
/// with max|S_ij| > 1/2 take E = P − Π from the stable softmax). Row-wise
/// maps g (LayerNorm, the MLP's activation) add Δ_i = g(c + r_i) − g(c),
/// evaluated by cancellation-free identities: LayerNorm through
/// 1/s' − 1/s = −δv/(s s'(s + s')), gelu_tanh through
/// tanh a − tanh b = sinh(a − b) sech a sech b, gelu through a Hermite series
/// of Φ(h + δ) − Φ(h) (|δ|(1+|h|) ≤ ½) or complementary error functions,
/// relu exactly by the sign pattern. The cost of a layer is that of forward()
/// at the same precision.
/// Throws std::invalid_argument like forward(); NumericalError naming the
/// layer when R turns non-finite, or (double) underflows to all-zero from a
/// nonzero residual.
/// Whether math.md §7 defines the centred pass for `a`: not for the Llama
/// family (rotary embeddings make the attention row-dependent in a way §7
/// does not treat; RMSNorm and the gated MLP have no centred form here).
inline bool centred_pass_supports(const Architecture& a) {
  return a.norm == NormKind::layer && !a.rope_theta && !a.gated_mlp && !a.parallel_residual && !a.softcap &&
         !a.score_scale_base && !a.sandwich_norms && a.rel_buckets == 0 && !a.xlnet_relative &&
         a.window_layers.empty();
}

/// The message of the refusal, naming `source`.
inline std::string centred_pass_refusal(const std::string& source) {
  return source + ": method: the centred pass (math.md §7) is implemented for math.md §1's attention with "
                  "LayerNorm only, not for rotary embeddings, RMSNorm, a gated MLP, parallel blocks, soft-capped or "
                  "position-biased logits (the Llama family, XLNet, T5, GPT-NeoX, Phi, Gemma); use the direct pass "
                  "(--method direct)";
}

template <class S>
CentredTrace<S> forward_centred(const Model& model, const Variant& variant, const Matrix<S>& X0,
                                const ForwardOptions& options = {});

/// The same from an input given as X0 = 1 c0ᵀ + R0 (c0: 1×d_model, R0:
/// n×d_model), so that R0 may be far below ‖c0‖·ε. R0's column means are
/// moved into c0 first.
template <class S>
CentredTrace<S> forward_centred(const Model& model, const Variant& variant, const RowVector<S>& c0,
                                const Matrix<S>& R0, const ForwardOptions& options = {});

/// Sets this thread's MPFR exponent range to the largest MPFR allows
/// (mpfr_get_emin_min() .. mpfr_get_emax_max(), about 2^±(2^62)); the range
/// is per thread. forward_centred sets it in the calling thread and in its
/// own worker threads; the values it returns need it in the thread using them.
inline void use_full_mpfr_exponent_range() {
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
}

#define SANPATH_DECLARE_CENTRED(S)                                                                             \
  extern template CentredTrace<S> forward_centred<S>(const Model&, const Variant&, const Matrix<S>&,            \
                                                     const ForwardOptions&);                                   \
  extern template CentredTrace<S> forward_centred<S>(const Model&, const Variant&, const RowVector<S>&,         \
                                                     const Matrix<S>&, const ForwardOptions&);                 \
  extern template Matrix<S> CentredTrace<S>::X(int) const;
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_CENTRED)
#undef SANPATH_DECLARE_CENTRED

}  // namespace sanpath

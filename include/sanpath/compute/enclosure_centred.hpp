#pragma once
/// \file enclosure_centred.hpp
/// The centred forward pass of math.md §7 in ball arithmetic (math.md §10):
/// every layer's output enclosed as X = 1cᵀ + R, the centre c (1×d) and the
/// residual R (n×d, column sums 0 in exact arithmetic) as separate balls, so
/// that R's radius stays relative to R however far it has collapsed
/// (1e-1113622 for the embedded default's SAN). Each operation's radius is
/// that of compute/enclosure.hpp (products, sums, centring), and:
///   - attention (math.md §7.1): the logits split by order in R as
///     A⁰ + A¹ + S, each a product of the centre's and the residual's
///     queries and keys (rotated at every position; XLNet's relative terms
///     and T5's bucket bias in A⁰ + A¹; math.md §1's bilinear logits as
///     v = q0·(R W_K)_j), never a difference of logits; a soft cap maps
///     A⁰ + A¹ by κ tanh(·/κ) and S to κ(tanh(a + b) − tanh a) =
///     κ sinh b / (cosh a · cosh(a + b)), a = (A⁰ + A¹)/κ, b = S/κ. With Π the row softmax
///     of A⁰ + A¹ (under the mask and window) and e = expm1(S), P = Π + E
///     exactly, E_ij = Π_ij (e_ij − s_i)/(1 + s_i), s_i = Σ_j Π_ij e_ij; Π,
///     e, s and E are evaluated on intervals (MPFR's exp, expm1, tanh, sinh
///     and cosh rounded outward), and the widest entry of each row is
///     intersected with 1 − the others (0 − the others for E): alone it
///     carries the logits' whole radius, 1 ± 2r on the key a saturated row
///     sits on. Where Π's rows are one row (no mask, bilinear
///     logits) P R_V = 1 πᵀR_V + E R_V; elsewhere
///     P R_V = 1 (R_V)_kᵀ + (P − 1e_kᵀ) R_V for the key k of most weight,
///     (P − 1e_kᵀ)_ik = −Σ_{j≠k} P_ij; the query/key norms are row-wise maps
///     on each head's pair, as the norms below;
///   - through the attention every ball also carries bounds of its rows'
///     Euclidean norms (per head for queries, keys and values), moved by
///     ‖W‖₂ (spectral_norm_up) at each product by weights, by Cauchy–Schwarz
///     in the scores, and each entry's radius is capped by its row's (the
///     entrywise radii alone grow by |W|: about 5 digits a layer on a
///     BERT-base-shaped SAN, 3.5 with the row bounds);
///   - LayerNorm and RMSNorm through forward_centred's identity, exact for
///     every r_i: with ĉ = c − mean(c), r̃ = r_i − mean(r_i) (RMSNorm: ĉ = c,
///     r̃ = r_i), s² = |ĉ|²/d + eps, δv = (2ĉ·r̃ + |r̃|²)/d and s'² = s² + δv,
///     N(c + r_i) − N(c) = γ ∘ (r̃/s' − ĉ δv/(s s' (s + s'))), on intervals;
///   - the MLP's activation, entry by entry, A = act(h + δ) − act(h): when
///     |δ| is below the tier's unit roundoff (relative to max(1, |h|)) by the
///     mean value form act'(box)·δ over the box h ± (r_h + |δ|), whose width
///     is relative to δ (relu' ∈ [0, 1] across 0, gelu' = Φ + xφ,
///     gelu_tanh' = ½(1 + t) + ½x(1 − t²)a(1 + 3kx²), silu' = σ(1 + x(1 − σ)));
///     above 2^-8 as the difference of two interval evaluations; in between
///     as act(h̃ + δ) − act(h̃) at the midpoint h̃ and twice the bits, plus
///     r_h·max|act'(y + δ) − act'(y)| over y ∈ h̃ ± r_h; a gated MLP's
///     hidden rows act(g + G)∘D + h∘(act(g + G) − act(g)) (gate g + G, up
///     projection h + D) entrywise with the same difference.
///
/// Covers every family and variant (masks none and causal, windows).
///
/// \code
///   const auto t = forward_centred_enclosed<mpfr_real<38>>(model, Variant::san(), ball_of(X0));
///   const ResidualEnclosure e = enclose_centred_residual(t.c[12], t.R[12]);  // 1e-1113622 at 128 bits
/// \endcode

#include "sanpath/compute/enclosure.hpp"

namespace sanpath {

/// c[l] (1×d) and R[l] (n×d) enclose layer l's centre and residual, l = 0..L;
/// c_rows[l] (1×1) and R_rows[l] (n×1) bound the Euclidean norms of their
/// rows' distances to the midpoints (tighter than the entrywise radii give:
/// the attention carries both, enclosure_centred_impl.hpp).
template <class S> struct EnclosedCentredTrace {
  Variant variant;
  std::vector<BallMatrix<S>> c, R;
  std::vector<RadiusMatrix> c_rows, R_rows;
  int layers() const { return static_cast<int>(R.size()) - 1; }
};

/// The centred pass in ball arithmetic at tier S (an MPFR tier; double
/// throws std::invalid_argument) from an enclosed input (X0.rad = 0: exact).
template <class S>
EnclosedCentredTrace<S> forward_centred_enclosed(const Model& model, const Variant& variant, const BallMatrix<S>& X0,
                                                 const EnclosureOptions& options = {});

/// The residual norms of X = 1cᵀ + R (math.md §3), enclosed as
/// enclose_residual does for a whole X: mean centre, the residual is R
/// itself; optimal centre, that of R (the least residual over centres is
/// the same for X and R).
template <class S>
ResidualEnclosure enclose_centred_residual(const BallMatrix<S>& c, const BallMatrix<S>& R, Center center = Center::mean);

/// The same for layer `layer` of a trace, with its row bounds (tighter in
/// the ∞- and Frobenius norms). Throws std::out_of_range for a layer not in it.
template <class S>
ResidualEnclosure enclose_centred_residual(const EnclosedCentredTrace<S>& t, int layer, Center center = Center::mean);

#define SANPATH_DECLARE_ENCLOSURE_CENTRED(S)                                                               \
  extern template EnclosedCentredTrace<S> forward_centred_enclosed<S>(const Model&, const Variant&,         \
                                                                      const BallMatrix<S>&,                 \
                                                                      const EnclosureOptions&);             \
  extern template ResidualEnclosure enclose_centred_residual<S>(const BallMatrix<S>&, const BallMatrix<S>&, Center); \
  extern template ResidualEnclosure enclose_centred_residual<S>(const EnclosedCentredTrace<S>&, int, Center);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_ENCLOSURE_CENTRED)
#undef SANPATH_DECLARE_ENCLOSURE_CENTRED

}  // namespace sanpath

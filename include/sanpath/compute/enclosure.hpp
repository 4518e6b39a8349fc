#pragma once
/// \file enclosure.hpp
/// Proven enclosures (math.md §10): the direct forward pass of math.md §1–2
/// in ball arithmetic at an MPFR tier, and enclosures of every layer's
/// mean-centred residual norms (math.md §3) that contain the exact real
/// values. Midpoints are the tier's ordinary results (the same functions as
/// forward.hpp: products, row softmax); each radius bounds, rounded up
/// (core/ball.hpp), the propagated radii of the operands plus the rounding
/// error of the operation at the tier:
///   - products: the fixed-point kernel's error ≤ γ_k Σ|a||b| (linalg.hpp),
///     with γ_k = k·u/(1 − k·u), u = 2^(1−p) (twice the unit roundoff);
///     ball operands add |Ã|·r_B + r_A·(|B̃| + r_B);
///   - every other correctly rounded MPFR operation: u·|result|;
///   - row softmax: the computed row is within ε = 1.02·(m + 2D + 4)·u
///     (relative, entry by entry) of the exact softmax of its midpoint logits
///     (m visible keys, D the row's logit span), and logits moved by at most
///     r change each probability by at most P·expm1(2r); a radius never
///     exceeds 1 (both the exact and the computed probabilities lie in [0, 1]).
///
///   - LayerNorm, RMSNorm and the activations (relu, gelu, gelu_tanh,
///     gelu_fast, silu; gated MLPs too): evaluated on each entry's interval
///     [mid − rad, mid + rad] with every MPFR operation rounded outward (MPFR's
///     erf, tanh and exp are correctly rounded in the direction asked), so no
///     derivative bound is needed and GELU's and SiLU's minima need no care;
///     the ball keeps the forward pass's value as midpoint, its radius
///     covering the interval.
///
///   - position terms: rotary queries and keys and XLNet's sinusoid, whose
///     sin and cos of the exact angles p·θ^(−2i/r) are enclosed (exponent,
///     power and angle in directed rounding, then widened by the angle's
///     width: sin and cos are 1-Lipschitz); T5's bucket bias (exact table
///     entries); Gemma 2's soft cap c·tanh(A/c) on intervals.
///
/// Covered: every block of math.md §2 and families.md (attention with any
/// mask and window, the family's score scale and position terms, skip
/// connections, MLPs, LayerNorm and RMSNorm pre, post and Gemma 2's sandwich,
/// parallel blocks), inputs given as numbers (exact) and the token
/// embeddings of embed_enclosed (every family's).
///
/// \code
///   const auto t = forward_enclosed<mpfr_real<77>>(model, Variant::san(), convert<mpfr_real<77>>(X0));
///   const ResidualEnclosure e = enclose_residual(t.X[3]);
///   to_sci(e.relative_residual.lo, 20, Rounding::down);  // the exact value is in [lo, hi] (quantity.hpp)
/// \endcode

#include "sanpath/core/ball.hpp"
#include "sanpath/core/quantity.hpp"
#include "sanpath/core/scalar.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/model.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// Every exact entry lies in [mid − rad, mid + rad].
template <class S> struct BallMatrix {
  Matrix<S> mid;
  RadiusMatrix rad;
};

/// X[0] the input, X[l] the enclosure of layer l's output (l = 1..L);
/// P[l][h] (with EnclosureOptions::record_attention) the enclosure of layer
/// l's attention matrix of head h (l = 0..L−1).
template <class S> struct EnclosedTrace {
  Variant variant;
  std::vector<BallMatrix<S>> X;
  std::vector<std::vector<BallMatrix<S>>> P;
  int layers() const { return static_cast<int>(X.size()) - 1; }
};

struct EnclosureOptions {
  /// Tests only: every radius the pass computes is multiplied by this. Below 1
  /// the enclosures are no longer sound, which the containment tests must catch.
  double radius_scale = 1.0;
  /// Keep every layer's attention matrices (EnclosedTrace::P; the path sums).
  bool record_attention = false;
  /// The centred pass carries bounds of its rows' Euclidean norms beside
  /// the entrywise radii, through the attention's weights (about 3.5 digits
  /// lost a layer instead of 5 on a BERT-base-shaped SAN), LayerNorm and the
  /// MLP (4.5 instead of 8.5 with skip, MLP and LayerNorm). Tests and
  /// benchmarks: false leaves the entrywise radii alone, to measure that.
  bool row_bounds = true;
  /// Progress: on_layer(l, L) after layer l. May be empty.
  std::function<void(int layer, int layers)> on_layer{};
};

/// The direct pass in ball arithmetic at tier S (an MPFR tier; double throws
/// std::invalid_argument): X0 (n×d_model) is taken as exact. Throws as
/// forward() does.
template <class S>
EnclosedTrace<S> forward_enclosed(const Model& model, const Variant& variant, const Matrix<S>& X0,
                                  const EnclosureOptions& options = {});

/// The same from an enclosed input (embed_enclosed).
template <class S>
EnclosedTrace<S> forward_enclosed(const Model& model, const Variant& variant, const BallMatrix<S>& X0,
                                  const EnclosureOptions& options = {});

/// X^0 of token ids (n × d_model) through the model's embeddings, enclosed,
/// the midpoint embed_tokens': the rows as stored (Llama family, XLNet, T5,
/// GPT-NeoX, Phi), √d times them (Gemma, √d exact in the enclosure), word +
/// position (GPT-2), OPT's projected rows + positions, LayerNorm of word +
/// position + token type 0 (BERT, RoBERTa, DistilBERT; ALBERT then its
/// mapping), on intervals from the exact stored rows. Throws
/// std::invalid_argument for bad ids (as embed_tokens).
template <class S> BallMatrix<S> embed_enclosed(const Model& model, const std::vector<long>& ids);

/// ViT's X^0 of one image (embed_pixels, its midpoint), enclosed: each patch
/// entry's sum of C·p² products within γ_{C·p²+2} of the sum of the terms'
/// magnitudes. Throws as embed_pixels.
template <class S> BallMatrix<S> pixels_enclosed(const Model& model, const InputSpec& spec);

/// X^0 of any input enclosed: token ids (embed_enclosed), pixels
/// (pixels_enclosed), or numbers (--input, --random-input), taken as exact.
template <class S> BallMatrix<S> input_enclosed(const Model& model, const InputSpec& input);

/// Enclosures of the residual R = X − 1cᵀ of an enclosed layer output X
/// (math.md §3): its induced 1- and ∞-norms, the composite √(‖R‖₁‖R‖_∞),
/// Frobenius, the same of X, and the relative residual ‖R‖_{1,∞} / ‖X‖_{1,∞}.
///  - Center::mean: c = mean(X) (the relative residual's hi is at most 2:
///    the centring's induced 1- and ∞-norms are 2(1 − 1/n)).
///  - Center::optimal: the enclosure of min_c ‖X − 1cᵀ‖_{1,∞} of math.md §3
///    with every end proven. c is the best centre c* that optimal_residual
///    finds on the midpoint (an exact number), and res_one, res_inf,
///    res_composite and res_frobenius enclose the norms of X − 1c*ᵀ, so
///    res_composite.hi bounds the minimum from above;
///    res_composite_lower encloses the lower end √(min_c‖X − 1cᵀ‖₁ · L_∞)
///    (the median centre's 1-norm, and L_∞ the weak-duality bound of the
///    ∞-norm LP with optimal_residual's row weights), so its lo bounds the
///    minimum from below. Each is the midpoint's value computed with
///    directed rounding, widened by the radius's norm: for any centre c,
///    |‖X − 1cᵀ‖ − ‖X̃ − 1cᵀ‖| ≤ ‖X − X̃‖.
///  - Center::median is not enclosed (std::invalid_argument).
struct ResidualEnclosure {
  Interval res_one, res_inf, res_composite, res_frobenius;
  Interval norm_composite, norm_frobenius;
  Interval relative_residual;
  std::optional<Interval> res_composite_lower;  ///< Center::optimal only
};

template <class S> ResidualEnclosure enclose_residual(const BallMatrix<S>& X, Center center = Center::mean);

#define SANPATH_DECLARE_ENCLOSURE(S)                                                                       \
  extern template EnclosedTrace<S> forward_enclosed<S>(const Model&, const Variant&, const Matrix<S>&,      \
                                                       const EnclosureOptions&);                           \
  extern template EnclosedTrace<S> forward_enclosed<S>(const Model&, const Variant&, const BallMatrix<S>&,  \
                                                       const EnclosureOptions&);                           \
  extern template BallMatrix<S> embed_enclosed<S>(const Model&, const std::vector<long>&);                  \
  extern template BallMatrix<S> pixels_enclosed<S>(const Model&, const InputSpec&);                         \
  extern template BallMatrix<S> input_enclosed<S>(const Model&, const InputSpec&);                          \
  extern template ResidualEnclosure enclose_residual<S>(const BallMatrix<S>&, Center);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_ENCLOSURE)
#undef SANPATH_DECLARE_ENCLOSURE

}  // namespace sanpath

#pragma once
/// \file forward.hpp
/// The forward pass of math.md §1–2 (and §8: RMSNorm, rotary embeddings,
/// grouped-query attention, gated MLP) in any working scalar, recording
/// every layer's output X^l (n×d) and every attention matrix P_h^l (n×n).
/// Explicitly instantiated at double and at every tier the build compiles
/// (core/scalar.hpp).
///
/// \code
///   // S: double or a tier's mpfr_real; with_scalar(p, f) (core/dispatch.hpp) calls f with the S of a Precision p
///   with_scalar(Precision::at_least(257), [&](auto tag) {
///     using S = typename decltype(tag)::type;
///     const ForwardTrace<S> t = forward<S>(model, Variant::san(), make_input<S>(model, input), {});
///     t.X.back();  // X^L, n × d
///     t.P[0][1];   // the attention of layer 1, head 1 (row-stochastic, n × n)
///   });
/// \endcode

#include "sanpath/model/model.hpp"
#include "sanpath/core/scalar.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sanpath {

/// Sets this thread's MPFR exponent range to the largest MPFR allows
/// (mpfr_get_emin_min() .. mpfr_get_emax_max(), about 2^±(2^62)); the range
/// is per thread. Both passes (forward, forward_centred) set it in the
/// calling thread and their worker threads take it: a value below MPFR's
/// default range (about 10^−323228496, reached by saturated attention, whose
/// weights fall like exp of the score gaps) is computed, not rounded to 0.
/// The values they return need it in the thread using them.
inline void use_full_mpfr_exponent_range() {
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
}

struct ForwardOptions {
  bool record_attention = true;  ///< keep every P_h^l in the trace
  /// Progress: called as on_layer(l, L) after layer l = 1..L is done. May be empty.
  std::function<void(int layer, int layers)> on_layer{};
  /// 0, or b ≥ 2: the input of every layer after the first (X in the direct
  /// pass, R in the centred one) has each entry x moved to x·(1 ± 2^-b), the
  /// signs drawn from Rng(layer) column by column; MPFR scalars only. The
  /// model's input is data and is left as given. A confirming run perturbed
  /// at the coarser run's resolution agrees with the working run only where
  /// the result does not hang on what that resolution rounds away (math.md §6,
  /// "What a confirmation proves").
  long perturb_bits = 0;
};

/// Result of a forward pass. X[0] is the input, X[l] the output of layer l
/// (l = 1..L); P[l-1][h] is the attention of layer l, head h (row-stochastic,
/// lower-triangular under a causal mask), empty when not recorded.
template <class S> struct ForwardTrace {
  Variant variant;
  std::vector<Matrix<S>> X;
  std::vector<std::vector<Matrix<S>>> P;
  int layers() const { return static_cast<int>(X.size()) - 1; }
};

/// Runs `model` on X0 (n×d_model) with the layer map of `variant`
/// (math.md §2): \f$ X^l = \mathrm{layer}_l(X^{l-1}) \f$, l = 1..L, in scalar S.
/// Throws std::invalid_argument on a shape mismatch or a variant the model's
/// weights cannot run (e.g. mlp plain without MLP weights).
/// \code
/// const Model m = load_model("bert-folder");
/// const Matrix<mpfr_real<77>> X0 = make_input<mpfr_real<77>>(m, InputSpec::from_tokens({101, 2023, 102}));
/// const auto t = forward(m, Variant::san(), X0);  // 257 bits; t.X[l]: n×d, t.P[l-1][h]: n×n
/// \endcode
template <class S>
ForwardTrace<S> forward(const Model& model, const Variant& variant, const Matrix<S>& X0,
                        const ForwardOptions& options = {});

/// Row-wise softmax with the row maximum subtracted; under a causal mask
/// entries j > i are exactly 0, and with a causal mask and `window` W > 0
/// (Gemma 2's sliding layers) entries j ≤ i − W too. A: n×n logits.
template <class S> Matrix<S> row_softmax(const Matrix<S>& A, MaskKind mask, Eigen::Index window = 0);

/// LayerNorm over the features of each row (biased variance), math.md §2.
template <class S> Matrix<S> layer_norm(const Matrix<S>& X, const VectorXd& gain, const VectorXd& bias, double eps);

/// RMSNorm of each row (math.md §8): x / sqrt(mean(x²) + eps) ∘ gain + bias;
/// with `unit_offset` (Gemma) the gain is (1 + gain), formed in S.
template <class S>
Matrix<S> rms_norm(const Matrix<S>& X, const VectorXd& gain, const VectorXd& bias, double eps,
                   bool unit_offset = false);

/// T5's relative position bucket of Δ = j − i (key minus query) for a
/// bidirectional encoder with `buckets` nb and `max_distance` md, in exact
/// integer arithmetic (families.md: the largest k with
/// a^(nb'−me)·me^k ≥ md^k·me^(nb'−me)). Throws std::invalid_argument when
/// me = ⌊⌊nb/2⌋/2⌋ < 1 or md ≤ me.
int t5_bucket(long delta, int buckets, int max_distance);

/// XLNet's sinusoid table (families.md): row k is R(p) for p = clamp(k − (n−1)),
/// k = 0..2n−2 (p from −(n−1) to n−1, clamped to [−clamp_len, clamp_len]
/// when clamp_len > 0): [sin(pθ_0) … sin(pθ_{d/2−1}), cos(pθ_0) … cos(pθ_{d/2−1})],
/// θ_k = 10000^(−2k/d), in S. Throws std::invalid_argument for an odd d.
template <class S> Matrix<S> xlnet_sinusoid(Eigen::Index n, int d, int clamp_len);

/// Rotary angles of positions p = 0..n−1: cos(p θ_i / f), sin(p θ_i / f)
/// (n×d_h/2) with θ_i = theta^(−2i/d_h) and f the linear factor (Gemma 3's
/// global layers; 1: none), computed in S (theta and f as their decimals).
template <class S> struct RotaryTable {
  Matrix<S> cos, sin;
};
/// Throws std::invalid_argument for an odd d_h.
template <class S> RotaryTable<S> rotary_table(Eigen::Index n, int d_h, double theta, double linear_factor = 1.0);
/// Rotates the d_h columns [first_col, first_col + d_h) of M in place, row
/// p by position p, in the rotate-half layout: for i < d_h/2 the pair
/// (i, i + d_h/2) becomes (m_i cos − m_{i+d_h/2} sin, m_{i+d_h/2} cos + m_i sin).
template <class S> void apply_rotary(Matrix<S>& M, const RotaryTable<S>& table, Eigen::Index first_col);

/// Elementwise activation (relu, gelu = x·Φ(x), gelu_tanh = HF gelu_new,
/// silu = x·σ(x)).
template <class S> S activate(const S& x, Activation act);

/// A double constant as the decimal number it was written as (its shortest
/// round-trip decimal), e.g. 1e-12 becomes exactly 10^-12 rounded once to S.
template <class S> S decimal_constant(double x);

/// π rounded to S. For MPFR it is computed on first use (MPFR caches it per
/// thread), unlike boost::math::constants::pi, whose MPFR specialisation
/// computes π at every tier, up to 32,772 bits, while the program starts.
template <class S> S pi_constant();

// ---- memory estimates (checked against the budget before a pass) --------------

/// Peak number of working scalars held by forward() on n tokens:
/// the trace X^0..X^L ((L+1)·n·d), every attention matrix when recorded
/// (L·H·n²; otherwise the two n×n matrices of one head), the packed layer
/// weights, Q/K/V and the per-head, MLP and LayerNorm temporaries.
std::uint64_t forward_scalar_count(const Architecture& a, std::uint64_t n, bool with_mlp, bool record_attention);

/// One line describing the dominant terms, for messages:
/// "12 layers × 12 heads × 4096² attention entries + ... at 2051 bits".
std::string describe_forward_estimate(const Architecture& a, std::uint64_t n, bool record_attention, bool is_mpfr,
                                      long bits);

#define SANPATH_DECLARE_FORWARD(S)                                                                           \
  extern template ForwardTrace<S> forward<S>(const Model&, const Variant&, const Matrix<S>&,                  \
                                             const ForwardOptions&);                                         \
  extern template Matrix<S> row_softmax<S>(const Matrix<S>&, MaskKind, Eigen::Index);                        \
  extern template Matrix<S> layer_norm<S>(const Matrix<S>&, const VectorXd&, const VectorXd&, double);       \
  extern template S activate<S>(const S&, Activation);                                                       \
  extern template Matrix<S> rms_norm<S>(const Matrix<S>&, const VectorXd&, const VectorXd&, double, bool);   \
  extern template Matrix<S> xlnet_sinusoid<S>(Eigen::Index, int, int);                                       \
  extern template RotaryTable<S> rotary_table<S>(Eigen::Index, int, double, double);                                 \
  extern template void apply_rotary<S>(Matrix<S>&, const RotaryTable<S>&, Eigen::Index);                     \
  extern template S decimal_constant<S>(double);                                                             \
  extern template S pi_constant<S>();
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_FORWARD)
#undef SANPATH_DECLARE_FORWARD

}  // namespace sanpath

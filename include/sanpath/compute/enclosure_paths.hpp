#pragma once
/// \file enclosure_paths.hpp
/// Theorem 2.1's length sums (math.md §4) in ball arithmetic (math.md §10):
/// from an enclosed direct pass that kept its attention matrices
/// (EnclosureOptions::record_attention), S_k^l = [skip] S_k^{l−1} +
/// Σ_h P_h^l S_{k−1}^{l−1} W_V^h W_O^h and the bias row b^l = [skip] b^{l−1} +
/// Σ_h b^{l−1} W_V^h W_O^h + b_O + Σ_h b_V^h W_O^h, every product and sum a
/// ball (enclosure.hpp), so each S_k's norms, its share of ‖X^L‖_F and the
/// reconstruction error max|Σ_k S_k + 1bᵀ − X^L| / max|X^L| (exactly 0 by the
/// theorem) come with enclosures of their exact values. Single path terms
/// T = P_path X W_path (enclose_path_terms) are enclosed the same way, T
/// formed as P_h (Y W_V^h W_O^h) layer by layer as evaluate_path does.
///
/// \code
///   EnclosureOptions opt;
///   opt.record_attention = true;
///   const auto t = forward_enclosed<mpfr_real<38>>(model, Variant::san(), X0, opt);
///   const EnclosedLengthSums s = enclose_length_sums(model, t);
///   s.error.hi;  // ≥ the reconstruction error of the exact sums: Theorem 2.1 to within it
/// \endcode

#include "sanpath/compute/enclosure.hpp"

#include <optional>
#include <vector>

namespace sanpath {

struct EnclosedLengthSums {
  /// k = 0..L: S_k's norms (mean centre); nullopt where no path has length k
  /// (S_k = 0 exactly).
  std::vector<std::optional<ResidualEnclosure>> terms;
  std::vector<Interval> share;  ///< ‖S_k‖_F / ‖X^L‖_F ([0, 0] where S_k = 0)
  Interval output_frobenius;    ///< ‖X^L‖_F
  /// max|Σ_k S_k + 1bᵀ − X^L| / max|X^L|: the lower end 0 (the exact value),
  /// the upper end what the balls' radii and midpoints leave.
  Interval error;
};

/// The length sums of an enclosed attention-only trace with its attention
/// matrices (S an MPFR tier). Throws std::invalid_argument for a trace
/// without them or of another model, and for a variant with an MLP or
/// LayerNorm (the decomposition is of attention-only networks); NumericalError
/// when ‖X^L‖'s enclosure reaches 0.
template <class S> EnclosedLengthSums enclose_length_sums(const Model& model, const EnclosedTrace<S>& trace);

/// One path's PathRecord norms, enclosed: of T = P_path X W_path and of its
/// stochastic factor P_path = P^L_{h_L} ⋯ P^1_{h_1} (I for the all-skip path).
struct EnclosedPathTerm {
  Interval norm_composite;       ///< ‖T‖_{1,∞}
  Interval norm_frobenius;       ///< ‖T‖_F
  Interval residual_composite;   ///< ‖res(T)‖_{1,∞}, mean centre
  Interval stochastic_residual;  ///< ‖res(P_path)‖_{1,∞}, mean centre
};

/// The terms of `paths` (head sequences as PathRecord::heads: L entries,
/// head 0..H−1 or −1 for skip), in the order given. Consecutive paths share
/// the products of their common prefix, so enumeration order costs about
/// one layer's products per path. Throws std::invalid_argument as
/// enclose_length_sums, and for a head sequence of the wrong length or with
/// a choice out of range (−1 without skip). `radius_scale`: tests only, as
/// EnclosureOptions::radius_scale, for the radii of the path products.
template <class S>
std::vector<EnclosedPathTerm> enclose_path_terms(const Model& model, const EnclosedTrace<S>& trace,
                                                 const std::vector<std::vector<int>>& paths,
                                                 double radius_scale = 1.0);

#define SANPATH_DECLARE_ENCLOSED_PATHS(S)                                                       \
  extern template EnclosedLengthSums enclose_length_sums<S>(const Model&, const EnclosedTrace<S>&); \
  extern template std::vector<EnclosedPathTerm> enclose_path_terms<S>(const Model&, const EnclosedTrace<S>&, \
                                                                      const std::vector<std::vector<int>>&, double);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_ENCLOSED_PATHS)
#undef SANPATH_DECLARE_ENCLOSED_PATHS

}  // namespace sanpath

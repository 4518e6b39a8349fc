#pragma once
/// \file measures.hpp
/// The measures of math.md §9 that the rank-collapse literature reports
/// beside the paper's residual: µ(X) = ‖X − 1 mean(X)ᵀ‖_F, the SVD rank-1
/// residual, the mean cosine between tokens, stable and effective rank
/// (of one layer's output X, n×d), attention entropy and the attention mass
/// on the first token (of one layer's attention matrices P_h, n×n).
///
/// Every measure is computed from the centred pair X = 1cᵀ + R (math.md §7;
/// c the 1×d row mean, R with column sums 0), so that a collapsed layer's
/// measures keep the working precision's relative accuracy at any depth:
/// the quantities that tend to 1 as X tends to rank 1 come with companions
/// that carry their digits, computed without cancellation —
/// `one_minus_cosine` = 1 − cosine, `stable_rank_minus_one`,
/// `effective_rank_minus_one` (docs/math.md §8).
///
/// \code
///   const MeasureSet m = MeasureSet::parse("mu,cosine");
///   // in a template over the working scalar S:
///   std::vector<MeasureValue> v = output_measures<S>(c, R, norm_composite_of_X, m);
///   v[0].name;  // "mu"; v[1] "cosine", v[2] "one_minus_cosine"
/// \endcode

#include "sanpath/core/scalar.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace sanpath {

/// The measures of math.md §9, in report order.
enum class Measure { mu, svd_residual, cosine, stable_rank, effective_rank, attention_entropy, first_token_mass };

/// Every measure, in report order.
const std::vector<Measure>& all_measures();
/// "mu", "svd_residual", "cosine", "stable_rank", "effective_rank",
/// "attention_entropy", "first_token_mass".
const char* measure_name(Measure m);
/// attention_entropy and first_token_mass: measures of P_h, defined for layers ≥ 1.
bool is_attention_measure(Measure m);

/// A set of measures (what `--measures` asks for).
class MeasureSet {
 public:
  MeasureSet() = default;
  static MeasureSet all();
  /// "all", "none" or a comma-separated list of names (any order, no
  /// repeats needed); throws std::invalid_argument "measures: 'x' is not one
  /// of mu, svd_residual, …, or all".
  static MeasureSet parse(const std::string& text);
  bool empty() const { return bits_ == 0; }
  bool has(Measure m) const { return (bits_ >> static_cast<int>(m)) & 1U; }
  void add(Measure m) { bits_ |= 1U << static_cast<int>(m); }
  /// The measures of the set, in report order.
  std::vector<Measure> list() const;
  /// Whether the set has a measure of P (the forward pass must keep the attention).
  bool any_attention() const;
  /// "all", or the names joined by commas; "none" when empty.
  std::string str() const;
  friend bool operator==(const MeasureSet& a, const MeasureSet& b) { return a.bits_ == b.bits_; }

 private:
  std::uint32_t bits_ = 0;
};

/// One reported value: a measure by its name, or a companion
/// ("one_minus_cosine", "stable_rank_minus_one", "effective_rank_minus_one").
struct MeasureValue {
  std::string name;
  BigReal value;
  /// An upper bound on what underflow may have taken from `value` (0: nothing
  /// could have): a pass's numbers below its arithmetic's smallest positive
  /// one are 0, and the attention measures sum entries of P that saturated
  /// attention takes below it (attention_underflow_allowance). The exact
  /// value lies in [value, value + flushed] up to the pass's rounding.
  BigReal flushed = BigReal(0);
};

/// The names of the values a layer reports for `m`, in report order (each
/// companion right after its measure); the attention measures only when
/// `attention_layer` (layers ≥ 1).
std::vector<std::string> measure_value_names(const MeasureSet& m, bool attention_layer);

/// The output measures of `m` for X = 1cᵀ + R (c: 1×d, R: n×d with column
/// sums 0 to working precision; a direct pass passes its column means and
/// X − 1cᵀ). `norm_composite` is ‖X‖_{1,∞} (svd_residual's denominator).
/// Values in measure_value_names order; a measure undefined for this X is
/// left out (cosine of a zero row or of n = 1; the spectral measures of
/// X = 0). Singular values come from the Gram matrix of the smaller side
/// in a scalar of about twice the working bits, after the leading singular
/// pair is deflated from (c, R) when R is small (docs/math.md §8).
template <class S>
std::vector<MeasureValue> output_measures(const RowVector<S>& c, const Matrix<S>& R, const S& norm_composite,
                                          const MeasureSet& m);

/// The attention measures of `m` for one layer's matrices P_h (n×n each,
/// row-stochastic; masked entries exactly 0). Empty when `m` has none.
template <class S> std::vector<MeasureValue> attention_measures(const std::vector<Matrix<S>>& P, const MeasureSet& m);

/// What underflow may take from the attention measures of a pass in S whose
/// P has `keys` columns (MeasureValue::flushed). A weight the pass computes
/// as 0 though it is not lies below S's smallest positive number 2^(emin−1)
/// (emin: MPFR's, the calling thread's, which the pass ran with) times the
/// factor below 3 of the softmax's last step (math.md §7), so below
/// 2^(emin+1); it adds at most p·|ln p| + p < 2^(emin+64) to its row's
/// entropy (|emin| ≤ 2^62) and p to the first-token mass: keys·2^(emin+64)
/// bounds both means. 0 for double, whose pass the directed-rounding check
/// bounds instead.
template <class S> BigReal attention_underflow_allowance(long keys) {
  BigReal b(0);
  if constexpr (is_mpfr_v<S>) {
    b = BigReal(keys);
    mpfr_mul_2si(b.backend().data(), b.backend().data(), mpfr_get_emin() + 64, MPFR_RNDU);
  }
  return b;
}

#define SANPATH_DECLARE_MEASURES(S)                                                                           \
  extern template std::vector<MeasureValue> output_measures<S>(const RowVector<S>&, const Matrix<S>&, const S&, \
                                                               const MeasureSet&);                            \
  extern template std::vector<MeasureValue> attention_measures<S>(const std::vector<Matrix<S>>&,              \
                                                                  const MeasureSet&);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_MEASURES)
#undef SANPATH_DECLARE_MEASURES

}  // namespace sanpath

#pragma once
/// \file double_check.hpp
/// Digits of a double forward pass without a multiprecision run (math.md §6).
/// The whole measurement (embedding, forward pass, norms) is repeated in
/// double with every operation rounded upward, then downward (IEEE 754
/// directed rounding, set on the calling thread and on every worker thread).
/// For a value v of the round-to-nearest pass and the directed results u, w,
/// the check value is
///     c = v + K·e,  e = the one of u − v, w − v larger in magnitude,
/// and v's digits are those agreeing between v and c (quantity.hpp confirm()):
/// K = rounding_check_margin is a safety factor over the observed spread.
/// In the directed passes the double kernels move libm's exp, erf and tanh
/// results a few ulp in the rounding direction (compute/forward_impl.hpp
/// toward_rounding), since libm's own error barely depends on the mode.
/// Directed rounding moves every rounding error to one end of its interval,
/// so the spread of the three passes is an estimate of the pass's rounding
/// error, not a proof; tests/analysis/test_double_check.cpp measures it
/// against 257-bit runs, near-cancellation cases included.

#include "sanpath/analysis/forward.hpp"

#include <functional>
#include <string>
#include <vector>

namespace sanpath {

/// K above: the observed spread is multiplied by 10 (one decimal digit).
inline constexpr double rounding_check_margin = 10.0;

/// "auto", "rounding" or "mpfr"; throws std::invalid_argument.
CheckMethod parse_check_method(const std::string& text);
std::string to_string(CheckMethod m);

/// The analyses a check method is asked of, by the methods they honour (the
/// one meaning of `--check` on every command, and of Python's check=):
/// - forward_pass (forward, collapse, bounds): auto, rounding, mpfr, certified;
/// - paths (paths --sums, --enumerate, --effectiveness with or without
///   --rerun, and report, whose sections include them): auto, mpfr (both a
///   run one tier up) and certified; the rounding check re-runs a double
///   forward pass, which a path analysis is not;
/// - path_sampling (paths --sample): auto and mpfr (no proven form yet).
enum class CheckScope { forward_pass, paths, path_sampling };
/// Throws std::invalid_argument ("'rounding' is not a check path analyses
/// can honour: …", naming what they take) when `scope` cannot honour `method`.
void require_check(CheckMethod method, CheckScope scope);

/// Whether analyze_forward confirms a pass at `p` by the rounding check:
/// requested, or automatic for double with a mean or median centre (the
/// optimal centre's linear program is solved in round-to-nearest only).
/// Throws std::invalid_argument when rounding is requested elsewhere.
bool uses_rounding_check(CheckMethod method, const Precision& p, Center center);

/// measure(input, stage): the measurements of one pass of `input`.
using MeasureFn = std::function<std::vector<LayerStats>(const InputSpec&, const std::string&)>;

/// Measurements of the same pass as `nearest`, by `measure` run under upward
/// and downward rounding (the caller's rounding mode is restored, also on
/// exceptions); returns per quantity the check value c above. When products
/// may use two or more threads the two passes run at once, each with serial
/// products, one on a thread of its own: `measure` (and any progress it
/// reports) must then be safe to call from two threads. A random
/// `input` is drawn once in round-to-nearest and given to both passes as a
/// matrix: the input is data, only the computation on it is perturbed.
std::vector<LayerStats> rounding_check(const std::vector<LayerStats>& nearest, const Model& model,
                                       const InputSpec& input, const MeasureFn& measure);

/// A round-to-nearest pass and its check values (rounding_check).
struct RoundingCheckedRuns {
  std::vector<LayerStats> nearest, checked;
};

/// The round-to-nearest pass of `input` (`measure` in the caller's rounding
/// mode, reported as `nearest_stage`) and its rounding check, the three
/// passes at once, each on a thread of its own (run_at_once), when products
/// may use two or more threads; then a streamed model's layers are read
/// once for the three (model/shared_layers.hpp) instead of once a pass.
/// The same values as `measure` followed by rounding_check; the same
/// conditions on `measure`.
RoundingCheckedRuns measure_with_rounding_check(const Model& model, const InputSpec& input,
                                                const std::string& nearest_stage, const MeasureFn& measure);

/// c = v + K·e for one quantity (K = rounding_check_margin). When the three
/// values agree, e = relative_floor·|v|: rounding_check passes the largest
/// relative spread among the other values of the same matrix in that layer
/// (residual norms, resp. norms of X; both for the relative residual), or 0
/// for layer 0 of a given or random input (data, exact in every pass).
BigReal rounding_check_value(const BigReal& v, const BigReal& up, const BigReal& down, double relative_floor = 0.0);

}  // namespace sanpath

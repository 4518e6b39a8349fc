#pragma once
/// \file search.hpp
/// A seeded search for weights and inputs on which a pure SAN comes closest
/// to (or beyond) the bound of Theorem 2.2/2.3: it maximises
/// \f$\max_l \log_{10}(r_l / \mathrm{bound}_l)\f$ (measured over bound, the
/// negated slack of compare_bounds) over small random SANs.
///
/// Method. Random starts — weights N(0, σ²) with σ log-uniform in
/// [0.05, 3], input X = 1cᵀ + R with c ~ N(0, s_c²), R ~ N(0, s_r²), s_c
/// log-uniform in [0.01, 30] and s_r in [1e-3, 1] — for the first quarter of
/// the iterations, then local improvement of the best: each step perturbs
/// one randomly chosen tensor (one head's W_Q, W_K, W_V or W_O, or X) by
/// relative Gaussian noise (a step size that grows on success and shrinks on
/// failure) and keeps the change when the objective grows. Biases are zero
/// throughout (the theorems are stated without them; query/key biases act
/// like an input offset the weight quantities β do not see). Every candidate
/// is evaluated at a moderate fixed precision with a check run one tier up;
/// only depths with at least 3 confirmed digits count (without that the
/// search climbs on rounding noise: at 128 bits unconfirmed, it "finds"
/// ratios that are 20% rounding error). The best is re-checked by
/// analyze_bounds at automatic precision, whose verdicts are the result. Everything depends only on the seed: the generator is
/// sanpath's own xoshiro256** and the arithmetic is deterministic.

/// \code
///   BoundsSearchSpec spec;
///   spec.seed = 7;
///   const BoundsSearchResult r = search_bounds(spec);  // r.violated: a certified counterexample
/// \endcode

#include "sanpath/analysis/forward.hpp"
#include "sanpath/compute/bounds.hpp"
#include "sanpath/analysis/bounds.hpp"
#include "sanpath/model/model.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sanpath {

struct BoundsSearchSpec {
  int layers = 2;
  int heads = 1;
  int d_model = 4;
  int d_qk = 2;     ///< also d_v
  int tokens = 4;   ///< n, rows of X
  std::uint64_t seed = 0;
  int iterations = 200;        ///< candidate evaluations in all (≥ 1)
  Theorem theorem = Theorem::automatic;  ///< 2.2 needs heads = 1
  BigReal gamma = BigReal(1);
  long search_bits = 128;      ///< fixed precision of the search evaluations (checked one tier up)
  PrecisionRequest recheck;    ///< precision of the final re-check (auto)

  /// Throws std::invalid_argument naming the field for sizes outside
  /// layers 1..12, heads 1..8, d_model 1..64, d_qk 1..64, tokens 2..64,
  /// iterations 1..1000000.
  void validate() const;
};

/// One accepted improvement of the search.
struct SearchStep {
  int iteration = 0;
  BigReal log10_ratio;  ///< max_l log10(r_l / bound_l) after the step
  int depth = 0;        ///< the l attaining it
};

struct BoundsSearchResult {
  BoundsSearchSpec spec;
  std::optional<Model> model;  ///< the best SAN found (skip off, mlp none, layernorm none)
  MatrixXd X;                  ///< its input, tokens × d_model
  /// Best objective at the search precision: max_l log10(r_l.upper /
  /// bound_l.value) over depths with ≥ 3 confirmed digits (> 0 would mean
  /// measured above the bound).
  BigReal log10_ratio;
  int depth = 0;  ///< the depth attaining it
  int evaluations = 0;
  std::vector<SearchStep> improvements;
  /// analyze_bounds of the best at spec.recheck: its verdicts are certified
  /// as far as confirmed digits go.
  std::optional<BoundsAnalysis> recheck;
  /// Max over depths of log10(measured.upper / bound.value) from the re-check.
  std::optional<BigReal> recheck_log10_ratio;
  int recheck_depth = 0;
  bool violated = false;  ///< some depth of the re-check is VIOLATED

  /// Where save_search_result wrote the files (empty before).
  std::string model_path, input_path;
};

/// Runs the search of the file comment. `progress` gets "search [i/N]"
/// messages, then the re-check's. Throws std::invalid_argument for a bad spec.
BoundsSearchResult search_bounds(const BoundsSearchSpec& spec, const ProgressFn& progress = {});

/// The input file written beside a model file: "best.safetensors" →
/// "best.input.safetensors" (other names: "<path>.input.safetensors").
std::string search_input_path(const std::string& model_path);

/// Saves the best model as a native sanpath file at `model_path`
/// (save_native) and its input as a safetensors file holding one F64 tensor
/// X [tokens, d_model] at search_input_path(model_path), so that
/// `sanpath bounds --model <model_path> --input <input path>` re-checks it.
/// Records both paths in `result`. Throws std::invalid_argument when there
/// is no model or a file cannot be written.
void save_search_result(BoundsSearchResult& result, const std::string& model_path);

}  // namespace sanpath

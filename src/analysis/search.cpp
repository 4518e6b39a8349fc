#include "sanpath/analysis/search.hpp"

#include "sanpath/core/errors.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/io/tensor_eigen.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/core/resources.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sanpath {

namespace {

void check_range(long v, long lo, long hi, const std::string& what) {
  if (v < lo || v > hi)
    throw std::invalid_argument("search: " + what + " " + std::to_string(v) + " is outside [" + std::to_string(lo) +
                                ", " + std::to_string(hi) + "]");
}

/// log-uniform in [lo, hi].
double log_uniform(Rng& rng, double lo, double hi) {
  return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * rng.uniform());
}

MatrixXd gaussian(Rng& rng, Eigen::Index rows, Eigen::Index cols, double sd) {
  MatrixXd m(rows, cols);
  // Row-major draw order: independent of Eigen's storage order.
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = sd * rng.gaussian();
  return m;
}

double rms(const MatrixXd& m) { return m.size() ? std::sqrt(m.squaredNorm() / static_cast<double>(m.size())) : 0.0; }

Architecture search_arch(const BoundsSearchSpec& s) {
  Architecture a;
  a.layers = s.layers;
  a.heads = s.heads;
  a.d_model = s.d_model;
  a.d_qk = s.d_qk;
  a.d_v = s.d_qk;
  a.d_ff = 0;
  a.variant = Variant::san();
  a.activation = Activation::relu;
  return a;
}

/// One candidate: the layers' weights (biases zero) and the input.
struct Candidate {
  std::vector<LayerWeights> layers;
  MatrixXd X;
};

Candidate random_candidate(Rng& rng, const BoundsSearchSpec& s) {
  Candidate c;
  const double sigma = log_uniform(rng, 0.05, 3.0);
  for (int l = 0; l < s.layers; ++l) {
    LayerWeights w;
    for (int h = 0; h < s.heads; ++h) {
      HeadWeights hw;
      hw.W_Q = gaussian(rng, s.d_model, s.d_qk, sigma);
      hw.W_K = gaussian(rng, s.d_model, s.d_qk, sigma);
      hw.W_V = gaussian(rng, s.d_model, s.d_qk, sigma);
      hw.W_O = gaussian(rng, s.d_qk, s.d_model, sigma);
      hw.b_Q = VectorXd::Zero(s.d_qk);
      hw.b_K = VectorXd::Zero(s.d_qk);
      hw.b_V = VectorXd::Zero(s.d_qk);
      w.heads.push_back(std::move(hw));
    }
    w.b_O = VectorXd::Zero(s.d_model);
    c.layers.push_back(std::move(w));
  }
  const double s_c = log_uniform(rng, 0.01, 30.0), s_r = log_uniform(rng, 1e-3, 1.0);
  const MatrixXd offset = gaussian(rng, 1, s.d_model, s_c);
  MatrixXd R = gaussian(rng, s.tokens, s.d_model, s_r);
  c.X = R.rowwise() + offset.row(0);
  return c;
}

/// A perturbed copy: one tensor changed by relative noise of size `step`.
Candidate perturb(const Candidate& base, Rng& rng, double step, const BoundsSearchSpec& s) {
  Candidate c = base;
  const int weight_tensors = s.layers * s.heads * 4;
  const std::uint64_t pick = rng.below(static_cast<std::uint64_t>(weight_tensors + 3));
  if (pick < static_cast<std::uint64_t>(weight_tensors)) {
    const int k = static_cast<int>(pick);
    HeadWeights& hw = c.layers[static_cast<std::size_t>(k / (4 * s.heads))].heads[static_cast<std::size_t>((k / 4) % s.heads)];
    MatrixXd* m = k % 4 == 0 ? &hw.W_Q : k % 4 == 1 ? &hw.W_K : k % 4 == 2 ? &hw.W_V : &hw.W_O;
    if (rng.below(2) == 0) {
      const double scale = std::max(rms(*m), 1e-6);
      *m += gaussian(rng, m->rows(), m->cols(), step * scale);
    } else {
      *m *= std::exp(step * rng.gaussian());
    }
    return c;
  }
  const RowVector<double> mean = c.X.colwise().mean();
  MatrixXd R = c.X.rowwise() - mean;
  switch (static_cast<int>(pick - static_cast<std::uint64_t>(weight_tensors))) {
    case 0:  // the residual part
      R += gaussian(rng, R.rows(), R.cols(), step * std::max(rms(R), 1e-12));
      break;
    case 1:  // the offset row
    {
      const MatrixXd delta = gaussian(rng, 1, mean.cols(), step * std::max(mean.norm() / std::sqrt(static_cast<double>(mean.cols())), 1e-3));
      c.X = R.rowwise() + (mean + delta.row(0));
      return c;
    }
    default:  // the size of the residual part
      R *= std::exp(step * rng.gaussian());
      break;
  }
  c.X = R.rowwise() + mean;
  return c;
}

struct Score {
  bool valid = false;
  BigReal log10_ratio;
  int depth = 0;
};

/// Confirmed digits a depth needs to count in the objective: fewer would let
/// the search climb on rounding noise instead of on the residual.
constexpr int kScoreDigits = 3;

/// max over depths l ≥ 1 of log10(r_l / bound_l.value), r_l the upper end of
/// the measured enclosure (unwidened), over depths resolved with at least
/// kScoreDigits confirmed digits.
Score score(const BoundsReport& rep, const ResidualSeries& series) {
  Score best;
  for (const DepthComparison& d : rep.depths) {
    const MeasuredDepth& m = series.depths[static_cast<std::size_t>(d.layer)];
    if (!d.bound || d.bound->value.is_zero() || m.enclosure.below_resolution || m.upper.below_resolution) continue;
    if (!m.upper.digits || *m.upper.digits < kScoreDigits || !(m.upper.value > 0)) continue;
    const BigReal ratio = (LogReal::from_value(m.upper.value) / d.bound->value).log10();
    if (!best.valid || ratio > best.log10_ratio) {
      best.valid = true;
      best.log10_ratio = ratio;
      best.depth = d.layer;
    }
  }
  return best;
}

Score evaluate(const Candidate& c, const BoundsSearchSpec& s, const PrecisionRequest& req) {
  try {
    const Model m(search_arch(s), c.layers, std::nullopt, "search candidate");
    const ResidualSeries series = measure_residuals(m, Variant::san(), InputSpec::from_matrix(c.X, "search"), req);
    std::vector<MeasuredResidual> ms;
    for (const MeasuredDepth& d : series.depths) ms.push_back(d.enclosure);
    BoundInputs bi;
    bi.weights = weight_quantities(m);
    bi.variant = Variant::san();
    bi.gamma = s.gamma;
    bi.theorem = s.theorem;
    return score(compare_bounds(bi, ms), series);
  } catch (const std::invalid_argument&) {
    return {};  // a degenerate candidate (non-finite entries): not a candidate
  }
}

}  // namespace

void BoundsSearchSpec::validate() const {
  check_range(layers, 1, 12, "layers");
  check_range(heads, 1, 8, "heads");
  check_range(d_model, 1, 64, "d_model");
  check_range(d_qk, 1, 64, "d_qk");
  check_range(tokens, 2, 64, "tokens");
  check_range(iterations, 1, 1000000, "iterations");
  if (!(gamma > 0)) throw std::invalid_argument("search: gamma must be > 0");
  Precision::at_least(search_bits);  // throws for an unsupported precision
  (void)select_theorem(Variant::san(), heads, theorem);  // e.g. 2.2 with H > 1
}

BoundsSearchResult search_bounds(const BoundsSearchSpec& spec, const ProgressFn& progress) {
  spec.validate();
  BoundsSearchResult out;
  out.spec = spec;
  PrecisionRequest req;
  req.automatic = false;
  req.fixed = Precision::at_least(spec.search_bits);
  req.confirm = true;  // one tier up: only confirmed digits count (see score)

  Rng rng(spec.seed);
  const int starts = std::max(1, spec.iterations / 4);
  Candidate best;
  Score best_score;
  double step = 0.3;
  for (int it = 1; it <= spec.iterations; ++it) {
    check_interrupt();
    report_progress(progress, "search", it - 1, spec.iterations);
    const bool start = it <= starts || !best_score.valid;
    Candidate c = start ? random_candidate(rng, spec) : perturb(best, rng, step, spec);
    const Score sc = evaluate(c, spec, req);
    ++out.evaluations;
    const bool better = sc.valid && (!best_score.valid || sc.log10_ratio > best_score.log10_ratio);
    if (better) {
      best = std::move(c);
      best_score = sc;
      out.improvements.push_back({it, sc.log10_ratio, sc.depth});
      if (!start) step = std::min(2.0, step * 1.5);
    } else if (!start) {
      step = std::max(1e-3, step * 0.95);
    }
  }
  report_progress(progress, "search", spec.iterations, spec.iterations);
  if (!best_score.valid)
    throw NumericalError("search: no candidate had a resolved residual at " + req.fixed.name() +
                         "; raise the search precision");
  out.model.emplace(search_arch(spec), best.layers, std::nullopt, "search result (seed " + std::to_string(spec.seed) + ")");
  out.X = best.X;
  out.log10_ratio = best_score.log10_ratio;
  out.depth = best_score.depth;

  BoundsRequest br;
  br.theorem = spec.theorem;
  br.gamma = spec.gamma;
  br.precision = spec.recheck;
  out.recheck = analyze_bounds(*out.model, Variant::san(), InputSpec::from_matrix(out.X, "search result"), br,
                               prefixed_progress(progress, "re-check: "));
  const Score rs = score(out.recheck->report, out.recheck->measured);
  if (rs.valid) {
    out.recheck_log10_ratio = rs.log10_ratio;
    out.recheck_depth = rs.depth;
  }
  for (const DepthComparison& d : out.recheck->report.depths) out.violated = out.violated || d.verdict == Verdict::violated;
  return out;
}

std::string search_input_path(const std::string& model_path) {
  const std::string ext = ".safetensors";
  if (model_path.size() > ext.size() && model_path.compare(model_path.size() - ext.size(), ext.size(), ext) == 0)
    return model_path.substr(0, model_path.size() - ext.size()) + ".input" + ext;
  return model_path + ".input" + ext;
}

void save_search_result(BoundsSearchResult& result, const std::string& model_path) {
  if (!result.model) throw std::invalid_argument(model_path + ": file: the search has no result to save");
  const std::string input_path = search_input_path(model_path);
  save_native(*result.model, model_path);
  const Tensor x = make_tensor("X", result.X);
  const BoundsSearchSpec& s = result.spec;
  write_safetensors(input_path, {x},
                    {{"sanpath.search", "layers=" + std::to_string(s.layers) + " heads=" + std::to_string(s.heads) +
                                            " d_model=" + std::to_string(s.d_model) + " d_qk=" +
                                            std::to_string(s.d_qk) + " tokens=" + std::to_string(s.tokens) +
                                            " seed=" + std::to_string(s.seed) + " iterations=" +
                                            std::to_string(s.iterations)}});
  result.model_path = model_path;
  result.input_path = input_path;
}

}  // namespace sanpath

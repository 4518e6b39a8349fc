#include "sanpath/analysis/double_check.hpp"

#include "sanpath/core/linalg.hpp"
#include "sanpath/model/shared_layers.hpp"

#include <algorithm>
#include <cfenv>
#include <optional>
#include <stdexcept>

namespace sanpath {

namespace {

/// Sets the calling thread's rounding mode; restores the previous one.
/// (detail::run_blocks gives its worker threads the caller's mode.)
class RoundingScope {
 public:
  explicit RoundingScope(int mode) : saved_(std::fegetround()) {
    if (std::fesetround(mode) != 0) throw std::runtime_error("rounding check: cannot set the rounding mode");
  }
  ~RoundingScope() { std::fesetround(saved_); }
  RoundingScope(const RoundingScope&) = delete;
  RoundingScope& operator=(const RoundingScope&) = delete;

 private:
  int saved_;
};

std::vector<LayerStats> measure_rounded(int mode, const InputSpec& input, const std::string& stage,
                                        const MeasureFn& measure) {
  RoundingScope scope(mode);
  return measure(input, stage);
}

struct DirectedPasses {
  std::vector<LayerStats> up, down;
};

/// The upward and downward passes, side by side when they can be
/// (run_side_by_side); the double products' results do not depend on the
/// thread count.
DirectedPasses directed_passes(const InputSpec& x0, const MeasureFn& measure) {
  DirectedPasses out;
  run_side_by_side(
      [&] { out.up = measure_rounded(FE_UPWARD, x0, "rounding check: double rounded upward", measure); },
      [&] { out.down = measure_rounded(FE_DOWNWARD, x0, "rounding check: double rounded downward", measure); });
  return out;
}

/// The round-to-nearest pass and the directed passes of `x0` at once
/// (run_at_once), sharing a streamed model's layers when they run together.
struct ThreePasses {
  std::vector<LayerStats> nearest, up, down;
};
ThreePasses three_passes(const Model& model, const InputSpec& x0, const std::string& nearest_stage,
                         const MeasureFn& measure) {
  ThreePasses out;
  std::optional<SharedLayers> shared;  // a streamed model's layers, read once for the three
  if (model.streamed()) shared.emplace(model, 3);
  SharedLayers* layers = shared ? &*shared : nullptr;
  const auto pass = [&](int index, int mode, const std::string& stage, std::vector<LayerStats>& into) {
    return [&, index, mode, stage](bool together) {
      std::optional<SharedLayers::Member> member;
      if (together && layers) member.emplace(*layers, index);
      into = measure_rounded(mode, x0, stage, measure);
    };
  };
  run_at_once({pass(0, std::fegetround(), nearest_stage, out.nearest),  // the caller's mode
               pass(1, FE_UPWARD, "rounding check: double rounded upward", out.up),
               pass(2, FE_DOWNWARD, "rounding check: double rounded downward", out.down)});
  return out;
}

/// A random input as the matrix the round-to-nearest pass used (as
/// compute/embed draws it); other inputs unchanged.
InputSpec drawn_in_nearest(const Model& model, const InputSpec& input) {
  if (input.kind != InputSpec::Kind::random) return input;
  RandomInputSpec r = input.random;
  if (r.d == 0) r.d = model.arch().d_model;
  return InputSpec::from_matrix(random_input(r), input.source);
}

/// Every value of a layer that analyze_forward reports, in one order: the
/// norms of the residual matrix, then those of X, then their ratio.
std::vector<BigReal*> fields(LayerStats& s) {
  std::vector<BigReal*> f = {&s.res_one,        &s.res_inf,        &s.res_composite,    &s.res_frobenius,
                             &s.norm_composite, &s.norm_frobenius, &s.relative_residual};
  if (s.res_composite_lower) f.push_back(&*s.res_composite_lower);
  return f;
}
enum class Group { residual, norm, ratio };
Group group_of(std::size_t i) { return i >= 4 && i < 6 ? Group::norm : i == 6 ? Group::ratio : Group::residual; }

/// max(|up − v|, |down − v|) / |v| (0 when v = 0).
double relative_spread(const BigReal& v, const BigReal& up, const BigReal& down) {
  if (v == 0) return 0.0;
  const BigReal x(v, 40);
  const BigReal e = max(abs(BigReal(BigReal(up, 40) - x)), abs(BigReal(BigReal(down, 40) - x)));
  return static_cast<double>(BigReal(e / abs(x)));
}

}  // namespace

CheckMethod parse_check_method(const std::string& text) {
  if (text == "auto") return CheckMethod::automatic;
  if (text == "rounding") return CheckMethod::rounding;
  if (text == "mpfr") return CheckMethod::mpfr;
  if (text == "certified") return CheckMethod::certified;
  throw std::invalid_argument("'" + text + "' is not auto, rounding, mpfr or certified");
}

std::string to_string(CheckMethod m) {
  switch (m) {
    case CheckMethod::automatic:
      return "auto";
    case CheckMethod::rounding:
      return "rounding";
    case CheckMethod::mpfr:
      return "mpfr";
    case CheckMethod::certified:
      return "certified";
  }
  throw std::logic_error("to_string: unknown check method");
}

void require_check(CheckMethod method, CheckScope scope) {
  if (scope == CheckScope::paths && method == CheckMethod::rounding)
    throw std::invalid_argument(
        "'rounding' is not a check path analyses can honour: they confirm by a run one tier up (auto, mpfr) or "
        "prove their digits (certified); the rounding check re-runs a double forward pass (forward, collapse, "
        "bounds)");
  if (scope == CheckScope::path_sampling && (method == CheckMethod::rounding || method == CheckMethod::certified))
    throw std::invalid_argument("'" + to_string(method) +
                                "' is not a check path sampling can honour: it confirms by a run one tier up (auto, "
                                "mpfr); certified is for --sums, --enumerate and --effectiveness (math.md §10)");
}

bool uses_rounding_check(CheckMethod method, const Precision& p, Center center) {
  const bool applies = p.native_double && center != Center::optimal;
  if (method == CheckMethod::rounding && !applies)
    throw std::invalid_argument(
        p.native_double ? "the rounding check does not apply to the optimal centre (its linear program is solved in "
                          "round-to-nearest); use the mpfr check"
                        : "the rounding check applies to --precision double only (" + p.name() +
                              " is confirmed one tier up); use the mpfr check");
  return method == CheckMethod::rounding || (method == CheckMethod::automatic && applies);
}

BigReal rounding_check_value(const BigReal& v, const BigReal& up, const BigReal& down, double relative_floor) {
  // 40 digits hold the differences of doubles and K·e exactly enough.
  const BigReal x(v, 40), eu = BigReal(up, 40) - x, ed = BigReal(down, 40) - x;
  BigReal e = abs(eu) >= abs(ed) ? eu : ed;
  if (e == 0) e = abs(x) * BigReal(relative_floor, 40);
  return BigReal(x + BigReal(rounding_check_margin, 40) * e);
}

namespace {

/// The check values of `nearest` from its directed passes.
std::vector<LayerStats> checked_values(const std::vector<LayerStats>& nearest, std::vector<LayerStats> up,
                                       std::vector<LayerStats> down, const InputSpec& input) {
  if (up.size() != nearest.size() || down.size() != nearest.size())
    throw std::logic_error("rounding check: the passes measured different layer counts");
  std::vector<LayerStats> out = nearest;
  for (std::size_t l = 0; l < out.size(); ++l) {
    const std::vector<BigReal*> v = fields(out[l]), u = fields(up[l]), d = fields(down[l]);
    if (u.size() != v.size() || d.size() != v.size())
      throw std::logic_error("rounding check: the passes measured different quantities");
    // A value the directed passes leave unchanged is not thereby exact (a
    // 1-norm of a residual can be flat in the rounding of its centre and of
    // X's rows alike): it gets the spread of the other values of its matrix.
    // Only layer 0 of a given matrix is data, exact in every pass.
    const bool computed = l > 0 || input.kind == InputSpec::Kind::tokens || input.kind == InputSpec::Kind::pixels;
    double residual_spread = 0.0, norm_spread = 0.0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double s = relative_spread(*v[i], *u[i], *d[i]);
      if (group_of(i) == Group::norm) norm_spread = std::max(norm_spread, s);
      if (group_of(i) == Group::residual) residual_spread = std::max(residual_spread, s);
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      const Group g = group_of(i);
      const double floor = !computed            ? 0.0
                           : g == Group::norm   ? norm_spread
                           : g == Group::ratio  ? residual_spread + norm_spread
                                                : residual_spread;
      *v[i] = rounding_check_value(*v[i], *u[i], *d[i], floor);
    }
    // The measures (math.md §9) are functions of the residual and of X:
    // both spreads floor them. One a directed pass could not compute (an
    // undefined cosine, say) cannot be checked and is dropped.
    std::vector<MeasureValue> measures;
    for (const MeasureValue& m : out[l].measures) {
      const auto find = [&](const std::vector<MeasureValue>& in) -> const BigReal* {
        for (const MeasureValue& x : in)
          if (x.name == m.name) return &x.value;
        return nullptr;
      };
      const BigReal* mu = find(up[l].measures);
      const BigReal* md = find(down[l].measures);
      if (mu == nullptr || md == nullptr) continue;
      measures.push_back(
          {m.name, rounding_check_value(m.value, *mu, *md, computed ? residual_spread + norm_spread : 0.0)});
    }
    out[l].measures = std::move(measures);
  }
  return out;
}

}  // namespace

std::vector<LayerStats> rounding_check(const std::vector<LayerStats>& nearest, const Model& model,
                                       const InputSpec& input, const MeasureFn& measure) {
  DirectedPasses passes = directed_passes(drawn_in_nearest(model, input), measure);
  return checked_values(nearest, std::move(passes.up), std::move(passes.down), input);
}

RoundingCheckedRuns measure_with_rounding_check(const Model& model, const InputSpec& input,
                                                const std::string& nearest_stage, const MeasureFn& measure) {
  ThreePasses passes = three_passes(model, drawn_in_nearest(model, input), nearest_stage, measure);
  RoundingCheckedRuns out;
  out.checked = checked_values(passes.nearest, std::move(passes.up), std::move(passes.down), input);
  out.nearest = std::move(passes.nearest);
  return out;
}

}  // namespace sanpath

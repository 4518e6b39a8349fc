// The re-run effectiveness curve in ball arithmetic (compute/enclosure_rerun.hpp,
// math.md §10): every enclosure must contain the value of the plain re-run
// (compute/rerun.hpp) on a 4,098-bit pass, drawn from the same paths, whose
// errors (~1e-1230) lie far inside any enclosure at 128 bits — with and
// without skip, attention-only (with the gaps to the exact truncations) and
// with MLP and LayerNorm; an enclosure of X^L that misses its exact value
// must be caught.
#include "support/batch_helpers.hpp"
#include "support/enclosure_helpers.hpp"
#include "support/helpers.hpp"
#include "support/width8_models.hpp"
#include "sanpath/compute/effectiveness.hpp"
#include "sanpath/compute/enclosure_rerun.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/rerun.hpp"

using namespace sanpath;

namespace {

using S = mpfr_real<38>;    // 128 bits
using T = mpfr_real<1233>;  // 4,098 bits: the values the enclosures must contain

/// Width 8, 2 heads, every part (LayerNorm gains ~ 1 ± 0.3): attention-only variants run on it too.
Model model_of(int layers, std::uint64_t seed) { return test::width8_model(layers, Activation::gelu, seed, 0.5); }

BigReal big(const T& x) { return test::exact_big(x); }
using test::digits_of;

struct Checked {
  int missed = 0;
  int least = 1 << 20;  ///< fewest digits proven of a value that is not 0
};

void check_one(Checked& c, const Interval& iv, const BigReal& truth, const char* what, std::size_t k, std::size_t r) {
  if (!contains(iv, truth)) {
    ++c.missed;
    UNSCOPED_INFO(what << " k = " << k << ", repetition " << r << ": " << to_sci(truth, 30) << " outside ["
                       << to_sci(iv.lo, 30, Rounding::down) << ", " << to_sci(iv.hi, 30, Rounding::up) << "]");
  }
  if (truth != 0) c.least = std::min(c.least, digits_of(iv));
}

/// Every value of `e` against the 4,098-bit re-run `truth`.
Checked check_against(const EnclosedRerun& e, const RerunEffectiveness<T>& truth) {
  Checked c;
  REQUIRE(e.points.size() == truth.points.size());
  check_one(c, e.output_frobenius, big(truth.output_frobenius), "‖X^L‖_F", 0, 0);
  for (std::size_t k = 0; k < e.points.size(); ++k) {
    const EnclosedRerunPoint& x = e.points[k];
    const RerunPoint<T>& t = truth.points[k];
    CHECK(x.length == static_cast<int>(k));
    CHECK(x.count == t.count);
    CHECK(x.all_paths == t.all_paths);
    CHECK(x.evaluated == t.evaluated);
    REQUIRE(x.distance.size() == t.distance.size());
    REQUIRE(x.gap.size() == t.gap.size());
    REQUIRE(x.head.size() == t.head.size());
    for (std::size_t r = 0; r < x.distance.size(); ++r) {
      check_one(c, x.distance[r], big(t.distance[r]), "distance", k, r);
      if (!x.gap.empty()) check_one(c, x.gap[r], big(t.gap[r]), "gap", k, r);
      if (x.head.empty()) continue;
      check_one(c, x.head[r].mean_kl, big(t.head[r].mean_kl), "KL", k, r);
      CHECK(x.head[r].predictions == t.head[r].predictions);
      CHECK(x.head[r].agree_fewest <= t.head[r].agree);
      CHECK(t.head[r].agree <= x.head[r].agree_most);
    }
  }
  return c;
}

RerunOptions options(std::uint64_t samples, int repeats) {
  RerunOptions o;
  o.samples = samples;
  o.repeats = repeats;
  o.seed = 11;
  o.threads = 2;
  return o;
}

/// The plain re-run at 4,098 bits, with the exact truncations for the gaps of attention-only variants.
RerunEffectiveness<T> truth_of(const Model& m, const Variant& v, const MatrixXd& X0, const TaskHead* head,
                               const RerunOptions& o) {
  const bool exact = v.attention_only();
  ForwardOptions fo;
  fo.record_attention = exact;
  const ForwardTrace<T> t = forward<T>(m, v, convert<T>(X0), fo);
  std::vector<Matrix<T>> truncations;
  if (exact) exact_effectiveness<T>(m, t, nullptr, 1, &truncations);
  return rerun_effectiveness<T>(m, v, t.X.front(), t.X.back(), head, o, exact ? &truncations : nullptr);
}

EnclosedTrace<S> enclosed(const Model& m, const Variant& v, const MatrixXd& X0) {
  EnclosureOptions o;
  o.record_attention = v.attention_only();
  return forward_enclosed<S>(m, v, convert<S>(X0), o);
}

}  // namespace

TEST_CASE("enclosed re-runs: attention-only, every value and gap contains the 4,098-bit re-run's",
          "[enclosure][rerun]") {
  const MatrixXd X0 = test::width8_input(22);
  for (const bool skip : {true, false}) {
    const Variant v{skip, MlpKind::none, LayerNormKind::none, MaskKind::none};
    const Model m = model_of(3, 31);
    const EnclosedTrace<S> t = enclosed(m, v, X0);
    // Path counts: with skip 1, 6, 12, 8; without 0, 0, 0, 8. Three draws
    // per length; eight: length 3 whole while 2 is drawn.
    for (const std::uint64_t samples : {std::uint64_t{3}, std::uint64_t{8}}) {
      const TaskHead head = test::classifier_head(8, 3);
      CAPTURE(skip, samples);
      const EnclosedRerun e = enclose_rerun(m, t, &head, options(samples, 2));
      const Checked c = check_against(e, truth_of(m, v, X0, &head, options(samples, 2)));
      CHECK(c.missed == 0);
      CAPTURE(c.least);
      // Of 38 digits: the enclosures are tight. Without skip and with all 8
      // paths of length 3 run, the sub-networks nearly rebuild X^L's
      // predictions: their KL, ~2e-22, keeps fewer digits of its own.
      CHECK(c.least >= (skip ? 20 : 10));
    }
  }
}

TEST_CASE("enclosed re-runs: with MLP and LayerNorm, pre and post, and an LM head", "[enclosure][rerun]") {
  const MatrixXd X0 = test::width8_input(23);
  for (const Variant& v : {Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none},
                           Variant{false, MlpKind::plain, LayerNormKind::pre, MaskKind::causal}}) {
    CAPTURE(to_string(v));
    const Model m = model_of(2, 37);
    const TaskHead head = test::lm_head(8, 11);
    const EnclosedRerun e = enclose_rerun(m, enclosed(m, v, X0), &head, options(3, 2));
    const Checked c = check_against(e, truth_of(m, v, X0, &head, options(3, 2)));
    CHECK(c.missed == 0);
    CAPTURE(c.least);
    CHECK(c.least >= 15);
    for (const EnclosedRerunPoint& x : e.points) CHECK(x.gap.empty());  // no exact sense with an MLP
  }
}

TEST_CASE("enclosed re-runs: an enclosure of X^L that misses its exact value is caught", "[enclosure][rerun]") {
  const Variant v{true, MlpKind::none, LayerNormKind::none, MaskKind::none};
  const Model m = model_of(3, 31);
  const MatrixXd X0 = test::width8_input(22);
  EnclosedTrace<S> t = enclosed(m, v, X0);
  const RerunEffectiveness<T> truth = truth_of(m, v, X0, nullptr, options(3, 1));
  REQUIRE(check_against(enclose_rerun(m, t, nullptr, options(3, 1)), truth).missed == 0);
  // X^L's midpoint moved by 2^-60 with its radius kept: the distances, enclosed to ~1e-30, move off the truth.
  t.X.back().mid(0, 0) += S(std::ldexp(1.0, -60));
  CHECK(check_against(enclose_rerun(m, t, nullptr, options(3, 1)), truth).missed > 0);
}

TEST_CASE("enclosed re-runs: double, bad options and a trace without attention matrices are refused",
          "[enclosure][rerun]") {
  const Variant v{true, MlpKind::none, LayerNormKind::none, MaskKind::none};
  const Model m = model_of(2, 31);
  const EnclosedTrace<S> t = enclosed(m, v, test::width8_input(22));
  CHECK_THROWS_AS(enclose_rerun(m, t, nullptr, options(0, 1)), std::invalid_argument);
  CHECK_THROWS_AS(enclose_rerun(m, t, nullptr, options(1, 0)), std::invalid_argument);
  CHECK_THROWS_AS(enclose_rerun(m, forward_enclosed<S>(m, v, convert<S>(test::width8_input(22))), nullptr, options(2, 1)),
                  std::invalid_argument);
  const EnclosedTrace<double> d;
  CHECK_THROWS_AS(enclose_rerun(m, d, nullptr, options(2, 1)), std::invalid_argument);
}

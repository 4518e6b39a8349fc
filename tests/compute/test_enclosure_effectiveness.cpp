// The effectiveness curve in ball arithmetic (compute/enclosure_effectiveness.hpp,
// math.md §4 and §10): every enclosure must contain the value of the plain
// computation (compute/effectiveness.hpp) on a 4,098-bit pass, whose errors
// (~1e-1230) lie far inside any enclosure at 128 bits; an enclosure of X^L that
// misses the exact value must be caught; an exact tie of two logits must leave
// the agreement undecided, never counted as proven.
#include "support/batch_helpers.hpp"
#include "support/enclosure_helpers.hpp"
#include "support/helpers.hpp"
#include "support/width8_models.hpp"
#include "sanpath/compute/effectiveness.hpp"
#include "sanpath/compute/enclosure_effectiveness.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/model/random.hpp"

#include <string>
#include <utility>
#include <vector>

using namespace sanpath;

namespace {

using S = mpfr_real<38>;    // 128 bits
using T = mpfr_real<1233>;  // 4,098 bits: the values the enclosures must contain

Model san_model(int layers, int heads, std::uint64_t seed, double std) {
  RandomModelSpec s;
  s.arch = {layers, heads, 8, 4, 4, 0, Variant::san(), Activation::gelu, 1e-5, false};
  s.std = std;
  s.bias_std = 0.1;
  s.seed = seed;
  return random_model(s);
}

BigReal big(const T& x) { return test::exact_big(x); }
using test::digits_of;

EnclosedTrace<S> recorded(const Model& m, const Variant& v, const MatrixXd& X0) {
  EnclosureOptions o;
  o.record_attention = true;
  return forward_enclosed<S>(m, v, convert<S>(X0), o);
}

struct Checked {
  int missed = 0;
  int least = 1 << 20;           ///< fewest digits proven over k < L
  int least_distance = 1 << 20;  ///< the same, of the distances alone
  BigReal widest_kl = 0;         ///< widest KL enclosure over k < L, relative to max(1, KL)
};

/// Every point of `e` against the 4,098-bit curve: distance and KL in their
/// enclosures (0 at k = L, where both are 0 exactly), the agreement count
/// between the proven and the possible one.
Checked check_against(const EnclosedEffectiveness& e, const Effectiveness<T>& truth, int L) {
  Checked c;
  REQUIRE(e.points.size() == truth.points.size());
  CHECK(contains(e.output_frobenius, big(truth.output_frobenius)));
  for (std::size_t k = 0; k < e.points.size(); ++k) {
    const EnclosedEffectivenessPoint& x = e.points[k];
    const EffectivenessPoint<T>& t = truth.points[k];
    CHECK(x.length == static_cast<int>(k));
    const bool last = static_cast<int>(k) == L;
    const BigReal distance = last ? BigReal(0) : big(t.distance);
    if (!contains(x.distance, distance)) {
      ++c.missed;
      UNSCOPED_INFO("k = " << k << ": distance " << to_sci(distance, 30) << " outside ["
                           << to_sci(x.distance.lo, 30, Rounding::down) << ", "
                           << to_sci(x.distance.hi, 30, Rounding::up) << "]");
    }
    if (!last) {
      c.least = std::min(c.least, digits_of(x.distance));
      c.least_distance = std::min(c.least_distance, digits_of(x.distance));
    }
    REQUIRE(x.head.has_value() == t.head.has_value());
    if (!x.head) continue;
    const BigReal kl = last ? BigReal(0) : big(t.head->mean_kl);
    if (!contains(x.head->mean_kl, kl)) {
      ++c.missed;
      UNSCOPED_INFO("k = " << k << ": KL " << to_sci(kl, 30) << " outside ["
                           << to_sci(x.head->mean_kl.lo, 30, Rounding::down) << ", "
                           << to_sci(x.head->mean_kl.hi, 30, Rounding::up) << "]");
    }
    if (!last) {
      c.least = std::min(c.least, digits_of(x.head->mean_kl));
      const BigReal width = BigReal(x.head->mean_kl.hi - x.head->mean_kl.lo) / max(BigReal(1), x.head->mean_kl.hi);
      if (width > c.widest_kl) c.widest_kl = width;
    }
    CHECK(x.head->predictions == t.head->predictions);
    CHECK(x.head->agree_fewest <= t.head->agree);
    CHECK(t.head->agree <= x.head->agree_most);
  }
  return c;
}

}  // namespace

TEST_CASE("enclosed effectiveness: distances, KL and agreement contain the 4,098-bit values, both heads") {
  const Variant skip{true, MlpKind::none, LayerNormKind::none, MaskKind::none};
  const Model m = san_model(3, 2, 31, 0.5);
  const MatrixXd X0 = test::width8_input(22);
  const EnclosedTrace<S> t = recorded(m, skip, X0);
  const ForwardTrace<T> exact = forward<T>(m, skip, convert<T>(X0));
  // BERT's pooler + classifier, DistilBERT's with ReLU, GPT-2's LN_f + table, the Llama family's RMSNorm,
  // Gemma's gain 1 + w, Gemma 2's final soft cap (c = 2: it bites on logits of this size), OPT's project_out,
  // XLNet's bias, ViT's LayerNorm + classifier on the first row.
  TaskHead relu = test::classifier_head(8, 3);
  relu.pooler_activation = PoolerActivation::relu;
  const std::vector<std::pair<const char*, TaskHead>> heads{
      {"BERT", test::classifier_head(8, 3)},          {"DistilBERT", relu}, {"GPT-2", test::lm_head(8, 11)},
      {"Llama", test::rms_lm_head(8, 11, false)},     {"Gemma", test::rms_lm_head(8, 11, true)},
      {"Gemma 2", test::rms_lm_head(8, 11, true, 2.0)}, {"OPT", test::projected_lm_head(8, 5, 11)},
      {"XLNet", test::biased_lm_head(8, 11)},         {"ViT", test::normed_classifier_head(8, 3)}};
  for (const auto& [name, head] : heads) {
    CAPTURE(name);
    const EnclosedEffectiveness e = enclose_effectiveness(m, t, &head);
    const Checked c = check_against(e, exact_effectiveness<T>(m, exact, &head), 3);
    CHECK(c.missed == 0);
    CAPTURE(c.least, c.least_distance, to_sci(c.widest_kl, 3));
    // Of 38 digits, the enclosures are tight: the distances to 25 digits, the KL to 1e-26 (relative where it
    // is above 1); a KL near 0 (XLNet's 4e-8 at k = 1) has fewer digits of its own, BERT's and GPT-2's have 25.
    CHECK(c.least_distance >= 25);
    CHECK(c.widest_kl <= BigReal(1e-26));
    if (std::string(name) == "BERT" || std::string(name) == "GPT-2") CHECK(c.least >= 25);
    for (const EnclosedEffectivenessPoint& x : e.points)
      CHECK(x.head->agree_fewest == x.head->agree_most);  // no near-tie here: every argmax decided
  }
  SECTION("without a head: the distances alone; without skip every k < L keeps the bias row only") {
    const EnclosedEffectiveness e = enclose_effectiveness(m, t, nullptr);
    CHECK(check_against(e, exact_effectiveness<T>(m, exact, nullptr), 3).missed == 0);
    const EnclosedTrace<S> san = recorded(m, Variant::san(), X0);
    const ForwardTrace<T> san_exact = forward<T>(m, Variant::san(), convert<T>(X0));
    const EnclosedEffectiveness s = enclose_effectiveness(m, san, nullptr);
    CHECK(check_against(s, exact_effectiveness<T>(m, san_exact, nullptr), 3).missed == 0);
    CHECK(s.points[0].distance.lo == s.points[2].distance.lo);  // X_{≤0} = X_{≤2} = 1bᵀ: the same tail S_3
  }
}

TEST_CASE("enclosed effectiveness: an enclosure of X^L that misses its exact value is caught at k = L") {
  const Variant skip{true, MlpKind::none, LayerNormKind::none, MaskKind::none};
  const Model m = san_model(3, 2, 31, 0.5);
  EnclosedTrace<S> t = recorded(m, skip, test::width8_input(22));
  const TaskHead head = test::lm_head(8, 11);
  REQUIRE(contains(enclose_effectiveness(m, t, &head).points[3].distance, BigReal(0)));
  // X^L's midpoint moved by 2^-60 with its radius kept: no longer an enclosure of the exact X^L, and the
  // reconstruction Σ_k S_k + 1bᵀ − X^L, 0 exactly by Theorem 2.1, is then bounded away from 0.
  t.X.back().mid(0, 0) += S(std::ldexp(1.0, -60));
  const EnclosedEffectiveness e = enclose_effectiveness(m, t, &head);
  CHECK_FALSE(contains(e.points[3].distance, BigReal(0)));
}

TEST_CASE("enclosed effectiveness: an exact tie of two logits leaves the argmax undecided") {
  const Variant skip{true, MlpKind::none, LayerNormKind::none, MaskKind::none};
  const Model m = san_model(2, 2, 31, 0.5);
  const MatrixXd X0 = test::width8_input(22);
  const ForwardTrace<T> exact = forward<T>(m, skip, convert<T>(X0));
  TaskHead head = test::classifier_head(8, 3);
  // The class that leads on X^L gets a twin of a higher index (the same row and bias): their logits are
  // equal for every input and the first index wins (the exact curve's rule), but ball arithmetic cannot
  // separate equal values, so on X^L and on X_{≤L} = X^L the argmax is undecided.
  const Matrix<T> logits = task_logits<T>(head, exact.X.back());
  const Eigen::Index lead = logits(0, 0) > logits(0, 1) ? 0 : 1;
  head.output_W.row(2) = head.output_W.row(lead);
  head.output_b(2) = head.output_b(lead);
  const EnclosedEffectiveness e = enclose_effectiveness(m, recorded(m, skip, X0), &head);
  CHECK(check_against(e, exact_effectiveness<T>(m, exact, &head), 2).missed == 0);
  CHECK(e.points[2].head->agree_fewest == 0);
  CHECK(e.points[2].head->agree_most == 1);
}

TEST_CASE("enclosed effectiveness: double is refused, and so is a head of another width") {
  const Variant skip{true, MlpKind::none, LayerNormKind::none, MaskKind::none};
  const Model m = san_model(2, 2, 31, 0.5);
  const TaskHead narrow = test::lm_head(6, 5);
  CHECK_THROWS_AS(enclose_effectiveness(m, recorded(m, skip, test::width8_input(22)), &narrow),
                  std::invalid_argument);
  const EnclosedTrace<double> d;
  CHECK_THROWS_AS(enclose_effectiveness(m, d, nullptr), std::invalid_argument);
}

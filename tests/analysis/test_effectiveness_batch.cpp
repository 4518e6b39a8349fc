// Path effectiveness over a batch (analysis/effectiveness_batch.hpp): every
// input's values equal its own single run; the statistics over the inputs,
// the pooled agreement and the pooled KL equal what this test computes from
// those runs in plain BigReal arithmetic at 300 digits; the result does not
// depend on the thread count, re-run draws included.
#include "support/batch_helpers.hpp"
#include "support/helpers.hpp"

#include "sanpath/analysis/effectiveness_batch.hpp"
#include "sanpath/model/random.hpp"

#include <algorithm>

using namespace sanpath;
using sanpath::test::classifier_head;
using sanpath::test::lm_head;
using sanpath::test::with_digits;

namespace {

double rel(const BigReal& a, const BigReal& b) { return static_cast<double>(abs(BigReal(a - b)) / abs(b)); }

const Variant attention_skip{true, MlpKind::none, LayerNormKind::none, MaskKind::none};

Model small_model(std::uint64_t seed) {
  RandomModelSpec s;
  s.arch = {2, 2, 8, 4, 4, 16, {true, MlpKind::residual, LayerNormKind::post, MaskKind::none},
            Activation::gelu, 1e-12, false};
  s.std = 0.5;
  s.seed = seed;
  return random_model(s);
}

BigReal big(const Quantity& q) { return BigReal(q.below_resolution ? q.bound : q.value, 300); }

}  // namespace

TEST_CASE("weighted_mean: Σ w_i x_i / Σ w_i, least digits, bounds stay bounds") {
  const Quantity m = weighted_mean({with_digits(1e-3, 10), with_digits(3e-3, 12)}, {1, 3});
  CHECK(rel(m.value, BigReal("2.5e-3", 40)) < 1e-15);  // (1 + 9)/4 e-3
  CHECK(m.digits == 10);
  const Quantity b = weighted_mean({with_digits(1e-3, 10), below_resolution(BigReal(0, 40), BigReal("1e-20", 40))}, {2, 2});
  CHECK(b.below_resolution);
  CHECK_THROWS_AS(weighted_mean({with_digits(1, 3)}, {0}), std::invalid_argument);
  CHECK_THROWS_AS(weighted_mean({with_digits(1, 3)}, {1, 1}), std::invalid_argument);
}

TEST_CASE("effectiveness batch equals its inputs' own runs; statistics and pooled agreement recomputed") {
  const Model m = small_model(11);
  const std::vector<InputSpec> inputs = test::inputs_of_lengths({5, 3, 7, 4}, 20);
  const PrecisionRequest req;
  const std::vector<int> lengths = {5, 3, 7, 4};
  for (const bool lm : {true, false}) {
    CAPTURE(lm);
    const TaskHead head = lm ? lm_head(8, 11) : classifier_head(8, 3);
    const BatchEffectiveness one = analyze_effectiveness_batch(m, attention_skip, inputs, req, &head, 1);
    const BatchEffectiveness two = analyze_effectiveness_batch(m, attention_skip, inputs, req, &head, 2);
    REQUIRE(one.runs.size() == 4);
    REQUIRE(one.lengths.size() == 3);  // k = 0..L
    long want_predictions = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const EffectivenessReport alone = analyze_effectiveness(m, attention_skip, inputs[i], req, &head);
      CHECK(alone.precision.bits == one.runs[i].precision.bits);
      CHECK(alone.predictions == (lm ? lengths[i] : 1));
      want_predictions += alone.predictions;
      for (std::size_t k = 0; k < alone.lengths.size(); ++k) {
        CHECK(alone.lengths[k].distance.str() == one.runs[i].lengths[k].distance.str());
        CHECK(alone.lengths[k].kl->str() == one.runs[i].lengths[k].kl->str());
        CHECK(alone.lengths[k].agree == one.runs[i].lengths[k].agree);
        CHECK(two.runs[i].lengths[k].distance.str() == one.runs[i].lengths[k].distance.str());
      }
    }
    for (std::size_t k = 0; k < one.lengths.size(); ++k) {
      CAPTURE(k);
      const BatchEffectivenessEntry& e = one.lengths[k];
      std::vector<BigReal> x;
      long agree = 0;
      BigReal kl_sum(0, 300);
      for (const EffectivenessReport& r : one.runs) {
        x.push_back(big(r.lengths[k].distance));
        agree += *r.lengths[k].agree;
        kl_sum += big(*r.lengths[k].kl) * BigReal(r.predictions, 300);
      }
      REQUIRE(e.head);
      CHECK(e.head->predictions == want_predictions);
      CHECK(e.head->agree == agree);
      CHECK(e.head->agree_check == agree);  // the check runs agree on every count here
      CHECK(e.head->agree <= e.head->predictions);
      CHECK(big(e.head->kl) >= 0);
      CHECK(e.head->kl.str() == two.lengths[k].head->kl.str());
      CHECK(e.distance.mean.str() == two.lengths[k].distance.mean.str());
      if (k + 1 == one.lengths.size()) {
        // k = L is the full output: every prediction agrees, distance and KL are rounding.
        CHECK(e.head->agree == want_predictions);
        CHECK(e.distance.max.below_resolution);
        continue;
      }
      const BigReal kl = kl_sum / BigReal(want_predictions, 300);
      CHECK(rel(e.head->kl.value, kl) < 1e-30);
      std::sort(x.begin(), x.end());
      CHECK(rel(e.distance.mean.value, BigReal((x[0] + x[1] + x[2] + x[3]) / 4)) < 1e-30);
      CHECK(rel(e.distance.median.value, BigReal((x[1] + x[2]) / 2)) < 1e-30);
      CHECK(e.distance.min.value == x.front());
      CHECK(e.distance.max.value == x.back());
    }
  }
}

TEST_CASE("re-run batch: seeds by input index, equal to single runs, pooled over inputs × repetitions") {
  const Model m = small_model(12);
  const std::vector<InputSpec> inputs = test::inputs_of_lengths({4, 6, 3}, 20);
  const PrecisionRequest req;
  const TaskHead head = lm_head(8, 11);
  RerunRequest rr;
  rr.samples = 2;  // fewer than the 4 paths of length 1 and 2: sampled, with a spread
  rr.repeats = 3;
  rr.seed = 7;
  rr.threads = 1;
  const BatchRerun one = analyze_rerun_batch(m, attention_skip, inputs, req, rr, &head);
  rr.threads = 2;
  const BatchRerun two = analyze_rerun_batch(m, attention_skip, inputs, req, rr, &head);
  REQUIRE(one.runs.size() == 3);
  CHECK(one.seeds.front() == 7);
  CHECK(one.seeds[1] != one.seeds[2]);
  REQUIRE(one.exact);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    RerunRequest single = rr;
    single.threads = 1;
    single.seed = rerun_input_seed(7, i);
    const RerunReport alone = analyze_rerun(m, attention_skip, inputs[i], req, single, &head);
    for (std::size_t k = 0; k < alone.lengths.size(); ++k) {
      CHECK(alone.lengths[k].distance.mean.str() == one.runs[i].lengths[k].distance.mean.str());
      CHECK(alone.lengths[k].agree == one.runs[i].lengths[k].agree);
      CHECK(two.runs[i].lengths[k].distance.mean.str() == one.runs[i].lengths[k].distance.mean.str());
      CHECK(two.runs[i].lengths[k].kl->mean.str() == one.runs[i].lengths[k].kl->mean.str());
    }
  }
  // Different inputs draw different paths: the same input twice under two indices
  // gives other re-run values at a sampled length.
  const BatchRerun same = analyze_rerun_batch(m, attention_skip, {inputs[0], inputs[0]}, req, rr, &head);
  CHECK(same.runs[0].lengths[1].distance.mean.str() != same.runs[1].lengths[1].distance.mean.str());

  for (std::size_t k = 0; k < one.lengths.size(); ++k) {
    CAPTURE(k);
    const BatchRerunEntry& e = one.lengths[k];
    long agree = 0, predictions = 0;
    BigReal kl_sum(0, 300), dist_sum(0, 300);
    for (const RerunReport& r : one.runs) {
      const RerunEntry& x = r.lengths[k];
      for (long a : x.agree) agree += a;
      const long n = static_cast<long>(x.agree.size()) * r.predictions;
      predictions += n;
      kl_sum += big(x.kl->mean) * BigReal(n, 300);
      dist_sum += big(x.distance.mean);
    }
    REQUIRE(e.head);
    CHECK(e.head->agree == agree);
    CHECK(e.head->predictions == predictions);
    // Length 0 is the one path of length 0 run once; the others are sampled R times.
    CHECK(predictions == (e.all_paths ? 13 : 3 * 13));
    CHECK(big(e.head->kl) >= 0);
    if (!e.head->kl.below_resolution) CHECK(rel(e.head->kl.value, BigReal(kl_sum / BigReal(predictions, 300))) < 1e-30);
    if (!e.distance.mean.below_resolution) CHECK(rel(e.distance.mean.value, BigReal(dist_sum / 3)) < 1e-30);
    CHECK(e.distance.mean.str() == two.lengths[k].distance.mean.str());
    CHECK(e.head->kl.str() == two.lengths[k].head->kl.str());
    REQUIRE(e.gap);
    CHECK(e.gap->mean.str() == two.lengths[k].gap->mean.str());
  }
}

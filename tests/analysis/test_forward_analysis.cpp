// Precision auto and confirmed digits (math.md §6), checked against runs at a
// much higher fixed precision made independently of the auto logic.
#include "support/helpers.hpp"

#include "sanpath/analysis/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/core/dispatch.hpp"

using namespace sanpath;

namespace {

/// A seeded random SAN: L layers, H heads, d features, d_qk = d_v = dq.
Model random_san(int layers, int heads, int d, int dq, double std, std::uint64_t seed) {
  RandomModelSpec s;
  s.arch = {layers, heads, d, dq, dq, 0, Variant::san(), Activation::gelu, 1e-12, false};
  s.std = std;
  s.seed = seed;
  return random_model(s);
}

Model bert_style_san(int layers, std::uint64_t seed) { return random_san(layers, 4, 32, 8, 0.02, seed); }

InputSpec input16(std::uint64_t seed) {
  RandomInputSpec r;
  r.n = 8;
  r.seed = seed;
  return InputSpec::from_random(r);
}

}  // namespace

TEST_CASE("auto precision resolves a 6-layer SAN's collapsed residual with confirmed digits") {
  const Model m = bert_style_san(6, 4);
  const InputSpec in = input16(5);
  PrecisionRequest req;  // auto, 20 digits
  const ForwardAnalysis a = analyze_forward(m, Variant::san(), in, req);
  REQUIRE(a.layers.size() == 7);
  REQUIRE(a.check);
  const LayerReport& last = a.layers.back();
  REQUIRE(last.digits);
  CHECK(*last.digits >= 17);
  CHECK_FALSE(last.relative_residual.below_resolution);
  // An independent measurement at the top precision (no auto logic).
  const long top = Precision::max_bits();
  const auto ref = with_scalar(Precision{false, top}, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return measure_layers<S>(m, Variant::san(), in, Center::mean);
  });
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    const LayerReport& r = a.layers[l];
    CAPTURE(l, r.relative_residual.str(), to_sci(ref[l].relative_residual, 30), *r.digits);
    // Agreement with the independent run to at least the confirmed digits.
    CHECK(agreeing_digits(r.relative_residual.value, ref[l].relative_residual, 10000) >= *r.digits);
  }
  // The collapse is real: far below what double resolves.
  CHECK(log10_abs(last.relative_residual.value) < -20);
}

TEST_CASE("in double the same residual is rounding noise and prints as an upper bound") {
  const Model m = bert_style_san(6, 4);
  PrecisionRequest req = PrecisionRequest::parse("double");
  req.check = CheckMethod::mpfr;  // the run one tier up (the rounding check: test_double_check.cpp)
  const ForwardAnalysis a = analyze_forward(m, Variant::san(), input16(5), req);
  REQUIRE(a.check);
  CHECK(a.check->bits == 128);
  const LayerReport& last = a.layers.back();
  CHECK(last.relative_residual.below_resolution);
  CHECK(last.relative_residual.str().rfind("< 1e", 0) == 0);
  CHECK(last.digits == 0);
  // Layer 0 (the input) is exact in double: every digit confirmed.
  CHECK(*a.layers[0].digits >= 15);
}

TEST_CASE("a fixed precision with no confirming run reports unconfirmed digits") {
  const Model m = bert_style_san(2, 1);
  PrecisionRequest req = PrecisionRequest::parse("256");
  req.confirm = false;
  const ForwardAnalysis a = analyze_forward(m, Variant::san(), input16(2), req);
  CHECK_FALSE(a.check);
  CHECK_FALSE(a.layers[1].digits);
  CHECK(a.precision.bits == 257);
}

TEST_CASE("auto on the direct pass stops at a stated ceiling when the residual is beyond it") {
  const Model m = bert_style_san(6, 4);
  PrecisionRequest req;
  req.method = ForwardMethod::direct;
  req.max_bits = 128;
  const ForwardAnalysis a = analyze_forward(m, Variant::san(), input16(5), req);
  CHECK(a.ceiling_reached);
  CHECK(a.precision.bits == 128);
  CHECK(a.layers.back().relative_residual.below_resolution);
}

TEST_CASE("auto on the centred pass: a ceiling below the digits asked is stated, the values stay values") {
  const Model m = bert_style_san(6, 4);
  PrecisionRequest req;
  req.max_bits = 65;
  req.target_digits = 30;  // 65 bits carry 19 digits
  const ForwardAnalysis a = analyze_forward(m, Variant::san(), input16(5), req);
  CHECK(a.ceiling_reached);
  CHECK(a.precision.bits == 65);
  CHECK(a.tried_bits == std::vector<long>{65});
  REQUIRE(a.check);
  CHECK(a.check->bits == 128);  // the confirming run is above the ceiling, as for the direct pass
  const LayerReport& last = a.layers.back();
  CHECK_FALSE(last.relative_residual.below_resolution);
  CHECK(log10_abs(last.relative_residual.value) < -100);
  CHECK(*last.digits < 30);
  CHECK(*last.digits >= 5);
}

TEST_CASE("bits_to_resolve grows with the exponent of the residual") {
  BigReal::default_precision(30);
  const long a = bits_to_resolve(BigReal("1e-100"), 20, 16, 64, 6);
  const long b = bits_to_resolve(BigReal("1e-1000"), 20, 16, 64, 6);
  // 900 more decimal orders need 900·log2(10) ≈ 2990 more bits.
  CHECK(b - a >= 2989);
  CHECK(b - a <= 2991);
}

TEST_CASE("the real checkpoints run in their own architecture and as pure SANs") {
  const std::string dir = test::real_models_dir();
  if (dir.empty()) return;  // skipped outside CI (real_models_dir says so)
  for (const std::string name : {"bert-ticket-classifier", "gpt2-capp"}) {
    CAPTURE(name);
    const Model m = load_model(dir + "/" + name);
    const InputSpec in = InputSpec::from_tokens({2, 15, 27, 3, 40});
    for (const Variant& v : {m.arch().variant, Variant::san(m.arch().variant.mask)}) {
      const auto d = measure_layers<double>(m, v, in, Center::mean);
      const auto r = measure_layers<mpfr_real<77>>(m, v, in, Center::mean);
      REQUIRE(d.size() == static_cast<std::size_t>(m.arch().layers) + 1);
      for (std::size_t l = 0; l < d.size(); ++l) {
        CAPTURE(l, to_sci(d[l].relative_residual), to_sci(r[l].relative_residual));
        // Well-conditioned (residuals of order 1e-6 and up): double agrees
        // with 257 bits to at least 9 digits.
        CHECK(agreeing_digits(d[l].relative_residual, r[l].relative_residual, 17) >= 9);
        CHECK(r[l].relative_residual > 0);
      }
    }
  }
}

// ---- the centred pass (math.md §7) in auto precision ----------------------------------

namespace {

/// A small SAN that collapses past what any direct tier resolves: r_10 far
/// below 1e-9866 (the top tier's unit roundoff) while r_0 ≈ 0.5.
Model deep_small_san() { return random_san(10, 2, 8, 4, 0.3, 7); }

InputSpec input6(std::uint64_t seed) {
  RandomInputSpec r;
  r.n = 6;
  r.seed = seed;
  return InputSpec::from_random(r);
}

PrecisionRequest with_method(PrecisionRequest r, ForwardMethod m) {
  r.method = m;
  return r;
}

}  // namespace

TEST_CASE("the method: parsed, and centred by default only for auto") {
  CHECK(parse_method("direct") == ForwardMethod::direct);
  CHECK(parse_method("centred") == ForwardMethod::centred);
  CHECK_THROWS_WITH(parse_method("centered"), "method: 'centered' is not one of direct, centred");
  CHECK(PrecisionRequest{}.resolved_method() == ForwardMethod::centred);
  CHECK(PrecisionRequest::parse("257").resolved_method() == ForwardMethod::direct);
  CHECK(with_method(PrecisionRequest::parse("257"), ForwardMethod::centred).resolved_method() ==
        ForwardMethod::centred);
}

TEST_CASE("auto on the centred pass: both methods agree on every layer the direct ladder resolves") {
  const Model m = bert_style_san(6, 4);
  const InputSpec in = input16(5);
  const ForwardAnalysis c = analyze_forward(m, Variant::san(), in, PrecisionRequest{});
  const ForwardAnalysis d = analyze_forward(m, Variant::san(), in, with_method({}, ForwardMethod::direct));
  CHECK(c.method == ForwardMethod::centred);
  CHECK(d.method == ForwardMethod::direct);
  // The centred pass works at the tier for 20 digits, whatever the residual;
  // the direct ladder needs the residual's exponent in bits more.
  CHECK(c.precision.bits < d.precision.bits);
  REQUIRE(c.layers.size() == d.layers.size());
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    const LayerReport &a = c.layers[l], &b = d.layers[l];
    CAPTURE(l, a.relative_residual.str(), b.relative_residual.str());
    REQUIRE(a.digits);
    REQUIRE(b.digits);
    CHECK(*a.digits >= 20);
    const int both = std::min(*a.digits, *b.digits);
    CHECK(agreeing_digits(a.relative_residual.value, b.relative_residual.value, 10000) >= both - 1);
    CHECK(agreeing_digits(a.res_composite.value, b.res_composite.value, 10000) >= both - 1);
    CHECK(agreeing_digits(a.norm_composite.value, b.norm_composite.value, 10000) >= both - 1);
  }
}

TEST_CASE("auto on the centred pass resolves a 10-layer SAN beyond the top tier at every layer") {
  const Model m = deep_small_san();
  const InputSpec in = input6(1);
  PrecisionRequest req;
  req.target_digits = 25;
  const ForwardAnalysis a = analyze_forward(m, Variant::san(), in, req);
  REQUIRE(a.check);
  CHECK(a.check->bits > a.precision.bits);
  CHECK(a.precision.bits <= 257);  // 25 digits + the growth allowance, not the residual's exponent
  CHECK_FALSE(a.ceiling_reached);
  for (const LayerReport& r : a.layers) {
    CAPTURE(r.layer, r.relative_residual.str());
    CHECK_FALSE(r.relative_residual.below_resolution);
    REQUIRE(r.digits);
    CHECK(*r.digits >= 25);
  }
  // Beyond any direct tier: below the top tier's unit roundoff.
  CHECK(log10_abs(a.layers.back().relative_residual.value) < -9866);
  // Independent: the direct pass at the top tier, on the layers it resolves
  // (relative residual above 1e-9000, so that ≥ 800 digits are left).
  const auto direct = with_scalar(Precision{false, Precision::max_bits()}, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return measure_layers<S>(m, Variant::san(), in, Center::mean, ForwardMethod::direct);
  });
  int compared = 0;
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    if (log10_abs(direct[l].relative_residual) < -9000) continue;
    ++compared;
    CAPTURE(l, a.layers[l].relative_residual.str(), to_sci(direct[l].relative_residual, 30));
    CHECK(agreeing_digits(a.layers[l].relative_residual.value, direct[l].relative_residual, 10000) >=
          *a.layers[l].digits);
  }
  CHECK(compared >= 6);
  // Theorem 2.2's mechanism, measured: r_l / r_{l-1}^3 stays bounded (no
  // drift that noise would show) over the deep layers.
  for (std::size_t l = 6; l < a.layers.size(); ++l) {
    const double q = log10_abs(a.layers[l].res_composite.value) / log10_abs(a.layers[l - 1].res_composite.value);
    CAPTURE(l, q);
    CHECK(q > 2.9);
    CHECK(q < 3.1);
  }
}

TEST_CASE("the direct pass at the top tier: rounding noise prints as a true upper bound, checked by the tier below") {
  const Model m = deep_small_san();
  const InputSpec in = input6(1);
  const ForwardAnalysis truth = analyze_forward(m, Variant::san(), in, PrecisionRequest{});
  PrecisionRequest top = PrecisionRequest::parse(std::to_string(Precision::max_bits()));
  REQUIRE(top.resolved_method() == ForwardMethod::direct);
  const ForwardAnalysis a = analyze_forward(m, Variant::san(), in, top);
  REQUIRE(a.precision.is_top());
  REQUIRE(a.check);
  CHECK(a.check->bits < a.precision.bits);  // no tier above: the tier below confirms
  const LayerReport& last = a.layers.back();
  CAPTURE(last.relative_residual.str(), truth.layers.back().relative_residual.str());
  CHECK(last.relative_residual.below_resolution);
  CHECK(last.res_composite.below_resolution);
  CHECK(last.relative_residual.str().rfind("< 1e-", 0) == 0);
  // The bound is true: above the value the centred pass resolves.
  CHECK(last.relative_residual.bound > truth.layers.back().relative_residual.value);
  CHECK(last.res_composite.bound > truth.layers.back().res_composite.value);
  // Layers the top tier resolves are confirmed by the tier below.
  CHECK_FALSE(a.layers[3].relative_residual.below_resolution);
  CHECK(*a.layers[3].digits >= 15);
}

TEST_CASE("without a confirming run the direct pass reports noise as an upper bound, the centred pass a value") {
  const Model m = deep_small_san();
  const InputSpec in = input6(1);
  PrecisionRequest req = PrecisionRequest::parse("257");
  req.confirm = false;
  const ForwardAnalysis d = analyze_forward(m, Variant::san(), in, req);
  CHECK_FALSE(d.check);
  CHECK(d.layers.back().relative_residual.below_resolution);
  const ForwardAnalysis c = analyze_forward(m, Variant::san(), in, with_method(req, ForwardMethod::centred));
  CHECK_FALSE(c.check);
  CHECK_FALSE(c.layers.back().relative_residual.below_resolution);
  CHECK_FALSE(c.layers.back().digits);
}

TEST_CASE("one precision ladder: tiers within the ceiling, the confirming tier one up or, at the top, one down") {
  const std::vector<long>& tiers = Precision::tiers();
  REQUIRE(tiers.size() >= 2);
  PrecisionRequest req;  // auto
  CHECK(req.ceiling() == Precision::max_bits());
  req.max_bits = tiers[1] + 1;  // between two tiers: the tier above it is out of reach
  CHECK(req.ceiling() == tiers[1] + 1);
  CHECK(req.tier_for(1).bits == tiers[0]);
  CHECK(req.tier_for(tiers[1]).bits == tiers[1]);
  CHECK(req.tier_for(tiers[1] + 1).bits == tiers[1]);  // never above the ceiling
  CHECK(req.tier_for(1L << 40).bits == tiers[1]);
  CHECK_FALSE(req.rises_from(Precision::at_least(tiers[1])));
  CHECK(req.rises_from(Precision::at_least(tiers[0])));
  req.max_bits = 40;
  CHECK_THROWS_WITH(req.ceiling(), Catch::Contains("below 53"));
  req.max_bits = 1L << 40;  // clamped to the top tier
  CHECK(req.ceiling() == Precision::max_bits());
  const PrecisionRequest fixed = PrecisionRequest::parse(std::to_string(tiers[0]));
  CHECK(fixed.ceiling() == Precision::max_bits());  // a fixed run's confirming tier lies above it
  CHECK(PrecisionRequest::confirming_tier(Precision::at_least(tiers[0]))->bits == tiers[1]);
  CHECK(PrecisionRequest::confirming_tier(Precision::at_least(Precision::max_bits()))->bits == tiers[tiers.size() - 2]);
}

// Precision auto and confirmed digits (math.md §6), checked against runs at a
// much higher fixed precision made independently of the auto logic.
#include "support/helpers.hpp"

#include "sanpath/analysis/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/model/random.hpp"

using namespace sanpath;

namespace {

Model bert_style_san(int layers, std::uint64_t seed) {
  RandomModelSpec s;
  s.arch = {layers, 4, 32, 8, 8, 0, Variant::san(), Activation::gelu, 1e-12, false};
  s.std = 0.02;
  s.seed = seed;
  return random_model(s);
}

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

TEST_CASE("auto stops at a stated ceiling when the residual is beyond it") {
  const Model m = bert_style_san(6, 4);
  PrecisionRequest req;
  req.max_bits = 128;
  const ForwardAnalysis a = analyze_forward(m, Variant::san(), input16(5), req);
  CHECK(a.ceiling_reached);
  CHECK(a.precision.bits == 128);
  CHECK(a.layers.back().relative_residual.below_resolution);
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
  if (dir.empty()) {
    WARN("shared real-models folder absent: skipped");
    return;
  }
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

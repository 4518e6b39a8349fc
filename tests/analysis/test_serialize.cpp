// Results as bytes (analysis/serialize.hpp, core/bytes.hpp), for results that
// travel between MPI ranks: each of the six per-input results of a batch,
// computed on a small random model with every optional part present, encodes,
// decodes and encodes again to the same bytes, and the report layer prints the
// decoded result exactly as the original; truncated or padded bytes throw;
// BigReal (precision included) and double values come back bit for bit.
#include "support/batch_helpers.hpp"
#include "support/helpers.hpp"

#include "sanpath/analysis/serialize.hpp"
#include "sanpath/core/bytes.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/report/format.hpp"

#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace sanpath;

namespace {

const RunInfo info{"random model", "random input"};
const Variant full{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
const Variant attention_skip{true, MlpKind::none, LayerNormKind::none, MaskKind::none};

/// L = 3, H = 2, d = 8, with MLP and LayerNorm weights.
Model small_model(Variant own = full, double std = 0.5, double bias_std = 0.1) {
  RandomModelSpec s;
  s.arch = {3, 2, 8, 4, 4, 16, own, Activation::gelu, 1e-12, false};
  s.std = std;
  s.bias_std = bias_std;
  s.seed = 5;
  return random_model(s);
}

InputSpec small_input(int n = 5, std::optional<double> residual = std::nullopt, double offset = 1.0) {
  RandomInputSpec r;
  r.n = n;
  r.seed = 3;
  r.residual = residual;
  r.offset = offset;
  return InputSpec::from_random(r);
}


/// Measures on, emulated in `format`, auto precision.
PrecisionRequest rich_request(std::optional<EmulatedFormat> format = EmulatedFormat::bf16) {
  PrecisionRequest r;
  r.measures = MeasureSet::all();
  r.emulate = format;
  return r;
}

/// encode → decode → encode gives the same bytes; every format of the report
/// layer prints the decoded value as the original; a truncated encoding,
/// trailing bytes and another type's encoding throw and leave `out` as it was.
template <class T, class Report> void require_round_trip(const T& x, const Report& report) {
  const std::string bytes = to_bytes(x);
  T back;
  from_bytes(bytes, back);
  REQUIRE(to_bytes(back) == bytes);
  for (const Format f : {Format::table, Format::json, Format::csv}) {
    CAPTURE(static_cast<int>(f));
    REQUIRE(report(back, f) == report(x, f));
  }
  // Decoding into a used object replaces all of it.
  from_bytes(bytes, back);
  REQUIRE(to_bytes(back) == bytes);

  std::vector<std::size_t> cuts = {0, 1, 7, 8, 9, bytes.size() / 2, bytes.size() - 8, bytes.size() - 1};
  for (std::size_t i = 1; i < 64; ++i) cuts.push_back(bytes.size() * i / 64 + i % 8);
  for (const std::size_t cut : cuts) {
    if (cut >= bytes.size()) continue;
    CAPTURE(cut, bytes.size());
    REQUIRE_THROWS_AS(from_bytes(std::string_view(bytes).substr(0, cut), back), std::runtime_error);
  }
  REQUIRE_THROWS_AS(from_bytes(bytes + std::string(1, '\0'), back), std::runtime_error);
  REQUIRE_THROWS_AS(from_bytes(bytes + std::string(8, '\0'), back), std::runtime_error);
  ForwardAnalysis other;
  CollapseResult other_collapse;
  if constexpr (std::is_same_v<T, ForwardAnalysis>)
    REQUIRE_THROWS_AS(from_bytes(bytes, other_collapse), std::runtime_error);
  else
    REQUIRE_THROWS_AS(from_bytes(bytes, other), std::runtime_error);
  REQUIRE(to_bytes(back) == bytes);  // unchanged by the failed decodes
}

std::uint64_t bits_of(double x) {
  std::uint64_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

double double_of(std::uint64_t b) {
  double x = 0;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

/// x written and read back through a ByteWriter / ByteReader.
template <class T> T through_bytes(const T& x) {
  ByteWriter w;
  w(x);
  ByteReader r(w.bytes());
  T back{};
  r(back);
  r.finish();
  return back;
}

/// Same precision, same kind, same sign and same value (NaN equals NaN).
bool identical(const BigReal& a, const BigReal& b) {
  const mpfr_srcptr x = a.backend().data(), y = b.backend().data();
  if (mpfr_get_prec(x) != mpfr_get_prec(y)) return false;
  if (mpfr_nan_p(x) || mpfr_nan_p(y)) return mpfr_nan_p(x) && mpfr_nan_p(y);
  return mpfr_signbit(x) == mpfr_signbit(y) && mpfr_equal_p(x, y);
}

BigReal at_precision(long bits) {
  BigReal x;
  mpfr_set_prec(x.backend().data(), bits);
  return x;
}

}  // namespace

TEST_CASE("ForwardAnalysis: bytes round trip and identical reports", "[serialize]") {
  const Model m = small_model();
  const auto report = [&](const ForwardAnalysis& a, Format f) { return format_forward(a, m, info, f); };
  SECTION("auto, measures, bf16 emulation") {
    const ForwardAnalysis a = analyze_forward(m, full, small_input(), rich_request());
    REQUIRE(a.emulation);
    REQUIRE(a.check);
    REQUIRE_FALSE(a.layers.back().measures.empty());
    require_round_trip(a, report);
  }
  SECTION("optimal centre: the enclosure's lower end") {
    const ForwardAnalysis a = analyze_forward(m, full, small_input(), rich_request(), Center::optimal);
    REQUIRE(a.layers.back().res_composite_lower);
    require_round_trip(a, report);
  }
  SECTION("fp16 emulation that overflows at the input") {
    const ForwardAnalysis a = analyze_forward(m, full, small_input(5, std::nullopt, 1e6),
                                              rich_request(EmulatedFormat::fp16));
    REQUIRE(a.emulation);
    REQUIRE(a.emulation->overflow);
    REQUIRE(a.emulation->layers.front().non_finite);
    require_round_trip(a, report);
  }
  SECTION("double, confirmed by the rounding check; no check run") {
    PrecisionRequest r = PrecisionRequest::parse("double");
    r.measures = MeasureSet::parse("mu,cosine");
    require_round_trip(analyze_forward(m, full, small_input(), r), report);
    r.confirm = false;
    require_round_trip(analyze_forward(m, attention_skip, small_input(), r, Center::median), report);
  }
}

TEST_CASE("CollapseResult: bytes round trip and identical reports", "[serialize]") {
  const Model m = small_model();
  const auto report = [&](const CollapseResult& r, Format f) { return format_collapse(r, m, info, f); };
  const CollapseResult r = run_collapse(m, small_input(), rich_request(EmulatedFormat::fp32));
  REQUIRE(r.analyses.size() == 4);
  require_round_trip(r, report);
  PrecisionRequest fixed = PrecisionRequest::parse("128");
  fixed.measures = MeasureSet::parse("svd_residual,attention_entropy");
  require_round_trip(run_collapse(m, small_input(), fixed, {}, CollapseConventions::paper), report);
}

TEST_CASE("LengthSumsReport: bytes round trip and identical reports", "[serialize]") {
  const Model m = small_model();
  const auto report = [&](const LengthSumsReport& r, Format f) { return format_length_sums(r, m, info, f); };
  const LengthSumsReport r = analyze_length_sums(m, attention_skip, small_input(), PrecisionRequest{});
  REQUIRE(r.lengths.size() == 4);
  require_round_trip(r, report);
  require_round_trip(analyze_length_sums(m, Variant::san(), small_input(), PrecisionRequest::parse("257")), report);
}

TEST_CASE("BoundsAnalysis: bytes round trip and identical reports", "[serialize]") {
  // A SAN with MLP weights (λ_l present) and small weights (the bounds are not vacuous).
  const Model m = small_model(Variant::san(), 0.3, 0.0);
  const InputSpec x = small_input(6, 0.05);
  const auto report = [&](const BoundsAnalysis& a, Format f) {
    std::string s = format_bounds(a, m, info, f);
    for (const std::string& note : bounds_notes(a)) s += note + "\n";
    return s;
  };
  SECTION("Theorem 2.3: bounds, verdicts, cubic constants") {
    const BoundsAnalysis a = analyze_bounds(m, Variant::san(), x, BoundsRequest{});
    REQUIRE(a.applicable());
    REQUIRE(a.report.sqrt_a_r0);
    REQUIRE(a.report.depths.back().cubic_constant);
    REQUIRE(a.weights.lambda);
    require_round_trip(a, report);
  }
  SECTION("Corollary 3.2 with γ = 0.5") {
    BoundsRequest r;
    r.gamma = BoundsRequest::parse_gamma("0.5");
    r.precision.measures = MeasureSet::parse("mu");
    const BoundsAnalysis a = analyze_bounds(m, {false, MlpKind::plain, LayerNormKind::none, MaskKind::none}, x, r);
    REQUIRE(a.report.theorem.theorem == Theorem::cor_3_2);
    require_round_trip(a, report);
  }
  SECTION("skip on: not applicable, the series without skip beside it") {
    Variant skip = Variant::san();
    skip.skip = true;
    const BoundsAnalysis a = analyze_bounds(m, skip, x, BoundsRequest{});
    REQUIRE(a.without_skip);
    require_round_trip(a, report);
  }
}

TEST_CASE("EffectivenessReport: bytes round trip and identical reports", "[serialize]") {
  const Model m = small_model();
  const auto report = [&](const EffectivenessReport& r, Format f) { return format_effectiveness(r, m, info, f); };
  const TaskHead lm = test::lm_head(8, 11), classifier = test::classifier_head(8, 3);
  const EffectivenessReport r = analyze_effectiveness(m, attention_skip, small_input(), PrecisionRequest{}, &lm);
  REQUIRE(r.head);
  REQUIRE(r.lengths.front().kl);
  require_round_trip(r, report);
  require_round_trip(analyze_effectiveness(m, attention_skip, small_input(), PrecisionRequest{}, &classifier), report);
  require_round_trip(analyze_effectiveness(m, Variant::san(), small_input(), PrecisionRequest{}, nullptr), report);
  // certified: the enclosures and the possible agreement count travel too
  PrecisionRequest certified;
  certified.check = CheckMethod::certified;
  const EffectivenessReport c = analyze_effectiveness(m, attention_skip, small_input(), certified, &lm);
  REQUIRE(c.lengths.front().agree_most);
  require_round_trip(c, report);
}

TEST_CASE("RerunReport: bytes round trip and identical reports", "[serialize]") {
  const Model m = small_model();
  const auto report = [&](const RerunReport& r, Format f) { return format_rerun(r, m, info, f); };
  const TaskHead lm = test::lm_head(8, 11);
  RerunRequest rr;
  rr.samples = 2;
  rr.repeats = 3;
  rr.seed = 7;
  const RerunReport r = analyze_rerun(m, attention_skip, small_input(), PrecisionRequest{}, rr, &lm);
  REQUIRE(r.exact);
  REQUIRE(r.head);
  REQUIRE(r.lengths[1].gap);
  REQUIRE(r.lengths[1].kl);
  require_round_trip(r, report);
  // Not attention-only: no exact sense; no head.
  rr.repeats = 2;
  const RerunReport other = analyze_rerun(m, full, small_input(), PrecisionRequest{}, rr, nullptr);
  REQUIRE_FALSE(other.exact);
  require_round_trip(other, report);
  // Certified: each repetition's enclosures and the predictions that may agree travel too.
  PrecisionRequest certified;
  certified.check = CheckMethod::certified;
  const RerunReport c = analyze_rerun(m, attention_skip, small_input(), certified, rr, &lm);
  REQUIRE_FALSE(c.lengths[1].distance_each.empty());
  REQUIRE(c.lengths[1].distance_each.front().enclosure);
  REQUIRE_FALSE(c.lengths[1].agree_most.empty());
  require_round_trip(c, report);
}

TEST_CASE("bytes: BigReal keeps its precision, sign and every bit", "[serialize][bytes]") {
  std::vector<BigReal> xs;
  for (const long bits : {300L, 1L, 2L, 53L, 65L, 257L, 4098L, 32772L}) {
    BigReal third = at_precision(bits), minus_seventh = at_precision(bits), tiny = at_precision(bits),
            huge = at_precision(bits);
    mpfr_set_ui(third.backend().data(), 1, MPFR_RNDN);
    mpfr_div_ui(third.backend().data(), third.backend().data(), 3, MPFR_RNDN);
    mpfr_set_si(minus_seventh.backend().data(), -1, MPFR_RNDN);
    mpfr_div_ui(minus_seventh.backend().data(), minus_seventh.backend().data(), 7, MPFR_RNDN);
    mpfr_mul_2si(tiny.backend().data(), third.backend().data(), -1000003, MPFR_RNDN);
    mpfr_set_ui(huge.backend().data(), 7, MPFR_RNDN);
    mpfr_pow_ui(huge.backend().data(), huge.backend().data(), 100001, MPFR_RNDN);
    xs.push_back(third);
    xs.push_back(minus_seventh);
    xs.push_back(tiny);
    xs.push_back(huge);
  }
  for (const long bits : {300L, 53L}) {
    BigReal zero = at_precision(bits), minus_zero = at_precision(bits), nan = at_precision(bits),
            inf = at_precision(bits), minus_inf = at_precision(bits);
    mpfr_set_zero(zero.backend().data(), +1);
    mpfr_set_zero(minus_zero.backend().data(), -1);
    mpfr_set_nan(nan.backend().data());
    mpfr_set_inf(inf.backend().data(), +1);
    mpfr_set_inf(minus_inf.backend().data(), -1);
    for (const BigReal* x : {&zero, &minus_zero, &nan, &inf, &minus_inf}) xs.push_back(*x);
  }
  xs.push_back(BigReal(0.1, 17));  // a double as to_big makes it
  xs.push_back(BigReal());         // default precision, 0
  for (const BigReal& x : xs) {
    CAPTURE(mpfr_get_prec(x.backend().data()), to_sci(x));
    const BigReal back = through_bytes(x);
    CHECK(identical(back, x));
    CHECK(mpfr_get_prec(back.backend().data()) == mpfr_get_prec(x.backend().data()));
  }
  // Inside containers, and read into a value of another precision.
  const std::vector<std::optional<BigReal>> v = {xs[0], std::nullopt, xs[1]};
  const auto w = through_bytes(v);
  REQUIRE(w.size() == 3);
  CHECK(identical(*w[0], *v[0]));
  CHECK_FALSE(w[1]);
  CHECK(identical(*w[2], *v[2]));
}

TEST_CASE("bytes: a value beyond the reader's exponent range widens it", "[serialize][bytes]") {
  // Made where the centred pass makes such values (the largest range), read on a thread with the default one.
  std::string bytes;
  std::thread([&] {
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    BigReal x = at_precision(300);
    mpfr_set_ui_2exp(x.backend().data(), 3, -(mpfr_exp_t{1} << 40), MPFR_RNDN);
    ByteWriter w;
    w(x);
    bytes = w.bytes();
  }).join();
  bool equal = false, default_range_before = false;
  std::thread([&] {
    default_range_before = mpfr_get_emin() > -(mpfr_exp_t{1} << 40);
    ByteReader r(bytes);
    BigReal back;
    r(back);
    r.finish();
    BigReal x = at_precision(300);
    mpfr_set_ui_2exp(x.backend().data(), 3, -(mpfr_exp_t{1} << 40), MPFR_RNDN);
    equal = identical(back, x) && mpfr_get_exp(back.backend().data()) == -(mpfr_exp_t{1} << 40) + 2;
  }).join();
  CHECK(default_range_before);
  CHECK(equal);
}

TEST_CASE("bytes: a fixed tier reads back only into the same tier", "[serialize][bytes]") {
  mpfr_real<77> x = mpfr_real<77>(1) / 3;
  CHECK(through_bytes(x) == x);
  ByteWriter w;
  w(x);
  ByteReader r(w.bytes());
  mpfr_real<38> y;
  CHECK_THROWS_AS(r(y), std::runtime_error);
  // LogReal: its log2 at 4098 bits, zero (log2 = −inf) included, in a hand-made BoundsAnalysis.
  BoundsAnalysis a;
  a.report.sqrt_a_r0 = LogReal::from_value(BigReal("1e-300000", 40));
  a.report.beta = {BigReal(2), BigReal(-0.0)};
  a.report.lambda = {std::nullopt, BigReal(3)};
  DepthComparison d;
  d.cubic_constant = LogReal::zero();
  d.bound = BoundEnclosure{LogReal::one(), LogReal::zero(), LogReal::from_value(BigReal(5))};
  a.report.depths.push_back(d);
  const std::string bytes = to_bytes(a);
  BoundsAnalysis back;
  from_bytes(bytes, back);
  CHECK(*back.report.sqrt_a_r0 == *a.report.sqrt_a_r0);
  CHECK(back.report.depths[0].cubic_constant->is_zero());
  CHECK(back.report.depths[0].bound->upper == d.bound->upper);
  CHECK(to_bytes(back) == bytes);
}

TEST_CASE("bytes: doubles bit for bit, integers and flags checked", "[serialize][bytes]") {
  const std::vector<double> xs = {0.0,
                                  -0.0,
                                  std::numeric_limits<double>::denorm_min(),
                                  -3 * std::numeric_limits<double>::denorm_min(),
                                  std::numeric_limits<double>::min(),
                                  std::numeric_limits<double>::max(),
                                  std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(),
                                  double_of(0x7ff8000000000123ULL),  // quiet NaN with a payload
                                  double_of(0xfff8000000000000ULL),  // negative NaN
                                  1.0 / 3};
  for (const double x : xs) {
    CAPTURE(bits_of(x));
    CHECK(bits_of(through_bytes(x)) == bits_of(x));
  }
  // Integers, enums, strings, maps.
  const std::map<std::string, std::pair<long, Verdict>> m = {{"a", {-5, Verdict::violated}}, {"", {1L << 40, Verdict::holds}}};
  CHECK(through_bytes(m) == m);
  // A value outside the type read: a 64-bit value into an int, 2 into a bool.
  ByteWriter w;
  w(std::int64_t{1} << 40, std::uint64_t{2});
  ByteReader r(w.bytes());
  int i = 0;
  CHECK_THROWS_AS(r(i), std::runtime_error);
  bool b = false;
  CHECK_THROWS_AS(r(b), std::runtime_error);
  // A length beyond the bytes left.
  ByteWriter big;
  big(std::uint64_t{1000});
  ByteReader rs(big.bytes());
  std::string s;
  CHECK_THROWS_AS(rs(s), std::runtime_error);
  // A precision of 0 bits.
  ByteWriter zero;
  zero(std::uint64_t{0}, std::uint64_t{0});
  ByteReader rz(zero.bytes());
  BigReal z;
  CHECK_THROWS_AS(rz(z), std::runtime_error);
}

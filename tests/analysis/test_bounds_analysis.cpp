// analyze_bounds (measured residuals against the bounds of math.md §5), its
// reports, and the counterexample search.
#include "support/helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/analysis/bounds.hpp"
#include "sanpath/analysis/search.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/report/format.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/model/random.hpp"

#include <nlohmann/json.hpp>

#include <regex>
#include <string>
#include <vector>

using namespace sanpath;

namespace {

/// A random pure SAN with small weights (std 0.3: a ≈ 14, r* ≈ 0.27), so that
/// the bound is not vacuous for an input residual of 0.05.
Model small_san(int layers = 4, int heads = 2, bool shared = false, std::uint64_t seed = 1) {
  RandomModelSpec s;
  s.arch.layers = layers;
  s.arch.heads = heads;
  s.arch.d_model = 8;
  s.arch.d_qk = 4;
  s.arch.d_v = 4;
  s.arch.d_ff = 0;
  s.arch.variant = Variant::san();
  s.arch.shared_layers = shared;
  s.std = 0.3;
  s.seed = seed;
  return random_model(s);
}

InputSpec small_input(double residual = 0.05, int n = 6) {
  RandomInputSpec r;
  r.n = n;
  r.seed = 1;
  r.residual = residual;
  return InputSpec::from_random(r);
}

BoundsRequest auto_request() { return BoundsRequest{}; }

LogReal log_of(const BigReal& x) { return LogReal::from_value(x); }

/// A number string of the reports: a decimal in scientific or fixed form.
bool is_number_text(const std::string& s) {
  static const std::regex re(R"(-?[0-9]+(\.[0-9]+)?(e-?[0-9]+)?)");
  return std::regex_match(s, re);
}

}  // namespace

TEST_CASE("analyze_bounds: a random SAN at auto precision holds at every depth", "[bounds_analysis]") {
  const Model m = small_san();
  const BoundsAnalysis a = analyze_bounds(m, Variant::san(), small_input(), auto_request());
  const int L = m.arch().layers;
  REQUIRE(a.applicable());
  CHECK(a.report.theorem.theorem == Theorem::thm_2_3);
  CHECK(a.report.gamma == 1);
  REQUIRE_FALSE(a.report.vacuous);
  REQUIRE(a.report.a);
  REQUIRE(a.measured.depths.size() == static_cast<std::size_t>(L + 1));
  REQUIRE(a.report.depths.size() == static_cast<std::size_t>(L));
  REQUIRE(a.check());
  CHECK(a.check()->bits > a.precision().bits);
  CHECK(a.measured.upper_bound_only.empty());
  for (const DepthComparison& d : a.report.depths) {
    CAPTURE(d.layer);
    REQUIRE(d.bound);
    REQUIRE(d.layerwise_bound);
    CHECK(d.verdict == Verdict::holds);
    CHECK(d.layerwise_verdict == Verdict::holds);
    // measured ≤ bound, checked here in log form independently of decide().
    CHECK(log_of(d.measured.upper) <= d.bound->lower);
    CHECK(d.layerwise_bound->value <= d.bound->value);  // layerwise is the tighter form
    REQUIRE(d.slack_log10);
    CHECK(*d.slack_log10 > 0);
    REQUIRE(d.cubic_constant);
    REQUIRE(d.a_layer);
    // The theorem's own step: r_l ≤ a_l r_{l−1}^3, so â_l ≤ a_l.
    CHECK(*d.cubic_constant <= log_of(*d.a_layer));
    REQUIRE(d.order);
  }
  // Every measured depth is confirmed with digits, and the enclosure
  // contains both ends of the optimal-centre enclosure.
  for (const MeasuredDepth& md : a.measured.depths) {
    CAPTURE(md.layer);
    REQUIRE(md.digits);
    CHECK(*md.digits >= 3);
    CHECK_FALSE(md.enclosure.below_resolution);
    CHECK(md.enclosure.lower <= md.lower.value);
    CHECK(md.enclosure.upper >= md.upper.value);
    CHECK(md.lower.value <= md.upper.value);
  }
  // Notes: theorem with gamma, contraction, verdict summary, precision.
  CHECK(a.report.contraction == Contraction::contracting);
  const std::vector<std::string> notes = bounds_notes(a);
  REQUIRE(notes.size() >= 3);
  CHECK(notes[0].find("gamma = 1") != std::string::npos);
  CHECK(notes[1].find("< 1") != std::string::npos);
}

TEST_CASE("analyze_bounds: the measured enclosure contains an independent evaluation", "[bounds_analysis]") {
  // The forward pass and the optimal-centre enclosure at 4098 bits, run here
  // directly: its upper end must lie inside the widened enclosure that the
  // verdicts use (which came from lower precisions), its lower end above the
  // enclosure's lower end.
  const Model m = small_san(3, 2);
  const InputSpec in = small_input();
  const BoundsAnalysis a = analyze_bounds(m, Variant::san(), in, auto_request());
  using Hi = mpfr_real<1233>;
  ForwardOptions opt;
  opt.record_attention = false;
  const ForwardTrace<Hi> t = forward<Hi>(m, Variant::san(), make_input<Hi>(m, in), opt);
  for (int l = 0; l <= 3; ++l) {
    CAPTURE(l);
    const OptimalResidual<Hi> o = optimal_residual<Hi>(t.X[static_cast<std::size_t>(l)]);
    const MeasuredResidual& e = a.measured.depths[static_cast<std::size_t>(l)].enclosure;
    CHECK(e.lower <= to_big(o.composite.upper));
    CHECK(to_big(o.composite.lower) <= e.upper);
  }
}

TEST_CASE("analyze_bounds: gamma scales a and is printed", "[bounds_analysis]") {
  const Model m = small_san(2, 2);
  BoundsRequest r;
  const BoundsAnalysis one = analyze_bounds(m, Variant::san(), small_input(), r);
  r.gamma = BoundsRequest::parse_gamma("0.5");
  const BoundsAnalysis half = analyze_bounds(m, Variant::san(), small_input(), r);
  REQUIRE(one.report.a);
  REQUIRE(half.report.a);
  // a is linear in gamma; 0.5 is exact, so a/2 matches to the 1025-bit rounding.
  const BigReal ratio = *one.report.a / *half.report.a;
  CHECK(abs(ratio - 2) < BigReal(1e-300));
  CHECK(gamma_string(half.report.gamma) == "0.5");
  CHECK(bounds_notes(half)[0].find("gamma = 0.5") != std::string::npos);
  const std::string json = format_bounds(half, m, {"m", "x"}, Format::json);
  CHECK(nlohmann::json::parse(json)["gamma"] == "0.5");
  const std::string table = format_bounds(half, m, {"m", "x"}, Format::table);
  CHECK(table.find("gamma = 0.5") != std::string::npos);
}

TEST_CASE("parse_gamma and gamma_string", "[bounds_analysis]") {
  CHECK(gamma_string(BoundsRequest::parse_gamma("1")) == "1");
  CHECK(gamma_string(BoundsRequest::parse_gamma("2.25")) == "2.25");
  CHECK(gamma_string(BoundsRequest::parse_gamma("0.1")) == "0.1");
  CHECK(gamma_string(BoundsRequest::parse_gamma("2.5e-7")) == "2.5e-7");
  CHECK(gamma_string(BoundsRequest::parse_gamma("1e400")) == "1e400");
  for (const char* bad : {"", " ", "0", "-1", "abc", "1x", "nan", "inf", "-inf", "0e5"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(BoundsRequest::parse_gamma(bad), std::invalid_argument);
  }
}

TEST_CASE("analyze_bounds: skip on — not applicable, residuals with and without skip", "[bounds_analysis]") {
  const Model m = small_san(3, 2);
  Variant skip = Variant::san();
  skip.skip = true;
  const BoundsAnalysis a = analyze_bounds(m, skip, small_input(), auto_request());
  CHECK_FALSE(a.applicable());
  CHECK(a.report.theorem.theorem == Theorem::none);
  CHECK_FALSE(a.report.a);
  CHECK(a.report.theorem.reason.find("Claim 3.1") != std::string::npos);
  REQUIRE(a.without_skip);
  CHECK_FALSE(a.without_skip->variant.skip);
  REQUIRE(a.without_skip->depths.size() == a.measured.depths.size());
  // Same input: r_0 agrees; without skip the residual collapses, with skip it does not.
  // (measured at different precisions: equal to the coarser one's digits)
  const BigReal r0_with = a.measured.depths[0].upper.value, r0_without = a.without_skip->depths[0].upper.value;
  CHECK(abs(r0_with - r0_without) <= r0_with * BigReal(1e-30));
  CHECK(a.without_skip->depths[3].upper.value < a.measured.depths[3].upper.value * BigReal(1e-10));
  for (const DepthComparison& d : a.report.depths) {
    CHECK(d.verdict == Verdict::not_applicable);
    CHECK_FALSE(d.bound);
  }
  bool side_by_side = false;
  for (const std::string& n : bounds_notes(a)) side_by_side = side_by_side || n.find("skip off") != std::string::npos;
  CHECK(side_by_side);
  const nlohmann::json j = nlohmann::json::parse(format_bounds(a, m, {"m", "x"}, Format::json));
  CHECK(j["theorem"] == "none");
  CHECK(j["applicable"] == false);
  CHECK(j["not_applicable"].get<std::string>().find("Claim 3.1") != std::string::npos);
  CHECK(j["a"].is_null());
  REQUIRE(j["without_skip"].is_object());
  CHECK(j["without_skip"]["depths"].size() == 4);
  const std::string t = format_bounds(a, m, {"m", "x"}, Format::table);
  CHECK(t.find("NOT APPLICABLE") != std::string::npos);
  CHECK(t.find("r_l without skip") != std::string::npos);
}

TEST_CASE("analyze_bounds: LayerNorm and residual MLP are not covered", "[bounds_analysis]") {
  RandomModelSpec s;
  s.arch = {2, 2, 8, 4, 4, 16, Variant{}, Activation::gelu, 1e-12, false};
  s.arch.variant = {true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  s.std = 0.3;
  const Model m = random_model(s);
  const BoundsAnalysis ln = analyze_bounds(m, {false, MlpKind::none, LayerNormKind::post, MaskKind::none},
                                           small_input(), auto_request());
  CHECK_FALSE(ln.applicable());
  CHECK(ln.report.theorem.reason.find("LayerNorm") != std::string::npos);
  CHECK_FALSE(ln.without_skip);
  const BoundsAnalysis res = analyze_bounds(m, {false, MlpKind::residual, LayerNormKind::none, MaskKind::none},
                                            small_input(), auto_request());
  CHECK_FALSE(res.applicable());
  CHECK(res.report.theorem.reason.find("mlp residual") != std::string::npos);
  // Corollary 3.2 (plain MLP) does apply, with lambda.
  const BoundsAnalysis plain = analyze_bounds(m, {false, MlpKind::plain, LayerNormKind::none, MaskKind::none},
                                              small_input(), auto_request());
  CHECK(plain.applicable());
  CHECK(plain.report.theorem.theorem == Theorem::cor_3_2);
  for (const auto& l : plain.report.lambda) CHECK(l);
}

TEST_CASE("analyze_bounds: an explicit theorem that does not fit throws before any work", "[bounds_analysis]") {
  const Model m = small_san(2, 2);
  BoundsRequest r;
  r.theorem = Theorem::thm_2_2;
  try {
    (void)analyze_bounds(m, Variant::san(), small_input(), r);
    FAIL("Theorem 2.2 with H = 2 did not throw");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("single head") != std::string::npos);
  }
  r.theorem = Theorem::thm_2_3;
  Variant skip = Variant::san();
  skip.skip = true;
  CHECK_THROWS_AS(analyze_bounds(m, skip, small_input(), r), std::invalid_argument);
  r.theorem = Theorem::automatic;
  r.gamma = BigReal(0);
  CHECK_THROWS_AS(analyze_bounds(m, Variant::san(), small_input(), r), std::invalid_argument);
}

TEST_CASE("analyze_bounds: residuals below resolution are upper bounds and the verdict says so",
          "[bounds_analysis]") {
  // 128 bits resolve relative residuals down to ~1e-20 here; depth 3 of this
  // SAN is ~1e-66 and depth 4 ~1e-199.
  const Model m = small_san(4, 2);
  for (bool confirm : {true, false}) {
    CAPTURE(confirm);
    BoundsRequest r;
    r.precision.automatic = false;
    r.precision.fixed = Precision::at_least(128);
    r.precision.confirm = confirm;
    const BoundsAnalysis a = analyze_bounds(m, Variant::san(), small_input(), r);
    REQUIRE_FALSE(a.measured.upper_bound_only.empty());
    CHECK(a.measured.upper_bound_only.back() == 4);
    for (int l : a.measured.upper_bound_only) {
      const MeasuredDepth& md = a.measured.depths[static_cast<std::size_t>(l)];
      CHECK(md.enclosure.below_resolution);
      CHECK(md.enclosure.lower == 0);
      CHECK(md.enclosure.upper > 0);
      const DepthComparison& d = a.report.depths[static_cast<std::size_t>(l - 1)];
      CHECK(d.measured.below_resolution);
      CHECK(d.verdict != Verdict::violated);
      CHECK_FALSE(d.cubic_constant);  // no point estimate from an upper bound
    }
    CHECK(residual_series_note(a.measured).find("upper bound") != std::string::npos);
    const std::string t = format_bounds(a, m, {"m", "x"}, Format::table);
    CHECK(t.find("< 1e-") != std::string::npos);
    CHECK(t.find("decided on that upper bound") != std::string::npos);
    const nlohmann::json j = nlohmann::json::parse(format_bounds(a, m, {"m", "x"}, Format::json));
    CHECK(j["depths"][3]["measured"]["below_resolution"] == true);
    CHECK(j["depths"][3]["verdict_on_upper_bound"] == true);
  }
}

TEST_CASE("analyze_bounds: at the top tier the check runs one tier below", "[bounds_analysis]") {
  const Model m = small_san(2, 1);
  BoundsRequest r;
  r.precision.automatic = false;
  r.precision.fixed = Precision::at_least(Precision::max_bits());
  const BoundsAnalysis a = analyze_bounds(m, Variant::san(), small_input(), r);
  CHECK(a.precision().is_top());
  REQUIRE(a.check());
  CHECK(a.check()->bits == Precision::tiers()[Precision::tiers().size() - 2]);
  for (const MeasuredDepth& md : a.measured.depths) {
    REQUIRE(md.digits);
    REQUIRE(md.upper.digits);
    CHECK(*md.upper.digits > 100);  // resolved values agree far beyond double
    // The lower end is math.md's sqrt(min‖·‖_1 · min‖·‖_∞) only as far as the
    // ∞-norm LP (solved in double) encloses min‖·‖_∞: about 15 digits.
    REQUIRE(md.lower.digits);
    CHECK(*md.lower.digits >= 12);
    CHECK(*md.digits == std::min(*md.upper.digits, *md.lower.digits));
  }
  CHECK(a.measured.checked_below());
  CHECK(residual_series_note(a.measured).find("tier below") != std::string::npos);
}

TEST_CASE("format_bounds: JSON has every field, values with their true exponents", "[bounds_analysis]") {
  const Model m = small_san(4, 2);
  const BoundsAnalysis a = analyze_bounds(m, Variant::san(), small_input(), auto_request());
  const nlohmann::json j = nlohmann::json::parse(format_bounds(a, m, {"model.safetensors", "random"}, Format::json));
  for (const char* key : {"model", "input", "variant", "gamma", "theorem", "applicable", "theorem_reason", "a",
                          "contraction_radius", "vacuous", "vacuity", "not_applicable", "beta", "lambda",
                          "precision_bits", "precision", "check_precision_bits", "tried_bits", "ceiling_reached",
                          "ceiling_bits", "upper_bound_only", "precision_note", "r0", "depths", "without_skip",
                          "notes"}) {
    CAPTURE(key);
    CHECK(j.contains(key));
  }
  CHECK(j["gamma"] == "1");
  CHECK(j["theorem"] == "2.3");
  CHECK(is_number_text(j["a"]));
  CHECK(is_number_text(j["contraction_radius"]));
  CHECK(j["beta"].size() == 4);
  CHECK(j["vacuity"].get<std::string>().find("< 1") != std::string::npos);
  REQUIRE(j["depths"].size() == 4);
  int l = 1;
  for (const auto& d : j["depths"]) {
    CAPTURE(l);
    CHECK(d["layer"] == l++);
    for (const char* key : {"bound", "log10_bound", "bound_lower", "bound_upper", "layerwise_bound",
                            "log10_layerwise_bound", "slack_log10", "cubic_constant", "a_layer", "order"}) {
      CAPTURE(key);
      REQUIRE(d[key].is_string());
      CHECK(is_number_text(d[key]));
    }
    CHECK(is_number_text(d["measured"]["lower"]));
    CHECK(is_number_text(d["measured"]["upper"]));
    CHECK(d["verdict"] == "HOLDS");
    CHECK(d["layerwise_verdict"] == "HOLDS");
  }
  // Depth 4's bound is ~1e-63 and its measurement ~1e-199: printed with the exponent.
  const std::string b4 = j["depths"][3]["bound"], m4 = j["depths"][3]["measured"]["upper"];
  CHECK(std::stol(b4.substr(b4.find('e') + 1)) < -50);
  CHECK(std::stol(m4.substr(m4.find('e') + 1)) < -150);
  const std::string csv = format_bounds(a, m, {"m", "x"}, Format::csv);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 6);  // header + depths 0..4
}

TEST_CASE("bounds search: deterministic for a seed, saved files re-check", "[bounds_analysis][search]") {
  BoundsSearchSpec s;
  s.layers = 2;
  s.heads = 1;
  s.d_model = 3;
  s.d_qk = 2;
  s.tokens = 3;
  s.seed = 5;
  s.iterations = 40;
  const BoundsSearchResult a = search_bounds(s);
  const BoundsSearchResult b = search_bounds(s);
  REQUIRE(a.model);
  REQUIRE(b.model);
  CHECK(a.log10_ratio == b.log10_ratio);
  CHECK(a.depth == b.depth);
  CHECK(a.X == b.X);
  CHECK(a.model->layer(1).heads[0].W_O == b.model->layer(1).heads[0].W_O);
  CHECK(a.evaluations == 40);
  CHECK_FALSE(a.improvements.empty());
  REQUIRE(a.recheck);
  // The search keeps improving: the objective never decreases.
  for (std::size_t i = 1; i < a.improvements.size(); ++i)
    CHECK(a.improvements[i].log10_ratio > a.improvements[i - 1].log10_ratio);

  BoundsSearchResult saved = a;
  const std::string path = test::tmp_path("bounds_search_best.safetensors");
  save_search_result(saved, path);
  CHECK(saved.input_path == test::tmp_path("bounds_search_best.input.safetensors"));
  const Model m = load_model(path);
  const SafetensorsFile f = SafetensorsFile::read(saved.input_path);
  const Tensor& x = f.at("X");
  REQUIRE(x.shape == std::vector<std::int64_t>{3, 3});
  MatrixXd X(3, 3);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) X(i, j) = x.values[static_cast<std::size_t>(i * 3 + j)];
  CHECK(X == a.X);
  const BoundsAnalysis re = analyze_bounds(m, m.arch().variant, InputSpec::from_matrix(X, "saved"), BoundsRequest{});
  REQUIRE(re.report.depths.size() == a.recheck->report.depths.size());
  for (std::size_t i = 0; i < re.report.depths.size(); ++i) {
    CHECK(re.report.depths[i].verdict == a.recheck->report.depths[i].verdict);
    CHECK(re.measured.depths[i + 1].upper.value == a.recheck->measured.depths[i + 1].upper.value);
  }
  const nlohmann::json j = nlohmann::json::parse(format_bounds_search(saved, Format::json));
  CHECK(j["saved"]["model"] == path);
  CHECK(j["recheck"]["depths"].size() == 2);
  CHECK(j["violated"] == a.violated);
}

TEST_CASE("bounds search: bad specs are rejected", "[bounds_analysis][search]") {
  BoundsSearchSpec s;
  s.heads = 2;
  s.theorem = Theorem::thm_2_2;
  CHECK_THROWS_AS(search_bounds(s), std::invalid_argument);
  s = BoundsSearchSpec{};
  s.tokens = 1;
  CHECK_THROWS_AS(search_bounds(s), std::invalid_argument);
  s = BoundsSearchSpec{};
  s.iterations = 0;
  CHECK_THROWS_AS(search_bounds(s), std::invalid_argument);
}

TEST_CASE("analyze_bounds: the BERT checkpoint's attention as a pure SAN", "[bounds_analysis][real]") {
  const std::string dir = test::real_models_dir();
  if (dir.empty()) return;  // the shared real checkpoints are optional
  const Model m = load_model(dir + "/bert-ticket-classifier");
  const Variant san = Variant::san();
  const BoundsAnalysis a = analyze_bounds(m, san, InputSpec::from_tokens({2, 15, 27, 3}), BoundsRequest{});
  REQUIRE(a.applicable());
  CHECK(a.report.theorem.theorem == Theorem::thm_2_3);
  REQUIRE(a.report.depths.size() == static_cast<std::size_t>(m.arch().layers));
  const nlohmann::json j = nlohmann::json::parse(format_bounds(a, m, {dir, "tokens"}, Format::json));
  for (const auto& d : j["depths"]) {
    CHECK(d["bound"].is_string());
    CHECK(d["measured"]["upper"].is_string());
    CHECK(d["verdict"] != "NOT_APPLICABLE");
    CHECK(d["verdict"] != "VIOLATED");
  }
  CHECK(j["beta"].size() == static_cast<std::size_t>(m.arch().layers));
}

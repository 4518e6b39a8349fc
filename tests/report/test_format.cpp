// The text, JSON and CSV formatters (report/format.hpp) on analyses built by
// hand: what they print is decided here, digit by digit, from the rules of
// core/quantity.hpp — at most the confirmed digits, never 0 for a nonzero
// value, a value below resolution only as "< 1e-N", every exponent as it is.
#include "support/helpers.hpp"

#include "sanpath/analysis/bounds.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/report/format.hpp"

#include <nlohmann/json.hpp>

using namespace sanpath;

namespace {

Model tiny_model() {
  RandomModelSpec s;
  s.arch.layers = 1;
  s.arch.heads = 2;
  s.arch.d_model = 4;
  s.arch.d_qk = 2;
  s.arch.d_v = 2;
  s.arch.variant = Variant::san();
  return random_model(s);
}

BigReal decimal(const char* text, long bits = 4000) {
  BigReal x(0, static_cast<unsigned>(decimal_digits(bits)));
  x = BigReal(text, static_cast<unsigned>(decimal_digits(bits)));
  return x;
}

/// A quantity confirmed to exactly `digits` digits: the check differs from
/// the value in the digit after the last confirmed one. Printed to at most
/// 17 digits, as if asked for 17 (--digits 17).
Quantity confirmed(const char* value, const char* check) {
  Quantity q = confirm(decimal(value), decimal(check), 257);
  q.asked = 17;
  return q;
}

ForwardAnalysis hand_made() {
  ForwardAnalysis a;
  a.variant = Variant::san();
  a.center = Center::mean;
  a.precision = Precision::at_least(257);
  a.check = a.precision.next();
  a.tried_bits = {257};
  LayerReport l0;
  l0.layer = 0;
  for (Quantity* q : {&l0.res_one, &l0.res_inf, &l0.res_composite, &l0.res_frobenius, &l0.norm_composite,
                      &l0.norm_frobenius, &l0.relative_residual})
    *q = confirmed("0.5", "0.5");
  l0.digits = l0.res_one.digits;
  LayerReport l1 = l0;
  l1.layer = 1;
  // 4 digits agree (1.23456789 against 1.23451), 5 for the composite residual
  l1.relative_residual = confirmed("1.23456789e-70000", "1.23451e-70000");
  l1.res_composite = confirmed("6.1728394e-70001", "6.17283e-70001");
  l1.res_frobenius = below_resolution(decimal("0"), decimal("7e-301"));
  l1.digits = 4;
  a.layers = {l0, l1};
  return a;
}

}  // namespace

TEST_CASE("quantities print their confirmed digits only", "[format]") {
  CHECK(confirmed("1.23456789e-70000", "1.23451e-70000").str() == "1.235e-70000");
  CHECK(confirmed("1.23456789e-70000", "1.23451e-70000").digits == 4);
  CHECK(confirmed("0.5", "0.5").shown() == "5.0000000000000000e-1");  // a table: the 17 asked
  CHECK(confirmed("0.5", "0.5").str() == "5." + std::string(76, '0') + "e-1");  // JSON: all 77 confirmed
  CHECK(confirmed("0.5", "0.5").digits == 77);  // 257 bits carry 77 digits
  // The bound printed is the next power of ten above the stated bound.
  CHECK(below_resolution(decimal("0"), decimal("7e-301")).str() == "< 1e-300");
  CHECK(below_resolution(decimal("0"), decimal("1.5e-300")).str() == "< 1e-299");
}

TEST_CASE("str() prints every confirmed digit, shown() min(confirmed, asked)", "[format]") {
  // 1/3 at 257 bits against its 513-bit value: 77 digits agree.
  const BigReal third = BigReal(1, 80) / BigReal(3, 80), third_check = BigReal(1, 160) / BigReal(3, 160);
  Quantity q = confirm(third, third_check, 257);
  REQUIRE(q.digits == 77);
  const std::string threes = "3.33333333333333333333333333333333333333333333333333333333333333333333333333333";
  CHECK(q.str() == threes.substr(0, 78) + "e-1");  // nothing asked: every confirmed digit
  CHECK(q.shown() == q.str());
  CHECK(q.shown_digits() == 77);
  q.asked = 30;
  CHECK(q.str() == threes.substr(0, 78) + "e-1");  // str(): what `digits` counts, whatever is asked
  CHECK(q.shown() == threes.substr(0, 31) + "e-1");
  CHECK(q.shown_digits() == 30);
  q.asked = 1;
  CHECK(q.shown() == "3e-1");
  CHECK(q.shown_digits() == 1);
  // Fewer confirmed than asked: the confirmed ones.
  Quantity four = confirm(decimal("1.23456789e-70000"), decimal("1.23451e-70000"), 257);
  four.asked = 30;
  CHECK(four.str() == "1.235e-70000");
  CHECK(four.shown() == "1.235e-70000");
  CHECK(four.shown_digits() == 4);
  // No check run: at most the 17 digits that hold a double, fewer when fewer are asked.
  Quantity u = Quantity::unconfirmed(third);
  CHECK(u.str() == threes.substr(0, 18) + "e-1");
  u.asked = 30;
  CHECK(u.str() == threes.substr(0, 18) + "e-1");
  u.asked = 5;
  CHECK(u.str() == "3.3333e-1");
  // Below resolution: the bound, whatever is asked.
  Quantity b = below_resolution(decimal("0"), decimal("7e-301"));
  b.asked = 30;
  CHECK(b.str() == "< 1e-300");
}

TEST_CASE("format_forward: table rows, JSON fields and CSV lines", "[format]") {
  const Model m = tiny_model();
  const ForwardAnalysis a = hand_made();
  const RunInfo info{"tiny.safetensors", "3 token ids"};

  const std::string table = format_forward(a, m, info, Format::table);
  CHECK_THAT(table, Catch::StartsWith("model: tiny.safetensors (L=1, H=2, d=4)\ninput: 3 token ids\n"
                                      "variant: skip=off mlp=none layernorm=none mask=none, centre: mean\n"));
  {
    // Grouped-query attention: the key/value heads are stated beside H.
    Architecture gqa = m.arch();
    gqa.kv_heads = 1;
    std::vector<LayerWeights> layers = m.layers();
    for (HeadWeights& h : layers[0].heads) {  // one key/value head, read by both query heads
      h.W_K = layers[0].heads[0].W_K;
      h.W_V = layers[0].heads[0].W_V;
      h.b_K = layers[0].heads[0].b_K;
      h.b_V = layers[0].heads[0].b_V;
    }
    const Model g(gqa, layers, std::nullopt, "g");
    CHECK_THAT(format_forward(a, g, info, Format::table),
               Catch::StartsWith("model: tiny.safetensors (L=1, H=2, H_kv=1, d=4)\n"));
  }
  // The digits column counts the digits printed: 17 of the 77 confirmed, said under the table.
  CHECK_THAT(table, Catch::Contains("\n0      5.0000000000000000e-1     5.0000000000000000e-1     "
                                    "5.0000000000000000e-1     17\n"));
  CHECK_THAT(table, Catch::Contains("\n1      1.235e-70000              6.1728e-70001             "
                                    "5.0000000000000000e-1     4\n"
                                    "digits: those printed, at most 17 (--digits); every confirmed digit in "
                                    "--format json\n"));

  const auto j = nlohmann::json::parse(format_forward(a, m, info, Format::json));
  CHECK(j.at("precision_bits") == 257);
  CHECK(j.at("check_precision_bits") == 513);
  CHECK(j.at("variant").at("skip") == "off");
  CHECK(j.at("layers").size() == 2);
  CHECK(j.at("layers")[1].at("relative_residual") == "1.235e-70000");
  CHECK(j.at("layers")[1].at("residual").at("frobenius") == "< 1e-300");
  CHECK(j.at("layers")[1].at("digits") == 4);
  CHECK(j.at("layers")[1].at("digits_by_quantity").at("relative_residual") == 4);
  CHECK(j.at("model").at("layers") == 1);

  // CSV, as JSON: every confirmed digit (77 of 0.5 at 257 bits), whatever was asked.
  CHECK(j.at("layers")[0].at("relative_residual") == "5." + std::string(76, '0') + "e-1");
  const std::string h = "5." + std::string(76, '0') + "e-1";
  const std::string csv = format_forward(a, m, info, Format::csv);
  CHECK(csv ==
        "layer,residual_composite,residual_one,residual_inf,residual_frobenius,norm_composite,norm_frobenius,"
        "relative_residual,digits\n"
        "0," + h + "," + h + "," + h + "," + h + "," + h + "," + h + "," + h + ",77\n"
        "1,6.1728e-70001," + h + "," + h + ",< 1e-300," + h + "," + h + ",1.235e-70000,4\n");
  CHECK(parse_format("csv") == Format::csv);
  CHECK_THROWS_AS(parse_format("xml"), std::invalid_argument);
}

// The precision line and notes are written by report/ from the analyses'
// Provenance and flags. Expected texts: the wording the analyses themselves
// wrote before sentences moved to report/ (docs/tour.md shows the same).
TEST_CASE("one provenance, the precision line of every check", "[format]") {
  const Model m = tiny_model();
  const RunInfo info{"tiny.safetensors", "3 token ids"};
  const auto line = [&](const ForwardAnalysis& a) {
    const std::string t = format_forward(a, m, info, Format::table);
    const std::size_t at = t.find("precision: ");
    return t.substr(at, t.find('\n', at) - at);
  };
  ForwardAnalysis a = hand_made();
  CHECK(line(a) == "precision: 257 bits (direct pass), digits confirmed by a run at 513 bits");

  a.precision = Precision::at_least(Precision::max_bits());  // the top tier: the tier below checks
  a.check = Precision::at_least(Precision::tiers()[Precision::tiers().size() - 2]);
  CHECK(a.checked_below());
  CHECK(line(a) == "precision: " + a.precision.name() + " (direct pass), digits confirmed against a run at " +
                       a.check->name() + " (no higher tier)");

  a.precision = Precision::double_precision();  // double confirmed by directed rounding
  a.check = a.precision;
  a.check_method = CheckMethod::rounding;
  CHECK_FALSE(a.checked_below());
  CHECK(line(a) == "precision: double (direct pass), digits confirmed by double runs rounded upward and downward "
                   "(margin 10x)");
  nlohmann::json j = nlohmann::json::parse(format_forward(a, m, info, Format::json));
  CHECK(j.at("precision_bits") == 53);
  CHECK(j.at("check_method") == "rounding");

  a.method = ForwardMethod::centred;  // auto escalated and stopped at its ceiling
  a.precision = Precision::at_least(513);
  a.check = a.precision.next();
  a.check_method = CheckMethod::mpfr;
  a.tried_bits = {257, 513};
  a.ceiling_reached = true;
  CHECK(line(a) == "precision: 513 bits (centred pass), digits confirmed by a run at 1025 bits; auto tried 257 513 "
                   "bits; CEILING REACHED: fewer digits than asked are confirmed");

  a.check.reset();
  a.ceiling_reached = false;
  a.tried_bits = {513};
  CHECK(line(a) == "precision: 513 bits (centred pass), no confirming run (digits unconfirmed)");
  j = nlohmann::json::parse(format_forward(a, m, info, Format::json));
  CHECK(j.at("method") == "centred");
  CHECK(j.at("check_precision_bits").is_null());
  CHECK(j.at("check_method").is_null());
}

TEST_CASE("bounds sentences are written from flags", "[format]") {
  ResidualSeries s;
  s.precision = Precision::at_least(257);
  s.check = s.precision.next();
  s.tried_bits = {128, 257};
  s.upper_bound_only = {3, 4};
  s.ceiling_reached = true;
  s.ceiling_bits = 257;
  CHECK(residual_series_note(s) ==
        "measured with the direct forward pass at 257 bits, confirmed by a run at 513 bits (auto tried 128, 257 "
        "bits). Depths 3, 4 are below what 257 bits resolves: the measured value is an upper bound (< 1e-N) and the "
        "verdict is decided on that upper bound. The auto precision ceiling of 257 bits was reached (the top tier, " +
            std::to_string(Precision::max_bits()) + " bits, confirms it): no higher precision is available to "
                                                     "resolve the rest.");
  s.check.reset();
  s.tried_bits = {257};
  s.upper_bound_only = {};
  s.ceiling_reached = false;
  CHECK(residual_series_note(s) ==
        "measured with the direct forward pass at 257 bits, no confirming run: resolution is judged from the "
        "rounding floor, a heuristic (digits and verdicts are not confirmed).");

  BoundsReport r;
  r.theorem.applicable = true;
  r.contraction = Contraction::a_zero;
  CHECK(contraction_sentence(r) == "a = 0 (beta = 0 or lambda = 0): the bound is 0 at every depth >= 1.");
  r.contraction = Contraction::r0_zero;
  CHECK(contraction_sentence(r) == "r_0 = 0: the bound is 0 at every depth.");
  r.theorem.applicable = false;
  r.theorem.reason = "not applicable: skip connections (Claim 3.1).";
  r.contraction = Contraction::not_applicable;
  CHECK(contraction_sentence(r) == r.theorem.reason);
}

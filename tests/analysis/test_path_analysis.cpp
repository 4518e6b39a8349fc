// Path decomposition reports (path_analysis.hpp) and their formatting:
// counts against the closed form C(L,k)·H^k, length sums and path terms
// against a brute-force evaluation of the definitions of math.md §4 written
// here with plain Eigen doubles (no paths.hpp), confirmed digits against an
// independent run at much higher precision, top-K confirmation by head
// sequence, refusals, and the JSON of the reports.
#include "support/helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/path_graph.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/report/format.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/model/random.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

using namespace sanpath;
using nlohmann::json;

namespace {

/// A random attention-only model, weights large enough that attention is
/// far from uniform, biases nonzero (so the bias term matters).
Model small_model(bool skip, int L = 3, int H = 2, std::uint64_t seed = 3) {
  RandomModelSpec s;
  s.arch = {
      L,     H,    8, 4, 4, 0, Variant{skip, MlpKind::none, LayerNormKind::none, MaskKind::none}, Activation::gelu,
      1e-12, false};
  s.std = 0.4;
  s.bias_std = 0.2;
  s.seed = seed;
  return random_model(s);
}

InputSpec small_input(int n = 5, std::uint64_t seed = 7) {
  RandomInputSpec r;
  r.n = n;
  r.seed = seed;
  return InputSpec::from_random(r);
}

// ---- brute force in double, from the definitions (math.md §3, §4) ----

double composite(const MatrixXd& M) {
  const double one = M.cwiseAbs().colwise().sum().maxCoeff();
  const double inf = M.cwiseAbs().rowwise().sum().maxCoeff();
  return std::sqrt(one * inf);
}

MatrixXd mean_residual(const MatrixXd& M) { return M.rowwise() - M.colwise().mean(); }

struct BrutePath {
  std::vector<int> heads;
  int length = 0;
  double frobenius = 0, composite = 0, residual = 0, stochastic = 0;
};

struct Brute {
  std::vector<BrutePath> paths;  ///< lexicographic order, -1 (skip) first
  std::vector<MatrixXd> sums;    ///< by length
  MatrixXd reconstruction, output;
};

/// Every path term P_path X W_path of an attention-only model, in double,
/// with the attention matrices of a double forward pass.
Brute brute_force(const Model& m, const Variant& v, const InputSpec& in) {
  const int L = m.arch().layers, H = m.arch().heads;
  const MatrixXd X0 = make_input<double>(m, in);
  const ForwardTrace<double> t = forward<double>(m, v, X0);
  const Eigen::Index n = X0.rows(), d = X0.cols();
  Brute b;
  b.sums.assign(static_cast<std::size_t>(L) + 1, MatrixXd::Zero(n, d));
  std::vector<int> heads(static_cast<std::size_t>(L), v.skip ? -1 : 0);
  for (;;) {
    MatrixXd T = X0, P = MatrixXd::Identity(n, n);
    int len = 0;
    for (int l = 0; l < L; ++l) {
      const int h = heads[static_cast<std::size_t>(l)];
      if (h < 0) continue;
      const HeadWeights& w = m.layer(l).heads[static_cast<std::size_t>(h)];
      const MatrixXd& Pl = t.P[static_cast<std::size_t>(l)][static_cast<std::size_t>(h)];
      T = Pl * T * (w.W_V * w.W_O);
      P = Pl * P;
      ++len;
    }
    b.paths.push_back({heads, len, T.norm(), composite(T), composite(mean_residual(T)), composite(mean_residual(P))});
    b.sums[static_cast<std::size_t>(len)] += T;
    // Next head sequence (odometer, last layer fastest).
    int l = L - 1;
    while (l >= 0 && heads[static_cast<std::size_t>(l)] == H - 1)
      heads[static_cast<std::size_t>(l--)] = v.skip ? -1 : 0;
    if (l < 0) break;
    ++heads[static_cast<std::size_t>(l)];
  }
  // Bias: b^l = b^{l-1} S^l + c_l as a row, S^l = [skip] I + Σ_h W_h.
  RowVector<double> bias = RowVector<double>::Zero(d);
  for (int l = 0; l < L; ++l) {
    MatrixXd S = MatrixXd::Zero(d, d);
    if (v.skip) S.setIdentity();
    RowVector<double> c = m.layer(l).b_O.transpose();
    for (const HeadWeights& w : m.layer(l).heads) {
      S += w.W_V * w.W_O;
      c += w.b_V.transpose() * w.W_O;
    }
    bias = bias * S + c;
  }
  b.reconstruction = MatrixXd::Zero(n, d);
  for (const MatrixXd& s : b.sums) b.reconstruction += s;
  b.reconstruction.rowwise() += bias;
  b.output = t.X.back();
  return b;
}

PathCount binomial_times_power(int L, int k, int H) {
  PathCount c = 1;
  for (int i = 1; i <= k; ++i) c = c * (L - k + i) / i;  // C(L,k), exact at every step
  for (int i = 0; i < k; ++i) c *= H;
  return c;
}

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }

double as_double(const Quantity& q) { return q.value.convert_to<double>(); }

/// The number in a Quantity string: "3.1e-7" or the bound of "< 1e-75".
BigReal parse_number(const std::string& s) {
  const std::string t = s.rfind("< ", 0) == 0 ? s.substr(2) : s;
  return BigReal(t.c_str());
}

RunInfo info() { return {"test model", "random"}; }

}  // namespace

TEST_CASE("the brute force itself reconstructs the forward output (Theorem 2.1 in plain double)", "[path_analysis]") {
  for (bool skip : {false, true}) {
    const Model m = small_model(skip);
    const Brute b = brute_force(m, m.arch().variant, small_input());
    CAPTURE(skip);
    REQUIRE(b.paths.size() == (skip ? 27U : 8U));
    const double err = (b.reconstruction - b.output).cwiseAbs().maxCoeff() / b.output.cwiseAbs().maxCoeff();
    CHECK(err < 1e-13);
  }
}

TEST_CASE("length sums: counts are C(L,k)·H^k and the sums are the brute-force sums", "[path_analysis]") {
  for (bool skip : {false, true}) {
    CAPTURE(skip);
    const Model m = small_model(skip);
    const Variant v = m.arch().variant;
    const InputSpec in = small_input();
    const Brute b = brute_force(m, v, in);
    const LengthSumsReport r = analyze_length_sums(m, v, in, PrecisionRequest::parse("double"));
    REQUIRE(r.lengths.size() == 4);
    REQUIRE(r.precision.native_double);
    REQUIRE(r.check);
    CHECK(r.check->bits == 128);
    const double out_f = b.output.norm();
    CHECK(rel(as_double(r.output_frobenius), out_f) < 1e-13);
    for (int k = 0; k <= 3; ++k) {
      CAPTURE(k);
      const LengthSumEntry& e = r.lengths[static_cast<std::size_t>(k)];
      CHECK(e.length == k);
      const PathCount expected = skip ? binomial_times_power(3, k, 2) : PathCount(k == 3 ? 8 : 0);
      CHECK(e.count == expected.str());
      const MatrixXd& S = b.sums[static_cast<std::size_t>(k)];
      if (expected == 0) {
        CHECK(e.frobenius.value == 0);
        CHECK(e.frobenius.str() == "0");
        continue;
      }
      CHECK(rel(as_double(e.frobenius), S.norm()) < 1e-12);
      CHECK(rel(as_double(e.residual), composite(mean_residual(S))) < 1e-12);
      CHECK(rel(as_double(e.share), S.norm() / out_f) < 1e-12);
      // Double against the 128-bit check: most of double's 15 digits agree.
      REQUIRE(e.digits);
      CHECK(*e.digits >= 12);
    }
    CHECK(r.total_count == (skip ? "27" : "8"));
    CHECK(as_double(r.decomposition_error) < 1e-13);
    CHECK(decomposition_holds(r.decomposition_error, r.precision));
  }
}

TEST_CASE("length sums JSON: the issue's fields, exact counts C(L,k)·H^k beyond 64 bits", "[path_analysis]") {
  // L = 24, H = 12 with skip: 13^24 > 2^64 paths; sums need no enumeration.
  const Model m = small_model(true, 24, 12, 5);
  const LengthSumsReport r =
      analyze_length_sums(m, m.arch().variant, small_input(3), PrecisionRequest::parse("double"));
  const json j = json::parse(format_length_sums(r, m, info(), Format::json));
  REQUIRE(j.at("length_sums").size() == 25);
  PathCount total = 0;
  for (int k = 0; k <= 24; ++k) {
    CAPTURE(k);
    const json& e = j.at("length_sums").at(static_cast<std::size_t>(k));
    CHECK(e.at("length").get<int>() == k);
    CHECK(e.at("count").get<std::string>() == binomial_times_power(24, k, 12).str());
    total += binomial_times_power(24, k, 12);
    // Every number is a decimal string, never 0 or inf for these nonzero sums.
    for (const std::string& s :
         {e.at("norm").at("frobenius").get<std::string>(), e.at("residual").at("composite").get<std::string>(),
          e.at("share").get<std::string>()}) {
      CHECK(s != "0");
      CHECK(s.find("inf") == std::string::npos);
      CHECK(parse_number(s) > 0);
    }
  }
  PathCount p13 = 1;
  for (int i = 0; i < 24; ++i) p13 *= 13;
  CHECK(total == p13);
  CHECK(j.at("total_paths").get<std::string>() == p13.str());
  CHECK(j.at("decomposition_error").is_string());
  CHECK(j.at("precision_bits").get<long>() == 53);
  CHECK(j.at("check_precision_bits").get<long>() == 128);
}

TEST_CASE("decomposition error at 257 bits is below 2^-240", "[path_analysis]") {
  const BigReal limit = pow(BigReal(2), -240);
  for (bool skip : {false, true}) {
    CAPTURE(skip);
    const Model m = small_model(skip, 4, 3, 9);
    const LengthSumsReport r = analyze_length_sums(m, m.arch().variant, small_input(), PrecisionRequest::parse("257"));
    REQUIRE(r.precision.bits == 257);
    REQUIRE(r.check);
    CHECK(r.check->bits == 513);
    CAPTURE(r.decomposition_error.str());
    CHECK(abs(r.decomposition_error.value) < limit);
    CHECK(parse_number(r.decomposition_error.str()) < limit);
    CHECK(decomposition_holds(r.decomposition_error, r.precision));
    // Enumerating all paths gives the same verdict.
    const PathEnumerationReport e =
        analyze_enumeration(m, m.arch().variant, small_input(), PrecisionRequest::parse("257"), {});
    REQUIRE(e.decomposition_error);
    CHECK(abs(e.decomposition_error->value) < limit);
  }
}

TEST_CASE("decomposition_holds separates rounding from a wrong reconstruction", "[path_analysis]") {
  const Precision d = Precision::double_precision();
  CHECK(decomposition_holds(Quantity::unconfirmed(BigReal(1e-15)), d));
  CHECK_FALSE(decomposition_holds(Quantity::unconfirmed(BigReal(1e-3)), d));
  const Precision p = Precision::at_least(257);
  CHECK(decomposition_holds(Quantity::unconfirmed(pow(BigReal(2), -200)), p));
  CHECK_FALSE(decomposition_holds(Quantity::unconfirmed(BigReal(1e-30)), p));
}

TEST_CASE("auto precision: at least 17 confirmed digits on a well-conditioned case, and they are right",
          "[path_analysis]") {
  const Model m = small_model(true);
  const InputSpec in = small_input();
  const LengthSumsReport r = analyze_length_sums(m, m.arch().variant, in, PrecisionRequest{});
  REQUIRE(r.precision.bits >= 128);
  REQUIRE(r.check);
  // An independent reference at 1025 bits, no auto logic, no confirmation.
  using R = mpfr_real<308>;
  const ForwardTrace<R> t = forward<R>(m, m.arch().variant, make_input<R>(m, in));
  const LengthSums<R> ref = length_sums<R>(m, t);
  for (const LengthSumEntry& e : r.lengths) {
    CAPTURE(e.length, e.frobenius.str(), e.share.str());
    REQUIRE(e.digits);
    CHECK(*e.digits >= 17);
    const LengthSum<R>& s = ref.terms[static_cast<std::size_t>(e.length)];
    CHECK(agreeing_digits(e.frobenius.value, to_big(s.frobenius), 10000) >= *e.frobenius.digits);
    CHECK(agreeing_digits(e.residual.value, to_big(s.residual_composite), 10000) >= *e.residual.digits);
    CHECK(agreeing_digits(e.share.value, to_big(s.share), 10000) >= *e.share.digits);
  }
}

TEST_CASE("choose_precision is analyze_forward's choice", "[path_analysis]") {
  RandomModelSpec s;
  s.arch = {4, 4, 32, 8, 8, 0, Variant::san(), Activation::gelu, 1e-12, false};
  s.std = 0.02;
  s.seed = 4;
  const Model m = random_model(s);
  const InputSpec in = small_input(8, 5);
  PrecisionRequest req;  // auto, on the direct pass: the ladder analyze_forward climbs
  req.method = ForwardMethod::direct;
  const ForwardAnalysis a = analyze_forward(m, Variant::san(), in, req);
  const PrecisionChoice c = choose_precision(m, Variant::san(), in, req);
  CHECK(c.precision == a.precision);
  CHECK(c.tried_bits == a.tried_bits);
  CHECK(c.ceiling_reached == a.ceiling_reached);
  CHECK(c.method == ForwardMethod::direct);
  CHECK(c.tried_bits.size() > 1);  // this SAN collapses below what 128 bits resolve (1e-161)
  // Auto on the centred pass: one centred run measures the residuals, and the
  // direct pass gets the tier the ladder ends on.
  const PrecisionChoice cc = choose_precision(m, Variant::san(), in, PrecisionRequest{});
  CHECK(cc.method == ForwardMethod::centred);
  CHECK(cc.precision == a.precision);
  REQUIRE(cc.tried_bits.size() == 2);
  CHECK(cc.tried_bits.front() < a.precision.bits);
  CHECK(cc.tried_bits.back() == a.precision.bits);
  CHECK_FALSE(cc.ceiling_reached);
  // Fixed requests run nothing and return the tier.
  const PrecisionChoice f = choose_precision(m, Variant::san(), in, PrecisionRequest::parse("300"));
  CHECK(f.precision.bits == 513);
  CHECK(f.tried_bits == std::vector<long>{513});
}

TEST_CASE("enumeration records agree with paths.hpp and with the brute force", "[path_analysis]") {
  for (bool skip : {false, true}) {
    CAPTURE(skip);
    const Model m = small_model(skip);
    const Variant v = m.arch().variant;
    const InputSpec in = small_input();
    const Brute b = brute_force(m, v, in);
    const PathEnumerationReport r = analyze_enumeration(m, v, in, PrecisionRequest::parse("double"), {});
    REQUIRE(r.all_paths);
    REQUIRE(r.decomposition_error);
    CHECK(as_double(*r.decomposition_error) < 1e-13);
    CHECK(r.walked == (skip ? "27" : "8"));
    // paths.hpp at the same precision: the very same values, in the same order.
    const ForwardTrace<double> t = forward<double>(m, v, make_input<double>(m, in));
    std::vector<PathRecord<double>> lib;
    enumerate_paths<double>(m, t, {}, [&](const PathRecord<double>& rec) { lib.push_back(rec); });
    REQUIRE(r.paths.size() == lib.size());
    REQUIRE(r.paths.size() == b.paths.size());
    for (std::size_t i = 0; i < r.paths.size(); ++i) {
      const PathTermEntry& e = r.paths[i];
      CAPTURE(i);
      CHECK(e.heads == lib[i].heads);
      CHECK(e.length == lib[i].length);
      CHECK(e.norm_composite.value == to_big(lib[i].norm_composite));
      CHECK(e.norm_frobenius.value == to_big(lib[i].norm_frobenius));
      CHECK(e.residual_composite.value == to_big(lib[i].residual_composite));
      CHECK(e.stochastic_residual.value == to_big(lib[i].stochastic_residual));
      // The definitions, evaluated independently.
      CHECK(e.heads == b.paths[i].heads);
      CHECK(e.length == b.paths[i].length);
      CHECK(rel(as_double(e.norm_composite), b.paths[i].composite) < 1e-12);
      CHECK(rel(as_double(e.norm_frobenius), b.paths[i].frobenius) < 1e-12);
      CHECK(rel(as_double(e.residual_composite), b.paths[i].residual) < 1e-10);
      CHECK(rel(as_double(e.stochastic_residual), b.paths[i].stochastic) < 1e-10);
      REQUIRE(e.digits);
      CHECK(*e.digits >= 10);
    }
  }
}

TEST_CASE("top-K paths are the largest terms, confirmed by head sequence", "[path_analysis]") {
  const Model m = small_model(true);
  const Variant v = m.arch().variant;
  const InputSpec in = small_input();
  std::vector<BrutePath> bp = brute_force(m, v, in).paths;
  std::stable_sort(bp.begin(), bp.end(),
                   [](const BrutePath& a, const BrutePath& b) { return a.composite > b.composite; });

  for (const std::size_t K : {std::size_t(5), std::size_t(2)}) {
    // K·2L = 30 >= 27 paths: the check run walks them again; K = 2: it
    // evaluates the two selected paths alone (error from the length sums).
    DYNAMIC_SECTION("top " << K << " of every path") {
      EnumerationRequest er;
      er.top_k = K;
      const PathEnumerationReport r = analyze_enumeration(m, v, in, PrecisionRequest::parse("128"), er);
      REQUIRE(r.paths.size() == K);
      REQUIRE(r.all_paths);
      REQUIRE(r.decomposition_error);  // every path was summed
      CHECK(abs(r.decomposition_error->value) < pow(BigReal(2), -110));
      CHECK(r.decomposition_error->str().rfind("< 1e-3", 0) == 0);  // a bound at the rounding level of 128 bits
      for (std::size_t i = 0; i < K; ++i) {
        CAPTURE(i, r.paths[i].norm_composite.str());
        CHECK(r.paths[i].heads == bp[i].heads);
        CHECK(rel(as_double(r.paths[i].norm_composite), bp[i].composite) < 1e-12);
        REQUIRE(r.paths[i].digits);
        CHECK(*r.paths[i].norm_composite.digits >= 30);  // 128 bits against 257 on the same path
        CHECK(*r.paths[i].norm_frobenius.digits >= 30);
      }
    }
  }
  SECTION("a filter and few paths: the check run evaluates each selected path") {
    EnumerationRequest er;
    er.filter = PathFilter::length(2);  // 12 paths; 1 path · 2L = 6 < 12
    er.top_k = 1;
    const PathEnumerationReport r = analyze_enumeration(m, v, in, PrecisionRequest::parse("128"), er);
    REQUIRE(r.paths.size() == 1);
    CHECK_FALSE(r.all_paths);
    CHECK_FALSE(r.decomposition_error);  // a partial sum reconstructs nothing
    CHECK(r.walked == "12");
    const auto best = std::find_if(bp.begin(), bp.end(), [](const BrutePath& p) { return p.length == 2; });
    CHECK(r.paths[0].heads == best->heads);
    REQUIRE(r.paths[0].norm_composite.digits);
    CHECK(*r.paths[0].norm_composite.digits >= 30);
    CHECK(*r.paths[0].norm_frobenius.digits >= 30);
  }
  SECTION("heads per layer restrict the paths") {
    EnumerationRequest er;
    er.filter.allowed_heads = parse_heads_per_layer("1/skip/*", 3, 2, true);
    const PathEnumerationReport r = analyze_enumeration(m, v, in, PrecisionRequest::parse("double"), er);
    REQUIRE(r.paths.size() == 3);
    CHECK(r.paths[0].heads == std::vector<int>{1, -1, -1});
    CHECK(r.paths[1].heads == std::vector<int>{1, -1, 0});
    CHECK(r.paths[2].heads == std::vector<int>{1, -1, 1});
  }
}

TEST_CASE("enumeration JSON: 0-based heads, null for skip, decomposition error only for all paths", "[path_analysis]") {
  const Model m = small_model(true);
  const Variant v = m.arch().variant;
  const InputSpec in = small_input();
  const PathEnumerationReport all = analyze_enumeration(m, v, in, PrecisionRequest::parse("double"), {});
  const json j = json::parse(format_enumeration(all, m, info(), Format::json));
  REQUIRE(j.at("paths").size() == 27);
  // Enumeration order: skip first, then heads ascending, last layer fastest.
  CHECK(j.at("paths").at(0).at("heads") == json::array({nullptr, nullptr, nullptr}));
  CHECK(j.at("paths").at(1).at("heads") == json::array({nullptr, nullptr, 0}));
  CHECK(j.at("paths").at(26).at("heads") == json::array({1, 1, 1}));
  for (const json& p : j.at("paths")) {
    int len = 0;
    for (const json& h : p.at("heads")) len += h.is_null() ? 0 : 1;
    CHECK(p.at("length").get<int>() == len);
    for (const json* s : {&p.at("term_norm").at("frobenius"), &p.at("term_norm").at("composite"),
                          &p.at("term_residual").at("composite"), &p.at("stochastic_residual").at("composite")})
      CHECK(s->is_string());
  }
  CHECK(j.at("decomposition_error").is_string());
  EnumerationRequest er;
  er.filter = PathFilter::lengths(1, 2);
  const PathEnumerationReport part = analyze_enumeration(m, v, in, PrecisionRequest::parse("double"), er);
  const json k = json::parse(format_enumeration(part, m, info(), Format::json));
  CHECK(k.at("paths").size() == 3 * 2 + 3 * 4);
  CHECK_FALSE(k.contains("decomposition_error"));
  // CSV: one column per layer, empty for skip.
  const std::string csv = format_enumeration(all, m, info(), Format::csv);
  CHECK(csv.rfind("h1,h2,h3,length,", 0) == 0);
  CHECK(csv.find("\n,,,0,") != std::string::npos);
}

TEST_CASE("sampling: the all-skip length is one path; means are near the enumerated means", "[path_analysis]") {
  const Model m = small_model(true);
  const Variant v = m.arch().variant;
  const InputSpec in = small_input();
  const Brute b = brute_force(m, v, in);
  const PathSampleReport r = analyze_samples(m, v, in, PrecisionRequest::parse("double"), {}, 400, 11);
  REQUIRE(r.lengths.size() == 4);
  for (const LengthSampleEntry& e : r.lengths) {
    CAPTURE(e.length);
    double mean = 0;
    int count = 0;
    for (const BrutePath& p : b.paths)
      if (p.length == e.length) {
        mean += p.composite;
        ++count;
      }
    mean /= count;
    CHECK(e.population == binomial_times_power(3, e.length, 2).str());
    CHECK(e.samples == 400);
    if (e.length == 0) {
      CHECK(rel(as_double(e.norm.mean), mean) < 1e-13);  // the one path, X itself
      CHECK(as_double(e.norm.stddev) < 1e-13 * mean);
      continue;
    }
    // Within 4 standard errors (the CI half-width is 1.96 of them).
    const double se = (as_double(e.norm.high) - as_double(e.norm.low)) / (2 * 1.959963984540054);
    CHECK(std::abs(as_double(e.norm.mean) - mean) <= 4 * se);
    CHECK(as_double(e.norm.low) <= as_double(e.norm.mean));
    CHECK(as_double(e.norm.mean) <= as_double(e.norm.high));
  }
  // Deterministic for a seed, and the JSON carries the fields.
  const PathSampleReport again = analyze_samples(m, v, in, PrecisionRequest::parse("double"), {2}, 400, 11);
  CHECK(again.lengths.at(0).norm.mean.value == r.lengths.at(2).norm.mean.value);
  const json j = json::parse(format_samples(r, m, info(), Format::json));
  CHECK(j.at("samples").at(1).at("term_norm").at("composite").at("ci95").size() == 2);
  CHECK(j.at("seed").get<int>() == 11);
}

TEST_CASE("refusals: not attention-only, too many paths, bad heads per layer", "[path_analysis]") {
  RandomModelSpec s;
  s.arch = {
      3,     2,    8, 4, 4, 32, Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none}, Activation::gelu,
      1e-12, false};
  const Model full = random_model(s);
  const InputSpec in = small_input();
  for (const Variant& v : {full.arch().variant, Variant{false, MlpKind::plain, LayerNormKind::none, MaskKind::none},
                           Variant{true, MlpKind::none, LayerNormKind::pre, MaskKind::none}}) {
    try {
      analyze_length_sums(full, v, in, PrecisionRequest::parse("double"));
      FAIL("not refused");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("attention-only") != std::string::npos);
    }
    CHECK_THROWS_AS(analyze_enumeration(full, v, in, PrecisionRequest::parse("double"), {}), std::invalid_argument);
    CHECK_THROWS_AS(analyze_samples(full, v, in, PrecisionRequest::parse("double"), {}, 10, 1), std::invalid_argument);
  }
  const Model m = small_model(true);
  EnumerationRequest er;
  er.limit = 26;  // 27 paths
  try {
    analyze_enumeration(m, m.arch().variant, in, PrecisionRequest::parse("double"), er);
    FAIL("not refused");
  } catch (const PathLimitError& e) {
    CHECK(e.count() == 27);
    CHECK(std::string(e.what()).find("27 paths") != std::string::npos);
    const ResourceError& base = e;  // the CLI maps ResourceError to exit code 5
    (void)base;
  }
  er.limit = 27;
  CHECK(analyze_enumeration(m, m.arch().variant, in, PrecisionRequest::parse("double"), er).paths.size() == 27);

  CHECK(parse_heads_per_layer("0,1/*/skip", 3, 2, true) == std::vector<std::vector<int>>{{0, 1}, {-1, 0, 1}, {-1}});
  CHECK(parse_heads_per_layer(" 1 /0/ * ", 3, 2, false) == std::vector<std::vector<int>>{{1}, {0}, {0, 1}});
  CHECK_THROWS_WITH(parse_heads_per_layer("0/1", 3, 2, true), Catch::Contains("3 layers"));
  CHECK_THROWS_WITH(parse_heads_per_layer("0/2/1", 3, 2, true), Catch::Contains("layer 2"));
  CHECK_THROWS_WITH(parse_heads_per_layer("0/skip/1", 3, 2, false), Catch::Contains("skip"));
  CHECK_THROWS_WITH(parse_heads_per_layer("0//1", 3, 2, true), Catch::Contains("layer 2"));
  CHECK_THROWS_WITH(parse_heads_per_layer("0/x/1", 3, 2, true), Catch::Contains("'x'"));
}

TEST_CASE("graph counts JSON: total (H+1)^L and C(L,k)·H^k as exact strings", "[path_analysis]") {
  PathGraphSpec spec;
  spec.layers = 96;
  spec.heads = 64;
  spec.skip = true;
  const json j = json::parse(format_path_counts(spec, count_paths(spec), Format::json));
  PathCount total = 1;
  for (int i = 0; i < 96; ++i) total *= 65;
  CHECK(j.at("total").get<std::string>() == total.str());
  REQUIRE(j.at("by_length").size() == 97);
  for (int k : {0, 1, 2, 50, 96})
    CHECK(j.at("by_length").at(static_cast<std::size_t>(k)).at("count").get<std::string>() ==
          binomial_times_power(96, k, 64).str());
  spec.skip = false;
  const json n = json::parse(format_path_counts(spec, count_paths(spec), Format::json));
  PathCount p64 = 1;
  for (int i = 0; i < 96; ++i) p64 *= 64;
  CHECK(n.at("total").get<std::string>() == p64.str());
  CHECK(n.at("by_length").at(96).at("count").get<std::string>() == p64.str());
  CHECK(n.at("by_length").at(95).at("count").get<std::string>() == "0");
}

TEST_CASE("real GPT-2 checkpoint: length sums of SAN and SAN+skip reconstruct the output", "[path_analysis][real]") {
  const std::string dir = sanpath::test::real_models_dir();
  if (dir.empty()) return;  // skipped outside CI (real_models_dir says so)
  const Model m = load_model(dir + "/gpt2-capp");
  const InputSpec in = InputSpec::from_tokens({1, 5, 9, 13});
  for (bool skip : {false, true}) {
    CAPTURE(skip);
    VariantOverride o;
    o.skip = skip;
    o.mlp = MlpKind::none;
    o.layernorm = LayerNormKind::none;
    const Variant v = m.resolve(o);
    CHECK(v.mask == MaskKind::causal);  // GPT-2 keeps its mask
    const LengthSumsReport r = analyze_length_sums(m, v, in, PrecisionRequest{});
    CAPTURE(r.precision.name(), r.decomposition_error.str());
    REQUIRE(r.check);
    // At the working precision (>= 128 bits) the reconstruction is exact to
    // rounding: far below 2^-100.
    CHECK(abs(r.decomposition_error.value) < pow(BigReal(2), -100));
    CHECK(decomposition_holds(r.decomposition_error, r.precision));
    CHECK(r.total_count == (skip ? "625" : "256"));
    // Norms of every nonempty length sum are confirmed to many digits.
    for (const LengthSumEntry& e : r.lengths)
      if (e.count != "0") {
        CAPTURE(e.length);
        REQUIRE(e.frobenius.digits);
        CHECK(*e.frobenius.digits >= 17);
      }
  }
}

TEST_CASE("stream_enumeration streams the entries of analyze_enumeration, path by path", "[paths][stream]") {
  const Model m = small_model(true);
  const Variant v = m.arch().variant;
  const PrecisionRequest req = PrecisionRequest::parse("128");
  const PathEnumerationReport kept = analyze_enumeration(m, v, small_input(), req, {});
  std::vector<PathTermEntry> streamed;
  const PathReportBase base =
      stream_enumeration(m, v, small_input(), req, {}, 1000, [&](const PathTermEntry& e) { streamed.push_back(e); });
  REQUIRE(base.check.has_value());
  CHECK(base.precision.bits == kept.precision.bits);
  REQUIRE(streamed.size() == kept.paths.size());
  REQUIRE(streamed.size() == 27);
  for (std::size_t i = 0; i < streamed.size(); ++i) {
    CAPTURE(i);
    CHECK(streamed[i].heads == kept.paths[i].heads);
    CHECK(streamed[i].norm_composite.str() == kept.paths[i].norm_composite.str());
    CHECK(streamed[i].residual_composite.str() == kept.paths[i].residual_composite.str());
    CHECK(streamed[i].stochastic_residual.str() == kept.paths[i].stochastic_residual.str());
    CHECK(streamed[i].digits == kept.paths[i].digits);
  }
  SECTION("a visitor's exception stops the walk") {
    int seen = 0;
    struct Stop {};
    CHECK_THROWS_AS(stream_enumeration(m, v, small_input(), req, {}, 1000,
                                       [&](const PathTermEntry&) {
                                         if (++seen == 3) throw Stop{};
                                       }),
                    Stop);
    CHECK(seen == 3);
  }
  SECTION("the limit is checked before any work") {
    CHECK_THROWS_AS(stream_enumeration(m, v, small_input(), req, {}, 26, [](const PathTermEntry&) {}),
                    PathLimitError);
  }
}

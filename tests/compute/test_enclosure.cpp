// Proven enclosures (math.md §10, compute/enclosure.hpp, core/ball.hpp).
// The radius arithmetic is checked against exact MPFR values; the enclosed
// forward pass against the independent mpmath reference
// (tests/reference/sanpath_ref.py, written from math.md) at 1,500 bits: every
// enclosure must contain the reference's value, and an enclosure whose radii
// are shrunk on purpose must be caught by the same check.
#include "support/helpers.hpp"
#include "support/llama_helpers.hpp"
#include "support/width8_models.hpp"

#include "sanpath/compute/enclosure.hpp"
#include "sanpath/compute/enclosure_centred.hpp"
#include "sanpath/compute/enclosure_paths.hpp"
#include "compute/enclosure_centred_impl.hpp"  // enclosure_detail::iv_activate, iv_derivative, rotary_enclosed
#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/paths.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/random_checkpoint.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/model/random.hpp"

#include <Eigen/SVD>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <tuple>

using namespace sanpath;

namespace {

BigReal exact(double x) { return BigReal(x, 20); }

BigReal big_of(const std::string& text, int digits = 400) {
  BigReal r(0, static_cast<unsigned>(digits));
  REQUIRE(mpfr_set_str(r.backend().data(), text.c_str(), 10, MPFR_RNDN) == 0);
  return r;
}

/// value ≤ bound, exactly.
bool below(const BigReal& value, const UpperBound& bound) {
  return mpfr_cmp(value.backend().data(), bound.to_big().backend().data()) <= 0;
}

Model san_model(int layers, int heads, std::uint64_t seed, double std, int d_model = 8, int d_head = 4,
                double bias_std = 0.1) {
  RandomModelSpec s;
  s.arch = {layers, heads, d_model, d_head, d_head, 0, Variant::san(), Activation::gelu, 1e-5, false};
  s.std = std;
  s.bias_std = bias_std;
  s.seed = seed;
  return random_model(s);
}

MatrixXd test_input(std::uint64_t seed, int n = 6) { return test::width8_input(seed, n); }

/// The mpmath reference's per-layer quantities (mean centre) at `bits` bits.
std::vector<std::map<std::string, BigReal>> reference(const Model& m, const MatrixXd& X0, const Variant& v,
                                                      const std::string& tag, int bits, int digits,
                                                      std::optional<Layout> layout = std::nullopt) {
  const nlohmann::json ref = test::reference_residual_norms(
      m, X0, "enclosure_" + tag,
      "--all-norms --bits " + std::to_string(bits) + " --digits " + std::to_string(digits) + " --skip " +
          (v.skip ? "on" : "off") + " --mlp " + to_string(v.mlp) + " --layernorm " + to_string(v.layernorm) +
          " --mask " + to_string(v.mask),
      layout);
  std::vector<std::map<std::string, BigReal>> out;
  for (const auto& rec : ref["layers"]) {
    std::map<std::string, BigReal> q;
    for (const char* k : {"residual_one", "residual_inf", "residual_composite", "residual_frobenius",
                          "norm_composite", "norm_frobenius", "relative_residual"})
      q[k] = big_of(rec[k].get<std::string>(), digits + 20);
    out.push_back(q);
  }
  return out;
}

std::map<std::string, const Interval*> named(const ResidualEnclosure& e) {
  return {{"residual_one", &e.res_one},           {"residual_inf", &e.res_inf},
          {"residual_composite", &e.res_composite}, {"residual_frobenius", &e.res_frobenius},
          {"norm_composite", &e.norm_composite},   {"norm_frobenius", &e.norm_frobenius},
          {"relative_residual", &e.relative_residual}};
}

/// Layers whose enclosures miss a reference value; every quantity's
/// smallest proven digit count over the layers goes to `min_digits`.
/// Enclosures that leave more than 6 + 5l digits unproven at layer l that
/// the midpoint has right. Ball arithmetic adds errors in absolute value, so
/// its radii outgrow the true errors layer by layer (4 to 5.5 digits a layer
/// on these models, measured when this test was written): a guard against
/// radii that are sound but useless, not a tolerance of the soundness checks.
int loose = 0;
std::string least_where;  ///< the layer and quantity of the fewest digits proven

template <class S> std::vector<ResidualEnclosure> enclosures(const EnclosedTrace<S>& t) {
  std::vector<ResidualEnclosure> out;
  for (const BallMatrix<S>& X : t.X) out.push_back(enclose_residual(X));
  return out;
}

template <class S> std::vector<ResidualEnclosure> enclosures(const EnclosedCentredTrace<S>& t) {
  std::vector<ResidualEnclosure> out;
  for (int l = 0; l <= t.layers(); ++l) out.push_back(enclose_centred_residual(t, l));  // with the row bounds
  return out;
}

template <class Trace>
int misses(const Trace& t, const std::vector<std::map<std::string, BigReal>>& ref, int& min_digits) {
  const std::vector<ResidualEnclosure> all = enclosures(t);
  REQUIRE(all.size() == ref.size());
  int missed = 0;
  min_digits = 1 << 20;
  for (int l = 0; l < static_cast<int>(all.size()); ++l) {
    const ResidualEnclosure& e = all[static_cast<std::size_t>(l)];
    for (const auto& [name, iv] : named(e)) {
      const BigReal& truth = ref[static_cast<std::size_t>(l)].at(name);
      if (!contains(*iv, truth)) {
        ++missed;
        UNSCOPED_INFO("layer " << l << " " << name << ": " << to_sci(truth, 30) << " outside ["
                               << to_sci(iv->lo, 30, Rounding::down) << ", " << to_sci(iv->hi, 30, Rounding::up)
                               << "]");
      }
      // the midpoint's own value as the printed one
      BigReal mid = iv->lo;
      mpfr_add(mid.backend().data(), iv->lo.backend().data(), iv->hi.backend().data(), MPFR_RNDN);
      mpfr_div_2ui(mid.backend().data(), mid.backend().data(), 1, MPFR_RNDN);
      if (l > 0) {
        const int proven = proven_digits(*iv, mid, 200);
        if (proven < min_digits)
          least_where = "layer " + std::to_string(l) + " " + name + " in [" + to_sci(iv->lo, 25, Rounding::down) +
                        ", " + to_sci(iv->hi, 25, Rounding::up) + "], exact " + to_sci(truth, 25);
        min_digits = std::min(min_digits, proven);
        // tight: the enclosure proves nearly every digit the midpoint has right
        const int correct = agreeing_digits(mid, truth, 200);
        if (correct - proven > 6 + 5 * l) {
          ++loose;
          UNSCOPED_INFO("layer " << l << " " << name << ": " << proven << " digits proven, " << correct
                                 << " correct");
        }
      }
    }
  }
  return missed;
}

}  // namespace

TEST_CASE("upper bounds: exact where they can be, never below the exact value") {
  CHECK(UpperBound::of(0.75).m == 0.75);
  CHECK(UpperBound::of(0.75).e == 0);
  {
    BigReal two = exact(1);
    mpfr_mul_2si(two.backend().data(), two.backend().data(), -30000, MPFR_RNDN);
    CHECK(UpperBound::pow2(-30000).to_big() == two);
  }
  Rng rng(5);
  for (int i = 0; i < 2000; ++i) {
    const double a = std::fabs(rng.gaussian()) * std::ldexp(1.0, static_cast<int>(rng.gaussian() * 300));
    const double b = std::fabs(rng.gaussian()) * std::ldexp(1.0, static_cast<int>(rng.gaussian() * 300));
    const long ea = static_cast<long>(rng.gaussian() * 20000), eb = static_cast<long>(rng.gaussian() * 20000);
    UpperBound A = UpperBound::of(a), B = UpperBound::of(b);
    A.e += ea;
    B.e += eb;
    const BigReal xa = A.to_big(), xb = B.to_big();
    BigReal sum(0, 12000), prod(0, 12000);  // exact at these sizes
    mpfr_add(sum.backend().data(), xa.backend().data(), xb.backend().data(), MPFR_RNDU);
    mpfr_mul(prod.backend().data(), xa.backend().data(), xb.backend().data(), MPFR_RNDU);
    CAPTURE(a, b, ea, eb);
    CHECK(below(sum, A + B));
    CHECK(below(prod, A * B));
    BigReal root(0, 40);
    mpfr_sqrt(root.backend().data(), xa.backend().data(), MPFR_RNDU);
    CHECK(below(root, sqrt_up(A)));
  }
  // |x| of an MPFR value far below double's range
  mpfr_real<77> tiny("-3.25e-9000");
  const UpperBound t = UpperBound::abs_of(tiny.backend().data());
  CHECK(below(to_big(mpfr_real<77>(abs(tiny))), t));
  CHECK(t.e > -29900);
  CHECK(t.e < -29890);
}

TEST_CASE("radius matrices: products and norms bound the exact ones, scales far below double") {
  Rng rng(6);
  const Eigen::Index m = 7, k = 33, n = 5;
  MatrixXd a(m, k), b(k, n);
  for (Eigen::Index i = 0; i < a.size(); ++i) a(i) = std::fabs(rng.gaussian());
  for (Eigen::Index i = 0; i < b.size(); ++i) b(i) = std::fabs(rng.gaussian()) * 1e-3;
  RadiusMatrix A = RadiusMatrix::of(a), B = RadiusMatrix::of(b);
  A.exp -= 5000;  // a · 2^-5000
  B.exp -= 7000;
  const RadiusMatrix C = product_up(A, B);
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index j = 0; j < n; ++j) {
      BigReal s(0, 300);
      for (Eigen::Index p = 0; p < k; ++p) {
        BigReal t(0, 300);
        mpfr_mul(t.backend().data(), A.at(i, p).to_big().backend().data(), B.at(p, j).to_big().backend().data(),
                 MPFR_RNDU);
        mpfr_add(s.backend().data(), s.backend().data(), t.backend().data(), MPFR_RNDU);
      }
      CAPTURE(i, j);
      CHECK(below(s, C.at(i, j)));
      // and tight: within 2^-40 relative of the exact sum
      BigReal slack = C.at(i, j).to_big() / s - 1;
      CHECK(slack < BigReal(1e-12));
    }
  BigReal fro(0, 300);
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index j = 0; j < n; ++j) fro += C.at(i, j).to_big() * C.at(i, j).to_big();
  CHECK(below(BigReal(sqrt(fro)), frobenius_up(C)));
  const RadiusMatrix S = A + RadiusMatrix::of(MatrixXd::Constant(m, k, 1.0));  // 2^-5000 beside 1
  CHECK(S.at(0, 0).to_big() >= BigReal(1));
}

/// 2^k exactly.
BigReal pow2_big(long k) {
  BigReal x(1, 30);
  mpfr_mul_2si(x.backend().data(), x.backend().data(), k, MPFR_RNDN);
  return x;
}

TEST_CASE("row bounds: row norms, the minimum and capping by rows bound what they should, far below double") {
  RadiusMatrix a = RadiusMatrix::of((MatrixXd(2, 4) << 3, 4, 0, 0, 1, 1, 1, 1).finished());
  a.exp -= 3000;  // entries · 2^-3000
  const RadiusMatrix r = row_norms_up(a);
  REQUIRE((r.rows() == 2 && r.cols() == 1));
  const BigReal unit = pow2_big(-3000);
  for (const auto& [i, exact] : {std::pair{0, 5.0}, std::pair{1, 2.0}}) {
    CHECK(below(BigReal(exact) * unit, r.at(i, 0)));
    CHECK(r.at(i, 0).to_big() < BigReal(exact) * unit * (1 + BigReal(1e-14)));
  }
  // blocks of two columns: row 0's first block capped at 1, its second (zeros) stays 0; row 1 is within 10
  RadiusMatrix rows = RadiusMatrix::of((MatrixXd(2, 2) << 1, 1, 10, 10).finished());
  rows.exp -= 3000;
  const RadiusMatrix c = capped_by_rows(a, rows, 2);
  CHECK(c.at(0, 0).to_big() == unit);
  CHECK(c.at(0, 1).to_big() == unit);
  CHECK(c.at(0, 2).is_zero());
  CHECK(c.at(1, 3).to_big() == unit);
  RadiusMatrix one = RadiusMatrix::of(MatrixXd::Constant(2, 4, 1.0));
  one.exp -= 3000;
  const RadiusMatrix m = min(a, one);
  CHECK(m.at(0, 1).to_big() == unit);
  CHECK(m.at(0, 2).is_zero());
  CHECK(m.at(1, 0).to_big() == unit);
  CHECK_THROWS_AS(capped_by_rows(a, rows, 1), std::logic_error);  // two blocks of one column do not cover four
}

TEST_CASE("spectral norm bounds: never below the largest singular value; within 1.3× of it for Gaussian weights") {
  // Exact values: u vᵀ has ‖·‖₂ = ‖u‖‖v‖ (here 2·4), a diagonal its largest |entry|.
  const MatrixXd ones = MatrixXd::Ones(4, 16);
  for (const MatrixXd& W : {ones, MatrixXd(ones.transpose())}) {
    const UpperBound b = spectral_norm_up(W);
    CHECK(below(BigReal(8), b));
    CHECK(b.to_big() < BigReal(8) * (1 + BigReal(1e-12)));
  }
  MatrixXd diagonal = MatrixXd::Zero(5, 3);
  diagonal(0, 0) = -0.5;
  diagonal(1, 1) = 3;
  diagonal(2, 2) = 1;
  CHECK(below(BigReal(3), spectral_norm_up(diagonal)));
  CHECK(spectral_norm_up(diagonal).to_big() < BigReal(3.001));
  // Far outside double's comfortable range (subnormal entries; squares beyond 1e308): powers of two, exact.
  for (const long k : {-1060L, 1000L}) {
    CAPTURE(k);
    const UpperBound b = spectral_norm_up(MatrixXd(ones * std::ldexp(1.0, static_cast<int>(k))));
    CHECK(below(BigReal(8) * pow2_big(k), b));
    CHECK(b.to_big() < BigReal(8) * pow2_big(k) * (1 + BigReal(1e-12)));
  }
  CHECK(spectral_norm_up(MatrixXd::Zero(3, 2)).is_zero());
  MatrixXd bad = ones;
  bad(1, 1) = std::nan("");
  CHECK_FALSE(spectral_norm_up(bad).is_finite());
  // Both sides above 1024: blocks of 512 columns. 0.5·I is the Frobenius
  // approach's worst case (k equal singular values: the 4th power of a Gram
  // has k^(1/2) times its spectral norm as Frobenius norm, k^(1/16) after the
  // roots): 0.5·√(2·512^(1/8) + 6^(1/8)) = 1.18459 for blocks of 512, 512, 6.
  const UpperBound blocked = spectral_norm_up(MatrixXd(0.5 * MatrixXd::Identity(1030, 1030)));
  CHECK(below(BigReal(0.5), blocked));
  CHECK(blocked.to_big() < BigReal(1.1846));
  // Gaussian weights against Eigen's SVD (an independent computation, accurate to a few ulps).
  Rng rng(11);
  for (const auto& [rows, cols] : {std::pair{300, 200}, std::pair{200, 300}, std::pair{768, 64}}) {
    CAPTURE(rows, cols);
    MatrixXd W(rows, cols);
    for (Eigen::Index i = 0; i < W.size(); ++i) W(i) = 0.02 * rng.gaussian();
    const double sigma = Eigen::BDCSVD<MatrixXd>(W).singularValues()(0);
    const BigReal b = spectral_norm_up(W).to_big();
    CHECK(b >= BigReal(sigma) * (1 - BigReal(1e-12)));
    CHECK(b <= BigReal(sigma) * BigReal(1.3));
  }
}

TEST_CASE("proven digits: the printed value within one unit of its last digit of every point") {
  const double step = std::ldexp(1.0, -20);  // 9.54e-7, exact
  Interval v{exact(1.25), exact(1.25 + step)};
  BigReal mid = exact(1.25 + step / 2);   // 1.25000047683715820312
  CHECK(proven_digits(v, mid, 30) == 7);  // 1.250000 ± 1e-6 covers it; 1.2500005 ± 1e-7 does not
  CHECK(proven_digits(v, mid, 3) == 3);   // never above what is asked
  Interval straddle{exact(1 - step), exact(1 + step)};
  CHECK(proven_digits(straddle, exact(1), 30) == 7);  // 1.000000 ± 1e-6 across the power of ten
  Interval decimal{exact(1.2345), exact(1.2346)};  // the doubles nearest, 1.2346 lies 8.5e-18 above
  CHECK(proven_digits(decimal, exact(1.23455), 30) == 4);
  Interval zero_in{exact(-1e-30), exact(1e-30)};
  CHECK(proven_digits(zero_in, exact(0.5e-30), 30) == 0);
  Interval point{exact(0.5), exact(0.5)};
  CHECK(proven_digits(point, exact(0.5), 40) == 40);
  CHECK(contains(decimal, exact(1.2345)));
  CHECK_FALSE(contains(decimal, exact(1.2347)));
}

TEST_CASE("enclosed pass: every layer's enclosures contain the mpmath values (65, 128, 257 bits)") {
  for (const Variant v : {Variant::san(), Variant::san(MaskKind::causal), Variant{true, MlpKind::none,
                                                                                   LayerNormKind::none,
                                                                                   MaskKind::none}}) {
    const Model m = san_model(4, 2, v.skip ? 31 : 21, 0.5);
    const MatrixXd X0 = test_input(22);
    const std::string tag = std::string(v.skip ? "skip" : "san") + "_" + to_string(v.mask);
    const auto ref = reference(m, X0, v, tag, 1500, 300);
    CAPTURE(tag);
    int d65 = 0, d128 = 0, d257 = 0;
    loose = 0;
    CHECK(misses(forward_enclosed<mpfr_real<19>>(m, v, convert<mpfr_real<19>>(X0)), ref, d65) == 0);
    CHECK(misses(forward_enclosed<mpfr_real<38>>(m, v, convert<mpfr_real<38>>(X0)), ref, d128) == 0);
    CHECK(misses(forward_enclosed<mpfr_real<77>>(m, v, convert<mpfr_real<77>>(X0)), ref, d257) == 0);
    // the enclosures are tight: most of each tier's digits are proven
    CAPTURE(d65, d128, d257);
    CHECK(loose == 0);
  }
}

TEST_CASE("enclosed pass: shrunk radii are caught by the containment check") {
  // The collapsing SAN below: its residuals lose digits to cancellation, so
  // midpoints without their radii miss the exact values.
  const Model m = san_model(6, 1, 91, 1.0);
  const MatrixXd X0 = test_input(92);
  const auto ref = reference(m, X0, Variant::san(), "shrunk", 1500, 300);
  int digits = 0;
  CHECK(misses(forward_enclosed<mpfr_real<38>>(m, Variant::san(), convert<mpfr_real<38>>(X0)), ref, digits) == 0);
  for (const double scale : {0.0}) {
    EnclosureOptions opt;
    opt.radius_scale = scale;  // no longer an enclosure
    CAPTURE(scale);
    CHECK(misses(forward_enclosed<mpfr_real<38>>(m, Variant::san(), convert<mpfr_real<38>>(X0), opt), ref, digits) > 0);
  }
}

TEST_CASE("enclosed pass: a collapsing SAN keeps proven digits while the residual falls below 1e-200") {
  const Model m = san_model(6, 1, 91, 1.0);
  const MatrixXd X0 = test_input(92);
  const auto ref = reference(m, X0, Variant::san(), "deep", 6000, 1600);
  int digits = 0;
  loose = 0;
  const auto t = forward_enclosed<mpfr_real<1233>>(m, Variant::san(), convert<mpfr_real<1233>>(X0));
  CHECK(misses(t, ref, digits) == 0);
  CAPTURE(digits);
  CHECK(loose == 0);
  CHECK(digits >= 15);
  REQUIRE(log10_abs(ref.back().at("relative_residual")) < -200);  // the case is as deep as it claims
}

TEST_CASE("enclosed pass: MLP (every activation) and LayerNorm, pre and post, contain the mpmath values") {
  struct Case {
    Variant v;
    Activation act;
  };
  const Case cases[] = {
      {{true, MlpKind::residual, LayerNormKind::post, MaskKind::none}, Activation::gelu},
      {{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal}, Activation::gelu_tanh},
      {{false, MlpKind::plain, LayerNormKind::none, MaskKind::none}, Activation::relu},
      {{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none}, Activation::silu},
  };
  int k = 0;
  for (const Case& c : cases) {
    const Model m = test::width8_model(3, c.act, 40 + static_cast<std::uint64_t>(k), 0.5);
    const MatrixXd X0 = test_input(23);
    const auto ref = reference(m, X0, c.v, "full" + std::to_string(k++), 1500, 300);
    CAPTURE(to_string(c.act), to_string(c.v.mlp), to_string(c.v.layernorm));
    int d128 = 0, d257 = 0;
    loose = 0;
    CHECK(misses(forward_enclosed<mpfr_real<38>>(m, c.v, convert<mpfr_real<38>>(X0)), ref, d128) == 0);
    CHECK(misses(forward_enclosed<mpfr_real<77>>(m, c.v, convert<mpfr_real<77>>(X0)), ref, d257) == 0);
    CAPTURE(d128, d257);
    CHECK(loose == 0);
  }
}

TEST_CASE("enclosed pass: the Llama family (rotary, grouped-query attention, RMSNorm, SwiGLU) contains the mpmath "
          "values") {
  const Model m = test::random_llama(3, 4, 2, 8, 4, 16, 61, 20);  // a token table: the reference reads one
  const MatrixXd X0 = test_input(24);
  for (const Variant v : {m.arch().variant, Variant::san(MaskKind::causal), Variant::san()}) {
    const std::string tag = std::string("llama_") + (v.skip ? "full" : "san_") + to_string(v.mask);
    const auto ref = reference(m, X0, v, tag, 1500, 300, Layout::llama);
    CAPTURE(tag);
    int d128 = 0, d257 = 0;
    loose = 0;
    CHECK(misses(forward_enclosed<mpfr_real<38>>(m, v, convert<mpfr_real<38>>(X0)), ref, d128) == 0);
    CHECK(misses(forward_enclosed<mpfr_real<77>>(m, v, convert<mpfr_real<77>>(X0)), ref, d257) == 0);
    CAPTURE(d128, d257);
    CHECK(loose == 0);
    CHECK(d257 >= 40);
  }
}

TEST_CASE("rotary angles: every cos and sin ball contains the exact value; without its radius it does not") {
  // θ^(−2i/r)·p/f at 65 bits against 2,000 bits, for a round and a decimal base, Gemma 3's global layers'
  // base and linear factor 8, and positions up to 3,000 (angles of thousands of radians, where the
  // angle's own rounding dominates).
  using S = mpfr_real<19>;
  for (const auto& [theta, factor, theta_text] :
       {std::tuple{10000.0, 1.0, "10000"}, std::tuple{500000.5, 1.0, "500000.5"}, std::tuple{1e6, 8.0, "1000000"}}) {
    const int r = 12;
    const Eigen::Index n = 3000;
    const auto t = enclosure_detail::rotary_enclosed<S>(n, r, theta, factor);
    const BigReal base = big_of(theta_text, 700);
    int missed = 0, missed_without = 0;
    for (Eigen::Index i = 0; i < r / 2; ++i)
      for (const Eigen::Index q : {Eigen::Index{0}, Eigen::Index{1}, Eigen::Index{7}, Eigen::Index{999}, n - 1}) {
        BigReal e(0, 700), angle(0, 700), c(0, 700), s(0, 700), diff(0, 700);
        mpfr_set_si(e.backend().data(), -2 * static_cast<long>(i), MPFR_RNDN);
        mpfr_div_si(e.backend().data(), e.backend().data(), r, MPFR_RNDN);
        mpfr_pow(angle.backend().data(), base.backend().data(), e.backend().data(), MPFR_RNDN);
        mpfr_mul_si(angle.backend().data(), angle.backend().data(), static_cast<long>(q), MPFR_RNDN);
        mpfr_div_si(angle.backend().data(), angle.backend().data(), static_cast<long>(factor), MPFR_RNDN);
        mpfr_cos(c.backend().data(), angle.backend().data(), MPFR_RNDN);
        mpfr_sin(s.backend().data(), angle.backend().data(), MPFR_RNDN);
        for (const auto& [mid, rad, truth] : {std::tuple{&t.mid.cos, &t.rcos, &c}, std::tuple{&t.mid.sin, &t.rsin, &s}}) {
          mpfr_sub(diff.backend().data(), BigReal((*mid)(q, i)).backend().data(), truth->backend().data(), MPFR_RNDN);
          mpfr_abs(diff.backend().data(), diff.backend().data(), MPFR_RNDN);
          if (!below(diff, rad->at(q, i))) ++missed;
          if (!mpfr_zero_p(diff.backend().data())) ++missed_without;  // a radius of 0 would not hold
        }
      }
    CAPTURE(theta, factor);
    CHECK(missed == 0);
    CHECK(missed_without > 0);
  }
}

/// Against a truth computed at 4,098 bits (its error, ~1e-1230, is nothing
/// beside a 65-bit radius): how many entries lie outside their balls, and how
/// many differ from their midpoints at all (a radius of 0 would miss those).
template <class S, class T> std::pair<int, int> misses_against(const BallMatrix<S>& ball, const Matrix<T>& truth) {
  REQUIRE(ball.mid.rows() == truth.rows());
  REQUIRE(ball.mid.cols() == truth.cols());
  int missed = 0, differ = 0;
  for (Eigen::Index j = 0; j < truth.cols(); ++j)
    for (Eigen::Index i = 0; i < truth.rows(); ++i) {
      BigReal diff(0, 4200);
      mpfr_sub(diff.backend().data(), BigReal(ball.mid(i, j)).backend().data(), BigReal(truth(i, j)).backend().data(),
               MPFR_RNDN);
      mpfr_abs(diff.backend().data(), diff.backend().data(), MPFR_RNDN);
      if (!below(diff, ball.rad.at(i, j))) ++missed;
      if (!mpfr_zero_p(diff.backend().data())) ++differ;
    }
  return {missed, differ};
}

/// The same over every layer of an enclosed pass and the plain pass.
template <class S, class T>
std::pair<int, int> misses_against(const EnclosedTrace<S>& ball, const ForwardTrace<T>& truth) {
  REQUIRE(ball.X.size() == truth.X.size());
  int missed = 0, differ = 0;
  for (std::size_t l = 0; l < ball.X.size(); ++l) {
    const auto [m, d] = misses_against(ball.X[l], truth.X[l]);
    missed += m;
    differ += d;
  }
  return {missed, differ};
}

namespace {

/// Every path of `v` through `m`: the enclosed terms at 128 bits against
/// evaluate_path on a 4,098-bit pass (its errors ~1e-1230, far inside every
/// enclosure). Returns the quantities outside their enclosure; `least` the
/// fewest digits proven.
int path_term_misses(const Model& m, const Variant& v, const MatrixXd& X0, const EnclosureOptions& opt, int& least) {
  using S = mpfr_real<38>;
  using T = mpfr_real<1233>;
  EnclosureOptions o = opt;
  o.record_attention = true;
  const EnclosedTrace<S> t = forward_enclosed<S>(m, v, convert<S>(X0), o);
  const ForwardTrace<T> exact = forward<T>(m, v, convert<T>(X0));
  std::vector<std::vector<int>> paths;
  EnumerationOptions eo;
  enumerate_paths<T>(m, exact, eo, [&](const PathRecord<T>& r) { paths.push_back(r.heads); });
  REQUIRE(paths.size() == static_cast<std::size_t>(count_filtered_paths(m.arch().layers, m.arch().heads, v.skip)));
  const std::vector<EnclosedPathTerm> terms = enclose_path_terms(m, t, paths, opt.radius_scale);
  REQUIRE(terms.size() == paths.size());
  int missed = 0;
  least = 1 << 20;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const PathRecord<T> r = evaluate_path<T>(m, exact, paths[i]);
    const std::pair<const Interval*, T> named_terms[] = {{&terms[i].norm_composite, r.norm_composite},
                                                         {&terms[i].norm_frobenius, r.norm_frobenius},
                                                         {&terms[i].residual_composite, r.residual_composite},
                                                         {&terms[i].stochastic_residual, r.stochastic_residual}};
    for (const auto& [iv, truth] : named_terms) {
      const BigReal x = big_of(truth.str(0, std::ios_base::scientific), 1300);
      if (!contains(*iv, x)) {
        ++missed;
        UNSCOPED_INFO("path " << i << ": " << to_sci(x, 30) << " outside [" << to_sci(iv->lo, 30, Rounding::down)
                              << ", " << to_sci(iv->hi, 30, Rounding::up) << "]");
      }
      BigReal mid = iv->lo;
      mpfr_add(mid.backend().data(), iv->lo.backend().data(), iv->hi.backend().data(), MPFR_RNDN);
      mpfr_div_2ui(mid.backend().data(), mid.backend().data(), 1, MPFR_RNDN);
      least = std::min(least, proven_digits(*iv, mid, 200));
    }
  }
  return missed;
}

}  // namespace

TEST_CASE("enclosed path terms: every path's four norms contain the 4,098-bit values; shrunk radii are caught") {
  int least = 0;
  SECTION("27 paths with skip, sharing their prefixes") {
    const Variant v{true, MlpKind::none, LayerNormKind::none, MaskKind::none};
    CHECK(path_term_misses(san_model(3, 2, 31, 0.5), v, test_input(22), {}, least) == 0);
    CAPTURE(least);
    CHECK(least >= 25);  // of 38: the enclosures are tight
  }
  SECTION("a collapsing SAN of 64 paths: without their radii, the midpoints miss") {
    const Model m = san_model(6, 2, 91, 1.0);
    const MatrixXd X0 = test_input(92);
    CHECK(path_term_misses(m, Variant::san(), X0, {}, least) == 0);  // residuals below 2^-128: some prove none
    EnclosureOptions shrunk;
    shrunk.radius_scale = 0.0;  // the pass's and the products' radii gone: no longer an enclosure
    CHECK(path_term_misses(m, Variant::san(), X0, shrunk, least) > 0);
  }
  SECTION("a head sequence of the wrong length or a skip without one is refused") {
    const Model m = san_model(2, 2, 31, 0.5);
    EnclosureOptions o;
    o.record_attention = true;
    const auto t = forward_enclosed<mpfr_real<19>>(m, Variant::san(), convert<mpfr_real<19>>(test_input(22)), o);
    CHECK_THROWS_AS(enclose_path_terms(m, t, {{0}}), std::invalid_argument);
    CHECK_THROWS_AS(enclose_path_terms(m, t, {{0, -1}}), std::invalid_argument);
    CHECK_THROWS_AS(enclose_path_terms(m, t, {{0, 2}}), std::invalid_argument);
    CHECK(enclose_path_terms(m, t, {{1, 0}, {1, 1}}).size() == 2);
  }
}

TEST_CASE("enclosed embeddings: ALBERT's mapping, OPT's projection and Gemma's √d contain the 4,098-bit values") {
  // The 65-bit balls against embed_tokens at 4,098 bits (misses_against); a ball without its radius misses them.
  using S = mpfr_real<19>;
  using T = mpfr_real<1233>;
  RandomModelSpec s;
  s.arch = {1, 2, 8, 4, 4, 16, Variant{}, Activation::gelu, 1e-5, false};
  s.std = 0.5;
  s.seed = 7;
  s.vocab = 20;
  const Model bert = random_model(s);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0.0, 0.7);
  const auto draw = [&](Eigen::Index rows, Eigen::Index cols) {
    MatrixXd M(rows, cols);
    for (Eigen::Index j = 0; j < cols; ++j)
      for (Eigen::Index i = 0; i < rows; ++i) M(i, j) = normal(rng);
    return M;
  };
  std::vector<Embeddings> cases(3);
  cases[0].kind = Layout::albert;  // LayerNorm at width e = 6, then the mapping to d = 8 and its bias
  cases[0].word = draw(20, 6);
  cases[0].position = draw(16, 6);
  cases[0].token_type = draw(2, 6);
  cases[0].ln_g = draw(6, 1).col(0);
  cases[0].ln_b = draw(6, 1).col(0);
  cases[0].mapping = draw(6, 8);
  cases[0].mapping_b = draw(8, 1).col(0);
  cases[1].kind = Layout::opt;  // word rows of width 6, projected to 8, plus positions
  cases[1].word = draw(20, 6);
  cases[1].position = draw(16, 8);
  cases[1].mapping = draw(6, 8);
  cases[2].kind = Layout::gemma;  // √8 · word rows
  cases[2].word = draw(20, 8);
  const std::vector<long> ids{3, 1, 4, 1, 5, 9, 2};
  for (const Embeddings& e : cases) {
    const Model m(bert.arch(), bert.layers(), e, to_string(e.kind) + "-embeddings");
    const auto [missed, differ] = misses_against(embed_enclosed<S>(m, ids), embed_tokens<T>(m, ids));
    CAPTURE(to_string(e.kind));
    CHECK(missed == 0);
    CHECK(differ > 0);
  }
}

TEST_CASE("enclosed pass: XLNet's, T5's and Gemma 2's position terms, partial rotary and ViT's pixels contain the "
          "4,098-bit pass") {
  // (tests/cli/certified_families.sh checks every family's enclosures against the mpmath reference)
  using S = mpfr_real<19>;
  using T = mpfr_real<1233>;
  RandomModelSpec base;
  base.arch = {2, 2, 8, 4, 4, 16, Variant{}, Activation::gelu, 1e-5, false};
  base.std = 0.5;
  base.bias_std = 0.1;
  base.seed = 17;
  std::vector<std::pair<std::string, RandomModelSpec>> cases;
  RandomModelSpec xlnet = base;
  xlnet.arch.xlnet_relative = true;
  xlnet.arch.clamp_len = 3;
  cases.push_back({"xlnet", xlnet});
  RandomModelSpec t5 = base;
  t5.arch.rel_buckets = 8;
  t5.arch.rel_max_distance = 6;
  t5.arch.score_scale_base = 1.0;
  cases.push_back({"t5", t5});
  RandomModelSpec capped = base;
  capped.arch.softcap = 0.75;  // below the logits' size: the cap bites
  capped.arch.rope_theta = 10000.0;
  cases.push_back({"softcap", capped});
  RandomModelSpec partial = base;
  partial.arch.rope_theta = 500000.5;
  partial.arch.rotary_dims = 2;
  cases.push_back({"partial-rotary", partial});
  const MatrixXd X0 = test_input(3);
  for (const auto& [name, spec] : cases) {
    const Model m = random_model(spec);
    for (const Variant v : {m.arch().variant, Variant::san(MaskKind::causal)}) {
      CAPTURE(name, to_string(v.mlp));
      const auto [missed, differ] = misses_against(forward_enclosed<S>(m, v, convert<S>(X0)),
                                                   forward<T>(m, v, convert<T>(X0)));
      CHECK(missed == 0);
      CHECK(differ > 0);  // the radii are needed
    }
  }
  RandomModelSpec vit = base;
  vit.embeddings = Layout::vit;
  vit.image_size = 8;
  vit.patch_size = 4;
  vit.channels = 3;
  const Model m = random_model(vit);
  std::vector<double> pixels(192);
  for (std::size_t k = 0; k < pixels.size(); ++k) pixels[k] = std::sin(0.37 * static_cast<double>(k));
  const InputSpec image = InputSpec::from_pixels(pixels, {3, 8, 8}, "image");
  const auto [missed, differ] = misses_against(pixels_enclosed<S>(m, image), make_input<T>(m, image));
  CHECK(missed == 0);
  CHECK(differ > 0);
}

/// X0 as an exact ball.
template <class S> BallMatrix<S> exact_ball(const MatrixXd& X0) {
  return {convert<S>(X0), RadiusMatrix::zero(X0.rows(), X0.cols())};
}

TEST_CASE("enclosed centred pass: every variant's enclosures contain the mpmath values (128, 257 bits)") {
  struct Case {
    Variant v;
    Activation act;
  };
  const Case cases[] = {
      {Variant::san(), Activation::gelu},
      {Variant::san(MaskKind::causal), Activation::gelu},
      {{true, MlpKind::none, LayerNormKind::none, MaskKind::causal}, Activation::gelu},
      {{true, MlpKind::residual, LayerNormKind::post, MaskKind::none}, Activation::gelu},
      {{false, MlpKind::residual, LayerNormKind::post, MaskKind::none}, Activation::gelu_tanh},
      {{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal}, Activation::gelu_fast},
      {{false, MlpKind::plain, LayerNormKind::none, MaskKind::none}, Activation::relu},
      {{false, MlpKind::residual, LayerNormKind::pre, MaskKind::none}, Activation::silu},
  };
  int k = 0;
  for (const Case& c : cases) {
    const Model m = test::width8_model(4, c.act, 140 + static_cast<std::uint64_t>(k), 0.6);
    const MatrixXd X0 = test_input(24);
    const auto ref = reference(m, X0, c.v, "centred" + std::to_string(k++), 1500, 300);
    CAPTURE(k, to_string(c.act), to_string(c.v));
    int d128 = 0, d257 = 0;
    loose = 0;
    CHECK(misses(forward_centred_enclosed<mpfr_real<38>>(m, c.v, exact_ball<mpfr_real<38>>(X0)), ref, d128) == 0);
    CHECK(misses(forward_centred_enclosed<mpfr_real<77>>(m, c.v, exact_ball<mpfr_real<77>>(X0)), ref, d257) == 0);
    CAPTURE(d128, d257);
    CHECK(loose == 0);
    CHECK(d257 >= 40);
  }
}

TEST_CASE("enclosed centred pass: a collapsing SAN to below 1e-200 proven at 128 bits; shrunk radii caught") {
  // The direct pass needs 4,096 bits for this model (the test above); the
  // centred one keeps the residual's relative accuracy at 128.
  const Model m = san_model(6, 1, 91, 1.0);
  const MatrixXd X0 = test_input(92);
  const auto ref = reference(m, X0, Variant::san(), "deep", 6000, 1600);
  REQUIRE(log10_abs(ref.back().at("relative_residual")) < -200);
  int digits = 0;
  loose = 0;
  using S = mpfr_real<38>;
  CHECK(misses(forward_centred_enclosed<S>(m, Variant::san(), exact_ball<S>(X0)), ref, digits) == 0);
  CAPTURE(digits);
  CHECK(loose == 0);
  CHECK(digits >= 20);
  EnclosureOptions opt;
  opt.radius_scale = 0.0;  // no longer an enclosure: the midpoints alone miss the exact values
  CHECK(misses(forward_centred_enclosed<S>(m, Variant::san(), exact_ball<S>(X0), opt), ref, digits) > 0);
}

TEST_CASE("enclosed centred pass: row bounds through the weights keep 15 digits over 6 layers of width 256") {
  // Entrywise radii grow by |W| at each product (4.5 bits at width 768, the
  // test above's models are 8 wide); the row bounds by ‖W‖₂.
  const Model m = san_model(6, 4, 17, 0.02, 256, 64, 0.02);
  Rng rng(18);
  MatrixXd X0(32, 256);
  for (Eigen::Index i = 0; i < X0.size(); ++i) X0(i) = rng.gaussian();
  using S = mpfr_real<38>;
  const auto least_digits = [&](bool row_bounds) {
    EnclosureOptions opt;
    opt.row_bounds = row_bounds;
    const auto t = forward_centred_enclosed<S>(m, Variant::san(), exact_ball<S>(X0), opt);
    int least = 1 << 20;
    for (int l = 1; l <= t.layers(); ++l) {
      const Interval v = enclose_centred_residual(t, l).relative_residual;
      BigReal mid = v.lo;
      mpfr_add(mid.backend().data(), v.lo.backend().data(), v.hi.backend().data(), MPFR_RNDN);
      mpfr_div_2ui(mid.backend().data(), mid.backend().data(), 1, MPFR_RNDN);
      least = std::min(least, proven_digits(v, mid, 200));
    }
    return least;
  };
  const int with_rows = least_digits(true), entrywise = least_digits(false);
  CAPTURE(with_rows, entrywise);
  CHECK(with_rows >= 15);
  CHECK(entrywise <= with_rows - 4);
}

TEST_CASE("enclosed centred pass: a collapsing SAN+MLP through the mean value form, to below 1e-100") {
  // LayerNorm and the MLP's activation on 1cᵀ + R with R far below c: every
  // regime of the activation difference is crossed on the way down.
  const Variant v{false, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  for (const Activation act : {Activation::gelu, Activation::relu}) {
    const Model m = test::width8_model(7, act, 171, 0.8);
    const MatrixXd X0 = test_input(25);
    const auto ref = reference(m, X0, v, std::string("deep_mlp_") + to_string(act), 4000, 1000);
    CAPTURE(to_string(act));
    REQUIRE(log10_abs(ref.back().at("relative_residual")) < -100);
    int digits = 0;
    loose = 0;
    // 257 bits: the row bounds carry the centre's error into the collapsed
    // rows second order (relative to R): 45 and 46 digits after 7 layers
    // (40 when those rows kept their entrywise boxes)
    using S = mpfr_real<77>;
    CHECK(misses(forward_centred_enclosed<S>(m, v, exact_ball<S>(X0)), ref, digits) == 0);
    CAPTURE(digits, least_where);
    CHECK(digits >= 43);
  }
}

/// How many entries of layer l's exact centre and residual (the mean of a
/// 4,098-bit pass's X and X − 1 mean) lie outside the centred balls, over
/// every layer; and how many differ from the midpoints at all.
template <class S, class T>
std::pair<int, int> centred_misses_against(const EnclosedCentredTrace<S>& t, const ForwardTrace<T>& truth) {
  REQUIRE(t.R.size() == truth.X.size());
  int missed = 0, differ = 0;
  for (std::size_t l = 0; l < t.R.size(); ++l) {
    Matrix<T> R = truth.X[l];
    const Matrix<T> c = R.colwise().sum() / T(static_cast<double>(R.rows()));
    for (Eigen::Index i = 0; i < R.rows(); ++i) R.row(i) -= c.row(0);
    for (const auto& [m, d] : {misses_against(t.c[l], c), misses_against(t.R[l], R)}) {
      missed += m;
      differ += d;
    }
  }
  return {missed, differ};
}

TEST_CASE("enclosed centred pass: every family's layers contain the 4,098-bit pass") {
  // Rotary angles (full, partial, a base and factor per layer), XLNet's
  // relative terms, T5's bucket bias, Gemma 2's soft cap (biting) and
  // window, the query/key norms (gain w and 1 + w), RMSNorm (g and 1 + g),
  // sandwich norms and parallel blocks, the plain and the gated MLPs
  // (SwiGLU, GeGLU), at 128 bits: the own variant, the SAN with and without
  // the causal mask, the attention with the own norms, and the SAN + MLP
  // without a parallel block (tests/cli/certified_families.sh checks the
  // SANs against the mpmath reference).
  using S = mpfr_real<38>;
  using T = mpfr_real<1233>;
  const std::vector<std::pair<std::string, FamilyOptions>> families = [] {
    std::vector<std::pair<std::string, FamilyOptions>> f;
    FamilyOptions none, xlnet, t5, neox, gemma2, gemma3;
    xlnet.clamp_len = 3;
    t5.rel_buckets = 8;
    t5.rel_max_distance = 6;
    neox.rotary_fraction = 0.5;
    gemma2.sliding_window = 2;
    gemma2.softcap = 0.75;
    gemma2.query_pre_attn_scalar = 3;
    gemma3.sliding_window = 2;
    gemma3.layer_pattern = 2;
    gemma3.rope_local_base = 10;
    gemma3.rope_linear_factor = 4;
    return std::vector<std::pair<std::string, FamilyOptions>>{
        {"llama", none}, {"xlnet", xlnet}, {"t5", t5},         {"gpt_neox", neox},
        {"phi", none},   {"gemma2", gemma2}, {"qwen3", none}, {"gemma3", gemma3}};
  }();
  const MatrixXd X0 = test_input(3);
  for (const auto& [layout, options] : families) {
    InitOptions o;
    o.layers = 2;
    o.heads = 2;
    o.d_model = 8;
    o.d_ff = 12;
    o.std = 0.5;
    o.bias_std = layout == "phi" || layout == "qwen3" ? 0.1 : 0.0;
    o.seed = 11;
    o.vocab = 20;
    o.layout = layout;
    o.family_options = options;
    const Model m = random_model(plan_random_checkpoint(o, OptionSpelling::cli).spec);
    std::vector<Variant> variants{Variant::san(), Variant::san(MaskKind::causal),
                                  {true, MlpKind::none, m.arch().variant.layernorm, m.arch().variant.mask},
                                  m.arch().variant};
    if (!m.arch().parallel_residual)  // a parallel block's MLP branch has no plain form
      variants.push_back({false, MlpKind::plain, LayerNormKind::none, MaskKind::none});
    for (const Variant& v : variants) {
      CAPTURE(layout, to_string(v));
      const auto [missed, differ] =
          centred_misses_against(forward_centred_enclosed<S>(m, v, exact_ball<S>(X0)), forward<T>(m, v, convert<T>(X0)));
      CHECK(missed == 0);
      CHECK(differ > 0);  // the radii are needed
    }
  }
}

/// LayerNorm (stage 0), the MLP (stage 1) or RMSNorm with gain 1 + w (stage 2) of the centred enclosure on a
/// ball split whose rows carry bounds 4 times tighter than their radii's:
/// every sampled point of the input (within both) maps into the output's
/// balls and row bounds (the exact split: c' = the rows' mean, R' = the rest,
/// at 512 bits), and some come within 10 (LayerNorm) or 100 (MLP) times
/// their rows' bounds; returns the least ratio of the rows' bounds without row bounds (the boxes') to those with.
/// Collapsed: R is 1e-12 of c and known to 1e-34, c to 1e-16 (the centre's
/// error far above R's, as in a collapsing SAN+MLP: its second-order effect
/// on R', about 1e-28, dominates R's own).
double sampled_stage(int stage, Activation act, std::uint64_t seed, bool collapsed = false) {
  using S = mpfr_real<38>;
  using T = mpfr_real<154>;
  namespace E = enclosure_detail;
  RandomModelSpec spec;
  spec.arch = {1, 4, 32, 8, 8, 64, Variant{}, act, 0.0009765625, false};  // eps 2^-10: exact as decimal and double
  spec.std = 1.0 / std::sqrt(32.0);
  spec.bias_std = 0.1;
  spec.seed = seed;
  const Model m = random_model(spec);
  LayerWeights lw = m.layer(0);
  Rng rng(seed + 1);
  for (Eigen::Index j = 0; j < lw.ln1_g.size(); ++j) lw.ln1_g(j) = 1 + 0.3 * rng.gaussian();
  const Architecture& a = m.arch();
  const Eigen::Index n = 6, d = 32;
  MatrixXd c0(1, d), R0(n, d);
  for (Eigen::Index j = 0; j < d; ++j) c0(0, j) = rng.gaussian();
  for (Eigen::Index i = 0; i < R0.size(); ++i) R0(i) = (collapsed ? 1e-12 : 0.5) * rng.gaussian();
  const double r = collapsed ? 1e-16 : 1e-20, rR = collapsed ? 1e-34 : r;  // entrywise radii of c and R; row bounds r·√d/4
  E::BallSplit<S> x{{convert<S>(c0), RadiusMatrix::of(MatrixXd::Constant(1, d, r))},
                    {convert<S>(R0), RadiusMatrix::of(MatrixXd::Constant(n, d, rR))},
                    RadiusMatrix::of(MatrixXd::Constant(1, 1, r * std::sqrt(32.0) / 4)),
                    RadiusMatrix::of(MatrixXd::Constant(n, 1, rR * std::sqrt(32.0) / 4))};
  detail::PackedLayer<S> w;
  detail::pack_into(w, a, lw, true);
  // RMSNorm's stored gain w for the gain 1 + w (Gemma's form), its bias none.
  const VectorXd offset_gain = (lw.ln1_g.array() - 1.0).matrix(), no_bias = VectorXd::Zero(d);
  const auto stage_of = [&](bool row_bounds) {
    if (stage == 0)
      return E::norm_centred(detail::NormForm{NormKind::layer, a.ln_eps, false}, x, lw.ln1_g, lw.ln1_b, row_bounds, 128);
    if (stage == 2)
      return E::norm_centred(detail::NormForm{NormKind::rms, a.ln_eps, true}, x, offset_gain, no_bias, row_bounds, 128);
    return E::mlp_centred(a, w, lw, x, row_bounds, 128);
  };
  const E::BallSplit<S> y = stage_of(true), boxes = stage_of(false);
  REQUIRE(y.c_rows.m.size() == 1);
  REQUIRE(y.R_rows.m.size() == n);
  const auto within = [](const T& exact, const S& mid, const UpperBound& rad) {
    return abs(BigReal(exact) - BigReal(mid)) <= rad.to_big();
  };
  double least = 1e300;
  for (Eigen::Index i = 0; i < n; ++i)
    least = std::min(least, boxes.R_rows.at(i, 0).to_big().convert_to<double>() /
                                y.R_rows.at(i, 0).to_big().convert_to<double>());
  int outside = 0;
  double reached = 0;  // the largest distance of a sampled row over its bound
  for (int k = 0; k < 40; ++k) {
    // A point within the radii and the row bounds (an extreme one every other time: ±r on a quarter of a row's entries).
    const auto offsets = [&](Eigen::Index rows, double r) {
      MatrixXd o(rows, d);
      for (Eigen::Index i = 0; i < rows; ++i) {
        for (Eigen::Index j = 0; j < d; ++j)
          o(i, j) = k % 2 ? (j % 4 == k % 8 / 2 ? (rng.gaussian() > 0 ? r : -r) : 0.0) : r * (2 * rng.uniform() - 1);
        const double norm = o.row(i).norm(), nu = r * std::sqrt(32.0) / 4 * (1 - 1e-9);
        if (norm > nu) o.row(i) *= nu / norm;
      }
      return o;
    };
    Matrix<T> X = convert<T>(R0) + convert<T>(offsets(n, rR));
    const Matrix<T> c = convert<T>(c0) + convert<T>(offsets(1, r));
    for (Eigen::Index i = 0; i < n; ++i) X.row(i) += c.row(0);
    Matrix<T> Y;
    if (stage == 0) {
      Y = layer_norm<T>(X, lw.ln1_g, lw.ln1_b, a.ln_eps);
    } else if (stage == 2) {
      Y = rms_norm<T>(X, offset_gain, no_bias, a.ln_eps, true);
    } else {
      Matrix<T> H = X * convert<T>(lw.W_1);
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < H.cols(); ++j) H(i, j) = activate<T>(H(i, j) + T(lw.b_1(j)), act);
      Y = H * convert<T>(lw.W_2);
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < d; ++j) Y(i, j) += T(lw.b_2(j));
    }
    const RowVector<T> mean = Y.colwise().mean();
    T c_dist = 0;
    for (Eigen::Index j = 0; j < d; ++j) {
      outside += !within(mean(j), y.c.mid(0, j), y.c.rad.at(0, j));
      c_dist += (mean(j) - T(y.c.mid(0, j))) * (mean(j) - T(y.c.mid(0, j)));
    }
    outside += !(BigReal(sqrt(c_dist)) <= y.c_rows.at(0, 0).to_big());
    for (Eigen::Index i = 0; i < n; ++i) {
      T dist = 0;
      for (Eigen::Index j = 0; j < d; ++j) {
        const T e = Y(i, j) - mean(j);
        outside += !within(e, y.R.mid(i, j), y.R.rad.at(i, j));
        dist += (e - T(y.R.mid(i, j))) * (e - T(y.R.mid(i, j)));
      }
      outside += !(BigReal(sqrt(dist)) <= y.R_rows.at(i, 0).to_big());
      reached = std::max(reached, (BigReal(sqrt(dist)) / y.R_rows.at(i, 0).to_big()).convert_to<double>());
    }
  }
  CHECK(outside == 0);
  // The bounds' slack: sampled rows reach 13% of LayerNorm's, 2-5% of the MLP's
  // (‖W‖₂ and max|act'| against what random directions see); collapsed,
  // 2.7% of LayerNorm's (its curvature bound 6 max|γ|/(√d s²) is a worst case).
  CAPTURE(reached);
  CHECK(reached >= (stage != 1 ? (collapsed ? 0.02 : 0.1) : 0.01));
  return least;
}

TEST_CASE("centred LayerNorm, RMSNorm and MLP with row bounds: sampled points stay inside; the rows' bounds beat the "
          "radii's") {
  for (const bool collapsed : {false, true})
    for (const Activation act : {Activation::gelu, Activation::relu, Activation::silu, Activation::gelu_tanh}) {
      for (int stage : {0, 1, 2}) {
        CAPTURE(collapsed, to_string(act), stage);
        const double gain = sampled_stage(stage, act, 300 + static_cast<std::uint64_t>(stage), collapsed);
        CAPTURE(gain);
        // The boxes' radii sum the input's entrywise radii (√32 times the
        // rows' bounds here) in norm, the rows' bounds move by Lipschitz
        // constants, and collapsed, c's error enters them second order. In
        // LayerNorm's boxes it does too (their mean value form), so there the
        // rows gain only what R's own error moves (1.3×: c's error dominates);
        // RMSNorm's rows lose to its boxes there (0.60×: the curvature bound
        // 6 max|γ|/(√d s²) is a worst case, and the box of an uncentred c is as tight).
        CHECK(gain >= (!collapsed ? 2.0 : stage == 0 ? 1.2 : stage == 2 ? 0.5 : 2.0));
      }
    }
}

TEST_CASE("second-derivative bounds hold every difference quotient of act', across GELU's and SiLU's minimum") {
  using S = mpfr_real<38>;
  namespace E = enclosure_detail;
  const auto slope_at = [](const S& x, Activation act) { return E::iv_derivative(E::iv_point(x), act).lo; };
  for (const Activation act : {Activation::gelu, Activation::gelu_tanh, Activation::gelu_fast, Activation::silu}) {
    for (const double centre : {-2.4, -1.28, -0.75, 0.0, 0.4, 1.7, 2.5}) {
      const S mid(centre);
      const UpperBound M = E::second_derivative_bound(E::iv_of(mid, UpperBound::of(0.25)), act);
      CAPTURE(to_string(act), centre);
      REQUIRE(M.is_finite());
      CHECK(M.to_big() < BigReal(1.2));  // and not vacuous (|act''| ≤ 0.8 for the GELUs, 0.5 for SiLU)
      for (double a = -0.25; a <= 0.25; a += 0.05)
        for (double b = a + 0.01; b <= 0.25; b += 0.07) {
          const S x = mid + S(a), y = mid + S(b);
          const S q = abs(S(slope_at(y, act) - slope_at(x, act)) / S(y - x));
          CHECK(BigReal(q) <= M.to_big() + BigReal(1e-30));
        }
    }
  }
  // relu: act' jumps at 0, so no bound across it; 0 on either side.
  CHECK(E::second_derivative_bound(E::iv_of(S(1), UpperBound::of(0.5)), Activation::relu).is_zero());
  CHECK(E::second_derivative_bound(E::iv_of(S(-1), UpperBound::of(0.5)), Activation::relu).is_zero());
  CHECK(!E::second_derivative_bound(E::iv_of(S(0.25), UpperBound::of(0.5)), Activation::relu).is_finite());
}

TEST_CASE("derivative intervals bound every difference quotient, across GELU's and SiLU's minimum") {
  using S = mpfr_real<38>;
  namespace E = enclosure_detail;
  for (const Activation act :
       {Activation::relu, Activation::gelu, Activation::gelu_tanh, Activation::gelu_fast, Activation::silu}) {
    for (const double centre : {-1.28, -0.75, 0.0, 0.4, 2.5}) {
      const S mid(centre);
      const auto box = E::iv_of(mid, UpperBound::of(0.25));
      const auto dv = E::iv_derivative(box, act);
      CAPTURE(to_string(act), centre);
      for (double a = -0.25; a <= 0.25; a += 0.05)
        for (double b = a + 0.01; b <= 0.25; b += 0.07) {
          const S x = mid + S(a), y = mid + S(b);
          const S q = S(activate(y, act) - activate(x, act)) / S(y - x);
          CHECK(dv.lo <= q + S(1e-30));
          CHECK(q - S(1e-30) <= dv.hi);
        }
      CHECK(dv.hi - dv.lo < S(2));  // and not vacuous
    }
  }
}

TEST_CASE("activation intervals enclose the function on both sides of GELU's and SiLU's minimum") {
  using S = mpfr_real<38>;
  // GELU's minimum is near x = −0.75, SiLU's near −1.28: balls straddling them
  for (const auto& [act, centre] : {std::pair{Activation::gelu, -0.7517916}, std::pair{Activation::silu, -1.2784645},
                                    std::pair{Activation::gelu_tanh, -0.7522}}) {
    const S mid(centre);
    const UpperBound r = UpperBound::of(0.3);
    const auto v = enclosure_detail::iv_activate(enclosure_detail::iv_of(mid, r), act);
    CAPTURE(to_string(act));
    for (double t = -0.3; t <= 0.3; t += 0.01) {
      const S x = mid + S(t);
      const S y = activate(x, act);
      CHECK(v.lo <= y);
      CHECK(y <= v.hi);
    }
    CHECK(v.hi - v.lo < S(1));  // and not vacuous
  }
}

/// Two rows: min_c ‖X − 1cᵀ‖_{1,∞} = √(max_j |Δ_j| · Σ_j |Δ_j| / 2), Δ = x_1 − x_2, at
/// the midpoint of the rows (each column's 1-norm is at least |Δ_j|, the larger row sum
/// at least half of Σ|Δ_j|, and the midpoint attains both), at 1,200 bits.
BigReal two_row_minimum(const MatrixXd& X) {
  BigReal most(0, 400), sum(0, 400);
  for (Eigen::Index j = 0; j < X.cols(); ++j) {
    const BigReal delta = abs(BigReal(X(0, j), 400) - BigReal(X(1, j), 400));
    if (delta > most) most = delta;
    sum += delta;
  }
  return BigReal(sqrt(most * sum / 2), 400);
}

bool within(const BigReal& lo, const BigReal& x, const BigReal& hi) {
  return mpfr_cmp(lo.backend().data(), x.backend().data()) <= 0 &&
         mpfr_cmp(x.backend().data(), hi.backend().data()) <= 0;
}

TEST_CASE("optimal centre: two rows' exact minimum lies in every enclosure; a shrunk radius is caught") {
  using S = mpfr_real<38>;
  std::mt19937_64 rng(17);
  std::normal_distribution<double> g(0.0, 1.0);
  for (int trial = 0; trial < 4; ++trial) {
    const Eigen::Index d = 3 + trial;
    MatrixXd X(2, d);
    for (Eigen::Index j = 0; j < d; ++j)
      for (Eigen::Index i = 0; i < 2; ++i) X(i, j) = g(rng);
    const BigReal truth = two_row_minimum(X);
    const auto lower_end = [](const ResidualEnclosure& e) { return e.res_composite_lower->lo; };
    // The exact matrix as a ball of radius 0: lower and upper ends within double's search of the optimum.
    const BallMatrix<S> exact{convert<S>(X), RadiusMatrix::zero(2, d)};
    const ResidualEnclosure e = enclose_residual(exact, Center::optimal);
    REQUIRE(e.res_composite_lower);
    CHECK(within(lower_end(e), truth, e.res_composite.hi));
    CHECK(BigReal(e.res_composite.hi / truth - 1) < BigReal(1e-12));
    CHECK(BigReal(1 - lower_end(e) / truth) < BigReal(1e-30));
    // The same as X = 1cᵀ + R with an exact centre c (the centred pass's form).
    RowVector<S> c(d);
    for (Eigen::Index j = 0; j < d; ++j) c(j) = S(std::ldexp(std::round(std::ldexp(X(0, j), 20)), -20));
    Matrix<S> R = convert<S>(X);
    for (Eigen::Index j = 0; j < d; ++j)
      for (Eigen::Index i = 0; i < 2; ++i) R(i, j) -= c(j);  // exact at 128 bits
    const ResidualEnclosure ec = enclose_centred_residual(BallMatrix<S>{Matrix<S>(c), RadiusMatrix::zero(1, d)},
                                                          BallMatrix<S>{R, RadiusMatrix::zero(2, d)}, Center::optimal);
    CHECK(within(lower_end(ec), truth, ec.res_composite.hi));
    // A midpoint 1e-10 (relative) off the exact matrix: its radius 1.5e-10·|X| covers it; radius 0 is caught.
    Matrix<S> off = convert<S>(X);
    for (Eigen::Index j = 0; j < d; ++j)
      for (Eigen::Index i = 0; i < 2; ++i) off(i, j) *= S(1 + 1e-10);
    MatrixXd cover = X.cwiseAbs() * 1.5e-10;
    const ResidualEnclosure wide = enclose_residual(BallMatrix<S>{off, RadiusMatrix::of(cover)}, Center::optimal);
    CHECK(within(lower_end(wide), truth, wide.res_composite.hi));
    const ResidualEnclosure shrunk = enclose_residual(BallMatrix<S>{off, RadiusMatrix::zero(2, d)}, Center::optimal);
    CHECK_FALSE(within(lower_end(shrunk), truth, shrunk.res_composite.hi));
  }
  // The median centre is not enclosed.
  const BallMatrix<mpfr_real<38>> any{convert<mpfr_real<38>>(MatrixXd::Ones(2, 2)), RadiusMatrix::zero(2, 2)};
  CHECK_THROWS_WITH(enclose_residual(any, Center::median), Catch::Contains("median centre is not enclosed"));
}

TEST_CASE("enclosed passes: double is refused") {
  RandomModelSpec s;
  s.arch = {2, 2, 8, 4, 4, 16, Variant{}, Activation::gelu, 1e-5, false};
  s.seed = 3;
  const Model m = random_model(s);
  CHECK_THROWS_WITH(forward_enclosed<double>(m, Variant::san(), test_input(1)), Catch::Contains("MPFR tier"));
  CHECK_THROWS_WITH(forward_centred_enclosed<double>(m, Variant::san(), exact_ball<double>(test_input(1))),
                    Catch::Contains("MPFR tier"));
}

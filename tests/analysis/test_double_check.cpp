// The rounding check of --precision double (double_check.hpp) against
// independent 257-bit runs: over the real checkpoints and constructed
// near-cancellation cases, a printed value never carries more digits than
// agree with the 257-bit value, a value printed as "< 1e-N" is below that
// bound, and well-resolved values (>= 13 digits agree) print >= 10 digits
// (in the 75 random cases this last is counted, not required, for the
// skip-only blocks: there a 1-norm flat in the rounding is given its matrix's
// spread and prints fewer digits than it has).
#include "support/counting_source.hpp"
#include "support/helpers.hpp"

#include "sanpath/analysis/double_check.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/model/random.hpp"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <thread>

using namespace sanpath;

namespace {

struct Tally {
  int quantities = 0;    ///< compared with the 257-bit run
  int well_resolved = 0;  ///< of which double agrees with 257 bits to >= 13 digits
  int below = 0;         ///< of which printed as an upper bound
  int near_cancel = 0;   ///< of which double agrees to <= 9 digits (cancellation lost digits)
  int min_slack = 99;    ///< least (agreeing digits − printed digits) over printed values
  int weak = 0;          ///< well resolved but printed with < 10 digits (allowed where not required)
};

/// Compares every reported quantity of `a` with the 257-bit measurement.
/// `require_well_resolved`: values that agree with 257 bits to >= 13 digits
/// must print >= 10 (otherwise they are only counted in t.weak).
void compare(const ForwardAnalysis& a, const std::vector<LayerStats>& ref, Tally& t, bool require_well_resolved) {
  REQUIRE(a.check);
  REQUIRE(a.check_method == CheckMethod::rounding);
  REQUIRE(a.layers.size() == ref.size());
  for (std::size_t l = 0; l < ref.size(); ++l) {
    const LayerReport& r = a.layers[l];
    const LayerStats& s = ref[l];
    const std::vector<std::pair<const Quantity*, const BigReal*>> pairs = {
        {&r.res_one, &s.res_one},
        {&r.res_inf, &s.res_inf},
        {&r.res_composite, &s.res_composite},
        {&r.res_frobenius, &s.res_frobenius},
        {&r.norm_composite, &s.norm_composite},
        {&r.norm_frobenius, &s.norm_frobenius},
        {&r.relative_residual, &s.relative_residual}};
    for (const auto& [q, exact] : pairs) {
      ++t.quantities;
      const int agree = agreeing_digits(q->value, *exact, 17);
      CAPTURE(l, q->str(), to_sci(*exact, 20), agree, q->digits.value_or(-1));
      if (agree <= 9) ++t.near_cancel;
      if (q->below_resolution) {
        ++t.below;
        CHECK(abs(*exact) < q->bound);
        continue;
      }
      REQUIRE(q->digits);
      CHECK(*q->digits <= agree);
      t.min_slack = std::min(t.min_slack, agree - *q->digits);
      if (agree >= 13) {
        ++t.well_resolved;
        if (*q->digits < 10) ++t.weak;
        if (require_well_resolved) CHECK(*q->digits >= 10);
      }
    }
  }
}

void check_case(const Model& m, const Variant& v, const InputSpec& in, Center c, Tally& t,
                bool require_well_resolved = true) {
  PrecisionRequest req = PrecisionRequest::parse("double");
  const ForwardAnalysis a = analyze_forward(m, v, in, req, c);
  compare(a, measure_layers<mpfr_real<77>>(m, v, in, c), t, require_well_resolved);
}

Model random_bert(int layers, std::uint64_t seed, Variant v) {
  RandomModelSpec s;
  s.arch = {layers, 4, 32, 8, 8, 64, v, Activation::gelu, 1e-12, false};
  s.std = 0.02;
  s.seed = seed;
  return random_model(s);
}

InputSpec random_in(int n, std::uint64_t seed, std::optional<double> residual = std::nullopt) {
  RandomInputSpec r;
  r.n = n;
  r.seed = seed;
  r.residual = residual;
  return InputSpec::from_random(r);
}

std::string shared_models() {
  const std::string dir = test::real_models_dir();
  if (dir.empty() && std::getenv("CI")) FAIL("CI: the shared real-models folder is missing");
  return dir;
}

}  // namespace

TEST_CASE("rounding-check digits never exceed agreement with 257 bits, near-cancellation cases included") {
  Tally t;
  // A pure SAN at depth: double loses the residual from layer 2 on.
  const Model san = random_bert(6, 4, Variant::san());
  for (std::uint64_t seed : {5, 6}) check_case(san, Variant::san(), random_in(8, seed), Center::mean, t);
  check_case(san, Variant::san(), random_in(8, 7), Center::median, t);
  CHECK(t.below >= 4);  // the collapsed layers print as bounds

  // Nearly rank-1 inputs: residual 1e-9 and 1e-13 of an O(1) matrix.
  const Model post = random_bert(3, 2, Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none});
  for (double r : {1e-9, 1e-13}) check_case(post, Variant::san(), random_in(8, 3, r), Center::mean, t);
  check_case(post, post.arch().variant, random_in(8, 3, 1e-9), Center::mean, t);

  // LayerNorm of nearly constant rows (pre-LN: the first operation).
  const Variant pre{true, MlpKind::residual, LayerNormKind::pre, MaskKind::none};
  const Model pre_model = random_bert(2, 3, pre);
  MatrixXd X = random_input({8, 32, 11, 1.0, 1.0, std::nullopt});
  for (Eigen::Index i = 0; i < X.rows(); ++i) {  // row i: a_i·1 + 1e-7·(noise)
    const double a = X(i, 0);
    X.row(i) = (X.row(i).array() * 1e-7 + a).matrix();
  }
  check_case(pre_model, pre, InputSpec::from_matrix(X, "nearly constant rows"), Center::mean, t);
  CHECK(t.near_cancel >= 10);

  // Real checkpoints, own architecture and pure SAN.
  const std::string dir = shared_models();
  if (dir.empty()) {
    WARN("shared real-models folder absent: real checkpoints skipped");
  } else {
    // The Llama family (rotary embeddings, RMSNorm, SwiGLU, grouped-query
    // attention, causal mask) as well.
    for (const std::string name : {"bert-ticket-classifier", "gpt2-capp", "llama-stories260k", "llama-tinystories-xs"}) {
      CAPTURE(name);
      const Model m = load_model(dir + "/" + name);
      const InputSpec in = InputSpec::from_tokens({2, 15, 27, 3, 40, 7, 11, 9});
      for (const Variant& v : {m.arch().variant, Variant::san(m.arch().variant.mask)})
        check_case(m, v, in, Center::mean, t);
    }
    CHECK(t.well_resolved >= 50);
  }
  CHECK(t.quantities >= 50);
  std::printf("compared %d quantities: %d with >= 13 digits in double, %d with <= 9, %d printed as bounds; "
              "least margin (agreeing − printed digits) %d\n",
              t.quantities, t.well_resolved, t.near_cancel, t.below, t.min_slack);
}

TEST_CASE("rounding check over 75 random cases: SAN at depth, skip-only and full blocks on nearly rank-1 inputs") {
  // Inputs with initial residual 1e0 … 1e-13 (offset O(1)), pre- and post-LN,
  // mean and median centres; widths of the weights 0.02 … 0.06.
  Tally t;
  for (int seed = 1; seed <= 25; ++seed) {
    RandomModelSpec s;
    s.arch = {6, 4, 32, 8, 8, 64, Variant::san(), Activation::gelu, 1e-12, false};
    s.std = 0.02 + 0.01 * (seed % 5);
    s.seed = static_cast<std::uint64_t>(seed);
    const Model m = random_model(s);
    const int n = 8 + seed % 7;
    check_case(m, Variant::san(), random_in(n, s.seed), seed % 2 ? Center::mean : Center::median, t);
    const double r0 = std::pow(10.0, -(seed % 14));
    const Variant full{true, MlpKind::residual, seed % 3 ? LayerNormKind::post : LayerNormKind::pre, MaskKind::none};
    check_case(m, full, random_in(n, s.seed, r0), Center::mean, t);
    check_case(m, Variant{true, MlpKind::none, LayerNormKind::none, MaskKind::none}, random_in(n, s.seed, r0),
               Center::mean, t, /*require_well_resolved=*/false);
  }
  CHECK(t.quantities == 75 * 7 * 7);
  std::printf("random cases: %d quantities, %d with >= 13 digits in double (%d of them printed with < 10), "
              "%d with <= 9, %d printed as bounds\n",
              t.quantities, t.well_resolved, t.weak, t.near_cancel, t.below);
}

TEST_CASE("rounding_check_value moves the value by 10 times the larger directed difference") {
  const BigReal v(1.0, 40), up(1.0 + 0x1p-40, 40), down(1.0 - 0x1p-45, 40);
  // |up − v| = 2^-40 is the larger: c = v + 10·2^-40 (every number exact in binary).
  CHECK(rounding_check_value(v, up, down) == BigReal(1.0 + 10 * 0x1p-40, 40));
  CHECK(rounding_check_value(v, down, up) == BigReal(1.0 + 10 * 0x1p-40, 40));
  CHECK(rounding_check_value(v, v, v) == v);
  CHECK(rounding_check_value(v, v, BigReal(1.0 - 0x1p-20, 40)) == BigReal(1.0 - 10 * 0x1p-20, 40));
}

TEST_CASE("the directed passes run on every thread and the caller's rounding mode is restored") {
  const Model m = random_bert(2, 1, Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none});
  const InputSpec in = random_in(8, 1);
  const auto nearest = measure_layers<double>(m, m.arch().variant, in, Center::mean);
  // Each call: its rounding mode, that of a thread it starts, its thread, and
  // how many threads its products could use. The two passes may run at once.
  struct Call {
    int mode, worker;
    std::thread::id thread;
    int product_threads;
  };
  std::mutex mu;
  std::vector<Call> calls;
  const auto measure = [&](const InputSpec& x0, const std::string&) {
    int worker = -1;
    std::thread([&] { worker = std::fegetround(); }).join();  // POSIX: a new thread inherits the mode
    {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back({std::fegetround(), worker, std::this_thread::get_id(), product_threads()});
    }
    CHECK(x0.kind == InputSpec::Kind::matrix);  // the random input, drawn once in round-to-nearest
    return measure_layers<double>(m, m.arch().variant, x0, Center::mean);
  };
  std::vector<LayerStats> checked;
  for (const int threads : {1, 2}) {
    CAPTURE(threads);
    calls.clear();
    set_product_threads(threads);
    checked = rounding_check(nearest, m, in, measure);
    set_product_threads(0);
    REQUIRE(calls.size() == 2);
    std::vector<int> modes = {calls[0].mode, calls[1].mode};
    std::sort(modes.begin(), modes.end());
    CHECK(modes == std::vector<int>{std::min(FE_UPWARD, FE_DOWNWARD), std::max(FE_UPWARD, FE_DOWNWARD)});
    // While both run, each pass's products get one of the two threads; a
    // pass that starts after the other has ended gets both.
    for (const Call& c : calls) {
      CHECK(c.worker == c.mode);
      CHECK(c.product_threads >= 1);
      CHECK(c.product_threads <= threads);
    }
    // One thread: both on the caller's thread; two: one pass a thread.
    if (threads == 1)
      CHECK((calls[0].thread == std::this_thread::get_id() && calls[1].thread == std::this_thread::get_id()));
    else
      CHECK(calls[0].thread != calls[1].thread);
    CHECK(std::fegetround() == FE_TONEAREST);
  }
  CHECK(std::fegetround() == FE_TONEAREST);
  // The directed passes differ from round-to-nearest somewhere: the check saw rounding.
  bool moved = false;
  for (std::size_t l = 1; l < nearest.size(); ++l) moved = moved || checked[l].res_composite != nearest[l].res_composite;
  CHECK(moved);
  // An exception inside a directed pass leaves the rounding mode as it was.
  CHECK_THROWS(rounding_check(nearest, m, in, [](const InputSpec&, const std::string&) -> std::vector<LayerStats> {
    throw std::runtime_error("interrupted");
  }));
  CHECK(std::fegetround() == FE_TONEAREST);
}

TEST_CASE("the pass and its rounding check at once: the same values, each layer of a streamed model read once") {
  const Model whole = random_bert(4, 2, Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none});
  const auto source = std::make_shared<sanpath::test::CountingSource>(whole);
  const Model streamed = sanpath::test::streamed_copy(whole, source);
  const InputSpec in = random_in(8, 3);
  // Expected: the pass, then rounding_check, one after the other.
  set_product_threads(1);
  const auto measure_whole = [&](const InputSpec& x0, const std::string&) {
    return measure_layers<double>(whole, whole.arch().variant, x0, Center::mean);
  };
  const std::vector<LayerStats> nearest = measure_whole(in, "");
  const std::vector<LayerStats> checked = rounding_check(nearest, whole, in, measure_whole);
  struct Call {
    int mode;
    std::thread::id thread;
    std::string stage;
  };
  std::mutex mu;
  std::vector<Call> calls;
  const auto measure = [&](const InputSpec& x0, const std::string& stage) {
    {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back({std::fegetround(), std::this_thread::get_id(), stage});
    }
    return measure_layers<double>(streamed, streamed.arch().variant, x0, Center::mean);
  };
  const auto same = [](const std::vector<LayerStats>& a, const std::vector<LayerStats>& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t l = 0; l < a.size(); ++l) {
      CAPTURE(l);
      CHECK(a[l].res_composite == b[l].res_composite);
      CHECK(a[l].res_frobenius == b[l].res_frobenius);
      CHECK(a[l].norm_composite == b[l].norm_composite);
      CHECK(a[l].relative_residual == b[l].relative_residual);
    }
  };
  for (const int threads : {1, 2}) {
    CAPTURE(threads);
    calls.clear();
    source->reads = 0;
    set_product_threads(threads);
    const RoundingCheckedRuns r = measure_with_rounding_check(streamed, in, "the pass", measure);
    set_product_threads(0);
    same(r.nearest, nearest);
    same(r.checked, checked);
    REQUIRE(calls.size() == 3);
    std::vector<int> modes;
    for (const Call& c : calls) modes.push_back(c.mode);
    std::sort(modes.begin(), modes.end());
    std::vector<int> want = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD};
    std::sort(want.begin(), want.end());
    CHECK(modes == want);
    CHECK(std::count_if(calls.begin(), calls.end(), [](const Call& c) { return c.stage == "the pass"; }) == 1);
    if (threads == 1) {
      // One after the other on this thread, each pass reading every layer.
      for (const Call& c : calls) CHECK(c.thread == std::this_thread::get_id());
      CHECK(source->reads == 3 * whole.arch().layers);
    } else {
      // Three threads, reading each layer once between them.
      CHECK(calls[0].thread != calls[1].thread);
      CHECK(calls[1].thread != calls[2].thread);
      CHECK(calls[0].thread != calls[2].thread);
      CHECK(source->reads == whole.arch().layers);
    }
    CHECK(std::fegetround() == FE_TONEAREST);
  }
}

TEST_CASE("--check choices: rounding only for double with a mean or median centre") {
  const Precision dbl = Precision::double_precision();
  CHECK(uses_rounding_check(CheckMethod::automatic, dbl, Center::mean));
  CHECK(uses_rounding_check(CheckMethod::automatic, dbl, Center::median));
  CHECK_FALSE(uses_rounding_check(CheckMethod::automatic, dbl, Center::optimal));
  CHECK_FALSE(uses_rounding_check(CheckMethod::automatic, Precision::at_least(128), Center::mean));
  CHECK_FALSE(uses_rounding_check(CheckMethod::mpfr, dbl, Center::mean));
  CHECK_THROWS_AS(uses_rounding_check(CheckMethod::rounding, Precision::at_least(128), Center::mean),
                  std::invalid_argument);
  CHECK_THROWS_AS(uses_rounding_check(CheckMethod::rounding, dbl, Center::optimal), std::invalid_argument);
  CHECK(parse_check_method("mpfr") == CheckMethod::mpfr);
  CHECK_THROWS_AS(parse_check_method("fast"), std::invalid_argument);
}

TEST_CASE("--check means the same on every command: what each kind of analysis honours") {
  for (CheckMethod m : {CheckMethod::automatic, CheckMethod::rounding, CheckMethod::mpfr, CheckMethod::certified})
    CHECK_NOTHROW(require_check(m, CheckScope::forward_pass));
  for (CheckMethod m : {CheckMethod::automatic, CheckMethod::mpfr, CheckMethod::certified})
    CHECK_NOTHROW(require_check(m, CheckScope::paths));
  CHECK_THROWS_WITH(require_check(CheckMethod::rounding, CheckScope::paths),
                    Catch::StartsWith("'rounding' is not a check path analyses can honour"));
  CHECK_NOTHROW(require_check(CheckMethod::mpfr, CheckScope::path_sampling));
  CHECK_THROWS_WITH(require_check(CheckMethod::certified, CheckScope::path_sampling),
                    Catch::StartsWith("'certified' is not a check path sampling can honour"));
  CHECK_THROWS_AS(require_check(CheckMethod::rounding, CheckScope::path_sampling), std::invalid_argument);
}

TEST_CASE("the ranges of --digits and --max-bits, asked of the library by the CLI and Python") {
  CHECK(PrecisionRequest::checked_digits(1) == 1);
  CHECK(PrecisionRequest::checked_digits(100000) == 100000);
  CHECK_THROWS_WITH(PrecisionRequest::checked_digits(0), "0 is outside [1, 100000]");
  CHECK(PrecisionRequest::checked_max_bits(0) == 0);
  CHECK(PrecisionRequest::checked_max_bits(53) == 53);
  CHECK_THROWS_WITH(PrecisionRequest::checked_max_bits(20), Catch::StartsWith("20 is outside [53, "));
  CHECK_THROWS_AS(PrecisionRequest::checked_max_bits(Precision::max_bits() + 1), std::invalid_argument);
}

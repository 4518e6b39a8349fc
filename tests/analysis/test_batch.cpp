// Batches of inputs (analysis/batch.hpp): the statistics of a batch against
// formulas evaluated here in plain BigReal arithmetic on each input's own
// run, and determinism across thread counts.
#include "support/batch_helpers.hpp"
#include "support/helpers.hpp"
#include "support/llama_helpers.hpp"

#include "sanpath/analysis/batch.hpp"
#include "sanpath/io/inputs.hpp"
#include "sanpath/model/random.hpp"

#include <algorithm>
#include <fstream>

using namespace sanpath;
using sanpath::test::with_digits;
using sanpath::test::tmp_path;

namespace {

Model small_bert(std::uint64_t seed) {
  RandomModelSpec s;
  s.arch = {3, 2, 16, 8, 8, 32, {true, MlpKind::residual, LayerNormKind::post, MaskKind::none},
            Activation::gelu, 1e-12, false};
  s.std = 0.2;
  s.seed = seed;
  return random_model(s);
}

double rel(const BigReal& a, const BigReal& b) { return static_cast<double>(abs(BigReal(a - b)) / abs(b)); }

}  // namespace

TEST_CASE("summarize: mean, sample std, min, median, max and their digits") {
  const BatchStatistic s = summarize({with_digits(1e-3, 10), with_digits(3e-3, 12), with_digits(2e-3, 15)});
  CHECK(s.count == 3);
  CHECK(rel(s.mean.value, BigReal("2e-3", 40)) < 1e-15);
  REQUIRE(s.stddev);
  CHECK(rel(s.stddev->value, BigReal("1e-3", 40)) < 1e-15);  // sqrt(((1-2)²+(3-2)²+0)/(3-1)) e-3
  CHECK(rel(s.median.value, BigReal("2e-3", 40)) < 1e-15);
  CHECK(rel(s.min.value, BigReal("1e-3", 40)) < 1e-15);
  CHECK(rel(s.max.value, BigReal("3e-3", 40)) < 1e-15);
  CHECK(s.mean.digits == 10);  // the least confirmed among positive terms
  // |δσ| ≤ sqrt(3/2)·max x_i·10^(1−d_i) = 1.22e-12 against σ = 1e-3: 9 digits.
  CHECK(s.stddev->digits == 9);

  const BatchStatistic even = summarize({with_digits(4, 5), with_digits(1, 5), with_digits(3, 5), with_digits(2, 5)});
  CHECK(rel(even.median.value, BigReal("2.5", 40)) < 1e-15);

  const BatchStatistic one = summarize({with_digits(0.5, 7)});
  CHECK_FALSE(one.stddev);
  CHECK(one.mean.str() == one.min.str());
}

TEST_CASE("summarize: a spread below the inputs' accuracy is not printed as a number") {
  const BatchStatistic s = summarize({with_digits(1.0, 3), with_digits(1.0001, 3)});
  REQUIRE(s.stddev);
  CHECK(s.stddev->below_resolution);
  CHECK(s.stddev->str().rfind("< ", 0) == 0);
  CHECK_FALSE(s.mean.below_resolution);
  // Identical inputs: a spread of exactly 0 is known only to the inputs' accuracy.
  const BatchStatistic same = summarize({with_digits(0.25, 20), with_digits(0.25, 20)});
  REQUIRE(same.stddev);
  CHECK(same.stddev->below_resolution);
  CHECK(same.stddev->str() == "< 1e-19");  // sqrt(2)·0.25·1e-19 = 3.5e-20 → the next power of ten
}

TEST_CASE("summarize: a value below resolution makes the statistics upper bounds") {
  Quantity tiny = below_resolution(BigReal(0, 40), BigReal("1e-40", 40));
  const BatchStatistic s = summarize({with_digits(1e-3, 12), tiny});
  CHECK_FALSE(s.stddev);
  for (const Quantity* q : {&s.mean, &s.min, &s.median, &s.max}) {
    CHECK(q->below_resolution);
    CHECK(q->str().rfind("< ", 0) == 0);
  }
  CHECK(s.mean.bound > BigReal("5e-4", 40));  // mean ≤ (1e-3 + 1e-40)/2 < bound
}

TEST_CASE("a batch equals its inputs' own runs, whatever the thread count") {
  const Model m = small_bert(3);
  const Variant san{false, MlpKind::none, LayerNormKind::none, MaskKind::none};
  const std::vector<InputSpec> inputs = test::inputs_of_lengths({5, 9, 3, 6}, 10);
  PrecisionRequest req;
  const BatchForwardAnalysis one = analyze_forward_batch(m, san, inputs, req, Center::mean, 1);
  const BatchForwardAnalysis two = analyze_forward_batch(m, san, inputs, req, Center::mean, 2);
  REQUIRE(one.runs.size() == 4);
  REQUIRE(one.layers.size() == 4);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ForwardAnalysis alone = analyze_forward(m, san, inputs[i], req);
    REQUIRE(alone.layers.size() == one.runs[i].layers.size());
    CHECK(alone.precision.bits == one.runs[i].precision.bits);
    for (std::size_t l = 0; l < alone.layers.size(); ++l) {
      CHECK(alone.layers[l].relative_residual.str() == one.runs[i].layers[l].relative_residual.str());
      CHECK(two.runs[i].layers[l].relative_residual.str() == one.runs[i].layers[l].relative_residual.str());
    }
  }
  for (std::size_t l = 0; l < one.layers.size(); ++l) {
    // Independent evaluation: naive formulas at 300 digits on the per-input values.
    std::vector<BigReal> x;
    for (const ForwardAnalysis& a : one.runs) x.emplace_back(a.layers[l].relative_residual.value, 300);
    BigReal sum(0, 300);
    for (const BigReal& v : x) sum += v;
    const BigReal mean = sum / 4;
    BigReal ss(0, 300);
    for (const BigReal& v : x) ss += (v - mean) * (v - mean);
    std::sort(x.begin(), x.end());
    const BatchStatistic& s = one.layers[l];
    CHECK(rel(s.mean.value, mean) < 1e-30);
    REQUIRE(s.stddev);
    CHECK(rel(s.stddev->value, sqrt(ss / 3)) < 1e-30);
    CHECK(rel(s.median.value, BigReal((x[1] + x[2]) / 2)) < 1e-30);
    CHECK(s.min.value == x.front());
    CHECK(s.max.value == x.back());
    CHECK(s.mean.str() == two.layers[l].mean.str());
    CHECK(s.stddev->str() == two.layers[l].stddev->str());
  }
}

TEST_CASE("collapse batch: paper conventions, one result per input, same with 2 threads") {
  const Model m = small_bert(4);
  const std::vector<InputSpec> inputs = test::inputs_of_lengths({4, 7}, 10);
  PrecisionRequest req;
  const BatchCollapseResult a = run_collapse_batch(m, inputs, req, CollapseConventions::paper, 1);
  const BatchCollapseResult b = run_collapse_batch(m, inputs, req, CollapseConventions::paper, 2);
  REQUIRE(a.variants.size() == 4);
  CHECK(a.variants[0].variant == Variant{false, MlpKind::none, LayerNormKind::post, MaskKind::none});
  CHECK(a.variants[3].name == "transformer");
  for (std::size_t v = 0; v < 4; ++v)
    for (std::size_t l = 0; l < a.layers[v].size(); ++l) {
      CHECK(a.layers[v][l].mean.str() == b.layers[v][l].mean.str());
      const CollapseResult alone = run_collapse(m, inputs[1], req, {}, CollapseConventions::paper);
      CHECK(alone.analyses[v].layers[l].relative_residual.str() ==
            a.runs[1].analyses[v].layers[l].relative_residual.str());
    }
}

TEST_CASE("token files: comments, blank lines, lengths; a bad line is named") {
  const std::string path = tmp_path("batch_tokens.txt");
  {
    std::ofstream f(path);
    f << "# header\n\n1,2,3\n  # indented comment\n4, 5\r\n";
  }
  const std::vector<InputSpec> in = read_token_file(path);
  REQUIRE(in.size() == 2);
  CHECK(in[0].tokens == std::vector<long>{1, 2, 3});
  CHECK(in[1].tokens == std::vector<long>{4, 5});
  CHECK(in[1].source == path + ": line 5");
  {
    std::ofstream f(path);
    f << "1,2\n3,-4\n";
  }
  CHECK_THROWS_WITH(read_token_file(path), Catch::Contains(path + ": line 2: token id -4 is negative"));
  {
    std::ofstream f(path);
    f << "# nothing\n\n";
  }
  CHECK_THROWS_WITH(read_token_file(path), Catch::Contains("no token sequence"));
  CHECK_THROWS_WITH(read_token_file(tmp_path("does-not-exist.txt")), Catch::Contains("cannot be opened"));
}

TEST_CASE("length sums and bounds batches equal their inputs' own runs, whatever the thread count") {
  const Model m = small_bert(4);
  const std::vector<InputSpec> inputs = test::inputs_of_lengths({4, 7, 3}, 10);
  PrecisionRequest req;
  SECTION("paths --sums") {
    const Variant v{true, MlpKind::none, LayerNormKind::none, MaskKind::none};
    const BatchLengthSums one = analyze_length_sums_batch(m, v, inputs, req, 1);
    const BatchLengthSums two = analyze_length_sums_batch(m, v, inputs, req, 2);
    REQUIRE(one.runs.size() == 3);
    REQUIRE(one.lengths.size() == 4);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const LengthSumsReport alone = analyze_length_sums(m, v, inputs[i], req);
      CHECK(alone.precision.bits == one.runs[i].precision.bits);
      for (std::size_t k = 0; k < alone.lengths.size(); ++k) {
        CHECK(alone.lengths[k].share.str() == one.runs[i].lengths[k].share.str());
        CHECK(alone.lengths[k].frobenius.str() == two.runs[i].lengths[k].frobenius.str());
      }
    }
    for (std::size_t k = 0; k < one.lengths.size(); ++k) {
      std::vector<BigReal> x;
      for (const LengthSumsReport& r : one.runs) x.emplace_back(r.lengths[k].share.value, 300);
      std::sort(x.begin(), x.end());
      CHECK(rel(one.lengths[k].mean.value, BigReal((x[0] + x[1] + x[2]) / 3)) < 1e-30);
      CHECK(one.lengths[k].median.value == x[1]);
      CHECK(one.lengths[k].mean.str() == two.lengths[k].mean.str());
    }
    // Theorem 2.1's error of every input is rounding: the statistics are upper bounds.
    CHECK(one.decomposition_error.max.below_resolution);
  }
  SECTION("bounds") {
    BoundsRequest br;
    br.precision = req;
    const Variant san{false, MlpKind::none, LayerNormKind::none, MaskKind::none};
    const BatchBounds one = analyze_bounds_batch(m, san, inputs, br, 1);
    const BatchBounds two = analyze_bounds_batch(m, san, inputs, br, 2);
    REQUIRE(one.relative.size() == 4);
    REQUIRE(one.verdicts.size() == 3);
    std::vector<long> holds(3, 0);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const BoundsAnalysis alone = analyze_bounds(m, san, inputs[i], br);
      for (std::size_t l = 0; l < alone.measured.depths.size(); ++l) {
        CHECK(alone.measured.depths[l].relative.str() == one.runs[i].measured.depths[l].relative.str());
        CHECK(alone.measured.depths[l].upper.str() == two.runs[i].measured.depths[l].upper.str());
      }
      for (std::size_t l = 0; l < alone.report.depths.size(); ++l) holds[l] += alone.report.depths[l].verdict == Verdict::holds;
    }
    for (std::size_t l = 0; l < 3; ++l) {
      const VerdictCounts& c = one.verdicts[l];
      CHECK(c.holds == holds[l]);
      CHECK(c.holds + c.violated + c.undecided + c.not_applicable == 3);
    }
    for (std::size_t l = 0; l < one.relative.size(); ++l) {
      std::vector<BigReal> x;
      for (const BoundsAnalysis& a : one.runs) x.emplace_back(a.measured.depths[l].relative.value, 300);
      std::sort(x.begin(), x.end());
      CHECK(one.relative[l].min.value == x.front());
      CHECK(one.relative[l].max.value == x.back());
      CHECK(one.relative[l].mean.str() == two.relative[l].mean.str());
    }
  }
}

TEST_CASE("check_batch_inputs: only a position table bounds a sequence's length") {
  // A Llama-type model has no position table (rotary positions): its 0 rows bound nothing.
  const Model llama = test::random_llama(1, 2, 1, 8, 4, 16, 3, 11);
  REQUIRE_FALSE(llama.embeddings()->has_position_table());
  REQUIRE(llama.embeddings()->max_positions() == 0);
  const std::vector<InputSpec> tokens{InputSpec::from_tokens({1, 5, 7}), InputSpec::from_tokens({2, 3, 4, 10, 0})};
  CHECK_NOTHROW(check_batch_inputs(llama, tokens));
  CHECK_THROWS_WITH(check_batch_inputs(llama, {InputSpec::from_tokens({1, 11})}), Catch::Contains("id 11"));
  // BERT's position table of 4 rows: 4 tokens fit, 5 do not.
  RandomModelSpec s;
  s.arch = {1, 2, 8, 4, 4, 16, {true, MlpKind::residual, LayerNormKind::post, MaskKind::none}, Activation::gelu, 1e-12,
            false};
  s.seed = 5;
  s.vocab = 11;
  s.max_positions = 4;
  const Model bert = random_model(s);
  CHECK_NOTHROW(check_batch_inputs(bert, {InputSpec::from_tokens({1, 2, 3, 4})}));
  CHECK_THROWS_WITH(check_batch_inputs(bert, {InputSpec::from_tokens({1, 2, 3, 4, 5})}),
                    Catch::Contains("longer than the position table (4)"));
}

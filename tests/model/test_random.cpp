// Seeded randomness (model/random.hpp): the generator against published
// reference values, its distributions against their moments, random models
// and random inputs against their specifications.
#include "support/helpers.hpp"

#include "sanpath/model/random.hpp"

#include <cmath>

using namespace sanpath;

TEST_CASE("Rng is xoshiro256** seeded by splitmix64 (reference values)", "[random]") {
  // splitmix64 from seed 0 gives, by its published reference sequence,
  // 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f, 0xf88bb8a8724c81ec:
  // the generator's state. xoshiro256**'s output is rotl(s1·5, 7)·9, and its
  // state update is written out here independently of src/model/random.cpp.
  std::uint64_t s[4] = {0xe220a8397b1dcdafULL, 0x6e789e6aa1b965f4ULL, 0x06c45d188009454fULL, 0xf88bb8a8724c81ecULL};
  const auto rotl = [](std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  Rng rng(0);
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t expected = rotl(s[1] * 5, 7) * 9;
    const std::uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    REQUIRE(rng.next() == expected);
  }
}

TEST_CASE("Rng's uniform, bounded and Gaussian draws have the right moments", "[random]") {
  Rng rng(42);
  const int N = 200000;
  double sum = 0, sum2 = 0, usum = 0;
  std::vector<int> counts(7, 0);
  for (int i = 0; i < N; ++i) {
    const double g = rng.gaussian();
    sum += g;
    sum2 += g * g;
    const double u = rng.uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    usum += u;
    ++counts[rng.below(7)];
  }
  // Five standard errors: a correct generator fails this once in ~10^6 seeds;
  // the seed is fixed, so the test is deterministic.
  CHECK(std::abs(sum / N) < 5.0 / std::sqrt(N));
  CHECK(std::abs(sum2 / N - 1.0) < 5.0 * std::sqrt(2.0 / N));
  CHECK(std::abs(usum / N - 0.5) < 5.0 * std::sqrt(1.0 / 12 / N));
  for (int c : counts) CHECK(std::abs(c - N / 7.0) < 5.0 * std::sqrt(N / 7.0));
  CHECK_THROWS_AS(rng.below(0), std::invalid_argument);
}

TEST_CASE("random models follow their specification and their seed", "[random]") {
  RandomModelSpec s;
  s.arch.layers = 3;
  s.arch.heads = 4;
  s.arch.d_model = 32;
  s.arch.d_qk = 8;
  s.arch.d_v = 8;
  s.arch.d_ff = 64;
  s.arch.variant = {true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  s.std = 0.5;
  s.seed = 9;
  s.vocab = 50;
  s.max_positions = 20;
  const Model a = random_model(s), b = random_model(s);
  // Same seed, same weights, bit for bit; another seed, other weights.
  CHECK(a.layer(2).heads[3].W_V == b.layer(2).heads[3].W_V);
  s.seed = 10;
  CHECK_FALSE(random_model(s).layer(2).heads[3].W_V == a.layer(2).heads[3].W_V);
  // Sample standard deviation of all W_Q entries: 3·4·32·8 = 3072 draws of N(0, 0.5²).
  double sum2 = 0;
  long count = 0;
  for (const LayerWeights& w : a.layers())
    for (const HeadWeights& h : w.heads) {
      sum2 += h.W_Q.squaredNorm();
      count += h.W_Q.size();
    }
  CHECK(count == 3072);
  CHECK(std::abs(std::sqrt(sum2 / count) - 0.5) < 0.5 * 5.0 / std::sqrt(2.0 * count));
  // LayerNorm gains 1, biases 0; biases 0 with bias_std 0; embeddings sized.
  CHECK(a.layer(1).ln1_g == VectorXd::Ones(32));
  CHECK(a.layer(1).ln2_b == VectorXd::Zero(32));
  CHECK(a.layer(0).heads[0].b_Q == VectorXd::Zero(8));
  REQUIRE(a.embeddings());
  CHECK(a.embeddings()->vocab_size() == 50);
  CHECK(a.embeddings()->max_positions() == 20);

  s.arch.shared_layers = true;
  const Model shared = random_model(s);
  CHECK(shared.layer(0).heads[1].W_K == shared.layer(2).heads[1].W_K);
  CHECK(shared.layer(0).W_1 == shared.layer(1).W_1);

  s.arch.d_model = 0;
  CHECK_THROWS_WITH(random_model(s), Catch::StartsWith("random model: "));
  s.arch.d_model = 32;
  s.std = std::nan("");
  CHECK_THROWS_WITH(random_model(s), "random model: std: must be finite and >= 0");
}

TEST_CASE("random inputs: X = 1cᵀ + R with the requested residual", "[random]") {
  RandomInputSpec r;
  r.n = 7;
  r.d = 5;
  r.seed = 3;
  r.offset = 10.0;
  r.residual = 0.125;
  const MatrixXd X = random_input(r);
  REQUIRE(X.rows() == 7);
  REQUIRE(X.cols() == 5);
  // ‖X − 1 mean(X)ᵀ‖_{1,∞} = sqrt(max column abs sum · max row abs sum), by hand.
  const MatrixXd R = X.rowwise() - X.colwise().mean();
  const double one = R.cwiseAbs().colwise().sum().maxCoeff(), inf = R.cwiseAbs().rowwise().sum().maxCoeff();
  // X is rounded to double around an offset of ~10: the residual is exact to
  // a few ulps of ‖X‖, i.e. ~1e-14 relative to 0.125.
  CHECK(std::abs(std::sqrt(one * inf) - 0.125) < 1e-13);
  CHECK(random_input(r) == X);
  r.residual = -1.0;
  CHECK_THROWS_WITH(random_input(r), "random input: residual: must be finite and >= 0");
}

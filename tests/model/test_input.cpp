// Inputs (model/input.hpp): token lists, matrices and random specs, with
// one-line errors that name the source and the item.
#include "support/helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/random.hpp"

#include <limits>

using namespace sanpath;

TEST_CASE("token lists parse with spaces and refuse bad items by position", "[input]") {
  CHECK(parse_token_list("101, 2023 ,102") == std::vector<long>{101, 2023, 102});
  CHECK(parse_token_list("7") == std::vector<long>{7});
  CHECK_THROWS_WITH(parse_token_list("1,,2"), "--tokens: empty item at position 1");
  CHECK_THROWS_WITH(parse_token_list("4,-3"), "--tokens: token id -3 is negative");
  CHECK_THROWS_WITH(parse_token_list("4,x9", "tokens.txt line 3"), Catch::StartsWith("tokens.txt line 3: 'x9' at position 1"));
}

TEST_CASE("input specs: rows, descriptions, and matrices checked for NaN", "[input]") {
  const InputSpec t = InputSpec::from_tokens({5, 6, 7});
  CHECK(t.rows() == 3);
  CHECK(t.describe() == "3 token ids");
  RandomInputSpec r;
  r.n = 9;
  r.seed = 4;
  const InputSpec rnd = InputSpec::from_random(r);
  CHECK(rnd.rows() == 9);
  CHECK(rnd.describe() == "random input (seed 4)");
  MatrixXd X = MatrixXd::Ones(2, 3);
  const InputSpec m = InputSpec::from_matrix(X, "x.safetensors");
  CHECK(m.rows() == 2);
  CHECK(m.describe() == "x.safetensors (2×3)");
  X(1, 2) = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(InputSpec::from_matrix(X, "x.safetensors"), "x.safetensors: X: NaN at [1, 2]");
  CHECK_THROWS_WITH(InputSpec::from_matrix(MatrixXd(0, 3), "x.safetensors"), "x.safetensors: X: empty matrix");
}

TEST_CASE("token ids go through the model's embeddings; bad ids are named", "[input]") {
  RandomModelSpec s;
  s.arch.layers = 1;
  s.arch.heads = 1;
  s.arch.d_model = 4;
  s.arch.d_qk = 2;
  s.arch.d_v = 2;
  s.arch.variant = {true, MlpKind::none, LayerNormKind::post, MaskKind::none};
  s.vocab = 10;
  s.max_positions = 3;
  s.std = 0.3;
  const Model m = random_model(s);
  const Embeddings& e = *m.embeddings();
  // BERT: LayerNorm(word + position + token type 0), computed here by hand.
  const MatrixXd X = make_input<double>(m, InputSpec::from_tokens({4, 2}));
  for (int i = 0; i < 2; ++i) {
    const Eigen::RowVectorXd x = e.word.row(i == 0 ? 4 : 2) + e.position.row(i) + e.token_type.row(0);
    const double mean = x.mean();
    const double var = (x.array() - mean).square().mean();
    const Eigen::RowVectorXd ln =
        ((x.array() - mean) / std::sqrt(var + e.ln_eps)).matrix().cwiseProduct(e.ln_g.transpose()) + e.ln_b.transpose();
    for (int j = 0; j < 4; ++j) CHECK(std::abs(X(i, j) - ln(j)) < 1e-14);
  }
  CHECK_THROWS_WITH(make_input<double>(m, InputSpec::from_tokens({1, 10})),
                    "random model (seed 0): tokens: token 1 has id 10, outside the vocabulary [0, 10)");
  CHECK_THROWS_WITH(make_input<double>(m, InputSpec::from_tokens({1, 2, 3, 4})),
                    "random model (seed 0): tokens: sequence of 4 tokens is longer than the position table (3)");
}

TEST_CASE("the range of random inputs' tokens and batches, asked of the library by the CLI and Python") {
  CHECK(checked_random_count(1, "tokens") == 1);
  CHECK(checked_random_count(1L << 20, "inputs") == (1L << 20));
  CHECK_THROWS_WITH(checked_random_count(0, "inputs"), "0 inputs is outside [1, 1048576]");
  CHECK_THROWS_WITH(checked_random_count((1L << 20) + 1, "tokens"), "1048577 tokens is outside [1, 1048576]");
}

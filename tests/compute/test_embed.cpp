// Token embeddings (compute/embed.hpp) follow the recipe the model states
// (EmbeddingRecipe, model/model.hpp), never its family: the family gives the
// recipe in io/ and model/ (embedding_recipe), and only there.
#include "support/helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/enclosure.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/model/random.hpp"

#include <random>

using namespace sanpath;
using sanpath::test::tmp_path;

namespace {

MatrixXd drawn(std::mt19937_64& rng, Eigen::Index rows, Eigen::Index cols) {
  std::normal_distribution<double> normal(0.0, 0.7);
  MatrixXd M(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) M(i, j) = normal(rng);
  return M;
}

/// A one-layer model of width 8 with the given embeddings.
Model with_embeddings(const Embeddings& e) {
  RandomModelSpec s;
  s.arch = {1, 2, 8, 4, 4, 16, Variant{}, Activation::gelu, 1e-5, false};
  s.std = 0.5;
  s.seed = 3;
  const Model base = random_model(s);
  return Model(base.arch(), base.layers(), e, "embeddings under test");
}

/// BERT-family tables of width 8 (vocabulary 20, 16 positions, 2 token types).
Embeddings bert_tables() {
  std::mt19937_64 rng(11);
  Embeddings e;
  e.word = drawn(rng, 20, 8);
  e.position = drawn(rng, 16, 8);
  e.token_type = drawn(rng, 2, 8);
  e.ln_g = drawn(rng, 8, 1).col(0);
  e.ln_b = drawn(rng, 8, 1).col(0);
  return e;
}

const std::vector<long> kIds{3, 1, 4, 1, 5, 9, 2};

}  // namespace

TEST_CASE("each family's embedding recipe", "[embed]") {
  const EmbeddingRecipe bert = embedding_recipe(Layout::bert);
  CHECK((bert.positions && bert.token_type && bert.layer_norm));
  CHECK((!bert.project_in && !bert.scale_by_root_width && !bert.map_after_norm && !bert.patches));
  CHECK(embedding_recipe(Layout::roberta) == bert);
  CHECK(bert == EmbeddingRecipe{});  // the default is BERT's, as Embeddings' default kind

  EmbeddingRecipe r = bert;
  r.map_after_norm = true;
  CHECK(embedding_recipe(Layout::albert) == r);
  r = bert;
  r.token_type = false;
  CHECK(embedding_recipe(Layout::distilbert) == r);
  r.layer_norm = false;
  CHECK(embedding_recipe(Layout::gpt2) == r);  // word + position
  r.project_in = true;
  CHECK(embedding_recipe(Layout::opt) == r);  // (word · project_in) + position
  r.project_in = false;
  r.patches = true;
  CHECK(embedding_recipe(Layout::vit) == r);  // patches + position

  EmbeddingRecipe rows;  // the token rows alone
  rows.positions = rows.token_type = rows.layer_norm = false;
  for (Layout l : {Layout::llama, Layout::mistral, Layout::qwen2, Layout::xlnet, Layout::t5, Layout::gpt_neox,
                   Layout::phi}) {
    CAPTURE(to_string(l));
    CHECK(embedding_recipe(l) == rows);
  }
  rows.scale_by_root_width = true;
  CHECK(embedding_recipe(Layout::gemma) == rows);
  CHECK(embedding_recipe(Layout::gemma2) == rows);
}

TEST_CASE("a model's embeddings always state their recipe: the family's unless one is given", "[embed]") {
  Embeddings e = bert_tables();
  e.kind = Layout::roberta;
  CHECK_THROWS_AS(e.steps(), std::logic_error);  // outside a Model, unset
  const Model m = with_embeddings(e);
  CHECK(m.embeddings()->steps() == embedding_recipe(Layout::roberta));
  CHECK(m.embeddings()->family_recipe());

  e.recipe = embedding_recipe(Layout::gpt2);
  const Model stated = with_embeddings(e);
  CHECK(stated.embeddings()->steps() == embedding_recipe(Layout::gpt2));
  CHECK(!stated.embeddings()->family_recipe());
}

TEST_CASE("embed_tokens takes the stated steps, whatever the family", "[embed]") {
  const Embeddings t = bert_tables();  // kind bert throughout
  const Eigen::Index n = static_cast<Eigen::Index>(kIds.size());
  MatrixXd rows(n, 8), sums(n, 8);
  for (Eigen::Index i = 0; i < n; ++i) {
    rows.row(i) = t.word.row(kIds[static_cast<std::size_t>(i)]);
    sums.row(i) = rows.row(i) + t.position.row(i);
  }

  Embeddings e = t;
  e.recipe = EmbeddingRecipe{};
  e.recipe->token_type = e.recipe->layer_norm = false;  // word + position[i]
  CHECK(embed_tokens<double>(with_embeddings(e), kIds) == sums);

  e.recipe->positions = false;  // the rows as stored (and no position table to hold)
  e.position.resize(0, 0);
  CHECK(embed_tokens<double>(with_embeddings(e), kIds) == rows);

  e.recipe->scale_by_root_width = true;  // √w · word[t_i], √8 rounded once
  CHECK(embed_tokens<double>(with_embeddings(e), kIds) == MatrixXd(rows * std::sqrt(8.0)));

  e = t;  // BERT's: + token type 0, then LayerNorm
  e.recipe = EmbeddingRecipe{};
  const MatrixXd typed = sums.rowwise() + t.token_type.row(0);
  CHECK(embed_tokens<double>(with_embeddings(e), kIds) == layer_norm<double>(typed, t.ln_g, t.ln_b, t.ln_eps));
}

TEST_CASE("the enclosed embedding follows the stated steps and refuses those it has no enclosure for", "[embed]") {
  using S = mpfr_real<19>;
  Embeddings e = bert_tables();
  e.position.resize(0, 0);
  e.recipe = EmbeddingRecipe{};
  e.recipe->positions = e.recipe->token_type = e.recipe->layer_norm = false;  // the rows as stored: exact
  const BallMatrix<S> rows = embed_enclosed<S>(with_embeddings(e), kIds);
  CHECK(rows.mid == embed_tokens<S>(with_embeddings(e), kIds));
  CHECK(rows.rad.m.isZero(0.0));

  e = bert_tables();
  e.recipe = EmbeddingRecipe{};
  e.recipe->token_type = e.recipe->layer_norm = false;
  e.recipe->scale_by_root_width = true;  // √w after the positions: embed_tokens takes it, no enclosure yet
  const Model scaled = with_embeddings(e);
  CHECK(embed_tokens<double>(scaled, kIds).rows() == static_cast<Eigen::Index>(kIds.size()));
  CHECK_THROWS_WITH(embed_enclosed<S>(scaled, kIds), Catch::Contains("not supported yet"));
}

TEST_CASE("a recipe's steps are checked against the tables it reads", "[embed]") {
  Embeddings e = bert_tables();
  e.recipe = EmbeddingRecipe{};
  e.recipe->project_in = e.recipe->map_after_norm = true;  // both would read `mapping`
  CHECK_THROWS_WITH(with_embeddings(e), Catch::Contains("embeddings.recipe"));
  e.recipe = EmbeddingRecipe{};
  e.recipe->map_after_norm = true;  // ALBERT's mapping, missing
  CHECK_THROWS_WITH(with_embeddings(e), Catch::Contains("embeddings.mapping"));
  e.recipe = EmbeddingRecipe{};
  e.ln_g.resize(0);  // the LayerNorm's gain, missing
  CHECK_THROWS_WITH(with_embeddings(e), Catch::Contains("embeddings.ln_g"));
}

TEST_CASE("the files name the family, so only a family's own recipe is saved", "[embed]") {
  Embeddings e = bert_tables();
  e.recipe = embedding_recipe(Layout::bert);
  e.recipe->token_type = false;
  const Model m = with_embeddings(e);
  CHECK_THROWS_WITH(save_native(m, tmp_path("embed_recipe.safetensors")), Catch::Contains("recipe"));
  CHECK_THROWS_WITH(save_hf(m, tmp_path("embed_recipe_hf"), Layout::bert), Catch::Contains("recipe"));

  e.recipe.reset();  // the family's: an exact round trip that states it again
  const std::string path = tmp_path("embed_recipe_bert.safetensors");
  save_native(with_embeddings(e), path);
  const Model back = load_model(path);
  CHECK(back.embeddings()->steps() == embedding_recipe(Layout::bert));
  CHECK(embed_tokens<double>(back, kIds) == embed_tokens<double>(with_embeddings(e), kIds));
}

// load_model(path, LoadOptions{word_rows}): only the asked rows of the word
// table are decoded. The full load of the same file is the reference: the
// same tokens must embed and run bit for bit alike, the rows left out must be
// refused by name, validated as strictly, and never written.
#include "support/checkpoint_helpers.hpp"
#include "support/llama_helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/core/scalar.hpp"
#include "sanpath/core/resources.hpp"
#include "sanpath/io/checkpoint.hpp"

#include <limits>
#include <stdexcept>

namespace {

LoadOptions rows(std::vector<long> ids) {
  LoadOptions o;
  o.word_rows = std::move(ids);
  return o;
}

/// X^L of `tokens` through `model`'s own variant, in S.
template <class S> Matrix<S> output_of(const Model& m, const std::vector<long>& tokens) {
  return forward<S>(m, m.arch().variant, embed_tokens<S>(m, tokens)).X.back();
}

template <class S> void require_identical(const Matrix<S>& a, const Matrix<S>& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  for (Eigen::Index j = 0; j < a.cols(); ++j)
    for (Eigen::Index i = 0; i < a.rows(); ++i) {
      CAPTURE(i, j);
      REQUIRE(a(i, j) == b(i, j));
    }
}

/// A subset load of `path` runs `tokens` bit-identically to the full load
/// (double and MPFR, 77 digits), holds exactly the distinct in-vocabulary ids,
/// and refuses a token outside them.
void require_subset_matches(const std::string& path, const std::vector<long>& tokens, long unloaded) {
  CAPTURE(path);
  const Model full = load_model(path);
  std::vector<long> asked = tokens;
  asked.push_back(tokens.front());  // repeats are allowed
  asked.push_back(-3);              // ids outside the vocabulary are left out
  asked.push_back(full.embeddings()->vocab_size() + 5);
  const Model part = load_model(path, rows(asked));
  const Embeddings &ef = *full.embeddings(), &ep = *part.embeddings();
  REQUIRE(ef.holds_all_words());
  REQUIRE_FALSE(ep.holds_all_words());
  CHECK(ep.vocab_size() == ef.vocab_size());
  std::vector<long> want = tokens;
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  CHECK(*ep.word_ids == want);
  REQUIRE(ep.word.rows() == static_cast<Eigen::Index>(want.size()));
  for (std::size_t k = 0; k < want.size(); ++k) CHECK(ep.word.row(static_cast<Eigen::Index>(k)) == ef.word.row(want[k]));
  require_same_layers(part, full);
  require_identical(output_of<double>(part, tokens), output_of<double>(full, tokens));
  require_identical(output_of<mpfr_real<77>>(part, tokens), output_of<mpfr_real<77>>(full, tokens));
  // A token whose row was not loaded: a logic error that says so, never a zero row.
  try {
    embed_tokens<double>(part, {unloaded});
    FAIL("an unloaded row was embedded");
  } catch (const std::logic_error& e) {
    CHECK(std::string(e.what()).find("the row of token " + std::to_string(unloaded) + " was not loaded") !=
          std::string::npos);
  }
  CHECK_NOTHROW(embed_tokens<double>(full, {unloaded}));
}

}  // namespace

TEST_CASE("a subset of word rows runs the real checkpoints bit-identically", "[embeddings][real]") {
  const std::string root = real_models_dir();
  if (root.empty()) return;  // skipped outside CI (real_models_dir says so)
  require_subset_matches(root + "/bert-ticket-classifier", {101, 7, 423, 0, 7, 250}, 5);
  require_subset_matches(root + "/gpt2-capp", {3, 52, 0, 17, 3}, 4);
}

TEST_CASE("a subset of word rows runs every slot family bit-identically", "[embeddings][hf]") {
  for (const Layout l : {Layout::bert, Layout::roberta, Layout::distilbert, Layout::albert, Layout::gpt2}) {
    CAPTURE(to_string(l));
    Spec s;
    s.layers = 2;
    s.emb = l;
    s.shared = l == Layout::albert;
    if (l == Layout::albert) s.e = 6;
    if (l == Layout::gpt2) s.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
    const std::string dir = fresh("lazy_" + to_string(l));
    save_hf(make_model(s), dir, l, "F32");
    require_subset_matches(dir, {9, 2, 9, 4}, 3);
  }
}

TEST_CASE("no word rows: inputs without tokens run, tokens are refused", "[embeddings]") {
  Spec s;
  s.emb = Layout::bert;
  const std::string dir = fresh("lazy_none");
  save_hf(make_model(s), dir, Layout::bert);
  const Model m = load_model(dir, rows({}));
  REQUIRE(m.embeddings());
  CHECK(m.embeddings()->word.rows() == 0);
  CHECK(m.embeddings()->vocab_size() == 11);
  CHECK_THROWS_AS(embed_tokens<double>(m, {0}), std::logic_error);
  // An id outside the vocabulary keeps the usual error (not the unloaded-row one).
  const std::string msg = error_of([&] { embed_tokens<double>(m, {1, 11}); });
  CHECK(msg == dir + ": tokens: token 1 has id 11, outside the vocabulary [0, 11)");
}

TEST_CASE("native files load the whole word table whatever is asked", "[embeddings]") {
  Spec s;
  s.emb = Layout::bert;
  const std::string native = fresh("lazy_native.safetensors");
  save_native(make_model(s), native);
  CHECK(load_model(native, rows({1})).embeddings()->holds_all_words());
}

TEST_CASE("a subset of word rows runs the Llama family bit-identically", "[embeddings][llama]") {
  // The real TinyStories Llamas (grouped-query attention, tied embeddings).
  const std::string root = real_models_dir();
  if (!root.empty()) {
    require_subset_matches(root + "/llama-stories260k", {1, 300, 7, 1, 511}, 2);
    require_subset_matches(root + "/llama-tinystories-xs", {1, 42, 9}, 3);
  }
  // Written by save_hf for each layout of the family.
  const Model m = random_llama(2, 4, 2, 16, 4, 24, 21, 50);
  for (const Layout l : {Layout::llama, Layout::mistral, Layout::qwen2}) {
    CAPTURE(to_string(l));
    const std::string dir = fresh("lazy_" + to_string(l));
    save_hf(m, dir, l, "F32");
    require_subset_matches(dir, {9, 2, 9, 4}, 3);
  }
}

TEST_CASE("a NaN or Inf anywhere in the word table is refused with the whole load's message", "[embeddings][errors]") {
  Spec s;
  s.emb = Layout::bert;
  s.f32 = true;
  for (const std::string dtype : {"F32", "F64"}) {
    CAPTURE(dtype);
    const std::string dir = fresh("lazy_nan_" + dtype);
    save_hf(make_model(s), dir, Layout::bert, dtype);
    edit_tensors(dir + "/model.safetensors", [](std::vector<Tensor>& ts) {
      for (Tensor& t : ts)
        if (t.name == "bert.embeddings.word_embeddings.weight") {
          t.values[7 * 8 + 3] = std::numeric_limits<double>::quiet_NaN();      // row 7, never asked for
          t.values[9 * 8 + 1] = std::numeric_limits<double>::infinity();       // a later one
        }
    });
    const std::string want = dir + "/model.safetensors: bert.embeddings.word_embeddings.weight: NaN at [7, 3]";
    CHECK(error_of([&] { load_model(dir); }) == want);
    CHECK(error_of([&] { load_model(dir, rows({1, 2})); }) == want);
    CHECK(error_of([&] { load_model(dir, rows({})); }) == want);
  }
}

TEST_CASE("check_finite finds the first NaN or Inf on the stored bits of every float dtype", "[embeddings][errors]") {
  // [3, 2] tensors: four finite values (one subnormal, one of the largest finite), then Inf or NaN, then NaN.
  struct Case {
    const char* dtype;
    int size;
    std::uint64_t finite[4], bad, nan;
    const char* first;
  };
  const Case cases[] = {
      {"F16", 2, {0x3C00, 0x0001, 0x7BFF, 0xFBFF}, 0x7C00, 0x7E00, "Inf"},
      {"BF16", 2, {0x3F80, 0x0001, 0x7F7F, 0xFF7F}, 0xFF80, 0x7FC0, "Inf"},
      {"F32", 4, {0x3F800000, 0x00000001, 0x7F7FFFFF, 0xFF7FFFFF}, 0xFF800000, 0x7FC00000, "Inf"},
      {"F64", 8, {0x3FF0000000000000, 1, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF}, 0xFFF0000000000000,
       0x7FF8000000000000, "Inf"},
      {"F8_E5M2", 1, {0x3C, 0x01, 0x7B, 0xFB}, 0x7C, 0x7F, "Inf"},
      {"F8_E4M3", 1, {0x38, 0x01, 0x7E, 0xFE}, 0x7F, 0xFF, "NaN"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.dtype);
    std::string data;
    const auto put = [&](std::uint64_t v) {
      for (int i = 0; i < c.size; ++i) data.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
    };
    for (const std::uint64_t v : c.finite) put(v);
    put(c.bad);
    put(c.nan);
    const std::string header = std::string(R"({"w":{"dtype":")") + c.dtype + R"(","shape":[3,2],"data_offsets":[0,)" +
                               std::to_string(data.size()) + "]}}";
    std::string bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xffu));
    const SafetensorsMap f = SafetensorsMap::from_bytes("raw", bytes + header + data);
    const TensorInfo& t = *f.find("w");
    CHECK_NOTHROW(f.check_finite(t, 0, 4));
    const std::string want = std::string("raw: w: ") + c.first + " at [2, 0]";
    CHECK(error_of([&] { f.check_finite(t, 0, 6); }) == want);
    CHECK(error_of([&] { f.check_finite(t, 5, 1); }) == "raw: w: NaN at [2, 1]");
    // The decoding pass agrees.
    std::vector<double> out(6);
    CHECK(error_of([&] { f.decode_finite(t, 0, 6, out.data()); }) == want);
  }
}

TEST_CASE("a model holding part of its word table is never written", "[embeddings][errors]") {
  Spec s;
  s.emb = Layout::bert;
  const std::string dir = fresh("lazy_save_src");
  save_hf(make_model(s), dir, Layout::bert);
  const Model m = load_model(dir, rows({3}));
  const std::string native = fresh("lazy_save.safetensors");
  require_error([&] { save_native(m, native); }, native, "embeddings.word", {"holds 1 of the 11 rows"});
  CHECK_FALSE(fs::exists(native));
  const std::string out = fresh("lazy_save_hf");
  require_error([&] { save_hf(m, out, Layout::bert); }, out, "embeddings.word", {"whole table"});
  CHECK_FALSE(fs::exists(out + "/model.safetensors"));
  // The whole table saves as before.
  CHECK_NOTHROW(save_native(load_model(dir), native));
}

TEST_CASE("Model refuses word_ids that are unsorted, repeated or outside the vocabulary", "[embeddings][errors]") {
  Spec s;
  s.emb = Layout::bert;
  const Model m = make_model(s);
  for (const std::vector<long>& ids : {std::vector<long>{2, 1}, {1, 1}, {11}, {-1}}) {
    Embeddings e = *m.embeddings();
    e.word = e.word.topRows(static_cast<Eigen::Index>(ids.size())).eval();
    e.word_ids = ids;
    e.vocab = 11;
    require_error([&] { Model(m.arch(), m.layers(), e, "m"); }, "m", "embeddings.word_ids");
  }
}

TEST_CASE("first_layers: a prefix of the layers, the same weights as the full load's", "[embeddings][layers]") {
  LoadOptions cut;
  cut.first_layers = 2;
  const auto check_prefix = [&](const std::string& path, int total) {
    CAPTURE(path);
    const Model full = load_model(path), part = load_model(path, cut);
    REQUIRE(full.arch().layers == total);
    REQUIRE(part.arch().layers == 2);
    CHECK(part.source() == path + " (first 2 of " + std::to_string(total) + " layers)");
    // The prefix model's output is the full model's layer-2 output, bit for bit.
    const std::vector<long> tokens{3, 1, 4, 1};
    const ForwardTrace<double> a = forward<double>(full, full.arch().variant, embed_tokens<double>(full, tokens));
    const ForwardTrace<double> b = forward<double>(part, part.arch().variant, embed_tokens<double>(part, tokens));
    require_identical(b.X.back(), a.X[2]);
    LoadOptions all;
    all.first_layers = total;
    CHECK(load_model(path, all).source() == path);
    LoadOptions too_many;
    too_many.first_layers = total + 1;
    CHECK_THROWS_WITH(load_model(path, too_many),
                      Catch::Contains(std::to_string(total) + " layers, fewer than the first " +
                                      std::to_string(total + 1) + " asked for"));
  };
  Spec s;
  s.layers = 3;
  s.emb = Layout::bert;
  const std::string bert = fresh("cut_bert");
  save_hf(make_model(s), bert, Layout::bert);
  check_prefix(bert, 3);
  const std::string native = fresh("cut_native.safetensors");
  save_native(make_model(s), native);
  check_prefix(native, 3);
  const std::string llama = fresh("cut_llama");
  save_hf(random_llama(3, 4, 2, 16, 4, 24, 5, 50), llama, Layout::llama);
  check_prefix(llama, 3);
  // A cut model's missing layers are not even read: a checkpoint whose last
  // layer's tensors are absent loads its first layers.
  s.layers = 2;
  const std::string short_file = fresh("cut_short");
  save_hf(make_model(s), short_file, Layout::bert);
  std::ifstream in(short_file + "/config.json");
  json c = json::parse(in);
  in.close();
  c["num_hidden_layers"] = 3;  // claims a third layer the file does not hold
  std::ofstream(short_file + "/config.json") << c.dump();
  CHECK_THROWS(load_model(short_file));
  CHECK(load_model(short_file, cut).arch().layers == 2);
  // Nor are a native file's layers past the cut decoded: under a memory
  // budget between the cut's decoded size and the whole file's, the cut
  // loads (the same weights as before) and the whole load is refused.
  std::uint64_t whole = 0, kept = 0;
  const SafetensorsFile stored = SafetensorsFile::read(native);
  for (const Tensor& t : stored.tensors()) {
    whole += t.values.size() * sizeof(double);
    if (t.name.rfind("layers.2.", 0) != 0) kept += t.values.size() * sizeof(double);
  }
  REQUIRE(kept < whole);
  set_memory_budget((kept + whole) / 2);
  CHECK_THROWS_WITH(load_model(native), Catch::Contains(native + ": weights: needs an estimated"));
  const Model native_cut = load_model(native, cut);
  set_memory_budget(std::nullopt);
  CHECK(native_cut.arch().layers == 2);
  require_same_layers(native_cut, load_model(native, cut));
}

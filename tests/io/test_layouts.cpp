// The RoBERTa and DistilBERT layouts (written by save_hf, loaded back: the
// native model's weights and forward passes bit for bit; the tensor names and
// index conventions checked against the raw tensors), and checkpoints that
// carry tensors the analysis does not use, in any dtype.
#include "support/checkpoint_helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"

#include <cstring>

namespace {

/// Appends raw tensors (dtype, shape, little-endian bytes) to a safetensors file.
struct Raw {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
};
void append_raw(const std::string& path, const std::vector<Raw>& extra) {
  std::ifstream in(path, std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t n = 0;
  std::memcpy(&n, all.data(), 8);
  json h = json::parse(all.substr(8, n));
  std::string data = all.substr(8 + n);
  for (const Raw& r : extra) {
    h[r.name] = {{"dtype", r.dtype}, {"shape", r.shape}, {"data_offsets", {data.size(), data.size() + r.bytes.size()}}};
    data += r.bytes;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t len = text.size();
  std::memcpy(out.data(), &len, 8);  // little-endian hosts only, as the CI
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out << text << data;
}

Matrix<double> final_layer(const Model& m, const std::vector<long>& ids) {
  return forward<double>(m, m.arch().variant, embed_tokens<double>(m, ids), {false}).X.back();
}

}  // namespace

TEST_CASE("RoBERTa and DistilBERT: written, loaded back, identical to the native model", "[checkpoint][hf]") {
  for (const Layout layout : {Layout::roberta, Layout::distilbert}) {
    for (const std::string dtype : {"F64", "F32"}) {
      CAPTURE(to_string(layout), dtype);
      Spec s;
      s.layers = 3;
      s.heads = 4;
      s.d = 12;
      s.d_ff = 20;
      s.emb = layout;
      s.f32 = dtype == "F32";
      s.seed = 21;
      const Model m = make_model(s);
      const std::string native = fresh("layout_native.safetensors");
      const std::string dir = fresh("layout_" + to_string(layout) + "_" + dtype);
      save_native(m, native);
      save_hf(m, dir, layout, dtype);
      const Model a = load_model(native), b = load_model(dir);
      require_same_arch(b.arch(), m.arch());
      require_same_layers(b, a);
      require_same_embeddings(b, a);
      CHECK(read_json(dir + "/config.json").at("model_type") == to_string(layout));
      const std::vector<long> ids = {3, 0, 10, 7, 7, 2};  // not 1: RoBERTa's padding token (refused)
      CHECK(final_layer(a, ids) == final_layer(b, ids));
    }
  }
}

TEST_CASE("RoBERTa: token i uses position row padding_idx + 1 + i", "[checkpoint][hf]") {
  Spec s;
  s.emb = Layout::roberta;
  const Model m = make_model(s);
  const std::string dir = fresh("roberta_positions");
  save_hf(m, dir, Layout::roberta);
  const json cfg = read_json(dir + "/config.json");
  CHECK(cfg.at("pad_token_id") == 1);
  const auto f = SafetensorsFile::read(dir + "/model.safetensors");
  const Tensor& pos = f.at("roberta.embeddings.position_embeddings.weight");
  const auto rows = m.embeddings()->position.rows(), d = m.embeddings()->position.cols();
  REQUIRE(pos.shape == std::vector<std::int64_t>{rows + 2, d});
  CHECK(cfg.at("max_position_embeddings") == rows + 2);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < d; ++j)
      REQUIRE(pos.values[static_cast<std::size_t>((2 + i) * d + j)] == m.embeddings()->position(i, j));

  // With padding_idx 0 the table starts one row earlier: row 1 of the file.
  json c = cfg;
  c["pad_token_id"] = 0;
  write_json(dir + "/config.json", c);
  const Model z = load_model(dir);
  REQUIRE(z.embeddings()->position.rows() == rows + 1);
  for (Eigen::Index j = 0; j < d; ++j) CHECK(z.embeddings()->position(0, j) == pos.values[static_cast<std::size_t>(d + j)]);
  // HuggingFace gives the padding token the padding row and does not count it: token input refuses it,
  // here and after a native round trip.
  CHECK(z.embeddings()->padding_id == 0L);
  CHECK_THROWS_WITH(embed_tokens<double>(z, {2, 0, 3}), Catch::Contains("tokens: token 1 has id 0, the padding token"));
  CHECK_NOTHROW(embed_tokens<double>(z, {2, 1, 3}));
  save_native(z, dir + "/native.safetensors");
  const Model zn = load_model(dir + "/native.safetensors");
  CHECK(zn.embeddings()->padding_id == 0L);
  CHECK_THROWS_WITH(embed_tokens<double>(zn, {0}), Catch::Contains("has id 0, the padding token"));
  c["pad_token_id"] = static_cast<int>(rows + 2);  // no row left
  write_json(dir + "/config.json", c);
  require_error([&] { load_model(dir); }, dir + "/model.safetensors", "roberta.embeddings.position_embeddings.weight",
                {"first one used"});
}

TEST_CASE("DistilBERT: q/k/v_lin rows are heads, out_lin columns are heads, no token types", "[checkpoint][hf]") {
  Spec s;
  s.emb = Layout::distilbert;
  s.heads = 2;
  s.d = 8;
  const Model m = make_model(s);
  const std::string dir = fresh("distilbert_raw");
  save_hf(m, dir, Layout::distilbert);
  const auto f = SafetensorsFile::read(dir + "/model.safetensors");
  CHECK(f.find("distilbert.embeddings.token_type_embeddings.weight") == nullptr);
  const Tensor& k = f.at("distilbert.transformer.layer.2.attention.k_lin.weight");
  const Tensor& o = f.at("distilbert.transformer.layer.2.attention.out_lin.weight");
  const HeadWeights& hw = m.layer(2).heads[1];
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) {
      CAPTURE(i, j);
      CHECK(hw.W_K(i, j) == k.values[static_cast<std::size_t>((4 + j) * 8 + i)]);
      CHECK(hw.W_O(j, i) == o.values[static_cast<std::size_t>(i * 8 + 4 + j)]);
    }
  const json cfg = read_json(dir + "/config.json");
  CHECK(cfg.at("n_layers") == 3);
  CHECK(cfg.at("hidden_dim") == 12);

  // X^0 = LN(word + position), evaluated here directly.
  const Model r = load_model(dir);
  const Embeddings& e = *r.embeddings();
  const MatrixXd X = embed_tokens<double>(r, {5, 2});
  for (int i = 0; i < 2; ++i) {
    const Eigen::RowVectorXd x = e.word.row(i == 0 ? 5 : 2) + e.position.row(i);
    const double mean = x.mean(), var = (x.array() - mean).square().mean();
    for (int j = 0; j < 8; ++j) {
      const double want = (x(j) - mean) / std::sqrt(var + 1e-12) * e.ln_g(j) + e.ln_b(j);
      CHECK(std::abs(X(i, j) - want) <= 64 * std::numeric_limits<double>::epsilon() * (1 + std::abs(want)));
    }
  }
  Spec t = s;
  t.ln_eps = 1e-5;
  require_error([&] { save_hf(make_model(t), fresh("distilbert_eps"), Layout::distilbert); },
                tmp_path("distilbert_eps"), "ln_eps", {"1e-12"});
}

TEST_CASE("tensors the analysis does not use load in any dtype and are ignored", "[checkpoint][hf]") {
  Spec s;
  s.emb = Layout::bert;
  s.layers = 2;
  const Model m = make_model(s);
  const std::string dir = fresh("bert_extras");
  save_hf(m, dir, Layout::bert);
  std::string ids, mask(7, '\1'), u8 = "abc", half(2 * 8 * 8, '\0');
  for (std::int64_t i = 0; i < 7; ++i) ids.append(reinterpret_cast<const char*>(&i), 8);
  append_raw(dir + "/model.safetensors", {{"bert.embeddings.position_ids", "I64", {1, 7}, ids},
                                          {"bert.attention_mask", "BOOL", {7}, mask},
                                          {"bert.buffer", "U8", {3}, u8},
                                          {"bert.pooler.dense.weight", "BF16", {8, 8}, half},
                                          {"classifier.weight", "F16", {8, 8}, half}});
  const Model r = load_model(dir);
  require_same_layers(r, m);
  require_same_embeddings(r, m);
}

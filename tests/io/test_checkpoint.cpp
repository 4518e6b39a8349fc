// Checkpoints: native round trips, the BERT / GPT-2 / ALBERT layouts (the
// same weights through every layout give identical models; the per-head
// slicing is checked against the raw tensors index by index), the real
// checkpoints in the shared folder, and the loader's error messages.
#include "support/helpers.hpp"
#include "support/checkpoint_helpers.hpp"

#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/io/safetensors.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>

using namespace sanpath;
using sanpath::test::real_models_dir;
using sanpath::test::tmp_path;
namespace fs = std::filesystem;
using json = nlohmann::json;


TEST_CASE("native files round-trip exactly", "[checkpoint][native]") {
  SECTION("BERT-style with embeddings, full double precision") {
    Spec s;
    s.emb = Layout::bert;
    s.ln_eps = 1e-12 / 3;  // not a short decimal
    s.act = Activation::gelu_tanh;
    const Model m = make_model(s);
    const std::string path = fresh("native_bert.safetensors");
    save_native(m, path);
    const Model r = load_model(path);
    require_same_arch(r.arch(), m.arch());
    require_same_layers(r, m);
    require_same_embeddings(r, m);
    CHECK(r.source() == path);
    const auto f = SafetensorsFile::read(path);
    for (const Tensor& t : f.tensors()) CHECK(t.dtype == "F64");
    CHECK(f.metadata().count("sanpath.config") == 1);
  }
  SECTION("SAN without MLP and LayerNorm, causal, GPT-2 embeddings") {
    Spec s;
    s.mlp = s.layernorm = false;
    s.variant = Variant::san(MaskKind::causal);
    s.act = Activation::relu;
    s.emb = Layout::gpt2;
    s.heads = 4;
    const Model m = make_model(s);
    const std::string path = fresh("native_san.safetensors");
    save_native(m, path);
    const Model r = load_model(path);
    require_same_arch(r.arch(), m.arch());
    require_same_layers(r, m);
    require_same_embeddings(r, m);
    CHECK(!r.layer(0).has_mlp());
    CHECK(!r.layer(0).has_layernorm());
  }
  SECTION("shared layers are stored once; ALBERT embeddings with e != d") {
    Spec s;
    s.shared = true;
    s.layers = 5;
    s.emb = Layout::albert;
    s.e = 6;
    const Model m = make_model(s);
    const std::string path = fresh("native_shared.safetensors");
    save_native(m, path);
    const auto f = SafetensorsFile::read(path);
    CHECK(f.find("layers.0.heads.0.W_Q") != nullptr);
    CHECK(f.find("layers.1.heads.0.W_Q") == nullptr);
    const Model r = load_model(path);
    require_same_arch(r.arch(), m.arch());
    require_same_layers(r, m);
    require_same_embeddings(r, m);
  }
}

TEST_CASE("the same weights through native, BERT and GPT-2 layouts give identical models", "[checkpoint][hf]") {
  for (const bool f32 : {false, true}) {
    CAPTURE(f32);
    Spec s;
    s.f32 = f32;
    s.layers = 3;
    s.heads = 4;
    s.d = 12;
    s.d_ff = 20;
    s.ln_eps = 1e-5;
    s.act = Activation::gelu_tanh;
    s.seed = f32 ? 7 : 8;
    const Model m = make_model(s);
    const std::string dtype = f32 ? "F32" : "F64";

    const std::string native = fresh("same_native.safetensors");
    const std::string bert = fresh("same_bert_" + dtype);
    const std::string gpt2 = fresh("same_gpt2_" + dtype);
    save_native(m, native);
    save_hf(m, bert, Layout::bert, dtype);
    save_hf(m, gpt2, Layout::gpt2, dtype);
    CHECK(SafetensorsFile::read(bert + "/model.safetensors").tensors().front().dtype == dtype);

    const Model from_native = load_model(native);
    const Model from_bert = load_model(bert);
    const Model from_gpt2 = load_model(gpt2);
    require_same_layers(from_native, m);
    require_same_layers(from_bert, m);
    require_same_layers(from_gpt2, m);
    require_same_layers(from_bert, from_gpt2);

    // The variant is the layout's own.
    CHECK(from_bert.arch().variant == Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none});
    CHECK(from_gpt2.arch().variant == Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal});
    CHECK(from_bert.arch().activation == Activation::gelu_tanh);
    CHECK(from_gpt2.arch().activation == Activation::gelu_tanh);
    CHECK(from_bert.arch().ln_eps == 1e-5);
    CHECK(from_gpt2.arch().ln_eps == 1e-5);
    CHECK(!from_bert.embeddings());
    // A model.safetensors beside its config.json loads as the folder does.
    require_same_layers(load_model(bert + "/model.safetensors"), m);

    // Identical forward passes (bit for bit, at 257 bits) through the three
    // layouts, in every variant the weights allow.
    RandomInputSpec in;
    in.n = 5;
    in.d = s.d;
    in.seed = 3;
    const Matrix<mpfr_real<77>> X0 = convert<mpfr_real<77>>(random_input(in));
    for (const Variant v : {Variant::san(), Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none},
                            Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal}}) {
      const auto a = forward<mpfr_real<77>>(from_native, v, X0, {false}).X.back();
      const auto b = forward<mpfr_real<77>>(from_bert, v, X0, {false}).X.back();
      const auto c = forward<mpfr_real<77>>(from_gpt2, v, X0, {false}).X.back();
      CHECK(a == b);
      CHECK(a == c);
    }
  }
  SECTION("F32 rounds weights that are not floats") {
    Spec s;
    const Model m = make_model(s);  // full double precision
    const std::string dir = fresh("rounded_bert");
    save_hf(m, dir, Layout::bert, "F32");
    const Model r = load_model(dir);
    const MatrixXd& a = r.layer(0).heads[0].W_Q;
    const MatrixXd& b = m.layer(0).heads[0].W_Q;
    CHECK(a(0, 0) == static_cast<double>(static_cast<float>(b(0, 0))));
    CHECK(a(0, 0) != b(0, 0));
  }
}

TEST_CASE("BERT layout: Linear [out, in] weights, head h owns rows h*d_h.. of Q/K/V and columns of the output",
          "[checkpoint][hf]") {
  Spec s;
  s.heads = 2;
  s.d = 8;
  s.emb = Layout::bert;
  s.act = Activation::relu;
  const Model m = make_model(s);
  const std::string dir = fresh("layout_bert");
  save_hf(m, dir, Layout::bert);
  const auto f = SafetensorsFile::read(dir + "/model.safetensors");
  const json cfg = read_json(dir + "/config.json");
  CHECK(cfg.at("model_type") == "bert");
  CHECK(cfg.at("hidden_act") == "relu");
  CHECK(cfg.at("num_hidden_layers") == 3);

  // Raw tensor entry [r, c] of a row-major tensor.
  const auto at = [&](const std::string& name, std::int64_t r, std::int64_t c) {
    const Tensor& t = f.at(name);
    return t.values.at(static_cast<std::size_t>(r * t.shape.at(1) + c));
  };
  const int d = 8, dh = 4;
  const std::string p = "bert.encoder.layer.1.";
  const LayerWeights& w = m.layer(1);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < dh; ++j) {
        CAPTURE(h, i, j);
        const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
        REQUIRE(hw.W_Q(i, j) == at(p + "attention.self.query.weight", h * dh + j, i));
        REQUIRE(hw.W_K(i, j) == at(p + "attention.self.key.weight", h * dh + j, i));
        REQUIRE(hw.W_V(i, j) == at(p + "attention.self.value.weight", h * dh + j, i));
        REQUIRE(hw.W_O(j, i) == at(p + "attention.output.dense.weight", i, h * dh + j));
        REQUIRE(hw.b_Q(j) == f.at(p + "attention.self.query.bias").values.at(static_cast<std::size_t>(h * dh + j)));
      }
  CHECK(w.W_1(3, 5) == at(p + "intermediate.dense.weight", 5, 3));
  CHECK(w.W_2(5, 3) == at(p + "output.dense.weight", 3, 5));
  CHECK(w.ln1_g(2) == f.at(p + "attention.output.LayerNorm.weight").values.at(2));
  CHECK(w.ln2_b(2) == f.at(p + "output.LayerNorm.bias").values.at(2));
  CHECK(m.embeddings()->word(4, 1) == at("bert.embeddings.word_embeddings.weight", 4, 1));

  SECTION("without the bert. prefix, with old gamma/beta names, extra tensors ignored") {
    edit_tensors(dir + "/model.safetensors", [](std::vector<Tensor>& ts) {
      for (Tensor& t : ts) {
        t.name = t.name.substr(5);
        const auto pos = t.name.find("LayerNorm.");
        if (pos != std::string::npos) {
          const std::string leaf = t.name.substr(pos + 10);
          t.name = t.name.substr(0, pos + 10) + (leaf == "weight" ? "gamma" : "beta");
        }
      }
      ts.push_back({"pooler.dense.weight", "F32", {8, 8}, std::vector<double>(64, 0.5)});
      ts.push_back({"classifier.bias", "F32", {3}, {1, 2, 3}});
    });
    const auto g = SafetensorsFile::read(dir + "/model.safetensors");
    CHECK(g.find("encoder.layer.0.output.LayerNorm.gamma") != nullptr);
    const Model r = load_model(dir);
    require_same_layers(r, m);
    require_same_embeddings(r, m);
  }
  SECTION("detection by architectures, then by tensor names, when model_type is absent") {
    json c = cfg;
    c.erase("model_type");
    write_json(dir + "/config.json", c);
    require_same_layers(load_model(dir), m);
    c.erase("architectures");
    write_json(dir + "/config.json", c);
    require_same_layers(load_model(dir), m);
  }
}

TEST_CASE("GPT-2 layout: Conv1D [in, out] weights, fused c_attn = Q | K | V", "[checkpoint][hf]") {
  Spec s;
  s.heads = 2;
  s.d = 8;
  s.d_ff = 32;
  s.emb = Layout::gpt2;
  s.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  const Model m = make_model(s);
  const std::string dir = fresh("layout_gpt2");
  save_hf(m, dir, Layout::gpt2);
  const auto f = SafetensorsFile::read(dir + "/model.safetensors");
  const auto at = [&](const std::string& name, std::int64_t r, std::int64_t c) {
    const Tensor& t = f.at(name);
    return t.values.at(static_cast<std::size_t>(r * t.shape.at(1) + c));
  };
  const int d = 8, dh = 4;
  const std::string p = "transformer.h.2.";
  const LayerWeights& w = m.layer(2);
  CHECK(f.at(p + "attn.c_attn.weight").shape == std::vector<std::int64_t>{8, 24});
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < dh; ++j) {
        CAPTURE(h, i, j);
        const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
        REQUIRE(hw.W_Q(i, j) == at(p + "attn.c_attn.weight", i, h * dh + j));
        REQUIRE(hw.W_K(i, j) == at(p + "attn.c_attn.weight", i, d + h * dh + j));
        REQUIRE(hw.W_V(i, j) == at(p + "attn.c_attn.weight", i, 2 * d + h * dh + j));
        REQUIRE(hw.W_O(j, i) == at(p + "attn.c_proj.weight", h * dh + j, i));
        REQUIRE(hw.b_V(j) == f.at(p + "attn.c_attn.bias").values.at(static_cast<std::size_t>(2 * d + h * dh + j)));
      }
  CHECK(w.W_1(3, 5) == at(p + "mlp.c_fc.weight", 3, 5));
  CHECK(w.W_2(5, 3) == at(p + "mlp.c_proj.weight", 5, 3));
  const json cfg = read_json(dir + "/config.json");
  CHECK(cfg.at("n_inner") == 32);

  SECTION("without the transformer. prefix, with buffers, ln_f and lm_head; n_inner null means 4 d") {
    edit_tensors(dir + "/model.safetensors", [](std::vector<Tensor>& ts) {
      for (Tensor& t : ts) t.name = t.name.substr(12);
      ts.push_back({"h.0.attn.bias", "F32", {1, 1, 4, 4}, std::vector<double>(16, 1.0)});
      ts.push_back({"h.0.attn.masked_bias", "F32", {}, {-1e4}});
      ts.push_back({"ln_f.weight", "F32", {8}, std::vector<double>(8, 1.0)});
      ts.push_back({"lm_head.weight", "F32", {11, 8}, std::vector<double>(88, 0.0)});
    });
    json c = cfg;
    c["n_inner"] = nullptr;
    write_json(dir + "/config.json", c);
    const Model r = load_model(dir);
    require_same_layers(r, m);
    require_same_embeddings(r, m);
    CHECK(r.arch().d_ff == 32);
  }
}

TEST_CASE("ALBERT layout: one shared layer group, embedding mapping e -> d", "[checkpoint][hf]") {
  Spec s;
  s.shared = true;
  s.layers = 4;
  s.emb = Layout::albert;
  s.e = 6;
  const Model m = make_model(s);
  const std::string dir = fresh("layout_albert");
  save_hf(m, dir, Layout::albert);
  const auto f = SafetensorsFile::read(dir + "/model.safetensors");
  const Tensor& map = f.at("albert.encoder.embedding_hidden_mapping_in.weight");
  CHECK(map.shape == std::vector<std::int64_t>{8, 6});  // Linear e -> d: [d, e]
  CHECK(m.embeddings()->mapping(5, 7) == map.values.at(7 * 6 + 5));
  const std::string p = "albert.encoder.albert_layer_groups.0.albert_layers.0.";
  const Tensor& q = f.at(p + "attention.query.weight");
  const Tensor& o = f.at(p + "attention.dense.weight");
  const Tensor& ffn = f.at(p + "ffn.weight");
  CHECK(ffn.shape == std::vector<std::int64_t>{12, 8});
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) {
        CAPTURE(h, i, j);
        REQUIRE(m.layer(0).heads[static_cast<std::size_t>(h)].W_Q(i, j) ==
                q.values.at(static_cast<std::size_t>((h * 4 + j) * 8 + i)));
        REQUIRE(m.layer(0).heads[static_cast<std::size_t>(h)].W_O(j, i) ==
                o.values.at(static_cast<std::size_t>(i * 8 + h * 4 + j)));
      }
  CHECK(m.layer(0).W_1(7, 11) == ffn.values.at(11 * 8 + 7));
  CHECK(m.layer(0).ln1_g(3) == f.at(p + "attention.LayerNorm.weight").values.at(3));
  CHECK(m.layer(0).ln2_g(3) == f.at(p + "full_layer_layer_norm.weight").values.at(3));

  const Model r = load_model(dir);
  CHECK(r.arch().shared_layers);
  CHECK(r.arch().layers == 4);
  CHECK(r.arch().variant == Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none});
  require_same_layers(r, m);
  require_same_embeddings(r, m);

  json c = read_json(dir + "/config.json");
  c["num_hidden_groups"] = 2;
  write_json(dir + "/config.json", c);
  require_error([&] { load_model(dir); }, dir + "/config.json", "num_hidden_groups");

  // Layers that differ cannot be written as one shared group.
  Spec t;
  t.layers = 2;
  require_error([&] { save_hf(make_model(t), fresh("albert_unshared"), Layout::albert); }, tmp_path("albert_unshared"),
                "layers", {"differs"});
}

TEST_CASE("the real checkpoints load with their sizes and embeddings", "[checkpoint][real]") {
  const std::string root = real_models_dir();
  if (root.empty()) return;  // skipped outside CI (real_models_dir says so)
  SECTION("BERT ticket classifier") {
    const std::string dir = root + "/bert-ticket-classifier";
    const Model m = load_model(dir);
    const Architecture& a = m.arch();
    CHECK(a.layers == 2);
    CHECK(a.heads == 4);
    CHECK(a.d_model == 96);
    CHECK(a.d_qk == 24);
    CHECK(a.d_v == 24);
    CHECK(a.d_ff == 192);
    CHECK(a.variant == Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none});
    CHECK(a.activation == Activation::gelu);
    CHECK(a.ln_eps == 1e-12);
    REQUIRE(m.embeddings());
    CHECK(m.embeddings()->kind == Layout::bert);
    CHECK(m.embeddings()->vocab_size() == 424);
    CHECK(m.embeddings()->max_positions() == 160);
    CHECK(m.embeddings()->token_type.rows() == 2);
    // Head 3 of layer 1 is rows 72..95 of the query weight, transposed.
    const auto f = SafetensorsFile::read(dir + "/model.safetensors");
    const Tensor& q = f.at("bert.encoder.layer.1.attention.self.query.weight");
    const Tensor& o = f.at("bert.encoder.layer.1.attention.output.dense.weight");
    const HeadWeights& hw = m.layer(1).heads[3];
    for (int i : {0, 17, 95})
      for (int j : {0, 11, 23}) {
        CAPTURE(i, j);
        CHECK(hw.W_Q(i, j) == q.values.at(static_cast<std::size_t>((72 + j) * 96 + i)));
        CHECK(hw.W_O(j, i) == o.values.at(static_cast<std::size_t>(i * 96 + 72 + j)));
      }
  }
  SECTION("GPT-2 capp") {
    const std::string dir = root + "/gpt2-capp";
    const Model m = load_model(dir);
    const Architecture& a = m.arch();
    CHECK(a.layers == 4);
    CHECK(a.heads == 4);
    CHECK(a.d_model == 64);
    CHECK(a.d_qk == 16);
    CHECK(a.d_ff == 256);
    CHECK(a.variant == Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal});
    CHECK(a.activation == Activation::gelu_tanh);
    CHECK(a.ln_eps == 1e-5);
    REQUIRE(m.embeddings());
    CHECK(m.embeddings()->kind == Layout::gpt2);
    CHECK(m.embeddings()->vocab_size() == 53);
    CHECK(m.embeddings()->max_positions() == 512);
    const auto f = SafetensorsFile::read(dir + "/model.safetensors");
    const Tensor& c = f.at("transformer.h.3.attn.c_attn.weight");
    const HeadWeights& hw = m.layer(3).heads[2];
    for (int i : {0, 40, 63})
      for (int j : {0, 9, 15}) {
        CAPTURE(i, j);
        CHECK(hw.W_K(i, j) == c.values.at(static_cast<std::size_t>(i * 192 + 64 + 32 + j)));
      }
  }
  SECTION("a real checkpoint survives native and HF round trips exactly") {
    const Model m = load_model(root + "/gpt2-capp");
    const std::string native = fresh("real_gpt2.safetensors");
    save_native(m, native);
    const Model r = load_model(native);
    require_same_arch(r.arch(), m.arch());
    require_same_layers(r, m);
    require_same_embeddings(r, m);
    const std::string dir = fresh("real_gpt2_f32");
    save_hf(m, dir, Layout::gpt2, "F32");  // the weights are F32 already
    require_same_layers(load_model(dir), m);
  }
}

namespace {

/// Rewrites the safetensors file at `path` with its header edited by `edit`
/// (given the header and the data section's size) and `extra` bytes
/// appended to the data section.
void edit_raw(const std::string& path, const std::function<void(json&, std::uint64_t)>& edit,
              const std::string& extra = "") {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  json header = json::parse(bytes.substr(8, n));
  const std::string data = bytes.substr(8 + n);
  edit(header, data.size());
  const std::string text = header.dump();
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[static_cast<std::size_t>(i)] = static_cast<char>(text.size() >> (8 * i) & 0xff);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << length << text << data << extra;
}

}  // namespace

TEST_CASE("extra tensors of dtypes sanpath cannot decode do not stop a load; needed ones are refused",
          "[checkpoint][errors]") {
  Spec s;
  s.layers = 2;
  s.emb = Layout::bert;
  const Model m = make_model(s);
  const std::string dir = fresh("undecodable_bert"), st_path = dir + "/model.safetensors";
  save_hf(m, dir, Layout::bert);
  // An MX-style scale tensor beside the weights (as quantised checkpoints carry).
  edit_raw(st_path, [](json& h, std::uint64_t end) {
    h["bert.encoder.layer.0.mlp_scales"] = {{"dtype", "F8_E8M0"}, {"shape", {3}}, {"data_offsets", {end, end + 3}}};
  }, std::string(3, '\x7f'));
  const Model loaded = load_model(dir);
  require_same_layers(m, loaded);
  require_same_embeddings(m, loaded);
  // A tensor the model needs, stored in a dtype sanpath cannot decode (C64:
  // 8 bytes an element, as the F64 it replaces).
  edit_raw(st_path, [](json& h, std::uint64_t) { h["bert.encoder.layer.1.output.LayerNorm.bias"]["dtype"] = "C64"; });
  require_error([&] { load_model(dir); }, st_path, "bert.encoder.layer.1.output.LayerNorm.bias",
                {"dtype C64 cannot be decoded"});
}

TEST_CASE("loader errors name the file and the field", "[checkpoint][errors]") {
  Spec s;
  s.layers = 2;
  s.emb = Layout::bert;
  const Model m = make_model(s);
  const std::string dir = fresh("err_bert");
  save_hf(m, dir, Layout::bert);
  const std::string cfg_path = dir + "/config.json", st_path = dir + "/model.safetensors";
  const json cfg = read_json(cfg_path);
  const auto with_config = [&](const std::function<void(json&)>& edit) {
    json c = cfg;
    edit(c);
    write_json(cfg_path, c);
  };

  SECTION("path, folder contents") {
    require_error([&] { load_model(tmp_path("nothing-here")); }, tmp_path("nothing-here"), "file", {"does not exist"});
    const std::string empty = fresh("err_empty");
    fs::create_directories(empty);
    require_error([&] { load_model(empty); }, empty, "model.safetensors", {"missing"});
    fs::remove(cfg_path);
    require_error([&] { load_model(dir); }, dir, "config.json", {"missing"});
  }
  SECTION("config.json values") {
    with_config([](json& c) { c["num_attention_heads"] = 0; });
    require_error([&] { load_model(dir); }, cfg_path, "num_attention_heads", {"positive integer"});
    with_config([](json& c) { c["num_hidden_layers"] = 0; });
    require_error([&] { load_model(dir); }, cfg_path, "num_hidden_layers", {"positive integer"});
    with_config([](json& c) { c.erase("hidden_size"); });
    require_error([&] { load_model(dir); }, cfg_path, "hidden_size", {"missing"});
    with_config([](json& c) { c["hidden_size"] = "8"; });
    require_error([&] { load_model(dir); }, cfg_path, "hidden_size", {"positive integer"});
    with_config([](json& c) { c["num_attention_heads"] = 3; });
    require_error([&] { load_model(dir); }, cfg_path, "hidden_size", {"not divisible", "num_attention_heads = 3"});
    with_config([](json& c) { c["hidden_act"] = "swish"; });
    require_error([&] { load_model(dir); }, cfg_path, "hidden_act", {"swish"});
    with_config([](json& c) { c["model_type"] = "bloom"; });
    require_error([&] { load_model(dir); }, cfg_path, "model_type", {"bloom"});
    with_config([](json& c) {
      c.erase("model_type");
      c.erase("architectures");
    });
    edit_tensors(st_path, [](std::vector<Tensor>& ts) {
      for (Tensor& t : ts) t.name = "x." + t.name.substr(t.name.rfind('.') + 1) + std::to_string(&t - ts.data());
    });
    require_error([&] { load_model(dir); }, cfg_path, "model_type", {"missing"});
    std::ofstream(cfg_path, std::ios::trunc) << "{ not json";
    require_error([&] { load_model(dir); }, cfg_path, "json", {"not valid JSON"});
  }
  SECTION("GPT-2 config") {
    const std::string g = fresh("err_gpt2");
    Spec t;
    save_hf(make_model(t), g, Layout::gpt2);
    json c = read_json(g + "/config.json");
    c["n_head"] = 0;
    write_json(g + "/config.json", c);
    require_error([&] { load_model(g); }, g + "/config.json", "n_head", {"positive integer"});
    c["n_head"] = 2;
    c["scale_attn_by_inverse_layer_idx"] = true;
    write_json(g + "/config.json", c);
    require_error([&] { load_model(g); }, g + "/config.json", "scale_attn_by_inverse_layer_idx");
  }
  SECTION("all missing tensors in one message") {
    edit_tensors(st_path, [](std::vector<Tensor>& ts) {
      std::vector<Tensor> kept;
      for (Tensor& t : ts)
        if (t.name.find("encoder.layer.1.") == std::string::npos && t.name.find("query.bias") == std::string::npos)
          kept.push_back(t);
      ts = kept;
    });
    // layer 1: 16 tensors; layer 0: its query bias.
    require_error([&] { load_model(dir); }, st_path, "tensors",
                  {"17 missing", "bert.encoder.layer.0.attention.self.query.bias", "(and 12 more)"});
  }
  SECTION("a shape inconsistent with config.json names the tensor and both shapes") {
    edit_tensors(st_path, [](std::vector<Tensor>& ts) {
      for (Tensor& t : ts)
        if (t.name == "bert.encoder.layer.1.attention.self.key.weight") {
          t.shape = {8, 7};
          t.values.resize(56);
        }
    });
    require_error([&] { load_model(dir); }, st_path, "bert.encoder.layer.1.attention.self.key.weight",
                  {"[8, 7]", "[8, 8]"});
    edit_tensors(st_path, [](std::vector<Tensor>& ts) {
      for (Tensor& t : ts)
        if (t.name == "bert.embeddings.word_embeddings.weight") t.shape = {static_cast<std::int64_t>(t.values.size())};
    });
    with_config([](json& c) { c["vocab_size"] = 12; });  // the tensor is reported first
    CHECK(error_of([&] { load_model(dir); }).find("bert.embeddings.word_embeddings.weight") != std::string::npos);
  }
  SECTION("NaN and Inf weights are rejected as they are decoded, naming the file, the tensor and the element") {
    // Element 3 + 2·d of the [d, d] value weight is row 2, column 3 of the stored tensor.
    const auto d = static_cast<std::size_t>(m.arch().d_model);
    edit_tensors(st_path, [&](std::vector<Tensor>& ts) {
      for (Tensor& t : ts)
        if (t.name == "bert.encoder.layer.0.attention.self.value.weight") t.values[3 + 2 * d] = std::nan("");
    });
    require_error([&] { load_model(dir); }, st_path, "bert.encoder.layer.0.attention.self.value.weight",
                  {"NaN at [2, 3]"});
    save_hf(m, dir, Layout::bert);
    edit_tensors(st_path, [](std::vector<Tensor>& ts) {
      for (Tensor& t : ts)
        if (t.name == "bert.encoder.layer.1.output.LayerNorm.bias") t.values[1] = -INFINITY;
    });
    require_error([&] { load_model(dir); }, st_path, "bert.encoder.layer.1.output.LayerNorm.bias", {"Inf at [1]"});
    // The same in F32, whose decoding tests the exponent bits of the stored floats.
    save_hf(m, dir, Layout::bert, "F32");
    edit_tensors(st_path, [&](std::vector<Tensor>& ts) {
      for (Tensor& t : ts)
        if (t.name == "bert.encoder.layer.1.attention.output.dense.weight") t.values[d + 1] = INFINITY;
    });
    require_error([&] { load_model(dir); }, st_path, "bert.encoder.layer.1.attention.output.dense.weight", {"Inf at [1, 1]"});
    // Two bad tensors, one in each half the loader decodes side by side: the
    // error is the one the table's order meets first, as in a single pass.
    save_hf(m, dir, Layout::bert, "F32");
    const auto poison = [&](const std::string& name, std::size_t at) {
      edit_tensors(st_path, [&](std::vector<Tensor>& ts) {
        for (Tensor& t : ts)
          if (t.name == name) t.values[at] = std::nan("");
      });
    };
    poison("bert.embeddings.LayerNorm.bias", 2);  // the last slots (embeddings follow the layers)
    require_error([&] { load_model(dir); }, st_path, "bert.embeddings.LayerNorm.bias", {"NaN at [2]"});
    poison("bert.encoder.layer.0.attention.self.query.weight", d + 4);  // the first slot
    for (int i = 0; i < 5; ++i)
      require_error([&] { load_model(dir); }, st_path, "bert.encoder.layer.0.attention.self.query.weight",
                    {"NaN at [1, 4]"});
  }
  SECTION("a hostile safetensors file is reported by the reader") {
    std::ofstream(st_path, std::ios::binary | std::ios::trunc) << "abc";
    require_error([&] { load_model(dir); }, st_path, "header length");
  }
}

TEST_CASE("native file errors and writer preconditions", "[checkpoint][errors]") {
  Spec s;
  const Model m = make_model(s);
  const std::string path = fresh("err_native.safetensors");
  save_native(m, path);

  SECTION("not a native file and no config.json beside it") {
    const std::string dir = fresh("err_plain");
    fs::create_directories(dir);
    const std::string plain = dir + "/w.safetensors";
    write_safetensors(plain, {{"a", "F64", {1}, {1.0}}});
    require_error([&] { load_model(plain); }, plain, "__metadata__.sanpath.config", {"config.json"});
  }
  SECTION("bad configuration fields") {
    const auto f = SafetensorsFile::read(path);
    auto meta = f.metadata();
    json c = json::parse(meta.at("sanpath.config"));
    c["heads"] = 0;
    meta["sanpath.config"] = c.dump();
    write_safetensors(path, f.tensors(), meta);
    require_error([&] { load_model(path); }, path, "__metadata__.sanpath.config.heads", {">= 1"});
    c["heads"] = 2;
    c["mlp"] = "sometimes";
    meta["sanpath.config"] = c.dump();
    write_safetensors(path, f.tensors(), meta);
    require_error([&] { load_model(path); }, path, "__metadata__.sanpath.config.mlp", {"sometimes"});
    meta["sanpath.config"] = "{oops";
    write_safetensors(path, f.tensors(), meta);
    require_error([&] { load_model(path); }, path, "__metadata__.sanpath.config", {"not valid JSON"});
  }
  SECTION("missing and unexpected tensors") {
    edit_tensors(path, [](std::vector<Tensor>& ts) {
      ts.erase(ts.begin());
      ts.push_back({"layers.0.extra", "F64", {1}, {0.0}});
    });
    require_error([&] { load_model(path); }, path, "tensors", {"1 missing", "layers.0.heads.0.W_Q"});
    save_native(m, path);
    edit_tensors(path, [](std::vector<Tensor>& ts) { ts.push_back({"layers.0.extra", "F64", {1}, {0.0}}); });
    require_error([&] { load_model(path); }, path, "layers.0.extra", {"unexpected tensor"});
  }
  SECTION("save_hf preconditions") {
    Spec t;
    t.mlp = false;
    t.variant.mlp = MlpKind::none;
    require_error([&] { save_hf(make_model(t), fresh("err_nomlp"), Layout::bert); }, tmp_path("err_nomlp"),
                  "layer 0 W_1");
    Spec u;
    u.emb = Layout::gpt2;
    require_error([&] { save_hf(make_model(u), fresh("err_kind"), Layout::bert); }, tmp_path("err_kind"), "embeddings");
    require_error([&] { save_hf(m, fresh("err_dtype"), Layout::bert, "F16"); }, tmp_path("err_dtype"), "dtype");
    CHECK(parse_layout("gpt2") == Layout::gpt2);
    CHECK(to_string(Layout::albert) == "albert");
    CHECK_THROWS_AS(parse_layout("bloom"), std::invalid_argument);
  }
}

// ---- models from tensors in memory (model_from_tensors) ----------------------

TEST_CASE("model_from_tensors maps in-memory tensors exactly as the files", "[checkpoint][memory]") {
  Spec s;
  s.emb = Layout::bert;
  const Model m = make_model(s);
  SECTION("native naming and configuration") {
    const Model back = model_from_tensors(native_tensors(m), native_config(m), "mem");
    require_same_arch(m.arch(), back.arch());
    require_same_layers(m, back);
    require_same_embeddings(m, back);
  }
  for (const Layout layout : {Layout::bert, Layout::gpt2}) {
    SECTION("HuggingFace " + to_string(layout)) {
      Spec t = s;
      if (layout == Layout::gpt2) {
        t.emb = Layout::gpt2;
        t.variant = {true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
      }
      const std::string dir = fresh("mem_" + to_string(layout));
      save_hf(make_model(t), dir, layout);
      const Model from_file = load_model(dir);
      const SafetensorsFile f = SafetensorsFile::read(dir + "/model.safetensors");
      std::ifstream in(dir + "/config.json");
      const std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const Model from_memory = model_from_tensors(f.tensors(), config, "mem");
      require_same_arch(from_file.arch(), from_memory.arch());
      require_same_layers(from_file, from_memory);
      require_same_embeddings(from_file, from_memory);
    }
  }
}

TEST_CASE("model_from_tensors names the source and the field in its errors", "[checkpoint][memory]") {
  const Model m = make_model(Spec{});
  std::vector<Tensor> ts = native_tensors(m);
  const std::string config = native_config(m);
  require_error([&] { model_from_tensors(ts, "{", "mem"); }, "mem", "config", {"not valid JSON"});
  require_error([&] { model_from_tensors(ts, "[1]", "mem"); }, "mem", "config", {"must be a JSON object"});
  require_error([&] { model_from_tensors(ts, R"({"model_type": "bloom"})", "mem"); }, "mem config", "model_type",
                {"'bloom' is not a layout sanpath knows"});
  std::vector<Tensor> dup = ts;
  dup.push_back(ts.front());
  require_error([&] { model_from_tensors(dup, config, "mem"); }, "mem", ts.front().name, {"duplicate tensor name"});
  std::vector<Tensor> short_values = ts;
  short_values.front().values.pop_back();
  require_error([&] { model_from_tensors(short_values, config, "mem"); }, "mem", ts.front().name + ".shape",
                {"values are given"});
  std::vector<Tensor> missing(ts.begin() + 1, ts.end());
  require_error([&] { model_from_tensors(missing, config, "mem"); }, "mem", "tensors", {"1 missing", ts.front().name});
}

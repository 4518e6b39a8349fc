// Streamed layers (LoadOptions::layers): a model whose forward passes read
// each layer from the checkpoint when they reach it gives bit for bit the
// passes of the same checkpoint held whole, in every HuggingFace layout and
// on the real checkpoints; its buffers are reused; bad data is refused with
// the messages of a whole load; analyses that need every layer refuse it.
#include "support/checkpoint_helpers.hpp"
#include "support/llama_helpers.hpp"

#include "sanpath/compute/bounds.hpp"
#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/forward_centred.hpp"
#include "sanpath/core/resources.hpp"
#include "sanpath/io/checkpoint.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

namespace {

using R = mpfr_real<77>;  // 257 bits

LoadOptions with_layers(LoadOptions::Layers layers) {
  LoadOptions o;
  o.layers = layers;
  return o;
}

/// Every layer's output of the direct pass (double and 128 bits) and of the
/// centred pass (double) agree exactly between `whole` and `streamed`.
void require_same_passes(const Model& whole, const Model& streamed, const std::vector<long>& ids) {
  REQUIRE(!whole.streamed());
  REQUIRE(streamed.streamed());
  const InputSpec in = InputSpec::from_tokens(ids);
  const Variant v = whole.arch().variant;
  const ForwardTrace<double> a = forward<double>(whole, v, make_input<double>(whole, in));
  const ForwardTrace<double> b = forward<double>(streamed, v, make_input<double>(streamed, in));
  const ForwardTrace<R> ar = forward<R>(whole, v, make_input<R>(whole, in));
  const ForwardTrace<R> br = forward<R>(streamed, v, make_input<R>(streamed, in));
  REQUIRE(b.X.size() == a.X.size());
  for (std::size_t l = 0; l < a.X.size(); ++l) {
    CAPTURE(l);
    CHECK(b.X[l] == a.X[l]);
    CHECK(br.X[l] == ar.X[l]);
  }
  if (whole.arch().rotary()) return;  // the centred pass is not defined for the Llama family
  const CentredTrace<double> c = forward_centred<double>(whole, v, make_input<double>(whole, in));
  const CentredTrace<double> d = forward_centred<double>(streamed, v, make_input<double>(streamed, in));
  for (std::size_t l = 0; l < c.R.size(); ++l) {
    CAPTURE(l);
    CHECK(d.R[l] == c.R[l]);
    CHECK(d.c[l] == c.c[l]);
  }
}

}  // namespace

TEST_CASE("streamed real checkpoints give the passes of the whole ones", "[checkpoint][streamed][real]") {
  const std::string root = sanpath::test::real_models_dir();
  if (root.empty()) return;  // skipped outside CI (real_models_dir says so)
  for (const char* name : {"bert-ticket-classifier", "gpt2-capp", "llama-stories260k", "llama-tinystories-xs"}) {
    CAPTURE(name);
    const std::string dir = root + "/" + name;
    const Model whole = load_model(dir), streamed = load_model(dir, with_layers(LoadOptions::Layers::streamed));
    require_same_arch(streamed.arch(), whole.arch());
    require_same_embeddings(streamed, whole);
    require_same_passes(whole, streamed, {1, 5, 9, 2, 0, 13});
  }
}

TEST_CASE("every HuggingFace layout streams, bit for bit", "[checkpoint][streamed]") {
  for (const Layout layout : {Layout::bert, Layout::gpt2, Layout::roberta, Layout::distilbert}) {
    CAPTURE(to_string(layout));
    Spec s;
    s.emb = layout;
    s.variant = layout == Layout::gpt2 ? Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal}
                                       : Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
    const std::string dir = fresh("streamed_" + to_string(layout));
    save_hf(make_model(s), dir, layout);
    // ids without 1, RoBERTa's padding token (refused)
    require_same_passes(load_model(dir), load_model(dir, with_layers(LoadOptions::Layers::streamed)), {4, 3, 0, 2});
  }
  const Model llama = sanpath::test::random_llama(3, 4, 2, 16, 4, 24, 21, 50);
  for (const Layout layout : {Layout::llama, Layout::mistral, Layout::qwen2}) {
    CAPTURE(to_string(layout));
    const std::string dir = fresh("streamed_" + to_string(layout));
    save_hf(llama, dir, layout);
    require_same_passes(load_model(dir), load_model(dir, with_layers(LoadOptions::Layers::streamed)), {1, 7, 3, 49});
  }
  // ALBERT's one shared layer is held whole whatever is asked.
  Spec s;
  s.emb = Layout::albert;
  s.shared = true;
  const std::string dir = fresh("streamed_albert");
  save_hf(make_model(s), dir, Layout::albert);
  CHECK(!load_model(dir, with_layers(LoadOptions::Layers::streamed)).streamed());
}

TEST_CASE("a streamed model reads each layer into reused buffers", "[checkpoint][streamed]") {
  Spec s;
  s.emb = Layout::bert;
  const std::string dir = fresh("streamed_buffers");
  const Model whole = make_model(s);
  save_hf(whole, dir, Layout::bert);
  const Model m = load_model(dir, with_layers(LoadOptions::Layers::streamed));
  std::shared_ptr<const LayerWeights> first = m.layer_for_pass(0);
  const LayerWeights* object = first.get();
  const double* storage = first->W_1.data();
  {
    // Two passes at once (the directed passes of the rounding check): two buffers.
    const std::shared_ptr<const LayerWeights> other = m.layer_for_pass(1);
    CHECK(other.get() != object);
    CHECK(other->W_1 == whole.layer(1).W_1);
  }
  first.reset();
  // Had the buffer been freed, these would take its memory (glibc hands a
  // freed chunk to the next request of its size).
  const auto blocker = std::make_unique<LayerWeights>();
  const std::vector<double> block(static_cast<std::size_t>(whole.layer(0).W_1.size()));
  // The next read takes the buffer back from the pool: no fresh storage.
  const std::shared_ptr<const LayerWeights> next = m.layer_for_pass(2);
  CHECK(next.get() == object);
  CHECK(next->W_1.data() == storage);
  CHECK(next->W_1 == whole.layer(2).W_1);
  CHECK(next->heads[1].W_Q == whole.layer(2).heads[1].W_Q);
}

TEST_CASE("a streamed model is refused by analyses that need every layer", "[checkpoint][streamed][errors]") {
  Spec s;
  s.emb = Layout::bert;
  const std::string dir = fresh("streamed_refused");
  save_hf(make_model(s), dir, Layout::bert);
  const Model m = load_model(dir, with_layers(LoadOptions::Layers::streamed));
  const std::string want = dir + ": layers: streamed from the checkpoint one at a time (forward passes only)";
  CHECK(error_of([&] { (void)m.layer(0); }).rfind(want, 0) == 0);
  CHECK(error_of([&] { (void)weight_quantities(m); }).rfind(want, 0) == 0);
  CHECK(m.layers().empty());
}

TEST_CASE("bad layers of a streamed checkpoint are refused as a whole load refuses them",
          "[checkpoint][streamed][errors]") {
  Spec s;
  s.emb = Layout::bert;
  s.layers = 4;
  s.f32 = true;
  const Model m = make_model(s);
  const std::string dir = fresh("streamed_bad"), st = dir + "/model.safetensors";
  SECTION("a missing tensor: at load, naming it") {
    save_hf(m, dir, Layout::bert, "F32");
    edit_tensors(st, [](std::vector<Tensor>& ts) {
      std::vector<Tensor> kept;
      for (Tensor& t : ts)
        if (t.name != "bert.encoder.layer.3.intermediate.dense.weight") kept.push_back(t);
      ts = kept;
    });
    const std::string whole = error_of([&] { load_model(dir); });
    CHECK(whole == st + ": tensors: 1 missing for a bert checkpoint: bert.encoder.layer.3.intermediate.dense.weight");
    CHECK(error_of([&] { load_model(dir, with_layers(LoadOptions::Layers::streamed)); }) == whole);
  }
  SECTION("a wrong shape: at load, naming it") {
    save_hf(m, dir, Layout::bert, "F32");
    edit_tensors(st, [](std::vector<Tensor>& ts) {
      for (Tensor& t : ts)
        if (t.name == "bert.encoder.layer.2.output.dense.bias") {
          t.shape = {7};
          t.values.resize(7);
        }
    });
    const std::string whole = error_of([&] { load_model(dir); });
    CHECK(whole.rfind(st + ": bert.encoder.layer.2.output.dense.bias: shape [7], expected [8]", 0) == 0);
    CHECK(error_of([&] { load_model(dir, with_layers(LoadOptions::Layers::streamed)); }) == whole);
  }
  SECTION("NaN in a late layer: when the pass reads it, with the whole load's message") {
    save_hf(m, dir, Layout::bert, "F32");
    edit_tensors(st, [](std::vector<Tensor>& ts) {
      for (Tensor& t : ts)
        if (t.name == "bert.encoder.layer.3.attention.self.key.weight") t.values[8 + 5] = std::nan("");
    });
    const std::string whole = error_of([&] { load_model(dir); });
    CHECK(whole == st + ": bert.encoder.layer.3.attention.self.key.weight: NaN at [1, 5]");
    const Model streamed = load_model(dir, with_layers(LoadOptions::Layers::streamed));
    const InputSpec in = InputSpec::from_tokens({1, 2, 3});
    CHECK(error_of([&] { forward<double>(streamed, streamed.arch().variant, make_input<double>(streamed, in)); }) ==
          whole);
  }
}

TEST_CASE("automatic streaming: whole when the weights fit the budget, streamed when only a few layers do",
          "[checkpoint][streamed][memory]") {
  Spec s;
  s.emb = Layout::bert;
  s.layers = 6;
  s.d = 32;
  s.heads = 4;
  s.d_ff = 64;
  const std::string dir = fresh("streamed_auto");
  save_hf(make_model(s), dir, Layout::bert);
  // One layer: 4·32² + 2·32·64 weights and 32·7 + 64 biases and gains, as doubles.
  const std::uint64_t layer = (4 * 32 * 32 + 2 * 32 * 64 + 7 * 32 + 64) * 8;
  LoadOptions o = with_layers(LoadOptions::Layers::automatic);
  o.word_rows = std::vector<long>{1, 2, 3};  // three rows of the word table: the layers are what counts
  const Model whole = load_model(dir);
  struct Budget {
    ~Budget() { set_memory_budget(std::nullopt); }
  } restore;
  set_memory_budget(100 * layer);
  CHECK(!load_model(dir, o).streamed());
  set_memory_budget(4 * layer);  // 3 layers at a time fit, 6 do not
  const Model streamed = load_model(dir, o);
  CHECK(streamed.streamed());
  set_memory_budget(std::nullopt);  // the 257-bit pass below needs more than the weights
  require_same_passes(whole, streamed, {1, 2, 3});
  set_memory_budget(2 * layer);
  std::string e;
  try {
    load_model(dir, o);
  } catch (const ResourceError& error) {
    e = error.what();
  }
  CHECK(e.find(dir + "/model.safetensors: layers: needs an estimated") == 0);
  CHECK(e.find("(3 layers at a time, streamed from the file)") != std::string::npos);
}

namespace {

/// A random model of `layout`'s structure (ALBERT aside: its one shared
/// layer is never streamed): 4 heads (the Llama family, Phi and Gemma with
/// 2 key/value heads), MLP and norms.
Model model_in(Layout layout) {
  if (layout == Layout::llama || layout == Layout::mistral || layout == Layout::qwen2)
    return sanpath::test::random_llama(2, 4, 2, 16, 4, 24, 23, 50);
  if (layout == Layout::bert || layout == Layout::gpt2 || layout == Layout::roberta || layout == Layout::distilbert) {
    Spec s;
    s.emb = layout;
    s.layers = 2;
    s.heads = 4;
    s.d = 16;
    s.variant = layout == Layout::gpt2 ? Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal}
                                       : Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
    return make_model(s);
  }
  RandomModelSpec s;
  Architecture& a = s.arch;
  a.layers = 2;
  a.heads = 4;
  a.d_model = 32;
  a.d_qk = a.d_v = 8;  // GPT-NeoX's default rotary fraction 0.25 rotates 2 entries
  a.d_ff = 24;
  const FamilyDefaults def = family_defaults(layout);
  a.activation = def.activation;
  a.ln_eps = def.ln_eps;
  if (layout == Layout::phi || layout == Layout::gemma || layout == Layout::gemma2) a.kv_heads = 2;
  s.std = 0.3;
  s.seed = 29;
  s.vocab = layout == Layout::vit ? 0 : 40;
  s.embeddings = layout;
  FamilyOptions o;
  if (layout == Layout::vit) {
    o.image_size = 8;
    o.patch_size = 4;
    o.channels = 3;
  }
  family_structure(layout, s, o);
  return random_model(s);
}

/// The F32 tensors of the safetensors file at `path` rewritten as `dtype`
/// ("F16" or "BF16"; values truncated toward zero into it): files in the
/// half formats, which save_hf does not write.
void halve_file(const std::string& path, const std::string& dtype) {
  std::ifstream in(path, std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t n = 0;
  std::memcpy(&n, all.data(), 8);  // little-endian hosts only, as the CI
  json h = json::parse(all.substr(8, n));
  const std::string old = all.substr(8 + n);
  std::string data;
  for (auto& [name, t] : h.items()) {
    if (name == "__metadata__") continue;
    const std::uint64_t begin = t["data_offsets"][0], end = t["data_offsets"][1];
    std::string bytes = old.substr(begin, end - begin);
    if (t["dtype"] == "F32") {
      std::string halves;
      for (std::size_t x = 0; x + 4 <= bytes.size(); x += 4) {
        float f;
        std::memcpy(&f, bytes.data() + x, 4);
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        std::uint16_t half = static_cast<std::uint16_t>(u >> 16);  // BF16: the upper half
        if (dtype == "F16") {
          const double a = std::fabs(static_cast<double>(f));
          int e = 0;
          (void)std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1)
          const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
          if (a == 0 || e - 1 < -14)  // zero or subnormal: m·2^−24
            half = static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::ldexp(a, 24)));
          else  // normal, |f| < 65504 for these weights
            half = static_cast<std::uint16_t>(sign | ((e - 1 + 15) << 10) |
                                              (static_cast<std::uint16_t>(std::ldexp(a, 11 - e)) & 0x3ff));
        }
        halves.append(reinterpret_cast<const char*>(&half), 2);
      }
      bytes = halves;
      t["dtype"] = dtype;
    }
    t["data_offsets"] = {data.size(), data.size() + bytes.size()};
    data += bytes;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t len = text.size();
  std::memcpy(out.data(), &len, 8);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out << text << data;
}

/// Every head's matrices side by side (the forward pass's packed form).
MatrixXd side_by_side(const LayerWeights& w, MatrixXd HeadWeights::*m, bool by_rows = false) {
  const MatrixXd& first = w.heads.front().*m;
  const auto H = static_cast<Eigen::Index>(w.heads.size());
  MatrixXd out(by_rows ? first.rows() * H : first.rows(), by_rows ? first.cols() : first.cols() * H);
  for (Eigen::Index h = 0; h < H; ++h) {
    const MatrixXd& x = w.heads[static_cast<std::size_t>(h)].*m;
    if (by_rows) out.middleRows(h * x.rows(), x.rows()) = x;
    else out.middleCols(h * x.cols(), x.cols()) = x;
  }
  return out;
}

void require_view(const MappedMatrix& v, const MatrixXd& want, const std::string& what) {
  CAPTURE(what);
  REQUIRE(v.present());
  REQUIRE(v.rows() == want.rows());
  REQUIRE(v.cols() == want.cols());
  CHECK(v.view().decode() == want);
}

}  // namespace

TEST_CASE("a double pass reads a streamed layer's matrices where they lie, in every layout and stored float",
          "[checkpoint][streamed][mapped]") {
  for (const Layout layout : {Layout::bert, Layout::gpt2, Layout::roberta, Layout::distilbert, Layout::llama,
                              Layout::mistral, Layout::qwen2, Layout::xlnet, Layout::t5, Layout::gpt_neox, Layout::phi,
                              Layout::opt, Layout::gemma, Layout::gemma2, Layout::vit}) {
    const Model m = model_in(layout);
    for (const char* dtype : {"F64", "F32", "F16", "BF16"}) {
      CAPTURE(to_string(layout), dtype);
      const std::string dir = fresh(std::string("mapped_") + to_string(layout) + "_" + dtype);
      const bool half = std::string(dtype) == "F16" || std::string(dtype) == "BF16";
      save_hf(m, dir, layout, half ? "F32" : dtype);
      if (half) halve_file(dir + "/model.safetensors", dtype);
      const Model whole = load_model(dir), streamed = load_model(dir, with_layers(LoadOptions::Layers::streamed));
      REQUIRE(streamed.streamed());
      for (int l = 0; l < whole.arch().layers; ++l) {
        CAPTURE(l);
        const std::shared_ptr<const LayerWeights> w = streamed.layer_for_pass(l, LayerForm::mapped);
        REQUIRE(w->mapped);
        const MappedLayer& v = *w->mapped;
        const LayerWeights& d = whole.layer(l);
        // Every large matrix is a view, none is decoded as well.
        require_view(v.WQ, side_by_side(d, &HeadWeights::W_Q), "W_Q");
        require_view(v.WK, side_by_side(d, &HeadWeights::W_K), "W_K");
        require_view(v.WV, side_by_side(d, &HeadWeights::W_V), "W_V");
        require_view(v.WO, side_by_side(d, &HeadWeights::W_O, true), "W_O");
        for (const HeadWeights& hw : w->heads) CHECK(hw.W_Q.size() + hw.W_K.size() + hw.W_V.size() + hw.W_O.size() == 0);
        if (whole.arch().xlnet_relative) require_view(v.WR, side_by_side(d, &HeadWeights::W_R), "W_R");
        CHECK(w->has_mlp() == d.has_mlp());
        if (d.has_mlp()) {
          require_view(v.W1, d.W_1, "W_1");
          require_view(v.W2, d.W_2, "W_2");
          CHECK(w->W_1.size() + w->W_2.size() == 0);
        }
        CHECK(w->gated() == d.gated());
        if (d.gated()) require_view(v.Wgate, d.W_gate, "W_gate");
        // Asked decoded, the same source decodes.
        const std::shared_ptr<const LayerWeights> decoded = streamed.layer_for_pass(l, LayerForm::decoded);
        CHECK(!decoded->mapped);
        CHECK(decoded->heads[1].W_K == d.heads[1].W_K);
      }
      // The double pass on the views: every layer bit for bit the whole model's.
      std::mt19937_64 g(7);
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      const Matrix<double> X0 = Matrix<double>::NullaryExpr(5, whole.arch().d_model, [&] { return u(g); });
      const ForwardTrace<double> a = forward<double>(whole, whole.arch().variant, X0);
      const ForwardTrace<double> b = forward<double>(streamed, streamed.arch().variant, X0);
      for (std::size_t l = 0; l < a.X.size(); ++l) {
        require_same(b.X[l], a.X[l], "X^" + std::to_string(l));
      }
    }
  }
}

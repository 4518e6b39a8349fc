// Path effectiveness (effectiveness.hpp) and task heads (io/task_head.hpp):
// the truncation at k = L is the forward output to rounding, the curve
// against a brute-force sum over paths, the heads against hand-written
// formulas, KL against a closed form, and the real checkpoints' heads.
#include "support/attention_models.hpp"
#include "support/helpers.hpp"

#include "sanpath/compute/effectiveness.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/paths.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/io/task_head.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/compute/embed.hpp"
#include "sanpath/model/random.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

using namespace sanpath;
using sanpath::test::attention_model;
using sanpath::test::gaussian_input;

namespace {

/// X^L − Σ_{|path| > k} T_path, every term formed from the trace's P and the
/// weights by plain products in long double (no library path code).
MatrixXd brute_truncation(const Model& m, const ForwardTrace<double>& t, int k) {
  using LMat = Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic>;
  const int L = m.arch().layers, H = m.arch().heads;
  const bool skip = t.variant.skip;
  LMat rest = LMat::Zero(t.X[0].rows(), t.X[0].cols());
  std::function<void(int, int, const LMat&)> walk = [&](int l, int len, const LMat& Y) {
    if (l == L) {
      if (len > k) rest += Y;
      return;
    }
    if (skip) walk(l + 1, len, Y);
    for (int h = 0; h < H; ++h) {
      const HeadWeights& hw = m.layer(l).heads[static_cast<std::size_t>(h)];
      const LMat P = t.P[static_cast<std::size_t>(l)][static_cast<std::size_t>(h)].cast<long double>();
      walk(l + 1, len + 1, P * Y * hw.W_V.cast<long double>() * hw.W_O.cast<long double>());
    }
  };
  walk(0, 0, t.X[0].cast<long double>());
  return (t.X.back().cast<long double>() - rest).cast<double>();
}

/// The shared folder (real_models_dir fails under CI when it is missing).
std::string shared_models() { return test::real_models_dir(); }

}  // namespace

TEMPLATE_TEST_CASE("effectiveness at k = L is the forward output to the working precision", "[effectiveness]",
                   double, mpfr_real<38>, mpfr_real<154>) {
  using S = TestType;
  struct Shape {
    int L, H, d, dh, n;
    bool skip;
  };
  for (const Shape sh : {Shape{1, 1, 4, 2, 3, true}, Shape{3, 2, 6, 3, 5, true}, Shape{4, 3, 8, 2, 4, true},
                         Shape{3, 2, 6, 3, 5, false}}) {
    CAPTURE(sh.L, sh.H, sh.d, sh.skip);
    const Model m = attention_model(sh.L, sh.H, sh.d, sh.dh, sh.skip, 0.6, 7 + static_cast<std::uint64_t>(sh.L));
    const ForwardTrace<S> t = forward<S>(m, m.arch().variant, convert<S>(gaussian_input(sh.n, sh.d, 3)));
    const Effectiveness<S> e = exact_effectiveness<S>(m, t, nullptr);
    REQUIRE(e.points.size() == static_cast<std::size_t>(sh.L) + 1);
    // The distance is pure rounding: a sum of (H+1)·L products of matrices
    // of modest norm; 200 epsilons leaves room for their accumulation only.
    const BigReal err = to_big(e.points.back().distance) / test::epsilon_of<S>();
    CAPTURE(to_sci(err));
    CHECK(err <= 200);
    // Shorter truncations miss real terms: far above rounding.
    if (sh.skip) CHECK(to_big(e.points.front().distance) > BigReal(1e-6));
  }
}

TEST_CASE("effectiveness curve equals the brute-force sum over paths and decreases on a contracting model",
          "[effectiveness]") {
  // Small value-output maps (std 0.25, d = 6): every longer length sum is
  // smaller, so dropping fewer of them leaves less out.
  const Model m = attention_model(4, 2, 6, 3, true, 0.25, 11);
  const ForwardTrace<double> t = forward<double>(m, m.arch().variant, gaussian_input(5, 6, 5));
  const Effectiveness<double> e = exact_effectiveness<double>(m, t, nullptr);
  const double norm = t.X.back().norm();
  for (int k = 0; k <= 4; ++k) {
    CAPTURE(k);
    const double expected = (brute_truncation(m, t, k) - t.X.back()).norm() / norm;
    CHECK(std::abs(e.points[static_cast<std::size_t>(k)].distance - expected) <= 1e-12 + 1e-9 * expected);
    if (k > 0) CHECK(e.points[static_cast<std::size_t>(k)].distance < e.points[static_cast<std::size_t>(k) - 1].distance);
  }
}

TEST_CASE("task heads against their formulas", "[effectiveness]") {
  Rng rng(3);
  const auto draw = [&](Eigen::Index r, Eigen::Index c) {
    MatrixXd M(r, c);
    for (Eigen::Index j = 0; j < c; ++j)
      for (Eigen::Index i = 0; i < r; ++i) M(i, j) = rng.gaussian();
    return M;
  };
  const MatrixXd X = draw(4, 5);
  SECTION("classifier: tanh pooler on the first token, then the linear classifier") {
    TaskHead h;
    h.kind = TaskHeadKind::classifier;
    h.pooler_W = draw(5, 5);
    h.pooler_b = draw(5, 1);
    h.output_W = draw(3, 5);
    h.output_b = draw(3, 1);
    const Matrix<double> got = task_logits<double>(h, X);
    const VectorXd z = (h.pooler_W * X.row(0).transpose() + h.pooler_b).array().tanh().matrix();
    const VectorXd want = h.output_W * z + h.output_b;
    REQUIRE(got.rows() == 1);
    REQUIRE(got.cols() == 3);
    for (int c = 0; c < 3; ++c) CHECK(std::abs(got(0, c) - want(c)) <= 1e-13 * (1 + std::abs(want(c))));
  }
  SECTION("language model: LayerNorm of every row, then the embedding") {
    TaskHead h;
    h.kind = TaskHeadKind::language_model;
    h.norm_g = draw(5, 1);
    h.norm_b = draw(5, 1);
    h.norm_eps = 1e-5;
    h.output_W = draw(7, 5);
    const Matrix<double> got = task_logits<double>(h, X);
    REQUIRE(got.rows() == 4);
    REQUIRE(got.cols() == 7);
    for (int i = 0; i < 4; ++i) {
      const double mean = X.row(i).mean();
      const double var = (X.row(i).array() - mean).square().mean();
      const VectorXd y = ((X.row(i).array() - mean) / std::sqrt(var + 1e-5)).matrix().transpose().cwiseProduct(h.norm_g) + h.norm_b;
      const VectorXd want = h.output_W * y;
      for (int v = 0; v < 7; ++v) CHECK(std::abs(got(i, v) - want(v)) <= 1e-12 * (1 + std::abs(want(v))));
    }
  }
}

TEMPLATE_TEST_CASE("every map of a task head against logits worked out by hand", "[effectiveness]", double,
                   mpfr_real<77>) {
  using S = TestType;
  const auto rows = [](std::initializer_list<std::initializer_list<double>> r) {
    MatrixXd M(static_cast<Eigen::Index>(r.size()), 4);
    Eigen::Index i = 0;
    for (const auto& row : r) {
      Eigen::Index j = 0;
      for (double x : row) M(i, j++) = x;
      ++i;
    }
    return M;
  };
  const auto vec = [](std::initializer_list<double> v) {
    VectorXd out(static_cast<Eigen::Index>(v.size()));
    Eigen::Index i = 0;
    for (double x : v) out(i++) = x;
    return out;
  };
  // want(i, j) = num / den, exact rationals written out below.
  const auto exact = [](std::initializer_list<std::initializer_list<std::pair<int, int>>> r) {
    Matrix<S> M(static_cast<Eigen::Index>(r.size()), static_cast<Eigen::Index>(r.begin()->size()));
    Eigen::Index i = 0;
    for (const auto& row : r) {
      Eigen::Index j = 0;
      for (const auto& [num, den] : row) M(i, j++) = S(num) / S(den);
      ++i;
    }
    return M;
  };
  const auto logits = [](const TaskHead& h, const MatrixXd& X) { return task_logits<S>(h, convert<S>(X)); };
  const MatrixXd W = rows({{1, 0, 0, 0}, {0, 1, 0, 0}, {1, 1, 1, 1}});

  SECTION("Llama: RMSNorm with gain g, then the LM head") {
    // x = (3, 4, 0, 0): mean(x²) + eps = 25/4 + 41/64 = 441/64, rms 21/8, x/rms = (8/7, 32/21, 0, 0);
    // x = (1, 3, 1, 3): 5 + 41/64 = 361/64, rms 19/8, x/rms = (8/19, 24/19, 8/19, 24/19); gain (1, 2, 1, 1).
    TaskHead h;
    h.kind = TaskHeadKind::language_model;
    h.norm = NormKind::rms;
    h.norm_g = vec({1, 2, 1, 1});
    h.norm_b = VectorXd::Zero(4);
    h.norm_eps = 0.640625;  // 41/64
    h.output_W = W;
    test::require_matrix_near<S>(logits(h, rows({{3, 4, 0, 0}, {1, 3, 1, 3}})),
                                 exact({{{8, 7}, {64, 21}, {88, 21}}, {{8, 19}, {48, 19}, {88, 19}}}), 8);
    SECTION("Gemma: the gain is 1 + w") {
      h.norm_unit_offset = true;
      h.norm_g = vec({0, 1, -0.5, 0});  // gain (1, 2, 1/2, 1)
      const Matrix<S> want = exact({{{8, 7}, {64, 21}, {88, 21}}, {{8, 19}, {48, 19}, {84, 19}}});
      test::require_matrix_near<S>(logits(h, rows({{3, 4, 0, 0}, {1, 3, 1, 3}})), want, 8);
      SECTION("Gemma 2: then the final soft cap c·tanh(z/c), c = 2") {
        using std::tanh;
        h.softcap = 2.0;
        Matrix<S> capped = want;
        for (Eigen::Index i = 0; i < capped.rows(); ++i)
          for (Eigen::Index j = 0; j < capped.cols(); ++j) capped(i, j) = S(2) * tanh(S(want(i, j) / S(2)));
        test::require_matrix_near<S>(logits(h, rows({{3, 4, 0, 0}, {1, 3, 1, 3}})), capped, 8);
        CHECK(capped(0, 2) < S(2));  // the cap bites: 88/21 > 2
      }
    }
  }
  SECTION("XLNet: no norm, the tied table and lm_loss's bias") {
    TaskHead h;
    h.kind = TaskHeadKind::language_model;
    h.output_W = rows({{1, 2, 0, 0}, {0, 0, 1, -1}});
    h.output_b = vec({0.5, -0.25});
    // (3 + 8 + 1/2, −1/4) and (1 + 6 + 1/2, 1 − 3 − 1/4)
    test::require_matrix_near<S>(logits(h, rows({{3, 4, 0, 0}, {1, 3, 1, 3}})),
                                 exact({{{23, 2}, {-1, 4}}, {{15, 2}, {-9, 4}}}), 8);
  }
  SECTION("ViT: LayerNorm and the classifier on the CLS row only") {
    // CLS (1, 3, 1, 3): mean 2, var 1, eps 3: (−1, 1, −1, 1)/2; gain (2, 1, 1, 1), bias (0, 0, 1, 0):
    // (−1, 1/2, 1/2, 1/2); W = [[1, 1, 1, 1], [1, 0, 0, −1]], c = (1/4, 0): (3/4, −3/2). Row 1 is not read.
    TaskHead h;
    h.kind = TaskHeadKind::classifier;
    h.norm_g = vec({2, 1, 1, 1});
    h.norm_b = vec({0, 0, 1, 0});
    h.norm_eps = 3;
    h.output_W = rows({{1, 1, 1, 1}, {1, 0, 0, -1}});
    h.output_b = vec({0.25, 0});
    test::require_matrix_near<S>(logits(h, rows({{1, 3, 1, 3}, {100, -7, 0.5, 2}})), exact({{{3, 4}, {-3, 2}}}),
                                 8);
  }
  SECTION("DistilBERT: pre_classifier and ReLU on the first row, then the classifier") {
    // W_p (1, 3, 1, 3) = (1, −3, 0, 3), + b_p (1/2, 1, 1/4, −4) = (3/2, −2, 1/4, −1), ReLU (3/2, 0, 1/4, 0);
    // W = [[1, 1, 1, 1], [2, 0, −4, 0]], c = (0, 1/2): (7/4, 3 − 1 + 1/2 = 5/2). Row 1 is not read.
    TaskHead h;
    h.kind = TaskHeadKind::classifier;
    h.pooler_W = rows({{1, 0, 0, 0}, {0, -1, 0, 0}, {1, 1, -1, -1}, {0, 0, 0, 1}});
    h.pooler_b = vec({0.5, 1, 0.25, -4});
    h.pooler_activation = PoolerActivation::relu;
    h.output_W = rows({{1, 1, 1, 1}, {2, 0, -4, 0}});
    h.output_b = vec({0, 0.5});
    test::require_matrix_near<S>(logits(h, rows({{1, 3, 1, 3}, {100, -7, 0.5, 2}})), exact({{{7, 4}, {5, 2}}}),
                                 8);
    SECTION("RoBERTa and ALBERT: the same maps with tanh") {
      using std::tanh;
      h.pooler_activation = PoolerActivation::tanh;
      const S t0 = tanh(S(3) / S(2)), t1 = tanh(S(-2)), t2 = tanh(S(1) / S(4)), t3 = tanh(S(-1));
      Matrix<S> want(1, 2);
      want << t0 + t1 + t2 + t3, S(2) * t0 - S(4) * t2 + S(1) / S(2);
      test::require_matrix_near<S>(logits(h, rows({{1, 3, 1, 3}, {100, -7, 0.5, 2}})), want, 8);
    }
  }
  SECTION("OPT: LN_f, project_out (e = 2), then the token table") {
    // (1, 3, 1, 3) → (−1, 1, −1, 1)/2 → P: (−1/2, 1/2) → E: (−1/2, 1/2, 1/2);
    // (3, 1, 3, 1) → (1, −1, 1, −1)/2 → P: (1/2, −1/2) → E: (1/2, −1/2, −1/2).
    TaskHead h;
    h.kind = TaskHeadKind::language_model;
    h.norm_g = VectorXd::Ones(4);
    h.norm_b = VectorXd::Zero(4);
    h.norm_eps = 3;
    h.project_out = rows({{1, 0, 0, 0}, {0, 1, 1, 1}});
    MatrixXd E(3, 2);
    E << 1, 0, 0, 1, 2, 3;
    h.output_W = E;
    test::require_matrix_near<S>(logits(h, rows({{1, 3, 1, 3}, {3, 1, 3, 1}})),
                                 exact({{{-1, 2}, {1, 2}, {1, 2}}, {{1, 2}, {-1, 2}, {-1, 2}}}), 8);
  }
  SECTION("Phi: LN_f, then lm_head with its bias") {
    TaskHead h;
    h.kind = TaskHeadKind::language_model;
    h.norm_g = vec({1, 1, 1, 2});
    h.norm_b = vec({0, 0, 0, 0.25});
    h.norm_eps = 3;
    h.output_W = rows({{1, 1, 0, 1}});
    h.output_b = vec({0.125});
    // (−1, 1, −1, 1)/2 → (−1/2, 1/2, −1/2, 5/4): −1/2 + 1/2 + 5/4 + 1/8 = 11/8; (1, −1, 1, −1)/2 → (1/2, −1/2,
    // 1/2, −3/4): 1/2 − 1/2 − 3/4 + 1/8 = −5/8
    test::require_matrix_near<S>(logits(h, rows({{1, 3, 1, 3}, {3, 1, 3, 1}})), exact({{{11, 8}}, {{-5, 8}}}), 8);
  }
  SECTION("a head whose maps do not chain is refused, naming the map") {
    TaskHead h;
    h.kind = TaskHeadKind::language_model;
    h.project_out = MatrixXd::Ones(2, 4);
    h.output_W = W;  // reads 4 entries, project_out gives 2
    CHECK_THROWS_WITH(logits(h, rows({{1, 3, 1, 3}})), Catch::Contains("output_W"));
    h.output_W = MatrixXd::Ones(3, 2);
    h.softcap = 0.0;
    CHECK_THROWS_WITH(logits(h, rows({{1, 3, 1, 3}})), Catch::Contains("softcap"));
  }
}

TEMPLATE_TEST_CASE("compare_logits: agreement and KL in closed form", "[effectiveness]", double, mpfr_real<77>) {
  using S = TestType;
  // Row 1: p = (1/2, 1/2), q = (3/4, 1/4): KL = ½ln(2/3) + ½ln 2 = ½ln(4/3); argmax 0 and 0 (tie: first).
  // Row 2: p = q (shifted logits): KL = 0; argmax 1 and 1.
  // Row 3: p = (1/3, 2/3) (logits 0, ln 2), q = (2/3, 1/3): KL = ⅓ln(1/2) + ⅔ln 2 = ⅓ln 2; argmax 1 vs 0.
  using std::log;
  Matrix<S> ref(3, 2), got(3, 2);
  ref << S(0), S(0), S(1), S(2), S(0), log(S(2));
  got << log(S(3)), S(0), S(5), S(6), log(S(2)), S(0);
  const HeadAgreement<S> a = compare_logits<S>(ref, got);
  CHECK(a.predictions == 3);
  CHECK(a.agree == 2);
  const S want = (log(S(4) / S(3)) / S(2) + log(S(2)) / S(3)) / S(3);
  CHECK(test::error_in_eps<S>(a.mean_kl, want) <= 64);
  CHECK_THROWS_AS(compare_logits<S>(ref, Matrix<S>(2, 2)), std::invalid_argument);
}

TEST_CASE("read_task_head: no head in a native file, shape errors name the tensor", "[effectiveness]") {
  const Model m = attention_model(1, 1, 4, 2, true, 0.5, 1);
  const std::string native = test::tmp_path("effectiveness_native.safetensors");
  save_native(m, native);
  CHECK_FALSE(read_task_head(native, m).has_value());
  const std::string bad = test::tmp_path("effectiveness_bad_head.safetensors");
  Tensor w{"classifier.weight", "F64", {2, 3}, std::vector<double>(6, 0.5)};
  Tensor b{"classifier.bias", "F64", {2}, {0.0, 1.0}};
  Tensor pw{"bert.pooler.dense.weight", "F64", {4, 4}, std::vector<double>(16, 0.1)};
  Tensor pb{"bert.pooler.dense.bias", "F64", {4}, std::vector<double>(4, 0.0)};
  write_safetensors(bad, {w, b, pw, pb});
  try {
    read_task_head(bad, m);
    FAIL("a classifier of width 3 for d = 4 was accepted");
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    CHECK(msg.find(bad) != std::string::npos);
    CHECK(msg.find("classifier.weight") != std::string::npos);
  }
  const std::string partial = test::tmp_path("effectiveness_partial_head.safetensors");
  write_safetensors(partial, {Tensor{"classifier.weight", "F64", {2, 4}, std::vector<double>(8, 0.5)}, b});
  CHECK_THROWS_WITH(read_task_head(partial, m), Catch::Contains("bert.pooler.dense.weight"));
}

TEST_CASE("read_task_head: the BERT family's sequence classifiers under HF's names", "[effectiveness]") {
  const Model m = attention_model(1, 1, 4, 2, true, 0.5, 1);
  const auto numbered = [](std::int64_t n, double from) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = from + 0.125 * static_cast<double>(i);
    return v;
  };
  // A folder: config.json's model_type and the head's tensors (the pooler map d × d, then C = 3 classes).
  const auto folder = [&](const std::string& name, const std::string& type, const std::vector<Tensor>& ts) {
    const std::string dir = test::tmp_path("effectiveness_" + name);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << "{\"model_type\": \"" << type << "\"}";
    write_safetensors(dir + "/model.safetensors", ts);
    return dir;
  };
  const auto linear = [&](const std::string& name, std::int64_t out, double from) {
    return std::vector<Tensor>{Tensor{name + ".weight", "F64", {out, 4}, numbered(out * 4, from)},
                               Tensor{name + ".bias", "F64", {out}, numbered(out, -from)}};
  };
  const auto join = [](std::vector<Tensor> a, const std::vector<Tensor>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  struct Case {
    const char* type;
    const char* pooler;
    const char* output;
    PoolerActivation activation;
  };
  for (const Case c : {Case{"bert", "bert.pooler.dense", "classifier", PoolerActivation::tanh},
                       Case{"roberta", "classifier.dense", "classifier.out_proj", PoolerActivation::tanh},
                       Case{"distilbert", "pre_classifier", "classifier", PoolerActivation::relu},
                       Case{"albert", "albert.pooler", "classifier", PoolerActivation::tanh}}) {
    CAPTURE(c.type);
    const std::string dir = folder(c.type, c.type, join(linear(c.pooler, 4, 0.25), linear(c.output, 3, -1)));
    const std::optional<TaskHead> h = read_task_head(dir, m);
    REQUIRE(h.has_value());
    CHECK(h->kind == TaskHeadKind::classifier);
    CHECK(h->pooler_activation == c.activation);
    CHECK(h->norm_g.size() == 0);
    REQUIRE(h->pooler_W.rows() == 4);
    CHECK(h->pooler_W(1, 2) == 0.25 + 0.125 * 6);  // row-major [out, in]: entry 1·4 + 2
    CHECK(h->pooler_b(3) == -0.25 + 0.125 * 3);
    REQUIRE(h->outputs() == 3);
    CHECK(h->output_W(2, 0) == -1 + 0.125 * 8);
    CHECK(h->output_b(2) == 1 + 0.125 * 2);
    // Without its pooler map: the file's family (config.json) names the tensor that is missing.
    const std::string partial = folder(std::string(c.type) + "_partial", c.type, linear(c.output, 3, -1));
    CHECK_THROWS_WITH(read_task_head(partial, m), Catch::Contains(partial) && Catch::Contains(std::string(c.pooler) +
                                                                                               ".weight: missing"));
  }
}

TEST_CASE("real checkpoints: the task heads agree fully at k = L", "[effectiveness][real]") {
  const std::string dir = shared_models();
  if (dir.empty()) return;
  struct Case {
    const char* name;
    TaskHeadKind kind;
    long outputs;
  };
  for (const Case c : {Case{"bert-ticket-classifier", TaskHeadKind::classifier, 6},
                       Case{"gpt2-capp", TaskHeadKind::language_model, 53}}) {
    CAPTURE(c.name);
    const Model m = load_model(dir + "/" + c.name);
    const std::optional<TaskHead> head = read_task_head(dir + "/" + c.name, m);
    REQUIRE(head.has_value());
    CHECK(head->kind == c.kind);
    CHECK(head->outputs() == c.outputs);
    Variant v = m.arch().variant;
    v.skip = true;
    v.mlp = MlpKind::none;
    v.layernorm = LayerNormKind::none;
    const InputSpec in = InputSpec::from_tokens({2, 15, 27, 3, 40, 8});
    const ForwardTrace<mpfr_real<38>> t = forward<mpfr_real<38>>(m, v, make_input<mpfr_real<38>>(m, in));
    const Effectiveness<mpfr_real<38>> e = exact_effectiveness<mpfr_real<38>>(m, t, &*head);
    const auto& last = *e.points.back().head;
    CHECK(last.predictions == (c.kind == TaskHeadKind::classifier ? 1 : 6));
    CHECK(last.agree == last.predictions);
    CHECK(to_big(last.mean_kl) / test::epsilon_of<mpfr_real<38>>() <= 1000);
  }
}

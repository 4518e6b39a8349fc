#pragma once
// Width-8 random models and inputs shared by the centred-pass and enclosure
// tests (tests/compute/test_forward_centred.cpp, test_enclosure.cpp), and the
// mpmath reference's residual norms of such a model (sanpath_ref.py).
#include "support/helpers.hpp"

#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/model/random.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace sanpath::test {

/// A random model of architecture `a` (drawn with `std`, biases ~ ±0.1),
/// its norm gains ~ 1 ± 0.3 (0 ± 0.3 for a gain 1 + w) and biases ~ ±0.1.
inline Model width8_model_of(const Architecture& a, std::uint64_t seed, double std) {
  RandomModelSpec s;
  s.arch = a;
  s.std = std;
  s.bias_std = 0.1;
  s.seed = seed;
  const Model m = random_model(s);
  std::vector<LayerWeights> layers = m.layers();
  Rng rng(seed + 1000);
  const double base = a.norm_unit_offset ? 0.0 : 1.0;
  for (LayerWeights& lw : layers) {
    for (Eigen::Index j = 0; j < lw.ln1_g.size(); ++j) {
      lw.ln1_g(j) = base + 0.3 * rng.gaussian();
      lw.ln2_g(j) = base + 0.3 * rng.gaussian();
      lw.ln1_b(j) = 0.1 * rng.gaussian();
      lw.ln2_b(j) = 0.1 * rng.gaussian();
    }
    for (VectorXd* g : {&lw.ln3_g, &lw.ln4_g})  // sandwich norms, where the model has them
      for (Eigen::Index j = 0; j < g->size(); ++j) (*g)(j) = base + 0.3 * rng.gaussian();
  }
  return Model(m.arch(), layers, std::nullopt, "test-model");
}

/// A random model of every part (d = 8, d_qk = d_v = 4, d_ff = 16), with
/// LayerNorm gains ~ 1 ± 0.3 and biases ~ ±0.1.
inline Model width8_model(int L, Activation act, std::uint64_t seed, double std, int H = 2, bool shared = false) {
  return width8_model_of({L, H, 8, 4, 4, 16, Variant{}, act, 1e-5, shared}, seed, std);
}

/// X = 1cᵀ + R, n × 8: c ~ N(0, 1) per column, R spread 0.5.
inline MatrixXd width8_input(std::uint64_t seed, int n = 6) {
  RandomInputSpec in;
  in.n = n;
  in.d = 8;
  in.seed = seed;
  in.offset = 1.0;
  in.spread = 0.5;
  return random_input(in);
}

/// `sanpath_ref.py residual-norms --model M --input X0 <args>` of model m on
/// X0 (both written to the test tmp folder under `tag`), as parsed JSON.
/// With `layout`, the model goes to the reference as a HuggingFace folder of that layout.
inline nlohmann::json reference_residual_norms(const Model& m, const MatrixXd& X0, const std::string& tag,
                                               const std::string& args,
                                               std::optional<Layout> layout = std::nullopt) {
  const std::string model_path = layout ? tmp_path(tag + "_hf") : tmp_path(tag + ".safetensors");
  const std::string input_path = tmp_path(tag + "_x.safetensors");
  const std::string out_path = tmp_path(tag + "_ref.json");
  if (layout)
    save_hf(m, model_path, *layout);
  else
    save_native(m, model_path);
  Tensor x{"X", "F64", {X0.rows(), X0.cols()}, {}};
  for (Eigen::Index i = 0; i < X0.rows(); ++i)
    for (Eigen::Index j = 0; j < X0.cols(); ++j) x.values.push_back(X0(i, j));
  write_safetensors(input_path, {x});
  const std::string script =
      (std::filesystem::path(SANPATH_SOURCE_DIR) / "tests" / "reference" / "sanpath_ref.py").string();
  const std::string cmd = "/usr/bin/python3 '" + script + "' residual-norms --model '" + model_path + "' --input '" +
                          input_path + "' " + args + " > '" + out_path + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(out_path);
  return nlohmann::json::parse(in);
}

}  // namespace sanpath::test

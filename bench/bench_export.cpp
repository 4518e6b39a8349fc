// Writes the models of the peer comparisons (bench/peers/*.py) as one
// safetensors file each: the weights per layer and head, the input X0 and
// sanpath's own output, so that a peer can check it computed the same thing.
//   bench_export bert <file>        BERT-base full transformer, double; output tensor "out"
//   bench_export san-small <file>   the small SAN of the mpmath comparison at 513 bits;
//                                   output checks as 150-digit strings in the metadata
#include "common.hpp"

#include "sanpath/io/safetensors.hpp"

#include <iostream>

using namespace sanpath;

namespace {

Tensor tensor(const std::string& name, const MatrixXd& m) {
  Tensor t;
  t.name = name;
  t.dtype = "F64";
  t.shape = {m.rows(), m.cols()};
  t.values.reserve(static_cast<std::size_t>(m.size()));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) t.values.push_back(m(i, j));
  return t;
}
Tensor tensor(const std::string& name, const VectorXd& v) {
  Tensor t;
  t.name = name;
  t.dtype = "F64";
  t.shape = {v.size()};
  t.values.assign(v.data(), v.data() + v.size());
  return t;
}

std::vector<Tensor> weights(const Model& model, const MatrixXd& X0) {
  std::vector<Tensor> ts;
  ts.push_back(tensor("X0", X0));
  const Architecture& a = model.arch();
  for (int l = 0; l < a.layers; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = "l" + std::to_string(l) + ".";
    for (int h = 0; h < a.heads; ++h) {
      const HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      const std::string q = p + "h" + std::to_string(h) + ".";
      ts.push_back(tensor(q + "W_Q", hw.W_Q));
      ts.push_back(tensor(q + "W_K", hw.W_K));
      ts.push_back(tensor(q + "W_V", hw.W_V));
      ts.push_back(tensor(q + "W_O", hw.W_O));
      ts.push_back(tensor(q + "b_Q", hw.b_Q));
      ts.push_back(tensor(q + "b_K", hw.b_K));
      ts.push_back(tensor(q + "b_V", hw.b_V));
    }
    ts.push_back(tensor(p + "b_O", w.b_O));
    if (w.has_mlp()) {
      ts.push_back(tensor(p + "W_1", w.W_1));
      ts.push_back(tensor(p + "b_1", w.b_1));
      ts.push_back(tensor(p + "W_2", w.W_2));
      ts.push_back(tensor(p + "b_2", w.b_2));
    }
    if (w.has_layernorm()) {
      ts.push_back(tensor(p + "ln1_g", w.ln1_g));
      ts.push_back(tensor(p + "ln1_b", w.ln1_b));
      ts.push_back(tensor(p + "ln2_g", w.ln2_g));
      ts.push_back(tensor(p + "ln2_b", w.ln2_b));
    }
  }
  return ts;
}

std::map<std::string, std::string> arch_metadata(const Architecture& a, int n, const Variant& v) {
  return {{"layers", std::to_string(a.layers)},   {"heads", std::to_string(a.heads)},
          {"d_model", std::to_string(a.d_model)}, {"d_qk", std::to_string(a.d_qk)},
          {"d_ff", std::to_string(a.d_ff)},       {"n", std::to_string(n)},
          {"skip", v.skip ? "1" : "0"},           {"mlp", v.mlp == MlpKind::none ? "none" : "residual"},
          {"layernorm", v.layernorm == LayerNormKind::none ? "none" : "post"},
          {"ln_eps", "1e-12"}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: bench_export bert|san-small <file>\n";
    return 2;
  }
  const std::string kind = argv[1], path = argv[2];
  try {
    if (kind == "bert") {
      const Architecture a = bench::bert_base();
      const Model model = bench::make_model(a);
      const MatrixXd X0 = bench::make_input(128, a.d_model);
      const ForwardTrace<double> t = forward<double>(model, a.variant, X0);
      std::vector<Tensor> ts = weights(model, X0);
      ts.push_back(tensor("out", t.X.back()));
      write_safetensors(path, ts, arch_metadata(a, 128, a.variant));
    } else if (kind == "san-small") {
      using S = mpfr_real<154>;  // 513 bits
      const Variant v = Variant::san();
      const Architecture a = bench::arch(4, 8, 256, 32, false, v);
      const int n = 64;
      const Model model = bench::make_model(a);
      const MatrixXd X0 = bench::make_input(n, a.d_model);
      const ForwardTrace<S> t = forward<S>(model, v, convert<S>(X0));
      const Matrix<S>& Y = t.X.back();
      S sum(0);
      for (Eigen::Index j = 0; j < Y.cols(); ++j)
        for (Eigen::Index i = 0; i < Y.rows(); ++i) sum += Y(i, j);
      auto meta = arch_metadata(a, n, v);
      meta["prec"] = std::to_string(precision_bits_v<S>);
      meta["out_0_0"] = to_sci(to_big(Y(0, 0)), 150);
      meta["out_last"] = to_sci(to_big(Y(Y.rows() - 1, Y.cols() - 1)), 150);
      meta["out_sum"] = to_sci(to_big(sum), 150);
      write_safetensors(path, weights(model, X0), meta);
    } else {
      std::cerr << "bench_export: unknown model '" << kind << "'\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_export: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

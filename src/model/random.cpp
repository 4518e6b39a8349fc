#include "sanpath/model/random.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace sanpath {

namespace {
std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(std::uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

std::uint64_t Rng::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::uint64_t Rng::below(std::uint64_t n) {
  if (n == 0) throw std::invalid_argument("Rng::below: n must be at least 1");
  const std::uint64_t limit = ~std::uint64_t(0) - (~std::uint64_t(0) % n);
  std::uint64_t x;
  do x = next();
  while (x >= limit);
  return x % n;
}

double Rng::gaussian() {
  if (spare_) {
    const double v = *spare_;
    spare_.reset();
    return v;
  }
  double u1;
  do u1 = uniform();
  while (u1 <= 0.0);
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * M_PI * u2;
  spare_ = r * std::sin(theta);
  return r * std::cos(theta);
}

namespace {

void check_size(long v, long lo, long hi, const std::string& field) {
  if (v < lo || v > hi)
    throw std::invalid_argument("random model: " + field + ": " + std::to_string(v) + " is outside [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

MatrixXd draw(Rng& rng, Eigen::Index rows, Eigen::Index cols, double std) {
  MatrixXd m(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) m(i, j) = std * rng.gaussian();
  return m;
}

VectorXd draw_vec(Rng& rng, Eigen::Index n, double std) {
  if (std == 0.0) return VectorXd::Zero(n);
  return draw(rng, n, 1, std);
}

}  // namespace

Model random_model(const RandomModelSpec& spec) {
  Architecture a = spec.arch;
  check_size(a.layers, 1, 100000, "layers");
  check_size(a.heads, 1, 4096, "heads");
  check_size(a.d_model, 1, 65536, "d_model");
  check_size(a.d_qk, 1, 65536, "d_qk");
  check_size(a.d_v, 1, 65536, "d_v");
  check_size(a.d_ff, 0, 262144, "d_ff");
  const double params = (4.0 * a.d_model * a.d_qk + 0.0) * a.heads + 2.0 * a.d_model * a.d_ff;
  if (params * (a.shared_layers ? 1 : a.layers) > 4e9)
    throw std::invalid_argument("random model: size: more than 4e9 weights requested");
  if (!(spec.std >= 0) || !std::isfinite(spec.std)) throw std::invalid_argument("random model: std: must be finite and >= 0");
  if (!(spec.bias_std >= 0) || !std::isfinite(spec.bias_std))
    throw std::invalid_argument("random model: bias_std: must be finite and >= 0");
  Rng rng(spec.seed);
  const auto sd = [&](Eigen::Index fan_in, Eigen::Index fan_out) {
    return spec.init == InitKind::xavier ? std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)) : spec.std;
  };
  const Eigen::Index d = a.d_model;
  const auto make_layer = [&]() {
    LayerWeights w;
    for (int h = 0; h < a.heads; ++h) {
      HeadWeights hw;
      hw.W_Q = draw(rng, d, a.d_qk, sd(d, a.d_qk * a.heads));
      hw.W_K = draw(rng, d, a.d_qk, sd(d, a.d_qk * a.heads));
      hw.W_V = draw(rng, d, a.d_v, sd(d, a.d_v * a.heads));
      hw.W_O = draw(rng, a.d_v, d, sd(a.d_v * a.heads, d));
      hw.b_Q = draw_vec(rng, a.d_qk, spec.bias_std);
      hw.b_K = draw_vec(rng, a.d_qk, spec.bias_std);
      hw.b_V = draw_vec(rng, a.d_v, spec.bias_std);
      w.heads.push_back(std::move(hw));
    }
    for (int h = 0; h < a.heads; ++h) {  // grouped-query attention: a group shares its first head's K, V
      const int first = static_cast<int>(static_cast<long long>(a.kv_head_of(h)) * a.heads / a.key_value_heads());
      if (first == h) continue;
      HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      const HeadWeights& g = w.heads[static_cast<std::size_t>(first)];
      hw.W_K = g.W_K;
      hw.b_K = g.b_K;
      hw.W_V = g.W_V;
      hw.b_V = g.b_V;
    }
    const double other_bias_std = a.gated_mlp ? 0.0 : spec.bias_std;
    w.b_O = draw_vec(rng, d, other_bias_std);
    if (a.d_ff > 0) {
      w.W_1 = draw(rng, d, a.d_ff, sd(d, a.d_ff));
      w.b_1 = draw_vec(rng, a.d_ff, other_bias_std);
      w.W_2 = draw(rng, a.d_ff, d, sd(a.d_ff, d));
      w.b_2 = draw_vec(rng, d, other_bias_std);
      if (a.gated_mlp) w.W_gate = draw(rng, d, a.d_ff, sd(d, a.d_ff));
    }
    // Unit gains: Gemma stores the gain as its offset from 1.
    const VectorXd unit = a.norm_unit_offset ? VectorXd::Zero(d) : VectorXd::Ones(d);
    w.ln1_g = unit;
    w.ln1_b = VectorXd::Zero(d);
    w.ln2_g = unit;
    w.ln2_b = VectorXd::Zero(d);
    if (a.sandwich_norms) w.ln3_g = w.ln4_g = unit;
    // Families' extra weights, drawn after the rest (seeded models of the
    // other families keep their weights).
    if (a.xlnet_relative)
      for (HeadWeights& hw : w.heads) {
        hw.W_R = draw(rng, d, a.d_qk, sd(d, a.d_qk * a.heads));
        hw.r_w = draw_vec(rng, a.d_qk, spec.std);
        hw.r_r = draw_vec(rng, a.d_qk, spec.std);
      }
    // Query/key norm gains: the unit gain (w = 1, or w = 0 for gains 1 + w)
    // plus N(0, std²), so that the two differ and differ from the unit.
    if (a.query_key_norm) {
      const VectorXd unit_qk = a.query_key_norm->unit_offset ? VectorXd::Zero(a.d_qk) : VectorXd::Ones(a.d_qk);
      w.q_norm = unit_qk + draw_vec(rng, a.d_qk, spec.std);
      w.k_norm = unit_qk + draw_vec(rng, a.d_qk, spec.std);
    }
    return w;
  };
  std::vector<LayerWeights> layers;
  layers.reserve(static_cast<std::size_t>(a.layers));
  if (a.shared_layers) {
    const LayerWeights w = make_layer();
    layers.assign(static_cast<std::size_t>(a.layers), w);
  } else {
    for (int l = 0; l < a.layers; ++l) layers.push_back(make_layer());
  }
  if (a.rel_buckets > 0) {  // T5: one bucket table, used by every layer
    check_size(a.rel_buckets, 1, 1 << 16, "rel_buckets");
    const MatrixXd table = draw(rng, a.rel_buckets, a.heads, spec.std);
    for (LayerWeights& w : layers) w.pos_bias = table;
  }
  std::optional<Embeddings> emb;
  if (spec.embeddings == Layout::vit) {
    check_size(spec.image_size, 1, 1 << 14, "image_size");
    check_size(spec.patch_size, 1, spec.image_size, "patch_size");
    check_size(spec.channels, 1, 64, "channels");
    Embeddings e;
    e.kind = Layout::vit;
    e.image_size = spec.image_size;
    e.patch_size = spec.patch_size;
    e.channels = spec.channels;
    const Eigen::Index g = e.patch_grid(), k = Eigen::Index(spec.channels) * spec.patch_size * spec.patch_size;
    const double std = spec.std > 0 ? spec.std : 0.02;
    e.patch = draw(rng, d, k, sd(k, d));
    e.patch_b = draw_vec(rng, d, spec.bias_std);
    e.cls = draw(rng, d, 1, std);
    e.position = draw(rng, g * g + 1, d, std);
    emb = std::move(e);
  } else if (spec.vocab > 0) {
    check_size(spec.max_positions, 1, 1 << 20, "max_positions");
    if (spec.embeddings == Layout::albert)
      throw std::invalid_argument("random model: embeddings: albert embeddings (width e, mapping) are not drawn");
    Embeddings e;
    // Llama family: token rows only (rotary positions).
    e.kind = a.rotary() && !token_rows_only(spec.embeddings) ? Layout::llama : spec.embeddings;
    const EmbeddingRecipe& r = e.recipe.emplace(embedding_recipe(e.kind));
    const bool opt_projected = r.project_in && spec.embed_dim > 0 && spec.embed_dim != d;
    if (opt_projected) check_size(spec.embed_dim, 1, 65536, "embed_dim");
    e.word = draw(rng, spec.vocab, opt_projected ? spec.embed_dim : d, spec.std > 0 ? spec.std : 0.02);
    if (r.positions) e.position = draw(rng, spec.max_positions, d, spec.std > 0 ? spec.std : 0.02);
    if (opt_projected) e.mapping = draw(rng, spec.embed_dim, d, sd(spec.embed_dim, d));
    if (r.token_type) e.token_type = draw(rng, 1, d, spec.std > 0 ? spec.std : 0.02);
    if (r.layer_norm) {
      e.ln_g = VectorXd::Ones(d);
      e.ln_b = VectorXd::Zero(d);
    }
    e.ln_eps = a.ln_eps;
    emb = std::move(e);
  }
  if (a.d_ff == 0 && a.variant.mlp != MlpKind::none) a.variant.mlp = MlpKind::none;
  return Model(a, std::move(layers), std::move(emb), "random model (seed " + std::to_string(spec.seed) + ")");
}

MatrixXd random_input(const RandomInputSpec& spec) {
  check_size(spec.n, 1, 1 << 20, "input tokens n");
  check_size(spec.d, 1, 1 << 20, "input width d");
  if (static_cast<double>(spec.n) * spec.d > 1e9) throw std::invalid_argument("random input: size: n·d exceeds 1e9");
  if (!std::isfinite(spec.offset) || !std::isfinite(spec.spread) || spec.spread < 0)
    throw std::invalid_argument("random input: spread/offset: must be finite, spread >= 0");
  Rng rng(spec.seed);
  MatrixXd R(spec.n, spec.d);
  for (Eigen::Index j = 0; j < R.cols(); ++j)
    for (Eigen::Index i = 0; i < R.rows(); ++i) R(i, j) = rng.gaussian();
  R.rowwise() -= R.colwise().mean();
  if (spec.residual) {
    if (!(*spec.residual >= 0) || !std::isfinite(*spec.residual))
      throw std::invalid_argument("random input: residual: must be finite and >= 0");
    const double n1 = R.cwiseAbs().colwise().sum().maxCoeff();
    const double ninf = R.cwiseAbs().rowwise().sum().maxCoeff();
    const double comp = std::sqrt(n1 * ninf);
    R *= comp > 0 ? *spec.residual / comp : 0.0;
  } else {
    R *= spec.spread;
  }
  MatrixXd X(spec.n, spec.d);
  for (Eigen::Index j = 0; j < X.cols(); ++j) {
    const double c = spec.offset * rng.gaussian();
    X.col(j) = R.col(j).array() + c;
  }
  return X;
}

}  // namespace sanpath

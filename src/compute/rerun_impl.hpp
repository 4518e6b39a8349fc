#pragma once
#include "sanpath/compute/rerun.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/core/resources.hpp"
#include "compute/forward_impl.hpp"  // detail::attention, detail::mlp, detail::norm, detail::PackedLayer
#include "compute/paths_impl.hpp"    // detail::layer_maps, detail::BiasAccumulator

#include <optional>
#include <stdexcept>
#include <string>

namespace sanpath {

namespace detail {

/// The packed weights every sub-network reads: per layer the MLP half and
/// one single-head attention per head (β as in rerun.hpp).
template <class S> class SubNetworks {
 public:
  SubNetworks(const Model& model, const Variant& variant, Eigen::Index n)
      : model_(model), variant_(variant), one_(model.arch()) {
    const Architecture& a = model.arch();
    model.check_supports(variant);
    if (a.parallel_residual && variant.mlp != MlpKind::none)
      throw std::invalid_argument(model.source() + ": mlp: the sub-network of a path is not defined for a parallel "
                                  "block with its MLP (the MLP reads the layer input, not a head's output); use "
                                  "--mlp none");
    one_.heads = 1;
    one_.kv_heads = 0;
    const bool beta = !is_attention_only(variant);
    const bool with_mlp = variant.mlp != MlpKind::none;
    for (int l = 0; l < a.layers; ++l) {
      const LayerWeights& lw = model.layer(l);
      Layer layer;
      if (with_mlp) layer.mlp = pack<S>(a, lw, true);
      for (int h = 0; h < a.heads; ++h) {
        PackedLayer<S> p = pack_head<S>(a, lw, h);
        if (!beta) {
          p.bV.setConstant(S(0));
          p.bO.setConstant(S(0));
        }
        layer.heads.push_back(std::move(p));
      }
      layers_.push_back(std::move(layer));
    }
    pos_ = PositionTables<S>::make(a, n);
  }

  /// Layer l's single-head attention of head h, and its MLP half (with mlp).
  const PackedLayer<S>& head(int l, int h) const {
    return layers_[static_cast<std::size_t>(l)].heads[static_cast<std::size_t>(h)];
  }
  const PackedLayer<S>& mlp_half(int l) const { return layers_[static_cast<std::size_t>(l)].mlp; }
  /// The model's architecture with one head (what each sub-network layer runs).
  const Architecture& one_head() const { return one_; }

  static bool is_attention_only(const Variant& v) {
    return v.mlp == MlpKind::none && v.layernorm == LayerNormKind::none;
  }

  void check_path(const std::vector<int>& heads) const {
    const Architecture& a = model_.arch();
    if (static_cast<int>(heads.size()) != a.layers)
      throw std::invalid_argument("sub-network: the path has " + std::to_string(heads.size()) +
                                  " choices, the model " + std::to_string(a.layers) + " layers");
    for (std::size_t l = 0; l < heads.size(); ++l)
      if (heads[l] < -1 || heads[l] >= a.heads || (heads[l] == -1 && !variant_.skip))
        throw std::invalid_argument("sub-network: layer " + std::to_string(l + 1) + ": choice " +
                                    std::to_string(heads[l]) + " is not a head in [0, " + std::to_string(a.heads) +
                                    ")" + (variant_.skip ? " or -1 (skip)" : " (skip is off)"));
  }

  /// F_path(X0); the path is not checked (check_path).
  Matrix<S> run(const Matrix<S>& X0, const std::vector<int>& heads) const {
    const Architecture& a = model_.arch();
    Variant v = variant_;
    v.skip = false;  // the skip branch is a path of its own (h = −1)
    Matrix<S> Y = X0;
    for (int l = 0; l < a.layers; ++l) {
      const int h = heads[static_cast<std::size_t>(l)];
      if (h < 0) continue;  // the skip branch: identity
      check_interrupt();
      const Layer& w = layers_[static_cast<std::size_t>(l)];
      PointLayer<S> ar{one_, w.heads[static_cast<std::size_t>(h)], w.mlp, model_.layer(l), pos_, l, variant_.mask,
                       window_of(a, l), nullptr};
      Y = layer_map(ar, one_, v, Y);
    }
    return Y;
  }

 private:
  struct Layer {
    PackedLayer<S> mlp;
    std::vector<PackedLayer<S>> heads;
  };
  const Model& model_;
  Variant variant_;
  Architecture one_;  ///< the model's architecture with one head
  std::vector<Layer> layers_;
  PositionTables<S> pos_;
};

template <class S> S count_as(const PathCount& c) {
  if constexpr (is_mpfr_v<S>) {
    return S(c.str());
  } else {
    return c.template convert_to<double>();
  }
}

/// Every path of length k in enumeration order (-1 first, then heads ascending).
inline void all_paths_of_length(int layers, int heads, bool skip, int k, std::vector<int>& prefix,
                                std::vector<std::vector<int>>& out) {
  const int depth = static_cast<int>(prefix.size());
  int len = 0;
  for (int h : prefix) len += h >= 0;
  if (depth == layers) {
    if (len == k) out.push_back(prefix);
    return;
  }
  if (len > k || len + (layers - depth) < k) return;
  if (skip) {
    prefix.push_back(-1);
    all_paths_of_length(layers, heads, skip, k, prefix, out);
    prefix.pop_back();
  }
  for (int h = 0; h < heads; ++h) {
    prefix.push_back(h);
    all_paths_of_length(layers, heads, skip, k, prefix, out);
    prefix.pop_back();
  }
}

/// The work of a re-run curve, K = L + 1 lengths: f(r, k, paths) for every
/// unit (repetition r, length k) on `threads` threads, a length whose every
/// path is run (all_paths[k]) once (r = 0) with its paths in enumeration
/// order, any other length per repetition with the N paths drawn from
/// Rng(seed + (r·K + k + 1)·0x9E3779B97F4A7C15) (rerun.hpp). The same units
/// and paths at any thread count.
template <class F>
void for_each_rerun_unit(int layers, int heads, bool skip, const RerunOptions& o, const std::vector<bool>& all_paths,
                         F&& f) {
  const std::size_t K = all_paths.size(), R = static_cast<std::size_t>(o.repeats);
  struct Unit {
    std::size_t r, k;
  };
  std::vector<Unit> units;
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t k = 0; k < K; ++k)
      if (r == 0 || !all_paths[k]) units.push_back({r, k});
  run_blocks(units.size(), resolve_threads(o.threads), [&](std::size_t u) {
    const auto [r, k] = units[u];
    std::vector<std::vector<int>> paths;
    if (all_paths[k]) {
      std::vector<int> prefix;
      all_paths_of_length(layers, heads, skip, static_cast<int>(k), prefix, paths);
    } else {
      Rng rng(o.seed + (static_cast<std::uint64_t>(r) * K + k + 1) * 0x9E3779B97F4A7C15ULL);
      for (std::uint64_t i = 0; i < o.samples; ++i)
        paths.push_back(random_path(rng, layers, heads, skip, static_cast<int>(k)));
    }
    f(r, k, paths);
  });
}

}  // namespace detail

template <class S>
Matrix<S> rerun_path(const Model& model, const Variant& variant, const Matrix<S>& X0, const std::vector<int>& heads) {
  if (X0.cols() != model.arch().d_model || X0.rows() < 1)
    throw std::invalid_argument("sub-network: the input is not n×d_model with d_model = " +
                                std::to_string(model.arch().d_model));
  const detail::SubNetworks<S> net(model, variant, X0.rows());
  net.check_path(heads);
  return net.run(X0, heads);
}

template <class S>
RerunEffectiveness<S> rerun_effectiveness(const Model& model, const Variant& variant, const Matrix<S>& X0,
                                          const Matrix<S>& XL, const TaskHead* head, const RerunOptions& options,
                                          const std::vector<Matrix<S>>* reference) {
  const Architecture& a = model.arch();
  const int L = a.layers;
  const auto K = static_cast<std::size_t>(L) + 1;
  if (options.samples < 1) throw std::invalid_argument("re-run: at least 1 path per length is needed");
  if (options.repeats < 1) throw std::invalid_argument("re-run: at least 1 repetition is needed");
  if (options.threads < 0) throw std::invalid_argument("re-run: threads: " + std::to_string(options.threads) + " is negative");
  if (X0.cols() != a.d_model || X0.rows() < 1 || XL.rows() != X0.rows() || XL.cols() != X0.cols())
    throw std::invalid_argument("re-run: the input and the output must both be n×d_model with d_model = " +
                                std::to_string(a.d_model));
  if (reference && reference->size() != K)
    throw std::invalid_argument("re-run: " + std::to_string(reference->size()) + " reference truncations for " +
                                std::to_string(K) + " lengths");
  const Eigen::Index n = X0.rows(), d = X0.cols();
  const detail::SubNetworks<S> net(model, variant, n);
  const std::vector<PathCount> counts = count_paths_by_length(L, a.heads, variant.skip);

  // The bias term of the attention-only variants (math.md §4), added once.
  Matrix<S> base = detail::zeros<S>(n, d);
  if (detail::SubNetworks<S>::is_attention_only(variant)) {
    detail::BiasAccumulator<S> bias(d);
    for (int l = 0; l < L; ++l) bias.add_layer(detail::layer_maps<S>(a, model.layer(l), false), a.heads, variant.skip);
    base.rowwise() += bias.value();
  }

  const auto R = static_cast<std::size_t>(options.repeats);
  RerunEffectiveness<S> out;
  out.points.resize(K);
  for (std::size_t k = 0; k < K; ++k) {
    RerunPoint<S>& p = out.points[k];
    p.length = static_cast<int>(k);
    p.count = counts[k];
    p.all_paths = counts[k] <= PathCount(options.samples);
    p.evaluated = p.all_paths ? counts[k].template convert_to<std::uint64_t>() : options.samples;
  }
  std::vector<bool> all_paths;
  for (const RerunPoint<S>& p : out.points) all_paths.push_back(p.all_paths);
  std::vector<std::vector<Matrix<S>>> sums(R, std::vector<Matrix<S>>(K));
  detail::for_each_rerun_unit(L, a.heads, variant.skip, options, all_paths,
                              [&](std::size_t r, std::size_t k, const std::vector<std::vector<int>>& paths) {
                                const RerunPoint<S>& p = out.points[k];
                                Matrix<S> acc = detail::zeros<S>(n, d);
                                for (const std::vector<int>& path : paths) acc += net.run(X0, path);
                                if (!p.all_paths)
                                  acc *= S(detail::count_as<S>(p.count) / S(static_cast<double>(options.samples)));
                                sums[r][k] = std::move(acc);
                              });

  out.output_frobenius = norm_frobenius(XL);
  const S scale = out.output_frobenius != 0 ? out.output_frobenius : S(1);
  std::optional<Matrix<S>> logits;
  if (head) logits = task_logits<S>(*head, XL);
  for (std::size_t r = 0; r < R; ++r) {
    Matrix<S> Xk = base;
    for (std::size_t k = 0; k < K; ++k) {
      RerunPoint<S>& p = out.points[k];
      Xk += sums[p.all_paths ? 0 : r][k];
      p.distance.push_back(S(norm_frobenius(Matrix<S>(Xk - XL)) / scale));
      if (logits) p.head.push_back(compare_logits<S>(*logits, task_logits<S>(*head, Xk)));
      if (reference) p.gap.push_back(S(norm_frobenius(Matrix<S>(Xk - (*reference)[k])) / scale));
    }
  }
  return out;
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_RERUN(S)                                                                               \
  template sanpath::Matrix<S> sanpath::rerun_path<S>(const sanpath::Model&, const sanpath::Variant&,               \
                                                     const sanpath::Matrix<S>&, const std::vector<int>&);          \
  template sanpath::RerunEffectiveness<S> sanpath::rerun_effectiveness<S>(                                         \
      const sanpath::Model&, const sanpath::Variant&, const sanpath::Matrix<S>&, const sanpath::Matrix<S>&,        \
      const sanpath::TaskHead*, const sanpath::RerunOptions&, const std::vector<sanpath::Matrix<S>>*);

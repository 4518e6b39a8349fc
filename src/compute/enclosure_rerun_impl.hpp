#pragma once
// The re-run effectiveness curve in ball arithmetic (compute/enclosure_rerun.hpp).
#include "sanpath/compute/enclosure_rerun.hpp"
#include "compute/enclosure_effectiveness_impl.hpp"  // head_logits, agreement, length_sum_balls
#include "compute/rerun_impl.hpp"                    // detail::SubNetworks, all_paths_of_length, count_as

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sanpath {
namespace enclosure_detail {

/// F_path(X0) on balls: SubNetworks::run with every step enclosed (the
/// sub-network's own attention from its state, then LayerNorm and the MLP
/// half as the variant says, no skip term).
template <class S>
BallMatrix<S> run_enclosed(const detail::SubNetworks<S>& net, const Model& model, const Variant& v,
                           const BallMatrix<S>& X0, const std::vector<int>& heads, const BallPositions<S>& pos,
                           long p) {
  const Architecture& a = model.arch();
  Variant without_skip = v;
  without_skip.skip = false;  // the skip branch is a path of its own (h = −1)
  BallMatrix<S> Y = X0;
  for (int l = 0; l < a.layers; ++l) {
    const int h = heads[static_cast<std::size_t>(l)];
    if (h < 0) continue;  // the skip branch: identity
    check_interrupt();
    BallLayer<S> ar{net.one_head(), net.head(l, h), net.mlp_half(l), model.layer(l), pos, l, v.mask,
                    detail::window_of(a, l), p, nullptr};
    Y = detail::layer_map(ar, net.one_head(), without_skip, Y);
  }
  return Y;
}

/// c·X for a positive scalar c known to a relative error of at most 2.01u
/// (here count_k / N, each rounded once): |c X − RN(c̃ X̃)| ≤ c̃(1 + 8u)·r_X
/// + 8u·|result|, as attention() scales its logits.
template <class S> void scale_ball(BallMatrix<S>& X, const S& c, long p) {
  X.mid *= c;
  X.rad = X.rad * (UpperBound::abs_of(c.backend().data()) * (UpperBound::of(1.0) + UpperBound::of(8.0) * unit(p)));
  add_rounding(X, p, 8.0);
}

/// ‖A − B‖_F / ‖X^L‖_F for balls A, B.
template <class S>
Interval relative_distance(const BallMatrix<S>& A, const BallMatrix<S>& B, const Interval& output_frobenius,
                           long p) {
  BallMatrix<S> D{A.mid - B.mid, A.rad + B.rad};
  add_rounding(D, p);
  return quotient(norm_interval(D.mid, 'F', frobenius_up(D.rad)), output_frobenius, "‖X^L‖_F");
}

}  // namespace enclosure_detail

template <class S>
EnclosedRerun enclose_rerun(const Model& model, const EnclosedTrace<S>& t, const TaskHead* head,
                            const RerunOptions& options) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(model, t, head, options);
  } else {
    namespace E = enclosure_detail;
    const Architecture& a = model.arch();
    const int L = a.layers;
    const auto K = static_cast<std::size_t>(L) + 1;
    const long p = precision_bits_v<S>;
    const Variant& variant = t.variant;
    if (options.samples < 1) throw std::invalid_argument("re-run: at least 1 path per length is needed");
    if (options.repeats < 1) throw std::invalid_argument("re-run: at least 1 repetition is needed");
    if (options.threads < 0)
      throw std::invalid_argument("re-run: threads: " + std::to_string(options.threads) + " is negative");
    if (t.X.size() != K) throw std::invalid_argument("re-run: the enclosed trace is not of this model");
    const BallMatrix<S>& X0 = t.X.front();
    const BallMatrix<S>& XL = t.X.back();
    const Eigen::Index n = X0.mid.rows(), d = X0.mid.cols();
    const detail::SubNetworks<S> net(model, variant, n);
    const E::BallPositions<S> pos = E::BallPositions<S>::make(a, n);
    const std::vector<PathCount> counts = count_paths_by_length(L, a.heads, variant.skip);

    // Attention-only: the bias term 1bᵀ starts every truncation, and the
    // exact truncations X_{≤k} give the gaps (the length sums' balls).
    BallMatrix<S> base = E::zero_ball<S>(n, d);
    std::optional<E::LengthSumBalls<S>> exact;
    if (detail::SubNetworks<S>::is_attention_only(variant)) {
      exact = E::length_sum_balls(model, t);
      base = exact->bias_rows();
    }

    const auto R = static_cast<std::size_t>(options.repeats);
    EnclosedRerun out;
    out.points.resize(K);
    for (std::size_t k = 0; k < K; ++k) {
      EnclosedRerunPoint& q = out.points[k];
      q.length = static_cast<int>(k);
      q.count = counts[k];
      q.all_paths = counts[k] <= PathCount(options.samples);
      q.evaluated = q.all_paths ? counts[k].template convert_to<std::uint64_t>() : options.samples;
    }
    // The units and draws of rerun_effectiveness.
    std::vector<bool> all_paths;
    for (const EnclosedRerunPoint& q : out.points) all_paths.push_back(q.all_paths);
    std::vector<std::vector<BallMatrix<S>>> sums(R, std::vector<BallMatrix<S>>(K));
    detail::for_each_rerun_unit(L, a.heads, variant.skip, options, all_paths,
                                [&](std::size_t r, std::size_t k, const std::vector<std::vector<int>>& paths) {
                                  const EnclosedRerunPoint& q = out.points[k];
                                  BallMatrix<S> acc = E::zero_ball<S>(n, d);
                                  for (const std::vector<int>& path : paths)
                                    acc = E::sum(acc, E::run_enclosed(net, model, variant, X0, path, pos, p), p);
                                  if (!q.all_paths)
                                    E::scale_ball(acc,
                                                  S(detail::count_as<S>(q.count) /
                                                    S(static_cast<double>(options.samples))),
                                                  p);
                                  sums[r][k] = std::move(acc);
                                });

    out.output_frobenius = enclose_residual(XL, Center::mean).norm_frobenius;
    std::optional<BallMatrix<S>> reference;
    if (head) reference = E::head_logits(*head, XL, p);
    // The exact truncations X_{≤k}, k = 0..L (attention-only).
    std::vector<BallMatrix<S>> truncations;
    if (exact) {
      BallMatrix<S> x = exact->bias_rows();
      for (std::size_t k = 0; k < K; ++k) {
        if (const auto& Sk = exact->terms[k]) x = E::sum(x, *Sk, p);
        truncations.push_back(x);
      }
    }
    for (std::size_t r = 0; r < R; ++r) {
      BallMatrix<S> Xk = base;
      for (std::size_t k = 0; k < K; ++k) {
        check_interrupt();
        EnclosedRerunPoint& q = out.points[k];
        Xk = E::sum(Xk, sums[q.all_paths ? 0 : r][k], p);
        q.distance.push_back(E::relative_distance(Xk, XL, out.output_frobenius, p));
        if (reference) q.head.push_back(E::agreement(*reference, E::head_logits(*head, Xk, p)));
        if (exact) q.gap.push_back(E::relative_distance(Xk, truncations[k], out.output_frobenius, p));
      }
    }
    return out;
  }
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_ENCLOSED_RERUN(S)                                                                 \
  template sanpath::EnclosedRerun sanpath::enclose_rerun<S>(const sanpath::Model&, const sanpath::EnclosedTrace<S>&, \
                                                            const sanpath::TaskHead*, const sanpath::RerunOptions&);

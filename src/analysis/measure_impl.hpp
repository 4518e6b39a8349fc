#pragma once
#include "sanpath/compute/embed.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/forward_centred.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/core/linalg.hpp"  // convert

namespace sanpath {

namespace detail {

/// The statistics of one layer: norms of X, residual norms of `Y` for
/// `center`, where Y is X itself (direct pass) or its centred part R
/// (centred pass: res(X) = res(R), and R is already the mean residual).
template <class S> LayerStats layer_stats(const Matrix<S>& X, const Matrix<S>& Y, bool y_is_mean_residual, Center center) {
  LayerStats s;
  const Norms<S> whole = norms_of<S>(X);
  s.norm_composite = to_big(whole.composite);
  s.norm_frobenius = to_big(whole.frobenius);
  Norms<S> r;
  if (center == Center::optimal) {
    const OptimalResidual<S> o = optimal_residual<S>(Y);
    r = o.at_best;
    s.res_composite_lower = to_big(o.composite.lower);
    s.res_composite_lower_digits = lower_end_digits(to_big(o.min_inf.lower), to_big(o.min_inf.upper));
  } else if (center == Center::mean && y_is_mean_residual) {
    r = norms_of<S>(Y);
  } else {
    r = residual_norms<S>(Y, center);
  }
  s.res_one = to_big(r.one);
  s.res_inf = to_big(r.inf);
  s.res_composite = to_big(r.composite);
  s.res_frobenius = to_big(r.frobenius);
  s.relative_residual = whole.composite == 0 ? to_big(S(0)) : to_big(S(r.composite / whole.composite));
  return s;
}

/// Adds the measures of X = 1cᵀ + R (and of the attention P, layers ≥ 1) to
/// s; `flushed`: what underflow may have taken from P's measures (0 where P is
/// the object measured, as an emulated pass's).
template <class S>
void add_layer_measures(LayerStats& s, const Matrix<S>& X, const RowVector<S>& c, const Matrix<S>& R,
                        const std::vector<Matrix<S>>* P, const MeasureSet& measures,
                        const BigReal& flushed = BigReal(0)) {
  if (measures.empty()) return;
  s.measures = output_measures<S>(c, R, norm_composite<S>(X), measures);
  if (P != nullptr)
    for (MeasureValue& v : attention_measures<S>(*P, measures)) {
      v.flushed = flushed;
      s.measures.push_back(std::move(v));
    }
}

}  // namespace detail

template <class S>
std::vector<LayerStats> measure_matrices(const std::vector<Matrix<double>>& X,
                                         const std::vector<std::vector<Matrix<double>>>& P, Center center,
                                         const MeasureSet& measures) {
  std::vector<LayerStats> out;
  for (std::size_t l = 0; l < X.size(); ++l) {
    const Matrix<S> Xs = convert<S>(X[l]);
    out.push_back(detail::layer_stats<S>(Xs, Xs, false, center));
    if (measures.empty()) continue;
    std::vector<Matrix<S>> Ps;
    const bool attention = l > 0 && l - 1 < P.size() && measures.any_attention();
    if (attention)
      for (const Matrix<double>& Ph : P[l - 1]) Ps.push_back(convert<S>(Ph));
    const RowVector<S> c = column_means<S>(Xs);
    detail::add_layer_measures<S>(out.back(), Xs, c, residual<S>(Xs, c), attention ? &Ps : nullptr, measures);
  }
  return out;
}

template <class S>
std::vector<LayerStats> measure_layers(const Model& model, const Variant& variant, const InputSpec& input,
                                       Center center, ForwardMethod method,
                                       const std::function<void(int, int)>& on_layer, const MeasureSet& measures,
                                       long perturb_bits) {
  ForwardOptions opt;
  opt.perturb_bits = perturb_bits;
  opt.record_attention = measures.any_attention();
  opt.on_layer = on_layer;
  std::vector<LayerStats> out;
  if (method == ForwardMethod::centred) {
    const CentredTrace<S> t = forward_centred<S>(model, variant, make_input<S>(model, input), opt);
    const BigReal flushed = attention_underflow_allowance<S>(t.R.front().rows());  // the range the pass ran in
    out.reserve(t.R.size());
    for (int l = 0; l <= t.layers(); ++l) {
      const auto lu = static_cast<std::size_t>(l);
      const Matrix<S> X = t.X(l);
      out.push_back(detail::layer_stats<S>(X, t.R[lu], true, center));
      // P = Π + E (math.md §7), as the pass formed it.
      detail::add_layer_measures<S>(out.back(), X, t.c[lu], t.R[lu],
                                    l > 0 && opt.record_attention ? &t.P[lu - 1] : nullptr, measures, flushed);
    }
    return out;
  }
  const ForwardTrace<S> t = forward<S>(model, variant, make_input<S>(model, input), opt);
  const BigReal flushed = attention_underflow_allowance<S>(t.X.front().rows());  // the range the pass ran in
  out.reserve(t.X.size());
  for (std::size_t l = 0; l < t.X.size(); ++l) {
    const Matrix<S>& X = t.X[l];
    out.push_back(detail::layer_stats<S>(X, X, false, center));
    if (measures.empty()) continue;
    const RowVector<S> c = column_means<S>(X);
    detail::add_layer_measures<S>(out.back(), X, c, residual<S>(X, c),
                                  l > 0 && opt.record_attention ? &t.P[l - 1] : nullptr, measures, flushed);
  }
  return out;
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_ANALYSIS(S)                                                                  \
  template std::vector<sanpath::LayerStats> sanpath::measure_layers<S>(                                 \
      const sanpath::Model&, const sanpath::Variant&, const sanpath::InputSpec&, sanpath::Center,             \
      sanpath::ForwardMethod, const std::function<void(int, int)>&, const sanpath::MeasureSet&, long);                 \
  template std::vector<sanpath::LayerStats> sanpath::measure_matrices<S>(                                 \
      const std::vector<sanpath::Matrix<double>>&, const std::vector<std::vector<sanpath::Matrix<double>>>&, \
      sanpath::Center, const sanpath::MeasureSet&);

#pragma once
#include "sanpath/compute/embed.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/forward_centred.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/compute/norms.hpp"

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

}  // namespace detail

template <class S>
std::vector<LayerStats> measure_layers(const Model& model, const Variant& variant, const InputSpec& input,
                                       Center center, ForwardMethod method,
                                       const std::function<void(int, int)>& on_layer) {
  ForwardOptions opt;
  opt.record_attention = false;
  opt.on_layer = on_layer;
  std::vector<LayerStats> out;
  if (method == ForwardMethod::centred) {
    const CentredTrace<S> t = forward_centred<S>(model, variant, make_input<S>(model, input), opt);
    out.reserve(t.R.size());
    for (int l = 0; l <= t.layers(); ++l)
      out.push_back(detail::layer_stats<S>(t.X(l), t.R[static_cast<std::size_t>(l)], true, center));
    return out;
  }
  const ForwardTrace<S> t = forward<S>(model, variant, make_input<S>(model, input), opt);
  out.reserve(t.X.size());
  for (const Matrix<S>& X : t.X) out.push_back(detail::layer_stats<S>(X, X, false, center));
  return out;
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_ANALYSIS(S)                                                                  \
  template std::vector<sanpath::LayerStats> sanpath::measure_layers<S>(                                 \
      const sanpath::Model&, const sanpath::Variant&, const sanpath::InputSpec&, sanpath::Center,             \
      sanpath::ForwardMethod, const std::function<void(int, int)>&);

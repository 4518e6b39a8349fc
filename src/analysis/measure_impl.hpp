#pragma once
#include "sanpath/compute/embed.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/compute/norms.hpp"

namespace sanpath {

template <class S>
std::vector<LayerStats> measure_layers(const Model& model, const Variant& variant, const InputSpec& input,
                                       Center center, const std::function<void(int, int)>& on_layer) {
  ForwardOptions opt;
  opt.record_attention = false;
  opt.on_layer = on_layer;
  const ForwardTrace<S> t = forward<S>(model, variant, make_input<S>(model, input), opt);
  std::vector<LayerStats> out;
  out.reserve(t.X.size());
  for (const Matrix<S>& X : t.X) {
    LayerStats s;
    const Norms<S> whole = norms_of<S>(X);
    s.norm_composite = to_big(whole.composite);
    s.norm_frobenius = to_big(whole.frobenius);
    Norms<S> r;
    if (center == Center::optimal) {
      const OptimalResidual<S> o = optimal_residual<S>(X);
      r = o.at_best;
      s.res_composite_lower = to_big(o.composite.lower);
      s.res_composite_lower_digits = lower_end_digits(to_big(o.min_inf.lower), to_big(o.min_inf.upper));
    } else {
      r = residual_norms<S>(X, center);
    }
    s.res_one = to_big(r.one);
    s.res_inf = to_big(r.inf);
    s.res_composite = to_big(r.composite);
    s.res_frobenius = to_big(r.frobenius);
    s.relative_residual = whole.composite == 0 ? to_big(S(0)) : to_big(S(r.composite / whole.composite));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_ANALYSIS(S)                                                                  \
  template std::vector<sanpath::LayerStats> sanpath::measure_layers<S>(                                 \
      const sanpath::Model&, const sanpath::Variant&, const sanpath::InputSpec&, sanpath::Center,             \
      const std::function<void(int, int)>&);

#include "sanpath/analysis/serialize.hpp"

#include "sanpath/analysis/batch.hpp"
#include "sanpath/analysis/bounds.hpp"
#include "sanpath/analysis/collapse.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/rerun.hpp"
#include "sanpath/compute/bounds.hpp"
#include "sanpath/compute/measures.hpp"
#include "sanpath/core/bytes.hpp"
#include "sanpath/core/quantity.hpp"
#include "sanpath/core/scalar.hpp"
#include "sanpath/model/model.hpp"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sanpath {

// Every struct reachable from the six results, member by member in
// declaration order, bases first (core/bytes.hpp: one function for both
// directions). A member added to one of these structs must be added here:
// nothing else notices a missing one.

// core/, model/, compute/
template <class A> void fields(A& a, Precision& x);
template <class A> void fields(A& a, Interval& x);
template <class A> void fields(A& a, Quantity& x);
template <class A> void fields(A& a, Variant& x);
template <class A> void fields(A& a, MeasureSet& x);
template <class A> void fields(A& a, LogReal& x);
template <class A> void fields(A& a, HeadQuantities& x);
template <class A> void fields(A& a, LayerQuantities& x);
template <class A> void fields(A& a, WeightQuantities& x);
template <class A> void fields(A& a, Coverage& x);
template <class A> void fields(A& a, TheoremChoice& x);
template <class A> void fields(A& a, MeasuredResidual& x);
template <class A> void fields(A& a, BoundEnclosure& x);
template <class A> void fields(A& a, DepthComparison& x);
template <class A> void fields(A& a, BoundsReport& x);
// analysis/
template <class A> void fields(A& a, Provenance& x);
template <class A> void fields(A& a, PrecisionRequest& x);
template <class A> void fields(A& a, MeasureReport& x);
template <class A> void fields(A& a, LayerReport& x);
template <class A> void fields(A& a, EmulatedLayerReport& x);
template <class A> void fields(A& a, EmulationReport& x);
template <class A> void fields(A& a, ForwardAnalysis& x);
template <class A> void fields(A& a, NamedVariant& x);
template <class A> void fields(A& a, CollapseResult& x);
template <class A> void fields(A& a, PathReportBase& x);
template <class A> void fields(A& a, LengthSumEntry& x);
template <class A> void fields(A& a, LengthSumsReport& x);
template <class A> void fields(A& a, BoundsRequest& x);
template <class A> void fields(A& a, MeasuredDepth& x);
template <class A> void fields(A& a, ResidualSeries& x);
template <class A> void fields(A& a, BoundsAnalysis& x);
template <class A> void fields(A& a, EffectivenessEntry& x);
template <class A> void fields(A& a, EffectivenessReport& x);
template <class A> void fields(A& a, BatchStatistic& x);
template <class A> void fields(A& a, RerunRequest& x);
template <class A> void fields(A& a, RerunEntry& x);
template <class A> void fields(A& a, RerunReport& x);

// ------------------------------------------------------------ core, model, compute

template <class A> void fields(A& a, Precision& x) { a(x.native_double, x.bits); }

template <class A> void fields(A& a, Interval& x) { a(x.lo, x.hi); }

template <class A> void fields(A& a, Quantity& x) {
  a(x.value, x.digits, x.below_resolution, x.bound, x.rounding, x.asked, x.enclosure);
}

template <class A> void fields(A& a, Variant& x) { a(x.skip, x.mlp, x.layernorm, x.mask); }

/// Its private bit set, as the list of its measures (report order).
template <class A> void fields(A& a, MeasureSet& x) {
  std::vector<Measure> list = x.list();
  a(list);
  if constexpr (A::reading) {
    MeasureSet set;
    for (const Measure m : list) {
      const auto i = static_cast<std::size_t>(m);
      if (i >= all_measures().size()) throw std::runtime_error("bytes: an unknown measure");
      set.add(m);
    }
    x = set;
  }
}

/// Its private log2 at 4098 bits (−inf for zero), exactly.
template <class A> void fields(A& a, LogReal& x) {
  if constexpr (A::reading) {
    LogReal::Log log2x;
    a(log2x);
    const mpfr_srcptr v = log2x.backend().data();
    if (mpfr_nan_p(v) || (mpfr_inf_p(v) && mpfr_sgn(v) > 0)) throw std::runtime_error("bytes: a LogReal of NaN or +inf");
    x = LogReal::from_log2(log2x);
  } else {
    a(x.log2());
  }
}

template <class A> void fields(A& a, HeadQuantities& x) { a(x.qk_norm_1, x.vo_composite, x.beta); }

template <class A> void fields(A& a, LayerQuantities& x) { a(x.heads, x.beta, x.lambda); }

template <class A> void fields(A& a, WeightQuantities& x) {
  a(x.heads, x.d_model, x.d_qk, x.d_v, x.d_ff, x.activation, x.layers, x.beta, x.lambda, x.relative_error,
    x.exact_products);
}

template <class A> void fields(A& a, Coverage& x) { a(x.rotary, x.gated_mlp, x.position_terms, x.softcap); }

template <class A> void fields(A& a, TheoremChoice& x) { a(x.theorem, x.applicable, x.reason); }

template <class A> void fields(A& a, MeasuredResidual& x) { a(x.lower, x.upper, x.below_resolution); }

template <class A> void fields(A& a, BoundEnclosure& x) { a(x.value, x.lower, x.upper); }

template <class A> void fields(A& a, DepthComparison& x) {
  a(x.layer, x.a_layer, x.bound, x.layerwise_bound, x.measured, x.verdict, x.layerwise_verdict, x.slack_log10,
    x.cubic_constant, x.order);
}

template <class A> void fields(A& a, BoundsReport& x) {
  a(x.gamma, x.theorem, x.a, x.contraction_radius, x.vacuous, x.contraction, x.sqrt_a_r0, x.beta, x.lambda,
    x.depths);
}

// ------------------------------------------------------------------- analysis

template <class A> void fields(A& a, Provenance& x) {
  a(x.method, x.precision, x.check, x.check_method, x.tried_bits, x.chosen_by, x.ceiling_reached, x.ceiling_bits);
}

template <class A> void fields(A& a, PrecisionRequest& x) {
  a(x.automatic, x.fixed, x.target_digits, x.max_bits, x.confirm, x.measures, x.emulate, x.method, x.check);
}

template <class A> void fields(A& a, MeasureReport& x) { a(x.name, x.value); }

template <class A> void fields(A& a, LayerReport& x) {
  a(x.layer, x.res_one, x.res_inf, x.res_composite, x.res_frobenius, x.res_composite_lower, x.norm_composite,
    x.norm_frobenius, x.relative_residual, x.measures, x.digits);
}

template <class A> void fields(A& a, EmulatedLayerReport& x) {
  a(x.layer, x.non_finite, x.relative_residual, x.measures, x.correct_digits);
}

template <class A> void fields(A& a, EmulationReport& x) {
  a(x.format, x.layers, x.overflow, x.first_layer_without_digit);
}

template <class A> void fields(A& a, ForwardAnalysis& x) {
  fields(a, static_cast<Provenance&>(x));
  a(x.variant, x.center, x.layers, x.emulation);
}

template <class A> void fields(A& a, NamedVariant& x) { a(x.name, x.variant); }

template <class A> void fields(A& a, CollapseResult& x) { a(x.conventions, x.variants, x.analyses); }

template <class A> void fields(A& a, PathReportBase& x) {
  fields(a, static_cast<Provenance&>(x));
  a(x.variant, x.layers, x.heads, x.tokens);
}

template <class A> void fields(A& a, LengthSumEntry& x) {
  a(x.length, x.count, x.frobenius, x.residual, x.share, x.digits);
}

template <class A> void fields(A& a, LengthSumsReport& x) {
  fields(a, static_cast<PathReportBase&>(x));
  a(x.lengths, x.total_count, x.decomposition_error, x.output_frobenius);
}

template <class A> void fields(A& a, BoundsRequest& x) { a(x.theorem, x.gamma, x.precision); }

template <class A> void fields(A& a, MeasuredDepth& x) {
  a(x.layer, x.lower, x.upper, x.relative, x.enclosure, x.digits);
}

template <class A> void fields(A& a, ResidualSeries& x) {
  fields(a, static_cast<Provenance&>(x));
  a(x.variant, x.depths, x.upper_bound_only);
}

template <class A> void fields(A& a, BoundsAnalysis& x) {
  a(x.request, x.weights, x.report, x.measured, x.without_skip, x.coverage, x.verdicts_proven);
}

template <class A> void fields(A& a, EffectivenessEntry& x) {
  a(x.length, x.count, x.distance, x.agree, x.agree_check, x.agree_most, x.kl, x.digits);
}

template <class A> void fields(A& a, EffectivenessReport& x) {
  fields(a, static_cast<PathReportBase&>(x));
  a(x.head, x.outputs, x.predictions, x.lengths, x.output_frobenius);
}

template <class A> void fields(A& a, BatchStatistic& x) { a(x.count, x.mean, x.stddev, x.min, x.median, x.max); }

template <class A> void fields(A& a, RerunRequest& x) { a(x.samples, x.repeats, x.seed, x.threads); }

template <class A> void fields(A& a, RerunEntry& x) {
  a(x.length, x.count, x.all_paths, x.evaluated, x.distance, x.agree, x.agree_check, x.kl, x.gap, x.agree_most,
    x.distance_each, x.kl_each, x.gap_each);
}

template <class A> void fields(A& a, RerunReport& x) {
  fields(a, static_cast<PathReportBase&>(x));
  a(x.request, x.exact, x.head, x.outputs, x.predictions, x.lengths, x.output_frobenius);
}

// ------------------------------------------------------------------ entry points

namespace {

/// The type's name, then the value.
template <class T> std::string encode(const char* name, const T& x) {
  ByteWriter w;
  w(std::string(name), x);
  return w.bytes();
}

/// Decodes into a fresh value and moves it into `out` only when every byte was read.
template <class T> void decode(const char* name, std::string_view bytes, T& out) {
  ByteReader r(bytes);
  std::string tag;
  r(tag);
  if (tag != name) throw std::runtime_error(std::string("bytes: not an encoding of ") + name);
  T value;
  r(value);
  r.finish();
  out = std::move(value);
}

}  // namespace

#define SANPATH_SERIALIZE(T)                                                                     \
  std::string to_bytes(const T& x) { return encode(#T, x); }                                     \
  void from_bytes(std::string_view bytes, T& out) { decode(#T, bytes, out); }
SANPATH_SERIALIZE(ForwardAnalysis)
SANPATH_SERIALIZE(CollapseResult)
SANPATH_SERIALIZE(LengthSumsReport)
SANPATH_SERIALIZE(BoundsAnalysis)
SANPATH_SERIALIZE(EffectivenessReport)
SANPATH_SERIALIZE(RerunReport)
#undef SANPATH_SERIALIZE

}  // namespace sanpath

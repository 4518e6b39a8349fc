// Path effectiveness in both senses: the re-run sub-networks of
// compute/rerun.hpp at the working precision and one tier up, confirmed
// draw by draw and summarised over the repetitions, beside the exact sense.
#include "sanpath/analysis/rerun.hpp"
#include "sanpath/core/resources.hpp"

#include "sanpath/analysis/certified.hpp"
#include "sanpath/analysis/confirmation.hpp"
#include "sanpath/analysis/double_check.hpp"  // require_check
#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/rerun.hpp"
#include "sanpath/core/dispatch.hpp"

#include <limits>
#include <stdexcept>

namespace sanpath {

namespace {

/// One precision's values: [k][r].
struct RawRerun {
  std::vector<RerunPoint<BigReal>> points;
  BigReal output_frobenius;
  long tokens = 0, predictions = 0;
};

bool attention_only(const Variant& v) { return v.mlp == MlpKind::none && v.layernorm == LayerNormKind::none; }

RawRerun rerun_at(const Precision& p, const Model& model, const Variant& variant, const InputSpec& input,
                  const TaskHead* head, const RerunOptions& options, bool exact, const ProgressFn& progress,
                  const std::string& what) {
  return with_scalar(p, [&](auto tag) {
    using S = typename decltype(tag)::type;
    ForwardOptions fo;
    fo.record_attention = exact;
    fo.on_layer = layer_progress(progress, what + ": forward pass at " + p.name(), model.arch().layers);
    const ForwardTrace<S> t = forward<S>(model, variant, make_input<S>(model, input), fo);
    std::vector<Matrix<S>> truncations;
    if (exact) exact_effectiveness<S>(model, t, nullptr, 1, &truncations);
    report_progress(progress, what + ": sub-networks at " + p.name(), 0, 0);
    const RerunEffectiveness<S> e =
        rerun_effectiveness<S>(model, variant, t.X.front(), t.X.back(), head, options, exact ? &truncations : nullptr);
    RawRerun r;
    r.tokens = static_cast<long>(t.X.front().rows());
    r.output_frobenius = to_big(e.output_frobenius);
    for (const RerunPoint<S>& x : e.points) {
      RerunPoint<BigReal> y;
      y.length = x.length;
      y.count = x.count;
      y.all_paths = x.all_paths;
      y.evaluated = x.evaluated;
      for (const S& v : x.distance) y.distance.push_back(to_big(v));
      for (const S& v : x.gap) y.gap.push_back(to_big(v));
      for (const HeadAgreement<S>& h : x.head) {
        y.head.push_back({h.agree, h.predictions, to_big(h.mean_kl)});
        r.predictions = h.predictions;
      }
      r.points.push_back(std::move(y));
    }
    return r;
  });
}

/// A value confirmed by its check value; an exact 0 is rounding (the
/// sub-network outputs differ from X^L or X_{≤k} in general): below the
/// resolution 2^(1-bits)·`scale`. Printed to at most `asked` digits.
Quantity measured(const BigReal& v, const BigReal* check, long bits, int asked, const BigReal& scale) {
  if (v == 0) return below_resolution(v, BigReal(pow(BigReal(2, 30), BigReal(1 - bits, 30)) * scale));
  return confirmed(v, check, bits, asked);
}

/// The statistic of repetitions 0..R-1 (only the first when every path was run).
BatchStatistic over_repeats(const std::vector<BigReal>& a, const std::vector<BigReal>* c, bool all_paths, long bits,
                            int asked, const BigReal& scale) {
  std::vector<Quantity> q;
  const std::size_t R = all_paths ? 1 : a.size();
  for (std::size_t r = 0; r < R; ++r) q.push_back(measured(a[r], c ? &(*c)[r] : nullptr, bits, asked, scale));
  return summarize(q);
}

}  // namespace

RerunOptions rerun_options(const RerunRequest& r) {
  RerunOptions o;
  o.samples = r.samples;
  o.repeats = r.repeats;
  o.seed = r.seed;
  o.threads = r.threads;
  return o;
}

std::uint64_t RerunRequest::checked_samples(std::uint64_t samples) {
  if (samples < 1) throw std::invalid_argument("at least 1 path per length");
  return samples;
}

int RerunRequest::checked_repeats(int repeats) {
  if (repeats < 1) throw std::invalid_argument("at least 1 repetition");
  return repeats;
}

std::uint64_t RerunRequest::parsed_samples(const std::string& text) {
  // "-1" is no count of paths; the message the CLI gives a 0.
  if (!text.empty() && text[0] == '-') return checked_samples(0);
  return checked_samples(parse_uint64(text));
}

int RerunRequest::parsed_repeats(const std::string& text) {
  if (!text.empty() && text[0] == '-') return checked_repeats(0);
  const std::uint64_t r = parse_uint64(text);
  if (r > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    throw std::invalid_argument(text + " is too large");
  return checked_repeats(static_cast<int>(r));
}

RerunReport analyze_rerun(const Model& model, const Variant& variant, const InputSpec& input,
                          const PrecisionRequest& request, const RerunRequest& rerun, const TaskHead* head,
                          const ProgressFn& progress) {
  try {
    RerunRequest::checked_samples(rerun.samples);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("re-run: samples: ") + e.what());
  }
  try {
    RerunRequest::checked_repeats(rerun.repeats);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("re-run: repeats: ") + e.what());
  }
  if (rerun.threads < 0) throw std::invalid_argument("re-run: threads: " + std::to_string(rerun.threads) + " is negative");
  if (request.check == CheckMethod::certified)
    return analyze_rerun_certified(model, variant, input, request, rerun, head, progress);
  require_check(request.check, CheckScope::paths);
  model.check_supports(variant);
  const bool exact = attention_only(variant);
  RerunReport r;
  r.request = rerun;
  std::optional<Precision> check;
  if (exact) {
    r.exact = analyze_effectiveness(model, variant, input, request, head, prefixed_progress(progress, "exact: "));
    static_cast<PathReportBase&>(r) = static_cast<const PathReportBase&>(*r.exact);
    check = r.exact->check;
  } else {
    const PrecisionChoice choice =
        choose_precision(model, variant, input, request, Center::mean, prefixed_progress(progress, "precision: "));
    if (request.confirm) check = PrecisionRequest::confirming_tier(choice.precision);
    r.variant = variant;
    r.precision = choice.precision;
    r.check = check;
    r.tried_bits = choice.tried_bits;
    r.chosen_by = choice.method;
    r.ceiling_reached = choice.ceiling_reached;
    r.layers = model.arch().layers;
    r.heads = model.arch().heads;
  }
  const RerunOptions options = rerun_options(rerun);
  const Precision p = r.precision;
  const RawRerun a = rerun_at(p, model, variant, input, head, options, exact, progress, "re-run");
  std::optional<RawRerun> c;
  if (check) c = rerun_at(*check, model, variant, input, head, options, exact, progress, "confirming re-run");
  r.tokens = a.tokens;
  if (head) {
    r.head = head->kind;
    r.outputs = head->outputs();
    r.predictions = a.predictions;
  }
  const long bits = p.bits;
  const int asked = request.target_digits;
  for (std::size_t k = 0; k < a.points.size(); ++k) {
    const RerunPoint<BigReal>& x = a.points[k];
    const RerunPoint<BigReal>* y = c ? &c->points[k] : nullptr;
    RerunEntry e;
    e.length = x.length;
    e.count = x.count.str();
    e.all_paths = x.all_paths;
    e.evaluated = x.evaluated;
    e.distance = over_repeats(x.distance, y ? &y->distance : nullptr, x.all_paths, bits, asked, BigReal(1, 30));
    if (!x.gap.empty()) e.gap = over_repeats(x.gap, y ? &y->gap : nullptr, x.all_paths, bits, asked, BigReal(1, 30));
    if (!x.head.empty()) {
      std::vector<BigReal> kl, klc;
      const std::size_t R = x.all_paths ? 1 : x.head.size();
      for (std::size_t i = 0; i < R; ++i) {
        e.agree.push_back(x.head[i].agree);
        kl.push_back(x.head[i].mean_kl);
        if (y) {
          e.agree_check.push_back(y->head[i].agree);
          klc.push_back(y->head[i].mean_kl);
        }
      }
      e.kl = over_repeats(kl, y ? &klc : nullptr, false, bits, asked, BigReal(r.outputs, 30));
    }
    r.lengths.push_back(std::move(e));
  }
  r.output_frobenius = measured(a.output_frobenius, c ? &c->output_frobenius : nullptr, bits, asked, BigReal(1, 30));
  return r;
}

}  // namespace sanpath

// Path decomposition reports: the precision of analyze_forward, every
// quantity computed twice (p and p.next()) and confirmed (confirmation.hpp).
// The templated work is the explicitly instantiated kernels of paths.hpp;
// this file only runs them per precision and turns their results into
// Quantity values. The five analyses share the precision plan at its top.
// The text form of a head filter is parsed in paths_heads.cpp.
#include "sanpath/compute/embed.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/certified.hpp"
#include "sanpath/analysis/confirmation.hpp"
#include "sanpath/analysis/double_check.hpp"  // require_check
#include "sanpath/core/errors.hpp"

#include "sanpath/compute/effectiveness.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/top_paths.hpp"
#include "sanpath/core/resources.hpp"
#include "sanpath/core/dispatch.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>

namespace sanpath {

namespace {

// ---------------------------------------------------------------- common

/// The forward pass at scalar S with the attention matrices recorded.
template <class S>
ForwardTrace<S> trace_at(const Model& model, const Variant& variant, const InputSpec& input, const ProgressFn& progress,
                         const std::string& stage) {
  ForwardOptions opt;
  opt.record_attention = true;
  opt.on_layer = layer_progress(progress, stage, model.arch().layers);
  return forward<S>(model, variant, make_input<S>(model, input), opt);
}

/// Validates the variant and chooses the working precision and the check.
struct Plan {
  PrecisionChoice choice;
  std::optional<Precision> check;
};

void require_decomposable(const Model& model, const Variant& variant) {
  require_attention_only(variant);
  model.check_supports(variant);
}

Plan plan_precision(const Model& model, const Variant& variant, const InputSpec& input, const PrecisionRequest& request,
                    const ProgressFn& progress) {
  require_check(request.check, CheckScope::paths);
  Plan plan;
  plan.choice =
      choose_precision(model, variant, input, request, Center::mean, prefixed_progress(progress, "precision: "));
  if (request.confirm) plan.check = PrecisionRequest::confirming_tier(plan.choice.precision);
  return plan;
}

void fill_base(PathReportBase& r, const Model& model, const Variant& variant, const Plan& plan, long tokens) {
  r.variant = variant;
  r.method = ForwardMethod::direct;  // the decomposition is of the direct pass
  r.precision = plan.choice.precision;
  r.check = plan.check;
  r.check_method = CheckMethod::mpfr;
  r.tried_bits = plan.choice.tried_bits;
  r.chosen_by = plan.choice.method;
  r.ceiling_reached = plan.choice.ceiling_reached;
  r.layers = model.arch().layers;
  r.heads = model.arch().heads;
  r.tokens = tokens;
}

// ------------------------------------------------------------ length sums

struct RawSums {
  long n = 0, d = 0;
  std::vector<PathCount> counts;
  std::vector<BigReal> frobenius, residual, share;
  BigReal error, output_frobenius;
};

RawSums sums_at(const Precision& p, const Model& model, const Variant& variant, const InputSpec& input,
                const ProgressFn& progress, const std::string& what) {
  return with_scalar(p, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const ForwardTrace<S> t = trace_at<S>(model, variant, input, progress, what + ": forward pass at " + p.name());
    report_progress(progress, what + ": length sums at " + p.name(), 0, 0);
    const LengthSums<S> ls = length_sums<S>(model, t, 1);
    RawSums r;
    r.n = static_cast<long>(t.X[0].rows());
    r.d = static_cast<long>(t.X[0].cols());
    for (const LengthSum<S>& term : ls.terms) {
      r.counts.push_back(term.count);
      r.frobenius.push_back(to_big(term.frobenius));
      r.residual.push_back(to_big(term.residual_composite));
      r.share.push_back(to_big(term.share));
    }
    r.error = ls.error;
    r.output_frobenius = to_big(ls.output_frobenius);
    return r;
  });
}

// ------------------------------------------------------------ enumeration

struct RawRecord {
  std::vector<int> heads;
  int length = 0;
  BigReal frobenius, composite, residual, stochastic;
};

template <class S>
RawRecord raw_record(const PathRecord<S>& r) {
  return {r.heads,
          r.length,
          to_big(r.norm_frobenius),
          to_big(r.norm_composite),
          to_big(r.residual_composite),
          to_big(r.stochastic_residual)};
}

/// A path's reported entry: its record at the working precision confirmed
/// by the record of the same path at the check precision (`y`, may be null),
/// printed to at most `asked` digits.
PathTermEntry term_entry(const RawRecord& x, const RawRecord* y, long bits, int asked, long n, long d) {
  const BigReal one(1, 30);
  PathTermEntry e;
  e.heads = x.heads;
  e.length = x.length;
  e.norm_frobenius = confirmed(x.frobenius, y ? &y->frobenius : nullptr, bits, asked);
  e.norm_composite = confirmed(x.composite, y ? &y->composite : nullptr, bits, asked);
  e.residual_composite = confirmed_residual(x.residual, y ? &y->residual : nullptr, bits, asked, x.composite, n, d);
  e.stochastic_residual = confirmed_residual(x.stochastic, y ? &y->stochastic : nullptr, bits, asked, one, n, n);
  e.digits = least_digits({&e.norm_frobenius, &e.norm_composite, &e.residual_composite, &e.stochastic_residual});
  return e;
}

struct RawEnumeration {
  long n = 0, d = 0;
  std::vector<RawRecord> records;
  std::optional<BigReal> error;  ///< when every path was accumulated
  std::optional<PathSearchStats> search;  ///< top-K by branch and bound
};

/// What the confirming run must reproduce: the records of the first run.
struct CheckTargets {
  const std::vector<RawRecord>* records = nullptr;
  bool in_order = false;  ///< same filter, no top-K: the same records in the same order
};

/// One enumeration at precision p. Without targets: the walk as requested.
/// With targets: the records of exactly those head sequences (in their
/// order), by a full walk (when `walk`) or by evaluating each path alone
/// (then `accumulate` takes the reconstruction error from the length sums).
RawEnumeration enumerate_at(const Precision& p, const Model& model, const Variant& variant, const InputSpec& input,
                            const EnumerationRequest& er, bool accumulate, const CheckTargets& targets, bool walk,
                            std::uint64_t walked, const ProgressFn& progress, const std::string& what) {
  return with_scalar(p, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const ForwardTrace<S> t = trace_at<S>(model, variant, input, progress, what + ": forward pass at " + p.name());
    RawEnumeration out;
    out.n = static_cast<long>(t.X[0].rows());
    out.d = static_cast<long>(t.X[0].cols());
    const std::string stage = what + ": path terms at " + p.name();
    const long total = static_cast<long>(walked);
    EnumerationOptions o;
    o.filter = er.filter;
    o.threads = er.threads;
    o.max_paths = er.limit;
    o.accumulate = accumulate;
    o.top_k = targets.records ? 0 : er.top_k;

    if (targets.records && !walk) {  // a few paths: evaluate each one
      const auto& want = *targets.records;
      for (std::size_t i = 0; i < want.size(); ++i) {
        report_progress(progress, stage, static_cast<long>(i), static_cast<long>(want.size()));
        check_interrupt();
        out.records.push_back(raw_record(evaluate_path<S>(model, t, want[i].heads)));
      }
      // The reconstruction error at this precision without a walk: by the
      // length sums (a rounding error too; only its size is compared).
      if (accumulate) out.error = length_sums<S>(model, t, 1).error;
      return out;
    }

    if (!targets.records && er.top_k > 0) {  // the K largest by branch and bound
      report_progress(progress, what + ": top-" + std::to_string(er.top_k) + " search at " + p.name(), 0, 0);
      TopPathsOptions to;
      to.k = er.top_k;
      to.filter = er.filter;
      to.threads = er.threads;
      const TopPathsResult<S> res = top_paths<S>(model, t, to);
      for (const PathRecord<S>& r : res.records) out.records.push_back(raw_record(r));
      out.search = PathSearchStats{res.nodes, res.skipped, res.leaves};
      if (accumulate) out.error = length_sums<S>(model, t, 1).error;
      return out;
    }

    std::map<std::vector<int>, std::size_t> index;
    if (targets.records && !targets.in_order) {
      for (std::size_t i = 0; i < targets.records->size(); ++i) index.emplace((*targets.records)[i].heads, i);
      out.records.resize(targets.records->size());
    }
    std::size_t visited = 0;
    report_progress(progress, stage, 0, o.top_k ? 0 : total);
    const PathVisitor<S> visitor = [&](const PathRecord<S>& r) {
      ++visited;
      if (visited % 4096 == 0) {
        check_interrupt();
        if (o.top_k == 0) report_progress(progress, stage, static_cast<long>(visited), total);
      }
      if (!targets.records || targets.in_order) {
        out.records.push_back(raw_record(r));
        return;
      }
      const auto it = index.find(r.heads);
      if (it != index.end()) out.records[it->second] = raw_record(r);
    };
    const EnumerationResult<S> res = enumerate_paths<S>(model, t, o, visitor);
    if (accumulate) {
      Matrix<S> total_sum = t.X[0];
      total_sum.setConstant(S(0));
      for (const Matrix<S>& s : res.sums)
        if (s.size() != 0) total_sum += s;
      total_sum.rowwise() += res.bias;
      out.error = relative_max_error<S>(total_sum, t.X.back());
    }
    return out;
  });
}

// --------------------------------------------------------------- sampling

struct RawStat {
  BigReal mean, stddev, low, high;
};

template <class S>
RawStat raw_stat(const MeanInterval<S>& m) {
  return {to_big(m.mean), to_big(m.stddev), to_big(m.low), to_big(m.high)};
}

struct RawSample {
  int length = 0;
  std::uint64_t samples = 0;
  PathCount population;
  RawStat norm, residual;
};

struct RawSamples {
  long n = 0;
  std::vector<RawSample> lengths;
};

RawSamples samples_at(const Precision& p, const Model& model, const Variant& variant, const InputSpec& input,
                      const std::vector<int>& lengths, std::uint64_t samples, std::uint64_t seed,
                      const ProgressFn& progress, const std::string& what) {
  return with_scalar(p, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const ForwardTrace<S> t = trace_at<S>(model, variant, input, progress, what + ": forward pass at " + p.name());
    RawSamples out;
    out.n = static_cast<long>(t.X[0].rows());
    const std::string stage = what + ": sampling at " + p.name();
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      report_progress(progress, stage, static_cast<long>(i), static_cast<long>(lengths.size()));
      check_interrupt();
      // One length at a time (results do not depend on the other lengths).
      SampleOptions o;
      o.lengths.push_back(lengths[i]);
      o.samples = samples;
      o.seed = seed;
      o.threads = 0;  // the --threads setting
      const std::vector<LengthSample<S>> s = sample_paths<S>(model, t, o);
      out.lengths.push_back({s[0].length, s[0].samples, s[0].population, raw_stat(s[0].norm), raw_stat(s[0].residual)});
    }
    report_progress(progress, stage, static_cast<long>(lengths.size()), static_cast<long>(lengths.size()));
    return out;
  });
}

// ---------------------------------------------------------- effectiveness

struct RawEffectiveness {
  long n = 0, predictions = 0;
  std::vector<BigReal> distance, kl;
  std::vector<long> agree;
  BigReal output_frobenius;
};

RawEffectiveness effectiveness_at(const Precision& p, const Model& model, const Variant& variant,
                                  const InputSpec& input, const TaskHead* head, const ProgressFn& progress,
                                  const std::string& what) {
  return with_scalar(p, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const ForwardTrace<S> t = trace_at<S>(model, variant, input, progress, what + ": forward pass at " + p.name());
    report_progress(progress, what + ": length sums at " + p.name(), 0, 0);
    const Effectiveness<S> e = exact_effectiveness<S>(model, t, head, 1);
    RawEffectiveness r;
    r.n = static_cast<long>(t.X[0].rows());
    r.output_frobenius = to_big(e.output_frobenius);
    for (const EffectivenessPoint<S>& pt : e.points) {
      r.distance.push_back(to_big(pt.distance));
      if (pt.head) {
        r.kl.push_back(to_big(pt.head->mean_kl));
        r.agree.push_back(pt.head->agree);
        r.predictions = pt.head->predictions;
      }
    }
    return r;
  });
}

}  // namespace

// ------------------------------------------------------------ entry points

LengthSumsReport analyze_length_sums(const Model& model, const Variant& variant, const InputSpec& input,
                                     const PrecisionRequest& request, const ProgressFn& progress) {
  if (request.check == CheckMethod::certified)
    return analyze_length_sums_certified(model, variant, input, request, progress);
  require_decomposable(model, variant);
  const Plan plan = plan_precision(model, variant, input, request, progress);
  const Precision p = plan.choice.precision;
  const RawSums a = sums_at(p, model, variant, input, progress, "length sums");
  std::optional<RawSums> c;
  if (plan.check) c = sums_at(*plan.check, model, variant, input, progress, "confirming run");

  LengthSumsReport r;
  fill_base(r, model, variant, plan, a.n);
  const long bits = p.bits;
  const int asked = request.target_digits;
  PathCount total = 0;
  for (std::size_t k = 0; k < a.counts.size(); ++k) {
    LengthSumEntry e;
    e.length = static_cast<int>(k);
    e.count = a.counts[k].str();
    total += a.counts[k];
    const auto ck = [&](const std::vector<BigReal> RawSums::*field) -> const BigReal* {
      return c ? &((*c).*field)[k] : nullptr;
    };
    e.frobenius = confirmed(a.frobenius[k], ck(&RawSums::frobenius), bits, asked);
    e.residual = confirmed_residual(a.residual[k], ck(&RawSums::residual), bits, asked, a.frobenius[k], a.n, a.d);
    e.share = confirmed(a.share[k], ck(&RawSums::share), bits, asked);
    e.digits = least_digits({&e.frobenius, &e.residual, &e.share});
    r.lengths.push_back(std::move(e));
  }
  r.total_count = total.str();
  r.decomposition_error = confirmed(a.error, c ? &c->error : nullptr, bits, asked);
  r.output_frobenius = confirmed(a.output_frobenius, c ? &c->output_frobenius : nullptr, bits, asked);
  return r;
}

PathEnumerationReport analyze_enumeration(const Model& model, const Variant& variant, const InputSpec& input,
                                          const PrecisionRequest& request, const EnumerationRequest& er,
                                          const ProgressFn& progress) {
  if (request.check == CheckMethod::certified)
    return analyze_enumeration_certified(model, variant, input, request, er, progress);
  require_decomposable(model, variant);
  const int L = model.arch().layers, H = model.arch().heads;
  const bool skip = variant.skip;
  if (er.threads < 0)
    throw std::invalid_argument("path enumeration: threads: " + std::to_string(er.threads) + " is negative");
  // Refuse before any forward pass (a top-K search visits only part of the tree).
  const PathCount walked = count_filtered_paths(L, H, skip, er.filter);
  if (er.top_k == 0 && walked > er.limit) throw PathLimitError(walked, er.limit);
  const PathCount all = count_filtered_paths(L, H, skip, {});
  const bool all_paths = walked == all;

  const std::uint64_t nwalked = walked > std::numeric_limits<std::uint64_t>::max()
                                    ? std::numeric_limits<std::uint64_t>::max()
                                    : static_cast<std::uint64_t>(walked);
  const Plan plan = plan_precision(model, variant, input, request, progress);
  const Precision p = plan.choice.precision;
  // The records are kept: 4 numbers at each precision, then 4 reported
  // quantities (value and bound each), plus about 1 KiB per path for the
  // formatted report.
  const std::uint64_t kept = er.top_k > 0 ? std::min<std::uint64_t>(er.top_k, nwalked) : nwalked;
  const long top_bits = plan.check ? std::max(plan.check->bits, p.bits) : p.bits;
  const std::uint64_t per_record =
      add_sat(mul_sat(16, scalar_bytes(true, std::max(top_bits, 64L))), 1024 + 64 * static_cast<std::uint64_t>(L));
  require_memory(mul_sat(kept, per_record), "path enumeration", std::to_string(kept) + " path records kept");
  const RawEnumeration a =
      enumerate_at(p, model, variant, input, er, all_paths, {}, true, nwalked, progress, "enumeration");
  std::optional<RawEnumeration> c;
  if (plan.check) {
    CheckTargets targets{&a.records, er.top_k == 0};
    // The selected top-K paths: evaluated one by one.
    const bool walk = er.top_k == 0;
    c = enumerate_at(*plan.check, model, variant, input, er, all_paths, targets, walk, nwalked, progress,
                     "confirming run");
    if (c->records.size() != a.records.size())
      throw std::logic_error("path enumeration: the confirming run found " + std::to_string(c->records.size()) +
                             " paths, the first " + std::to_string(a.records.size()));
  }

  PathEnumerationReport r;
  fill_base(r, model, variant, plan, a.n);
  r.request = er;
  r.walked = walked.str();
  r.total_count = all.str();
  r.all_paths = all_paths;
  r.search = a.search;
  const long bits = p.bits;
  const int asked = request.target_digits;
  r.paths.reserve(a.records.size());
  for (std::size_t i = 0; i < a.records.size(); ++i) {
    const RawRecord& x = a.records[i];
    const RawRecord* y = c ? &c->records[i] : nullptr;
    if (y && y->heads != x.heads)
      throw std::logic_error("path enumeration: the confirming run's path " + std::to_string(i) +
                             " has a different head sequence");
    r.paths.push_back(term_entry(x, y, bits, asked, a.n, a.d));
  }
  if (a.error) r.decomposition_error = confirmed(*a.error, c && c->error ? &*c->error : nullptr, bits, asked);
  return r;
}

PathReportBase stream_enumeration(const Model& model, const Variant& variant, const InputSpec& input,
                                  const PrecisionRequest& request, const PathFilter& filter, std::uint64_t limit,
                                  const std::function<void(const PathTermEntry&)>& visit, const ProgressFn& progress) {
  if (request.check == CheckMethod::certified)
    throw std::invalid_argument("--check certified: path terms are certified in one result (analyze_enumeration; "
                                "Python enumerate_paths), not streamed");
  require_decomposable(model, variant);
  const PathCount walked = count_filtered_paths(model.arch().layers, model.arch().heads, variant.skip, filter);
  if (walked > limit) throw PathLimitError(walked, limit);
  const Plan plan = plan_precision(model, variant, input, request, progress);
  const Precision p = plan.choice.precision;
  using Evaluator = std::function<RawRecord(const std::vector<int>&)>;
  Evaluator check;
  if (plan.check)
    check = with_scalar(*plan.check, [&](auto tag) -> Evaluator {
      using C = typename decltype(tag)::type;
      const auto t = std::make_shared<const ForwardTrace<C>>(
          trace_at<C>(model, variant, input, progress, "confirming run: forward pass at " + plan.check->name()));
      return [t, &model](const std::vector<int>& heads) { return raw_record(evaluate_path<C>(model, *t, heads)); };
    });
  PathReportBase base;
  with_scalar(p, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const ForwardTrace<S> t = trace_at<S>(model, variant, input, progress, "enumeration: forward pass at " + p.name());
    const long n = static_cast<long>(t.X[0].rows()), d = static_cast<long>(t.X[0].cols());
    fill_base(base, model, variant, plan, n);
    EnumerationOptions o;
    o.filter = filter;
    o.max_paths = limit;
    const std::string stage = "enumeration: path terms at " + p.name();
    const long total = static_cast<long>(walked);
    long visited = 0;
    report_progress(progress, stage, 0, total);
    enumerate_paths<S>(model, t, o, [&](const PathRecord<S>& r) {
      if (++visited % 256 == 0) {
        check_interrupt();
        report_progress(progress, stage, visited, total);
      }
      const RawRecord x = raw_record(r);
      if (check) {
        const RawRecord y = check(x.heads);
        visit(term_entry(x, &y, p.bits, request.target_digits, n, d));
      } else {
        visit(term_entry(x, nullptr, p.bits, request.target_digits, n, d));
      }
    });
    report_progress(progress, stage, total, total);
  });
  return base;
}

PathSampleReport analyze_samples(const Model& model, const Variant& variant, const InputSpec& input,
                                 const PrecisionRequest& request, const std::vector<int>& lengths_in,
                                 std::uint64_t samples, std::uint64_t seed, const ProgressFn& progress) {
  require_decomposable(model, variant);
  const int L = model.arch().layers;
  std::vector<int> lengths = lengths_in;
  if (lengths.empty()) {
    if (variant.skip) {
      for (int k = 0; k <= L; ++k) lengths.push_back(k);
    } else {
      lengths.push_back(L);
    }
  }
  // The library's checks, before any forward pass.
  require_check(request.check, CheckScope::path_sampling);
  if (samples < 2)
    throw std::invalid_argument("path sampling: samples: at least 2 are needed for a confidence interval, got " +
                                std::to_string(samples));
  for (int k : lengths)
    if (k < 0 || k > L || (!variant.skip && k != L))
      throw std::invalid_argument("path sampling: length " + std::to_string(k) + " has no paths (" +
                                  (variant.skip ? "lengths run over 0.." + std::to_string(L)
                                                : "without skip every path has length " + std::to_string(L)) +
                                  ")");

  const Plan plan = plan_precision(model, variant, input, request, progress);
  const Precision p = plan.choice.precision;
  const RawSamples a = samples_at(p, model, variant, input, lengths, samples, seed, progress, "sampling");
  std::optional<RawSamples> c;
  if (plan.check)
    c = samples_at(*plan.check, model, variant, input, lengths, samples, seed, progress, "confirming run");

  PathSampleReport r;
  fill_base(r, model, variant, plan, a.n);
  r.seed = seed;
  const long bits = p.bits;
  const int asked = request.target_digits;
  const auto stat = [&](const RawStat& x, const RawStat* y) {
    SampleStatistic s;
    s.mean = confirmed(x.mean, y ? &y->mean : nullptr, bits, asked);
    s.stddev = confirmed(x.stddev, y ? &y->stddev : nullptr, bits, asked);
    s.low = confirmed(x.low, y ? &y->low : nullptr, bits, asked);
    s.high = confirmed(x.high, y ? &y->high : nullptr, bits, asked);
    return s;
  };
  for (std::size_t i = 0; i < a.lengths.size(); ++i) {
    const RawSample& x = a.lengths[i];
    const RawSample* y = c ? &c->lengths[i] : nullptr;
    LengthSampleEntry e;
    e.length = x.length;
    e.samples = x.samples;
    e.population = x.population.str();
    e.norm = stat(x.norm, y ? &y->norm : nullptr);
    e.residual = stat(x.residual, y ? &y->residual : nullptr);
    // The spread is no digit count of the means: one path (length 0) has a
    // standard deviation of 0, computed as rounding noise.
    e.digits =
        least_digits({&e.norm.mean, &e.norm.low, &e.norm.high, &e.residual.mean, &e.residual.low, &e.residual.high});
    r.lengths.push_back(std::move(e));
  }
  return r;
}

EffectivenessReport analyze_effectiveness(const Model& model, const Variant& variant, const InputSpec& input,
                                          const PrecisionRequest& request, const TaskHead* head,
                                          const ProgressFn& progress) {
  if (request.check == CheckMethod::certified)
    return analyze_effectiveness_certified(model, variant, input, request, head, progress);
  require_decomposable(model, variant);
  const Plan plan = plan_precision(model, variant, input, request, progress);
  const Precision p = plan.choice.precision;
  const RawEffectiveness a = effectiveness_at(p, model, variant, input, head, progress, "effectiveness");
  std::optional<RawEffectiveness> c;
  if (plan.check) c = effectiveness_at(*plan.check, model, variant, input, head, progress, "confirming run");

  EffectivenessReport r;
  fill_base(r, model, variant, plan, a.n);
  if (head) {
    r.head = head->kind;
    r.outputs = head->outputs();
    r.predictions = a.predictions;
  }
  const long bits = p.bits;
  const int asked = request.target_digits;
  const std::vector<PathCount> counts = count_paths_by_length(model.arch().layers, model.arch().heads, variant.skip);
  PathCount upto = 0;
  for (std::size_t k = 0; k < a.distance.size(); ++k) {
    EffectivenessEntry e;
    e.length = static_cast<int>(k);
    upto += counts[k];
    e.count = upto.str();
    e.distance = confirmed(a.distance[k], c ? &c->distance[k] : nullptr, bits, asked);
    if (head) {
      e.agree = a.agree[k];
      if (c) e.agree_check = c->agree[k];
      // A KL computed as exactly 0 for a truncation that differs from X^L is
      // rounding (every log-probability agreed): below 2^(1-bits) per class.
      if (a.kl[k] == 0 && a.distance[k] != 0)
        e.kl = below_resolution(a.kl[k], rounding_unit(bits) * BigReal(r.outputs, 30));
      else
        e.kl = confirmed(a.kl[k], c ? &c->kl[k] : nullptr, bits, asked);
      e.digits = least_digits({&e.distance, &*e.kl});
    } else {
      e.digits = least_digits({&e.distance});
    }
    r.lengths.push_back(std::move(e));
  }
  r.output_frobenius = confirmed(a.output_frobenius, c ? &c->output_frobenius : nullptr, bits, asked);
  return r;
}

// ---------------------------------------------------------------- helpers

BigReal decomposition_tolerance(const Precision& p) { return pow(BigReal(2, 30), BigReal(-(p.bits / 2), 30)); }

bool decomposition_holds(const Quantity& error, const Precision& p) {
  if (error.enclosure) return error.enclosure->hi <= decomposition_tolerance(p);  // certified: proven
  return abs(error.value) <= decomposition_tolerance(p);
}

void verify_decomposition(const Quantity& error, const Precision& p, const std::string& what,
                          const std::string& which) {
  if (!decomposition_holds(error, p))
    throw NumericalError(what + ": Theorem 2.1 fails" + (which.empty() ? "" : " for " + which) +
                         ": the reconstruction error " + error.shown() + " exceeds the tolerance " +
                         to_sci(decomposition_tolerance(p), 2) + " at " + p.name());
}

}  // namespace sanpath

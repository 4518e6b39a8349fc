#include "sanpath/analysis/batch.hpp"

#include "sanpath/core/linalg.hpp"

#include <algorithm>

#include <atomic>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace sanpath {

namespace {

/// The values of a statistic at one working precision (the finest among
/// them), their least confirmed digits, whether any is only a bound, and
/// the least digits asked of them (printed at most).
struct Collected {
  unsigned prec = 30;
  bool bounded = false;
  std::optional<int> digits;
  std::optional<int> asked;
  std::vector<BigReal> x;
};

/// A statistic known to `digits` (nullopt: unconfirmed), printed as the
/// collected values are.
Quantity known(const BigReal& v, const std::optional<int>& digits, const Collected& c) {
  Quantity q = Quantity::unconfirmed(v);
  q.digits = digits;
  q.asked = c.asked;
  return q;
}

Collected collect(const std::vector<Quantity>& values) {
  Collected c;
  for (const Quantity& q : values) c.prec = std::max(c.prec, (q.below_resolution ? q.bound : q.value).precision());
  bool confirmed = true;
  int dmin = 1 << 30;
  for (const Quantity& q : values) {
    if (q.asked) c.asked = std::min(c.asked.value_or(*q.asked), *q.asked);
    c.bounded = c.bounded || q.below_resolution;
    if (q.below_resolution) {
      c.x.emplace_back(q.bound, c.prec);
    } else {
      c.x.emplace_back(q.value, c.prec);
      if (q.digits) dmin = std::min(dmin, *q.digits);
      else confirmed = false;
    }
  }
  if (confirmed && dmin < (1 << 30)) c.digits = dmin;
  return c;
}

/// A mean or order statistic v of the collected values: known to their
/// least digits, or, when some value is only a bound, an upper bound (every
/// value is at most its printed bound, up to the relative error of the
/// confirmed ones).
Quantity statistic_of(const BigReal& v, const Collected& c) {
  if (!c.bounded) return known(v, c.digits, c);
  const BigReal margin =
      c.digits ? BigReal(1 + pow(BigReal(10, c.prec), BigReal(1 - *c.digits, c.prec))) : BigReal(2, c.prec);
  return below_resolution(v, BigReal(v * margin));
}

}  // namespace

Quantity weighted_mean(const std::vector<Quantity>& values, const std::vector<long>& weights) {
  if (values.empty()) throw std::invalid_argument("weighted mean: no values");
  if (weights.size() != values.size())
    throw std::invalid_argument("weighted mean: " + std::to_string(values.size()) + " values but " +
                                std::to_string(weights.size()) + " weights");
  const Collected c = collect(values);
  BigReal sum(0, c.prec), total(0, c.prec);
  for (std::size_t i = 0; i < c.x.size(); ++i) {
    if (weights[i] < 1) throw std::invalid_argument("weighted mean: weight " + std::to_string(weights[i]) + " below 1");
    sum += c.x[i] * BigReal(weights[i], c.prec);
    total += BigReal(weights[i], c.prec);
  }
  return statistic_of(BigReal(sum / total), c);
}

BatchStatistic summarize(const std::vector<Quantity>& values) {
  if (values.empty()) throw std::invalid_argument("batch statistics: no values");
  BatchStatistic s;
  s.count = static_cast<long>(values.size());
  const Collected c = collect(values);
  const unsigned prec = c.prec;
  const std::vector<BigReal>& x = c.x;
  const std::optional<int>& digits = c.digits;
  const BigReal b(static_cast<long>(x.size()), prec);
  BigReal sum(0, prec);
  for (const BigReal& v : x) sum += v;
  const BigReal mean = sum / b;
  std::vector<BigReal> sorted = x;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t m = sorted.size() / 2;
  const BigReal median = sorted.size() % 2 ? sorted[m] : BigReal((sorted[m - 1] + sorted[m]) / 2);
  s.mean = statistic_of(mean, c);
  s.min = statistic_of(sorted.front(), c);
  s.median = statistic_of(median, c);
  s.max = statistic_of(sorted.back(), c);
  if (c.bounded) return s;
  if (x.size() < 2) return s;
  BigReal ss(0, prec);
  for (const BigReal& v : x) ss += (v - mean) * (v - mean);
  const BigReal sd = sqrt(ss / (b - 1));
  if (!digits) {
    s.stddev = known(sd, std::nullopt, c);
    return s;
  }
  // |δσ| ≤ sqrt(b/(b−1)) · max_i |δx_i|, |δx_i| ≤ x_i · 10^(1−d_i).
  BigReal worst(0, prec);
  for (const Quantity& q : values)
    worst = std::max(worst,
                     BigReal(abs(BigReal(q.value, prec)) * pow(BigReal(10, prec), BigReal(1 - *q.digits, prec))));
  const BigReal err = sqrt(b / (b - 1)) * worst;
  if (err == 0) {  // every value is exactly 0
    s.stddev = known(sd, digits, c);
  } else if (sd > 0 && err < sd) {
    const int d = static_cast<int>(std::floor(log10_abs(sd) - log10_abs(err))) + 1;
    s.stddev = d >= 1 ? known(sd, std::min(*digits, d), c) : below_resolution(sd, BigReal(sd + err));
  } else {
    s.stddev = below_resolution(sd, BigReal(sd + err));
  }
  return s;
}

void for_each_input(std::size_t count, int threads, const std::function<void(std::size_t)>& task) {
  const int total = resolve_threads(threads);
  const std::size_t workers = std::min(static_cast<std::size_t>(total), count);
  if (workers <= 1) {
    ProductThreadsScope cap(total);
    for (std::size_t i = 0; i < count; ++i) task(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::exception_ptr> errors(count);
  ThreadGroup group(total, static_cast<int>(workers));  // the inputs share the threads
  const auto work = [&](int index) {
    MpfrThreadCaches caches;
    ThreadGroupScope worker(group, index);
    for (;;) {
      const std::size_t i = next.fetch_add(1);
      if (i >= count || failed.load()) return;
      try {
        task(i);
      } catch (...) {
        errors[i] = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < workers; ++t)
    pool.emplace_back(work, static_cast<int>(t));
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

ProgressFn batch_progress(const ProgressFn& progress, std::size_t i, std::size_t count) {
  if (!progress) return {};
  static std::mutex lock;
  const std::string prefix = "input " + std::to_string(i + 1) + "/" + std::to_string(count) + ": ";
  return [progress, prefix](const ProgressStep& step) {
    std::lock_guard<std::mutex> guard(lock);
    progress(ProgressStep{prefix + step.stage, step.done, step.total});
  };
}

void check_batch_inputs(const Model& model, const std::vector<InputSpec>& inputs) {
  for (const InputSpec& in : inputs) {
    if (in.kind != InputSpec::Kind::tokens) continue;
    if (!model.embeddings())
      throw std::invalid_argument(in.source + ": " + model.source() +
                                  " has no embedding tables; use --input or --random-input");
    const Embeddings& e = *model.embeddings();
    if (in.tokens.empty()) throw std::invalid_argument(in.source + ": the sequence is empty");
    // Only a position table bounds the length (rotary and relative-position models have none: 0 rows).
    if (e.has_position_table() && static_cast<long>(in.tokens.size()) > e.max_positions())
      throw std::invalid_argument(in.source + ": sequence of " + std::to_string(in.tokens.size()) +
                                  " tokens is longer than the position table (" + std::to_string(e.max_positions()) +
                                  ")");
    for (std::size_t i = 0; i < in.tokens.size(); ++i)
      if (in.tokens[i] < 0 || in.tokens[i] >= e.vocab_size())
        throw std::invalid_argument(in.source + ": token " + std::to_string(i) + " has id " +
                                    std::to_string(in.tokens[i]) + ", outside the vocabulary [0, " +
                                    std::to_string(e.vocab_size()) + ") of " + model.source());
    for (std::size_t i = 0; i < in.tokens.size(); ++i)
      if (e.padding_id && in.tokens[i] == *e.padding_id)
        throw std::invalid_argument(in.source + ": token " + std::to_string(i) + " has id " +
                                    std::to_string(in.tokens[i]) + ", the padding token (pad_token_id) of " +
                                    model.source() + ", which has no position of its own; give the sequence "
                                    "without padding");
  }
}

std::vector<MeasureStatistic> summarize_measures(const std::vector<const LayerReport*>& layers) {
  std::vector<MeasureStatistic> out;
  if (layers.empty()) return out;
  for (const MeasureReport& first : layers.front()->measures) {
    std::vector<Quantity> values;
    for (const LayerReport* r : layers)
      for (const MeasureReport& m : r->measures)
        if (m.name == first.name) values.push_back(m.value);
    if (values.size() == layers.size()) out.push_back({first.name, summarize(values)});
  }
  return out;
}

BatchForwardAnalysis analyze_forward_batch(const Model& model, const Variant& variant,
                                           const std::vector<InputSpec>& inputs, const PrecisionRequest& request,
                                           Center center, int threads, const ProgressFn& progress) {
  BatchForwardAnalysis out;
  out.runs = map_inputs<ForwardAnalysis>(model, inputs, threads, progress, [&](std::size_t i, const ProgressFn& p) {
    return analyze_forward(model, variant, inputs[i], request, center, p);
  });
  for (std::size_t l = 0; l < out.runs.front().layers.size(); ++l) {
    std::vector<Quantity> values;
    std::vector<const LayerReport*> reports;
    for (const ForwardAnalysis& a : out.runs) {
      values.push_back(a.layers[l].relative_residual);
      reports.push_back(&a.layers[l]);
    }
    out.layers.push_back(summarize(values));
    out.measures.push_back(summarize_measures(reports));
  }
  return out;
}

BatchCollapseResult run_collapse_batch(const Model& model, const std::vector<InputSpec>& inputs,
                                       const PrecisionRequest& precision, CollapseConventions conventions,
                                       int threads, const ProgressFn& progress) {
  BatchCollapseResult out;
  out.conventions = conventions;
  out.runs = map_inputs<CollapseResult>(model, inputs, threads, progress, [&](std::size_t i, const ProgressFn& p) {
    return run_collapse(model, inputs[i], precision, p, conventions);
  });
  out.variants = out.runs.front().variants;  // the same for every input: they depend on the model only
  for (std::size_t v = 0; v < out.variants.size(); ++v) {
    std::vector<BatchStatistic> layers;
    std::vector<std::vector<MeasureStatistic>> measures;
    for (std::size_t l = 0; l < out.runs.front().analyses[v].layers.size(); ++l) {
      std::vector<Quantity> values;
      std::vector<const LayerReport*> reports;
      for (const CollapseResult& r : out.runs) {
        values.push_back(r.analyses[v].layers[l].relative_residual);
        reports.push_back(&r.analyses[v].layers[l]);
      }
      layers.push_back(summarize(values));
      measures.push_back(summarize_measures(reports));
    }
    out.layers.push_back(std::move(layers));
    out.measures.push_back(std::move(measures));
    if (!out.runs.front().analyses[v].emulation) continue;
    std::vector<std::optional<BatchStatistic>> emulated;
    std::vector<std::optional<int>> correct;
    for (std::size_t l = 0; l < out.runs.front().analyses[v].layers.size(); ++l) {
      std::vector<Quantity> values;
      std::optional<int> least;
      bool known = true;
      for (const CollapseResult& r : out.runs) {
        const EmulatedLayerReport& e = r.analyses[v].emulation->layers.at(l);
        if (e.non_finite) {
          known = false;
          values.clear();
          break;
        }
        values.push_back(e.relative_residual);
        for (const auto& [name, digits] : e.correct_digits)
          if (name == "relative_residual") {
            if (!digits) known = false;
            else least = std::min(least.value_or(*digits), *digits);
          }
      }
      emulated.push_back(values.empty() ? std::nullopt : std::optional<BatchStatistic>(summarize(values)));
      correct.push_back(known ? least : std::nullopt);
    }
    out.emulated.push_back(std::move(emulated));
    out.emulated_correct.push_back(std::move(correct));
  }
  return out;
}

BatchLengthSums analyze_length_sums_batch(const Model& model, const Variant& variant,
                                          const std::vector<InputSpec>& inputs, const PrecisionRequest& request,
                                          int threads, const ProgressFn& progress) {
  BatchLengthSums out;
  out.runs = map_inputs<LengthSumsReport>(model, inputs, threads, progress, [&](std::size_t i, const ProgressFn& p) {
    return analyze_length_sums(model, variant, inputs[i], request, p);
  });
  for (std::size_t k = 0; k < out.runs.front().lengths.size(); ++k) {
    std::vector<Quantity> values;
    for (const LengthSumsReport& r : out.runs) values.push_back(r.lengths[k].share);
    out.lengths.push_back(summarize(values));
  }
  std::vector<Quantity> errors;
  for (const LengthSumsReport& r : out.runs) errors.push_back(r.decomposition_error);
  out.decomposition_error = summarize(errors);
  return out;
}

BatchBounds analyze_bounds_batch(const Model& model, const Variant& variant, const std::vector<InputSpec>& inputs,
                                 const BoundsRequest& request, int threads, const ProgressFn& progress) {
  BatchBounds out;
  out.runs = map_inputs<BoundsAnalysis>(model, inputs, threads, progress, [&](std::size_t i, const ProgressFn& p) {
    return analyze_bounds(model, variant, inputs[i], request, p);
  });
  for (std::size_t l = 0; l < out.runs.front().measured.depths.size(); ++l) {
    std::vector<Quantity> values;
    for (const BoundsAnalysis& a : out.runs) values.push_back(a.measured.depths[l].relative);
    out.relative.push_back(summarize(values));
  }
  out.verdicts.resize(out.runs.front().report.depths.size());
  for (const BoundsAnalysis& a : out.runs)
    for (std::size_t l = 0; l < a.report.depths.size(); ++l) {
      VerdictCounts& c = out.verdicts[l];
      switch (a.report.depths[l].verdict) {
        case Verdict::holds: ++c.holds; break;
        case Verdict::violated: ++c.violated; break;
        case Verdict::undecided: ++c.undecided; break;
        case Verdict::not_applicable: ++c.not_applicable; break;
      }
    }
  return out;
}

}  // namespace sanpath

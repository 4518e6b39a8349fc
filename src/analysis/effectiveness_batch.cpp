// Path effectiveness over a batch: each input's own analysis (paths.cpp,
// rerun.cpp), then statistics over the inputs and predictions pooled over
// the batch.
#include "sanpath/analysis/effectiveness_batch.hpp"

#include <stdexcept>

namespace sanpath {

namespace {

/// Accumulates a task head's counts and KL values of several inputs.
struct Pool {
  long agree = 0, agree_check = 0, agree_most = 0, predictions = 0;
  bool checked = true, certified = true;
  std::vector<Quantity> kl;
  std::vector<long> weights;

  void add(long a, const std::optional<long>& check, long n, const Quantity& mean_kl, long weight,
           const std::optional<long>& most = std::nullopt) {
    agree += a;
    if (check) agree_check += *check;
    else checked = false;
    if (most) agree_most += *most;
    else certified = false;
    predictions += n;
    kl.push_back(mean_kl);
    weights.push_back(weight);
  }
  PooledAgreement result() const {
    PooledAgreement p;
    p.agree = agree;
    if (checked) p.agree_check = agree_check;
    if (certified) p.agree_most = agree_most;
    p.predictions = predictions;
    p.kl = weighted_mean(kl, weights);
    return p;
  }
};

}  // namespace

std::vector<BatchEffectivenessEntry> effectiveness_statistics(const std::vector<const EffectivenessReport*>& runs) {
  if (runs.empty()) throw std::invalid_argument("effectiveness statistics: no runs");
  std::vector<BatchEffectivenessEntry> out;
  const EffectivenessReport& first = *runs.front();
  for (std::size_t k = 0; k < first.lengths.size(); ++k) {
    BatchEffectivenessEntry e;
    e.length = first.lengths[k].length;
    e.count = first.lengths[k].count;
    std::vector<Quantity> distances;
    Pool pool;
    for (const EffectivenessReport* r : runs) {
      const EffectivenessEntry& x = r->lengths[k];
      distances.push_back(x.distance);
      if (r->head) pool.add(*x.agree, x.agree_check, r->predictions, *x.kl, r->predictions, x.agree_most);
    }
    e.distance = summarize(distances);
    if (first.head) e.head = pool.result();
    out.push_back(std::move(e));
  }
  return out;
}

BatchEffectiveness analyze_effectiveness_batch(const Model& model, const Variant& variant,
                                               const std::vector<InputSpec>& inputs, const PrecisionRequest& request,
                                               const TaskHead* head, int threads, const ProgressFn& progress) {
  BatchEffectiveness out;
  out.runs = map_inputs<EffectivenessReport>(model, inputs, threads, progress,
                                             [&](std::size_t i, const ProgressFn& p) {
                                               return analyze_effectiveness(model, variant, inputs[i], request, head, p);
                                             });
  std::vector<const EffectivenessReport*> runs;
  for (const EffectivenessReport& r : out.runs) runs.push_back(&r);
  out.lengths = effectiveness_statistics(runs);
  return out;
}

std::uint64_t rerun_input_seed(std::uint64_t seed, std::size_t index) {
  return seed + static_cast<std::uint64_t>(index) * 0xD1B54A32D192ED03ULL;
}

BatchRerun analyze_rerun_batch(const Model& model, const Variant& variant, const std::vector<InputSpec>& inputs,
                               const PrecisionRequest& request, const RerunRequest& rerun, const TaskHead* head,
                               const ProgressFn& progress) {
  if (rerun.threads < 0) throw std::invalid_argument("re-run: threads: " + std::to_string(rerun.threads) + " is negative");
  BatchRerun out;
  out.request = rerun;
  for (std::size_t i = 0; i < inputs.size(); ++i) out.seeds.push_back(rerun_input_seed(rerun.seed, i));
  out.runs = map_inputs<RerunReport>(model, inputs, rerun.threads, progress, [&](std::size_t i, const ProgressFn& p) {
    RerunRequest one = rerun;
    one.seed = out.seeds[i];
    one.threads = inputs.size() > 1 ? 1 : rerun.threads;  // the inputs are the parallelism
    return analyze_rerun(model, variant, inputs[i], request, one, head, p);
  });
  const RerunReport& first = out.runs.front();
  if (first.exact) {
    std::vector<const EffectivenessReport*> exact;
    for (const RerunReport& r : out.runs) exact.push_back(&*r.exact);
    out.exact = effectiveness_statistics(exact);
  }
  for (std::size_t k = 0; k < first.lengths.size(); ++k) {
    BatchRerunEntry e;
    const RerunEntry& f = first.lengths[k];
    e.length = f.length;
    e.count = f.count;
    e.all_paths = f.all_paths;
    e.evaluated = f.evaluated;
    std::vector<Quantity> distances, gaps;
    Pool pool;
    for (const RerunReport& r : out.runs) {
      const RerunEntry& x = r.lengths[k];
      distances.push_back(x.distance.mean);
      if (x.gap) gaps.push_back(x.gap->mean);
      if (!r.head) continue;
      const long repeats = static_cast<long>(x.agree.size());
      long agree = 0, check = 0, most = 0;
      for (long a : x.agree) agree += a;
      for (long a : x.agree_check) check += a;
      for (long a : x.agree_most) most += a;
      pool.add(agree, x.agree_check.empty() ? std::nullopt : std::optional<long>(check), repeats * r.predictions,
               x.kl->mean, repeats * r.predictions,
               x.agree_most.empty() ? std::nullopt : std::optional<long>(most));
    }
    e.distance = summarize(distances);
    if (!gaps.empty()) e.gap = summarize(gaps);
    if (first.head) e.head = pool.result();
    out.lengths.push_back(std::move(e));
  }
  return out;
}

}  // namespace sanpath

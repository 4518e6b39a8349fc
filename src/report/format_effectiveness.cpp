// Formatting of path effectiveness (exact and re-run senses), for one input
// and over a batch, as JSON, CSV and tables. No mathematics here: every
// number is already a Quantity, a statistic or an exact count.
#include "sanpath/report/format.hpp"
#include "report/json_parts.hpp"
#include "report/path_parts.hpp"
#include "report/provenance_text.hpp"
#include "report/text_table.hpp"
#include "sanpath/analysis/effectiveness_batch.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/rerun.hpp"
#include "report/model_line.hpp"

#include <nlohmann/json.hpp>

#include <sstream>

namespace sanpath {

using nlohmann::ordered_json;

namespace {

using json_parts::model_json;
using json_parts::variant_json;
using path_parts::add_common;
using text_table::digits_text;
using path_parts::digits_value;
using path_parts::header_text;
using path_parts::intervals;
using text_table::pad;

}  // namespace

}  // namespace sanpath

// ---------------------------------------------------------- effectiveness

namespace sanpath {

namespace {

/// {"distance", "agree", "agree_check", "agree_most", "kl", "digits"} of one exact truncation, and a
/// certified run's "intervals" of distance and kl.
ordered_json exact_effectiveness_json(const EffectivenessEntry& e) {
  const auto optional_long = [](const std::optional<long>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); };
  ordered_json j{{"distance", e.distance.str()},
                 {"agree", optional_long(e.agree)},
                 {"agree_check", optional_long(e.agree_check)},
                 {"agree_most", optional_long(e.agree_most)},
                 {"kl", e.kl ? ordered_json(e.kl->str()) : ordered_json(nullptr)},
                 {"digits", digits_value(e.digits)}};
  if (e.distance.enclosure)
    j["intervals"] = e.kl ? intervals({{"distance", &e.distance}, {"kl", &*e.kl}}) : intervals({{"distance", &e.distance}});
  return j;
}

/// "head": {"kind", "outputs", "predictions"} of a task head into `j`, or "head": null and "head_note": why
/// there is none (the line the table prints).
void add_head(ordered_json& j, const std::optional<TaskHeadKind>& head, long outputs, long predictions,
              TaskHeadAbsence absent) {
  if (head) {
    j["head"] = {{"kind", to_string(*head)}, {"outputs", outputs}, {"predictions", predictions}};
    return;
  }
  j["head"] = nullptr;
  j["head_note"] = task_head_note(absent);
}

/// The line naming the task head and what `meaning` its columns have, or that there is none.
std::string head_text(const std::optional<TaskHeadKind>& head, long outputs, long predictions,
                      const std::string& meaning, TaskHeadAbsence absent) {
  std::ostringstream o;
  if (head)
    o << "task head: " << to_string(*head) << " (" << outputs
      << (*head == TaskHeadKind::classifier ? " classes" : " tokens") << "), " << predictions
      << (predictions == 1 ? " prediction" : " predictions") << "; " << meaning << "\n";
  else
    o << "task head: " << task_head_note(absent) << "\n";
  return o.str();
}

std::string agreement_text(const EffectivenessEntry& e, long predictions) {
  return text_table::agreement_text(*e.agree, e.agree_check, e.agree_most, predictions);
}

}  // namespace

std::string task_head_note(TaskHeadAbsence why) {
  if (why == TaskHeadAbsence::reads_decoder)
    return "none of its own (a T5 encoder: T5's LM head reads the decoder's output, which sanpath does not run)";
  if (why == TaskHeadAbsence::declined) return "none applied (the call asked for none)";
  return "none in the file (sanpath reads the sequence classifiers of BERT, RoBERTa, DistilBERT and ALBERT, ViT's "
         "LayerNorm + classifier, and the LM heads of GPT-2, GPT-NeoX, OPT, Phi, Llama, Mistral, Qwen2, Qwen3, "
         "Gemma, Gemma 2, Gemma 3 and XLNet)";
}

std::string format_effectiveness(const EffectivenessReport& r, const Model& model, const RunInfo& info, Format f) {
  if (f == Format::json) {
    ordered_json j;
    ordered_json rows = ordered_json::array();
    for (const EffectivenessEntry& e : r.lengths) {
      ordered_json row{{"length", e.length}, {"paths", e.count}};
      row.update(exact_effectiveness_json(e));
      rows.push_back(row);
    }
    j["effectiveness"] = rows;
    add_head(j, r.head, r.outputs, r.predictions, info.head_absence);
    j["output_norm"] = {{"frobenius", r.output_frobenius.str()}};
    add_common(j, r, model, info);
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "length,paths,distance,agree,agree_most,predictions,kl,digits\n";
    for (const EffectivenessEntry& e : r.lengths)
      o << e.length << ',' << e.count << ',' << e.distance.str() << ',' << (e.agree ? std::to_string(*e.agree) : "")
        << ',' << (e.agree_most ? std::to_string(*e.agree_most) : "") << ','
        << (r.head ? std::to_string(r.predictions) : "") << ',' << (e.kl ? e.kl->str() : "") << ','
        << (e.digits ? std::to_string(*e.digits) : "") << '\n';
    return o.str();
  }
  o << "Path effectiveness: X_{≤k} = Σ_{j≤k} S_j + 1bᵀ keeps the paths of length ≤ k (attention frozen, exact)\n";
  o << header_text(r, model, info);
  o << "distance = ‖X_{≤k} − X^L‖_F / ‖X^L‖_F with ‖X^L‖_F = " << r.output_frobenius.shown() << "\n";
  o << head_text(r.head, r.outputs, r.predictions,
                 std::string("agree = argmax on X_{≤k} equal to argmax on X^L") +
                     (r.check_method == CheckMethod::certified
                          ? " (\"a to b\": a proven, b possible, the others' argmax undecided)"
                          : "") +
                     "; KL = mean KL(p(X^L) ‖ p(X_{≤k}))",
                 info.head_absence);
  o << "\n" << pad("length", 8) << pad("distance", 26);
  if (r.head) o << pad("agree", 14) << pad("KL", 26);
  o << pad("digits", 13) << "paths of length ≤ k (exact)\n";
  for (const EffectivenessEntry& e : r.lengths) {
    o << pad(std::to_string(e.length), 8) << pad(e.distance.shown(), 26);
    if (r.head) o << pad(agreement_text(e, r.predictions), 14) << pad(e.kl->shown(), 26);
    o << pad(digits_text(text_table::shown_least(e.digits, e.distance)), 13) << e.count << "\n";
  }
  bool cut = false;
  for (const EffectivenessEntry& e : r.lengths)
    cut = cut || text_table::cut(e.distance) || (e.kl && text_table::cut(*e.kl));
  if (!r.lengths.empty()) o << text_table::cut_note(cut, r.lengths.front().distance);
  return text_table::trim_line_ends(o.str());
}

}  // namespace sanpath

// ------------------------------------------------------------------ re-run

namespace sanpath {

namespace {

/// Widths of the columns of a two-senses table that differ between one input and a batch.
struct RerunWidths {
  std::size_t exact_distance, exact_agree, rerun_agree, rerun_kl;
};

/// The header row of a two-senses table (after a blank line).
void rerun_header(std::ostringstream& o, bool exact, bool head, const RerunWidths& w) {
  o << "\n" << pad("length", 8);
  if (exact) o << pad("exact distance", w.exact_distance);
  o << pad("re-run distance", 34);
  if (exact) o << pad("gap", 34);
  if (head) {
    if (exact) o << pad("exact agree", w.exact_agree);
    o << pad("re-run agree", w.rerun_agree);
    if (exact) o << pad("exact KL", 26);
    o << pad("re-run KL", w.rerun_kl);
  }
  o << pad("paths run", 11) << "paths of length k\n";
}

/// A certified run's re-run fields: per repetition, the predictions that
/// may agree and the enclosures [lo, hi] of distance, KL and gap.
ordered_json certified_rerun_json(const RerunEntry& e) {
  const auto each = [](const std::vector<Quantity>& qs) {
    if (qs.empty()) return ordered_json(nullptr);
    ordered_json a = ordered_json::array();
    for (const Quantity& q : qs) {
      const auto t = enclosure_text(q);
      a.push_back(t ? ordered_json{t->first, t->second} : ordered_json(nullptr));
    }
    return a;
  };
  return {{"agree_most", e.agree_most.empty() ? ordered_json(nullptr) : ordered_json(e.agree_most)},
          {"intervals", {{"distance", each(e.distance_each)}, {"kl", each(e.kl_each)}, {"gap", each(e.gap_each)}}}};
}

const char* const rerun_estimator_text =
    "a sub-network per path: a layer where the path takes head h runs with head h alone (its attention recomputed "
    "from the path's own states), then the variant's LayerNorm and MLP, without the skip term; a skipped layer is the "
    "identity. Length k: every path once when count_k <= N, else N uniform paths with replacement scaled by "
    "count_k/N (unbiased). Attention-only variants: no value/output biases inside the sub-networks, the bias term 1b^T "
    "added once; other variants: every sub-network carries its layers' biases";

const char* const rerun_batch_text =
    "input i draws with seed + i*0xD1B54A32D192ED03 (mod 2^64); distance and gap: statistics over the inputs of each "
    "input's mean over its repetitions; agree: counted over inputs x repetitions x predictions; kl: mean over those "
    "predictions";

}  // namespace

std::string format_rerun(const RerunReport& r, const Model& model, const RunInfo& info, Format f) {
  const EffectivenessEntry* no_exact = nullptr;
  const auto exact_at = [&](std::size_t k) { return r.exact ? &r.exact->lengths[k] : no_exact; };
  if (f == Format::json) {
    using json_parts::statistic_json;
    ordered_json rows = ordered_json::array();
    for (std::size_t k = 0; k < r.lengths.size(); ++k) {
      const RerunEntry& e = r.lengths[k];
      const EffectivenessEntry* x = exact_at(k);
      ordered_json row;
      row["length"] = e.length;
      row["paths"] = e.count;
      row["paths_run"] = e.evaluated;
      row["all_paths"] = e.all_paths;
      row["exact"] = x ? exact_effectiveness_json(*x) : ordered_json(nullptr);
      row["rerun"] = {{"distance", statistic_json(e.distance)},
                      {"gap", e.gap ? statistic_json(*e.gap) : ordered_json(nullptr)},
                      {"agree", e.agree.empty() ? ordered_json(nullptr) : ordered_json(e.agree)},
                      {"agree_check", e.agree_check.empty() ? ordered_json(nullptr) : ordered_json(e.agree_check)},
                      {"kl", e.kl ? statistic_json(*e.kl) : ordered_json(nullptr)}};
      if (r.check_method == CheckMethod::certified) row["rerun"].update(certified_rerun_json(e));
      rows.push_back(row);
    }
    ordered_json j;
    j["effectiveness"] = rows;
    j["rerun"] = {{"samples", r.request.samples},
                  {"repeats", r.request.repeats},
                  {"seed", r.request.seed},
                  {"estimator", rerun_estimator_text}};
    j["exact"] = r.exact.has_value();
    add_head(j, r.head, r.outputs, r.predictions, info.head_absence);
    j["output_norm"] = {{"frobenius", r.output_frobenius.str()}};
    add_common(j, r, model, info);
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "length,paths,paths_run,exact_distance,rerun_distance_mean,rerun_distance_stddev,gap_mean,exact_agree,"
         "rerun_agree_mean,predictions,exact_kl,rerun_kl_mean\n";
    for (std::size_t k = 0; k < r.lengths.size(); ++k) {
      const RerunEntry& e = r.lengths[k];
      const EffectivenessEntry* x = exact_at(k);
      o << e.length << ',' << e.count << ',' << e.evaluated << ',' << (x ? x->distance.str() : "") << ','
        << e.distance.mean.str() << ',' << (e.distance.stddev ? e.distance.stddev->str() : "") << ','
        << (e.gap ? e.gap->mean.str() : "") << ',' << (x && x->agree ? std::to_string(*x->agree) : "") << ','
        << (e.agree.empty() ? "" : text_table::mean_agreement_text(e.agree, {}, e.agree_most, r.predictions)) << ','
        << (r.head ? std::to_string(r.predictions) : "") << ',' << (x && x->kl ? x->kl->str() : "") << ','
        << (e.kl ? e.kl->mean.str() : "") << '\n';
    }
    return o.str();
  }
  o << "Path effectiveness in two senses: how much of the model is in its paths of length ≤ k\n";
  o << header_text(r, model, info);
  o << "exact: X_{≤k} = Σ_{j≤k} S_j + 1bᵀ, attention frozen (math.md §4)"
    << (r.exact ? "" : " — not for this variant: attention-only variants only (--mlp none --layernorm none)") << "\n";
  o << "re-run (the paper's code): X̂_{≤k} = Σ_{j≤k} Ŝ_j" << (r.exact ? " + 1bᵀ" : "")
    << ", Ŝ_j = count_j/N · Σ of N sampled paths re-run as sub-networks with their own attention; N = "
    << r.request.samples << ", " << r.request.repeats << (r.request.repeats == 1 ? " repetition" : " repetitions")
    << ", seed " << r.request.seed << ", at the working precision above\n";
  o << "distance = ‖X_{≤k} − X^L‖_F / ‖X^L‖_F with ‖X^L‖_F = " << r.output_frobenius.shown()
    << "; re-run cells: mean ± sample std over the repetitions ["
    << (r.check_method == CheckMethod::certified ? "digits of the mean printed, from each repetition's proven digits"
                                                 : "digits of the mean printed, each confirmed")
    << "]"
    << (r.exact ? "; gap = ‖X̂_{≤k} − X_{≤k}‖_F / ‖X^L‖_F" : "") << "\n";
  o << head_text(r.head, r.outputs, r.predictions,
                 "agree = argmax equal to argmax on X^L (re-run: mean over repetitions); KL = mean KL(p(X^L) ‖ p(·))",
                 info.head_absence);
  rerun_header(o, r.exact.has_value(), r.head.has_value(), {26, 13, 18, 34});
  for (std::size_t k = 0; k < r.lengths.size(); ++k) {
    const RerunEntry& e = r.lengths[k];
    const EffectivenessEntry* x = exact_at(k);
    o << pad(std::to_string(e.length), 8);
    if (x) o << pad(x->distance.shown(), 26);
    o << pad(mean_std_cell(e.distance), 34);
    if (r.exact) o << pad(e.gap ? mean_std_cell(*e.gap) : "", 34);
    if (r.head) {
      if (x) o << pad(agreement_text(*x, r.predictions), 13);
      o << pad(text_table::mean_agreement_text(e.agree, e.agree_check, e.agree_most, r.predictions), 18);
      if (x) o << pad(x->kl->shown(), 26);
      o << pad(mean_std_cell(*e.kl), 34);
    }
    o << pad(std::to_string(e.evaluated) + (e.all_paths ? " (all)" : ""), 11) << e.count << "\n";
  }
  return text_table::trim_line_ends(o.str());
}

}  // namespace sanpath


// ------------------------------------------------------- over a batch

namespace sanpath {

namespace {

/// "14/16" pooled over the batch, with the check runs' when it differs.
std::string pooled_agreement_text(const PooledAgreement& p) {
  return text_table::agreement_text(p.agree, p.agree_check, p.agree_most, p.predictions);
}

/// {"agree", "agree_check", "agree_most", "predictions", "kl", "kl_digits"} of a pooled head, or null.
ordered_json pooled_json(const std::optional<PooledAgreement>& p) {
  if (!p) return nullptr;
  return {{"agree", p->agree},
          {"agree_check", p->agree_check ? ordered_json(*p->agree_check) : ordered_json(nullptr)},
          {"agree_most", p->agree_most ? ordered_json(*p->agree_most) : ordered_json(nullptr)},
          {"predictions", p->predictions},
          {"kl", p->kl.str()},
          {"kl_digits", digits_value(p->kl.digits)}};
}

/// The lines every batch of effectiveness prints first: title, model, input,
/// variant, the precisions of the inputs.
template <class Run>
std::string batch_header(const std::string& title, const std::vector<Run>& runs, const PathReportBase& first,
                         const Model& model, const RunInfo& info) {
  std::vector<long> bits;
  bool confirmed = true, proven = true;
  for (const Run& r : runs) {
    bits.push_back(provenance_text::bits_of(r.precision));
    confirmed = confirmed && r.check.has_value();
    proven = proven && r.check_method == CheckMethod::certified;
  }
  std::ostringstream o;
  o << title << " over a batch of " << runs.size() << " inputs\n";
  o << report_text::model_line(info.model, model.arch());
  o << "input: " << info.input << "\n";
  o << "variant: " << to_string(first.variant) << "\n";
  o << json_parts::batch_precision_range(bits, confirmed, proven) << "\n";
  return o.str();
}

/// The JSON fields every batch of effectiveness starts with.
ordered_json batch_json_start(std::size_t b, const PathReportBase& first, const Model& model, const RunInfo& info) {
  ordered_json j;
  j["model"] = model_json(model, info);
  j["input"] = info.input;
  j["batch"] = b;
  j["variant"] = variant_json(first.variant);
  j["statistics"] = json_parts::statistics_text;
  return j;
}

/// Predictions of the task head on one truncation of every input (0 without a head).
template <class Run>
long batch_predictions(const std::vector<Run>& runs) {
  long n = 0;
  for (const Run& r : runs) n += r.head ? r.predictions : 0;
  return n;
}

const char* const pooled_text =
    "agree = argmax on the truncation equal to argmax on X^L, counted over every prediction of the batch; KL = mean "
    "KL(p(X^L) ‖ p(·)) over those predictions";

}  // namespace

std::string format_effectiveness_batch(const BatchEffectiveness& b, const std::vector<InputSpec>& inputs,
                                       const Model& model, const RunInfo& info, Format f) {
  using json_parts::statistic_json;
  const EffectivenessReport& first = b.runs.front();
  if (f == Format::json) {
    ordered_json j = batch_json_start(b.runs.size(), first, model, info);
    add_head(j, first.head, first.outputs, batch_predictions(b.runs), info.head_absence);
    ordered_json rows = ordered_json::array();
    for (const BatchEffectivenessEntry& e : b.lengths)
      rows.push_back({{"length", e.length},
                      {"paths", e.count},
                      {"distance", statistic_json(e.distance)},
                      {"head", pooled_json(e.head)}});
    j["effectiveness"] = rows;
    j["inputs"] = json_parts::each_input_json(b.runs, inputs, info, [&](const EffectivenessReport& r, const RunInfo& i) {
      return format_effectiveness(r, model, i, Format::json);
    });
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "length,paths,distance_mean,distance_stddev,distance_min,distance_median,distance_max,distance_digits,agree,"
         "predictions,kl\n";
    for (const BatchEffectivenessEntry& e : b.lengths) {
      const BatchStatistic& s = e.distance;
      o << e.length << ',' << e.count << ',' << s.mean.str() << ',' << (s.stddev ? s.stddev->str() : "") << ','
        << s.min.str() << ',' << s.median.str() << ',' << s.max.str() << ','
        << (s.mean.digits ? std::to_string(*s.mean.digits) : "") << ',' << (e.head ? std::to_string(e.head->agree) : "")
        << ',' << (e.head ? std::to_string(e.head->predictions) : "") << ',' << (e.head ? e.head->kl.str() : "")
        << '\n';
    }
    return o.str();
  }
  o << batch_header("Path effectiveness: X_{≤k} = Σ_{j≤k} S_j + 1bᵀ keeps the paths of length ≤ k (attention frozen, "
                    "exact),",
                    b.runs, first, model, info);
  o << "distance = ‖X_{≤k} − X^L‖_F / ‖X^L‖_F of each input; " << json_parts::statistics_text
    << "; digits of the mean in brackets\n";
  o << head_text(first.head, first.outputs, batch_predictions(b.runs), pooled_text, info.head_absence);
  o << "\n" << pad("length", 8) << pad("distance (mean ± std)", 34) << pad("min", 14) << pad("median", 14)
    << pad("max", 14);
  if (first.head) o << pad("agree", 16) << pad("KL", 26);
  o << "paths of length ≤ k (exact)\n";
  for (const BatchEffectivenessEntry& e : b.lengths) {
    o << pad(std::to_string(e.length), 8) << pad(mean_std_cell(e.distance), 34);
    for (const std::string& c : json_parts::min_median_max_cells(e.distance)) o << pad(c, 14);
    if (e.head) o << pad(pooled_agreement_text(*e.head), 16) << pad(e.head->kl.shown(), 26);
    o << e.count << "\n";
  }
  o << "\nevery input's own values (and the unabridged statistics) in --format json\n";
  return text_table::trim_line_ends(o.str());
}

std::string format_rerun_batch(const BatchRerun& b, const std::vector<InputSpec>& inputs, const Model& model,
                               const RunInfo& info, Format f) {
  using json_parts::statistic_json;
  const RerunReport& first = b.runs.front();
  const auto exact_at = [&](std::size_t k) -> const BatchEffectivenessEntry* {
    return b.exact ? &(*b.exact)[k] : nullptr;
  };
  const long predictions = batch_predictions(b.runs);
  if (f == Format::json) {
    ordered_json j = batch_json_start(b.runs.size(), first, model, info);
    j["rerun"] = {{"samples", b.request.samples},
                  {"repeats", b.request.repeats},
                  {"seed", b.request.seed},
                  {"input_seeds", b.seeds},
                  {"estimator", rerun_estimator_text},
                  {"over_the_batch", rerun_batch_text}};
    j["exact"] = b.exact.has_value();
    add_head(j, first.head, first.outputs, batch_predictions(b.runs), info.head_absence);
    ordered_json rows = ordered_json::array();
    for (std::size_t k = 0; k < b.lengths.size(); ++k) {
      const BatchRerunEntry& e = b.lengths[k];
      const BatchEffectivenessEntry* x = exact_at(k);
      ordered_json row;
      row["length"] = e.length;
      row["paths"] = e.count;
      row["paths_run"] = e.evaluated;
      row["all_paths"] = e.all_paths;
      row["exact"] = x ? ordered_json({{"paths", x->count}, {"distance", statistic_json(x->distance)},
                                       {"head", pooled_json(x->head)}})
                       : ordered_json(nullptr);
      row["rerun"] = {{"distance", statistic_json(e.distance)},
                      {"gap", e.gap ? statistic_json(*e.gap) : ordered_json(nullptr)},
                      {"head", pooled_json(e.head)}};
      rows.push_back(row);
    }
    j["effectiveness"] = rows;
    j["inputs"] = json_parts::each_input_json(b.runs, inputs, info, [&](const RerunReport& r, const RunInfo& i) {
      return format_rerun(r, model, i, Format::json);
    });
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "length,paths,paths_run,exact_distance_mean,exact_distance_stddev,rerun_distance_mean,rerun_distance_stddev,"
         "gap_mean,exact_agree,exact_predictions,rerun_agree,rerun_predictions,exact_kl,rerun_kl\n";
    for (std::size_t k = 0; k < b.lengths.size(); ++k) {
      const BatchRerunEntry& e = b.lengths[k];
      const BatchEffectivenessEntry* x = exact_at(k);
      const auto sd = [](const BatchStatistic& s) { return s.stddev ? s.stddev->str() : std::string(); };
      o << e.length << ',' << e.count << ',' << e.evaluated << ',' << (x ? x->distance.mean.str() : "") << ','
        << (x ? sd(x->distance) : "") << ',' << e.distance.mean.str() << ',' << sd(e.distance) << ','
        << (e.gap ? e.gap->mean.str() : "") << ',' << (x && x->head ? std::to_string(x->head->agree) : "") << ','
        << (x && x->head ? std::to_string(x->head->predictions) : "") << ','
        << (e.head ? std::to_string(e.head->agree) : "") << ',' << (e.head ? std::to_string(e.head->predictions) : "")
        << ',' << (x && x->head ? x->head->kl.str() : "") << ',' << (e.head ? e.head->kl.str() : "") << '\n';
    }
    return o.str();
  }
  o << batch_header("Path effectiveness in two senses (how much of the model is in its paths of length ≤ k),", b.runs,
                    first, model, info);
  o << "exact: X_{≤k} = Σ_{j≤k} S_j + 1bᵀ, attention frozen (math.md §4)"
    << (b.exact ? "" : " — not for this variant: attention-only variants only (--mlp none --layernorm none)") << "\n";
  o << "re-run (the paper's code): X̂_{≤k} = Σ_{j≤k} Ŝ_j" << (b.exact ? " + 1bᵀ" : "")
    << ", Ŝ_j = count_j/N · Σ of N sampled paths re-run as sub-networks with their own attention; N = "
    << b.request.samples << ", " << b.request.repeats << (b.request.repeats == 1 ? " repetition" : " repetitions")
    << " per input, seed " << b.request.seed << " (input i: seed + i·0xD1B54A32D192ED03)\n";
  o << "distance = ‖X_{≤k} − X^L‖_F / ‖X^L‖_F" << (b.exact ? ", gap = ‖X̂_{≤k} − X_{≤k}‖_F / ‖X^L‖_F" : "")
    << "; cells: mean ± sample std over the inputs ["
    << (first.check_method == CheckMethod::certified ? "digits of the mean printed, from each input's proven digits"
                                                     : "digits of the mean printed, each confirmed")
    << "], a re-run input entering with its mean over the repetitions\n";
  o << head_text(first.head, first.outputs, predictions,
                 std::string(pooled_text) + " (re-run: over inputs × repetitions)", info.head_absence);
  rerun_header(o, b.exact.has_value(), first.head.has_value(), {34, 16, 16, 26});
  for (std::size_t k = 0; k < b.lengths.size(); ++k) {
    const BatchRerunEntry& e = b.lengths[k];
    const BatchEffectivenessEntry* x = exact_at(k);
    o << pad(std::to_string(e.length), 8);
    if (x) o << pad(mean_std_cell(x->distance), 34);
    o << pad(mean_std_cell(e.distance), 34);
    if (b.exact) o << pad(e.gap ? mean_std_cell(*e.gap) : "", 34);
    if (e.head) {
      if (x) o << pad(pooled_agreement_text(*x->head), 16);
      o << pad(pooled_agreement_text(*e.head), 16);
      if (x) o << pad(x->head->kl.shown(), 26);
      o << pad(e.head->kl.shown(), 26);
    }
    o << pad(std::to_string(e.evaluated) + (e.all_paths ? " (all)" : ""), 11) << e.count << "\n";
  }
  o << "\nevery input's own values (and the unabridged statistics) in --format json\n";
  return text_table::trim_line_ends(o.str());
}

}  // namespace sanpath

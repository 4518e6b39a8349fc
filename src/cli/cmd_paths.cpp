#include "common.hpp"

#include "sanpath/core/linalg.hpp"  // product_threads: the --threads setting

#include "sanpath/core/errors.hpp"
#include "sanpath/analysis/effectiveness_batch.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/rerun.hpp"
#include "sanpath/io/task_head.hpp"

namespace sanpath::cli {

namespace {

/// "a:b" -> {a, b}; a single number k -> {k, k}.
std::pair<int, int> parse_length_range(const std::string& text, const std::string& option) {
  const auto number = [&](const std::string& t) {
    std::size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (t.empty() || used != t.size() || v < 0)
      throw UsageError(option + ": '" + text + "' is not a length range a:b of non-negative integers");
    return v;
  };
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos) {
    const int k = number(text);
    return {k, k};
  }
  const int a = number(text.substr(0, colon)), b = number(text.substr(colon + 1));
  if (a > b) throw UsageError(option + ": '" + text + "': the first length exceeds the second");
  return {a, b};
}

}  // namespace

void register_paths(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "paths", "Path decomposition (Theorem 2.1): path terms, their sums by length, or random paths, with digits");
  struct Opts {
    ModelOptions model;
    InputOptions input;
    VariantOptions variant;
    PrecisionOptions precision;
    OutputOptions out;
    bool enumerate = false, sums = false, effectiveness = false, verify = false;
    std::string check_text;  ///< --check's value: empty (or "true") when given alone, the old spelling of --verify-decomposition
    std::uint64_t sample = 0, rerun = 0;
    int repeats = 5;
    int length = -1;
    std::string lengths, heads_per_layer;
    std::size_t top = 0;
    std::uint64_t limit = 1000000;
  };
  auto o = std::make_shared<Opts>();
  o->model.add(*cmd);
  o->input.add(*cmd, true, true);
  // One --seed for the random input and the path sampling (the input
  // group's own --seed needs --random-input).
  cmd->remove_option(cmd->get_option("--seed"));
  auto* seed = cmd->add_option("--seed", o->input.seed,
                               "seed of the random input (--random-input) and of the path sampling (--sample, --rerun)")
                   ->default_val(0)
                   ->check(unsigned_integer);
  o->variant.add(*cmd);
  o->precision.add(*cmd);

  auto* mode = cmd->add_option_group("mode", "what to compute: exactly one of these");
  mode->add_flag("--enumerate", o->enumerate,
                 "every path term T = P_path X W_path passing the filters: ‖T‖, ‖res(T)‖, ‖res(P_path)‖");
  mode->add_flag("--sums", o->sums,
                 "the sum S_k of all terms of each length k = 0..L (no enumeration, any size) and Theorem 2.1's "
                 "reconstruction error");
  mode->add_flag("--effectiveness", o->effectiveness,
                 "the network truncated to paths of length ≤ k, k = 0..L: distance to X^L and, with the "
                 "checkpoint's task head (every family's but the T5 encoder's), prediction agreement and KL");
  auto* sample = mode->add_option(
      "--sample", o->sample, "N: N uniform random paths per length, mean and 95% CI of ‖T‖_{1,∞} and ‖res(T)‖_{1,∞}")
                     ->check(unsigned_integer);
  mode->require_option(1);
  auto* rerun = cmd->add_option(
      "--rerun", o->rerun,
      "--effectiveness, N: also the paper's own procedure, for every variant: per length k, N paths (every path "
      "when count_k <= N) re-run as sub-networks with their own attention, summed as count_k/N · Σ (unbiased); "
      "mean and spread over --repeats draws, and the gap to the exact sense (default: none, the exact sense only)")
                    ->check(unsigned_integer);
  auto* repeats = cmd->add_option("--repeats", o->repeats, "--rerun: R repetitions with different draws (seeded by --seed)")
                      ->default_val(5)
                      ->needs(rerun);

  auto* length =
      cmd->add_option("--length", o->length, "--enumerate/--sample: only paths of this length (default: every length)");
  auto* lengths =
      cmd->add_option("--lengths", o->lengths, "--enumerate: only lengths a..b, given as a:b (default: every length)");
  length->excludes(lengths);
  auto* heads = cmd->add_option("--heads-per-layer", o->heads_per_layer,
                                "--enumerate: allowed choices per layer, L entries separated by '/', each a comma "
                                "list of 0-based heads, 'skip' or '*' (e.g. '0,1/*/skip,3'; default: all)");
  auto* top =
      cmd->add_option("--top", o->top, "--enumerate: only the K paths of largest ‖T‖_{1,∞} (0: all)")
                        ->default_val(0)
                        ->check(unsigned_integer);
  auto* limit = cmd->add_option("--limit", o->limit,
                                "--enumerate without --top: refuse (exit code 5) when more paths than this pass the filters "
                                "(--top searches by branch and bound without visiting every path)")
                    ->default_val(1000000)
                    ->check(unsigned_integer);
  // --check's value is optional to the parser only so that the old bare `--check` gets a message naming
  // --verify-decomposition (the callback refuses it).
  auto* check =
      cmd->add_option(
             "--check", o->check_text,
             PrecisionOptions::check_help(
                 "paths takes auto or mpfr (both a run one tier up) and, with --sums, --enumerate (--top too) or "
                 "--effectiveness (with or without --rerun), certified; rounding is refused: a path analysis is no "
                 "double forward pass (default: auto). certified: the direct pass, the sums, the path terms, the "
                 "re-run sub-networks and the truncations' task head run in ball arithmetic, JSON gives each row's "
                 "\"intervals\" [lo, hi], the reconstruction error (and the distance at k = L) is the upper end of "
                 "its enclosure (its exact value is 0), --verify-decomposition is then a proof, and an agreement "
                 "count reads \"a to b\" where the logits' enclosures leave b − a argmaxes undecided. The paths of "
                 "--top are selected at the tier the enclosures start at (named in the output)"))
          ->expected(0, 1);
  cmd->add_flag("--verify-decomposition", o->verify,
                "verify Theorem 2.1 (default: off): exit code 4 unless the reconstruction error is at most "
                "2^-(bits/2) (--sums, or --enumerate of every path; with --check certified the error's enclosure "
                "bounds it, a proof)");
  o->out.add(*cmd);
  cmd->footer(
      "\nThe attention matrices P_h^l of the forward pass are frozen; for attention-only variants (--mlp none "
      "--layernorm none; skip on or off) X^L = Σ_paths P_path X W_path + 1bᵀ exactly. A path picks a head (or, with "
      "skip, the skip connection) per layer; its length is the number of heads picked. Every number is computed "
      "at the working precision and again one tier higher; 'digits' counts the agreeing significant digits, and "
      "values that do not agree print as '< 1e-N'. Counts are exact; JSON heads are 0-based, null = skip. --top searches "
      "by branch and bound (the same K as a full walk, at any size). --effectiveness reads the checkpoint's task head "
      "(the sequence classifiers of BERT, RoBERTa, DistilBERT and ALBERT, ViT's LayerNorm + classifier on CLS, the "
      "decoders' and XLNet's final norm + LM head; docs/families.md) from its safetensors files. "
      "--effectiveness --rerun N adds the paper's procedure for any variant: a sub-network per path runs, in each "
      "layer where the path takes head h, head h alone with its attention recomputed from the path's own states, "
      "then the variant's LayerNorm and MLP "
      "(no skip term: the skip is the path's other branch); a skipped layer is the identity. Length k sums every path "
      "when count_k = C(L,k)·H^k <= N, otherwise N uniform draws with replacement times count_k/N. Attention-only "
      "variants: the sub-networks carry no value/output biases and the bias term 1bᵀ is added once (so all paths with "
      "input-independent attention give the exact sense); other variants: each sub-network keeps its layers' biases. "
      "Re-runs use the working precision and are confirmed one tier up with the same draws. --sums takes a batch "
      "(--tokens-file, --random-input N --batch B, or --input with X of shape [b, n, d]; inputs in "
      "parallel, sharing --threads): mean ± std, min, median and max over the inputs of each length's share ‖S_k‖_F/‖X^L‖_F, each "
      "input at its own precision, its own values in --format json. --effectiveness [--rerun N] takes a batch too: "
      "per length mean ± std over the inputs of the distance, the task head's agreement counted over every "
      "prediction of the batch (one per input for a classifier, one per position for an LM head) and the mean KL "
      "over those predictions; with --rerun, input i draws with seed + i·0xD1B54A32D192ED03 and enters with its "
      "mean over the repetitions.\n\n"
      "Examples:\n"
      "  sanpath paths --model ../shared/data/real-models/gpt2-capp --tokens 1,5,9,13 --skip on --mlp none "
      "--layernorm none --sums\n"
      "  sanpath paths --model san.safetensors --random-input 8 --seed 1 --enumerate --top 10 --format json\n"
      "  sanpath paths --model ../shared/data/real-models/bert-ticket-classifier --tokens 2,15,27,3 --skip on "
      "--mlp none --layernorm none --effectiveness\n"
      "  sanpath paths --model ../shared/data/real-models/gpt2-capp --tokens 1,5,9,13 --effectiveness --rerun 16 "
      "--repeats 5 --seed 1\n"
      "  sanpath paths --model ../shared/data/real-models/bert-ticket-classifier --tokens-file tokens.txt --skip on "
      "--mlp none --layernorm none --effectiveness --threads 2\n");
  cmd->callback([o, seed, sample, length, lengths, heads, top, limit, rerun, repeats, check] {
    const Format fmt = o->out.parsed();
    if (check->count() > 0 && (o->check_text.empty() || o->check_text == "true"))
      throw UsageError("--check: needs a value (auto|mpfr|certified: how digits are confirmed or proven); Theorem "
                       "2.1's reconstruction check is --verify-decomposition");
    if (check->count() > 0) o->precision.check = o->check_text;
    const PrecisionRequest req =
        o->precision.request_in(o->sample > 0 ? CheckScope::path_sampling : CheckScope::paths);
    const VariantOverride ov = o->variant.overrides();
    if (seed->count() > 0 && o->input.random_n == 0 && o->sample == 0 && rerun->count() == 0)
      throw UsageError("--seed: needs --random-input, --sample or --rerun");
    if (rerun->count() > 0 && !o->effectiveness) throw UsageError("--rerun: only with --effectiveness");
    // --image reads the model's image processor and needs the model: loaded first then; other inputs are
    // read (and refused) before the model.
    std::optional<Model> loaded;
    if (!o->input.images.empty()) loaded.emplace(o->model.load(o->input.load_options()));
    const InputBatch batch = o->input.specs(loaded ? &*loaded : nullptr, o->model.path);
    if (batch.batch && !o->sums && !o->effectiveness)
      throw UsageError((!o->input.file.empty() ? o->input.file + ": X" : !o->input.tokens_file.empty() ? std::string("--tokens-file") : !o->input.images.empty() ? std::string("--image") : std::string("--batch")) + ": a batch of " + std::to_string(batch.inputs.size()) +
                       " inputs; paths analyses a batch with --sums or --effectiveness only (one input for --enumerate, "
                       "--sample)");
    if (rerun->count() > 0) as_usage("--rerun", [&] { return RerunRequest::checked_samples(o->rerun); });
    if (repeats->count() > 0) as_usage("--repeats", [&] { return RerunRequest::checked_repeats(o->repeats); });
    if (!o->enumerate) {
      for (const CLI::Option* opt : {lengths, heads, top, limit})
        if (opt->count() > 0) throw UsageError(opt->get_name() + ": only with --enumerate");
      if ((o->sums || o->effectiveness) && length->count() > 0)
        throw UsageError("--length: only with --enumerate or --sample");
    }
    if (o->verify && (o->sample > 0 || o->effectiveness || (o->enumerate && (length->count() || lengths->count() || heads->count()))))
      throw UsageError(
          "--verify-decomposition: the reconstruction is checked on every path only: use it with --sums, or with "
          "--enumerate without --length/--lengths/--heads-per-layer");
    if (o->limit < 1) throw UsageError("--limit: must be at least 1");
    if (sample->count() > 0 && o->sample < 2)
      throw UsageError("--sample: " + std::to_string(o->sample) +
                       " samples: at least 2 are needed for a confidence interval");

    const Model model = loaded ? std::move(*loaded) : o->model.load(o->input.load_options());
    const Variant v = model.resolve(ov);
    const InputSpec& in = batch.inputs.front();
    const RunInfo info{model.source(), batch.description, task_head_absence(model)};
    const int L = model.arch().layers;
    // Lengths that have no paths are a mistake in the command line.
    const auto check_lengths = [&](int a, int b, const std::string& option) {
      if (a < 0) throw UsageError(option + ": length " + std::to_string(a) + " is negative");
      if (b > L)
        throw UsageError(option + ": length " + std::to_string(b) + " exceeds the model's " + std::to_string(L) +
                         " layers");
      const std::vector<PathCount> counts = count_paths_by_length(L, model.arch().heads, v.skip);
      bool any = false;
      for (int k = a; k <= b; ++k) any = any || counts[static_cast<std::size_t>(k)] != 0;
      if (!any)
        throw UsageError(option + ": no path has " +
                         (a == b ? "length " + std::to_string(a) : "a length in " + o->lengths) +
                         (v.skip ? "" : " (without skip every path has length " + std::to_string(L) + ")"));
    };

    std::optional<Quantity> error;
    std::optional<Precision> precision;
    if (o->sums && batch.batch) {
      const BatchLengthSums b = analyze_length_sums_batch(model, v, batch.inputs, req, product_threads(), o->out.progress());
      if (o->verify)
        for (std::size_t i = 0; i < b.runs.size(); ++i)
          verify_decomposition(b.runs[i].decomposition_error, b.runs[i].precision, "--verify-decomposition",
                               batch.inputs[i].describe());
      o->out.emit(format_length_sums_batch(b, batch.inputs, model, info, fmt));
      return;
    } else if (o->sums) {
      const LengthSumsReport r = analyze_length_sums(model, v, in, req, o->out.progress());
      error = r.decomposition_error;
      precision = r.precision;
      o->out.emit(format_length_sums(r, model, info, fmt));
    } else if (o->effectiveness) {
      const std::optional<TaskHead> head = o->model.first_layers ? std::nullopt : read_task_head(o->model.path, model);
      if (rerun->count() > 0) {
        RerunRequest rr;
        rr.samples = o->rerun;
        rr.repeats = o->repeats;
        rr.seed = o->input.seed;
        rr.threads = product_threads();
        if (batch.batch) {
          const BatchRerun b = analyze_rerun_batch(model, v, batch.inputs, req, rr, head ? &*head : nullptr,
                                                   o->out.progress());
          o->out.emit(format_rerun_batch(b, batch.inputs, model, info, fmt));
          return;
        }
        const RerunReport r = analyze_rerun(model, v, in, req, rr, head ? &*head : nullptr, o->out.progress());
        o->out.emit(format_rerun(r, model, info, fmt));
      } else if (batch.batch) {
        const BatchEffectiveness b = analyze_effectiveness_batch(model, v, batch.inputs, req, head ? &*head : nullptr,
                                                                 product_threads(), o->out.progress());
        o->out.emit(format_effectiveness_batch(b, batch.inputs, model, info, fmt));
        return;
      } else {
        const EffectivenessReport r =
            analyze_effectiveness(model, v, in, req, head ? &*head : nullptr, o->out.progress());
        o->out.emit(format_effectiveness(r, model, info, fmt));
      }
    } else if (o->enumerate) {
      EnumerationRequest er;
      if (length->count() > 0) {
        check_lengths(o->length, o->length, "--length");
        er.filter = PathFilter::length(o->length);
      } else if (lengths->count() > 0) {
        const auto [a, b] = parse_length_range(o->lengths, "--lengths");
        check_lengths(a, b, "--lengths");
        er.filter = PathFilter::lengths(a, b);
      }
      if (heads->count() > 0)
        er.filter.allowed_heads = as_usage("--heads-per-layer", [&] {
          return parse_heads_per_layer(o->heads_per_layer, L, model.arch().heads, v.skip);
        });
      er.top_k = o->top;
      er.threads = product_threads();
      er.limit = o->limit;
      const PathEnumerationReport r = analyze_enumeration(model, v, in, req, er, o->out.progress());
      error = r.decomposition_error;
      precision = r.precision;
      o->out.emit(format_enumeration(r, model, info, fmt));
    } else {
      std::vector<int> ks;
      if (length->count() > 0) {
        check_lengths(o->length, o->length, "--length");
        ks.push_back(o->length);
      }
      const PathSampleReport r = analyze_samples(model, v, in, req, ks, o->sample, o->input.seed, o->out.progress());
      o->out.emit(format_samples(r, model, info, fmt));
    }
    if (o->verify && error && precision) verify_decomposition(*error, *precision, "--verify-decomposition");
  });
}

}  // namespace sanpath::cli

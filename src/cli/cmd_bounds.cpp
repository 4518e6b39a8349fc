#include "common.hpp"

#include "sanpath/core/linalg.hpp"  // product_threads: the --threads setting

#include "sanpath/analysis/batch.hpp"
#include "sanpath/analysis/bounds.hpp"
#include "sanpath/analysis/search.hpp"

namespace sanpath::cli {

void register_bounds(CLI::App& app) {
  auto* cmd = app.add_subcommand("bounds", "The bounds of Theorems 2.2/2.3 and Corollary 3.2 against measured residuals");
  struct Opts {
    ModelOptions model;
    InputOptions input;
    VariantOptions variant;
    PrecisionOptions precision;
    OutputOptions out;
    std::string theorem = "auto", gamma = "1";
    // --search
    bool search = false;
    int layers = 2, heads = 1, d_model = 4, d_qk = 2, tokens_n = 4, iterations = 200;
    long search_bits = 128;
    std::string save;
    std::vector<CLI::Option*> search_only;
    CLI::Option* seed = nullptr;
    CLI::Option* random_input = nullptr;
  };
  auto o = std::make_shared<Opts>();
  o->model.add(*cmd, false);
  o->input.add(*cmd, false, true);
  if (CLI::App* g = cmd->get_option_group("input"))
    g->description("X^0, n tokens × d_model features: exactly one of these, unless --search (no default)");
  // --seed also seeds the search: it needs --random-input only without --search (checked below).
  cmd->get_option("--model")->description(cmd->get_option("--model")->get_description() +
                                          "; required unless --search (no default)");
  o->seed = cmd->get_option("--seed");
  o->seed->description("seed of the random input (--random-input) or of the search (--search)");
  for (CLI::Option* needed : o->seed->get_needs()) {
    o->random_input = needed;
    o->seed->remove_needs(needed);
  }
  o->variant.add(*cmd);
  cmd->add_option("--theorem", o->theorem,
                  "auto | 2.2 (H = 1, SAN) | 2.3 (SAN) | 3.2 (plain MLP); auto picks from the variant and H, and "
                  "states when none applies")
      ->default_val("auto");
  cmd->add_option("--gamma", o->gamma, "the factor gamma of arXiv v2 (> 0; 1 = the ICML 2021 statement)")
      ->default_val("1");
  o->precision.add(*cmd);
  o->precision.add_check(*cmd);
  o->out.add(*cmd);
  auto* g = cmd->add_option_group("search", "counterexample search over small random SANs (--search)");
  g->add_flag("--search", o->search, "search for weights and input maximising measured/bound (log ratio)");
  o->search_only = {
      g->add_option("--layers", o->layers, "search: layers L (default 2)"),
      g->add_option("--heads", o->heads, "search: heads H (default 1)"),
      g->add_option("--d-model", o->d_model, "search: width d (default 4)"),
      g->add_option("--d-qk", o->d_qk, "search: query/key and value width per head (default 2)"),
      g->add_option("--tokens-n", o->tokens_n, "search: tokens n, rows of X (default 4)"),
      g->add_option("--iterations", o->iterations, "search: candidate evaluations (default 200)"),
      g->add_option("--search-bits", o->search_bits, "search: fixed precision of the evaluations (default 128)"),
      g->add_option("--save", o->save,
                    "search: write the best model to FILE (native) and its input to FILE's stem + "
                    ".input.safetensors (tensor X); required with --search (no default)")};
  cmd->footer(
      "\nr_l = ‖X^l − 1cᵀ‖_{1,∞} at the optimal centre, measured as an enclosure [lower, upper] at a precision that "
      "resolves it (auto: raised tier by tier up to 16387 bits, confirmed at the top tier, 32772 bits; depths beyond "
      "print as upper bounds '< 1e-N', the verdict uses that upper bound and the output says the ceiling was "
      "reached). Bound (uniform): r_l ≤ a^((3^l−1)/2) r_0^(3^l), a = 4·gamma·beta·H(·lambda)/sqrt(d_qk); layerwise: "
      "r_l ≤ a_l r_{l−1}^3 chained. Verdict per depth: HOLDS (measured upper ≤ bound lower), VIOLATED (measured "
      "lower > bound upper), UNDECIDED. gamma is printed with every result. With skip connections, LayerNorm or an "
      "MLP with its own residual no theorem applies: the output says so and shows the measured residuals (with "
      "skip on: beside those of the same model with skip off). An explicit --theorem that does not fit the model "
      "or variant (e.g. 2.2 with H > 1) is a usage error, exit code 2.\n"
      "--search builds its own models (no --model/--input): seeded random starts and local improvement at "
      "--search-bits, the best re-checked at --precision; --seed seeds it. A certified VIOLATED with gamma = 1 "
      "would contradict the theorem: the files are kept for re-checking with `sanpath bounds --model FILE --input "
      "FILE.input.safetensors`.\n"
      "A batch (--tokens-file, --random-input N --batch B, or --input with X of shape [b, n, d]; inputs in "
      "parallel, sharing --threads) prints per depth the mean ± std, min, median and max over the inputs of the measured r_l/‖X^l‖_{1,∞} "
      "and counts the verdicts; each input runs at its own precision and --format json holds each input's own "
      "result.\n\nExamples:\n"
      "  sanpath bounds --model san.safetensors --random-input 8 --seed 1 --input-residual 0.05\n"
      "  sanpath bounds --model ../shared/data/real-models/bert-ticket-classifier --tokens 2,15,27,3 --skip off "
      "--mlp none --layernorm none --format json\n"
      "  sanpath bounds --search --layers 2 --heads 1 --d-model 4 --d-qk 2 --tokens-n 4 --seed 1 --save best.safetensors\n");
  cmd->callback([o] {
    const Format fmt = o->out.parsed();
    const Theorem theorem = as_usage("--theorem", [&] { return parse_theorem(o->theorem); });
    const BigReal gamma = as_usage("--gamma", [&] { return BoundsRequest::parse_gamma(o->gamma); });
    const PrecisionRequest req = o->precision.request_for(Center::optimal);
    const VariantOverride ov = o->variant.overrides();
    if (o->search) {
      if (!o->model.path.empty() || o->input.given())
        throw UsageError("--search: builds its own models and inputs; --model, --input, --tokens and "
                         "--random-input are not used with it");
      if (ov.skip || ov.mlp || ov.layernorm || ov.mask)
        throw UsageError("--search: searches pure SANs (skip off, mlp none, layernorm none); variant options are "
                         "not used with it");
      if (o->save.empty()) throw UsageError("--search: --save FILE is required (the best model and input go there)");
      as_usage("--save", [&] {
        check_output_location(o->save);
        check_output_location(search_input_path(o->save));
        return 0;
      });
      BoundsSearchSpec spec;
      spec.layers = o->layers;
      spec.heads = o->heads;
      spec.d_model = o->d_model;
      spec.d_qk = o->d_qk;
      spec.tokens = o->tokens_n;
      spec.seed = o->input.seed;
      spec.iterations = o->iterations;
      spec.search_bits = o->search_bits;
      spec.theorem = theorem;
      spec.gamma = gamma;
      spec.recheck = req;
      as_usage("--search", [&] {
        spec.validate();
        return 0;
      });
      BoundsSearchResult r = search_bounds(spec, o->out.progress());
      save_search_result(r, o->save);
      o->out.emit(format_bounds_search(r, fmt));
      return;
    }
    for (const CLI::Option* opt : o->search_only)
      if (opt->count() > 0) throw UsageError(opt->get_name() + ": only with --search");
    if (o->model.path.empty()) throw UsageError("--model is required (or --search)");
    if (!o->input.given()) throw UsageError("an input is required: one of --input, --tokens, --pixels, --image, --random-input");
    if (o->seed->count() > 0 && o->input.random_n == 0) throw UsageError("--seed: needs --random-input (or --search)");
    const Model model = o->model.load(o->input.load_options());
    const Variant v = model.resolve(ov);
    // An explicit theorem that does not fit is the command line's mistake: checked before any work.
    as_usage("--theorem", [&] { return select_theorem(v, model.arch().heads, theorem, Coverage::of(model, v)); });
    const InputBatch batch = o->input.specs(&model, o->model.path);
    BoundsRequest br;
    br.theorem = theorem;
    br.gamma = gamma;
    br.precision = req;
    if (batch.batch) {
      const BatchBounds b = analyze_bounds_batch(model, v, batch.inputs, br, product_threads(), o->out.progress());
      o->out.emit(format_bounds_batch(b, batch.inputs, model, {model.source(), batch.description}, fmt));
      return;
    }
    const InputSpec& in = batch.inputs.front();
    const BoundsAnalysis a = analyze_bounds(model, v, in, br, o->out.progress());
    o->out.emit(format_bounds(a, model, {model.source(), in.describe()}, fmt));
  });
}

}  // namespace sanpath::cli

#include "common.hpp"

#include "sanpath/core/linalg.hpp"  // product_threads: the --threads setting

#include "sanpath/analysis/collapse.hpp"
#include "sanpath/model/random.hpp"

namespace sanpath::cli {

void register_collapse(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "collapse",
      "The paper's Section 4 experiment: relative residual per layer of SAN, SAN+MLP, SAN+skip and the full model");
  struct Opts {
    ModelOptions model;
    InputOptions input;
    PrecisionOptions precision;
    OutputOptions out;
    std::string conventions = "theory";
  };
  auto o = std::make_shared<Opts>();
  o->model.add(*cmd, false, true);
  cmd->get_option("--model")->description(cmd->get_option("--model")->get_description() +
                                          " (default: the embedded random BERT-shaped model, see below)");
  o->input.add(*cmd, false, true);
  cmd->add_option("--conventions", o->conventions,
                  "theory: SAN without LayerNorm (the theorems'); paper: Figure 2's curves (SAN = LN_1(Attn(X)), "
                  "SAN+MLP and SAN+skip with post-LayerNorm, transformer = the model as trained)")
      ->default_val("theory");
  o->precision.add(*cmd);
  o->precision.add_check(*cmd);
  o->precision.add_measures(*cmd);
  o->precision.add_emulate(*cmd);
  o->out.add(*cmd);
  cmd->footer(
      "\nWithout --model: the embedded default, a seeded random BERT-shaped model (post-LN, GELU, L=12, H=4, d=32, "
      "d_qk=8, d_ff=128, weights N(0, 0.02²)) on a random input of 8 tokens (seed 1). Each variant runs at "
      "automatic precision on the centred pass (--method), so the SAN's doubly exponential collapse shows as "
      "exponents where float64 prints 0, at every layer.\n\n"
      "Examples:\n  sanpath collapse\n"
      "  sanpath collapse --model ../shared/data/real-models/bert-ticket-classifier --tokens 2,15,27,3 --format "
      "json\n"
      "  sanpath collapse --model BERT_FOLDER --tokens-file tokens.txt --conventions paper --threads 2\n\n"
      "A batch (--tokens-file, --random-input N --batch B, or --input with X of shape [b, n, d]) prints the mean ± "
      "sample standard deviation over the inputs per variant and layer, as the paper's Figure 2 (32 sequences of "
      "128 tokens); each input runs at its own precision, confirmed by its own second run.\n");
  cmd->callback([o] {
    const Format fmt = o->out.parsed();
    const PrecisionRequest req = o->precision.request_for(Center::mean);
    const CollapseConventions conventions =
        as_usage("--conventions", [&] { return parse_conventions(o->conventions, "conventions"); });
    const bool embedded = o->model.path.empty();
    const Model model = embedded ? random_model(default_collapse_model())
                                 : o->model.load(o->input.load_options(), reads_weights_in_place(req, Center::mean));
    const InputBatch in = o->input.specs_or(InputSpec::from_random(default_collapse_input()), &model, o->model.path);
    const std::string name = embedded ? "embedded default (random BERT-shaped, seed 0)" : model.source();
    if (in.batch) {
      const BatchCollapseResult r =
          run_collapse_batch(model, in.inputs, req, conventions, product_threads(), o->out.progress());
      o->out.emit(format_collapse_batch(r, in.inputs, model, {name, in.description}, fmt));
      return;
    }
    const CollapseResult r = run_collapse(model, in.inputs.front(), req, o->out.progress(), conventions);
    o->out.emit(format_collapse(r, model, {name, in.description}, fmt));
  });
}

}  // namespace sanpath::cli

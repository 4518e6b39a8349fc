#include "common.hpp"

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
  };
  auto o = std::make_shared<Opts>();
  o->model.add(*cmd, false);
  cmd->get_option("--model")->description(cmd->get_option("--model")->get_description() +
                                          " (default: the embedded random BERT-shaped model, see below)");
  o->input.add(*cmd, false);
  o->precision.add(*cmd);
  o->precision.add_check(*cmd);
  o->out.add(*cmd);
  cmd->footer(
      "\nWithout --model: the embedded default, a seeded random BERT-shaped model (post-LN, GELU, L=5, H=4, d=32, "
      "d_qk=8, d_ff=128, weights N(0, 0.02²)) on a random input of 8 tokens (seed 1). Each variant runs at "
      "automatic precision, so the SAN's doubly exponential collapse shows as exponents where float64 prints 0.\n\n"
      "Examples:\n  sanpath collapse\n"
      "  sanpath collapse --model ../shared/data/real-models/bert-ticket-classifier --tokens 2,15,27,3 --format "
      "json\n");
  cmd->callback([o] {
    const Format fmt = o->out.parsed();
    const PrecisionRequest req = o->precision.request_for(Center::mean);
    const bool embedded = o->model.path.empty();
    const Model model = embedded ? random_model(default_collapse_model()) : o->model.load();
    InputSpec in = o->input.given() ? o->input.spec() : InputSpec::from_random(default_collapse_input());
    const CollapseResult r = run_collapse(model, in, req, o->out.progress());
    const std::string name = embedded ? "embedded default (random BERT-shaped, seed 0)" : o->model.path;
    o->out.emit(format_collapse(r, model, {name, in.describe()}, fmt));
  });
}

}  // namespace sanpath::cli

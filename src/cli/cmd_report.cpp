#include "common.hpp"

#include "sanpath/core/linalg.hpp"  // product_threads: the --threads setting
#include "progress.hpp"

#include "sanpath/analysis/collapse.hpp"
#include "sanpath/analysis/rerun.hpp"
#include "sanpath/io/task_head.hpp"
#include "sanpath/report/html_report.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/core/resources.hpp"

namespace sanpath::cli {

void register_report(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "report", "One self-contained HTML file: residual per layer of the four variants, the SAN's bound, path lengths");
  struct Opts {
    ModelOptions model;
    InputOptions input;
    PrecisionOptions precision;
    std::string out;
    std::string gamma = "1";
    std::string conventions = "theory";
    bool quiet = false;
    std::uint64_t rerun = 8;
    int repeats = 3;
  };
  auto o = std::make_shared<Opts>();
  o->model.add(*cmd, false);
  cmd->get_option("--model")->description(cmd->get_option("--model")->get_description() +
                                          " (default: the embedded default model of `sanpath collapse`)");
  o->input.add(*cmd, false, true);
  o->precision.add(*cmd);
  o->precision.add_measures(*cmd);
  cmd->add_option("--conventions", o->conventions, "the collapse section's curves: theory|paper (as `sanpath collapse`)")
      ->default_val("theory");
  cmd->add_option("--gamma", o->gamma, "the bound's factor γ (arXiv v2 of the paper; 1 = the ICML statement)")
      ->default_val("1");
  cmd->add_option("--out,-o", o->out, "the HTML file to write (atomically)")
      ->required()
      ->each([](const std::string& path) { check_output_location(path); });
  cmd->add_flag("--quiet,-q", o->quiet, "no progress bar on stderr");
  cmd->add_option("--rerun", o->rerun,
                  "the effectiveness section's re-run sub-networks: N paths per length (as `sanpath paths "
                  "--effectiveness --rerun N`, seed 0), N·R sub-network passes per length and input, so with a batch "
                  "the cost grows with the batch; 0: the exact sense only")
      ->default_val(8)
      ->check(unsigned_integer);
  cmd->add_option("--repeats", o->repeats, "--rerun: R repetitions with different draws")->default_val(3);
  o->precision.add_check(
      *cmd, "report takes auto, mpfr (every section confirmed one tier up) or certified; rounding is refused: the "
            "path sections are no double forward pass. certified: every section's digits proven (as `sanpath "
            "collapse|bounds|paths --sums|--effectiveness --check certified`), the bound's verdicts then proofs; the "
            "re-run sub-networks (the default --rerun 8) run in ball arithmetic too");
  cmd->footer(
      "\nThe report holds: the relative residual per layer of SAN, SAN+MLP, SAN+skip and the full model "
      "(as `sanpath collapse`) on a log axis; the bound of Theorem 2.2/2.3 for the SAN against its measured "
      "residual, with β, a and a verdict per depth (as `sanpath bounds`); the exact number of paths of each "
      "length and each length's share of the output for the attention-only network with skip connections (as "
      "`sanpath paths --sums`); the distance of the network kept to its paths of length ≤ k to its output and, "
      "with the checkpoint's task head, the agreement of its predictions (as `sanpath paths --effectiveness`), beside "
      "the paper's own procedure of re-run sub-networks (--rerun, as `sanpath paths --effectiveness --rerun`) and "
      "the gap between the two; "
      "the model, input and precisions. Charts are inline SVG: the file opens offline. "
      "Without --model: the embedded default model of `sanpath collapse`; without an input option: a random "
      "input of 8 tokens (seed 1), its default input. Progress: a bar on stderr when it is a terminal.\n\n"
      "Examples:\n  sanpath report --out report.html\n"
      "  sanpath report --model ../shared/data/real-models/bert-ticket-classifier --tokens 2,15,27,3 "
      "--out bert.html\n"
      "  sanpath report --model BERT_FOLDER --tokens-file tokens.txt --conventions paper --threads 2 --out fig2.html\n\n"
      "A batch (--tokens-file, --random-input N --batch B, or --input with X of shape [b, n, d]): the collapse "
      "and effectiveness sections draw the mean over the inputs with ±std bands (the effectiveness section's "
      "agreement pooled over every prediction of the batch; re-run input i draws with seed i·0xD1B54A32D192ED03); "
      "bounds and path lengths analyse the first input (said so in those sections).\n");
  cmd->callback([o] {
    ReportRequest req;
    req.precision = o->precision.request_in(CheckScope::paths);
    req.bounds.gamma = as_usage("--gamma", [&] { return BoundsRequest::parse_gamma(o->gamma); });
    req.generator = std::string("sanpath ") + SANPATH_VERSION;
    req.conventions = as_usage("--conventions", [&] { return parse_conventions(o->conventions, "conventions"); });
    const bool embedded = o->model.path.empty();
    const Model model = embedded ? random_model(default_collapse_model()) : o->model.load(o->input.load_options());
    const InputBatch in = o->input.specs_or(InputSpec::from_random(default_collapse_input()), &model, o->model.path);
    req.info = {embedded ? "embedded default (random BERT-shaped, seed 0)" : model.source(), in.description,
                task_head_absence(model)};
    if (!embedded && !o->model.first_layers) req.head = read_task_head(o->model.path, model);
    as_usage("--repeats", [&] { return RerunRequest::checked_repeats(o->repeats); });
    if (o->rerun > 0) {
      RerunRequest rr;
      rr.samples = o->rerun;
      rr.repeats = o->repeats;
      rr.threads = product_threads();
      req.rerun = rr;
    }
    const HtmlReport report = in.batch ? build_report(model, in.inputs, req, product_threads(), terminal_progress(o->quiet))
                                       : build_report(model, in.inputs.front(), req, terminal_progress(o->quiet));
    check_interrupt();  // an interrupted run writes nothing
    write_html_report(o->out, report);
  });
}

}  // namespace sanpath::cli

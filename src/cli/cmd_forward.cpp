#include "common.hpp"

#include "sanpath/core/linalg.hpp"  // product_threads: the --threads setting

namespace sanpath::cli {

void register_forward(CLI::App& app) {
  auto* cmd = app.add_subcommand("forward", "Forward pass with every layer's residual, in any precision");
  struct Opts {
    ModelOptions model;
    InputOptions input;
    VariantOptions variant;
    PrecisionOptions precision;
    OutputOptions out;
    std::string center = "mean";
  };
  auto o = std::make_shared<Opts>();
  o->model.add(*cmd, true, true);
  o->input.add(*cmd, true, true);
  o->variant.add(*cmd);
  o->precision.add(*cmd);
  o->precision.add_check(*cmd);
  o->precision.add_measures(*cmd);
  o->precision.add_emulate(*cmd);
  cmd->add_option("--center", o->center, "residual centre: mean|median|optimal (optimal: an enclosure)")
      ->default_val("mean");
  o->out.add(*cmd);
  cmd->footer(
      "\nLayer 0 is the input X^0, layer l the output of layer l. Residual: ‖X − 1cᵀ‖ for the centre c; "
      "relative residual: ‖res(X)‖_{1,∞}/‖X‖_{1,∞}. Every number is confirmed by a second run: one precision "
      "tier higher (at the top tier: the tier below), or for --precision double (--check auto or rounding) two "
      "more double runs rounded upward and downward; 'digits' is the count of significant digits that agree "
      "(with the rounding check: that agree with the value moved by 10 times the larger directed-rounding "
      "difference). With --precision auto the centred pass (the default --method) runs at the precision for "
      "--digits and escalates only when the confirmation gives fewer. Values below what the precision resolves "
      "print as '< 1e-N'.\n\nExamples:\n"
      "  sanpath forward --model ../shared/data/real-models/bert-ticket-classifier --tokens 2,15,27,3\n"
      "  sanpath forward --model model.safetensors --random-input 16 --seed 1 --skip off --mlp none "
      "--layernorm none --precision auto --format json\n"
      "  sanpath forward --model ../shared/data/real-models/bert-ticket-classifier --tokens-file tokens.txt "
      "--threads 2\n\n"
      "A batch (--tokens-file, --random-input N --batch B, or --input with X of shape [b, n, d]) prints per-layer "
      "statistics of the relative residual over the inputs (mean, sample standard deviation, min, median, max); "
      "each input runs at its own precision and is confirmed by its own second run; --format json adds every "
      "input's own values.\n");
  cmd->callback([o] {
    const Format fmt = o->out.parsed();
    const VariantOverride ov = o->variant.overrides();
    const Center center = as_usage("--center", [&] { return parse_center(o->center); });
    const PrecisionRequest req = o->precision.request_for(center);
    const Model model =
        o->model.load(o->input.load_options(), o->input.one_input() || reads_weights_in_place(req, center));
    const Variant v = model.resolve(ov);
    const InputBatch in = o->input.specs(&model, o->model.path);
    if (in.batch) {
      const BatchForwardAnalysis a =
          analyze_forward_batch(model, v, in.inputs, req, center, product_threads(), o->out.progress());
      o->out.emit(format_forward_batch(a, in.inputs, model, {model.source(), in.description}, fmt));
      return;
    }
    const ForwardAnalysis a = analyze_forward(model, v, in.inputs.front(), req, center, o->out.progress());
    o->out.emit(format_forward(a, model, {model.source(), in.description}, fmt));
  });
}

}  // namespace sanpath::cli

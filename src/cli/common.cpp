#include "common.hpp"

#include "sanpath/core/linalg.hpp"  // set_product_threads
#include "progress.hpp"

#include "sanpath/io/atomic_file.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/families.hpp"
#include "sanpath/io/image.hpp"
#include "sanpath/io/inputs.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/io/tensor_eigen.hpp"
#include "sanpath/core/resources.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <iostream>
#include <csignal>
#include <unistd.h>

namespace sanpath::cli {

namespace {

/// A check of an option's text by a library parse: its message, which CLI11 prefixes with the option. No text in
/// the help: the option's type already says INT or UINT.
template <class Parse> CLI::Validator library_check(Parse parse) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          (void)parse(text);
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
        return "";
      },
      "");
}

}  // namespace

void ModelOptions::add(CLI::App& app, bool required, bool streaming) {
  auto* o = app.add_option("--model", path,
                           "Model: a HuggingFace folder (config.json + model.safetensors or its shards) of a family "
                           "sanpath loads (" + family_display_names() + ") or a native sanpath .safetensors file (see "
                           "`sanpath init`)");
  if (required) o->required();
  app.add_option("--first-layers", first_layers,
                 "N: the checkpoint's first N layers only, as a model of N layers: the others are neither read nor "
                 "checked (for checkpoints whose weights as doubles exceed the memory; the model line says so). "
                 "Task heads (--effectiveness, report) are not used: they read the last layer's output (default: every layer)")
      ->check(library_check(parse_first_layers))  // the library's range, as Python's first_layers
      ->needs(o);
  if (streaming)
    app.add_option("--stream-layers", stream_layers,
                   "auto|on|off: read each layer from the checkpoint when a pass reaches it, instead of holding "
                   "every layer in memory as doubles (memory: the embeddings and about 3 layers; each pass reads "
                   "every layer again, except the three passes of the rounding check, which read it once between "
                   "them; double passes multiply by the weights where they lie in the file, F64, F32, F16 or BF16, "
                   "never decoded). auto: for `forward` of one input (--tokens, --random-input), for `forward` and "
                   "`collapse` in --precision double with the rounding check or --no-confirm, and whenever the "
                   "layers exceed the memory budget (HuggingFace folders; native files and ALBERT are always held whole; default: "
                   "auto)")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->needs(o);
  streamable = streaming;
}

// The library's range, as Python's seeds and counts.
const CLI::Validator unsigned_integer = library_check(parse_uint64);

Model ModelOptions::load(LoadOptions options, bool stream_by_default) const {
  options.first_layers = first_layers;
  if (streamable) options.layers = parse_stream_layers(stream_layers, "--stream-layers");
  if (options.layers == LoadOptions::Layers::automatic && stream_by_default)
    options.layers = LoadOptions::Layers::streamed;
  return load_model(path, options);
}

void InputOptions::add(CLI::App& app, bool required, bool batches) {
  auto* g = app.add_option_group("input", required ? "X^0, n tokens × d_model features: exactly one of these"
                                                   : "X^0, n tokens × d_model features: at most one of these "
                                                     "(default: the command's own input, see below)");
  g->add_option("--input", file,
                batches ? "safetensors file holding one tensor named X of shape [n, d_model], or [b, n, d_model] "
                          "for a batch of b inputs"
                        : "safetensors file holding one tensor named X of shape [n, d_model]");
  g->add_option("--tokens", tokens, "comma-separated token ids, embedded with the model's own embeddings");
  g->add_option("--pixels", pixels,
                batches ? "ViT: safetensors file holding a tensor pixel_values of shape [C, S, S] (one image) or "
                          "[b, C, S, S] (a batch), already normalised by the model's image processor"
                        : "ViT: safetensors file holding a tensor pixel_values of shape [C, S, S], already normalised "
                          "by the model's image processor");
  g->add_option("--image", images,
                std::string("ViT: a PNG or JPEG file, preprocessed as the model's preprocessor_config.json says "
                            "(ViTImageProcessor: RGB, PIL's resize with its resample filter, rescale_factor, "
                            "image_mean and image_std, computed to the bit as the Python pipeline does)") +
                    (batches ? "; repeated, or a folder of *.png/*.jpg/*.jpeg files (name order): a batch" : ""))
      ->type_name("FILE");
  if (batches)
    g->add_option("--tokens-file", tokens_file,
                  "a batch: one sequence of comma-separated token ids per line (lengths may differ; blank lines and "
                  "'#' comments skipped)");
  auto* r = g->add_option("--random-input", random_n, "N: a seeded random input of N tokens (X = 1cᵀ + R)");
  if (required) {
    g->require_option(1);
  } else {
    g->require_option(0, 1);
  }
  app.add_option("--seed", seed, "seed of the random input")->default_val(0)->check(unsigned_integer)->needs(r);
  app.add_option("--spread", spread, "std of the random input's residual part R (offset c has std 1)")
      ->default_val(1.0)
      ->needs(r);
  app.add_option("--input-residual", residual,
                 "scale R so that the initial residual ‖X − 1 mean(X)ᵀ‖_{1,∞} equals this value (default: R as "
                 "drawn)")
      ->needs(r);
  if (batches) {
    app.add_option("--batch", batch_size, "B: a batch of B random inputs of N tokens, seeds SEED..SEED+B-1 (default: one input)")->needs(r);
  }
}

InputBatch InputOptions::specs(const Model* model, const std::string& model_path) const {
  InputBatch b;
  if (!images.empty()) {
    if (!model || model_path.empty())
      throw UsageError("--image: needs --model, a ViT checkpoint with its preprocessor_config.json");
    b.inputs = read_images(images, model_path, model);
    b.batch = image_batch(images);
    b.description = !b.batch ? b.inputs[0].describe()
                             : describe_batch(b.inputs, images.size() == 1 ? images.front() : std::string("--image"));
    return b;
  }
  if (!file.empty()) {
    b.inputs = read_input_tensor(file);
    b.batch = b.inputs.front().source != file;  // [b, n, d]: the inputs are named "<file>[i]"
    b.description = b.batch ? describe_batch(b.inputs, file + " (X of shape [b, n, d])") : b.inputs[0].describe();
    return b;
  }
  if (!pixels.empty()) {
    b.inputs = read_pixels(pixels);
    b.batch = b.inputs.front().source != pixels;  // [b, C, S, S]: the images are named "<file>[i]"
    b.description = b.batch ? describe_batch(b.inputs, pixels + " (pixel_values of shape [b, C, S, S])")
                            : b.inputs[0].describe();
    return b;
  }
  if (!tokens_file.empty()) {
    b.inputs = read_token_file(tokens_file);
    b.batch = true;
    b.description = describe_batch(b.inputs, tokens_file);
    return b;
  }
  if (!tokens.empty()) {
    try {
      b.inputs.push_back(InputSpec::from_tokens(parse_token_list(tokens, "--tokens")));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());  // the message already names --tokens
    }
    b.description = b.inputs[0].describe();
    return b;
  }
  RandomInputSpec r;
  r.n = random_n;
  r.seed = seed;
  r.spread = spread;
  r.residual = residual;
  as_usage("--random-input", [&] { return checked_random_count(random_n, "tokens"); });
  if (batch_size) {
    as_usage("--batch", [&] { return checked_random_count(*batch_size, "inputs"); });
    b.inputs = random_input_batch(r, *batch_size);
    b.batch = true;
    const std::uint64_t last = seed + static_cast<std::uint64_t>(*batch_size) - 1;
    b.description =
        describe_batch(b.inputs, "--random-input (seeds " + std::to_string(seed) + ".." + std::to_string(last) + ")");
    return b;
  }
  b.inputs.push_back(InputSpec::from_random(r));
  b.description = b.inputs[0].describe();
  return b;
}

InputBatch InputOptions::specs_or(InputSpec fallback, const Model* model, const std::string& model_path) const {
  if (given()) return specs(model, model_path);
  InputBatch b;
  b.description = fallback.describe();
  b.inputs.push_back(std::move(fallback));
  return b;
}

LoadOptions InputOptions::load_options() const {
  LoadOptions o;
  try {
    std::vector<long> ids;
    if (!tokens_file.empty()) {
      for (const InputSpec& in : read_token_file(tokens_file)) ids.insert(ids.end(), in.tokens.begin(), in.tokens.end());
    } else if (!tokens.empty()) {
      ids = parse_token_list(tokens, "--tokens");
    }
    o.word_rows = std::move(ids);
  } catch (const std::invalid_argument&) {
    o.word_rows.reset();
  }
  return o;
}

InputSpec InputOptions::spec(const Model* model, const std::string& model_path) const {
  InputBatch b = specs(model, model_path);
  if (b.batch)
    throw UsageError((!pixels.empty()   ? pixels + ": pixel_values"
                      : !images.empty() ? std::string("--image")
                      : file.empty()    ? std::string("--tokens-file")
                                     : file + ": X") +
                     ": a batch of " +
                     std::to_string(b.inputs.size()) +
                     " inputs; this command analyses one input (batches: forward, collapse, paths --sums, bounds, report)");
  return std::move(b.inputs.front());
}

void VariantOptions::add(CLI::App& app) {
  auto* g = app.add_option_group("variant", "override the checkpoint's own structure (default: its own)");
  g->add_option("--skip", skip, "skip connections: on|off (default: the model's own)");
  g->add_option("--mlp", mlp, "MLP: none|plain|residual (default: the model's own)");
  g->add_option("--layernorm", layernorm, "LayerNorm: none|pre|post (default: the model's own)");
  g->add_option("--mask", mask, "attention mask: none|causal (default: the model's own)");
}

VariantOverride VariantOptions::overrides() const {
  VariantOverride o;
  if (!skip.empty()) o.skip = as_usage("--skip", [&] { return parse_on_off(skip, "skip"); });
  if (!mlp.empty()) o.mlp = as_usage("--mlp", [&] { return parse_mlp(mlp); });
  if (!layernorm.empty()) o.layernorm = as_usage("--layernorm", [&] { return parse_layernorm(layernorm); });
  if (!mask.empty()) o.mask = as_usage("--mask", [&] { return parse_mask(mask); });
  return o;
}

void PrecisionOptions::add(CLI::App& app, const std::string& default_text) {
  precision = default_text;
  app.add_option("--precision", precision,
                 "auto | double | BITS (53.." + std::to_string(Precision::max_bits()) +
                     "; rounded up to a tier: " + [] {
                       std::string s;
                       for (long b : Precision::tiers()) s += (s.empty() ? "" : ", ") + std::to_string(b);
                       return s;
                     }() + ")")
      ->default_val(default_text);
  app.add_option("--method", method,
                 "forward pass: centred (X = 1cᵀ + R carried in two parts, every residual resolved at the precision "
                 "for the digits asked, any depth) | direct (X as one matrix: a collapsed residual needs its "
                 "cancellation's bits more) (default: centred with --precision auto, direct with a fixed precision)");
  app.add_option("--digits", digits,
                 "significant digits asked for: --precision auto chooses the precision that confirms them for "
                 "every residual; tables print each value to min(confirmed, asked) digits, JSON and CSV every "
                 "confirmed digit (a digit count always counts the digits of the value it describes)")
      ->default_val(20);
  app.add_option("--max-bits", max_bits, "auto: precision ceiling in bits (default: the top tier)");
  app.add_flag("--no-confirm", no_confirm, "skip the confirming run (digits are then unconfirmed)");
}

PrecisionRequest PrecisionOptions::request() const {
  PrecisionRequest r = as_usage("--precision", [&] { return PrecisionRequest::parse(precision); });
  r.target_digits = as_usage("--digits", [&] { return PrecisionRequest::checked_digits(digits); });
  r.max_bits = as_usage("--max-bits", [&] { return PrecisionRequest::checked_max_bits(max_bits); });
  r.confirm = !no_confirm;
  if (!method.empty()) r.method = as_usage("--method", [&] { return parse_method(method); });
  r.check = as_usage("--check", [&] { return parse_check_method(check); });
  r.measures = as_usage("--measures", [&] { return MeasureSet::parse(measures); });
  if (!emulate.empty()) r.emulate = as_usage("--emulate", [&] { return parse_emulated_format(emulate); });
  return r;
}

void PrecisionOptions::add_emulate(CLI::App& app) {
  app.add_option("--emulate", emulate,
                 "fp32 | bf16 | fp16: also evaluate the model as a framework in that format would (math.md §9: "
                 "weights and X^0 rounded to it, products accumulated in fp32, every other operation computed in "
                 "fp32 and rounded to it), measure the emulated layers exactly (residual and every --measures), and "
                 "print beside each value its digits that agree with the exact model and the first layer where none "
                 "is left; an overflow (fp16 beyond 65504) is reported, not hidden (default: no emulation)");
}

void PrecisionOptions::add_measures(CLI::App& app) {
  std::string names;
  for (Measure m : all_measures()) names += std::string(names.empty() ? "" : ", ") + measure_name(m);
  app.add_option("--measures", measures,
                 "all | none | a comma-separated list of: " + names +
                     " (math.md §9; the attention measures from layer 1 on). Computed from the centred pair, so "
                     "collapsed layers keep their digits: cosine, stable_rank and effective_rank come with "
                     "one_minus_cosine, stable_rank_minus_one and effective_rank_minus_one. Each is confirmed like "
                     "the residuals; the table gets a column per measure, JSON a \"measures\" object per layer")
      ->default_val("none");
}

std::string PrecisionOptions::check_help(const std::string& details) {
  return "how digits are confirmed or proven, the same on every command: auto|rounding|mpfr|certified. rounding: "
         "the double pass is re-run in double rounded upward and downward, and a digit is printed when it survives "
         "10 times the larger difference (seconds, where mpfr takes a minute on BERT-base); mpfr: a run one "
         "precision tier up (128 bits for double); certified: every printed digit proven, not confirmed (math.md "
         "§10), by ball arithmetic at an MPFR tier; auto: rounding for a forward pass in --precision double with "
         "centre mean or median, mpfr otherwise. A method a command cannot honour is refused (exit code 2). " +
         details;
}

CLI::Option* PrecisionOptions::add_check(CLI::App& app, const std::string& details) {
  return app
      .add_option("--check", check,
                  check_help(!details.empty()
                                 ? details
                                 : "certified: the pass (centred with auto, as without it; direct with --method "
                                   "direct or a fixed precision) encloses every exact value, JSON gives each layer's "
                                   "\"intervals\" [lo, hi] and digits_by_quantity the digits they prove (forward, "
                                   "collapse and bounds, whose verdicts HOLDS and VIOLATED are then proven; every "
                                   "family, token ids or pixels through its embeddings, --input or --random-input "
                                   "taken as exact; centre mean or optimal)"))
      ->default_val("auto");
}

PrecisionRequest PrecisionOptions::request_in(CheckScope scope) const {
  const PrecisionRequest r = request();
  as_usage("--check", [&] {
    require_check(r.check, scope);
    return 0;
  });
  return r;
}

PrecisionRequest PrecisionOptions::request_for(Center center) const {
  const PrecisionRequest r = request();
  as_usage("--check", [&] {
    return uses_rounding_check(r.check, r.automatic ? Precision::at_least(128) : r.fixed, center);
  });
  return r;
}

void OutputOptions::add(CLI::App& app) {
  app.add_option("--format", format, "table|json|csv")->default_val("table");
  app.add_option("--output,-o", output, "write the result to this file (atomically) instead of stdout")
      ->each([](const std::string& path) { check_output_location(path); });
  app.add_flag("--quiet,-q", quiet, "no progress messages on stderr");
}

Format OutputOptions::parsed() const { return as_usage("--format", [&] { return parse_format(format); }); }

void OutputOptions::emit(const std::string& text) const {
  check_interrupt();  // an interrupted run writes nothing
  if (output.empty()) {
    std::cout << text << std::flush;
  } else {
    write_file_atomic(output, text);
  }
}

ProgressFn OutputOptions::progress() const { return terminal_progress(quiet); }

void check_output_location(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw std::invalid_argument(path + ": file: directory " + dir.string() + " does not exist");
  if (!fs::is_directory(dir, ec))
    throw std::invalid_argument(path + ": file: " + dir.string() + " is not a directory");
  if (fs::is_directory(target, ec)) throw std::invalid_argument(path + ": file: is a directory");
  // Create and remove a probe file: the only test that sees permissions,
  // read-only mounts and root's exemptions as the final write will.
  std::string probe = path + ".tmp-XXXXXX";
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw std::invalid_argument(path + ": file: cannot create a file in " + dir.string() + ": " +
                                std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void add_memory_budget_option(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    sub->add_option("--memory-budget", "memory limit for large allocations, refused above it with exit code 5 "
                                       "(e.g. 8G, 512MiB, 50%; default 75% of physical memory)")
        ->envname("SANPATH_MEMORY_BUDGET")
        ->type_name("SIZE")
        ->each([](const std::string& text) {
          try {
            set_memory_budget(parse_byte_size(text, "--memory-budget"));
          } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
          }
        });
  }
}

void add_threads_option(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    sub->add_option("--threads", "threads for everything the command runs: the products of a pass, passes run side "
                                 "by side, path shards and the inputs of a batch, which share them (0: all cores, shared by the MPI "
                                 "ranks on this machine); "
                                 "the output does not depend on it")
        ->type_name("INT")
        ->default_str("0")
        ->envname("SANPATH_THREADS")
        ->each([](const std::string& text) {
          long n = 0;
          try {
            std::size_t used = 0;
            n = std::stol(text, &used);
            if (used != text.size()) throw std::invalid_argument(text);
          } catch (const std::exception&) {
            throw UsageError("--threads: '" + text + "' is not an integer");
          }
          try {
            check_thread_count(n);
          } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
          }
          set_product_threads(static_cast<int>(n));
        });
  }
}

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = [](int) { request_interrupt(); };
  sigemptyset(&sa.sa_mask);
  // SA_RESETHAND: a second Ctrl-C takes the default action (terminate at once).
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  ::sigaction(SIGINT, &sa, nullptr);
}

}  // namespace sanpath::cli

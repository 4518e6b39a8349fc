#pragma once
// Option groups shared by the sanpath subcommands, and their conversion into
// library objects. No mathematics here: parse, call the library, format.
#include <CLI/CLI.hpp>

#include "sanpath/analysis/double_check.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/report/format.hpp"
#include "sanpath/model/model.hpp"

#include <optional>
#include <string>

namespace sanpath::cli {

/// A mistake in the command line itself (exit code 2).
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Exit codes, documented in `sanpath --help`.
enum ExitCode { ok = 0, internal = 1, usage = 2, input = 3, numerical = 4, resource = 5, interrupted = 130 };

/// Checks that an option's text is a decimal integer in [0, 2^64) before
/// CLI11 converts it to an unsigned type (which would wrap "-1" around).
extern const CLI::Validator unsigned_integer;

struct ModelOptions {
  std::string path;
  std::optional<int> first_layers;  ///< --first-layers N
  std::string stream_layers = "auto";  ///< --stream-layers (commands that only run forward passes)
  bool streamable = false;             ///< add() offered --stream-layers
  /// `streaming`: the command offers --stream-layers (its analyses only run
  /// forward passes, which read a streamed model's layers one at a time).
  void add(CLI::App& app, bool required = true, bool streaming = false);
  /// The model; `options` say which word-embedding rows to decode
  /// (InputOptions::load_options); --first-layers is added to them.
  /// `stream_by_default`: --stream-layers auto streams a HuggingFace
  /// checkpoint's layers (one input, whose passes read each layer once
  /// between them; or a batch whose double passes read the weights where
  /// they lie: less memory, no slower).
  Model load(LoadOptions options = {}, bool stream_by_default = false) const;
};

/// The inputs of a command that accepts batches.
struct InputBatch {
  std::vector<InputSpec> inputs;
  /// A batch option was used (--tokens-file, --batch, or --input with X of
  /// shape [b, n, d]): the output is the batch form, even for b = 1.
  bool batch = false;
  std::string description;  ///< the single input's describe(), or describe_batch
};

struct InputOptions {
  std::string file;
  std::string pixels;
  std::vector<std::string> images;  ///< --image: files or folders (ViT, with preprocessor_config.json)
  std::string tokens;
  std::string tokens_file;
  int random_n = 0;
  std::optional<int> batch_size;
  std::uint64_t seed = 0;
  double spread = 1.0;
  std::optional<double> residual;
  /// `required`: exactly one input option must be given; otherwise at most
  /// one. `batches`: also --tokens-file and --batch.
  void add(CLI::App& app, bool required = true, bool batches = false);
  bool given() const {
    return !file.empty() || !pixels.empty() || !images.empty() || !tokens.empty() || !tokens_file.empty() ||
           random_n != 0;
  }
  /// One input; a batch is refused naming the option. `model`, loaded from
  /// `model_path`, is what --image needs (io/image.hpp read_images): the
  /// image processor beside it, and the check that it takes images.
  InputSpec spec(const Model* model = nullptr, const std::string& model_path = "") const;
  /// The input or the batch (commands with `batches`).
  InputBatch specs(const Model* model = nullptr, const std::string& model_path = "") const;
  /// specs(), or `fallback` alone when no input option is given.
  InputBatch specs_or(InputSpec fallback, const Model* model = nullptr, const std::string& model_path = "") const;
  /// The options name one input for sure (--tokens, or --random-input
  /// without --batch); --input may hold a batch, unknown before it is read.
  bool one_input() const { return (!tokens.empty() || random_n != 0) && !batch_size; }
  /// What a model load needs for these inputs: the word-embedding rows of
  /// the token ids of --tokens / --tokens-file, none for --input,
  /// --random-input or no input option (the commands' own default input is
  /// random). Inputs that cannot be read ask for every row; their error is
  /// reported where they are read (specs()), as without this request.
  LoadOptions load_options() const;
};

struct VariantOptions {
  std::string skip, mlp, layernorm, mask;
  void add(CLI::App& app);
  VariantOverride overrides() const;
};

struct PrecisionOptions {
  std::string precision = "auto";
  int digits = 20;
  long max_bits = 0;
  bool no_confirm = false;
  std::string method;  ///< empty: the request's default (centred for auto, direct for a fixed precision)
  std::string check = "auto";
  std::string measures = "none";
  std::string emulate;  ///< empty: no emulation
  void add(CLI::App& app, const std::string& default_text = "auto");
  /// --measures: the measures of math.md §9 beside the residuals.
  void add_measures(CLI::App& app);
  /// --emulate: the model as a fp32/bf16/fp16 framework evaluates it, beside the exact values.
  void add_emulate(CLI::App& app);
  /// --check's help: what every command's --check means, then `details`,
  /// what this command does with each method.
  static std::string check_help(const std::string& details);
  /// --check (default auto): how the digits are confirmed or proven; the
  /// details of the commands built on analyze_forward unless given.
  CLI::Option* add_check(CLI::App& app, const std::string& details = "");
  PrecisionRequest request() const;
  /// request(), refusing a --check that `scope` cannot honour (require_check).
  PrecisionRequest request_in(CheckScope scope) const;
  /// request(), refusing a --check that does not apply to the precision or `center`.
  PrecisionRequest request_for(Center center) const;
};

struct OutputOptions {
  std::string format = "table";
  std::string output;
  bool quiet = false;
  void add(CLI::App& app);
  Format parsed() const;
  /// Writes to --output atomically, or to stdout.
  void emit(const std::string& text) const;
  /// A progress printer on stderr when it is a terminal and not --quiet.
  ProgressFn progress() const;
};

/// Converts a library parse error into a UsageError naming the option.
template <class F> auto as_usage(const std::string& option, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    throw UsageError(option + ": " + e.what());
  }
}

/// Throws std::invalid_argument "<path>: file: <why>" unless a file can be
/// created at `path` (its directory exists and is writable): checked when
/// --output is parsed, before any work.
void check_output_location(const std::string& path);
/// Adds --memory-budget SIZE (env SANPATH_MEMORY_BUDGET) to every subcommand
/// registered so far; the value sets sanpath::set_memory_budget.
void add_memory_budget_option(CLI::App& app);

/// Adds --threads N to every subcommand registered so far: the threads of
/// everything the command runs (products, passes side by side, path shards,
/// the inputs of a batch); the value sets sanpath::set_product_threads, and
/// the commands hand product_threads() to the library's parallel sections.
void add_threads_option(CLI::App& app);
/// SIGINT sets the library's interrupt flag (sanpath::request_interrupt);
/// the computation stops at its next check with exit code 130 and writes
/// nothing. A second SIGINT terminates at once.
void install_interrupt_handler();

void register_forward(CLI::App& app);
void register_collapse(CLI::App& app);
void register_init(CLI::App& app);
void register_report(CLI::App& app);
void register_graph(CLI::App& app);
void register_paths(CLI::App& app);
void register_bounds(CLI::App& app);

}  // namespace sanpath::cli

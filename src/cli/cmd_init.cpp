#include "common.hpp"

#include "sanpath/io/checkpoint.hpp"
#include "sanpath/model/random.hpp"

namespace sanpath::cli {

void register_init(CLI::App& app) {
  auto* cmd = app.add_subcommand("init", "Write a seeded random model (native or a HuggingFace layout)");
  struct Opts {
    std::string out, layout = "native", init = "gaussian", activation = "gelu", dtype = "F64", family;
    int layers = 6, heads = 4, d_model = 64, d_qk = 0, d_v = 0, d_ff = -1, vocab = 0, max_positions = 512, kv_heads = 0;
    double std = 0.02, bias_std = 0.0, ln_eps = 1e-12, rope_theta = 10000.0;
    std::uint64_t seed = 0;
    bool shared = false;
    VariantOptions variant;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--out", o->out, "output: a .safetensors file (native) or a folder (HuggingFace layouts)")
      ->required();
  cmd->add_option("--layout", o->layout, "native|bert|roberta|distilbert|gpt2|albert|llama|mistral|qwen2")
      ->default_val("native");
  cmd->add_option("--dtype", o->dtype, "F64|F32: tensor dtype of a HuggingFace layout (native is F64)")
      ->default_val("F64");
  cmd->add_option("--family", o->family,
                  "llama: with --layout native, a native file of the Llama family's structure (default: the "
                  "layout's own family)");
  cmd->add_option("--kv-heads", o->kv_heads, "Llama family: key/value heads H_kv (divides H; default H)");
  cmd->add_option("--rope-theta", o->rope_theta, "Llama family: rotary base")->default_val(10000.0);
  cmd->add_option("--layers", o->layers, "number of layers L")->default_val(6);
  cmd->add_option("--heads", o->heads, "heads per layer H")->default_val(4);
  cmd->add_option("--d-model", o->d_model, "model width d")->default_val(64);
  cmd->add_option("--d-qk", o->d_qk, "query/key width per head (default d/H)");
  cmd->add_option("--d-v", o->d_v, "value width per head (default d/H)");
  cmd->add_option("--d-ff", o->d_ff, "MLP width (default 4d; 0 = no MLP weights)");
  cmd->add_option("--init", o->init, "gaussian (N(0, std²)) | xavier (N(0, 2/(fan_in+fan_out)))")
      ->default_val("gaussian");
  cmd->add_option("--std", o->std, "std of the gaussian initialisation (BERT: 0.02)")->default_val(0.02);
  cmd->add_option("--bias-std", o->bias_std, "std of the biases (0: zero biases)")->default_val(0.0);
  cmd->add_option("--seed", o->seed, "seed")->default_val(0)->check(unsigned_integer);
  cmd->add_flag("--shared-layers", o->shared, "one layer's weights shared by all L layers (ALBERT-style)");
  cmd->add_option("--activation", o->activation, "relu|gelu|gelu_tanh")->default_val("gelu");
  auto* ln_eps =
      cmd->add_option("--ln-eps", o->ln_eps, "LayerNorm epsilon (RMSNorm's for the Llama family: default 1e-5 there)")
          ->default_val(1e-12);
  cmd->add_option("--vocab", o->vocab, "add BERT-style embeddings with this vocabulary size (0: none)")->default_val(0);
  cmd->add_option("--max-positions", o->max_positions, "position table size with --vocab")->default_val(512);
  o->variant.add(*cmd);
  cmd->footer(
      "\nThe model's own structure defaults to BERT's (skip on, mlp residual, layernorm post, mask none); "
      "override it with --skip/--mlp/--layernorm/--mask. Llama-family layouts (and --family llama) build "
      "RMSNorm, rotary embeddings, grouped-query attention and a SwiGLU MLP (pre-norm, causal; activation "
      "silu; only qwen2 keeps --bias-std biases).\n\nExamples:\n"
      "  sanpath init --out san.safetensors --layers 6 --heads 4 --d-model 64 --skip off --mlp none "
      "--layernorm none\n"
      "  sanpath init --out albert10.safetensors --layers 10 --shared-layers --std 0.02 --seed 7\n"
      "  sanpath init --layout bert --out bert-base --layers 12 --heads 12 --d-model 768 --d-ff 3072 "
      "--vocab 30522 --dtype F32\n"
      "  sanpath init --out tiny-llama --layout llama --layers 2 --heads 4 --kv-heads 2 --d-model 32 --vocab 64\n");
  cmd->callback([o, ln_eps] {
    RandomModelSpec s;
    Architecture& a = s.arch;
    a.layers = o->layers;
    a.heads = o->heads;
    a.d_model = o->d_model;
    if (o->heads < 1) throw UsageError("--heads: must be at least 1");
    if ((o->d_qk == 0 || o->d_v == 0) && o->d_model % o->heads != 0)
      throw UsageError("--d-model: " + std::to_string(o->d_model) + " is not divisible by --heads " +
                       std::to_string(o->heads) + " (give --d-qk and --d-v)");
    a.d_qk = o->d_qk ? o->d_qk : o->d_model / o->heads;
    a.d_v = o->d_v ? o->d_v : o->d_model / o->heads;
    a.d_ff = o->d_ff >= 0 ? o->d_ff : 4 * o->d_model;
    a.activation = as_usage("--activation", [&] { return parse_activation(o->activation); });
    a.ln_eps = o->ln_eps;
    a.shared_layers = o->shared;
    const bool llama = o->layout == "llama" || o->layout == "mistral" || o->layout == "qwen2" || o->family == "llama";
    if (!o->family.empty() && o->family != "llama") throw UsageError("--family: '" + o->family + "' is not llama");
    if (!llama && o->kv_heads != 0) throw UsageError("--kv-heads: only for the Llama family layouts");
    a.variant = o->variant.overrides().apply(llama ? Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal}
                                                   : Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none});
    if (llama) {
      if (ln_eps->count() == 0) a.ln_eps = 1e-5;
      a.norm = NormKind::rms;
      a.kv_heads = o->kv_heads;
      a.rope_theta = o->rope_theta;
      a.gated_mlp = true;
      a.activation = Activation::silu;
    }
    if (a.d_ff == 0 && a.variant.mlp != MlpKind::none)
      throw UsageError("--d-ff: 0 (no MLP weights) needs --mlp none");
    if (o->init != "gaussian" && o->init != "xavier")
      throw UsageError("--init: '" + o->init + "' is not one of gaussian, xavier");
    s.init = o->init == "xavier" ? InitKind::xavier : InitKind::gaussian;
    s.std = o->std;
    s.bias_std = o->bias_std;
    s.seed = o->seed;
    s.vocab = o->vocab;
    s.max_positions = o->max_positions;
    if (o->layout == "native") {
      if (o->dtype != "F64") throw UsageError("--dtype: native files are F64");
      save_native(as_usage("init", [&] { return random_model(s); }), o->out);
      return;
    }
    const Layout layout = as_usage("--layout", [&] { return parse_layout(o->layout); });
    // The random embeddings take the layout's kind; ALBERT's have none to draw.
    if (layout != Layout::albert) s.embeddings = layout;
    if (layout == Layout::albert && o->vocab > 0)
      throw UsageError("--vocab: the albert layout is written without embeddings");
    if (layout == Layout::albert && !o->shared) throw UsageError("--layout albert: needs --shared-layers");
    save_hf(as_usage("init", [&] { return random_model(s); }), o->out, layout, o->dtype);
  });
}

}  // namespace sanpath::cli

#include "common.hpp"

#include "sanpath/io/families.hpp"
#include "sanpath/io/random_checkpoint.hpp"

namespace sanpath::cli {

namespace {

bool own_structure(const LayoutFamily& f) { return f.own_structure; }
bool key_value_heads(const LayoutFamily& f) { return f.key_value_heads; }

/// `--layout`'s help: every family of the registry with its display name and input.
std::string layout_help() {
  std::string s;
  for (const LayoutFamily& f : layout_families())
    s += (s.empty() ? "" : ", ") + f.name + " (" + f.display + (f.input == InputKind::pixels ? "; images" : "") + ")";
  return "native (a sanpath file of any structure; the default) or the HuggingFace layout of a family: " + s;
}

}  // namespace

void register_init(CLI::App& app) {
  auto* cmd = app.add_subcommand("init", "Write a seeded random model (native or a HuggingFace layout)");
  struct Opts {
    std::string out, layout = "native", init = "gaussian", activation = "gelu", dtype = "F64", family;
    int layers = 6, heads = 4, d_model = 64, d_qk = 0, d_v = 0, d_ff = -1, vocab = 0, max_positions = 512, kv_heads = 0;
    double std = 0.02, bias_std = 0.0, ln_eps = 1e-12, rope_theta = 10000.0;
    std::uint64_t seed = 0;
    bool shared = false;
    VariantOptions variant;
    // Family options (families.md), passed to family_structure.
    std::optional<double> rotary_fraction, softcap, query_pre_attn_scalar, rope_local_base, rope_linear_factor;
    std::optional<int> sliding_window, rel_buckets, rel_max_distance, clamp_len, image_size, patch_size, channels,
        embed_dim, layer_pattern, head_dim;
    std::string parallel_residual, gated, attn_type, pre_norm;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--out", o->out, "output: a .safetensors file (native) or a folder (HuggingFace layouts)")
      ->required();
  std::vector<std::string> layouts{"native"};
  for (const LayoutFamily& f : layout_families()) layouts.push_back(f.name);
  cmd->add_option("--layout", o->layout, layout_help())->default_val("native")->check(CLI::IsMember(layouts));
  cmd->add_option("--dtype", o->dtype, "F64|F32: tensor dtype of a HuggingFace layout (native is F64)")
      ->default_val("F64");
  cmd->add_option("--family", o->family,
                  "llama: with --layout native, a native file of the Llama family's structure (default: the "
                  "layout's own family)");
  cmd->add_option("--kv-heads", o->kv_heads,
                  family_names(key_value_heads) + ": key/value heads H_kv (divides H; default H)");
  cmd->add_option("--rope-theta", o->rope_theta,
                  "rotary base (Llama family, gpt_neox, phi, gemma, gemma2, qwen3; gemma3: the full-attention "
                  "layers')")
      ->default_val(10000.0);
  auto* family = cmd->add_option_group("family options", "the options of the families of families.md");
  family->add_option("--rotary-fraction", o->rotary_fraction,
                     "gpt_neox (rotary_pct, default 0.25), phi (partial_rotary_factor, default 0.5): rotated share "
                     "of each head");
  family->add_option("--parallel-residual", o->parallel_residual, "gpt_neox: on|off (default on)");
  family->add_option("--sliding-window", o->sliding_window,
                     "gemma2: window W of the even layers; gemma3: of the sliding layers (default 4096; 0: none)");
  family->add_option("--layer-pattern", o->layer_pattern,
                     "gemma3: sliding_window_pattern P, layer l attends fully iff (l + 1) mod P = 0 (default 6)");
  family->add_option("--rope-local-base", o->rope_local_base,
                     "gemma3: rope_local_base_freq, the sliding layers' rotary base (default 10000)");
  family->add_option("--rope-linear-factor", o->rope_linear_factor,
                     "gemma3: linear rope_scaling factor of the full-attention layers (default 1: none)");
  family->add_option("--softcap", o->softcap, "gemma2: attention logit soft-cap (default 50; 0: none)");
  family->add_option("--query-pre-attn-scalar", o->query_pre_attn_scalar,
                     "gemma2, gemma3: the score scale is its inverse square root (default head_dim)");
  family->add_option("--rel-buckets", o->rel_buckets, "t5: relative_attention_num_buckets (default 32)");
  family->add_option("--rel-max-distance", o->rel_max_distance, "t5: relative_attention_max_distance (default 128)");
  family->add_option("--gated", o->gated, "t5: on for gated-gelu (v1.1, Flan), off for relu (default off)");
  family->add_option("--clamp-len", o->clamp_len, "xlnet: clamp relative positions to [-N, N] (default: none)");
  family->add_option("--attn-type", o->attn_type, "xlnet: bi|uni (uni: causal; default bi)");
  family->add_option("--image-size", o->image_size, "vit: image side S in pixels (default 224)");
  family->add_option("--patch-size", o->patch_size, "vit: patch side p (default 16)");
  family->add_option("--channels", o->channels, "vit: image channels (default 3)");
  family->add_option("--embed-dim", o->embed_dim, "opt: word_embed_proj_dim e (default d; e != d adds project_in)");
  family->add_option("--pre-norm", o->pre_norm, "opt: do_layer_norm_before on|off (default on)");
  cmd->add_option("--layers", o->layers, "number of layers L")->default_val(6);
  cmd->add_option("--heads", o->heads, "heads per layer H")->default_val(4);
  cmd->add_option("--d-model", o->d_model, "model width d")->default_val(64);
  cmd->add_option("--d-qk", o->d_qk, "query/key width per head (default d/H)");
  cmd->add_option("--d-v", o->d_v, "value width per head (default d/H)");
  cmd->add_option("--head-dim", o->head_dim, "both --d-qk and --d-v (config.json's head_dim; default: theirs)");
  cmd->add_option("--d-ff", o->d_ff, "MLP width (default 4d; 0 = no MLP weights)");
  cmd->add_option("--init", o->init, "gaussian (N(0, std²)) | xavier (N(0, 2/(fan_in+fan_out)))")
      ->default_val("gaussian");
  cmd->add_option("--std", o->std, "std of the gaussian initialisation (BERT: 0.02)")->default_val(0.02);
  cmd->add_option("--bias-std", o->bias_std, "std of the biases (0: zero biases)")->default_val(0.0);
  cmd->add_option("--seed", o->seed, "seed")->default_val(0)->check(unsigned_integer);
  cmd->add_flag("--shared-layers", o->shared, "one layer's weights shared by all L layers (ALBERT-style)");
  auto* activation = cmd->add_option("--activation", o->activation,
                                     "relu|gelu|gelu_tanh|silu (default gelu; the families of families.md: their "
                                     "config's default)")
                         ->default_val("gelu");
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
      "  sanpath init --out tiny-llama --layout llama --layers 2 --heads 4 --kv-heads 2 --d-model 32 --vocab 64\n"
      "  sanpath init --out tiny-pythia --layout gpt_neox --layers 2 --heads 4 --d-model 32 --vocab 64\n"
      "  sanpath init --out tiny-vit --layout vit --layers 2 --heads 4 --d-model 32 --image-size 32 --patch-size 8\n"
      "\nThe layouts " + family_names(own_structure) + " take their structure from the family (families.md) and "
      "the family options above; their activation and --ln-eps default to the family's.\n");
  cmd->callback([o, ln_eps, activation] {
    // The library validates and builds (io/random_checkpoint.hpp), as for Python's random_model.
    InitOptions in;
    in.layers = o->layers;
    in.heads = o->heads;
    in.d_model = o->d_model;
    if (o->d_qk) in.d_qk = o->d_qk;
    if (o->d_v) in.d_v = o->d_v;
    in.head_dim = o->head_dim;
    if (o->d_ff >= 0) in.d_ff = o->d_ff;
    in.init = o->init;
    in.std = o->std;
    in.bias_std = o->bias_std;
    in.seed = o->seed;
    in.shared_layers = o->shared;
    if (activation->count() > 0) in.activation = o->activation;
    if (ln_eps->count() > 0) in.ln_eps = o->ln_eps;
    in.vocab = o->vocab;
    in.max_positions = o->max_positions;
    in.variant = o->variant.overrides();
    in.layout = o->layout;
    if (!o->family.empty()) in.family = o->family;
    if (o->kv_heads) in.kv_heads = o->kv_heads;
    in.rope_theta = o->rope_theta;
    const auto on_off = [](const std::string& v, const char* opt) -> std::optional<bool> {
      if (v.empty()) return std::nullopt;
      return as_usage(opt, [&] { return parse_on_off(v, opt); });
    };
    FamilyOptions& f = in.family_options;
    f.rotary_fraction = o->rotary_fraction;
    f.parallel_residual = on_off(o->parallel_residual, "--parallel-residual");
    f.sliding_window = o->sliding_window;
    f.softcap = o->softcap;
    f.query_pre_attn_scalar = o->query_pre_attn_scalar;
    f.layer_pattern = o->layer_pattern;
    f.rope_local_base = o->rope_local_base;
    f.rope_linear_factor = o->rope_linear_factor;
    f.rel_buckets = o->rel_buckets;
    f.rel_max_distance = o->rel_max_distance;
    f.gated = on_off(o->gated, "--gated");
    f.clamp_len = o->clamp_len;
    if (!o->attn_type.empty()) {
      if (o->attn_type != "bi" && o->attn_type != "uni")
        throw UsageError("--attn-type: '" + o->attn_type + "' is not one of bi, uni");
      f.causal = o->attn_type == "uni";
    }
    f.image_size = o->image_size;
    f.patch_size = o->patch_size;
    f.channels = o->channels;
    f.embed_dim = o->embed_dim;
    f.pre_norm = on_off(o->pre_norm, "--pre-norm");
    in.dtype = o->dtype;
    RandomCheckpoint c;
    try {
      c = plan_random_checkpoint(in, OptionSpelling::cli);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    write_random_checkpoint(c, as_usage("init", [&] { return random_model(c.spec); }), o->out);
  });
}

}  // namespace sanpath::cli

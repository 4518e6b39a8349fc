#include "common.hpp"

#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/families.hpp"
#include "sanpath/model/random.hpp"

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
    RandomModelSpec s;
    Architecture& a = s.arch;
    a.layers = o->layers;
    a.heads = o->heads;
    a.d_model = o->d_model;
    if (o->heads < 1) throw UsageError("--heads: must be at least 1");
    if (o->head_dim) {
      if (o->d_qk || o->d_v) throw UsageError("--head-dim: give it or --d-qk/--d-v, not both");
      if (*o->head_dim < 1) throw UsageError("--head-dim: must be at least 1");
      o->d_qk = o->d_v = *o->head_dim;
    }
    if ((o->d_qk == 0 || o->d_v == 0) && o->d_model % o->heads != 0)
      throw UsageError("--d-model: " + std::to_string(o->d_model) + " is not divisible by --heads " +
                       std::to_string(o->heads) + " (give --d-qk and --d-v)");
    a.d_qk = o->d_qk ? o->d_qk : o->d_model / o->heads;
    a.d_v = o->d_v ? o->d_v : o->d_model / o->heads;
    a.d_ff = o->d_ff >= 0 ? o->d_ff : 4 * o->d_model;
    a.activation = as_usage("--activation", [&] { return parse_activation(o->activation); });
    a.ln_eps = o->ln_eps;
    a.shared_layers = o->shared;
    const bool native = o->layout == "native";
    // The HuggingFace layout (unused when native).
    const Layout layout = native ? Layout::bert : as_usage("--layout", [&] { return parse_layout(o->layout); });
    const bool llama = (!native && rotary_family(layout)) || o->family == "llama";
    if (!o->family.empty() && o->family != "llama") throw UsageError("--family: '" + o->family + "' is not llama");
    // The families of families.md: structure from family_structure.
    const bool new_family = !native && layout_family(layout).own_structure;
    const bool grouped = o->family == "llama" || (!native && layout_family(layout).key_value_heads);
    if (!grouped && o->kv_heads != 0)
      throw UsageError("--kv-heads: only for the layouts " + family_names(key_value_heads) + " (and --family llama)");
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
    if (new_family) {
      const VariantOverride ov = o->variant.overrides();
      if (ov.skip || ov.mlp || ov.layernorm || ov.mask)
        throw UsageError("--layout " + o->layout + ": the family's structure is fixed by its config.json; choose "
                         "variants when running it (forward, collapse, … --skip/--mlp/--layernorm/--mask)");
      const FamilyDefaults def = family_defaults(layout);
      if (activation->count() == 0) a.activation = def.activation;
      if (ln_eps->count() == 0) a.ln_eps = def.ln_eps;
      a.kv_heads = o->kv_heads;
      a.rope_theta = o->rope_theta;
      const auto on_off = [](const std::string& v, const char* opt) -> std::optional<bool> {
        if (v.empty()) return std::nullopt;
        return as_usage(opt, [&] { return parse_on_off(v, opt); });
      };
      FamilyOptions f;
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
      s.embeddings = layout;
      as_usage("--layout " + o->layout, [&] {
        family_structure(layout, s, f);
        return 0;
      });
    } else if (o->rotary_fraction || !o->parallel_residual.empty() || o->sliding_window || o->softcap ||
               o->query_pre_attn_scalar || o->rel_buckets || o->rel_max_distance || !o->gated.empty() ||
               o->clamp_len || !o->attn_type.empty() || o->image_size || o->patch_size || o->channels ||
               o->embed_dim || !o->pre_norm.empty() || o->layer_pattern || o->rope_local_base ||
               o->rope_linear_factor) {
      throw UsageError("--layout " + o->layout + ": the family options (--rotary-fraction, …) belong to the layouts " +
                       family_names(own_structure));
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
    if (native) {
      if (o->dtype != "F64") throw UsageError("--dtype: native files are F64");
      save_native(as_usage("init", [&] { return random_model(s); }), o->out);
      return;
    }
    // The random embeddings take the layout's kind; ALBERT's have none to draw.
    if (layout != Layout::albert) s.embeddings = layout;
    if (layout_family(layout).input == InputKind::pixels && o->vocab > 0)
      throw UsageError("--vocab: a " + o->layout + " model takes images, not tokens");
    if (layout == Layout::albert && o->vocab > 0)
      throw UsageError("--vocab: the albert layout is written without embeddings");
    if (layout == Layout::albert && !o->shared) throw UsageError("--layout albert: needs --shared-layers");
    save_hf(as_usage("init", [&] { return random_model(s); }), o->out, layout, o->dtype);
  });
}

}  // namespace sanpath::cli

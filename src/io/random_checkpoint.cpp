#include "sanpath/io/random_checkpoint.hpp"

#include "sanpath/io/families.hpp"

#include <stdexcept>

namespace sanpath {

namespace {

/// Option names and settings as the CLI or Python spells them.
struct Spell {
  OptionSpelling s;
  /// "--kv-heads" or "kv_heads".
  std::string name(std::string field) const {
    if (s == OptionSpelling::python) return field;
    for (char& c : field)
      if (c == '_') c = '-';
    return "--" + field;
  }
  /// "--mlp none" or "mlp='none'".
  std::string setting(const std::string& field, const std::string& value) const {
    return s == OptionSpelling::cli ? name(field) + " " + value : field + "='" + value + "'";
  }
  /// "--shared-layers" or "shared_layers=True".
  std::string flag(const std::string& field) const { return s == OptionSpelling::cli ? name(field) : field + "=True"; }
  /// "--layout gpt_neox" or "layout gpt_neox".
  std::string layout(const std::string& value) const { return name("layout") + " " + value; }
};

/// Runs a library parse or check, its message prefixed with `what`.
template <class F> auto naming(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(what + ": " + e.what());
  }
}

[[noreturn]] void refuse(const std::string& what, const std::string& why) {
  throw std::invalid_argument(what + ": " + why);
}

/// Whether any of the family options is set.
bool any_family_option(const FamilyOptions& f) {
  return f.rotary_fraction || f.parallel_residual || f.sliding_window || f.softcap || f.query_pre_attn_scalar ||
         f.rel_buckets || f.rel_max_distance || f.gated || f.clamp_len || f.causal || f.image_size || f.patch_size ||
         f.channels || f.embed_dim || f.pre_norm || f.layer_pattern || f.rope_local_base || f.rope_linear_factor;
}

}  // namespace

RandomCheckpoint plan_random_checkpoint(const InitOptions& o, OptionSpelling spelling) {
  const Spell sp{spelling};
  RandomCheckpoint c;
  RandomModelSpec& s = c.spec;
  Architecture& a = s.arch;
  a.layers = o.layers;
  a.heads = o.heads;
  a.d_model = o.d_model;
  if (o.heads < 1) refuse(sp.name("heads"), "must be at least 1");
  std::optional<int> d_qk = o.d_qk, d_v = o.d_v;
  if (o.head_dim) {
    if (d_qk || d_v) refuse(sp.name("head_dim"), "give it or " + sp.name("d_qk") + "/" + sp.name("d_v") + ", not both");
    if (*o.head_dim < 1) refuse(sp.name("head_dim"), "must be at least 1");
    d_qk = d_v = o.head_dim;
  }
  if ((!d_qk || !d_v) && o.d_model % o.heads != 0)
    refuse(sp.name("d_model"), std::to_string(o.d_model) + " is not divisible by " + sp.name("heads") + " " +
                                   std::to_string(o.heads) + " (give " + sp.name("d_qk") + " and " + sp.name("d_v") +
                                   ")");
  a.d_qk = d_qk ? *d_qk : o.d_model / o.heads;
  a.d_v = d_v ? *d_v : o.d_model / o.heads;
  a.d_ff = o.d_ff ? *o.d_ff : 4 * o.d_model;
  a.activation = parse_activation(o.activation.value_or("gelu"), sp.name("activation"));
  a.ln_eps = o.ln_eps.value_or(1e-12);
  a.shared_layers = o.shared_layers;

  const bool native = !o.layout || *o.layout == "native";
  if (!native) c.layout = parse_layout(*o.layout);  // its message names the layout
  if (o.family && *o.family != "llama") refuse(sp.name("family"), "'" + *o.family + "' is not llama");
  const bool llama = (c.layout && rotary_family(*c.layout)) || o.family;
  const bool own_structure = c.layout && layout_family(*c.layout).own_structure;
  const bool grouped = o.family || (c.layout && layout_family(*c.layout).key_value_heads);
  const int kv_heads = o.kv_heads.value_or(0);  // 0: as many as heads
  if (!grouped && kv_heads != 0)
    refuse(sp.name("kv_heads"), "only for the layouts " +
                                    family_names([](const LayoutFamily& f) { return f.key_value_heads; }) +
                                    (spelling == OptionSpelling::cli ? " (and --family llama)" : ""));
  // The model's own variant: what a layout's files are read as (GPT-2 and the Llama family pre-LN and
  // causal, the BERT family post-LN without a mask; the families with a structure of their own set it below).
  const bool pre_causal = llama || c.layout == Layout::gpt2;
  a.variant = o.variant.apply(pre_causal ? Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal}
                                         : Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none});
  const std::string where =
      sp.layout(o.layout ? *o.layout : spelling == OptionSpelling::cli ? std::string("native") : std::string("None"));
  const VariantOverride& ov = o.variant;
  if (!native && (ov.skip || ov.mlp || ov.layernorm || ov.mask))
    refuse(where, "the family's structure is fixed by its config.json; choose variants when running it (forward, "
                  "collapse, … " + (spelling == OptionSpelling::cli ? std::string("--skip/--mlp/--layernorm/--mask")
                                                                     : std::string("skip=/mlp=/layernorm=/mask=")) +
                      ")");
  if (llama) {
    if (!o.ln_eps) a.ln_eps = 1e-5;
    a.norm = NormKind::rms;
    a.kv_heads = kv_heads;
    a.rope_theta = o.rope_theta;
    a.gated_mlp = true;
    a.activation = Activation::silu;
  }
  if (own_structure) {
    const FamilyDefaults def = family_defaults(*c.layout);
    if (!o.activation) a.activation = def.activation;
    if (!o.ln_eps) a.ln_eps = def.ln_eps;
    a.kv_heads = kv_heads;
    a.rope_theta = o.rope_theta;
    s.embeddings = *c.layout;
    naming(where, [&] {
      family_structure(*c.layout, s, o.family_options);
      return 0;
    });
  } else if (any_family_option(o.family_options)) {
    refuse(where, "the family options (" + sp.name("rotary_fraction") + ", …) belong to the layouts " +
                      family_names([](const LayoutFamily& f) { return f.own_structure; }));
  }
  if (a.d_ff == 0 && a.variant.mlp != MlpKind::none)
    refuse(sp.name("d_ff"), "0 (no MLP weights) needs " + sp.setting("mlp", "none"));
  if (o.init != "gaussian" && o.init != "xavier")
    refuse(sp.name("init"), "'" + o.init + "' is not one of gaussian, xavier");
  s.init = o.init == "xavier" ? InitKind::xavier : InitKind::gaussian;
  s.std = o.std;
  s.bias_std = o.bias_std;
  s.seed = o.seed;
  s.vocab = o.vocab;
  s.max_positions = o.max_positions;
  c.dtype = o.dtype;  // save_hf refuses one it does not write
  if (!c.layout) {
    if (o.dtype != "F64") refuse(sp.name("dtype"), "native files are F64");
    return c;
  }
  const Layout layout = *c.layout;
  // The random embeddings take the layout's kind; ALBERT's have none to draw.
  if (layout != Layout::albert) s.embeddings = layout;
  if (layout_family(layout).input == InputKind::pixels && o.vocab > 0)
    refuse(sp.name("vocab"), "a " + to_string(layout) + " model takes images, not tokens");
  if (layout == Layout::albert && o.vocab > 0)
    refuse(sp.name("vocab"), "the albert layout is written without embeddings");
  if (layout == Layout::albert && !o.shared_layers) refuse(sp.layout("albert"), "needs " + sp.flag("shared_layers"));
  return c;
}

void write_random_checkpoint(const RandomCheckpoint& c, const Model& model, const std::string& out) {
  if (c.layout)
    save_hf(model, out, *c.layout, c.dtype);
  else
    save_native(model, out);
}

}  // namespace sanpath

// The layout families sanpath knows, their public registry (families.hpp),
// and detecting which one a checkpoint is. Adding a family is one entry in
// `families()`.
#include "hf_layout.hpp"

#include <algorithm>
#include <stdexcept>

namespace sanpath::io {

const std::vector<Family>& families() {
  // Detection order: a family whose tensor marks contain another's comes first.
  // Phi's, OPT's, Gemma 2's, Gemma 3's and Qwen3's tensor names contain the Llama family's mark
  // (".self_attn.q_proj."): they come first; Gemma 3 (Gemma 2's mark and Qwen3's) before both; Gemma 3
  // and Gemma 2 before Gemma, whose architectures prefix ("Gemma") is theirs too.
  static const std::vector<Family> all = {
      albert_family(), gpt2_family(),  distilbert_family(), roberta_family(), bert_family(), xlnet_family(),
      t5_family(),     gpt_neox_family(), phi_family(),     opt_family(),     vit_family(),  gemma3_family(),
      gemma2_family(), gemma_family(), qwen3_family(),      llama_family(),   mistral_family(), qwen2_family()};
  return all;
}

}  // namespace sanpath::io

namespace sanpath {

std::string to_string(InputKind k) { return k == InputKind::pixels ? "pixels" : "tokens"; }

const std::vector<LayoutFamily>& layout_families() {
  static const std::vector<LayoutFamily> all = [] {
    std::vector<LayoutFamily> out;
    for (const io::Family& f : io::families())
      out.push_back(LayoutFamily{f.layout, to_string(f.layout), f.display, f.model_types, f.input, f.key_value_heads,
                                 f.structure != nullptr, f.options});
    std::sort(out.begin(), out.end(), [](const LayoutFamily& a, const LayoutFamily& b) { return a.layout < b.layout; });
    return out;
  }();
  return all;
}

const LayoutFamily& layout_family(Layout layout) {
  for (const LayoutFamily& f : layout_families())
    if (f.layout == layout) return f;
  throw std::logic_error("layout_family: no entry for layout " + to_string(layout));
}

std::string family_display_names() {
  std::string s;
  for (const LayoutFamily& f : layout_families()) s += (s.empty() ? "" : ", ") + f.display;
  return s;
}

}  // namespace sanpath

namespace sanpath::io {

const Family& family(Layout l) {
  for (const Family& f : families())
    if (f.layout == l) return f;
  throw std::logic_error("family: no table for layout " + to_string(l));
}

namespace {

/// The model_type values of every family, in alphabetical order.
std::string known_layouts() {
  std::vector<std::string> types;
  for (const Family& f : families()) types.insert(types.end(), f.model_types.begin(), f.model_types.end());
  std::sort(types.begin(), types.end());
  std::string s;
  for (const std::string& t : types) s += (s.empty() ? "" : ", ") + t;
  return s;
}

}  // namespace

const Family& detect_family(const HfConfig& c, const TensorStore& f) {
  if (c.has("model_type")) {
    const std::string t = c.string_or("model_type", "");
    for (const Family& fam : families())
      for (const std::string& m : fam.model_types)
        if (t == m) return fam;
    fail(c.path, "model_type", "'" + t + "' is not a layout sanpath knows (known: " + known_layouts() + ")");
  }
  if (c.has("architectures") && c.j.at("architectures").is_array())
    for (const json& arch : c.j.at("architectures")) {
      if (!arch.is_string()) continue;
      const std::string s = arch.get<std::string>();
      for (const Family& fam : families())
        if (s.rfind(fam.architecture, 0) == 0) return fam;
    }
  const auto named = [&](const std::string& mark) {
    for (const TensorInfo* t : f.tensors())
      if (t->name.find(mark) != std::string::npos) return true;
    return false;
  };
  for (const Family& fam : families())
    if (!fam.tensor_mark.empty() && named(fam.tensor_mark) && (fam.second_mark.empty() || named(fam.second_mark)))
      return fam;
  fail(c.path, "model_type",
       "missing, and neither architectures nor the tensor names identify a layout sanpath knows (known: " +
           known_layouts() + ")");
}

}  // namespace sanpath::io

namespace sanpath {

FamilyDefaults family_defaults(Layout layout) {
  switch (layout) {
    case Layout::bert:
    case Layout::roberta:
    case Layout::albert:
    case Layout::distilbert:
    case Layout::xlnet:
    case Layout::vit: return {Activation::gelu, 1e-12};
    case Layout::gpt2: return {Activation::gelu_tanh, 1e-5};
    case Layout::llama:
    case Layout::mistral:
    case Layout::qwen2: return {Activation::silu, 1e-5};
    case Layout::gpt_neox: return {Activation::gelu, 1e-5};
    case Layout::phi: return {Activation::gelu_tanh, 1e-5};
    case Layout::opt: return {Activation::relu, 1e-5};
    case Layout::gemma:
    case Layout::gemma2:
    case Layout::gemma3: return {Activation::gelu_tanh, 1e-6};
    case Layout::qwen3: return {Activation::silu, 1e-6};
    case Layout::t5: return {Activation::relu, 1e-6};
  }
  return {};
}

void family_structure(Layout layout, RandomModelSpec& spec, const FamilyOptions& o) {
  const io::Family& f = io::family(layout);
  const auto refuse = [&](bool set, const std::string& option) {
    if (set && std::find(f.options.begin(), f.options.end(), option) == f.options.end())
      throw std::invalid_argument(option + ": not an option of the " + to_string(layout) + " layout");
  };
  refuse(o.rotary_fraction.has_value(), "rotary_fraction");
  refuse(o.parallel_residual.has_value(), "parallel_residual");
  refuse(o.sliding_window.has_value(), "sliding_window");
  refuse(o.softcap.has_value(), "softcap");
  refuse(o.query_pre_attn_scalar.has_value(), "query_pre_attn_scalar");
  refuse(o.rel_buckets.has_value(), "rel_buckets");
  refuse(o.rel_max_distance.has_value(), "rel_max_distance");
  refuse(o.gated.has_value(), "gated");
  refuse(o.clamp_len.has_value(), "clamp_len");
  refuse(o.causal.has_value(), "causal");
  refuse(o.image_size.has_value(), "image_size");
  refuse(o.patch_size.has_value(), "patch_size");
  refuse(o.channels.has_value(), "channels");
  refuse(o.embed_dim.has_value(), "embed_dim");
  refuse(o.pre_norm.has_value(), "pre_norm");
  refuse(o.layer_pattern.has_value(), "layer_pattern");
  refuse(o.rope_local_base.has_value(), "rope_local_base");
  refuse(o.rope_linear_factor.has_value(), "rope_linear_factor");
  if (f.structure) f.structure(spec, o);
}

}  // namespace sanpath

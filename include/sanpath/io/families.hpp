#pragma once
/// \file families.hpp
/// The registry of layout families: every family sanpath loads and writes,
/// with the names each list needs. The CLI's `--model` help and `init
/// --layout` choices, Python's `sanpath.LAYOUTS` and `sanpath.FAMILIES` are
/// generated from it; a test holds README.md's and docs/families.md's family
/// tables to it. Each entry is read from the family's own file
/// (src/io/layout_<family>.cpp), so adding a family there adds it here.
///
/// \code
///   for (const LayoutFamily& f : layout_families()) std::cout << f.name << ": " << f.display << '\n';
///   layout_family(Layout::vit).input;  // InputKind::pixels
///   family_display_names();            // "BERT, GPT-2, ALBERT, RoBERTa, …, ViT"
/// \endcode

#include "sanpath/model/model.hpp"

#include <string>
#include <vector>

namespace sanpath {

/// What a family's models embed: token ids (`--tokens`) or images (`--pixels`).
enum class InputKind { tokens, pixels };
/// "tokens" or "pixels".
std::string to_string(InputKind k);

/// One layout family.
struct LayoutFamily {
  Layout layout;
  std::string name;                      ///< to_string(layout): `init --layout`, save_hf, Python LAYOUTS
  std::string display;                   ///< in prose and tables: "GPT-2", "Gemma 2", "T5 encoder"
  std::vector<std::string> model_types;  ///< the config.json model_type values it loads
  InputKind input = InputKind::tokens;
  bool key_value_heads = false;          ///< grouped key/value heads (`init --kv-heads`)
  /// `init --layout` takes its structure from family_structure (the family
  /// options below, families.md) rather than from the variant options.
  bool own_structure = false;
  /// The FamilyOptions fields it takes ("rotary_fraction", …; checkpoint.hpp).
  std::vector<std::string> options;
};

/// Every family, in the order of the Layout enum (one entry per value).
const std::vector<LayoutFamily>& layout_families();
/// The entry of `layout`.
const LayoutFamily& layout_family(Layout layout);
/// The display names joined by ", " in registry order ("BERT, GPT-2, …, ViT").
std::string family_display_names();
/// The names of the families `keep` accepts, joined by `separator`.
template <class Keep> std::string family_names(Keep keep, const std::string& separator = ", ") {
  std::string s;
  for (const LayoutFamily& f : layout_families())
    if (keep(f)) s += (s.empty() ? "" : separator) + f.name;
  return s;
}

}  // namespace sanpath

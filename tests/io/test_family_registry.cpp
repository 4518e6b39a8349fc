// The family registry (io/families.hpp): one entry per layout, names that
// load, save and parse, and the documentation's family tables (README.md,
// docs/families.md) listing exactly its families.
#include "sanpath/io/families.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace sanpath;

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

/// The cells of a Markdown table row "| a | b |".
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '|' && line[i - 1] != '\\') {
      out.push_back(trim(cell));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return out;
}

bool starts_with_family(const std::string& cell) {
  std::string lower;
  for (char c : cell) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.rfind("family", 0) == 0;
}

/// The first cells of the rows of each family table of the file (a table
/// whose header's first cell starts with "family", wherever it lies); none
/// when the file does not exist.
std::vector<std::vector<std::string>> family_tables(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<std::vector<std::string>> tables;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    const bool header = lines[i].rfind("|", 0) == 0 && lines[i + 1].rfind("|---", 0) == 0;
    if (!header || cells(lines[i]).empty() || !starts_with_family(cells(lines[i]).front())) continue;
    std::vector<std::string> rows;
    for (std::size_t j = i + 2; j < lines.size() && lines[j].rfind("|", 0) == 0; ++j) rows.push_back(cells(lines[j]).front());
    tables.push_back(rows);
  }
  return tables;
}

/// The names a table cell gives: its `backticked` words (model_type or
/// layout names) where it has any, else its display names separated by ','
/// or '/'.
std::vector<std::string> names_in(const std::string& cell) {
  std::vector<std::string> out;
  for (std::size_t a = cell.find('`'); a != std::string::npos; a = cell.find('`', a + 1)) {
    const std::size_t b = cell.find('`', a + 1);
    if (b == std::string::npos) break;
    out.push_back(cell.substr(a + 1, b - a - 1));
    a = b;
  }
  if (!out.empty()) return out;
  std::string name;
  for (char c : cell + ",") {
    if (c == ',' || c == '/') {
      if (!trim(name).empty()) out.push_back(trim(name));
      name.clear();
    } else {
      name += c;
    }
  }
  return out;
}

/// The registry's family a name denotes: its layout name, a model_type or its display name.
const LayoutFamily* family_named(const std::string& name) {
  for (const LayoutFamily& f : layout_families()) {
    if (name == f.name || name == f.display) return &f;
    if (std::find(f.model_types.begin(), f.model_types.end(), name) != f.model_types.end()) return &f;
  }
  return nullptr;
}

/// Fails naming each family a table of `path` lists and the registry lacks, and each it lacks.
void table_matches_registry(const std::string& path, const std::vector<std::string>& table) {
  std::set<Layout> listed;
  for (const std::string& cell : table)
    for (const std::string& name : names_in(cell)) {
      const LayoutFamily* f = family_named(name);
      INFO(path << ": the family table's row \"" << cell << "\" names \"" << name
                << "\", which is no family of the registry (io/families.hpp)");
      CHECK(f != nullptr);
      if (f) listed.insert(f->layout);
    }
  for (const LayoutFamily& f : layout_families()) {
    INFO(path << ": the family table lacks " << f.display << " (" << f.name << "), a family of the registry");
    CHECK(listed.count(f.layout) == 1);
  }
}

}  // namespace

TEST_CASE("the registry has one entry per layout, named as parse_layout reads it") {
  const std::vector<LayoutFamily>& all = layout_families();
  REQUIRE(all.size() == 18);
  std::set<std::string> names, displays, model_types;
  for (const LayoutFamily& f : all) {
    CAPTURE(f.name);
    CHECK(f.name == to_string(f.layout));
    CHECK(parse_layout(f.name) == f.layout);
    CHECK(&layout_family(f.layout) == &f);
    CHECK_FALSE(f.display.empty());
    CHECK_FALSE(f.model_types.empty());
    CHECK(names.insert(f.name).second);
    CHECK(displays.insert(f.display).second);
    for (const std::string& t : f.model_types) CHECK(model_types.insert(t).second);
  }
  // Every layout the enum spells is in the registry.
  std::istringstream spelled(layout_names());
  for (std::string name; std::getline(spelled, name, '|');) CHECK(names.count(name) == 1);
  CHECK(layout_family(Layout::vit).input == InputKind::pixels);
  CHECK(layout_family(Layout::gpt2).input == InputKind::tokens);
  CHECK(layout_family(Layout::gemma2).display == "Gemma 2");
  CHECK(layout_family(Layout::qwen3).display == "Qwen3");
  CHECK(layout_family(Layout::qwen3).model_types == std::vector<std::string>{"qwen3"});
  // A multimodal gemma3 file is read as its language model.
  CHECK(layout_family(Layout::gemma3).model_types == std::vector<std::string>{"gemma3_text", "gemma3"});
  CHECK(layout_family(Layout::gemma3).options ==
        std::vector<std::string>{"sliding_window", "query_pre_attn_scalar", "layer_pattern", "rope_local_base",
                                 "rope_linear_factor"});
  CHECK(layout_family(Layout::qwen3).own_structure);
  CHECK(layout_family(Layout::qwen3).options.empty());
  CHECK(family_display_names().rfind("BERT, GPT-2, ALBERT, ", 0) == 0);
  CHECK(family_names([](const LayoutFamily& f) { return f.key_value_heads; }) ==
        "llama, mistral, qwen2, phi, gemma, gemma2, qwen3, gemma3");
}

TEST_CASE("a table cell's names: backticked where it has any, else its display names") {
  CHECK(names_in("XLNet (`xlnet`, the paper's third model)") == std::vector<std::string>{"xlnet"});
  CHECK(names_in("BERT, RoBERTa, DistilBERT") == std::vector<std::string>{"BERT", "RoBERTa", "DistilBERT"});
  CHECK(names_in("GPT-NeoX / Pythia (`gpt_neox`)") == std::vector<std::string>{"gpt_neox"});
  CHECK(family_named("Pythia") == nullptr);
  CHECK(family_named("Gemma 2")->layout == Layout::gemma2);
  CHECK(family_named("gemma3_text")->layout == Layout::gemma3);
  CHECK(family_named("Gemma 3")->layout == Layout::gemma3);
}

TEST_CASE("the documentation's family tables list exactly the registry's families") {
  // README's family table (also where the README's tour moves to docs/tour.md), and docs/families.md's.
  const std::string root = SANPATH_SOURCE_DIR;
  for (const std::vector<std::string>& files :
       {std::vector<std::string>{root + "/README.md", root + "/docs/tour.md"}, {root + "/docs/families.md"}}) {
    std::size_t found = 0;
    for (const std::string& path : files)
      for (const std::vector<std::string>& table : family_tables(path)) {
        table_matches_registry(path, table);
        ++found;
      }
    INFO("a family table (first column headed \"family…\") in " << files.front()
                                                                 << (files.size() > 1 ? " or " + files.back() : ""));
    CHECK(found >= 1);
  }
}

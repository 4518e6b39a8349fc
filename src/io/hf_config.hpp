#pragma once
// JSON files of checkpoints (config.json, index files, the native
// configuration): parsing with a nesting limit, typed access with one-line
// errors "<path>: <field>: <why>".

#include "sanpath/model/model.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sanpath::io {

using json = nlohmann::json;
using Shape = std::vector<std::int64_t>;
constexpr std::int64_t kAny = -1;  // wildcard dimension in an expected shape

[[noreturn]] void fail(const std::string& where, const std::string& field, const std::string& why);

/// Nesting limit of config.json and of the native configuration (real ones
/// nest 3 levels); printing a value nested millions of levels deep would
/// exhaust the stack.
constexpr int kMaxJsonDepth = 64;

/// Parses `text` with the nesting limit; errors name `where` and `field`.
json parse_json(const std::string& text, const std::string& where, const std::string& field);
/// Reads and parses a JSON object from `path`; errors name the path and "file" or "json".
json read_json_file(const std::string& path);

/// A JSON value shown in a message: one line, at most ~60 characters.
std::string brief(const json& j);
/// "[a, b]" with kAny shown as "*".
std::string shape_str(const Shape& s);
std::string str(int v);

/// config.json of a HuggingFace checkpoint, with typed, validated access.
struct HfConfig {
  std::string path;
  json j;

  bool has(const std::string& key) const;
  int positive_int(const std::string& key) const;
  int positive_int_or(const std::string& key, int fallback) const;
  /// A non-negative integer, or `fallback` when absent.
  int natural_or(const std::string& key, int fallback) const;
  /// positive_int(key) if present, else kAny.
  std::int64_t size_or_any(const std::string& key) const;
  double eps_or(const std::string& key, double fallback) const;
  /// A finite number > 0, or `fallback` when absent.
  double positive_number_or(const std::string& key, double fallback) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;
  bool bool_or(const std::string& key, bool fallback) const;
  Activation activation(const std::string& key, const std::string& fallback) const;
  /// head width: hidden / heads, which must divide.
  int head_width(const std::string& hidden_key, const std::string& heads_key) const;
  /// Refuses position_embedding_type other than "absolute".
  void require_absolute_positions() const;
};

/// The config.json spelling of an activation (gelu_tanh is "gelu_new").
std::string hf_activation_name(Activation a);

}  // namespace sanpath::io

#include "hf_config.hpp"

#include "sanpath/core/errors.hpp"

#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace sanpath::io {

namespace {
struct TooDeep {};
}  // namespace

void fail(const std::string& where, const std::string& field, const std::string& why) {
  throw std::invalid_argument(printable(where + ": " + field + ": " + why));
}

json parse_json(const std::string& text, const std::string& where, const std::string& field) {
  try {
    return json::parse(text, [](int depth, json::parse_event_t event, json&) {
      if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
          depth >= kMaxJsonDepth)
        throw TooDeep{};
      return true;
    });
  } catch (const json::exception& e) {
    fail(where, field, std::string("not valid JSON: ") + e.what());
  } catch (const TooDeep&) {
    fail(where, field, "nested deeper than " + str(kMaxJsonDepth) + " levels");
  }
}

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "file", std::filesystem::exists(path) ? "cannot be opened" : "does not exist");
  std::stringstream ss;
  ss << in.rdbuf();
  json j = parse_json(ss.str(), path, "json");
  if (!j.is_object()) fail(path, "json", std::string("must be a JSON object, got ") + j.type_name());
  return j;
}

std::string brief(const json& j) {
  std::string s = j.dump(-1, ' ', true, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + (s[i] == kAny ? "*" : std::to_string(s[i]));
  return out + "]";
}

std::string str(int v) { return std::to_string(v); }

bool HfConfig::has(const std::string& key) const { return j.contains(key) && !j.at(key).is_null(); }

int HfConfig::positive_int(const std::string& key) const {
  if (!has(key)) fail(path, key, "missing");
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > INT_MAX)
    fail(path, key, "must be a positive integer, got " + brief(v));
  return v.get<int>();
}

int HfConfig::positive_int_or(const std::string& key, int fallback) const {
  return has(key) ? positive_int(key) : fallback;
}

int HfConfig::natural_or(const std::string& key, int fallback) const {
  if (!has(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > INT_MAX)
    fail(path, key, "must be a non-negative integer, got " + brief(v));
  return v.get<int>();
}

std::int64_t HfConfig::size_or_any(const std::string& key) const { return has(key) ? positive_int(key) : kAny; }

double HfConfig::eps_or(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    fail(path, key, "must be a finite number >= 0, got " + brief(v));
  return v.get<double>();
}

double HfConfig::positive_number_or(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
    fail(path, key, "must be a finite number > 0, got " + brief(v));
  return v.get<double>();
}

std::string HfConfig::string_or(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_string()) fail(path, key, "must be a string, got " + brief(v));
  return v.get<std::string>();
}

bool HfConfig::bool_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_boolean()) fail(path, key, "must be true or false, got " + brief(v));
  return v.get<bool>();
}

Activation HfConfig::activation(const std::string& key, const std::string& fallback) const {
  const std::string a = string_or(key, fallback);
  if (a == "gelu") return Activation::gelu;
  if (a == "gelu_new" || a == "gelu_pytorch_tanh") return Activation::gelu_tanh;
  if (a == "relu") return Activation::relu;
  if (a == "gelu_fast") return Activation::gelu_fast;
  fail(path, key, "'" + a + "' is not supported (gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu)");
}

int HfConfig::head_width(const std::string& hidden_key, const std::string& heads_key) const {
  const int d = positive_int(hidden_key), H = positive_int(heads_key);
  if (d % H != 0) fail(path, hidden_key, str(d) + " is not divisible by " + heads_key + " = " + str(H));
  return d / H;
}

void HfConfig::require_absolute_positions() const {
  const std::string pet = string_or("position_embedding_type", "absolute");
  if (pet != "absolute") fail(path, "position_embedding_type", "'" + pet + "' is not supported (absolute only)");
}

std::string hf_activation_name(Activation a) {
  switch (a) {
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
    case Activation::gelu_tanh: return "gelu_new";
    case Activation::silu: return "silu";
    case Activation::gelu_fast: return "gelu_fast";
  }
  return "?";
}

}  // namespace sanpath::io

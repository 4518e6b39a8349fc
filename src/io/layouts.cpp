// The layout families sanpath knows, and detecting which one a checkpoint
// is. Adding a family is one entry in `families()`.
#include "hf_layout.hpp"

#include <algorithm>
#include <stdexcept>

namespace sanpath::io {

const std::vector<Family>& families() {
  // Detection order: a family whose tensor mark contains another's comes first.
  static const std::vector<Family> all = {albert_family(), gpt2_family(), distilbert_family(), roberta_family(),
                                          bert_family(), llama_family(), mistral_family(), qwen2_family()};
  return all;
}

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
  for (const TensorInfo* t : f.tensors())
    for (const Family& fam : families())
      if (!fam.tensor_mark.empty() && t->name.find(fam.tensor_mark) != std::string::npos) return fam;
  fail(c.path, "model_type",
       "missing, and neither architectures nor the tensor names identify a layout sanpath knows (known: " +
           known_layouts() + ")");
}

}  // namespace sanpath::io

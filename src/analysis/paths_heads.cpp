// The text form of allowed heads per layer ("0,1/*/skip,3"), parsed into a
// PathFilter's allowed_heads (analysis/paths.hpp).
#include "sanpath/analysis/paths.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>
#include <vector>

namespace sanpath {

std::vector<std::vector<int>> parse_heads_per_layer(const std::string& text, int layers, int heads, bool skip) {
  const auto fail = [](const std::string& m) { throw std::invalid_argument("heads per layer: " + m); };
  const auto trim = [](std::string s) {
    const auto b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return std::string();
    const auto e = s.find_last_not_of(" \t");
    return s.substr(b, e - b + 1);
  };
  std::vector<std::string> entries;
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = text.find('/', start);
    entries.push_back(text.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (static_cast<int>(entries.size()) != layers)
    fail("'" + text + "' has " + std::to_string(entries.size()) + " entries separated by '/', the network has " +
         std::to_string(layers) + " layers");
  std::vector<std::vector<int>> out(entries.size());
  for (std::size_t l = 0; l < entries.size(); ++l) {
    const std::string where = "layer " + std::to_string(l + 1);
    std::size_t s = 0;
    const std::string& entry = entries[l];
    if (trim(entry).empty()) fail(where + ": no choice given (use * for every choice)");
    for (;;) {
      const std::size_t comma = entry.find(',', s);
      const std::string item = trim(entry.substr(s, comma == std::string::npos ? std::string::npos : comma - s));
      if (item == "*") {
        if (skip) out[l].push_back(-1);
        for (int h = 0; h < heads; ++h) out[l].push_back(h);
      } else if (item == "skip" || item == "-1") {
        if (!skip) fail(where + ": '" + item + "': the variant has no skip connections (--skip on)");
        out[l].push_back(-1);
      } else {
        const bool digits = !item.empty() && item.size() < 10 &&
                            std::all_of(item.begin(), item.end(), [](unsigned char ch) { return std::isdigit(ch); });
        if (!digits) fail(where + ": '" + item + "' is not a head (0-based number), 'skip' or '*'");
        const int h = std::stoi(item);
        if (h >= heads)
          fail(where + ": head " + item + " is outside [0, " + std::to_string(heads) + ") (heads are 0-based)");
        out[l].push_back(h);
      }
      if (comma == std::string::npos) break;
      s = comma + 1;
    }
  }
  PathFilter f;
  f.allowed_heads = out;
  validate_filter(f, layers, heads, skip);
  return out;
}

}  // namespace sanpath

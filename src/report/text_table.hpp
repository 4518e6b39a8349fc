#pragma once
// Plain-text tables of the formatters (format*.cpp): column widths count
// UTF-8 code points (‖, ∞ and ᵀ are one column each), and no line ends in
// padding. Internal to the library (not installed).
#include "sanpath/model/task_head.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace sanpath::text_table {

/// Display columns of a UTF-8 string: its code points.
inline std::size_t columns(const std::string& s) {
  std::size_t cols = 0;
  for (unsigned char ch : s) cols += (ch & 0xC0) != 0x80;
  return cols;
}

/// Pads to `w` columns; a cell as wide as or wider than `w` still gets one
/// space, so neighbouring cells never run together.
inline std::string pad(const std::string& s, std::size_t w) {
  const std::size_t c = columns(s);
  return c >= w ? s + " " : s + std::string(w - c, ' ');
}

/// The width of a column: `least`, or its widest cell and two spaces.
inline std::size_t width_of(const std::vector<std::string>& cells, std::size_t least) {
  std::size_t w = least;
  for (const std::string& c : cells) w = std::max(w, columns(c) + 2);
  return w;
}

/// The text with the spaces before each newline (and at the end) removed.
inline std::string trim_line_ends(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pending = 0;  // spaces seen but not yet written
  for (char ch : text) {
    if (ch == ' ') {
      ++pending;
      continue;
    }
    if (ch != '\n') out.append(pending, ' ');
    pending = 0;
    out += ch;
  }
  return out;
}

/// "3/4"; with the check run's count when it differs ("3/4 (check 2/4)"); a
/// certified count with undecided predictions as its range ("3 to 4/4").
inline std::string agreement_text(long agree, const std::optional<long>& check, const std::optional<long>& most,
                                  long predictions) {
  const std::string of = "/" + std::to_string(predictions);
  if (most && *most != agree) return std::to_string(agree) + " to " + std::to_string(*most) + of;
  std::string s = std::to_string(agree) + of;
  if (check && *check != agree) s += " (check " + std::to_string(*check) + of + ")";
  return s;
}

/// Mean of the per-repetition agreement counts "3.4/4", with the check
/// run's when any repetition's count differs ("3.4/4 (check 3.2/4)"), or for
/// a certified run, with those that may agree where they differ from those
/// proven to ("3 to 3.5/4").
inline std::string mean_agreement_text(const std::vector<long>& agree, const std::vector<long>& check,
                                       const std::vector<long>& most, long predictions) {
  const auto mean = [](const std::vector<long>& v) {
    long sum = 0;
    for (long a : v) sum += a;
    std::ostringstream o;
    if (sum % static_cast<long>(v.size()) == 0) {
      o << sum / static_cast<long>(v.size());
    } else {  // an exact rational: two decimals, rounded
      o.setf(std::ios::fixed);
      o.precision(2);
      o << static_cast<double>(sum) / static_cast<double>(v.size());
    }
    return o.str();
  };
  if (!most.empty() && most != agree) return mean(agree) + " to " + mean(most) + "/" + std::to_string(predictions);
  std::string s = mean(agree) + "/" + std::to_string(predictions);
  if (!check.empty() && check != agree) s += " (check " + mean(check) + "/" + std::to_string(predictions) + ")";
  return s;
}

/// Why no task head is applied, after "task head: " or "the checkpoint has ".
inline std::string no_task_head_text(TaskHeadAbsence why) {
  if (why == TaskHeadAbsence::reads_decoder)
    return "none of its own (a T5 encoder: T5's LM head reads the decoder's output, which sanpath does not run)";
  return "none in the file (sanpath reads BERT's pooler + classifier, ViT's LayerNorm + classifier, and the LM heads "
         "of GPT-2, GPT-NeoX, OPT, Phi, Llama, Mistral, Qwen2, Gemma, Gemma 2 and XLNet)";
}

/// Confirmed digits as a table cell: the number, or "unconfirmed".
inline std::string digits_text(const std::optional<int>& d) { return d ? std::to_string(*d) : "unconfirmed"; }

}  // namespace sanpath::text_table

#pragma once
// Plain-text tables of the formatters (format*.cpp): column widths count
// UTF-8 code points (‖, ∞ and ᵀ are one column each), and no line ends in
// padding. Internal to the library (not installed).
#include "sanpath/core/quantity.hpp"
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

/// Confirmed digits as a table cell: the number, or "unconfirmed".
inline std::string digits_text(const std::optional<int>& d) { return d ? std::to_string(*d) : "unconfirmed"; }

// A table prints a value to at most --digits of its confirmed digits
// (Quantity::shown); a count beside it counts the digits printed, never
// more: every confirmed digit is in --format json and csv.

/// What the brackets beside a table's values hold.
inline const char* const brackets_text =
    "in brackets the digits printed, each confirmed (at most --digits; all in --format json)";
inline const char* const brackets_proven_text =
    "in brackets the digits printed, each proven by ball arithmetic (math.md §10; at most --digits; all in --format "
    "json)";

/// "value [d]": the value as a table prints it, d its digits printed ("?": unconfirmed).
inline std::string with_digits(const Quantity& q) {
  const std::optional<int> d = q.shown_digits();
  return q.shown() + " [" + (d ? std::to_string(*d) : std::string("?")) + "]";
}

/// Whether a table cuts q's confirmed digits to --digits.
inline bool cut(const Quantity& q) { return q.digits && q.asked && *q.digits > *q.asked; }

/// The line under a table with a "digits" column when it cut some value's
/// digits (`cut_any`) to --digits (`like`: one of its values): empty otherwise.
inline std::string cut_note(bool cut_any, const Quantity& like) {
  if (!cut_any || !like.asked) return {};
  return "digits: those printed, at most " + std::to_string(*like.asked) +
         " (--digits); every confirmed digit in --format json\n";
}

/// A count of several values' least confirmed digits (`least`) as a table
/// shows them: at most the digits printed (`like`: one of those values).
inline std::optional<int> shown_least(const std::optional<int>& least, const Quantity& like) {
  if (!least || !like.asked) return least;
  return std::min(*least, *like.asked);
}

}  // namespace sanpath::text_table

#include "report/provenance_text.hpp"
#include "sanpath/analysis/double_check.hpp"

namespace sanpath::provenance_text {

using nlohmann::ordered_json;

long bits_of(const Precision& p) { return p.native_double ? 53 : p.bits; }

namespace {

/// "128 257 bits" (sep " ") or "128, 257 bits" (sep ", ").
std::string tried_list(const Provenance& p, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < p.tried_bits.size(); ++i) s += (i ? sep : "") + std::to_string(p.tried_bits[i]);
  return s + " bits";
}

/// ", digits confirmed by …": how the check run confirmed the digits.
/// `below` names a check by the tier below; `none` is the text without one.
std::string check_clause(const Provenance& p, bool name_rounding, bool name_below, const std::string& none) {
  if (p.check_method == CheckMethod::certified)
    return p.check ? ", digits proven by enclosures at " + p.check->name() + " (ball arithmetic, math.md §10)"
                   : ", digits proven: every value enclosed by ball arithmetic (math.md §10)";
  if (!p.check) return none;
  if (name_rounding && p.check_method == CheckMethod::rounding)
    return ", digits confirmed by double runs rounded upward and downward (margin 10x)";
  if (name_below && p.checked_below()) return ", digits confirmed against a run at " + p.check->name() + " (no higher tier)";
  return ", digits confirmed by a run at " + p.check->name();
}

}  // namespace

ordered_json json(const Provenance& p, View view) {
  ordered_json j;
  if (view != View::paths) j["method"] = to_string(p.method);
  j["precision_bits"] = p.bits();
  j["precision"] = p.precision.name();
  j["check_precision_bits"] = p.check ? ordered_json(bits_of(*p.check)) : ordered_json(nullptr);
  if (view == View::forward || view == View::bounds ||
      (view == View::paths && p.check_method == CheckMethod::certified))
    j["check_method"] = p.check || p.check_method == CheckMethod::certified ? ordered_json(to_string(p.check_method))
                                                                           : ordered_json(nullptr);
  j["tried_bits"] = p.tried_bits;
  if (view == View::paths) j["precision_chosen_by"] = to_string(p.chosen_by);
  j["ceiling_reached"] = p.ceiling_reached;
  if (view == View::bounds) j["ceiling_bits"] = p.ceiling_bits > 0 ? ordered_json(p.ceiling_bits) : ordered_json(nullptr);
  return j;
}

std::string line(const Provenance& p, View view) {
  if (view == View::bounds) {
    std::string s = "measured with the " + to_string(p.method) + " forward pass at " + p.precision.name();
    if (p.check_method == CheckMethod::certified)
      s += p.check ? ", every end of each enclosure proven by ball arithmetic at " + p.check->name() + " (math.md §10)"
                   : " in ball arithmetic, every end of each enclosure proven (math.md §10)";
    else if (!p.check)
      s += ", no confirming run: resolution is judged from the rounding floor, a heuristic (digits and verdicts are "
           "not confirmed)";
    else if (p.checked_below())
      s += ", checked against " + p.check->name() + " (the tier below: there is no higher tier)";
    else
      s += ", confirmed by a run at " + p.check->name();
    if (p.tried_bits.size() > 1) s += " (auto tried " + tried_list(p, ", ") + ")";
    return s + ".";
  }
  const bool forward = view == View::forward;
  std::string s = "precision: " + p.precision.name() + (forward ? " (" + to_string(p.method) + " pass)" : "");
  s += check_clause(p, forward, forward, ", no confirming run (digits unconfirmed)");
  if (!forward && p.chosen_by == ForwardMethod::centred && !p.tried_bits.empty())
    s += "; auto: chosen from the residuals of a centred pass at " + std::to_string(p.tried_bits.front()) + " bits";
  else if (p.tried_bits.size() > 1)
    s += "; auto tried " + tried_list(p, " ");
  if (p.ceiling_reached)
    s += !forward ? "; CEILING REACHED: the smallest layer residuals are not resolved"
         : p.check_method == CheckMethod::certified ? "; CEILING REACHED: fewer digits than asked are proven"
         : p.method == ForwardMethod::centred ? "; CEILING REACHED: fewer digits than asked are confirmed"
                                              : "; CEILING REACHED: the smallest residuals are not resolved";
  return s;
}

std::string cell(const Provenance& p, View view) {
  const bool paths = view == View::paths;
  std::string s = (paths ? "" : to_string(p.method) + " pass at ") + p.precision.name();
  s += check_clause(p, true, false, ", no confirming run");
  if (!paths && p.tried_bits.size() > 1) s += "; auto tried " + tried_list(p, " ");
  if (view == View::forward && p.ceiling_reached) s += "; the precision ceiling was reached";
  return s;
}

}  // namespace sanpath::provenance_text

// Reports of `sanpath bounds` (and its --search): JSON, CSV and a table a
// theorist reads at a glance. Formatting only; the numbers come from
// analyze_bounds / search_bounds. Every value prints with its true exponent.
#include "sanpath/analysis/bounds.hpp"
#include "sanpath/analysis/search.hpp"
#include "sanpath/report/format.hpp"
#include "report/json_parts.hpp"
#include "report/provenance_text.hpp"
#include "report/text_table.hpp"
#include "report/model_line.hpp"

#include <mpfr.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace sanpath {

using nlohmann::ordered_json;

namespace {

using json_parts::optional_digits_json;

// ---- numbers as strings ---------------------------------------------------------

/// Significant digits worth printing for an enclosure end with `digits`
/// confirmed (two more than confirmed, at most 17).
int shown_digits(const std::optional<int>& digits, int cap = 17) {
  if (!digits) return cap;
  return std::max(1, std::min(cap, *digits + 2));
}

ordered_json str_or_null(const std::optional<BigReal>& x, int sig = 17) {
  return x ? ordered_json(to_sci(*x, sig)) : ordered_json(nullptr);
}
ordered_json log_or_null(const std::optional<LogReal>& x, int sig = 17) {
  return x ? ordered_json(x->to_string(sig)) : ordered_json(nullptr);
}
ordered_json decimal_or_null(const std::optional<BigReal>& x, int sig = 17) {
  return x ? ordered_json(to_decimal(*x, sig)) : ordered_json(nullptr);
}

/// "[lo, up]" (directed outwards) or "< 1e-N" for an upper bound only.
std::string measured_text(const MeasuredDepth& m, int cap) {
  if (m.enclosure.below_resolution) return "< " + to_sci(m.enclosure.upper, 1);
  const int sig = shown_digits(m.digits, cap);
  const std::string lo = m.enclosure.lower == 0 ? "0" : to_sci(m.enclosure.lower, sig, Rounding::down);
  return "[" + lo + ", " + to_sci(m.enclosure.upper, sig, Rounding::up) + "]";
}

// ---- JSON -----------------------------------------------------------------------

using json_parts::model_json;
using json_parts::variant_json;

ordered_json measured_json(const MeasuredDepth& m) {
  const MeasuredResidual& e = m.enclosure;
  // 17 digits at least (the ratios of depths are computed from these ends), and two more than the count
  // beside them (every confirmed digit and the next two).
  const int sig = std::max(17, m.digits.value_or(0) + 2);
  ordered_json j;
  j["lower"] = e.lower == 0 ? std::string("0") : to_sci(e.lower, sig, Rounding::down);
  j["upper"] = e.below_resolution ? to_sci(e.upper, 1) : to_sci(e.upper, sig, Rounding::up);
  j["below_resolution"] = e.below_resolution;
  j["upper_end"] = m.upper.str();  // the optimal-centre enclosure's ends with their confirmed digits
  j["lower_end"] = m.lower.str();
  j["relative"] = m.relative.str();
  j["digits"] = optional_digits_json(m.digits);
  return j;
}

ordered_json series_json(const ResidualSeries& s) {
  ordered_json j;
  j["variant"] = variant_json(s.variant);
  j.update(provenance_text::json(s, provenance_text::View::bounds));
  j["upper_bound_only"] = s.upper_bound_only;
  j["precision_note"] = residual_series_note(s);
  return j;
}

std::string join_depths(const std::vector<int>& ls) {
  std::string s;
  for (std::size_t i = 0; i < ls.size(); ++i) s += (i ? ", " : "") + std::to_string(ls[i]);
  return s;
}

/// The notes of a bounds analysis by what they state.
enum class NoteKind { theorem, contraction, verdicts, precision, skip_comparison };

struct Note {
  NoteKind kind;
  std::string text;
};

/// The notes in reading order: which theorem and why (or why none applies),
/// contraction/vacuity, verdict counts, precision and resolution, skip comparison.
std::vector<Note> notes_of(const BoundsAnalysis& a) {
  std::vector<Note> out;
  const BoundsReport& r = a.report;
  const std::string g = "gamma = " + gamma_string(a.request.gamma) +
                        (a.request.gamma == 1 ? " (the ICML 2021 statement)" : " (arXiv v2's factor, user-given)");
  if (r.theorem.applicable) {
    out.push_back({NoteKind::theorem, r.theorem.reason + " " + g + "."});
    out.push_back({NoteKind::contraction, contraction_sentence(r)});
    int held = 0, violated = 0, undecided = 0, on_upper = 0;
    for (const DepthComparison& dc : r.depths) {
      held += dc.verdict == Verdict::holds;
      violated += dc.verdict == Verdict::violated;
      undecided += dc.verdict == Verdict::undecided;
      on_upper += dc.measured.below_resolution;
    }
    std::string v = "Verdicts: " + std::to_string(held) + " HOLDS, " + std::to_string(violated) + " VIOLATED, " +
                    std::to_string(undecided) + " UNDECIDED of " + std::to_string(r.depths.size()) + " depths";
    if (on_upper > 0) v += " (" + std::to_string(on_upper) + " decided on an upper bound of the measured residual)";
    v += ".";
    if (a.verdicts_proven && held + violated > 0)
      v += " HOLDS and VIOLATED are proven (math.md §10): the measured enclosures come from a certified run and "
           "the bound's from exact weight products, every rounding bounded.";
    if (violated > 0)
      v += " A VIOLATED depth with gamma = 1 contradicts the theorem as stated in ICML 2021: keep the weights and "
           "the input.";
    out.push_back({NoteKind::verdicts, v});
  } else {
    const std::string& why = r.theorem.reason;
    const std::string prefix = "not applicable: ";
    out.push_back({NoteKind::theorem, "The theorem does not apply: " +
                                          (why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why) +
                                          " Measured residuals are reported without a bound; " + g + "."});
  }
  out.push_back({NoteKind::precision, residual_series_note(a.measured)});
  if (a.without_skip) {
    const ResidualSeries& w = *a.without_skip;
    std::string s = "Side by side: the same model and input with skip off (" +
                    to_string(w.variant, VariantStyle::prose) + ") measured at " + w.precision.name() + ".";
    const std::size_t L = a.measured.depths.size() - 1;
    const auto short_text = [](const MeasuredDepth& m) {
      if (m.upper.below_resolution) return m.upper.str();
      return to_sci(m.upper.value, std::min(6, std::max(1, m.upper.digits.value_or(6))));
    };
    s += " At depth " + std::to_string(L) + ": r_" + std::to_string(L) + " = " + short_text(a.measured.depths[L]) +
         " with skip, " + short_text(w.depths[L]) + " without (r_0 = " + short_text(a.measured.depths.front()) + ").";
    if (!w.upper_bound_only.empty()) s += " " + residual_series_note(w);
    out.push_back({NoteKind::skip_comparison, s});
  }
  return out;
}

}  // namespace

std::string contraction_sentence(const BoundsReport& r) {
  const std::string radius = r.contraction_radius ? to_sci(*r.contraction_radius, 6) : std::string();
  const std::string s = r.sqrt_a_r0 ? r.sqrt_a_r0->to_string(6) : std::string();
  switch (r.contraction) {
    case Contraction::a_zero: return "a = 0 (beta = 0 or lambda = 0): the bound is 0 at every depth >= 1.";
    case Contraction::r0_zero: return "r_0 = 0: the bound is 0 at every depth.";
    case Contraction::vacuous:
      return "vacuous: sqrt(a)*r_0 = " + s +
             " >= 1, so the bound does not shrink with depth; it only does for r_0 < r* = a^(-1/2) = " + radius + ".";
    case Contraction::contracting:
      return "sqrt(a)*r_0 = " + s +
             " < 1: the bound shrinks doubly exponentially with depth (contraction radius r* = a^(-1/2) = " + radius +
             ").";
    case Contraction::not_applicable: break;
  }
  return r.theorem.reason;
}

std::string residual_series_note(const ResidualSeries& s) {
  std::string note = provenance_text::line(s, provenance_text::View::bounds);
  if (!s.upper_bound_only.empty()) {
    const std::vector<int>& u = s.upper_bound_only;
    note += std::string(u.size() == 1 ? " Depth " : " Depths ") + join_depths(u) + (u.size() == 1 ? " is" : " are") +
            " below what " + s.precision.name() +
            " resolves: the measured value is an upper bound (< 1e-N) and the verdict is decided on that upper bound.";
  }
  if (s.ceiling_reached) {
    note += " The auto precision ceiling of " + std::to_string(s.ceiling_bits) + " bits was reached";
    if (s.ceiling_bits < Precision::max_bits() && s.check && s.check->bits > s.bits())
      note += " (the top tier, " + std::to_string(Precision::max_bits()) + " bits, confirms it)";
    note += s.upper_bound_only.empty() ? ": every depth is resolved, the smallest with fewer digits than requested."
                                       : ": no higher precision is available to resolve the rest.";
  }
  return note;
}

std::vector<std::string> bounds_notes(const BoundsAnalysis& a) {
  std::vector<std::string> out;
  for (Note& n : notes_of(a)) out.push_back(std::move(n.text));
  return out;
}

std::string coverage_sentence(const Coverage& c) {
  if (!c.any()) return {};
  std::string s = "Beyond the theorems (math.md §8):";
  if (c.rotary)
    s += " the cubic bounds of §5 do not cover rotary position embeddings (the attention logits x_i W_Q R(j-i) "
         "W_K^T x_j depend on positions, so collapse is generically only exponential);";
  if (c.position_terms)
    s += " the cubic bounds do not cover position terms in the logits (T5's bucket bias, XLNet's relative "
         "attention: rows of P differ even for a rank-1 input, so collapse is generically only exponential);";
  if (c.softcap) s += " the cubic bounds do not cover soft-capped logits (Gemma 2);";
  if (c.gated_mlp) s += " Corollary 3.2 does not cover the gated (SwiGLU) MLP, which has no global Lipschitz constant;";
  s.back() = '.';
  return s + " The residuals below are measured, not bounded.";
}

namespace {

ordered_json bounds_json(const BoundsAnalysis& a) {
  const BoundsReport& r = a.report;
  ordered_json j;
  j["gamma"] = gamma_string(r.gamma);
  j["theorem"] = to_string(r.theorem.theorem);
  j["theorem_requested"] = to_string(a.request.theorem);
  j["applicable"] = r.theorem.applicable;
  j["theorem_reason"] = r.theorem.reason;
  j["a"] = str_or_null(r.a);
  j["contraction_radius"] = str_or_null(r.contraction_radius);
  j["vacuous"] = r.vacuous;
  j["vacuity"] = r.theorem.applicable ? ordered_json(contraction_sentence(r)) : ordered_json(nullptr);
  j["not_applicable"] = r.theorem.applicable ? ordered_json(nullptr) : ordered_json(r.theorem.reason);
  if (a.coverage.any())
    j["beyond_theorems"] = {{"rotary", a.coverage.rotary},
                            {"gated_mlp", a.coverage.gated_mlp},
                            {"position_terms", a.coverage.position_terms},
                            {"softcap", a.coverage.softcap},
                            {"statement", coverage_sentence(a.coverage)}};
  ordered_json beta = ordered_json::array(), lambda = ordered_json::array();
  for (const BigReal& b : r.beta) beta.push_back(to_sci(b, 17));
  for (const auto& l : r.lambda) lambda.push_back(str_or_null(l));
  j["beta"] = beta;
  j["beta_max"] = to_sci(a.weights.beta, 17);
  j["lambda"] = lambda;
  ordered_json heads = ordered_json::array();
  for (const LayerQuantities& lq : a.weights.layers) {
    ordered_json hs = ordered_json::array();
    for (const HeadQuantities& h : lq.heads)
      hs.push_back({{"qk_norm_1", to_sci(h.qk_norm_1, 17)},
                    {"vo_composite", to_sci(h.vo_composite, 17)},
                    {"beta", to_sci(h.beta, 17)}});
    heads.push_back(hs);
  }
  j["beta_heads"] = heads;
  j.update(series_json(a.measured));
  j["r0"] = measured_json(a.measured.depths.front());
  j["verdicts_proven"] = a.verdicts_proven;
  ordered_json depths = ordered_json::array();
  for (const DepthComparison& d : r.depths) {
    const MeasuredDepth& m = a.measured.depths[static_cast<std::size_t>(d.layer)];
    ordered_json dj;
    dj["layer"] = d.layer;
    dj["bound"] = d.bound ? ordered_json(d.bound->value.to_string(17)) : ordered_json(nullptr);
    dj["log10_bound"] = d.bound ? ordered_json(d.bound->value.log10_string(17)) : ordered_json(nullptr);
    dj["bound_lower"] = d.bound ? ordered_json(d.bound->lower.to_string(17)) : ordered_json(nullptr);
    dj["bound_upper"] = d.bound ? ordered_json(d.bound->upper.to_string(17)) : ordered_json(nullptr);
    dj["layerwise_bound"] = d.layerwise_bound ? ordered_json(d.layerwise_bound->value.to_string(17)) : ordered_json(nullptr);
    dj["log10_layerwise_bound"] =
        d.layerwise_bound ? ordered_json(d.layerwise_bound->value.log10_string(17)) : ordered_json(nullptr);
    dj["measured"] = measured_json(m);
    dj["log10_measured_upper"] =
        d.measured.upper > 0 ? ordered_json(LogReal::from_value(d.measured.upper).log10_string(17)) : ordered_json(nullptr);
    dj["verdict"] = to_string(d.verdict);
    dj["verdict_proven"] = a.verdicts_proven && (d.verdict == Verdict::holds || d.verdict == Verdict::violated);
    dj["verdict_on_upper_bound"] = d.measured.below_resolution;
    dj["layerwise_verdict"] = to_string(d.layerwise_verdict);
    dj["slack_log10"] = decimal_or_null(d.slack_log10);
    dj["slack_is_lower_bound"] = d.measured.below_resolution;  // measured upper is an upper bound only
    dj["cubic_constant"] = log_or_null(d.cubic_constant);
    dj["a_layer"] = str_or_null(d.a_layer);
    dj["order"] = decimal_or_null(d.order);
    depths.push_back(dj);
  }
  j["depths"] = depths;
  if (a.without_skip) {
    ordered_json w = series_json(*a.without_skip);
    ordered_json ds = ordered_json::array();
    for (const MeasuredDepth& m : a.without_skip->depths) {
      ordered_json dj = {{"layer", m.layer}};
      dj["measured"] = measured_json(m);
      ds.push_back(dj);
    }
    w["depths"] = ds;
    j["without_skip"] = w;
  } else {
    j["without_skip"] = nullptr;
  }
  j["notes"] = bounds_notes(a);
  return j;
}

// ---- table ----------------------------------------------------------------------

using text_table::pad;

std::string theorem_title(Theorem t) {
  switch (t) {
    case Theorem::thm_2_2: return "Thm 2.2";
    case Theorem::thm_2_3: return "Thm 2.3";
    case Theorem::cor_3_2: return "Cor 3.2";
    default: return "none";
  }
}

std::string list_values(const std::vector<BigReal>& v, int sig) {
  if (v.empty()) return "-";
  bool same = true;
  for (const BigReal& x : v) same = same && x == v.front();
  if (same && v.size() > 1) return to_sci(v.front(), sig) + " (every layer)";
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + to_sci(v[i], sig);
  return s;
}

std::string table(const BoundsAnalysis& a, const Model& model, const RunInfo& info) {
  const BoundsReport& r = a.report;
  const Architecture& arch = model.arch();
  std::ostringstream o;
  o << "Bounds of Dong, Cordonnier & Loukas (ICML 2021) against measured residuals\n";
  o << report_text::model_line(info.model, arch, {true, false, true});
  o << "input: " << info.input << "\n";
  o << "variant: " << to_string(a.measured.variant) << "\n";
  o << "r_l = ‖X^l − 1cᵀ‖_{1,∞} at the optimal centre, an enclosure [lower, upper]\n";
  o << "gamma = " << gamma_string(r.gamma) << "\n";
  if (r.theorem.applicable) {
    o << "theorem: " << r.theorem.reason << "\n";
    o << "a = " << (r.a ? to_sci(*r.a, 6) : "-") << ", contraction radius r* = a^(-1/2) = "
      << (r.contraction_radius ? to_sci(*r.contraction_radius, 6) : "-") << "\n";
    o << "beta_l = " << list_values(r.beta, 6) << "\n";
    bool any_lambda = false;
    for (const auto& l : r.lambda) any_lambda = any_lambda || l.has_value();
    if (r.theorem.theorem == Theorem::cor_3_2 && any_lambda) {
      std::vector<BigReal> ls;
      for (const auto& l : r.lambda) ls.push_back(l ? *l : BigReal(0));
      o << "lambda_l = " << list_values(ls, 6) << "\n";
    }
    const std::string note = contraction_sentence(r), vac = "vacuous: ";
    o << (r.vacuous && note.rfind(vac, 0) == 0 ? "VACUOUS: " + note.substr(vac.size()) : note) << "\n";
  } else {
    const std::string prefix = "not applicable: ";
    const std::string& why = r.theorem.reason;
    o << "NOT APPLICABLE: " << (why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why) << "\n";
  }
  if (a.coverage.any()) o << coverage_sentence(a.coverage) << "\n";
  o << "precision: " << residual_series_note(a.measured) << "\n\n";

  bool starred = false;
  if (r.theorem.applicable) {
    const std::string t = theorem_title(r.theorem.theorem);
    o << pad("layer", 6) << pad("measured r_l [lower, upper]", 36) << pad("bound (" + t + ")", 22)
      << pad("verdict", 11) << pad("slack log10", 14) << pad("layerwise bound", 22) << pad("verdict", 11)
      << pad("â_l = r_l/r_{l-1}^3", 21) << pad("a_l", 12) << "q_l\n";
    o << pad("0", 6) << pad(measured_text(a.measured.depths.front(), 6), 36) << "(r_0)\n";
    for (const DepthComparison& d : r.depths) {
      const MeasuredDepth& m = a.measured.depths[static_cast<std::size_t>(d.layer)];
      const bool star = d.measured.below_resolution;
      starred = starred || star;
      o << pad(std::to_string(d.layer), 6) << pad(measured_text(m, 6) + (star ? " *" : ""), 36)
        << pad(d.bound ? d.bound->value.to_string(4) : "-", 22) << pad(to_string(d.verdict) + (star ? "*" : ""), 11)
        << pad(d.slack_log10 ? (star ? "≥ " : "") + to_decimal(*d.slack_log10, 6) : "-", 14)
        << pad(d.layerwise_bound ? d.layerwise_bound->value.to_string(4) : "-", 22)
        << pad(to_string(d.layerwise_verdict) + (star ? "*" : ""), 11)
        << pad(d.cubic_constant ? d.cubic_constant->to_string(4) : "-", 21)
        << pad(d.a_layer ? to_sci(*d.a_layer, 4) : "-", 12) << (d.order ? to_decimal(*d.order, 5) : "-") << "\n";
    }
    o << "\nverdict: HOLDS if measured upper ≤ bound lower, VIOLATED if measured lower > bound upper, else "
         "UNDECIDED; slack log10 = log10(bound / measured upper) (negative: above the bound); q_l = log r_l / "
         "log r_{l-1} (→ 3 for a doubly exponential collapse)\n";
  } else if (a.without_skip) {
    o << pad("layer", 6) << pad("r_l with skip [lower, upper]", 36) << pad("r_l without skip [lower, upper]", 36)
      << pad("â_l (with skip)", 18) << "q_l (with skip)\n";
    for (std::size_t l = 0; l < a.measured.depths.size(); ++l) {
      const MeasuredDepth& m = a.measured.depths[l];
      const MeasuredDepth& w = a.without_skip->depths[l];
      const bool star = m.enclosure.below_resolution || w.enclosure.below_resolution;
      starred = starred || star;
      const DepthComparison* d = l > 0 ? &r.depths[l - 1] : nullptr;
      o << pad(std::to_string(l), 6) << pad(measured_text(m, 6), 36) << pad(measured_text(w, 6), 36)
        << pad(d && d->cubic_constant ? d->cubic_constant->to_string(4) : "-", 18)
        << (d && d->order ? to_decimal(*d->order, 5) : "-") << "\n";
    }
  } else {
    o << pad("layer", 6) << pad("measured r_l [lower, upper]", 36) << pad("verdict", 16)
      << pad("â_l = r_l/r_{l-1}^3", 21) << "q_l\n";
    for (std::size_t l = 0; l < a.measured.depths.size(); ++l) {
      const MeasuredDepth& m = a.measured.depths[l];
      starred = starred || m.enclosure.below_resolution;
      const DepthComparison* d = l > 0 ? &r.depths[l - 1] : nullptr;
      o << pad(std::to_string(l), 6) << pad(measured_text(m, 6), 36)
        << pad(d ? to_string(d->verdict) : "(r_0)", 16)
        << pad(d && d->cubic_constant ? d->cubic_constant->to_string(4) : "-", 21)
        << (d && d->order ? to_decimal(*d->order, 5) : "-") << "\n";
    }
  }
  if (starred)
    o << "* below what the precision resolves: the measured value is an upper bound (< 1e-N); the verdict is "
         "decided on that upper bound, the slack is a lower bound, â_l and q_l are not estimated\n";
  o << "\n";
  // The notes not already printed in the header.
  for (const Note& n : notes_of(a))
    if (n.kind == NoteKind::verdicts || n.kind == NoteKind::skip_comparison) o << "- " << n.text << "\n";
  return text_table::trim_line_ends(o.str());
}

std::string csv(const BoundsAnalysis& a) {
  std::ostringstream o;
  o << "layer,measured_lower,measured_upper,below_resolution,bound,bound_lower,bound_upper,log10_bound,"
       "layerwise_bound,verdict,layerwise_verdict,slack_log10,cubic_constant,a_layer,order,gamma,theorem\n";
  const std::string g = gamma_string(a.report.gamma), t = to_string(a.report.theorem.theorem);
  for (const MeasuredDepth& m : a.measured.depths) {
    const DepthComparison* d = m.layer > 0 ? &a.report.depths[static_cast<std::size_t>(m.layer - 1)] : nullptr;
    const ordered_json mj = measured_json(m);
    o << m.layer << ',' << mj["lower"].get<std::string>() << ',' << mj["upper"].get<std::string>() << ','
      << (m.enclosure.below_resolution ? "true" : "false") << ',';
    if (d && d->bound)
      o << d->bound->value.to_string(17) << ',' << d->bound->lower.to_string(17) << ','
        << d->bound->upper.to_string(17) << ',' << d->bound->value.log10_string(17) << ','
        << d->layerwise_bound->value.to_string(17);
    else
      o << ",,,,";
    o << ',' << (d ? to_string(d->verdict) : "") << ',' << (d ? to_string(d->layerwise_verdict) : "") << ','
      << (d && d->slack_log10 ? to_decimal(*d->slack_log10, 17) : "") << ','
      << (d && d->cubic_constant ? d->cubic_constant->to_string(17) : "") << ','
      << (d && d->a_layer ? to_sci(*d->a_layer, 17) : "") << ',' << (d && d->order ? to_decimal(*d->order, 17) : "")
      << ',' << g << ',' << t << '\n';
  }
  return o.str();
}

}  // namespace

std::string format_bounds(const BoundsAnalysis& a, const Model& model, const RunInfo& info, Format f) {
  if (f == Format::json) {
    ordered_json j;
    j["model"] = model_json(model, info);
    j["input"] = info.input;
    j["variant"] = variant_json(a.measured.variant);
    j.update(bounds_json(a));
    return j.dump(2) + "\n";
  }
  if (f == Format::csv) return csv(a);
  return table(a, model, info);
}

std::string format_bounds_search(const BoundsSearchResult& r, Format f) {
  const BoundsSearchSpec& s = r.spec;
  const std::string recheck_cmd =
      r.model_path.empty() ? std::string()
                           : "sanpath bounds --model " + r.model_path + " --input " + r.input_path +
                                 (s.gamma == 1 ? std::string() : " --gamma " + gamma_string(s.gamma));
  if (f == Format::json) {
    ordered_json j;
    j["search"] = {{"layers", s.layers},           {"heads", s.heads},
                   {"d_model", s.d_model},         {"d_qk", s.d_qk},
                   {"tokens", s.tokens},           {"seed", s.seed},
                   {"iterations", s.iterations},   {"search_bits", s.search_bits},
                   {"gamma", gamma_string(s.gamma)}, {"theorem", to_string(s.theorem)}};
    j["evaluations"] = r.evaluations;
    j["best_log10_ratio"] = to_decimal(r.log10_ratio, 17);
    j["best_depth"] = r.depth;
    ordered_json steps = ordered_json::array();
    for (const SearchStep& st : r.improvements)
      steps.push_back({{"iteration", st.iteration}, {"log10_ratio", to_decimal(st.log10_ratio, 17)}, {"depth", st.depth}});
    j["improvements"] = steps;
    j["recheck_log10_ratio"] = decimal_or_null(r.recheck_log10_ratio);
    j["recheck_depth"] = r.recheck_depth;
    j["violated"] = r.violated;
    j["saved"] = {{"model", r.model_path}, {"input", r.input_path}};
    j["recheck_command"] = recheck_cmd;
    if (r.recheck && r.model)
      j["recheck"] = bounds_json(*r.recheck);
    else
      j["recheck"] = nullptr;
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  o << "Counterexample search for Theorem " << (s.heads == 1 && s.theorem != Theorem::thm_2_3 ? "2.2" : "2.3")
    << ": maximise log10(measured r_l / bound_l) over small SANs\n";
  o << "sizes: L=" << s.layers << ", H=" << s.heads << ", d=" << s.d_model << ", d_qk=d_v=" << s.d_qk
    << ", n=" << s.tokens << "; seed " << s.seed << ", " << r.evaluations << " evaluations at " << s.search_bits
    << " bits; gamma = " << gamma_string(s.gamma) << "\n";
  o << "best at the search precision: log10(r_l / bound_l) = " << to_decimal(r.log10_ratio, 6) << " at depth "
    << r.depth << " (" << r.improvements.size() << " improvements)\n";
  if (r.recheck_log10_ratio)
    o << "re-check at " << (r.recheck ? r.recheck->precision().name() : std::string("?"))
      << ": log10(r_l / bound_l) = " << to_decimal(*r.recheck_log10_ratio, 6) << " at depth " << r.recheck_depth
      << "\n";
  o << (r.violated ? "VIOLATED: the re-check certifies a depth where the measured residual exceeds the bound. "
                     "With gamma = 1 this contradicts the ICML 2021 statement; keep the files.\n"
                   : "no violation: the bound held (or was undecided) at every depth of the re-check\n");
  if (!r.model_path.empty()) {
    o << "saved: model " << r.model_path << ", input " << r.input_path << "\n";
    o << "re-check: " << recheck_cmd << "\n";
  }
  if (r.recheck && r.model) {
    o << "\n";
    o << table(*r.recheck, *r.model, {r.model_path.empty() ? std::string("(search result)") : r.model_path,
                                      r.input_path.empty() ? std::string("(search result)") : r.input_path});
  }
  return text_table::trim_line_ends(o.str());
}

}  // namespace sanpath

// ---------------------------------------------------------------------- batches

namespace sanpath {

std::string format_bounds_batch(const BatchBounds& b, const std::vector<InputSpec>& inputs, const Model& model,
                                const RunInfo& info, Format f) {
  using json_parts::statistic_json;
  const BoundsAnalysis& first = b.runs.front();
  const BoundsReport& r = first.report;
  const auto verdicts_json = [](const VerdictCounts& c) {
    return ordered_json{{"HOLDS", c.holds},
                        {"VIOLATED", c.violated},
                        {"UNDECIDED", c.undecided},
                        {"NOT_APPLICABLE", c.not_applicable}};
  };
  if (f == Format::json) {
    ordered_json j;
    j["model"] = model_json(model, info);
    j["input"] = info.input;
    j["batch"] = b.runs.size();
    j["variant"] = variant_json(first.measured.variant);
    j["statistics"] = json_parts::statistics_text;
    j["gamma"] = gamma_string(r.gamma);
    j["theorem"] = r.theorem.applicable ? ordered_json(r.theorem.reason) : ordered_json(nullptr);
    j["a"] = str_or_null(r.a);
    ordered_json depths = ordered_json::array();
    for (std::size_t l = 0; l < b.relative.size(); ++l) {
      ordered_json d{{"layer", l}, {"relative", statistic_json(b.relative[l])}};
      d["verdicts"] = l == 0 ? ordered_json(nullptr) : verdicts_json(b.verdicts[l - 1]);
      depths.push_back(d);
    }
    j["depths"] = depths;
    j["inputs"] = json_parts::each_input_json(b.runs, inputs, info, [&](const BoundsAnalysis& a, const RunInfo& i) {
      return format_bounds(a, model, i, Format::json);
    });
    return j.dump(2) + "\n";
  }
  std::ostringstream o;
  if (f == Format::csv) {
    o << "layer,relative_mean,relative_stddev,relative_min,relative_median,relative_max,relative_digits,holds,"
         "violated,undecided,not_applicable\n";
    for (std::size_t l = 0; l < b.relative.size(); ++l) {
      const BatchStatistic& s = b.relative[l];
      o << l << ',' << s.mean.str() << ',' << (s.stddev ? s.stddev->str() : "") << ',' << s.min.str() << ','
        << s.median.str() << ',' << s.max.str() << ',' << (s.mean.digits ? std::to_string(*s.mean.digits) : "");
      if (l == 0) {
        o << ",,,,\n";
      } else {
        const VerdictCounts& c = b.verdicts[l - 1];
        o << ',' << c.holds << ',' << c.violated << ',' << c.undecided << ',' << c.not_applicable << '\n';
      }
    }
    return o.str();
  }
  std::vector<long> bits;
  bool confirmed = true, proven = true;
  for (const BoundsAnalysis& a : b.runs) {
    bits.push_back(provenance_text::bits_of(a.precision()));
    confirmed = confirmed && a.check().has_value();
    proven = proven && a.measured.check_method == CheckMethod::certified;
  }
  const Architecture& arch = model.arch();
  o << "Bounds of Dong, Cordonnier & Loukas (ICML 2021) against measured residuals, over a batch of "
    << b.runs.size() << " inputs\n";
  o << report_text::model_line(info.model, arch, {true, false, true});
  o << "input: " << info.input << "\n";
  o << "variant: " << to_string(first.measured.variant) << "\n";
  o << "gamma = " << gamma_string(r.gamma) << "\n";
  o << "theorem: " << r.theorem.reason << "\n";
  if (r.theorem.applicable) o << "a = " << (r.a ? to_sci(*r.a, 6) : "-") << " (the same for every input)\n";
  o << json_parts::batch_precision_range(bits, confirmed, proven) << "\n";
  o << "relative = r_l / ‖X^l‖_{1,∞} (r_l: upper end of the optimal-centre enclosure) of each input; "
    << json_parts::statistics_text << "; digits of the mean in brackets; verdicts of the uniform bound, counted over "
       "the inputs (each input's own table: --format json)\n\n";
  o << pad("layer", 7) << pad("relative (mean ± std)", 34) << pad("min", 14) << pad("median", 14) << pad("max", 14)
    << "HOLDS / VIOLATED / UNDECIDED\n";
  for (std::size_t l = 0; l < b.relative.size(); ++l) {
    o << pad(std::to_string(l), 7) << pad(mean_std_cell(b.relative[l]), 34);
    for (const std::string& c : json_parts::min_median_max_cells(b.relative[l])) o << pad(c, 14);
    if (l > 0 && r.theorem.applicable) {
      const VerdictCounts& c = b.verdicts[l - 1];
      o << c.holds << " / " << c.violated << " / " << c.undecided;
    } else if (l > 0) {
      o << "not applicable";
    } else {
      o << "(r_0)";
    }
    o << "\n";
  }
  return text_table::trim_line_ends(o.str());
}

}  // namespace sanpath

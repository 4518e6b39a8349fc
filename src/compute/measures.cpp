#include "sanpath/compute/measures.hpp"

#include <sstream>
#include <stdexcept>

namespace sanpath {

const std::vector<Measure>& all_measures() {
  static const std::vector<Measure> all = {Measure::mu,           Measure::svd_residual,      Measure::cosine,
                                           Measure::stable_rank,  Measure::effective_rank,    Measure::attention_entropy,
                                           Measure::first_token_mass};
  return all;
}

const char* measure_name(Measure m) {
  switch (m) {
    case Measure::mu: return "mu";
    case Measure::svd_residual: return "svd_residual";
    case Measure::cosine: return "cosine";
    case Measure::stable_rank: return "stable_rank";
    case Measure::effective_rank: return "effective_rank";
    case Measure::attention_entropy: return "attention_entropy";
    case Measure::first_token_mass: return "first_token_mass";
  }
  return "?";
}

bool is_attention_measure(Measure m) { return m == Measure::attention_entropy || m == Measure::first_token_mass; }

MeasureSet MeasureSet::all() {
  MeasureSet s;
  for (Measure m : all_measures()) s.add(m);
  return s;
}

MeasureSet MeasureSet::parse(const std::string& text) {
  if (text == "all") return all();
  MeasureSet s;
  if (text == "none") return s;
  std::istringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    bool found = false;
    for (Measure m : all_measures())
      if (name == measure_name(m)) {
        s.add(m);
        found = true;
      }
    if (!found) {
      std::string names;
      for (Measure m : all_measures()) names += std::string(measure_name(m)) + ", ";
      throw std::invalid_argument("measures: '" + name + "' is not one of " + names + "all or none");
    }
  }
  if (s.empty()) throw std::invalid_argument("measures: '" + text + "' names no measure (all, none or a list)");
  return s;
}

std::vector<Measure> MeasureSet::list() const {
  std::vector<Measure> out;
  for (Measure m : all_measures())
    if (has(m)) out.push_back(m);
  return out;
}

bool MeasureSet::any_attention() const {
  return has(Measure::attention_entropy) || has(Measure::first_token_mass);
}

std::string MeasureSet::str() const {
  if (empty()) return "none";
  if (*this == all()) return "all";
  std::string s;
  for (Measure m : list()) s += (s.empty() ? "" : ",") + std::string(measure_name(m));
  return s;
}

std::vector<std::string> measure_value_names(const MeasureSet& m, bool attention_layer) {
  std::vector<std::string> out;
  for (Measure x : m.list()) {
    if (is_attention_measure(x) && !attention_layer) continue;
    out.emplace_back(measure_name(x));
    if (x == Measure::cosine) out.emplace_back("one_minus_cosine");
    if (x == Measure::stable_rank) out.emplace_back("stable_rank_minus_one");
    if (x == Measure::effective_rank) out.emplace_back("effective_rank_minus_one");
  }
  return out;
}

}  // namespace sanpath

#include "sanpath/compute/path_counts.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

namespace sanpath {

namespace {

void check_size(const char* field, int value) {
  if (value < 1 || value > max_path_graph_size)
    throw std::invalid_argument(std::string("path graph: ") + field + " must be in [1, " +
                                std::to_string(max_path_graph_size) + "], got " + std::to_string(value));
}

std::string sci(double x) {
  std::ostringstream os;
  os.precision(2);
  os << std::scientific << x;
  return os.str();
}

}  // namespace

std::string to_string(const PathGraphSpec& s) {
  return "layers=" + std::to_string(s.layers) + ", heads=" + std::to_string(s.heads) +
         ", skip=" + (s.skip ? "on" : "off");
}

void validate(const PathGraphSpec& spec) {
  check_size("layers", spec.layers);
  check_size("heads", spec.heads);
}

std::vector<PathCount> count_by_length(const std::vector<LayerChoice>& layers) {
  const std::size_t L = layers.size();
  std::vector<PathCount> c(L + 1, PathCount(0));
  bool any_skip = false;
  for (const LayerChoice& ch : layers) any_skip = any_skip || ch.skip;
  if (!any_skip) {  // only length L: one product
    PathCount x = 1;
    for (const LayerChoice& ch : layers) x *= ch.heads;
    c[L] = x;
    return c;
  }
  c[0] = 1;
  // Multiply by (s_l + h_l x), k from high to low so that c[k−1] still holds
  // the previous layer's coefficient when c[k] is updated in place.
  for (std::size_t l = 0; l < L; ++l) {
    const LayerChoice& ch = layers[l];
    for (std::size_t k = l + 1; k >= 1; --k) {
      if (!ch.skip) c[k] = 0;
      if (ch.heads != 0) c[k] += c[k - 1] * ch.heads;
    }
    if (!ch.skip) c[0] = 0;
  }
  return c;
}

double path_count_work(const PathGraphSpec& spec) {

  validate(spec);
  const double L = spec.layers;
  const double lg = std::log2(static_cast<double>(spec.heads));
  constexpr double per_op = 4.0;  // fixed cost of one big-integer operation, in limbs
  // Units are limbs touched, calibrated so that 10^9 units take about 3 s.
  // Without skip one word multiplication per layer: Σ_l l·log2 H / 64 limbs,
  // half weighted (one pass instead of the multiply and add passes below).
  if (!spec.skip) return L * L * lg / 256.0 + L * per_op;
  // Σ_l Σ_{k<=l} log2(C(l,k)·H^k) bits ≈ L³·(log2 H / 6 + 0.24).
  return L * L * L * (lg / 6.0 + 0.24) / 64.0 + L * L / 2.0 * per_op;
}

PathCounts count_paths(const PathGraphSpec& spec) {
  validate(spec);
  const double work = path_count_work(spec);
  if (work > max_path_count_work)
    throw std::invalid_argument("count_paths: " + to_string(spec) + " needs about " + sci(work) +
                                " limb operations (limit " + sci(max_path_count_work) +
                                "); use total_paths for the total alone");
  PathCounts out;
  out.by_length = count_by_length(std::vector<LayerChoice>(static_cast<std::size_t>(spec.layers),
                                                           LayerChoice{spec.skip, spec.heads}));
  out.total = 0;
  for (const PathCount& c : out.by_length) out.total += c;
  return out;
}

BigInt total_paths(const PathGraphSpec& spec) {
  validate(spec);
  const unsigned base = static_cast<unsigned>(spec.heads) + (spec.skip ? 1U : 0U);
  return boost::multiprecision::pow(BigInt(base), static_cast<unsigned>(spec.layers));
}

}  // namespace sanpath

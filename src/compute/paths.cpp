// Non-template parts of the path decomposition: filters, exact counts, the
// refusal error, task splitting and random paths.
#include "compute/paths_impl.hpp"

#include <numeric>

namespace sanpath {

void require_attention_only(const Variant& v) {
  if (!v.attention_only())
    throw std::invalid_argument(
        "path decomposition: exact only for attention-only networks (mlp none, layernorm none); the variant is " +
        to_string(v, VariantStyle::prose));
}

void validate_filter(const PathFilter& f, int layers, int heads, bool skip) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("path filter: " + m); };
  if (layers < 1 || heads < 1)
    fail("the network has " + std::to_string(layers) + " layers and " + std::to_string(heads) + " heads");
  const int kmax = f.max_length < 0 ? layers : f.max_length;
  if (f.min_length < 0 || f.min_length > layers)
    fail("min length " + std::to_string(f.min_length) + " is outside [0, " + std::to_string(layers) + "]");
  if (kmax > layers)
    fail("max length " + std::to_string(kmax) + " is outside [0, " + std::to_string(layers) + "]");
  if (f.min_length > kmax)
    fail("min length " + std::to_string(f.min_length) + " exceeds max length " + std::to_string(kmax));
  if (!f.allowed_heads.empty() && static_cast<int>(f.allowed_heads.size()) != layers)
    fail("heads per layer: " + std::to_string(f.allowed_heads.size()) + " entries given, the network has " +
         std::to_string(layers) + " layers");
  for (std::size_t l = 0; l < f.allowed_heads.size(); ++l)
    for (const int c : f.allowed_heads[l]) {
      if (c == -1 && !skip)
        fail("layer " + std::to_string(l + 1) + ": skip (-1) is allowed only with skip connections on");
      if (c < -1 || c >= heads)
        fail("layer " + std::to_string(l + 1) + ": head " + std::to_string(c) + " is outside [0, " +
             std::to_string(heads) + ")" + (skip ? " (or -1 for skip)" : ""));
    }
}

namespace detail {

PathPlan make_path_plan(int layers, int heads, bool skip, const PathFilter& filter) {
  validate_filter(filter, layers, heads, skip);
  PathPlan p;
  p.layers = layers;
  p.heads = heads;
  p.skip = skip;
  p.kmin = filter.min_length;
  p.kmax = filter.max_length < 0 ? layers : filter.max_length;
  const auto L = static_cast<std::size_t>(layers);
  p.choices.resize(L);
  for (std::size_t l = 0; l < L; ++l) {
    std::vector<int>& c = p.choices[l];
    if (filter.allowed_heads.empty()) {
      if (skip) c.push_back(-1);
      for (int h = 0; h < heads; ++h) c.push_back(h);
    } else {
      c = filter.allowed_heads[l];
      std::sort(c.begin(), c.end());
      c.erase(std::unique(c.begin(), c.end()), c.end());
    }
    if (c.empty()) p.empty = true;
  }
  p.min_add.assign(L + 1, 0);
  p.max_add.assign(L + 1, 0);
  for (std::size_t l = L; l-- > 0;) {
    const bool can_skip = !p.choices[l].empty() && p.choices[l].front() == -1;
    const bool can_head = !p.choices[l].empty() && p.choices[l].back() >= 0;
    p.min_add[l] = p.min_add[l + 1] + (can_skip ? 0 : 1);
    p.max_add[l] = p.max_add[l + 1] + (can_head ? 1 : 0);
  }
  if (!p.empty && !p.reachable(0, 0)) p.empty = true;
  return p;
}

std::vector<PathCount> plan_counts(const PathPlan& p) {
  const auto L = static_cast<std::size_t>(p.layers);
  if (p.empty) return std::vector<PathCount>(L + 1, PathCount(0));
  std::vector<LayerChoice> layers;
  for (const auto& ch : p.choices) {
    const bool skip = !ch.empty() && ch.front() == -1;  // choices are sorted: -1 first
    layers.push_back({skip, static_cast<long>(ch.size()) - (skip ? 1 : 0)});
  }
  std::vector<PathCount> c = count_by_length(layers);
  for (std::size_t k = 0; k <= L; ++k)
    if (static_cast<int>(k) < p.kmin || static_cast<int>(k) > p.kmax) c[k] = 0;
  return c;
}

std::vector<std::vector<int>> task_prefixes(const PathPlan& p, std::size_t target) {
  struct Node {
    std::vector<int> heads;
    int len;
  };
  std::vector<Node> level;
  if (p.empty) return {};
  level.push_back({{}, 0});
  for (int depth = 0; depth < p.layers && level.size() < target; ++depth) {
    std::vector<Node> next;
    for (const Node& node : level)
      for (const int c : p.choices[static_cast<std::size_t>(depth)]) {
        const int nl = node.len + (c >= 0 ? 1 : 0);
        if (!p.reachable(depth + 1, nl)) continue;
        Node child{node.heads, nl};
        child.heads.push_back(c);
        next.push_back(std::move(child));
      }
    level = std::move(next);
  }
  std::vector<std::vector<int>> out;
  out.reserve(level.size());
  for (auto& node : level) out.push_back(std::move(node.heads));
  return out;
}

}  // namespace detail

std::vector<PathCount> count_paths_by_length(int layers, int heads, bool skip, const PathFilter& filter) {
  return detail::plan_counts(detail::make_path_plan(layers, heads, skip, filter));
}

PathCount count_filtered_paths(int layers, int heads, bool skip, const PathFilter& filter) {
  PathCount total = 0;
  for (const auto& c : count_paths_by_length(layers, heads, skip, filter)) total += c;
  return total;
}

PathLimitError::PathLimitError(const PathCount& count, std::uint64_t limit)
    : ResourceError("path enumeration refused: " + count.str() + " paths to visit exceed the limit of " +
                    std::to_string(limit) +
                    " paths; use length sums (--sums) for the total of each path length, or sampling (--sample) "
                    "for statistics of random paths, or narrow the filter or raise the limit"),
      count_(count),
      limit_(limit) {}

std::vector<int> random_path(Rng& rng, int layers, int heads, bool skip, int length) {
  if (layers < 1 || heads < 1)
    throw std::invalid_argument("random path: the network has " + std::to_string(layers) + " layers and " +
                                std::to_string(heads) + " heads");
  if (length < 0 || length > layers || (!skip && length != layers))
    throw std::invalid_argument("random path: no path of length " + std::to_string(length) + " with " +
                                std::to_string(layers) + " layers and skip " + (skip ? "on" : "off"));
  const auto L = static_cast<std::size_t>(layers);
  std::vector<std::size_t> order(L);
  std::iota(order.begin(), order.end(), std::size_t(0));
  // Partial Fisher–Yates: order[0..length) is a uniform k-subset (in random order).
  for (std::size_t i = 0; i < static_cast<std::size_t>(length); ++i) {
    const std::size_t j = i + static_cast<std::size_t>(rng.below(L - i));
    std::swap(order[i], order[j]);
  }
  std::vector<int> path(L, -1);
  for (std::size_t i = 0; i < static_cast<std::size_t>(length); ++i)
    path[order[i]] = static_cast<int>(rng.below(static_cast<std::uint64_t>(heads)));
  return path;
}

}  // namespace sanpath

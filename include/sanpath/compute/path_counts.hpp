#pragma once
/// \file path_counts.hpp
/// Exact numbers of head paths (math.md §4), by length, as arbitrary-size
/// integers: (H+1)^L overflows 64 bits at 13^24. One dynamic programme does
/// all the counting: layer l offers a path the skip connection (when
/// allowed) and a number of heads, so the counts by length are the
/// coefficients of \f$ \prod_l ([\mathrm{skip}_l] + h_l\,x) \f$.
/// compute/paths.hpp counts filtered paths with it, compute/path_graph.hpp
/// draws the graph these paths run through.

#include <boost/multiprecision/cpp_int.hpp>

#include <string>
#include <vector>

namespace sanpath {

/// Exact integer for path counts (arbitrary precision).
using PathCount = boost::multiprecision::cpp_int;
/// The same type, as the graph API names it.
using BigInt = PathCount;

/// Sizes of the head-path DAG. `layers` = L, `heads` = H, each in
/// [1, max_path_graph_size]; `skip`: one skip vertex per layer.
struct PathGraphSpec {
  int layers = 1;
  int heads = 1;
  bool skip = false;
};

/// Upper limit of PathGraphSpec::layers and ::heads.
inline constexpr int max_path_graph_size = 100000;
/// Throws std::invalid_argument (one line, naming the field) unless
/// 1 <= layers, heads <= max_path_graph_size.
void validate(const PathGraphSpec& spec);

/// "layers=12, heads=12, skip=on", for messages.
std::string to_string(const PathGraphSpec& spec);

/// What one layer offers a path: the skip connection, and `heads` heads.
struct LayerChoice {
  bool skip = false;
  long heads = 0;
};

/// Coefficients k = 0..L of \f$ \prod_l ([\mathrm{skip}_l] + h_l\,x) \f$: the number
/// of paths with k non-skip layers. O(L²) big-integer-by-word multiply-adds
/// (O(L) when no layer allows skipping).
std::vector<PathCount> count_by_length(const std::vector<LayerChoice>& layers);

/// Numbers of source→sink paths: by_length[k], k = 0..L, counts the paths
/// with k non-skip vertices; total = Σ_k by_length[k].
struct PathCounts {
  BigInt total;
  std::vector<BigInt> by_length;
};

/// Path counts by dynamic programming over the layers in topological order
/// (source, layer 1, …, layer L, sink). With a_l[k] the number of paths of
/// length k from the source into layer l, summed over the layer's vertices:
/// a_0 = e_0 and \f$ a_l[k] = H\,a_{l-1}[k-1] + [\mathrm{skip}]\,a_{l-1}[k] \f$
/// (each of the H head vertices extends every path by one, the skip vertex
/// by none); the sink receives a_L. This is the per-vertex DP of the graph
/// aggregated per layer, valid because a layer's vertices share their
/// in-neighbours. Cost: O(L²) multiply-adds of a big integer by a word
/// (O(L) without skip), on integers of up to L·log2(H+1) bits; no graph.
/// Throws std::invalid_argument for an invalid spec or when the estimated
/// work (path_count_work) exceeds max_path_count_work.
/// \code
/// const PathCounts c = count_paths({12, 12, true});  // BERT-base with skip connections
/// // c.total == 13^12 == 23298085122481, c.by_length[k] == C(12,k)·12^k
/// \endcode
PathCounts count_paths(const PathGraphSpec& spec);

/// Estimated work of count_paths in 64-bit limb operations (with skip about
/// L³·(log2 H / 6 + 1/4) / 64; without skip L²·log2 H / 256, so every valid
/// spec without skip is countable).
double path_count_work(const PathGraphSpec& spec);
/// Refusal threshold of count_paths: a few seconds of counting on one core
/// ((1000,1000) with skip is 3.2·10^7 units; (3000,100000) is refused).
inline constexpr double max_path_count_work = 1e9;

/// Total number of paths only, (H+1)^L or H^L: cheap for every valid spec.
BigInt total_paths(const PathGraphSpec& spec);

}  // namespace sanpath

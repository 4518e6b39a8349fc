#pragma once
// The query/key norm (families.md, "Qwen3 and Gemma 3 (text) — query/key
// norms" §1; Architecture::query_key_norm): an RMSNorm of each head's
// projected query or key row, after the bias and before the rotary. One
// function for every scalar; a layer applies it to Q with the layer's q_norm
// and to K with its k_norm (values are not normalised).
#include "sanpath/compute/forward.hpp"  // decimal_constant
#include "sanpath/core/scalar.hpp"

#include <stdexcept>
#include <string>

namespace sanpath {

/// In place on Q (n × heads·d_head): in every row, the block of columns
/// [h·d_head, (h+1)·d_head) of head h, u, becomes
/// \f$ u / \sqrt{\mathrm{mean}_k(u_k^2) + \varepsilon} \circ \gamma \f$, with
/// γ = gain (d_head) or 1 + gain when `unit_offset`, and ε the decimal `eps`
/// rounded once to S (rms_norm's order of operations: the mean of squares
/// summed left to right, then one reciprocal square root, then u·inv·γ).
/// Throws std::invalid_argument when the shapes disagree.
template <class S>
void query_key_norm(Matrix<S>& Q, int heads, int d_head, const VectorXd& gain, double eps, bool unit_offset) {
  using std::sqrt;
  if (heads < 1 || d_head < 1 || Q.cols() != static_cast<Eigen::Index>(heads) * d_head || gain.size() != d_head)
    throw std::invalid_argument("query_key_norm: Q has " + std::to_string(Q.cols()) + " columns and the gain " +
                                std::to_string(gain.size()) + " entries, for " + std::to_string(heads) +
                                " heads of width " + std::to_string(d_head));
  const S e = decimal_constant<S>(eps);
  const S width = S(static_cast<double>(d_head));
  RowVector<S> g(d_head);
  for (Eigen::Index k = 0; k < d_head; ++k) g(k) = unit_offset ? S(S(1) + S(gain(k))) : S(gain(k));
  for (Eigen::Index i = 0; i < Q.rows(); ++i)
    for (Eigen::Index h = 0; h < heads; ++h) {
      const Eigen::Index first = h * d_head;
      S ms(0);
      for (Eigen::Index k = 0; k < d_head; ++k) ms += Q(i, first + k) * Q(i, first + k);
      ms /= width;
      const S inv = S(1) / sqrt(S(ms + e));
      for (Eigen::Index k = 0; k < d_head; ++k) Q(i, first + k) = Q(i, first + k) * inv * g(k);
    }
}

}  // namespace sanpath

#include "sanpath/compute/forward.hpp"
#include "sanpath/core/resources.hpp"

#include <algorithm>

namespace sanpath {

std::uint64_t forward_scalar_count(const Architecture& a, std::uint64_t n, bool with_mlp, bool record_attention) {
  const auto L = static_cast<std::uint64_t>(std::max(a.layers, 0)), H = static_cast<std::uint64_t>(std::max(a.heads, 0));
  const auto d = static_cast<std::uint64_t>(std::max(a.d_model, 0)), dq = static_cast<std::uint64_t>(std::max(a.d_qk, 0));
  const auto dv = static_cast<std::uint64_t>(std::max(a.d_v, 0)), ff = static_cast<std::uint64_t>(std::max(a.d_ff, 0));
  const std::uint64_t nn = mul_sat(n, n), nd = mul_sat(n, d);
  const std::uint64_t qkv = add_sat(mul_sat(2, dq), dv);  // 2·d_qk + d_v per head
  std::uint64_t c = mul_sat(L + 1, nd);                    // X^0..X^L
  // Attention matrices: all of them, or A and P_h of the current head.
  c = add_sat(c, record_attention ? add_sat(mul_sat(mul_sat(L, H), nn), nn) : mul_sat(2, nn));
  // Packed weights of one layer: W_Q, W_K, W_V (d×H·(2d_qk+d_v)), W_O, biases.
  c = add_sat(c, mul_sat(mul_sat(d, H), add_sat(qkv, dv)));
  c = add_sat(c, add_sat(mul_sat(H, qkv), d));
  // Q, K, V (n×H·(2d_qk+d_v)), one head's slices, PV, heads_out (n×H·d_v).
  c = add_sat(c, mul_sat(mul_sat(n, H), add_sat(qkv, dv)));
  c = add_sat(c, mul_sat(n, add_sat(qkv, dv)));
  // Z, the next X, a LayerNorm temporary and the attention output.
  c = add_sat(c, mul_sat(4, nd));
  if (with_mlp) {
    c = add_sat(c, add_sat(mul_sat(mul_sat(2, d), ff), add_sat(ff, d)));  // W_1, W_2, b_1, b_2
    c = add_sat(c, add_sat(mul_sat(n, ff), nd));                           // hidden layer, output
    if (a.gated_mlp) c = add_sat(c, mul_sat(add_sat(d, n), ff));            // W_gate, gate pre-activations
  }
  if (a.rope_theta) c = add_sat(c, mul_sat(n, dq));                         // cos, sin tables (n×d_qk/2 each)
  if (a.xlnet_relative) {  // sinusoid (2n−1)×d, its projection (2n−1)×H·d_qk, two shifted query copies and B
    const std::uint64_t m = mul_sat(2, n);
    c = add_sat(c, add_sat(mul_sat(m, d), mul_sat(mul_sat(m, H), dq)));
    c = add_sat(c, add_sat(mul_sat(mul_sat(2, n), dq), mul_sat(n, m)));
  }
  return c;
}

std::string describe_forward_estimate(const Architecture& a, std::uint64_t n, bool record_attention, bool is_mpfr,
                                      long bits) {
  const std::string prec = is_mpfr ? std::to_string(bits) + "-bit MPFR scalars of " +
                                         std::to_string(scalar_bytes(true, bits)) + " bytes"
                                   : "doubles";
  std::string s;
  if (record_attention)
    s = std::to_string(a.layers) + " layers × " + std::to_string(a.heads) + " heads × " + std::to_string(n) +
        "² attention entries";
  else
    s = "2 × " + std::to_string(n) + "² attention entries";
  s += " + " + std::to_string(a.layers + 1) + " × " + std::to_string(n) + " × " + std::to_string(a.d_model) +
       " layer outputs + weights and temporaries, in " + prec;
  return s;
}

}  // namespace sanpath

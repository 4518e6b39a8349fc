#pragma once
/// \file layer_impl.hpp
/// One layer of math.md §2 and families.md — the block shapes (no norm,
/// pre, post, Gemma 2's sandwich norms, parallel blocks) — written once over
/// an *arithmetic*: the direct pass's scalars (forward_impl.hpp), the centred
/// pair (forward_centred_impl.hpp), the ball (enclosure_impl.hpp), the
/// centred ball (enclosure_centred_impl.hpp) and the emulated formats
/// (emulate.cpp) each supply the sub-layers and the sum in their own
/// arithmetic; the order in which they are applied lives here only.
///
/// An arithmetic `Ar` has
///   using Value = ...;                          the layer's state (n × d)
///   Value attention(const Value& X);            Attn(X) of this layer
///   Value mlp(const Value& Z);                  f(Z)
///   Value norm(const Value& X, NormAt at);      the norm at `at` (its gain, and bias if any)
///   void add(Value& Y, const Value& X);         Y ← Y + X, rounded as the arithmetic rounds
/// and is built per layer over that layer's weights. The arithmetics whose
/// state is one matrix (the direct pass, the ball, the emulated formats)
/// share attention() and mlp() below too; the centred pair and the centred
/// ball split each sub-layer at the centre (math.md §7.1) in their own.
#include "sanpath/compute/forward.hpp"  // t5_bucket
#include "sanpath/model/model.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sanpath::detail {

/// Where a layer applies a norm: `ln1` before attention (pre) or after its
/// residual sum (post), `ln2` likewise around the MLP; `ln3`, `ln4` the
/// sandwich norms (gain only) on the attention's and the MLP's outputs;
/// `query`, `key` the query/key norms (families.md, Qwen3 and Gemma 3) on
/// every head's projected query and key rows.
enum class NormAt { ln1, ln2, ln3, ln4, query, key };

/// How a norm computes (math.md §2, §8; families.md): LayerNorm
/// (x − mean x)/sqrt(var x + eps) ∘ g + b, or RMSNorm x/sqrt(mean x² + eps) ∘ γ + b
/// with γ = g, or 1 + g where `unit_offset`.
struct NormForm {
  NormKind kind = NormKind::layer;
  double eps = 0.0;
  bool unit_offset = false;
};

/// The form of the norm at `at`: the model's norm, or the query/key norm's
/// RMSNorm with its own eps and gain form.
inline NormForm norm_form(const Architecture& a, NormAt at) {
  if (at == NormAt::query || at == NormAt::key) {
    const Architecture::QueryKeyNorm& qk = a.query_key_norm.value();
    return {NormKind::rms, qk.eps, qk.unit_offset};
  }
  return {a.norm, a.ln_eps, a.norm_unit_offset};
}

/// The gain of the norm at `at`, and its bias (null for the sandwich and
/// query/key norms, which have none).
inline std::pair<const VectorXd*, const VectorXd*> norm_parameters(const LayerWeights& lw, NormAt at) {
  switch (at) {
    case NormAt::ln1:
      return {&lw.ln1_g, &lw.ln1_b};
    case NormAt::ln2:
      return {&lw.ln2_g, &lw.ln2_b};
    case NormAt::ln3:
      return {&lw.ln3_g, nullptr};
    case NormAt::ln4:
      return {&lw.ln4_g, nullptr};
    case NormAt::query:
      return {&lw.q_norm, nullptr};
    case NormAt::key:
      return {&lw.k_norm, nullptr};
  }
  return {nullptr, nullptr};
}

/// The rotary tables a pass needs: one per distinct (base, linear factor)
/// of the layers (Architecture::layer_rotary; one for rope_theta otherwise),
/// and each layer's.
struct RotaryPlan {
  std::vector<Architecture::LayerRotary> tables;
  std::vector<std::size_t> of_layer;
};

inline RotaryPlan rotary_plan(const Architecture& a) {
  RotaryPlan plan;
  if (!a.rotary()) return plan;
  for (int l = 0; l < a.layers; ++l) {
    const Architecture::LayerRotary r{a.rope_base(l), a.rope_linear_factor(l)};
    std::size_t k = 0;
    while (k < plan.tables.size() &&
           !(plan.tables[k].theta == r.theta && plan.tables[k].linear_factor == r.linear_factor))
      ++k;
    if (k == plan.tables.size()) plan.tables.push_back(r);
    plan.of_layer.push_back(k);
  }
  if (plan.tables.empty()) plan.tables.push_back({*a.rope_theta, 1.0});  // a model of no layers
  return plan;
}

/// One layer X → X' of `variant` in the arithmetic `ar` (math.md §2;
/// families.md: parallel blocks, sandwich norms):
///   sequential  Z = [skip]X + N₃ Attn(N₁ X) (pre) or N₁([skip]X + Attn X) (post),
///               X' = [residual]Z + N₄ f(N₂ Z) (pre) or N₂([residual]Z + f Z) (post);
///   parallel    X' = N₃ Attn(N₁ X) + f(N₂ X) + [skip]X, summed in this order.
/// N₃ and N₄ only with sandwich norms and pre. Parallel blocks with a plain
/// MLP or post norms are refused by Model::check_supports before a pass.
template <class Ar>
typename Ar::Value layer_map(Ar& ar, const Architecture& a, const Variant& variant, const typename Ar::Value& X) {
  using Value = typename Ar::Value;
  const bool pre = variant.layernorm == LayerNormKind::pre, post = variant.layernorm == LayerNormKind::post;
  const bool sandwich = a.sandwich_norms && pre;
  Value Z = ar.attention(pre ? ar.norm(X, NormAt::ln1) : X);
  if (sandwich) Z = ar.norm(Z, NormAt::ln3);
  if (a.parallel_residual) {
    if (variant.mlp != MlpKind::none) ar.add(Z, ar.mlp(pre ? ar.norm(X, NormAt::ln2) : X));
    if (variant.skip) ar.add(Z, X);
    return Z;
  }
  if (variant.skip) ar.add(Z, X);
  if (post) Z = ar.norm(Z, NormAt::ln1);
  if (variant.mlp == MlpKind::none) return Z;
  Value Xn = ar.mlp(pre ? ar.norm(Z, NormAt::ln2) : Z);
  if (sandwich) Xn = ar.norm(Xn, NormAt::ln4);
  if (variant.mlp == MlpKind::residual) ar.add(Xn, Z);
  if (post) Xn = ar.norm(Xn, NormAt::ln2);
  return Xn;
}

/// The keys row i of an n×m attention sees: [first, last) under `mask` and
/// a sliding `window` (0: none; key j is visible iff i − j < W and j ≤ i).
inline std::pair<Eigen::Index, Eigen::Index> visible_keys(Eigen::Index i, Eigen::Index m, MaskKind mask,
                                                          Eigen::Index window) {
  if (mask != MaskKind::causal) return {0, m};
  return {window > 0 ? std::max<Eigen::Index>(0, i - window + 1) : 0, std::min(i + 1, m)};
}

/// XLNet's relative term (families.md): the column of the n × (2n − 1)
/// product (q_i + r_r)·(R W_R)ᵀ that holds the offset i − j of logit (i, j)
/// (column k ↔ p = k − (n − 1)).
inline Eigen::Index relative_column(Eigen::Index i, Eigen::Index j, Eigen::Index n) { return i - j + n - 1; }

/// T5's bucket bias of logit (i, j) of head h (families.md): T[bucket(j − i), h].
template <class Table>
auto bucket_bias(const Architecture& a, const Table& table, Eigen::Index i, Eigen::Index j, Eigen::Index h) {
  return table(t5_bucket(static_cast<long>(j - i), a.rel_buckets, a.rel_max_distance), h);
}

/// Whether the logits are math.md §1's bilinear ones (no rotary, relative
/// terms, bucket bias, soft cap or query/key norm): the centred passes' Π is
/// then the softmax of one vector v, masked row by row (math.md §7).
inline bool bilinear_logits(const Architecture& a) {
  return !a.position_dependent_logits() && !a.softcap && !a.query_key_norm;
}

/// Every pass's first check: an input of d_model columns and at least one
/// row, a variant the model takes, and no more tokens than a sliding
/// window that no layer applies (Mistral, Qwen2: math.md §8).
inline void check_input(const Model& model, const Variant& variant, Eigen::Index rows, Eigen::Index cols) {
  const Architecture& a = model.arch();
  if (cols != a.d_model)
    throw std::invalid_argument(model.source() + ": input: has " + std::to_string(cols) +
                                " features (columns), the model expects d_model = " + std::to_string(a.d_model));
  if (rows < 1) throw std::invalid_argument(model.source() + ": input: has no tokens (rows)");
  model.check_supports(variant);
  if (a.attention_window > 0 && a.window_layers.empty() && rows > a.attention_window)
    throw std::invalid_argument(model.source() + ": sliding_window: " + std::to_string(rows) +
                                " tokens exceed the window of " + std::to_string(a.attention_window) +
                                "; sliding-window attention is not supported (math.md §8)");
}

/// The matrices of a layer's attention and MLP (math.md §1, §2; families.md):
/// the heads' projections side by side, W_O, XLNet's W_R, the MLP's three.
enum class Projection { Q, K, V, O, R, W1, gate, W2 };

/// Projection p's entry of a pass's table, listed in Projection's order.
template <class T> const T& of(Projection p, const std::array<T, 8>& table) {
  return table[static_cast<std::size_t>(p)];
}

/// XLNet's query offsets r_w (content) and r_r (position), every head side by side.
enum class QueryOffset { content, position };

/// The norm at `at` on each head's block of d_qk columns of M (the query/key norms).
template <class Ar>
typename Ar::Value per_head_norm(Ar& ar, const Architecture& a, const typename Ar::Value& M, NormAt at) {
  std::vector<typename Ar::Value> blocks(static_cast<std::size_t>(a.heads));
  for (Eigen::Index h = 0; h < a.heads; ++h)
    blocks[static_cast<std::size_t>(h)] = ar.norm(ar.columns(M, h * a.d_qk, a.d_qk), at);
  return ar.side_by_side(blocks, a.d_qk);
}

/// Attn(X) = Σ_h P_h V_h W_O^h + 1 b_Oᵀ (math.md §1) with the position
/// features of math.md §8 and families.md, for the arithmetics whose state
/// is one matrix. `ar` supplies, besides layer_map's members:
///   Value project(const Value& X, Projection p)     X W_p + 1 b_pᵀ (no bias where p has none)
///   void rotate(Value& M)                            the layer's rotary angles on every head's rotated columns
///   Value offset(const Value& Q, QueryOffset o)      Q + 1 r_oᵀ (XLNet)
///   Value relative_keys()                            XLNet's sinusoid times W_R, (2n − 1) rows
///   Value columns(const Value& M, Index first, Index count)
///   Value times_nt(const Value& A, const Value& B)   A Bᵀ (the logits' products)
///   Value weights(Value A, const Value* B, Index h)  P_h from the products A and XLNet's B:
///       the relative term, the bucket bias, the score scale, the soft cap
///       and the row softmax under the layer's mask and window
///   Value times(const Value& P, const Value& V)
///   Value side_by_side(std::vector<Value>& blocks, Index width)   blocks of `width` columns side by side
///   bool recording(); void record(std::vector<Value>& P)   keeps the heads' P where asked
///   for_heads(H, f)                                  f(h) for every head, in parallel where it pays
template <class Ar> typename Ar::Value attention(Ar& ar, const Architecture& a, const typename Ar::Value& X) {
  using Value = typename Ar::Value;
  const Eigen::Index H = a.heads, dq = a.d_qk, dv = a.d_v;
  Value Q = ar.project(X, Projection::Q), K = ar.project(X, Projection::K), V = ar.project(X, Projection::V);
  if (a.query_key_norm) {  // every head's rows, after the bias and before the rotation (families.md)
    Q = per_head_norm(ar, a, Q, NormAt::query);
    K = per_head_norm(ar, a, K, NormAt::key);
  }
  if (a.rotary()) {
    ar.rotate(Q);
    ar.rotate(K);
  }
  // XLNet: content queries q + r_w against the keys, position queries q + r_r
  // against the sinusoid projected by W_R.
  Value Qr, RK;
  if (a.xlnet_relative) {
    Qr = ar.offset(Q, QueryOffset::position);
    Q = ar.offset(Q, QueryOffset::content);
    RK = ar.relative_keys();
  }
  std::vector<Value> out(static_cast<std::size_t>(H)), P(ar.recording() ? static_cast<std::size_t>(H) : 0);
  ar.for_heads(H, [&](Eigen::Index h) {
    Value B;
    if (a.xlnet_relative) B = ar.times_nt(ar.columns(Qr, h * dq, dq), ar.columns(RK, h * dq, dq));
    Value Ph = ar.weights(ar.times_nt(ar.columns(Q, h * dq, dq), ar.columns(K, h * dq, dq)),
                          a.xlnet_relative ? &B : nullptr, h);
    out[static_cast<std::size_t>(h)] = ar.times(Ph, ar.columns(V, h * dv, dv));
    if (!P.empty()) P[static_cast<std::size_t>(h)] = std::move(Ph);
  });
  if (!P.empty()) ar.record(P);
  return ar.project(ar.side_by_side(out, dv), Projection::O);
}

/// f(Z) = act(Z W_1 + b_1) W_2 + b_2, or with a gate (Llama, Gemma…)
/// (act(Z W_gate) ∘ (Z W_1 + b_1)) W_2 + b_2 (math.md §2, §8), for the
/// arithmetics whose state is one matrix; `ar` supplies project() and
///   void activate(Value& Hid)                    act on every entry
///   void gate(Value& Hid, const Value& G)        Hid ← act(G) ∘ Hid
template <class Ar> typename Ar::Value mlp(Ar& ar, bool gated, const typename Ar::Value& Z) {
  using Value = typename Ar::Value;
  Value Hid = ar.project(Z, Projection::W1);
  if (gated)
    ar.gate(Hid, ar.project(Z, Projection::gate));
  else
    ar.activate(Hid);
  return ar.project(Hid, Projection::W2);
}

}  // namespace sanpath::detail

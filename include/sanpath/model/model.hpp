#pragma once
/// \file model.hpp
/// Architecture configuration and weights of a SAN / transformer
/// (math.md §1–2), held in double (every checkpoint dtype — F64, F32, F16,
/// BF16 — is exact in double, and double is exact in every MPFR tier).
/// A Model is validated on construction: shapes, finiteness, consistency.

#include "sanpath/model/mapped_layer.hpp"

#include <Eigen/Core>
#include <memory>

#include <optional>
#include <string>
#include <vector>

namespace sanpath {

using MatrixXd = Eigen::MatrixXd;
using VectorXd = Eigen::VectorXd;

enum class MlpKind { none, plain, residual };
enum class LayerNormKind { none, pre, post };
enum class MaskKind { none, causal };
/// gelu_fast: HF's ½x(1 + tanh(0.7978845608·x(1 + 0.044715x²))), the literal
/// constant (families.md), a few ulp from gelu_tanh's √(2/π).
enum class Activation { relu, gelu, gelu_tanh, silu, gelu_fast };
/// LayerNorm (BERT, GPT-2) or RMSNorm (Llama family, math.md §8).
enum class NormKind { layer, rms };

/// What a layer does with Attn (math.md §2).
struct Variant {
  bool skip = false;
  MlpKind mlp = MlpKind::none;
  LayerNormKind layernorm = LayerNormKind::none;
  MaskKind mask = MaskKind::none;

  /// The paper's SAN: skip off, mlp none, layernorm none (mask kept).
  static Variant san(MaskKind mask = MaskKind::none) { return {false, MlpKind::none, LayerNormKind::none, mask}; }
  /// Attention-only: mlp none and layernorm none (skip either way); the
  /// path decomposition of math.md §4 is exact only for these.
  bool attention_only() const { return mlp == MlpKind::none && layernorm == LayerNormKind::none; }
  friend bool operator==(const Variant& a, const Variant& b) {
    return a.skip == b.skip && a.mlp == b.mlp && a.layernorm == b.layernorm && a.mask == b.mask;
  }
};

/// Optional per-run overrides of a checkpoint's own variant.
struct VariantOverride {
  std::optional<bool> skip;
  std::optional<MlpKind> mlp;
  std::optional<LayerNormKind> layernorm;
  std::optional<MaskKind> mask;
  Variant apply(Variant v) const;
};

/// How a variant reads in words: `pairs` "skip=off mlp=none layernorm=none mask=none"
/// (headers of text reports), `prose` "skip off, mlp none, layernorm none, mask none"
/// (sentences and error messages). JSON has its own form (report/).
enum class VariantStyle { pairs, prose };
std::string to_string(const Variant& v, VariantStyle style = VariantStyle::pairs);
std::string to_string(MlpKind);
std::string to_string(LayerNormKind);
std::string to_string(MaskKind);
std::string to_string(Activation);
std::string to_string(NormKind);
/// The structure of the families of families.md in words, for model lines
/// and reports ("partial rotary (16 of 64 dims), parallel block, GeGLU with
/// gelu_tanh"); empty for the math.md §1–§8 architectures.
std::string structure_notes(const struct Architecture& a);
/// Parsers for the CLI spellings ("none|plain|residual", "none|pre|post",
/// "none|causal", "relu|gelu|gelu_tanh|silu" — "gelu_new" is accepted as
/// gelu_tanh, "on|off" for skip). Throw std::invalid_argument naming `what`.
MlpKind parse_mlp(const std::string& text, const std::string& what = "mlp");
LayerNormKind parse_layernorm(const std::string& text, const std::string& what = "layernorm");
MaskKind parse_mask(const std::string& text, const std::string& what = "mask");
Activation parse_activation(const std::string& text, const std::string& what = "activation");
bool parse_on_off(const std::string& text, const std::string& what);

/// Sizes and structure. `d_model` = d, `d_qk`, `d_v` per head, `d_ff` the
/// MLP width (0 when the model has no MLP weights).
///
/// Llama family (math.md §8): `norm` rms, `rope_theta` set (rotary position
/// embeddings on queries and keys, rotate-half layout, d_qk even),
/// `kv_heads` = H_kv < H for grouped-query attention (query head h reads
/// key/value head ⌊h·H_kv/H⌋), `gated_mlp` (every layer with MLP weights
/// has LayerWeights::W_gate).
///
/// Grouped-query attention is held by giving every query head its own copy
/// of its group's W_K, b_K, W_V, b_V (validated to be identical within a
/// group). Every head-indexed computation — the forward pass, W_h = W_V^h
/// W_O^h of the path decomposition, β_{l,h} — then reads the weights of
/// head h alone, unchanged. The cost is 2·d·d_h·(H − H_kv) extra doubles
/// per layer; for a Llama-2-70B-shaped layer (d = 8192, H = 64, H_kv = 8,
/// d_h = 128, d_ff = 28672) that is 117M next to the layer's own 855M
/// (+14%), and nothing for H_kv = H.
struct Architecture {
  int layers = 0;
  int heads = 0;
  int d_model = 0;
  int d_qk = 0;
  int d_v = 0;
  int d_ff = 0;
  Variant variant;  ///< the checkpoint's own structure
  Activation activation = Activation::gelu;
  double ln_eps = 1e-12;
  /// ALBERT-style: one set of layer weights reused by all layers.
  bool shared_layers = false;
  NormKind norm = NormKind::layer;  ///< ln_eps is rms_norm_eps for rms
  /// H_kv (divides H); 0 means H (no grouping).
  int kv_heads = 0;
  /// Rotary base θ (> 0) when queries and keys are rotated; nullopt: none.
  std::optional<double> rope_theta = std::nullopt;
  bool gated_mlp = false;
  /// Sliding-window size (Mistral, Qwen2): 0 = none. Sequences longer than
  /// the window are refused (math.md §8 defines no window).
  int attention_window = 0;
  /// Partial rotary (GPT-NeoX, Phi; families.md): the first r = rotary_dims
  /// entries of each query/key head are rotated, θ_i = ϑ^(−2i/r); 0 means
  /// the whole head (r = d_qk).
  int rotary_dims = 0;
  /// Parallel block (GPT-NeoX use_parallel_residual, Phi):
  /// X' = [skip]X + Attn(LN_1 X) + [mlp] f(LN_2 X) (Phi: ln2 = ln1).
  bool parallel_residual = false;
  /// Gemma's RMSNorm: the gain is (1 + w), w the stored ln*_g.
  bool norm_unit_offset = false;
  /// Score scale s = score_scale_base^(−1/2) (Gemma 2 query_pre_attn_scalar;
  /// T5: 1, no scaling); nullopt: d_qk^(−1/2) (math.md §1).
  std::optional<double> score_scale_base = std::nullopt;
  /// Gemma 2 logit soft-cap c: S = c·tanh(S/c), after the scale, before the mask.
  std::optional<double> softcap = std::nullopt;
  /// Gemma 2's four norms: ln3 on the attention output, ln4 on the MLP
  /// output (ln1 before attention, ln2 before the MLP).
  bool sandwich_norms = false;
  /// Gemma 2: window_layers[l] says layer l applies attention_window (keys
  /// with i − j < W, with the causal mask). Empty: the window is not applied
  /// and longer sequences are refused (Mistral, Qwen2: math.md §8).
  std::vector<bool> window_layers{};
  /// T5 relative position bias (families.md): buckets nb and max distance md
  /// (0: none); the table is LayerWeights::pos_bias.
  int rel_buckets = 0, rel_max_distance = 0;
  /// XLNet relative attention (families.md): HeadWeights::W_R, r_w, r_r and
  /// the sinusoid R(i − j); clamp_len > 0 clamps i − j.
  bool xlnet_relative = false;
  int clamp_len = 0;
  /// The layernorm option takes none or the model's own placement only
  /// (families.md: GPT-NeoX, Phi, OPT, Gemma, T5, XLNet).
  bool own_norm_placement_only = false;
  /// Query/key norm (families.md, "query/key norms" §1): every head's
  /// projected query row and key row u (d_qk entries, after the bias, before
  /// the rotary) becomes N(u; γ) = u / sqrt(mean_k(u_k²) + eps) ∘ γ, with γ
  /// the layer's LayerWeights::q_norm (queries) or k_norm (keys), or 1 + that
  /// when `unit_offset`. Values are not normalised. It is part of Attn and
  /// stays in every variant.
  struct QueryKeyNorm {
    double eps = 1e-6;         ///< inside the square root
    bool unit_offset = false;  ///< γ = 1 + w (else γ = w, the stored weight)
  };
  std::optional<QueryKeyNorm> query_key_norm = std::nullopt;
  /// Rotary base and linear position scale of one layer: the pair
  /// (i, i + r/2) at position p turns by p·theta^(−2i/r) / linear_factor.
  struct LayerRotary {
    double theta = 10000.0;      ///< the base θ_l (> 0)
    double linear_factor = 1.0;  ///< f_l (> 0): positions divided by f_l
  };
  /// Rotary per layer (entry l for layer l; needs rope_theta set): empty
  /// means every layer rotates with rope_theta and factor 1.
  std::vector<LayerRotary> layer_rotary{};
  int key_value_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  int rotated_dims() const { return rotary_dims > 0 ? rotary_dims : d_qk; }
  /// Whether layer l applies the sliding window.
  bool window_applies(int l) const {
    return attention_window > 0 && l >= 0 && static_cast<std::size_t>(l) < window_layers.size() &&
           window_layers[static_cast<std::size_t>(l)];
  }
  /// Attention beyond math.md §1's bilinear logits (rotary, position bias,
  /// soft-cap): the centred pass and the cubic bounds do not cover it.
  bool position_dependent_logits() const { return rotary() || rel_buckets > 0 || xlnet_relative; }
  /// Key/value head of query head h: ⌊h·H_kv/H⌋.
  int kv_head_of(int h) const { return static_cast<int>(static_cast<long long>(h) * key_value_heads() / heads); }
  bool rotary() const { return rope_theta.has_value(); }
  /// Layer l's rotary base θ_l and linear factor f_l (rotary models only).
  double rope_base(int l) const {
    return layer_rotary.empty() ? rope_theta.value() : layer_rotary.at(static_cast<std::size_t>(l)).theta;
  }
  double rope_linear_factor(int l) const {
    return layer_rotary.empty() ? 1.0 : layer_rotary.at(static_cast<std::size_t>(l)).linear_factor;
  }
};

/// One head. Shapes: W_Q, W_K d×d_qk; W_V d×d_v; W_O d_v×d; biases as vectors.
/// XLNet (Architecture::xlnet_relative): W_R (d×d_qk) projects the
/// position sinusoid; r_w, r_r (d_qk) are the content and position biases.
struct HeadWeights {
  MatrixXd W_Q, W_K, W_V, W_O;
  VectorXd b_Q, b_K, b_V;
  MatrixXd W_R;
  VectorXd r_w, r_r;
};

/// One layer: heads, output bias b_O (d), MLP W_1 (d×d_ff), b_1 (d_ff),
/// W_2 (d_ff×d), b_2 (d), LayerNorm gains/biases ln1_*, ln2_* (d). MLP and
/// LayerNorm weights may be empty when the model has none (then variants
/// that need them are rejected by the forward pass).
/// Gated MLP (SwiGLU, math.md §8) when W_gate (d×d_ff) is present:
/// f(Z) = (act(Z W_gate) ∘ (Z W_1 + b_1)) W_2 + b_2, W_1 the "up" and W_2
/// the "down" projection. RMSNorm layers use ln*_g; their ln*_b are added
/// after the scaling like LayerNorm's (zero for checkpoints of the family).
struct LayerWeights {
  std::vector<HeadWeights> heads;
  VectorXd b_O;
  MatrixXd W_1, W_2, W_gate;
  VectorXd b_1, b_2;
  VectorXd ln1_g, ln1_b, ln2_g, ln2_b;
  /// Gemma 2 (Architecture::sandwich_norms): post-attention and
  /// post-feedforward norm gains (d).
  VectorXd ln3_g, ln4_g;
  /// T5 (Architecture::rel_buckets > 0): the bucket table, nb × H (block
  /// 0's, the same in every layer).
  MatrixXd pos_bias;
  /// Architecture::query_key_norm: the stored query and key norm weights w
  /// (d_qk each), shared by the layer's heads; the gain is w or 1 + w.
  VectorXd q_norm, k_norm;
  /// A layer read in LayerForm::mapped: the matrices `mapped` holds as
  /// views (MappedMatrix::present) are left empty here — every head's W_Q,
  /// W_K, W_V, W_O, W_R and W_1, W_2, W_gate, as it gives them. Null for a
  /// decoded layer.
  std::shared_ptr<const MappedLayer> mapped;
  bool has_mlp() const { return W_1.size() > 0 || (mapped && mapped->W1.present()); }
  bool has_layernorm() const { return ln1_g.size() > 0; }
  bool gated() const { return W_gate.size() > 0 || (mapped && mapped->Wgate.present()); }
};

/// The checkpoint layout families (io/ reads and writes them); embeddings
/// carry the family whose recipe builds X^0.
enum class Layout {
  bert, gpt2, albert, roberta, distilbert, llama, mistral, qwen2,
  xlnet, t5, gpt_neox, phi, opt, gemma, gemma2, vit, qwen3, gemma3
};
std::string to_string(Layout);
/// Every layout's name, "bert|gpt2|…|vit"; throws std::invalid_argument.
Layout parse_layout(const std::string& text);
/// The layouts' names joined by '|', in enum order.
std::string layout_names();
/// llama, mistral, qwen2: the family of math.md §8 (rotary positions, no
/// position table, token rows alone as embeddings).
bool rotary_family(Layout l);
/// Embeddings that are the token rows alone (Gemma's scaled by √d): the
/// Llama family, XLNet, T5, GPT-NeoX, Phi, Gemma, Gemma 2, Qwen3, Gemma 3.
bool token_rows_only(Layout l);

/// How a model builds X^0 (n × d) from token ids t_0 … t_{n−1}: the steps
/// below, each taken when its field is set, in this order (R is n × w, w =
/// word.cols(), every operation in the working precision S):
///
///   R_i ← word[t_i]
///   project_in:          R ← R · mapping            (mapping w × d, when non-empty; w becomes d)
///   positions:           R_i ← R_i + position[i]     (needs n ≤ position.rows())
///   token_type:          R_i ← R_i + token_type[0]   (when token_type has rows)
///   scale_by_root_width: R ← √w · R                  (√w rounded in S)
///   layer_norm:          R_i ← LN(R_i; ln_g, ln_b, ln_eps)
///   map_after_norm:      R ← R · mapping + mapping_b (mapping w × d)
///
/// `patches`: the model takes images, not token ids: X^0 = [cls; patch rows]
/// + position (ViT, embed_pixels). io/ states the recipe of each family
/// (embedding_recipe); compute/ reads only these features.
struct EmbeddingRecipe {
  bool project_in = false;           ///< OPT's project_in before the positions
  bool positions = true;             ///< a position table, row i added to token i
  bool token_type = true;            ///< token type 0's row added (BERT, RoBERTa, ALBERT)
  bool scale_by_root_width = false;  ///< Gemma's √d · E
  bool layer_norm = true;            ///< LayerNorm after the sum
  bool map_after_norm = false;       ///< ALBERT's embedding_hidden_mapping_in
  bool patches = false;              ///< images cut into patches (ViT)
  bool operator==(const EmbeddingRecipe& o) const {
    return project_in == o.project_in && positions == o.positions && token_type == o.token_type &&
           scale_by_root_width == o.scale_by_root_width && layer_norm == o.layer_norm &&
           map_after_norm == o.map_after_norm && patches == o.patches;
  }
  bool operator!=(const EmbeddingRecipe& o) const { return !(*this == o); }
};
/// The recipe of a layout family's embeddings (the one map from family to
/// recipe: loaders, the native format and random models all use it):
/// BERT, RoBERTa: positions, token type, LayerNorm; DistilBERT: positions,
/// LayerNorm; ALBERT: BERT's then map_after_norm; GPT-2: positions; OPT:
/// project_in, positions; Gemma, Gemma 2, Gemma 3: scale_by_root_width; ViT: patches,
/// positions; the other token_rows_only families: nothing (the rows alone).
EmbeddingRecipe embedding_recipe(Layout l);

/// Token embeddings of a checkpoint, for building X^0 from token ids:
/// token i uses position row i. word: vocab×e, position: max_pos×e,
/// token_type: types×e (BERT, ALBERT, RoBERTa; empty for GPT-2 and
/// DistilBERT), ln_g/ln_b: e (all but GPT-2), mapping: e×d and mapping_b: d
/// (ALBERT's embedding_hidden_mapping_in, stored as x·mapping + mapping_b).
/// RoBERTa's table starts at its row padding_idx + 1 (math.md §1).
/// Llama, Mistral, Qwen2: word only (positions enter through the rotary
/// embedding; the position table is empty and sequences have no length
/// limit).
///
/// The word table is held whole (`word_ids` nullopt: word is vocab × e) or,
/// when a loader was asked for some rows only, as the rows of the sorted,
/// distinct ids `*word_ids` (word is |ids| × e, row k is token (*word_ids)[k])
/// of a table of `vocab` rows. word_row(id) is the one way to a token's row.
///
/// OPT: word is vocab×e, position row i is token i's (the stored table's
/// row i + 2), `mapping` (e×d) is project_in when e ≠ d, applied before the
/// positions are added; no LayerNorm, no token types. Gemma, Gemma 2:
/// √d·word, √d in the working precision.
///
/// ViT (families.md): no word table; `patch` (d × C·p·p, column index
/// c·p² + i·p + j) and `patch_b` (d) are the patch projection, `cls` (d) the
/// CLS row and `position` ((N+1)×d) the position rows, for images of
/// `channels` × `image_size`² pixels cut into patches of `patch_size`².
struct Embeddings {
  /// The family the tables come from (io/: saving, naming). Below io/ only
  /// the recipe says how X^0 is built.
  Layout kind = Layout::bert;
  /// How X^0 is built from the tables. Unset: the family's,
  /// embedding_recipe(kind), which Model's construction fills in, so a
  /// Model's embeddings always state theirs.
  std::optional<EmbeddingRecipe> recipe;
  /// The stated recipe; throws std::logic_error while it is unset (an
  /// Embeddings not yet in a Model).
  const EmbeddingRecipe& steps() const;
  /// Whether the recipe is the family's, embedding_recipe(kind): the one
  /// the file formats, which name the family, can save.
  bool family_recipe() const { return steps() == embedding_recipe(kind); }
  MatrixXd word, position, token_type;
  VectorXd ln_g, ln_b;
  double ln_eps = 1e-12;
  MatrixXd mapping;
  VectorXd mapping_b;
  MatrixXd patch;
  VectorXd patch_b, cls;
  int image_size = 0, patch_size = 0, channels = 0;
  /// ViT: patches per side ⌊S/p⌋.
  int patch_grid() const { return patch_size > 0 ? image_size / patch_size : 0; }
  bool pixels() const { return steps().patches; }
  std::optional<std::vector<long>> word_ids;
  int vocab = 0;  ///< rows of the whole table when word_ids is set
  /// A token id that stands for something other than its row (a multimodal
  /// file's image token, families.md): word_row refuses it.
  std::optional<long> placeholder_id;
  /// RoBERTa's padding token (pad_token_id): HuggingFace gives it the padding
  /// position and does not count it, so the tokens after it take other
  /// position rows than `position_offset + i`; word_row refuses it.
  std::optional<long> padding_id;
  int vocab_size() const { return word_ids ? vocab : static_cast<int>(word.rows()); }
  bool holds_all_words() const { return !word_ids; }
  /// The row of `word` holding token `id`, 0 ≤ id < vocab_size(). Throws
  /// std::logic_error when that row was not loaded (never a zero row), and
  /// std::invalid_argument for the placeholder_id and the padding_id.
  Eigen::Index word_row(long id) const;
  int max_positions() const { return static_cast<int>(position.rows()); }
  bool has_position_table() const { return steps().positions; }
};

/// Whether a Model's construction tests every weight for finiteness, or a
/// loader already did as it decoded them (io: SafetensorsMap::decode_finite,
/// naming the file's tensor) and a second pass over the weights is skipped.
enum class FiniteWeights { check, checked_by_loader };

class LayerSource;  // layer_source.hpp

/// How a pass wants a streamed layer: every weight decoded into doubles, or
/// its large matrices as views of the mapped checkpoint where the source can
/// give them (LayerWeights::mapped; the double forward pass, whose products
/// read them in place). A resident model's layers are always decoded.
enum class LayerForm { decoded, mapped };

/// What every layer of a streamed model holds besides attention (a loader
/// knows it from the checkpoint's layout before reading any layer).
struct LayerParts {
  bool mlp = false, layernorm = false;
};

/// A validated model. Construction throws std::invalid_argument with a
/// one-line message naming `source` and the offending field.
///
/// A model is resident (every layer in memory) or streamed: its layers stay
/// in the checkpoint and are read one at a time by the forward passes
/// (layer_for_pass), for weights larger than memory. A streamed layer is
/// validated as it is read (shapes, grouped key/value copies; the source
/// tests finiteness). Analyses that need every layer at once (paths,
/// bounds, reruns, reports) call layer(), which refuses a streamed model
/// with an error naming its source.
class Model {
 public:
  Model(Architecture arch, std::vector<LayerWeights> layers, std::optional<Embeddings> embeddings = std::nullopt,
        std::string source = "model", FiniteWeights finite = FiniteWeights::check);
  /// A streamed model: `arch.layers` layers read from `layers` when needed.
  Model(Architecture arch, std::shared_ptr<const LayerSource> layers, LayerParts parts,
        std::optional<Embeddings> embeddings, std::string source);

  const Architecture& arch() const { return arch_; }
  /// Layer l of a resident model; throws std::invalid_argument for a streamed one.
  const LayerWeights& layer(int l) const;
  /// Layer l for one step of a forward pass: the stored layer, or for a
  /// streamed model the layer read now into a buffer that goes back to the
  /// model's pool when the pointer is dropped (a pass holds one layer at a
  /// time and reuses its memory). Thread-safe. On the thread of a pass that
  /// shares the model's layers with others (shared_layers.hpp), the copy
  /// those passes share.
  std::shared_ptr<const LayerWeights> layer_for_pass(int l, LayerForm form = LayerForm::decoded) const;
  bool streamed() const { return static_cast<bool>(stream_); }
  /// Every layer of a resident model (empty for a streamed one).
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const std::optional<Embeddings>& embeddings() const { return embeddings_; }
  const std::string& source() const { return source_; }
  /// The variant to run: the checkpoint's own, with overrides applied.
  /// Throws when the override needs weights the model lacks (MLP, LN).
  Variant resolve(const VariantOverride& o) const;
  /// Throws std::invalid_argument if `v` needs weights the model lacks, or
  /// if the model has a feature no pass computes yet (the query/key norm,
  /// rotary per layer): every pass calls it before it starts.
  void check_supports(const Variant& v) const;

 private:
  struct Stream;
  friend class SharedLayers;
  /// A streamed model's layer l, read now into a buffer of the pool.
  std::shared_ptr<const LayerWeights> read_for_pass(int l, LayerForm form) const;
  void validate(FiniteWeights finite) const;
  void validate_layer(int l, const LayerWeights& w, bool finite) const;
  /// check_supports' weight checks alone (construction runs these).
  void check_weights_for(const Variant& v) const;
  Architecture arch_;
  std::vector<LayerWeights> layers_;
  std::shared_ptr<Stream> stream_;  ///< set for a streamed model
  std::optional<Embeddings> embeddings_;
  std::string source_;
};

}  // namespace sanpath

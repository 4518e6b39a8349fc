#pragma once
// HuggingFace layout families as name tables. A family lists, for each
// stored layer and for the embeddings, the tensors of its checkpoints (the
// "slots": key, expected shape) and where each block of a tensor lives in the
// model (the "pieces"). One table serves loading (tensor -> model) and
// saving (model -> tensor); hf_layout.cpp walks it both ways.

#include "hf_config.hpp"

#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/families.hpp"
#include "sanpath/io/tensor_eigen.hpp"
#include "sanpath/io/tensor_store.hpp"
#include "sanpath/model/model.hpp"

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sanpath::io {

/// How a stored 2-D weight T relates to the x·W matrix M of math.md §1.
enum class Storage {
  linear,  ///< torch Linear: T is [out, in], M = Tᵀ
  conv1d,  ///< GPT-2 Conv1D and embedding tables: T is [in, out] (rows, cols), M = T
};

/// One block of a tensor and the matrix or vector it fills (rows/cols kAny:
/// to the end of the tensor, for tables whose size config.json may omit).
struct Piece {
  MatrixXd* matrix = nullptr;
  VectorXd* vector = nullptr;
  TensorBlock block;
};

/// One tensor: its key (without the family prefix), expected shape, an
/// older spelling accepted instead, and its pieces.
struct Slot {
  std::string key;
  Shape shape;
  std::vector<Piece> pieces;
  std::string alias;
};

/// Sizes a layer's slots depend on.
struct Dims {
  int heads = 0, d = 0, dh = 0, ff = 0;
};

/// Sizes of the embedding tables (kAny: whatever the file holds).
/// `position_offset`: stored position rows before the first used one.
struct EmbeddingSizes {
  std::int64_t vocab = kAny, positions = kAny, types = kAny;
  int width = 0;
  int position_offset = 0;
};

/// The builder the families describe their tensors with.
class Slots {
 public:
  std::deque<Slot> list;  ///< a deque: references to slots stay valid as slots are added

  /// A whole weight W (M = W) and bias b: T shaped [out, in] (linear) or [in, out] (conv1d).
  void dense(const std::string& key, Storage s, MatrixXd& W, VectorXd& b, std::int64_t in, std::int64_t out);
  /// A whole vector of length n.
  void vector(const std::string& key, VectorXd& v, std::int64_t n);
  /// LayerNorm gain and bias of width n (".weight"/".bias", or ".gamma"/".beta" with `aliases`).
  void layernorm(const std::string& key, VectorXd& g, VectorXd& b, std::int64_t n, bool aliases = true);
  /// A table (rows × cols, stored as is) from stored row `offset` on; rows kAny: any.
  void table(const std::string& key, MatrixXd& m, std::int64_t rows, std::int64_t cols, std::int64_t offset = 0);
  /// Per-head query, key or value weights and biases: head h owns columns
  /// [offset + h·dh, offset + (h+1)·dh) of M (d × m_cols) and of the bias.
  /// `which` is 'Q', 'K' or 'V'. Appends to `W` and `b` (the fused GPT-2
  /// c_attn holds all three).
  void heads_in(Slot& W, Slot& b, Storage s, LayerWeights& w, char which, std::int64_t offset, const Dims& k);
  /// Per-head output weights: head h owns rows [h·dh, (h+1)·dh) of M (d × d); the bias is b_O.
  void heads_out(const std::string& key, Storage s, LayerWeights& w, const Dims& k);
  /// Separate query, key and value torch Linear layers (BERT-style):
  /// `prefix` + names[i] + ".weight" (d × d) and ".bias" (d), per head.
  void heads_in_linear(const std::string& prefix, const char* const (&names)[3], LayerWeights& w, const Dims& k);
  /// Separate torch Linear projections `prefix` + "q_proj", "k_proj",
  /// "v_proj" of H query heads and a.key_value_heads() key/value heads of
  /// width d_h = a.d_qk (query head h reads its key/value group
  /// a.kv_head_of(h)'s rows; biases when `qkv_bias`, zero otherwise), and the
  /// output projection `prefix` + `out` [d, H·d_h] (its bias b_O when
  /// `out_bias`, zero otherwise): Llama, Gemma, Phi.
  void grouped_attention(const std::string& prefix, const Architecture& a, LayerWeights& w, bool qkv_bias,
                         const std::string& out, bool out_bias);
  /// The SwiGLU/GeGLU MLP of Llama and Gemma: torch Linear `prefix` +
  /// "gate_proj", "up_proj", "down_proj" into W_gate, W_1, W_2 (no biases:
  /// b_1, b_2 zero).
  void gated_mlp(const std::string& prefix, LayerWeights& w, std::int64_t d, std::int64_t ff);
  /// A new slot.
  Slot& add(const std::string& key, Shape shape, std::string alias = "");
};

/// The config.json keys of a family's shape: one table for reading
/// (read_shape) and writing (shape_config).
struct ShapeKeys {
  const char* layers;      ///< e.g. "num_hidden_layers"
  const char* heads;       ///< e.g. "num_attention_heads"
  const char* d_model;     ///< e.g. "hidden_size"
  const char* d_ff;        ///< e.g. "intermediate_size"
  const char* activation;  ///< e.g. "hidden_act"
};

/// The keys of BERT and ALBERT.
inline constexpr ShapeKeys bert_keys{"num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
                                     "hidden_act"};

/// a.layers, a.heads, a.d_qk = a.d_v = d_model / heads and a.d_model, in
/// that order (the first bad key is the one an error names).
void read_shape(const HfConfig& c, const ShapeKeys& k, Architecture& a);
/// {"architectures": [architecture], "model_type", and a's layers, heads,
/// d_model, d_ff and activation under the keys of `k`}.
json shape_config(const Architecture& a, const ShapeKeys& k, const std::string& architecture,
                  const std::string& model_type);

/// One layout family: its names, config.json keys and tensor table.
struct Family {
  Layout layout;
  std::string prefix;                    ///< "bert." (absent in some files: detected)
  std::vector<std::string> model_types;  ///< config.json model_type values
  std::string architecture;              ///< prefix of config.json architectures ("Bert")
  std::string tensor_mark;               ///< a fragment only this family's tensor names have
  std::string second_mark{};             ///< a fragment its names have too, where one does not tell (Gemma 3)
  bool shared_layers = false;            ///< one stored layer used by every layer
  int written_position_offset = 0;       ///< position rows written before the first used one
  std::string display{};                 ///< the family's name in prose ("GPT-2", "Gemma 2"; families.hpp)
  InputKind input = InputKind::tokens;   ///< what its models embed
  bool key_value_heads = false;          ///< grouped key/value heads (`init --kv-heads`)
  double fixed_ln_eps = 0;               ///< LayerNorm epsilon the format fixes (0: config.json has it)
  /// Architecture and embedding sizes from config.json.
  void (*read_config)(const HfConfig& c, Architecture& a, EmbeddingSizes& e) = nullptr;
  /// config.json for `m`; `e` the sizes of its embeddings (nullptr: none).
  json (*write_config)(const Model& m, const EmbeddingSizes* e) = nullptr;
  /// The slots of stored layer l.
  void (*layer)(const Dims& k, int l, LayerWeights& w, Slots& s) = nullptr;
  /// The slots of the embeddings; the first is the word table, whose
  /// presence means the checkpoint has embeddings.
  void (*embeddings)(const Dims& k, const EmbeddingSizes& e, Embeddings& emb, Slots& s) = nullptr;
  /// Sets the four functions above (the families described by their slots).
  Family& described_by(decltype(read_config) from_config, decltype(write_config) to_config,
                       decltype(layer) layer_slots, decltype(embeddings) embedding_slots) {
    read_config = from_config;
    write_config = to_config;
    layer = layer_slots;
    embeddings = embedding_slots;
    return *this;
  }
  /// A family read and written by its own walk instead of the slots above
  /// (the Llama family: key/value blocks shared by groups of query heads).
  Model (*load)(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& f,
                const std::string& source, const LoadOptions& options) = nullptr;
  void (*save)(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) = nullptr;
  /// The structure of the family's models for random checkpoints
  /// (family_structure in checkpoint.hpp); nullptr: none of its own.
  void (*structure)(RandomModelSpec& spec, const FamilyOptions& o) = nullptr;
  /// The FamilyOptions fields `structure` reads, by name ("rotary_fraction",
  /// …); family_structure refuses any other that is set.
  std::vector<std::string> options{};
};

/// The families, in detection order (layouts.cpp).
const std::vector<Family>& families();
const Family& family(Layout l);
/// The family of a checkpoint: config.json's model_type, then
/// architectures, then the tensor names; the error lists the known ones.
const Family& detect_family(const HfConfig& c, const TensorStore& f);

/// Exact equality of two layers' weights.
bool same_layer(const LayerWeights& a, const LayerWeights& b);

/// Writers store whole tables of a family's embeddings only: refuses
/// (naming `where` and embeddings.word) a model whose word table was loaded
/// in part, and (naming embeddings) one whose recipe is not its family's
/// (Embeddings::family_recipe; the files name the family, not the recipe).
void require_savable_embeddings(const Model& model, const std::string& where);

/// Models keep one copy of the weights per layer: refuses a shared-layer
/// model whose `layers` copies of `w` would exceed the memory budget
/// (ResourceError naming `where` and `key`).
void check_shared_copies(const std::string& where, const std::string& key, int layers, const LayerWeights& w);

/// The layers a load keeps of a checkpoint of `layers` layers
/// (LoadOptions::first_layers, or all) and the model's source, which names
/// the cut ("<source> (first N of L layers)"). N < 1 or N > layers fails
/// naming `config_path` and `key` (the config's layer count).
struct LayerPrefix {
  int layers = 0;
  std::string source;
};
LayerPrefix layer_prefix(const LoadOptions& options, int layers, const std::string& config_path,
                         const std::string& key, const std::string& source);

/// Reads the tensors of `s` from `f` (names `prefix` + key, or + alias)
/// into their pieces: every missing name in one message, then the shapes (in
/// name order), then the memory the decoded values need (ResourceError above
/// the budget, before any is decoded), then each tensor decoded straight
/// into its pieces, tested for finiteness in the same pass
/// (SafetensorsMap::decode_finite), its pages released. A slot without
/// pieces is checked, not decoded. Errors name the file, the tensor and
/// `config_path` (the shapes' origin). With `word_rows`, its slot (the
/// word table) is tested whole for NaN/Inf on its stored bits and only the
/// rows of its ids are decoded (Embeddings::word_ids).
struct WordRows {
  std::size_t slot = 0;               ///< index of the word table in s.list
  const std::vector<long>* ids = nullptr;  ///< LoadOptions::word_rows
  Embeddings* emb = nullptr;          ///< receives word, word_ids and vocab
};
void decode_slots(const Slots& s, const TensorStore& f, const std::string& prefix, const std::string& config_path,
                  const std::string& layout, const WordRows* word_rows = nullptr);

/// The slots of layer l, reading into `w` (a family's Family::layer, or the
/// Llama family's own walk).
using LayerSlots = std::function<void(int l, LayerWeights& w, Slots& s)>;

/// A streamed load's layers: checks the names and shapes of every layer's
/// tensors in `f` (nothing decoded), refuses (ResourceError) when the few
/// layers a run holds at once exceed the memory budget, and returns the
/// source a Model reads them from (decode_slots, one layer per read) with
/// what every layer holds.
struct StreamedLayers {
  std::shared_ptr<const LayerSource> source;
  LayerParts parts;
};
StreamedLayers stream_layers(int layers, LayerSlots slots_of, std::shared_ptr<const TensorStore> f,
                             const std::string& prefix, const std::string& config_path, const std::string& layout);

/// A load by a family's own walk (layout_llama.cpp, layout_gemma.cpp, …):
/// begin_walk lists the slots of every resident layer (none when the load
/// streams); the family then adds its embedding slots (add_word_table first)
/// and any tensor it only checks; finish_walk decodes them (the word table's
/// rows as LoadOptions::word_rows asks), streams the layers when asked, and
/// builds the model, its embeddings of kind fam.layout when the file has a
/// word table.
struct Walk {
  const Family& fam;
  const HfConfig& c;
  std::shared_ptr<const TensorStore> store;
  std::string prefix;
  const LoadOptions& options;
  LayerSlots slots_of;
  bool streamed = false;
  std::vector<LayerWeights> layers{};
  Slots slots{};
  Embeddings emb{};
  bool with_word = false;
  std::size_t word_slot = 0;
  /// Every streamed layer has LayerNorm weights even where the file stores
  /// none (OPT without elementwise affine: gain 1, bias 0).
  bool streamed_layernorm = false;
};
Walk begin_walk(const Family& fam, const HfConfig& c, std::shared_ptr<const TensorStore> store, std::string prefix,
                const LoadOptions& options, int layers, LayerSlots slots_of);
/// The word table `key` (vocab × width) when the file holds it (returns
/// whether it does).
bool add_word_table(Walk& w, const std::string& key, std::int64_t vocab, std::int64_t width);
Model finish_walk(Walk& w, const Architecture& a, const std::string& source);

/// Loads a checkpoint of family `fam`; the word table as `options` asks
/// (LoadOptions::word_rows), the layers resident or streamed
/// (LoadOptions::layers; automatic is resolved by the caller).
Model load_family(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& f,
                  const std::string& source, const LoadOptions& options);
/// Writes `model` as a checkpoint of family `fam` in `folder` (see save_hf).
void save_family(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype);
/// Writes `folder`/model.safetensors (`tensors`) and `folder`/config.json
/// (`config`), creating the folder; atomic per file.
void write_checkpoint(const std::string& folder, const std::vector<Tensor>& tensors, const json& config);

// ---- partial rotary embeddings (families.md, GPT-NeoX/Phi §1; layout_gpt_neox.cpp) ----

/// {r, ϑ}: r = int(d_h·φ) (the double product truncated toward zero) and the
/// base ϑ, from config.json's `fraction_key` and `base_key` (defaults
/// `fraction_default` and 10000), or from rope_parameters'
/// partial_rotary_factor and rope_theta where that object gives them.
/// Refuses, naming the key: rope_scaling not null, rope_parameters.rope_type
/// other than "default", φ outside [0, 1], ϑ not finite and > 0, an odd r.
std::pair<int, double> read_partial_rotary(const HfConfig& c, int dh, const std::string& fraction_key,
                                           double fraction_default, const std::string& base_key);
/// a's rotary fields for r rotated entries per head: r = 0 none (rope_theta
/// unset); r = d_qk as rotary_dims 0 (the whole head); any other r as itself.
void set_partial_rotary(Architecture& a, int r, double base);
/// The fraction written for r of d_h: r/d_h, nudged up by an ulp where
/// d_h·φ would round below r, so that reading gives back int(d_h·φ) = r.
double written_rotary_fraction(int r, int dh);
/// r = int(d_h·φ) for a random model's FamilyOptions::rotary_fraction φ;
/// std::invalid_argument("rotary_fraction: …") for φ outside [0, 1] or an odd r.
int random_rotary_dims(double phi, int dh);

/// `prefix` when a tensor name of `f` starts with it, else "" (a model saved
/// without its task wrapper: GemmaModel, ViTModel, GPTNeoXModel, …).
std::string prefix_in_use(const TensorStore& f, const std::string& prefix);


// ---- Llama-shaped layers (layout_llama.cpp, layout_gemma.cpp, layout_qwen3.cpp, layout_gemma3.cpp) ----

/// Whether every entry of `v` is zero.
inline bool is_zero(const VectorXd& v) { return (v.array() == 0).all(); }

/// The tensors of a Llama-shaped layer l, under "layers.{l}." after the
/// family prefix, and what the families' layers differ in:
/// self_attn.{q,k,v,o}_proj (Slots::grouped_attention, q/k/v biases where
/// `qkv_bias`, the o_proj bias where `out_bias`), self_attn.q_norm and
/// k_norm [d_h] where `query_key_norm` (→ LayerWeights::q_norm, k_norm),
/// mlp.{gate,up,down}_proj (Slots::gated_mlp) and the RMSNorm gains (ln1_b,
/// ln2_b zero): input_layernorm → ln1, then post_attention_layernorm → ln2
/// (before the MLP: Llama, Gemma, Qwen3), or with `sandwich_norms` (Gemma 2,
/// Gemma 3) post_attention_layernorm → ln3 (on the attention output),
/// pre_feedforward_layernorm → ln2, post_feedforward_layernorm → ln4. One
/// table for reading (a walk's LayerSlots) and writing (emit_layers).
struct LlamaShapedLayer {
  bool qkv_bias = false;
  bool out_bias = false;
  bool query_key_norm = false;
  bool sandwich_norms = false;

  /// The weight tensors of a layer (7 for the projections, and the norms' gains).
  int tensors() const { return 7 + (sandwich_norms ? 4 : 2) + (query_key_norm ? 2 : 0); }
  /// The layers a load keeps of `layers` (layer_prefix: config key num_hidden_layers), after refusing a
  /// file `f` with fewer tensors than layers.
  LayerPrefix kept_layers(const TensorStore& f, int layers, const std::string& config_path,
                          const LoadOptions& options, const std::string& source, const std::string& layout) const;
  /// The slots of layer l of a model shaped `a`, reading into (or writing from) `w`.
  void slots(const Architecture& a, int l, LayerWeights& w, Slots& s) const;
  /// The reader's LayerSlots (everything by value: a streamed model keeps it).
  LayerSlots layer_slots(const Architecture& a) const;
};

/// The Architecture a Llama-shaped family starts from: `layers` layers of
/// `heads` query heads over `kv_heads` key/value heads of width `head_dim`,
/// d_model `d`, d_ff `ff`, run as trained (skip on, a residual gated MLP,
/// pre-RMSNorm of eps `eps` with the stored gain w, the causal mask).
Architecture llama_shaped_architecture(int layers, int heads, int kv_heads, int d, int head_dim, int ff, double eps);

/// The config.json keys every Llama-shaped writer writes for `a`:
/// architectures [`architecture`], `model_type`, the sizes
/// (num_hidden_layers, num_attention_heads, num_key_value_heads,
/// hidden_size, head_dim, intermediate_size), rms_norm_eps, rope_theta,
/// rope_scaling null, tie_word_embeddings true and torch_dtype for `dtype`.
json llama_shaped_config(const Architecture& a, const std::string& architecture, const std::string& model_type,
                         const std::string& dtype);

/// A random Llama-shaped model's structure on `a` (the sizes, rope_theta and
/// ln_eps kept; rope_theta `theta` where unset): refuses
/// (std::invalid_argument naming `layout`) d_v ≠ d_qk and an odd d_qk, and
/// sets the layer as trained (skip on, a residual gated MLP, pre-RMSNorm
/// with the stored gain w, the causal mask), rotary on the whole head with
/// one base, sequential halves of two norms, no query/key norm, score scale,
/// soft-cap or window; the family sets what differs after.
void llama_shaped_structure(Architecture& a, const std::string& layout, double theta);

/// The features of an Architecture a layout may or may not write
/// (Needs::only): a writer names those it writes and refuses the others.
namespace written {
enum : unsigned {
  rotary = 1u << 0,       ///< rope_theta
  parallel = 1u << 1,     ///< parallel_residual
  sandwich = 1u << 2,     ///< sandwich_norms
  score_scale = 1u << 3,  ///< score_scale_base (a writer that takes one checks its value itself)
  softcap = 1u << 4,
  window = 1u << 5,       ///< attention_window
  buckets = 1u << 6,      ///< rel_buckets (T5)
  xlnet = 1u << 7,        ///< xlnet_relative
  gated = 1u << 8,        ///< gated_mlp
  shared = 1u << 9,       ///< shared_layers
  grouped = 1u << 10,     ///< key/value heads fewer than the query heads
};
}  // namespace written

/// A writer's checks: need(ok, field, what) fails, naming `folder` and
/// `field`, with "the <layout> layout needs <what>".
struct Needs {
  std::string folder, layout;
  void operator()(bool ok, const std::string& field, const std::string& what) const;
  /// Refuses each feature of `a` (written::) outside `kept`.
  void only(const Architecture& a, unsigned kept) const;
  /// d_qk = d_v = d_model / heads.
  void equal_heads(const Architecture& a) const;
  /// LayerNorm with the stored gain; every layer of `model` with MLP and LayerNorm weights.
  void layer_norm_layers(const Model& model) const;
  /// Every field of `a` that decides what the model computes is as `r`
  /// (the Architecture a reader makes of the config.json about to be
  /// written); the variant is not compared: the files carry the layout's
  /// own (save_hf).
  void read_back(const Architecture& a, const Architecture& r) const;
};

/// What every Llama-shaped writer needs of `a`, failing (naming `folder`
/// and the field) with "the <layout> layout needs …": rotary embeddings on
/// the whole head, d_v = d_qk, and no feature (Needs::only) beyond rotary,
/// a gated MLP, grouped key/value heads and those in `kept`.
void require_llama_shaped(const Architecture& a, const std::string& folder, const std::string& layout, unsigned kept);

/// What a Llama-shaped writer needs of every layer of `model`, failing
/// (naming `folder` and "layer l <field>") with "the <layout> layout needs
/// …": gated MLP weights without biases, RMSNorm gains with zero ln1_b and
/// ln2_b. Returns whether some layer has a nonzero query, key, value or
/// output bias.
bool llama_shaped_layers_have_bias(const Model& model, const std::string& folder, const std::string& layout);

/// Appends the tensors of the slots `s` to `ts`, each named `prefix` + its
/// key, of `dtype`, filled from its pieces (zero elsewhere); `folder` names
/// the errors.
void emit_slots(const Slots& s, const std::string& prefix, const std::string& dtype, const std::string& folder,
                std::vector<Tensor>& ts);
/// Appends the tensors of every layer of `model` to `ts`, as `slots_of`
/// names them (a family's reader's table) after `prefix` (emit_slots).
void emit_layers(const Model& model, const LayerSlots& slots_of, const std::string& prefix, const std::string& dtype,
                 const std::string& folder, std::vector<Tensor>& ts);

/// Embeddings that are the token rows alone, unscaled (token_rows_only less
/// Gemma's √d-scaled kinds).
inline bool plain_token_rows(Layout k) { return token_rows_only(k) && !embedding_recipe(k).scale_by_root_width; }

// The families (one file each).
Family bert_family();
Family roberta_family();
Family gpt2_family();
Family albert_family();
Family distilbert_family();
Family llama_family();
Family mistral_family();
Family qwen2_family();
Family xlnet_family();     // layout_xlnet.cpp
Family t5_family();        // layout_t5.cpp
Family gpt_neox_family();  // layout_gpt_neox.cpp
Family phi_family();       // layout_phi.cpp
Family opt_family();       // layout_opt.cpp
Family gemma_family();     // layout_gemma.cpp (gemma and gemma2)
Family gemma2_family();
Family vit_family();       // layout_vit.cpp
Family qwen3_family();     // layout_qwen3.cpp
Family gemma3_family();    // layout_gemma3.cpp

}  // namespace sanpath::io

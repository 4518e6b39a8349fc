#pragma once
/// \file checkpoint.hpp
/// Loading models from checkpoints and saving them.
///
/// - HuggingFace folders (config.json + model.safetensors, or the shards of
///   a model.safetensors.index.json) of the layout families BERT, RoBERTa,
///   DistilBERT, GPT-2 and ALBERT, detected from config.json (model_type,
///   then architectures, then the tensor names). Weights are mapped onto the
///   per-head form of math.md §1: torch Linear layers (weight [out, in],
///   y = x Wᵀ + b) and Conv1D layers (GPT-2: weight [in, out], y = x W + b);
///   head h owns the d_h-slice [h·d_h, (h+1)·d_h) of the query/key/value
///   outputs and the same rows of the attention output projection. The
///   variant is the architecture's own (BERT, RoBERTa, DistilBERT, ALBERT:
///   skip on, mlp residual, post-LN, no mask; GPT-2: pre-LN, causal).
///   Tensors the analysis does not use (poolers, classifier and LM heads,
///   GPT-2's ln_f, position_ids and mask buffers of any dtype) are ignored.
///   Each tensor is decoded from the mapped file straight into the model.
/// - Llama, Mistral, Qwen2 (model_type llama, mistral, qwen2; math.md §8):
///   see src/io/layout_llama.cpp for the mapping and what is refused.
/// - XLNet, the T5 encoder, GPT-NeoX, Phi, OPT, Gemma, Gemma 2, ViT, Qwen3
///   and Gemma 3 (model_type xlnet, t5, gpt_neox, phi, opt, gemma, gemma2,
///   vit, qwen3, gemma3_text and a gemma3 file's language model;
///   shared/docs/families.md): one file each, src/io/layout_<family>.cpp,
///   says the mapping and what is refused. ViT takes images
///   (io/inputs.hpp read_pixels), not token ids.
/// - Native files (one .safetensors, F64, the configuration as JSON in
///   __metadata__["sanpath.config"]), an exact round trip of a Model.
///
/// Errors are std::invalid_argument with one line "<path>: <field>: <why>".
///
/// \code
///   const Model m = load_model("../shared/data/real-models/bert-ticket-classifier");
///   m.arch().layers;                       // L, H, d_model, … from config.json
///   save_native(m, "bert.safetensors");    // an exact round trip: load_model reads it back
///   save_hf(m, "bert-copy", Layout::bert); // config.json + model.safetensors
/// \endcode

#include "sanpath/io/safetensors.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/model/random.hpp"

#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// Loads a model. `path` is a HuggingFace folder (config.json +
/// model.safetensors or model.safetensors.index.json), a native
/// .safetensors file, or a safetensors file or index without sanpath
/// metadata whose folder holds a config.json.
Model load_model(const std::string& path);

/// What a load decodes: the word-embedding table's rows, and the layers.
///
/// `first_layers` N: the model is the checkpoint's first N layers (1 ≤ N ≤
/// L), for checkpoints whose weights as doubles exceed the memory (a
/// Llama-7B is 49 GiB): the tensors of the other layers are neither decoded
/// nor checked (a native file's single shared layer is read as usual). The
/// model's source() then ends in " (first N of L layers)". N > L is refused
/// naming config.json's layer key.
///
/// The word table (vocab × e; a fifth of a BERT-base model), for a caller
/// that knows the token ids it will embed:
/// `word_rows` nullopt (the default): the whole table. Otherwise the rows of
/// those ids (any order, repeats allowed; an empty list: none). Ids outside
/// the vocabulary are left out, so that embedding them gives the usual
/// out-of-vocabulary error. The rows left out are validated as strictly as
/// a whole load (shape, dtype, byte range, and NaN/Inf tested on the stored
/// bits with the same message), then not decoded; Embeddings::word_ids
/// records which rows the model holds, embedding any other token throws,
/// and writers refuse such a model. HuggingFace checkpoints of every layout
/// decode only the rows asked for; native files load the whole table
/// whatever is asked.
///
/// \code
///   LoadOptions o;
///   o.word_rows = std::vector<long>{101, 2023, 102};  // or {} for none
///   const Model m = load_model("bert-folder", o);
/// \endcode
///
/// `layers`: resident (the default) decodes every layer now. streamed
/// leaves them in the checkpoint: each forward pass reads a layer when it
/// reaches it (Model::layer_for_pass), into buffers it reuses, so memory
/// holds the embeddings and a few layers (a Llama-7B's 32 layers are 49 GiB
/// as doubles, one is 1.5 GiB); the names and shapes of every layer are
/// checked at load, NaN/Inf as each layer is read. automatic streams only
/// when the layers as doubles exceed the memory budget. HuggingFace
/// checkpoints of every layout stream, except ALBERT (one shared layer);
/// native files are always resident.
struct LoadOptions {
  enum class Layers { resident, streamed, automatic };
  std::optional<std::vector<long>> word_rows;
  std::optional<int> first_layers;
  Layers layers = Layers::resident;
};
Model load_model(const std::string& path, const LoadOptions& options);

/// The spelling of LoadOptions::layers users type (`--stream-layers`, Python
/// `stream_layers=`): "off" resident, "on" streamed, "auto" automatic.
/// Throws std::invalid_argument naming `what` for anything else.
LoadOptions::Layers parse_stream_layers(const std::string& text, const std::string& what = "stream_layers");

/// LoadOptions::first_layers as users write it (`--first-layers 2`, Python's
/// `first_layers=2` written out): 1 to 9 decimal digits, at least 1. Throws
/// std::invalid_argument "'0' is not a number of layers (1, 2, ...)" for
/// anything else, for the caller to name the option.
int parse_first_layers(const std::string& text);

/// A model from named tensors held in memory (e.g. a framework's state
/// dict), mapped exactly as load_model maps a file. `config_json` is either a
/// HuggingFace config.json (BERT, GPT-2, ALBERT; the layout is detected as
/// for a folder, tensors in that layout's naming, with or without its
/// prefix) or the native configuration (native_config; tensors in the native
/// naming of native_tensors). Errors name `source` ("<source>: <field>:
/// <why>"; config fields as "<source> config: <key>: <why>").
Model model_from_tensors(std::vector<Tensor> tensors, const std::string& config_json, const std::string& source);

/// The tensors of the native form of `model` (F64; names "layers.<l>.heads.<h>.W_Q"
/// [d, d_qk], …, "layers.<l>.b_O" [d], "embeddings.word" [vocab, d], …;
/// shared layers stored once) and its configuration as JSON: exactly what
/// save_native writes.
std::vector<Tensor> native_tensors(const Model& model);
std::string native_config(const Model& model);

/// Writes `model` as a native safetensors file (F64, exact round trip,
/// embeddings included). Atomic.
void save_native(const Model& model, const std::string& path);

/// Writes `model`'s weights as a HuggingFace checkpoint of the given layout:
/// `folder`/config.json and `folder`/model.safetensors (created if needed),
/// tensors in `dtype` "F64" or "F32" (F32 rounds to nearest). Keys carry the
/// family's prefix (`bert.`, `roberta.`, `distilbert.`, `transformer.`,
/// `albert.`). The loaded model has the layout's own variant. Refuses
/// (InputError naming `folder` and the field) a model the layout's files
/// would hold as another model: its norms, activation, position features,
/// gate, soft cap and sizes must be what the layout's config.json says (for
/// the BERT family and GPT-2, the config.json about to be written is read
/// back as a loader reads it). Embeddings, if present,
/// must be of the layout's kind; albert requires all layers to be identical,
/// distilbert ln_eps = 1e-12. RoBERTa's position table is written after
/// padding_idx + 1 = 2 zero rows. Every family's tensors are the ones its
/// reader's table names (src/io/hf_layout.hpp).
void save_hf(const Model& model, const std::string& folder, Layout layout, const std::string& dtype = "F64");

/// A family's own options for a random model in its layout (`init --layout`,
/// Python random_model(layout=…)); unset: the family's default
/// (families.md). Options a family does not have are refused by
/// family_structure naming them.
struct FamilyOptions {
  std::optional<double> rotary_fraction;        ///< gpt_neox rotary_pct (0.25), phi partial_rotary_factor (0.5)
  std::optional<bool> parallel_residual;        ///< gpt_neox use_parallel_residual (true)
  std::optional<int> sliding_window;            ///< gemma2, gemma3 (4096; 0: none)
  std::optional<double> softcap;                ///< gemma2 attn_logit_softcapping (50; 0: none)
  std::optional<double> query_pre_attn_scalar;  ///< gemma2, gemma3 (head_dim)
  std::optional<int> layer_pattern;             ///< gemma3 sliding_window_pattern P (6): layer l global iff (l+1) % P == 0
  std::optional<double> rope_local_base;        ///< gemma3 rope_local_base_freq, the sliding layers' base (10000)
  std::optional<double> rope_linear_factor;     ///< gemma3 linear rope_scaling factor of the global layers (1: none)
  std::optional<int> rel_buckets;               ///< t5 relative_attention_num_buckets (32)
  std::optional<int> rel_max_distance;          ///< t5 relative_attention_max_distance (128)
  std::optional<bool> gated;                    ///< t5 "gated-gelu" (false: "relu")
  std::optional<int> clamp_len;                 ///< xlnet (none)
  std::optional<bool> causal;                   ///< xlnet attn_type "uni" (false: "bi")
  std::optional<int> image_size, patch_size, channels;  ///< vit (224, 16, 3)
  std::optional<int> embed_dim;                 ///< opt word_embed_proj_dim (d)
  std::optional<bool> pre_norm;                 ///< opt do_layer_norm_before (true)
};

/// Sets the structure of `layout`'s checkpoints on spec.arch (variant,
/// norm, activation, rotary, parallel block, …) and its embedding sizes
/// (ViT image and patch, OPT projection) from the family's defaults and `o`,
/// keeping the sizes already set (layers, heads, d_model, d_qk, d_v, d_ff,
/// kv_heads, ln_eps) and rope_theta. Throws std::invalid_argument naming the
/// option for one the family does not have, or a value it refuses. Layouts
/// without options of their own (bert, gpt2, llama, …) take none.
void family_structure(Layout layout, RandomModelSpec& spec, const FamilyOptions& o);

/// What a family's config.json means when it omits the activation and the
/// norm epsilon (BERT: gelu, 1e-12; Llama: silu, 1e-5; OPT: relu and its
/// fixed 1e-5; …), the defaults of `init --layout`.
struct FamilyDefaults {
  Activation activation = Activation::gelu;
  double ln_eps = 1e-12;
};
FamilyDefaults family_defaults(Layout layout);

}  // namespace sanpath

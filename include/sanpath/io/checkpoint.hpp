#pragma once
/// \file checkpoint.hpp
/// Loading models from checkpoints and saving them.
///
/// - HuggingFace folders (config.json + model.safetensors) of BERT, GPT-2 and
///   ALBERT, detected from config.json (model_type, then architectures, then
///   the tensor names). Weights are mapped onto the per-head form of
///   math.md §1: torch Linear layers (BERT, ALBERT: weight [out, in],
///   y = x Wᵀ + b) and Conv1D layers (GPT-2: weight [in, out], y = x W + b);
///   head h owns the d_h-slice [h·d_h, (h+1)·d_h) of the query/key/value
///   outputs and the same rows of the attention output projection. The
///   variant is the architecture's own (BERT, ALBERT: skip on, mlp residual,
///   post-LN, no mask; GPT-2: pre-LN, causal). Pooler, classifier, lm_head,
///   GPT-2's ln_f and attention-mask buffers are ignored.
/// - Llama, Mistral, Qwen2 (model_type llama, mistral, qwen2; math.md §8):
///   see src/io/layout_llama.hpp for the mapping and what is refused.
/// - Native files (one .safetensors, F64, the configuration as JSON in
///   __metadata__["sanpath.config"]), an exact round trip of a Model.
///
/// Errors are std::invalid_argument with one line "<path>: <field>: <why>".

#include "sanpath/model/model.hpp"

#include <string>

namespace sanpath {

/// Loads a model. `path` is a HuggingFace folder (config.json +
/// model.safetensors), a native .safetensors file, or a model.safetensors
/// file without sanpath metadata whose folder holds a config.json.
Model load_model(const std::string& path);

/// Writes `model` as a native safetensors file (F64, exact round trip,
/// embeddings included). Atomic.
void save_native(const Model& model, const std::string& path);

enum class HfLayout { bert, gpt2, albert, llama, mistral, qwen2 };
/// "bert|gpt2|albert|llama|mistral|qwen2"; throws std::invalid_argument.
HfLayout parse_hf_layout(const std::string& text);
std::string to_string(HfLayout layout);

/// Writes `model`'s weights as a HuggingFace checkpoint of the given layout:
/// `folder`/config.json and `folder`/model.safetensors (created if needed),
/// tensors in `dtype` "F64" or "F32" (F32 rounds to nearest). Keys carry the
/// `bert.`, `transformer.` or `albert.` prefix. Only the weights are
/// written; the loaded model has the layout's own variant. Requires d_qk =
/// d_v = d_model / heads, MLP and LayerNorm weights; embeddings, if present,
/// must be of the layout's kind; albert requires all layers to be identical.
/// llama, mistral, qwen2: the family's structure instead (layout_llama.hpp).
void save_hf(const Model& model, const std::string& folder, HfLayout layout, const std::string& dtype = "F64");

}  // namespace sanpath

#pragma once
/// \file layout_llama.hpp
/// HuggingFace checkpoints of the Llama family (model_type llama, mistral,
/// qwen2; math.md §8), read and written for checkpoint.cpp's dispatch.
///
/// Mapping onto the per-head form (torch Linear weights [out, in], y = x Wᵀ):
/// query head h owns rows [h·d_h, (h+1)·d_h) of q_proj and columns of
/// o_proj; key/value head g the rows [g·d_h, (g+1)·d_h) of k_proj, v_proj,
/// copied into every query head h with ⌊h·H_kv/H⌋ = g. gate_proj → W_gate,
/// up_proj → W_1, down_proj → W_2; input_layernorm / post_attention_layernorm
/// → ln1_g / ln2_g (RMSNorm, zero ln*_b); embed_tokens → the token table.
/// Biases absent from the layout are zero. model.norm and lm_head are not
/// part of the analysed layers (like GPT-2's ln_f) and are ignored on reading;
/// the writer stores a unit model.norm and ties the LM head.

#include "sanpath/io/safetensors.hpp"
#include "sanpath/model/model.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace sanpath::detail {

/// Is `model_type` one of llama, mistral, qwen2?
bool is_llama_family(const std::string& model_type);

/// Loads a checkpoint whose config.json (`config`, read from `config_path`)
/// has a family model_type. Configurations math.md §8 does not define are
/// refused naming the key: rope_scaling other than null, a partial rotary
/// factor, hidden_act other than silu, mlp_bias. A sliding window is kept
/// as Architecture::attention_window (sequences longer are refused by the
/// forward pass). Throws std::invalid_argument "<path>: <field>: <why>".
Model load_llama_family(const std::string& config_path, const nlohmann::json& config, const SafetensorsFile& f,
                        const std::string& source);

/// Writes `model` as a `model_type` (llama, mistral, qwen2) checkpoint:
/// `folder`/config.json and `folder`/model.safetensors, tensors in `dtype`
/// ("F64" or "F32"). Requires the family's structure (RMSNorm with zero
/// biases, rotary, gated MLP, d_qk = d_v, zero output and MLP biases, zero
/// q/k/v biases except for qwen2); embeddings, if present, of kind llama.
void save_llama_family(const Model& model, const std::string& folder, const std::string& model_type,
                       const std::string& dtype);

}  // namespace sanpath::detail

#pragma once
/// \file task_head.hpp
/// Reading the task head of a HuggingFace checkpoint (model/task_head.hpp)
/// from its tensors (model.safetensors or its shards), next to the stack that
/// load_model reads; families.md names each family's:
///
/// - classifier: on the first row, the pooler map and its activation, then
///   the classifier, each `.{weight,bias}`: BERT `bert.pooler.dense` (tanh),
///   `classifier`; RoBERTa `classifier.dense` (tanh),
///   `classifier.out_proj`; DistilBERT `pre_classifier` (ReLU),
///   `classifier`; ALBERT `albert.pooler` (tanh), `classifier`; ViT
///   `vit.layernorm` (LayerNorm, no pooler) and `classifier` on the CLS row;
/// - language model: the final norm, then the LM head or, tied, the token
///   table: GPT-2 `transformer.ln_f`, `lm_head.weight` or
///   `transformer.wte.weight`; GPT-NeoX `gpt_neox.final_layer_norm`,
///   `embed_out.weight`; OPT `model.decoder.final_layer_norm` (where stored),
///   `project_out` (where stored), `lm_head.weight` or `embed_tokens`; Phi
///   `model.final_layernorm`, `lm_head.{weight,bias}`; Llama, Mistral, Qwen2,
///   Gemma, Gemma 2 `model.norm` (RMSNorm, Gemma's gain 1 + w),
///   `lm_head.weight` or, with config.json's `tie_word_embeddings` (default
///   true for Gemma, false otherwise), `model.embed_tokens.weight` as stored,
///   and Gemma 2's `final_logit_softcapping` (default 30, null: none); XLNet
///   `lm_loss.bias` with the tied `transformer.word_embedding.weight`.
///
/// The T5 encoder has none of its own (task_head_absence). Errors are
/// std::invalid_argument with one line "<file>: <tensor>: <why>".

#include "sanpath/model/model.hpp"
#include "sanpath/model/task_head.hpp"

#include <optional>
#include <string>

namespace sanpath {

/// The task head of the checkpoint at `path` (a HuggingFace folder, its
/// model.safetensors or shard index; native sanpath files carry none), with
/// shapes checked against `model` (d = d_model; the final norm's eps and gain
/// form are the model's). nullopt when the file holds no head; an error when
/// it holds part of one, a tensor has the wrong shape or a non-finite entry.
std::optional<TaskHead> read_task_head(const std::string& path, const Model& model);

/// Why `model` has no task head of its own to read: reads_decoder for a T5
/// encoder (T5's lm_head reads the decoder's output), else not_read.
TaskHeadAbsence task_head_absence(const Model& model);

}  // namespace sanpath

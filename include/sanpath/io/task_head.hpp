#pragma once
/// \file task_head.hpp
/// Reading the task head of a HuggingFace checkpoint (model/task_head.hpp)
/// from its model.safetensors, next to the stack that load_model reads:
///
/// - classifier: `bert.pooler.dense.{weight,bias}` and `classifier.{weight,bias}`;
/// - language model: `transformer.ln_f.{weight,bias}` and `lm_head.weight`,
///   or, when the LM head is tied (no `lm_head.weight`), `transformer.wte.weight`
///   (GPT-2); `gpt_neox.final_layer_norm` and `embed_out.weight` (GPT-NeoX);
///   `model.decoder.final_layer_norm` and `lm_head.weight` or the tied
///   `model.decoder.embed_tokens.weight` (OPT; not read when a project_out
///   maps the head: nullopt).
///   LayerNorm models only: the other families' heads are not read.
///
/// Errors are std::invalid_argument with one line "<file>: <tensor>: <why>".

#include "sanpath/model/model.hpp"
#include "sanpath/model/task_head.hpp"

#include <optional>
#include <string>

namespace sanpath {

/// The task head of the checkpoint at `path` (a HuggingFace folder or its
/// model.safetensors; native sanpath files carry none), with shapes checked
/// against `model` (d = d_model; the LayerNorm eps is the model's). nullopt
/// when the file holds neither head; an error when it holds part of one or
/// a tensor has the wrong shape.
std::optional<TaskHead> read_task_head(const std::string& path, const Model& model);

}  // namespace sanpath

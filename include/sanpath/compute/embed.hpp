#pragma once
/// \file embed.hpp
/// X^0 in a working scalar from an InputSpec: token ids through the model's
/// own embeddings (computed in the scalar), given or random matrices
/// converted exactly.

#include "sanpath/core/scalar.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/model.hpp"

#include <vector>

namespace sanpath {

/// Embeds token ids with the model's embeddings: BERT, RoBERTa LayerNorm(word
/// + position + token_type 0); DistilBERT LayerNorm(word + position); GPT-2
/// wte + wpe; ALBERT its embeddings then the mapping into d_model; Llama,
/// Mistral, Qwen2 the token rows alone (positions are rotary). Throws naming
/// the token index for ids outside the
/// vocabulary and for sequences longer than the position table.
template <class S> Matrix<S> embed_tokens(const Model& model, const std::vector<long>& ids);

/// X^0 in scalar S (n×d_model). Matrices and random inputs are doubles,
/// converted exactly.
template <class S> Matrix<S> make_input(const Model& model, const InputSpec& spec);

#define SANPATH_DECLARE_INPUT(S)                                                        \
  extern template Matrix<S> embed_tokens<S>(const Model&, const std::vector<long>&);    \
  extern template Matrix<S> make_input<S>(const Model&, const InputSpec&);
SANPATH_FOR_EACH_SCALAR(SANPATH_DECLARE_INPUT)
#undef SANPATH_DECLARE_INPUT

}  // namespace sanpath

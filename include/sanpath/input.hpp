#pragma once
/// \file input.hpp
/// The input X^0 (n tokens × d_model features) of a forward pass: a given
/// matrix, token ids through the model's own embeddings, or a seeded
/// random matrix. Token embeddings are computed in the working scalar.

#include "sanpath/model.hpp"
#include "sanpath/random.hpp"
#include "sanpath/scalar.hpp"

#include <string>
#include <vector>

namespace sanpath {

struct InputSpec {
  enum class Kind { matrix, tokens, random };
  Kind kind = Kind::random;
  MatrixXd X;                 ///< Kind::matrix: n×d
  std::vector<long> tokens;   ///< Kind::tokens
  RandomInputSpec random;     ///< Kind::random (d is taken from the model when 0)
  std::string source = "input";  ///< for messages: file name or "--tokens"

  static InputSpec from_matrix(MatrixXd X, std::string source);
  static InputSpec from_tokens(std::vector<long> ids, std::string source = "--tokens");
  static InputSpec from_random(RandomInputSpec spec);
  std::string describe() const;
  /// n, the number of tokens (rows of X^0).
  long rows() const;
};

/// Parses "101,2023,102" (spaces allowed). Throws std::invalid_argument
/// naming `what` and the offending item.
std::vector<long> parse_token_list(const std::string& text, const std::string& what = "--tokens");

/// Embeds token ids with the model's embeddings: BERT LayerNorm(word +
/// position + token_type 0); GPT-2 wte + wpe; ALBERT its embeddings then the
/// mapping into d_model. Throws naming the token index for ids outside the
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

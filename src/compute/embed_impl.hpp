#pragma once
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/embed.hpp"
#include "sanpath/core/linalg.hpp"

#include <stdexcept>

namespace sanpath {

template <class S> Matrix<S> embed_tokens(const Model& model, const std::vector<long>& ids) {
  if (!model.embeddings())
    throw std::invalid_argument(model.source() + ": embeddings: the model has no embedding tables; use --input or --random-input");
  const Embeddings& e = *model.embeddings();
  if (ids.empty()) throw std::invalid_argument(model.source() + ": tokens: the sequence is empty");
  if (e.has_position_table() && static_cast<long>(ids.size()) > e.max_positions())
    throw std::invalid_argument(model.source() + ": tokens: sequence of " + std::to_string(ids.size()) +
                                " tokens is longer than the position table (" + std::to_string(e.max_positions()) + ")");
  const Eigen::Index n = static_cast<Eigen::Index>(ids.size()), w = e.word.cols();
  for (Eigen::Index i = 0; i < n; ++i) {
    const long id = ids[static_cast<std::size_t>(i)];
    if (id < 0 || id >= e.vocab_size())
      throw std::invalid_argument(model.source() + ": tokens: token " + std::to_string(i) + " has id " +
                                  std::to_string(id) + ", outside the vocabulary [0, " +
                                  std::to_string(e.vocab_size()) + ")");
  }
  Matrix<S> E(n, w);
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::Index row = e.word_row(ids[static_cast<std::size_t>(i)]);
    for (Eigen::Index j = 0; j < w; ++j) {
      S v = S(e.word(row, j));
      if (e.has_position_table()) v += S(e.position(i, j));
      if (e.kind != Layout::gpt2 && e.token_type.rows() > 0) v += S(e.token_type(0, j));
      E(i, j) = v;
    }
  }
  if (e.kind == Layout::gpt2 || rotary_family(e.kind)) return E;
  Matrix<S> N = layer_norm(E, e.ln_g, e.ln_b, e.ln_eps);
  if (e.kind != Layout::albert) return N;
  Matrix<S> out;
  gemm(N, convert<S>(e.mapping), out);
  for (Eigen::Index j = 0; j < out.cols(); ++j)
    for (Eigen::Index i = 0; i < out.rows(); ++i) out(i, j) += S(e.mapping_b(j));
  return out;
}

template <class S> Matrix<S> make_input(const Model& model, const InputSpec& spec) {
  switch (spec.kind) {
    case InputSpec::Kind::tokens:
      return embed_tokens<S>(model, spec.tokens);
    case InputSpec::Kind::matrix:
      if (spec.X.cols() != model.arch().d_model)
        throw std::invalid_argument(spec.source + ": X: has " + std::to_string(spec.X.cols()) +
                                    " columns, the model expects d_model = " + std::to_string(model.arch().d_model));
      return convert<S>(spec.X);
    case InputSpec::Kind::random: {
      RandomInputSpec r = spec.random;
      if (r.d == 0) r.d = model.arch().d_model;
      if (r.d != model.arch().d_model)
        throw std::invalid_argument("random input: d: " + std::to_string(r.d) + " differs from d_model = " +
                                    std::to_string(model.arch().d_model));
      return convert<S>(random_input(r));
    }
  }
  throw std::logic_error("make_input: unknown input kind");
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_INPUT(S)                                                                       \
  template sanpath::Matrix<S> sanpath::embed_tokens<S>(const sanpath::Model&, const std::vector<long>&);  \
  template sanpath::Matrix<S> sanpath::make_input<S>(const sanpath::Model&, const sanpath::InputSpec&);

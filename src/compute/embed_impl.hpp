#pragma once
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/embed.hpp"
#include "sanpath/core/linalg.hpp"

#include "sanpath/core/resources.hpp"

#include <stdexcept>
#include <vector>

namespace sanpath {

template <class S> Matrix<S> embed_tokens(const Model& model, const std::vector<long>& ids) {
  using std::sqrt;
  if (!model.embeddings())
    throw std::invalid_argument(model.source() + ": embeddings: the model has no embedding tables; use --input or --random-input");
  const Embeddings& e = *model.embeddings();
  if (e.pixels())
    throw std::invalid_argument(model.source() + ": tokens: a vit model takes images (--pixels), not token ids");
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
    if (e.padding_id && id == *e.padding_id)
      throw std::invalid_argument(model.source() + ": tokens: token " + std::to_string(i) + " has id " +
                                  std::to_string(id) + ", the padding token (pad_token_id), which has no position "
                                  "of its own; give the sequence without padding");
  }
  // The recipe's steps in order (EmbeddingRecipe): word rows, project_in, + position, + token type 0,
  // √w, LayerNorm, mapping.
  const EmbeddingRecipe& r = e.steps();
  Matrix<S> E(n, w);
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::Index row = e.word_row(ids[static_cast<std::size_t>(i)]);
    for (Eigen::Index j = 0; j < w; ++j) E(i, j) = S(e.word(row, j));
  }
  if (r.project_in && e.mapping.size() > 0) {
    Matrix<S> P;
    gemm(E, convert<S>(e.mapping), P);
    E = std::move(P);
  }
  const bool types = r.token_type && e.token_type.rows() > 0;
  if (r.positions || types)
    for (Eigen::Index j = 0; j < E.cols(); ++j)
      for (Eigen::Index i = 0; i < n; ++i) {
        if (r.positions) E(i, j) += S(e.position(i, j));
        if (types) E(i, j) += S(e.token_type(0, j));
      }
  if (r.scale_by_root_width) {
    const S scale = sqrt(S(static_cast<double>(w)));  // √w in the working precision
    for (Eigen::Index j = 0; j < E.cols(); ++j)
      for (Eigen::Index i = 0; i < n; ++i) E(i, j) *= scale;
  }
  if (r.layer_norm) E = layer_norm(E, e.ln_g, e.ln_b, e.ln_eps);
  if (!r.map_after_norm) return E;
  Matrix<S> out;
  gemm(E, convert<S>(e.mapping), out);
  for (Eigen::Index j = 0; j < out.cols(); ++j)
    for (Eigen::Index i = 0; i < out.rows(); ++i) out(i, j) += S(e.mapping_b(j));
  return out;
}

/// ViT (families.md): X^0 = [cls; e_0; …; e_{N−1}] + pos, patch k = r·g + s
/// row-major, e_k[o] = b[o] + Σ_{c,i,j} W[o, c·p² + i·p + j] x[c, r·p + i, s·p + j],
/// summed in S in that order.
template <class S> Matrix<S> embed_pixels(const Model& model, const InputSpec& spec) {
  if (!model.embeddings() || !model.embeddings()->pixels())
    throw std::invalid_argument(spec.source + ": pixel_values: " + model.source() +
                                " takes no pixels (a ViT checkpoint does); use --tokens, --input or --random-input");
  const Embeddings& e = *model.embeddings();
  const long C = spec.pixel_shape[0], Hh = spec.pixel_shape[1], Ww = spec.pixel_shape[2];
  if (C != e.channels)
    throw std::invalid_argument(spec.source + ": pixel_values: " + std::to_string(C) +
                                " channels, the model's num_channels is " + std::to_string(e.channels));
  if (Hh != e.image_size || Ww != e.image_size)
    throw std::invalid_argument(spec.source + ": pixel_values: image " + std::to_string(Hh) + "×" + std::to_string(Ww) +
                                ", the model's image_size is " + std::to_string(e.image_size) +
                                " (no interpolation of position embeddings)");
  const long p = e.patch_size, g = e.patch_grid(), d = model.arch().d_model;
  Matrix<S> X(g * g + 1, d);
  std::vector<S> patch(static_cast<std::size_t>(C * p * p));
  for (Eigen::Index o = 0; o < d; ++o) X(0, o) = S(e.cls(o)) + S(e.position(0, o));
  for (long r = 0; r < g; ++r)
    for (long sc = 0; sc < g; ++sc) {
      check_interrupt();
      std::size_t k = 0;
      for (long c = 0; c < C; ++c)
        for (long i = 0; i < p; ++i)
          for (long j = 0; j < p; ++j)
            patch[k++] = S(spec.pixels[static_cast<std::size_t>((c * Hh + r * p + i) * Ww + sc * p + j)]);
      const Eigen::Index row = r * g + sc + 1;
      for (Eigen::Index o = 0; o < d; ++o) {
        S acc = S(e.patch_b(o));
        for (std::size_t q = 0; q < patch.size(); ++q) acc += S(e.patch(o, static_cast<Eigen::Index>(q))) * patch[q];
        X(row, o) = acc + S(e.position(row, o));
      }
    }
  return X;
}

template <class S> Matrix<S> make_input(const Model& model, const InputSpec& spec) {
  switch (spec.kind) {
    case InputSpec::Kind::pixels:
      return embed_pixels<S>(model, spec);
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

#pragma once
/// \file input.hpp
/// The input X^0 (n tokens × d_model features) of a forward pass: a given
/// matrix, token ids through the model's own embeddings, or a seeded
/// random matrix. compute/embed.hpp turns a spec into X^0 in a working scalar.

#include "sanpath/model/model.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/core/scalar.hpp"

#include <array>
#include <string>
#include <vector>

namespace sanpath {

struct InputSpec {
  enum class Kind { matrix, tokens, random, pixels };
  Kind kind = Kind::random;
  MatrixXd X;                 ///< Kind::matrix: n×d
  std::vector<long> tokens;   ///< Kind::tokens
  RandomInputSpec random;     ///< Kind::random (d is taken from the model when 0)
  /// Kind::pixels: one image, channel-first, `pixel_shape` = {C, height,
  /// width}, values row-major as stored (already normalised by the model's
  /// image processor); a ViT model embeds it (families.md).
  std::vector<double> pixels;
  std::array<long, 3> pixel_shape{0, 0, 0};
  std::string source = "input";  ///< for messages: file name or "--tokens"

  static InputSpec from_matrix(MatrixXd X, std::string source);
  static InputSpec from_tokens(std::vector<long> ids, std::string source = "--tokens");
  static InputSpec from_random(RandomInputSpec spec);
  /// An image [C, H, W]; throws std::invalid_argument naming `source` and
  /// pixel_values for an empty shape, a size mismatch or NaN/Inf.
  static InputSpec from_pixels(std::vector<double> values, std::array<long, 3> shape, std::string source);
  std::string describe() const;
  /// n, the number of tokens (rows of X^0). An image's depends on the
  /// model (patches + CLS): `model` is then required (std::logic_error
  /// without it; std::invalid_argument when the model takes no pixels).
  long rows(const Model* model = nullptr) const;
};

/// `count` random inputs: `spec` with seeds spec.seed, spec.seed + 1, ….
std::vector<InputSpec> random_input_batch(const RandomInputSpec& spec, int count);

/// The range of the tokens of a random input and of the inputs of a random
/// batch (`--random-input N`, `--batch B`, Python random_input(n=),
/// random_batch(count=)): [1, 2^20]. Returns `count`, or throws
/// std::invalid_argument ("0 inputs is outside [1, 1048576]", `unit` naming
/// what is counted) for the caller to name the option.
long checked_random_count(long count, const std::string& unit);

/// "3 inputs from <source>, n = 4..9 tokens" (n = 8 when all agree).
std::string describe_batch(const std::vector<InputSpec>& inputs, const std::string& source);

/// Parses "101,2023,102" (spaces allowed). Throws std::invalid_argument
/// naming `what` and the offending item.
std::vector<long> parse_token_list(const std::string& text, const std::string& what = "--tokens");

}  // namespace sanpath

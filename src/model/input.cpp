#include "sanpath/model/input.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace sanpath {

InputSpec InputSpec::from_matrix(MatrixXd X, std::string source) {
  InputSpec s;
  s.kind = Kind::matrix;
  s.X = std::move(X);
  s.source = std::move(source);
  for (Eigen::Index j = 0; j < s.X.cols(); ++j)
    for (Eigen::Index i = 0; i < s.X.rows(); ++i)
      if (!std::isfinite(s.X(i, j)))
        throw std::invalid_argument(s.source + ": X: " + (std::isnan(s.X(i, j)) ? "NaN" : "Inf") + " at [" +
                                    std::to_string(i) + ", " + std::to_string(j) + "]");
  if (s.X.rows() < 1 || s.X.cols() < 1) throw std::invalid_argument(s.source + ": X: empty matrix");
  return s;
}

InputSpec InputSpec::from_tokens(std::vector<long> ids, std::string source) {
  InputSpec s;
  s.kind = Kind::tokens;
  s.tokens = std::move(ids);
  s.source = std::move(source);
  return s;
}

InputSpec InputSpec::from_random(RandomInputSpec spec) {
  InputSpec s;
  s.kind = Kind::random;
  s.random = spec;
  s.source = "random input (seed " + std::to_string(spec.seed) + ")";
  return s;
}

InputSpec InputSpec::from_pixels(std::vector<double> values, std::array<long, 3> shape, std::string source) {
  InputSpec s;
  s.kind = Kind::pixels;
  s.source = std::move(source);
  for (long k : shape)
    if (k < 1)
      throw std::invalid_argument(s.source + ": pixel_values: shape [" + std::to_string(shape[0]) + ", " +
                                  std::to_string(shape[1]) + ", " + std::to_string(shape[2]) + "] has an empty axis");
  if (static_cast<double>(shape[0]) * static_cast<double>(shape[1]) * static_cast<double>(shape[2]) !=
      static_cast<double>(values.size()))
    throw std::invalid_argument(s.source + ": pixel_values: " + std::to_string(values.size()) +
                                " values for the shape given");
  for (std::size_t k = 0; k < values.size(); ++k)
    if (!std::isfinite(values[k]))
      throw std::invalid_argument(s.source + ": pixel_values: " + (std::isnan(values[k]) ? "NaN" : "Inf") +
                                  " at flat index " + std::to_string(k));
  s.pixels = std::move(values);
  s.pixel_shape = shape;
  return s;
}

long InputSpec::rows(const Model* model) const {
  switch (kind) {
    case Kind::matrix: return static_cast<long>(X.rows());
    case Kind::tokens: return static_cast<long>(tokens.size());
    case Kind::random: return random.n;
    case Kind::pixels: {
      if (!model) throw std::logic_error("InputSpec::rows: an image's token count needs the model");
      if (!model->embeddings() || !model->embeddings()->pixels())
        throw std::invalid_argument(source + ": pixel_values: " + model->source() +
                                    " takes no pixels (a ViT checkpoint does)");
      const long g = model->embeddings()->patch_grid();
      return g * g + 1;
    }
  }
  return 1;
}

std::string InputSpec::describe() const {
  switch (kind) {
    case Kind::matrix:
      return source + " (" + std::to_string(X.rows()) + "×" + std::to_string(X.cols()) + ")";
    case Kind::tokens:
      return std::to_string(tokens.size()) + " token ids";
    case Kind::random:
      return source;
    case Kind::pixels:
      return source + " (image " + std::to_string(pixel_shape[0]) + "×" + std::to_string(pixel_shape[1]) + "×" +
             std::to_string(pixel_shape[2]) + ")";
  }
  return source;
}

long checked_random_count(long count, const std::string& unit) {
  if (count < 1 || count > (1L << 20))
    throw std::invalid_argument(std::to_string(count) + " " + unit + " is outside [1, 1048576]");
  return count;
}

std::vector<InputSpec> random_input_batch(const RandomInputSpec& spec, int count) {
  std::vector<InputSpec> out;
  for (int i = 0; i < count; ++i) {
    RandomInputSpec s = spec;
    s.seed = spec.seed + static_cast<std::uint64_t>(i);
    out.push_back(InputSpec::from_random(s));
  }
  return out;
}

std::string describe_batch(const std::vector<InputSpec>& inputs, const std::string& source) {
  if (!inputs.empty() && inputs.front().kind == InputSpec::Kind::pixels)
    return std::to_string(inputs.size()) + (inputs.size() == 1 ? " image" : " images") + " from " + source;
  long lo = 0, hi = 0;
  for (const InputSpec& in : inputs) {
    lo = lo == 0 ? in.rows() : std::min(lo, in.rows());
    hi = std::max(hi, in.rows());
  }
  return std::to_string(inputs.size()) + (inputs.size() == 1 ? " input" : " inputs") + " from " + source +
         ", n = " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi)) + " tokens";
}

std::vector<long> parse_token_list(const std::string& text, const std::string& what) {
  std::vector<long> ids;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    const std::string t = b == std::string::npos ? std::string() : item.substr(b, e - b + 1);
    if (t.empty()) throw std::invalid_argument(what + ": empty item at position " + std::to_string(ids.size()));
    errno = 0;
    char* end = nullptr;
    const long v = std::strtol(t.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE)
      throw std::invalid_argument(what + ": '" + t + "' at position " + std::to_string(ids.size()) +
                                  " is not an integer token id");
    if (v < 0) throw std::invalid_argument(what + ": token id " + t + " is negative");
    ids.push_back(v);
    if (ids.size() > (1u << 20)) throw std::invalid_argument(what + ": more than 2^20 tokens");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

}  // namespace sanpath

#include "sanpath/io/inputs.hpp"

#include "sanpath/io/safetensors.hpp"
#include "sanpath/io/tensor_eigen.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace sanpath {

std::vector<InputSpec> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path + ": file: cannot be opened for reading");
  std::vector<InputSpec> out;
  std::string line;
  long number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::string where = path + ": line " + std::to_string(number);
    // parse_token_list's messages name `where`: the file and the line.
    std::vector<long> ids = parse_token_list(line, where);
    out.push_back(InputSpec::from_tokens(std::move(ids), where));
  }
  if (in.bad()) throw std::invalid_argument(path + ": file: read error");
  if (out.empty()) throw std::invalid_argument(path + ": file: no token sequence (only blank or '#' lines)");
  return out;
}

std::vector<InputSpec> read_input_tensor(const std::string& path) {
  const SafetensorsFile st = SafetensorsFile::read(path);
  const Tensor& x = st.at("X");
  const std::size_t dims = x.shape.size();
  if (dims != 2 && dims != 3)
    throw std::invalid_argument(path + ": X: shape has " + std::to_string(dims) +
                                " dimensions, expected [n, d_model] or [b, n, d_model]");
  const std::int64_t b = dims == 3 ? x.shape[0] : 1;
  const std::int64_t n = x.shape[dims - 2], d = x.shape[dims - 1];
  if (b < 1) throw std::invalid_argument(path + ": X: batch dimension is 0");
  std::vector<InputSpec> out;
  const TensorReader read = [&x](std::size_t first, std::size_t count, double* dst) {
    std::copy_n(x.values.begin() + static_cast<std::ptrdiff_t>(first), count, dst);
  };
  for (std::int64_t k = 0; k < b; ++k) {
    // Input k is rows [k·n, (k+1)·n) of X seen as a (b·n)×d row-major matrix.
    MatrixXd X(n, d);
    read_block({k * n, n, 0, d, false}, d, read, Eigen::Map<Eigen::MatrixXd>(X.data(), X.rows(), X.cols()));
    out.push_back(InputSpec::from_matrix(std::move(X), dims == 3 ? path + "[" + std::to_string(k) + "]" : path));
  }
  return out;
}

std::vector<InputSpec> read_pixels(const std::string& path) {
  const SafetensorsFile st = SafetensorsFile::read(path);
  bool found = false;
  for (const std::string& name : st.names()) found = found || name == "pixel_values";
  if (!found) throw std::invalid_argument(path + ": pixel_values: no tensor of that name (images for a ViT model)");
  const Tensor& x = st.at("pixel_values");
  const std::size_t dims = x.shape.size();
  if (dims != 3 && dims != 4)
    throw std::invalid_argument(path + ": pixel_values: shape has " + std::to_string(dims) +
                                " dimensions, expected [C, H, W] or [b, C, H, W]");
  const std::int64_t b = dims == 4 ? x.shape[0] : 1;
  const std::array<long, 3> shape{static_cast<long>(x.shape[dims - 3]), static_cast<long>(x.shape[dims - 2]),
                                  static_cast<long>(x.shape[dims - 1])};
  if (b < 1) throw std::invalid_argument(path + ": pixel_values: batch dimension is 0");
  const std::size_t per = x.values.size() / static_cast<std::size_t>(b);
  std::vector<InputSpec> out;
  for (std::int64_t k = 0; k < b; ++k) {
    const auto first = x.values.begin() + static_cast<std::ptrdiff_t>(per * static_cast<std::size_t>(k));
    out.push_back(InputSpec::from_pixels(std::vector<double>(first, first + static_cast<std::ptrdiff_t>(per)), shape,
                                         dims == 4 ? path + "[" + std::to_string(k) + "]" : path));
  }
  return out;
}

}  // namespace sanpath

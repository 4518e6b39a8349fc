// Task heads of HuggingFace checkpoints, read with the safetensors reader
// from the same file as the stack (checkpoint.cpp reads the stack).
#include "sanpath/io/task_head.hpp"

#include "sanpath/io/safetensors.hpp"

#include <filesystem>
#include <stdexcept>
#include <vector>

namespace sanpath {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& why) {
  throw std::invalid_argument(file + ": " + field + ": " + why);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The tensor `name` as a matrix of `rows`×`cols` (rows < 0: any number of rows).
Eigen::MatrixXd matrix(const SafetensorsFile& f, const std::string& name, long rows, long cols) {
  const Tensor& t = f.at(name);
  if (t.shape.size() != 2 || (rows >= 0 && t.shape[0] != rows) || t.shape[1] != cols || t.shape[0] < 1)
    fail(f.path(), name,
         "shape " + shape_text(t.shape) + ", expected [" + (rows >= 0 ? std::to_string(rows) : "N") + ", " +
             std::to_string(cols) + "]");
  Eigen::MatrixXd m(t.shape[0], t.shape[1]);
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) m(i, j) = t.values[static_cast<std::size_t>(i * m.cols() + j)];
  return m;
}

Eigen::VectorXd vector(const SafetensorsFile& f, const std::string& name, long size) {
  const Tensor& t = f.at(name);
  if (t.shape.size() != 1 || t.shape[0] != size)
    fail(f.path(), name, "shape " + shape_text(t.shape) + ", expected [" + std::to_string(size) + "]");
  Eigen::VectorXd v(size);
  for (Eigen::Index i = 0; i < size; ++i) v(i) = t.values[static_cast<std::size_t>(i)];
  return v;
}

void require_finite(const std::string& file, const std::string& name, const Eigen::MatrixXd& m) {
  if (!m.allFinite()) fail(file, name, "has a non-finite entry");
}

}  // namespace

std::optional<TaskHead> read_task_head(const std::string& path, const Model& model) {
  std::string file = path;
  if (fs::is_directory(path)) file = (fs::path(path) / "model.safetensors").string();
  const SafetensorsFile f = SafetensorsFile::read(file);
  const long d = model.arch().d_model;
  const bool classifier = f.find("classifier.weight") != nullptr;
  const bool lm = f.find("transformer.ln_f.weight") != nullptr;
  if (!classifier && !lm) return std::nullopt;
  if (classifier && lm) fail(file, "classifier.weight", "the file also holds transformer.ln_f (two task heads)");
  TaskHead h;
  if (classifier) {
    h.kind = TaskHeadKind::classifier;
    h.pooler_W = matrix(f, "bert.pooler.dense.weight", d, d);
    h.pooler_b = vector(f, "bert.pooler.dense.bias", d);
    h.classifier_W = matrix(f, "classifier.weight", -1, d);
    h.classifier_b = vector(f, "classifier.bias", h.classifier_W.rows());
    require_finite(file, "bert.pooler.dense.weight", h.pooler_W);
    require_finite(file, "bert.pooler.dense.bias", h.pooler_b);
    require_finite(file, "classifier.weight", h.classifier_W);
    require_finite(file, "classifier.bias", h.classifier_b);
  } else {
    h.kind = TaskHeadKind::language_model;
    h.ln_g = vector(f, "transformer.ln_f.weight", d);
    h.ln_b = vector(f, "transformer.ln_f.bias", d);
    h.ln_eps = model.arch().ln_eps;
    const std::string e = f.find("lm_head.weight") != nullptr ? "lm_head.weight" : "transformer.wte.weight";
    h.embedding = matrix(f, e, -1, d);
    require_finite(file, "transformer.ln_f.weight", h.ln_g);
    require_finite(file, "transformer.ln_f.bias", h.ln_b);
    require_finite(file, e, h.embedding);
  }
  return h;
}

}  // namespace sanpath

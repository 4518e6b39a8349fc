// Task heads of HuggingFace checkpoints, read with the safetensors reader
// from the same file as the stack (checkpoint.cpp reads the stack).
#include "sanpath/io/task_head.hpp"

#include "sanpath/io/safetensors.hpp"
#include "hf_config.hpp"

#include <filesystem>
#include <stdexcept>
#include <vector>

namespace sanpath {

namespace {

namespace fs = std::filesystem;

using io::fail;

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

/// A language-model head LN_f then E (task_head.hpp): the final LayerNorm's
/// tensors and the embedding candidates, first found first.
struct LmHeadNames {
  const char* ln;  ///< LN_f's name, without ".weight" / ".bias"
  std::vector<const char*> embedding;
  const char* refused = nullptr;  ///< a tensor whose presence puts another map in the head
};

const std::vector<LmHeadNames>& lm_heads() {
  static const std::vector<LmHeadNames> all = {
      {"transformer.ln_f", {"lm_head.weight", "transformer.wte.weight"}},                    // GPT-2
      {"gpt_neox.final_layer_norm", {"embed_out.weight"}},                                   // GPT-NeoX
      {"final_layer_norm", {"embed_out.weight"}},                                            // GPT-NeoX, bare
      {"model.decoder.final_layer_norm", {"lm_head.weight", "model.decoder.embed_tokens.weight"},
       "model.decoder.project_out.weight"},                                                  // OPT
      {"decoder.final_layer_norm", {"lm_head.weight", "decoder.embed_tokens.weight"}, "decoder.project_out.weight"}};
  return all;
}

}  // namespace

std::optional<TaskHead> read_task_head(const std::string& path, const Model& model) {
  std::string file = path;
  if (fs::is_directory(path)) file = (fs::path(path) / "model.safetensors").string();
  const SafetensorsFile f = SafetensorsFile::read(file);
  const long d = model.arch().d_model;
  // ViTForImageClassification's classifier (after vit.layernorm, on CLS) is not the BERT head: not read.
  const bool vit = model.embeddings() && model.embeddings()->pixels();
  const bool classifier = !vit && f.find("classifier.weight") != nullptr;
  const LmHeadNames* names = nullptr;
  // Only LayerNorm models: an RMSNorm family's final norm is not this head's LN_f.
  if (model.arch().norm == NormKind::layer)
    for (const LmHeadNames& n : lm_heads())
      if (!names && f.find(std::string(n.ln) + ".weight") != nullptr) names = &n;
  const bool lm = names != nullptr;
  if (!classifier && !lm) return std::nullopt;
  if (classifier && lm)
    fail(file, "classifier.weight", std::string("the file also holds ") + names->ln + " (two task heads)");
  // OPT with word_embed_proj_dim != hidden_size: its head maps through project_out, which TaskHead does not hold.
  if (lm && names->refused && f.find(names->refused)) return std::nullopt;
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
    const std::string ln = names->ln;
    h.ln_g = vector(f, ln + ".weight", d);
    h.ln_b = vector(f, ln + ".bias", d);
    h.ln_eps = model.arch().ln_eps;
    std::string e = names->embedding.back();
    for (const char* candidate : names->embedding)
      if (f.find(candidate) != nullptr) {
        e = candidate;
        break;
      }
    h.embedding = matrix(f, e, -1, d);
    require_finite(file, ln + ".weight", h.ln_g);
    require_finite(file, ln + ".bias", h.ln_b);
    require_finite(file, e, h.embedding);
  }
  return h;
}

}  // namespace sanpath

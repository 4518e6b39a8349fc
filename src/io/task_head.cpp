// Task heads of HuggingFace checkpoints (families.md names each family's),
// read from the same tensors as the stack (one file or its shards), only the
// head's tensors decoded; config.json says whether the LM head is tied,
// Gemma 2's final soft cap and, where the file holds no pooler, whose
// sequence classifier to look for.
#include "sanpath/io/task_head.hpp"

#include "sanpath/io/tensor_store.hpp"
#include "hf_config.hpp"

#include <filesystem>
#include <initializer_list>
#include <stdexcept>
#include <vector>

namespace sanpath {

namespace {

namespace fs = std::filesystem;

using io::fail;

/// The checkpoint's tensors and its config.json (null when it has none).
struct Checkpoint {
  TensorStore f;
  io::HfConfig config;
  bool has_config = false;
};

bool is_index(const std::string& path) {
  const std::string suffix = ".index.json";
  return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// A folder (model.safetensors or its index), a safetensors file or an index, as load_model reads them.
Checkpoint open_checkpoint(const std::string& path) {
  std::string weights = path;
  fs::path folder = fs::path(path).parent_path();
  if (fs::is_directory(path)) {
    folder = path;
    weights = (folder / "model.safetensors").string();
    if (!fs::exists(weights) && fs::exists(folder / "model.safetensors.index.json"))
      weights = (folder / "model.safetensors.index.json").string();
  }
  Checkpoint c{is_index(weights) ? TensorStore::sharded(weights) : TensorStore::single(weights), {}, false};
  const fs::path config = folder / "config.json";
  if (fs::exists(config)) {
    c.config = io::HfConfig{config.string(), io::read_json_file(config.string())};
    c.has_config = true;
  }
  return c;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Reads the head's tensors, each decoded alone and tested finite (errors "<file>: <tensor>: <why>").
struct Reader {
  const TensorStore& f;

  bool has(const std::string& name) const { return f.find(name) != nullptr; }
  /// The first of `names` the file holds, or "".
  std::string first(std::initializer_list<std::string> names) const {
    for (const std::string& n : names)
      if (has(n)) return n;
    return "";
  }
  const TensorInfo& at(const std::string& name) const {
    const TensorInfo* t = f.find(name);
    if (t == nullptr) fail(f.path(), name, "missing (the rest of the task head is in the file)");
    return *t;
  }
  std::vector<double> values(const TensorInfo& t) const {
    std::vector<double> v(static_cast<std::size_t>(t.numel()));
    f.file_of(t).decode_finite(t, 0, v.size(), v.data());
    return v;
  }
  /// `name` as a matrix of rows × cols (rows < 0: any number ≥ 1).
  Eigen::MatrixXd matrix(const std::string& name, long rows, long cols) const {
    const TensorInfo& t = at(name);
    if (t.shape.size() != 2 || (rows >= 0 && t.shape[0] != rows) || t.shape[1] != cols || t.shape[0] < 1)
      fail(f.path(), name,
           "shape " + shape_text(t.shape) + ", expected [" + (rows >= 0 ? std::to_string(rows) : "N") + ", " +
               std::to_string(cols) + "]");
    const std::vector<double> v = values(t);
    Eigen::MatrixXd m(t.shape[0], t.shape[1]);
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) m(i, j) = v[static_cast<std::size_t>(i * m.cols() + j)];
    return m;
  }
  Eigen::VectorXd vector(const std::string& name, long size) const {
    const TensorInfo& t = at(name);
    if (t.shape.size() != 1 || t.shape[0] != size)
      fail(f.path(), name, "shape " + shape_text(t.shape) + ", expected [" + std::to_string(size) + "]");
    const std::vector<double> v = values(t);
    return Eigen::Map<const Eigen::VectorXd>(v.data(), size);
  }
};

/// The final norm `name` (".weight", and ".bias" for a LayerNorm) of width d; the model's eps and gain form.
void read_norm(const Reader& r, const std::string& name, NormKind kind, const Model& model, TaskHead& h) {
  const long d = model.arch().d_model;
  h.norm = kind;
  h.norm_g = r.vector(name + ".weight", d);
  h.norm_b = kind == NormKind::layer ? r.vector(name + ".bias", d) : Eigen::VectorXd(Eigen::VectorXd::Zero(d));
  h.norm_eps = model.arch().ln_eps;
  h.norm_unit_offset = kind == NormKind::rms && model.arch().norm_unit_offset;
}

/// config.json's tie_word_embeddings (HuggingFace's default for the model type when absent).
bool tied(const Checkpoint& c, bool fallback) { return c.has_config ? c.config.bool_or("tie_word_embeddings", fallback) : fallback; }

std::string model_type(const Checkpoint& c) { return c.has_config ? c.config.string_or("model_type", "") : ""; }

/// The output map: `stored` if the file holds it, else the first of `tables` when the head is tied; "" when neither.
std::string output_name(const Reader& r, const std::string& stored, std::initializer_list<std::string> tables,
                        bool tie) {
  if (r.has(stored)) return stored;
  return tie ? r.first(tables) : "";
}

/// A sequence classifier of the BERT family (families.md): on the first row the pooler map `pooler` and its
/// activation, then `output`, both torch Linear layers with their biases.
struct SequenceClassifier {
  const char* model_type;
  std::string pooler;
  PoolerActivation activation;
  std::string output;
};

const std::vector<SequenceClassifier>& sequence_classifiers() {
  static const std::vector<SequenceClassifier> all{
      {"bert", "bert.pooler.dense", PoolerActivation::tanh, "classifier"},
      {"roberta", "classifier.dense", PoolerActivation::tanh, "classifier.out_proj"},
      {"distilbert", "pre_classifier", PoolerActivation::relu, "classifier"},
      {"albert", "albert.pooler", PoolerActivation::tanh, "classifier"}};
  return all;
}

/// The classifier whose pooler the file holds, else the one of config.json's model_type, else BERT's (whose
/// missing tensors the error then names).
const SequenceClassifier& sequence_classifier(const Reader& r, const std::string& type) {
  const std::vector<SequenceClassifier>& all = sequence_classifiers();
  for (const SequenceClassifier& s : all)
    if (r.has(s.pooler + ".weight")) return s;
  for (const SequenceClassifier& s : all)
    if (type == s.model_type) return s;
  return all.front();
}

}  // namespace

std::optional<TaskHead> read_task_head(const std::string& path, const Model& model) {
  const Checkpoint c = open_checkpoint(path);
  const Reader r{c.f};
  const std::string& file = c.f.path();
  const long d = model.arch().d_model;
  const bool pixels = model.embeddings() && model.embeddings()->pixels();
  TaskHead h;
  std::string out, bias;
  if (r.has("classifier.weight") && pixels) {
    // ViTForImageClassification: vit.layernorm on every row, the classifier on CLS (row 0).
    h.kind = TaskHeadKind::classifier;
    const std::string ln = r.first({"vit.layernorm.weight", "layernorm.weight"});
    if (ln.empty()) fail(file, "vit.layernorm.weight", "missing (the file holds classifier.weight)");
    read_norm(r, ln.substr(0, ln.size() - 7), NormKind::layer, model, h);
    out = "classifier.weight";
    bias = "classifier.bias";
  } else if (const std::string cls =
                 r.first({"classifier.weight", "classifier.out_proj.weight", "classifier.dense.weight"});
             !cls.empty()) {
    // The BERT family for sequence classification: the pooler map and its activation on the first token, then
    // the classifier.
    h.kind = TaskHeadKind::classifier;
    for (const char* lm : {"transformer.ln_f.weight", "lm_loss.bias", "model.norm.weight"})
      if (r.has(lm)) fail(file, cls, std::string("the file also holds ") + lm + " (two task heads)");
    const SequenceClassifier& s = sequence_classifier(r, model_type(c));
    h.pooler_W = r.matrix(s.pooler + ".weight", d, d);
    h.pooler_b = r.vector(s.pooler + ".bias", d);
    h.pooler_activation = s.activation;
    out = s.output + ".weight";
    bias = s.output + ".bias";
  } else if (r.has("lm_loss.bias")) {
    // XLNet's lm_loss: the word table (tied; lm_loss.weight where stored) and its bias, no norm.
    h.kind = TaskHeadKind::language_model;
    out = r.first({"lm_loss.weight", "transformer.word_embedding.weight", "word_embedding.weight"});
    if (out.empty()) fail(file, "transformer.word_embedding.weight", "missing (the LM head lm_loss is tied to it)");
    bias = "lm_loss.bias";
  } else if (r.has("transformer.ln_f.weight")) {  // GPT-2
    h.kind = TaskHeadKind::language_model;
    read_norm(r, "transformer.ln_f", NormKind::layer, model, h);
    out = output_name(r, "lm_head.weight", {"transformer.wte.weight"}, true);
  } else if (const std::string neox = r.first({"gpt_neox.final_layer_norm.weight", "final_layer_norm.weight"});
             !neox.empty()) {  // GPT-NeoX
    h.kind = TaskHeadKind::language_model;
    read_norm(r, neox.substr(0, neox.size() - 7), NormKind::layer, model, h);
    out = "embed_out.weight";
    if (!r.has(out)) return std::nullopt;  // GPTNeoXModel: no head
  } else if (const std::string opt = r.first({"model.decoder.embed_positions.weight", "decoder.embed_positions.weight"});
             !opt.empty()) {
    // OPT: LN_f (absent in post-norm files), then project_out where stored, then the (tied) token table.
    h.kind = TaskHeadKind::language_model;
    const std::string p = opt.substr(0, opt.size() - std::string("embed_positions.weight").size());
    if (r.has(p + "final_layer_norm.weight")) read_norm(r, p + "final_layer_norm", NormKind::layer, model, h);
    out = output_name(r, "lm_head.weight", {p + "embed_tokens.weight"}, tied(c, true));
    if (out.empty()) return std::nullopt;
    if (r.has(p + "project_out.weight")) {
      const TensorInfo& t = r.at(p + "project_out.weight");
      h.project_out = r.matrix(p + "project_out.weight", t.shape.empty() ? 1 : t.shape[0], d);
    }
  } else if (const std::string phi = r.first({"model.final_layernorm.weight", "final_layernorm.weight"});
             !phi.empty()) {  // Phi: LN_f, lm_head with its bias
    h.kind = TaskHeadKind::language_model;
    read_norm(r, phi.substr(0, phi.size() - 7), NormKind::layer, model, h);
    out = output_name(r, "lm_head.weight", {"model.embed_tokens.weight", "embed_tokens.weight"}, tied(c, false));
    if (out.empty()) return std::nullopt;
    if (r.has("lm_head.bias")) bias = "lm_head.bias";
  } else if (const std::string norm = r.first({"model.norm.weight", "norm.weight", "language_model.model.norm.weight",
                                               "model.language_model.norm.weight"});
             !norm.empty() && model.arch().norm == NormKind::rms) {
    // The Llama family, Qwen3 and the Gemmas: the final norm (RMSNorm; the Gemmas' gain 1 + w), then
    // lm_head or the tied token table as stored (the Gemmas' without the input's √d); Gemma 2 caps the
    // logits (final_logit_softcapping, 30 when absent), Gemma 3 where its config sets the cap. A
    // multimodal gemma3 file's language model sits under language_model.model. or model.language_model.
    h.kind = TaskHeadKind::language_model;
    const std::string prefix = norm.substr(0, norm.size() - std::string("norm.weight").size());
    read_norm(r, prefix + "norm", NormKind::rms, model, h);
    const std::string type = model_type(c);
    const bool gemma3 = type == "gemma3_text" || type == "gemma3";
    const io::HfConfig config = type == "gemma3" && c.config.j.contains("text_config")
                                ? io::HfConfig{c.config.path + ": text_config", c.config.j.at("text_config")}
                                : c.config;
    const bool tie = c.has_config ? config.bool_or("tie_word_embeddings", type == "gemma" || type == "gemma2" || gemma3)
                                  : false;
    const std::string stored = r.first({"lm_head.weight", "language_model.lm_head.weight"});
    out = output_name(r, stored.empty() ? "lm_head.weight" : stored, {prefix + "embed_tokens.weight"}, tie);
    if (out.empty()) return std::nullopt;
    const std::string key = "final_logit_softcapping";
    const bool null = config.j.contains(key) && config.j.at(key).is_null();
    if (type == "gemma2" && !null) h.softcap = config.positive_number_or(key, 30.0);
    if (gemma3 && config.j.contains(key) && !null) h.softcap = config.positive_number_or(key, 30.0);
  } else {
    return std::nullopt;
  }
  h.output_W = r.matrix(out, -1, h.project_out.size() > 0 ? static_cast<long>(h.project_out.rows()) : d);
  if (!bias.empty()) h.output_b = r.vector(bias, static_cast<long>(h.output_W.rows()));
  return h;
}

TaskHeadAbsence task_head_absence(const Model& model) {
  return model.embeddings() && model.embeddings()->kind == Layout::t5 ? TaskHeadAbsence::reads_decoder
                                                                         : TaskHeadAbsence::not_read;
}

}  // namespace sanpath

#pragma once
/// \file task_head.hpp
/// The task head a checkpoint puts after its analysed stack (math.md §2:
/// outside the stack), applied to the stack's output X (n×d) to read off
/// what the network predicts:
///
/// - classifier (BERT for sequence classification): the pooler on the first
///   token, \f$ z = \tanh(W_p x_0 + b_p) \f$, then logits \f$ W_c z + b_c \f$;
///   one prediction (C classes) per input sequence;
/// - language model (GPT-2): the final LayerNorm of every row, then the
///   logits \f$ E\,\mathrm{LN}_f(x_i) \f$ with E the (tied) token embedding;
///   one next-token prediction (V tokens) per position.

#include <Eigen/Core>

#include <string>

namespace sanpath {

enum class TaskHeadKind { classifier, language_model };

/// "classifier" / "language model".
std::string to_string(TaskHeadKind kind);

/// Weights in double, stored as torch Linear weights ([out, in]).
struct TaskHead {
  TaskHeadKind kind = TaskHeadKind::classifier;
  // classifier: W_p d×d, b_p d, W_c C×d, b_c C
  Eigen::MatrixXd pooler_W, classifier_W;
  Eigen::VectorXd pooler_b, classifier_b;
  // language model: LN_f gain and bias (d), eps, E V×d
  Eigen::VectorXd ln_g, ln_b;
  double ln_eps = 1e-5;
  Eigen::MatrixXd embedding;
  /// Number of classes C or vocabulary size V.
  long outputs() const { return kind == TaskHeadKind::classifier ? classifier_W.rows() : embedding.rows(); }
};

}  // namespace sanpath

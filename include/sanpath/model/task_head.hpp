#pragma once
/// \file task_head.hpp
/// The task head a checkpoint puts after its analysed stack (math.md §2:
/// outside the stack), applied to the stack's output X (n×d) to read off
/// what the network predicts. A head is a chain of maps, each present or
/// not (families.md names each family's), applied to each row it reads:
///
///   \f$ z = \mathrm{cap}\big(W\,P\,\mathrm{pool}(\mathrm{N}(x)) + b\big) \f$
///
/// - the rows: a classifier reads the first row (the BERT family's first
///   token, ViT's CLS), one prediction of C classes per input; a language
///   model reads every row, one next-token prediction of V tokens per
///   position;
/// - N, the final norm: LayerNorm (GPT-2's ln_f, ViT's layernorm) or RMSNorm
///   (the Llama family's and Gemma's model.norm, with gain 1 + w for Gemma);
/// - pool, a dense map and its activation \f$ a(W_p x + b_p) \f$, a = tanh
///   (BERT's and ALBERT's pooler, RoBERTa's `classifier.dense`) or ReLU
///   (DistilBERT's `pre_classifier`);
/// - P, OPT's project_out (e×d, no bias);
/// - W (C×e or V×e) and its bias b: the classifier, or the LM head (the tied
///   token table where the file stores none, as stored: Gemma's without the
///   input's √d), with XLNet's lm_loss and Phi's lm_head biases;
/// - cap, the final logit soft cap \f$ c\tanh(z/c) \f$ (Gemma 2).

#include "sanpath/model/model.hpp"

#include <Eigen/Core>

#include <optional>
#include <string>

namespace sanpath {

enum class TaskHeadKind { classifier, language_model };

/// "classifier" / "language model".
std::string to_string(TaskHeadKind kind);

/// The activation of the pooler map: tanh or ReLU max(0, x).
enum class PoolerActivation { tanh, relu };

/// Why a checkpoint gives no task head to apply.
enum class TaskHeadAbsence {
  not_read,       ///< no head sanpath reads in the file (a bare stack, a native file, a model cut to its first layers)
  reads_decoder,  ///< the stack is the encoder of an encoder–decoder model (T5): its LM head reads the decoder's output
  declined,       ///< the caller asked for no head (Python's head=False)
};

/// Weights in double, stored as torch Linear weights ([out, in]). A map whose
/// matrix (or gain) is empty is absent.
struct TaskHead {
  TaskHeadKind kind = TaskHeadKind::classifier;
  /// The final norm N of each row read: gain and bias (d; the bias 0 for an
  /// RMSNorm), LayerNorm or RMSNorm, gain 1 + g with `norm_unit_offset`.
  Eigen::VectorXd norm_g, norm_b;
  NormKind norm = NormKind::layer;
  bool norm_unit_offset = false;
  double norm_eps = 1e-5;
  /// The pooler: W_p d×d, b_p d, and its activation.
  Eigen::MatrixXd pooler_W;
  Eigen::VectorXd pooler_b;
  PoolerActivation pooler_activation = PoolerActivation::tanh;
  /// OPT's project_out: e×d.
  Eigen::MatrixXd project_out;
  /// The classifier or LM head W (C×e or V×e), always present, and its bias (C or V; empty: none).
  Eigen::MatrixXd output_W;
  Eigen::VectorXd output_b;
  /// The final logit soft cap c > 0 (Gemma 2's final_logit_softcapping).
  std::optional<double> softcap;

  /// Number of classes C or vocabulary size V.
  long outputs() const { return static_cast<long>(output_W.rows()); }
  /// The width d of the rows the head reads.
  long width() const;
  /// Throws std::invalid_argument naming the first map whose shape does not
  /// chain with the others', or a soft cap that is not finite and > 0.
  void check() const;
};

}  // namespace sanpath

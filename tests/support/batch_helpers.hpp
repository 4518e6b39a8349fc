#pragma once
// Helpers of the batch tests (tests/analysis/test_batch.cpp,
// test_effectiveness_batch.cpp, test_serialize.cpp).

#include "sanpath/core/quantity.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/model/task_head.hpp"

#include <Eigen/Core>

#include <cstdint>
#include <optional>
#include <vector>

namespace sanpath::test {

/// A value with a stated number of confirmed digits.
inline Quantity with_digits(double v, int digits) {
  Quantity q = Quantity::unconfirmed(BigReal(v, 40));
  q.digits = digits;
  return q;
}

/// Random inputs of the given lengths, input i drawn with seed first_seed + i.
inline std::vector<InputSpec> inputs_of_lengths(const std::vector<int>& ns, std::uint64_t first_seed) {
  std::vector<InputSpec> out;
  for (std::size_t i = 0; i < ns.size(); ++i) {
    RandomInputSpec r;
    r.n = ns[i];
    r.seed = first_seed + i;
    out.push_back(InputSpec::from_random(r));
  }
  return out;
}

/// A deterministic pseudo-random matrix (entries in [-1, 1]).
inline Eigen::MatrixXd draw(long rows, long cols, std::uint64_t seed) {
  Rng rng(seed);
  Eigen::MatrixXd m(rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) m(i, j) = 2 * rng.uniform() - 1;
  return m;
}

/// A language-model head of width d over `vocab` tokens (seeds 1–3).
inline TaskHead lm_head(long d, long vocab) {
  TaskHead h;
  h.kind = TaskHeadKind::language_model;
  h.norm_g = draw(d, 1, 1);
  h.norm_b = draw(d, 1, 2);
  h.output_W = 3 * draw(vocab, d, 3);
  return h;
}

/// A pooler and classifier head of width d over `classes` classes (seeds 4–7).
inline TaskHead classifier_head(long d, long classes) {
  TaskHead h;
  h.kind = TaskHeadKind::classifier;
  h.pooler_W = draw(d, d, 4);
  h.pooler_b = draw(d, 1, 5);
  h.output_W = 3 * draw(classes, d, 6);
  h.output_b = draw(classes, 1, 7);
  return h;
}

/// The Llama family's LM head (RMSNorm), Gemma's with gain 1 + w (`unit_offset`), Gemma 2's with a final soft cap.
inline TaskHead rms_lm_head(long d, long vocab, bool unit_offset, std::optional<double> softcap = std::nullopt) {
  TaskHead h = lm_head(d, vocab);
  h.norm = NormKind::rms;
  h.norm_b = Eigen::VectorXd::Zero(d);
  h.norm_unit_offset = unit_offset;
  h.softcap = softcap;
  return h;
}

/// OPT's LM head: LN_f, project_out (e × d), the token table (vocab × e) (seeds 1–3, 8).
inline TaskHead projected_lm_head(long d, long e, long vocab) {
  TaskHead h = lm_head(e, vocab);
  h.norm_g = draw(d, 1, 1);
  h.norm_b = draw(d, 1, 2);
  h.project_out = draw(e, d, 8);
  return h;
}

/// XLNet's LM head: no norm, the table and its bias (seeds 3, 9).
inline TaskHead biased_lm_head(long d, long vocab) {
  TaskHead h = lm_head(d, vocab);
  h.norm_g.resize(0);
  h.norm_b.resize(0);
  h.output_b = draw(vocab, 1, 9);
  return h;
}

/// ViT's classifier: LayerNorm, then the classifier with its bias on the first row (seeds 1, 2, 6, 7).
inline TaskHead normed_classifier_head(long d, long classes) {
  TaskHead h = classifier_head(d, classes);
  h.pooler_W.resize(0, 0);
  h.pooler_b.resize(0);
  h.norm_g = draw(d, 1, 1);
  h.norm_b = draw(d, 1, 2);
  return h;
}

}  // namespace sanpath::test

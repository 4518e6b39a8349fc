#pragma once
// Helpers of the batch tests (tests/analysis/test_batch.cpp,
// test_effectiveness_batch.cpp, test_serialize.cpp).

#include "sanpath/core/quantity.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/model/task_head.hpp"

#include <Eigen/Core>

#include <cstdint>
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
  h.ln_g = draw(d, 1, 1);
  h.ln_b = draw(d, 1, 2);
  h.embedding = 3 * draw(vocab, d, 3);
  return h;
}

/// A pooler and classifier head of width d over `classes` classes (seeds 4–7).
inline TaskHead classifier_head(long d, long classes) {
  TaskHead h;
  h.kind = TaskHeadKind::classifier;
  h.pooler_W = draw(d, d, 4);
  h.pooler_b = draw(d, 1, 5);
  h.classifier_W = 3 * draw(classes, d, 6);
  h.classifier_b = draw(classes, 1, 7);
  return h;
}

}  // namespace sanpath::test

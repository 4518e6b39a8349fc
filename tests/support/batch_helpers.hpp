#pragma once
// Helpers of the batch tests (tests/analysis/test_batch.cpp,
// test_effectiveness_batch.cpp).

#include "sanpath/core/quantity.hpp"
#include "sanpath/model/input.hpp"

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

}  // namespace sanpath::test

// T5's relative position buckets in exact integer arithmetic (families.md,
// T5 encoder): HuggingFace takes a float32 logarithm and truncates, which
// lands one bucket off at some (buckets, max_distance) pairs; the integer
// comparison below is the contract.
#include "sanpath/compute/forward.hpp"

#include <boost/multiprecision/cpp_int.hpp>

#include <stdexcept>
#include <string>

namespace sanpath {

int t5_bucket(long delta, int buckets, int max_distance) {
  using boost::multiprecision::cpp_int;
  const int nb = buckets / 2;  // bidirectional: half the buckets for keys after the query
  const int me = nb / 2;       // exact buckets
  if (me < 1)
    throw std::invalid_argument("relative_attention_num_buckets: " + std::to_string(buckets) +
                                " leaves no exact bucket (needs at least 4)");
  if (max_distance <= me)
    throw std::invalid_argument("relative_attention_max_distance: " + std::to_string(max_distance) +
                                " must exceed the exact buckets " + std::to_string(me));
  const int offset = delta > 0 ? nb : 0;
  const long a = delta < 0 ? -delta : delta;
  if (a < me) return offset + static_cast<int>(a);
  // k = the largest integer with a^(nb−me)·me^k ≥ md^k·me^(nb−me); the bucket
  // is min(nb − 1, me + k), so k is searched up to nb − 1 − me.
  const unsigned span = static_cast<unsigned>(nb - me);
  const cpp_int lhs_base = cpp_int(a), me_i = cpp_int(me), md_i = cpp_int(max_distance);
  const cpp_int a_pow = pow(lhs_base, span), me_pow = pow(me_i, span);
  int k = 0;
  const int k_max = nb - 1 - me;
  cpp_int me_k = me_i, md_k = md_i;  // me^(k+1), md^(k+1)
  while (k < k_max && a_pow * me_k >= md_k * me_pow) {
    ++k;
    me_k *= me_i;
    md_k *= md_i;
  }
  return offset + me + k;
}

}  // namespace sanpath

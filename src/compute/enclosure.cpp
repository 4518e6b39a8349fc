#include "sanpath/compute/enclosure.hpp"
#include "sanpath/compute/enclosure_centred.hpp"
#include "sanpath/compute/forward_centred.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace sanpath {

void check_enclosure_supports(const Model& model, const Variant& variant) {
  const Architecture& a = model.arch();
  auto refuse = [&](const std::string& part) {
    throw std::invalid_argument(model.source() + ": certified enclosures: " + part +
                                " is not supported yet (math.md §10)");
  };
  (void)variant;
  if (a.rope_theta) refuse("rotary position embedding");
  if (a.xlnet_relative) refuse("XLNet's relative attention");
  if (a.rel_buckets > 0) refuse("T5's relative position bias");
  if (a.softcap) refuse("attention soft-capping");
}

void check_centred_enclosure_supports(const Model& model, const Variant& variant) {
  check_enclosure_supports(model, variant);
  if (!centred_pass_supports(model.arch())) throw std::invalid_argument(centred_pass_refusal(model.source()));
}

}  // namespace sanpath

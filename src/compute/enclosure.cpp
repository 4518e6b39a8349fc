#include "sanpath/compute/enclosure_centred.hpp"
#include "sanpath/compute/forward_centred.hpp"

#include <stdexcept>

namespace sanpath {

void check_centred_enclosure_supports(const Model& model, const Variant& variant) {
  (void)variant;
  if (!centred_pass_supports(model.arch())) throw std::invalid_argument(centred_pass_refusal(model.source()));
}

}  // namespace sanpath

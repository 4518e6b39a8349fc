#include "sanpath/compute/enclosure_centred.hpp"
#include "sanpath/compute/forward_centred.hpp"

#include <stdexcept>

namespace sanpath {

void check_centred_enclosure_supports(const Model& model, const Variant& variant) {
  (void)variant;
  if (!centred_enclosure_supports(model.arch()))
    throw std::invalid_argument(model.source() + ": method: the enclosed centred pass (certified digits) covers "
                                "math.md §1's attention with LayerNorm only, not rotary embeddings, RMSNorm, a gated "
                                "MLP, parallel blocks, soft-capped or position-biased logits (the Llama family, "
                                "XLNet, T5, GPT-NeoX, Phi, Gemma); certified digits there come from the direct ball "
                                "pass (--method direct)");
}

}  // namespace sanpath

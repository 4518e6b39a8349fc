#include "sanpath/compute/enclosure_centred.hpp"
#include "sanpath/compute/forward_centred.hpp"

#include <stdexcept>

namespace sanpath {

void check_centred_enclosure_supports(const Model& model, const Variant& variant) {
  if (!centred_enclosure_supports(model.arch(), variant))
    throw std::invalid_argument(model.source() + ": method: the enclosed centred pass (certified digits) does not "
                                "cover a gated MLP (SwiGLU, GeGLU, T5's gated-gelu); certified digits there come from the "
                                "direct ball pass (--method direct), or run the variant without the MLP (--mlp none)");
}

}  // namespace sanpath

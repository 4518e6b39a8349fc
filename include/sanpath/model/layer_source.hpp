#pragma once
/// \file layer_source.hpp
/// Where the layers of a streamed Model come from (model.hpp): a checkpoint
/// kept open, read one layer at a time when a pass needs it, for models
/// whose weights as doubles do not fit in memory (a Llama-7B is 49 GiB).

#include "sanpath/model/model.hpp"

namespace sanpath {

class LayerSource {
 public:
  virtual ~LayerSource() = default;
  /// Fills `w` with layer l, 0 ≤ l < the model's layer count, reusing the
  /// storage `w` already has. Every weight is tested for NaN/Inf as it is
  /// read; bad or missing data throws std::invalid_argument naming the file
  /// and the tensor. Called from several threads at once, for different `w`.
  /// With LayerForm::mapped a source may give the large matrices as views
  /// (LayerWeights::mapped, each one it gives left empty in `w`); a source
  /// that cannot decodes them and sets `w.mapped` to null.
  virtual void read(int l, LayerWeights& w, LayerForm form) const = 0;
};

}  // namespace sanpath

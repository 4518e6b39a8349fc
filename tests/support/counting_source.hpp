#pragma once
// A streamed copy of a resident model whose layer reads are counted, for
// tests of what reads a streamed model's layers and how often.
#include "sanpath/model/layer_source.hpp"

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>

namespace sanpath::test {

/// Hands out the layers of a resident model (decoded, whatever form is
/// asked), counting the reads; throws std::invalid_argument "layers.<bad>:
/// bad data" when asked for layer `bad`.
class CountingSource : public LayerSource {
 public:
  explicit CountingSource(const Model& whole, int bad = -1) : whole_(whole), bad_(bad) {}
  void read(int l, LayerWeights& w, LayerForm) const override {
    ++reads;
    if (l == bad_) throw std::invalid_argument("layers." + std::to_string(l) + ": bad data");
    w = whole_.layer(l);
  }
  mutable std::atomic<int> reads{0};

 private:
  const Model& whole_;
  int bad_;
};

/// `whole` (resident, with MLP and LayerNorm weights) as a streamed model
/// reading its layers from `source`.
inline Model streamed_copy(const Model& whole, const std::shared_ptr<const LayerSource>& source) {
  return Model(whole.arch(), source, LayerParts{true, true}, whole.embeddings(), "streamed");
}

}  // namespace sanpath::test

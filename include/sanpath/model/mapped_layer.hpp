#pragma once
/// \file mapped_layer.hpp
/// A streamed layer's large matrices read where they lie: views of the
/// stored floats of a mapped checkpoint (core/weight_view.hpp) in the form
/// the forward pass multiplies by, every head side by side, instead of
/// copies in doubles. A double pass asks for them (LayerForm::mapped); its
/// products pack their panels straight from the file's bytes and give the
/// same bits as from the decoded matrices.

#include "sanpath/core/weight_view.hpp"

#include <Eigen/Core>

#include <cstdint>
#include <memory>
#include <vector>

namespace sanpath {

/// One matrix of a mapped layer: entry (i, j) at base + row_offsets[i] +
/// col_offsets[j] (WeightView). Absent (base null) when the source could
/// not express it as a view; the layer then holds it decoded.
struct MappedMatrix {
  const unsigned char* base = nullptr;
  StoredFloat type = StoredFloat::f64;
  std::vector<std::int64_t> row_offsets, col_offsets;

  bool present() const { return base != nullptr; }
  Eigen::Index rows() const { return static_cast<Eigen::Index>(row_offsets.size()); }
  Eigen::Index cols() const { return static_cast<Eigen::Index>(col_offsets.size()); }
  WeightView view() const { return {base, type, row_offsets.data(), col_offsets.data(), rows(), cols()}; }
};

/// The matrices of a layer as views, in the forward pass's packed form
/// (compute/: every head's projections side by side): WQ, WK d×(H·d_qk), WV
/// d×(H·d_v) (a key/value head shared by a group of query heads appears
/// once per query head, at the same offsets), WO (H·d_v)×d, WR d×(H·d_qk)
/// (XLNet), W1, Wgate d×d_ff, W2 d_ff×d. `hold` keeps the mapping alive for
/// as long as the views are used and gives the pages back when dropped.
struct MappedLayer {
  MappedMatrix WQ, WK, WV, WO, WR, W1, W2, Wgate;
  std::shared_ptr<const void> hold;
};

}  // namespace sanpath

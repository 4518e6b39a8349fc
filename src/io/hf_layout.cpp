#include "hf_layout.hpp"

#include "sanpath/core/linalg.hpp"  // run_at_once, product_threads
#include "sanpath/core/resources.hpp"
#include "sanpath/io/atomic_file.hpp"
#include "sanpath/model/layer_source.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <numeric>
#include <mutex>
#include <optional>
#include <set>
#include <sys/mman.h>
#include <unistd.h>

namespace sanpath::io {

// ---- building the table -------------------------------------------------------

Slot& Slots::add(const std::string& key, Shape shape, std::string alias) {
  list.push_back(Slot{key, std::move(shape), {}, std::move(alias)});
  return list.back();
}

namespace {

Piece whole_vector(VectorXd& v, std::int64_t n) { return Piece{nullptr, &v, TensorBlock{0, 1, 0, n, true}}; }

LayerWeights& with_heads(LayerWeights& w, const Dims& k) {
  if (w.heads.size() != static_cast<std::size_t>(k.heads)) w.heads.resize(static_cast<std::size_t>(k.heads));
  return w;
}

}  // namespace

void Slots::dense(const std::string& key, Storage s, MatrixXd& W, VectorXd& b, std::int64_t in, std::int64_t out) {
  if (s == Storage::linear)
    add(key + ".weight", {out, in}).pieces.push_back({&W, nullptr, TensorBlock{0, out, 0, in, true}});
  else
    add(key + ".weight", {in, out}).pieces.push_back({&W, nullptr, TensorBlock{0, in, 0, out, false}});
  add(key + ".bias", {out}).pieces.push_back(whole_vector(b, out));
}

void Slots::vector(const std::string& key, VectorXd& v, std::int64_t n) { add(key, {n}).pieces.push_back(whole_vector(v, n)); }

void Slots::layernorm(const std::string& key, VectorXd& g, VectorXd& b, std::int64_t n, bool aliases) {
  add(key + ".weight", {n}, aliases ? key + ".gamma" : "").pieces.push_back(whole_vector(g, n));
  add(key + ".bias", {n}, aliases ? key + ".beta" : "").pieces.push_back(whole_vector(b, n));
}

void Slots::table(const std::string& key, MatrixXd& m, std::int64_t rows, std::int64_t cols, std::int64_t offset) {
  add(key, {rows, cols}).pieces.push_back({&m, nullptr, TensorBlock{offset, kAny, 0, cols, false}});
}

void Slots::heads_in(Slot& W, Slot& b, Storage s, LayerWeights& w, char which, std::int64_t offset, const Dims& k) {
  with_heads(w, k);
  for (int h = 0; h < k.heads; ++h) {
    HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
    MatrixXd& target = which == 'Q' ? hw.W_Q : which == 'K' ? hw.W_K : hw.W_V;
    VectorXd& bias = which == 'Q' ? hw.b_Q : which == 'K' ? hw.b_K : hw.b_V;
    const std::int64_t o = offset + static_cast<std::int64_t>(h) * k.dh;
    // Columns [o, o + dh) of M: rows of a Linear weight, columns of a Conv1D one.
    W.pieces.push_back({&target, nullptr,
                        s == Storage::linear ? TensorBlock{o, k.dh, 0, k.d, true} : TensorBlock{0, k.d, o, k.dh, false}});
    b.pieces.push_back({nullptr, &bias, TensorBlock{0, 1, o, k.dh, true}});
  }
}

void Slots::heads_out(const std::string& key, Storage s, LayerWeights& w, const Dims& k) {
  with_heads(w, k);
  Slot& W = add(key + ".weight", {k.d, k.d});
  for (int h = 0; h < k.heads; ++h) {
    const std::int64_t o = static_cast<std::int64_t>(h) * k.dh;
    // Rows [o, o + dh) of M: columns of a Linear weight, rows of a Conv1D one.
    W.pieces.push_back({&w.heads[static_cast<std::size_t>(h)].W_O, nullptr,
                        s == Storage::linear ? TensorBlock{0, k.d, o, k.dh, true} : TensorBlock{o, k.dh, 0, k.d, false}});
  }
  add(key + ".bias", {k.d}).pieces.push_back(whole_vector(w.b_O, k.d));
}

void Slots::heads_in_linear(const std::string& prefix, const char* const (&names)[3], LayerWeights& w,
                            const Dims& k) {
  const char which[3] = {'Q', 'K', 'V'};
  for (int i = 0; i < 3; ++i) {
    const std::string key = prefix + names[i];
    Slot& W = add(key + ".weight", {k.d, k.d});
    Slot& b = add(key + ".bias", {k.d});
    heads_in(W, b, Storage::linear, w, which[i], 0, k);
  }
}

// ---- config.json -------------------------------------------------------------------

void read_shape(const HfConfig& c, const ShapeKeys& k, Architecture& a) {
  a.layers = c.positive_int(k.layers);
  a.heads = c.positive_int(k.heads);
  a.d_qk = a.d_v = c.head_width(k.d_model, k.heads);
  a.d_model = c.positive_int(k.d_model);
}

json shape_config(const Architecture& a, const ShapeKeys& k, const std::string& architecture,
                  const std::string& model_type) {
  return {{"architectures", {architecture}},
          {"model_type", model_type},
          {k.layers, a.layers},
          {k.heads, a.heads},
          {k.d_model, a.d_model},
          {k.d_ff, a.d_ff},
          {k.activation, hf_activation_name(a.activation)}};
}

// ---- walking it -------------------------------------------------------------------

namespace {

/// Rows and width of a stored tensor seen as a row-major matrix (a vector is
/// one row; a tensor of rank > 2, e.g. XLNet's [d, H, d_h] or ViT's
/// [d, C, p, p], is its first axis by the product of the others).
std::int64_t rows_of(const Shape& s) { return s.size() == 1 ? 1 : s.at(0); }
std::int64_t width_of(const Shape& s) {
  if (s.size() == 1) return s.at(0);
  std::int64_t w = 1;
  for (std::size_t k = 1; k < s.size(); ++k) w *= s[k];
  return w;
}

/// `p`'s block with kAny resolved against the stored shape.
TensorBlock resolve(const Piece& p, const Shape& shape, const std::string& where, const std::string& name) {
  TensorBlock b = p.block;
  if (b.rows == kAny) {
    b.rows = rows_of(shape) - b.row;
    if (b.rows < 1)
      fail(where, name,
           "has " + std::to_string(rows_of(shape)) + " rows; the first one used is row " + std::to_string(b.row));
  }
  return b;
}

/// The prefix in use: `prefix` if any tensor name starts with it, else "".
std::string detect_prefix(const TensorStore& f, const std::string& prefix) {
  for (const TensorInfo* t : f.tensors())
    if (t->name.compare(0, prefix.size(), prefix) == 0) return prefix;
  return "";
}

bool same(const MatrixXd& a, const MatrixXd& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && (a.array() == b.array()).all();
}
bool same(const VectorXd& a, const VectorXd& b) { return a.size() == b.size() && (a.array() == b.array()).all(); }

Dims dims_of(const Architecture& a) { return Dims{a.heads, a.d_model, a.d_qk, a.d_ff}; }

/// Asks the kernel for the pages of fresh storage about to be written
/// (MADV_POPULATE_WRITE, Linux 5.14): one call instead of a page fault per
/// 4 KiB page. Only whole pages inside [data, data + bytes) are touched; where
/// the call is not available the writes fault the pages in as before.
void populate_for_writing(double* data, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto lo = reinterpret_cast<std::uintptr_t>(data), hi = lo + bytes;
  const std::uintptr_t a = (lo + page - 1) / page * page, b = hi / page * page;
  if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)bytes;
#endif
}

/// The rows `ids` of the word table (piece `b` of tensor `t`: whole rows,
/// token i in stored row b.row + i) into e.word, row k holding token
/// e.word_ids[k]; every row of the piece is tested for NaN/Inf on its stored
/// bits first, so that a value anywhere in the table is refused exactly as
/// decoding the whole piece would refuse it.
void read_word_rows(const SafetensorsMap& file, const TensorInfo& t, const TensorBlock& b, std::int64_t width,
                    std::vector<long> ids, Embeddings& e) {
  if (b.transpose || b.col != 0 || b.cols != width) throw std::logic_error("read_word_rows: not a table of whole rows");
  file.check_finite(t, static_cast<std::size_t>(b.row * width), static_cast<std::size_t>(b.rows * width));
  ids.erase(std::remove_if(ids.begin(), ids.end(), [&](long id) { return id < 0 || id >= b.rows; }), ids.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  // Row-major rows, one short run of the file each, then one transpose into the column-major table.
  std::vector<double> rows(ids.size() * static_cast<std::size_t>(width));
  for (std::size_t k = 0; k < ids.size(); ++k)
    file.decode(t, static_cast<std::size_t>((b.row + ids[k]) * width), static_cast<std::size_t>(width),
                rows.data() + k * static_cast<std::size_t>(width));
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  e.word = Eigen::Map<const RowMajor>(rows.data(), static_cast<Eigen::Index>(ids.size()), width);
  e.vocab = static_cast<int>(b.rows);
  e.word_ids = std::move(ids);
}

/// The config.json key of the layer count (the first key naming layers).
const char* const kLayerKeys[] = {"num_hidden_layers", "n_layer", "n_layers"};
std::string layer_key(const HfConfig& c) {
  std::string key = kLayerKeys[0];
  for (const char* candidate : kLayerKeys)
    if (c.has(candidate)) key = candidate;
  return key;
}

}  // namespace

void check_shared_copies(const std::string& where, const std::string& key, int layers, const LayerWeights& w) {
  std::uint64_t doubles = static_cast<std::uint64_t>(w.b_O.size() + w.W_1.size() + w.W_2.size() + w.b_1.size() +
                                                     w.b_2.size() + w.ln1_g.size() + w.ln1_b.size() +
                                                     w.ln2_g.size() + w.ln2_b.size() + w.q_norm.size() +
                                                     w.k_norm.size());
  for (const HeadWeights& h : w.heads)
    doubles += static_cast<std::uint64_t>(h.W_Q.size() + h.W_K.size() + h.W_V.size() + h.W_O.size() + h.b_Q.size() +
                                          h.b_K.size() + h.b_V.size());
  require_memory(mul_sat(static_cast<std::uint64_t>(layers), mul_sat(doubles, 8)), printable(where + ": " + key),
                 str(layers) + " copies of the shared layer weights");
}

void require_savable_embeddings(const Model& model, const std::string& where) {
  const auto& e = model.embeddings();
  if (e && !e->holds_all_words())
    fail(where, "embeddings.word",
         "holds " + std::to_string(e->word_ids->size()) + " of the " + str(e->vocab) +
             " rows (loaded for some token ids only); a saved model needs the whole table: load it with every row");
  if (e && !e->family_recipe())
    fail(where, "embeddings", "the recipe is not the " + to_string(e->kind) +
                                  " family's, and a checkpoint's config names only the family");
}

LayerPrefix layer_prefix(const LoadOptions& options, int layers, const std::string& config_path,
                         const std::string& key, const std::string& source) {
  if (!options.first_layers) return {layers, source};
  const int n = *options.first_layers;
  if (n < 1) fail(config_path, key, "the first " + str(n) + " layers were asked for; at least 1 is needed");
  if (n > layers)
    fail(config_path, key, str(layers) + " layers, fewer than the first " + str(n) + " asked for");
  if (n == layers) return {layers, source};
  return {n, source + " (first " + str(n) + " of " + str(layers) + " layers)"};
}

bool same_layer(const LayerWeights& a, const LayerWeights& b) {
  if (a.heads.size() != b.heads.size()) return false;
  for (std::size_t h = 0; h < a.heads.size(); ++h) {
    const HeadWeights &x = a.heads[h], &y = b.heads[h];
    if (!same(x.W_Q, y.W_Q) || !same(x.W_K, y.W_K) || !same(x.W_V, y.W_V) || !same(x.W_O, y.W_O) ||
        !same(x.b_Q, y.b_Q) || !same(x.b_K, y.b_K) || !same(x.b_V, y.b_V) || !same(x.W_R, y.W_R) ||
        !same(x.r_w, y.r_w) || !same(x.r_r, y.r_r))
      return false;
  }
  return same(a.b_O, b.b_O) && same(a.W_1, b.W_1) && same(a.W_2, b.W_2) && same(a.W_gate, b.W_gate) &&
         same(a.b_1, b.b_1) && same(a.b_2, b.b_2) && same(a.ln1_g, b.ln1_g) && same(a.ln1_b, b.ln1_b) &&
         same(a.ln2_g, b.ln2_g) && same(a.ln2_b, b.ln2_b) && same(a.ln3_g, b.ln3_g) && same(a.ln4_g, b.ln4_g) &&
         same(a.pos_bias, b.pos_bias) && same(a.q_norm, b.q_norm) && same(a.k_norm, b.k_norm);
}

namespace {

/// The tensor of every slot of `s` in `f`: all missing names in one
/// message, then the shapes (decode_slots).
std::vector<const TensorInfo*> locate_slots(const Slots& s, const TensorStore& f, const std::string& prefix,
                                            const std::string& config_path, const std::string& layout) {
  std::vector<const TensorInfo*> found(s.list.size());
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < s.list.size(); ++i) {
    const Slot& slot = s.list[i];
    found[i] = f.find(prefix + slot.key);
    if (!found[i] && !slot.alias.empty()) found[i] = f.find(prefix + slot.alias);
    if (!found[i]) missing.push_back(prefix + slot.key);
  }
  if (!missing.empty()) {
    std::string list;
    const std::size_t shown = std::min<std::size_t>(missing.size(), 5);
    for (std::size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > shown) list += " (and " + std::to_string(missing.size() - shown) + " more)";
    fail(f.path(), "tensors", std::to_string(missing.size()) + " missing for a " + layout + " checkpoint: " + list);
  }
  // Shapes are checked in name order, so that the first one reported does
  // not depend on the table's order.
  std::vector<std::size_t> by_name(s.list.size());
  for (std::size_t i = 0; i < by_name.size(); ++i) by_name[i] = i;
  std::sort(by_name.begin(), by_name.end(), [&](std::size_t x, std::size_t y) { return s.list[x].key < s.list[y].key; });
  for (const std::size_t i : by_name) {
    const Shape &want = s.list[i].shape, &got = found[i]->shape;
    bool ok = got.size() == want.size();
    for (std::size_t j = 0; ok && j < got.size(); ++j) ok = want[j] == kAny || want[j] == got[j];
    if (!ok)
      fail(f.file_of(*found[i]).path(), found[i]->name,
           "shape " + shape_str(got) + ", expected " + shape_str(want) + " from " + config_path);
  }
  return found;
}

/// Doubles the pieces of `s` hold (rows kAny counted as none).
std::uint64_t piece_values(const Slots& s) {
  std::uint64_t n = 0;
  for (const Slot& slot : s.list)
    for (const Piece& p : slot.pieces)
      if (p.block.rows != kAny) n = add_sat(n, mul_sat(static_cast<std::uint64_t>(p.block.rows),
                                                       static_cast<std::uint64_t>(p.block.cols)));
  return n;
}

/// The view format of a safetensors dtype; nullopt for those views do not
/// read (and on a big-endian host, where the stored bytes are not the
/// host's).
std::optional<StoredFloat> view_format(const std::string& dtype) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (dtype == "F64") return StoredFloat::f64;
  if (dtype == "F32") return StoredFloat::f32;
  if (dtype == "F16") return StoredFloat::f16;
  if (dtype == "BF16") return StoredFloat::bf16;
#else
  (void)dtype;
#endif
  return std::nullopt;
}

/// The matrices of a MappedLayer; WO is the one whose heads lie one under
/// the other (the others: side by side, or one piece).
constexpr MappedMatrix MappedLayer::*kMapped[] = {&MappedLayer::WQ, &MappedLayer::WK, &MappedLayer::WV,
                                                   &MappedLayer::WO, &MappedLayer::WR, &MappedLayer::W1,
                                                   &MappedLayer::W2, &MappedLayer::Wgate};
constexpr std::size_t kMappedCount = sizeof kMapped / sizeof kMapped[0];
constexpr std::size_t kHeadsByRows = 3;  // WO
constexpr std::size_t kPerHead = 5;      // WQ … WR have one piece per head

/// The pieces of `s` that fill the large matrices of `w` (every head's
/// projections, the MLP's), as views of the stored bytes in the forward
/// pass's packed form; those pieces are taken out of `s` (their slots stay,
/// checked by name and shape) and their matrices in `w` emptied. A matrix
/// whose pieces a view cannot express (a dtype it does not read, strides
/// that differ between heads) keeps its pieces and is decoded. With
/// `test_finite` the tensors viewed are tested whole for NaN/Inf, with
/// decode_slots' message (a layer's first mapped read; the bytes do not
/// change while the file is mapped); `hold`
/// keeps `f` and gives the pages back when the last view is dropped.
std::shared_ptr<const MappedLayer> map_pieces(Slots& s, const std::vector<const TensorInfo*>& found,
                                              const std::shared_ptr<const TensorStore>& f, LayerWeights& w,
                                              bool test_finite) {
  struct Part {
    std::size_t slot, piece;
    int head;
  };
  std::map<const MatrixXd*, std::pair<std::size_t, int>> target;  // matrix -> (kMapped index, head)
  for (std::size_t h = 0; h < w.heads.size(); ++h) {
    HeadWeights& hw = w.heads[h];
    const int head = static_cast<int>(h);
    target[&hw.W_Q] = {0, head};
    target[&hw.W_K] = {1, head};
    target[&hw.W_V] = {2, head};
    target[&hw.W_O] = {3, head};
    target[&hw.W_R] = {4, head};
  }
  target[&w.W_1] = {5, 0};
  target[&w.W_2] = {6, 0};
  target[&w.W_gate] = {7, 0};
  std::vector<std::vector<Part>> parts(kMappedCount);
  for (std::size_t i = 0; i < s.list.size(); ++i)
    for (std::size_t k = 0; k < s.list[i].pieces.size(); ++k) {
      const Piece& p = s.list[i].pieces[k];
      if (!p.matrix) continue;
      const auto it = target.find(p.matrix);
      if (it != target.end()) parts[it->second.first].push_back({i, k, it->second.second});
    }

  auto layer = std::make_shared<MappedLayer>();
  std::vector<const TensorInfo*> viewed;
  std::vector<std::pair<std::size_t, std::size_t>> taken;  // (slot, piece)
  const auto heads = static_cast<int>(w.heads.size());
  for (std::size_t m = 0; m < kMappedCount; ++m) {
    std::vector<Part>& ps = parts[m];
    const int want = m < kPerHead ? heads : 1;
    if (ps.empty() || static_cast<int>(ps.size()) != want) continue;
    std::sort(ps.begin(), ps.end(), [](const Part& x, const Part& y) { return x.head < y.head; });
    MappedMatrix v;
    bool ok = true;
    std::int64_t step_shared = 0;  // along the dimension the pieces share
    Eigen::Index shared_size = 0;
    for (std::size_t q = 0; ok && q < ps.size(); ++q) {
      const TensorInfo& t = *found[ps[q].slot];
      const std::optional<StoredFloat> format = view_format(t.dtype);
      ok = format && ps[q].head == static_cast<int>(q) && (q == 0 || *format == v.type);
      if (!ok) break;
      const SafetensorsMap& file = f->file_of(t);
      const TensorBlock b = resolve(s.list[ps[q].slot].pieces[ps[q].piece], t.shape, file.path(), t.name);
      const auto e = static_cast<std::int64_t>(stored_size(*format)), width = width_of(t.shape);
      const unsigned char* data = file.data_of(t);
      if (q == 0) {
        v.base = data;
        v.type = *format;
      }
      const std::int64_t at = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(data) -
                                                        reinterpret_cast<std::intptr_t>(v.base)) +
                              e * (b.row * width + b.col);
      // Steps in bytes along the block's image rows (i) and columns (j).
      const std::int64_t step_i = b.transpose ? e : e * width, step_j = b.transpose ? e * width : e;
      const bool by_rows = m == kHeadsByRows;
      const Eigen::Index own = by_rows ? b.image_rows() : b.image_cols();
      const Eigen::Index shared = by_rows ? b.image_cols() : b.image_rows();
      const std::int64_t own_step = by_rows ? step_i : step_j, other_step = by_rows ? step_j : step_i;
      if (q == 0) {
        step_shared = other_step;
        shared_size = shared;
      }
      ok = other_step == step_shared && shared == shared_size;
      if (!ok) break;
      std::vector<std::int64_t>& own_offsets = by_rows ? v.row_offsets : v.col_offsets;
      for (Eigen::Index x = 0; x < own; ++x) own_offsets.push_back(at + x * own_step);
    }
    if (!ok) continue;
    std::vector<std::int64_t>& shared_offsets = m == kHeadsByRows ? v.col_offsets : v.row_offsets;
    for (Eigen::Index x = 0; x < shared_size; ++x) shared_offsets.push_back(x * step_shared);
    for (const Part& part : ps) {
      Piece& piece = s.list[part.slot].pieces[part.piece];
      piece.matrix->resize(0, 0);
      taken.emplace_back(part.slot, part.piece);
      viewed.push_back(found[part.slot]);
    }
    (*layer).*kMapped[m] = std::move(v);
  }
  // Out of the slots, last piece first so that indices stay valid.
  std::sort(taken.begin(), taken.end(), std::greater<>());
  for (const auto& [slot, piece] : taken) {
    std::vector<Piece>& pieces = s.list[slot].pieces;
    pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(piece));
  }
  std::sort(viewed.begin(), viewed.end());
  viewed.erase(std::unique(viewed.begin(), viewed.end()), viewed.end());
  // NaN/Inf in the tensors viewed, each tested whole once (its pages mapped
  // in the same call), with decode_slots' message.
  if (test_finite)
    for (const TensorInfo* t : viewed) f->file_of(*t).check_finite(*t, 0, static_cast<std::size_t>(t->numel()));
  const TensorStore* store = f.get();
  layer->hold = std::shared_ptr<const void>(store, [f, viewed](const void*) {
    for (const TensorInfo* t : viewed) f->file_of(*t).release(*t);
  });
  return layer;
}

/// Layers read from a checkpoint kept open, one decode_slots per read.
class SlotLayers final : public LayerSource {
 public:
  SlotLayers(LayerSlots slots_of, std::shared_ptr<const TensorStore> f, std::string prefix, std::string config_path,
             std::string layout)
      : slots_of_(std::move(slots_of)), f_(std::move(f)), prefix_(std::move(prefix)),
        config_path_(std::move(config_path)), layout_(std::move(layout)) {}
  void read(int l, LayerWeights& w, LayerForm form) const override {
    Slots s;
    w.mapped.reset();
    slots_of_(l, w, s);
    if (form == LayerForm::mapped) {
      bool tested;
      {
        std::lock_guard<std::mutex> lock(mu_);
        tested = finite_.count(l) > 0;
      }
      w.mapped = map_pieces(s, locate_slots(s, *f_, prefix_, config_path_, layout_), f_, w, !tested);
      std::lock_guard<std::mutex> lock(mu_);
      finite_.insert(l);
    }
    decode_slots(s, *f_, prefix_, config_path_, layout_);
  }

 private:
  mutable std::mutex mu_;
  mutable std::set<int> finite_;  ///< layers whose viewed tensors were tested for NaN/Inf
  LayerSlots slots_of_;
  std::shared_ptr<const TensorStore> f_;
  std::string prefix_, config_path_, layout_;
};

/// Layers a run holds at once, about: one per pass running (the upward and
/// downward passes of the rounding check run side by side) and the stacked
/// copy of each one's attention weights (forward_impl.hpp).
constexpr int kLayersHeld = 3;

}  // namespace

StreamedLayers stream_layers(int layers, LayerSlots slots_of, std::shared_ptr<const TensorStore> f,
                             const std::string& prefix, const std::string& config_path, const std::string& layout) {
  StreamedLayers out;
  // Every layer's tensors in one table (nothing is decoded into the scratch
  // layers): all missing names in one message, as a resident load gives.
  std::vector<LayerWeights> scratch(static_cast<std::size_t>(layers));
  Slots all;
  std::uint64_t per_layer = 0;
  for (int l = 0; l < layers; ++l) {
    Slots one;
    slots_of(l, scratch[static_cast<std::size_t>(l)], one);
    if (l == 0) {  // every layer of a layout has the same size and parts
      per_layer = mul_sat(piece_values(one), sizeof(double));
      for (const Slot& slot : one.list)
        for (const Piece& p : slot.pieces) {
          out.parts.mlp = out.parts.mlp || p.matrix == &scratch.front().W_1;
          out.parts.layernorm = out.parts.layernorm || p.vector == &scratch.front().ln1_g;
        }
    }
    all.list.insert(all.list.end(), one.list.begin(), one.list.end());
  }
  locate_slots(all, *f, prefix, config_path, layout);
  const int held = std::min(layers, kLayersHeld);
  require_memory(mul_sat(per_layer, static_cast<std::uint64_t>(held)), printable(f->path() + ": layers"),
                 std::to_string(held) + (held == 1 ? " layer" : " layers") + " at a time, streamed from the file");
  out.source = std::make_shared<SlotLayers>(std::move(slots_of), std::move(f), prefix, config_path, layout);
  return out;
}

void decode_slots(const Slots& s, const TensorStore& f, const std::string& prefix, const std::string& config_path,
                  const std::string& layout, const WordRows* word_rows) {
  const std::vector<const TensorInfo*> found = locate_slots(s, f, prefix, config_path, layout);

  // The decoded doubles, refused above the memory budget before any is made.
  // A slot's work: its bytes in the file and the doubles it becomes.
  std::vector<std::uint64_t> work(s.list.size());
  std::uint64_t values = 0;
  for (std::size_t i = 0; i < s.list.size(); ++i) {
    std::uint64_t slot_values = 0;
    for (const Piece& p : s.list[i].pieces) {
      const TensorBlock b = resolve(p, found[i]->shape, f.file_of(*found[i]).path(), found[i]->name);
      const bool some_rows = word_rows && i == word_rows->slot;  // at most one row per id
      const auto rows = some_rows ? std::min<std::uint64_t>(word_rows->ids->size(), static_cast<std::uint64_t>(b.rows))
                                  : static_cast<std::uint64_t>(b.rows);
      slot_values = add_sat(slot_values, mul_sat(rows, static_cast<std::uint64_t>(b.cols)));
    }
    values = add_sat(values, slot_values);
    work[i] = add_sat(found[i]->end - found[i]->begin, mul_sat(slot_values, sizeof(double)));
  }
  require_memory(mul_sat(values, sizeof(double)), printable(f.path() + ": weights"),
                 std::to_string(values) + " values decoded as doubles");

  // Each tensor is decoded straight into the model's own matrices, tested
  // for finiteness in the same pass, then its pages are let go.
  const auto decode_range = [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) {
      if (s.list[i].pieces.empty()) continue;  // checked by name and shape only (or viewed where it lies)
      const TensorInfo& t = *found[i];
      const SafetensorsMap& file = f.file_of(t);
      const TensorReader read = [&](std::size_t from, std::size_t count, double* out) {
        file.decode_finite(t, from, count, out);
      };
      if (word_rows && i == word_rows->slot) {
        const Piece& p = s.list[i].pieces.front();
        read_word_rows(file, t, resolve(p, t.shape, file.path(), t.name), width_of(t.shape), *word_rows->ids,
                       *word_rows->emb);
        file.release(t);
        continue;
      }
      for (const Piece& p : s.list[i].pieces) {
        const TensorBlock b = resolve(p, t.shape, file.path(), t.name);
        double* data;
        if (p.matrix) {
          p.matrix->resize(b.image_rows(), b.image_cols());
          data = p.matrix->data();
        } else {
          p.vector->resize(b.image_rows());
          data = p.vector->data();
        }
        populate_for_writing(data, static_cast<std::size_t>(b.image_rows() * b.image_cols()) * sizeof(double));
        read_block(b, width_of(t.shape), read, Eigen::Map<MatrixXd>(data, b.image_rows(), b.image_cols()));
      }
      file.release(t);
    }
  };
  // Contiguous parts of about equal work, one per thread, at once (most of
  // it is the kernel handing out fresh pages, which K cores do K times as
  // fast). Each slot writes only its own matrices, and an earlier part's
  // error is rethrown before a later one's: the error reported is the one a
  // single pass would meet first.
  const std::uint64_t total = std::accumulate(work.begin(), work.end(), std::uint64_t{0});
  const std::size_t parts =
      std::max<std::size_t>(1, std::min(static_cast<std::size_t>(product_threads()), s.list.size()));
  std::vector<std::size_t> cut{0};
  std::uint64_t done = 0;
  for (std::size_t k = 1, i = 0; k < parts; ++k) {
    // Part k ends where the work done reaches k/parts of the total.
    while (i < work.size() && double(done + work[i]) * double(parts) <= double(total) * double(k)) done += work[i++];
    cut.push_back(i);
  }
  cut.push_back(s.list.size());
  std::vector<std::function<void(bool)>> tasks;
  for (std::size_t k = 0; k < parts; ++k)
    tasks.push_back([&decode_range, &cut, k](bool) { decode_range(cut[k], cut[k + 1]); });
  run_at_once(tasks);
}

Model load_family(const Family& fam, const HfConfig& c, const std::shared_ptr<const TensorStore>& store,
                  const std::string& source, const LoadOptions& options) {
  if (fam.load) return fam.load(fam, c, store, source, options);
  const TensorStore& f = *store;
  Architecture a;
  EmbeddingSizes es;
  fam.read_config(c, a, es);
  const Dims k = dims_of(a);
  const std::string layout = to_string(fam.layout);
  const std::string prefix = detect_prefix(f, fam.prefix);

  // A layer count that no file could hold is refused before millions of
  // missing names are listed.
  if (!fam.shared_layers && static_cast<std::size_t>(a.layers) > f.size()) {
    LayerWeights scratch;
    Slots one;
    fam.layer(k, 0, scratch, one);
    fail(c.path, layer_key(c),
         str(a.layers) + " layers, but " + f.path() + " holds only " + std::to_string(f.size()) + " tensors (a " +
             layout + " layer has " + std::to_string(one.list.size()) + ")");
  }

  const LayerPrefix cut = layer_prefix(options, a.layers, c.path, layer_key(c), source);
  a.layers = cut.layers;
  const LayerSlots slots_of = [&fam, k](int l, LayerWeights& w, Slots& s) { fam.layer(k, l, w, s); };
  const bool streamed = !fam.shared_layers && options.layers == LoadOptions::Layers::streamed;
  const int loaded = streamed ? 0 : fam.shared_layers ? 1 : a.layers;
  std::vector<LayerWeights> layers(static_cast<std::size_t>(loaded));
  Slots s;
  for (int l = 0; l < loaded; ++l) slots_of(l, layers[static_cast<std::size_t>(l)], s);
  Embeddings e;
  Slots emb_slots;
  fam.embeddings(k, es, e, emb_slots);
  const bool with_emb = f.find(prefix + emb_slots.list.front().key) != nullptr;
  const std::size_t word_slot = s.list.size();  // the first embedding slot is the word table
  if (with_emb) s.list.insert(s.list.end(), emb_slots.list.begin(), emb_slots.list.end());

  std::optional<StreamedLayers> stream;
  if (streamed) stream = stream_layers(a.layers, slots_of, store, prefix, c.path, layout);
  const WordRows rows{word_slot, options.word_rows ? &*options.word_rows : nullptr, &e};
  decode_slots(s, f, prefix, c.path, layout, with_emb && options.word_rows ? &rows : nullptr);

  if (fam.shared_layers) {
    check_shared_copies(c.path, kLayerKeys[0], a.layers, layers.front());
    layers.resize(static_cast<std::size_t>(a.layers), layers.front());
  }
  std::optional<Embeddings> emb;
  if (with_emb) {
    e.kind = fam.layout;
    e.recipe = embedding_recipe(e.kind);
    e.ln_eps = a.ln_eps;
    emb = std::move(e);
  }
  if (stream) return Model(a, stream->source, stream->parts, std::move(emb), cut.source);
  return Model(a, std::move(layers), std::move(emb), cut.source, FiniteWeights::checked_by_loader);
}

void Slots::grouped_attention(const std::string& prefix, const Architecture& a, LayerWeights& w, bool qkv_bias,
                              const std::string& out, bool out_bias) {
  const std::int64_t d = a.d_model, dh = a.d_qk, H = a.heads, Hkv = a.key_value_heads();
  w.heads.resize(static_cast<std::size_t>(H));
  const auto heads_in = [&](const char* key, std::int64_t rows, bool grouped, MatrixXd HeadWeights::*W,
                            VectorXd HeadWeights::*b) {
    Slot& weight = add(prefix + key + ".weight", {rows, d});
    Slot* bias = qkv_bias ? &add(prefix + key + ".bias", {rows}) : nullptr;
    for (int h = 0; h < H; ++h) {
      HeadWeights& hw = w.heads[static_cast<std::size_t>(h)];
      const std::int64_t o = std::int64_t(grouped ? a.kv_head_of(h) : h) * dh;
      weight.pieces.push_back({&(hw.*W), nullptr, TensorBlock{o, dh, 0, d, true}});
      if (bias)
        bias->pieces.push_back({nullptr, &(hw.*b), TensorBlock{0, 1, o, dh, true}});
      else
        hw.*b = VectorXd::Zero(dh);
    }
  };
  heads_in("q_proj", H * dh, false, &HeadWeights::W_Q, &HeadWeights::b_Q);
  heads_in("k_proj", Hkv * dh, true, &HeadWeights::W_K, &HeadWeights::b_K);
  heads_in("v_proj", Hkv * dh, true, &HeadWeights::W_V, &HeadWeights::b_V);
  // The output [d, H·d_h]: head h owns its columns [h·d_h, (h+1)·d_h) (rows of M).
  Slot& o = add(prefix + out + ".weight", {d, H * dh});
  for (int h = 0; h < H; ++h)
    o.pieces.push_back({&w.heads[static_cast<std::size_t>(h)].W_O, nullptr, TensorBlock{0, d, std::int64_t(h) * dh, dh, true}});
  if (out_bias)
    vector(prefix + out + ".bias", w.b_O, d);
  else
    w.b_O = VectorXd::Zero(d);
}

void Slots::gated_mlp(const std::string& prefix, LayerWeights& w, std::int64_t d, std::int64_t ff) {
  const auto linear = [&](const char* key, MatrixXd& W, std::int64_t out, std::int64_t in) {
    add(prefix + key + ".weight", {out, in}).pieces.push_back({&W, nullptr, TensorBlock{0, out, 0, in, true}});
  };
  linear("gate_proj", w.W_gate, ff, d);
  linear("up_proj", w.W_1, ff, d);
  linear("down_proj", w.W_2, d, ff);
  w.b_1 = VectorXd::Zero(ff);
  w.b_2 = VectorXd::Zero(d);
}

std::string prefix_in_use(const TensorStore& f, const std::string& prefix) {
  for (const TensorInfo* t : f.tensors())
    if (t->name.compare(0, prefix.size(), prefix) == 0) return prefix;
  return "";
}

Walk begin_walk(const Family& fam, const HfConfig& c, std::shared_ptr<const TensorStore> store, std::string prefix,
                const LoadOptions& options, int layers, LayerSlots slots_of) {
  Walk w{fam, c, std::move(store), std::move(prefix), options, std::move(slots_of)};
  w.streamed = options.layers == LoadOptions::Layers::streamed;
  w.layers.resize(static_cast<std::size_t>(w.streamed ? 0 : layers));
  for (std::size_t l = 0; l < w.layers.size(); ++l) w.slots_of(static_cast<int>(l), w.layers[l], w.slots);
  return w;
}

bool add_word_table(Walk& w, const std::string& key, std::int64_t vocab, std::int64_t width) {
  w.with_word = w.store->find(w.prefix + key) != nullptr;
  w.word_slot = w.slots.list.size();
  if (w.with_word) w.slots.table(key, w.emb.word, vocab, width);
  return w.with_word;
}

Model finish_walk(Walk& w, const Architecture& a, const std::string& source) {
  const std::string type = to_string(w.fam.layout);
  std::optional<StreamedLayers> stream;
  if (w.streamed) {
    stream = stream_layers(a.layers, w.slots_of, w.store, w.prefix, w.c.path, type);
    if (w.streamed_layernorm) stream->parts.layernorm = true;
  }
  const WordRows rows{w.word_slot, w.options.word_rows ? &*w.options.word_rows : nullptr, &w.emb};
  decode_slots(w.slots, *w.store, w.prefix, w.c.path, type, w.with_word && w.options.word_rows ? &rows : nullptr);
  std::optional<Embeddings> emb;
  if (w.with_word) {
    w.emb.kind = w.fam.layout;
    w.emb.recipe = embedding_recipe(w.emb.kind);
    w.emb.ln_eps = a.ln_eps;
    emb = std::move(w.emb);
  }
  if (stream) return Model(a, stream->source, stream->parts, std::move(emb), source);
  return Model(a, std::move(w.layers), std::move(emb), source, FiniteWeights::checked_by_loader);
}

void emit_slots(const Slots& s, const std::string& prefix, const std::string& dtype, const std::string& folder,
                std::vector<Tensor>& ts) {
  for (const Slot& slot : s.list) {
    std::int64_t n = 1;
    for (const std::int64_t dim : slot.shape) n *= dim;
    Tensor t{prefix + slot.key, dtype, slot.shape, std::vector<double>(static_cast<std::size_t>(n), 0.0)};
    for (const Piece& p : slot.pieces) {
      const TensorBlock b = resolve(p, slot.shape, folder, t.name);
      const double* data = p.matrix ? p.matrix->data() : p.vector->data();
      write_block(b, width_of(slot.shape), Eigen::Map<const MatrixXd>(data, b.image_rows(), b.image_cols()),
                  t.values.data());
    }
    ts.push_back(std::move(t));
  }
}

void LlamaShapedLayer::slots(const Architecture& a, int l, LayerWeights& w, Slots& s) const {
  const std::int64_t d = a.d_model;
  const std::string p = "layers." + str(l) + ".";
  s.grouped_attention(p + "self_attn.", a, w, qkv_bias, "o_proj", out_bias);
  if (query_key_norm) {
    s.vector(p + "self_attn.q_norm.weight", w.q_norm, a.d_qk);
    s.vector(p + "self_attn.k_norm.weight", w.k_norm, a.d_qk);
  }
  s.gated_mlp(p + "mlp.", w, d, a.d_ff);
  s.vector(p + "input_layernorm.weight", w.ln1_g, d);
  if (sandwich_norms) {
    s.vector(p + "post_attention_layernorm.weight", w.ln3_g, d);  // on the attention output
    s.vector(p + "pre_feedforward_layernorm.weight", w.ln2_g, d);
    s.vector(p + "post_feedforward_layernorm.weight", w.ln4_g, d);
  } else {
    s.vector(p + "post_attention_layernorm.weight", w.ln2_g, d);  // before the MLP
  }
  w.ln1_b = w.ln2_b = VectorXd::Zero(d);
}

LayerPrefix LlamaShapedLayer::kept_layers(const TensorStore& f, int layers, const std::string& config_path,
                                          const LoadOptions& options, const std::string& source,
                                          const std::string& layout) const {
  if (static_cast<std::size_t>(layers) > f.size())
    fail(config_path, "num_hidden_layers",
         str(layers) + " layers, but " + f.path() + " holds only " + std::to_string(f.size()) + " tensors (a " +
             layout + " layer has " + str(tensors()) + ")");
  return layer_prefix(options, layers, config_path, "num_hidden_layers", source);
}

Architecture llama_shaped_architecture(int layers, int heads, int kv_heads, int d, int head_dim, int ff, double eps) {
  Architecture a;
  a.layers = layers;
  a.heads = heads;
  a.d_model = d;
  a.d_qk = a.d_v = head_dim;
  a.d_ff = ff;
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.ln_eps = eps;
  a.norm = NormKind::rms;
  a.kv_heads = kv_heads;
  a.gated_mlp = true;
  return a;
}

LayerSlots LlamaShapedLayer::layer_slots(const Architecture& a) const {
  return [a, shape = *this](int l, LayerWeights& w, Slots& s) { shape.slots(a, l, w, s); };
}

void emit_layers(const Model& model, const LayerSlots& slots_of, const std::string& prefix, const std::string& dtype,
                 const std::string& folder, std::vector<Tensor>& ts) {
  for (int l = 0; l < model.arch().layers; ++l) {
    LayerWeights w = model.layer(l);  // a copy: the slots zero its absent biases
    Slots s;
    slots_of(l, w, s);
    emit_slots(s, prefix, dtype, folder, ts);
  }
}

json llama_shaped_config(const Architecture& a, const std::string& architecture, const std::string& model_type,
                         const std::string& dtype) {
  return {{"architectures", {architecture}},
          {"model_type", model_type},
          {"num_hidden_layers", a.layers},
          {"num_attention_heads", a.heads},
          {"num_key_value_heads", a.key_value_heads()},
          {"hidden_size", a.d_model},
          {"head_dim", a.d_qk},
          {"intermediate_size", a.d_ff},
          {"rms_norm_eps", a.ln_eps},
          {"rope_theta", *a.rope_theta},
          {"rope_scaling", nullptr},
          {"tie_word_embeddings", true},
          {"torch_dtype", dtype == "F64" ? "float64" : "float32"}};
}

void llama_shaped_structure(Architecture& a, const std::string& layout, double theta) {
  if (a.d_v != a.d_qk)
    throw std::invalid_argument("d_v: the " + layout + " layout needs d_v = d_qk (head_dim), got d_qk " +
                                std::to_string(a.d_qk) + ", d_v " + std::to_string(a.d_v));
  if (a.d_qk % 2 != 0)
    throw std::invalid_argument("d_qk: the " + layout + " layout rotates pairs; head_dim must be even, got " +
                                std::to_string(a.d_qk));
  a.variant = Variant{true, MlpKind::residual, LayerNormKind::pre, MaskKind::causal};
  a.norm = NormKind::rms;
  a.norm_unit_offset = false;
  a.gated_mlp = true;
  if (!a.rope_theta) a.rope_theta = theta;
  a.rotary_dims = 0;
  a.layer_rotary.clear();
  a.parallel_residual = false;
  a.own_norm_placement_only = true;
  a.sandwich_norms = false;
  a.query_key_norm.reset();
  a.score_scale_base.reset();
  a.softcap.reset();
  a.attention_window = 0;
  a.window_layers.clear();
}

void Needs::operator()(bool ok, const std::string& field, const std::string& what) const {
  if (!ok) fail(folder, field, "the " + layout + " layout needs " + what);
}

void Needs::only(const Architecture& a, unsigned kept) const {
  const auto absent = [&](unsigned feature, bool present, const char* field, const char* what) {
    if (!(kept & feature)) (*this)(!present, field, what);
  };
  absent(written::rotary, a.rotary(), "rope_theta", "no rotary embeddings");
  absent(written::parallel, a.parallel_residual, "parallel_residual", "sequential attention and MLP halves");
  absent(written::sandwich, a.sandwich_norms, "sandwich_norms", "no post-sublayer norms (two norms per layer)");
  absent(written::score_scale, a.score_scale_base.has_value(), "score_scale_base", "scores scaled by 1/sqrt(d_qk)");
  absent(written::softcap, a.softcap.has_value(), "softcap", "no logit soft-cap");
  absent(written::window, a.attention_window > 0, "attention_window", "no sliding window");
  absent(written::buckets, a.rel_buckets > 0, "rel_buckets", "no relative position bias");
  absent(written::xlnet, a.xlnet_relative, "xlnet_relative", "no XLNet relative attention");
  absent(written::gated, a.gated_mlp, "gated_mlp", "a plain MLP (no W_gate)");
  absent(written::shared, a.shared_layers, "shared_layers", "a weight set per layer");
  absent(written::grouped, a.key_value_heads() != a.heads, "kv_heads",
         "one key/value head per query head (no grouped-query attention)");
}

void Needs::equal_heads(const Architecture& a) const {
  const int d = a.d_model, H = a.heads;
  (*this)(d % H == 0 && a.d_qk == d / H && a.d_v == d / H, "d_qk",
          "d_qk = d_v = d_model / heads; the model has d_model " + str(d) + ", heads " + str(H) + ", d_qk " +
              str(a.d_qk) + ", d_v " + str(a.d_v));
}

void Needs::layer_norm_layers(const Model& model) const {
  const Architecture& a = model.arch();
  (*this)(a.norm == NormKind::layer && !a.norm_unit_offset, "norm", "LayerNorm");
  for (int l = 0; l < a.layers; ++l) {
    (*this)(model.layer(l).has_mlp(), "layer " + str(l) + " W_1", "MLP weights");
    (*this)(model.layer(l).has_layernorm(), "layer " + str(l) + " ln1_g", "LayerNorm weights");
  }
}

void Needs::read_back(const Architecture& a, const Architecture& r) const {
  const auto same = [&](bool ok, const char* field) {
    (*this)(ok, field, std::string("the model's ") + field + " to be what its files are read back with");
  };
  same(a.heads == r.heads && a.d_model == r.d_model && a.d_qk == r.d_qk && a.d_v == r.d_v && a.d_ff == r.d_ff,
       "d_qk");
  same(a.activation == r.activation, "activation");
  same(a.ln_eps == r.ln_eps, "ln_eps");
  same(a.norm == r.norm && a.norm_unit_offset == r.norm_unit_offset, "norm");
  same(a.key_value_heads() == r.key_value_heads(), "kv_heads");
  same(a.rope_theta == r.rope_theta && (!a.rotary() || a.rotated_dims() == r.rotated_dims()) &&
           a.layer_rotary.size() == r.layer_rotary.size(),
       "rope_theta");
  same(a.gated_mlp == r.gated_mlp, "gated_mlp");
  same(a.parallel_residual == r.parallel_residual, "parallel_residual");
  same(a.sandwich_norms == r.sandwich_norms, "sandwich_norms");
  same(a.score_scale_base == r.score_scale_base, "score_scale_base");
  same(a.softcap == r.softcap, "softcap");
  same(a.attention_window == r.attention_window && a.window_layers == r.window_layers, "attention_window");
  same(a.rel_buckets == r.rel_buckets && a.rel_max_distance == r.rel_max_distance, "rel_buckets");
  same(a.xlnet_relative == r.xlnet_relative && a.clamp_len == r.clamp_len, "xlnet_relative");
  same(a.query_key_norm.has_value() == r.query_key_norm.has_value(), "query_key_norm");
}

void require_llama_shaped(const Architecture& a, const std::string& folder, const std::string& layout, unsigned kept) {
  const Needs need{folder, layout};
  need(a.rotary(), "rope_theta", "rotary embeddings");
  need(a.rotary_dims == 0 || a.rotary_dims == a.d_qk, "rotary_dims", "rotary embeddings on the whole head");
  need(a.d_qk == a.d_v, "d_v", "d_v = d_qk (head_dim)");
  need.only(a, kept | written::rotary | written::gated | written::grouped);
}

bool llama_shaped_layers_have_bias(const Model& model, const std::string& folder, const std::string& layout) {
  const Needs need{folder, layout};
  bool bias = false;
  for (int l = 0; l < model.arch().layers; ++l) {
    const LayerWeights& w = model.layer(l);
    const std::string p = "layer " + str(l) + " ";
    need(w.has_mlp() && w.gated(), p + "W_gate", "gated MLP weights");
    need(w.has_layernorm(), p + "ln1_g", "RMSNorm weights");
    need(is_zero(w.ln1_b) && is_zero(w.ln2_b), p + "ln1_b", "zero RMSNorm biases");
    need(is_zero(w.b_1) && is_zero(w.b_2), p + "b_1", "zero MLP biases");
    bias = bias || !is_zero(w.b_O);
    for (const HeadWeights& hw : w.heads) bias = bias || !is_zero(hw.b_Q) || !is_zero(hw.b_K) || !is_zero(hw.b_V);
  }
  return bias;
}

void save_family(const Family& fam, const Model& model, const std::string& folder, const std::string& dtype) {
  const Architecture& a = model.arch();
  const std::string lname = to_string(fam.layout);
  if (dtype != "F64" && dtype != "F32") fail(folder, "dtype", "'" + dtype + "' is not one of F64, F32");
  require_savable_embeddings(model, folder);
  // Features only some layouts carry: never dropped in writing.
  if (a.query_key_norm && fam.layout != Layout::qwen3 && fam.layout != Layout::gemma3)
    fail(folder, "query_key_norm", "the " + lname + " layout has no query/key norm (qwen3 and gemma3 have one)");
  if (!a.layer_rotary.empty() && fam.layout != Layout::gemma3)
    fail(folder, "layer_rotary", "the " + lname + " layout has one rotary base for every layer (gemma3 has one per layer)");
  if (fam.save) return fam.save(fam, model, folder, dtype);
  const int L = a.layers;
  const Needs need{folder, lname};
  need.equal_heads(a);
  need.only(a, fam.shared_layers ? unsigned{written::shared} : 0u);
  need.layer_norm_layers(model);
  need(a.activation != Activation::silu, "activation", "gelu, gelu_tanh (gelu_new), gelu_fast or relu");
  if (fam.fixed_ln_eps != 0 && a.ln_eps != fam.fixed_ln_eps)
    fail(folder, "ln_eps", "the " + lname + " layout has LayerNorm epsilon 1e-12; the model has " + brief(a.ln_eps));
  const auto& emb = model.embeddings();
  if (emb && emb->kind != fam.layout)
    fail(folder, "embeddings", "kind " + to_string(emb->kind) + " cannot be written in the " + lname + " layout");
  if (emb && emb->ln_g.size() > 0 && emb->ln_eps != a.ln_eps)
    fail(folder, "embeddings.ln_eps", "differs from ln_eps; a " + lname + " config.json has one layer_norm_eps");
  if (fam.shared_layers)
    for (int l = 1; l < L; ++l)
      if (!same_layer(model.layer(0), model.layer(l)))
        fail(folder, "layers", "the " + lname + " layout shares one layer, but layer " + str(l) + " differs from layer 0");

  std::vector<Tensor> ts;
  const auto emit = [&](const Slots& s) { emit_slots(s, fam.prefix, dtype, folder, ts); };
  const Dims k = dims_of(a);
  for (int l = 0; l < (fam.shared_layers ? 1 : L); ++l) {
    LayerWeights w = model.layer(l);
    Slots s;
    fam.layer(k, l, w, s);
    emit(s);
  }
  EmbeddingSizes es;
  if (emb) {
    Embeddings e = *emb;
    es.vocab = e.word.rows();
    es.positions = e.position.rows() + fam.written_position_offset;
    es.types = e.token_type.rows();
    es.width = static_cast<int>(e.word.cols());
    es.position_offset = fam.written_position_offset;
    Slots s;
    fam.embeddings(k, es, e, s);
    emit(s);
  }
  json c = fam.write_config(model, emb ? &es : nullptr);
  c["torch_dtype"] = dtype == "F64" ? "float64" : "float32";
  Architecture r;  // what a reader makes of this config.json
  EmbeddingSizes read_sizes;
  fam.read_config(HfConfig{(std::filesystem::path(folder) / "config.json").string(), c}, r, read_sizes);
  need.read_back(a, r);
  write_checkpoint(folder, ts, c);
}

void write_checkpoint(const std::string& folder, const std::vector<Tensor>& ts, const json& c) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (!fs::is_directory(folder)) fail(folder, "folder", "cannot be created" + (ec ? ": " + ec.message() : std::string()));
  write_safetensors((fs::path(folder) / "model.safetensors").string(), ts, {{"format", "pt"}});
  write_file_atomic((fs::path(folder) / "config.json").string(), c.dump(2) + "\n");
}

}  // namespace sanpath::io

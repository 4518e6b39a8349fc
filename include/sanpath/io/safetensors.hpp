#pragma once
/// \file safetensors.hpp
/// Reading and writing the safetensors format: an 8-byte little-endian
/// header length N, N bytes of JSON header, then the data section. The
/// header maps tensor names to {dtype, shape, data_offsets} (offsets relative
/// to the data section) plus an optional "__metadata__" object of strings.
///
/// The reader maps the file (read only), validates the header strictly and
/// decodes tensors into double on demand. Floating dtypes (F64, F32, F16, BF16, F8_E5M2, F8_E4M3) are exact
/// in double; integer dtypes are exact up to 2^53 in magnitude. Tensors of the
/// format's other dtypes (F8_E8M0, F6_E2M3, F6_E3M2, F4, C64) are accepted
/// in the header, their byte ranges checked, so that a file whose analysis
/// does not need them loads; decoding one throws, naming the file, the
/// tensor and the dtype. Errors are
/// std::invalid_argument with one line "<file>: <field>: <why>".

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sanpath {

/// Where one tensor lies: dtype, shape and its byte range [begin, end) in
/// the data section.
struct TensorInfo {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;

  /// prod(shape) (1 for a scalar).
  std::int64_t numel() const;
};

/// A safetensors file mapped into memory, its header validated; tensor data
/// is decoded on demand, so that a loader can decode each tensor straight
/// into its own storage. Move-only.
class SafetensorsMap {
 public:
  /// Maps and validates `path`. Throws std::invalid_argument "<path>: <field>: <why>".
  static SafetensorsMap open(const std::string& path);
  /// The same from a whole file's bytes held in memory (encode_safetensors),
  /// named `source` in messages as a file's path is.
  static SafetensorsMap from_bytes(std::string source, std::string bytes);
  SafetensorsMap(SafetensorsMap&& other) noexcept;
  SafetensorsMap& operator=(SafetensorsMap&& other) noexcept;
  SafetensorsMap(const SafetensorsMap&) = delete;
  SafetensorsMap& operator=(const SafetensorsMap&) = delete;
  ~SafetensorsMap();

  const std::string& path() const { return path_; }
  /// The tensor called `name`, or nullptr.
  const TensorInfo* find(const std::string& name) const;
  /// Tensors in the order of their data (ascending data_offsets).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  /// The "__metadata__" object (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Decodes elements [first, first + count) of `t` (row-major order) into out[0 .. count).
  void decode(const TensorInfo& t, std::size_t first, std::size_t count, double* out) const;
  /// The same, and throws std::invalid_argument "<file>: <tensor>: NaN at
  /// [i, j]" (the index in the stored shape) when a value is NaN or infinite:
  /// a loader's finiteness check in the decoding pass itself. Decoding from
  /// element 0 first maps all of the tensor's pages (see release()).
  void decode_finite(const TensorInfo& t, std::size_t first, std::size_t count, double* out) const;
  /// The finiteness test of decode_finite (same error, same first element)
  /// on elements [first, first + count) of `t`, read from the stored bytes
  /// without decoding them: for the parts of a tensor a loader skips.
  void check_finite(const TensorInfo& t, std::size_t first, std::size_t count) const;
  /// The bytes of `t` in the mapping (row-major, little-endian), valid as
  /// long as this map: for readers that use them in place
  /// (core/weight_view.hpp). Its pages are mapped as they are read (or at
  /// once by check_finite).
  const unsigned char* data_of(const TensorInfo& t) const;
  /// Drops the pages of `t` from this process's resident memory (they stay
  /// in the page cache); a later decode maps them in again.
  void release(const TensorInfo& t) const;

 private:
  SafetensorsMap() = default;
  void parse_header();  ///< validates the header of the bytes at base_
  /// dtype_size(t.dtype); throws std::invalid_argument when sanpath cannot decode it.
  std::size_t decodable_size(const TensorInfo& t) const;
  /// Maps the file pages of `t` in one call where the system allows it.
  void populate(const TensorInfo& t) const;
  /// Throws decode_finite's error for element `element` (row-major) of `t`, whose value is `value`.
  [[noreturn]] void fail_nonfinite(const TensorInfo& t, std::size_t element, double value) const;
  std::string path_;
  std::shared_ptr<const std::string> owned_;  // from_bytes: the bytes (else the file is mapped)
  const unsigned char* base_ = nullptr;  // the whole file, mapped
  std::size_t size_ = 0;
  std::size_t data_start_ = 0;  // 8 + header length
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

/// One tensor: `values` holds prod(shape) entries in row-major order (the
/// last index varies fastest). A scalar has an empty shape and one value.
struct Tensor {
  std::string name;
  std::string dtype;  ///< the stored dtype ("F64", "F32", "F16", "BF16", ...)
  std::vector<std::int64_t> shape;
  std::vector<double> values;

  /// prod(shape) (1 for a scalar).
  std::int64_t numel() const;
};

/// A whole safetensors file, decoded into memory (small files: inputs,
/// tests; models are loaded through SafetensorsMap).
class SafetensorsFile {
 public:
  /// Reads and validates `path` (as SafetensorsMap::open) and decodes every tensor. Throws std::invalid_argument "<path>: <field>: <why>".
  static SafetensorsFile read(const std::string& path);

  const std::string& path() const { return path_; }
  /// The tensor called `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
  /// The tensor called `name`; throws std::invalid_argument naming the file and the tensor.
  const Tensor& at(const std::string& name) const;
  /// Tensor names in the order of their data (ascending data_offsets).
  std::vector<std::string> names() const;
  /// Tensors in the order of their data.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  /// The "__metadata__" object (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  std::vector<Tensor> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

/// Writes `tensors` (each with dtype "F64", "F32" or "" = F64; F32 rounds to
/// nearest) and `metadata` to `path`, in the order given. The header is
/// padded with spaces to a multiple of 8 bytes. Atomic: the file is written
/// to a temporary file in the same directory and renamed over `path`; on
/// failure nothing is left behind. Throws std::invalid_argument naming
/// `path` for bad input (duplicate, empty or reserved names, shape/value-count
/// mismatch, dtype) and for I/O failures.
void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
/// The bytes write_safetensors writes (same checks, errors naming `path`).
std::string encode_safetensors(const std::string& path, const std::vector<Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

/// IEEE 754 binary16 bit pattern to double (exact; subnormals, ±inf, NaN).
double decode_f16(std::uint16_t bits);
/// bfloat16 bit pattern (the high half of a binary32) to double (exact).
double decode_bf16(std::uint16_t bits);

/// Size in bytes of one element of a dtype sanpath decodes, or 0 (unknown, or one it cannot decode).
std::size_t dtype_size(const std::string& dtype);

}  // namespace sanpath

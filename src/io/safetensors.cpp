#include "sanpath/core/errors.hpp"
#include "sanpath/io/safetensors.hpp"

#include "sanpath/io/atomic_file.hpp"
#include "dtypes.hpp"
#include "hf_config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <stdexcept>
#include <system_error>

namespace sanpath {

using io::decode_all;
using io::first_nonfinite;
using io::dtype_bits;
using io::kDecodedDtypes;
using io::kKnownDtypes;
using io::load_le;

namespace {

using json = nlohmann::json;

constexpr std::uint64_t kMaxHeader = 100ull * 1000 * 1000;  // 100 MB
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();


using io::brief;

std::string shape_str(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- header parsing ---------------------------------------------------------

/// Nesting limit of the header. A valid header nests 3 levels (the header
/// object, a tensor's object, its shape list); a deeper one is hostile, and
/// printing or destroying a value nested millions of levels deep would
/// exhaust the stack.
constexpr int kMaxDepth = 16;
struct TooDeep {};

/// Records the first duplicate key at any depth of the header; nlohmann
/// itself silently keeps only one of them. Throws TooDeep beyond kMaxDepth.
struct DuplicateFinder {
  std::vector<std::set<std::string>> open;  // keys seen in each open object
  std::string top_key;                      // the current top-level key
  bool found = false;
  int depth = 0;
  std::string key, owner;

  bool operator()(int d, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::array_start:
        if (d >= kMaxDepth) throw TooDeep{};
        break;
      case json::parse_event_t::object_start:
        if (d >= kMaxDepth) throw TooDeep{};
        open.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string k = parsed.get<std::string>();
        if (d == 1) top_key = k;
        if (!open.empty() && !open.back().insert(k).second && !found) {
          found = true;
          depth = d;
          key = k;
          owner = top_key;
        }
        break;
      }
      default: break;
    }
    return true;
  }
};

/// Checks a tensor given in memory (name, shape against its values) and
/// returns prod(shape); `fail(field, why)` throws.
template <class Fail>
std::int64_t checked_numel(const Tensor& t, const Fail& fail) {
  if (t.name.empty()) fail("tensor name", "empty");
  if (t.name == "__metadata__") fail(t.name, "reserved name");
  std::int64_t numel = 1;
  for (const std::int64_t s : t.shape) {
    if (s < 0) fail(t.name + ".shape", shape_str(t.shape) + " has a negative dimension");
    if (s != 0 && numel > kInt64Max / s) fail(t.name + ".shape", shape_str(t.shape) + ": the element count overflows");
    numel *= s;
  }
  if (static_cast<std::uint64_t>(numel) != t.values.size())
    fail(t.name + ".shape", shape_str(t.shape) + " has " + std::to_string(numel) + " elements but " +
                                std::to_string(t.values.size()) + " values are given");
  return numel;
}

}  // namespace

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t s : shape) n *= s;
  return n;
}

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t s : shape) n *= s;
  return n;
}

SafetensorsMap::SafetensorsMap(SafetensorsMap&& o) noexcept { *this = std::move(o); }

SafetensorsMap& SafetensorsMap::operator=(SafetensorsMap&& o) noexcept {
  if (this != &o) {
    if (base_ && !owned_) ::munmap(const_cast<unsigned char*>(base_), size_);
    path_ = std::move(o.path_);
    owned_ = std::move(o.owned_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
    data_start_ = o.data_start_;
    tensors_ = std::move(o.tensors_);
    index_ = std::move(o.index_);
    metadata_ = std::move(o.metadata_);
  }
  return *this;
}

SafetensorsMap::~SafetensorsMap() {
  if (base_ && !owned_) ::munmap(const_cast<unsigned char*>(base_), size_);
}

SafetensorsMap SafetensorsMap::open(const std::string& path) {
  namespace fs = std::filesystem;
  const auto fail = [&](const std::string& field, const std::string& why) {
    throw std::invalid_argument(path + ": " + printable(field + ": " + why));
  };

  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) fail("file", "does not exist");
  if (fs::is_directory(st)) fail("file", "is a directory, not a safetensors file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("file", std::string("cannot be opened: ") + std::strerror(errno));
  struct ::stat sb {};
  if (::fstat(fd, &sb) != 0 || sb.st_size < 0) {
    ::close(fd);
    fail("file", "cannot be read");
  }
  SafetensorsMap file;
  file.path_ = path;
  file.size_ = static_cast<std::size_t>(sb.st_size);
  if (file.size_ > 0) {
    void* m = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail("file", std::string("cannot be mapped: ") + std::strerror(err));
    }
    file.base_ = static_cast<const unsigned char*>(m);
    ::madvise(m, file.size_, MADV_SEQUENTIAL);
  }
  ::close(fd);
  file.parse_header();
  return file;
}

SafetensorsMap SafetensorsMap::from_bytes(std::string source, std::string bytes) {
  SafetensorsMap file;
  file.path_ = std::move(source);
  file.owned_ = std::make_shared<const std::string>(std::move(bytes));
  file.base_ = reinterpret_cast<const unsigned char*>(file.owned_->data());
  file.size_ = file.owned_->size();
  file.parse_header();
  return file;
}

void SafetensorsMap::parse_header() {
  SafetensorsMap& file = *this;
  const std::string& path = path_;
  const auto fail = [&](const std::string& field, const std::string& why) {
    throw std::invalid_argument(path + ": " + printable(field + ": " + why));
  };
  const auto file_size = static_cast<std::uint64_t>(file.size_);

  if (file_size < 8)
    fail("header length", "the file has " + std::to_string(file_size) + " bytes, fewer than the 8-byte length field");
  const std::uint64_t header_len = load_le(file.base_, 8);
  if (header_len > kMaxHeader)
    fail("header length", std::to_string(header_len) + " bytes exceeds the limit of 100 MB");
  if (header_len > file_size - 8)
    fail("header length", std::to_string(header_len) + " bytes exceeds the " + std::to_string(file_size - 8) +
                              " bytes that follow the length field");
  const std::string header(reinterpret_cast<const char*>(file.base_) + 8, static_cast<std::size_t>(header_len));
  if (header.empty() || header[0] != '{') fail("header", "not a JSON object (must start with '{')");
  file.data_start_ = 8 + static_cast<std::size_t>(header_len);

  DuplicateFinder dups;
  json root;
  try {
    root = json::parse(header, std::ref(dups));
  } catch (const json::exception& e) {
    fail("header", std::string("not valid JSON: ") + e.what());
  } catch (const TooDeep&) {
    fail("header", "nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  if (!root.is_object()) fail("header", std::string("not a JSON object but ") + root.type_name());
  if (dups.found) {
    if (dups.depth == 1) {
      if (dups.key == "__metadata__") fail("__metadata__", "appears more than once");
      fail(dups.key, "duplicate tensor name");
    }
    fail(dups.owner + "." + dups.key, "duplicate key");
  }

  const std::uint64_t data_size = file_size - 8 - header_len;
  std::vector<TensorInfo>& entries = file.tensors_;
  for (const auto& [name, val] : root.items()) {
    if (name == "__metadata__") {
      if (!val.is_object()) fail("__metadata__", std::string("must be an object of strings, got ") + val.type_name());
      for (const auto& [k, v] : val.items()) {
        if (!v.is_string())
          fail("__metadata__." + k, std::string("must be a string, got ") + v.type_name() + " " + brief(v));
        file.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (name.empty()) fail("tensor name", "empty");
    if (!val.is_object())
      fail(name, std::string("entry must be an object {dtype, shape, data_offsets}, got ") + val.type_name());
    TensorInfo e;
    e.name = name;

    const auto dt = val.find("dtype");
    if (dt == val.end()) fail(name + ".dtype", "missing");
    if (!dt->is_string()) fail(name + ".dtype", std::string("must be a string, got ") + brief(*dt));
    e.dtype = dt->get<std::string>();
    const std::size_t bits = dtype_bits(e.dtype);
    if (bits == 0) fail(name + ".dtype", "unknown dtype '" + printable(e.dtype) + "' (known: " + kKnownDtypes + ")");

    const auto sh = val.find("shape");
    if (sh == val.end()) fail(name + ".shape", "missing");
    if (!sh->is_array()) fail(name + ".shape", "must be a list of non-negative integers, got " + brief(*sh));
    bool any_zero = false;
    for (const json& dim : *sh) {
      if (!dim.is_number_unsigned())  // non-negative integers parse as unsigned
        fail(name + ".shape", "must be a list of non-negative integers, got " + brief(*sh));
      const auto u = dim.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(kInt64Max))
        fail(name + ".shape", "dimension " + std::to_string(u) + " is too large");
      e.shape.push_back(static_cast<std::int64_t>(u));
      any_zero = any_zero || u == 0;
    }
    std::int64_t numel = 1;
    if (any_zero) {
      numel = 0;
    } else {
      for (const std::int64_t s : e.shape) {
        if (numel > kInt64Max / s) fail(name + ".shape", shape_str(e.shape) + ": the element count overflows");
        numel *= s;
      }
    }
    if (numel > kInt64Max / static_cast<std::int64_t>(bits))
      fail(name + ".shape", shape_str(e.shape) + ": the byte size overflows");
    if (static_cast<std::uint64_t>(numel) * bits % 8 != 0)
      fail(name + ".shape", e.dtype + " " + shape_str(e.shape) + " is " +
                                std::to_string(static_cast<std::uint64_t>(numel) * bits) + " bits, not whole bytes");
    const auto bytes = static_cast<std::uint64_t>(numel) * bits / 8;

    const auto off = val.find("data_offsets");
    if (off == val.end()) fail(name + ".data_offsets", "missing");
    if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned() ||
        (*off)[0].get<std::uint64_t>() > (*off)[1].get<std::uint64_t>())
      fail(name + ".data_offsets", "must be [begin, end] with integers 0 <= begin <= end, got " + brief(*off));
    e.begin = (*off)[0].get<std::uint64_t>();
    e.end = (*off)[1].get<std::uint64_t>();
    if (e.end - e.begin != bytes)
      fail(name + ".data_offsets", "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + ") holds " +
                                       std::to_string(e.end - e.begin) + " bytes, but " + e.dtype + " " +
                                       shape_str(e.shape) + " needs " + std::to_string(bytes));
    if (e.end > data_size)
      fail(name + ".data_offsets", "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                       ") ends beyond the data section of " + std::to_string(data_size) +
                                       " bytes: the data section is truncated");
    entries.push_back(std::move(e));
  }

  // The data section must be covered exactly: no overlap, no gap, no tail.
  std::sort(entries.begin(), entries.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t pos = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& e : entries) {
    if (e.begin < pos)
      fail(e.name + ".data_offsets", "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + ") overlaps " +
                                         printable(prev->name) + " [" + std::to_string(prev->begin) + ", " +
                                         std::to_string(prev->end) + ")");
    if (e.begin > pos)
      fail(e.name + ".data_offsets", "starts at " + std::to_string(e.begin) + ", leaving bytes [" +
                                         std::to_string(pos) + ", " + std::to_string(e.begin) +
                                         ") of the data section covered by no tensor");
    pos = e.end;
    prev = &e;
  }
  if (pos != data_size)
    fail("data section", std::to_string(data_size - pos) + " trailing bytes after offset " + std::to_string(pos) +
                             " are covered by no tensor");
  for (std::size_t i = 0; i < entries.size(); ++i) file.index_[entries[i].name] = i;
}

const TensorInfo* SafetensorsMap::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::size_t SafetensorsMap::decodable_size(const TensorInfo& t) const {
  const std::size_t elsize = dtype_size(t.dtype);
  if (elsize == 0)
    throw std::invalid_argument(path_ + ": " + t.name + ": dtype " + t.dtype + " cannot be decoded (sanpath decodes " +
                                kDecodedDtypes + ")");
  return elsize;
}

void SafetensorsMap::decode(const TensorInfo& t, std::size_t first, std::size_t count, double* out) const {
  const std::size_t elsize = decodable_size(t);
  if (count == 0) return;  // an empty tensor: nothing to copy (and no data pointer to copy from)
  if ((first + count) * elsize > t.end - t.begin) throw std::logic_error("SafetensorsMap::decode: out of range");
  decode_all(t.dtype, base_ + data_start_ + t.begin + first * elsize, count, out);
}

void SafetensorsMap::decode_finite(const TensorInfo& t, std::size_t first, std::size_t count, double* out) const {
  const std::size_t elsize = decodable_size(t);
  if (count == 0) return;
  if ((first + count) * elsize > t.end - t.begin) throw std::logic_error("SafetensorsMap::decode: out of range");
  // A loader starts a tensor at its first element.
  if (first == 0) populate(t);
  if (decode_all(t.dtype, base_ + data_start_ + t.begin + first * elsize, count, out)) return;
  std::size_t i = 0;
  while (std::isfinite(out[i])) ++i;
  fail_nonfinite(t, first + i, out[i]);
}

void SafetensorsMap::populate(const TensorInfo& t) const {
#ifdef MADV_POPULATE_READ
  // The tensor's file pages mapped in one call (Linux 5.14) rather than by a
  // fault every few pages.
  if (owned_) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto lo = reinterpret_cast<std::uintptr_t>(base_ + data_start_ + t.begin) / page * page;
  const auto hi = reinterpret_cast<std::uintptr_t>(base_ + data_start_ + t.end);
  ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_READ);
#else
  (void)t;
#endif
}

void SafetensorsMap::check_finite(const TensorInfo& t, std::size_t first, std::size_t count) const {
  const std::size_t elsize = decodable_size(t);
  if (count == 0) return;
  if ((first + count) * elsize > t.end - t.begin) throw std::logic_error("SafetensorsMap::check_finite: out of range");
  populate(t);
  const unsigned char* p = base_ + data_start_ + t.begin + first * elsize;
  const std::size_t i = first_nonfinite(t.dtype, p, count);
  if (i == count) return;
  double value;
  decode_all(t.dtype, p + i * elsize, 1, &value);
  fail_nonfinite(t, first + i, value);
}

void SafetensorsMap::fail_nonfinite(const TensorInfo& t, std::size_t element, double value) const {
  // The index of the element in the stored shape, row-major.
  std::vector<std::int64_t> at(t.shape.size());
  auto rest = static_cast<std::int64_t>(element);
  for (std::size_t k = at.size(); k-- > 0;) {
    at[k] = t.shape[k] > 0 ? rest % t.shape[k] : 0;
    rest = t.shape[k] > 0 ? rest / t.shape[k] : 0;
  }
  throw std::invalid_argument(path_ + ": " + t.name + ": " + (std::isnan(value) ? "NaN" : "Inf") + " at " +
                              shape_str(at));
}

const unsigned char* SafetensorsMap::data_of(const TensorInfo& t) const { return base_ + data_start_ + t.begin; }

void SafetensorsMap::release(const TensorInfo& t) const {
  if (owned_) return;  // bytes held in memory: nothing to give back to the page cache
  // Whole pages inside the tensor's bytes only: neighbours may still be needed.
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto lo = reinterpret_cast<std::uintptr_t>(base_ + data_start_ + t.begin);
  const auto hi = reinterpret_cast<std::uintptr_t>(base_ + data_start_ + t.end);
  const std::uintptr_t a = (lo + page - 1) / page * page, b = hi / page * page;
  if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
}

SafetensorsFile SafetensorsFile::read(const std::string& path) {
  const SafetensorsMap map = SafetensorsMap::open(path);
  SafetensorsFile file;
  file.path_ = path;
  file.metadata_ = map.metadata();
  file.tensors_.reserve(map.tensors().size());
  for (const TensorInfo& e : map.tensors()) {
    Tensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.values.resize(static_cast<std::size_t>(e.numel()));
    map.decode(e, 0, t.values.size(), t.values.data());
    file.index_[t.name] = file.tensors_.size();
    file.tensors_.push_back(std::move(t));
  }
  return file;
}

const Tensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  const Tensor* t = find(name);
  if (!t) throw std::invalid_argument(path_ + ": " + printable(name) + ": no such tensor");
  return *t;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const Tensor& t : tensors_) out.push_back(t.name);
  return out;
}

std::string encode_safetensors(const std::string& path, const std::vector<Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  const auto fail = [&](const std::string& field, const std::string& why) {
    throw std::invalid_argument(path + ": " + printable(field + ": " + why));
  };
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    const std::int64_t numel = checked_numel(t, fail);
    if (header.contains(t.name)) fail(t.name, "duplicate tensor name");
    const std::string dtype = t.dtype.empty() ? "F64" : t.dtype;
    if (dtype != "F64" && dtype != "F32") fail(t.name + ".dtype", "the writer supports F64 and F32, not " + dtype);
    const std::uint64_t bytes = static_cast<std::uint64_t>(numel) * dtype_size(dtype);
    header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception&) {
    fail("header", "tensor names and metadata must be valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeader) fail("header", "exceeds the limit of 100 MB");

  std::string content;
  content.reserve(8 + text.size() + static_cast<std::size_t>(offset));
  const auto put_le = [&](std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) content.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
  };
  put_le(text.size(), 8);
  content += text;
  for (const Tensor& t : tensors) {
    if (t.dtype == "F32") {
      for (const double v : t.values) {
        const auto f = static_cast<float>(v);
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        put_le(u, 4);
      }
    } else {
      for (const double v : t.values) {
        std::uint64_t u;
        std::memcpy(&u, &v, 8);
        put_le(u, 8);
      }
    }
  }
  return content;
}

void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, encode_safetensors(path, tensors, metadata));
}

}  // namespace sanpath

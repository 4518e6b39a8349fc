#include "sanpath/io/tensor_store.hpp"

#include "hf_config.hpp"

#include <filesystem>
#include <algorithm>
#include <set>

namespace sanpath {

using io::brief;
using io::fail;
using io::json;

TensorStore TensorStore::single(const std::string& path) { return single(SafetensorsMap::open(path)); }

TensorStore TensorStore::single(SafetensorsMap file) {
  TensorStore s;
  s.path_ = file.path();
  s.files_.push_back(std::move(file));
  for (const TensorInfo& t : s.files_.front().tensors()) s.index_[t.name] = {0, &t};
  return s;
}

TensorStore TensorStore::sharded(const std::string& index_path) {
  namespace fs = std::filesystem;
  const json j = io::read_json_file(index_path);
  const auto wm = j.find("weight_map");
  if (wm == j.end()) fail(index_path, "weight_map", "missing");
  if (!wm->is_object()) fail(index_path, "weight_map", "must be an object {tensor: shard file}, got " + brief(*wm));
  if (wm->empty()) fail(index_path, "weight_map", "is empty");

  // Shards in file name order; each named by a plain file name.
  std::map<std::string, std::string> mapped_to;  // tensor -> shard file
  std::set<std::string> names;
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string()) fail(index_path, "weight_map." + tensor, "must be a shard file name, got " + brief(shard));
    const std::string name = shard.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name.find('\\') != std::string::npos ||
        name == "." || name == "..")
      fail(index_path, "weight_map." + tensor, "'" + name + "' is not a file name in the index's folder");
    mapped_to[tensor] = name;
    names.insert(name);
  }
  const std::vector<std::string> shard_names(names.begin(), names.end());
  std::map<std::string, std::size_t> mapped;  // tensor -> shard index
  for (const auto& [tensor, name] : mapped_to)
    mapped[tensor] = static_cast<std::size_t>(std::lower_bound(shard_names.begin(), shard_names.end(), name) -
                                              shard_names.begin());

  TensorStore s;
  s.path_ = index_path;
  const fs::path folder = fs::path(index_path).parent_path();
  for (const std::string& name : shard_names) {
    const std::string p = (folder / name).string();
    if (!fs::exists(p)) {
      const auto first = std::find_if(mapped.begin(), mapped.end(),
                                      [&](const auto& m) { return shard_names[m.second] == name; });
      fail(index_path, "weight_map." + first->first, "shard " + name + " does not exist");
    }
    s.files_.push_back(SafetensorsMap::open(p));
  }

  // No tensor in two shards; then every shard agrees with the index.
  for (std::size_t f = 0; f < s.files_.size(); ++f)
    for (const TensorInfo& t : s.files_[f].tensors()) {
      const auto [it, added] = s.index_.emplace(t.name, Where{f, &t});
      if (!added)
        fail(s.files_[f].path(), t.name,
             "also in shard " + shard_names[it->second.file] + ": a tensor must be in one shard");
    }
  std::uint64_t bytes = 0;
  for (std::size_t f = 0; f < s.files_.size(); ++f)
    for (const TensorInfo& t : s.files_[f].tensors()) {
      const auto m = mapped.find(t.name);
      if (m == mapped.end()) fail(s.files_[f].path(), t.name, "not listed in the weight_map of " + index_path);
      if (m->second != f)
        fail(s.files_[f].path(), t.name, "the index " + index_path + " maps it to shard " + shard_names[m->second]);
      bytes += t.end - t.begin;
    }
  for (const auto& [tensor, f] : mapped)
    if (!s.index_.count(tensor))
      fail(index_path, "weight_map." + tensor, "mapped to shard " + shard_names[f] + ", whose header does not hold it");

  if (const auto meta = j.find("metadata"); meta != j.end() && meta->is_object()) {
    if (const auto ts = meta->find("total_size"); ts != meta->end() && !ts->is_null()) {
      if (!ts->is_number_unsigned() && !(ts->is_number_float() && ts->get<double>() >= 0))
        fail(index_path, "metadata.total_size", "must be a non-negative number of bytes, got " + brief(*ts));
      const double told = ts->get<double>();
      if (told != static_cast<double>(bytes))
        fail(index_path, "metadata.total_size",
             brief(*ts) + " bytes, but the shards hold " + std::to_string(bytes) + " bytes of tensors");
    }
  }
  return s;
}

const TensorInfo* TensorStore::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second.info;
}

const SafetensorsMap& TensorStore::file_of(const TensorInfo& t) const { return files_.at(index_.at(t.name).file); }

std::vector<const TensorInfo*> TensorStore::tensors() const {
  std::vector<const TensorInfo*> out;
  out.reserve(index_.size());
  for (const SafetensorsMap& f : files_)
    for (const TensorInfo& t : f.tensors()) out.push_back(&t);
  return out;
}

}  // namespace sanpath

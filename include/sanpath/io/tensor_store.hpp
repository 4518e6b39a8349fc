#pragma once
/// \file tensor_store.hpp
/// The tensors of a checkpoint: one safetensors file, or the shards listed
/// by a model.safetensors.index.json ({"metadata": {"total_size": bytes},
/// "weight_map": {tensor: shard file}}, shards in the index's folder).
///
/// A sharded store is checked when opened: every shard the index names
/// exists and has a valid header, every tensor of the index is in the shard
/// it is mapped to, no tensor is in two shards or in a shard the index does
/// not map it to, and total_size (when given) is the shards' tensor bytes.
/// Errors are std::invalid_argument "<file>: <field>: <why>" naming the
/// index or the shard and the tensor.

#include "sanpath/io/safetensors.hpp"

#include <map>
#include <string>
#include <vector>

namespace sanpath {

class TensorStore {
 public:
  /// One safetensors file.
  static TensorStore single(const std::string& path);
  /// One safetensors file, already mapped.
  static TensorStore single(SafetensorsMap file);
  /// The shards listed by `index_path`.
  static TensorStore sharded(const std::string& index_path);

  /// The file, or the index of a sharded store.
  const std::string& path() const { return path_; }
  /// The tensor called `name`, or nullptr.
  const TensorInfo* find(const std::string& name) const;
  /// The file that holds `t` (a tensor of this store).
  const SafetensorsMap& file_of(const TensorInfo& t) const;
  /// Every tensor, file by file in data order.
  std::vector<const TensorInfo*> tensors() const;
  std::size_t size() const { return index_.size(); }

 private:
  struct Where {
    std::size_t file;
    const TensorInfo* info;
  };
  std::string path_;
  std::vector<SafetensorsMap> files_;
  std::map<std::string, Where> index_;
};

}  // namespace sanpath

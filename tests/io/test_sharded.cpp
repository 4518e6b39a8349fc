// Sharded checkpoints: the real checkpoints (BERT, GPT-2, both Llamas)
// split here into 2–3 shards with a generated model.safetensors.index.json
// load exactly as the single file does; index files that lie are refused with one line naming the index or
// the shard and the tensor.
#include "support/checkpoint_helpers.hpp"

#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/io/checkpoint.hpp"

namespace {

std::string shard_name(std::size_t i, std::size_t k) {
  return "model-0000" + std::to_string(i + 1) + "-of-0000" + std::to_string(k) + ".safetensors";
}

/// Copies the checkpoint in `src` into `dst` as `k` shards of consecutive
/// tensors plus an index (total_size: the tensors' bytes) and config.json.
void shard(const std::string& src, const std::string& dst, std::size_t k) {
  fs::create_directories(dst);
  fs::copy_file(src + "/config.json", dst + "/config.json", fs::copy_options::overwrite_existing);
  const auto f = SafetensorsFile::read(src + "/model.safetensors");
  const std::vector<Tensor>& ts = f.tensors();
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < k; ++i) {
    std::vector<Tensor> part;
    for (std::size_t t = i * ts.size() / k; t < (i + 1) * ts.size() / k; ++t) {
      part.push_back(ts[t]);
      index["weight_map"][ts[t].name] = shard_name(i, k);
      bytes += static_cast<std::uint64_t>(ts[t].numel()) * dtype_size(ts[t].dtype);
    }
    write_safetensors(dst + "/" + shard_name(i, k), part, {{"format", "pt"}});
  }
  index["metadata"]["total_size"] = bytes;
  write_json(dst + "/model.safetensors.index.json", index);
}

Matrix<double> final_layer(const Model& m, const std::vector<long>& ids) {
  return forward<double>(m, m.arch().variant, embed_tokens<double>(m, ids), {false}).X.back();
}

}  // namespace

TEST_CASE("sharded copies of the real checkpoints load as the single files do", "[checkpoint][sharded][real]") {
  const std::string root = sanpath::test::real_models_dir();
  if (root.empty()) return;  // skipped outside CI (real_models_dir says so)
  // The Llama family is read by its own walk (layout_llama.cpp) through the same TensorStore.
  const std::pair<const char*, std::size_t> cases[] = {
      {"bert-ticket-classifier", 3}, {"gpt2-capp", 2}, {"llama-stories260k", 3}, {"llama-tinystories-xs", 2}};
  for (const auto& [name, k] : cases) {
    CAPTURE(name);
    const std::string dir = fresh(std::string("sharded_") + name);
    shard(root + "/" + name, dir, k);
    REQUIRE(!fs::exists(dir + "/model.safetensors"));
    const Model single = load_model(root + "/" + name), sharded = load_model(dir);
    require_same_arch(sharded.arch(), single.arch());
    require_same_layers(sharded, single);
    require_same_embeddings(sharded, single);
    const std::vector<long> ids = {1, 5, 9, 2, 0, 13};
    CHECK(final_layer(single, ids) == final_layer(sharded, ids));
    // The index itself may be given as the path.
    require_same_layers(load_model(dir + "/model.safetensors.index.json"), single);
  }
}

TEST_CASE("lying index files are refused with one line naming the shard and the tensor", "[checkpoint][sharded][errors]") {
  Spec s;
  s.layers = 2;
  s.emb = Layout::bert;
  const Model m = make_model(s);
  const std::string src = fresh("shard_src");
  save_hf(m, src, Layout::bert, "F32");
  const std::string dir = fresh("shard_lies");
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string s1 = dir + "/" + shard_name(0, 3), s2 = dir + "/" + shard_name(1, 3);
  const auto reshard = [&] {
    fs::remove_all(dir);
    shard(src, dir, 3);
  };
  const auto edit_index = [&](const std::function<void(json&)>& edit) {
    json j = read_json(index);
    edit(j);
    write_json(index, j);
  };
  reshard();
  require_same_layers(load_model(dir), load_model(src));

  SECTION("a shard that does not exist") {
    fs::remove(s2);
    std::string first;  // the first tensor (in name order) the index maps to the missing shard
    const json j = read_json(index);
    for (const auto& [t, file] : j.at("weight_map").items())
      if (first.empty() && file == shard_name(1, 3)) first = t;
    require_error([&] { load_model(dir); }, index, "weight_map." + first, {"shard " + shard_name(1, 3), "does not exist"});
  }
  SECTION("a tensor in two shards") {
    const auto first = SafetensorsFile::read(s1).tensors().front();
    edit_tensors(s2, [&](std::vector<Tensor>& ts) { ts.push_back(first); });
    require_error([&] { load_model(dir); }, s2, first.name, {"also in shard " + shard_name(0, 3)});
  }
  SECTION("a shard header that contradicts the index") {
    const std::string t = SafetensorsFile::read(s1).tensors().back().name;
    edit_index([&](json& j) { j["weight_map"][t] = shard_name(2, 3); });
    require_error([&] { load_model(dir); }, s1, t, {"maps it to shard " + shard_name(2, 3)});
  }
  SECTION("the index maps a tensor to a shard that does not hold it") {
    edit_index([&](json& j) { j["weight_map"]["bert.extra"] = shard_name(1, 3); });
    require_error([&] { load_model(dir); }, index, "weight_map.bert.extra", {shard_name(1, 3), "does not hold it"});
  }
  SECTION("a tensor the layout needs is in no shard") {
    const std::string t = "bert.encoder.layer.1.output.dense.bias";
    for (const std::string& p : {s1, s2, dir + "/" + shard_name(2, 3)})
      edit_tensors(p, [&](std::vector<Tensor>& ts) {
        ts.erase(std::remove_if(ts.begin(), ts.end(), [&](const Tensor& x) { return x.name == t; }), ts.end());
      });
    edit_index([&](json& j) {
      j["weight_map"].erase(t);
      j["metadata"]["total_size"] = j["metadata"]["total_size"].get<std::uint64_t>() - 4 * 8;
    });
    require_error([&] { load_model(dir); }, index, "tensors", {"1 missing", t});
  }
  SECTION("total_size that is not the shards' bytes") {
    edit_index([&](json& j) { j["metadata"]["total_size"] = 12; });
    require_error([&] { load_model(dir); }, index, "metadata.total_size", {"12 bytes"});
  }
  SECTION("a weight_map that is not an object of file names") {
    edit_index([&](json& j) { j["weight_map"] = json::array(); });
    require_error([&] { load_model(dir); }, index, "weight_map", {"must be an object"});
    reshard();
    edit_index([&](json& j) { j["weight_map"]["bert.encoder.layer.0.output.dense.bias"] = "../elsewhere.safetensors"; });
    require_error([&] { load_model(dir); }, index, "weight_map.bert.encoder.layer.0.output.dense.bias",
                  {"not a file name"});
  }
}

#include "sanpath/io/checkpoint.hpp"

#include "hf_config.hpp"
#include "hf_layout.hpp"
#include "native.hpp"

#include "sanpath/core/errors.hpp"
#include "sanpath/io/tensor_store.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

namespace sanpath {

namespace {

namespace fs = std::filesystem;
using io::fail;

Model load_hf(const std::string& config_path, TensorStore f, const std::string& source, const LoadOptions& options) {
  const io::HfConfig c{config_path, io::read_json_file(config_path)};
  // Shared: a streamed model keeps the files open for its passes.
  const auto store = std::make_shared<const TensorStore>(std::move(f));
  const io::Family& fam = io::detect_family(c, *store);
  if (options.layers != LoadOptions::Layers::automatic) return io::load_family(fam, c, store, source, options);
  // Whole if the weights fit the budget (the loader refuses before decoding
  // any), streamed otherwise.
  LoadOptions whole = options, streamed = options;
  whole.layers = LoadOptions::Layers::resident;
  streamed.layers = LoadOptions::Layers::streamed;
  try {
    return io::load_family(fam, c, store, source, whole);
  } catch (const ResourceError&) {
    return io::load_family(fam, c, store, source, streamed);
  }
}

bool is_index(const std::string& path) {
  const std::string suffix = ".index.json";
  return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Model load_model(const std::string& path) { return load_model(path, LoadOptions{}); }

LoadOptions::Layers parse_stream_layers(const std::string& text, const std::string& what) {
  if (text == "off") return LoadOptions::Layers::resident;
  if (text == "on") return LoadOptions::Layers::streamed;
  if (text == "auto") return LoadOptions::Layers::automatic;
  throw std::invalid_argument(what + ": '" + text + "' is not one of 'off', 'on', 'auto'");
}

int parse_first_layers(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 9 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const int n = digits ? std::stoi(text) : 0;
  if (n < 1) throw std::invalid_argument("'" + text + "' is not a number of layers (1, 2, ...)");
  return n;
}

Model load_model(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) fail(path, "file", "does not exist");
  if (fs::is_directory(st)) {
    const std::string config = (fs::path(path) / "config.json").string();
    const std::string weights = (fs::path(path) / "model.safetensors").string();
    const std::string index = (fs::path(path) / "model.safetensors.index.json").string();
    const bool single = fs::exists(weights), sharded = !single && fs::exists(index);
    if (!single && !sharded) {
      if (fs::exists(fs::path(path) / "pytorch_model.bin"))
        fail(path, "model.safetensors", "missing; only safetensors weights are supported, not pytorch_model.bin");
      fail(path, "model.safetensors", "missing");
    }
    if (!fs::exists(config)) fail(path, "config.json", "missing");
    return load_hf(config, single ? TensorStore::single(weights) : TensorStore::sharded(index), path, options);
  }
  const fs::path beside = fs::path(path).parent_path() / "config.json";
  if (is_index(path)) {
    if (!fs::exists(beside)) fail(path, "config.json", "missing beside the index");
    return load_hf(beside.string(), TensorStore::sharded(path), path, options);
  }
  SafetensorsMap file = SafetensorsMap::open(path);
  if (file.metadata().count(io::kNativeConfigKey)) return io::load_native(file, options);
  if (fs::exists(beside)) return load_hf(beside.string(), TensorStore::single(std::move(file)), path, options);
  fail(path, std::string("__metadata__.") + io::kNativeConfigKey,
       "missing: not a sanpath native file, and no config.json beside it for a HuggingFace checkpoint");
}

Model model_from_tensors(std::vector<Tensor> tensors, const std::string& config_json, const std::string& source) {
  io::json j = io::parse_json(config_json, source, "config");
  if (!j.is_object()) fail(source, "config", std::string("must be a JSON object, got ") + j.type_name());
  // The native configuration has sanpath's own keys; a HuggingFace config.json never has these.
  const bool native = j.contains("version") && j.contains("d_model");
  std::map<std::string, std::string> metadata;
  if (native) metadata = {{"format", "sanpath"}, {io::kNativeConfigKey, config_json}};
  // The tensors become the bytes of a safetensors file held in memory, read
  // by the same loaders (and checks) as a file on disk.
  SafetensorsMap f = SafetensorsMap::from_bytes(source, encode_safetensors(source, tensors, metadata));
  tensors.clear();
  if (native) return io::load_native(f);
  const io::HfConfig c{source + " config", std::move(j)};
  const auto store = std::make_shared<const TensorStore>(TensorStore::single(std::move(f)));
  return io::load_family(io::detect_family(c, *store), c, store, source, LoadOptions{});
}

void save_hf(const Model& model, const std::string& folder, Layout layout, const std::string& dtype) {
  io::save_family(io::family(layout), model, folder, dtype);
}

}  // namespace sanpath

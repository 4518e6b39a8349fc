#pragma once
// The native format: one safetensors file, F64, the configuration as JSON
// in __metadata__["sanpath.config"]; an exact round trip of a Model.

#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/model/model.hpp"

namespace sanpath::io {

/// The metadata key that marks a native file.
inline const char* const kNativeConfigKey = "sanpath.config";

/// Loads a native file (`f` has kNativeConfigKey in its metadata), read
/// whole, then cut to options.first_layers; the word table is always whole.
Model load_native(const SafetensorsMap& f, const LoadOptions& options = {});

}  // namespace sanpath::io

// libFuzzer target: see fuzz/entry_points.hpp (sanpath::fuzz::safetensors_file) and fuzz/README.md.
#include "entry_points.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sanpath::fuzz::safetensors_file(data, size);
  return 0;
}

// libFuzzer target: see fuzz/entry_points.hpp (sanpath::fuzz::hf_config) and fuzz/README.md.
#include "entry_points.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sanpath::fuzz::hf_config(data, size);
  return 0;
}

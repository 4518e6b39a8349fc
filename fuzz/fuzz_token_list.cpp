// libFuzzer target: see fuzz/entry_points.hpp (sanpath::fuzz::token_list) and fuzz/README.md.
#include "entry_points.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sanpath::fuzz::token_list(data, size);
  return 0;
}

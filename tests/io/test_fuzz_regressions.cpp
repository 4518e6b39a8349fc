// Replays every input the fuzzers ever flagged (and the seed corpora) through
// the same entry points as the libFuzzer targets (fuzz/entry_points.hpp):
// tests/fuzz_regressions/<target>/* and fuzz/corpus/<target>/*. An entry
// point must return or throw the documented rejection; a message that is
// not one line naming the file aborts the test binary.
#include "support/helpers.hpp"

#include "../../fuzz/entry_points.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using Entry = void (*)(const std::uint8_t*, std::size_t);

const std::map<std::string, Entry>& entries() {
  static const std::map<std::string, Entry> m = {{"safetensors", &sanpath::fuzz::safetensors_file},
                                                 {"hf_config", &sanpath::fuzz::hf_config},
                                                 {"token_list", &sanpath::fuzz::token_list},
                                                 {"arguments", &sanpath::fuzz::arguments}};
  return m;
}

const fs::path kSource = fs::path(__FILE__).parent_path().parent_path().parent_path();

std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.' && e.path().filename() != "README.md")
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void replay(const fs::path& root) {
  for (const auto& [target, entry] : entries())
    for (const fs::path& file : files_under(root / target)) {
      const std::string bytes = read_all(file);
      CAPTURE(target, file.string(), bytes.size());
      REQUIRE_NOTHROW(entry(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
    }
}

}  // namespace

TEST_CASE("fuzz regressions: every saved input passes through its entry point", "[fuzz]") {
  const fs::path dir = kSource / "tests" / "fuzz_regressions";
  REQUIRE(fs::is_directory(dir));
  // Every folder names a target.
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) {
      CAPTURE(e.path().string());
      REQUIRE(entries().count(e.path().filename().string()) == 1);
    }
  replay(dir);
}

TEST_CASE("fuzz seed corpora pass through their entry points", "[fuzz]") {
  const fs::path dir = kSource / "fuzz" / "corpus";
  REQUIRE(fs::is_directory(dir));
  for (const auto& [target, entry] : entries()) {
    CAPTURE(target);
    REQUIRE(!files_under(dir / target).empty());
  }
  replay(dir);
}

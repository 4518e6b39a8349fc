#pragma once
// The fuzzed entry points, shared by the libFuzzer targets (fuzz/*.cpp) and
// by the regression test that replays tests/fuzz_regressions/<target>/*
// (tests/test_fuzz_regressions.cpp). Each takes arbitrary bytes and either
// returns or throws the library's documented rejection (std::invalid_argument,
// or sanpath::ResourceError for sizes above the memory budget); anything else
// escapes as a finding. File errors must also be one line naming the file:
// a message that breaks that contract aborts (a finding too).
#include "sanpath/analysis/forward.hpp"
#include "sanpath/core/errors.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/report/format.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/core/resources.hpp"
#include "sanpath/core/scalar.hpp"
#include "sanpath/core/dispatch.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

namespace sanpath::fuzz {

/// A scratch folder for this process (in /dev/shm when there is one), removed at exit.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    const fs::path d = base / ("sanpath-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    static const std::string keep = d.string();
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(keep, ec);
    });
    return d.string();
  }();
  return dir;
}

inline void write_bytes(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

/// The contract of file errors: one line, starting with the file's path.
inline void require_file_message(const std::string& msg, const std::string& path) {
  if (msg.find('\n') != std::string::npos || msg.find('\r') != std::string::npos) {
    std::fprintf(stderr, "fuzz: message is not one line: %s\n", msg.c_str());
    std::abort();
  }
  if (msg.rfind(path, 0) != 0) {
    std::fprintf(stderr, "fuzz: message does not start with the file %s: %s\n", path.c_str(), msg.c_str());
    std::abort();
  }
}

/// Runs `f`; documented rejections of file input are checked, not findings.
inline void expect_file_errors(const std::string& path, const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    require_file_message(e.what(), path);
  } catch (const ResourceError& e) {
    require_file_message(e.what(), path);
  }
}

/// Large allocations refused early: a fuzzed size must not exhaust memory.
inline void limit_memory() {
  static const bool once = [] {
    set_memory_budget(std::uint64_t{64} << 20);
    return true;
  }();
  (void)once;
}

// ---- safetensors: the bytes are a whole file ---------------------------------

/// Reads the bytes as a safetensors file, then loads them as a model (a native
/// file's configuration in __metadata__, validation of every tensor).
inline void safetensors_file(const std::uint8_t* data, std::size_t size) {
  limit_memory();
  const std::string dir = scratch_dir() + "/st";
  static const bool made = std::filesystem::create_directories(dir) || true;
  (void)made;
  const std::string path = dir + "/input.safetensors";
  write_bytes(path, data, size);
  expect_file_errors(path, [&] {
    const SafetensorsFile f = SafetensorsFile::read(path);
    for (const Tensor& t : f.tensors())
      if (static_cast<std::int64_t>(t.values.size()) != t.numel()) {
        std::fprintf(stderr, "fuzz: %s has %zu values for numel %lld\n", t.name.c_str(), t.values.size(),
                     static_cast<long long>(t.numel()));
        std::abort();
      }
  });
  expect_file_errors(path, [&] { (void)load_model(path); });
}

// ---- config.json beside valid weights ------------------------------------------

/// Tiny checkpoints of each layout (2 layers, d = 4, 2 heads, MLP 8,
/// vocabulary 5, 4 positions), made once per process; each folder's
/// config.json is a link to the one fuzzed file.
inline const std::string& hf_config_path() {
  static const std::string config = [] {
    namespace fs = std::filesystem;
    const std::string dir = scratch_dir() + "/hf";
    fs::create_directories(dir);
    RandomModelSpec s;
    s.arch.layers = 2;
    s.arch.heads = 2;
    s.arch.d_model = 4;
    s.arch.d_qk = s.arch.d_v = 2;
    s.arch.d_ff = 8;
    s.arch.variant = {true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
    s.vocab = 5;
    s.max_positions = 4;
    s.seed = 1;
    const std::string cfg = dir + "/config.json";
    for (const Layout l : {Layout::bert, Layout::gpt2, Layout::albert}) {
      RandomModelSpec t = s;
      t.arch.shared_layers = l == Layout::albert;
      const Model m = random_model(t);
      // albert and gpt2 embeddings must be of their own kind: write those without.
      const Model w = l == Layout::bert ? m : Model(m.arch(), m.layers(), std::nullopt, "fuzz");
      const std::string folder = dir + "/" + to_string(l);
      save_hf(w, folder, l);
      fs::remove(folder + "/config.json");
      fs::create_symlink(cfg, folder + "/config.json");
    }
    return cfg;
  }();
  return config;
}

/// Writes the bytes as config.json and loads the BERT, GPT-2 and ALBERT
/// folders that share it.
inline void hf_config(const std::uint8_t* data, std::size_t size) {
  limit_memory();
  const std::string& cfg = hf_config_path();
  write_bytes(cfg, data, size);
  const std::string dir = scratch_dir() + "/hf/";
  for (const char* layout : {"bert", "gpt2", "albert"}) {
    const std::string folder = dir + layout;
    expect_file_errors(folder, [&] { (void)load_model(folder); });
  }
}

// ---- command-line arguments ---------------------------------------------------------

/// Rejections of command-line text: std::invalid_argument (the CLI turns the
/// message into one line and exit code 2).
inline void expect_argument_errors(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
  }
}

/// parse_token_list on the bytes as text; accepted lists hold ids >= 0.
inline void token_list(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  expect_argument_errors([&] {
    for (const long id : parse_token_list(text, "--tokens"))
      if (id < 0) std::abort();
  });
}

/// Every enumeration and precision parser on the bytes as text. Accepted
/// precisions are tiers within [53, max_bits]; accepted byte sizes are >= 1.
inline void arguments(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  expect_argument_errors([&] { (void)parse_mlp(text); });
  expect_argument_errors([&] { (void)parse_layernorm(text); });
  expect_argument_errors([&] { (void)parse_mask(text); });
  expect_argument_errors([&] { (void)parse_activation(text); });
  expect_argument_errors([&] { (void)parse_on_off(text, "skip"); });
  expect_argument_errors([&] { (void)parse_layout(text); });
  expect_argument_errors([&] { (void)parse_format(text); });
  expect_argument_errors([&] { (void)parse_center(text); });
  expect_argument_errors([&] {
    const Precision p = Precision::parse(text);
    if (!p.native_double && (p.bits < 53 || p.bits > Precision::max_bits())) std::abort();
    (void)with_scalar(p, [](auto) { return 0; });  // the tier exists
  });
  expect_argument_errors([&] {
    const PrecisionRequest r = PrecisionRequest::parse(text);
    if (!r.automatic && !r.fixed.native_double && (r.fixed.bits < 53 || r.fixed.bits > Precision::max_bits()))
      std::abort();
    (void)r.describe();
  });
  expect_argument_errors([&] {
    if (parse_byte_size(text, "--memory-budget") < 1) std::abort();
  });
}

}  // namespace sanpath::fuzz

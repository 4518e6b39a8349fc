// Resource limits and interruption (resources.hpp): size parsing and
// printing, the memory budget, the forward pass refusing before it
// allocates, and the interrupt flag stopping it between layers.
#include "support/helpers.hpp"

#include "sanpath/compute/forward.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/core/resources.hpp"

#include <functional>
#include <limits>
#include <string>

using namespace sanpath;

namespace {

/// Restores the default budget and a clear interrupt flag on scope exit.
struct Restore {
  ~Restore() {
    set_memory_budget(std::nullopt);
    clear_interrupt();
  }
};

Model small_model(int layers = 3) {
  RandomModelSpec s;
  s.arch.layers = layers;
  s.arch.heads = 2;
  s.arch.d_model = 8;
  s.arch.d_qk = s.arch.d_v = 4;
  s.arch.d_ff = 16;
  s.arch.variant = {true, MlpKind::residual, LayerNormKind::post, MaskKind::none};
  s.seed = 3;
  return random_model(s);
}

std::string resource_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const ResourceError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("parse_byte_size: units, percentages, rejections", "[resources]") {
  CHECK(parse_byte_size("1000") == 1000);
  CHECK(parse_byte_size("1000B") == 1000);
  CHECK(parse_byte_size("8G") == (std::uint64_t{8} << 30));
  CHECK(parse_byte_size("8g") == (std::uint64_t{8} << 30));
  CHECK(parse_byte_size("512MiB") == (std::uint64_t{512} << 20));
  CHECK(parse_byte_size("512 MiB") == (std::uint64_t{512} << 20));
  CHECK(parse_byte_size("1.5GB") == 1500000000);
  CHECK(parse_byte_size("2K") == 2048);
  CHECK(parse_byte_size("1T") == (std::uint64_t{1} << 40));
  const std::uint64_t phys = physical_memory_bytes();
  if (phys > 0) {
    const std::uint64_t half = parse_byte_size("50%");
    CHECK(half <= phys / 2 + 1);
    CHECK(half + 1 >= phys / 2);
  }
  for (const char* bad : {"", "0", "lots", "8X", "1..2", ".", "-1", "101%", "16EiB", "99999999999999999999999T",
                          "1e3", "0.1"}) {
    CAPTURE(bad);
    REQUIRE_THROWS_AS(parse_byte_size(bad, "--memory-budget"), std::invalid_argument);
  }
  REQUIRE_THROWS_WITH(parse_byte_size("lots", "--memory-budget"), Catch::Contains("--memory-budget: 'lots'"));
}

TEST_CASE("format_bytes and saturating arithmetic", "[resources]") {
  CHECK(format_bytes(0) == "0 bytes");
  CHECK(format_bytes(1023) == "1023 bytes");
  CHECK(format_bytes(1536) == "1.50 KiB (1536 bytes)");
  CHECK(format_bytes(std::uint64_t{3} << 30) == "3.00 GiB (3221225472 bytes)");
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  CHECK(mul_sat(max / 2, 3) == max);
  CHECK(mul_sat(0, max) == 0);
  CHECK(mul_sat(1u << 20, 1u << 20) == (std::uint64_t{1} << 40));
  CHECK(add_sat(max, 1) == max);
  CHECK(add_sat(2, 3) == 5);
  CHECK(scalar_bytes(false, 53) == 8);
  // An MPFR scalar holds at least its mpfr_t and its limbs.
  CHECK(scalar_bytes(true, 128) >= sizeof(mpfr_real<38>) + 16);
  CHECK(scalar_bytes(true, 32772) >= 32772 / 8);
}

TEST_CASE("memory budget: default 75% of physical memory, settable, message", "[resources]") {
  Restore restore;
  const std::uint64_t phys = physical_memory_bytes();
  if (phys > 0) CHECK(default_memory_budget() == phys / 4 * 3);
  CHECK(memory_budget() == default_memory_budget());
  set_memory_budget(std::uint64_t{1} << 20);
  CHECK(memory_budget() == (std::uint64_t{1} << 20));
  REQUIRE_NOTHROW(require_memory(std::uint64_t{1} << 20, "x"));
  const std::string msg = resource_message([] { require_memory((std::uint64_t{1} << 20) + 1, "m.safetensors: thing", "detail"); });
  CHECK(msg == "m.safetensors: thing: needs an estimated 1.00 MiB (1048577 bytes) of memory (detail), above the memory "
               "budget of 1.00 MiB (1048576 bytes) (set by --memory-budget or SANPATH_MEMORY_BUDGET)");
  set_memory_budget(std::nullopt);
  CHECK(memory_budget() == default_memory_budget());
}

TEST_CASE("forward refuses before allocating when the estimate exceeds the budget", "[resources]") {
  Restore restore;
  const Model m = small_model();
  RandomInputSpec in;
  in.n = 6;
  in.d = 8;
  const MatrixXd X = random_input(in);

  // The estimate covers what the trace holds.
  const ForwardTrace<double> t = forward<double>(m, m.arch().variant, X);
  std::uint64_t held = 0;
  for (const auto& x : t.X) held += static_cast<std::uint64_t>(x.size());
  for (const auto& layer : t.P)
    for (const auto& p : layer) held += static_cast<std::uint64_t>(p.size());
  const std::uint64_t estimate = forward_scalar_count(m.arch(), 6, true, true);
  CHECK(estimate >= held);
  CHECK(estimate <= 20 * held);  // and is not absurdly pessimistic
  // Without the attention trace, n² no longer scales with L·H.
  CHECK(forward_scalar_count(m.arch(), 1000, true, false) < forward_scalar_count(m.arch(), 1000, true, true) / 2);

  set_memory_budget(estimate * 8 - 1);  // 8 bytes per double
  const std::string msg = resource_message([&] { forward<double>(m, m.arch().variant, X); });
  CAPTURE(msg);
  CHECK(msg.find(": forward pass: needs an estimated ") != std::string::npos);
  CHECK(msg.find("3 layers × 2 heads × 6² attention entries") != std::string::npos);
  CHECK(msg.find("above the memory budget of") != std::string::npos);
  set_memory_budget(estimate * 8);
  REQUIRE_NOTHROW(forward<double>(m, m.arch().variant, X));

  // MPFR scalars are charged their limbs: the same run at 4098 bits needs more.
  const std::string hp = resource_message(
      [&] { forward<mpfr_real<1233>>(m, m.arch().variant, convert<mpfr_real<1233>>(X)); });
  CHECK(hp.find("4098-bit MPFR scalars") != std::string::npos);
}

TEST_CASE("an interrupt request stops the forward pass with Interrupted", "[resources]") {
  Restore restore;
  const Model m = small_model();
  RandomInputSpec in;
  in.n = 4;
  in.d = 8;
  const MatrixXd X = random_input(in);
  REQUIRE_FALSE(interrupt_requested());
  REQUIRE_NOTHROW(check_interrupt());
  request_interrupt();
  REQUIRE(interrupt_requested());
  REQUIRE_THROWS_AS(check_interrupt(), Interrupted);
  REQUIRE_THROWS_AS(forward<double>(m, m.arch().variant, X), Interrupted);
  REQUIRE_THROWS_AS(forward<mpfr_real<38>>(m, m.arch().variant, convert<mpfr_real<38>>(X)), Interrupted);
  clear_interrupt();
  REQUIRE_NOTHROW(forward<double>(m, m.arch().variant, X));
}

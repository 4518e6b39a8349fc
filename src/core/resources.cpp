#include "sanpath/core/resources.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <unistd.h>

namespace sanpath {

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

/// 0 = default (75% of physical memory).
std::atomic<std::uint64_t> g_budget{0};

static_assert(std::atomic<bool>::is_always_lock_free, "the interrupt flag must be usable from a signal handler");
std::atomic<bool> g_interrupted{false};

/// A cgroup limit file: a byte count, or "max" (no limit) -> 0.
std::uint64_t read_limit(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return 0;
  try {
    return std::stoull(s);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

std::uint64_t mul_sat(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > kMax / a) return kMax;
  return a * b;
}

std::uint64_t add_sat(std::uint64_t a, std::uint64_t b) { return b > kMax - a ? kMax : a + b; }

std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  std::uint64_t phys = pages > 0 && page > 0 ? mul_sat(static_cast<std::uint64_t>(pages), static_cast<std::uint64_t>(page)) : 0;
  for (const char* f : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const std::uint64_t lim = read_limit(f);
    if (lim > 0 && (phys == 0 || lim < phys)) phys = lim;
  }
  return phys;
}

std::uint64_t default_memory_budget() {
  const std::uint64_t phys = physical_memory_bytes();
  return phys == 0 ? (std::uint64_t{4} << 30) : phys / 4 * 3;
}

void set_memory_budget(std::optional<std::uint64_t> bytes) { g_budget.store(bytes ? std::max<std::uint64_t>(*bytes, 1) : 0); }

std::uint64_t memory_budget() {
  const std::uint64_t b = g_budget.load();
  return b != 0 ? b : default_memory_budget();
}

std::uint64_t parse_uint64(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 20 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  errno = 0;
  const unsigned long long v = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE) throw std::invalid_argument("'" + text + "' is not an integer in [0, 2^64)");
  return static_cast<std::uint64_t>(v);
}

std::uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  const auto bad = [&](const std::string& why) -> std::invalid_argument {
    std::string shown;
    for (const char ch : text.substr(0, 40)) shown += std::isprint(static_cast<unsigned char>(ch)) ? ch : '?';
    if (text.size() > 40) shown += "...";
    return std::invalid_argument(what + ": '" + shown + "' " + why);
  };
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  std::string unit = text.substr(i);
  if (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1)
    throw bad("is not a size (examples: 8G, 512MiB, 2000000000, 50%)");
  const long double value = std::strtold(number.c_str(), nullptr);
  long double factor = 1;
  if (unit.empty() || unit == "B") factor = 1;
  else if (unit == "%") {
    if (value > 100) throw bad("is more than 100% of the physical memory");
    const std::uint64_t phys = physical_memory_bytes();
    if (phys == 0) throw bad("is a percentage, but the physical memory size is unknown");
    factor = static_cast<long double>(phys) / 100;
  } else {
    static const char* const units = "KMGT";
    const std::size_t k = unit.empty() ? std::string::npos : std::string(units).find(unit[0]);
    const std::string rest = k == std::string::npos ? unit : unit.substr(1);
    if (k == std::string::npos || !(rest.empty() || rest == "I" || rest == "IB" || rest == "B"))
      throw bad("has an unknown unit '" + unit + "' (K, M, G, T, KiB..TiB, KB..TB, %)");
    factor = std::pow(rest == "B" ? 1000.0L : 1024.0L, static_cast<long double>(k + 1));
  }
  const long double bytes = std::floor(value * factor);
  if (!(bytes >= 1)) throw bad("is below 1 byte");
  if (bytes >= 18446744073709551615.0L) throw bad("is above 2^64 - 1 bytes");
  return static_cast<std::uint64_t>(bytes);
}

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  static const char* const names[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  long double v = static_cast<long double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2Lf %s", v, names[u]);
  return std::string(buf) + " (" + std::to_string(bytes) + " bytes)";
}

void require_memory(std::uint64_t estimate_bytes, const std::string& what, const std::string& detail) {
  const std::uint64_t budget = memory_budget();
  if (estimate_bytes <= budget) return;
  const bool is_default = g_budget.load() == 0;
  throw ResourceError(what + ": needs an estimated " + format_bytes(estimate_bytes) + " of memory" +
                      (detail.empty() ? "" : " (" + detail + ")") + ", above the memory budget of " +
                      format_bytes(budget) +
                      (is_default ? " (75% of physical memory; raise it with --memory-budget or SANPATH_MEMORY_BUDGET)"
                                  : " (set by --memory-budget or SANPATH_MEMORY_BUDGET)"));
}

std::uint64_t scalar_bytes(bool is_mpfr, long bits) {
  if (!is_mpfr) return 8;
  const auto limbs = static_cast<std::uint64_t>((std::max(bits, 1L) + 63) / 64);
  // mpfr_t (precision, sign, exponent, limb pointer) + limbs + MPFR's
  // allocation-size limb + malloc's chunk header.
  return 32 + 8 * (limbs + 1) + 16;
}

void request_interrupt() noexcept { g_interrupted.store(true, std::memory_order_relaxed); }
void clear_interrupt() noexcept { g_interrupted.store(false, std::memory_order_relaxed); }
bool interrupt_requested() noexcept { return g_interrupted.load(std::memory_order_relaxed); }
void check_interrupt() {
  if (interrupt_requested()) throw Interrupted();
}

}  // namespace sanpath

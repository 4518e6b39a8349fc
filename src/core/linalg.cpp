#include "sanpath/core/linalg.hpp"

#include "core/linalg_impl.hpp"  // SANPATH_IFMA_KERNEL

#include <atomic>
#include <cfenv>
#include <exception>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace sanpath {

namespace {
std::atomic<bool> ifma_allowed{true};
std::atomic<int> product_threads_setting{0};
thread_local int serial_products_depth = 0;
}  // namespace

void set_product_threads(int threads) { product_threads_setting.store(threads < 0 ? 0 : threads); }

int product_threads() {
  if (serial_products_depth > 0) return 1;
  const int t = product_threads_setting.load();
  if (t > 0) return t;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

void allow_ifma_products(bool allowed) { ifma_allowed.store(allowed); }

bool ifma_products_active() {
#if SANPATH_IFMA_KERNEL
  static const bool cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512ifma");
  return cpu && ifma_allowed.load();
#else
  return false;
#endif
}

std::string double_products_isa() { return detail::isa_name(detail::double_isa()); }

std::vector<std::string> supported_double_products_isas() {
  std::vector<std::string> out;
  for (int l = 0; l <= static_cast<int>(detail::cpu_double_isa()); ++l)
    out.emplace_back(detail::isa_name(static_cast<detail::DoubleIsa>(l)));
  return out;
}

void set_double_products_isa(const std::string& level) {
  const std::optional<detail::DoubleIsa> isa = detail::isa_from_name(level);
  if (!isa)
    throw std::invalid_argument("double products: unknown level '" + level + "' (levels: " + detail::isa_names() + ")");
  detail::set_double_isa(*isa);
}

SerialProductsScope::SerialProductsScope() { ++serial_products_depth; }
SerialProductsScope::~SerialProductsScope() { --serial_products_depth; }

void run_at_once(const std::vector<std::function<void(bool)>>& tasks) {
  if (tasks.size() >= 2 && product_threads() >= 2) {
    std::promise<bool> go;
    const std::shared_future<bool> started = go.get_future().share();
    const int mode = std::fegetround();
    std::vector<std::future<void>> others;
    bool all = true;
    try {
      for (std::size_t i = 1; i < tasks.size(); ++i)
        others.push_back(std::async(std::launch::async, [&tasks, started, mode, i] {
          if (!started.get()) return;  // not every thread could be started
          std::fesetround(mode);
          MpfrThreadCaches caches;
          SerialProductsScope serial;
          tasks[i](true);
        }));
    } catch (const std::system_error&) {
      all = false;  // no thread to be had: one after the other below
    }
    go.set_value(all);
    if (all) {
      std::exception_ptr error;
      try {
        SerialProductsScope serial;
        tasks[0](true);
      } catch (...) {
        error = std::current_exception();
      }
      for (std::future<void>& f : others) {
        try {
          f.get();
        } catch (...) {
          if (!error) error = std::current_exception();
        }
      }
      if (error) std::rethrow_exception(error);
      return;
    }
    for (std::future<void>& f : others) f.wait();
  }
  for (const std::function<void(bool)>& task : tasks) task(false);
}

void run_side_by_side(const std::function<void()>& first, const std::function<void()>& second) {
  run_at_once({[&first](bool) { first(); }, [&second](bool) { second(); }});
}

}  // namespace sanpath

#include "sanpath/core/linalg.hpp"

#include "core/linalg_impl.hpp"  // SANPATH_IFMA_KERNEL

#include <atomic>
#include <future>
#include <system_error>
#include <thread>

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

SerialProductsScope::SerialProductsScope() { ++serial_products_depth; }
SerialProductsScope::~SerialProductsScope() { --serial_products_depth; }

void run_side_by_side(const std::function<void()>& first, const std::function<void()>& second) {
  if (product_threads() >= 2) {
    std::future<void> other;
    try {
      other = std::async(std::launch::async, [&second] {
        MpfrThreadCaches caches;
        SerialProductsScope serial;
        second();
      });
    } catch (const std::system_error&) {
      // No thread to be had: one after the other below.
    }
    if (other.valid()) {
      try {
        SerialProductsScope serial;
        first();
      } catch (...) {
        other.wait();
        throw;
      }
      other.get();
      return;
    }
  }
  first();
  second();
}

}  // namespace sanpath

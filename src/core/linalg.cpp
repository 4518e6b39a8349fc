#include "sanpath/core/linalg.hpp"

#include "sanpath/core/distributed.hpp"

#include "core/linalg_impl.hpp"  // SANPATH_IFMA_KERNEL

#include <algorithm>
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
thread_local int product_threads_cap = 0;  // 0: none
thread_local const ThreadGroup* thread_group = nullptr;
thread_local int thread_group_index = 0;
}  // namespace

void set_product_threads(int threads) { product_threads_setting.store(threads < 0 ? 0 : threads); }

int product_threads() {
  const int t = product_threads_setting.load();
  const unsigned hw = std::thread::hardware_concurrency();
  // By default the cores, shared by the MPI ranks on this machine.
  int all = t > 0 ? t : std::max(1, (hw == 0 ? 1 : static_cast<int>(hw)) / local_processes());
  if (product_threads_cap > 0) all = std::min(all, product_threads_cap);
  if (thread_group) all = std::min(all, thread_group->share(thread_group_index));
  return all;
}

ThreadGroup::ThreadGroup(int total, int tasks) : total_(std::max(total, 1)), running_(std::max(tasks, 1)) {}

int ThreadGroup::share(int index) const { return thread_share(total_, std::max(running_.load(), 1), index); }

void ThreadGroup::leave() { running_.fetch_sub(1); }

ThreadGroupScope::ThreadGroupScope(ThreadGroup& group, int index)
    : group_(group),
      previous_group_(thread_group), previous_index_(thread_group_index), previous_cap_(product_threads_cap) {
  // The outer group's share now becomes a fixed cap: a group never gives more than its caller had.
  if (thread_group) {
    const int outer = thread_group->share(thread_group_index);
    product_threads_cap = product_threads_cap > 0 ? std::min(product_threads_cap, outer) : outer;
  }
  thread_group = &group;
  thread_group_index = index;
}

ThreadGroupScope::~ThreadGroupScope() {
  group_.leave();
  thread_group = previous_group_;
  thread_group_index = previous_index_;
  product_threads_cap = previous_cap_;
}

int resolve_threads(int threads) {
  if (threads < 0) throw std::invalid_argument("threads: " + std::to_string(threads) + " is negative");
  return threads == 0 ? product_threads() : threads;
}

void check_thread_count(long threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw std::invalid_argument("--threads: " + std::to_string(threads) + " is not a thread count in [0, " +
                                std::to_string(kMaxThreads) + "] (0: all cores)");
}

int thread_share(int total, int parts, int index) {
  if (parts <= 0) return std::max(total, 1);
  const int share = total / parts + (index < total % parts ? 1 : 0);
  return std::max(share, 1);
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

ProductThreadsScope::ProductThreadsScope(int cap) : previous_(product_threads_cap) {
  const int c = std::max(cap, 1);
  product_threads_cap = previous_ > 0 ? std::min(previous_, c) : c;
}
ProductThreadsScope::~ProductThreadsScope() { product_threads_cap = previous_; }

void run_at_once(const std::vector<std::function<void(bool)>>& tasks) {
  const int threads = product_threads();
  if (tasks.size() >= 2 && threads >= 2) {
    ThreadGroup group(threads, static_cast<int>(tasks.size()));
    // Runs task i in the group; its threads go to the others when it ends.
    const auto run = [&tasks, &group](std::size_t i) {
      ThreadGroupScope task(group, static_cast<int>(i));
      tasks[i](true);
    };
    std::promise<bool> go;
    const std::shared_future<bool> started = go.get_future().share();
    const int mode = std::fegetround();
    std::vector<std::future<void>> others;
    bool all = true;
    try {
      for (std::size_t i = 1; i < tasks.size(); ++i)
        others.push_back(std::async(std::launch::async, [&run, started, mode, i] {
          if (!started.get()) return;  // not every thread could be started (then no task ran in the group)
          std::fesetround(mode);
          MpfrThreadCaches caches;
          run(i);
        }));
    } catch (const std::system_error&) {
      all = false;  // no thread to be had: one after the other below
    }
    go.set_value(all);
    if (all) {
      std::exception_ptr error;
      try {
        run(0);
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

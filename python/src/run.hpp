#pragma once
// Running library calls from Python: the GIL is released while the library
// works on a worker thread; the calling thread waits and, every 50 ms, takes
// the GIL to run Python's signal handlers (PyErr_CheckSignals). A Ctrl-C
// raises KeyboardInterrupt there; the library is then told to stop
// (sanpath::request_interrupt, polled by check_interrupt between units of
// work) and the KeyboardInterrupt propagates once the worker has returned.
#include <pybind11/pybind11.h>

#include "sanpath/analysis/forward.hpp"
#include "sanpath/core/distributed.hpp"
#include "sanpath/core/resources.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

namespace sanpath_py {

namespace py = pybind11;

/// A progress callback (a Python callable or None) as a library ProgressFn.
/// The callable runs with the GIL; an exception it raises stops the
/// computation (request_interrupt) and is raised in its place.
class ProgressBridge {
 public:
  explicit ProgressBridge(py::object callback) : callback_(std::move(callback)) {}
  sanpath::ProgressFn fn() {
    if (callback_.is_none()) return {};
    return [this](const sanpath::ProgressStep& s) {
      py::gil_scoped_acquire gil;
      if (failed_) return;
      try {
        callback_(s.stage, s.done, s.total);
      } catch (py::error_already_set& e) {
        failed_ = true;
        e.restore();
        PyErr_Fetch(&type_, &value_, &trace_);
        sanpath::request_interrupt();
      }
    };
  }
  /// Restores the callback's exception (GIL held); true if there was one.
  bool restore() {
    if (!failed_) return false;
    PyErr_Restore(type_, value_, trace_);
    type_ = value_ = trace_ = nullptr;
    return true;
  }

 private:
  py::object callback_;
  bool failed_ = false;
  PyObject *type_ = nullptr, *value_ = nullptr, *trace_ = nullptr;
};

/// Waits with the GIL released until `poll()` (called without the GIL,
/// expected to block for a short while) returns true. Returns false, with
/// the KeyboardInterrupt (or a signal handler's exception) set, when a
/// signal handler raised in the meantime.
template <class Poll> bool wait_released(Poll&& poll) {
  for (;;) {
    {
      py::gil_scoped_release release;
      if (poll()) return true;
    }
    if (PyErr_CheckSignals() != 0) return false;
  }
}

/// Runs `f()` on a worker thread with the GIL released; see the file comment.
template <class F> auto run_released(F&& f, ProgressBridge* bridge = nullptr) -> decltype(f()) {
  using R = decltype(f());
  sanpath::clear_interrupt();
  std::optional<R> result;
  std::exception_ptr error;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread worker([&] {
    sanpath::SharingThreadScope sharing;  // under mpi4py this thread shares batches and path shards over the ranks
    try {
      result.emplace(f());
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lk(mu);
    done = true;
    cv.notify_all();
  });
  const auto finished = [&] {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::milliseconds(50), [&] { return done; });
  };
  const bool completed = wait_released(finished);
  if (!completed) {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    sanpath::request_interrupt();
    {
      py::gil_scoped_release release;
      worker.join();
    }
    sanpath::clear_interrupt();
    PyErr_Restore(type, value, trace);
    throw py::error_already_set();
  }
  worker.join();
  sanpath::clear_interrupt();
  if (bridge && bridge->restore()) throw py::error_already_set();
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

}  // namespace sanpath_py

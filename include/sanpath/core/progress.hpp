#pragma once
/// \file progress.hpp
/// Progress of a long computation, reported as structured steps: a stage
/// ("forward pass at 2051 bits") and an optional count (done of total units
/// of that stage). The library calls a ProgressFn; a display (the CLI's bar,
/// a Python callback) draws it. No text is parsed back.

#include <functional>
#include <string>

namespace sanpath {

/// One report: `stage`, and `done` of `total` units (total 0: no count).
struct ProgressStep {
  std::string stage;
  long done = 0;
  long total = 0;
  /// "stage [done/total]", or "stage" when total is 0 (for logs and displays).
  std::string message() const;
};

/// Progress callback. May be empty (no reporting).
using ProgressFn = std::function<void(const ProgressStep&)>;

/// Calls `progress` (when set) with ProgressStep{stage, done, total}.
void report_progress(const ProgressFn& progress, const std::string& stage, long done, long total);

/// A callback that prefixes every stage reported to `progress` with `prefix`
/// (e.g. "collapse: "); empty when `progress` is empty.
ProgressFn prefixed_progress(const ProgressFn& progress, const std::string& prefix);

/// A callback that passes every step to `progress` under a lock of its own,
/// for work that reports from several threads at once; empty when `progress`
/// is empty.
ProgressFn serialized_progress(const ProgressFn& progress);

/// Progress of a pass over `layers` layers as stage `stage`: reports 0 of
/// `layers` at once, then returns the per-layer callback on_layer(l, L) that
/// reports l of L. Returns an empty callback when `progress` is empty.
std::function<void(int, int)> layer_progress(const ProgressFn& progress, const std::string& stage, int layers);

}  // namespace sanpath

#pragma once
// Progress on stderr: a one-line bar with rate and ETA when stderr is a
// terminal, nothing when it is not (pipes, files, CI) or with --quiet. The
// library reports ProgressSteps (a stage and an optional count); this draws them.
#include "sanpath/core/progress.hpp"

#include <chrono>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace sanpath::cli {

/// Draws progress messages on one terminal line, redrawn in place (\r and
/// erase-to-end-of-line). A counted message is a bar; a plain one is shown
/// as text. The line is erased when the bar is destroyed, so that what
/// follows (results, an error message) starts on a clean line.
class ProgressBar {
 public:
  using Clock = std::chrono::steady_clock;
  /// `width`: terminal columns (80 when not positive).
  ProgressBar(std::ostream& out, int width);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// Shows `step`; redraws at most every 100 ms, except when the stage
  /// differs from the one drawn last and for the last unit of a stage. Each
  /// stage's rate and ETA count from its first step (or its step 0), so stages
  /// reported alternately (passes that run side by side) keep their own.
  /// Safe to call from several threads.
  void update(const ProgressStep& step);
  void update(const ProgressStep& step, Clock::time_point now);
  /// Erases the line (idempotent).
  void clear();

 private:
  std::ostream& out_;
  int width_;
  std::mutex mutex_;
  std::map<std::string, Clock::time_point> stage_starts_;
  std::string drawn_stage_;
  Clock::time_point last_draw_{};
  bool drawn_ = false;
};

/// The line drawn for `step` after `seconds` in its stage, fitted to `width`
/// columns: "sanpath: <stage> [#####-----] 3/5 1.4/s ETA 2s"; the stage is
/// shortened with "…" when the line would not fit.
std::string progress_line(const ProgressStep& step, double seconds, int width);

/// "0:07", "12:40", "1:02:03" (h:mm:ss above an hour); "?" when not finite.
std::string format_duration(double seconds);

/// A ProgressFn that draws on stderr when it is a terminal and `quiet` is
/// off; an empty ProgressFn (no output at all) otherwise. The line is erased
/// when the last copy of the returned function is destroyed.
ProgressFn terminal_progress(bool quiet);

}  // namespace sanpath::cli

#include "progress.hpp"

#include "sanpath/core/distributed.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sys/ioctl.h>
#include <unistd.h>

namespace sanpath::cli {

namespace {

int terminal_columns(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
  return 80;
}

/// Number of code points of UTF-8 text (terminal columns, near enough).
std::size_t columns(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

/// The first `cols` code points of `s`.
std::string take_columns(const std::string& s, std::size_t cols) {
  std::size_t n = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == cols) break;
      ++n;
    }
  }
  return s.substr(0, i);
}

std::string format_rate(double per_second) {
  char buf[32];
  if (per_second >= 100) {
    std::snprintf(buf, sizeof buf, "%.0f/s", per_second);
  } else if (per_second >= 1) {
    std::snprintf(buf, sizeof buf, "%.1f/s", per_second);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f/s", per_second);
  }
  return buf;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  }
  return buf;
}

std::string progress_line(const ProgressStep& step, double seconds, int width) {
  const std::string head = "sanpath: ";
  if (step.total <= 0) {
    const std::size_t room = width > 12 ? static_cast<std::size_t>(width) - 1 - head.size() : 1;
    const std::string text = columns(step.stage) > room ? take_columns(step.stage, room - 1) + "…" : step.stage;
    return head + text;
  }
  std::string tail = " " + std::to_string(step.done) + "/" + std::to_string(step.total);
  if (step.done > 0 && seconds > 0) {
    const double rate = static_cast<double>(step.done) / seconds;
    tail += " " + format_rate(rate);
    tail += step.done < step.total ? " ETA " + format_duration(static_cast<double>(step.total - step.done) / rate)
                                   : " " + format_duration(seconds);
  }
  const int bar_cells = 20;
  const auto filled = static_cast<int>(static_cast<double>(step.done) / static_cast<double>(step.total) * bar_cells);
  const std::string bar = " [" + std::string(static_cast<std::size_t>(filled), '#') +
                          std::string(static_cast<std::size_t>(bar_cells - filled), '-') + "]";
  // Fit: head + stage + bar + tail < width; shorten the stage first.
  const long room = static_cast<long>(width) - 1 - static_cast<long>(head.size() + bar.size() + tail.size());
  std::string stage = step.stage;
  if (room < 8) {
    stage = take_columns(stage, 8);
  } else if (columns(stage) > static_cast<std::size_t>(room)) {
    stage = take_columns(stage, static_cast<std::size_t>(room) - 1) + "…";
  }
  return head + stage + bar + tail;
}

ProgressBar::ProgressBar(std::ostream& out, int width) : out_(out), width_(width > 0 ? width : 80) {}

ProgressBar::~ProgressBar() { clear(); }

void ProgressBar::clear() {
  const std::lock_guard<std::mutex> guard(mutex_);
  if (!drawn_) return;
  out_ << "\r\033[K" << std::flush;
  drawn_ = false;
}

void ProgressBar::update(const ProgressStep& step) { update(step, Clock::now()); }

void ProgressBar::update(const ProgressStep& step, Clock::time_point now) {
  const std::lock_guard<std::mutex> guard(mutex_);
  // A stage starts at its first step, or again at a step 0 (a name reused).
  auto [it, first] = stage_starts_.emplace(step.stage, now);
  if (!first && step.done == 0) it->second = now;
  const Clock::time_point start = it->second;
  const bool other_stage = !drawn_ || step.stage != drawn_stage_;
  const bool last = step.total > 0 && step.done == step.total;
  if (!other_stage && !last && now - last_draw_ < std::chrono::milliseconds(100)) return;
  const double seconds = std::chrono::duration<double>(now - start).count();
  out_ << "\r\033[K" << progress_line(step, seconds, width_) << std::flush;
  drawn_ = true;
  drawn_stage_ = step.stage;
  last_draw_ = now;
}

ProgressFn terminal_progress(bool quiet) {
  if (quiet || !::isatty(STDERR_FILENO) || world().rank != 0) return {};  // under MPI: rank 0's bar
  auto bar = std::make_shared<ProgressBar>(std::cerr, terminal_columns(STDERR_FILENO));
  return [bar](const ProgressStep& step) { bar->update(step); };
}

}  // namespace sanpath::cli

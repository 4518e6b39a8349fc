#include "sanpath/core/progress.hpp"

#include <memory>
#include <mutex>

namespace sanpath {

std::string ProgressStep::message() const {
  return total > 0 ? stage + " [" + std::to_string(done) + "/" + std::to_string(total) + "]" : stage;
}

void report_progress(const ProgressFn& progress, const std::string& stage, long done, long total) {
  if (progress) progress(ProgressStep{stage, done, total});
}

ProgressFn prefixed_progress(const ProgressFn& progress, const std::string& prefix) {
  if (!progress) return {};
  return [progress, prefix](const ProgressStep& step) { progress(ProgressStep{prefix + step.stage, step.done, step.total}); };
}

ProgressFn serialized_progress(const ProgressFn& progress) {
  if (!progress) return {};
  auto lock = std::make_shared<std::mutex>();
  return [progress, lock](const ProgressStep& step) {
    std::lock_guard<std::mutex> guard(*lock);
    progress(step);
  };
}

std::function<void(int, int)> layer_progress(const ProgressFn& progress, const std::string& stage, int layers) {
  if (!progress) return {};
  report_progress(progress, stage, 0, layers);
  return [progress, stage](int l, int total) { report_progress(progress, stage, l, total); };
}

}  // namespace sanpath

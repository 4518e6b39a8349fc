#include "sanpath/model/task_head.hpp"

#include <cmath>
#include <stdexcept>

namespace sanpath {

std::string to_string(TaskHeadKind kind) {
  return kind == TaskHeadKind::classifier ? "classifier" : "language model";
}

long TaskHead::width() const {
  if (norm_g.size() > 0) return static_cast<long>(norm_g.size());
  if (pooler_W.size() > 0) return static_cast<long>(pooler_W.cols());
  if (project_out.size() > 0) return static_cast<long>(project_out.cols());
  return static_cast<long>(output_W.cols());
}

void TaskHead::check() const {
  const auto fail = [](const std::string& field, const std::string& why) {
    throw std::invalid_argument("task head: " + field + ": " + why);
  };
  const auto n = [](Eigen::Index v) { return std::to_string(v); };
  Eigen::Index w = width();
  if (w < 1) fail("width", "the head reads rows of no entries");
  if (norm_g.size() > 0 && norm_b.size() != w)
    fail("norm_b", "has " + n(norm_b.size()) + " entries, the norm's gain " + n(w));
  if (norm_g.size() > 0 && !(norm_eps >= 0 && std::isfinite(norm_eps))) fail("norm_eps", "must be finite and >= 0");
  if (pooler_W.size() > 0) {
    if (pooler_W.cols() != w) fail("pooler_W", "reads " + n(pooler_W.cols()) + " entries, the rows have " + n(w));
    if (pooler_b.size() != pooler_W.rows()) fail("pooler_b", "has " + n(pooler_b.size()) + " entries, expected " + n(pooler_W.rows()));
    w = pooler_W.rows();
  }
  if (project_out.size() > 0) {
    if (project_out.cols() != w) fail("project_out", "reads " + n(project_out.cols()) + " entries, the rows have " + n(w));
    w = project_out.rows();
  }
  if (output_W.rows() < 1 || output_W.cols() != w)
    fail("output_W", "is " + n(output_W.rows()) + "×" + n(output_W.cols()) + ", expected N×" + n(w));
  if (output_b.size() > 0 && output_b.size() != output_W.rows())
    fail("output_b", "has " + n(output_b.size()) + " entries, expected " + n(output_W.rows()));
  if (softcap && !(*softcap > 0 && std::isfinite(*softcap))) fail("softcap", "must be finite and > 0");
}

}  // namespace sanpath

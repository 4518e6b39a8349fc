#include "sanpath/model/task_head.hpp"

namespace sanpath {

std::string to_string(TaskHeadKind kind) {
  return kind == TaskHeadKind::classifier ? "classifier" : "language model";
}

}  // namespace sanpath

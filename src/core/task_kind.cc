#include "core/task_kind.h"

namespace baton {

TaskKind KindOf(const Task& task) {
  if (task.parallel) return TaskKind::kParallel;
  if (task.each) return TaskKind::kEach;
  if (task.subjob) return TaskKind::kSubJob;
  return TaskKind::kRunnable;
}

std::string_view ToString(TaskKind kind) {
  switch (kind) {
    case TaskKind::kRunnable:
      return "runnable";
    case TaskKind::kParallel:
      return "parallel";
    case TaskKind::kEach:
      return "each";
    case TaskKind::kSubJob:
      return "subjob";
  }
  return "unknown";
}

}  // namespace baton

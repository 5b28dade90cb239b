#include "core/task_kind.h"

namespace baton {

TaskKind KindOf(const Task& task) {
  if (task.parallel) return TaskKind::kParallel;
  if (task.each) return TaskKind::kEach;
  if (task.subjob) return TaskKind::kSubJob;
  if (task.switch_) return TaskKind::kSwitch;
  if (task.loop) return TaskKind::kLoop;
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
    case TaskKind::kSwitch:
      return "switch";
    case TaskKind::kLoop:
      return "loop";
  }
  return "unknown";
}

const std::vector<Task>& SwitchBranch(const Switch& s, std::string_view value) {
  for (const SwitchCase& c : s.cases) {
    if (c.key == value) return c.tasks;
  }
  return s.default_tasks;
}

}  // namespace baton

#include "core/task_kind.h"

namespace baton {

TaskKind KindOf(const Task& task) {
  if (task.handles != Handles::kNone) return TaskKind::kHandler;
  if (task.parallel) return TaskKind::kParallel;
  if (task.each) return TaskKind::kEach;
  if (task.subjob) return TaskKind::kSubJob;
  if (task.switch_) return TaskKind::kSwitch;
  if (task.loop) return TaskKind::kLoop;
  if (task.wait) return TaskKind::kWait;
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
    case TaskKind::kHandler:
      return "handler";
    case TaskKind::kWait:
      return "wait";
  }
  return "unknown";
}

const std::vector<Task>& HandlerTasks(const Task& handler, const Job& job) {
  static const std::vector<Task> kNone;
  switch (handler.handles) {
    case Handles::kTaskFailure:
      return handler.on_failure ? handler.on_failure->tasks : kNone;
    case Handles::kJobFailure:
      return job.on_failure;
    case Handles::kJobFinally:
      return job.finally;
    case Handles::kNone:
      break;
  }
  return kNone;
}

bool IsJobHandler(const Task& task) {
  return task.handles == Handles::kJobFailure || task.handles == Handles::kJobFinally;
}

std::string_view ToString(Handles handles) {
  switch (handles) {
    case Handles::kTaskFailure:
      return "onFailure";
    case Handles::kJobFailure:
      return "job.onFailure";
    case Handles::kJobFinally:
      return "job.finally";
    case Handles::kNone:
      break;
  }
  return "";
}

std::optional<Handles> ParseHandles(std::string_view text) {
  for (Handles h : {Handles::kTaskFailure, Handles::kJobFailure, Handles::kJobFinally}) {
    if (ToString(h) == text) return h;
  }
  return std::nullopt;
}

std::string_view ToString(Then then) { return then == Then::kContinue ? "continue" : "fail"; }

const std::vector<Task>& SwitchBranch(const Switch& s, std::string_view value) {
  for (const SwitchCase& c : s.cases) {
    if (c.key == value) return c.tasks;
  }
  return s.default_tasks;
}

}  // namespace baton

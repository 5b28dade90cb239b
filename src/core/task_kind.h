// What a task is, as one closed set. Code that treats kinds differently switches on it
// with no `default:` (flow compiles with -Werror=switch), so adding a kind is a compile
// error at every place that must handle it.
#pragma once

#include <string_view>

#include "core/job.h"

namespace baton {

enum class TaskKind {
  kRunnable,  // run by an executor (a worker, through the broker)
  kParallel,  // its tasks at once
  kEach,      // its task once per item of a list
  kSubJob,    // a job of its own
};

// The kind of a definition. Decoding guarantees at most one of parallel, each, subjob.
TaskKind KindOf(const Task& task);

std::string_view ToString(TaskKind kind);

}  // namespace baton

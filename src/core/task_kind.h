// What a task is, as one closed set. Code that treats kinds differently switches on it
// with no `default:` (flow compiles with -Werror=switch), so adding a kind is a compile
// error at every place that must handle it.
#pragma once

#include <string_view>
#include <type_traits>

#include "core/job.h"

namespace baton {

enum class TaskKind {
  kRunnable,  // run by an executor (a worker, through the broker)
  kParallel,  // its tasks at once
  kEach,      // its task once per item of a list
  kSubJob,    // a job of its own
  kSwitch,    // the tasks of the case its value picks, one after another
  kLoop,      // its tasks one after another, again until its condition or max stops it
};

// The kind of a definition. Decoding guarantees at most one of parallel, each, subjob,
// switch, loop.
TaskKind KindOf(const Task& task);

// Calls `fn` on every task a composite definition holds directly and runs in the same
// job (a parallel's, an each's one, every case's and the default of a switch, a loop's;
// not a subjob's, which are a job of their own), mutable or not as `task` is.
template <typename T, typename F>
requires std::is_same_v<std::remove_const_t<T>, Task>
void ForEachSubtask(T& task, F&& fn) {
  if (task.parallel) {
    for (auto& child : task.parallel->tasks) fn(child);
  }
  if (task.each) fn(*task.each->task);
  if (task.switch_) {
    for (auto& c : task.switch_->cases) {
      for (auto& child : c.tasks) fn(child);
    }
    for (auto& child : task.switch_->default_tasks) fn(child);
  }
  if (task.loop) {
    for (auto& child : task.loop->tasks) fn(child);
  }
}

// The tasks a switch runs once its value is `value`: its case's, else its default's.
const std::vector<Task>& SwitchBranch(const Switch& s, std::string_view value);

std::string_view ToString(TaskKind kind);

}  // namespace baton

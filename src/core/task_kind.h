// What a task is, as one closed set. Code that treats kinds differently switches on it
// with no `default:` (flow compiles with -Werror=switch), so adding a kind is a compile
// error at every place that must handle it.
#pragma once

#include <optional>
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
  kHandler,   // cleanup tasks one after another, made by the engine (Task::handles)
  kWait,      // waits for a time or a signal, holding no worker (decided by flow's timers)
};

// The kind of a definition. Decoding guarantees at most one of parallel, each, subjob,
// switch, loop, wait.
TaskKind KindOf(const Task& task);

// Calls `fn` on every task a definition holds directly and runs in the same job (a
// parallel's, an each's one, every case's and the default of a switch, a loop's, its
// onFailure's; not a subjob's, which are a job of their own), mutable or not as `task` is.
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
  if (task.on_failure) {
    for (auto& child : task.on_failure->tasks) fn(child);
  }
}

// Calls `fn` on every task a job definition (a Job, a SubJob) holds at its top: its
// tasks, then its onFailure and finally tasks.
template <typename J, typename F>
void ForEachJobTask(J& job, F&& fn) {
  for (auto& task : job.tasks) fn(task);
  for (auto& task : job.on_failure) fn(task);
  for (auto& task : job.finally) fn(task);
}

// The tasks a handler row (Task::handles) runs: a task's onFailure tasks, or the job's
// (`job`: its definition) onFailure or finally.
const std::vector<Task>& HandlerTasks(const Task& handler, const Job& job);

// A job's onFailure or finally row.
bool IsJobHandler(const Task& task);

std::string_view ToString(Handles handles);
std::optional<Handles> ParseHandles(std::string_view text);
std::string_view ToString(Then then);

// The tasks a switch runs once its value is `value`: its case's, else its default's.
const std::vector<Task>& SwitchBranch(const Switch& s, std::string_view value);

std::string_view ToString(TaskKind kind);

}  // namespace baton

// The graph of a list of tasks (a job's or a sub-job's top-level tasks, or a parallel's):
// what each task needs, the rule that starts it, and the states its node goes through, as
// the job row's `steps` keeps them (a parallel's row's, for a parallel's). A list is a graph when
// its `mode` is dag or a task of it has `needs` or a `triggerRule`; otherwise it is Tork's
// sequence, run by position. Plain values, no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"

namespace baton {

// A node's state, one character of JobRecord::steps per top-level task (TaskRecord::steps
// per child of a parallel).
namespace step {
inline constexpr char kWaiting = '.';    // not started: its rule is not met yet
inline constexpr char kRunning = 'r';    // its row exists and has not ended (retries too)
inline constexpr char kCompleted = 'c';  // COMPLETED
inline constexpr char kPassed = 'p';     // SKIPPED by its own `if`: counts as a success
inline constexpr char kSkipped = 's';    // SKIPPED because its rule can no longer be met
inline constexpr char kFailed = 'f';     // FAILED, its retries spent
inline constexpr char kCancelled = 'x';  // CANCELLED with its job
}  // namespace step

bool IsEndedStep(char state);

struct TaskGraph {
  // Task index → the indices of the tasks it waits for (a sequence's task without
  // `needs`: the one before it).
  std::vector<std::vector<int>> needs;
  // The same edges' `when` templates ("": always taken).
  std::vector<std::vector<std::string>> when;
  std::vector<TriggerRule> rules;
};

// Whether `tasks` run as a graph (see above).
bool IsGraph(TaskOrder mode, const std::vector<Task>& tasks);
// A parallel's tasks form a graph when one of them has `needs` or a `triggerRule`: its
// graph is GraphOf(TaskOrder::kDag, its tasks), a task that needs nothing starting at
// once as without needs. Otherwise they all start at once and the first failure fails
// the parallel (Tork's).
bool IsGraph(const Parallel& parallel);
// The graph of `tasks`. A name that no task has is left out (decoding refuses it).
TaskGraph GraphOf(TaskOrder mode, const std::vector<Task>& tasks);

// A cycle of the graph, as the task indices along it (the first again at the end), or
// nullopt. A task that needs itself is a cycle of one.
std::optional<std::vector<int>> FindCycle(const TaskGraph& graph);

enum class Verdict { kWait, kRun, kSkip };
// What `rule` says of a task whose needed tasks are in `upstream` (step states): run it,
// skip it (the rule can no longer be met), or wait. A task that needs nothing runs.
// Successes are kCompleted and kPassed; failures kFailed and kCancelled; kSkipped is
// neither (Airflow's skip: all_success and all_failed skip on it, the rest count it done).
Verdict Judge(TriggerRule rule, const std::vector<char>& upstream);

std::string_view ToString(TriggerRule rule);
std::optional<TriggerRule> ParseTriggerRule(std::string_view text);
// "all_success, all_done, ...": for messages.
std::string TriggerRuleNames();
std::string_view ToString(TaskOrder mode);

}  // namespace baton

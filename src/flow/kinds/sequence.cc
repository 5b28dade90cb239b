// A switch and a loop (and a handler, kinds/handler.cc): composites whose children run
// one after another, one step at a time. A child's each_index is its step (-1 for the SKIPPED rows
// of a switch's branches not taken): a switch's index in the branch its value picked; a loop's
// iteration × its task count + its index in the loop's tasks (retries keep it). The composite's
// `completions` counts the steps that ended, so the next step is always `completions`.
//
// A switch's row keeps its evaluated value as its result from the start: the branch is
// read again from it at each step (SwitchBranch), also after a crash. A loop's row keeps
// its iterations' results as its result, a JSON array of one object per iteration begun
// ({var: result} of its tasks that completed), so `loop.iterations` survives a crash
// with the rows.
#include <fmt/format.h>

#include "core/evaluate.h"
#include "core/messages.h"
#include "core/task_kind.h"
#include "flow/decider.h"

namespace baton::flow {
namespace {

// A switch's branch, a loop's tasks, or a handler's (kinds/handler.cc).
const std::vector<Task>& StepsOf(const TaskRecord& t, const Job& job) {
  if (t.task.switch_) return SwitchBranch(*t.task.switch_, t.result);
  if (t.task.loop) return t.task.loop->tasks;
  return HandlerTasks(t.task, job);
}

json Iterations(const TaskRecord& loop) {
  json out = loop.result.empty() ? json::array() : json::parse(loop.result, nullptr, false);
  return out.is_array() ? out : json::array();
}

}  // namespace

// What a loop's templates see: the scope around it and `loop` ({iteration, iterations}).
json Decider::LoopScope(const TaskRecord& loop, int iteration) const {
  json extra = loop.scope.is_object() ? loop.scope : json::object();
  extra["loop"] = {{"iteration", iteration}, {"iterations", Iterations(loop)}};
  return extra;
}

void Decider::DispatchSwitch(const std::string& id, const json& extra) {
  TaskRecord& t = *T(id);
  const JobRecord& job = *J(t.job_id);
  auto value = EvaluateEachList(t.task.switch_->value, VarsFor(job, extra), options_);
  if (!value.ok()) return FailNow(t, "switch.value: " + value.status().message());
  if (!IsUtf8(*value)) return FailNow(t, fmt::format("switch.value: {}", kNotUtf8));
  t.state = TaskState::kRunning;
  t.started_at = now_;
  t.result = expr::ToText(*value);
  // The tasks of the branches not taken are SKIPPED rows, shown as such (each_index -1:
  // no step of it). Their templates are left as written.
  const std::vector<Task>& taken = SwitchBranch(*t.task.switch_, t.result);
  std::string shown = t.result.size() > 80 ? t.result.substr(0, 80) + "..." : t.result;
  auto skip = [&](const std::vector<Task>& tasks) {
    if (&tasks == &taken) return;
    for (const Task& def : tasks) {
      TaskRecord row = MakeRow(t.job_id, id, t.position, -1, TaskState::kSkipped);
      row.task = def;
      row.completed_at = now_;
      row.error = fmt::format("not run: the switch took another branch (its value is \"{}\")",
                              SanitizeUtf8(shown));
      NewTask(std::move(row));
    }
  };
  for (const SwitchCase& c : t.task.switch_->cases) skip(c.tasks);
  skip(t.task.switch_->default_tasks);
  NextStep(id);
}

void Decider::DispatchLoop(const std::string& id, const json& /*extra*/) {
  TaskRecord& t = *T(id);
  if (t.task.loop->max > view_.policy.max_loop_iterations) {
    return FailNow(t, fmt::format("loop.max: {} is over the engine's limit of {} iterations "
                                  "(the max_loop_iterations setting)",
                                  t.task.loop->max, view_.policy.max_loop_iterations));
  }
  t.state = TaskState::kRunning;
  t.started_at = now_;
  t.result = "[]";
  NextStep(id);
}

// The next step of a switch or a loop, or its end. A step that ends at once (skipped by
// its `if`) comes back here through ChildDone: that call only marks the composite to be
// stepped again, so a long run of such steps is a loop here, not a recursion.
void Decider::NextStep(const std::string& id) {
  if (!stepping_.insert(id).second) {
    restep_.insert(id);
    return;
  }
  do {
    restep_.erase(id);
    OneStep(id);
  } while (restep_.contains(id));
  stepping_.erase(id);
}

void Decider::OneStep(const std::string& id) {
  TaskRecord* t = T(id);
  if (t == nullptr || t->state != TaskState::kRunning) return;
  const JobRecord* job = J(t->job_id);
  if (job == nullptr || !IsActive(job->state)) return;
  const std::vector<Task>& steps = StepsOf(*t, Def(*job));
  const int n = static_cast<int>(steps.size());
  const int k = t->completions;
  if (!t->task.loop || n == 0) {
    if (k >= n) {
      if (t->task.handles != Handles::kNone) return HandlerDone(*t);
      std::string value = t->result;
      if (Finish(*t, TaskState::kCompleted, value, "", "", std::nullopt)) TaskDone(id);
      return;
    }
    return DispatchNew(steps[static_cast<std::size_t>(k)], t->job_id, id, t->position, t->scope, k);
  }
  const Loop& loop = *t->task.loop;
  const int iteration = k / n;
  if (k > 0 && k % n == 0) {
    // An iteration ended: the condition decides whether another begins.
    bool again = iteration < loop.max;
    const std::string& cond = loop.until_expr.empty() ? loop.while_expr : loop.until_expr;
    if (again && !cond.empty()) {
      const char* field = loop.until_expr.empty() ? "loop.while" : "loop.until";
      auto holds =
          EvaluateCondition(cond, VarsFor(*job, LoopScope(*t, iteration - 1)), options_, field);
      if (!holds.ok()) return FailRunning(*t, holds.status().message());
      again = loop.until_expr.empty() ? *holds : !*holds;
    }
    if (!again) {
      std::string result = t->result;
      if (Finish(*t, TaskState::kCompleted, result, "", "", std::nullopt)) TaskDone(id);
      return;
    }
  }
  if (k % n == 0) {
    json iterations = Iterations(*t);
    iterations.push_back(json::object());
    t->result = iterations.dump();
  }
  json extra = LoopScope(*t, iteration);
  DispatchNew(steps[static_cast<std::size_t>(k % n)], t->job_id, id, t->position, extra, k);
}

// A loop's child completed: its result joins its iteration's, by its var.
void Decider::LoopChildDone(TaskRecord& loop, const TaskRecord& child) {
  if (child.state != TaskState::kCompleted || child.task.var.empty()) return;
  const int n = static_cast<int>(loop.task.loop->tasks.size());
  const std::size_t iteration = static_cast<std::size_t>(child.each_index / std::max(1, n));
  json iterations = Iterations(loop);
  while (iterations.size() <= iteration) iterations.push_back(json::object());
  iterations[iteration][child.task.var] = SanitizeUtf8(child.result);
  loop.result = iterations.dump();
}

// A running composite whose own rule failed (its condition could not be evaluated): it
// fails as a task does, its failure going up.
void Decider::FailRunning(TaskRecord& t, const std::string& error) {
  if (Finish(t, TaskState::kFailed, "", error, "", std::nullopt)) TaskFailed(t.id);
}

}  // namespace baton::flow

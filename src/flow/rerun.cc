// Reruns (beyond Tork): a finished top-level job runs again, as new rows beside its old
// ones (every attempt's history stays), from what Rerun's mode names (types.h). The
// tasks that do not run again keep their results; those that do lose theirs
// (`tasks.<var>`, also of the tasks in them) until they end again. A restart
// (decider.cc: On(Restart)) is a rerun of the failed ones, for a FAILED or CANCELLED job.
// A skip (On(Skip)) marks one task SKIPPED with a result and lets its job carry on.
#include <fmt/format.h>

#include <algorithm>

#include "core/graph.h"
#include "core/records.h"
#include "core/task_kind.h"
#include "flow/decider.h"

namespace baton::flow {
namespace {

// The literal vars of `task` and of the tasks in it (a sub-job's are its own job's).
void VarsOf(const Task& task, std::vector<std::string>& out) {
  if (!task.var.empty()) out.push_back(task.var);
  auto all = [&](const std::vector<Task>& tasks) {
    for (const Task& t : tasks) VarsOf(t, out);
  };
  if (task.parallel) all(task.parallel->tasks);
  if (task.each) VarsOf(*task.each->task, out);
  if (task.switch_) {
    for (const SwitchCase& c : task.switch_->cases) all(c.tasks);
    all(task.switch_->default_tasks);
  }
  if (task.loop) all(task.loop->tasks);
  if (task.on_failure) all(task.on_failure->tasks);
}

}  // namespace

void Decider::RunAgain(JobRecord& job) {
  job.state = JobState::kScheduled;
  job.error.clear();
  job.result.clear();
  job.failed_at.reset();
  job.completed_at.reset();
  job.delete_at.reset();
  job.ending.reset();
  // The run starts again: its timeout counts from now, also when Frontier arms it
  // again after a crash (from started_at).
  job.started_at = now_;
  if (Def(job).timeout) Arm(job, now_);
}

void Decider::On(const Rerun& e) {
  JobRecord* job = J(e.job_id);
  if (job == nullptr) return;
  auto refuse = [&](std::string reason) { after_.push_back(Refused{std::move(reason)}); };
  if (!IsTerminal(job->state)) {
    return refuse(
        fmt::format("only a COMPLETED, FAILED or CANCELLED job can be rerun; this one is {}",
                    ToString(job->state)));
  }
  if (!job->parent_id.empty()) {
    return refuse("a sub-job runs again with its top-level job: rerun that one");
  }
  if (e.once && job->started_at != e.of_run) {
    return refuse("the job was started again since this rerun was asked for");
  }
  const Job& def = Def(*job);
  const int count = static_cast<int>(def.tasks.size());
  if (count == 0) return refuse("the job has no tasks to run");
  int from = -1;  // the index of `from`
  if (!e.from.empty()) {
    if (e.mode != RerunMode::kAll)
      return refuse("from: only a rerun of mode all starts from a task");
    for (int i = 0; i < count && from < 0; ++i) {
      if (def.tasks[static_cast<std::size_t>(i)].name == e.from) from = i;
    }
    if (from < 0) {
      return refuse(fmt::format("from: the job has no top-level task named \"{}\"", e.from));
    }
  }
  // Which top-level tasks run again.
  std::vector<bool> again(static_cast<std::size_t>(count), false);
  const bool graph = !job->steps.empty();
  // A run cut short (failed, cancelled) stopped where its unfinished tasks are: a `from`
  // must not leave one of them out (the job would end without it having run).
  const bool stopped = job->state != JobState::kCompleted;
  if (!graph) {
    int start = 1;  // a sequence runs again from one task to its end
    if (e.mode == RerunMode::kAll) {
      start = from >= 0 ? from + 1 : 1;
      if (from >= 0 && stopped && job->position <= count && start > job->position) {
        return refuse(fmt::format(
            "from: \"{}\" comes after \"{}\", where the job stopped ({}): rerun from that "
            "task or one before it",
            e.from, def.tasks[static_cast<std::size_t>(job->position - 1)].name,
            ToString(job->state)));
      }
    } else if (job->state == JobState::kCompleted || job->position > count) {
      return refuse("none of its tasks failed: rerun it with mode all");
    } else {
      start = std::clamp(job->position, 1, count);
    }
    for (int i = start - 1; i < count; ++i) again[static_cast<std::size_t>(i)] = true;
  } else {
    const TaskGraph& g = GraphFor(job->id);
    for (int i = 0; i < count; ++i) {
      const char s = job->steps[static_cast<std::size_t>(i)];
      const bool unfinished = s == step::kFailed || s == step::kCancelled || s == step::kSkipped ||
                              s == step::kRunning || s == step::kWaiting;
      if (e.mode == RerunMode::kAll ? (from < 0 || i == from) : unfinished) {
        again[static_cast<std::size_t>(i)] = true;
      }
    }
    if (e.mode != RerunMode::kFailedOnly) {
      // And what needs them, directly or not.
      for (bool grew = true; grew;) {
        grew = false;
        for (int i = 0; i < count; ++i) {
          if (again[static_cast<std::size_t>(i)]) continue;
          for (int need : g.needs[static_cast<std::size_t>(i)]) {
            if (!again[static_cast<std::size_t>(need)]) continue;
            again[static_cast<std::size_t>(i)] = true;
            grew = true;
            break;
          }
        }
      }
    }
    if (std::none_of(again.begin(), again.end(), [](bool b) { return b; })) {
      return refuse("none of its tasks failed: rerun it with mode all");
    }
    for (int i = 0; i < count && from >= 0 && stopped; ++i) {
      const char s = job->steps[static_cast<std::size_t>(i)];
      if (again[static_cast<std::size_t>(i)] ||
          (s != step::kFailed && s != step::kCancelled && s != step::kRunning)) {
        continue;
      }
      return refuse(fmt::format(
          "from: \"{}\" and what needs it leave \"{}\" {}: rerun from_failed, or from that task",
          e.from, def.tasks[static_cast<std::size_t>(i)].name,
          s == step::kFailed ? "FAILED" : "CANCELLED"));
    }
  }
  // Their results go; the new inputs replace the old ones of their names.
  json& context = MutableCtx(*job);
  std::vector<std::string> vars;
  for (int i = 0; i < count; ++i) {
    if (again[static_cast<std::size_t>(i)]) VarsOf(def.tasks[static_cast<std::size_t>(i)], vars);
  }
  if (auto tasks = context.find("tasks"); tasks != context.end() && tasks->is_object()) {
    for (const std::string& var : vars) tasks->erase(var);
  }
  if (e.inputs.is_object()) {
    for (const auto& [name, value] : e.inputs.items()) context["inputs"][name] = value;
  }
  RunAgain(*job);
  if (graph) {
    for (int i = 0; i < count; ++i) {
      if (again[static_cast<std::size_t>(i)])
        job->steps[static_cast<std::size_t>(i)] = step::kWaiting;
    }
    return StepGraph(job->id);
  }
  const int start =
      static_cast<int>(std::find(again.begin(), again.end(), true) - again.begin()) + 1;
  job->position = start;
  job->progress = 100.0 * (start - 1) / count;
  DispatchNew(def.tasks[static_cast<std::size_t>(start - 1)], job->id, "", start, json::object(),
              0);
}

void Decider::On(const Skip& e) {
  TaskRecord* t = T(e.task_id);
  if (t == nullptr) return;
  JobRecord* job = J(t->job_id);
  if (job == nullptr) return;
  auto set_var = [&](const TaskRecord& row) {
    if (!row.task.var.empty()) MutableCtx(*job)["tasks"][row.task.var] = e.result;
  };
  const bool runnable = KindOf(t->task) == TaskKind::kRunnable;
  if (runnable && IsActive(job->state) &&
      (t->state == TaskState::kPending || t->state == TaskState::kScheduled)) {
    // Not started: it never is (its queued message dropped), and what it is in goes on.
    const bool queued = t->state == TaskState::kScheduled || view_.policy.durable_broker;
    t->state = TaskState::kSkipped;
    t->result = e.result;
    t->completed_at = now_;
    if (queued) after_.push_back(Drop{t->id});
    set_var(*t);
    return TaskDone(t->id);
  }
  const bool stopped_here =
      t->state == TaskState::kFailed && t->parent_id.empty() && job->parent_id.empty() &&
      (job->state == JobState::kFailed || job->state == JobState::kCancelled) &&
      (job->steps.empty() ? job->position == t->position
                          : job->steps[static_cast<std::size_t>(t->position - 1)] == step::kFailed);
  if (!stopped_here) {
    after_.push_back(Refused{fmt::format(
        "only a PENDING or SCHEDULED task of an active job, or the FAILED top-level task a "
        "finished job stopped at, can be skipped; this one is {} in a {} job",
        ToString(t->state), ToString(job->state))});
    return;
  }
  // A new row in its place, SKIPPED with the result; the job runs again from there.
  TaskRecord row = MakeRow(t->job_id, "", t->position, t->each_index, TaskState::kSkipped);
  row.task = t->task;
  row.result = e.result;
  row.completed_at = now_;
  const std::string id = NewTask(std::move(row)).id;
  set_var(*T(id));
  const std::string error = job->error;
  RunAgain(*job);
  if (job->steps.empty()) return TaskDone(id);
  // A graph: the step passes (a success to what needs it); another failed step keeps
  // the job's error for its end.
  job->steps[static_cast<std::size_t>(T(id)->position - 1)] = step::kPassed;
  if (std::find(job->steps.begin(), job->steps.end(), step::kFailed) != job->steps.end()) {
    job->error = error;
  }
  StepGraph(job->id);
}

}  // namespace baton::flow

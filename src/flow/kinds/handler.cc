// Cleanup: a task's onFailure (a fallback in the failed task's place) and a job's
// onFailure and finally. A handler row (Task::handles) runs its tasks one after another as
// a switch's branch does (kinds/sequence.cc: NextStep), a child's each_index its step.
//
// A task's: made when the task finally fails (TaskFailed, after its retries), in its slot
// (parent, position, each_index), so that it is the slot's latest row (LatestAttempt) and
// what the task is in waits for it as for the task. Its error is the failure it handles,
// its result the last of its tasks' results; its tasks see the task's scope and `failure`
// ({task, error}). Once its tasks are done it completes (then: continue), its var taking
// its result, or fails with the handled error (then: fail); one of its tasks failing fails
// it with that task's error. Its end goes up as the task's would have (a fallback's
// failure is an optional task's warning when the task is optional).
//
// A job's: made when the job's outcome is known (CompleteJob, FailJob) and its definition
// has cleanup for it. The job's `ending` holds the outcome (its error and result are the
// outcome's already) and the job stays active, its timeout disarmed. Its onFailure row
// (each_index 0), then its finally row (each_index 1), at position task_count + 1, top
// level; their tasks see `job` with the outcome's `state` and `error`. When the last ends
// the job ends as `ending` says: a cleanup task's failure is added to its error, and a job
// that would have completed fails. A cancel (or an engine failure) meanwhile stops the
// cleanup and ends the job so.
#include <fmt/format.h>

#include "core/task_kind.h"
#include "flow/decider.h"

namespace baton::flow {

bool Decider::StartFallback(const std::string& failed_id) {
  const TaskRecord& t = *T(failed_id);
  const JobRecord* job = J(t.job_id);
  if (job == nullptr || !IsActive(job->state)) return false;
  std::string error = ErrorGoingOn(t);
  TaskRecord row = MakeRow(t.job_id, t.parent_id, t.position, t.each_index, TaskState::kPending);
  row.task.name = t.task.name;
  row.task.description = t.task.description;
  row.task.var = t.task.var;
  row.task.optional = t.task.optional;
  row.task.on_failure = t.task.on_failure;
  row.task.handles = Handles::kTaskFailure;
  row.error = error;
  row.scope = t.scope.is_object() ? t.scope : json::object();
  row.scope["failure"] = {{"task", t.task.name}, {"error", error}};
  json scope = row.scope;
  std::string id = NewTask(std::move(row)).id;
  Dispatch(id, scope, /*evaluated=*/true);
  return true;
}

bool Decider::StartCleanup(JobRecord& job, JobState outcome) {
  const Job& def = Def(job);
  const bool on_failure = outcome == JobState::kFailed && !def.on_failure.empty();
  if (!on_failure && def.finally.empty()) return false;
  job.ending = outcome;
  // A job cancelled before it started: started now, for its cleanup (not again).
  if (job.state == JobState::kPending) job.state = JobState::kScheduled;
  if (def.timeout) after_.push_back(DisarmJobTimeout{job.id});
  StartJobHandler(job, on_failure ? Handles::kJobFailure : Handles::kJobFinally);
  return true;
}

void Decider::StartJobHandler(JobRecord& job, Handles handles) {
  const bool on_failure = handles == Handles::kJobFailure;
  TaskRecord row = MakeRow(job.id, "", job.task_count + 1, on_failure ? 0 : 1, TaskState::kPending);
  row.task.name = on_failure ? "onFailure" : "finally";
  row.task.handles = handles;
  json vars = Ctx(job).value("job", json::object());
  vars["state"] = ToString(job.ending.value_or(job.state));
  vars["error"] = job.error;
  row.scope = {{"job", std::move(vars)}};
  json scope = row.scope;
  std::string id = NewTask(std::move(row)).id;
  Dispatch(id, scope, /*evaluated=*/true);
}

void Decider::DispatchHandler(const std::string& id) {
  TaskRecord& t = *T(id);
  t.state = TaskState::kRunning;
  t.started_at = now_;
  NextStep(id);
}

// Its tasks are done (OneStep).
void Decider::HandlerDone(TaskRecord& h) {
  if (h.task.handles == Handles::kTaskFailure && h.task.on_failure &&
      h.task.on_failure->then == Then::kFail) {
    std::string error = h.error;
    return FailRunning(h, error);
  }
  std::string result = h.result;
  if (Finish(h, TaskState::kCompleted, result, "", "", std::nullopt)) TaskDone(h.id);
}

// A job's onFailure or finally row ended (TaskDone, TaskFailed).
void Decider::JobHandlerEnded(const std::string& id) {
  const TaskRecord& h = *T(id);
  JobRecord* job = J(h.job_id);
  if (job == nullptr || !IsActive(job->state) || !job->ending) return;
  if (h.state == TaskState::kFailed) {
    AddError(*job, fmt::format("{}: {}", h.task.name, h.error));
    if (*job->ending == JobState::kCompleted) {
      job->ending = JobState::kFailed;
      job->result.clear();
    }
  }
  if (h.task.handles == Handles::kJobFailure && !Def(*job).finally.empty()) {
    return StartJobHandler(*job, Handles::kJobFinally);
  }
  EndJob(h.job_id, *job->ending);
}

}  // namespace baton::flow

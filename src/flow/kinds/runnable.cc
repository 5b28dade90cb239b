// A runnable task: queued for a worker (the broker executor starts it), and the events
// its worker reports: started, progress, an outcome, handed back, its lease lost.
#include <fmt/format.h>

#include <algorithm>

#include "core/duration.h"
#include "core/evaluate.h"
#include "core/messages.h"
#include "core/task_kind.h"
#include "flow/decider.h"

namespace baton::flow {

bool LeaseLost(const TaskRecord& row, const LeaseExpired& e, TimePoint now) {
  if (row.state != TaskState::kRunning || row.node_id != e.node_id ||
      KindOf(row.task) != TaskKind::kRunnable) {
    return false;
  }
  if (e.lease <= Duration::zero()) return true;  // the caller judged the lease
  // The node heartbeated within a lease; or the task started less than a lease ago (its
  // node's first heartbeat may be on its way).
  if (e.node_last_seen && now - *e.node_last_seen <= e.lease) return false;
  return !row.started_at || now - *row.started_at >= e.lease;
}

void Decider::On(const Started& e) {
  TaskRecord* t = T(e.task_id);
  if (t == nullptr) return;
  bool elsewhere = !t->node_id.empty() && t->node_id != e.node_id;
  if (IsTerminal(t->state) || (t->state == TaskState::kRunning && elsewhere)) {
    // Cancelled while queued, or a second delivery: stop it where it runs now (a start
    // heard after the same node reported it done has nothing left to stop).
    bool done_here = t->state == TaskState::kCompleted && t->node_id == e.node_id;
    if (!done_here && !e.node_id.empty()) after_.push_back(Kill{e.node_id, e.task_id});
    return;
  }
  if (t->state != TaskState::kScheduled && t->state != TaskState::kPending &&
      t->state != TaskState::kCreated) {
    return;
  }
  t->state = TaskState::kRunning;
  t->started_at = e.at;
  if (!t->scheduled_at) t->scheduled_at = e.at;
  t->node_id = e.node_id;
  Ran(t->job_id);
}

void Decider::On(const Completed& e) {
  TaskRecord* t = T(e.task_id);
  if (t != nullptr && !IsTerminal(t->state)) Ran(t->job_id);
  if (t == nullptr || !Finish(*t, TaskState::kCompleted, e.result, "", e.node_id, e.started_at)) {
    return;
  }
  TaskDone(t->id);
}

void Decider::On(const Failed& e) {
  WorkerFailure(e.task_id, e.node_id, e.error, e.started_at, e.reason, e.exit_code);
}

void Decider::On(const TaskTimedOut& e) {
  WorkerFailure(e.task_id, e.node_id, "task timed out after " + FormatDuration(e.timeout),
                std::nullopt, FailReason::kTimeout);
}

void Decider::On(const TaskOverdue& e) {
  TaskRecord* t = T(e.task_id);
  if (t == nullptr || t->state != TaskState::kRunning || t->node_id != e.node_id ||
      KindOf(t->task) != TaskKind::kRunnable || !t->task.timeout || !t->started_at ||
      now_ - *t->started_at < *t->task.timeout + e.grace) {
    return;
  }
  after_.push_back(Kill{e.node_id, e.task_id});
  WorkerFailure(e.task_id, e.node_id,
                fmt::format("task timed out after {}: its worker did not stop it within {} more, "
                            "and was told to kill it",
                            FormatDuration(*t->task.timeout), FormatDuration(e.grace)),
                std::nullopt, FailReason::kTimeout);
}

void Decider::On(const WorkerCancelled& e) {
  TaskRecord* t = T(e.task_id);
  if (t != nullptr) Finish(*t, TaskState::kCancelled, "", e.error, e.node_id, std::nullopt);
}

void Decider::On(const Redelivery& e) {
  TaskRecord* t = T(e.task_id);
  if (t == nullptr || !Finish(*t, TaskState::kFailed, "", e.error, e.node_id, std::nullopt)) {
    return;
  }
  t->reason = FailReason::kLost;
  JobRecord* job = J(t->job_id);
  if (job != nullptr && IsActive(job->state)) Redeliver(t->id);
}

void Decider::On(const LeaseExpired& e) {
  TaskRecord* t = T(e.task_id);
  if (t == nullptr || !LeaseLost(*t, e, now_)) return;
  std::string error = fmt::format("node {} stopped heartbeating while the task ran", e.node_id);
  if (!Finish(*t, TaskState::kFailed, "", error, e.node_id, std::nullopt)) return;
  t->reason = FailReason::kLost;
  Redeliver(t->id);
}

void Decider::On(const Progress& e) {
  TaskRecord* t = T(e.task_id);
  if (t == nullptr || IsTerminal(t->state)) return;
  double p = std::clamp(e.progress, 0.0, 100.0);
  t->progress = p;
  if (!t->parent_id.empty()) return;
  JobRecord* job = J(t->job_id);
  if (job == nullptr || !IsGoing(job->state) || job->position != t->position) return;
  job->progress = 100.0 * ((t->position - 1) + p / 100.0) / std::max(1, job->task_count);
}

void Decider::On(const RetryDue& e) {
  TaskRecord* t = T(e.task_id);
  if (t == nullptr) return;
  // A wait's timer (kinds/wait.cc): it ends once due (armed again if early).
  if (t->task.wait) return t->state == TaskState::kRunning ? ArmWait(*t) : void();
  if (t->state != TaskState::kPending) return;  // cancelled, or started
  Queue(*t);
}

void Decider::On(const Published& e) {
  if (!view_.policy.durable_broker) return;
  for (const std::string& id : e.task_ids) {
    TaskRecord* t = T(id);
    // Started, cancelled or refused meanwhile: nothing to mark.
    if (t == nullptr || t->state != TaskState::kPending) continue;
    t->state = TaskState::kScheduled;
    t->scheduled_at = now_;
  }
}

void Decider::On(const PublishRefused& e) {
  TaskRecord* t = T(e.task_id);
  if (t == nullptr || (t->state != TaskState::kPending && t->state != TaskState::kScheduled)) {
    return;  // started (a message published twice runs once) or cancelled meanwhile
  }
  t->state = TaskState::kPending;
  after_.push_back(StartAt{t->id, now_ + view_.policy.republish_delay});
}

// Stored to be published (or, with a durable broker, PENDING until confirmed) and
// started after the commit.
void Decider::Queue(TaskRecord& t) {
  if (view_.policy.durable_broker) {
    t.state = TaskState::kPending;
  } else {
    t.state = TaskState::kScheduled;
    t.scheduled_at = now_;
  }
  starts_.push_back(t.id);
}

void Decider::WorkerFailure(const std::string& task_id, const std::string& node,
                            const std::string& error, std::optional<TimePoint> started_at,
                            FailReason reason, std::optional<int> exit_code) {
  TaskRecord* t = T(task_id);
  if (t != nullptr && !IsTerminal(t->state) && !node.empty()) Ran(t->job_id);
  if (t == nullptr || !Finish(*t, TaskState::kFailed, "", error, node, started_at)) return;
  t->reason = reason;
  if (reason == FailReason::kExit) t->exit_code = exit_code;
  RetryOrFail(task_id);
}

void Decider::Redeliver(const std::string& lost_id) {
  TaskRecord& lost = *T(lost_id);
  if (lost.redelivered >= view_.policy.max_redeliveries) {
    lost.error =
        fmt::format("{} (re-queued {} times already: giving up)", lost.error, lost.redelivered);
    // A retry whose `on` names lost takes it up; otherwise the failure goes up.
    RetryOrFail(lost_id);
    return;
  }
  Reattempt(lost_id, lost.redelivered + 1);
}

// The engine crashed while the row ran: the crash is the engine's, not the task's, so the
// row ends FAILED (it says why) and a new attempt runs with the row's redeliveries and
// retry attempts as they were. Only Frontier calls it (ReconcileRunnable: the row's node
// is not live, an earlier run of the engine); a node that dies on its own is judged by
// its lease (LeaseExpired), which spends a redelivery.
void Decider::LostInCrash(const std::string& id) {
  TaskRecord& t = *T(id);
  std::string error = fmt::format(
      "the engine stopped while the task ran (node {}): run again as a new attempt", t.node_id);
  if (!Finish(t, TaskState::kFailed, "", error, t.node_id, std::nullopt)) return;
  t.reason = FailReason::kLost;
  Reattempt(id, t.redelivered);
}

// A new attempt of a runnable row, queued at once: the same task (its retry attempts as
// they were), `redelivered` as given.
void Decider::Reattempt(const std::string& lost_id, int redelivered) {
  TaskRecord next = NextAttempt(*T(lost_id));
  next.redelivered = redelivered;
  Queue(NewTask(std::move(next)));
}

TaskRecord Decider::NextAttempt(const TaskRecord& row) {
  TaskRecord next = row;
  next.id = MakeId();
  next.state = TaskState::kPending;
  next.created_at = now_;
  next.scheduled_at.reset();
  next.started_at.reset();
  next.completed_at.reset();
  next.failed_at.reset();
  next.error.clear();
  next.node_id.clear();
  next.reason = FailReason::kNone;
  next.exit_code.reset();
  next.progress = 0;
  return next;
}

}  // namespace baton::flow

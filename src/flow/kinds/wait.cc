// A wait (core/job.h: Wait): a leaf that holds no worker and runs nothing. Dispatched, it
// is RUNNING from now, and its due time is read from its row alone (WaitDueAt): a `for`
// wait's started_at + for, an `until` wait's time (evaluated when it was dispatched), a
// signal wait's started_at + timeout (none without one). The shell's timer (StartAt)
// decides RetryDue at that time, and the wait completes (a signal wait fails: no signal
// came); a timer that fires early is armed again; after a crash, Frontier arms it again
// from the row (ReconcileWait), a wait already due for now. A signal wait completes with
// the payload of its signal: one kept in the job's context (`signals`, sent before it
// waited) at once, taking it; or On(Signal).
#include <fmt/format.h>

#include "core/duration.h"
#include "core/records.h"
#include "core/task_kind.h"
#include "flow/decider.h"

namespace baton::flow {

namespace {
std::string PayloadText(const json& payload) {
  return payload.is_string() ? payload.get<std::string>() : payload.dump();
}
}  // namespace

std::optional<TimePoint> WaitDueAt(const TaskRecord& row) {
  if (!row.task.wait || !row.started_at) return std::nullopt;
  const Wait& w = *row.task.wait;
  if (w.for_) return *row.started_at + *w.for_;
  if (!w.until.empty()) return ParseTime(w.until);
  if (w.timeout) return *row.started_at + *w.timeout;
  return std::nullopt;
}

void Decider::DispatchWait(const std::string& id) {
  TaskRecord& t = *T(id);
  t.state = TaskState::kRunning;
  t.started_at = now_;
  Ran(t.job_id);  // it runs from now: so does its job, as for a worker's start
  const std::string& signal = t.task.wait->signal;
  if (!signal.empty()) {
    JobRecord& job = *J(t.job_id);
    const json& context = Ctx(job);
    auto kept = context.find("signals");
    if (kept != context.end() && kept->is_object() && kept->contains(signal)) {
      json& signals = MutableCtx(job)["signals"];
      std::string payload = PayloadText(signals[signal]);
      signals.erase(signal);
      if (Finish(t, TaskState::kCompleted, payload, "", "", std::nullopt)) TaskDone(id);
      return;
    }
  }
  ArmWait(t);
}

void Decider::ArmWait(TaskRecord& t) {
  std::optional<TimePoint> due = WaitDueAt(t);
  if (!due) return;  // a signal wait without a timeout: only its signal ends it
  if (*due > now_) {
    after_.push_back(StartAt{t.id, *due});
    return;
  }
  const Wait& w = *t.task.wait;
  if (!w.signal.empty()) {
    std::string error = fmt::format("no signal \"{}\" came within {}", w.signal,
                                    FormatDuration(w.timeout.value_or(Duration::zero())));
    if (Finish(t, TaskState::kFailed, "", error, "", std::nullopt)) TaskFailed(t.id);
    return;
  }
  if (Finish(t, TaskState::kCompleted, "", "", "", std::nullopt)) TaskDone(t.id);
}

void Decider::On(const Signal& e) {
  JobRecord* job = J(e.job_id);
  if (job == nullptr) return;
  if (!IsActive(job->state)) {
    after_.push_back(Refused{
        fmt::format("only an active job takes signals; this one is {}", ToString(job->state))});
    return;
  }
  std::vector<std::string> waiting;
  for (const auto& [id, row] : view_.tasks) {
    if (row.job_id == e.job_id && row.task.wait && row.task.wait->signal == e.name &&
        row.state == TaskState::kRunning) {
      waiting.push_back(id);
    }
  }
  if (waiting.empty()) {
    MutableCtx(*job)["signals"][e.name] = e.payload;  // kept for the first that waits
    return;
  }
  for (const std::string& id : waiting) {
    if (Finish(*T(id), TaskState::kCompleted, PayloadText(e.payload), "", "", std::nullopt)) {
      TaskDone(id);
    }
  }
}

// Armed again, even when due already: its end is decided by the timer's RetryDue, whose
// view holds what the end may end above it (a sub-job's task, its job); Frontier's holds
// the job's rows only.
void Decider::ReconcileWait(const std::string& id) {
  TaskRecord* t = T(id);
  if (t == nullptr || !t->task.wait || t->state != TaskState::kRunning) return;
  if (Held(t->job_id)) return;  // armed again by the resume
  if (std::optional<TimePoint> due = WaitDueAt(*t)) after_.push_back(StartAt{t->id, *due});
}

}  // namespace baton::flow

// Pause and resume (beyond Tork): a PAUSED job's decisions go on as ever (its running
// tasks end, what it is in moves on, its next steps are made and evaluated), but nothing of
// it starts: a row it queues is held PENDING and a retry's backoff is not armed (Held,
// applied once at the end of a decision: HoldStarts). A resume is a reconcile of the job
// from its rows, as Frontier's: the held rows start, the backoffs are armed again.
//
// A pause reaches the whole tree below the job: its running sub-jobs pause with it (a quiet
// Pause each), a sub-job it starts while paused starts PAUSED (StartJobRule), and a resume
// resumes them. What the job queued is withdrawn: every worker is told not to start it
// (Withdraw), and one that runs it already lets it run on (a worker reports a start 50 ms
// in, so the rows do not tell which ran); the rows stay as they are. The resume then
// requeues, as a new attempt with the same retries and redeliveries, each row still not
// started (CANCELLED, "withdrawn"), and starts the rows held meanwhile.
//
// A task's pauseBefore is a pause point: reached (its `if` true, its templates
// evaluated), it pauses its job, and its top-level job with the tree, before any of it
// starts. A job whose outcome comes while it is paused (its last running task completes
// it, a failure, its timeout) ends then, or, with cleanup to run, waits PAUSED with its
// `ending` for the resume; a cancel is not held: the job leaves PAUSED first (Unpause),
// so its cleanup runs (and its sub-jobs, cancelled with it, are on their own).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/task_kind.h"
#include "flow/decider.h"

namespace baton::flow {

bool Decider::Held(const std::string& job_id) const {
  // The job, or a job above it as far as the view holds them (a sub-job started in this
  // decision under a paused one; a stored sub-job is PAUSED itself). Only through a task
  // still running it: a sub-job whose task ended (cancelled, its cleanup running) is on
  // its own.
  std::string id = job_id;
  for (int depth = 0; depth < 100 && !id.empty(); ++depth) {
    auto job = view_.jobs.find(id);
    if (job == view_.jobs.end()) return false;
    if (job->second.state == JobState::kPaused) return true;
    auto parent = view_.tasks.find(job->second.parent_id);
    if (parent == view_.tasks.end() || IsTerminal(parent->second.state)) return false;
    id = parent->second.job_id;
  }
  return false;
}

const JobRecord* Decider::ParentJob(const JobRecord& job) {
  if (job.parent_id.empty()) return nullptr;
  const TaskRecord* parent = T(job.parent_id);
  return parent == nullptr || IsTerminal(parent->state) ? nullptr : J(parent->job_id);
}

void Decider::Unpause(JobRecord& job) {
  if (job.state != JobState::kPaused) return;
  job.state = JobState::kRunning;
}

void Decider::On(const Pause& e) {
  JobRecord* job = J(e.job_id);
  if (job == nullptr) return;
  // Quiet (the engine's): also of a job paused already in the decision that asked for it
  // (a pause point), whose tree is paused here.
  if (!IsGoing(job->state) || (job->state == JobState::kPaused && !e.quiet)) {
    if (!e.quiet) {
      after_.push_back(Refused{fmt::format(
          "only a SCHEDULED or RUNNING job can be paused; this one is {}", ToString(job->state))});
    }
    return;
  }
  job->state = JobState::kPaused;
  // Read, not touched: a pause writes no task row.
  for (const auto& [id, row] : view_.tasks) {
    if (row.job_id != e.job_id) continue;
    if (!row.subjob_id.empty() && row.state == TaskState::kRunning) {
      follow_.push_back(Pause{row.subjob_id, /*quiet=*/true});
    }
    if (MayBeQueued(row)) after_.push_back(Withdraw{id});
  }
}

bool Decider::MayBeQueued(const TaskRecord& row) const {
  // In a queue, or maybe (with a durable broker, PENDING: published and not yet
  // confirmed). A row in its backoff, or refused, is queued by RetryDue, which holds it.
  if (KindOf(row.task) != TaskKind::kRunnable) return false;
  const bool retry = row.task.retry && row.task.retry->attempts > 0;
  return row.state == TaskState::kScheduled ||
         (row.state == TaskState::kPending && view_.policy.durable_broker &&
          !(retry && RetryDueAt(row) > now_));
}

void Decider::Requeue(const std::string& id) {
  TaskRecord& row = *T(id);
  const TaskState was = row.state;
  Finish(row, TaskState::kCancelled, "",
         "withdrawn from its queue while its job was paused: run as a new attempt on resume", "",
         std::nullopt);
  for (Effect& e :
       AfterCancel({CancelledRow{row.id, was, row.node_id, row.subjob_id, {}}}, view_.policy)) {
    after_.push_back(std::move(e));
  }
  TaskRecord next = NextAttempt(row);
  // Strictly after the withdrawn row (times are in milliseconds): the slot's latest row
  // (LatestAttempt).
  next.created_at = std::max(now_, row.created_at + std::chrono::milliseconds(1));
  NewTask(std::move(next));  // queued by the reconcile that follows
}

void Decider::On(const Resume& e) {
  JobRecord* job = J(e.job_id);
  if (job == nullptr) return;
  if (job->state != JobState::kPaused) {
    if (!e.quiet) {
      after_.push_back(Refused{
          fmt::format("only a PAUSED job can be resumed; this one is {}", ToString(job->state))});
    }
    return;
  }
  // A sub-job under a job still paused: resumed, its rows would stay held (Held looks up),
  // and its parent's resume would find it not PAUSED; it is resumed with that job.
  if (const JobRecord* parent = ParentJob(*job); parent != nullptr && Held(parent->id)) {
    if (!e.quiet) {
      after_.push_back(Refused{fmt::format(
          "the job above it ({}) is PAUSED: resume that one, and this one resumes with it",
          parent->id)});
    }
    return;
  }
  std::vector<std::string> ids;
  bool ran = false;
  for (const auto& [id, row] : view_.tasks) {
    if (row.job_id != e.job_id) continue;
    ids.push_back(id);
    if (row.started_at) ran = true;
    if (!row.subjob_id.empty() && row.state == TaskState::kRunning) {
      follow_.push_back(Resume{row.subjob_id, /*quiet=*/true});
    }
  }
  job->state = ran ? JobState::kRunning : JobState::kScheduled;
  // What the pause withdrew and no worker started: a new attempt each (a worker drops the
  // old one's message).
  std::vector<std::string> withdrawn;
  for (const std::string& id : ids) {
    if (MayBeQueued(view_.tasks.at(id))) withdrawn.push_back(id);
  }
  for (const std::string& id : withdrawn) {
    Requeue(id);
    ids.push_back(task_order_.back());
  }
  Reconcile(e.job_id, ids, nullptr);
}

void Decider::PauseBefore(const TaskRecord& t) {
  // The task's job and every job above it pause now, so that nothing this decision queued
  // in the tree starts; the top-level job's quiet Pause then withdraws what earlier ones
  // queued and reaches its other running sub-jobs.
  JobRecord* top = nullptr;
  for (JobRecord* job = J(t.job_id); job != nullptr;) {
    if (IsGoing(job->state)) job->state = JobState::kPaused;
    top = job;
    const JobRecord* above = ParentJob(*job);
    job = above == nullptr ? nullptr : J(above->id);
  }
  if (top != nullptr) follow_.push_back(Pause{top->id, /*quiet=*/true});
}

void Decider::HoldStarts() {
  // Every decision ends here: without a PAUSED job in its view nothing is held.
  if (std::none_of(view_.jobs.begin(), view_.jobs.end(),
                   [](const auto& j) { return j.second.state == JobState::kPaused; })) {
    return;
  }
  // Rows queued by this decision in a job now PAUSED (before a pause point of the same
  // step, say) are held, as the job's later ones are.
  std::vector<std::string> starts;
  for (const std::string& id : starts_) {
    TaskRecord& row = view_.tasks.at(id);
    if (!Held(row.job_id)) {
      starts.push_back(id);
    } else if (row.state == TaskState::kScheduled || row.state == TaskState::kPending) {
      row.state = TaskState::kPending;
      row.scheduled_at.reset();
    }
  }
  starts_ = std::move(starts);
  std::erase_if(after_, [&](const Effect& e) {
    const auto* at = std::get_if<StartAt>(&e);
    if (at == nullptr) return false;
    auto row = view_.tasks.find(at->task_id);
    return row != view_.tasks.end() && Held(row->second.job_id);
  });
}

}  // namespace baton::flow

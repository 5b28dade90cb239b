// AfterCommit: what a committed decision starts. Scheduler::DecideLocked hands it flow's
// after-commit effects once the decision's scope has committed, and it turns them into:
// rows started through the executor of their kind (injected: Executors), what each executor
// reported decided at once; retries (StartAt) and job timeouts on Deadlines; drops, kills
// and withdrawals told to workers through WorkerSignals. It decides nothing itself: every
// event it raises (an executor's report, a retry due, a job timed out) goes back to the
// scheduler through Decisions. JobFinished is the scheduler's to tell, once the tree's
// lock is released.
//
// Thread-safety: thread-safe. It keeps no state of its own; its parts say how each is
// thread-safe. Run is called on the deciding thread with the decision's tree lock still
// held (none for new top-level jobs, which no other decision knows of), so an executor's
// report is decided under that same lock. The timers it arms decide on the timers' thread
// with no lock held; Decisions::job and Decisions::task take the tree's lock.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "coordinator/deadlines.h"
#include "coordinator/executors/executor.h"
#include "coordinator/worker_signals.h"
#include "core/records.h"
#include "flow/types.h"

namespace baton {

class AfterCommit {
 public:
  // How what it raises is decided: the scheduler's, which outlives it.
  struct Decisions {
    // An executor's report, as its events (FromExecutor) decided in order as one decision
    // in one scope, under the tree's lock the caller of Run already holds (called from
    // within Run; that decision's own after-effects come back through Run).
    std::function<Status(const std::vector<flow::Event>& events)> reported;
    // `event` about job `job_id`, decided under its tree's lock (taken; no lock is held).
    std::function<Status(const std::string& job_id, const flow::Event& event)> job;
    // The same about task `task_id`, whose job is read first when `job_id` is empty.
    std::function<Status(const std::string& task_id, const std::string& job_id,
                         const flow::Event& event)>
        task;
  };

  // `executors`, `signals` and `clock` outlive it; `deadlines` is destroyed before it (that
  // cancels the timers that call into it). A row the executor refused is tried again
  // `republish_delay` later when its report cannot be decided; `durable_broker`:
  // FromExecutor's.
  AfterCommit(Executors executors, Deadlines& deadlines, WorkerSignals& signals, Clock& clock,
              bool durable_broker, Duration republish_delay, Decisions decisions);
  AfterCommit(const AfterCommit&) = delete;
  AfterCommit& operator=(const AfterCommit&) = delete;

  // The after-commit effects of one decision: timers armed and disarmed in their order,
  // then the rows started (one batch per executor) and what each executor reported
  // decided, then drops and kills told (WorkerSignals::Tell), then withdrawals. Returns
  // FailedPrecondition with the reason of the first Refused effect, else Ok: what could
  // not be started is tried again later, not returned.
  Status Run(std::vector<flow::Effect>&& after);

 private:
  void StartRows(std::vector<TaskRecord> rows);
  // What an executor reported, decided (still under the tree's lock).
  void Reported(StartReport report);
  void ArmJobTimeout(const std::string& job_id, Duration timeout, TimePoint at);
  void RetryLater(const std::string& task_id, const std::string& job_id, TimePoint at);

  const Executors executors_;
  Deadlines& deadlines_;
  WorkerSignals& signals_;
  Clock& clock_;
  const bool durable_broker_;
  const Duration republish_delay_;
  const Decisions decisions_;
};

}  // namespace baton

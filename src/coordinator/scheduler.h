// The scheduler: the Coordinator's decisions about jobs, as a thin shell over flow
// (src/flow/flow.h), which holds every rule. Per event it locks, reads, decides, writes and
// starts, and nothing else:
//   lock    the event's job tree (JobLocks);
//   read    in one decision scope (Datastore::Transact) the View the event names
//           (ViewReader, over the JobCache of definitions and contexts);
//   decide  flow::Decide, then the follow-ups against the rows as they now are;
//   write   every row effect, and flow's notices through the Outbox (webhook deliveries in
//           the same scope; live-event changes and metrics once committed);
//   start   after the commit (AfterCommit): rows through the executor of their kind
//           (injected: Executors), timers through Deadlines, cancelled tasks through
//           WorkerSignals; once the tree's lock is released, the listener told of finished
//           jobs.
// What an executor reports (published, refused) is decided as events like any other.
// Reconciling is flow::Frontier per active job; lease expiry is the LeaseExpired event.
//
// Thread-safety: thread-safe. Decisions about one job tree are serialised by the tree's
// lock; decisions about different trees run at once and never wait for each other. Its
// parts say how each is thread-safe; the scheduler's own mutex guards the listener only and
// is never held across a datastore call, a broker publish or a callback.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "broker/broker.h"
#include "coordinator/after_commit.h"
#include "coordinator/deadlines.h"
#include "coordinator/events.h"
#include "coordinator/executors/executor.h"
#include "coordinator/job_cache.h"
#include "coordinator/job_locks.h"
#include "coordinator/outbox.h"
#include "coordinator/running_checks.h"
#include "coordinator/scheduler_options.h"
#include "coordinator/starter.h"
#include "coordinator/view_reader.h"
#include "coordinator/worker_events.h"
#include "coordinator/worker_signals.h"
#include "core/job.h"
#include "core/messages.h"
#include "core/records.h"
#include "datastore/datastore.h"
#include "flow/flow.h"
#include "locker/locker.h"
#include "metrics/metrics.h"

namespace baton {

class Scheduler {
 public:
  // `executors`: the executor of each leaf kind, outliving the scheduler.
  Scheduler(Datastore& datastore, Broker& broker, Clock& clock, Timers& timers, Executors executors,
            SchedulerOptions options = {});
  // Stops the starter thread and cancels the timers it armed.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Stores a validated job and starts it (with start_in_background: stores it PENDING and
  // a thread of the scheduler starts it). Returns the record as stored.
  Result<JobRecord> Submit(const Job& job);

  // Runs `body` in one datastore scope and stores there the PENDING jobs it returns
  // (flow::NewJobRecord, top-level), each with the webhook deliveries of its creation; a
  // job exists exactly when the body's own writes do (a scheduled tick and the job it
  // fires). Then starts each as Submit does; a start that fails leaves the job PENDING
  // (tried again after a second when it may pass, else for reconciling). Returns the
  // jobs as stored.
  using CreateJobsBody = std::function<Result<std::vector<JobRecord>>(Transaction&)>;
  Result<std::vector<JobRecord>> CreateJobsWith(const CreateJobsBody& body);

  // Events from workers. Unavailable / DeadlineExceeded: deliver the event again; other
  // errors are logged here and the event is done with.
  Status OnStarted(const TaskStarted& event);
  Status OnFinished(const TaskFinished& event);
  Status OnProgress(const TaskProgress& event);

  // FailedPrecondition (flow's reason) when the job's state refuses it; NotFound for an
  // unknown job.
  Status Cancel(const std::string& job_id);
  Status Restart(const std::string& job_id);
  // Beyond Tork (flow::Pause, flow::Resume): a paused job's running tasks run on, nothing
  // of it starts until it is resumed.
  Status Pause(const std::string& job_id);
  Status Resume(const std::string& job_id);
  // Beyond Tork (flow::Rerun): a finished top-level job runs again.
  Status Rerun(const flow::Rerun& rerun);
  // flow::Signal: the job's tasks waiting for it complete, or it is kept; NotFound for an
  // unknown job, FailedPrecondition for one that has ended.
  Status Signal(const flow::Signal& signal);
  // flow::Skip; NotFound for an unknown task.
  Status Skip(const std::string& task_id, const std::string& result);
  // Runs `work` holding the lock of `job_id`'s tree, so no decision of the job comes
  // between what `work` reads and what it writes (DELETE /jobs/{id}'s check and delete).
  Status UnderJobLock(const std::string& job_id, const std::function<Status()>& work);

  // flow::Frontier for every active job, each under its tree's lock; RUNNING rows on a
  // node not in `live_nodes` are expired as leases.
  Status Reconcile(const std::set<std::string>& live_nodes);
  // From one read of the RUNNING rows (running_checks.h): with a `grace`, offers flow a
  // TaskOverdue for every runnable with a `timeout` that started longer ago than its
  // timeout plus `grace` (flow fails it as timed out and tells its node to kill it); with
  // a `lease`, a LeaseExpired, with the node's last heartbeat, for every runnable of a
  // node silent for longer than `lease` (flow re-queues it, sparing a task started less
  // than a lease ago). Says how many rows each check changed, or its error; fails only
  // when the RUNNING rows cannot be read.
  struct RunningChecked {
    Result<int> timed_out = 0;
    Result<int> requeued = 0;
  };
  Result<RunningChecked> CheckRunning(std::optional<Duration> grace, std::optional<Duration> lease);

  // Tells worker `node_id` the drops (tasks cancelled while waiting in a queue) it was not
  // told of when they were sent, within the last node_lease (WorkerSignals). The
  // coordinator calls it for every heartbeat it stores.
  void TellMissedDrops(const std::string& node_id) { signals_.TellMissedDrops(node_id); }
  // A worker's heartbeat was stored (the coordinator calls it for each):
  // WorkerSignals::WorkerHeard.
  void WorkerHeard(const std::string& node_id) { signals_.WorkerHeard(node_id); }

  // Called, with no lock held, whenever a job reaches a terminal state.
  void SetJobFinishedListener(std::function<void(const JobRecord&)> listener)
      BATON_EXCLUDES(listener_mu_);

 private:
  // What one decision (an event and its follow-ups) did.
  struct Decided {
    Status status;
    bool wrote = false;               // it stored at least one row effect
    std::vector<JobRecord> created;   // jobs it created (Submit answers with its own)
    std::vector<JobRecord> finished;  // for the listener, once the tree lock is released
  };
  // The first effects of a decision, given its scope: Decide of an event, or Frontier.
  using FirstEffects =
      std::function<Result<std::vector<flow::Effect>>(Transaction&, JobCache::Scope&)>;

  // A caller's request about a job (cancel, restart, pause, resume), decided.
  Status Request(const std::string& job_id, const flow::Event& event);
  // Decides `event` about job `job_id` under its tree's lock, then tells the listener.
  Status Handle(const std::string& job_id, const flow::Event& event, Decided* out = nullptr);
  // Decides each check (CheckRunning): how many wrote a row; the first error when none did.
  Result<int> Offer(const std::vector<RunningCheck>& checks);
  // A worker's message decided (HandleTask), and its answer (Handled).
  Status OnWorker(const WorkerEvent& event);
  // The same for an event about a task whose job the message may not name.
  Status HandleTask(const std::string& task_id, const std::string& job_id, const flow::Event& event,
                    Decided* out = nullptr);
  // A decision failed for a lasting reason: its tree's top-level job fails (the caller
  // holds the tree's lock).
  void FailTree(const std::string& job_id, Decided& decided);
  // The decision itself: the caller holds the tree's lock.
  Decided DecideLocked(const FirstEffects& first);
  Result<std::vector<flow::Effect>> Decide(Transaction& tx, JobCache::Scope& contexts,
                                           const flow::Event& event);
  // What an executor reported (AfterCommit::Decisions::reported): its events decided as one
  // decision (the caller holds the tree's lock).
  Status DecideReport(const std::vector<flow::Event>& events);
  void Notify(const std::vector<JobRecord>& finished) BATON_EXCLUDES(listener_mu_);
  // Stores the jobs `body` returns (CreateJob effects: the one way a job is created).
  Result<std::vector<JobRecord>> Store(const CreateJobsBody& body);
  // Decides StartJob for a stored PENDING job, again a second later if that may pass.
  void StartCreated(const std::string& id);
  flow::Policy Policy() const;

  Datastore& datastore_;
  Clock& clock_;
  const SchedulerOptions options_;
  const OutboxSinks sinks_;
  JobLocks locks_;
  JobCache cache_;
  ViewReader reader_;
  WorkerSignals signals_;
  Mutex listener_mu_;
  std::function<void(const JobRecord&)> listener_ BATON_GUARDED_BY(listener_mu_);
  // Before deadlines_, whose timers call into it: it is handed deadlines_ unconstructed
  // and first uses it in a decision, once the scheduler is built.
  AfterCommit after_;
  // Last: its timers and thread call into the members above, so they go first.
  Deadlines deadlines_;
  std::unique_ptr<Starter> starter_;  // with start_in_background
};

}  // namespace baton

// The coordinator: listens to the engine queues (started, completed, failed, progress,
// logs, heartbeats) and hands each event to the scheduler or the datastore; offers the
// operations the API needs (submit, cancel, restart, wait).
//
// Thread-safety: thread-safe. Events are handled on the broker's subscription threads;
// the scheduler serialises its own decisions.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "broker/broker.h"
#include "coordinator/event_relay.h"
#include "coordinator/executors/broker_executor.h"
#include "coordinator/scheduler.h"
#include "coordinator/schedules.h"
#include "coordinator/webhooks.h"
#include "core/redact.h"
#include "datastore/datastore.h"

namespace baton {

struct CoordinatorOptions {
  SchedulerOptions scheduler;
  int prefetch = 64;  // events handled per queue before acking
  // A RUNNING task's node must heartbeat within this time, or the task is re-queued.
  std::chrono::milliseconds lease = std::chrono::seconds(30);
  // How often leases are checked (and, with `node_id`, the coordinator heartbeats).
  std::chrono::milliseconds lease_check_interval = std::chrono::seconds(5);
  // A RUNNING task with a `timeout` that its worker has not stopped this long after it is
  // failed as timed out, and its worker told to kill it (checked with the leases).
  std::chrono::milliseconds timeout_grace = std::chrono::seconds(30);
  // Several coordinators: with an id, this coordinator records itself as a node named
  // "coordinator" and heartbeats, and when another coordinator stops heartbeating for a
  // lease, takes over the steps it may have left half done (a reconcile, job by job under
  // the job locks). Empty for a single coordinator.
  std::string node_id;
  std::string hostname;
  std::string version;
  // How often finished jobs whose autoDelete time has come are deleted (with their
  // tasks, logs and sub-jobs), and how many are deleted per datastore call. Several
  // coordinators may sweep at once: a job deleted twice is NotFound the second time.
  std::chrono::milliseconds auto_delete_interval = std::chrono::seconds(60);
  int auto_delete_batch = 100;
  // Retention (Tork's datastore.retention): at each sweep, log parts older than
  // `log_retention` and finished top-level jobs created more than `job_retention` ago
  // (with their tasks, logs, deliveries and sub-jobs) are deleted, `retention_batch`
  // log parts (jobs: auto_delete_batch) per transaction. Zero: kept for ever.
  std::chrono::milliseconds log_retention = std::chrono::hours(168);
  std::chrono::milliseconds job_retention = std::chrono::hours(8760);
  int retention_batch = 1000;
  // Webhooks: what delivers the outbox (coordinator/webhooks.h). Without a sender (unit
  // tests), deliveries are written and never sent.
  WebhookSender* webhook_sender = nullptr;
  WebhookOptions webhooks;
  // Scheduled jobs: how often due ticks are looked for (coordinator/schedules.h).
  ScheduleOptions schedules;
  // Several coordinators (`baton run coordinator`): share the changes of GET /events with
  // the others over the broker's broadcasts, on demand (coordinator/event_relay.h). Needs
  // `node_id` (Start fails without). `events_want_interval`: how often a coordinator with
  // streams says so; another's want holds for 3 times it.
  bool share_events = false;
  std::chrono::milliseconds events_want_interval = std::chrono::seconds(2);
};

class Coordinator {
 public:
  Coordinator(Datastore& datastore, Broker& broker, Clock& clock, Timers& timers,
              CoordinatorOptions options = {});
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Subscribes to the engine queues, then reconciles: `live_nodes` are the nodes whose
  // RUNNING tasks are still theirs (for standalone: only its own worker). Leases are
  // checked from one lease after the start on, so that nodes whose heartbeats queued up
  // while no coordinator ran are heard first.
  Status Start(const std::set<std::string>& live_nodes);
  void Stop();

  Result<JobRecord> Submit(const Job& job);
  Status Cancel(const std::string& job_id);
  Status Restart(const std::string& job_id);
  Status Pause(const std::string& job_id);                             // Scheduler::Pause
  Status Resume(const std::string& job_id);                            // Scheduler::Resume
  Status Rerun(const flow::Rerun& rerun);                              // Scheduler::Rerun
  Status Skip(const std::string& task_id, const std::string& result);  // Scheduler::Skip
  Status Signal(const flow::Signal& signal);                           // Scheduler::Signal
  // The job once it is terminal (COMPLETED, FAILED or CANCELLED), or DeadlineExceeded.
  Result<JobRecord> Wait(const std::string& job_id, std::chrono::milliseconds timeout);
  // How many jobs have reached a terminal state through this coordinator so far.
  std::uint64_t FinishedJobs();
  // The jobs that ended since FinishedJobs() returned `seen` (`ids`, in the order they
  // ended; nullopt when more ended than are remembered, kMaxRememberedFinishes), and the
  // count now.
  struct Finishes {
    std::uint64_t count = 0;
    std::optional<std::vector<std::string>> ids;
  };
  static constexpr std::size_t kMaxRememberedFinishes = 4096;
  Finishes FinishedSince(std::uint64_t seen);
  // Returns once a job has finished since FinishedJobs() returned `seen`, once `wake` is
  // true, or after `timeout`. Whoever sets `wake` calls WakeFinishWaiters after it. For a
  // waiter of many jobs (the API's parked submissions) that must hear of each end at
  // once rather than at its next look.
  void WaitForFinishes(std::uint64_t seen, std::chrono::milliseconds timeout,
                       const std::atomic<bool>& wake);
  void WakeFinishWaiters();

  Scheduler& scheduler() { return scheduler_; }
  // What this coordinator's decisions and webhook deliveries did (GET /metrics).
  Metrics& metrics() { return metrics_; }
  // The committed changes of this coordinator's decisions and the log parts it stored
  // (with share_events, also those of the other coordinators), for GET /events.
  EventHub& events() { return events_; }
  // /scheduled-jobs; their ticks fire every options.schedules.interval once started.
  Schedules& schedules() { return schedules_; }

  // The values to hide in what task `task_id` of job `job_id` produces (log lines,
  // result, error): the job's (SecretValues of its record) and those of the task's row,
  // whose env is stored evaluated. Cached per job and per task, bounded, so a log part
  // costs no datastore read once its task has been seen.
  std::vector<std::string> SecretsFor(const std::string& job_id, const std::string& task_id);

  // Redacts a log part as part of its task's whole log (a secret written across two parts
  // is hidden whole) and stores what is final of it. An empty part is the worker's mark
  // of the log's end: what was held back of the log is stored then. Unavailable when the
  // datastore is (the part is to be delivered again).
  Status StoreLogPart(LogPart part);

  // Deletes the jobs due for deletion now, in batches; returns how many were deleted.
  // Runs every auto_delete_interval once started.
  Result<int> DeleteDueJobs();
  // One retention pass (see CoordinatorOptions::log_retention), bounded like
  // DeleteDueJobs: how many log parts and jobs it deleted.
  struct Retained {
    int log_parts = 0;
    int jobs = 0;
  };
  Result<Retained> SweepRetention();
  // Deletes a finished top-level job with everything of it (DELETE /jobs/{id}):
  // NotFound for an unknown one, FailedPrecondition for an active job or a sub-job.
  Status DeleteJob(const std::string& job_id);

 private:
  // Runs `work` every `interval` (on the timers' thread) until Stop, which cancels
  // `this->*timer` and waits for a run under way. The timer is named by a member pointer
  // (lease_timer_ or sweep_timer_), set under mu_: a reference to a guarded member could
  // be used without the lock unseen.
  void SchedulePeriodic(std::optional<TimerId> Coordinator::*timer,
                        std::chrono::milliseconds interval, void (Coordinator::*work)())
      BATON_EXCLUDES(mu_);
  void CheckLeases();
  // The workers' queues (outcomes, starts, progress, logs, heartbeats), each to its handler.
  Status SubscribeToWorkers();
  Status Subscribe(std::string_view queue, std::function<Status(const std::string&)> handle);
  // Deletes the job if it is finished (FailedPrecondition if not, or if `top_level` and
  // it is a sub-job); called under the job's lock, so nothing restarts it in between.
  Status DeleteFinishedJob(const std::string& job_id, bool top_level);
  // A sweep's deletion (autoDelete, retention) of a job it listed: DeleteFinishedJob
  // under the job's lock.
  Status SweepJob(const std::string& job_id);
  // Datastore::DeleteJob, and the job's secrets forgotten.
  Status DeleteStoredJob(const std::string& job_id);
  // One autoDelete sweep (DeleteDueJobs), logged.
  void Sweep();
  // Arms the next look for due scheduled ticks at `at` unless one is armed at or before
  // it; the look (Schedules::FireDue, logged) arms the one after it.
  void ArmScheduleLook(TimePoint at) BATON_EXCLUDES(mu_);
  void Heartbeat(NodeStatus status);
  // Reconciles after another coordinator went silent; true when one did.
  bool TakeOverSilentCoordinators();

  Datastore& datastore_;
  Broker& broker_;
  Clock& clock_;
  Timers& timers_;
  CoordinatorOptions options_;
  // Before what counts into it: the deliverer and the scheduler.
  Metrics metrics_;
  // Before the scheduler, which publishes to it.
  EventHub events_;
  // With share_events; after the hub, which calls it.
  std::unique_ptr<EventRelay> relay_;
  // Before the scheduler, which wakes it after commits that wrote deliveries.
  std::unique_ptr<WebhookDeliverer> webhooks_;
  // Before the scheduler, which starts runnable rows through it.
  BrokerExecutor broker_executor_;
  Scheduler scheduler_;
  Schedules schedules_;
  std::vector<std::unique_ptr<Subscription>> subscriptions_;

  std::vector<std::string> JobSecrets(const std::string& job_id);

  // Secret values by job id and (job's and row's merged) by task id. Entries never go
  // stale: a row's env is evaluated before the row is stored, and a retry is a new row.
  Mutex secrets_mu_;
  std::map<std::string, std::vector<std::string>> job_secrets_ BATON_GUARDED_BY(secrets_mu_);
  std::map<std::string, std::vector<std::string>> task_secrets_ BATON_GUARDED_BY(secrets_mu_);

  // The logs whose last part ended where a secret may start (or inside a UTF-8
  // character), by task id: what was held back, and the number of the part that
  // continues it. Only such logs have an entry, so the map stays small; bounded.
  struct LogStream {
    int next = 0;
    StreamRedactor redactor;
  };
  std::map<std::string, LogStream> log_streams_ BATON_GUARDED_BY(secrets_mu_);

  Mutex mu_;
  std::condition_variable_any finished_cv_;
  std::uint64_t finished_count_ BATON_GUARDED_BY(mu_) = 0;  // bumps on every terminal job
  // The last kMaxRememberedFinishes jobs that ended, the newest last: the one that made
  // finished_count_ N is at N - 1 - (finished_count_ - size).
  std::deque<std::string> recent_finishes_ BATON_GUARDED_BY(mu_);
  bool stopped_ BATON_GUARDED_BY(mu_) = false;
  int periodic_running_ BATON_GUARDED_BY(mu_) = 0;  // lease checks or sweeps under way
  std::condition_variable_any periodic_cv_;         // signalled when periodic_running_ drops
  std::optional<TimerId> lease_timer_ BATON_GUARDED_BY(mu_);
  std::optional<TimerId> sweep_timer_ BATON_GUARDED_BY(mu_);
  std::optional<TimerId> schedule_timer_ BATON_GUARDED_BY(mu_);
  TimePoint schedule_look_at_ BATON_GUARDED_BY(mu_){};  // when schedule_timer_ fires
  bool looking_ BATON_GUARDED_BY(mu_) = false;          // started: scheduled ticks are looked for
  TimePoint started_at_{};
  std::optional<TimePoint> broker_down_at_;  // lease timer thread only
};

}  // namespace baton

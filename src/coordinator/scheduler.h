// The scheduler: the Coordinator's decisions about jobs, as a thin shell over flow
// (src/flow/flow.h), which holds every rule. It reaches the world only through Datastore,
// Broker, Clock, Timers and Locker, so tests drive it with in-memory parts and a fake
// clock.
//
// Per event: take the lock of the event's job tree (the Locker, "baton.job:<top-level
// job id>": in process the keyed in-process locker, across coordinators the shared one);
// in one decision scope (Datastore::Transact) read the View the event names, flow::Decide, write
// every row effect, decide the follow-ups against the rows as they now are; after the
// scope is stored run the after-commit effects: start rows through the executor of their
// kind (the BrokerExecutor for runnable rows), arm and disarm timers (job timeouts, retry
// backoffs, republishing refused rows), tell workers of cancelled tasks (drop, then kill),
// and, once the tree's lock is released, tell the listener which jobs finished.
// Reconciling is flow::Frontier per active job; lease expiry is the LeaseExpired event.
//
// Thread-safety: thread-safe. Decisions about one job tree are serialised by the tree's
// lock; decisions about different trees run at once and never wait for each other. The
// shell's own mutexes guard small maps only (a cache of tree roots, the armed job timers,
// the listener, the starter's queue) and are never held across a datastore call, a broker
// publish or a callback: the annotations let the `thread-safety` preset prove it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "broker/broker.h"
#include "coordinator/events.h"
#include "coordinator/executors/broker_executor.h"
#include "core/job.h"
#include "core/messages.h"
#include "core/records.h"
#include "core/task_kind.h"
#include "datastore/datastore.h"
#include "flow/flow.h"
#include "locker/locker.h"
#include "metrics/metrics.h"

namespace baton {

struct SchedulerOptions {
  // The broker keeps messages across restarts (RabbitMQ). Then a row is marked SCHEDULED
  // only once the broker confirmed its message, and reconciling re-publishes PENDING rows
  // only; otherwise (the in-memory broker) SCHEDULED rows are re-published too.
  bool durable_broker = false;
  // A RUNNING task whose node is gone is re-queued at most this many times.
  int max_redeliveries = 3;
  // Workers heard from within this long are told of cancelled tasks still in a queue,
  // since any of them may take such a task's message.
  Duration node_lease = std::chrono::seconds(30);
  // Several coordinators: every decision about a job is taken under the lock
  // "baton.job:<id of its top-level job>" of this locker, so each step is decided once.
  // Null for a single coordinator: the scheduler then uses an in-process locker of its
  // own, so that one job's long decision does not hold up the others'.
  Locker* job_locker = nullptr;
  std::chrono::milliseconds lock_timeout = std::chrono::seconds(30);
  // A task whose message the broker refused is published again after this long.
  Duration republish_delay = std::chrono::seconds(2);
  // Submit returns once the job is stored (PENDING), and a thread of the scheduler
  // starts it right after: concurrent submissions then share commits instead of queueing
  // behind the scheduler's decisions. A crash in between leaves the job PENDING, and
  // reconciling starts it. Off: Submit starts the job before returning (tests rely on it).
  bool start_in_background = false;
  // Called after a commit that wrote webhook deliveries (the coordinator's deliverer
  // wakes up). Not under any lock of the scheduler.
  std::function<void()> on_webhooks;
  // What the decisions did, counted (ended jobs and task attempts, retries, each
  // event's decision time). Null: not counted.
  Metrics* metrics = nullptr;
  // Told every committed change of a job or task row while a stream is subscribed
  // (GET /events). Null: not told.
  EventHub* events = nullptr;
};

class Scheduler {
 public:
  Scheduler(Datastore& datastore, Broker& broker, Clock& clock, Timers& timers,
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

  // flow::Frontier for every active job, each under its tree's lock; RUNNING rows on a
  // node not in `live_nodes` are expired as leases.
  Status Reconcile(const std::set<std::string>& live_nodes);
  // RUNNING runnable rows of nodes silent for longer than `lease` (and started longer
  // ago than that) are decided as LeaseExpired. Returns how many were re-queued.
  Result<int> ExpireLeases(Duration lease);

  // Tells worker `node_id` the drops (tasks cancelled while waiting in a queue) it was not
  // told of when they were sent, within the last node_lease: its heartbeat was not
  // stored yet then, so it was not among the workers told. The coordinator calls it for
  // every heartbeat it stores; TellWorkers calls it before a kill goes to a node. Each
  // drop reaches each node once.
  void TellMissedDrops(const std::string& node_id) BATON_EXCLUDES(drops_mu_);

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
    // Task attempts it ended, for the metrics once stored: (queue, state, seconds run).
    struct Ended {
      std::string queue;
      TaskState state;
      std::optional<double> seconds;
    };
    std::vector<Ended> ended;
    std::vector<std::string> retried;  // queues of the retry attempts it created
  };
  // A running job's context as the shell keeps it between decisions (ContextOf): parsed
  // once per version (Transaction::GetJobState), shared by the views that read it.
  struct SharedContext {
    int version = 0;
    std::shared_ptr<const nlohmann::json> value;
    std::size_t bytes = 0;  // its stored text's length, what contexts_ is bounded by
  };
  // The contexts one decision's scope read or wrote, job id → the context as it is in
  // the scope (none: forget the kept one). Published to contexts_ once the scope commits,
  // dropped if it does not: a version read or written in a scope that rolls back may be
  // written again with other contents.
  using ScopeContexts = std::map<std::string, std::optional<SharedContext>>;
  // The first effects of a decision, given its scope: Decide of an event, or Frontier.
  using FirstEffects =
      std::function<Result<std::vector<flow::Effect>>(Transaction&, ScopeContexts&)>;

  // Decides `event` about job `job_id` under its tree's lock, then tells the listener.
  Status Handle(const std::string& job_id, const flow::Event& event, Decided* out = nullptr);
  // The same for an event about a task whose job the message may not name.
  Status HandleTask(const std::string& task_id, const std::string& job_id, const flow::Event& event,
                    Decided* out = nullptr);
  // The decision itself: the caller holds the tree's lock.
  Decided DecideLocked(const FirstEffects& first);
  // What `event` reads, through the decision's scope.
  Result<flow::View> ReadView(Transaction& tx, const flow::Event& event, ScopeContexts& contexts);
  Status AddEach(Transaction& tx, const TaskRecord& each, flow::View& view);
  // The webhook deliveries a decision's row writes call for (the outbox, core/webhook.h),
  // appended to `hooks`: a job's state or progress change (JobHooks), a task row's
  // (TaskHooks), the rows a CancelActive cancelled (CancelledHooks). Jobs without
  // webhooks on the event cost a look at their (shared) definition.
  struct HookJob {
    JobRecord row;  // state columns, as GetJobState reads them
    std::shared_ptr<const nlohmann::json> context;
  };
  Result<HookJob> HookJobOf(Transaction& tx, const std::string& job_id, ScopeContexts& contexts);
  static void AddHooks(std::vector<WebhookDelivery>& hooks, std::vector<WebhookDelivery> more);
  // What a job stored new (its definition in its row) reports: job.StateChange.
  std::vector<WebhookDelivery> CreatedJobHooks(const JobRecord& job);
  Status JobHooks(Transaction& tx, const flow::UpdateJob& e, ScopeContexts& contexts,
                  std::vector<WebhookDelivery>& hooks);
  Status TaskHooks(Transaction& tx, const TaskRecord& row, std::string_view event,
                   ScopeContexts& contexts, std::vector<WebhookDelivery>& hooks);
  Status CancelledHooks(Transaction& tx, const std::string& job_id,
                        const std::vector<CancelledTask>& cancelled, ScopeContexts& contexts,
                        std::vector<WebhookDelivery>& hooks);
  // A job's definition, read once while it runs and shared by its decisions (a running
  // job's definition never changes); forgotten when the job ends.
  Result<std::shared_ptr<const Job>> DefinitionOf(Transaction& tx, const std::string& job_id)
      BATON_EXCLUDES(definitions_mu_);
  void ForgetDefinitions(const std::vector<JobRecord>& finished)
      BATON_EXCLUDES(definitions_mu_, contexts_mu_);
  // A job's context at `version` (what GetJobState said): the scope's, the kept one, or
  // read and parsed (then kept in `scope`).
  Result<std::shared_ptr<const nlohmann::json>> ContextOf(Transaction& tx,
                                                          const std::string& job_id, int version,
                                                          ScopeContexts& scope)
      BATON_EXCLUDES(contexts_mu_);
  void PublishContexts(ScopeContexts& scope) BATON_EXCLUDES(contexts_mu_);
  void ForgetContextLocked(const std::string& job_id) BATON_REQUIRES(contexts_mu_);
  // The after-commit effects of one decision, in their order.
  Status RunAfterCommit(std::vector<flow::Effect>&& after);
  void StartRows(std::vector<TaskRecord> rows);
  void TellWorkers(const std::vector<std::string>& drops,
                   const std::map<std::string, std::vector<std::string>>& kills)
      BATON_EXCLUDES(drops_mu_);
  // Publishes CancelTask messages of `ids` to `node`'s cancel queue.
  void TellNode(const std::string& node, const std::vector<std::string>& ids);
  void Notify(const std::vector<JobRecord>& finished) BATON_EXCLUDES(listener_mu_);

  // The executor of a leaf kind; null for a composite (which flow never starts).
  Executor* ExecutorFor(TaskKind kind);

  Result<std::unique_ptr<Lock>> LockTree(const std::string& job_id);
  Result<std::string> RootOf(const std::string& job_id) BATON_EXCLUDES(roots_mu_);

  // Timers: each callback decides its event under the tree's lock.
  void Schedule(TimePoint at, std::function<void()> callback) BATON_EXCLUDES(timers_mu_);
  void ArmJobTimeout(const std::string& job_id, Duration timeout, TimePoint at)
      BATON_EXCLUDES(timers_mu_);
  void DisarmJobTimeout(const std::string& job_id) BATON_EXCLUDES(timers_mu_);

  void StarterLoop(std::stop_token stop) BATON_EXCLUDES(start_mu_);
  // Decides StartJob for a job CreateJobsWith stored, again a second later if that may pass.
  void StartCreated(const std::string& id);

  flow::Policy Policy() const;

  Datastore& datastore_;
  Broker& broker_;
  Clock& clock_;
  Timers& timers_;
  const SchedulerOptions options_;
  std::unique_ptr<Locker> own_locker_;  // when options gave none (a single coordinator)
  Locker& locker_;
  BrokerExecutor broker_executor_;

  Mutex roots_mu_;
  std::map<std::string, std::string> roots_ BATON_GUARDED_BY(roots_mu_);  // job → top-level

  // Running jobs' definitions (DefinitionOf), at most kMaxDefinitions (emptied when
  // full, refilled on demand).
  static constexpr std::size_t kMaxDefinitions = 4096;
  Mutex definitions_mu_;
  std::map<std::string, std::shared_ptr<const Job>> definitions_ BATON_GUARDED_BY(definitions_mu_);
  // Running jobs' contexts (ContextOf), at most kMaxContexts of them and kMaxContextBytes
  // of stored text (emptied when full, refilled on demand); forgotten when a job ends.
  static constexpr std::size_t kMaxContexts = 4096;
  static constexpr std::size_t kMaxContextBytes = 64u << 20;
  Mutex contexts_mu_;
  std::map<std::string, SharedContext> contexts_ BATON_GUARDED_BY(contexts_mu_);
  std::size_t context_bytes_ BATON_GUARDED_BY(contexts_mu_) = 0;

  Mutex timers_mu_;
  std::map<std::string, TimerId> job_timers_ BATON_GUARDED_BY(timers_mu_);
  std::set<TimerId> armed_ BATON_GUARDED_BY(timers_mu_);  // cancelled by the destructor
  bool closing_ BATON_GUARDED_BY(timers_mu_) = false;

  // The drops sent in the last node_lease, each with the nodes told of it (TellMissedDrops).
  struct SentDrops {
    TimePoint at;
    std::vector<std::string> ids;
    std::set<std::string> told;
  };
  Mutex drops_mu_;
  std::deque<SentDrops> recent_drops_ BATON_GUARDED_BY(drops_mu_);
  std::size_t recent_drop_ids_ BATON_GUARDED_BY(drops_mu_) = 0;

  Mutex listener_mu_;
  std::function<void(const JobRecord&)> listener_ BATON_GUARDED_BY(listener_mu_);

  Mutex start_mu_;
  std::condition_variable_any start_cv_;
  std::deque<std::string> to_start_ BATON_GUARDED_BY(start_mu_);  // PENDING jobs
  std::jthread starter_;  // last: stopped before the members above go
};

}  // namespace baton

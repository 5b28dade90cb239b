// The scheduler: decides what happens next in every job. It turns a submitted job into
// task rows, publishes runnable tasks to their queues, and on each outcome (started,
// completed, failed) records it and takes the next step at once — the next task, a retry
// after its backoff, the completion or failure of a parallel, each, sub-job or job.
//
// It reaches the world only through Datastore, Broker, Clock and Timers, so tests drive
// it with in-memory parts and a fake clock.
//
// Every handler is idempotent: a duplicate or late event for a finished task is ignored,
// and so is an outcome from another node than the one running the task (a duplicate
// delivery, which is cancelled where it runs).
// Thread-safety: thread-safe. The decisions about one job tree are serialised by the
// tree's lock (`job_locker`, shared by the coordinators of a datastore; an in-process
// one for a single coordinator): a handler takes the job's lock, then the mutex `mu_`,
// which guards the scheduler's own state (caches, timers, notifications). A decision
// holds `mu_` throughout, except while it expands an each (evaluates and stores its
// children), which touches none of that state: a big each holds up neither other jobs'
// decisions nor a cancel (of another job) nor a stop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "broker/broker.h"
#include "core/evaluate.h"
#include "core/job.h"
#include "core/messages.h"
#include "core/records.h"
#include "datastore/datastore.h"
#include "locker/locker.h"

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
};

class Scheduler {
 public:
  Scheduler(Datastore& datastore, Broker& broker, Clock& clock, Timers& timers,
            SchedulerOptions options = {});
  // Stops the starter thread (jobs it has not started stay PENDING, for reconciling).
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Stores a validated job as PENDING and starts it. Returns the stored record.
  Result<JobRecord> Submit(const Job& job);

  // Events from workers. An error that may pass (the datastore or the job's lock
  // unreachable: Unavailable, DeadlineExceeded) means the event should be delivered again;
  // other errors are logged here, and the event is done with.
  Status OnStarted(const TaskStarted& event);
  Status OnFinished(const TaskFinished& event);
  Status OnProgress(const TaskProgress& event);

  // PENDING/SCHEDULED/RUNNING → CANCELLED, with all its active tasks and sub-jobs.
  // FailedPrecondition otherwise.
  Status Cancel(const std::string& job_id);
  // FAILED/CANCELLED → RUNNING, re-running from the task that stopped it.
  // FailedPrecondition otherwise.
  Status Restart(const std::string& job_id);

  // Rebuilds what should be in flight from the datastore after a restart (or after
  // another coordinator died mid-step): starts PENDING jobs, re-dispatches lost tasks
  // (a retry still in its backoff waits for the rest of it), re-queues RUNNING tasks
  // whose node is not in `live_nodes` as new attempts, and finishes steps whose outcome
  // was recorded but not acted on. Each job under its lock.
  Status Reconcile(const std::set<std::string>& live_nodes);

  // Task leases: a RUNNING task belongs to its node while the node heartbeats. Tasks of
  // nodes silent for longer than `lease` (as of `now`) are re-queued as new attempts
  // (redelivered + 1, capped); a late outcome from the old attempt is then ignored.
  // Returns how many tasks were re-queued.
  Result<int> ExpireLeases(Duration lease);

  // Makes long decisions under way give up (an each being expanded stores nothing, and
  // its step is left for reconciling), so that a stop does not wait for them. Decisions
  // after it run as usual. Resume undoes it (a coordinator started again).
  void Stop();
  void Resume();

  // Called (outside the scheduler's lock) whenever a job reaches a terminal state.
  void SetJobFinishedListener(std::function<void(const JobRecord&)> listener);

 private:
  using Vars = nlohmann::json;

  // A long decision about job `job_id` (of tree `root`) should give up: the scheduler
  // is stopping, or a cancel of the job or its tree waits for the lock.
  bool ShouldYield(const std::string& job_id, const std::string& root);

  // The lock of the job tree `job_id` belongs to.
  Result<std::unique_ptr<Lock>> LockJob(const std::string& job_id);
  Result<std::string> RootOf(const std::string& job_id);
  Result<std::string> JobOfTask(const std::string& task_id, const std::string& known);

  // Timer callbacks: take the job's lock, then the mutex.
  void JobTimedOut(const std::string& job_id, Duration timeout);
  void PublishPending(const std::string& task_id, const std::string& job_id);

  // A submitted job the starter thread has to start. With `first`, the job was stored
  // RUNNING with this row of its first task (decided at submit), which is then only
  // published; without, the job was stored PENDING and StartJob decides.
  struct Submitted {
    std::string job_id;
    std::optional<TaskRecord> first;
    std::optional<Duration> timeout;          // the job's, armed when it is started
    std::shared_ptr<const JobRecord> stored;  // without `first`: the row as stored, if known
  };
  // start_in_background: starts the submitted jobs queued in to_start_.
  void StarterLoop(std::stop_token stop);
  void StartSubmitted(const std::string& job_id, const JobRecord* stored);
  // Publishes the first tasks of jobs stored with them (one broker batch), arming their
  // jobs' timeouts first.
  void PublishSubmitted(std::vector<Submitted>& jobs);

  // A new job's row, not stored.
  JobRecord NewJobRecord(const Job& job, const std::string& parent_task_id, std::string id) const;
  // The row of a new job's first task when it is a runnable task that runs now (not
  // composite, not skipped, its templates evaluated without error), ready to store with
  // the job and publish as PublishStored publishes; nullopt otherwise (StartJob takes the
  // general way then). Needs no lock: it reads `job` alone.
  std::optional<TaskRecord> FirstTaskAtSubmit(const JobRecord& job, TimePoint now) const;

  // All private members below run with mu_ held (and the job's lock, when there is one).
  Result<JobRecord> CreateJob(const Job& job, const std::string& parent_task_id,
                              std::string id = "");
  // PENDING → RUNNING, then its first step. `stored`: the job's row as stored (PENDING),
  // when the caller has it; else it is read.
  Status StartJob(const std::string& job_id, const JobRecord* stored = nullptr);
  // What templates see: the job's context with `extra` (loop variables) over it.
  Vars VarsFor(const JobRecord& job, const Vars& extra) const;

  // Creates the row for `def` and takes it as far as it goes now.
  // `index` identifies a child within its parallel or each (kept by its retries).
  // `vars`, when the caller has it, is VarsFor(job, extra), built once for all the
  // children of a composite (it is changed while in use and restored); null: built here
  // when needed.
  Status ScheduleNew(const JobRecord& job, Task def, const std::string& parent_id, int position,
                     const Vars& extra, int index = 0, Vars* vars = nullptr);
  // Dispatches a row already stored (or to be stored when `create`) by its kind.
  // A runnable row that is `evaluated` needs of `job` only its id.
  Status Dispatch(const JobRecord& job, TaskRecord task, const Vars& extra, bool evaluated,
                  bool create, Vars* vars = nullptr);
  // The rows of a parallel's children when all are runnable tasks that run now (none
  // composite, skipped or failing evaluation), ready to store as PublishTask stores them;
  // nullopt otherwise.
  std::optional<std::vector<TaskRecord>> RunnableChildren(const JobRecord& job,
                                                          const TaskRecord& parent,
                                                          const Vars& vars, TimePoint now) const;
  // A decision about job `job_id` that ended in an error no retry will cure (a value
  // that cannot be stored, an internal error) would leave its job tree RUNNING with
  // nothing in flight: the tree's top-level job is failed with the error instead.
  // Transient errors (which a redelivery retries) and benign ones (NotFound,
  // FailedPrecondition) are returned as they are; others become Ok once handled.
  Status FailTreeOnError(const std::string& job_id, const Status& error);
  Status PublishTask(TaskRecord& task, bool create);
  // Publishes a row already stored as PublishTask stores it before publishing
  // (SCHEDULED, or PENDING with a durable broker). Without a durable broker it touches
  // nothing the mutex guards, so Submit calls it without the mutex.
  Status PublishStored(TaskRecord& task);
  // Gives a row to be stored and then published by PublishStored the state it is stored
  // in: PENDING with a durable broker (SCHEDULED once confirmed), else SCHEDULED.
  void ReadyToPublish(TaskRecord& row, TimePoint now) const;
  // The same for many rows with one broker batch (one wait for the confirms) and, with a
  // durable broker, one write marking them SCHEDULED.
  Status PublishStoredBatch(const std::vector<TaskRecord*>& rows);
  // Publishes `task_id` again after republish_delay (the broker refused it).
  void RepublishLater(const std::string& task_id, const std::string& job_id);
  // Starts the next CREATED child of an each; false when none is left.
  Result<bool> StartNextEachChild(const std::string& parent_id);
  // The CREATED children of an each in index order, as this scheduler knows them (loaded
  // from the datastore when it does not: another coordinator created the each).
  std::deque<std::string>& WaitingChildren(const std::string& parent_id);

  // What counting a composite's children needs to know of it: immutable once the row is
  // dispatched, so it is cached, and read from the row when this scheduler has not seen
  // it (another coordinator dispatched it, or the cache was cleared).
  struct CompositeShape {
    bool each = false;
    int expected = 0;  // children that must finish for it to complete
  };
  void RememberShape(const TaskRecord& composite);
  Result<CompositeShape> ShapeOf(const std::string& parent_id);
  // Forgets what is cached about a composite that finished.
  void ForgetComposite(const std::string& parent_id);

  // Outcomes, after the row is stored in its terminal state.
  Status TaskDone(const TaskRecord& task);
  Status TaskFailed(const TaskRecord& task);
  Status ChildDone(const std::string& parent_id);
  // A runnable task's completion from `from_node`, recorded in the same write as what it
  // does to its job (its `var`, and for a top-level task the job's next step or its
  // completion), then acted on. Ignored when the row is terminal or runs elsewhere.
  Status CompleteTask(const std::string& task_id, const std::string& job_id,
                      const std::string& result, const std::string& from_node,
                      std::optional<TimePoint> started_at);
  // The definition of job `job_id`, read once while the job runs (it never changes).
  Result<std::shared_ptr<const Job>> DefinitionOf(const std::string& job_id);
  // Drops it once the job has ended; a big one's end has FlushNotifications give the
  // freed memory back to the system.
  void ForgetDefinition(const std::string& job_id);
  static constexpr std::size_t kTrimAfterTasks = 1000;
  Status AdvanceJob(const std::string& job_id, int position);
  // Completes a RUNNING job (only while it is at `position`, when one is given).
  Status CompleteJob(const std::string& job_id, int position = 0);
  // What completing a job in an update decided: the row as stored completed, or the
  // error of its output (then it fails instead), or neither (nothing to complete).
  struct Completion {
    std::optional<JobRecord> stored;
    std::optional<std::string> output_error;
  };
  // What moving a job on from a step decided in an update of its row: the next step,
  // or its completion (or nothing: the job is not at that step, or not running).
  struct Advance {
    bool advanced = false;
    JobRecord job;  // what scheduling the next step needs: id, context, defaults
    Task next;
    Completion completion;
  };
  // Moves `j` on from step `position` inside an update of its row (a modifier: no
  // datastore calls): to the next step, or completed after the last one. `def` is the
  // job's definition (`j.job` may be left empty by a state-only update).
  void AdvanceInPlace(JobRecord& j, const Job& def, int position, TimePoint now,
                      Advance& advance) const;
  // What follows an AdvanceInPlace once it is stored.
  Status AfterAdvance(const std::string& job_id, int position, Advance advance);
  // Completes `j` inside an update of its row (a modifier: no datastore calls); `def` as
  // for AdvanceInPlace.
  Completion CompleteInPlace(JobRecord& j, const Job& def, TimePoint now) const;
  // What follows a completion decided by CompleteInPlace, once it is stored.
  Status AfterCompletion(const std::string& job_id, Completion completion);
  Status FailJob(const std::string& job_id, const std::string& error, JobState state);
  Status CancelActiveTasks(const std::string& job_id);
  // Cancels the active rows of job `job_id` (those below row `under`, when given) in one
  // write, then their running processes (kills_), queued messages (drops_) and sub-jobs.
  Status CancelRows(const std::string& job_id, const std::string& under);
  Status CancelTaskTree(const TaskRecord& task);
  // Fails the job `timeout` after `from` unless it has finished by then.
  void ArmJobTimeout(const std::string& job_id, Duration timeout, TimePoint from);
  Status Retry(const TaskRecord& failed);
  // A task whose node went away (or handed it back): a new attempt with redelivered + 1,
  // or a final failure past max_redeliveries.
  Status Redeliver(const TaskRecord& lost);
  // Marks a row terminal unless it already is; false when it was. With `from_node`, only
  // while the row is not recorded as running on another node. A row whose start was never
  // recorded (a short task reports only its outcome) gets `started_at`, else now.
  static bool FinishInPlace(TaskRecord& t, TaskState state, const std::string& result,
                            const std::string& error, TimePoint now, const std::string& from_node,
                            std::optional<TimePoint> started_at = std::nullopt);
  Result<bool> Finish(const std::string& task_id, TaskState state, const std::string& result,
                      const std::string& error, TaskRecord* out, const std::string& from_node = "",
                      std::optional<TimePoint> started_at = std::nullopt);
  Status ReconcileJob(const JobRecord& job, const std::set<std::string>& live_nodes);
  // Tells workers what was cancelled (drops_, kills_), then the listener which jobs
  // finished. Called after each decision, without mu_.
  void FlushNotifications();

  Datastore& datastore_;
  Broker& broker_;
  Clock& clock_;
  Timers& timers_;
  SchedulerOptions options_;

  // The job locker when options gave none (a single coordinator).
  std::unique_ptr<Locker> own_locker_;

  std::mutex roots_mu_;
  std::map<std::string, std::string> roots_;  // job id → its top-level job; guarded by roots_mu_

  // Guards the state below. A decision holds it while it runs (and the job's lock),
  // except around the expansion of an each (see Dispatch).
  std::mutex mu_;
  // each parents → their CREATED children, in index order, waiting for a slot. A cache:
  // an entry holds at least every child still CREATED (children never return to it).
  std::map<std::string, std::deque<std::string>> waiting_children_;  // guarded by mu_
  std::map<std::string, CompositeShape> shapes_;                     // guarded by mu_
  // Running jobs' definitions (DefinitionOf), dropped when they end. A cache: bounded.
  std::map<std::string, std::shared_ptr<const Job>> definitions_;    // guarded by mu_
  bool trim_memory_ = false;                                         // guarded by mu_
  std::map<std::string, TimerId> job_timers_;                        // guarded by mu_
  std::vector<JobRecord> finished_;                                  // guarded by mu_
  // What cancelling decided to tell workers, sent by FlushNotifications in this order:
  // tasks that may wait in a queue (to every live worker, so none starts them), then the
  // tasks running on a node (to that node). Dropped first, so the slot a killed task
  // frees cannot take a dropped one before its worker heard of it.
  std::vector<std::string> drops_;                                   // guarded by mu_
  std::map<std::string, std::vector<std::string>> kills_;            // guarded by mu_
  // Held by FlushNotifications from taking drops_ and kills_ until they are published,
  // so that two threads flushing at once publish in the order they took them: a kill
  // taken after a drop is never sent before it.
  std::mutex flush_mu_;
  // Rows Finish has moved to a terminal state: a cheap "did anything finish meanwhile".
  std::uint64_t finishes_ = 0;                      // guarded by mu_
  std::function<void(const JobRecord&)> listener_;  // guarded by mu_

  std::atomic<bool> stopping_{false};
  std::mutex cancel_mu_;
  std::multiset<std::string> cancelling_;  // guarded by cancel_mu_: jobs a Cancel waits for

  std::mutex start_mu_;
  std::condition_variable_any start_cv_;
  std::deque<Submitted> to_start_;  // guarded by start_mu_
  std::jthread starter_;            // last: stopped before the members above go
};

}  // namespace baton

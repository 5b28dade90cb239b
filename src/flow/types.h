// flow's vocabulary: the events it decides, the View (the stored rows) an event reads,
// the Policy of the deployment, and the effects a decision gives. The functions over them
// are in flow/flow.h.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/clock.h"
#include "core/duration.h"
#include "core/records.h"

namespace baton::flow {

// ------------------------------------------------------------------------- events
// What each event reads: ReadsOf (reads.cc).

// A job to store and start (its row, PENDING, not stored yet).
struct Submit {
  JobRecord job;
};
// A stored PENDING job to start (started in the background, a sub-job, a reconcile).
struct StartJob {
  std::string job_id;
};
// A worker took the task: a SCHEDULED job is RUNNING once one of its tasks starts, and
// so are the SCHEDULED jobs above it through sub-jobs.
struct Started {
  std::string task_id;
  std::string node_id;
  TimePoint at{};
};
// A worker's outcomes.
struct Completed {
  std::string task_id;
  std::string node_id;
  std::string result;
  std::optional<TimePoint> started_at;
};
struct Failed {
  std::string task_id;
  std::string node_id;
  std::string error;
  std::optional<TimePoint> started_at;
  // Why, as the worker's runtime saw it (kExit with the exit code; none said: kError).
  FailReason reason = FailReason::kError;
  std::optional<int> exit_code;
};
// The worker stopped the task because a cancel told it to.
struct WorkerCancelled {
  std::string task_id;
  std::string node_id;
  std::string error;
};
// The worker's runtime stopped the task at its `timeout`: a failure (retried as one).
struct TaskTimedOut {
  std::string task_id;
  std::string node_id;
  Duration timeout{};
};
// The worker handed the task back unrun (it is stopping): a new attempt elsewhere, at
// most max_redeliveries times.
struct Redelivery {
  std::string task_id;
  std::string node_id;
  std::string error;
};
// The task's node stopped heartbeating while it ran. It ends the row only when the row is
// RUNNING a runnable on `node_id`; and, with a `lease` (> 0), only when the node was
// last seen more than a lease ago (`node_last_seen`: its last heartbeat as the caller
// read it; none, not seen within the lease or never) and the task started at least a
// lease ago (a node's first heartbeat may still be on its way). Without a lease (the
// default), the caller has judged both.
struct LeaseExpired {
  std::string task_id;
  std::string node_id;
  std::optional<TimePoint> node_last_seen{};
  Duration lease{};
};
// Progress of a running task, 0..100.
struct Progress {
  std::string task_id;
  double progress = 0;
};
struct Cancel {
  std::string job_id;
};
struct Restart {
  std::string job_id;
};
// Beyond Tork: a SCHEDULED or RUNNING job is PAUSED, and so are its running sub-jobs (a
// Pause of each, `quiet`). Its running tasks run on; what it queued and no worker took yet
// is withdrawn (each such row CANCELLED, a new attempt held for the resume); nothing of it
// starts until it is resumed (Decider::Held). `quiet`: asked by the engine (a sub-job's
// parent, a pause point), not refused when the job is already PAUSED or not going.
struct Pause {
  std::string job_id;
  bool quiet = false;
};
// Beyond Tork: a finished top-level job (COMPLETED, FAILED or CANCELLED) runs again, as
// new rows beside its old ones (rerun.cc). `mode`: which of its top-level tasks run again:
//   kFailedOnly  those that did not complete (a sequence: from the one it stopped at; a
//                graph: the failed, cancelled and rule-skipped ones, as a restart);
//   kFromFailed  those, and every task after them (a graph: every task that needs one of
//                them, directly or not), completed or not;
//   kAll         every task, or with `from` that task and every task after it (a graph:
//                it and what needs it).
// The other tasks keep their results (`tasks.<var>`); `inputs` (an object) replace the
// job's inputs of the same names in its context.
enum class RerunMode { kFailedOnly, kFromFailed, kAll };
struct Rerun {
  std::string job_id;
  RerunMode mode = RerunMode::kFailedOnly;
  std::string from;
  nlohmann::json inputs = nlohmann::json::object();
  // With `once`: the run it reruns, as its caller read the job (its started_at): decided
  // again after the job started again (a request delivered twice), it is refused, not run
  // a second time.
  bool once = false;
  std::optional<TimePoint> of_run;
};
// Beyond Tork: a user marks a task SKIPPED with `result` (its `var` takes it) and its job
// carries on (rerun.cc): a runnable task not started yet (PENDING or SCHEDULED: dropped
// from the queues) of an active job; or the FAILED top-level task a finished job stopped
// at (a sequence's current task, a graph's failed step), as a new SKIPPED row in its place,
// the job running again from there.
struct Skip {
  std::string task_id;
  std::string result;
};
// A signal to a job (beyond Tork; kinds/wait.cc): every task of it waiting for `name`
// (wait: {signal: name}, RUNNING) completes with `payload` (a JSON value: a string is its
// result as it is, any other value its JSON text); when none waits, the job keeps it in
// its context (`signals.<name>`, the latest one) for the first that will. Refused for a
// job that has ended.
struct Signal {
  std::string job_id;
  std::string name;
  nlohmann::json payload;
};
// A PAUSED job goes on from its rows, as Frontier would have it (its held rows started,
// its retries' backoffs armed again), and so do its paused sub-jobs (a quiet Resume each).
struct Resume {
  std::string job_id;
  bool quiet = false;
};
struct JobTimedOut {
  std::string job_id;
  Duration timeout{};
};
// A retry's backoff is over.
struct RetryDue {
  std::string task_id;
};
// An each has free slots and CREATED children the view did not hold (Decide asks for
// it with a FollowUp).
struct FillEach {
  std::string task_id;
};

// A decision about the job's tree could not be stored for a lasting reason (a row the
// datastore refuses, an internal error): the job (the shell names the top-level one)
// fails with "the engine could not take a step: <error>" rather than stay RUNNING with
// nothing in flight.
struct StepFailed {
  std::string job_id;
  std::string error;
};

// The executor holds the rows somewhere durable (a durable broker confirmed their
// messages): each PENDING one is SCHEDULED, "in the broker"; the others are left alone.
// Rows of one job (the shell makes one event per job of a batch of confirms), decided
// together: one view, one decision. Reads the task rows.
struct Published {
  std::vector<std::string> task_ids;
};
// The executor could not hand the row on (the broker refused it): it is PENDING (not in
// a queue, as whoever reconciles must know) and queued again after
// Policy::republish_delay (a RetryDue). Reads the task row.
struct PublishRefused {
  std::string task_id;
  std::string error;
};

// The coordinator's own check of a task's `timeout`, for when its worker does not stop it
// (a worker that hangs but still heartbeats, a report lost): the row is RUNNING a runnable
// on `node_id` with a `timeout`, and started longer ago than that timeout plus `grace`.
// Then node `node_id` is told to kill it, and it fails as a TaskTimedOut would (retried
// as a failure). Any other row (ended, another attempt, not yet past): nothing.
struct TaskOverdue {
  std::string task_id;
  std::string node_id;
  Duration grace{};
};

using Event = std::variant<Submit, StartJob, Started, Completed, Failed, WorkerCancelled,
                           TaskTimedOut, Redelivery, LeaseExpired, Progress, Cancel, Restart,
                           JobTimedOut, RetryDue, FillEach, StepFailed, Published, PublishRefused,
                           TaskOverdue, Pause, Resume, Rerun, Skip, Signal>;

// ------------------------------------------------------------------------- view

// What the shell knows of its deployment that changes a decision.
struct Policy {
  // The broker keeps messages (RabbitMQ): a row to publish is stored PENDING and marked
  // SCHEDULED by the shell once the broker confirmed it; otherwise it is stored SCHEDULED.
  bool durable_broker = false;
  int max_redeliveries = 3;
  // The most bytes a job may take as stored (the datastore's MaxJobBytes): a sub-job
  // bigger than that, once its templates are evaluated, fails its task with the sizes.
  std::size_t max_job_bytes = 32u << 20;
  // A row the executor refused is queued again after this long (PublishRefused).
  Duration republish_delay = std::chrono::seconds(2);
  // A live-event stream listens (GET /events): every row written is told (Changed).
  bool live_events = false;
  // The most iterations a loop may ask for (its `max`): one asking more fails when it
  // starts, with both figures.
  int max_loop_iterations = 1000;
};

// The stored rows a decision reads: bounded by the depth of nesting and by the slots an
// each may fill, never by the size of a job (a decision in a job of 20,000 tasks, or
// about an each of 20,000 children, reads a handful of rows).
//   - `jobs`: the event's job and, for a sub-job, the jobs of its parent chain;
//   - `tasks`: the event's task row and every ancestor row (parent_id, and from a
//     sub-job's job its parent_id task, up to the top-level job);
//   - `next_created`: for every each among those rows, its CREATED children with the
//     lowest each_index, in each_index order, as many as NextCreatedWanted says (or
//     fewer: an each that runs out of them with slots free asks for more with a FillEach
//     follow-up, decided against a fresh view);
//   - `running_children`: for every each among those rows, how many of its children are
//     neither CREATED nor finished (what its `concurrency` counts). A child's each_index
//     is its index in its each, also when it is an each itself, so the count cannot be
//     kept in the each's own each_index. Only an each with a `concurrency` needs it: for
//     one without, a shell may give 0 (counting would read every queued child, 20,000 of
//     them at each completion of an each of 20,000).
//   - `definitions`: the definition of a job in `jobs` whose row was read without it (its
//     `job` left empty). A running job's definition never changes and grows with the job
//     (a chain of 20,000 steps), so a shell reads it once per job and shares it between
//     decisions instead of copying it into every view. A job absent here has its
//     definition in its row (what a test or the simulator may give). Decide neither
//     copies nor writes it: a job's row effects carry its row as given.
//   - `contexts`: the same for a job's context (its `context` left empty): it holds the
//     job's inputs and secrets (100,000 inputs make 1.6 MB) and changes only when a task
//     with a `var` completes, so a shell keeps it parsed between decisions. Decide reads
//     it there, copies it only to change it, and then its UpdateJob (context set) carries
//     the whole new context; any other UpdateJob of that job carries an empty one.
// A parallel needs nothing of its children (its row counts their completions). A row
// the decision needs and does not find makes it decide nothing for that part (a late
// event about a deleted job, say).
struct View {
  std::map<std::string, JobRecord> jobs;
  std::map<std::string, TaskRecord> tasks;
  // each id → its next CREATED children, lowest each_index first
  std::map<std::string, std::vector<TaskRecord>> next_created;
  std::map<std::string, int> running_children;  // each id → children started, not done
  std::map<std::string, std::shared_ptr<const Job>> definitions;  // job id → its definition
  std::map<std::string, std::shared_ptr<const nlohmann::json>> contexts;  // job id → context
  Policy policy;
  // New ids are derived from this (the shell gives a fresh NewId() per decision): the
  // i-th id made is the seed's first 12 characters (its time) and a hash of (seed, i).
  std::string id_seed;
  // Templates' randomInt() draws from a stream seeded with this; 0 (the default): seeded
  // from id_seed, as ids are, so a shell that gives a fresh id_seed per decision need not
  // set it. (Templates' now() is the decision's `now`.)
  std::uint64_t random_seed = 0;
};

// What a decision about an event reads (ReadsOf): the one spec of the View a shell builds
// for it (the scheduler's ReadView, the simulator's view builder). Nothing else is read.
// A row the spec names and the store does not hold is left out (a late event about a
// deleted job decides nothing for that part); a missing event task leaves the view empty.
struct Reads {
  // The task the event is about ("" for a job's event) and the job ("" for a task's event:
  // the task row's job_id; for Submit, the new job's id, whose row the event carries).
  std::string task_id;
  std::string job_id;
  // The event's task row.
  bool task = false;
  // More task rows of the same job, each read alone, as `task_id`'s is (a Published
  // batch; a row not stored is left out).
  std::vector<std::string> more_tasks;
  // The event's job (a task event's: the task row's job) as its state row (jobs, without
  // its definition and context)...
  bool job = false;
  // ...and with them (definitions, contexts: a shell may share them between decisions).
  bool job_whole = false;
  // Up to the top-level job: the task's ancestor rows (parent_id), then the task that
  // started the job as a sub-job (its parent_id) and its ancestors, and each of their
  // jobs (read as `job_whole` says), up to a job without a parent task.
  bool ancestors = false;
  // Up only while the job is SCHEDULED (what a start moves to RUNNING): the task that
  // started it as a sub-job, that task's job's state row, and so on while SCHEDULED.
  bool scheduled_parents = false;
  // For every each among the task rows read: running_children (counted only for an each
  // with a concurrency; 0 otherwise) and next_created (NextCreatedWanted of them).
  bool each_children = false;
  // Every task row of the event's job (a Pause finds its queued rows and its sub-jobs, a
  // Resume reconciles the job from them).
  bool all_tasks = false;
  // What the webhooks of the rows the decision changes need (Notify), for an event whose
  // jobs are not read whole: every job read gets its definition (shared, definitions)
  // and, when the definition has webhooks, its context (contexts); without `job`, the
  // task's job is read so: its definition and, when that has webhooks, its state row and
  // context. A job without webhooks costs a look at its definition, which a shell shares
  // between decisions.
  bool hooks = false;
  friend bool operator==(const Reads&, const Reads&) = default;
};

// ------------------------------------------------------------------------- effects

// Row writes, applied in order in the decision's transaction.
struct CreateJob {
  JobRecord row;
};
// `context`: the context changed too; else only the state columns (state, times,
// position, progress, result, error, delete_at) need writing. Never the definition (a
// stored job's never changes; `row.job` is empty when the view shared it).
// `state_changed` and `progress_changed` (UpdateJob and UpdateTask): how the row differs
// from the row as read (what its Notify is about; the shell's metrics count ended
// attempts by them).
struct UpdateJob {
  JobRecord row;
  bool context = false;
  bool state_changed = false;
  bool progress_changed = false;
};
struct CreateTask {
  TaskRecord row;
};
struct UpdateTask {
  TaskRecord row;
  bool state_changed = false;
  bool progress_changed = false;
};

// What a decision tells in its scope besides its rows (after its row writes, before its
// CancelActives; the rows a CancelActive cancels get theirs from AfterCancel). Each is
// built from the rows as the decision leaves them: a shell writes them without reading.
// A row's live event (GET /events): one per row written (created, updated, cancelled),
// given only with Policy::live_events.
struct Changed {
  enum class Row { kJob, kTask };
  Row of = Row::kJob;
  std::string job_id;
  std::string task_id;    // kTask
  std::string parent_id;  // kTask: the composite row it is a child of
  std::string state;      // as core/states.h names it
  std::string node_id;    // kTask
  double progress = 0;
  int position = 0;    // kJob: its current top-level task; kTask: its top-level task
  int task_count = 0;  // kJob
};
// A row's state or progress changed (a created row is a new state) and its job's
// definition calls webhooks on `event` (core/webhook.h: CallsWebhooks): what
// WebhookDeliveriesFor evaluates them over. None for a job without webhooks on it.
struct Notify {
  // core/names.h: kEventJobStateChange, kEventJobProgress, kEventTaskStateChange or
  // kEventTaskProgress (a state change, else progress).
  std::string_view event;
  JobRecord job;  // the job's state row (its `job` and `context` left empty)
  std::shared_ptr<const Job> definition;
  std::shared_ptr<const nlohmann::json> context;
  std::optional<TaskRecord> task;  // a task's event: its row
};

// Every active row of job `job_id` (below row `under`, when given) → CANCELLED at `at`,
// in one write. The shell passes the rows it cancelled to AfterCancel, with this.
// `hook`: the job calls webhooks on task.StateChange: each cancelled row's Notify is
// this one with the row (the shell gives AfterCancel the rows as cancelled).
struct CancelActive {
  std::string job_id;
  std::string under;
  TimePoint at{};
  std::optional<Notify> hook;
};

// After the commit.
// Start the stored row through the executor of its kind (today every leaf kind is
// runnable: the broker executor publishes it; with a durable broker the shell marks the
// row SCHEDULED once the broker confirmed).
struct Start {
  TaskRecord row;
};
// Decide RetryDue{task_id} at `at` (a retry's backoff).
struct StartAt {
  std::string task_id;
  TimePoint at{};
};
// Tell node `node_id` to stop the task (it runs there).
struct Kill {
  std::string node_id;
  std::string task_id;
};
// Tell every live worker not to start the task (it may wait in a queue).
struct Drop {
  std::string task_id;
};
// Tell every live worker not to start the task if it has not: a queued task of a job that
// paused (pause.cc). One a worker runs already runs on; the row stays as it is, and the
// resume queues a new attempt of one still not started.
struct Withdraw {
  std::string task_id;
};
// Decide JobTimedOut at `at`, unless disarmed first. Arming again replaces the timer.
struct ArmJobTimeout {
  std::string job_id;
  Duration timeout{};
  TimePoint at{};
};
struct DisarmJobTimeout {
  std::string job_id;
};
// The job reached a terminal state (the row as stored; its definition only if the
// view's row held it).
struct JobFinished {
  JobRecord row;
};
// The request is refused (a cancel of a finished job, a restart of a running one): the
// shell answers its caller with FailedPrecondition and this reason. Nothing else is
// decided.
struct Refused {
  std::string reason;
};
// Decide this next, under the same tree lock, after this decision's effects.
struct FollowUp {
  Event event;
};

using Effect = std::variant<CreateJob, UpdateJob, CreateTask, UpdateTask, CancelActive, Changed,
                            Notify, Start, StartAt, Kill, Drop, Withdraw, ArmJobTimeout,
                            DisarmJobTimeout, JobFinished, Refused, FollowUp>;

// A row a CancelActive cancelled, as the shell read it before (AfterCancel says what
// its cancel must tell).
struct CancelledRow {
  std::string id;
  TaskState was = TaskState::kPending;
  std::string node_id;
  std::string subjob_id;
  // The row as cancelled, for a CancelActive with a `hook` (its Notify carries it).
  std::optional<TaskRecord> row;
};

}  // namespace baton::flow

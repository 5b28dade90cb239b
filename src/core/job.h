// The job model: what a job file says, as typed values. Parsing and validation live in
// job_decode.h, the API's JSON shape in job_json.h. Plain values, no I/O.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/duration.h"

namespace baton {

using StringMap = std::map<std::string, std::string>;

// A copyable, comparable owning pointer, for the recursive parts of the model (an
// `each` holds the task it repeats).
template <typename T>
class Box {
 public:
  Box() : ptr_(std::make_unique<T>()) {}
  explicit Box(T value) : ptr_(std::make_unique<T>(std::move(value))) {}
  Box(const Box& other) : ptr_(std::make_unique<T>(*other.ptr_)) {}
  Box(Box&&) noexcept = default;
  Box& operator=(const Box& other) {
    if (this != &other) ptr_ = std::make_unique<T>(*other.ptr_);
    return *this;
  }
  Box& operator=(Box&&) noexcept = default;
  ~Box() = default;

  T& operator*() { return *ptr_; }
  const T& operator*() const { return *ptr_; }
  T* operator->() { return ptr_.get(); }
  const T* operator->() const { return ptr_.get(); }
  friend bool operator==(const Box& a, const Box& b) { return *a.ptr_ == *b.ptr_; }

 private:
  std::unique_ptr<T> ptr_;  // never null, except after a move
};

// Beyond Tork: why a runnable attempt failed, as its row keeps it (TaskRecord::reason)
// and `retry.on` names it: kExit, its command exited non-zero (its exit code kept too);
// kTimeout, its `timeout` (or the engine's overdue check); kOutOfMemory, killed for its
// memory limit; kLost, its worker was lost or handed it back, or the engine stopped while
// it ran; kError, it could not run (its templates or `if`, the runtime's own failure).
enum class FailReason { kNone, kExit, kTimeout, kOutOfMemory, kLost, kError };
std::string_view ToString(FailReason reason);  // "", "exit", "timeout", "oom", "lost", "error"
std::optional<FailReason> ParseFailReason(std::string_view text);

// Beyond Tork: which failures a retry is for (`retry.on`); none given, every failure but
// a lost one (which is re-queued, not retried: Policy::max_redeliveries).
struct RetryOn {
  std::vector<int> exit_codes;     // `exitCodes`: a kExit with one of them
  std::vector<FailReason> errors;  // `errors`: timeout, oom, lost, error
  friend bool operator==(const RetryOn&, const RetryOn&) = default;
};

struct Retry {
  int limit = 0;     // attempts after the first: 1..10
  int attempts = 0;  // attempts made so far (runtime state)
  // Backoff (beyond Tork): attempt n waits min(initial_delay * scaling_factor^(n-1),
  // max_delay); no wait without initial_delay.
  std::optional<Duration> initial_delay;
  std::optional<double> scaling_factor;
  std::optional<Duration> max_delay;
  std::optional<RetryOn> on;  // beyond Tork (see RetryOn)
  // Beyond Tork: up to this much more wait before each retry, a share of it fixed by the
  // row's id (the same after a crash), so that tasks failing together do not retry at once.
  std::optional<Duration> jitter;
  friend bool operator==(const Retry&, const Retry&) = default;
};

struct Limits {
  std::optional<double> cpus;          // e.g. 0.5
  std::optional<std::int64_t> memory;  // bytes
  friend bool operator==(const Limits&, const Limits&) = default;
};

enum class MountType { kVolume, kBind, kTmpfs };

struct Mount {
  MountType type = MountType::kVolume;
  std::string source;  // bind only
  std::string target;
  StringMap opts;
  friend bool operator==(const Mount&, const Mount&) = default;
};

struct Registry {
  std::string username;
  std::string password;
  friend bool operator==(const Registry&, const Registry&) = default;
};

struct Probe {
  std::string path;
  int port = 0;
  std::optional<Duration> timeout;
  friend bool operator==(const Probe&, const Probe&) = default;
};

// A `pre`/`post` step or a sidecar: runs beside the main task, sharing its mounts.
struct AuxTask {
  std::string name;
  std::string description;
  std::string run;
  std::string image;
  std::vector<std::string> cmd;
  std::vector<std::string> entrypoint;
  StringMap env;
  StringMap files;
  std::optional<Duration> timeout;
  std::optional<Registry> registry;
  std::optional<Probe> probe;  // sidecars only
  friend bool operator==(const AuxTask&, const AuxTask&) = default;
};

struct Webhook {
  std::string url;
  StringMap headers;
  std::string event;    // one of WebhookEvents(); empty = job.StateChange (Tork's default)
  std::string if_expr;  // `if`: templated condition over `job` (and `task`) summaries
  // (beyond Tork) the HMAC-SHA256 key of the body's signature, templated (e.g.
  // "{{ secrets.hook }}"); empty: the configured webhooks.secret, if any.
  std::string secret;
  friend bool operator==(const Webhook&, const Webhook&) = default;
};

// Who may see and manage a job (Tork's `permissions`): a role or a user, not both.
struct Permission {
  std::string role;
  std::string user;
  friend bool operator==(const Permission&, const Permission&) = default;
};

struct AutoDelete {
  Duration after{};
  friend bool operator==(const AutoDelete&, const AutoDelete&) = default;
};

// The schedule a job was fired by (Tork's `schedule: {id, cron}`): set by the engine on
// the jobs a scheduled job creates, never accepted in a submission.
struct JobSchedule {
  std::string id;    // the scheduled job's
  std::string cron;  // its expression when it fired
  friend bool operator==(const JobSchedule&, const JobSchedule&) = default;
};

struct Task;

// How a list of tasks (a job's, a sub-job's) is ordered, as its `mode` says:
// kSequence (Tork's meaning, the default): a task without `needs` starts after the one
// before it; kDag: a task without `needs` is a root, started with the job.
enum class TaskOrder { kSequence, kDag };

// When a task of a graph starts, judged over the tasks it needs (Airflow's names and
// meanings; core/graph.h). kAllSuccess is the default.
enum class TriggerRule {
  kAllSuccess,
  kAllDone,
  kAllFailed,
  kOneSuccess,
  kOneFailed,
  kNoneFailed,
  kNoneFailedMinOneSuccess,
};

// A task of the same list that a task waits for (`needs`): a name, or (beyond Airflow's
// rules) `{task, when}`, an edge taken only when the template `when` holds once that
// task succeeded (else it counts as skipped for this task).
struct Need {
  std::string task;
  std::string when;
  friend bool operator==(const Need&, const Need&) = default;
};

struct Parallel {
  std::vector<Task> tasks;
  friend bool operator==(const Parallel&, const Parallel&);
};

struct Each {
  std::string var;   // loop variable name; empty means "item"
  std::string list;  // template evaluating to a list
  Box<Task> task;
  int concurrency = 0;  // 0 = no cap
  friend bool operator==(const Each&, const Each&);
};

struct SubJob {
  std::string name;
  std::string description;
  std::vector<Task> tasks;
  StringMap inputs;
  StringMap secrets;
  std::string output;
  std::optional<AutoDelete> auto_delete;
  std::vector<Webhook> webhooks;
  bool detached = false;
  TaskOrder mode = TaskOrder::kSequence;  // `mode: dag` (beyond Tork)
  std::vector<Task> on_failure;           // as a job's (see Job)
  std::vector<Task> finally;
  friend bool operator==(const SubJob&, const SubJob&);
};

// Beyond Tork, Conductor's SWITCH: `value` (a template) is evaluated when the task
// starts; the tasks of the case whose key equals it run one after another, else those of
// `default` (none: the switch completes at once). Its result is the value.
struct SwitchCase {
  std::string key;
  std::vector<Task> tasks;
  friend bool operator==(const SwitchCase&, const SwitchCase&);
};
struct Switch {
  std::string value;
  std::vector<SwitchCase> cases;  // sorted by key (unique), as JSON keeps them
  std::vector<Task> default_tasks;
  friend bool operator==(const Switch&, const Switch&);
};

// Beyond Tork, Conductor's DO_WHILE: the tasks run one after another, again and again.
// After each iteration, `until` (stop once true) or `while` (stop once false) is
// evaluated, and the loop ends after `max` iterations in any case. Each iteration sees
// `loop.iteration` (0-based) and `loop.iterations` (per iteration, its tasks' results
// by var).
struct Loop {
  std::vector<Task> tasks;
  std::string while_expr;
  std::string until_expr;
  int max = 0;
  friend bool operator==(const Loop&, const Loop&);
};

// Beyond Tork: a task that holds no worker and runs nothing: it waits, then completes.
// Exactly one of: `for` (a duration from when it starts), `until` (a template giving an
// RFC 3339 time; one past completes at once), `signal` (a name: it completes when POST
// /jobs/{id}/signals/{name} gives it a payload, its result; one sent before it waits is
// kept for it). `timeout` (a signal's only) fails it when no signal came in time. Its due
// time is kept with its row (started_at + for, until, started_at + timeout): a restart
// of the engine neither loses nor repeats it.
struct Wait {
  std::optional<Duration> for_;  // `for` (a keyword in C++)
  std::string until;
  std::string signal;
  std::optional<Duration> timeout;
  friend bool operator==(const Wait&, const Wait&) = default;
};

// Beyond Tork: what runs when a task finally fails (after its retries), in place of the
// failure going up: its tasks one after another, seeing `failure` ({task, error}); then
// `then` says how the task's place ends: kFail (the default) fails it with its error, as
// without onFailure; kContinue completes it, the last of these tasks' result standing in
// for its own (its var). One of these tasks failing fails the task's place with that error.
enum class Then { kFail, kContinue };
struct OnFailure {
  std::vector<Task> tasks;
  Then then = Then::kFail;
  friend bool operator==(const OnFailure&, const OnFailure&);
};

// Set by the engine on a row it makes to run cleanup tasks, never by a job file (only a
// stored definition carries it): kTaskFailure, a task's onFailure (the row takes the
// failed task's place: its definition is the task's name, var, optional and onFailure);
// kJobFailure and kJobFinally, a job's `onFailure` and `finally` (the tasks are the job's).
// Its tasks see the scope the engine gave the row: `failure` ({task, error}) for a task's;
// `job` with the outcome's `state` and `error` beside its id and name for a job's.
enum class Handles { kNone, kTaskFailure, kJobFailure, kJobFinally };

// A task as the job file describes it: runnable (run/cmd/image), a wait, or composite
// (exactly one of parallel, each, subjob, switch, loop).
struct Task {
  std::string name;
  std::string description;
  std::string var;
  std::string if_expr;  // `if`
  std::string run;
  std::string image;
  std::vector<std::string> cmd;
  std::vector<std::string> entrypoint;
  StringMap env;
  StringMap files;
  std::string workdir;
  std::string queue;
  std::optional<int> priority;
  std::vector<AuxTask> pre;
  std::vector<AuxTask> post;
  std::vector<AuxTask> sidecars;
  std::vector<Mount> mounts;
  std::vector<std::string> networks;
  std::optional<Limits> limits;
  std::string gpus;
  std::optional<Registry> registry;
  std::vector<std::string> tags;
  std::optional<Duration> timeout;
  std::optional<Retry> retry;
  std::optional<Parallel> parallel;
  std::optional<Each> each;
  std::optional<SubJob> subjob;
  std::optional<Switch> switch_;  // `switch` (a keyword in C++)
  std::optional<Loop> loop;
  std::optional<Wait> wait;  // beyond Tork: see Wait
  // Beyond Tork, on a job's (or a sub-job's) tasks: the names of the tasks of the same
  // list this one waits for, and the rule over their ends that starts or skips it.
  std::vector<Need> needs;
  std::optional<TriggerRule> trigger_rule;
  // Beyond Tork: a failure of this task (after its retries) does not fail what it is in:
  // the row stays FAILED, shown as a warning of its job, and its job, parallel or each
  // goes on as if it had completed (without a result).
  bool optional = false;
  // Beyond Tork: a pause point. Each time the task is reached (its `if` true, its
  // templates evaluated), its job (its top-level job, from a sub-job) is PAUSED before any
  // of it starts; a resume starts it. Its retries and redeliveries do not pause again.
  bool pause_before = false;
  std::optional<OnFailure> on_failure;  // `onFailure` (beyond Tork; see OnFailure)
  Handles handles = Handles::kNone;     // set by the engine only (see Handles)

  bool IsComposite() const {
    return parallel || each || subjob || switch_ || loop || handles != Handles::kNone;
  }
  friend bool operator==(const Task&, const Task&) = default;
};

struct Defaults {
  std::optional<Retry> retry;
  std::optional<Limits> limits;
  std::optional<Duration> timeout;
  std::string queue;
  std::optional<int> priority;
  friend bool operator==(const Defaults&, const Defaults&) = default;
};

struct Job {
  std::string name;
  std::string description;
  std::vector<std::string> tags;
  StringMap inputs;
  StringMap secrets;
  std::optional<Defaults> defaults;
  std::string output;
  std::vector<Webhook> webhooks;
  std::optional<AutoDelete> auto_delete;
  std::optional<Duration> wait_timeout;  // `wait: {timeout}`
  std::optional<Duration> timeout;       // beyond Tork: deadline for the whole job
  std::vector<Permission> permissions;
  // The user who submitted it (Tork's `createdBy`), set by the API from the credentials,
  // never by the job file; a sub-job keeps its parent's, and its permissions. Empty when
  // authentication is off.
  std::string created_by;
  std::vector<Task> tasks;
  std::optional<JobSchedule> schedule;    // set by the engine only (see JobSchedule)
  TaskOrder mode = TaskOrder::kSequence;  // `mode: dag` (beyond Tork)
  // Beyond Tork, a job's cleanup: once its outcome is known, `on_failure` runs if it
  // failed (timed out included), then `finally` whatever the outcome (cancelled
  // included), each one task after another (see Handles); the job stays active meanwhile
  // and then ends as its outcome says (JobRecord::ending), FAILED if its cleanup failed
  // where it would have completed.
  std::vector<Task> on_failure;
  std::vector<Task> finally;
  friend bool operator==(const Job&, const Job&) = default;
};

std::string_view ToString(MountType type);
std::optional<MountType> ParseMountType(std::string_view text);

// Mount targets a task may not use: where the runtime puts its own files.
bool IsReservedMountTarget(std::string_view target);

}  // namespace baton

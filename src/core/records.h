// What the engine stores: a job and its task rows with their runtime state. The
// definitions (Job, Task) come from job.h; these records add identity, state, times and
// results. Plain values, no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "core/job.h"
#include "core/names.h"

namespace baton {

// One row per task attempt: a retry is a new row (new id, retry.attempts + 1) and the
// failed row stays. Children of parallel/each tasks and the rows of sub-jobs are rows
// too, linked by parent_id.
struct TaskRecord {
  std::string id;  // 32 lowercase hex characters
  std::string job_id;
  std::string parent_id;  // the composite task this is a child of; empty at top level
  int position = 0;       // 1-based index of the top-level task this row belongs to
  TaskState state = TaskState::kPending;
  TimePoint created_at{};
  std::optional<TimePoint> scheduled_at;
  std::optional<TimePoint> started_at;
  std::optional<TimePoint> completed_at;
  std::optional<TimePoint> failed_at;
  Task task;  // the definition; templates evaluated once the row is scheduled
  std::string error;
  std::string result;
  // Beyond Tork: why a FAILED runnable row failed, and its command's exit code for kExit
  // (what `retry.on` matches; shown with the attempt).
  FailReason reason = FailReason::kNone;
  std::optional<int> exit_code;
  std::string node_id;  // the worker running it
  double progress = 0;  // 0..100
  int redelivered = 0;  // times re-queued after its worker died
  // Composite bookkeeping.
  int each_size = 0;  // each: elements of the evaluated list
  // On an each: children started so far. On a child of a parallel or each: its index
  // there (kept by its retries).
  int each_index = 0;
  int completions = 0;    // parallel and each: children finished
  std::string subjob_id;  // the child job of a subjob task
  // A parallel whose tasks form a graph (core/graph.h): its children's states, one
  // character each (step::), in their order; empty otherwise.
  std::string steps;
  // The loop variables in scope for this row's templates and for its children's: what
  // the `each` loops around it bound ({"item": {"index": 0, "value": ...}}). A composite
  // child of an each is dispatched later than it is created, and its children are
  // evaluated against this.
  nlohmann::json scope = nlohmann::json::object();
  friend bool operator==(const TaskRecord&, const TaskRecord&) = default;
};

struct JobRecord {
  std::string id;
  std::string parent_id;  // for a sub-job: the id of the subjob task that started it
  JobState state = JobState::kPending;
  TimePoint created_at{};
  std::optional<TimePoint> started_at;
  std::optional<TimePoint> completed_at;
  std::optional<TimePoint> failed_at;
  std::optional<TimePoint> delete_at;
  Job job;             // the definition as submitted
  int position = 1;    // 1-based index of the current top-level task
  int task_count = 0;  // top-level tasks
  // A graph's (core/graph.h) top-level tasks' states, one character each (step::), in
  // their order; empty for a sequence, whose progress is `position`.
  std::string steps;
  // Beyond Tork: while its cleanup (its definition's onFailure, finally) runs, the state
  // the job ends in once it is done (its error and result are that outcome's already);
  // unset otherwise. The job stays active meanwhile.
  std::optional<JobState> ending;
  double progress = 0;  // completed share of its tasks, 0..100
  std::string result;   // the evaluated `output`
  std::string error;
  // What expressions see: {"inputs": {...}, "secrets": {...}, "tasks": {var: result},
  // "job": {"id", "name"}}.
  nlohmann::json context = nlohmann::json::object();
  friend bool operator==(const JobRecord&, const JobRecord&) = default;
};

// A chunk of a task's output.
struct LogPart {
  std::string id;
  std::string task_id;
  std::string job_id;
  int number = 0;  // 1-based, in order within the task
  std::string contents;
  TimePoint created_at{};
  friend bool operator==(const LogPart&, const LogPart&) = default;
};

// A worker (or standalone process) as it last reported itself.
struct NodeRecord {
  std::string id;
  std::string name;
  std::string hostname;
  std::string version;
  std::string queue;  // queues it consumes, "name:concurrency,..."
  TimePoint started_at{};
  TimePoint last_heartbeat_at{};
  double cpu_percent = 0;
  int task_count = 0;
  NodeStatus status = NodeStatus::kUp;
  // Resident memory of the node's baton process (0: not reported).
  std::int64_t memory_bytes = 0;
  friend bool operator==(const NodeRecord&, const NodeRecord&) = default;
};

// One call of a webhook: when, the HTTP status it got (0 when none: the connection
// failed or timed out) and what went wrong, if anything.
struct WebhookAttempt {
  TimePoint at{};
  int status_code = 0;
  std::string error;
  int duration_ms = 0;
  friend bool operator==(const WebhookAttempt&, const WebhookAttempt&) = default;
};

// A webhook to call, written in the transaction of the state change it reports (the
// outbox): delivered at least once, retried with backoff, and kept with its attempts
// until its job is deleted. `id` is sent as the idempotency id of every attempt.
struct WebhookDelivery {
  std::string id;
  std::string job_id;
  std::string task_id;  // for task.* events
  std::string event;    // kEventJobStateChange, ...
  std::string url;      // evaluated
  StringMap headers;    // evaluated against the job's context at the event
  std::string secret;   // the HMAC key (evaluated), empty for none: not signed
  std::string body;     // the job or task summary at the event, as JSON
  DeliveryState state = DeliveryState::kPending;
  int attempts = 0;
  TimePoint created_at{};
  // When the next attempt is due; while an attempt runs, until when the coordinator that
  // claimed it holds it (past that, another takes it over).
  TimePoint next_attempt_at{};
  std::optional<TimePoint> completed_at;  // delivered or given up
  std::string error;                      // why it failed for good
  std::vector<WebhookAttempt> history;    // oldest first
  friend bool operator==(const WebhookDelivery&, const WebhookDelivery&) = default;
};

// A page of results, as the API returns it.
template <typename T>
struct Page {
  std::vector<T> items;
  int number = 1;  // 1-based
  int size = 10;
  int total_pages = 0;
  std::int64_t total_items = 0;
};

// Whether the row's failure is one its `retry` is for (Retry::on; without it, every
// failure but a lost one, which is re-queued instead).
bool RetryIsFor(const TaskRecord& failed);

// Whether `row` is an optional task's final failure, which its job went on after
// (Task::optional): FAILED with no attempt left or a failure its retry is not for, or
// FAILED before it ran (its `if` or templates could not be evaluated: not retried).
bool IsOptionalFailureLetGo(const TaskRecord& row);

// Of two rows of one slot (a task's place: its parent, its position, its index there;
// its retries, its re-runs after a lost worker or engine, its restarts and the fallback
// that runs its onFailure share it), the one that counts: the later created; created at
// the same time (in one decision), a fallback over the task it stands in for, then the
// unfinished one, then the greater id (a decision's ids sort in the order it made them).
// `latest` may be null (then `row`).
const TaskRecord* LatestAttempt(const TaskRecord* latest, const TaskRecord& row);

// How many bytes `job` takes as stored: its definition, tags and context as JSON (what a
// datastore's max_job_bytes bounds). InvalidArgument when a part cannot be stored (a
// string that is not UTF-8).
Result<std::size_t> StoredJobBytes(const JobRecord& job);
// kInvalidArgument, naming both figures, for a job of `bytes` (StoredJobBytes) over
// `limit`.
Status CheckStoredJobSize(std::size_t bytes, std::size_t limit);

// Millisecond UTC wall-clock time, as stored and returned ("2026-11-29T20:50:31.123Z").
TimePoint Now();
std::string FormatTime(TimePoint t);
std::optional<TimePoint> ParseTime(std::string_view text);

// A new id: 32 lowercase hex characters, the first 12 the current time in milliseconds
// and the rest random (80 bits), so ids made later sort after earlier ones (a clock that
// steps back aside).
std::string NewId();

}  // namespace baton

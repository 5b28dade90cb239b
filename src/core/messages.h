// The bodies of engine messages on the broker: JSON, defined once here so the
// coordinator and the worker agree. Task messages themselves are ToJson(TaskRecord).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/records.h"

namespace baton {

// The per-node queue a coordinator sends cancellations to.
std::string CancelQueueFor(std::string_view node_id);

// job_id (of the task) lets a coordinator take the job's lock before reading anything;
// it may be empty in messages of older workers.
struct TaskStarted {
  std::string task_id;
  std::string job_id;
  std::string node_id;
  TimePoint at{};
};

struct TaskFinished {
  // kHandedBack: the worker stopped before the task finished; it should run again
  // elsewhere, as a new attempt.
  enum class Outcome { kCompleted, kFailed, kCancelled, kHandedBack };
  std::string task_id;
  std::string job_id;
  // The node that ran this attempt: an outcome from another node than the one the task
  // row names (a duplicate delivery) is ignored. Empty: not checked.
  std::string node_id;
  Outcome outcome = Outcome::kCompleted;
  std::string result;
  std::string error;
  // A failure's reason and exit code, as the runtime saw them (kFailed only).
  FailReason reason = FailReason::kNone;
  std::optional<int> exit_code;
  TimePoint at{};
  // When the attempt started, for an outcome whose start was never reported (a task
  // shorter than the worker's `report_start_after`); unset otherwise.
  std::optional<TimePoint> started_at;
};

struct TaskProgress {
  std::string task_id;
  std::string job_id;
  double progress = 0;
};

// To a worker's cancel queue: stop these tasks where they run there, and never start
// them there (a cancelled task still waiting in a queue is dropped when it is taken).
struct CancelTask {
  std::vector<std::string> task_ids;
  // The last message of a coordinator's answer to a worker it heard from for the first
  // time: every stored drop has been told (WorkerSignals::WorkerHeard). A starting worker
  // that awaits drops takes tasks only after one such message.
  bool complete = false;
  // Beyond stopping: the tasks of a job that paused, withdrawn from the queues. A worker
  // never starts them, and lets one it runs already run on.
  bool withdraw = false;
};

std::string Encode(const TaskStarted& m);
std::string Encode(const TaskFinished& m);
std::string Encode(const TaskProgress& m);
std::string Encode(const CancelTask& m);
std::string Encode(const LogPart& m);
std::string Encode(const NodeRecord& m);

Result<TaskStarted> DecodeTaskStarted(std::string_view body);
Result<TaskFinished> DecodeTaskFinished(std::string_view body);
Result<TaskProgress> DecodeTaskProgress(std::string_view body);
Result<CancelTask> DecodeCancelTask(std::string_view body);
Result<LogPart> DecodeLogPart(std::string_view body);
Result<NodeRecord> DecodeNodeRecord(std::string_view body);

// Replaces bytes that are not valid UTF-8 with U+FFFD, so any task output can go into
// JSON.
std::string SanitizeUtf8(std::string_view text);

}  // namespace baton

// Runtime: runs one task (its pre steps, main step and post steps) to completion.
//
// Contract (every implementation passes tests/conformance/runtime_conformance.h):
// - Run blocks until the task has finished, failed, timed out or been cancelled, and
//   leaves nothing behind: no process, container or working directory.
// - A failed task is data, not an error: Run returns a RunOutcome with state kFailed and
//   an error text (`exit code N` and the last lines of output; `timed out after 1s`;
//   `out of memory: exceeded the memory limit of 64m`). Status errors are for the runtime itself
//   failing.
// - `timeout` covers pre + main + post; on expiry, or when `cancel` is requested, the
//   whole process tree (or container) is killed.
// - Output lines go to the observer as they are produced; progress likewise.
//
// Thread-safety: Run may be called concurrently from several threads.
#pragma once

#include <cstddef>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "base/status.h"
#include "core/job.h"

namespace baton {

// What to run: a task whose templates have already been evaluated.
struct RunRequest {
  std::string task_id;
  std::string job_id;
  Task task;
  // Results larger than this fail the task.
  std::size_t max_result_bytes = 64 * 1024;
};

struct RunOutcome {
  enum class State { kCompleted, kFailed, kCancelled };
  State state = State::kCompleted;
  std::string result;  // contents of $BATON_OUTPUT, when completed
  std::string error;   // why it failed, when it did
  std::optional<int> exit_code;
  // Why it failed (retry.on): kExit (with exit_code), kTimeout, kOutOfMemory, kError.
  FailReason reason = FailReason::kNone;
};

// Receives what a running task produces. Called from the thread that calls Run, or from
// threads the runtime owns; never concurrently for one task.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // A chunk of stdout/stderr, in order.
  virtual void OnLog(std::string_view chunk) = 0;
  // A value written to $BATON_PROGRESS, clamped to 0..100.
  virtual void OnProgress(double percent) = 0;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual Result<RunOutcome> Run(const RunRequest& request, RunObserver& observer,
                                 std::stop_token cancel) = 0;
  virtual Status Health() = 0;
  // Kills what an earlier instance of this runtime left running when its process died
  // (`kill -9`, a crash, a power cut of the process tree): its tasks' processes or
  // containers, found through what that instance recorded on the same host (for the
  // shell and Docker runtimes, under the same base_dir). Returns once they are gone, or an
  // error naming what survived. Instances that are still alive keep theirs. The worker
  // calls it once, before it takes any task, so that a redelivered task never runs beside
  // its earlier attempt.
  virtual Status KillLeftovers() { return Status::Ok(); }
};

}  // namespace baton

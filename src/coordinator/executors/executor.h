// Executor: what runs a leaf task row once the decision that made it queued has been
// committed. One executor per leaf kind (core/task_kind.h): today every leaf kind is
// runnable and the broker executor hands it to the workers; later kinds (an HTTP call, an
// approval) run in the coordinator and report their outcomes as the events a worker sends.
// The scheduler is given its executors (Executors) by whoever builds it: the engine, or a
// test with a fake.
//
// Contract: Start is called after the commit, with rows stored queued (PENDING, or
// SCHEDULED when the broker keeps nothing). It never blocks on another job's lock and
// writes no rows: it reports which rows are now held somewhere durable (`published`,
// decided by the scheduler as flow::Published) and which it could not hand on
// (`refused`, decided as flow::PublishRefused: tried again later). A row started twice
// runs once: workers and the Started decision see to it.
//
// Thread-safety: implementations are thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/records.h"
#include "core/task_kind.h"

namespace baton {

// What became of the rows handed to Start.
struct StartReport {
  // Confirmed by a broker that keeps messages across restarts (none when it does not).
  struct Publication {
    std::string task_id;
    std::string job_id;
  };
  std::vector<Publication> published;
  struct Refusal {
    std::string task_id;
    std::string job_id;
    std::string error;
  };
  std::vector<Refusal> refused;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Starts `rows` (all of this executor's kind).
  virtual StartReport Start(std::vector<TaskRecord> rows) = 0;
};

// The executor of each leaf kind; none for a composite (which flow never starts).
struct Executors {
  Executor* runnable = nullptr;

  Executor* For(TaskKind kind) const {
    switch (kind) {
      case TaskKind::kRunnable:
        return runnable;
      case TaskKind::kParallel:
      case TaskKind::kEach:
      case TaskKind::kSubJob:
      case TaskKind::kSwitch:
      case TaskKind::kLoop:
      case TaskKind::kHandler:
      case TaskKind::kWait:  // decided by flow and the scheduler's timers
        return nullptr;
    }
    return nullptr;
  }
};

}  // namespace baton

// DecisionTx: the reads and writes of one decision of the shell (FlowScheduler), as one
// transaction scope: Datastore::Transact's Transaction, under the names the shell uses
// (CancelActive is Transaction::CancelTasks). So a decision is one database transaction
// — SQLite: one write of a group-commit batch; PostgreSQL: BEGIN .. COMMIT — stored
// whole or not at all, and a one-task job costs two of them (its submission with its
// task; the completion with the job's end).
//
// Thread-safety: a DecisionTx is used by the thread running the body only, while it runs.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/records.h"
#include "datastore/datastore.h"

namespace baton {

class DecisionTx {
 public:
  virtual ~DecisionTx() = default;

  virtual Result<JobRecord> GetJob(std::string_view id) = 0;
  virtual Result<TaskRecord> GetTask(std::string_view id) = 0;
  virtual Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) = 0;
  virtual Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) = 0;

  virtual Status CreateJob(const JobRecord& job) = 0;
  // The whole row (definition and context included).
  virtual Status UpdateJob(const JobRecord& job) = 0;
  // The state fields only (state, started_at, completed_at, failed_at, delete_at,
  // position, progress, result, error).
  virtual Status UpdateJobState(const JobRecord& job) = 0;
  virtual Status CreateTasks(const std::vector<TaskRecord>& tasks) = 0;
  virtual Status UpdateTask(const TaskRecord& task) = 0;
  // Every active row of `job_id` (below `under`, when not empty) → CANCELLED at `at`;
  // returns the rows it changed with the state each was in.
  virtual Result<std::vector<CancelledTask>> CancelActive(std::string_view job_id,
                                                          std::string_view under, TimePoint at) = 0;
};

// Runs `body` as one decision over `datastore` (Datastore::Transact): its writes are
// stored when it returns Ok, none of them otherwise. Returns the body's error, the first
// failed write's, or the commit's (kUnavailable: nothing was stored, the event may be
// decided again). The body may run only once; it must not wait on anything but the scope.
Status RunDecision(Datastore& datastore, const std::function<Status(DecisionTx&)>& body);

}  // namespace baton

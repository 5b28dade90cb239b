// DecisionTx: the reads and writes of one decision of the shell (FlowScheduler), as one
// transaction scope. Its methods are those of the datastore's coming transaction scope
// (Datastore::Transact, issue 15 item 4) plus CancelActive, so that moving the shell onto
// it changes this file and decision_tx.cc only.
//
// Until then, RunDecision implements the scope over today's Datastore methods: writes are
// buffered (reads see them) and stored when the body returns, in as few calls as those
// methods allow — a job created with its tasks in one CreateJobWithTasks, a task's update
// with its job's in one UpdateTaskAndJob — so a one-task job still costs two writes. It
// is not atomic across calls: a crash between two of them leaves part of a decision
// stored, which reconciling (flow::Frontier) completes, as it did for the scheduler.
// CancelActive stores what is buffered first, then cancels in one write.
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

// Runs `body` as one decision over `datastore`: its writes are stored once it returns Ok
// (none when it returns an error, except what a CancelActive stored already). Returns the
// body's error, or the first failed write's.
Status RunDecision(Datastore& datastore, const std::function<Status(DecisionTx&)>& body);

}  // namespace baton

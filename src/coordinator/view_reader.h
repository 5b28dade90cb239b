// ViewReader: reads, in a decision's scope, the flow::View an event names (flow.h says
// which rows). Job rows are read without their definition and context, which come from the
// JobCache: what a step reads of its job does not grow with the job's length. An each's
// running children are counted and its next CREATED ones read through an index, so a
// decision below an each of 2,000 children reads what one below an each of 20 does.
//
// Thread-safety: thread-safe (it keeps no state; the JobCache is thread-safe).
#pragma once

#include <string>

#include "base/status.h"
#include "coordinator/job_cache.h"
#include "datastore/datastore.h"
#include "flow/flow.h"

namespace baton {

class ViewReader {
 public:
  explicit ViewReader(JobCache& cache) : cache_(cache) {}

  // `view` comes with its policy and id seed; the rows are added to it.
  Status Read(Transaction& tx, const flow::Event& event, JobCache::Scope& scope, flow::View& view);

 private:
  // A start's task row, and the state rows of its job and of the jobs above it through
  // sub-jobs, as far up as they are SCHEDULED.
  Status ReadStarted(Transaction& tx, std::string job_id, flow::View& view);
  // The task and its ancestors, through sub-jobs up to the top-level job (`nearest`: the
  // task and its job only).
  Status ReadChain(Transaction& tx, std::string task_id, std::string job_id, bool nearest,
                   JobCache::Scope& scope, flow::View& view);
  // A job's state row, definition and context; false when the job is gone.
  Result<bool> ReadJob(Transaction& tx, const std::string& job_id, JobCache::Scope& scope,
                       flow::View& view);
  Status AddEach(Transaction& tx, const TaskRecord& each, flow::View& view);

  JobCache& cache_;
};

}  // namespace baton

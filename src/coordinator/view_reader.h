// ViewReader: reads, in a decision's scope, the flow::View an event names: exactly
// flow::ReadsOf(event), nothing else. Job rows are read without their definition and context, which
// come from the JobCache: what a step reads of its job does not grow with the job's length. An
// each's running children are counted and its next CREATED ones read through an index, so a
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
  // The task rows from `task_id` (its ancestors too, when read); returns its job's id, ""
  // when the task is gone.
  Result<std::string> ReadTasks(Transaction& tx, const flow::Reads& reads, std::string task_id,
                                flow::View& view);
  // The job's row (whole, when read); returns the task to read next up the tree, if any.
  Result<std::string> ReadJob(Transaction& tx, const flow::Reads& reads, const std::string& job_id,
                              JobCache::Scope& scope, flow::View& view);
  // Reads::more_tasks, each alone.
  Status ReadMoreTasks(Transaction& tx, const flow::Reads& reads, flow::View& view);
  // Reads::hooks without Reads::job: the job's definition and, when it has webhooks, its
  // state row and context.
  Status ReadHookJob(Transaction& tx, const std::string& job_id, JobCache::Scope& scope,
                     flow::View& view);
  Status AddEach(Transaction& tx, const TaskRecord& each, flow::View& view);

  JobCache& cache_;
};

}  // namespace baton

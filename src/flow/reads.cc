// ReadsOf: what each event reads, in one place. The shell's ReadView and the simulator's
// view builder read exactly this; a rule that needs a row not named here finds it absent.
#include "flow/flow.h"

namespace baton::flow {
namespace {

// The task (or the job) and everything up to the top-level job: its ancestors with
// their eaches' children, and every job on the way whole (a step's end may complete its
// parent, which may complete its job, which may end the task of a sub-job, and so on).
Reads Tree(const std::string& task_id, const std::string& job_id) {
  return {.task_id = task_id,
          .job_id = job_id,
          .task = !task_id.empty(),
          .job = true,
          .job_whole = true,
          .ancestors = true,
          .each_children = true};
}
Reads TaskTree(const std::string& task_id) { return Tree(task_id, ""); }
// The task row alone, and what its changes' webhooks need.
Reads TaskRow(const std::string& task_id) {
  return {.task_id = task_id, .task = true, .hooks = true};
}
Reads JobTree(const std::string& job_id) { return Tree("", job_id); }
// The job's tree as JobTree, and every task row of the job.
Reads AllOf(const std::string& job_id) {
  Reads reads = JobTree(job_id);
  reads.all_tasks = true;
  return reads;
}

// One overload per event: a new event does not compile until it says what it reads.
struct ReadsVisitor {
  // The job's row is in the event.
  Reads operator()(const Submit& e) const { return {.job_id = e.job.id}; }
  Reads operator()(const StartJob& e) const { return JobTree(e.job_id); }
  // A start moves the task, and its job and the SCHEDULED jobs above it to RUNNING:
  // their state rows only.
  Reads operator()(const Started& e) const {
    return {
        .task_id = e.task_id, .task = true, .job = true, .scheduled_parents = true, .hooks = true};
  }
  Reads operator()(const Completed& e) const { return TaskTree(e.task_id); }
  Reads operator()(const Failed& e) const { return TaskTree(e.task_id); }
  // A cancelled row's end: nothing above it decides anything more.
  Reads operator()(const WorkerCancelled& e) const { return TaskRow(e.task_id); }
  Reads operator()(const TaskTimedOut& e) const { return TaskTree(e.task_id); }
  Reads operator()(const Redelivery& e) const { return TaskTree(e.task_id); }
  Reads operator()(const LeaseExpired& e) const { return TaskTree(e.task_id); }
  Reads operator()(const TaskOverdue& e) const { return TaskTree(e.task_id); }
  // The task's progress, and its job's for a top-level step (state columns).
  Reads operator()(const Progress& e) const {
    return {.task_id = e.task_id, .task = true, .job = true, .hooks = true};
  }
  Reads operator()(const Cancel& e) const { return JobTree(e.job_id); }
  Reads operator()(const Restart& e) const { return JobTree(e.job_id); }
  Reads operator()(const JobTimedOut& e) const { return JobTree(e.job_id); }
  // A retry's row is queued again (unless its job is PAUSED); a wait's ends, which may
  // end what it is in, up to the top-level job (found by the simulator: a wait ending a
  // sub-job failed it, its output unread, and left its task running).
  Reads operator()(const RetryDue& e) const { return TaskTree(e.task_id); }
  Reads operator()(const FillEach& e) const { return TaskTree(e.task_id); }
  Reads operator()(const StepFailed& e) const { return JobTree(e.job_id); }
  // The row moves between queued states: nothing else changes.
  Reads operator()(const Published& e) const {
    if (e.task_ids.empty()) return {};
    Reads reads = TaskRow(e.task_ids[0]);
    reads.more_tasks.assign(e.task_ids.begin() + 1, e.task_ids.end());
    return reads;
  }
  Reads operator()(const PublishRefused& e) const {
    Reads reads = TaskRow(e.task_id);
    reads.job = true;  // queued again later, unless its job is PAUSED
    return reads;
  }
  Reads operator()(const Pause& e) const { return AllOf(e.job_id); }
  Reads operator()(const Resume& e) const { return AllOf(e.job_id); }
  Reads operator()(const Rerun& e) const { return JobTree(e.job_id); }
  Reads operator()(const Skip& e) const { return TaskTree(e.task_id); }
  // Its waiting tasks are among the job's rows (a signal is rare: a person, a hook).
  Reads operator()(const Signal& e) const { return AllOf(e.job_id); }
};

}  // namespace

Reads ReadsOf(const Event& event) { return std::visit(ReadsVisitor{}, event); }

}  // namespace baton::flow

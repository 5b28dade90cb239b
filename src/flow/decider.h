// The Decider: one per decision. It owns the view and changes its rows in place; the
// first time a rule touches a stored row, the row's state columns are noted, and the
// effects are the touched rows whose state differs at the end (one write per changed
// row, the row moved into its effect), then what the commit must be followed by. Nothing
// here copies a job's definition or a composite's subtree: a decision costs what the rows
// it touches cost, bounded by the depth of nesting, never by the size of the job.
//
// Where each rule is defined: the events, the job's steps, the common task rules and the
// effects in decider.cc; a kind's own rules in kinds/<kind>.cc (runnable: the worker's
// events, queueing, retries' redelivery; parallel; each: its slots; subjob); reconciling
// from stored rows in frontier.cc. Internal to flow: callers use flow/flow.h.
//
// Thread-safety: a Decider is used by one thread, for one decision.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/graph.h"
#include "core/states.h"
#include "expr/expr.h"
#include "flow/flow.h"

namespace baton::flow {

using nlohmann::json;

// The retry rule: a FAILED row is tried again (a new row, its attempt + 1) while its
// `retry` has attempts left (and its job is active: Decider::RetryOrFail).
bool HasAttemptsLeft(const TaskRecord& failed);
// When a row may be queued: a retry after its backoff (RetryDelay, and its jitter) from
// its creation; any other row at once (its creation).
TimePoint RetryDueAt(const TaskRecord& row);
// Whether LeaseExpired `e` ends `row` (see LeaseExpired).
bool LeaseLost(const TaskRecord& row, const LeaseExpired& e, TimePoint now);

// Children a composite must see finish before it completes.
int Expected(const TaskRecord& row);

// The columns a rule may change on a stored row (a stored row's definition, scope, id,
// parents and position never change): what Effects compares to tell a write.
struct TaskColumns {
  TaskState state;
  std::optional<TimePoint> scheduled_at, started_at, completed_at, failed_at;
  std::string error, result, node_id, subjob_id, steps;
  double progress;
  int redelivered, each_size, each_index, completions;
  FailReason reason;
  std::optional<int> exit_code;
  friend bool operator==(const TaskColumns&, const TaskColumns&) = default;
};
// The same for a job; its context is tracked apart (Decider::context_changed_).
struct JobColumns {
  JobState state;
  std::optional<TimePoint> started_at, completed_at, failed_at, delete_at;
  int position, task_count;
  double progress;
  std::string result, error, steps;
  std::optional<JobState> ending;
  friend bool operator==(const JobColumns&, const JobColumns&) = default;
};

class Decider {
 public:
  Decider(View view, TimePoint now);
  // Its templates' random source refers to it.
  Decider(const Decider&) = delete;
  Decider& operator=(const Decider&) = delete;

  // Events (decider.cc; a runnable's in kinds/runnable.cc, FillEach in kinds/each.cc).
  void On(const Submit& e);
  void On(const StartJob& e);
  void On(const Started& e);
  void On(const Completed& e);
  void On(const Failed& e);
  void On(const TaskTimedOut& e);
  void On(const TaskOverdue& e);
  void On(const WorkerCancelled& e);
  void On(const Redelivery& e);
  void On(const LeaseExpired& e);
  void On(const Progress& e);
  void On(const Cancel& e);
  void On(const Restart& e);
  void On(const JobTimedOut& e);
  void On(const StepFailed& e);
  void On(const RetryDue& e);
  void On(const FillEach& e);
  void On(const Published& e);
  void On(const PublishRefused& e);
  void On(const Pause& e);   // pause.cc
  void On(const Resume& e);  // pause.cc
  void On(const Rerun& e);   // rerun.cc
  void On(const Skip& e);    // rerun.cc
  void On(const Signal& e);  // kinds/wait.cc
  // A new job stored as it is (StoreJobs).
  void Stored(JobRecord row) { NewJob(std::move(row)); }

  // What must be in flight for a job whose every row the view holds (frontier.cc).
  void Reconcile(const std::string& job_id, const std::vector<std::string>& ids,
                 const std::set<std::string>* live_nodes);

  // Once, at the end: the rows move into their effects.
  std::vector<Effect> Effects();

 private:
  // The overlay.
  TaskRecord* T(const std::string& id);
  JobRecord* J(const std::string& id);
  const Job& Def(const JobRecord& job) const;
  JobRecord& NewJob(JobRecord row);
  TaskRecord& NewTask(TaskRecord row);
  std::string MakeId();
  TaskRecord MakeRow(const std::string& job_id, const std::string& parent_id, int position,
                     int each_index, TaskState state);
  std::vector<Effect> Starts() const;
  void RowEffects(std::vector<Effect>& out);

  // Notices (notices.cc): what the written rows tell (Changed, Notify).
  using WrittenJobs = std::map<std::string, const JobRecord*>;  // job id → its row written
  std::vector<Effect> Notices(const std::vector<Effect>& rows);
  const Notify* HookJob(const std::string& job_id, const WrittenJobs& written);
  void AddNotify(std::string_view event, const std::string& job_id, const TaskRecord* task,
                 const WrittenJobs& written, std::vector<Effect>& out);

  // Reconciling (frontier.cc).
  std::map<std::string, std::vector<std::string>> ReconcileWaiting(
      const std::vector<std::string>& ids);
  void ReconcileRunnable(const std::string& id, const std::set<std::string>* live_nodes);
  void ReconcileComposite(const std::string& id, const std::vector<std::string>& children);
  void ReconcileStep(const std::string& job_id, const std::vector<std::string>& ids);
  void ReconcileGraph(const std::string& key, const std::vector<std::string>& rows);

  // Jobs.
  void Ran(const std::string& job_id);
  void Arm(const JobRecord& job, TimePoint from);
  void StartJobRule(const std::string& job_id);
  void Advance(const std::string& job_id, int position);
  void CompleteJob(const std::string& job_id);
  void FailJob(const std::string& job_id, const std::string& error, JobState state);
  // The job ends in `state` (its cleanup, if any, done).
  void EndJob(const std::string& job_id, JobState state);
  void Ended(const JobRecord& job);

  // A graph's steps (graph.cc): the top-level tasks of a job whose definition is a
  // graph, or the children of a parallel whose tasks are one (core/graph.h), started by
  // their trigger rules as the tasks they need end. A graph is known by its key: its
  // job's id, or its parallel row's.
  struct GraphHost {
    std::string* steps;              // the job's or the parallel row's
    const std::vector<Task>* tasks;  // its steps' definitions
    JobRecord* job;                  // the job (a parallel's too)
    TaskRecord* parallel;            // null for a job's own graph
  };
  std::optional<GraphHost> HostOf(const std::string& key);
  std::optional<std::pair<std::string, std::size_t>> GraphSlot(const TaskRecord& t);
  const TaskGraph& GraphFor(const std::string& key);
  void StartGraph(const std::string& job_id);
  void StepGraph(const std::string& key);
  void GraphTaskEnded(const TaskRecord& t);
  void GraphTaskFailed(const TaskRecord& t, const std::string& error);
  void EndStep(const TaskRecord& t, char state, const std::string& error);
  void EndGraph(const std::string& key);
  void RestartGraph(JobRecord& job);
  // A finished job made to run again (Restart, Rerun): SCHEDULED, its times and outcome
  // cleared, its timeout armed from now.
  void RunAgain(JobRecord& job);

  // Tasks.
  static bool Finish(TaskRecord& t, TaskState state, const std::string& result,
                     const std::string& error, const std::string& from_node,
                     std::optional<TimePoint> started_at, TimePoint now);
  bool Finish(TaskRecord& t, TaskState state, const std::string& result, const std::string& error,
              const std::string& from_node, std::optional<TimePoint> started_at);
  const json& Ctx(const JobRecord& job) const;
  json& MutableCtx(JobRecord& job);
  expr::Vars VarsFor(const JobRecord& job, const json& extra) const;
  void DispatchNew(Task def, const std::string& job_id, const std::string& parent_id, int position,
                   const json& extra, int index);
  void FailNow(TaskRecord& t, const std::string& error);
  void Dispatch(const std::string& id, const json& extra, bool evaluated);
  void TaskDone(const std::string& id);
  void ChildDone(const std::string& parent_id);
  void Retry(const std::string& failed_id);
  // The one retry rule: a new attempt of a FAILED row with attempts left in an active
  // job (true), else the failure goes up (TaskFailed; false).
  bool RetryOrFail(const std::string& failed_id);
  void TaskFailed(const std::string& id);
  // A failed row's error as it goes on (up, or to its fallback): its own secrets hidden.
  static std::string ErrorGoingOn(const TaskRecord& failed);
  // Adds `more` to a job's error ("a; b").
  static void AddError(JobRecord& job, const std::string& more);
  bool Under(const TaskRecord& row, const std::string& ancestor);
  void CancelRows(const std::string& job_id, const std::string& under);

  // Kinds.
  void Queue(TaskRecord& t);  // runnable
  void WorkerFailure(const std::string& task_id, const std::string& node, const std::string& error,
                     std::optional<TimePoint> started_at, FailReason reason,
                     std::optional<int> exit_code = std::nullopt);
  void Redeliver(const std::string& lost_id);
  void LostInCrash(const std::string& id);
  void Reattempt(const std::string& lost_id, int redelivered);
  // A new attempt of a runnable row (PENDING, a new id, made now, its run's columns
  // cleared; its retries and redeliveries as they were), not stored yet.
  TaskRecord NextAttempt(const TaskRecord& row);
  void DispatchParallel(const std::string& id, const json& extra);
  void DispatchEach(const std::string& id, const json& extra);
  void FillSlots(const std::string& each_id);
  Result<TaskRecord> EachChild(const TaskRecord& each, std::size_t index, const json& item,
                               const json& extra, json& loop, const expr::Vars& vars);
  void DispatchSubJob(const std::string& id);
  // A switch and a loop (kinds/sequence.cc): their children one step at a time.
  void DispatchSwitch(const std::string& id, const json& extra);
  void DispatchLoop(const std::string& id, const json& extra);
  void NextStep(const std::string& id);
  void OneStep(const std::string& id);
  void LoopChildDone(TaskRecord& loop, const TaskRecord& child);
  json LoopScope(const TaskRecord& loop, int iteration) const;
  void FailRunning(TaskRecord& t, const std::string& error);
  void ReconcileSequence(TaskRecord& row, const std::vector<std::string>& children);
  // A wait (kinds/wait.cc): RUNNING from its dispatch; ended at its due time, or armed.
  void DispatchWait(const std::string& id);
  void ArmWait(TaskRecord& t);
  void ReconcileWait(const std::string& id);
  // Cleanup (kinds/handler.cc): a task's onFailure in its place, a job's onFailure and
  // finally before it ends.
  bool StartFallback(const std::string& failed_id);
  bool StartCleanup(JobRecord& job, JobState outcome);
  void StartJobHandler(JobRecord& job, Handles handles);
  void DispatchHandler(const std::string& id);
  void HandlerDone(TaskRecord& h);
  void JobHandlerEnded(const std::string& id);
  // Pause and resume (pause.cc): whether nothing of the job may start now (it is PAUSED);
  // a cancelled job leaves PAUSED; a row that may wait in a queue (withdrawn by a pause,
  // requeued as a new attempt by the resume); a pause point reached; the starts of held jobs held
  // (once, at the end of a decision).
  bool Held(const std::string& job_id) const;
  // The job whose task started `job` and still runs it (none for a top-level job, or one
  // whose task ended).
  const JobRecord* ParentJob(const JobRecord& job);
  static void Unpause(JobRecord& job);
  bool MayBeQueued(const TaskRecord& row) const;
  void Requeue(const std::string& id);
  void PauseBefore(const TaskRecord& t);
  void HoldStarts();

  View view_;  // its jobs and tasks are the rows as this decision leaves them
  TimePoint now_;
  std::map<std::string, JobColumns> job_columns_;    // touched stored job → as read
  std::map<std::string, TaskColumns> task_columns_;  // touched stored task → as read
  std::set<std::string> context_changed_;
  std::vector<std::string> job_order_;
  std::vector<std::string> task_order_;
  std::set<std::string> new_jobs_;
  std::set<std::string> new_tasks_;
  std::map<std::string, std::deque<std::string>> waiting_;
  std::set<std::string> fill_asked_;
  std::map<std::string, int> running_;  // each → children started and not done
  std::set<std::string> all_known_;     // eaches whose every CREATED child is in waiting_
  std::vector<CancelActive> cancels_;
  // Jobs CancelRows cancelled in this decision, and the rows made after (a job's cleanup,
  // a fallback): written after the CancelActives, which must not cancel them.
  std::set<std::string> cancelled_jobs_;
  std::set<std::string> late_tasks_;
  std::vector<Effect> after_;
  std::vector<std::string> starts_;
  std::vector<std::string> finished_jobs_;
  std::vector<Event> follow_;
  std::map<std::string, std::optional<Notify>> hook_jobs_;  // job id → HookJob's, once made
  std::map<std::string, TaskGraph> graphs_;                 // graph key → its graph, once made
  // Graphs (keys) StepGraph, and switches and loops (task ids) NextStep, is deciding;
  // ...and those whose steps changed meanwhile, to be stepped again.
  std::set<std::string> stepping_;
  std::set<std::string> restep_;
  int made_ = 0;
  expr::EvalOptions options_;  // what templates' now() and randomInt() give
  std::uint64_t random_ = 0;   // randomInt()'s state
};

}  // namespace baton::flow

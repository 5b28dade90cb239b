// Frontier: from a job's rows alone, what must be in flight (reconciling after a crash).
#include <algorithm>
#include <map>

#include "core/evaluate.h"
#include "core/task_kind.h"
#include "flow/decider.h"

namespace baton::flow {
namespace {

// Frontier's view holds every row of the job.
View FullView(const JobRecord& job, std::vector<TaskRecord>&& rows, const Policy& policy,
              const std::string& id_seed) {
  View view;
  view.jobs[job.id] = job;
  view.policy = policy;
  view.id_seed = id_seed;
  for (TaskRecord& row : rows) {
    std::string id = row.id;
    view.tasks.insert_or_assign(std::move(id), std::move(row));
  }
  return view;
}

}  // namespace

void Decider::Reconcile(const std::string& job_id, const std::vector<std::string>& ids,
                        const std::set<std::string>* live_nodes) {
  JobRecord* job = J(job_id);
  if (job == nullptr || !IsActive(job->state)) return;
  if (job->state == JobState::kPending) {
    StartJobRule(job->id);
    return;
  }
  // A job whose cleanup runs has its outcome already: no timeout.
  if (Def(*job).timeout && job->started_at && !job->ending) Arm(*job, *job->started_at);
  std::map<std::string, std::vector<std::string>> children = ReconcileWaiting(ids);
  for (const std::string& id : ids) {
    ReconcileRunnable(id, live_nodes);
    ReconcileWait(id);
  }
  // The new attempts of rows lost in the crash are their slots' latest rows: a composite
  // counts them as running (not their old rows, now FAILED, as its child's failure).
  for (const std::string& id : task_order_) {
    const TaskRecord& row = view_.tasks.at(id);
    if (new_tasks_.contains(id) && !row.parent_id.empty()) children[row.parent_id].push_back(id);
  }
  for (const std::string& id : ids) ReconcileComposite(id, children[id]);
  ReconcileStep(job_id, ids);
}

std::map<std::string, std::vector<std::string>> Decider::ReconcileWaiting(
    const std::vector<std::string>& ids) {
  // Every each's CREATED children, in index order, wait for a slot.
  std::vector<const TaskRecord*> created;
  std::map<std::string, std::vector<std::string>> children;  // composite → its rows
  for (const std::string& id : ids) {
    const TaskRecord& row = view_.tasks.at(id);
    if (row.state == TaskState::kCreated && !row.parent_id.empty()) created.push_back(&row);
    if (!row.parent_id.empty()) children[row.parent_id].push_back(id);
  }
  std::sort(created.begin(), created.end(),
            [](const TaskRecord* a, const TaskRecord* b) { return a->each_index < b->each_index; });
  for (const TaskRecord* row : created) waiting_[row->parent_id].push_back(row->id);
  return children;
}

// A runnable row lost in flight, or lost with the engine: RUNNING on a node that is not
// live (an earlier run of the engine, which ran it), it runs again as a new attempt that
// spends neither a redelivery nor a retry (LostInCrash).
void Decider::ReconcileRunnable(const std::string& id, const std::set<std::string>* live_nodes) {
  TaskRecord* row = T(id);
  if (row == nullptr || KindOf(row->task) != TaskKind::kRunnable) return;
  // A paused job's row that may be in a queue: its withdrawal told again (a crash may have
  // lost it), the row left to the resume, which runs a new attempt of it.
  if (Held(row->job_id) && MayBeQueued(*row)) {
    after_.push_back(Withdraw{row->id});
    return;
  }
  if (row->state == TaskState::kPending ||
      (row->state == TaskState::kScheduled && !view_.policy.durable_broker)) {
    const bool retry = row->task.retry && row->task.retry->attempts > 0;
    if (row->state == TaskState::kPending && retry && RetryDueAt(*row) > now_) {
      after_.push_back(StartAt{row->id, RetryDueAt(*row)});  // in its backoff still
    } else if (row->state == TaskState::kScheduled) {
      starts_.push_back(row->id);  // stored as queued already: published again only
    } else {
      Queue(*row);
    }
  } else if (row->state == TaskState::kRunning && live_nodes != nullptr &&
             !live_nodes->contains(row->node_id)) {
    LostInCrash(row->id);
  }
}

// A composite: recounted from its children, finished or refilled. A child is known by
// its each_index (its retries share it); its latest row counts.
void Decider::ReconcileComposite(const std::string& id, const std::vector<std::string>& children) {
  TaskRecord* row = T(id);
  if (row == nullptr || row->state != TaskState::kRunning) return;
  TaskKind kind = KindOf(row->task);
  if (kind == TaskKind::kSwitch || kind == TaskKind::kLoop || kind == TaskKind::kHandler) {
    return ReconcileSequence(*row, children);
  }
  if (kind != TaskKind::kParallel && kind != TaskKind::kEach) return;
  if (!row->steps.empty()) return ReconcileGraph(id, children);
  std::map<int, const TaskRecord*> latest;
  for (const std::string& child_id : children) {
    const TaskRecord* child = T(child_id);
    latest[child->each_index] = LatestAttempt(latest[child->each_index], *child);
  }
  int done = 0;
  int running = 0;
  const TaskRecord* failed = nullptr;
  for (const auto& [index, child] : latest) {
    // An optional child's final failure counts as done (TaskFailed: TaskDone).
    const bool passed = IsOptionalFailureLetGo(*child);
    if (IsDone(child->state) || passed) ++done;
    if (child->state != TaskState::kCreated && !IsTerminal(child->state)) ++running;
    if (!IsDone(child->state) && !passed && IsTerminal(child->state) && failed == nullptr) {
      failed = child;
    }
  }
  row->completions = done;
  if (kind == TaskKind::kEach) {
    running_[row->id] = running;
    all_known_.insert(row->id);
  }
  if (failed != nullptr && !RetryOrFail(failed->id)) return;
  if (done >= Expected(*row)) {
    if (Finish(*row, TaskState::kCompleted, "", "", "", std::nullopt)) TaskDone(row->id);
    return;
  }
  if (kind == TaskKind::kEach) FillSlots(row->id);
}

// A switch, a loop or a handler: its latest step's latest row tells where it is. Every decision
// that ends a step starts the next one, so after a crash the latest step is in flight
// (its runnables reconciled above), or ended and not acted on, or never made.
void Decider::ReconcileSequence(TaskRecord& row, const std::vector<std::string>& children) {
  const TaskRecord* latest = nullptr;
  for (const std::string& child_id : children) {
    const TaskRecord* child = T(child_id);
    if (child->each_index < 0) continue;  // a switch's branch not taken
    if (latest == nullptr || child->each_index > latest->each_index) {
      latest = child;
    } else if (child->each_index == latest->each_index) {
      latest = LatestAttempt(latest, *child);
    }
  }
  if (latest == nullptr) {
    row.completions = 0;
    return NextStep(row.id);
  }
  const bool ended = IsDone(latest->state) || IsOptionalFailureLetGo(*latest);
  row.completions = latest->each_index + (ended ? 1 : 0);
  if (ended) return NextStep(row.id);
  if (IsTerminal(latest->state)) RetryOrFail(latest->id);
}

// The current top-level step: never created, or finished and not acted on. The rows
// created by the reconcile count: a step whose lease expired has its new attempt as its
// latest row (otherwise its old, FAILED, row read as the step's end and failed the job).
void Decider::ReconcileStep(const std::string& job_id, const std::vector<std::string>& ids) {
  JobRecord* job = J(job_id);
  // A job whose cleanup runs: its handler row was reconciled as a composite.
  if (!IsGoing(job->state) || job->ending) return;
  std::vector<std::string> rows = ids;
  for (const std::string& id : task_order_) {
    if (new_tasks_.contains(id)) rows.push_back(id);
  }
  if (!job->steps.empty()) return ReconcileGraph(job_id, rows);
  const TaskRecord* latest = nullptr;
  for (const std::string& id : rows) {
    const TaskRecord* row = T(id);
    if (row->parent_id.empty() && row->position == job->position && !IsJobHandler(row->task)) {
      latest = LatestAttempt(latest, *row);
    }
  }
  if (latest == nullptr) {
    if (job->position > job->task_count || job->task_count == 0) {
      CompleteJob(job->id);
    } else {
      DispatchNew(Def(*job).tasks[static_cast<std::size_t>(job->position - 1)], job->id, "",
                  job->position, json::object(), 0);
    }
    return;
  }
  if (IsDone(latest->state)) {
    TaskDone(latest->id);
  } else if (latest->state == TaskState::kFailed) {
    RetryOrFail(latest->id);
  }
}

std::vector<Effect> Frontier(const JobRecord& job, std::vector<TaskRecord> rows, TimePoint now,
                             const Policy& policy, const std::set<std::string>* live_nodes,
                             const std::string& id_seed) {
  std::vector<std::string> ids;
  ids.reserve(rows.size());
  for (const TaskRecord& row : rows) ids.push_back(row.id);
  View view = FullView(job, std::move(rows), policy, id_seed);
  Decider decider(std::move(view), now);
  decider.Reconcile(job.id, ids, live_nodes);
  return decider.Effects();
}

}  // namespace baton::flow

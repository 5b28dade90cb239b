// The rules. One Decider per decision owns the view and changes its rows in place; the
// first time a rule touches a stored row, the row's state columns are noted, and the
// effects are the touched rows whose state differs at the end (one write per changed
// row, the row moved into its effect), then what the commit must be followed by. Nothing
// here copies a job's definition or a composite's subtree: a decision costs what the rows
// it touches cost, bounded by the depth of nesting, never by the size of the job.
#include "flow/flow.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <type_traits>

#include "core/document.h"
#include "core/evaluate.h"
#include "expr/expr.h"
#include "core/messages.h"
#include "core/redact.h"
#include "core/task_kind.h"

namespace baton::flow {
namespace {

using nlohmann::json;

bool IsTerminal(TaskState s) {
  return s == TaskState::kCompleted || s == TaskState::kFailed || s == TaskState::kCancelled ||
         s == TaskState::kSkipped;
}
bool IsDone(TaskState s) { return s == TaskState::kCompleted || s == TaskState::kSkipped; }
bool IsActive(JobState s) {
  return s == JobState::kPending || s == JobState::kScheduled || s == JobState::kRunning;
}
// Started: its tasks are being run. SCHEDULED until one of them starts, RUNNING after (as
// Tork's jobs).
bool Going(JobState s) { return s == JobState::kScheduled || s == JobState::kRunning; }

std::uint64_t Fnv(std::string_view text, std::uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// Children a composite must see finish before it completes.
int Expected(const TaskRecord& row) {
  switch (KindOf(row.task)) {
    case TaskKind::kParallel:
      return static_cast<int>(row.task.parallel->tasks.size());
    case TaskKind::kEach:
      return row.each_size;
    case TaskKind::kRunnable:
    case TaskKind::kSubJob:
      return 0;
  }
  return 0;
}

// The columns a rule may change on a stored row (a stored row's definition, scope, id,
// parents and position never change): what Effects compares to tell a write.
struct TaskColumns {
  TaskState state;
  std::optional<TimePoint> scheduled_at, started_at, completed_at, failed_at;
  std::string error, result, node_id, subjob_id;
  double progress;
  int redelivered, each_size, each_index, completions;
  friend bool operator==(const TaskColumns&, const TaskColumns&) = default;
};
TaskColumns ColumnsOf(const TaskRecord& t) {
  return {t.state,       t.scheduled_at, t.started_at, t.completed_at, t.failed_at,
          t.error,       t.result,       t.node_id,    t.subjob_id,    t.progress,
          t.redelivered, t.each_size,    t.each_index, t.completions};
}
// The same for a job; its context is tracked apart (Decider::context_changed_).
struct JobColumns {
  JobState state;
  std::optional<TimePoint> started_at, completed_at, failed_at, delete_at;
  int position, task_count;
  double progress;
  std::string result, error;
  friend bool operator==(const JobColumns&, const JobColumns&) = default;
};
JobColumns ColumnsOf(const JobRecord& j) {
  return {j.state,    j.started_at, j.completed_at, j.failed_at, j.delete_at,
          j.position, j.task_count, j.progress,     j.result,    j.error};
}

class Decider {
 public:
  Decider(View view, TimePoint now) : view_(std::move(view)), now_(now) {
    // The next CREATED children join the other rows (moved, not copied); the entries
    // stay, empty, to say which eaches have more CREATED children than the view holds.
    for (auto& [each_id, children] : view_.next_created) {
      std::deque<std::string>& waiting = waiting_[each_id];
      for (TaskRecord& child : children) {
        waiting.push_back(child.id);
        std::string id = child.id;
        view_.tasks.try_emplace(std::move(id), std::move(child));
      }
    }
    running_ = view_.running_children;
  }

  // ----------------------------------------------------------------- events
  void On(const Submit& e) {
    JobRecord& job = NewJob(e.job);
    StartJobRule(job.id);
  }
  void On(const StartJob& e) {
    JobRecord* job = J(e.job_id);
    if (job == nullptr || job->state != JobState::kPending) return;
    StartJobRule(e.job_id);
  }
  void On(const Started& e) {
    TaskRecord* t = T(e.task_id);
    if (t == nullptr) return;
    bool elsewhere = !t->node_id.empty() && t->node_id != e.node_id;
    if (IsTerminal(t->state) || (t->state == TaskState::kRunning && elsewhere)) {
      // Cancelled while queued, or a second delivery: stop it where it runs now (a start
      // heard after the same node reported it done has nothing left to stop).
      bool done_here = t->state == TaskState::kCompleted && t->node_id == e.node_id;
      if (!done_here && !e.node_id.empty()) after_.push_back(Kill{e.node_id, e.task_id});
      return;
    }
    if (t->state != TaskState::kScheduled && t->state != TaskState::kPending &&
        t->state != TaskState::kCreated) {
      return;
    }
    t->state = TaskState::kRunning;
    t->started_at = e.at;
    if (!t->scheduled_at) t->scheduled_at = e.at;
    t->node_id = e.node_id;
    Ran(t->job_id);
  }
  void On(const Completed& e) {
    TaskRecord* t = T(e.task_id);
    if (t != nullptr && !IsTerminal(t->state)) Ran(t->job_id);
    if (t == nullptr || !Finish(*t, TaskState::kCompleted, e.result, "", e.node_id, e.started_at)) {
      return;
    }
    TaskDone(t->id);
  }
  void On(const Failed& e) { WorkerFailure(e.task_id, e.node_id, e.error, e.started_at); }
  void On(const TaskTimedOut& e) {
    WorkerFailure(e.task_id, e.node_id, "task timed out after " + FormatDuration(e.timeout),
                  std::nullopt);
  }
  void On(const WorkerCancelled& e) {
    TaskRecord* t = T(e.task_id);
    if (t != nullptr) Finish(*t, TaskState::kCancelled, "", e.error, e.node_id, std::nullopt);
  }
  void On(const Redelivery& e) {
    TaskRecord* t = T(e.task_id);
    if (t == nullptr || !Finish(*t, TaskState::kFailed, "", e.error, e.node_id, std::nullopt)) {
      return;
    }
    JobRecord* job = J(t->job_id);
    if (job != nullptr && IsActive(job->state)) Redeliver(t->id);
  }
  void On(const LeaseExpired& e) {
    TaskRecord* t = T(e.task_id);
    if (t == nullptr || t->state != TaskState::kRunning || t->node_id != e.node_id ||
        KindOf(t->task) != TaskKind::kRunnable) {
      return;
    }
    std::string error = fmt::format("node {} stopped heartbeating while the task ran", e.node_id);
    if (!Finish(*t, TaskState::kFailed, "", error, e.node_id, std::nullopt)) return;
    Redeliver(t->id);
  }
  void On(const Progress& e) {
    TaskRecord* t = T(e.task_id);
    if (t == nullptr || IsTerminal(t->state)) return;
    double p = std::clamp(e.progress, 0.0, 100.0);
    t->progress = p;
    if (!t->parent_id.empty()) return;
    JobRecord* job = J(t->job_id);
    if (job == nullptr || !Going(job->state) || job->position != t->position) return;
    job->progress = 100.0 * ((t->position - 1) + p / 100.0) / std::max(1, job->task_count);
  }
  void On(const Cancel& e) {
    JobRecord* job = J(e.job_id);
    if (job == nullptr) return;
    if (!IsActive(job->state)) {
      after_.push_back(Refused{fmt::format("job is {}", ToString(job->state))});
      return;
    }
    FailJob(e.job_id, "", JobState::kCancelled);
  }
  void On(const Restart& e) {
    JobRecord* job = J(e.job_id);
    if (job == nullptr) return;
    if (job->state != JobState::kFailed && job->state != JobState::kCancelled) {
      after_.push_back(
          Refused{fmt::format("only a FAILED or CANCELLED job can be restarted; this one is {}",
                              ToString(job->state))});
      return;
    }
    if (job->position > job->task_count) {
      after_.push_back(Refused{"the job has no more tasks to run"});
      return;
    }
    job->state = JobState::kScheduled;
    job->error.clear();
    job->failed_at.reset();
    job->completed_at.reset();
    // The run starts again: its timeout counts from now, also when Frontier arms it
    // again after a crash (from started_at).
    job->started_at = now_;
    if (Def(*job).timeout) Arm(*job, now_);
    int position = std::clamp(job->position, 1, job->task_count);
    DispatchNew(Def(*job).tasks[static_cast<std::size_t>(position - 1)], job->id, "", position,
                json::object(), 0);
  }
  void On(const JobTimedOut& e) {
    JobRecord* job = J(e.job_id);
    if (job == nullptr || !IsActive(job->state)) return;
    FailJob(e.job_id, "job timed out after " + FormatDuration(e.timeout), JobState::kFailed);
  }
  void On(const StepFailed& e) {
    JobRecord* job = J(e.job_id);
    if (job == nullptr || !IsActive(job->state)) return;
    FailJob(e.job_id, "the engine could not take a step: " + e.error, JobState::kFailed);
  }
  void On(const RetryDue& e) {
    TaskRecord* t = T(e.task_id);
    if (t == nullptr || t->state != TaskState::kPending) return;  // cancelled, or started
    Queue(*t);
  }
  void On(const FillEach& e) {
    TaskRecord* t = T(e.task_id);
    if (t == nullptr || t->state != TaskState::kRunning || KindOf(t->task) != TaskKind::kEach) {
      return;
    }
    FillSlots(t->id);
  }

  // ----------------------------------------------------------------- frontier
  void Reconcile(const std::string& job_id, const std::vector<std::string>& ids,
                 const std::set<std::string>* live_nodes) {
    JobRecord* job = J(job_id);
    if (job == nullptr || !IsActive(job->state)) return;
    if (job->state == JobState::kPending) {
      StartJobRule(job->id);
      return;
    }
    if (Def(*job).timeout && job->started_at) Arm(*job, *job->started_at);
    // Every each's CREATED children, in index order, wait for a slot.
    std::vector<const TaskRecord*> created;
    std::map<std::string, std::vector<std::string>> children;  // composite → its rows
    for (const std::string& id : ids) {
      const TaskRecord& row = view_.tasks.at(id);
      if (row.state == TaskState::kCreated && !row.parent_id.empty()) created.push_back(&row);
      if (!row.parent_id.empty()) children[row.parent_id].push_back(id);
    }
    std::sort(created.begin(), created.end(), [](const TaskRecord* a, const TaskRecord* b) {
      return a->each_index < b->each_index;
    });
    for (const TaskRecord* row : created) waiting_[row->parent_id].push_back(row->id);
    // Runnable rows lost in flight (or on a node that is gone).
    for (const std::string& id : ids) {
      TaskRecord* row = T(id);
      if (row == nullptr || KindOf(row->task) != TaskKind::kRunnable) continue;
      if (row->state == TaskState::kPending ||
          (row->state == TaskState::kScheduled && !view_.policy.durable_broker)) {
        if (row->state == TaskState::kPending && row->task.retry && row->task.retry->attempts > 0) {
          TimePoint due = row->created_at + RetryDelay(*row->task.retry, row->task.retry->attempts);
          if (due > now_) {
            after_.push_back(StartAt{row->id, due});
            continue;
          }
        }
        if (row->state == TaskState::kScheduled) {
          starts_.push_back(row->id);  // stored as queued already: published again only
        } else {
          Queue(*row);
        }
      } else if (row->state == TaskState::kRunning && live_nodes != nullptr &&
                 !live_nodes->contains(row->node_id)) {
        On(LeaseExpired{row->id, row->node_id});
      }
    }
    // Composites: recount from their children, finish or refill them. A child is known
    // by its each_index (its retries share it); its latest row counts.
    for (const std::string& id : ids) {
      TaskRecord* row = T(id);
      if (row == nullptr || row->state != TaskState::kRunning) continue;
      TaskKind kind = KindOf(row->task);
      if (kind != TaskKind::kParallel && kind != TaskKind::kEach) continue;
      std::map<int, const TaskRecord*> latest;
      for (const std::string& child_id : children[row->id]) {
        const TaskRecord* child = T(child_id);
        const TaskRecord*& slot = latest[child->each_index];
        if (slot == nullptr || child->created_at > slot->created_at ||
            (child->created_at == slot->created_at && !IsTerminal(child->state))) {
          slot = child;
        }
      }
      int done = 0;
      int running = 0;
      const TaskRecord* failed = nullptr;
      for (const auto& [index, child] : latest) {
        if (IsDone(child->state)) ++done;
        if (child->state != TaskState::kCreated && !IsTerminal(child->state)) ++running;
        if (!IsDone(child->state) && IsTerminal(child->state) && failed == nullptr) failed = child;
      }
      row->completions = done;
      if (kind == TaskKind::kEach) {
        running_[row->id] = running;
        all_known_.insert(row->id);
      }
      if (failed != nullptr) {
        const auto& retry = failed->task.retry;
        if (failed->state == TaskState::kFailed && retry && retry->attempts < retry->limit) {
          Retry(failed->id);
        } else {
          TaskFailed(failed->id);
          continue;
        }
      }
      if (done >= Expected(*row)) {
        if (Finish(*row, TaskState::kCompleted, "", "", "", std::nullopt)) TaskDone(row->id);
        continue;
      }
      if (kind == TaskKind::kEach) FillSlots(row->id);
    }
    // The current top-level step: never created, or finished and not acted on. The rows
    // created above count: a step whose lease expired has its new attempt as its latest
    // row (otherwise its old, FAILED, row read as the step's end and failed the job).
    if (!Going(job->state)) return;
    std::vector<std::string> rows = ids;
    for (const std::string& id : task_order_) {
      if (new_tasks_.contains(id)) rows.push_back(id);
    }
    const TaskRecord* latest = nullptr;
    for (const std::string& id : rows) {
      const TaskRecord* row = T(id);
      if (!row->parent_id.empty() || row->position != job->position) continue;
      if (latest == nullptr || row->created_at > latest->created_at ||
          (row->created_at == latest->created_at && !IsTerminal(row->state))) {
        latest = row;
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
      const auto& retry = latest->task.retry;
      if (retry && retry->attempts < retry->limit) {
        Retry(latest->id);
      } else {
        TaskFailed(latest->id);
      }
    }
  }

  // ----------------------------------------------------------------- effects
  // Once, at the end: the rows move into their effects.
  std::vector<Effect> Effects() {
    std::vector<Effect> out;
    // Copies taken before the rows move: a start carries a leaf row (small), a finished
    // job its row (once per job).
    std::vector<Effect> starts;
    std::set<std::string> started;
    for (const std::string& id : starts_) {
      const TaskRecord& row = view_.tasks.at(id);
      if (!started.insert(id).second) continue;
      // A row started in this decision and cancelled later in it is not started.
      if (row.state == TaskState::kPending || row.state == TaskState::kScheduled) {
        starts.push_back(Start{row});
      }
    }
    std::vector<Effect> finished;
    for (const std::string& id : finished_jobs_) finished.push_back(JobFinished{view_.jobs.at(id)});
    out.reserve(job_order_.size() + task_order_.size() + cancels_.size() + after_.size() +
                starts.size() + finished.size() + follow_.size());
    for (const std::string& id : job_order_) {
      JobRecord& row = view_.jobs.at(id);
      if (new_jobs_.contains(id)) {
        out.push_back(CreateJob{std::move(row)});
        continue;
      }
      bool context = context_changed_.contains(id);
      const JobColumns& was = job_columns_.at(id);
      if (context || !(was == ColumnsOf(row))) {
        bool state = was.state != row.state;
        bool progress = was.progress != row.progress;
        out.push_back(UpdateJob{std::move(row), context, state, progress});
      }
    }
    for (const std::string& id : task_order_) {
      TaskRecord& row = view_.tasks.at(id);
      if (new_tasks_.contains(id)) {
        out.push_back(CreateTask{std::move(row)});
      } else if (const TaskColumns& was = task_columns_.at(id); !(was == ColumnsOf(row))) {
        bool state = was.state != row.state;
        bool progress = was.progress != row.progress;
        out.push_back(UpdateTask{std::move(row), state, progress});
      }
    }
    for (CancelActive& c : cancels_) out.push_back(std::move(c));
    for (Effect& e : after_) out.push_back(std::move(e));
    for (Effect& e : starts) out.push_back(std::move(e));
    for (Effect& e : finished) out.push_back(std::move(e));
    for (Event& e : follow_) out.push_back(FollowUp{std::move(e)});
    return out;
  }

 private:
  // ----------------------------------------------------------------- the overlay
  // A row the decision may change: its columns are noted the first time.
  TaskRecord* T(const std::string& id) {
    auto it = view_.tasks.find(id);
    if (it == view_.tasks.end()) return nullptr;
    if (!new_tasks_.contains(id) && !task_columns_.contains(id)) {
      task_columns_.emplace(id, ColumnsOf(it->second));
      task_order_.push_back(id);
    }
    return &it->second;
  }
  JobRecord* J(const std::string& id) {
    auto it = view_.jobs.find(id);
    if (it == view_.jobs.end()) return nullptr;
    if (!new_jobs_.contains(id) && !job_columns_.contains(id)) {
      job_columns_.emplace(id, ColumnsOf(it->second));
      job_order_.push_back(id);
    }
    return &it->second;
  }
  // A job's definition: shared by the view when the shell read the row without it.
  const Job& Def(const JobRecord& job) const {
    auto it = view_.definitions.find(job.id);
    return it != view_.definitions.end() && it->second != nullptr ? *it->second : job.job;
  }
  JobRecord& NewJob(JobRecord row) {
    std::string id = row.id;
    new_jobs_.insert(id);
    job_order_.push_back(id);
    return view_.jobs.insert_or_assign(id, std::move(row)).first->second;
  }
  TaskRecord& NewTask(TaskRecord row) {
    std::string id = row.id;
    new_tasks_.insert(id);
    task_order_.push_back(id);
    return view_.tasks.insert_or_assign(id, std::move(row)).first->second;
  }
  std::string MakeId() {
    std::string seed = view_.id_seed.size() >= 12 ? view_.id_seed : std::string(32, '0');
    std::uint64_t h = Fnv(fmt::format("{}/{}", seed, ++made_));
    std::uint64_t g = Fnv(fmt::format("{}", h), h);
    return fmt::format("{}{:016x}{:04x}", seed.substr(0, 12), h, g & 0xffff);
  }

  // ----------------------------------------------------------------- jobs
  // A task of `job_id` ran: the job, and the jobs whose sub-job it is, as far as the view
  // holds them, are RUNNING from SCHEDULED.
  void Ran(const std::string& job_id) {
    for (JobRecord* job = J(job_id); job != nullptr && job->state == JobState::kScheduled;) {
      job->state = JobState::kRunning;
      const TaskRecord* parent = job->parent_id.empty() ? nullptr : T(job->parent_id);
      job = parent == nullptr ? nullptr : J(parent->job_id);
    }
  }
  void Arm(const JobRecord& job, TimePoint from) {
    after_.push_back(ArmJobTimeout{job.id, *Def(job).timeout, from + *Def(job).timeout});
  }
  void StartJobRule(const std::string& job_id) {
    JobRecord& job = *J(job_id);
    job.state = JobState::kScheduled;
    job.started_at = now_;
    if (Def(job).timeout) Arm(job, now_);
    if (Def(job).tasks.empty()) {
      job.position = 1;  // past its (no) tasks
      CompleteJob(job_id);
      return;
    }
    DispatchNew(Def(job).tasks[0], job_id, "", 1, json::object(), 0);
  }
  void Advance(const std::string& job_id, int position) {
    JobRecord* job = J(job_id);
    if (job == nullptr || !Going(job->state) || job->position != position) return;
    if (position >= job->task_count) {
      // Past its last task, as Tork counts: a restart then has nothing left to run.
      job->position = job->task_count + 1;
      CompleteJob(job_id);
      return;
    }
    job->position = position + 1;
    job->progress = 100.0 * position / std::max(1, job->task_count);
    Task next = Def(*job).tasks[static_cast<std::size_t>(position)];
    DispatchNew(std::move(next), job_id, "", position + 1, json::object(), 0);
  }
  void CompleteJob(const std::string& job_id) {
    JobRecord& job = *J(job_id);
    if (!Going(job.state)) return;
    std::string result;
    if (!Def(job).output.empty()) {
      auto value = expr::EvaluateTemplateValue(Def(job).output, Ctx(job));
      if (!value.ok()) {
        FailJob(job_id, "output: " + value.status().message(), JobState::kFailed);
        return;
      }
      result = expr::ToText(*value);
      if (InvalidUtf8At(result) != std::string_view::npos) {
        FailJob(job_id, fmt::format("output: {}", kNotUtf8), JobState::kFailed);
        return;
      }
    }
    job.state = JobState::kCompleted;
    job.completed_at = now_;
    job.result = result;
    job.progress = 100;
    if (Def(job).auto_delete) job.delete_at = now_ + Def(job).auto_delete->after;
    Ended(job);
    if (job.parent_id.empty()) return;
    TaskRecord* parent = T(job.parent_id);
    if (parent == nullptr) return;
    if (Finish(*parent, TaskState::kCompleted, result, "", "", std::nullopt)) TaskDone(parent->id);
  }
  void FailJob(const std::string& job_id, const std::string& error, JobState state) {
    JobRecord& job = *J(job_id);
    if (!IsActive(job.state)) return;
    job.state = state;
    if (state == JobState::kFailed) {
      job.failed_at = now_;
      job.error = SanitizeUtf8(error);
    }
    Ended(job);
    CancelRows(job_id, "");
    // A failed sub-job fails the task that started it; a cancelled one was cancelled
    // with (or by) its parent, which decides for itself.
    if (job.parent_id.empty() || state != JobState::kFailed) return;
    TaskRecord* parent = T(job.parent_id);
    if (parent == nullptr) return;
    if (Finish(*parent, TaskState::kFailed, "", error, "", std::nullopt)) TaskFailed(parent->id);
  }
  void Ended(const JobRecord& job) {
    if (Def(job).timeout) after_.push_back(DisarmJobTimeout{job.id});
    finished_jobs_.push_back(job.id);
  }

  // ----------------------------------------------------------------- tasks
  static bool Finish(TaskRecord& t, TaskState state, const std::string& result,
                     const std::string& error, const std::string& from_node,
                     std::optional<TimePoint> started_at, TimePoint now) {
    if (IsTerminal(t.state)) return false;
    if (!from_node.empty()) {
      if (!t.node_id.empty() && t.node_id != from_node) return false;  // a duplicate
      t.node_id = from_node;
      if (!t.started_at) t.started_at = started_at.value_or(now);
    }
    t.state = state;
    if (state == TaskState::kFailed) {
      t.failed_at = now;
      t.error = SanitizeUtf8(error);
    } else {
      t.completed_at = now;
      if (state == TaskState::kCompleted) {
        t.result = result;
        t.progress = 100;
      }
      if (state == TaskState::kCancelled && !error.empty()) t.error = error;
    }
    return true;
  }
  bool Finish(TaskRecord& t, TaskState state, const std::string& result, const std::string& error,
              const std::string& from_node, std::optional<TimePoint> started_at) {
    return Finish(t, state, result, error, from_node, started_at, now_);
  }

  // The job's context: its row's, or the view's shared one until this decision changes it.
  const json& Ctx(const JobRecord& job) const {
    if (context_changed_.contains(job.id)) return job.context;
    auto it = view_.contexts.find(job.id);
    return it != view_.contexts.end() && it->second != nullptr ? *it->second : job.context;
  }
  // The context of `job`, owned by its row from now on, to be changed.
  json& MutableCtx(JobRecord& job) {
    if (!context_changed_.contains(job.id)) {
      auto it = view_.contexts.find(job.id);
      if (it != view_.contexts.end() && it->second != nullptr) job.context = *it->second;
      context_changed_.insert(job.id);
    }
    return job.context;
  }

  // What a task's templates see: the loop variables `extra` over the job's context (no
  // copy of the context, however big).
  expr::Vars VarsFor(const JobRecord& job, const json& extra) const {
    return expr::Vars(Ctx(job), extra);
  }

  // A new row for definition `def`, taken as far as it goes now.
  void DispatchNew(Task def, const std::string& job_id, const std::string& parent_id, int position,
                   const json& extra, int index) {
    const JobRecord& job = *J(job_id);
    TaskRecord row;
    row.id = MakeId();
    row.job_id = job_id;
    row.parent_id = parent_id;
    row.position = position;
    row.each_index = index;
    row.state = TaskState::kPending;
    row.created_at = now_;
    ApplyDefaults(Def(job).defaults, def);
    row.task = std::move(def);
    if (row.task.IsComposite()) row.scope = extra;
    std::string id = NewTask(std::move(row)).id;
    Dispatch(id, extra, /*evaluated=*/false);
  }

  void FailNow(TaskRecord& t, const std::string& error) {
    t.state = TaskState::kFailed;
    t.failed_at = now_;
    t.error = SanitizeUtf8(error);
    TaskFailed(t.id);
  }

  // Stored to be published (or, with a durable broker, PENDING until confirmed) and
  // started after the commit.
  void Queue(TaskRecord& t) {
    if (view_.policy.durable_broker) {
      t.state = TaskState::kPending;
    } else {
      t.state = TaskState::kScheduled;
      t.scheduled_at = now_;
    }
    starts_.push_back(t.id);
  }

  // Takes a row (PENDING or CREATED) as far as its kind takes it now.
  void Dispatch(const std::string& id, const json& extra, bool evaluated) {
    TaskRecord& t = *T(id);
    const JobRecord& job = *J(t.job_id);
    if (!evaluated) {
      const expr::Vars vars = VarsFor(job, extra);
      if (!t.task.if_expr.empty()) {
        auto runs = EvaluateCondition(t.task.if_expr, vars);
        if (!runs.ok()) return FailNow(t, runs.status().message());
        if (!*runs) {
          t.state = TaskState::kSkipped;
          t.completed_at = now_;
          return TaskDone(id);
        }
      }
      Status ok = EvaluateTask(t.task, vars);
      if (!ok.ok()) return FailNow(t, ok.message());
    }
    switch (KindOf(t.task)) {
      case TaskKind::kRunnable:
        return Queue(t);
      case TaskKind::kParallel:
        return DispatchParallel(id, extra);
      case TaskKind::kEach:
        return DispatchEach(id, extra);
      case TaskKind::kSubJob:
        return DispatchSubJob(id);
    }
  }

  void DispatchParallel(const std::string& id, const json& extra) {
    TaskRecord& t = *T(id);
    t.state = TaskState::kRunning;
    t.started_at = now_;
    std::size_t n = t.task.parallel->tasks.size();
    if (n == 0) {
      if (Finish(t, TaskState::kCompleted, "", "", "", std::nullopt)) TaskDone(id);
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {
      // One child's definition copied at a time, into its row. (Rows live in std::map
      // nodes: making more does not move this one.)
      TaskRecord& p = *T(id);
      DispatchNew(p.task.parallel->tasks[i], p.job_id, id, p.position, extra, static_cast<int>(i));
      if (IsTerminal(T(id)->state)) break;  // a child failed at once: fail-fast
    }
  }

  void DispatchEach(const std::string& id, const json& extra) {
    TaskRecord& t = *T(id);
    const JobRecord& job = *J(t.job_id);
    const Each& each = *t.task.each;
    std::string var = each.var.empty() ? "item" : each.var;
    json loop = extra;  // and each child's item, bound in turn
    const expr::Vars vars = VarsFor(job, loop);
    auto list = EvaluateEachList(each.list, vars);
    if (!list.ok()) return FailNow(t, "each.list: " + list.status().message());
    if (!list->is_array()) {
      return FailNow(t, fmt::format("each.list: expected a list, got {}",
                                    SanitizeUtf8(expr::ToText(*list).substr(0, 100))));
    }
    if (!IsUtf8(*list)) return FailNow(t, fmt::format("each.list: {}", kNotUtf8));
    t.started_at = now_;
    if (list->empty()) {
      t.state = TaskState::kCompleted;
      t.completed_at = now_;
      return TaskDone(id);
    }
    // Every child is evaluated now, while its item is known, and held CREATED until a
    // slot frees up; a skipped one is counted at once (and takes no slot).
    std::vector<TaskRecord> children;
    children.reserve(list->size());
    int skipped = 0;
    for (std::size_t i = 0; i < list->size(); ++i) {
      json binding = {{"index", i}, {"value", (*list)[i]}};
      TaskRecord child;
      child.id = MakeId();
      child.job_id = t.job_id;
      child.parent_id = id;
      child.position = t.position;
      child.state = TaskState::kCreated;
      child.created_at = now_;
      child.each_index = static_cast<int>(i);
      child.task = *each.task;
      ApplyDefaults(Def(job).defaults, child.task);
      if (child.task.IsComposite()) {
        child.scope = extra;
        child.scope[var] = binding;
      }
      loop[var] = binding;
      if (!child.task.if_expr.empty()) {
        auto runs = EvaluateCondition(child.task.if_expr, vars);
        if (!runs.ok()) return FailNow(*T(id), "each: " + runs.status().message());
        if (!*runs) {
          child.state = TaskState::kSkipped;
          child.completed_at = now_;
          ++skipped;
        }
        child.task.if_expr.clear();
      }
      if (child.state == TaskState::kCreated) {
        Status ok = EvaluateTask(child.task, vars);
        if (!ok.ok()) return FailNow(*T(id), "each: " + ok.message());
      }
      children.push_back(std::move(child));
    }
    TaskRecord& parent = *T(id);
    parent.state = TaskState::kRunning;
    parent.each_size = static_cast<int>(children.size());
    parent.completions = skipped;
    running_[id] = 0;
    all_known_.insert(id);
    for (TaskRecord& child : children) {
      bool waiting = child.state == TaskState::kCreated;
      std::string child_id = NewTask(std::move(child)).id;
      if (waiting) waiting_[id].push_back(child_id);
    }
    if (skipped >= parent.each_size) {
      if (Finish(parent, TaskState::kCompleted, "", "", "", std::nullopt)) TaskDone(id);
      return;
    }
    FillSlots(id);
  }

  // Starts CREATED children of an each while it has free slots.
  void FillSlots(const std::string& each_id) {
    for (;;) {
      TaskRecord& t = *T(each_id);
      if (t.state != TaskState::kRunning) return;
      int limit =
          t.task.each->concurrency > 0 ? t.task.each->concurrency : std::numeric_limits<int>::max();
      if (running_[each_id] >= limit) return;
      std::deque<std::string>& waiting = waiting_[each_id];
      TaskRecord* child = nullptr;
      while (!waiting.empty() && child == nullptr) {
        child = T(waiting.front());
        waiting.pop_front();
        if (child != nullptr && child->state != TaskState::kCreated) child = nullptr;
      }
      if (child == nullptr) {
        // The view held the next CREATED children only: decide again with the ones after.
        if (all_known_.contains(each_id) || !view_.next_created.contains(each_id)) return;
        if (fill_asked_.insert(each_id).second) follow_.push_back(FillEach{each_id});
        return;
      }
      ++running_[each_id];
      child->state = TaskState::kPending;
      json scope = child->scope;
      Dispatch(child->id, scope, /*evaluated=*/true);
    }
  }

  void DispatchSubJob(const std::string& id) {
    TaskRecord& t = *T(id);
    const SubJob& def = *t.task.subjob;
    Job child;
    child.name = def.name;
    child.description = def.description;
    child.tasks = def.tasks;
    child.inputs = def.inputs;
    child.secrets = def.secrets;
    child.output = def.output;
    child.auto_delete = def.auto_delete;
    child.webhooks = def.webhooks;
    // A sub-job is its parent's: the same users see it, and it has the same creator.
    if (auto parent = view_.jobs.find(t.job_id); parent != view_.jobs.end()) {
      const Job& parent_def = Def(parent->second);
      child.permissions = parent_def.permissions;
      child.created_by = parent_def.created_by;
    }
    bool detached = def.detached;
    JobRecord row = NewJobRecord(child, detached ? "" : id, MakeId(), now_);
    Result<std::size_t> bytes = StoredJobBytes(row);
    Status fits =
        bytes.ok() ? CheckStoredJobSize(*bytes, view_.policy.max_job_bytes) : bytes.status();
    if (!fits.ok()) return FailNow(t, "subjob: " + fits.message());
    std::string child_id = NewJob(std::move(row)).id;
    t.subjob_id = child_id;
    t.started_at = now_;
    if (detached) {
      t.state = TaskState::kCompleted;
      t.completed_at = now_;
      StartJobRule(child_id);
      TaskDone(id);
      return;
    }
    t.state = TaskState::kRunning;
    StartJobRule(child_id);
  }

  void TaskDone(const std::string& id) {
    TaskRecord& t = *T(id);
    JobRecord* job = J(t.job_id);
    if (job == nullptr) return;
    if (t.state == TaskState::kCompleted && !t.task.var.empty()) {
      json value = SanitizeUtf8(t.result);
      const json& context = Ctx(*job);
      auto tasks = context.find("tasks");
      bool same = false;
      if (tasks != context.end() && tasks->is_object()) {
        auto slot = tasks->find(t.task.var);
        same = slot != tasks->end() && *slot == value;
      }
      if (!same) MutableCtx(*job)["tasks"][t.task.var] = std::move(value);
    }
    if (t.parent_id.empty()) return Advance(t.job_id, t.position);
    ChildDone(t.parent_id);
  }

  void ChildDone(const std::string& parent_id) {
    TaskRecord* p = T(parent_id);
    if (p == nullptr || IsTerminal(p->state)) return;
    ++p->completions;
    if (KindOf(p->task) == TaskKind::kEach && running_[parent_id] > 0) --running_[parent_id];
    if (p->completions >= Expected(*p)) {
      if (Finish(*p, TaskState::kCompleted, "", "", "", std::nullopt)) TaskDone(parent_id);
      return;
    }
    if (KindOf(p->task) == TaskKind::kEach) FillSlots(parent_id);
  }

  void WorkerFailure(const std::string& task_id, const std::string& node, const std::string& error,
                     std::optional<TimePoint> started_at) {
    TaskRecord* t = T(task_id);
    if (t != nullptr && !IsTerminal(t->state) && !node.empty()) Ran(t->job_id);
    if (t == nullptr || !Finish(*t, TaskState::kFailed, "", error, node, started_at)) return;
    const auto& retry = t->task.retry;
    JobRecord* job = J(t->job_id);
    bool job_active = job != nullptr && IsActive(job->state);
    if (job_active && retry && retry->attempts < retry->limit) {
      Retry(task_id);
    } else {
      TaskFailed(task_id);
    }
  }

  void Retry(const std::string& failed_id) {
    const TaskRecord& failed = *T(failed_id);
    TaskRecord next;
    next.id = MakeId();
    next.job_id = failed.job_id;
    next.parent_id = failed.parent_id;
    next.position = failed.position;
    next.state = TaskState::kPending;
    next.created_at = now_;
    next.task = failed.task;
    next.task.retry->attempts = failed.task.retry->attempts + 1;
    next.each_index = failed.each_index;
    TaskRecord& row = NewTask(std::move(next));
    Duration delay = RetryDelay(*row.task.retry, row.task.retry->attempts);
    if (delay <= Duration::zero()) return Queue(row);
    after_.push_back(StartAt{row.id, now_ + delay});
  }

  void Redeliver(const std::string& lost_id) {
    TaskRecord& lost = *T(lost_id);
    if (lost.redelivered >= view_.policy.max_redeliveries) {
      lost.error =
          fmt::format("{} (re-queued {} times already: giving up)", lost.error, lost.redelivered);
      return TaskFailed(lost_id);
    }
    TaskRecord next = lost;
    next.id = MakeId();
    next.state = TaskState::kPending;
    next.created_at = now_;
    next.scheduled_at.reset();
    next.started_at.reset();
    next.failed_at.reset();
    next.error.clear();
    next.node_id.clear();
    next.progress = 0;
    next.redelivered = lost.redelivered + 1;
    Queue(NewTask(std::move(next)));
  }

  void TaskFailed(const std::string& id) {
    TaskRecord& t = *T(id);
    // The error (often the task's last output lines) goes up to the parent and the job:
    // its own secret values are hidden in it now.
    std::vector<std::string> secrets;
    AddSecretValues(t.task, secrets);
    std::string error = RedactText(t.error, secrets);
    if (t.parent_id.empty()) return FailJob(t.job_id, error, JobState::kFailed);
    TaskRecord* parent = T(t.parent_id);
    if (parent == nullptr) return;
    if (!Finish(*parent, TaskState::kFailed, "", error, "", std::nullopt)) return;
    // Fail fast: the group's other children are cancelled.
    CancelRows(parent->job_id, parent->id);
    TaskFailed(parent->id);
  }

  bool Under(const TaskRecord& row, const std::string& ancestor) {
    for (const TaskRecord* r = &row; !r->parent_id.empty();) {
      if (r->parent_id == ancestor) return true;
      r = T(r->parent_id);
      if (r == nullptr) return false;
    }
    return false;
  }

  // Cancels the active rows of a job (below `under`): the rows this decision holds in
  // the overlay, with what their cancel must tell; the stored rest in one CancelActive.
  void CancelRows(const std::string& job_id, const std::string& under) {
    std::vector<std::string> ids;
    const std::vector<std::string> order = task_order_;  // Under may read more rows
    for (const std::string& id : order) {
      const TaskRecord& row = view_.tasks.at(id);
      if (row.job_id != job_id || IsTerminal(row.state)) continue;
      if (!under.empty() && !Under(row, under)) continue;
      ids.push_back(id);
    }
    std::vector<CancelledRow> told;
    for (const std::string& id : ids) {
      TaskRecord& row = view_.tasks.at(id);
      CancelledRow c{row.id, row.state, row.node_id, row.subjob_id};
      row.state = TaskState::kCancelled;
      row.completed_at = now_;
      // A row made in this decision was never published: nothing to tell about it.
      if (!new_tasks_.contains(id)) {
        told.push_back(std::move(c));
      } else if (!row.subjob_id.empty()) {
        follow_.push_back(Cancel{row.subjob_id});
      }
    }
    for (Effect& e : AfterCancel(told, view_.policy)) {
      if (auto* f = std::get_if<FollowUp>(&e)) {
        follow_.push_back(std::move(f->event));
      } else {
        after_.push_back(std::move(e));
      }
    }
    cancels_.push_back(CancelActive{job_id, under, now_});
  }

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
  std::vector<Effect> after_;
  std::vector<std::string> starts_;
  std::vector<std::string> finished_jobs_;
  std::vector<Event> follow_;
  int made_ = 0;

 public:
  // Frontier's view holds every row of the job.
  static View FullView(const JobRecord& job, std::vector<TaskRecord>&& rows, const Policy& policy,
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
};

}  // namespace

ViewKeys KeysOf(const Event& event) {
  return std::visit(
      [](const auto& e) -> ViewKeys {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, Submit>) {
          return {"", e.job.id};
        } else if constexpr (requires { e.task_id; }) {
          return {e.task_id, ""};
        } else {
          return {"", e.job_id};
        }
      },
      event);
}

int NextCreatedWanted(const TaskRecord& each, int running) {
  int concurrency = each.task.each ? each.task.each->concurrency : 0;
  if (concurrency <= 0) return kMaxNextCreated;
  return std::clamp(concurrency - running + 1, 1, kMaxNextCreated);
}

bool IsRowEffect(const Effect& effect) {
  return std::holds_alternative<CreateJob>(effect) || std::holds_alternative<UpdateJob>(effect) ||
         std::holds_alternative<CreateTask>(effect) || std::holds_alternative<UpdateTask>(effect) ||
         std::holds_alternative<CancelActive>(effect);
}

std::vector<Effect> Decide(const Event& event, const View& view, TimePoint now) {
  return Decide(event, View(view), now);
}

std::vector<Effect> Decide(const Event& event, View&& view, TimePoint now) {
  Decider decider(std::move(view), now);
  std::visit([&](const auto& e) { decider.On(e); }, event);
  return decider.Effects();
}

std::vector<Effect> AfterCancel(const std::vector<CancelledRow>& rows, const Policy& policy) {
  std::vector<Effect> out;
  std::vector<Effect> kills;
  std::vector<Effect> follow;
  for (const CancelledRow& row : rows) {
    if (!row.subjob_id.empty()) follow.push_back(FollowUp{Cancel{row.subjob_id}});
    if (!row.node_id.empty()) {
      kills.push_back(Kill{row.node_id, row.id});
    } else if (row.was == TaskState::kRunning) {
      // Running on no node: a composite, whose rows below were cancelled with it.
    } else if (row.was != TaskState::kCreated || policy.durable_broker) {
      // Possibly in a queue. (A CREATED row is in one only with a durable broker, whose
      // confirm comes before the row is marked.)
      out.push_back(Drop{row.id});
    }
  }
  // Drops first: the slot a kill frees must not take a dropped task before its worker
  // heard of the drop.
  for (Effect& e : kills) out.push_back(std::move(e));
  for (Effect& e : follow) out.push_back(std::move(e));
  return out;
}

std::vector<Effect> Frontier(const JobRecord& job, std::vector<TaskRecord> rows, TimePoint now,
                             const Policy& policy, const std::set<std::string>* live_nodes,
                             const std::string& id_seed) {
  std::vector<std::string> ids;
  ids.reserve(rows.size());
  for (const TaskRecord& row : rows) ids.push_back(row.id);
  View view = Decider::FullView(job, std::move(rows), policy, id_seed);
  Decider decider(std::move(view), now);
  decider.Reconcile(job.id, ids, live_nodes);
  return decider.Effects();
}

JobRecord NewJobRecord(const Job& job, const std::string& parent_task_id, std::string id,
                       TimePoint now) {
  JobRecord record;
  record.id = std::move(id);
  record.parent_id = parent_task_id;
  record.state = JobState::kPending;
  record.created_at = now;
  record.job = job;
  record.task_count = static_cast<int>(job.tasks.size());
  record.position = 1;
  record.context = {{"inputs", job.inputs},
                    {"secrets", job.secrets},
                    {"tasks", json::object()},
                    {"job", {{"id", record.id}, {"name", job.name}}}};
  return record;
}

}  // namespace baton::flow

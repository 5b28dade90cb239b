// The Decider's events, a job's steps, the rules common to every task and the effects
// (see decider.h); the flow.h functions that are not Frontier.
#include "flow/decider.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "core/document.h"
#include "core/evaluate.h"
#include "core/messages.h"
#include "core/redact.h"
#include "core/task_kind.h"
#include "expr/expr.h"

namespace baton::flow {
namespace {

std::uint64_t Fnv(std::string_view text, std::uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

TaskColumns ColumnsOf(const TaskRecord& t) {
  return {t.state,     t.scheduled_at, t.started_at,  t.completed_at, t.failed_at, t.error,
          t.result,    t.node_id,      t.subjob_id,   t.steps,        t.progress,  t.redelivered,
          t.each_size, t.each_index,   t.completions, t.reason,       t.exit_code};
}
JobColumns ColumnsOf(const JobRecord& j) {
  return {j.state,      j.started_at, j.completed_at, j.failed_at, j.delete_at, j.position,
          j.task_count, j.progress,   j.result,       j.error,     j.steps,     j.ending};
}

// A row's move that core/states.h does not allow, described.
template <typename State>
std::optional<std::string> MoveProblem(const std::string& id, State from, State to) {
  if (from == to || CanReach(from, to)) return std::nullopt;
  constexpr bool kJob = std::is_same_v<State, JobState>;
  return fmt::format("{} {} moves from {} to {}, which core/states.h does not allow",
                     kJob ? "job" : "task", id, ToString(from), ToString(to));
}

// Debug builds stop at a move the state machines do not allow: a bug in a rule.
void AssertMove(const std::optional<std::string>& problem) {
#ifndef NDEBUG
  if (problem) {
    std::fprintf(stderr, "flow: %s\n", problem->c_str());
    std::abort();
  }
#else
  (void)problem;
#endif
}

// A step of SplitMix64: a small, good, portable stream of 64-bit numbers.
std::uint64_t SplitMix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

bool HasAttemptsLeft(const TaskRecord& failed) {
  return failed.task.retry && failed.task.retry->attempts < failed.task.retry->limit;
}

Duration RetryJitter(const TaskRecord& row) {
  if (!row.task.retry || !row.task.retry->jitter || row.task.retry->jitter->count() <= 0) {
    return Duration::zero();
  }
  const auto span = static_cast<std::uint64_t>(row.task.retry->jitter->count()) + 1;
  return Duration(static_cast<std::int64_t>(Fnv("jitter/" + row.id) % span));
}

TimePoint RetryDueAt(const TaskRecord& row) {
  if (!row.task.retry || row.task.retry->attempts <= 0) return row.created_at;
  return row.created_at + RetryDelay(*row.task.retry, row.task.retry->attempts) + RetryJitter(row);
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
    case TaskKind::kSwitch:  // stepped, not counted (kinds/sequence.cc)
    case TaskKind::kLoop:
    case TaskKind::kHandler:
    case TaskKind::kWait:
      return 0;
  }
  return 0;
}

Decider::Decider(View view, TimePoint now) : view_(std::move(view)), now_(now) {
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
  // Templates see the decision's time and a source seeded by the view: the same input
  // gives the same effects.
  std::string at = FormatTime(now);  // now() as the expression language gives it: seconds
  options_.now = [text = at.substr(0, 19) + "Z"] { return text; };
  random_ = view_.random_seed != 0 ? view_.random_seed : Fnv("random/" + view_.id_seed);
  options_.random = [this](std::int64_t n) {
    return static_cast<std::int64_t>(SplitMix(random_) % static_cast<std::uint64_t>(n));
  };
}

void Decider::On(const Submit& e) {
  JobRecord& job = NewJob(e.job);
  StartJobRule(job.id);
}

void Decider::On(const StartJob& e) {
  JobRecord* job = J(e.job_id);
  if (job == nullptr || job->state != JobState::kPending) return;
  StartJobRule(e.job_id);
}

void Decider::On(const Cancel& e) {
  JobRecord* job = J(e.job_id);
  if (job == nullptr) return;
  if (!IsActive(job->state)) {
    after_.push_back(Refused{fmt::format("job is {}", ToString(job->state))});
    return;
  }
  Unpause(*job);  // a cancel is not held: its cleanup runs (pause.cc)
  FailJob(e.job_id, "", JobState::kCancelled);
}

void Decider::On(const Restart& e) {
  JobRecord* job = J(e.job_id);
  if (job == nullptr) return;
  if (job->state != JobState::kFailed && job->state != JobState::kCancelled) {
    after_.push_back(Refused{fmt::format(
        "only a FAILED or CANCELLED job can be restarted; this one is {}", ToString(job->state))});
    return;
  }
  if (!job->steps.empty()) return RestartGraph(*job);
  if (job->position > job->task_count) {
    after_.push_back(Refused{"the job has no more tasks to run"});
    return;
  }
  RunAgain(*job);
  int position = std::clamp(job->position, 1, job->task_count);
  DispatchNew(Def(*job).tasks[static_cast<std::size_t>(position - 1)], job->id, "", position,
              json::object(), 0);
}

void Decider::On(const JobTimedOut& e) {
  JobRecord* job = J(e.job_id);
  // A job whose cleanup runs has its outcome already (its timeout was disarmed).
  if (job == nullptr || !IsActive(job->state) || job->ending) return;
  FailJob(e.job_id, "job timed out after " + FormatDuration(e.timeout), JobState::kFailed);
}

void Decider::On(const StepFailed& e) {
  JobRecord* job = J(e.job_id);
  if (job == nullptr || !IsActive(job->state)) return;
  FailJob(e.job_id, "the engine could not take a step: " + e.error, JobState::kFailed);
}

// Once, at the end: the rows move into their effects.
std::vector<Effect> Decider::Effects() {
  HoldStarts();
  // Copies taken before the rows move: a start carries a leaf row (small), a finished
  // job its row (once per job).
  std::vector<Effect> starts = Starts();
  std::vector<Effect> finished;
  for (const std::string& id : finished_jobs_) finished.push_back(JobFinished{view_.jobs.at(id)});
  std::vector<Effect> out;
  out.reserve(job_order_.size() + task_order_.size() + cancels_.size() + after_.size() +
              starts.size() + finished.size() + follow_.size());
  RowEffects(out);
  std::vector<Effect> notices = Notices(out);
  // The rows made after a cancel of their job are written after the CancelActives.
  std::vector<Effect> late;
  if (!late_tasks_.empty()) {
    auto is_late = [&](const Effect& e) {
      const auto* c = std::get_if<CreateTask>(&e);
      return c != nullptr && late_tasks_.contains(c->row.id);
    };
    std::vector<Effect> early;
    early.reserve(out.size());
    for (Effect& e : out) (is_late(e) ? late : early).push_back(std::move(e));
    out = std::move(early);
  }
  for (Effect& e : notices) out.push_back(std::move(e));
  for (CancelActive& c : cancels_) out.push_back(std::move(c));
  for (Effect& e : late) out.push_back(std::move(e));
  for (Effect& e : after_) out.push_back(std::move(e));
  for (Effect& e : starts) out.push_back(std::move(e));
  for (Effect& e : finished) out.push_back(std::move(e));
  for (Event& e : follow_) out.push_back(FollowUp{std::move(e)});
  return out;
}

std::vector<Effect> Decider::Starts() const {
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
  return starts;
}

// Every touched row that changed, moved into its write; in debug builds every move is
// checked against core/states.h.
void Decider::RowEffects(std::vector<Effect>& out) {
  for (const std::string& id : job_order_) {
    JobRecord& row = view_.jobs.at(id);
    if (new_jobs_.contains(id)) {
      out.push_back(CreateJob{std::move(row)});
      continue;
    }
    bool context = context_changed_.contains(id);
    const JobColumns& was = job_columns_.at(id);
    if (context || !(was == ColumnsOf(row))) {
      AssertMove(MoveProblem(id, was.state, row.state));
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
      AssertMove(MoveProblem(id, was.state, row.state));
      bool state = was.state != row.state;
      bool progress = was.progress != row.progress;
      out.push_back(UpdateTask{std::move(row), state, progress});
    }
  }
}

// A row the decision may change: its columns are noted the first time.
TaskRecord* Decider::T(const std::string& id) {
  auto it = view_.tasks.find(id);
  if (it == view_.tasks.end()) return nullptr;
  if (!new_tasks_.contains(id) && !task_columns_.contains(id)) {
    task_columns_.emplace(id, ColumnsOf(it->second));
    task_order_.push_back(id);
  }
  return &it->second;
}

JobRecord* Decider::J(const std::string& id) {
  auto it = view_.jobs.find(id);
  if (it == view_.jobs.end()) return nullptr;
  if (!new_jobs_.contains(id) && !job_columns_.contains(id)) {
    job_columns_.emplace(id, ColumnsOf(it->second));
    job_order_.push_back(id);
  }
  return &it->second;
}

// A job's definition: shared by the view when the shell read the row without it.
const Job& Decider::Def(const JobRecord& job) const {
  auto it = view_.definitions.find(job.id);
  return it != view_.definitions.end() && it->second != nullptr ? *it->second : job.job;
}

JobRecord& Decider::NewJob(JobRecord row) {
  std::string id = row.id;
  new_jobs_.insert(id);
  job_order_.push_back(id);
  return view_.jobs.insert_or_assign(id, std::move(row)).first->second;
}

TaskRecord& Decider::NewTask(TaskRecord row) {
  std::string id = row.id;
  new_tasks_.insert(id);
  if (cancelled_jobs_.contains(row.job_id)) late_tasks_.insert(id);
  task_order_.push_back(id);
  return view_.tasks.insert_or_assign(id, std::move(row)).first->second;
}

// The seed's time, then the row's number in this decision, then a hash of both: the
// rows one decision makes sort in the order it made them (a loop's row before its first
// child: the API lists a job's rows by position, creation time and id).
std::string Decider::MakeId() {
  std::string seed = view_.id_seed.size() >= 12 ? view_.id_seed : std::string(32, '0');
  ++made_;
  std::uint64_t h = Fnv(fmt::format("{}/{}", seed, made_));
  return fmt::format("{}{:04x}{:016x}", seed.substr(0, 12), std::min(made_, 0xffff), h);
}

// A task of `job_id` ran: the job, and the jobs whose sub-job it is, as far as the view
// holds them, are RUNNING from SCHEDULED.
void Decider::Ran(const std::string& job_id) {
  for (JobRecord* job = J(job_id); job != nullptr && job->state == JobState::kScheduled;) {
    job->state = JobState::kRunning;
    const TaskRecord* parent = job->parent_id.empty() ? nullptr : T(job->parent_id);
    job = parent == nullptr ? nullptr : J(parent->job_id);
  }
}

void Decider::Arm(const JobRecord& job, TimePoint from) {
  after_.push_back(ArmJobTimeout{job.id, *Def(job).timeout, from + *Def(job).timeout});
}

void Decider::StartJobRule(const std::string& job_id) {
  JobRecord& job = *J(job_id);
  job.state = JobState::kScheduled;
  // A sub-job started while its parent's job is PAUSED is paused with it.
  if (const TaskRecord* parent = job.parent_id.empty() ? nullptr : T(job.parent_id);
      parent != nullptr && Held(parent->job_id)) {
    job.state = JobState::kPaused;
  }
  job.started_at = now_;
  if (Def(job).timeout) Arm(job, now_);
  if (Def(job).tasks.empty()) {
    job.position = 1;  // past its (no) tasks
    CompleteJob(job_id);
    return;
  }
  if (IsGraph(Def(job).mode, Def(job).tasks)) return StartGraph(job_id);
  DispatchNew(Def(job).tasks[0], job_id, "", 1, json::object(), 0);
}

void Decider::Advance(const std::string& job_id, int position) {
  JobRecord* job = J(job_id);
  if (job == nullptr || !IsGoing(job->state) || job->position != position) return;
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

void Decider::CompleteJob(const std::string& job_id) {
  JobRecord& job = *J(job_id);
  if (!IsGoing(job.state) || job.ending) return;
  std::string result;
  if (!Def(job).output.empty()) {
    auto value = expr::EvaluateTemplateValue(Def(job).output, Ctx(job), options_);
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
  job.result = result;
  job.progress = 100;
  if (StartCleanup(job, JobState::kCompleted)) return;
  EndJob(job_id, JobState::kCompleted);
}

void Decider::FailJob(const std::string& job_id, const std::string& error, JobState state) {
  JobRecord& job = *J(job_id);
  if (!IsActive(job.state)) return;
  if (job.ending) {
    // A cancel, or an engine failure, while the job's cleanup runs: it stops there.
    if (state == JobState::kFailed) AddError(job, SanitizeUtf8(error));
    CancelRows(job_id, "");
    return EndJob(job_id, state);
  }
  if (state == JobState::kFailed) job.error = SanitizeUtf8(error);
  std::replace(job.steps.begin(), job.steps.end(), step::kRunning, step::kCancelled);
  CancelRows(job_id, "");
  if (StartCleanup(job, state)) return;
  EndJob(job_id, state);
}

void Decider::EndJob(const std::string& job_id, JobState state) {
  JobRecord& job = *J(job_id);
  job.ending.reset();
  job.state = state;
  if (state == JobState::kCompleted) {
    job.completed_at = now_;
    job.progress = 100;
    if (Def(job).auto_delete) job.delete_at = now_ + Def(job).auto_delete->after;
  } else if (state == JobState::kFailed) {
    job.failed_at = now_;
  }
  Ended(job);
  // A sub-job's end ends the task that started it; a cancelled one was cancelled with
  // (or by) its parent, which decides for itself.
  if (job.parent_id.empty() || state == JobState::kCancelled) return;
  TaskRecord* parent = T(job.parent_id);
  if (parent == nullptr) return;
  if (state == JobState::kCompleted) {
    std::string result = job.result;
    if (Finish(*parent, TaskState::kCompleted, result, "", "", std::nullopt)) TaskDone(parent->id);
  } else {
    std::string error = job.error;
    if (Finish(*parent, TaskState::kFailed, "", error, "", std::nullopt)) TaskFailed(parent->id);
  }
}

void Decider::Ended(const JobRecord& job) {
  if (Def(job).timeout) after_.push_back(DisarmJobTimeout{job.id});
  finished_jobs_.push_back(job.id);
}

bool Decider::Finish(TaskRecord& t, TaskState state, const std::string& result,
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

bool Decider::Finish(TaskRecord& t, TaskState state, const std::string& result,
                     const std::string& error, const std::string& from_node,
                     std::optional<TimePoint> started_at) {
  return Finish(t, state, result, error, from_node, started_at, now_);
}

// The job's context: its row's, or the view's shared one until this decision changes it.
const json& Decider::Ctx(const JobRecord& job) const {
  if (context_changed_.contains(job.id)) return job.context;
  auto it = view_.contexts.find(job.id);
  return it != view_.contexts.end() && it->second != nullptr ? *it->second : job.context;
}

// The context of `job`, owned by its row from now on, to be changed.
json& Decider::MutableCtx(JobRecord& job) {
  if (!context_changed_.contains(job.id)) {
    auto it = view_.contexts.find(job.id);
    if (it != view_.contexts.end() && it->second != nullptr) job.context = *it->second;
    context_changed_.insert(job.id);
  }
  return job.context;
}

// What a task's templates see: the loop variables `extra` over the job's context (no
// copy of the context, however big).
expr::Vars Decider::VarsFor(const JobRecord& job, const json& extra) const {
  return expr::Vars(Ctx(job), extra);
}

// A new row's links, its id made and its creation now (its definition is the caller's).
TaskRecord Decider::MakeRow(const std::string& job_id, const std::string& parent_id, int position,
                            int each_index, TaskState state) {
  TaskRecord row;
  row.id = MakeId();
  row.job_id = job_id;
  row.parent_id = parent_id;
  row.position = position;
  row.each_index = each_index;
  row.state = state;
  row.created_at = now_;
  return row;
}

// A new row for definition `def`, taken as far as it goes now.
void Decider::DispatchNew(Task def, const std::string& job_id, const std::string& parent_id,
                          int position, const json& extra, int index) {
  const JobRecord& job = *J(job_id);
  TaskRecord row = MakeRow(job_id, parent_id, position, index, TaskState::kPending);
  ApplyDefaults(Def(job).defaults, def);
  row.task = std::move(def);
  // A composite's children, and a fallback of the task, see the scope it was made in.
  if (row.task.IsComposite() || row.task.on_failure) row.scope = extra;
  std::string id = NewTask(std::move(row)).id;
  Dispatch(id, extra, /*evaluated=*/false);
}

void Decider::FailNow(TaskRecord& t, const std::string& error) {
  t.state = TaskState::kFailed;
  t.failed_at = now_;
  t.error = SanitizeUtf8(error);
  if (KindOf(t.task) == TaskKind::kRunnable) t.reason = FailReason::kError;
  TaskFailed(t.id);
}

// Takes a row (PENDING or CREATED) as far as its kind takes it now.
void Decider::Dispatch(const std::string& id, const json& extra, bool evaluated) {
  TaskRecord& t = *T(id);
  const JobRecord& job = *J(t.job_id);
  if (!evaluated) {
    const expr::Vars vars = VarsFor(job, extra);
    if (!t.task.if_expr.empty()) {
      auto runs = EvaluateCondition(t.task.if_expr, vars, options_);
      if (!runs.ok()) return FailNow(t, runs.status().message());
      if (!*runs) {
        t.state = TaskState::kSkipped;
        t.completed_at = now_;
        return TaskDone(id);
      }
    }
    Status ok = EvaluateTask(t.task, vars, options_);
    if (!ok.ok()) return FailNow(t, ok.message());
  }
  if (t.task.pause_before) PauseBefore(t);
  switch (KindOf(t.task)) {
    case TaskKind::kRunnable:
      return Queue(t);
    case TaskKind::kParallel:
      return DispatchParallel(id, extra);
    case TaskKind::kEach:
      return DispatchEach(id, extra);
    case TaskKind::kSubJob:
      return DispatchSubJob(id);
    case TaskKind::kSwitch:
      return DispatchSwitch(id, extra);
    case TaskKind::kLoop:
      return DispatchLoop(id, extra);
    case TaskKind::kHandler:
      return DispatchHandler(id);
    case TaskKind::kWait:
      return DispatchWait(id);
  }
}

void Decider::TaskDone(const std::string& id) {
  TaskRecord& t = *T(id);
  if (IsJobHandler(t.task)) return JobHandlerEnded(id);
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
  if (t.parent_id.empty()) {
    if (!job->steps.empty()) return GraphTaskEnded(t);
    return Advance(t.job_id, t.position);
  }
  if (TaskRecord* parent = T(t.parent_id); parent != nullptr && !IsTerminal(parent->state)) {
    if (!parent->steps.empty()) return GraphTaskEnded(t);  // a graph parallel's
    if (parent->task.loop) LoopChildDone(*parent, t);
    // A fallback's result is its last task's.
    if (parent->task.handles != Handles::kNone && t.state == TaskState::kCompleted) {
      parent->result = t.result;
    }
  }
  ChildDone(t.parent_id);
}

void Decider::ChildDone(const std::string& parent_id) {
  TaskRecord* p = T(parent_id);
  if (p == nullptr || IsTerminal(p->state)) return;
  ++p->completions;
  if (p->task.switch_ || p->task.loop || p->task.handles != Handles::kNone) {
    return NextStep(parent_id);
  }
  if (KindOf(p->task) == TaskKind::kEach && running_[parent_id] > 0) --running_[parent_id];
  if (p->completions >= Expected(*p)) {
    if (Finish(*p, TaskState::kCompleted, "", "", "", std::nullopt)) TaskDone(parent_id);
    return;
  }
  if (KindOf(p->task) == TaskKind::kEach) FillSlots(parent_id);
}

void Decider::Retry(const std::string& failed_id) {
  const TaskRecord& failed = *T(failed_id);
  TaskRecord next = MakeRow(failed.job_id, failed.parent_id, failed.position, failed.each_index,
                            TaskState::kPending);
  next.task = failed.task;
  next.task.retry->attempts = failed.task.retry->attempts + 1;
  next.scope = failed.scope;  // what a fallback of it sees (a runnable keeps no other)
  TaskRecord& row = NewTask(std::move(next));
  if (RetryDueAt(row) <= now_) return Queue(row);
  after_.push_back(StartAt{row.id, RetryDueAt(row)});
}

bool Decider::RetryOrFail(const std::string& failed_id) {
  const TaskRecord& failed = *T(failed_id);
  const JobRecord* job = J(failed.job_id);
  if (failed.state == TaskState::kFailed && job != nullptr && IsActive(job->state) &&
      HasAttemptsLeft(failed) && RetryIsFor(failed)) {
    Retry(failed_id);
    return true;
  }
  TaskFailed(failed_id);
  return false;
}

void Decider::TaskFailed(const std::string& id) {
  TaskRecord& t = *T(id);
  if (IsJobHandler(t.task)) return JobHandlerEnded(id);
  // A task's final failure runs its onFailure in its place (not a fallback's own).
  if (t.state == TaskState::kFailed && t.task.on_failure && t.task.handles == Handles::kNone &&
      StartFallback(id)) {
    return;
  }
  // An optional task's final failure: what it is in goes on, as after a task done (which
  // sets no var for a FAILED row).
  if (t.task.optional && t.state == TaskState::kFailed) return TaskDone(id);
  std::string error = ErrorGoingOn(t);
  if (t.parent_id.empty()) {
    const JobRecord* job = J(t.job_id);
    if (job != nullptr && !job->steps.empty()) return GraphTaskFailed(t, error);
    return FailJob(t.job_id, error, JobState::kFailed);
  }
  TaskRecord* parent = T(t.parent_id);
  if (parent == nullptr) return;
  // A graph parallel goes on: what needs the task is skipped, the rest runs.
  if (!parent->steps.empty() && !IsTerminal(parent->state)) return GraphTaskFailed(t, error);
  if (!Finish(*parent, TaskState::kFailed, "", error, "", std::nullopt)) return;
  // Fail fast: the group's other children are cancelled.
  CancelRows(parent->job_id, parent->id);
  TaskFailed(parent->id);
}

// The error (often the task's last output lines) goes up to the parent and the job, or to
// a fallback's tasks: its own secret values are hidden in it now.
std::string Decider::ErrorGoingOn(const TaskRecord& failed) {
  std::vector<std::string> secrets;
  AddSecretValues(failed.task, secrets);
  return RedactText(failed.error, secrets);
}

void Decider::AddError(JobRecord& job, const std::string& more) {
  job.error = job.error.empty() ? more : job.error + "; " + more;
}

bool Decider::Under(const TaskRecord& row, const std::string& ancestor) {
  for (const TaskRecord* r = &row; !r->parent_id.empty();) {
    if (r->parent_id == ancestor) return true;
    r = T(r->parent_id);
    if (r == nullptr) return false;
  }
  return false;
}

// Cancels the active rows of a job (below `under`): the rows this decision holds in
// the overlay, with what their cancel must tell; the stored rest in one CancelActive.
void Decider::CancelRows(const std::string& job_id, const std::string& under) {
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
    CancelledRow c{row.id, row.state, row.node_id, row.subjob_id, {}};
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
  cancels_.push_back(CancelActive{job_id, under, now_, {}});
  cancelled_jobs_.insert(job_id);
}

std::string_view NameOf(const Event& event) {
  static constexpr std::string_view kNames[] = {
      "Submit",       "StartJob",   "Started",      "Completed",  "Failed",    "WorkerCancelled",
      "TaskTimedOut", "Redelivery", "LeaseExpired", "Progress",   "Cancel",    "Restart",
      "JobTimedOut",  "RetryDue",   "FillEach",     "StepFailed", "Published", "PublishRefused",
      "TaskOverdue",  "Pause",      "Resume",       "Rerun",      "Skip",      "Signal"};
  static_assert(std::size(kNames) == std::variant_size_v<Event>, "every Event needs its name");
  return kNames[event.index()];
}

std::optional<std::string> BadMove(const View& before, const std::vector<Effect>& effects) {
  for (const Effect& effect : effects) {
    if (const auto* job = std::get_if<UpdateJob>(&effect)) {
      auto was = before.jobs.find(job->row.id);
      if (was == before.jobs.end()) continue;
      if (auto problem = MoveProblem(job->row.id, was->second.state, job->row.state)) {
        return problem;
      }
    } else if (const auto* task = std::get_if<UpdateTask>(&effect)) {
      std::optional<TaskState> from;
      if (auto was = before.tasks.find(task->row.id); was != before.tasks.end()) {
        from = was->second.state;
      }
      for (const auto& [each_id, children] : before.next_created) {
        for (const TaskRecord& child : children) {
          if (child.id == task->row.id) from = child.state;
        }
      }
      if (!from) continue;
      if (auto problem = MoveProblem(task->row.id, *from, task->row.state)) return problem;
    }
  }
  return std::nullopt;
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

#include "coordinator/scheduler.h"

#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>

#include "base/log.h"
#include "core/document.h"
#include "core/expr.h"
#include "core/job_decode.h"
#include "core/record_json.h"
#include "core/redact.h"

namespace baton {
namespace {

using nlohmann::json;

bool IsTerminal(TaskState s) {
  return s == TaskState::kCompleted || s == TaskState::kFailed || s == TaskState::kCancelled ||
         s == TaskState::kSkipped;
}

bool IsActive(TaskState s) { return !IsTerminal(s); }

bool IsActive(JobState s) {
  return s == JobState::kPending || s == JobState::kScheduled || s == JobState::kRunning;
}

bool IsDone(TaskState s) { return s == TaskState::kCompleted || s == TaskState::kSkipped; }

// Binds a loop variable in a shared evaluation context for a scope, and restores what
// was there (an outer loop's variable, a context entry, or nothing) when it ends. The
// context is built once for all the children of a composite: a copy per child cost the
// whole context (every input, secret and output) per child.
class Binding {
 public:
  Binding(json& vars, std::string name) : vars_(vars), name_(std::move(name)) {
    if (auto it = vars_.find(name_); it != vars_.end()) saved_ = std::move(*it);
  }
  ~Binding() {
    if (saved_) {
      vars_[name_] = std::move(*saved_);
    } else {
      vars_.erase(name_);
    }
  }
  Binding(const Binding&) = delete;
  Binding& operator=(const Binding&) = delete;
  void Set(json value) { vars_[name_] = std::move(value); }

 private:
  json& vars_;
  std::string name_;
  std::optional<json> saved_;
};

// Releases a mutex the thread holds for a scope, and takes it again at its end.
class Unlocked {
 public:
  explicit Unlocked(std::mutex& mu) : mu_(mu) { mu_.unlock(); }
  ~Unlocked() { mu_.lock(); }
  Unlocked(const Unlocked&) = delete;
  Unlocked& operator=(const Unlocked&) = delete;

 private:
  std::mutex& mu_;
};

}  // namespace

Scheduler::Scheduler(Datastore& datastore, Broker& broker, Clock& clock, Timers& timers,
                     SchedulerOptions options)
    : datastore_(datastore), broker_(broker), clock_(clock), timers_(timers), options_(options) {
  if (options_.job_locker == nullptr) {
    own_locker_ = NewInProcessLocker();
    options_.job_locker = own_locker_.get();
  }
  if (options_.start_in_background) {
    starter_ = std::jthread([this](std::stop_token stop) { StarterLoop(std::move(stop)); });
  }
}

Scheduler::~Scheduler() {
  Stop();
  starter_.request_stop();
  if (starter_.joinable()) starter_.join();
}

void Scheduler::StarterLoop(std::stop_token stop) {
  for (;;) {
    std::vector<Submitted> stored_with_task;
    std::vector<Submitted> pending;
    {
      std::unique_lock lock(start_mu_);
      start_cv_.wait(lock, stop, [&] { return !to_start_.empty(); });
      // What is left stays for reconciling: PENDING jobs, and the unpublished first tasks
      // of RUNNING ones.
      if (stop.stop_requested()) return;
      // Everything queued: the first tasks stored with their jobs go out as one batch.
      for (Submitted& next : to_start_) {
        if (next.first) {
          stored_with_task.push_back(std::move(next));
        } else {
          pending.push_back(std::move(next));
        }
      }
      to_start_.clear();
    }
    if (!stored_with_task.empty()) PublishSubmitted(stored_with_task);
    for (const Submitted& job : pending) StartSubmitted(job.job_id, job.stored.get());
  }
}

void Scheduler::PublishSubmitted(std::vector<Submitted>& jobs) {
  // Neither the jobs' locks nor a read: every decision was taken (and stored) at submit,
  // and what may have happened since (a cancel) is settled by the rows' states, as for
  // any queued task.
  std::vector<TaskRecord*> rows;
  rows.reserve(jobs.size());
  std::lock_guard lock(mu_);
  for (Submitted& job : jobs) {
    if (job.timeout) ArmJobTimeout(job.job_id, *job.timeout, job.first->created_at);
    rows.push_back(&*job.first);
  }
  Status s = PublishStoredBatch(rows);
  if (!s.ok())
    log::Error("publishing submitted jobs' first tasks failed", {{"error", s.message()}});
}

void Scheduler::StartSubmitted(const std::string& job_id, const JobRecord* stored) {
  auto guard = LockJob(job_id);
  if (!guard.ok()) {
    // The datastore is unreachable: try again in a second (it stays PENDING meanwhile,
    // and reconciling would start it too).
    log::Error("starting a job failed; trying again",
               {{"job_id", job_id}, {"error", guard.status().message()}});
    timers_.Schedule(clock_.Now() + std::chrono::seconds(1), [this, job_id] {
      {
        std::lock_guard lock(start_mu_);
        to_start_.push_back(Submitted{job_id, std::nullopt, std::nullopt, nullptr});
      }
      start_cv_.notify_one();
    });
    return;
  }
  {
    std::lock_guard lock(mu_);
    Status started = FailTreeOnError(job_id, StartJob(job_id, stored));
    // Not pending any more: cancelled first, or started by a reconcile.
    if (!started.ok() && started.code() != StatusCode::kFailedPrecondition) {
      log::Error("starting a job failed", {{"job_id", job_id}, {"error", started.message()}});
    }
  }
  FlushNotifications();
}

void Scheduler::Stop() { stopping_.store(true, std::memory_order_relaxed); }
void Scheduler::Resume() { stopping_.store(false, std::memory_order_relaxed); }

bool Scheduler::ShouldYield(const std::string& job_id, const std::string& root) {
  if (stopping_.load(std::memory_order_relaxed)) return true;
  std::lock_guard lock(cancel_mu_);
  return cancelling_.contains(job_id) || cancelling_.contains(root);
}

void Scheduler::SetJobFinishedListener(std::function<void(const JobRecord&)> listener) {
  std::lock_guard lock(mu_);
  listener_ = std::move(listener);
}

Result<std::unique_ptr<Lock>> Scheduler::LockJob(const std::string& job_id) {
  auto root = RootOf(job_id);
  if (!root.ok()) return root.status();
  return options_.job_locker->Acquire("baton.job:" + *root, options_.lock_timeout);
}

Result<std::string> Scheduler::RootOf(const std::string& job_id) {
  // A job's top-level ancestor never changes, so it is cached.
  std::string id = job_id;
  std::string root;
  for (int depth = 0; root.empty(); ++depth) {
    if (depth > 100) return Internal("job " + job_id + ": its sub-jobs nest too deeply");
    {
      std::lock_guard lock(roots_mu_);
      if (auto it = roots_.find(id); it != roots_.end()) {
        root = it->second;
        break;
      }
    }
    auto job = datastore_.GetJob(id);
    if (!job.ok()) return job.status();
    if (job->parent_id.empty()) {
      root = id;
      break;
    }
    auto parent = datastore_.GetTask(job->parent_id);
    if (!parent.ok()) return parent.status();
    id = parent->job_id;
  }
  std::lock_guard lock(roots_mu_);
  if (roots_.size() >= 100000) roots_.clear();  // bounded; refilled on demand
  roots_[job_id] = root;
  return root;
}

Result<std::string> Scheduler::JobOfTask(const std::string& task_id, const std::string& known) {
  if (!known.empty()) return known;
  auto task = datastore_.GetTask(task_id);
  if (!task.ok()) return task.status();
  return task->job_id;
}

void Scheduler::FlushNotifications() {
  std::vector<JobRecord> finished;
  std::function<void(const JobRecord&)> listener;
  std::vector<std::string> drops;
  std::map<std::string, std::vector<std::string>> kills;
  bool trim = false;
  std::unique_lock flush(flush_mu_);
  {
    std::lock_guard lock(mu_);
    finished.swap(finished_);
    drops.swap(drops_);
    kills.swap(kills_);
    listener = listener_;
    std::swap(trim, trim_memory_);
  }
  // A big job has ended: glibc keeps what it freed (the job's definition, its rows'
  // copies, the answer to its waiting submission) in its arenas unless asked. After a
  // 5,000-step chain, 68 MB were held by an engine idle at 18 MB; 34 MB after a trim.
  // Once per big job, a little after its end (its answer is built after this).
  if (trim) timers_.Schedule(clock_.Now() + std::chrono::seconds(2), [] { malloc_trim(0); });
  auto tell = [&](const std::string& node, const std::vector<std::string>& ids) {
    constexpr std::size_t kPerMessage = 1000;
    for (std::size_t i = 0; i < ids.size(); i += kPerMessage) {
      CancelTask message;
      message.task_ids.assign(
          ids.begin() + static_cast<std::ptrdiff_t>(i),
          ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), i + kPerMessage)));
      Status s = broker_.Publish(CancelQueueFor(node), Encode(message));
      if (!s.ok()) {
        log::Error("telling a worker of cancelled tasks failed",
                   {{"node", node}, {"error", s.message()}});
      }
    }
  };
  if (!drops.empty()) {
    // Every worker heard from within the lease, and every worker about to be told to
    // kill a task: its kill frees a slot that a dropped task could take, and its
    // heartbeat may not be stored yet (a worker that has just started).
    std::set<std::string> told;
    auto nodes = datastore_.ActiveNodes(clock_.Now() - options_.node_lease);
    if (!nodes.ok()) {
      log::Error("listing workers to tell of cancelled tasks failed",
                 {{"error", nodes.status().message()}});
    } else {
      for (const NodeRecord& node : *nodes) {
        if (!node.queue.empty()) told.insert(node.id);  // a coordinator takes no tasks
      }
    }
    for (const auto& [node, ids] : kills) told.insert(node);
    for (const std::string& node : told) tell(node, drops);
  }
  for (const auto& [node, ids] : kills) tell(node, ids);
  flush.unlock();
  if (listener) {
    for (const auto& job : finished) listener(job);
  }
}

// ---------------------------------------------------------------------------- jobs

Result<JobRecord> Scheduler::Submit(const Job& job) {
  std::string id = NewId();
  {
    std::lock_guard lock(roots_mu_);
    roots_[id] = id;
  }
  // A job whose first task is runnable and runs now is stored started, with that task's
  // row, in one write (instead of one for the job, one to start it and one for the
  // task); the task is published after. A crash in between leaves a RUNNING job with an
  // unpublished row, which reconciling publishes. Other jobs are stored PENDING and
  // started by StartJob. Deciding needs neither the mutex nor the job's lock: no one
  // else knows the id yet.
  JobRecord record = NewJobRecord(job, "", id);
  std::optional<TaskRecord> first = FirstTaskAtSubmit(record, record.created_at);
  if (first) {
    record.state = JobState::kRunning;
    record.started_at = record.created_at;
  }
  auto store = [&] {
    return first ? datastore_.CreateJobWithTasks(record, {*first}) : datastore_.CreateJob(record);
  };
  if (options_.start_in_background) {
    // Stored durably before the answer; started (or its first task published) by the
    // starter thread — except a first task bound for a broker that keeps nothing: that
    // publish is a queue push, done here rather than by waking the starter for it. It
    // needs no mutex (PublishStored touches nothing the mutex guards) unless a timeout is
    // armed.
    BATON_RETURN_IF_ERROR(store());
    if (first && !options_.durable_broker) {
      if (record.job.timeout) {
        std::lock_guard lock(mu_);
        ArmJobTimeout(record.id, *record.job.timeout, record.created_at);
      }
      Status published = PublishStored(*first);
      if (!published.ok()) {
        log::Error("publishing a job's first task failed",
                   {{"job_id", record.id}, {"error", published.message()}});
      }
      return record;
    }
    {
      std::lock_guard lock(start_mu_);
      // A job stored PENDING is started with the row as stored, not read back: a big
      // one's definition and context would be decoded again.
      std::shared_ptr<const JobRecord> stored;
      if (!first) stored = std::make_shared<const JobRecord>(record);
      to_start_.push_back(
          Submitted{record.id, std::move(first), record.job.timeout, std::move(stored)});
    }
    start_cv_.notify_one();
    return record;
  }
  auto guard = LockJob(id);
  if (!guard.ok()) return guard.status();
  {
    std::lock_guard lock(mu_);
    BATON_RETURN_IF_ERROR(store());
    Status started;
    if (first) {
      if (record.job.timeout) ArmJobTimeout(record.id, *record.job.timeout, record.created_at);
      started = PublishStored(*first);
    } else {
      started = FailTreeOnError(record.id, StartJob(record.id, &record));
    }
    if (!started.ok())
      log::Error("starting a job failed", {{"job_id", record.id}, {"error", started.message()}});
  }
  FlushNotifications();
  return record;
}

JobRecord Scheduler::NewJobRecord(const Job& job, const std::string& parent_task_id,
                                  std::string id) const {
  JobRecord record;
  record.id = id.empty() ? NewId() : std::move(id);
  record.parent_id = parent_task_id;
  record.state = JobState::kPending;
  record.created_at = clock_.Now();
  record.job = job;
  record.task_count = static_cast<int>(job.tasks.size());
  record.position = 1;
  record.context = {{"inputs", job.inputs},
                    {"secrets", job.secrets},
                    {"tasks", json::object()},
                    {"job", {{"id", record.id}, {"name", job.name}}}};
  return record;
}

std::optional<TaskRecord> Scheduler::FirstTaskAtSubmit(const JobRecord& job, TimePoint now) const {
  if (job.job.tasks.empty() || job.job.tasks.front().IsComposite()) return std::nullopt;
  // As ScheduleNew and Dispatch would, for a runnable task.
  TaskRecord task;
  task.id = NewId();
  task.job_id = job.id;
  task.position = 1;
  task.created_at = now;
  task.task = job.job.tasks.front();
  ApplyDefaults(job.job.defaults, task.task);
  Vars vars = VarsFor(job, json::object());
  // Skipped, or failing evaluation: the general way records it.
  if (!task.task.if_expr.empty()) {
    auto runs = EvaluateCondition(task.task.if_expr, vars);
    if (!runs.ok() || !*runs) return std::nullopt;
  }
  if (!EvaluateTask(task.task, vars).ok()) return std::nullopt;
  ReadyToPublish(task, now);
  return task;
}

Result<JobRecord> Scheduler::CreateJob(const Job& job, const std::string& parent_task_id,
                                       std::string id) {
  JobRecord record = NewJobRecord(job, parent_task_id, std::move(id));
  BATON_RETURN_IF_ERROR(datastore_.CreateJob(record));
  return record;
}

Status Scheduler::StartJob(const std::string& job_id, const JobRecord* stored) {
  TimePoint now = clock_.Now();
  // The row's state alone (a big job's definition and context are neither decoded nor
  // written again: that held the datastore's writer, and so every other job's writes,
  // for seconds); the definition is the one just stored, or read outside the writer.
  BATON_RETURN_IF_ERROR(datastore_.UpdateJobState(job_id, [&](JobRecord& j) {
    if (j.state != JobState::kPending) return FailedPrecondition("job is not pending");
    j.state = JobState::kRunning;
    j.started_at = now;
    return Status::Ok();
  }));
  std::optional<JobRecord> loaded;
  if (stored == nullptr) {
    auto read = datastore_.GetJob(job_id);
    if (!read.ok()) return read.status();
    loaded = std::move(*read);
    stored = &*loaded;
  }
  const JobRecord& job = *stored;
  if (job.job.timeout) ArmJobTimeout(job_id, *job.job.timeout, now);
  if (job.job.tasks.empty()) return CompleteJob(job_id);
  return ScheduleNew(job, job.job.tasks[0], "", 1, json::object());
}

void Scheduler::ArmJobTimeout(const std::string& job_id, Duration timeout, TimePoint from) {
  job_timers_[job_id] =
      timers_.Schedule(from + timeout, [this, job_id, timeout] { JobTimedOut(job_id, timeout); });
}

void Scheduler::JobTimedOut(const std::string& job_id, Duration timeout) {
  auto guard = LockJob(job_id);
  {
    std::lock_guard lock(mu_);
    if (!guard.ok()) {
      if (guard.status().code() == StatusCode::kNotFound) return;
      log::Warn("a job timed out but its lock cannot be taken; trying again in a second",
                {{"job_id", job_id}, {"error", guard.status().message()}});
      job_timers_[job_id] =
          timers_.Schedule(clock_.Now() + std::chrono::seconds(1),
                           [this, job_id, timeout] { JobTimedOut(job_id, timeout); });
      return;
    }
    job_timers_.erase(job_id);
    Status s = FailJob(job_id, "job timed out after " + FormatDuration(timeout), JobState::kFailed);
    if (!s.ok() && s.code() != StatusCode::kFailedPrecondition) {
      log::Error("failing a timed-out job failed", {{"job_id", job_id}, {"error", s.message()}});
    }
  }
  FlushNotifications();
}

Scheduler::Vars Scheduler::VarsFor(const JobRecord& job, const Vars& extra) const {
  Vars vars = job.context;
  for (auto it = extra.begin(); it != extra.end(); ++it) vars[it.key()] = it.value();
  return vars;
}

Status Scheduler::AdvanceJob(const std::string& job_id, int position) {
  TimePoint now = clock_.Now();
  Advance advance;
  BATON_RETURN_IF_ERROR(datastore_.UpdateJob(job_id, [&](JobRecord& j) {
    AdvanceInPlace(j, j.job, position, now, advance);
    return Status::Ok();
  }));
  return AfterAdvance(job_id, position, std::move(advance));
}

void Scheduler::AdvanceInPlace(JobRecord& j, const Job& def, int position, TimePoint now,
                               Advance& advance) const {
  // What scheduling the next step needs, not a copy of the whole definition (a job of
  // hundreds of tasks would be copied at every step). After the last step the job is
  // completed in this same update.
  if (j.state != JobState::kRunning || j.position != position) return;
  if (position >= j.task_count) {
    advance.completion = CompleteInPlace(j, def, now);
    return;
  }
  advance.advanced = true;
  j.position = position + 1;
  j.progress = 100.0 * position / std::max(1, j.task_count);
  advance.job.id = j.id;
  advance.job.context = j.context;
  advance.job.job.defaults = def.defaults;
  advance.next = def.tasks[static_cast<std::size_t>(position)];
}

Status Scheduler::AfterAdvance(const std::string& job_id, int position, Advance advance) {
  if (advance.advanced) {
    return ScheduleNew(advance.job, std::move(advance.next), "", position + 1, json::object());
  }
  return AfterCompletion(job_id, std::move(advance.completion));
}

Scheduler::Completion Scheduler::CompleteInPlace(JobRecord& j, const Job& def,
                                                 TimePoint now) const {
  Completion completion;
  // The output is evaluated on the row as it is stored, in the update that completes it.
  std::string result;
  if (!def.output.empty()) {
    auto value = expr::EvaluateTemplateValue(def.output, VarsFor(j, json::object()));
    if (!value.ok()) {
      completion.output_error = value.status().message();
      return completion;
    }
    result = expr::ToText(*value);
    if (InvalidUtf8At(result) != std::string_view::npos) {
      completion.output_error = std::string(kNotUtf8);
      return completion;
    }
  }
  j.state = JobState::kCompleted;
  j.completed_at = now;
  j.result = result;
  j.progress = 100;
  if (def.auto_delete) j.delete_at = now + def.auto_delete->after;
  completion.stored = j;
  return completion;
}

Status Scheduler::CompleteJob(const std::string& job_id, int position) {
  TimePoint now = clock_.Now();
  Completion completion;
  BATON_RETURN_IF_ERROR(datastore_.UpdateJob(job_id, [&](JobRecord& j) {
    if (j.state != JobState::kRunning) return Status::Ok();
    if (position > 0 && j.position != position) return Status::Ok();
    completion = CompleteInPlace(j, j.job, now);
    return Status::Ok();
  }));
  return AfterCompletion(job_id, std::move(completion));
}

Status Scheduler::AfterCompletion(const std::string& job_id, Completion completion) {
  if (completion.output_error) {
    return FailJob(job_id, "output: " + *completion.output_error, JobState::kFailed);
  }
  if (!completion.stored) return Status::Ok();
  ForgetDefinition(job_id);
  if (auto it = job_timers_.find(job_id); it != job_timers_.end()) {
    timers_.Cancel(it->second);
    job_timers_.erase(it);
  }
  const JobRecord& stored = finished_.emplace_back(std::move(*completion.stored));
  if (!stored.parent_id.empty()) {
    std::string parent_id = stored.parent_id;
    std::string result = stored.result;
    TaskRecord parent;
    auto finished = Finish(parent_id, TaskState::kCompleted, result, "", &parent);
    if (!finished.ok()) return finished.status();
    if (*finished) return TaskDone(parent);
  }
  return Status::Ok();
}

Status Scheduler::FailJob(const std::string& job_id, const std::string& error, JobState state) {
  TimePoint now = clock_.Now();
  bool changed = false;
  JobRecord stored;
  // The row's state alone: its definition and context (a big job's inputs) are neither
  // decoded nor written again, which held the datastore's writer for seconds.
  BATON_RETURN_IF_ERROR(datastore_.UpdateJobState(job_id, [&](JobRecord& j) {
    if (!IsActive(j.state)) return FailedPrecondition(fmt::format("job is {}", ToString(j.state)));
    j.state = state;
    if (state == JobState::kFailed) {
      j.failed_at = now;
      j.error = SanitizeUtf8(error);  // stored and shown: it must be text
    }
    changed = true;
    stored = j;
    return Status::Ok();
  }));
  if (!changed) return Status::Ok();
  ForgetDefinition(job_id);
  if (auto it = job_timers_.find(job_id); it != job_timers_.end()) {
    timers_.Cancel(it->second);
    job_timers_.erase(it);
  }
  BATON_RETURN_IF_ERROR(CancelActiveTasks(job_id));
  finished_.push_back(stored);
  // A failed sub-job fails the task that started it; a cancelled one was cancelled with
  // (or by) its parent, which decides for itself.
  if (!stored.parent_id.empty() && state == JobState::kFailed) {
    TaskRecord parent;
    auto finished = Finish(stored.parent_id, TaskState::kFailed, "", error, &parent);
    if (!finished.ok()) return finished.status();
    if (*finished) return TaskFailed(parent);
  }
  return Status::Ok();
}

Status Scheduler::Cancel(const std::string& job_id) {
  // A long decision about this job (a wide each being expanded) sees the request and
  // gives up, so the cancel takes the lock at once instead of after it.
  {
    std::lock_guard lock(cancel_mu_);
    cancelling_.insert(job_id);
  }
  struct Done {
    Scheduler& s;
    const std::string& id;
    ~Done() {
      std::lock_guard lock(s.cancel_mu_);
      s.cancelling_.erase(s.cancelling_.find(id));
    }
  } done{*this, job_id};
  auto guard = LockJob(job_id);
  if (!guard.ok()) return guard.status();
  Status s;
  {
    std::lock_guard lock(mu_);
    s = FailJob(job_id, "", JobState::kCancelled);
  }
  FlushNotifications();
  return s;
}

Status Scheduler::Restart(const std::string& job_id) {
  auto guard = LockJob(job_id);
  if (!guard.ok()) return guard.status();
  Status s;
  {
    std::lock_guard lock(mu_);
    JobRecord job;
    s = datastore_.UpdateJob(job_id, [&](JobRecord& j) {
      if (j.state != JobState::kFailed && j.state != JobState::kCancelled) {
        return FailedPrecondition(
            fmt::format("only a FAILED or CANCELLED job can be restarted; "
                        "this one is {}",
                        ToString(j.state)));
      }
      j.state = JobState::kRunning;
      j.error.clear();
      j.failed_at.reset();
      j.completed_at.reset();
      job = j;
      return Status::Ok();
    });
    if (s.ok()) {
      if (job.job.timeout) ArmJobTimeout(job.id, *job.job.timeout, clock_.Now());
      auto index = static_cast<std::size_t>(std::clamp(job.position, 1, job.task_count) - 1);
      s = FailTreeOnError(job_id, ScheduleNew(job, job.job.tasks[index], "",
                                              static_cast<int>(index) + 1, json::object()));
    }
  }
  FlushNotifications();
  return s;
}

// ---------------------------------------------------------------------------- tasks

Status Scheduler::ScheduleNew(const JobRecord& job, Task def, const std::string& parent_id,
                              int position, const Vars& extra, int index, Vars* vars) {
  TaskRecord task;
  task.each_index = index;
  task.id = NewId();
  task.job_id = job.id;
  task.parent_id = parent_id;
  task.position = position;
  task.state = TaskState::kPending;
  task.created_at = clock_.Now();
  ApplyDefaults(job.job.defaults, def);
  task.task = std::move(def);
  // Only a composite row's children need the loop variables later.
  if (task.task.IsComposite()) task.scope = extra;
  return Dispatch(job, std::move(task), extra, /*evaluated=*/false, /*create=*/true, vars);
}

Status Scheduler::Dispatch(const JobRecord& job, TaskRecord task, const Vars& extra, bool evaluated,
                           bool create, Vars* shared_vars) {
  TimePoint now = clock_.Now();
  auto store = [&](TaskRecord& t) -> Status {
    if (create) {
      create = false;
      return datastore_.CreateTask(t);
    }
    TaskRecord copy = t;
    return datastore_.UpdateTask(t.id, [&](TaskRecord& row) {
      row = copy;
      return Status::Ok();
    });
  };
  auto fail_now = [&](const std::string& error) -> Status {
    task.state = TaskState::kFailed;
    task.failed_at = now;
    task.error = SanitizeUtf8(error);
    BATON_RETURN_IF_ERROR(store(task));
    return TaskFailed(task);
  };
  // The evaluation context, built at most once here (or given by the caller).
  std::optional<Vars> own_vars;
  auto vars = [&]() -> Vars& {
    if (shared_vars != nullptr) return *shared_vars;
    if (!own_vars) own_vars = VarsFor(job, extra);
    return *own_vars;
  };

  if (!evaluated) {
    if (!task.task.if_expr.empty()) {
      auto runs = EvaluateCondition(task.task.if_expr, vars());
      if (!runs.ok()) return fail_now(runs.status().message());
      if (!*runs) {
        task.state = TaskState::kSkipped;
        task.completed_at = now;
        BATON_RETURN_IF_ERROR(store(task));
        return TaskDone(task);
      }
    }
    Status evaluated_ok = EvaluateTask(task.task, vars());
    if (!evaluated_ok.ok()) return fail_now(evaluated_ok.message());
  }

  Task& def = task.task;
  if (def.parallel) {
    task.state = TaskState::kRunning;
    task.started_at = now;
    BATON_RETURN_IF_ERROR(store(task));
    RememberShape(task);
    // The common group, runnable tasks that all run now: stored in one write and then
    // published, instead of a write per child.
    std::optional<std::vector<TaskRecord>> runnable = RunnableChildren(job, task, vars(), now);
    if (runnable) {
      BATON_RETURN_IF_ERROR(datastore_.CreateTasks(*runnable));
      std::vector<TaskRecord*> publish;
      publish.reserve(runnable->size());
      for (TaskRecord& child : *runnable) publish.push_back(&child);
      BATON_RETURN_IF_ERROR(PublishStoredBatch(publish));
      return Status::Ok();
    }
    for (std::size_t i = 0; i < def.parallel->tasks.size(); ++i) {
      std::uint64_t finishes = finishes_;
      BATON_RETURN_IF_ERROR(ScheduleNew(job, def.parallel->tasks[i], task.id, task.position, extra,
                                        static_cast<int>(i), &vars()));
      // Only a row that finished at once (a child failed or was skipped) can have ended
      // the group: read it again then, not after every child.
      if (finishes_ == finishes) continue;
      auto parent = datastore_.GetTask(task.id);
      if (!parent.ok()) return parent.status();
      if (IsTerminal(parent->state)) break;  // a child failed at once: fail-fast
    }
    return Status::Ok();
  }
  if (def.each) {
    std::string var = def.each->var.empty() ? "item" : def.each->var;
    int limit = def.each->concurrency > 0 ? def.each->concurrency : std::numeric_limits<int>::max();
    std::vector<TaskRecord> children;
    std::vector<std::size_t> start_now;
    std::vector<std::size_t> dispatch_now;
    std::optional<std::string> failure;
    Status stored;
    Status yielded;
    {
      // Evaluating the list and the children, and storing them, touches nothing the
      // mutex guards, and the job's lock keeps this job's other decisions out: the other
      // jobs' decisions go on meanwhile, however big this each is.
      Unlocked unlocked(mu_);
      Vars& context = vars();
      auto list = expr::EvaluateTemplateValue(def.each->list, context);
      if (!list.ok()) {
        failure = "each.list: " + list.status().message();
      } else if (!list->is_array()) {
        failure = fmt::format("each.list: expected a list, got {}",
                              SanitizeUtf8(expr::ToText(*list).substr(0, 100)));
      } else if (!IsUtf8(*list)) {
        // An item would reach a child's row (its scope, its fields) and not be storable.
        failure = fmt::format("each.list: {}", kNotUtf8);
      } else {
        task.each_size = static_cast<int>(list->size());
      }
      // Children are evaluated now, while their item is known, and held as CREATED until
      // a slot frees up. The context is the same for all but the loop variable.
      std::size_t size = failure ? 0 : list->size();
      children.reserve(size);
      Binding item(context, var);
      auto root = RootOf(job.id);
      for (std::size_t i = 0; i < size; ++i) {
        // A cancel of this job, or a stop, does not wait for thousands of children: the
        // each gives up before storing anything (a stop leaves the step for reconciling
        // to take again).
        if (i % 64 == 0 && ShouldYield(job.id, root.ok() ? *root : job.id)) {
          yielded = stopping_.load(std::memory_order_relaxed)
                        ? Unavailable("the scheduler is stopping")
                        : FailedPrecondition("the job is being cancelled");
          break;
        }
        json binding = {{"index", i}, {"value", std::move((*list)[i])}};
        TaskRecord child;
        child.id = NewId();
        child.job_id = job.id;
        child.parent_id = task.id;
        child.position = task.position;
        child.state = TaskState::kCreated;
        child.created_at = now;
        child.each_index = static_cast<int>(i);
        child.task = *def.each->task;
        ApplyDefaults(job.job.defaults, child.task);
        // A composite child is dispatched later (StartNextEachChild, or below): its
        // children are evaluated then, with its item.
        if (child.task.IsComposite()) {
          child.scope = extra;
          child.scope[var] = binding;
        }
        item.Set(std::move(binding));
        if (!child.task.if_expr.empty()) {
          auto runs = EvaluateCondition(child.task.if_expr, context);
          if (!runs.ok()) {
            failure = fmt::format("each: {}", runs.status().message());
          } else if (!*runs) {
            child.state = TaskState::kSkipped;
            child.completed_at = now;
          }
          child.task.if_expr.clear();
        }
        if (!failure && child.state == TaskState::kCreated) {
          // A composite child's own fields (name, var, a subjob's inputs) too; its
          // children are evaluated when it is dispatched.
          Status s = EvaluateTask(child.task, context);
          if (!s.ok()) failure = fmt::format("each: {}", s.message());
        }
        children.push_back(std::move(child));
        if (failure) break;
      }
      if (yielded.ok() && !failure && !children.empty()) {
        // The children that start at once (up to `concurrency`) are stored ready to
        // publish, with the rest, in one write; the parent counts them as started. One
        // row at a time (read, count on the parent, publish, mark) cost four round trips
        // per child. A composite child is not published: it is stored CREATED and
        // dispatched by its kind once the rows are stored (a crash in between leaves it
        // CREATED, for reconciling to start).
        for (std::size_t i = 0; i < children.size(); ++i) {
          TaskRecord& child = children[i];
          int started = static_cast<int>(start_now.size() + dispatch_now.size());
          if (child.state != TaskState::kCreated || started >= limit) continue;
          if (child.task.IsComposite()) {
            dispatch_now.push_back(i);
          } else {
            ReadyToPublish(child, now);
            start_now.push_back(i);
          }
        }
        task.state = TaskState::kRunning;
        task.started_at = now;
        task.each_index = static_cast<int>(start_now.size() + dispatch_now.size());
        stored = store(task);
        if (stored.ok()) stored = datastore_.CreateTasks(children);
      }
    }
    BATON_RETURN_IF_ERROR(yielded);
    if (failure) return fail_now(*failure);
    BATON_RETURN_IF_ERROR(stored);
    if (children.empty()) {
      task.state = TaskState::kCompleted;
      task.started_at = now;
      task.completed_at = now;
      BATON_RETURN_IF_ERROR(store(task));
      return TaskDone(task);
    }
    RememberShape(task);
    int skipped = 0;
    {
      auto& waiting = waiting_children_[task.id];
      waiting.clear();
      std::size_t next_dispatch = 0;
      for (std::size_t i = 0; i < children.size(); ++i) {
        const TaskRecord& child = children[i];
        if (next_dispatch < dispatch_now.size() && dispatch_now[next_dispatch] == i) {
          ++next_dispatch;
        } else if (child.state == TaskState::kCreated) {
          waiting.push_back(child.id);
        } else if (IsTerminal(child.state)) {
          ++skipped;
        }
      }
    }
    std::vector<TaskRecord*> publish;
    publish.reserve(start_now.size());
    for (std::size_t i : start_now) publish.push_back(&children[i]);
    BATON_RETURN_IF_ERROR(PublishStoredBatch(publish));
    for (std::size_t i : dispatch_now) {
      std::uint64_t finishes = finishes_;
      Vars scope = children[i].scope;
      children[i].state = TaskState::kPending;
      Binding item(vars(), var);
      item.Set(scope[var]);
      BATON_RETURN_IF_ERROR(Dispatch(job, std::move(children[i]), scope, /*evaluated=*/true,
                                     /*create=*/false, &vars()));
      // A child that failed at once fails the each, which cancels the rest: stop then.
      if (finishes_ == finishes) continue;
      auto parent = datastore_.GetTask(task.id);
      if (!parent.ok()) return parent.status();
      if (IsTerminal(parent->state)) return Status::Ok();
    }
    for (int i = 0; i < skipped; ++i) BATON_RETURN_IF_ERROR(ChildDone(task.id));
    return Status::Ok();
  }
  if (def.subjob) {
    Job child;
    child.name = def.subjob->name;
    child.description = def.subjob->description;
    child.tasks = def.subjob->tasks;
    child.inputs = def.subjob->inputs;
    child.secrets = def.subjob->secrets;
    child.output = def.subjob->output;
    child.auto_delete = def.subjob->auto_delete;
    child.webhooks = def.subjob->webhooks;
    bool detached = def.subjob->detached;
    auto created = CreateJob(child, detached ? "" : task.id);
    if (!created.ok()) return fail_now("subjob: " + created.status().message());
    task.subjob_id = created->id;
    task.started_at = now;
    if (detached) {
      task.state = TaskState::kCompleted;
      task.completed_at = now;
      BATON_RETURN_IF_ERROR(store(task));
      BATON_RETURN_IF_ERROR(StartJob(created->id, &*created));
      return TaskDone(task);
    }
    task.state = TaskState::kRunning;
    BATON_RETURN_IF_ERROR(store(task));
    return StartJob(created->id, &*created);
  }
  // A new runnable row is stored once, already in the state publishing gives it.
  return PublishTask(task, create);
}

namespace {

// Workers run runnable tasks only: a composite row on its way to one is a path that
// skipped Dispatch, and would "complete" there as an empty script.
Status ForWorkers(const TaskRecord& task) {
  if (!task.task.IsComposite()) return Status::Ok();
  return Internal(fmt::format("task {} is composite and cannot be sent to a worker", task.id));
}

OutgoingMessage MessageFor(const TaskRecord& task) {
  return {task.task.queue.empty() ? std::string(kQueueDefault) : task.task.queue,
          ToJson(task).dump(-1, ' ', false, json::error_handler_t::replace),
          task.task.priority.value_or(0)};
}

}  // namespace

std::optional<std::vector<TaskRecord>> Scheduler::RunnableChildren(const JobRecord& job,
                                                                   const TaskRecord& parent,
                                                                   const Vars& vars,
                                                                   TimePoint now) const {
  const std::vector<Task>& defs = parent.task.parallel->tasks;
  if (std::any_of(defs.begin(), defs.end(), [](const Task& t) { return t.IsComposite(); })) {
    return std::nullopt;
  }
  std::vector<TaskRecord> children;
  children.reserve(defs.size());
  for (std::size_t i = 0; i < defs.size(); ++i) {
    TaskRecord child;
    child.each_index = static_cast<int>(i);
    child.id = NewId();
    child.job_id = job.id;
    child.parent_id = parent.id;
    child.position = parent.position;
    child.created_at = now;
    child.task = defs[i];
    ApplyDefaults(job.job.defaults, child.task);
    // As Dispatch would: a child skipped or failing at once takes the general way.
    if (!child.task.if_expr.empty()) {
      auto runs = EvaluateCondition(child.task.if_expr, vars);
      if (!runs.ok() || !*runs) return std::nullopt;
    }
    if (!EvaluateTask(child.task, vars).ok()) return std::nullopt;
    ReadyToPublish(child, now);
    children.push_back(std::move(child));
  }
  return children;
}

Status Scheduler::PublishTask(TaskRecord& task, bool create) {
  BATON_RETURN_IF_ERROR(ForWorkers(task));
  TimePoint now = clock_.Now();
  auto publish = [&] {
    OutgoingMessage message = MessageFor(task);
    return broker_.Publish(message.queue, std::move(message.body), message.priority);
  };
  auto refused = [&](const Status& s) {
    log::Warn("the broker refused a task; publishing it again later",
              {{"task_id", task.id}, {"error", s.message()}});
    RepublishLater(task.id, task.job_id);
    return Status::Ok();
  };
  if (options_.durable_broker) {
    // SCHEDULED means "in the broker": the row is marked only once the broker confirmed
    // the message, so a crash in between leaves it PENDING and reconciling publishes it.
    task.state = TaskState::kPending;
    if (create) BATON_RETURN_IF_ERROR(datastore_.CreateTask(task));
    Status published = publish();
    if (!published.ok()) return refused(published);
    task.state = TaskState::kScheduled;
    task.scheduled_at = now;
    // A waiting each child is still CREATED in the store; anything else has started.
    return datastore_.MarkScheduled({task.id}, now);
  }
  task.state = TaskState::kScheduled;
  task.scheduled_at = now;
  if (create) {
    BATON_RETURN_IF_ERROR(datastore_.CreateTask(task));
  } else {
    BATON_RETURN_IF_ERROR(datastore_.UpdateTask(task.id, [&](TaskRecord& row) {
      row.state = TaskState::kScheduled;
      row.scheduled_at = now;
      return Status::Ok();
    }));
  }
  Status published = publish();
  if (published.ok()) return Status::Ok();
  BATON_RETURN_IF_ERROR(datastore_.UpdateTask(task.id, [&](TaskRecord& row) {
    if (row.state == TaskState::kScheduled) row.state = TaskState::kPending;
    return Status::Ok();
  }));
  return refused(published);
}

void Scheduler::ReadyToPublish(TaskRecord& row, TimePoint now) const {
  if (options_.durable_broker) {
    row.state = TaskState::kPending;  // SCHEDULED once the broker confirmed it
  } else {
    row.state = TaskState::kScheduled;
    row.scheduled_at = now;
  }
}

Status Scheduler::PublishStoredBatch(const std::vector<TaskRecord*>& rows) {
  if (rows.size() <= 1) return rows.empty() ? Status::Ok() : PublishStored(*rows[0]);
  std::vector<OutgoingMessage> batch;
  batch.reserve(rows.size());
  for (const TaskRecord* row : rows) {
    BATON_RETURN_IF_ERROR(ForWorkers(*row));
    batch.push_back(MessageFor(*row));
  }
  if (!broker_.PublishBatch(std::move(batch)).ok()) {
    // Some may be in the broker already; one at a time, each refusal is handled as it
    // always is (a message published twice is run once: workers and OnStarted see to it).
    for (TaskRecord* row : rows) BATON_RETURN_IF_ERROR(PublishStored(*row));
    return Status::Ok();
  }
  if (!options_.durable_broker) return Status::Ok();
  const TimePoint now = clock_.Now();
  std::vector<std::string> ids;
  ids.reserve(rows.size());
  for (const TaskRecord* row : rows) ids.push_back(row->id);
  BATON_RETURN_IF_ERROR(datastore_.MarkScheduled(ids, now));
  for (TaskRecord* row : rows) {
    row->state = TaskState::kScheduled;
    row->scheduled_at = now;
  }
  return Status::Ok();
}

Status Scheduler::PublishStored(TaskRecord& task) {
  // Durable broker: the row is PENDING and becomes SCHEDULED once the broker confirmed.
  if (options_.durable_broker) return PublishTask(task, false);
  BATON_RETURN_IF_ERROR(ForWorkers(task));
  OutgoingMessage message = MessageFor(task);
  Status published = broker_.Publish(message.queue, std::move(message.body), message.priority);
  if (published.ok()) return Status::Ok();
  BATON_RETURN_IF_ERROR(datastore_.UpdateTask(task.id, [&](TaskRecord& row) {
    if (row.state == TaskState::kScheduled) row.state = TaskState::kPending;
    return Status::Ok();
  }));
  log::Warn("the broker refused a task; publishing it again later",
            {{"task_id", task.id}, {"error", published.message()}});
  RepublishLater(task.id, task.job_id);
  return Status::Ok();
}

void Scheduler::RepublishLater(const std::string& task_id, const std::string& job_id) {
  timers_.Schedule(clock_.Now() + options_.republish_delay,
                   [this, task_id, job_id] { PublishPending(task_id, job_id); });
}

void Scheduler::PublishPending(const std::string& task_id, const std::string& job_id) {
  auto guard = LockJob(job_id);
  std::lock_guard lock(mu_);
  if (!guard.ok()) {
    if (guard.status().code() != StatusCode::kNotFound) RepublishLater(task_id, job_id);
    return;
  }
  auto task = datastore_.GetTask(task_id);
  if (!task.ok() || task->state != TaskState::kPending) return;  // cancelled or published
  Status s = FailTreeOnError(task->job_id, PublishTask(*task, false));
  if (!s.ok())
    log::Error("publishing a task failed", {{"task_id", task_id}, {"error", s.message()}});
}

std::deque<std::string>& Scheduler::WaitingChildren(const std::string& parent_id) {
  if (auto it = waiting_children_.find(parent_id); it != waiting_children_.end()) return it->second;
  if (waiting_children_.size() >= 10000) waiting_children_.clear();  // a cache: refilled on demand
  auto& queue = waiting_children_[parent_id];
  auto children = datastore_.ChildTasks(parent_id);
  if (!children.ok()) return queue;
  std::vector<const TaskRecord*> created;
  for (const TaskRecord& child : *children) {
    if (child.state == TaskState::kCreated) created.push_back(&child);
  }
  std::sort(created.begin(), created.end(),
            [](const TaskRecord* a, const TaskRecord* b) { return a->each_index < b->each_index; });
  for (const TaskRecord* child : created) queue.push_back(child->id);
  return queue;
}

Result<bool> Scheduler::StartNextEachChild(const std::string& parent_id) {
  std::deque<std::string>& waiting = WaitingChildren(parent_id);
  while (!waiting.empty()) {
    std::string child_id = waiting.front();
    waiting.pop_front();
    auto child = datastore_.GetTask(child_id);
    if (!child.ok()) return child.status();
    // Started by another coordinator (or cancelled) since this list was made.
    if (child->state != TaskState::kCreated) continue;
    BATON_RETURN_IF_ERROR(datastore_.UpdateTask(parent_id, [](TaskRecord& p) {
      ++p.each_index;
      return Status::Ok();
    }));
    // A runnable child was evaluated with its each: it is only published, and needs
    // nothing of its job (reading the job, context and all, per child cost the whole
    // context per child). A composite one evaluates its children with the context.
    JobRecord job;
    job.id = child->job_id;
    if (child->task.IsComposite()) {
      auto loaded = datastore_.GetJob(child->job_id);
      if (!loaded.ok()) return loaded.status();
      job = std::move(*loaded);
    }
    child->state = TaskState::kPending;
    Vars scope = child->scope;
    BATON_RETURN_IF_ERROR(
        Dispatch(job, std::move(*child), scope, /*evaluated=*/true, /*create=*/false));
    return true;
  }
  return false;
}

bool Scheduler::FinishInPlace(TaskRecord& t, TaskState state, const std::string& result,
                              const std::string& error, TimePoint now, const std::string& from_node,
                              std::optional<TimePoint> started_at) {
  if (IsTerminal(t.state)) return false;
  if (!from_node.empty()) {
    if (!t.node_id.empty() && t.node_id != from_node) return false;  // a duplicate
    t.node_id = from_node;
    if (!t.started_at) t.started_at = started_at.value_or(now);
  }
  t.state = state;
  if (state == TaskState::kFailed) {
    t.failed_at = now;
    t.error = SanitizeUtf8(error);  // stored and shown: it must be text
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

Result<bool> Scheduler::Finish(const std::string& task_id, TaskState state,
                               const std::string& result, const std::string& error, TaskRecord* out,
                               const std::string& from_node, std::optional<TimePoint> started_at) {
  TimePoint now = clock_.Now();
  bool changed = false;
  Status s = datastore_.UpdateTask(task_id, [&](TaskRecord& t) {
    changed = FinishInPlace(t, state, result, error, now, from_node, started_at);
    if (changed && out != nullptr) *out = t;
    return Status::Ok();
  });
  if (!s.ok()) return s;
  if (changed) ++finishes_;
  return changed;
}

Result<std::shared_ptr<const Job>> Scheduler::DefinitionOf(const std::string& job_id) {
  if (auto it = definitions_.find(job_id); it != definitions_.end()) return it->second;
  auto job = datastore_.GetJob(job_id);
  if (!job.ok()) return job.status();
  auto def = std::make_shared<const Job>(std::move(job->job));
  // Kept only while the job runs: a late report about a finished job leaves nothing.
  if (!IsActive(job->state)) return def;
  if (definitions_.size() >= 1000) definitions_.clear();  // a cache: refilled on demand
  definitions_[job_id] = def;
  return def;
}

void Scheduler::ForgetDefinition(const std::string& job_id) {
  auto it = definitions_.find(job_id);
  if (it == definitions_.end()) return;
  if (it->second->tasks.size() >= kTrimAfterTasks) trim_memory_ = true;
  definitions_.erase(it);
}

Status Scheduler::CompleteTask(const std::string& task_id, const std::string& job_id,
                               const std::string& result, const std::string& from_node,
                               std::optional<TimePoint> started_at) {
  TimePoint now = clock_.Now();
  bool changed = false;
  TaskRecord task;
  Advance advance;
  // A job's definition never changes once submitted: it is read once per running job
  // (and dropped when the job ends), and the write below touches only the job's state
  // and context. Reading, comparing and writing back the definition at every step made
  // a step of a 4,000-task chain cost twice one of a 250-task chain.
  auto def = DefinitionOf(job_id);
  if (!def.ok()) return def.status();
  // One write for the row and its job: a top-level task's job moves on (or, after its
  // last step, completes) with it; a child's job changes only for its `var`. As
  // Finish, then TaskDone's job updates, would — in two or three writes.
  BATON_RETURN_IF_ERROR(datastore_.UpdateTaskAndJobState(
      task_id,
      [&](TaskRecord& t, bool& update_job) {
        changed = FinishInPlace(t, TaskState::kCompleted, result, "", now, from_node, started_at);
        if (!changed) return Status::Ok();
        task = t;
        update_job = t.parent_id.empty() || !t.task.var.empty();
        return Status::Ok();
      },
      [&](JobRecord& j) {
        if (!task.task.var.empty()) j.context["tasks"][task.task.var] = SanitizeUtf8(task.result);
        if (task.parent_id.empty()) AdvanceInPlace(j, **def, task.position, now, advance);
        return Status::Ok();
      }));
  if (!changed) return Status::Ok();
  ++finishes_;
  if (!task.parent_id.empty()) return ChildDone(task.parent_id);
  return AfterAdvance(task.job_id, task.position, std::move(advance));
}

Status Scheduler::TaskDone(const TaskRecord& task) {
  if (task.state == TaskState::kCompleted && !task.task.var.empty()) {
    std::string var = task.task.var;
    std::string result = SanitizeUtf8(task.result);
    BATON_RETURN_IF_ERROR(datastore_.UpdateJob(task.job_id, [&](JobRecord& j) {
      j.context["tasks"][var] = result;
      return Status::Ok();
    }));
  }
  if (task.parent_id.empty()) return AdvanceJob(task.job_id, task.position);
  return ChildDone(task.parent_id);
}

void Scheduler::RememberShape(const TaskRecord& composite) {
  CompositeShape shape;
  if (composite.task.parallel) {
    shape.expected = static_cast<int>(composite.task.parallel->tasks.size());
  } else if (composite.task.each) {
    shape.each = true;
    shape.expected = composite.each_size;
  } else {
    return;
  }
  if (shapes_.size() >= 10000) shapes_.clear();  // a cache: refilled on demand
  shapes_[composite.id] = shape;
}

Result<Scheduler::CompositeShape> Scheduler::ShapeOf(const std::string& parent_id) {
  if (auto it = shapes_.find(parent_id); it != shapes_.end()) return it->second;
  auto parent = datastore_.GetTask(parent_id);
  if (!parent.ok()) return parent.status();
  RememberShape(*parent);
  if (auto it = shapes_.find(parent_id); it != shapes_.end()) return it->second;
  return Internal("task " + parent_id + " has children but is neither a parallel nor an each");
}

void Scheduler::ForgetComposite(const std::string& parent_id) {
  waiting_children_.erase(parent_id);
  shapes_.erase(parent_id);
}

Status Scheduler::ChildDone(const std::string& parent_id) {
  // Counted in the row without reading it: the parent's definition (a parallel of
  // hundreds of tasks) would be decoded, copied, compared and written back per child.
  auto counted = datastore_.AddCompletion(parent_id);
  if (!counted.ok()) return counted.status();
  if (!counted->has_value()) return Status::Ok();  // the parent has finished already
  auto shape = ShapeOf(parent_id);
  if (!shape.ok()) return shape.status();
  if (**counted >= shape->expected) {
    ForgetComposite(parent_id);
    TaskRecord done;
    auto finished = Finish(parent_id, TaskState::kCompleted, "", "", &done);
    if (!finished.ok()) return finished.status();
    if (*finished) return TaskDone(done);
    return Status::Ok();
  }
  if (shape->each) return StartNextEachChild(parent_id).status();
  return Status::Ok();
}

Status Scheduler::TaskFailed(const TaskRecord& task) {
  // The error (often the task's last output lines) goes up to the parent and the job,
  // whose views (job lists) do not read this row: its own values are hidden in it now.
  std::vector<std::string> secrets;
  AddSecretValues(task.task, secrets);
  const std::string error = RedactText(task.error, secrets);
  if (task.parent_id.empty()) return FailJob(task.job_id, error, JobState::kFailed);
  TaskRecord parent;
  auto finished = Finish(task.parent_id, TaskState::kFailed, "", error, &parent);
  if (!finished.ok()) return finished.status();
  if (!*finished) return Status::Ok();
  ForgetComposite(parent.id);
  // Fail fast: the group's other children are cancelled.
  BATON_RETURN_IF_ERROR(CancelTaskTree(parent));
  return TaskFailed(parent);
}

Status Scheduler::CancelRows(const std::string& job_id, const std::string& under) {
  // One write for all of them: a row at a time cost a commit (an fsync) and a decode of
  // its definition per row, thousands for a wide each, all under mu_.
  auto cancelled = datastore_.CancelTasks(job_id, under, clock_.Now());
  if (!cancelled.ok()) return cancelled.status();
  for (const CancelledTask& row : *cancelled) {
    ForgetComposite(row.id);
    ++finishes_;
    if (!row.subjob_id.empty()) {
      Status s = FailJob(row.subjob_id, "", JobState::kCancelled);
      if (!s.ok() && s.code() != StatusCode::kFailedPrecondition) return s;
    }
    if (!row.node_id.empty()) {
      kills_[row.node_id].push_back(row.id);
    } else if (row.was == TaskState::kRunning) {
      // Running on no node: a composite (parallel, each, sub-job), whose rows below were
      // cancelled in the same write.
    } else if (row.was != TaskState::kCreated || options_.durable_broker) {
      // Possibly in a queue: every worker is told not to start it. (A CREATED row is in a
      // queue only with a durable broker, whose confirm comes before the row is marked.)
      drops_.push_back(row.id);
    }
  }
  return Status::Ok();
}

Status Scheduler::CancelTaskTree(const TaskRecord& parent) {
  return CancelRows(parent.job_id, parent.id);
}

Status Scheduler::CancelActiveTasks(const std::string& job_id) { return CancelRows(job_id, ""); }

Status Scheduler::Retry(const TaskRecord& failed) {
  TaskRecord next;
  next.id = NewId();
  next.job_id = failed.job_id;
  next.parent_id = failed.parent_id;
  next.position = failed.position;
  next.state = TaskState::kPending;
  next.created_at = clock_.Now();
  next.task = failed.task;
  next.task.retry->attempts = failed.task.retry->attempts + 1;
  next.each_index = failed.each_index;
  BATON_RETURN_IF_ERROR(datastore_.CreateTask(next));
  Duration delay = RetryDelay(*next.task.retry, next.task.retry->attempts);
  if (delay <= Duration::zero()) return PublishTask(next, false);
  timers_.Schedule(clock_.Now() + delay,
                   [this, id = next.id, job_id = next.job_id] { PublishPending(id, job_id); });
  return Status::Ok();
}

Status Scheduler::Redeliver(const TaskRecord& lost) {
  if (lost.redelivered >= options_.max_redeliveries) {
    TaskRecord failed = lost;
    failed.error =
        fmt::format("{} (re-queued {} times already: giving up)", lost.error, lost.redelivered);
    (void)datastore_.UpdateTask(lost.id, [&](TaskRecord& t) {
      t.error = failed.error;
      return Status::Ok();
    });
    return TaskFailed(failed);
  }
  TaskRecord next = lost;
  next.id = NewId();
  next.state = TaskState::kPending;
  next.created_at = clock_.Now();
  next.scheduled_at.reset();
  next.started_at.reset();
  next.failed_at.reset();
  next.error.clear();
  next.node_id.clear();
  next.progress = 0;
  next.redelivered = lost.redelivered + 1;
  return PublishTask(next, true);
}

// ---------------------------------------------------------------------------- events

namespace {

// Errors worth delivering the event again for; the rest are logged and dropped.
bool MayPass(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

Status Handled(const Status& s, const char* what, const std::string& task_id) {
  if (s.ok() || s.code() == StatusCode::kNotFound || s.code() == StatusCode::kFailedPrecondition) {
    return Status::Ok();
  }
  if (MayPass(s)) return s;
  log::Error(what, {{"task_id", task_id}, {"error", s.message()}});
  return Status::Ok();
}

}  // namespace

Status Scheduler::FailTreeOnError(const std::string& job_id, const Status& error) {
  if (error.ok() || MayPass(error) || error.code() == StatusCode::kNotFound ||
      error.code() == StatusCode::kFailedPrecondition) {
    return error;
  }
  auto root = RootOf(job_id);
  const std::string& target = root.ok() ? *root : job_id;
  log::Error("a step of a job failed to be taken; failing the job",
             {{"job_id", target}, {"error", error.message()}});
  Status failed =
      FailJob(target, "the engine could not take a step: " + error.message(), JobState::kFailed);
  if (!failed.ok() && failed.code() != StatusCode::kFailedPrecondition) {
    log::Error("failing a job whose step failed failed too",
               {{"job_id", target}, {"error", failed.message()}});
    return failed;
  }
  return Status::Ok();
}

Status Scheduler::OnStarted(const TaskStarted& event) {
  bool stop_it = false;
  // One read-modify-write decides and records. It needs neither the job's lock nor the
  // scheduler's mutex: it reads and changes this row alone, and every decision that
  // looks at a RUNNING or SCHEDULED row (cancel, outcome, lease expiry) changes it by a
  // read-modify-write too, so the row's own lock orders them either way round.
  Status s = datastore_.UpdateTask(event.task_id, [&](TaskRecord& t) {
    bool elsewhere = !t.node_id.empty() && t.node_id != event.node_id;
    if (IsTerminal(t.state) || (t.state == TaskState::kRunning && elsewhere)) {
      // A start heard after the same node reported the task done (two queues, two
      // threads) has nothing left to stop. (A row failed by an expired lease still has
      // its node: that one may still run it, so it is told.)
      stop_it = !(t.state == TaskState::kCompleted && t.node_id == event.node_id);
      return Status::Ok();
    }
    // A waiting each child is still CREATED in the store while its publish is confirmed.
    if (t.state != TaskState::kScheduled && t.state != TaskState::kPending &&
        t.state != TaskState::kCreated) {
      return Status::Ok();
    }
    t.state = TaskState::kRunning;
    t.started_at = event.at;
    // Started before its publish was recorded (a durable broker's confirm is on its way).
    if (!t.scheduled_at) t.scheduled_at = event.at;
    t.node_id = event.node_id;
    return Status::Ok();
  });
  if (stop_it && !event.node_id.empty()) {
    // Cancelled while it waited in the queue, or a second delivery of a task that runs
    // elsewhere or has finished (a message the broker delivered twice): stop it where
    // it runs now. Through kills_, after the drops its cancel decided (taken under mu_
    // with the rows it cancelled, this one among them): this kill frees a slot, which
    // a sibling dropped by the same cancel must not take before its worker heard.
    {
      std::lock_guard lock(mu_);
      kills_[event.node_id].push_back(event.task_id);
    }
    FlushNotifications();
  }
  return Handled(s, "recording a start failed", event.task_id);
}

Status Scheduler::OnFinished(const TaskFinished& event) {
  auto job_id = JobOfTask(event.task_id, event.job_id);
  if (!job_id.ok())
    return Handled(job_id.status(), "handling a task outcome failed", event.task_id);
  auto guard = LockJob(*job_id);
  if (!guard.ok()) return Handled(guard.status(), "handling a task outcome failed", event.task_id);
  Status s;
  {
    std::lock_guard lock(mu_);
    TaskRecord task;
    const std::string& node = event.node_id;
    if (event.outcome == TaskFinished::Outcome::kCompleted) {
      s = CompleteTask(event.task_id, *job_id, event.result, node, event.started_at);
    } else if (event.outcome == TaskFinished::Outcome::kCancelled) {
      auto finished = Finish(event.task_id, TaskState::kCancelled, "", event.error, &task, node,
                             event.started_at);
      s = finished.status();
    } else if (event.outcome == TaskFinished::Outcome::kHandedBack) {
      auto finished =
          Finish(event.task_id, TaskState::kFailed, "", event.error, &task, node, event.started_at);
      if (!finished.ok()) {
        s = finished.status();
      } else if (*finished) {
        auto job = datastore_.GetJob(task.job_id);
        s = job.ok() && IsActive(job->state) ? Redeliver(task) : Status::Ok();
      }
    } else {
      auto finished =
          Finish(event.task_id, TaskState::kFailed, "", event.error, &task, node, event.started_at);
      if (!finished.ok()) {
        s = finished.status();
      } else if (*finished) {
        const auto& retry = task.task.retry;
        auto job = datastore_.GetJob(task.job_id);
        bool job_active = job.ok() && IsActive(job->state);
        if (job_active && retry && retry->attempts < retry->limit) {
          s = Retry(task);
        } else {
          s = TaskFailed(task);
        }
      }
    }
    s = FailTreeOnError(*job_id, s);
  }
  FlushNotifications();
  return Handled(s, "handling a task outcome failed", event.task_id);
}

Status Scheduler::OnProgress(const TaskProgress& event) {
  // Two plain row updates, each atomic in the datastore: no job lock needed.
  std::lock_guard lock(mu_);
  double p = std::clamp(event.progress, 0.0, 100.0);
  TaskRecord task;
  Status s = datastore_.UpdateTask(event.task_id, [&](TaskRecord& t) {
    if (IsTerminal(t.state)) return Status::Ok();
    t.progress = p;
    task = t;
    return Status::Ok();
  });
  if (!s.ok() || task.id.empty() || !task.parent_id.empty()) {
    return Handled(s, "recording progress failed", event.task_id);
  }
  // The state fields only: a big job's context is not rewritten at every report.
  s = datastore_.UpdateJobState(task.job_id, [&](JobRecord& j) {
    if (j.state != JobState::kRunning || j.position != task.position) return Status::Ok();
    j.progress = 100.0 * ((task.position - 1) + p / 100.0) / std::max(1, j.task_count);
    return Status::Ok();
  });
  return Handled(s, "recording progress failed", event.task_id);
}

// ---------------------------------------------------------------------------- recovery

Result<int> Scheduler::ExpireLeases(Duration lease) {
  int requeued = 0;
  TimePoint now = clock_.Now();
  auto nodes = datastore_.ActiveNodes(now - lease);
  if (!nodes.ok()) return nodes.status();
  std::set<std::string> alive;
  for (const NodeRecord& node : *nodes) alive.insert(node.id);
  auto running = datastore_.TasksInState({TaskState::kRunning});
  if (!running.ok()) return running.status();
  Status first_error;
  for (const TaskRecord& task : *running) {
    if (task.task.IsComposite() || task.node_id.empty() || alive.contains(task.node_id)) continue;
    // A task that started less than a lease ago may belong to a node whose first
    // heartbeat is still on its way.
    if (task.started_at && now - *task.started_at < lease) continue;
    auto guard = LockJob(task.job_id);
    if (!guard.ok()) {
      if (first_error.ok()) first_error = guard.status();
      continue;
    }
    std::lock_guard lock(mu_);
    std::string error =
        fmt::format("node {} stopped heartbeating while the task ran", task.node_id);
    TaskRecord lost;
    // Only while the row still names that node (another coordinator may have acted).
    auto finished = Finish(task.id, TaskState::kFailed, "", error, &lost, task.node_id);
    if (!finished.ok()) return finished.status();
    if (!*finished) continue;
    BATON_RETURN_IF_ERROR(FailTreeOnError(task.job_id, Redeliver(lost)));
    ++requeued;
  }
  FlushNotifications();
  if (!first_error.ok() && requeued == 0) return first_error;
  return requeued;
}

Status Scheduler::Reconcile(const std::set<std::string>& live_nodes) {
  Status result;
  auto jobs =
      datastore_.JobsInState({JobState::kPending, JobState::kScheduled, JobState::kRunning});
  if (!jobs.ok()) return jobs.status();
  for (const JobRecord& listed : *jobs) {
    auto guard = LockJob(listed.id);
    Status s = guard.status();
    if (guard.ok()) {
      std::lock_guard lock(mu_);
      // Read again under the lock: another coordinator may have moved it on.
      auto job = datastore_.GetJob(listed.id);
      s = job.status();
      if (job.ok() && IsActive(job->state))
        s = FailTreeOnError(listed.id, ReconcileJob(*job, live_nodes));
    }
    if (!s.ok() && s.code() != StatusCode::kNotFound) {
      log::Error("reconciling a job failed", {{"job_id", listed.id}, {"error", s.message()}});
      if (result.ok()) result = s;
    }
  }
  FlushNotifications();
  return result;
}

Status Scheduler::ReconcileJob(const JobRecord& job, const std::set<std::string>& live_nodes) {
  if (job.state == JobState::kPending) {
    // A sub-job is started by its parent's dispatch; a top-level one by Submit.
    return StartJob(job.id);
  }
  if (job.job.timeout && job.started_at && !job_timers_.contains(job.id)) {
    ArmJobTimeout(job.id, *job.job.timeout, *job.started_at);
  }
  auto rows = datastore_.JobTasks(job.id);
  if (!rows.ok()) return rows.status();

  // Runnable rows that were lost in flight.
  TimePoint now = clock_.Now();
  for (const TaskRecord& row : *rows) {
    if (row.task.IsComposite()) continue;
    if (row.state == TaskState::kPending ||
        (row.state == TaskState::kScheduled && !options_.durable_broker)) {
      // A retry still in its backoff waits for the rest of it.
      if (row.state == TaskState::kPending && row.task.retry && row.task.retry->attempts > 0) {
        TimePoint due = row.created_at + RetryDelay(*row.task.retry, row.task.retry->attempts);
        if (due > now) {
          timers_.Schedule(
              due, [this, id = row.id, job_id = row.job_id] { PublishPending(id, job_id); });
          continue;
        }
      }
      TaskRecord copy = row;
      BATON_RETURN_IF_ERROR(PublishTask(copy, false));
    } else if (row.state == TaskState::kRunning && !live_nodes.contains(row.node_id)) {
      std::string error = fmt::format("node {} stopped while the task ran", row.node_id);
      TaskRecord lost;
      auto finished = Finish(row.id, TaskState::kFailed, "", error, &lost);
      if (!finished.ok()) return finished.status();
      if (!*finished) continue;
      BATON_RETURN_IF_ERROR(Redeliver(lost));
    }
  }

  rows = datastore_.JobTasks(job.id);
  if (!rows.ok()) return rows.status();

  // Composite rows: recount from their children, finish or refill them. A child is
  // identified by its each_index (parallel children too); its latest row counts.
  for (const TaskRecord& row : *rows) {
    if (!row.task.IsComposite() || row.state != TaskState::kRunning) continue;
    if (row.task.subjob) continue;  // its child job is reconciled on its own
    auto children = datastore_.ChildTasks(row.id);
    if (!children.ok()) return children.status();
    std::map<int, const TaskRecord*> latest;
    for (const TaskRecord& child : *children) {
      const TaskRecord*& slot = latest[child.each_index];
      if (slot == nullptr || child.created_at > slot->created_at ||
          (child.created_at == slot->created_at && IsActive(child.state))) {
        slot = &child;
      }
    }
    int done = 0;
    int active = 0;
    const TaskRecord* failed = nullptr;
    std::vector<const TaskRecord*> waiting;
    for (const auto& [index, child] : latest) {
      if (IsDone(child->state)) {
        ++done;
      } else if (child->state == TaskState::kCreated) {
        waiting.push_back(child);
      } else if (IsActive(child->state)) {
        ++active;
      } else if (failed == nullptr) {
        failed = child;
      }
    }
    BATON_RETURN_IF_ERROR(datastore_.UpdateTask(row.id, [&](TaskRecord& p) {
      p.completions = done;
      return Status::Ok();
    }));
    if (failed != nullptr) {
      const auto& retry = failed->task.retry;
      if (failed->state == TaskState::kFailed && retry && retry->attempts < retry->limit) {
        BATON_RETURN_IF_ERROR(Retry(*failed));
      } else {
        BATON_RETURN_IF_ERROR(TaskFailed(*failed));
        continue;
      }
    }
    int expected =
        row.task.parallel ? static_cast<int>(row.task.parallel->tasks.size()) : row.each_size;
    if (done >= expected) {
      TaskRecord finished_row;
      auto finished = Finish(row.id, TaskState::kCompleted, "", "", &finished_row);
      if (!finished.ok()) return finished.status();
      if (*finished) BATON_RETURN_IF_ERROR(TaskDone(finished_row));
      continue;
    }
    if (row.task.each) {
      auto& queue = waiting_children_[row.id];
      queue.clear();
      for (const TaskRecord* w : waiting) queue.push_back(w->id);  // map order: by index
      int limit = row.task.each->concurrency > 0 ? row.task.each->concurrency
                                                 : std::numeric_limits<int>::max();
      for (int slots = limit - active; slots > 0; --slots) {
        auto started = StartNextEachChild(row.id);
        if (!started.ok()) return started.status();
        if (!*started) break;
      }
    }
  }

  // The current top-level step: finished but not acted on, or never created.
  auto fresh = datastore_.GetJob(job.id);
  if (!fresh.ok()) return fresh.status();
  if (fresh->state != JobState::kRunning) return Status::Ok();
  rows = datastore_.JobTasks(job.id);
  if (!rows.ok()) return rows.status();
  const TaskRecord* latest = nullptr;
  for (const TaskRecord& row : *rows) {
    if (!row.parent_id.empty() || row.position != fresh->position) continue;
    if (latest == nullptr || row.created_at > latest->created_at ||
        (row.created_at == latest->created_at && IsActive(row.state))) {
      latest = &row;
    }
  }
  if (latest == nullptr) {
    if (fresh->position > fresh->task_count) return CompleteJob(job.id);
    return ScheduleNew(*fresh, fresh->job.tasks[static_cast<std::size_t>(fresh->position - 1)], "",
                       fresh->position, json::object());
  }
  auto current = datastore_.GetTask(latest->id);
  if (!current.ok()) return current.status();
  if (IsDone(current->state)) return TaskDone(*current);
  if (current->state == TaskState::kFailed) {
    const auto& retry = current->task.retry;
    if (retry && retry->attempts < retry->limit) return Retry(*current);
    return TaskFailed(*current);
  }
  return Status::Ok();
}

}  // namespace baton

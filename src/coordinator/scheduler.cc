#include "coordinator/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <variant>

#include "base/log.h"
#include "core/webhook.h"

namespace baton {
namespace {

// Errors worth delivering the event again for; the rest are logged and dropped.
bool MayPass(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

// Errors that delivering the event again would meet again (a row the datastore refuses,
// an internal error): the step can never be taken.
bool IsLasting(const Status& s) {
  return !s.ok() && !MayPass(s) && s.code() != StatusCode::kNotFound &&
         s.code() != StatusCode::kFailedPrecondition;
}

Status Handled(const Status& s, const char* what, const std::string& id) {
  if (s.ok() || s.code() == StatusCode::kNotFound || s.code() == StatusCode::kFailedPrecondition) {
    return Status::Ok();
  }
  if (MayPass(s)) return s;
  log::Error(what, {{"task_id", id}, {"error", s.message()}});
  return Status::Ok();
}

// A read that finds no row decides nothing about it (a late event about a deleted job).
template <typename T>
Result<std::optional<T>> Optional(Result<T> read) {
  if (read.ok()) return std::optional<T>(std::move(*read));
  if (read.status().code() == StatusCode::kNotFound) return std::optional<T>();
  return read.status();
}

}  // namespace

Scheduler::Scheduler(Datastore& datastore, Broker& broker, Clock& clock, Timers& timers,
                     SchedulerOptions options)
    : datastore_(datastore),
      broker_(broker),
      clock_(clock),
      timers_(timers),
      options_(options),
      own_locker_(options.job_locker == nullptr ? NewInProcessLocker() : nullptr),
      locker_(options.job_locker == nullptr ? *own_locker_ : *options.job_locker),
      broker_executor_(broker, datastore, clock, options.durable_broker) {
  if (options_.start_in_background) {
    starter_ = std::jthread([this](std::stop_token stop) { StarterLoop(std::move(stop)); });
  }
}

Scheduler::~Scheduler() {
  starter_.request_stop();
  if (starter_.joinable()) starter_.join();
  std::set<TimerId> armed;
  {
    MutexLock lock(timers_mu_);
    closing_ = true;
    armed.swap(armed_);
  }
  for (TimerId id : armed) timers_.Cancel(id);
}

void Scheduler::SetJobFinishedListener(std::function<void(const JobRecord&)> listener) {
  MutexLock lock(listener_mu_);
  listener_ = std::move(listener);
}

flow::Policy Scheduler::Policy() const {
  return flow::Policy{.durable_broker = options_.durable_broker,
                      .max_redeliveries = options_.max_redeliveries,
                      .max_job_bytes = datastore_.MaxJobBytes()};
}

// ---------------------------------------------------------------------------- locks

Result<std::unique_ptr<Lock>> Scheduler::LockTree(const std::string& job_id) {
  auto root = RootOf(job_id);
  if (!root.ok()) return root.status();
  return locker_.Acquire("baton.job:" + *root, options_.lock_timeout);
}

Result<std::string> Scheduler::RootOf(const std::string& job_id) {
  // A job's top-level ancestor never changes, so it is cached (the reads outside the lock).
  std::string id = job_id;
  std::string root;
  for (int depth = 0; root.empty(); ++depth) {
    if (depth > 100) return Internal("job " + job_id + ": its sub-jobs nest too deeply");
    {
      MutexLock lock(roots_mu_);
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
  MutexLock lock(roots_mu_);
  if (roots_.size() >= 100000) roots_.clear();  // bounded; refilled on demand
  roots_[job_id] = root;
  return root;
}

// ---------------------------------------------------------------------------- deciding

namespace {

// An event's name, as the metrics label it.
std::string_view EventName(const flow::Event& event) {
  static constexpr std::string_view kNames[] = {
      "Submit",       "StartJob",   "Started",      "Completed", "Failed", "WorkerCancelled",
      "TaskTimedOut", "Redelivery", "LeaseExpired", "Progress",  "Cancel", "Restart",
      "JobTimedOut",  "RetryDue",   "FillEach",     "StepFailed"};
  static_assert(std::size(kNames) == std::variant_size_v<flow::Event>,
                "every flow::Event needs its name here");
  return kNames[event.index()];
}

}  // namespace

Status Scheduler::Handle(const std::string& job_id, const flow::Event& event, Decided* out) {
  const auto began = std::chrono::steady_clock::now();
  Decided decided;
  {
    auto guard = LockTree(job_id);
    if (!guard.ok()) return guard.status();
    auto decide = [&](const flow::Event& e) {
      return DecideLocked(
          [&](Transaction& tx, ScopeContexts& contexts) -> Result<std::vector<flow::Effect>> {
            auto view = ReadView(tx, e, contexts);
            if (!view.ok()) return view.status();
            return flow::Decide(e, std::move(*view), clock_.Now());
          });
    };
    decided = decide(event);
    if (IsLasting(decided.status)) {
      // Delivering the event again would fail the same way, leaving the tree RUNNING with
      // nothing in flight: its top-level job fails instead (under the lock still held).
      auto root = RootOf(job_id);
      const std::string& target = root.ok() ? *root : job_id;
      log::Error("a step of a job failed to be taken; failing the job",
                 {{"job_id", target}, {"error", decided.status.message()}});
      Decided failed = decide(flow::StepFailed{target, decided.status.message()});
      if (!failed.status.ok()) {
        log::Error("failing a job whose step failed failed too",
                   {{"job_id", target}, {"error", failed.status.message()}});
      } else if (failed.wrote) {
        decided.status = Status::Ok();  // the event is done with: its tree has failed
      }
      decided.finished.insert(decided.finished.end(), failed.finished.begin(),
                              failed.finished.end());
    }
  }
  Notify(decided.finished);
  if (options_.metrics != nullptr) {
    options_.metrics->EventDecided(
        EventName(event),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  }
  Status s = decided.status;
  if (out != nullptr) *out = std::move(decided);
  return s;
}

Status Scheduler::HandleTask(const std::string& task_id, const std::string& job_id,
                             const flow::Event& event, Decided* out) {
  std::string job = job_id;
  if (job.empty()) {
    auto task = datastore_.GetTask(task_id);
    if (!task.ok()) return task.status();
    job = task->job_id;
  }
  return Handle(job, event, out);
}

namespace {

Change JobChange(const JobRecord& row) {
  return {.kind = Change::Kind::kJob,
          .job_id = row.id,
          .state = std::string(ToString(row.state)),
          .progress = row.progress,
          .position = row.position,
          .task_count = row.task_count};
}

Change TaskChange(const TaskRecord& row) {
  return {.kind = Change::Kind::kTask,
          .job_id = row.job_id,
          .task_id = row.id,
          .parent_id = row.parent_id,
          .state = std::string(ToString(row.state)),
          .node_id = row.node_id,
          .progress = row.progress,
          .position = row.position};
}

}  // namespace

Scheduler::Decided Scheduler::DecideLocked(const FirstEffects& first) {
  Decided decided;
  std::vector<flow::Effect> after;
  const flow::Policy policy = Policy();
  ScopeContexts contexts;
  std::size_t hooks_written = 0;
  // What the streams of GET /events are told once this commits (only while one listens).
  EventHub* const events =
      options_.events != nullptr && options_.events->Wanted() ? options_.events : nullptr;
  std::vector<Change> changes;
  decided.status = datastore_.Transact([&](Transaction& tx) -> Status {
    after.clear();
    changes.clear();
    contexts.clear();
    decided.wrote = false;
    decided.created.clear();
    decided.ended.clear();
    decided.retried.clear();
    std::vector<flow::Event> follow;
    // The webhook deliveries the changes call for: written with them (the outbox).
    std::vector<WebhookDelivery> hooks;
    hooks_written = 0;
    // Applies one decision's effects: row effects to the scope, the rest kept for after
    // the commit, follow-ups queued to be decided against the rows as they now are.
    auto apply = [&](std::vector<flow::Effect> effects) -> Status {
      for (flow::Effect& effect : effects) {
        Status s = std::visit(
            [&](auto& e) -> Status {
              using E = std::decay_t<decltype(e)>;
              if constexpr (std::is_same_v<E, flow::CreateJob>) {
                decided.wrote = true;
                AddHooks(hooks, CreatedJobHooks(e.row));
                decided.created.push_back(e.row);
                if (events != nullptr) changes.push_back(JobChange(e.row));
                contexts[e.row.id] = std::nullopt;  // read when first decided about
                return tx.CreateJob(e.row);
              } else if constexpr (std::is_same_v<E, flow::UpdateJob>) {
                decided.wrote = true;
                if (e.state_changed || e.progress_changed) {
                  BATON_RETURN_IF_ERROR(JobHooks(tx, e, contexts, hooks));
                }
                if (events != nullptr) changes.push_back(JobChange(e.row));
                // A job's definition is never rewritten (flow changes a stored job's
                // state and context only), and the view's row may not hold it.
                if (!e.context) return tx.UpdateJobState(e.row);
                BATON_RETURN_IF_ERROR(tx.UpdateJobStateAndContext(e.row));
                // The write raised the version this scope read (unknown otherwise: the
                // context is read again next time).
                std::optional<SharedContext>& kept = contexts[e.row.id];
                if (kept) {
                  kept->version += 1;
                  kept->value = std::make_shared<const nlohmann::json>(std::move(e.row.context));
                }
                return Status::Ok();
              } else if constexpr (std::is_same_v<E, flow::CreateTask>) {
                decided.wrote = true;
                if (e.row.task.retry && e.row.task.retry->attempts > 0 &&
                    KindOf(e.row.task) == TaskKind::kRunnable) {
                  decided.retried.push_back(e.row.task.queue);
                }
                // Moved out and freed once written: an each of 20,000 children does not
                // hold every row twice until the end of its decision.
                BATON_RETURN_IF_ERROR(TaskHooks(tx, e.row, kEventTaskStateChange, contexts, hooks));
                if (events != nullptr) changes.push_back(TaskChange(e.row));
                std::vector<TaskRecord> row;
                row.push_back(std::move(e.row));
                return tx.CreateTasks(row);
              } else if constexpr (std::is_same_v<E, flow::UpdateTask>) {
                decided.wrote = true;
                if (e.state_changed &&
                    (e.row.state == TaskState::kCompleted || e.row.state == TaskState::kFailed) &&
                    KindOf(e.row.task) == TaskKind::kRunnable) {
                  std::optional<double> seconds;
                  if (e.row.started_at && e.row.completed_at) {
                    seconds = std::chrono::duration<double>(*e.row.completed_at - *e.row.started_at)
                                  .count();
                  } else if (e.row.started_at && e.row.failed_at) {
                    seconds =
                        std::chrono::duration<double>(*e.row.failed_at - *e.row.started_at).count();
                  }
                  decided.ended.push_back({e.row.task.queue, e.row.state, seconds});
                }
                if (e.state_changed || e.progress_changed) {
                  BATON_RETURN_IF_ERROR(TaskHooks(
                      tx, e.row, e.state_changed ? kEventTaskStateChange : kEventTaskProgress,
                      contexts, hooks));
                }
                if (events != nullptr) changes.push_back(TaskChange(e.row));
                return tx.UpdateTask(e.row);
              } else if constexpr (std::is_same_v<E, flow::CancelActive>) {
                decided.wrote = true;
                auto cancelled = tx.CancelTasks(e.job_id, e.under, e.at);
                if (!cancelled.ok()) return cancelled.status();
                std::vector<flow::CancelledRow> rows;
                rows.reserve(cancelled->size());
                for (const CancelledTask& c : *cancelled) {
                  rows.push_back({c.id, c.was, c.node_id, c.subjob_id});
                  if (events != nullptr) {
                    changes.push_back({.kind = Change::Kind::kTask,
                                       .job_id = e.job_id,
                                       .task_id = c.id,
                                       .state = std::string(ToString(TaskState::kCancelled))});
                  }
                }
                BATON_RETURN_IF_ERROR(CancelledHooks(tx, e.job_id, *cancelled, contexts, hooks));
                for (flow::Effect& more : flow::AfterCancel(rows, policy)) {
                  if (auto* f = std::get_if<flow::FollowUp>(&more)) {
                    follow.push_back(std::move(f->event));
                  } else {
                    after.push_back(std::move(more));
                  }
                }
                return Status::Ok();
              } else if constexpr (std::is_same_v<E, flow::FollowUp>) {
                follow.push_back(std::move(e.event));
                return Status::Ok();
              } else {
                after.push_back(std::move(e));
                return Status::Ok();
              }
            },
            effect);
        BATON_RETURN_IF_ERROR(s);
      }
      return Status::Ok();
    };
    auto effects = first(tx, contexts);
    if (!effects.ok()) return effects.status();
    BATON_RETURN_IF_ERROR(apply(std::move(*effects)));
    // Bounded: a follow-up never asks for itself again, but a bug must not spin here.
    for (std::size_t i = 0; i < follow.size(); ++i) {
      if (i >= 100000) return Internal("a decision asked for more than 100,000 follow-ups");
      flow::Event next = follow[i];
      auto view = ReadView(tx, next, contexts);
      if (!view.ok()) return view.status();
      BATON_RETURN_IF_ERROR(apply(flow::Decide(next, std::move(*view), clock_.Now())));
    }
    if (!hooks.empty()) BATON_RETURN_IF_ERROR(tx.CreateWebhookDeliveries(hooks));
    hooks_written = hooks.size();
    return Status::Ok();
  });
  if (!decided.status.ok()) {
    // Nothing of the scope was stored.
    decided.wrote = false;
    decided.created.clear();
    decided.ended.clear();
    decided.retried.clear();
    return decided;
  }
  // Stored: now what follows from it.
  if (hooks_written > 0 && options_.on_webhooks) options_.on_webhooks();
  PublishContexts(contexts);
  if (events != nullptr) events->Publish(std::move(changes));
  for (const flow::Effect& e : after) {
    if (const auto* f = std::get_if<flow::JobFinished>(&e)) decided.finished.push_back(f->row);
  }
  if (Metrics* m = options_.metrics) {
    for (const Decided::Ended& e : decided.ended) m->TaskEnded(e.queue, e.state, e.seconds);
    for (const std::string& queue : decided.retried) m->TaskRetried(queue);
    for (const JobRecord& job : decided.finished) m->JobEnded(job.state);
  }
  // An ended job's definition is read again if it is restarted.
  ForgetDefinitions(decided.finished);
  decided.status = RunAfterCommit(std::move(after));
  return decided;
}

void Scheduler::AddHooks(std::vector<WebhookDelivery>& hooks, std::vector<WebhookDelivery> more) {
  for (WebhookDelivery& d : more) hooks.push_back(std::move(d));
}

std::vector<WebhookDelivery> Scheduler::CreatedJobHooks(const JobRecord& job) {
  if (!CallsWebhooks(job.job, kEventJobStateChange)) return {};
  return WebhookDeliveriesFor(kEventJobStateChange, job, job.job, job.context, nullptr,
                              clock_.Now(), NewId);
}

Result<Scheduler::HookJob> Scheduler::HookJobOf(Transaction& tx, const std::string& job_id,
                                                ScopeContexts& contexts) {
  int version = 0;
  auto job = tx.GetJobState(job_id, &version);
  if (!job.ok()) return job.status();
  auto context = ContextOf(tx, job_id, version, contexts);
  if (!context.ok()) return context.status();
  return HookJob{std::move(*job), std::move(*context)};
}

Status Scheduler::JobHooks(Transaction& tx, const flow::UpdateJob& e, ScopeContexts& contexts,
                           std::vector<WebhookDelivery>& hooks) {
  auto definition = DefinitionOf(tx, e.row.id);
  if (!definition.ok()) return definition.status();
  std::string_view event = e.state_changed ? kEventJobStateChange : kEventJobProgress;
  if (!CallsWebhooks(**definition, event)) return Status::Ok();
  // A row whose context changed carries it whole; otherwise it is the kept one.
  std::shared_ptr<const nlohmann::json> kept;
  if (!e.context) {
    auto job = HookJobOf(tx, e.row.id, contexts);
    if (!job.ok()) return job.status();
    kept = std::move(job->context);
  }
  const nlohmann::json& context = e.context ? e.row.context : *kept;
  AddHooks(hooks,
           WebhookDeliveriesFor(event, e.row, **definition, context, nullptr, clock_.Now(), NewId));
  return Status::Ok();
}

Status Scheduler::TaskHooks(Transaction& tx, const TaskRecord& row, std::string_view event,
                            ScopeContexts& contexts, std::vector<WebhookDelivery>& hooks) {
  auto definition = DefinitionOf(tx, row.job_id);
  if (!definition.ok()) return definition.status();
  if (!CallsWebhooks(**definition, event)) return Status::Ok();
  auto job = HookJobOf(tx, row.job_id, contexts);
  if (!job.ok()) return job.status();
  AddHooks(hooks, WebhookDeliveriesFor(event, job->row, **definition, *job->context, &row,
                                       clock_.Now(), NewId));
  return Status::Ok();
}

Status Scheduler::CancelledHooks(Transaction& tx, const std::string& job_id,
                                 const std::vector<CancelledTask>& cancelled,
                                 ScopeContexts& contexts, std::vector<WebhookDelivery>& hooks) {
  if (cancelled.empty()) return Status::Ok();
  auto definition = DefinitionOf(tx, job_id);
  if (!definition.ok()) return definition.status();
  if (!CallsWebhooks(**definition, kEventTaskStateChange)) return Status::Ok();
  // The rows were cancelled at once, in one state of their job: read once.
  auto job = HookJobOf(tx, job_id, contexts);
  if (!job.ok()) return job.status();
  for (const CancelledTask& c : cancelled) {
    auto row = tx.GetTask(c.id);
    if (!row.ok()) return row.status();
    AddHooks(hooks, WebhookDeliveriesFor(kEventTaskStateChange, job->row, **definition,
                                         *job->context, &*row, clock_.Now(), NewId));
  }
  return Status::Ok();
}

Result<flow::View> Scheduler::ReadView(Transaction& tx, const flow::Event& event,
                                       ScopeContexts& contexts) {
  // Exactly what flow::ReadsOf says: the event's task and, as its flags say, its job,
  // and up the tree through sub-jobs.
  const flow::Reads reads = flow::ReadsOf(event);
  flow::View view;
  view.policy = Policy();
  view.id_seed = NewId();
  std::string task_id = reads.task ? reads.task_id : "";
  std::string job_id = reads.job_id;
  for (int depth = 0; depth < 100; ++depth) {
    // The task rows of a job: the event's task (or the one that started the job below as
    // a sub-job) and, when read, its ancestors. The first one names the job.
    for (bool first = true; !task_id.empty(); first = false) {
      auto task = Optional(tx.GetTask(task_id));
      if (!task.ok()) return task.status();
      if (!*task && first) return view;
      if (!*task) break;
      TaskRecord& row = **task;
      if (first) job_id = row.job_id;
      if (reads.each_children && KindOf(row.task) == TaskKind::kEach) {
        BATON_RETURN_IF_ERROR(AddEach(tx, row, view));
      }
      task_id = reads.ancestors ? row.parent_id : "";
      view.tasks[row.id] = std::move(row);
    }
    if (!reads.job) break;
    int version = 0;
    auto job = Optional(tx.GetJobState(job_id, &version));
    if (!job.ok()) return job.status();
    if (!*job) break;
    if (reads.job_whole) {
      // The row is read without its definition and context, which are shared
      // (DefinitionOf, ContextOf): what a step reads of its job does not grow with it.
      auto definition = DefinitionOf(tx, job_id);
      if (!definition.ok()) return definition.status();
      auto context = ContextOf(tx, job_id, version, contexts);
      if (!context.ok()) return context.status();
      view.definitions[job_id] = std::move(*definition);
      view.contexts[job_id] = std::move(*context);
    }
    const bool up =
        reads.ancestors || (reads.scheduled_parents && (*job)->state == JobState::kScheduled);
    std::string parent = (*job)->parent_id;
    view.jobs[job_id] = std::move(**job);
    if (parent.empty() || !up) break;
    task_id = parent;
  }
  return view;
}

Result<std::shared_ptr<const Job>> Scheduler::DefinitionOf(Transaction& tx,
                                                           const std::string& job_id) {
  {
    MutexLock lock(definitions_mu_);
    if (auto it = definitions_.find(job_id); it != definitions_.end()) return it->second;
  }
  // Read outside the mutex (the tree's lock keeps other decisions of this job out); a
  // definition never changes once stored, so whichever read lands is the same.
  auto definition = tx.GetJobDefinition(job_id);
  if (!definition.ok()) return definition.status();
  MutexLock lock(definitions_mu_);
  if (definitions_.size() >= kMaxDefinitions) definitions_.clear();  // refilled on demand
  definitions_[job_id] = *definition;
  return *definition;
}

void Scheduler::ForgetDefinitions(const std::vector<JobRecord>& finished) {
  if (finished.empty()) return;
  {
    MutexLock lock(definitions_mu_);
    for (const JobRecord& job : finished) definitions_.erase(job.id);
  }
  MutexLock lock(contexts_mu_);
  for (const JobRecord& job : finished) ForgetContextLocked(job.id);
}

void Scheduler::ForgetContextLocked(const std::string& job_id) {
  if (auto it = contexts_.find(job_id); it != contexts_.end()) {
    context_bytes_ -= it->second.bytes;
    contexts_.erase(it);
  }
}

Result<std::shared_ptr<const nlohmann::json>> Scheduler::ContextOf(Transaction& tx,
                                                                   const std::string& job_id,
                                                                   int version,
                                                                   ScopeContexts& scope) {
  if (auto it = scope.find(job_id); it != scope.end()) {
    if (it->second && it->second->version == version) return it->second->value;
  } else {
    MutexLock lock(contexts_mu_);
    if (auto kept = contexts_.find(job_id); kept != contexts_.end()) {
      if (kept->second.version == version) return kept->second.value;
    }
  }
  // Read outside the mutex (the tree's lock keeps other decisions of this job out).
  std::size_t bytes = 0;
  auto context = tx.GetJobContext(job_id, &bytes);
  if (!context.ok()) return context.status();
  auto shared = std::make_shared<const nlohmann::json>(std::move(*context));
  scope[job_id] = SharedContext{version, shared, bytes};
  return shared;
}

void Scheduler::PublishContexts(ScopeContexts& scope) {
  if (scope.empty()) return;
  MutexLock lock(contexts_mu_);
  for (auto& [job_id, context] : scope) {
    ForgetContextLocked(job_id);
    if (!context) continue;
    if (contexts_.size() >= kMaxContexts || context_bytes_ + context->bytes > kMaxContextBytes) {
      contexts_.clear();  // refilled on demand
      context_bytes_ = 0;
    }
    context_bytes_ += context->bytes;
    contexts_[job_id] = std::move(*context);
  }
}

Status Scheduler::AddEach(Transaction& tx, const TaskRecord& each, flow::View& view) {
  // Its running children counted and its next CREATED ones read through an index: a
  // decision below an each of 2,000 children reads what one below an each of 20 does.
  // Without a concurrency nothing limits its slots: its children are not counted (they
  // would be every queued one, read again at each child's completion).
  int running = 0;
  if (each.task.each && each.task.each->concurrency > 0) {
    auto counts = tx.CountChildren(
        each.id, {TaskState::kPending, TaskState::kScheduled, TaskState::kRunning});
    if (!counts.ok()) return counts.status();
    for (const auto& [state, n] : *counts) running += n;
  }
  view.running_children[each.id] = running;
  auto next = tx.NextCreatedChildren(each.id, flow::NextCreatedWanted(each, running));
  if (!next.ok()) return next.status();
  if (!next->empty()) view.next_created[each.id] = std::move(*next);
  return Status::Ok();
}

// ---------------------------------------------------------------------------- after commit

Status Scheduler::RunAfterCommit(std::vector<flow::Effect>&& after) {
  Status result;
  std::vector<TaskRecord> starts;
  std::vector<std::string> drops;
  std::map<std::string, std::vector<std::string>> kills;
  for (flow::Effect& effect : after) {
    std::visit(
        [&](auto& e) {
          using E = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<E, flow::Start>) {
            starts.push_back(std::move(e.row));
          } else if constexpr (std::is_same_v<E, flow::StartAt>) {
            std::string task_id = e.task_id;
            Schedule(e.at, [this, task_id] {
              Status s = HandleTask(task_id, "", flow::RetryDue{task_id});
              if (!s.ok() && s.code() != StatusCode::kNotFound) {
                log::Error("starting a retry failed",
                           {{"task_id", task_id}, {"error", s.message()}});
              }
            });
          } else if constexpr (std::is_same_v<E, flow::Kill>) {
            kills[e.node_id].push_back(e.task_id);
          } else if constexpr (std::is_same_v<E, flow::Drop>) {
            drops.push_back(e.task_id);
          } else if constexpr (std::is_same_v<E, flow::ArmJobTimeout>) {
            ArmJobTimeout(e.job_id, e.timeout, e.at);
          } else if constexpr (std::is_same_v<E, flow::DisarmJobTimeout>) {
            DisarmJobTimeout(e.job_id);
          } else if constexpr (std::is_same_v<E, flow::Refused>) {
            if (result.ok()) result = FailedPrecondition(e.reason);
          } else {
            // Row effects and follow-ups were taken in the scope; JobFinished is told by
            // the caller once the tree's lock is released.
          }
        },
        effect);
  }
  StartRows(std::move(starts));
  TellWorkers(drops, kills);
  return result;
}

Executor* Scheduler::ExecutorFor(TaskKind kind) {
  switch (kind) {
    case TaskKind::kRunnable:
      return &broker_executor_;
    case TaskKind::kParallel:
    case TaskKind::kEach:
    case TaskKind::kSubJob:
      return nullptr;
  }
  return nullptr;
}

void Scheduler::StartRows(std::vector<TaskRecord> rows) {
  // One batch per executor: a parallel's children go out with one wait for confirms.
  std::map<TaskKind, std::vector<TaskRecord>> by_kind;
  for (TaskRecord& row : rows) by_kind[KindOf(row.task)].push_back(std::move(row));
  for (auto& [kind, batch] : by_kind) {
    Executor* executor = ExecutorFor(kind);
    if (executor == nullptr) {
      // flow starts leaf rows only; a composite here would "run" as an empty script.
      for (const TaskRecord& row : batch) {
        log::Error("a composite row was to be started; it is not",
                   {{"task_id", row.id}, {"kind", std::string(ToString(kind))}});
      }
      continue;
    }
    for (const TaskRecord& refused : executor->Start(std::move(batch))) {
      std::string task_id = refused.id;
      std::string job_id = refused.job_id;
      // Decided again as a retry whose backoff is over: a PENDING row is queued again.
      Schedule(clock_.Now() + options_.republish_delay, [this, task_id, job_id] {
        Status s = HandleTask(task_id, job_id, flow::RetryDue{task_id});
        if (!s.ok() && s.code() != StatusCode::kNotFound) {
          log::Error("publishing a task again failed",
                     {{"task_id", task_id}, {"error", s.message()}});
        }
      });
    }
  }
}

void Scheduler::TellNode(const std::string& node, const std::vector<std::string>& ids) {
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
}

void Scheduler::TellWorkers(const std::vector<std::string>& drops,
                            const std::map<std::string, std::vector<std::string>>& kills) {
  if (!drops.empty()) {
    // Every worker heard from within the lease, and every worker about to be told to kill
    // a task (its heartbeat may not be stored yet). Drops go first, so the slot a kill
    // frees cannot take a dropped task before its worker heard of the drop; the tree's
    // lock, held meanwhile, keeps a later decision's kill of this tree behind them.
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
    {
      // Kept for the workers not told now (TellMissedDrops); bounded by age and count.
      MutexLock lock(drops_mu_);
      recent_drops_.push_back({clock_.Now(), drops, told});
      recent_drop_ids_ += drops.size();
      while (recent_drop_ids_ > 100000 && recent_drops_.size() > 1) {
        recent_drop_ids_ -= recent_drops_.front().ids.size();
        recent_drops_.pop_front();
      }
    }
    for (const std::string& node : told) TellNode(node, drops);
  }
  for (const auto& [node, ids] : kills) {
    // A worker whose heartbeat was not stored when tasks were dropped hears of them now,
    // before the kill frees one of its slots: a task of a job cancelled while this one
    // was starting there (a late start is killed) must not take that slot.
    TellMissedDrops(node);
    TellNode(node, ids);
  }
}

void Scheduler::TellMissedDrops(const std::string& node_id) {
  std::vector<std::string> missed;
  {
    MutexLock lock(drops_mu_);
    const TimePoint oldest = clock_.Now() - options_.node_lease;
    while (!recent_drops_.empty() && recent_drops_.front().at < oldest) {
      recent_drop_ids_ -= recent_drops_.front().ids.size();
      recent_drops_.pop_front();
    }
    for (SentDrops& sent : recent_drops_) {
      if (!sent.told.insert(node_id).second) continue;
      missed.insert(missed.end(), sent.ids.begin(), sent.ids.end());
    }
  }
  if (!missed.empty()) TellNode(node_id, missed);
}

void Scheduler::Notify(const std::vector<JobRecord>& finished) {
  if (finished.empty()) return;
  std::function<void(const JobRecord&)> listener;
  {
    MutexLock lock(listener_mu_);
    listener = listener_;
  }
  if (!listener) return;
  for (const JobRecord& job : finished) listener(job);
}

// ---------------------------------------------------------------------------- timers

void Scheduler::Schedule(TimePoint at, std::function<void()> callback) {
  auto id = std::make_shared<TimerId>(0);
  MutexLock lock(timers_mu_);
  if (closing_) return;
  // The callback waits for timers_mu_, so it sees its id stored.
  *id = timers_.Schedule(at, [this, id, callback = std::move(callback)] {
    {
      MutexLock inner(timers_mu_);
      armed_.erase(*id);
    }
    callback();
  });
  armed_.insert(*id);
}

void Scheduler::ArmJobTimeout(const std::string& job_id, Duration timeout, TimePoint at) {
  DisarmJobTimeout(job_id);  // arming again replaces the timer
  auto id = std::make_shared<TimerId>(0);
  MutexLock lock(timers_mu_);
  if (closing_) return;
  *id = timers_.Schedule(at, [this, id, job_id, timeout] {
    {
      MutexLock inner(timers_mu_);
      armed_.erase(*id);
      if (auto it = job_timers_.find(job_id); it != job_timers_.end() && it->second == *id) {
        job_timers_.erase(it);
      }
    }
    Status s = Handle(job_id, flow::JobTimedOut{job_id, timeout});
    if (MayPass(s)) {
      log::Warn("a job timed out but its lock cannot be taken; trying again in a second",
                {{"job_id", job_id}, {"error", s.message()}});
      ArmJobTimeout(job_id, timeout, clock_.Now() + std::chrono::seconds(1));
    } else if (!s.ok() && s.code() != StatusCode::kNotFound) {
      log::Error("failing a timed-out job failed", {{"job_id", job_id}, {"error", s.message()}});
    }
  });
  armed_.insert(*id);
  job_timers_[job_id] = *id;
}

void Scheduler::DisarmJobTimeout(const std::string& job_id) {
  std::optional<TimerId> id;
  {
    MutexLock lock(timers_mu_);
    auto it = job_timers_.find(job_id);
    if (it == job_timers_.end()) return;
    id = it->second;
    armed_.erase(it->second);
    job_timers_.erase(it);
  }
  timers_.Cancel(*id);
}

// ---------------------------------------------------------------------------- jobs

Result<JobRecord> Scheduler::Submit(const Job& job) {
  std::string id = NewId();
  {
    MutexLock lock(roots_mu_);
    if (roots_.size() >= 100000) roots_.clear();
    roots_[id] = id;
  }
  JobRecord record = flow::NewJobRecord(job, "", id, clock_.Now());
  // In the background only a job whose first step may be big (a composite: an each may
  // expand thousands of rows) is left to the starter thread. One whose first task is
  // runnable is decided here, stored started with its task's row in one write (PENDING
  // and then started it would cost two) and published at once, as without.
  const bool runnable_first = !job.tasks.empty() && KindOf(job.tasks[0]) == TaskKind::kRunnable;
  if (options_.start_in_background && !runnable_first) {
    // Stored PENDING before the answer; the starter thread decides StartJob. A crash in
    // between leaves it PENDING, and reconciling starts it.
    if (auto hooks = CreatedJobHooks(record); !hooks.empty()) {
      // Its PENDING state reported by the outbox, written with the job.
      BATON_RETURN_IF_ERROR(datastore_.Transact([&](Transaction& tx) -> Status {
        BATON_RETURN_IF_ERROR(tx.CreateJob(record));
        return tx.CreateWebhookDeliveries(hooks);
      }));
      if (options_.on_webhooks) options_.on_webhooks();
    } else {
      BATON_RETURN_IF_ERROR(datastore_.CreateJob(record));
    }
    if (options_.events != nullptr && options_.events->Wanted()) {
      options_.events->Publish({JobChange(record)});
    }
    {
      MutexLock lock(start_mu_);
      to_start_.push_back(id);
    }
    start_cv_.notify_one();
    return record;
  }
  Decided decided;
  Status s = Handle(id, flow::Submit{record}, &decided);
  for (const JobRecord& created : decided.created) {
    if (created.id == id) record = created;
  }
  // Stored, but a step failed: the job is there to be reconciled.
  if (!s.ok() && decided.created.empty()) return s;
  if (!s.ok()) log::Error("starting a job failed", {{"job_id", id}, {"error", s.message()}});
  return record;
}

Result<std::vector<JobRecord>> Scheduler::CreateJobsWith(const CreateJobsBody& body) {
  std::vector<JobRecord> jobs;
  bool wrote_hooks = false;
  BATON_RETURN_IF_ERROR(datastore_.Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN(jobs, body(tx));
    for (const JobRecord& job : jobs) {
      BATON_RETURN_IF_ERROR(tx.CreateJob(job));
      if (auto hooks = CreatedJobHooks(job); !hooks.empty()) {
        BATON_RETURN_IF_ERROR(tx.CreateWebhookDeliveries(hooks));
        wrote_hooks = true;
      }
    }
    return Status::Ok();
  }));
  if (wrote_hooks && options_.on_webhooks) options_.on_webhooks();
  if (options_.events != nullptr && options_.events->Wanted()) {
    std::vector<Change> created;
    for (const JobRecord& job : jobs) created.push_back(JobChange(job));
    options_.events->Publish(std::move(created));
  }
  for (const JobRecord& job : jobs) {
    {
      MutexLock lock(roots_mu_);
      if (roots_.size() >= 100000) roots_.clear();
      roots_[job.id] = job.id;
    }
    StartCreated(job.id);
  }
  return jobs;
}

void Scheduler::StartCreated(const std::string& id) {
  Status s = Handle(id, flow::StartJob{id});
  if (MayPass(s)) {
    log::Error("starting a job failed; trying again", {{"job_id", id}, {"error", s.message()}});
    Schedule(clock_.Now() + std::chrono::seconds(1), [this, id] { StartCreated(id); });
  } else if (!s.ok() && s.code() != StatusCode::kNotFound) {
    log::Error("starting a job failed", {{"job_id", id}, {"error", s.message()}});
  }
}

void Scheduler::StarterLoop(std::stop_token stop) {
  for (;;) {
    std::deque<std::string> batch;
    {
      MutexLock lock(start_mu_);
      start_cv_.wait(lock, stop, [&]() BATON_REQUIRES(start_mu_) { return !to_start_.empty(); });
      // What is left stays PENDING, for reconciling.
      if (stop.stop_requested()) return;
      batch.swap(to_start_);
    }
    for (const std::string& id : batch) {
      Status s = Handle(id, flow::StartJob{id});
      if (MayPass(s)) {
        log::Error("starting a job failed; trying again", {{"job_id", id}, {"error", s.message()}});
        Schedule(clock_.Now() + std::chrono::seconds(1), [this, id] {
          {
            MutexLock lock(start_mu_);
            to_start_.push_back(id);
          }
          start_cv_.notify_one();
        });
      } else if (!s.ok() && s.code() != StatusCode::kNotFound) {
        log::Error("starting a job failed", {{"job_id", id}, {"error", s.message()}});
      }
    }
  }
}

Status Scheduler::Cancel(const std::string& job_id) {
  Decided decided;
  Status s = Handle(job_id, flow::Cancel{job_id}, &decided);
  if (s.ok() && !decided.wrote && decided.created.empty()) {
    // Decide found no job (it refuses a finished one with a reason).
    auto job = datastore_.GetJob(job_id);
    if (!job.ok()) return job.status();
  }
  return s;
}

Status Scheduler::Restart(const std::string& job_id) {
  Decided decided;
  Status s = Handle(job_id, flow::Restart{job_id}, &decided);
  if (s.ok() && !decided.wrote) {
    auto job = datastore_.GetJob(job_id);
    if (!job.ok()) return job.status();
  }
  return s;
}

// ---------------------------------------------------------------------------- events

Status Scheduler::OnStarted(const TaskStarted& event) {
  // Under the tree's lock like every decision: the rows flow reads are the rows it writes.
  Status s = HandleTask(event.task_id, event.job_id,
                        flow::Started{event.task_id, event.node_id, event.at});
  return Handled(s, "recording a start failed", event.task_id);
}

Status Scheduler::OnFinished(const TaskFinished& event) {
  flow::Event e;
  switch (event.outcome) {
    case TaskFinished::Outcome::kCompleted:
      e = flow::Completed{event.task_id, event.node_id, event.result, event.started_at};
      break;
    case TaskFinished::Outcome::kFailed:
      e = flow::Failed{event.task_id, event.node_id, event.error, event.started_at};
      break;
    case TaskFinished::Outcome::kCancelled:
      e = flow::WorkerCancelled{event.task_id, event.node_id, event.error};
      break;
    case TaskFinished::Outcome::kHandedBack:
      e = flow::Redelivery{event.task_id, event.node_id, event.error};
      break;
  }
  Status s = HandleTask(event.task_id, event.job_id, e);
  return Handled(s, "handling a task outcome failed", event.task_id);
}

Status Scheduler::OnProgress(const TaskProgress& event) {
  Status s = HandleTask(event.task_id, event.job_id, flow::Progress{event.task_id, event.progress});
  return Handled(s, "recording progress failed", event.task_id);
}

// ---------------------------------------------------------------------------- recovery

Status Scheduler::Reconcile(const std::set<std::string>& live_nodes) {
  Status result;
  auto jobs =
      datastore_.JobsInState({JobState::kPending, JobState::kScheduled, JobState::kRunning});
  if (!jobs.ok()) return jobs.status();
  const flow::Policy policy = Policy();
  for (const JobRecord& listed : *jobs) {
    Decided decided;
    {
      auto guard = LockTree(listed.id);
      if (!guard.ok()) {
        decided.status = guard.status();
      } else {
        decided =
            DecideLocked([&](Transaction& tx, ScopeContexts&) -> Result<std::vector<flow::Effect>> {
              // Read again under the lock: another coordinator may have moved it on.
              auto job = Optional(tx.GetJob(listed.id));
              if (!job.ok()) return job.status();
              if (!*job) return std::vector<flow::Effect>{};
              auto rows = tx.JobTasks(listed.id);
              if (!rows.ok()) return rows.status();
              return flow::Frontier(**job, *rows, clock_.Now(), policy, &live_nodes, NewId());
            });
      }
    }
    Notify(decided.finished);
    const Status& s = decided.status;
    if (!s.ok() && s.code() != StatusCode::kNotFound) {
      log::Error("reconciling a job failed", {{"job_id", listed.id}, {"error", s.message()}});
      if (result.ok()) result = s;
    }
  }
  return result;
}

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
    if (KindOf(task.task) != TaskKind::kRunnable || task.node_id.empty() ||
        alive.contains(task.node_id)) {
      continue;
    }
    // A task that started less than a lease ago may belong to a node whose first
    // heartbeat is still on its way.
    if (task.started_at && now - *task.started_at < lease) continue;
    Decided decided;
    Status s = Handle(task.job_id, flow::LeaseExpired{task.id, task.node_id}, &decided);
    if (!s.ok()) {
      if (first_error.ok()) first_error = s;
      continue;
    }
    if (decided.wrote) ++requeued;
  }
  if (!first_error.ok() && requeued == 0) return first_error;
  return requeued;
}

}  // namespace baton

#include "coordinator/outbox.h"

#include <chrono>
#include <utility>

#include "core/task_kind.h"

namespace baton {
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

// How long an ended attempt ran, when it says.
std::optional<double> SecondsRun(const TaskRecord& row) {
  if (!row.started_at) return std::nullopt;
  const std::optional<TimePoint>& end = row.completed_at ? row.completed_at : row.failed_at;
  if (!end) return std::nullopt;
  return std::chrono::duration<double>(*end - *row.started_at).count();
}

}  // namespace

Outbox::Outbox(const OutboxSinks& sinks, JobCache& cache, Clock& clock)
    : sinks_(sinks), cache_(cache), clock_(clock) {}

void Outbox::Begin() {
  events_ = sinks_.events != nullptr && sinks_.events->Wanted() ? sinks_.events : nullptr;
  hooks_.clear();
  hooks_written_ = 0;
  changes_.clear();
  ended_.clear();
  retried_.clear();
}

void Outbox::Add(std::vector<WebhookDelivery> more) {
  for (WebhookDelivery& d : more) hooks_.push_back(std::move(d));
}

void Outbox::Change(baton::Change change) {
  if (events_ != nullptr) changes_.push_back(std::move(change));
}

void Outbox::JobCreated(const JobRecord& row) {
  if (CallsWebhooks(row.job, kEventJobStateChange)) {
    Add(WebhookDeliveriesFor(kEventJobStateChange, row, row.job, row.context, nullptr, clock_.Now(),
                             NewId));
  }
  Change(JobChange(row));
}

Result<Outbox::HookJob> Outbox::HookJobOf(Transaction& tx, const std::string& job_id,
                                          JobCache::Scope& scope) {
  int version = 0;
  auto job = tx.GetJobState(job_id, &version);
  if (!job.ok()) return job.status();
  auto context = cache_.ContextOf(tx, job_id, version, scope);
  if (!context.ok()) return context.status();
  return HookJob{std::move(*job), std::move(*context)};
}

Status Outbox::JobUpdated(Transaction& tx, const flow::UpdateJob& e, JobCache::Scope& scope) {
  Change(JobChange(e.row));
  if (!e.state_changed && !e.progress_changed) return Status::Ok();
  auto definition = cache_.DefinitionOf(tx, e.row.id);
  if (!definition.ok()) return definition.status();
  std::string_view event = e.state_changed ? kEventJobStateChange : kEventJobProgress;
  if (!CallsWebhooks(**definition, event)) return Status::Ok();
  // A row whose context changed carries it whole; otherwise it is the kept one.
  std::shared_ptr<const nlohmann::json> kept;
  if (!e.context) {
    auto job = HookJobOf(tx, e.row.id, scope);
    if (!job.ok()) return job.status();
    kept = std::move(job->context);
  }
  const nlohmann::json& context = e.context ? e.row.context : *kept;
  Add(WebhookDeliveriesFor(event, e.row, **definition, context, nullptr, clock_.Now(), NewId));
  return Status::Ok();
}

Status Outbox::TaskHooks(Transaction& tx, const TaskRecord& row, std::string_view event,
                         JobCache::Scope& scope) {
  auto definition = cache_.DefinitionOf(tx, row.job_id);
  if (!definition.ok()) return definition.status();
  if (!CallsWebhooks(**definition, event)) return Status::Ok();
  auto job = HookJobOf(tx, row.job_id, scope);
  if (!job.ok()) return job.status();
  Add(WebhookDeliveriesFor(event, job->row, **definition, *job->context, &row, clock_.Now(),
                           NewId));
  return Status::Ok();
}

Status Outbox::TaskCreated(Transaction& tx, const TaskRecord& row, JobCache::Scope& scope) {
  if (row.task.retry && row.task.retry->attempts > 0 && KindOf(row.task) == TaskKind::kRunnable) {
    retried_.push_back(row.task.queue);
  }
  Change(TaskChange(row));
  return TaskHooks(tx, row, kEventTaskStateChange, scope);
}

Status Outbox::TaskUpdated(Transaction& tx, const flow::UpdateTask& e, JobCache::Scope& scope) {
  const TaskRecord& row = e.row;
  if (e.state_changed && (row.state == TaskState::kCompleted || row.state == TaskState::kFailed) &&
      KindOf(row.task) == TaskKind::kRunnable) {
    ended_.push_back({row.task.queue, row.state, SecondsRun(row)});
  }
  Change(TaskChange(row));
  if (!e.state_changed && !e.progress_changed) return Status::Ok();
  return TaskHooks(tx, row, e.state_changed ? kEventTaskStateChange : kEventTaskProgress, scope);
}

Status Outbox::TasksCancelled(Transaction& tx, const std::string& job_id,
                              const std::vector<CancelledTask>& cancelled, JobCache::Scope& scope) {
  if (cancelled.empty()) return Status::Ok();
  for (const CancelledTask& c : cancelled) {
    Change({.kind = Change::Kind::kTask,
            .job_id = job_id,
            .task_id = c.id,
            .state = std::string(ToString(TaskState::kCancelled))});
  }
  auto definition = cache_.DefinitionOf(tx, job_id);
  if (!definition.ok()) return definition.status();
  if (!CallsWebhooks(**definition, kEventTaskStateChange)) return Status::Ok();
  // The rows were cancelled at once, in one state of their job: read once.
  auto job = HookJobOf(tx, job_id, scope);
  if (!job.ok()) return job.status();
  for (const CancelledTask& c : cancelled) {
    auto row = tx.GetTask(c.id);
    if (!row.ok()) return row.status();
    Add(WebhookDeliveriesFor(kEventTaskStateChange, job->row, **definition, *job->context, &*row,
                             clock_.Now(), NewId));
  }
  return Status::Ok();
}

Status Outbox::Write(Transaction& tx) {
  if (!hooks_.empty()) BATON_RETURN_IF_ERROR(tx.CreateWebhookDeliveries(hooks_));
  hooks_written_ = hooks_.size();
  return Status::Ok();
}

void Outbox::Committed(const std::vector<JobRecord>& finished) {
  if (hooks_written_ > 0 && sinks_.on_webhooks) sinks_.on_webhooks();
  if (events_ != nullptr && !changes_.empty()) events_->Publish(std::move(changes_));
  changes_.clear();
  if (Metrics* m = sinks_.metrics) {
    for (const Ended& e : ended_) m->TaskEnded(e.queue, e.state, e.seconds);
    for (const std::string& queue : retried_) m->TaskRetried(queue);
    for (const JobRecord& job : finished) m->JobEnded(job.state);
  }
}

}  // namespace baton

#include "coordinator/outbox.h"

#include <chrono>
#include <utility>

#include "core/redact.h"
#include "core/task_kind.h"

namespace baton {
namespace {

// How long an ended attempt ran, when it says.
std::optional<double> SecondsRun(const TaskRecord& row) {
  if (!row.started_at) return std::nullopt;
  const std::optional<TimePoint>& end = row.completed_at ? row.completed_at : row.failed_at;
  if (!end) return std::nullopt;
  return std::chrono::duration<double>(*end - *row.started_at).count();
}

}  // namespace

Outbox::Outbox(const OutboxSinks& sinks, Clock& clock) : sinks_(sinks), clock_(clock) {}

void Outbox::Begin() {
  hooks_.clear();
  hooks_written_ = 0;
  changes_.clear();
  ended_.clear();
  retried_.clear();
}

void Outbox::Hook(const flow::Notify& n) {
  const TaskRecord* task = n.task ? &*n.task : nullptr;
  std::vector<WebhookDelivery> deliveries =
      WebhookDeliveriesFor(n.event, n.job, *n.definition, *n.context, task, clock_.Now(), NewId);
  if (deliveries.empty()) return;
  // Redacted as written (the job's secrets and the task's, as the API redacts them): a
  // delivery needs nothing of its job to be sent, so it outlives the job's deletion.
  JobRecord holder;
  holder.job = *n.definition;
  holder.context = *n.context;
  std::vector<std::string> secrets = SecretValues(holder);
  if (task != nullptr) AddSecretValues(task->task, secrets);
  for (WebhookDelivery& d : deliveries) {
    if (!secrets.empty()) d.body = RedactText(d.body, secrets);
    hooks_.push_back(std::move(d));
  }
}

void Outbox::Changed(const flow::Changed& c) {
  // Given while a stream listens (flow::Policy::live_events).
  if (sinks_.events == nullptr) return;
  changes_.push_back(
      {.kind = c.of == flow::Changed::Row::kJob ? Change::Kind::kJob : Change::Kind::kTask,
       .job_id = c.job_id,
       .task_id = c.task_id,
       .parent_id = c.parent_id,
       .state = c.state,
       .node_id = c.node_id,
       .progress = c.progress,
       .position = c.position,
       .task_count = c.task_count});
}

void Outbox::TaskCreated(const TaskRecord& row) {
  if (row.task.retry && row.task.retry->attempts > 0 && KindOf(row.task) == TaskKind::kRunnable) {
    retried_.push_back(row.task.queue);
  }
}

void Outbox::TaskUpdated(const flow::UpdateTask& e) {
  const TaskRecord& row = e.row;
  if (e.state_changed && (row.state == TaskState::kCompleted || row.state == TaskState::kFailed) &&
      KindOf(row.task) == TaskKind::kRunnable) {
    ended_.push_back({row.task.queue, row.state, SecondsRun(row)});
  }
}

Status Outbox::Write(Transaction& tx) {
  if (!hooks_.empty()) BATON_RETURN_IF_ERROR(tx.CreateWebhookDeliveries(hooks_));
  hooks_written_ = hooks_.size();
  return Status::Ok();
}

void Outbox::Committed(const std::vector<JobRecord>& finished) {
  if (hooks_written_ > 0 && sinks_.on_webhooks) sinks_.on_webhooks();
  if (sinks_.events != nullptr && !changes_.empty()) sinks_.events->Publish(std::move(changes_));
  changes_.clear();
  if (Metrics* m = sinks_.metrics) {
    for (const Ended& e : ended_) m->TaskEnded(e.queue, e.state, e.seconds);
    for (const std::string& queue : retried_) m->TaskRetried(queue);
    for (const JobRecord& job : finished) m->JobEnded(job.state);
  }
}

}  // namespace baton

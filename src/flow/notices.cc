// What a decision tells besides its rows (Changed, Notify: see types.h), built from the
// row effects once they hold the rows as the decision leaves them; and AfterCancel's
// notices for the rows a CancelActive cancelled.
#include <map>
#include <memory>
#include <utility>

#include "core/names.h"
#include "core/webhook.h"
#include "flow/decider.h"

namespace baton::flow {
namespace {

Changed JobChanged(const JobRecord& row) {
  return {.of = Changed::Row::kJob,
          .job_id = row.id,
          .state = std::string(ToString(row.state)),
          .progress = row.progress,
          .position = row.position,
          .task_count = row.task_count};
}

Changed TaskChanged(const TaskRecord& row) {
  return {.of = Changed::Row::kTask,
          .job_id = row.job_id,
          .task_id = row.id,
          .parent_id = row.parent_id,
          .state = std::string(ToString(row.state)),
          .node_id = row.node_id,
          .progress = row.progress,
          .position = row.position};
}

// A job's row without its definition and context (which a Notify shares).
JobRecord StateRow(const JobRecord& j) {
  JobRecord r;
  r.id = j.id;
  r.parent_id = j.parent_id;
  r.state = j.state;
  r.created_at = j.created_at;
  r.started_at = j.started_at;
  r.completed_at = j.completed_at;
  r.failed_at = j.failed_at;
  r.delete_at = j.delete_at;
  r.position = j.position;
  r.task_count = j.task_count;
  r.progress = j.progress;
  r.result = j.result;
  r.error = j.error;
  r.steps = j.steps;
  r.ending = j.ending;
  return r;
}

// The webhook event of a row write: a new row, or a state change, is a state change;
// else a move of its progress; else none ("").
std::string_view EventOf(bool job, bool created, bool state_changed, bool progress_changed) {
  if (created || state_changed) return job ? kEventJobStateChange : kEventTaskStateChange;
  if (progress_changed) return job ? kEventJobProgress : kEventTaskProgress;
  return {};
}

}  // namespace

// The Notify of job `job_id` without its task, made once per decision; null when the
// view holds neither the job's row nor its definition, or the definition has no webhooks.
const Notify* Decider::HookJob(const std::string& job_id, const WrittenJobs& written) {
  auto [it, fresh] = hook_jobs_.try_emplace(job_id);
  if (!fresh) return it->second ? &*it->second : nullptr;
  const JobRecord* job = nullptr;
  if (auto w = written.find(job_id); w != written.end()) {
    job = w->second;
  } else if (auto v = view_.jobs.find(job_id); v != view_.jobs.end()) {
    job = &v->second;
  }
  if (job == nullptr || Def(*job).webhooks.empty()) return nullptr;
  Notify n{.job = StateRow(*job)};
  // Shared as the view shares them; copied only from a row that holds them (a new job, a
  // changed context, a test's view).
  auto def = view_.definitions.find(job_id);
  n.definition = def != view_.definitions.end() && def->second != nullptr
                     ? def->second
                     : std::make_shared<const Job>(job->job);
  auto ctx = view_.contexts.find(job_id);
  n.context = !context_changed_.contains(job_id) && ctx != view_.contexts.end() && ctx->second
                  ? ctx->second
                  : std::make_shared<const json>(job->context);
  it->second = std::move(n);
  return &*it->second;
}

void Decider::AddNotify(std::string_view event, const std::string& job_id, const TaskRecord* task,
                        const WrittenJobs& written, std::vector<Effect>& out) {
  if (event.empty()) return;
  const Notify* base = HookJob(job_id, written);
  if (base == nullptr || !CallsWebhooks(*base->definition, event)) return;
  Notify n = *base;
  n.event = event;
  if (task != nullptr) n.task = *task;
  out.push_back(std::move(n));
}

// After RowEffects: each written row's Changed (with Policy::live_events), then the
// Notify of each that calls webhooks; and each CancelActive's hook.
std::vector<Effect> Decider::Notices(const std::vector<Effect>& rows) {
  WrittenJobs written;
  for (const Effect& e : rows) {
    if (const auto* c = std::get_if<CreateJob>(&e)) written[c->row.id] = &c->row;
    if (const auto* u = std::get_if<UpdateJob>(&e)) written[u->row.id] = &u->row;
  }
  const bool live = view_.policy.live_events;
  std::vector<Effect> changed;
  std::vector<Effect> notify;
  for (const Effect& e : rows) {
    if (const auto* c = std::get_if<CreateJob>(&e)) {
      if (live) changed.push_back(JobChanged(c->row));
      AddNotify(EventOf(true, true, false, false), c->row.id, nullptr, written, notify);
    } else if (const auto* u = std::get_if<UpdateJob>(&e)) {
      if (live) changed.push_back(JobChanged(u->row));
      AddNotify(EventOf(true, false, u->state_changed, u->progress_changed), u->row.id, nullptr,
                written, notify);
    } else if (const auto* ct = std::get_if<CreateTask>(&e)) {
      if (live) changed.push_back(TaskChanged(ct->row));
      AddNotify(EventOf(false, true, false, false), ct->row.job_id, &ct->row, written, notify);
    } else if (const auto* ut = std::get_if<UpdateTask>(&e)) {
      if (live) changed.push_back(TaskChanged(ut->row));
      AddNotify(EventOf(false, false, ut->state_changed, ut->progress_changed), ut->row.job_id,
                &ut->row, written, notify);
    }
  }
  for (CancelActive& c : cancels_) {
    const Notify* base = HookJob(c.job_id, written);
    if (base != nullptr && CallsWebhooks(*base->definition, kEventTaskStateChange)) {
      c.hook = *base;
      c.hook->event = kEventTaskStateChange;
    }
  }
  for (Effect& n : notify) changed.push_back(std::move(n));
  return changed;
}

std::vector<Effect> StoreJobs(std::vector<JobRecord> jobs, const Policy& policy) {
  Decider decider(View{.policy = policy}, TimePoint{});
  for (JobRecord& job : jobs) decider.Stored(std::move(job));
  return decider.Effects();
}

bool IsNotice(const Effect& effect) {
  return std::holds_alternative<Changed>(effect) || std::holds_alternative<Notify>(effect);
}

std::vector<Effect> AfterCancel(const CancelActive& cancel, const std::vector<CancelledRow>& rows,
                                const Policy& policy) {
  std::vector<Effect> out;
  if (policy.live_events) {
    for (const CancelledRow& row : rows) {
      out.push_back(Changed{.of = Changed::Row::kTask,
                            .job_id = cancel.job_id,
                            .task_id = row.id,
                            .state = std::string(ToString(TaskState::kCancelled))});
    }
  }
  if (cancel.hook) {
    for (const CancelledRow& row : rows) {
      if (!row.row) continue;
      Notify n = *cancel.hook;
      n.task = *row.row;
      out.push_back(std::move(n));
    }
  }
  for (Effect& e : AfterCancel(rows, policy)) out.push_back(std::move(e));
  return out;
}

}  // namespace baton::flow

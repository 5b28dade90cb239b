// Outbox: what one decision tells the world besides its rows. The webhook deliveries its
// row writes call for (core/webhook.h), written in the decision's own transaction (the
// outbox table, which the deliverer drains); the live-event changes (GET /events), published
// after the commit and only while a stream listens; and its metrics (ended attempts,
// retries, ended jobs), counted once stored. Every job is created through it (JobCreated),
// whichever way it came: a submission, a scheduled tick, a sub-job.
//
// Jobs without webhooks on an event cost a look at their (shared) definition.
//
// Thread-safety: not thread-safe; one per decision, used by the thread taking it. The
// sinks it reports to (EventHub, Metrics, the deliverer's wake-up) are thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "coordinator/events.h"
#include "coordinator/job_cache.h"
#include "core/records.h"
#include "core/webhook.h"
#include "datastore/datastore.h"
#include "flow/flow.h"
#include "metrics/metrics.h"

namespace baton {

// Where decisions report to; each may be empty.
struct OutboxSinks {
  std::function<void()> on_webhooks;  // after a commit that wrote deliveries
  Metrics* metrics = nullptr;
  EventHub* events = nullptr;
};

class Outbox {
 public:
  Outbox(const OutboxSinks& sinks, JobCache& cache, Clock& clock);

  // A decision's scope begins (again, when the datastore retries it): nothing recorded.
  void Begin();
  // Recorded for what a row effect wrote, in the scope of `tx`.
  void JobCreated(const JobRecord& row);
  Status JobUpdated(Transaction& tx, const flow::UpdateJob& e, JobCache::Scope& scope);
  Status TaskCreated(Transaction& tx, const TaskRecord& row, JobCache::Scope& scope);
  Status TaskUpdated(Transaction& tx, const flow::UpdateTask& e, JobCache::Scope& scope);
  Status TasksCancelled(Transaction& tx, const std::string& job_id,
                        const std::vector<CancelledTask>& cancelled, JobCache::Scope& scope);
  // Stores the deliveries recorded, in the scope.
  Status Write(Transaction& tx);
  // The scope committed: wakes the deliverer, publishes the changes, counts.
  void Committed(const std::vector<JobRecord>& finished);

 private:
  // A job's state row and context as a hook reports them.
  struct HookJob {
    JobRecord row;
    std::shared_ptr<const nlohmann::json> context;
  };
  Result<HookJob> HookJobOf(Transaction& tx, const std::string& job_id, JobCache::Scope& scope);
  Status TaskHooks(Transaction& tx, const TaskRecord& row, std::string_view event,
                   JobCache::Scope& scope);
  void Add(std::vector<WebhookDelivery> more);
  void Change(baton::Change change);

  const OutboxSinks& sinks_;
  JobCache& cache_;
  Clock& clock_;
  EventHub* events_ = nullptr;  // sinks_.events while a stream listens
  std::vector<WebhookDelivery> hooks_;
  std::size_t hooks_written_ = 0;
  std::vector<baton::Change> changes_;
  struct Ended {  // an attempt ended: (queue, state, seconds run)
    std::string queue;
    TaskState state;
    std::optional<double> seconds;
  };
  std::vector<Ended> ended_;
  std::vector<std::string> retried_;  // queues of the retry attempts created
};

}  // namespace baton

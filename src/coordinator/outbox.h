// Outbox: what one decision tells the world besides its rows, as flow's notices say
// (flow::Notify, flow::Changed: built from the rows as the decision leaves them, so the
// outbox reads nothing). The webhook deliveries each Notify calls for (core/webhook.h:
// its job's webhooks on the event, their `if`), written in the decision's own
// transaction (the outbox table, which the deliverer drains); the live-event changes
// (GET /events), published after the commit; and its metrics (ended attempts, retries,
// ended jobs), counted once stored.
//
// Thread-safety: not thread-safe; one per decision, used by the thread taking it. The
// sinks it reports to (EventHub, Metrics, the deliverer's wake-up) are thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "coordinator/events.h"
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
  Outbox(const OutboxSinks& sinks, Clock& clock);

  // A decision's scope begins (again, when the datastore retries it): nothing recorded.
  void Begin();
  // Recorded for what a row effect wrote (metrics).
  void TaskCreated(const TaskRecord& row);
  void TaskUpdated(const flow::UpdateTask& e);
  // Recorded for flow's notices.
  void Hook(const flow::Notify& notify);
  void Changed(const flow::Changed& changed);
  // Stores the deliveries recorded, in the scope.
  Status Write(Transaction& tx);
  // The scope committed: wakes the deliverer, publishes the changes, counts.
  void Committed(const std::vector<JobRecord>& finished);

 private:
  const OutboxSinks& sinks_;
  Clock& clock_;
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

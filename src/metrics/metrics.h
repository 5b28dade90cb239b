// Metrics: what the engine did since it started (counters and histograms kept in
// process), and the Prometheus text exposition of them together with the gauges read at
// scrape time (jobs and tasks by state, queues, nodes). prometheus-cpp stays here.
//
// Names (every one prefixed baton_):
// - jobs{state}, tasks{state}: rows in each state now (gauges, from the datastore);
// - jobs_ended_total{state}: jobs that reached COMPLETED, FAILED or CANCELLED;
// - tasks_ended_total{queue,state}: task attempts that ended (a retry is a new attempt);
// - task_retries_total{queue}: attempts created by a task's retry;
// - task_duration_seconds{queue}: how long attempts ran, from start to end (histogram);
// - queue_messages{queue}, queue_consumers{queue}, queue_unacked{queue} (gauges);
// - webhook_attempts_total{outcome}: calls of a webhook that were delivered, will be
//   retried, or failed for good; webhook_deliveries_total{state}: deliveries that ended
//   DELIVERED or FAILED;
// - node_cpu_percent, node_memory_bytes, node_tasks {node,name,hostname,status} (gauges);
// - scheduler_event_seconds{event}: how long one scheduler decision took, from taking
//   its job's lock to its commit and after-commit effects (histogram).
// Counters count from this process's start: a restart resets them, as Prometheus expects
// (rate() handles it); each coordinator counts what it decided.
//
// Thread-safety: thread-safe (prometheus-cpp's families and metrics are).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "broker/broker.h"
#include "core/records.h"
#include "core/states.h"

namespace baton {

// What a scrape reads from the datastore and the broker, given to Exposition.
struct MetricsSnapshot {
  std::map<JobState, std::int64_t> jobs;
  std::map<TaskState, std::int64_t> tasks;
  std::vector<QueueInfo> queues;
  std::vector<NodeRecord> nodes;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void JobEnded(JobState state);
  // An attempt of a leaf task on `queue` ended in `state`; `seconds` it ran, when it
  // started at all (a task cancelled in its queue never ran).
  void TaskEnded(std::string_view queue, TaskState state, std::optional<double> seconds);
  void TaskRetried(std::string_view queue);
  // One scheduler decision about `event` (flow's event name) took `seconds`.
  void EventDecided(std::string_view event, double seconds);
  // outcome: "delivered", "retry" or "failed".
  void WebhookAttempted(std::string_view outcome);
  // state: "DELIVERED" or "FAILED".
  void WebhookEnded(std::string_view state);
  // One message of the coordinators' events relay: direction "sent" or "received",
  // message "want" or "changes".
  void EventsRelayed(std::string_view direction, std::string_view message);

  // The Prometheus text format (version 0.0.4) of the counters and histograms and of
  // `now`'s gauges.
  std::string Exposition(const MetricsSnapshot& now) const;

  // The content type of Exposition's text.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  struct Families;
  std::unique_ptr<Families> f_;
};

}  // namespace baton

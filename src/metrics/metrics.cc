#include "metrics/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>

namespace baton {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;
using prometheus::ClientMetric;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Histogram;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Seconds a task attempt may take: from a `true` to an hour.
const Histogram::BucketBoundaries kTaskBuckets = {0.01, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
                                                  5,    10,   30,  60,   300, 900, 3600};
// Seconds one scheduler decision may take: from a fraction of a fsync to a big each.
const Histogram::BucketBoundaries kEventBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                   0.05,   0.1,   0.25,   0.5,   1,    2.5};

MetricFamily Gauges(std::string name, std::string help) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = MetricType::Gauge;
  return family;
}

void AddGauge(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

struct Metrics::Families {
  prometheus::Registry registry;
  Family<Counter>& jobs_ended = BuildCounter()
                                    .Name("baton_jobs_ended_total")
                                    .Help("Jobs that reached COMPLETED, FAILED or CANCELLED.")
                                    .Register(registry);
  Family<Counter>& tasks_ended = BuildCounter()
                                     .Name("baton_tasks_ended_total")
                                     .Help("Task attempts that ended, by queue and end state.")
                                     .Register(registry);
  Family<Counter>& task_retries = BuildCounter()
                                      .Name("baton_task_retries_total")
                                      .Help("Task attempts created by a retry, by queue.")
                                      .Register(registry);
  Family<Histogram>& task_duration =
      BuildHistogram()
          .Name("baton_task_duration_seconds")
          .Help("How long task attempts ran, from their start to their end, by queue.")
          .Register(registry);
  Family<Histogram>& event_seconds = BuildHistogram()
                                         .Name("baton_scheduler_event_seconds")
                                         .Help("How long one scheduler decision took, by event.")
                                         .Register(registry);
  Family<Counter>& webhook_attempts =
      BuildCounter()
          .Name("baton_webhook_attempts_total")
          .Help("Calls of webhooks: delivered, to be retried, or failed for good.")
          .Register(registry);
  Family<Counter>& webhook_deliveries =
      BuildCounter()
          .Name("baton_webhook_deliveries_total")
          .Help("Webhook deliveries that ended DELIVERED or FAILED.")
          .Register(registry);
  Family<Counter>& events_relayed =
      BuildCounter()
          .Name("baton_events_relayed_total")
          .Help("Messages between coordinators for GET /events, by direction and kind.")
          .Register(registry);
};

Metrics::Metrics() : f_(std::make_unique<Families>()) {}
Metrics::~Metrics() = default;

void Metrics::JobEnded(JobState state) {
  f_->jobs_ended.Add({{"state", std::string(ToString(state))}}).Increment();
}

void Metrics::TaskEnded(std::string_view queue, TaskState state, std::optional<double> seconds) {
  std::string q(queue);
  f_->tasks_ended.Add({{"queue", q}, {"state", std::string(ToString(state))}}).Increment();
  if (seconds) f_->task_duration.Add({{"queue", q}}, kTaskBuckets).Observe(*seconds);
}

void Metrics::TaskRetried(std::string_view queue) {
  f_->task_retries.Add({{"queue", std::string(queue)}}).Increment();
}

void Metrics::EventDecided(std::string_view event, double seconds) {
  f_->event_seconds.Add({{"event", std::string(event)}}, kEventBuckets).Observe(seconds);
}

void Metrics::WebhookAttempted(std::string_view outcome) {
  f_->webhook_attempts.Add({{"outcome", std::string(outcome)}}).Increment();
}

void Metrics::WebhookEnded(std::string_view state) {
  f_->webhook_deliveries.Add({{"state", std::string(state)}}).Increment();
}

void Metrics::EventsRelayed(std::string_view direction, std::string_view message) {
  f_->events_relayed.Add({{"direction", std::string(direction)}, {"message", std::string(message)}})
      .Increment();
}

std::string Metrics::Exposition(const MetricsSnapshot& now) const {
  std::vector<MetricFamily> families = f_->registry.Collect();

  MetricFamily jobs = Gauges("baton_jobs", "Jobs in each state now.");
  for (JobState s :
       {JobState::kPending, JobState::kScheduled, JobState::kRunning, JobState::kCompleted,
        JobState::kFailed, JobState::kCancelled, JobState::kPaused}) {
    auto it = now.jobs.find(s);
    AddGauge(jobs, {{"state", std::string(ToString(s))}},
             static_cast<double>(it == now.jobs.end() ? 0 : it->second));
  }
  families.push_back(std::move(jobs));

  MetricFamily tasks = Gauges("baton_tasks", "Task rows (attempts) in each state now.");
  for (TaskState s :
       {TaskState::kCreated, TaskState::kPending, TaskState::kScheduled, TaskState::kRunning,
        TaskState::kCompleted, TaskState::kFailed, TaskState::kCancelled, TaskState::kSkipped}) {
    auto it = now.tasks.find(s);
    AddGauge(tasks, {{"state", std::string(ToString(s))}},
             static_cast<double>(it == now.tasks.end() ? 0 : it->second));
  }
  families.push_back(std::move(tasks));

  MetricFamily messages = Gauges("baton_queue_messages", "Messages waiting in a queue.");
  MetricFamily consumers = Gauges("baton_queue_consumers", "Consumers of a queue.");
  MetricFamily unacked =
      Gauges("baton_queue_unacked", "Messages of a queue delivered and not yet acknowledged.");
  for (const QueueInfo& q : now.queues) {
    AddGauge(messages, {{"queue", q.name}}, static_cast<double>(q.size));
    AddGauge(consumers, {{"queue", q.name}}, static_cast<double>(q.subscribers));
    AddGauge(unacked, {{"queue", q.name}}, static_cast<double>(q.unacked));
  }
  families.push_back(std::move(messages));
  families.push_back(std::move(consumers));
  families.push_back(std::move(unacked));

  MetricFamily cpu = Gauges("baton_node_cpu_percent", "CPU use of a node's machine, percent.");
  MetricFamily memory =
      Gauges("baton_node_memory_bytes", "Resident memory of a node's baton process.");
  MetricFamily running = Gauges("baton_node_tasks", "Tasks a node is running.");
  for (const NodeRecord& n : now.nodes) {
    std::vector<ClientMetric::Label> labels = {{"hostname", n.hostname},
                                               {"name", n.name},
                                               {"node", n.id},
                                               {"status", std::string(ToString(n.status))}};
    AddGauge(cpu, labels, n.cpu_percent);
    AddGauge(memory, labels, static_cast<double>(n.memory_bytes));
    AddGauge(running, labels, n.task_count);
  }
  families.push_back(std::move(cpu));
  families.push_back(std::move(memory));
  families.push_back(std::move(running));

  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace baton

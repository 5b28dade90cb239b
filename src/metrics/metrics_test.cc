#include "metrics/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace baton {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsTest, CountersCountWhatHappenedByTheirLabels) {
  Metrics m;
  m.JobEnded(JobState::kCompleted);
  m.JobEnded(JobState::kCompleted);
  m.JobEnded(JobState::kFailed);
  m.TaskEnded("gpu", TaskState::kFailed, 2.0);
  m.TaskRetried("gpu");
  m.WebhookAttempted("retry");
  m.WebhookAttempted("delivered");
  m.WebhookEnded("DELIVERED");
  m.EventsRelayed("sent", "changes");
  m.EventsRelayed("sent", "changes");
  m.EventsRelayed("received", "want");
  std::string text = m.Exposition({});
  EXPECT_THAT(text, HasSubstr("baton_jobs_ended_total{state=\"COMPLETED\"} 2"));
  EXPECT_THAT(text, HasSubstr("baton_jobs_ended_total{state=\"FAILED\"} 1"));
  EXPECT_THAT(text, HasSubstr("baton_tasks_ended_total{queue=\"gpu\",state=\"FAILED\"} 1"));
  EXPECT_THAT(text, HasSubstr("baton_task_retries_total{queue=\"gpu\"} 1"));
  EXPECT_THAT(text, HasSubstr("baton_webhook_attempts_total{outcome=\"retry\"} 1"));
  EXPECT_THAT(text, HasSubstr("baton_webhook_deliveries_total{state=\"DELIVERED\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("baton_events_relayed_total{direction=\"sent\",message=\"changes\"} 2"));
  EXPECT_THAT(text,
              HasSubstr("baton_events_relayed_total{direction=\"received\",message=\"want\"} 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE baton_jobs_ended_total counter"));
}

TEST(MetricsTest, TaskDurationsFallIntoTheirBucketsAndATaskThatNeverRanHasNone) {
  Metrics m;
  m.TaskEnded("default", TaskState::kCompleted, 0.03);
  m.TaskEnded("default", TaskState::kCompleted, 7.0);
  m.TaskEnded("default", TaskState::kCancelled, std::nullopt);
  std::string text = m.Exposition({});
  EXPECT_THAT(text, HasSubstr("# TYPE baton_task_duration_seconds histogram"));
  EXPECT_THAT(text,
              HasSubstr("baton_task_duration_seconds_bucket{queue=\"default\",le=\"0.01\"} 0"));
  EXPECT_THAT(text,
              HasSubstr("baton_task_duration_seconds_bucket{queue=\"default\",le=\"0.05\"} 1"));
  EXPECT_THAT(text, HasSubstr("baton_task_duration_seconds_bucket{queue=\"default\",le=\"10\"} 2"));
  EXPECT_THAT(text,
              HasSubstr("baton_task_duration_seconds_bucket{queue=\"default\",le=\"+Inf\"} 2"));
  EXPECT_THAT(text, HasSubstr("baton_task_duration_seconds_count{queue=\"default\"} 2"));
  EXPECT_THAT(text, HasSubstr("baton_tasks_ended_total{queue=\"default\",state=\"CANCELLED\"} 1"));
}

TEST(MetricsTest, EventLatencyIsAHistogramByEvent) {
  Metrics m;
  m.EventDecided("TaskFinished", 0.002);
  std::string text = m.Exposition({});
  EXPECT_THAT(
      text,
      HasSubstr("baton_scheduler_event_seconds_bucket{event=\"TaskFinished\",le=\"0.0025\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr("baton_scheduler_event_seconds_bucket{event=\"TaskFinished\",le=\"0.001\"} 0"));
}

TEST(MetricsTest, GaugesShowTheSnapshotWithEveryStateEvenAtZero) {
  Metrics m;
  MetricsSnapshot now;
  now.jobs[JobState::kRunning] = 3;
  now.tasks[TaskState::kPending] = 7;
  now.queues.push_back({"default", 5, 2, 1});
  NodeRecord node;
  node.id = "n1";
  node.name = "worker";
  node.hostname = "h\"1";
  node.cpu_percent = 12.5;
  node.memory_bytes = 1048576;
  node.task_count = 4;
  now.nodes.push_back(node);
  std::string text = m.Exposition(now);
  EXPECT_THAT(text, HasSubstr("baton_jobs{state=\"RUNNING\"} 3"));
  EXPECT_THAT(text, HasSubstr("baton_jobs{state=\"PENDING\"} 0"));
  EXPECT_THAT(text, HasSubstr("baton_tasks{state=\"PENDING\"} 7"));
  EXPECT_THAT(text, HasSubstr("baton_tasks{state=\"SKIPPED\"} 0"));
  EXPECT_THAT(text, HasSubstr("baton_queue_messages{queue=\"default\"} 5"));
  EXPECT_THAT(text, HasSubstr("baton_queue_consumers{queue=\"default\"} 2"));
  EXPECT_THAT(text, HasSubstr("baton_queue_unacked{queue=\"default\"} 1"));
  // A label value is escaped.
  EXPECT_THAT(text,
              HasSubstr("baton_node_memory_bytes{hostname=\"h\\\"1\",name=\"worker\",node=\"n1\","
                        "status=\"UP\"} 1048576"));
  EXPECT_THAT(text, HasSubstr("baton_node_cpu_percent{hostname=\"h\\\"1\""));
  EXPECT_THAT(text, Not(HasSubstr("baton_jobs_ended_total{")));
}

}  // namespace
}  // namespace baton

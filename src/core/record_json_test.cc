#include "core/record_json.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TaskRecord EachParent() {
  TaskRecord t;
  t.id = NewId();
  t.job_id = NewId();
  t.parent_id = NewId();
  t.position = 2;
  t.state = TaskState::kRunning;
  t.created_at = Now();
  t.scheduled_at = t.created_at + std::chrono::milliseconds(5);
  t.started_at = t.created_at + std::chrono::milliseconds(9);
  t.task.name = "loop";
  Task child;
  child.name = "c";
  child.run = "echo";
  t.task.each = Each{"", "{{ sequence(1, 4) }}", Box<Task>(child), 2};
  t.each_size = 3;
  t.each_index = 2;
  t.completions = 1;
  t.node_id = "node-1";
  t.progress = 33.5;
  t.redelivered = 1;
  return t;
}

TEST(RecordJsonTest, TaskRecordsRoundTrip) {
  TaskRecord t = EachParent();
  nlohmann::json j = ToJson(t);
  EXPECT_EQ(j["each"]["size"], 3);
  EXPECT_EQ(j["each"]["index"], 2);
  EXPECT_EQ(j["state"], "RUNNING");
  EXPECT_EQ(j["jobId"], t.job_id);
  auto back = TaskRecordFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, t);
}

TEST(RecordJsonTest, FinishedRunnableTaskRoundTrips) {
  TaskRecord t;
  t.id = NewId();
  t.job_id = NewId();
  t.position = 1;
  t.state = TaskState::kFailed;
  t.created_at = Now();
  t.failed_at = t.created_at;
  t.task.name = "t";
  t.task.run = "exit 1";
  t.task.retry = Retry{.limit = 2, .attempts = 1};
  t.error = "exit code 1";
  auto back = TaskRecordFromJson(ToJson(t));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, t);
}

TEST(RecordJsonTest, BadTaskJsonIsAnError) {
  EXPECT_FALSE(TaskRecordFromJson(nlohmann::json::array()).ok());
  EXPECT_FALSE(TaskRecordFromJson({{"name", "t"}, {"state", "NOPE"}}).ok());
  EXPECT_FALSE(TaskRecordFromJson({{"name", "t"}, {"createdAt", "yesterday"}}).ok());
  EXPECT_FALSE(TaskRecordFromJson({{"name", "t"}, {"bogus", 1}}).ok());
}

TEST(RecordJsonTest, JobSummaryLeavesOutTheHeavyParts) {
  JobRecord job;
  job.id = NewId();
  job.created_at = Now();
  job.job.name = "j";
  job.job.secrets = {{"k", "v"}};
  Task t;
  t.name = "t";
  t.run = "echo";
  job.job.tasks = {t};
  job.task_count = 1;
  nlohmann::json summary = ToJson(job, true);
  EXPECT_EQ(summary["name"], "j");
  EXPECT_EQ(summary["state"], "PENDING");
  EXPECT_FALSE(summary.contains("tasks"));
  EXPECT_FALSE(summary.contains("secrets"));
  EXPECT_FALSE(summary.contains("context"));
  nlohmann::json full = ToJson(job, false);
  EXPECT_TRUE(full.contains("tasks"));
  EXPECT_TRUE(full.contains("context"));
}

}  // namespace
}  // namespace baton

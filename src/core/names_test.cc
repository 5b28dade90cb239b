#include "core/names.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(NamesTest, JobStatesRoundTrip) {
  for (auto s : {JobState::kPending, JobState::kScheduled, JobState::kRunning, JobState::kCompleted,
                 JobState::kFailed, JobState::kCancelled, JobState::kPaused}) {
    EXPECT_EQ(ParseJobState(ToString(s)), s) << ToString(s);
  }
  EXPECT_EQ(ToString(JobState::kCompleted), "COMPLETED");
  EXPECT_FALSE(ParseJobState("completed").has_value());
}

TEST(NamesTest, TaskStatesRoundTrip) {
  for (auto s :
       {TaskState::kCreated, TaskState::kPending, TaskState::kScheduled, TaskState::kRunning,
        TaskState::kCompleted, TaskState::kFailed, TaskState::kCancelled, TaskState::kSkipped}) {
    EXPECT_EQ(ParseTaskState(ToString(s)), s) << ToString(s);
  }
  EXPECT_EQ(ToString(TaskState::kSkipped), "SKIPPED");
  EXPECT_FALSE(ParseTaskState("DONE").has_value());
}

TEST(NamesTest, DeliveryStatesRoundTrip) {
  for (auto s : {DeliveryState::kPending, DeliveryState::kDelivered, DeliveryState::kFailed}) {
    EXPECT_EQ(ParseDeliveryState(ToString(s)), s) << ToString(s);
  }
  EXPECT_EQ(ToString(DeliveryState::kDelivered), "DELIVERED");
  EXPECT_FALSE(ParseDeliveryState("delivered").has_value());
}

TEST(NamesTest, WebhookEventsAreTorksFour) {
  std::vector<std::string_view> events(WebhookEvents().begin(), WebhookEvents().end());
  EXPECT_EQ(events, (std::vector<std::string_view>{"job.StateChange", "job.Progress",
                                                   "task.StateChange", "task.Progress"}));
}

TEST(NamesTest, NodeStatusesRoundTrip) {
  for (auto s : {NodeStatus::kUp, NodeStatus::kDown, NodeStatus::kOffline}) {
    EXPECT_EQ(ParseNodeStatus(ToString(s)), s) << ToString(s);
  }
  EXPECT_EQ(ToString(NodeStatus::kOffline), "OFFLINE");
  EXPECT_FALSE(ParseNodeStatus("up").has_value());
}

TEST(NamesTest, EngineQueuesAreReserved) {
  for (auto q : EngineQueues()) EXPECT_TRUE(IsReservedQueueName(q)) << q;
  EXPECT_TRUE(IsReservedQueueName("x-anything"));
  EXPECT_TRUE(IsReservedQueueName("jobs"));
  EXPECT_FALSE(IsReservedQueueName("default"));
  EXPECT_FALSE(IsReservedQueueName("gpu"));
}

}  // namespace
TEST(NamesTest, AnIdentifierIsLettersDigitsAndUnderscoreNotStartingWithADigit) {
  EXPECT_TRUE(IsIdentifier("approved"));
  EXPECT_TRUE(IsIdentifier("_go2"));
  EXPECT_FALSE(IsIdentifier(""));
  EXPECT_FALSE(IsIdentifier("2go"));
  EXPECT_FALSE(IsIdentifier("no way"));
  EXPECT_FALSE(IsIdentifier("a-b"));
}

}  // namespace baton

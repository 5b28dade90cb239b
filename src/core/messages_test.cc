#include "core/messages.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(MessagesTest, RoundTrip) {
  TimePoint at = Now();
  auto started = DecodeTaskStarted(
      Encode(TaskStarted{.task_id = "t1", .job_id = "j1", .node_id = "n1", .at = at}));
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->task_id, "t1");
  EXPECT_EQ(started->job_id, "j1");
  EXPECT_EQ(started->node_id, "n1");
  EXPECT_EQ(started->at, at);

  auto finished = DecodeTaskFinished(Encode(TaskFinished{.task_id = "t2",
                                                         .job_id = "j2",
                                                         .node_id = "n2",
                                                         .outcome = TaskFinished::Outcome::kFailed,
                                                         .error = "exit code 1",
                                                         .reason = FailReason::kExit,
                                                         .exit_code = 75,
                                                         .at = at}));
  ASSERT_TRUE(finished.ok());
  EXPECT_EQ(finished->reason, FailReason::kExit);
  EXPECT_EQ(finished->exit_code, 75);
  EXPECT_EQ(finished->job_id, "j2");
  EXPECT_EQ(finished->node_id, "n2");
  EXPECT_EQ(finished->outcome, TaskFinished::Outcome::kFailed);
  EXPECT_EQ(finished->error, "exit code 1");
  EXPECT_FALSE(finished->started_at.has_value());

  auto quick =
      DecodeTaskFinished(Encode(TaskFinished{.task_id = "t2", .at = at, .started_at = at}));
  ASSERT_TRUE(quick.ok());
  EXPECT_EQ(quick->started_at, at);
  EXPECT_EQ(quick->reason, FailReason::kNone);  // none said (a completion, an older worker)
  EXPECT_FALSE(quick->exit_code.has_value());

  auto progress =
      DecodeTaskProgress(Encode(TaskProgress{.task_id = "t3", .job_id = "j3", .progress = 42.5}));
  ASSERT_TRUE(progress.ok());
  EXPECT_EQ(progress->progress, 42.5);
  EXPECT_EQ(progress->job_id, "j3");

  LogPart part{"p", "t4", "j", 3, "hello\n", at};
  auto log = DecodeLogPart(Encode(part));
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(*log, part);

  NodeRecord node{"n", "worker", "host", "0.1.0",         "default:2", at,
                  at,  12.5,     3,      NodeStatus::kUp, 5 << 20};
  auto hb = DecodeNodeRecord(Encode(node));
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(*hb, node);
}

TEST(MessagesTest, CancelCarriesManyTasksAndReadsTheOldSingleForm) {
  auto many = DecodeCancelTask(Encode(CancelTask{{"a", "b", "c"}}));
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(many->task_ids, (std::vector<std::string>{"a", "b", "c"}));
  auto single = DecodeCancelTask(R"({"taskId":"x"})");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->task_ids, (std::vector<std::string>{"x"}));
  EXPECT_FALSE(single->complete);
}

TEST(MessagesTest, CancelSaysWhenItCompletesTheStoredDrops) {
  auto last = DecodeCancelTask(Encode(CancelTask{.task_ids = {"a"}, .complete = true}));
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(last->complete);
  EXPECT_EQ(Encode(CancelTask{{"a"}}), R"({"taskIds":["a"]})");
}

TEST(MessagesTest, BadBodiesAreErrors) {
  EXPECT_FALSE(DecodeTaskStarted("not json").ok());
  EXPECT_FALSE(DecodeTaskFinished("{}").ok());
  EXPECT_FALSE(DecodeCancelTask("[1]").ok());
}

TEST(MessagesTest, InvalidUtf8IsReplaced) {
  EXPECT_EQ(SanitizeUtf8("ok \xff end"), "ok \xEF\xBF\xBD end");
  EXPECT_EQ(SanitizeUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  auto log = DecodeLogPart(Encode(LogPart{"p", "t", "j", 1, "\xff", {}}));
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->contents, "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace baton

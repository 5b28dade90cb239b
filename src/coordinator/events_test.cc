// The event hub of GET /events: filters, formatting, the bound on a slow stream.
#include "coordinator/events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/event_streams.h"
#include "testing/wait_for.h"

namespace baton {
namespace {

using ::testing::HasSubstr;
using testing::JobTo;
using ::testing::Not;
using testing::TakeUntil;

Change LogOf(const std::string& job, const std::string& text) {
  return {
      .kind = Change::Kind::kLog, .job_id = job, .task_id = "t1", .contents = text, .number = 1};
}

TEST(EventFormatTest, EachKindIsOneEventWithItsFieldsOnOneDataLine) {
  EXPECT_EQ(
      FormatEvent(JobTo("j1", "RUNNING")),
      "event: job\ndata: "
      "{\"jobId\":\"j1\",\"position\":0,\"progress\":0.0,\"state\":\"RUNNING\",\"taskCount\":1}"
      "\n\n");
  Change task{.kind = Change::Kind::kTask,
              .job_id = "j1",
              .task_id = "t1",
              .parent_id = "p1",
              .state = "COMPLETED",
              .node_id = "n1",
              .progress = 100,
              .position = 2};
  EXPECT_EQ(FormatEvent(task),
            "event: task\ndata: {\"jobId\":\"j1\",\"nodeId\":\"n1\",\"parentId\":\"p1\","
            "\"position\":2,\"progress\":100.0,\"state\":\"COMPLETED\",\"taskId\":\"t1\"}\n\n");
  // A log's newlines stay inside its JSON string: still one data line.
  EXPECT_EQ(FormatEvent(LogOf("j1", "a\nb\n")),
            "event: log\ndata: {\"contents\":\"a\\nb\\n\",\"jobId\":\"j1\",\"number\":1,"
            "\"taskId\":\"t1\"}\n\n");
}

TEST(EventHubTest, IsWantedOnlyWhileAStreamIsSubscribed) {
  EventHub hub;
  EXPECT_FALSE(hub.Wanted());
  {
    std::shared_ptr<EventStream> stream = hub.Subscribe({});
    EXPECT_TRUE(hub.Wanted());
    std::shared_ptr<EventStream> another = hub.Subscribe({});
    stream->Close();
    EXPECT_TRUE(hub.Wanted());
  }
  EXPECT_FALSE(hub.Wanted());
}

TEST(EventHubTest, AJobsStreamGetsItsChangesAndLogsAndNoOtherJobs) {
  EventHub hub;
  std::shared_ptr<EventStream> one = hub.Subscribe({.job_id = "j1"});
  std::shared_ptr<EventStream> all = hub.Subscribe({});
  hub.Publish({JobTo("j2", "RUNNING"), LogOf("j1", "hello"), JobTo("j1", "COMPLETED")});
  std::string got = TakeUntil(*one, "COMPLETED");
  EXPECT_THAT(got, HasSubstr("\"contents\":\"hello\""));
  EXPECT_THAT(got, Not(HasSubstr("j2")));
  // Every job's stream: state changes of all, log parts of none.
  std::string everything = TakeUntil(*all, "COMPLETED");
  EXPECT_THAT(everything, HasSubstr("\"jobId\":\"j2\""));
  EXPECT_THAT(everything, Not(HasSubstr("event: log")));
}

TEST(EventHubTest, AStreamWithoutLogsGetsNoLogParts) {
  EventHub hub;
  std::shared_ptr<EventStream> quiet = hub.Subscribe({.job_id = "j1", .logs = false});
  hub.Publish({LogOf("j1", "hello"), JobTo("j1", "COMPLETED")});
  EXPECT_THAT(TakeUntil(*quiet, "COMPLETED"), Not(HasSubstr("hello")));
}

TEST(EventHubTest, TheVisibleFilterHidesJobsFromAStream) {
  EventHub hub;
  std::shared_ptr<EventStream> stream =
      hub.Subscribe({.visible = [](const std::string& job) { return job != "secret"; }});
  hub.Publish({JobTo("secret", "RUNNING"), JobTo("open", "COMPLETED")});
  std::string got = TakeUntil(*stream, "COMPLETED");
  EXPECT_THAT(got, HasSubstr("\"jobId\":\"open\""));
  EXPECT_THAT(got, Not(HasSubstr("secret")));
}

TEST(EventHubTest, WakesTheReaderOnceEventsArePending) {
  EventHub hub;
  std::shared_ptr<EventStream> stream = hub.Subscribe({});
  std::atomic<int> wakes = 0;
  stream->SetWake([&] { ++wakes; });
  hub.Publish({JobTo("j1", "RUNNING")});
  ASSERT_TRUE(testing::WaitFor([&] { return wakes > 0; }, std::chrono::seconds(5)));
  EXPECT_THAT(stream->Take(), HasSubstr("RUNNING"));
  // Closed: no more wakes, and the hub forgets it.
  stream->Close();
  int before = wakes;
  hub.Publish({JobTo("j1", "COMPLETED")});
  std::shared_ptr<EventStream> later = hub.Subscribe({});
  hub.Publish({JobTo("j9", "DONE")});
  ASSERT_FALSE(TakeUntil(*later, "j9").empty());
  EXPECT_EQ(wakes, before);
}

TEST(EventStreamTest, AStreamTooFarBehindDropsItsBacklogForOneResync) {
  auto interest = std::make_shared<EventInterest>();
  interest->streams = 1;
  interest->wanted = 1;
  EventStream stream(interest);
  std::string event = FormatEvent(LogOf("j1", std::string(1000, 'x')));
  for (std::size_t sent = 0; sent <= EventStream::kMaxPendingBytes; sent += event.size()) {
    stream.Append(event);
  }
  stream.Append(event);  // dropped too: the client reads everything afresh
  EXPECT_EQ(stream.Take(), "event: resync\ndata: {}\n\n");
  stream.Append(event);
  EXPECT_EQ(stream.Take(), event);
  stream.Close();
  EXPECT_EQ(interest->streams, 0);
  EXPECT_EQ(interest->wanted, 0);
}

}  // namespace
}  // namespace baton

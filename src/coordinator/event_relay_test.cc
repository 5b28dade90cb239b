// The events relay between coordinators: its messages, its wants and their expiry over a
// fake clock, and two coordinators over one in-memory broker.
#include "coordinator/event_relay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>

#include "broker/inmemory/inmemory_broker.h"
#include "coordinator/coordinator.h"
#include "core/job_decode.h"
#include "core/names.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "testing/event_streams.h"
#include "testing/fake_clock.h"
#include "testing/wait_for.h"

namespace baton {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing::JobTo;
using testing::TakeUntil;

constexpr milliseconds kInterval{2000};

TEST(RelayMessageTest, ChangesOfEveryKindRoundTripWithEveryField) {
  RelayMessage message{.from = "c1",
                       .changes = {{.kind = Change::Kind::kJob,
                                    .job_id = "j1",
                                    .state = "RUNNING",
                                    .progress = 50,
                                    .position = 2,
                                    .task_count = 3},
                                   {.kind = Change::Kind::kTask,
                                    .job_id = "j1",
                                    .task_id = "t1",
                                    .parent_id = "p1",
                                    .state = "COMPLETED",
                                    .node_id = "n1",
                                    .progress = 100,
                                    .position = 1},
                                   {.kind = Change::Kind::kLog,
                                    .job_id = "j1",
                                    .task_id = "t1",
                                    .contents = "line\n\"quoted\"\n",
                                    .number = 7}}};
  auto decoded = DecodeRelayMessage(EncodeRelayMessage(message));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->from, "c1");
  EXPECT_FALSE(decoded->want);
  ASSERT_EQ(decoded->changes.size(), 3u);
  // What a stream is sent is the same, field by field.
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(FormatEvent(decoded->changes[i]), FormatEvent(message.changes[i])) << i;
    EXPECT_EQ(decoded->changes[i].kind, message.changes[i].kind) << i;
  }
}

TEST(RelayMessageTest, AWantRoundTrips) {
  auto decoded = DecodeRelayMessage(EncodeRelayMessage({.from = "c2", .want = true}));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->from, "c2");
  EXPECT_TRUE(decoded->want);
  EXPECT_TRUE(decoded->changes.empty());
}

TEST(RelayMessageTest, RejectsWhatEncodeDidNotMake) {
  for (const char* body :
       {"", "[]", "not json", R"({"want":true})", R"({"from":"","want":true})", R"({"from":"c1"})",
        R"({"from":"c1","changes":[{"kind":"other","jobId":"j"}]})",
        R"({"from":"c1","changes":[{"kind":"job"}]})"}) {
    auto decoded = DecodeRelayMessage(body);
    ASSERT_FALSE(decoded.ok()) << body;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument) << body;
  }
}

// What is broadcast on the events topic, as another coordinator would hear it.
class Listener {
 public:
  explicit Listener(Broker& broker) {
    auto sub = broker.SubscribeBroadcast(kTopicEvents, [this](std::string body) {
      std::lock_guard lock(mu_);
      bodies_.push_back(std::move(body));
    });
    EXPECT_TRUE(sub.ok()) << sub.status().ToString();
    if (sub.ok()) sub_ = std::move(sub).value();
  }

  std::vector<RelayMessage> Messages() {
    std::lock_guard lock(mu_);
    std::vector<RelayMessage> out;
    for (const std::string& body : bodies_) {
      auto m = DecodeRelayMessage(body);
      EXPECT_TRUE(m.ok()) << body;
      if (m.ok()) out.push_back(std::move(m).value());
    }
    return out;
  }

  // The messages from `from` once a marker broadcast after them has come back: a
  // subscription receives in publish order, so nothing sent before is still on its way.
  std::vector<RelayMessage> SettledFrom(Broker& broker, const std::string& from) {
    const std::string marker = "marker-" + std::to_string(++markers_);
    EXPECT_TRUE(
        broker.Broadcast(kTopicEvents, EncodeRelayMessage({.from = marker, .want = true})).ok());
    EXPECT_TRUE(testing::WaitFor([&] {
      for (const RelayMessage& m : Messages()) {
        if (m.from == marker) return true;
      }
      return false;
    }));
    std::vector<RelayMessage> out;
    for (RelayMessage& m : Messages()) {
      if (m.from == from) out.push_back(std::move(m));
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> bodies_;  // guarded by mu_
  std::unique_ptr<Subscription> sub_;
  int markers_ = 0;
};

class EventRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    relay_ = std::make_unique<EventRelay>(
        broker_, clock_, clock_, hub_,
        EventRelayOptions{.coordinator_id = "a", .want_interval = kInterval});
    ASSERT_TRUE(relay_->Start().ok());
  }

  void TearDown() override { relay_->Stop(); }

  void HearWantFrom(const std::string& from) {
    ASSERT_TRUE(
        broker_.Broadcast(kTopicEvents, EncodeRelayMessage({.from = from, .want = true})).ok());
  }

  InMemoryBroker broker_;
  testing::FakeClock clock_;
  EventHub hub_;
  std::unique_ptr<EventRelay> relay_;
  Listener listener_{broker_};
};

TEST_F(EventRelayTest, SendsNothingWhileNoStreamIsOpenAnywhere) {
  hub_.Publish({JobTo("j1", "RUNNING")});
  clock_.Advance(kInterval * 5);
  EXPECT_FALSE(hub_.Wanted());
  EXPECT_TRUE(listener_.SettledFrom(broker_, "a").empty());
}

TEST_F(EventRelayTest, AnOpenStreamSendsAWantAtOnceAndEveryIntervalWhileOpen) {
  std::shared_ptr<EventStream> stream = hub_.Subscribe({});
  ASSERT_TRUE(testing::WaitFor([&] { return listener_.Messages().size() == 1; }));
  EXPECT_EQ(listener_.Messages()[0].from, "a");
  EXPECT_TRUE(listener_.Messages()[0].want);
  clock_.Advance(kInterval);
  clock_.Advance(kInterval);
  EXPECT_EQ(listener_.SettledFrom(broker_, "a").size(), 3u);
  stream->Close();
  clock_.Advance(kInterval * 3);
  EXPECT_EQ(listener_.SettledFrom(broker_, "a").size(), 3u);
}

TEST_F(EventRelayTest, AnotherCoordinatorsWantHoldsForThreeIntervals) {
  EXPECT_FALSE(hub_.Wanted());
  HearWantFrom("b");
  ASSERT_TRUE(testing::WaitFor([&] { return hub_.RemoteWanted(); }));
  EXPECT_TRUE(hub_.Wanted());
  clock_.Advance(kInterval * EventRelay::kWantLifetimes);
  EXPECT_TRUE(hub_.Wanted());
  clock_.Advance(kInterval);
  EXPECT_FALSE(hub_.RemoteWanted());
  EXPECT_FALSE(hub_.Wanted());
}

TEST_F(EventRelayTest, ARenewedWantKeepsTheHubWanted) {
  HearWantFrom("b");
  ASSERT_TRUE(testing::WaitFor([&] { return hub_.RemoteWanted(); }));
  for (int i = 0; i < 6; ++i) {
    clock_.Advance(kInterval);
    HearWantFrom("b");
    listener_.SettledFrom(broker_, "b");  // the relay has heard it too
  }
  EXPECT_TRUE(hub_.Wanted());
}

TEST_F(EventRelayTest, ForwardsEachOwnBatchAsOneMessageOnlyWhileWanted) {
  hub_.Publish({JobTo("before", "RUNNING")});
  HearWantFrom("b");
  ASSERT_TRUE(testing::WaitFor([&] { return hub_.RemoteWanted(); }));
  hub_.Publish({JobTo("j1", "RUNNING"), JobTo("j2", "COMPLETED")});
  ASSERT_TRUE(testing::WaitFor([&] { return listener_.Messages().size() >= 2; }));  // b's, a's
  std::vector<RelayMessage> sent = listener_.SettledFrom(broker_, "a");
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].changes.size(), 2u);
  EXPECT_EQ(sent[0].changes[0].job_id, "j1");
  EXPECT_EQ(sent[0].changes[1].state, "COMPLETED");
}

TEST_F(EventRelayTest, HandsAnotherCoordinatorsChangesToItsStreamsWithoutForwardingThem) {
  std::shared_ptr<EventStream> stream = hub_.Subscribe({});
  HearWantFrom("b");  // so that anything of its own would be forwarded
  ASSERT_TRUE(testing::WaitFor([&] { return hub_.RemoteWanted(); }));
  ASSERT_TRUE(
      broker_
          .Broadcast(kTopicEvents,
                     EncodeRelayMessage({.from = "b", .changes = {JobTo("j7", "COMPLETED")}}))
          .ok());
  EXPECT_THAT(TakeUntil(*stream, "j7"), HasSubstr(R"("jobId":"j7")"));
  for (const RelayMessage& m : listener_.SettledFrom(broker_, "a")) {
    EXPECT_TRUE(m.changes.empty()) << "forwarded " << m.changes.size() << " changes";
  }
}

TEST_F(EventRelayTest, IgnoresItsOwnMessages) {
  std::shared_ptr<EventStream> stream = hub_.Subscribe({});
  HearWantFrom("a");
  ASSERT_TRUE(
      broker_
          .Broadcast(kTopicEvents,
                     EncodeRelayMessage({.from = "a", .changes = {JobTo("mine", "RUNNING")}}))
          .ok());
  ASSERT_TRUE(
      broker_
          .Broadcast(kTopicEvents,
                     EncodeRelayMessage({.from = "b", .changes = {JobTo("theirs", "RUNNING")}}))
          .ok());
  // Handled in order: once b's change is here, a's own were seen and ignored.
  std::string got = TakeUntil(*stream, "theirs");
  EXPECT_THAT(got, HasSubstr("theirs"));
  EXPECT_THAT(got, ::testing::Not(HasSubstr("mine")));
  EXPECT_FALSE(hub_.RemoteWanted());
}

TEST_F(EventRelayTest, StopEndsTheRemoteWant) {
  HearWantFrom("b");
  ASSERT_TRUE(testing::WaitFor([&] { return hub_.RemoteWanted(); }));
  relay_->Stop();
  EXPECT_FALSE(hub_.Wanted());
  EXPECT_EQ(clock_.PendingTimers(), 0u);
}

TEST(EventRelayStartTest, RefusesAnEmptyCoordinatorId) {
  InMemoryBroker broker;
  testing::FakeClock clock;
  EventHub hub;
  EventRelay relay(broker, clock, clock, hub, {});
  Status s = relay.Start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

Job ParseOrDie(const std::string& yaml) {
  auto result = ParseJob(yaml, DocumentFormat::kYaml);
  EXPECT_TRUE(result.ok()) << result.Message();
  return result.ok() ? *result.job : Job{};
}

// Without the relay, a stream on A would never hear of a job only B decided about:
// here no worker runs, so the submission (B's) is the only decision the job sees; and
// of a log part only B stored.
TEST(TwoCoordinatorsEventsTest, AStreamOnOneCoordinatorGetsAJobChangeAndALogPartOfTheOther) {
  auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
  ASSERT_TRUE(ds.ok());
  InMemoryBroker broker;
  testing::FakeClock clock;
  CoordinatorOptions options;
  options.lease = std::chrono::hours(24);
  options.share_events = true;
  options.node_id = "coordinator-a";
  Coordinator a(**ds, broker, clock, clock, options);
  options.node_id = "coordinator-b";
  Coordinator b(**ds, broker, clock, clock, options);
  ASSERT_TRUE(a.Start({}).ok());
  ASSERT_TRUE(b.Start({}).ok());
  EXPECT_FALSE(b.events().Wanted());

  std::shared_ptr<EventStream> stream = a.events().Subscribe({});
  ASSERT_TRUE(testing::WaitFor([&] { return b.events().Wanted(); }));
  auto submitted = b.Submit(ParseOrDie("name: remote\ntasks:\n  - {name: t, run: ok}\n"));
  ASSERT_TRUE(submitted.ok());
  EXPECT_THAT(TakeUntil(*stream, submitted->id),
              HasSubstr("event: job\ndata: {\"jobId\":\"" + submitted->id + "\""));

  // A log part B stores reaches a stream of that job on A.
  auto rows = (*ds)->JobTasks(submitted->id);
  ASSERT_TRUE(rows.ok() && !rows->empty());
  std::shared_ptr<EventStream> job_stream = a.events().Subscribe({.job_id = submitted->id});
  ASSERT_TRUE(b.StoreLogPart({.id = "part-1",
                              .task_id = rows->front().id,
                              .job_id = submitted->id,
                              .number = 1,
                              .contents = "hello from b\n",
                              .created_at = clock.Now()})
                  .ok());
  EXPECT_THAT(TakeUntil(*job_stream, "hello from b"), HasSubstr("event: log\n"));
  a.Stop();
  b.Stop();
}

}  // namespace
}  // namespace baton

#include "broker/inmemory/inmemory_broker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conformance/broker_conformance.h"
#include "testing/wait_for.h"

namespace baton::testing {

INSTANTIATE_TEST_SUITE_P(InMemory, BrokerConformanceTest,
                         ::testing::Values(BrokerFactory{
                             "InMemory",
                             [] { return std::unique_ptr<Broker>(new InMemoryBroker()); }}),
                         BrokerFactoryName);

}  // namespace baton::testing

// What the conformance suite cannot ask of every broker: exact in-memory semantics, and
// the fault injection.
namespace baton {
namespace {

using testing::WaitFor;
using testing::broker_conformance::Inbox;
using testing::broker_conformance::kQuiet;
using testing::broker_conformance::Seen;
using Mode = Inbox::Mode;

std::unique_ptr<Subscription> MustSubscribe(Broker& broker, const std::string& queue, int prefetch,
                                            DeliveryHandler handler) {
  auto sub = broker.Subscribe(queue, prefetch, std::move(handler));
  EXPECT_TRUE(sub.ok()) << sub.status().ToString();
  if (!sub.ok()) return std::make_unique<testing::broker_conformance::FailedSubscription>();
  return std::move(sub).value();
}

TEST(InMemoryBrokerTest, FailPublishesMakesEveryPublishFailUntilCleared) {
  InMemoryBroker broker;
  broker.FailPublishes(Unavailable("broker down"));
  EXPECT_EQ(broker.Publish("q", "lost"), Unavailable("broker down"));
  EXPECT_EQ(broker.Publish("q", "lost too"), Unavailable("broker down"));
  // A failed publish does not enqueue, nor even create the queue.
  EXPECT_EQ(broker.Queue("q").status().code(), StatusCode::kNotFound);

  broker.ClearFailures();
  EXPECT_TRUE(broker.Publish("q", "kept").ok());
  EXPECT_EQ(broker.Queue("q")->size, 1);
}

TEST(InMemoryBrokerTest, FailPublishesWithCountFailsOnlyThatMany) {
  InMemoryBroker broker;
  broker.FailPublishes(Internal("flaky"), 2);
  EXPECT_EQ(broker.Publish("q", "1").code(), StatusCode::kInternal);
  EXPECT_EQ(broker.Publish("q", "2").code(), StatusCode::kInternal);
  EXPECT_TRUE(broker.Publish("q", "3").ok());
  EXPECT_TRUE(broker.Publish("q", "4").ok());
  EXPECT_EQ(broker.Queue("q")->size, 2);
}

TEST(InMemoryBrokerTest, FailSubscribesAndFailHealthReportTheStatus) {
  InMemoryBroker broker;
  broker.FailSubscribes(Unavailable("no consumers today"));
  broker.FailHealth(Unavailable("sick"));
  auto sub = broker.Subscribe("q", 1, [](std::unique_ptr<Delivery>) {});
  ASSERT_FALSE(sub.ok());
  EXPECT_EQ(sub.status(), Unavailable("no consumers today"));
  EXPECT_EQ(broker.Health(), Unavailable("sick"));
  // Publishing is unaffected.
  EXPECT_TRUE(broker.Publish("q", "x").ok());

  broker.ClearFailures();
  EXPECT_TRUE(broker.Health().ok());
  Inbox inbox;
  auto ok_sub = MustSubscribe(broker, "q", 1, inbox.Handler());
  EXPECT_TRUE(inbox.WaitForSize(1));
}

TEST(InMemoryBrokerTest, RequeuedMessagesReturnToTheirOriginalPlace) {
  InMemoryBroker broker;
  for (const char* body : {"a", "b", "c", "d"}) ASSERT_TRUE(broker.Publish("q", body).ok());
  {
    Inbox holder(Mode::kHold);
    auto sub = MustSubscribe(broker, "q", 3, holder.Handler());
    ASSERT_TRUE(holder.WaitForSize(3));
    auto held = holder.TakeHeld();
    ASSERT_EQ(held.size(), 3u);
    // Nacked out of order; they still go back in publish order.
    EXPECT_TRUE(held[2]->Nack(true).ok());
    sub->Close();
  }
  Inbox inbox;
  auto sub = MustSubscribe(broker, "q", 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(4));
  std::vector<Seen> seen = inbox.seen();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(inbox.bodies(), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_TRUE(seen[0].redelivered);
  EXPECT_TRUE(seen[1].redelivered);
  EXPECT_TRUE(seen[2].redelivered);
  EXPECT_FALSE(seen[3].redelivered);
}

TEST(InMemoryBrokerTest, DroppedDeliveryStaysUnackedUntilClose) {
  InMemoryBroker broker;
  ASSERT_TRUE(broker.Publish("q", "forgotten").ok());
  ASSERT_TRUE(broker.Publish("q", "waiting").ok());
  std::atomic<int> calls{0};
  auto sub = MustSubscribe(broker, "q", 1, [&](std::unique_ptr<Delivery>) { ++calls; });
  ASSERT_TRUE(WaitFor([&] { return calls.load() == 1; }));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(*broker.Queue("q"),
            (QueueInfo{.name = "q", .size = 1, .subscribers = 1, .unacked = 1}));
  sub->Close();
  EXPECT_EQ(*broker.Queue("q"),
            (QueueInfo{.name = "q", .size = 2, .subscribers = 0, .unacked = 0}));
}

TEST(InMemoryBrokerTest, CloseReportsExactCountsWhenItReturns) {
  // No waiting needed in memory: Close and Ack update the counts before they return.
  InMemoryBroker broker;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(broker.Publish("q", std::to_string(i)).ok());
  Inbox inbox(Mode::kHold);
  auto sub = MustSubscribe(broker, "q", 2, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(2));
  auto held = inbox.TakeHeld();
  ASSERT_TRUE(held[0]->Ack().ok());
  EXPECT_EQ(broker.Queue("q")->size + broker.Queue("q")->unacked, 4);
  sub->Close();
  EXPECT_EQ(*broker.Queue("q"),
            (QueueInfo{.name = "q", .size = 4, .subscribers = 0, .unacked = 0}));
  // Acking after the close fails, and changes nothing.
  EXPECT_EQ(held[1]->Ack().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(broker.Queue("q")->size, 4);
}

TEST(InMemoryBrokerTest, HandlerMayDestroyItsOwnSubscription) {
  InMemoryBroker broker;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(broker.Publish("q", std::to_string(i)).ok());
  std::mutex mu;
  std::unique_ptr<Subscription> owned;  // guarded by mu
  std::atomic<int> calls{0};
  {
    std::lock_guard lock(mu);
    owned = MustSubscribe(broker, "q", 1, [&](std::unique_ptr<Delivery> delivery) {
      ++calls;
      std::unique_ptr<Subscription> mine;
      {
        std::lock_guard inner(mu);
        mine = std::move(owned);
      }
      mine.reset();  // closes from its own handler
      EXPECT_TRUE(delivery->Ack().ok()) << "the close finishes after the handler returns";
    });
  }
  ASSERT_TRUE(WaitFor([&] {
    auto info = broker.Queue("q");
    return info.ok() && info->subscribers == 0 && info->unacked == 0;
  }));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(broker.Queue("q")->size, 2);

  // A later subscriber gets the rest (and reaps the finished dispatcher thread).
  Inbox inbox;
  auto sub = MustSubscribe(broker, "q", 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(2));
  EXPECT_EQ(inbox.bodies(), (std::vector<std::string>{"1", "2"}));
}

TEST(InMemoryBrokerTest, HandlerMaySubscribeAndCloseOtherSubscriptions) {
  InMemoryBroker broker;
  Inbox inbox;
  std::atomic<bool> done{false};
  auto sub = MustSubscribe(broker, "control", 1, [&](std::unique_ptr<Delivery> delivery) {
    auto inner = MustSubscribe(broker, "data", 1, inbox.Handler());
    EXPECT_TRUE(inbox.WaitForSize(1));
    inner->Close();
    EXPECT_TRUE(delivery->Ack().ok());
    done = true;
  });
  ASSERT_TRUE(broker.Publish("data", "payload").ok());
  ASSERT_TRUE(broker.Publish("control", "go").ok());
  ASSERT_TRUE(WaitFor([&] { return done.load(); }));
  EXPECT_EQ(inbox.bodies(), std::vector<std::string>{"payload"});
}

TEST(InMemoryBrokerTest, DestructorWaitsForRunningHandlers) {
  auto broker = std::make_unique<InMemoryBroker>();
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  auto sub = MustSubscribe(*broker, "q", 1, [&](std::unique_ptr<Delivery>) {
    entered = true;
    WaitFor([&] { return release.load(); }, std::chrono::seconds(10));
    finished = true;
  });
  ASSERT_TRUE(broker->Publish("q", "x").ok());
  ASSERT_TRUE(WaitFor([&] { return entered.load(); }));

  std::atomic<bool> destroyed{false};
  bool finished_first = false;
  std::thread destroyer([&] {
    broker.reset();
    finished_first = finished.load();
    destroyed = true;
  });
  std::this_thread::sleep_for(kQuiet);
  EXPECT_FALSE(destroyed.load());
  release = true;
  destroyer.join();
  EXPECT_TRUE(finished_first);
  sub->Close();  // the broker is gone: nothing to do
}

TEST(InMemoryBrokerTest, CarriesManyMessagesThroughSeveralSubscribers) {
  InMemoryBroker broker;
  constexpr int kMessages = 50000;
  std::atomic<int> handled{0};
  std::vector<std::unique_ptr<Subscription>> subs;
  subs.reserve(4);
  for (int i = 0; i < 4; ++i) {
    subs.push_back(MustSubscribe(broker, "bulk", 100, [&](std::unique_ptr<Delivery> delivery) {
      EXPECT_TRUE(delivery->Ack().ok());
      ++handled;
    }));
  }
  std::vector<std::thread> publishers;
  publishers.reserve(2);
  for (int t = 0; t < 2; ++t) {
    publishers.emplace_back([&, t] {
      for (int i = 0; i < kMessages / 2; ++i) {
        EXPECT_TRUE(broker.Publish("bulk", std::to_string(i), (t + i) % 10).ok());
      }
    });
  }
  for (std::thread& publisher : publishers) publisher.join();
  EXPECT_TRUE(WaitFor([&] { return handled.load() == kMessages; }, std::chrono::seconds(60)))
      << handled.load();
  EXPECT_EQ(*broker.Queue("bulk"),
            (QueueInfo{.name = "bulk", .size = 0, .subscribers = 4, .unacked = 0}));
}

}  // namespace
}  // namespace baton

// The Broker contract (src/broker/broker.h) as a parameterised GoogleTest suite. Every
// Broker implementation instantiates it in its own test binary:
//
//   #include "conformance/broker_conformance.h"
//   namespace baton::testing {
//   INSTANTIATE_TEST_SUITE_P(InMemory, BrokerConformanceTest,
//                            ::testing::Values(BrokerFactory{"InMemory", [] { ... }}),
//                            BrokerFactoryName);
//   }
//
// The TEST_Ps are defined in this header, so include it from exactly one file per test
// binary.
//
// Written against the interface only, so that it also runs against a broker over the
// network (RabbitMQ): waits use WaitFor with generous timeouts, each test uses queue names
// of its own (test name plus a random nonce), and a test never relies on a queue being
// empty before it starts. Asserting that something does NOT happen needs a pause; those
// pauses are kQuiet long and kept few.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "broker/broker.h"
#include "testing/wait_for.h"

namespace baton::testing {

// Makes a fresh broker for one test. The broker is destroyed at the end of the test.
struct BrokerFactory {
  std::string name;
  std::function<std::unique_ptr<Broker>()> make;
};

// Names the instantiated tests after the factory ("InMemory/BrokerConformanceTest.X/InMemory").
inline std::string BrokerFactoryName(const ::testing::TestParamInfo<BrokerFactory>& info) {
  return info.param.name;
}

inline void PrintTo(const BrokerFactory& factory, std::ostream* os) { *os << factory.name; }

namespace broker_conformance {

using std::chrono_literals::operator""ms;
using std::chrono_literals::operator""s;

// How long to wait for something that must happen.
inline constexpr std::chrono::milliseconds kTimeout = 5s;
// Queue statistics may lag behind deliveries on a network broker (RabbitMQ's management
// statistics refresh every few seconds), so they get longer.
inline constexpr std::chrono::milliseconds kStatsTimeout = 10s;
// How long to watch for something that must not happen.
inline constexpr std::chrono::milliseconds kQuiet = 200ms;

// What a handler saw of one delivery.
struct Seen {
  std::string queue;
  std::string body;
  int priority = 0;
  bool redelivered = false;
};

// Records deliveries handed to its Handler(). In kAck mode the handler acks each delivery
// before recording it; in kHold mode it keeps them unacked for the test to settle
// (TakeHeld). Must outlive the subscriptions using its handler. Thread-safe.
class Inbox {
 public:
  enum class Mode { kAck, kHold };

  explicit Inbox(Mode mode = Mode::kAck) : mode_(mode) {}

  DeliveryHandler Handler() {
    return [this](std::unique_ptr<Delivery> delivery) { Add(std::move(delivery)); };
  }

  void Add(std::unique_ptr<Delivery> delivery) {
    Seen seen{delivery->queue(), delivery->body(), delivery->priority(), delivery->redelivered()};
    if (mode_ == Mode::kAck) {
      Status status = delivery->Ack();
      EXPECT_TRUE(status.ok()) << status.ToString();
    }
    std::lock_guard lock(mu_);
    seen_.push_back(std::move(seen));
    if (mode_ == Mode::kHold) held_.push_back(std::move(delivery));
  }

  std::size_t size() const {
    std::lock_guard lock(mu_);
    return seen_.size();
  }

  // True once at least `n` deliveries arrived.
  bool WaitForSize(std::size_t n) const {
    return WaitFor([&] { return size() >= n; }, kTimeout);
  }

  std::vector<Seen> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

  std::vector<std::string> bodies() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> bodies;
    for (const Seen& s : seen_) bodies.push_back(s.body);
    return bodies;
  }

  // The held deliveries not taken yet, oldest first.
  std::vector<std::unique_ptr<Delivery>> TakeHeld() {
    std::lock_guard lock(mu_);
    return std::exchange(held_, {});
  }

 private:
  const Mode mode_;
  mutable std::mutex mu_;
  std::vector<Seen> seen_;                       // guarded by mu_
  std::vector<std::unique_ptr<Delivery>> held_;  // guarded by mu_
};

// Stands in for a subscription that failed to open (the failure is already reported), so
// the test fails on its assertions instead of crashing on a null pointer.
class FailedSubscription : public Subscription {
 public:
  void Close() override {}
  Status SetPrefetch(int) override { return FailedPrecondition("no subscription"); }
};

inline std::string RandomNonce() {
  std::random_device device;
  std::uniform_int_distribution<std::uint32_t> dist;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string nonce;
  for (std::uint32_t bits = dist(device), i = 0; i < 8; ++i, bits >>= 4) nonce += kHex[bits & 15];
  return nonce;
}

}  // namespace broker_conformance

class BrokerConformanceTest : public ::testing::TestWithParam<BrokerFactory> {
 protected:
  void SetUp() override {
    broker_ = GetParam().make();
    ASSERT_NE(broker_, nullptr) << "factory " << GetParam().name << " made no broker";
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(test.begin(), test.end(), '/', '.');
    prefix_ = "conformance." + test + "." + broker_conformance::RandomNonce();
  }

  void TearDown() override { broker_.reset(); }

  // A queue name of this test only.
  std::string QueueName(std::string_view suffix = "q") const {
    return prefix_ + "." + std::string(suffix);
  }

  Broker& broker() { return *broker_; }

  void Publish(const std::string& queue, std::string body, int priority = 0) {
    Status status = broker_->Publish(queue, std::move(body), priority);
    EXPECT_TRUE(status.ok()) << "publishing to " << queue << ": " << status.ToString();
  }

  std::unique_ptr<Subscription> Subscribe(const std::string& queue, int prefetch,
                                          DeliveryHandler handler) {
    auto subscription = broker_->Subscribe(queue, prefetch, std::move(handler));
    EXPECT_TRUE(subscription.ok())
        << "subscribing to " << queue << ": " << subscription.status().ToString();
    if (!subscription.ok()) return std::make_unique<broker_conformance::FailedSubscription>();
    return std::move(subscription).value();
  }

  std::unique_ptr<Subscription> SubscribeBroadcast(const std::string& topic,
                                                   BroadcastHandler handler) {
    auto subscription = broker_->SubscribeBroadcast(topic, std::move(handler));
    EXPECT_TRUE(subscription.ok())
        << "subscribing to broadcasts of " << topic << ": " << subscription.status().ToString();
    if (!subscription.ok()) return std::make_unique<broker_conformance::FailedSubscription>();
    return std::move(subscription).value();
  }

  // Waits until Queue(name) reports `expected` (name, size, subscribers, unacked).
  ::testing::AssertionResult QueueReaches(const QueueInfo& expected) {
    std::optional<QueueInfo> last;
    Status last_error;
    bool reached = WaitFor(
        [&] {
          auto info = broker_->Queue(expected.name);
          if (!info.ok()) {
            last_error = info.status();
            return false;
          }
          last = *info;
          return *last == expected;
        },
        broker_conformance::kStatsTimeout);
    if (reached) return ::testing::AssertionSuccess();
    auto failure = ::testing::AssertionFailure();
    failure << "queue " << expected.name << " wanted size=" << expected.size
            << " subscribers=" << expected.subscribers << " unacked=" << expected.unacked;
    if (last) {
      failure << ", last saw size=" << last->size << " subscribers=" << last->subscribers
              << " unacked=" << last->unacked;
    } else {
      failure << ", Queue() failed: " << last_error.ToString();
    }
    return failure;
  }

  std::unique_ptr<Broker> broker_;
  std::string prefix_;
};

namespace broker_conformance {

using Mode = Inbox::Mode;

inline std::vector<std::string> Numbered(std::string_view prefix, int from, int to) {
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) out.push_back(std::string(prefix) + std::to_string(i));
  return out;
}

// ---- Delivery -------------------------------------------------------------------------

TEST_P(BrokerConformanceTest, DeliversMessagePublishedBeforeSubscribing) {
  const std::string q = QueueName();
  Publish(q, "hello");
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(1));
  EXPECT_EQ(inbox.bodies(), std::vector<std::string>{"hello"});
}

TEST_P(BrokerConformanceTest, PublishBatchDeliversEachMessageToItsQueueInOrder) {
  const std::string q1 = QueueName("one");
  const std::string q2 = QueueName("two");
  std::vector<OutgoingMessage> batch;
  for (int i = 0; i < 40; ++i) {
    batch.push_back({i % 4 == 0 ? q2 : q1, "m" + std::to_string(i), 0});
  }
  ASSERT_TRUE(broker().PublishBatch(batch).ok());
  EXPECT_TRUE(QueueReaches({.name = q1, .size = 30, .subscribers = 0, .unacked = 0}));
  EXPECT_TRUE(QueueReaches({.name = q2, .size = 10, .subscribers = 0, .unacked = 0}));
  Inbox one;
  Inbox two;
  auto sub1 = Subscribe(q1, 100, one.Handler());
  auto sub2 = Subscribe(q2, 100, two.Handler());
  ASSERT_TRUE(one.WaitForSize(30));
  ASSERT_TRUE(two.WaitForSize(10));
  std::vector<std::string> want1;
  std::vector<std::string> want2;
  for (const OutgoingMessage& m : batch) (m.queue == q1 ? want1 : want2).push_back(m.body);
  EXPECT_EQ(one.bodies(), want1);
  EXPECT_EQ(two.bodies(), want2);
  EXPECT_TRUE(broker().PublishBatch({}).ok());  // nothing to send
}

TEST_P(BrokerConformanceTest, PublishBatchKeepsEachMessagesPriority) {
  const std::string q = QueueName();
  ASSERT_TRUE(broker().PublishBatch({{q, "p1", 1}, {q, "p9", 9}, {q, "p0", 0}, {q, "p5", 5}}).ok());
  ASSERT_TRUE(QueueReaches({.name = q, .size = 4, .subscribers = 0, .unacked = 0}));
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(4));
  EXPECT_EQ(inbox.bodies(), (std::vector<std::string>{"p9", "p5", "p1", "p0"}));
}

TEST_P(BrokerConformanceTest, PublishBatchWithAnInvalidMessagePublishesNone) {
  const std::string q = QueueName();
  Publish(q, "before");  // the queue exists, with one message
  EXPECT_EQ(broker().PublishBatch({{q, "a", 0}, {q, "b", 10}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(broker().PublishBatch({{q, "a", 0}, {"", "b", 0}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(broker().PublishBatch({{q, "a", -1}}).code(), StatusCode::kInvalidArgument);
  std::this_thread::sleep_for(kQuiet);
  EXPECT_TRUE(QueueReaches({.name = q, .size = 1, .subscribers = 0, .unacked = 0}));
}

TEST_P(BrokerConformanceTest, DeliversMessagePublishedAfterSubscribing) {
  const std::string q = QueueName();
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  Publish(q, "hello");
  ASSERT_TRUE(inbox.WaitForSize(1));
  EXPECT_EQ(inbox.bodies(), std::vector<std::string>{"hello"});
}

TEST_P(BrokerConformanceTest, RoundTripsQueueBodyAndPriority) {
  const std::string q = QueueName();
  std::string binary;
  for (int i = 0; i < 256; ++i) binary.push_back(static_cast<char>(i));
  for (int i = 255; i >= 0; --i) binary.push_back(static_cast<char>(i));
  Publish(q, "plain text", 0);
  Publish(q, binary, 7);
  Publish(q, "", 9);

  Inbox inbox;
  auto sub = Subscribe(q, 10, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(3));
  std::vector<Seen> seen = inbox.seen();
  ASSERT_EQ(seen.size(), 3u);
  // Higher priorities first.
  EXPECT_EQ(seen[0].body, "");
  EXPECT_EQ(seen[0].priority, 9);
  EXPECT_TRUE(seen[1].body == binary) << "binary body of " << seen[1].body.size() << " bytes";
  EXPECT_EQ(seen[1].priority, 7);
  EXPECT_EQ(seen[2].body, "plain text");
  EXPECT_EQ(seen[2].priority, 0);
  for (const Seen& s : seen) {
    EXPECT_EQ(s.queue, q);
    EXPECT_FALSE(s.redelivered);
  }
}

TEST_P(BrokerConformanceTest, RoundTripsOneMebibyteBody) {
  const std::string q = QueueName();
  std::string big(std::size_t{1} << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 31 + 7) & 0xff);
  Publish(q, big, 3);
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(1));
  std::vector<Seen> seen = inbox.seen();
  EXPECT_EQ(seen[0].body.size(), big.size());
  EXPECT_TRUE(seen[0].body == big) << "the 1 MiB body came back different";
  EXPECT_EQ(seen[0].priority, 3);
}

TEST_P(BrokerConformanceTest, SubscribingCreatesTheQueue) {
  const std::string q = QueueName();
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  EXPECT_TRUE(QueueReaches({.name = q, .size = 0, .subscribers = 1, .unacked = 0}));
}

TEST_P(BrokerConformanceTest, KeepsQueuesIndependent) {
  const std::string a = QueueName("a");
  const std::string b = QueueName("b");
  Publish(a, "for a");
  Publish(b, "for b");
  Inbox inbox;
  auto sub = Subscribe(a, 5, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(1));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.bodies(), std::vector<std::string>{"for a"});
  EXPECT_TRUE(QueueReaches({.name = b, .size = 1, .subscribers = 0, .unacked = 0}));
}

// ---- Ordering -------------------------------------------------------------------------

TEST_P(BrokerConformanceTest, DeliversHigherPriorityFirst) {
  const std::string q = QueueName();
  Publish(q, "p0", 0);
  Publish(q, "p5", 5);
  Publish(q, "p9", 9);
  Publish(q, "p1", 1);
  ASSERT_TRUE(QueueReaches({.name = q, .size = 4, .subscribers = 0, .unacked = 0}));
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(4));
  EXPECT_EQ(inbox.bodies(), (std::vector<std::string>{"p9", "p5", "p1", "p0"}));
}

TEST_P(BrokerConformanceTest, KeepsPublishOrderWithinAPriority) {
  const std::string q = QueueName();
  std::vector<std::string> high;
  std::vector<std::string> low;
  for (int i = 0; i < 60; ++i) {
    std::string body = "m" + std::to_string(i);
    bool is_high = i % 3 == 0;
    (is_high ? high : low).push_back(body);
    Publish(q, body, is_high ? 4 : 2);
  }
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(60));
  std::vector<std::string> expected = high;
  expected.insert(expected.end(), low.begin(), low.end());
  EXPECT_EQ(inbox.bodies(), expected);
}

TEST_P(BrokerConformanceTest, DeliversInPublishOrderToOneSubscriber) {
  const std::string q = QueueName();
  Inbox inbox;
  auto sub = Subscribe(q, 10, inbox.Handler());
  std::vector<std::string> bodies = Numbered("m", 0, 200);
  for (const std::string& body : bodies) Publish(q, body);
  ASSERT_TRUE(inbox.WaitForSize(200));
  EXPECT_EQ(inbox.bodies(), bodies);
}

TEST_P(BrokerConformanceTest, RequeuedMessageKeepsItsPriority) {
  const std::string q = QueueName();
  Publish(q, "high", 5);
  Publish(q, "low", 1);
  Inbox inbox(Mode::kHold);
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(1));
  auto held = inbox.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0]->body(), "high");
  EXPECT_TRUE(held[0]->Nack(/*requeue=*/true).ok());
  ASSERT_TRUE(inbox.WaitForSize(2));
  std::vector<Seen> seen = inbox.seen();
  EXPECT_EQ(seen[1].body, "high");
  EXPECT_EQ(seen[1].priority, 5);
  EXPECT_TRUE(seen[1].redelivered);
}

// ---- Prefetch -------------------------------------------------------------------------

TEST_P(BrokerConformanceTest, NeverHoldsMoreThanPrefetchUnacked) {
  const std::string q = QueueName();
  for (const std::string& body : Numbered("m", 0, 10)) Publish(q, body);
  Inbox inbox(Mode::kHold);
  auto sub = Subscribe(q, 3, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(3));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.size(), 3u);

  auto held = inbox.TakeHeld();
  ASSERT_EQ(held.size(), 3u);
  EXPECT_TRUE(held[0]->Ack().ok());
  ASSERT_TRUE(inbox.WaitForSize(4));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.size(), 4u);
  EXPECT_EQ(inbox.bodies(), Numbered("m", 0, 4));
  EXPECT_TRUE(QueueReaches({.name = q, .size = 6, .subscribers = 1, .unacked = 3}));
}

TEST_P(BrokerConformanceTest, PrefetchAlsoBoundsMessagesPublishedAfterSubscribing) {
  const std::string q = QueueName();
  Inbox inbox(Mode::kHold);
  auto sub = Subscribe(q, 2, inbox.Handler());
  for (const std::string& body : Numbered("m", 0, 5)) Publish(q, body);
  ASSERT_TRUE(inbox.WaitForSize(2));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.size(), 2u);
  for (auto& delivery : inbox.TakeHeld()) EXPECT_TRUE(delivery->Ack().ok());
  ASSERT_TRUE(inbox.WaitForSize(4));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.size(), 4u);
}

TEST_P(BrokerConformanceTest, SetPrefetchPausesAndResumesDeliveries) {
  const std::string q = QueueName();
  for (const std::string& body : Numbered("m", 0, 5)) Publish(q, body);
  Inbox inbox(Mode::kHold);
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(1));
  // Paused: acking what it holds brings nothing more.
  ASSERT_TRUE(sub->SetPrefetch(0).ok());
  for (auto& delivery : inbox.TakeHeld()) EXPECT_TRUE(delivery->Ack().ok());
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.size(), 1u);
  // Room for three: three more arrive, and no fourth while they are held.
  ASSERT_TRUE(sub->SetPrefetch(3).ok());
  ASSERT_TRUE(inbox.WaitForSize(4));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.size(), 4u);
  // Lowered below what it holds: nothing more until it holds less than that.
  ASSERT_TRUE(sub->SetPrefetch(1).ok());
  auto held = inbox.TakeHeld();
  ASSERT_EQ(held.size(), 3u);
  EXPECT_TRUE(held[0]->Ack().ok());
  EXPECT_TRUE(held[1]->Ack().ok());
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.size(), 4u);
  EXPECT_TRUE(held[2]->Ack().ok());
  ASSERT_TRUE(inbox.WaitForSize(5));
  EXPECT_EQ(inbox.bodies(), Numbered("m", 0, 5));
}

TEST_P(BrokerConformanceTest, SetPrefetchRefusesANegativeCount) {
  const std::string q = QueueName();
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  EXPECT_EQ(sub->SetPrefetch(-1).code(), StatusCode::kInvalidArgument);
}

// ---- Ack, nack, close -----------------------------------------------------------------

TEST_P(BrokerConformanceTest, NackWithRequeueRedeliversTheMessage) {
  const std::string q = QueueName();
  Publish(q, "again");
  Inbox inbox(Mode::kHold);
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(1));
  auto first = inbox.TakeHeld();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_FALSE(first[0]->redelivered());
  EXPECT_TRUE(first[0]->Nack(/*requeue=*/true).ok());

  ASSERT_TRUE(inbox.WaitForSize(2));
  auto second = inbox.TakeHeld();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0]->body(), "again");
  EXPECT_TRUE(second[0]->redelivered());
  EXPECT_TRUE(second[0]->Ack().ok());
  EXPECT_TRUE(QueueReaches({.name = q, .size = 0, .subscribers = 1, .unacked = 0}));
}

TEST_P(BrokerConformanceTest, NackWithoutRequeueDropsTheMessage) {
  const std::string q = QueueName();
  Publish(q, "drop");
  Publish(q, "keep");
  Inbox inbox(Mode::kHold);
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(1));
  auto first = inbox.TakeHeld();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]->body(), "drop");
  EXPECT_TRUE(first[0]->Nack(/*requeue=*/false).ok());

  ASSERT_TRUE(inbox.WaitForSize(2));
  auto second = inbox.TakeHeld();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0]->body(), "keep");
  EXPECT_TRUE(second[0]->Ack().ok());
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.size(), 2u);
  EXPECT_TRUE(QueueReaches({.name = q, .size = 0, .subscribers = 1, .unacked = 0}));
}

TEST_P(BrokerConformanceTest, RedeliversUnackedMessagesWhenSubscriptionCloses) {
  const std::string q = QueueName();
  Publish(q, "a");
  Publish(q, "b");
  Publish(q, "c");
  Inbox first(Mode::kHold);
  auto sub = Subscribe(q, 5, first.Handler());
  ASSERT_TRUE(first.WaitForSize(3));
  auto held = first.TakeHeld();
  ASSERT_EQ(held.size(), 3u);
  EXPECT_TRUE(held[0]->Ack().ok());
  sub->Close();
  EXPECT_TRUE(QueueReaches({.name = q, .size = 2, .subscribers = 0, .unacked = 0}));

  Inbox second;
  auto sub2 = Subscribe(q, 5, second.Handler());
  ASSERT_TRUE(second.WaitForSize(2));
  std::this_thread::sleep_for(kQuiet);
  std::vector<Seen> seen = second.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].body, "b");
  EXPECT_EQ(seen[1].body, "c");
  EXPECT_TRUE(seen[0].redelivered);
  EXPECT_TRUE(seen[1].redelivered);
}

TEST_P(BrokerConformanceTest, RedeliversUnackedMessagesWhenSubscriptionIsDestroyed) {
  const std::string q = QueueName();
  Publish(q, "a");
  Inbox first(Mode::kHold);
  auto sub = Subscribe(q, 5, first.Handler());
  ASSERT_TRUE(first.WaitForSize(1));
  sub.reset();

  Inbox second;
  auto sub2 = Subscribe(q, 5, second.Handler());
  ASSERT_TRUE(second.WaitForSize(1));
  std::vector<Seen> seen = second.seen();
  EXPECT_EQ(seen[0].body, "a");
  EXPECT_TRUE(seen[0].redelivered);
}

TEST_P(BrokerConformanceTest, AckAfterCloseIsHarmlessAndTheMessageComesBack) {
  const std::string q = QueueName();
  Publish(q, "late");
  Inbox first(Mode::kHold);
  auto sub = Subscribe(q, 1, first.Handler());
  ASSERT_TRUE(first.WaitForSize(1));
  sub->Close();
  for (auto& delivery : first.TakeHeld()) {
    Status ignored = delivery->Ack();  // Any status will do; it must not crash.
    (void)ignored;
  }
  // Close requeued it before the ack, so it is delivered again.
  Inbox second;
  auto sub2 = Subscribe(q, 1, second.Handler());
  ASSERT_TRUE(second.WaitForSize(1));
  EXPECT_EQ(second.seen()[0].body, "late");
  EXPECT_TRUE(second.seen()[0].redelivered);
}

TEST_P(BrokerConformanceTest, SecondAckOrNackIsANoOp) {
  const std::string q = QueueName();
  Publish(q, "once");
  Publish(q, "next");
  Inbox inbox(Mode::kHold);
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(1));
  auto held = inbox.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(held[0]->Ack().ok());
  Status again = held[0]->Ack();
  Status nack = held[0]->Nack(/*requeue=*/true);
  (void)again;
  (void)nack;

  // The subscription still works, and "once" does not come back.
  ASSERT_TRUE(inbox.WaitForSize(2));
  auto next = inbox.TakeHeld();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0]->body(), "next");
  EXPECT_TRUE(next[0]->Ack().ok());
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.size(), 2u);
  EXPECT_TRUE(QueueReaches({.name = q, .size = 0, .subscribers = 1, .unacked = 0}));
}

TEST_P(BrokerConformanceTest, AcksFromAnotherThread) {
  const std::string q = QueueName();
  constexpr int kMessages = 20;
  for (const std::string& body : Numbered("m", 0, kMessages)) Publish(q, body);
  Inbox inbox(Mode::kHold);
  // Prefetch 2: the handler never acks, so the rest arrive only as the acker catches up.
  auto sub = Subscribe(q, 2, inbox.Handler());
  int acked = 0;
  std::thread acker([&] {
    WaitFor(
        [&] {
          for (auto& delivery : inbox.TakeHeld()) {
            Status status = delivery->Ack();
            EXPECT_TRUE(status.ok()) << status.ToString();
            ++acked;
          }
          return acked >= kMessages;
        },
        kTimeout);
  });
  acker.join();
  EXPECT_EQ(acked, kMessages);
  EXPECT_EQ(inbox.bodies(), Numbered("m", 0, kMessages));
  EXPECT_TRUE(QueueReaches({.name = q, .size = 0, .subscribers = 1, .unacked = 0}));
}

// ---- Several subscribers and publishers -----------------------------------------------

TEST_P(BrokerConformanceTest, SubscribersShareAQueueWithoutDuplicates) {
  const std::string q = QueueName();
  constexpr int kMessages = 200;
  Inbox a;
  Inbox b;
  auto sub_a = Subscribe(q, 1, a.Handler());
  auto sub_b = Subscribe(q, 1, b.Handler());
  ASSERT_TRUE(QueueReaches({.name = q, .size = 0, .subscribers = 2, .unacked = 0}));
  for (const std::string& body : Numbered("m", 0, kMessages)) Publish(q, body);
  ASSERT_TRUE(WaitFor([&] { return a.size() + b.size() >= kMessages; }, kTimeout));
  std::this_thread::sleep_for(kQuiet);

  std::map<std::string, int> count;
  for (const std::string& body : a.bodies()) ++count[body];
  for (const std::string& body : b.bodies()) ++count[body];
  EXPECT_EQ(a.size() + b.size(), std::size_t{kMessages});
  EXPECT_EQ(count.size(), std::size_t{kMessages});
  for (const auto& [body, n] : count) EXPECT_EQ(n, 1) << body;
  EXPECT_GT(a.size(), 0u);
  EXPECT_GT(b.size(), 0u);
}

TEST_P(BrokerConformanceTest, ConcurrentPublishersAreEachDeliveredOnceInOrder) {
  const std::string q = QueueName();
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  constexpr std::size_t kTotal = std::size_t{kThreads} * kPerThread;
  Inbox inbox;
  auto sub = Subscribe(q, 50, inbox.Handler());
  std::atomic<int> failures{0};
  std::vector<std::thread> publishers;
  publishers.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    publishers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::string body = std::to_string(t) + ":" + std::to_string(i);
        if (!broker_->Publish(q, std::move(body)).ok()) ++failures;
      }
    });
  }
  for (std::thread& publisher : publishers) publisher.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_TRUE(inbox.WaitForSize(kTotal));
  std::this_thread::sleep_for(kQuiet);

  std::vector<std::string> bodies = inbox.bodies();
  EXPECT_EQ(bodies.size(), kTotal);
  // One subscriber, one priority: each publisher's messages arrive in its order, once.
  std::vector<int> next(kThreads, 0);
  for (const std::string& body : bodies) {
    std::size_t colon = body.find(':');
    ASSERT_NE(colon, std::string::npos) << body;
    int t = std::stoi(body.substr(0, colon));
    int i = std::stoi(body.substr(colon + 1));
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(i, next[t]) << "publisher " << t;
    next[t] = i + 1;
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread) << "publisher " << t;
}

// ---- Handlers -------------------------------------------------------------------------

TEST_P(BrokerConformanceTest, InvokesHandlersOneAtATimePerSubscription) {
  const std::string q = QueueName();
  constexpr int kMessages = 30;
  std::atomic<int> active{0};
  std::atomic<int> most_active{0};
  std::atomic<int> handled{0};
  auto sub = Subscribe(q, 10, [&](std::unique_ptr<Delivery> delivery) {
    int now = ++active;
    int most = most_active.load();
    while (now > most && !most_active.compare_exchange_weak(most, now)) {
    }
    std::this_thread::sleep_for(1ms);  // a little work, so overlaps would show
    --active;
    EXPECT_TRUE(delivery->Ack().ok());
    ++handled;
  });
  for (const std::string& body : Numbered("m", 0, kMessages)) Publish(q, body);
  ASSERT_TRUE(WaitFor([&] { return handled.load() >= kMessages; }, kTimeout));
  EXPECT_EQ(most_active.load(), 1);
}

TEST_P(BrokerConformanceTest, HandlerMayPublishToAnotherQueue) {
  const std::string in = QueueName("in");
  const std::string out = QueueName("out");
  constexpr int kMessages = 50;
  Inbox results;
  auto out_sub = Subscribe(out, 5, results.Handler());
  auto in_sub = Subscribe(in, 5, [&](std::unique_ptr<Delivery> delivery) {
    Status published = broker_->Publish(out, "re:" + delivery->body());
    EXPECT_TRUE(published.ok()) << published.ToString();
    EXPECT_TRUE(delivery->Ack().ok());
  });
  for (const std::string& body : Numbered("m", 0, kMessages)) Publish(in, body);
  ASSERT_TRUE(results.WaitForSize(kMessages));
  EXPECT_EQ(results.bodies(), Numbered("re:m", 0, kMessages));
}

TEST_P(BrokerConformanceTest, HandlerMayPublishToItsOwnQueue) {
  const std::string q = QueueName();
  constexpr int kHops = 100;
  std::atomic<int> last{-1};
  auto sub = Subscribe(q, 1, [&](std::unique_ptr<Delivery> delivery) {
    int hop = std::stoi(delivery->body());
    if (hop + 1 < kHops) {
      Status published = broker_->Publish(q, std::to_string(hop + 1));
      EXPECT_TRUE(published.ok()) << published.ToString();
    }
    EXPECT_TRUE(delivery->Ack().ok());
    last = hop;
  });
  Publish(q, "0");
  EXPECT_TRUE(WaitFor([&] { return last.load() == kHops - 1; }, kTimeout)) << last.load();
}

TEST_P(BrokerConformanceTest, HandlerIsNotInvokedAfterCloseReturns) {
  const std::string q = QueueName();
  std::atomic<bool> closed{false};
  std::atomic<int> calls{0};
  std::atomic<int> calls_after_close{0};
  auto sub = Subscribe(q, 5, [&](std::unique_ptr<Delivery> delivery) {
    if (closed) ++calls_after_close;
    ++calls;
    Status ignored = delivery->Ack();
    (void)ignored;
  });
  std::atomic<bool> stop{false};
  std::thread publisher([&] {
    // Bounded, so the queue does not grow without limit while nothing consumes it.
    for (int i = 0; !stop && i < 20000; ++i) {
      if (!broker_->Publish(q, std::to_string(i)).ok()) break;
      if (i % 64 == 63) std::this_thread::yield();
    }
  });
  EXPECT_TRUE(WaitFor([&] { return calls.load() >= 50; }, kTimeout));
  sub->Close();
  closed = true;
  std::this_thread::sleep_for(kQuiet);
  stop = true;
  publisher.join();
  EXPECT_EQ(calls_after_close.load(), 0);
}

TEST_P(BrokerConformanceTest, CloseWaitsForARunningHandler) {
  const std::string q = QueueName();
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  auto sub = Subscribe(q, 1, [&](std::unique_ptr<Delivery> delivery) {
    entered = true;
    WaitFor([&] { return release.load(); }, 2 * kTimeout);
    Status ignored = delivery->Ack();
    (void)ignored;
    finished = true;
  });
  Publish(q, "slow");
  ASSERT_TRUE(WaitFor([&] { return entered.load(); }, kTimeout));

  std::atomic<bool> close_returned{false};
  bool finished_before_close_returned = false;
  std::thread closer([&] {
    sub->Close();
    finished_before_close_returned = finished.load();
    close_returned = true;
  });
  std::this_thread::sleep_for(kQuiet);
  EXPECT_FALSE(close_returned.load()) << "Close returned while the handler was running";
  release = true;
  closer.join();
  EXPECT_TRUE(finished_before_close_returned);
}

TEST_P(BrokerConformanceTest, ClosingFromItsOwnHandlerDoesNotDeadlock) {
  const std::string q = QueueName();
  std::atomic<Subscription*> self{nullptr};
  std::atomic<int> calls{0};
  auto sub = Subscribe(q, 1, [&](std::unique_ptr<Delivery> delivery) {
    ++calls;
    WaitFor([&] { return self.load() != nullptr; }, kTimeout);
    self.load()->Close();
    Status ignored = delivery->Ack();  // may or may not take effect after Close
    (void)ignored;
  });
  self = sub.get();
  Publish(q, "1");
  Publish(q, "2");
  Publish(q, "3");
  ASSERT_TRUE(WaitFor([&] { return calls.load() >= 1; }, kTimeout));
  EXPECT_TRUE(WaitFor(
      [&] {
        auto info = broker_->Queue(q);
        return info.ok() && info->subscribers == 0 && info->unacked == 0 && info->size >= 2;
      },
      kStatsTimeout));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(calls.load(), 1);
  sub->Close();  // already closed: returns at once
  sub.reset();
}

TEST_P(BrokerConformanceTest, CloseIsIdempotent) {
  const std::string q = QueueName();
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  sub->Close();
  sub->Close();
  sub.reset();
  EXPECT_TRUE(QueueReaches({.name = q, .size = 0, .subscribers = 0, .unacked = 0}));
}

// ---- Lifetime -------------------------------------------------------------------------

TEST_P(BrokerConformanceTest, DeliveriesAndSubscriptionsMayOutliveTheBroker) {
  const std::string q = QueueName();
  Publish(q, "orphan");
  Inbox inbox(Mode::kHold);
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(1));
  broker_.reset();
  for (auto& delivery : inbox.TakeHeld()) {
    EXPECT_EQ(delivery->body(), "orphan");
    Status ignored = delivery->Ack();  // any status; must not crash
    (void)ignored;
  }
  sub->Close();
  sub.reset();
}

// ---- Introspection and validation -----------------------------------------------------

TEST_P(BrokerConformanceTest, ReportsQueueSizeSubscribersAndUnacked) {
  const std::string q = QueueName();
  for (const std::string& body : Numbered("m", 0, 5)) Publish(q, body);
  EXPECT_TRUE(QueueReaches({.name = q, .size = 5, .subscribers = 0, .unacked = 0}));

  Inbox first(Mode::kHold);
  auto sub = Subscribe(q, 2, first.Handler());
  ASSERT_TRUE(first.WaitForSize(2));
  EXPECT_TRUE(QueueReaches({.name = q, .size = 3, .subscribers = 1, .unacked = 2}));

  Inbox second(Mode::kHold);
  auto sub2 = Subscribe(q, 1, second.Handler());
  ASSERT_TRUE(second.WaitForSize(1));
  EXPECT_TRUE(QueueReaches({.name = q, .size = 2, .subscribers = 2, .unacked = 3}));

  auto held = first.TakeHeld();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_TRUE(held[0]->Ack().ok());  // frees a slot, which takes the next message
  ASSERT_TRUE(first.WaitForSize(3));
  EXPECT_TRUE(QueueReaches({.name = q, .size = 1, .subscribers = 2, .unacked = 3}));

  sub->Close();  // its two unacked go back
  EXPECT_TRUE(QueueReaches({.name = q, .size = 3, .subscribers = 1, .unacked = 1}));
  sub2->Close();
  EXPECT_TRUE(QueueReaches({.name = q, .size = 4, .subscribers = 0, .unacked = 0}));
}

TEST_P(BrokerConformanceTest, ListsQueuesSortedByName) {
  const std::string a = QueueName("a");
  const std::string b = QueueName("b");
  const std::string c = QueueName("c");
  Publish(b, "1");
  Publish(c, "1");
  Publish(c, "2");
  Publish(a, "1");
  ASSERT_TRUE(QueueReaches({.name = c, .size = 2, .subscribers = 0, .unacked = 0}));
  auto queues = broker().Queues();
  ASSERT_TRUE(queues.ok()) << queues.status().ToString();
  EXPECT_TRUE(
      std::is_sorted(queues->begin(), queues->end(),
                     [](const QueueInfo& x, const QueueInfo& y) { return x.name < y.name; }));
  std::vector<QueueInfo> ours;
  for (const QueueInfo& info : *queues) {
    if (info.name.starts_with(prefix_)) ours.push_back(info);
  }
  EXPECT_EQ(ours, (std::vector<QueueInfo>{
                      {.name = a, .size = 1, .subscribers = 0, .unacked = 0},
                      {.name = b, .size = 1, .subscribers = 0, .unacked = 0},
                      {.name = c, .size = 2, .subscribers = 0, .unacked = 0},
                  }));
}

TEST_P(BrokerConformanceTest, UnknownQueueIsNotFound) {
  auto info = broker().Queue(QueueName("never-used"));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kNotFound) << info.status().ToString();
}

TEST_P(BrokerConformanceTest, DeleteQueueRemovesItWithItsMessagesAndAPublishMakesItAgain) {
  const std::string q = QueueName("doomed");
  Publish(q, "one");
  Publish(q, "two");
  ASSERT_TRUE(QueueReaches({.name = q, .size = 2, .subscribers = 0, .unacked = 0}));
  Status deleted = broker().DeleteQueue(q);
  ASSERT_TRUE(deleted.ok()) << deleted.ToString();
  auto gone = broker().Queue(q);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  auto listed = broker().Queues();
  ASSERT_TRUE(listed.ok());
  for (const QueueInfo& info : *listed) EXPECT_NE(info.name, q);
  // Its messages went with it: published again, it holds only the new one.
  Publish(q, "three");
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(inbox.WaitForSize(1));
  EXPECT_EQ(inbox.bodies(), std::vector<std::string>{"three"});
}

TEST_P(BrokerConformanceTest, DeleteOfAnUnknownQueueIsNotFound) {
  Status deleted = broker().DeleteQueue(QueueName("never-used"));
  EXPECT_EQ(deleted.code(), StatusCode::kNotFound) << deleted.ToString();
}

TEST_P(BrokerConformanceTest, DeleteOfAQueueWithAConsumerIsRefusedAndDeletesNothing) {
  const std::string q = QueueName("busy");
  Inbox inbox;
  auto sub = Subscribe(q, 1, inbox.Handler());
  ASSERT_TRUE(QueueReaches({.name = q, .size = 0, .subscribers = 1, .unacked = 0}));
  Status deleted = broker().DeleteQueue(q);
  EXPECT_EQ(deleted.code(), StatusCode::kFailedPrecondition) << deleted.ToString();
  Publish(q, "still here");
  ASSERT_TRUE(inbox.WaitForSize(1));
  EXPECT_EQ(inbox.bodies(), std::vector<std::string>{"still here"});
}

TEST_P(BrokerConformanceTest, IsHealthy) {
  Status health = broker().Health();
  EXPECT_TRUE(health.ok()) << health.ToString();
}

TEST_P(BrokerConformanceTest, RejectsInvalidArguments) {
  const std::string q = QueueName();
  EXPECT_EQ(broker().Publish(q, "x", -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(broker().Publish(q, "x", 10).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(broker().Publish("", "x", 0).code(), StatusCode::kInvalidArgument);
  auto no_handler = broker().Subscribe(q, 1, DeliveryHandler{});
  ASSERT_FALSE(no_handler.ok());
  EXPECT_EQ(no_handler.status().code(), StatusCode::kInvalidArgument);
  auto no_prefetch = broker().Subscribe(q, 0, [](std::unique_ptr<Delivery>) {});
  ASSERT_FALSE(no_prefetch.ok());
  EXPECT_EQ(no_prefetch.status().code(), StatusCode::kInvalidArgument);
  auto no_name = broker().Subscribe("", 1, [](std::unique_ptr<Delivery>) {});
  ASSERT_FALSE(no_name.ok());
  EXPECT_EQ(no_name.status().code(), StatusCode::kInvalidArgument);
}

// ---- Broadcasts -----------------------------------------------------------------------

// Records the bodies a broadcast handler received. Thread-safe.
class BroadcastInbox {
 public:
  BroadcastHandler Handler() {
    return [this](std::string body) {
      std::lock_guard lock(mu_);
      bodies_.push_back(std::move(body));
    };
  }
  std::vector<std::string> bodies() const {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  bool WaitForSize(std::size_t n) const {
    return WaitFor([&] { return bodies().size() >= n; }, kTimeout);
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> bodies_;  // guarded by mu_
};

TEST_P(BrokerConformanceTest, BroadcastReachesEverySubscriberOnce) {
  const std::string topic = QueueName("topic");
  BroadcastInbox first;
  BroadcastInbox second;
  auto sub1 = SubscribeBroadcast(topic, first.Handler());
  auto sub2 = SubscribeBroadcast(topic, second.Handler());
  ASSERT_TRUE(broker().Broadcast(topic, "one").ok());
  ASSERT_TRUE(broker().Broadcast(topic, "two").ok());
  ASSERT_TRUE(first.WaitForSize(2));
  ASSERT_TRUE(second.WaitForSize(2));
  std::this_thread::sleep_for(kQuiet);  // no duplicate follows
  EXPECT_EQ(first.bodies(), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(second.bodies(), (std::vector<std::string>{"one", "two"}));
}

TEST_P(BrokerConformanceTest, BroadcastToATopicNobodyListensToIsDropped) {
  const std::string topic = QueueName("topic");
  ASSERT_TRUE(broker().Broadcast(topic, "before").ok());
  BroadcastInbox inbox;
  auto sub = SubscribeBroadcast(topic, inbox.Handler());
  ASSERT_TRUE(broker().Broadcast(topic, "after").ok());
  ASSERT_TRUE(inbox.WaitForSize(1));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(inbox.bodies(), std::vector<std::string>{"after"});
}

TEST_P(BrokerConformanceTest, BroadcastSubscriptionReceivesNothingOnceClosed) {
  const std::string topic = QueueName("topic");
  BroadcastInbox closed;
  BroadcastInbox open;
  auto sub = SubscribeBroadcast(topic, closed.Handler());
  auto witness = SubscribeBroadcast(topic, open.Handler());
  ASSERT_TRUE(broker().Broadcast(topic, "first").ok());
  ASSERT_TRUE(closed.WaitForSize(1));
  sub->Close();
  ASSERT_TRUE(broker().Broadcast(topic, "second").ok());
  ASSERT_TRUE(open.WaitForSize(2));  // the second was delivered to whoever listened
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(closed.bodies(), std::vector<std::string>{"first"});
  sub->Close();  // idempotent
}

TEST_P(BrokerConformanceTest, BroadcastTopicsAreIndependentOfEachOtherAndOfQueues) {
  const std::string name = QueueName("shared-name");
  const std::string other = QueueName("other-topic");
  BroadcastInbox broadcasts;
  BroadcastInbox others;
  Inbox queued;
  auto topic_sub = SubscribeBroadcast(name, broadcasts.Handler());
  auto other_sub = SubscribeBroadcast(other, others.Handler());
  auto queue_sub = Subscribe(name, 1, queued.Handler());
  ASSERT_TRUE(broker().Broadcast(name, "broadcast").ok());
  Publish(name, "queued");
  ASSERT_TRUE(broadcasts.WaitForSize(1));
  ASSERT_TRUE(queued.WaitForSize(1));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(broadcasts.bodies(), std::vector<std::string>{"broadcast"});
  EXPECT_EQ(queued.bodies(), std::vector<std::string>{"queued"});
  EXPECT_TRUE(others.bodies().empty());
}

TEST_P(BrokerConformanceTest, BroadcastHandlerMayCloseItsOwnSubscription) {
  const std::string topic = QueueName("topic");
  std::atomic<int> calls = 0;
  std::unique_ptr<Subscription> sub;
  std::mutex sub_mu;
  {
    std::lock_guard lock(sub_mu);
    sub = SubscribeBroadcast(topic, [&](std::string) {
      ++calls;
      std::lock_guard inner(sub_mu);
      sub->Close();
    });
  }
  ASSERT_TRUE(broker().Broadcast(topic, "one").ok());
  ASSERT_TRUE(WaitFor([&] { return calls.load() == 1; }, kTimeout));
  ASSERT_TRUE(broker().Broadcast(topic, "two").ok());
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(calls.load(), 1);
}

TEST_P(BrokerConformanceTest, BroadcastCloseWaitsForARunningHandler) {
  const std::string topic = QueueName("topic");
  std::atomic<bool> entered = false;
  std::atomic<bool> finished = false;
  auto sub = SubscribeBroadcast(topic, [&](std::string) {
    entered = true;
    std::this_thread::sleep_for(kQuiet);
    finished = true;
  });
  ASSERT_TRUE(broker().Broadcast(topic, "slow").ok());
  ASSERT_TRUE(WaitFor([&] { return entered.load(); }, kTimeout));
  sub->Close();
  EXPECT_TRUE(finished.load());
}

TEST_P(BrokerConformanceTest, BroadcastSubscriptionHasNoPrefetch) {
  BroadcastInbox inbox;
  auto sub = SubscribeBroadcast(QueueName("topic"), inbox.Handler());
  EXPECT_EQ(sub->SetPrefetch(1).code(), StatusCode::kFailedPrecondition);
}

TEST_P(BrokerConformanceTest, BroadcastRejectsInvalidTopicsAndHandlers) {
  BroadcastHandler ignore = [](std::string) {};
  for (const std::string& topic :
       {std::string(), std::string("has space"), std::string("slash/"), std::string(201, 'a')}) {
    EXPECT_EQ(broker().Broadcast(topic, "x").code(), StatusCode::kInvalidArgument) << topic;
    auto sub = broker().SubscribeBroadcast(topic, ignore);
    ASSERT_FALSE(sub.ok()) << topic;
    EXPECT_EQ(sub.status().code(), StatusCode::kInvalidArgument) << topic;
  }
  auto no_handler = broker().SubscribeBroadcast(QueueName("topic"), BroadcastHandler{});
  ASSERT_FALSE(no_handler.ok());
  EXPECT_EQ(no_handler.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(broker().Broadcast(std::string(kMaxTopicLength, 'a'), "x").ok());
}

}  // namespace broker_conformance
}  // namespace baton::testing

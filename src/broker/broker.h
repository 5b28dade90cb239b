// Broker: named queues of messages between coordinators and workers, and best-effort
// broadcasts between coordinators.
//
// Contract (every implementation passes tests/conformance/broker_conformance.h):
// - Delivery is at-least-once. A message is delivered to one subscriber of its queue at a
//   time; it is removed only when that delivery is acked. Nack with requeue, or the
//   subscription ending (Close, or the process dying) with the delivery unacked, puts it
//   back on its queue with `redelivered` set.
// - Within a queue, a higher `priority` (0..9) is delivered first; equal priorities in
//   publish order.
// - A subscription never holds more than `prefetch` unacked deliveries: that is how a
//   worker bounds what it takes to its free capacity.
// - Handlers are invoked on a broker-owned thread, never under a broker lock, one at a
//   time per subscription. A handler may ack or nack from any thread, later.
// - Publish returns once the broker has the message (for durable brokers: confirmed).
// - Ack/Nack after the subscription closed return FailedPrecondition (the message was
//   already requeued). A Delivery dropped without Ack/Nack stays unacked until its
//   subscription closes. Close may be called from the subscription's own handler.
// - InvalidArgument for a priority outside 0..9, prefetch < 1, an empty queue name or
//   handler; Queue() of an unknown name is NotFound.
// - A handler must not destroy the broker, and must not throw.
//
// Broadcasts (Broadcast / SubscribeBroadcast), beside the queues and independent of them (a
// topic and a queue of the same name have nothing in common):
// - Best effort, at most once: every broadcast subscription of the topic that is open when
//   a message is published receives it once; a subscription opened later never sees it.
//   Nothing is stored, acked or redelivered, and Broadcast returns without waiting for
//   anyone (no confirm). A subscriber may lose messages: those published while a network
//   broker reconnects its subscription (it re-binds on its own), or any that a broker
//   under pressure drops. Use them for hints that a reader can do without (or resync
//   from), never for work.
// - The handler is invoked on a broker-owned thread, never under a broker lock, one
//   message at a time per subscription. Closing (or destroying) the subscription stops
//   deliveries and returns once no handler of it runs; it may be called from its handler.
// - InvalidArgument for an empty handler and for a topic that is empty, longer than
//   kMaxTopicLength bytes, or has a character other than letters, digits, '-', '_', '.'.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace baton {

struct QueueInfo {
  std::string name;
  std::int64_t size = 0;         // messages waiting, not delivered
  std::int64_t subscribers = 0;  // open subscriptions
  std::int64_t unacked = 0;      // delivered, not yet acked
  friend bool operator==(const QueueInfo&, const QueueInfo&) = default;
};

// One delivered message. Exactly one of Ack / Nack takes effect; later calls are no-ops.
class Delivery {
 public:
  virtual ~Delivery() = default;
  virtual const std::string& queue() const = 0;
  virtual const std::string& body() const = 0;
  virtual int priority() const = 0;
  // True when this message was delivered before and not acked.
  virtual bool redelivered() const = 0;
  virtual Status Ack() = 0;
  virtual Status Nack(bool requeue) = 0;
};

using DeliveryHandler = std::function<void(std::unique_ptr<Delivery>)>;
// Receives one broadcast message's body.
using BroadcastHandler = std::function<void(std::string body)>;

// The longest broadcast topic name.
inline constexpr std::size_t kMaxTopicLength = 200;

// InvalidArgument unless `topic` is a valid broadcast topic (see the contract above).
Status CheckBroadcastTopic(std::string_view topic);

// An open consumer; destroying it closes it (unacked deliveries go back to the queue).
class Subscription {
 public:
  virtual ~Subscription() = default;
  // Stops deliveries and returns once no handler of this subscription is running.
  // Deliveries still unacked are requeued.
  virtual void Close() = 0;
  // Changes how many unacked deliveries the subscription may hold from now on (≥ 0; 0
  // pauses it). Deliveries already held stay. A worker sets it to its free slots.
  // InvalidArgument below 0; FailedPrecondition once closed.
  virtual Status SetPrefetch(int prefetch) = 0;
};

// A broadcast subscription, for Broker implementations: Close (and the destructor) call
// `close`, which must be idempotent and safe from any thread; SetPrefetch is
// FailedPrecondition.
class BroadcastSubscription final : public Subscription {
 public:
  explicit BroadcastSubscription(std::function<void()> close) : close_(std::move(close)) {}
  ~BroadcastSubscription() override { Close(); }
  BroadcastSubscription(const BroadcastSubscription&) = delete;
  BroadcastSubscription& operator=(const BroadcastSubscription&) = delete;
  void Close() override { close_(); }
  Status SetPrefetch(int) override {
    return FailedPrecondition("a broadcast subscription has no prefetch");
  }

 private:
  const std::function<void()> close_;
};

// One message of a PublishBatch.
struct OutgoingMessage {
  std::string queue;
  std::string body;
  int priority = 0;
};

class Broker {
 public:
  virtual ~Broker() = default;

  // Publishes `body` to `queue` (created on first use) with priority 0..9.
  virtual Status Publish(std::string_view queue, std::string body, int priority = 0) = 0;

  // Publishes every message, each as Publish would, and returns once the broker has them
  // all: a broker that confirms publishes waits once for all the confirms. Names and
  // priorities are checked first (InvalidArgument: nothing is published). On any other
  // error some of the messages may have been published. By default, Publish in turn.
  virtual Status PublishBatch(std::vector<OutgoingMessage> messages);

  // Delivers messages of `queue` to `handler`, at most `prefetch` (≥ 1) unacked at once.
  virtual Result<std::unique_ptr<Subscription>> Subscribe(std::string_view queue, int prefetch,
                                                          DeliveryHandler handler) = 0;

  // Every queue the broker knows, sorted by name.
  virtual Result<std::vector<QueueInfo>> Queues() = 0;
  virtual Result<QueueInfo> Queue(std::string_view name) = 0;
  // Deletes a queue with the messages waiting in it. kNotFound when there is no such
  // queue; kFailedPrecondition while it has consumers or unacked messages (stop the
  // workers that read it first), and then nothing is deleted. A later Publish to the
  // name creates it again.
  virtual Status DeleteQueue(std::string_view name) = 0;

  // Ok when the broker can accept and deliver messages.
  virtual Status Health() = 0;

  // Sends `body` to every broadcast subscription of `topic` open now (see the contract
  // above). Does not wait for the subscribers or a confirm. Unavailable when the broker
  // cannot be reached (the message is lost).
  virtual Status Broadcast(std::string_view topic, std::string body) = 0;

  // Receives the broadcasts of `topic` published from when this returns until the
  // subscription closes (SetPrefetch does not apply to it: FailedPrecondition).
  virtual Result<std::unique_ptr<Subscription>> SubscribeBroadcast(std::string_view topic,
                                                                   BroadcastHandler handler) = 0;
};

inline Status CheckBroadcastTopic(std::string_view topic) {
  if (topic.empty()) return InvalidArgument("broadcast topic is empty");
  if (topic.size() > kMaxTopicLength) {
    return InvalidArgument("broadcast topic is longer than " + std::to_string(kMaxTopicLength) +
                           " bytes");
  }
  for (char c : topic) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) {
      return InvalidArgument("broadcast topic '" + std::string(topic) +
                             "' has a character other than letters, digits, '-', '_', '.'");
    }
  }
  return Status::Ok();
}

inline Status Broker::PublishBatch(std::vector<OutgoingMessage> messages) {
  for (const OutgoingMessage& m : messages) {
    if (m.queue.empty()) return InvalidArgument("queue name is empty");
    if (m.priority < 0 || m.priority > 9) {
      return InvalidArgument("priority " + std::to_string(m.priority) + " is outside 0..9");
    }
  }
  for (OutgoingMessage& m : messages) {
    Status s = Publish(m.queue, std::move(m.body), m.priority);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace baton

// InMemoryBroker: the Broker of a single process (`baton run standalone`) and the fake that
// tests of the engine run against.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "broker/broker.h"

namespace baton {

namespace inmemory_internal {
class Core;
}  // namespace inmemory_internal

// Queues live in memory and vanish with the broker. Each subscription has its own
// dispatcher thread which hands deliveries to the handler one at a time; a message goes to
// a subscription only while it holds fewer than `prefetch` unacked deliveries, and queues
// with several subscriptions hand their messages out round-robin. A message nacked with
// requeue, or left unacked when its subscription closes, returns to its original place in
// the queue (same priority, same publish order) with `redelivered` set.
//
// Deliveries and subscriptions may outlive the broker: acking then returns an error and
// closing does nothing. Destroying a Delivery without acking it leaves the message unacked
// (it counts against prefetch) until its subscription closes, as with AMQP.
//
// For tests of the code above it, the broker can be told to fail (FailPublishes, ...).
//
// Thread-safety: every method may be called from any thread, including from handlers,
// except that the broker must not be destroyed from one of its own handlers, and a
// handler must not Close a subscription whose handler is itself waiting on this one.
class InMemoryBroker : public Broker {
 public:
  InMemoryBroker();
  // Closes every subscription (waiting for running handlers) and drops all messages.
  ~InMemoryBroker() override;

  InMemoryBroker(const InMemoryBroker&) = delete;
  InMemoryBroker& operator=(const InMemoryBroker&) = delete;

  Status Publish(std::string_view queue, std::string body, int priority = 0) override;
  Result<std::unique_ptr<Subscription>> Subscribe(std::string_view queue, int prefetch,
                                                  DeliveryHandler handler) override;
  Result<std::vector<QueueInfo>> Queues() override;
  // NotFound for a queue nobody has published to or subscribed to.
  Result<QueueInfo> Queue(std::string_view name) override;
  Status DeleteQueue(std::string_view name) override;
  Status Health() override;
  // Each broadcast subscription has its own dispatcher thread and an unbounded inbox: an
  // in-process broadcast is never lost.
  Status Broadcast(std::string_view topic, std::string body) override;
  Result<std::unique_ptr<Subscription>> SubscribeBroadcast(std::string_view topic,
                                                           BroadcastHandler handler) override;

  // Fault injection. The next `count` calls to Publish (every call when `count` is
  // negative) return `status` and drop the message. `status` must not be OK.
  void FailPublishes(Status status, int count = -1);
  // Every Subscribe and SubscribeBroadcast returns `status` until ClearFailures.
  void FailSubscribes(Status status);
  // Health returns `status` until ClearFailures.
  void FailHealth(Status status);
  // Undoes every Fail* call.
  void ClearFailures();

 private:
  // Shared with deliveries and subscriptions, which hold it weakly so they can outlive the
  // broker.
  std::shared_ptr<inmemory_internal::Core> core_;
};

}  // namespace baton

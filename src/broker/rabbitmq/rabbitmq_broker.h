// RabbitMqBroker: the Broker over RabbitMQ (AMQP 0-9-1, rabbitmq-c).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "broker/broker.h"

namespace baton {

namespace rabbitmq_internal {
class Core;
}  // namespace rabbitmq_internal

struct RabbitMqOptions {
  // amqp://user:password@host:port/vhost; an empty vhost ("amqp://host:port/") means "/".
  // amqps://… connects over TLS (1.2 or later; port 5671 by default): the server's
  // certificate must be signed by `tls_ca` (the system's CAs when empty) and name the
  // URL's host; `tls_cert` and `tls_key` (PEM files) are the client certificate shown to
  // a server that asks for one.
  std::string url;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // When set, queues are declared with `x-expires` so RabbitMQ deletes them after being
  // unused this long (for tests). Every broker declaring a queue must agree on it.
  std::optional<std::chrono::milliseconds> queue_expires;
  // How long Publish waits for the broker's confirm.
  std::chrono::milliseconds confirm_timeout = std::chrono::seconds(10);
  // Publish retries (reconnecting) this many times after a connection failure.
  int publish_retries = 3;
  // RabbitMQ's management API, http://[user:password@]host:port (the AMQP credentials
  // when none are given): Queue() and Queues() then report every queue of the vhost with
  // its unacked count across all processes (as of RabbitMQ's last statistics sample).
  std::string management_url;
};

// Queues are durable classic queues declared with `x-max-priority: 9` (plus `x-expires`
// when configured), messages are persistent (delivery_mode 2) with a per-message priority,
// and Publish returns once the broker confirmed the message (publisher confirms).
//
// Connections and threads:
// - Publishing, Queue(), Queues() and Health() share one "publisher" connection (channel 1
//   in confirm mode for publishes, channel 2 for passive queue.declare), owned by no
//   thread in particular: every use holds the publisher mutex. It is reopened on demand
//   after a failure; Publish retries with exponential backoff.
// - Each subscription has its own connection, owned by that subscription's I/O thread,
//   which alone touches it: it receives deliveries (a per-consumer basic.qos: a new
//   consumer whenever the room beside what is held changes; manual acks) and sends the acks/nacks
//   that any thread queues for it (an eventfd wakes it). A second thread per subscription, the
//   dispatcher, hands deliveries to the handler one at a time, so a slow handler never stalls the
//   acks. When the connection breaks, the I/O thread reconnects with backoff and consumes again;
//   deliveries from the broken connection can no longer be acked (FailedPrecondition:
//   RabbitMQ requeued them).
// - Close() stops the dispatcher (waiting for a running handler), then the I/O thread
//   sends the acks queued so far and closes the connection, which makes RabbitMQ requeue
//   what is still unacked.
//
// Queue statistics: `size` (messages ready) and `subscribers` (consumers) come from a
// passive queue.declare: exact at the time of the call. AMQP has no unacked count: with
// `management_url`, `unacked` is RabbitMQ's (deliveries held by any process, as sampled
// every collect_statistics_interval, 5 s by default) and Queues() lists every queue of
// the vhost; without it (or when that API fails), `unacked` counts only the deliveries
// held by this broker object's own subscriptions, and Queues() lists the queues this
// object published to or subscribed to (Queue() answers for any existing queue).
//
// Broadcasts: a topic is a fanout exchange `baton.broadcast.<topic>` (not durable, never
// auto-deleted). Broadcast publishes to it, transient and unconfirmed, on a connection of
// its own (opened on first use, reopened once per call after a failure), so it neither
// waits for nor delays the confirmed publishes. Each broadcast subscription has its own
// connection with a server-named exclusive auto-delete queue bound to the exchange,
// consumed without acks by one thread that also calls the handler (a slow handler lets
// RabbitMQ queue for it). When that connection breaks, the thread reconnects with backoff
// and declares and binds afresh: what was broadcast in between is lost. Those queues
// ("amq.gen-...") are left out of Queues().
//
// Heartbeats are off; a dead TCP peer is noticed when a read or write fails.
//
// Thread-safety: every method may be called from any thread, including from handlers,
// except that a handler must not destroy the broker.
class RabbitMqBroker : public Broker {
 public:
  // Connects the publisher connection; Unavailable when the broker cannot be reached,
  // InvalidArgument for a malformed URL.
  static Result<std::unique_ptr<RabbitMqBroker>> Connect(RabbitMqOptions options);

  // Closes every subscription (waiting for running handlers) and the connections.
  ~RabbitMqBroker() override;

  RabbitMqBroker(const RabbitMqBroker&) = delete;
  RabbitMqBroker& operator=(const RabbitMqBroker&) = delete;

  Status Publish(std::string_view queue, std::string body, int priority = 0) override;
  // Sends them all, then waits once for every confirm.
  Status PublishBatch(std::vector<OutgoingMessage> messages) override;
  Result<std::unique_ptr<Subscription>> Subscribe(std::string_view queue, int prefetch,
                                                  DeliveryHandler handler) override;
  Result<std::vector<QueueInfo>> Queues() override;
  Result<QueueInfo> Queue(std::string_view name) override;
  Status DeleteQueue(std::string_view name) override;
  // Ok when RabbitMQ answers on the publisher connection (reopened if needed): a
  // passive queue.declare round trip.
  Status Health() override;
  Status Broadcast(std::string_view topic, std::string body) override;
  Result<std::unique_ptr<Subscription>> SubscribeBroadcast(std::string_view topic,
                                                           BroadcastHandler handler) override;

 private:
  explicit RabbitMqBroker(std::shared_ptr<rabbitmq_internal::Core> core);

  std::shared_ptr<rabbitmq_internal::Core> core_;
};

}  // namespace baton

#include "broker/rabbitmq/rabbitmq_broker.h"

#include <amqp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/mutex.h"
#include "broker/rabbitmq/management.h"
#include "broker/rabbitmq/socket.h"

namespace baton {
namespace rabbitmq_internal {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr int kMaxPriority = 9;
constexpr std::size_t kMaxQueueName = 255;
// Publisher connection: channel 1 publishes in confirm mode, channel 2 inspects queues
// (a passive declare of a missing queue closes its channel).
constexpr amqp_channel_t kPublishChannel = 1;
constexpr amqp_channel_t kInspectChannel = 2;
// Subscription connections consume on channel 1; the broadcast connection publishes on 1.
constexpr amqp_channel_t kConsumeChannel = 1;
constexpr amqp_channel_t kBroadcastChannel = 1;
// A topic's fanout exchange is named this followed by the topic.
constexpr std::string_view kBroadcastExchangePrefix = "baton.broadcast.";
constexpr int kFrameMax = 131072;
constexpr milliseconds kConnectTimeout{5000};
constexpr milliseconds kRpcTimeout{10000};
constexpr milliseconds kIdlePoll{200};
constexpr milliseconds kMinBackoff{100};
constexpr milliseconds kMaxBackoff{2000};

timeval ToTimeval(milliseconds d) {
  if (d.count() < 0) d = milliseconds(0);
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(d.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((d.count() % 1000) * 1000);
  return tv;
}

amqp_bytes_t Bytes(std::string_view s) {
  amqp_bytes_t b;
  b.len = s.size();
  b.bytes = const_cast<char*>(s.data());
  return b;
}

std::string FromBytes(amqp_bytes_t b) {
  if (b.len == 0 || b.bytes == nullptr) return {};
  return std::string(static_cast<const char*>(b.bytes), b.len);
}

Status FromServerCode(int code, const std::string& text, std::string_view what) {
  std::string message = std::string(what) + ": " + std::to_string(code) + " " + text;
  switch (code) {
    case 404:  // NOT_FOUND
      return NotFound(std::move(message));
    case 403:  // ACCESS_REFUSED
    case 405:  // RESOURCE_LOCKED
    case 406:  // PRECONDITION_FAILED
      return FailedPrecondition(std::move(message));
    default:
      return Unavailable(std::move(message));
  }
}

Status CheckQueueName(std::string_view name) {
  if (name.empty()) return InvalidArgument("queue name is empty");
  if (name.size() > kMaxQueueName) return InvalidArgument("queue name is longer than 255 bytes");
  return Status::Ok();
}

// One AMQP connection. Not thread-safe: its owner serialises every use (see the class
// comment of RabbitMqBroker for who owns which).
class Connection {
 public:
  static Result<std::unique_ptr<Connection>> Open(const ServerAddress& address) {
    amqp_connection_state_t state = amqp_new_connection();
    if (state == nullptr) return Internal("amqp_new_connection failed");
    std::unique_ptr<Connection> conn(new Connection(state));
    conn->broken_ = true;  // until logged in: nothing to close politely
    BATON_RETURN_IF_ERROR(OpenSocket(state, address, ToTimeval(kConnectTimeout)));
    amqp_rpc_reply_t reply =
        amqp_login(state, address.vhost.c_str(), 0, kFrameMax, /*heartbeat=*/0,
                   AMQP_SASL_METHOD_PLAIN, address.user.c_str(), address.password.c_str());
    if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
      conn->broken_ = false;
      Status status = conn->Check(reply, 0, "logging in to " + Describe(address));
      conn->broken_ = true;
      // Over TLS the server refuses a client certificate after the handshake: say why.
      std::string detail = address.tls ? TlsErrorDetail() : "";
      if (address.tls && detail.empty() && address.files.cert.empty()) {
        // The alert was lost with the connection (the client's write failed first).
        detail = "the server may require a client certificate (broker.rabbitmq.tls.cert)";
      }
      if (status.ok()) status = Unavailable("logging in to " + Describe(address) + " failed");
      if (!detail.empty()) status = Status(status.code(), status.message() + ": " + detail);
      return status;
    }
    conn->broken_ = false;
    timeval rpc_timeout = ToTimeval(kRpcTimeout);
    amqp_set_rpc_timeout(state, &rpc_timeout);
    return conn;
  }

  ~Connection() {
    if (!broken_) {
      amqp_rpc_reply_t ignored = amqp_connection_close(state_, AMQP_REPLY_SUCCESS);
      (void)ignored;
    }
    amqp_destroy_connection(state_);
  }

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  amqp_connection_state_t state() const { return state_; }
  int fd() const { return amqp_get_sockfd(state_); }
  bool broken() const { return broken_; }
  void MarkBroken() { broken_ = true; }

  Status OpenChannel(amqp_channel_t channel) {
    amqp_channel_open(state_, channel);
    return Check(amqp_get_rpc_reply(state_), channel, "opening a channel");
  }

  // Converts an RPC reply. Answers a server-initiated channel.close / connection.close;
  // after a connection-level problem the connection is marked broken.
  Status Check(const amqp_rpc_reply_t& reply, amqp_channel_t channel, std::string_view what) {
    switch (reply.reply_type) {
      case AMQP_RESPONSE_NORMAL:
        return Status::Ok();
      case AMQP_RESPONSE_NONE:
        broken_ = true;
        return Internal(std::string(what) + ": no RPC reply");
      case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        broken_ = true;
        return Unavailable(std::string(what) + ": " + amqp_error_string2(reply.library_error));
      case AMQP_RESPONSE_SERVER_EXCEPTION:
        return OnServerClose(reply.reply, channel, what);
    }
    broken_ = true;
    return Internal(std::string(what) + ": unknown reply type");
  }

  // Handles a channel.close or connection.close the server sent.
  Status OnServerClose(const amqp_method_t& method, amqp_channel_t channel, std::string_view what) {
    if (method.id == AMQP_CHANNEL_CLOSE_METHOD) {
      const auto* close = static_cast<const amqp_channel_close_t*>(method.decoded);
      amqp_channel_close_ok_t ok{};
      if (amqp_send_method(state_, channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) != AMQP_STATUS_OK) {
        broken_ = true;
      }
      return FromServerCode(close->reply_code, FromBytes(close->reply_text), what);
    }
    broken_ = true;
    if (method.id == AMQP_CONNECTION_CLOSE_METHOD) {
      const auto* close = static_cast<const amqp_connection_close_t*>(method.decoded);
      amqp_connection_close_ok_t ok{};
      (void)amqp_send_method(state_, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
      Status status = FromServerCode(close->reply_code, FromBytes(close->reply_text), what);
      return Unavailable("connection closed by RabbitMQ: " + status.message());
    }
    return Internal(std::string(what) + ": unexpected method " + std::to_string(method.id));
  }

 private:
  explicit Connection(amqp_connection_state_t state) : state_(state) {}

  amqp_connection_state_t state_;
  bool broken_ = false;
};

// Declares `name` durable with the arguments every declaration of this broker uses.
Status DeclareQueue(Connection& conn, amqp_channel_t channel, std::string_view name,
                    const RabbitMqOptions& options) {
  amqp_table_entry_t entries[2];
  int n = 0;
  entries[n].key = amqp_cstring_bytes("x-max-priority");
  entries[n].value.kind = AMQP_FIELD_KIND_I32;
  entries[n].value.value.i32 = kMaxPriority;
  ++n;
  // A node's own queue (its cancellations) goes once the node has been gone for an hour,
  // so queues of nodes long dead do not pile up.
  std::optional<milliseconds> expires = options.queue_expires;
  if (!expires && name.starts_with("x-cancel.")) expires = std::chrono::hours(1);
  if (expires) {
    entries[n].key = amqp_cstring_bytes("x-expires");
    entries[n].value.kind = AMQP_FIELD_KIND_I32;
    entries[n].value.value.i32 =
        static_cast<std::int32_t>(std::clamp<std::int64_t>(expires->count(), 1, INT32_MAX));
    ++n;
  }
  amqp_table_t args;
  args.num_entries = n;
  args.entries = entries;
  amqp_queue_declare(conn.state(), channel, Bytes(name), /*passive=*/0, /*durable=*/1,
                     /*exclusive=*/0, /*auto_delete=*/0, args);
  return conn.Check(amqp_get_rpc_reply(conn.state()), channel,
                    "declaring queue '" + std::string(name) + "'");
}

std::string ExchangeName(std::string_view topic) {
  return std::string(kBroadcastExchangePrefix) + std::string(topic);
}

// Declares a topic's exchange: fanout, not durable (nothing it routes is kept), never
// deleted automatically (a publisher may declare it before anyone binds).
Status DeclareExchange(Connection& conn, amqp_channel_t channel, const std::string& exchange) {
  amqp_exchange_declare(conn.state(), channel, Bytes(exchange), amqp_cstring_bytes("fanout"),
                        /*passive=*/0, /*durable=*/0, /*auto_delete=*/0, /*internal=*/0,
                        amqp_empty_table);
  return conn.Check(amqp_get_rpc_reply(conn.state()), channel,
                    "declaring exchange '" + exchange + "'");
}

// An eventfd, closed on destruction.
class WakeFd {
 public:
  WakeFd() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~WakeFd() {
    if (fd_ >= 0) close(fd_);
  }
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  int fd() const { return fd_; }
  void Notify() const {
    std::uint64_t one = 1;
    ssize_t ignored = write(fd_, &one, sizeof one);
    (void)ignored;
  }
  void Drain() const {
    std::uint64_t value = 0;
    ssize_t ignored = read(fd_, &value, sizeof value);
    (void)ignored;
  }

 private:
  const int fd_;
};

enum class Readable { kYes, kNo, kFailed };

// Whether a consumer's connection has something to read, waiting up to kIdlePoll (less
// when `wake` is notified, which it drains). kFailed: the poll failed (not EINTR).
Readable WaitReadable(Connection& conn, const WakeFd& wake) {
  amqp_connection_state_t state = conn.state();
  if (amqp_frames_enqueued(state) || amqp_data_in_buffer(state)) return Readable::kYes;
  pollfd fds[2] = {{conn.fd(), POLLIN, 0}, {wake.fd(), POLLIN, 0}};
  int n = poll(fds, 2, static_cast<int>(kIdlePoll.count()));
  if (n < 0) return errno == EINTR ? Readable::kNo : Readable::kFailed;
  if (fds[1].revents & POLLIN) wake.Drain();
  return (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) ? Readable::kYes : Readable::kNo;
}

}  // namespace

enum class Settlement { kAck, kRequeue, kDrop };

// A message received on a subscription's connection, not yet handed to the handler.
struct Incoming {
  std::uint64_t tag = 0;
  std::uint64_t generation = 0;
  std::string body;
  int priority = 0;
  bool redelivered = false;
};

// One subscription: its connection (owned by `io`), and its dispatcher.
struct SubState : std::enable_shared_from_this<SubState> {
  SubState(std::uint64_t id_in, std::string queue_in, int prefetch_in, DeliveryHandler handler_in)
      : id(id_in),
        queue(std::move(queue_in)),
        handler(std::move(handler_in)),
        prefetch(prefetch_in) {}

  Status Settle(std::uint64_t tag, std::uint64_t delivery_generation, Settlement how) {
    {
      MutexLock lock(mu);
      // A handler still running while Close waits for it may settle; after that, no.
      if (closed) return FailedPrecondition("subscription is closed; the message was requeued");
      auto it = outstanding.find(tag);
      if (delivery_generation != generation || it == outstanding.end()) {
        return FailedPrecondition("the connection was lost; RabbitMQ requeued the message");
      }
      settles.push_back({tag, how, it->second});
      outstanding.erase(it);
    }
    wake.Notify();
    return Status::Ok();
  }

  const std::uint64_t id;
  const std::string queue;
  // Called only on the dispatcher thread, without locks.
  const DeliveryHandler handler;
  const WakeFd wake;  // wakes `io` for settles and stops

  Mutex mu;
  std::condition_variable_any ready;  // the dispatcher waits for `inbox` or `closing`
  std::deque<Incoming> inbox BATON_GUARDED_BY(mu);
  struct Pending {
    std::uint64_t tag;
    Settlement how;
    std::uint64_t consumer;  // as in `outstanding`
  };
  std::vector<Pending> settles BATON_GUARDED_BY(mu);  // to send, for the current generation
  // Received, not settled (current generation): delivery tag → the consumer it came to
  // (its `consumer_seq`; 0 for one already cancelled when the delivery was read).
  std::map<std::uint64_t, std::uint64_t> outstanding BATON_GUARDED_BY(mu);
  std::uint64_t generation BATON_GUARDED_BY(mu) = 0;        // bumped when the connection is lost
  int prefetch BATON_GUARDED_BY(mu) = 1;                    // wanted; 0: paused (no consumer)
  std::uint64_t prefetch_version BATON_GUARDED_BY(mu) = 0;  // bumped by SetPrefetch
  std::uint64_t applied_version BATON_GUARDED_BY(mu) =
      0;  // what the io thread has applied (or will on reconnect)
  bool connected BATON_GUARDED_BY(mu) = false;  // the io thread has a connection
  std::condition_variable_any applied;          // SetPrefetch waits for applied_version
  bool closing BATON_GUARDED_BY(mu) = false;    // no more handler calls
  bool closed BATON_GUARDED_BY(mu) = false;     // the dispatcher has stopped: settles are refused
  bool finish_on_exit BATON_GUARDED_BY(mu) = false;  // closed from its own handler
  std::thread::id dispatcher_id
      BATON_GUARDED_BY(mu);  // set before the sub is published in Core::subs_

  // Only the io thread touches these once started.
  std::unique_ptr<Connection> conn;
  bool consuming = false;
  bool cancelling = false;  // basic.cancel sent, its cancel-ok not read yet
  int channel_qos = -1;     // the per-consumer prefetch last set on the channel
  std::string consumer_tag;
  std::uint64_t consumer_seq = 0;  // bumped for every basic.consume
  int consumer_limit = 0;          // the consumer's own prefetch (basic.qos, per consumer)

  // Declared last so that they are joined before the members above are destroyed.
  std::jthread io;
  std::jthread dispatcher;
};

// One broadcast subscription: its connection, with a server-named exclusive queue bound
// to the topic's exchange, consumed without acks by `thread`, which alone touches `conn`
// and calls the handler.
struct BroadcastSubState {
  BroadcastSubState(std::uint64_t id_in, std::string exchange_in, BroadcastHandler handler_in)
      : id(id_in), exchange(std::move(exchange_in)), handler(std::move(handler_in)) {}

  const std::uint64_t id;
  const std::string exchange;
  const BroadcastHandler handler;
  const WakeFd wake;  // wakes `thread` for a stop

  Mutex mu;
  bool closing BATON_GUARDED_BY(mu) = false;  // Close has begun

  std::unique_ptr<Connection> conn;  // `thread` only, once started

  // Declared last so that it is joined before the members above are destroyed.
  std::jthread thread;
};

class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(ServerAddress address, RabbitMqOptions options, std::optional<ManagementApi> management)
      : address_(std::move(address)),
        options_(std::move(options)),
        management_(std::move(management)) {}

  Status Publish(std::string_view queue, std::string body, int priority);
  Status PublishBatch(std::vector<OutgoingMessage> messages);
  Result<std::unique_ptr<Subscription>> Subscribe(std::string_view queue, int prefetch,
                                                  DeliveryHandler handler);
  Result<std::vector<QueueInfo>> Queues();
  Result<QueueInfo> Queue(std::string_view name);
  Status DeleteQueue(std::string_view name);
  Status Health();

  void CloseSubscription(std::uint64_t id);
  Status SetPrefetch(std::uint64_t id, int prefetch);
  void Shutdown();

  Status Broadcast(std::string_view topic, std::string body);
  Result<std::unique_ptr<Subscription>> SubscribeBroadcast(std::string_view topic,
                                                           BroadcastHandler handler);
  void CloseBroadcast(std::uint64_t id);

 private:
  Status EnsurePublisher() BATON_REQUIRES(pub_mu_);
  // Sends the messages not yet `confirmed` and waits for their confirms, marking them.
  Status PublishOnce(std::span<const OutgoingMessage> messages, std::vector<char>& confirmed)
      BATON_REQUIRES(pub_mu_);
  Result<QueueInfo> InspectLocked(std::string_view name) BATON_REQUIRES(pub_mu_);

  Result<std::unique_ptr<Connection>> OpenConsumer(SubState& sub);
  // Brings the connection's basic.qos / consumer to the wanted prefetch (io thread).
  Status ApplyPrefetch(SubState* sub);
  void IoLoop(const std::stop_token& stop, SubState* sub);
  // Sends queued acks/nacks; false when the connection failed.
  bool FlushSettles(SubState* sub);
  void LoseConnection(SubState* sub);
  void DispatchLoop(SubState* sub);
  // Stops the io thread (which closes the connection) and forgets the sub. When
  // `to_graveyard`, the caller is the sub's own dispatcher, which is joined later.
  void FinishClose(const std::shared_ptr<SubState>& sub, bool to_graveyard);
  void ReapGraveyard();

  Status EnsureBroadcaster() BATON_REQUIRES(bcast_mu_);
  // Publishes once on the broadcast connection, after reading what the server sent it
  // (a channel.close for an earlier publish marks it broken).
  Status BroadcastOnce(const std::string& exchange, const std::string& body)
      BATON_REQUIRES(bcast_mu_);
  Result<std::unique_ptr<Connection>> OpenBroadcastConsumer(const std::string& exchange);
  void BroadcastLoop(const std::stop_token& stop, BroadcastSubState* sub);

  const ServerAddress address_;
  const RabbitMqOptions options_;
  const std::optional<ManagementApi> management_;

  Mutex pub_mu_;
  std::unique_ptr<Connection> pub_ BATON_GUARDED_BY(pub_mu_);
  bool inspect_open_ BATON_GUARDED_BY(pub_mu_) = false;
  std::uint64_t publish_seq_ BATON_GUARDED_BY(pub_mu_) = 0;
  // on pub_
  std::map<std::string, Clock::time_point, std::less<>> declared_ BATON_GUARDED_BY(pub_mu_);

  Mutex mu_;
  std::condition_variable_any closed_;
  std::set<std::string, std::less<>> known_ BATON_GUARDED_BY(mu_);
  std::unordered_map<std::uint64_t, std::shared_ptr<SubState>> subs_ BATON_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<SubState>> graveyard_ BATON_GUARDED_BY(mu_);
  std::uint64_t next_sub_id_ BATON_GUARDED_BY(mu_) = 0;
  bool shut_down_ BATON_GUARDED_BY(mu_) = false;
  // Broadcast subscriptions until fully closed (closed_ is notified when one leaves), and
  // those closed from their own handler, joined later.
  std::unordered_map<std::uint64_t, std::shared_ptr<BroadcastSubState>> broadcast_subs_
      BATON_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<BroadcastSubState>> broadcast_graveyard_ BATON_GUARDED_BY(mu_);

  // The broadcast connection: its own, so that a broadcast never waits behind a confirmed
  // publish nor delays one; no confirm mode. Opened on first use.
  Mutex bcast_mu_;
  std::unique_ptr<Connection> bcast_ BATON_GUARDED_BY(bcast_mu_);
  std::set<std::string, std::less<>> bcast_declared_ BATON_GUARDED_BY(bcast_mu_);  // on bcast_
};

namespace {

// Thread-safety: Ack/Nack from any thread; the first call wins.
class RabbitMqDelivery final : public Delivery {
 public:
  RabbitMqDelivery(std::weak_ptr<SubState> sub, const std::string& queue, Incoming in)
      : sub_(std::move(sub)),
        queue_(queue),
        tag_(in.tag),
        generation_(in.generation),
        body_(std::move(in.body)),
        priority_(in.priority),
        redelivered_(in.redelivered) {}

  const std::string& queue() const override { return queue_; }
  const std::string& body() const override { return body_; }
  int priority() const override { return priority_; }
  bool redelivered() const override { return redelivered_; }
  Status Ack() override { return Settle(Settlement::kAck); }
  Status Nack(bool requeue) override {
    return Settle(requeue ? Settlement::kRequeue : Settlement::kDrop);
  }

 private:
  Status Settle(Settlement how) {
    if (settled_.exchange(true)) return Status::Ok();
    std::shared_ptr<SubState> sub = sub_.lock();
    if (!sub) return FailedPrecondition("subscription is closed; the message was requeued");
    return sub->Settle(tag_, generation_, how);
  }

  const std::weak_ptr<SubState> sub_;
  const std::string queue_;
  const std::uint64_t tag_;
  const std::uint64_t generation_;
  const std::string body_;
  const int priority_;
  const bool redelivered_;
  std::atomic<bool> settled_{false};
};

class RabbitMqSubscription final : public Subscription {
 public:
  RabbitMqSubscription(std::weak_ptr<Core> core, std::uint64_t id)
      : core_(std::move(core)), id_(id) {}
  ~RabbitMqSubscription() override { Close(); }
  void Close() override {
    if (std::shared_ptr<Core> core = core_.lock()) core->CloseSubscription(id_);
  }
  Status SetPrefetch(int prefetch) override {
    if (prefetch < 0) return InvalidArgument("prefetch must be 0 or more");
    std::shared_ptr<Core> core = core_.lock();
    if (!core) return FailedPrecondition("the broker is gone");
    return core->SetPrefetch(id_, prefetch);
  }

 private:
  const std::weak_ptr<Core> core_;
  const std::uint64_t id_;
};

}  // namespace

// ---- Publisher connection ---------------------------------------------------------------

Status Core::EnsurePublisher() {
  if (pub_ && !pub_->broken()) return Status::Ok();
  pub_.reset();
  inspect_open_ = false;
  declared_.clear();
  publish_seq_ = 0;
  auto conn = Connection::Open(address_);
  if (!conn.ok()) return conn.status();
  Connection& c = **conn;
  BATON_RETURN_IF_ERROR(c.OpenChannel(kPublishChannel));
  amqp_confirm_select(c.state(), kPublishChannel);
  BATON_RETURN_IF_ERROR(
      c.Check(amqp_get_rpc_reply(c.state()), kPublishChannel, "enabling publisher confirms"));
  pub_ = std::move(conn).value();
  return Status::Ok();
}

Status Core::PublishOnce(std::span<const OutgoingMessage> messages, std::vector<char>& confirmed) {
  Connection& c = *pub_;
  // The publish sequence number of each message sent now → its index.
  std::map<std::uint64_t, std::size_t> waiting;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (confirmed[i]) continue;
    const OutgoingMessage& m = messages[i];
    const auto now = Clock::now();
    auto declared = declared_.find(m.queue);
    // With x-expires, publishing does not count as using the queue: redeclare it now and
    // then.
    const bool stale = declared != declared_.end() && options_.queue_expires &&
                       now - declared->second > *options_.queue_expires / 2;
    if (declared == declared_.end() || stale) {
      Status status = DeclareQueue(c, kPublishChannel, m.queue, options_);
      if (!status.ok()) {
        c.MarkBroken();  // the channel is gone (or the connection): start afresh
        return status;
      }
      declared_.insert_or_assign(m.queue, now);
    }
    amqp_basic_properties_t props{};
    props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_PRIORITY_FLAG;
    props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    props.priority = static_cast<std::uint8_t>(m.priority);
    int rc = amqp_basic_publish(c.state(), kPublishChannel, amqp_empty_bytes, Bytes(m.queue),
                                /*mandatory=*/0, /*immediate=*/0, &props, Bytes(m.body));
    if (rc != AMQP_STATUS_OK) {
      c.MarkBroken();
      return Unavailable(std::string("publishing: ") + amqp_error_string2(rc));
    }
    waiting.emplace(++publish_seq_, i);
  }
  // One wait for every confirm: RabbitMQ acks (or nacks) each, or several at once.
  int refused = 0;
  auto settle = [&](std::uint64_t tag, bool multiple, bool ack) {
    auto first = multiple ? waiting.begin() : waiting.find(tag);
    auto last =
        multiple ? waiting.upper_bound(tag) : (first == waiting.end() ? first : std::next(first));
    for (auto it = first; it != last; ++it) {
      if (ack)
        confirmed[it->second] = 1;
      else
        ++refused;
    }
    waiting.erase(first, last);
  };
  const auto deadline = Clock::now() + options_.confirm_timeout;
  while (!waiting.empty()) {
    timeval tv = ToTimeval(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    amqp_frame_t frame;
    int rc = amqp_simple_wait_frame_noblock(c.state(), &frame, &tv);
    if (rc == AMQP_STATUS_TIMEOUT) {
      c.MarkBroken();
      return DeadlineExceeded("RabbitMQ did not confirm the publish in time");
    }
    if (rc != AMQP_STATUS_OK) {
      c.MarkBroken();
      return Unavailable(std::string("waiting for the publish confirm: ") + amqp_error_string2(rc));
    }
    if (frame.frame_type != AMQP_FRAME_METHOD) continue;
    const amqp_method_t& method = frame.payload.method;
    switch (method.id) {
      case AMQP_BASIC_ACK_METHOD: {
        const auto* ack = static_cast<const amqp_basic_ack_t*>(method.decoded);
        settle(ack->delivery_tag, ack->multiple != 0, /*ack=*/true);
        break;
      }
      case AMQP_BASIC_NACK_METHOD: {
        const auto* nack = static_cast<const amqp_basic_nack_t*>(method.decoded);
        settle(nack->delivery_tag, nack->multiple != 0, /*ack=*/false);
        break;
      }
      case AMQP_CHANNEL_CLOSE_METHOD:
      case AMQP_CONNECTION_CLOSE_METHOD: {
        Status status = c.OnServerClose(method, frame.channel, "publishing");
        c.MarkBroken();
        return status;
      }
      default:
        break;
    }
  }
  amqp_maybe_release_buffers(c.state());
  if (refused > 0) {
    return Unavailable(refused == 1 ? std::string("RabbitMQ refused the message (basic.nack)")
                                    : "RabbitMQ refused " + std::to_string(refused) +
                                          " messages (basic.nack)");
  }
  return Status::Ok();
}

Status Core::PublishBatch(std::vector<OutgoingMessage> messages) {
  for (const OutgoingMessage& m : messages) {
    BATON_RETURN_IF_ERROR(CheckQueueName(m.queue));
    if (m.priority < 0 || m.priority > kMaxPriority) {
      return InvalidArgument("priority " + std::to_string(m.priority) + " is outside 0..9");
    }
  }
  {
    MutexLock lock(mu_);
    if (shut_down_) return Unavailable("broker is shut down");
  }
  if (messages.empty()) return Status::Ok();
  std::vector<char> confirmed(messages.size(), 0);
  {
    MutexLock lock(pub_mu_);
    milliseconds backoff = kMinBackoff;
    for (int attempt = 0;; ++attempt) {
      // A retry sends again only what was not confirmed.
      Status status = EnsurePublisher();
      if (status.ok()) status = PublishOnce(messages, confirmed);
      if (status.ok()) break;
      const bool retryable = status.code() == StatusCode::kUnavailable ||
                             status.code() == StatusCode::kDeadlineExceeded;
      if (!retryable || attempt >= options_.publish_retries) return status;
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }
  MutexLock lock(mu_);
  for (const OutgoingMessage& m : messages) known_.emplace(m.queue);
  return Status::Ok();
}

Status Core::Publish(std::string_view queue, std::string body, int priority) {
  std::vector<OutgoingMessage> one;
  one.push_back({std::string(queue), std::move(body), priority});
  return PublishBatch(std::move(one));
}

Result<QueueInfo> Core::InspectLocked(std::string_view name) {
  for (int attempt = 0;; ++attempt) {
    Status status = EnsurePublisher();
    if (status.ok() && !inspect_open_) {
      status = pub_->OpenChannel(kInspectChannel);
      inspect_open_ = status.ok();
    }
    if (status.ok()) {
      Connection& c = *pub_;
      amqp_queue_declare_ok_t* ok = amqp_queue_declare(c.state(), kInspectChannel, Bytes(name),
                                                       /*passive=*/1, 0, 0, 0, amqp_empty_table);
      if (ok != nullptr) {
        QueueInfo info{.name = std::string(name),
                       .size = ok->message_count,
                       .subscribers = ok->consumer_count,
                       .unacked = 0};
        amqp_maybe_release_buffers(c.state());
        return info;
      }
      status = c.Check(amqp_get_rpc_reply(c.state()), kInspectChannel,
                       "inspecting queue '" + std::string(name) + "'");
      inspect_open_ = false;  // a failed passive declare closes the channel
      if (status.code() == StatusCode::kNotFound) {
        return NotFound("no queue named '" + std::string(name) + "'");
      }
    }
    if (attempt >= 1) return status;
  }
}

Status Core::DeleteQueue(std::string_view name) {
  BATON_RETURN_IF_ERROR(CheckQueueName(name));
  {
    MutexLock lock(pub_mu_);
    BATON_ASSIGN_OR_RETURN(QueueInfo info, InspectLocked(name));
    if (info.subscribers > 0) {
      return FailedPrecondition("queue '" + std::string(name) + "' has " +
                                std::to_string(info.subscribers) +
                                " consumer(s): stop the workers that read it first");
    }
    // if-unused: RabbitMQ refuses it too should a consumer come in between.
    Connection& c = *pub_;
    amqp_queue_delete_ok_t* ok =
        amqp_queue_delete(c.state(), kInspectChannel, Bytes(name), /*if_unused=*/1, 0);
    if (ok == nullptr) {
      Status status = c.Check(amqp_get_rpc_reply(c.state()), kInspectChannel,
                              "deleting queue '" + std::string(name) + "'");
      inspect_open_ = false;  // a refused delete closes the channel
      if (status.code() == StatusCode::kFailedPrecondition) {
        return FailedPrecondition("queue '" + std::string(name) +
                                  "' is in use: stop the workers that read it first");
      }
      return status.ok() ? Internal("deleting queue '" + std::string(name) + "' failed") : status;
    }
    amqp_maybe_release_buffers(c.state());
    declared_.erase(std::string(name));
  }
  MutexLock lock(mu_);
  known_.erase(std::string(name));
  return Status::Ok();
}

Result<QueueInfo> Core::Queue(std::string_view name) {
  BATON_RETURN_IF_ERROR(CheckQueueName(name));
  // Ready messages and consumers from a passive queue.declare: exact, now.
  Result<QueueInfo> info = [&] {
    MutexLock lock(pub_mu_);
    return InspectLocked(name);
  }();
  if (!info.ok()) return info;
  if (management_) {
    // Unacked across every process, as RabbitMQ last sampled it.
    auto sampled = management_->Queue(address_.vhost, name);
    if (sampled.ok()) {
      info->unacked = sampled->unacked;
      return info;
    }
    if (sampled.status().code() != StatusCode::kNotFound) {
      log::Warn("queue statistics from the management API failed; unacked counts this process only",
                {{"error", sampled.status().message()}});
    }
  }
  MutexLock lock(mu_);
  for (const auto& [id, sub] : subs_) {
    if (sub->queue != name) continue;
    MutexLock sub_lock(sub->mu);
    info->unacked += static_cast<std::int64_t>(sub->outstanding.size());
  }
  return info;
}

Result<std::vector<QueueInfo>> Core::Queues() {
  std::vector<std::string> names;
  std::map<std::string, std::int64_t> sampled_unacked;
  bool sampled = false;
  if (management_) {
    // Every queue of the vhost, not only those this object used.
    auto listed = management_->Queues(address_.vhost);
    if (listed.ok()) {
      sampled = true;
      for (const QueueInfo& q : *listed) {
        // Server-named queues (broadcast subscriptions' "amq.gen-..."): exclusive to
        // their connection, so not even inspectable, and no queue of the engine's.
        if (q.name.starts_with("amq.")) continue;
        names.push_back(q.name);
        sampled_unacked[q.name] = q.unacked;
      }
    } else {
      log::Warn("queue statistics from the management API failed; listing this process's queues",
                {{"error", listed.status().message()}});
    }
  }
  if (!sampled) {
    MutexLock lock(mu_);
    names.assign(known_.begin(), known_.end());
  }
  std::vector<QueueInfo> infos;
  for (const std::string& name : names) {
    Result<QueueInfo> info = sampled ? [&]() -> Result<QueueInfo> {
      MutexLock lock(pub_mu_);
      auto exact = InspectLocked(name);
      if (exact.ok()) exact->unacked = sampled_unacked[name];
      return exact;
    }()
        : Queue(name);
    if (info.ok()) {
      infos.push_back(std::move(info).value());
    } else if (info.status().code() == StatusCode::kNotFound) {
      MutexLock lock(mu_);
      known_.erase(name);  // deleted (or expired) since
    } else {
      return info.status();
    }
  }
  return infos;
}

Status Core::Health() {
  {
    MutexLock lock(mu_);
    if (shut_down_) return Unavailable("broker is shut down");
  }
  MutexLock lock(pub_mu_);
  // A round trip, not just "the socket looks open": a stopped broker is only noticed
  // when something is sent. Any answer — "no such queue" included — means it is up.
  auto probe = InspectLocked("x-health-probe");
  if (probe.ok() || probe.status().code() == StatusCode::kNotFound) return Status::Ok();
  return probe.status();
}

// ---- Subscriptions ----------------------------------------------------------------------

Result<std::unique_ptr<Connection>> Core::OpenConsumer(SubState& sub) {
  auto conn = Connection::Open(address_);
  if (!conn.ok()) return conn.status();
  Connection& c = **conn;
  BATON_RETURN_IF_ERROR(c.OpenChannel(kConsumeChannel));
  BATON_RETURN_IF_ERROR(DeclareQueue(c, kConsumeChannel, sub.queue, options_));
  sub.consuming = false;
  sub.cancelling = false;
  sub.channel_qos = -1;
  return conn;
}

namespace {

// Deliveries held (not settled, or settled but not yet sent) from consumers already
// cancelled: all of them when none is consuming.
int HeldFromEarlierConsumers(SubState& sub) {
  MutexLock lock(sub.mu);
  const std::uint64_t current = sub.consuming ? sub.consumer_seq : 0;
  auto earlier = [&](std::uint64_t consumer) { return current == 0 || consumer != current; };
  int n = 0;
  for (const auto& [tag, consumer] : sub.outstanding) n += earlier(consumer) ? 1 : 0;
  for (const SubState::Pending& p : sub.settles) n += earlier(p.consumer) ? 1 : 0;
  return n;
}

}  // namespace

// RabbitMQ keeps a priority queue's order for a requeued message only under a consumer's
// own limit (basic.qos with global = 0): under a channel-wide one, a message requeued by a
// nack could lose its turn to a lower priority. A consumer's limit is fixed when it starts,
// so another limit means another consumer: the old one is cancelled, what it delivered
// stays held (unacked) and counts against `prefetch` here, and a new consumer starts with
// the room left. Runs on the io thread at every turn of its loop.
Status Core::ApplyPrefetch(SubState* sub) {
  int wanted = 0;
  std::uint64_t version = 0;
  {
    MutexLock lock(sub->mu);
    wanted = sub->prefetch;
    version = sub->prefetch_version;
  }
  const int earlier = HeldFromEarlierConsumers(*sub);
  auto done = [&] {
    {
      MutexLock lock(sub->mu);
      sub->applied_version = std::max(sub->applied_version, version);
    }
    sub->applied.notify_all();
  };
  Connection& c = *sub->conn;
  amqp_connection_state_t state = c.state();
  if (sub->consuming && earlier + sub->consumer_limit != wanted) {
    // Not waiting for the cancel-ok: RabbitMQ handles a channel's frames in order, so no
    // ack sent after this brings the cancelled consumer anything. Its deliveries sent
    // before the cancel-ok are read as earlier ones; the loop notes the cancel-ok.
    amqp_basic_cancel_t cancel{};
    cancel.consumer_tag = Bytes(sub->consumer_tag);
    cancel.nowait = 0;
    int rc = amqp_send_method(state, kConsumeChannel, AMQP_BASIC_CANCEL_METHOD, &cancel);
    if (rc != AMQP_STATUS_OK) {
      return Unavailable(std::string("basic.cancel: ") + amqp_error_string2(rc));
    }
    sub->consuming = false;
    sub->cancelling = true;
  }
  // A new consumer once every delivery of the cancelled one has been read and counted.
  const int room = wanted - earlier;
  if (!sub->consuming && !sub->cancelling && room > 0 && !amqp_frames_enqueued(state) &&
      !amqp_data_in_buffer(state)) {
    if (sub->channel_qos != room) {  // it stays set on the channel for later consumers
      amqp_basic_qos(state, kConsumeChannel, 0, static_cast<std::uint16_t>(std::min(room, 65535)),
                     /*global=*/0);
      BATON_RETURN_IF_ERROR(c.Check(amqp_get_rpc_reply(state), kConsumeChannel, "basic.qos"));
      sub->channel_qos = room;
    }
    amqp_basic_consume_ok_t* ok =
        amqp_basic_consume(state, kConsumeChannel, Bytes(sub->queue), amqp_empty_bytes,
                           /*no_local=*/0, /*no_ack=*/0, /*exclusive=*/0, amqp_empty_table);
    BATON_RETURN_IF_ERROR(c.Check(amqp_get_rpc_reply(state), kConsumeChannel, "basic.consume"));
    sub->consumer_tag = FromBytes(ok->consumer_tag);
    sub->consumer_limit = room;
    sub->consuming = true;
    MutexLock lock(sub->mu);
    ++sub->consumer_seq;
  }
  done();
  return Status::Ok();
}

Status Core::SetPrefetch(std::uint64_t id, int prefetch) {
  std::shared_ptr<SubState> sub;
  {
    MutexLock lock(mu_);
    auto it = subs_.find(id);
    if (it == subs_.end()) return FailedPrecondition("subscription is closed");
    sub = it->second;
  }
  MutexLock lock(sub->mu);
  if (sub->closing) return FailedPrecondition("subscription is closed");
  sub->prefetch = prefetch;
  std::uint64_t version = ++sub->prefetch_version;
  sub->wake.Notify();
  // "From now on": wait until the connection has it, so that an ack sent after this call
  // cannot bring a delivery the new prefetch forbids. Without a connection there is
  // nothing to wait for: a new one starts with it.
  sub->applied.wait_for(lock, std::chrono::seconds(5), [&] {
    sub->mu.AssertHeld();
    return sub->applied_version >= version || !sub->connected || sub->closing;
  });
  return Status::Ok();
}

Result<std::unique_ptr<Subscription>> Core::Subscribe(std::string_view queue, int prefetch,
                                                      DeliveryHandler handler) {
  BATON_RETURN_IF_ERROR(CheckQueueName(queue));
  if (prefetch < 1) return InvalidArgument("prefetch must be at least 1");
  if (!handler) return InvalidArgument("handler is empty");
  ReapGraveyard();
  std::uint64_t id = 0;
  {
    MutexLock lock(mu_);
    if (shut_down_) return Unavailable("broker is shut down");
    id = ++next_sub_id_;
  }
  auto sub = std::make_shared<SubState>(id, std::string(queue), prefetch, std::move(handler));
  if (sub->wake.fd() < 0) return Internal("eventfd failed");
  auto conn = OpenConsumer(*sub);
  if (!conn.ok()) return conn.status();
  sub->conn = std::move(conn).value();
  {
    MutexLock lock(sub->mu);  // no thread runs yet: for the analysis
    sub->connected = true;    // SetPrefetch waits for the io thread
  }
  try {
    sub->io =
        std::jthread([this, raw = sub.get()](const std::stop_token& stop) { IoLoop(stop, raw); });
    sub->dispatcher = std::jthread([this, raw = sub.get()] { DispatchLoop(raw); });
  } catch (const std::system_error& e) {
    {
      MutexLock lock(sub->mu);
      sub->closing = true;
      sub->ready.notify_all();
      sub->applied.notify_all();
    }
    sub->wake.Notify();
    return Unavailable(std::string("cannot start a subscription thread: ") + e.what());
  }
  {
    MutexLock lock(mu_);
    {
      MutexLock sub_lock(sub->mu);
      sub->dispatcher_id = sub->dispatcher.get_id();
    }
    if (!shut_down_) {
      subs_.emplace(id, sub);
      known_.emplace(queue);
      return std::unique_ptr<Subscription>(new RabbitMqSubscription(weak_from_this(), id));
    }
  }
  // Shut down while subscribing.
  {
    MutexLock lock(sub->mu);
    sub->closing = true;
    sub->ready.notify_all();
    sub->applied.notify_all();
  }
  sub->dispatcher.join();
  sub->io.request_stop();
  sub->wake.Notify();
  sub->io.join();
  return Unavailable("broker is shut down");
}

bool Core::FlushSettles(SubState* sub) {
  std::vector<SubState::Pending> settles;
  {
    MutexLock lock(sub->mu);
    settles.swap(sub->settles);
  }
  amqp_connection_state_t state = sub->conn->state();
  for (const SubState::Pending& p : settles) {
    int rc = AMQP_STATUS_OK;
    switch (p.how) {
      case Settlement::kAck:
        rc = amqp_basic_ack(state, kConsumeChannel, p.tag, 0);
        break;
      case Settlement::kRequeue:
        rc = amqp_basic_nack(state, kConsumeChannel, p.tag, 0, /*requeue=*/1);
        break;
      case Settlement::kDrop:
        rc = amqp_basic_nack(state, kConsumeChannel, p.tag, 0, /*requeue=*/0);
        break;
    }
    if (rc != AMQP_STATUS_OK) return false;
  }
  return true;
}

void Core::LoseConnection(SubState* sub) {
  {
    MutexLock lock(sub->mu);
    sub->connected = false;
    ++sub->generation;
    sub->outstanding.clear();
    sub->settles.clear();
    sub->inbox.clear();  // RabbitMQ redelivers them
  }
  sub->conn->MarkBroken();
  sub->conn.reset();
}

void Core::IoLoop(const std::stop_token& stop, SubState* sub) {
  milliseconds backoff = kMinBackoff;
  while (!stop.stop_requested()) {
    if (!sub->conn) {
      auto conn = OpenConsumer(*sub);
      if (!conn.ok()) {
        const auto until = Clock::now() + backoff;
        while (!stop.stop_requested() && Clock::now() < until) {
          pollfd fd{sub->wake.fd(), POLLIN, 0};
          (void)poll(&fd, 1, 50);
          sub->wake.Drain();
        }
        backoff = std::min(backoff * 2, kMaxBackoff);
        continue;
      }
      sub->conn = std::move(conn).value();
      backoff = kMinBackoff;
      {
        MutexLock lock(sub->mu);
        sub->connected = true;
      }
    }
    // Settles first, so that the room for a new consumer counts what is still held. (A
    // SetPrefetch caller acks after it returns, so its acks come after the new prefetch.)
    if (!FlushSettles(sub) || !ApplyPrefetch(sub).ok()) {
      LoseConnection(sub);
      continue;
    }
    const Readable readable = WaitReadable(*sub->conn, sub->wake);
    if (readable == Readable::kFailed) LoseConnection(sub);
    if (readable != Readable::kYes) continue;
    amqp_connection_state_t state = sub->conn->state();
    amqp_maybe_release_buffers(state);
    amqp_envelope_t envelope;
    timeval tv = ToTimeval(milliseconds(100));
    amqp_rpc_reply_t reply = amqp_consume_message(state, &envelope, &tv, 0);
    if (reply.reply_type == AMQP_RESPONSE_NORMAL) {
      Incoming in;
      in.tag = envelope.delivery_tag;
      in.body = FromBytes(envelope.message.body);
      if (envelope.message.properties._flags & AMQP_BASIC_PRIORITY_FLAG) {
        in.priority = envelope.message.properties.priority;
      }
      in.redelivered = envelope.redelivered != 0;
      const bool to_current =
          sub->consuming && FromBytes(envelope.consumer_tag) == sub->consumer_tag;
      amqp_destroy_envelope(&envelope);
      MutexLock lock(sub->mu);
      if (!sub->closing) {
        in.generation = sub->generation;
        sub->outstanding.emplace(in.tag, to_current ? sub->consumer_seq : 0);
        sub->inbox.push_back(std::move(in));
        sub->ready.notify_one();
      }
      continue;
    }
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        reply.library_error == AMQP_STATUS_TIMEOUT) {
      continue;
    }
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        reply.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
      amqp_frame_t frame;
      timeval zero{};
      if (amqp_simple_wait_frame_noblock(state, &frame, &zero) != AMQP_STATUS_OK) {
        LoseConnection(sub);
        continue;
      }
      if (frame.frame_type == AMQP_FRAME_METHOD) {
        const amqp_method_t& method = frame.payload.method;
        if (method.id == AMQP_CHANNEL_CLOSE_METHOD || method.id == AMQP_CONNECTION_CLOSE_METHOD) {
          (void)sub->conn->OnServerClose(method, frame.channel, "consuming");
          LoseConnection(sub);
        } else if (method.id == AMQP_BASIC_CANCEL_METHOD) {
          LoseConnection(sub);  // queue deleted: declare and consume again
        } else if (method.id == AMQP_BASIC_CANCEL_OK_METHOD) {
          sub->cancelling = false;  // what the cancelled consumer was sent has been read
        }
      }
      continue;
    }
    LoseConnection(sub);
  }
  if (sub->conn) {
    // Send what was settled before Close, then close: RabbitMQ requeues the rest.
    if (!FlushSettles(sub)) sub->conn->MarkBroken();
    sub->conn.reset();
  }
}

void Core::DispatchLoop(SubState* sub) {
  MutexLock lock(sub->mu);
  while (true) {
    sub->ready.wait(lock, [&] {
      sub->mu.AssertHeld();
      return sub->closing || !sub->inbox.empty();
    });
    if (sub->closing) break;
    Incoming in = std::move(sub->inbox.front());
    sub->inbox.pop_front();
    lock.unlock();
    sub->handler(
        std::make_unique<RabbitMqDelivery>(sub->weak_from_this(), sub->queue, std::move(in)));
    lock.lock();
  }
  const bool finish = sub->finish_on_exit;
  lock.unlock();
  if (finish) {
    std::shared_ptr<SubState> self;
    {
      MutexLock core_lock(mu_);
      auto it = subs_.find(sub->id);
      if (it != subs_.end()) self = it->second;
    }
    if (self) FinishClose(self, /*to_graveyard=*/true);
  }
}

void Core::FinishClose(const std::shared_ptr<SubState>& sub, bool to_graveyard) {
  {
    MutexLock lock(sub->mu);
    sub->closed = true;
  }
  sub->io.request_stop();
  sub->wake.Notify();
  sub->io.join();
  MutexLock lock(mu_);
  subs_.erase(sub->id);
  if (to_graveyard) graveyard_.push_back(sub);
  closed_.notify_all();
}

void Core::CloseSubscription(std::uint64_t id) {
  std::shared_ptr<SubState> sub;
  {
    MutexLock lock(mu_);
    auto it = subs_.find(id);
    if (it == subs_.end()) return;
    sub = it->second;
  }
  bool own_thread = false;
  {
    MutexLock lock(sub->mu);
    own_thread = sub->dispatcher_id == std::this_thread::get_id();
    if (!sub->closing) {
      sub->closing = true;
      sub->inbox.clear();
      sub->ready.notify_all();
      sub->applied.notify_all();
      if (own_thread) {
        sub->finish_on_exit = true;
        return;
      }
    } else {
      own_thread = own_thread || sub->finish_on_exit;
      sub.reset();  // someone else is closing it
    }
  }
  if (!sub) {
    if (!own_thread) {
      MutexLock lock(mu_);
      closed_.wait(lock, [&] {
        mu_.AssertHeld();
        return !subs_.contains(id);
      });
    }
    return;
  }
  sub->dispatcher.join();
  FinishClose(sub, /*to_graveyard=*/false);
  ReapGraveyard();
  // `sub`, and its handler with whatever it captured, is destroyed here, without locks.
}

void Core::ReapGraveyard() {
  std::vector<std::shared_ptr<SubState>> dead;
  std::vector<std::shared_ptr<BroadcastSubState>> dead_broadcasts;
  {
    MutexLock lock(mu_);
    dead.swap(graveyard_);
    dead_broadcasts.swap(broadcast_graveyard_);
  }
  // Destroying them joins dispatchers that are past their last use of anything.
}

void Core::Shutdown() {
  std::vector<std::uint64_t> ids;
  std::vector<std::uint64_t> broadcast_ids;
  {
    MutexLock lock(mu_);
    shut_down_ = true;
    for (const auto& [id, sub] : subs_) ids.push_back(id);
    for (const auto& [id, sub] : broadcast_subs_) broadcast_ids.push_back(id);
  }
  for (std::uint64_t id : ids) CloseSubscription(id);
  for (std::uint64_t id : broadcast_ids) CloseBroadcast(id);
  std::vector<std::shared_ptr<SubState>> dead;
  std::vector<std::shared_ptr<BroadcastSubState>> dead_broadcasts;
  {
    MutexLock lock(mu_);
    closed_.wait(lock, [&] {
      mu_.AssertHeld();
      return subs_.empty() && broadcast_subs_.empty();
    });
    dead.swap(graveyard_);
    dead_broadcasts.swap(broadcast_graveyard_);
  }
  dead.clear();
  dead_broadcasts.clear();
  {
    MutexLock lock(bcast_mu_);
    bcast_.reset();
  }
  MutexLock lock(pub_mu_);
  pub_.reset();
}

// ---- Broadcasts -------------------------------------------------------------------------

Status Core::EnsureBroadcaster() {
  if (bcast_ && !bcast_->broken()) return Status::Ok();
  bcast_.reset();
  bcast_declared_.clear();
  auto conn = Connection::Open(address_);
  if (!conn.ok()) return conn.status();
  BATON_RETURN_IF_ERROR((*conn)->OpenChannel(kBroadcastChannel));
  bcast_ = std::move(conn).value();
  return Status::Ok();
}

Status Core::BroadcastOnce(const std::string& exchange, const std::string& body) {
  Connection& c = *bcast_;
  amqp_connection_state_t state = c.state();
  // Without confirms the server says nothing, unless it closed the channel (an exchange
  // deleted under us) or the connection: read what came, without waiting.
  for (;;) {
    if (!amqp_frames_enqueued(state) && !amqp_data_in_buffer(state)) {
      pollfd fd{c.fd(), POLLIN, 0};
      if (poll(&fd, 1, 0) <= 0 || !(fd.revents & (POLLIN | POLLHUP | POLLERR))) break;
    }
    amqp_frame_t frame;
    timeval zero{};
    int rc = amqp_simple_wait_frame_noblock(state, &frame, &zero);
    if (rc == AMQP_STATUS_TIMEOUT) break;
    if (rc != AMQP_STATUS_OK) {
      c.MarkBroken();
      return Unavailable(std::string("broadcast connection: ") + amqp_error_string2(rc));
    }
    if (frame.frame_type == AMQP_FRAME_METHOD &&
        (frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
         frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)) {
      Status status = c.OnServerClose(frame.payload.method, frame.channel, "broadcasting");
      c.MarkBroken();
      return Unavailable(status.message());
    }
  }
  if (!bcast_declared_.contains(exchange)) {
    Status status = DeclareExchange(c, kBroadcastChannel, exchange);
    if (!status.ok()) {
      c.MarkBroken();  // the channel is gone (or the connection): start afresh
      return status;
    }
    bcast_declared_.insert(exchange);
  }
  amqp_basic_properties_t props{};  // transient: nothing of it is kept
  int rc = amqp_basic_publish(state, kBroadcastChannel, Bytes(exchange), amqp_empty_bytes,
                              /*mandatory=*/0, /*immediate=*/0, &props, Bytes(body));
  amqp_maybe_release_buffers(state);
  if (rc != AMQP_STATUS_OK) {
    c.MarkBroken();
    return Unavailable(std::string("broadcasting: ") + amqp_error_string2(rc));
  }
  return Status::Ok();
}

Status Core::Broadcast(std::string_view topic, std::string body) {
  BATON_RETURN_IF_ERROR(CheckBroadcastTopic(topic));
  {
    MutexLock lock(mu_);
    if (shut_down_) return Unavailable("broker is shut down");
  }
  const std::string exchange = ExchangeName(topic);
  MutexLock lock(bcast_mu_);
  Status status;
  // One retry on a fresh connection: the one kept may have died since the last use.
  for (int attempt = 0; attempt < 2; ++attempt) {
    status = EnsureBroadcaster();
    if (status.ok()) status = BroadcastOnce(exchange, body);
    if (status.ok() || status.code() != StatusCode::kUnavailable) return status;
  }
  return status;
}

Result<std::unique_ptr<Connection>> Core::OpenBroadcastConsumer(const std::string& exchange) {
  auto opened = Connection::Open(address_);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<Connection> conn = std::move(opened).value();
  Connection& c = *conn;
  amqp_connection_state_t state = c.state();
  BATON_RETURN_IF_ERROR(c.OpenChannel(kConsumeChannel));
  BATON_RETURN_IF_ERROR(DeclareExchange(c, kConsumeChannel, exchange));
  // Server-named, exclusive to this connection and deleted with it.
  amqp_queue_declare_ok_t* declared =
      amqp_queue_declare(state, kConsumeChannel, amqp_empty_bytes, /*passive=*/0, /*durable=*/0,
                         /*exclusive=*/1, /*auto_delete=*/1, amqp_empty_table);
  BATON_RETURN_IF_ERROR(
      c.Check(amqp_get_rpc_reply(state), kConsumeChannel, "declaring a broadcast queue"));
  const std::string queue = FromBytes(declared->queue);
  amqp_queue_bind(state, kConsumeChannel, Bytes(queue), Bytes(exchange), amqp_empty_bytes,
                  amqp_empty_table);
  BATON_RETURN_IF_ERROR(c.Check(amqp_get_rpc_reply(state), kConsumeChannel,
                                "binding a queue to exchange '" + exchange + "'"));
  amqp_basic_consume(state, kConsumeChannel, Bytes(queue), amqp_empty_bytes, /*no_local=*/0,
                     /*no_ack=*/1, /*exclusive=*/1, amqp_empty_table);
  BATON_RETURN_IF_ERROR(
      c.Check(amqp_get_rpc_reply(state), kConsumeChannel, "consuming a broadcast queue"));
  return conn;
}

Result<std::unique_ptr<Subscription>> Core::SubscribeBroadcast(std::string_view topic,
                                                               BroadcastHandler handler) {
  BATON_RETURN_IF_ERROR(CheckBroadcastTopic(topic));
  if (!handler) return InvalidArgument("handler is empty");
  ReapGraveyard();
  std::uint64_t id = 0;
  {
    MutexLock lock(mu_);
    if (shut_down_) return Unavailable("broker is shut down");
    id = ++next_sub_id_;
  }
  auto sub = std::make_shared<BroadcastSubState>(id, ExchangeName(topic), std::move(handler));
  if (sub->wake.fd() < 0) return Internal("eventfd failed");
  // Bound before returning: whatever is broadcast from now on reaches it.
  auto conn = OpenBroadcastConsumer(sub->exchange);
  if (!conn.ok()) return conn.status();
  sub->conn = std::move(conn).value();
  try {
    sub->thread = std::jthread(
        [this, raw = sub.get()](const std::stop_token& stop) { BroadcastLoop(stop, raw); });
  } catch (const std::system_error& e) {
    return Unavailable(std::string("cannot start a subscription thread: ") + e.what());
  }
  {
    MutexLock lock(mu_);
    if (!shut_down_) {
      broadcast_subs_.emplace(id, sub);
      return std::unique_ptr<Subscription>(new BroadcastSubscription([core = weak_from_this(), id] {
        if (std::shared_ptr<Core> c = core.lock()) c->CloseBroadcast(id);
      }));
    }
  }
  // Shut down while subscribing.
  sub->thread.request_stop();
  sub->wake.Notify();
  sub->thread.join();
  return Unavailable("broker is shut down");
}

void Core::BroadcastLoop(const std::stop_token& stop, BroadcastSubState* sub) {
  milliseconds backoff = kMinBackoff;
  while (!stop.stop_requested()) {
    if (!sub->conn) {
      // Declared and bound afresh: what was broadcast in between is lost (the contract).
      auto conn = OpenBroadcastConsumer(sub->exchange);
      if (!conn.ok()) {
        pollfd fd{sub->wake.fd(), POLLIN, 0};
        (void)poll(&fd, 1, static_cast<int>(backoff.count()));
        sub->wake.Drain();
        backoff = std::min(backoff * 2, kMaxBackoff);
        continue;
      }
      sub->conn = std::move(conn).value();
      backoff = kMinBackoff;
    }
    const Readable readable = WaitReadable(*sub->conn, sub->wake);
    if (readable == Readable::kFailed) {
      sub->conn->MarkBroken();
      sub->conn.reset();
    }
    if (readable != Readable::kYes) continue;
    amqp_connection_state_t state = sub->conn->state();
    amqp_maybe_release_buffers(state);
    amqp_envelope_t envelope;
    timeval tv = ToTimeval(milliseconds(100));
    amqp_rpc_reply_t reply = amqp_consume_message(state, &envelope, &tv, 0);
    if (reply.reply_type == AMQP_RESPONSE_NORMAL) {
      std::string body = FromBytes(envelope.message.body);
      amqp_destroy_envelope(&envelope);
      if (stop.stop_requested()) break;
      sub->handler(std::move(body));
      continue;
    }
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        reply.library_error == AMQP_STATUS_TIMEOUT) {
      continue;
    }
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        reply.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
      amqp_frame_t frame;
      timeval zero{};
      if (amqp_simple_wait_frame_noblock(state, &frame, &zero) == AMQP_STATUS_OK) {
        if (frame.frame_type != AMQP_FRAME_METHOD) continue;
        const amqp_method_t& method = frame.payload.method;
        if (method.id == AMQP_CHANNEL_CLOSE_METHOD || method.id == AMQP_CONNECTION_CLOSE_METHOD) {
          (void)sub->conn->OnServerClose(method, frame.channel, "consuming broadcasts");
        } else if (method.id != AMQP_BASIC_CANCEL_METHOD) {
          continue;  // anything else is harmless
        }
      }
    }
    // The connection failed, or the server closed it or cancelled the consumer (its
    // queue or exchange deleted): start afresh.
    sub->conn->MarkBroken();
    sub->conn.reset();
  }
  sub->conn.reset();  // closing the connection deletes its queue
}

void Core::CloseBroadcast(std::uint64_t id) {
  std::shared_ptr<BroadcastSubState> sub;
  {
    MutexLock lock(mu_);
    auto it = broadcast_subs_.find(id);
    if (it == broadcast_subs_.end()) return;
    sub = it->second;
  }
  const bool own_thread = sub->thread.get_id() == std::this_thread::get_id();
  bool already = false;
  {
    MutexLock lock(sub->mu);
    already = sub->closing;
    sub->closing = true;
  }
  if (already) {
    // Someone else is closing it; wait for them, unless they are waiting for us.
    if (!own_thread) {
      MutexLock lock(mu_);
      closed_.wait(lock, [&] {
        mu_.AssertHeld();
        return !broadcast_subs_.contains(id);
      });
    }
    return;
  }
  sub->thread.request_stop();
  sub->wake.Notify();
  if (!own_thread) sub->thread.join();
  MutexLock lock(mu_);
  broadcast_subs_.erase(id);
  // From its own handler: the thread ends when the handler returns; joined later.
  if (own_thread) broadcast_graveyard_.push_back(std::move(sub));
  closed_.notify_all();
}

}  // namespace rabbitmq_internal

// ---- RabbitMqBroker ---------------------------------------------------------------------

Result<std::unique_ptr<RabbitMqBroker>> RabbitMqBroker::Connect(RabbitMqOptions options) {
  auto address = rabbitmq_internal::ParseUrl(
      options.url, {.ca = options.tls_ca, .cert = options.tls_cert, .key = options.tls_key});
  if (!address.ok()) return address.status();
  std::optional<rabbitmq_internal::ManagementApi> management;
  if (!options.management_url.empty()) {
    auto api = rabbitmq_internal::ManagementApi::Parse(options.management_url, address->user,
                                                       address->password, options.tls_ca);
    if (!api.ok()) return api.status();
    management = std::move(*api);
  }
  auto core = std::make_shared<rabbitmq_internal::Core>(std::move(address).value(),
                                                        std::move(options), std::move(management));
  BATON_RETURN_IF_ERROR(core->Health());
  return std::unique_ptr<RabbitMqBroker>(new RabbitMqBroker(std::move(core)));
}

RabbitMqBroker::RabbitMqBroker(std::shared_ptr<rabbitmq_internal::Core> core)
    : core_(std::move(core)) {}

RabbitMqBroker::~RabbitMqBroker() { core_->Shutdown(); }

Status RabbitMqBroker::Publish(std::string_view queue, std::string body, int priority) {
  return core_->Publish(queue, std::move(body), priority);
}

Status RabbitMqBroker::PublishBatch(std::vector<OutgoingMessage> messages) {
  return core_->PublishBatch(std::move(messages));
}

Result<std::unique_ptr<Subscription>> RabbitMqBroker::Subscribe(std::string_view queue,
                                                                int prefetch,
                                                                DeliveryHandler handler) {
  return core_->Subscribe(queue, prefetch, std::move(handler));
}

Result<std::vector<QueueInfo>> RabbitMqBroker::Queues() { return core_->Queues(); }

Result<QueueInfo> RabbitMqBroker::Queue(std::string_view name) { return core_->Queue(name); }

Status RabbitMqBroker::DeleteQueue(std::string_view name) { return core_->DeleteQueue(name); }

Status RabbitMqBroker::Health() { return core_->Health(); }

Status RabbitMqBroker::Broadcast(std::string_view topic, std::string body) {
  return core_->Broadcast(topic, std::move(body));
}

Result<std::unique_ptr<Subscription>> RabbitMqBroker::SubscribeBroadcast(std::string_view topic,
                                                                         BroadcastHandler handler) {
  return core_->SubscribeBroadcast(topic, std::move(handler));
}

}  // namespace baton

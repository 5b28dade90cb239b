#include "broker/inmemory/inmemory_broker.h"

#include <atomic>
#include <cassert>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mutex.h"

namespace baton {
namespace inmemory_internal {
namespace {

constexpr int kMinPriority = 0;
constexpr int kMaxPriority = 9;

}  // namespace

// A message's place in its queue. The sequence is assigned at publish and kept for life,
// so a requeued message goes back exactly where it was.
struct MessageKey {
  int priority = 0;
  std::uint64_t sequence = 0;
};

// Higher priority first, then publish order.
struct MessageOrder {
  bool operator()(const MessageKey& a, const MessageKey& b) const {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.sequence < b.sequence;
  }
};

struct Message {
  // Shared with the Delivery handed to the handler, so the body is never copied and is
  // still here to requeue if the delivery is not acked.
  std::shared_ptr<const std::string> body;
  bool redelivered = false;
};

enum class Settlement { kAck, kRequeue, kDrop };

struct QueueState;

// One subscription. Members are guarded by Core::mu_ unless marked const (not annotated:
// the analysis cannot name another object's mutex; Core's functions that touch them
// require mu_).
struct SubState {
  // A message taken from the queue for this subscription and not yet acked.
  struct Outstanding {
    MessageKey key;
    Message message;
  };

  SubState(std::uint64_t id_in, QueueState* queue_in, int prefetch_in, DeliveryHandler handler_in)
      : id(id_in),
        queue(queue_in),
        prefetch(static_cast<std::size_t>(prefetch_in)),
        handler(std::move(handler_in)) {}

  const std::uint64_t id;
  QueueState* const queue;  // Points into Core::queues_, whose nodes live as long as Core.
  std::size_t prefetch;
  // Called only on `thread`, without the lock.
  const DeliveryHandler handler;

  // Every message of this subscription not acked yet, by delivery tag: those in `inbox`
  // and those handed to the handler. Its size is what prefetch bounds.
  std::map<std::uint64_t, Outstanding> outstanding;
  // Tags taken off the queue for this subscription, not yet passed to the handler.
  std::deque<std::uint64_t> inbox;
  // In queue->credit, i.e. able to take one more message.
  bool in_credit = false;
  // Close has begun: takes no more messages; the dispatcher stops after its handler.
  bool closing = false;
  // Closed from its own handler, so nobody can join the dispatcher: it finishes the close
  // itself when the handler returns.
  bool finish_on_exit = false;
  // The dispatcher waits here for `inbox` or a stop.
  std::condition_variable_any wake;
  // Started once in Subscribe (under the lock); joined by whoever finishes the close, or
  // via Core::graveyard_.
  std::jthread thread;
};

struct QueueState {
  explicit QueueState(std::string name_in) : name(std::move(name_in)) {}

  const std::string name;
  std::map<MessageKey, Message, MessageOrder> ready;
  // Open subscriptions with room for another message, in round-robin order: a
  // subscription that takes a message goes to the back. Keeps a dispatch O(1) in the
  // number of subscribers.
  std::deque<SubState*> credit;
  std::int64_t subscribers = 0;
  std::int64_t unacked = 0;
};

// One broadcast subscription. Members are guarded by Core::mu_ unless const.
struct BroadcastSub {
  BroadcastSub(std::uint64_t id_in, std::string topic_in, BroadcastHandler handler_in)
      : id(id_in), topic(std::move(topic_in)), handler(std::move(handler_in)) {}

  const std::uint64_t id;
  const std::string topic;
  // Called only on `thread`, without the lock.
  const BroadcastHandler handler;
  // Bodies broadcast to it, not yet handed to the handler.
  std::deque<std::string> inbox;
  bool closing = false;
  std::condition_variable_any wake;
  std::jthread thread;
};

// The broker's state, shared with the deliveries and subscriptions it hands out.
class Core : public std::enable_shared_from_this<Core> {
 public:
  Status Publish(std::string_view queue, std::string body, int priority) BATON_EXCLUDES(mu_);
  Result<std::unique_ptr<Subscription>> Subscribe(std::string_view queue, int prefetch,
                                                  DeliveryHandler handler) BATON_EXCLUDES(mu_);
  Result<std::vector<QueueInfo>> Queues() BATON_EXCLUDES(mu_);
  Result<QueueInfo> Queue(std::string_view name) BATON_EXCLUDES(mu_);
  Status DeleteQueue(std::string_view name) BATON_EXCLUDES(mu_);
  Status Health() BATON_EXCLUDES(mu_);
  Status Broadcast(std::string_view topic, std::string body) BATON_EXCLUDES(mu_);
  Result<std::unique_ptr<Subscription>> SubscribeBroadcast(std::string_view topic,
                                                           BroadcastHandler handler)
      BATON_EXCLUDES(mu_);
  void CloseBroadcast(std::uint64_t sub_id) BATON_EXCLUDES(mu_);

  Status Settle(std::uint64_t sub_id, std::uint64_t tag, Settlement settlement) BATON_EXCLUDES(mu_);
  Status SetPrefetch(std::uint64_t sub_id, int prefetch) BATON_EXCLUDES(mu_);
  void CloseSubscription(std::uint64_t sub_id) BATON_EXCLUDES(mu_);
  // Closes every subscription, waiting for their handlers; later calls fail.
  void Shutdown() BATON_EXCLUDES(mu_);

  void FailPublishes(Status status, int count) BATON_EXCLUDES(mu_);
  void FailSubscribes(Status status) BATON_EXCLUDES(mu_);
  void FailHealth(Status status) BATON_EXCLUDES(mu_);
  void ClearFailures() BATON_EXCLUDES(mu_);

 private:
  // The body of a subscription's dispatcher thread.
  void DispatchLoop(const std::stop_token& stop, SubState* sub) BATON_EXCLUDES(mu_);
  void BroadcastLoop(const std::stop_token& stop, BroadcastSub* sub) BATON_EXCLUDES(mu_);
  // Joins dispatchers that finished a close from their own handler. Takes mu_.
  void ReapGraveyard() BATON_EXCLUDES(mu_);

  QueueState& QueueFor(std::string_view name) BATON_REQUIRES(mu_);
  // Hands ready messages to subscriptions with room, round-robin.
  void Pump(QueueState& q) BATON_REQUIRES(mu_);
  void GrantCreditIfRoom(QueueState& q, SubState& sub) BATON_REQUIRES(mu_);
  // Stops new deliveries to `sub`, returns messages not yet handed to its handler to the
  // queue, and asks its dispatcher to stop.
  void BeginClose(SubState& sub) BATON_REQUIRES(mu_);
  // After the dispatcher stopped: requeues what is unacked and forgets `sub`.
  void FinishClose(SubState& sub) BATON_REQUIRES(mu_);

  Mutex mu_;
  std::map<std::string, QueueState, std::less<>> queues_ BATON_GUARDED_BY(mu_);
  // Until fully closed.
  std::unordered_map<std::uint64_t, std::shared_ptr<SubState>> subs_ BATON_GUARDED_BY(mu_);
  // Notified whenever a subscription leaves subs_.
  std::condition_variable_any closed_;
  // Subscriptions whose dispatcher exited on its own, waiting to be joined.
  std::vector<std::shared_ptr<SubState>> graveyard_ BATON_GUARDED_BY(mu_);
  // Broadcast subscriptions until fully closed (closed_ is notified when one leaves), and
  // the open ones by topic.
  std::unordered_map<std::uint64_t, std::shared_ptr<BroadcastSub>> broadcast_subs_
      BATON_GUARDED_BY(mu_);
  std::map<std::string, std::vector<BroadcastSub*>, std::less<>> topics_ BATON_GUARDED_BY(mu_);
  // Closed from their own handler; their threads are joined later, without the lock.
  std::vector<std::shared_ptr<BroadcastSub>> broadcast_graveyard_ BATON_GUARDED_BY(mu_);
  std::uint64_t next_sequence_ BATON_GUARDED_BY(mu_) = 0;
  std::uint64_t next_tag_ BATON_GUARDED_BY(mu_) = 0;
  std::uint64_t next_sub_id_ BATON_GUARDED_BY(mu_) = 0;
  bool shut_down_ BATON_GUARDED_BY(mu_) = false;
  Status publish_failure_ BATON_GUARDED_BY(mu_);
  int publish_failures_left_ BATON_GUARDED_BY(mu_) = 0;  // negative: every publish fails
  Status subscribe_failure_ BATON_GUARDED_BY(mu_);
  Status health_failure_ BATON_GUARDED_BY(mu_);
};

namespace {

// Thread-safety: Ack/Nack may be called from any thread; the first call wins.
class InMemoryDelivery final : public Delivery {
 public:
  InMemoryDelivery(std::weak_ptr<Core> core, std::uint64_t sub_id, std::uint64_t tag,
                   const std::string& queue, int priority, std::shared_ptr<const std::string> body,
                   bool redelivered)
      : core_(std::move(core)),
        sub_id_(sub_id),
        tag_(tag),
        queue_(queue),
        priority_(priority),
        body_(std::move(body)),
        redelivered_(redelivered) {}

  const std::string& queue() const override { return queue_; }
  const std::string& body() const override { return *body_; }
  int priority() const override { return priority_; }
  bool redelivered() const override { return redelivered_; }
  Status Ack() override { return Settle(Settlement::kAck); }
  Status Nack(bool requeue) override {
    return Settle(requeue ? Settlement::kRequeue : Settlement::kDrop);
  }

 private:
  Status Settle(Settlement settlement) {
    // Later calls are no-ops, even when the first one failed: it fails only once the
    // subscription's close has requeued the message, and nothing is left to settle.
    if (settled_.exchange(true)) return Status::Ok();
    std::shared_ptr<Core> core = core_.lock();
    if (!core) return FailedPrecondition("broker is gone; the message was not acked");
    return core->Settle(sub_id_, tag_, settlement);
  }

  const std::weak_ptr<Core> core_;
  const std::uint64_t sub_id_;
  const std::uint64_t tag_;
  const std::string queue_;
  const int priority_;
  const std::shared_ptr<const std::string> body_;
  const bool redelivered_;
  std::atomic<bool> settled_{false};
};

class InMemorySubscription final : public Subscription {
 public:
  InMemorySubscription(std::weak_ptr<Core> core, std::uint64_t id)
      : core_(std::move(core)), id_(id) {}
  ~InMemorySubscription() override { Close(); }

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

Status CheckQueueName(std::string_view name) {
  if (name.empty()) return InvalidArgument("queue name is empty");
  return Status::Ok();
}

QueueInfo InfoOf(const QueueState& q) {
  return QueueInfo{.name = q.name,
                   .size = static_cast<std::int64_t>(q.ready.size()),
                   .subscribers = q.subscribers,
                   .unacked = q.unacked};
}

}  // namespace

Status Core::Publish(std::string_view queue, std::string body, int priority) {
  BATON_RETURN_IF_ERROR(CheckQueueName(queue));
  if (priority < kMinPriority || priority > kMaxPriority) {
    return InvalidArgument("priority " + std::to_string(priority) + " is outside 0..9");
  }
  // Allocated before taking the lock to keep the critical section short.
  auto shared_body = std::make_shared<const std::string>(std::move(body));
  MutexLock lock(mu_);
  if (shut_down_) return Unavailable("broker is shut down");
  if (publish_failures_left_ != 0 && !publish_failure_.ok()) {
    if (publish_failures_left_ > 0) --publish_failures_left_;
    return publish_failure_;
  }
  QueueState& q = QueueFor(queue);
  q.ready.emplace(MessageKey{priority, ++next_sequence_}, Message{std::move(shared_body), false});
  Pump(q);
  return Status::Ok();
}

Result<std::unique_ptr<Subscription>> Core::Subscribe(std::string_view queue, int prefetch,
                                                      DeliveryHandler handler) {
  BATON_RETURN_IF_ERROR(CheckQueueName(queue));
  if (prefetch < 1) return InvalidArgument("prefetch must be at least 1");
  if (!handler) return InvalidArgument("handler is empty");
  ReapGraveyard();

  MutexLock lock(mu_);
  if (shut_down_) return Unavailable("broker is shut down");
  if (!subscribe_failure_.ok()) return subscribe_failure_;
  QueueState& q = QueueFor(queue);
  const std::uint64_t id = ++next_sub_id_;
  auto sub = std::make_shared<SubState>(id, &q, prefetch, std::move(handler));
  try {
    // The dispatcher starts by taking mu_, so it waits until this Subscribe is done.
    sub->thread = std::jthread(
        [this, raw = sub.get()](const std::stop_token& stop) { DispatchLoop(stop, raw); });
  } catch (const std::system_error& e) {
    return Unavailable(std::string("cannot start a dispatcher thread: ") + e.what());
  }
  subs_.emplace(id, sub);
  ++q.subscribers;
  GrantCreditIfRoom(q, *sub);
  Pump(q);
  return std::unique_ptr<Subscription>(new InMemorySubscription(weak_from_this(), id));
}

Result<std::vector<QueueInfo>> Core::Queues() {
  MutexLock lock(mu_);
  std::vector<QueueInfo> infos;
  infos.reserve(queues_.size());
  for (const auto& [name, q] : queues_) infos.push_back(InfoOf(q));
  return infos;
}

Result<QueueInfo> Core::Queue(std::string_view name) {
  BATON_RETURN_IF_ERROR(CheckQueueName(name));
  MutexLock lock(mu_);
  auto it = queues_.find(name);
  if (it == queues_.end()) return NotFound("no queue named '" + std::string(name) + "'");
  return InfoOf(it->second);
}

Status Core::DeleteQueue(std::string_view name) {
  BATON_RETURN_IF_ERROR(CheckQueueName(name));
  MutexLock lock(mu_);
  auto it = queues_.find(name);
  if (it == queues_.end()) return NotFound("no queue named '" + std::string(name) + "'");
  if (it->second.subscribers > 0 || it->second.unacked > 0) {
    return FailedPrecondition("queue '" + std::string(name) + "' has " +
                              std::to_string(it->second.subscribers) + " consumer(s) and " +
                              std::to_string(it->second.unacked) +
                              " unacked message(s): stop the workers that read it first");
  }
  queues_.erase(it);
  return Status::Ok();
}

Status Core::Health() {
  MutexLock lock(mu_);
  if (shut_down_) return Unavailable("broker is shut down");
  return health_failure_;
}

Status Core::Broadcast(std::string_view topic, std::string body) {
  BATON_RETURN_IF_ERROR(CheckBroadcastTopic(topic));
  MutexLock lock(mu_);
  if (shut_down_) return Unavailable("broker is shut down");
  auto it = topics_.find(topic);
  if (it == topics_.end()) return Status::Ok();
  for (BroadcastSub* sub : it->second) {
    sub->inbox.push_back(body);
    sub->wake.notify_one();
  }
  return Status::Ok();
}

Result<std::unique_ptr<Subscription>> Core::SubscribeBroadcast(std::string_view topic,
                                                               BroadcastHandler handler) {
  BATON_RETURN_IF_ERROR(CheckBroadcastTopic(topic));
  if (!handler) return InvalidArgument("handler is empty");
  ReapGraveyard();
  MutexLock lock(mu_);
  if (shut_down_) return Unavailable("broker is shut down");
  if (!subscribe_failure_.ok()) return subscribe_failure_;
  const std::uint64_t id = ++next_sub_id_;
  auto sub = std::make_shared<BroadcastSub>(id, std::string(topic), std::move(handler));
  try {
    // The thread starts by taking mu_, so it waits until this call is done.
    sub->thread = std::jthread(
        [this, raw = sub.get()](const std::stop_token& stop) { BroadcastLoop(stop, raw); });
  } catch (const std::system_error& e) {
    return Unavailable(std::string("cannot start a dispatcher thread: ") + e.what());
  }
  topics_[std::string(topic)].push_back(sub.get());
  broadcast_subs_.emplace(id, std::move(sub));
  return std::unique_ptr<Subscription>(new BroadcastSubscription([core = weak_from_this(), id] {
    if (std::shared_ptr<Core> c = core.lock()) c->CloseBroadcast(id);
  }));
}

void Core::CloseBroadcast(std::uint64_t sub_id) {
  std::shared_ptr<BroadcastSub> sub;
  {
    MutexLock lock(mu_);
    auto it = broadcast_subs_.find(sub_id);
    if (it == broadcast_subs_.end()) return;
    sub = it->second;
    const bool from_own_handler = sub->thread.get_id() == std::this_thread::get_id();
    if (sub->closing) {
      // Someone else is closing it; wait for them, unless they are waiting for us.
      if (!from_own_handler) {
        closed_.wait(lock, [&]() BATON_REQUIRES(mu_) { return !broadcast_subs_.contains(sub_id); });
      }
      return;
    }
    sub->closing = true;
    sub->inbox.clear();
    auto topic = topics_.find(sub->topic);
    std::erase(topic->second, sub.get());
    if (topic->second.empty()) topics_.erase(topic);
    sub->thread.request_stop();
    sub->wake.notify_one();
    if (from_own_handler) {
      // Its thread stops when this handler returns; joined later.
      broadcast_subs_.erase(sub_id);
      broadcast_graveyard_.push_back(std::move(sub));
      closed_.notify_all();
      return;
    }
  }
  sub->thread.join();
  {
    MutexLock lock(mu_);
    broadcast_subs_.erase(sub_id);
    closed_.notify_all();
  }
  // `sub`, and the handler with whatever it captured, is destroyed here, without the lock.
}

void Core::BroadcastLoop(const std::stop_token& stop, BroadcastSub* sub) {
  MutexLock lock(mu_);
  while (true) {
    // request_stop is only called under mu_ followed by a notify, so no wakeup is lost.
    sub->wake.wait(lock, [&] { return stop.stop_requested() || !sub->inbox.empty(); });
    if (stop.stop_requested()) break;
    std::string body = std::move(sub->inbox.front());
    sub->inbox.pop_front();
    lock.unlock();
    sub->handler(std::move(body));
    lock.lock();
  }
}

Status Core::Settle(std::uint64_t sub_id, std::uint64_t tag, Settlement settlement) {
  MutexLock lock(mu_);
  auto sub_it = subs_.find(sub_id);
  if (sub_it == subs_.end()) {
    return FailedPrecondition("subscription is closed; the message was requeued");
  }
  SubState& sub = *sub_it->second;
  auto node = sub.outstanding.extract(tag);
  if (node.empty()) {
    // Requeued by a close that finished while the handler still held the delivery.
    return FailedPrecondition("subscription is closed; the message was requeued");
  }
  QueueState& q = *sub.queue;
  --q.unacked;
  if (settlement == Settlement::kRequeue) {
    SubState::Outstanding& entry = node.mapped();
    entry.message.redelivered = true;
    q.ready.emplace(entry.key, std::move(entry.message));
  }
  GrantCreditIfRoom(q, sub);
  Pump(q);
  return Status::Ok();
}

void Core::CloseSubscription(std::uint64_t sub_id) {
  std::shared_ptr<SubState> sub;
  {
    MutexLock lock(mu_);
    auto it = subs_.find(sub_id);
    if (it == subs_.end()) return;
    sub = it->second;
    const bool from_own_handler = sub->thread.get_id() == std::this_thread::get_id();
    if (sub->closing) {
      // Someone else is closing it; wait for them, unless they are waiting for us.
      if (!from_own_handler)
        closed_.wait(lock, [&]() BATON_REQUIRES(mu_) { return !subs_.contains(sub_id); });
      return;
    }
    BeginClose(*sub);
    if (from_own_handler) {
      sub->finish_on_exit = true;
      return;
    }
  }
  sub->thread.join();
  {
    MutexLock lock(mu_);
    FinishClose(*sub);
  }
  ReapGraveyard();
  // `sub`, and the handler with whatever it captured, is destroyed here, without the lock.
}

void Core::Shutdown() {
  std::vector<std::uint64_t> broadcasts;
  {
    MutexLock lock(mu_);
    shut_down_ = true;
    for (const auto& [id, sub] : broadcast_subs_) broadcasts.push_back(id);
  }
  for (std::uint64_t id : broadcasts) CloseBroadcast(id);
  std::vector<std::shared_ptr<SubState>> to_join;
  {
    MutexLock lock(mu_);
    for (auto& [id, sub] : subs_) {
      if (sub->closing) continue;  // its closer finishes it
      BeginClose(*sub);
      to_join.push_back(sub);
    }
  }
  for (auto& sub : to_join) sub->thread.join();
  std::vector<std::shared_ptr<SubState>> graveyard;
  std::vector<std::shared_ptr<BroadcastSub>> broadcast_graveyard;
  {
    MutexLock lock(mu_);
    for (auto& sub : to_join) FinishClose(*sub);
    closed_.wait(lock,
                 [&]() BATON_REQUIRES(mu_) { return subs_.empty() && broadcast_subs_.empty(); });
    graveyard.swap(graveyard_);
    broadcast_graveyard.swap(broadcast_graveyard_);
  }
  // Destroying them joins their threads, which are past their last use of the lock.
  graveyard.clear();
  broadcast_graveyard.clear();
  to_join.clear();
}

void Core::FailPublishes(Status status, int count) {
  assert(!status.ok());
  MutexLock lock(mu_);
  publish_failure_ = std::move(status);
  publish_failures_left_ = count < 0 ? -1 : count;
}

void Core::FailSubscribes(Status status) {
  assert(!status.ok());
  MutexLock lock(mu_);
  subscribe_failure_ = std::move(status);
}

void Core::FailHealth(Status status) {
  assert(!status.ok());
  MutexLock lock(mu_);
  health_failure_ = std::move(status);
}

void Core::ClearFailures() {
  MutexLock lock(mu_);
  publish_failure_ = Status::Ok();
  publish_failures_left_ = 0;
  subscribe_failure_ = Status::Ok();
  health_failure_ = Status::Ok();
}

QueueState& Core::QueueFor(std::string_view name) {
  auto it = queues_.find(name);
  if (it == queues_.end()) {
    it = queues_.try_emplace(std::string(name), std::string(name)).first;
  }
  return it->second;
}

void Core::Pump(QueueState& q) {
  while (!q.ready.empty() && !q.credit.empty()) {
    SubState* sub = q.credit.front();
    q.credit.pop_front();
    sub->in_credit = false;
    auto node = q.ready.extract(q.ready.begin());
    const std::uint64_t tag = ++next_tag_;
    sub->outstanding.emplace(tag, SubState::Outstanding{node.key(), std::move(node.mapped())});
    sub->inbox.push_back(tag);
    ++q.unacked;
    sub->wake.notify_one();
    GrantCreditIfRoom(q, *sub);
  }
}

Status Core::SetPrefetch(std::uint64_t sub_id, int prefetch) {
  MutexLock lock(mu_);
  auto it = subs_.find(sub_id);
  if (it == subs_.end() || it->second->closing) return FailedPrecondition("subscription is closed");
  SubState& sub = *it->second;
  QueueState& q = *sub.queue;
  sub.prefetch = static_cast<std::size_t>(prefetch);
  if (sub.in_credit && sub.outstanding.size() >= sub.prefetch) {
    std::erase(q.credit, &sub);  // O(subscribers), on a change only
    sub.in_credit = false;
  }
  GrantCreditIfRoom(q, sub);
  Pump(q);
  return Status::Ok();
}

void Core::GrantCreditIfRoom(QueueState& q, SubState& sub) {
  if (sub.closing || sub.in_credit || sub.outstanding.size() >= sub.prefetch) return;
  q.credit.push_back(&sub);
  sub.in_credit = true;
}

void Core::BeginClose(SubState& sub) {
  QueueState& q = *sub.queue;
  sub.closing = true;
  --q.subscribers;
  if (sub.in_credit) {
    // O(subscribers), once per close.
    std::erase(q.credit, &sub);
    sub.in_credit = false;
  }
  // The handler never saw these: back to the queue as they were, not as redeliveries.
  for (std::uint64_t tag : sub.inbox) {
    auto node = sub.outstanding.extract(tag);
    --q.unacked;
    q.ready.emplace(node.mapped().key, std::move(node.mapped().message));
  }
  sub.inbox.clear();
  sub.thread.request_stop();
  sub.wake.notify_one();
  Pump(q);
}

void Core::FinishClose(SubState& sub) {
  QueueState& q = *sub.queue;
  for (auto& [tag, entry] : sub.outstanding) {
    --q.unacked;
    entry.message.redelivered = true;
    q.ready.emplace(entry.key, std::move(entry.message));
  }
  sub.outstanding.clear();
  subs_.erase(sub.id);
  closed_.notify_all();
  Pump(q);
}

void Core::DispatchLoop(const std::stop_token& stop, SubState* sub) {
  MutexLock lock(mu_);
  while (true) {
    // request_stop is only called under mu_ followed by a notify, so no wakeup is lost.
    sub->wake.wait(lock, [&] { return stop.stop_requested() || !sub->inbox.empty(); });
    if (stop.stop_requested()) break;
    const std::uint64_t tag = sub->inbox.front();
    sub->inbox.pop_front();
    const SubState::Outstanding& entry = sub->outstanding.at(tag);
    auto delivery = std::make_unique<InMemoryDelivery>(
        weak_from_this(), sub->id, tag, sub->queue->name, entry.key.priority, entry.message.body,
        entry.message.redelivered);
    lock.unlock();
    sub->handler(std::move(delivery));
    lock.lock();
  }
  if (sub->finish_on_exit) {
    // Closed from its own handler: nobody is joining us, so finish the close here and
    // leave the thread to be joined later.
    std::shared_ptr<SubState> self = subs_.at(sub->id);
    FinishClose(*sub);
    graveyard_.push_back(std::move(self));
  }
}

void Core::ReapGraveyard() {
  std::vector<std::shared_ptr<SubState>> dead;
  std::vector<std::shared_ptr<BroadcastSub>> dead_broadcasts;
  {
    MutexLock lock(mu_);
    dead.swap(graveyard_);
    dead_broadcasts.swap(broadcast_graveyard_);
  }
  // Joined and destroyed without the lock (handlers may own things that take it).
}

}  // namespace inmemory_internal

InMemoryBroker::InMemoryBroker() : core_(std::make_shared<inmemory_internal::Core>()) {}

InMemoryBroker::~InMemoryBroker() { core_->Shutdown(); }

Status InMemoryBroker::Publish(std::string_view queue, std::string body, int priority) {
  return core_->Publish(queue, std::move(body), priority);
}

Result<std::unique_ptr<Subscription>> InMemoryBroker::Subscribe(std::string_view queue,
                                                                int prefetch,
                                                                DeliveryHandler handler) {
  return core_->Subscribe(queue, prefetch, std::move(handler));
}

Result<std::vector<QueueInfo>> InMemoryBroker::Queues() { return core_->Queues(); }

Result<QueueInfo> InMemoryBroker::Queue(std::string_view name) { return core_->Queue(name); }

Status InMemoryBroker::DeleteQueue(std::string_view name) { return core_->DeleteQueue(name); }

Status InMemoryBroker::Health() { return core_->Health(); }

Status InMemoryBroker::Broadcast(std::string_view topic, std::string body) {
  return core_->Broadcast(topic, std::move(body));
}

Result<std::unique_ptr<Subscription>> InMemoryBroker::SubscribeBroadcast(std::string_view topic,
                                                                         BroadcastHandler handler) {
  return core_->SubscribeBroadcast(topic, std::move(handler));
}

void InMemoryBroker::FailPublishes(Status status, int count) {
  core_->FailPublishes(std::move(status), count);
}

void InMemoryBroker::FailSubscribes(Status status) { core_->FailSubscribes(std::move(status)); }

void InMemoryBroker::FailHealth(Status status) { core_->FailHealth(std::move(status)); }

void InMemoryBroker::ClearFailures() { core_->ClearFailures(); }

}  // namespace baton

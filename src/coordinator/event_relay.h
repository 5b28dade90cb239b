// EventRelay: shares the changes of GET /events between the coordinators of a
// distributed engine over the broker's broadcasts (topic kTopicEvents), so that a stream
// on one coordinator also carries what the others decided and stored.
//
// Coordinators compete for the workers' reports, so each decides only part of every
// job's changes. Forwarding all of them when no UI is open would cost every decision a
// broker publish, so changes travel only on demand:
// - A coordinator with at least one open stream broadcasts a "want" at once when a stream
//   opens and then every `want_interval` while it has streams.
// - A coordinator that heard another's want within 3 × `want_interval` is remote wanted
//   (EventHub::SetRemoteWanted): its scheduler collects changes, and the hub hands each
//   Publish batch to the relay, which broadcasts it as one message.
// - A coordinator hands the changes it hears from another to its own hub (Deliver: its
//   own streams only, never broadcast again); its own messages come back to it and are
//   ignored by coordinator id.
// Best effort, like broadcasts: a change lost on the way (a reconnect, a want not yet
// heard) is caught up by the stream's periodic re-read (docs/api.md, "Live events").
//
// Thread-safety: thread-safe. Messages are handled on the broker's subscription thread,
// forwards and immediate wants on the hub's thread, periodic wants on the timers'.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "broker/broker.h"
#include "coordinator/events.h"
#include "metrics/metrics.h"

namespace baton {

// One message between coordinators: a want (no changes) or a batch of changes.
struct RelayMessage {
  std::string from;  // the sending coordinator's id
  bool want = false;
  std::vector<Change> changes;
};

// JSON: {"from": id, "want": true} or {"from": id, "changes": [{"kind": "job" | "task" |
// "log", "jobId", ...every other field of Change...}]}.
std::string EncodeRelayMessage(const RelayMessage& message);
// InvalidArgument for what EncodeRelayMessage did not make.
Result<RelayMessage> DecodeRelayMessage(std::string_view body);

struct EventRelayOptions {
  // This coordinator's id (its node id); must not be empty.
  std::string coordinator_id;
  // How often a coordinator with streams says it wants changes; another's want holds for
  // kWantLifetimes times this.
  std::chrono::milliseconds want_interval = std::chrono::seconds(2);
  // Counts the messages sent and received (may be null).
  Metrics* metrics = nullptr;
};

class EventRelay {
 public:
  static constexpr int kWantLifetimes = 3;

  EventRelay(Broker& broker, Clock& clock, Timers& timers, EventHub& hub,
             EventRelayOptions options);
  ~EventRelay();
  EventRelay(const EventRelay&) = delete;
  EventRelay& operator=(const EventRelay&) = delete;

  // Subscribes to the topic, hooks into the hub, and arms the periodic want.
  // InvalidArgument without a coordinator id or with a want_interval below 1 ms; the
  // broker's error when it cannot subscribe.
  Status Start() BATON_EXCLUDES(mu_);
  // Unhooks, cancels the timer, closes the subscription; the hub is no longer remote
  // wanted. Idempotent.
  void Stop() BATON_EXCLUDES(mu_);

 private:
  // One period's work (the timer calls it): a want while this hub has streams, and the
  // end of remote interest once the last want heard is older than kWantLifetimes periods.
  void Tick() BATON_EXCLUDES(mu_);
  void OnMessage(const std::string& body) BATON_EXCLUDES(mu_);
  void SendWant();
  void Forward(const std::vector<Change>& changes);
  void ArmTick() BATON_REQUIRES(mu_);
  void Count(std::string_view direction, std::string_view message);

  Broker& broker_;
  Clock& clock_;
  Timers& timers_;
  EventHub& hub_;
  const EventRelayOptions options_;

  Mutex mu_;
  std::condition_variable_any idle_;  // tick_running_ dropped to false
  bool started_ BATON_GUARDED_BY(mu_) = false;
  bool tick_running_ BATON_GUARDED_BY(mu_) = false;
  std::optional<TimerId> timer_ BATON_GUARDED_BY(mu_);
  std::optional<TimePoint> last_want_heard_ BATON_GUARDED_BY(mu_);
  std::unique_ptr<Subscription> subscription_;  // Start/Stop only
};

}  // namespace baton

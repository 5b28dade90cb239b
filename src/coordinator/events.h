// Live changes for GET /events (docs/api.md): what a coordinator's decisions stored (job
// and task rows' states, progress and positions) and the log parts it stored, told to
// the streams subscribed to them once committed. With several coordinators, an
// EventRelay (event_relay.h) forwards a hub's own changes to the other coordinators
// while one of them has streams (RemoteWanted), and Delivers theirs to it.
//
// Cost: the scheduler collects changes only while a stream here or another coordinator's
// wants them (Wanted, one atomic read), and Publish only queues them; one thread of the
// hub forwards each batch of its own (while remote wanted), formats each change once and
// appends it to the streams that want it. A stream that falls more than kMaxPendingBytes behind
// loses what it had pending and gets `event: resync` instead (the client reads the state
// afresh), so a slow reader never holds memory or a decision back.
//
// Thread-safety: every method may be called from any thread. Filters are called on the
// hub's thread, never under its lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace baton {

// One committed change.
struct Change {
  enum class Kind { kJob, kTask, kLog };
  Kind kind = Kind::kJob;
  std::string job_id;
  std::string task_id;    // kTask, kLog
  std::string parent_id;  // kTask: the composite row it is a child of
  std::string state;      // kJob, kTask
  std::string node_id;    // kTask
  std::string contents;   // kLog: the part as stored (redacted)
  double progress = 0;
  int position = 0;    // kJob: its current top-level task; kTask: its top-level task
  int task_count = 0;  // kJob
  int number = 0;      // kLog: the part's number
};

// The text of one server-sent event for `change` ("event: job\ndata: {...}\n\n").
std::string FormatEvent(const Change& change);

// A hub's counts, shared with its streams, which decrement them on Close.
struct EventInterest {
  // Open streams, plus one while another coordinator wants changes: what Wanted reads.
  std::atomic<int> wanted{0};
  // Open streams of this hub.
  std::atomic<int> streams{0};
};

// What one subscribed stream receives: the formatted events, read by the HTTP server.
class EventStream {
 public:
  static constexpr std::size_t kMaxPendingBytes = 4 << 20;
  // Counts itself out of `interest` on Close (the hub counted it in).
  explicit EventStream(std::shared_ptr<EventInterest> interest) : interest_(std::move(interest)) {}
  ~EventStream();
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  // Called (without any lock of the stream held) after events were appended; set by the
  // server to wake its poller. Cleared by Close.
  void SetWake(std::function<void()> wake) BATON_EXCLUDES(mu_);
  // Appends an event's text; past kMaxPendingBytes, drops what is pending for a resync.
  void Append(std::string_view text) BATON_EXCLUDES(mu_);
  // Calls the wake function, if any (the hub does once per batch).
  void Wake() BATON_EXCLUDES(mu_);
  // What is pending, now the caller's.
  std::string Take() BATON_EXCLUDES(mu_);
  // The reader went away: no more wakes; the hub forgets the stream.
  void Close() BATON_EXCLUDES(mu_);
  bool closed() const { return closed_; }

 private:
  std::shared_ptr<EventInterest> interest_;
  std::atomic<bool> closed_ = false;
  Mutex mu_;
  std::string pending_ BATON_GUARDED_BY(mu_);
  bool resync_ BATON_GUARDED_BY(mu_) = false;
  std::function<void()> wake_ BATON_GUARDED_BY(mu_);
};

class EventHub {
 public:
  EventHub() = default;
  // Stops the hub's thread.
  ~EventHub();
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  // Whether any stream is subscribed here, or another coordinator wants changes
  // (SetRemoteWanted): the scheduler collects changes only then. One atomic read.
  bool Wanted() const { return interest_->wanted.load() > 0; }
  // How many streams are subscribed here.
  int LocalStreams() const { return interest_->streams.load(); }

  // Queues committed changes of this coordinator for the subscribed streams, and, as
  // one batch, for the forward hook while remote wanted.
  void Publish(std::vector<Change> changes) BATON_EXCLUDES(mu_);
  // Queues another coordinator's changes for the subscribed streams only.
  void Deliver(std::vector<Change> changes) BATON_EXCLUDES(mu_);

  // Whether another coordinator has streams that want this one's changes. Idempotent.
  void SetRemoteWanted(bool wanted) BATON_EXCLUDES(mu_);
  bool RemoteWanted() const { return remote_wanted_.load(); }

  // Called on the hub's thread, never under its lock, in the order of what it
  // follows: `forward` with each batch of Publish taken while remote wanted,
  // `stream_opened` after each Subscribe. Either may be empty.
  struct Hooks {
    std::function<void(const std::vector<Change>&)> forward;
    std::function<void()> stream_opened;
  };
  // Replaces the hooks; returns once no call of the old ones is running (so their owner
  // may go once SetHooks({}) returned). Not from a hook.
  void SetHooks(Hooks hooks) BATON_EXCLUDES(mu_);

  struct Filter {
    std::string job_id;  // only this job's changes; empty: every job's
    bool logs = true;    // log parts too (only with a job_id)
    // Whether the stream's reader may see job `job_id` (null: every job). Called on the
    // hub's thread; may read the datastore.
    std::function<bool(const std::string& job_id)> visible;
  };
  std::shared_ptr<EventStream> Subscribe(Filter filter) BATON_EXCLUDES(mu_);

 private:
  struct Subscriber {
    std::weak_ptr<EventStream> stream;
    Filter filter;
  };
  // What the hub's thread is to do, in order.
  struct Batch {
    std::vector<Change> changes;
    bool own = false;            // Publish's: forwarded while remote wanted
    bool stream_opened = false;  // no changes: call the stream_opened hook
  };
  void Run(std::stop_token stop);
  void Enqueue(Batch batch) BATON_EXCLUDES(mu_);
  void StartLocked() BATON_REQUIRES(mu_);

  std::shared_ptr<EventInterest> interest_ = std::make_shared<EventInterest>();
  std::atomic<bool> remote_wanted_ = false;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::vector<Batch> queue_ BATON_GUARDED_BY(mu_);
  std::vector<Subscriber> subscribers_ BATON_GUARDED_BY(mu_);
  Hooks hooks_ BATON_GUARDED_BY(mu_);
  int hook_calls_ BATON_GUARDED_BY(mu_) = 0;  // hooks running on the hub's thread
  std::condition_variable_any hooks_idle_;    // hook_calls_ dropped to 0
  std::jthread thread_;  // started by the first Subscribe or SetRemoteWanted(true)
  bool started_ BATON_GUARDED_BY(mu_) = false;
};

}  // namespace baton

// Live changes for GET /events (docs/api.md): what a coordinator's decisions stored (job
// and task rows' states, progress and positions) and the log parts it stored, told to
// the streams subscribed to them once committed.
//
// Cost: the scheduler collects changes only while a stream is subscribed (Wanted), and
// Publish only queues them; one thread of the hub formats each change once and appends
// it to the streams that want it. A stream that falls more than kMaxPendingBytes behind
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

// What one subscribed stream receives: the formatted events, read by the HTTP server.
class EventStream {
 public:
  static constexpr std::size_t kMaxPendingBytes = 4 << 20;
  explicit EventStream(std::shared_ptr<std::atomic<int>> live) : live_(std::move(live)) {}
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
  std::shared_ptr<std::atomic<int>> live_;
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

  // Whether any stream is subscribed: the scheduler collects changes only then.
  bool Wanted() const { return *live_ > 0; }

  // Queues committed changes for the subscribed streams.
  void Publish(std::vector<Change> changes) BATON_EXCLUDES(mu_);

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
  void Run(std::stop_token stop);

  std::shared_ptr<std::atomic<int>> live_ = std::make_shared<std::atomic<int>>(0);
  Mutex mu_;
  std::condition_variable_any cv_;
  std::vector<Change> queue_ BATON_GUARDED_BY(mu_);
  std::vector<Subscriber> subscribers_ BATON_GUARDED_BY(mu_);
  std::jthread thread_;  // started by the first Subscribe
  bool started_ BATON_GUARDED_BY(mu_) = false;
};

}  // namespace baton

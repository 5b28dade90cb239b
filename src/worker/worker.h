// The worker: takes tasks from its queues (no more than it has free slots for), runs them
// through the runtime, and reports back: started, log parts, progress, the outcome. It
// also heartbeats, and stops tasks the coordinator cancels.
//
// A task's message is acked once the coordinator has heard of the task from this worker:
// its start, reported once it has run for `report_start_after`, or, for a task that
// finished sooner, its outcome (which then carries the start time). Until then a worker
// that dies leaves the message to the broker, which delivers it again; after, the
// coordinator's lease covers the task. A short task thus costs one report, not two.
//
// Thread-safety: Start/Stop from one thread; everything else happens on threads the
// worker owns (a fixed set of slot threads per queue, one thread that reports starts,
// and one heartbeat thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "broker/broker.h"
#include "core/messages.h"
#include "core/records.h"
#include "runtime/runtime.h"

namespace baton {

struct WorkerOptions {
  std::string node_id;                               // default: a new id
  std::string name = "worker";
  std::string hostname;                              // default: this host's name
  std::string version;
  std::map<std::string, int> queues = {{"default", 1}};  // queue → concurrency
  std::chrono::milliseconds heartbeat_interval = std::chrono::seconds(5);
  std::size_t max_result_bytes = 64 * 1024;
  // A task's start is reported once it has run this long; 0: before it runs.
  std::chrono::milliseconds report_start_after = std::chrono::milliseconds(50);
};

class Worker {
 public:
  Worker(Broker& broker, Runtime& runtime, Clock& clock, WorkerOptions options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // First kills what the runtime's earlier, dead instances left running
  // (Runtime::KillLeftovers; its error fails the start), then takes tasks.
  Status Start();
  // Stops taking work and hands back what has not started; lets running tasks finish
  // for up to `grace`, then cancels them. Returns when every slot thread has ended.
  void Stop(std::chrono::milliseconds grace);

  const std::string& node_id() const { return options_.node_id; }
  int running() const;

 private:
  struct Lane;
  // One task being run here.
  struct Attempt {
    enum class Start { kWaiting, kReporting, kReported, kInOutcome };
    Lane* lane = nullptr;
    std::shared_ptr<Delivery> delivery;
    std::stop_source cancel;
    TaskStarted started;  // the start report; `at` is when the run began
    std::chrono::steady_clock::time_point report_at;  // when the start is due
    // Guarded by the worker's mu_:
    Start start = Start::kWaiting;
    // Guarded by lane->mu:
    bool ended = false;    // the run is over
    bool counted = false;  // counted in lane->running (its message was acked while it ran)
  };
  struct Lane {
    std::string queue;
    int concurrency = 1;
    std::mutex mu;
    std::condition_variable_any cv;
    std::deque<std::unique_ptr<Delivery>> pending;  // guarded by mu
    int running = 0;  // running tasks whose messages were acked; guarded by mu
    bool paused = false;  // stopping: takes nothing more; guarded by mu
    std::unique_ptr<Subscription> subscription;
    std::vector<std::jthread> threads;
  };

  void SlotLoop(Lane& lane, const std::stop_token& stop);
  void RunOne(Lane& lane, std::unique_ptr<Delivery> delivery);
  // The lane's subscription may hold as many messages as it has free slots: a running
  // task whose message was acked no longer counts against the prefetch, so it lowers it.
  // Requires lane.mu.
  static void Counted(Lane& lane, int delta);
  // Acks the message of a task whose start the coordinator now has.
  static void StartKnown(Attempt& attempt);
  void StartReportLoop(const std::stop_token& stop);
  void HeartbeatLoop(const std::stop_token& stop);
  void Heartbeat();
  // Publishes reports (outcomes, starts), retrying while the broker is unreachable (they
  // must not be lost); gives up only once Stop's grace is over and it has tried for 10 s.
  // False when it gave up.
  bool Report(std::vector<OutgoingMessage> messages, std::string_view what);
  // Busy share of all CPUs since the previous call, from /proc/stat (0 when unknown).
  double CpuPercent();

  Broker& broker_;
  Runtime& runtime_;
  Clock& clock_;
  WorkerOptions options_;
  TimePoint started_at_{};

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Attempt>> running_;  // by task id; guarded by mu_
  // Attempts whose start is not reported yet, by `report_at`; guarded by mu_.
  std::deque<std::shared_ptr<Attempt>> start_queue_;
  int reporting_starts_ = 0;  // being published by the start thread; guarded by mu_
  std::condition_variable_any start_cv_;
  std::jthread start_thread_;
  // Tasks cancelled before they ran here (bounded, oldest forgotten first): a message of
  // one taken from a queue later is dropped, not run. The coordinator tells every live
  // worker, since any of them may take the message.
  static constexpr std::size_t kMaxCancelled = 100000;
  void RememberCancelled(const std::string& task_id);  // requires mu_
  std::set<std::string> cancelled_;              // guarded by mu_
  std::deque<std::string> cancelled_order_;      // guarded by mu_
  // The last tasks this worker ran (bounded), so a second delivery of one is dropped.
  std::set<std::string> recent_;        // guarded by mu_
  std::deque<std::string> recent_order_;  // guarded by mu_
  bool draining_ = false;                            // guarded by mu_
  bool grace_over_ = false;  // guarded by mu_; running tasks were stopped by Stop
  std::condition_variable idle_cv_;

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::unique_ptr<Subscription> cancel_subscription_;
  std::condition_variable_any heartbeat_cv_;
  std::mutex heartbeat_mu_;
  std::jthread heartbeat_thread_;
  std::uint64_t cpu_busy_ = 0;   // heartbeat thread only
  std::uint64_t cpu_total_ = 0;  // heartbeat thread only
};

}  // namespace baton

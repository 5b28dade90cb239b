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
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "broker/broker.h"
#include "core/messages.h"
#include "core/records.h"
#include "runtime/runtime.h"

namespace baton {

struct WorkerOptions {
  std::string node_id;  // default: a new id
  std::string name = "worker";
  std::string hostname;  // default: this host's name
  std::string version;
  std::map<std::string, int> queues = {{"default", 1}};  // queue → concurrency
  std::chrono::milliseconds heartbeat_interval = std::chrono::seconds(5);
  std::size_t max_result_bytes = 64 * 1024;
  // A task's start is reported once it has run this long; 0: before it runs.
  std::chrono::milliseconds report_start_after = std::chrono::milliseconds(50);
  // At its start, how long the worker waits for a coordinator to tell it every task
  // cancelled while waiting in a queue (CancelTask `complete`) before it takes tasks: a
  // worker that starts, or restarts, must not run one. 0: it does not wait. Past it, the
  // worker starts anyway and says so (a cancelled task it then takes is killed once its
  // start is heard).
  std::chrono::milliseconds await_drops{0};
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
  // Whether a coordinator has told it every stored drop (a CancelTask `complete`).
  bool told_of_drops() const;

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
    // Guarded by the worker's mu_ (not annotated: the analysis cannot name it from here).
    Start start = Start::kWaiting;
    bool ended BATON_GUARDED_BY(lane->mu) = false;  // the run is over
    // Counted in lane->running (its message was acked while it ran).
    bool counted BATON_GUARDED_BY(lane->mu) = false;
  };
  struct Lane {
    std::string queue;
    int concurrency = 1;
    Mutex mu;
    std::condition_variable_any cv;
    std::deque<std::unique_ptr<Delivery>> pending BATON_GUARDED_BY(mu);
    int running BATON_GUARDED_BY(mu) = 0;      // running tasks whose messages were acked
    bool paused BATON_GUARDED_BY(mu) = false;  // stopping: takes nothing more
    std::unique_ptr<Subscription> subscription;
    std::vector<std::jthread> threads;
  };

  void SlotLoop(Lane& lane, const std::stop_token& stop);
  void RunOne(Lane& lane, std::unique_ptr<Delivery> delivery);
  // The lane's subscription may hold as many messages as it has free slots: a running
  // task whose message was acked no longer counts against the prefetch, so it lowers it.
  static void Counted(Lane& lane, int delta) BATON_REQUIRES(lane.mu);
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

  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Attempt>> running_ BATON_GUARDED_BY(mu_);  // by task id
  // Attempts whose start is not reported yet, by `report_at`.
  std::deque<std::shared_ptr<Attempt>> start_queue_ BATON_GUARDED_BY(mu_);
  int reporting_starts_ BATON_GUARDED_BY(mu_) = 0;  // being published by the start thread
  std::condition_variable_any start_cv_;
  std::jthread start_thread_;
  // Tasks cancelled before they ran here (bounded, oldest forgotten first): a message of
  // one taken from a queue later is dropped, not run. The coordinator tells every live
  // worker, since any of them may take the message.
  static constexpr std::size_t kMaxCancelled = 100000;
  void RememberCancelled(const std::string& task_id) BATON_REQUIRES(mu_);
  std::set<std::string> cancelled_ BATON_GUARDED_BY(mu_);
  std::deque<std::string> cancelled_order_ BATON_GUARDED_BY(mu_);
  // The last tasks this worker ran (bounded), so a second delivery of one is dropped.
  std::set<std::string> recent_ BATON_GUARDED_BY(mu_);
  std::deque<std::string> recent_order_ BATON_GUARDED_BY(mu_);
  bool draining_ BATON_GUARDED_BY(mu_) = false;
  bool drops_complete_ BATON_GUARDED_BY(mu_) = false;  // told every stored drop
  std::condition_variable_any drops_cv_;
  // Waits up to options_.await_drops for drops_complete_.
  void AwaitDrops() BATON_EXCLUDES(mu_);
  bool grace_over_ BATON_GUARDED_BY(mu_) = false;  // running tasks were stopped by Stop
  std::condition_variable_any idle_cv_;

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::unique_ptr<Subscription> cancel_subscription_;
  std::condition_variable_any heartbeat_cv_;
  Mutex heartbeat_mu_;  // guards nothing: heartbeat_cv_ waits need one
  std::jthread heartbeat_thread_;
  std::uint64_t cpu_busy_ = 0;   // heartbeat thread only
  std::uint64_t cpu_total_ = 0;  // heartbeat thread only
};

}  // namespace baton

// The coordinator: listens to the engine queues (started, completed, failed, progress,
// logs, heartbeats) and hands each event to the scheduler or the datastore; offers the
// operations the API needs (submit, cancel, restart, wait).
//
// Thread-safety: thread-safe. Events are handled on the broker's subscription threads;
// the scheduler serialises its own decisions.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "broker/broker.h"
#include "coordinator/scheduler.h"
#include "datastore/datastore.h"

namespace baton {

struct CoordinatorOptions {
  SchedulerOptions scheduler;
  int prefetch = 64;  // events handled per queue before acking
  // A RUNNING task's node must heartbeat within this time, or the task is re-queued.
  std::chrono::milliseconds lease = std::chrono::seconds(30);
  // How often leases are checked (and, with `node_id`, the coordinator heartbeats).
  std::chrono::milliseconds lease_check_interval = std::chrono::seconds(5);
  // Several coordinators: with an id, this coordinator records itself as a node named
  // "coordinator" and heartbeats, and when another coordinator stops heartbeating for a
  // lease, takes over the steps it may have left half done (a reconcile, job by job under
  // the job locks). Empty for a single coordinator.
  std::string node_id;
  std::string hostname;
  std::string version;
};

class Coordinator {
 public:
  Coordinator(Datastore& datastore, Broker& broker, Clock& clock, Timers& timers,
              CoordinatorOptions options = {});
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Subscribes to the engine queues, then reconciles: `live_nodes` are the nodes whose
  // RUNNING tasks are still theirs (for standalone: only its own worker). Leases are
  // checked from one lease after the start on, so that nodes whose heartbeats queued up
  // while no coordinator ran are heard first.
  Status Start(const std::set<std::string>& live_nodes);
  void Stop();

  Result<JobRecord> Submit(const Job& job);
  Status Cancel(const std::string& job_id);
  Status Restart(const std::string& job_id);
  // The job once it is terminal (COMPLETED, FAILED or CANCELLED), or DeadlineExceeded.
  Result<JobRecord> Wait(const std::string& job_id, std::chrono::milliseconds timeout);

  Scheduler& scheduler() { return scheduler_; }

 private:
  void ScheduleLeaseCheck();
  void CheckLeases();
  void Heartbeat(NodeStatus status);
  // Reconciles after another coordinator went silent; true when one did.
  bool TakeOverSilentCoordinators();

  Datastore& datastore_;
  Broker& broker_;
  Clock& clock_;
  Timers& timers_;
  CoordinatorOptions options_;
  Scheduler scheduler_;
  std::vector<std::unique_ptr<Subscription>> subscriptions_;

  // Secret values per job, for redacting log lines before they are stored.
  std::vector<std::string> SecretsOf(const std::string& job_id);

  std::mutex mu_;
  std::map<std::string, std::vector<std::string>> secrets_cache_;  // guarded by mu_
  std::condition_variable finished_cv_;
  std::uint64_t finished_count_ = 0;  // guarded by mu_; bumps on every terminal job
  bool stopped_ = false;              // guarded by mu_
  bool lease_check_running_ = false;  // guarded by mu_
  std::condition_variable lease_cv_;
  std::optional<TimerId> lease_timer_;  // guarded by mu_
  TimePoint started_at_{};
  std::optional<TimePoint> broker_down_at_;  // lease timer thread only
};

}  // namespace baton

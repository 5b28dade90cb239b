// How a Scheduler decides and whom it tells: the options the engine fills in.
#pragma once

#include <chrono>
#include <functional>

#include "coordinator/events.h"
#include "core/duration.h"
#include "locker/locker.h"
#include "metrics/metrics.h"

namespace baton {

struct SchedulerOptions {
  // The broker keeps messages across restarts (RabbitMQ). Then a row is marked SCHEDULED
  // only once the broker confirmed its message, and reconciling re-publishes PENDING rows
  // only; otherwise (the in-memory broker) SCHEDULED rows are re-published too.
  bool durable_broker = false;
  // A RUNNING task whose node is gone is re-queued at most this many times.
  int max_redeliveries = 3;
  // The most iterations a loop may ask for (flow::Policy::max_loop_iterations).
  int max_loop_iterations = 1000;
  // Workers heard from within this long are told of cancelled tasks still in a queue,
  // since any of them may take such a task's message.
  Duration node_lease = std::chrono::seconds(30);
  // Several coordinators: every decision about a job is taken under the lock
  // "baton.job:<id of its top-level job>" of this locker, so each step is decided once.
  // Null for a single coordinator: the scheduler then uses an in-process locker of its
  // own, so that one job's long decision does not hold up the others'.
  Locker* job_locker = nullptr;
  std::chrono::milliseconds lock_timeout = std::chrono::seconds(30);
  // A task whose message the broker refused is published again after this long.
  Duration republish_delay = std::chrono::seconds(2);
  // Submit returns once the job is stored (PENDING), and a thread of the scheduler
  // starts it right after: concurrent submissions then share commits instead of queueing
  // behind the scheduler's decisions. A crash in between leaves the job PENDING, and
  // reconciling starts it. Off: Submit starts the job before returning (tests rely on it).
  bool start_in_background = false;
  // Called after a commit that wrote webhook deliveries (the coordinator's deliverer
  // wakes up). Not under any lock of the scheduler.
  std::function<void()> on_webhooks;
  // What the decisions did, counted (ended jobs and task attempts, retries, each
  // event's decision time). Null: not counted.
  Metrics* metrics = nullptr;
  // Told every committed change of a job or task row while a stream is subscribed
  // (GET /events). Null: not told.
  EventHub* events = nullptr;
};

}  // namespace baton

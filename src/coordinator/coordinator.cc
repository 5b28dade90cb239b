#include "coordinator/coordinator.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "base/log.h"
#include "base/process.h"
#include "core/messages.h"
#include "core/names.h"
#include "core/redact.h"
#include "core/states.h"

namespace baton {
namespace {

// The scheduler's options, waking `deliverer` (if any) after commits that wrote deliveries.
SchedulerOptions WakingWebhooks(SchedulerOptions options, WebhookDeliverer* deliverer,
                                Metrics* metrics, EventHub* events) {
  if (deliverer != nullptr) options.on_webhooks = [deliverer] { deliverer->Wake(); };
  options.metrics = metrics;
  options.events = events;
  return options;
}

WebhookOptions Counted(WebhookOptions options, Metrics* metrics) {
  options.metrics = metrics;
  return options;
}

}  // namespace

Coordinator::Coordinator(Datastore& datastore, Broker& broker, Clock& clock, Timers& timers,
                         CoordinatorOptions options)
    : datastore_(datastore),
      broker_(broker),
      clock_(clock),
      timers_(timers),
      options_(options),
      relay_(options.share_events
                 ? std::make_unique<EventRelay>(
                       broker, clock, timers, events_,
                       EventRelayOptions{.coordinator_id = options.node_id,
                                         .want_interval = options.events_want_interval,
                                         .metrics = &metrics_})
                 : nullptr),
      webhooks_(options.webhook_sender == nullptr
                    ? nullptr
                    : std::make_unique<WebhookDeliverer>(
                          datastore, *options.webhook_sender, clock,
                          Counted(options.webhooks, &metrics_),
                          [this](const WebhookDelivery& d) {
                            return RedactText(d.body, d.task_id.empty()
                                                          ? JobSecrets(d.job_id)
                                                          : SecretsFor(d.job_id, d.task_id));
                          })),
      broker_executor_(broker, options.scheduler.durable_broker),
      scheduler_(datastore, broker, clock, timers, Executors{.runnable = &broker_executor_},
                 WakingWebhooks(options.scheduler, webhooks_.get(), &metrics_, &events_)),
      schedules_(datastore, scheduler_, clock, options.schedules) {
  schedules_.SetNextTickListener([this](TimePoint tick) { ArmScheduleLook(tick); });
  scheduler_.SetJobFinishedListener([this](const JobRecord& job) {
    {
      MutexLock lock(mu_);
      ++finished_count_;
      recent_finishes_.push_back(job.id);
      if (recent_finishes_.size() > kMaxRememberedFinishes) recent_finishes_.pop_front();
    }
    finished_cv_.notify_all();
  });
}

Coordinator::~Coordinator() { Stop(); }

Status Coordinator::Start(const std::set<std::string>& live_nodes) {
  started_at_ = clock_.Now();
  if (relay_) BATON_RETURN_IF_ERROR(relay_->Start());
  if (!options_.node_id.empty()) Heartbeat(NodeStatus::kUp);
  BATON_RETURN_IF_ERROR(SubscribeToWorkers());
  BATON_RETURN_IF_ERROR(scheduler_.Reconcile(live_nodes));
  if (webhooks_) BATON_RETURN_IF_ERROR(webhooks_->Start());
  {
    MutexLock lock(mu_);
    stopped_ = false;
    looking_ = true;
  }
  SchedulePeriodic(&Coordinator::lease_timer_, options_.lease_check_interval,
                   &Coordinator::CheckLeases);
  SchedulePeriodic(&Coordinator::sweep_timer_, options_.auto_delete_interval, &Coordinator::Sweep);
  ArmScheduleLook(clock_.Now() + options_.schedules.interval);
  return Status::Ok();
}

Status Coordinator::Subscribe(std::string_view queue,
                              std::function<Status(const std::string&)> handle) {
  // A handler returns an error that may pass (datastore or lock unreachable) to have the
  // event delivered again, after a pause so a long outage does not spin.
  auto sub = broker_.Subscribe(queue, options_.prefetch, [handle](std::unique_ptr<Delivery> d) {
    Status s = handle(d->body());
    if (s.ok()) {
      (void)d->Ack();
      return;
    }
    log::Warn("handling an event failed; it will be delivered again",
              {{"queue", d->queue()}, {"error", s.message()}});
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (void)d->Nack(true);
  });
  if (!sub.ok()) return sub.status();
  subscriptions_.push_back(std::move(*sub));
  return Status::Ok();
}

Status Coordinator::SubscribeToWorkers() {
  auto on_finished = [this](const std::string& body) {
    auto m = DecodeTaskFinished(body);
    if (m.ok()) return scheduler_.OnFinished(*m);
    log::Warn("dropping a bad outcome message", {{"error", m.status().message()}});
    return Status::Ok();
  };
  BATON_RETURN_IF_ERROR(Subscribe(kQueueStarted, [this](const std::string& body) {
    auto m = DecodeTaskStarted(body);
    return m.ok() ? scheduler_.OnStarted(*m) : Status::Ok();
  }));
  BATON_RETURN_IF_ERROR(Subscribe(kQueueCompleted, on_finished));
  BATON_RETURN_IF_ERROR(Subscribe(kQueueFailed, on_finished));
  BATON_RETURN_IF_ERROR(Subscribe(kQueueProgress, [this](const std::string& body) {
    auto m = DecodeTaskProgress(body);
    return m.ok() ? scheduler_.OnProgress(*m) : Status::Ok();
  }));
  BATON_RETURN_IF_ERROR(Subscribe(kQueueLogs, [this](const std::string& body) {
    auto m = DecodeLogPart(body);
    if (!m.ok()) return Status::Ok();
    return StoreLogPart(std::move(*m));
  }));
  return Subscribe(kQueueHeartbeat, [this](const std::string& body) {
    auto m = DecodeNodeRecord(body);
    if (!m.ok()) return Status::Ok();
    (void)datastore_.UpsertNode(*m);
    // A worker heard from for the first time since tasks were dropped was not told of
    // them (only workers with a stored heartbeat are): it is now; and one this
    // coordinator hears of for the first time is told of every stored drop.
    if (!m->queue.empty()) scheduler_.WorkerHeard(m->id);
    return Status::Ok();
  });
}

void Coordinator::Heartbeat(NodeStatus status) {
  NodeRecord node;
  node.id = options_.node_id;
  node.name = "coordinator";
  node.hostname = options_.hostname;
  node.version = options_.version;
  node.started_at = started_at_;
  node.last_heartbeat_at = clock_.Now();
  node.memory_bytes = ResidentBytes();
  node.status = status;
  Status s = datastore_.UpsertNode(node);
  if (!s.ok()) log::Warn("recording the coordinator's heartbeat failed", {{"error", s.message()}});
}

bool Coordinator::TakeOverSilentCoordinators() {
  TimePoint now = clock_.Now();
  auto nodes = datastore_.ActiveNodes(TimePoint{});
  if (!nodes.ok()) return false;
  bool silent = false;
  std::set<std::string> known;
  for (NodeRecord& node : *nodes) {
    known.insert(node.id);
    if (node.name != "coordinator" || node.id == options_.node_id ||
        node.status != NodeStatus::kUp || now - node.last_heartbeat_at <= options_.lease) {
      continue;
    }
    log::Warn("a coordinator stopped heartbeating; finishing the steps it may have left",
              {{"node", node.id}});
    node.status = NodeStatus::kDown;
    (void)datastore_.UpsertNode(node);
    silent = true;
  }
  if (!silent) return false;
  // RUNNING tasks stay with their nodes: the lease checks decide about those.
  Status s = scheduler_.Reconcile(known);
  if (!s.ok()) log::Warn("taking over from a silent coordinator failed", {{"error", s.message()}});
  return true;
}

namespace {

// What one check of the running rows did: its error, or how many rows it changed.
void LogChecked(const Result<int>& changed, const char* failed, const char* done) {
  if (!changed.ok()) {
    log::Warn(failed, {{"error", changed.status().message()}});
  } else if (*changed > 0) {
    log::Warn(done, {{"tasks", std::to_string(*changed)}});
  }
}

}  // namespace

void Coordinator::CheckLeases() {
  if (!options_.node_id.empty()) Heartbeat(NodeStatus::kUp);
  // Nodes whose heartbeats waited in the broker while no coordinator ran are heard
  // within a lease of the start: only then are leases judged. Likewise after the broker
  // was unreachable (heartbeats could not flow): only two leases after it was last seen
  // down, so a broker outage longer than a lease does not make every node look dead.
  TimePoint now = clock_.Now();
  Status broker = broker_.Health();
  if (!broker.ok()) {
    log::Warn("the broker is unreachable; task leases wait", {{"error", broker.message()}});
    broker_down_at_ = now;
    return;
  }
  if (now - started_at_ < options_.lease) return;
  if (broker_down_at_ && now - *broker_down_at_ < 2 * options_.lease) return;
  // Past a task's timeout: its worker hangs, or its report was lost (a report waiting in
  // the broker is heard within a lease of the start, as heartbeats are). Then leases.
  auto checked = scheduler_.CheckRunning(options_.timeout_grace, options_.lease);
  if (!checked.ok()) {
    log::Warn("checking running tasks failed", {{"error", checked.status().message()}});
  } else {
    LogChecked(checked->timed_out, "checking task timeouts failed",
               "failed tasks their workers did not stop at their timeout");
    LogChecked(checked->requeued, "checking task leases failed",
               "re-queued the tasks of silent nodes");
  }
  if (!options_.node_id.empty()) TakeOverSilentCoordinators();
}

void Coordinator::SchedulePeriodic(std::optional<TimerId> Coordinator::*timer,
                                   std::chrono::milliseconds interval,
                                   void (Coordinator::*work)()) {
  MutexLock lock(mu_);
  if (stopped_) return;
  this->*timer = timers_.Schedule(clock_.Now() + interval, [this, timer, interval, work] {
    {
      MutexLock inner(mu_);
      if (stopped_) return;
      ++periodic_running_;
    }
    (this->*work)();
    {
      MutexLock inner(mu_);
      --periodic_running_;
    }
    periodic_cv_.notify_all();
    SchedulePeriodic(timer, interval, work);
  });
}

void Coordinator::ArmScheduleLook(TimePoint at) {
  MutexLock lock(mu_);
  if (stopped_ || !looking_) return;
  if (schedule_timer_) {
    if (schedule_look_at_ <= at) return;
    timers_.Cancel(*schedule_timer_);
  }
  schedule_look_at_ = at;
  schedule_timer_ = timers_.Schedule(at, [this] {
    {
      MutexLock inner(mu_);
      if (stopped_) return;
      schedule_timer_.reset();
      ++periodic_running_;
    }
    auto look = schedules_.FireDue();
    {
      MutexLock inner(mu_);
      --periodic_running_;
    }
    periodic_cv_.notify_all();
    const TimePoint now = clock_.Now();
    const ScheduleOptions& o = options_.schedules;
    // max_idle shorter than interval: every interval.
    TimePoint next = now + std::max(o.max_idle, o.interval);
    if (!look.ok()) {
      log::Warn("looking for due scheduled jobs failed; trying again",
                {{"error", look.status().message()}});
      next = now + o.interval;
    } else if (look->next) {
      next = std::clamp(*look->next, now + o.interval, next);
    }
    ArmScheduleLook(next);
  });
}

void Coordinator::Sweep() {
  auto deleted = DeleteDueJobs();
  if (!deleted.ok()) {
    log::Warn("deleting jobs due for deletion failed; trying again later",
              {{"error", deleted.status().message()}});
  } else if (*deleted > 0) {
    log::Info("deleted jobs whose autoDelete time had come", {{"jobs", std::to_string(*deleted)}});
  }
  auto retained = SweepRetention();
  if (!retained.ok()) {
    log::Warn("deleting what retention no longer keeps failed; trying again later",
              {{"error", retained.status().message()}});
  } else if (retained->log_parts > 0 || retained->jobs > 0) {
    log::Info("deleted what retention no longer keeps",
              {{"log_parts", std::to_string(retained->log_parts)},
               {"jobs", std::to_string(retained->jobs)}});
  }
}

Result<int> Coordinator::DeleteDueJobs() {
  // Small batches, each a short transaction per job, so the writers that answer clients
  // wait little; a sweep stops after a bounded number and the next one goes on.
  constexpr int kMaxBatchesPerSweep = 20;
  const int batch = std::max(1, options_.auto_delete_batch);
  int deleted = 0;
  for (int round = 0; round < kMaxBatchesPerSweep; ++round) {
    auto due = datastore_.JobsDueForDeletion(clock_.Now(), batch);
    if (!due.ok()) return due.status();
    for (const std::string& id : *due) {
      Status s = SweepJob(id);
      // NotFound: another coordinator, or its parent's deletion, took it first;
      // FailedPrecondition: restarted since it was listed.
      if (s.code() == StatusCode::kNotFound || s.code() == StatusCode::kFailedPrecondition) {
        continue;
      }
      if (!s.ok()) return s;
      ++deleted;
    }
    if (static_cast<int>(due->size()) < batch) break;
  }
  return deleted;
}

Result<Coordinator::Retained> Coordinator::SweepRetention() {
  constexpr int kMaxBatchesPerSweep = 20;
  Retained done;
  const TimePoint now = clock_.Now();
  if (options_.log_retention > std::chrono::milliseconds::zero()) {
    const int batch = std::max(1, options_.retention_batch);
    for (int round = 0; round < kMaxBatchesPerSweep; ++round) {
      int deleted = 0;
      BATON_RETURN_IF_ERROR(datastore_.Transact([&](Transaction& tx) -> Status {
        auto n = tx.DeleteLogPartsBefore(now - options_.log_retention, batch);
        if (!n.ok()) return n.status();
        deleted = *n;
        return Status::Ok();
      }));
      done.log_parts += deleted;
      if (deleted < batch) break;
    }
  }
  if (options_.job_retention > std::chrono::milliseconds::zero()) {
    const int batch = std::max(1, options_.auto_delete_batch);
    for (int round = 0; round < kMaxBatchesPerSweep; ++round) {
      std::vector<std::string> old;
      BATON_RETURN_IF_ERROR(datastore_.Transact([&](Transaction& tx) -> Status {
        auto ids = tx.FinishedJobsCreatedBefore(now - options_.job_retention, batch);
        if (!ids.ok()) return ids.status();
        old = std::move(*ids);
        return Status::Ok();
      }));
      for (const std::string& id : old) {
        Status s = SweepJob(id);
        // Another coordinator's, or restarted since it was listed.
        if (s.code() == StatusCode::kNotFound || s.code() == StatusCode::kFailedPrecondition) {
          continue;
        }
        if (!s.ok()) return s;
        ++done.jobs;
      }
      if (static_cast<int>(old.size()) < batch) break;
    }
  }
  return done;
}

Status Coordinator::DeleteJob(const std::string& job_id) {
  return scheduler_.UnderJobLock(job_id,
                                 [&] { return DeleteFinishedJob(job_id, /*top_level=*/true); });
}

Status Coordinator::DeleteFinishedJob(const std::string& job_id, bool top_level) {
  // Its state columns only: a big job's definition and context are not read to be deleted.
  JobRecord job;
  BATON_RETURN_IF_ERROR(datastore_.Transact([&](Transaction& tx) -> Status {
    int version = 0;
    auto row = tx.GetJobState(job_id, &version);
    if (!row.ok()) return row.status();
    job = std::move(*row);
    return Status::Ok();
  }));
  if (top_level && !job.parent_id.empty()) {
    return FailedPrecondition(fmt::format(
        "job {} is a sub-job (of task {}): delete its top-level job", job_id, job.parent_id));
  }
  if (!IsTerminal(job.state)) {
    return FailedPrecondition(fmt::format("job {} is {}: cancel it first, or wait for its end",
                                          job_id, ToString(job.state)));
  }
  return DeleteStoredJob(job_id);
}

Status Coordinator::SweepJob(const std::string& job_id) {
  return scheduler_.UnderJobLock(job_id,
                                 [&] { return DeleteFinishedJob(job_id, /*top_level=*/false); });
}

Status Coordinator::DeleteStoredJob(const std::string& job_id) {
  BATON_RETURN_IF_ERROR(datastore_.DeleteJob(job_id));
  MutexLock lock(secrets_mu_);
  job_secrets_.erase(job_id);
  return Status::Ok();
}

std::vector<std::string> Coordinator::JobSecrets(const std::string& job_id) {
  {
    MutexLock lock(secrets_mu_);
    if (auto it = job_secrets_.find(job_id); it != job_secrets_.end()) return it->second;
  }
  auto job = datastore_.GetJob(job_id);
  if (!job.ok()) return {};
  std::vector<std::string> values = SecretValues(*job);
  MutexLock lock(secrets_mu_);
  if (job_secrets_.size() >= 1024) job_secrets_.clear();  // bounded; refilled on demand
  job_secrets_[job_id] = values;
  return values;
}

std::vector<std::string> Coordinator::SecretsFor(const std::string& job_id,
                                                 const std::string& task_id) {
  {
    MutexLock lock(secrets_mu_);
    if (auto it = task_secrets_.find(task_id); it != task_secrets_.end()) return it->second;
  }
  std::vector<std::string> values = JobSecrets(job_id);
  auto row = datastore_.GetTask(task_id);
  // An unknown task (or an unreachable datastore): the job's values now, the row's at
  // the next part.
  if (!row.ok() || row->job_id != job_id) return values;
  AddSecretValues(row->task, values);
  MutexLock lock(secrets_mu_);
  if (task_secrets_.size() >= 4096) task_secrets_.clear();  // bounded; refilled on demand
  task_secrets_[task_id] = values;
  return values;
}

Status Coordinator::StoreLogPart(LogPart part) {
  const std::vector<std::string> secrets = SecretsFor(part.job_id, part.task_id);
  // A part that does not continue the held text (a new attempt's log, numbered from 1
  // again, or one whose previous part another coordinator stored) starts afresh: the
  // held text, at most a secret's beginning, is dropped rather than shown.
  StreamRedactor stream;
  {
    MutexLock lock(secrets_mu_);
    if (auto it = log_streams_.find(part.task_id);
        it != log_streams_.end() && it->second.next == part.number) {
      stream = it->second.redactor;
    }
  }
  const bool end = part.contents.empty();
  part.contents = end ? stream.Finish(secrets) : stream.Next(part.contents, secrets);
  Status s = part.contents.empty() ? Status::Ok() : datastore_.CreateLogPart(part);
  if (s.ok() && !part.contents.empty() && events_.Wanted()) {
    events_.Publish({{.kind = Change::Kind::kLog,
                      .job_id = part.job_id,
                      .task_id = part.task_id,
                      .contents = part.contents,
                      .number = part.number}});
  }
  // Delivered again, and redacted again from the same held text.
  if (s.code() == StatusCode::kUnavailable) return s;
  if (!s.ok() && s.code() != StatusCode::kFailedPrecondition) {
    log::Warn("storing a log part failed", {{"task_id", part.task_id}, {"error", s.message()}});
  }
  MutexLock lock(secrets_mu_);
  if (stream.held().empty()) {
    log_streams_.erase(part.task_id);
  } else {
    // Bounded: a log whose end never comes (its worker died) is forgotten in time.
    if (log_streams_.size() >= 4096 && !log_streams_.contains(part.task_id)) {
      log_streams_.erase(log_streams_.begin());
    }
    log_streams_[part.task_id] = LogStream{part.number + 1, std::move(stream)};
  }
  return Status::Ok();
}

void Coordinator::Stop() {
  if (relay_) relay_->Stop();
  {
    MutexLock lock(mu_);
    stopped_ = true;
    looking_ = false;
    if (lease_timer_) timers_.Cancel(*lease_timer_);
    lease_timer_.reset();
    if (sweep_timer_) timers_.Cancel(*sweep_timer_);
    sweep_timer_.reset();
    if (schedule_timer_) timers_.Cancel(*schedule_timer_);
    schedule_timer_.reset();
    // A check or sweep already under way uses this object: wait for it to end.
    periodic_cv_.wait(lock, [&]() BATON_REQUIRES(mu_) { return periodic_running_ == 0; });
  }
  if (webhooks_) webhooks_->Stop();
  bool was_running = !subscriptions_.empty();
  for (auto& sub : subscriptions_) sub->Close();
  subscriptions_.clear();
  // Stopped cleanly, with no step half done: nothing for the others to take over.
  if (was_running && !options_.node_id.empty()) Heartbeat(NodeStatus::kOffline);
}

Result<JobRecord> Coordinator::Submit(const Job& job) { return scheduler_.Submit(job); }

Status Coordinator::Cancel(const std::string& job_id) { return scheduler_.Cancel(job_id); }

Status Coordinator::Restart(const std::string& job_id) { return scheduler_.Restart(job_id); }
Status Coordinator::Pause(const std::string& job_id) { return scheduler_.Pause(job_id); }
Status Coordinator::Resume(const std::string& job_id) { return scheduler_.Resume(job_id); }
Status Coordinator::Rerun(const flow::Rerun& rerun) { return scheduler_.Rerun(rerun); }
Status Coordinator::Skip(const std::string& task_id, const std::string& result) {
  return scheduler_.Skip(task_id, result);
}
Status Coordinator::Signal(const flow::Signal& signal) { return scheduler_.Signal(signal); }

Result<JobRecord> Coordinator::Wait(const std::string& job_id, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  for (;;) {
    std::uint64_t seen = finished_count_;
    lock.unlock();
    auto job = datastore_.GetJob(job_id);
    lock.lock();
    if (!job.ok()) return job.status();
    if (IsTerminal(job->state)) return job;
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded("job " + job_id + " is still " + std::string(ToString(job->state)));
    }
    // Another coordinator may finish it: look again at least every 200 ms.
    auto until =
        std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
    finished_cv_.wait_until(lock, until,
                            [&]() BATON_REQUIRES(mu_) { return finished_count_ != seen; });
  }
}

std::uint64_t Coordinator::FinishedJobs() {
  MutexLock lock(mu_);
  return finished_count_;
}

Coordinator::Finishes Coordinator::FinishedSince(std::uint64_t seen) {
  MutexLock lock(mu_);
  Finishes out;
  out.count = finished_count_;
  std::uint64_t ended = finished_count_ - seen;
  if (seen > finished_count_ || ended > recent_finishes_.size()) return out;
  out.ids.emplace(recent_finishes_.end() - static_cast<std::ptrdiff_t>(ended),
                  recent_finishes_.end());
  return out;
}

void Coordinator::WaitForFinishes(std::uint64_t seen, std::chrono::milliseconds timeout,
                                  const std::atomic<bool>& wake) {
  MutexLock lock(mu_);
  finished_cv_.wait_for(
      lock, timeout, [&]() BATON_REQUIRES(mu_) { return finished_count_ != seen || wake.load(); });
}

void Coordinator::WakeFinishWaiters() {
  // Taken and released so that a waiter between its look at `wake` and its sleep cannot
  // miss the notification.
  { MutexLock lock(mu_); }
  finished_cv_.notify_all();
}

}  // namespace baton

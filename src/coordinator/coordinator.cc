#include "coordinator/coordinator.h"

#include "base/log.h"
#include "core/messages.h"
#include "core/names.h"
#include "core/redact.h"

namespace baton {
namespace {

bool IsTerminal(JobState s) {
  return s == JobState::kCompleted || s == JobState::kFailed || s == JobState::kCancelled;
}

}  // namespace

Coordinator::Coordinator(Datastore& datastore, Broker& broker, Clock& clock, Timers& timers,
                         CoordinatorOptions options)
    : datastore_(datastore),
      broker_(broker),
      clock_(clock),
      timers_(timers),
      options_(options),
      scheduler_(datastore, broker, clock, timers, options.scheduler) {
  scheduler_.SetJobFinishedListener([this](const JobRecord&) {
    {
      std::lock_guard lock(mu_);
      ++finished_count_;
    }
    finished_cv_.notify_all();
  });
}

Coordinator::~Coordinator() { Stop(); }

Status Coordinator::Start(const std::set<std::string>& live_nodes) {
  auto subscribe = [&](std::string_view queue, auto handle) -> Status {
    auto sub = broker_.Subscribe(queue, options_.prefetch,
                                 [handle](std::unique_ptr<Delivery> d) {
                                   handle(d->body());
                                   (void)d->Ack();
                                 });
    if (!sub.ok()) return sub.status();
    subscriptions_.push_back(std::move(*sub));
    return Status::Ok();
  };
  auto on_finished = [this](const std::string& body) {
    auto m = DecodeTaskFinished(body);
    if (m.ok()) scheduler_.OnFinished(*m);
    else log::Warn("dropping a bad outcome message", {{"error", m.status().message()}});
  };
  BATON_RETURN_IF_ERROR(subscribe(kQueueStarted, [this](const std::string& body) {
    auto m = DecodeTaskStarted(body);
    if (m.ok()) scheduler_.OnStarted(*m);
  }));
  BATON_RETURN_IF_ERROR(subscribe(kQueueCompleted, on_finished));
  BATON_RETURN_IF_ERROR(subscribe(kQueueFailed, on_finished));
  BATON_RETURN_IF_ERROR(subscribe(kQueueProgress, [this](const std::string& body) {
    auto m = DecodeTaskProgress(body);
    if (m.ok()) scheduler_.OnProgress(*m);
  }));
  BATON_RETURN_IF_ERROR(subscribe(kQueueLogs, [this](const std::string& body) {
    auto m = DecodeLogPart(body);
    if (!m.ok()) return;
    m->contents = RedactText(m->contents, SecretsOf(m->job_id));
    Status s = datastore_.CreateLogPart(*m);
    if (!s.ok() && s.code() != StatusCode::kFailedPrecondition) {
      log::Warn("storing a log part failed", {{"task_id", m->task_id}, {"error", s.message()}});
    }
  }));
  BATON_RETURN_IF_ERROR(subscribe(kQueueHeartbeat, [this](const std::string& body) {
    auto m = DecodeNodeRecord(body);
    if (m.ok()) (void)datastore_.UpsertNode(*m);
  }));
  BATON_RETURN_IF_ERROR(scheduler_.Reconcile(live_nodes));
  {
    std::lock_guard lock(mu_);
    stopped_ = false;
  }
  ScheduleLeaseCheck();
  return Status::Ok();
}

void Coordinator::ScheduleLeaseCheck() {
  std::lock_guard lock(mu_);
  if (stopped_) return;
  lease_timer_ = timers_.Schedule(clock_.Now() + options_.lease_check_interval, [this] {
    {
      std::lock_guard inner(mu_);
      if (stopped_) return;
      lease_check_running_ = true;
    }
    auto requeued = scheduler_.ExpireLeases(options_.lease);
    if (!requeued.ok()) {
      log::Warn("checking task leases failed", {{"error", requeued.status().message()}});
    } else if (*requeued > 0) {
      log::Warn("re-queued the tasks of silent nodes", {{"tasks", std::to_string(*requeued)}});
    }
    {
      std::lock_guard inner(mu_);
      lease_check_running_ = false;
    }
    lease_cv_.notify_all();
    ScheduleLeaseCheck();
  });
}

std::vector<std::string> Coordinator::SecretsOf(const std::string& job_id) {
  {
    std::lock_guard lock(mu_);
    if (auto it = secrets_cache_.find(job_id); it != secrets_cache_.end()) return it->second;
  }
  auto job = datastore_.GetJob(job_id);
  if (!job.ok()) return {};
  std::vector<std::string> values = SecretValues(job->job);
  std::lock_guard lock(mu_);
  if (secrets_cache_.size() >= 1024) secrets_cache_.clear();  // bounded; refilled on demand
  secrets_cache_[job_id] = values;
  return values;
}

void Coordinator::Stop() {
  {
    std::unique_lock lock(mu_);
    stopped_ = true;
    if (lease_timer_) timers_.Cancel(*lease_timer_);
    lease_timer_.reset();
    // A check already under way uses this object: wait for it to end.
    lease_cv_.wait(lock, [&] { return !lease_check_running_; });
  }
  for (auto& sub : subscriptions_) sub->Close();
  subscriptions_.clear();
}

Result<JobRecord> Coordinator::Submit(const Job& job) { return scheduler_.Submit(job); }

Status Coordinator::Cancel(const std::string& job_id) { return scheduler_.Cancel(job_id); }

Status Coordinator::Restart(const std::string& job_id) { return scheduler_.Restart(job_id); }

Result<JobRecord> Coordinator::Wait(const std::string& job_id, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mu_);
  for (;;) {
    std::uint64_t seen = finished_count_;
    lock.unlock();
    auto job = datastore_.GetJob(job_id);
    lock.lock();
    if (!job.ok()) return job.status();
    if (IsTerminal(job->state)) return job;
    if (!finished_cv_.wait_until(lock, deadline, [&] { return finished_count_ != seen; })) {
      return DeadlineExceeded("job " + job_id + " is still " + std::string(ToString(job->state)));
    }
  }
}

}  // namespace baton

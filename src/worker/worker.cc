#include "worker/worker.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "base/log.h"
#include "base/process.h"
#include "core/messages.h"
#include "core/names.h"
#include "core/record_json.h"

namespace baton {
namespace {

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// Ships what a running task produces as messages.
class Reporter : public RunObserver {
 public:
  Reporter(Broker& broker, Clock& clock, const TaskRecord& task)
      : broker_(broker), clock_(clock), task_(task) {}

  void OnLog(std::string_view chunk) override {
    if (chunk.empty()) return;
    Ship(chunk);
  }

  // After the last part: an empty part marks the log's end, so the coordinator stores
  // what it held back of the log (the start of a secret the next part might finish).
  void End() {
    if (number_ > 0) Ship("");
  }

  void OnProgress(double percent) override {
    (void)broker_.Publish(
        kQueueProgress,
        Encode(TaskProgress{.task_id = task_.id, .job_id = task_.job_id, .progress = percent}));
  }

 private:
  void Ship(std::string_view chunk) {
    LogPart part;
    part.id = NewId();
    part.task_id = task_.id;
    part.job_id = task_.job_id;
    part.number = ++number_;
    part.contents = std::string(chunk);
    part.created_at = clock_.Now();
    Status s = broker_.Publish(kQueueLogs, Encode(part));
    if (!s.ok())
      log::Warn("shipping a log part failed", {{"task_id", task_.id}, {"error", s.message()}});
  }

  Broker& broker_;
  Clock& clock_;
  const TaskRecord& task_;
  int number_ = 0;
};

}  // namespace

Worker::Worker(Broker& broker, Runtime& runtime, Clock& clock, WorkerOptions options)
    : broker_(broker), runtime_(runtime), clock_(clock), options_(std::move(options)) {
  if (options_.node_id.empty()) options_.node_id = NewId();
  if (options_.hostname.empty()) options_.hostname = HostName();
}

Worker::~Worker() { Stop(std::chrono::milliseconds(0)); }

void Worker::RememberCancelled(const std::string& task_id) {
  if (!cancelled_.insert(task_id).second) return;
  cancelled_order_.push_back(task_id);
  if (cancelled_order_.size() > kMaxCancelled) {
    cancelled_.erase(cancelled_order_.front());
    cancelled_order_.pop_front();
  }
}

bool Worker::told_of_drops() const {
  MutexLock lock(mu_);
  return drops_complete_;
}

int Worker::running() const {
  MutexLock lock(mu_);
  return static_cast<int>(running_.size());
}

void Worker::AwaitDrops() {
  if (options_.await_drops <= std::chrono::milliseconds::zero()) return;
  MutexLock lock(mu_);
  // Real time: the first heartbeat's answer travels through the broker.
  bool told = drops_cv_.wait_for(lock, options_.await_drops,
                                 [&]() BATON_REQUIRES(mu_) { return drops_complete_; });
  if (!told) {
    log::Warn(
        "no coordinator told this worker of the tasks cancelled while queued; taking tasks "
        "anyway (one it takes is stopped once its start is heard)",
        {{"node", options_.node_id}, {"waited_ms", std::to_string(options_.await_drops.count())}});
  }
}

Status Worker::Start() {
  // Before any subscription: a task that an earlier run of this worker was running when
  // it died is redelivered, and must not run beside what is left of its first attempt.
  Status leftovers = runtime_.KillLeftovers();
  if (!leftovers.ok()) return leftovers;
  started_at_ = clock_.Now();
  auto cancel =
      broker_.Subscribe(CancelQueueFor(options_.node_id), 1, [this](std::unique_ptr<Delivery> d) {
        auto message = DecodeCancelTask(d->body());
        if (message.ok()) {
          MutexLock lock(mu_);
          for (const std::string& id : message->task_ids) {
            if (auto it = running_.find(id); it != running_.end()) {
              // Withdrawn (its job paused) while it runs here: it runs on.
              if (!message->withdraw) it->second->cancel.request_stop();
            } else {
              RememberCancelled(id);
            }
          }
          if (message->complete) drops_complete_ = true;
        }
        if (message.ok() && message->complete) drops_cv_.notify_all();
        (void)d->Ack();
      });
  if (!cancel.ok()) return cancel.status();
  cancel_subscription_ = std::move(*cancel);
  // Heard of before it takes any task, so that coordinators cancelling tasks still in a
  // queue count it among the workers to tell (its cancel queue is already read), and tell
  // it of those cancelled before.
  Heartbeat();
  AwaitDrops();

  for (const auto& [queue, concurrency] : options_.queues) {
    auto lane = std::make_unique<Lane>();
    lane->queue = queue;
    lane->concurrency = std::max(1, concurrency);
    Lane* raw = lane.get();
    for (int i = 0; i < lane->concurrency; ++i) {
      lane->threads.emplace_back([this, raw](std::stop_token stop) { SlotLoop(*raw, stop); });
    }
    auto subscription =
        broker_.Subscribe(queue, lane->concurrency, [raw](std::unique_ptr<Delivery> d) {
          {
            MutexLock lock(raw->mu);
            raw->pending.push_back(std::move(d));
          }
          raw->cv.notify_one();
        });
    if (!subscription.ok()) return subscription.status();
    {
      MutexLock lock(lane->mu);
      lane->subscription = std::move(*subscription);
    }
    lanes_.push_back(std::move(lane));
  }
  start_thread_ = std::jthread([this](std::stop_token stop) { StartReportLoop(stop); });
  heartbeat_thread_ = std::jthread([this](std::stop_token stop) { HeartbeatLoop(stop); });
  log::Info("worker started", {{"node", options_.node_id}});
  return Status::Ok();
}

void Worker::SlotLoop(Lane& lane, const std::stop_token& stop) {
  for (;;) {
    std::unique_ptr<Delivery> delivery;
    {
      MutexLock lock(lane.mu);
      lane.cv.wait(lock, stop, [&]() BATON_REQUIRES(lane.mu) { return !lane.pending.empty(); });
      if (lane.pending.empty()) return;  // stop requested
      delivery = std::move(lane.pending.front());
      lane.pending.pop_front();
    }
    RunOne(lane, std::move(delivery));
  }
}

void Worker::Counted(Lane& lane, int delta) {
  lane.running += delta;
  if (lane.subscription) {
    (void)lane.subscription->SetPrefetch(
        lane.paused ? 0 : std::max(0, lane.concurrency - lane.running));
  }
}

void Worker::StartKnown(Attempt& attempt) {
  {
    MutexLock lock(attempt.lane->mu);
    if (!attempt.ended) {
      // Lowered before the ack, so the broker never sees room for one more.
      attempt.counted = true;
      Counted(*attempt.lane, +1);
    }
  }
  (void)attempt.delivery->Ack();
}

void Worker::RunOne(Lane& lane, std::unique_ptr<Delivery> delivery) {
  auto record = TaskRecordFromJson(nlohmann::json::parse(delivery->body(), nullptr, false));
  if (!record.ok()) {
    log::Error("dropping a task message that cannot be read",
               {{"error", record.status().message()}});
    (void)delivery->Nack(false);
    return;
  }
  TaskRecord task = std::move(*record);
  auto attempt = std::make_shared<Attempt>();
  attempt->lane = &lane;
  attempt->delivery = std::move(delivery);
  attempt->started = TaskStarted{
      .task_id = task.id, .job_id = task.job_id, .node_id = options_.node_id, .at = clock_.Now()};
  const bool report_first = options_.report_start_after.count() <= 0;
  {
    MutexLock lock(mu_);
    if (draining_) {
      (void)attempt->delivery->Nack(true);
      return;
    }
    if (cancelled_.contains(task.id)) {
      // Cancelled while its message waited in a queue: it never starts. Its row is
      // CANCELLED already; the message is done with.
      log::Info("dropping a cancelled task", {{"task_id", task.id}});
      (void)attempt->delivery->Ack();
      return;
    }
    if (running_.contains(task.id) || recent_.contains(task.id)) {
      // Delivered again (an ack or a publish confirm lost with a connection) while it
      // runs here or after it ran here.
      log::Warn("dropping a second delivery of a task", {{"task_id", task.id}});
      (void)attempt->delivery->Ack();
      return;
    }
    running_.emplace(task.id, attempt);
    if (!report_first) {
      attempt->report_at = std::chrono::steady_clock::now() + options_.report_start_after;
      start_queue_.push_back(attempt);
    }
  }
  if (report_first) {
    Status started = broker_.Publish(kQueueStarted, Encode(attempt->started));
    if (!started.ok()) {
      {
        MutexLock lock(mu_);
        running_.erase(task.id);
      }
      (void)attempt->delivery->Nack(true);
      return;
    }
    {
      MutexLock lock(mu_);
      attempt->start = Attempt::Start::kReported;
    }
    StartKnown(*attempt);
  } else {
    start_cv_.notify_one();
  }

  Reporter reporter(broker_, clock_, task);
  RunRequest request{task.id, task.job_id, task.task, options_.max_result_bytes};
  auto outcome = runtime_.Run(request, reporter, attempt->cancel.get_token());
  reporter.End();
  TaskFinished finished;
  finished.task_id = task.id;
  finished.job_id = task.job_id;
  finished.node_id = options_.node_id;
  finished.at = clock_.Now();
  if (!outcome.ok()) {
    finished.outcome = TaskFinished::Outcome::kFailed;
    finished.error = "the runtime failed: " + outcome.status().message();
    finished.reason = FailReason::kError;
  } else if (outcome->state == RunOutcome::State::kCompleted) {
    finished.outcome = TaskFinished::Outcome::kCompleted;
    finished.result = outcome->result;
  } else if (outcome->state == RunOutcome::State::kCancelled) {
    MutexLock lock(mu_);
    if (grace_over_) {
      finished.outcome = TaskFinished::Outcome::kHandedBack;
      finished.error = "worker " + options_.node_id + " stopped before the task finished";
    } else {
      finished.outcome = TaskFinished::Outcome::kCancelled;
      finished.error = outcome->error;
    }
  } else {
    finished.outcome = TaskFinished::Outcome::kFailed;
    finished.error = outcome->error;
    finished.reason = outcome->reason;
    finished.exit_code = outcome->exit_code;
  }
  std::string_view queue =
      finished.outcome == TaskFinished::Outcome::kCompleted ? kQueueCompleted : kQueueFailed;
  // The slot is free now: the next message is on its way while the outcome is reported
  // (over RabbitMQ both take a round trip).
  {
    // Through attempt->lane (which is &lane): the name the analysis knows `ended` by.
    MutexLock lock(attempt->lane->mu);
    attempt->ended = true;
    if (attempt->counted) Counted(*attempt->lane, -1);
  }
  bool outcome_acks = false;  // the start was never reported: the outcome stands for it
  {
    MutexLock lock(mu_);
    if (attempt->start == Attempt::Start::kWaiting) {
      attempt->start = Attempt::Start::kInOutcome;
      finished.started_at = attempt->started.at;
      outcome_acks = true;
    }
  }
  bool reported =
      Report({{std::string(queue), Encode(finished), 0}}, "the outcome of task " + task.id);
  if (outcome_acks) {
    // Not reported (the worker stops and the broker is unreachable): the message goes
    // back to the queue, to run elsewhere.
    (void)(reported ? attempt->delivery->Ack() : attempt->delivery->Nack(true));
  }
  {
    MutexLock lock(mu_);
    running_.erase(task.id);
    recent_.insert(task.id);
    recent_order_.push_back(task.id);
    if (recent_order_.size() > 4096) {
      recent_.erase(recent_order_.front());
      recent_order_.pop_front();
    }
  }
  idle_cv_.notify_all();
}

void Worker::StartReportLoop(const std::stop_token& stop) {
  for (;;) {
    std::vector<std::shared_ptr<Attempt>> due;
    {
      MutexLock lock(mu_);
      start_cv_.wait(lock, stop, [&]() BATON_REQUIRES(mu_) { return !start_queue_.empty(); });
      if (stop.stop_requested()) return;
      // Attempts are queued in the order they are due.
      const auto at = start_queue_.front()->report_at;
      if (std::chrono::steady_clock::now() < at) {
        // Until it is due, or Stop made it due now.
        start_cv_.wait_until(lock, stop, at, [&]() BATON_REQUIRES(mu_) {
          return start_queue_.empty() || start_queue_.front()->report_at != at;
        });
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      while (!start_queue_.empty() && start_queue_.front()->report_at <= now) {
        std::shared_ptr<Attempt> attempt = std::move(start_queue_.front());
        start_queue_.pop_front();
        if (attempt->start != Attempt::Start::kWaiting) continue;  // it finished first
        attempt->start = Attempt::Start::kReporting;
        due.push_back(std::move(attempt));
      }
      reporting_starts_ += static_cast<int>(due.size());
    }
    if (due.empty()) continue;
    std::vector<OutgoingMessage> starts;
    for (const auto& attempt : due)
      starts.push_back({std::string(kQueueStarted), Encode(attempt->started), 0});
    bool reported = Report(std::move(starts),
                           due.size() == 1 ? "the start of task " + due.front()->started.task_id
                                           : fmt::format("{} starts", due.size()));
    for (const auto& attempt : due) {
      {
        MutexLock lock(mu_);
        attempt->start = Attempt::Start::kReported;
      }
      // Unreported only when the worker stops and the broker is unreachable: the
      // subscription's close then gives the message back.
      if (reported) StartKnown(*attempt);
    }
    {
      MutexLock lock(mu_);
      reporting_starts_ -= static_cast<int>(due.size());
    }
    idle_cv_.notify_all();
  }
}

bool Worker::Report(std::vector<OutgoingMessage> messages, std::string_view what) {
  auto first_try = std::chrono::steady_clock::now();
  auto backoff = std::chrono::milliseconds(100);
  for (;;) {
    Status s = broker_.PublishBatch(messages);
    if (s.ok()) return true;
    bool give_up = false;
    {
      MutexLock lock(mu_);
      give_up =
          grace_over_ && std::chrono::steady_clock::now() - first_try > std::chrono::seconds(10);
    }
    if (give_up) {
      log::Error(fmt::format("reporting {} failed; giving up as the worker stops", what),
                 {{"error", s.message()}});
      return false;
    }
    log::Warn(fmt::format("reporting {} failed; trying again", what), {{"error", s.message()}});
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

double Worker::CpuPercent() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  std::uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                steal = 0;
  if (!(stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) ||
      cpu != "cpu") {
    return 0;
  }
  std::uint64_t busy = user + nice + system + irq + softirq + steal;
  std::uint64_t total = busy + idle + iowait;
  double percent = 0;
  if (cpu_total_ != 0 && total > cpu_total_) {
    percent = 100.0 * static_cast<double>(busy - std::min(busy, cpu_busy_)) /
              static_cast<double>(total - cpu_total_);
  }
  cpu_busy_ = busy;
  cpu_total_ = total;
  return std::clamp(percent, 0.0, 100.0);
}

void Worker::Heartbeat() {
  NodeRecord node;
  node.id = options_.node_id;
  node.name = options_.name;
  node.hostname = options_.hostname;
  node.version = options_.version;
  std::string queues;
  for (const auto& [queue, concurrency] : options_.queues) {
    if (!queues.empty()) queues += ',';
    queues += fmt::format("{}:{}", queue, concurrency);
  }
  node.queue = queues;
  node.started_at = started_at_;
  node.last_heartbeat_at = clock_.Now();
  node.task_count = running();
  node.cpu_percent = CpuPercent();
  node.memory_bytes = ResidentBytes();
  node.status = NodeStatus::kUp;
  (void)broker_.Publish(kQueueHeartbeat, Encode(node));
}

void Worker::HeartbeatLoop(const std::stop_token& stop) {
  MutexLock lock(heartbeat_mu_);
  while (!stop.stop_requested()) {
    heartbeat_cv_.wait_for(lock, stop, options_.heartbeat_interval, [] { return false; });
    if (stop.stop_requested()) return;
    lock.unlock();
    Heartbeat();
    lock.lock();
  }
}

void Worker::Stop(std::chrono::milliseconds grace) {
  {
    MutexLock lock(mu_);
    if (draining_ && lanes_.empty()) return;
    draining_ = true;
    // Every running task's start is reported now, so its message can be acked before the
    // subscriptions close (closing gives back what is unacked, to run elsewhere).
    for (auto& attempt : start_queue_)
      attempt->report_at = std::chrono::steady_clock::time_point::min();
  }
  start_cv_.notify_all();
  // Stop taking work; what was delivered but not started goes back to the queue.
  for (auto& lane : lanes_) {
    std::deque<std::unique_ptr<Delivery>> pending;
    {
      MutexLock lock(lane->mu);
      lane->paused = true;
      Counted(*lane, 0);
      pending.swap(lane->pending);
    }
    for (auto& d : pending) (void)d->Nack(true);
  }
  {
    MutexLock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    idle_cv_.wait_until(lock, deadline, [&]() BATON_REQUIRES(mu_) {
      return start_queue_.empty() && reporting_starts_ == 0;
    });
    idle_cv_.wait_until(lock, deadline, [&]() BATON_REQUIRES(mu_) { return running_.empty(); });
    grace_over_ = true;
    for (auto& [id, attempt] : running_) attempt->cancel.request_stop();
  }
  // Slots report what they ran and settle its message before the subscription closes.
  for (auto& lane : lanes_) {
    for (auto& t : lane->threads) t.request_stop();
    lane->cv.notify_all();
    lane->threads.clear();  // joins
  }
  start_thread_ = std::jthread();  // joins
  for (auto& lane : lanes_) {
    if (lane->subscription) lane->subscription->Close();
    // Delivered while stopping, after the slots ended: unacked, so the close gave them back.
    MutexLock lock(lane->mu);
    lane->pending.clear();
  }
  lanes_.clear();
  if (cancel_subscription_) cancel_subscription_->Close();
  cancel_subscription_.reset();
  heartbeat_thread_ = std::jthread();
}

}  // namespace baton

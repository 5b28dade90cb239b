#include "coordinator/scheduler.h"

#include <map>
#include <optional>
#include <utility>
#include <variant>

#include "base/log.h"
#include "coordinator/decision.h"
#include "core/task_kind.h"

namespace baton {
namespace {

// Errors that delivering the event again would meet again (a row the datastore refuses,
// an internal error): the step can never be taken.
bool IsLasting(const Status& s) {
  return !s.ok() && !MayPass(s) && s.code() != StatusCode::kNotFound &&
         s.code() != StatusCode::kFailedPrecondition;
}

OutboxSinks SinksOf(const SchedulerOptions& options) {
  return {.on_webhooks = options.on_webhooks, .metrics = options.metrics, .events = options.events};
}

}  // namespace

Scheduler::Scheduler(Datastore& datastore, Broker& broker, Clock& clock, Timers& timers,
                     Executors executors, SchedulerOptions options)
    : datastore_(datastore),
      clock_(clock),
      options_(std::move(options)),
      sinks_(SinksOf(options_)),
      locks_(datastore, options_.job_locker, options_.lock_timeout),
      reader_(cache_),
      signals_(broker, datastore, clock, options_.node_lease),
      after_(
          executors, deadlines_, signals_, clock, options_.durable_broker, options_.republish_delay,
          {.reported = [this](const auto& events) { return DecideReport(events); },
           .job = [this](const auto& job_id, const auto& event) { return Handle(job_id, event); },
           .task = [this](const auto& task_id, const auto& job_id,
                          const auto& event) { return HandleTask(task_id, job_id, event); }}),
      deadlines_(timers) {
  if (options_.start_in_background) {
    starter_ = std::make_unique<Starter>([this](const std::string& id) { StartCreated(id); });
  }
}

Scheduler::~Scheduler() { starter_.reset(); }

void Scheduler::SetJobFinishedListener(std::function<void(const JobRecord&)> listener) {
  MutexLock lock(listener_mu_);
  listener_ = std::move(listener);
}

flow::Policy Scheduler::Policy() const {
  return flow::Policy{.durable_broker = options_.durable_broker,
                      .max_redeliveries = options_.max_redeliveries,
                      .max_job_bytes = datastore_.MaxJobBytes(),
                      .republish_delay = options_.republish_delay,
                      .live_events = options_.events != nullptr && options_.events->Wanted(),
                      .max_loop_iterations = options_.max_loop_iterations};
}

// ---------------------------------------------------------------------------- lock

Status Scheduler::Handle(const std::string& job_id, const flow::Event& event, Decided* out) {
  const auto began = std::chrono::steady_clock::now();
  Decided decided;
  {
    auto guard = locks_.Acquire(job_id);
    if (!guard.ok()) return guard.status();
    decided = DecideLocked(
        [&](Transaction& tx, JobCache::Scope& contexts) { return Decide(tx, contexts, event); });
    if (IsLasting(decided.status)) FailTree(job_id, decided);
  }
  Notify(decided.finished);
  if (options_.metrics != nullptr) {
    options_.metrics->EventDecided(
        flow::NameOf(event),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  }
  Status s = decided.status;
  if (out != nullptr) *out = std::move(decided);
  return s;
}

void Scheduler::FailTree(const std::string& job_id, Decided& decided) {
  // Delivering the event again would fail the same way, leaving the tree RUNNING with
  // nothing in flight: its top-level job fails instead.
  auto root = locks_.RootOf(job_id);
  const std::string& target = root.ok() ? *root : job_id;
  log::Error("a step of a job failed to be taken; failing the job",
             {{"job_id", target}, {"error", decided.status.message()}});
  const flow::Event event = flow::StepFailed{target, decided.status.message()};
  Decided failed = DecideLocked(
      [&](Transaction& tx, JobCache::Scope& contexts) { return Decide(tx, contexts, event); });
  if (!failed.status.ok()) {
    log::Error("failing a job whose step failed failed too",
               {{"job_id", target}, {"error", failed.status.message()}});
  } else if (failed.wrote) {
    decided.status = Status::Ok();  // the event is done with: its tree has failed
  }
  decided.finished.insert(decided.finished.end(), failed.finished.begin(), failed.finished.end());
}

Status Scheduler::HandleTask(const std::string& task_id, const std::string& job_id,
                             const flow::Event& event, Decided* out) {
  std::string job = job_id;
  if (job.empty()) {
    auto task = datastore_.GetTask(task_id);
    if (!task.ok()) return task.status();
    job = task->job_id;
  }
  return Handle(job, event, out);
}

// ---------------------------------------------------------------------------- read, decide

Result<std::vector<flow::Effect>> Scheduler::Decide(Transaction& tx, JobCache::Scope& contexts,
                                                    const flow::Event& event) {
  flow::View view;
  view.policy = Policy();
  view.id_seed = NewId();
  BATON_RETURN_IF_ERROR(reader_.Read(tx, event, contexts, view));
  return flow::Decide(event, std::move(view), clock_.Now());
}

Scheduler::Decided Scheduler::DecideLocked(const FirstEffects& first) {
  Decided decided;
  JobCache::Scope contexts;
  Outbox outbox(sinks_, clock_);
  std::vector<flow::Effect> after;
  decided.status = datastore_.Transact([&](Transaction& tx) -> Status {
    contexts.clear();
    outbox.Begin();
    Decision decision(tx, contexts, outbox, Policy());
    auto effects = first(tx, contexts);
    if (!effects.ok()) return effects.status();
    BATON_RETURN_IF_ERROR(decision.Apply(std::move(*effects)));
    for (;;) {
      auto next = decision.NextFollowUp();
      if (!next.ok()) return next.status();
      if (!*next) break;
      effects = Decide(tx, contexts, **next);
      if (!effects.ok()) return effects.status();
      BATON_RETURN_IF_ERROR(decision.Apply(std::move(*effects)));
    }
    BATON_RETURN_IF_ERROR(outbox.Write(tx));
    decided.wrote = decision.wrote();
    decided.created = std::move(decision.created());
    after = std::move(decision.after());
    return Status::Ok();
  });
  if (!decided.status.ok()) return {.status = decided.status};  // nothing was stored
  cache_.Publish(contexts);
  cache_.Keep(decided.created);
  for (const flow::Effect& e : after) {
    if (const auto* f = std::get_if<flow::JobFinished>(&e)) decided.finished.push_back(f->row);
  }
  outbox.Committed(decided.finished);
  // An ended job's definition is read again if it is restarted.
  cache_.Forget(decided.finished);
  decided.status = after_.Run(std::move(after));
  return decided;
}

// ---------------------------------------------------------------------------- start

Status Scheduler::DecideReport(const std::vector<flow::Event>& events) {
  Decided decided = DecideLocked(
      [&](Transaction& tx, JobCache::Scope& contexts) -> Result<std::vector<flow::Effect>> {
        std::vector<flow::Effect> all;
        for (const flow::Event& event : events) {
          auto effects = Decide(tx, contexts, event);
          if (!effects.ok()) return effects.status();
          for (flow::Effect& e : *effects) all.push_back(std::move(e));
        }
        return all;
      });
  return decided.status;
}

void Scheduler::Notify(const std::vector<JobRecord>& finished) {
  if (finished.empty()) return;
  std::function<void(const JobRecord&)> listener;
  {
    MutexLock lock(listener_mu_);
    listener = listener_;
  }
  if (!listener) return;
  for (const JobRecord& job : finished) listener(job);
}

// ---------------------------------------------------------------------------- jobs

Result<JobRecord> Scheduler::Submit(const Job& job) {
  std::string id = NewId();
  locks_.TopLevel(id);
  JobRecord record = flow::NewJobRecord(job, "", id, clock_.Now());
  // In the background only a job whose first step may be big (a composite: an each may
  // expand thousands of rows) is left to the starter thread. One whose first task is
  // runnable is decided here, stored started with its task's row in one write (PENDING
  // and then started it would cost two) and published at once, as without.
  const bool runnable_first = !job.tasks.empty() && KindOf(job.tasks[0]) == TaskKind::kRunnable;
  if (starter_ != nullptr && !runnable_first) {
    // Stored PENDING before the answer; the starter thread decides StartJob. A crash in
    // between leaves it PENDING, and reconciling starts it.
    auto stored = Store([&](Transaction&) { return std::vector<JobRecord>{record}; });
    if (!stored.ok()) return stored.status();
    starter_->Add(id);
    return record;
  }
  Decided decided;
  Status s = Handle(id, flow::Submit{record}, &decided);
  for (const JobRecord& created : decided.created) {
    if (created.id == id) record = created;
  }
  // Stored, but a step failed: the job is there to be reconciled.
  if (!s.ok() && decided.created.empty()) return s;
  if (!s.ok()) log::Error("starting a job failed", {{"job_id", id}, {"error", s.message()}});
  return record;
}

Result<std::vector<JobRecord>> Scheduler::CreateJobsWith(const CreateJobsBody& body) {
  auto jobs = Store(body);
  if (!jobs.ok()) return jobs.status();
  for (const JobRecord& job : *jobs) StartCreated(job.id);
  return jobs;
}

Result<std::vector<JobRecord>> Scheduler::Store(const CreateJobsBody& body) {
  // New top-level jobs: no other decision knows of them, so no tree lock is needed. Each
  // is stored as a CreateJob effect, the one way a job is created.
  Decided decided =
      DecideLocked([&](Transaction& tx, JobCache::Scope&) -> Result<std::vector<flow::Effect>> {
        auto jobs = body(tx);
        if (!jobs.ok()) return jobs.status();
        return flow::StoreJobs(std::move(*jobs), Policy());
      });
  if (!decided.status.ok()) return decided.status;
  for (const JobRecord& job : decided.created) locks_.TopLevel(job.id);
  return std::move(decided.created);
}

void Scheduler::StartCreated(const std::string& id) {
  Status s = Handle(id, flow::StartJob{id});
  if (MayPass(s)) {
    log::Error("starting a job failed; trying again", {{"job_id", id}, {"error", s.message()}});
    deadlines_.At(clock_.Now() + std::chrono::seconds(1), [this, id] { StartCreated(id); });
  } else if (!s.ok() && s.code() != StatusCode::kNotFound) {
    log::Error("starting a job failed", {{"job_id", id}, {"error", s.message()}});
  }
}

Status Scheduler::Cancel(const std::string& job_id) {
  return Request(job_id, flow::Cancel{job_id});
}
Status Scheduler::Restart(const std::string& job_id) {
  return Request(job_id, flow::Restart{job_id});
}
Status Scheduler::Pause(const std::string& job_id) { return Request(job_id, flow::Pause{job_id}); }
Status Scheduler::Resume(const std::string& job_id) {
  return Request(job_id, flow::Resume{job_id});
}

Status Scheduler::Rerun(const flow::Rerun& rerun) { return Request(rerun.job_id, rerun); }
Status Scheduler::Signal(const flow::Signal& signal) { return Request(signal.job_id, signal); }
Status Scheduler::Skip(const std::string& task_id, const std::string& result) {
  return HandleTask(task_id, "", flow::Skip{task_id, result});  // NotFound from its read
}

Status Scheduler::Request(const std::string& job_id, const flow::Event& event) {
  Decided decided;
  Status s = Handle(job_id, event, &decided);
  if (s.ok() && !decided.wrote && decided.created.empty()) {
    // Decide found no job (it refuses one in the wrong state with a reason).
    auto job = datastore_.GetJob(job_id);
    if (!job.ok()) return job.status();
  }
  return s;
}

Status Scheduler::UnderJobLock(const std::string& job_id, const std::function<Status()>& work) {
  BATON_ASSIGN_OR_RETURN(auto guard, locks_.Acquire(job_id));
  return work();
}

// ---------------------------------------------------------------------------- events

Status Scheduler::OnStarted(const TaskStarted& event) { return OnWorker(FromWorker(event)); }
Status Scheduler::OnFinished(const TaskFinished& event) { return OnWorker(FromWorker(event)); }
Status Scheduler::OnProgress(const TaskProgress& event) { return OnWorker(FromWorker(event)); }

Status Scheduler::OnWorker(const WorkerEvent& event) {
  // Under the tree's lock like every decision: the rows flow reads are the rows it writes.
  return Handled(HandleTask(event.task_id, event.job_id, event.event), event);
}

// ---------------------------------------------------------------------------- recovery

Status Scheduler::Reconcile(const std::set<std::string>& live_nodes) {
  Status result;
  auto jobs = datastore_.JobsInState(
      {JobState::kPending, JobState::kScheduled, JobState::kRunning, JobState::kPaused});
  if (!jobs.ok()) return jobs.status();
  const flow::Policy policy = Policy();
  for (const JobRecord& listed : *jobs) {
    Decided decided;
    if (auto guard = locks_.Acquire(listed.id); !guard.ok()) {
      decided.status = guard.status();
    } else {
      decided = DecideLocked([&](Transaction& tx,
                                 JobCache::Scope&) -> Result<std::vector<flow::Effect>> {
        // Read again under the lock: another coordinator may have moved it on.
        auto job = tx.GetJob(listed.id);
        if (!job.ok()) return job.status();
        auto rows = tx.JobTasks(listed.id);
        if (!rows.ok()) return rows.status();
        return flow::Frontier(*job, std::move(*rows), clock_.Now(), policy, &live_nodes, NewId());
      });
    }
    Notify(decided.finished);
    const Status& s = decided.status;
    if (!s.ok() && s.code() != StatusCode::kNotFound) {
      log::Error("reconciling a job failed", {{"job_id", listed.id}, {"error", s.message()}});
      if (result.ok()) result = s;
    }
  }
  return result;
}

Result<Scheduler::RunningChecked> Scheduler::CheckRunning(std::optional<Duration> grace,
                                                          std::optional<Duration> lease) {
  const TimePoint now = clock_.Now();
  BATON_ASSIGN_OR_RETURN(auto running, datastore_.TasksInState({TaskState::kRunning}));
  RunningChecked checked;
  if (running.empty()) return checked;
  if (grace) checked.timed_out = Offer(OverdueChecks(running, now, *grace));
  if (!lease) return checked;
  // The nodes seen within the lease (not every node that ever heartbeated).
  auto nodes = datastore_.ActiveNodes(now - *lease);
  if (!nodes.ok()) {
    checked.requeued = nodes.status();
    return checked;
  }
  std::map<std::string, TimePoint> last_seen;
  for (const NodeRecord& node : *nodes) last_seen[node.id] = node.last_heartbeat_at;
  checked.requeued = Offer(LeaseChecks(running, last_seen, now, *lease));
  return checked;
}

Result<int> Scheduler::Offer(const std::vector<RunningCheck>& checks) {
  int wrote = 0;
  Status first_error;
  for (const RunningCheck& check : checks) {
    Decided decided;
    Status s = Handle(check.job_id, check.event, &decided);
    if (!s.ok()) {
      if (first_error.ok()) first_error = s;
      continue;
    }
    if (decided.wrote) ++wrote;
  }
  if (!first_error.ok() && wrote == 0) return first_error;
  return wrote;
}

}  // namespace baton

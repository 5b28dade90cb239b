// FaultyDatastore: a DatastoreWrapper for tests that injects faults into the calls it
// forwards: fail the Nth matching call, fail every call matching a predicate, or hold
// matching calls back until the test releases them (to hold one job's write while
// another job completes). Every call is counted by method name.
//
// A failed call returns its Status without reaching the wrapped datastore. A held call
// waits (on the caller's thread) before anything else; once released it goes on as any
// other call does.
//
// Transact is one call ("Transact", no id), seen before the scope begins; inside it each
// call of the Transaction is one more, named "Transaction.<method>" ("Transaction.UpdateTask")
// with its ids. A failed call inside fails as the datastore's own write would (the scope
// is poisoned: nothing of it is stored). Hold a scope at "Transact": a call held inside
// one holds its transaction open (on SQLite, the one writer every scope takes turns on).
//
// Thread-safety: thread-safe; calls may come from any thread. Predicates run under the
// fake's lock: they must not call it. The destructor releases every hold and waits for
// the held calls to leave it; the test joins its callers before it.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "datastore/wrapper.h"

namespace baton::testing {

class FaultyDatastore : public DatastoreWrapper {
 public:
  // What a rule sees of a call: the Datastore method's name ("UpdateJob"), the id it is
  // about (a job's, a task's, a node's; empty for lists), and its job's id where the
  // arguments name it (empty otherwise: UpdateTask knows only the task).
  struct Call {
    std::string method;
    std::string id;
    std::string job_id;
  };
  using Predicate = std::function<bool(const Call&)>;

  // Matches calls of one method.
  static Predicate Method(std::string method) {
    return [method = std::move(method)](const Call& c) { return c.method == method; };
  }
  // Matches calls whose job is `job_id`.
  static Predicate OfJob(std::string job_id) {
    return [job_id = std::move(job_id)](const Call& c) { return c.job_id == job_id; };
  }

  using DatastoreWrapper::DatastoreWrapper;

  ~FaultyDatastore() override {
    MutexLock lock(mu_);
    holds_.clear();
    changed_.notify_all();
    changed_.wait(lock, [&]() BATON_REQUIRES(mu_) { return inside_ == 0; });
  }

  // The `n`th call from now (1 = the next one) that matches `matching` (any call when
  // empty) fails with `status`; the others go through.
  void FailNthCall(int n, Status status, Predicate matching = {}) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    rules_.push_back(Rule{std::move(matching), std::move(status), n});
  }
  // Every call matching `matching` fails with `status`, until ClearFailures.
  void FailCalls(Predicate matching, Status status) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    rules_.push_back(Rule{std::move(matching), std::move(status), std::nullopt});
  }
  void ClearFailures() BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    rules_.clear();
  }

  // Calls matching `matching` wait until Release(hold) (or the destructor).
  int Hold(Predicate matching) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    const int id = ++next_hold_;
    holds_.emplace(id, HoldState{std::move(matching), 0});
    return id;
  }
  // True once `count` calls are waiting in `hold`; false if that takes longer than
  // `timeout`.
  bool WaitUntilHeld(int hold, int count = 1,
                     std::chrono::milliseconds timeout = std::chrono::seconds(5))
      BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return changed_.wait_for(lock, timeout, [&]() BATON_REQUIRES(mu_) {
      auto it = holds_.find(hold);
      return it != holds_.end() && it->second.waiting >= count;
    });
  }
  // Lets the calls waiting in `hold` go on; later calls are no longer held by it.
  void Release(int hold) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    holds_.erase(hold);
    changed_.notify_all();
  }

  // How many job and task rows the reads of Transact scopes returned, in all (a scope's
  // GetJob or GetTask one each, a list read its size; CountChildren none): what a test
  // of a decision's cost counts.
  long rows_read() const BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return rows_read_;
  }

  // How many top-level tasks the job definitions that Transact scopes read held, in all
  // (GetJob's and GetJobDefinition's): what a decision that copies its job's definition
  // pays per step.
  long definition_tasks_read() const BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return definition_tasks_read_;
  }

  // How many bytes of job contexts Transact scopes read (GetJobContext's, and GetJob's
  // as its row's context dumps): what a decision that parses its job's context pays.
  long context_bytes_read() const BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return context_bytes_read_;
  }

  // How many calls of `method` reached this datastore (failed and held ones included).
  int calls(std::string_view method) const BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    auto it = calls_.find(std::string(method));
    return it == calls_.end() ? 0 : it->second;
  }

  Status Transact(const std::function<Status(Transaction&)>& body) override {
    BATON_RETURN_IF_ERROR(Enter({"Transact", "", ""}));
    return DatastoreWrapper::Transact([&](Transaction& tx) {
      FaultyTransaction faulty(*this, tx);
      Status s = body(faulty);
      return s.ok() ? faulty.poison() : s;
    });
  }

  Status CreateJob(const JobRecord& job) override {
    BATON_RETURN_IF_ERROR(Enter({"CreateJob", job.id, job.id}));
    return DatastoreWrapper::CreateJob(job);
  }
  Result<JobRecord> GetJob(std::string_view id) override {
    BATON_RETURN_IF_ERROR(Enter({"GetJob", std::string(id), std::string(id)}));
    return DatastoreWrapper::GetJob(id);
  }
  Status UpdateJob(std::string_view id, const std::function<Status(JobRecord&)>& modify) override {
    BATON_RETURN_IF_ERROR(Enter({"UpdateJob", std::string(id), std::string(id)}));
    return DatastoreWrapper::UpdateJob(id, modify);
  }
  Status UpdateJobState(std::string_view id,
                        const std::function<Status(JobRecord&)>& modify) override {
    BATON_RETURN_IF_ERROR(Enter({"UpdateJobState", std::string(id), std::string(id)}));
    return DatastoreWrapper::UpdateJobState(id, modify);
  }
  Result<Page<JobRecord>> ListJobs(const JobQuery& query) override {
    BATON_RETURN_IF_ERROR(Enter({"ListJobs", "", ""}));
    return DatastoreWrapper::ListJobs(query);
  }
  Result<std::vector<JobRecord>> JobsInState(const std::vector<JobState>& states) override {
    BATON_RETURN_IF_ERROR(Enter({"JobsInState", "", ""}));
    return DatastoreWrapper::JobsInState(states);
  }
  Status DeleteJob(std::string_view id) override {
    BATON_RETURN_IF_ERROR(Enter({"DeleteJob", std::string(id), std::string(id)}));
    return DatastoreWrapper::DeleteJob(id);
  }
  Result<std::vector<std::string>> JobsDueForDeletion(TimePoint now, int limit) override {
    BATON_RETURN_IF_ERROR(Enter({"JobsDueForDeletion", "", ""}));
    return DatastoreWrapper::JobsDueForDeletion(now, limit);
  }

  Status CreateTask(const TaskRecord& task) override {
    BATON_RETURN_IF_ERROR(Enter({"CreateTask", task.id, task.job_id}));
    return DatastoreWrapper::CreateTask(task);
  }
  Status CreateTasks(const std::vector<TaskRecord>& tasks) override {
    std::string job_id = tasks.empty() ? "" : tasks.front().job_id;
    BATON_RETURN_IF_ERROR(Enter({"CreateTasks", "", std::move(job_id)}));
    return DatastoreWrapper::CreateTasks(tasks);
  }
  Result<TaskRecord> GetTask(std::string_view id) override {
    BATON_RETURN_IF_ERROR(Enter({"GetTask", std::string(id), ""}));
    return DatastoreWrapper::GetTask(id);
  }
  Status UpdateTask(std::string_view id,
                    const std::function<Status(TaskRecord&)>& modify) override {
    BATON_RETURN_IF_ERROR(Enter({"UpdateTask", std::string(id), ""}));
    return DatastoreWrapper::UpdateTask(id, modify);
  }
  Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) override {
    BATON_RETURN_IF_ERROR(Enter({"JobTasks", std::string(job_id), std::string(job_id)}));
    return DatastoreWrapper::JobTasks(job_id);
  }
  Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) override {
    BATON_RETURN_IF_ERROR(Enter({"ChildTasks", std::string(parent_id), ""}));
    return DatastoreWrapper::ChildTasks(parent_id);
  }
  Result<std::vector<TaskRecord>> TasksInState(const std::vector<TaskState>& states) override {
    BATON_RETURN_IF_ERROR(Enter({"TasksInState", "", ""}));
    return DatastoreWrapper::TasksInState(states);
  }
  Result<std::vector<std::string>> DroppedTasks(TimePoint since, int limit) override {
    BATON_RETURN_IF_ERROR(Enter({"DroppedTasks", "", ""}));
    return DatastoreWrapper::DroppedTasks(since, limit);
  }
  Result<std::vector<std::string>> WithdrawnTasks(int limit) override {
    BATON_RETURN_IF_ERROR(Enter({"WithdrawnTasks", "", ""}));
    return DatastoreWrapper::WithdrawnTasks(limit);
  }
  Status MarkScheduled(const std::vector<std::string>& ids, TimePoint at) override {
    BATON_RETURN_IF_ERROR(Enter({"MarkScheduled", "", ""}));
    return DatastoreWrapper::MarkScheduled(ids, at);
  }
  Result<std::vector<CancelledTask>> CancelTasks(std::string_view job_id, std::string_view under,
                                                 TimePoint at) override {
    BATON_RETURN_IF_ERROR(Enter({"CancelTasks", std::string(under), std::string(job_id)}));
    return DatastoreWrapper::CancelTasks(job_id, under, at);
  }

  Status CreateLogPart(const LogPart& part) override {
    BATON_RETURN_IF_ERROR(Enter({"CreateLogPart", part.task_id, part.job_id}));
    return DatastoreWrapper::CreateLogPart(part);
  }
  Result<Page<LogPart>> TaskLogParts(std::string_view task_id, int page, int size) override {
    BATON_RETURN_IF_ERROR(Enter({"TaskLogParts", std::string(task_id), ""}));
    return DatastoreWrapper::TaskLogParts(task_id, page, size);
  }
  Result<Page<LogPart>> JobLogParts(std::string_view job_id, int page, int size) override {
    BATON_RETURN_IF_ERROR(Enter({"JobLogParts", std::string(job_id), std::string(job_id)}));
    return DatastoreWrapper::JobLogParts(job_id, page, size);
  }

  Status UpsertNode(const NodeRecord& node) override {
    BATON_RETURN_IF_ERROR(Enter({"UpsertNode", node.id, ""}));
    return DatastoreWrapper::UpsertNode(node);
  }
  Result<std::vector<NodeRecord>> ActiveNodes(TimePoint since) override {
    BATON_RETURN_IF_ERROR(Enter({"ActiveNodes", "", ""}));
    return DatastoreWrapper::ActiveNodes(since);
  }

  Result<StateCounts> CountStates() override {
    BATON_RETURN_IF_ERROR(Enter({"CountStates", "", ""}));
    return DatastoreWrapper::CountStates();
  }
  Result<EndedCounts> CountJobsEndedSince(TimePoint since) override {
    BATON_RETURN_IF_ERROR(Enter({"CountJobsEndedSince", "", ""}));
    return DatastoreWrapper::CountJobsEndedSince(since);
  }
  Result<RunningCounts> CountRunning() override {
    BATON_RETURN_IF_ERROR(Enter({"CountRunning", "", ""}));
    return DatastoreWrapper::CountRunning();
  }

  Status Health() override {
    BATON_RETURN_IF_ERROR(Enter({"Health", "", ""}));
    return DatastoreWrapper::Health();
  }

 private:
  // The scope's calls through Enter. A failure it injects poisons the scope as a failed
  // write of the datastore would.
  class FaultyTransaction final : public Transaction {
   public:
    FaultyTransaction(FaultyDatastore& fake, Transaction& tx) : fake_(fake), tx_(tx) {}
    const Status& poison() const { return poison_; }

    Result<JobRecord> GetJob(std::string_view id) override {
      BATON_RETURN_IF_ERROR(Enter("GetJob", id, id));
      auto job = tx_.GetJob(id);
      if (job.ok()) {
        fake_.AddDefinitionTasksRead(job->job.tasks.size());
        fake_.AddContextBytesRead(job->context.dump().size());
      }
      return Counted(std::move(job));
    }
    Result<JobRecord> GetJobState(std::string_view id, int* context_version) override {
      BATON_RETURN_IF_ERROR(Enter("GetJobState", id, id));
      return Counted(tx_.GetJobState(id, context_version));
    }
    Result<nlohmann::json> GetJobContext(std::string_view id, std::size_t* bytes) override {
      BATON_RETURN_IF_ERROR(Enter("GetJobContext", id, id));
      std::size_t read = 0;
      auto context = tx_.GetJobContext(id, &read);
      if (context.ok()) fake_.AddContextBytesRead(read);
      if (bytes != nullptr) *bytes = read;
      return context;
    }
    Result<std::shared_ptr<const Job>> GetJobDefinition(std::string_view id) override {
      BATON_RETURN_IF_ERROR(Enter("GetJobDefinition", id, id));
      auto definition = tx_.GetJobDefinition(id);
      if (definition.ok()) fake_.AddDefinitionTasksRead((*definition)->tasks.size());
      return definition;
    }
    Result<TaskRecord> GetTask(std::string_view id) override {
      BATON_RETURN_IF_ERROR(Enter("GetTask", id, ""));
      return Counted(tx_.GetTask(id));
    }
    Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) override {
      BATON_RETURN_IF_ERROR(Enter("JobTasks", job_id, job_id));
      return Counted(tx_.JobTasks(job_id));
    }
    Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) override {
      BATON_RETURN_IF_ERROR(Enter("ChildTasks", parent_id, ""));
      return Counted(tx_.ChildTasks(parent_id));
    }
    Result<std::vector<TaskRecord>> NextCreatedChildren(std::string_view parent_id,
                                                        int limit) override {
      BATON_RETURN_IF_ERROR(Enter("NextCreatedChildren", parent_id, ""));
      return Counted(tx_.NextCreatedChildren(parent_id, limit));
    }
    Result<std::map<TaskState, int>> CountChildren(std::string_view parent_id,
                                                   const std::vector<TaskState>& states) override {
      BATON_RETURN_IF_ERROR(Enter("CountChildren", parent_id, ""));
      return tx_.CountChildren(parent_id, states);  // counts, no rows
    }
    Status CreateJob(const JobRecord& job) override {
      BATON_RETURN_IF_ERROR(Enter("CreateJob", job.id, job.id));
      return tx_.CreateJob(job);
    }
    Status UpdateJob(const JobRecord& job) override {
      BATON_RETURN_IF_ERROR(Enter("UpdateJob", job.id, job.id));
      return tx_.UpdateJob(job);
    }
    Status UpdateJobState(const JobRecord& job) override {
      BATON_RETURN_IF_ERROR(Enter("UpdateJobState", job.id, job.id));
      return tx_.UpdateJobState(job);
    }
    Status UpdateJobStateAndContext(const JobRecord& job) override {
      BATON_RETURN_IF_ERROR(Enter("UpdateJobStateAndContext", job.id, job.id));
      return tx_.UpdateJobStateAndContext(job);
    }
    Status CreateTasks(const std::vector<TaskRecord>& tasks) override {
      const std::string id = tasks.empty() ? "" : tasks.front().id;
      const std::string job = tasks.empty() ? "" : tasks.front().job_id;
      BATON_RETURN_IF_ERROR(Enter("CreateTasks", id, job));
      return tx_.CreateTasks(tasks);
    }
    Status UpdateTask(const TaskRecord& task) override {
      BATON_RETURN_IF_ERROR(Enter("UpdateTask", task.id, task.job_id));
      return tx_.UpdateTask(task);
    }
    Result<std::vector<CancelledTask>> CancelTasks(std::string_view job_id, std::string_view under,
                                                   TimePoint at) override {
      BATON_RETURN_IF_ERROR(Enter("CancelTasks", under, job_id));
      return tx_.CancelTasks(job_id, under, at);
    }
    Status CreateWebhookDeliveries(const std::vector<WebhookDelivery>& deliveries) override {
      const std::string job = deliveries.empty() ? "" : deliveries.front().job_id;
      BATON_RETURN_IF_ERROR(Enter("CreateWebhookDeliveries", "", job));
      return tx_.CreateWebhookDeliveries(deliveries);
    }
    Result<std::vector<WebhookDelivery>> DueWebhookDeliveries(TimePoint now, int limit) override {
      BATON_RETURN_IF_ERROR(Enter("DueWebhookDeliveries", "", ""));
      return tx_.DueWebhookDeliveries(now, limit);
    }
    Status UpdateWebhookDelivery(const WebhookDelivery& delivery) override {
      BATON_RETURN_IF_ERROR(Enter("UpdateWebhookDelivery", delivery.id, delivery.job_id));
      return tx_.UpdateWebhookDelivery(delivery);
    }
    Result<int> ReleaseWebhookDeliveries(TimePoint now) override {
      BATON_RETURN_IF_ERROR(Enter("ReleaseWebhookDeliveries", "", ""));
      return tx_.ReleaseWebhookDeliveries(now);
    }
    Result<std::vector<WebhookDelivery>> JobWebhookDeliveries(std::string_view job_id) override {
      BATON_RETURN_IF_ERROR(Enter("JobWebhookDeliveries", "", job_id));
      return tx_.JobWebhookDeliveries(job_id);
    }
    Result<int> DeleteLogPartsBefore(TimePoint before, int limit) override {
      BATON_RETURN_IF_ERROR(Enter("DeleteLogPartsBefore", "", ""));
      return tx_.DeleteLogPartsBefore(before, limit);
    }
    Result<std::vector<std::string>> FinishedJobsCreatedBefore(TimePoint before,
                                                               int limit) override {
      BATON_RETURN_IF_ERROR(Enter("FinishedJobsCreatedBefore", "", ""));
      return tx_.FinishedJobsCreatedBefore(before, limit);
    }
    Result<ReencryptBatch> ReencryptSecrets(SecretTable table, std::string_view after_id,
                                            int limit) override {
      BATON_RETURN_IF_ERROR(Enter("ReencryptSecrets", "", after_id));
      return tx_.ReencryptSecrets(table, after_id, limit);
    }
    Status CreateScheduledJob(const ScheduledJobRecord& scheduled) override {
      BATON_RETURN_IF_ERROR(Enter("CreateScheduledJob", scheduled.id, ""));
      return tx_.CreateScheduledJob(scheduled);
    }
    Result<ScheduledJobRecord> GetScheduledJob(std::string_view id) override {
      BATON_RETURN_IF_ERROR(Enter("GetScheduledJob", id, ""));
      return tx_.GetScheduledJob(id);
    }
    Status UpdateScheduledJob(const ScheduledJobRecord& scheduled) override {
      BATON_RETURN_IF_ERROR(Enter("UpdateScheduledJob", scheduled.id, ""));
      return tx_.UpdateScheduledJob(scheduled);
    }
    Status DeleteScheduledJob(std::string_view id) override {
      BATON_RETURN_IF_ERROR(Enter("DeleteScheduledJob", id, ""));
      return tx_.DeleteScheduledJob(id);
    }
    Result<Page<ScheduledJobRecord>> ListScheduledJobs(
        int page, int size, const std::optional<Principal>& viewer) override {
      BATON_RETURN_IF_ERROR(Enter("ListScheduledJobs", "", ""));
      return tx_.ListScheduledJobs(page, size, viewer);
    }
    Result<std::vector<std::string>> DueScheduledJobs(TimePoint now, int limit) override {
      BATON_RETURN_IF_ERROR(Enter("DueScheduledJobs", "", ""));
      return tx_.DueScheduledJobs(now, limit);
    }
    Result<std::optional<TimePoint>> NextScheduledTick(TimePoint now) override {
      BATON_RETURN_IF_ERROR(Enter("NextScheduledTick", "", ""));
      return tx_.NextScheduledTick(now);
    }
    Status CreateUser(const UserRecord& user) override {
      BATON_RETURN_IF_ERROR(Enter("CreateUser", "", ""));
      return tx_.CreateUser(user);
    }
    Result<UserRecord> GetUser(std::string_view username) override {
      BATON_RETURN_IF_ERROR(Enter("GetUser", "", ""));
      return tx_.GetUser(username);
    }
    Status CreateApiKey(const ApiKeyRecord& key) override {
      BATON_RETURN_IF_ERROR(Enter("CreateApiKey", "", ""));
      return tx_.CreateApiKey(key);
    }
    Result<ApiKeyRecord> GetApiKeyByHash(std::string_view key_hash) override {
      BATON_RETURN_IF_ERROR(Enter("GetApiKeyByHash", "", ""));
      return tx_.GetApiKeyByHash(key_hash);
    }
    Result<std::vector<ApiKeyRecord>> ApiKeys(std::string_view username) override {
      BATON_RETURN_IF_ERROR(Enter("ApiKeys", "", ""));
      return tx_.ApiKeys(username);
    }
    Status RevokeApiKey(std::string_view id, TimePoint at) override {
      BATON_RETURN_IF_ERROR(Enter("RevokeApiKey", "", ""));
      return tx_.RevokeApiKey(id, at);
    }

   private:
    // Rows a read returned (a job's or a task's row each), for rows_read().
    template <typename T>
    Result<T> Counted(Result<T> read) {
      if (read.ok()) {
        int n = 1;
        if constexpr (requires { read->size(); }) n = static_cast<int>(read->size());
        fake_.AddRowsRead(n);
      }
      return read;
    }
    Status Enter(std::string_view method, std::string_view id, std::string_view job_id) {
      if (!poison_.ok()) return poison_;
      Status s =
          fake_.Enter({"Transaction." + std::string(method), std::string(id), std::string(job_id)});
      if (!s.ok()) poison_ = s;
      return s;
    }

    FaultyDatastore& fake_;
    Transaction& tx_;
    Status poison_;
  };

  struct Rule {
    Predicate matching;  // empty: every call
    Status status;
    std::optional<int> countdown;  // the nth matching call fails; nullopt: every one
  };
  struct HoldState {
    Predicate matching;
    int waiting = 0;
  };

  // Counts the call, waits while a hold matches it, then returns the failure a rule
  // gives it (OK to go on).
  Status Enter(const Call& call) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++calls_[call.method];
    ++inside_;
    for (;;) {
      auto held = std::find_if(holds_.begin(), holds_.end(),
                               [&](const auto& h) { return h.second.matching(call); });
      if (held == holds_.end()) break;
      const int id = held->first;
      ++held->second.waiting;
      changed_.notify_all();
      changed_.wait(lock, [&]() BATON_REQUIRES(mu_) { return !holds_.contains(id); });
    }
    // Every rule that matches sees the call (so each countdown counts it); the first
    // failure found is the one returned.
    Status result;
    for (Rule& rule : rules_) {
      if (rule.matching && !rule.matching(call)) continue;
      const bool fails = !rule.countdown || --*rule.countdown == 0;
      if (fails && result.ok()) result = rule.status;
    }
    std::erase_if(rules_, [](const Rule& r) { return r.countdown && *r.countdown <= 0; });
    --inside_;
    changed_.notify_all();
    return result;
  }

  void AddRowsRead(int n) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    rows_read_ += n;
  }
  void AddDefinitionTasksRead(std::size_t n) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    definition_tasks_read_ += static_cast<long>(n);
  }
  void AddContextBytesRead(std::size_t n) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    context_bytes_read_ += static_cast<long>(n);
  }

  mutable Mutex mu_;
  long rows_read_ BATON_GUARDED_BY(mu_) = 0;
  long definition_tasks_read_ BATON_GUARDED_BY(mu_) = 0;
  long context_bytes_read_ BATON_GUARDED_BY(mu_) = 0;
  std::condition_variable_any changed_;  // a hold or inside_ changed
  std::map<std::string, int> calls_ BATON_GUARDED_BY(mu_);
  std::vector<Rule> rules_ BATON_GUARDED_BY(mu_);
  std::map<int, HoldState> holds_ BATON_GUARDED_BY(mu_);
  int next_hold_ BATON_GUARDED_BY(mu_) = 0;
  int inside_ BATON_GUARDED_BY(mu_) = 0;  // calls in Enter
};

}  // namespace baton::testing

// The one Transaction (datastore.h) of the SQL datastore, over a backend's Session: the
// rules of a scope (poisoning, sizes, encoding, what an update rewrites) written once.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "datastore/datastore.h"
#include "datastore/sql/rows.h"
#include "datastore/sql/session.h"
#include "datastore/sql/statements.h"

namespace baton::sql {

// Not thread-safe: one scope, one thread (the body's).
class SqlTransaction final : public Transaction {
 public:
  // `caches` may be null (no definition cache); `keys` may be null (secrets stored as they
  // are, secrets.h); `max_job_bytes` bounds CreateJob.
  SqlTransaction(Session& session, const Statements& statements, DefinitionCaches* caches,
                 const crypto::Keyring* keys, std::size_t max_job_bytes)
      : session_(session),
        st_(statements),
        caches_(caches),
        keys_(keys),
        max_job_bytes_(max_job_bytes) {}

  Result<JobRecord> GetJob(std::string_view id) override;
  Result<TaskRecord> GetTask(std::string_view id) override;
  Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) override;
  Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) override;
  Result<std::vector<TaskRecord>> NextCreatedChildren(std::string_view parent_id,
                                                      int limit) override;
  Result<std::map<TaskState, int>> CountChildren(std::string_view parent_id,
                                                 const std::vector<TaskState>& states) override;

  Result<JobRecord> GetJobState(std::string_view id, int* context_version) override;
  Result<nlohmann::json> GetJobContext(std::string_view id, std::size_t* bytes) override;
  Result<std::shared_ptr<const Job>> GetJobDefinition(std::string_view id) override;

  Status CreateJob(const JobRecord& job) override;
  Status UpdateJob(const JobRecord& job) override;
  Status UpdateJobState(const JobRecord& job) override;
  Status UpdateJobStateAndContext(const JobRecord& job) override;
  Status CreateTasks(const std::vector<TaskRecord>& tasks) override;
  Status UpdateTask(const TaskRecord& task) override;
  Result<std::vector<CancelledTask>> CancelTasks(std::string_view job_id, std::string_view under,
                                                 TimePoint at) override;

  Status CreateWebhookDeliveries(const std::vector<WebhookDelivery>& deliveries) override;
  Result<std::vector<WebhookDelivery>> DueWebhookDeliveries(TimePoint now, int limit) override;
  Status UpdateWebhookDelivery(const WebhookDelivery& delivery) override;
  Result<int> ReleaseWebhookDeliveries(TimePoint now) override;
  Result<std::vector<WebhookDelivery>> JobWebhookDeliveries(std::string_view job_id) override;
  Result<int> DeleteLogPartsBefore(TimePoint before, int limit) override;
  Result<std::vector<std::string>> FinishedJobsCreatedBefore(TimePoint before, int limit) override;
  Result<ReencryptBatch> ReencryptSecrets(SecretTable table, std::string_view after_id,
                                          int limit) override;

  Status CreateScheduledJob(const ScheduledJobRecord& scheduled) override;
  Result<ScheduledJobRecord> GetScheduledJob(std::string_view id) override;
  Status UpdateScheduledJob(const ScheduledJobRecord& scheduled) override;
  Status DeleteScheduledJob(std::string_view id) override;
  Result<Page<ScheduledJobRecord>> ListScheduledJobs(
      int page, int size, const std::optional<Principal>& viewer) override;
  // Fills in the access of scheduled jobs stored before schema version 11 (NULL) from
  // their definitions (SqlDatastore::Migrate).
  Status FillScheduledJobAccess();
  Result<std::vector<std::string>> DueScheduledJobs(TimePoint now, int limit) override;
  Result<std::optional<TimePoint>> NextScheduledTick(TimePoint now) override;

  Status CreateUser(const UserRecord& user) override;
  Result<UserRecord> GetUser(std::string_view username) override;
  Status CreateApiKey(const ApiKeyRecord& key) override;
  Result<ApiKeyRecord> GetApiKeyByHash(std::string_view key_hash) override;
  Result<std::vector<ApiKeyRecord>> ApiKeys(std::string_view username) override;
  Status RevokeApiKey(std::string_view id, TimePoint at) override;

  // The first failed write (Ok when none): what Transact returns instead of committing.
  const Status& poison() const { return poison_; }

 private:
  // What the scope read of a row: an update that keeps its definition writes the
  // stored text back instead of encoding it again, and rewrites only the indexed
  // columns that changed.
  template <typename T, typename Keys>
  struct Seen {
    std::shared_ptr<const T> definition;
    std::string text;
    Keys keys;
  };

  Status Poison(Status status);
  // The deliveries `stmt` returns with the parameters `bind` gives it.
  Result<std::vector<WebhookDelivery>> Deliveries(const Statement& stmt, const Bind& bind);
  // The API keys `stmt` returns with the parameters `bind` gives it.
  Result<std::vector<ApiKeyRecord>> Keys(const Statement& stmt, const Bind& bind);
  // The task rows `stmt` returns with the parameters `bind` gives it.
  Result<std::vector<TaskRecord>> Tasks(const Statement& stmt, const Bind& bind);

  Session& session_;
  const Statements& st_;
  DefinitionCaches* caches_;
  const crypto::Keyring* keys_;
  const std::size_t max_job_bytes_;
  Status poison_;
  std::unordered_map<std::string, Seen<Job, JobKeys>> jobs_;
  std::unordered_map<std::string, Seen<Task, TaskKeys>> tasks_;
};

// Runs `body` over `session` (a transaction the caller opened and will end): Ok means
// commit, an error roll back. A write that failed is returned even if the body
// ignored it.
Status RunScope(Session& session, const Statements& statements, DefinitionCaches* caches,
                const crypto::Keyring* keys, std::size_t max_job_bytes,
                const std::function<Status(Transaction&)>& body);

}  // namespace baton::sql

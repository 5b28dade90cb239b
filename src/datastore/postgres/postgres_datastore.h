// PostgresDatastore: the Datastore on a PostgreSQL server (libpq), for deployments with
// more than one coordinator.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "datastore/datastore.h"

namespace baton {

namespace crypto {
class Keyring;
}  // namespace crypto
namespace postgres_internal {
class Connection;
}  // namespace postgres_internal

struct PostgresOptions {
  // A libpq connection string: "host=... port=... user=... dbname=..." or a
  // postgresql:// URI.
  std::string dsn;
  // Most connections open at once; callers beyond that wait for one to be returned.
  int pool_size = 8;
  // How long a caller waits for a pooled connection before failing kUnavailable.
  std::chrono::milliseconds acquire_timeout{30000};
  // Apply missing schema migrations when opening. Off for callers that migrate
  // explicitly (`baton migrate`); a database newer than this binary is refused either way.
  bool auto_migrate = true;
  // The most bytes a job may take as stored (datastore.max_job_bytes; see
  // kDefaultMaxJobBytes): CreateJob (and Transaction::CreateJob) refuse a bigger one.
  std::size_t max_job_bytes = kDefaultMaxJobBytes;
  // The keys secrets are encrypted with at rest (datastore/sql/secrets.h): null stores
  // them as they are, and an encrypted secret read without keys is an error.
  std::shared_ptr<const crypto::Keyring> keyring;
};

// Thread-safety: all methods may be called from any thread. Each call borrows one
// connection from a pool of at most `pool_size` (opened lazily; each connection prepares
// its statements once, on first use) and returns it when done, so calls run in parallel
// on separate server sessions. Update* run SELECT ... FOR UPDATE, the modifier and the
// UPDATE in one transaction, so concurrent updates of a row serialise on its row lock.
// Writes use synchronous commits: acknowledged only once committed. No exception escapes
// a method; a broken connection is dropped and replaced by the next borrower.
class PostgresDatastore final : public Datastore {
 public:
  // Connects (one connection, to check the server and migrate) and applies missing
  // migrations. Fails kUnavailable when the server cannot be reached, and
  // kFailedPrecondition when its schema is newer than this binary knows.
  static Result<std::unique_ptr<PostgresDatastore>> Open(PostgresOptions options);

  // Closes every pooled connection. Calls still running must have returned.
  ~PostgresDatastore() override;
  PostgresDatastore(const PostgresDatastore&) = delete;
  PostgresDatastore& operator=(const PostgresDatastore&) = delete;

  // Applies the migrations the database lacks, each in its own transaction, holding a
  // transaction-level advisory lock so concurrent migrators (other processes) take turns.
  // Running it again is a no-op. Fails (changing nothing) when the schema is newer than
  // this binary.
  Status Migrate();
  // The highest migration applied (0 for an empty database).
  Result<int> SchemaVersion();

  const PostgresOptions& options() const { return options_; }

  Status CreateJob(const JobRecord& job) override;
  Result<JobRecord> GetJob(std::string_view id) override;
  Status UpdateJob(std::string_view id, const std::function<Status(JobRecord&)>& modify) override;
  Status UpdateJobState(std::string_view id,
                        const std::function<Status(JobRecord&)>& modify) override;
  Result<Page<JobRecord>> ListJobs(const JobQuery& query) override;
  Result<std::vector<JobRecord>> JobsInState(const std::vector<JobState>& states) override;
  Status DeleteJob(std::string_view id) override;
  Result<std::vector<std::string>> JobsDueForDeletion(TimePoint now, int limit) override;

  Status CreateTask(const TaskRecord& task) override;
  Status CreateTasks(const std::vector<TaskRecord>& tasks) override;
  Result<TaskRecord> GetTask(std::string_view id) override;
  Status UpdateTask(std::string_view id, const std::function<Status(TaskRecord&)>& modify) override;
  Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) override;
  Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) override;
  Result<std::vector<TaskRecord>> TasksInState(const std::vector<TaskState>& states) override;
  Status MarkScheduled(const std::vector<std::string>& ids, TimePoint at) override;
  Result<std::vector<CancelledTask>> CancelTasks(std::string_view job_id, std::string_view under,
                                                 TimePoint at) override;

  Status CreateLogPart(const LogPart& part) override;
  Result<Page<LogPart>> TaskLogParts(std::string_view task_id, int page, int size) override;
  Result<Page<LogPart>> JobLogParts(std::string_view job_id, int page, int size) override;

  Status UpsertNode(const NodeRecord& node) override;
  Result<std::vector<NodeRecord>> ActiveNodes(TimePoint since) override;

  // Runs SELECT 1 on a pooled connection.
  Result<StateCounts> CountStates() override;
  Result<EndedCounts> CountJobsEndedSince(TimePoint since) override;
  Result<RunningCounts> CountRunning() override;
  Status Health() override;
  std::size_t MaxJobBytes() const override { return options_.max_job_bytes; }

  Status Transact(const std::function<Status(Transaction&)>& body) override;

 private:
  using Connection = postgres_internal::Connection;
  using Op = std::function<Status(Connection&)>;

  explicit PostgresDatastore(PostgresOptions options);

  const crypto::Keyring* keys() const { return options_.keyring.get(); }

  // Runs `op` on a borrowed connection, outside any transaction.
  Status WithConnection(const Op& op);
  // Runs `op` on a borrowed connection inside BEGIN ... COMMIT; an error from `op` rolls
  // the transaction back and is returned.
  Status InTransaction(const Op& op);

  Result<std::unique_ptr<Connection>> Borrow();
  void Return(std::unique_ptr<Connection> conn);

  const PostgresOptions options_;

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by pool_mu_
  int open_ = 0;  // connections idle or borrowed (or being opened); guarded by pool_mu_
};

}  // namespace baton

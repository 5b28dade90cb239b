// SqlDatastore: every Datastore method, written once over the SQL a backend runs. A
// backend (sqlite/, postgres/) derives from it and supplies only how an operation runs on
// one of its connections — Write, Read, Alone below — and its dialect; the rows, the
// statements, the search, the schema and its migration, and the Transaction are this
// folder's:
//
//   sql/datastore.{h,cc}   the Datastore methods (this class)
//   sql/transaction.{h,cc} the Transaction of Transact
//   sql/statements.*       every statement, spelled for each dialect (dialect.*)
//   sql/rows.*             binding and decoding rows; secrets.* the secrets in them
//   sql/search.*           job search and paging
//   sql/schema.*           the schema as migrations, with dialect hooks; migrate.* runs them
//   sql/session.h          what a backend's connection offers the code above
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "datastore/datastore.h"
#include "datastore/sql/dialect.h"
#include "datastore/sql/session.h"

namespace baton {

namespace crypto {
class Keyring;
}  // namespace crypto

namespace sql {

struct DefinitionCaches;
struct Statements;

// What runs on a session: the statements of one operation.
using SessionOp = std::function<Status(Session&)>;

// Thread-safety: all methods may be called from any thread, as the backend's Write, Read
// and Alone may.
class SqlDatastore : public Datastore {
 public:
  ~SqlDatastore() override;
  SqlDatastore(const SqlDatastore&) = delete;
  SqlDatastore& operator=(const SqlDatastore&) = delete;

  // Applies the migrations the database lacks, each in its own transaction (concurrent
  // migrators, in other processes too, take turns). Running it again is a no-op. Fails
  // (changing nothing) when the schema is newer than this binary.
  Status Migrate();
  // The highest migration applied (0 for an empty database).
  Result<int> SchemaVersion();

  Status Transact(const std::function<Status(Transaction&)>& body) final;

  Status CreateJob(const JobRecord& job) final;
  Result<JobRecord> GetJob(std::string_view id) final;
  Status UpdateJob(std::string_view id, const std::function<Status(JobRecord&)>& modify) final;
  Status UpdateJobState(std::string_view id, const std::function<Status(JobRecord&)>& modify) final;
  Result<Page<JobRecord>> ListJobs(const JobQuery& query) final;
  Result<std::vector<JobRecord>> JobsInState(const std::vector<JobState>& states) final;
  Status DeleteJob(std::string_view id) final;
  Result<std::vector<std::string>> JobsDueForDeletion(TimePoint now, int limit) final;

  Status CreateTask(const TaskRecord& task) final;
  Status CreateTasks(const std::vector<TaskRecord>& tasks) final;
  Result<TaskRecord> GetTask(std::string_view id) final;
  Status UpdateTask(std::string_view id, const std::function<Status(TaskRecord&)>& modify) final;
  Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) final;
  Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) final;
  Result<std::vector<TaskRecord>> TasksInState(const std::vector<TaskState>& states) final;
  Result<std::vector<std::string>> DroppedTasks(TimePoint since, int limit) final;
  Result<std::vector<std::string>> WithdrawnTasks(int limit) final;
  Status MarkScheduled(const std::vector<std::string>& ids, TimePoint at) final;
  Result<std::vector<CancelledTask>> CancelTasks(std::string_view job_id, std::string_view under,
                                                 TimePoint at) final;

  Status CreateLogPart(const LogPart& part) final;
  Result<Page<LogPart>> TaskLogParts(std::string_view task_id, int page, int size) final;
  Result<Page<LogPart>> JobLogParts(std::string_view job_id, int page, int size) final;

  Status UpsertNode(const NodeRecord& node) final;
  Result<std::vector<NodeRecord>> ActiveNodes(TimePoint since) final;

  Result<StateCounts> CountStates() final;
  Result<EndedCounts> CountJobsEndedSince(TimePoint since) final;
  Result<RunningCounts> CountRunning() final;
  Status Health() final;
  std::size_t MaxJobBytes() const final { return max_job_bytes_; }

  // Read (not Transact): on SQLite a read connection beside the writes.
  Result<UserRecord> GetUser(std::string_view username) final;
  Result<ApiKeyRecord> GetApiKeyByHash(std::string_view key_hash) final;
  Result<std::vector<ApiKeyRecord>> ApiKeys(std::string_view username) final;

 protected:
  // `cache_definitions`: keep decoded large definitions of active rows (only a backend
  // whose database no other process writes may: SQLite's). `keyring` may be null
  // (secrets stored as they are, secrets.h).
  SqlDatastore(Dialect dialect, bool cache_definitions,
               std::shared_ptr<const crypto::Keyring> keyring, std::size_t max_job_bytes);

  // What opening a datastore does to its schema: migrates it (`auto_migrate`) or checks
  // it; either way a schema newer than this binary is refused (kFailedPrecondition).
  Status OpenSchema(bool auto_migrate);

  // The definition caches (null when not kept).
  DefinitionCaches* caches() const { return caches_.get(); }

  // How the backend runs an operation. Each returns what `op` returned, or the backend's
  // own error (nothing stored then); an exception `op` throws never escapes.
  //
  // Write: `op` in one write transaction, committed when `op` returns Ok and rolled back
  // (nothing of it stored) otherwise; durable once Write returns. The last statement of
  // `op` may be sent with the commit (Session::ExecuteLast, QueryLast).
  virtual Status Write(const SessionOp& op) = 0;
  // Read: `op` reads only. With `snapshot`, every statement of `op` sees one snapshot (a
  // count and its page); without, each statement may see its own.
  virtual Status Read(const SessionOp& op, bool snapshot) = 0;
  // Alone: `op` on one connection with no transaction around it (the migrations open
  // theirs).
  virtual Status Alone(const SessionOp& op) = 0;

 private:
  const crypto::Keyring* keys() const { return keyring_.get(); }
  // The row of a one-row read by `id` (`what` and `id` name it in kNotFound).
  template <typename T, typename Decode>
  Result<T> ReadRow(const Statement& stmt, std::string_view id, std::string_view what,
                    Decode decode);
  // The rows `stmt` selects with `bind`, decoded by `decode`.
  template <typename T, typename Decode>
  Result<std::vector<T>> ReadRows(const Statement& stmt, const Bind& bind, Decode decode);
  // A page of log parts: the count and the page of one snapshot.
  Result<Page<LogPart>> LogPage(const Statement& count, const Statement& list, std::string_view key,
                                int page, int size);
  // What `read` returns, from the shared Transaction's reads on a read session.
  template <typename T>
  Result<T> ReadScope(const std::function<Result<T>(Transaction&)>& read);

  const Statements& st_;
  const std::shared_ptr<const crypto::Keyring> keyring_;
  const std::size_t max_job_bytes_;
  // Decoded definitions of large rows, so reading one again costs a copy, not a parse.
  const std::unique_ptr<DefinitionCaches> caches_;
};

}  // namespace sql
}  // namespace baton

#include "datastore/sqlite/sqlite_datastore.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <utility>

#include "base/log.h"
#include "core/job_decode.h"
#include "core/job_json.h"
#include "datastore/adapter_util.h"
#include "datastore/sqlite/sqlite_migrations.h"

namespace baton {
namespace sqlite_internal {

// Maps an SQLite result code (extended codes are on) to a Status.
Status SqliteStatus(int rc, sqlite3* db, std::string_view what) {
  std::string message =
      fmt::format("sqlite: {}: {}", what, db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc) {
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE:
      return AlreadyExists(std::move(message));
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return FailedPrecondition(std::move(message));
    default:
      break;
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PROTOCOL:
      return Unavailable(std::move(message));
    default:
      return Internal(std::move(message));
  }
}

// A prepared statement in use. A cached one is reset (and its bindings cleared) when the
// handle goes; an uncached one is finalized. Bound values are copied (SQLITE_TRANSIENT),
// so temporaries may be bound.
class Stmt {
 public:
  Stmt(sqlite3_stmt* stmt, bool owned) : stmt_(stmt), owned_(owned) {}
  Stmt(Stmt&& other) noexcept
      : stmt_(std::exchange(other.stmt_, nullptr)),
        owned_(other.owned_),
        bind_rc_(other.bind_rc_) {}
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() {
    if (stmt_ == nullptr) return;
    if (owned_) {
      sqlite3_finalize(stmt_);
    } else {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }

  void BindText(int i, std::string_view v) {
    Check(sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  void BindInt(int i, std::int64_t v) { Check(sqlite3_bind_int64(stmt_, i, v)); }
  void BindReal(int i, double v) { Check(sqlite3_bind_double(stmt_, i, v)); }
  void BindTime(int i, TimePoint t) { BindInt(i, t.time_since_epoch().count()); }
  void BindTime(int i, const std::optional<TimePoint>& t) {
    if (t) {
      BindTime(i, *t);
    } else {
      Check(sqlite3_bind_null(stmt_, i));
    }
  }

  // True when a row is ready, false when done.
  Result<bool> Step() {
    if (bind_rc_ != SQLITE_OK) return SqliteStatus(bind_rc_, nullptr, "bind");
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteStatus(rc, sqlite3_db_handle(stmt_), "step");
  }
  // Steps to the end, for statements that return no rows.
  Status Run() {
    for (;;) {
      Result<bool> row = Step();
      if (!row.ok()) return row.status();
      if (!*row) return Status::Ok();
    }
  }

  // Column accessors; text views stay valid until the next Step or the handle goes.
  std::string_view Text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    if (p == nullptr) return {};
    return {reinterpret_cast<const char*>(p),
            static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
  }
  std::int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  int Int32(int col) const { return sqlite3_column_int(stmt_, col); }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }
  TimePoint Time(int col) const { return TimePoint(std::chrono::milliseconds(Int(col))); }
  std::optional<TimePoint> OptTime(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return Time(col);
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }

  sqlite3_stmt* stmt_;
  bool owned_;
  int bind_rc_ = SQLITE_OK;  // the first failed bind, reported by Step
};

const char* SynchronousPragma(SqliteSync sync) {
  switch (sync) {
    case SqliteSync::kFull:
      return "PRAGMA synchronous = FULL";
    case SqliteSync::kNormal:
      return "PRAGMA synchronous = NORMAL";
    case SqliteSync::kOff:
      return "PRAGMA synchronous = OFF";
  }
  return "PRAGMA synchronous = FULL";
}

// One sqlite3 connection with its prepared statements. Used by one thread at a time.
class Connection {
 public:
  static Result<std::unique_ptr<Connection>> Open(const SqliteOptions& options, bool reader) {
    sqlite3* db = nullptr;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(options.path.c_str(), &db, flags, nullptr);
    auto conn = std::unique_ptr<Connection>(new Connection(db));  // closes db on failure
    if (rc != SQLITE_OK) {
      return SqliteStatus(rc, db, fmt::format("opening {}", options.path));
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, static_cast<int>(options.busy_timeout.count()));
    if (reader) {
      // Writes go through the write connection only; a reader that tried would be a bug.
      BATON_RETURN_IF_ERROR(conn->ExecScript("PRAGMA query_only = ON"));
      return conn;
    }
    if (options.path != ":memory:") {
      auto mode = conn->PragmaText("PRAGMA journal_mode = WAL");
      if (!mode.ok()) return mode.status();
      if (*mode != "wal") {
        return Unavailable(fmt::format("sqlite: {}: cannot use WAL mode (journal_mode is {})",
                                       options.path, *mode));
      }
    }
    BATON_RETURN_IF_ERROR(conn->ExecScript(SynchronousPragma(options.synchronous)));
    // Checkpoint every 4,000 pages (16 MB of WAL) instead of 1,000: each checkpoint
    // fsyncs, and a task's rows are rewritten several times in its life, so a wider window
    // copies each page to the database once for several commits. Commits are as durable.
    BATON_RETURN_IF_ERROR(conn->ExecScript("PRAGMA wal_autocheckpoint = 4000"));
    BATON_RETURN_IF_ERROR(conn->ExecScript("PRAGMA foreign_keys = ON"));
    return conn;
  }

  ~Connection() {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // A cached statement. `sql` must be a string constant: the cache is keyed by address.
  Result<Stmt> Prepare(const char* sql) {
    auto it = cache_.find(sql);
    if (it != cache_.end()) return Stmt(it->second, /*owned=*/false);
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteStatus(rc, db_, "prepare");
    cache_.emplace(sql, stmt);
    return Stmt(stmt, /*owned=*/false);
  }
  // An uncached statement, for SQL built at run time.
  Result<Stmt> PrepareOnce(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteStatus(rc, db_, "prepare");
    return Stmt(stmt, /*owned=*/true);
  }
  // Runs a cached statement that returns nothing (BEGIN, COMMIT, SAVEPOINT, ...).
  Status Exec(const char* sql) {
    Result<Stmt> stmt = Prepare(sql);
    if (!stmt.ok()) return stmt.status();
    return stmt->Run();
  }
  // Runs one or more statements, uncached (schema, pragmas).
  Status ExecScript(const char* sql) {
    char* error = nullptr;
    int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &error);
    if (rc == SQLITE_OK) return Status::Ok();
    Status status = SqliteStatus(rc, nullptr, error != nullptr ? error : sqlite3_errstr(rc));
    sqlite3_free(error);
    return status;
  }
  Result<std::string> PragmaText(const char* sql) {
    Result<Stmt> stmt = PrepareOnce(sql);
    if (!stmt.ok()) return stmt.status();
    Result<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return std::string();
    return std::string(stmt->Text(0));
  }

  // True when no transaction is open (SQLite rolls one back by itself on some errors).
  bool InAutocommit() const { return sqlite3_get_autocommit(db_) != 0; }

 private:
  explicit Connection(sqlite3* db) : db_(db) {}

  sqlite3* db_;
  std::unordered_map<const char*, sqlite3_stmt*> cache_;
};

}  // namespace sqlite_internal

using nlohmann::json;
using sqlite_internal::Connection;
using sqlite_internal::Stmt;

// Unwraps a Result into `lhs` or returns its error from the enclosing function.
#define BATON_SQL_ASSIGN(lhs, expr)                     \
  auto lhs##_result = (expr);                           \
  if (!lhs##_result.ok()) return lhs##_result.status(); \
  auto lhs = std::move(*lhs##_result)

namespace {

using datastore_util::AsciiUpper;
using datastore_util::CallModifier;
using datastore_util::CheckStoredJobSize;
using datastore_util::ClampPage;
using datastore_util::ContainsPattern;
using datastore_util::MakePage;
using datastore_util::NoThrow;
using datastore_util::PageSpec;
using datastore_util::ParseScope;
using datastore_util::ScopeText;
using datastore_util::SplitWords;

constexpr int kMaxIdleReaders = 8;

// ---- SQL ----------------------------------------------------------------------------

// Parameter numbers follow column order, so one binder serves INSERT and UPDATE.
#define BATON_JOB_COLUMNS                                                                 \
  "id, parent_id, state, name, description, tags, created_at, started_at, completed_at, " \
  "failed_at, delete_at, definition, position, task_count, progress, result, error, context"
constexpr const char* kInsertJob =
    "INSERT INTO jobs (" BATON_JOB_COLUMNS
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)";
constexpr const char* kUpdateJob =
    "UPDATE jobs SET parent_id = ?2, state = ?3, name = ?4, description = ?5, tags = ?6, "
    "created_at = ?7, started_at = ?8, completed_at = ?9, failed_at = ?10, delete_at = ?11, "
    "definition = ?12, position = ?13, task_count = ?14, progress = ?15, result = ?16, "
    "error = ?17, context = ?18 WHERE id = ?1";
// SQLite rewrites the index entries of every column an UPDATE sets, changed or not. Most
// updates change neither a row's creation time nor its deletion time (indexed), and many
// leave its state (indexed) alone: these variants leave out what did not change, so an
// update dirties fewer pages (each written to the WAL at commit). Same parameter numbers.
constexpr const char* kUpdateJobState =
    "UPDATE jobs SET parent_id = ?2, state = ?3, name = ?4, description = ?5, tags = ?6, "
    "started_at = ?8, completed_at = ?9, failed_at = ?10, definition = ?12, position = ?13, "
    "task_count = ?14, progress = ?15, result = ?16, error = ?17, context = ?18 WHERE id = ?1";
constexpr const char* kUpdateJobFields =
    "UPDATE jobs SET parent_id = ?2, name = ?4, description = ?5, tags = ?6, "
    "started_at = ?8, completed_at = ?9, failed_at = ?10, definition = ?12, position = ?13, "
    "task_count = ?14, progress = ?15, result = ?16, error = ?17, context = ?18 WHERE id = ?1";
constexpr const char* kSelectJob = "SELECT " BATON_JOB_COLUMNS " FROM jobs WHERE id = ?1";
// What UpdateJobState reads and writes: neither the definition nor the context (the
// columns that grow with the job), so moving a big job costs no decoding of them.
constexpr const char* kSelectJobState =
    "SELECT id, parent_id, state, created_at, started_at, completed_at, failed_at, delete_at, "
    "position, task_count, progress, result, error FROM jobs WHERE id = ?1";
constexpr const char* kUpdateJobStateOnly =
    "UPDATE jobs SET state = ?2, started_at = ?3, completed_at = ?4, failed_at = ?5, "
    "delete_at = ?6, position = ?7, progress = ?8, result = ?9, error = ?10 WHERE id = ?1";
// The same with the context (UpdateTaskAndJobState): what a step changes, without the
// definition that grows with the job.
constexpr const char* kSelectJobStateAndContext =
    "SELECT id, parent_id, state, created_at, started_at, completed_at, failed_at, delete_at, "
    "position, task_count, progress, result, error, context FROM jobs WHERE id = ?1";
constexpr const char* kUpdateJobStateAndContext =
    "UPDATE jobs SET state = ?2, started_at = ?3, completed_at = ?4, failed_at = ?5, "
    "delete_at = ?6, position = ?7, progress = ?8, result = ?9, error = ?10, context = ?11 "
    "WHERE id = ?1";
constexpr const char* kJobsInState =
    "SELECT " BATON_JOB_COLUMNS
    " FROM jobs WHERE state IN (SELECT value FROM json_each(?1)) ORDER BY created_at, id";
constexpr const char* kJobExists = "SELECT 1 FROM jobs WHERE id = ?1";
constexpr const char* kDeleteJobLogParts = "DELETE FROM log_parts WHERE job_id = ?1";
constexpr const char* kDeleteJobTasks = "DELETE FROM tasks WHERE job_id = ?1";
constexpr const char* kDeleteJob = "DELETE FROM jobs WHERE id = ?1";
// A job and its sub-jobs, at any depth: through the subjob tasks' links (tasks_job
// index), not the sub-jobs' parent_id, which has no index.
constexpr const char* kJobTree =
    "WITH RECURSIVE tree(id) AS (SELECT ?1 UNION "
    "SELECT t.subjob_id FROM tasks t JOIN tree ON t.job_id = tree.id WHERE t.subjob_id <> '') "
    "SELECT id FROM tree";
// Finished jobs whose delete_at has come (jobs_delete_at index), soonest first.
constexpr const char* kJobsDueForDeletion =
    "SELECT id FROM jobs WHERE delete_at IS NOT NULL AND delete_at <= ?1 "
    "AND state IN ('COMPLETED', 'FAILED', 'CANCELLED') ORDER BY delete_at, id LIMIT ?2";

#define BATON_TASK_COLUMNS                                                               \
  "id, job_id, parent_id, position, state, created_at, scheduled_at, started_at, "       \
  "completed_at, failed_at, definition, error, result, node_id, progress, redelivered, " \
  "each_size, each_index, completions, subjob_id, scope"
constexpr const char* kInsertTask =
    "INSERT INTO tasks (" BATON_TASK_COLUMNS
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
    "?19, ?20, ?21)";
constexpr const char* kUpdateTask =
    "UPDATE tasks SET job_id = ?2, parent_id = ?3, position = ?4, state = ?5, created_at = ?6, "
    "scheduled_at = ?7, started_at = ?8, completed_at = ?9, failed_at = ?10, definition = ?11, "
    "error = ?12, result = ?13, node_id = ?14, progress = ?15, redelivered = ?16, "
    "each_size = ?17, each_index = ?18, completions = ?19, subjob_id = ?20, scope = ?21 WHERE id = "
    "?1";
// As for jobs: without the indexed columns that did not change (job_id, parent_id,
// position and created_at rarely do; state often does not).
constexpr const char* kUpdateTaskState =
    "UPDATE tasks SET state = ?5, scheduled_at = ?7, started_at = ?8, completed_at = ?9, "
    "failed_at = ?10, definition = ?11, error = ?12, result = ?13, node_id = ?14, "
    "progress = ?15, redelivered = ?16, each_size = ?17, each_index = ?18, completions = ?19, "
    "subjob_id = ?20, scope = ?21 WHERE id = ?1";
constexpr const char* kUpdateTaskFields =
    "UPDATE tasks SET scheduled_at = ?7, started_at = ?8, completed_at = ?9, "
    "failed_at = ?10, definition = ?11, error = ?12, result = ?13, node_id = ?14, "
    "progress = ?15, redelivered = ?16, each_size = ?17, each_index = ?18, completions = ?19, "
    "subjob_id = ?20, scope = ?21 WHERE id = ?1";
constexpr const char* kSelectTask = "SELECT " BATON_TASK_COLUMNS " FROM tasks WHERE id = ?1";
constexpr const char* kAddCompletion =
    "UPDATE tasks SET completions = completions + 1 WHERE id = ?1 AND state = ?2 "
    "RETURNING completions";
constexpr const char* kTaskExists = "SELECT 1 FROM tasks WHERE id = ?1";
constexpr const char* kJobTasks =
    "SELECT " BATON_TASK_COLUMNS " FROM tasks WHERE job_id = ?1 ORDER BY position, created_at, id";
constexpr const char* kChildTasks =
    "SELECT " BATON_TASK_COLUMNS
    " FROM tasks WHERE parent_id = ?1 AND parent_id <> '' ORDER BY created_at, id";
constexpr const char* kTasksInState =
    "SELECT " BATON_TASK_COLUMNS
    " FROM tasks WHERE state IN (SELECT value FROM json_each(?1)) ORDER BY created_at, id";
// The active rows of a job (CancelTasks), all of them or those below a row (through
// the tasks_parent index), with what cancelling them needs.
#define BATON_ACTIVE_STATES "('PENDING', 'CREATED', 'SCHEDULED', 'RUNNING')"
constexpr const char* kActiveJobTasks =
    "SELECT id, state, node_id, subjob_id FROM tasks WHERE job_id = ?1 AND state "
    "IN " BATON_ACTIVE_STATES;
constexpr const char* kActiveTasksUnder =
    "WITH RECURSIVE below(id) AS (SELECT ?2 UNION "
    "SELECT t.id FROM tasks t JOIN below ON t.parent_id = below.id WHERE t.parent_id <> '') "
    "SELECT t.id, t.state, t.node_id, t.subjob_id FROM tasks t JOIN below ON t.id = below.id "
    "WHERE t.id <> ?2 AND t.job_id = ?1 AND t.state IN " BATON_ACTIVE_STATES;
constexpr const char* kCancelTask =
    "UPDATE tasks SET state = 'CANCELLED', completed_at = ?2 WHERE id = ?1";
constexpr const char* kMarkScheduled =
    "UPDATE tasks SET state = ?2, scheduled_at = ?3 WHERE id = ?1 AND state IN (?4, ?5)";

#define BATON_LOG_COLUMNS "id, task_id, job_id, number, contents, created_at"
constexpr const char* kInsertLogPart =
    "INSERT INTO log_parts (" BATON_LOG_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
constexpr const char* kCountTaskLogParts = "SELECT count(*) FROM log_parts WHERE task_id = ?1";
constexpr const char* kTaskLogParts =
    "SELECT " BATON_LOG_COLUMNS
    " FROM log_parts WHERE task_id = ?1 ORDER BY number DESC, created_at DESC, id DESC "
    "LIMIT ?2 OFFSET ?3";
constexpr const char* kCountJobLogParts = "SELECT count(*) FROM log_parts WHERE job_id = ?1";
constexpr const char* kJobLogParts =
    "SELECT " BATON_LOG_COLUMNS
    " FROM log_parts WHERE job_id = ?1 ORDER BY created_at DESC, number DESC, id DESC "
    "LIMIT ?2 OFFSET ?3";

#define BATON_NODE_COLUMNS                                                           \
  "id, name, hostname, version, queue, started_at, last_heartbeat_at, cpu_percent, " \
  "task_count, status"
constexpr const char* kUpsertNode =
    "INSERT INTO nodes (" BATON_NODE_COLUMNS
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (id) DO UPDATE SET "
    "name = excluded.name, hostname = excluded.hostname, version = excluded.version, "
    "queue = excluded.queue, started_at = excluded.started_at, "
    "last_heartbeat_at = excluded.last_heartbeat_at, cpu_percent = excluded.cpu_percent, "
    "task_count = excluded.task_count, status = excluded.status";
constexpr const char* kActiveNodes = "SELECT " BATON_NODE_COLUMNS
                                     " FROM nodes WHERE last_heartbeat_at >= ?1 "
                                     "ORDER BY last_heartbeat_at DESC, id";

constexpr const char* kBeginImmediate = "BEGIN IMMEDIATE";
constexpr const char* kBegin = "BEGIN";
constexpr const char* kCommit = "COMMIT";
constexpr const char* kRollback = "ROLLBACK";
constexpr const char* kSavepoint = "SAVEPOINT w";
constexpr const char* kRelease = "RELEASE w";
constexpr const char* kRollbackTo = "ROLLBACK TO w";
constexpr const char* kHealth = "SELECT 1";

constexpr const char* kCreateMigrationsTable =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "version INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '', applied_at TEXT NOT NULL)";
constexpr const char* kMigrationsTableExists =
    "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'";
constexpr const char* kMaxVersion = "SELECT coalesce(max(version), 0) FROM schema_migrations";
constexpr const char* kRecordMigration =
    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)";

// ---- Encoding -----------------------------------------------------------------------

// JSON text of a value; nlohmann throws on strings that are not UTF-8.
Result<std::string> Dump(const json& value, std::string_view what) {
  try {
    return value.dump();
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("{} cannot be stored: {}", what, e.what()));
  }
}

Result<std::string> EncodeJob(const Job& job) {
  try {
    return Dump(ToJson(job), "job definition");
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("job definition cannot be stored: {}", e.what()));
  }
}

Result<std::string> EncodeTask(const Task& task) {
  try {
    return Dump(ToJson(task), "task definition");
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("task definition cannot be stored: {}", e.what()));
  }
}

// What a jobs row stores besides the record's plain fields.
struct JobText {
  std::string definition;
  std::string tags;
  std::string context;
};

Result<JobText> EncodeJobText(const JobRecord& job, std::optional<std::string> definition) {
  JobText text;
  if (definition) {
    text.definition = std::move(*definition);
  } else {
    BATON_SQL_ASSIGN(def, EncodeJob(job.job));
    text.definition = std::move(def);
  }
  BATON_SQL_ASSIGN(tags, Dump(json(job.job.tags), "job tags"));
  BATON_SQL_ASSIGN(context, Dump(job.context, "job context"));
  text.tags = std::move(tags);
  text.context = std::move(context);
  return text;
}

void BindJob(Stmt& s, const JobRecord& job, const JobText& text) {
  s.BindText(1, job.id);
  s.BindText(2, job.parent_id);
  s.BindText(3, ToString(job.state));
  s.BindText(4, job.job.name);
  s.BindText(5, job.job.description);
  s.BindText(6, text.tags);
  s.BindTime(7, job.created_at);
  s.BindTime(8, job.started_at);
  s.BindTime(9, job.completed_at);
  s.BindTime(10, job.failed_at);
  s.BindTime(11, job.delete_at);
  s.BindText(12, text.definition);
  s.BindInt(13, job.position);
  s.BindInt(14, job.task_count);
  s.BindReal(15, job.progress);
  s.BindText(16, job.result);
  s.BindText(17, job.error);
  s.BindText(18, text.context);
}

void BindTask(Stmt& s, const TaskRecord& task, std::string_view definition) {
  s.BindText(1, task.id);
  s.BindText(2, task.job_id);
  s.BindText(3, task.parent_id);
  s.BindInt(4, task.position);
  s.BindText(5, ToString(task.state));
  s.BindTime(6, task.created_at);
  s.BindTime(7, task.scheduled_at);
  s.BindTime(8, task.started_at);
  s.BindTime(9, task.completed_at);
  s.BindTime(10, task.failed_at);
  s.BindText(11, definition);
  s.BindText(12, task.error);
  s.BindText(13, task.result);
  s.BindText(14, task.node_id);
  s.BindReal(15, task.progress);
  s.BindInt(16, task.redelivered);
  s.BindInt(17, task.each_size);
  s.BindInt(18, task.each_index);
  s.BindInt(19, task.completions);
  s.BindText(20, task.subjob_id);
  s.BindText(21, ScopeText(task.scope));
}

// ---- Decoding -----------------------------------------------------------------------

}  // namespace

namespace sqlite_internal {

// Decoded definitions of recently read rows, by row id, kept with the stored text they
// came from: a row whose text is unchanged is not decoded again. Only large definitions
// are kept (a job of hundreds of tasks, a parallel of hundreds of children), which the
// scheduler reads at every step of their job and whose decoding dominated that step;
// small ones decode faster than a look-up. Thread-safe.
template <typename T>
class DefinitionCache {
 public:
  static constexpr std::size_t kMinBytes = 4096;
  static constexpr std::size_t kMaxEntries = 128;

  std::shared_ptr<const T> Find(std::string_view id, std::string_view text) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(std::string(id));
    if (it == entries_.end() || it->second.text != text) return nullptr;
    return it->second.value;
  }
  void Put(std::string_view id, std::string_view text, std::shared_ptr<const T> value) {
    std::lock_guard lock(mu_);
    if (entries_.size() >= kMaxEntries) entries_.clear();  // bounded; refilled on demand
    entries_[std::string(id)] = Entry{std::string(text), std::move(value)};
  }

 private:
  struct Entry {
    std::string text;
    std::shared_ptr<const T> value;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
};

struct DefinitionCaches {
  DefinitionCache<Job> jobs;
  DefinitionCache<Task> tasks;
};

}  // namespace sqlite_internal

namespace {

using sqlite_internal::DefinitionCache;
using sqlite_internal::DefinitionCaches;

// The decoded definition, shared with the cache when it is a large one. Also what an
// update compares the modified definition against (no second copy of it).
template <typename T, typename Decode>
Result<std::shared_ptr<const T>> CachedDecode(DefinitionCache<T>* cache, std::string_view id,
                                              std::string_view text, Decode decode) {
  if (cache != nullptr && text.size() >= DefinitionCache<T>::kMinBytes) {
    if (std::shared_ptr<const T> hit = cache->Find(id, text)) return hit;
  }
  Result<T> decoded = decode(text);
  if (!decoded.ok()) return decoded.status();
  auto value = std::make_shared<const T>(std::move(*decoded));
  if (cache != nullptr && text.size() >= DefinitionCache<T>::kMinBytes) cache->Put(id, text, value);
  return value;
}

Status Corrupt(std::string_view table, std::string_view id, std::string_view problem) {
  return Internal(fmt::format("stored {} row {} is unreadable: {}", table, id, problem));
}

// `original`, when given, receives the definition as decoded (before any change).
Result<JobRecord> JobFromRow(const Stmt& s, DefinitionCaches* caches,
                             std::shared_ptr<const Job>* original = nullptr) {
  JobRecord job;
  job.id = std::string(s.Text(0));
  job.parent_id = std::string(s.Text(1));
  std::optional<JobState> state = ParseJobState(s.Text(2));
  if (!state) return Corrupt("jobs", job.id, fmt::format("unknown state '{}'", s.Text(2)));
  job.state = *state;
  job.created_at = s.Time(6);
  job.started_at = s.OptTime(7);
  job.completed_at = s.OptTime(8);
  job.failed_at = s.OptTime(9);
  job.delete_at = s.OptTime(10);
  auto definition = CachedDecode<Job>(
      caches != nullptr ? &caches->jobs : nullptr, job.id, s.Text(11),
      [](std::string_view text) { return DecodeJobJson(text, DecodeMode::kStored); });
  if (!definition.ok()) {
    return Corrupt("jobs", job.id, "definition: " + definition.status().message());
  }
  job.job = **definition;
  if (original != nullptr) *original = std::move(*definition);
  job.position = s.Int32(12);
  job.task_count = s.Int32(13);
  job.progress = s.Real(14);
  job.result = std::string(s.Text(15));
  job.error = std::string(s.Text(16));
  job.context = json::parse(s.Text(17), nullptr, /*allow_exceptions=*/false);
  if (job.context.is_discarded()) return Corrupt("jobs", job.id, "context is not JSON");
  return job;
}

Result<TaskRecord> TaskFromRow(const Stmt& s, DefinitionCaches* caches,
                               std::shared_ptr<const Task>* original = nullptr) {
  TaskRecord task;
  task.id = std::string(s.Text(0));
  task.job_id = std::string(s.Text(1));
  task.parent_id = std::string(s.Text(2));
  task.position = s.Int32(3);
  std::optional<TaskState> state = ParseTaskState(s.Text(4));
  if (!state) return Corrupt("tasks", task.id, fmt::format("unknown state '{}'", s.Text(4)));
  task.state = *state;
  task.created_at = s.Time(5);
  task.scheduled_at = s.OptTime(6);
  task.started_at = s.OptTime(7);
  task.completed_at = s.OptTime(8);
  task.failed_at = s.OptTime(9);
  auto definition = CachedDecode<Task>(
      caches != nullptr ? &caches->tasks : nullptr, task.id, s.Text(10),
      [](std::string_view text) { return DecodeTaskJson(text, DecodeMode::kStored); });
  if (!definition.ok()) {
    return Corrupt("tasks", task.id, "definition: " + definition.status().message());
  }
  task.task = **definition;
  if (original != nullptr) *original = std::move(*definition);
  task.error = std::string(s.Text(11));
  task.result = std::string(s.Text(12));
  task.node_id = std::string(s.Text(13));
  task.progress = s.Real(14);
  task.redelivered = s.Int32(15);
  task.each_size = s.Int32(16);
  task.each_index = s.Int32(17);
  task.completions = s.Int32(18);
  task.subjob_id = std::string(s.Text(19));
  auto scope = ParseScope(s.Text(20));
  if (!scope.ok()) return Corrupt("tasks", task.id, "scope: " + scope.status().message());
  task.scope = std::move(*scope);
  return task;
}

LogPart LogPartFromRow(const Stmt& s) {
  LogPart part;
  part.id = std::string(s.Text(0));
  part.task_id = std::string(s.Text(1));
  part.job_id = std::string(s.Text(2));
  part.number = s.Int32(3);
  part.contents = std::string(s.Text(4));
  part.created_at = s.Time(5);
  return part;
}

Result<NodeRecord> NodeFromRow(const Stmt& s) {
  NodeRecord node;
  node.id = std::string(s.Text(0));
  node.name = std::string(s.Text(1));
  node.hostname = std::string(s.Text(2));
  node.version = std::string(s.Text(3));
  node.queue = std::string(s.Text(4));
  node.started_at = s.Time(5);
  node.last_heartbeat_at = s.Time(6);
  node.cpu_percent = s.Real(7);
  node.task_count = s.Int32(8);
  std::optional<NodeStatus> status = ParseNodeStatus(s.Text(9));
  if (!status) return Corrupt("nodes", node.id, fmt::format("unknown status '{}'", s.Text(9)));
  node.status = *status;
  return node;
}

// Reads every row of `s` through `decode` (a row -> Result<T> function).
template <typename T, typename Decode>
Status CollectRows(Stmt& s, Decode decode, std::vector<T>& out) {
  for (;;) {
    Result<bool> row = s.Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    Result<T> item = decode(s);
    if (!item.ok()) return item.status();
    out.push_back(std::move(*item));
  }
}

Result<std::int64_t> CountRows(Stmt& s) {
  Result<bool> row = s.Step();
  if (!row.ok()) return row.status();
  if (!*row) return Internal("sqlite: count returned no row");
  return s.Int(0);
}

// ---- Helpers ------------------------------------------------------------------------

// A JSON array of state names, bound to `IN (SELECT value FROM json_each(?))`.
template <typename State>
std::string StatesJson(const std::vector<State>& states) {
  json names = json::array();
  for (State state : states) names.push_back(std::string(ToString(state)));
  return names.dump();
}

Status InsertTask(Connection& c, const TaskRecord& task, std::string_view definition) {
  BATON_SQL_ASSIGN(s, c.Prepare(kInsertTask));
  BindTask(s, task, definition);
  Status status = s.Run();
  if (status.code() == StatusCode::kAlreadyExists) {
    return AlreadyExists(fmt::format("task {} already exists", task.id));
  }
  if (status.code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition(fmt::format("task {}: job {} does not exist", task.id, task.job_id));
  }
  return status;
}

Result<int> ReadSchemaVersion(Connection& c) {
  BATON_SQL_ASSIGN(exists, c.Prepare(kMigrationsTableExists));
  BATON_SQL_ASSIGN(has_table, exists.Step());
  if (!has_table) return 0;
  BATON_SQL_ASSIGN(s, c.Prepare(kMaxVersion));
  BATON_SQL_ASSIGN(count, CountRows(s));
  return static_cast<int>(count);
}

Status CheckNotNewer(int version) {
  if (version > LatestSqliteSchemaVersion()) {
    return FailedPrecondition(fmt::format(
        "the database schema is at version {}, newer than this binary knows ({}); run a newer "
        "baton",
        version, LatestSqliteSchemaVersion()));
  }
  return Status::Ok();
}

// The read-modify-write of UpdateJob, on a connection inside a write transaction.
Status UpdateJobRow(Connection& c, DefinitionCaches* caches, std::string_view id,
                    const std::function<Status(JobRecord&)>& modify) {
  std::optional<JobRecord> job;
  std::string definition;
  std::shared_ptr<const Job> before;
  {
    BATON_SQL_ASSIGN(s, c.Prepare(kSelectJob));
    s.BindText(1, id);
    BATON_SQL_ASSIGN(row, s.Step());
    if (!row) return NotFound(fmt::format("job {} not found", id));
    BATON_SQL_ASSIGN(decoded, JobFromRow(s, caches, &before));
    job = std::move(decoded);
    definition = std::string(s.Text(11));
  }
  const JobState state = job->state;
  const TimePoint created_at = job->created_at;
  const std::optional<TimePoint> delete_at = job->delete_at;
  BATON_RETURN_IF_ERROR(CallModifier(modify, *job));
  job->id = std::string(id);  // the key is not the modifier's to change
  // Most updates change state, not the definition: keep its stored text then.
  std::optional<std::string> same;
  if (job->job == *before) same = std::move(definition);
  BATON_SQL_ASSIGN(text, EncodeJobText(*job, std::move(same)));
  const char* sql = kUpdateJob;
  if (job->created_at == created_at && job->delete_at == delete_at) {
    sql = job->state == state ? kUpdateJobFields : kUpdateJobState;
  }
  BATON_SQL_ASSIGN(s, c.Prepare(sql));
  BindJob(s, *job, text);
  return s.Run();
}

// The read-modify-write of UpdateJobState (and, `with_context`, of the job's part of
// UpdateTaskAndJobState), on a connection inside a write transaction.
Status UpdateJobStateRow(Connection& c, std::string_view id,
                         const std::function<Status(JobRecord&)>& modify, bool with_context) {
  JobRecord job;
  {
    BATON_SQL_ASSIGN(s, c.Prepare(with_context ? kSelectJobStateAndContext : kSelectJobState));
    s.BindText(1, id);
    BATON_SQL_ASSIGN(row, s.Step());
    if (!row) return NotFound(fmt::format("job {} not found", id));
    job.id = std::string(s.Text(0));
    job.parent_id = std::string(s.Text(1));
    std::optional<JobState> state = ParseJobState(s.Text(2));
    if (!state) return Corrupt("jobs", job.id, fmt::format("unknown state '{}'", s.Text(2)));
    job.state = *state;
    job.created_at = s.Time(3);
    job.started_at = s.OptTime(4);
    job.completed_at = s.OptTime(5);
    job.failed_at = s.OptTime(6);
    job.delete_at = s.OptTime(7);
    job.position = s.Int32(8);
    job.task_count = s.Int32(9);
    job.progress = s.Real(10);
    job.result = std::string(s.Text(11));
    job.error = std::string(s.Text(12));
    if (with_context) {
      job.context = json::parse(s.Text(13), nullptr, /*allow_exceptions=*/false);
      if (job.context.is_discarded()) return Corrupt("jobs", job.id, "context is not JSON");
    }
  }
  BATON_RETURN_IF_ERROR(CallModifier(modify, job));
  std::string context;
  if (with_context) {
    BATON_SQL_ASSIGN(text, Dump(job.context, "job context"));
    context = std::move(text);
  }
  BATON_SQL_ASSIGN(s, c.Prepare(with_context ? kUpdateJobStateAndContext : kUpdateJobStateOnly));
  s.BindText(1, id);
  s.BindText(2, ToString(job.state));
  s.BindTime(3, job.started_at);
  s.BindTime(4, job.completed_at);
  s.BindTime(5, job.failed_at);
  s.BindTime(6, job.delete_at);
  s.BindInt(7, job.position);
  s.BindReal(8, job.progress);
  s.BindText(9, job.result);
  s.BindText(10, job.error);
  if (with_context) s.BindText(11, context);
  return s.Run();
}

// The read-modify-write of UpdateTask, on a connection inside a write transaction.
Status UpdateTaskRow(Connection& c, DefinitionCaches* caches, std::string_view id,
                     const std::function<Status(TaskRecord&)>& modify) {
  std::optional<TaskRecord> task;
  std::string definition;
  std::shared_ptr<const Task> before;
  {
    BATON_SQL_ASSIGN(s, c.Prepare(kSelectTask));
    s.BindText(1, id);
    BATON_SQL_ASSIGN(row, s.Step());
    if (!row) return NotFound(fmt::format("task {} not found", id));
    BATON_SQL_ASSIGN(decoded, TaskFromRow(s, caches, &before));
    task = std::move(decoded);
    definition = std::string(s.Text(10));
  }
  const std::string job_id = task->job_id;
  const std::string parent_id = task->parent_id;
  const int position = task->position;
  const TimePoint created_at = task->created_at;
  const TaskState state = task->state;
  BATON_RETURN_IF_ERROR(CallModifier(modify, *task));
  task->id = std::string(id);  // the key is not the modifier's to change
  if (!(task->task == *before)) {
    BATON_SQL_ASSIGN(encoded, EncodeTask(task->task));
    definition = std::move(encoded);
  }
  const char* sql = kUpdateTask;
  if (task->job_id == job_id && task->parent_id == parent_id && task->position == position &&
      task->created_at == created_at) {
    sql = task->state == state ? kUpdateTaskFields : kUpdateTaskState;
  }
  BATON_SQL_ASSIGN(s, c.Prepare(sql));
  BindTask(s, *task, definition);
  return s.Run();
}

}  // namespace

// ---- Lifecycle ----------------------------------------------------------------------

Result<std::unique_ptr<SqliteDatastore>> SqliteDatastore::Open(SqliteOptions options) {
  return NoThrow([&]() -> Result<std::unique_ptr<SqliteDatastore>> {
    if (options.path.empty()) return InvalidArgument("sqlite: no database path");
    options.max_batch = std::max(options.max_batch, 1);
    if (options.path != ":memory:") {
      std::filesystem::path parent = std::filesystem::path(options.path).parent_path();
      std::error_code ec;
      if (!parent.empty()) std::filesystem::create_directories(parent, ec);
      if (ec) {
        return Unavailable(fmt::format("sqlite: creating {}: {}", parent.string(), ec.message()));
      }
    }
    BATON_SQL_ASSIGN(writer, Connection::Open(options, /*reader=*/false));
    bool auto_migrate = options.auto_migrate;
    std::unique_ptr<SqliteDatastore> store(
        new SqliteDatastore(std::move(options), std::move(writer)));
    if (auto_migrate) {
      BATON_RETURN_IF_ERROR(store->Migrate());
    } else {
      BATON_SQL_ASSIGN(version, store->SchemaVersion());
      BATON_RETURN_IF_ERROR(CheckNotNewer(version));
    }
    return store;
  });
}

SqliteDatastore::SqliteDatastore(SqliteOptions options, std::unique_ptr<Connection> writer)
    : options_(std::move(options)),
      in_memory_(options_.path == ":memory:"),
      writer_(std::move(writer)),
      caches_(std::make_unique<sqlite_internal::DefinitionCaches>()) {}

SqliteDatastore::~SqliteDatastore() {
  {
    // Refuse new calls, and let the ones queued finish.
    std::unique_lock lock(queue_mu_);
    closing_ = true;
    drained_cv_.wait(lock, [&] { return queue_.empty(); });
  }
  idle_readers_.clear();
  writer_.reset();
}

SqliteStats SqliteDatastore::Stats() const {
  return {writes_.load(std::memory_order_relaxed), commits_.load(std::memory_order_relaxed)};
}

// ---- Group commit -------------------------------------------------------------------

namespace {
// Set while this thread runs the writes of a batch: a modifier calling back into the
// datastore would wait for itself.
thread_local bool in_write_batch = false;
}  // namespace

Status SqliteDatastore::Write(const Op& op) { return Enqueue(op, /*solo=*/false); }
Status SqliteDatastore::Solo(const Op& op) { return Enqueue(op, /*solo=*/true); }

Status SqliteDatastore::Enqueue(const Op& op, bool solo) {
  if (in_write_batch) {
    return FailedPrecondition("sqlite: the datastore was called from inside an update modifier");
  }
  PendingOp pending;
  pending.op = &op;
  pending.solo = solo;
  std::unique_lock lock(queue_mu_);
  if (closing_) return Unavailable("sqlite: the datastore is closing");
  queue_.push_back(&pending);
  // The caller at the front of the queue leads: it runs everything queued behind it as
  // one transaction on its own thread, commits, and only then wakes the others. An
  // uncontended write therefore costs no thread hand-off; concurrent ones still share a
  // commit.
  while (!pending.done && queue_.front() != &pending) pending.cv.wait(lock);
  if (pending.done) return std::move(pending.status);

  std::vector<PendingOp*> batch;
  if (solo) {
    batch.push_back(&pending);
  } else {
    // Everything queued up to the next solo op commits together.
    for (PendingOp* next : queue_) {
      if (next->solo || static_cast<int>(batch.size()) >= options_.max_batch) break;
      batch.push_back(next);
    }
  }
  lock.unlock();
  in_write_batch = true;
  if (solo) {
    pending.status = NoThrow([&] { return op(*writer_); });
  } else {
    RunBatch(batch);
  }
  in_write_batch = false;
  lock.lock();
  for (PendingOp* done : batch) {
    queue_.pop_front();  // the batch is the front of the queue, in order
    done->done = true;
    if (done != &pending) done->cv.notify_one();
  }
  if (!queue_.empty()) {
    queue_.front()->cv.notify_one();  // the next leader
  } else if (closing_) {
    drained_cv_.notify_all();
  }
  return std::move(pending.status);
}

void SqliteDatastore::Complete(PendingOp* pending, Status status) {
  // Only the status: the leader marks the op done (under queue_mu_) once the whole
  // batch is committed or rolled back.
  pending->status = std::move(status);
}

void SqliteDatastore::RunBatch(const std::vector<PendingOp*>& batch) {
  Connection& c = *writer_;
  const std::size_t n = batch.size();
  writes_.fetch_add(static_cast<std::int64_t>(n), std::memory_order_relaxed);
  std::vector<Status> results(n);

  // Fails every write of the batch: the transaction is gone.
  auto abort_all = [&](const Status& cause) {
    if (!c.InAutocommit()) (void)c.Exec(kRollback);
    for (std::size_t i = 0; i < n; ++i) {
      Complete(batch[i], results[i].ok() ? cause : results[i]);
    }
  };

  if (Status begin = c.Exec(kBeginImmediate); !begin.ok()) {
    abort_all(begin);
    return;
  }
  // A single write needs no savepoint: its failure rolls back the whole transaction.
  const bool savepoints = n > 1;
  bool any_ok = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (savepoints) {
      if (Status s = c.Exec(kSavepoint); !s.ok()) return abort_all(s);
    }
    results[i] = NoThrow([&] { return (*batch[i]->op)(c); });
    if (c.InAutocommit()) {
      // SQLite rolled the transaction back by itself (I/O error, disk full, ...), taking
      // the earlier writes of the batch with it.
      Status cause = results[i].ok() ? Internal("sqlite: transaction rolled back") : results[i];
      for (std::size_t j = 0; j < i; ++j) results[j] = Status::Ok();
      return abort_all(Unavailable("sqlite: batch rolled back: " + cause.message()));
    }
    if (savepoints) {
      if (!results[i].ok()) {
        if (Status s = c.Exec(kRollbackTo); !s.ok()) return abort_all(s);
      }
      if (Status s = c.Exec(kRelease); !s.ok()) return abort_all(s);
    }
    any_ok = any_ok || results[i].ok();
  }
  if (!any_ok) {
    (void)c.Exec(kRollback);
  } else if (Status commit = c.Exec(kCommit); !commit.ok()) {
    return abort_all(commit);
  } else {
    commits_.fetch_add(1, std::memory_order_relaxed);
  }
  for (std::size_t i = 0; i < n; ++i) Complete(batch[i], std::move(results[i]));
}

// ---- Reads --------------------------------------------------------------------------

Result<std::unique_ptr<Connection>> SqliteDatastore::AcquireReader() {
  {
    std::lock_guard lock(readers_mu_);
    if (!idle_readers_.empty()) {
      std::unique_ptr<Connection> reader = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return reader;
    }
  }
  return Connection::Open(options_, /*reader=*/true);
}

void SqliteDatastore::ReleaseReader(std::unique_ptr<Connection> reader) {
  std::lock_guard lock(readers_mu_);
  if (static_cast<int>(idle_readers_.size()) < kMaxIdleReaders) {
    idle_readers_.push_back(std::move(reader));
    return;
  }
  // Too many idle: `reader` closes when it goes out of scope (after the lock, harmlessly).
}

Status SqliteDatastore::Read(const Op& op) {
  // A private in-memory database has one connection: the write connection.
  if (in_memory_) return Solo(op);
  BATON_SQL_ASSIGN(reader, AcquireReader());
  // One read transaction, so a count and its page see the same snapshot.
  Status status = reader->Exec(kBegin);
  if (status.ok()) status = NoThrow([&] { return op(*reader); });
  if (!reader->InAutocommit()) {
    if (Status end = reader->Exec(kCommit); !end.ok()) (void)reader->Exec(kRollback);
  }
  ReleaseReader(std::move(reader));
  return status;
}

// ---- Migrations ---------------------------------------------------------------------

Status SqliteDatastore::Migrate() {
  return Solo([](Connection& c) -> Status {
    BATON_SQL_ASSIGN(before, ReadSchemaVersion(c));
    BATON_RETURN_IF_ERROR(CheckNotNewer(before));
    if (before == LatestSqliteSchemaVersion()) return Status::Ok();
    BATON_RETURN_IF_ERROR(c.ExecScript(kCreateMigrationsTable));
    for (const SqliteMigration& migration : SqliteMigrations()) {
      if (migration.version <= before) continue;
      BATON_RETURN_IF_ERROR(c.Exec(kBeginImmediate));
      // Re-read inside the transaction: another process may have migrated meanwhile.
      Result<int> current = ReadSchemaVersion(c);
      Status status = current.ok() ? Status::Ok() : current.status();
      bool apply = status.ok() && *current < migration.version;
      if (apply) {
        std::string sql(migration.sql);
        status = c.ExecScript(sql.c_str());
        if (status.ok()) {
          Result<Stmt> record = c.Prepare(kRecordMigration);
          status = record.ok() ? Status::Ok() : record.status();
          if (status.ok()) {
            record->BindInt(1, migration.version);
            record->BindText(2, migration.name);
            record->BindText(3, FormatTime(Now()));
            status = record->Run();
          }
        }
      }
      if (status.ok()) status = c.Exec(kCommit);
      if (!status.ok()) {
        if (!c.InAutocommit()) (void)c.Exec(kRollback);
        return Internal(fmt::format("sqlite: migration {} ({}) failed: {}", migration.version,
                                    migration.name, status.message()));
      }
      if (apply) {
        std::string version = std::to_string(migration.version);
        log::Info("Applied schema migration", {{"version", version}, {"name", migration.name}});
      }
    }
    return Status::Ok();
  });
}

Result<int> SqliteDatastore::SchemaVersion() {
  std::optional<int> version;
  Status status = Solo([&](Connection& c) -> Status {
    BATON_SQL_ASSIGN(v, ReadSchemaVersion(c));
    version = v;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return *version;
}

Result<int> SqliteDatastore::Synchronous() {
  std::string level;
  Status status = Solo([&](Connection& c) -> Status {
    BATON_SQL_ASSIGN(v, c.PragmaText("PRAGMA synchronous"));
    level = v;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return std::atoi(level.c_str());
}

// ---- Jobs ---------------------------------------------------------------------------

Status SqliteDatastore::CreateJob(const JobRecord& job) {
  return NoThrow([&]() -> Status {
    // Encoded here, before queueing: the writes queued behind this one wait for it.
    BATON_SQL_ASSIGN(text, EncodeJobText(job, std::nullopt));
    BATON_RETURN_IF_ERROR(CheckStoredJobSize(
        text.definition.size() + text.tags.size() + text.context.size(), options_.max_job_bytes));
    BATON_RETURN_IF_ERROR(Write([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kInsertJob));
      BindJob(s, job, text);
      Status status = s.Run();
      if (status.code() == StatusCode::kAlreadyExists) {
        return AlreadyExists(fmt::format("job {} already exists", job.id));
      }
      return status;
    }));
    RememberDefinition(job, text.definition);
    return Status::Ok();
  });
}

Status SqliteDatastore::CreateJobWithTasks(const JobRecord& job,
                                           const std::vector<TaskRecord>& tasks) {
  return NoThrow([&]() -> Status {
    // Encoded here, before queueing: the writes queued behind this one wait for it.
    BATON_SQL_ASSIGN(text, EncodeJobText(job, std::nullopt));
    BATON_RETURN_IF_ERROR(CheckStoredJobSize(
        text.definition.size() + text.tags.size() + text.context.size(), options_.max_job_bytes));
    std::vector<std::string> definitions;
    definitions.reserve(tasks.size());
    for (const TaskRecord& task : tasks) {
      if (task.job_id != job.id) {
        return InvalidArgument(
            fmt::format("task {} belongs to job {}, not {}", task.id, task.job_id, job.id));
      }
      BATON_SQL_ASSIGN(definition, EncodeTask(task.task));
      definitions.push_back(std::move(definition));
    }
    // One write: the job and its rows, or (its savepoint rolled back) none of them.
    BATON_RETURN_IF_ERROR(Write([&](Connection& c) -> Status {
      {
        BATON_SQL_ASSIGN(s, c.Prepare(kInsertJob));
        BindJob(s, job, text);
        Status status = s.Run();
        if (status.code() == StatusCode::kAlreadyExists) {
          return AlreadyExists(fmt::format("job {} already exists", job.id));
        }
        BATON_RETURN_IF_ERROR(status);
      }
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        BATON_RETURN_IF_ERROR(InsertTask(c, tasks[i], definitions[i]));
      }
      return Status::Ok();
    }));
    RememberDefinition(job, text.definition);
    return Status::Ok();
  });
}

void SqliteDatastore::RememberDefinition(const JobRecord& job, std::string_view definition) {
  // The first read of a big job (its start, a cancel, the API) would decode the whole
  // definition again — seconds for a 100,000-input job: the cache starts with the one
  // just stored (the decode of its text gives it back: the round-trip contract).
  if (definition.size() < sqlite_internal::DefinitionCache<Job>::kMinBytes) return;
  caches_->jobs.Put(job.id, definition, std::make_shared<const Job>(job.job));
}

Result<JobRecord> SqliteDatastore::GetJob(std::string_view id) {
  return NoThrow([&]() -> Result<JobRecord> {
    std::optional<JobRecord> out;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kSelectJob));
      s.BindText(1, id);
      BATON_SQL_ASSIGN(row, s.Step());
      if (!row) return NotFound(fmt::format("job {} not found", id));
      BATON_SQL_ASSIGN(job, JobFromRow(s, caches_.get()));
      out = std::move(job);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

Status SqliteDatastore::UpdateJob(std::string_view id,
                                  const std::function<Status(JobRecord&)>& modify) {
  return NoThrow([&]() -> Status {
    return Write([&](Connection& c) { return UpdateJobRow(c, caches_.get(), id, modify); });
  });
}

Status SqliteDatastore::UpdateJobState(std::string_view id,
                                       const std::function<Status(JobRecord&)>& modify) {
  return NoThrow([&]() -> Status {
    return Write([&](Connection& c) { return UpdateJobStateRow(c, id, modify, false); });
  });
}

Result<Page<JobRecord>> SqliteDatastore::ListJobs(const JobQuery& query) {
  return NoThrow([&]() -> Result<Page<JobRecord>> {
    BATON_RETURN_IF_ERROR(ValidateJobQuery(query));
    PageSpec spec = ClampPage(query.page, query.size);
    // Every word narrows the result: WHERE ... AND ... with numbered parameters. LIKE
    // ignores case for ASCII letters only.
    std::string where;
    std::vector<std::string> params;
    for (std::string_view word : SplitWords(query.q)) {
      where += where.empty() ? " WHERE " : " AND ";
      if (word.starts_with("tag:") && word.size() > 4) {
        params.emplace_back(word.substr(4));
        where +=
            fmt::format("EXISTS (SELECT 1 FROM json_each(jobs.tags) WHERE json_each.value = ?{})",
                        params.size());
      } else {
        params.push_back(ContainsPattern(word));
        params.push_back(AsciiUpper(word));
        // The state first: a word that names one (the UI's filters) then settles most
        // rows without the two LIKEs (half the CPU of counting a large table).
        where += fmt::format(
            "(jobs.state = ?{1} OR jobs.name LIKE ?{0} ESCAPE '\\' "
            "OR jobs.description LIKE ?{0} ESCAPE '\\')",
            params.size() - 1, params.size());
      }
    }
    std::string count_sql = "SELECT count(*) FROM jobs" + where;
    std::string list_sql =
        fmt::format("SELECT " BATON_JOB_COLUMNS
                    " FROM jobs{} ORDER BY created_at DESC, id DESC LIMIT ?{} OFFSET ?{}",
                    where, params.size() + 1, params.size() + 2);
    std::optional<Page<JobRecord>> out;
    Status read = Read([&](Connection& c) -> Status {
      std::int64_t total = 0;
      {
        BATON_SQL_ASSIGN(s, c.PrepareOnce(count_sql));
        for (std::size_t i = 0; i < params.size(); ++i) {
          s.BindText(static_cast<int>(i + 1), params[i]);
        }
        BATON_SQL_ASSIGN(count, CountRows(s));
        total = count;
      }
      BATON_SQL_ASSIGN(s, c.PrepareOnce(list_sql));
      for (std::size_t i = 0; i < params.size(); ++i) {
        s.BindText(static_cast<int>(i + 1), params[i]);
      }
      s.BindInt(static_cast<int>(params.size() + 1), spec.size);
      s.BindInt(static_cast<int>(params.size() + 2), spec.offset);
      std::vector<JobRecord> items;
      BATON_RETURN_IF_ERROR(CollectRows<JobRecord>(
          s, [&](const Stmt& row) { return JobFromRow(row, caches_.get()); }, items));
      out = MakePage(spec, total, std::move(items));
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

Result<std::vector<JobRecord>> SqliteDatastore::JobsInState(const std::vector<JobState>& states) {
  return NoThrow([&]() -> Result<std::vector<JobRecord>> {
    std::vector<JobRecord> out;
    if (states.empty()) return out;
    std::string names = StatesJson(states);
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kJobsInState));
      s.BindText(1, names);
      return CollectRows<JobRecord>(
          s, [&](const Stmt& row) { return JobFromRow(row, caches_.get()); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Status SqliteDatastore::DeleteJob(std::string_view id) {
  return NoThrow([&]() -> Status {
    return Write([&](Connection& c) -> Status {
      {
        BATON_SQL_ASSIGN(s, c.Prepare(kJobExists));
        s.BindText(1, id);
        BATON_SQL_ASSIGN(row, s.Step());
        if (!row) return NotFound(fmt::format("job {} not found", id));
      }
      // Its sub-jobs go with it: they would be left where no link reaches them.
      std::vector<std::string> tree;
      {
        BATON_SQL_ASSIGN(s, c.Prepare(kJobTree));
        s.BindText(1, id);
        for (;;) {
          BATON_SQL_ASSIGN(row, s.Step());
          if (!row) break;
          tree.emplace_back(s.Text(0));
        }
      }
      // Children first, so the foreign keys' cascades find nothing left to do.
      for (const std::string& job_id : tree) {
        for (const char* sql : {kDeleteJobLogParts, kDeleteJobTasks, kDeleteJob}) {
          BATON_SQL_ASSIGN(s, c.Prepare(sql));
          s.BindText(1, job_id);
          BATON_RETURN_IF_ERROR(s.Run());
        }
      }
      return Status::Ok();
    });
  });
}

Result<std::vector<std::string>> SqliteDatastore::JobsDueForDeletion(TimePoint now, int limit) {
  return NoThrow([&]() -> Result<std::vector<std::string>> {
    std::vector<std::string> ids;
    if (limit <= 0) return ids;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kJobsDueForDeletion));
      s.BindTime(1, now);
      s.BindInt(2, limit);
      for (;;) {
        BATON_SQL_ASSIGN(row, s.Step());
        if (!row) return Status::Ok();
        ids.emplace_back(s.Text(0));
      }
    });
    if (!read.ok()) return read;
    return ids;
  });
}

// ---- Tasks --------------------------------------------------------------------------

Status SqliteDatastore::CreateTask(const TaskRecord& task) {
  return NoThrow([&]() -> Status {
    BATON_SQL_ASSIGN(definition, EncodeTask(task.task));
    return Write([&](Connection& c) { return InsertTask(c, task, definition); });
  });
}

Status SqliteDatastore::CreateTasks(const std::vector<TaskRecord>& tasks) {
  return NoThrow([&]() -> Status {
    if (tasks.empty()) return Status::Ok();
    std::vector<std::string> definitions;
    definitions.reserve(tasks.size());
    for (const TaskRecord& task : tasks) {
      BATON_SQL_ASSIGN(definition, EncodeTask(task.task));
      definitions.push_back(std::move(definition));
    }
    // One write: all rows or (its savepoint rolled back) none.
    return Write([&](Connection& c) -> Status {
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        BATON_RETURN_IF_ERROR(InsertTask(c, tasks[i], definitions[i]));
      }
      return Status::Ok();
    });
  });
}

Result<TaskRecord> SqliteDatastore::GetTask(std::string_view id) {
  return NoThrow([&]() -> Result<TaskRecord> {
    std::optional<TaskRecord> out;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kSelectTask));
      s.BindText(1, id);
      BATON_SQL_ASSIGN(row, s.Step());
      if (!row) return NotFound(fmt::format("task {} not found", id));
      BATON_SQL_ASSIGN(task, TaskFromRow(s, caches_.get()));
      out = std::move(task);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

Status SqliteDatastore::UpdateTask(std::string_view id,
                                   const std::function<Status(TaskRecord&)>& modify) {
  return NoThrow([&]() -> Status {
    return Write([&](Connection& c) { return UpdateTaskRow(c, caches_.get(), id, modify); });
  });
}

Status SqliteDatastore::UpdateTaskAndJob(
    std::string_view task_id,
    const std::function<Status(TaskRecord&, bool& update_job)>& modify_task,
    const std::function<Status(JobRecord&)>& modify_job) {
  return NoThrow([&]() -> Status {
    // One write: the batch's savepoint (or, alone, its transaction) takes both rows back
    // when the second fails.
    return Write([&](Connection& c) -> Status {
      bool update_job = false;
      std::string job_id;
      BATON_RETURN_IF_ERROR(
          UpdateTaskRow(c, caches_.get(), task_id, [&](TaskRecord& task) -> Status {
            job_id = task.job_id;
            return modify_task(task, update_job);
          }));
      if (!update_job) return Status::Ok();
      return UpdateJobRow(c, caches_.get(), job_id, modify_job);
    });
  });
}

Status SqliteDatastore::UpdateTaskAndJobState(
    std::string_view task_id,
    const std::function<Status(TaskRecord&, bool& update_job)>& modify_task,
    const std::function<Status(JobRecord&)>& modify_job) {
  return NoThrow([&]() -> Status {
    // One write, as UpdateTaskAndJob.
    return Write([&](Connection& c) -> Status {
      bool update_job = false;
      std::string job_id;
      BATON_RETURN_IF_ERROR(
          UpdateTaskRow(c, caches_.get(), task_id, [&](TaskRecord& task) -> Status {
            job_id = task.job_id;
            return modify_task(task, update_job);
          }));
      if (!update_job) return Status::Ok();
      return UpdateJobStateRow(c, job_id, modify_job, /*with_context=*/true);
    });
  });
}

Result<std::optional<int>> SqliteDatastore::AddCompletion(std::string_view id) {
  return NoThrow([&]() -> Result<std::optional<int>> {
    std::optional<int> count;
    Status write = Write([&](Connection& c) -> Status {
      {
        BATON_SQL_ASSIGN(s, c.Prepare(kAddCompletion));
        s.BindText(1, id);
        s.BindText(2, ToString(TaskState::kRunning));
        BATON_SQL_ASSIGN(row, s.Step());
        if (row) {
          count = s.Int32(0);
          return s.Run();  // to the end of the statement, which is then complete
        }
      }
      // Not counted: an unknown row, or one that is not running.
      BATON_SQL_ASSIGN(s, c.Prepare(kTaskExists));
      s.BindText(1, id);
      BATON_SQL_ASSIGN(exists, s.Step());
      if (!exists) return NotFound(fmt::format("task {} not found", id));
      return Status::Ok();
    });
    if (!write.ok()) return write;
    return count;
  });
}

Result<std::vector<TaskRecord>> SqliteDatastore::JobTasks(std::string_view job_id) {
  return NoThrow([&]() -> Result<std::vector<TaskRecord>> {
    std::vector<TaskRecord> out;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kJobTasks));
      s.BindText(1, job_id);
      return CollectRows<TaskRecord>(
          s, [&](const Stmt& row) { return TaskFromRow(row, caches_.get()); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<std::vector<TaskRecord>> SqliteDatastore::ChildTasks(std::string_view parent_id) {
  return NoThrow([&]() -> Result<std::vector<TaskRecord>> {
    std::vector<TaskRecord> out;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kChildTasks));
      s.BindText(1, parent_id);
      return CollectRows<TaskRecord>(
          s, [&](const Stmt& row) { return TaskFromRow(row, caches_.get()); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<std::vector<TaskRecord>> SqliteDatastore::TasksInState(
    const std::vector<TaskState>& states) {
  return NoThrow([&]() -> Result<std::vector<TaskRecord>> {
    std::vector<TaskRecord> out;
    if (states.empty()) return out;
    std::string names = StatesJson(states);
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kTasksInState));
      s.BindText(1, names);
      return CollectRows<TaskRecord>(
          s, [&](const Stmt& row) { return TaskFromRow(row, caches_.get()); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Status SqliteDatastore::MarkScheduled(const std::vector<std::string>& ids, TimePoint at) {
  return NoThrow([&]() -> Status {
    if (ids.empty()) return Status::Ok();
    return Write([&](Connection& c) -> Status {
      for (const std::string& id : ids) {
        BATON_SQL_ASSIGN(s, c.Prepare(kMarkScheduled));
        s.BindText(1, id);
        s.BindText(2, ToString(TaskState::kScheduled));
        s.BindTime(3, at);
        s.BindText(4, ToString(TaskState::kPending));
        s.BindText(5, ToString(TaskState::kCreated));
        BATON_RETURN_IF_ERROR(s.Run());
      }
      return Status::Ok();
    });
  });
}

Result<std::vector<CancelledTask>> SqliteDatastore::CancelTasks(std::string_view job_id,
                                                                std::string_view under,
                                                                TimePoint at) {
  return NoThrow([&]() -> Result<std::vector<CancelledTask>> {
    std::vector<CancelledTask> out;
    Status write = Write([&](Connection& c) -> Status {
      out.clear();  // a batch rolled back and retried would have filled it
      {
        BATON_SQL_ASSIGN(s, c.Prepare(under.empty() ? kActiveJobTasks : kActiveTasksUnder));
        s.BindText(1, job_id);
        if (!under.empty()) s.BindText(2, under);
        for (;;) {
          BATON_SQL_ASSIGN(row, s.Step());
          if (!row) break;
          CancelledTask t;
          t.id = std::string(s.Text(0));
          std::optional<TaskState> was = ParseTaskState(s.Text(1));
          if (!was) return Corrupt("tasks", t.id, fmt::format("unknown state '{}'", s.Text(1)));
          t.was = *was;
          t.node_id = std::string(s.Text(2));
          t.subjob_id = std::string(s.Text(3));
          out.push_back(std::move(t));
        }
      }
      for (const CancelledTask& t : out) {
        BATON_SQL_ASSIGN(s, c.Prepare(kCancelTask));
        s.BindText(1, t.id);
        s.BindTime(2, at);
        BATON_RETURN_IF_ERROR(s.Run());
      }
      return Status::Ok();
    });
    if (!write.ok()) return write;
    return out;
  });
}

// ---- Log parts ----------------------------------------------------------------------

Status SqliteDatastore::CreateLogPart(const LogPart& part) {
  return NoThrow([&]() -> Status {
    return Write([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kInsertLogPart));
      s.BindText(1, part.id);
      s.BindText(2, part.task_id);
      s.BindText(3, part.job_id);
      s.BindInt(4, part.number);
      s.BindText(5, part.contents);
      s.BindTime(6, part.created_at);
      Status status = s.Run();
      if (status.code() == StatusCode::kAlreadyExists) {
        return AlreadyExists(fmt::format("log part {} already exists", part.id));
      }
      if (status.code() == StatusCode::kFailedPrecondition) {
        return FailedPrecondition(
            fmt::format("log part {}: task {} does not exist", part.id, part.task_id));
      }
      return status;
    });
  });
}

namespace {

Result<Page<LogPart>> LogPage(Connection& c, const char* count_sql, const char* list_sql,
                              std::string_view key, const PageSpec& spec) {
  std::int64_t total = 0;
  {
    BATON_SQL_ASSIGN(s, c.Prepare(count_sql));
    s.BindText(1, key);
    BATON_SQL_ASSIGN(count, CountRows(s));
    total = count;
  }
  BATON_SQL_ASSIGN(s, c.Prepare(list_sql));
  s.BindText(1, key);
  s.BindInt(2, spec.size);
  s.BindInt(3, spec.offset);
  std::vector<LogPart> items;
  for (;;) {
    BATON_SQL_ASSIGN(row, s.Step());
    if (!row) break;
    items.push_back(LogPartFromRow(s));
  }
  return MakePage(spec, total, std::move(items));
}

}  // namespace

Result<Page<LogPart>> SqliteDatastore::TaskLogParts(std::string_view task_id, int page, int size) {
  return NoThrow([&]() -> Result<Page<LogPart>> {
    std::optional<Page<LogPart>> out;
    PageSpec spec = ClampPage(page, size);
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(p, LogPage(c, kCountTaskLogParts, kTaskLogParts, task_id, spec));
      out = std::move(p);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

Result<Page<LogPart>> SqliteDatastore::JobLogParts(std::string_view job_id, int page, int size) {
  return NoThrow([&]() -> Result<Page<LogPart>> {
    std::optional<Page<LogPart>> out;
    PageSpec spec = ClampPage(page, size);
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(p, LogPage(c, kCountJobLogParts, kJobLogParts, job_id, spec));
      out = std::move(p);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

// ---- Nodes --------------------------------------------------------------------------

Status SqliteDatastore::UpsertNode(const NodeRecord& node) {
  return NoThrow([&]() -> Status {
    return Write([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kUpsertNode));
      s.BindText(1, node.id);
      s.BindText(2, node.name);
      s.BindText(3, node.hostname);
      s.BindText(4, node.version);
      s.BindText(5, node.queue);
      s.BindTime(6, node.started_at);
      s.BindTime(7, node.last_heartbeat_at);
      s.BindReal(8, node.cpu_percent);
      s.BindInt(9, node.task_count);
      s.BindText(10, ToString(node.status));
      return s.Run();
    });
  });
}

Result<std::vector<NodeRecord>> SqliteDatastore::ActiveNodes(TimePoint since) {
  return NoThrow([&]() -> Result<std::vector<NodeRecord>> {
    std::vector<NodeRecord> out;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kActiveNodes));
      s.BindTime(1, since);
      return CollectRows<NodeRecord>(s, NodeFromRow, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Status SqliteDatastore::Health() {
  return NoThrow([&]() -> Status {
    return Read([](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(kHealth));
      BATON_SQL_ASSIGN(row, s.Step());
      if (!row) return Internal("sqlite: health query returned no row");
      return Status::Ok();
    });
  });
}

}  // namespace baton

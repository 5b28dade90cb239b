#include "datastore/sqlite/sqlite_datastore.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <utility>

#include "base/log.h"
#include "datastore/adapter_util.h"
#include "datastore/sql/migrate.h"
#include "datastore/sql/rows.h"
#include "datastore/sql/search.h"
#include "datastore/sql/session.h"
#include "datastore/sql/statements.h"
#include "datastore/sql/transaction.h"
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

  // A shared statement (statements.h), cached like a constant.
  Result<Stmt> Prepare(const sql::Statement& stmt) { return Prepare(stmt.sql.c_str()); }
  // Rows the last statement changed.
  std::int64_t Changes() const { return sqlite3_changes64(db_); }

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

  // Frees the page cache's unused pages (all of them between transactions).
  void ReleaseMemory() { sqlite3_db_release_memory(db_); }

 private:
  explicit Connection(sqlite3* db) : db_(db) {}

  sqlite3* db_;
  std::unordered_map<const char*, sqlite3_stmt*> cache_;
};

// Binds a statement's parameters in order (rows.h's Sink).
class Binder final : public sql::ParamSink {
 public:
  explicit Binder(Stmt& s) : s_(s) {}
  void Text(std::string_view v) override { s_.BindText(i_++, v); }
  void Int(std::int64_t v) override { s_.BindInt(i_++, v); }
  void Real(double v) override { s_.BindReal(i_++, v); }
  void Time(TimePoint t) override { s_.BindTime(i_++, t); }
  void Time(const std::optional<TimePoint>& t) override { s_.BindTime(i_++, t); }

 private:
  Stmt& s_;
  int i_ = 1;
};

// A stepped statement's current row, for the shared code (rows.h's Row).
class StmtRow final : public sql::RowView {
 public:
  explicit StmtRow(const Stmt& s) : s_(s) {}
  std::string_view Text(int col) const override { return s_.Text(col); }
  std::int64_t Int(int col) const override { return s_.Int(col); }
  int Int32(int col) const override { return s_.Int32(col); }
  double Real(int col) const override { return s_.Real(col); }
  TimePoint Time(int col) const override { return s_.Time(col); }
  std::optional<TimePoint> OptTime(int col) const override { return s_.OptTime(col); }

 private:
  const Stmt& s_;
};

// The write connection inside the batch transaction, for Transact.
class ConnectionSession final : public sql::Session {
 public:
  explicit ConnectionSession(Connection& c) : c_(c) {}
  Result<std::int64_t> Execute(const sql::Statement& stmt, const sql::Bind& bind) override {
    Result<Stmt> s = c_.Prepare(stmt);
    if (!s.ok()) return s.status();
    Binder binder(*s);
    bind(binder);
    BATON_RETURN_IF_ERROR(s->Run());
    return c_.Changes();
  }
  Status Query(const sql::Statement& stmt, const sql::Bind& bind,
               const sql::EachRow& each) override {
    Result<Stmt> s = c_.Prepare(stmt);
    if (!s.ok()) return s.status();
    Binder binder(*s);
    bind(binder);
    StmtRow row(*s);
    for (;;) {
      Result<bool> more = s->Step();
      if (!more.ok()) return more.status();
      if (!*more) return Status::Ok();
      BATON_RETURN_IF_ERROR(each(row));
    }
  }

 private:
  Connection& c_;
};

}  // namespace sqlite_internal

using sqlite_internal::Binder;
using sqlite_internal::Connection;
using sqlite_internal::Stmt;

// Unwraps a Result into `lhs` or returns its error from the enclosing function.
#define BATON_SQL_ASSIGN(lhs, expr)                     \
  auto lhs##_result = (expr);                           \
  if (!lhs##_result.ok()) return lhs##_result.status(); \
  auto lhs = std::move(*lhs##_result)

namespace {

using datastore_util::CallModifier;
using datastore_util::ClampPage;
using datastore_util::MakePage;
using datastore_util::NoThrow;
using datastore_util::PageSpec;
using sql::Corrupt;
using sql::DefinitionCaches;
using sql::EncodeJobText;
using sql::EncodeTask;
using sql::JobFromRow;
using sql::TaskFromRow;

constexpr int kMaxIdleReaders = 8;

const sql::Statements& S() {
  static const sql::Statements& statements = sql::StatementsFor(sql::Dialect::kSqlite);
  return statements;
}

// ---- SQL of SQLite's own ------------------------------------------------------------

// CancelTasks in two steps (SQLite's RETURNING cannot name the rows as they were): the
// active rows of a job, all of them or those below a row (through the tasks_parent
// index), with what cancelling them needs; then each one's update.
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

constexpr const char* kBeginImmediate = "BEGIN IMMEDIATE";
constexpr const char* kBegin = "BEGIN";
constexpr const char* kCommit = "COMMIT";
constexpr const char* kRollback = "ROLLBACK";
constexpr const char* kSavepoint = "SAVEPOINT w";
constexpr const char* kRelease = "RELEASE w";
constexpr const char* kRollbackTo = "ROLLBACK TO w";

constexpr const char* kCreateMigrationsTable =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "version INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '', applied_at TEXT NOT NULL)";
constexpr const char* kMigrationsTableExists =
    "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'";

// ---- Helpers ------------------------------------------------------------------------

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

template <typename State>
std::string StatesList(const std::vector<State>& states) {
  std::vector<std::string_view> names;
  for (State state : states) names.push_back(ToString(state));
  return sql::EncodeList(sql::Dialect::kSqlite, names);
}

Status InsertTask(Connection& c, const TaskRecord& task, std::string_view definition) {
  BATON_SQL_ASSIGN(s, c.Prepare(S().insert_task));
  Binder p(s);
  sql::BindTask(p, task, definition);
  return sql::TaskInsertError(s.Run(), task);
}

Status InsertJob(Connection& c, const JobRecord& job, const sql::JobText& text) {
  BATON_SQL_ASSIGN(s, c.Prepare(S().insert_job));
  Binder p(s);
  sql::BindJob(p, job, text);
  return sql::JobInsertError(s.Run(), job);
}

Result<int> ReadSchemaVersion(Connection& c) {
  BATON_SQL_ASSIGN(exists, c.Prepare(kMigrationsTableExists));
  BATON_SQL_ASSIGN(has_table, exists.Step());
  if (!has_table) return 0;
  BATON_SQL_ASSIGN(s, c.Prepare(S().max_schema_version));
  BATON_SQL_ASSIGN(count, CountRows(s));
  return static_cast<int>(count);
}

Status CheckNotNewer(int version) {
  return sql::CheckNotNewer(version, LatestSqliteSchemaVersion());
}

// The steps of sql::RunMigrations on the write connection.
class MigrationSteps final : public sql::MigrationSteps {
 public:
  explicit MigrationSteps(Connection& c) : c_(c) {}
  Result<int> SchemaVersion() override { return ReadSchemaVersion(c_); }
  // BEGIN IMMEDIATE takes the database's write lock: other processes wait their turn.
  Status Begin() override {
    BATON_RETURN_IF_ERROR(c_.Exec(kBeginImmediate));
    return c_.ExecScript(kCreateMigrationsTable);
  }
  Status Apply(std::string_view sql) override { return c_.ExecScript(std::string(sql).c_str()); }
  Status Record(const sql::Migration& migration) override {
    BATON_SQL_ASSIGN(s, c_.Prepare(S().record_migration));
    s.BindInt(1, migration.version);
    s.BindText(2, migration.name);
    s.BindText(3, FormatTime(Now()));
    return s.Run();
  }
  Status Commit() override { return c_.Exec(kCommit); }
  void Rollback() override {
    if (!c_.InAutocommit()) (void)c_.Exec(kRollback);
  }

 private:
  Connection& c_;
};

// The read-modify-write of UpdateJob, on a connection inside a write transaction.
Status UpdateJobRow(Connection& c, DefinitionCaches* caches, const crypto::Keyring* keyring,
                    std::string_view id, const std::function<Status(JobRecord&)>& modify) {
  std::optional<JobRecord> job;
  std::string definition;
  std::shared_ptr<const Job> before;
  {
    BATON_SQL_ASSIGN(s, c.Prepare(S().select_job));
    s.BindText(1, id);
    BATON_SQL_ASSIGN(row, s.Step());
    if (!row) return NotFound(fmt::format("job {} not found", id));
    BATON_SQL_ASSIGN(decoded, JobFromRow(s, caches, keyring, &before));
    job = std::move(decoded);
    definition = std::string(s.Text(sql::kJobDefinitionColumn));
  }
  const sql::JobKeys keys = sql::KeysOf(*job);
  BATON_RETURN_IF_ERROR(CallModifier(modify, *job));
  job->id = std::string(id);  // the key is not the modifier's to change
  // Most updates change state, not the definition: keep its stored text then.
  std::optional<std::string> same;
  if (job->job == *before) same = std::move(definition);
  BATON_SQL_ASSIGN(text, EncodeJobText(*job, std::move(same), keyring));
  BATON_SQL_ASSIGN(s, c.Prepare(sql::JobUpdate(S(), keys, *job)));
  Binder p(s);
  sql::BindJob(p, *job, text);
  BATON_RETURN_IF_ERROR(s.Run());
  // Forgotten before the commit: were it rolled back, the next read caches it again.
  if (caches != nullptr) caches->Written(*job);
  return Status::Ok();
}

// The read-modify-write of UpdateJobState, on a connection inside a write transaction.
Status UpdateJobStateRow(Connection& c, DefinitionCaches* caches, std::string_view id,
                         const std::function<Status(JobRecord&)>& modify) {
  JobRecord job;
  {
    BATON_SQL_ASSIGN(s, c.Prepare(S().select_job_state_for_update));
    s.BindText(1, id);
    BATON_SQL_ASSIGN(row, s.Step());
    if (!row) return NotFound(fmt::format("job {} not found", id));
    BATON_SQL_ASSIGN(read, sql::JobStateFromRow(s));
    job = std::move(read);
  }
  BATON_RETURN_IF_ERROR(CallModifier(modify, job));
  job.id = std::string(id);
  BATON_SQL_ASSIGN(s, c.Prepare(S().update_job_state_only));
  Binder p(s);
  sql::BindJobState(p, job);
  BATON_RETURN_IF_ERROR(s.Run());
  if (caches != nullptr) caches->Written(job);
  return Status::Ok();
}

// The read-modify-write of UpdateTask, on a connection inside a write transaction.
Status UpdateTaskRow(Connection& c, DefinitionCaches* caches, const crypto::Keyring* keyring,
                     std::string_view id, const std::function<Status(TaskRecord&)>& modify) {
  std::optional<TaskRecord> task;
  std::string definition;
  std::shared_ptr<const Task> before;
  {
    BATON_SQL_ASSIGN(s, c.Prepare(S().select_task));
    s.BindText(1, id);
    BATON_SQL_ASSIGN(row, s.Step());
    if (!row) return NotFound(fmt::format("task {} not found", id));
    BATON_SQL_ASSIGN(decoded, TaskFromRow(s, caches, keyring, &before));
    task = std::move(decoded);
    definition = std::string(s.Text(sql::kTaskDefinitionColumn));
  }
  const sql::TaskKeys keys = sql::KeysOf(*task);
  BATON_RETURN_IF_ERROR(CallModifier(modify, *task));
  task->id = std::string(id);  // the key is not the modifier's to change
  if (!(task->task == *before)) {
    BATON_SQL_ASSIGN(encoded, EncodeTask(task->task, keyring));
    definition = std::move(encoded);
  }
  BATON_SQL_ASSIGN(s, c.Prepare(sql::TaskUpdate(S(), keys, *task)));
  Binder p(s);
  sql::BindTask(p, *task, definition);
  BATON_RETURN_IF_ERROR(s.Run());
  if (caches != nullptr) caches->Written(*task);
  return Status::Ok();
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
      caches_(std::make_unique<sql::DefinitionCaches>()) {}

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
  return {writes_.load(std::memory_order_relaxed), commits_.load(std::memory_order_relaxed),
          caches_->jobs.size(), caches_->tasks.size()};
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

void SqliteDatastore::ReleaseMemory() {
  std::lock_guard lock(readers_mu_);
  for (const std::unique_ptr<Connection>& reader : idle_readers_) reader->ReleaseMemory();
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
    MigrationSteps steps(c);
    return sql::RunMigrations(steps, SqliteMigrations(), "sqlite");
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

// ---- Transactions -------------------------------------------------------------------

Status SqliteDatastore::Transact(const std::function<Status(Transaction&)>& body) {
  return NoThrow([&]() -> Status {
    // One write of the batch: its savepoint (or, alone, the transaction) is rolled back
    // when the scope fails, so nothing of it is stored.
    return Write([&](Connection& c) -> Status {
      sqlite_internal::ConnectionSession session(c);
      return sql::RunScope(session, S(), caches_.get(), keys(), options_.max_job_bytes, body);
    });
  });
}

template <typename T>
Result<T> SqliteDatastore::ReadScope(const std::function<Result<T>(Transaction&)>& read) {
  return NoThrow([&]() -> Result<T> {
    std::optional<T> out;
    Status status = Read([&](Connection& c) -> Status {
      sqlite_internal::ConnectionSession session(c);
      sql::SqlTransaction tx(session, S(), nullptr, keys(), options_.max_job_bytes);
      Result<T> r = read(tx);
      if (!r.ok()) return r.status();
      out = std::move(*r);
      return Status::Ok();
    });
    if (!status.ok()) return status;
    return std::move(*out);
  });
}

Result<UserRecord> SqliteDatastore::GetUser(std::string_view username) {
  return ReadScope<UserRecord>([&](Transaction& tx) { return tx.GetUser(username); });
}

Result<ApiKeyRecord> SqliteDatastore::GetApiKeyByHash(std::string_view key_hash) {
  return ReadScope<ApiKeyRecord>([&](Transaction& tx) { return tx.GetApiKeyByHash(key_hash); });
}

Result<std::vector<ApiKeyRecord>> SqliteDatastore::ApiKeys(std::string_view username) {
  return ReadScope<std::vector<ApiKeyRecord>>(
      [&](Transaction& tx) { return tx.ApiKeys(username); });
}

// ---- Jobs ---------------------------------------------------------------------------

Status SqliteDatastore::CreateJob(const JobRecord& job) {
  return NoThrow([&]() -> Status {
    // Encoded here, before queueing: the writes queued behind this one wait for it.
    BATON_SQL_ASSIGN(text, EncodeJobText(job, std::nullopt, keys()));
    BATON_RETURN_IF_ERROR(CheckStoredJobSize(text.bytes(), options_.max_job_bytes));
    BATON_RETURN_IF_ERROR(Write([&](Connection& c) { return InsertJob(c, job, text); }));
    RememberDefinition(job, text.definition);
    return Status::Ok();
  });
}

void SqliteDatastore::RememberDefinition(const JobRecord& job, std::string_view definition) {
  // The first read of a big job (its start, a cancel, the API) would decode the whole
  // definition again — seconds for a 100,000-input job: the cache starts with the one
  // just stored (the decode of its text gives it back: the round-trip contract).
  if (definition.size() < sql::DefinitionCache<Job>::kMinBytes) return;
  caches_->jobs.Put(job.id, definition, std::make_shared<const Job>(job.job));
}

Result<JobRecord> SqliteDatastore::GetJob(std::string_view id) {
  return NoThrow([&]() -> Result<JobRecord> {
    std::optional<JobRecord> out;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(S().select_job));
      s.BindText(1, id);
      BATON_SQL_ASSIGN(row, s.Step());
      if (!row) return NotFound(fmt::format("job {} not found", id));
      BATON_SQL_ASSIGN(job, JobFromRow(s, caches_.get(), keys()));
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
    return Write([&](Connection& c) { return UpdateJobRow(c, caches_.get(), keys(), id, modify); });
  });
}

Status SqliteDatastore::UpdateJobState(std::string_view id,
                                       const std::function<Status(JobRecord&)>& modify) {
  return NoThrow([&]() -> Status {
    return Write([&](Connection& c) { return UpdateJobStateRow(c, caches_.get(), id, modify); });
  });
}

Result<Page<JobRecord>> SqliteDatastore::ListJobs(const JobQuery& query) {
  return NoThrow([&]() -> Result<Page<JobRecord>> {
    BATON_RETURN_IF_ERROR(ValidateJobQuery(query));
    PageSpec spec = ClampPage(query.page, query.size);
    sql::JobSearch search = sql::BuildJobSearch(sql::Dialect::kSqlite, query);
    std::optional<Page<JobRecord>> out;
    Status read = Read([&](Connection& c) -> Status {
      std::int64_t total = 0;
      {
        BATON_SQL_ASSIGN(s, c.PrepareOnce(search.count_sql));
        Binder p(s);
        for (const std::string& param : search.params) p.Text(param);
        BATON_SQL_ASSIGN(count, CountRows(s));
        total = count;
      }
      BATON_SQL_ASSIGN(s, c.PrepareOnce(search.list_sql));
      Binder p(s);
      for (const std::string& param : search.params) p.Text(param);
      p.Int(spec.size);
      p.Int(spec.offset);
      std::vector<JobRecord> items;
      BATON_RETURN_IF_ERROR(CollectRows<JobRecord>(
          s, [&](const Stmt& row) { return JobFromRow(row, caches_.get(), keys()); }, items));
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
    std::string names = StatesList(states);
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(S().jobs_in_state));
      s.BindText(1, names);
      return CollectRows<JobRecord>(
          s, [&](const Stmt& row) { return JobFromRow(row, caches_.get(), keys()); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Status SqliteDatastore::DeleteJob(std::string_view id) {
  return NoThrow([&]() -> Status {
    return Write([&](Connection& c) -> Status {
      {
        BATON_SQL_ASSIGN(s, c.Prepare(S().job_exists));
        s.BindText(1, id);
        BATON_SQL_ASSIGN(row, s.Step());
        if (!row) return NotFound(fmt::format("job {} not found", id));
      }
      // Its sub-jobs go with it: they would be left where no link reaches them.
      std::vector<std::string> tree;
      {
        BATON_SQL_ASSIGN(s, c.Prepare(S().job_tree));
        s.BindText(1, id);
        for (;;) {
          BATON_SQL_ASSIGN(row, s.Step());
          if (!row) break;
          tree.emplace_back(s.Text(0));
        }
      }
      // Children first, so the foreign keys' cascades find nothing left to do.
      for (const std::string& job_id : tree) {
        for (const sql::Statement* stmt :
             {&S().delete_job_log_parts, &S().delete_job_webhook_deliveries, &S().delete_job_tasks,
              &S().delete_job}) {
          BATON_SQL_ASSIGN(s, c.Prepare(*stmt));
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
      BATON_SQL_ASSIGN(s, c.Prepare(S().jobs_due_for_deletion));
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
    BATON_SQL_ASSIGN(definition, EncodeTask(task.task, keys()));
    return Write([&](Connection& c) { return InsertTask(c, task, definition); });
  });
}

Status SqliteDatastore::CreateTasks(const std::vector<TaskRecord>& tasks) {
  return NoThrow([&]() -> Status {
    if (tasks.empty()) return Status::Ok();
    std::vector<std::string> definitions;
    definitions.reserve(tasks.size());
    for (const TaskRecord& task : tasks) {
      BATON_SQL_ASSIGN(definition, EncodeTask(task.task, keys()));
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
      BATON_SQL_ASSIGN(s, c.Prepare(S().select_task));
      s.BindText(1, id);
      BATON_SQL_ASSIGN(row, s.Step());
      if (!row) return NotFound(fmt::format("task {} not found", id));
      BATON_SQL_ASSIGN(task, TaskFromRow(s, caches_.get(), keys()));
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
    return Write(
        [&](Connection& c) { return UpdateTaskRow(c, caches_.get(), keys(), id, modify); });
  });
}

Result<std::vector<TaskRecord>> SqliteDatastore::TaskRows(const sql::Statement& stmt,
                                                          std::string_view key) {
  return NoThrow([&]() -> Result<std::vector<TaskRecord>> {
    std::vector<TaskRecord> out;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(stmt));
      s.BindText(1, key);
      return CollectRows<TaskRecord>(
          s, [&](const Stmt& row) { return TaskFromRow(row, caches_.get(), keys()); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<std::vector<TaskRecord>> SqliteDatastore::JobTasks(std::string_view job_id) {
  return TaskRows(S().job_tasks, job_id);
}

Result<std::vector<TaskRecord>> SqliteDatastore::ChildTasks(std::string_view parent_id) {
  return TaskRows(S().child_tasks, parent_id);
}

Result<std::vector<TaskRecord>> SqliteDatastore::TasksInState(
    const std::vector<TaskState>& states) {
  if (states.empty()) return std::vector<TaskRecord>();
  return TaskRows(S().tasks_in_state, StatesList(states));
}

Status SqliteDatastore::MarkScheduled(const std::vector<std::string>& ids, TimePoint at) {
  return NoThrow([&]() -> Status {
    if (ids.empty()) return Status::Ok();
    std::vector<std::string_view> list(ids.begin(), ids.end());
    std::string id_list = sql::EncodeList(sql::Dialect::kSqlite, list);
    std::string states =
        StatesList(std::vector<TaskState>{TaskState::kPending, TaskState::kCreated});
    // One statement: the rows of the list that are still waiting.
    return Write([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(S().mark_scheduled));
      s.BindText(1, id_list);
      s.BindText(2, ToString(TaskState::kScheduled));
      s.BindTime(3, at);
      s.BindText(4, states);
      return s.Run();
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
        BATON_RETURN_IF_ERROR(CollectRows<CancelledTask>(
            s, [](const Stmt& row) { return sql::CancelledFromRow(row); }, out));
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
      BATON_SQL_ASSIGN(s, c.Prepare(S().insert_log_part));
      Binder p(s);
      sql::BindLogPart(p, part);
      return sql::LogPartInsertError(s.Run(), part);
    });
  });
}

Result<Page<LogPart>> SqliteDatastore::LogPage(const sql::Statement& count_sql,
                                               const sql::Statement& list_sql, std::string_view key,
                                               int page, int size) {
  return NoThrow([&]() -> Result<Page<LogPart>> {
    std::optional<Page<LogPart>> out;
    PageSpec spec = ClampPage(page, size);
    Status read = Read([&](Connection& c) -> Status {
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
      BATON_RETURN_IF_ERROR(CollectRows<LogPart>(
          s, [](const Stmt& row) { return sql::LogPartFromRow(row); }, items));
      out = MakePage(spec, total, std::move(items));
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

Result<Page<LogPart>> SqliteDatastore::TaskLogParts(std::string_view task_id, int page, int size) {
  return LogPage(S().count_task_log_parts, S().task_log_parts, task_id, page, size);
}

Result<Page<LogPart>> SqliteDatastore::JobLogParts(std::string_view job_id, int page, int size) {
  return LogPage(S().count_job_log_parts, S().job_log_parts, job_id, page, size);
}

// ---- Nodes --------------------------------------------------------------------------

Status SqliteDatastore::UpsertNode(const NodeRecord& node) {
  return NoThrow([&]() -> Status {
    return Write([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(S().upsert_node));
      Binder p(s);
      sql::BindNode(p, node);
      return s.Run();
    });
  });
}

Result<std::vector<NodeRecord>> SqliteDatastore::ActiveNodes(TimePoint since) {
  return NoThrow([&]() -> Result<std::vector<NodeRecord>> {
    std::vector<NodeRecord> out;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(S().active_nodes));
      s.BindTime(1, since);
      return CollectRows<NodeRecord>(
          s, [](const Stmt& row) { return sql::NodeFromRow(row); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<StateCounts> SqliteDatastore::CountStates() {
  return NoThrow([&]() -> Result<StateCounts> {
    StateCounts out;
    Status read = Read([&](Connection& c) -> Status {
      {
        BATON_SQL_ASSIGN(s, c.Prepare(S().count_jobs_by_state));
        for (;;) {
          BATON_SQL_ASSIGN(row, s.Step());
          if (!row) break;
          std::optional<JobState> state = ParseJobState(s.Text(0));
          if (!state) return Internal(fmt::format("a job has an unknown state '{}'", s.Text(0)));
          out.jobs[*state] = s.Int(1);
        }
      }
      BATON_SQL_ASSIGN(s, c.Prepare(S().count_tasks_by_state));
      for (;;) {
        BATON_SQL_ASSIGN(row, s.Step());
        if (!row) break;
        std::optional<TaskState> state = ParseTaskState(s.Text(0));
        if (!state) return Internal(fmt::format("a task has an unknown state '{}'", s.Text(0)));
        out.tasks[*state] = s.Int(1);
      }
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<EndedCounts> SqliteDatastore::CountJobsEndedSince(TimePoint since) {
  return NoThrow([&]() -> Result<EndedCounts> {
    EndedCounts out;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(S().count_jobs_ended_since));
      s.BindTime(1, since);
      BATON_SQL_ASSIGN(row, s.Step());
      if (!row) return Internal("counting ended jobs returned no row");
      out.completed = s.Int(0);
      out.failed = s.Int(1);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<RunningCounts> SqliteDatastore::CountRunning() {
  return NoThrow([&]() -> Result<RunningCounts> {
    RunningCounts out;
    Status read = Read([&](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(S().count_running));
      BATON_SQL_ASSIGN(row, s.Step());
      if (!row) return Internal("counting running jobs returned no row");
      out.jobs = s.Int(0);
      out.tasks = s.Int(1);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return out;
  });
}

Status SqliteDatastore::Health() {
  return NoThrow([&]() -> Status {
    return Read([](Connection& c) -> Status {
      BATON_SQL_ASSIGN(s, c.Prepare(S().health));
      BATON_SQL_ASSIGN(row, s.Step());
      if (!row) return Internal("sqlite: health query returned no row");
      return Status::Ok();
    });
  });
}

}  // namespace baton

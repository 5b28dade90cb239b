#include "datastore/sqlite/sqlite_datastore.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <utility>

#include "datastore/adapter_util.h"
#include "datastore/sql/rows.h"
#include "datastore/sql/session.h"
#include "datastore/sql/statements.h"

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

// A connection inside the operation its backend runs (sql/session.h).
class ConnectionSession final : public sql::Session {
 public:
  explicit ConnectionSession(Connection& c) : c_(c) {}
  Result<std::int64_t> Execute(const sql::Statement& stmt, const sql::Bind& bind) override {
    BATON_ASSIGN_OR_RETURN(Stmt s, c_.Prepare(stmt));
    Binder binder(s);
    bind(binder);
    BATON_RETURN_IF_ERROR(s.Run());
    return c_.Changes();
  }
  Status Query(const sql::Statement& stmt, const sql::Bind& bind,
               const sql::EachRow& each) override {
    BATON_ASSIGN_OR_RETURN(Stmt s, c_.Prepare(stmt));
    return Rows(s, bind, each);
  }
  Status QueryOnce(const std::string& sql, const sql::Bind& bind,
                   const sql::EachRow& each) override {
    BATON_ASSIGN_OR_RETURN(Stmt s, c_.PrepareOnce(sql));
    return Rows(s, bind, each);
  }
  Status ExecScript(std::string_view sql) override {
    return c_.ExecScript(std::string(sql).c_str());
  }

 private:
  static Status Rows(Stmt& s, const sql::Bind& bind, const sql::EachRow& each) {
    Binder binder(s);
    bind(binder);
    StmtRow row(s);
    for (;;) {
      BATON_ASSIGN_OR_RETURN(bool more, s.Step());
      if (!more) return Status::Ok();
      BATON_RETURN_IF_ERROR(each(row));
    }
  }

  Connection& c_;
};

}  // namespace sqlite_internal

using sqlite_internal::Connection;

namespace {

using datastore_util::NoThrow;

constexpr int kMaxIdleReaders = 8;

constexpr const char* kBeginImmediate = "BEGIN IMMEDIATE";
constexpr const char* kBegin = "BEGIN";
constexpr const char* kCommit = "COMMIT";
constexpr const char* kRollback = "ROLLBACK";
constexpr const char* kSavepoint = "SAVEPOINT w";
constexpr const char* kRelease = "RELEASE w";
constexpr const char* kRollbackTo = "ROLLBACK TO w";

// Makes the database file readable and writable by its owner only, whatever the umask:
// creates it 0600 when missing (SQLite then gives its -wal and -shm files the database's
// mode), and tightens an existing database, -wal or -shm that is looser.
Status OwnerOnlyDatabaseFiles(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Unavailable(fmt::format("sqlite: creating {}: {}", path, std::strerror(errno)));
  }
  ::close(fd);
  for (const std::string& file : {path, path + "-wal", path + "-shm"}) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || (st.st_mode & 077) == 0) continue;
    if (::chmod(file.c_str(), st.st_mode & 0700) != 0) {
      return Unavailable(
          fmt::format("sqlite: {} is readable by others (mode {:o}) and cannot be "
                      "made owner-only: {}",
                      file, st.st_mode & 07777, std::strerror(errno)));
    }
  }
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
      BATON_RETURN_IF_ERROR(OwnerOnlyDatabaseFiles(options.path));
    }
    BATON_ASSIGN_OR_RETURN(std::unique_ptr<Connection> writer,
                           Connection::Open(options, /*reader=*/false));
    const bool auto_migrate = options.auto_migrate;
    std::unique_ptr<SqliteDatastore> store(
        new SqliteDatastore(std::move(options), std::move(writer)));
    BATON_RETURN_IF_ERROR(store->OpenSchema(auto_migrate));
    return store;
  });
}

SqliteDatastore::SqliteDatastore(SqliteOptions options, std::unique_ptr<Connection> writer)
    : sql::SqlDatastore(sql::Dialect::kSqlite, /*cache_definitions=*/true, options.keyring,
                        options.max_job_bytes),
      options_(std::move(options)),
      in_memory_(options_.path == ":memory:"),
      writer_(std::move(writer)) {}

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
          caches()->jobs.size(), caches()->tasks.size()};
}

// ---- Group commit -------------------------------------------------------------------

namespace {
// Set while this thread runs the writes of a batch: a modifier calling back into the
// datastore would wait for itself.
thread_local bool in_write_batch = false;
}  // namespace

namespace {
// `op` on a session over the connection it is given.
auto OnSession(const sql::SessionOp& op) {
  return [&op](Connection& c) {
    sqlite_internal::ConnectionSession session(c);
    return op(session);
  };
}
}  // namespace

// One write of the batch: its savepoint (or, alone, the transaction) is rolled back when
// `op` fails, so nothing of it is stored.
Status SqliteDatastore::Write(const sql::SessionOp& op) {
  return Enqueue(OnSession(op), /*solo=*/false);
}

Status SqliteDatastore::Alone(const sql::SessionOp& op) {
  return Enqueue(OnSession(op), /*solo=*/true);
}

// Every read is in one read transaction: a snapshot.
Status SqliteDatastore::Read(const sql::SessionOp& op, bool /*snapshot*/) {
  return ReadOn(OnSession(op));
}

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

Status SqliteDatastore::ReadOn(const Op& op) {
  // A private in-memory database has one connection: the write connection.
  if (in_memory_) return Enqueue(op, /*solo=*/true);
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<Connection> reader, AcquireReader());
  // One read transaction, so a count and its page see the same snapshot.
  Status status = reader->Exec(kBegin);
  if (status.ok()) status = NoThrow([&] { return op(*reader); });
  if (!reader->InAutocommit()) {
    if (Status end = reader->Exec(kCommit); !end.ok()) (void)reader->Exec(kRollback);
  }
  ReleaseReader(std::move(reader));
  return status;
}

// ---- Settings -----------------------------------------------------------------------

Result<int> SqliteDatastore::Synchronous() {
  std::string level;
  BATON_RETURN_IF_ERROR(Enqueue(
      [&](Connection& c) -> Status {
        BATON_ASSIGN_OR_RETURN(level, c.PragmaText("PRAGMA synchronous"));
        return Status::Ok();
      },
      /*solo=*/true));
  return std::atoi(level.c_str());
}

}  // namespace baton

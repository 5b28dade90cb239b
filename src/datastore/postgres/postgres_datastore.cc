#include "datastore/postgres/postgres_datastore.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>
#include <utility>

#include "base/log.h"
#include "datastore/adapter_util.h"
#include "datastore/postgres/postgres_migrations.h"
#include "datastore/sql/migrate.h"
#include "datastore/sql/rows.h"
#include "datastore/sql/search.h"
#include "datastore/sql/session.h"
#include "datastore/sql/sql_columns.h"
#include "datastore/sql/statements.h"
#include "datastore/sql/transaction.h"

namespace baton {
namespace postgres_internal {

// Maps a failed result (or, with none, the connection's state) to a Status.
Status PgStatus(PGconn* conn, const PGresult* res, std::string_view what) {
  std::string detail;
  if (res != nullptr) detail = PQresultErrorMessage(res);
  if (detail.empty() && conn != nullptr) detail = PQerrorMessage(conn);
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
  std::string message = fmt::format("postgres: {}: {}", what, detail);
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) return Unavailable(std::move(message));
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  if (state == nullptr) return Unavailable(std::move(message));  // no server answer
  std::string_view code(state);
  if (code == "23505") return AlreadyExists(std::move(message));
  if (code == "23503") return FailedPrecondition(std::move(message));
  if (code.starts_with("08") || code.starts_with("53") || code.starts_with("57") ||
      code == "40001" || code == "40P01") {
    // Connection exceptions, insufficient resources, operator intervention (shutdown,
    // cancel), serialization failures and deadlocks: try again later.
    return Unavailable(std::move(message));
  }
  if (code.starts_with("22")) return InvalidArgument(std::move(message));  // data exception
  return Internal(std::move(message));
}

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};

// A query's rows, read as text. Views stay valid while the Rows lives.
class Rows {
 public:
  explicit Rows(PGresult* res) : res_(res) {}

  int size() const { return PQntuples(res_.get()); }
  // Rows changed by INSERT/UPDATE/DELETE.
  std::int64_t Affected() const {
    const char* n = PQcmdTuples(res_.get());
    return n != nullptr && *n != '\0' ? std::strtoll(n, nullptr, 10) : 0;
  }
  bool IsNull(int row, int col) const { return PQgetisnull(res_.get(), row, col) != 0; }
  std::string_view Text(int row, int col) const {
    return {PQgetvalue(res_.get(), row, col),
            static_cast<std::size_t>(PQgetlength(res_.get(), row, col))};
  }
  std::int64_t Int(int row, int col) const {
    std::string_view t = Text(row, col);
    std::int64_t v = 0;
    std::from_chars(t.data(), t.data() + t.size(), v);
    return v;
  }
  int Int32(int row, int col) const { return static_cast<int>(Int(row, col)); }
  double Real(int row, int col) const {
    // strtod, not from_chars: libstdc++ 12 has it, but "Infinity"/"NaN" spellings differ.
    std::string t(Text(row, col));
    if (t == "Infinity") return std::numeric_limits<double>::infinity();
    if (t == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (t == "NaN") return std::numeric_limits<double>::quiet_NaN();
    return std::strtod(t.c_str(), nullptr);
  }
  TimePoint Time(int row, int col) const {
    return TimePoint(std::chrono::milliseconds(Int(row, col)));
  }
  std::optional<TimePoint> OptTime(int row, int col) const {
    if (IsNull(row, col)) return std::nullopt;
    return Time(row, col);
  }

 private:
  std::unique_ptr<PGresult, ResultDeleter> res_;
};

// Query parameters, sent as text.
class Params {
 public:
  Params& Text(std::string_view v) {
    values_.emplace_back(std::string(v));
    return *this;
  }
  Params& Int(std::int64_t v) {
    values_.emplace_back(std::to_string(v));
    return *this;
  }
  Params& Real(double v) {
    // fmt's shortest round-trip form; PostgreSQL's spellings for the rest.
    if (std::isnan(v)) {
      values_.emplace_back("NaN");
    } else if (std::isinf(v)) {
      values_.emplace_back(v > 0 ? "Infinity" : "-Infinity");
    } else {
      values_.emplace_back(fmt::format("{}", v));
    }
    return *this;
  }
  Params& Time(TimePoint t) { return Int(t.time_since_epoch().count()); }
  Params& Time(const std::optional<TimePoint>& t) {
    if (t) return Time(*t);
    values_.emplace_back(std::nullopt);
    return *this;
  }

  int size() const { return static_cast<int>(values_.size()); }
  std::vector<const char*> Pointers() const {
    std::vector<const char*> out;
    out.reserve(values_.size());
    for (const auto& v : values_) out.push_back(v ? v->c_str() : nullptr);
    return out;
  }

 private:
  std::vector<std::optional<std::string>> values_;
};

// A named statement, prepared on each connection the first time it runs there.
using Statement = sql::Statement;

// One libpq connection with the statements it has prepared. Used by one thread at a time
// (the pool hands it to one borrower).
class Connection {
 public:
  static Result<std::unique_ptr<Connection>> Open(const std::string& dsn) {
    PGconn* conn = PQconnectdb(dsn.c_str());
    auto c = std::unique_ptr<Connection>(new Connection(conn));
    if (conn == nullptr) return Unavailable("postgres: connecting: out of memory");
    if (PQstatus(conn) != CONNECTION_OK) return PgStatus(conn, nullptr, "connecting");
    if (PQsetClientEncoding(conn, "UTF8") != 0) {
      return PgStatus(conn, nullptr, "setting client encoding");
    }
    // Text and times are stored as given; nothing here depends on the session's settings
    // but make them explicit for statements that might.
    BATON_RETURN_IF_ERROR(c->Exec("SET TIME ZONE 'UTC'").status());
    return c;
  }

  ~Connection() { PQfinish(conn_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  PGconn* raw() const { return conn_; }
  bool Healthy() const {
    return PQstatus(conn_) == CONNECTION_OK && PQpipelineStatus(conn_) == PQ_PIPELINE_OFF;
  }
  bool Idle() const { return PQtransactionStatus(conn_) == PQTRANS_IDLE && !begin_pending_; }

  // Transactions cost no round trips of their own: BEGIN goes with the first statement,
  // and RunAndCommit sends the last statement with COMMIT (libpq's pipeline mode), so a
  // read-modify-write takes two round trips, not four.
  void Begin() {
    begin_pending_ = true;
    committed_ = false;
  }
  Status Commit() {
    if (std::exchange(begin_pending_, false) || std::exchange(committed_, false)) {
      return Status::Ok();  // nothing was sent, or RunAndCommit committed
    }
    return Exec("COMMIT").status();
  }
  void Rollback() {
    committed_ = false;
    if (std::exchange(begin_pending_, false)) return;
    if (PQtransactionStatus(conn_) != PQTRANS_IDLE) (void)Exec("ROLLBACK");
  }

  // Runs a prepared statement, preparing it first on this connection if needed.
  Result<Rows> Run(const Statement& stmt, const Params& params = Params()) {
    return RunPrepared(stmt, params, /*commit=*/false);
  }
  // Runs the transaction's last statement and commits, in one round trip.
  Result<Rows> RunAndCommit(const Statement& stmt, const Params& params) {
    return RunPrepared(stmt, params, /*commit=*/true);
  }

  // Runs SQL built at run time, with parameters $1, $2, ...
  Result<Rows> RunOnce(const std::string& sql, const Params& params) {
    std::vector<const char*> values = params.Pointers();
    auto send = [&] {
      return PQsendQueryParams(conn_, sql.c_str(), params.size(), nullptr, values.data(), nullptr,
                               nullptr, 0);
    };
    if (begin_pending_) return Pipelined(send, /*commit=*/false, "query");
    PGresult* res = PQexecParams(conn_, sql.c_str(), params.size(), nullptr, values.data(), nullptr,
                                 nullptr, 0);
    return Check(res, "query");
  }

  // Runs one or more statements without parameters (transaction control, schema).
  Result<Rows> Exec(const char* sql) {
    if (begin_pending_) {
      begin_pending_ = false;
      BATON_RETURN_IF_ERROR(Check(PQexec(conn_, "BEGIN"), "BEGIN").status());
    }
    return Check(PQexec(conn_, sql), sql);
  }

 private:
  explicit Connection(PGconn* conn) : conn_(conn) {}

  Result<Rows> RunPrepared(const Statement& stmt, const Params& params, bool commit) {
    if (prepared_.count(stmt.name) == 0) {
      PGresult* res = PQprepare(conn_, stmt.name, stmt.sql.c_str(), 0, nullptr);
      Rows check(res);
      if (res == nullptr || PQresultStatus(res) != PGRES_COMMAND_OK) {
        return PgStatus(conn_, res, fmt::format("preparing {}", stmt.name));
      }
      prepared_.insert(stmt.name);
    }
    std::vector<const char*> values = params.Pointers();
    if (begin_pending_ || commit) {
      return Pipelined(
          [&] {
            return PQsendQueryPrepared(conn_, stmt.name, params.size(), values.data(), nullptr,
                                       nullptr, 0);
          },
          commit, stmt.name);
    }
    PGresult* res =
        PQexecPrepared(conn_, stmt.name, params.size(), values.data(), nullptr, nullptr, 0);
    return Check(res, stmt.name);
  }

  // Sends [BEGIN,] the statement `send` queues [, COMMIT] and a sync in one go, then reads
  // every result up to the sync. Returns the statement's rows, or the first error (what
  // follows an error in a pipeline is not run; the transaction is left to Rollback).
  template <typename Send>
  Result<Rows> Pipelined(const Send& send, bool commit, std::string_view what) {
    const bool begin = std::exchange(begin_pending_, false);
    if (PQenterPipelineMode(conn_) != 1) return PgStatus(conn_, nullptr, "entering pipeline mode");
    auto send_plain = [&](const char* sql) {
      return PQsendQueryParams(conn_, sql, 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
    };
    const bool sent = (!begin || send_plain("BEGIN")) && send() == 1 &&
                      (!commit || send_plain("COMMIT")) && PQpipelineSync(conn_) == 1;
    if (!sent) {
      Status error = PgStatus(conn_, nullptr, fmt::format("sending {}", what));
      (void)PQexitPipelineMode(conn_);  // fails while results are pending: then not reused
      return error;
    }
    const int statement = begin ? 1 : 0;  // the statement's place among the queries
    int query = 0;
    std::optional<Rows> rows;
    std::optional<Status> error;
    // Each query's results end with a null; the sync's result ends the pipeline. A lost
    // connection ends it too (its results are errors, then nulls).
    for (int nulls = 0; nulls < 8;) {
      PGresult* res = PQgetResult(conn_);
      if (res == nullptr) {
        ++query;
        ++nulls;
        if (PQstatus(conn_) == CONNECTION_BAD) break;
        continue;
      }
      nulls = 0;
      const ExecStatusType st = PQresultStatus(res);
      if (st == PGRES_PIPELINE_SYNC) {
        PQclear(res);
        break;
      }
      if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        if (query == statement)
          rows.emplace(res);
        else
          PQclear(res);
      } else if (st == PGRES_PIPELINE_ABORTED) {
        PQclear(res);
      } else {
        const std::string_view failed = query == statement  ? what
                                        : query < statement ? std::string_view("BEGIN")
                                                            : std::string_view("COMMIT");
        Rows owned(res);
        if (!error) error = PgStatus(conn_, res, failed);
      }
    }
    (void)PQexitPipelineMode(conn_);  // if results were left unread, Healthy() says so
    if (error) return *error;
    if (!rows) return PgStatus(conn_, nullptr, what);
    if (commit) committed_ = true;
    return std::move(*rows);
  }

  Result<Rows> Check(PGresult* res, std::string_view what) {
    Rows rows(res);
    ExecStatusType st = res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return rows;
    return PgStatus(conn_, res, what);
  }

  PGconn* conn_;
  std::unordered_set<std::string_view> prepared_;
  bool begin_pending_ = false;  // Begin() was called; BEGIN goes with the next statement
  bool committed_ = false;      // RunAndCommit committed the transaction
};

}  // namespace postgres_internal

using postgres_internal::Connection;
using postgres_internal::Params;
using postgres_internal::Rows;
using postgres_internal::Statement;

// Unwraps a Result into `lhs` or returns its error from the enclosing function.
#define BATON_PG_ASSIGN(lhs, expr)                      \
  auto lhs##_result = (expr);                           \
  if (!lhs##_result.ok()) return lhs##_result.status(); \
  auto lhs = std::move(*lhs##_result)

namespace {

using datastore_util::CallModifier;
using datastore_util::ClampPage;
using datastore_util::MakePage;
using datastore_util::NoThrow;
using datastore_util::PageSpec;
using datastore_util::ScopeText;
using sql::EncodeTask;

// ---- SQL of PostgreSQL's own ------------------------------------------------------

const sql::Statements& S() {
  static const sql::Statements& statements = sql::StatementsFor(sql::Dialect::kPostgres);
  return statements;
}

// Many rows in one statement: each parameter is an array, one element per row.
const Statement kInsertTasks = {
    "insert_tasks",
    "INSERT INTO tasks (" BATON_SQL_TASK_COLUMNS
    ") SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], "
    "$6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::text[], "
    "$12::text[], $13::text[], $14::text[], $15::float8[], $16::int[], $17::int[], $18::int[], "
    "$19::int[], $20::text[], $21::text[])"};
// CancelTasks in one statement: the active rows of a job ($2 empty) or those below row
// $2 (through the tasks_parent index), locked, re-checked and cancelled; RETURNING gives
// the state each row was in.
const Statement kCancelTasks = {
    "cancel_tasks",
    "WITH RECURSIVE below(id) AS (SELECT $2::text COLLATE \"C\" UNION "
    "SELECT t.id FROM tasks t JOIN below ON t.parent_id = below.id WHERE t.parent_id <> ''), "
    "old AS (SELECT id, state, node_id, subjob_id FROM tasks WHERE job_id = $1 "
    "AND state = ANY ($4::text[]) AND ($2 = '' OR (id <> $2 AND id IN (SELECT id FROM below))) "
    "FOR UPDATE) "
    "UPDATE tasks t SET state = 'CANCELLED', completed_at = $3 FROM old "
    "WHERE t.id = old.id AND t.state = ANY ($4::text[]) "
    "RETURNING old.id, old.state, old.node_id, old.subjob_id"};

// Migrations. The advisory lock key is an arbitrary constant ("baton" in ASCII) that
// serialises migrators across processes.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(435459565934)";
constexpr const char* kCreateMigrationsTable =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "version INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '', applied_at BIGINT NOT NULL)";
constexpr const char* kMigrationsTableExists =
    "SELECT to_regclass('schema_migrations') IS NOT NULL";

// ---- Encoding -----------------------------------------------------------------------

// `max_bytes`: a new job's bound (CheckStoredJobSize); an update is not bounded.
Result<Params> EncodeJobParams(const JobRecord& job, std::optional<std::string> definition,
                               const crypto::Keyring* keys,
                               std::size_t max_bytes = std::numeric_limits<std::size_t>::max()) {
  BATON_PG_ASSIGN(text, sql::EncodeJobText(job, std::move(definition), keys));
  BATON_RETURN_IF_ERROR(CheckStoredJobSize(text.bytes(), max_bytes));
  Params p;
  sql::BindJob(p, job, text);
  return p;
}

Params TaskParams(const TaskRecord& task, std::string_view definition) {
  Params p;
  sql::BindTask(p, task, definition);
  return p;
}

// A PostgreSQL array literal of text elements, each quoted and escaped.
class ArrayLiteral {
 public:
  void AddText(std::string_view v) {
    Sep();
    out_ += '"';
    for (char c : v) {
      if (c == '"' || c == '\\') out_ += '\\';
      out_ += c;
    }
    out_ += '"';
  }
  void AddRaw(std::string_view v) {  // numbers
    Sep();
    out_ += v;
  }
  void AddNull() {
    Sep();
    out_ += "NULL";
  }
  std::string Done() { return "{" + out_ + "}"; }

 private:
  void Sep() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  std::string out_;
  bool first_ = true;
};

// ---- Decoding -----------------------------------------------------------------------

// Row `r` of a result, for the shared code (rows.h's Row).
class RowAt final : public sql::RowView {
 public:
  RowAt(const Rows& rows, int r) : rows_(rows), r_(r) {}
  std::string_view Text(int col) const override { return rows_.Text(r_, col); }
  std::int64_t Int(int col) const override { return rows_.Int(r_, col); }
  int Int32(int col) const override { return rows_.Int32(r_, col); }
  double Real(int col) const override { return rows_.Real(r_, col); }
  TimePoint Time(int col) const override { return rows_.Time(r_, col); }
  std::optional<TimePoint> OptTime(int col) const override { return rows_.OptTime(r_, col); }

 private:
  const Rows& rows_;
  int r_;
};

Result<JobRecord> JobFromRow(const Rows& s, int r, const crypto::Keyring* keys) {
  return sql::JobFromRow(RowAt(s, r), nullptr, keys);
}
Result<TaskRecord> TaskFromRow(const Rows& s, int r, const crypto::Keyring* keys) {
  return sql::TaskFromRow(RowAt(s, r), nullptr, keys);
}
Result<LogPart> LogPartFromRow(const Rows& s, int r) { return sql::LogPartFromRow(RowAt(s, r)); }
Result<NodeRecord> NodeFromRow(const Rows& s, int r) { return sql::NodeFromRow(RowAt(s, r)); }

// Decodes every row of `rows` through `decode` (a (rows, row) -> Result<T> function).
template <typename T, typename Decode>
Status CollectRows(const Rows& rows, Decode decode, std::vector<T>& out) {
  out.reserve(out.size() + static_cast<std::size_t>(rows.size()));
  for (int r = 0; r < rows.size(); ++r) {
    Result<T> item = decode(rows, r);
    if (!item.ok()) return item.status();
    out.push_back(std::move(*item));
  }
  return Status::Ok();
}

Result<std::int64_t> FirstInt(const Rows& rows) {
  if (rows.size() < 1) return Internal("postgres: query returned no row");
  return rows.Int(0, 0);
}

// ---- Helpers ------------------------------------------------------------------------

// A text[] literal of state names, bound to `state = ANY ($1::text[])`.
template <typename State>
std::string StatesArray(const std::vector<State>& states) {
  ArrayLiteral names;
  for (State state : states) names.AddText(ToString(state));
  return names.Done();
}

// With `commit`, the transaction's last statement: it commits in the same round trip.
Status InsertTask(Connection& c, const TaskRecord& task, std::string_view definition,
                  bool commit = false) {
  Params params = TaskParams(task, definition);
  Result<Rows> rows =
      commit ? c.RunAndCommit(S().insert_task, params) : c.Run(S().insert_task, params);
  if (rows.ok()) return Status::Ok();
  if (rows.status().code() == StatusCode::kAlreadyExists) {
    return AlreadyExists(fmt::format("task {} already exists", task.id));
  }
  if (rows.status().code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition(fmt::format("task {}: job {} does not exist", task.id, task.job_id));
  }
  return rows.status();
}

Result<int> ReadSchemaVersion(Connection& c) {
  BATON_PG_ASSIGN(exists, c.Exec(kMigrationsTableExists));
  if (exists.size() < 1 || exists.Text(0, 0) != "t") return 0;
  BATON_PG_ASSIGN(rows, c.Exec(S().max_schema_version.sql.c_str()));
  BATON_PG_ASSIGN(version, FirstInt(rows));
  return static_cast<int>(version);
}

Status CheckNotNewer(int version) {
  return sql::CheckNotNewer(version, LatestPostgresSchemaVersion());
}

// The steps of sql::RunMigrations on one connection.
class MigrationSteps final : public sql::MigrationSteps {
 public:
  explicit MigrationSteps(Connection& c) : c_(c) {}
  Result<int> SchemaVersion() override { return ReadSchemaVersion(c_); }
  // The transaction-level advisory lock makes concurrent migrators take turns.
  Status Begin() override {
    BATON_RETURN_IF_ERROR(c_.Exec("BEGIN").status());
    BATON_RETURN_IF_ERROR(c_.Exec(kMigrationLock).status());
    return c_.Exec(kCreateMigrationsTable).status();
  }
  Status Apply(std::string_view sql) override { return c_.Exec(std::string(sql).c_str()).status(); }
  Status Record(const sql::Migration& migration) override {
    Params p;
    p.Int(migration.version).Text(migration.name).Time(Now());
    return c_.RunOnce(S().record_migration.sql, p).status();
  }
  Status Commit() override { return c_.Exec("COMMIT").status(); }
  void Rollback() override { (void)c_.Exec("ROLLBACK"); }

 private:
  Connection& c_;
};

// A borrowed connection inside BEGIN .. COMMIT, for Transact.
class ConnectionSession final : public sql::Session {
 public:
  explicit ConnectionSession(Connection& c) : c_(c) {}
  Result<std::int64_t> Execute(const sql::Statement& stmt, const sql::Bind& bind) override {
    Params p;
    ParamsSink sink(p);
    bind(sink);
    BATON_PG_ASSIGN(rows, c_.Run(stmt, p));
    return rows.Affected();
  }
  Status Query(const sql::Statement& stmt, const sql::Bind& bind,
               const sql::EachRow& each) override {
    Params p;
    ParamsSink sink(p);
    bind(sink);
    BATON_PG_ASSIGN(rows, c_.Run(stmt, p));
    for (int r = 0; r < rows.size(); ++r) BATON_RETURN_IF_ERROR(each(RowAt(rows, r)));
    return Status::Ok();
  }

 private:
  // Params behind the shared code's ParamSink.
  class ParamsSink final : public sql::ParamSink {
   public:
    explicit ParamsSink(Params& p) : p_(p) {}
    void Text(std::string_view v) override { p_.Text(v); }
    void Int(std::int64_t v) override { p_.Int(v); }
    void Real(double v) override { p_.Real(v); }
    void Time(TimePoint t) override { p_.Time(t); }
    void Time(const std::optional<TimePoint>& t) override { p_.Time(t); }

   private:
    Params& p_;
  };
  Connection& c_;
};

// The parameters of kInsertTasks: one array per column, one element per row.
Result<Params> TasksArrayParams(const std::vector<TaskRecord>& tasks, const crypto::Keyring* keys) {
  std::vector<ArrayLiteral> cols(21);
  auto time = [](ArrayLiteral& a, const std::optional<TimePoint>& t) {
    if (t) {
      a.AddRaw(std::to_string(t->time_since_epoch().count()));
    } else {
      a.AddNull();
    }
  };
  auto real = [](ArrayLiteral& a, double v) {
    if (std::isnan(v)) {
      a.AddText("NaN");
    } else if (std::isinf(v)) {
      a.AddText(v > 0 ? "Infinity" : "-Infinity");
    } else {
      a.AddRaw(fmt::format("{}", v));
    }
  };
  for (const TaskRecord& t : tasks) {
    BATON_PG_ASSIGN(definition, EncodeTask(t.task, keys));
    cols[0].AddText(t.id);
    cols[1].AddText(t.job_id);
    cols[2].AddText(t.parent_id);
    cols[3].AddRaw(std::to_string(t.position));
    cols[4].AddText(ToString(t.state));
    time(cols[5], t.created_at);
    time(cols[6], t.scheduled_at);
    time(cols[7], t.started_at);
    time(cols[8], t.completed_at);
    time(cols[9], t.failed_at);
    cols[10].AddText(definition);
    cols[11].AddText(t.error);
    cols[12].AddText(t.result);
    cols[13].AddText(t.node_id);
    real(cols[14], t.progress);
    cols[15].AddRaw(std::to_string(t.redelivered));
    cols[16].AddRaw(std::to_string(t.each_size));
    cols[17].AddRaw(std::to_string(t.each_index));
    cols[18].AddRaw(std::to_string(t.completions));
    cols[19].AddText(t.subjob_id);
    cols[20].AddText(ScopeText(t.scope));
  }
  Params params;
  for (ArrayLiteral& col : cols) params.Text(col.Done());
  return params;
}

Status InsertTaskArrays(Connection& c, std::size_t count, const Params& params,
                        bool commit = false) {
  Result<Rows> rows = commit ? c.RunAndCommit(kInsertTasks, params) : c.Run(kInsertTasks, params);
  if (rows.status().code() == StatusCode::kAlreadyExists) {
    return AlreadyExists(
        fmt::format("creating {} tasks: a task id is taken: {}", count, rows.status().message()));
  }
  if (rows.status().code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition(
        fmt::format("creating {} tasks: a job does not exist: {}", count, rows.status().message()));
  }
  return rows.status();
}

// The read of a read-modify-write (the row locked until the transaction ends) and its
// modification: the parameters of S().update_job for the modified row.
Result<Params> ModifiedJobParams(Connection& c, std::string_view id,
                                 const std::function<Status(JobRecord&)>& modify,
                                 const crypto::Keyring* keys) {
  BATON_PG_ASSIGN(rows, c.Run(S().select_job_for_update, Params().Text(id)));
  if (rows.size() == 0) return NotFound(fmt::format("job {} not found", id));
  BATON_PG_ASSIGN(job, JobFromRow(rows, 0, keys));
  const Job before = job.job;
  BATON_RETURN_IF_ERROR(CallModifier(modify, job));
  job.id = std::string(id);  // the key is not the modifier's to change
  // Most updates change state, not the definition: keep its stored text then.
  std::optional<std::string> same;
  if (job.job == before) same = std::string(rows.Text(0, 11));
  return EncodeJobParams(job, std::move(same), keys);
}

// The same for S().update_task.
Result<Params> ModifiedTaskParams(Connection& c, std::string_view id,
                                  const std::function<Status(TaskRecord&)>& modify,
                                  const crypto::Keyring* keys) {
  BATON_PG_ASSIGN(rows, c.Run(S().select_task_for_update, Params().Text(id)));
  if (rows.size() == 0) return NotFound(fmt::format("task {} not found", id));
  BATON_PG_ASSIGN(task, TaskFromRow(rows, 0, keys));
  const Task before = task.task;
  BATON_RETURN_IF_ERROR(CallModifier(modify, task));
  task.id = std::string(id);  // the key is not the modifier's to change
  std::string definition;
  if (task.task == before) {
    definition = std::string(rows.Text(0, 10));
  } else {
    BATON_PG_ASSIGN(encoded, EncodeTask(task.task, keys));
    definition = std::move(encoded);
  }
  return TaskParams(task, definition);
}

}  // namespace

// ---- Lifecycle and the pool ---------------------------------------------------------

Result<std::unique_ptr<PostgresDatastore>> PostgresDatastore::Open(PostgresOptions options) {
  return NoThrow([&]() -> Result<std::unique_ptr<PostgresDatastore>> {
    if (options.dsn.empty()) return InvalidArgument("postgres: no connection string");
    options.pool_size = std::max(options.pool_size, 1);
    bool auto_migrate = options.auto_migrate;
    std::unique_ptr<PostgresDatastore> store(new PostgresDatastore(std::move(options)));
    if (auto_migrate) {
      BATON_RETURN_IF_ERROR(store->Migrate());
    } else {
      BATON_PG_ASSIGN(version, store->SchemaVersion());
      BATON_RETURN_IF_ERROR(CheckNotNewer(version));
    }
    return store;
  });
}

PostgresDatastore::PostgresDatastore(PostgresOptions options) : options_(std::move(options)) {}

PostgresDatastore::~PostgresDatastore() {
  std::lock_guard lock(pool_mu_);
  idle_.clear();
}

Result<std::unique_ptr<Connection>> PostgresDatastore::Borrow() {
  {
    std::unique_lock lock(pool_mu_);
    bool ready = pool_cv_.wait_for(lock, options_.acquire_timeout,
                                   [&] { return !idle_.empty() || open_ < options_.pool_size; });
    if (!ready) {
      return Unavailable(fmt::format("postgres: no free connection after {} ms (pool of {})",
                                     options_.acquire_timeout.count(), options_.pool_size));
    }
    if (!idle_.empty()) {
      std::unique_ptr<Connection> conn = std::move(idle_.back());
      idle_.pop_back();
      return conn;
    }
    ++open_;  // reserved: opened below, outside the lock
  }
  Result<std::unique_ptr<Connection>> conn = Connection::Open(options_.dsn);
  if (!conn.ok()) {
    {
      std::lock_guard lock(pool_mu_);
      --open_;
    }
    pool_cv_.notify_one();
  }
  return conn;
}

void PostgresDatastore::Return(std::unique_ptr<Connection> conn) {
  // A connection left mid-transaction (a failed ROLLBACK) or broken is not reused.
  if (conn->Healthy() && !conn->Idle()) (void)conn->Exec("ROLLBACK");
  bool keep = conn->Healthy() && conn->Idle();
  {
    std::lock_guard lock(pool_mu_);
    if (keep) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;
    }
  }
  pool_cv_.notify_one();
  // A dropped connection closes here, outside the lock.
}

Status PostgresDatastore::WithConnection(const Op& op) {
  return NoThrow([&]() -> Status {
    BATON_PG_ASSIGN(conn, Borrow());
    Status status = NoThrow([&] { return op(*conn); });
    Return(std::move(conn));
    return status;
  });
}

Status PostgresDatastore::InTransaction(const Op& op) {
  return WithConnection([&](Connection& c) -> Status {
    c.Begin();
    Status status = NoThrow([&] { return op(c); });
    if (!status.ok()) {
      c.Rollback();
      return status;
    }
    return c.Commit();
  });
}

// ---- Transactions -------------------------------------------------------------------

Status PostgresDatastore::Transact(const std::function<Status(Transaction&)>& body) {
  return InTransaction([&](Connection& c) -> Status {
    ConnectionSession session(c);
    return sql::RunScope(session, S(), /*caches=*/nullptr, keys(), options_.max_job_bytes, body);
  });
}

// ---- Migrations ---------------------------------------------------------------------

Status PostgresDatastore::Migrate() {
  return WithConnection([](Connection& c) -> Status {
    MigrationSteps steps(c);
    return sql::RunMigrations(steps, PostgresMigrations(), "postgres");
  });
}

Result<int> PostgresDatastore::SchemaVersion() {
  std::optional<int> version;
  Status status = WithConnection([&](Connection& c) -> Status {
    BATON_PG_ASSIGN(v, ReadSchemaVersion(c));
    version = v;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return *version;
}

// ---- Jobs ---------------------------------------------------------------------------

Status PostgresDatastore::CreateJob(const JobRecord& job) {
  return NoThrow([&]() -> Status {
    BATON_PG_ASSIGN(params, EncodeJobParams(job, std::nullopt, keys(), options_.max_job_bytes));
    return WithConnection([&](Connection& c) -> Status {
      Result<Rows> rows = c.Run(S().insert_job, params);
      if (rows.status().code() == StatusCode::kAlreadyExists) {
        return AlreadyExists(fmt::format("job {} already exists", job.id));
      }
      return rows.status();
    });
  });
}

Result<JobRecord> PostgresDatastore::GetJob(std::string_view id) {
  return NoThrow([&]() -> Result<JobRecord> {
    std::optional<JobRecord> out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(S().select_job, Params().Text(id)));
      if (rows.size() == 0) return NotFound(fmt::format("job {} not found", id));
      BATON_PG_ASSIGN(job, JobFromRow(rows, 0, keys()));
      out = std::move(job);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

Status PostgresDatastore::UpdateJob(std::string_view id,
                                    const std::function<Status(JobRecord&)>& modify) {
  return InTransaction([&](Connection& c) -> Status {
    BATON_PG_ASSIGN(params, ModifiedJobParams(c, id, modify, keys()));
    return c.RunAndCommit(S().update_job, params).status();
  });
}

Status PostgresDatastore::UpdateJobState(std::string_view id,
                                         const std::function<Status(JobRecord&)>& modify) {
  return InTransaction([&](Connection& c) -> Status {
    BATON_PG_ASSIGN(rows, c.Run(S().select_job_state_for_update, Params().Text(id)));
    if (rows.size() == 0) return NotFound(fmt::format("job {} not found", id));
    BATON_PG_ASSIGN(job, sql::JobStateFromRow(RowAt(rows, 0)));
    BATON_RETURN_IF_ERROR(CallModifier(modify, job));
    job.id = std::string(id);
    Params p;
    sql::BindJobState(p, job);
    return c.RunAndCommit(S().update_job_state_only, p).status();
  });
}

Result<Page<JobRecord>> PostgresDatastore::ListJobs(const JobQuery& query) {
  return NoThrow([&]() -> Result<Page<JobRecord>> {
    BATON_RETURN_IF_ERROR(ValidateJobQuery(query));
    PageSpec spec = ClampPage(query.page, query.size);
    sql::JobSearch search = sql::BuildJobSearch(sql::Dialect::kPostgres, query);
    Params params;
    for (const std::string& param : search.params) params.Text(param);
    Params list_params = params;
    list_params.Int(spec.size).Int(spec.offset);
    std::optional<Page<JobRecord>> out;
    // One snapshot for the count and its page.
    Status read = InTransaction([&](Connection& c) -> Status {
      BATON_RETURN_IF_ERROR(c.Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").status());
      BATON_PG_ASSIGN(count_rows, c.RunOnce(search.count_sql, params));
      BATON_PG_ASSIGN(total, FirstInt(count_rows));
      BATON_PG_ASSIGN(rows, c.RunOnce(search.list_sql, list_params));
      std::vector<JobRecord> items;
      BATON_RETURN_IF_ERROR(CollectRows<JobRecord>(
          rows, [this](const Rows& rs, int r) { return JobFromRow(rs, r, keys()); }, items));
      out = MakePage(spec, total, std::move(items));
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

Result<std::vector<JobRecord>> PostgresDatastore::JobsInState(const std::vector<JobState>& states) {
  return NoThrow([&]() -> Result<std::vector<JobRecord>> {
    std::vector<JobRecord> out;
    if (states.empty()) return out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(S().jobs_in_state, Params().Text(StatesArray(states))));
      return CollectRows<JobRecord>(
          rows, [this](const Rows& rs, int r) { return JobFromRow(rs, r, keys()); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Status PostgresDatastore::DeleteJob(std::string_view id) {
  return InTransaction([&](Connection& c) -> Status {
    // Its sub-jobs go with it: they would be left where no link reaches them.
    std::vector<std::string> tree;
    {
      BATON_PG_ASSIGN(rows, c.Run(S().job_tree, Params().Text(id)));
      for (int i = 0; i < rows.size(); ++i) tree.emplace_back(rows.Text(i, 0));
    }
    for (const std::string& job_id : tree) {
      // Children first; the job last, its row count telling whether it existed.
      BATON_RETURN_IF_ERROR(c.Run(S().delete_job_log_parts, Params().Text(job_id)).status());
      BATON_RETURN_IF_ERROR(
          c.Run(S().delete_job_webhook_deliveries, Params().Text(job_id)).status());
      BATON_RETURN_IF_ERROR(c.Run(S().delete_job_tasks, Params().Text(job_id)).status());
      BATON_PG_ASSIGN(rows, c.Run(S().delete_job, Params().Text(job_id)));
      if (job_id == id && rows.Affected() == 0) {
        return NotFound(fmt::format("job {} not found", id));
      }
    }
    return Status::Ok();
  });
}

Result<std::vector<std::string>> PostgresDatastore::JobsDueForDeletion(TimePoint now, int limit) {
  return NoThrow([&]() -> Result<std::vector<std::string>> {
    std::vector<std::string> ids;
    if (limit <= 0) return ids;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(S().jobs_due_for_deletion, Params().Time(now).Int(limit)));
      for (int i = 0; i < rows.size(); ++i) ids.emplace_back(rows.Text(i, 0));
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return ids;
  });
}

// ---- Tasks --------------------------------------------------------------------------

Status PostgresDatastore::CreateTask(const TaskRecord& task) {
  return NoThrow([&]() -> Status {
    BATON_PG_ASSIGN(definition, EncodeTask(task.task, keys()));
    return WithConnection([&](Connection& c) { return InsertTask(c, task, definition); });
  });
}

Status PostgresDatastore::CreateTasks(const std::vector<TaskRecord>& tasks) {
  return NoThrow([&]() -> Status {
    if (tasks.empty()) return Status::Ok();
    if (tasks.size() == 1) return CreateTask(tasks.front());
    // One statement of arrays: one round trip, and all rows or none.
    BATON_PG_ASSIGN(params, TasksArrayParams(tasks, keys()));
    return WithConnection([&](Connection& c) { return InsertTaskArrays(c, tasks.size(), params); });
  });
}

Result<TaskRecord> PostgresDatastore::GetTask(std::string_view id) {
  return NoThrow([&]() -> Result<TaskRecord> {
    std::optional<TaskRecord> out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(S().select_task, Params().Text(id)));
      if (rows.size() == 0) return NotFound(fmt::format("task {} not found", id));
      BATON_PG_ASSIGN(task, TaskFromRow(rows, 0, keys()));
      out = std::move(task);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

Status PostgresDatastore::UpdateTask(std::string_view id,
                                     const std::function<Status(TaskRecord&)>& modify) {
  return InTransaction([&](Connection& c) -> Status {
    BATON_PG_ASSIGN(params, ModifiedTaskParams(c, id, modify, keys()));
    return c.RunAndCommit(S().update_task, params).status();
  });
}

Result<std::vector<TaskRecord>> PostgresDatastore::JobTasks(std::string_view job_id) {
  return NoThrow([&]() -> Result<std::vector<TaskRecord>> {
    std::vector<TaskRecord> out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(S().job_tasks, Params().Text(job_id)));
      return CollectRows<TaskRecord>(
          rows, [this](const Rows& rs, int r) { return TaskFromRow(rs, r, keys()); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<std::vector<TaskRecord>> PostgresDatastore::ChildTasks(std::string_view parent_id) {
  return NoThrow([&]() -> Result<std::vector<TaskRecord>> {
    std::vector<TaskRecord> out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(S().child_tasks, Params().Text(parent_id)));
      return CollectRows<TaskRecord>(
          rows, [this](const Rows& rs, int r) { return TaskFromRow(rs, r, keys()); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<std::vector<TaskRecord>> PostgresDatastore::TasksInState(
    const std::vector<TaskState>& states) {
  return NoThrow([&]() -> Result<std::vector<TaskRecord>> {
    std::vector<TaskRecord> out;
    if (states.empty()) return out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(S().tasks_in_state, Params().Text(StatesArray(states))));
      return CollectRows<TaskRecord>(
          rows, [this](const Rows& rs, int r) { return TaskFromRow(rs, r, keys()); }, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Status PostgresDatastore::MarkScheduled(const std::vector<std::string>& ids, TimePoint at) {
  return NoThrow([&]() -> Status {
    if (ids.empty()) return Status::Ok();
    ArrayLiteral list;
    for (const std::string& id : ids) list.AddText(id);
    Params p;
    p.Text(list.Done())
        .Text(ToString(TaskState::kScheduled))
        .Time(at)
        .Text(StatesArray(std::vector<TaskState>{TaskState::kPending, TaskState::kCreated}));
    // One statement: atomic on its own, one round trip.
    return WithConnection([&](Connection& c) { return c.Run(S().mark_scheduled, p).status(); });
  });
}

Result<std::vector<CancelledTask>> PostgresDatastore::CancelTasks(std::string_view job_id,
                                                                  std::string_view under,
                                                                  TimePoint at) {
  return NoThrow([&]() -> Result<std::vector<CancelledTask>> {
    std::vector<CancelledTask> out;
    Params p;
    p.Text(job_id).Text(under).Time(at).Text(StatesArray(std::vector<TaskState>{
        TaskState::kCreated, TaskState::kPending, TaskState::kScheduled, TaskState::kRunning}));
    // One statement: atomic on its own, one round trip.
    Status write = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(kCancelTasks, p));
      for (int r = 0; r < rows.size(); ++r) {
        BATON_PG_ASSIGN(t, sql::CancelledFromRow(RowAt(rows, r)));
        out.push_back(std::move(t));
      }
      return Status::Ok();
    });
    if (!write.ok()) return write;
    return out;
  });
}

// ---- Log parts ----------------------------------------------------------------------

Status PostgresDatastore::CreateLogPart(const LogPart& part) {
  return WithConnection([&](Connection& c) -> Status {
    Params p;
    p.Text(part.id)
        .Text(part.task_id)
        .Text(part.job_id)
        .Int(part.number)
        .Text(part.contents)
        .Time(part.created_at);
    Result<Rows> rows = c.Run(S().insert_log_part, p);
    if (rows.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExists(fmt::format("log part {} already exists", part.id));
    }
    if (rows.status().code() == StatusCode::kFailedPrecondition) {
      return FailedPrecondition(
          fmt::format("log part {}: task {} does not exist", part.id, part.task_id));
    }
    return rows.status();
  });
}

namespace {

Result<Page<LogPart>> LogPage(Connection& c, const Statement& count_sql, const Statement& list_sql,
                              std::string_view key, const PageSpec& spec) {
  BATON_PG_ASSIGN(count_rows, c.Run(count_sql, Params().Text(key)));
  BATON_PG_ASSIGN(total, FirstInt(count_rows));
  BATON_PG_ASSIGN(rows, c.Run(list_sql, Params().Text(key).Int(spec.size).Int(spec.offset)));
  std::vector<LogPart> items;
  BATON_RETURN_IF_ERROR(CollectRows<LogPart>(rows, LogPartFromRow, items));
  return MakePage(spec, total, std::move(items));
}

}  // namespace

Result<Page<LogPart>> PostgresDatastore::TaskLogParts(std::string_view task_id, int page,
                                                      int size) {
  return NoThrow([&]() -> Result<Page<LogPart>> {
    std::optional<Page<LogPart>> out;
    PageSpec spec = ClampPage(page, size);
    Status read = InTransaction([&](Connection& c) -> Status {
      BATON_RETURN_IF_ERROR(c.Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").status());
      BATON_PG_ASSIGN(p, LogPage(c, S().count_task_log_parts, S().task_log_parts, task_id, spec));
      out = std::move(p);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

Result<Page<LogPart>> PostgresDatastore::JobLogParts(std::string_view job_id, int page, int size) {
  return NoThrow([&]() -> Result<Page<LogPart>> {
    std::optional<Page<LogPart>> out;
    PageSpec spec = ClampPage(page, size);
    Status read = InTransaction([&](Connection& c) -> Status {
      BATON_RETURN_IF_ERROR(c.Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").status());
      BATON_PG_ASSIGN(p, LogPage(c, S().count_job_log_parts, S().job_log_parts, job_id, spec));
      out = std::move(p);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return std::move(*out);
  });
}

// ---- Nodes --------------------------------------------------------------------------

Status PostgresDatastore::UpsertNode(const NodeRecord& node) {
  return WithConnection([&](Connection& c) -> Status {
    Params p;
    p.Text(node.id)
        .Text(node.name)
        .Text(node.hostname)
        .Text(node.version)
        .Text(node.queue)
        .Time(node.started_at)
        .Time(node.last_heartbeat_at)
        .Real(node.cpu_percent)
        .Int(node.task_count)
        .Text(ToString(node.status))
        .Int(node.memory_bytes);
    return c.Run(S().upsert_node, p).status();
  });
}

Result<std::vector<NodeRecord>> PostgresDatastore::ActiveNodes(TimePoint since) {
  return NoThrow([&]() -> Result<std::vector<NodeRecord>> {
    std::vector<NodeRecord> out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(S().active_nodes, Params().Time(since)));
      return CollectRows<NodeRecord>(rows, NodeFromRow, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<EndedCounts> PostgresDatastore::CountJobsEndedSince(TimePoint since) {
  return NoThrow([&]() -> Result<EndedCounts> {
    EndedCounts out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(S().count_jobs_ended_since, Params().Time(since)));
      if (rows.size() != 1) return Internal("counting ended jobs returned no row");
      out.completed = rows.Int(0, 0);
      out.failed = rows.Int(0, 1);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<RunningCounts> PostgresDatastore::CountRunning() {
  return NoThrow([&]() -> Result<RunningCounts> {
    RunningCounts out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(S().count_running, Params()));
      if (rows.size() != 1) return Internal("counting running jobs returned no row");
      out.jobs = rows.Int(0, 0);
      out.tasks = rows.Int(0, 1);
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<StateCounts> PostgresDatastore::CountStates() {
  return NoThrow([&]() -> Result<StateCounts> {
    StateCounts out;
    Status read = WithConnection([&](Connection& c) -> Status {
      {
        BATON_PG_ASSIGN(rows, c.Run(S().count_jobs_by_state, Params()));
        for (int i = 0; i < rows.size(); ++i) {
          std::optional<JobState> state = ParseJobState(rows.Text(i, 0));
          if (!state)
            return Internal(fmt::format("a job has an unknown state '{}'", rows.Text(i, 0)));
          out.jobs[*state] = rows.Int(i, 1);
        }
      }
      BATON_PG_ASSIGN(rows, c.Run(S().count_tasks_by_state, Params()));
      for (int i = 0; i < rows.size(); ++i) {
        std::optional<TaskState> state = ParseTaskState(rows.Text(i, 0));
        if (!state)
          return Internal(fmt::format("a task has an unknown state '{}'", rows.Text(i, 0)));
        out.tasks[*state] = rows.Int(i, 1);
      }
      return Status::Ok();
    });
    if (!read.ok()) return read;
    return out;
  });
}

Status PostgresDatastore::Health() {
  return WithConnection([](Connection& c) -> Status {
    BATON_PG_ASSIGN(rows, c.Run(S().health));
    if (rows.size() != 1) return Internal("postgres: health query returned no row");
    return Status::Ok();
  });
}

}  // namespace baton

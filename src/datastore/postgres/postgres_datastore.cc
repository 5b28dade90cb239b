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
#include "core/job_decode.h"
#include "core/job_json.h"
#include "datastore/adapter_util.h"
#include "datastore/postgres/postgres_migrations.h"

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
struct Statement {
  const char* name;
  const char* sql;
};

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
      PGresult* res = PQprepare(conn_, stmt.name, stmt.sql, 0, nullptr);
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

using nlohmann::json;
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

// ---- SQL ----------------------------------------------------------------------------

#define BATON_JOB_COLUMNS                                                                 \
  "id, parent_id, state, name, description, tags, created_at, started_at, completed_at, " \
  "failed_at, delete_at, definition, position, task_count, progress, result, error, context"
constexpr Statement kInsertJob = {
    "insert_job",
    "INSERT INTO jobs (" BATON_JOB_COLUMNS
    ") VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, "
    "$17, $18)"};
constexpr Statement kUpdateJob = {
    "update_job",
    "UPDATE jobs SET parent_id = $2, state = $3, name = $4, description = $5, tags = $6::jsonb, "
    "created_at = $7, started_at = $8, completed_at = $9, failed_at = $10, delete_at = $11, "
    "definition = $12, position = $13, task_count = $14, progress = $15, result = $16, "
    "error = $17, context = $18 WHERE id = $1"};
constexpr Statement kSelectJob = {"select_job",
                                  "SELECT " BATON_JOB_COLUMNS " FROM jobs WHERE id = $1"};
// What UpdateJobState reads and writes: neither the definition nor the context (the
// columns that grow with the job), so moving a big job costs no decoding of them.
constexpr Statement kSelectJobStateForUpdate = {
    "select_job_state_for_update",
    "SELECT id, parent_id, state, created_at, started_at, completed_at, failed_at, delete_at, "
    "position, task_count, progress, result, error FROM jobs WHERE id = $1 FOR UPDATE"};
constexpr Statement kUpdateJobStateOnly = {
    "update_job_state",
    "UPDATE jobs SET state = $2, started_at = $3, completed_at = $4, failed_at = $5, "
    "delete_at = $6, position = $7, progress = $8, result = $9, error = $10 WHERE id = $1"};
constexpr Statement kSelectJobForUpdate = {
    "select_job_for_update", "SELECT " BATON_JOB_COLUMNS " FROM jobs WHERE id = $1 FOR UPDATE"};
constexpr Statement kJobsInState = {"jobs_in_state", "SELECT " BATON_JOB_COLUMNS
                                                     " FROM jobs WHERE state = ANY ($1::text[]) "
                                                     "ORDER BY created_at, id"};
constexpr Statement kDeleteJobLogParts = {"delete_job_log_parts",
                                          "DELETE FROM log_parts WHERE job_id = $1"};
constexpr Statement kDeleteJobTasks = {"delete_job_tasks", "DELETE FROM tasks WHERE job_id = $1"};
constexpr Statement kDeleteJob = {"delete_job", "DELETE FROM jobs WHERE id = $1"};
// A job and its sub-jobs, at any depth: through the subjob tasks' links (tasks_job
// index), not the sub-jobs' parent_id, which has no index.
constexpr Statement kJobTree = {
    "job_tree",
    "WITH RECURSIVE tree(id) AS (SELECT $1::text UNION "
    "SELECT t.subjob_id FROM tasks t JOIN tree ON t.job_id = tree.id WHERE t.subjob_id <> '') "
    "SELECT id FROM tree"};
// Finished jobs whose delete_at has come (jobs_delete_at index), soonest first.
constexpr Statement kJobsDueForDeletion = {
    "jobs_due_for_deletion",
    "SELECT id FROM jobs WHERE delete_at IS NOT NULL AND delete_at <= $1 "
    "AND state IN ('COMPLETED', 'FAILED', 'CANCELLED') ORDER BY delete_at, id LIMIT $2"};

#define BATON_TASK_COLUMNS                                                               \
  "id, job_id, parent_id, position, state, created_at, scheduled_at, started_at, "       \
  "completed_at, failed_at, definition, error, result, node_id, progress, redelivered, " \
  "each_size, each_index, completions, subjob_id, scope"
constexpr Statement kInsertTask = {
    "insert_task",
    "INSERT INTO tasks (" BATON_TASK_COLUMNS
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, "
    "$19, $20, $21)"};
// Many rows in one statement: each parameter is an array, one element per row.
constexpr Statement kInsertTasks = {
    "insert_tasks",
    "INSERT INTO tasks (" BATON_TASK_COLUMNS
    ") SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], "
    "$6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::text[], "
    "$12::text[], $13::text[], $14::text[], $15::float8[], $16::int[], $17::int[], $18::int[], "
    "$19::int[], $20::text[], $21::text[])"};
constexpr Statement kUpdateTask = {
    "update_task",
    "UPDATE tasks SET job_id = $2, parent_id = $3, position = $4, state = $5, created_at = $6, "
    "scheduled_at = $7, started_at = $8, completed_at = $9, failed_at = $10, definition = $11, "
    "error = $12, result = $13, node_id = $14, progress = $15, redelivered = $16, "
    "each_size = $17, each_index = $18, completions = $19, subjob_id = $20, scope = $21 WHERE id = "
    "$1"};
constexpr Statement kSelectTask = {"select_task",
                                   "SELECT " BATON_TASK_COLUMNS " FROM tasks WHERE id = $1"};
constexpr Statement kSelectTaskForUpdate = {
    "select_task_for_update", "SELECT " BATON_TASK_COLUMNS " FROM tasks WHERE id = $1 FOR UPDATE"};
constexpr Statement kAddCompletion = {
    "add_completion",
    "UPDATE tasks SET completions = completions + 1 WHERE id = $1 AND state = $2 "
    "RETURNING completions"};
constexpr Statement kTaskExists = {"task_exists", "SELECT 1 FROM tasks WHERE id = $1"};
constexpr Statement kJobTasks = {"job_tasks",
                                 "SELECT " BATON_TASK_COLUMNS
                                 " FROM tasks WHERE job_id = $1 ORDER BY position, created_at, id"};
constexpr Statement kChildTasks = {"child_tasks",
                                   "SELECT " BATON_TASK_COLUMNS
                                   " FROM tasks WHERE parent_id = $1 AND parent_id <> '' "
                                   "ORDER BY created_at, id"};
constexpr Statement kTasksInState = {"tasks_in_state", "SELECT " BATON_TASK_COLUMNS
                                                       " FROM tasks WHERE state = ANY ($1::text[]) "
                                                       "ORDER BY created_at, id"};
// CancelTasks in one statement: the active rows of a job ($2 empty) or those below row
// $2 (through the tasks_parent index), locked, re-checked and cancelled; RETURNING gives
// the state each row was in.
constexpr Statement kCancelTasks = {
    "cancel_tasks",
    "WITH RECURSIVE below(id) AS (SELECT $2::text COLLATE \"C\" UNION "
    "SELECT t.id FROM tasks t JOIN below ON t.parent_id = below.id WHERE t.parent_id <> ''), "
    "old AS (SELECT id, state, node_id, subjob_id FROM tasks WHERE job_id = $1 "
    "AND state = ANY ($4::text[]) AND ($2 = '' OR (id <> $2 AND id IN (SELECT id FROM below))) "
    "FOR UPDATE) "
    "UPDATE tasks t SET state = 'CANCELLED', completed_at = $3 FROM old "
    "WHERE t.id = old.id AND t.state = ANY ($4::text[]) "
    "RETURNING old.id, old.state, old.node_id, old.subjob_id"};
constexpr Statement kMarkScheduled = {
    "mark_scheduled",
    "UPDATE tasks SET state = $2, scheduled_at = $3 WHERE id = ANY ($1::text[]) "
    "AND state = ANY ($4::text[])"};

#define BATON_LOG_COLUMNS "id, task_id, job_id, number, contents, created_at"
constexpr Statement kInsertLogPart = {"insert_log_part", "INSERT INTO log_parts (" BATON_LOG_COLUMNS
                                                         ") VALUES ($1, $2, $3, $4, $5, $6)"};
constexpr Statement kCountTaskLogParts = {"count_task_log_parts",
                                          "SELECT count(*) FROM log_parts WHERE task_id = $1"};
constexpr Statement kTaskLogParts = {
    "task_log_parts",
    "SELECT " BATON_LOG_COLUMNS
    " FROM log_parts WHERE task_id = $1 ORDER BY number DESC, created_at DESC, id DESC "
    "LIMIT $2 OFFSET $3"};
constexpr Statement kCountJobLogParts = {"count_job_log_parts",
                                         "SELECT count(*) FROM log_parts WHERE job_id = $1"};
constexpr Statement kJobLogParts = {
    "job_log_parts",
    "SELECT " BATON_LOG_COLUMNS
    " FROM log_parts WHERE job_id = $1 ORDER BY created_at DESC, number DESC, id DESC "
    "LIMIT $2 OFFSET $3"};

#define BATON_NODE_COLUMNS                                                           \
  "id, name, hostname, version, queue, started_at, last_heartbeat_at, cpu_percent, " \
  "task_count, status"
constexpr Statement kUpsertNode = {
    "upsert_node",
    "INSERT INTO nodes (" BATON_NODE_COLUMNS
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO UPDATE SET "
    "name = excluded.name, hostname = excluded.hostname, version = excluded.version, "
    "queue = excluded.queue, started_at = excluded.started_at, "
    "last_heartbeat_at = excluded.last_heartbeat_at, cpu_percent = excluded.cpu_percent, "
    "task_count = excluded.task_count, status = excluded.status"};
constexpr Statement kActiveNodes = {"active_nodes", "SELECT " BATON_NODE_COLUMNS
                                                    " FROM nodes WHERE last_heartbeat_at >= $1 "
                                                    "ORDER BY last_heartbeat_at DESC, id"};

constexpr Statement kHealth = {"health", "SELECT 1"};

// Migrations. The advisory lock key is an arbitrary constant ("baton" in ASCII) that
// serialises migrators across processes.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(435459565934)";
constexpr const char* kCreateMigrationsTable =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "version INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '', applied_at BIGINT NOT NULL)";
constexpr const char* kMigrationsTableExists =
    "SELECT to_regclass('schema_migrations') IS NOT NULL";
constexpr const char* kMaxVersion = "SELECT coalesce(max(version), 0) FROM schema_migrations";
constexpr const char* kRecordMigration =
    "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)";

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

Params JobParams(const JobRecord& job, std::string_view definition, std::string_view tags,
                 std::string_view context) {
  Params p;
  p.Text(job.id)
      .Text(job.parent_id)
      .Text(ToString(job.state))
      .Text(job.job.name)
      .Text(job.job.description)
      .Text(tags)
      .Time(job.created_at)
      .Time(job.started_at)
      .Time(job.completed_at)
      .Time(job.failed_at)
      .Time(job.delete_at)
      .Text(definition)
      .Int(job.position)
      .Int(job.task_count)
      .Real(job.progress)
      .Text(job.result)
      .Text(job.error)
      .Text(context);
  return p;
}

// `max_bytes`: a new job's bound (CheckStoredJobSize); an update is not bounded.
Result<Params> EncodeJobParams(const JobRecord& job, std::optional<std::string> definition,
                               std::size_t max_bytes = std::numeric_limits<std::size_t>::max()) {
  if (!definition) {
    BATON_PG_ASSIGN(def, EncodeJob(job.job));
    definition = std::move(def);
  }
  BATON_PG_ASSIGN(tags, Dump(json(job.job.tags), "job tags"));
  BATON_PG_ASSIGN(context, Dump(job.context, "job context"));
  BATON_RETURN_IF_ERROR(
      CheckStoredJobSize(definition->size() + tags.size() + context.size(), max_bytes));
  return JobParams(job, *definition, tags, context);
}

Params TaskParams(const TaskRecord& task, std::string_view definition) {
  Params p;
  p.Text(task.id)
      .Text(task.job_id)
      .Text(task.parent_id)
      .Int(task.position)
      .Text(ToString(task.state))
      .Time(task.created_at)
      .Time(task.scheduled_at)
      .Time(task.started_at)
      .Time(task.completed_at)
      .Time(task.failed_at)
      .Text(definition)
      .Text(task.error)
      .Text(task.result)
      .Text(task.node_id)
      .Real(task.progress)
      .Int(task.redelivered)
      .Int(task.each_size)
      .Int(task.each_index)
      .Int(task.completions)
      .Text(task.subjob_id)
      .Text(ScopeText(task.scope));
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

Status Corrupt(std::string_view table, std::string_view id, std::string_view problem) {
  return Internal(fmt::format("stored {} row {} is unreadable: {}", table, id, problem));
}

Result<JobRecord> JobFromRow(const Rows& s, int r) {
  JobRecord job;
  job.id = std::string(s.Text(r, 0));
  job.parent_id = std::string(s.Text(r, 1));
  std::optional<JobState> state = ParseJobState(s.Text(r, 2));
  if (!state) return Corrupt("jobs", job.id, fmt::format("unknown state '{}'", s.Text(r, 2)));
  job.state = *state;
  job.created_at = s.Time(r, 6);
  job.started_at = s.OptTime(r, 7);
  job.completed_at = s.OptTime(r, 8);
  job.failed_at = s.OptTime(r, 9);
  job.delete_at = s.OptTime(r, 10);
  Result<Job> definition = DecodeJobJson(s.Text(r, 11), DecodeMode::kStored);
  if (!definition.ok()) {
    return Corrupt("jobs", job.id, "definition: " + definition.status().message());
  }
  job.job = std::move(*definition);
  job.position = s.Int32(r, 12);
  job.task_count = s.Int32(r, 13);
  job.progress = s.Real(r, 14);
  job.result = std::string(s.Text(r, 15));
  job.error = std::string(s.Text(r, 16));
  job.context = json::parse(s.Text(r, 17), nullptr, /*allow_exceptions=*/false);
  if (job.context.is_discarded()) return Corrupt("jobs", job.id, "context is not JSON");
  return job;
}

Result<TaskRecord> TaskFromRow(const Rows& s, int r) {
  TaskRecord task;
  task.id = std::string(s.Text(r, 0));
  task.job_id = std::string(s.Text(r, 1));
  task.parent_id = std::string(s.Text(r, 2));
  task.position = s.Int32(r, 3);
  std::optional<TaskState> state = ParseTaskState(s.Text(r, 4));
  if (!state) return Corrupt("tasks", task.id, fmt::format("unknown state '{}'", s.Text(r, 4)));
  task.state = *state;
  task.created_at = s.Time(r, 5);
  task.scheduled_at = s.OptTime(r, 6);
  task.started_at = s.OptTime(r, 7);
  task.completed_at = s.OptTime(r, 8);
  task.failed_at = s.OptTime(r, 9);
  Result<Task> definition = DecodeTaskJson(s.Text(r, 10), DecodeMode::kStored);
  if (!definition.ok()) {
    return Corrupt("tasks", task.id, "definition: " + definition.status().message());
  }
  task.task = std::move(*definition);
  task.error = std::string(s.Text(r, 11));
  task.result = std::string(s.Text(r, 12));
  task.node_id = std::string(s.Text(r, 13));
  task.progress = s.Real(r, 14);
  task.redelivered = s.Int32(r, 15);
  task.each_size = s.Int32(r, 16);
  task.each_index = s.Int32(r, 17);
  task.completions = s.Int32(r, 18);
  task.subjob_id = std::string(s.Text(r, 19));
  BATON_PG_ASSIGN(scope, ParseScope(s.Text(r, 20)));
  task.scope = std::move(scope);
  return task;
}

Result<LogPart> LogPartFromRow(const Rows& s, int r) {
  LogPart part;
  part.id = std::string(s.Text(r, 0));
  part.task_id = std::string(s.Text(r, 1));
  part.job_id = std::string(s.Text(r, 2));
  part.number = s.Int32(r, 3);
  part.contents = std::string(s.Text(r, 4));
  part.created_at = s.Time(r, 5);
  return part;
}

Result<NodeRecord> NodeFromRow(const Rows& s, int r) {
  NodeRecord node;
  node.id = std::string(s.Text(r, 0));
  node.name = std::string(s.Text(r, 1));
  node.hostname = std::string(s.Text(r, 2));
  node.version = std::string(s.Text(r, 3));
  node.queue = std::string(s.Text(r, 4));
  node.started_at = s.Time(r, 5);
  node.last_heartbeat_at = s.Time(r, 6);
  node.cpu_percent = s.Real(r, 7);
  node.task_count = s.Int32(r, 8);
  std::optional<NodeStatus> status = ParseNodeStatus(s.Text(r, 9));
  if (!status) {
    return Corrupt("nodes", node.id, fmt::format("unknown status '{}'", s.Text(r, 9)));
  }
  node.status = *status;
  return node;
}

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
  Result<Rows> rows = commit ? c.RunAndCommit(kInsertTask, params) : c.Run(kInsertTask, params);
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
  BATON_PG_ASSIGN(rows, c.Exec(kMaxVersion));
  BATON_PG_ASSIGN(version, FirstInt(rows));
  return static_cast<int>(version);
}

Status CheckNotNewer(int version) {
  if (version > LatestPostgresSchemaVersion()) {
    return FailedPrecondition(fmt::format(
        "the database schema is at version {}, newer than this binary knows ({}); run a newer "
        "baton",
        version, LatestPostgresSchemaVersion()));
  }
  return Status::Ok();
}

// The parameters of kInsertTasks: one array per column, one element per row.
Result<Params> TasksArrayParams(const std::vector<TaskRecord>& tasks) {
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
    BATON_PG_ASSIGN(definition, EncodeTask(t.task));
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
// modification: the parameters of kUpdateJob for the modified row.
Result<Params> ModifiedJobParams(Connection& c, std::string_view id,
                                 const std::function<Status(JobRecord&)>& modify) {
  BATON_PG_ASSIGN(rows, c.Run(kSelectJobForUpdate, Params().Text(id)));
  if (rows.size() == 0) return NotFound(fmt::format("job {} not found", id));
  BATON_PG_ASSIGN(job, JobFromRow(rows, 0));
  const Job before = job.job;
  BATON_RETURN_IF_ERROR(CallModifier(modify, job));
  job.id = std::string(id);  // the key is not the modifier's to change
  // Most updates change state, not the definition: keep its stored text then.
  std::optional<std::string> same;
  if (job.job == before) same = std::string(rows.Text(0, 11));
  return EncodeJobParams(job, std::move(same));
}

// The same for kUpdateTask.
Result<Params> ModifiedTaskParams(Connection& c, std::string_view id,
                                  const std::function<Status(TaskRecord&)>& modify) {
  BATON_PG_ASSIGN(rows, c.Run(kSelectTaskForUpdate, Params().Text(id)));
  if (rows.size() == 0) return NotFound(fmt::format("task {} not found", id));
  BATON_PG_ASSIGN(task, TaskFromRow(rows, 0));
  const Task before = task.task;
  BATON_RETURN_IF_ERROR(CallModifier(modify, task));
  task.id = std::string(id);  // the key is not the modifier's to change
  std::string definition;
  if (task.task == before) {
    definition = std::string(rows.Text(0, 10));
  } else {
    BATON_PG_ASSIGN(encoded, EncodeTask(task.task));
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

// ---- Migrations ---------------------------------------------------------------------

Status PostgresDatastore::Migrate() {
  return WithConnection([](Connection& c) -> Status {
    BATON_PG_ASSIGN(before, ReadSchemaVersion(c));
    BATON_RETURN_IF_ERROR(CheckNotNewer(before));
    if (before == LatestPostgresSchemaVersion()) return Status::Ok();
    for (const PostgresMigration& migration : PostgresMigrations()) {
      if (migration.version <= before) continue;
      BATON_RETURN_IF_ERROR(c.Exec("BEGIN").status());
      bool applied = false;
      Status status = [&]() -> Status {
        BATON_RETURN_IF_ERROR(c.Exec(kMigrationLock).status());
        BATON_RETURN_IF_ERROR(c.Exec(kCreateMigrationsTable).status());
        // Re-read under the lock: another process may have migrated meanwhile.
        BATON_PG_ASSIGN(current, ReadSchemaVersion(c));
        BATON_RETURN_IF_ERROR(CheckNotNewer(current));
        if (current >= migration.version) return Status::Ok();
        std::string sql(migration.sql);
        BATON_RETURN_IF_ERROR(c.Exec(sql.c_str()).status());
        Params p;
        p.Int(migration.version).Text(migration.name).Time(Now());
        BATON_RETURN_IF_ERROR(c.RunOnce(kRecordMigration, p).status());
        applied = true;
        return Status::Ok();
      }();
      if (status.ok()) status = c.Exec("COMMIT").status();
      if (!status.ok()) {
        (void)c.Exec("ROLLBACK");
        if (status.code() == StatusCode::kFailedPrecondition) return status;
        return Status(status.code() == StatusCode::kUnavailable ? StatusCode::kUnavailable
                                                                : StatusCode::kInternal,
                      fmt::format("postgres: migration {} ({}) failed: {}", migration.version,
                                  migration.name, status.message()));
      }
      if (applied) {
        std::string version = std::to_string(migration.version);
        log::Info("Applied schema migration", {{"version", version}, {"name", migration.name}});
      }
    }
    return Status::Ok();
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
    BATON_PG_ASSIGN(params, EncodeJobParams(job, std::nullopt, options_.max_job_bytes));
    return WithConnection([&](Connection& c) -> Status {
      Result<Rows> rows = c.Run(kInsertJob, params);
      if (rows.status().code() == StatusCode::kAlreadyExists) {
        return AlreadyExists(fmt::format("job {} already exists", job.id));
      }
      return rows.status();
    });
  });
}

Status PostgresDatastore::CreateJobWithTasks(const JobRecord& job,
                                             const std::vector<TaskRecord>& tasks) {
  return NoThrow([&]() -> Status {
    BATON_PG_ASSIGN(params, EncodeJobParams(job, std::nullopt, options_.max_job_bytes));
    for (const TaskRecord& task : tasks) {
      if (task.job_id != job.id) {
        return InvalidArgument(
            fmt::format("task {} belongs to job {}, not {}", task.id, task.job_id, job.id));
      }
    }
    std::string definition;
    Params task_params;
    if (tasks.size() == 1) {
      BATON_PG_ASSIGN(encoded, EncodeTask(tasks.front().task));
      definition = std::move(encoded);
    } else if (tasks.size() > 1) {
      BATON_PG_ASSIGN(arrays, TasksArrayParams(tasks));
      task_params = std::move(arrays);
    }
    // BEGIN goes with the job's INSERT; the rows' INSERT then commits.
    return InTransaction([&](Connection& c) -> Status {
      Result<Rows> rows = c.Run(kInsertJob, params);
      if (rows.status().code() == StatusCode::kAlreadyExists) {
        return AlreadyExists(fmt::format("job {} already exists", job.id));
      }
      BATON_RETURN_IF_ERROR(rows.status());
      if (tasks.size() == 1) return InsertTask(c, tasks.front(), definition, /*commit=*/true);
      if (tasks.size() > 1) {
        return InsertTaskArrays(c, tasks.size(), task_params, /*commit=*/true);
      }
      return Status::Ok();
    });
  });
}

Result<JobRecord> PostgresDatastore::GetJob(std::string_view id) {
  return NoThrow([&]() -> Result<JobRecord> {
    std::optional<JobRecord> out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(kSelectJob, Params().Text(id)));
      if (rows.size() == 0) return NotFound(fmt::format("job {} not found", id));
      BATON_PG_ASSIGN(job, JobFromRow(rows, 0));
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
    BATON_PG_ASSIGN(params, ModifiedJobParams(c, id, modify));
    return c.RunAndCommit(kUpdateJob, params).status();
  });
}

Status PostgresDatastore::UpdateJobState(std::string_view id,
                                         const std::function<Status(JobRecord&)>& modify) {
  return InTransaction([&](Connection& c) -> Status {
    BATON_PG_ASSIGN(rows, c.Run(kSelectJobStateForUpdate, Params().Text(id)));
    if (rows.size() == 0) return NotFound(fmt::format("job {} not found", id));
    JobRecord job;
    job.id = std::string(rows.Text(0, 0));
    job.parent_id = std::string(rows.Text(0, 1));
    std::optional<JobState> state = ParseJobState(rows.Text(0, 2));
    if (!state) return Corrupt("jobs", job.id, fmt::format("unknown state '{}'", rows.Text(0, 2)));
    job.state = *state;
    job.created_at = rows.Time(0, 3);
    job.started_at = rows.OptTime(0, 4);
    job.completed_at = rows.OptTime(0, 5);
    job.failed_at = rows.OptTime(0, 6);
    job.delete_at = rows.OptTime(0, 7);
    job.position = rows.Int32(0, 8);
    job.task_count = rows.Int32(0, 9);
    job.progress = rows.Real(0, 10);
    job.result = std::string(rows.Text(0, 11));
    job.error = std::string(rows.Text(0, 12));
    BATON_RETURN_IF_ERROR(CallModifier(modify, job));
    Params p;
    p.Text(id)
        .Text(ToString(job.state))
        .Time(job.started_at)
        .Time(job.completed_at)
        .Time(job.failed_at)
        .Time(job.delete_at)
        .Int(job.position)
        .Real(job.progress)
        .Text(job.result)
        .Text(job.error);
    return c.RunAndCommit(kUpdateJobStateOnly, p).status();
  });
}

Result<Page<JobRecord>> PostgresDatastore::ListJobs(const JobQuery& query) {
  return NoThrow([&]() -> Result<Page<JobRecord>> {
    BATON_RETURN_IF_ERROR(ValidateJobQuery(query));
    PageSpec spec = ClampPage(query.page, query.size);
    // Every word narrows the result: WHERE ... AND ... with numbered parameters. ILIKE
    // ignores case (beyond ASCII too); backslash is LIKE's default escape.
    std::string where;
    Params params;
    for (std::string_view word : SplitWords(query.q)) {
      where += where.empty() ? " WHERE " : " AND ";
      if (word.starts_with("tag:") && word.size() > 4) {
        params.Text(word.substr(4));
        where += fmt::format("jobs.tags ? ${}", params.size());
      } else {
        params.Text(ContainsPattern(word));
        params.Text(AsciiUpper(word));
        where += fmt::format(
            "(jobs.state = ${1} OR jobs.name ILIKE ${0} OR jobs.description ILIKE ${0})",
            params.size() - 1, params.size());
      }
    }
    std::string count_sql = "SELECT count(*) FROM jobs" + where;
    Params list_params = params;
    list_params.Int(spec.size).Int(spec.offset);
    std::string list_sql =
        fmt::format("SELECT " BATON_JOB_COLUMNS
                    " FROM jobs{} ORDER BY created_at DESC, id DESC LIMIT ${} OFFSET ${}",
                    where, params.size() + 1, params.size() + 2);
    std::optional<Page<JobRecord>> out;
    // One snapshot for the count and its page.
    Status read = InTransaction([&](Connection& c) -> Status {
      BATON_RETURN_IF_ERROR(c.Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").status());
      BATON_PG_ASSIGN(count_rows, c.RunOnce(count_sql, params));
      BATON_PG_ASSIGN(total, FirstInt(count_rows));
      BATON_PG_ASSIGN(rows, c.RunOnce(list_sql, list_params));
      std::vector<JobRecord> items;
      BATON_RETURN_IF_ERROR(CollectRows<JobRecord>(rows, JobFromRow, items));
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
      BATON_PG_ASSIGN(rows, c.Run(kJobsInState, Params().Text(StatesArray(states))));
      return CollectRows<JobRecord>(rows, JobFromRow, out);
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
      BATON_PG_ASSIGN(rows, c.Run(kJobTree, Params().Text(id)));
      for (int i = 0; i < rows.size(); ++i) tree.emplace_back(rows.Text(i, 0));
    }
    for (const std::string& job_id : tree) {
      // Children first; the job last, its row count telling whether it existed.
      BATON_RETURN_IF_ERROR(c.Run(kDeleteJobLogParts, Params().Text(job_id)).status());
      BATON_RETURN_IF_ERROR(c.Run(kDeleteJobTasks, Params().Text(job_id)).status());
      BATON_PG_ASSIGN(rows, c.Run(kDeleteJob, Params().Text(job_id)));
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
      BATON_PG_ASSIGN(rows, c.Run(kJobsDueForDeletion, Params().Time(now).Int(limit)));
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
    BATON_PG_ASSIGN(definition, EncodeTask(task.task));
    return WithConnection([&](Connection& c) { return InsertTask(c, task, definition); });
  });
}

Status PostgresDatastore::CreateTasks(const std::vector<TaskRecord>& tasks) {
  return NoThrow([&]() -> Status {
    if (tasks.empty()) return Status::Ok();
    if (tasks.size() == 1) return CreateTask(tasks.front());
    // One statement of arrays: one round trip, and all rows or none.
    BATON_PG_ASSIGN(params, TasksArrayParams(tasks));
    return WithConnection([&](Connection& c) { return InsertTaskArrays(c, tasks.size(), params); });
  });
}

Result<TaskRecord> PostgresDatastore::GetTask(std::string_view id) {
  return NoThrow([&]() -> Result<TaskRecord> {
    std::optional<TaskRecord> out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(kSelectTask, Params().Text(id)));
      if (rows.size() == 0) return NotFound(fmt::format("task {} not found", id));
      BATON_PG_ASSIGN(task, TaskFromRow(rows, 0));
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
    BATON_PG_ASSIGN(params, ModifiedTaskParams(c, id, modify));
    return c.RunAndCommit(kUpdateTask, params).status();
  });
}

Status PostgresDatastore::UpdateTaskAndJob(
    std::string_view task_id,
    const std::function<Status(TaskRecord&, bool& update_job)>& modify_task,
    const std::function<Status(JobRecord&)>& modify_job) {
  return InTransaction([&](Connection& c) -> Status {
    bool update_job = false;
    std::string job_id;
    // Both rows are locked (task, then job: the one order any transaction here takes
    // both in) before either is written.
    BATON_PG_ASSIGN(task_params, ModifiedTaskParams(c, task_id, [&](TaskRecord& task) -> Status {
                      job_id = task.job_id;
                      return modify_task(task, update_job);
                    }));
    if (!update_job) return c.RunAndCommit(kUpdateTask, task_params).status();
    BATON_PG_ASSIGN(job_params, ModifiedJobParams(c, job_id, modify_job));
    BATON_RETURN_IF_ERROR(c.Run(kUpdateTask, task_params).status());
    return c.RunAndCommit(kUpdateJob, job_params).status();
  });
}

Result<std::optional<int>> PostgresDatastore::AddCompletion(std::string_view id) {
  return NoThrow([&]() -> Result<std::optional<int>> {
    std::optional<int> count;
    // One statement, atomic on its own: no transaction, one round trip.
    Status write = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows,
                      c.Run(kAddCompletion, Params().Text(id).Text(ToString(TaskState::kRunning))));
      if (rows.size() > 0) {
        count = rows.Int32(0, 0);
        return Status::Ok();
      }
      // Not counted: an unknown row, or one that is not running.
      BATON_PG_ASSIGN(exists, c.Run(kTaskExists, Params().Text(id)));
      if (exists.size() == 0) return NotFound(fmt::format("task {} not found", id));
      return Status::Ok();
    });
    if (!write.ok()) return write;
    return count;
  });
}

Result<std::vector<TaskRecord>> PostgresDatastore::JobTasks(std::string_view job_id) {
  return NoThrow([&]() -> Result<std::vector<TaskRecord>> {
    std::vector<TaskRecord> out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(kJobTasks, Params().Text(job_id)));
      return CollectRows<TaskRecord>(rows, TaskFromRow, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Result<std::vector<TaskRecord>> PostgresDatastore::ChildTasks(std::string_view parent_id) {
  return NoThrow([&]() -> Result<std::vector<TaskRecord>> {
    std::vector<TaskRecord> out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(kChildTasks, Params().Text(parent_id)));
      return CollectRows<TaskRecord>(rows, TaskFromRow, out);
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
      BATON_PG_ASSIGN(rows, c.Run(kTasksInState, Params().Text(StatesArray(states))));
      return CollectRows<TaskRecord>(rows, TaskFromRow, out);
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
    return WithConnection([&](Connection& c) { return c.Run(kMarkScheduled, p).status(); });
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
        CancelledTask t;
        t.id = std::string(rows.Text(r, 0));
        std::optional<TaskState> was = ParseTaskState(rows.Text(r, 1));
        if (!was) return Corrupt("tasks", t.id, fmt::format("unknown state '{}'", rows.Text(r, 1)));
        t.was = *was;
        t.node_id = std::string(rows.Text(r, 2));
        t.subjob_id = std::string(rows.Text(r, 3));
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
    Result<Rows> rows = c.Run(kInsertLogPart, p);
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
      BATON_PG_ASSIGN(p, LogPage(c, kCountTaskLogParts, kTaskLogParts, task_id, spec));
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
      BATON_PG_ASSIGN(p, LogPage(c, kCountJobLogParts, kJobLogParts, job_id, spec));
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
        .Text(ToString(node.status));
    return c.Run(kUpsertNode, p).status();
  });
}

Result<std::vector<NodeRecord>> PostgresDatastore::ActiveNodes(TimePoint since) {
  return NoThrow([&]() -> Result<std::vector<NodeRecord>> {
    std::vector<NodeRecord> out;
    Status read = WithConnection([&](Connection& c) -> Status {
      BATON_PG_ASSIGN(rows, c.Run(kActiveNodes, Params().Time(since)));
      return CollectRows<NodeRecord>(rows, NodeFromRow, out);
    });
    if (!read.ok()) return read;
    return out;
  });
}

Status PostgresDatastore::Health() {
  return WithConnection([](Connection& c) -> Status {
    BATON_PG_ASSIGN(rows, c.Run(kHealth));
    if (rows.size() != 1) return Internal("postgres: health query returned no row");
    return Status::Ok();
  });
}

}  // namespace baton

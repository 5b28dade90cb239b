#include "datastore/postgres/postgres_datastore.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <optional>
#include <unordered_set>
#include <utility>

#include "crypto/certificate.h"
#include "datastore/adapter_util.h"
#include "datastore/sql/session.h"
#include "datastore/sql/statements.h"

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
    // but make them explicit for statements that might. A commit is acknowledged once the
    // server has flushed it (and its synchronous standbys have, if any), whatever the
    // server's, database's or role's default says.
    BATON_RETURN_IF_ERROR(c->Exec("SET TIME ZONE 'UTC'; SET synchronous_commit = on").status());
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
    if (begin_pending_ && commit) {
      // The transaction's only statement: run alone, it is a transaction of its own, in
      // one round trip with no BEGIN or COMMIT to send.
      begin_pending_ = false;
      PGresult* res =
          PQexecPrepared(conn_, stmt.name, params.size(), values.data(), nullptr, nullptr, 0);
      Result<Rows> rows = Check(res, stmt.name);
      if (rows.ok()) committed_ = true;
      return rows;
    }
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

namespace {

using datastore_util::NoThrow;

// Row `r` of a result, for the shared code (sql/session.h).
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

Params Bound(const sql::Bind& bind) {
  Params p;
  ParamsSink sink(p);
  bind(sink);
  return p;
}

Status EachRow(const Rows& rows, const sql::EachRow& each) {
  for (int r = 0; r < rows.size(); ++r) BATON_RETURN_IF_ERROR(each(RowAt(rows, r)));
  return Status::Ok();
}

// A borrowed connection, inside the operation the datastore runs (sql/session.h).
class ConnectionSession final : public sql::Session {
 public:
  explicit ConnectionSession(Connection& c) : c_(c) {}
  Result<std::int64_t> Execute(const sql::Statement& stmt, const sql::Bind& bind) override {
    BATON_ASSIGN_OR_RETURN(Rows rows, c_.Run(stmt, Bound(bind)));
    return rows.Affected();
  }
  Result<std::int64_t> ExecuteLast(const sql::Statement& stmt, const sql::Bind& bind) override {
    BATON_ASSIGN_OR_RETURN(Rows rows, c_.RunAndCommit(stmt, Bound(bind)));
    return rows.Affected();
  }
  Status Query(const sql::Statement& stmt, const sql::Bind& bind,
               const sql::EachRow& each) override {
    BATON_ASSIGN_OR_RETURN(Rows rows, c_.Run(stmt, Bound(bind)));
    return EachRow(rows, each);
  }
  Status QueryLast(const sql::Statement& stmt, const sql::Bind& bind,
                   const sql::EachRow& each) override {
    BATON_ASSIGN_OR_RETURN(Rows rows, c_.RunAndCommit(stmt, Bound(bind)));
    return EachRow(rows, each);
  }
  Status QueryOnce(const std::string& sql, const sql::Bind& bind,
                   const sql::EachRow& each) override {
    BATON_ASSIGN_OR_RETURN(Rows rows, c_.RunOnce(sql, Bound(bind)));
    return EachRow(rows, each);
  }
  Status ExecScript(std::string_view sql) override {
    return c_.Exec(std::string(sql).c_str()).status();
  }

 private:
  Connection& c_;
};

// `op` on a session over the connection it is given.
auto OnSession(const sql::SessionOp& op) {
  return [&op](Connection& c) {
    ConnectionSession session(c);
    return op(session);
  };
}

}  // namespace

// ---- Lifecycle and the pool ---------------------------------------------------------

namespace {

// A client certificate the DSN names (sslcert) that has expired is said so, with its date,
// before connecting: the server's TLS alert reaches libpq's message only when it reads it
// before its own write fails.
Status CheckClientCertificate(const std::string& dsn) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options == nullptr) {
    std::string why = error != nullptr ? error : "out of memory";
    PQfreemem(error);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    return InvalidArgument("postgres: the connection string: " + why);
  }
  std::string host = "localhost", port = "5432", cert;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr || *o->val == '\0') continue;
    const std::string_view key = o->keyword;
    if (key == "host") host = o->val;
    if (key == "port") port = o->val;
    if (key == "sslcert") cert = o->val;
  }
  PQconninfoFree(options);
  if (cert.empty()) return Status::Ok();
  Status ok = crypto::CheckCertificateFile(cert);
  if (ok.ok()) return ok;
  return Status(ok.code(), fmt::format("postgres: connecting to \"{}\", port {}: the client "
                                       "certificate (sslcert): {}",
                                       host, port, ok.message()));
}

}  // namespace

Result<std::unique_ptr<PostgresDatastore>> PostgresDatastore::Open(PostgresOptions options) {
  return NoThrow([&]() -> Result<std::unique_ptr<PostgresDatastore>> {
    if (options.dsn.empty()) return InvalidArgument("postgres: no connection string");
    BATON_RETURN_IF_ERROR(CheckClientCertificate(options.dsn));
    options.pool_size = std::max(options.pool_size, 1);
    const bool auto_migrate = options.auto_migrate;
    std::unique_ptr<PostgresDatastore> store(new PostgresDatastore(std::move(options)));
    BATON_RETURN_IF_ERROR(store->OpenSchema(auto_migrate));
    return store;
  });
}

PostgresDatastore::PostgresDatastore(PostgresOptions options)
    : sql::SqlDatastore(sql::Dialect::kPostgres, /*cache_definitions=*/false, options.keyring,
                        options.max_job_bytes),
      options_(std::move(options)) {}

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

Result<std::string> PostgresDatastore::SessionSetting(std::string_view name) {
  std::string value;
  BATON_RETURN_IF_ERROR(WithConnection([&](Connection& c) -> Status {
    BATON_ASSIGN_OR_RETURN(Rows rows, c.RunOnce("SELECT current_setting($1)", Params().Text(name)));
    if (rows.size() == 1) value = std::string(rows.Text(0, 0));
    return Status::Ok();
  }));
  return value;
}

Status PostgresDatastore::WithConnection(const Op& op) {
  return NoThrow([&]() -> Status {
    BATON_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn, Borrow());
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

// ---- The backend of sql::SqlDatastore ---------------------------------------------

Status PostgresDatastore::Write(const sql::SessionOp& op) { return InTransaction(OnSession(op)); }

Status PostgresDatastore::Read(const sql::SessionOp& op, bool snapshot) {
  if (!snapshot) return WithConnection(OnSession(op));
  return InTransaction([&](Connection& c) -> Status {
    BATON_RETURN_IF_ERROR(c.Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").status());
    return OnSession(op)(c);
  });
}

Status PostgresDatastore::Alone(const sql::SessionOp& op) { return WithConnection(OnSession(op)); }

}  // namespace baton

#include "datastore/postgres/postgres_locker.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"

namespace baton {
namespace {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnDeleter>;

std::string ErrorText(PGconn* conn, const PGresult* res) {
  std::string text = res != nullptr ? PQresultErrorMessage(res) : "";
  if (text.empty() && conn != nullptr) text = PQerrorMessage(conn);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

bool IsLockTimeout(const PGresult* res) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  return state != nullptr && std::string_view(state) == "55P03";  // lock_not_available
}

// Runs `sql` with the single text parameter `name`; returns the first column of the
// first row ("t"/"f", or "" for a void result).
Result<std::string> Query(PGconn* conn, const char* sql, const std::string& name) {
  const char* values[] = {name.c_str()};
  ResultPtr res(PQexecParams(conn, sql, 1, nullptr, values, nullptr, nullptr, 0));
  if (res == nullptr || PQresultStatus(res.get()) != PGRES_TUPLES_OK || PQntuples(res.get()) < 1) {
    if (IsLockTimeout(res.get())) return DeadlineExceeded(fmt::format("lock {} stayed held", name));
    std::string message = fmt::format("postgres locker: {}", ErrorText(conn, res.get()));
    if (PQstatus(conn) != CONNECTION_OK) return Unavailable(std::move(message));
    return Internal(std::move(message));
  }
  return std::string(PQgetvalue(res.get(), 0, 0));
}

constexpr const char* kTryLock = "SELECT pg_try_advisory_lock(hashtext($1))";
constexpr const char* kLock = "SELECT pg_advisory_lock(hashtext($1))";
constexpr const char* kUnlock = "SELECT pg_advisory_unlock(hashtext($1))";

// A session and the lock_timeout last set on it.
struct Session {
  ConnPtr conn;
  std::optional<std::chrono::milliseconds> lock_timeout;
};

}  // namespace

// Idle sessions, shared with the locks so that a Lock may outlive its Locker.
struct PostgresLocker::Pool {
  static constexpr std::size_t kMaxIdle = 8;
  std::string dsn;
  Mutex mu;
  std::vector<Session> idle BATON_GUARDED_BY(mu);

  Result<Session> Get() {
    {
      MutexLock lock(mu);
      if (!idle.empty()) {
        Session s = std::move(idle.back());
        idle.pop_back();
        if (PQstatus(s.conn.get()) == CONNECTION_OK) return s;
      }
    }
    Session s;
    s.conn.reset(PQconnectdb(dsn.c_str()));
    if (s.conn == nullptr) return Unavailable("postgres locker: connecting: out of memory");
    if (PQstatus(s.conn.get()) != CONNECTION_OK) {
      return Unavailable(
          fmt::format("postgres locker: connecting: {}", ErrorText(s.conn.get(), nullptr)));
    }
    if (PQsetClientEncoding(s.conn.get(), "UTF8") != 0) {
      return Unavailable(
          fmt::format("postgres locker: setting encoding: {}", ErrorText(s.conn.get(), nullptr)));
    }
    return s;
  }

  void Put(Session s) {
    if (PQstatus(s.conn.get()) != CONNECTION_OK ||
        PQtransactionStatus(s.conn.get()) != PQTRANS_IDLE) {
      return;  // closed by ConnDeleter
    }
    MutexLock lock(mu);
    if (idle.size() < kMaxIdle) idle.push_back(std::move(s));
  }
};

namespace {

// Holds the session that holds the advisory lock.
class PostgresLock final : public Lock {
 public:
  PostgresLock(std::shared_ptr<PostgresLocker::Pool> pool, Session session, std::string name)
      : pool_(std::move(pool)), session_(std::move(session)), name_(std::move(name)) {}
  ~PostgresLock() override {
    // Unlock and wait for the answer, so the lock is free by the time we return (closing
    // alone would release it only once the server notices the session ended). A session
    // whose unlock fails is closed, which releases the lock anyway.
    if (PQstatus(session_.conn.get()) != CONNECTION_OK) return;
    auto unlocked = Query(session_.conn.get(), kUnlock, name_);
    if (unlocked.ok() && *unlocked == "t") pool_->Put(std::move(session_));
  }

 private:
  std::shared_ptr<PostgresLocker::Pool> pool_;
  Session session_;
  std::string name_;
};

}  // namespace

PostgresLocker::PostgresLocker(std::string dsn) : pool_(std::make_shared<Pool>()) {
  pool_->dsn = std::move(dsn);
}

Result<std::unique_ptr<Lock>> PostgresLocker::TryAcquire(std::string_view name) {
  return Take(name, std::nullopt);
}

Result<std::unique_ptr<Lock>> PostgresLocker::Acquire(std::string_view name,
                                                      std::chrono::milliseconds timeout) {
  return Take(name, std::max(timeout, std::chrono::milliseconds(1)));
}

Result<std::unique_ptr<Lock>> PostgresLocker::Take(std::string_view name,
                                                   std::optional<std::chrono::milliseconds> wait) {
  try {
    if (name.empty()) return InvalidArgument("a lock needs a name");
    auto session = pool_->Get();
    if (!session.ok()) return session.status();
    std::string key(name);
    if (wait && session->lock_timeout != wait) {
      std::string set = fmt::format("SET lock_timeout = {}", wait->count());
      ResultPtr res(PQexec(session->conn.get(), set.c_str()));
      if (res == nullptr || PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
        return Unavailable(
            fmt::format("postgres locker: {}", ErrorText(session->conn.get(), res.get())));
      }
      session->lock_timeout = wait;
    }
    Result<std::string> got = Query(session->conn.get(), wait ? kLock : kTryLock, key);
    if (!got.ok()) {
      if (got.status().code() == StatusCode::kDeadlineExceeded) pool_->Put(std::move(*session));
      return got.status();
    }
    if (!wait && *got != "t") {
      pool_->Put(std::move(*session));
      return FailedPrecondition(fmt::format("lock {} is held", key));
    }
    return std::unique_ptr<Lock>(
        std::make_unique<PostgresLock>(pool_, std::move(*session), std::move(key)));
  } catch (const std::exception& e) {
    return Internal(fmt::format("postgres locker: {}", e.what()));
  }
}

}  // namespace baton

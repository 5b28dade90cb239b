#include "datastore/postgres/postgres_locker.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <exception>
#include <string>
#include <utility>

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

// Runs `sql` with the single text parameter `name`; returns the first column of the
// first row ("t"/"f").
Result<std::string> QueryBool(PGconn* conn, const char* sql, const std::string& name) {
  const char* values[] = {name.c_str()};
  ResultPtr res(PQexecParams(conn, sql, 1, nullptr, values, nullptr, nullptr, 0));
  if (res == nullptr || PQresultStatus(res.get()) != PGRES_TUPLES_OK || PQntuples(res.get()) < 1) {
    std::string message = fmt::format("postgres locker: {}", ErrorText(conn, res.get()));
    if (PQstatus(conn) != CONNECTION_OK) return Unavailable(std::move(message));
    return Internal(std::move(message));
  }
  return std::string(PQgetvalue(res.get(), 0, 0));
}

constexpr const char* kTryLock = "SELECT pg_try_advisory_lock(hashtext($1))";
constexpr const char* kUnlock = "SELECT pg_advisory_unlock(hashtext($1))";

// Holds the session that holds the advisory lock.
class PostgresLock final : public Lock {
 public:
  PostgresLock(ConnPtr conn, std::string name) : conn_(std::move(conn)), name_(std::move(name)) {}
  ~PostgresLock() override {
    // Unlock and wait for the answer, so the lock is free by the time we return (closing
    // alone would release it only once the server notices the session ended). Closing
    // the session releases it anyway if the unlock fails.
    if (PQstatus(conn_.get()) == CONNECTION_OK) (void)QueryBool(conn_.get(), kUnlock, name_);
  }

 private:
  ConnPtr conn_;
  std::string name_;
};

}  // namespace

PostgresLocker::PostgresLocker(std::string dsn) : dsn_(std::move(dsn)) {}

Result<std::unique_ptr<Lock>> PostgresLocker::TryAcquire(std::string_view name) {
  try {
    if (name.empty()) return InvalidArgument("a lock needs a name");
    ConnPtr conn(PQconnectdb(dsn_.c_str()));
    if (conn == nullptr) return Unavailable("postgres locker: connecting: out of memory");
    if (PQstatus(conn.get()) != CONNECTION_OK) {
      return Unavailable(fmt::format("postgres locker: connecting: {}", ErrorText(conn.get(), nullptr)));
    }
    if (PQsetClientEncoding(conn.get(), "UTF8") != 0) {
      return Unavailable(
          fmt::format("postgres locker: setting encoding: {}", ErrorText(conn.get(), nullptr)));
    }
    std::string key(name);
    Result<std::string> got = QueryBool(conn.get(), kTryLock, key);
    if (!got.ok()) return got.status();
    if (*got != "t") return FailedPrecondition(fmt::format("lock {} is held", key));
    return std::unique_ptr<Lock>(std::make_unique<PostgresLock>(std::move(conn), std::move(key)));
  } catch (const std::exception& e) {
    return Internal(fmt::format("postgres locker: {}", e.what()));
  }
}

}  // namespace baton

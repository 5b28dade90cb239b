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
#include "datastore/sql/datastore.h"

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
class PostgresDatastore final : public sql::SqlDatastore {
 public:
  // Connects (one connection, to check the server and migrate) and applies missing
  // migrations. Fails kUnavailable when the server cannot be reached, and
  // kFailedPrecondition when its schema is newer than this binary knows.
  static Result<std::unique_ptr<PostgresDatastore>> Open(PostgresOptions options);

  // The value a session of the pool has for a server setting (`current_setting(name)`):
  // what the pinned settings (time zone, synchronous_commit) hold, for tests and checks.
  Result<std::string> SessionSetting(std::string_view name);

  // Closes every pooled connection. Calls still running must have returned.
  ~PostgresDatastore() override;

  const PostgresOptions& options() const { return options_; }

 private:
  using Connection = postgres_internal::Connection;
  using Op = std::function<Status(Connection&)>;

  explicit PostgresDatastore(PostgresOptions options);

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

 protected:
  // sql::SqlDatastore's backend: Write runs `op` on a borrowed connection inside BEGIN ..
  // COMMIT (sent with its first and last statements: a write of one statement runs as
  // its own transaction, in one round trip); Read outside a transaction, or for a
  // snapshot in a REPEATABLE READ one; Alone outside a transaction.
  Status Write(const sql::SessionOp& op) override;
  Status Read(const sql::SessionOp& op, bool snapshot) override;
  Status Alone(const sql::SessionOp& op) override;
};

}  // namespace baton

// PostgresLocker: a Locker whose lock space is a PostgreSQL server's session-level
// advisory locks, shared by every coordinator connected to the same database.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "locker/locker.h"

namespace baton {

// Thread-safety: every method may be called from any thread. Each held lock has a session
// (connection) of its own, taken from a small pool of idle sessions (or opened), on which
// pg_try_advisory_lock(hashtext(name)) — or, for Acquire, pg_advisory_lock with the
// session's lock_timeout set to the wait — is taken; the returned Lock releases it
// (pg_advisory_unlock) when destroyed and gives the session back to the pool. Because a
// held lock is its own session, a second acquisition of the same name fails (or waits)
// even from this process, and a holder that dies (or whose connection drops) releases
// its locks with its session. Names are hashed to 32 bits, so two names that collide
// share one lock (rare, and only ever over-exclusive). A Lock may outlive its Locker.
class PostgresLocker final : public Locker {
 public:
  // `dsn`: a libpq connection string or postgresql:// URI. Connects only on TryAcquire.
  explicit PostgresLocker(std::string dsn);

  // InvalidArgument for an empty name, FailedPrecondition when the lock is held,
  // Unavailable when the server cannot be reached.
  Result<std::unique_ptr<Lock>> TryAcquire(std::string_view name) override;
  // DeadlineExceeded when the lock stays held for `timeout`.
  Result<std::unique_ptr<Lock>> Acquire(std::string_view name,
                                        std::chrono::milliseconds timeout) override;

  struct Pool;

 private:
  Result<std::unique_ptr<Lock>> Take(std::string_view name,
                                     std::optional<std::chrono::milliseconds> wait);

  std::shared_ptr<Pool> pool_;
};

}  // namespace baton

// PostgresLocker: a Locker whose lock space is a PostgreSQL server's session-level
// advisory locks, shared by every coordinator connected to the same database.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "locker/locker.h"

namespace baton {

// Thread-safety: TryAcquire may be called from any thread. Each acquisition opens a
// dedicated session (connection) and takes pg_try_advisory_lock(hashtext(name)) on it; the
// returned Lock owns that session and releases the lock (pg_advisory_unlock, then closing
// the session) when destroyed. Because a held lock is its own session, a second
// TryAcquire of the same name fails even from this process, and a holder that dies (or
// whose connection drops) releases its locks with its session. Names are hashed to 32
// bits, so two names that collide share one lock (rare, and only ever over-exclusive).
// A Lock may outlive its Locker.
class PostgresLocker final : public Locker {
 public:
  // `dsn`: a libpq connection string or postgresql:// URI. Connects only on TryAcquire.
  explicit PostgresLocker(std::string dsn);

  // InvalidArgument for an empty name, FailedPrecondition when the lock is held,
  // Unavailable when the server cannot be reached.
  Result<std::unique_ptr<Lock>> TryAcquire(std::string_view name) override;

 private:
  const std::string dsn_;
};

}  // namespace baton

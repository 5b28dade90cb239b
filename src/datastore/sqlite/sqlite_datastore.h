// SqliteDatastore: the embedded default Datastore, one SQLite file in the data directory
// (or an in-memory database for tests).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "datastore/datastore.h"
#include "datastore/sql/datastore.h"

namespace baton {

namespace crypto {
class Keyring;
}  // namespace crypto
namespace sqlite_internal {
class Connection;
}  // namespace sqlite_internal

enum class SqliteSync { kFull, kNormal, kOff };

struct SqliteOptions {
  // A file path (its directory is created if missing), or ":memory:" for a private
  // in-memory database that lives as long as the datastore.
  std::string path;
  // Apply missing schema migrations when opening. Off for callers that migrate
  // explicitly (`baton migrate`); a database newer than this binary is refused either way.
  bool auto_migrate = true;
  // PRAGMA synchronous of the write connection (the database is in WAL mode):
  // kFull fsyncs the WAL at every commit, so a write acknowledged survives a power
  // failure or an OS crash (group commit shares the fsync among a batch of writers);
  // kNormal fsyncs only at checkpoints: a crash of the process loses nothing, but a power
  // failure or OS crash may lose the last commits (jobs already acknowledged);
  // kOff never fsyncs: the same losses, and the database file may be corrupted.
  SqliteSync synchronous = SqliteSync::kFull;
  // How long a statement waits for a lock held by another process before failing.
  std::chrono::milliseconds busy_timeout{5000};
  // Most writes committed in one transaction.
  int max_batch = 512;
  // The most bytes a job may take as stored (datastore.max_job_bytes; see
  // kDefaultMaxJobBytes): CreateJob (and Transaction::CreateJob) refuse a bigger one.
  std::size_t max_job_bytes = kDefaultMaxJobBytes;
  // The keys secrets are encrypted with at rest (datastore/sql/secrets.h): null stores
  // them as they are, and an encrypted secret read without keys is an error.
  std::shared_ptr<const crypto::Keyring> keyring;
};

// Counters for observing group commit, and what the definition caches hold.
struct SqliteStats {
  std::int64_t writes = 0;   // write calls committed (or failed)
  std::int64_t commits = 0;  // transactions committed
  // Decoded large definitions kept for rows still active (a job or task that ends leaves).
  std::size_t cached_job_definitions = 0;
  std::size_t cached_task_definitions = 0;
};

// Thread-safety: all methods may be called from any thread. Writes queue up for the one
// write connection; the caller at the front of the queue leads: it runs whatever has
// queued up behind it as one transaction on its own thread (one savepoint per write, so
// a failing write is undone alone), commits, and only then wakes the other callers of
// the batch — group commit, with nothing acknowledged before it is durable, and no thread
// hand-off for an uncontended write. Reads of a file database use a pool of read-only
// connections, one per concurrent reader, each query in its own read transaction (WAL
// lets them run beside the writer). An in-memory database has a single connection, so
// its reads queue up with the writes.
class SqliteDatastore final : public sql::SqlDatastore {
 public:
  // Opens (creating if needed) the database. Fails when the
  // database cannot be opened, or its schema is newer than this binary knows.
  static Result<std::unique_ptr<SqliteDatastore>> Open(SqliteOptions options);

  // Waits for queued writes, then closes every connection.
  ~SqliteDatastore() override;

  const std::string& path() const { return options_.path; }
  SqliteStats Stats() const;
  // The write connection's PRAGMA synchronous: 0 (OFF), 1 (NORMAL) or 2 (FULL).
  Result<int> Synchronous();
  // Empties the page caches of the idle read connections (up to 2 MiB each, filled by
  // reading a big job's row and kept after the job ended). They are refilled on demand,
  // and a read after a write starts from an empty cache in WAL mode anyway. The engine
  // calls it before giving freed memory back (MemoryTrimmer).
  void ReleaseMemory();

 protected:
  // sql::SqlDatastore's backend: Write runs `op` as one write of a group-commit batch,
  // Read in a read transaction on a pooled read connection (always a snapshot), Alone
  // on the write connection with no transaction around it.
  Status Write(const sql::SessionOp& op) override;
  Status Read(const sql::SessionOp& op, bool snapshot) override;
  Status Alone(const sql::SessionOp& op) override;

 private:
  using Connection = sqlite_internal::Connection;
  using Op = std::function<Status(Connection&)>;

  // A call waiting for its turn. Lives on the caller's stack; it is done (and may be
  // freed) once `done` is set under queue_mu_.
  struct PendingOp {
    const Op* op;
    bool solo;  // runs alone, outside the batch transaction (migrations, memory reads)
    std::condition_variable cv;  // waited on with queue_mu_
    bool done = false;           // guarded by queue_mu_
    Status status;
  };

  SqliteDatastore(SqliteOptions options, std::unique_ptr<Connection> writer);

  // Runs `op` inside a batch transaction (returning once committed), or with `solo` on
  // the write connection with no transaction around it.
  Status Enqueue(const Op& op, bool solo);
  // Runs `op` in a read transaction on a pooled read connection (or, for an in-memory
  // database, queued with the writes).
  Status ReadOn(const Op& op);

  void RunBatch(const std::vector<PendingOp*>& batch);
  static void Complete(PendingOp* pending, Status status);

  Result<std::unique_ptr<Connection>> AcquireReader();
  void ReleaseReader(std::unique_ptr<Connection> reader);

  const SqliteOptions options_;
  const bool in_memory_;

  // Used only by the leader of the write queue (one thread at a time).
  std::unique_ptr<Connection> writer_;

  std::mutex queue_mu_;
  std::condition_variable drained_cv_;  // the queue emptied while closing
  std::deque<PendingOp*> queue_;        // guarded by queue_mu_; the front one leads
  bool closing_ = false;                // guarded by queue_mu_

  std::mutex readers_mu_;
  std::vector<std::unique_ptr<Connection>> idle_readers_;

  std::atomic<std::int64_t> writes_{0};
  std::atomic<std::int64_t> commits_{0};
};

}  // namespace baton

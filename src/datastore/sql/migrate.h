// The migration runner, written once: each backend keeps its own list of migrations
// (their SQL differs) and supplies the few steps that differ (how a migrator takes its
// turn, how a migration's time is stored).
#pragma once

#include <span>
#include <string_view>

#include "base/status.h"

namespace baton::sql {

struct Migration {
  int version;            // 1, 2, 3, ... without gaps
  std::string_view name;  // what it does, recorded for operators
  std::string_view sql;   // one or more statements, run in one transaction
};

// The steps of migrating one database connection.
class MigrationSteps {
 public:
  virtual ~MigrationSteps() = default;
  // The highest migration applied (0 when there is no schema_migrations table).
  virtual Result<int> SchemaVersion() = 0;
  // Opens the transaction of one migration, taking the turn of this migrator against
  // other processes, with the schema_migrations table created if missing.
  virtual Status Begin() = 0;
  // Runs the migration's statements.
  virtual Status Apply(std::string_view sql) = 0;
  // Records `migration` as applied.
  virtual Status Record(const Migration& migration) = 0;
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;
};

// kFailedPrecondition when the schema (at `version`) is newer than `latest`.
Status CheckNotNewer(int version, int latest);

// Applies the migrations of `migrations` (ascending) that the database lacks, each in
// its own transaction, re-reading the version inside it (another process may have
// migrated meanwhile). Running it again is a no-op. A schema newer than the list is
// refused, changing nothing. `backend` names the database in errors.
Status RunMigrations(MigrationSteps& steps, std::span<const Migration> migrations,
                     std::string_view backend);

}  // namespace baton::sql

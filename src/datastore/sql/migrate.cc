#include "datastore/sql/migrate.h"

#include <fmt/format.h>

#include <string>

#include "base/log.h"

namespace baton::sql {

Status CheckNotNewer(int version, int latest) {
  if (version > latest) {
    return FailedPrecondition(fmt::format(
        "the database schema is at version {}, newer than this binary knows ({}); run a newer "
        "baton",
        version, latest));
  }
  return Status::Ok();
}

Status RunMigrations(MigrationSteps& steps, std::span<const Migration> migrations,
                     std::string_view backend) {
  const int latest = migrations.empty() ? 0 : migrations.back().version;
  Result<int> before = steps.SchemaVersion();
  if (!before.ok()) return before.status();
  BATON_RETURN_IF_ERROR(CheckNotNewer(*before, latest));
  if (*before == latest) return Status::Ok();
  for (const Migration& migration : migrations) {
    if (migration.version <= *before) continue;
    bool applied = false;
    Status status = [&]() -> Status {
      BATON_RETURN_IF_ERROR(steps.Begin());
      // Re-read inside the transaction: another process may have migrated meanwhile.
      Result<int> current = steps.SchemaVersion();
      if (!current.ok()) return current.status();
      BATON_RETURN_IF_ERROR(CheckNotNewer(*current, latest));
      if (*current < migration.version) {
        BATON_RETURN_IF_ERROR(steps.Apply(migration.sql));
        BATON_RETURN_IF_ERROR(steps.Record(migration));
        applied = true;
      }
      return steps.Commit();
    }();
    if (!status.ok()) {
      steps.Rollback();
      if (status.code() == StatusCode::kFailedPrecondition) return status;
      return Status(status.code() == StatusCode::kUnavailable ? StatusCode::kUnavailable
                                                              : StatusCode::kInternal,
                    fmt::format("{}: migration {} ({}) failed: {}", backend, migration.version,
                                migration.name, status.message()));
    }
    if (applied) {
      std::string version = std::to_string(migration.version);
      log::Info("Applied schema migration", {{"version", version}, {"name", migration.name}});
    }
  }
  return Status::Ok();
}

}  // namespace baton::sql

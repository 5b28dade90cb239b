// The schema of the SQL datastore as numbered migrations, written once with dialect hooks
// (schema.cc), and migrating a database over a backend's session.
#pragma once

#include <span>

#include "base/status.h"
#include "datastore/sql/dialect.h"
#include "datastore/sql/migrate.h"
#include "datastore/sql/session.h"

namespace baton::sql {

// Every migration this binary knows, ascending by version, in `dialect`'s spelling. Both
// dialects have the same versions and names.
std::span<const Migration> Migrations(Dialect dialect);

// The version of the last migration: the schema this binary expects.
int LatestSchemaVersion();

// The highest migration applied on `session`'s database (0 when none).
Result<int> ReadSchemaVersion(Session& session, Dialect dialect);

// Applies the migrations the database lacks (RunMigrations), `session` being outside any
// transaction: each migration opens its own.
Status MigrateSchema(Session& session, Dialect dialect);

}  // namespace baton::sql

// The SQLite schema as numbered migrations, applied in order by SqliteDatastore::Migrate.
// A released migration is never edited: a schema change is a new entry at the end.
#pragma once

#include <span>
#include <string_view>

#include "datastore/sql/migrate.h"

namespace baton {

// The shared shape (sql/migrate.h), run by sql::RunMigrations.
using SqliteMigration = sql::Migration;

// Every migration this binary knows, ascending by version.
std::span<const SqliteMigration> SqliteMigrations();

// The version of the last migration: the schema this binary expects.
int LatestSqliteSchemaVersion();

}  // namespace baton

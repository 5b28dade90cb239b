// The PostgreSQL schema as numbered migrations, applied in order by
// PostgresDatastore::Migrate. A released migration is never edited: a schema change is a
// new entry at the end.
#pragma once

#include <span>
#include <string_view>

namespace baton {

struct PostgresMigration {
  int version;            // 1, 2, 3, ... without gaps
  std::string_view name;  // what it does, recorded for operators
  std::string_view sql;   // one or more statements, run in one transaction
};

// Every migration this binary knows, ascending by version.
std::span<const PostgresMigration> PostgresMigrations();

// The version of the last migration: the schema this binary expects.
int LatestPostgresSchemaVersion();

}  // namespace baton

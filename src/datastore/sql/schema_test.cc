#include "datastore/sql/schema.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string_view>

namespace baton::sql {
namespace {

constexpr std::array<Dialect, 2> kDialects = {Dialect::kSqlite, Dialect::kPostgres};

// FNV-1a: a fingerprint of a migration's text that is the same on every platform.
std::uint64_t Fingerprint(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

TEST(SchemaTest, MigrationsAreNumberedWithoutGaps) {
  for (Dialect dialect : kDialects) {
    auto migrations = Migrations(dialect);
    ASSERT_FALSE(migrations.empty());
    for (std::size_t i = 0; i < migrations.size(); ++i) {
      EXPECT_EQ(migrations[i].version, static_cast<int>(i) + 1);
      EXPECT_FALSE(migrations[i].name.empty());
      EXPECT_FALSE(migrations[i].sql.empty());
    }
    EXPECT_EQ(LatestSchemaVersion(), migrations.back().version);
  }
}

TEST(SchemaTest, BothDialectsHaveTheSameMigrations) {
  auto sqlite = Migrations(Dialect::kSqlite);
  auto postgres = Migrations(Dialect::kPostgres);
  ASSERT_EQ(sqlite.size(), postgres.size());
  for (std::size_t i = 0; i < sqlite.size(); ++i) {
    EXPECT_EQ(sqlite[i].version, postgres[i].version);
    EXPECT_EQ(sqlite[i].name, postgres[i].name);
  }
}

TEST(SchemaTest, EveryHookIsSpelled) {
  for (Dialect dialect : kDialects) {
    for (const Migration& m : Migrations(dialect)) {
      for (std::string_view hook : {"{key}", "{int64}", "{real}", "{json}", "{tags_index}"}) {
        EXPECT_EQ(m.sql.find(hook), std::string_view::npos) << m.version << " " << hook;
      }
    }
  }
  std::string_view initial_sqlite = Migrations(Dialect::kSqlite)[0].sql;
  std::string_view initial_postgres = Migrations(Dialect::kPostgres)[0].sql;
  EXPECT_NE(initial_sqlite.find("id           TEXT PRIMARY KEY,"), std::string_view::npos);
  EXPECT_NE(initial_postgres.find("id           TEXT COLLATE \"C\" PRIMARY KEY,"),
            std::string_view::npos);
  EXPECT_NE(initial_postgres.find("CREATE INDEX jobs_tags ON jobs USING GIN (tags);"),
            std::string_view::npos);
  EXPECT_EQ(initial_sqlite.find("GIN"), std::string_view::npos);
}

// A released migration is never edited, in either spelling: a database migrated by an
// older binary must have the schema a new one gets. These are the fingerprints of the
// texts as released (each backend's own migrations file before the schema was written
// once); a schema change is a new migration, with its fingerprints added here.
TEST(SchemaTest, ReleasedMigrationsAreUnchanged) {
  constexpr std::array<std::uint64_t, 10> kSqlite = {
      0xd1c046195520bbebull, 0xc16824ac09a8f481ull, 0xb499af652876e636ull, 0x970f18c3e22c7f50ull,
      0xb01403edda57bf0bull, 0x3f2e158c5cc8b2e7ull, 0xc6af385b251b7be1ull, 0xdd3f743ebc90a3f4ull,
      0x313833b207d84150ull, 0xbc13feb0b96de04full};
  constexpr std::array<std::uint64_t, 10> kPostgres = {
      0x42c36d7eef7879dfull, 0xc16824ac09a8f481ull, 0xb499af652876e636ull, 0x970f18c3e22c7f50ull,
      0x007ea09b7ea21201ull, 0x3f2e158c5cc8b2e7ull, 0xff304f049d26ae7cull, 0x5d9b0f3600b77236ull,
      0x6aabd9e89192890full, 0xbc13feb0b96de04full};
  auto sqlite = Migrations(Dialect::kSqlite);
  auto postgres = Migrations(Dialect::kPostgres);
  ASSERT_GE(sqlite.size(), kSqlite.size());
  ASSERT_GE(postgres.size(), kPostgres.size());
  for (std::size_t i = 0; i < kSqlite.size(); ++i) {
    EXPECT_EQ(Fingerprint(sqlite[i].sql), kSqlite[i]) << "sqlite migration " << i + 1;
    EXPECT_EQ(Fingerprint(postgres[i].sql), kPostgres[i]) << "postgres migration " << i + 1;
  }
}

}  // namespace
}  // namespace baton::sql

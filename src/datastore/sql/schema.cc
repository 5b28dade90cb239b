#include "datastore/sql/schema.h"

#include <fmt/format.h>

#include <array>
#include <string>
#include <vector>

#include "core/records.h"
#include "datastore/sql/statements.h"

namespace baton::sql {
namespace {

// The schema, written once: each migration's text names the types that differ by
// dialect with a hook, spelled by Spell below:
//   {key}    an id column: TEXT; on PostgreSQL TEXT COLLATE "C", so ids sort bytewise
//            whatever the database's locale (as SQLite's do);
//   {int64}  a time (milliseconds since the Unix epoch, UTC: exact, and ordering by them
//            is ordering by time) or another 64-bit count: INTEGER; BIGINT;
//   {real}   REAL; DOUBLE PRECISION;
//   {json}   the job tags, a JSON array: TEXT; JSONB, for `tags ? 'x'` searches;
//   {tags_index}  nothing; the GIN index those searches use.
// Definitions and contexts are JSON text exactly as written (job_json.h's shape; TEXT, not
// JSONB, so a stored definition reads back byte for byte). Columns a query filters or
// sorts on are copied out of the JSON and indexed. A released migration is never edited
// (its spelling in either dialect neither: migrate.cc records only the version, and the
// schema of a database migrated long ago must equal a new one's): a schema change is a
// new entry at the end.

constexpr std::string_view kInitialSchema = R"sql(
CREATE TABLE jobs (
  id           {key} PRIMARY KEY,
  parent_id    {key} NOT NULL DEFAULT '',
  state        TEXT NOT NULL,
  name         TEXT NOT NULL,
  description  TEXT NOT NULL,
  tags         {json} NOT NULL DEFAULT '[]',
  created_at   {int64} NOT NULL,
  started_at   {int64},
  completed_at {int64},
  failed_at    {int64},
  delete_at    {int64},
  definition   TEXT NOT NULL,
  position     INTEGER NOT NULL,
  task_count   INTEGER NOT NULL,
  progress     {real} NOT NULL,
  result       TEXT NOT NULL,
  error        TEXT NOT NULL,
  context      TEXT NOT NULL
);
CREATE INDEX jobs_created_at ON jobs (created_at, id);
CREATE INDEX jobs_state ON jobs (state, created_at, id);
CREATE INDEX jobs_delete_at ON jobs (delete_at) WHERE delete_at IS NOT NULL;{tags_index}

CREATE TABLE tasks (
  id           {key} PRIMARY KEY,
  job_id       {key} NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  parent_id    {key} NOT NULL DEFAULT '',
  position     INTEGER NOT NULL,
  state        TEXT NOT NULL,
  created_at   {int64} NOT NULL,
  scheduled_at {int64},
  started_at   {int64},
  completed_at {int64},
  failed_at    {int64},
  definition   TEXT NOT NULL,
  error        TEXT NOT NULL,
  result       TEXT NOT NULL,
  node_id      TEXT NOT NULL,
  progress     {real} NOT NULL,
  redelivered  INTEGER NOT NULL,
  each_size    INTEGER NOT NULL,
  each_index   INTEGER NOT NULL,
  completions  INTEGER NOT NULL,
  subjob_id    TEXT NOT NULL
);
CREATE INDEX tasks_job ON tasks (job_id, position, created_at, id);
CREATE INDEX tasks_parent ON tasks (parent_id, created_at, id) WHERE parent_id <> '';
CREATE INDEX tasks_state ON tasks (state, created_at, id);

CREATE TABLE log_parts (
  id         {key} PRIMARY KEY,
  task_id    {key} NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  job_id     {key} NOT NULL,
  number     INTEGER NOT NULL,
  contents   TEXT NOT NULL,
  created_at {int64} NOT NULL
);
CREATE INDEX log_parts_task ON log_parts (task_id, number);
CREATE INDEX log_parts_job ON log_parts (job_id, created_at, number, id);

CREATE TABLE nodes (
  id                {key} PRIMARY KEY,
  name              TEXT NOT NULL,
  hostname          TEXT NOT NULL,
  version           TEXT NOT NULL,
  queue             TEXT NOT NULL,
  started_at        {int64} NOT NULL,
  last_heartbeat_at {int64} NOT NULL,
  cpu_percent       {real} NOT NULL,
  task_count        INTEGER NOT NULL,
  status            TEXT NOT NULL
);
CREATE INDEX nodes_heartbeat ON nodes (last_heartbeat_at, id);
)sql";

// A row's loop variables, for the children of an each child that is itself composite.
constexpr std::string_view kTaskScope = R"sql(
ALTER TABLE tasks ADD COLUMN scope TEXT NOT NULL DEFAULT '{}';
)sql";

// What a decision about a composite reads of its children (Transaction::
// NextCreatedChildren, CountChildren): its next CREATED ones in each_index order and
// its counts by state, without visiting every child.
constexpr std::string_view kTasksParentState = R"sql(
CREATE INDEX tasks_parent_state ON tasks (parent_id, state, each_index, created_at, id)
  WHERE parent_id <> '';
)sql";

// A number every write of a job's context raises, so that a coordinator keeps a running
// job's context parsed and reads it again only once it changed (Transaction::
// GetJobState).
constexpr std::string_view kJobContextVersion = R"sql(
ALTER TABLE jobs ADD COLUMN context_version INTEGER NOT NULL DEFAULT 0;
)sql";

// The webhook outbox: a delivery per webhook an event calls, written in the transaction of
// the state change, with its attempts (history: a JSON array). Due ones are found
// through a partial index on the pending.
constexpr std::string_view kWebhookDeliveries = R"sql(
CREATE TABLE webhook_deliveries (
  id              {key} PRIMARY KEY,
  job_id          {key} NOT NULL,
  task_id         {key} NOT NULL,
  event           TEXT NOT NULL,
  url             TEXT NOT NULL,
  headers         TEXT NOT NULL,
  secret          TEXT NOT NULL,
  body            TEXT NOT NULL,
  state           TEXT NOT NULL,
  attempts        INTEGER NOT NULL,
  created_at      {int64} NOT NULL,
  next_attempt_at {int64} NOT NULL,
  completed_at    {int64},
  error           TEXT NOT NULL,
  history         TEXT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id)
  WHERE state = 'PENDING';
CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id, created_at, id);
)sql";

// Retention: log parts by age (Transaction::DeleteLogPartsBefore).
constexpr std::string_view kLogPartsCreatedAt = R"sql(
CREATE INDEX log_parts_created_at ON log_parts (created_at);
)sql";

// Scheduled jobs: a job definition (stored as the jobs table stores one) fired on a cron
// schedule. last_tick_at / next_tick_at record the ticks handled, advanced in the
// transaction that creates a tick's job, under the row's lock: each tick fires once. Due
// ones are found through a partial index on the active.
constexpr std::string_view kScheduledJobs = R"sql(
CREATE TABLE scheduled_jobs (
  id                 {key} PRIMARY KEY,
  state              TEXT NOT NULL,
  cron               TEXT NOT NULL,
  timezone           TEXT NOT NULL,
  overlap            TEXT NOT NULL,
  catch_up_window_ms {int64} NOT NULL,
  catch_up           TEXT NOT NULL,
  definition         TEXT NOT NULL,
  created_by         TEXT NOT NULL,
  created_at         {int64} NOT NULL,
  updated_at         {int64} NOT NULL,
  last_tick_at       {int64} NOT NULL,
  next_tick_at       {int64} NOT NULL,
  buffered_tick_at   {int64},
  last_job_id        TEXT NOT NULL
);
CREATE INDEX scheduled_jobs_due ON scheduled_jobs (next_tick_at, id) WHERE state = 'ACTIVE';
CREATE INDEX scheduled_jobs_created ON scheduled_jobs (created_at, id);
)sql";

// A node's resident memory, for the metrics.
constexpr std::string_view kNodeMemory = R"sql(
ALTER TABLE nodes ADD COLUMN memory_bytes {int64} NOT NULL DEFAULT 0;
)sql";

// Users, API keys and who may see a job (docs/auth.md). A job keeps its creator and its
// permissions as text ("|u:ann|r:ops|", core/auth.h AccessText) beside its definition, so
// that a user's list of jobs is filtered in its query. Roles are a JSON array of names;
// API keys are kept as the SHA-256 of their text.
constexpr std::string_view kUsers = R"sql(
ALTER TABLE jobs ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN access TEXT NOT NULL DEFAULT '';
CREATE TABLE users (
  id            {key} PRIMARY KEY,
  username      {key} NOT NULL UNIQUE,
  name          TEXT NOT NULL,
  password_hash TEXT NOT NULL,
  roles         TEXT NOT NULL,
  created_at    {int64} NOT NULL
);
CREATE TABLE api_keys (
  id         {key} PRIMARY KEY,
  username   {key} NOT NULL,
  name       TEXT NOT NULL,
  key_hash   {key} NOT NULL UNIQUE,
  created_at {int64} NOT NULL,
  revoked_at {int64}
);
CREATE INDEX api_keys_user ON api_keys (username, created_at, id);
)sql";

// The jobs that ended in a window (the UI's failure rate over the last hour): each end
// time counted through its own index.
constexpr std::string_view kJobsEndedAt = R"sql(
CREATE INDEX jobs_completed_at ON jobs (completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX jobs_failed_at ON jobs (failed_at) WHERE failed_at IS NOT NULL;
)sql";

// Who may see a scheduled job, as jobs.access (kUsers): its definition's permissions as
// text, so that a user's list is filtered in its query. NULL for the rows stored before:
// SqlDatastore::Migrate fills it in from their definitions.
constexpr std::string_view kScheduledJobsAccess = R"sql(
ALTER TABLE scheduled_jobs ADD COLUMN access TEXT;
)sql";

// The drops (Datastore::DroppedTasks): cancelled rows that never started, by the time of
// their cancel, for telling a worker that starts (or restarts) which tasks it may still
// find in a queue and must not run.
constexpr std::string_view kTasksDropped = R"sql(
CREATE INDEX tasks_dropped ON tasks (completed_at, id)
  WHERE state = 'CANCELLED' AND started_at IS NULL;
)sql";

// A graph's steps (core/graph.h): its top-level tasks' states, written with its state.
constexpr std::string_view kJobSteps = R"sql(
ALTER TABLE jobs ADD COLUMN steps TEXT NOT NULL DEFAULT '';
)sql";

// A job's outcome while its cleanup (onFailure, finally) runs: the state it ends in.
constexpr std::string_view kJobEnding = R"sql(
ALTER TABLE jobs ADD COLUMN ending TEXT NOT NULL DEFAULT '';
)sql";

// Why a failed runnable row failed (retry.on): "exit:CODE", "timeout", "oom", "lost" or
// "error"; "" for none.
constexpr std::string_view kTaskReason = R"sql(
ALTER TABLE tasks ADD COLUMN reason TEXT NOT NULL DEFAULT '';
)sql";

// A graph parallel's steps (core/graph.h): its children's states, written with its row.
constexpr std::string_view kTaskSteps = R"sql(
ALTER TABLE tasks ADD COLUMN steps TEXT NOT NULL DEFAULT '';
)sql";

constexpr std::array<Migration, 16> kMigrations = {{
    {1, "initial schema: jobs, tasks, log_parts, nodes", kInitialSchema},
    {2, "tasks.scope: the loop variables of a row", kTaskScope},
    {3, "tasks_parent_state: a composite's children by state", kTasksParentState},
    {4, "jobs.context_version: raised by every write of the context", kJobContextVersion},
    {5, "webhook_deliveries: the webhook outbox", kWebhookDeliveries},
    {6, "log_parts_created_at: log retention by age", kLogPartsCreatedAt},
    {7, "scheduled_jobs: jobs fired on a cron schedule", kScheduledJobs},
    {8, "users, api_keys, jobs.created_by and jobs.access: authentication", kUsers},
    {9, "nodes.memory_bytes: a node's resident memory", kNodeMemory},
    {10, "jobs_completed_at, jobs_failed_at: jobs ended in a window", kJobsEndedAt},
    {11, "scheduled_jobs.access: who may see a scheduled job", kScheduledJobsAccess},
    {12, "tasks_dropped: cancelled rows that never started", kTasksDropped},
    {13, "jobs.steps: a graph's top-level tasks' states", kJobSteps},
    {14, "jobs.ending: the outcome of a job whose cleanup runs", kJobEnding},
    {15, "tasks.reason: why a failed row failed", kTaskReason},
    {16, "tasks.steps: a graph parallel's children's states", kTaskSteps},
}};

// `text` with its hooks spelled in `dialect`.
std::string Spell(Dialect dialect, std::string_view text) {
  const bool pg = dialect == Dialect::kPostgres;
  const std::array<std::pair<std::string_view, std::string_view>, 5> hooks = {{
      {"{key}", pg ? "TEXT COLLATE \"C\"" : "TEXT"},
      {"{int64}", pg ? "BIGINT" : "INTEGER"},
      {"{real}", pg ? "DOUBLE PRECISION" : "REAL"},
      {"{json}", pg ? "JSONB" : "TEXT"},
      {"{tags_index}", pg ? "\nCREATE INDEX jobs_tags ON jobs USING GIN (tags);" : ""},
  }};
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  std::size_t i = 0;
  while (i < text.size()) {
    bool hooked = false;
    if (text[i] == '{') {
      for (const auto& [hook, spelling] : hooks) {
        if (text.substr(i).starts_with(hook)) {
          out += spelling;
          i += hook.size();
          hooked = true;
          break;
        }
      }
    }
    if (!hooked) out += text[i++];
  }
  return out;
}

// The migrations in `dialect`'s spelling, built once; their text lives as long as the
// process.
std::vector<Migration> Build(Dialect dialect) {
  static std::array<std::string, kMigrations.size()> sqlite_text, postgres_text;
  auto& text = dialect == Dialect::kSqlite ? sqlite_text : postgres_text;
  std::vector<Migration> out;
  for (std::size_t i = 0; i < kMigrations.size(); ++i) {
    text[i] = Spell(dialect, kMigrations[i].sql);
    out.push_back({kMigrations[i].version, kMigrations[i].name, text[i]});
  }
  return out;
}

// The steps of RunMigrations on one session, outside any transaction but the ones they
// open. What differs by dialect: how a migrator takes its turn against other processes
// (SQLite: BEGIN IMMEDIATE takes the database's write lock; PostgreSQL: a
// transaction-level advisory lock, its key "baton" in ASCII) and how applied_at is
// stored (SQLite: text, PostgreSQL: milliseconds).
class SessionSteps final : public MigrationSteps {
 public:
  SessionSteps(Session& session, Dialect dialect) : s_(session), dialect_(dialect) {}

  Result<int> SchemaVersion() override { return ReadSchemaVersion(s_, dialect_); }
  Status Begin() override {
    if (dialect_ == Dialect::kSqlite) {
      BATON_RETURN_IF_ERROR(s_.ExecScript("BEGIN IMMEDIATE"));
    } else {
      BATON_RETURN_IF_ERROR(s_.ExecScript("BEGIN"));
      BATON_RETURN_IF_ERROR(s_.ExecScript("SELECT pg_advisory_xact_lock(435459565934)"));
    }
    return s_.ExecScript(fmt::format(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT "
        "NOT NULL DEFAULT '', applied_at {} NOT NULL)",
        dialect_ == Dialect::kSqlite ? "TEXT" : "BIGINT"));
  }
  Status Apply(std::string_view sql) override { return s_.ExecScript(sql); }
  Status Record(const Migration& migration) override {
    const TimePoint now = Now();
    return s_.QueryOnce(
        StatementsFor(dialect_).record_migration.sql,
        [&](ParamSink& p) {
          p.Int(migration.version);
          p.Text(migration.name);
          if (dialect_ == Dialect::kSqlite) {
            p.Text(FormatTime(now));
          } else {
            p.Time(now);
          }
        },
        [](const RowView&) { return Status::Ok(); });
  }
  Status Commit() override { return s_.ExecScript("COMMIT"); }
  // Outside a transaction (SQLite rolls one back by itself on some errors) it fails,
  // harmlessly.
  void Rollback() override { (void)s_.ExecScript("ROLLBACK"); }

 private:
  Session& s_;
  const Dialect dialect_;
};

}  // namespace

std::span<const Migration> Migrations(Dialect dialect) {
  static const std::vector<Migration> sqlite = Build(Dialect::kSqlite);
  static const std::vector<Migration> postgres = Build(Dialect::kPostgres);
  return dialect == Dialect::kSqlite ? sqlite : postgres;
}

int LatestSchemaVersion() { return kMigrations.back().version; }

Result<int> ReadSchemaVersion(Session& session, Dialect dialect) {
  const std::string exists =
      dialect == Dialect::kSqlite
          ? "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'"
          : "SELECT 1 WHERE to_regclass('schema_migrations') IS NOT NULL";
  bool has_table = false;
  BATON_RETURN_IF_ERROR(session.QueryOnce(
      exists, [](ParamSink&) {},
      [&](const RowView&) {
        has_table = true;
        return Status::Ok();
      }));
  if (!has_table) return 0;
  int version = 0;
  BATON_RETURN_IF_ERROR(session.QueryOnce(
      StatementsFor(dialect).max_schema_version.sql, [](ParamSink&) {},
      [&](const RowView& row) {
        version = row.Int32(0);
        return Status::Ok();
      }));
  return version;
}

Status MigrateSchema(Session& session, Dialect dialect) {
  SessionSteps steps(session, dialect);
  return RunMigrations(steps, Migrations(dialect),
                       dialect == Dialect::kSqlite ? "sqlite" : "postgres");
}

}  // namespace baton::sql

#include "datastore/postgres/postgres_migrations.h"

#include <array>

namespace baton {
namespace {

// Mirrors the SQLite schema (sqlite_migrations.cc). Times are BIGINT milliseconds since
// the Unix epoch (UTC): exact, and ordering by them is ordering by time. Definitions and
// contexts are JSON text exactly as written (job_json.h's shape; TEXT, not JSONB, so a
// stored definition reads back byte for byte); tags are JSONB for `tags ? 'x'` searches.
// Ids sort bytewise (COLLATE "C") whatever the database's locale.
constexpr std::string_view kInitialSchema = R"sql(
CREATE TABLE jobs (
  id           TEXT COLLATE "C" PRIMARY KEY,
  parent_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
  state        TEXT NOT NULL,
  name         TEXT NOT NULL,
  description  TEXT NOT NULL,
  tags         JSONB NOT NULL DEFAULT '[]',
  created_at   BIGINT NOT NULL,
  started_at   BIGINT,
  completed_at BIGINT,
  failed_at    BIGINT,
  delete_at    BIGINT,
  definition   TEXT NOT NULL,
  position     INTEGER NOT NULL,
  task_count   INTEGER NOT NULL,
  progress     DOUBLE PRECISION NOT NULL,
  result       TEXT NOT NULL,
  error        TEXT NOT NULL,
  context      TEXT NOT NULL
);
CREATE INDEX jobs_created_at ON jobs (created_at, id);
CREATE INDEX jobs_state ON jobs (state, created_at, id);
CREATE INDEX jobs_delete_at ON jobs (delete_at) WHERE delete_at IS NOT NULL;
CREATE INDEX jobs_tags ON jobs USING GIN (tags);

CREATE TABLE tasks (
  id           TEXT COLLATE "C" PRIMARY KEY,
  job_id       TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  parent_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
  position     INTEGER NOT NULL,
  state        TEXT NOT NULL,
  created_at   BIGINT NOT NULL,
  scheduled_at BIGINT,
  started_at   BIGINT,
  completed_at BIGINT,
  failed_at    BIGINT,
  definition   TEXT NOT NULL,
  error        TEXT NOT NULL,
  result       TEXT NOT NULL,
  node_id      TEXT NOT NULL,
  progress     DOUBLE PRECISION NOT NULL,
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
  id         TEXT COLLATE "C" PRIMARY KEY,
  task_id    TEXT COLLATE "C" NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  job_id     TEXT COLLATE "C" NOT NULL,
  number     INTEGER NOT NULL,
  contents   TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX log_parts_task ON log_parts (task_id, number);
CREATE INDEX log_parts_job ON log_parts (job_id, created_at, number, id);

CREATE TABLE nodes (
  id                TEXT COLLATE "C" PRIMARY KEY,
  name              TEXT NOT NULL,
  hostname          TEXT NOT NULL,
  version           TEXT NOT NULL,
  queue             TEXT NOT NULL,
  started_at        BIGINT NOT NULL,
  last_heartbeat_at BIGINT NOT NULL,
  cpu_percent       DOUBLE PRECISION NOT NULL,
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
  id              TEXT COLLATE "C" PRIMARY KEY,
  job_id          TEXT COLLATE "C" NOT NULL,
  task_id         TEXT COLLATE "C" NOT NULL,
  event           TEXT NOT NULL,
  url             TEXT NOT NULL,
  headers         TEXT NOT NULL,
  secret          TEXT NOT NULL,
  body            TEXT NOT NULL,
  state           TEXT NOT NULL,
  attempts        INTEGER NOT NULL,
  created_at      BIGINT NOT NULL,
  next_attempt_at BIGINT NOT NULL,
  completed_at    BIGINT,
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
  id                 TEXT COLLATE "C" PRIMARY KEY,
  state              TEXT NOT NULL,
  cron               TEXT NOT NULL,
  timezone           TEXT NOT NULL,
  overlap            TEXT NOT NULL,
  catch_up_window_ms BIGINT NOT NULL,
  catch_up           TEXT NOT NULL,
  definition         TEXT NOT NULL,
  created_by         TEXT NOT NULL,
  created_at         BIGINT NOT NULL,
  updated_at         BIGINT NOT NULL,
  last_tick_at       BIGINT NOT NULL,
  next_tick_at       BIGINT NOT NULL,
  buffered_tick_at   BIGINT,
  last_job_id        TEXT NOT NULL
);
CREATE INDEX scheduled_jobs_due ON scheduled_jobs (next_tick_at, id) WHERE state = 'ACTIVE';
CREATE INDEX scheduled_jobs_created ON scheduled_jobs (created_at, id);
)sql";

// A node's resident memory, for the metrics.
constexpr std::string_view kNodeMemory = R"sql(
ALTER TABLE nodes ADD COLUMN memory_bytes BIGINT NOT NULL DEFAULT 0;
)sql";

// Users, API keys and who may see a job (docs/auth.md). A job keeps its creator and its
// permissions as text ("|u:ann|r:ops|", core/auth.h AccessText) beside its definition, so
// that a user's list of jobs is filtered in its query. Roles are a JSON array of names;
// API keys are kept as the SHA-256 of their text.
constexpr std::string_view kUsers = R"sql(
ALTER TABLE jobs ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN access TEXT NOT NULL DEFAULT '';
CREATE TABLE users (
  id            TEXT COLLATE "C" PRIMARY KEY,
  username      TEXT COLLATE "C" NOT NULL UNIQUE,
  name          TEXT NOT NULL,
  password_hash TEXT NOT NULL,
  roles         TEXT NOT NULL,
  created_at    BIGINT NOT NULL
);
CREATE TABLE api_keys (
  id         TEXT COLLATE "C" PRIMARY KEY,
  username   TEXT COLLATE "C" NOT NULL,
  name       TEXT NOT NULL,
  key_hash   TEXT COLLATE "C" NOT NULL UNIQUE,
  created_at BIGINT NOT NULL,
  revoked_at BIGINT
);
CREATE INDEX api_keys_user ON api_keys (username, created_at, id);
)sql";

// The jobs that ended in a window (the UI's failure rate over the last hour): each end
// time counted through its own index.
constexpr std::string_view kJobsEndedAt = R"sql(
CREATE INDEX jobs_completed_at ON jobs (completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX jobs_failed_at ON jobs (failed_at) WHERE failed_at IS NOT NULL;
)sql";

constexpr std::array<PostgresMigration, 10> kMigrations = {{
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
}};

}  // namespace

std::span<const PostgresMigration> PostgresMigrations() { return kMigrations; }

int LatestPostgresSchemaVersion() { return kMigrations.back().version; }

}  // namespace baton

#include "datastore/sql/statements.h"

#include <fmt/format.h>

#include "datastore/sql/sql_columns.h"

namespace baton::sql {
namespace {

Statements Build(Dialect d) {
  auto st = [d](const char* name, std::string_view sql) {
    return Statement{name, Placeholders(d, sql)};
  };
  const std::string for_update(ForUpdate(d));
  Statements s;
  s.dialect = d;

  s.insert_job = st("insert_job", "INSERT INTO jobs (" BATON_SQL_JOB_COLUMNS
                                  ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "
                                  "$13, $14, $15, $16, $17, $18, $19, $20, $21, $22)");
  s.update_job =
      st("update_job",
         "UPDATE jobs SET parent_id = $2, state = $3, name = $4, description = $5, "
         "tags = $6, created_at = $7, started_at = $8, completed_at = $9, "
         "failed_at = $10, delete_at = $11, definition = $12, position = $13, "
         "task_count = $14, progress = $15, result = $16, error = $17, context = $18, "
         "context_version = context_version + 1, created_by = $19, access = $20, steps = $21, "
         "ending = $22 "
         "WHERE id = $1");
  s.update_job_keep_times =
      st("update_job_keep_times",
         "UPDATE jobs SET parent_id = $2, state = $3, name = $4, description = $5, tags = $6, "
         "started_at = $8, completed_at = $9, failed_at = $10, definition = $12, position = $13, "
         "task_count = $14, progress = $15, result = $16, error = $17, context = $18, "
         "context_version = context_version + 1, created_by = $19, access = $20, steps = $21, "
         "ending = $22 "
         "WHERE id = $1");
  s.update_job_fields =
      st("update_job_fields",
         "UPDATE jobs SET parent_id = $2, name = $4, description = $5, tags = $6, "
         "started_at = $8, completed_at = $9, failed_at = $10, definition = $12, position = $13, "
         "task_count = $14, progress = $15, result = $16, error = $17, context = $18, "
         "context_version = context_version + 1, created_by = $19, access = $20, steps = $21, "
         "ending = $22 "
         "WHERE id = $1");
  s.select_job = st("select_job", "SELECT " BATON_SQL_JOB_COLUMNS " FROM jobs WHERE id = $1");
  s.select_job_for_update =
      st("select_job_for_update",
         "SELECT " BATON_SQL_JOB_COLUMNS " FROM jobs WHERE id = $1" + for_update);
  s.select_job_state_for_update =
      st("select_job_state_for_update",
         "SELECT id, parent_id, state, created_at, started_at, completed_at, failed_at, "
         "delete_at, position, task_count, progress, result, error, steps, ending FROM jobs "
         "WHERE id = $1" +
             for_update);
  s.update_job_state_only =
      st("update_job_state_only",
         "UPDATE jobs SET state = $2, started_at = $3, completed_at = $4, failed_at = $5, "
         "delete_at = $6, position = $7, progress = $8, result = $9, error = $10, steps = $11, "
         "ending = $12 WHERE id = $1");
  s.update_job_state_and_context =
      st("update_job_state_and_context",
         "UPDATE jobs SET state = $2, started_at = $3, completed_at = $4, failed_at = $5, "
         "delete_at = $6, position = $7, progress = $8, result = $9, error = $10, steps = $11, "
         "ending = $12, context = $13, context_version = context_version + 1 WHERE id = $1");
  s.select_job_state_version_for_update =
      st("select_job_state_version_for_update",
         "SELECT id, parent_id, state, created_at, started_at, completed_at, failed_at, "
         "delete_at, position, task_count, progress, result, error, steps, ending, "
         "context_version "
         "FROM jobs "
         "WHERE id = $1" +
             for_update);
  s.select_job_context = st("select_job_context", "SELECT context FROM jobs WHERE id = $1");
  s.select_job_definition =
      st("select_job_definition", "SELECT definition FROM jobs WHERE id = $1");
  s.jobs_in_state = st("jobs_in_state", "SELECT " BATON_SQL_JOB_COLUMNS " FROM jobs WHERE " +
                                            InList(d, "state", 1) + " ORDER BY created_at, id");
  s.job_exists = st("job_exists", "SELECT 1 FROM jobs WHERE id = $1");
  s.delete_job_log_parts = st("delete_job_log_parts", "DELETE FROM log_parts WHERE job_id = $1");
  s.delete_job_tasks = st("delete_job_tasks", "DELETE FROM tasks WHERE job_id = $1");
  s.delete_job = st("delete_job", "DELETE FROM jobs WHERE id = $1");
  // A job and its sub-jobs, at any depth: through the subjob tasks' links (tasks_job
  // index), not the sub-jobs' parent_id, which has no index.
  s.job_tree = st("job_tree",
                  "WITH RECURSIVE tree(id) AS (SELECT CAST($1 AS TEXT) UNION "
                  "SELECT t.subjob_id FROM tasks t JOIN tree ON t.job_id = tree.id "
                  "WHERE t.subjob_id <> '') SELECT id FROM tree");
  // Finished jobs whose delete_at has come (jobs_delete_at index), soonest first.
  s.jobs_due_for_deletion =
      st("jobs_due_for_deletion",
         "SELECT id FROM jobs WHERE delete_at IS NOT NULL AND delete_at <= $1 "
         "AND state IN ('COMPLETED', 'FAILED', 'CANCELLED') ORDER BY delete_at, id LIMIT $2");

  s.insert_task = st("insert_task", "INSERT INTO tasks (" BATON_SQL_TASK_COLUMNS
                                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
                                    "$12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)");
  s.update_task = st("update_task",
                     "UPDATE tasks SET job_id = $2, parent_id = $3, position = $4, state = $5, "
                     "created_at = $6, scheduled_at = $7, started_at = $8, completed_at = $9, "
                     "failed_at = $10, definition = $11, error = $12, result = $13, node_id = $14, "
                     "progress = $15, redelivered = $16, each_size = $17, each_index = $18, "
                     "completions = $19, subjob_id = $20, scope = $21, reason = $22, steps = $23 "
                     "WHERE id = $1");
  s.update_task_keep_keys =
      st("update_task_keep_keys",
         "UPDATE tasks SET state = $5, scheduled_at = $7, started_at = $8, completed_at = $9, "
         "failed_at = $10, definition = $11, error = $12, result = $13, node_id = $14, "
         "progress = $15, redelivered = $16, each_size = $17, each_index = $18, "
         "completions = $19, subjob_id = $20, scope = $21, reason = $22, steps = $23 "
         "WHERE id = $1");
  s.update_task_fields =
      st("update_task_fields",
         "UPDATE tasks SET scheduled_at = $7, started_at = $8, completed_at = $9, "
         "failed_at = $10, definition = $11, error = $12, result = $13, node_id = $14, "
         "progress = $15, redelivered = $16, each_size = $17, each_index = $18, "
         "completions = $19, subjob_id = $20, scope = $21, reason = $22, steps = $23 "
         "WHERE id = $1");
  s.select_task = st("select_task", "SELECT " BATON_SQL_TASK_COLUMNS " FROM tasks WHERE id = $1");
  s.select_task_for_update =
      st("select_task_for_update",
         "SELECT " BATON_SQL_TASK_COLUMNS " FROM tasks WHERE id = $1" + for_update);
  s.job_tasks = st("job_tasks", "SELECT " BATON_SQL_TASK_COLUMNS
                                " FROM tasks WHERE job_id = $1 ORDER BY position, created_at, id");
  s.child_tasks = st("child_tasks", "SELECT " BATON_SQL_TASK_COLUMNS
                                    " FROM tasks WHERE parent_id = $1 AND parent_id <> '' "
                                    "ORDER BY created_at, id");
  s.next_created_children =
      st("next_created_children", "SELECT " BATON_SQL_TASK_COLUMNS
                                  " FROM tasks WHERE parent_id = $1 AND parent_id <> '' "
                                  "AND state = 'CREATED' ORDER BY each_index, created_at, id "
                                  "LIMIT $2");
  s.count_children = st("count_children",
                        "SELECT state, count(*) FROM tasks WHERE parent_id = $1 AND "
                        "parent_id <> '' AND " +
                            InList(d, "state", 2) + " GROUP BY state");
  s.tasks_in_state = st("tasks_in_state", "SELECT " BATON_SQL_TASK_COLUMNS " FROM tasks WHERE " +
                                              InList(d, "state", 1) + " ORDER BY created_at, id");
  // The partial index tasks_dropped holds exactly these rows.
  s.dropped_tasks = st("dropped_tasks",
                       "SELECT id FROM tasks WHERE state = 'CANCELLED' AND started_at IS NULL AND "
                       "completed_at >= $1 ORDER BY completed_at DESC, id DESC LIMIT $2");
  s.withdrawn_tasks = st("withdrawn_tasks",
                         "SELECT t.id FROM jobs j JOIN tasks t ON t.job_id = j.id WHERE "
                         "j.state = 'PAUSED' AND t.state IN ('PENDING', 'SCHEDULED') AND "
                         "t.started_at IS NULL ORDER BY t.id LIMIT $1");
  s.mark_scheduled = st("mark_scheduled", "UPDATE tasks SET state = $2, scheduled_at = $3 WHERE " +
                                              InList(d, "id", 1) + " AND " + InList(d, "state", 4));
  // The states a cancel changes; both backends' CancelTasks cancel the same ones.
  const std::string active = "state IN ('PENDING', 'CREATED', 'SCHEDULED', 'RUNNING')";
  s.active_job_tasks = st("active_job_tasks",
                          "SELECT id, state, node_id, subjob_id FROM tasks WHERE job_id = $1 AND " +
                              active + " ORDER BY created_at, id" + for_update);
  // Through the tasks_parent index; the ids compare as PostgreSQL's columns do ("C").
  const std::string under_id =
      d == Dialect::kPostgres ? "$2::text COLLATE \"C\"" : "CAST($2 AS TEXT)";
  s.active_tasks_under =
      st("active_tasks_under",
         "WITH RECURSIVE below(id) AS (SELECT " + under_id +
             " UNION SELECT t.id FROM tasks t JOIN below ON t.parent_id = below.id "
             "WHERE t.parent_id <> '') "
             "SELECT id, state, node_id, subjob_id FROM tasks WHERE job_id = $1 AND id <> $2 "
             "AND id IN (SELECT id FROM below) AND " +
             active + " ORDER BY created_at, id" + for_update);
  s.cancel_rows =
      st("cancel_rows", "UPDATE tasks SET state = 'CANCELLED', completed_at = $2 WHERE " +
                            InList(d, "id", 1) + " AND " + active);

  s.insert_log_part = st("insert_log_part", "INSERT INTO log_parts (" BATON_SQL_LOG_COLUMNS
                                            ") VALUES ($1, $2, $3, $4, $5, $6)");
  s.count_task_log_parts =
      st("count_task_log_parts", "SELECT count(*) FROM log_parts WHERE task_id = $1");
  s.task_log_parts =
      st("task_log_parts", "SELECT " BATON_SQL_LOG_COLUMNS
                           " FROM log_parts WHERE task_id = $1 "
                           "ORDER BY number DESC, created_at DESC, id DESC LIMIT $2 OFFSET $3");
  s.count_job_log_parts =
      st("count_job_log_parts", "SELECT count(*) FROM log_parts WHERE job_id = $1");
  s.job_log_parts =
      st("job_log_parts", "SELECT " BATON_SQL_LOG_COLUMNS
                          " FROM log_parts WHERE job_id = $1 "
                          "ORDER BY created_at DESC, number DESC, id DESC LIMIT $2 OFFSET $3");
  s.upsert_node =
      st("upsert_node",
         "INSERT INTO nodes (" BATON_SQL_NODE_COLUMNS
         ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO UPDATE SET "
         "name = excluded.name, hostname = excluded.hostname, version = excluded.version, "
         "queue = excluded.queue, started_at = excluded.started_at, "
         "last_heartbeat_at = excluded.last_heartbeat_at, cpu_percent = excluded.cpu_percent, "
         "task_count = excluded.task_count, status = excluded.status, "
         "memory_bytes = excluded.memory_bytes");
  s.active_nodes = st("active_nodes", "SELECT " BATON_SQL_NODE_COLUMNS
                                      " FROM nodes WHERE last_heartbeat_at >= $1 "
                                      "ORDER BY last_heartbeat_at DESC, id");

  if (d == Dialect::kPostgres) {
    // PostgreSQL must know the type of every parameter, and a narrowed UPDATE leaves
    // some unused; nor does it gain from one (an update touching no indexed column's
    // value is a HOT update whatever the SET list names). The full ones serve.
    s.update_job_keep_times = s.update_job;
    s.update_job_fields = s.update_job;
    s.update_task_keep_keys = s.update_task;
    s.update_task_fields = s.update_task;
    s.insert_tasks =
        st("insert_tasks",
           "INSERT INTO tasks (" BATON_SQL_TASK_COLUMNS
           ") SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], "
           "$6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::text[], "
           "$12::text[], $13::text[], $14::text[], $15::float8[], $16::int[], $17::int[], "
           "$18::int[], $19::int[], $20::text[], $21::text[], $22::text[], $23::text[])");
    // The rows locked, re-checked and cancelled; RETURNING gives the state each was in.
    s.cancel_tasks =
        st("cancel_tasks",
           "WITH RECURSIVE below(id) AS (SELECT $2::text COLLATE \"C\" UNION "
           "SELECT t.id FROM tasks t JOIN below ON t.parent_id = below.id WHERE t.parent_id <> "
           "''), old AS (SELECT id, state, node_id, subjob_id FROM tasks WHERE job_id = $1 "
           "AND state = ANY ($4::text[]) AND ($2 = '' OR (id <> $2 AND id IN (SELECT id FROM "
           "below))) FOR UPDATE) "
           "UPDATE tasks t SET state = 'CANCELLED', completed_at = $3 FROM old "
           "WHERE t.id = old.id AND t.state = ANY ($4::text[]) "
           "RETURNING old.id, old.state, old.node_id, old.subjob_id");
  }

  // Webhook deliveries: columns in the order BindWebhookDelivery binds them.
#define BATON_SQL_WEBHOOK_COLUMNS                                                         \
  "id, job_id, task_id, event, url, headers, secret, body, state, attempts, created_at, " \
  "next_attempt_at, completed_at, error, history"
  s.insert_webhook_delivery =
      st("insert_webhook_delivery", "INSERT INTO webhook_deliveries (" BATON_SQL_WEBHOOK_COLUMNS
                                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
                                    "$12, $13, $14, $15)");
  s.due_webhook_deliveries =
      st("due_webhook_deliveries",
         "SELECT " BATON_SQL_WEBHOOK_COLUMNS
         " FROM webhook_deliveries WHERE state = 'PENDING' AND next_attempt_at <= $1 "
         "ORDER BY next_attempt_at, id LIMIT $2" +
             std::string(d == Dialect::kPostgres ? " FOR UPDATE SKIP LOCKED" : ""));
  s.update_webhook_delivery =
      st("update_webhook_delivery",
         "UPDATE webhook_deliveries SET state = $2, attempts = $3, next_attempt_at = $4, "
         "completed_at = $5, error = $6, history = $7 WHERE id = $1");
  s.release_webhook_deliveries = st("release_webhook_deliveries",
                                    "UPDATE webhook_deliveries SET next_attempt_at = $1 "
                                    "WHERE state = 'PENDING' AND next_attempt_at > $1");
  s.job_webhook_deliveries =
      st("job_webhook_deliveries", "SELECT " BATON_SQL_WEBHOOK_COLUMNS
                                   " FROM webhook_deliveries WHERE job_id = $1 "
                                   "ORDER BY created_at, id");
  // A deleted job's PENDING deliveries stay until they end (delivered or given up).
  s.delete_job_webhook_deliveries =
      st("delete_job_webhook_deliveries",
         "DELETE FROM webhook_deliveries WHERE job_id = $1 AND state <> 'PENDING'");
  s.delete_orphan_webhook_delivery =
      st("delete_orphan_webhook_delivery",
         "DELETE FROM webhook_deliveries WHERE id = $1 AND state <> 'PENDING' AND NOT EXISTS "
         "(SELECT 1 FROM jobs WHERE jobs.id = webhook_deliveries.job_id)");
#undef BATON_SQL_WEBHOOK_COLUMNS
  s.insert_scheduled_job =
      st("insert_scheduled_job", "INSERT INTO scheduled_jobs (" BATON_SQL_SCHEDULED_JOB_COLUMNS
                                 ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "
                                 "$13, $14, $15, $16)");
  s.select_scheduled_job_for_update = st(
      "select_scheduled_job_for_update",
      "SELECT " BATON_SQL_SCHEDULED_JOB_COLUMNS " FROM scheduled_jobs WHERE id = $1" + for_update);
  s.update_scheduled_job =
      st("update_scheduled_job",
         "UPDATE scheduled_jobs SET state = $2, cron = $3, timezone = $4, overlap = $5, "
         "catch_up_window_ms = $6, catch_up = $7, definition = $8, created_by = $9, "
         "created_at = $10, updated_at = $11, last_tick_at = $12, next_tick_at = $13, "
         "buffered_tick_at = $14, last_job_id = $15, access = $16 WHERE id = $1");
  s.delete_scheduled_job = st("delete_scheduled_job", "DELETE FROM scheduled_jobs WHERE id = $1");
  s.count_scheduled_jobs = st("count_scheduled_jobs", "SELECT count(*) FROM scheduled_jobs");
  s.list_scheduled_jobs =
      st("list_scheduled_jobs", "SELECT " BATON_SQL_SCHEDULED_JOB_COLUMNS
                                " FROM scheduled_jobs ORDER BY created_at DESC, id DESC "
                                "LIMIT $1 OFFSET $2");
  s.due_scheduled_jobs =
      st("due_scheduled_jobs",
         "SELECT id FROM scheduled_jobs WHERE state = 'ACTIVE' AND (next_tick_at <= $1 OR "
         "buffered_tick_at IS NOT NULL) ORDER BY next_tick_at, id LIMIT $2");
  s.next_scheduled_tick =
      st("next_scheduled_tick",
         "SELECT count(*), min(CASE WHEN buffered_tick_at IS NULL THEN next_tick_at ELSE $1 END) "
         "FROM scheduled_jobs WHERE state = 'ACTIVE'");
  s.delete_old_log_parts = st("delete_old_log_parts",
                              "DELETE FROM log_parts WHERE id IN (SELECT id FROM log_parts "
                              "WHERE created_at < $1 ORDER BY created_at LIMIT $2)");
  s.old_finished_jobs =
      st("old_finished_jobs",
         "SELECT id FROM jobs WHERE parent_id = '' AND created_at < $1 "
         "AND state IN ('COMPLETED', 'FAILED', 'CANCELLED') ORDER BY created_at, id LIMIT $2");

  s.count_jobs_by_state =
      st("count_jobs_by_state", "SELECT state, COUNT(*) FROM jobs GROUP BY state");
  s.count_tasks_by_state =
      st("count_tasks_by_state", "SELECT state, COUNT(*) FROM tasks GROUP BY state");
  s.count_jobs_ended_since = st(
      "count_jobs_ended_since",
      "SELECT (SELECT COUNT(*) FROM jobs WHERE completed_at IS NOT NULL AND completed_at >= $1), "
      "(SELECT COUNT(*) FROM jobs WHERE failed_at IS NOT NULL AND failed_at >= $1)");
  s.count_running = st("count_running",
                       "SELECT (SELECT COUNT(*) FROM jobs WHERE state = 'RUNNING'), "
                       "(SELECT COUNT(*) FROM tasks WHERE state = 'RUNNING')");
  s.jobs_secrets_after = st("jobs_secrets_after",
                            "SELECT id, definition, context FROM jobs WHERE id > $1 "
                            "ORDER BY id LIMIT $2" +
                                for_update);
  // The context's plain values are unchanged: its version (what the scheduler's parsed
  // copy is keyed by) stays.
  s.update_job_secrets =
      st("update_job_secrets", "UPDATE jobs SET definition = $2, context = $3 WHERE id = $1");
  s.tasks_secrets_after = st("tasks_secrets_after",
                             "SELECT id, definition FROM tasks WHERE id > $1 "
                             "ORDER BY id LIMIT $2" +
                                 for_update);
  s.update_task_secrets =
      st("update_task_secrets", "UPDATE tasks SET definition = $2 WHERE id = $1");
  s.webhook_secrets_after = st("webhook_secrets_after",
                               "SELECT id, headers, secret FROM webhook_deliveries WHERE id > $1 "
                               "ORDER BY id LIMIT $2" +
                                   for_update);
  s.update_webhook_secrets =
      st("update_webhook_secrets",
         "UPDATE webhook_deliveries SET headers = $2, secret = $3 WHERE id = $1");
  s.insert_user = st("insert_user", "INSERT INTO users (" BATON_SQL_USER_COLUMNS
                                    ") VALUES ($1, $2, $3, $4, $5, $6)");
  s.select_user =
      st("select_user", "SELECT " BATON_SQL_USER_COLUMNS " FROM users WHERE username = $1");
  s.insert_api_key = st("insert_api_key", "INSERT INTO api_keys (" BATON_SQL_API_KEY_COLUMNS
                                          ") VALUES ($1, $2, $3, $4, $5, $6)");
  s.select_api_key_by_hash = st("select_api_key_by_hash", "SELECT " BATON_SQL_API_KEY_COLUMNS
                                                          " FROM api_keys WHERE key_hash = $1");
  s.user_api_keys = st("user_api_keys", "SELECT " BATON_SQL_API_KEY_COLUMNS
                                        " FROM api_keys WHERE ($1 = '' OR username = $1) "
                                        "ORDER BY created_at, id");
  s.revoke_api_key = st("revoke_api_key",
                        "UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1");

  s.health = st("health", "SELECT 1");
  s.max_schema_version =
      st("max_schema_version", "SELECT coalesce(max(version), 0) FROM schema_migrations");
  s.record_migration = st("record_migration",
                          "INSERT INTO schema_migrations (version, name, applied_at) "
                          "VALUES ($1, $2, $3)");
  return s;
}

}  // namespace

const Statements& StatementsFor(Dialect dialect) {
  static const Statements sqlite = Build(Dialect::kSqlite);
  static const Statements postgres = Build(Dialect::kPostgres);
  return dialect == Dialect::kSqlite ? sqlite : postgres;
}

const Statement& JobUpdate(const Statements& s, const JobKeys& before, const JobRecord& after) {
  if (after.created_at != before.created_at || after.delete_at != before.delete_at) {
    return s.update_job;
  }
  return after.state == before.state ? s.update_job_fields : s.update_job_keep_times;
}

const Statement& TaskUpdate(const Statements& s, const TaskKeys& before, const TaskRecord& after) {
  if (after.job_id != before.job_id || after.parent_id != before.parent_id ||
      after.position != before.position || after.created_at != before.created_at) {
    return s.update_task;
  }
  return after.state == before.state ? s.update_task_fields : s.update_task_keep_keys;
}

}  // namespace baton::sql

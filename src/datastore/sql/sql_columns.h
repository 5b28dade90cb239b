// The column lists of the tables, in the order rows.h reads and binds them.
#pragma once

#define BATON_SQL_JOB_COLUMNS                                                                  \
  "id, parent_id, state, name, description, tags, created_at, started_at, completed_at, "      \
  "failed_at, delete_at, definition, position, task_count, progress, result, error, context, " \
  "created_by, access, steps, ending"

#define BATON_SQL_TASK_COLUMNS                                                           \
  "id, job_id, parent_id, position, state, created_at, scheduled_at, started_at, "       \
  "completed_at, failed_at, definition, error, result, node_id, progress, redelivered, " \
  "each_size, each_index, completions, subjob_id, scope, reason, steps"

#define BATON_SQL_LOG_COLUMNS "id, task_id, job_id, number, contents, created_at"

#define BATON_SQL_NODE_COLUMNS                                                       \
  "id, name, hostname, version, queue, started_at, last_heartbeat_at, cpu_percent, " \
  "task_count, status, memory_bytes"

// access last: NULL for a row stored before schema version 11 until Migrate fills it in.
#define BATON_SQL_SCHEDULED_JOB_COLUMNS                                                \
  "id, state, cron, timezone, overlap, catch_up_window_ms, catch_up, definition, "     \
  "created_by, created_at, updated_at, last_tick_at, next_tick_at, buffered_tick_at, " \
  "last_job_id, access"

#define BATON_SQL_USER_COLUMNS "id, username, name, password_hash, roles, created_at"

#define BATON_SQL_API_KEY_COLUMNS "id, username, name, key_hash, created_at, revoked_at"

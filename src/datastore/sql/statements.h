// The statements of the SQL datastore, written once (statements.cc) and spelled for each
// dialect. A backend runs them and has none of its own; where a dialect does a thing in a
// way of its own, the statement is here, absent from the other dialect (PostgreSQL's
// multi-row insert of arrays and one-statement cancel).
#pragma once

#include <optional>
#include <string>

#include "core/records.h"
#include "datastore/sql/dialect.h"

namespace baton::sql {

// One statement. `name` is unique (PostgreSQL prepares it under that name on each
// connection); `sql` is in the dialect's spelling and never changes once built, so a
// backend may key a statement cache by its address.
struct Statement {
  const char* name;
  std::string sql;
};

struct Statements {
  Dialect dialect;  // for the text of list parameters (EncodeList)

  // Jobs. Parameter numbers follow column order, so one binder (BindJob) serves the
  // insert and every update (each rewrites created_by and access, $19 and $20, which
  // never change: every statement must use every parameter the binder gives). An UPDATE rewrites
  // the index entries of every column it sets, changed or not (SQLite): update_job_keep_times
  // leaves out created_at and delete_at, update_job_fields the state too, for updates that did not
  // change them.
  Statement insert_job;
  Statement update_job;
  Statement update_job_keep_times;
  Statement update_job_fields;
  Statement select_job;
  Statement select_job_for_update;
  // UpdateJobState's read and write: neither the definition nor the context (the
  // columns that grow with the job), so moving a big job costs no decoding of them.
  Statement select_job_state_for_update;
  Statement update_job_state_only;
  // The state columns and the context (Transaction::UpdateJobStateAndContext), without the
  // definition that grows with the job.
  Statement update_job_state_and_context;
  // What a decision reads of its job (Transaction::GetJobState, GetJobContext): the state
  // columns and the context's version, which every statement writing the context raises;
  // the context apart.
  Statement select_job_state_version_for_update;
  Statement select_job_context;
  // A job's definition alone: read once per running job by a decision (GetJobDefinition).
  Statement select_job_definition;
  Statement jobs_in_state;  // $1: a list of states
  Statement job_exists;
  Statement delete_job_log_parts;
  Statement delete_job_tasks;
  Statement delete_job;
  Statement job_tree;
  Statement jobs_due_for_deletion;

  // Tasks, likewise (update_task_keep_keys leaves out job_id, parent_id, position and
  // created_at; update_task_fields the state too).
  Statement insert_task;
  Statement update_task;
  Statement update_task_keep_keys;
  Statement update_task_fields;
  Statement select_task;
  Statement select_task_for_update;
  Statement job_tasks;
  Statement child_tasks;
  // Transaction::NextCreatedChildren ($1: the parent, $2: the limit) and CountChildren
  // ($1: the parent, $2: a list of states), through the tasks_parent_state index.
  Statement next_created_children;
  Statement count_children;
  Statement tasks_in_state;   // $1: a list of states
  Statement dropped_tasks;    // $1: since, $2: limit
  Statement withdrawn_tasks;  // $1: limit
  Statement mark_scheduled;   // $1: a list of ids; $4: a list of states
  // Transaction::CancelTasks: the active rows of job $1 (all, or with $2 those below
  // row $2), locked, with what cancelling them needs; then their update ($1: a list of
  // ids, re-checked as active, CANCELLED at $2).
  Statement active_job_tasks;
  Statement active_tasks_under;
  Statement cancel_rows;
  // PostgreSQL only (empty `sql` on SQLite): many task rows in one statement, each
  // parameter an array of one column's values (TaskArrays, one element per row); and
  // Datastore::CancelTasks in one statement ($1: the job, $2: the row below which, or '',
  // $3: the time, $4: a list of the active states) returning the rows as they were.
  Statement insert_tasks;
  Statement cancel_tasks;

  // Log parts and nodes.
  Statement insert_log_part;
  Statement count_task_log_parts;
  Statement task_log_parts;
  Statement count_job_log_parts;
  Statement job_log_parts;
  Statement upsert_node;
  Statement active_nodes;

  // The webhook outbox (Transaction::CreateWebhookDeliveries, ...).
  Statement insert_webhook_delivery;
  Statement due_webhook_deliveries;  // $1: now, $2: limit
  Statement update_webhook_delivery;
  Statement release_webhook_deliveries;  // $1: now
  Statement job_webhook_deliveries;
  Statement delete_job_webhook_deliveries;   // the job's ended ones
  Statement delete_orphan_webhook_delivery;  // $1: an ended delivery whose job is gone
  // Scheduled jobs (Transaction::CreateScheduledJob, ...): columns in the order
  // BindScheduledJob binds them.
  Statement insert_scheduled_job;
  Statement select_scheduled_job_for_update;
  Statement update_scheduled_job;
  Statement delete_scheduled_job;
  Statement count_scheduled_jobs;
  Statement list_scheduled_jobs;  // $1: limit, $2: offset
  Statement due_scheduled_jobs;   // $1: now, $2: limit
  Statement next_scheduled_tick;  // $1: now
  // Retention ($1: the time before which, $2: a limit).
  Statement delete_old_log_parts;
  Statement old_finished_jobs;
  // Key rotation (Transaction::ReencryptSecrets): the rows after id $1, at most $2, in id
  // order, locked, with their secret-holding columns; and the rewrite of those columns.
  Statement jobs_secrets_after;
  Statement update_job_secrets;
  Statement tasks_secrets_after;
  Statement update_task_secrets;
  Statement webhook_secrets_after;
  Statement update_webhook_secrets;

  // Rows by state: (state, count).
  Statement count_jobs_by_state;
  Statement count_tasks_by_state;
  Statement count_jobs_ended_since;
  Statement count_running;

  // Users and API keys.
  Statement insert_user;
  Statement select_user;  // $1: username
  Statement insert_api_key;
  Statement select_api_key_by_hash;
  Statement user_api_keys;   // $1: a username, or '' for all
  Statement revoke_api_key;  // $1: id, $2: at

  Statement health;
  Statement max_schema_version;
  Statement record_migration;
};

// The statements in `dialect`'s spelling, built once.
const Statements& StatementsFor(Dialect dialect);

// What an update must rewrite: the indexed columns the modifier may have changed.
struct JobKeys {
  JobState state;
  TimePoint created_at;
  std::optional<TimePoint> delete_at;
};
struct TaskKeys {
  std::string job_id;
  std::string parent_id;
  int position;
  TimePoint created_at;
  TaskState state;
};
inline JobKeys KeysOf(const JobRecord& job) { return {job.state, job.created_at, job.delete_at}; }
inline TaskKeys KeysOf(const TaskRecord& task) {
  return {task.job_id, task.parent_id, task.position, task.created_at, task.state};
}

// The narrowest update of a row that had `before` and now is `after`.
const Statement& JobUpdate(const Statements& s, const JobKeys& before, const JobRecord& after);
const Statement& TaskUpdate(const Statements& s, const TaskKeys& before, const TaskRecord& after);

}  // namespace baton::sql

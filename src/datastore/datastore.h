// Datastore: where all state lives — jobs, task rows, log parts, nodes.
//
// Contract (every implementation passes tests/conformance/datastore_conformance.h):
// - Create* fail with kAlreadyExists for a taken id; Get*/Update* fail with kNotFound
//   for an unknown one.
// - Update* are transactional read-modify-write: the modifier sees the current row and
//   its changes are stored atomically; concurrent updates of one row serialise (no lost
//   update). A modifier returning an error aborts the update and that error is returned.
//   Modifiers must not call back into the datastore.
// - Lists are newest first (created_at descending, then id) unless stated otherwise;
//   pages are 1-based.
// - Writes are durable once the call returns (group commit may batch concurrent writers
//   into one transaction, but never acknowledges before the commit).
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/auth.h"
#include "core/document.h"
#include "core/records.h"
#include "core/schedule.h"

namespace baton {

// The tables whose rows hold secrets, encrypted at rest (datastore/sql/secrets.h says
// which values): what Transaction::ReencryptSecrets walks.
enum class SecretTable { kJobs, kTasks, kWebhookDeliveries };

// What one ReencryptSecrets batch did: rows read, rows written again under the primary
// key, and the last id read (where the next batch starts; empty when none was read).
struct ReencryptBatch {
  int read = 0;
  int rewritten = 0;
  std::string last_id;
};

// A row CancelTasks cancelled: what telling workers and cancelling its sub-job need.
struct CancelledTask {
  std::string id;
  TaskState was = TaskState::kPending;  // its state before
  std::string node_id;                  // the node it was given to, if any
  std::string subjob_id;                // the sub-job it started, if any
  friend bool operator==(const CancelledTask&, const CancelledTask&) = default;
};

struct JobQuery {
  // Words matched (case-insensitively, all must match) against name, description and
  // state; `tag:x` matches jobs tagged x.
  std::string q;
  // Only jobs in one of these states (empty: any); the UI's state filters.
  std::vector<JobState> states;
  int page = 1;
  int size = 10;
  // Set: only the jobs this user may see (MayAccess), filtered in the query so that
  // pages and totals count only those. Unset (authentication off) or an admin: all.
  std::optional<Principal> viewer;
};

// A search has at most this many words and bytes. Each word is one more condition of the
// query (SQLite refuses about 1,000 as "Expression tree is too large"); no user needs
// more, and a bound here keeps a long query a 400 instead of the database's error.
inline constexpr std::size_t kMaxSearchWords = 100;
inline constexpr std::size_t kMaxSearchBytes = 4096;

// The words of a search, split on blanks (space, tab, newline).
inline std::vector<std::string_view> SearchWords(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
    std::size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n') ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

// kInvalidArgument when `query.q` is too long, has too many words, is not valid UTF-8
// (PostgreSQL refuses such text) or holds a NUL byte. ListJobs checks it; the API checks
// it first, to answer 400.
inline Status ValidateJobQuery(const JobQuery& query) {
  const std::string& q = query.q;
  if (q.size() > kMaxSearchBytes) {
    return InvalidArgument("q is " + std::to_string(q.size()) + " bytes; the limit is " +
                           std::to_string(kMaxSearchBytes));
  }
  if (std::size_t bad = InvalidUtf8At(q); bad != std::string_view::npos) {
    return InvalidArgument("q is not valid UTF-8 (a bad byte at offset " + std::to_string(bad) +
                           ")");
  }
  if (q.find('\0') != std::string::npos) return InvalidArgument("q must not contain a NUL byte");
  if (std::size_t n = SearchWords(q).size(); n > kMaxSearchWords) {
    return InvalidArgument("q has " + std::to_string(n) + " words; the limit is " +
                           std::to_string(kMaxSearchWords));
  }
  return Status::Ok();
}

// The most bytes a job may take as stored (its definition, tags and context as JSON),
// by default: whichever path creates it — a submission, or a sub-job whose inputs came
// from templates — CreateJob (and Transaction::CreateJob) refuse a bigger one with
// kInvalidArgument. The adapters' options (max_job_bytes) set it.
inline constexpr std::size_t kDefaultMaxJobBytes = 32 << 20;

// The reads and writes of one decision, all in one database transaction: what
// Datastore::Transact hands its body. Used only by the thread running the body, and only
// while it runs.
//
// - Reads see the scope's own writes. GetJob and GetTask lock the row they read until
//   the scope ends (PostgreSQL: SELECT ... FOR UPDATE; SQLite: its one writer runs one
//   scope at a time), so two scopes that read the same row first run one after the
//   other and neither loses an update. Take the job row first (GetJob), then its tasks:
//   the one order every scope locks in, so scopes of one job never deadlock.
// - Writes take whole records (UpdateJob, UpdateTask) or, for UpdateJobState, the state
//   fields of a job (state, started_at, completed_at, failed_at, delete_at, position,
//   progress, result, error; the rest of `job` is ignored). An update of a row that does
//   not exist fails kNotFound; creates fail as CreateJob / CreateTasks do.
// - A write that fails poisons the scope: every later call fails with its error, and
//   Transact returns it and stores nothing, even if the body ignored it.
class Transaction {
 public:
  virtual ~Transaction() = default;

  virtual Result<JobRecord> GetJob(std::string_view id) = 0;
  virtual Result<TaskRecord> GetTask(std::string_view id) = 0;
  // As Datastore::JobTasks and ChildTasks, but inside the scope (rows not locked).
  virtual Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) = 0;
  virtual Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) = 0;
  // What a decision about a composite reads of its children instead of every row, so
  // that it costs the same for an each of 20 and of 20,000 (both read through the
  // tasks_parent_state index; rows not locked):
  // - the CREATED children of `parent_id` with the lowest each_index, in each_index
  //   order (then created_at, id), at most `limit` (none for limit <= 0);
  // - how many children of `parent_id` are in each of `states` (a state none is in is
  //   absent). Counting the active states of an each reads as many index entries as it
  //   has children running, not one per child.
  virtual Result<std::vector<TaskRecord>> NextCreatedChildren(std::string_view parent_id,
                                                              int limit) = 0;
  virtual Result<std::map<TaskState, int>> CountChildren(std::string_view parent_id,
                                                         const std::vector<TaskState>& states) = 0;

  // A running job's definition never changes, and it grows with the job: a decision
  // reads it once per job (GetJobDefinition, unlocked; the caller keeps it, the
  // datastore's definition cache does not) and otherwise the row without it. GetJobState
  // locks the row as GetJob does and returns it with `job` and `context` left empty: its
  // state fields (those UpdateJobState writes), parent_id, created_at and task_count; and
  // sets `*context_version`, a number every write of the context raises (UpdateJob,
  // UpdateJobStateAndContext; 0 as created). A context holds the job's inputs and
  // secrets (100,000 inputs make 1.6 MB) and changes only when a task with a `var`
  // completes: a caller keeps it parsed and reads it (GetJobContext, unlocked) only when
  // its version moved. `*bytes`, when given, is set to the length of its stored text.
  virtual Result<JobRecord> GetJobState(std::string_view id, int* context_version) = 0;
  virtual Result<nlohmann::json> GetJobContext(std::string_view id, std::size_t* bytes) = 0;
  virtual Result<std::shared_ptr<const Job>> GetJobDefinition(std::string_view id) = 0;

  virtual Status CreateJob(const JobRecord& job) = 0;
  virtual Status UpdateJob(const JobRecord& job) = 0;
  virtual Status UpdateJobState(const JobRecord& job) = 0;
  // The state fields and the context; the definition (and the rest of `job`) is ignored.
  virtual Status UpdateJobStateAndContext(const JobRecord& job) = 0;
  virtual Status CreateTasks(const std::vector<TaskRecord>& tasks) = 0;
  virtual Status UpdateTask(const TaskRecord& task) = 0;
  // As Datastore::CancelTasks, inside the scope: the rows it cancels are locked, it sees
  // the scope's own writes, and later reads see the rows CANCELLED.
  virtual Result<std::vector<CancelledTask>> CancelTasks(std::string_view job_id,
                                                         std::string_view under, TimePoint at) = 0;

  // The webhook outbox. Deliveries are written in the scope of the state change they
  // report, so a committed change has its deliveries and a lost one has none.
  // CreateWebhookDeliveries fails kAlreadyExists for a taken id. DueWebhookDeliveries:
  // the PENDING deliveries whose next_attempt_at is at or before `now`, soonest first
  // (then id), at most `limit`, locked until the scope ends; rows another scope holds are
  // skipped rather than waited for (PostgreSQL: FOR UPDATE SKIP LOCKED), so coordinators
  // claiming at once take different rows. UpdateWebhookDelivery writes its state,
  // attempts, next_attempt_at, completed_at, error and history (kNotFound for an unknown
  // id); one that ends (DELIVERED or FAILED) after its job was deleted is then removed.
  // JobWebhookDeliveries: a job's deliveries, oldest first (created_at, then id).
  virtual Status CreateWebhookDeliveries(const std::vector<WebhookDelivery>& deliveries) = 0;
  virtual Result<std::vector<WebhookDelivery>> DueWebhookDeliveries(TimePoint now, int limit) = 0;
  virtual Status UpdateWebhookDelivery(const WebhookDelivery& delivery) = 0;
  // Every PENDING delivery due after `now` (claimed, or in its backoff) becomes due at
  // `now`, in one write; returns how many. What the only coordinator does at start.
  virtual Result<int> ReleaseWebhookDeliveries(TimePoint now) = 0;
  virtual Result<std::vector<WebhookDelivery>> JobWebhookDeliveries(std::string_view job_id) = 0;

  // Retention, in small batches a sweep repeats. DeleteLogPartsBefore deletes at most
  // `limit` log parts created before `before`, oldest first, and returns how many it
  // deleted. FinishedJobsCreatedBefore: the ids of top-level jobs (no parent_id) that are
  // COMPLETED, FAILED or CANCELLED and were created before `before`, oldest first (then
  // id), at most `limit` (rows not locked): what Datastore::DeleteJob then removes.
  virtual Result<int> DeleteLogPartsBefore(TimePoint before, int limit) = 0;
  virtual Result<std::vector<std::string>> FinishedJobsCreatedBefore(TimePoint before,
                                                                     int limit) = 0;

  // Key rotation (`baton secrets rotate`), in batches a caller repeats: reads at most
  // `limit` rows of `table` with ids after `after_id` (all when empty), in id order,
  // locked until the scope ends, and writes again, with every secret encrypted under the
  // primary key, each row holding a secret in plain or under another key (rows already
  // current are not written). Only the secret values change: a row reads back as before.
  // kFailedPrecondition when the store has no keys; a secret under a key not configured
  // fails the batch, naming the key id.
  virtual Result<ReencryptBatch> ReencryptSecrets(SecretTable table, std::string_view after_id,
                                                  int limit) = 0;

  // Scheduled jobs. The definition is stored as a job's is (the jobs table's encoding).
  // CreateScheduledJob fails kAlreadyExists for a taken id. GetScheduledJob locks the row
  // until the scope ends, as GetJob does: a tick is fired by one scope that reads the row,
  // creates the tick's job and advances last_tick_at, so two coordinators (or a crash and
  // a restart) fire it once. UpdateScheduledJob writes every field; it and
  // DeleteScheduledJob fail kNotFound for an unknown id. ListScheduledJobs: newest first
  // (created_at descending, then id), pages 1-based; with a `viewer` (not an admin), only
  // the scheduled jobs whose definition they may access (MayAccess), in pages and totals.
  // DueScheduledJobs: the ids of ACTIVE scheduled jobs whose next_tick_at is at or before `now` or
  // which hold a buffered tick, soonest next_tick_at first (then id), at most `limit` (rows not
  // locked). NextScheduledTick: see below.
  virtual Status CreateScheduledJob(const ScheduledJobRecord& scheduled) = 0;
  virtual Result<ScheduledJobRecord> GetScheduledJob(std::string_view id) = 0;
  virtual Status UpdateScheduledJob(const ScheduledJobRecord& scheduled) = 0;
  virtual Status DeleteScheduledJob(std::string_view id) = 0;
  virtual Result<Page<ScheduledJobRecord>> ListScheduledJobs(
      int page, int size, const std::optional<Principal>& viewer = std::nullopt) = 0;
  virtual Result<std::vector<std::string>> DueScheduledJobs(TimePoint now, int limit) = 0;
  // When a look for due ticks is next needed: the earliest next_tick_at of the ACTIVE
  // scheduled jobs, `now` when one of them holds a buffered tick; nullopt when none is
  // ACTIVE.
  virtual Result<std::optional<TimePoint>> NextScheduledTick(TimePoint now) = 0;

  // Users and API keys (docs/auth.md). CreateUser fails kAlreadyExists for a taken id or
  // username; GetUser finds one by username (kNotFound). CreateApiKey fails kAlreadyExists
  // for a taken id or hash; GetApiKeyByHash finds a key, revoked or not, by the SHA-256
  // of its text (kNotFound). ApiKeys: a user's keys (every user's for an empty
  // `username`), oldest first (created_at, then id). RevokeApiKey sets revoked_at of an
  // unrevoked key (a revoked one keeps its first time; kNotFound for an unknown id).
  virtual Status CreateUser(const UserRecord& user) = 0;
  virtual Result<UserRecord> GetUser(std::string_view username) = 0;
  virtual Status CreateApiKey(const ApiKeyRecord& key) = 0;
  virtual Result<ApiKeyRecord> GetApiKeyByHash(std::string_view key_hash) = 0;
  virtual Result<std::vector<ApiKeyRecord>> ApiKeys(std::string_view username) = 0;
  virtual Status RevokeApiKey(std::string_view id, TimePoint at) = 0;
};

// How many jobs and task rows are in each state (a state none is in is absent).
struct StateCounts {
  std::map<JobState, std::int64_t> jobs;
  std::map<TaskState, std::int64_t> tasks;
};

// Jobs and task rows RUNNING now.
struct RunningCounts {
  std::int64_t jobs = 0;
  std::int64_t tasks = 0;
  friend bool operator==(const RunningCounts&, const RunningCounts&) = default;
};

// Jobs (sub-jobs included) that completed and that failed at or after a time.
struct EndedCounts {
  std::int64_t completed = 0;
  std::int64_t failed = 0;
  friend bool operator==(const EndedCounts&, const EndedCounts&) = default;
};

class Datastore {
 public:
  virtual ~Datastore() = default;

  // Runs `body` in one database transaction and commits it once: every write of the
  // body is stored, or (the body returned an error, a write failed, the commit failed)
  // none is, and that error is returned. SQLite runs the body in a group-commit batch on
  // its writer (its own savepoint, so a failing scope is undone alone); PostgreSQL on one
  // pooled connection, BEGIN .. COMMIT. Scopes of different jobs do not wait for each
  // other's row locks; on SQLite they still take turns on the one writer, so a body
  // must not block on anything but the transaction (no broker, no other thread).
  // Conflicts: rows read through GetJob/GetTask stay locked until the scope ends, so no
  // retry is ever needed for a lost update. kUnavailable (a deadlock PostgreSQL broke, a
  // busy database, a lost connection) means nothing was stored and the whole scope may
  // be run again; Transact does not retry by itself. The body may run only once and
  // must not call back into the datastore (FailedPrecondition on SQLite).
  virtual Status Transact(const std::function<Status(Transaction&)>& body) = 0;

  virtual Status CreateJob(const JobRecord& job) = 0;
  virtual Result<JobRecord> GetJob(std::string_view id) = 0;
  virtual Status UpdateJob(std::string_view id,
                           const std::function<Status(JobRecord&)>& modify) = 0;
  // Updates the fields of a job row that steps change (state, started_at, completed_at,
  // failed_at, delete_at, position, progress, result, error) as UpdateJob does, but
  // neither reads, decodes nor writes its definition and context: the modifier sees
  // `job` and `context` empty, and changes to them (and to the other fields) are not
  // stored. For the steps that change only those (start, cancel, fail, progress): a job of
  // a large definition or context costs no more to move than a small one.
  virtual Status UpdateJobState(std::string_view id,
                                const std::function<Status(JobRecord&)>& modify) = 0;
  virtual Result<Page<JobRecord>> ListJobs(const JobQuery& query) = 0;
  // Jobs in any of `states`, oldest first (the reconciler's view of unfinished work).
  virtual Result<std::vector<JobRecord>> JobsInState(const std::vector<JobState>& states) = 0;
  // Deletes a job with its tasks, log parts and ended webhook deliveries, and its sub-jobs (the
  // jobs its subjob tasks started, at any depth) with theirs, in one transaction. kNotFound for an
  // unknown id. PENDING deliveries outlive their job: they are still sent (their bodies were
  // redacted when written), and removed once they end (Transaction::UpdateWebhookDelivery).
  virtual Status DeleteJob(std::string_view id) = 0;
  // Ids of finished jobs (COMPLETED, FAILED or CANCELLED) whose delete_at is at or before
  // `now`, soonest delete_at first (then id), at most `limit`: what autoDelete removes.
  virtual Result<std::vector<std::string>> JobsDueForDeletion(TimePoint now, int limit) = 0;

  virtual Status CreateTask(const TaskRecord& task) = 0;
  // Creates many rows in one transaction (the children of an `each`).
  virtual Status CreateTasks(const std::vector<TaskRecord>& tasks) = 0;
  virtual Result<TaskRecord> GetTask(std::string_view id) = 0;
  virtual Status UpdateTask(std::string_view id,
                            const std::function<Status(TaskRecord&)>& modify) = 0;
  // Every row of a job (sub-tasks and retries included), ordered by position, then
  // created_at, then id: the job's `execution`.
  virtual Result<std::vector<TaskRecord>> JobTasks(std::string_view job_id) = 0;
  // The children of a composite task, ordered by created_at then id.
  virtual Result<std::vector<TaskRecord>> ChildTasks(std::string_view parent_id) = 0;
  // Rows in any of `states` across all jobs, oldest first.
  virtual Result<std::vector<TaskRecord>> TasksInState(const std::vector<TaskState>& states) = 0;
  // The drops: ids of rows CANCELLED at or after `since` (their completed_at) that never
  // started, so a worker may still find their messages in a queue and must not run them.
  // Newest first, at most `limit`.
  virtual Result<std::vector<std::string>> DroppedTasks(TimePoint since, int limit) = 0;
  // The withdrawn: ids of the rows of PAUSED jobs that never started (PENDING or
  // SCHEDULED), so a worker may find their messages in a queue and must not start them
  // (the resume runs each as a new attempt). At most `limit`.
  virtual Result<std::vector<std::string>> WithdrawnTasks(int limit) = 0;
  // The rows of `ids` still PENDING or CREATED become SCHEDULED at `at`, in one write;
  // the rest (started, finished, unknown ids) are left as they are. For a batch whose
  // messages a durable broker has just confirmed.
  virtual Status MarkScheduled(const std::vector<std::string>& ids, TimePoint at) = 0;
  // Cancels, in one write, the active rows (not COMPLETED, FAILED, CANCELLED or SKIPPED)
  // of job `job_id` — with a non-empty `under`, only the rows below that row (its
  // children, theirs, at any depth), not the row itself: each becomes CANCELLED with
  // completed_at `at`, its other fields unchanged. Returns the rows it changed (in no
  // particular order) with the state each was in; an unknown job or row cancels nothing.
  // A cancel of a job with thousands of rows costs one commit instead of one per row.
  virtual Result<std::vector<CancelledTask>> CancelTasks(std::string_view job_id,
                                                         std::string_view under, TimePoint at) = 0;

  virtual Status CreateLogPart(const LogPart& part) = 0;
  // Highest number first.
  virtual Result<Page<LogPart>> TaskLogParts(std::string_view task_id, int page, int size) = 0;
  // Newest first across all the job's tasks.
  virtual Result<Page<LogPart>> JobLogParts(std::string_view job_id, int page, int size) = 0;

  // Creates or replaces a node row.
  virtual Status UpsertNode(const NodeRecord& node) = 0;
  // Nodes whose last heartbeat is at or after `since`, newest heartbeat first.
  virtual Result<std::vector<NodeRecord>> ActiveNodes(TimePoint since) = 0;

  // Jobs and task rows by state now (two index-only counts): what the metrics show.
  virtual Result<StateCounts> CountStates() = 0;
  // Jobs that completed, and that failed, at or after `since` (two index-range counts).
  virtual Result<EndedCounts> CountJobsEndedSince(TimePoint since) = 0;
  // Jobs and task rows RUNNING now (two index-range counts, where CountStates reads
  // every row's index entry): Tork's JSON metrics, which the UI reads often.
  virtual Result<RunningCounts> CountRunning() = 0;

  virtual Status Health() = 0;

  // The most bytes a job may take as stored (its max_job_bytes option): what CreateJob
  // refuses beyond, and what a decision checks a new sub-job against first, so that the
  // sub-job's task fails with the reason rather than the step.
  virtual std::size_t MaxJobBytes() const { return kDefaultMaxJobBytes; }

  // Users and API keys, each in a scope of its own (Transaction's contract). The writes
  // are not virtual: a wrapper sees them through Transact. The reads, made with every
  // authenticated request, are: a backend may serve them without its writer (SQLite
  // reads them on a read connection, beside the writes).
  Status CreateUser(const UserRecord& user) {
    return Transact([&](Transaction& tx) { return tx.CreateUser(user); });
  }
  virtual Result<UserRecord> GetUser(std::string_view username) {
    return ReadInScope<UserRecord>([&](Transaction& tx) { return tx.GetUser(username); });
  }
  Status CreateApiKey(const ApiKeyRecord& key) {
    return Transact([&](Transaction& tx) { return tx.CreateApiKey(key); });
  }
  virtual Result<ApiKeyRecord> GetApiKeyByHash(std::string_view key_hash) {
    return ReadInScope<ApiKeyRecord>([&](Transaction& tx) { return tx.GetApiKeyByHash(key_hash); });
  }
  virtual Result<std::vector<ApiKeyRecord>> ApiKeys(std::string_view username) {
    return ReadInScope<std::vector<ApiKeyRecord>>(
        [&](Transaction& tx) { return tx.ApiKeys(username); });
  }
  Status RevokeApiKey(std::string_view id, TimePoint at) {
    return Transact([&](Transaction& tx) { return tx.RevokeApiKey(id, at); });
  }

 protected:
  // What `read` returns, read in a scope of Transact.
  template <typename T, typename F>
  Result<T> ReadInScope(F&& read) {
    std::optional<T> out;
    Status s = Transact([&](Transaction& tx) -> Status {
      Result<T> r = read(tx);
      if (!r.ok()) return r.status();
      out = std::move(*r);
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return std::move(*out);
  }
};

}  // namespace baton

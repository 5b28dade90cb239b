#include "datastore/sql/datastore.h"

#include <fmt/format.h>

#include <optional>
#include <utility>

#include "datastore/adapter_util.h"
#include "datastore/sql/rows.h"
#include "datastore/sql/schema.h"
#include "datastore/sql/search.h"
#include "datastore/sql/statements.h"
#include "datastore/sql/transaction.h"

namespace baton::sql {
namespace {

using datastore_util::CallModifier;
using datastore_util::ClampPage;
using datastore_util::MakePage;
using datastore_util::NoThrow;
using datastore_util::PageSpec;

// Binds one text parameter: the key most statements select by.
Bind Key(std::string_view key) {
  return [key](ParamSink& p) { p.Text(key); };
}

const Bind kNoParams = [](ParamSink&) {};

// The text of a list parameter of state names.
template <typename State>
std::string StateList(Dialect dialect, const std::vector<State>& states) {
  std::vector<std::string_view> names;
  names.reserve(states.size());
  for (State state : states) names.push_back(ToString(state));
  return EncodeList(dialect, names);
}

// The values of a count's one row, read by `read`.
template <typename Read>
EachRow OneRow(bool& seen, Read read) {
  return [&seen, read](const RowView& row) {
    seen = true;
    read(row);
    return Status::Ok();
  };
}

// insert_tasks' parameters: one array per column of BATON_SQL_TASK_COLUMNS, one element
// per row, each row's definition encoded.
Result<std::vector<std::string>> TaskArrays(const std::vector<TaskRecord>& tasks,
                                            const crypto::Keyring* keys) {
  std::vector<ArrayLiteral> cols(23);
  auto time = [](ArrayLiteral& a, const std::optional<TimePoint>& t) {
    if (t) {
      a.AddRaw(std::to_string(t->time_since_epoch().count()));
    } else {
      a.AddNull();
    }
  };
  auto real = [](ArrayLiteral& a, double v) {
    if (std::isnan(v)) {
      a.AddText("NaN");
    } else if (std::isinf(v)) {
      a.AddText(v > 0 ? "Infinity" : "-Infinity");
    } else {
      a.AddRaw(fmt::format("{}", v));
    }
  };
  for (const TaskRecord& t : tasks) {
    BATON_ASSIGN_OR_RETURN(std::string definition, EncodeTask(t.task, keys));
    cols[0].AddText(t.id);
    cols[1].AddText(t.job_id);
    cols[2].AddText(t.parent_id);
    cols[3].AddRaw(std::to_string(t.position));
    cols[4].AddText(ToString(t.state));
    time(cols[5], t.created_at);
    time(cols[6], t.scheduled_at);
    time(cols[7], t.started_at);
    time(cols[8], t.completed_at);
    time(cols[9], t.failed_at);
    cols[10].AddText(definition);
    cols[11].AddText(t.error);
    cols[12].AddText(t.result);
    cols[13].AddText(t.node_id);
    real(cols[14], t.progress);
    cols[15].AddRaw(std::to_string(t.redelivered));
    cols[16].AddRaw(std::to_string(t.each_size));
    cols[17].AddRaw(std::to_string(t.each_index));
    cols[18].AddRaw(std::to_string(t.completions));
    cols[19].AddText(t.subjob_id);
    cols[20].AddText(datastore_util::ScopeText(t.scope));
    cols[21].AddText(ReasonText(t));
    cols[22].AddText(t.steps);
  }
  std::vector<std::string> out;
  out.reserve(cols.size());
  for (const ArrayLiteral& col : cols) out.push_back(col.Done());
  return out;
}

Status TasksInsertError(Status status, std::size_t count) {
  if (status.code() == StatusCode::kAlreadyExists) {
    return AlreadyExists(
        fmt::format("creating {} tasks: a task id is taken: {}", count, status.message()));
  }
  if (status.code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition(
        fmt::format("creating {} tasks: a job does not exist: {}", count, status.message()));
  }
  return status;
}

}  // namespace

SqlDatastore::SqlDatastore(Dialect dialect, bool cache_definitions,
                           std::shared_ptr<const crypto::Keyring> keyring,
                           std::size_t max_job_bytes)
    : st_(StatementsFor(dialect)),
      keyring_(std::move(keyring)),
      max_job_bytes_(max_job_bytes),
      caches_(cache_definitions ? std::make_unique<DefinitionCaches>() : nullptr) {}

SqlDatastore::~SqlDatastore() = default;

// ---- Schema -------------------------------------------------------------------------

Status SqlDatastore::Migrate() {
  BATON_RETURN_IF_ERROR(Alone([&](Session& s) { return MigrateSchema(s, st_.dialect); }));
  // Version 11's data: the access of scheduled jobs stored before it, from their
  // definitions (decrypted with the keyring, which SQL cannot).
  return Transact(
      [](Transaction& tx) { return static_cast<SqlTransaction&>(tx).FillScheduledJobAccess(); });
}

Result<int> SqlDatastore::SchemaVersion() {
  int version = 0;
  BATON_RETURN_IF_ERROR(Alone([&](Session& s) -> Status {
    BATON_ASSIGN_OR_RETURN(version, ReadSchemaVersion(s, st_.dialect));
    return Status::Ok();
  }));
  return version;
}

Status SqlDatastore::OpenSchema(bool auto_migrate) {
  if (auto_migrate) return Migrate();
  BATON_ASSIGN_OR_RETURN(int version, SchemaVersion());
  return CheckNotNewer(version, LatestSchemaVersion());
}

// ---- Reading ------------------------------------------------------------------------

template <typename T, typename Decode>
Result<T> SqlDatastore::ReadRow(const Statement& stmt, std::string_view id, std::string_view what,
                                Decode decode) {
  return NoThrow([&]() -> Result<T> {
    std::optional<T> out;
    BATON_RETURN_IF_ERROR(Read(
        [&](Session& s) {
          return s.Query(stmt, Key(id), [&](const RowView& row) -> Status {
            BATON_ASSIGN_OR_RETURN(out, decode(row));
            return Status::Ok();
          });
        },
        /*snapshot=*/false));
    if (!out) return NotFound(fmt::format("{} {} not found", what, id));
    return std::move(*out);
  });
}

template <typename T, typename Decode>
Result<std::vector<T>> SqlDatastore::ReadRows(const Statement& stmt, const Bind& bind,
                                              Decode decode) {
  return NoThrow([&]() -> Result<std::vector<T>> {
    std::vector<T> out;
    BATON_RETURN_IF_ERROR(Read(
        [&](Session& s) {
          out.clear();
          return s.Query(stmt, bind, [&](const RowView& row) -> Status {
            BATON_ASSIGN_OR_RETURN(T item, decode(row));
            out.push_back(std::move(item));
            return Status::Ok();
          });
        },
        /*snapshot=*/false));
    return out;
  });
}

template <typename T>
Result<T> SqlDatastore::ReadScope(const std::function<Result<T>(Transaction&)>& read) {
  return NoThrow([&]() -> Result<T> {
    std::optional<T> out;
    BATON_RETURN_IF_ERROR(Read(
        [&](Session& s) -> Status {
          SqlTransaction tx(s, st_, nullptr, keys(), max_job_bytes_);
          BATON_ASSIGN_OR_RETURN(out, read(tx));
          return Status::Ok();
        },
        /*snapshot=*/false));
    return std::move(*out);
  });
}

// ---- Transactions -------------------------------------------------------------------

Status SqlDatastore::Transact(const std::function<Status(Transaction&)>& body) {
  return NoThrow([&]() -> Status {
    return Write(
        [&](Session& s) { return RunScope(s, st_, caches_.get(), keys(), max_job_bytes_, body); });
  });
}

Result<UserRecord> SqlDatastore::GetUser(std::string_view username) {
  return ReadScope<UserRecord>([&](Transaction& tx) { return tx.GetUser(username); });
}

Result<ApiKeyRecord> SqlDatastore::GetApiKeyByHash(std::string_view key_hash) {
  return ReadScope<ApiKeyRecord>([&](Transaction& tx) { return tx.GetApiKeyByHash(key_hash); });
}

Result<std::vector<ApiKeyRecord>> SqlDatastore::ApiKeys(std::string_view username) {
  return ReadScope<std::vector<ApiKeyRecord>>(
      [&](Transaction& tx) { return tx.ApiKeys(username); });
}

// ---- Jobs ---------------------------------------------------------------------------

Status SqlDatastore::CreateJob(const JobRecord& job) {
  return NoThrow([&]() -> Status {
    // Encoded before the write: on SQLite, the writes queued behind this one wait for it.
    BATON_ASSIGN_OR_RETURN(JobText text, EncodeJobText(job, std::nullopt, keys()));
    BATON_RETURN_IF_ERROR(CheckStoredJobSize(text.bytes(), max_job_bytes_));
    BATON_RETURN_IF_ERROR(Write([&](Session& s) {
      Result<std::int64_t> done =
          s.ExecuteLast(st_.insert_job, [&](ParamSink& p) { BindJob(p, job, text); });
      return JobInsertError(done.status(), job);
    }));
    // The first read of a big job (its start, a cancel, the API) would decode the whole
    // definition again — seconds for a 100,000-input job: the cache starts with the one
    // just stored (the decode of its text gives it back: the round-trip contract).
    if (caches_ != nullptr && text.definition.size() >= DefinitionCache<Job>::kMinBytes) {
      caches_->jobs.Put(job.id, text.definition, std::make_shared<const Job>(job.job));
    }
    return Status::Ok();
  });
}

Result<JobRecord> SqlDatastore::GetJob(std::string_view id) {
  return ReadRow<JobRecord>(st_.select_job, id, "job", [&](const RowView& row) {
    return JobFromRow(row, caches_.get(), keys());
  });
}

Status SqlDatastore::UpdateJob(std::string_view id,
                               const std::function<Status(JobRecord&)>& modify) {
  return NoThrow([&]() -> Status {
    return Write([&](Session& s) -> Status {
      // Read with its row locked until the commit (PostgreSQL; SQLite's one writer runs
      // alone).
      std::optional<JobRecord> job;
      std::string definition;
      std::shared_ptr<const Job> before;
      BATON_RETURN_IF_ERROR(
          s.Query(st_.select_job_for_update, Key(id), [&](const RowView& row) -> Status {
            BATON_ASSIGN_OR_RETURN(job, JobFromRow(row, caches_.get(), keys(), &before));
            definition = std::string(row.Text(kJobDefinitionColumn));
            return Status::Ok();
          }));
      if (!job) return NotFound(fmt::format("job {} not found", id));
      const JobKeys keys_before = KeysOf(*job);
      BATON_RETURN_IF_ERROR(CallModifier(modify, *job));
      job->id = std::string(id);  // the key is not the modifier's to change
      // Most updates change state, not the definition: keep its stored text then.
      std::optional<std::string> same;
      if (job->job == *before) same = std::move(definition);
      BATON_ASSIGN_OR_RETURN(JobText text, EncodeJobText(*job, std::move(same), keys()));
      BATON_RETURN_IF_ERROR(s.ExecuteLast(JobUpdate(st_, keys_before, *job), [&](ParamSink& p) {
                               BindJob(p, *job, text);
                             }).status());
      // Forgotten before the commit: were it rolled back, the next read caches it again.
      if (caches_ != nullptr) caches_->Written(*job);
      return Status::Ok();
    });
  });
}

Status SqlDatastore::UpdateJobState(std::string_view id,
                                    const std::function<Status(JobRecord&)>& modify) {
  return NoThrow([&]() -> Status {
    return Write([&](Session& s) -> Status {
      std::optional<JobRecord> job;
      BATON_RETURN_IF_ERROR(
          s.Query(st_.select_job_state_for_update, Key(id), [&](const RowView& row) -> Status {
            BATON_ASSIGN_OR_RETURN(job, JobStateFromRow(row));
            return Status::Ok();
          }));
      if (!job) return NotFound(fmt::format("job {} not found", id));
      BATON_RETURN_IF_ERROR(CallModifier(modify, *job));
      job->id = std::string(id);
      BATON_RETURN_IF_ERROR(s.ExecuteLast(st_.update_job_state_only, [&](ParamSink& p) {
                               BindJobState(p, *job);
                             }).status());
      if (caches_ != nullptr) caches_->Written(*job);
      return Status::Ok();
    });
  });
}

Result<Page<JobRecord>> SqlDatastore::ListJobs(const JobQuery& query) {
  return NoThrow([&]() -> Result<Page<JobRecord>> {
    BATON_RETURN_IF_ERROR(ValidateJobQuery(query));
    const PageSpec spec = ClampPage(query.page, query.size);
    const JobSearch search = BuildJobSearch(st_.dialect, query);
    auto params = [&](ParamSink& p) {
      for (const std::string& param : search.params) p.Text(param);
    };
    std::optional<Page<JobRecord>> out;
    BATON_RETURN_IF_ERROR(Read(
        [&](Session& s) -> Status {
          std::int64_t total = 0;
          bool counted = false;
          BATON_RETURN_IF_ERROR(
              s.QueryOnce(search.count_sql, params,
                          OneRow(counted, [&](const RowView& row) { total = row.Int(0); })));
          if (!counted) return Internal("counting jobs returned no row");
          std::vector<JobRecord> items;
          BATON_RETURN_IF_ERROR(s.QueryOnce(
              search.list_sql,
              [&](ParamSink& p) {
                params(p);
                p.Int(spec.size);
                p.Int(spec.offset);
              },
              [&](const RowView& row) -> Status {
                BATON_ASSIGN_OR_RETURN(JobRecord job, JobFromRow(row, caches_.get(), keys()));
                items.push_back(std::move(job));
                return Status::Ok();
              }));
          out = MakePage(spec, total, std::move(items));
          return Status::Ok();
        },
        /*snapshot=*/true));
    return std::move(*out);
  });
}

Result<std::vector<JobRecord>> SqlDatastore::JobsInState(const std::vector<JobState>& states) {
  if (states.empty()) return std::vector<JobRecord>();
  const std::string names = StateList(st_.dialect, states);
  return ReadRows<JobRecord>(st_.jobs_in_state, Key(names), [&](const RowView& row) {
    return JobFromRow(row, caches_.get(), keys());
  });
}

Status SqlDatastore::DeleteJob(std::string_view id) {
  return NoThrow([&]() -> Status {
    return Write([&](Session& s) -> Status {
      // Its sub-jobs go with it: they would be left where no link reaches them.
      std::vector<std::string> tree;
      BATON_RETURN_IF_ERROR(s.Query(st_.job_tree, Key(id), [&](const RowView& row) {
        tree.emplace_back(row.Text(0));
        return Status::Ok();
      }));
      // Each job's rows first, so the foreign keys' cascades find nothing left to do; the
      // job's own row last, the count of which says whether the job existed.
      for (const std::string& job_id : tree) {
        for (const Statement* stmt : {&st_.delete_job_log_parts, &st_.delete_job_webhook_deliveries,
                                      &st_.delete_job_tasks}) {
          BATON_RETURN_IF_ERROR(s.Execute(*stmt, Key(job_id)).status());
        }
        BATON_ASSIGN_OR_RETURN(std::int64_t deleted, s.Execute(st_.delete_job, Key(job_id)));
        if (job_id == id && deleted == 0) return NotFound(fmt::format("job {} not found", id));
      }
      return Status::Ok();
    });
  });
}

Result<std::vector<std::string>> SqlDatastore::JobsDueForDeletion(TimePoint now, int limit) {
  if (limit <= 0) return std::vector<std::string>();
  return ReadRows<std::string>(
      st_.jobs_due_for_deletion,
      [&](ParamSink& p) {
        p.Time(now);
        p.Int(limit);
      },
      [](const RowView& row) -> Result<std::string> { return std::string(row.Text(0)); });
}

// ---- Tasks --------------------------------------------------------------------------

Status SqlDatastore::CreateTask(const TaskRecord& task) {
  return NoThrow([&]() -> Status {
    BATON_ASSIGN_OR_RETURN(std::string definition, EncodeTask(task.task, keys()));
    return Write([&](Session& s) {
      Result<std::int64_t> done =
          s.ExecuteLast(st_.insert_task, [&](ParamSink& p) { BindTask(p, task, definition); });
      return TaskInsertError(done.status(), task);
    });
  });
}

Status SqlDatastore::CreateTasks(const std::vector<TaskRecord>& tasks) {
  return NoThrow([&]() -> Status {
    if (tasks.empty()) return Status::Ok();
    if (tasks.size() == 1) return CreateTask(tasks.front());
    if (!st_.insert_tasks.sql.empty()) {
      // One statement of arrays: one round trip, and all rows or none.
      BATON_ASSIGN_OR_RETURN(std::vector<std::string> columns, TaskArrays(tasks, keys()));
      return Write([&](Session& s) {
        Result<std::int64_t> done = s.ExecuteLast(st_.insert_tasks, [&](ParamSink& p) {
          for (const std::string& column : columns) p.Text(column);
        });
        return TasksInsertError(done.status(), tasks.size());
      });
    }
    std::vector<std::string> definitions;
    definitions.reserve(tasks.size());
    for (const TaskRecord& task : tasks) {
      BATON_ASSIGN_OR_RETURN(std::string definition, EncodeTask(task.task, keys()));
      definitions.push_back(std::move(definition));
    }
    // One write: all rows or (rolled back) none.
    return Write([&](Session& s) -> Status {
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        Result<std::int64_t> done = s.Execute(
            st_.insert_task, [&](ParamSink& p) { BindTask(p, tasks[i], definitions[i]); });
        BATON_RETURN_IF_ERROR(TaskInsertError(done.status(), tasks[i]));
      }
      return Status::Ok();
    });
  });
}

Result<TaskRecord> SqlDatastore::GetTask(std::string_view id) {
  return ReadRow<TaskRecord>(st_.select_task, id, "task", [&](const RowView& row) {
    return TaskFromRow(row, caches_.get(), keys());
  });
}

Status SqlDatastore::UpdateTask(std::string_view id,
                                const std::function<Status(TaskRecord&)>& modify) {
  return NoThrow([&]() -> Status {
    return Write([&](Session& s) -> Status {
      std::optional<TaskRecord> task;
      std::string definition;
      std::shared_ptr<const Task> before;
      BATON_RETURN_IF_ERROR(
          s.Query(st_.select_task_for_update, Key(id), [&](const RowView& row) -> Status {
            BATON_ASSIGN_OR_RETURN(task, TaskFromRow(row, caches_.get(), keys(), &before));
            definition = std::string(row.Text(kTaskDefinitionColumn));
            return Status::Ok();
          }));
      if (!task) return NotFound(fmt::format("task {} not found", id));
      const TaskKeys keys_before = KeysOf(*task);
      BATON_RETURN_IF_ERROR(CallModifier(modify, *task));
      task->id = std::string(id);  // the key is not the modifier's to change
      if (!(task->task == *before)) {
        BATON_ASSIGN_OR_RETURN(definition, EncodeTask(task->task, keys()));
      }
      BATON_RETURN_IF_ERROR(s.ExecuteLast(TaskUpdate(st_, keys_before, *task), [&](ParamSink& p) {
                               BindTask(p, *task, definition);
                             }).status());
      if (caches_ != nullptr) caches_->Written(*task);
      return Status::Ok();
    });
  });
}

Result<std::vector<TaskRecord>> SqlDatastore::JobTasks(std::string_view job_id) {
  return ReadRows<TaskRecord>(st_.job_tasks, Key(job_id), [&](const RowView& row) {
    return TaskFromRow(row, caches_.get(), keys());
  });
}

Result<std::vector<TaskRecord>> SqlDatastore::ChildTasks(std::string_view parent_id) {
  return ReadRows<TaskRecord>(st_.child_tasks, Key(parent_id), [&](const RowView& row) {
    return TaskFromRow(row, caches_.get(), keys());
  });
}

Result<std::vector<TaskRecord>> SqlDatastore::TasksInState(const std::vector<TaskState>& states) {
  if (states.empty()) return std::vector<TaskRecord>();
  const std::string names = StateList(st_.dialect, states);
  return ReadRows<TaskRecord>(st_.tasks_in_state, Key(names), [&](const RowView& row) {
    return TaskFromRow(row, caches_.get(), keys());
  });
}

Result<std::vector<std::string>> SqlDatastore::DroppedTasks(TimePoint since, int limit) {
  if (limit <= 0) return std::vector<std::string>();
  return ReadRows<std::string>(
      st_.dropped_tasks,
      [&](ParamSink& p) {
        p.Time(since);
        p.Int(limit);
      },
      [](const RowView& row) -> Result<std::string> { return std::string(row.Text(0)); });
}

Result<std::vector<std::string>> SqlDatastore::WithdrawnTasks(int limit) {
  if (limit <= 0) return std::vector<std::string>();
  return ReadRows<std::string>(
      st_.withdrawn_tasks, [&](ParamSink& p) { p.Int(limit); },
      [](const RowView& row) -> Result<std::string> { return std::string(row.Text(0)); });
}

Status SqlDatastore::MarkScheduled(const std::vector<std::string>& ids, TimePoint at) {
  return NoThrow([&]() -> Status {
    if (ids.empty()) return Status::Ok();
    const std::string id_list =
        EncodeList(st_.dialect, std::vector<std::string_view>(ids.begin(), ids.end()));
    const std::string states =
        StateList(st_.dialect, std::vector<TaskState>{TaskState::kPending, TaskState::kCreated});
    // One statement: the rows of the list that are still waiting.
    return Write([&](Session& s) {
      return s
          .ExecuteLast(st_.mark_scheduled,
                       [&](ParamSink& p) {
                         p.Text(id_list);
                         p.Text(ToString(TaskState::kScheduled));
                         p.Time(at);
                         p.Text(states);
                       })
          .status();
    });
  });
}

Result<std::vector<CancelledTask>> SqlDatastore::CancelTasks(std::string_view job_id,
                                                             std::string_view under, TimePoint at) {
  return NoThrow([&]() -> Result<std::vector<CancelledTask>> {
    std::vector<CancelledTask> out;
    BATON_RETURN_IF_ERROR(Write([&](Session& s) -> Status {
      out.clear();
      if (st_.cancel_tasks.sql.empty()) {
        // Read, then cancel the rows read: the Transaction's two steps.
        SqlTransaction tx(s, st_, caches_.get(), keys(), max_job_bytes_);
        BATON_ASSIGN_OR_RETURN(out, tx.CancelTasks(job_id, under, at));
        return Status::Ok();
      }
      const std::string active = StateList(
          st_.dialect, std::vector<TaskState>{TaskState::kCreated, TaskState::kPending,
                                              TaskState::kScheduled, TaskState::kRunning});
      return s.QueryLast(
          st_.cancel_tasks,
          [&](ParamSink& p) {
            p.Text(job_id);
            p.Text(under);
            p.Time(at);
            p.Text(active);
          },
          [&](const RowView& row) -> Status {
            BATON_ASSIGN_OR_RETURN(CancelledTask t, CancelledFromRow(row));
            out.push_back(std::move(t));
            return Status::Ok();
          });
    }));
    return out;
  });
}

// ---- Log parts ----------------------------------------------------------------------

Status SqlDatastore::CreateLogPart(const LogPart& part) {
  return NoThrow([&]() -> Status {
    return Write([&](Session& s) {
      Result<std::int64_t> done =
          s.ExecuteLast(st_.insert_log_part, [&](ParamSink& p) { BindLogPart(p, part); });
      return LogPartInsertError(done.status(), part);
    });
  });
}

Result<Page<LogPart>> SqlDatastore::LogPage(const Statement& count, const Statement& list,
                                            std::string_view key, int page, int size) {
  return NoThrow([&]() -> Result<Page<LogPart>> {
    const PageSpec spec = ClampPage(page, size);
    std::optional<Page<LogPart>> out;
    BATON_RETURN_IF_ERROR(Read(
        [&](Session& s) -> Status {
          std::int64_t total = 0;
          bool counted = false;
          BATON_RETURN_IF_ERROR(s.Query(
              count, Key(key), OneRow(counted, [&](const RowView& row) { total = row.Int(0); })));
          if (!counted) return Internal("counting log parts returned no row");
          std::vector<LogPart> items;
          BATON_RETURN_IF_ERROR(s.Query(
              list,
              [&](ParamSink& p) {
                p.Text(key);
                p.Int(spec.size);
                p.Int(spec.offset);
              },
              [&](const RowView& row) -> Status {
                BATON_ASSIGN_OR_RETURN(LogPart part, LogPartFromRow(row));
                items.push_back(std::move(part));
                return Status::Ok();
              }));
          out = MakePage(spec, total, std::move(items));
          return Status::Ok();
        },
        /*snapshot=*/true));
    return std::move(*out);
  });
}

Result<Page<LogPart>> SqlDatastore::TaskLogParts(std::string_view task_id, int page, int size) {
  return LogPage(st_.count_task_log_parts, st_.task_log_parts, task_id, page, size);
}

Result<Page<LogPart>> SqlDatastore::JobLogParts(std::string_view job_id, int page, int size) {
  return LogPage(st_.count_job_log_parts, st_.job_log_parts, job_id, page, size);
}

// ---- Nodes and counts ---------------------------------------------------------------

Status SqlDatastore::UpsertNode(const NodeRecord& node) {
  return NoThrow([&]() -> Status {
    return Write([&](Session& s) {
      return s.ExecuteLast(st_.upsert_node, [&](ParamSink& p) { BindNode(p, node); }).status();
    });
  });
}

Result<std::vector<NodeRecord>> SqlDatastore::ActiveNodes(TimePoint since) {
  return ReadRows<NodeRecord>(
      st_.active_nodes, [&](ParamSink& p) { p.Time(since); },
      [](const RowView& row) { return NodeFromRow(row); });
}

Result<StateCounts> SqlDatastore::CountStates() {
  return NoThrow([&]() -> Result<StateCounts> {
    StateCounts out;
    BATON_RETURN_IF_ERROR(Read(
        [&](Session& s) -> Status {
          out = StateCounts();
          BATON_RETURN_IF_ERROR(
              s.Query(st_.count_jobs_by_state, kNoParams, [&](const RowView& row) -> Status {
                std::optional<JobState> state = ParseJobState(row.Text(0));
                if (!state) {
                  return Internal(fmt::format("a job has an unknown state '{}'", row.Text(0)));
                }
                out.jobs[*state] = row.Int(1);
                return Status::Ok();
              }));
          return s.Query(st_.count_tasks_by_state, kNoParams, [&](const RowView& row) -> Status {
            std::optional<TaskState> state = ParseTaskState(row.Text(0));
            if (!state) {
              return Internal(fmt::format("a task has an unknown state '{}'", row.Text(0)));
            }
            out.tasks[*state] = row.Int(1);
            return Status::Ok();
          });
        },
        /*snapshot=*/false));
    return out;
  });
}

Result<EndedCounts> SqlDatastore::CountJobsEndedSince(TimePoint since) {
  return NoThrow([&]() -> Result<EndedCounts> {
    EndedCounts out;
    bool counted = false;
    BATON_RETURN_IF_ERROR(Read(
        [&](Session& s) {
          return s.Query(
              st_.count_jobs_ended_since, [&](ParamSink& p) { p.Time(since); },
              OneRow(counted, [&](const RowView& row) {
                out.completed = row.Int(0);
                out.failed = row.Int(1);
              }));
        },
        /*snapshot=*/false));
    if (!counted) return Internal("counting ended jobs returned no row");
    return out;
  });
}

Result<RunningCounts> SqlDatastore::CountRunning() {
  return NoThrow([&]() -> Result<RunningCounts> {
    RunningCounts out;
    bool counted = false;
    BATON_RETURN_IF_ERROR(Read(
        [&](Session& s) {
          return s.Query(st_.count_running, kNoParams, OneRow(counted, [&](const RowView& row) {
                           out.jobs = row.Int(0);
                           out.tasks = row.Int(1);
                         }));
        },
        /*snapshot=*/false));
    if (!counted) return Internal("counting running jobs returned no row");
    return out;
  });
}

Status SqlDatastore::Health() {
  return NoThrow([&]() -> Status {
    bool answered = false;
    BATON_RETURN_IF_ERROR(Read(
        [&](Session& s) {
          return s.Query(st_.health, kNoParams, OneRow(answered, [](const RowView&) {}));
        },
        /*snapshot=*/false));
    if (!answered) return Internal("the health query returned no row");
    return Status::Ok();
  });
}

}  // namespace baton::sql

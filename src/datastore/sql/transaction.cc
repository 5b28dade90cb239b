#include "datastore/sql/transaction.h"

#include <fmt/format.h>

#include <utility>

#include "core/auth.h"
#include "core/record_json.h"
#include "datastore/sql/search.h"

namespace baton::sql {
namespace {

using nlohmann::json;

// A delivery's columns in BATON_SQL_WEBHOOK_COLUMNS order (statements.cc).
void BindDelivery(ParamSink& p, const WebhookDelivery& d, const std::string& headers,
                  const std::string& history) {
  p.Text(d.id);
  p.Text(d.job_id);
  p.Text(d.task_id);
  p.Text(d.event);
  p.Text(d.url);
  p.Text(headers);
  p.Text(d.secret);
  p.Text(d.body);
  p.Text(ToString(d.state));
  p.Int(d.attempts);
  p.Time(d.created_at);
  p.Time(d.next_attempt_at);
  p.Time(d.completed_at);
  p.Text(d.error);
  p.Text(history);
}

std::string EncodeHistory(const std::vector<WebhookAttempt>& history) {
  json out = json::array();
  for (const WebhookAttempt& a : history) out.push_back(ToJson(a));
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<WebhookDelivery> DeliveryFromRow(const RowView& row, const crypto::Keyring* keys) {
  WebhookDelivery d;
  d.id = row.Text(0);
  d.job_id = row.Text(1);
  d.task_id = row.Text(2);
  d.event = row.Text(3);
  d.url = row.Text(4);
  try {
    json headers = json::parse(row.Text(5));
    for (auto& [k, v] : headers.items()) d.headers[k] = v.get<std::string>();
    d.secret = row.Text(6);
    d.body = row.Text(7);
    auto state = ParseDeliveryState(row.Text(8));
    if (!state) return Internal(fmt::format("webhook delivery {}: unknown state", d.id));
    d.state = *state;
    d.attempts = row.Int32(9);
    d.created_at = row.Time(10);
    d.next_attempt_at = row.Time(11);
    d.completed_at = row.OptTime(12);
    d.error = row.Text(13);
    for (const json& one : json::parse(row.Text(14))) {
      Result<WebhookAttempt> a = WebhookAttemptFromJson(one);
      if (!a.ok())
        return Internal(fmt::format("webhook delivery {}: {}", d.id, a.status().message()));
      d.history.push_back(std::move(*a));
    }
  } catch (const json::exception& e) {
    return Internal(fmt::format("webhook delivery {}: {}", d.id, e.what()));
  }
  Status decrypted = DecryptSecrets(d, keys);
  if (!decrypted.ok())
    return Internal(fmt::format("webhook delivery {}: {}", d.id, decrypted.message()));
  return d;
}

// A scheduled job's columns in BATON_SQL_SCHEDULED_JOB_COLUMNS order (statements.cc).
void BindScheduledJob(ParamSink& p, const ScheduledJobRecord& s, const std::string& definition) {
  p.Text(s.id);
  p.Text(ToString(s.state));
  p.Text(s.schedule.cron);
  p.Text(s.schedule.timezone);
  p.Text(ToString(s.schedule.overlap));
  p.Int(s.schedule.catch_up_window.count());
  p.Text(ToString(s.schedule.catch_up));
  p.Text(definition);
  p.Text(s.created_by);
  p.Time(s.created_at);
  p.Time(s.updated_at);
  p.Time(s.last_tick_at);
  p.Time(s.next_tick_at);
  p.Time(s.buffered_tick_at);
  p.Text(s.last_job_id);
  p.Text(AccessText(s.job));
}

Result<ScheduledJobRecord> ScheduledJobFromRow(const RowView& row, const crypto::Keyring* keys) {
  ScheduledJobRecord s;
  s.id = row.Text(0);
  auto state = ParseScheduleState(row.Text(1));
  if (!state) return Corrupt("scheduled_jobs", s.id, "unknown state");
  s.state = *state;
  s.schedule.cron = row.Text(2);
  s.schedule.timezone = row.Text(3);
  auto overlap = ParseOverlapPolicy(row.Text(4));
  if (!overlap) return Corrupt("scheduled_jobs", s.id, "unknown overlap policy");
  s.schedule.overlap = *overlap;
  s.schedule.catch_up_window = Duration(row.Int(5));
  auto fire = ParseCatchUpFire(row.Text(6));
  if (!fire) return Corrupt("scheduled_jobs", s.id, "unknown catch-up");
  s.schedule.catch_up = *fire;
  // Decoded as the jobs table's definitions are, its secrets decrypted.
  Result<Job> job = DecodeStoredJob(row.Text(7), keys);
  if (!job.ok()) return Corrupt("scheduled_jobs", s.id, "definition: " + job.status().message());
  s.job = std::move(*job);
  s.created_by = row.Text(8);
  s.created_at = row.Time(9);
  s.updated_at = row.Time(10);
  s.last_tick_at = row.Time(11);
  s.next_tick_at = row.Time(12);
  s.buffered_tick_at = row.OptTime(13);
  s.last_job_id = row.Text(14);
  return s;
}

}  // namespace

Status SqlTransaction::Poison(Status status) {
  if (!status.ok() && poison_.ok()) poison_ = status;
  return status;
}

Result<JobRecord> SqlTransaction::GetJob(std::string_view id) {
  if (!poison_.ok()) return poison_;
  std::optional<JobRecord> out;
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.select_job_for_update, [&](ParamSink& p) { p.Text(id); },
      [&](const RowView& row) -> Status {
        std::shared_ptr<const Job> original;
        Result<JobRecord> job = JobFromRow(row, caches_, keys_, &original);
        if (!job.ok()) return job.status();
        jobs_[job->id] = {std::move(original), std::string(row.Text(kJobDefinitionColumn)),
                          KeysOf(*job)};
        out = std::move(*job);
        return Status::Ok();
      }));
  if (!out) return NotFound(fmt::format("job {} not found", id));
  return std::move(*out);
}

Result<JobRecord> SqlTransaction::GetJobState(std::string_view id, int* context_version) {
  if (!poison_.ok()) return poison_;
  std::optional<JobRecord> out;
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.select_job_state_version_for_update, [&](ParamSink& p) { p.Text(id); },
      [&](const RowView& row) -> Status {
        Result<JobRecord> job = JobStateFromRow(row);
        if (!job.ok()) return job.status();
        out = std::move(*job);
        *context_version = row.Int32(15);
        return Status::Ok();
      }));
  if (!out) return NotFound(fmt::format("job {} not found", id));
  return std::move(*out);
}

Result<nlohmann::json> SqlTransaction::GetJobContext(std::string_view id, std::size_t* bytes) {
  if (!poison_.ok()) return poison_;
  std::optional<nlohmann::json> out;
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.select_job_context, [&](ParamSink& p) { p.Text(id); },
      [&](const RowView& row) -> Status {
        std::string_view text = row.Text(0);
        Result<nlohmann::json> context = DecodeStoredContext(text, keys_);
        if (!context.ok()) return Corrupt("jobs", std::string(id), context.status().message());
        if (bytes != nullptr) *bytes = text.size();
        out = std::move(*context);
        return Status::Ok();
      }));
  if (!out) return NotFound(fmt::format("job {} not found", id));
  return std::move(*out);
}

Result<std::shared_ptr<const Job>> SqlTransaction::GetJobDefinition(std::string_view id) {
  if (!poison_.ok()) return poison_;
  std::optional<std::shared_ptr<const Job>> out;
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.select_job_definition, [&](ParamSink& p) { p.Text(id); },
      [&](const RowView& row) -> Status {
        auto definition = CachedDecode<Job>(
            caches_ != nullptr ? &caches_->jobs : nullptr, id, row.Text(0),
            // Not kept in the cache: the caller keeps what it reads once per job (the
            // scheduler does, for as long as the job runs).
            /*active=*/false,
            [this](std::string_view text) { return DecodeStoredJob(text, keys_); });
        if (!definition.ok()) {
          return Corrupt("jobs", std::string(id), "definition: " + definition.status().message());
        }
        out = std::move(*definition);
        return Status::Ok();
      }));
  if (!out) return NotFound(fmt::format("job {} not found", id));
  return std::move(*out);
}

Result<TaskRecord> SqlTransaction::GetTask(std::string_view id) {
  if (!poison_.ok()) return poison_;
  std::optional<TaskRecord> out;
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.select_task_for_update, [&](ParamSink& p) { p.Text(id); },
      [&](const RowView& row) -> Status {
        std::shared_ptr<const Task> original;
        Result<TaskRecord> task = TaskFromRow(row, caches_, keys_, &original);
        if (!task.ok()) return task.status();
        tasks_[task->id] = {std::move(original), std::string(row.Text(kTaskDefinitionColumn)),
                            KeysOf(*task)};
        out = std::move(*task);
        return Status::Ok();
      }));
  if (!out) return NotFound(fmt::format("task {} not found", id));
  return std::move(*out);
}

Result<std::vector<TaskRecord>> SqlTransaction::Tasks(const Statement& stmt, const Bind& bind) {
  if (!poison_.ok()) return poison_;
  std::vector<TaskRecord> out;
  BATON_RETURN_IF_ERROR(session_.Query(stmt, bind, [&](const RowView& row) -> Status {
    Result<TaskRecord> task = TaskFromRow(row, caches_, keys_);
    if (!task.ok()) return task.status();
    out.push_back(std::move(*task));
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<TaskRecord>> SqlTransaction::JobTasks(std::string_view job_id) {
  return Tasks(st_.job_tasks, [&](ParamSink& p) { p.Text(job_id); });
}

Result<std::vector<TaskRecord>> SqlTransaction::ChildTasks(std::string_view parent_id) {
  return Tasks(st_.child_tasks, [&](ParamSink& p) { p.Text(parent_id); });
}

Result<std::vector<TaskRecord>> SqlTransaction::NextCreatedChildren(std::string_view parent_id,
                                                                    int limit) {
  if (!poison_.ok()) return poison_;
  if (limit <= 0) return std::vector<TaskRecord>{};
  return Tasks(st_.next_created_children, [&](ParamSink& p) {
    p.Text(parent_id);
    p.Int(limit);
  });
}

Result<std::map<TaskState, int>> SqlTransaction::CountChildren(
    std::string_view parent_id, const std::vector<TaskState>& states) {
  if (!poison_.ok()) return poison_;
  std::map<TaskState, int> out;
  if (states.empty()) return out;
  std::vector<std::string_view> names;
  names.reserve(states.size());
  for (TaskState state : states) names.push_back(ToString(state));
  const std::string list = EncodeList(st_.dialect, names);
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.count_children,
      [&](ParamSink& p) {
        p.Text(parent_id);
        p.Text(list);
      },
      [&](const RowView& row) -> Status {
        std::optional<TaskState> state = ParseTaskState(row.Text(0));
        if (!state) return Internal(fmt::format("a task has an unknown state {}", row.Text(0)));
        out[*state] = static_cast<int>(row.Int(1));
        return Status::Ok();
      }));
  return out;
}

Status SqlTransaction::CreateJob(const JobRecord& job) {
  if (!poison_.ok()) return poison_;
  Result<JobText> text = EncodeJobText(job, std::nullopt, keys_);
  if (!text.ok()) return Poison(text.status());
  BATON_RETURN_IF_ERROR(Poison(CheckStoredJobSize(text->bytes(), max_job_bytes_)));
  Result<std::int64_t> done =
      session_.Execute(st_.insert_job, [&](ParamSink& p) { BindJob(p, job, *text); });
  return Poison(JobInsertError(done.status(), job));
}

Status SqlTransaction::UpdateJob(const JobRecord& job) {
  if (!poison_.ok()) return poison_;
  const Statement* stmt = &st_.update_job;
  std::optional<std::string> same;
  if (auto it = jobs_.find(job.id); it != jobs_.end()) {
    stmt = &JobUpdate(st_, it->second.keys, job);
    if (job.job == *it->second.definition) same = it->second.text;
  }
  Result<JobText> text = EncodeJobText(job, std::move(same), keys_);
  if (!text.ok()) return Poison(text.status());
  Result<std::int64_t> changed =
      session_.Execute(*stmt, [&](ParamSink& p) { BindJob(p, job, *text); });
  if (!changed.ok()) return Poison(changed.status());
  if (*changed == 0) return Poison(NotFound(fmt::format("job {} not found", job.id)));
  if (caches_ != nullptr) caches_->Written(job);  // a job that ended leaves the cache
  if (auto it = jobs_.find(job.id); it != jobs_.end()) {
    it->second.keys = KeysOf(job);
    it->second.text = std::move(text->definition);
    it->second.definition = std::make_shared<const Job>(job.job);
  }
  return Status::Ok();
}

Status SqlTransaction::UpdateJobState(const JobRecord& job) {
  if (!poison_.ok()) return poison_;
  Result<std::int64_t> changed =
      session_.Execute(st_.update_job_state_only, [&](ParamSink& p) { BindJobState(p, job); });
  if (!changed.ok()) return Poison(changed.status());
  if (*changed == 0) return Poison(NotFound(fmt::format("job {} not found", job.id)));
  if (caches_ != nullptr) caches_->Written(job);  // a job that ended leaves the cache
  if (auto it = jobs_.find(job.id); it != jobs_.end()) {
    it->second.keys.state = job.state;
    it->second.keys.delete_at = job.delete_at;
  }
  return Status::Ok();
}

Status SqlTransaction::UpdateJobStateAndContext(const JobRecord& job) {
  if (!poison_.ok()) return poison_;
  Result<std::string> context = EncodeContext(job.context, keys_);
  if (!context.ok()) return Poison(context.status());
  Result<std::int64_t> changed =
      session_.Execute(st_.update_job_state_and_context, [&](ParamSink& p) {
        BindJobState(p, job);
        p.Text(*context);
      });
  if (!changed.ok()) return Poison(changed.status());
  if (*changed == 0) return Poison(NotFound(fmt::format("job {} not found", job.id)));
  if (caches_ != nullptr) caches_->Written(job);  // a job that ended leaves the cache
  if (auto it = jobs_.find(job.id); it != jobs_.end()) {
    it->second.keys.state = job.state;
    it->second.keys.delete_at = job.delete_at;
  }
  return Status::Ok();
}

Status SqlTransaction::CreateTasks(const std::vector<TaskRecord>& tasks) {
  if (!poison_.ok()) return poison_;
  for (const TaskRecord& task : tasks) {
    Result<std::string> definition = EncodeTask(task.task, keys_);
    if (!definition.ok()) return Poison(definition.status());
    Result<std::int64_t> done =
        session_.Execute(st_.insert_task, [&](ParamSink& p) { BindTask(p, task, *definition); });
    BATON_RETURN_IF_ERROR(Poison(TaskInsertError(done.status(), task)));
  }
  return Status::Ok();
}

Status SqlTransaction::UpdateTask(const TaskRecord& task) {
  if (!poison_.ok()) return poison_;
  const Statement* stmt = &st_.update_task;
  std::string definition;
  auto it = tasks_.find(task.id);
  if (it != tasks_.end()) {
    stmt = &TaskUpdate(st_, it->second.keys, task);
    if (task.task == *it->second.definition) definition = it->second.text;
  }
  if (it == tasks_.end() || !(task.task == *it->second.definition)) {
    Result<std::string> encoded = EncodeTask(task.task, keys_);
    if (!encoded.ok()) return Poison(encoded.status());
    definition = std::move(*encoded);
  }
  Result<std::int64_t> changed =
      session_.Execute(*stmt, [&](ParamSink& p) { BindTask(p, task, definition); });
  if (!changed.ok()) return Poison(changed.status());
  if (*changed == 0) return Poison(NotFound(fmt::format("task {} not found", task.id)));
  if (caches_ != nullptr) caches_->Written(task);
  if (it != tasks_.end()) {
    it->second.keys = KeysOf(task);
    it->second.text = std::move(definition);
    it->second.definition = std::make_shared<const Task>(task.task);
  }
  return Status::Ok();
}

Result<std::vector<CancelledTask>> SqlTransaction::CancelTasks(std::string_view job_id,
                                                               std::string_view under,
                                                               TimePoint at) {
  if (!poison_.ok()) return poison_;
  std::vector<CancelledTask> out;
  Status read = session_.Query(
      under.empty() ? st_.active_job_tasks : st_.active_tasks_under,
      [&](ParamSink& p) {
        p.Text(job_id);
        if (!under.empty()) p.Text(under);
      },
      [&](const RowView& row) -> Status {
        Result<CancelledTask> t = CancelledFromRow(row);
        if (!t.ok()) return t.status();
        out.push_back(std::move(*t));
        return Status::Ok();
      });
  if (!read.ok()) return Poison(read);
  if (out.empty()) return out;
  std::vector<std::string_view> ids;
  ids.reserve(out.size());
  for (const CancelledTask& t : out) {
    ids.push_back(t.id);
    // What the scope read of the row is stale now: a later UpdateTask of it writes every
    // column instead of leaving the state out as unchanged.
    tasks_.erase(t.id);
  }
  const std::string list = EncodeList(st_.dialect, ids);
  Result<std::int64_t> changed = session_.Execute(st_.cancel_rows, [&](ParamSink& p) {
    p.Text(list);
    p.Time(at);
  });
  if (!changed.ok()) return Poison(changed.status());
  return out;
}

Status RunScope(Session& session, const Statements& statements, DefinitionCaches* caches,
                const crypto::Keyring* keys, std::size_t max_job_bytes,
                const std::function<Status(Transaction&)>& body) {
  SqlTransaction scope(session, statements, caches, keys, max_job_bytes);
  Status status = datastore_util::NoThrow([&] { return body(scope); });
  if (!status.ok()) return status;
  return scope.poison();
}

Status SqlTransaction::CreateWebhookDeliveries(const std::vector<WebhookDelivery>& deliveries) {
  if (!poison_.ok()) return poison_;
  for (const WebhookDelivery& plain : deliveries) {
    WebhookDelivery d = plain;
    BATON_RETURN_IF_ERROR(Poison(EncryptSecrets(d, keys_)));
    json headers(d.headers);
    std::string headers_text = headers.dump(-1, ' ', false, json::error_handler_t::replace);
    std::string history = EncodeHistory(d.history);
    Result<std::int64_t> done = session_.Execute(st_.insert_webhook_delivery, [&](ParamSink& p) {
      BindDelivery(p, d, headers_text, history);
    });
    if (!done.ok() && done.status().code() == StatusCode::kAlreadyExists) {
      return Poison(AlreadyExists(fmt::format("webhook delivery {} already exists", d.id)));
    }
    BATON_RETURN_IF_ERROR(Poison(done.status()));
  }
  return Status::Ok();
}

Result<std::vector<WebhookDelivery>> SqlTransaction::Deliveries(const Statement& stmt,
                                                                const Bind& bind) {
  if (!poison_.ok()) return poison_;
  std::vector<WebhookDelivery> out;
  BATON_RETURN_IF_ERROR(session_.Query(stmt, bind, [&](const RowView& row) -> Status {
    Result<WebhookDelivery> d = DeliveryFromRow(row, keys_);
    if (!d.ok()) return d.status();
    out.push_back(std::move(*d));
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<WebhookDelivery>> SqlTransaction::DueWebhookDeliveries(TimePoint now,
                                                                          int limit) {
  if (limit <= 0) return std::vector<WebhookDelivery>{};
  return Deliveries(st_.due_webhook_deliveries, [&](ParamSink& p) {
    p.Time(now);
    p.Int(limit);
  });
}

Status SqlTransaction::UpdateWebhookDelivery(const WebhookDelivery& delivery) {
  if (!poison_.ok()) return poison_;
  std::string history = EncodeHistory(delivery.history);
  Result<std::int64_t> changed = session_.Execute(st_.update_webhook_delivery, [&](ParamSink& p) {
    p.Text(delivery.id);
    p.Text(ToString(delivery.state));
    p.Int(delivery.attempts);
    p.Time(delivery.next_attempt_at);
    p.Time(delivery.completed_at);
    p.Text(delivery.error);
    p.Text(history);
  });
  if (!changed.ok()) return Poison(changed.status());
  if (*changed == 0) {
    return Poison(NotFound(fmt::format("webhook delivery {} not found", delivery.id)));
  }
  if (delivery.state != DeliveryState::kPending) {
    // Its job was deleted while it was under way: nothing shows it any more.
    Result<std::int64_t> gone = session_.Execute(st_.delete_orphan_webhook_delivery,
                                                 [&](ParamSink& p) { p.Text(delivery.id); });
    if (!gone.ok()) return Poison(gone.status());
  }
  return Status::Ok();
}

Result<int> SqlTransaction::ReleaseWebhookDeliveries(TimePoint now) {
  if (!poison_.ok()) return poison_;
  Result<std::int64_t> changed =
      session_.Execute(st_.release_webhook_deliveries, [&](ParamSink& p) { p.Time(now); });
  if (!changed.ok()) return Poison(changed.status());
  return static_cast<int>(*changed);
}

Result<std::vector<WebhookDelivery>> SqlTransaction::JobWebhookDeliveries(std::string_view job_id) {
  return Deliveries(st_.job_webhook_deliveries, [&](ParamSink& p) { p.Text(job_id); });
}

Result<int> SqlTransaction::DeleteLogPartsBefore(TimePoint before, int limit) {
  if (!poison_.ok()) return poison_;
  if (limit <= 0) return 0;
  Result<std::int64_t> deleted = session_.Execute(st_.delete_old_log_parts, [&](ParamSink& p) {
    p.Time(before);
    p.Int(limit);
  });
  if (!deleted.ok()) return Poison(deleted.status());
  return static_cast<int>(*deleted);
}

Result<std::vector<std::string>> SqlTransaction::FinishedJobsCreatedBefore(TimePoint before,
                                                                           int limit) {
  if (!poison_.ok()) return poison_;
  std::vector<std::string> ids;
  if (limit <= 0) return ids;
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.old_finished_jobs,
      [&](ParamSink& p) {
        p.Time(before);
        p.Int(limit);
      },
      [&](const RowView& row) -> Status {
        ids.emplace_back(row.Text(0));
        return Status::Ok();
      }));
  return ids;
}

Result<ReencryptBatch> SqlTransaction::ReencryptSecrets(SecretTable table,
                                                        std::string_view after_id, int limit) {
  if (!poison_.ok()) return poison_;
  if (keys_ == nullptr) {
    return FailedPrecondition(
        "no encryption key is configured (datastore.encryption.key or "
        "datastore.encryption.key_file): there is nothing to rotate to");
  }
  ReencryptBatch batch;
  if (limit <= 0) return batch;
  struct Row {
    std::string id;
    std::string a;  // definition, or headers
    std::string b;  // context, or secret
  };
  std::vector<Row> rows;
  const Statement& select = table == SecretTable::kJobs    ? st_.jobs_secrets_after
                            : table == SecretTable::kTasks ? st_.tasks_secrets_after
                                                           : st_.webhook_secrets_after;
  BATON_RETURN_IF_ERROR(Poison(session_.Query(
      select,
      [&](ParamSink& p) {
        p.Text(after_id);
        p.Int(limit);
      },
      [&](const RowView& row) -> Status {
        Row r{std::string(row.Text(0)), std::string(row.Text(1)), ""};
        if (table != SecretTable::kTasks) r.b = std::string(row.Text(2));
        rows.push_back(std::move(r));
        return Status::Ok();
      })));
  for (Row& row : rows) {
    ++batch.read;
    batch.last_id = row.id;
    SecretsSeen seen;
    // Each value decoded with its own key and encoded again under the primary; the
    // decode is the one every read makes, so a row rotates exactly when a read would
    // find a secret not under the primary key.
    auto what = [&](std::string_view column, const Status& status) {
      return Poison(
          Status(status.code(), fmt::format("{} row {}: {}: {}",
                                            table == SecretTable::kJobs    ? "jobs"
                                            : table == SecretTable::kTasks ? "tasks"
                                                                           : "webhook_deliveries",
                                            row.id, column, status.message())));
    };
    Status write;
    if (table == SecretTable::kJobs) {
      Result<Job> job = DecodeJobJson(row.a, DecodeMode::kStored);
      if (!job.ok()) return what("definition", job.status());
      Status s = DecryptSecrets(*job, keys_, &seen);
      if (!s.ok()) return what("definition", s);
      auto context = nlohmann::json::parse(row.b, nullptr, /*allow_exceptions=*/false);
      if (context.is_discarded()) return what("context", Internal("not JSON"));
      s = DecryptContext(context, keys_, &seen);
      if (!s.ok()) return what("context", s);
      if (seen.stale == 0) continue;
      Result<std::string> definition = EncodeJob(*job, keys_);
      if (!definition.ok()) return what("definition", definition.status());
      Result<std::string> context_text = EncodeContext(context, keys_);
      if (!context_text.ok()) return what("context", context_text.status());
      write = session_
                  .Execute(st_.update_job_secrets,
                           [&](ParamSink& p) {
                             p.Text(row.id);
                             p.Text(*definition);
                             p.Text(*context_text);
                           })
                  .status();
      if (caches_ != nullptr) caches_->jobs.Forget(row.id);
    } else if (table == SecretTable::kTasks) {
      Result<Task> task = DecodeTaskJson(row.a, DecodeMode::kStored);
      if (!task.ok()) return what("definition", task.status());
      Status s = DecryptSecrets(*task, keys_, &seen);
      if (!s.ok()) return what("definition", s);
      if (seen.stale == 0) continue;
      Result<std::string> definition = EncodeTask(*task, keys_);
      if (!definition.ok()) return what("definition", definition.status());
      write = session_
                  .Execute(st_.update_task_secrets,
                           [&](ParamSink& p) {
                             p.Text(row.id);
                             p.Text(*definition);
                           })
                  .status();
      if (caches_ != nullptr) caches_->tasks.Forget(row.id);
    } else {
      WebhookDelivery d;
      d.id = row.id;
      d.secret = row.b;
      try {
        const json headers = json::parse(row.a);
        for (auto& [k, v] : headers.items()) d.headers[k] = v.get<std::string>();
      } catch (const json::exception& e) {
        return what("headers", Internal(e.what()));
      }
      Status s = DecryptSecrets(d, keys_, &seen);
      if (!s.ok()) return what("secret", s);
      if (seen.stale == 0) continue;
      s = EncryptSecrets(d, keys_);
      if (!s.ok()) return what("secret", s);
      const std::string headers =
          json(d.headers).dump(-1, ' ', false, json::error_handler_t::replace);
      write = session_
                  .Execute(st_.update_webhook_secrets,
                           [&](ParamSink& p) {
                             p.Text(row.id);
                             p.Text(headers);
                             p.Text(d.secret);
                           })
                  .status();
    }
    BATON_RETURN_IF_ERROR(Poison(write));
    ++batch.rewritten;
  }
  return batch;
}

Status SqlTransaction::CreateScheduledJob(const ScheduledJobRecord& scheduled) {
  if (!poison_.ok()) return poison_;
  Result<std::string> definition = EncodeJob(scheduled.job, keys_);
  if (!definition.ok()) return Poison(definition.status());
  BATON_RETURN_IF_ERROR(Poison(CheckStoredJobSize(definition->size(), max_job_bytes_)));
  Result<std::int64_t> done = session_.Execute(
      st_.insert_scheduled_job, [&](ParamSink& p) { BindScheduledJob(p, scheduled, *definition); });
  if (!done.ok() && done.status().code() == StatusCode::kAlreadyExists) {
    return Poison(AlreadyExists(fmt::format("scheduled job {} already exists", scheduled.id)));
  }
  return Poison(done.status());
}

Result<ScheduledJobRecord> SqlTransaction::GetScheduledJob(std::string_view id) {
  if (!poison_.ok()) return poison_;
  std::optional<ScheduledJobRecord> found;
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.select_scheduled_job_for_update, [&](ParamSink& p) { p.Text(id); },
      [&](const RowView& row) -> Status {
        BATON_ASSIGN_OR_RETURN(found, ScheduledJobFromRow(row, keys_));
        return Status::Ok();
      }));
  if (!found) return NotFound(fmt::format("no scheduled job {}", id));
  return std::move(*found);
}

Status SqlTransaction::UpdateScheduledJob(const ScheduledJobRecord& scheduled) {
  if (!poison_.ok()) return poison_;
  Result<std::string> definition = EncodeJob(scheduled.job, keys_);
  if (!definition.ok()) return Poison(definition.status());
  BATON_RETURN_IF_ERROR(Poison(CheckStoredJobSize(definition->size(), max_job_bytes_)));
  Result<std::int64_t> changed = session_.Execute(
      st_.update_scheduled_job, [&](ParamSink& p) { BindScheduledJob(p, scheduled, *definition); });
  if (!changed.ok()) return Poison(changed.status());
  if (*changed == 0) return Poison(NotFound(fmt::format("no scheduled job {}", scheduled.id)));
  return Status::Ok();
}

Status SqlTransaction::DeleteScheduledJob(std::string_view id) {
  if (!poison_.ok()) return poison_;
  Result<std::int64_t> changed =
      session_.Execute(st_.delete_scheduled_job, [&](ParamSink& p) { p.Text(id); });
  if (!changed.ok()) return Poison(changed.status());
  if (*changed == 0) return Poison(NotFound(fmt::format("no scheduled job {}", id)));
  return Status::Ok();
}

Result<Page<ScheduledJobRecord>> SqlTransaction::ListScheduledJobs(
    int page, int size, const std::optional<Principal>& viewer) {
  if (!poison_.ok()) return poison_;
  datastore_util::PageSpec spec = datastore_util::ClampPage(page, size);
  const JobSearch search = BuildScheduledJobSearch(st_.dialect, viewer);
  auto params = [&](ParamSink& p) {
    for (const std::string& param : search.params) p.Text(param);
  };
  std::int64_t total = 0;
  BATON_RETURN_IF_ERROR(session_.QueryOnce(search.count_sql, params, [&](const RowView& row) {
    total = row.Int(0);
    return Status::Ok();
  }));
  std::vector<ScheduledJobRecord> items;
  BATON_RETURN_IF_ERROR(session_.QueryOnce(
      search.list_sql,
      [&](ParamSink& p) {
        params(p);
        p.Int(spec.size);
        p.Int(spec.offset);
      },
      [&](const RowView& row) -> Status {
        BATON_ASSIGN_OR_RETURN(auto s, ScheduledJobFromRow(row, keys_));
        items.push_back(std::move(s));
        return Status::Ok();
      }));
  return datastore_util::MakePage(spec, total, std::move(items));
}

Status SqlTransaction::FillScheduledJobAccess() {
  if (!poison_.ok()) return poison_;
  std::vector<std::string> ids;
  BATON_RETURN_IF_ERROR(Poison(session_.QueryOnce(
      "SELECT id FROM scheduled_jobs WHERE access IS NULL", [](ParamSink&) {},
      [&](const RowView& row) {
        ids.emplace_back(row.Text(0));
        return Status::Ok();
      })));
  for (const std::string& id : ids) {
    BATON_ASSIGN_OR_RETURN(ScheduledJobRecord record, GetScheduledJob(id));
    if (record.created_by.empty()) record.created_by = record.job.created_by;
    BATON_RETURN_IF_ERROR(UpdateScheduledJob(record));
  }
  return Status::Ok();
}

Result<std::vector<std::string>> SqlTransaction::DueScheduledJobs(TimePoint now, int limit) {
  if (!poison_.ok()) return poison_;
  std::vector<std::string> ids;
  if (limit <= 0) return ids;
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.due_scheduled_jobs,
      [&](ParamSink& p) {
        p.Time(now);
        p.Int(limit);
      },
      [&](const RowView& row) -> Status {
        ids.emplace_back(row.Text(0));
        return Status::Ok();
      }));
  return ids;
}

Result<std::optional<TimePoint>> SqlTransaction::NextScheduledTick(TimePoint now) {
  if (!poison_.ok()) return poison_;
  std::optional<TimePoint> next;
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.next_scheduled_tick, [&](ParamSink& p) { p.Time(now); },
      [&](const RowView& row) -> Status {
        if (row.Int(0) > 0) next = row.OptTime(1);
        return Status::Ok();
      }));
  return next;
}

// ---- Users and API keys ----------------------------------------------------------

Status SqlTransaction::CreateUser(const UserRecord& user) {
  if (!poison_.ok()) return poison_;
  std::string roles = nlohmann::json(user.roles).dump();
  Result<std::int64_t> done = session_.Execute(st_.insert_user, [&](ParamSink& p) {
    p.Text(user.id);
    p.Text(user.username);
    p.Text(user.name);
    p.Text(user.password_hash);
    p.Text(roles);
    p.Time(user.created_at);
  });
  if (!done.ok() && done.status().code() == StatusCode::kAlreadyExists) {
    return Poison(AlreadyExists(fmt::format("user {} already exists", user.username)));
  }
  return Poison(done.status());
}

Result<UserRecord> SqlTransaction::GetUser(std::string_view username) {
  if (!poison_.ok()) return poison_;
  std::optional<UserRecord> found;
  BATON_RETURN_IF_ERROR(session_.Query(
      st_.select_user, [&](ParamSink& p) { p.Text(username); },
      [&](const RowView& row) -> Status {
        UserRecord user;
        user.id = std::string(row.Text(0));
        user.username = std::string(row.Text(1));
        user.name = std::string(row.Text(2));
        user.password_hash = std::string(row.Text(3));
        nlohmann::json roles = nlohmann::json::parse(row.Text(4), nullptr, false);
        if (!roles.is_array()) return Internal("users row " + user.id + ": roles is not a list");
        for (const auto& role : roles) {
          if (role.is_string()) user.roles.push_back(role.get<std::string>());
        }
        user.created_at = row.Time(5);
        found = std::move(user);
        return Status::Ok();
      }));
  if (!found) return NotFound(fmt::format("no user {}", username.substr(0, 64)));
  return std::move(*found);
}

Status SqlTransaction::CreateApiKey(const ApiKeyRecord& key) {
  if (!poison_.ok()) return poison_;
  Result<std::int64_t> done = session_.Execute(st_.insert_api_key, [&](ParamSink& p) {
    p.Text(key.id);
    p.Text(key.username);
    p.Text(key.name);
    p.Text(key.key_hash);
    p.Time(key.created_at);
    p.Time(key.revoked_at);
  });
  if (!done.ok() && done.status().code() == StatusCode::kAlreadyExists) {
    return Poison(AlreadyExists(fmt::format("API key {} already exists", key.id)));
  }
  return Poison(done.status());
}

Result<std::vector<ApiKeyRecord>> SqlTransaction::Keys(const Statement& stmt, const Bind& bind) {
  if (!poison_.ok()) return poison_;
  std::vector<ApiKeyRecord> keys;
  BATON_RETURN_IF_ERROR(session_.Query(stmt, bind, [&](const RowView& row) -> Status {
    ApiKeyRecord key;
    key.id = std::string(row.Text(0));
    key.username = std::string(row.Text(1));
    key.name = std::string(row.Text(2));
    key.key_hash = std::string(row.Text(3));
    key.created_at = row.Time(4);
    key.revoked_at = row.OptTime(5);
    keys.push_back(std::move(key));
    return Status::Ok();
  }));
  return keys;
}

Result<ApiKeyRecord> SqlTransaction::GetApiKeyByHash(std::string_view key_hash) {
  BATON_ASSIGN_OR_RETURN(auto keys,
                         Keys(st_.select_api_key_by_hash, [&](ParamSink& p) { p.Text(key_hash); }));
  if (keys.empty()) return NotFound("no such API key");
  return std::move(keys.front());
}

Result<std::vector<ApiKeyRecord>> SqlTransaction::ApiKeys(std::string_view username) {
  return Keys(st_.user_api_keys, [&](ParamSink& p) { p.Text(username); });
}

Status SqlTransaction::RevokeApiKey(std::string_view id, TimePoint at) {
  if (!poison_.ok()) return poison_;
  Result<std::int64_t> changed = session_.Execute(st_.revoke_api_key, [&](ParamSink& p) {
    p.Text(id);
    p.Time(at);
  });
  if (!changed.ok()) return Poison(changed.status());
  if (*changed == 0) return NotFound(fmt::format("no API key {}", id.substr(0, 64)));
  return Status::Ok();
}

}  // namespace baton::sql

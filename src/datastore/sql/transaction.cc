#include "datastore/sql/transaction.h"

#include <fmt/format.h>

#include <utility>

namespace baton::sql {

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
        Result<JobRecord> job = JobFromRow(row, caches_, &original);
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
        *context_version = row.Int32(13);
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
        auto context = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (context.is_discarded()) return Corrupt("jobs", std::string(id), "context is not JSON");
        if (bytes != nullptr) *bytes = text.size();
        out = std::move(context);
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
            [](std::string_view text) { return DecodeJobJson(text, DecodeMode::kStored); });
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
        Result<TaskRecord> task = TaskFromRow(row, caches_, &original);
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
    Result<TaskRecord> task = TaskFromRow(row, caches_);
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
  Result<JobText> text = EncodeJobText(job, std::nullopt);
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
  Result<JobText> text = EncodeJobText(job, std::move(same));
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
  Result<std::string> context = Dump(job.context, "job context");
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
    Result<std::string> definition = EncodeTask(task.task);
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
    Result<std::string> encoded = EncodeTask(task.task);
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
                std::size_t max_job_bytes, const std::function<Status(Transaction&)>& body) {
  SqlTransaction scope(session, statements, caches, max_job_bytes);
  Status status = datastore_util::NoThrow([&] { return body(scope); });
  if (!status.ok()) return status;
  return scope.poison();
}

}  // namespace baton::sql

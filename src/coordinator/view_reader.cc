#include "coordinator/view_reader.h"

#include <optional>
#include <utility>
#include <variant>

#include "core/task_kind.h"

namespace baton {
namespace {

// A read that finds no row decides nothing about it (a late event about a deleted job).
template <typename T>
Result<std::optional<T>> Optional(Result<T> read) {
  if (read.ok()) return std::optional<T>(std::move(*read));
  if (read.status().code() == StatusCode::kNotFound) return std::optional<T>();
  return read.status();
}

}  // namespace

Status ViewReader::Read(Transaction& tx, const flow::Event& event, JobCache::Scope& scope,
                        flow::View& view) {
  if (std::holds_alternative<flow::Submit>(event)) return Status::Ok();
  flow::ViewKeys keys = flow::KeysOf(event);
  std::string job_id = keys.job_id;
  // Events that read their task row alone (flow.h says which).
  const bool row_only = std::holds_alternative<flow::Started>(event) ||
                        std::holds_alternative<flow::WorkerCancelled>(event) ||
                        std::holds_alternative<flow::RetryDue>(event);
  if (!keys.task_id.empty() && row_only) {
    auto task = Optional(tx.GetTask(keys.task_id));
    if (!task.ok()) return task.status();
    if (!*task) return Status::Ok();
    job_id = (*task)->job_id;
    view.tasks[keys.task_id] = std::move(**task);
    if (!std::holds_alternative<flow::Started>(event)) return Status::Ok();
    return ReadStarted(tx, std::move(job_id), view);
  }
  const bool nearest = std::holds_alternative<flow::Progress>(event);
  return ReadChain(tx, keys.task_id, std::move(job_id), nearest, scope, view);
}

Status ViewReader::ReadStarted(Transaction& tx, std::string job_id, flow::View& view) {
  for (int depth = 0; depth < 100; ++depth) {
    int version = 0;
    auto job = Optional(tx.GetJobState(job_id, &version));
    if (!job.ok()) return job.status();
    if (!*job) break;
    const bool scheduled = (*job)->state == JobState::kScheduled;
    std::string parent = (*job)->parent_id;
    view.jobs[job_id] = std::move(**job);
    if (!scheduled || parent.empty()) break;
    auto parent_row = Optional(tx.GetTask(parent));
    if (!parent_row.ok()) return parent_row.status();
    if (!*parent_row) break;
    job_id = (*parent_row)->job_id;
    view.tasks[parent] = std::move(**parent_row);
  }
  return Status::Ok();
}

Status ViewReader::ReadChain(Transaction& tx, std::string task_id, std::string job_id, bool nearest,
                             JobCache::Scope& scope, flow::View& view) {
  for (int depth = 0; depth < 100; ++depth) {
    while (!task_id.empty()) {
      auto task = Optional(tx.GetTask(task_id));
      if (!task.ok()) return task.status();
      if (!*task) {
        if (depth == 0 && view.tasks.empty()) return Status::Ok();  // the event's task is gone
        break;
      }
      TaskRecord& row = **task;
      if (job_id.empty()) job_id = row.job_id;
      if (KindOf(row.task) == TaskKind::kEach) BATON_RETURN_IF_ERROR(AddEach(tx, row, view));
      task_id = row.parent_id;
      view.tasks[row.id] = std::move(row);
      if (nearest) break;
    }
    auto found = ReadJob(tx, job_id, scope, view);
    if (!found.ok()) return found.status();
    if (!*found) break;
    const std::string parent = view.jobs[job_id].parent_id;
    if (parent.empty() || nearest) break;
    auto parent_row = Optional(tx.GetTask(parent));
    if (!parent_row.ok()) return parent_row.status();
    if (!*parent_row) break;
    task_id = parent;
    job_id = (*parent_row)->job_id;
  }
  return Status::Ok();
}

Result<bool> ViewReader::ReadJob(Transaction& tx, const std::string& job_id, JobCache::Scope& scope,
                                 flow::View& view) {
  int version = 0;
  auto job = Optional(tx.GetJobState(job_id, &version));
  if (!job.ok()) return job.status();
  if (!*job) return false;
  auto definition = cache_.DefinitionOf(tx, job_id);
  if (!definition.ok()) return definition.status();
  auto context = cache_.ContextOf(tx, job_id, version, scope);
  if (!context.ok()) return context.status();
  view.jobs[job_id] = std::move(**job);
  view.definitions[job_id] = std::move(*definition);
  view.contexts[job_id] = std::move(*context);
  return true;
}

Status ViewReader::AddEach(Transaction& tx, const TaskRecord& each, flow::View& view) {
  // Without a concurrency nothing limits its slots: its children are not counted (they
  // would be every queued one, read again at each child's completion).
  int running = 0;
  if (each.task.each && each.task.each->concurrency > 0) {
    auto counts = tx.CountChildren(
        each.id, {TaskState::kPending, TaskState::kScheduled, TaskState::kRunning});
    if (!counts.ok()) return counts.status();
    for (const auto& [state, n] : *counts) running += n;
  }
  view.running_children[each.id] = running;
  auto next = tx.NextCreatedChildren(each.id, flow::NextCreatedWanted(each, running));
  if (!next.ok()) return next.status();
  if (!next->empty()) view.next_created[each.id] = std::move(*next);
  return Status::Ok();
}

}  // namespace baton

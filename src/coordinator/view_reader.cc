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
  // Exactly what flow::ReadsOf says: the event's task and, as its flags say, its job, and
  // up the tree through sub-jobs.
  const flow::Reads reads = flow::ReadsOf(event);
  std::string task_id = reads.task ? reads.task_id : "";
  std::string job_id = reads.job_id;
  if (reads.all_tasks && !job_id.empty()) {
    auto rows = tx.JobTasks(job_id);
    if (!rows.ok()) return rows.status();
    for (TaskRecord& row : *rows) {
      std::string id = row.id;
      view.tasks.insert_or_assign(std::move(id), std::move(row));
    }
  }
  for (int depth = 0; depth < 100; ++depth) {
    if (!task_id.empty()) {
      auto first = ReadTasks(tx, reads, task_id, view);
      if (!first.ok()) return first.status();
      if (first->empty()) return Status::Ok();  // a missing task: nothing more
      job_id = *first;
      if (depth == 0) BATON_RETURN_IF_ERROR(ReadMoreTasks(tx, reads, view));
    }
    if (!reads.job) return reads.hooks ? ReadHookJob(tx, job_id, scope, view) : Status::Ok();
    auto parent = ReadJob(tx, reads, job_id, scope, view);
    if (!parent.ok()) return parent.status();
    if (parent->empty()) break;
    task_id = *parent;
  }
  return Status::Ok();
}

Result<std::string> ViewReader::ReadTasks(Transaction& tx, const flow::Reads& reads,
                                          std::string task_id, flow::View& view) {
  // The event's task (or the one that started the job below as a sub-job) and, when read,
  // its ancestors. The first one names the job.
  std::string job_id;
  for (bool first = true; !task_id.empty(); first = false) {
    auto task = Optional(tx.GetTask(task_id));
    if (!task.ok()) return task.status();
    if (!*task) break;
    TaskRecord& row = **task;
    if (first) job_id = row.job_id;
    if (reads.each_children && KindOf(row.task) == TaskKind::kEach) {
      BATON_RETURN_IF_ERROR(AddEach(tx, row, view));
    }
    task_id = reads.ancestors ? row.parent_id : "";
    view.tasks[row.id] = std::move(row);
  }
  return job_id;
}

Status ViewReader::ReadMoreTasks(Transaction& tx, const flow::Reads& reads, flow::View& view) {
  for (const std::string& id : reads.more_tasks) {
    auto task = Optional(tx.GetTask(id));
    if (!task.ok()) return task.status();
    if (*task) view.tasks[id] = std::move(**task);
  }
  return Status::Ok();
}

Status ViewReader::ReadHookJob(Transaction& tx, const std::string& job_id, JobCache::Scope& scope,
                               flow::View& view) {
  // Its definition is shared (JobCache): a job without webhooks costs no more, and an
  // ended one known to have none is not read again.
  if (cache_.KnownWithoutHooks(job_id)) return Status::Ok();
  auto definition = cache_.DefinitionOf(tx, job_id);
  if (!definition.ok()) {
    return definition.status().code() == StatusCode::kNotFound ? Status::Ok() : definition.status();
  }
  const bool hooks = !(*definition)->webhooks.empty();
  view.definitions[job_id] = std::move(*definition);
  if (!hooks) return Status::Ok();
  int version = 0;
  auto job = Optional(tx.GetJobState(job_id, &version));
  if (!job.ok()) return job.status();
  if (!*job) return Status::Ok();
  auto context = cache_.ContextOf(tx, job_id, version, scope);
  if (!context.ok()) return context.status();
  view.contexts[job_id] = std::move(*context);
  view.jobs[job_id] = std::move(**job);
  return Status::Ok();
}

Result<std::string> ViewReader::ReadJob(Transaction& tx, const flow::Reads& reads,
                                        const std::string& job_id, JobCache::Scope& scope,
                                        flow::View& view) {
  int version = 0;
  auto job = Optional(tx.GetJobState(job_id, &version));
  if (!job.ok()) return job.status();
  if (!*job) return std::string();
  if (reads.job_whole || reads.hooks) {
    // The row is read without its definition and context, which are shared (JobCache):
    // what a step reads of its job does not grow with it. For its webhooks alone, the
    // context only when it has some.
    auto definition = cache_.DefinitionOf(tx, job_id);
    if (!definition.ok()) return definition.status();
    if (reads.job_whole || !(*definition)->webhooks.empty()) {
      auto context = cache_.ContextOf(tx, job_id, version, scope);
      if (!context.ok()) return context.status();
      view.contexts[job_id] = std::move(*context);
    }
    view.definitions[job_id] = std::move(*definition);
  }
  const bool up =
      reads.ancestors || (reads.scheduled_parents && (*job)->state == JobState::kScheduled);
  std::string parent = up ? (*job)->parent_id : "";
  view.jobs[job_id] = std::move(**job);
  return parent;
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

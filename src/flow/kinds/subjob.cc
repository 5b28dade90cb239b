// A subjob: a job of its own, started by its task; its end ends the task (CompleteJob,
// FailJob), unless it is detached.
#include "core/document.h"
#include "core/messages.h"
#include "flow/decider.h"

namespace baton::flow {

void Decider::DispatchSubJob(const std::string& id) {
  TaskRecord& t = *T(id);
  const SubJob& def = *t.task.subjob;
  Job child;
  child.name = def.name;
  child.description = def.description;
  child.mode = def.mode;
  child.tasks = def.tasks;
  child.inputs = def.inputs;
  child.secrets = def.secrets;
  child.output = def.output;
  child.auto_delete = def.auto_delete;
  child.webhooks = def.webhooks;
  child.on_failure = def.on_failure;
  child.finally = def.finally;
  // A sub-job is its parent's: the same users see it, and it has the same creator.
  if (auto parent = view_.jobs.find(t.job_id); parent != view_.jobs.end()) {
    const Job& parent_def = Def(parent->second);
    child.permissions = parent_def.permissions;
    child.created_by = parent_def.created_by;
  }
  bool detached = def.detached;
  JobRecord row = NewJobRecord(child, detached ? "" : id, MakeId(), now_);
  Result<std::size_t> bytes = StoredJobBytes(row);
  Status fits =
      bytes.ok() ? CheckStoredJobSize(*bytes, view_.policy.max_job_bytes) : bytes.status();
  if (!fits.ok()) return FailNow(t, "subjob: " + fits.message());
  std::string child_id = NewJob(std::move(row)).id;
  t.subjob_id = child_id;
  t.started_at = now_;
  if (detached) {
    t.state = TaskState::kCompleted;
    t.completed_at = now_;
    StartJobRule(child_id);
    TaskDone(id);
    return;
  }
  t.state = TaskState::kRunning;
  StartJobRule(child_id);
}

}  // namespace baton::flow

// An each: a child per item of its list, all evaluated and stored CREATED at once, started
// as its `concurrency` frees slots.
#include <fmt/format.h>

#include <limits>

#include "core/evaluate.h"
#include "core/messages.h"
#include "core/task_kind.h"
#include "flow/decider.h"

namespace baton::flow {

void Decider::On(const FillEach& e) {
  TaskRecord* t = T(e.task_id);
  if (t == nullptr || t->state != TaskState::kRunning || KindOf(t->task) != TaskKind::kEach) {
    return;
  }
  FillSlots(t->id);
}

void Decider::DispatchEach(const std::string& id, const json& extra) {
  TaskRecord& t = *T(id);
  const JobRecord& job = *J(t.job_id);
  const Each& each = *t.task.each;
  std::string var = each.var.empty() ? "item" : each.var;
  json loop = extra;  // and each child's item, bound in turn
  const expr::Vars vars = VarsFor(job, loop);
  auto list = EvaluateEachList(each.list, vars, options_);
  if (!list.ok()) return FailNow(t, "each.list: " + list.status().message());
  if (!list->is_array()) {
    return FailNow(t, fmt::format("each.list: expected a list, got {}",
                                  SanitizeUtf8(expr::ToText(*list).substr(0, 100))));
  }
  if (!IsUtf8(*list)) return FailNow(t, fmt::format("each.list: {}", kNotUtf8));
  t.started_at = now_;
  if (list->empty()) {
    t.state = TaskState::kCompleted;
    t.completed_at = now_;
    return TaskDone(id);
  }
  // Every child is evaluated now, while its item is known, and held CREATED until a
  // slot frees up; a skipped one is counted at once (and takes no slot).
  std::vector<TaskRecord> children;
  children.reserve(list->size());
  int skipped = 0;
  for (std::size_t i = 0; i < list->size(); ++i) {
    json binding = {{"index", i}, {"value", (*list)[i]}};
    TaskRecord child;
    child.id = MakeId();
    child.job_id = t.job_id;
    child.parent_id = id;
    child.position = t.position;
    child.state = TaskState::kCreated;
    child.created_at = now_;
    child.each_index = static_cast<int>(i);
    child.task = *each.task;
    ApplyDefaults(Def(job).defaults, child.task);
    if (child.task.IsComposite()) {
      child.scope = extra;
      child.scope[var] = binding;
    }
    loop[var] = binding;
    if (!child.task.if_expr.empty()) {
      auto runs = EvaluateCondition(child.task.if_expr, vars, options_);
      if (!runs.ok()) return FailNow(*T(id), "each: " + runs.status().message());
      if (!*runs) {
        child.state = TaskState::kSkipped;
        child.completed_at = now_;
        ++skipped;
      }
      child.task.if_expr.clear();
    }
    if (child.state == TaskState::kCreated) {
      Status ok = EvaluateTask(child.task, vars, options_);
      if (!ok.ok()) return FailNow(*T(id), "each: " + ok.message());
    }
    children.push_back(std::move(child));
  }
  TaskRecord& parent = *T(id);
  parent.state = TaskState::kRunning;
  parent.each_size = static_cast<int>(children.size());
  parent.completions = skipped;
  running_[id] = 0;
  all_known_.insert(id);
  for (TaskRecord& child : children) {
    bool waiting = child.state == TaskState::kCreated;
    std::string child_id = NewTask(std::move(child)).id;
    if (waiting) waiting_[id].push_back(child_id);
  }
  if (skipped >= parent.each_size) {
    if (Finish(parent, TaskState::kCompleted, "", "", "", std::nullopt)) TaskDone(id);
    return;
  }
  FillSlots(id);
}

// Starts CREATED children of an each while it has free slots.
void Decider::FillSlots(const std::string& each_id) {
  for (;;) {
    TaskRecord& t = *T(each_id);
    if (t.state != TaskState::kRunning) return;
    int limit =
        t.task.each->concurrency > 0 ? t.task.each->concurrency : std::numeric_limits<int>::max();
    if (running_[each_id] >= limit) return;
    std::deque<std::string>& waiting = waiting_[each_id];
    TaskRecord* child = nullptr;
    while (!waiting.empty() && child == nullptr) {
      child = T(waiting.front());
      waiting.pop_front();
      if (child != nullptr && child->state != TaskState::kCreated) child = nullptr;
    }
    if (child == nullptr) {
      // The view held the next CREATED children only: decide again with the ones after.
      if (all_known_.contains(each_id) || !view_.next_created.contains(each_id)) return;
      if (fill_asked_.insert(each_id).second) follow_.push_back(FillEach{each_id});
      return;
    }
    ++running_[each_id];
    child->state = TaskState::kPending;
    json scope = child->scope;
    Dispatch(child->id, scope, /*evaluated=*/true);
  }
}

int NextCreatedWanted(const TaskRecord& each, int running) {
  int concurrency = each.task.each ? each.task.each->concurrency : 0;
  if (concurrency <= 0) return kMaxNextCreated;
  return std::clamp(concurrency - running + 1, 1, kMaxNextCreated);
}

}  // namespace baton::flow

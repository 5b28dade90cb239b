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
    Result<TaskRecord> child = EachChild(*T(id), i, (*list)[i], extra, loop, vars);
    if (!child.ok()) return FailNow(*T(id), "each: " + child.status().message());
    if (child->state == TaskState::kSkipped) ++skipped;
    children.push_back(std::move(*child));
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

// The each's child `index`, its item bound in `loop` (which `vars` reads) and evaluated
// now: CREATED, or SKIPPED when its `if` is false.
Result<TaskRecord> Decider::EachChild(const TaskRecord& each, std::size_t index, const json& item,
                                      const json& extra, json& loop, const expr::Vars& vars) {
  const Each& def = *each.task.each;
  std::string var = def.var.empty() ? "item" : def.var;
  json binding = {{"index", index}, {"value", item}};
  TaskRecord child =
      MakeRow(each.job_id, each.id, each.position, static_cast<int>(index), TaskState::kCreated);
  child.task = *def.task;
  ApplyDefaults(Def(*J(each.job_id)).defaults, child.task);
  if (child.task.IsComposite() || child.task.on_failure) {
    child.scope = extra;
    child.scope[var] = binding;
  }
  loop[var] = binding;
  if (!child.task.if_expr.empty()) {
    auto runs = EvaluateCondition(child.task.if_expr, vars, options_);
    if (!runs.ok()) return runs.status();
    if (!*runs) {
      child.state = TaskState::kSkipped;
      child.completed_at = now_;
    }
    child.task.if_expr.clear();
  }
  if (child.state == TaskState::kCreated) {
    Status ok = EvaluateTask(child.task, vars, options_);
    if (!ok.ok()) return ok;
  }
  return child;
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

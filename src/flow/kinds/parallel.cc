// A parallel: every child dispatched at once; it completes when they all have
// (ChildDone counts them) and fails with the first that fails. One whose tasks have
// `needs` is a graph of them instead (graph.cc).
#include "flow/decider.h"

namespace baton::flow {

void Decider::DispatchParallel(const std::string& id, const json& extra) {
  TaskRecord& t = *T(id);
  t.state = TaskState::kRunning;
  t.started_at = now_;
  std::size_t n = t.task.parallel->tasks.size();
  if (n == 0) {
    if (Finish(t, TaskState::kCompleted, "", "", "", std::nullopt)) TaskDone(id);
    return;
  }
  if (IsGraph(*t.task.parallel)) {
    // Its tasks form a graph (graph.cc): they start by their rules, seeing its scope.
    t.steps.assign(n, step::kWaiting);
    return StepGraph(id);
  }
  for (std::size_t i = 0; i < n; ++i) {
    // One child's definition copied at a time, into its row. (Rows live in std::map
    // nodes: making more does not move this one.)
    TaskRecord& p = *T(id);
    DispatchNew(p.task.parallel->tasks[i], p.job_id, id, p.position, extra, static_cast<int>(i));
    if (IsTerminal(T(id)->state)) break;  // a child failed at once: fail-fast
  }
}

}  // namespace baton::flow

#include "coordinator/running_checks.h"

#include "core/task_kind.h"

namespace baton {
namespace {

bool OnANode(const TaskRecord& task) {
  return KindOf(task.task) == TaskKind::kRunnable && !task.node_id.empty();
}

}  // namespace

std::vector<RunningCheck> OverdueChecks(const std::vector<TaskRecord>& running, TimePoint now,
                                        Duration grace) {
  std::vector<RunningCheck> out;
  for (const TaskRecord& task : running) {
    if (!OnANode(task) || !task.task.timeout || !task.started_at ||
        now - *task.started_at < *task.task.timeout + grace) {
      continue;
    }
    out.push_back({task.job_id, flow::TaskOverdue{task.id, task.node_id, grace}});
  }
  return out;
}

std::vector<RunningCheck> LeaseChecks(const std::vector<TaskRecord>& running,
                                      const std::map<std::string, TimePoint>& last_seen,
                                      TimePoint now, Duration lease) {
  std::vector<RunningCheck> out;
  for (const TaskRecord& task : running) {
    if (!OnANode(task)) continue;
    auto seen = last_seen.find(task.node_id);
    std::optional<TimePoint> node_last_seen;
    if (seen != last_seen.end()) node_last_seen = seen->second;
    if (node_last_seen && now - *node_last_seen <= lease) continue;
    out.push_back({task.job_id, flow::LeaseExpired{task.id, task.node_id, node_last_seen, lease}});
  }
  return out;
}

}  // namespace baton

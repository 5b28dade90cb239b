// /queues and /nodes: the broker's queues and the workers that heartbeat.
#include <fmt/format.h>

#include "api/api.h"
#include "api/detail.h"

namespace baton::api {

using nlohmann::json;
using namespace detail;

Response Api::Queues(const std::string& name) {
  auto to_json = [](const QueueInfo& q) {
    return json{
        {"name", q.name}, {"size", q.size}, {"subscribers", q.subscribers}, {"unacked", q.unacked}};
  };
  if (!name.empty()) {
    BATON_ASSIGN_OR_RETURN(auto q, broker_.Queue(name), ErrorResponse);
    return Ok(to_json(q));
  }
  BATON_ASSIGN_OR_RETURN(auto queues, broker_.Queues(), ErrorResponse);
  json list = json::array();
  for (const QueueInfo& q : queues) list.push_back(to_json(q));
  return Ok(list);
}

Result<std::vector<NodeRecord>> Api::RecentNodes() {
  TimePoint now = Now();
  BATON_ASSIGN_OR_RETURN(auto nodes, datastore_.ActiveNodes(now - std::chrono::minutes(5)));
  // A node silent for longer than its lease is down.
  for (NodeRecord& node : nodes) {
    if (now - node.last_heartbeat_at > options_.lease) node.status = NodeStatus::kDown;
  }
  return nodes;
}

Response Api::DeleteQueue(const std::string& name) {
  // The engine's own queues (x-…, and the bare names Tork gives them) carry its events:
  // deleting one would lose them.
  if (IsReservedQueueName(name)) {
    return ErrorResponse(InvalidArgument(
        fmt::format("queue {} is the engine's own (x-… and its bare names are reserved); only task "
                    "queues can be deleted",
                    name.substr(0, 100))));
  }
  if (Status deleted = broker_.DeleteQueue(name); !deleted.ok()) return ErrorResponse(deleted);
  return Ok({{"status", "OK"}});
}

Response Api::Nodes() {
  BATON_ASSIGN_OR_RETURN(auto nodes, RecentNodes(), ErrorResponse);
  json list = json::array();
  for (const NodeRecord& node : nodes) {
    list.push_back({{"id", node.id},
                    {"name", node.name},
                    {"hostname", node.hostname},
                    {"startedAt", FormatTime(node.started_at)},
                    {"lastHeartbeatAt", FormatTime(node.last_heartbeat_at)},
                    {"cpuPercent", node.cpu_percent},
                    {"memoryBytes", node.memory_bytes},
                    {"taskCount", node.task_count},
                    {"status", ToString(node.status)},
                    {"queue", node.queue},
                    {"version", node.version}});
  }
  return Ok(list);
}

}  // namespace baton::api

// /health and /metrics (Tork's JSON, or Prometheus' text format).
#include <fmt/format.h>

#include "api/api.h"
#include "api/detail.h"

namespace baton::api {

using nlohmann::json;
using namespace detail;

Response Api::Health() {
  Status ds = datastore_.Health();
  Status br = broker_.Health();
  bool up = ds.ok() && br.ok();
  json body = {{"status", up ? "UP" : "DOWN"}, {"version", options_.version}};
  if (!ds.ok()) body["datastore"] = ds.message();
  if (!br.ok()) body["broker"] = br.message();
  return Json(up ? 200 : 503, body);
}

namespace {

// Prometheus' text format when the client asks for it: a scraper's Accept names
// text/plain or OpenMetrics and not JSON (a browser's or curl's does not), or
// ?format=prometheus.
bool WantsPrometheus(const Request& request) {
  if (auto f = request.query.find("format"); f != request.query.end()) {
    return f->second == "prometheus";
  }
  auto a = request.headers.find("accept");
  if (a == request.headers.end()) return false;
  const std::string& accept = a->second;
  return (accept.find("text/plain") != std::string::npos ||
          accept.find("application/openmetrics-text") != std::string::npos) &&
         accept.find("application/json") == std::string::npos;
}

}  // namespace

Response Api::Metrics(const Request& request) {
  if (auto f = request.query.find("format");
      f != request.query.end() && f->second != "prometheus" && f->second != "json") {
    return ErrorResponse(InvalidArgument(
        fmt::format("format must be prometheus or json, not \"{}\"", f->second.substr(0, 50))));
  }
  MetricsSnapshot now;
  BATON_ASSIGN_OR_RETURN(now.nodes, RecentNodes(), ErrorResponse);
  if (WantsPrometheus(request)) {
    BATON_ASSIGN_OR_RETURN(auto counts, datastore_.CountStates(), ErrorResponse);
    now.jobs = std::move(counts.jobs);
    now.tasks = std::move(counts.tasks);
    BATON_ASSIGN_OR_RETURN(now.queues, broker_.Queues(), ErrorResponse);
    Response r;
    r.body = coordinator_.metrics().Exposition(now);
    r.content_type = std::string(baton::Metrics::kContentType);
    return r;
  }
  // Tork's shape: running jobs and tasks, nodes up and their mean CPU.
  double cpu = 0;
  std::size_t online = 0;
  for (const NodeRecord& node : now.nodes) {
    if (node.status != NodeStatus::kUp) continue;
    cpu += node.cpu_percent;
    ++online;
  }
  if (online > 0) cpu /= static_cast<double>(online);
  // Beyond Tork, for the UI's cards: jobs ended in the last hour and messages waiting.
  BATON_ASSIGN_OR_RETURN(auto ended, datastore_.CountJobsEndedSince(Now() - std::chrono::hours(1)),
                         ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto queues, broker_.Queues(), ErrorResponse);
  std::int64_t waiting = 0;
  for (const QueueInfo& q : queues) waiting += q.size;
  // Only what is RUNNING: two index-range counts, not a count of every row's state.
  BATON_ASSIGN_OR_RETURN(auto running, datastore_.CountRunning(), ErrorResponse);
  return Ok({{"jobs",
              {{"running", running.jobs},
               {"failedLastHour", ended.failed},
               {"endedLastHour", ended.completed + ended.failed}}},
             {"tasks", {{"running", running.tasks}}},
             {"nodes", {{"online", online}, {"cpuPercent", cpu}}},
             {"queues", {{"size", waiting}}}});
}

}  // namespace baton::api

#include "coordinator/worker_events.h"

#include <map>
#include <utility>

#include "base/log.h"

namespace baton {

WorkerEvent FromWorker(const TaskStarted& m) {
  return {m.task_id, m.job_id, flow::Started{m.task_id, m.node_id, m.at},
          "recording a start failed"};
}

WorkerEvent FromWorker(const TaskFinished& m) {
  WorkerEvent out{m.task_id, m.job_id, {}, "handling a task outcome failed"};
  switch (m.outcome) {
    case TaskFinished::Outcome::kCompleted:
      out.event = flow::Completed{m.task_id, m.node_id, m.result, m.started_at};
      break;
    case TaskFinished::Outcome::kFailed:
      out.event = flow::Failed{m.task_id,
                               m.node_id,
                               m.error,
                               m.started_at,
                               m.reason != FailReason::kNone ? m.reason : FailReason::kError,
                               m.exit_code};
      break;
    case TaskFinished::Outcome::kCancelled:
      out.event = flow::WorkerCancelled{m.task_id, m.node_id, m.error};
      break;
    case TaskFinished::Outcome::kHandedBack:
      out.event = flow::Redelivery{m.task_id, m.node_id, m.error};
      break;
  }
  return out;
}

WorkerEvent FromWorker(const TaskProgress& m) {
  return {m.task_id, m.job_id, flow::Progress{m.task_id, m.progress}, "recording progress failed"};
}

std::vector<flow::Event> FromExecutor(StartReport report, bool durable_broker) {
  std::vector<flow::Event> events;
  if (durable_broker) {
    std::map<std::string, std::vector<std::string>> by_job;
    for (StartReport::Publication& p : report.published) {
      by_job[p.job_id].push_back(std::move(p.task_id));
    }
    for (auto& [job_id, ids] : by_job) events.push_back(flow::Published{std::move(ids)});
  }
  for (StartReport::Refusal& r : report.refused) {
    events.push_back(flow::PublishRefused{std::move(r.task_id), std::move(r.error)});
  }
  return events;
}

bool MayPass(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

Status Handled(const Status& s, const WorkerEvent& event) {
  if (s.ok() || s.code() == StatusCode::kNotFound || s.code() == StatusCode::kFailedPrecondition) {
    return Status::Ok();
  }
  if (MayPass(s)) return s;
  log::Error(event.failure, {{"task_id", event.task_id}, {"error", s.message()}});
  return Status::Ok();
}

}  // namespace baton

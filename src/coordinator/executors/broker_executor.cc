#include "coordinator/executors/broker_executor.h"

#include <string>
#include <utility>

#include "base/log.h"
#include "core/names.h"
#include "core/record_json.h"

namespace baton {
namespace {

OutgoingMessage MessageFor(const TaskRecord& task) {
  return {task.task.queue.empty() ? std::string(kQueueDefault) : task.task.queue,
          ToJson(task).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          task.task.priority.value_or(0)};
}

}  // namespace

void BrokerExecutor::PublishOne(const TaskRecord& row, StartReport& report) {
  OutgoingMessage message = MessageFor(row);
  Status published = broker_.Publish(message.queue, std::move(message.body), message.priority);
  if (published.ok()) {
    if (durable_broker_) report.published.push_back({row.id, row.job_id});
    return;
  }
  log::Warn("the broker refused a task; publishing it again later",
            {{"task_id", row.id}, {"error", published.message()}});
  report.refused.push_back({row.id, row.job_id, published.message()});
}

StartReport BrokerExecutor::Start(std::vector<TaskRecord> rows) {
  StartReport report;
  if (rows.size() > 1) {
    std::vector<OutgoingMessage> batch;
    batch.reserve(rows.size());
    for (const TaskRecord& row : rows) batch.push_back(MessageFor(row));
    if (broker_.PublishBatch(std::move(batch)).ok()) {
      if (durable_broker_) {
        for (const TaskRecord& row : rows) report.published.push_back({row.id, row.job_id});
      }
      return report;
    }
    // Some may be in the broker already; one at a time, each refusal is handled alone (a
    // message published twice is run once).
  }
  // Alone, a refusal is its own: published again later, not at once.
  for (const TaskRecord& row : rows) PublishOne(row, report);
  return report;
}

}  // namespace baton

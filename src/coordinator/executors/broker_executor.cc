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

bool BrokerExecutor::PublishOne(const TaskRecord& row) {
  OutgoingMessage message = MessageFor(row);
  Status published = broker_.Publish(message.queue, std::move(message.body), message.priority);
  if (published.ok()) return true;
  log::Warn("the broker refused a task; publishing it again later",
            {{"task_id", row.id}, {"error", published.message()}});
  if (!durable_broker_) {
    // Stored SCHEDULED, but not in a queue: PENDING says so to whoever reconciles.
    Status s = datastore_.UpdateTask(row.id, [](TaskRecord& t) {
      if (t.state == TaskState::kScheduled) t.state = TaskState::kPending;
      return Status::Ok();
    });
    if (!s.ok()) {
      log::Error("marking a refused task pending failed",
                 {{"task_id", row.id}, {"error", s.message()}});
    }
  }
  return false;
}

std::vector<TaskRecord> BrokerExecutor::Start(std::vector<TaskRecord> rows) {
  std::vector<TaskRecord> refused;
  if (rows.empty()) return refused;
  std::vector<std::string> confirmed;
  auto publish_batch = [&] {
    std::vector<OutgoingMessage> batch;
    batch.reserve(rows.size());
    for (const TaskRecord& row : rows) batch.push_back(MessageFor(row));
    return broker_.PublishBatch(std::move(batch)).ok();
  };
  if (rows.size() == 1) {
    // Alone, a refusal is its own: published again later, not at once.
    if (PublishOne(rows[0])) {
      confirmed.push_back(rows[0].id);
    } else {
      refused.push_back(std::move(rows[0]));
    }
  } else if (publish_batch()) {
    for (const TaskRecord& row : rows) confirmed.push_back(row.id);
  } else {
    // Some may be in the broker already; one at a time, each refusal is handled alone (a
    // message published twice is run once).
    for (TaskRecord& row : rows) {
      if (PublishOne(row)) {
        confirmed.push_back(row.id);
      } else {
        refused.push_back(std::move(row));
      }
    }
  }
  if (durable_broker_ && !confirmed.empty()) {
    Status s = datastore_.MarkScheduled(confirmed, clock_.Now());
    // Left PENDING: reconciling publishes them again, and a duplicate runs once.
    if (!s.ok()) log::Error("marking published tasks scheduled failed", {{"error", s.message()}});
  }
  return refused;
}

}  // namespace baton

#include "core/messages.h"

#include <nlohmann/json.hpp>

namespace baton {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

template <typename T, typename F>
Result<T> Decode(std::string_view body, const char* what, F&& fill) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument(std::string("bad ") + what + " message");
  try {
    T m;
    fill(j, m);
    return m;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("bad ") + what + " message: " + e.what());
  }
}

TimePoint TimeOf(const json& j, const char* key) {
  return ParseTime(j.value(key, "")).value_or(TimePoint{});
}

constexpr const char* kOutcomes[] = {"COMPLETED", "FAILED", "CANCELLED", "HANDED_BACK"};

}  // namespace

std::string CancelQueueFor(std::string_view node_id) { return "x-cancel." + std::string(node_id); }

std::string Encode(const TaskStarted& m) {
  return Dump({{"taskId", m.task_id},
               {"jobId", m.job_id},
               {"nodeId", m.node_id},
               {"at", FormatTime(m.at)}});
}
std::string Encode(const TaskFinished& m) {
  json j = {{"taskId", m.task_id},   {"jobId", m.job_id},
            {"nodeId", m.node_id},   {"outcome", kOutcomes[static_cast<int>(m.outcome)]},
            {"result", m.result},    {"error", m.error},
            {"at", FormatTime(m.at)}};
  if (m.started_at) j["startedAt"] = FormatTime(*m.started_at);
  if (m.reason != FailReason::kNone) j["reason"] = ToString(m.reason);
  if (m.exit_code) j["exitCode"] = *m.exit_code;
  return Dump(j);
}
std::string Encode(const TaskProgress& m) {
  return Dump({{"taskId", m.task_id}, {"jobId", m.job_id}, {"progress", m.progress}});
}
std::string Encode(const CancelTask& m) {
  json j = {{"taskIds", m.task_ids}};
  if (m.complete) j["complete"] = true;
  if (m.withdraw) j["withdraw"] = true;
  return Dump(j);
}
std::string Encode(const LogPart& m) {
  return Dump({{"id", m.id},
               {"taskId", m.task_id},
               {"jobId", m.job_id},
               {"number", m.number},
               {"contents", m.contents},
               {"createdAt", FormatTime(m.created_at)}});
}
std::string Encode(const NodeRecord& m) {
  return Dump({{"id", m.id},
               {"name", m.name},
               {"hostname", m.hostname},
               {"version", m.version},
               {"queue", m.queue},
               {"startedAt", FormatTime(m.started_at)},
               {"lastHeartbeatAt", FormatTime(m.last_heartbeat_at)},
               {"cpuPercent", m.cpu_percent},
               {"memoryBytes", m.memory_bytes},
               {"taskCount", m.task_count},
               {"status", ToString(m.status)}});
}

Result<TaskStarted> DecodeTaskStarted(std::string_view body) {
  return Decode<TaskStarted>(body, "started", [](const json& j, TaskStarted& m) {
    m.task_id = j.at("taskId").get<std::string>();
    m.job_id = j.value("jobId", "");
    m.node_id = j.value("nodeId", "");
    m.at = TimeOf(j, "at");
  });
}

Result<TaskFinished> DecodeTaskFinished(std::string_view body) {
  return Decode<TaskFinished>(body, "finished", [](const json& j, TaskFinished& m) {
    m.task_id = j.at("taskId").get<std::string>();
    m.job_id = j.value("jobId", "");
    m.node_id = j.value("nodeId", "");
    std::string outcome = j.value("outcome", "COMPLETED");
    m.outcome = outcome == "FAILED"        ? TaskFinished::Outcome::kFailed
                : outcome == "CANCELLED"   ? TaskFinished::Outcome::kCancelled
                : outcome == "HANDED_BACK" ? TaskFinished::Outcome::kHandedBack
                                           : TaskFinished::Outcome::kCompleted;
    m.result = j.value("result", "");
    m.error = j.value("error", "");
    m.at = TimeOf(j, "at");
    if (j.contains("startedAt")) m.started_at = TimeOf(j, "startedAt");
    // From a worker of an earlier version: no reason (the coordinator takes kError).
    m.reason = ParseFailReason(j.value("reason", "")).value_or(FailReason::kNone);
    if (j.contains("exitCode") && j["exitCode"].is_number_integer()) {
      m.exit_code = j["exitCode"].get<int>();
    }
  });
}

Result<TaskProgress> DecodeTaskProgress(std::string_view body) {
  return Decode<TaskProgress>(body, "progress", [](const json& j, TaskProgress& m) {
    m.task_id = j.at("taskId").get<std::string>();
    m.job_id = j.value("jobId", "");
    m.progress = j.value("progress", 0.0);
  });
}

Result<CancelTask> DecodeCancelTask(std::string_view body) {
  return Decode<CancelTask>(body, "cancel", [](const json& j, CancelTask& m) {
    // "taskId" alone: what workers of earlier versions were sent.
    if (j.contains("taskIds")) {
      m.task_ids = j.at("taskIds").get<std::vector<std::string>>();
    } else {
      m.task_ids.push_back(j.at("taskId").get<std::string>());
    }
    m.complete = j.value("complete", false);
    m.withdraw = j.value("withdraw", false);
  });
}

Result<LogPart> DecodeLogPart(std::string_view body) {
  return Decode<LogPart>(body, "log", [](const json& j, LogPart& m) {
    m.id = j.value("id", "");
    m.task_id = j.at("taskId").get<std::string>();
    m.job_id = j.value("jobId", "");
    m.number = j.value("number", 0);
    m.contents = j.value("contents", "");
    m.created_at = TimeOf(j, "createdAt");
  });
}

Result<NodeRecord> DecodeNodeRecord(std::string_view body) {
  return Decode<NodeRecord>(body, "heartbeat", [](const json& j, NodeRecord& m) {
    m.id = j.at("id").get<std::string>();
    m.name = j.value("name", "");
    m.hostname = j.value("hostname", "");
    m.version = j.value("version", "");
    m.queue = j.value("queue", "");
    m.started_at = TimeOf(j, "startedAt");
    m.last_heartbeat_at = TimeOf(j, "lastHeartbeatAt");
    m.cpu_percent = j.value("cpuPercent", 0.0);
    m.memory_bytes = j.value("memoryBytes", std::int64_t{0});
    m.task_count = j.value("taskCount", 0);
    m.status = ParseNodeStatus(j.value("status", "UP")).value_or(NodeStatus::kUp);
  });
}

std::string SanitizeUtf8(std::string_view text) {
  // A round trip through nlohmann's dump with `replace` does exactly this.
  std::string quoted = json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
  return json::parse(quoted).get<std::string>();
}

}  // namespace baton

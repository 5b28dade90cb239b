#include "core/record_json.h"

#include "core/job_decode.h"
#include "core/job_json.h"

namespace baton {
namespace {

using nlohmann::json;

void PutTime(json& out, const char* key, const std::optional<TimePoint>& t) {
  if (t) out[key] = FormatTime(*t);
}

Result<std::optional<TimePoint>> GetTime(const json& in, const char* key) {
  auto it = in.find(key);
  if (it == in.end() || it->is_null()) return std::optional<TimePoint>();
  if (!it->is_string()) return InvalidArgument(std::string(key) + ": expected a time");
  auto t = ParseTime(it->get<std::string>());
  if (!t) return InvalidArgument(std::string(key) + ": bad time " + it->dump());
  return std::optional<TimePoint>(*t);
}

// Runtime members that ToJson(TaskRecord) adds to the definition's JSON; removed again
// before the definition is decoded.
constexpr const char* kTaskRuntimeKeys[] = {
    "id",          "jobId",     "parentId",    "position", "state",   "createdAt",
    "scheduledAt", "startedAt", "completedAt", "failedAt", "error",   "result",
    "nodeId",      "progress",  "redelivered", "reason",   "exitCode"};

// A row's ids, state, times, result, error, node and progress: what the full task JSON
// and its summary both show.
void PutTaskRow(json& out, const TaskRecord& task) {
  out["id"] = task.id;
  out["jobId"] = task.job_id;
  if (!task.parent_id.empty()) out["parentId"] = task.parent_id;
  out["position"] = task.position;
  out["state"] = ToString(task.state);
  out["createdAt"] = FormatTime(task.created_at);
  PutTime(out, "scheduledAt", task.scheduled_at);
  PutTime(out, "startedAt", task.started_at);
  PutTime(out, "completedAt", task.completed_at);
  PutTime(out, "failedAt", task.failed_at);
  if (!task.error.empty()) out["error"] = task.error;
  if (task.reason != FailReason::kNone) out["reason"] = ToString(task.reason);
  if (task.exit_code) out["exitCode"] = *task.exit_code;
  if (!task.result.empty()) out["result"] = task.result;
  if (!task.node_id.empty()) out["nodeId"] = task.node_id;
  out["progress"] = task.progress;
}

}  // namespace

json ToJson(const TaskRecord& task) {
  json out = ToJson(task.task);
  PutTaskRow(out, task);
  out["redelivered"] = task.redelivered;
  if (task.task.parallel) out["parallel"]["completions"] = task.completions;
  if (task.task.each) {
    out["each"]["size"] = task.each_size;
    out["each"]["completions"] = task.completions;
    out["each"]["index"] = task.each_index;
  }
  if (task.task.subjob && !task.subjob_id.empty()) out["subjob"]["id"] = task.subjob_id;
  // A switch's result is its value; a loop's, its iterations: the steps that ended.
  if (task.task.switch_) out["switch"]["completions"] = task.completions;
  if (task.task.loop) out["loop"]["completions"] = task.completions;
  return out;
}

Result<TaskRecord> TaskRecordFromJson(const json& in) {
  if (!in.is_object()) return InvalidArgument("task: expected an object");
  TaskRecord task;
  try {
    task.id = in.value("id", "");
    task.job_id = in.value("jobId", "");
    task.parent_id = in.value("parentId", "");
    task.position = in.value("position", 0);
    auto state = ParseTaskState(in.value("state", "PENDING"));
    if (!state) return InvalidArgument("task: unknown state " + in.value("state", ""));
    task.state = *state;
    auto created = GetTime(in, "createdAt");
    if (!created.ok()) return created.status();
    task.created_at = created->value_or(TimePoint{});
    for (auto [key, field] :
         {std::pair{"scheduledAt", &task.scheduled_at}, std::pair{"startedAt", &task.started_at},
          std::pair{"completedAt", &task.completed_at}, std::pair{"failedAt", &task.failed_at}}) {
      auto t = GetTime(in, key);
      if (!t.ok()) return t.status();
      *field = *t;
    }
    task.error = in.value("error", "");
    task.result = in.value("result", "");
    task.node_id = in.value("nodeId", "");
    task.reason = ParseFailReason(in.value("reason", "")).value_or(FailReason::kNone);
    if (auto code = in.find("exitCode"); code != in.end() && code->is_number_integer()) {
      task.exit_code = code->get<int>();
    }
    task.progress = in.value("progress", 0.0);
    task.redelivered = in.value("redelivered", 0);

    json definition = in;
    for (const char* key : kTaskRuntimeKeys) definition.erase(key);
    if (auto it = definition.find("parallel"); it != definition.end() && it->is_object()) {
      task.completions = it->value("completions", 0);
      it->erase("completions");
    }
    if (auto it = definition.find("each"); it != definition.end() && it->is_object()) {
      task.each_size = it->value("size", 0);
      task.completions = it->value("completions", 0);
      task.each_index = it->value("index", 0);
      it->erase("size");
      it->erase("completions");
      it->erase("index");
    }
    for (const char* kind : {"switch", "loop"}) {
      if (auto it = definition.find(kind); it != definition.end() && it->is_object()) {
        task.completions = it->value("completions", 0);
        it->erase("completions");
      }
    }
    if (auto it = definition.find("subjob"); it != definition.end() && it->is_object()) {
      task.subjob_id = it->value("id", "");
      it->erase("id");
    }
    auto decoded = DecodeTaskJson(definition.dump(), DecodeMode::kStored);
    if (!decoded.ok()) return decoded.status();
    task.task = std::move(*decoded);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("task: ") + e.what());
  }
  return task;
}

json JobSummaryJson(const JobRecord& record, const Job& definition) {
  json out = json::object();
  out["id"] = record.id;
  if (!record.parent_id.empty()) out["parentId"] = record.parent_id;
  if (!definition.name.empty()) out["name"] = definition.name;
  if (!definition.description.empty()) out["description"] = definition.description;
  if (!definition.tags.empty()) out["tags"] = definition.tags;
  if (!definition.inputs.empty()) out["inputs"] = definition.inputs;
  if (!definition.output.empty()) out["output"] = definition.output;
  if (definition.auto_delete) {
    out["autoDelete"] = {{"after", FormatDuration(definition.auto_delete->after)}};
  }
  out["state"] = ToString(record.state);
  out["createdAt"] = FormatTime(record.created_at);
  PutTime(out, "startedAt", record.started_at);
  PutTime(out, "completedAt", record.completed_at);
  PutTime(out, "failedAt", record.failed_at);
  PutTime(out, "deleteAt", record.delete_at);
  out["position"] = record.position;
  out["taskCount"] = record.task_count;
  out["progress"] = record.progress;
  if (!record.result.empty()) out["result"] = record.result;
  if (!record.error.empty()) out["error"] = record.error;
  if (record.ending) out["ending"] = ToString(*record.ending);
  if (definition.schedule) {
    out["schedule"] = {{"id", definition.schedule->id}, {"cron", definition.schedule->cron}};
  }
  // Tork's shape: the user, of whom only the username is kept with the job.
  if (!definition.created_by.empty()) out["createdBy"] = {{"username", definition.created_by}};
  return out;
}

json TaskSummaryJson(const TaskRecord& task) {
  json out = json::object();
  PutTaskRow(out, task);
  if (!task.task.name.empty()) out["name"] = task.task.name;
  if (!task.task.description.empty()) out["description"] = task.task.description;
  if (!task.task.var.empty()) out["var"] = task.task.var;
  if (!task.task.tags.empty()) out["tags"] = task.task.tags;
  return out;
}

json ToJson(const WebhookAttempt& attempt) {
  json out = {{"at", FormatTime(attempt.at)},
              {"statusCode", attempt.status_code},
              {"durationMs", attempt.duration_ms}};
  if (!attempt.error.empty()) out["error"] = attempt.error;
  return out;
}

Result<WebhookAttempt> WebhookAttemptFromJson(const json& in) {
  if (!in.is_object()) return InvalidArgument("webhook attempt: expected an object");
  WebhookAttempt attempt;
  try {
    auto at = GetTime(in, "at");
    if (!at.ok()) return at.status();
    attempt.at = at->value_or(TimePoint{});
    attempt.status_code = in.value("statusCode", 0);
    attempt.duration_ms = in.value("durationMs", 0);
    attempt.error = in.value("error", "");
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("webhook attempt: ") + e.what());
  }
  return attempt;
}

json ToJson(const WebhookDelivery& d) {
  json out = {{"id", d.id},
              {"event", d.event},
              {"url", d.url},
              {"state", ToString(d.state)},
              {"attempts", d.attempts},
              {"createdAt", FormatTime(d.created_at)}};
  if (!d.task_id.empty()) out["taskId"] = d.task_id;
  if (d.state == DeliveryState::kPending) out["nextAttemptAt"] = FormatTime(d.next_attempt_at);
  PutTime(out, "completedAt", d.completed_at);
  if (!d.error.empty()) out["error"] = d.error;
  json history = json::array();
  for (const WebhookAttempt& a : d.history) history.push_back(ToJson(a));
  out["history"] = std::move(history);
  return out;
}

json ToJson(const JobRecord& record, bool summary) {
  if (summary) return JobSummaryJson(record, record.job);
  json definition = ToJson(record.job);
  json out = JobSummaryJson(record, record.job);
  for (const char* key :
       {"tasks", "secrets", "defaults", "webhooks", "permissions", "onFailure", "finally"}) {
    if (definition.contains(key)) out[key] = definition[key];
  }
  out["context"] = record.context;
  return out;
}

}  // namespace baton

// /tasks/{id} and its log.
#include <fmt/format.h>

#include "api/api.h"
#include "api/detail.h"
#include "core/record_json.h"
#include "core/redact.h"

namespace baton::api {

using nlohmann::json;
using namespace detail;

Response Api::GetTask(const std::string& id) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no task {}", id.substr(0, 64))));
  BATON_ASSIGN_OR_RETURN(auto task, datastore_.GetTask(id), ErrorResponse);
  json body = ToJson(task);
  std::vector<std::string> secrets;
  if (auto job = datastore_.GetJob(task.job_id); job.ok()) secrets = SecretValues(*job);
  AddSecretValues(task.task, secrets);
  RedactJson(body, secrets);
  return Ok(body);
}

Response Api::SkipTask(const std::string& id, const Request& request) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no task {}", id.substr(0, 64))));
  std::string result;
  if (!request.body.empty()) {
    json body = json::parse(request.body, nullptr, false);
    if (!body.is_object())
      return ErrorResponse(InvalidArgument("the body: expected {\"result\": \"...\"}"));
    for (const auto& [key, value] : body.items()) {
      if (key != "result") {
        return ErrorResponse(
            InvalidArgument(fmt::format("unknown field \"{}\" (expected result)", key)));
      }
      if (!value.is_string()) return ErrorResponse(InvalidArgument("result: expected a string"));
      result = value.get<std::string>();
    }
  }
  if (Status s = coordinator_.Skip(id, result); !s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

Response Api::TaskLog(const std::string& id, const Request& request) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no task {}", id.substr(0, 64))));
  BATON_ASSIGN_OR_RETURN(auto paging, PagingOf(request, 25), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto task, datastore_.GetTask(id), ErrorResponse);
  std::vector<std::string> secrets;
  if (auto job = datastore_.GetJob(task.job_id); job.ok()) secrets = SecretValues(*job);
  AddSecretValues(task.task, secrets);
  BATON_ASSIGN_OR_RETURN(auto parts, datastore_.TaskLogParts(id, paging.page, paging.size),
                         ErrorResponse);
  return Ok(PageJson(parts, [&](const LogPart& part) { return LogPartJson(part, secrets); }));
}

}  // namespace baton::api

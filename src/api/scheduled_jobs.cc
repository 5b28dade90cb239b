// /scheduled-jobs: Tork's routes (POST, GET list and one, PUT pause and resume, DELETE)
// and, beyond Tork, PUT /scheduled-jobs/{id} to replace one. Bodies are a job document
// with a `schedule` (core/schedule.h), JSON or YAML as for POST /jobs.
#include <fmt/format.h>

#include "api/api.h"
#include "api/detail.h"
#include "core/redact.h"
#include "core/schedule.h"

namespace baton::api {
namespace {

using nlohmann::json;
using namespace detail;

Response NoSuchScheduledJob(const std::string& id) {
  return ErrorResponse(NotFound(fmt::format("no scheduled job {}", id.substr(0, 64))));
}

// The job's own secret values hidden, as GET /jobs/{id} hides them.
json Redacted(const ScheduledJobRecord& record, bool summary) {
  json body = ToJson(record, summary);
  RedactJson(body, SecretValues(record.job));
  return body;
}

// The body parsed, or the answer refusing it (413, 415 or 400 with every problem).
std::variant<ScheduledJobParseResult, Response> ParseBody(const Request& request,
                                                          const ApiOptions& options) {
  auto format = BodyFormat(request, options.max_body_bytes, "the scheduled job");
  if (auto* refused = std::get_if<Response>(&format)) return *refused;
  ScheduledJobParseResult parsed =
      ParseScheduledJob(request.body, std::get<DocumentFormat>(format), options.max_document_bytes,
                        options.max_loop_iterations);
  if (!parsed.ok()) {
    return DocumentProblems(parsed.problems, parsed.Message(), parsed.too_large,
                            options.max_document_bytes);
  }
  return parsed;
}

}  // namespace

Response Api::CreateScheduledJob(const Request& request, const std::optional<Principal>& who) {
  BATON_ASSIGN_OR_RETURN(bool dry_run, BoolParam(request, "dryRun", false), ErrorResponse);
  auto parsed = ParseBody(request, options_);
  if (auto* refused = std::get_if<Response>(&parsed)) return *refused;
  auto& body = std::get<ScheduledJobParseResult>(parsed);
  // Validated as a creation is, and nothing stored (the UI's editor, as you type).
  if (dry_run) {
    json out = {{"valid", true}, {"taskCount", body.job->tasks.size()}};
    if (!body.job->name.empty()) out["name"] = body.job->name;
    return Ok(out);
  }
  // The jobs it fires are its creator's, as a job submitted by them would be.
  if (who) body.job->created_by = who->username;
  BATON_ASSIGN_OR_RETURN(auto record, coordinator_.schedules().Create(*body.job, *body.schedule),
                         ErrorResponse);
  return Ok(Redacted(record, /*summary=*/true));
}

Response Api::UpdateScheduledJob(const std::string& id, const Request& request,
                                 const std::optional<Principal>& who) {
  if (!IsId(id)) return NoSuchScheduledJob(id);
  auto parsed = ParseBody(request, options_);
  if (auto* refused = std::get_if<Response>(&parsed)) return *refused;
  auto& body = std::get<ScheduledJobParseResult>(parsed);
  if (who) body.job->created_by = who->username;
  BATON_ASSIGN_OR_RETURN(
      auto record, coordinator_.schedules().Update(id, *body.job, *body.schedule), ErrorResponse);
  return Ok(Redacted(record, /*summary=*/true));
}

Response Api::ListScheduledJobs(const Request& request, const std::optional<Principal>& who) {
  BATON_ASSIGN_OR_RETURN(auto paging, PagingOf(request, 10), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto list, coordinator_.schedules().List(paging.page, paging.size, who),
                         ErrorResponse);
  json items = json::array();
  for (const ScheduledJobRecord& record : list.items) items.push_back(Redacted(record, true));
  return Ok({{"items", std::move(items)},
             {"number", list.number},
             {"size", list.items.size()},
             {"totalPages", list.total_pages},
             {"totalItems", list.total_items}});
}

Response Api::GetScheduledJob(const std::string& id) {
  if (!IsId(id)) return NoSuchScheduledJob(id);
  BATON_ASSIGN_OR_RETURN(auto record, coordinator_.schedules().Get(id), ErrorResponse);
  return Ok(Redacted(record, /*summary=*/false));
}

Response Api::DeleteScheduledJob(const std::string& id) {
  if (!IsId(id)) return NoSuchScheduledJob(id);
  if (Status s = coordinator_.schedules().Delete(id); !s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

Response Api::PauseScheduledJob(const std::string& id) {
  if (!IsId(id)) return NoSuchScheduledJob(id);
  if (Status s = coordinator_.schedules().Pause(id); !s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

Response Api::ResumeScheduledJob(const std::string& id) {
  if (!IsId(id)) return NoSuchScheduledJob(id);
  if (Status s = coordinator_.schedules().Resume(id); !s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

}  // namespace baton::api

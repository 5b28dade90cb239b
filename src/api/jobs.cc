// /jobs: submit (and wait), list, read, log, webhooks, cancel, restart, delete; and
// /events, the jobs' event stream.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "api/api.h"
#include "api/detail.h"
#include "core/job_decode.h"
#include "core/names.h"
#include "core/plan.h"
#include "core/record_json.h"
#include "core/redact.h"

namespace baton::api {

using nlohmann::json;
using namespace detail;

Response Api::Events(const Call& call) {
  EventHub::Filter filter;
  if (auto it = call.request.query.find("job"); it != call.request.query.end()) {
    filter.job_id = it->second;
    if (Status s = MaySeeJob(call, filter.job_id); !s.ok()) return ErrorResponse(s);
  }
  BATON_ASSIGN_OR_RETURN(filter.logs, BoolParam(call.request, "logs", true), ErrorResponse);
  if (call.who && !call.who->admin()) {
    // Only the jobs this user may see; each job looked up once (bounded).
    struct Seen {
      Mutex mu;
      std::map<std::string, bool> visible BATON_GUARDED_BY(mu);
    };
    auto seen = std::make_shared<Seen>();
    filter.visible = [seen, who = *call.who, &datastore = datastore_](const std::string& job_id) {
      {
        MutexLock lock(seen->mu);
        if (auto it = seen->visible.find(job_id); it != seen->visible.end()) return it->second;
      }
      Result<JobRecord> job = datastore.GetJob(job_id);
      bool visible = job.ok() && MayAccess(who, job->job);
      MutexLock lock(seen->mu);
      if (seen->visible.size() >= 10000) seen->visible.clear();
      seen->visible[job_id] = visible;
      return visible;
    };
  }
  Response r;
  r.content_type = "text/event-stream";
  if (call.request.method == "HEAD") return r;  // the head alone: no stream to hold
  // Reconnect after 2 s; the first line tells the client the stream is open.
  r.body = "retry: 2000\n: connected\n\n";
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.stream = coordinator_.events().Subscribe(std::move(filter));
  return r;
}

std::variant<Response, JobParseResult> Api::ParseJobBody(const Request& request) {
  auto format = BodyFormat(request, options_.max_body_bytes, "the job");
  if (auto* refused = std::get_if<Response>(&format)) return *refused;
  JobParseResult parsed = ParseJob(request.body, std::get<DocumentFormat>(format),
                                   options_.max_document_bytes, options_.max_loop_iterations);
  if (!parsed.ok()) {
    return DocumentProblems(parsed.problems, parsed.Message(), parsed.too_large,
                            options_.max_document_bytes);
  }
  return parsed;
}

Response Api::PlanJob(const Request& request) {
  auto read = ParseJobBody(request);
  if (auto* refused = std::get_if<Response>(&read)) return *refused;
  return Ok(PlanOf(*std::get<JobParseResult>(read).job));
}

Response Api::SubmitJob(const Request& request, const std::optional<Principal>& who) {
  BATON_ASSIGN_OR_RETURN(bool dry_run, BoolParam(request, "dryRun", false), ErrorResponse);
  auto read = ParseJobBody(request);
  if (auto* refused = std::get_if<Response>(&read)) return *refused;
  JobParseResult& parsed = std::get<JobParseResult>(read);
  // Validated as a submission is, and nothing stored (the UI's editor, as you type).
  if (dry_run) {
    json body = {{"valid", true}, {"taskCount", parsed.job->tasks.size()}};
    if (!parsed.job->name.empty()) body["name"] = parsed.job->name;
    return Ok(body);
  }
  // A wait holds a slot (and, unless parked, this thread): take one before submitting,
  // or refuse.
  std::shared_ptr<void> slot;
  if (parsed.job->wait_timeout) {
    if (stopping_) return ErrorResponse(Unavailable("the server is stopping"));
    if (++waiting_ > options_.max_waits) {
      --waiting_;
      return ErrorResponse(Unavailable(fmt::format(
          "{} submissions are already waiting, the limit (api.max_waits): submit without wait "
          "and poll GET /jobs/{{id}}",
          options_.max_waits)));
    }
    slot = std::shared_ptr<void>(nullptr, [this](void*) { --waiting_; });
  }
  if (who) parsed.job->created_by = who->username;
  BATON_ASSIGN_OR_RETURN(auto job, coordinator_.Submit(*parsed.job), ErrorResponse);
  std::vector<std::string> secrets = SecretValues(job);
  if (job.job.wait_timeout) {
    auto wait = std::make_shared<PendingWait>();
    wait->job_id = job.id;
    wait->timeout = *job.job.wait_timeout;
    wait->deadline = std::chrono::steady_clock::now() + wait->timeout;
    wait->slot = std::move(slot);
    if (request.may_park) {
      Response parked;
      parked.wait = std::move(wait);
      return parked;
    }
    auto done = WaitForJob(job.id, *job.job.wait_timeout);
    if (!done.ok()) {
      if (done.status().code() == StatusCode::kDeadlineExceeded) return WaitTimedOut(*wait);
      return ErrorResponse(done.status());
    }
    return GetJob(job.id);
  }
  // The job as accepted, PENDING, as Tork answers; by now the scheduler has moved it on
  // (SCHEDULED with its first task dispatched, when that task is runnable).
  job.state = JobState::kPending;
  job.started_at.reset();
  json body = ToJson(job, /*summary=*/true);
  RedactJson(body, secrets);
  return Ok(body);
}

Response Api::WaitTimedOut(const PendingWait& wait) {
  return ErrorResponse(DeadlineExceeded(
      fmt::format("job {} did not finish within {}", wait.job_id, FormatDuration(wait.timeout))));
}

Response Api::Stopping(const std::string& job_id) {
  return ErrorResponse(Unavailable(fmt::format(
      "the server is stopping; job {} goes on: GET /jobs/{} shows it", job_id, job_id)));
}

std::optional<Response> Api::WaitAnswer(const PendingWait& wait, bool give_up) {
  if (give_up || stopping_) return Stopping(wait.job_id);
  auto done = coordinator_.Wait(wait.job_id, std::chrono::milliseconds(0));
  if (done.ok()) return GetJob(wait.job_id);
  if (done.status().code() != StatusCode::kDeadlineExceeded) return ErrorResponse(done.status());
  if (std::chrono::steady_clock::now() >= wait.deadline) return WaitTimedOut(wait);
  return std::nullopt;
}

Result<JobRecord> Api::WaitForJob(const std::string& id, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto done = coordinator_.Wait(
        id, std::clamp(left, std::chrono::milliseconds(0), std::chrono::milliseconds(500)));
    if (done.ok() || done.status().code() != StatusCode::kDeadlineExceeded || left.count() <= 500) {
      return done;
    }
    if (stopping_) {
      return Unavailable(
          fmt::format("the server is stopping; job {} goes on: GET /jobs/{} shows it", id, id));
    }
  }
}

Response Api::ListJobs(const Request& request, const std::optional<Principal>& who) {
  BATON_ASSIGN_OR_RETURN(auto paging, PagingOf(request, 10), ErrorResponse);
  JobQuery query;
  if (auto it = request.query.find("q"); it != request.query.end()) query.q = it->second;
  // (beyond Tork) state=RUNNING,FAILED: only jobs in one of these states.
  if (auto it = request.query.find("state"); it != request.query.end()) {
    for (const std::string& name : Split(it->second, ',')) {
      std::optional<JobState> state = ParseJobState(name);
      if (!state) {
        return ErrorResponse(InvalidArgument(fmt::format(
            "state: unknown job state \"{}\" (PENDING, SCHEDULED, RUNNING, COMPLETED, FAILED "
            "or CANCELLED)",
            std::string_view(name).substr(0, 50))));
      }
      if (std::find(query.states.begin(), query.states.end(), *state) == query.states.end()) {
        query.states.push_back(*state);
      }
    }
  }
  query.page = paging.page;
  query.size = paging.size;
  query.viewer = who;
  // Bounded here, before the datastore, so that a long search is a 400 stating the limit.
  if (Status valid = ValidateJobQuery(query); !valid.ok()) return ErrorResponse(valid);
  BATON_ASSIGN_OR_RETURN(auto jobs, datastore_.ListJobs(query), ErrorResponse);
  return Ok(PageJson(jobs, [](const JobRecord& job) {
    json j = ToJson(job, /*summary=*/true);
    // The job's own values only: reading every listed job's task rows costs too much
    // for a list, and a summary shows no row.
    RedactJson(j, SecretValues(job));
    return j;
  }));
}

namespace {

// A job's rows in Tork's order: by position, then by start (rows not started last), then
// as stored (by creation).
void InTorksOrder(std::vector<TaskRecord>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const TaskRecord& a, const TaskRecord& b) {
    if (a.position != b.position) return a.position < b.position;
    if (a.started_at.has_value() != b.started_at.has_value()) return a.started_at.has_value();
    return a.started_at.has_value() && *a.started_at < *b.started_at;
  });
}

// The rows that are the latest of their slot (core/records.h: LatestAttempt).
std::set<const TaskRecord*> LatestOfTheirSlots(const std::vector<TaskRecord>& rows) {
  std::map<std::tuple<std::string, int, int>, const TaskRecord*> latest;
  for (const TaskRecord& row : rows) {
    const TaskRecord*& at = latest[{row.parent_id, row.position, row.each_index}];
    at = LatestAttempt(at, row);
  }
  std::set<const TaskRecord*> out;
  for (const auto& [slot, row] : latest) out.insert(row);
  return out;
}

}  // namespace

Response Api::GetJob(const std::string& id) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  BATON_ASSIGN_OR_RETURN(auto job, datastore_.GetJob(id), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto rows, datastore_.JobTasks(id), ErrorResponse);
  InTorksOrder(rows);
  json body = ToJson(job, /*summary=*/false);
  json execution = json::array();
  json warnings = json::array();
  std::vector<std::string> secrets = SecretValues(job);
  const std::set<const TaskRecord*> latest = LatestOfTheirSlots(rows);
  for (const TaskRecord& row : rows) {
    execution.push_back(ToJson(row));
    AddSecretValues(row.task, secrets);  // evaluated env: what the task's output may show
    // An optional task's final failure, which its job went on after (beyond Tork); not
    // one that a later row of its slot ran again (lost with its worker or the engine,
    // or before a restart).
    if (IsOptionalFailureLetGo(row) && latest.contains(&row)) {
      warnings.push_back(fmt::format("optional task \"{}\" failed: {}", row.task.name, row.error));
    }
  }
  body["execution"] = std::move(execution);
  if (!warnings.empty()) body["warnings"] = std::move(warnings);
  RedactJson(body, secrets);
  return Ok(body);
}

Response Api::JobLog(const std::string& id, const Request& request) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  BATON_ASSIGN_OR_RETURN(auto paging, PagingOf(request, 25), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto job, datastore_.GetJob(id), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto parts, datastore_.JobLogParts(id, paging.page, paging.size),
                         ErrorResponse);
  // The values of the page's tasks (cached by the coordinator), not of every row.
  std::vector<std::string> secrets = SecretValues(job);
  std::set<std::string> seen;
  for (const LogPart& part : parts.items) {
    if (seen.insert(part.task_id).second) {
      MergeSecretValues(coordinator_.SecretsFor(id, part.task_id), secrets);
    }
  }
  return Ok(PageJson(parts, [&](const LogPart& part) { return LogPartJson(part, secrets); }));
}

Response Api::JobWebhooks(const std::string& id) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  BATON_ASSIGN_OR_RETURN(auto job, datastore_.GetJob(id), ErrorResponse);
  std::vector<WebhookDelivery> deliveries;
  Status read = datastore_.Transact([&](Transaction& tx) -> Status {
    auto rows = tx.JobWebhookDeliveries(id);
    if (!rows.ok()) return rows.status();
    deliveries = std::move(*rows);
    return Status::Ok();
  });
  if (!read.ok()) return ErrorResponse(read);
  nlohmann::json out = nlohmann::json::array();
  for (const WebhookDelivery& d : deliveries) out.push_back(ToJson(d));
  RedactJson(out, SecretValues(job));
  return Ok(out);
}

Response Api::DeleteJob(const std::string& id) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  Status s = coordinator_.DeleteJob(id);
  if (!s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

Response Api::CancelJob(const std::string& id) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  // The job is read only to say why a cancel was refused: reading a big job (its whole
  // definition and context) cost seconds before every cancel.
  Status s = coordinator_.Cancel(id);
  if (!s.ok()) {
    BATON_ASSIGN_OR_RETURN(auto job, datastore_.GetJob(id), ErrorResponse);
    if (s.code() == StatusCode::kFailedPrecondition) {
      return ErrorResponse(FailedPrecondition(fmt::format(
          "job {} is {}: only a PENDING, SCHEDULED, RUNNING or PAUSED job can be cancelled", id,
          ToString(job.state))));
    }
    return ErrorResponse(s);
  }
  return Ok({{"status", "OK"}});
}

Response Api::RestartJob(const std::string& id) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  Status s = coordinator_.Restart(id);
  if (!s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

Response Api::PauseJob(const std::string& id) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  Status s = coordinator_.Pause(id);
  if (!s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

Response Api::SignalJob(const std::string& id, const std::string& name, const Request& request) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  constexpr std::size_t kMaxPayload = 1 << 20;
  // As a wait's `signal` must be: a name no wait could have is a mistake.
  if (!IsIdentifier(name) || name.size() > 128) {
    return ErrorResponse(InvalidArgument(
        "the signal's name: expected at most 128 letters, digits and _, not starting with a "
        "digit"));
  }
  if (request.body.size() > kMaxPayload) {
    return ErrorResponse(InvalidArgument(fmt::format("the payload: {} bytes, over the limit of {}",
                                                     request.body.size(), kMaxPayload)));
  }
  json payload = "";
  if (!request.body.empty()) {
    payload = json::parse(request.body, nullptr, false);
    if (payload.is_discarded()) {
      return ErrorResponse(InvalidArgument("the payload: expected JSON (a string in quotes)"));
    }
  }
  Status s = coordinator_.Signal(flow::Signal{.job_id = id, .name = name, .payload = payload});
  if (!s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

Response Api::RerunJob(const std::string& id, const Request& request) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  flow::Rerun rerun{.job_id = id};
  if (!request.body.empty()) {
    json body = json::parse(request.body, nullptr, false);
    if (!body.is_object()) {
      return ErrorResponse(
          InvalidArgument("the body: expected a JSON object {mode, from, inputs}"));
    }
    for (const auto& [key, value] : body.items()) {
      if (key == "mode") {
        const std::string mode = value.is_string() ? value.get<std::string>() : "";
        if (mode == "failed_only") {
          rerun.mode = flow::RerunMode::kFailedOnly;
        } else if (mode == "from_failed") {
          rerun.mode = flow::RerunMode::kFromFailed;
        } else if (mode == "all") {
          rerun.mode = flow::RerunMode::kAll;
        } else {
          return ErrorResponse(InvalidArgument(
              fmt::format("mode: expected failed_only, from_failed or all, not {}", value.dump())));
        }
      } else if (key == "from") {
        if (!value.is_string() || value.get<std::string>().empty()) {
          return ErrorResponse(InvalidArgument("from: expected the name of a top-level task"));
        }
        rerun.from = value.get<std::string>();
      } else if (key == "inputs") {
        if (!value.is_object()) {
          return ErrorResponse(InvalidArgument("inputs: expected an object of strings"));
        }
        for (const auto& [name, input] : value.items()) {
          if (!input.is_string()) {
            return ErrorResponse(
                InvalidArgument(fmt::format("inputs.{}: expected a string", name)));
          }
        }
        rerun.inputs = value;
      } else {
        return ErrorResponse(InvalidArgument(
            fmt::format("unknown field \"{}\" (expected mode, from or inputs)", key)));
      }
    }
  }
  // Once: a request that comes twice (a client's retry) reruns the job once.
  BATON_ASSIGN_OR_RETURN(auto job, datastore_.GetJob(id), ErrorResponse);
  rerun.once = true;
  rerun.of_run = job.started_at;
  Status s = coordinator_.Rerun(rerun);
  if (!s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

Response Api::ResumeJob(const std::string& id) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  Status s = coordinator_.Resume(id);
  if (!s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

}  // namespace baton::api

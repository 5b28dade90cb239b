#include "api/api.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "api/detail.h"
#include "core/record_json.h"
#include "core/redact.h"

namespace baton::api {
// Shared with the handlers in other files of the API (detail.h).
namespace detail {

using nlohmann::json;

Response Json(int status, const json& body) {
  Response response;
  response.status = status;
  response.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return response;
}

Response Ok(const json& body) { return Json(200, body); }

std::vector<std::string> Split(std::string_view path, char sep) {
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find(sep, i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

bool IsId(std::string_view id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// Reads a positive integer query parameter within [lo, hi]; absent gives `fallback`.
Result<bool> BoolParam(const Request& request, const std::string& name, bool fallback) {
  auto it = request.query.find(name);
  if (it == request.query.end()) return fallback;
  if (it->second == "true" || it->second == "1") return true;
  if (it->second == "false" || it->second == "0") return false;
  return InvalidArgument(
      fmt::format("{} must be true or false, not \"{}\"", name, it->second.substr(0, 50)));
}

Result<int> IntParam(const Request& request, const std::string& name, int fallback, int lo,
                     int hi) {
  auto it = request.query.find(name);
  if (it == request.query.end() || it->second.empty()) return fallback;
  int value = 0;
  const std::string& text = it->second;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < lo || value > hi) {
    return InvalidArgument(fmt::format("{} must be a number from {} to {}, got \"{}\"", name, lo,
                                       hi, text.substr(0, 40)));
  }
  return value;
}

Result<Paging> PagingOf(const Request& request, int size) {
  Paging paging;
  BATON_ASSIGN_OR_RETURN(paging.page, IntParam(request, "page", 1, 1, 1'000'000));
  BATON_ASSIGN_OR_RETURN(paging.size, IntParam(request, "size", size, 1, 100));
  return paging;
}

json LogPartJson(const LogPart& part, const std::vector<std::string>& secrets) {
  return {{"id", part.id},
          {"number", part.number},
          {"taskId", part.task_id},
          {"contents", RedactText(part.contents, secrets)},
          {"createdAt", FormatTime(part.created_at)}};
}

std::string MediaType(std::string_view content_type) {
  std::string_view t = content_type.substr(0, content_type.find(';'));
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  std::string lower(t);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

std::variant<DocumentFormat, Response> BodyFormat(const Request& request,
                                                  std::size_t max_body_bytes,
                                                  std::string_view what) {
  if (request.body.size() > max_body_bytes) {
    return ErrorResponse(InvalidArgument(fmt::format("{} is {} bytes; the limit is {}", what,
                                                     request.body.size(), max_body_bytes)),
                         413);
  }
  std::string type = MediaType(request.content_type);
  if (type == "application/json") return DocumentFormat::kJson;
  if (type == "text/yaml" || type == "application/x-yaml" || type == "application/yaml" ||
      type == "text/x-yaml") {
    return DocumentFormat::kYaml;
  }
  if (type.empty()) return SniffFormat(request.body);
  return ErrorResponse(InvalidArgument(fmt::format("unsupported content type \"{}\": send "
                                                   "application/json, text/yaml or "
                                                   "application/x-yaml",
                                                   type.substr(0, 100))),
                       415);
}

Response DocumentProblems(const std::vector<Diagnostic>& problems, std::string message,
                          bool too_large, std::size_t max_document_bytes) {
  json errors = json::array();
  for (const Diagnostic& d : problems) {
    errors.push_back({{"line", d.mark.line},
                      {"column", d.mark.column},
                      {"path", d.path},
                      {"message", d.message}});
  }
  // Too large to build (an alias bomb, say): 413, naming the setting that bounds it.
  if (too_large) {
    if (!problems.empty() &&
        problems.front().message == DocumentTooLargeMessage(max_document_bytes)) {
      message += "; the limit is api.max_document_bytes";
    }
    return Error(413, StatusCodeName(StatusCode::kInvalidArgument), message, {{"errors", errors}});
  }
  return Error(HttpStatus(StatusCode::kInvalidArgument),
               StatusCodeName(StatusCode::kInvalidArgument), message, {{"errors", errors}});
}

Response Error(int http_status, std::string_view code, std::string_view message,
               const json& extra) {
  json body = extra;
  body["message"] = message;
  body["code"] = code;
  return Json(http_status, body);
}

Response PermissionDenied(std::string_view message) {
  return Error(403, "PERMISSION_DENIED", message);
}

}  // namespace detail
using namespace detail;

int HttpStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kFailedPrecondition:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kDeadlineExceeded:
      return 408;
    case StatusCode::kCancelled:
      return 409;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

Response ErrorResponse(const Status& status) {
  return ErrorResponse(status, HttpStatus(status.code()));
}

Response ErrorResponse(const Status& status, int http_status) {
  return Error(http_status, StatusCodeName(status.code()), status.message());
}

Api::Api(Coordinator& coordinator, Datastore& datastore, Broker& broker, ApiOptions options)
    : coordinator_(coordinator),
      datastore_(datastore),
      authenticator_(std::make_unique<auth::Authenticator>(datastore, options.auth.bcrypt_cost)),
      broker_(broker),
      options_(std::move(options)) {}

std::string_view ToString(Access access) {
  switch (access) {
    case Access::kOpen:
      return "open";
    case Access::kUser:
      return "user";
    case Access::kJob:
      return "job";
    case Access::kTask:
      return "task";
    case Access::kScheduledJob:
      return "scheduled job";
    case Access::kAdmin:
      return "admin";
  }
  return "?";
}

struct Api::Route {
  RouteInfo info;
  Response (*handle)(Api& api, const Call& call);
};

// The API's routes, and who may call each (docs/auth.md, "Adding a route"). A route is
// reachable only through this table, so none escapes its access check; auth_api_test checks
// every one of them against each kind of caller.
const std::vector<Api::Route>& Api::RouteTable() {
  static const std::vector<Route> routes = {
      {{"GET", "/health", Access::kOpen}, [](Api& a, const Call&) { return a.Health(); }},
      // The web UI's files: open, so that the UI can ask for credentials itself.
      {{"GET", "/", Access::kOpen},
       [](Api& a, const Call& c) { return a.WebFile("/index.html", &c.request); }},
      {{"GET", "/index.html", Access::kOpen},
       [](Api& a, const Call& c) { return a.WebFile("/index.html", &c.request); }},
      {{"GET", "/assets/{id}", Access::kOpen},
       [](Api& a, const Call& c) { return a.WebFile("/assets/" + c.id, &c.request); }},
      {{"GET", "/events", Access::kUser}, [](Api& a, const Call& c) { return a.Events(c); }},
      {{"GET", "/whoami", Access::kUser}, [](Api& a, const Call& c) { return a.WhoAmI(c); }},
      {{"POST", "/jobs", Access::kUser},
       [](Api& a, const Call& c) { return a.SubmitJob(c.request, c.who); }},
      {{"GET", "/jobs", Access::kUser},
       [](Api& a, const Call& c) { return a.ListJobs(c.request, c.who); }},
      // A job's execution plan, nothing stored (the UI's graph).
      {{"POST", "/jobs/plan", Access::kUser},
       [](Api& a, const Call& c) { return a.PlanJob(c.request); }},
      {{"GET", "/jobs/{id}", Access::kJob}, [](Api& a, const Call& c) { return a.GetJob(c.id); }},
      {{"GET", "/jobs/{id}/log", Access::kJob},
       [](Api& a, const Call& c) { return a.JobLog(c.id, c.request); }},
      {{"GET", "/jobs/{id}/webhooks", Access::kJob},
       [](Api& a, const Call& c) { return a.JobWebhooks(c.id); }},
      {{"DELETE", "/jobs/{id}", Access::kJob},
       [](Api& a, const Call& c) { return a.DeleteJob(c.id); }},
      {{"PUT", "/jobs/{id}/cancel", Access::kJob},
       [](Api& a, const Call& c) { return a.CancelJob(c.id); }},
      {{"PUT", "/jobs/{id}/restart", Access::kJob},
       [](Api& a, const Call& c) { return a.RestartJob(c.id); }},
      // Beyond Tork: a job's work held, and let go.
      {{"PUT", "/jobs/{id}/pause", Access::kJob},
       [](Api& a, const Call& c) { return a.PauseJob(c.id); }},
      {{"PUT", "/jobs/{id}/resume", Access::kJob},
       [](Api& a, const Call& c) { return a.ResumeJob(c.id); }},
      // Beyond Tork: a finished job runs again, its history kept.
      {{"PUT", "/jobs/{id}/rerun", Access::kJob},
       [](Api& a, const Call& c) { return a.RerunJob(c.id, c.request); }},
      // Beyond Tork: a signal to the job's tasks that wait for it.
      {{"POST", "/jobs/{id}/signals/{name}", Access::kJob},
       [](Api& a, const Call& c) { return a.SignalJob(c.id, c.name, c.request); }},
      {{"GET", "/tasks/{id}", Access::kTask},
       [](Api& a, const Call& c) { return a.GetTask(c.id); }},
      {{"GET", "/tasks/{id}/log", Access::kTask},
       [](Api& a, const Call& c) { return a.TaskLog(c.id, c.request); }},
      // Beyond Tork: a task marked SKIPPED with a result, its job carrying on.
      {{"PUT", "/tasks/{id}/skip", Access::kTask},
       [](Api& a, const Call& c) { return a.SkipTask(c.id, c.request); }},
      {{"GET", "/queues", Access::kUser}, [](Api& a, const Call&) { return a.Queues(""); }},
      {{"GET", "/queues/{id}", Access::kUser},
       [](Api& a, const Call& c) { return a.Queues(c.id); }},
      {{"DELETE", "/queues/{id}", Access::kAdmin},
       [](Api& a, const Call& c) { return a.DeleteQueue(c.id); }},
      {{"GET", "/nodes", Access::kUser}, [](Api& a, const Call&) { return a.Nodes(); }},
      {{"GET", "/metrics", Access::kUser},
       [](Api& a, const Call& c) { return a.Metrics(c.request); }},
      // Scheduled jobs: created and listed by any signed-in user (a list shows only those
      // they may see); each one answered, changed or deleted only for whom its
      // definition's permissions admit, as a job (to others it is 404). The jobs it fires
      // carry its permissions and its creator.
      {{"POST", "/scheduled-jobs", Access::kUser},
       [](Api& a, const Call& c) { return a.CreateScheduledJob(c.request, c.who); }},
      {{"GET", "/scheduled-jobs", Access::kUser},
       [](Api& a, const Call& c) { return a.ListScheduledJobs(c.request, c.who); }},
      {{"GET", "/scheduled-jobs/{id}", Access::kScheduledJob},
       [](Api& a, const Call& c) { return a.GetScheduledJob(c.id); }},
      {{"PUT", "/scheduled-jobs/{id}", Access::kScheduledJob},
       [](Api& a, const Call& c) { return a.UpdateScheduledJob(c.id, c.request, c.who); }},
      {{"DELETE", "/scheduled-jobs/{id}", Access::kScheduledJob},
       [](Api& a, const Call& c) { return a.DeleteScheduledJob(c.id); }},
      {{"PUT", "/scheduled-jobs/{id}/pause", Access::kScheduledJob},
       [](Api& a, const Call& c) { return a.PauseScheduledJob(c.id); }},
      {{"PUT", "/scheduled-jobs/{id}/resume", Access::kScheduledJob},
       [](Api& a, const Call& c) { return a.ResumeScheduledJob(c.id); }},
      {{"POST", "/users", Access::kAdmin},
       [](Api& a, const Call& c) { return a.CreateUser(c.request); }},
      {{"POST", "/keys", Access::kUser}, [](Api& a, const Call& c) { return a.CreateKey(c); }},
      {{"GET", "/keys", Access::kUser}, [](Api& a, const Call& c) { return a.ListKeys(c); }},
      {{"DELETE", "/keys/{id}", Access::kUser},
       [](Api& a, const Call& c) { return a.RevokeKey(c); }},
  };
  return routes;
}

std::vector<RouteInfo> Api::Routes() {
  std::vector<RouteInfo> out;
  for (const Route& route : RouteTable()) out.push_back(route.info);
  return out;
}

Api::~Api() = default;

namespace {

// Whether `parts` (a request's path) match `pattern`; `{id}` takes one part into `*id`,
// `{name}` one into `*name`.
bool Matches(const std::vector<std::string>& want, const std::vector<std::string>& parts,
             std::string* id, std::string* name) {
  if (want.size() != parts.size()) return false;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] == "{id}") {
      *id = parts[i];
    } else if (want[i] == "{name}") {
      *name = parts[i];
    } else if (want[i] != parts[i]) {
      return false;
    }
  }
  return true;
}

Response Unauthenticated(const std::string& why) {
  Response r = Error(401, "UNAUTHENTICATED",
                     "authentication required: " + why +
                         "; send HTTP basic credentials (a user's name and password) or an API "
                         "key (Authorization: Bearer KEY)");
  r.headers.emplace_back("WWW-Authenticate", "Basic realm=\"baton\", charset=\"UTF-8\"");
  return r;
}

}  // namespace

Response Api::Handle(const Request& request) {
  const std::string* origin = nullptr;
  if (options_.cors.enabled) {
    if (auto it = request.headers.find("origin"); it != request.headers.end()) origin = &it->second;
  }
  // A browser's preflight: answered here, before any route or credentials.
  if (origin != nullptr && request.method == "OPTIONS" &&
      request.headers.contains("access-control-request-method")) {
    Response r;
    r.status = 204;
    r.headers = CorsHeaders(*origin);
    if (!r.headers.empty()) {
      r.headers.emplace_back("Access-Control-Allow-Methods",
                             options_.cors.methods == "*" ? "GET, POST, PUT, DELETE, PATCH, OPTIONS"
                                                          : options_.cors.methods);
      std::string allowed = options_.cors.headers;
      if (allowed == "*") {
        auto h = request.headers.find("access-control-request-headers");
        allowed = h == request.headers.end() ? "Content-Type, Authorization" : h->second;
      }
      r.headers.emplace_back("Access-Control-Allow-Headers", allowed);
      r.headers.emplace_back("Access-Control-Max-Age", "600");
    }
    return r;
  }
  Response response;
  if (options_.rate_limit_rps > 0 && request.path != "/health" && !TakeToken(request.remote_addr)) {
    response = ErrorResponse(Unavailable(fmt::format("too many requests: the limit is {} a second "
                                                     "for each client "
                                                     "(middleware.web.ratelimit.rps)",
                                                     options_.rate_limit_rps)),
                             429);
    response.headers.emplace_back("Retry-After", "1");
  } else {
    response = Dispatch(request);
  }
  if (origin != nullptr) {
    for (auto& header : CorsHeaders(*origin)) response.headers.push_back(std::move(header));
  }
  return response;
}

bool Api::TakeToken(const std::string& remote) {
  const auto now = std::chrono::steady_clock::now();
  const double rate = options_.rate_limit_rps;
  MutexLock lock(rate_mu_);
  // Bounded: clients quiet for a second have full buckets again, and are forgotten.
  if (buckets_.size() > 10000) {
    std::erase_if(buckets_,
                  [&](const auto& b) { return now - b.second.at > std::chrono::seconds(1); });
  }
  auto [it, fresh] = buckets_.try_emplace(remote, Bucket{rate, now});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(rate, b.tokens + rate * std::chrono::duration<double>(now - b.at).count());
    b.at = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

std::vector<std::pair<std::string, std::string>> Api::CorsHeaders(const std::string& origin) const {
  const std::vector<std::string>& allowed = options_.cors.origins;
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  if (!any && std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return {};
  std::vector<std::pair<std::string, std::string>> out;
  // With credentials, a browser wants the origin itself, never *.
  out.emplace_back("Access-Control-Allow-Origin", any && !options_.cors.credentials ? "*" : origin);
  out.emplace_back("Vary", "Origin");
  if (options_.cors.credentials) out.emplace_back("Access-Control-Allow-Credentials", "true");
  return out;
}

Response Api::Dispatch(const Request& request) {
  try {
    // The routes' patterns, split once.
    static const std::vector<std::vector<std::string>> patterns = [] {
      std::vector<std::vector<std::string>> out;
      for (const Route& route : RouteTable()) out.push_back(Split(route.info.path));
      return out;
    }();
    std::vector<std::string> parts = Split(request.path);
    const std::vector<Route>& routes = RouteTable();
    // HEAD is answered as GET is (the HTTP layer sends the head alone).
    std::string_view method = request.method;
    if (method == "HEAD") method = "GET";
    for (std::size_t i = 0; i < routes.size(); ++i) {
      const Route& route = routes[i];
      if (route.info.method != method) continue;
      Call call{request, "", "", std::nullopt};
      if (!Matches(patterns[i], parts, &call.id, &call.name)) continue;
      if (std::optional<Response> refused = Authorize(route.info.access, call)) return *refused;
      return route.handle(*this, call);
    }
    return ErrorResponse(NotFound(
        fmt::format("no such endpoint: {} {}", request.method, request.path.substr(0, 200))));
  } catch (const std::exception& e) {
    return ErrorResponse(Internal(std::string("unexpected error: ") + e.what()));
  }
}

std::optional<Response> Api::Authorize(Access access, Call& call) {
  if (!options_.auth.enabled || access == Access::kOpen) return std::nullopt;
  std::string header;
  if (auto it = call.request.headers.find("authorization"); it != call.request.headers.end()) {
    header = it->second;
  }
  auth::Credentials credentials = auth::ParseAuthorization(header);
  Result<Principal> who = authenticator_->Authenticate(credentials);
  if (!who.ok()) {
    if (who.status().code() == StatusCode::kNotFound) {
      return Unauthenticated(credentials.kind == auth::Credentials::Kind::kNone
                                 ? "no credentials sent"
                                 : who.status().message());
    }
    return ErrorResponse(who.status());
  }
  call.who = std::move(*who);
  switch (access) {
    case Access::kOpen:
    case Access::kUser:
      return std::nullopt;
    case Access::kAdmin:
      if (call.who->admin()) return std::nullopt;
      return PermissionDenied(fmt::format("{} {} needs the {} role; {} does not have it",
                                          call.request.method, call.request.path.substr(0, 200),
                                          kAdminRole, call.who->username));
    case Access::kJob:
      if (Status s = MaySeeJob(call, call.id); !s.ok()) return ErrorResponse(s);
      return std::nullopt;
    case Access::kScheduledJob:
      if (Status s = MaySeeScheduledJob(call, call.id); !s.ok()) return ErrorResponse(s);
      return std::nullopt;
    case Access::kTask: {
      if (!IsId(call.id)) {
        return ErrorResponse(NotFound(fmt::format("no task {}", call.id.substr(0, 64))));
      }
      Result<TaskRecord> task = datastore_.GetTask(call.id);
      if (!task.ok()) return ErrorResponse(task.status());
      Status s = MaySeeJob(call, task->job_id);
      if (s.code() == StatusCode::kNotFound) {
        return ErrorResponse(NotFound(fmt::format("no task {}", call.id)));
      }
      if (!s.ok()) return ErrorResponse(s);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Status Api::MaySeeJob(const Call& call, const std::string& id) {
  Status unknown = NotFound(fmt::format("no job {}", id.substr(0, 64)));
  if (!IsId(id)) return unknown;
  if (call.who && call.who->admin()) return Status::Ok();
  Result<JobRecord> job = datastore_.GetJob(id);
  if (!job.ok()) return job.status().code() == StatusCode::kNotFound ? unknown : job.status();
  // The same answer as for an unknown id: a job's existence is not told to whom it is
  // hidden.
  if (call.who && !MayAccess(*call.who, job->job)) return unknown;
  return Status::Ok();
}

Status Api::MaySeeScheduledJob(const Call& call, const std::string& id) {
  Status unknown = NotFound(fmt::format("no scheduled job {}", id.substr(0, 64)));
  if (!IsId(id)) return unknown;
  if (call.who && call.who->admin()) return Status::Ok();
  Result<ScheduledJobRecord> record = coordinator_.schedules().Get(id);
  if (!record.ok())
    return record.status().code() == StatusCode::kNotFound ? unknown : record.status();
  if (call.who && !MayAccess(*call.who, record->job)) return unknown;
  return Status::Ok();
}

}  // namespace baton::api

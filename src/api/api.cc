#include "api/api.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "api/detail.h"
#include "core/job_decode.h"
#include "core/record_json.h"
#include "core/redact.h"
#include "web/assets.h"

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

// The non-empty parts of `path` between `sep`s.
std::vector<std::string> Split(std::string_view path, char sep = '/') {
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

template <typename T, typename F>
json PageJson(const Page<T>& page, F&& item) {
  json items = json::array();
  for (const T& t : page.items) items.push_back(item(t));
  return {{"items", std::move(items)},
          {"number", page.number},
          // The items in this page, as Tork's pages say (the last may hold fewer).
          {"size", page.items.size()},
          {"totalPages", page.total_pages},
          {"totalItems", page.total_items}};
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
    return Json(413, {{"message", fmt::format("{} is {} bytes; the limit is {}", what,
                                              request.body.size(), max_body_bytes)},
                      {"code", "INVALID_ARGUMENT"}});
  }
  std::string type = MediaType(request.content_type);
  if (type == "application/json") return DocumentFormat::kJson;
  if (type == "text/yaml" || type == "application/x-yaml" || type == "application/yaml" ||
      type == "text/x-yaml") {
    return DocumentFormat::kYaml;
  }
  if (type.empty()) return SniffFormat(request.body);
  return Json(415, {{"message", fmt::format("unsupported content type \"{}\": send "
                                            "application/json, text/yaml or application/x-yaml",
                                            type.substr(0, 100))},
                    {"code", "INVALID_ARGUMENT"}});
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
    return Json(413, {{"message", message}, {"code", "INVALID_ARGUMENT"}, {"errors", errors}});
  }
  return Json(400, {{"message", message}, {"code", "INVALID_ARGUMENT"}, {"errors", errors}});
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
  return Json(HttpStatus(status.code()),
              {{"message", status.message()}, {"code", StatusCodeName(status.code())}});
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
      {{"GET", "/tasks/{id}", Access::kTask},
       [](Api& a, const Call& c) { return a.GetTask(c.id); }},
      {{"GET", "/tasks/{id}/log", Access::kTask},
       [](Api& a, const Call& c) { return a.TaskLog(c.id, c.request); }},
      {{"GET", "/queues", Access::kUser}, [](Api& a, const Call&) { return a.Queues(""); }},
      {{"GET", "/queues/{id}", Access::kUser},
       [](Api& a, const Call& c) { return a.Queues(c.id); }},
      {{"DELETE", "/queues/{id}", Access::kAdmin},
       [](Api& a, const Call& c) { return a.DeleteQueue(c.id); }},
      {{"GET", "/nodes", Access::kUser}, [](Api& a, const Call&) { return a.Nodes(); }},
      {{"GET", "/metrics", Access::kUser},
       [](Api& a, const Call& c) { return a.Metrics(c.request); }},
      // Scheduled jobs: any signed-in user; the jobs they fire carry their definition's
      // permissions and its creator.
      {{"POST", "/scheduled-jobs", Access::kUser},
       [](Api& a, const Call& c) { return a.CreateScheduledJob(c.request, c.who); }},
      {{"GET", "/scheduled-jobs", Access::kUser},
       [](Api& a, const Call& c) { return a.ListScheduledJobs(c.request); }},
      {{"GET", "/scheduled-jobs/{id}", Access::kUser},
       [](Api& a, const Call& c) { return a.GetScheduledJob(c.id); }},
      {{"PUT", "/scheduled-jobs/{id}", Access::kUser},
       [](Api& a, const Call& c) { return a.UpdateScheduledJob(c.id, c.request, c.who); }},
      {{"DELETE", "/scheduled-jobs/{id}", Access::kUser},
       [](Api& a, const Call& c) { return a.DeleteScheduledJob(c.id); }},
      {{"PUT", "/scheduled-jobs/{id}/pause", Access::kUser},
       [](Api& a, const Call& c) { return a.PauseScheduledJob(c.id); }},
      {{"PUT", "/scheduled-jobs/{id}/resume", Access::kUser},
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

// Whether `parts` (a request's path) match `pattern`; `{id}` takes one part into `*id`.
bool Matches(const std::vector<std::string>& want, const std::vector<std::string>& parts,
             std::string* id) {
  if (want.size() != parts.size()) return false;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] == "{id}") {
      *id = parts[i];
    } else if (want[i] != parts[i]) {
      return false;
    }
  }
  return true;
}

Response Unauthenticated(const std::string& why) {
  Response r = Json(401, {{"message", "authentication required: " + why +
                                          "; send HTTP basic credentials (a user's name and "
                                          "password) or an API key (Authorization: Bearer KEY)"},
                          {"code", "UNAUTHENTICATED"}});
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
    response = Json(429, {{"message", fmt::format("too many requests: the limit is {} a second "
                                                  "for each client (middleware.web.ratelimit.rps)",
                                                  options_.rate_limit_rps)},
                          {"code", "UNAVAILABLE"}});
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
    for (std::size_t i = 0; i < routes.size(); ++i) {
      const Route& route = routes[i];
      if (route.info.method != request.method) continue;
      Call call{request, "", std::nullopt};
      if (!Matches(patterns[i], parts, &call.id)) continue;
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
      return Json(403,
                  {{"message",
                    fmt::format("{} {} needs the {} role; {} does not have it", call.request.method,
                                call.request.path.substr(0, 200), kAdminRole, call.who->username)},
                   {"code", "PERMISSION_DENIED"}});
    case Access::kJob:
      if (Status s = MaySeeJob(call, call.id); !s.ok()) return ErrorResponse(s);
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

Response Api::WebFile(const std::string& path, const Request* request) {
  const web::Asset* asset = web::FindAsset(path);
  if (asset == nullptr) {
    return ErrorResponse(NotFound(web::Assets().empty()
                                      ? "this baton was built without the web UI (BATON_WEB=OFF)"
                                      : fmt::format("no such file: {}", path.substr(0, 200))));
  }
  Response r;
  const std::string etag = fmt::format("\"{}\"", asset->sha256.substr(0, 32));
  r.headers.emplace_back("ETag", etag);
  // Built files carry their content's hash in their names: cached for good. The page
  // itself is asked again each time (then answered 304 when unchanged).
  r.headers.emplace_back("Cache-Control", path.starts_with("/assets/")
                                              ? "public, max-age=31536000, immutable"
                                              : "no-cache");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  if (asset->content_type.starts_with("text/html")) {
    // Nothing from elsewhere: scripts, styles, images and connections stay on this server.
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'self'; script-src 'self'; style-src 'self' "
                           "'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
                           "frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
    r.headers.emplace_back("Referrer-Policy", "no-referrer");
  }
  if (request != nullptr) {
    if (auto it = request->headers.find("if-none-match");
        it != request->headers.end() && it->second == etag) {
      r.status = 304;
      return r;
    }
  }
  r.content_type = std::string(asset->content_type);
  r.body = std::string(asset->bytes);
  return r;
}

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
  // Reconnect after 2 s; the first line tells the client the stream is open.
  r.body = "retry: 2000\n: connected\n\n";
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.stream = coordinator_.events().Subscribe(std::move(filter));
  return r;
}

Response Api::WhoAmI(const Call& call) {
  if (!call.who) {
    return Ok({{"username", ""}, {"roles", json::array()}, {"authEnabled", false}});
  }
  return Ok({{"username", call.who->username}, {"roles", call.who->roles}, {"authEnabled", true}});
}

Response Api::Health() {
  Status ds = datastore_.Health();
  Status br = broker_.Health();
  bool up = ds.ok() && br.ok();
  json body = {{"status", up ? "UP" : "DOWN"}, {"version", options_.version}};
  if (!ds.ok()) body["datastore"] = ds.message();
  if (!br.ok()) body["broker"] = br.message();
  return Json(up ? 200 : 503, body);
}

Response Api::SubmitJob(const Request& request, const std::optional<Principal>& who) {
  BATON_ASSIGN_OR_RETURN(bool dry_run, BoolParam(request, "dryRun", false), ErrorResponse);
  auto format = BodyFormat(request, options_.max_body_bytes, "the job");
  if (auto* refused = std::get_if<Response>(&format)) return *refused;
  JobParseResult parsed =
      ParseJob(request.body, std::get<DocumentFormat>(format), options_.max_document_bytes);
  if (!parsed.ok()) {
    return DocumentProblems(parsed.problems, parsed.Message(), parsed.too_large,
                            options_.max_document_bytes);
  }
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
  return Json(408, {{"message", fmt::format("job {} did not finish within {}", wait.job_id,
                                            FormatDuration(wait.timeout))},
                    {"code", "DEADLINE_EXCEEDED"}});
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
  BATON_ASSIGN_OR_RETURN(auto page, IntParam(request, "page", 1, 1, 1'000'000), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto size, IntParam(request, "size", 10, 1, 100), ErrorResponse);
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
  query.page = page;
  query.size = size;
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

Response Api::GetJob(const std::string& id) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  BATON_ASSIGN_OR_RETURN(auto job, datastore_.GetJob(id), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto rows, datastore_.JobTasks(id), ErrorResponse);
  json body = ToJson(job, /*summary=*/false);
  json execution = json::array();
  std::vector<std::string> secrets = SecretValues(job);
  for (const TaskRecord& row : rows) {
    execution.push_back(ToJson(row));
    AddSecretValues(row.task, secrets);  // evaluated env: what the task's output may show
  }
  body["execution"] = std::move(execution);
  RedactJson(body, secrets);
  return Ok(body);
}

Response Api::JobLog(const std::string& id, const Request& request) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no job {}", id.substr(0, 64))));
  BATON_ASSIGN_OR_RETURN(auto page, IntParam(request, "page", 1, 1, 1'000'000), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto size, IntParam(request, "size", 25, 1, 100), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto job, datastore_.GetJob(id), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto parts, datastore_.JobLogParts(id, page, size), ErrorResponse);
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
      return ErrorResponse(FailedPrecondition(
          fmt::format("job {} is {}: only a PENDING, SCHEDULED or RUNNING job can be cancelled", id,
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

Response Api::TaskLog(const std::string& id, const Request& request) {
  if (!IsId(id)) return ErrorResponse(NotFound(fmt::format("no task {}", id.substr(0, 64))));
  BATON_ASSIGN_OR_RETURN(auto page, IntParam(request, "page", 1, 1, 1'000'000), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto size, IntParam(request, "size", 25, 1, 100), ErrorResponse);
  BATON_ASSIGN_OR_RETURN(auto task, datastore_.GetTask(id), ErrorResponse);
  std::vector<std::string> secrets;
  if (auto job = datastore_.GetJob(task.job_id); job.ok()) secrets = SecretValues(*job);
  AddSecretValues(task.task, secrets);
  BATON_ASSIGN_OR_RETURN(auto parts, datastore_.TaskLogParts(id, page, size), ErrorResponse);
  return Ok(PageJson(parts, [&](const LogPart& part) { return LogPartJson(part, secrets); }));
}

Response Api::Queues(const std::string& name) {
  auto to_json = [](const QueueInfo& q) {
    return json{
        {"name", q.name}, {"size", q.size}, {"subscribers", q.subscribers}, {"unacked", q.unacked}};
  };
  if (!name.empty()) {
    BATON_ASSIGN_OR_RETURN(auto q, broker_.Queue(name), ErrorResponse);
    return Ok(to_json(q));
  }
  BATON_ASSIGN_OR_RETURN(auto queues, broker_.Queues(), ErrorResponse);
  json list = json::array();
  for (const QueueInfo& q : queues) list.push_back(to_json(q));
  return Ok(list);
}

Result<std::vector<NodeRecord>> Api::RecentNodes() {
  TimePoint now = Now();
  BATON_ASSIGN_OR_RETURN(auto nodes, datastore_.ActiveNodes(now - std::chrono::minutes(5)));
  // A node silent for longer than its lease is down.
  for (NodeRecord& node : nodes) {
    if (now - node.last_heartbeat_at > options_.lease) node.status = NodeStatus::kDown;
  }
  return nodes;
}

Response Api::DeleteQueue(const std::string& name) {
  // The engine's own queues (x-…, and the bare names Tork gives them) carry its events:
  // deleting one would lose them.
  if (IsReservedQueueName(name)) {
    return ErrorResponse(InvalidArgument(
        fmt::format("queue {} is the engine's own (x-… and its bare names are reserved); only task "
                    "queues can be deleted",
                    name.substr(0, 100))));
  }
  if (Status deleted = broker_.DeleteQueue(name); !deleted.ok()) return ErrorResponse(deleted);
  return Ok({{"status", "OK"}});
}

Response Api::Nodes() {
  BATON_ASSIGN_OR_RETURN(auto nodes, RecentNodes(), ErrorResponse);
  json list = json::array();
  for (const NodeRecord& node : nodes) {
    list.push_back({{"id", node.id},
                    {"name", node.name},
                    {"hostname", node.hostname},
                    {"startedAt", FormatTime(node.started_at)},
                    {"lastHeartbeatAt", FormatTime(node.last_heartbeat_at)},
                    {"cpuPercent", node.cpu_percent},
                    {"memoryBytes", node.memory_bytes},
                    {"taskCount", node.task_count},
                    {"status", ToString(node.status)},
                    {"queue", node.queue},
                    {"version", node.version}});
  }
  return Ok(list);
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

// ---------------------------------------------------------------------- users, keys

namespace {

json UserJson(const UserRecord& user) {
  json out = {{"id", user.id},
              {"username", user.username},
              {"createdAt", FormatTime(user.created_at)},
              {"roles", user.roles}};
  if (!user.name.empty()) out["name"] = user.name;
  return out;
}

json KeyJson(const ApiKeyRecord& key) {
  json out = {
      {"id", key.id}, {"username", key.username}, {"createdAt", FormatTime(key.created_at)}};
  if (!key.name.empty()) out["name"] = key.name;
  if (key.revoked_at) out["revokedAt"] = FormatTime(*key.revoked_at);
  return out;
}

// The JSON object body of a request, with only `fields`, each a string (or, for
// `lists`, a list of strings): a 400 naming what is wrong otherwise. Read as JSON whatever
// its content type says, as Tork reads POST /users (curl -d sends form encoding).
Result<json> ObjectBody(const Request& request, std::initializer_list<std::string_view> fields,
                        std::initializer_list<std::string_view> lists = {}) {
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (request.body.empty()) body = json::object();
  if (body.is_discarded() || !body.is_object()) {
    return InvalidArgument("the body must be a JSON object");
  }
  for (const auto& [key, value] : body.items()) {
    bool is_list = std::find(lists.begin(), lists.end(), key) != lists.end();
    bool known = is_list || std::find(fields.begin(), fields.end(), key) != fields.end();
    if (!known) return InvalidArgument(fmt::format("unknown field \"{}\"", key.substr(0, 64)));
    if (value.is_null()) continue;
    if (is_list) {
      if (!value.is_array()) return InvalidArgument(fmt::format("{}: expected a list", key));
      for (const json& item : value) {
        if (!item.is_string()) {
          return InvalidArgument(fmt::format("{}: expected a list of strings", key));
        }
      }
    } else if (!value.is_string()) {
      return InvalidArgument(fmt::format("{}: expected a string", key));
    }
  }
  return body;
}

std::string Field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || !it->is_string() ? "" : it->get<std::string>();
}

}  // namespace

Response Api::CreateUser(const Request& request) {
  BATON_ASSIGN_OR_RETURN(
      json body, ObjectBody(request, {"username", "name", "password"}, {"roles"}), ErrorResponse);
  UserRecord user;
  user.username = Field(body, "username");
  // As Tork: blanks around the username are not part of it.
  while (!user.username.empty() && user.username.front() == ' ') user.username.erase(0, 1);
  while (!user.username.empty() && user.username.back() == ' ') user.username.pop_back();
  if (user.username.empty()) return ErrorResponse(InvalidArgument("must provide username"));
  if (Status s = ValidateName("username", user.username); !s.ok()) return ErrorResponse(s);
  std::string password = Field(body, "password");
  if (password.empty()) return ErrorResponse(InvalidArgument("must provide password"));
  user.name = Field(body, "name");
  if (body.contains("roles") && body["roles"].is_array()) {
    for (const json& role : body["roles"]) {
      std::string name = role.get<std::string>();
      if (Status s = ValidateName("roles", name); !s.ok()) return ErrorResponse(s);
      if (std::find(user.roles.begin(), user.roles.end(), name) == user.roles.end()) {
        user.roles.push_back(name);
      }
    }
  }
  BATON_ASSIGN_OR_RETURN(user.password_hash,
                         auth::HashPassword(password, options_.auth.bcrypt_cost), ErrorResponse);
  user.id = NewId();
  user.created_at = Now();
  if (Status s = datastore_.CreateUser(user); !s.ok()) {
    // Tork answers 400 for a taken username.
    if (s.code() == StatusCode::kAlreadyExists) {
      return ErrorResponse(InvalidArgument(fmt::format("user {} already exists", user.username)));
    }
    return ErrorResponse(s);
  }
  return Ok(UserJson(user));
}

Response Api::CreateKey(const Call& call) {
  BATON_ASSIGN_OR_RETURN(json body, ObjectBody(call.request, {"name", "username"}), ErrorResponse);
  std::string username = Field(body, "username");
  if (call.who) {
    if (username.empty()) username = call.who->username;
    if (username != call.who->username && !call.who->admin()) {
      return Json(403, {{"message", fmt::format("only an admin may create a key for another user "
                                                "({}); leave out username for your own",
                                                username.substr(0, 64))},
                        {"code", "PERMISSION_DENIED"}});
    }
  } else if (username.empty()) {
    return ErrorResponse(InvalidArgument(
        "must provide username: authentication is off, so the key's user is not the caller"));
  }
  // The key acts as its user: that user must exist.
  BATON_ASSIGN_OR_RETURN(auto user, datastore_.GetUser(username), ErrorResponse);
  ApiKeyRecord key;
  key.id = NewId();
  key.username = user.username;
  key.name = Field(body, "name");
  if (key.name.size() > 200) {
    return ErrorResponse(InvalidArgument("name: over 200 characters"));
  }
  key.created_at = Now();
  BATON_ASSIGN_OR_RETURN(auto made, auth::MakeApiKey(), ErrorResponse);
  key.key_hash = made.hash;
  if (Status s = datastore_.CreateApiKey(key); !s.ok()) return ErrorResponse(s);
  json out = KeyJson(key);
  out["key"] = made.key;  // the only time it is shown
  return Ok(out);
}

Response Api::ListKeys(const Call& call) {
  std::string username;
  if (auto it = call.request.query.find("username"); it != call.request.query.end()) {
    username = it->second;
  }
  if (call.who && !call.who->admin()) {
    if (!username.empty() && username != call.who->username) {
      return Json(403, {{"message", "only an admin may list another user's keys"},
                        {"code", "PERMISSION_DENIED"}});
    }
    username = call.who->username;
  }
  BATON_ASSIGN_OR_RETURN(auto keys, datastore_.ApiKeys(username), ErrorResponse);
  json list = json::array();
  for (const ApiKeyRecord& key : keys) list.push_back(KeyJson(key));
  return Ok(list);
}

Response Api::RevokeKey(const Call& call) {
  Status unknown = NotFound(fmt::format("no API key {}", call.id.substr(0, 64)));
  if (!IsId(call.id)) return ErrorResponse(unknown);
  // Another user's key is as unknown as a missing one, unless the caller is an admin.
  bool all = !call.who || call.who->admin();
  BATON_ASSIGN_OR_RETURN(auto keys, datastore_.ApiKeys(all ? "" : call.who->username),
                         ErrorResponse);
  auto it = std::find_if(keys.begin(), keys.end(),
                         [&](const ApiKeyRecord& k) { return k.id == call.id; });
  if (it == keys.end()) return ErrorResponse(unknown);
  if (Status s = datastore_.RevokeApiKey(call.id, Now()); !s.ok()) return ErrorResponse(s);
  return Ok({{"status", "OK"}});
}

}  // namespace baton::api

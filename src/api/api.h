// The REST API of api.md as a plain function of a request: routing, parameters, JSON
// shapes, the one table from error codes to HTTP statuses, and redaction. The HTTP
// server (http/server.h, adapted in server.h) only carries requests to it, so the
// handlers are tested without sockets.
//
// Thread-safety: Handle may be called concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "auth/auth.h"
#include "base/mutex.h"
#include "base/status.h"
#include "broker/broker.h"
#include "coordinator/coordinator.h"
#include "coordinator/events.h"
#include "core/document.h"
#include "core/job_decode.h"
#include "datastore/datastore.h"

namespace baton::api {

struct Request {
  std::string method;  // GET, POST, PUT, ...
  std::string path;    // without the query
  std::map<std::string, std::string> query;
  std::string content_type;  // the header as sent; empty when absent
  std::string body;
  // A submission with `wait` may be answered later (Response::wait) instead of blocking
  // Handle: the HTTP server parks its connection, holding no thread.
  bool may_park = false;
  // Every header as sent, its name in lower case (a repeated one: its last value).
  std::map<std::string, std::string> headers;
  // The client's address (empty when not known), for the rate limit.
  std::string remote_addr;
};

// A submission waiting for its job (Request::may_park). It holds one of api.max_waits
// until destroyed.
struct PendingWait {
  std::string job_id;
  std::chrono::milliseconds timeout{0};
  std::chrono::steady_clock::time_point deadline;
  std::shared_ptr<void> slot;  // gives back the api.max_waits slot when the last copy ends
};

struct Response {
  int status = 200;
  std::string body;  // JSON unless content_type says otherwise
  // Set only for a parked submission: status and body are meaningless, and the answer
  // comes from Api::WaitAnswer.
  std::shared_ptr<PendingWait> wait;
  std::string content_type = "application/json";
  // Further headers of the answer (name, value), in order.
  std::vector<std::pair<std::string, std::string>> headers;
  // Set for GET /events: the answer's head and `body` go out at once, then whatever the
  // stream is given, until the client or the server closes the connection.
  std::shared_ptr<EventStream> stream;
};

// Who may call a route once authentication is on (docs/auth.md). Off, every route is open.
enum class Access {
  kOpen,          // anyone, without credentials (GET /health)
  kUser,          // any authenticated user; a list shows only what they may see
  kJob,           // a user the job's permissions admit (MayAccess); to others the job is 404
  kTask,          // as kJob, for the task's job
  kScheduledJob,  // as kJob, for the scheduled job's definition
  kAdmin,         // a user with the admin role; others get 403
};
std::string_view ToString(Access access);

// One route of the API: its method, its path with `{id}` for a path parameter, and who
// may call it. Api::Handle dispatches through this table, and checks `access` before the
// handler runs: a new route is guarded by its line in the table (api.cc kRoutes).
struct RouteInfo {
  std::string_view method;
  std::string_view path;
  Access access;
};

struct AuthOptions {
  // api.auth.enabled: require credentials (HTTP basic or an API key) on every route
  // but GET /health.
  bool enabled = false;
  // bcrypt's cost for passwords set through POST /users (tests use the lowest, 4).
  int bcrypt_cost = 10;
};

// CORS (Tork's middleware.web.cors): with `enabled`, a request whose Origin is allowed
// gets Access-Control-Allow-Origin (the origin, or * when any is and credentials are
// not sent) and a preflight (OPTIONS with Access-Control-Request-Method) gets 204 with the
// allowed methods and headers.
struct CorsOptions {
  bool enabled = false;
  std::vector<std::string> origins = {"*"};
  std::string methods = "*";
  std::string headers = "*";
  bool credentials = false;
};

struct ApiOptions {
  std::string version;
  std::size_t max_body_bytes = 4 << 20;
  CorsOptions cors;
  // Requests a second each client address may make (a token bucket of as many); more get
  // 429. GET /health is not counted. 0: no limit (Tork's middleware.web.ratelimit).
  int rate_limit_rps = 0;
  // A submitted document may expand to this many bytes of text, YAML aliases counted at
  // each use (api.max_document_bytes); more is refused with 413 before the job is built.
  std::size_t max_document_bytes = kMaxDocumentBytes;
  // A loop's `max` over this (coordinator.max_loop_iterations) is refused with 400.
  int max_loop_iterations = kMaxLoopIterations;
  // GET /nodes shows a node DOWN once it has not heartbeated for this long.
  std::chrono::milliseconds lease = std::chrono::seconds(30);
  // Submissions with `wait` waiting at once; more are refused with 503 before they are
  // submitted, so waits can never take every connection the server has.
  int max_waits = 1000;
  AuthOptions auth;
};

// The HTTP status for an error code: the API's single mapping table.
int HttpStatus(StatusCode code);
// `{"message": ..., "code": ...}` with the status from HttpStatus.
Response ErrorResponse(const Status& status);
// The same body with a status that refines HttpStatus's for the code: 413 or 415 for an
// InvalidArgument about a request's body, 429 for the rate limit's Unavailable.
Response ErrorResponse(const Status& status, int http_status);

class Api {
 public:
  Api(Coordinator& coordinator, Datastore& datastore, Broker& broker, ApiOptions options);
  ~Api();

  // Every route, in the order Handle matches them.
  static std::vector<RouteInfo> Routes();

  Response Handle(const Request& request);

  // A request matched to its route: the path's `{id}` (empty when it has none) and the
  // caller (unset when authentication is off, or for an open route).
  struct Call {
    const Request& request;
    std::string id;
    std::string name;  // a `{name}` in the route's path
    std::optional<Principal> who;
  };

  // Ends the submissions waiting now and refuses new waits (503): the server is stopping.
  void StopWaiting() { stopping_ = true; }
  // The answer to a parked submission: its job once terminal, 408 once its timeout has
  // passed, 503 once the server is stopping or when `give_up`; nullopt while it waits.
  // Looks the job up (one datastore read) unless stopping or giving up.
  std::optional<Response> WaitAnswer(const PendingWait& wait, bool give_up);
  // What the server's checker of parked submissions sleeps on between its looks: the
  // coordinator's count of finished jobs (Coordinator::WaitForFinishes).
  std::uint64_t FinishedJobs() { return coordinator_.FinishedJobs(); }
  Coordinator::Finishes FinishedSince(std::uint64_t seen) {
    return coordinator_.FinishedSince(seen);
  }
  void WaitForFinishes(std::uint64_t seen, std::chrono::milliseconds timeout,
                       const std::atomic<bool>& wake) {
    coordinator_.WaitForFinishes(seen, timeout, wake);
  }
  void WakeFinishWaiters() { coordinator_.WakeFinishWaiters(); }

 private:
  struct Route;
  static const std::vector<Route>& RouteTable();
  // Checks `access` for `call` (authenticating it first, unless open); an answer is a
  // refusal (401, 403, 404), nullopt lets the handler run.
  std::optional<Response> Authorize(Access access, Call& call);
  // Whether the caller may see job `id` (reads it). NotFound for an unknown job and
  // for one they may not see, alike.
  Status MaySeeJob(const Call& call, const std::string& id);
  Status MaySeeScheduledJob(const Call& call, const std::string& id);

  Response Health();
  // The web UI's file at `path` (web/assets.h), 304 when `request` already has it.
  Response WebFile(const std::string& path, const Request* request = nullptr);
  // (beyond Tork) GET /events: server-sent events of job and task changes and log parts
  // (docs/api.md), for the jobs the caller may see.
  Response Events(const Call& call);
  // (beyond Tork) GET /whoami: the caller's username and roles, and whether
  // authentication is on.
  Response WhoAmI(const Call& call);
  Response SubmitJob(const Request& request, const std::optional<Principal>& who);
  // POST /jobs/plan: the job's plan (core/plan.h), or its problems as POST /jobs says them.
  Response PlanJob(const Request& request);
  // A job in the request's body, parsed and valid, or the response refusing it (its
  // content type, size, or every problem with its line).
  std::variant<Response, JobParseResult> ParseJobBody(const Request& request);
  Response ListJobs(const Request& request, const std::optional<Principal>& who);
  // POST /users (Tork's): {"username", "name", "password", "roles"}; the answer never
  // holds the password or its hash.
  Response CreateUser(const Request& request);
  // (beyond Tork) API keys: POST /keys {"name", "username"?} answers the key once;
  // GET /keys lists the caller's (an admin's: everyone's); DELETE /keys/{id} revokes.
  Response CreateKey(const Call& call);
  Response ListKeys(const Call& call);
  Response RevokeKey(const Call& call);
  Response GetJob(const std::string& id);
  Response JobLog(const std::string& id, const Request& request);
  // (beyond Tork) the job's webhook deliveries, oldest first, with their attempts.
  Response JobWebhooks(const std::string& id);
  Response CancelJob(const std::string& id);
  // (beyond Tork) a finished top-level job, with its tasks, logs, deliveries, sub-jobs.
  Response DeleteJob(const std::string& id);
  Response RestartJob(const std::string& id);
  // PUT /jobs/{id}/pause and /resume: 400 with flow's reason when the job's state refuses.
  Response PauseJob(const std::string& id);
  // POST /jobs/{id}/signals/{name}: the body (any JSON; none: "") to the job's tasks that
  // wait for `name`, or kept for the first that will (flow::Signal).
  Response SignalJob(const std::string& id, const std::string& name, const Request& request);
  Response ResumeJob(const std::string& id);
  // PUT /jobs/{id}/rerun, body (optional) {mode, from, inputs}: flow::Rerun; 400 naming a
  // bad field, or with flow's reason when the job refuses it.
  Response RerunJob(const std::string& id, const Request& request);
  Response GetTask(const std::string& id);
  // PUT /tasks/{id}/skip, body (optional) {result}: flow::Skip; 400 with flow's reason.
  Response SkipTask(const std::string& id, const Request& request);
  Response TaskLog(const std::string& id, const Request& request);
  // /scheduled-jobs (scheduled_jobs.cc): Tork's routes, and PUT /scheduled-jobs/{id}.
  Response CreateScheduledJob(const Request& request, const std::optional<Principal>& who);
  Response ListScheduledJobs(const Request& request, const std::optional<Principal>& who);
  Response GetScheduledJob(const std::string& id);
  Response UpdateScheduledJob(const std::string& id, const Request& request,
                              const std::optional<Principal>& who);
  Response DeleteScheduledJob(const std::string& id);
  Response PauseScheduledJob(const std::string& id);
  Response ResumeScheduledJob(const std::string& id);
  Response Queues(const std::string& name);
  // DELETE /queues/{name}: a task queue and its waiting messages; 400 for the engine's own
  // queues and while workers read it, 404 for an unknown one.
  Response DeleteQueue(const std::string& name);
  Response Nodes();
  // GET /metrics: Tork's JSON, or Prometheus' text format (WantsPrometheus).
  Response Metrics(const Request& request);
  // The nodes heard from in the last 5 minutes, DOWN when silent past the lease.
  Result<std::vector<NodeRecord>> RecentNodes();
  // Coordinator::Wait in slices, so that StopWaiting ends it.
  Result<JobRecord> WaitForJob(const std::string& id, std::chrono::milliseconds timeout);
  Response WaitTimedOut(const PendingWait& wait);
  Response Stopping(const std::string& job_id);

  Coordinator& coordinator_;
  Datastore& datastore_;
  std::unique_ptr<auth::Authenticator> authenticator_;
  Broker& broker_;
  ApiOptions options_;
  std::atomic<int> waiting_ = 0;  // submissions waiting (blocked in Handle, or parked)
  std::atomic<bool> stopping_ = false;

  // The route's answer, before CORS and the rate limit (Handle).
  Response Dispatch(const Request& request);
  // Takes one of `remote`'s tokens; false when it has none left (ApiOptions::rate_limit_rps).
  bool TakeToken(const std::string& remote) BATON_EXCLUDES(rate_mu_);
  // The CORS headers for a request from `origin` (none when it is not allowed).
  std::vector<std::pair<std::string, std::string>> CorsHeaders(const std::string& origin) const;

  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at;
  };
  Mutex rate_mu_;
  std::map<std::string, Bucket> buckets_ BATON_GUARDED_BY(rate_mu_);
};

}  // namespace baton::api

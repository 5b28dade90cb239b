// Authentication and permissions through Api::Handle (docs/auth.md): every route, from
// its table, against each kind of caller — none, a user the job does not admit, a user
// it admits, an admin. A route added to the API without a rule here fails
// EveryRouteHasARule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "api/api.h"
#include "auth/auth.h"
#include "broker/inmemory/inmemory_broker.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "testing/fake_runtime.h"
#include "testing/wait_for.h"
#include "web/assets.h"
#include "worker/worker.h"

namespace baton::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kCost = 4;  // bcrypt's lowest: these tests check behaviour, not strength

enum class Caller { kNone, kWrongUser, kPermitted, kAdmin };
const char* Name(Caller c) {
  switch (c) {
    case Caller::kNone:
      return "no credentials";
    case Caller::kWrongUser:
      return "wrong user";
    case Caller::kPermitted:
      return "permitted user";
    case Caller::kAdmin:
      return "admin";
  }
  return "?";
}

std::string Basic(const std::string& user, const std::string& password) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string in = user + ":" + password, out;
  for (std::size_t i = 0; i < in.size(); i += 3) {
    unsigned n = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) n |= static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kAlphabet[n & 63] : '=';
  }
  return "Basic " + out;
}

class AuthApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
    ASSERT_TRUE(ds.ok());
    datastore_ = std::move(*ds);
    timers_ = NewThreadTimers();
    coordinator_ = std::make_unique<Coordinator>(*datastore_, broker_, clock_, *timers_);
    WorkerOptions options;
    options.queues = {{"default", 4}};
    worker_ = std::make_unique<Worker>(broker_, runtime_, clock_, options);
    ASSERT_TRUE(worker_->Start().ok());
    ASSERT_TRUE(coordinator_->Start({worker_->node_id()}).ok());
    api_ = std::make_unique<Api>(
        *coordinator_, *datastore_, broker_,
        ApiOptions{.version = "9.9.9", .auth = {.enabled = true, .bcrypt_cost = kCost}});
    AddUser("root", {"admin"});
    AddUser("ann", {});        // submits the jobs
    AddUser("bob", {"dev"});   // named by no job
    AddUser("carl", {});       // named by the jobs as a user
    AddUser("dora", {"ops"});  // in a role the jobs name
  }

  void TearDown() override {
    worker_->Stop(std::chrono::milliseconds(0));
    coordinator_->Stop();
  }

  void AddUser(const std::string& name, std::vector<std::string> roles) {
    UserRecord user{.id = NewId(),
                    .username = name,
                    .name = "",
                    .password_hash = *auth::HashPassword(name + "-pw", kCost),
                    .roles = std::move(roles),
                    .created_at = Now()};
    ASSERT_TRUE(datastore_->CreateUser(user).ok());
  }

  static std::string As(const std::string& user) { return Basic(user, user + "-pw"); }

  Response Call(const std::string& method, const std::string& path, const std::string& auth,
                const std::string& body = "", const std::string& type = "") {
    Request r{.method = method, .path = path, .content_type = type, .body = body};
    if (!auth.empty()) r.headers["authorization"] = auth;
    return api_->Handle(r);
  }

  std::string AuthOf(Caller c) {
    switch (c) {
      case Caller::kNone:
        return "";
      case Caller::kWrongUser:
        return As("bob");
      case Caller::kPermitted:
        return As("carl");
      case Caller::kAdmin:
        return As("root");
    }
    return "";
  }

  // A job ann submits that admits carl and the role ops, run to its end (FAILED).
  std::string PermittedJob() {
    Response r = Call("POST", "/jobs", As("ann"),
                      "name: guarded\npermissions:\n  - user: carl\n  - role: ops\n"
                      "tasks:\n  - {name: t, run: fail}\n",
                      "text/yaml");
    EXPECT_EQ(r.status, 200) << r.body;
    std::string id = json::parse(r.body).value("id", "");
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          return json::parse(Call("GET", "/jobs/" + id, As("root")).body).value("state", "") ==
                 "FAILED";
        },
        std::chrono::seconds(10)));
    return id;
  }
  std::string TaskOf(const std::string& job_id) {
    auto rows = datastore_->JobTasks(job_id);
    EXPECT_TRUE(rows.ok() && !rows->empty());
    return rows.ok() && !rows->empty() ? rows->front().id : "";
  }
  std::string KeyOf(const std::string& user) {
    Response r = Call("POST", "/keys", As(user), R"({"name":"k"})", "application/json");
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body).value("id", "");
  }

  SystemClock clock_;
  std::unique_ptr<Timers> timers_;
  testing::FakeRuntime runtime_;
  InMemoryBroker broker_;
  std::unique_ptr<SqliteDatastore> datastore_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Api> api_;
};

// What each route answers a caller the rule admits, and a user it does not (kJob and
// kTask routes: 404, as for an unknown id; kAdmin: 403; kUser: served, for their own).
struct Rule {
  Access access;
  std::set<int> permitted;  // the statuses a permitted caller (or an admin) may get
  int wrong_user;
};

const std::map<std::string, Rule>& Rules() {
  static const std::map<std::string, Rule> rules = {
      {"GET /health", {Access::kOpen, {200}, 200}},
      // The web UI's files: open, so that the UI can ask for credentials itself.
      {"GET /", {Access::kOpen, {200}, 200}},
      {"GET /index.html", {Access::kOpen, {200}, 200}},
      {"GET /assets/{id}", {Access::kOpen, {200}, 200}},
      // Every job's changes: a user's stream filters out the jobs hidden from them.
      {"GET /events", {Access::kUser, {200}, 200}},
      {"GET /whoami", {Access::kUser, {200}, 200}},
      {"POST /jobs", {Access::kUser, {200}, 200}},
      {"GET /jobs", {Access::kUser, {200}, 200}},
      {"POST /jobs/plan", {Access::kUser, {200}, 200}},
      {"GET /jobs/{id}", {Access::kJob, {200}, 404}},
      {"GET /jobs/{id}/log", {Access::kJob, {200}, 404}},
      {"GET /jobs/{id}/webhooks", {Access::kJob, {200}, 404}},
      {"DELETE /jobs/{id}", {Access::kJob, {200}, 404}},
      {"PUT /jobs/{id}/cancel", {Access::kJob, {400}, 404}},  // FAILED: not cancellable
      {"PUT /jobs/{id}/restart", {Access::kJob, {200}, 404}},
      {"PUT /jobs/{id}/pause", {Access::kJob, {400}, 404}},            // FAILED: not pausable
      {"PUT /jobs/{id}/resume", {Access::kJob, {400}, 404}},           // not PAUSED
      {"PUT /jobs/{id}/rerun", {Access::kJob, {200}, 404}},            // FAILED: runs again
      {"POST /jobs/{id}/signals/{name}", {Access::kJob, {400}, 404}},  // FAILED: ended
      {"GET /tasks/{id}", {Access::kTask, {200}, 404}},
      {"GET /tasks/{id}/log", {Access::kTask, {200}, 404}},
      {"PUT /tasks/{id}/skip", {Access::kTask, {200}, 404}},  // the FAILED task it stopped at
      {"GET /queues", {Access::kUser, {200}, 200}},
      {"GET /queues/{id}", {Access::kUser, {200}, 200}},
      // Read by the worker: 400 for the admin, after the access check.
      {"DELETE /queues/{id}", {Access::kAdmin, {400}, 403}},
      {"GET /nodes", {Access::kUser, {200}, 200}},
      {"GET /metrics", {Access::kUser, {200}, 200}},
      {"POST /users", {Access::kAdmin, {200}, 403}},
      {"POST /keys", {Access::kUser, {200}, 200}},
      {"GET /keys", {Access::kUser, {200}, 200}},
      {"DELETE /keys/{id}", {Access::kUser, {200}, 404}},  // another user's key: unknown
      // Scheduled jobs: made and listed by any signed-in user; each one (made by ann for
      // the call, admitting carl, ACTIVE) as a job: 404 to whom it does not admit.
      {"POST /scheduled-jobs", {Access::kUser, {200}, 200}},
      {"GET /scheduled-jobs", {Access::kUser, {200}, 200}},
      {"GET /scheduled-jobs/{id}", {Access::kScheduledJob, {200}, 404}},
      {"PUT /scheduled-jobs/{id}", {Access::kScheduledJob, {200}, 404}},
      {"DELETE /scheduled-jobs/{id}", {Access::kScheduledJob, {200}, 404}},
      {"PUT /scheduled-jobs/{id}/pause", {Access::kScheduledJob, {200}, 404}},
      {"PUT /scheduled-jobs/{id}/resume", {Access::kScheduledJob, {400}, 404}},  // not PAUSED
  };
  return rules;
}

std::string Key(const RouteInfo& route) {
  return std::string(route.method) + " " + std::string(route.path);
}

TEST_F(AuthApiTest, EveryRouteHasARule) {
  for (const RouteInfo& route : Api::Routes()) {
    auto it = Rules().find(Key(route));
    ASSERT_NE(it, Rules().end()) << Key(route) << " (access " << ToString(route.access)
                                 << ") has no rule in auth_api_test.cc";
    EXPECT_EQ(it->second.access, route.access) << Key(route);
  }
  EXPECT_EQ(Rules().size(), Api::Routes().size());
}

// A scheduled job that admits carl and the role ops (as PermittedJob).
constexpr const char* kScheduled =
    R"({"name":"s","schedule":{"cron":"0 0 * * *"},"tasks":[{"name":"t","run":"ok"}],)"
    R"("permissions":[{"user":"carl"},{"role":"ops"}]})";

TEST_F(AuthApiTest, EveryRouteAnswersEachCallerAsItsRuleSays) {
  int unique = 0;
  for (const RouteInfo& route : Api::Routes()) {
    const Rule& rule = Rules().at(Key(route));
    for (Caller caller : {Caller::kNone, Caller::kWrongUser, Caller::kPermitted, Caller::kAdmin}) {
      SCOPED_TRACE(Key(route) + " as " + Name(caller));
      std::string path(route.path), body, type;
      std::string job = PermittedJob();
      if (path.starts_with("/jobs/{id}")) {
        path.replace(6, 4, job);
        if (auto at = path.find("{name}"); at != std::string::npos) path.replace(at, 6, "go");
      } else if (path.starts_with("/tasks/{id}")) {
        path.replace(7, 4, TaskOf(job));
      } else if (path == "/assets/{id}") {
        for (const web::Asset& asset : web::Assets()) {
          if (asset.path.starts_with("/assets/")) path = std::string(asset.path);
        }
        ASSERT_NE(path, "/assets/{id}") << "this build embeds no web UI (BATON_WEB=OFF)";
      } else if (path == "/queues/{id}") {
        path = "/queues/default";
      } else if (path == "/keys/{id}") {
        // Their own key for the permitted user; someone else's for the rest.
        path = "/keys/" + KeyOf(caller == Caller::kPermitted ? "carl" : "ann");
      } else if (path.starts_with("/scheduled-jobs/{id}")) {
        Response made = Call("POST", "/scheduled-jobs", As("ann"), kScheduled, "application/json");
        ASSERT_EQ(made.status, 200) << made.body;
        path.replace(16, 4, json::parse(made.body)["id"].get<std::string>());
      }
      if (path.starts_with("/scheduled-jobs/") && route.method == std::string_view("PUT") &&
          !path.ends_with("/pause") && !path.ends_with("/resume")) {
        type = "application/json";
        body = kScheduled;
      }
      if (route.method == std::string_view("POST")) {
        type = "application/json";
        if (path == "/scheduled-jobs") {
          body = kScheduled;
        } else if (path == "/jobs" || path == "/jobs/plan") {
          body = R"({"name":"n","tasks":[{"name":"t","run":"ok"}]})";
        } else if (path == "/users") {
          body = json{{"username", "new" + std::to_string(++unique)}, {"password", "pw"}}.dump();
        } else {
          body = "{}";
        }
      }
      Response r = Call(std::string(route.method), path, AuthOf(caller), body, type);
      int want_wrong = rule.wrong_user;
      switch (caller) {
        case Caller::kNone:
          if (rule.access == Access::kOpen) {
            EXPECT_EQ(r.status, 200) << r.body;
          } else {
            EXPECT_EQ(r.status, 401) << r.body;
            EXPECT_EQ(json::parse(r.body)["code"], "UNAUTHENTICATED");
            ASSERT_EQ(r.headers.size(), 1u);
            EXPECT_EQ(r.headers[0].first, "WWW-Authenticate");
          }
          break;
        case Caller::kWrongUser:
          EXPECT_EQ(r.status, want_wrong) << r.body;
          if (want_wrong == 404) EXPECT_EQ(json::parse(r.body)["code"], "NOT_FOUND");
          break;
        case Caller::kPermitted:
          // An admin route's permitted caller is an admin: carl is refused like bob.
          if (rule.access == Access::kAdmin) {
            EXPECT_EQ(r.status, 403) << r.body;
          } else {
            EXPECT_TRUE(rule.permitted.contains(r.status)) << r.status << " " << r.body;
          }
          break;
        case Caller::kAdmin:
          EXPECT_TRUE(rule.permitted.contains(r.status)) << r.status << " " << r.body;
          break;
      }
    }
  }
}

TEST_F(AuthApiTest, WhoAmINamesTheCallerAndTheirRoles) {
  Response r = Call("GET", "/whoami", As("dora"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body),
            (json{{"username", "dora"}, {"roles", {"ops"}}, {"authEnabled", true}}));
  EXPECT_EQ(Call("GET", "/whoami", "").status, 401);
}

TEST_F(AuthApiTest, AUsersEventStreamCarriesOnlyTheJobsTheyMaySee) {
  Response carls = Call("GET", "/events", As("carl"));
  Response bobs = Call("GET", "/events", As("bob"));
  ASSERT_NE(carls.stream, nullptr);
  ASSERT_NE(bobs.stream, nullptr);
  // ann's job admits carl, not bob.
  std::string job = PermittedJob();
  std::string seen_by_carl;
  ASSERT_TRUE(testing::WaitFor([&] {
    seen_by_carl += carls.stream->Take();
    return seen_by_carl.find("\"state\":\"FAILED\",\"taskCount\"") != std::string::npos;
  }));
  EXPECT_NE(seen_by_carl.find(job), std::string::npos);
  // The hub appends a change to every stream before it wakes any: bob's has had its turn.
  EXPECT_EQ(bobs.stream->Take().find(job), std::string::npos);
  // A job's stream: refused to whom the job is hidden, as for an unknown job.
  auto job_stream = [&](const std::string& user) {
    Request r{.method = "GET", .path = "/events", .query = {{"job", job}}};
    r.headers["authorization"] = As(user);
    return api_->Handle(r);
  };
  Response refused = job_stream("bob");
  EXPECT_EQ(refused.status, 404) << refused.body;
  EXPECT_EQ(refused.stream, nullptr);
  Response admitted = job_stream("carl");
  EXPECT_EQ(admitted.status, 200) << admitted.body;
  EXPECT_NE(admitted.stream, nullptr);
}

TEST_F(AuthApiTest, ARoleTheJobNamesAdmitsItsMembersToEveryJobRoute) {
  std::string job = PermittedJob();
  EXPECT_EQ(Call("GET", "/jobs/" + job, As("dora")).status, 200);
  EXPECT_EQ(Call("GET", "/jobs/" + job + "/log", As("dora")).status, 200);
  EXPECT_EQ(Call("GET", "/tasks/" + TaskOf(job), As("dora")).status, 200);
  // Its creator, not named by it, too.
  EXPECT_EQ(Call("GET", "/jobs/" + job, As("ann")).status, 200);
}

TEST_F(AuthApiTest, ASubJobIsSeenByWhomItsParentAdmitsOnly) {
  Response r = Call("POST", "/jobs", As("ann"),
                    "name: parent\npermissions:\n  - user: carl\ntasks:\n"
                    "  - name: outer\n    subjob:\n      name: child\n      tasks:\n"
                    "        - {name: t, run: ok}\n",
                    "text/yaml");
  ASSERT_EQ(r.status, 200) << r.body;
  std::string parent = json::parse(r.body)["id"];
  std::string child;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        json job = json::parse(Call("GET", "/jobs/" + parent, As("root")).body);
        for (const json& row : job.value("execution", json::array())) {
          if (row.contains("subjob") && row["subjob"].contains("id")) {
            child = row["subjob"]["id"].get<std::string>();
          }
        }
        return !child.empty() && job.value("state", "") == "COMPLETED";
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(Call("GET", "/jobs/" + child, As("bob")).status, 404);
  Response seen = Call("GET", "/jobs/" + child, As("carl"));
  EXPECT_EQ(seen.status, 200);
  EXPECT_EQ(json::parse(seen.body)["createdBy"], (json{{"username", "ann"}}));
  EXPECT_EQ(Call("GET", "/jobs/" + child + "/log", As("carl")).status, 200);
  json bobs = json::parse(Call("GET", "/jobs", As("bob")).body);
  EXPECT_EQ(bobs["totalItems"], 0) << bobs.dump();
}

TEST_F(AuthApiTest, WithAuthenticationOffEveryRouteIsOpenAndJobsHaveNoCreator) {
  Api open(*coordinator_, *datastore_, broker_, ApiOptions{.version = "9.9.9"});
  Request submit{.method = "POST",
                 .path = "/jobs",
                 .content_type = "text/yaml",
                 .body = "name: j\npermissions:\n  - user: carl\ntasks:\n  - {name: t, run: ok}\n"};
  Response r = open.Handle(submit);
  ASSERT_EQ(r.status, 200) << r.body;
  std::string id = json::parse(r.body)["id"];
  EXPECT_FALSE(json::parse(r.body).contains("createdBy"));
  EXPECT_EQ(open.Handle({.method = "GET", .path = "/jobs/" + id}).status, 200);
  EXPECT_EQ(open.Handle({.method = "GET", .path = "/jobs"}).status, 200);
  // Users can be made (the first admin, say) without credentials while it is off.
  Response user = open.Handle({.method = "POST",
                               .path = "/users",
                               .content_type = "application/json",
                               .body = R"({"username":"first","password":"pw"})"});
  EXPECT_EQ(user.status, 200) << user.body;
  // A key needs its user named when no caller is known.
  Response key = open.Handle({.method = "POST", .path = "/keys", .body = "{}"});
  EXPECT_EQ(key.status, 400);
  EXPECT_THAT(key.body, HasSubstr("must provide username"));
}

// ann's scheduled job admits carl and the role ops: bob's list leaves it out (in its
// count too), and the jobs it fires keep ann as their creator whoever replaced it.
TEST_F(AuthApiTest, ScheduledJobsAreListedAndKeptAsTheirPermissionsSay) {
  Response made = Call("POST", "/scheduled-jobs", As("ann"), kScheduled, "application/json");
  ASSERT_EQ(made.status, 200) << made.body;
  const std::string id = json::parse(made.body)["id"];
  Response open =
      Call("POST", "/scheduled-jobs", As("bob"),
           R"({"name":"open","schedule":{"cron":"0 0 * * *"},"tasks":[{"name":"t","run":"ok"}]})",
           "application/json");
  ASSERT_EQ(open.status, 200) << open.body;
  auto names = [&](const std::string& user) {
    json page = json::parse(Call("GET", "/scheduled-jobs", As(user)).body);
    std::set<std::string> out;
    for (const json& item : page["items"]) out.insert(item["name"].get<std::string>());
    EXPECT_EQ(page["totalItems"], out.size()) << user;
    return out;
  };
  EXPECT_EQ(names("ann"), (std::set<std::string>{"s", "open"}));
  EXPECT_EQ(names("carl"), (std::set<std::string>{"s", "open"}));
  EXPECT_EQ(names("dora"), (std::set<std::string>{"s", "open"}));
  EXPECT_EQ(names("bob"), (std::set<std::string>{"open"}));
  EXPECT_EQ(names("root"), (std::set<std::string>{"s", "open"}));
  // A hidden one answers as an unknown id.
  Response hidden = Call("GET", "/scheduled-jobs/" + id, As("bob"));
  Response unknown = Call("GET", "/scheduled-jobs/" + NewId(), As("bob"));
  EXPECT_EQ(hidden.status, 404);
  EXPECT_EQ(json::parse(hidden.body)["code"], json::parse(unknown.body)["code"]);
  // carl may replace it; its creator stays ann.
  ASSERT_EQ(Call("PUT", "/scheduled-jobs/" + id, As("carl"), kScheduled, "application/json").status,
            200);
  auto stored = coordinator_->schedules().Get(id);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->created_by, "ann");
  EXPECT_EQ(stored->job.created_by, "ann");
}

TEST_F(AuthApiTest, AHiddenJobIsNotFoundExactlyAsAnUnknownOne) {
  std::string job = PermittedJob();
  Response hidden = Call("GET", "/jobs/" + job, As("bob"));
  std::string unknown_id(32, 'e');
  Response unknown = Call("GET", "/jobs/" + unknown_id, As("bob"));
  EXPECT_EQ(hidden.status, 404);
  EXPECT_EQ(unknown.status, 404);
  std::string text = hidden.body;
  text.replace(text.find(job), job.size(), unknown_id);
  EXPECT_EQ(text, unknown.body);
}

TEST_F(AuthApiTest, TheListShowsEachUserOnlyTheJobsTheyMaySee) {
  std::string guarded = PermittedJob();
  Response open =
      Call("POST", "/jobs", As("bob"), "name: open\ntasks:\n  - {name: t, run: ok}\n", "text/yaml");
  ASSERT_EQ(open.status, 200);
  std::string open_id = json::parse(open.body)["id"];
  auto ids = [&](const std::string& user) {
    json page = json::parse(Call("GET", "/jobs", As(user)).body);
    std::set<std::string> out;
    for (const json& item : page["items"]) out.insert(item["id"].get<std::string>());
    EXPECT_EQ(page["totalItems"].get<std::size_t>(), out.size());
    return out;
  };
  EXPECT_EQ(ids("bob"), (std::set<std::string>{open_id}));
  EXPECT_EQ(ids("carl"), (std::set<std::string>{open_id, guarded}));
  EXPECT_EQ(ids("dora"), (std::set<std::string>{open_id, guarded}));
  EXPECT_EQ(ids("root"), (std::set<std::string>{open_id, guarded}));
}

TEST_F(AuthApiTest, AJobRecordsItsCreatorFromTheCredentials) {
  std::string job = PermittedJob();
  json full = json::parse(Call("GET", "/jobs/" + job, As("carl")).body);
  EXPECT_EQ(full["createdBy"], (json{{"username", "ann"}}));
  EXPECT_EQ(full["permissions"], json::parse(R"([{"user":"carl"},{"role":"ops"}])"));
  Response forged = Call("POST", "/jobs", As("bob"),
                         "name: x\ncreatedBy: root\ntasks:\n  - {name: t, run: ok}\n", "text/yaml");
  EXPECT_EQ(forged.status, 400);
  EXPECT_THAT(forged.body, HasSubstr("createdBy: is set by the server"));
}

TEST_F(AuthApiTest, WrongPasswordsUnknownUsersAndRevokedKeysAre401) {
  EXPECT_EQ(Call("GET", "/jobs", Basic("ann", "nope")).status, 401);
  EXPECT_EQ(Call("GET", "/jobs", Basic("nobody", "x")).status, 401);
  EXPECT_EQ(Call("GET", "/jobs", "Bearer baton_" + std::string(64, '0')).status, 401);
  EXPECT_EQ(Call("GET", "/jobs", "Token abc").status, 401);
  Response created = Call("POST", "/keys", As("ann"), R"({"name":"ci"})", "application/json");
  ASSERT_EQ(created.status, 200) << created.body;
  json key = json::parse(created.body);
  std::string bearer = "Bearer " + key["key"].get<std::string>();
  EXPECT_EQ(Call("GET", "/jobs", bearer).status, 200);
  EXPECT_EQ(Call("DELETE", "/keys/" + key["id"].get<std::string>(), As("ann")).status, 200);
  Response revoked = Call("GET", "/jobs", bearer);
  EXPECT_EQ(revoked.status, 401);
  EXPECT_THAT(revoked.body, HasSubstr("revoked"));
}

TEST_F(AuthApiTest, PasswordsKeysAndHashesNeverAppearInAnswers) {
  Response user =
      Call("POST", "/users", As("root"),
           R"({"username":"erin","name":"Erin","password":"hunter2-secret","roles":["ops"]})",
           "application/json");
  ASSERT_EQ(user.status, 200) << user.body;
  EXPECT_THAT(user.body, Not(HasSubstr("hunter2-secret")));
  EXPECT_THAT(user.body, Not(HasSubstr("$2b$")));
  json u = json::parse(user.body);
  EXPECT_EQ(u["username"], "erin");
  EXPECT_EQ(u["name"], "Erin");
  EXPECT_EQ(u["roles"], json::parse(R"(["ops"])"));
  EXPECT_FALSE(u.contains("password"));
  // The new user's password works; a taken username is Tork's 400.
  EXPECT_EQ(Call("GET", "/jobs", Basic("erin", "hunter2-secret")).status, 200);
  EXPECT_EQ(Call("POST", "/users", As("root"), R"({"username":"erin","password":"x"})",
                 "application/json")
                .status,
            400);
  Response key = Call("POST", "/keys", Basic("erin", "hunter2-secret"), "{}", "application/json");
  ASSERT_EQ(key.status, 200);
  std::string secret = json::parse(key.body)["key"];
  Response list = Call("GET", "/keys", Basic("erin", "hunter2-secret"));
  EXPECT_EQ(list.status, 200);
  EXPECT_THAT(list.body, Not(HasSubstr(secret)));
  EXPECT_THAT(list.body, Not(HasSubstr(auth::Sha256Hex(secret))));
  // A wrong password is not echoed in the refusal.
  Response wrong = Call("GET", "/jobs", Basic("erin", "guess-me-123"));
  EXPECT_THAT(wrong.body, Not(HasSubstr("guess-me-123")));
}

TEST_F(AuthApiTest, UsersAreCheckedAsTorkChecksThem) {
  auto post = [&](const std::string& body) {
    return Call("POST", "/users", As("root"), body, "application/json");
  };
  auto message = [&](const std::string& body) {
    Response r = post(body);
    EXPECT_EQ(r.status, 400) << r.body;
    return json::parse(r.body).value("message", "");
  };
  EXPECT_EQ(message(R"({"password":"x"})"), "must provide username");
  EXPECT_EQ(message(R"({"username":"zed"})"), "must provide password");
  EXPECT_THAT(message(R"({"username":"a b","password":"x"})"), HasSubstr("may hold only"));
  EXPECT_EQ(message(R"({"username":"zed","password":"x","admin":true})"),
            "unknown field \"admin\"");
  EXPECT_EQ(message(R"({"username":"zed","password":"x","roles":"ops"})"),
            "roles: expected a list");
  EXPECT_EQ(post(R"({"username":"  zed ","password":"x"})").status, 200);  // trimmed
  EXPECT_EQ(datastore_->GetUser("zed")->username, "zed");
}

TEST_F(AuthApiTest, OnlyAnAdminManagesAnotherUsersKeys) {
  EXPECT_EQ(Call("POST", "/keys", As("bob"), R"({"username":"ann"})", "application/json").status,
            403);
  EXPECT_EQ(Call("POST", "/keys", As("root"), R"({"username":"ann"})", "application/json").status,
            200);
  Request r{.method = "GET", .path = "/keys"};
  r.query["username"] = "ann";
  r.headers["authorization"] = As("bob");
  EXPECT_EQ(api_->Handle(r).status, 403);
  r.headers["authorization"] = As("root");
  Response admin = api_->Handle(r);
  EXPECT_EQ(admin.status, 200);
  EXPECT_EQ(json::parse(admin.body).size(), 1u);
}

}  // namespace
}  // namespace baton::api

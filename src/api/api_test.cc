// The API over real HTTP, on an engine with a fake runtime; and a property test that
// no request, however malformed, gets a 5xx or crashes the handlers.
#include "api/api.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

#include "api/server.h"
#include "broker/inmemory/inmemory_broker.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "testing/fake_clock.h"
#include "testing/fake_runtime.h"
#include "testing/wait_for.h"
#include "worker/worker.h"

namespace baton::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class ApiTest : public ::testing::Test {
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
    api_ =
        std::make_unique<Api>(*coordinator_, *datastore_, broker_, ApiOptions{.version = "9.9.9"});
    server_ =
        std::make_unique<Server>(*api_, ServerOptions{.host = "127.0.0.1", .port = 0}, 4 << 20);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }

  void TearDown() override {
    server_->Stop();
    worker_->Stop(std::chrono::milliseconds(0));
    coordinator_->Stop();
  }

  json Body(const httplib::Result& r) {
    EXPECT_TRUE(r) << "no response";
    if (!r) return {};
    json j = json::parse(r->body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r->body;
    return j;
  }

  httplib::Result PostYaml(const std::string& yaml) {
    return client_->Post("/jobs", yaml, "text/yaml");
  }

  json WaitTerminal(const std::string& id) {
    json job;
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          job = Body(client_->Get("/jobs/" + id));
          std::string state = job.value("state", "");
          return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED";
        },
        std::chrono::seconds(10)));
    return job;
  }

  SystemClock clock_;
  std::unique_ptr<Timers> timers_;
  testing::FakeRuntime runtime_;
  InMemoryBroker broker_;
  std::unique_ptr<SqliteDatastore> datastore_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ApiTest, HealthIsUpWithTheVersion) {
  auto r = client_->Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Body(r), (json{{"status", "UP"}, {"version", "9.9.9"}}));
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
}

TEST_F(ApiTest, SubmitsYamlAndJsonAndReturnsAPendingSummary) {
  auto r = PostYaml(
      "name: hello\noutput: \"{{ tasks.g }}\"\ntasks:\n  - {name: t, var: g, run: ok hi}\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  json summary = Body(r);
  EXPECT_EQ(summary["name"], "hello");
  EXPECT_EQ(summary["id"].get<std::string>().size(), 32u);
  EXPECT_FALSE(summary.contains("tasks"));
  EXPECT_FALSE(summary.contains("execution"));
  json job = WaitTerminal(summary["id"]);
  EXPECT_EQ(job["state"], "COMPLETED");
  EXPECT_EQ(job["result"], "hi");
  EXPECT_EQ(job["execution"].size(), 1u);
  EXPECT_EQ(job["context"]["tasks"]["g"], "hi");

  auto j = client_->Post("/jobs", R"({"name":"j","tasks":[{"name":"t","run":"ok"}]})",
                         "application/json");
  ASSERT_TRUE(j);
  EXPECT_EQ(j->status, 200) << j->body;
}

TEST_F(ApiTest, ValidationErrorsListEveryProblemWithLines) {
  auto r = PostYaml("name: bad\ntasks:\n  - name: t\n    run: x\n    priority: 12\n    bogus: 1\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  json body = Body(r);
  EXPECT_EQ(body["code"], "INVALID_ARGUMENT");
  EXPECT_THAT(body["message"].get<std::string>(),
              HasSubstr("5:15: tasks[0].priority: must be between 0 and 9"));
  EXPECT_THAT(body["message"].get<std::string>(), HasSubstr("6:5: tasks[0].bogus: unknown field"));
  EXPECT_EQ(body["errors"].size(), 2u);
}

TEST_F(ApiTest, PlanAnswersAJobsStagesAndStoresNothing) {
  auto r = client_->Post("/jobs/plan",
                         "name: d\nmode: dag\ntasks:\n  - {name: a, run: x}\n"
                         "  - {name: b, run: x, needs: [a]}\n  - {name: c, run: x, needs: [a]}\n",
                         "text/yaml");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json plan = Body(r);
  EXPECT_EQ(plan["stages"], json::parse(R"([["a"], ["b", "c"]])"));
  EXPECT_EQ(plan["tasks"][0]["failureSkips"], json::parse(R"(["b", "c"])"));
  EXPECT_EQ(Body(client_->Get("/jobs"))["totalItems"], 0);
  auto bad = client_->Post(
      "/jobs/plan", "name: d\nmode: dag\ntasks:\n  - {name: a, run: x, needs: [z]}\n", "text/yaml");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(Body(bad)["message"].get<std::string>(),
              HasSubstr("4:31: tasks[0].needs[0]: no task of tasks is named \"z\""));
}

TEST_F(ApiTest, WarningsListOnlyTheOptionalFailuresNoLaterRowOfTheirSlotRanAgain) {
  Task flaky;
  flaky.name = "flaky";
  flaky.run = "true";
  flaky.optional = true;
  Task gone = flaky;
  gone.name = "gone";
  JobRecord job;
  job.id = NewId();
  job.state = JobState::kCompleted;
  job.created_at = Now();
  job.job.name = "warned";
  job.job.tasks = {flaky, gone};
  job.task_count = 2;
  job.position = 3;
  ASSERT_TRUE(datastore_->CreateJob(job).ok());
  auto row = [&](const Task& def, int position, TaskState state, int ms, std::string error) {
    TaskRecord r;
    r.id = NewId();
    r.job_id = job.id;
    r.position = position;
    r.state = state;
    r.task = def;
    r.created_at = job.created_at + std::chrono::milliseconds(ms);
    r.started_at = r.created_at;
    r.node_id = "n1";
    r.error = std::move(error);
    return r;
  };
  // flaky's first row was lost with the engine and ran again, completing; gone failed.
  for (const TaskRecord& r :
       {row(flaky, 1, TaskState::kFailed, 0, "the engine stopped while the task ran"),
        row(flaky, 1, TaskState::kCompleted, 5, ""),
        row(gone, 2, TaskState::kFailed, 10, "exit code 3")}) {
    ASSERT_TRUE(datastore_->CreateTask(r).ok());
  }
  json body = Body(client_->Get("/jobs/" + job.id));
  EXPECT_EQ(body["warnings"], json::parse(R"(["optional task \"gone\" failed: exit code 3"])"))
      << body.dump();
}

TEST_F(ApiTest, WrongContentTypeIs415AndHugeBodyIs413) {
  auto r = client_->Post("/jobs", "name: x", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415);
  EXPECT_THAT(Body(r)["message"].get<std::string>(), HasSubstr("unsupported content type"));
  std::string huge(5 << 20, 'x');
  auto big = client_->Post("/jobs", huge, "text/yaml");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_TRUE(Body(big).contains("message"));
}

TEST_F(ApiTest, WaitReturnsTheFinishedJobOr408) {
  auto r = PostYaml("name: w\nwait: {timeout: 10s}\ntasks:\n  - {name: t, run: ok done}\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  json job = Body(r);
  EXPECT_EQ(job["state"], "COMPLETED");
  EXPECT_TRUE(job.contains("execution"));
  auto slow = PostYaml("name: w\nwait: {timeout: 200ms}\ntasks:\n  - {name: hanging, run: hang}\n");
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->status, 408);
  EXPECT_EQ(Body(slow)["code"], "DEADLINE_EXCEEDED");
  runtime_.Release("hanging");
}

TEST_F(ApiTest, CancelAndRestartFollowTheStateRules) {
  json job = Body(PostYaml("name: c\ntasks:\n  - {name: long, run: hang}\n"));
  std::string id = job["id"];
  ASSERT_TRUE(testing::WaitFor([&] { return runtime_.running() == 1; }));
  auto restart_running = client_->Put("/jobs/" + id + "/restart");
  ASSERT_TRUE(restart_running);
  EXPECT_EQ(restart_running->status, 400);
  auto cancel = client_->Put("/jobs/" + id + "/cancel");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 200);
  EXPECT_EQ(Body(cancel), (json{{"status", "OK"}}));
  EXPECT_EQ(WaitTerminal(id)["state"], "CANCELLED");
  auto again = client_->Put("/jobs/" + id + "/cancel");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 400);
  ASSERT_TRUE(testing::WaitFor([&] { return runtime_.running() == 0; }));
  runtime_.Release("long");
  auto restart = client_->Put("/jobs/" + id + "/restart");
  ASSERT_TRUE(restart);
  EXPECT_EQ(restart->status, 200);
  EXPECT_EQ(WaitTerminal(id)["state"], "COMPLETED");
}

TEST_F(ApiTest, SecretsAreRedactedInJobsTasksAndLogs) {
  json job = Body(PostYaml(R"(
name: secret
secrets: {api: s3cr3t-value}
output: "{{ tasks.echo }}"
tasks:
  - name: echo
    var: echo
    env: {API: "{{ secrets.api }}", DB_PASSWORD: hunter2}
    run: ok s3cr3t-value and hunter2
)"));
  json done = WaitTerminal(job["id"]);
  std::string text = done.dump();
  EXPECT_EQ(text.find("s3cr3t-value"), std::string::npos) << text;
  EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
  EXPECT_EQ(done["result"], "[REDACTED] and [REDACTED]");
  std::string task_id = done["execution"][0]["id"];
  std::string task = client_->Get("/tasks/" + task_id)->body;
  EXPECT_EQ(task.find("s3cr3t-value"), std::string::npos) << task;
  ASSERT_TRUE(testing::WaitFor([&] {
    return Body(client_->Get("/jobs/" + done["id"].get<std::string>() + "/log"))["totalItems"] == 1;
  }));
  auto log = datastore_->TaskLogParts(task_id, 1, 10);
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->items.size(), 1u);
}

// An env value under a secret-looking key that comes from a template: the evaluated value
// is hidden, not the template text. The fake runtime logs the evaluated name and returns
// the evaluated run text, so the token reaches a log line, a result and an error.
TEST_F(ApiTest, EvaluatedSecretEnvValuesAreRedactedEverywhere) {
  const std::string token = "tok-4f9a1c77e2";
  auto submitted = PostYaml(R"(
name: templated secret
inputs: {token: tok-4f9a1c77e2}
tasks:
  - name: "echo {{ inputs.token }}"
    env: {API_TOKEN: "{{ inputs.token }}"}
    run: "ok {{ inputs.token }}"
  - name: "fail {{ inputs.token }}"
    env: {API_TOKEN: "{{ inputs.token }}"}
    run: "fail bad token {{ inputs.token }}"
)");
  ASSERT_TRUE(submitted);
  EXPECT_EQ(submitted->body.find(token), std::string::npos) << submitted->body;
  std::string id = Body(submitted)["id"];
  json done = WaitTerminal(id);
  EXPECT_EQ(done["state"], "FAILED");
  ASSERT_EQ(done["execution"].size(), 2u);
  // Stored: the log parts as the coordinator wrote them.
  ASSERT_TRUE(
      testing::WaitFor([&] { return datastore_->JobLogParts(id, 1, 10)->total_items == 2; }));
  auto stored = datastore_->JobLogParts(id, 1, 10);
  ASSERT_TRUE(stored.ok());
  for (const LogPart& part : stored->items) {
    EXPECT_EQ(part.contents.find(token), std::string::npos) << part.contents;
    EXPECT_NE(part.contents.find("[REDACTED]"), std::string::npos) << part.contents;
  }
  // Every endpoint that shows the job, its tasks or their logs.
  std::vector<std::string> paths = {"/jobs/" + id, "/jobs/" + id + "/log", "/jobs",
                                    "/jobs?q=templated"};
  for (const json& row : done["execution"]) {
    paths.push_back("/tasks/" + row["id"].get<std::string>());
    paths.push_back("/tasks/" + row["id"].get<std::string>() + "/log");
  }
  for (const std::string& path : paths) {
    auto r = client_->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->body.find(token), std::string::npos) << path << ": " << r->body;
  }
  EXPECT_EQ(done["execution"][0]["result"], "[REDACTED]");
  EXPECT_EQ(done["execution"][1]["error"], "bad token [REDACTED]");
}

// Like `curl -X PUT .../cancel`: no body and no Content-Length. It must be answered at
// once, not after the read timeout.
TEST_F(ApiTest, BodylessPutIsAnsweredAtOnce) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string request = "PUT /jobs/" + std::string(32, 'c') +
                        "/cancel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  auto start = std::chrono::steady_clock::now();
  std::string response;
  char buf[1024];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) response.append(buf, static_cast<std::size_t>(n));
  close(fd);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_THAT(response, ::testing::StartsWith("HTTP/1.1 404"));
  EXPECT_THAT(response, HasSubstr("\"code\":\"NOT_FOUND\""));
}

TEST_F(ApiTest, ListsJobsWithPagingAndSearch) {
  for (int i = 0; i < 3; ++i) {
    PostYaml("name: listed " + std::to_string(i) +
             "\ntags: [blue]\ntasks:\n  - {name: t, run: ok}\n");
  }
  PostYaml("name: other\ntasks:\n  - {name: t, run: ok}\n");
  json page = Body(client_->Get("/jobs?size=2&page=1"));
  EXPECT_EQ(page["size"], 2);
  EXPECT_EQ(page["items"].size(), 2u);
  EXPECT_EQ(page["totalItems"], 4);
  EXPECT_EQ(page["totalPages"], 2);
  json last = Body(client_->Get("/jobs?size=3&page=2"));
  EXPECT_EQ(last["size"], 1);  // the items in it, as Tork's pages say
  EXPECT_EQ(last["items"].size(), 1u);
  EXPECT_EQ(last["number"], 2);
  json tagged = Body(client_->Get("/jobs?q=tag:blue"));
  EXPECT_EQ(tagged["totalItems"], 3);
  json named = Body(client_->Get("/jobs?q=other"));
  EXPECT_EQ(named["totalItems"], 1);
  EXPECT_EQ(client_->Get("/jobs?page=0")->status, 400);
  EXPECT_EQ(client_->Get("/jobs?size=500")->status, 400);
  EXPECT_EQ(client_->Get("/jobs?size=abc")->status, 400);
}

TEST_F(ApiTest, UnknownIdsAndPathsAre404) {
  EXPECT_EQ(client_->Get("/jobs/" + std::string(32, 'a'))->status, 404);
  EXPECT_EQ(client_->Get("/jobs/not-an-id")->status, 404);
  EXPECT_EQ(client_->Get("/tasks/zzz")->status, 404);
  EXPECT_EQ(client_->Put("/jobs/" + std::string(32, 'b') + "/cancel")->status, 404);
  auto r = client_->Get("/nope");
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Body(r)["code"], "NOT_FOUND");
}

TEST_F(ApiTest, QueuesNodesAndMetrics) {
  json queues = Body(client_->Get("/queues"));
  ASSERT_TRUE(queues.is_array());
  bool has_default = false;
  for (const auto& q : queues) has_default = has_default || q["name"] == "default";
  EXPECT_TRUE(has_default);
  EXPECT_EQ(Body(client_->Get("/queues/default"))["subscribers"], 1);
  ASSERT_TRUE(testing::WaitFor([&] { return Body(client_->Get("/nodes")).size() == 1; }));
  json node = Body(client_->Get("/nodes"))[0];
  EXPECT_EQ(node["status"], "UP");
  EXPECT_EQ(node["queue"], "default:4");
  json metrics = Body(client_->Get("/metrics"));
  EXPECT_TRUE(metrics["jobs"].contains("running"));
  EXPECT_EQ(metrics["nodes"]["online"], 1);
}

TEST_F(ApiTest, DryRunValidatesWithoutStoringAndListsProblemsByLine) {
  auto ok = client_->Post("/jobs?dryRun=true", "name: checked\ntasks:\n  - {name: t, run: ok}\n",
                          "text/yaml");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(Body(ok), (json{{"valid", true}, {"name", "checked"}, {"taskCount", 1}}));
  auto bad = client_->Post("/jobs?dryRun=true",
                           "name: x\ntasks:\n  - name: a\n    run: ok\n  - nme: b\n", "text/yaml");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  json errors = Body(bad)["errors"];
  ASSERT_FALSE(errors.empty());
  for (const json& e : errors) EXPECT_EQ(e["line"], 5) << e.dump();
  EXPECT_EQ(
      client_->Post("/jobs?dryRun=maybe", "name: x\ntasks:\n  - {name: t, run: ok}\n", "text/yaml")
          ->status,
      400);
  // Nothing was stored.
  EXPECT_EQ(Body(client_->Get("/jobs"))["totalItems"], 0);
  auto scheduled = client_->Post(
      "/scheduled-jobs?dryRun=true",
      R"({"name":"s","schedule":{"cron":"0 0 * * *"},"tasks":[{"name":"t","run":"ok"}]})",
      "application/json");
  ASSERT_TRUE(scheduled);
  EXPECT_EQ(scheduled->status, 200) << scheduled->body;
  EXPECT_EQ(Body(client_->Get("/scheduled-jobs"))["totalItems"], 0);
  auto bad_cron = client_->Post(
      "/scheduled-jobs?dryRun=true",
      R"({"name":"s","schedule":{"cron":"61 0 * * *"},"tasks":[{"name":"t","run":"ok"}]})",
      "application/json");
  ASSERT_TRUE(bad_cron);
  EXPECT_EQ(bad_cron->status, 400) << bad_cron->body;
}

TEST_F(ApiTest, StateFilterListsOnlyJobsInThoseStatesAndRefusesUnknownStates) {
  std::string done = Body(PostYaml("name: done\ntasks:\n  - {name: t, run: ok}\n"))["id"];
  std::string failed = Body(PostYaml("name: failed\ntasks:\n  - {name: t, run: fail no}\n"))["id"];
  EXPECT_EQ(WaitTerminal(done)["state"], "COMPLETED");
  EXPECT_EQ(WaitTerminal(failed)["state"], "FAILED");
  json only_failed = Body(client_->Get("/jobs?state=FAILED"));
  EXPECT_EQ(only_failed["totalItems"], 1);
  EXPECT_EQ(only_failed["items"][0]["id"], failed);
  EXPECT_EQ(Body(client_->Get("/jobs?state=FAILED,COMPLETED"))["totalItems"], 2);
  EXPECT_EQ(Body(client_->Get("/jobs?state=RUNNING"))["totalItems"], 0);
  // With a search: both conditions.
  EXPECT_EQ(Body(client_->Get("/jobs?state=FAILED,COMPLETED&q=done"))["totalItems"], 1);
  auto unknown = client_->Get("/jobs?state=FAILED,NOPE");
  EXPECT_EQ(unknown->status, 400);
  EXPECT_THAT(Body(unknown)["message"].get<std::string>(), HasSubstr("NOPE"));
}

TEST_F(ApiTest, WhoAmIWithoutAuthenticationSaysItIsOff) {
  EXPECT_EQ(Body(client_->Get("/whoami")),
            (json{{"username", ""}, {"roles", json::array()}, {"authEnabled", false}}));
}

TEST_F(ApiTest, MetricsCountJobsEndedInTheLastHour) {
  std::string done = Body(PostYaml("name: done\ntasks:\n  - {name: t, run: ok}\n"))["id"];
  std::string failed = Body(PostYaml("name: failed\ntasks:\n  - {name: t, run: fail no}\n"))["id"];
  WaitTerminal(done);
  WaitTerminal(failed);
  json metrics = Body(client_->Get("/metrics"));
  EXPECT_EQ(metrics["jobs"]["failedLastHour"], 1);
  EXPECT_EQ(metrics["jobs"]["endedLastHour"], 2);
  EXPECT_EQ(metrics["queues"]["size"], 0);
}

TEST_F(ApiTest, ServesTheEmbeddedWebUiAtTheRootAndRevalidatesIt) {
  auto root = client_->Get("/");
  ASSERT_TRUE(root);
  ASSERT_EQ(root->status, 200) << root->body;
  EXPECT_THAT(root->get_header_value("Content-Type"), HasSubstr("text/html"));
  EXPECT_THAT(root->body, HasSubstr("<div id=\"app\">"));
  EXPECT_THAT(root->get_header_value("Content-Security-Policy"), HasSubstr("default-src 'self'"));
  EXPECT_EQ(root->get_header_value("Cache-Control"), "no-cache");
  std::string etag = root->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = client_->Get("/", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  // Every script the page names is served, cacheable for good.
  std::size_t at = root->body.find("assets/");
  ASSERT_NE(at, std::string::npos);
  std::string asset = root->body.substr(at, root->body.find('"', at) - at);
  auto script = client_->Get("/" + asset);
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200) << asset;
  EXPECT_THAT(script->get_header_value("Cache-Control"), HasSubstr("immutable"));
  EXPECT_FALSE(script->body.empty());
  EXPECT_EQ(client_->Get("/assets/nope.js")->status, 404);
  // HEAD as GET, without the body (curl -I).
  auto head = client_->Head("/");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_THAT(head->get_header_value("Content-Type"), HasSubstr("text/html"));
  EXPECT_TRUE(head->body.empty());
  EXPECT_EQ(client_->Head("/health")->status, 200);
  EXPECT_EQ(client_->Head("/events")->status, 200);
  EXPECT_EQ(client_->Get("/assets/..%2Findex.html")->status, 404);
}

// Reads an event stream over a raw socket (httplib's client buffers whole answers).
class RawStream {
 public:
  RawStream(int port, const std::string& path) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n";
    connected_ = connected_ && send(fd_, request.data(), request.size(), 0) ==
                                   static_cast<ssize_t>(request.size());
    timeval tv{.tv_sec = 0, .tv_usec = 100000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawStream() { close(fd_); }
  // Reads until `text` has come, or 10 s; returns whether it came.
  bool ReadUntil(const std::string& text) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (connected_ && received_.find(text) == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) break;
      if (n > 0) received_.append(buf, static_cast<std::size_t>(n));
    }
    return received_.find(text) != std::string::npos;
  }
  // Whether the server closed the connection within 10 s.
  bool Closed() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n > 0) received_.append(buf, static_cast<std::size_t>(n));
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    }
    return false;
  }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

TEST_F(ApiTest, EventsStreamEveryJobsStateChangesOverHttp) {
  RawStream all(server_->port(), "/events");
  ASSERT_TRUE(all.ReadUntil(": connected\n\n")) << all.received();
  EXPECT_THAT(all.received(), HasSubstr("Content-Type: text/event-stream"));
  EXPECT_THAT(all.received(), ::testing::Not(HasSubstr("Content-Length")));
  std::string id = Body(PostYaml("name: streamed\ntasks:\n  - {name: t, run: ok}\n"))["id"];
  ASSERT_TRUE(all.ReadUntil("\"state\":\"COMPLETED\"")) << all.received();
  EXPECT_THAT(all.received(), HasSubstr("event: job\ndata: {\"jobId\":\"" + id + "\""));
  EXPECT_THAT(all.received(), HasSubstr("event: task\ndata: {\"jobId\":\"" + id + "\""));
  // A job's stream without its job's changes: no log parts.
  EXPECT_THAT(all.received(), ::testing::Not(HasSubstr("event: log")));
  // The stream ends when the server stops.
  server_->Stop();
  EXPECT_TRUE(all.Closed());
}

TEST_F(ApiTest, EventsOfOneJobCarryItsLogPartsAndNoOtherJobs) {
  std::string id =
      Body(PostYaml("name: one\ntasks:\n  - {name: first, run: hang}\n  - {name: second, run: "
                    "ok}\n"))["id"];
  ASSERT_TRUE(testing::WaitFor([&] { return runtime_.ran().size() == 1; }));
  RawStream one(server_->port(), "/events?job=" + id);
  ASSERT_TRUE(one.ReadUntil(": connected\n\n")) << one.received();
  std::string other = Body(PostYaml("name: other\ntasks:\n  - {name: t, run: ok}\n"))["id"];
  WaitTerminal(other);
  runtime_.Release("first");
  // Log parts come their own way (from the worker through the broker): in any order with
  // the job's end.
  ASSERT_TRUE(one.ReadUntil("event: log\ndata: {\"contents\":\"running second\\n\""))
      << one.received();
  ASSERT_TRUE(one.ReadUntil("\"state\":\"COMPLETED\",\"taskCount\":2")) << one.received();
  EXPECT_THAT(one.received(), ::testing::Not(HasSubstr(other)));
  EXPECT_EQ(client_->Get("/events?job=" + std::string(32, 'a'))->status, 404);
  EXPECT_EQ(client_->Get("/events?logs=perhaps")->status, 400);
}

// Random requests: any method, path, query and body. None may get a 5xx.
TEST_F(ApiTest, MalformedRequestsNeverGetA5xx) {
  std::mt19937 rng(42);
  const std::vector<std::string> methods = {"GET", "POST", "PUT", "DELETE", "PATCH"};
  const std::vector<std::string> paths = {"/jobs",
                                          "/jobs/",
                                          "/jobs/x",
                                          "/jobs/" + std::string(32, 'f'),
                                          "/jobs//log",
                                          "/tasks",
                                          "/tasks/1/log",
                                          "/queues/%00",
                                          "/nodes/x",
                                          "/metrics",
                                          "/health",
                                          "/jobs/../etc",
                                          ""};
  const std::vector<std::string> bodies = {
      "",
      "{",
      "[]",
      "null",
      "{\"name\": 1}",
      "name: [",
      "\xff\xfe",
      "{\"tasks\": {}}",
      "name: j\ntasks: 7",
      std::string(1000, '['),
      "{\"name\":\"j\",\"tasks\":[{\"name\":\"t\",\"retry\":{\"limit\":\"x\"}}]}"};
  const std::vector<std::string> types = {"", "application/json", "text/yaml", "text/plain",
                                          "application/x-yaml; charset=utf-8"};
  const std::vector<std::string> values = {"",  "0",    "-1", "abc", "99999999999999",
                                           "1", "tag:", "%"};
  for (int i = 0; i < 2000; ++i) {
    Request request;
    request.method = methods[rng() % methods.size()];
    request.path = paths[rng() % paths.size()];
    if (rng() % 3 == 0) {
      request.path += "/" + std::to_string(rng());
    }
    for (const char* key : {"page", "size", "q"}) {
      if (rng() % 2) request.query[key] = values[rng() % values.size()];
    }
    request.content_type = types[rng() % types.size()];
    request.body = bodies[rng() % bodies.size()];
    Response response = api_->Handle(request);
    ASSERT_LT(response.status, 500)
        << request.method << " " << request.path << " " << response.body;
    // The UI's page and the event stream are the only answers that are not JSON.
    if (response.content_type != "application/json") {
      ASSERT_EQ(request.method, "GET") << request.path;
      ASSERT_TRUE(response.content_type.starts_with("text/html") ||
                  response.content_type == "text/event-stream")
          << request.path << " " << response.content_type;
      continue;
    }
    json body = json::parse(response.body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << response.body;
    if (response.status >= 400) ASSERT_TRUE(body.contains("message")) << response.body;
  }
}

// Issue 14, item 3: a small body whose YAML aliases repeat one big string. It is refused
// as it is converted, before the expanded job is built or stored.
TEST_F(ApiTest, YamlAliasBombIs413WithTheLimitAndStoresNothing) {
  std::string yaml = "name: bomb\ninputs:\n  a: &big " + std::string(1 << 20, 'x') + "\n";
  for (int i = 0; i < 20; ++i) yaml += "  b" + std::to_string(i) + ": *big\n";
  yaml += "tasks:\n  - {name: t, run: ok}\n";
  auto start = std::chrono::steady_clock::now();
  auto r = PostYaml(yaml);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body.substr(0, 300);
  EXPECT_THAT(Body(r).value("message", ""),
              HasSubstr("expands to more than 8388608 bytes of text (a YAML alias counts each "
                        "time it is used); the limit is api.max_document_bytes"));
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(Body(client_->Get("/jobs"))["totalItems"], 0);
}

// Issue 14, item 8: no search, page or size a client can send reaches the datastore as a
// 5xx (SQLite refused ~1,000 words with "Expression tree is too large").
TEST_F(ApiTest, HostileSearchesArePagedOr400NeverA5xx) {
  ASSERT_EQ(PostYaml("name: findme\ntasks:\n  - {name: t, run: ok}\n")->status, 200);
  auto repeat = [](const std::string& word, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += (i ? " " : "") + word;
    return out;
  };
  const std::vector<std::string> qs = {"",
                                       " ",
                                       " \t\n ",
                                       repeat("word", 1100),
                                       repeat("tag:x", 1100),
                                       repeat("w", 100),
                                       repeat("tag:x", 100),
                                       repeat("a", 101),
                                       "tag:",
                                       "tag:tag:",
                                       "tag:%",
                                       std::string(100'000, 'a'),
                                       std::string(5000, '%'),
                                       "%",
                                       "_",
                                       "\\",
                                       "%_\\",
                                       "\\%",
                                       "'",
                                       "\"",
                                       "''''",
                                       "' OR 1=1 --",
                                       "\"; DROP TABLE jobs; --",
                                       "findme",
                                       "FINDME pending",
                                       "\xff\xfe",
                                       "a\xc3",
                                       "\xc0\xaf",
                                       "\xed\xa0\x80",
                                       std::string("a\0b", 3),
                                       "\xef\xbc\xa1\xef\xbc\xa2",
                                       "*",
                                       "?{1}",
                                       "$1",
                                       "json_each",
                                       "null",
                                       std::string(4096, 'b'),
                                       std::string(4097, 'b')};
  const std::vector<std::string> numbers = {
      "",         "0",       "-1",      "1",          "2",          "100",
      "101",      "1000000", "1000001", "2147483647", "2147483648", "99999999999999999999",
      "abc",      "1e3",     " 1",      "+1",         "0x10",       "1.5",
      "\xd9\xa1", "%00"};
  auto check = [&](const std::string& q, const std::string& page, const std::string& size) {
    Request request{.method = "GET", .path = "/jobs"};
    request.query["q"] = q;
    if (!page.empty()) request.query["page"] = page;
    if (!size.empty()) request.query["size"] = size;
    Response response = api_->Handle(request);
    EXPECT_TRUE(response.status == 200 || response.status == 400)
        << response.status << " for q of " << q.size() << " bytes \"" << q.substr(0, 40)
        << "\", page \"" << page << "\", size \"" << size << "\": " << response.body.substr(0, 300);
    return response;
  };
  for (const std::string& q : qs) {
    for (const char* page : {"", "1", "1000000", "0"}) {
      for (const char* size : {"", "100", "-1"}) check(q, page, size);
    }
  }
  for (const std::string& page : numbers) {
    for (const std::string& size : numbers) check("findme", page, size);
  }
  // The limits, stated.
  EXPECT_EQ(check(repeat("w", 100), "", "").status, 200);
  Response words = check(repeat("w", 101), "", "");
  EXPECT_EQ(words.status, 400);
  EXPECT_EQ(json::parse(words.body).value("message", ""), "q has 101 words; the limit is 100");
  EXPECT_EQ(check(std::string(4096, 'b'), "", "").status, 200);
  Response bytes = check(std::string(4097, 'b'), "", "");
  EXPECT_EQ(bytes.status, 400);
  EXPECT_EQ(json::parse(bytes.body).value("message", ""), "q is 4097 bytes; the limit is 4096");
  Response utf8 = check("a\xc3", "", "");
  EXPECT_EQ(utf8.status, 400);
  EXPECT_EQ(json::parse(utf8.body).value("message", ""),
            "q is not valid UTF-8 (a bad byte at offset 1)");
  Response found = check("findme", "", "");
  EXPECT_EQ(json::parse(found.body).value("totalItems", 0), 1);
}

// autoDelete over the API, with a fake clock: the coordinator's sweep deletes a job, its
// tasks, its logs and its sub-jobs once its time has come, and not before.
class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
    ASSERT_TRUE(ds.ok());
    datastore_ = std::move(*ds);
    CoordinatorOptions options;
    options.lease = std::chrono::hours(24);  // the fake hours that pass kill no worker
    options.auto_delete_interval = sweep_interval_;
    options.lease_check_interval = sweep_interval_;
    // Looks for scheduled ticks at most this far apart too (ticks of scheduled jobs made
    // through this coordinator are looked for at their time).
    options.schedules.max_idle = sweep_interval_;
    coordinator_ = std::make_unique<Coordinator>(*datastore_, broker_, clock_, clock_, options);
    WorkerOptions worker;
    worker.queues = {{"default", 2}};
    worker_ = std::make_unique<Worker>(broker_, runtime_, clock_, worker);
    ASSERT_TRUE(worker_->Start().ok());
    ASSERT_TRUE(coordinator_->Start({worker_->node_id()}).ok());
    api_ = std::make_unique<Api>(*coordinator_, *datastore_, broker_, ApiOptions{.version = "1"});
  }
  void TearDown() override {
    worker_->Stop(std::chrono::milliseconds(0));
    coordinator_->Stop();
  }

  Response Get(const std::string& path) { return api_->Handle({.method = "GET", .path = path}); }
  std::string Submit(const std::string& yaml) {
    Response r = api_->Handle(
        {.method = "POST", .path = "/jobs", .content_type = "text/yaml", .body = yaml});
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body).value("id", "");
  }
  std::string StateOf(const std::string& id) {
    return json::parse(Get("/jobs/" + id).body).value("state", "");
  }

  Response Delete(const std::string& path) {
    return api_->Handle({.method = "DELETE", .path = path});
  }

  std::chrono::milliseconds sweep_interval_ = std::chrono::minutes(1);
  testing::FakeClock clock_;
  testing::FakeRuntime runtime_;
  InMemoryBroker broker_;
  std::unique_ptr<SqliteDatastore> datastore_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Api> api_;
};

TEST_F(RetentionTest, AJobIsDeletedWithItsTasksLogsAndSubJobsOnceItsAutoDeleteTimeHasCome) {
  std::string doomed = Submit(R"(
name: doomed
autoDelete: {after: 1h}
tasks:
  - {name: first, run: ok one}
  - name: child
    subjob:
      name: inner
      tasks:
        - {name: inner task, run: ok two}
)");
  std::string kept = Submit("name: kept\ntasks:\n  - {name: only, run: ok}\n");
  ASSERT_TRUE(testing::WaitFor([&] { return StateOf(doomed) == "COMPLETED"; }));
  ASSERT_TRUE(testing::WaitFor([&] { return StateOf(kept) == "COMPLETED"; }));
  auto rows = datastore_->JobTasks(doomed);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  std::string task_id = rows->front().id;
  std::string subjob_id = rows->back().subjob_id;
  ASSERT_FALSE(subjob_id.empty());
  auto inner_rows = datastore_->JobTasks(subjob_id);
  ASSERT_TRUE(inner_rows.ok());
  ASSERT_EQ(inner_rows->size(), 1u);
  std::string inner_task_id = inner_rows->front().id;
  ASSERT_TRUE(
      testing::WaitFor([&] { return datastore_->JobLogParts(doomed, 1, 10)->total_items == 1; }));
  ASSERT_TRUE(testing::WaitFor(
      [&] { return datastore_->JobLogParts(subjob_id, 1, 10)->total_items == 1; }));
  json job = json::parse(Get("/jobs/" + doomed).body);
  EXPECT_TRUE(job.contains("deleteAt")) << job.dump();

  // Before its time, sweeps (one a minute) leave it.
  clock_.Advance(std::chrono::minutes(59));
  EXPECT_EQ(Get("/jobs/" + doomed).status, 200);
  EXPECT_EQ(Get("/tasks/" + task_id).status, 200);
  EXPECT_EQ(Get("/jobs/" + subjob_id).status, 200);
  EXPECT_EQ(datastore_->JobLogParts(doomed, 1, 10)->total_items, 1);

  clock_.Advance(std::chrono::minutes(2));
  EXPECT_EQ(Get("/jobs/" + doomed).status, 404);
  EXPECT_EQ(Get("/jobs/" + doomed + "/log").status, 404);
  EXPECT_EQ(Get("/tasks/" + task_id).status, 404);
  EXPECT_EQ(Get("/tasks/" + task_id + "/log").status, 404);
  EXPECT_TRUE(datastore_->JobTasks(doomed)->empty());
  EXPECT_EQ(datastore_->JobLogParts(doomed, 1, 10)->total_items, 0);
  // The sub-job went with its parent: nothing is left that no link reaches.
  EXPECT_EQ(Get("/jobs/" + subjob_id).status, 404);
  EXPECT_EQ(Get("/tasks/" + inner_task_id).status, 404);
  EXPECT_EQ(datastore_->JobLogParts(subjob_id, 1, 10)->total_items, 0);
  // A job without autoDelete stays.
  EXPECT_EQ(Get("/jobs/" + kept).status, 200);
  // A sweep that finds nothing more to do deletes nothing.
  EXPECT_EQ(*coordinator_->DeleteDueJobs(), 0);
}

// Tork's datastore.retention with its defaults (logs 168 h, jobs 8,760 h): sweeps are
// rare here (every 1,000 h), and SweepRetention is called at the moments that matter.
class LongRetentionTest : public RetentionTest {
 protected:
  LongRetentionTest() { sweep_interval_ = std::chrono::hours(1000); }
};

TEST_F(LongRetentionTest, DeletesExactlyTheLogPartsAndFinishedJobsPastTheirRetention) {
  std::string old = Submit("name: old\ntasks:\n  - {name: t, run: ok one}\n");
  ASSERT_TRUE(testing::WaitFor([&] { return StateOf(old) == "COMPLETED"; }));
  ASSERT_TRUE(
      testing::WaitFor([&] { return datastore_->JobLogParts(old, 1, 10)->total_items == 1; }));
  clock_.Advance(std::chrono::hours(100));
  std::string young = Submit("name: young\ntasks:\n  - {name: t, run: ok two}\n");
  ASSERT_TRUE(testing::WaitFor([&] { return StateOf(young) == "COMPLETED"; }));
  ASSERT_TRUE(
      testing::WaitFor([&] { return datastore_->JobLogParts(young, 1, 10)->total_items == 1; }));

  // 168 h after the old job's log, less a minute: everything stays.
  clock_.Advance(std::chrono::hours(68) - std::chrono::minutes(1));
  ASSERT_TRUE(coordinator_->SweepRetention().ok());
  EXPECT_EQ(datastore_->JobLogParts(old, 1, 10)->total_items, 1);
  // Two minutes later: the old job's log is past 168 h, the young one's is not.
  clock_.Advance(std::chrono::minutes(2));
  auto swept = coordinator_->SweepRetention();
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(datastore_->JobLogParts(old, 1, 10)->total_items, 0);
  EXPECT_EQ(datastore_->JobLogParts(young, 1, 10)->total_items, 1);
  EXPECT_EQ(Get("/jobs/" + old).status, 200);  // the job itself is kept a year

  // A year after the old job was created, less a minute: both jobs stay.
  clock_.Advance(std::chrono::hours(8760 - 168) - std::chrono::minutes(2));
  ASSERT_TRUE(coordinator_->SweepRetention().ok());
  EXPECT_EQ(Get("/jobs/" + old).status, 200);
  clock_.Advance(std::chrono::minutes(2));
  ASSERT_TRUE(coordinator_->SweepRetention().ok());
  EXPECT_EQ(Get("/jobs/" + old).status, 404);
  EXPECT_TRUE(datastore_->JobTasks(old)->empty());
  EXPECT_EQ(Get("/jobs/" + young).status, 200);
  auto again = coordinator_->SweepRetention();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->log_parts, 0);
  EXPECT_EQ(again->jobs, 0);
}

// Job states and positions as Tork's clients see them, over the same engine.
using TorkStatesTest = RetentionTest;

TEST_F(TorkStatesTest, PostAnswersPendingAJobIsScheduledUntilATaskStartsThenRunning) {
  Response r = api_->Handle({"POST",
                             "/jobs",
                             {},
                             "text/yaml",
                             "name: parked\ntasks:\n  - {name: t, run: ok, queue: nowhere}\n"});
  ASSERT_EQ(r.status, 200) << r.body;
  json answer = json::parse(r.body);
  EXPECT_EQ(answer["state"], "PENDING");
  EXPECT_FALSE(answer.contains("startedAt"));
  std::string parked = answer["id"];
  // No worker reads its queue: started (its task dispatched), none of its tasks running.
  EXPECT_EQ(StateOf(parked), "SCHEDULED");
  std::string running = Submit("name: long\ntasks:\n  - {name: t, run: hang}\n");
  ASSERT_TRUE(testing::WaitFor([&] { return StateOf(running) == "RUNNING"; }));
  runtime_.Release("t");
  ASSERT_TRUE(testing::WaitFor([&] { return StateOf(running) == "COMPLETED"; }));
  json done = json::parse(Get("/jobs/" + running).body);
  EXPECT_EQ(done["position"], 2);  // taskCount + 1
  EXPECT_EQ(done["taskCount"], 1);
}

TEST_F(TorkStatesTest, DeleteQueueDeletesAnIdleTaskQueueAndRefusesTheRest) {
  ASSERT_TRUE(broker_.Publish("idle", "waiting").ok());
  Response ok = Delete("/queues/idle");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(broker_.Queue("idle").status().code(), StatusCode::kNotFound);
  for (const char* engine : {"x-jobs", "x-completed", "jobs", "x-anything"}) {
    Response r = Delete(std::string("/queues/") + engine);
    EXPECT_EQ(r.status, 400) << engine << ": " << r.body;
    EXPECT_NE(r.body.find("the engine's own"), std::string::npos) << r.body;
  }
  EXPECT_EQ(Delete("/queues/nowhere").status, 404);
  // The worker reads it.
  Response busy = Delete("/queues/default");
  EXPECT_EQ(busy.status, 400) << busy.body;
  EXPECT_NE(busy.body.find("stop the workers that read it first"), std::string::npos);
  EXPECT_TRUE(broker_.Queue("default").ok());
}

TEST_F(TorkStatesTest, ALoopOverTheEnginesLimitIsRefusedWhereItIsWithTheLimit) {
  ApiOptions options{.version = "1"};
  options.max_loop_iterations = 10;
  Api api(*coordinator_, *datastore_, broker_, options);
  const std::string job =
      "name: j\ntasks:\n  - name: poll\n    loop:\n      max: 50\n"
      "      tasks: [{name: check, run: \"true\"}]\n";
  auto post = [](std::string path, std::string body, std::map<std::string, std::string> query) {
    Request r;
    r.method = "POST";
    r.path = std::move(path);
    r.query = std::move(query);
    r.content_type = "text/yaml";
    r.body = std::move(body);
    return r;
  };
  for (auto [path, query] :
       {std::pair<std::string, std::map<std::string, std::string>>{"/jobs", {}},
        {"/jobs", {{"dryRun", "true"}}},
        {"/jobs/plan", {}}}) {
    Response r = api.Handle(post(path, job, query));
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
    EXPECT_NE(r.body.find("5:12: tasks[0].loop.max: 50 is over this engine's limit of 10 "
                          "iterations (coordinator.max_loop_iterations)"),
              std::string::npos)
        << path << ": " << r.body;
  }
  Response r = api.Handle(post("/scheduled-jobs", job + "schedule: {cron: \"0 * * * *\"}\n", {}));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("tasks[0].loop.max: 50 is over this engine's limit"), std::string::npos)
      << r.body;
  // Within the limit: accepted.
  EXPECT_EQ(api.Handle(post("/jobs",
                            "name: j\ntasks:\n  - name: poll\n    loop:\n      max: 10\n"
                            "      tasks: [{name: check, run: \"true\"}]\n",
                            {}))
                .status,
            200);
}

TEST_F(TorkStatesTest, CorsAnswersAPreflightAndMarksAnswersToAllowedOriginsOnly) {
  ApiOptions options{.version = "1"};
  options.cors.enabled = true;
  options.cors.origins = {"https://ui.example"};
  Api api(*coordinator_, *datastore_, broker_, options);
  auto header = [](const Response& r, const std::string& name) -> std::string {
    for (const auto& [k, v] : r.headers) {
      if (k == name) return v;
    }
    return "<none>";
  };
  Request preflight{"OPTIONS", "/jobs", {}, "", ""};
  preflight.headers = {{"origin", "https://ui.example"},
                       {"access-control-request-method", "POST"},
                       {"access-control-request-headers", "content-type"}};
  Response pre = api.Handle(preflight);
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(header(pre, "Access-Control-Allow-Origin"), "https://ui.example");
  EXPECT_EQ(header(pre, "Access-Control-Allow-Methods"), "GET, POST, PUT, DELETE, PATCH, OPTIONS");
  EXPECT_EQ(header(pre, "Access-Control-Allow-Headers"), "content-type");
  Request get{"GET", "/health", {}, "", ""};
  get.headers = {{"origin", "https://ui.example"}};
  Response allowed = api.Handle(get);
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(header(allowed, "Access-Control-Allow-Origin"), "https://ui.example");
  EXPECT_EQ(header(allowed, "Vary"), "Origin");
  get.headers = {{"origin", "https://evil.example"}};
  EXPECT_EQ(header(api.Handle(get), "Access-Control-Allow-Origin"), "<none>");
  // Off (the default): no CORS header, and OPTIONS is no route.
  Request plain{"GET", "/health", {}, "", ""};
  plain.headers = {{"origin", "https://ui.example"}};
  EXPECT_TRUE(api_->Handle(plain).headers.empty());
  EXPECT_EQ(api_->Handle(preflight).status, 404);
}

TEST_F(TorkStatesTest, TheRateLimitAnswers429PastEachClientsRateAndSparesHealth) {
  ApiOptions options{.version = "1"};
  options.rate_limit_rps = 3;
  Api api(*coordinator_, *datastore_, broker_, options);
  auto from = [](const std::string& path, const std::string& remote) {
    Request r{"GET", path, {}, "", ""};
    r.remote_addr = remote;
    return r;
  };
  int ok = 0, limited = 0;
  for (int i = 0; i < 10; ++i) {
    Response r = api.Handle(from("/queues", "10.0.0.1"));
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++limited;
      EXPECT_EQ(r.headers.at(0), (std::pair<std::string, std::string>{"Retry-After", "1"}));
      EXPECT_NE(r.body.find("middleware.web.ratelimit.rps"), std::string::npos) << r.body;
    }
  }
  // The bucket holds 3 and refills 3 a second: 10 requests at once pass 3 (4 on a slow
  // machine), never all.
  EXPECT_GE(ok, 3);
  EXPECT_LE(ok, 5);
  EXPECT_EQ(ok + limited, 10);
  // Another client has a bucket of its own; /health is not counted.
  EXPECT_EQ(api.Handle(from("/queues", "10.0.0.2")).status, 200);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(api.Handle(from("/health", "10.0.0.1")).status, 200);
}

TEST_F(TorkStatesTest, RestartOfAJobWithNoMoreTasksToRunIs400) {
  std::string id =
      Submit("name: bad output\noutput: '{{ nosuch }}'\ntasks:\n  - {name: t, run: ok}\n");
  ASSERT_TRUE(testing::WaitFor([&] { return StateOf(id) == "FAILED"; }));
  Response r = api_->Handle({"PUT", "/jobs/" + id + "/restart", {}, "", ""});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body).value("message", ""), "the job has no more tasks to run");
  EXPECT_EQ(StateOf(id), "FAILED");
}

TEST_F(RetentionTest, DeleteJobRemovesAFinishedJobAndRefusesAnActiveOneOrASubJob) {
  std::string done = Submit(R"(name: parent
tasks:
  - name: outer
    subjob:
      name: inner
      tasks:
        - {name: inner task, run: ok two}
)");
  ASSERT_TRUE(testing::WaitFor([&] { return StateOf(done) == "COMPLETED"; }));
  auto rows = datastore_->JobTasks(done);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  std::string subjob = rows->front().subjob_id;
  Response sub = Delete("/jobs/" + subjob);
  EXPECT_EQ(sub.status, 400);
  EXPECT_NE(sub.body.find("is a sub-job"), std::string::npos) << sub.body;

  std::string running = Submit("name: long\ntasks:\n  - {name: t, run: hang}\n");
  ASSERT_TRUE(testing::WaitFor([&] { return StateOf(running) == "RUNNING"; }));
  Response active = Delete("/jobs/" + running);
  EXPECT_EQ(active.status, 400);
  EXPECT_EQ(json::parse(active.body).value("message", ""),
            "job " + running + " is RUNNING: cancel it first, or wait for its end");

  Response ok = Delete("/jobs/" + done);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.body, R"({"status":"OK"})");
  EXPECT_EQ(Get("/jobs/" + done).status, 404);
  EXPECT_EQ(Get("/jobs/" + subjob).status, 404);
  EXPECT_EQ(Delete("/jobs/" + done).status, 404);
  EXPECT_EQ(Delete("/jobs/0123456789abcdef0123456789abcdef").status, 404);
  EXPECT_EQ(Get("/jobs/" + running).status, 200);
}

// /scheduled-jobs over the API with a fake clock: Tork's shapes and states, firing through
// the coordinator's loop into jobs a worker runs, secrets hidden.
class ScheduledJobsApiTest : public RetentionTest {
 protected:
  Response Call(const std::string& method, const std::string& path, const std::string& body = "",
                const std::string& type = "") {
    Request request;
    request.method = method;
    request.path = path;
    request.content_type = type;
    request.body = body;
    return api_->Handle(request);
  }
  json Parsed(const Response& r) { return json::parse(r.body, nullptr, false); }
};

constexpr const char* kTorkScheduledJob = R"({
  "name": "every minute",
  "schedule": {"cron": "* * * * *"},
  "secrets": {"token": "s3cr3t-value"},
  "inputs": {"shown": "s3cr3t-value"},
  "tasks": [{"name": "say", "image": "alpine", "run": "echo hi"}]
})";

TEST_F(ScheduledJobsApiTest, TorksRoutesCreateListGetPauseResumeAndDelete) {
  Response created = Call("POST", "/scheduled-jobs", kTorkScheduledJob, "application/json");
  ASSERT_EQ(created.status, 200) << created.body;
  json summary = Parsed(created);
  std::string id = summary.value("id", "");
  EXPECT_EQ(summary["state"], "ACTIVE");
  EXPECT_EQ(summary["cron"], "* * * * *");
  EXPECT_EQ(summary["name"], "every minute");
  EXPECT_FALSE(summary.contains("tasks"));
  EXPECT_EQ(summary["inputs"]["shown"], "[REDACTED]");

  json page = Parsed(Call("GET", "/scheduled-jobs"));
  ASSERT_EQ(page["items"].size(), 1u);
  EXPECT_EQ(page["items"][0]["id"], id);
  EXPECT_EQ(page["totalItems"], 1);

  json full = Parsed(Call("GET", "/scheduled-jobs/" + id));
  EXPECT_EQ(full["tasks"].size(), 1u);
  EXPECT_EQ(full["secrets"]["token"], "[REDACTED]");
  EXPECT_EQ(full["schedule"]["timezone"], "UTC");
  EXPECT_EQ(Call("GET", "/scheduled-jobs/" + id).body.find("s3cr3t-value"), std::string::npos);

  EXPECT_EQ(Call("PUT", "/scheduled-jobs/" + id + "/resume").status, 400);  // ACTIVE
  Response paused = Call("PUT", "/scheduled-jobs/" + id + "/pause");
  EXPECT_EQ(paused.status, 200);
  EXPECT_EQ(paused.body, R"({"status":"OK"})");
  EXPECT_EQ(Parsed(Call("GET", "/scheduled-jobs/" + id))["state"], "PAUSED");
  Response again = Call("PUT", "/scheduled-jobs/" + id + "/pause");
  EXPECT_EQ(again.status, 400);
  EXPECT_THAT(Parsed(again).value("message", ""), HasSubstr("only an ACTIVE one can be paused"));
  EXPECT_EQ(Call("PUT", "/scheduled-jobs/" + id + "/resume").status, 200);

  EXPECT_EQ(Call("DELETE", "/scheduled-jobs/" + id).status, 200);
  EXPECT_EQ(Call("GET", "/scheduled-jobs/" + id).status, 404);
  EXPECT_EQ(Call("DELETE", "/scheduled-jobs/" + id).status, 404);
  EXPECT_EQ(Call("PUT", "/scheduled-jobs/0123456789abcdef0123456789abcdef/pause").status, 404);
  EXPECT_EQ(Call("GET", "/scheduled-jobs/not-an-id").status, 404);
}

TEST_F(ScheduledJobsApiTest, EachFiredJobCarriesTheScheduleAndRuns) {
  Response created = Call("POST", "/scheduled-jobs", R"(
name: yaml schedule
schedule:
  cron: "* * * * *"
tasks:
  - name: say
    image: alpine
    run: echo hi
)",
                          "text/yaml");
  ASSERT_EQ(created.status, 200) << created.body;
  std::string id = Parsed(created).value("id", "");
  clock_.Advance(std::chrono::minutes(1));
  json jobs;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        jobs = Parsed(Get("/jobs"));
        return jobs["items"].size() == 1 && jobs["items"][0]["state"] == "COMPLETED";
      },
      std::chrono::seconds(10)))
      << jobs.dump();
  EXPECT_EQ(jobs["items"][0]["schedule"], (json{{"id", id}, {"cron", "* * * * *"}}));
  std::string job_id = jobs["items"][0].value("id", "");
  EXPECT_EQ(Parsed(Get("/jobs/" + job_id))["schedule"]["id"], id);
  EXPECT_EQ(Parsed(Call("GET", "/scheduled-jobs/" + id))["lastJobId"], job_id);
}

TEST_F(ScheduledJobsApiTest, UpdateReplacesTheJobAndItsSchedule) {
  std::string id = Parsed(Call("POST", "/scheduled-jobs", kTorkScheduledJob, "application/json"))
                       .value("id", "");
  Response updated = Call("PUT", "/scheduled-jobs/" + id, R"({
    "name": "renamed",
    "schedule": {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Paris", "overlap": "skip",
                 "catchUp": {"window": "2h", "fire": "latest"}},
    "tasks": [{"name": "say", "run": "echo hi"}]
  })",
                          "application/json");
  ASSERT_EQ(updated.status, 200) << updated.body;
  json full = Parsed(Call("GET", "/scheduled-jobs/" + id));
  EXPECT_EQ(full["name"], "renamed");
  EXPECT_EQ(full["cron"], "0 9 * * MON-FRI");
  EXPECT_EQ(full["schedule"], (json{{"cron", "0 9 * * MON-FRI"},
                                    {"timezone", "Europe/Paris"},
                                    {"overlap", "skip"},
                                    {"catchUp", {{"window", "2h0m0s"}, {"fire", "latest"}}}}));
  EXPECT_FALSE(full.contains("secrets"));
  EXPECT_EQ(Call("PUT", "/scheduled-jobs/0123456789abcdef0123456789abcdef", kTorkScheduledJob,
                 "application/json")
                .status,
            404);
}

TEST_F(ScheduledJobsApiTest, BadSchedulesAre400NamingTheField) {
  Response zone = Call("POST", "/scheduled-jobs",
                       R"({"name": "n", "schedule": {"cron": "* * * * *", "timezone": "Mars/X"},
                           "tasks": [{"name": "t", "run": "echo"}]})",
                       "application/json");
  EXPECT_EQ(zone.status, 400);
  json body = Parsed(zone);
  EXPECT_EQ(body["errors"][0]["path"], "schedule.timezone");
  EXPECT_THAT(body.value("message", ""), HasSubstr("unknown time zone \"Mars/X\""));
  Response cron = Call("POST", "/scheduled-jobs",
                       R"({"name": "n", "schedule": {"cron": "* * *"},
                           "tasks": [{"name": "t", "run": "echo"}]})",
                       "application/json");
  EXPECT_EQ(cron.status, 400);
  EXPECT_EQ(Parsed(cron)["errors"][0]["path"], "schedule.cron");
  Response none =
      Call("POST", "/scheduled-jobs", R"({"name": "n", "tasks": [{"name": "t", "run": "echo"}]})",
           "application/json");
  EXPECT_EQ(none.status, 400);
  EXPECT_EQ(Call("POST", "/scheduled-jobs", "x", "text/plain").status, 415);
  EXPECT_EQ(Parsed(Call("GET", "/scheduled-jobs"))["totalItems"], 0);
}

TEST(ParseAddressTest, SplitsHostAndPort) {
  EXPECT_EQ(*ParseAddress("localhost:8000"), (std::pair<std::string, int>{"localhost", 8000}));
  EXPECT_EQ(*ParseAddress(":9000"), (std::pair<std::string, int>{"localhost", 9000}));
  EXPECT_FALSE(ParseAddress("localhost").ok());
  EXPECT_FALSE(ParseAddress("h:99999").ok());
}

TEST(HttpStatusTest, OneTableMapsCodes) {
  EXPECT_EQ(HttpStatus(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatus(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatus(StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatus(StatusCode::kDeadlineExceeded), 408);
  EXPECT_EQ(HttpStatus(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatus(StatusCode::kInternal), 500);
}

}  // namespace
}  // namespace baton::api

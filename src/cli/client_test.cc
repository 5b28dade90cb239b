#include "cli/client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/validate.h"
#include "testing/answer_server.h"
#include "testing/wait_for.h"

namespace baton::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kId = "0123456789abcdef0123456789abcdef";

struct Recorded {
  std::string method;
  std::string path;
  std::string query;  // "k=v&..." as the handler saw the params, sorted by key
  std::string content_type;
  std::string body;
  std::string authorization;
};

// A fake API on a free loopback port: tests register handlers, then Start() it; every
// request is recorded.
class FakeServerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  void Start() {
    // Recorded after routing (the body has been read) but before the response is written,
    // so a request is on record by the time the client has its answer.
    server_.set_post_routing_handler([this](const httplib::Request& req, httplib::Response&) {
      std::string query;
      for (const auto& [key, value] : req.params) {
        query += (query.empty() ? "" : "&") + key + "=" + value;
      }
      std::lock_guard lock(mutex_);
      requests_.push_back({req.method, req.path, query, req.get_header_value("Content-Type"),
                           req.body, req.get_header_value("Authorization")});
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    ASSERT_TRUE(baton::testing::WaitFor([this] { return server_.is_running(); }));
    options_.url = "http://127.0.0.1:" + std::to_string(port_);
    options_.poll_initial = std::chrono::milliseconds(1);
    options_.poll_max = std::chrono::milliseconds(5);
  }

  std::vector<Recorded> Requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = ::testing::TempDir() + "/client_test_" + name;
    std::ofstream(path) << text;
    return path;
  }

  static void Json(httplib::Response& res, const json& body, int status = 200) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mutex_;
  std::vector<Recorded> requests_;
  ClientOptions options_;
  std::ostringstream out_;
  std::ostringstream err_;
};

// Options for submitting `file`, tweaked by `with` (designated initializers that leave
// members out trip g++'s -Wmissing-field-initializers).
SubmitOptions SubmitOf(std::string file, const std::function<void(SubmitOptions&)>& with = {}) {
  SubmitOptions options;
  options.file = std::move(file);
  if (with) with(options);
  return options;
}

PageOptions Page(std::optional<int> page, std::optional<int> size) {
  PageOptions options;
  options.page = page;
  options.size = size;
  return options;
}

constexpr const char* kHelloYaml = R"(name: hello job
output: "{{ tasks.hello }}"
inputs:
  who: world
tasks:
  - name: say hello
    var: hello
    run: echo -n "hello world" > $TORK_OUTPUT
)";

TEST_F(FakeServerTest, SubmitSendsYamlAsIsAndPrintsTheId) {
  server_.Post("/jobs", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"id", kId}, {"state", "PENDING"}});
  });
  Start();
  std::string file = WriteFile("hello.yaml", kHelloYaml);

  EXPECT_EQ(Submit(options_, SubmitOf(file), out_, err_), kExitOk) << err_.str();

  EXPECT_EQ(out_.str(), std::string(kId) + "\n");
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].content_type, "text/yaml");
  EXPECT_EQ(requests[0].body, kHelloYaml);
}

TEST_F(FakeServerTest, SubmitSniffsJsonInAFileWithoutExtension) {
  server_.Post("/jobs", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"id", kId}, {"state", "PENDING"}});
  });
  Start();
  std::string file = WriteFile("job", R"({"name": "j", "tasks": [{"name": "t", "run": "true"}]})");

  EXPECT_EQ(Submit(options_, SubmitOf(file), out_, err_), kExitOk) << err_.str();

  EXPECT_EQ(Requests().at(0).content_type, "application/json");
}

TEST_F(FakeServerTest, SubmitWithInputsSendsTheJobAsJsonWithInputsOverridden) {
  server_.Post("/jobs", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"id", kId}, {"state", "PENDING"}});
  });
  Start();
  std::string file = WriteFile("inputs.yaml", kHelloYaml);

  int status = Submit(options_,
                      SubmitOf(file,
                               [](auto& o) {
                                 o.inputs = {"who=you", "extra=a=b"};
                               }),
                      out_, err_);

  EXPECT_EQ(status, kExitOk) << err_.str();
  auto request = Requests().at(0);
  EXPECT_EQ(request.content_type, "application/json");
  json body = json::parse(request.body);
  EXPECT_EQ(body["name"], "hello job");
  EXPECT_EQ(body["inputs"], (json{{"who", "you"}, {"extra", "a=b"}}));
  EXPECT_EQ(body["tasks"][0]["run"], "echo -n \"hello world\" > $TORK_OUTPUT");
}

TEST_F(FakeServerTest, SubmitWithAnInputWithoutEqualsIsAUsageError) {
  Start();
  std::string file = WriteFile("bad-input.yaml", kHelloYaml);

  EXPECT_EQ(Submit(options_, SubmitOf(file, [](auto& o) { o.inputs = {"who"}; }), out_, err_),
            kExitUsage);

  EXPECT_THAT(err_.str(), HasSubstr("expected KEY=VALUE"));
  EXPECT_TRUE(Requests().empty());
}

TEST_F(FakeServerTest, SubmitWithInputsReportsAnInvalidFileWithoutSendingIt) {
  Start();
  std::string file =
      WriteFile("invalid.yaml", "name: j\ntasks:\n  - name: t\n    priority: 12\n    run: x\n");

  EXPECT_EQ(Submit(options_, SubmitOf(file, [](auto& o) { o.inputs = {"a=b"}; }), out_, err_),
            kExitFailure);

  EXPECT_THAT(err_.str(), HasSubstr(file + ":4:15: tasks[0].priority"));
  EXPECT_TRUE(Requests().empty());
}

TEST_F(FakeServerTest, SubmitOfAnUnreadableFileIsAUsageError) {
  Start();

  EXPECT_EQ(Submit(options_, SubmitOf("/nonexistent/job.yaml"), out_, err_), kExitUsage);

  EXPECT_THAT(err_.str(), HasSubstr("/nonexistent/job.yaml: cannot read"));
}

TEST_F(FakeServerTest, SubmitPrintsTheServersMessageOnARejectedJob) {
  server_.Post("/jobs", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"message", "2:3: tasks[0].name: is required"}, {"code", "INVALID_ARGUMENT"}}, 400);
  });
  Start();
  std::string file = WriteFile("rejected.yaml", kHelloYaml);

  EXPECT_EQ(Submit(options_, SubmitOf(file), out_, err_), kExitFailure);

  EXPECT_EQ(err_.str(), "baton: 2:3: tasks[0].name: is required (HTTP 400)\n");
  EXPECT_EQ(out_.str(), "");
}

// Serves a job that is RUNNING for the first `running_polls` GETs, then `final_job`.
void ServeJobStates(httplib::Server& server, std::atomic<int>& polls, int running_polls,
                    json final_job) {
  server.Post("/jobs", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"id", kId}, {"state", "PENDING"}}.dump(), "application/json");
  });
  server.Get(std::string("/jobs/") + kId,
             [&polls, running_polls, final_job](const httplib::Request&, httplib::Response& res) {
               json job = ++polls <= running_polls
                              ? json{{"id", kId}, {"state", "RUNNING"}, {"progress", 50.0}}
                              : final_job;
               res.set_content(job.dump(), "application/json");
             });
}

TEST_F(FakeServerTest, SubmitWaitPrintsTheFinalStateAndResultAndSucceedsWhenCompleted) {
  std::atomic<int> polls = 0;
  ServeJobStates(server_, polls, 3,
                 {{"id", kId}, {"state", "COMPLETED"}, {"result", "hello world"}});
  Start();
  std::string file = WriteFile("wait.yaml", kHelloYaml);

  int status = Submit(options_, SubmitOf(file, [](auto& o) { o.wait = true; }), out_, err_);

  EXPECT_EQ(status, kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), std::string(kId) + "\nCOMPLETED\nhello world\n");
  EXPECT_EQ(polls, 4);
}

TEST_F(FakeServerTest, SubmitWaitFailsAndPrintsTheErrorWhenTheJobFails) {
  std::atomic<int> polls = 0;
  ServeJobStates(server_, polls, 1, {{"id", kId}, {"state", "FAILED"}, {"error", "exit code 1"}});
  Start();
  std::string file = WriteFile("fail.yaml", kHelloYaml);

  EXPECT_EQ(Submit(options_, SubmitOf(file, [](auto& o) { o.wait = true; }), out_, err_),
            kExitFailure);

  EXPECT_EQ(out_.str(), std::string(kId) + "\nFAILED\nerror: exit code 1\n");
}

TEST_F(FakeServerTest, SubmitWaitWithJsonPrintsTheFinalJob) {
  std::atomic<int> polls = 0;
  ServeJobStates(server_, polls, 0, {{"id", kId}, {"state", "CANCELLED"}});
  options_.json = true;
  Start();
  std::string file = WriteFile("json.yaml", kHelloYaml);

  EXPECT_EQ(Submit(options_, SubmitOf(file, [](auto& o) { o.wait = true; }), out_, err_),
            kExitFailure);

  EXPECT_EQ(json::parse(out_.str()), (json{{"id", kId}, {"state", "CANCELLED"}}));
}

TEST_F(FakeServerTest, SubmitFollowPrintsEachLogPartOnceInTheOrderWritten) {
  std::atomic<int> polls = 0;
  ServeJobStates(server_, polls, 3,
                 {{"id", kId}, {"state", "COMPLETED"}, {"result", "done"}, {"progress", 100}});
  // The log grows by two parts per poll; pages are newest first, two parts a page, so the
  // follower has to read past the first page to find the last part it printed.
  server_.Get(std::string("/jobs/") + kId + "/log",
              [&polls](const httplib::Request& req, httplib::Response& res) {
                int written = std::min(2 * polls.load() + 1, 7);
                int page = std::stoi(req.get_param_value("page"));
                json items = json::array();
                for (int n = written - (page - 1) * 2; n > 0 && items.size() < 2; --n) {
                  items.push_back({{"id", "p" + std::to_string(n)},
                                   {"number", n},
                                   {"contents", "line " + std::to_string(n) + "\n"}});
                }
                res.set_content(json{{"items", items},
                                     {"number", page},
                                     {"size", 2},
                                     {"totalItems", written},
                                     {"totalPages", (written + 1) / 2}}
                                    .dump(),
                                "application/json");
              });
  Start();
  std::string file = WriteFile("follow.yaml", kHelloYaml);

  int status = Submit(options_, SubmitOf(file, [](auto& o) { o.follow = true; }), out_, err_);

  EXPECT_EQ(status, kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), std::string(kId) +
                            "\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\n"
                            "COMPLETED\ndone\n");
  // Not a terminal: the state is reported as plain lines on stderr.
  EXPECT_THAT(err_.str(), HasSubstr("[RUNNING 50%]\n"));
}

TEST_F(FakeServerTest, SubmitFollowOnATerminalDrawsOneProgressLineAndClearsIt) {
  std::atomic<int> polls = 0;
  ServeJobStates(server_, polls, 2, {{"id", kId}, {"state", "COMPLETED"}});
  server_.Get(
      std::string("/jobs/") + kId + "/log", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(R"({"items":[],"number":1,"size":100,"totalItems":0,"totalPages":0})",
                        "application/json");
      });
  Start();
  std::string file = WriteFile("tty.yaml", kHelloYaml);

  int status =
      Submit(options_, SubmitOf(file, [](auto& o) { o.follow = o.tty = true; }), out_, err_);

  EXPECT_EQ(status, kExitOk);
  EXPECT_EQ(out_.str(), std::string(kId) + "\nRUNNING 50%\r\033[KCOMPLETED\n");
}

TEST_F(FakeServerTest, AnUnreachableServerFailsWithAClearMessage) {
  Start();
  std::string url = options_.url;
  server_.stop();
  thread_.join();
  std::string file = WriteFile("unreachable.yaml", kHelloYaml);

  EXPECT_EQ(Submit(options_, SubmitOf(file), out_, err_), kExitFailure);

  EXPECT_EQ(err_.str(), "baton: cannot reach " + url + ": connection refused\n");
}

TEST_F(FakeServerTest, AnInvalidUrlIsAUsageError) {
  options_.url = "http://localhost:8000/some/path";

  EXPECT_EQ(Health(options_, out_, err_), kExitUsage);

  EXPECT_THAT(err_.str(), HasSubstr("invalid --url"));
}

// HTTPS against a server whose certificate a private CA signed (made by the test).
class HttpsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = testing::MakeTestCertificates(::testing::TempDir() + "/cli_client_test_tls");
    ASSERT_TRUE(made) << "openssl could not make the test certificates";
    certificates_ = *made;
  }
  testing::TestCertificates certificates_;
  ClientOptions options_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(HttpsClientTest, TalksHttpsToAServerTheCacertVouchesFor) {
  testing::AnswerServer server(certificates_, 200, R"({"status":"UP","version":"9.9"})");
  options_.url = server.url();
  options_.cacert = certificates_.ca;

  EXPECT_EQ(Health(options_, out_, err_), kExitOk) << err_.str();

  EXPECT_EQ(out_.str(), "UP (baton 9.9)\n");
  EXPECT_THAT(server.last_request(), StartsWith("GET /health HTTP/1.1\r\n"));
}

TEST_F(HttpsClientTest, AServerTheCacertDoesNotVouchForIsRefusedClearly) {
  testing::AnswerServer server(certificates_, 200, R"({"status":"UP"})");
  options_.url = server.url();
  options_.cacert = certificates_.other_ca;

  EXPECT_EQ(Health(options_, out_, err_), kExitFailure);

  EXPECT_THAT(err_.str(), StartsWith("baton: cannot reach " + server.url() +
                                     ": TLS: the server's certificate is not trusted"));
  EXPECT_EQ(server.requests(), 0);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(HttpsClientTest, WithoutACacertAPrivateCaIsRefusedAndTheFlagSuggested) {
  testing::AnswerServer server(certificates_, 200, R"({"status":"UP"})");
  options_.url = server.url();

  EXPECT_EQ(Health(options_, out_, err_), kExitFailure);

  EXPECT_THAT(err_.str(), HasSubstr("not trusted"));
  EXPECT_THAT(err_.str(), HasSubstr("pass --cacert FILE or set BATON_CACERT"));
}

TEST_F(HttpsClientTest, AnUnreadableCacertIsNamed) {
  testing::AnswerServer server(certificates_, 200, R"({"status":"UP"})");
  options_.url = server.url();
  options_.cacert = "/nonexistent/ca.pem";

  EXPECT_EQ(Health(options_, out_, err_), kExitFailure);

  EXPECT_THAT(err_.str(), HasSubstr("/nonexistent/ca.pem"));
}

TEST_F(FakeServerTest, ListJobsSendsTheQueryAndPrintsATable) {
  server_.Get("/jobs", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"items",
                {{{"id", kId},
                  {"name", "hello job"},
                  {"state", "COMPLETED"},
                  {"progress", 100},
                  {"createdAt", "2024-05-01T10:00:00.123Z"}}}},
               {"number", 2},
               {"size", 1},
               {"totalPages", 3},
               {"totalItems", 3}});
  });
  Start();

  int status = ListJobs(options_, "tag:demo hello", Page(2, 1), out_, err_);

  EXPECT_EQ(status, kExitOk) << err_.str();
  EXPECT_EQ(Requests().at(0).query, "page=2&q=tag:demo hello&size=1");
  EXPECT_EQ(out_.str(),
            "ID                                NAME       STATE      PROGRESS  CREATED\n" +
                std::string(kId) +
                "  hello job  COMPLETED  100%      2024-05-01 10:00:00\n"
                "page 2 of 3, 3 jobs\n");
}

TEST_F(FakeServerTest, GetJobWithJsonPrintsTheServersJob) {
  json job = {{"id", kId}, {"state", "COMPLETED"}, {"execution", json::array()}};
  server_.Get(std::string("/jobs/") + kId,
              [&job](const httplib::Request&, httplib::Response& res) { Json(res, job); });
  options_.json = true;
  Start();

  EXPECT_EQ(GetJob(options_, kId, out_, err_), kExitOk);

  EXPECT_EQ(json::parse(out_.str()), job);
}

TEST_F(FakeServerTest, GetJobPrintsTheJobAndItsTasks) {
  server_.Get(std::string("/jobs/") + kId, [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"id", kId},
               {"name", "retry job"},
               {"state", "FAILED"},
               {"error", "exit code 1"},
               {"execution",
                {{{"id", "t1"}, {"name", "flaky"}, {"state", "FAILED"}, {"error", "exit code 1"}},
                 {{"id", "t2"}, {"name", "next"}, {"state", "COMPLETED"}, {"result", "ok"}}}}});
  });
  Start();

  EXPECT_EQ(GetJob(options_, kId, out_, err_), kExitOk);

  EXPECT_THAT(out_.str(), StartsWith("ID:         " + std::string(kId) +
                                     "\nName:       retry job\nState:      FAILED\n"));
  EXPECT_THAT(out_.str(), HasSubstr("Error:      exit code 1\n"));
  EXPECT_THAT(out_.str(), ::testing::ContainsRegex("\nt1    flaky  FAILED +exit code 1\n"));
  EXPECT_THAT(out_.str(), ::testing::ContainsRegex("\nt2    next   COMPLETED +ok\n"));
}

TEST_F(FakeServerTest, GetJobOfAnUnknownIdPrintsTheServersMessage) {
  server_.Get("/jobs/nope", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"message", "job nope not found"}, {"code", "NOT_FOUND"}}, 404);
  });
  Start();

  EXPECT_EQ(GetJob(options_, "nope", out_, err_), kExitFailure);

  EXPECT_EQ(err_.str(), "baton: job nope not found (HTTP 404)\n");
}

TEST_F(FakeServerTest, SubmitWithScheduleSendsTheJobAndItsCronToScheduledJobs) {
  server_.Post("/scheduled-jobs", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"id", kId}, {"state", "ACTIVE"}, {"cron", "0 * * * *"}});
  });
  Start();
  std::string file = WriteFile("scheduled.yaml", kHelloYaml);

  int status = Submit(options_,
                      SubmitOf(file,
                               [](auto& o) {
                                 o.schedule = "0 * * * *";
                                 o.timezone = "Europe/Paris";
                                 o.inputs = {"who=you"};
                               }),
                      out_, err_);

  EXPECT_EQ(status, kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), std::string(kId) + "\n");
  auto request = Requests().at(0);
  EXPECT_EQ(request.path, "/scheduled-jobs");
  EXPECT_EQ(request.content_type, "application/json");
  json body = json::parse(request.body);
  EXPECT_EQ(body["name"], "hello job");
  EXPECT_EQ(body["inputs"]["who"], "you");
  EXPECT_EQ(body["schedule"], (json{{"cron", "0 * * * *"}, {"timezone", "Europe/Paris"}}));
}

TEST_F(FakeServerTest, ScheduleFlagsThatCannotWorkAreUsageErrors) {
  Start();
  std::string file = WriteFile("scheduled.yaml", kHelloYaml);
  EXPECT_EQ(Submit(options_, SubmitOf(file, [](auto& o) { o.timezone = "UTC"; }), out_, err_),
            kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--timezone needs --schedule"));
  EXPECT_EQ(Submit(options_,
                   SubmitOf(file,
                            [](auto& o) {
                              o.schedule = "* * * * *";
                              o.wait = true;
                            }),
                   out_, err_),
            kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--schedule cannot be combined with --wait"));
  EXPECT_TRUE(Requests().empty());
}

TEST_F(FakeServerTest, SchedulesListPrintsATableAndGetPrintsTheSchedule) {
  json scheduled = {{"id", kId},
                    {"name", "hourly"},
                    {"state", "ACTIVE"},
                    {"cron", "0 * * * *"},
                    {"schedule",
                     {{"cron", "0 * * * *"},
                      {"timezone", "Europe/Paris"},
                      {"overlap", "skip"},
                      {"catchUp", {{"window", "1m0s"}, {"fire", "all"}}}}},
                    {"nextRunAt", "2026-05-01T10:00:00.000Z"},
                    {"createdAt", "2026-05-01T09:12:00.000Z"}};
  server_.Get("/scheduled-jobs", [&](const httplib::Request&, httplib::Response& res) {
    Json(
        res,
        {{"items", {scheduled}}, {"number", 1}, {"size", 1}, {"totalPages", 1}, {"totalItems", 1}});
  });
  server_.Get(std::string("/scheduled-jobs/") + kId,
              [&](const httplib::Request&, httplib::Response& res) { Json(res, scheduled); });
  Start();

  EXPECT_EQ(ListSchedules(options_, Page(2, 5), out_, err_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("ID"));
  EXPECT_THAT(out_.str(), HasSubstr("NEXT RUN"));
  EXPECT_THAT(out_.str(), HasSubstr(std::string(kId) + "  hourly  ACTIVE  0 * * * *  Europe/Paris  "
                                                       "2026-05-01 10:00:00"));
  EXPECT_THAT(out_.str(), HasSubstr("page 1 of 1, 1 scheduled jobs"));
  EXPECT_EQ(Requests().at(0).query, "page=2&size=5");

  out_.str("");
  EXPECT_EQ(GetSchedule(options_, kId, out_, err_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("Overlap:    skip\n"));
  EXPECT_THAT(out_.str(), HasSubstr("Catch-up:   all within 1m0s\n"));
  EXPECT_THAT(out_.str(), HasSubstr("Timezone:   Europe/Paris\n"));
}

TEST_F(FakeServerTest, SchedulesPauseResumeAndDeleteCallTheirRoutes) {
  const std::string path = std::string("/scheduled-jobs/") + kId;
  server_.Put(path + "/pause", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"status", "OK"}});
  });
  server_.Put(path + "/resume", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"message", "scheduled job is ACTIVE: only a PAUSED one can be resumed"}}, 400);
  });
  server_.Delete(path, [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"status", "OK"}});
  });
  Start();

  EXPECT_EQ(PauseSchedule(options_, kId, out_, err_), kExitOk);
  EXPECT_EQ(ResumeSchedule(options_, kId, out_, err_), kExitFailure);
  EXPECT_EQ(DeleteSchedule(options_, kId, out_, err_), kExitOk);

  EXPECT_EQ(out_.str(), "scheduled job " + std::string(kId) + " paused\nscheduled job " +
                            std::string(kId) + " deleted\n");
  EXPECT_THAT(err_.str(), HasSubstr("only a PAUSED one can be resumed (HTTP 400)"));
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[2].method, "DELETE");
  EXPECT_EQ(requests[2].path, path);
}

TEST_F(FakeServerTest, CancelAndRestartPutToTheJob) {
  server_.Put(std::string("/jobs/") + kId + "/cancel",
              [](const httplib::Request&, httplib::Response& res) {
                Json(res, {{"status", "OK"}});
              });
  server_.Put(std::string("/jobs/") + kId + "/restart", [](const httplib::Request&,
                                                           httplib::Response& res) {
    Json(res, {{"message", "job is RUNNING: only FAILED or CANCELLED jobs restart"}}, 400);
  });
  Start();

  EXPECT_EQ(CancelJob(options_, kId, out_, err_), kExitOk);
  EXPECT_EQ(RestartJob(options_, kId, out_, err_), kExitFailure);

  EXPECT_EQ(out_.str(), "job " + std::string(kId) + " cancelled\n");
  EXPECT_THAT(err_.str(), HasSubstr("only FAILED or CANCELLED jobs restart (HTTP 400)"));
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[1].path, std::string("/jobs/") + kId + "/restart");
}

TEST_F(FakeServerTest, PauseAndResumePutToTheJobAndSayWhyARefusalFailed) {
  server_.Put(std::string("/jobs/") + kId + "/pause",
              [](const httplib::Request&, httplib::Response& res) {
                Json(res, {{"status", "OK"}});
              });
  server_.Put(
      std::string("/jobs/") + kId + "/resume", [](const httplib::Request&, httplib::Response& res) {
        Json(res, {{"message", "only a PAUSED job can be resumed; this one is RUNNING"}}, 400);
      });
  Start();

  EXPECT_EQ(PauseJob(options_, kId, out_, err_), kExitOk);
  EXPECT_EQ(ResumeJob(options_, kId, out_, err_), kExitFailure);

  EXPECT_EQ(out_.str(), "job " + std::string(kId) + " paused\n");
  EXPECT_THAT(err_.str(),
              HasSubstr("only a PAUSED job can be resumed; this one is RUNNING (HTTP 400)"));
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].path, std::string("/jobs/") + kId + "/pause");
  EXPECT_EQ(requests[1].method, "PUT");
  EXPECT_EQ(requests[1].path, std::string("/jobs/") + kId + "/resume");
}

TEST_F(FakeServerTest, RerunPutsItsModeFromAndInputsAsJsonAndRefusesABadInput) {
  server_.Put(std::string("/jobs/") + kId + "/rerun",
              [](const httplib::Request&, httplib::Response& res) {
                Json(res, {{"status", "OK"}});
              });
  Start();

  RerunOptions rerun{.mode = "all", .from = "deploy", .inputs = {"region=us", "note=a=b"}};
  EXPECT_EQ(RerunJob(options_, kId, rerun, out_, err_), kExitOk);
  EXPECT_EQ(out_.str(), "job " + std::string(kId) + " runs again\n");
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[0].content_type, "application/json");
  EXPECT_EQ(
      nlohmann::json::parse(requests[0].body),
      (nlohmann::json{
          {"mode", "all"}, {"from", "deploy"}, {"inputs", {{"region", "us"}, {"note", "a=b"}}}}));

  EXPECT_EQ(RerunJob(options_, kId, RerunOptions{.inputs = {"=x"}}, out_, err_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--input \"=x\": expected NAME=VALUE"));
  EXPECT_EQ(Requests().size(), 1u);  // nothing sent
}

TEST_F(FakeServerTest, JobLogPrintsEveryPageOldestFirst) {
  server_.Get(std::string("/jobs/") + kId + "/log", [](const httplib::Request& req,
                                                       httplib::Response& res) {
    bool first = req.get_param_value("page") == "1";
    json items = first
                     ? json{{{"id", "3"}, {"contents", "c\n"}}, {{"id", "2"}, {"contents", "b\n"}}}
                     : json{{{"id", "1"}, {"contents", "a\n"}}};
    Json(res, {{"items", items}, {"totalPages", 2}, {"totalItems", 3}});
  });
  Start();

  EXPECT_EQ(JobLog(options_, kId, Page(std::nullopt, 2), out_, err_), kExitOk);

  EXPECT_EQ(out_.str(), "a\nb\nc\n");
}

TEST_F(FakeServerTest, HealthSucceedsWhenUpAndFailsWhenDown) {
  std::atomic<bool> up = true;
  server_.Get("/health", [&up](const httplib::Request&, httplib::Response& res) {
    if (up) {
      Json(res, {{"status", "UP"}, {"version", "0.1.0"}});
    } else {
      Json(res, {{"status", "DOWN"}, {"version", "0.1.0"}}, 503);
    }
  });
  Start();

  EXPECT_EQ(Health(options_, out_, err_), kExitOk);
  up = false;
  EXPECT_EQ(Health(options_, out_, err_), kExitFailure);

  EXPECT_EQ(out_.str(), "UP (baton 0.1.0)\nDOWN (baton 0.1.0)\n");
}

// ---- Credentials, users and keys (docs/auth.md) -------------------------------------

TEST_F(FakeServerTest, EveryCommandSendsBasicCredentialsOrTheToken) {
  server_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"status", "UP"}, {"version", "1"}});
  });
  server_.Get("/jobs", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"items", json::array()},
               {"number", 1},
               {"size", 0},
               {"totalPages", 0},
               {"totalItems", 0}});
  });
  Start();
  std::ostringstream out, err;
  options_.user = "ann:pa:ss";  // a password may hold a colon
  EXPECT_EQ(Health(options_, out, err), kExitOk);
  options_.token = "baton_abc";  // the token wins over the user
  EXPECT_EQ(ListJobs(options_, "", {}, out, err), kExitOk);
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].authorization, "Basic YW5uOnBhOnNz");  // base64("ann:pa:ss")
  EXPECT_EQ(requests[1].authorization, "Bearer baton_abc");
}

TEST_F(FakeServerTest, UsersCreatePostsTheUserAndNeverPrintsThePassword) {
  server_.Post("/users", [](const httplib::Request& req, httplib::Response& res) {
    json in = json::parse(req.body);
    Json(res, {{"id", kId}, {"username", in["username"]}, {"roles", in["roles"]}});
  });
  Start();
  std::ostringstream out, err;
  NewUser user{
      .username = "erin", .name = "Erin", .password = "s3cret-pw", .roles = {"ops", "admin"}};
  EXPECT_EQ(CreateUser(options_, user, out, err), kExitOk) << err.str();
  EXPECT_EQ(out.str(), "created user erin (roles ops,admin)\n");
  EXPECT_THAT(out.str() + err.str(), ::testing::Not(HasSubstr("s3cret-pw")));
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(json::parse(requests[0].body), (json{{"username", "erin"},
                                                 {"name", "Erin"},
                                                 {"password", "s3cret-pw"},
                                                 {"roles", {"ops", "admin"}}}));
  user.password.clear();
  std::ostringstream err2;
  EXPECT_EQ(CreateUser(options_, user, out, err2), kExitUsage);
  EXPECT_THAT(err2.str(), HasSubstr("--password-stdin"));
}

TEST_F(FakeServerTest, KeysCreateListAndRevokeDriveTheKeysRoutes) {
  server_.Post("/keys", [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"id", kId}, {"username", "ann"}, {"key", "baton_secret"}});
  });
  server_.Get("/keys", [](const httplib::Request&, httplib::Response& res) {
    Json(res, json::array({{{"id", kId},
                            {"username", "ann"},
                            {"name", "ci"},
                            {"createdAt", "2026-01-01T00:00:00.000Z"}}}));
  });
  server_.Delete("/keys/" + std::string(kId), [](const httplib::Request&, httplib::Response& res) {
    Json(res, {{"status", "OK"}});
  });
  Start();
  std::ostringstream out, err;
  EXPECT_EQ(CreateKey(options_, "ci", "ann", out, err), kExitOk);
  EXPECT_THAT(out.str(), HasSubstr("key: baton_secret"));
  EXPECT_THAT(err.str(), HasSubstr("shown this once"));
  out.str("");
  EXPECT_EQ(ListKeys(options_, "ann", out, err), kExitOk);
  EXPECT_THAT(out.str(), HasSubstr(kId));
  EXPECT_THAT(out.str(), HasSubstr("ci"));
  out.str("");
  EXPECT_EQ(RevokeKey(options_, kId, out, err), kExitOk);
  EXPECT_EQ(out.str(), "revoked key " + std::string(kId) + "\n");
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(json::parse(requests[0].body), (json{{"name", "ci"}, {"username", "ann"}}));
  EXPECT_EQ(requests[1].query, "username=ann");
  EXPECT_EQ(requests[2].method, "DELETE");
}

TEST_F(FakeServerTest, A401IsReportedWithTheServersMessage) {
  server_.Get("/keys", [](const httplib::Request&, httplib::Response& res) {
    Json(res,
         {{"message", "authentication required: no credentials sent"}, {"code", "UNAUTHENTICATED"}},
         401);
  });
  Start();
  std::ostringstream out, err;
  EXPECT_EQ(ListKeys(options_, "", out, err), kExitFailure);
  EXPECT_THAT(err.str(), HasSubstr("authentication required: no credentials sent (HTTP 401)"));
}

}  // namespace
}  // namespace baton::cli

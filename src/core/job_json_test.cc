#include "core/job_json.h"

#include <gtest/gtest.h>

#include "core/job_decode.h"

namespace baton {
namespace {

using nlohmann::json;

Job FullJob() {
  Job job;
  job.name = "full";
  job.description = "every field";
  job.tags = {"a", "b"};
  job.inputs = {{"who", "world"}};
  job.secrets = {{"token", "s3cret"}};
  job.output = "{{ tasks.greeting }}";
  job.timeout = std::chrono::minutes(90);
  job.wait_timeout = std::chrono::seconds(30);
  job.auto_delete = AutoDelete{std::chrono::hours(24)};
  job.permissions = {{"admins", ""}, {"", "ann"}};
  Defaults defaults;
  defaults.retry = Retry{.limit = 2};
  defaults.limits = Limits{.cpus = 1.5, .memory = 64LL << 20};
  defaults.timeout = std::chrono::minutes(5);
  defaults.queue = "default";
  defaults.priority = 4;
  job.defaults = defaults;
  job.webhooks = {Webhook{"http://example.com/hook",
                          {{"X-Key", "abc"}},
                          "job.StateChange",
                          "{{ job.state == 'COMPLETED' }}",
                          "{{ secrets.hook }}"}};

  Task t;
  t.name = "say hello";
  t.description = "greets";
  t.var = "greeting";
  t.if_expr = "{{ true }}";
  t.run = "echo -n hello > $BATON_OUTPUT";
  t.image = "alpine:3";
  t.cmd = {"sh", "-c", "echo"};
  t.entrypoint = {"/bin/sh"};
  t.env = {{"WHO", "{{ inputs.who }}"}};
  t.files = {{"script.py", "print(1)"}};
  t.workdir = "/work";
  t.queue = "gpu";
  t.priority = 9;
  AuxTask pre;
  pre.name = "prepare";
  pre.run = "echo pre";
  pre.timeout = std::chrono::seconds(10);
  pre.registry = Registry{"u", "p"};
  t.pre = {pre};
  t.post = {pre};
  AuxTask sidecar;
  sidecar.name = "web";
  sidecar.image = "nginx";
  sidecar.probe = Probe{"/health", 8080, std::chrono::seconds(5)};
  t.sidecars = {sidecar};
  t.mounts = {Mount{MountType::kVolume, "", "/data", {}},
              Mount{MountType::kBind, "/tmp", "/host", {{"ro", "true"}}},
              Mount{MountType::kTmpfs, "", "/scratch", {}}};
  t.networks = {"net1"};
  t.limits = Limits{.cpus = 0.5, .memory = 1LL << 30};
  t.gpus = "all";
  t.registry = Registry{"user", "pass"};
  t.tags = {"x"};
  t.timeout = std::chrono::milliseconds(1500);
  t.retry = Retry{.limit = 3,
                  .attempts = 1,
                  .initial_delay = std::chrono::seconds(1),
                  .scaling_factor = 2.5,
                  .max_delay = std::chrono::seconds(30),
                  .on = RetryOn{.exit_codes = {75}, .errors = {FailReason::kTimeout}},
                  .jitter = std::chrono::milliseconds(250)};
  t.on_failure = OnFailure{{t}, Then::kContinue};

  Task child;
  child.name = "square {{ item.value }}";
  child.run = "echo";
  Task each;
  each.name = "fan out";
  each.each = Each{"n", "{{ sequence(1, 4) }}", Box<Task>(child), 2};
  Task parallel;
  parallel.name = "together";
  parallel.parallel = Parallel{{child, child}};
  Task sub;
  sub.name = "child";
  sub.subjob = SubJob{"child job",
                      "d",
                      {child},
                      {{"a", "b"}},
                      {{"s", "t"}},
                      "{{ tasks.x }}",
                      AutoDelete{std::chrono::minutes(1)},
                      job.webhooks,
                      true,
                      TaskOrder::kDag,
                      {child},
                      {child}};
  sub.needs = {{"say hello", ""}, {"together", "{{ inputs.who == 'world' }}"}};
  sub.trigger_rule = TriggerRule::kNoneFailedMinOneSuccess;
  sub.optional = true;
  job.mode = TaskOrder::kDag;
  job.tasks = {t, each, parallel, sub};
  return job;
}

TEST(JobJsonTest, RoundTripsThroughJson) {
  Job job = FullJob();
  std::string text = ToJson(job).dump(2);
  JobParseResult parsed = ParseJob(text, DocumentFormat::kJson);
  ASSERT_TRUE(parsed.ok()) << parsed.Message() << "\n" << text;
  EXPECT_EQ(*parsed.job, job) << text;
}

TEST(JobJsonTest, RoundTripsAParsedYamlJob) {
  auto yaml = ParseJob(
      "name: j\ntasks:\n  - name: t\n    run: echo\n    timeout: 1m30s\n"
      "    limits: {memory: 64Mi, cpus: 2}\n",
      DocumentFormat::kYaml);
  ASSERT_TRUE(yaml.ok()) << yaml.Message();
  auto again = ParseJob(ToJson(*yaml.job).dump(), DocumentFormat::kJson);
  ASSERT_TRUE(again.ok()) << again.Message();
  EXPECT_EQ(*again.job, *yaml.job);
}

TEST(JobJsonTest, TasksRoundTripAlone) {
  for (const Task& task : FullJob().tasks) {
    auto decoded = DecodeTaskJson(ToJson(task).dump());
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    EXPECT_EQ(*decoded, task);
  }
  EXPECT_EQ(DecodeTaskJson(R"({"name":"t","priority":11})").status().message(),
            "1:24: priority: must be between 0 and 9, got 11");
  EXPECT_FALSE(DecodeTaskJson("[").ok());
}

TEST(JobJsonTest, StoredTasksSkipTheSubmissionRules) {
  // An evaluated env value may contain braces; an evaluated var may be long.
  std::string text =
      R"({"name":"t","env":{"A":"{{ not a template"},"var":")" + std::string(80, 'v') + R"("})";
  EXPECT_FALSE(DecodeTaskJson(text).ok());
  auto stored = DecodeTaskJson(text, DecodeMode::kStored);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(stored->env.at("A"), "{{ not a template");
  // The shape is still checked.
  EXPECT_FALSE(DecodeTaskJson(R"({"name":"t","env":[1]})", DecodeMode::kStored).ok());
}

TEST(JobJsonTest, UsesTheApiFieldNames) {
  json j = ToJson(FullJob());
  EXPECT_EQ(j["autoDelete"]["after"], "24h0m0s");
  EXPECT_EQ(j["wait"]["timeout"], "30s");
  EXPECT_EQ(j["timeout"], "1h30m0s");
  const json& t = j["tasks"][0];
  EXPECT_EQ(t["if"], "{{ true }}");
  EXPECT_EQ(t["retry"]["initialDelay"], "1s");
  EXPECT_EQ(t["retry"]["scalingFactor"], 2.5);
  EXPECT_EQ(t["retry"]["maxDelay"], "30s");
  EXPECT_EQ(t["limits"]["memory"], "1g");
  EXPECT_EQ(t["limits"]["cpus"], "0.5");
  EXPECT_EQ(t["timeout"], "1.5s");
  EXPECT_EQ(t["mounts"][1]["type"], "bind");
  EXPECT_EQ(t["sidecars"][0]["probe"]["port"], 8080);
  EXPECT_EQ(j["tasks"][1]["each"]["concurrency"], 2);
  EXPECT_EQ(j["tasks"][3]["subjob"]["detached"], true);
}

TEST(JobJsonTest, LeavesOutEmptyFields) {
  Job job;
  job.name = "j";
  Task t;
  t.name = "t";
  t.run = "echo";
  job.tasks = {t};
  EXPECT_EQ(ToJson(job).dump(), R"({"name":"j","tasks":[{"name":"t","run":"echo"}]})");
}

}  // namespace
}  // namespace baton

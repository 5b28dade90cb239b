#include "core/webhook.h"

#include <gtest/gtest.h>

#include "core/job_decode.h"

namespace baton {
namespace {

using nlohmann::json;

// A stored job of `definition` (JSON), as NewJobRecord builds its context.
JobRecord Stored(const std::string& definition, JobState state) {
  auto job = DecodeJobJson(definition);
  EXPECT_TRUE(job.ok()) << job.status().message();
  JobRecord record;
  record.id = "0123456789abcdef0123456789abcdef";
  record.state = state;
  record.job = *job;
  record.task_count = static_cast<int>(job->tasks.size());
  record.context = {{"inputs", job->inputs},
                    {"secrets", job->secrets},
                    {"tasks", json::object()},
                    {"job", {{"id", record.id}, {"name", job->name}}}};
  return record;
}

std::vector<WebhookDelivery> For(std::string_view event, const JobRecord& job,
                                 const TaskRecord* task = nullptr) {
  int n = 0;
  return WebhookDeliveriesFor(event, job, job.job, job.context, task, TimePoint{},
                              [&] { return "d" + std::to_string(++n); });
}

constexpr const char* kTask = R"("tasks": [{"name": "t", "run": "true"}])";

TEST(WebhookTest, AWebhookWithoutAnEventIsCalledOnJobStateChangesOnly) {
  JobRecord job = Stored(
      std::string(R"({"name": "j", "webhooks": [{"url": "http://127.0.0.1:1/h"}], )") + kTask + "}",
      JobState::kRunning);
  auto deliveries = For(kEventJobStateChange, job);
  ASSERT_EQ(deliveries.size(), 1u);
  EXPECT_EQ(deliveries[0].id, "d1");
  EXPECT_EQ(deliveries[0].url, "http://127.0.0.1:1/h");
  EXPECT_EQ(deliveries[0].state, DeliveryState::kPending);
  EXPECT_EQ(deliveries[0].event, "job.StateChange");
  EXPECT_TRUE(For(kEventJobProgress, job).empty());
  EXPECT_TRUE(For(kEventTaskStateChange, job).empty());
}

TEST(WebhookTest, TheBodyIsTheJobSummaryWithoutSecretsOrContext) {
  JobRecord job = Stored(std::string(R"({"name": "j", "secrets": {"k": "s3cr3t"},
      "webhooks": [{"url": "http://127.0.0.1:1/h"}], )") +
                             kTask + "}",
                         JobState::kCompleted);
  auto deliveries = For(kEventJobStateChange, job);
  ASSERT_EQ(deliveries.size(), 1u);
  json body = json::parse(deliveries[0].body);
  EXPECT_EQ(body["id"], job.id);
  EXPECT_EQ(body["name"], "j");
  EXPECT_EQ(body["state"], "COMPLETED");
  EXPECT_FALSE(body.contains("context"));
  EXPECT_FALSE(body.contains("secrets"));
  EXPECT_EQ(deliveries[0].body.find("s3cr3t"), std::string::npos);
}

TEST(WebhookTest, IfIsAConditionOverTheJobSummary) {
  std::string definition = std::string(R"({"name": "j", "webhooks": [{"url": "http://127.0.0.1:1/h",
      "if": "{{ job.state == 'COMPLETED' }}"}], )") +
                           kTask + "}";
  EXPECT_TRUE(For(kEventJobStateChange, Stored(definition, JobState::kRunning)).empty());
  EXPECT_EQ(For(kEventJobStateChange, Stored(definition, JobState::kCompleted)).size(), 1u);
}

// Tork's middleware/job/webhook_test.go (TestWebhookIfJobStatus) and
// middleware/task/webhook_test.go: Tork evaluates `if` over its Go structs, so its
// webhooks name the fields as Go does (job.State, job.ID, task.State, task.JobID).
TEST(WebhookTest, IfSeesTorksGoFieldNamesBesideBatons) {
  auto hook = [](const std::string& condition, const std::string& event = "job.StateChange") {
    return std::string(R"({"name": "j", "webhooks": [{"url": "http://127.0.0.1:1/h", "event": ")") +
           event + R"(", "if": ")" + condition + R"("}], )" + kTask + "}";
  };
  const std::string state = hook("{{ job.State == 'COMPLETED' }}");
  EXPECT_EQ(For(kEventJobStateChange, Stored(state, JobState::kCompleted)).size(), 1u);
  EXPECT_TRUE(For(kEventJobStateChange, Stored(state, JobState::kRunning)).empty());
  EXPECT_EQ(For(kEventJobStateChange,
                Stored(hook("{{ job.ID == '0123456789abcdef0123456789abcdef' && job.Name == 'j' && "
                            "job.TaskCount == 1 }}"),
                       JobState::kRunning))
                .size(),
            1u);

  TaskRecord task;
  task.id = "fedcba9876543210fedcba9876543210";
  task.job_id = "0123456789abcdef0123456789abcdef";
  task.task.name = "t";
  task.state = TaskState::kCompleted;
  const std::string both =
      hook("{{ task.State == 'COMPLETED' && job.State == 'COMPLETED' && task.JobID == job.ID }}",
           "task.StateChange");
  EXPECT_EQ(For(kEventTaskStateChange, Stored(both, JobState::kCompleted), &task).size(), 1u);
  EXPECT_TRUE(For(kEventTaskStateChange, Stored(both, JobState::kRunning), &task).empty());
  // Baton's names still work.
  EXPECT_EQ(For(kEventJobStateChange,
                Stored(hook("{{ job.state == 'COMPLETED' }}"), JobState::kCompleted))
                .size(),
            1u);
}

TEST(WebhookTest, TheBodyHasOnlyTheJsonNames) {
  JobRecord job = Stored(
      std::string(R"({"name": "j", "webhooks": [{"url": "http://127.0.0.1:1/h"}], )") + kTask + "}",
      JobState::kCompleted);
  auto deliveries = For(kEventJobStateChange, job);
  ASSERT_EQ(deliveries.size(), 1u);
  json body = json::parse(deliveries[0].body);
  EXPECT_TRUE(body.contains("state"));
  EXPECT_FALSE(body.contains("State"));
  EXPECT_FALSE(body.contains("ID"));
}

TEST(WebhookTest, HeadersAndSecretAreEvaluatedAgainstTheJobContext) {
  JobRecord job = Stored(std::string(R"({"name": "j", "secrets": {"token": "t0k", "hook": "k3y"},
      "inputs": {"who": "me"},
      "webhooks": [{"url": "http://127.0.0.1:1/{{ inputs.who }}",
                    "headers": {"Authorization": "Bearer {{ secrets.token }}"},
                    "secret": "{{ secrets.hook }}"}], )") +
                             kTask + "}",
                         JobState::kRunning);
  auto deliveries = For(kEventJobStateChange, job);
  ASSERT_EQ(deliveries.size(), 1u);
  EXPECT_EQ(deliveries[0].url, "http://127.0.0.1:1/me");
  EXPECT_EQ(deliveries[0].headers.at("Authorization"), "Bearer t0k");
  EXPECT_EQ(deliveries[0].secret, "k3y");
}

TEST(WebhookTest, TaskEventsCarryTheTaskSummaryAndSeeTaskInTheirIf) {
  JobRecord job = Stored(std::string(R"({"name": "j", "webhooks": [
      {"url": "http://127.0.0.1:1/s", "event": "task.StateChange",
       "if": "{{ task.state == 'FAILED' }}"},
      {"url": "http://127.0.0.1:1/p", "event": "task.Progress"}], )") +
                             kTask + "}",
                         JobState::kRunning);
  TaskRecord task;
  task.id = "fedcba9876543210fedcba9876543210";
  task.job_id = job.id;
  task.task.name = "t";
  task.state = TaskState::kRunning;
  task.progress = 40;
  EXPECT_TRUE(For(kEventTaskStateChange, job, &task).empty());
  auto progress = For(kEventTaskProgress, job, &task);
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_EQ(progress[0].task_id, task.id);
  json body = json::parse(progress[0].body);
  EXPECT_EQ(body["id"], task.id);
  EXPECT_EQ(body["jobId"], job.id);
  EXPECT_EQ(body["progress"], 40);
  task.state = TaskState::kFailed;
  auto failed = For(kEventTaskStateChange, job, &task);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(json::parse(failed[0].body)["state"], "FAILED");
  // A task event needs its task.
  EXPECT_TRUE(For(kEventTaskStateChange, job, nullptr).empty());
}

TEST(WebhookTest, ATemplateThatFailsGivesAFailedDeliveryNamingTheFieldNotTheValue) {
  JobRecord job = Stored(std::string(R"({"name": "j", "secrets": {"token": "t0k"},
      "webhooks": [{"url": "http://127.0.0.1:1/h",
                    "headers": {"X-Token": "{{ secrets.token }}", "X-Bad": "x"}}], )") +
                             kTask + "}",
                         JobState::kRunning);
  // A malformed template is refused at submission; one that fails only when evaluated
  // (here: a function that does not exist) reaches this.
  job.job.webhooks[0].headers["X-Bad"] = "{{ noSuchFunction(1) }}";
  auto deliveries = For(kEventJobStateChange, job);
  ASSERT_EQ(deliveries.size(), 1u);
  EXPECT_EQ(deliveries[0].state, DeliveryState::kFailed);
  EXPECT_NE(deliveries[0].error.find("webhooks[0].headers.X-Bad"), std::string::npos)
      << deliveries[0].error;
  EXPECT_TRUE(deliveries[0].headers.empty());
  EXPECT_TRUE(deliveries[0].completed_at.has_value());
}

}  // namespace
}  // namespace baton

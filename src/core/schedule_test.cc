#include "core/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/job_decode.h"
#include "core/job_json.h"
#include "core/record_json.h"
#include "core/records.h"

namespace baton {
namespace {

using ::testing::HasSubstr;

TEST(ScheduleTest, WireStringsRoundTrip) {
  for (ScheduleState s : {ScheduleState::kActive, ScheduleState::kPaused}) {
    EXPECT_EQ(ParseScheduleState(ToString(s)), s);
  }
  for (OverlapPolicy p : {OverlapPolicy::kAllow, OverlapPolicy::kSkip, OverlapPolicy::kBufferOne,
                          OverlapPolicy::kCancelOther}) {
    EXPECT_EQ(ParseOverlapPolicy(ToString(p)), p);
  }
  for (CatchUpFire f : {CatchUpFire::kAll, CatchUpFire::kLatest}) {
    EXPECT_EQ(ParseCatchUpFire(ToString(f)), f);
  }
  EXPECT_EQ(ToString(ScheduleState::kPaused), "PAUSED");
  EXPECT_EQ(ToString(OverlapPolicy::kBufferOne), "buffer_one");
  EXPECT_FALSE(ParseOverlapPolicy("queue").has_value());
}

TEST(ScheduleTest, TorksScheduledJobJsonParsesWithDefaults) {
  ScheduledJobParseResult parsed = ParseScheduledJob(R"({
    "name": "hourly report",
    "schedule": {"cron": "0 * * * *"},
    "tasks": [{"name": "say", "image": "alpine", "run": "echo hi"}]
  })",
                                                     DocumentFormat::kJson);
  ASSERT_TRUE(parsed.ok()) << parsed.Message();
  EXPECT_EQ(parsed.job->name, "hourly report");
  EXPECT_FALSE(parsed.job->schedule.has_value());
  EXPECT_EQ(parsed.schedule->cron, "0 * * * *");
  EXPECT_EQ(parsed.schedule->timezone, "");
  EXPECT_EQ(parsed.schedule->overlap, OverlapPolicy::kAllow);
  EXPECT_EQ(parsed.schedule->catch_up_window, kDefaultCatchUpWindow);
  EXPECT_EQ(parsed.schedule->catch_up, CatchUpFire::kAll);
}

// Tork's documentation's scheduled job, as written there.
TEST(ScheduleTest, TorksDocumentedScheduledJobParses) {
  ScheduledJobParseResult parsed = ParseScheduledJob(R"(
name: scheduled job test
schedule:
  cron: "0/5 * * * *"   # runs every 5 minutes
tasks:
  - name: my first task
    image: alpine:3.18.3
    run: echo -n hello world
)",
                                                     DocumentFormat::kYaml);
  ASSERT_TRUE(parsed.ok()) << parsed.Message();
  EXPECT_EQ(parsed.schedule->cron, "0/5 * * * *");
  Result<CompiledSchedule> compiled = CompileSchedule(*parsed.schedule);
  ASSERT_TRUE(compiled.ok());
  EXPECT_EQ(FormatTime(*compiled->cron.Next(*ParseTime("2026-05-01T10:01:00Z"), compiled->zone)),
            "2026-05-01T10:05:00.000Z");
}

TEST(ScheduleTest, BatonsScheduleFieldsParseFromYaml) {
  ScheduledJobParseResult parsed = ParseScheduledJob(R"(
name: nightly
schedule:
  cron: "30 2 * * *"
  timezone: America/New_York
  overlap: buffer_one
  catchUp:
    window: 6h
    fire: latest
tasks:
  - name: backup
    run: echo backup
)",
                                                     DocumentFormat::kYaml);
  ASSERT_TRUE(parsed.ok()) << parsed.Message();
  EXPECT_EQ(parsed.schedule->timezone, "America/New_York");
  EXPECT_EQ(parsed.schedule->overlap, OverlapPolicy::kBufferOne);
  EXPECT_EQ(parsed.schedule->catch_up_window, std::chrono::hours(6));
  EXPECT_EQ(parsed.schedule->catch_up, CatchUpFire::kLatest);
}

TEST(ScheduleTest, ProblemsNameTheirFields) {
  ScheduledJobParseResult parsed = ParseScheduledJob(R"(
name: bad
wait: {timeout: 1m}
schedule:
  cron: "61 * * * *"
  timezone: Mars/Olympus
  overlap: queue
  catchUp: {window: 10d, fire: some, extra: 1}
tasks:
  - name: t
    run: echo
)",
                                                     DocumentFormat::kYaml);
  ASSERT_FALSE(parsed.ok());
  std::string message = parsed.Message();
  EXPECT_THAT(message, HasSubstr("wait: a scheduled job cannot wait"));
  EXPECT_THAT(message, HasSubstr("schedule.cron: cron: minute: 61 is out of range 0-59"));
  EXPECT_THAT(message, HasSubstr("schedule.timezone: unknown time zone \"Mars/Olympus\""));
  EXPECT_THAT(message, HasSubstr("schedule.overlap: unknown overlap policy \"queue\""));
  EXPECT_THAT(message, HasSubstr("schedule.catchUp.fire: expected all or latest"));
  EXPECT_THAT(message, HasSubstr("schedule.catchUp.extra: unknown field"));
  EXPECT_FALSE(parsed.job.has_value());
}

TEST(ScheduleTest, MissingScheduleOrCronIsAProblem) {
  const char* tasks = R"("tasks": [{"name": "t", "run": "echo"}])";
  ScheduledJobParseResult none =
      ParseScheduledJob(std::string(R"({"name": "n", )") + tasks + "}", DocumentFormat::kJson);
  EXPECT_THAT(none.Message(), HasSubstr("schedule: a scheduled job needs a schedule with a cron"));
  ScheduledJobParseResult no_cron = ParseScheduledJob(
      std::string(R"({"name": "n", "schedule": {"timezone": "UTC"}, )") + tasks + "}",
      DocumentFormat::kJson);
  EXPECT_THAT(no_cron.Message(), HasSubstr("schedule.cron: a schedule needs a cron"));
  // The job is validated as any submission.
  ScheduledJobParseResult no_tasks =
      ParseScheduledJob(R"({"name": "n", "schedule": {"cron": "@hourly"}})", DocumentFormat::kJson);
  EXPECT_THAT(no_tasks.Message(), HasSubstr("tasks: a job needs at least one task"));
}

ScheduledJobRecord Record() {
  ScheduledJobRecord r;
  r.id = "0123456789abcdef0123456789abcdef";
  r.schedule.cron = "*/5 * * * *";
  r.schedule.timezone = "Europe/Paris";
  r.schedule.overlap = OverlapPolicy::kSkip;
  r.job.name = "every five";
  r.job.secrets = {{"token", "s3cret"}};
  Task t;
  t.name = "t";
  t.run = "echo";
  r.job.tasks.push_back(t);
  r.created_at = *ParseTime("2026-05-01T10:00:00Z");
  r.updated_at = r.created_at;
  r.last_tick_at = r.created_at;
  r.next_tick_at = *ParseTime("2026-05-01T10:05:00Z");
  return r;
}

TEST(ScheduleTest, JsonShowsTorksCronAndStateWithTheSchedule) {
  nlohmann::json full = ToJson(Record(), /*summary=*/false);
  EXPECT_EQ(full["id"], "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(full["cron"], "*/5 * * * *");
  EXPECT_EQ(full["state"], "ACTIVE");
  EXPECT_EQ(full["schedule"]["timezone"], "Europe/Paris");
  EXPECT_EQ(full["schedule"]["overlap"], "skip");
  EXPECT_EQ(full["schedule"]["catchUp"]["window"], "1m0s");
  EXPECT_EQ(full["nextRunAt"], "2026-05-01T10:05:00.000Z");
  EXPECT_EQ(full["tasks"].size(), 1u);
  EXPECT_EQ(full["secrets"]["token"], "s3cret");  // the API redacts it
  nlohmann::json summary = ToJson(Record(), /*summary=*/true);
  EXPECT_FALSE(summary.contains("tasks"));
  EXPECT_FALSE(summary.contains("secrets"));
  EXPECT_EQ(summary["name"], "every five");
  ScheduledJobRecord paused = Record();
  paused.state = ScheduleState::kPaused;
  EXPECT_FALSE(ToJson(paused, true).contains("nextRunAt"));
}

TEST(ScheduleTest, FiredJobCarriesItsScheduleThroughStorage) {
  Job fired = FiredJob(Record());
  ASSERT_TRUE(fired.schedule.has_value());
  EXPECT_EQ(fired.schedule->id, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(fired.schedule->cron, "*/5 * * * *");
  // Stored and read back (the jobs table's definition column).
  Result<Job> stored = DecodeJobJson(ToJson(fired).dump(), DecodeMode::kStored);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(*stored, fired);
  // A submission may not set it.
  Result<Job> submitted = DecodeJobJson(ToJson(fired).dump(), DecodeMode::kSubmitted);
  EXPECT_FALSE(submitted.ok());
  // The job's JSON (and summary) show it as Tork does.
  JobRecord record;
  record.id = "fedcba9876543210fedcba9876543210";
  record.job = fired;
  EXPECT_EQ(ToJson(record, true)["schedule"],
            (nlohmann::json{{"id", "0123456789abcdef0123456789abcdef"}, {"cron", "*/5 * * * *"}}));
}

TEST(ScheduleTest, CompileScheduleNamesTheField) {
  ScheduleSpec spec;
  spec.cron = "* * *";
  EXPECT_THAT(CompileSchedule(spec).status().message(), HasSubstr("schedule.cron: cron: expected"));
  spec.cron = "* * * * *";
  spec.timezone = "Nowhere/Land";
  EXPECT_THAT(CompileSchedule(spec).status().message(), HasSubstr("schedule.timezone"));
  spec.timezone = "Asia/Tokyo";
  EXPECT_TRUE(CompileSchedule(spec).ok());
}

}  // namespace
}  // namespace baton

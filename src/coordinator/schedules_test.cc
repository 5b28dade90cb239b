#include "coordinator/schedules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "broker/inmemory/inmemory_broker.h"
#include "coordinator/coordinator.h"
#include "core/states.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "testing/fake_clock.h"
#include "testing/faulty_datastore.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

TimePoint At(std::string_view text) { return *ParseTime(text); }

Job OneTaskJob(const std::string& name) {
  Job job;
  job.name = name;
  Task task;
  task.name = "say";
  task.run = "echo hi";
  job.tasks.push_back(task);
  return job;
}

ScheduleSpec Every(std::string cron, OverlapPolicy overlap = OverlapPolicy::kAllow) {
  ScheduleSpec spec;
  spec.cron = std::move(cron);
  spec.overlap = overlap;
  return spec;
}

// A coordinator over SQLite and the in-memory broker, no worker: fired jobs are started
// (their first task queued) and stay active until a test cancels them. The firing loop is
// driven by hand (FireDue) unless a test starts the coordinator.
class SchedulesTest : public ::testing::Test {
 protected:
  explicit SchedulesTest(TimePoint start = At("2026-05-01T12:00:30Z")) : clock_(start) {}

  void SetUp() override {
    auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
    ASSERT_TRUE(ds.ok()) << ds.status().message();
    datastore_ = std::move(*ds);
    coordinator_ = std::make_unique<Coordinator>(*datastore_, broker_, clock_, clock_);
  }

  void TearDown() override { coordinator_.reset(); }

  Schedules& schedules() { return coordinator_->schedules(); }

  ScheduledJobRecord Create(const ScheduleSpec& spec, const std::string& name = "tick") {
    auto created = schedules().Create(OneTaskJob(name), spec);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? *created : ScheduledJobRecord{};
  }

  int FireDue() {
    auto look = schedules().FireDue();
    EXPECT_TRUE(look.ok()) << look.status().ToString();
    return look.ok() ? look->fired : -1;
  }

  // The jobs scheduled job `id` fired, oldest first.
  std::vector<JobRecord> Fired(const std::string& id) {
    JobQuery query;
    query.size = 100;
    auto page = datastore_->ListJobs(query);
    EXPECT_TRUE(page.ok());
    std::vector<JobRecord> out;
    for (const JobRecord& job : page->items) {
      if (job.job.schedule && job.job.schedule->id == id) out.insert(out.begin(), job);
    }
    return out;
  }

  ScheduledJobRecord Row(const std::string& id) {
    auto row = schedules().Get(id);
    EXPECT_TRUE(row.ok()) << row.status().ToString();
    return row.ok() ? *row : ScheduledJobRecord{};
  }

  testing::FakeClock clock_;
  InMemoryBroker broker_;
  std::unique_ptr<SqliteDatastore> datastore_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(SchedulesTest, EveryMinuteFiresEachTickOnceWithItsSchedule) {
  ScheduledJobRecord s = Create(Every("* * * * *"));
  EXPECT_EQ(s.next_tick_at, At("2026-05-01T12:01:00Z"));
  EXPECT_EQ(FireDue(), 0);  // nothing due yet
  clock_.Advance(30s);
  EXPECT_EQ(FireDue(), 1);
  EXPECT_EQ(FireDue(), 0);  // the same tick again: taken
  clock_.Advance(1min);
  EXPECT_EQ(FireDue(), 1);
  std::vector<JobRecord> fired = Fired(s.id);
  ASSERT_EQ(fired.size(), 2u);
  for (const JobRecord& job : fired) {
    EXPECT_EQ(job.job.name, "tick");
    EXPECT_EQ(job.job.schedule->cron, "* * * * *");
    EXPECT_NE(job.state, JobState::kPending);  // started through the scheduler
  }
  ScheduledJobRecord row = Row(s.id);
  EXPECT_EQ(row.last_tick_at, At("2026-05-01T12:02:00Z"));
  EXPECT_EQ(row.next_tick_at, At("2026-05-01T12:03:00Z"));
  EXPECT_EQ(row.last_job_id, fired.back().id);
}

TEST_F(SchedulesTest, TheStartedCoordinatorFiresTicksOnItsOwn) {
  ScheduledJobRecord s = Create(Every("*/2 * * * *"));
  ASSERT_TRUE(coordinator_->Start({}).ok());
  clock_.Advance(5min);  // 12:02, 12:04
  EXPECT_EQ(Fired(s.id).size(), 2u);
  // One created while it runs is looked for at its first tick, not a max_idle later.
  ScheduledJobRecord hourly = Create(Every("0 13 * * *"));
  clock_.Advance(At("2026-05-01T13:00:00Z") - clock_.Now());
  EXPECT_EQ(Fired(hourly.id).size(), 1u);
  coordinator_->Stop();
}

TEST_F(SchedulesTest, ALookReportsTheEarliestTickAsTheNextLook) {
  Create(Every("0 0 1 1 *"));  // yearly
  Create(Every("0 0 * * *"));  // daily
  auto look = schedules().FireDue();
  ASSERT_TRUE(look.ok());
  EXPECT_EQ(look->next, At("2026-05-02T00:00:00Z"));
}

TEST_F(SchedulesTest, SkipDropsTicksWhileTheLastJobIsActive) {
  ScheduledJobRecord s = Create(Every("* * * * *", OverlapPolicy::kSkip));
  clock_.Advance(30s);
  EXPECT_EQ(FireDue(), 1);
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(1min);
    EXPECT_EQ(FireDue(), 0);
  }
  std::vector<JobRecord> fired = Fired(s.id);
  ASSERT_EQ(fired.size(), 1u);
  ASSERT_TRUE(coordinator_->Cancel(fired[0].id).ok());
  clock_.Advance(1min);
  EXPECT_EQ(FireDue(), 1);
  EXPECT_EQ(Fired(s.id).size(), 2u);
}

TEST_F(SchedulesTest, BufferOneHoldsOneTickAndFiresItWhenTheLastJobEnds) {
  ScheduledJobRecord s = Create(Every("* * * * *", OverlapPolicy::kBufferOne));
  clock_.Advance(30s);
  EXPECT_EQ(FireDue(), 1);
  for (int i = 0; i < 3; ++i) {  // three ticks while it runs: one is held
    clock_.Advance(1min);
    EXPECT_EQ(FireDue(), 0);
  }
  ScheduledJobRecord row = Row(s.id);
  ASSERT_TRUE(row.buffered_tick_at.has_value());
  EXPECT_EQ(*row.buffered_tick_at, At("2026-05-01T12:02:00Z"));
  ASSERT_TRUE(coordinator_->Cancel(Fired(s.id)[0].id).ok());
  clock_.Advance(1s);  // before the next tick
  EXPECT_EQ(FireDue(), 1);
  EXPECT_EQ(Fired(s.id).size(), 2u);
  EXPECT_FALSE(Row(s.id).buffered_tick_at.has_value());
}

TEST_F(SchedulesTest, CancelOtherCancelsTheLastJobAndFires) {
  ScheduledJobRecord s = Create(Every("* * * * *", OverlapPolicy::kCancelOther));
  clock_.Advance(30s);
  EXPECT_EQ(FireDue(), 1);
  clock_.Advance(1min);
  EXPECT_EQ(FireDue(), 1);
  std::vector<JobRecord> fired = Fired(s.id);
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(datastore_->GetJob(fired[0].id)->state, JobState::kCancelled);
  EXPECT_FALSE(IsTerminal(datastore_->GetJob(fired[1].id)->state));
}

TEST_F(SchedulesTest, AllowFiresWhileTheLastJobIsActive) {
  ScheduledJobRecord s = Create(Every("* * * * *"));
  clock_.Advance(30s);
  EXPECT_EQ(FireDue(), 1);
  clock_.Advance(1min);
  EXPECT_EQ(FireDue(), 1);
  std::vector<JobRecord> fired = Fired(s.id);
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_FALSE(IsTerminal(datastore_->GetJob(fired[0].id)->state));
}

TEST_F(SchedulesTest, MissedTicksFireWithinTheCatchUpWindowOnly) {
  ScheduleSpec spec = Every("* * * * *");
  spec.catch_up_window = 5min;
  ScheduledJobRecord s = Create(spec);
  clock_.Advance(10min);  // 12:10:30: ticks 12:01 .. 12:10 missed; 12:06 .. 12:10 within
  EXPECT_EQ(FireDue(), 5);
  EXPECT_EQ(Fired(s.id).size(), 5u);
  EXPECT_EQ(Row(s.id).last_tick_at, At("2026-05-01T12:10:00Z"));
  EXPECT_EQ(FireDue(), 0);
}

TEST_F(SchedulesTest, CatchUpLatestFiresOnlyTheLatestMissedTick) {
  ScheduleSpec spec = Every("* * * * *");
  spec.catch_up_window = 1h;
  spec.catch_up = CatchUpFire::kLatest;
  ScheduledJobRecord s = Create(spec);
  clock_.Advance(10min);
  EXPECT_EQ(FireDue(), 1);
  EXPECT_EQ(Row(s.id).last_tick_at, At("2026-05-01T12:10:00Z"));
  EXPECT_EQ(Row(s.id).next_tick_at, At("2026-05-01T12:11:00Z"));
}

TEST_F(SchedulesTest, TicksOlderThanTheWindowAreNotFiredAndCountingGoesOn) {
  ScheduleSpec spec = Every("0 * * * *");  // hourly
  ScheduledJobRecord s = Create(spec);     // window: the default minute
  clock_.Advance(3h + 2min);               // 15:02:30: 13:00, 14:00 and 15:00 are past it
  EXPECT_EQ(FireDue(), 0);
  EXPECT_TRUE(Fired(s.id).empty());
  EXPECT_EQ(Row(s.id).next_tick_at, At("2026-05-01T16:00:00Z"));
  clock_.Advance(58min);  // 16:00:30: 16:00 is half a minute late, within the window
  EXPECT_EQ(FireDue(), 1);
}

TEST_F(SchedulesTest, ASkippedLocalTimeFiresOnceInTheZone) {
  // New York springs forward on 2026-03-08: 02:30 never happens; it fires at 03:00 EDT.
  ScheduleSpec spec = Every("30 2 * * *");
  spec.timezone = "America/New_York";
  spec.catch_up_window = 48h;
  clock_.Advance(At("2026-03-07T12:00:00Z") - clock_.Now());  // moving back is fine here
  ScheduledJobRecord s = Create(spec);
  EXPECT_EQ(s.next_tick_at, At("2026-03-08T07:00:00Z"));
  clock_.Advance(24h);  // 2026-03-08 12:00Z
  EXPECT_EQ(FireDue(), 1);
  EXPECT_EQ(Row(s.id).last_tick_at, At("2026-03-08T07:00:00Z"));
  EXPECT_EQ(Row(s.id).next_tick_at, At("2026-03-09T06:30:00Z"));
}

TEST_F(SchedulesTest, ARepeatedLocalTimeFiresOnceInTheZone) {
  // New York falls back on 2026-11-01: 01:30 happens twice; it fires at the first.
  ScheduleSpec spec = Every("30 1 * * *");
  spec.timezone = "America/New_York";
  spec.catch_up_window = 48h;
  clock_.Advance(At("2026-10-31T12:00:00Z") - clock_.Now());
  ScheduledJobRecord s = Create(spec);
  clock_.Advance(24h);  // 2026-11-01 12:00Z, both 01:30s past
  EXPECT_EQ(FireDue(), 1);
  EXPECT_EQ(Fired(s.id).size(), 1u);
  EXPECT_EQ(Row(s.id).last_tick_at, At("2026-11-01T05:30:00Z"));
  EXPECT_EQ(Row(s.id).next_tick_at, At("2026-11-02T06:30:00Z"));
}

TEST_F(SchedulesTest, TwoCoordinatorsOverOneDatastoreFireEachTickOnce) {
  InMemoryBroker other_broker;
  Coordinator other(*datastore_, other_broker, clock_, clock_);
  ScheduleSpec spec = Every("* * * * *");
  spec.catch_up_window = 1h;
  ScheduledJobRecord s = Create(spec);
  for (int minute = 0; minute < 5; ++minute) {
    clock_.Advance(1min);
    std::atomic<int> fired{0};
    {
      std::jthread a([&] { fired += schedules().FireDue()->fired; });
      std::jthread b([&] { fired += other.schedules().FireDue()->fired; });
    }
    EXPECT_EQ(fired.load(), 1) << "minute " << minute;
  }
  EXPECT_EQ(Fired(s.id).size(), 5u);
}

// A fire whose scope fails after writing the job (a crash before the commit, as far as
// the database knows) stores neither the job nor the tick: the next look fires the tick,
// once.
TEST_F(SchedulesTest, AFailedFireStoresNeitherJobNorTickAndTheNextLookFiresItOnce) {
  testing::FaultyDatastore faulty(*datastore_);
  InMemoryBroker broker;
  Coordinator coordinator(faulty, broker, clock_, clock_);
  auto created = coordinator.schedules().Create(OneTaskJob("tick"), Every("* * * * *"));
  ASSERT_TRUE(created.ok());
  clock_.Advance(30s);
  faulty.FailNthCall(1, Unavailable("connection lost"),
                     testing::FaultyDatastore::Method("Transaction.UpdateScheduledJob"));
  auto failed = coordinator.schedules().FireDue();
  ASSERT_TRUE(failed.ok());  // logged; the next look tries again
  EXPECT_EQ(failed->fired, 0);
  EXPECT_TRUE(Fired(created->id).empty());
  EXPECT_EQ(Row(created->id).next_tick_at, At("2026-05-01T12:01:00Z"));
  auto again = coordinator.schedules().FireDue();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->fired, 1);
  EXPECT_EQ(Fired(created->id).size(), 1u);
  EXPECT_EQ(coordinator.schedules().FireDue()->fired, 0);
}

TEST_F(SchedulesTest, PauseAndResumeGuardTheirStatesAndResumeOwesNoTicks) {
  ScheduledJobRecord s = Create(Every("* * * * *"));
  ASSERT_TRUE(schedules().Pause(s.id).ok());
  Status again = schedules().Pause(s.id);
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("is PAUSED: only an ACTIVE one can be paused"));
  clock_.Advance(5min);
  EXPECT_EQ(FireDue(), 0);
  ASSERT_TRUE(schedules().Resume(s.id).ok());
  EXPECT_EQ(schedules().Resume(s.id).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(FireDue(), 0);  // the ticks while paused are not owed
  EXPECT_EQ(Row(s.id).next_tick_at, At("2026-05-01T12:06:00Z"));
  clock_.Advance(1min);
  EXPECT_EQ(FireDue(), 1);
  EXPECT_EQ(schedules().Pause("0123456789abcdef0123456789abcdef").code(), StatusCode::kNotFound);
}

TEST_F(SchedulesTest, UpdateReplacesDefinitionAndScheduleAndCountsFromNow) {
  ScheduledJobRecord s = Create(Every("0 0 * * *"));
  clock_.Advance(2min);
  ScheduleSpec spec = Every("*/5 * * * *");
  auto updated = schedules().Update(s.id, OneTaskJob("renamed"), spec);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ(updated->created_at, s.created_at);
  EXPECT_EQ(updated->next_tick_at, At("2026-05-01T12:05:00Z"));
  clock_.Advance(3min);
  EXPECT_EQ(FireDue(), 1);
  EXPECT_EQ(Fired(s.id).at(0).job.name, "renamed");
  EXPECT_EQ(Fired(s.id).at(0).job.schedule->cron, "*/5 * * * *");
  spec.timezone = "Nowhere/Land";
  EXPECT_THAT(schedules().Update(s.id, OneTaskJob("x"), spec).status().message(),
              HasSubstr("schedule.timezone"));
}

TEST_F(SchedulesTest, DeleteStopsTicksAndKeepsTheFiredJobs) {
  ScheduledJobRecord s = Create(Every("* * * * *"));
  clock_.Advance(1min);
  EXPECT_EQ(FireDue(), 1);
  ASSERT_TRUE(schedules().Delete(s.id).ok());
  EXPECT_EQ(schedules().Delete(s.id).code(), StatusCode::kNotFound);
  EXPECT_EQ(schedules().Get(s.id).status().code(), StatusCode::kNotFound);
  clock_.Advance(1min);
  EXPECT_EQ(FireDue(), 0);
  EXPECT_EQ(Fired(s.id).size(), 1u);
}

}  // namespace
}  // namespace baton

// The scheduler's parts alone: Deadlines over a fake clock, WorkerSignals over the in-memory
// broker and SQLite, JobCache's scopes, the Starter's thread.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "broker/inmemory/inmemory_broker.h"
#include "coordinator/deadlines.h"
#include "coordinator/job_cache.h"
#include "coordinator/starter.h"
#include "coordinator/worker_signals.h"
#include "core/messages.h"
#include "core/names.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "testing/fake_clock.h"
#include "testing/wait_for.h"

namespace baton {
namespace {

using std::chrono::seconds;

TEST(DeadlinesTest, ArmingAJobTimeoutAgainReplacesIt) {
  testing::FakeClock clock;
  Deadlines deadlines(clock);
  int first = 0;
  int second = 0;
  deadlines.ArmJobTimeout("j", clock.Now() + seconds(5), [&] { ++first; });
  deadlines.ArmJobTimeout("j", clock.Now() + seconds(10), [&] { ++second; });
  EXPECT_EQ(deadlines.Armed(), 1u);
  clock.Advance(seconds(20));
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
  EXPECT_EQ(deadlines.Armed(), 0u);
}

TEST(DeadlinesTest, ADisarmedTimeoutNeverFires) {
  testing::FakeClock clock;
  Deadlines deadlines(clock);
  int fired = 0;
  deadlines.ArmJobTimeout("j", clock.Now() + seconds(5), [&] { ++fired; });
  deadlines.At(clock.Now() + seconds(5), [&] { ++fired; });
  deadlines.DisarmJobTimeout("j");
  clock.Advance(seconds(10));
  EXPECT_EQ(fired, 1);  // the one-shot only
}

TEST(DeadlinesTest, DestroyingItCancelsWhatIsArmed) {
  testing::FakeClock clock;
  int fired = 0;
  {
    Deadlines deadlines(clock);
    deadlines.At(clock.Now() + seconds(5), [&] { ++fired; });
    deadlines.ArmJobTimeout("j", clock.Now() + seconds(5), [&] { ++fired; });
  }
  clock.Advance(seconds(10));
  EXPECT_EQ(fired, 0);
}

class WorkerSignalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
    ASSERT_TRUE(ds.ok()) << ds.status().message();
    datastore_ = std::move(*ds);
  }
  void Heartbeat(const std::string& node) {
    NodeRecord n;
    n.id = node;
    n.queue = "default:1";
    n.last_heartbeat_at = clock_.Now();
    ASSERT_TRUE(datastore_->UpsertNode(n).ok());
  }
  // The task ids told to `node` so far.
  std::vector<std::string> ToldTo(const std::string& node) {
    std::vector<std::string> ids;
    auto sub = broker_.Subscribe(CancelQueueFor(node), 16, [&](std::unique_ptr<Delivery> d) {
      auto m = DecodeCancelTask(d->body());
      MutexLock lock(mu_);
      if (m.ok()) ids.insert(ids.end(), m->task_ids.begin(), m->task_ids.end());
      (void)d->Ack();
    });
    EXPECT_TRUE(sub.ok());
    testing::WaitFor(
        [&] {
          auto q = broker_.Queue(CancelQueueFor(node));
          return q.ok() && q->size == 0 && q->unacked == 0;
        },
        seconds(5));
    (*sub)->Close();
    MutexLock lock(mu_);
    return ids;
  }

  testing::FakeClock clock_;
  InMemoryBroker broker_;
  std::unique_ptr<SqliteDatastore> datastore_;
  Mutex mu_;
};

TEST_F(WorkerSignalsTest, DropsGoToLiveWorkersFirstAndKillsToTheirNode) {
  WorkerSignals signals(broker_, *datastore_, clock_, seconds(30));
  Heartbeat("a");
  signals.Tell({"queued"}, {{"b", {"running"}}});
  EXPECT_EQ(ToldTo("a"), std::vector<std::string>{"queued"});
  EXPECT_EQ(ToldTo("b"), (std::vector<std::string>{"queued", "running"}));
}

TEST_F(WorkerSignalsTest, AWorkerHeardOfLateIsToldOfMissedDropsOnce) {
  WorkerSignals signals(broker_, *datastore_, clock_, seconds(30));
  signals.Tell({"queued"}, {});
  signals.TellMissedDrops("late");
  signals.TellMissedDrops("late");
  EXPECT_EQ(ToldTo("late"), std::vector<std::string>{"queued"});
  clock_.Advance(seconds(31));
  signals.TellMissedDrops("later");  // beyond the lease: forgotten
  EXPECT_TRUE(ToldTo("later").empty());
}

TEST_F(WorkerSignalsTest, AWorkerHeardOfIsToldOfThePausedJobsQueuedTasksBeforeItTakesOne) {
  JobRecord job;
  job.id = NewId();
  job.job.name = "paused";
  job.state = JobState::kPaused;
  job.created_at = clock_.Now();
  ASSERT_TRUE(datastore_->CreateJob(job).ok());
  TaskRecord queued;
  queued.id = NewId();
  queued.job_id = job.id;
  queued.position = 1;
  queued.state = TaskState::kScheduled;
  queued.created_at = clock_.Now();
  ASSERT_TRUE(datastore_->CreateTask(queued).ok());
  WorkerSignals signals(broker_, *datastore_, clock_, seconds(30));
  std::vector<CancelTask> told;
  auto sub = broker_.Subscribe(CancelQueueFor("new"), 16, [&](std::unique_ptr<Delivery> d) {
    auto m = DecodeCancelTask(d->body());
    MutexLock lock(mu_);
    if (m.ok()) told.push_back(*m);
    (void)d->Ack();
  });
  ASSERT_TRUE(sub.ok());
  signals.WorkerHeard("new");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        MutexLock lock(mu_);
        return told.size() == 2;
      },
      seconds(5)));
  (*sub)->Close();
  MutexLock lock(mu_);
  // The withdrawal first (the worker never starts it), then the complete drops.
  EXPECT_EQ(told[0].task_ids, std::vector<std::string>{queued.id});
  EXPECT_TRUE(told[0].withdraw);
  EXPECT_FALSE(told[0].complete);
  EXPECT_TRUE(told[1].task_ids.empty());
  EXPECT_TRUE(told[1].complete);
}

TEST(JobCacheTest, AScopeWrittenKeepsItsContextOnlyOncePublished) {
  JobCache::Scope scope;
  scope["j"] = JobCache::Context{3, std::make_shared<const nlohmann::json>(1), 1};
  JobCache::Wrote(scope, "j", nlohmann::json(2));
  ASSERT_TRUE(scope["j"].has_value());
  EXPECT_EQ(scope["j"]->version, 4);
  EXPECT_EQ(*scope["j"]->value, nlohmann::json(2));
  JobCache::Wrote(scope, "new", nlohmann::json(2));  // not read in the scope: read again
  EXPECT_FALSE(scope["new"].has_value());
}

TEST(StarterTest, StartsWhatIsAddedOnItsThread) {
  Mutex mu;
  std::vector<std::string> started;
  {
    Starter starter([&](const std::string& id) {
      MutexLock lock(mu);
      started.push_back(id);
    });
    starter.Add("a");
    starter.Add("b");
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          MutexLock lock(mu);
          return started.size() == 2;
        },
        seconds(5)));
  }
  EXPECT_EQ(started, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace baton

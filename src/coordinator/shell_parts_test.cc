// The scheduler's parts alone: Deadlines over a fake clock, WorkerSignals over the in-memory
// broker and SQLite, JobCache's scopes, the Starter's thread, AfterCommit over a fake
// executor and fake decisions.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "broker/inmemory/inmemory_broker.h"
#include "coordinator/after_commit.h"
#include "coordinator/deadlines.h"
#include "coordinator/job_cache.h"
#include "coordinator/starter.h"
#include "coordinator/worker_signals.h"
#include "core/messages.h"
#include "core/names.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "flow/flow.h"
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

// An executor that keeps each batch of row ids it is given and refuses the rows named in
// `refuse`, confirming the others. Used on the test's thread only.
class FakeExecutor : public Executor {
 public:
  explicit FakeExecutor(std::set<std::string> refuse) : refuse_(std::move(refuse)) {}
  StartReport Start(std::vector<TaskRecord> rows) override {
    StartReport report;
    batches.emplace_back();
    for (const TaskRecord& row : rows) {
      batches.back().push_back(row.id);
      if (refuse_.contains(row.id)) {
        report.refused.push_back({row.id, row.job_id, "the broker is full"});
      } else {
        report.published.push_back({row.id, row.job_id});
      }
    }
    return report;
  }
  std::vector<std::vector<std::string>> batches;

 private:
  const std::set<std::string> refuse_;
};

// AfterCommit with a durable broker and a 2 s republish delay. What it hands back to be
// decided is kept in `decided_` as "<event> <job id>" (a report's events with no job id, a
// task's with " <task id>" after); reports and job events are answered from
// `reported_answers_` and `job_answers_` (Ok once empty), task events with Ok. Timers fire
// on the test's thread (FakeClock::Advance).
class AfterCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
    ASSERT_TRUE(ds.ok()) << ds.status().message();
    datastore_ = std::move(*ds);
    signals_ = std::make_unique<WorkerSignals>(broker_, *datastore_, clock_, seconds(30));
    auto answer = [](std::vector<Status>& answers) {
      if (answers.empty()) return Status::Ok();
      Status s = answers.front();
      answers.erase(answers.begin());
      return s;
    };
    after_ = std::make_unique<AfterCommit>(
        Executors{.runnable = &executor_}, deadlines_, *signals_, clock_, /*durable_broker=*/true,
        seconds(2),
        AfterCommit::Decisions{
            .reported =
                [this, answer](const std::vector<flow::Event>& events) {
                  for (const flow::Event& e : events) decided_.push_back(Named(e, ""));
                  return answer(reported_answers_);
                },
            .job =
                [this, answer](const std::string& job_id, const flow::Event& event) {
                  decided_.push_back(Named(event, job_id));
                  return answer(job_answers_);
                },
            .task =
                [this](const std::string& task_id, const std::string& job_id,
                       const flow::Event& event) {
                  decided_.push_back(Named(event, job_id) + " " + task_id);
                  return Status::Ok();
                }});
  }
  static std::string Named(const flow::Event& event, const std::string& job_id) {
    return std::string(flow::NameOf(event)) + " " + job_id;
  }
  static TaskRecord Row(const std::string& id) {
    TaskRecord row;
    row.id = id;
    row.job_id = "j";
    return row;
  }

  testing::FakeClock clock_;
  InMemoryBroker broker_;
  std::unique_ptr<SqliteDatastore> datastore_;
  std::unique_ptr<WorkerSignals> signals_;
  FakeExecutor executor_{{"b"}};
  std::vector<std::string> decided_;
  std::vector<Status> reported_answers_;
  std::vector<Status> job_answers_;
  // Before deadlines_, as in the Scheduler: its timers call into it.
  std::unique_ptr<AfterCommit> after_;
  Deadlines deadlines_{clock_};
};

TEST_F(AfterCommitTest, StartsRowsInOneBatchAndRetriesTheRefusedWhenTheReportIsNotDecided) {
  reported_answers_ = {Unavailable("the datastore is away")};
  EXPECT_TRUE(after_->Run({flow::Start{Row("a")}, flow::Start{Row("b")}}).ok());
  EXPECT_EQ(executor_.batches, (std::vector<std::vector<std::string>>{{"a", "b"}}));
  EXPECT_EQ(decided_, (std::vector<std::string>{"Published ", "PublishRefused "}));
  decided_.clear();
  clock_.Advance(seconds(1));
  EXPECT_TRUE(decided_.empty());
  clock_.Advance(seconds(1));  // the republish delay: the refused row only, with its job
  EXPECT_EQ(decided_, std::vector<std::string>{"RetryDue j b"});
}

TEST_F(AfterCommitTest, AReportDecidedRetriesNothing) {
  EXPECT_TRUE(after_->Run({flow::Start{Row("a")}, flow::Start{Row("b")}}).ok());
  EXPECT_EQ(decided_.size(), 2u);
  EXPECT_EQ(deadlines_.Armed(), 0u);
}

TEST_F(AfterCommitTest, AJobTimeoutWhoseLockIsBusyIsDecidedAgainASecondLater) {
  job_answers_ = {Unavailable("the lock is busy")};
  EXPECT_TRUE(
      after_->Run({flow::ArmJobTimeout{"j", seconds(10), clock_.Now() + seconds(10)}}).ok());
  clock_.Advance(seconds(10));
  EXPECT_EQ(decided_, std::vector<std::string>{"JobTimedOut j"});
  clock_.Advance(seconds(1));
  EXPECT_EQ(decided_, (std::vector<std::string>{"JobTimedOut j", "JobTimedOut j"}));
  clock_.Advance(seconds(10));
  EXPECT_EQ(decided_.size(), 2u);
  EXPECT_EQ(deadlines_.Armed(), 0u);
}

TEST_F(AfterCommitTest, AnswersTheFirstRefusalAndStillTakesTheOtherEffectsInOrder) {
  Status s = after_->Run({flow::Refused{"the job is paused"},
                          flow::ArmJobTimeout{"j", seconds(10), clock_.Now() + seconds(10)},
                          flow::StartAt{"t", clock_.Now() + seconds(5)},
                          flow::DisarmJobTimeout{"j"}, flow::Refused{"a second reason"}});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "the job is paused");
  EXPECT_EQ(deadlines_.Armed(), 1u);  // the timeout was disarmed after it was armed
  clock_.Advance(seconds(10));
  EXPECT_EQ(decided_, std::vector<std::string>{"RetryDue  t"});  // its job is read
}

}  // namespace
}  // namespace baton

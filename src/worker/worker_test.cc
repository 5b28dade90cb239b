// The worker's reports and acks, with a real coordinator, the in-memory broker, SQLite in
// memory and a fake runtime. The worker publishes through a broker that counts what it
// publishes per queue.
#include "worker/worker.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "broker/inmemory/inmemory_broker.h"
#include "coordinator/coordinator.h"
#include "core/job_decode.h"
#include "core/names.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "testing/fake_clock.h"
#include "testing/fake_runtime.h"
#include "testing/wait_for.h"

namespace baton {
namespace {

using std::chrono::milliseconds;

class CountingBroker final : public Broker {
 public:
  explicit CountingBroker(Broker& inner) : inner_(inner) {}
  Status Publish(std::string_view queue, std::string body, int priority) override {
    {
      std::lock_guard lock(mu_);
      ++published_[std::string(queue)];
    }
    return inner_.Publish(queue, std::move(body), priority);
  }
  Result<std::unique_ptr<Subscription>> Subscribe(std::string_view queue, int prefetch,
                                                  DeliveryHandler handler) override {
    {
      std::lock_guard lock(mu_);
      ++subscribed_;
    }
    return inner_.Subscribe(queue, prefetch, std::move(handler));
  }
  Result<std::vector<QueueInfo>> Queues() override { return inner_.Queues(); }
  Result<QueueInfo> Queue(std::string_view name) override { return inner_.Queue(name); }
  Status DeleteQueue(std::string_view name) override { return inner_.DeleteQueue(name); }
  Status Health() override { return inner_.Health(); }
  Status Broadcast(std::string_view topic, std::string body) override {
    return inner_.Broadcast(topic, std::move(body));
  }
  Result<std::unique_ptr<Subscription>> SubscribeBroadcast(std::string_view topic,
                                                           BroadcastHandler handler) override {
    return inner_.SubscribeBroadcast(topic, std::move(handler));
  }

  int subscribed() {
    std::lock_guard lock(mu_);
    return subscribed_;
  }

  int published(std::string_view queue) {
    std::lock_guard lock(mu_);
    auto it = published_.find(std::string(queue));
    return it == published_.end() ? 0 : it->second;
  }

 private:
  Broker& inner_;
  std::mutex mu_;
  std::map<std::string, int, std::less<>> published_;
  int subscribed_ = 0;
};

// A runtime whose KillLeftovers notes how many subscriptions the worker had made by then,
// and answers `result`.
class LeftoversRuntime final : public testing::FakeRuntime {
 public:
  LeftoversRuntime(CountingBroker& broker, Status result)
      : broker_(broker), result_(std::move(result)) {}
  Status KillLeftovers() override {
    subscriptions_before_ = broker_.subscribed();
    ++calls_;
    return result_;
  }
  int calls_ = 0;
  int subscriptions_before_ = -1;

 private:
  CountingBroker& broker_;
  Status result_;
};

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
    ASSERT_TRUE(ds.ok()) << ds.status().message();
    datastore_ = std::move(*ds);
    CoordinatorOptions options;
    options.lease = std::chrono::hours(24);
    coordinator_ = std::make_unique<Coordinator>(*datastore_, broker_, clock_, clock_, options);
    ASSERT_TRUE(coordinator_->Start({"w"}).ok());
  }

  void TearDown() override {
    if (worker_) worker_->Stop(milliseconds(0));
    coordinator_->Stop();
  }

  void StartWorker(milliseconds report_start_after) {
    WorkerOptions options;
    options.node_id = "w";
    options.queues = {{"default", 2}};
    options.report_start_after = report_start_after;
    worker_ = std::make_unique<Worker>(counting_, runtime_, clock_, options);
    ASSERT_TRUE(worker_->Start().ok());
  }

  std::string Submit(const std::string& yaml) {
    auto parsed = ParseJob(yaml, DocumentFormat::kYaml);
    EXPECT_TRUE(parsed.ok()) << parsed.Message();
    auto job = coordinator_->Submit(*parsed.job);
    EXPECT_TRUE(job.ok()) << job.status().message();
    return job.ok() ? job->id : "";
  }

  TaskRecord OnlyTask(const std::string& job_id) {
    auto rows = datastore_->JobTasks(job_id);
    EXPECT_TRUE(rows.ok() && rows->size() == 1);
    return rows.ok() && !rows->empty() ? rows->front() : TaskRecord{};
  }

  QueueInfo DefaultQueue() {
    auto info = broker_.Queue("default");
    EXPECT_TRUE(info.ok());
    return info.ok() ? *info : QueueInfo{};
  }

  testing::FakeClock clock_;
  testing::FakeRuntime runtime_;
  InMemoryBroker broker_;
  CountingBroker counting_{broker_};
  std::unique_ptr<SqliteDatastore> datastore_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<Worker> worker_;
};

TEST_F(WorkerTest, StartKillsTheRuntimesLeftoversBeforeItSubscribesToAnything) {
  LeftoversRuntime runtime(counting_, Status::Ok());
  WorkerOptions options;
  options.node_id = "w";
  options.queues = {{"default", 1}};
  worker_ = std::make_unique<Worker>(counting_, runtime, clock_, options);
  ASSERT_TRUE(worker_->Start().ok());
  EXPECT_EQ(runtime.calls_, 1);
  EXPECT_EQ(runtime.subscriptions_before_, 0);
  EXPECT_GT(counting_.subscribed(), 0);
  worker_->Stop(milliseconds(0));
  worker_.reset();
}

TEST_F(WorkerTest, LeftoversThatCannotBeKilledFailTheStartBeforeAnyTaskIsTaken) {
  LeftoversRuntime runtime(counting_, Internal("processes of group 42 survived SIGKILL (1)"));
  WorkerOptions options;
  options.node_id = "w";
  options.queues = {{"default", 1}};
  worker_ = std::make_unique<Worker>(counting_, runtime, clock_, options);
  Status started = worker_->Start();
  EXPECT_FALSE(started.ok());
  EXPECT_EQ(started.message(), "processes of group 42 survived SIGKILL (1)");
  EXPECT_EQ(counting_.subscribed(), 0);
  worker_->Stop(milliseconds(0));
  worker_.reset();
}

// A worker that awaits the drops takes tasks once a coordinator told it of them (the
// coordinator answers its first heartbeat at once); with none to answer, after the wait.
TEST_F(WorkerTest, AWorkerAwaitingDropsStartsOnceToldOrAfterTheWait) {
  WorkerOptions options;
  options.node_id = "w";
  options.queues = {{"default", 1}};
  options.await_drops = std::chrono::seconds(30);
  worker_ = std::make_unique<Worker>(counting_, runtime_, clock_, options);
  auto began = std::chrono::steady_clock::now();
  ASSERT_TRUE(worker_->Start().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10));
  std::string id = Submit("name: after\ntasks:\n  - {name: t, run: ok}\n");
  auto done = coordinator_->Wait(id, std::chrono::seconds(10));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, JobState::kCompleted);

  InMemoryBroker alone;  // no coordinator reads its heartbeats
  options.node_id = "alone";
  options.await_drops = milliseconds(300);
  Worker lonely(alone, runtime_, clock_, options);
  began = std::chrono::steady_clock::now();
  ASSERT_TRUE(lonely.Start().ok());
  EXPECT_GE(std::chrono::steady_clock::now() - began, milliseconds(300));
  lonely.Stop(milliseconds(0));
}

TEST_F(WorkerTest, AShortTaskReportsOnlyItsOutcomeWithItsStartTime) {
  StartWorker(std::chrono::hours(1));
  std::string id = Submit("name: quick\ntasks:\n  - {name: quick, run: ok done}\n");
  auto done = coordinator_->Wait(id, std::chrono::seconds(10));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, JobState::kCompleted);
  EXPECT_EQ(counting_.published(kQueueStarted), 0);
  EXPECT_EQ(counting_.published(kQueueCompleted), 1);
  TaskRecord task = OnlyTask(id);
  EXPECT_EQ(task.state, TaskState::kCompleted);
  EXPECT_EQ(task.node_id, "w");
  EXPECT_TRUE(task.started_at.has_value());
  // Its message was acked once the outcome was sent.
  ASSERT_TRUE(::baton::testing::WaitFor([&] { return DefaultQueue().unacked == 0; }));
  EXPECT_EQ(DefaultQueue().size, 0);
}

TEST_F(WorkerTest, AnOutcomeWithoutAReportedStartGivesTheRowItsStartTime) {
  // On a queue no worker reads, the row stays SCHEDULED; the outcome then comes alone.
  std::string id = Submit("name: alone\ntasks:\n  - {name: alone, queue: nobody, run: ok}\n");
  ASSERT_TRUE(
      ::baton::testing::WaitFor([&] { return OnlyTask(id).state == TaskState::kScheduled; }));
  const TimePoint began = clock_.Now() - std::chrono::seconds(5);
  ASSERT_TRUE(coordinator_->scheduler()
                  .OnFinished(TaskFinished{.task_id = OnlyTask(id).id,
                                           .job_id = id,
                                           .node_id = "elsewhere",
                                           .outcome = TaskFinished::Outcome::kCompleted,
                                           .at = clock_.Now(),
                                           .started_at = began})
                  .ok());
  TaskRecord task = OnlyTask(id);
  EXPECT_EQ(task.state, TaskState::kCompleted);
  EXPECT_EQ(task.node_id, "elsewhere");
  ASSERT_TRUE(task.started_at.has_value());
  EXPECT_EQ(*task.started_at, began);
}

TEST_F(WorkerTest, ALongerTaskReportsItsStartOnceDueAndItsMessageIsAckedThen) {
  StartWorker(milliseconds(20));
  std::string id = Submit("name: long\ntasks:\n  - {name: long, run: hang}\n");
  ASSERT_TRUE(::baton::testing::WaitFor([&] { return runtime_.running() == 1; }));
  ASSERT_TRUE(::baton::testing::WaitFor([&] { return OnlyTask(id).state == TaskState::kRunning; }));
  EXPECT_EQ(OnlyTask(id).node_id, "w");
  EXPECT_EQ(counting_.published(kQueueStarted), 1);
  // The coordinator knows the task runs here, so the broker no longer holds its message.
  ASSERT_TRUE(::baton::testing::WaitFor([&] { return DefaultQueue().unacked == 0; }));
  runtime_.Release("long");
  auto done = coordinator_->Wait(id, std::chrono::seconds(10));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, JobState::kCompleted);
  EXPECT_EQ(counting_.published(kQueueStarted), 1);
}

TEST_F(WorkerTest, UntilItsStartIsReportedATaskKeepsItsMessage) {
  StartWorker(std::chrono::hours(1));
  std::string id = Submit("name: held\ntasks:\n  - {name: held, run: hang}\n");
  ASSERT_TRUE(::baton::testing::WaitFor([&] { return runtime_.running() == 1; }));
  // A worker dying now would leave the message to the broker, to deliver again.
  EXPECT_EQ(DefaultQueue().unacked, 1);
  EXPECT_EQ(OnlyTask(id).state, TaskState::kScheduled);
  runtime_.Release("held");
  ASSERT_TRUE(coordinator_->Wait(id, std::chrono::seconds(10)).ok());
}

TEST_F(WorkerTest, StoppingReportsWaitingStartsSoNoMessageGoesBackAsWell) {
  StartWorker(std::chrono::hours(1));
  std::string id = Submit("name: stop\ntasks:\n  - {name: stuck, run: hang}\n");
  ASSERT_TRUE(::baton::testing::WaitFor([&] { return runtime_.running() == 1; }));
  worker_->Stop(milliseconds(500));
  EXPECT_EQ(counting_.published(kQueueStarted), 1);
  // Handed back: the coordinator queues one new attempt; the first message was acked, not
  // given back to run a second time.
  ASSERT_TRUE(::baton::testing::WaitFor([&] {
    auto rows = datastore_->JobTasks(id);
    return rows.ok() && rows->size() == 2;
  }));
  ASSERT_TRUE(::baton::testing::WaitFor([&] { return DefaultQueue().size == 1; }));
  EXPECT_EQ(DefaultQueue().unacked, 0);
}

// The parts of a task's log are redacted as one text: a secret written in two writes is
// hidden whole, and what was held back at a part's end is stored at the log's end mark.
TEST_F(WorkerTest, ALogIsRedactedAcrossItsPartsAndFlushedAtItsEnd) {
  std::string id =
      Submit("name: split\nsecrets: {s: hunter2-s3cret}\ntasks:\n  - {name: t, run: hang}\n");
  std::string task_id;
  ASSERT_TRUE(testing::WaitFor([&] {
    auto rows = datastore_->JobTasks(id);
    if (!rows.ok() || rows->empty()) return false;
    task_id = rows->front().id;
    return true;
  }));
  auto part = [&](int number, std::string contents) {
    LogPart p;
    p.id = NewId();
    p.task_id = task_id;
    p.job_id = id;
    p.number = number;
    p.contents = std::move(contents);
    p.created_at = clock_.Now();
    return coordinator_->StoreLogPart(p);
  };
  ASSERT_TRUE(part(1, "pw=hunte").ok());
  ASSERT_TRUE(part(2, "r2-s3cret\nand hunt").ok());
  auto joined = [&] {
    auto parts = datastore_->TaskLogParts(task_id, 1, 100);
    std::string text;
    if (!parts.ok()) return text;
    for (auto it = parts->items.rbegin(); it != parts->items.rend(); ++it) text += it->contents;
    return text;
  };
  EXPECT_EQ(joined(), "pw=[REDACTED]\nand ");
  ASSERT_TRUE(part(3, "").ok());  // the worker's end mark
  EXPECT_EQ(joined(), "pw=[REDACTED]\nand hunt");
}

TEST_F(WorkerTest, AfterItsLastLogPartATaskSendsTheEndMark) {
  StartWorker(milliseconds(0));
  int received = 0;
  std::string last;
  std::mutex mu;
  auto sub = broker_.Subscribe(kQueueLogs, 10, [&](std::unique_ptr<Delivery> d) {
    auto m = DecodeLogPart(d->body());
    std::lock_guard lock(mu);
    if (m.ok()) {
      ++received;
      last = m->contents;
    }
    (void)d->Ack();
  });
  ASSERT_TRUE(sub.ok());
  coordinator_->Stop();  // this test's subscription alone reads the logs
  std::string id = Submit("name: quick\ntasks:\n  - {name: quick, run: ok done}\n");
  ASSERT_TRUE(testing::WaitFor([&] {
    std::lock_guard lock(mu);
    return received >= 2;
  }));
  std::lock_guard lock(mu);
  EXPECT_EQ(received, 2);
  EXPECT_EQ(last, "");
  (*sub)->Close();
}

}  // namespace
}  // namespace baton

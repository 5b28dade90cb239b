// FlowScheduler (the shell over flow) driven end to end through its real neighbours: the
// in-memory broker, SQLite in memory, a Worker with the fake runtime, and a fake clock for
// timers. The behaviour cases of scheduler_test.cc that matter run as typed tests over
// both Scheduler and FlowScheduler, so the two are held to the same behaviour; what only
// the shell promises (two jobs never wait for each other) is tested on it alone.
#include "coordinator/shell.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "broker/inmemory/inmemory_broker.h"
#include "coordinator/scheduler.h"
#include "core/job_decode.h"
#include "core/names.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "testing/fake_clock.h"
#include "testing/fake_runtime.h"
#include "testing/faulty_datastore.h"
#include "testing/wait_for.h"
#include "worker/worker.h"

namespace baton {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kWait = std::chrono::seconds(10);

Job ParseOrDie(const std::string& yaml) {
  auto result = ParseJob(yaml, DocumentFormat::kYaml);
  EXPECT_TRUE(result.ok()) << result.Message();
  return result.ok() ? *result.job : Job{};
}

bool IsFinished(JobState s) {
  return s == JobState::kCompleted || s == JobState::kFailed || s == JobState::kCancelled;
}

// What the Coordinator does for a scheduler, cut to what these tests need: workers' events
// from their queues to the scheduler, heartbeats to the datastore.
template <typename S>
class Host {
 public:
  Host(Datastore& datastore, Broker& broker, testing::FakeClock& clock, SchedulerOptions options)
      : scheduler_(datastore, broker, clock, clock, options), datastore_(datastore) {
    auto subscribe = [&](std::string_view queue, auto handle) {
      auto sub = broker.Subscribe(queue, 16, [handle](std::unique_ptr<Delivery> d) {
        if (handle(d->body()).ok()) {
          (void)d->Ack();
        } else {
          (void)d->Nack(true);
        }
      });
      EXPECT_TRUE(sub.ok());
      if (sub.ok()) subscriptions_.push_back(std::move(*sub));
    };
    auto on_finished = [this](const std::string& body) {
      auto m = DecodeTaskFinished(body);
      return m.ok() ? scheduler_.OnFinished(*m) : Status::Ok();
    };
    subscribe(kQueueStarted, [this](const std::string& body) {
      auto m = DecodeTaskStarted(body);
      return m.ok() ? scheduler_.OnStarted(*m) : Status::Ok();
    });
    subscribe(kQueueCompleted, on_finished);
    subscribe(kQueueFailed, on_finished);
    subscribe(kQueueProgress, [this](const std::string& body) {
      auto m = DecodeTaskProgress(body);
      return m.ok() ? scheduler_.OnProgress(*m) : Status::Ok();
    });
    subscribe(kQueueHeartbeat, [this](const std::string& body) {
      auto m = DecodeNodeRecord(body);
      if (m.ok()) (void)datastore_.UpsertNode(*m);
      return Status::Ok();
    });
  }
  ~Host() {
    for (auto& sub : subscriptions_) sub->Close();
  }
  S& scheduler() { return scheduler_; }

 private:
  S scheduler_;
  Datastore& datastore_;
  std::vector<std::unique_ptr<Subscription>> subscriptions_;
};

template <typename S>
class ShellTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
    ASSERT_TRUE(ds.ok()) << ds.status().message();
    datastore_ = std::move(*ds);
    faulty_ = std::make_unique<testing::FaultyDatastore>(*datastore_);
    StartEngine();
  }
  void TearDown() override { StopEngine(); }

  void StartEngine() {
    broker_ = std::make_unique<InMemoryBroker>();
    SchedulerOptions options;
    options.node_lease = std::chrono::hours(24);
    options.durable_broker = durable_;
    options.start_in_background = background_;
    host_ = std::make_unique<Host<S>>(*faulty_, *broker_, clock_, options);
    WorkerOptions worker;
    worker.node_id = "node-" + std::to_string(++generation_);
    worker.queues = {{"default", 4}, {"gpu", 1}};
    worker.report_start_after = report_start_after_;
    worker_ = std::make_unique<Worker>(*broker_, runtime_, clock_, worker);
    ASSERT_TRUE(worker_->Start().ok());
    ASSERT_TRUE(scheduler().Reconcile({worker.node_id}).ok());
  }
  // Stops like a killed process: nothing more is heard, the in-memory broker is gone.
  void StopEngine() {
    if (worker_) worker_->Stop(milliseconds(0));
    worker_.reset();
    host_.reset();
    broker_.reset();
  }

  S& scheduler() { return host_->scheduler(); }

  std::string Submit(const std::string& yaml) {
    auto job = scheduler().Submit(ParseOrDie(yaml));
    EXPECT_TRUE(job.ok()) << job.status().message();
    return job.ok() ? job->id : "";
  }
  JobRecord Wait(const std::string& id) {
    JobRecord last;
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          auto job = datastore_->GetJob(id);
          if (job.ok()) last = *job;
          return job.ok() && IsFinished(job->state);
        },
        kWait))
        << "job " << id << " is " << ToString(last.state);
    return last;
  }
  JobRecord Run(const std::string& yaml) { return Wait(Submit(yaml)); }

  std::vector<TaskRecord> Execution(const std::string& job_id) {
    auto rows = datastore_->JobTasks(job_id);
    EXPECT_TRUE(rows.ok());
    return rows.ok() ? *rows : std::vector<TaskRecord>{};
  }
  int CountState(const std::string& job_id, TaskState state) {
    auto rows = Execution(job_id);
    return static_cast<int>(std::count_if(rows.begin(), rows.end(),
                                          [&](const TaskRecord& t) { return t.state == state; }));
  }
  JobState StateOf(const std::string& job_id) {
    auto job = datastore_->GetJob(job_id);
    return job.ok() ? job->state : JobState::kPending;
  }
  // Writes of job and task rows that reached the datastore (a Transact scope is one
  // transaction, committed once).
  int Writes() {
    int n = 0;
    for (const char* m :
         {"Transact", "CreateJob", "CreateJobWithTasks", "UpdateJob", "UpdateJobState",
          "CreateTask", "CreateTasks", "UpdateTask", "UpdateTaskAndJob",
          "UpdateTaskAndJobState", "AddCompletion", "MarkScheduled", "CancelTasks",
          "DeleteJob"}) {
      n += faulty_->calls(m);
    }
    return n;
  }

  testing::FakeClock clock_;
  testing::FakeRuntime runtime_;
  std::unique_ptr<SqliteDatastore> datastore_;
  std::unique_ptr<testing::FaultyDatastore> faulty_;  // what the scheduler uses
  std::unique_ptr<InMemoryBroker> broker_;
  std::unique_ptr<Host<S>> host_;
  std::unique_ptr<Worker> worker_;
  int generation_ = 0;
  bool durable_ = false;
  bool background_ = false;
  milliseconds report_start_after_ = WorkerOptions{}.report_start_after;
};

using Schedulers = ::testing::Types<Scheduler, FlowScheduler>;
TYPED_TEST_SUITE(ShellTest, Schedulers);

TYPED_TEST(ShellTest, RunsTasksInOrderAndPassesResultsThroughVar) {
  JobRecord job = this->Run(R"(
name: chain
output: "{{ tasks.second }}"
tasks:
  - name: first
    var: first
    run: ok hello
  - name: second
    var: second
    env:
      FROM_FIRST: "{{ tasks.first }} world"
    run: ok done
)");
  EXPECT_EQ(job.state, JobState::kCompleted);
  EXPECT_EQ(job.result, "done");
  EXPECT_EQ(job.context["tasks"]["first"], "hello");
  EXPECT_THAT(this->runtime_.ran(), ElementsAre("first", "second"));
  EXPECT_EQ(this->runtime_.env_of("second").at("FROM_FIRST"), "hello world");
  EXPECT_EQ(job.progress, 100);
}

TYPED_TEST(ShellTest, AOneTaskJobCostsTwoWrites) {
  this->StopEngine();
  this->report_start_after_ = std::chrono::hours(1);  // no start report: the task is short
  this->StartEngine();
  int before = this->Writes();
  JobRecord job = this->Run("name: one\ntasks:\n  - {name: only, var: out, run: ok fine}\n");
  EXPECT_EQ(job.state, JobState::kCompleted);
  EXPECT_EQ(job.context["tasks"]["out"], "fine");
  // The job with its task; the completion with the job's end.
  EXPECT_EQ(this->Writes() - before, 2);
  before = this->Writes();
  job = this->Run("name: two\ntasks:\n  - {name: a, run: ok}\n  - {name: b, run: ok}\n");
  EXPECT_EQ(job.state, JobState::kCompleted);
  // The old scheduler: each further step costs its row and the job's move, then its
  // completion with the job's end. The shell stores a completion with what it starts (the
  // next row, the job's move) in one transaction: one write less.
  const int further = std::is_same_v<TypeParam, FlowScheduler> ? 3 : 4;
  EXPECT_EQ(this->Writes() - before, further);
}

TYPED_TEST(ShellTest, IfFalseSkipsAndTrueRuns) {
  JobRecord job = this->Run(R"(
name: conditions
inputs: {go: "yes"}
tasks:
  - name: skipped
    if: "{{ inputs.go == 'no' }}"
    run: ok
  - name: runs
    if: "{{ inputs.go == 'yes' }}"
    run: ok
)");
  EXPECT_EQ(job.state, JobState::kCompleted);
  EXPECT_THAT(this->runtime_.ran(), ElementsAre("runs"));
  EXPECT_EQ(this->CountState(job.id, TaskState::kSkipped), 1);
}

TYPED_TEST(ShellTest, RetriesAFailingTaskThenFailsTheJob) {
  JobRecord job = this->Run(R"(
name: retry
tasks:
  - name: always fails
    run: fail exit code 1
    retry: {limit: 2}
)");
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.error, "exit code 1");
  auto rows = this->Execution(job.id);
  ASSERT_EQ(rows.size(), 3u);
  for (const TaskRecord& row : rows) EXPECT_EQ(row.state, TaskState::kFailed);
}

TYPED_TEST(ShellTest, RetryWaitsForItsBackoff) {
  std::string id = this->Submit(R"(
name: backoff
tasks:
  - name: flaky
    run: flaky 2
    retry: {limit: 3, initialDelay: 10s, scalingFactor: 3, maxDelay: 20s}
)");
  // The first attempt fails; the retry waits 10 s on the fake clock.
  ASSERT_TRUE(testing::WaitFor([&] { return this->clock_.PendingTimers() == 1; }));
  EXPECT_EQ(this->runtime_.ran().size(), 1u);
  this->clock_.Advance(seconds(9));
  EXPECT_EQ(this->runtime_.ran().size(), 1u);
  this->clock_.Advance(seconds(1));
  ASSERT_TRUE(testing::WaitFor([&] { return this->runtime_.ran().size() == 2; }));
  // The second failure: min(10 s * 3, 20 s) = 20 s.
  ASSERT_TRUE(testing::WaitFor([&] { return this->clock_.PendingTimers() == 1; }));
  this->clock_.Advance(seconds(19));
  EXPECT_EQ(this->runtime_.ran().size(), 2u);
  this->clock_.Advance(seconds(1));
  EXPECT_EQ(this->Wait(id).state, JobState::kCompleted);
  EXPECT_EQ(this->runtime_.ran().size(), 3u);
}

TYPED_TEST(ShellTest, ParallelRunsAllAndCompletes) {
  JobRecord job = this->Run(R"(
name: parallel
tasks:
  - {name: before, run: ok}
  - name: group
    parallel:
      tasks:
        - {name: a, run: ok}
        - {name: b, run: ok}
        - {name: c, run: ok}
  - {name: after, run: ok}
)");
  EXPECT_EQ(job.state, JobState::kCompleted);
  EXPECT_EQ(this->Execution(job.id).size(), 6u);
  EXPECT_EQ(this->runtime_.ran().back(), "after");
}

TYPED_TEST(ShellTest, ParallelFailsFastAndCancelsSiblings) {
  JobRecord job = this->Run(R"(
name: fail fast
tasks:
  - name: group
    parallel:
      tasks:
        - {name: slow, run: hang}
        - {name: broken, run: fail boom}
  - {name: never, run: ok}
)");
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.error, "boom");
  ASSERT_TRUE(testing::WaitFor([&] { return this->runtime_.running() == 0; }));
  auto rows = this->Execution(job.id);
  auto slow = std::find_if(rows.begin(), rows.end(), [](auto& t) { return t.task.name == "slow"; });
  ASSERT_NE(slow, rows.end());
  EXPECT_EQ(slow->state, TaskState::kCancelled);
  EXPECT_THAT(this->runtime_.ran(), ::testing::Not(::testing::Contains("never")));
}

TYPED_TEST(ShellTest, EachWithConcurrencyOneRunsOneAtATime) {
  JobRecord job = this->Run(R"(
name: each
tasks:
  - name: loop
    each:
      list: "{{ sequence(0, 5) }}"
      concurrency: 1
      task:
        name: "item {{ item.index }}"
        var: "v{{ item.index }}"
        run: ok x
)");
  EXPECT_EQ(job.state, JobState::kCompleted);
  EXPECT_EQ(this->runtime_.max_running(), 1);
  EXPECT_THAT(this->runtime_.ran(), ElementsAre("item 0", "item 1", "item 2", "item 3", "item 4"));
  EXPECT_EQ(job.context["tasks"]["v4"], "x");
  EXPECT_EQ(this->Execution(job.id).size(), 6u);
}

TYPED_TEST(ShellTest, EmptyEachCompletesAtOnce) {
  JobRecord job = this->Run(R"(
name: empty each
tasks:
  - name: loop
    each:
      list: "{{ [] }}"
      task: {name: never, run: ok}
  - {name: after, run: ok}
)");
  EXPECT_EQ(job.state, JobState::kCompleted);
  EXPECT_THAT(this->runtime_.ran(), ElementsAre("after"));
}

TYPED_TEST(ShellTest, SubjobOutputBecomesTheTaskResult) {
  JobRecord job = this->Run(R"(
name: parent
output: "{{ tasks.child }}"
tasks:
  - name: run child
    var: child
    subjob:
      name: child job
      inputs: {greeting: hi}
      output: "{{ tasks.inner }}"
      tasks:
        - name: inner
          var: inner
          env: {G: "{{ inputs.greeting }}"}
          run: ok from child
)");
  EXPECT_EQ(job.state, JobState::kCompleted);
  EXPECT_EQ(job.result, "from child");
  EXPECT_EQ(this->runtime_.env_of("inner").at("G"), "hi");
  auto rows = this->Execution(job.id);
  ASSERT_EQ(rows.size(), 1u);
  auto child = this->datastore_->GetJob(rows[0].subjob_id);
  ASSERT_TRUE(child.ok());
  EXPECT_EQ(child->parent_id, rows[0].id);
  EXPECT_EQ(child->state, JobState::kCompleted);
}

TYPED_TEST(ShellTest, NestedEachInsideParallelInsideSubjob) {
  JobRecord job = this->Run(R"(
name: nested
tasks:
  - name: sub
    subjob:
      name: inner job
      tasks:
        - name: group
          parallel:
            tasks:
              - name: loop
                each:
                  list: "{{ sequence(0, 3) }}"
                  task: {name: "e{{ item.value }}", run: ok}
              - {name: side, run: ok}
)");
  EXPECT_EQ(job.state, JobState::kCompleted);
  auto ran = this->runtime_.ran();
  std::sort(ran.begin(), ran.end());
  EXPECT_THAT(ran, ElementsAre("e0", "e1", "e2", "side"));
}

TYPED_TEST(ShellTest, AnEachOverAParallelRunsItsTasks) {
  // The bug of issue 15: a composite each child went to a worker and "completed" empty.
  JobRecord job = this->Run(R"(
name: each of parallels
tasks:
  - name: loop
    each:
      list: "{{ sequence(0, 2) }}"
      task:
        name: "group {{ item.index }}"
        parallel:
          tasks:
            - {name: "p{{ item.index }}", run: ok}
)");
  EXPECT_EQ(job.state, JobState::kCompleted);
  auto ran = this->runtime_.ran();
  std::sort(ran.begin(), ran.end());
  EXPECT_THAT(ran, ElementsAre("p0", "p1"));
}

TYPED_TEST(ShellTest, CancelKillsRunningAndDropsQueuedTasks) {
  std::string id = this->Submit(R"(
name: cancel me
tasks:
  - name: group
    parallel:
      tasks:
        - {name: running, run: hang}
        - {name: queued on gpu 1, run: hang, queue: gpu}
        - {name: queued on gpu 2, run: hang, queue: gpu}
)");
  ASSERT_TRUE(testing::WaitFor([&] { return this->runtime_.running() == 2; }));
  ASSERT_TRUE(this->scheduler().Cancel(id).ok());
  EXPECT_EQ(this->StateOf(id), JobState::kCancelled);
  ASSERT_TRUE(testing::WaitFor([&] { return this->runtime_.running() == 0; }));
  ASSERT_TRUE(testing::WaitFor([&] { return this->CountState(id, TaskState::kCancelled) == 4; }));
  // The queued one was dropped when it reached the worker.
  auto info = this->broker_->Queue("gpu");
  ASSERT_TRUE(testing::WaitFor([&] {
    auto q = this->broker_->Queue("gpu");
    return q.ok() && q->size == 0 && q->unacked == 0;
  }));
  auto ran = this->runtime_.ran();
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "queued on gpu 1") +
                std::count(ran.begin(), ran.end(), "queued on gpu 2"),
            1);
  EXPECT_EQ(this->scheduler().Cancel(id).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(this->scheduler().Cancel("no such job").code(), StatusCode::kNotFound);
}

TYPED_TEST(ShellTest, CancelReachesSubjobs) {
  std::string id = this->Submit(R"(
name: parent
tasks:
  - name: sub
    subjob:
      name: child
      tasks: [{name: inner, run: hang}]
)");
  ASSERT_TRUE(testing::WaitFor([&] { return this->runtime_.running() == 1; }));
  auto rows = this->Execution(id);
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_TRUE(this->scheduler().Cancel(id).ok());
  EXPECT_EQ(this->StateOf(rows[0].subjob_id), JobState::kCancelled);
  ASSERT_TRUE(testing::WaitFor([&] { return this->runtime_.running() == 0; }));
}

TYPED_TEST(ShellTest, RestartRerunsFromTheTaskThatStopped) {
  std::string id = this->Submit(R"(
name: restart
tasks:
  - {name: one, run: ok}
  - {name: two, run: flaky 1}
  - {name: three, run: ok}
)");
  EXPECT_EQ(this->Wait(id).state, JobState::kFailed);
  EXPECT_FALSE(this->scheduler().Restart("nope").ok());
  ASSERT_TRUE(this->scheduler().Restart(id).ok());
  EXPECT_EQ(this->Wait(id).state, JobState::kCompleted);
  EXPECT_THAT(this->runtime_.ran(), ElementsAre("one", "two", "two", "three"));
  EXPECT_EQ(this->scheduler().Restart(id).code(), StatusCode::kFailedPrecondition);
}

TYPED_TEST(ShellTest, JobTimeoutFailsTheJobAndCancelsItsTasks) {
  std::string id =
      this->Submit("name: slow job\ntimeout: 1m\ntasks:\n  - {name: forever, run: hang}\n");
  ASSERT_TRUE(testing::WaitFor([&] { return this->runtime_.running() == 1; }));
  this->clock_.Advance(seconds(59));
  EXPECT_EQ(this->StateOf(id), JobState::kRunning);
  this->clock_.Advance(seconds(1));
  auto job = this->datastore_->GetJob(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kFailed);
  EXPECT_EQ(job->error, "job timed out after 1m0s");
  ASSERT_TRUE(testing::WaitFor([&] { return this->runtime_.running() == 0; }));
}

TYPED_TEST(ShellTest, TasksOfASilentNodeAreRequeuedWhenTheLeaseExpires) {
  std::string id = this->Submit("name: lease\ntasks:\n  - {name: long, run: hang}\n");
  ASSERT_TRUE(testing::WaitFor([&] { return this->CountState(id, TaskState::kRunning) == 1; }));
  // Pretend the task runs on a node that never heartbeats.
  std::string first_id = this->Execution(id)[0].id;
  ASSERT_TRUE(this->datastore_
                  ->UpdateTask(first_id,
                               [](TaskRecord& t) {
                                 t.node_id = "ghost";
                                 return Status::Ok();
                               })
                  .ok());
  auto requeued = this->scheduler().ExpireLeases(seconds(30));
  ASSERT_TRUE(requeued.ok());
  EXPECT_EQ(*requeued, 0);  // started less than a lease ago
  this->clock_.Advance(seconds(31));
  requeued = this->scheduler().ExpireLeases(seconds(30));
  ASSERT_TRUE(requeued.ok());
  EXPECT_EQ(*requeued, 1);
  auto old = this->datastore_->GetTask(first_id);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->state, TaskState::kFailed);
  EXPECT_THAT(old->error, HasSubstr("node ghost stopped heartbeating"));
  ASSERT_TRUE(testing::WaitFor([&] { return this->runtime_.running() == 2; }));
  // The old attempt reporting late does not overwrite the new one.
  EXPECT_TRUE(this->scheduler()
                  .OnFinished(TaskFinished{.task_id = first_id,
                                           .outcome = TaskFinished::Outcome::kCompleted,
                                           .result = "stale",
                                           .at = this->clock_.Now()})
                  .ok());
  EXPECT_EQ(this->datastore_->GetTask(first_id)->state, TaskState::kFailed);
  this->runtime_.Release("long");
  EXPECT_EQ(this->Wait(id).state, JobState::kCompleted);
  EXPECT_EQ(this->Execution(id).size(), 2u);
}

TYPED_TEST(ShellTest, DuplicateOutcomesAreIgnored) {
  JobRecord job = this->Run("name: once\ntasks:\n  - {name: t, run: ok first}\n");
  auto rows = this->Execution(job.id);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(this->scheduler()
                  .OnFinished(TaskFinished{.task_id = rows[0].id,
                                           .outcome = TaskFinished::Outcome::kFailed,
                                           .error = "late",
                                           .at = this->clock_.Now()})
                  .ok());
  auto again = this->datastore_->GetTask(rows[0].id);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->state, TaskState::kCompleted);
  EXPECT_EQ(again->result, "first");
  EXPECT_EQ(this->StateOf(job.id), JobState::kCompleted);
}

TYPED_TEST(ShellTest, ReconcileRequeuesTasksOfDeadNodesAndFinishesTheJob) {
  std::string id = this->Submit(R"(
name: survive
tasks:
  - {name: first, run: ok}
  - {name: stuck, run: hang}
  - {name: last, run: ok}
)");
  ASSERT_TRUE(testing::WaitFor([&] {
    for (const auto& row : this->Execution(id)) {
      if (row.task.name == "stuck" && row.state == TaskState::kRunning) return true;
    }
    return false;
  }));
  // The process "dies" while the task runs.
  this->StopEngine();
  this->runtime_.Release("stuck");
  this->StartEngine();
  JobRecord done = this->Wait(id);
  EXPECT_EQ(done.state, JobState::kCompleted) << done.error;
  int stuck_rows = 0;
  for (const auto& row : this->Execution(id)) {
    if (row.task.name == "stuck") ++stuck_rows;
  }
  EXPECT_EQ(stuck_rows, 2);
  auto ran = this->runtime_.ran();
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "first"), 1);
}

TYPED_TEST(ShellTest, WithADurableBrokerRowsAreScheduledOncePublished) {
  this->StopEngine();
  this->durable_ = true;
  this->StartEngine();
  JobRecord job = this->Run(R"(
name: durable
tasks:
  - name: group
    parallel:
      tasks:
        - {name: a, run: ok}
        - {name: b, run: ok}
)");
  EXPECT_EQ(job.state, JobState::kCompleted);
  for (const TaskRecord& row : this->Execution(job.id)) {
    if (row.task.parallel) continue;  // a composite is never in a queue
    EXPECT_TRUE(row.scheduled_at.has_value()) << row.task.name;
    EXPECT_EQ(row.state, TaskState::kCompleted) << row.task.name;
  }
}

TYPED_TEST(ShellTest, AJobStartedInTheBackgroundRuns) {
  this->StopEngine();
  this->background_ = true;
  this->StartEngine();
  JobRecord job = this->Run("name: bg\ntimeout: 1m\ntasks:\n  - {name: t, run: ok}\n");
  EXPECT_EQ(job.state, JobState::kCompleted);
}

// What only the shell promises: no lock of its own is held across a datastore call, so a
// job whose write is held back holds up no other job.
template <typename S>
using OnlyShellTest = ShellTest<S>;
using OnlyTheShell = ::testing::Types<FlowScheduler>;
TYPED_TEST_SUITE(OnlyShellTest, OnlyTheShell);

TYPED_TEST(OnlyShellTest, AJobWhoseWriteIsHeldBackHoldsUpNoOtherJob) {
  std::string slow = this->Submit("name: slow\ntasks:\n  - {name: held, run: hang}\n");
  ASSERT_TRUE(testing::WaitFor([&] { return this->CountState(slow, TaskState::kRunning) == 1; }));
  TaskRecord held = this->Execution(slow)[0];
  // The completion of `held` is stored with its job's end in one write: hold that write.
  // The old scheduler's is one UpdateTaskAndJob; the shell's a Transact scope, held
  // before it begins (inside, it would hold SQLite's one writer, which every scope takes
  // turns on) and told apart from the other job's by the thread deciding it.
  std::promise<std::thread::id> decider;
  std::promise<void> go;
  // Its outcome is handed to the scheduler on a thread of its own (the broker delivers
  // one event of a queue at a time, so through the broker the test would measure that).
  auto held_outcome = std::async(std::launch::async, [&] {
    decider.set_value(std::this_thread::get_id());
    go.get_future().wait();
    return this->scheduler().OnFinished(TaskFinished{.task_id = held.id,
                                                     .job_id = slow,
                                                     .node_id = held.node_id,
                                                     .outcome = TaskFinished::Outcome::kCompleted,
                                                     .result = "late",
                                                     .at = this->clock_.Now()});
  });
  const std::thread::id thread = decider.get_future().get();
  int hold = this->faulty_->Hold([id = held.id, thread](const testing::FaultyDatastore::Call& c) {
    return (c.method == "UpdateTaskAndJob" && c.id == id) ||
           (c.method == "Transact" && std::this_thread::get_id() == thread);
  });
  go.set_value();
  ASSERT_TRUE(this->faulty_->WaitUntilHeld(hold));
  // Meanwhile another job is submitted, runs and completes, on another thread so that a
  // scheduler that waits for the held write fails this test instead of hanging it.
  auto other = std::async(std::launch::async, [this] {
    return this->Run("name: other\ntasks:\n  - {name: free, run: ok}\n  - {name: too, run: ok}\n");
  });
  bool completed = other.wait_for(kWait) == std::future_status::ready;
  EXPECT_TRUE(completed) << "the other job waited for the held write";
  EXPECT_EQ(this->StateOf(slow), JobState::kRunning);
  this->faulty_->Release(hold);
  if (completed) EXPECT_EQ(other.get().state, JobState::kCompleted);
  EXPECT_TRUE(held_outcome.get().ok());
  JobRecord done = this->Wait(slow);
  EXPECT_EQ(done.state, JobState::kCompleted);
  // The worker's own outcome, later, is a duplicate and changes nothing.
  this->runtime_.Release("held");
  ASSERT_TRUE(testing::WaitFor([&] { return this->runtime_.running() == 0; }));
  EXPECT_EQ(this->datastore_->GetTask(held.id)->result, "late");
}

// A decision is one transaction: when one of its writes fails, nothing of it is stored,
// and the event, delivered again, decides it whole. (Stored call by call, the next task's
// row was written before the failing completion, and the redelivered completion started
// the next task a second time.)
TYPED_TEST(OnlyShellTest, ADecisionWhoseWriteFailsStoresNothingOfIt) {
  std::string id = this->Submit(R"(
name: atomic
tasks:
  - {name: first, run: hang}
  - {name: second, run: ok}
)");
  ASSERT_TRUE(testing::WaitFor([&] { return this->CountState(id, TaskState::kRunning) == 1; }));
  const std::string first = this->Execution(id)[0].id;
  // The completion's write of `first` (inside the scope; the old scope stored it last, with
  // the job's move) fails once, as a lost connection would.
  this->faulty_->FailNthCall(
      1, Unavailable("the connection was lost"), [first](const testing::FaultyDatastore::Call& c) {
        return c.id == first &&
               (c.method == "UpdateTaskAndJob" || c.method == "Transaction.UpdateTask");
      });
  this->runtime_.Release("first");
  JobRecord job = this->Wait(id);
  EXPECT_EQ(job.state, JobState::kCompleted);
  std::vector<std::string> rows;
  for (const TaskRecord& row : this->Execution(id)) rows.push_back(row.task.name);
  EXPECT_THAT(rows, ElementsAre("first", "second"));
  auto ran = this->runtime_.ran();
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "second"), 1);
}

// A step that can never be stored (a row the datastore refuses) fails the job's tree with
// the error, instead of leaving it RUNNING with nothing in flight.
TYPED_TEST(OnlyShellTest, AStepTheDatastoreRefusesFailsTheJob) {
  std::string id = this->Submit(R"(
name: refused
tasks:
  - {name: first, run: hang}
  - {name: second, run: ok}
)");
  ASSERT_TRUE(testing::WaitFor([&] { return this->CountState(id, TaskState::kRunning) == 1; }));
  // The decision that completes `first` creates the row of `second`: refused.
  this->faulty_->FailCalls(
      [id](const testing::FaultyDatastore::Call& c) {
        return c.method == "Transaction.CreateTasks" && c.job_id == id;
      },
      InvalidArgument("task row refused"));
  this->runtime_.Release("first");
  JobRecord job = this->Wait(id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.error, "the engine could not take a step: task row refused");
  auto ran = this->runtime_.ran();
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "second"), 0);
}

}  // namespace
}  // namespace baton

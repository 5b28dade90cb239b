// The Scheduler driven end to end through its real neighbours, without a Coordinator: the
// in-memory broker, SQLite in memory behind the fault-injecting datastore, a Worker with
// the fake runtime, and a fake clock for timers. The cases that need to hold a write back
// or fail it (two jobs never wait for each other; a failed write stores nothing) and
// those scheduler_test.cc (which goes through the Coordinator) does not have.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "broker/inmemory/inmemory_broker.h"
#include "coordinator/executors/broker_executor.h"
#include "coordinator/scheduler.h"
#include "core/job_decode.h"
#include "core/names.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "locker/locker.h"
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
using ::testing::UnorderedElementsAre;

constexpr auto kWait = std::chrono::seconds(10);

Job ParseOrDie(const std::string& yaml) {
  auto result = ParseJob(yaml, DocumentFormat::kYaml);
  EXPECT_TRUE(result.ok()) << result.Message();
  return result.ok() ? *result.job : Job{};
}

bool IsFinished(JobState s) {
  return s == JobState::kCompleted || s == JobState::kFailed || s == JobState::kCancelled;
}

// An executor that runs nothing: it keeps the rows it is given and reports each as
// published (what a durable broker's confirm says) or, the first `refuse` of them, refused.
class FakeExecutor : public Executor {
 public:
  StartReport Start(std::vector<TaskRecord> rows) override {
    MutexLock lock(mu_);
    StartReport report;
    for (const TaskRecord& row : rows) {
      started_.push_back(row.id);
      if (refuse_ > 0) {
        --refuse_;
        report.refused.push_back({row.id, row.job_id, "the broker is full"});
      } else {
        report.published.push_back({row.id, row.job_id});
      }
    }
    return report;
  }
  void Refuse(int n) {
    MutexLock lock(mu_);
    refuse_ = n;
  }
  std::vector<std::string> started() {
    MutexLock lock(mu_);
    return started_;
  }

 private:
  Mutex mu_;
  int refuse_ BATON_GUARDED_BY(mu_) = 0;
  std::vector<std::string> started_ BATON_GUARDED_BY(mu_);
};

// What the Coordinator does for a scheduler, cut to what these tests need: workers' events
// from their queues to the scheduler, heartbeats to the datastore.
class Host {
 public:
  // `executor`: what starts runnable rows (null: the broker executor, to the workers).
  Host(Datastore& datastore, Broker& broker, testing::FakeClock& clock, SchedulerOptions options,
       int prefetch = 16, Executor* executor = nullptr)
      : broker_executor_(broker, options.durable_broker),
        scheduler_(datastore, broker, clock, clock,
                   Executors{.runnable = executor != nullptr ? executor : &broker_executor_},
                   options),
        datastore_(datastore) {
    auto subscribe = [&](std::string_view queue, auto handle) {
      auto sub = broker.Subscribe(queue, prefetch, [handle](std::unique_ptr<Delivery> d) {
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
  Scheduler& scheduler() { return scheduler_; }

 private:
  BrokerExecutor broker_executor_;
  Scheduler scheduler_;
  Datastore& datastore_;
  std::vector<std::unique_ptr<Subscription>> subscriptions_;
};

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

  void StartEngine(int concurrency = 4) {
    broker_ = std::make_unique<InMemoryBroker>();
    SchedulerOptions options;
    options.node_lease = std::chrono::hours(24);
    options.durable_broker = durable_;
    options.start_in_background = background_;
    options.events = events_;
    host_ = std::make_unique<Host>(*faulty_, *broker_, clock_, options, 16, executor_);
    WorkerOptions worker;
    worker.node_id = "node-" + std::to_string(++generation_);
    worker.queues = {{"default", concurrency}, {"gpu", 1}};
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

  Scheduler& scheduler() { return host_->scheduler(); }

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
  // The job once it is terminal, or DeadlineExceeded (as Coordinator::Wait answers).
  Result<JobRecord> Await(const std::string& id, milliseconds timeout) {
    Result<JobRecord> last = NotFound("job " + id);
    bool done = testing::WaitFor(
        [&] {
          last = datastore_->GetJob(id);
          return !last.ok() || IsFinished(last->state);
        },
        timeout);
    if (!done)
      return DeadlineExceeded("job " + id + " is still " + std::string(ToString(last->state)));
    return last;
  }

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

  testing::FakeClock clock_;
  testing::FakeRuntime runtime_;
  std::unique_ptr<SqliteDatastore> datastore_;
  std::unique_ptr<testing::FaultyDatastore> faulty_;  // what the scheduler uses
  std::unique_ptr<InMemoryBroker> broker_;
  std::unique_ptr<Host> host_;
  std::unique_ptr<Worker> worker_;
  int generation_ = 0;
  bool durable_ = false;
  bool background_ = false;
  Executor* executor_ = nullptr;  // null: the broker executor
  EventHub hub_;                  // outlives every engine of the test
  EventHub* events_ = nullptr;    // null: no live events (&hub_ to have them)
  milliseconds report_start_after_ = WorkerOptions{}.report_start_after;
};

TEST_F(ShellTest, AnEachOverAParallelRunsItsTasks) {
  // The bug of issue 15: a composite each child went to a worker and "completed" empty.
  JobRecord job = Run(R"(
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
  auto ran = runtime_.ran();
  std::sort(ran.begin(), ran.end());
  EXPECT_THAT(ran, ElementsAre("p0", "p1"));
}

TEST_F(ShellTest, WithADurableBrokerRowsAreScheduledOncePublished) {
  StopEngine();
  durable_ = true;
  StartEngine();
  JobRecord job = Run(R"(
name: durable
tasks:
  - name: group
    parallel:
      tasks:
        - {name: a, run: ok}
        - {name: b, run: ok}
)");
  EXPECT_EQ(job.state, JobState::kCompleted);
  for (const TaskRecord& row : Execution(job.id)) {
    if (row.task.parallel) continue;  // a composite is never in a queue
    EXPECT_TRUE(row.scheduled_at.has_value()) << row.task.name;
    EXPECT_EQ(row.state, TaskState::kCompleted) << row.task.name;
  }
}

TEST_F(ShellTest, AJobStartedInTheBackgroundRuns) {
  StopEngine();
  background_ = true;
  StartEngine();
  JobRecord job = Run("name: bg\ntimeout: 1m\ntasks:\n  - {name: t, run: ok}\n");
  EXPECT_EQ(job.state, JobState::kCompleted);
}

// No lock of the scheduler's own is held across a datastore call, so a job whose write
// is held back holds up no other job.
TEST_F(ShellTest, AJobWhoseWriteIsHeldBackHoldsUpNoOtherJob) {
  std::string slow = Submit("name: slow\ntasks:\n  - {name: held, run: hang}\n");
  ASSERT_TRUE(testing::WaitFor([&] { return CountState(slow, TaskState::kRunning) == 1; }));
  TaskRecord held = Execution(slow)[0];
  // The completion of `held` is stored with its job's end in one write, a Transact scope:
  // hold it before it begins (inside, it would hold SQLite's one writer, which every scope
  // takes turns on), told apart from the other job's by the thread deciding it.
  std::promise<std::thread::id> decider;
  std::promise<void> go;
  // Its outcome is handed to the scheduler on a thread of its own (the broker delivers
  // one event of a queue at a time, so through the broker the test would measure that).
  auto held_outcome = std::async(std::launch::async, [&] {
    decider.set_value(std::this_thread::get_id());
    go.get_future().wait();
    return scheduler().OnFinished(TaskFinished{.task_id = held.id,
                                               .job_id = slow,
                                               .node_id = held.node_id,
                                               .outcome = TaskFinished::Outcome::kCompleted,
                                               .result = "late",
                                               .at = clock_.Now()});
  });
  const std::thread::id thread = decider.get_future().get();
  int hold = faulty_->Hold([thread](const testing::FaultyDatastore::Call& c) {
    return c.method == "Transact" && std::this_thread::get_id() == thread;
  });
  go.set_value();
  ASSERT_TRUE(faulty_->WaitUntilHeld(hold));
  // Meanwhile another job is submitted, runs and completes, on another thread so that a
  // scheduler that waits for the held write fails this test instead of hanging it.
  auto other = std::async(std::launch::async, [this] {
    return Run("name: other\ntasks:\n  - {name: free, run: ok}\n  - {name: too, run: ok}\n");
  });
  bool completed = other.wait_for(kWait) == std::future_status::ready;
  EXPECT_TRUE(completed) << "the other job waited for the held write";
  EXPECT_EQ(StateOf(slow), JobState::kRunning);
  faulty_->Release(hold);
  if (completed) EXPECT_EQ(other.get().state, JobState::kCompleted);
  EXPECT_TRUE(held_outcome.get().ok());
  JobRecord done = Wait(slow);
  EXPECT_EQ(done.state, JobState::kCompleted);
  // The worker's own outcome, later, is a duplicate and changes nothing.
  runtime_.Release("held");
  ASSERT_TRUE(testing::WaitFor([&] { return runtime_.running() == 0; }));
  EXPECT_EQ(datastore_->GetTask(held.id)->result, "late");
}

// A decision is one transaction: when one of its writes fails, nothing of it is stored,
// and the event, delivered again, decides it whole. (Stored call by call, the next task's
// row was written before the failing completion, and the redelivered completion started
// the next task a second time.)
TEST_F(ShellTest, ADecisionWhoseWriteFailsStoresNothingOfIt) {
  std::string id = Submit(R"(
name: atomic
tasks:
  - {name: first, run: hang}
  - {name: second, run: ok}
)");
  ASSERT_TRUE(testing::WaitFor([&] { return CountState(id, TaskState::kRunning) == 1; }));
  const std::string first = Execution(id)[0].id;
  // The completion's write of `first`, inside the scope, fails once, as a lost connection
  // would.
  faulty_->FailNthCall(1, Unavailable("the connection was lost"),
                       [first](const testing::FaultyDatastore::Call& c) {
                         return c.id == first && c.method == "Transaction.UpdateTask";
                       });
  runtime_.Release("first");
  JobRecord job = Wait(id);
  EXPECT_EQ(job.state, JobState::kCompleted);
  std::vector<std::string> rows;
  for (const TaskRecord& row : Execution(id)) rows.push_back(row.task.name);
  EXPECT_THAT(rows, ElementsAre("first", "second"));
  auto ran = runtime_.ran();
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "second"), 1);
}

// A step that can never be stored (a row the datastore refuses) fails the job's tree with
// the error, instead of leaving it RUNNING with nothing in flight.
TEST_F(ShellTest, AStepTheDatastoreRefusesFailsTheJob) {
  std::string id = Submit(R"(
name: refused
tasks:
  - {name: first, run: hang}
  - {name: second, run: ok}
)");
  ASSERT_TRUE(testing::WaitFor([&] { return CountState(id, TaskState::kRunning) == 1; }));
  // The decision that completes `first` creates the row of `second`: refused.
  faulty_->FailCalls(
      [id](const testing::FaultyDatastore::Call& c) {
        return c.method == "Transaction.CreateTasks" && c.job_id == id;
      },
      InvalidArgument("task row refused"));
  runtime_.Release("first");
  JobRecord job = Wait(id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.error, "the engine could not take a step: task row refused");
  auto ran = runtime_.ran();
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "second"), 0);
}

constexpr char kHookedJob[] = R"(
name: hooked
webhooks:
  - url: http://localhost:9999/hooks/task
    event: task.StateChange
tasks:
  - {name: t, run: ok}
)";

// The hooks of a job's task rows, as the bodies' "state" fields say.
std::vector<std::string> TaskHookStates(Datastore& datastore, const std::string& job_id) {
  std::vector<std::string> states;
  auto hooks = datastore.Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN(auto deliveries, tx.JobWebhookDeliveries(job_id));
    for (const WebhookDelivery& d : deliveries) {
      if (d.event != kEventTaskStateChange) continue;
      states.push_back(nlohmann::json::parse(d.body).value("state", ""));
    }
    return Status::Ok();
  });
  EXPECT_TRUE(hooks.ok()) << hooks.message();
  return states;
}

// With a durable broker a row is stored PENDING and marked SCHEDULED once published, as a
// decision of its own (flow::Published): the SCHEDULED state sends its hook like any other.
TEST_F(ShellTest, WithADurableExecutorAPublishedRowIsScheduledAndSendsItsHook) {
  StopEngine();
  FakeExecutor executor;
  executor_ = &executor;
  durable_ = true;
  StartEngine();
  std::string id = Submit(kHookedJob);
  ASSERT_EQ(executor.started().size(), 1u);
  TaskRecord row = Execution(id)[0];
  EXPECT_EQ(row.state, TaskState::kScheduled);
  EXPECT_TRUE(row.scheduled_at.has_value());
  // Two decisions, possibly in one millisecond: listed in no particular order.
  EXPECT_THAT(TaskHookStates(*datastore_, id), UnorderedElementsAre("PENDING", "SCHEDULED"));
}

// The row's SCHEDULED, written when the durable broker confirmed the message, is a
// decision's change like any other: a stream watching the job is told of it.
TEST_F(ShellTest, WithADurableExecutorAPublishedRowIsScheduledAndSendsItsLiveEvent) {
  StopEngine();
  FakeExecutor executor;
  executor_ = &executor;
  events_ = &hub_;
  durable_ = true;
  StartEngine();
  std::shared_ptr<EventStream> stream = hub_.Subscribe({});
  std::string id = Submit("name: watched\ntasks:\n  - {name: t, run: ok}\n");
  ASSERT_EQ(executor.started().size(), 1u);
  const TaskRecord row = Execution(id)[0];
  ASSERT_EQ(row.state, TaskState::kScheduled);
  std::string seen;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        seen += stream->Take();
        // The event's fields are in name order: its state, then its task.
        return seen.find("\"state\":\"SCHEDULED\",\"taskId\":\"" + row.id + "\"") !=
               std::string::npos;
      },
      kWait))
      << seen;
  stream->Close();
}

constexpr char kHookedParallel[] = R"(
name: hooked
webhooks:
  - url: http://localhost:9999/hooks/task
    event: task.StateChange
  - url: http://localhost:9999/hooks/job
tasks:
  - name: p
    parallel:
      tasks:
        - {name: a, run: ok}
        - {name: b, run: ok}
        - {name: c, run: ok}
)";

// The reads of a job's rows and of what its hooks report (definition, context) so far.
int HookReads(testing::FaultyDatastore& datastore) {
  int reads = 0;
  for (const char* method : {"GetJob", "GetJobState", "GetTask", "GetJobDefinition",
                             "GetJobContext", "JobTasks", "ChildTasks"}) {
    reads += datastore.calls(std::string("Transaction.") + method);
  }
  return reads;
}

// The outbox writes a decision's hooks from flow's Notify effects, which hold the job and
// task rows as the decision leaves them: a submission of a job whose every row calls a
// hook reads nothing.
TEST_F(ShellTest, TheOutboxWritesADecisionsHooksWithoutReadingARow) {
  StopEngine();
  FakeExecutor executor;  // keeps the rows: nothing runs, nothing more is decided
  executor_ = &executor;
  StartEngine();
  const int before = HookReads(*faulty_);
  std::string id = Submit(kHookedParallel);
  EXPECT_EQ(HookReads(*faulty_), before);
  EXPECT_EQ(executor.started().size(), 3u);
  // p RUNNING, a, b and c SCHEDULED: one hook each (written in one scope, so listed in
  // no particular order); and the job's.
  EXPECT_THAT(TaskHookStates(*datastore_, id),
              UnorderedElementsAre("RUNNING", "SCHEDULED", "SCHEDULED", "SCHEDULED"));
  auto deliveries = datastore_->Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN(auto all, tx.JobWebhookDeliveries(id));
    EXPECT_EQ(all.size(), 5u);
    return Status::Ok();
  });
  EXPECT_TRUE(deliveries.ok());
}

// A delivery's body is redacted as it is written, so its sending needs nothing of its
// job: it outlives the job's deletion without showing a secret.
TEST_F(ShellTest, TheOutboxWritesBodiesWithTheJobsAndTasksSecretsRedacted) {
  StopEngine();
  FakeExecutor executor;
  executor_ = &executor;
  StartEngine();
  std::string id = Submit(R"(
name: hooked
description: uses s3cr3t-job-value
secrets: {k: s3cr3t-job-value}
webhooks:
  - url: http://localhost:9999/hooks/job
  - url: http://localhost:9999/hooks/task
    event: task.StateChange
tasks:
  - name: t
    var: env-t0ken-value
    env: {API_TOKEN: env-t0ken-value}
    run: ok
)");
  std::vector<std::string> bodies;
  ASSERT_TRUE(datastore_
                  ->Transact([&](Transaction& tx) -> Status {
                    BATON_ASSIGN_OR_RETURN(auto all, tx.JobWebhookDeliveries(id));
                    for (const WebhookDelivery& d : all) bodies.push_back(d.body);
                    return Status::Ok();
                  })
                  .ok());
  ASSERT_GE(bodies.size(), 2u);
  for (const std::string& body : bodies) {
    EXPECT_EQ(body.find("s3cr3t-job-value"), std::string::npos) << body;
    EXPECT_EQ(body.find("env-t0ken-value"), std::string::npos) << body;
    EXPECT_NE(body.find("[REDACTED]"), std::string::npos) << body;
  }
}

// A durable executor's confirms of one job's rows are one Published decision: the job's
// state row, definition and context are read once for the three rows' hooks.
TEST_F(ShellTest, ConfirmsOfAJobsRowsAreOneDecisionThatReadsItsJobOnce) {
  StopEngine();
  FakeExecutor executor;
  executor_ = &executor;
  durable_ = true;
  StartEngine();
  const int state_reads = faulty_->calls("Transaction.GetJobState");
  const int task_reads = faulty_->calls("Transaction.GetTask");
  std::string id = Submit(kHookedParallel);
  EXPECT_EQ(faulty_->calls("Transaction.GetJobState") - state_reads, 1);
  EXPECT_EQ(faulty_->calls("Transaction.GetTask") - task_reads, 3);
  for (const TaskRecord& row : Execution(id)) {
    if (row.task.name != "p") EXPECT_EQ(row.state, TaskState::kScheduled) << row.task.name;
  }
  // Listed by their creation time, then by random id: hooks written in one scope, or in
  // two decisions in the same millisecond, come in no particular order.
  EXPECT_THAT(TaskHookStates(*datastore_, id),
              UnorderedElementsAre("RUNNING", "PENDING", "PENDING", "PENDING", "SCHEDULED",
                                   "SCHEDULED", "SCHEDULED"));
}

// A row the executor refused is PENDING (flow::PublishRefused) and handed to it again
// after the republish delay.
TEST_F(ShellTest, ARefusedRowIsPendingAndStartedAgainAfterTheDelay) {
  StopEngine();
  FakeExecutor executor;
  executor.Refuse(1);
  executor_ = &executor;
  StartEngine();
  std::string id = Submit(kHookedJob);
  ASSERT_EQ(executor.started().size(), 1u);
  EXPECT_EQ(Execution(id)[0].state, TaskState::kPending);
  clock_.Advance(SchedulerOptions{}.republish_delay);
  ASSERT_TRUE(testing::WaitFor([&] { return executor.started().size() == 2; }));
  EXPECT_EQ(Execution(id)[0].state, TaskState::kScheduled);
  EXPECT_THAT(TaskHookStates(*datastore_, id), ElementsAre("SCHEDULED", "PENDING", "SCHEDULED"));
}

}  // namespace
}  // namespace baton

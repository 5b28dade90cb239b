// What one Scheduler decision reads of the datastore: bounded by the depth of nesting
// and the slots an each fills, never by the size of the job. Each case stores a job in
// the middle of its run (its rows written directly), delivers one worker outcome, and
// counts the job and task rows the decision's scope read (FaultyDatastore::rows_read);
// the count must not grow with the job.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "broker/inmemory/inmemory_broker.h"
#include "coordinator/executors/broker_executor.h"
#include "coordinator/scheduler.h"
#include "core/job_decode.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "flow/flow.h"
#include "testing/fake_clock.h"
#include "testing/faulty_datastore.h"

namespace baton {
namespace {

constexpr char kNode[] = "node-1";

class ShellViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = SqliteDatastore::Open(SqliteOptions{.path = ":memory:"});
    ASSERT_TRUE(ds.ok()) << ds.status().message();
    datastore_ = std::move(*ds);
    faulty_ = std::make_unique<testing::FaultyDatastore>(*datastore_);
    // No worker: what the decision starts stays in the broker's queue.
    scheduler_ = std::make_unique<Scheduler>(*faulty_, broker_, clock_, clock_,
                                             Executors{.runnable = &executor_});
  }

  // A RUNNING job of `job`, at `position`, with `rows` stored as they are.
  JobRecord Store(const Job& job, int position, const std::vector<TaskRecord>& rows,
                  const std::string& id) {
    JobRecord record = flow::NewJobRecord(job, "", id, clock_.Now());
    record.state = JobState::kRunning;
    record.started_at = clock_.Now();
    record.position = position;
    EXPECT_TRUE(datastore_->CreateJob(record).ok());
    EXPECT_TRUE(datastore_->CreateTasks(rows).ok());
    return record;
  }

  static TaskRecord Row(const std::string& job_id, const std::string& parent_id, int position,
                        TaskState state, Task task) {
    TaskRecord row;
    row.id = NewId();
    row.job_id = job_id;
    row.parent_id = parent_id;
    row.position = position;
    row.state = state;
    row.task = std::move(task);
    if (state == TaskState::kRunning && row.task.IsComposite() == false) row.node_id = kNode;
    return row;
  }

  // The rows that completing `task` (RUNNING on kNode) read.
  long RowsReadCompleting(const TaskRecord& task) {
    long before = faulty_->rows_read();
    TaskFinished done;
    done.task_id = task.id;
    done.job_id = task.job_id;
    done.node_id = kNode;
    done.outcome = TaskFinished::Outcome::kCompleted;
    done.result = "ok";
    done.at = clock_.Now();
    EXPECT_TRUE(scheduler_->OnFinished(done).ok());
    EXPECT_EQ(datastore_->GetTask(task.id)->state, TaskState::kCompleted);
    return faulty_->rows_read() - before;
  }

  static Task Runnable(const std::string& name) {
    Task t;
    t.name = name;
    t.image = "alpine:3";
    t.run = "true";
    return t;
  }

  // A chain of `steps` runnable tasks, its step in the middle RUNNING: the rows its
  // completion read (and the next step it started).
  long ChainStep(int steps) {
    Job job;
    job.name = "chain";
    for (int i = 0; i < steps; ++i) job.tasks.push_back(Runnable("step " + std::to_string(i)));
    const int position = steps / 2;
    std::string id = NewId();
    TaskRecord current = Row(id, "", position, TaskState::kRunning, job.tasks[position - 1]);
    Store(job, position, {current}, id);
    long rows = RowsReadCompleting(current);
    auto stored = datastore_->GetJob(id);
    EXPECT_EQ(stored->position, position + 1) << "the chain did not move on";
    EXPECT_EQ(datastore_->JobTasks(id)->size(), 2u);
    return rows;
  }

  // Job `job_id` holds two rows, `done` and the step it started: that step, started on
  // kNode (as the datastore had it before the start).
  TaskRecord StartTheOtherRow(const std::string& job_id, const TaskRecord& done) {
    auto rows = datastore_->JobTasks(job_id);
    EXPECT_EQ(rows->size(), 2u);
    TaskRecord next;
    for (const TaskRecord& row : *rows) {
      if (row.id != done.id) next = row;
    }
    TaskStarted started;
    started.task_id = next.id;
    started.job_id = job_id;
    started.node_id = kNode;
    started.at = clock_.Now();
    EXPECT_TRUE(scheduler_->OnStarted(started).ok());
    return next;
  }

  // A chain of `steps` runnable tasks, its step in the middle RUNNING: the top-level
  // tasks of job definitions read by the completion of that step (`first`) and by the
  // completion of the step it started (returned).
  long DefinitionReadBySecondStep(int steps, long* first) {
    Job job;
    job.name = "chain";
    for (int i = 0; i < steps; ++i) job.tasks.push_back(Runnable("step " + std::to_string(i)));
    const int position = steps / 2;
    std::string id = NewId();
    TaskRecord current = Row(id, "", position, TaskState::kRunning, job.tasks[position - 1]);
    Store(job, position, {current}, id);
    long before = faulty_->definition_tasks_read();
    RowsReadCompleting(current);
    *first = faulty_->definition_tasks_read() - before;
    TaskRecord next = StartTheOtherRow(id, current);
    before = faulty_->definition_tasks_read();
    RowsReadCompleting(next);
    EXPECT_EQ(datastore_->GetJob(id)->position, position + 2) << "the chain did not move on";
    return faulty_->definition_tasks_read() - before;
  }

  // A chain of four steps in a job of `inputs` inputs, its second step (var `second`)
  // RUNNING: the bytes of job contexts read by the completion of that step (`first`)
  // and by that of the third, whose env reads the second's result (returned).
  long ContextReadBySecondStep(int inputs, long* first) {
    Job job;
    job.name = "chain";
    for (int i = 0; i < inputs; ++i) job.inputs["input" + std::to_string(i)] = "value";
    for (int i = 0; i < 4; ++i) job.tasks.push_back(Runnable("step " + std::to_string(i)));
    job.tasks[1].var = "second";
    job.tasks[2].env["SECOND"] = "{{ tasks.second }} {{ inputs.input0 }}";
    std::string id = NewId();
    TaskRecord current = Row(id, "", 2, TaskState::kRunning, job.tasks[1]);
    Store(job, 2, {current}, id);
    long before = faulty_->context_bytes_read();
    RowsReadCompleting(current);
    *first = faulty_->context_bytes_read() - before;
    TaskRecord next = StartTheOtherRow(id, current);
    EXPECT_EQ(next.task.env["SECOND"], "ok value")
        << "the third step did not see the second's result";
    before = faulty_->context_bytes_read();
    RowsReadCompleting(next);
    auto stored = datastore_->GetJob(id);
    EXPECT_EQ(stored->position, 4) << "the chain did not move on";
    EXPECT_EQ(stored->context["tasks"]["second"], "ok");
    return faulty_->context_bytes_read() - before;
  }

  // An each of `size` children, concurrency 2: the first third done, two running, the
  // rest CREATED. The rows one running child's completion read (it starts the next).
  long EachStep(int size) {
    auto parsed = ParseJob(R"(
name: each
tasks:
  - name: fan
    each:
      list: "{{ sequence(1, 3) }}"
      concurrency: 2
      task:
        name: child
        image: alpine:3
        run: "true"
)",
                           DocumentFormat::kYaml);
    EXPECT_TRUE(parsed.ok()) << parsed.Message();
    const Job& job = *parsed.job;
    std::string id = NewId();
    TaskRecord each = Row(id, "", 1, TaskState::kRunning, job.tasks[0]);
    const int done = size / 3;
    each.each_size = size;
    each.completions = done;
    std::vector<TaskRecord> rows = {each};
    for (int i = 0; i < size; ++i) {
      TaskState state = i < done       ? TaskState::kCompleted
                        : i < done + 2 ? TaskState::kRunning
                                       : TaskState::kCreated;
      TaskRecord child = Row(id, each.id, 1, state, *job.tasks[0].each->task);
      child.each_index = i;
      rows.push_back(std::move(child));
    }
    Store(job, 1, rows, id);
    long read = RowsReadCompleting(rows[1 + done]);
    // The next child (the first CREATED one) was started.
    EXPECT_EQ(datastore_->GetTask(rows[1 + done + 2].id)->state, TaskState::kScheduled)
        << "the each did not start its next child";
    EXPECT_EQ(datastore_->GetTask(rows[1 + done + 3].id)->state, TaskState::kCreated);
    return read;
  }

  testing::FakeClock clock_;
  InMemoryBroker broker_;
  BrokerExecutor executor_{broker_, /*durable_broker=*/false};
  std::unique_ptr<SqliteDatastore> datastore_;
  std::unique_ptr<testing::FaultyDatastore> faulty_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(ShellViewTest, AChainStepReadsAsManyRowsAtTwentyThousandStepsAsAtTwenty) {
  long short_chain = ChainStep(20);
  long long_chain = ChainStep(20000);
  EXPECT_GT(short_chain, 0);
  EXPECT_EQ(long_chain, short_chain);
}

// A running job's definition never changes: a decision reads it once per job (and
// shares it), so a step of a chain of 20,000 does not read or copy 20,000 task definitions.
TEST_F(ShellViewTest, AChainStepReadsItsJobsDefinitionOnceAtTwentyAndTwentyThousandSteps) {
  long first_short = 0;
  long first_long = 0;
  long second_short = DefinitionReadBySecondStep(20, &first_short);
  long second_long = DefinitionReadBySecondStep(20000, &first_long);
  EXPECT_LE(first_short, 20);
  EXPECT_LE(first_long, 20000);
  EXPECT_EQ(second_short, 0);
  EXPECT_EQ(second_long, second_short);
}

// A job's context (its inputs, secrets and results) changes only when a task with a var
// completes: a decision reads and parses it once per job and keeps it, also across the
// decision that changed it (its own write), so a step of a job with 20,000 inputs parses
// none of them.
TEST_F(ShellViewTest, AStepReadsItsJobsContextOnceAtTenAndTwentyThousandInputs) {
  long first_small = 0;
  long first_big = 0;
  long second_small = ContextReadBySecondStep(10, &first_small);
  long second_big = ContextReadBySecondStep(20000, &first_big);
  EXPECT_GT(first_small, 0);
  EXPECT_GT(first_big, 20000);
  EXPECT_EQ(second_small, 0);
  EXPECT_EQ(second_big, 0);
}

// After a cancel, the killed task's report about the ended job reads nothing of its
// definition when it has no webhooks: a 1.6 MB job's was parsed again for it
// (e2e_big_job's cancel).
TEST_F(ShellViewTest, TheKilledTasksReportAfterACancelDoesNotReadTheDefinitionAgain) {
  Job job;
  job.name = "cancelled";
  for (int i = 0; i < 50; ++i) job.tasks.push_back(Runnable("step " + std::to_string(i)));
  std::string id = NewId();
  TaskRecord running = Row(id, "", 10, TaskState::kRunning, job.tasks[9]);
  Store(job, 10, {running}, id);
  ASSERT_TRUE(scheduler_->Cancel(id).ok());
  ASSERT_EQ(datastore_->GetJob(id)->state, JobState::kCancelled);
  const long before = faulty_->definition_tasks_read();
  TaskFinished killed;
  killed.task_id = running.id;
  killed.job_id = id;
  killed.node_id = kNode;
  killed.outcome = TaskFinished::Outcome::kCancelled;
  killed.at = clock_.Now();
  EXPECT_TRUE(scheduler_->OnFinished(killed).ok());
  EXPECT_EQ(faulty_->definition_tasks_read() - before, 0);
  EXPECT_EQ(datastore_->GetTask(running.id)->state, TaskState::kCancelled);
}

TEST_F(ShellViewTest, AnEachChildsCompletionReadsAsManyRowsAtTwoThousandChildrenAsAtTwenty) {
  long small = EachStep(20);
  long big = EachStep(2000);
  EXPECT_GT(small, 0);
  EXPECT_EQ(big, small);
}

}  // namespace
}  // namespace baton

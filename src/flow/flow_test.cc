// Table-driven decision tests: (rows, event) → effects, one rule per case.
#include "flow/flow.h"

#include <gtest/gtest.h>

#include <chrono>

namespace baton::flow {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const TimePoint kNow = TimePoint(milliseconds(1'700'000'000'000LL));
const std::string kSeed = "018bcfe56800" + std::string(20, '0');

Task Runnable(std::string name) {
  Task t;
  t.name = std::move(name);
  t.run = "true";
  return t;
}

JobRecord JobOf(std::vector<Task> tasks) {
  Job job;
  job.name = "j";
  job.tasks = std::move(tasks);
  return NewJobRecord(job, "", "job1", kNow);
}

template <typename E>
std::vector<E> All(const std::vector<Effect>& effects) {
  std::vector<E> out;
  for (const Effect& e : effects) {
    if (const E* v = std::get_if<E>(&e)) out.push_back(*v);
  }
  return out;
}

std::vector<Effect> SubmitOf(const JobRecord& job, Policy policy = {}) {
  View view;
  view.policy = policy;
  view.id_seed = kSeed;
  return Decide(Submit{job}, view, kNow);
}

struct SubmitCase {
  std::string name;
  std::vector<Task> tasks;
  JobState job_state;
  int rows;
  int starts;
};

class SubmitTest : public testing::TestWithParam<SubmitCase> {};

TEST_P(SubmitTest, StoresTheJobRunningWithWhatItsFirstStepStarts) {
  const SubmitCase& c = GetParam();
  auto effects = SubmitOf(JobOf(c.tasks));
  auto jobs = All<CreateJob>(effects);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].row.state, c.job_state);
  EXPECT_EQ(All<CreateTask>(effects).size(), static_cast<std::size_t>(c.rows));
  EXPECT_EQ(All<Start>(effects).size(), static_cast<std::size_t>(c.starts));
  for (const Start& s : All<Start>(effects)) EXPECT_FALSE(s.row.task.IsComposite());
}

Task ParallelOf(std::vector<Task> tasks) {
  Task t;
  t.name = "p";
  t.parallel = Parallel{std::move(tasks)};
  return t;
}
Task EachOf(Task child, std::string list, int concurrency = 0) {
  Task t;
  t.name = "e";
  Each e;
  e.list = std::move(list);
  *e.task = std::move(child);
  e.concurrency = concurrency;
  t.each = std::move(e);
  return t;
}
Task Skipped(Task t) {
  t.if_expr = "false";
  return t;
}

INSTANTIATE_TEST_SUITE_P(
    Rules, SubmitTest,
    testing::Values(
        SubmitCase{"Runnable", {Runnable("a")}, JobState::kRunning, 1, 1},
        SubmitCase{"Empty", {}, JobState::kCompleted, 0, 0},
        SubmitCase{"SkippedOnly", {Skipped(Runnable("a"))}, JobState::kCompleted, 1, 0},
        SubmitCase{"SkippedThenRunnable",
                   {Skipped(Runnable("a")), Runnable("b")},
                   JobState::kRunning,
                   2,
                   1},
        SubmitCase{"BadIfFailsTheJob",
                   {[] {
                     Task t = Runnable("a");
                     t.if_expr = "{{ nosuch }}";
                     return t;
                   }()},
                   JobState::kFailed,
                   1,
                   0},
        SubmitCase{"ReservedQueueFromATemplateFails",
                   {[] {
                     Task t = Runnable("a");
                     t.queue = "{{ 'x-' + 'jobs' }}";
                     return t;
                   }()},
                   JobState::kFailed,
                   1,
                   0},
        SubmitCase{
            "Parallel", {ParallelOf({Runnable("a"), Runnable("b")})}, JobState::kRunning, 3, 2},
        SubmitCase{"EachOfThree",
                   {EachOf(Runnable("x"), "{{ sequence(0, 3) }}")},
                   JobState::kRunning,
                   4,
                   3},
        SubmitCase{"EachWithConcurrency",
                   {EachOf(Runnable("x"), "{{ sequence(0, 3) }}", 1)},
                   JobState::kRunning,
                   4,
                   1},
        SubmitCase{"EachOfNothingCompletes",
                   {EachOf(Runnable("x"), "{{ sequence(0, 0) }}")},
                   JobState::kCompleted,
                   1,
                   0},
        SubmitCase{"EachOfParallelsStartsTheirChildren",
                   {EachOf(ParallelOf({Runnable("a")}), "{{ sequence(0, 2) }}")},
                   JobState::kRunning,
                   5,
                   2},
        SubmitCase{
            "EachListNotAListFails", {EachOf(Runnable("x"), "{{ 3 }}")}, JobState::kFailed, 1, 0}),
    [](const auto& info) { return info.param.name; });

// The stored rows of a submitted job, as a shell would hold them.
struct Rows {
  View view;
  void Apply(const std::vector<Effect>& effects) {
    for (const Effect& e : effects) {
      if (auto* j = std::get_if<CreateJob>(&e)) view.jobs[j->row.id] = j->row;
      if (auto* j = std::get_if<UpdateJob>(&e)) view.jobs[j->row.id] = j->row;
      if (auto* t = std::get_if<CreateTask>(&e)) view.tasks[t->row.id] = t->row;
      if (auto* t = std::get_if<UpdateTask>(&e)) view.tasks[t->row.id] = t->row;
    }
    view.id_seed = "018bcfe56801" + std::string(20, '1');
  }
};

TEST(FlowTest, ACompletedTaskSetsItsVarAndCompletesTheJobWithItsOutput) {
  Task a = Runnable("a");
  a.var = "out";
  JobRecord job = JobOf({a});
  job.job.output = "{{ tasks.out }}";
  Rows rows;
  rows.Apply(SubmitOf(job));
  std::string id = rows.view.tasks.begin()->first;
  auto effects = Decide(Completed{id, "w1", "hello", kNow}, rows.view, kNow);
  auto updates = All<UpdateJob>(effects);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].row.state, JobState::kCompleted);
  EXPECT_EQ(updates[0].row.result, "hello");
  EXPECT_TRUE(updates[0].context);
  EXPECT_EQ(All<JobFinished>(effects).size(), 1u);
  // The same report again: nothing more.
  rows.Apply(effects);
  EXPECT_TRUE(Decide(Completed{id, "w1", "hello", kNow}, rows.view, kNow).empty());
}

TEST(FlowTest, AFailedTaskWithRetriesLeftIsRetriedAfterItsBackoff) {
  Task a = Runnable("a");
  a.retry = Retry{.limit = 2, .initial_delay = seconds(1)};
  Rows rows;
  rows.Apply(SubmitOf(JobOf({a})));
  std::string id = rows.view.tasks.begin()->first;
  auto effects = Decide(Failed{id, "w1", "exit 1", kNow}, rows.view, kNow);
  auto created = All<CreateTask>(effects);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].row.task.retry->attempts, 1);
  EXPECT_EQ(created[0].row.state, TaskState::kPending);
  auto later = All<StartAt>(effects);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].at, kNow + seconds(1));
  EXPECT_TRUE(All<Start>(effects).empty());
}

TEST(FlowTest, AFailedChildFailsItsParallelAndCancelsTheRest) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({ParallelOf({Runnable("a"), Runnable("b")})})));
  std::string a;
  for (const auto& [id, t] : rows.view.tasks) {
    if (t.task.name == "a") a = id;
  }
  View view = rows.view;  // the view of a's outcome: a and its parent (and the job)
  auto effects = Decide(Failed{a, "w1", "boom", kNow}, view, kNow);
  auto cancels = All<CancelActive>(effects);
  ASSERT_EQ(cancels.size(), 2u);  // under the parallel (fail-fast), then the job's rest
  EXPECT_FALSE(cancels[0].under.empty());
  auto jobs = All<UpdateJob>(effects);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].row.state, JobState::kFailed);
  EXPECT_EQ(jobs[0].row.error, "boom");
  EXPECT_FALSE(jobs[0].context);
}

TEST(FlowTest, AStartOfACancelledTaskKillsItInsteadOfRunningIt) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a")})));
  TaskRecord& row = rows.view.tasks.begin()->second;
  row.state = TaskState::kCancelled;
  auto effects = Decide(Started{row.id, "w2", kNow}, rows.view, kNow);
  EXPECT_TRUE(All<UpdateTask>(effects).empty());
  auto kills = All<Kill>(effects);
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].node_id, "w2");
}

TEST(FlowTest, CancelOfAFinishedJobIsRefusedAndRestartOfARunningOne) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a")})));
  EXPECT_EQ(All<Refused>(Decide(Restart{"job1"}, rows.view, kNow)).size(), 1u);
  auto cancel = Decide(Cancel{"job1"}, rows.view, kNow);
  ASSERT_EQ(All<UpdateJob>(cancel).size(), 1u);
  EXPECT_EQ(All<UpdateJob>(cancel)[0].row.state, JobState::kCancelled);
  rows.Apply(cancel);
  EXPECT_EQ(All<Refused>(Decide(Cancel{"job1"}, rows.view, kNow)).size(), 1u);
  auto restart = Decide(Restart{"job1"}, rows.view, kNow);
  EXPECT_EQ(All<Start>(restart).size(), 1u);
}

TEST(FlowTest, AStepThatCannotBeStoredFailsTheJobAndCancelsItsTasks) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a")})));
  auto effects = Decide(StepFailed{"job1", "row refused"}, rows.view, kNow);
  auto jobs = All<UpdateJob>(effects);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].row.state, JobState::kFailed);
  EXPECT_EQ(jobs[0].row.error, "the engine could not take a step: row refused");
  EXPECT_EQ(All<CancelActive>(effects).size(), 1u);
  EXPECT_EQ(All<JobFinished>(effects).size(), 1u);
  // A job already ended is left as it is.
  rows.Apply(effects);
  EXPECT_TRUE(Decide(StepFailed{"job1", "again"}, rows.view, kNow).empty());
}

TEST(FlowTest, DefaultsApplyToRunnableTasks) {
  JobRecord job = JobOf({Runnable("a")});
  job.job.defaults = Defaults{.queue = "gpu", .priority = 3};
  auto starts = All<Start>(SubmitOf(job));
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].row.task.queue, "gpu");
  EXPECT_EQ(starts[0].row.task.priority, 3);
}

TEST(FlowTest, ADurableBrokerStoresRowsPendingUntilConfirmed) {
  auto effects = SubmitOf(JobOf({Runnable("a")}), Policy{.durable_broker = true});
  ASSERT_EQ(All<Start>(effects).size(), 1u);
  EXPECT_EQ(All<Start>(effects)[0].row.state, TaskState::kPending);
}

TEST(FlowTest, FrontierAfterACrashStartsTheLostRowAndThenWritesNothing) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a")})));
  std::vector<TaskRecord> all;
  for (const auto& [id, t] : rows.view.tasks) all.push_back(t);
  auto effects = Frontier(rows.view.jobs.at("job1"), all, kNow, {}, nullptr, kSeed);
  EXPECT_EQ(All<Start>(effects).size(), 1u);
  for (const Effect& e : effects) EXPECT_FALSE(IsRowEffect(e));
}

TEST(FlowTest, LeaseExpiryRequeuesUntilMaxRedeliveries) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a")})));
  TaskRecord& row = rows.view.tasks.begin()->second;
  row.state = TaskState::kRunning;
  row.node_id = "w1";
  auto effects = Decide(LeaseExpired{row.id, "w1"}, rows.view, kNow);
  ASSERT_EQ(All<CreateTask>(effects).size(), 1u);
  EXPECT_EQ(All<CreateTask>(effects)[0].row.redelivered, 1);
  row.redelivered = 3;
  auto gave_up = Decide(LeaseExpired{row.id, "w1"}, rows.view, kNow);
  EXPECT_TRUE(All<CreateTask>(gave_up).empty());
  ASSERT_EQ(All<UpdateJob>(gave_up).size(), 1u);
  EXPECT_EQ(All<UpdateJob>(gave_up)[0].row.state, JobState::kFailed);
}

}  // namespace
}  // namespace baton::flow

// Table-driven decision tests: (rows, event) → effects, one rule per case.
#include "flow/flow.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>

#include "core/names.h"

namespace baton::flow {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
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

TEST_P(SubmitTest, StoresTheJobScheduledWithWhatItsFirstStepStarts) {
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
        SubmitCase{"Runnable", {Runnable("a")}, JobState::kScheduled, 1, 1},
        SubmitCase{"Empty", {}, JobState::kCompleted, 0, 0},
        SubmitCase{"SkippedOnly", {Skipped(Runnable("a"))}, JobState::kCompleted, 1, 0},
        SubmitCase{"SkippedThenRunnable",
                   {Skipped(Runnable("a")), Runnable("b")},
                   JobState::kScheduled,
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
            "Parallel", {ParallelOf({Runnable("a"), Runnable("b")})}, JobState::kScheduled, 3, 2},
        SubmitCase{"EachOfThree",
                   {EachOf(Runnable("x"), "{{ sequence(0, 3) }}")},
                   JobState::kScheduled,
                   4,
                   3},
        SubmitCase{"EachOfABareListAsTorkEvaluatesIt",
                   {EachOf(Runnable("x"), "[10, 20, 30]")},
                   JobState::kScheduled,
                   4,
                   3},
        SubmitCase{"EachWithConcurrency",
                   {EachOf(Runnable("x"), "{{ sequence(0, 3) }}", 1)},
                   JobState::kScheduled,
                   4,
                   1},
        SubmitCase{"EachOfNothingCompletes",
                   {EachOf(Runnable("x"), "{{ sequence(0, 0) }}")},
                   JobState::kCompleted,
                   1,
                   0},
        SubmitCase{"EachOfParallelsStartsTheirChildren",
                   {EachOf(ParallelOf({Runnable("a")}), "{{ sequence(0, 2) }}")},
                   JobState::kScheduled,
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

TEST(FlowTest, AJobIsScheduledUntilATaskStartsThenRunningAndEndsPastItsLastTask) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a")})));
  EXPECT_EQ(rows.view.jobs.at("job1").state, JobState::kScheduled);
  EXPECT_EQ(rows.view.jobs.at("job1").position, 1);
  std::string id = rows.view.tasks.begin()->first;
  // The start's view: the row and its job's state (what the shell reads for a start).
  auto started = Decide(Started{id, "w1", kNow}, rows.view, kNow);
  auto jobs = All<UpdateJob>(started);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].row.state, JobState::kRunning);
  EXPECT_TRUE(jobs[0].state_changed);
  EXPECT_FALSE(jobs[0].context);
  rows.Apply(started);
  // A second start report changes nothing of the job.
  EXPECT_TRUE(All<UpdateJob>(Decide(Started{id, "w1", kNow}, rows.view, kNow)).empty());
  auto done = Decide(Completed{id, "w1", "r", kNow}, rows.view, kNow);
  jobs = All<UpdateJob>(done);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].row.state, JobState::kCompleted);
  EXPECT_EQ(jobs[0].row.position, 2);  // taskCount + 1, as Tork's
}

TEST(FlowTest, AnOutcomeWithoutAStartMovesTheJobToRunning) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a"), Runnable("b")})));
  std::string a = rows.view.tasks.begin()->first;
  auto effects = Decide(Completed{a, "w1", "r", kNow}, rows.view, kNow);
  auto jobs = All<UpdateJob>(effects);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].row.state, JobState::kRunning);
  EXPECT_EQ(jobs[0].row.position, 2);
}

TEST(FlowTest, RestartOfAJobThatFailedPastItsLastTaskIsRefused) {
  JobRecord job = JobOf({Runnable("a")});
  job.job.output = "{{ nosuch }}";
  Rows rows;
  rows.Apply(SubmitOf(job));
  std::string id = rows.view.tasks.begin()->first;
  rows.Apply(Decide(Completed{id, "w1", "r", kNow}, rows.view, kNow));
  ASSERT_EQ(rows.view.jobs.at("job1").state, JobState::kFailed);
  EXPECT_EQ(rows.view.jobs.at("job1").position, 2);
  auto restart = Decide(Restart{"job1"}, rows.view, kNow);
  auto refused = All<Refused>(restart);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].reason, "the job has no more tasks to run");
  EXPECT_TRUE(All<UpdateJob>(restart).empty());
  EXPECT_TRUE(All<Start>(restart).empty());
}

TEST(FlowTest, AFailedTaskWithRetriesLeftIsRetriedAfterItsBackoff) {
  Task a = Runnable("a");
  a.retry = Retry{.limit = 2, .initial_delay = seconds(1)};
  Rows rows;
  rows.Apply(SubmitOf(JobOf({a})));
  std::string id = rows.view.tasks.begin()->first;
  auto effects = Decide(Failed{id, "w1", "exit 1", kNow, FailReason::kExit, 1}, rows.view, kNow);
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
  auto effects = Decide(Failed{a, "w1", "boom", kNow, FailReason::kError, {}}, view, kNow);
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

// With a durable broker a row is stored PENDING; the executor's confirm makes it SCHEDULED
// (a row update like any other: its hook and change follow), once.
TEST(FlowTest, APublishedRowIsScheduledOnceWithADurableBroker) {
  Policy durable;
  durable.durable_broker = true;
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a")}), durable));
  rows.view.policy = durable;
  std::string id = rows.view.tasks.begin()->first;
  ASSERT_EQ(rows.view.tasks.at(id).state, TaskState::kPending);
  auto effects = Decide(Published{{id}}, rows.view, kNow);
  auto updates = All<UpdateTask>(effects);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].row.state, TaskState::kScheduled);
  EXPECT_EQ(updates[0].row.scheduled_at, kNow);
  EXPECT_TRUE(updates[0].state_changed);
  rows.Apply(effects);
  EXPECT_TRUE(Decide(Published{{id}}, rows.view, kNow).empty());
  // Without a durable broker the row was stored SCHEDULED: nothing to mark.
  Rows plain;
  plain.Apply(SubmitOf(JobOf({Runnable("a")})));
  EXPECT_TRUE(Decide(Published{{plain.view.tasks.begin()->first}}, plain.view, kNow).empty());
}

// A durable broker's confirms of a job's rows are one decision: each PENDING row is
// SCHEDULED, one no longer PENDING (started meanwhile) is left alone.
TEST(FlowTest, PublishedMarksEachPendingRowOfItsBatchAndLeavesTheRest) {
  Policy durable;
  durable.durable_broker = true;
  Rows rows;
  rows.Apply(SubmitOf(JobOf({ParallelOf({Runnable("a"), Runnable("b"), Runnable("c")})}), durable));
  rows.view.policy = durable;
  std::map<std::string, std::string> id;  // name → row id
  for (const auto& [row_id, t] : rows.view.tasks) id[t.task.name] = row_id;
  rows.view.tasks.at(id["b"]).state = TaskState::kRunning;
  auto effects = Decide(Published{{id["a"], id["b"], id["c"], "gone"}}, rows.view, kNow);
  auto updates = All<UpdateTask>(effects);
  ASSERT_EQ(updates.size(), 2u);
  for (const UpdateTask& u : updates) {
    EXPECT_NE(u.row.id, id["b"]);
    EXPECT_EQ(u.row.state, TaskState::kScheduled);
  }
}

// A refused row is PENDING (not in a queue) and queued again after the republish delay.
TEST(FlowTest, ARefusedRowIsPendingAndRepublishedAfterTheDelay) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a")})));
  std::string id = rows.view.tasks.begin()->first;
  rows.view.policy.republish_delay = seconds(5);
  auto effects = Decide(PublishRefused{id, "refused"}, rows.view, kNow);
  auto updates = All<UpdateTask>(effects);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].row.state, TaskState::kPending);
  auto timers = All<StartAt>(effects);
  ASSERT_EQ(timers.size(), 1u);
  EXPECT_EQ(timers[0].task_id, id);
  EXPECT_EQ(timers[0].at, kNow + seconds(5));
  rows.Apply(effects);
  // Its RetryDue queues it again.
  EXPECT_EQ(All<Start>(Decide(RetryDue{id}, rows.view, kNow)).size(), 1u);
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

// A restarted job's timeout counts from the restart, and so does the one Frontier arms
// after a crash (from the started_at the restart stored), not from the first start.
TEST(FlowTest, ARestartedJobsTimeoutCountsFromTheRestartAlsoAfterACrash) {
  JobRecord job = JobOf({Runnable("a")});
  job.job.timeout = minutes(1);
  Rows rows;
  rows.Apply(SubmitOf(job));
  rows.Apply(Decide(Cancel{"job1"}, rows.view, kNow));
  const TimePoint later = kNow + minutes(10);
  auto restart = Decide(Restart{"job1"}, rows.view, later);
  auto armed = All<ArmJobTimeout>(restart);
  ASSERT_EQ(armed.size(), 1u);
  EXPECT_EQ(armed[0].at, later + minutes(1));
  rows.Apply(restart);
  EXPECT_EQ(rows.view.jobs.at("job1").started_at, later);
  std::vector<TaskRecord> all;
  for (const auto& [id, t] : rows.view.tasks) all.push_back(t);
  auto again = All<ArmJobTimeout>(
      Frontier(rows.view.jobs.at("job1"), all, later + seconds(5), {}, nullptr, kSeed));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].at, later + minutes(1));
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

// After a crash, a top-level step RUNNING on a node that is gone gets a new attempt, and
// the job goes on: its old row, now FAILED, is not its step's end (Frontier took it for
// one, and failed the job, when it looked only at the rows it was given). The node is
// not live, so it stopped with the engine: the new attempt spends no redelivery.
TEST(FlowTest, FrontierRequeuesAStepOfADeadNodeAndKeepsTheJobRunning) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a"), Runnable("b")})));
  TaskRecord& row = rows.view.tasks.begin()->second;
  row.state = TaskState::kRunning;
  row.node_id = "gone";
  row.started_at = kNow;
  std::vector<TaskRecord> all;
  for (const auto& [id, t] : rows.view.tasks) all.push_back(t);
  const std::set<std::string> live = {"w1"};
  auto effects = Frontier(rows.view.jobs.at("job1"), all, kNow + std::chrono::seconds(1), {}, &live,
                          "028bcfe56800" + std::string(20, '0'));
  ASSERT_EQ(All<CreateTask>(effects).size(), 1u);
  EXPECT_EQ(All<CreateTask>(effects)[0].row.redelivered, 0);
  EXPECT_EQ(All<Start>(effects).size(), 1u);
  for (const UpdateJob& job : All<UpdateJob>(effects)) {
    EXPECT_EQ(job.row.state, JobState::kRunning) << job.row.error;
  }
  EXPECT_TRUE(All<JobFinished>(effects).empty());
}

// ---------------------------------------------------------------------------------
// Scenarios: a job, then events (by task name, as a worker would send them), decided
// by a minimal shell over all of the job's rows (follow-ups decided in turn, cancels
// applied); the table says the effects that matter: what started, the job's end, its
// result and the rows' states.

struct Shell {
  View view;
  TimePoint now = kNow;              // every decision's time
  std::vector<std::string> started;  // task names, in order of their Start effects
  std::vector<Effect> last;          // every effect of the last event, follow-ups too
  int made = 0;

  void On(const flow::Event& first) { Run({first}, std::nullopt); }
  // The engine restarted: Frontier over every row of the job, with no worker live (every
  // RUNNING runnable was lost), then its follow-ups.
  void Reconcile() {
    std::vector<TaskRecord> rows;
    for (const auto& [id, t] : view.tasks) {
      if (t.job_id == "job1") rows.push_back(t);
    }
    const std::set<std::string> live;
    view.id_seed = fmt::format("018bcfe5{:04x}", ++made) + std::string(20, '2');
    Run({}, Frontier(Top(), rows, now, view.policy, &live, view.id_seed));
  }
  // Applies `first` (if any), then decides the events in turn, follow-ups included.
  void Run(std::vector<flow::Event> pending, std::optional<std::vector<Effect>> first) {
    last.clear();
    for (std::size_t i = 0;;) {
      std::vector<Effect> effects;
      if (first) {
        effects = std::move(*first);
        first.reset();
      } else if (i < pending.size()) {
        view.id_seed = fmt::format("018bcfe5{:04x}", ++made) + std::string(20, '2');
        EachCounts();
        effects = Decide(pending[i++], view, now);
      } else {
        break;
      }
      // By index, a copy each: a cancel's effects join the list as it is walked.
      for (std::size_t k = 0; k < effects.size(); ++k) {
        Effect e = effects[k];
        if (auto* j = std::get_if<CreateJob>(&e)) view.jobs[j->row.id] = j->row;
        if (auto* j = std::get_if<UpdateJob>(&e)) view.jobs[j->row.id] = j->row;
        if (auto* t = std::get_if<CreateTask>(&e)) view.tasks[t->row.id] = t->row;
        if (auto* t = std::get_if<UpdateTask>(&e)) view.tasks[t->row.id] = t->row;
        if (auto* c = std::get_if<CancelActive>(&e)) {
          std::vector<CancelledRow> rows;
          for (auto& [id, t] : view.tasks) {
            bool terminal = t.state == TaskState::kCompleted || t.state == TaskState::kFailed ||
                            t.state == TaskState::kCancelled || t.state == TaskState::kSkipped;
            if (t.job_id != c->job_id || terminal || (!c->under.empty() && !Below(t, c->under)))
              continue;
            rows.push_back({t.id, t.state, t.node_id, t.subjob_id, {}});
            t.state = TaskState::kCancelled;
          }
          for (Effect& more : AfterCancel(rows, view.policy)) effects.push_back(more);
        }
        if (auto* s = std::get_if<Start>(&e)) started.push_back(s->row.task.name);
        if (auto* f = std::get_if<FollowUp>(&e)) pending.push_back(f->event);
      }
      last.insert(last.end(), effects.begin(), effects.end());
    }
  }
  // What flow.h says the view holds of every each: its next CREATED child (the fewest
  // rows it may hold: one, so that every FillEach path runs) and how many of its
  // children run.
  void EachCounts() {
    view.next_created.clear();
    view.running_children.clear();
    for (const auto& [id, t] : view.tasks) {
      if (t.parent_id.empty() || !view.tasks.at(t.parent_id).task.each) continue;
      if (t.state == TaskState::kCreated) {
        std::vector<TaskRecord>& next = view.next_created[t.parent_id];
        if (next.empty()) {
          next.push_back(t);
        } else if (t.each_index < next.front().each_index) {
          next.front() = t;
        }
      } else if (t.state != TaskState::kCompleted && t.state != TaskState::kFailed &&
                 t.state != TaskState::kCancelled && t.state != TaskState::kSkipped) {
        ++view.running_children[t.parent_id];
      }
    }
  }
  bool Below(const TaskRecord& t, const std::string& ancestor) const {
    for (std::string p = t.parent_id; !p.empty(); p = view.tasks.at(p).parent_id) {
      if (p == ancestor) return true;
    }
    return false;
  }
  // The newest row of the task called `name` (a retry's or a redelivery's).
  const TaskRecord& Row(const std::string& name) const {
    const TaskRecord* best = nullptr;
    for (const auto& [id, t] : view.tasks) {
      if (t.task.name == name && (best == nullptr || t.created_at > best->created_at ||
                                  (t.created_at == best->created_at && t.id > best->id))) {
        best = &t;
      }
    }
    if (best == nullptr) throw std::runtime_error("no row named " + name);
    return *best;
  }
  const JobRecord& Top() const { return view.jobs.at("job1"); }
  const JobRecord* Sub() const {
    for (const auto& [id, j] : view.jobs) {
      if (id != "job1") return &j;
    }
    return nullptr;
  }
};

// One step of a scenario: what a worker (or a user, or a timer) says.
enum class Say {
  kOk,          // Started then Completed, with result "r:<name>"
  kFail,        // Started then Failed
  kTimeout,     // Started then TaskTimedOut (the worker's runtime hit `timeout`)
  kRedeliver,   // Started then Redelivery (the worker handed it back)
  kProgress50,  // Started then Progress 50
  kCancel,      // Cancel of the job
  kRestart,     // Restart of the job
  kJobTimeout,  // the job's deadline
  kRetryDue,    // the backoff of the task's newest row is over
  kCrash,       // the engine restarted with no worker live: Frontier reconciles the job
  kStart,       // Started only: the task runs
  kPause,       // Pause of the job
  kResume,      // Resume of the job
  kIsPaused,    // no event: the job is PAUSED now (checked)
  kRerun,       // Rerun of the job; `task` says "MODE" or "all from NAME"
};
struct Step {
  Say say;
  std::string task;  // the task's name (for kOk ... kRetryDue)
};

struct Scenario {
  std::string name;
  std::vector<Task> tasks;
  std::vector<Step> steps;
  JobState end;
  std::vector<std::string> started;                  // every Start, in order
  std::map<std::string, TaskState> states = {};      // newest row of each named task
  std::string result = "";                           // the job's result
  std::function<void(JobRecord&)> tweak = nullptr;   // job-level fields
  std::function<void(const Shell&)> more = nullptr;  // what the table cannot say
};

void Play(Shell& shell, const Step& step) {
  auto run = [&](const std::string& name) -> const TaskRecord& {
    const TaskRecord& row = shell.Row(name);
    shell.On(Started{row.id, "w1", kNow});
    return shell.Row(name);
  };
  switch (step.say) {
    case Say::kOk:
      shell.On(Completed{run(step.task).id, "w1", "r:" + step.task, kNow});
      return;
    case Say::kFail:
      shell.On(Failed{run(step.task).id, "w1", "exit status 1", kNow, FailReason::kExit, 1});
      return;
    case Say::kTimeout:
      shell.On(TaskTimedOut{run(step.task).id, "w1", seconds(5)});
      return;
    case Say::kRedeliver:
      shell.On(Redelivery{run(step.task).id, "w1", "worker stopping"});
      return;
    case Say::kProgress50:
      shell.On(Progress{run(step.task).id, 50});
      return;
    case Say::kCancel:
      shell.On(Cancel{"job1"});
      return;
    case Say::kRestart:
      shell.On(Restart{"job1"});
      return;
    case Say::kJobTimeout:
      shell.On(JobTimedOut{"job1", seconds(60)});
      return;
    case Say::kRetryDue:
      shell.On(RetryDue{shell.Row(step.task).id});
      return;
    case Say::kCrash:
      shell.Reconcile();
      return;
    case Say::kStart:
      run(step.task);
      return;
    case Say::kPause:
      shell.On(Pause{"job1"});
      return;
    case Say::kResume:
      shell.On(Resume{"job1"});
      return;
    case Say::kIsPaused:
      EXPECT_EQ(shell.Top().state, JobState::kPaused);
      return;
    case Say::kRerun: {
      Rerun rerun{.job_id = "job1"};
      std::string mode = step.task;
      if (auto from = mode.find(" from "); from != std::string::npos) {
        rerun.from = mode.substr(from + 6);
        mode = mode.substr(0, from);
      }
      rerun.mode = mode == "all"           ? RerunMode::kAll
                   : mode == "from_failed" ? RerunMode::kFromFailed
                                           : RerunMode::kFailedOnly;
      shell.On(rerun);
      return;
    }
  }
}

void PrintTo(const Scenario& c, std::ostream* os) { *os << c.name; }

class ScenarioTest : public testing::TestWithParam<Scenario> {};

// Submits the scenario's job, plays its steps and checks its end, its starts, the newest
// row of each named task, the job's result and what `more` says.
void RunScenario(const Scenario& c) {
  JobRecord job = JobOf(c.tasks);
  if (c.tweak) c.tweak(job);
  job = NewJobRecord(job.job, "", "job1", kNow);
  Shell shell;
  shell.On(Submit{job});
  for (const Step& step : c.steps) Play(shell, step);
  EXPECT_EQ(shell.Top().state, c.end) << shell.Top().error;
  EXPECT_EQ(shell.started, c.started);
  for (const auto& [name, state] : c.states) {
    EXPECT_EQ(shell.Row(name).state, state) << name;
  }
  EXPECT_EQ(shell.Top().result, c.result);
  if (c.more) c.more(shell);
}

TEST_P(ScenarioTest, EndsAsTheTableSays) { RunScenario(GetParam()); }

Task WithVar(Task t, std::string var) {
  t.var = std::move(var);
  return t;
}
Task WithRetry(Task t, int limit, std::optional<Duration> delay = std::nullopt) {
  t.retry = Retry{.limit = limit, .initial_delay = delay};
  return t;
}
Task SubJobOf(std::vector<Task> tasks, std::string output = "", bool detached = false) {
  Task t;
  t.name = "s";
  SubJob s;
  s.name = "sub";
  s.tasks = std::move(tasks);
  s.output = std::move(output);
  s.detached = detached;
  t.subjob = std::move(s);
  return t;
}
template <typename E>
int Count(const std::vector<Effect>& effects) {
  return static_cast<int>(All<E>(effects).size());
}

using S = Say;
using TS = TaskState;
INSTANTIATE_TEST_SUITE_P(
    Rules, ScenarioTest,
    testing::Values(
        // ---- sub-jobs
        Scenario{"SubJobRunsItsTasksAndCompletesItsTask",
                 {SubJobOf({Runnable("a")})},
                 {{S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a"},
                 {{"s", TS::kCompleted}, {"a", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   ASSERT_NE(s.Sub(), nullptr);
                   EXPECT_EQ(s.Sub()->state, JobState::kCompleted);
                   EXPECT_EQ(s.Sub()->parent_id, s.Row("s").id);
                   EXPECT_EQ(s.Row("s").subjob_id, s.Sub()->id);
                 }},
        Scenario{"SubJobOutputIsItsTasksResult",
                 {WithVar(SubJobOf({WithVar(Runnable("a"), "x")}, "{{ tasks.x }}!"), "out")},
                 {{S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a"},
                 {{"s", TS::kCompleted}},
                 "r:a!",
                 [](JobRecord& j) { j.job.output = "{{ tasks.out }}"; }},
        Scenario{"AFailedSubJobFailsItsTaskAndTheJob",
                 {SubJobOf({Runnable("a"), Runnable("b")}), Runnable("after")},
                 {{S::kFail, "a"}},
                 JobState::kFailed,
                 {"a"},
                 {{"s", TS::kFailed}, {"a", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Sub()->state, JobState::kFailed);
                   EXPECT_EQ(s.Top().error, "exit status 1");
                 }},
        Scenario{"ADetachedSubJobCompletesItsTaskAtOnceAndRunsOn",
                 {SubJobOf({Runnable("a")}, "", true), Runnable("next")},
                 {{S::kFail, "a"}, {S::kOk, "next"}},
                 JobState::kCompleted,
                 {"a", "next"},
                 {{"s", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   // Its failure is its own: the parent job completed regardless.
                   EXPECT_EQ(s.Sub()->state, JobState::kFailed);
                   EXPECT_TRUE(s.Sub()->parent_id.empty());
                 }},
        Scenario{"CancelOfAJobCancelsItsSubJob",
                 {SubJobOf({Runnable("a")})},
                 {{S::kCancel, ""}},
                 JobState::kCancelled,
                 {"a"},
                 {{"s", TS::kCancelled}, {"a", TS::kCancelled}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(s.Sub()->state, JobState::kCancelled); }},
        // ---- timeouts
        Scenario{"JobTimeoutFailsTheJobAndCancelsItsRows",
                 {ParallelOf({Runnable("a"), Runnable("b")})},
                 {{S::kOk, "a"}, {S::kJobTimeout, ""}},
                 JobState::kFailed,
                 {"a", "b"},
                 {{"a", TS::kCompleted}, {"b", TS::kCancelled}, {"p", TS::kCancelled}},
                 "",
                 [](JobRecord& j) { j.job.timeout = seconds(60); },
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().error, "job timed out after 1m0s");
                   EXPECT_EQ(Count<DisarmJobTimeout>(s.last), 1);
                   EXPECT_EQ(Count<Drop>(s.last), 1);  // b, queued
                 }},
        Scenario{"JobTimeoutOfAFinishedJobDecidesNothing",
                 {Runnable("a")},
                 {{S::kOk, "a"}, {S::kJobTimeout, ""}},
                 JobState::kCompleted,
                 {"a"},
                 {},
                 "",
                 [](JobRecord& j) { j.job.timeout = seconds(60); },
                 [](const Shell& s) { EXPECT_TRUE(s.last.empty()); }},
        Scenario{"TaskTimeoutIsAFailureRetriedAsOne",
                 {WithRetry(Runnable("a"), 1)},
                 {{S::kTimeout, "a"}, {S::kTimeout, "a"}},
                 JobState::kFailed,
                 {"a", "a"},
                 {{"a", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().error, "task timed out after 5s");
                   EXPECT_EQ(s.Row("a").task.retry->attempts, 1);
                 }},
        // ---- progress
        Scenario{"ProgressOfTheCurrentStepMovesTheJobs",
                 {Runnable("a"), Runnable("b")},
                 {{S::kOk, "a"}, {S::kProgress50, "b"}},
                 JobState::kRunning,
                 {"a", "b"},
                 {{"b", TS::kRunning}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Row("b").progress, 50);
                   EXPECT_EQ(s.Top().progress, 75);
                 }},
        Scenario{"ProgressOfAChildMovesOnlyTheChild",
                 {ParallelOf({Runnable("a")})},
                 {{S::kProgress50, "a"}},
                 JobState::kRunning,
                 {"a"},
                 {},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Row("a").progress, 50);
                   EXPECT_EQ(s.Top().progress, 0);
                 }},
        // ---- retries and redeliveries
        Scenario{"RetryExhaustedFailsTheJob",
                 {WithRetry(Runnable("a"), 2)},
                 {{S::kFail, "a"}, {S::kFail, "a"}, {S::kFail, "a"}},
                 JobState::kFailed,
                 {"a", "a", "a"},
                 {{"a", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(s.Row("a").task.retry->attempts, 2); }},
        Scenario{"ARetryInItsBackoffStartsWhenDue",
                 {WithRetry(Runnable("a"), 1, seconds(2))},
                 {{S::kFail, "a"}, {S::kRetryDue, "a"}, {S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a", "a"},
                 {{"a", TS::kCompleted}}},
        Scenario{"RedeliveryRequeuesUntilMaxRedeliveriesThenFails",
                 {Runnable("a")},
                 {{S::kRedeliver, "a"},
                  {S::kRedeliver, "a"},
                  {S::kRedeliver, "a"},
                  {S::kRedeliver, "a"}},
                 JobState::kFailed,
                 {"a", "a", "a", "a"},
                 {{"a", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Row("a").redelivered, 3);
                   EXPECT_EQ(s.Top().error,
                             "worker stopping (re-queued 3 times already: giving up)");
                 }},
        // ---- restart
        Scenario{"RestartRerunsTheFailedStepOnly",
                 {Runnable("a"), Runnable("b")},
                 {{S::kOk, "a"}, {S::kFail, "b"}, {S::kRestart, ""}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b", "b"},
                 {{"b", TS::kCompleted}}},
        Scenario{"RestartOfAFailedParallelRunsEveryChildAgain",
                 {ParallelOf({Runnable("a"), Runnable("b")})},
                 {{S::kOk, "a"}, {S::kFail, "b"}, {S::kRestart, ""}, {S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b", "a", "b"},
                 {{"p", TS::kCompleted}}},
        Scenario{"RestartOfAFailedEachRunsItAgain",
                 {EachOf(Runnable("x"), "{{ sequence(0, 1) }}")},
                 {{S::kFail, "x"}, {S::kRestart, ""}, {S::kOk, "x"}},
                 JobState::kCompleted,
                 {"x", "x"},
                 {{"e", TS::kCompleted}}},
        Scenario{"RestartOfANestedFailureRebuildsTheStepFromItsTop",
                 {ParallelOf({EachOf(ParallelOf({Runnable("a")}), "{{ sequence(0, 1) }}")})},
                 {{S::kFail, "a"}, {S::kRestart, ""}, {S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a", "a"},
                 {{"a", TS::kCompleted}}},
        // ---- cancel
        Scenario{"CancelOfNestedCompositesCancelsEveryActiveRow",
                 {ParallelOf({EachOf(ParallelOf({Runnable("a")}), "{{ sequence(0, 2) }}"),
                              Runnable("b")})},
                 {{S::kOk, "b"}, {S::kProgress50, "a"}, {S::kCancel, ""}},
                 JobState::kCancelled,
                 {"a", "a", "b"},
                 {{"b", TS::kCompleted}, {"e", TS::kCancelled}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   for (const auto& [id, row] : s.view.tasks) {
                     if (row.task.name != "b") {
                       EXPECT_EQ(row.state, TS::kCancelled) << row.task.name;
                     }
                   }
                   EXPECT_EQ(Count<Kill>(s.last), 1);  // the a that runs on w1
                   EXPECT_EQ(Count<Drop>(s.last), 1);  // the a still queued
                 }},
        // ---- if on composites
        Scenario{"IfFalseSkipsAParallelWithoutItsChildren",
                 {Skipped(ParallelOf({Runnable("a")})), Runnable("b")},
                 {{S::kOk, "b"}},
                 JobState::kCompleted,
                 {"b"},
                 {{"p", TS::kSkipped}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(s.view.tasks.size(), 2u); }},
        Scenario{"IfFalseSkipsAnEachAndASubJob",
                 {Skipped(EachOf(Runnable("x"), "{{ sequence(0, 2) }}")),
                  Skipped(SubJobOf({Runnable("a")}))},
                 {},
                 JobState::kCompleted,
                 {},
                 {{"e", TS::kSkipped}, {"s", TS::kSkipped}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(s.Sub(), nullptr); }},
        Scenario{"IfOnAnEachsChildSkipsThatIterationOnly",
                 {EachOf(
                     [] {
                       Task t = Runnable("x{{ item.index }}");
                       t.if_expr = "{{ item.index == 1 }}";
                       return t;
                     }(),
                     "{{ sequence(0, 3) }}")},
                 {{S::kOk, "x1"}},
                 JobState::kCompleted,
                 {"x1"}},
        // ---- each over composites of every kind
        Scenario{"EachOverParallelsRunsTheirChildren",
                 {EachOf(ParallelOf({Runnable("a{{ item.index }}")}), "{{ sequence(0, 2) }}")},
                 {{S::kOk, "a0"}, {S::kOk, "a1"}},
                 JobState::kCompleted,
                 {"a0", "a1"}},
        Scenario{"EachOverEachesRunsTheInnerIterations",
                 {EachOf(
                     [] {
                       Task inner = EachOf(Runnable("x{{ o.index }}{{ item.index }}"),
                                           "{{ sequence(0, 2) }}");
                       return inner;
                     }(),
                     "{{ sequence(0, 2) }}")},
                 {{S::kOk, "x00"}, {S::kOk, "x01"}, {S::kOk, "x10"}, {S::kOk, "x11"}},
                 JobState::kCompleted,
                 {"x00", "x01", "x10", "x11"},
                 {},
                 "",
                 [](JobRecord& j) { j.job.tasks[0].each->var = "o"; }},
        Scenario{"EachOverSubJobsRunsEachSubJob",
                 {EachOf(SubJobOf({Runnable("a")}), "{{ sequence(0, 2) }}")},
                 {},
                 JobState::kScheduled,
                 {"a", "a"},
                 {},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   int subjobs = 0;
                   for (const auto& [id, j] : s.view.jobs) subjobs += id != "job1";
                   EXPECT_EQ(subjobs, 2);
                 }},
        Scenario{"AStartInASubJobMovesItAndItsParentJobToRunning",
                 {SubJobOf({Runnable("a"), Runnable("b")})},
                 {{S::kOk, "a"}},
                 JobState::kRunning,
                 {"a", "b"},
                 {},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   for (const auto& [id, j] : s.view.jobs) {
                     EXPECT_EQ(j.state, JobState::kRunning) << id;
                   }
                 }},
        Scenario{"EachWithConcurrencyStartsTheNextAsOneEnds",
                 {EachOf(Runnable("x{{ item.index }}"), "{{ sequence(0, 3) }}", 1)},
                 {{S::kOk, "x0"}, {S::kOk, "x1"}, {S::kOk, "x2"}},
                 JobState::kCompleted,
                 {"x0", "x1", "x2"}},
        // ---- empty parallel, defaults on nested tasks
        Scenario{"AnEmptyParallelCompletesAtOnce",
                 {ParallelOf({}), Runnable("b")},
                 {{S::kOk, "b"}},
                 JobState::kCompleted,
                 {"b"},
                 {{"p", TS::kCompleted}}},
        Scenario{"DefaultsApplyToNestedTasks",
                 {ParallelOf({EachOf(Runnable("x"), "{{ sequence(0, 1) }}")})},
                 {},
                 JobState::kScheduled,
                 {"x"},
                 {},
                 "",
                 [](JobRecord& j) {
                   j.job.defaults = Defaults{.retry = Retry{.limit = 2}, .queue = "gpu"};
                 },
                 [](const Shell& s) {
                   EXPECT_EQ(s.Row("x").task.queue, "gpu");
                   ASSERT_TRUE(s.Row("x").task.retry);
                   EXPECT_EQ(s.Row("x").task.retry->limit, 2);
                 }}),
    [](const auto& info) { return info.param.name; });

// ---- pause and resume (pause.cc)

Task PauseBefore(Task t) {
  t.pause_before = true;
  return t;
}
// The rows of the task called `name`, oldest first.
std::vector<TaskRecord> RowsOf(const Shell& s, const std::string& name) {
  std::vector<TaskRecord> rows;
  for (const auto& [id, t] : s.view.tasks) {
    if (t.task.name == name) rows.push_back(t);
  }
  std::sort(rows.begin(), rows.end(),
            [](const TaskRecord& a, const TaskRecord& b) { return a.id < b.id; });
  return rows;
}

class PauseTest : public testing::TestWithParam<Scenario> {};
TEST_P(PauseTest, HoldsEveryStartUntilTheResume) { RunScenario(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Rules, PauseTest,
    testing::Values(
        // b and c wait in the queue, a runs: b and c are withdrawn, a ends while paused; the
        // resume runs b and c as new attempts, then d (made once the parallel completes).
        Scenario{"APauseDuringAParallelWithdrawsWhatIsQueuedAndLetsTheRunningTaskEnd",
                 {ParallelOf({Runnable("a"), Runnable("b"), Runnable("c")}), Runnable("d")},
                 {{S::kStart, "a"},
                  {S::kPause, ""},
                  {S::kOk, "a"},
                  {S::kIsPaused, ""},
                  {S::kResume, ""},
                  {S::kOk, "b"},
                  {S::kOk, "c"},
                  {S::kOk, "d"}},
                 JobState::kCompleted,
                 {"a", "b", "c", "b", "c", "d"},
                 {{"a", TS::kCompleted}, {"b", TS::kCompleted}, {"d", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   std::vector<TaskRecord> b = RowsOf(s, "b");
                   ASSERT_EQ(b.size(), 2u);
                   EXPECT_EQ(b[0].state, TS::kCancelled);
                   EXPECT_NE(b[0].error.find("its job was paused"), std::string::npos)
                       << b[0].error;
                   EXPECT_EQ(RowsOf(s, "a").size(), 1u);  // the running one ran once
                 }},
        // a was taken by a worker that had not reported it yet when the job paused: it runs
        // on and its end counts; only b, never started, runs again on resume.
        Scenario{
            "AWithdrawnTaskAWorkerHadTakenRunsOnAndIsNotRunAgain",
            {ParallelOf({Runnable("a"), Runnable("b")})},
            {{S::kPause, ""}, {S::kOk, "a"}, {S::kIsPaused, ""}, {S::kResume, ""}, {S::kOk, "b"}},
            JobState::kCompleted,
            {"a", "b", "b"},
            {{"a", TS::kCompleted}, {"b", TS::kCompleted}},
            "",
            nullptr,
            [](const Shell& s) {
              EXPECT_EQ(RowsOf(s, "a").size(), 1u);
              std::vector<TaskRecord> b = RowsOf(s, "b");
              ASSERT_EQ(b.size(), 2u);
              EXPECT_EQ(b[0].state, TS::kCancelled);
            }},
        Scenario{"ANextStepMadeWhilePausedIsHeldAlsoThroughACrash",
                 {Runnable("a"), Runnable("b")},
                 {{S::kStart, "a"},
                  {S::kPause, ""},
                  {S::kOk, "a"},
                  {S::kCrash, ""},
                  {S::kIsPaused, ""},
                  {S::kResume, ""},
                  {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b"},
                 {{"b", TS::kCompleted}}},
        Scenario{"ARunningTaskLostInACrashWhilePausedRunsAgainOnlyOnResume",
                 {Runnable("a"), Runnable("b")},
                 {{S::kStart, "a"},
                  {S::kPause, ""},
                  {S::kCrash, ""},
                  {S::kIsPaused, ""},
                  {S::kResume, ""},
                  {S::kOk, "a"},
                  {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "a", "b"},
                 {{"a", TS::kCompleted}}},
        Scenario{
            "APausePointPausesTheJobBeforeItsTaskStarts",
            {Runnable("a"), PauseBefore(Runnable("b")), Runnable("c")},
            {{S::kOk, "a"}, {S::kIsPaused, ""}, {S::kResume, ""}, {S::kOk, "b"}, {S::kOk, "c"}},
            JobState::kCompleted,
            {"a", "b", "c"},
            {{"c", TS::kCompleted}},
            "",
            nullptr,
            [](const Shell& s) { EXPECT_EQ(RowsOf(s, "b").size(), 1u); }},
        Scenario{"ARetryDueWhilePausedIsHeldAndItsBackoffArmedAgainOnResume",
                 {WithRetry(Runnable("a"), 1, seconds(10))},
                 {{S::kFail, "a"},
                  {S::kPause, ""},
                  {S::kRetryDue, "a"},
                  {S::kResume, ""},
                  {S::kRetryDue, "a"},
                  {S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a", "a"},
                 {{"a", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(RowsOf(s, "a").size(), 2u); }},
        Scenario{
            "ASubJobPausesAndResumesWithItsParent",
            {SubJobOf({Runnable("x"), Runnable("y")})},
            {{S::kStart, "x"}, {S::kPause, ""}, {S::kOk, "x"}, {S::kResume, ""}, {S::kOk, "y"}},
            JobState::kCompleted,
            {"x", "y"},
            {{"s", TS::kCompleted}},
            "",
            nullptr,
            [](const Shell& s) {
              ASSERT_NE(s.Sub(), nullptr);
              EXPECT_EQ(s.Sub()->state, JobState::kCompleted);
            }},
        Scenario{"ACancelOfAPausedJobEndsItAndRunsItsFinally",
                 {Runnable("a"), Runnable("b")},
                 {{S::kStart, "a"}, {S::kPause, ""}, {S::kCancel, ""}, {S::kOk, "z"}},
                 JobState::kCancelled,
                 {"a", "z"},
                 {{"a", TS::kCancelled}, {"z", TS::kCompleted}},
                 "",
                 [](JobRecord& j) { j.job.finally = {Runnable("z")}; }},
        Scenario{"AJobsTimeoutStillEndsItWhilePaused",
                 {Runnable("a")},
                 {{S::kStart, "a"}, {S::kPause, ""}, {S::kJobTimeout, ""}},
                 JobState::kFailed,
                 {"a"},
                 {{"a", TS::kCancelled}},
                 "",
                 [](JobRecord& j) { j.job.timeout = seconds(60); }}),
    [](const auto& info) { return info.param.name; });

TEST(FlowTest, PauseAndResumeAreRefusedInTheWrongStateWithTheState) {
  Shell shell;
  shell.On(Submit{NewJobRecord(JobOf({Runnable("a")}).job, "", "job1", kNow)});
  shell.On(Resume{"job1"});
  ASSERT_EQ(Count<Refused>(shell.last), 1);
  EXPECT_EQ(All<Refused>(shell.last)[0].reason,
            "only a PAUSED job can be resumed; this one is SCHEDULED");
  shell.On(Pause{"job1"});
  EXPECT_EQ(shell.Top().state, JobState::kPaused);
  shell.On(Pause{"job1"});
  ASSERT_EQ(Count<Refused>(shell.last), 1);
  EXPECT_EQ(All<Refused>(shell.last)[0].reason,
            "only a SCHEDULED or RUNNING job can be paused; this one is PAUSED");
  shell.On(Resume{"job1"});
  EXPECT_EQ(shell.Top().state, JobState::kScheduled);  // none of its tasks ran yet
  shell.On(Completed{shell.Row("a").id, "w1", "", kNow});
  EXPECT_EQ(shell.Top().state, JobState::kCompleted);
  shell.On(Pause{"job1"});
  ASSERT_EQ(Count<Refused>(shell.last), 1);
  EXPECT_EQ(All<Refused>(shell.last)[0].reason,
            "only a SCHEDULED or RUNNING job can be paused; this one is COMPLETED");
}

TEST(FlowTest, ASubJobUnderAPausedJobIsResumedOnlyWithIt) {
  Shell shell;
  shell.On(Submit{
      NewJobRecord(JobOf({SubJobOf({Runnable("x"), Runnable("y")})}).job, "", "job1", kNow)});
  Play(shell, {S::kStart, "x"});
  shell.On(Pause{"job1"});
  ASSERT_NE(shell.Sub(), nullptr);
  ASSERT_EQ(shell.Sub()->state, JobState::kPaused);
  shell.On(Resume{shell.Sub()->id});
  ASSERT_EQ(Count<Refused>(shell.last), 1);
  EXPECT_EQ(All<Refused>(shell.last)[0].reason,
            "the job above it (job1) is PAUSED: resume that one, and this one resumes with it");
  EXPECT_EQ(shell.Sub()->state, JobState::kPaused);
  shell.On(Resume{"job1"});
  EXPECT_EQ(shell.Sub()->state, JobState::kRunning);
  Play(shell, {S::kOk, "x"});
  Play(shell, {S::kOk, "y"});
  EXPECT_EQ(shell.Top().state, JobState::kCompleted);
}

TEST(FlowTest, AQuietPauseOfAJobAlreadyPausedWritesNothing) {
  Shell shell;
  shell.On(Submit{NewJobRecord(JobOf({Runnable("a")}).job, "", "job1", kNow)});
  shell.On(Pause{"job1"});
  shell.On(Pause{"job1", /*quiet=*/true});
  // Its queued row's withdrawal told again, nothing else.
  for (const Effect& e : shell.last) EXPECT_TRUE(std::holds_alternative<Withdraw>(e));
  shell.On(Resume{"job1"});
  shell.On(Resume{"job1", /*quiet=*/true});
  EXPECT_TRUE(shell.last.empty());
}

// ---- graphs (core/graph.h): needs, trigger rules, skips

Task Needs(Task t, std::vector<std::string> needs, std::optional<TriggerRule> rule = std::nullopt) {
  for (std::string& n : needs) t.needs.push_back({std::move(n), ""});
  t.trigger_rule = rule;
  return t;
}
void Dag(JobRecord& j) { j.job.mode = TaskOrder::kDag; }
Task Optional(Task t) {
  t.optional = true;
  return t;
}
Task When(Task t, std::string need, std::string when) {
  t.needs.push_back({std::move(need), std::move(when)});
  return t;
}
using TR = TriggerRule;

INSTANTIATE_TEST_SUITE_P(
    Graphs, ScenarioTest,
    testing::Values(
        Scenario{"ADiamondRunsItsMiddleTasksAtOnceAndTheLastAfterBoth",
                 {Runnable("a"), Needs(Runnable("b"), {"a"}), Needs(Runnable("c"), {"a"}),
                  Needs(Runnable("d"), {"b", "c"})},
                 {{S::kOk, "a"}, {S::kOk, "c"}, {S::kOk, "b"}, {S::kOk, "d"}},
                 JobState::kCompleted,
                 {"a", "b", "c", "d"},
                 {{"d", TS::kCompleted}},
                 "",
                 Dag,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().steps, "cccc");
                   EXPECT_EQ(s.Top().position, 5);
                   EXPECT_EQ(s.Top().progress, 100);
                 }},
        Scenario{"TheMiddleTasksOfADiamondWaitForTheFirst",
                 {Runnable("a"), Needs(Runnable("b"), {"a"}), Needs(Runnable("c"), {"a"}),
                  Needs(Runnable("d"), {"b", "c"})},
                 {{S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kRunning,
                 {"a", "b", "c"},
                 {},
                 "",
                 Dag,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().steps, "ccr.");
                   EXPECT_EQ(s.Top().progress, 50);
                 }},
        Scenario{"AFailureSkipsWhatNeedsItAndTheSkipPropagates",
                 {Runnable("a"), Needs(Runnable("b"), {"a"}), Needs(Runnable("c"), {"b"})},
                 {{S::kFail, "a"}},
                 JobState::kFailed,
                 {"a"},
                 {{"a", TS::kFailed}, {"b", TS::kSkipped}, {"c", TS::kSkipped}},
                 "",
                 Dag,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().error, "exit status 1");
                   EXPECT_EQ(s.Top().steps, "fss");
                   EXPECT_EQ(s.Row("b").error,
                             "not run: its trigger rule all_success cannot be met (\"a\" FAILED)");
                   EXPECT_EQ(s.Row("c").error,
                             "not run: its trigger rule all_success cannot be met (\"b\" "
                             "SKIPPED)");
                 }},
        Scenario{"AnIndependentBranchRunsOnAfterAFailureAndTheJobFailsAtTheEnd",
                 {Runnable("a"), Runnable("b")},
                 {{S::kFail, "a"}, {S::kOk, "b"}},
                 JobState::kFailed,
                 {"a", "b"},
                 {{"a", TS::kFailed}, {"b", TS::kCompleted}},
                 "",
                 Dag,
                 [](const Shell& s) { EXPECT_EQ(s.Top().error, "exit status 1"); }},
        Scenario{"AllDoneRunsACleanupAfterAFailureInASequence",
                 {Runnable("a"), Needs(Runnable("cleanup"), {}, TR::kAllDone), Runnable("after"),
                  Runnable("last")},
                 {{S::kFail, "a"}, {S::kOk, "cleanup"}, {S::kFail, "after"}},
                 JobState::kFailed,
                 {"a", "cleanup", "after"},
                 {{"cleanup", TS::kCompleted}, {"last", TS::kSkipped}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(s.Top().error, "exit status 1"); }},
        Scenario{"ATaskSkippedByItsIfCountsAsASuccess",
                 {Skipped(Runnable("a")), Needs(Runnable("b"), {"a"})},
                 {{S::kOk, "b"}},
                 JobState::kCompleted,
                 {"b"},
                 {{"a", TS::kSkipped}, {"b", TS::kCompleted}},
                 "",
                 Dag,
                 [](const Shell& s) { EXPECT_EQ(s.Top().steps, "pc"); }},
        Scenario{"OneFailedRunsOnAFailureAndIsSkippedWithout",
                 {Runnable("a"), Runnable("b"), Needs(Runnable("alert"), {"a"}, TR::kOneFailed),
                  Needs(Runnable("fine"), {"b"}, TR::kOneFailed)},
                 {{S::kFail, "a"}, {S::kOk, "b"}, {S::kOk, "alert"}},
                 JobState::kFailed,
                 {"a", "b", "alert"},
                 {{"alert", TS::kCompleted}, {"fine", TS::kSkipped}},
                 "",
                 Dag},
        Scenario{"OneSuccessStartsAtTheFirstSuccessWhileTheOtherRuns",
                 {Runnable("a"), Runnable("b"), Needs(Runnable("c"), {"a", "b"}, TR::kOneSuccess)},
                 {{S::kOk, "a"}, {S::kOk, "c"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b", "c"},
                 {},
                 "",
                 Dag},
        Scenario{"OneSuccessIsSkippedWhenAllFailed",
                 {Runnable("a"), Runnable("b"), Needs(Runnable("c"), {"a", "b"}, TR::kOneSuccess)},
                 {{S::kFail, "a"}, {S::kFail, "b"}},
                 JobState::kFailed,
                 {"a", "b"},
                 {{"c", TS::kSkipped}},
                 "",
                 Dag},
        Scenario{"AllFailedRunsOnlyWhenEveryNeededTaskFailed",
                 {Runnable("a"), Runnable("b"), Needs(Runnable("c"), {"a", "b"}, TR::kAllFailed),
                  Needs(Runnable("d"), {"a"}, TR::kAllFailed)},
                 {{S::kFail, "a"}, {S::kFail, "b"}, {S::kOk, "c"}, {S::kOk, "d"}},
                 JobState::kFailed,
                 {"a", "b", "d", "c"},
                 {{"c", TS::kCompleted}},
                 "",
                 Dag},
        Scenario{"AllFailedIsSkippedBySuccess",
                 {Runnable("a"), Needs(Runnable("c"), {"a"}, TR::kAllFailed)},
                 {{S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a"},
                 {{"c", TS::kSkipped}},
                 "",
                 Dag},
        Scenario{"NoneFailedRunsAfterASkipAndMinOneSuccessDoesNot",
                 {Runnable("a"), Needs(Runnable("b"), {"a"}),
                  Needs(Runnable("c"), {"b"}, TR::kNoneFailed),
                  Needs(Runnable("d"), {"b"}, TR::kNoneFailedMinOneSuccess),
                  Needs(Runnable("e"), {"a"}, TR::kNoneFailed)},
                 {{S::kFail, "a"}, {S::kOk, "c"}},
                 JobState::kFailed,
                 {"a", "c"},
                 {{"b", TS::kSkipped},
                  {"c", TS::kCompleted},
                  {"d", TS::kSkipped},
                  {"e", TS::kSkipped}},
                 "",
                 Dag},
        Scenario{"ARetryKeepsTheStepRunningUntilItsLastAttempt",
                 {WithRetry(Runnable("a"), 1), Needs(Runnable("b"), {"a"})},
                 {{S::kFail, "a"}, {S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "a", "b"},
                 {},
                 "",
                 Dag},
        Scenario{"NeededResultsAreTasksVars",
                 {WithVar(Runnable("a"), "x"), Needs(WithVar(Runnable("b"), "y"), {"a"})},
                 {{S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b"},
                 {},
                 "r:a r:b",
                 [](JobRecord& j) {
                   Dag(j);
                   j.job.output = "{{ tasks.x }} {{ tasks.y }}";
                 }},
        Scenario{"RestartRunsTheFailedAndSkippedStepsAndKeepsTheCompleted",
                 {Runnable("a"), Needs(Runnable("b"), {"a"}), Runnable("c")},
                 {{S::kOk, "c"}, {S::kFail, "a"}, {S::kRestart, ""}, {S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "c", "a", "b"},
                 {{"c", TS::kCompleted}},
                 "",
                 Dag,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().steps, "ccc");
                   EXPECT_TRUE(s.Top().error.empty());
                 }},
        Scenario{"ACancelEndsTheRunningStepsCancelled",
                 {Runnable("a"), Runnable("b"), Needs(Runnable("c"), {"a"})},
                 {{S::kOk, "a"}, {S::kCancel, ""}},
                 JobState::kCancelled,
                 {"a", "b", "c"},
                 {{"b", TS::kCancelled}, {"c", TS::kCancelled}},
                 "",
                 Dag,
                 [](const Shell& s) { EXPECT_EQ(s.Top().steps, "cxx"); }},
        Scenario{"ASubJobsTasksFormAGraphOfTheirOwn",
                 {[] {
                   Task t = SubJobOf({Runnable("x"), Runnable("y"),
                                      Needs(Runnable("z"), {"x", "y"}, TR::kAllDone)});
                   t.subjob->mode = TaskOrder::kDag;
                   return t;
                 }()},
                 {{S::kFail, "x"}, {S::kOk, "y"}, {S::kOk, "z"}},
                 JobState::kFailed,
                 {"x", "y", "z"},
                 {{"s", TS::kFailed}, {"z", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(s.Sub()->steps, "fcc"); }},
        Scenario{"AWhenOnAnEdgeTakesItOnlyWhenItHolds",
                 {WithVar(Runnable("check"), "kind"),
                  When(Runnable("fast"), "check", "{{ tasks.kind == 'r:check' }}"),
                  When(Runnable("slow"), "check", "{{ tasks.kind != 'r:check' }}"),
                  Needs(Runnable("join"), {"fast", "slow"}, TR::kNoneFailedMinOneSuccess)},
                 {{S::kOk, "check"}, {S::kOk, "fast"}, {S::kOk, "join"}},
                 JobState::kCompleted,
                 {"check", "fast", "join"},
                 {{"slow", TS::kSkipped}, {"join", TS::kCompleted}},
                 "",
                 Dag,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Row("slow").error,
                             "not run: its trigger rule all_success cannot be met (\"check\" "
                             "COMPLETED but its when is false)");
                 }},
        Scenario{"AWhenThatCannotBeEvaluatedFailsItsTask",
                 {Runnable("a"), When(Runnable("b"), "a", "{{ nosuch }}")},
                 {{S::kOk, "a"}},
                 JobState::kFailed,
                 {"a"},
                 {{"b", TS::kFailed}},
                 "",
                 Dag,
                 [](const Shell& s) {
                   EXPECT_TRUE(s.Top().error.starts_with("needs[0].when: ")) << s.Top().error;
                 }},
        Scenario{"AnOptionalTasksFailureLetsItsGraphGoOnAsASuccess",
                 {Optional(Runnable("a")), Needs(Runnable("b"), {"a"}),
                  Needs(Runnable("alert"), {"a"}, TR::kOneFailed)},
                 {{S::kFail, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b"},
                 {{"a", TS::kFailed}, {"alert", TS::kSkipped}},
                 "",
                 Dag,
                 [](const Shell& s) { EXPECT_EQ(s.Top().steps, "pcs"); }},
        Scenario{"AnOptionalTasksFailureLetsASequenceGoOn",
                 {Optional(WithVar(Runnable("a"), "x")), Runnable("b")},
                 {{S::kFail, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b"},
                 {{"a", TS::kFailed}, {"b", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_TRUE(s.Top().error.empty());
                   EXPECT_FALSE(s.Top().context.at("tasks").contains("x"));
                 }},
        Scenario{"AnOptionalChildsFailureNeitherFailsNorStopsItsParallel",
                 {ParallelOf({Optional(Runnable("x")), Runnable("y")}), Runnable("after")},
                 {{S::kFail, "x"}, {S::kOk, "y"}, {S::kOk, "after"}},
                 JobState::kCompleted,
                 {"x", "y", "after"},
                 {{"x", TS::kFailed}, {"y", TS::kCompleted}, {"p", TS::kCompleted}}},
        Scenario{"AnOptionalTaskIsRetriedBeforeItsFailureIsLetGo",
                 {Optional(WithRetry(Runnable("a"), 1)), Runnable("b")},
                 {{S::kFail, "a"}, {S::kFail, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "a", "b"},
                 {{"a", TS::kFailed}}},
        Scenario{"AGraphStepCanBeAComposite",
                 {ParallelOf({Runnable("x"), Runnable("y")}), Needs(Runnable("after"), {"p"})},
                 {{S::kOk, "x"}, {S::kOk, "y"}, {S::kOk, "after"}},
                 JobState::kCompleted,
                 {"x", "y", "after"},
                 {{"p", TS::kCompleted}},
                 "",
                 Dag}),
    [](const auto& info) { return info.param.name; });

TEST(FlowTest, FrontierActsOnAGraphStepThatEndedAndStartsWhatNowMayRun) {
  JobRecord job = NewJobRecord(
      JobOf({Runnable("a"), Runnable("b"), Needs(Runnable("c"), {"a"})}).job, "", "job1", kNow);
  job.job.mode = TaskOrder::kDag;
  job.state = JobState::kRunning;
  job.started_at = kNow;
  job.steps = "rr.";
  TaskRecord a;
  a.id = "ta";
  a.job_id = "job1";
  a.position = 1;
  a.task = Runnable("a");
  a.state = TaskState::kCompleted;  // its end was stored, not acted on
  a.created_at = kNow;
  TaskRecord b = a;
  b.id = "tb";
  b.position = 2;
  b.task = Runnable("b");
  b.state = TaskState::kScheduled;
  std::vector<Effect> effects = Frontier(job, {a, b}, kNow, Policy{}, nullptr, kSeed);
  auto jobs = All<UpdateJob>(effects);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].row.steps, "crr");
  auto created = All<CreateTask>(effects);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].row.task.name, "c");
  EXPECT_EQ(created[0].row.position, 3);
  // b is started again (stored as queued), c for the first time.
  EXPECT_EQ(Count<Start>(effects), 2);
}

TEST(FlowTest, ASubJobOverMaxJobBytesFailsItsTaskWithTheSizeAndCreatesNoJob) {
  Task sub = SubJobOf({Runnable("inner")});
  sub.subjob->inputs["X"] = std::string(2000, 'x');
  Policy policy;
  policy.max_job_bytes = 1000;
  auto effects = SubmitOf(JobOf({sub}), policy);
  ASSERT_EQ(Count<CreateJob>(effects), 1);  // the parent only
  auto tasks = All<CreateTask>(effects);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].row.state, TaskState::kFailed);
  EXPECT_TRUE(std::regex_match(tasks[0].row.error,
                               std::regex("subjob: the job is [0-9]+ bytes as stored .*; the limit "
                                          "is 1000 \\(datastore.max_job_bytes\\)")))
      << tasks[0].row.error;
  EXPECT_EQ(All<CreateJob>(effects)[0].row.state, JobState::kFailed);
  // Under the limit, the same job creates its sub-job.
  policy.max_job_bytes = 1 << 20;
  EXPECT_EQ(Count<CreateJob>(SubmitOf(JobOf({sub}), policy)), 2);
}

// What each event reads (ReadsOf): the spec the shell's ReadView and the simulator follow.
// ---- notices: what a decision's rows tell (Changed, Notify)

std::vector<Webhook> HooksOn(std::vector<std::string> events) {
  std::vector<Webhook> hooks;
  for (std::string& e : events) hooks.push_back({.url = "http://hook/", .event = std::move(e)});
  return hooks;
}

// What a Notify is about, as a case names it: "<event> job" or "<event> <task name>".
std::vector<std::string> NotifiesOf(const std::vector<Effect>& effects) {
  std::vector<std::string> out;
  for (const Notify& n : All<Notify>(effects)) {
    out.push_back(fmt::format("{} {}", n.event, n.task ? n.task->task.name : "job"));
  }
  return out;
}

struct NoticeCase {
  std::string name;
  std::vector<std::string> hooks;  // the events the job's webhooks are on
  bool live_events;
  // The decision, from the submitted rows (a job of a parallel of a and b).
  std::function<std::vector<Effect>(Rows&)> decide;
  std::vector<std::string> notify;  // NotifiesOf the effects
};

class NoticeTest : public testing::TestWithParam<NoticeCase> {};

std::string NamedRow(const Rows& rows, const std::string& name) {
  for (const auto& [id, t] : rows.view.tasks) {
    if (t.task.name == name) return id;
  }
  return "";
}

TEST_P(NoticeTest, EachRowWrittenTellsItsChangeAndTheWebhooksItsJobCallsOnIt) {
  const NoticeCase& c = GetParam();
  JobRecord job = JobOf({ParallelOf({Runnable("a"), Runnable("b")})});
  job.job.webhooks = HooksOn(c.hooks);
  Policy policy;
  policy.live_events = c.live_events;
  Rows rows;
  rows.Apply(SubmitOf(job, policy));
  rows.view.policy = policy;
  std::vector<Effect> effects = c.decide(rows);
  EXPECT_EQ(NotifiesOf(effects), c.notify);
  // One Changed per row written, in their order, with live events only.
  std::vector<std::string> written, changed;
  for (const Effect& e : effects) {
    if (auto* j = std::get_if<CreateJob>(&e)) written.push_back(j->row.id);
    if (auto* j = std::get_if<UpdateJob>(&e)) written.push_back(j->row.id);
    if (auto* t = std::get_if<CreateTask>(&e)) written.push_back(t->row.id);
    if (auto* t = std::get_if<UpdateTask>(&e)) written.push_back(t->row.id);
    if (auto* ch = std::get_if<Changed>(&e)) {
      changed.push_back(ch->of == Changed::Row::kJob ? ch->job_id : ch->task_id);
    }
  }
  EXPECT_EQ(changed, c.live_events ? written : std::vector<std::string>{});
  // Every Notify holds its job as the decision leaves it and its task as written.
  for (const Notify& n : All<Notify>(effects)) {
    ASSERT_NE(n.definition, nullptr);
    ASSERT_NE(n.context, nullptr);
    EXPECT_EQ(n.definition->webhooks.size(), c.hooks.size());
    EXPECT_EQ(n.context->at("job").at("id"), "job1");
    EXPECT_TRUE(n.job.job.tasks.empty());  // the state row: its definition is shared
    for (const UpdateJob& u : All<UpdateJob>(effects)) EXPECT_EQ(n.job.state, u.row.state);
    if (!n.task) continue;
    for (const UpdateTask& u : All<UpdateTask>(effects)) {
      if (u.row.id == n.task->id) EXPECT_EQ(*n.task, u.row);
    }
  }
  // Notices come after the rows, before what follows the commit.
  bool rows_done = false, notices_done = false;
  for (const Effect& e : effects) {
    if (IsNotice(e)) {
      EXPECT_FALSE(notices_done);
      rows_done = true;
    } else if (IsRowEffect(e) && !std::holds_alternative<CancelActive>(e)) {
      EXPECT_FALSE(rows_done) << "a row write after a notice";
    } else if (rows_done) {
      notices_done = true;
    }
  }
}

std::vector<Effect> SubmitAgain(Rows& rows) {
  JobRecord job = rows.view.jobs.at("job1");
  job.state = JobState::kPending;
  return Decide(Submit{job}, View{.policy = rows.view.policy, .id_seed = kSeed}, kNow);
}
std::vector<Effect> StartA(Rows& rows) {
  return Decide(Started{NamedRow(rows, "a"), "w1", kNow}, rows.view, kNow);
}
std::vector<Effect> ProgressOfA(Rows& rows) {
  rows.Apply(StartA(rows));
  return Decide(Progress{NamedRow(rows, "a"), 50}, rows.view, kNow);
}
std::vector<Effect> CompleteA(Rows& rows) {
  rows.Apply(StartA(rows));
  return Decide(Completed{NamedRow(rows, "a"), "w1", "r", kNow}, rows.view, kNow);
}

INSTANTIATE_TEST_SUITE_P(
    Notices, NoticeTest,
    testing::Values(
        NoticeCase{"AJobWithoutWebhooksNotifiesNothing", {}, true, SubmitAgain, {}},
        NoticeCase{"WithoutLiveEventsNoChangeIsTold",
                   {"job.StateChange"},
                   false,
                   SubmitAgain,
                   {"job.StateChange job"}},
        NoticeCase{"ASubmitNotifiesTheNewJobsState",
                   {"job.StateChange"},
                   true,
                   SubmitAgain,
                   {"job.StateChange job"}},
        NoticeCase{"ASubmitNotifiesEveryNewRowOnTaskStateChange",
                   {"task.StateChange"},
                   true,
                   SubmitAgain,
                   {"task.StateChange p", "task.StateChange a", "task.StateChange b"}},
        NoticeCase{"AnEmptyEventIsJobStateChange", {""}, true, StartA, {"job.StateChange job"}},
        NoticeCase{"AStartNotifiesTheJobAndTheTaskThatMoved",
                   {"job.StateChange", "task.StateChange"},
                   true,
                   StartA,
                   {"job.StateChange job", "task.StateChange a"}},
        NoticeCase{"ProgressNotifiesOnlyProgressHooks",
                   {"task.Progress", "job.Progress", "task.StateChange"},
                   false,
                   ProgressOfA,
                   {"task.Progress a"}},  // a parallel's child: its job's progress stays
        NoticeCase{"ACompletionNotifiesTheRowThatEndedNotTheOneUntouched",
                   {"task.StateChange"},
                   true,
                   CompleteA,
                   {"task.StateChange a"}}),
    [](const auto& info) { return info.param.name; });

// A Notify shares the definition and context the view shares (no copy per notice), and
// its job row is the state row the decision leaves.
TEST(FlowTest, ANotifySharesTheViewsDefinitionAndContext) {
  JobRecord job = JobOf({Runnable("a"), Runnable("b")});
  job.job.webhooks = HooksOn({"task.StateChange", "job.StateChange"});
  Rows rows;
  rows.Apply(SubmitOf(job));
  JobRecord& row = rows.view.jobs.at("job1");
  auto definition = std::make_shared<const Job>(std::move(row.job));
  auto context = std::make_shared<const nlohmann::json>(std::move(row.context));
  row.job = Job{};
  row.context = nlohmann::json::object();
  rows.view.definitions["job1"] = definition;
  rows.view.contexts["job1"] = context;
  std::string a = NamedRow(rows, "a");
  auto effects = Decide(Completed{a, "w1", "r", kNow}, rows.view, kNow);
  auto notices = All<Notify>(effects);
  ASSERT_EQ(NotifiesOf(effects),
            (std::vector<std::string>{"job.StateChange job", "task.StateChange a",
                                      "task.StateChange b"}));
  for (const Notify& n : notices) {
    EXPECT_EQ(n.definition, definition);
    EXPECT_EQ(n.context, context);
    EXPECT_EQ(n.job.state, JobState::kRunning);
    EXPECT_EQ(n.job.position, 2);
  }
}

// A top-level step's progress is its job's: both progress hooks are called.
TEST(FlowTest, ProgressOfAStepNotifiesTheTasksAndTheJobsProgress) {
  JobRecord job = JobOf({Runnable("a"), Runnable("b")});
  job.job.webhooks = HooksOn({"job.Progress", "task.Progress", "job.StateChange"});
  Rows rows;
  rows.Apply(SubmitOf(job));
  std::string a = NamedRow(rows, "a");
  rows.Apply(Decide(Started{a, "w1", kNow}, rows.view, kNow));
  auto effects = Decide(Progress{a, 50}, rows.view, kNow);
  EXPECT_EQ(NotifiesOf(effects), (std::vector<std::string>{"job.Progress job", "task.Progress a"}));
  EXPECT_EQ(All<Notify>(effects)[0].job.progress, 25);
}

// A CancelActive carries its job's hook when the job calls webhooks on a task's state:
// AfterCancel gives each row cancelled its Changed and, given the row, its Notify.
TEST(FlowTest, ACancelsRowsGetTheirNoticesFromAfterCancel) {
  JobRecord job = JobOf({Runnable("a")});
  job.job.webhooks = HooksOn({"task.StateChange"});
  Rows rows;
  rows.Apply(SubmitOf(job));
  rows.view.tasks.clear();  // the row is not in the view: the CancelActive cancels it
  auto effects = Decide(Cancel{"job1"}, rows.view, kNow);
  auto cancels = All<CancelActive>(effects);
  ASSERT_EQ(cancels.size(), 1u);
  ASSERT_TRUE(cancels[0].hook.has_value());
  EXPECT_EQ(cancels[0].hook->event, kEventTaskStateChange);
  EXPECT_EQ(cancels[0].hook->job.state, JobState::kCancelled);
  TaskRecord cancelled;
  cancelled.id = "t1";
  cancelled.job_id = "job1";
  cancelled.state = TaskState::kCancelled;
  Policy policy;
  policy.live_events = true;
  std::vector<CancelledRow> told = {{"t1", TaskState::kScheduled, "", "", cancelled},
                                    {"t2", TaskState::kScheduled, "", "", std::nullopt}};
  auto after = AfterCancel(cancels[0], told, policy);
  auto changed = All<Changed>(after);
  ASSERT_EQ(changed.size(), 2u);
  EXPECT_EQ(changed[0].task_id, "t1");
  EXPECT_EQ(changed[0].state, "CANCELLED");
  auto notify = All<Notify>(after);
  ASSERT_EQ(notify.size(), 1u);  // t2 was given without its row
  EXPECT_EQ(notify[0].task->id, "t1");
  EXPECT_EQ(notify[0].job.state, JobState::kCancelled);
  EXPECT_EQ(All<Drop>(after).size(), 2u);  // and what AfterCancel gives as before
  // A job without such hooks: no hook, no Notify.
  job.job.webhooks = HooksOn({"job.StateChange"});
  Rows plain;
  plain.Apply(SubmitOf(job));
  plain.view.tasks.clear();
  cancels = All<CancelActive>(Decide(Cancel{"job1"}, plain.view, kNow));
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_FALSE(cancels[0].hook.has_value());
}

// Jobs stored without a decision (a background submission, a schedule's fire) tell what
// a created job tells.
TEST(FlowTest, StoredJobsTellTheirCreation) {
  JobRecord with = JobOf({Runnable("a")});
  with.job.webhooks = HooksOn({"job.StateChange"});
  JobRecord without = NewJobRecord(Job{.name = "j2"}, "", "job2", kNow);
  Policy policy;
  policy.live_events = true;
  auto effects = StoreJobs({with, without}, policy);
  ASSERT_EQ(All<CreateJob>(effects).size(), 2u);
  EXPECT_EQ(All<Changed>(effects).size(), 2u);
  ASSERT_EQ(NotifiesOf(effects), std::vector<std::string>{"job.StateChange job"});
  EXPECT_EQ(All<Notify>(effects)[0].job.state, JobState::kPending);
  EXPECT_EQ(All<CreateJob>(effects)[0].row, with);
}

struct ReadsCase {
  std::string name;
  Event event;
  Reads reads;
};

class ReadsTest : public testing::TestWithParam<ReadsCase> {};

TEST_P(ReadsTest, EachEventReadsWhatItsRulesNeed) {
  EXPECT_EQ(ReadsOf(GetParam().event), GetParam().reads);
}

// The tree up to the top-level job, every job whole, every each's next children.
Reads TaskTreeReads(std::string task_id) {
  return {.task_id = std::move(task_id),
          .task = true,
          .job = true,
          .job_whole = true,
          .ancestors = true,
          .each_children = true};
}
Reads JobTreeReads(std::string job_id) {
  return {.job_id = std::move(job_id),
          .job = true,
          .job_whole = true,
          .ancestors = true,
          .each_children = true};
}
Reads TaskRowReads(std::string task_id) {
  return {.task_id = std::move(task_id), .task = true, .hooks = true};
}

JobRecord SubmittedJob() {
  JobRecord row;
  row.id = "j1";
  return row;
}

INSTANTIATE_TEST_SUITE_P(
    Events, ReadsTest,
    testing::Values(
        ReadsCase{"SubmitReadsNothing", Submit{SubmittedJob()}, Reads{.job_id = "j1"}},
        ReadsCase{"StartJobReadsItsJobAndParentChain", StartJob{"j1"}, JobTreeReads("j1")},
        ReadsCase{"StartedReadsItsTaskAndTheScheduledJobsAbove", Started{"t1", "n1", kNow},
                  Reads{.task_id = "t1",
                        .task = true,
                        .job = true,
                        .scheduled_parents = true,
                        .hooks = true}},
        ReadsCase{"CompletedReadsItsTree", Completed{"t1", "n1", "ok", {}}, TaskTreeReads("t1")},
        ReadsCase{"FailedReadsItsTree", Failed{"t1", "n1", "bad", {}, FailReason::kError, {}},
                  TaskTreeReads("t1")},
        ReadsCase{"WorkerCancelledReadsItsTaskRow", WorkerCancelled{"t1", "n1", "stopped"},
                  TaskRowReads("t1")},
        ReadsCase{"TaskTimedOutReadsItsTree", TaskTimedOut{"t1", "n1", seconds(1)},
                  TaskTreeReads("t1")},
        ReadsCase{"RedeliveryReadsItsTree", Redelivery{"t1", "n1", "stopping"},
                  TaskTreeReads("t1")},
        ReadsCase{"LeaseExpiredReadsItsTree", LeaseExpired{"t1", "n1"}, TaskTreeReads("t1")},
        ReadsCase{"TaskOverdueReadsItsTree", TaskOverdue{"t1", "n1", seconds(30)},
                  TaskTreeReads("t1")},
        ReadsCase{"ProgressReadsItsTaskAndJobState", Progress{"t1", 50},
                  Reads{.task_id = "t1", .task = true, .job = true, .hooks = true}},
        ReadsCase{"CancelReadsItsJobAndParentChain", Cancel{"j1"}, JobTreeReads("j1")},
        ReadsCase{"RestartReadsItsJobAndParentChain", Restart{"j1"}, JobTreeReads("j1")},
        ReadsCase{"JobTimedOutReadsItsJobAndParentChain", JobTimedOut{"j1", seconds(1)},
                  JobTreeReads("j1")},
        ReadsCase{"RetryDueReadsItsTaskTree", RetryDue{"t1"}, TaskTreeReads("t1")},
        ReadsCase{"FillEachReadsTheEachsTree", FillEach{"t1"}, TaskTreeReads("t1")},
        ReadsCase{"StepFailedReadsItsJobAndParentChain", StepFailed{"j1", "disk full"},
                  JobTreeReads("j1")},
        ReadsCase{"PublishedReadsItsTaskRows", Published{{"t1", "t2", "t3"}},
                  Reads{.task_id = "t1", .task = true, .more_tasks = {"t2", "t3"}, .hooks = true}},
        ReadsCase{"PublishRefusedReadsItsTaskRowAndItsJobsState", PublishRefused{"t1", "refused"},
                  Reads{.task_id = "t1", .task = true, .job = true, .hooks = true}},
        ReadsCase{"PauseReadsItsJobTreeAndEveryTaskRow", Pause{"j1"},
                  [] {
                    Reads r = JobTreeReads("j1");
                    r.all_tasks = true;
                    return r;
                  }()},
        ReadsCase{"RerunReadsItsJobAndParentChain", Rerun{.job_id = "j1"}, JobTreeReads("j1")},
        ReadsCase{"SkipReadsItsTaskTree", Skip{"t1", "r"}, TaskTreeReads("t1")},
        ReadsCase{"ResumeReadsItsJobTreeAndEveryTaskRow", Resume{"j1"},
                  [] {
                    Reads r = JobTreeReads("j1");
                    r.all_tasks = true;
                    return r;
                  }()},
        ReadsCase{"SignalReadsItsJobTreeAndEveryTaskRow", Signal{"j1", "go", "yes"},
                  [] {
                    Reads r = JobTreeReads("j1");
                    r.all_tasks = true;
                    return r;
                  }()}),
    [](const auto& info) { return info.param.name; });

// Every event has a case above.
TEST(FlowTest, EveryEventHasAReadsCase) { EXPECT_EQ(std::variant_size_v<Event>, 24u); }

// Templates' now() is the decision's time and randomInt() draws from a source seeded by
// the view: Decide is a function of its input.
TEST(FlowTest, TheSameInputGivesTheSameEffectsAlsoWithNowAndRandomIntTemplates) {
  Task leaf = Runnable("r{{ randomInt(1000000000) }}");
  leaf.env["AT"] = "{{ now() }}";
  leaf.env["R"] = "{{ randomInt() }}";
  Task item = Runnable("item {{ item.value }} {{ randomInt(1000) }}");
  Task each = EachOf(item, "{{ [randomInt(1000), randomInt(1000), randomInt(1000)] }}");
  JobRecord job = JobOf({ParallelOf({leaf, each})});
  job.job.tasks[0].if_expr = "{{ randomInt(2) >= 0 }}";
  auto rows = [&](const View& view) {
    std::vector<TaskRecord> out;
    for (const CreateTask& c : All<CreateTask>(Decide(Submit{job}, view, kNow))) {
      out.push_back(c.row);
    }
    return out;
  };
  View view;
  view.id_seed = kSeed;
  std::vector<TaskRecord> first = rows(view);
  ASSERT_EQ(first.size(), 6u);  // the parallel, the leaf, the each and its 3 children
  EXPECT_EQ(rows(view), first);
  const TaskRecord* leaf_row = nullptr;
  for (const TaskRecord& row : first) {
    if (row.task.env.contains("AT")) leaf_row = &row;
  }
  ASSERT_NE(leaf_row, nullptr);
  EXPECT_EQ(leaf_row->task.env.at("AT"), "2023-11-14T22:13:20Z");  // kNow
  // Another seed, other draws (and the same ones again with it).
  View other = view;
  other.random_seed = 42;
  std::vector<TaskRecord> reseeded = rows(other);
  EXPECT_EQ(rows(other), reseeded);
  ASSERT_EQ(reseeded.size(), first.size());
  bool differs = false;
  for (std::size_t i = 0; i < first.size(); ++i) {
    differs = differs || reseeded[i].task.env != first[i].task.env ||
              reseeded[i].task.name != first[i].task.name;
  }
  EXPECT_TRUE(differs);
}

// Lease grace, decided by flow: a RUNNING runnable on the event's node whose node has
// been silent for more than a lease and that started at least a lease ago.
struct LeaseCase {
  std::string name;
  std::string node;                    // the event's node (the row runs on w1)
  std::optional<TimePoint> last_seen;  // the node's last heartbeat
  Duration lease;                      // 0: the caller judged it
  Duration started_ago;                // when the row started, before kNow
  TaskState state;                     // the row's state
  bool expires;
};

class LeaseTest : public testing::TestWithParam<LeaseCase> {};

TEST_P(LeaseTest, ARowExpiresOnlyWhenItsNodeIsSilentForALease) {
  const LeaseCase& c = GetParam();
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a")})));
  TaskRecord& row = rows.view.tasks.begin()->second;
  row.state = c.state;
  row.node_id = "w1";
  row.started_at = kNow - c.started_ago;
  auto effects = Decide(LeaseExpired{row.id, c.node, c.last_seen, c.lease}, rows.view, kNow);
  EXPECT_EQ(All<CreateTask>(effects).size(), c.expires ? 1u : 0u);
  EXPECT_EQ(All<UpdateTask>(effects).size(), c.expires ? 1u : 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Grace, LeaseTest,
    testing::Values(LeaseCase{"WithoutALeaseTheCallerJudged", "w1", kNow, Duration::zero(),
                              seconds(1), TaskState::kRunning, true},
                    LeaseCase{"ANodeSilentForMoreThanALease", "w1", kNow - minutes(2), minutes(1),
                              minutes(10), TaskState::kRunning, true},
                    LeaseCase{"ANodeNeverSeen", "w1", std::nullopt, minutes(1), minutes(10),
                              TaskState::kRunning, true},
                    LeaseCase{"ANodeSeenWithinALease", "w1", kNow - seconds(30), minutes(1),
                              minutes(10), TaskState::kRunning, false},
                    LeaseCase{"ANodeSeenExactlyALeaseAgo", "w1", kNow - minutes(1), minutes(1),
                              minutes(10), TaskState::kRunning, false},
                    LeaseCase{"ATaskStartedLessThanALeaseAgo", "w1", std::nullopt, minutes(1),
                              seconds(30), TaskState::kRunning, false},
                    LeaseCase{"ARowOnAnotherNode", "w2", std::nullopt, minutes(1), minutes(10),
                              TaskState::kRunning, false},
                    LeaseCase{"ARowNotRunning", "w1", std::nullopt, minutes(1), minutes(10),
                              TaskState::kCompleted, false}),
    [](const auto& info) { return info.param.name; });

// The coordinator's check of a task's timeout: a RUNNING runnable on the event's node,
// with a timeout, started longer ago than the timeout plus the grace.
struct OverdueCase {
  std::string name;
  std::string node;                 // the event's node (the row runs on w1)
  std::optional<Duration> timeout;  // the task's
  Duration started_ago;             // when the row started, before kNow
  TaskState state;                  // the row's state
  bool overdue;
};

class OverdueTest : public testing::TestWithParam<OverdueCase> {};

TEST_P(OverdueTest, ARowPastItsTimeoutAndTheGraceFailsAndItsWorkerIsToldToKillIt) {
  const OverdueCase& c = GetParam();
  Task task = Runnable("a");
  task.timeout = c.timeout;
  task.retry = Retry{.limit = 1};
  Rows rows;
  rows.Apply(SubmitOf(JobOf({task})));
  TaskRecord& row = rows.view.tasks.begin()->second;
  row.state = c.state;
  row.node_id = "w1";
  row.started_at = kNow - c.started_ago;
  auto effects = Decide(TaskOverdue{row.id, c.node, seconds(30)}, rows.view, kNow);
  if (!c.overdue) {
    EXPECT_TRUE(effects.empty());
    return;
  }
  ASSERT_EQ(All<Kill>(effects).size(), 1u);
  EXPECT_EQ(All<Kill>(effects)[0].node_id, "w1");
  EXPECT_EQ(All<Kill>(effects)[0].task_id, row.id);
  ASSERT_EQ(All<UpdateTask>(effects).size(), 1u);
  EXPECT_EQ(All<UpdateTask>(effects)[0].row.state, TaskState::kFailed);
  EXPECT_EQ(All<UpdateTask>(effects)[0].row.error,
            "task timed out after 1m0s: its worker did not stop it within 30s more, and was told "
            "to kill it");
  // Retried as any timed-out attempt is.
  ASSERT_EQ(All<CreateTask>(effects).size(), 1u);
  EXPECT_EQ(All<CreateTask>(effects)[0].row.task.retry->attempts, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Timeouts, OverdueTest,
    testing::Values(
        OverdueCase{"PastTheTimeoutAndTheGrace", "w1", minutes(1), seconds(91), TaskState::kRunning,
                    true},
        OverdueCase{"PastTheTimeoutWithinTheGrace", "w1", minutes(1), seconds(89),
                    TaskState::kRunning, false},
        OverdueCase{"ATaskWithoutATimeout", "w1", std::nullopt, minutes(10), TaskState::kRunning,
                    false},
        OverdueCase{"ARowOnAnotherNode", "w2", minutes(1), minutes(10), TaskState::kRunning, false},
        OverdueCase{"ARowThatEnded", "w1", minutes(1), minutes(10), TaskState::kCompleted, false},
        OverdueCase{"ARowNotStarted", "w1", minutes(1), minutes(10), TaskState::kScheduled, false}),
    [](const auto& info) { return info.param.name; });

TEST(FlowTest, ACompositeHasNoLease) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({ParallelOf({Runnable("a")})})));
  for (auto& [id, row] : rows.view.tasks) {
    if (!row.task.IsComposite()) continue;
    row.node_id = "w1";  // as no composite is; still not a lease's
    auto effects = Decide(LeaseExpired{id, "w1"}, rows.view, kNow);
    EXPECT_TRUE(All<UpdateTask>(effects).empty());
  }
}

// ---------------------------------------------------------------------------------
// Rows lost with the engine: the engine crashed while they ran (their node, an earlier
// run of the standalone engine, is not live when Frontier reconciles). Each runs again
// as a new attempt that spends neither a redelivery nor a retry, and the composites
// around it count the new attempt.

// The job's rows with the runnable rows `lost` says RUNNING on node "gone" (the engine's
// earlier run) and those `done` says COMPLETED; the job RUNNING.
Rows CrashedRows(const std::vector<Task>& tasks, const std::function<bool(const TaskRecord&)>& lost,
                 const std::function<bool(const TaskRecord&)>& done = nullptr) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf(tasks)));
  rows.view.jobs.at("job1").state = JobState::kRunning;
  for (auto& [id, row] : rows.view.tasks) {
    if (row.task.IsComposite() || row.state == TaskState::kCreated) continue;
    if (lost(row)) {
      row.state = TaskState::kRunning;
      row.node_id = "gone";
      row.started_at = kNow;
    } else if (done && done(row)) {
      row.state = TaskState::kCompleted;
      row.node_id = "gone";
      row.started_at = kNow;
      row.completed_at = kNow;
    }
  }
  return rows;
}

// Frontier after the restart: only "w1", the new run's worker, is live.
std::vector<Effect> Restarted(Rows& rows, TimePoint at = kNow + seconds(1)) {
  std::vector<TaskRecord> all;
  for (const auto& [id, t] : rows.view.tasks) all.push_back(t);
  const std::set<std::string> live = {"w1"};
  static int restarts = 0;  // each restart's new ids its own
  auto effects = Frontier(rows.view.jobs.at("job1"), all, at, {}, &live,
                          fmt::format("03{:010d}", ++restarts) + std::string(20, '0'));
  rows.Apply(effects);
  return effects;
}

bool Named(const TaskRecord& row, const std::string& name) { return row.task.name == name; }

// Every job and composite row written stays RUNNING; the job does not end.
void ExpectStillRunning(const std::vector<Effect>& effects) {
  for (const UpdateJob& job : All<UpdateJob>(effects)) {
    EXPECT_EQ(job.row.state, JobState::kRunning) << job.row.error;
  }
  for (const UpdateTask& task : All<UpdateTask>(effects)) {
    if (task.row.task.IsComposite())
      EXPECT_EQ(task.row.state, TaskState::kRunning) << task.row.error;
  }
  EXPECT_TRUE(All<JobFinished>(effects).empty());
}

// A parallel's child lost with the engine: its old row FAILED read as the child's failure,
// which failed the parallel and the job ("node ... stopped heartbeating while the task
// ran"), the probes' acknowledged jobs that ended FAILED after `kill -9`.
TEST(FlowTest, AParallelsChildLostWithTheEngineRunsAgainAndTheJobCompletes) {
  Rows rows = CrashedRows(
      {ParallelOf({Runnable("a"), Runnable("b")})},
      [](const TaskRecord& r) { return Named(r, "a"); },
      [](const TaskRecord& r) { return Named(r, "b"); });
  auto effects = Restarted(rows);
  ExpectStillRunning(effects);
  auto created = All<CreateTask>(effects);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].row.task.name, "a");
  EXPECT_EQ(created[0].row.redelivered, 0);
  ASSERT_EQ(All<Start>(effects).size(), 1u);
  EXPECT_EQ(All<Start>(effects)[0].row.id, created[0].row.id);
  for (const UpdateTask& t : All<UpdateTask>(effects)) {
    if (t.row.task.name != "a") continue;
    EXPECT_EQ(t.row.state, TaskState::kFailed);
    EXPECT_EQ(t.row.error,
              "the engine stopped while the task ran (node gone): run again as a new attempt");
  }
  // Reconciled, a second Frontier writes nothing; the new attempt's outcome ends the job.
  for (const Effect& e : Restarted(rows)) EXPECT_FALSE(IsRowEffect(e));
  const std::string rerun = created[0].row.id;
  rows.Apply(Decide(Started{rerun, "w1", kNow + seconds(2)}, rows.view, kNow + seconds(2)));
  auto done = Decide(Completed{rerun, "w1", "", std::nullopt}, rows.view, kNow + seconds(3));
  ASSERT_EQ(All<JobFinished>(done).size(), 1u);
  EXPECT_EQ(All<JobFinished>(done)[0].row.state, JobState::kCompleted);
}

// However often the engine is killed under a task, the task runs again: the crashes are
// not its redeliveries (past max_redeliveries the job failed, "giving up").
TEST(FlowTest, AStepLostWithTheEngineRunsAgainPastMaxRedeliveries) {
  Rows rows = CrashedRows({Runnable("a"), Runnable("b")},
                          [](const TaskRecord& r) { return Named(r, "a"); });
  for (int crash = 1; crash <= 5; ++crash) {
    auto effects = Restarted(rows, kNow + seconds(crash));
    ExpectStillRunning(effects);
    auto created = All<CreateTask>(effects);
    ASSERT_EQ(created.size(), 1u) << "crash " << crash;
    EXPECT_EQ(created[0].row.redelivered, 0) << "crash " << crash;
    // The new attempt starts on the new run's worker; the engine is killed again.
    TaskRecord& row = rows.view.tasks.at(created[0].row.id);
    row.state = TaskState::kRunning;
    row.node_id = "gone";
  }
}

// A lost row keeps its retries: one new attempt (its retry attempts as they were), not a
// redelivery beside a retry (both ran, the retry spent on the engine's crash).
TEST(FlowTest, ARowLostWithTheEngineKeepsItsRetries) {
  Rows rows = CrashedRows(
      {ParallelOf({WithRetry(Runnable("a"), 2), Runnable("b")})},
      [](const TaskRecord& r) { return Named(r, "a"); },
      [](const TaskRecord& r) { return Named(r, "b"); });
  auto effects = Restarted(rows);
  ExpectStillRunning(effects);
  auto created = All<CreateTask>(effects);
  ASSERT_EQ(created.size(), 1u);
  ASSERT_TRUE(created[0].row.task.retry.has_value());
  EXPECT_EQ(created[0].row.task.retry->attempts, 0);
  EXPECT_EQ(created[0].row.redelivered, 0);
  EXPECT_EQ(All<Start>(effects).size(), 1u);
}

// An each with one slot: its lost child runs again in that slot, and its next children
// wait (the new attempt counts as running).
TEST(FlowTest, AnEachsChildLostWithTheEngineRunsAgainInItsSlot) {
  Rows rows = CrashedRows({EachOf(Runnable("x"), "{{ sequence(0, 3) }}", 1)},
                          [](const TaskRecord& r) { return r.each_index == 0; });
  auto effects = Restarted(rows);
  ExpectStillRunning(effects);
  auto created = All<CreateTask>(effects);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].row.each_index, 0);
  ASSERT_EQ(All<Start>(effects).size(), 1u);
  EXPECT_EQ(All<Start>(effects)[0].row.id, created[0].row.id);
}

// Checked mode: a move core/states.h does not allow is found (Decide asserts the same
// in debug builds on every row effect).
TEST(FlowTest, BadMoveFindsAMoveTheStateMachinesDoNotAllow) {
  Rows rows;
  rows.Apply(SubmitOf(JobOf({Runnable("a")})));
  TaskRecord task = rows.view.tasks.begin()->second;
  JobRecord job = rows.view.jobs.at("job1");
  task.state = TaskState::kCompleted;
  rows.view.tasks[task.id] = task;
  TaskRecord back = task;
  back.state = TaskState::kRunning;
  auto problem = BadMove(rows.view, {UpdateTask{back, true, false}});
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("from COMPLETED to RUNNING"), std::string::npos) << *problem;
  job.state = JobState::kCompleted;
  rows.view.jobs["job1"] = job;
  JobRecord again = job;
  again.state = JobState::kPending;  // nothing moves back to PENDING
  EXPECT_TRUE(BadMove(rows.view, {UpdateJob{again, false, true, false}}));
  // Allowed moves, also through several steps in one decision, are not.
  job.state = JobState::kPending;
  rows.view.jobs["job1"] = job;
  again.state = JobState::kCompleted;  // PENDING -> SCHEDULED -> COMPLETED
  EXPECT_FALSE(BadMove(rows.view, {UpdateJob{again, false, true, false}}));
}

TEST(FlowTest, DecisionsMakeOnlyMovesTheStateMachinesAllow) {
  Shell shell;
  shell.On(Submit{JobOf({Runnable("a"), ParallelOf({Runnable("b"), Runnable("c")})})});
  for (int step = 0; step < 4; ++step) {
    for (const auto& [id, row] : View(shell.view).tasks) {
      if (row.state != TaskState::kScheduled) continue;
      View before = shell.view;
      auto effects = Decide(Completed{id, "w1", "", kNow}, before, kNow);
      EXPECT_FALSE(BadMove(before, effects));
      shell.On(Completed{id, "w1", "", kNow});
    }
  }
  EXPECT_EQ(shell.view.jobs.at("job1").state, JobState::kCompleted);
}

TEST(FlowTest, EveryEventHasAName) {
  EXPECT_EQ(NameOf(Submit{}), "Submit");
  EXPECT_EQ(NameOf(LeaseExpired{}), "LeaseExpired");
  EXPECT_EQ(NameOf(StepFailed{}), "StepFailed");
}

// ---- switches and loops (kinds/sequence.cc)

Task SwitchOf(std::string value, std::vector<SwitchCase> cases, std::vector<Task> otherwise = {}) {
  Task t;
  t.name = "sw";
  t.switch_ = Switch{std::move(value), std::move(cases), std::move(otherwise)};
  return t;
}
Task LoopOf(std::vector<Task> tasks, int max, std::string until = "", std::string while_expr = "") {
  Task t;
  t.name = "loop";
  t.loop = Loop{std::move(tasks), std::move(while_expr), std::move(until), max};
  return t;
}
// A runnable whose env V is `value` (a template, evaluated when it is scheduled).
Task Echo(std::string name, std::string value) {
  Task t = Runnable(std::move(name));
  t.env["V"] = std::move(value);
  return t;
}
int RowsNamed(const Shell& s, const std::string& name) {
  int n = 0;
  for (const auto& [id, t] : s.view.tasks) n += t.task.name == name ? 1 : 0;
  return n;
}

INSTANTIATE_TEST_SUITE_P(
    Sequences, ScenarioTest,
    testing::Values(
        Scenario{"ASwitchRunsTheTasksOfTheCaseItsValuePicksInOrder",
                 {SwitchOf("{{ 1 + 1 }}",
                           {{"1", {Runnable("a")}}, {"2", {Runnable("b"), Runnable("c")}}},
                           {Runnable("d")}),
                  Runnable("after")},
                 {{S::kOk, "b"}, {S::kOk, "c"}, {S::kOk, "after"}},
                 JobState::kCompleted,
                 {"b", "c", "after"},
                 {{"sw", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Row("sw").result, "2");
                   // The branches not taken: SKIPPED rows saying why, no step of it.
                   for (const char* name : {"a", "d"}) {
                     EXPECT_EQ(RowsNamed(s, name), 1) << name;
                     EXPECT_EQ(s.Row(name).state, TaskState::kSkipped) << name;
                     EXPECT_EQ(s.Row(name).error,
                               "not run: the switch took another branch (its value is \"2\")");
                     EXPECT_EQ(s.Row(name).parent_id, s.Row("sw").id);
                   }
                   EXPECT_EQ(s.Row("c").parent_id, s.Row("sw").id);
                   EXPECT_EQ(s.Row("c").each_index, 1);
                 }},
        Scenario{
            "ASwitchWhoseValueMatchesNoCaseRunsItsDefault",
            {WithVar(SwitchOf("{{ 'z' }}", {{"a", {Runnable("a")}}}, {Runnable("d")}), "picked")},
            {{S::kOk, "d"}},
            JobState::kCompleted,
            {"d"},
            {{"sw", TS::kCompleted}, {"d", TS::kCompleted}},
            "z",
            [](JobRecord& j) { j.job.output = "{{ tasks.picked }}"; }},
        Scenario{"ASwitchWithNoMatchAndNoDefaultCompletesAtOnce",
                 {SwitchOf("{{ 'x' }}", {{"a", {Runnable("a")}}}), Runnable("after")},
                 {{S::kOk, "after"}},
                 JobState::kCompleted,
                 {"after"},
                 {{"sw", TS::kCompleted}}},
        Scenario{"ASwitchWhoseValueCannotBeEvaluatedFailsTheJob",
                 {SwitchOf("{{ nosuchfunction() }}", {{"a", {Runnable("a")}}}), Runnable("after")},
                 {},
                 JobState::kFailed,
                 {},
                 {{"sw", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().error.rfind("switch.value: ", 0), 0u) << s.Top().error;
                 }},
        Scenario{
            "AFailureInACaseFailsTheSwitchAndTheJob",
            {SwitchOf("{{ 'a' }}", {{"a", {Runnable("a"), Runnable("b")}}}), Runnable("after")},
            {{S::kFail, "a"}},
            JobState::kFailed,
            {"a"},
            {{"sw", TS::kFailed}, {"a", TS::kFailed}},
            "",
            nullptr,
            [](const Shell& s) { EXPECT_EQ(RowsNamed(s, "b"), 0); }},
        Scenario{"ACaseTaskSkippedByItsIfIsPassedOver",
                 {SwitchOf("{{ 'a' }}", {{"a", {Skipped(Runnable("a")), Runnable("b")}}})},
                 {{S::kOk, "b"}},
                 JobState::kCompleted,
                 {"b"},
                 {{"a", TS::kSkipped}, {"sw", TS::kCompleted}}},
        Scenario{"ALoopRunsItsTasksInOrderUntilItsConditionHolds",
                 {WithVar(LoopOf({WithVar(Runnable("a"), "x"), Runnable("b")}, 5,
                                 "{{ loop.iteration >= 1 }}"),
                          "iterations")},
                 {{S::kOk, "a"}, {S::kOk, "b"}, {S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b", "a", "b"},
                 {{"loop", TS::kCompleted}},
                 R"([{"x":"r:a"},{"x":"r:a"}])",
                 [](JobRecord& j) { j.job.output = "{{ tasks.iterations }}"; }},
        Scenario{"ALoopWhoseConditionNeverHoldsStopsAtMaxAndCompletes",
                 {LoopOf({Runnable("a")}, 3, "{{ false }}")},
                 {{S::kOk, "a"}, {S::kOk, "a"}, {S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a", "a", "a"},
                 {{"loop", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(RowsNamed(s, "a"), 3); }},
        Scenario{"ALoopRunsWhileItsConditionHolds",
                 {LoopOf({Runnable("a")}, 9, "", "{{ loop.iteration < 1 }}")},
                 {{S::kOk, "a"}, {S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a", "a"},
                 {{"loop", TS::kCompleted}}},
        Scenario{
            "ALoopsTasksSeeTheirIterationAndTheResultsOfEarlierOnes",
            {LoopOf({WithVar(Echo("a{{ loop.iteration }}", "{{ loop.iteration }}"), "x"),
                     Echo("b{{ loop.iteration }}", "{{ loop.iterations[0].x }} {{ tasks.x }}")},
                    2)},
            {{S::kOk, "a0"}, {S::kOk, "b0"}, {S::kOk, "a1"}, {S::kOk, "b1"}},
            JobState::kCompleted,
            {"a0", "b0", "a1", "b1"},
            {{"loop", TS::kCompleted}},
            "",
            nullptr,
            [](const Shell& s) {
              EXPECT_EQ(s.Row("a1").task.env.at("V"), "1");
              EXPECT_EQ(s.Row("b0").task.env.at("V"), "r:a0 r:a0");
              EXPECT_EQ(s.Row("b1").task.env.at("V"), "r:a0 r:a1");
              EXPECT_EQ(s.Row("b1").each_index, 3);  // iteration 1 × 2 tasks + index 1
              EXPECT_EQ(s.Row("loop").result, R"([{"x":"r:a0"},{"x":"r:a1"}])");
            }},
        Scenario{"ALoopsConditionThatCannotBeEvaluatedFailsTheLoop",
                 {LoopOf({Runnable("a")}, 3, "{{ nosuchfunction() }}")},
                 {{S::kOk, "a"}},
                 JobState::kFailed,
                 {"a"},
                 {{"loop", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().error.rfind("loop.until: ", 0), 0u) << s.Top().error;
                 }},
        Scenario{"ALoopsTaskIsRetriedInItsIterationThenItsFailureFailsTheLoop",
                 {LoopOf({WithRetry(Runnable("a"), 1)}, 3)},
                 {{S::kOk, "a"}, {S::kFail, "a"}, {S::kFail, "a"}},
                 JobState::kFailed,
                 {"a", "a", "a"},
                 {{"loop", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(s.Row("a").each_index, 1); }},
        Scenario{"AnOptionalTasksFailureInALoopLetsTheLoopGoOn",
                 {LoopOf({Optional(Runnable("a"))}, 2)},
                 {{S::kFail, "a"}, {S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a", "a"},
                 {{"loop", TS::kCompleted}}},
        Scenario{"ALoopOfSkippedTasksRunsToItsMaxInOneDecision",
                 {LoopOf({Skipped(Runnable("a"))}, 1000)},
                 {},
                 JobState::kCompleted,
                 {},
                 {{"loop", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(RowsNamed(s, "a"), 1000); }},
        Scenario{"ALoopAskingForMoreIterationsThanTheEngineAllowsFailsWithBothFigures",
                 {LoopOf({Runnable("a")}, 5000)},
                 {},
                 JobState::kFailed,
                 {},
                 {{"loop", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_NE(s.Top().error.find("5000"), std::string::npos) << s.Top().error;
                   EXPECT_NE(s.Top().error.find("1000"), std::string::npos) << s.Top().error;
                 }},
        Scenario{"ASwitchInsideALoopInsideAnEachPicksACasePerIteration",
                 {EachOf(LoopOf({SwitchOf("{{ loop.iteration }}",
                                          {{"0", {Runnable("a")}}, {"1", {Runnable("b")}}})},
                                2),
                         "{{ sequence(1, 3) }}", 1)},
                 {{S::kOk, "a"}, {S::kOk, "b"}, {S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b", "a", "b"},
                 {{"e", TS::kCompleted}}},
        Scenario{"ACancelDuringALoopCancelsItsRunningTask",
                 {LoopOf({Runnable("a")}, 3)},
                 {{S::kOk, "a"}, {S::kCancel, ""}},
                 JobState::kCancelled,
                 {"a", "a"},
                 {{"loop", TS::kCancelled}, {"a", TS::kCancelled}}},
        Scenario{"ARestartRunsAFailedLoopAgainFromItsFirstIteration",
                 {LoopOf({Runnable("a")}, 2)},
                 {{S::kOk, "a"}, {S::kFail, "a"}, {S::kRestart, ""}, {S::kOk, "a"}, {S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a", "a", "a", "a"},
                 {{"loop", TS::kCompleted}}},
        Scenario{"ALoopsTaskLostInACrashRunsAgainInItsIteration",
                 {WithVar(LoopOf({WithVar(Runnable("a"), "x")}, 3), "all")},
                 {{S::kOk, "a"}, {S::kCrash, ""}, {S::kOk, "a"}, {S::kCrash, ""}, {S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a", "a", "a", "a", "a"},
                 {{"loop", TS::kCompleted}},
                 R"([{"x":"r:a"},{"x":"r:a"},{"x":"r:a"}])",
                 [](JobRecord& j) { j.job.output = "{{ tasks.all }}"; },
                 [](const Shell& s) { EXPECT_EQ(s.Row("a").each_index, 2); }},
        Scenario{"ASwitchsTaskLostInACrashRunsAgainAndTheSwitchGoesOn",
                 {SwitchOf("{{ 'k' }}", {{"k", {Runnable("a"), Runnable("b")}}})},
                 {{S::kCrash, ""}, {S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "a", "b"},
                 {{"sw", TS::kCompleted}}}));

// ---- cleanup (kinds/handler.cc): a task's onFailure, a job's onFailure and finally

Task Fallback(Task t, std::vector<Task> tasks, Then then) {
  t.on_failure = OnFailure{std::move(tasks), then};
  return t;
}
constexpr Then kGoOn = Then::kContinue;
constexpr Then kFailToo = Then::kFail;
// The row of `name` made first (a fallback's row shares its task's name).
const TaskRecord& FirstRow(const Shell& s, const std::string& name) {
  const TaskRecord* first = nullptr;
  for (const auto& [id, t] : s.view.tasks) {
    if (t.task.name == name && (first == nullptr || t.id < first->id)) first = &t;
  }
  if (first == nullptr) throw std::runtime_error("no row named " + name);
  return *first;
}
// The job's cleanup row ("onFailure", "finally").
const TaskRecord* HandlerRow(const Shell& s, Handles handles) {
  const TaskRecord* found = nullptr;
  for (const auto& [id, t] : s.view.tasks) {
    if (t.job_id == "job1" && t.task.handles == handles) found = &t;
  }
  return found;
}

INSTANTIATE_TEST_SUITE_P(
    Cleanup, ScenarioTest,
    testing::Values(
        Scenario{"AFallbackThatGoesOnTakesTheTasksPlaceWithItsLastTasksResult",
                 {WithVar(Fallback(Runnable("a"), {Runnable("f1"), Runnable("f2")}, kGoOn), "x"),
                  Runnable("after")},
                 {{S::kFail, "a"}, {S::kOk, "f1"}, {S::kOk, "f2"}, {S::kOk, "after"}},
                 JobState::kCompleted,
                 {"a", "f1", "f2", "after"},
                 {{"a", TS::kCompleted}, {"f2", TS::kCompleted}},
                 "r:f2",
                 [](JobRecord& j) { j.job.output = "{{ tasks.x }}"; },
                 [](const Shell& s) {
                   const TaskRecord& failed = FirstRow(s, "a");
                   const TaskRecord& fallback = s.Row("a");
                   EXPECT_EQ(failed.state, TaskState::kFailed);
                   EXPECT_EQ(fallback.task.handles, Handles::kTaskFailure);
                   EXPECT_EQ(fallback.position, failed.position);
                   EXPECT_EQ(fallback.parent_id, "");
                   EXPECT_EQ(fallback.error, "exit status 1");  // what it recovered from
                   EXPECT_EQ(fallback.result, "r:f2");
                   EXPECT_EQ(s.Row("f1").parent_id, fallback.id);
                   EXPECT_EQ(s.Row("f2").each_index, 1);
                 }},
        Scenario{"AFallbackThatFailsRunsItsTasksThenFailsTheJobWithTheTasksError",
                 {Fallback(Runnable("a"), {Runnable("f")}, kFailToo), Runnable("after")},
                 {{S::kFail, "a"}, {S::kOk, "f"}},
                 JobState::kFailed,
                 {"a", "f"},
                 {{"a", TS::kFailed}, {"f", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().error, "exit status 1");
                   EXPECT_EQ(RowsNamed(s, "after"), 0);
                 }},
        Scenario{"AFallbackTaskThatFailsFailsTheTaskWithItsOwnErrorAndStopsTheRest",
                 {Fallback(Runnable("a"), {Runnable("f1"), Runnable("f2")}, kGoOn)},
                 {{S::kFail, "a"}, {S::kTimeout, "f1"}},
                 JobState::kFailed,
                 {"a", "f1"},
                 {{"a", TS::kFailed}, {"f1", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().error, "task timed out after 5s");
                   EXPECT_EQ(RowsNamed(s, "f2"), 0);
                 }},
        Scenario{"ARetriedTasksFallbackRunsOnlyAfterItsLastAttempt",
                 {Fallback(WithRetry(Runnable("a"), 1), {Runnable("f")}, kGoOn)},
                 {{S::kFail, "a"}, {S::kFail, "a"}, {S::kOk, "f"}},
                 JobState::kCompleted,
                 {"a", "a", "f"},
                 {{"a", TS::kCompleted}}},
        Scenario{"AFailedFallbackOfAnOptionalTaskIsItsWarningAndTheJobGoesOn",
                 {Optional(Fallback(Runnable("a"), {Runnable("f")}, kFailToo)), Runnable("after")},
                 {{S::kFail, "a"}, {S::kOk, "f"}, {S::kOk, "after"}},
                 JobState::kCompleted,
                 {"a", "f", "after"},
                 {{"a", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_TRUE(IsOptionalFailureLetGo(s.Row("a")));
                   EXPECT_EQ(s.Row("a").task.handles, Handles::kTaskFailure);
                 }},
        Scenario{"AFallbackInAParallelTakesTheFailedChildsPlaceWhileTheOthersRun",
                 {ParallelOf({Fallback(Runnable("a"), {Runnable("f")}, kGoOn), Runnable("b")})},
                 {{S::kFail, "a"}, {S::kOk, "b"}, {S::kOk, "f"}},
                 JobState::kCompleted,
                 {"a", "b", "f"},
                 {{"p", TS::kCompleted}, {"b", TS::kCompleted}}},
        Scenario{"AFallbacksTasksSeeTheItemOfTheirEachAndTheFailure",
                 {EachOf(Fallback(Runnable("a"),
                                  {Echo("f",
                                        "{{ item.value }} {{ failure.task }}: "
                                        "{{ failure.error }}")},
                                  kGoOn),
                         "{{ sequence(5, 6) }}")},
                 {{S::kFail, "a"}, {S::kOk, "f"}},
                 JobState::kCompleted,
                 {"a", "f"},
                 {{"e", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Row("f").task.env.at("V"), "5 a: exit status 1");
                   EXPECT_EQ(s.Row("a").each_index, 0);
                 }},
        Scenario{"AFallbackOfACompositeRunsOnceItsFailureCancelledTheRest",
                 {Fallback(ParallelOf({Runnable("a"), Runnable("b")}), {Runnable("f")}, kGoOn)},
                 {{S::kFail, "a"}, {S::kOk, "f"}},
                 JobState::kCompleted,
                 {"a", "b", "f"},
                 {{"b", TS::kCancelled}, {"p", TS::kCompleted}}},
        Scenario{"AFallbackInAGraphStandsForItsTaskForWhatNeedsIt",
                 {Fallback(Runnable("a"), {Runnable("f")}, kGoOn), Needs(Runnable("b"), {"a"})},
                 {{S::kFail, "a"}, {S::kOk, "f"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "f", "b"},
                 {{"b", TS::kCompleted}},
                 "",
                 Dag},
        Scenario{"AFallbacksTaskLostInACrashRunsAgainAndTheFallbackGoesOn",
                 {Fallback(Runnable("a"), {Runnable("f")}, kGoOn), Runnable("after")},
                 {{S::kFail, "a"}, {S::kCrash, ""}, {S::kOk, "f"}, {S::kOk, "after"}},
                 JobState::kCompleted,
                 {"a", "f", "f", "after"},
                 {{"a", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(RowsNamed(s, "a"), 2); }},
        Scenario{"ACancelDuringAFallbackCancelsItsTask",
                 {Fallback(Runnable("a"), {Runnable("f")}, kGoOn)},
                 {{S::kFail, "a"}, {S::kCancel, ""}},
                 JobState::kCancelled,
                 {"a", "f"},
                 {{"a", TS::kCancelled}, {"f", TS::kCancelled}}},
        Scenario{"AJobsFinallyRunsAfterItsTasksAndTheJobCompletesAfterIt",
                 {WithVar(Runnable("a"), "x")},
                 {{S::kOk, "a"}, {S::kOk, "z"}},
                 JobState::kCompleted,
                 {"a", "z"},
                 {{"z", TS::kCompleted}},
                 "r:a",
                 [](JobRecord& j) {
                   j.job.output = "{{ tasks.x }}";
                   j.job.finally = {Echo("z", "{{ job.state }}")};
                 },
                 [](const Shell& s) {
                   const TaskRecord* h = HandlerRow(s, Handles::kJobFinally);
                   ASSERT_NE(h, nullptr);
                   EXPECT_EQ(h->state, TaskState::kCompleted);
                   EXPECT_EQ(h->position, 2);  // past the job's tasks
                   EXPECT_EQ(s.Row("z").parent_id, h->id);
                   EXPECT_EQ(s.Row("z").task.env.at("V"), "COMPLETED");
                   EXPECT_FALSE(s.Top().ending);
                 }},
        Scenario{"AFailedJobsOnFailureThenItsFinallyRunAndSeeTheFailure",
                 {Runnable("a"), Runnable("b")},
                 {{S::kFail, "a"}, {S::kOk, "o"}, {S::kOk, "z"}},
                 JobState::kFailed,
                 {"a", "o", "z"},
                 {{"o", TS::kCompleted}, {"z", TS::kCompleted}},
                 "",
                 [](JobRecord& j) {
                   j.job.on_failure = {Echo("o", "{{ job.state }}: {{ job.error }}")};
                   j.job.finally = {Runnable("z")};
                 },
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().error, "exit status 1");
                   EXPECT_EQ(s.Row("o").task.env.at("V"), "FAILED: exit status 1");
                   EXPECT_EQ(RowsNamed(s, "b"), 0);
                   EXPECT_EQ(s.Top().position, 1);  // where a restart starts again
                 }},
        Scenario{"ACompletedJobRunsNoOnFailure",
                 {Runnable("a")},
                 {{S::kOk, "a"}},
                 JobState::kCompleted,
                 {"a"},
                 {},
                 "",
                 [](JobRecord& j) { j.job.on_failure = {Runnable("o")}; },
                 [](const Shell& s) { EXPECT_EQ(RowsNamed(s, "o"), 0); }},
        Scenario{"ACancelledJobsFinallyRunsAndTheJobEndsCancelled",
                 {Runnable("a")},
                 {{S::kCancel, ""}, {S::kOk, "z"}},
                 JobState::kCancelled,
                 {"a", "z"},
                 {{"a", TS::kCancelled}, {"z", TS::kCompleted}},
                 "",
                 [](JobRecord& j) {
                   j.job.on_failure = {Runnable("o")};
                   j.job.finally = {Echo("z", "{{ job.state }}")};
                 },
                 [](const Shell& s) {
                   EXPECT_EQ(RowsNamed(s, "o"), 0);
                   EXPECT_EQ(s.Row("z").task.env.at("V"), "CANCELLED");
                 }},
        Scenario{"ACancelWhileTheCleanupRunsStopsIt",
                 {Runnable("a")},
                 {{S::kOk, "a"}, {S::kCancel, ""}},
                 JobState::kCancelled,
                 {"a", "z"},
                 {{"z", TS::kCancelled}},
                 "",
                 [](JobRecord& j) {
                   j.job.finally = {Runnable("z"), Runnable("z2")};
                 },
                 [](const Shell& s) { EXPECT_EQ(RowsNamed(s, "z2"), 0); }},
        Scenario{"AFailingFinallyFailsAJobThatWouldHaveCompleted",
                 {Runnable("a")},
                 {{S::kOk, "a"}, {S::kFail, "z"}},
                 JobState::kFailed,
                 {"a", "z"},
                 {},
                 "",
                 [](JobRecord& j) { j.job.finally = {Runnable("z")}; },
                 [](const Shell& s) { EXPECT_EQ(s.Top().error, "finally: exit status 1"); }},
        Scenario{"AFailingOnFailureIsAddedToTheJobsErrorAndFinallyStillRuns",
                 {Runnable("a")},
                 {{S::kFail, "a"}, {S::kTimeout, "o"}, {S::kOk, "z"}},
                 JobState::kFailed,
                 {"a", "o", "z"},
                 {},
                 "",
                 [](JobRecord& j) {
                   j.job.on_failure = {Runnable("o")};
                   j.job.finally = {Runnable("z")};
                 },
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().error, "exit status 1; onFailure: task timed out after 5s");
                 }},
        Scenario{"AJobTimeoutRunsOnFailureWhichTheTimeoutDoesNotStop",
                 {Runnable("a")},
                 {{S::kJobTimeout, ""}, {S::kJobTimeout, ""}, {S::kOk, "o"}},
                 JobState::kFailed,
                 {"a", "o"},
                 {{"a", TS::kCancelled}, {"o", TS::kCompleted}},
                 "",
                 [](JobRecord& j) {
                   j.job.timeout = seconds(60);
                   j.job.on_failure = {Runnable("o")};
                 },
                 [](const Shell& s) { EXPECT_EQ(s.Top().error, "job timed out after 1m0s"); }},
        Scenario{"ACleanupTaskLostInACrashRunsAgainAndTheJobEndsAsItsOutcome",
                 {Runnable("a")},
                 {{S::kFail, "a"}, {S::kCrash, ""}, {S::kOk, "z"}},
                 JobState::kFailed,
                 {"a", "z", "z"},
                 {{"z", TS::kCompleted}},
                 "",
                 [](JobRecord& j) {
                   j.job.timeout = seconds(60);
                   j.job.finally = {Runnable("z")};
                 },
                 [](const Shell& s) {
                   EXPECT_EQ(s.Top().error, "exit status 1");
                   // Reconciling a job whose cleanup runs arms no timeout.
                   EXPECT_EQ(Count<ArmJobTimeout>(s.last), 0);
                 }},
        Scenario{"ARestartAfterTheCleanupRunsTheFailedStepAndTheCleanupAgain",
                 {Runnable("a")},
                 {{S::kFail, "a"}, {S::kOk, "z"}, {S::kRestart, ""}, {S::kOk, "a"}, {S::kOk, "z"}},
                 JobState::kCompleted,
                 {"a", "z", "a", "z"},
                 {{"z", TS::kCompleted}},
                 "",
                 [](JobRecord& j) { j.job.finally = {Runnable("z")}; }},
        Scenario{"ASubJobsFinallyRunsBeforeItsTaskCompletes",
                 {SubJobOf({Runnable("a")}), Runnable("after")},
                 {{S::kOk, "a"}, {S::kOk, "z"}, {S::kOk, "after"}},
                 JobState::kCompleted,
                 {"a", "z", "after"},
                 {{"s", TS::kCompleted}},
                 "",
                 [](JobRecord& j) { j.job.tasks[0].subjob->finally = {Runnable("z")}; }}),
    [](const auto& info) { return info.param.name; });

// While a job's cleanup runs, the job is active, its outcome in `ending`; a late report of
// a task the outcome cancelled changes nothing.
TEST(CleanupTest, AJobWhoseCleanupRunsStaysActiveWithItsOutcomeInEnding) {
  JobRecord job = JobOf({Runnable("a"), Runnable("b")});
  job.job.finally = {Runnable("z")};
  job = NewJobRecord(job.job, "", "job1", kNow);
  Shell shell;
  shell.On(Submit{job});
  const std::string a = shell.Row("a").id;
  shell.On(Started{a, "w1", kNow});
  shell.On(Cancel{"job1"});
  EXPECT_EQ(shell.Top().state, JobState::kRunning);
  ASSERT_TRUE(shell.Top().ending);
  EXPECT_EQ(*shell.Top().ending, JobState::kCancelled);
  EXPECT_EQ(shell.Row("z").state, TaskState::kScheduled);
  // The CancelActive comes before the cleanup's rows: it does not cancel them.
  bool cancel_seen = false;
  for (const Effect& e : shell.last) {
    if (std::holds_alternative<CancelActive>(e)) cancel_seen = true;
    if (const auto* c = std::get_if<CreateTask>(&e); c != nullptr && c->row.task.name == "z") {
      EXPECT_TRUE(cancel_seen);
    }
  }
  shell.On(Completed{a, "w1", "late", kNow});
  EXPECT_EQ(shell.Row("a").state, TaskState::kCancelled);
  EXPECT_EQ(RowsNamed(shell, "b"), 0);
  shell.On(Started{shell.Row("z").id, "w1", kNow});
  shell.On(Completed{shell.Row("z").id, "w1", "", kNow});
  EXPECT_EQ(shell.Top().state, JobState::kCancelled);
  EXPECT_FALSE(shell.Top().ending);
}

// A graph that fails runs its job's onFailure once every step has ended.
TEST(CleanupTest, AFailedGraphRunsItsJobsOnFailureAfterItsLastStep) {
  JobRecord job = JobOf({Runnable("a"), Runnable("b"), Needs(Runnable("c"), {"a"})});
  job.job.mode = TaskOrder::kDag;
  job.job.on_failure = {Runnable("o")};
  job = NewJobRecord(job.job, "", "job1", kNow);
  Shell shell;
  shell.On(Submit{job});
  for (const char* name : {"a", "b"}) {
    shell.On(Started{shell.Row(name).id, "w1", kNow});
  }
  shell.On(Failed{shell.Row("a").id, "w1", "exit status 1", kNow, FailReason::kExit, 1});
  EXPECT_EQ(RowsNamed(shell, "o"), 0);  // b still runs
  shell.On(Completed{shell.Row("b").id, "w1", "", kNow});
  ASSERT_EQ(RowsNamed(shell, "o"), 1);
  EXPECT_EQ(shell.Row("c").state, TaskState::kSkipped);
  shell.On(Started{shell.Row("o").id, "w1", kNow});
  shell.On(Completed{shell.Row("o").id, "w1", "", kNow});
  EXPECT_EQ(shell.Top().state, JobState::kFailed);
  EXPECT_EQ(shell.Top().error, "exit status 1");
}

// ---- retries that know what failed: retry.on, retry.jitter, each attempt's reason

Task RetriedOn(Task t, int limit, RetryOn on) {
  t.retry = Retry{.limit = limit, .on = std::move(on)};
  return t;
}
// Runs the newest row of `name` and fails it as `failed` says.
void FailAs(Shell& s, const std::string& name, Failed failed) {
  const std::string id = s.Row(name).id;
  s.On(Started{id, "w1", kNow});
  failed.task_id = id;
  failed.node_id = "w1";
  s.On(failed);
}

TEST(RetryOnTest, AnExitCodeTheRetryNamesIsRetriedAndOneItDoesNotNameFails) {
  Shell s;
  s.On(Submit{JobOf({RetriedOn(Runnable("a"), 3, RetryOn{.exit_codes = {3, 75}})})});
  FailAs(s, "a", Failed{.error = "exit code 3", .reason = FailReason::kExit, .exit_code = 3});
  EXPECT_EQ(RowsNamed(s, "a"), 2);  // retried
  EXPECT_EQ(FirstRow(s, "a").reason, FailReason::kExit);
  EXPECT_EQ(FirstRow(s, "a").exit_code, 3);
  FailAs(s, "a", Failed{.error = "exit code 4", .reason = FailReason::kExit, .exit_code = 4});
  EXPECT_EQ(RowsNamed(s, "a"), 2);  // not retried: attempts were left
  EXPECT_EQ(s.Top().state, JobState::kFailed);
  EXPECT_EQ(s.Row("a").exit_code, 4);
}

TEST(RetryOnTest, AnOptionalTasksFailureItsRetryIsNotForLetsTheJobGoOnAlsoAfterACrash) {
  for (bool crash : {false, true}) {
    Shell s;
    s.On(Submit{JobOf(
        {Optional(RetriedOn(Runnable("a"), 3, RetryOn{.exit_codes = {3}})), Runnable("after")})});
    FailAs(s, "a", Failed{.error = "exit code 4", .reason = FailReason::kExit, .exit_code = 4});
    EXPECT_TRUE(IsOptionalFailureLetGo(s.Row("a")));
    if (crash) s.Reconcile();
    EXPECT_EQ(RowsNamed(s, "a"), 1);
    EXPECT_EQ(RowsNamed(s, "after"), 1) << "crash " << crash;
  }
}

TEST(RetryOnTest, ATimeoutIsRetriedWhenTheRetryNamesItAndAnExitIsNot) {
  Shell s;
  s.On(Submit{JobOf({RetriedOn(Runnable("a"), 2, RetryOn{.errors = {FailReason::kTimeout}})})});
  const std::string first = s.Row("a").id;
  s.On(Started{first, "w1", kNow});
  s.On(TaskTimedOut{first, "w1", seconds(5)});
  EXPECT_EQ(s.view.tasks.at(first).reason, FailReason::kTimeout);
  EXPECT_EQ(RowsNamed(s, "a"), 2);
  FailAs(s, "a", Failed{.error = "exit code 1", .reason = FailReason::kExit, .exit_code = 1});
  EXPECT_EQ(RowsNamed(s, "a"), 2);
  EXPECT_EQ(s.Top().state, JobState::kFailed);
}

TEST(RetryOnTest, WithoutOnEveryFailureIsRetriedAsTorkDoes) {
  Shell s;
  s.On(Submit{JobOf({WithRetry(Runnable("a"), 2)})});
  FailAs(s, "a", Failed{.error = "oom", .reason = FailReason::kOutOfMemory});
  FailAs(s, "a", Failed{.error = "exit code 9", .reason = FailReason::kExit, .exit_code = 9});
  EXPECT_EQ(RowsNamed(s, "a"), 3);
  EXPECT_EQ(s.Row("a").reason, FailReason::kNone);  // the third attempt, queued
}

TEST(RetryOnTest, ALostTaskIsRetriedOnlyWhenTheRetryNamesLostOnceItsRequeuesAreSpent) {
  for (bool named : {false, true}) {
    Shell s;
    RetryOn on{.errors = {named ? FailReason::kLost : FailReason::kTimeout}};
    s.On(Submit{JobOf({RetriedOn(Runnable("a"), 1, on)})});
    for (int i = 0; i <= s.view.policy.max_redeliveries; ++i) {
      const std::string id = s.Row("a").id;
      s.On(Started{id, "w1", kNow});
      s.On(Redelivery{id, "w1", "worker stopping"});
      EXPECT_EQ(s.view.tasks.at(id).reason, FailReason::kLost);
    }
    // Re-queued max_redeliveries times (the same attempt), then given up.
    if (named) {
      EXPECT_EQ(s.Top().state, JobState::kRunning) << "retried";
      EXPECT_EQ(s.Row("a").task.retry->attempts, 1);
      EXPECT_EQ(s.Row("a").reason, FailReason::kNone);
    } else {
      EXPECT_EQ(s.Top().state, JobState::kFailed);
    }
  }
}

TEST(RetryOnTest, ATemplateThatCannotBeEvaluatedIsAnError) {
  Shell s;
  Task t = Runnable("a");
  t.env["X"] = "{{ nosuch() }}";
  s.On(Submit{JobOf({t})});
  EXPECT_EQ(s.Row("a").reason, FailReason::kError);
  EXPECT_EQ(s.Top().state, JobState::kFailed);
}

TEST(RetryOnTest, AJitterAddsAShareOfItsWaitFixedByTheRowsId) {
  Shell s;
  Task t = WithRetry(Runnable("a"), 1, seconds(10));
  t.retry->jitter = seconds(4);
  s.On(Submit{JobOf({t})});
  FailAs(s, "a", Failed{.error = "exit code 1", .reason = FailReason::kExit, .exit_code = 1});
  const TaskRecord& retry = s.Row("a");
  ASSERT_EQ(retry.task.retry->attempts, 1);
  const Duration jitter = RetryJitter(retry);
  EXPECT_GE(jitter, Duration::zero());
  EXPECT_LE(jitter, seconds(4));
  EXPECT_EQ(RetryJitter(retry), jitter);  // the same, read again (after a crash)
  const auto at = All<StartAt>(s.last);
  ASSERT_EQ(at.size(), 1u);
  EXPECT_EQ(at[0].at, kNow + seconds(10) + jitter);
  // Over many rows the shares spread over the jitter.
  std::set<std::int64_t> seen;
  for (int i = 0; i < 64; ++i) {
    TaskRecord row = retry;
    row.id = fmt::format("{:032x}", i);
    seen.insert(RetryJitter(row).count() / 1000);
  }
  EXPECT_GE(seen.size(), 4u);
}

// ---- reruns (rerun.cc)

class RerunTest : public testing::TestWithParam<Scenario> {};
TEST_P(RerunTest, RunsAgainWhatItsModeSaysAndKeepsTheRest) { RunScenario(GetParam()); }

Task Var(Task t, std::string var) {
  t.var = std::move(var);
  return t;
}

INSTANTIATE_TEST_SUITE_P(
    Rules, RerunTest,
    testing::Values(
        Scenario{"FailedOnlyRunsASequenceAgainFromTheTaskThatFailedKeepingWhatCameBefore",
                 {Var(Runnable("a"), "x"), Runnable("b"), Runnable("c")},
                 {{S::kOk, "a"},
                  {S::kFail, "b"},
                  {S::kRerun, "failed_only"},
                  {S::kOk, "b"},
                  {S::kOk, "c"}},
                 JobState::kCompleted,
                 {"a", "b", "b", "c"},
                 {{"a", TS::kCompleted}, {"b", TS::kCompleted}, {"c", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(RowsOf(s, "a").size(), 1u);
                   EXPECT_EQ(RowsOf(s, "b").size(), 2u);  // the failed attempt is kept
                   EXPECT_EQ(RowsOf(s, "b")[0].state, TS::kFailed);
                   EXPECT_EQ(s.Top().context["tasks"]["x"], "r:a");
                 }},
        Scenario{"AllRunsACompletedJobAgainFromItsFirstTask",
                 {Var(Runnable("a"), "x"), Runnable("b")},
                 {{S::kOk, "a"}, {S::kOk, "b"}, {S::kRerun, "all"}, {S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b", "a", "b"},
                 {{"a", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(RowsOf(s, "a").size(), 2u); }},
        Scenario{"AllFromATaskRunsItAndWhatFollowsAndKeepsTheResultsBefore",
                 {Var(Runnable("a"), "x"), Var(Runnable("b"), "y"), Runnable("c")},
                 {{S::kOk, "a"},
                  {S::kOk, "b"},
                  {S::kOk, "c"},
                  {S::kRerun, "all from b"},
                  {S::kOk, "b"},
                  {S::kOk, "c"}},
                 JobState::kCompleted,
                 {"a", "b", "c", "b", "c"},
                 {},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(RowsOf(s, "a").size(), 1u);
                   EXPECT_EQ(s.Top().context["tasks"]["x"], "r:a");
                   EXPECT_EQ(s.Top().context["tasks"]["y"], "r:b");
                 }},
        Scenario{"AVarOfATaskRunAgainIsForgottenUntilItEndsAgain",
                 {Var(Runnable("a"), "x"), Runnable("b")},
                 {{S::kOk, "a"}, {S::kOk, "b"}, {S::kRerun, "all"}},
                 JobState::kScheduled,
                 {"a", "b", "a"},
                 {{"a", TS::kScheduled}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_FALSE(s.Top().context["tasks"].contains("x"));
                   EXPECT_TRUE(s.Top().result.empty());
                 }},
        // A diamond whose b fails: c completes, d is skipped. failed_only runs b and d;
        // from_failed the same here; all runs everything.
        Scenario{"FailedOnlyRunsAGraphsFailedAndSkippedTasksAgain",
                 {Runnable("a"), Needs(Runnable("b"), {"a"}), Needs(Runnable("c"), {"a"}),
                  Needs(Runnable("d"), {"b", "c"})},
                 {{S::kOk, "a"},
                  {S::kFail, "b"},
                  {S::kOk, "c"},
                  {S::kRerun, "failed_only"},
                  {S::kOk, "b"},
                  {S::kOk, "d"}},
                 JobState::kCompleted,
                 {"a", "b", "c", "b", "d"},
                 {{"d", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(RowsOf(s, "a").size(), 1u);
                   EXPECT_EQ(RowsOf(s, "c").size(), 1u);
                 }},
        Scenario{"FromFailedRunsAGraphsFailedTaskAndEverythingAfterIt",
                 {Runnable("a"), Needs(Runnable("b"), {"a"}), Needs(Runnable("c"), {"b"}),
                  Needs(Runnable("e"), {"a"})},
                 {{S::kOk, "a"},
                  {S::kOk, "e"},
                  {S::kFail, "b"},
                  {S::kRerun, "from_failed"},
                  {S::kOk, "b"},
                  {S::kOk, "c"}},
                 JobState::kCompleted,
                 {"a", "b", "e", "b", "c"},
                 {},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(RowsOf(s, "e").size(), 1u); }},
        Scenario{"AllFromAGraphsTaskRunsItAndWhatNeedsIt",
                 {Runnable("a"), Needs(Runnable("b"), {"a"}), Needs(Runnable("c"), {"b"}),
                  Needs(Runnable("e"), {"a"})},
                 {{S::kOk, "a"},
                  {S::kOk, "e"},
                  {S::kOk, "b"},
                  {S::kOk, "c"},
                  {S::kRerun, "all from b"},
                  {S::kOk, "b"},
                  {S::kOk, "c"}},
                 JobState::kCompleted,
                 {"a", "b", "e", "c", "b", "c"},
                 {},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(RowsOf(s, "a").size(), 1u); }}),
    [](const auto& info) { return info.param.name; });

TEST(FlowTest, ARerunIsRefusedWithItsReason) {
  Shell shell;
  shell.On(Submit{NewJobRecord(JobOf({Runnable("a"), Runnable("b")}).job, "", "job1", kNow)});
  auto refused = [&](Rerun rerun) {
    shell.On(rerun);
    return Count<Refused>(shell.last) == 1 ? All<Refused>(shell.last)[0].reason : "(not refused)";
  };
  EXPECT_EQ(refused({.job_id = "job1"}),
            "only a COMPLETED, FAILED or CANCELLED job can be rerun; this one is SCHEDULED");
  shell.On(Completed{shell.Row("a").id, "w1", "", kNow});
  shell.On(Completed{shell.Row("b").id, "w1", "", kNow});
  ASSERT_EQ(shell.Top().state, JobState::kCompleted);
  EXPECT_EQ(refused({.job_id = "job1"}), "none of its tasks failed: rerun it with mode all");
  EXPECT_EQ(refused({.job_id = "job1", .mode = RerunMode::kFromFailed, .from = "a"}),
            "from: only a rerun of mode all starts from a task");
  EXPECT_EQ(refused({.job_id = "job1", .mode = RerunMode::kAll, .from = "z"}),
            "from: the job has no top-level task named \"z\"");
  EXPECT_EQ(shell.Top().state, JobState::kCompleted);
}

TEST(FlowTest, ARerunFromATaskThatWouldLeaveAnUnfinishedOneOutIsRefused) {
  auto refused = [](Shell& shell, Rerun rerun) {
    shell.On(rerun);
    return Count<Refused>(shell.last) == 1 ? All<Refused>(shell.last)[0].reason : "(not refused)";
  };
  // A sequence stopped at b: from c would never run b.
  Shell seq;
  seq.On(Submit{
      NewJobRecord(JobOf({Runnable("a"), Runnable("b"), Runnable("c")}).job, "", "job1", kNow)});
  seq.On(Completed{seq.Row("a").id, "w1", "", kNow});
  seq.On(Failed{seq.Row("b").id, "w1", "exit status 1", kNow, FailReason::kExit, 1});
  ASSERT_EQ(seq.Top().state, JobState::kFailed);
  EXPECT_EQ(refused(seq, {.job_id = "job1", .mode = RerunMode::kAll, .from = "c"}),
            "from: \"c\" comes after \"b\", where the job stopped (FAILED): rerun from that "
            "task or one before it");
  EXPECT_EQ(refused(seq, {.job_id = "job1", .mode = RerunMode::kAll, .from = "b"}),
            "(not refused)");
  // A graph cancelled with a and b running: from b would leave a CANCELLED, and the job
  // would complete without it.
  JobRecord dag = JobOf({Runnable("a"), Runnable("b")});
  dag.job.mode = TaskOrder::kDag;
  Shell graph;
  graph.On(Submit{NewJobRecord(dag.job, "", "job1", kNow)});
  graph.On(Cancel{"job1"});
  ASSERT_EQ(graph.Top().state, JobState::kCancelled);
  EXPECT_EQ(refused(graph, {.job_id = "job1", .mode = RerunMode::kAll, .from = "b"}),
            "from: \"b\" and what needs it leave \"a\" CANCELLED: rerun from_failed, or from "
            "that task");
  EXPECT_EQ(refused(graph, {.job_id = "job1", .mode = RerunMode::kFromFailed}), "(not refused)");
}

TEST(FlowTest, ARerunsInputsReplaceTheJobsInputsOfTheirNames) {
  JobRecord job = JobOf({Runnable("a")});
  job.job.inputs = {{"region", "eu"}, {"size", "3"}};
  Shell shell;
  shell.On(Submit{NewJobRecord(job.job, "", "job1", kNow)});
  shell.On(Completed{shell.Row("a").id, "w1", "", kNow});
  shell.On(Rerun{.job_id = "job1", .mode = RerunMode::kAll, .inputs = {{"region", "us"}}});
  EXPECT_EQ(shell.Top().state, JobState::kScheduled);
  EXPECT_EQ(shell.Top().context["inputs"], (nlohmann::json{{"region", "us"}, {"size", "3"}}));
}

TEST(FlowTest, ARerunAskedForOnceAndDeliveredTwiceRunsTheJobOnce) {
  Shell shell;
  shell.On(Submit{NewJobRecord(JobOf({Runnable("a")}).job, "", "job1", kNow)});
  Play(shell, {S::kOk, "a"});
  shell.view.jobs["job1"].started_at = kNow - seconds(1);  // its run began a second ago
  const Rerun once{
      .job_id = "job1", .mode = RerunMode::kAll, .once = true, .of_run = shell.Top().started_at};
  shell.On(once);
  Play(shell, {S::kOk, "a"});
  ASSERT_EQ(shell.Top().state, JobState::kCompleted);
  shell.On(once);  // delivered again
  ASSERT_EQ(Count<Refused>(shell.last), 1);
  EXPECT_EQ(All<Refused>(shell.last)[0].reason,
            "the job was started again since this rerun was asked for");
  EXPECT_EQ(RowsOf(shell, "a").size(), 2u);
}

// ---- skip (rerun.cc: On(Skip))

TEST(FlowTest, SkippingTheFailedTaskAJobStoppedAtRunsItOnWithTheResult) {
  Shell shell;
  shell.On(Submit{NewJobRecord(JobOf({Runnable("a"), Var(Runnable("b"), "b"), Runnable("c")}).job,
                               "", "job1", kNow)});
  Play(shell, {S::kOk, "a"});
  Play(shell, {S::kFail, "b"});
  ASSERT_EQ(shell.Top().state, JobState::kFailed);
  shell.On(Skip{shell.Row("b").id, "cached"});
  EXPECT_EQ(shell.Top().state, JobState::kScheduled);
  EXPECT_EQ(shell.Top().context["tasks"]["b"], "cached");
  std::vector<TaskRecord> b = RowsOf(shell, "b");
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].state, TS::kFailed);  // its history kept
  EXPECT_EQ(b[1].state, TS::kSkipped);
  EXPECT_EQ(b[1].result, "cached");
  Play(shell, {S::kOk, "c"});
  EXPECT_EQ(shell.Top().state, JobState::kCompleted);
  EXPECT_EQ(shell.started, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(FlowTest, SkippingAQueuedTaskDropsItAndWhatItIsInGoesOn) {
  Shell shell;
  shell.On(Submit{
      NewJobRecord(JobOf({ParallelOf({Runnable("a"), Runnable("b")})}).job, "", "job1", kNow)});
  shell.On(Skip{shell.Row("b").id, ""});
  EXPECT_EQ(shell.Row("b").state, TS::kSkipped);
  EXPECT_EQ(Count<Drop>(shell.last), 1);  // no worker starts it now
  Play(shell, {S::kOk, "a"});
  EXPECT_EQ(shell.Top().state, JobState::kCompleted);
}

TEST(FlowTest, SkippingAGraphsFailedStepLetsWhatNeedsItRun) {
  Shell shell;
  shell.On(Submit{NewJobRecord(
      JobOf({Runnable("a"), Needs(Runnable("b"), {"a"}), Needs(Runnable("d"), {"b"})}).job, "",
      "job1", kNow)});
  Play(shell, {S::kOk, "a"});
  Play(shell, {S::kFail, "b"});
  ASSERT_EQ(shell.Top().state, JobState::kFailed);
  shell.On(Skip{RowsOf(shell, "b")[0].id, "x"});
  Play(shell, {S::kOk, "d"});
  EXPECT_EQ(shell.Top().state, JobState::kCompleted) << shell.Top().error;
}

TEST(FlowTest, SkippingATaskThatRanOrIsNotWhereTheJobStoppedIsRefused) {
  Shell shell;
  shell.On(Submit{NewJobRecord(JobOf({Runnable("a"), Runnable("b")}).job, "", "job1", kNow)});
  Play(shell, {S::kOk, "a"});
  shell.On(Skip{shell.Row("a").id, ""});
  ASSERT_EQ(Count<Refused>(shell.last), 1);
  EXPECT_EQ(All<Refused>(shell.last)[0].reason,
            "only a PENDING or SCHEDULED task of an active job, or the FAILED top-level task a "
            "finished job stopped at, can be skipped; this one is COMPLETED in a RUNNING job");
  EXPECT_EQ(shell.Row("a").state, TS::kCompleted);
}

// A pause during a rerun: the rerun's next steps wait for the resume like any others.
TEST(FlowTest, APauseDuringARerunHoldsItsNextStepsUntilTheResume) {
  Shell shell;
  shell.On(Submit{NewJobRecord(JobOf({Runnable("a"), Runnable("b")}).job, "", "job1", kNow)});
  Play(shell, {S::kOk, "a"});
  Play(shell, {S::kOk, "b"});
  shell.On(Rerun{.job_id = "job1", .mode = RerunMode::kAll});
  Play(shell, {S::kStart, "a"});
  shell.On(Pause{"job1"});
  Play(shell, {S::kOk, "a"});
  EXPECT_EQ(shell.Top().state, JobState::kPaused);
  EXPECT_EQ(shell.Row("b").state, TS::kPending);  // made, held
  EXPECT_EQ(shell.started, (std::vector<std::string>{"a", "b", "a"}));
  shell.On(Resume{"job1"});
  Play(shell, {S::kOk, "b"});
  EXPECT_EQ(shell.Top().state, JobState::kCompleted);
  EXPECT_EQ(shell.started, (std::vector<std::string>{"a", "b", "a", "b"}));
}

// A parallel whose tasks have needs is a graph of them (graph.cc), its steps on its row.
INSTANTIATE_TEST_SUITE_P(
    ParallelGraphs, ScenarioTest,
    testing::Values(
        Scenario{"ADiamondInAParallelRunsItsMiddleTasksAtOnceAndTheLastAfterBoth",
                 {ParallelOf({Runnable("a"), Needs(Runnable("b"), {"a"}),
                              Needs(Runnable("c"), {"a"}), Needs(Runnable("d"), {"b", "c"})}),
                  Runnable("after")},
                 {{S::kOk, "a"}, {S::kOk, "c"}, {S::kOk, "b"}, {S::kOk, "d"}, {S::kOk, "after"}},
                 JobState::kCompleted,
                 {"a", "b", "c", "d", "after"},
                 {{"p", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Row("p").steps, "cccc");
                   EXPECT_EQ(s.Row("p").completions, 4);
                   EXPECT_EQ(s.Row("d").parent_id, s.Row("p").id);
                   EXPECT_EQ(s.Row("d").each_index, 3);
                   EXPECT_EQ(s.Row("d").position, 1);
                 }},
        Scenario{"TheTasksOfAParallelThatNeedNothingStartAtOnceAndTheRestWait",
                 {ParallelOf({Runnable("a"), Runnable("b"), Needs(Runnable("c"), {"a"})})},
                 {{S::kOk, "b"}},
                 JobState::kRunning,
                 {"a", "b"},
                 {{"p", TS::kRunning}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(s.Row("p").steps, "rc."); }},
        Scenario{"AFailureInAGraphParallelSkipsWhatNeedsItLetsTheRestEndThenFailsIt",
                 {ParallelOf({Runnable("a"), Needs(Runnable("b"), {"a"}), Runnable("c"),
                              Needs(Runnable("d"), {"a"}, TR::kAllDone)}),
                  Runnable("after")},
                 {{S::kFail, "a"}, {S::kOk, "d"}, {S::kOk, "c"}},
                 JobState::kFailed,
                 {"a", "c", "d"},
                 {{"a", TS::kFailed},
                  {"b", TS::kSkipped},
                  {"c", TS::kCompleted},
                  {"d", TS::kCompleted},
                  {"p", TS::kFailed}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   EXPECT_EQ(s.Row("p").steps, "fscc");
                   EXPECT_EQ(s.Row("p").error, "exit status 1");
                   EXPECT_EQ(s.Top().error, "exit status 1");
                   EXPECT_EQ(s.Row("b").error,
                             "not run: its trigger rule all_success cannot be met (\"a\" FAILED)");
                 }},
        Scenario{
            "AnOptionalFailureInAGraphParallelCountsAsASuccess",
            {ParallelOf({Optional(Runnable("a")), Needs(Runnable("b"), {"a"})}), Runnable("after")},
            {{S::kFail, "a"}, {S::kOk, "b"}, {S::kOk, "after"}},
            JobState::kCompleted,
            {"a", "b", "after"},
            {{"p", TS::kCompleted}},
            "",
            nullptr,
            [](const Shell& s) { EXPECT_EQ(s.Row("p").steps, "pc"); }},
        Scenario{"AGraphParallelsRetriedTaskHoldsItsStepUntilItsLastAttempt",
                 {ParallelOf({WithRetry(Runnable("a"), 1), Needs(Runnable("b"), {"a"})})},
                 {{S::kFail, "a"}, {S::kRetryDue, "a"}, {S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "a", "b"},
                 {{"p", TS::kCompleted}}},
        Scenario{"AFallbackInAGraphParallelStandsForItsTaskForWhatNeedsIt",
                 {ParallelOf({Fallback(Runnable("a"), {Runnable("f")}, kGoOn),
                              Needs(Runnable("b"), {"a"})})},
                 {{S::kFail, "a"}, {S::kOk, "f"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "f", "b"},
                 {{"p", TS::kCompleted}, {"b", TS::kCompleted}}},
        Scenario{"AWhenOnAnEdgeInAParallelSeesTheEachsItem",
                 {EachOf(ParallelOf({Runnable("a{{ item.index }}"),
                                     When(Runnable("b{{ item.index }}"), "a{{ item.index }}",
                                          "{{ item.index == 1 }}")}),
                         "{{ sequence(0, 2) }}")},
                 {{S::kOk, "a0"}, {S::kOk, "a1"}, {S::kOk, "b1"}},
                 JobState::kCompleted,
                 {"a0", "a1", "b1"},
                 {{"e", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) {
                   // Item 0's b: its edge's when is false (its name left as written).
                   int skipped = 0;
                   for (const auto& [id, row] : s.view.tasks) {
                     skipped += row.task.name.starts_with("b") && row.state == TS::kSkipped;
                   }
                   EXPECT_EQ(skipped, 1);
                 }},
        Scenario{"ACancelOfAJobCancelsAGraphParallelsRunningTasks",
                 {ParallelOf({Runnable("a"), Needs(Runnable("b"), {"a"}), Runnable("c")})},
                 {{S::kOk, "a"}, {S::kStart, "b"}, {S::kCancel, ""}},
                 JobState::kCancelled,
                 {"a", "c", "b"},
                 {{"b", TS::kCancelled}, {"c", TS::kCancelled}, {"p", TS::kCancelled}}},
        Scenario{"AGraphParallelsTaskLostInACrashRunsAgainAndTheGraphGoesOn",
                 {ParallelOf({Runnable("a"), Needs(Runnable("b"), {"a"})})},
                 {{S::kStart, "a"}, {S::kCrash, ""}, {S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "a", "b"},
                 {{"p", TS::kCompleted}}},
        Scenario{"APauseHoldsWhatAGraphParallelStartsNextUntilTheResume",
                 {ParallelOf({Runnable("a"), Needs(Runnable("b"), {"a"})})},
                 {{S::kStart, "a"},
                  {S::kPause, ""},
                  {S::kOk, "a"},
                  {S::kIsPaused, ""},
                  {S::kResume, ""},
                  {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b"},
                 {{"p", TS::kCompleted}}},
        Scenario{"ARestartRunsAFailedGraphParallelAgainFromItsRoots",
                 {ParallelOf({Runnable("a"), Needs(Runnable("b"), {"a"})})},
                 {{S::kOk, "a"}, {S::kFail, "b"}, {S::kRestart, ""}, {S::kOk, "a"}, {S::kOk, "b"}},
                 JobState::kCompleted,
                 {"a", "b", "a", "b"},
                 {{"p", TS::kCompleted}},
                 "",
                 nullptr,
                 [](const Shell& s) { EXPECT_EQ(s.Row("p").steps, "cc"); }}),
    [](const auto& info) { return info.param.name; });

TEST(FlowTest, FrontierActsOnAGraphParallelsChildThatEndedAndStartsWhatNowMayRun) {
  JobRecord job = NewJobRecord(
      JobOf({ParallelOf({Runnable("a"), Needs(Runnable("b"), {"a"})})}).job, "", "job1", kNow);
  job.state = JobState::kRunning;
  job.started_at = kNow;
  TaskRecord p;
  p.id = "tp";
  p.job_id = "job1";
  p.position = 1;
  p.task = job.job.tasks[0];
  p.state = TaskState::kRunning;
  p.steps = "r.";
  p.created_at = kNow;
  TaskRecord a;
  a.id = "ta";
  a.job_id = "job1";
  a.parent_id = "tp";
  a.position = 1;
  a.each_index = 0;
  a.task = Runnable("a");
  a.state = TaskState::kCompleted;  // its end was stored, not acted on
  a.created_at = kNow;
  std::vector<Effect> effects = Frontier(job, {p, a}, kNow, Policy{}, nullptr, kSeed);
  auto tasks = All<UpdateTask>(effects);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].row.steps, "cr");
  auto created = All<CreateTask>(effects);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].row.task.name, "b");
  EXPECT_EQ(created[0].row.parent_id, "tp");
  EXPECT_EQ(created[0].row.each_index, 1);
  EXPECT_EQ(Count<Start>(effects), 1);
  // Applied again to what it wrote, it writes nothing (b, queued, is published again).
  effects = Frontier(job, {tasks[0].row, a, created[0].row}, kNow, Policy{}, nullptr, kSeed);
  EXPECT_EQ(Count<CreateTask>(effects) + Count<UpdateTask>(effects) + Count<UpdateJob>(effects), 0);
}

// ---- waits (kinds/wait.cc): no worker, a timer kept with the row

Task WaitFor(std::string name, Duration d) {
  Task t;
  t.name = std::move(name);
  t.wait = Wait{.for_ = d};
  return t;
}
Task WaitSignal(std::string name, std::string signal, std::optional<Duration> timeout) {
  Task t;
  t.name = std::move(name);
  t.wait = Wait{.signal = std::move(signal), .timeout = timeout};
  return t;
}

TEST(WaitTest, AWaitHoldsNoWorkerAndCompletesAtItsTimeNotBefore) {
  Shell shell;
  shell.On(Submit{JobOf({WaitFor("w", seconds(5)), Runnable("after")})});
  EXPECT_EQ(shell.Row("w").state, TaskState::kRunning);
  EXPECT_EQ(shell.Top().state, JobState::kRunning);
  EXPECT_TRUE(shell.started.empty());  // nothing handed to a worker
  ASSERT_EQ(Count<StartAt>(shell.last), 1);
  EXPECT_EQ(All<StartAt>(shell.last)[0].at, kNow + seconds(5));
  // A timer early (a clock ahead of another coordinator's): armed again, not ended.
  shell.now = kNow + seconds(1);
  shell.On(RetryDue{shell.Row("w").id});
  EXPECT_EQ(shell.Row("w").state, TaskState::kRunning);
  ASSERT_EQ(Count<StartAt>(shell.last), 1);
  EXPECT_EQ(All<StartAt>(shell.last)[0].at, kNow + seconds(5));
  shell.now = kNow + seconds(5);
  shell.On(RetryDue{shell.Row("w").id});
  EXPECT_EQ(shell.Row("w").state, TaskState::kCompleted);
  EXPECT_EQ(shell.started, std::vector<std::string>{"after"});
  // Fired again (a duplicate timer): nothing more.
  shell.On(RetryDue{shell.Row("w").id});
  EXPECT_TRUE(shell.last.empty());
}

TEST(WaitTest, AWaitUntilATimeEvaluatesItsTemplateAndOnePastEndsAtOnce) {
  JobRecord job = JobOf({[] {
    Task t;
    t.name = "w";
    t.wait = Wait{.until = "{{ inputs.at }}"};
    return t;
  }()});
  job.job.inputs["at"] = FormatTime(kNow - seconds(1));
  Shell shell;
  shell.On(Submit{NewJobRecord(job.job, "", "job1", kNow)});
  EXPECT_EQ(shell.Row("w").state, TaskState::kCompleted);
  EXPECT_EQ(shell.Top().state, JobState::kCompleted);
  job.job.inputs["at"] = "tomorrow";
  Shell bad;
  bad.On(Submit{NewJobRecord(job.job, "", "job1", kNow)});
  EXPECT_EQ(bad.Row("w").state, TaskState::kFailed);
  EXPECT_EQ(bad.Row("w").error,
            "wait.until: expected a time (RFC 3339, as 2026-01-02T15:04:05Z), got \"tomorrow\"");
}

TEST(WaitTest, AfterACrashAWaitIsArmedAgainFromItsRowAndEndsOnceDue) {
  Shell shell;
  shell.On(Submit{JobOf({WaitFor("w", seconds(5))})});
  shell.now = kNow + seconds(2);
  shell.Reconcile();  // the timer was lost with the engine
  ASSERT_EQ(Count<StartAt>(shell.last), 1);
  EXPECT_EQ(All<StartAt>(shell.last)[0].at, kNow + seconds(5));
  EXPECT_EQ(shell.Row("w").state, TaskState::kRunning);
  shell.now = kNow + seconds(9);
  shell.Reconcile();  // down past its time: its timer is due now, and ends it once
  ASSERT_EQ(Count<StartAt>(shell.last), 1);
  EXPECT_EQ(All<StartAt>(shell.last)[0].at, kNow + seconds(5));
  EXPECT_EQ(shell.Row("w").state, TaskState::kRunning);
  shell.On(RetryDue{shell.Row("w").id});
  EXPECT_EQ(shell.Row("w").state, TaskState::kCompleted);
  EXPECT_EQ(shell.Top().state, JobState::kCompleted);
}

TEST(WaitTest, ASignalWaitFailsAtItsTimeoutAndOneWithoutWaitsForItsSignalOnly) {
  Shell shell;
  shell.On(Submit{JobOf({WaitSignal("w", "go", seconds(10))})});
  ASSERT_EQ(Count<StartAt>(shell.last), 1);
  shell.now = kNow + seconds(10);
  shell.On(RetryDue{shell.Row("w").id});
  EXPECT_EQ(shell.Row("w").state, TaskState::kFailed);
  EXPECT_EQ(shell.Row("w").error, "no signal \"go\" came within 10s");
  EXPECT_EQ(shell.Top().state, JobState::kFailed);
  Shell forever;
  forever.On(Submit{JobOf({WaitSignal("w", "go", std::nullopt)})});
  EXPECT_EQ(Count<StartAt>(forever.last), 0);
  EXPECT_EQ(forever.Row("w").state, TaskState::kRunning);
}

TEST(WaitTest, ASignalKeptInTheContextCompletesItsWaitAtOnceAndIsTaken) {
  JobRecord job = JobOf({Runnable("first"), WithVar(WaitSignal("w", "go", std::nullopt), "got")});
  Shell shell;
  shell.On(Submit{job});
  shell.view.jobs["job1"].context["signals"] = {{"go", "{\"ok\":true}"}};
  shell.On(Completed{shell.Row("first").id, "w1", "", kNow});
  EXPECT_EQ(shell.Row("w").state, TaskState::kCompleted);
  EXPECT_EQ(shell.Row("w").result, "{\"ok\":true}");
  EXPECT_EQ(shell.Top().context["tasks"]["got"], "{\"ok\":true}");
  EXPECT_FALSE(shell.Top().context["signals"].contains("go"));
  EXPECT_EQ(shell.Top().state, JobState::kCompleted);
}

TEST(WaitTest, AWaitDueWhilePausedEndsOnlyOnResumeAndACancelledOneNever) {
  Shell shell;
  shell.On(Submit{JobOf({WaitFor("w", seconds(5)), Runnable("after")})});
  shell.On(Pause{"job1"});
  shell.now = kNow + seconds(6);
  shell.Reconcile();  // an engine restarted while paused arms nothing
  EXPECT_EQ(Count<StartAt>(shell.last), 0);
  EXPECT_EQ(shell.Row("w").state, TaskState::kRunning);
  shell.On(Resume{"job1"});
  ASSERT_EQ(Count<StartAt>(shell.last), 1);  // due: its timer fires at once
  shell.On(RetryDue{shell.Row("w").id});
  EXPECT_EQ(shell.Row("w").state, TaskState::kCompleted);
  EXPECT_EQ(shell.started, std::vector<std::string>{"after"});

  Shell cancelled;
  cancelled.On(Submit{JobOf({WaitFor("w", seconds(5))})});
  cancelled.On(Cancel{"job1"});
  EXPECT_EQ(cancelled.Row("w").state, TaskState::kCancelled);
  cancelled.now = kNow + seconds(5);
  cancelled.On(RetryDue{cancelled.Row("w").id});
  EXPECT_TRUE(cancelled.last.empty());
}

TEST(WaitTest, ASignalCompletesTheTasksWaitingForItAndOneSentBeforeIsKeptForTheFirst) {
  Shell shell;
  shell.On(Submit{JobOf({Runnable("first"), WithVar(WaitSignal("w", "go", seconds(60)), "got"),
                         WithVar(WaitSignal("again", "go", std::nullopt), "again")})});
  // Sent before anything waits: kept, the latest one.
  shell.On(Signal{"job1", "go", "early"});
  shell.On(Signal{"job1", "go", nlohmann::json{{"n", 1}}});
  EXPECT_EQ(shell.Top().context["signals"]["go"], (nlohmann::json{{"n", 1}}));
  shell.On(Completed{shell.Row("first").id, "w1", "", kNow});
  EXPECT_EQ(shell.Row("w").state, TaskState::kCompleted);
  EXPECT_EQ(shell.Row("w").result, "{\"n\":1}");
  // Taken: the next wait for it waits.
  EXPECT_EQ(shell.Row("again").state, TaskState::kRunning);
  shell.On(Signal{"job1", "other", "x"});  // another name: kept, nothing ends
  EXPECT_EQ(shell.Row("again").state, TaskState::kRunning);
  shell.On(Signal{"job1", "go", "late"});
  EXPECT_EQ(shell.Row("again").result, "late");
  EXPECT_EQ(shell.Top().state, JobState::kCompleted);
  EXPECT_EQ(shell.Top().context["tasks"]["again"], "late");
  shell.On(Signal{"job1", "go", "too late"});
  ASSERT_EQ(Count<Refused>(shell.last), 1);
  EXPECT_EQ(All<Refused>(shell.last)[0].reason,
            "only an active job takes signals; this one is COMPLETED");
}

}  // namespace
}  // namespace baton::flow

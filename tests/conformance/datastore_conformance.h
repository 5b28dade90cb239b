// The Datastore contract (src/datastore/datastore.h) as tests. Every implementation
// instantiates the suite with factories for its configurations:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, DatastoreConformanceTest,
//                            ::testing::Values(DatastoreFactory{"memory", ...}),
//                            DatastoreFactoryName);
//
// Include it in one source file per test binary (it defines the tests). The tests use
// fresh ids, words and tags of their own, so they may share one database (a PostgreSQL
// server, say) with each other and with earlier runs.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "core/records.h"
#include "crypto/keyring.h"
#include "datastore/datastore.h"
#include "datastore/rotation.h"
#include "testing/wait_for.h"

namespace baton::testing {

struct DatastoreFactory {
  std::string name;  // names the instantiation: letters, digits and '_' only
  std::function<std::unique_ptr<Datastore>()> make;
  // Optional: closes the store and opens the same database again. Tests call Reopen()
  // between writing and reading, so with it set every read checks persistence.
  std::function<std::unique_ptr<Datastore>(std::unique_ptr<Datastore>)> reopen;
  // The store runs one transaction at a time (SQLite's one writer, a pool of one
  // connection): Transact scopes of different jobs take turns instead of overlapping.
  bool one_writer = false;
};

inline std::string DatastoreFactoryName(const ::testing::TestParamInfo<DatastoreFactory>& info) {
  return info.param.name;
}

namespace datastore_conformance {

// A fixed instant with milliseconds, so stored times must keep them; `ms` later.
inline TimePoint At(std::int64_t ms) {
  static const TimePoint kBase = *ParseTime("2031-05-17T08:09:10.123Z");
  return kBase + std::chrono::milliseconds(ms);
}

// A word no other test (or earlier run) uses, for scoping searches.
inline std::string UniqueWord() { return "w" + NewId().substr(16); }  // its random part

inline Task RunnableTask(std::string name) {
  Task task;
  task.name = std::move(name);
  task.image = "alpine:3";
  task.run = "echo hello";
  return task;
}

inline Job SimpleJob(std::string name, std::string description = "",
                     std::vector<std::string> tags = {}) {
  Job job;
  job.name = std::move(name);
  job.description = std::move(description);
  job.tags = std::move(tags);
  job.tasks = {RunnableTask("only")};
  return job;
}

inline JobRecord NewJob(Job job, TimePoint created_at, JobState state = JobState::kPending) {
  JobRecord record;
  record.id = NewId();
  record.state = state;
  record.created_at = created_at;
  record.job = std::move(job);
  record.task_count = static_cast<int>(record.job.tasks.size());
  return record;
}

inline TaskRecord NewTask(const std::string& job_id, int position, TimePoint created_at,
                          TaskState state = TaskState::kPending) {
  TaskRecord record;
  record.id = NewId();
  record.job_id = job_id;
  record.position = position;
  record.state = state;
  record.created_at = created_at;
  record.task = RunnableTask("t" + std::to_string(position));
  return record;
}

// A task using every runnable field.
inline Task FullRunnableTask() {
  Task t;
  t.name = "say hello";
  t.description = "greets";
  t.var = "greeting";
  t.if_expr = "{{ true }}";
  t.run = "echo -n hello > $BATON_OUTPUT";
  t.image = "alpine:3";
  t.cmd = {"sh", "-c", "echo"};
  t.entrypoint = {"/bin/sh"};
  t.env = {{"WHO", "{{ inputs.who }}"}};
  t.files = {{"script.py", "print(1)"}};
  t.workdir = "/work";
  t.queue = "gpu";
  t.priority = 9;
  AuxTask pre;
  pre.name = "prepare";
  pre.run = "echo pre";
  pre.timeout = std::chrono::seconds(10);
  pre.registry = Registry{"u", "p"};
  t.pre = {pre};
  t.post = {pre};
  AuxTask sidecar;
  sidecar.name = "web";
  sidecar.image = "nginx";
  sidecar.probe = Probe{"/health", 8080, std::chrono::seconds(5)};
  t.sidecars = {sidecar};
  t.mounts = {Mount{MountType::kVolume, "", "/data", {}},
              Mount{MountType::kBind, "/tmp", "/host", {{"ro", "true"}}},
              Mount{MountType::kTmpfs, "", "/scratch", {}}};
  t.networks = {"net1"};
  t.limits = Limits{.cpus = 0.5, .memory = 1LL << 30};
  t.gpus = "all";
  t.registry = Registry{"user", "pass"};
  t.tags = {"x"};
  t.timeout = std::chrono::milliseconds(1500);
  t.retry = Retry{.limit = 3,
                  .attempts = 1,
                  .initial_delay = std::chrono::seconds(1),
                  .scaling_factor = 2.5,
                  .max_delay = std::chrono::seconds(30)};
  return t;
}

// A parallel holding an each (of a runnable task), a subjob and a plain task.
inline Task CompositeTask() {
  Task child = RunnableTask("square {{ item.value }}");
  Task each;
  each.name = "fan out";
  each.each = Each{"n", "{{ sequence(1, 4) }}", Box<Task>(child), 2};
  Task sub;
  sub.name = "child";
  sub.subjob =
      SubJob{"child job",
             "d",
             {child},
             {{"a", "b"}},
             {{"s", "t"}},
             "{{ tasks.x }}",
             AutoDelete{std::chrono::minutes(1)},
             {Webhook{"http://example.com/hook", {{"X-Key", "abc"}}, "job.StateChange", ""}},
             true,
             TaskOrder::kSequence,
             {},
             {}};
  Task parallel;
  parallel.name = "together";
  parallel.description = "all at once";
  parallel.var = "together";
  parallel.parallel = Parallel{{each, sub, FullRunnableTask()}};
  // Beyond Tork: a fallback, and a job's cleanup on the sub-job.
  parallel.on_failure = OnFailure{{RunnableTask("instead")}, Then::kContinue};
  parallel.parallel->tasks[1].subjob->on_failure = {RunnableTask("page")};
  parallel.parallel->tasks[1].subjob->finally = {RunnableTask("tidy")};
  return parallel;
}

inline Job FullJob() {
  Job job;
  job.name = "full " + UniqueWord();
  job.description = "every field";
  job.tags = {"a", "b"};
  job.inputs = {{"who", "world"}};
  job.secrets = {{"token", "s3cret"}};
  job.output = "{{ tasks.greeting }}";
  job.timeout = std::chrono::minutes(90);
  job.wait_timeout = std::chrono::seconds(30);
  job.auto_delete = AutoDelete{std::chrono::hours(24)};
  job.permissions = {{"admins", ""}, {"", "ann"}};
  job.created_by = "ann";
  Defaults defaults;
  defaults.retry = Retry();
  defaults.retry->limit = 2;
  defaults.limits = Limits{.cpus = 1.5, .memory = 64LL << 20};
  defaults.timeout = std::chrono::minutes(5);
  defaults.queue = "default";
  defaults.priority = 4;
  job.defaults = defaults;
  job.webhooks = {Webhook{"http://example.com/hook",
                          {{"X-Key", "abc"}},
                          "job.StateChange",
                          "{{ job.state == 'COMPLETED' }}"}};
  job.tasks = {FullRunnableTask(), CompositeTask()};
  job.on_failure = {RunnableTask("alert")};
  job.finally = {FullRunnableTask()};
  return job;
}

inline JobRecord FullJobRecord() {
  JobRecord r = NewJob(FullJob(), At(1), JobState::kRunning);
  r.parent_id = NewId();
  r.started_at = At(2);
  r.completed_at = At(3);
  r.failed_at = At(4);
  r.delete_at = At(86'400'000);
  r.position = 2;
  r.task_count = 2;
  r.steps = "cr";
  r.ending = JobState::kCancelled;
  r.progress = 37.5;
  r.result = "the result";
  r.error = "an error\nover two lines";
  r.context = {{"inputs", {{"who", "world"}}},
               {"secrets", {{"token", "s3cret"}}},
               {"tasks", {{"greeting", "hello"}}},
               {"job", {{"id", r.id}, {"name", r.job.name}}},
               {"numbers", {1, -2, 2.5}},
               {"flag", true},
               {"nothing", nullptr},
               {"unicode", "h\u00e9llo \u2603"}};
  return r;
}

inline TaskRecord FullTaskRecord(const std::string& job_id) {
  TaskRecord r = NewTask(job_id, 3, At(10), TaskState::kRunning);
  r.parent_id = NewId();
  r.scheduled_at = At(11);
  r.started_at = At(12);
  r.completed_at = At(13);
  r.failed_at = At(14);
  r.task = CompositeTask();
  r.error = "boom";
  r.reason = FailReason::kExit;
  r.exit_code = 75;
  r.result = "{\"x\": 1}";
  r.node_id = NewId();
  r.progress = 12.25;
  r.redelivered = 2;
  r.each_size = 7;
  r.each_index = 5;
  r.completions = 4;
  r.subjob_id = NewId();
  r.steps = "c.rsfpx";
  return r;
}

inline LogPart NewLogPart(const TaskRecord& task, int number, TimePoint created_at) {
  LogPart part;
  part.id = NewId();
  part.task_id = task.id;
  part.job_id = task.job_id;
  part.number = number;
  part.contents = "line " + std::to_string(number) + "\n";
  part.created_at = created_at;
  return part;
}

template <typename T>
std::vector<std::string> Ids(const std::vector<T>& items) {
  std::vector<std::string> ids;
  for (const T& item : items) ids.push_back(item.id);
  return ids;
}

// The ids among `items` that are in `mine`, in their order: a shared database holds rows
// of other tests too.
template <typename T>
std::vector<std::string> IdsAmong(const std::vector<T>& items,
                                  const std::vector<std::string>& mine) {
  std::set<std::string> wanted(mine.begin(), mine.end());
  std::vector<std::string> ids;
  for (const T& item : items) {
    if (wanted.count(item.id) > 0) ids.push_back(item.id);
  }
  return ids;
}

}  // namespace datastore_conformance

class DatastoreConformanceTest : public ::testing::TestWithParam<DatastoreFactory> {
 protected:
  void SetUp() override {
    store_ = GetParam().make();
    ASSERT_NE(store_, nullptr) << "the factory failed to open a datastore";
  }

  Datastore& ds() { return *store_; }

  // Closes and reopens the store when the factory supports it: what follows reads what
  // the database kept.
  void Reopen() {
    if (!GetParam().reopen) return;
    store_ = GetParam().reopen(std::move(store_));
    ASSERT_NE(store_, nullptr) << "the factory failed to reopen the datastore";
  }

  // Creates a job with one task row, returning both.
  std::pair<JobRecord, TaskRecord> MakeJobWithTask() {
    using namespace datastore_conformance;
    JobRecord job = NewJob(SimpleJob("j " + UniqueWord()), At(0));
    TaskRecord task = NewTask(job.id, 1, At(0));
    EXPECT_TRUE(ds().CreateJob(job).ok());
    EXPECT_TRUE(ds().CreateTask(task).ok());
    return {job, task};
  }

  std::unique_ptr<Datastore> store_;
};

namespace datastore_conformance {

inline Status Ok() { return Status::Ok(); }

// Unwraps a Result into `decl` or returns its error (inside a Transact body).
#define BATON_ASSIGN_OR_RETURN_CONFORMANCE(decl, expr)    \
  auto BATON_CONF_CONCAT(result_, __LINE__) = (expr);     \
  if (!BATON_CONF_CONCAT(result_, __LINE__).ok()) {       \
    return BATON_CONF_CONCAT(result_, __LINE__).status(); \
  }                                                       \
  decl = std::move(*BATON_CONF_CONCAT(result_, __LINE__))
#define BATON_CONF_CONCAT_INNER(a, b) a##b
#define BATON_CONF_CONCAT(a, b) BATON_CONF_CONCAT_INNER(a, b)

// For ASSERT_TRUE(IsOk(...)): prints the status when it is not OK.
inline ::testing::AssertionResult IsOk(const Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.ToString();
}

// ---- Jobs ---------------------------------------------------------------------------

TEST_P(DatastoreConformanceTest, JobRoundTripsEveryField) {
  JobRecord job = FullJobRecord();
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  Reopen();
  Result<JobRecord> got = ds().GetJob(job.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, job);
  EXPECT_EQ(got->context, job.context);
  EXPECT_EQ(got->delete_at, job.delete_at);
}

TEST_P(DatastoreConformanceTest, JobWithUnsetOptionalsRoundTrips) {
  JobRecord job = NewJob(SimpleJob("bare " + UniqueWord()), At(5));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  Reopen();
  Result<JobRecord> got = ds().GetJob(job.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, job);
  EXPECT_FALSE(got->started_at.has_value());
  EXPECT_FALSE(got->delete_at.has_value());
  EXPECT_EQ(got->context, nlohmann::json::object());
}

TEST_P(DatastoreConformanceTest, CreatingATakenJobIdFailsAlreadyExists) {
  JobRecord job = NewJob(SimpleJob("dup"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  JobRecord again = NewJob(SimpleJob("another"), At(1));
  again.id = job.id;
  EXPECT_EQ(ds().CreateJob(again).code(), StatusCode::kAlreadyExists);
  Reopen();
  EXPECT_EQ(ds().GetJob(job.id)->job.name, "dup");
}

TEST_P(DatastoreConformanceTest, UnknownJobIsNotFound) {
  std::string id = NewId();
  EXPECT_EQ(ds().GetJob(id).status().code(), StatusCode::kNotFound);
  bool called = false;
  Status status = ds().UpdateJob(id, [&](JobRecord&) {
    called = true;
    return Ok();
  });
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_FALSE(called);
  EXPECT_EQ(ds().DeleteJob(id).code(), StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, UpdateJobModifiesAndPersists) {
  JobRecord job = FullJobRecord();
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  ASSERT_TRUE(IsOk(ds().UpdateJob(job.id, [&](JobRecord& r) {
    EXPECT_EQ(r, job);  // the modifier sees the stored row
    r.state = JobState::kCompleted;
    r.completed_at = At(99);
    r.failed_at.reset();
    r.progress = 100;
    r.position = 3;
    r.result = "done";
    r.context["tasks"]["second"] = {{"nested", 1}};
    return Ok();
  })));
  Reopen();
  JobRecord want = job;
  want.state = JobState::kCompleted;
  want.completed_at = At(99);
  want.failed_at.reset();
  want.progress = 100;
  want.position = 3;
  want.result = "done";
  want.context["tasks"]["second"] = {{"nested", 1}};
  Result<JobRecord> got = ds().GetJob(job.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, want);
}

TEST_P(DatastoreConformanceTest, UpdateJobCanChangeTheDefinition) {
  std::string word = UniqueWord();
  std::string tag = UniqueWord();
  JobRecord job = NewJob(SimpleJob("before"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  ASSERT_TRUE(IsOk(ds().UpdateJob(job.id, [&](JobRecord& r) {
    r.job.name = "after " + word;
    r.job.tags = {tag};
    r.job.tasks.push_back(RunnableTask("second"));
    return Ok();
  })));
  Reopen();
  Result<JobRecord> got = ds().GetJob(job.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->job.name, "after " + word);
  EXPECT_EQ(got->job.tasks.size(), 2u);
  // What search looks at follows the definition.
  EXPECT_EQ(ds().ListJobs({.q = word})->total_items, 1);
  EXPECT_EQ(ds().ListJobs({.q = "tag:" + tag})->total_items, 1);
}

TEST_P(DatastoreConformanceTest, FailingJobModifierLeavesTheRowUnchanged) {
  JobRecord job = FullJobRecord();
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  Status status = ds().UpdateJob(job.id, [](JobRecord& r) {
    r.state = JobState::kFailed;
    r.error = "half-done change";
    return FailedPrecondition("not now");
  });
  EXPECT_EQ(status, FailedPrecondition("not now"));
  Reopen();
  EXPECT_EQ(*ds().GetJob(job.id), job);
}

TEST_P(DatastoreConformanceTest, ConcurrentJobUpdatesLoseNothing) {
  JobRecord job = NewJob(SimpleJob("counter"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  constexpr int kThreads = 8;
  constexpr int kIncrements = 100;
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kIncrements; ++i) {
          Status s = ds().UpdateJob(job.id, [](JobRecord& r) {
            r.progress += 1;
            return Status::Ok();
          });
          if (!s.ok()) failures.fetch_add(1);
        }
      });
    }
  }
  EXPECT_EQ(failures.load(), 0);
  Reopen();
  EXPECT_EQ(ds().GetJob(job.id)->progress, kThreads * kIncrements);
}

// ---- Listing and search -------------------------------------------------------------

TEST_P(DatastoreConformanceTest, ListJobsIsNewestFirstInPages) {
  std::string word = UniqueWord();
  std::vector<std::string> ids;  // oldest first
  for (int i = 0; i < 7; ++i) {
    JobRecord job = NewJob(SimpleJob("list " + word + " " + std::to_string(i)), At(i * 1000));
    ASSERT_TRUE(IsOk(ds().CreateJob(job)));
    ids.push_back(job.id);
  }
  Reopen();
  Result<Page<JobRecord>> first = ds().ListJobs({.q = word, .page = 1, .size = 3});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->total_items, 7);
  EXPECT_EQ(first->total_pages, 3);
  EXPECT_EQ(first->number, 1);
  EXPECT_EQ(first->size, 3);
  EXPECT_EQ(Ids(first->items), (std::vector<std::string>{ids[6], ids[5], ids[4]}));

  Result<Page<JobRecord>> last = ds().ListJobs({.q = word, .page = 3, .size = 3});
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->number, 3);
  EXPECT_EQ(Ids(last->items), (std::vector<std::string>{ids[0]}));

  Result<Page<JobRecord>> beyond = ds().ListJobs({.q = word, .page = 9, .size = 3});
  ASSERT_TRUE(beyond.ok());
  EXPECT_TRUE(beyond->items.empty());
  EXPECT_EQ(beyond->total_items, 7);

  // Items are whole records.
  EXPECT_EQ(first->items[0], *ds().GetJob(ids[6]));
}

TEST_P(DatastoreConformanceTest, ListJobsWithStatesListsAndCountsOnlyJobsInThoseStates) {
  std::string word = UniqueWord();
  std::vector<std::string> failed, running;
  for (int i = 0; i < 6; ++i) {
    JobState state = i % 3 == 0   ? JobState::kFailed
                     : i % 3 == 1 ? JobState::kRunning
                                  : JobState::kCompleted;
    JobRecord job = NewJob(SimpleJob("states " + word), At(i * 1000), state);
    ASSERT_TRUE(IsOk(ds().CreateJob(job)));
    if (state == JobState::kFailed) failed.insert(failed.begin(), job.id);
    if (state == JobState::kRunning) running.insert(running.begin(), job.id);
  }
  Reopen();
  Result<Page<JobRecord>> only_failed =
      ds().ListJobs({.q = word, .states = {JobState::kFailed}, .page = 1, .size = 10});
  ASSERT_TRUE(only_failed.ok()) << only_failed.status().ToString();
  EXPECT_EQ(only_failed->total_items, 2);
  EXPECT_EQ(Ids(only_failed->items), failed);
  Result<Page<JobRecord>> two = ds().ListJobs(
      {.q = word, .states = {JobState::kRunning, JobState::kFailed}, .page = 1, .size = 10});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->total_items, 4);
  Result<Page<JobRecord>> none =
      ds().ListJobs({.q = word, .states = {JobState::kCancelled}, .page = 1, .size = 10});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->total_items, 0);
  EXPECT_TRUE(none->items.empty());
}

TEST_P(DatastoreConformanceTest, CountJobsEndedSinceCountsCompletedAndFailedAtOrAfterATime) {
  // Far past every other test's times, so that only these rows count.
  const TimePoint base = At(0) + std::chrono::hours(24 * 365 * 50);
  Result<EndedCounts> before = ds().CountJobsEndedSince(base);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  auto ended = [&](JobState state, TimePoint at) {
    JobRecord job = NewJob(SimpleJob("ended"), at - std::chrono::minutes(5), state);
    (state == JobState::kCompleted ? job.completed_at : job.failed_at) = at;
    ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  };
  ended(JobState::kCompleted, base - std::chrono::seconds(1));  // before the window
  ended(JobState::kCompleted, base);                            // its first instant
  ended(JobState::kCompleted, base + std::chrono::minutes(30));
  ended(JobState::kFailed, base + std::chrono::minutes(10));
  ended(JobState::kFailed, base - std::chrono::hours(2));
  ASSERT_TRUE(IsOk(ds().CreateJob(NewJob(SimpleJob("running"), base, JobState::kRunning))));
  Reopen();
  Result<EndedCounts> after = ds().CountJobsEndedSince(base);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->completed - before->completed, 2);
  EXPECT_EQ(after->failed - before->failed, 1);
}

TEST_P(DatastoreConformanceTest, ListJobsClampsPageAndSize) {
  std::string word = UniqueWord();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(IsOk(ds().CreateJob(NewJob(SimpleJob("clamp " + word), At(i)))));
  }
  Result<Page<JobRecord>> page = ds().ListJobs({.q = word, .page = 0, .size = 0});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->number, 1);
  EXPECT_EQ(page->size, 1);
  EXPECT_EQ(page->items.size(), 1u);
  EXPECT_EQ(page->total_pages, 3);

  page = ds().ListJobs({.q = word, .page = -5, .size = 1000});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->number, 1);
  EXPECT_EQ(page->size, 100);
  EXPECT_EQ(page->items.size(), 3u);
  EXPECT_EQ(page->total_pages, 1);
}

TEST_P(DatastoreConformanceTest, SearchMatchesAWordInNameOrDescription) {
  std::string word = UniqueWord();
  JobRecord by_name = NewJob(SimpleJob("nightly " + word + "-backup"), At(2));
  JobRecord by_description = NewJob(SimpleJob("other", "runs the " + word + " report"), At(1));
  JobRecord neither = NewJob(SimpleJob("unrelated " + UniqueWord()), At(3));
  for (const JobRecord& job : {by_name, by_description, neither}) {
    ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  }
  Reopen();
  Result<Page<JobRecord>> page = ds().ListJobs({.q = word});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(Ids(page->items), (std::vector<std::string>{by_name.id, by_description.id}));
  EXPECT_EQ(page->total_items, 2);
}

TEST_P(DatastoreConformanceTest, SearchMatchesState) {
  std::string word = UniqueWord();
  JobRecord done = NewJob(SimpleJob("s " + word), At(1), JobState::kCompleted);
  JobRecord running = NewJob(SimpleJob("s " + word), At(2), JobState::kRunning);
  ASSERT_TRUE(IsOk(ds().CreateJob(done)));
  ASSERT_TRUE(IsOk(ds().CreateJob(running)));
  Reopen();
  EXPECT_EQ(Ids(ds().ListJobs({.q = word + " COMPLETED"})->items),
            std::vector<std::string>{done.id});
  EXPECT_EQ(Ids(ds().ListJobs({.q = "completed " + word})->items),
            std::vector<std::string>{done.id});
  EXPECT_EQ(Ids(ds().ListJobs({.q = word + " Running"})->items),
            std::vector<std::string>{running.id});
}

TEST_P(DatastoreConformanceTest, SearchMatchesTag) {
  std::string tag = UniqueWord();
  JobRecord tagged = NewJob(SimpleJob("t", "", {"etl", tag}), At(1));
  JobRecord named = NewJob(SimpleJob("named " + tag), At(2));  // the word, not the tag
  ASSERT_TRUE(IsOk(ds().CreateJob(tagged)));
  ASSERT_TRUE(IsOk(ds().CreateJob(named)));
  Reopen();
  Result<Page<JobRecord>> page = ds().ListJobs({.q = "tag:" + tag});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(Ids(page->items), std::vector<std::string>{tagged.id});
  EXPECT_EQ(page->total_items, 1);
  EXPECT_TRUE(ds().ListJobs({.q = "tag:" + tag + "x"})->items.empty());
}

TEST_P(DatastoreConformanceTest, SearchAndsWordsCaseInsensitively) {
  std::string a = UniqueWord();
  std::string b = UniqueWord();
  JobRecord both = NewJob(SimpleJob("Alpha " + a, "and " + b), At(1));
  JobRecord only_a = NewJob(SimpleJob("Alpha " + a), At(2));
  JobRecord only_b = NewJob(SimpleJob("Beta " + b), At(3));
  for (const JobRecord& job : {both, only_a, only_b}) ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  Reopen();
  std::string upper_a = a;
  std::transform(upper_a.begin(), upper_a.end(), upper_a.begin(),
                 [](char c) { return static_cast<char>(std::toupper(c)); });
  EXPECT_EQ(Ids(ds().ListJobs({.q = upper_a + "  " + b})->items),
            std::vector<std::string>{both.id});
  EXPECT_EQ(Ids(ds().ListJobs({.q = upper_a})->items),
            (std::vector<std::string>{only_a.id, both.id}));
  EXPECT_EQ(Ids(ds().ListJobs({.q = "ALPHA " + a + " tag:etl"})->items),
            std::vector<std::string>{});
}

TEST_P(DatastoreConformanceTest, SearchTreatsWildcardsLiterally) {
  std::string word = UniqueWord();
  JobRecord percent = NewJob(SimpleJob("rate 100% " + word), At(1));
  JobRecord digits = NewJob(SimpleJob("rate 1000 " + word), At(2));
  JobRecord underscore = NewJob(SimpleJob("a_b " + word), At(3));
  JobRecord letters = NewJob(SimpleJob("axb " + word), At(4));
  for (const JobRecord& job : {percent, digits, underscore, letters}) {
    ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  }
  EXPECT_EQ(Ids(ds().ListJobs({.q = word + " 100%"})->items), std::vector<std::string>{percent.id});
  EXPECT_EQ(Ids(ds().ListJobs({.q = word + " a_b"})->items),
            std::vector<std::string>{underscore.id});
}

// Issue 14, item 8: the datastore bounds a search itself (SQLite refused ~1,000 words
// with "Expression tree is too large", an internal error), whoever calls it.
TEST_P(DatastoreConformanceTest, SearchOfTooManyWordsIsInvalidNotAnError) {
  std::string word = UniqueWord();
  JobRecord job = NewJob(SimpleJob(word, "", {"t" + word}), At(1));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  std::string most = word;
  for (int i = 1; i < 100; ++i) most += i % 2 ? " tag:t" + word : " " + word;
  Result<Page<JobRecord>> page = ds().ListJobs({.q = most});
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_EQ(Ids(page->items), std::vector<std::string>{job.id});
  for (const std::string& extra : {" " + word, " tag:t" + word}) {
    Result<Page<JobRecord>> over = ds().ListJobs({.q = most + extra});
    ASSERT_FALSE(over.ok());
    EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(over.status().message(), "q has 101 words; the limit is 100");
  }
  std::string thousand;
  for (int i = 0; i < 1100; ++i) thousand += "tag:x ";
  EXPECT_EQ(ds().ListJobs({.q = thousand}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ds().ListJobs({.q = std::string(4097, 'b')}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ds().ListJobs({.q = word + " \xff"}).status().code(), StatusCode::kInvalidArgument);
}

// Issue 14, item 3: a job is refused, whole, when its JSON as stored (definition, tags
// and context) is over the datastore's max_job_bytes (32 MiB by default), whichever path
// creates it (a sub-job built from templates, say).
TEST_P(DatastoreConformanceTest, JobOverTheStoredSizeLimitIsRefusedAndNotStored) {
  const std::size_t limit = 32 << 20;
  Job big = SimpleJob("big " + UniqueWord());
  big.inputs = {{"a", std::string(limit / 2, 'x')}};
  JobRecord record = NewJob(big, At(1));
  record.context = {{"inputs", big.inputs}};  // as the scheduler stores it: twice
  Status created = ds().CreateJob(record);
  EXPECT_EQ(created.code(), StatusCode::kInvalidArgument) << created.message();
  EXPECT_TRUE(created.message().starts_with("the job is ")) << created.message();
  EXPECT_TRUE(created.message().ends_with(
      " bytes as stored (its definition, tags and context as JSON); the limit is 33554432 "
      "(datastore.max_job_bytes)"))
      << created.message();
  EXPECT_EQ(ds().GetJob(record.id).status().code(), StatusCode::kNotFound);
  // Just under: stored.
  big.inputs = {{"a", std::string(limit / 4, 'x')}};
  record = NewJob(big, At(2));
  record.context = {{"inputs", big.inputs}};
  EXPECT_TRUE(IsOk(ds().CreateJob(record)));
}

TEST_P(DatastoreConformanceTest, JobsInStateAreOldestFirst) {
  JobRecord running_new = NewJob(SimpleJob("r2"), At(20), JobState::kRunning);
  JobRecord scheduled = NewJob(SimpleJob("s"), At(10), JobState::kScheduled);
  JobRecord running_old = NewJob(SimpleJob("r1"), At(5), JobState::kRunning);
  JobRecord done = NewJob(SimpleJob("c"), At(1), JobState::kCompleted);
  for (const JobRecord& job : {running_new, scheduled, running_old, done}) {
    ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  }
  Reopen();
  std::vector<std::string> mine = {running_new.id, scheduled.id, running_old.id, done.id};
  Result<std::vector<JobRecord>> jobs =
      ds().JobsInState({JobState::kRunning, JobState::kScheduled});
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ(IdsAmong(*jobs, mine),
            (std::vector<std::string>{running_old.id, scheduled.id, running_new.id}));
  EXPECT_TRUE(ds().JobsInState({})->empty());
}

TEST_P(DatastoreConformanceTest, CountStatesCountsJobsAndTaskRowsByState) {
  // Other tests' rows may share the database: what is counted is what these add.
  Result<StateCounts> before = ds().CountStates();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  JobRecord running = NewJob(SimpleJob("r"), At(20), JobState::kRunning);
  JobRecord failed_a = NewJob(SimpleJob("f1"), At(21), JobState::kFailed);
  JobRecord failed_b = NewJob(SimpleJob("f2"), At(22), JobState::kFailed);
  for (const JobRecord& job : {running, failed_a, failed_b}) {
    ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  }
  for (TaskState state : {TaskState::kRunning, TaskState::kRunning, TaskState::kCreated}) {
    TaskRecord task = FullTaskRecord(running.id);
    task.state = state;
    ASSERT_TRUE(IsOk(ds().CreateTask(task)));
  }
  Reopen();
  Result<StateCounts> after = ds().CountStates();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  auto delta_job = [&](JobState s) { return after->jobs[s] - before->jobs[s]; };
  auto delta_task = [&](TaskState s) { return after->tasks[s] - before->tasks[s]; };
  EXPECT_EQ(delta_job(JobState::kRunning), 1);
  EXPECT_EQ(delta_job(JobState::kFailed), 2);
  EXPECT_EQ(delta_job(JobState::kCompleted), 0);
  EXPECT_EQ(delta_task(TaskState::kRunning), 2);
  EXPECT_EQ(delta_task(TaskState::kCreated), 1);
  EXPECT_EQ(delta_task(TaskState::kFailed), 0);
  // CountRunning agrees with CountStates.
  Result<RunningCounts> now_running = ds().CountRunning();
  ASSERT_TRUE(now_running.ok()) << now_running.status().ToString();
  EXPECT_EQ(now_running->jobs, after->jobs[JobState::kRunning]);
  EXPECT_EQ(now_running->tasks, after->tasks[TaskState::kRunning]);
}

// ---- Tasks --------------------------------------------------------------------------

TEST_P(DatastoreConformanceTest, TaskRoundTripsEveryField) {
  JobRecord job = NewJob(SimpleJob("with a composite"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  TaskRecord task = FullTaskRecord(job.id);
  ASSERT_TRUE(IsOk(ds().CreateTask(task)));
  TaskRecord runnable = FullTaskRecord(job.id);
  runnable.task = FullRunnableTask();
  runnable.reason = FailReason::kOutOfMemory;  // a reason without an exit code
  runnable.exit_code.reset();
  ASSERT_TRUE(IsOk(ds().CreateTask(runnable)));
  // Many at once (PostgreSQL's arrays) keep it too.
  TaskRecord batched = FullTaskRecord(job.id);
  batched.reason = FailReason::kTimeout;
  batched.exit_code.reset();
  ASSERT_TRUE(IsOk(ds().CreateTasks({batched, FullTaskRecord(job.id)})));
  Reopen();
  EXPECT_EQ(*ds().GetTask(batched.id), batched);
  Result<TaskRecord> got = ds().GetTask(task.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, task);
  EXPECT_EQ(*ds().GetTask(runnable.id), runnable);
}

TEST_P(DatastoreConformanceTest, CreatingATakenTaskIdFailsAlreadyExists) {
  auto [job, task] = MakeJobWithTask();
  TaskRecord again = NewTask(job.id, 2, At(1));
  again.id = task.id;
  EXPECT_EQ(ds().CreateTask(again).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ds().CreateTasks({NewTask(job.id, 3, At(2)), again}).code(),
            StatusCode::kAlreadyExists);
  Reopen();
  EXPECT_EQ(ds().GetTask(task.id)->position, 1);
}

TEST_P(DatastoreConformanceTest, CreateTasksIsAllOrNothing) {
  auto [job, task] = MakeJobWithTask();
  TaskRecord fresh = NewTask(job.id, 2, At(1));
  TaskRecord taken = NewTask(job.id, 3, At(2));
  taken.id = task.id;
  EXPECT_EQ(ds().CreateTasks({fresh, taken}).code(), StatusCode::kAlreadyExists);
  Reopen();
  EXPECT_EQ(ds().GetTask(fresh.id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ds().JobTasks(job.id)->size(), 1u);
}

TEST_P(DatastoreConformanceTest, UnknownTaskIsNotFound) {
  std::string id = NewId();
  EXPECT_EQ(ds().GetTask(id).status().code(), StatusCode::kNotFound);
  bool called = false;
  Status status = ds().UpdateTask(id, [&](TaskRecord&) {
    called = true;
    return Ok();
  });
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_FALSE(called);
}

TEST_P(DatastoreConformanceTest, UpdateTaskModifiesAndPersists) {
  JobRecord job = NewJob(SimpleJob("j"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  TaskRecord task = FullTaskRecord(job.id);
  ASSERT_TRUE(IsOk(ds().CreateTask(task)));
  TaskRecord want = task;
  want.state = TaskState::kCompleted;
  want.completed_at = At(500);
  want.scheduled_at.reset();
  want.result = "42";
  want.node_id = "";
  want.completions = 9;
  want.steps = "ccrss";
  want.task.parallel->tasks.pop_back();  // the definition may change too
  want.task.description = "changed";
  ASSERT_TRUE(IsOk(ds().UpdateTask(task.id, [&](TaskRecord& r) {
    EXPECT_EQ(r, task);
    r = want;
    return Ok();
  })));
  Reopen();
  Result<TaskRecord> got = ds().GetTask(task.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, want);
}

TEST_P(DatastoreConformanceTest, FailingTaskModifierLeavesTheRowUnchanged) {
  JobRecord job = NewJob(SimpleJob("j"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  TaskRecord task = FullTaskRecord(job.id);
  ASSERT_TRUE(IsOk(ds().CreateTask(task)));
  Status status = ds().UpdateTask(task.id, [](TaskRecord& r) {
    r.state = TaskState::kFailed;
    r.completions = 1000;
    return InvalidArgument("rejected");
  });
  EXPECT_EQ(status, InvalidArgument("rejected"));
  Reopen();
  EXPECT_EQ(*ds().GetTask(task.id), task);
}

TEST_P(DatastoreConformanceTest, ConcurrentTaskUpdatesLoseNothing) {
  auto [job, task] = MakeJobWithTask();
  constexpr int kThreads = 8;
  constexpr int kIncrements = 100;
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, id = task.id] {
        for (int i = 0; i < kIncrements; ++i) {
          Status s = ds().UpdateTask(id, [](TaskRecord& r) {
            ++r.completions;
            return Status::Ok();
          });
          if (!s.ok()) failures.fetch_add(1);
        }
      });
    }
  }
  EXPECT_EQ(failures.load(), 0);
  Reopen();
  EXPECT_EQ(ds().GetTask(task.id)->completions, kThreads * kIncrements);
}

TEST_P(DatastoreConformanceTest, QueriesFollowWhatUpdatesChange) {
  // Every column a query selects or orders by, changed by updates that change it alone
  // or with others: what the queries see follows.
  JobRecord job = NewJob(SimpleJob("j"), At(0));
  JobRecord other_job = NewJob(SimpleJob("k"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  ASSERT_TRUE(IsOk(ds().CreateJob(other_job)));
  std::string parent = NewId();
  TaskRecord a = NewTask(job.id, 1, At(1));
  TaskRecord b = NewTask(job.id, 2, At(2));
  b.parent_id = parent;
  ASSERT_TRUE(IsOk(ds().CreateTask(a)));
  ASSERT_TRUE(IsOk(ds().CreateTask(b)));

  auto in_state = [&](TaskState state) {
    auto rows = ds().TasksInState({state});
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? IdsAmong(*rows, {a.id, b.id}) : std::vector<std::string>{};
  };
  ASSERT_TRUE(IsOk(ds().UpdateTask(a.id, [](TaskRecord& r) {
    r.state = TaskState::kRunning;  // the state alone
    return Ok();
  })));
  ASSERT_TRUE(IsOk(ds().UpdateTask(b.id, [](TaskRecord& r) {
    r.progress = 50;  // neither the state nor any key
    return Ok();
  })));
  EXPECT_EQ(in_state(TaskState::kRunning), (std::vector<std::string>{a.id}));
  EXPECT_EQ(in_state(TaskState::kPending), (std::vector<std::string>{b.id}));
  EXPECT_EQ(Ids(*ds().ChildTasks(parent)), (std::vector<std::string>{b.id}));

  // b moves: to another position, parent and creation time (its state unchanged)...
  ASSERT_TRUE(IsOk(ds().UpdateTask(b.id, [&](TaskRecord& r) {
    r.position = 0;
    r.parent_id = "";
    r.created_at = At(0);
    return Ok();
  })));
  EXPECT_EQ(Ids(*ds().JobTasks(job.id)), (std::vector<std::string>{b.id, a.id}));
  EXPECT_TRUE(ds().ChildTasks(parent)->empty());
  EXPECT_EQ(in_state(TaskState::kPending), (std::vector<std::string>{b.id}));
  // ... then to another job, and a under a parent, each with a new state.
  ASSERT_TRUE(IsOk(ds().UpdateTask(b.id, [&](TaskRecord& r) {
    r.job_id = other_job.id;
    r.state = TaskState::kCompleted;
    return Ok();
  })));
  ASSERT_TRUE(IsOk(ds().UpdateTask(a.id, [&](TaskRecord& r) {
    r.parent_id = parent;
    r.state = TaskState::kFailed;
    return Ok();
  })));
  Reopen();
  EXPECT_EQ(Ids(*ds().JobTasks(job.id)), (std::vector<std::string>{a.id}));
  EXPECT_EQ(Ids(*ds().JobTasks(other_job.id)), (std::vector<std::string>{b.id}));
  EXPECT_EQ(Ids(*ds().ChildTasks(parent)), (std::vector<std::string>{a.id}));
  EXPECT_TRUE(in_state(TaskState::kRunning).empty());
  EXPECT_TRUE(in_state(TaskState::kPending).empty());
  EXPECT_EQ(in_state(TaskState::kCompleted), (std::vector<std::string>{b.id}));
  EXPECT_EQ(in_state(TaskState::kFailed), (std::vector<std::string>{a.id}));

  // Jobs: the state alone, then neither, then the creation time.
  auto jobs_in = [&](JobState state) {
    return IdsAmong(*ds().JobsInState({state}), {job.id, other_job.id});
  };
  ASSERT_TRUE(IsOk(ds().UpdateJob(job.id, [](JobRecord& r) {
    r.state = JobState::kRunning;
    return Ok();
  })));
  ASSERT_TRUE(IsOk(ds().UpdateJob(other_job.id, [](JobRecord& r) {
    r.position = 2;
    return Ok();
  })));
  EXPECT_EQ(jobs_in(JobState::kRunning), (std::vector<std::string>{job.id}));
  EXPECT_EQ(jobs_in(JobState::kPending), (std::vector<std::string>{other_job.id}));
  ASSERT_TRUE(IsOk(ds().UpdateJob(other_job.id, [](JobRecord& r) {
    r.created_at = At(-1000);
    r.state = JobState::kRunning;
    return Ok();
  })));
  Reopen();
  EXPECT_EQ(jobs_in(JobState::kRunning), (std::vector<std::string>{other_job.id, job.id}));
  EXPECT_TRUE(jobs_in(JobState::kPending).empty());
  EXPECT_EQ(ds().GetJob(other_job.id)->position, 2);
}

TEST_P(DatastoreConformanceTest, ConcurrentWritesFailOnlyAlone) {
  // Writers racing each other, half of them with a taken id: each call gets its own
  // outcome, whatever it was committed alongside.
  auto [job, existing] = MakeJobWithTask();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  std::vector<std::vector<std::string>> created(kThreads);
  std::atomic<int> wrong{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t, job_id = job.id, taken = existing.id] {
        for (int i = 0; i < kPerThread; ++i) {
          TaskRecord task = NewTask(job_id, 2, At(t * 1000 + i));
          bool duplicate = (i % 2) == 1;
          if (duplicate) task.id = taken;
          Status s = ds().CreateTask(task);
          StatusCode want = duplicate ? StatusCode::kAlreadyExists : StatusCode::kOk;
          if (s.code() != want) wrong.fetch_add(1);
          if (!duplicate) created[static_cast<std::size_t>(t)].push_back(task.id);
        }
      });
    }
  }
  EXPECT_EQ(wrong.load(), 0);
  Reopen();
  std::size_t expected = 1;
  for (const auto& ids : created) {
    expected += ids.size();
    for (const std::string& id : ids) EXPECT_TRUE(ds().GetTask(id).ok()) << id;
  }
  EXPECT_EQ(ds().JobTasks(job.id)->size(), expected);
}

TEST_P(DatastoreConformanceTest, JobTasksAreOrderedByPositionThenCreatedAtThenId) {
  JobRecord job = NewJob(SimpleJob("ordered"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  TaskRecord p2 = NewTask(job.id, 2, At(1));
  TaskRecord p1_late = NewTask(job.id, 1, At(50));
  TaskRecord p1_early = NewTask(job.id, 1, At(10));
  TaskRecord tie_a = NewTask(job.id, 1, At(30));
  TaskRecord tie_b = NewTask(job.id, 1, At(30));
  tie_a.id = "0" + tie_a.id.substr(1);
  tie_b.id = "f" + tie_b.id.substr(1);
  ASSERT_TRUE(IsOk(ds().CreateTasks({p2, p1_late, tie_b})));
  ASSERT_TRUE(IsOk(ds().CreateTask(p1_early)));
  ASSERT_TRUE(IsOk(ds().CreateTask(tie_a)));
  MakeJobWithTask();  // another job's rows stay out
  Reopen();
  Result<std::vector<TaskRecord>> tasks = ds().JobTasks(job.id);
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  EXPECT_EQ(Ids(*tasks),
            (std::vector<std::string>{p1_early.id, tie_a.id, tie_b.id, p1_late.id, p2.id}));
  EXPECT_EQ((*tasks)[4], p2);
  EXPECT_TRUE(ds().JobTasks(NewId())->empty());
}

TEST_P(DatastoreConformanceTest, ChildTasksAreTheCompositesChildrenOldestFirst) {
  auto [job, parent] = MakeJobWithTask();
  TaskRecord second = NewTask(job.id, 1, At(20));
  TaskRecord first = NewTask(job.id, 1, At(10));
  TaskRecord grandchild = NewTask(job.id, 1, At(5));
  second.parent_id = parent.id;
  first.parent_id = parent.id;
  grandchild.parent_id = first.id;
  ASSERT_TRUE(IsOk(ds().CreateTasks({second, first, grandchild})));
  Reopen();
  Result<std::vector<TaskRecord>> children = ds().ChildTasks(parent.id);
  ASSERT_TRUE(children.ok()) << children.status().ToString();
  EXPECT_EQ(Ids(*children), (std::vector<std::string>{first.id, second.id}));
  EXPECT_EQ(Ids(*ds().ChildTasks(first.id)), std::vector<std::string>{grandchild.id});
  EXPECT_TRUE(ds().ChildTasks(grandchild.id)->empty());
}

TEST_P(DatastoreConformanceTest, TasksInStateAreOldestFirstAcrossJobs) {
  auto [job1, a] = MakeJobWithTask();
  auto [job2, b] = MakeJobWithTask();
  TaskRecord running_late = NewTask(job1.id, 2, At(30), TaskState::kRunning);
  TaskRecord scheduled = NewTask(job2.id, 2, At(20), TaskState::kScheduled);
  TaskRecord running_early = NewTask(job2.id, 3, At(10), TaskState::kRunning);
  TaskRecord done = NewTask(job1.id, 3, At(5), TaskState::kCompleted);
  ASSERT_TRUE(IsOk(ds().CreateTasks({running_late, done})));
  ASSERT_TRUE(IsOk(ds().CreateTasks({scheduled, running_early})));
  Reopen();
  std::vector<std::string> mine = {a.id,   b.id, running_late.id, scheduled.id, running_early.id,
                                   done.id};
  Result<std::vector<TaskRecord>> tasks =
      ds().TasksInState({TaskState::kRunning, TaskState::kScheduled});
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  EXPECT_EQ(IdsAmong(*tasks, mine),
            (std::vector<std::string>{running_early.id, scheduled.id, running_late.id}));
  EXPECT_TRUE(ds().TasksInState({})->empty());
}

// The withdrawn: the rows of paused jobs that never started.
TEST_P(DatastoreConformanceTest, WithdrawnTasksAreThePausedJobsRowsThatNeverStarted) {
  JobRecord paused = NewJob(SimpleJob("paused"), At(0));
  paused.state = JobState::kPaused;
  JobRecord running = NewJob(SimpleJob("running"), At(0));
  running.state = JobState::kRunning;
  ASSERT_TRUE(IsOk(ds().CreateJob(paused)));
  ASSERT_TRUE(IsOk(ds().CreateJob(running)));
  TaskRecord queued = NewTask(paused.id, 1, At(1), TaskState::kScheduled);
  TaskRecord held = NewTask(paused.id, 2, At(1), TaskState::kPending);
  TaskRecord started = NewTask(paused.id, 3, At(1), TaskState::kRunning);
  started.started_at = At(2);
  TaskRecord done = NewTask(paused.id, 4, At(1), TaskState::kCompleted);
  TaskRecord other = NewTask(running.id, 1, At(1), TaskState::kScheduled);
  ASSERT_TRUE(IsOk(ds().CreateTasks({queued, held, started, done, other})));
  Reopen();
  auto withdrawn = ds().WithdrawnTasks(1000);
  ASSERT_TRUE(withdrawn.ok()) << withdrawn.status().ToString();
  std::vector<std::string> mine;
  for (const std::string& id : *withdrawn) {
    if (id == queued.id || id == held.id || id == started.id || id == done.id || id == other.id) {
      mine.push_back(id);
    }
  }
  std::sort(mine.begin(), mine.end());
  std::vector<std::string> want = {queued.id, held.id};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(mine, want);
  EXPECT_TRUE(ds().WithdrawnTasks(0)->empty());
  ASSERT_TRUE(IsOk(ds().UpdateJobState(paused.id, [](JobRecord& j) {
    j.state = JobState::kRunning;
    return Ok();
  })));
  auto resumed = ds().WithdrawnTasks(1000);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  for (const std::string& id : *resumed) {
    EXPECT_NE(id, queued.id);
    EXPECT_NE(id, held.id);
  }
}

// The drops: rows cancelled since a time that never started, newest cancel first.
TEST_P(DatastoreConformanceTest, DroppedTasksAreTheCancelledRowsThatNeverStartedNewestFirst) {
  // Later than anything else in a shared database, this test's earlier runs in this
  // process (the other factories') included: each run's rows are an hour past the last's.
  static int runs = 0;
  const TimePoint since = At(0) + std::chrono::hours(24 * 365 * 60 + ++runs);
  JobRecord job = NewJob(SimpleJob("drops"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  auto cancelled = [&](int position, TimePoint at, bool started) {
    TaskRecord row = NewTask(job.id, position, At(1), TaskState::kCancelled);
    row.completed_at = at;
    if (started) row.started_at = At(2);
    return row;
  };
  TaskRecord first = cancelled(1, since + std::chrono::seconds(1), false);
  TaskRecord second = cancelled(2, since + std::chrono::seconds(2), false);
  TaskRecord ran = cancelled(3, since + std::chrono::seconds(3), true);
  TaskRecord before = cancelled(4, since - std::chrono::seconds(1), false);
  TaskRecord failed = NewTask(job.id, 5, At(1), TaskState::kFailed);
  failed.completed_at = since + std::chrono::seconds(4);
  ASSERT_TRUE(IsOk(ds().CreateTasks({first, second, ran, before, failed})));
  Reopen();
  auto drops = ds().DroppedTasks(since, 10);
  ASSERT_TRUE(drops.ok()) << drops.status().ToString();
  EXPECT_EQ(*drops, (std::vector<std::string>{second.id, first.id}));
  EXPECT_EQ(*ds().DroppedTasks(since, 1), std::vector<std::string>{second.id});
  EXPECT_TRUE(ds().DroppedTasks(since, 0)->empty());
  EXPECT_TRUE(ds().DroppedTasks(since + std::chrono::seconds(5), 10)->empty());
}

TEST_P(DatastoreConformanceTest, MarkScheduledMovesOnlyPendingAndCreatedRows) {
  JobRecord job = NewJob(SimpleJob("mark"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  TaskRecord pending = NewTask(job.id, 1, At(1), TaskState::kPending);
  TaskRecord created = NewTask(job.id, 1, At(2), TaskState::kCreated);
  TaskRecord running = NewTask(job.id, 1, At(3), TaskState::kRunning);
  TaskRecord done = NewTask(job.id, 1, At(4), TaskState::kCompleted);
  TaskRecord untouched = NewTask(job.id, 1, At(5), TaskState::kPending);  // not listed
  ASSERT_TRUE(IsOk(ds().CreateTasks({pending, created, running, done, untouched})));
  ASSERT_TRUE(IsOk(ds().MarkScheduled(
      {pending.id, created.id, running.id, done.id, "0123456789abcdef0123456789abcdef"}, At(9))));
  Reopen();
  for (TaskRecord* t : {&pending, &created}) {
    t->state = TaskState::kScheduled;
    t->scheduled_at = At(9);
  }
  for (const TaskRecord& want : {pending, created, running, done, untouched}) {
    auto got = ds().GetTask(want.id);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, want) << "task at " << want.created_at.time_since_epoch().count();
  }
  EXPECT_TRUE(IsOk(ds().MarkScheduled({}, At(10))));
  // Queries by state see the change.
  auto scheduled = ds().TasksInState({TaskState::kScheduled});
  ASSERT_TRUE(scheduled.ok());
  EXPECT_EQ(IdsAmong(*scheduled, {pending.id, created.id, running.id, done.id, untouched.id}),
            (std::vector<std::string>{pending.id, created.id}));
}

TEST_P(DatastoreConformanceTest, CancelTasksCancelsTheActiveRowsOfAJobInOneWrite) {
  JobRecord job = NewJob(SimpleJob("cancel"), At(0));
  JobRecord other = NewJob(SimpleJob("other"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  ASSERT_TRUE(IsOk(ds().CreateJob(other)));
  TaskRecord created = NewTask(job.id, 1, At(1), TaskState::kCreated);
  TaskRecord pending = NewTask(job.id, 1, At(2), TaskState::kPending);
  TaskRecord scheduled = NewTask(job.id, 1, At(3), TaskState::kScheduled);
  TaskRecord running = NewTask(job.id, 1, At(4), TaskState::kRunning);
  running.node_id = "node-1";
  running.subjob_id = "0123456789abcdef0123456789abcdef";
  TaskRecord done = NewTask(job.id, 1, At(5), TaskState::kCompleted);
  TaskRecord failed = NewTask(job.id, 1, At(6), TaskState::kFailed);
  TaskRecord skipped = NewTask(job.id, 1, At(7), TaskState::kSkipped);
  TaskRecord elsewhere = NewTask(other.id, 1, At(8), TaskState::kRunning);
  std::vector<TaskRecord> rows = {created, pending, scheduled, running,
                                  done,    failed,  skipped,   elsewhere};
  ASSERT_TRUE(IsOk(ds().CreateTasks(rows)));
  auto cancelled = ds().CancelTasks(job.id, "", At(9));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  std::vector<CancelledTask> got = *cancelled;
  std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  std::vector<CancelledTask> want = {
      {created.id, TaskState::kCreated, "", ""},
      {pending.id, TaskState::kPending, "", ""},
      {scheduled.id, TaskState::kScheduled, "", ""},
      {running.id, TaskState::kRunning, "node-1", running.subjob_id}};
  std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  EXPECT_EQ(got, want);
  Reopen();
  for (TaskRecord* t : {&created, &pending, &scheduled, &running}) {
    t->state = TaskState::kCancelled;
    t->completed_at = At(9);
  }
  for (const TaskRecord& row :
       {created, pending, scheduled, running, done, failed, skipped, elsewhere}) {
    auto stored = ds().GetTask(row.id);
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    EXPECT_EQ(*stored, row) << "task at " << row.created_at.time_since_epoch().count();
  }
  // Nothing is left to cancel; an unknown job has nothing.
  auto again = ds().CancelTasks(job.id, "", At(10));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  auto unknown = ds().CancelTasks("0123456789abcdef0123456789abcdef", "", At(10));
  ASSERT_TRUE(unknown.ok());
  EXPECT_TRUE(unknown->empty());
}

TEST_P(DatastoreConformanceTest, CancelTasksUnderARowCancelsOnlyItsDescendants) {
  JobRecord job = NewJob(SimpleJob("tree"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  TaskRecord group = NewTask(job.id, 1, At(1), TaskState::kRunning);
  TaskRecord child = NewTask(job.id, 1, At(2), TaskState::kScheduled);
  child.parent_id = group.id;
  TaskRecord inner = NewTask(job.id, 1, At(3), TaskState::kRunning);
  inner.parent_id = group.id;
  TaskRecord grandchild = NewTask(job.id, 1, At(4), TaskState::kCreated);
  grandchild.parent_id = inner.id;
  TaskRecord finished = NewTask(job.id, 1, At(5), TaskState::kCompleted);
  finished.parent_id = group.id;
  TaskRecord sibling = NewTask(job.id, 2, At(6), TaskState::kRunning);  // not below
  ASSERT_TRUE(IsOk(ds().CreateTasks({group, child, inner, grandchild, finished, sibling})));
  auto cancelled = ds().CancelTasks(job.id, group.id, At(9));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  std::vector<std::string> ids;
  for (const CancelledTask& t : *cancelled) ids.push_back(t.id);
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> want = {child.id, inner.id, grandchild.id};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ids, want);
  EXPECT_EQ(ds().GetTask(group.id)->state, TaskState::kRunning);
  EXPECT_EQ(ds().GetTask(sibling.id)->state, TaskState::kRunning);
  EXPECT_EQ(ds().GetTask(finished.id)->state, TaskState::kCompleted);
  EXPECT_EQ(ds().GetTask(grandchild.id)->state, TaskState::kCancelled);
  EXPECT_EQ(ds().GetTask(grandchild.id)->completed_at, At(9));
}

TEST_P(DatastoreConformanceTest, UpdateJobStateStoresTheStateFieldsAndKeepsTheRest) {
  JobRecord job = NewJob(SimpleJob("state only"), At(0));
  job.context["inputs"] = {{"k", "v"}};
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  ASSERT_TRUE(IsOk(ds().UpdateJobState(job.id, [&](JobRecord& j) {
    // The definition and context are not read.
    EXPECT_EQ(j.job, Job{});
    EXPECT_EQ(j.context, nlohmann::json::object());
    EXPECT_EQ(j.state, JobState::kPending);
    EXPECT_EQ(j.created_at, At(0));
    j.state = JobState::kFailed;
    j.started_at = At(1);
    j.failed_at = At(2);
    j.delete_at = At(3);
    j.position = 2;
    j.progress = 50;
    j.result = "r";
    j.error = "e";
    j.job.name = "ignored";
    j.context["ignored"] = true;
    return Status::Ok();
  })));
  Reopen();
  auto stored = ds().GetJob(job.id);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  JobRecord want = job;
  want.state = JobState::kFailed;
  want.started_at = At(1);
  want.failed_at = At(2);
  want.delete_at = At(3);
  want.position = 2;
  want.progress = 50;
  want.result = "r";
  want.error = "e";
  EXPECT_EQ(*stored, want);
  auto failed = ds().JobsInState({JobState::kFailed});
  ASSERT_TRUE(failed.ok());
  EXPECT_TRUE(std::any_of(failed->begin(), failed->end(),
                          [&](const JobRecord& j) { return j.id == job.id; }));
  // A failing modifier changes nothing; an unknown job is NotFound.
  EXPECT_EQ(ds().UpdateJobState(job.id, [](JobRecord&) { return Internal("no"); }).code(),
            StatusCode::kInternal);
  EXPECT_EQ(ds().GetJob(job.id)->error, "e");
  EXPECT_EQ(ds().UpdateJobState("0123456789abcdef0123456789abcdef",
                                [](JobRecord&) { return Status::Ok(); })
                .code(),
            StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, CreateTasksStoresAThousandRowsQuickly) {
  JobRecord job = NewJob(SimpleJob("fan out"), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  std::vector<TaskRecord> tasks;
  for (int i = 0; i < 1000; ++i) {
    TaskRecord task = NewTask(job.id, 1, At(i), TaskState::kCreated);
    task.each_index = i;
    task.each_size = 1000;
    tasks.push_back(std::move(task));
  }
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(IsOk(ds().CreateTasks(tasks)));
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(1));
  Reopen();
  Result<std::vector<TaskRecord>> stored = ds().JobTasks(job.id);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(stored->size(), 1000u);
  EXPECT_EQ(stored->front(), tasks.front());
  EXPECT_EQ(stored->back(), tasks.back());
  EXPECT_TRUE(ds().CreateTasks({}).ok());
}

// ---- Transact -----------------------------------------------------------------------

TEST_P(DatastoreConformanceTest, TransactCommitsEveryWriteOfTheScope) {
  JobRecord job = NewJob(SimpleJob("scope " + UniqueWord()), At(0));
  TaskRecord first = NewTask(job.id, 1, At(1));
  TaskRecord second = NewTask(job.id, 2, At(2));
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_RETURN_IF_ERROR(tx.CreateJob(job));
    return tx.CreateTasks({first, second});
  })));
  JobRecord running = job;
  running.state = JobState::kRunning;
  running.started_at = At(5);
  running.position = 1;
  TaskRecord started = first;
  started.state = TaskState::kRunning;
  started.started_at = At(5);
  started.node_id = "node-1";
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_RETURN_IF_ERROR(tx.GetJob(job.id).status());
    BATON_RETURN_IF_ERROR(tx.UpdateJobState(running));
    return tx.UpdateTask(started);
  })));
  Reopen();
  EXPECT_EQ(*ds().GetJob(job.id), running);
  EXPECT_EQ(*ds().GetTask(first.id), started);
  EXPECT_EQ(*ds().GetTask(second.id), second);
}

TEST_P(DatastoreConformanceTest, TransactRollsBackEveryWriteWhenTheBodyFails) {
  auto job_made = MakeJobWithTask();
  JobRecord job = job_made.first;
  TaskRecord task = job_made.second;
  TaskRecord extra = NewTask(job.id, 2, At(3));
  Status status = ds().Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(JobRecord row, tx.GetJob(job.id));
    row.state = JobState::kFailed;
    row.error = "boom";
    BATON_RETURN_IF_ERROR(tx.UpdateJob(row));
    BATON_RETURN_IF_ERROR(tx.CreateTasks({extra}));
    TaskRecord changed = task;
    changed.state = TaskState::kFailed;
    BATON_RETURN_IF_ERROR(tx.UpdateTask(changed));
    return FailedPrecondition("the decision changed its mind");
  });
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "the decision changed its mind");
  Reopen();
  EXPECT_EQ(*ds().GetJob(job.id), job);
  EXPECT_EQ(*ds().GetTask(task.id), task);
  EXPECT_EQ(ds().GetTask(extra.id).status().code(), StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, TransactReadsSeeTheScopesOwnWrites) {
  auto job_made = MakeJobWithTask();
  JobRecord job = job_made.first;
  TaskRecord task = job_made.second;
  TaskRecord child = NewTask(job.id, 1, At(4));
  child.parent_id = task.id;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    JobRecord row = *tx.GetJob(job.id);
    row.state = JobState::kRunning;
    row.context = {{"inputs", {{"who", "scope"}}}};
    EXPECT_TRUE(IsOk(tx.UpdateJob(row)));
    EXPECT_EQ(*tx.GetJob(job.id), row);
    JobRecord moved = row;
    moved.position = 7;
    moved.progress = 50;
    EXPECT_TRUE(IsOk(tx.UpdateJobState(moved)));
    EXPECT_EQ(tx.GetJob(job.id)->position, 7);
    EXPECT_EQ(tx.GetJob(job.id)->context, row.context);
    EXPECT_TRUE(IsOk(tx.CreateTasks({child})));
    EXPECT_EQ(*tx.GetTask(child.id), child);
    Result<std::vector<TaskRecord>> children = tx.ChildTasks(task.id);
    EXPECT_TRUE(children.ok() && children->size() == 1u && children->front() == child);
    TaskRecord done = child;
    done.state = TaskState::kCompleted;
    done.result = "ok";
    EXPECT_TRUE(IsOk(tx.UpdateTask(done)));
    Result<std::vector<TaskRecord>> rows = tx.JobTasks(job.id);
    EXPECT_TRUE(rows.ok() && rows->size() == 2u);
    EXPECT_EQ(tx.GetTask(child.id)->state, TaskState::kCompleted);
    return Ok();
  })));
  EXPECT_EQ(ds().GetTask(child.id)->result, "ok");
  EXPECT_EQ(ds().GetJob(job.id)->position, 7);
}

TEST_P(DatastoreConformanceTest, AFailedWriteLeavesNothingOfTheScopeEvenIfTheBodyIgnoresIt) {
  auto job_made = MakeJobWithTask();
  JobRecord job = job_made.first;
  TaskRecord task = job_made.second;
  TaskRecord fresh = NewTask(job.id, 2, At(5));
  Status status = ds().Transact([&](Transaction& tx) -> Status {
    JobRecord row = *tx.GetJob(job.id);
    row.state = JobState::kRunning;
    EXPECT_TRUE(IsOk(tx.UpdateJobState(row)));
    EXPECT_TRUE(IsOk(tx.CreateTasks({fresh})));
    // A taken id: this write fails, and the body carries on as if it had not.
    Status taken = tx.CreateTasks({task});
    EXPECT_EQ(taken.code(), StatusCode::kAlreadyExists);
    EXPECT_EQ(tx.GetJob(job.id).status().code(), StatusCode::kAlreadyExists);  // poisoned
    return Ok();
  });
  EXPECT_EQ(status.code(), StatusCode::kAlreadyExists);
  Reopen();
  EXPECT_EQ(*ds().GetJob(job.id), job);
  EXPECT_EQ(ds().GetTask(fresh.id).status().code(), StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, TransactCancelTasksSeesTheScopesWritesAndIsUndoneWithIt) {
  JobRecord job = NewJob(SimpleJob("scope cancel " + UniqueWord()), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  TaskRecord group = NewTask(job.id, 1, At(1), TaskState::kRunning);
  TaskRecord child = NewTask(job.id, 1, At(2), TaskState::kScheduled);
  child.parent_id = group.id;
  TaskRecord done = NewTask(job.id, 1, At(3), TaskState::kCompleted);
  done.parent_id = group.id;
  TaskRecord sibling = NewTask(job.id, 2, At(4), TaskState::kRunning);
  sibling.node_id = "node-1";
  ASSERT_TRUE(IsOk(ds().CreateTasks({group, child, done, sibling})));
  // A row created in the scope is cancelled with the stored ones below `group`.
  TaskRecord fresh = NewTask(job.id, 1, At(5), TaskState::kCreated);
  fresh.parent_id = group.id;
  auto ids_of = [](const std::vector<CancelledTask>& rows) {
    std::vector<std::string> ids;
    for (const CancelledTask& t : rows) ids.push_back(t.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  // Undone with the scope: nothing of it is stored.
  Status undone = ds().Transact([&](Transaction& tx) -> Status {
    BATON_RETURN_IF_ERROR(tx.GetJob(job.id).status());
    BATON_RETURN_IF_ERROR(tx.CreateTasks({fresh}));
    auto cancelled = tx.CancelTasks(job.id, group.id, At(9));
    if (!cancelled.ok()) return cancelled.status();
    return Unavailable("the decision is given up");
  });
  EXPECT_EQ(undone.code(), StatusCode::kUnavailable);
  EXPECT_EQ(ds().GetTask(child.id)->state, TaskState::kScheduled);
  EXPECT_EQ(ds().GetTask(fresh.id).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_RETURN_IF_ERROR(tx.GetJob(job.id).status());
    BATON_RETURN_IF_ERROR(tx.CreateTasks({fresh}));
    auto below = tx.CancelTasks(job.id, group.id, At(9));
    if (!below.ok()) return below.status();
    std::vector<std::string> want = {child.id, fresh.id};
    std::sort(want.begin(), want.end());
    EXPECT_EQ(ids_of(*below), want);
    // Later reads of the scope see them cancelled; what is left is the rest of the job.
    auto row = tx.GetTask(child.id);
    if (!row.ok()) return row.status();
    EXPECT_EQ(row->state, TaskState::kCancelled);
    EXPECT_EQ(row->completed_at, At(9));
    auto rest = tx.CancelTasks(job.id, "", At(10));
    if (!rest.ok()) return rest.status();
    std::vector<CancelledTask> got = *rest;
    std::vector<CancelledTask> want_rest = {{group.id, TaskState::kRunning, "", ""},
                                            {sibling.id, TaskState::kRunning, "node-1", ""}};
    auto by_id = [](const CancelledTask& a, const CancelledTask& b) { return a.id < b.id; };
    std::sort(got.begin(), got.end(), by_id);
    std::sort(want_rest.begin(), want_rest.end(), by_id);
    EXPECT_EQ(got, want_rest);
    return Status::Ok();
  })));
  Reopen();
  EXPECT_EQ(ds().GetTask(child.id)->state, TaskState::kCancelled);
  EXPECT_EQ(ds().GetTask(fresh.id)->state, TaskState::kCancelled);
  EXPECT_EQ(ds().GetTask(group.id)->state, TaskState::kCancelled);
  EXPECT_EQ(ds().GetTask(group.id)->completed_at, At(10));
  EXPECT_EQ(ds().GetTask(sibling.id)->state, TaskState::kCancelled);
  EXPECT_EQ(ds().GetTask(done.id)->state, TaskState::kCompleted);
}

TEST_P(DatastoreConformanceTest, TransactNextCreatedChildrenAreTheLowestIndexesInOrder) {
  JobRecord job = NewJob(SimpleJob("next created " + UniqueWord()), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  TaskRecord each = NewTask(job.id, 1, At(1), TaskState::kRunning);
  TaskRecord other = NewTask(job.id, 2, At(1), TaskState::kRunning);
  std::vector<TaskRecord> rows = {each, other};
  // Indexes 0..5 created out of order: 0 and 1 started, 2 done, 3..5 CREATED (5 made
  // first); a CREATED child of another parent is never one of them.
  const std::vector<std::pair<int, TaskState>> children = {
      {5, TaskState::kCreated},   {1, TaskState::kRunning},   {3, TaskState::kCreated},
      {0, TaskState::kScheduled}, {2, TaskState::kCompleted}, {4, TaskState::kCreated}};
  std::map<int, std::string> id_of;
  std::map<int, TaskRecord> row_of;
  for (std::size_t i = 0; i < children.size(); ++i) {
    TaskRecord child = NewTask(job.id, 1, At(2 + static_cast<std::int64_t>(i)), children[i].second);
    child.parent_id = each.id;
    child.each_index = children[i].first;
    id_of[child.each_index] = child.id;
    row_of[child.each_index] = child;
    rows.push_back(child);
  }
  TaskRecord stranger = NewTask(job.id, 2, At(1), TaskState::kCreated);
  stranger.parent_id = other.id;
  rows.push_back(stranger);
  ASSERT_TRUE(IsOk(ds().CreateTasks(rows)));
  Reopen();
  auto ids = [](const std::vector<TaskRecord>& got) {
    std::vector<std::string> out;
    for (const TaskRecord& t : got) out.push_back(t.id);
    return out;
  };
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto two, tx.NextCreatedChildren(each.id, 2));
    EXPECT_EQ(ids(two), (std::vector<std::string>{id_of[3], id_of[4]}));
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto all, tx.NextCreatedChildren(each.id, 10));
    EXPECT_EQ(ids(all), (std::vector<std::string>{id_of[3], id_of[4], id_of[5]}));
    if (!all.empty()) EXPECT_EQ(all.front(), row_of[3]);  // whole rows, as stored
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto none, tx.NextCreatedChildren(each.id, 0));
    EXPECT_TRUE(none.empty());
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto unknown, tx.NextCreatedChildren(NewId(), 5));
    EXPECT_TRUE(unknown.empty());
    // The scope's own writes: index 3 started, a new CREATED index 6.
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(TaskRecord third, tx.GetTask(id_of[3]));
    third.state = TaskState::kPending;
    BATON_RETURN_IF_ERROR(tx.UpdateTask(third));
    TaskRecord sixth = NewTask(job.id, 1, At(1), TaskState::kCreated);
    sixth.parent_id = each.id;
    sixth.each_index = 6;
    BATON_RETURN_IF_ERROR(tx.CreateTasks({sixth}));
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto after, tx.NextCreatedChildren(each.id, 10));
    EXPECT_EQ(ids(after), (std::vector<std::string>{id_of[4], id_of[5], sixth.id}));
    return Ok();
  })));
}

TEST_P(DatastoreConformanceTest, TransactCountChildrenCountsTheAskedStatesOfOneParent) {
  JobRecord job = NewJob(SimpleJob("count children " + UniqueWord()), At(0));
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  TaskRecord each = NewTask(job.id, 1, At(1), TaskState::kRunning);
  TaskRecord other = NewTask(job.id, 2, At(1), TaskState::kRunning);
  std::vector<TaskRecord> rows = {each, other};
  const std::vector<TaskState> states = {
      TaskState::kCreated, TaskState::kCreated, TaskState::kPending,   TaskState::kScheduled,
      TaskState::kRunning, TaskState::kRunning, TaskState::kCompleted, TaskState::kFailed};
  for (std::size_t i = 0; i < states.size(); ++i) {
    TaskRecord child = NewTask(job.id, 1, At(2 + static_cast<std::int64_t>(i)), states[i]);
    child.parent_id = each.id;
    child.each_index = static_cast<int>(i);
    rows.push_back(child);
  }
  TaskRecord stranger = NewTask(job.id, 2, At(1), TaskState::kRunning);
  stranger.parent_id = other.id;
  rows.push_back(stranger);
  ASSERT_TRUE(IsOk(ds().CreateTasks(rows)));
  Reopen();
  const std::vector<TaskState> active = {TaskState::kPending, TaskState::kScheduled,
                                         TaskState::kRunning};
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto counts, tx.CountChildren(each.id, active));
    EXPECT_EQ(counts,
              (std::map<TaskState, int>{
                  {TaskState::kPending, 1}, {TaskState::kScheduled, 1}, {TaskState::kRunning, 2}}));
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(
        auto ended, tx.CountChildren(each.id, {TaskState::kCompleted, TaskState::kFailed,
                                               TaskState::kCancelled, TaskState::kSkipped}));
    EXPECT_EQ(ended,
              (std::map<TaskState, int>{{TaskState::kCompleted, 1}, {TaskState::kFailed, 1}}));
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto nothing, tx.CountChildren(each.id, {}));
    EXPECT_TRUE(nothing.empty());
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto unknown, tx.CountChildren(NewId(), active));
    EXPECT_TRUE(unknown.empty());
    // The scope's own writes count: one running child done, a CANCEL of the rest.
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(TaskRecord running, tx.GetTask(rows[6].id));
    running.state = TaskState::kCompleted;
    BATON_RETURN_IF_ERROR(tx.UpdateTask(running));
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto moved, tx.CountChildren(each.id, active));
    EXPECT_EQ(moved[TaskState::kRunning], 1);
    BATON_RETURN_IF_ERROR(tx.CancelTasks(job.id, each.id, At(20)).status());
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto cancelled,
                                       tx.CountChildren(each.id, {TaskState::kCancelled}));
    EXPECT_EQ(cancelled[TaskState::kCancelled], 5);  // 2 CREATED, 1 each queued, 1 running
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto left, tx.CountChildren(each.id, active));
    EXPECT_TRUE(left.empty());
    return Ok();
  })));
}

TEST_P(DatastoreConformanceTest, TransactReadsAndWritesAJobsStateApartFromItsDefinitionAndContext) {
  // A definition big enough for the adapters' definition caches (4 KiB and more), read
  // twice: the second read is the same definition.
  Job definition = FullJob();
  for (int i = 0; i < 200; ++i)
    definition.tasks.push_back(RunnableTask("step " + std::to_string(i)));
  JobRecord job = NewJob(definition, At(0), JobState::kRunning);
  job.started_at = At(1);
  job.position = 3;
  job.steps = "cr.";  // a graph's steps are state columns
  job.context = {{"inputs", {{"who", "world"}}}, {"tasks", nlohmann::json::object()}};
  ASSERT_TRUE(IsOk(ds().CreateJob(job)));
  Reopen();
  JobRecord stored = *ds().GetJob(job.id);
  JobRecord changed = stored;
  int first_version = -1;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(JobRecord state, tx.GetJobState(job.id, &first_version));
    JobRecord expected = stored;
    expected.job = Job{};
    expected.context = nlohmann::json::object();
    EXPECT_EQ(state, expected);   // every column but the definition and the context
    EXPECT_EQ(first_version, 0);  // as created
    std::size_t bytes = 0;
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(nlohmann::json context, tx.GetJobContext(job.id, &bytes));
    EXPECT_EQ(context, stored.context);
    EXPECT_EQ(bytes, stored.context.dump().size());
    for (int i = 0; i < 2; ++i) {
      BATON_ASSIGN_OR_RETURN_CONFORMANCE(std::shared_ptr<const Job> read,
                                         tx.GetJobDefinition(job.id));
      EXPECT_TRUE(read != nullptr && *read == stored.job);
    }
    // A state-only write leaves the context and its version.
    state.progress = 50;
    state.steps = "csr";
    state.ending = JobState::kFailed;  // its cleanup runs
    BATON_RETURN_IF_ERROR(tx.UpdateJobState(state));
    int version = -1;
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(JobRecord same, tx.GetJobState(job.id, &version));
    EXPECT_EQ(version, 0);
    EXPECT_EQ(same.steps, "csr");
    EXPECT_EQ(same.ending, JobState::kFailed);
    state.ending.reset();
    // Written back with no definition: the stored one stays; the context's version rises.
    state.state = JobState::kCompleted;
    state.completed_at = At(5);
    state.position = 4;
    state.progress = 100;
    state.result = "done";
    state.steps = "csc";
    state.context = stored.context;
    state.context["tasks"]["greeting"] = "hello";
    BATON_RETURN_IF_ERROR(tx.UpdateJobStateAndContext(state));
    changed = state;
    changed.job = stored.job;
    // The scope reads its own write.
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(JobRecord again, tx.GetJobState(job.id, &version));
    JobRecord without_context = state;
    without_context.context = nlohmann::json::object();
    EXPECT_EQ(again, without_context);
    EXPECT_EQ(version, 1);
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(nlohmann::json now, tx.GetJobContext(job.id, nullptr));
    EXPECT_EQ(now, state.context);
    return Ok();
  })));
  Reopen();
  EXPECT_EQ(*ds().GetJob(job.id), changed);
  // A whole-row update writes the context too: its version rises again.
  ASSERT_TRUE(IsOk(ds().UpdateJob(job.id, [](JobRecord& j) {
    j.context["tasks"]["again"] = "yes";
    return Status::Ok();
  })));
  int version = -1;
  ASSERT_TRUE(IsOk(
      ds().Transact([&](Transaction& tx) { return tx.GetJobState(job.id, &version).status(); })));
  EXPECT_EQ(version, 2);
  JobRecord ghost = NewJob(SimpleJob("ghost"), At(0));
  EXPECT_EQ(
      ds().Transact([&](Transaction& tx) { return tx.GetJobState(ghost.id, &version).status(); })
          .code(),
      StatusCode::kNotFound);
  EXPECT_EQ(
      ds().Transact([&](Transaction& tx) { return tx.GetJobContext(ghost.id, nullptr).status(); })
          .code(),
      StatusCode::kNotFound);
  EXPECT_EQ(
      ds().Transact([&](Transaction& tx) { return tx.GetJobDefinition(ghost.id).status(); }).code(),
      StatusCode::kNotFound);
  EXPECT_EQ(
      ds().Transact([&](Transaction& tx) { return tx.UpdateJobStateAndContext(ghost); }).code(),
      StatusCode::kNotFound);
  EXPECT_EQ(ds().GetJob(ghost.id).status().code(), StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, TransactOnUnknownRowsIsNotFoundAndStoresNothing) {
  auto job_made = MakeJobWithTask();
  JobRecord job = job_made.first;
  TaskRecord task = job_made.second;
  JobRecord ghost = NewJob(SimpleJob("ghost"), At(0));
  TaskRecord ghost_task = NewTask(job.id, 9, At(0));
  EXPECT_EQ(ds().Transact([&](Transaction& tx) { return tx.GetJob(ghost.id).status(); }).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ds().Transact([&](Transaction& tx) { return tx.UpdateJobState(ghost); }).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ds().Transact([&](Transaction& tx) { return tx.UpdateJob(ghost); }).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ds().Transact([&](Transaction& tx) { return tx.UpdateTask(ghost_task); }).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ds().GetJob(ghost.id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ds().GetTask(ghost_task.id).status().code(), StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, TransactRefusesAJobOverTheStoredSizeLimit) {
  JobRecord job = NewJob(SimpleJob("huge"), At(0));
  job.context = {{"blob", std::string(kDefaultMaxJobBytes + 1, 'x')}};
  Status status = ds().Transact([&](Transaction& tx) { return tx.CreateJob(job); });
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ds().GetJob(job.id).status().code(), StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, ConcurrentScopesOfOneJobLoseNoUpdate) {
  auto job_made = MakeJobWithTask();
  JobRecord job = job_made.first;
  TaskRecord task = job_made.second;
  constexpr int kThreads = 4;
  constexpr int kEach = 10;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        Status s = ds().Transact([&](Transaction& tx) -> Status {
          Result<JobRecord> row = tx.GetJob(job.id);  // locks the job row first
          if (!row.ok()) return row.status();
          Result<TaskRecord> counted = tx.GetTask(task.id);
          if (!counted.ok()) return counted.status();
          row->position += 1;
          counted->completions += 1;
          BATON_RETURN_IF_ERROR(tx.UpdateJobState(*row));
          return tx.UpdateTask(*counted);
        });
        if (!s.ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ds().GetJob(job.id)->position, job.position + kThreads * kEach);
  EXPECT_EQ(ds().GetTask(task.id)->completions, task.completions + kThreads * kEach);
}

TEST_P(DatastoreConformanceTest, ScopesOfDifferentJobsOverlapUnlessTheStoreHasOneWriter) {
  auto first_made = MakeJobWithTask();
  JobRecord first = first_made.first;
  TaskRecord first_task = first_made.second;
  auto second_made = MakeJobWithTask();
  JobRecord second = second_made.first;
  TaskRecord second_task = second_made.second;
  std::atomic<bool> first_open{false};
  std::atomic<bool> second_committed{false};
  std::atomic<bool> first_saw_second{false};
  std::thread holder([&] {
    Status s = ds().Transact([&](Transaction& tx) -> Status {
      JobRecord row = *tx.GetJob(first.id);
      row.progress = 10;
      BATON_RETURN_IF_ERROR(tx.UpdateJobState(row));
      first_open = true;
      // Held open until the other job's scope has committed (or, with one writer,
      // briefly: the other scope cannot start before this one ends).
      auto bound =
          GetParam().one_writer ? std::chrono::milliseconds(300) : std::chrono::seconds(10);
      first_saw_second = WaitFor([&] { return second_committed.load(); }, bound);
      return Ok();
    });
    EXPECT_TRUE(IsOk(s));
  });
  ASSERT_TRUE(WaitFor([&] { return first_open.load(); }, std::chrono::seconds(10)));
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    JobRecord row = *tx.GetJob(second.id);
    row.progress = 20;
    return tx.UpdateJobState(row);
  })));
  second_committed = true;
  holder.join();
  // Overlapping: the second job committed while the first's scope was still open.
  // One writer: the second waited for the first to end.
  EXPECT_EQ(first_saw_second.load(), !GetParam().one_writer);
  EXPECT_EQ(ds().GetJob(first.id)->progress, 10);
  EXPECT_EQ(ds().GetJob(second.id)->progress, 20);
}

// ---- Log parts ----------------------------------------------------------------------

TEST_P(DatastoreConformanceTest, TaskLogPartsAreHighestNumberFirstInPages) {
  auto [job, task] = MakeJobWithTask();
  std::vector<LogPart> parts;
  for (int n = 1; n <= 5; ++n) {
    parts.push_back(NewLogPart(task, n, At(100 - n)));  // numbers, not times, order them
    ASSERT_TRUE(IsOk(ds().CreateLogPart(parts.back())));
  }
  Reopen();
  Result<Page<LogPart>> first = ds().TaskLogParts(task.id, 1, 2);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->items, (std::vector<LogPart>{parts[4], parts[3]}));
  EXPECT_EQ(first->total_items, 5);
  EXPECT_EQ(first->total_pages, 3);
  EXPECT_EQ(first->number, 1);
  EXPECT_EQ(first->size, 2);
  Result<Page<LogPart>> last = ds().TaskLogParts(task.id, 3, 2);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->items, std::vector<LogPart>{parts[0]});
  Result<Page<LogPart>> none = ds().TaskLogParts(NewId(), 1, 10);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->items.empty());
  EXPECT_EQ(none->total_items, 0);
  EXPECT_EQ(none->total_pages, 0);
}

TEST_P(DatastoreConformanceTest, JobLogPartsAreNewestFirstAcrossTasks) {
  auto [job, a] = MakeJobWithTask();
  TaskRecord b = NewTask(job.id, 2, At(1));
  ASSERT_TRUE(IsOk(ds().CreateTask(b)));
  LogPart a1 = NewLogPart(a, 1, At(10));
  LogPart b1 = NewLogPart(b, 1, At(20));
  LogPart a2 = NewLogPart(a, 2, At(30));
  for (const LogPart& part : {a1, b1, a2}) ASSERT_TRUE(IsOk(ds().CreateLogPart(part)));
  auto [other_job, other_task] = MakeJobWithTask();
  ASSERT_TRUE(IsOk(ds().CreateLogPart(NewLogPart(other_task, 1, At(25)))));
  Reopen();
  Result<Page<LogPart>> page = ds().JobLogParts(job.id, 1, 10);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->items, (std::vector<LogPart>{a2, b1, a1}));
  EXPECT_EQ(page->total_items, 3);
  EXPECT_EQ(page->total_pages, 1);
  Result<Page<LogPart>> second = ds().JobLogParts(job.id, 2, 2);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->items, std::vector<LogPart>{a1});
}

// ---- Nodes --------------------------------------------------------------------------

TEST_P(DatastoreConformanceTest, UpsertNodeCreatesThenReplaces) {
  NodeRecord node;
  node.id = NewId();
  node.name = "worker-1";
  node.hostname = "host-a";
  node.version = "0.1.0";
  node.queue = "default:4,gpu:1";
  node.started_at = At(1000);
  node.last_heartbeat_at = At(365LL * 86'400'000);  // ahead of other tests' nodes
  node.cpu_percent = 12.5;
  node.task_count = 3;
  node.status = NodeStatus::kUp;
  node.memory_bytes = 12'345'678'901;  // past 32 bits
  ASSERT_TRUE(IsOk(ds().UpsertNode(node)));
  Reopen();
  Result<std::vector<NodeRecord>> nodes = ds().ActiveNodes(node.last_heartbeat_at);
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(IdsAmong(*nodes, {node.id}).size(), 1u);
  EXPECT_EQ(*std::find_if(nodes->begin(), nodes->end(),
                          [&](const NodeRecord& n) { return n.id == node.id; }),
            node);

  NodeRecord changed = node;
  changed.hostname = "host-b";
  changed.last_heartbeat_at = node.last_heartbeat_at + std::chrono::seconds(30);
  changed.cpu_percent = 99;
  changed.task_count = 0;
  changed.status = NodeStatus::kOffline;
  changed.memory_bytes = 1 << 20;
  ASSERT_TRUE(IsOk(ds().UpsertNode(changed)));
  Reopen();
  nodes = ds().ActiveNodes(node.last_heartbeat_at);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(IdsAmong(*nodes, {node.id}).size(), 1u);  // replaced, not added
  EXPECT_EQ(*std::find_if(nodes->begin(), nodes->end(),
                          [&](const NodeRecord& n) { return n.id == node.id; }),
            changed);
}

TEST_P(DatastoreConformanceTest, ActiveNodesAreThoseSeenSinceNewestFirst) {
  TimePoint t = At(400LL * 86'400'000);
  auto make = [&](std::int64_t heartbeat_ms, NodeStatus status) {
    NodeRecord node;
    node.id = NewId();
    node.name = "n";
    node.started_at = t;
    node.last_heartbeat_at = t + std::chrono::milliseconds(heartbeat_ms);
    node.status = status;
    return node;
  };
  NodeRecord stale = make(-1, NodeStatus::kUp);
  NodeRecord exact = make(0, NodeStatus::kDown);
  NodeRecord fresh = make(5000, NodeStatus::kUp);
  for (const NodeRecord& node : {stale, exact, fresh}) ASSERT_TRUE(IsOk(ds().UpsertNode(node)));
  Reopen();
  Result<std::vector<NodeRecord>> nodes = ds().ActiveNodes(t);
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  EXPECT_EQ(IdsAmong(*nodes, {stale.id, exact.id, fresh.id}),
            (std::vector<std::string>{fresh.id, exact.id}));
}

// ---- Deletion and health ------------------------------------------------------------

TEST_P(DatastoreConformanceTest, DeleteJobRemovesItsTasksAndLogParts) {
  auto [job, task] = MakeJobWithTask();
  TaskRecord child = NewTask(job.id, 1, At(1));
  child.parent_id = task.id;
  ASSERT_TRUE(IsOk(ds().CreateTask(child)));
  ASSERT_TRUE(IsOk(ds().CreateLogPart(NewLogPart(task, 1, At(2)))));
  ASSERT_TRUE(IsOk(ds().CreateLogPart(NewLogPart(child, 1, At(3)))));
  auto [kept_job, kept_task] = MakeJobWithTask();
  LogPart kept_part = NewLogPart(kept_task, 1, At(4));
  ASSERT_TRUE(IsOk(ds().CreateLogPart(kept_part)));

  ASSERT_TRUE(IsOk(ds().DeleteJob(job.id)));
  Reopen();
  EXPECT_EQ(ds().GetJob(job.id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ds().GetTask(task.id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ds().GetTask(child.id).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(ds().JobTasks(job.id)->empty());
  EXPECT_TRUE(ds().ChildTasks(task.id)->empty());
  EXPECT_EQ(ds().JobLogParts(job.id, 1, 10)->total_items, 0);
  EXPECT_EQ(ds().TaskLogParts(task.id, 1, 10)->total_items, 0);
  // Another job is untouched.
  EXPECT_TRUE(ds().GetJob(kept_job.id).ok());
  EXPECT_TRUE(ds().GetTask(kept_task.id).ok());
  EXPECT_EQ(ds().TaskLogParts(kept_task.id, 1, 10)->items, std::vector<LogPart>{kept_part});
  EXPECT_EQ(ds().DeleteJob(job.id).code(), StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, DeleteJobAlsoDeletesItsSubJobs) {
  // parent --subjob task--> child --subjob task--> grandchild
  auto [parent, parent_task] = MakeJobWithTask();
  auto [child, child_task] = MakeJobWithTask();
  auto [grandchild, grandchild_task] = MakeJobWithTask();
  const std::string child_id = child.id, grandchild_id = grandchild.id;
  ASSERT_TRUE(IsOk(ds().UpdateTask(parent_task.id, [&](TaskRecord& t) {
    t.subjob_id = child_id;
    return Status::Ok();
  })));
  ASSERT_TRUE(IsOk(ds().UpdateTask(child_task.id, [&](TaskRecord& t) {
    t.subjob_id = grandchild_id;
    return Status::Ok();
  })));
  ASSERT_TRUE(IsOk(ds().CreateLogPart(NewLogPart(grandchild_task, 1, At(2)))));
  auto [kept_job, kept_task] = MakeJobWithTask();

  // Deleting the child first (its own autoDelete) leaves the parent alone.
  ASSERT_TRUE(IsOk(ds().DeleteJob(grandchild.id)));
  EXPECT_TRUE(ds().GetJob(child.id).ok());
  ASSERT_TRUE(IsOk(ds().DeleteJob(parent.id)));
  Reopen();
  for (const std::string& id : {parent.id, child.id, grandchild.id}) {
    EXPECT_EQ(ds().GetJob(id).status().code(), StatusCode::kNotFound) << id;
    EXPECT_TRUE(ds().JobTasks(id)->empty()) << id;
    EXPECT_EQ(ds().JobLogParts(id, 1, 10)->total_items, 0) << id;
  }
  for (const std::string& id : {parent_task.id, child_task.id, grandchild_task.id}) {
    EXPECT_EQ(ds().GetTask(id).status().code(), StatusCode::kNotFound) << id;
  }
  EXPECT_TRUE(ds().GetJob(kept_job.id).ok());
  EXPECT_TRUE(ds().GetTask(kept_task.id).ok());
}

TEST_P(DatastoreConformanceTest, JobsDueForDeletionAreFinishedJobsWhoseTimeHasCome) {
  // Times long before any other test's (they use 2031), so that no job of another test
  // or an earlier run comes before these in the bounded list.
  const TimePoint t0 = TimePoint(std::chrono::hours(24));
  auto job_at = [&](JobState state, std::optional<TimePoint> delete_at) {
    JobRecord job = NewJob(SimpleJob("due " + UniqueWord()), At(0), state);
    job.delete_at = delete_at;
    EXPECT_TRUE(IsOk(ds().CreateJob(job)));
    return job;
  };
  JobRecord second = job_at(JobState::kFailed, t0 + std::chrono::milliseconds(2));
  JobRecord first = job_at(JobState::kCompleted, t0 + std::chrono::milliseconds(1));
  JobRecord exact = job_at(JobState::kCancelled, t0 + std::chrono::milliseconds(50));
  JobRecord later = job_at(JobState::kCompleted, t0 + std::chrono::milliseconds(51));
  JobRecord running = job_at(JobState::kRunning, t0);  // restarted: not finished
  JobRecord kept = job_at(JobState::kCompleted, std::nullopt);
  std::vector<std::string> mine = {first.id, second.id, exact.id, later.id, running.id, kept.id};
  auto among = [&](const std::vector<std::string>& ids) {
    std::vector<std::string> out;
    for (const std::string& id : ids) {
      if (std::find(mine.begin(), mine.end(), id) != mine.end()) out.push_back(id);
    }
    return out;
  };
  Reopen();

  const TimePoint now = t0 + std::chrono::milliseconds(50);
  Result<std::vector<std::string>> due = ds().JobsDueForDeletion(now, 100);
  ASSERT_TRUE(due.ok()) << due.status().ToString();
  EXPECT_EQ(among(*due), (std::vector<std::string>{first.id, second.id, exact.id}));
  // Bounded, soonest first.
  Result<std::vector<std::string>> one = ds().JobsDueForDeletion(now, 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, std::vector<std::string>{first.id});
  EXPECT_TRUE(ds().JobsDueForDeletion(now, 0)->empty());
  // Nothing is due before its time.
  EXPECT_TRUE(among(*ds().JobsDueForDeletion(t0, 100)).empty());

  // Once deleted, a job is no longer due; deleting it again says NotFound.
  ASSERT_TRUE(IsOk(ds().DeleteJob(first.id)));
  EXPECT_EQ(ds().DeleteJob(first.id).code(), StatusCode::kNotFound);
  EXPECT_EQ(among(*ds().JobsDueForDeletion(now, 100)),
            (std::vector<std::string>{second.id, exact.id}));
  for (const std::string& id : mine) (void)ds().DeleteJob(id);  // a shared database stays clean
}

TEST_P(DatastoreConformanceTest, HealthIsOk) {
  EXPECT_TRUE(IsOk(ds().Health()));
  Reopen();
  EXPECT_TRUE(IsOk(ds().Health()));
}

// ---- The webhook outbox -------------------------------------------------------------

inline WebhookDelivery NewDelivery(const std::string& job_id, TimePoint due) {
  WebhookDelivery d;
  d.id = NewId();
  d.job_id = job_id;
  d.event = "job.StateChange";
  d.url = "http://127.0.0.1:9/hook?x=1";
  d.headers = {{"Authorization", "Bearer t"}, {"X-Ünïcode", "✓"}};
  d.body = R"({"id":"j","state":"COMPLETED"})";
  d.created_at = due;
  d.next_attempt_at = due;
  return d;
}

inline Result<std::vector<WebhookDelivery>> Deliveries(Datastore& ds, const std::string& job_id) {
  std::vector<WebhookDelivery> out;
  Status s = ds.Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(out, tx.JobWebhookDeliveries(job_id));
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

// The ids of `ds`, in order; with `among`, only those (a shared database holds other
// tests' deliveries too).
inline std::vector<std::string> DeliveryIds(const std::vector<WebhookDelivery>& ds,
                                            const std::set<std::string>* among = nullptr) {
  std::vector<std::string> ids;
  for (const WebhookDelivery& d : ds) {
    if (among == nullptr || among->contains(d.id)) ids.push_back(d.id);
  }
  return ids;
}

TEST_P(DatastoreConformanceTest, WebhookDeliveryRoundTripsEveryField) {
  auto [job, task] = MakeJobWithTask();
  WebhookDelivery d = NewDelivery(job.id, At(10));
  d.task_id = task.id;
  d.event = "task.StateChange";
  d.secret = "k3y";
  d.state = DeliveryState::kFailed;
  d.attempts = 2;
  d.completed_at = At(30);
  d.error = "gave up";
  d.history = {{At(11), 0, "Connection refused", 3}, {At(20), 503, "", 40}};
  WebhookDelivery plain = NewDelivery(job.id, At(12));
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) {
    return tx.CreateWebhookDeliveries({d, plain});
  })));
  Reopen();
  auto got = Deliveries(ds(), job.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<WebhookDelivery>{d, plain}));  // oldest first
}

TEST_P(DatastoreConformanceTest, DueWebhookDeliveriesArePendingAndDueSoonestFirst) {
  auto [job, task] = MakeJobWithTask();
  WebhookDelivery late = NewDelivery(job.id, At(30));
  WebhookDelivery early = NewDelivery(job.id, At(10));
  WebhookDelivery exact = NewDelivery(job.id, At(20));
  WebhookDelivery future = NewDelivery(job.id, At(21));
  WebhookDelivery done = NewDelivery(job.id, At(5));
  done.state = DeliveryState::kDelivered;
  WebhookDelivery failed = NewDelivery(job.id, At(6));
  failed.state = DeliveryState::kFailed;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) {
    return tx.CreateWebhookDeliveries({late, early, exact, future, done, failed});
  })));
  std::vector<WebhookDelivery> due, two, none;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(due, tx.DueWebhookDeliveries(At(30), 100000));
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(two, tx.DueWebhookDeliveries(At(20), 100000));
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(none, tx.DueWebhookDeliveries(At(30), 0));
    return Status::Ok();
  })));
  const std::set<std::string> ours = {late.id, early.id, exact.id, future.id, done.id, failed.id};
  EXPECT_EQ(DeliveryIds(due, &ours),
            (std::vector<std::string>{early.id, exact.id, future.id, late.id}));
  EXPECT_EQ(DeliveryIds(two, &ours), (std::vector<std::string>{early.id, exact.id}));
  EXPECT_TRUE(none.empty());
}

TEST_P(DatastoreConformanceTest, UpdateWebhookDeliveryStoresItsProgressAndNotFoundForUnknown) {
  auto [job, task] = MakeJobWithTask();
  WebhookDelivery d = NewDelivery(job.id, At(10));
  ASSERT_TRUE(
      IsOk(ds().Transact([&](Transaction& tx) { return tx.CreateWebhookDeliveries({d}); })));
  d.attempts = 1;
  d.history = {{At(11), 200, "", 5}};
  d.state = DeliveryState::kDelivered;
  d.completed_at = At(11);
  d.next_attempt_at = At(99);
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) { return tx.UpdateWebhookDelivery(d); })));
  Reopen();
  auto got = Deliveries(ds(), job.id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, std::vector<WebhookDelivery>{d});
  WebhookDelivery unknown = NewDelivery(job.id, At(1));
  EXPECT_EQ(
      ds().Transact([&](Transaction& tx) { return tx.UpdateWebhookDelivery(unknown); }).code(),
      StatusCode::kNotFound);
}

// Deleting a job (DELETE, autoDelete, retention) must not lose what it still has to tell:
// its PENDING deliveries stay, due, until they end; then they go.
TEST_P(DatastoreConformanceTest, DeleteJobKeepsItsPendingDeliveriesUntilTheyEnd) {
  auto [job, task] = MakeJobWithTask();
  WebhookDelivery pending = NewDelivery(job.id, At(10));
  WebhookDelivery delivered = NewDelivery(job.id, At(11));
  delivered.state = DeliveryState::kDelivered;
  delivered.completed_at = At(11);
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) {
    return tx.CreateWebhookDeliveries({pending, delivered});
  })));

  ASSERT_TRUE(IsOk(ds().DeleteJob(job.id)));
  Reopen();
  EXPECT_EQ(ds().GetJob(job.id).status().code(), StatusCode::kNotFound);
  auto left = Deliveries(ds(), job.id);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(DeliveryIds(*left), std::vector<std::string>{pending.id});
  std::vector<WebhookDelivery> due;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(due, tx.DueWebhookDeliveries(At(10), 100000));
    return Status::Ok();
  })));
  const std::set<std::string> mine = {pending.id};
  EXPECT_EQ(DeliveryIds(due, &mine), std::vector<std::string>{pending.id});

  // A retry scheduled: still there. Ended: gone.
  pending.attempts = 1;
  pending.next_attempt_at = At(20);
  ASSERT_TRUE(
      IsOk(ds().Transact([&](Transaction& tx) { return tx.UpdateWebhookDelivery(pending); })));
  EXPECT_EQ(DeliveryIds(*Deliveries(ds(), job.id)), std::vector<std::string>{pending.id});
  pending.attempts = 2;
  pending.state = DeliveryState::kDelivered;
  pending.completed_at = At(21);
  ASSERT_TRUE(
      IsOk(ds().Transact([&](Transaction& tx) { return tx.UpdateWebhookDelivery(pending); })));
  EXPECT_TRUE(Deliveries(ds(), job.id)->empty());
}

TEST_P(DatastoreConformanceTest, ReleaseWebhookDeliveriesMakesThePendingOnesDueNow) {
  auto [job, task] = MakeJobWithTask();
  WebhookDelivery held = NewDelivery(job.id, At(500));
  WebhookDelivery due = NewDelivery(job.id, At(10));
  WebhookDelivery done = NewDelivery(job.id, At(900));
  done.state = DeliveryState::kDelivered;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) {
    return tx.CreateWebhookDeliveries({held, due, done});
  })));
  int released = -1;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(released, tx.ReleaseWebhookDeliveries(At(100)));
    return Status::Ok();
  })));
  EXPECT_GE(released, 1);  // a shared database may hold other tests' pending ones
  std::map<std::string, TimePoint> at;
  auto stored = Deliveries(ds(), job.id);
  ASSERT_TRUE(stored.ok());
  for (const WebhookDelivery& d : *stored) at[d.id] = d.next_attempt_at;
  EXPECT_EQ(at[held.id], At(100));
  EXPECT_EQ(at[due.id], At(10));    // due already: left as it was
  EXPECT_EQ(at[done.id], At(900));  // delivered: left as it was
}

TEST_P(DatastoreConformanceTest, ATakenDeliveryIdFailsAlreadyExistsAndTheScopeStoresNothing) {
  auto [job, task] = MakeJobWithTask();
  WebhookDelivery d = NewDelivery(job.id, At(10));
  ASSERT_TRUE(
      IsOk(ds().Transact([&](Transaction& tx) { return tx.CreateWebhookDeliveries({d}); })));
  WebhookDelivery other = NewDelivery(job.id, At(11));
  Status s = ds().Transact([&](Transaction& tx) -> Status {
    (void)tx.CreateWebhookDeliveries({other});
    (void)tx.CreateWebhookDeliveries({d});  // ignored by the body: still poisons the scope
    return Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  auto got = Deliveries(ds(), job.id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(DeliveryIds(*got), std::vector<std::string>{d.id});
}

TEST_P(DatastoreConformanceTest, ScopesClaimingAtOnceTakeDifferentDeliveries) {
  auto [job, task] = MakeJobWithTask();
  // Long before any other test's deliveries (a shared database keeps those), so that
  // only these two are due.
  const std::int64_t base = -1000LL * 3600 * 24 * 365;
  WebhookDelivery a = NewDelivery(job.id, At(base + 10));
  WebhookDelivery b = NewDelivery(job.id, At(base + 11));
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) {
    return tx.CreateWebhookDeliveries({a, b});
  })));
  // Each claims the first due one by moving it on past the rest, holding it a moment.
  auto claim = [&](std::string& out) {
    Status s = ds().Transact([&](Transaction& tx) -> Status {
      BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto due, tx.DueWebhookDeliveries(At(base + 20), 1));
      if (due.empty()) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      due[0].next_attempt_at = At(0);
      out = due[0].id;
      return tx.UpdateWebhookDelivery(due[0]);
    });
    EXPECT_TRUE(IsOk(s));
  };
  std::string first, second;
  std::thread t1([&] { claim(first); });
  std::thread t2([&] { claim(second); });
  t1.join();
  t2.join();
  std::set<std::string> claimed = {first, second};
  EXPECT_EQ(claimed, (std::set<std::string>{a.id, b.id}));
}

TEST_P(DatastoreConformanceTest, DeleteJobRemovesItsEndedWebhookDeliveries) {
  auto [job, task] = MakeJobWithTask();
  auto [kept_job, kept_task] = MakeJobWithTask();
  WebhookDelivery gone = NewDelivery(job.id, At(10));
  gone.state = DeliveryState::kFailed;  // a PENDING one outlives its job (above)
  gone.completed_at = At(11);
  WebhookDelivery kept = NewDelivery(kept_job.id, At(10));
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) {
    return tx.CreateWebhookDeliveries({gone, kept});
  })));
  ASSERT_TRUE(IsOk(ds().DeleteJob(job.id)));
  auto left = Deliveries(ds(), job.id);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
  EXPECT_EQ(DeliveryIds(*Deliveries(ds(), kept_job.id)), std::vector<std::string>{kept.id});
}

// ---- Retention ----------------------------------------------------------------------

TEST_P(DatastoreConformanceTest, DeleteLogPartsBeforeDeletesTheOlderOnesOldestFirstInBatches) {
  // Long before any other test's log parts (a shared database keeps those).
  const std::int64_t base = -1000LL * 3600 * 24 * 365;
  auto [job, task_row] = MakeJobWithTask();
  const TaskRecord task = task_row;
  LogPart first = NewLogPart(task, 1, At(base + 10));
  LogPart second = NewLogPart(task, 2, At(base + 20));
  LogPart exact = NewLogPart(task, 3, At(base + 30));
  LogPart later = NewLogPart(task, 4, At(base + 40));
  for (const LogPart& p : {first, second, exact, later}) ASSERT_TRUE(IsOk(ds().CreateLogPart(p)));
  auto sweep = [&](int limit) {
    int n = -1;
    EXPECT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
      BATON_ASSIGN_OR_RETURN_CONFORMANCE(n, tx.DeleteLogPartsBefore(At(base + 30), limit));
      return Status::Ok();
    })));
    return n;
  };
  auto numbers = [&] {
    std::vector<int> out;
    auto parts = ds().TaskLogParts(task.id, 1, 100);
    for (const LogPart& p : parts->items) out.push_back(p.number);
    return out;
  };
  EXPECT_EQ(sweep(1), 1);  // the oldest first
  EXPECT_EQ(numbers(), (std::vector<int>{4, 3, 2}));
  EXPECT_EQ(sweep(10), 1);
  EXPECT_EQ(sweep(10), 0);  // created at `before` exactly, or later: kept
  EXPECT_EQ(numbers(), (std::vector<int>{4, 3}));
  EXPECT_EQ(sweep(0), 0);
}

TEST_P(DatastoreConformanceTest, FinishedJobsCreatedBeforeAreTheOldFinishedTopLevelOnes) {
  const std::int64_t base = -1000LL * 3600 * 24 * 365;
  std::vector<JobRecord> jobs;
  auto make = [&](std::int64_t at, JobState state, const std::string& parent = "") {
    JobRecord job = NewJob(SimpleJob("old " + UniqueWord()), At(base + at), state);
    job.parent_id = parent;
    EXPECT_TRUE(IsOk(ds().CreateJob(job)));
    return job.id;
  };
  std::string completed = make(10, JobState::kCompleted);
  std::string failed = make(20, JobState::kFailed);
  std::string cancelled = make(5, JobState::kCancelled);
  std::string running = make(1, JobState::kRunning);
  std::string pending = make(2, JobState::kPending);
  std::string sub = make(3, JobState::kCompleted, "0123456789abcdef0123456789abcdef");
  std::string exact = make(30, JobState::kCompleted);
  std::vector<std::string> all, one;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(all, tx.FinishedJobsCreatedBefore(At(base + 30), 100));
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(one, tx.FinishedJobsCreatedBefore(At(base + 30), 1));
    return Status::Ok();
  })));
  EXPECT_EQ(all, (std::vector<std::string>{cancelled, completed, failed}));
  EXPECT_EQ(one, (std::vector<std::string>{cancelled}));
  // Removed as the sweep does, so that a shared database does not keep them.
  for (const std::string& id : {completed, failed, cancelled, running, pending, sub, exact}) {
    EXPECT_TRUE(IsOk(ds().DeleteJob(id)));
  }
}

// ---- Scheduled jobs -------------------------------------------------------------------

inline ScheduledJobRecord NewScheduledJob(TimePoint created_at) {
  ScheduledJobRecord s;
  s.id = NewId();
  s.job = FullJob();
  s.schedule.cron = "*/5 * * * *";
  s.schedule.timezone = "Europe/Paris";
  s.schedule.overlap = OverlapPolicy::kBufferOne;
  s.schedule.catch_up_window = std::chrono::minutes(90);
  s.schedule.catch_up = CatchUpFire::kLatest;
  s.created_by = "someone";
  s.created_at = created_at;
  s.updated_at = created_at + std::chrono::milliseconds(1);
  s.last_tick_at = created_at;
  s.next_tick_at = created_at + std::chrono::minutes(5);
  return s;
}

inline Result<ScheduledJobRecord> ReadScheduledJob(Datastore& ds, const std::string& id) {
  std::optional<ScheduledJobRecord> out;
  Status s = ds.Transact([&](Transaction& tx) -> Status {
    auto got = tx.GetScheduledJob(id);
    if (!got.ok()) return got.status();
    out = std::move(*got);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return std::move(*out);
}

TEST_P(DatastoreConformanceTest, ScheduledJobRoundTripsEveryField) {
  ScheduledJobRecord s = NewScheduledJob(At(0));
  s.buffered_tick_at = At(7);
  s.last_job_id = NewId();
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) { return tx.CreateScheduledJob(s); })));
  Reopen();
  auto got = ReadScheduledJob(ds(), s.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, s);
  // Every field changes.
  s.state = ScheduleState::kPaused;
  s.schedule = ScheduleSpec{"0 9 * * MON", "", OverlapPolicy::kSkip, std::chrono::seconds(5),
                            CatchUpFire::kAll};
  s.job = SimpleJob("renamed");
  s.created_by = "";
  s.updated_at = At(100);
  s.last_tick_at = At(200);
  s.next_tick_at = At(300);
  s.buffered_tick_at.reset();
  s.last_job_id = NewId();
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) { return tx.UpdateScheduledJob(s); })));
  got = ReadScheduledJob(ds(), s.id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, s);
}

TEST_P(DatastoreConformanceTest, ScheduledJobIdsAreUniqueAndUnknownOnesAreNotFound) {
  ScheduledJobRecord s = NewScheduledJob(At(0));
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) { return tx.CreateScheduledJob(s); })));
  EXPECT_EQ(ds().Transact([&](Transaction& tx) { return tx.CreateScheduledJob(s); }).code(),
            StatusCode::kAlreadyExists);
  ScheduledJobRecord unknown = NewScheduledJob(At(0));
  EXPECT_EQ(ReadScheduledJob(ds(), unknown.id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ds().Transact([&](Transaction& tx) { return tx.UpdateScheduledJob(unknown); }).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(
      ds().Transact([&](Transaction& tx) { return tx.DeleteScheduledJob(unknown.id); }).code(),
      StatusCode::kNotFound);
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) { return tx.DeleteScheduledJob(s.id); })));
  EXPECT_EQ(ReadScheduledJob(ds(), s.id).status().code(), StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, ScheduledJobsListNewestFirstInPages) {
  // Created later than anything else in a shared database, so they are the first page.
  const TimePoint base = At(0) + std::chrono::hours(24 * 365 * 50);
  std::vector<ScheduledJobRecord> made;
  for (int i = 0; i < 3; ++i) made.push_back(NewScheduledJob(base + std::chrono::seconds(i)));
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    for (const auto& s : made) BATON_RETURN_IF_ERROR(tx.CreateScheduledJob(s));
    return Status::Ok();
  })));
  std::optional<Page<ScheduledJobRecord>> first, second;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto p1, tx.ListScheduledJobs(1, 2));
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto p2, tx.ListScheduledJobs(2, 2));
    first = std::move(p1);
    second = std::move(p2);
    return Status::Ok();
  })));
  ASSERT_EQ(first->items.size(), 2u);
  EXPECT_EQ(first->items[0].id, made[2].id);
  EXPECT_EQ(first->items[1].id, made[1].id);
  EXPECT_EQ(first->items[0], made[2]);
  ASSERT_FALSE(second->items.empty());
  EXPECT_EQ(second->items[0].id, made[0].id);
  EXPECT_EQ(first->number, 1);
  EXPECT_GE(first->total_items, 3);
  EXPECT_EQ(first->total_pages, static_cast<int>((first->total_items + 1) / 2));
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    for (const auto& s : made) BATON_RETURN_IF_ERROR(tx.DeleteScheduledJob(s.id));
    return Status::Ok();
  })));
}

// A viewer's list holds the scheduled jobs they may see (MayAccess): their own, those
// naming them or one of their roles, those without permissions; pages and totals agree.
TEST_P(DatastoreConformanceTest, ScheduledJobsListedToAViewerAreThoseTheyMaySee) {
  const std::string me = "viewer-" + NewId(), role = "role-" + NewId();
  auto made = [&](std::string creator, std::vector<Permission> permissions) {
    ScheduledJobRecord s = NewScheduledJob(At(0));
    s.created_by = creator;
    s.job.created_by = creator;
    s.job.permissions = std::move(permissions);
    return s;
  };
  const ScheduledJobRecord own = made(me, {{.user = "someone-else"}});
  const ScheduledJobRecord named = made("other", {{.user = me}});
  const ScheduledJobRecord by_role = made("other", {{.role = role}});
  const ScheduledJobRecord open = made("other", {});
  const ScheduledJobRecord hidden = made("other", {{.user = me + "x"}, {.role = role + "x"}});
  const std::vector<ScheduledJobRecord> all = {own, named, by_role, open, hidden};
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    for (const auto& s : all) BATON_RETURN_IF_ERROR(tx.CreateScheduledJob(s));
    return Status::Ok();
  })));
  auto seen = [&](const std::optional<Principal>& viewer) {
    std::set<std::string> ids;
    std::int64_t total = -1;
    EXPECT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
      for (int page = 1;; ++page) {
        BATON_ASSIGN_OR_RETURN_CONFORMANCE(auto p, tx.ListScheduledJobs(page, 3, viewer));
        total = p.total_items;
        for (const auto& s : p.items) ids.insert(s.id);
        if (page >= p.total_pages) return Status::Ok();
      }
    })));
    EXPECT_EQ(static_cast<std::int64_t>(ids.size()), total);
    return ids;
  };
  std::set<std::string> mine = seen(Principal{me, {role}});
  EXPECT_TRUE(mine.contains(own.id));
  EXPECT_TRUE(mine.contains(named.id));
  EXPECT_TRUE(mine.contains(by_role.id));
  EXPECT_TRUE(mine.contains(open.id));
  EXPECT_FALSE(mine.contains(hidden.id));
  std::set<std::string> admins = seen(Principal{"root", {std::string(kAdminRole)}});
  std::set<std::string> everyone = seen(std::nullopt);
  EXPECT_TRUE(admins.contains(hidden.id));
  EXPECT_EQ(admins, everyone);
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    for (const auto& s : all) BATON_RETURN_IF_ERROR(tx.DeleteScheduledJob(s.id));
    return Status::Ok();
  })));
}

TEST_P(DatastoreConformanceTest, DueScheduledJobsAreTheActiveDueOrBufferedOnes) {
  ScheduledJobRecord due = NewScheduledJob(At(0));
  due.next_tick_at = At(100);
  ScheduledJobRecord exactly = NewScheduledJob(At(0));
  exactly.next_tick_at = At(200);
  ScheduledJobRecord later = NewScheduledJob(At(0));
  later.next_tick_at = At(201);
  ScheduledJobRecord paused = NewScheduledJob(At(0));
  paused.next_tick_at = At(100);
  paused.state = ScheduleState::kPaused;
  ScheduledJobRecord buffered = NewScheduledJob(At(0));
  buffered.next_tick_at = At(5000);
  buffered.buffered_tick_at = At(50);
  std::vector<ScheduledJobRecord> all = {later, due, exactly, paused, buffered};
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    for (const auto& s : all) BATON_RETURN_IF_ERROR(tx.CreateScheduledJob(s));
    return Status::Ok();
  })));
  std::vector<std::string> ids;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN_CONFORMANCE(ids, tx.DueScheduledJobs(At(200), 100000));
    return Status::Ok();
  })));
  std::vector<std::string> mine;
  for (const std::string& id : ids) {
    for (const auto& s : all) {
      if (s.id == id) mine.push_back(id);
    }
  }
  EXPECT_EQ(mine, (std::vector<std::string>{due.id, exactly.id, buffered.id}));
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
    for (const auto& s : all) BATON_RETURN_IF_ERROR(tx.DeleteScheduledJob(s.id));
    return Status::Ok();
  })));
}

TEST_P(DatastoreConformanceTest, NextScheduledTickIsTheEarliestActiveTickOrNowWhenOneIsHeld) {
  // Earlier than any other test's rows, so the answer is this row's in a shared database.
  const TimePoint early = At(0) - std::chrono::hours(24 * 365 * 20);
  const TimePoint earlier = early - std::chrono::hours(24 * 365 * 5);
  ScheduledJobRecord s = NewScheduledJob(early);
  s.next_tick_at = early;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) { return tx.CreateScheduledJob(s); })));
  auto next = [&](TimePoint now) {
    std::optional<TimePoint> out;
    EXPECT_TRUE(IsOk(ds().Transact([&](Transaction& tx) -> Status {
      BATON_ASSIGN_OR_RETURN_CONFORMANCE(out, tx.NextScheduledTick(now));
      return Status::Ok();
    })));
    return out;
  };
  EXPECT_EQ(next(At(0)), early);
  s.buffered_tick_at = early;  // held: a look is needed now
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) { return tx.UpdateScheduledJob(s); })));
  EXPECT_EQ(next(earlier), earlier);
  s.state = ScheduleState::kPaused;
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) { return tx.UpdateScheduledJob(s); })));
  std::optional<TimePoint> without = next(earlier);
  EXPECT_TRUE(!without.has_value() || *without > early);
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) { return tx.DeleteScheduledJob(s.id); })));
}

// What a coordinator's firing does, from many threads at once (coordinators): read the
// row (locked), create the tick's job unless the tick is taken, advance the row.
TEST_P(DatastoreConformanceTest, ConcurrentFiresOfOneTickCreateOneJob) {
  ScheduledJobRecord s = NewScheduledJob(At(0));
  s.next_tick_at = At(60000);
  ASSERT_TRUE(IsOk(ds().Transact([&](Transaction& tx) { return tx.CreateScheduledJob(s); })));
  constexpr int kThreads = 8;
  std::atomic<int> fired{0};
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        bool created = false;
        Status st = ds().Transact([&](Transaction& tx) -> Status {
          created = false;
          BATON_ASSIGN_OR_RETURN_CONFORMANCE(ScheduledJobRecord row, tx.GetScheduledJob(s.id));
          if (row.next_tick_at > At(60000) || row.last_tick_at >= At(60000)) return Status::Ok();
          JobRecord job = NewJob(SimpleJob("tick"), At(60000));
          BATON_RETURN_IF_ERROR(tx.CreateJob(job));
          row.last_tick_at = At(60000);
          row.next_tick_at = At(120000);
          row.last_job_id = job.id;
          BATON_RETURN_IF_ERROR(tx.UpdateScheduledJob(row));
          created = true;
          return Status::Ok();
        });
        if (!st.ok()) failures.fetch_add(1);
        if (st.ok() && created) fired.fetch_add(1);
      });
    }
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(fired.load(), 1);
  auto got = ReadScheduledJob(ds(), s.id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->last_tick_at, At(60000));
  EXPECT_TRUE(ds().GetJob(got->last_job_id).ok());
}

// ---- Users, API keys and who sees a job (docs/auth.md) ------------------------------

TEST_P(DatastoreConformanceTest, UserRoundTripsAndATakenUsernameIsAlreadyExists) {
  std::string name = "u" + UniqueWord();
  UserRecord user{.id = NewId(),
                  .username = name,
                  .name = "Ann Example",
                  .password_hash = "$2b$04$abcdefghijklmnopqrstuuOPQRSTUVWXYZ0123456789abcdefghi",
                  .roles = {"admin", "ops"},
                  .created_at = At(5)};
  ASSERT_TRUE(IsOk(ds().CreateUser(user)));
  Reopen();
  Result<UserRecord> read = ds().GetUser(name);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, user);
  UserRecord again = user;
  again.id = NewId();
  EXPECT_EQ(ds().CreateUser(again).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ds().GetUser("u" + UniqueWord()).status().code(), StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, ApiKeysAreFoundByHashListedPerUserAndRevokedOnce) {
  std::string ann = "u" + UniqueWord(), bob = "u" + UniqueWord();
  ApiKeyRecord a1{.id = NewId(),
                  .username = ann,
                  .name = "ci",
                  .key_hash = NewId() + NewId(),
                  .created_at = At(1)};
  ApiKeyRecord a2{.id = NewId(),
                  .username = ann,
                  .name = "laptop",
                  .key_hash = NewId() + NewId(),
                  .created_at = At(2)};
  ApiKeyRecord b1{.id = NewId(),
                  .username = bob,
                  .name = "",
                  .key_hash = NewId() + NewId(),
                  .created_at = At(3)};
  for (const ApiKeyRecord& k : {a2, a1, b1}) ASSERT_TRUE(IsOk(ds().CreateApiKey(k)));
  ApiKeyRecord same_hash = b1;
  same_hash.id = NewId();
  EXPECT_EQ(ds().CreateApiKey(same_hash).code(), StatusCode::kAlreadyExists);
  Reopen();
  Result<ApiKeyRecord> found = ds().GetApiKeyByHash(a2.key_hash);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, a2);
  EXPECT_EQ(ds().GetApiKeyByHash(NewId()).status().code(), StatusCode::kNotFound);
  Result<std::vector<ApiKeyRecord>> anns = ds().ApiKeys(ann);
  ASSERT_TRUE(anns.ok());
  EXPECT_EQ(*anns, (std::vector<ApiKeyRecord>{a1, a2}));  // oldest first
  Result<std::vector<ApiKeyRecord>> all = ds().ApiKeys("");
  ASSERT_TRUE(all.ok());
  EXPECT_GE(all->size(), 3u);

  ASSERT_TRUE(IsOk(ds().RevokeApiKey(a1.id, At(10))));
  ASSERT_TRUE(IsOk(ds().RevokeApiKey(a1.id, At(20))));  // keeps the first time
  Result<ApiKeyRecord> revoked = ds().GetApiKeyByHash(a1.key_hash);
  ASSERT_TRUE(revoked.ok());
  EXPECT_EQ(revoked->revoked_at, std::optional<TimePoint>(At(10)));
  EXPECT_EQ(ds().RevokeApiKey(NewId(), At(1)).code(), StatusCode::kNotFound);
}

TEST_P(DatastoreConformanceTest, ListJobsShowsAViewerOnlyTheJobsTheyMaySeeWithRightPages) {
  std::string word = UniqueWord();
  int at = 0;
  auto make = [&](std::vector<Permission> permissions, std::string created_by) {
    Job def = SimpleJob("perm " + word);
    def.permissions = std::move(permissions);
    def.created_by = std::move(created_by);
    JobRecord job = NewJob(def, At(++at));
    EXPECT_TRUE(IsOk(ds().CreateJob(job)));
    return job.id;
  };
  std::string open = make({}, "zed");
  std::string anns = make({{"", "zed"}}, "ann");                   // created by ann
  std::string named = make({{"", "ann"}}, "zed");                  // names ann
  std::string ops = make({{"ops", ""}}, "zed");                    // ann's role
  std::string hidden = make({{"dev", ""}, {"", "annie"}}, "zed");  // neither
  std::string hidden2 = make({{"", "zed"}}, "zed");
  Reopen();
  Principal ann{"ann", {"ops"}};
  Result<Page<JobRecord>> page = ds().ListJobs({.q = word, .page = 1, .size = 3, .viewer = ann});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->total_items, 4);
  EXPECT_EQ(page->total_pages, 2);
  EXPECT_EQ(Ids(page->items), (std::vector<std::string>{ops, named, anns}));
  page = ds().ListJobs({.q = word, .page = 2, .size = 3, .viewer = ann});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(Ids(page->items), (std::vector<std::string>{open}));
  // An admin, and no viewer (authentication off), see all six.
  page = ds().ListJobs({.q = word, .size = 10, .viewer = Principal{"root", {"admin"}}});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->total_items, 6);
  page = ds().ListJobs({.q = word, .size = 10});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(Ids(page->items), (std::vector<std::string>{hidden2, hidden, ops, named, anns, open}));
  // The definition keeps its creator.
  EXPECT_EQ(ds().GetJob(anns)->job.created_by, "ann");
}

}  // namespace datastore_conformance

// ---- Secrets at rest ----------------------------------------------------------------

// A backend's stores opened with keys, over databases of their own, and the bytes it
// stores, for looking behind the datastore's back:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, SecretsAtRestConformanceTest,
//                            ::testing::Values(SecretsFactory{"file", ...}), ...);
struct SecretsFactory {
  std::string name;
  // A new, empty database: its address, for `open` and `raw`.
  std::function<std::string()> fresh;
  // A store on the database at `where`, with `keys` (null: none).
  std::function<std::unique_ptr<Datastore>(const std::string& where,
                                           std::shared_ptr<const crypto::Keyring> keys)>
      open;
  // Everything stored of the database at `where`, as bytes: the SQLite file and its WAL,
  // or the text of every row of PostgreSQL's tables.
  std::function<std::string(const std::string& where)> raw;
};

inline std::string SecretsFactoryName(const ::testing::TestParamInfo<SecretsFactory>& info) {
  return info.param.name;
}

class SecretsAtRestConformanceTest : public ::testing::TestWithParam<SecretsFactory> {
 protected:
  static std::shared_ptr<const crypto::Keyring> Keys(std::vector<crypto::Key> keys) {
    Result<crypto::Keyring> ring = crypto::Keyring::Make(std::move(keys));
    EXPECT_TRUE(ring.ok()) << ring.status().ToString();
    return std::make_shared<const crypto::Keyring>(std::move(*ring));
  }
  static crypto::Key NewKey() { return *crypto::GenerateKey(); }

  std::unique_ptr<Datastore> Open(std::shared_ptr<const crypto::Keyring> keys) {
    return GetParam().open(where_, std::move(keys));
  }
  std::string Raw() { return GetParam().raw(where_); }

  // A unique plain value, to look for in the raw bytes.
  static std::string Secret(std::string_view what) {
    return fmt::format("plain-{}-{}", what, NewId().substr(16));
  }

  // A job with a secret in every place one is stored (secrets.h's list), its task row
  // (evaluated: the env holds the value) and a webhook delivery; `secrets` gets each
  // plain value.
  struct Stored {
    JobRecord job;
    TaskRecord task;
    WebhookDelivery delivery;
  };
  static Stored MakeSecretJob(std::vector<std::string>& secrets) {
    auto add = [&](std::string_view what) {
      secrets.push_back(Secret(what));
      return secrets.back();
    };
    Job job = datastore_conformance::SimpleJob("secretive");
    job.secrets = {{"db", add("job-secret")}};
    Webhook hook;
    hook.url = "http://127.0.0.1:9/hook";
    hook.secret = add("hook-secret");
    job.webhooks = {hook};
    job.tasks[0].env = {{"API_TOKEN", add("env-token")}, {"WHO", "world"}};
    job.tasks[0].registry = Registry{"user", add("registry-password")};
    Task sub;
    sub.name = "sub";
    sub.subjob = SubJob{};
    sub.subjob->name = "inner";
    sub.subjob->secrets = {{"inner", add("subjob-secret")}};
    sub.subjob->tasks = {datastore_conformance::RunnableTask("inner-task")};
    sub.subjob->tasks[0].env = {{"DB_PASSWORD", add("subjob-env-password")}};
    job.tasks.push_back(sub);
    Stored s;
    s.job = datastore_conformance::NewJob(job, datastore_conformance::At(0));
    s.job.context = {{"inputs", {{"who", "world"}}},
                     {"secrets", {{"db", job.secrets["db"]}}},
                     {"tasks", nlohmann::json::object()}};
    s.task = datastore_conformance::NewTask(s.job.id, 1, datastore_conformance::At(1));
    // A key that does not look secret may hold one too, evaluated from `{{ secrets.x }}`.
    s.task.task.env = {{"MY_SECRET", add("task-row-secret")}, {"DB", add("task-row-db")}};
    s.task.task.name = "visible";
    AuxTask side;
    side.name = "side";
    side.image = "nginx";
    side.env = {{"SIDE_ACCESS_KEY", add("sidecar-access-key")}};
    s.task.task.sidecars = {side};
    s.delivery = datastore_conformance::NewDelivery(s.job.id, datastore_conformance::At(2));
    s.delivery.secret = add("delivery-secret");
    s.delivery.headers = {{"Authorization", "Bearer " + add("delivery-header")}};
    return s;
  }

  static Status Store(Datastore& ds, const Stored& s) {
    BATON_RETURN_IF_ERROR(ds.CreateJob(s.job));
    BATON_RETURN_IF_ERROR(ds.CreateTask(s.task));
    return ds.Transact([&](Transaction& tx) { return tx.CreateWebhookDeliveries({s.delivery}); });
  }

  // Reads back the three rows through `ds` and compares them with what was stored.
  static void ExpectReadsBack(Datastore& ds, const Stored& s) {
    Result<JobRecord> job = ds.GetJob(s.job.id);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_EQ(job->job, s.job.job);
    EXPECT_EQ(job->context, s.job.context);
    Result<TaskRecord> task = ds.GetTask(s.task.id);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    EXPECT_EQ(task->task, s.task.task);
    Result<std::vector<WebhookDelivery>> deliveries =
        datastore_conformance::Deliveries(ds, s.job.id);
    ASSERT_TRUE(deliveries.ok()) << deliveries.status().ToString();
    ASSERT_EQ(deliveries->size(), 1u);
    EXPECT_EQ(deliveries->front().secret, s.delivery.secret);
    EXPECT_EQ(deliveries->front().headers, s.delivery.headers);
    // Through a transaction too (the scheduler's path): the definition, the context.
    Status read = ds.Transact([&](Transaction& tx) -> Status {
      BATON_ASSIGN_OR_RETURN_CONFORMANCE(std::shared_ptr<const Job> definition,
                                         tx.GetJobDefinition(s.job.id));
      EXPECT_EQ(*definition, s.job.job);
      std::size_t bytes = 0;
      BATON_ASSIGN_OR_RETURN_CONFORMANCE(nlohmann::json context,
                                         tx.GetJobContext(s.job.id, &bytes));
      EXPECT_EQ(context, s.job.context);
      BATON_ASSIGN_OR_RETURN_CONFORMANCE(TaskRecord row, tx.GetTask(s.task.id));
      EXPECT_EQ(row.task, s.task.task);
      return Status::Ok();
    });
    EXPECT_TRUE(read.ok()) << read.ToString();
  }

  void SetUp() override { where_ = GetParam().fresh(); }

  std::string where_;
};

// Binaries that include this header for the main suite need not instantiate this one.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SecretsAtRestConformanceTest);

TEST_P(SecretsAtRestConformanceTest, StoredSecretsAreNotInTheRawBytesAndReadBackPlain) {
  auto keys = Keys({NewKey()});
  std::vector<std::string> secrets;
  Stored s = MakeSecretJob(secrets);
  {
    auto ds = Open(keys);
    ASSERT_TRUE(ds);
    ASSERT_TRUE(Store(*ds, s).ok());
    // An update of the context (the scheduler's UpdateJobStateAndContext) and of the
    // task row write them encrypted too.
    s.job.context["tasks"]["first"] = "done";
    ASSERT_TRUE(ds->Transact([&](Transaction& tx) -> Status {
                    BATON_ASSIGN_OR_RETURN_CONFORMANCE(JobRecord row, tx.GetJob(s.job.id));
                    row.context = s.job.context;
                    return tx.UpdateJobStateAndContext(row);
                  }).ok());
    std::string more = Secret("updated-task-secret");
    secrets.push_back(more);
    s.task.task.env["NEW_TOKEN"] = more;
    ASSERT_TRUE(ds->UpdateTask(s.task.id, [&](TaskRecord& t) {
                    t.task = s.task.task;
                    return Status::Ok();
                  }).ok());
    ExpectReadsBack(*ds, s);
  }
  const std::string raw = Raw();
  ASSERT_FALSE(raw.empty());
  for (const std::string& secret : secrets) {
    EXPECT_EQ(raw.find(secret), std::string::npos) << secret << " is stored in plain";
  }
  EXPECT_NE(raw.find(std::string(crypto::kEnvelopePrefix) + keys->primary_id()), std::string::npos);
  EXPECT_NE(raw.find("visible"), std::string::npos);  // only the secret values are encrypted
  auto again = Open(keys);
  ExpectReadsBack(*again, s);
}

TEST_P(SecretsAtRestConformanceTest, ReadingWithoutTheKeyIsAnErrorNamingItNeverTheSecret) {
  auto keys = Keys({NewKey()});
  std::vector<std::string> secrets;
  Stored s = MakeSecretJob(secrets);
  {
    auto ds = Open(keys);
    ASSERT_TRUE(Store(*ds, s).ok());
  }
  for (auto other : {std::shared_ptr<const crypto::Keyring>(), Keys({NewKey()})}) {
    auto ds = Open(other);
    Result<JobRecord> job = ds->GetJob(s.job.id);
    ASSERT_FALSE(job.ok());
    EXPECT_NE(job.status().message().find(keys->primary_id()), std::string::npos)
        << job.status().ToString();
    for (const std::string& secret : secrets) {
      EXPECT_EQ(job.status().message().find(secret), std::string::npos);
    }
    Result<TaskRecord> task = ds->GetTask(s.task.id);
    ASSERT_FALSE(task.ok());
    EXPECT_NE(task.status().message().find(keys->primary_id()), std::string::npos);
    EXPECT_FALSE(datastore_conformance::Deliveries(*ds, s.job.id).ok());
  }
}

TEST_P(SecretsAtRestConformanceTest, RotationReencryptsEverySecretUnderThePrimaryKeyOnce) {
  const crypto::Key old_key = NewKey(), new_key = NewKey();
  auto old_keys = Keys({old_key});
  std::vector<std::string> secrets;
  Stored under_old = MakeSecretJob(secrets);
  Stored in_plain = MakeSecretJob(secrets);  // stored before encryption was configured
  {
    auto ds = Open(old_keys);
    ASSERT_TRUE(Store(*ds, under_old).ok());
    auto plain = Open(nullptr);
    ASSERT_TRUE(Store(*plain, in_plain).ok());
  }
  auto rotated = Keys({new_key, old_key});
  {
    auto ds = Open(rotated);
    Result<RotationReport> report = RotateSecrets(*ds, /*batch=*/1);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    // Two jobs, their two task rows and two deliveries: every row held a secret.
    EXPECT_EQ(report->read, 6);
    EXPECT_EQ(report->rewritten, 6);
    // Again: nothing left to do (and a run interrupted half-way just continues so).
    Result<RotationReport> again = RotateSecrets(*ds, /*batch=*/4);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->read, 6);
    EXPECT_EQ(again->rewritten, 0);
  }
  const std::string raw = Raw();
  for (const std::string& secret : secrets) {
    EXPECT_EQ(raw.find(secret), std::string::npos) << secret << " is stored in plain";
  }
  EXPECT_EQ(raw.find(std::string(crypto::kEnvelopePrefix) + crypto::KeyId(old_key)),
            std::string::npos);
  // The old key can go: everything reads with the new one alone.
  auto ds = Open(Keys({new_key}));
  ExpectReadsBack(*ds, under_old);
  ExpectReadsBack(*ds, in_plain);
}

TEST_P(SecretsAtRestConformanceTest, RotationWithoutKeysOrWithAMissingKeyFailsClearly) {
  auto keys = Keys({NewKey()});
  std::vector<std::string> secrets;
  Stored s = MakeSecretJob(secrets);
  {
    auto ds = Open(keys);
    ASSERT_TRUE(Store(*ds, s).ok());
  }
  Result<RotationReport> none = RotateSecrets(*Open(nullptr), 10);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("datastore.encryption.key"), std::string::npos);
  Result<RotationReport> wrong = RotateSecrets(*Open(Keys({NewKey()})), 10);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find(keys->primary_id()), std::string::npos);
  // Nothing was changed: the right key still reads everything.
  ExpectReadsBack(*Open(keys), s);
}

}  // namespace baton::testing

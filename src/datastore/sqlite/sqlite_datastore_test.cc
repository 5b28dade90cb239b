#include "datastore/sqlite/sqlite_datastore.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <thread>

#include "base/log.h"
#include "conformance/datastore_conformance.h"
#include "core/auth.h"
#include "datastore/sql/schema.h"

namespace baton {
namespace {

namespace fs = std::filesystem;
using testing::DatastoreConformanceTest;
using testing::DatastoreFactory;
using testing::DatastoreFactoryName;
using testing::SecretsAtRestConformanceTest;
using testing::SecretsFactory;
using testing::SecretsFactoryName;
using namespace testing::datastore_conformance;

// One scratch directory for the whole run, removed at the end.
class ScratchDir : public ::testing::Environment {
 public:
  // Quiet: every fresh database logs its migrations.
  void SetUp() override { log::Configure(log::Level::kWarn, log::Format::kText); }
  static const fs::path& Root() {
    static const fs::path root = [] {
      fs::path dir =
          fs::temp_directory_path() / ("baton-sqlite-test-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(std::random_device{}()));
      fs::create_directories(dir);
      return dir;
    }();
    return root;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(Root(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kScratch =
    ::testing::AddGlobalTestEnvironment(new ScratchDir);

// A database path in a directory of its own (the datastore creates the directory).
std::string FreshPath() {
  static std::atomic<int> next{0};
  return (ScratchDir::Root() / ("db" + std::to_string(next.fetch_add(1))) / "baton.db").string();
}

std::unique_ptr<SqliteDatastore> OpenStore(SqliteOptions options) {
  auto store = SqliteDatastore::Open(std::move(options));
  if (!store.ok()) {
    ADD_FAILURE() << store.status().ToString();
    return nullptr;
  }
  return std::move(*store);
}

std::unique_ptr<SqliteDatastore> OpenStore(const std::string& path) {
  return OpenStore(SqliteOptions{.path = path});
}

std::shared_ptr<const crypto::Keyring> TestKeyring() {
  static const auto keys =
      std::make_shared<const crypto::Keyring>(*crypto::Keyring::Make({*crypto::GenerateKey()}));
  return keys;
}

// The bytes of a file, "" when it does not exist.
std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

INSTANTIATE_TEST_SUITE_P(
    Sqlite, SecretsAtRestConformanceTest,
    ::testing::Values(SecretsFactory{
        "file", [] { return FreshPath(); },
        [](const std::string& path,
           std::shared_ptr<const crypto::Keyring> keys) -> std::unique_ptr<Datastore> {
          return OpenStore(SqliteOptions{.path = path, .keyring = std::move(keys)});
        },
        // The database file and its write-ahead log, where a commit lands first.
        [](const std::string& path) { return FileBytes(path) + FileBytes(path + "-wal"); }}),
    SecretsFactoryName);

INSTANTIATE_TEST_SUITE_P(
    Sqlite, DatastoreConformanceTest,
    ::testing::Values(
        // Every case again with secrets encrypted at rest.
        DatastoreFactory{
            "file_encrypted",
            [] { return OpenStore(SqliteOptions{.path = FreshPath(), .keyring = TestKeyring()}); },
            nullptr, true},
        DatastoreFactory{"file", [] { return OpenStore(FreshPath()); }, nullptr, true},
        DatastoreFactory{"memory", [] { return OpenStore(":memory:"); }, nullptr, true},
        DatastoreFactory{"file_reopened", [] { return OpenStore(FreshPath()); },
                         [](std::unique_ptr<Datastore> store) -> std::unique_ptr<Datastore> {
                           std::string path = static_cast<SqliteDatastore&>(*store).path();
                           store.reset();  // closes every connection
                           return OpenStore(path);
                         },
                         true}),
    DatastoreFactoryName);

// A plain sqlite3 connection, for looking behind the datastore's back.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void Exec(const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << sql << ": " << (error ? error : "");
    sqlite3_free(error);
  }
  // Every row, each column as text ("NULL" for null), columns joined by '|'.
  std::vector<std::string> Rows(const std::string& sql) {
    std::vector<std::string> rows;
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_);
    while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
        if (i > 0) row += '|';
        const unsigned char* text = sqlite3_column_text(stmt, i);
        row += text != nullptr ? reinterpret_cast<const char*>(text) : "NULL";
      }
      rows.push_back(row);
    }
    sqlite3_finalize(stmt);
    return rows;
  }

 private:
  sqlite3* db_ = nullptr;
};

TEST(SqliteDatastoreTest, FileDatabaseIsInWalMode) {
  std::string path = FreshPath();
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(RawDb(path).Rows("PRAGMA journal_mode"), std::vector<std::string>{"wal"});
  EXPECT_TRUE(fs::exists(path));
}

// The mode bits of `path`'s permissions, or -1 when it does not exist.
int ModeOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

TEST(SqliteDatastoreTest, DatabaseAndItsWalAndShmAreReadableByTheirOwnerOnly) {
  // Whatever the umask: the file holds every password hash and encrypted secret.
  const mode_t old_umask = ::umask(022);
  std::string path = FreshPath();
  auto store = OpenStore(path);
  ::umask(old_umask);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(fs::exists(path + "-wal"));
  ASSERT_TRUE(fs::exists(path + "-shm"));
  EXPECT_EQ(ModeOf(path), 0600);
  EXPECT_EQ(ModeOf(path + "-wal"), 0600);
  EXPECT_EQ(ModeOf(path + "-shm"), 0600);
}

TEST(SqliteDatastoreTest, OpeningTightensALooserDatabaseFile) {
  std::string path = FreshPath();
  { ASSERT_NE(OpenStore(path), nullptr); }
  for (const std::string& file : {path, path + "-wal", path + "-shm"}) {
    if (fs::exists(file)) ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  }
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  for (const std::string& file : {path, path + "-wal", path + "-shm"}) {
    if (fs::exists(file)) EXPECT_EQ(ModeOf(file), 0600) << file;
  }
}

TEST(SqliteDatastoreTest, OpensWithFullSynchronousByDefault) {
  // An acknowledged write must survive a power failure: the WAL is fsynced per commit.
  auto store = OpenStore(FreshPath());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->Synchronous(), 2);
  JobRecord job = NewJob(SimpleJob("synced"), At(0));
  EXPECT_TRUE(IsOk(store->CreateJob(job)));
  EXPECT_EQ(*store->GetJob(job.id), job);
}

TEST(SqliteDatastoreTest, SynchronousNormalAndOffAreOptions) {
  auto normal = OpenStore(SqliteOptions{.path = FreshPath(), .synchronous = SqliteSync::kNormal});
  ASSERT_NE(normal, nullptr);
  EXPECT_EQ(*normal->Synchronous(), 1);
  auto off = OpenStore(SqliteOptions{.path = FreshPath(), .synchronous = SqliteSync::kOff});
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(*off->Synchronous(), 0);
}

TEST(SqliteDatastoreTest, OpenWithoutAutoMigrateLeavesTheSchemaAlone) {
  std::string path = FreshPath();
  auto store = OpenStore(SqliteOptions{.path = path, .auto_migrate = false});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), 0);
  EXPECT_TRUE(RawDb(path).Rows("SELECT name FROM sqlite_schema WHERE name = 'jobs'").empty());
  // Unmigrated, the tables are missing: a clear error, not a crash.
  EXPECT_FALSE(store->GetJob(NewId()).ok());
}

TEST(SqliteDatastoreTest, MigrateIsIdempotentAndRecordsEachMigration) {
  std::string path = FreshPath();
  auto store = OpenStore(SqliteOptions{.path = path, .auto_migrate = false});
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(IsOk(store->Migrate()));
  EXPECT_EQ(*store->SchemaVersion(), sql::LatestSchemaVersion());
  ASSERT_TRUE(IsOk(store->Migrate()));
  store.reset();
  store = OpenStore(path);  // auto_migrate: nothing left to do
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(IsOk(store->Migrate()));

  std::vector<std::string> rows =
      RawDb(path).Rows("SELECT version, name, applied_at FROM schema_migrations ORDER BY version");
  auto migrations = sql::Migrations(sql::Dialect::kSqlite);
  ASSERT_EQ(rows.size(), migrations.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string prefix =
        std::to_string(migrations[i].version) + "|" + std::string(migrations[i].name) + "|";
    ASSERT_TRUE(rows[i].starts_with(prefix)) << rows[i];
    EXPECT_TRUE(ParseTime(rows[i].substr(prefix.size())).has_value()) << rows[i];
  }
  // And the schema works.
  JobRecord job = NewJob(SimpleJob("migrated"), At(0));
  EXPECT_TRUE(IsOk(store->CreateJob(job)));
}

// A scheduled job stored at schema version 10 (no access column, no creator column) is
// listed after the migration as its definition's permissions say.
TEST(SqliteDatastoreTest, MigratingFillsInTheAccessOfScheduledJobsStoredBefore) {
  std::string path = FreshPath();
  ScheduledJobRecord s = NewScheduledJob(At(0));
  s.job.created_by = "ann";
  s.job.permissions = {{.user = "carl"}};
  {
    auto store = OpenStore(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(IsOk(store->Transact([&](Transaction& tx) { return tx.CreateScheduledJob(s); })));
  }
  {
    RawDb raw(path);
    raw.Exec("ALTER TABLE scheduled_jobs DROP COLUMN access");
    raw.Exec("UPDATE scheduled_jobs SET created_by = ''");
    // Back to version 10: what versions 11 and later added goes.
    raw.Exec("DROP INDEX tasks_dropped");
    raw.Exec("ALTER TABLE jobs DROP COLUMN steps");
    raw.Exec("ALTER TABLE jobs DROP COLUMN ending");
    raw.Exec("ALTER TABLE tasks DROP COLUMN reason");
    raw.Exec("ALTER TABLE tasks DROP COLUMN steps");
    raw.Exec("DELETE FROM schema_migrations WHERE version >= 11");
  }
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(RawDb(path).Rows("SELECT created_by, access FROM scheduled_jobs"),
            std::vector<std::string>{"ann|" + AccessText(s.job)});
  auto listed = [&](const std::string& user) {
    std::int64_t total = -1;
    EXPECT_TRUE(IsOk(store->Transact([&](Transaction& tx) -> Status {
      BATON_ASSIGN_OR_RETURN(auto page, tx.ListScheduledJobs(1, 10, Principal{user, {}}));
      total = page.total_items;
      return Status::Ok();
    })));
    return total;
  };
  EXPECT_EQ(listed("ann"), 1);
  EXPECT_EQ(listed("carl"), 1);
  EXPECT_EQ(listed("bob"), 0);
}

TEST(SqliteDatastoreTest, RefusesADatabaseWithANewerSchema) {
  std::string path = FreshPath();
  ASSERT_NE(OpenStore(path), nullptr);
  int newer = sql::LatestSchemaVersion() + 1;
  RawDb(path).Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (" +
                   std::to_string(newer) + ", 'from the future', '2040-01-01T00:00:00.000Z')");
  for (bool auto_migrate : {true, false}) {
    auto store = SqliteDatastore::Open(SqliteOptions{.path = path, .auto_migrate = auto_migrate});
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(store.status().message().find("newer than this binary"), std::string::npos)
        << store.status().message();
  }
}

TEST(SqliteDatastoreTest, OpeningAnUnusablePathFails) {
  // A directory is not a database file.
  auto store = SqliteDatastore::Open(SqliteOptions{.path = ScratchDir::Root().string()});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status().ToString();
  EXPECT_EQ(SqliteDatastore::Open(SqliteOptions{}).status().code(), StatusCode::kInvalidArgument);
}

TEST(SqliteDatastoreTest, InMemoryDatabasesAreSeparate) {
  auto a = OpenStore(":memory:");
  auto b = OpenStore(":memory:");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  JobRecord job = NewJob(SimpleJob("only in a"), At(0));
  ASSERT_TRUE(IsOk(a->CreateJob(job)));
  EXPECT_TRUE(a->GetJob(job.id).ok());
  EXPECT_EQ(b->GetJob(job.id).status().code(), StatusCode::kNotFound);
}

TEST(SqliteDatastoreTest, RowsOfAnUnknownJobAreRefused) {
  auto store = OpenStore(FreshPath());
  ASSERT_NE(store, nullptr);
  TaskRecord orphan = NewTask(NewId(), 1, At(0));
  EXPECT_EQ(store->CreateTask(orphan).code(), StatusCode::kFailedPrecondition);
  LogPart part = NewLogPart(orphan, 1, At(0));
  EXPECT_EQ(store->CreateLogPart(part).code(), StatusCode::kFailedPrecondition);
}

TEST(SqliteDatastoreTest, AThrowingModifierIsAnErrorAndChangesNothing) {
  auto store = OpenStore(FreshPath());
  ASSERT_NE(store, nullptr);
  JobRecord job = NewJob(SimpleJob("j"), At(0));
  ASSERT_TRUE(IsOk(store->CreateJob(job)));
  Status status = store->UpdateJob(job.id, [](JobRecord& r) -> Status {
    r.progress = 50;
    throw std::runtime_error("modifier bug");
  });
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("modifier bug"), std::string::npos);
  EXPECT_EQ(*store->GetJob(job.id), job);
}

TEST(SqliteDatastoreTest, CallingBackFromAModifierFailsInsteadOfDeadlocking) {
  auto store = OpenStore(":memory:");
  ASSERT_NE(store, nullptr);
  JobRecord job = NewJob(SimpleJob("j"), At(0));
  ASSERT_TRUE(IsOk(store->CreateJob(job)));
  Status inner;
  Status outer = store->UpdateJob(job.id, [&](JobRecord& r) {
    inner = store->UpdateJob(job.id, [](JobRecord&) { return Status::Ok(); });
    r.progress = 1;
    return inner;
  });
  EXPECT_EQ(inner.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(outer.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->GetJob(job.id)->progress, 0);
}

TEST(SqliteDatastoreTest, TextThatIsNotUtf8IsRefusedWithoutThrowing) {
  auto store = OpenStore(FreshPath());
  ASSERT_NE(store, nullptr);
  JobRecord job = NewJob(SimpleJob("bad \xff name"), At(0));
  EXPECT_EQ(store->CreateJob(job).code(), StatusCode::kInvalidArgument);
  JobRecord context = NewJob(SimpleJob("fine"), At(0));
  context.context["tasks"]["x"] = "\xc3";
  EXPECT_EQ(store->CreateJob(context).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->GetJob(job.id).status().code(), StatusCode::kNotFound);
}

TEST(SqliteDatastoreTest, AnUnreadableRowIsAnInternalError) {
  std::string path = FreshPath();
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  JobRecord job = NewJob(SimpleJob("j"), At(0));
  ASSERT_TRUE(IsOk(store->CreateJob(job)));
  TaskRecord task = NewTask(job.id, 1, At(0));
  ASSERT_TRUE(IsOk(store->CreateTask(task)));
  RawDb raw(path);
  raw.Exec("UPDATE jobs SET context = 'not json' WHERE id = '" + job.id + "'");
  raw.Exec("UPDATE tasks SET definition = '{\"name\": 3' WHERE id = '" + task.id + "'");
  Result<JobRecord> got_job = store->GetJob(job.id);
  EXPECT_EQ(got_job.status().code(), StatusCode::kInternal);
  EXPECT_NE(got_job.status().message().find(job.id), std::string::npos);
  EXPECT_EQ(store->GetTask(task.id).status().code(), StatusCode::kInternal);
  EXPECT_EQ(store->UpdateTask(task.id, [](TaskRecord&) { return Status::Ok(); }).code(),
            StatusCode::kInternal);
  EXPECT_FALSE(store->JobTasks(job.id).ok());
}

// A job of `n` runnable tasks: its stored definition is well past the cache's 4 KiB.
JobRecord BigJob(int n, JobState state) {
  Job job = SimpleJob("big " + UniqueWord());
  job.tasks.clear();
  for (int i = 0; i < n; ++i) job.tasks.push_back(RunnableTask("step " + std::to_string(i)));
  return NewJob(std::move(job), At(0), state);
}

// A running task whose definition (a parallel of `n` children) is past the cache's 4 KiB.
TaskRecord BigTask(const std::string& job_id, int n) {
  TaskRecord task = NewTask(job_id, 1, At(0), TaskState::kRunning);
  task.task = Task{};
  task.task.name = "fan";
  Parallel parallel;
  for (int i = 0; i < n; ++i) parallel.tasks.push_back(RunnableTask("p " + std::to_string(i)));
  task.task.parallel = std::move(parallel);
  return task;
}

TEST(SqliteDatastoreTest, ABigJobsDefinitionLeavesTheCacheWhenTheJobEnds) {
  auto store = OpenStore(FreshPath());
  ASSERT_NE(store, nullptr);
  // Ended by a state-only update (what a step of the scheduler writes).
  JobRecord job = BigJob(200, JobState::kRunning);
  ASSERT_TRUE(IsOk(store->CreateJob(job)));
  ASSERT_TRUE(store->GetJob(job.id).ok());
  EXPECT_EQ(store->Stats().cached_job_definitions, 1U);  // kept while it runs
  ASSERT_TRUE(IsOk(store->UpdateJobState(job.id, [](JobRecord& j) {
    j.state = JobState::kCompleted;
    return Status::Ok();
  })));
  EXPECT_EQ(store->Stats().cached_job_definitions, 0U);
  // Read again once ended (the answer to a waiting submission, GET /jobs/{id}): not kept.
  ASSERT_TRUE(store->GetJob(job.id).ok());
  EXPECT_EQ(store->Stats().cached_job_definitions, 0U);

  // Ended by a full update, and inside a decision scope.
  JobRecord failed = BigJob(200, JobState::kRunning);
  JobRecord scoped = BigJob(200, JobState::kRunning);
  ASSERT_TRUE(IsOk(store->CreateJob(failed)));
  ASSERT_TRUE(IsOk(store->CreateJob(scoped)));
  EXPECT_EQ(store->Stats().cached_job_definitions, 2U);
  ASSERT_TRUE(IsOk(store->UpdateJob(failed.id, [](JobRecord& j) {
    j.state = JobState::kFailed;
    return Status::Ok();
  })));
  EXPECT_EQ(store->Stats().cached_job_definitions, 1U);
  ASSERT_TRUE(IsOk(store->Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN(JobRecord j, tx.GetJob(scoped.id));
    j.state = JobState::kCancelled;
    return tx.UpdateJobState(j);
  })));
  EXPECT_EQ(store->Stats().cached_job_definitions, 0U);
}

TEST(SqliteDatastoreTest, ABigTasksDefinitionLeavesTheCacheWhenTheTaskEnds) {
  auto store = OpenStore(FreshPath());
  ASSERT_NE(store, nullptr);
  JobRecord job = NewJob(SimpleJob("j " + UniqueWord()), At(0), JobState::kRunning);
  ASSERT_TRUE(IsOk(store->CreateJob(job)));
  TaskRecord direct = BigTask(job.id, 100);
  TaskRecord scoped = BigTask(job.id, 100);
  ASSERT_TRUE(IsOk(store->CreateTasks({direct, scoped})));
  ASSERT_TRUE(store->GetTask(direct.id).ok());
  ASSERT_TRUE(store->GetTask(scoped.id).ok());
  EXPECT_EQ(store->Stats().cached_task_definitions, 2U);
  ASSERT_TRUE(IsOk(store->UpdateTask(direct.id, [](TaskRecord& t) {
    t.state = TaskState::kCompleted;
    return Status::Ok();
  })));
  EXPECT_EQ(store->Stats().cached_task_definitions, 1U);
  ASSERT_TRUE(IsOk(store->Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN(TaskRecord t, tx.GetTask(scoped.id));
    t.state = TaskState::kFailed;
    return tx.UpdateTask(t);
  })));
  EXPECT_EQ(store->Stats().cached_task_definitions, 0U);
  ASSERT_TRUE(store->GetTask(direct.id).ok());
  EXPECT_EQ(store->Stats().cached_task_definitions, 0U);
}

TEST(SqliteDatastoreTest, ReleaseMemoryEmptiesTheIdleReadersPageCaches) {
  auto store = OpenStore(FreshPath());
  ASSERT_NE(store, nullptr);
  JobRecord job = BigJob(2000, JobState::kCompleted);
  ASSERT_TRUE(IsOk(store->CreateJob(job)));
  ASSERT_TRUE(store->GetJob(job.id).ok());  // its row's pages now in a reader's cache
  const sqlite3_int64 before = sqlite3_memory_used();
  store->ReleaseMemory();
  EXPECT_LT(sqlite3_memory_used(), before - 100 * 1024) << "before: " << before;
  ASSERT_TRUE(store->GetJob(job.id).ok());  // and the reader still reads
}

TEST(SqliteDatastoreTest, GroupCommitBatchesConcurrentWriters) {
  auto store = OpenStore(FreshPath());
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 8;
  constexpr int kWrites = 200;
  SqliteStats before = store->Stats();
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kWrites; ++i) {
          NodeRecord node;
          node.id = NewId();
          node.name = "n";
          node.last_heartbeat_at = At(i);
          if (!store->UpsertNode(node).ok()) failures.fetch_add(1);
        }
      });
    }
  }
  SqliteStats after = store->Stats();
  std::int64_t writes = after.writes - before.writes;
  std::int64_t commits = after.commits - before.commits;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(writes, kThreads * kWrites);
  EXPECT_LT(commits, writes);
  EXPECT_GT(commits, 0);
  std::printf("group commit: %lld writes in %lld commits (%.1f writes per commit)\n",
              static_cast<long long>(writes), static_cast<long long>(commits),
              commits > 0 ? static_cast<double>(writes) / static_cast<double>(commits) : 0.0);
  ::testing::Test::RecordProperty("writes", static_cast<int>(writes));
  ::testing::Test::RecordProperty("commits", static_cast<int>(commits));
}

TEST(SqliteDatastoreTest, AcknowledgedWritesSurviveAKill) {
  std::string path = FreshPath();
  JobRecord job = NewJob(SimpleJob("durable"), At(0));
  {
    auto store = OpenStore(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(IsOk(store->CreateJob(job)));
  }
  constexpr int kTasks = 100;
  std::vector<TaskRecord> tasks;
  for (int i = 0; i < kTasks; ++i) tasks.push_back(NewTask(job.id, i + 1, At(i)));

  // Fork while this process has no threads of its own: the store above is closed.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto opened = SqliteDatastore::Open(SqliteOptions{.path = path});
    if (!opened.ok()) ::_exit(2);
    for (const TaskRecord& task : tasks) {
      if (!(*opened)->CreateTask(task).ok()) ::_exit(3);
    }
    // Dies the moment the last write is acknowledged: no destructor, no close.
    ::kill(::getpid(), SIGKILL);
    ::_exit(4);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited with " << WEXITSTATUS(wstatus);
  EXPECT_EQ(WTERMSIG(wstatus), SIGKILL);

  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  Result<std::vector<TaskRecord>> stored = store->JobTasks(job.id);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(*stored, tasks);
}

}  // namespace
}  // namespace baton

// PostgresDatastore and PostgresLocker against a real PostgreSQL server, named by
// BATON_TEST_POSTGRES_DSN (scripts/test-services/postgres.sh starts one). The run
// creates a database of its own on that server and drops it at the end. Without the
// variable every test is skipped; with it set but the server unreachable, they fail.
#include "datastore/postgres/postgres_datastore.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "base/log.h"
#include "conformance/datastore_conformance.h"
#include "conformance/locker_conformance.h"
#include "datastore/postgres/postgres_locker.h"
#include "datastore/sql/schema.h"
#include "testing/test_certificates.h"

namespace baton {
namespace {

using conformance::LockerConformanceTest;
using testing::DatastoreConformanceTest;
using testing::DatastoreFactory;
using testing::SecretsAtRestConformanceTest;
using testing::SecretsFactory;
using namespace testing::datastore_conformance;

constexpr const char* kNotConfigured =
    "PostgreSQL not configured: set BATON_TEST_POSTGRES_DSN (make test starts one)";

// `dsn` (keywords or a URI) with its database replaced by `dbname`, as keyword=value.
std::string WithDatabase(const std::string& dsn, const std::string& dbname) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options == nullptr) {
    std::string message = error != nullptr ? error : "out of memory";
    PQfreemem(error);
    ADD_FAILURE() << "BATON_TEST_POSTGRES_DSN is not a connection string: " << message;
    return dsn;
  }
  auto quote = [](std::string_view v) {
    std::string out = "'";
    for (char c : v) {
      if (c == '\'' || c == '\\') out += '\\';
      out += c;
    }
    return out + "'";
  };
  std::string out;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr || *o->val == '\0' || std::strcmp(o->keyword, "dbname") == 0) continue;
    out += fmt::format("{}={} ", o->keyword, quote(o->val));
  }
  PQconninfoFree(options);
  return out + "dbname=" + quote(dbname);
}

// Runs one statement on a fresh connection to `dsn`; an error message or "".
std::string AdminExec(const std::string& dsn, const std::string& sql) {
  PGconn* conn = PQconnectdb(dsn.c_str());
  std::string error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PGresult* res = PQexec(conn, sql.c_str());
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) error = PQresultErrorMessage(res);
    PQclear(res);
  }
  PQfinish(conn);
  return error;
}

// One database for the whole run: created in SetUp, dropped in TearDown.
class PostgresServer : public ::testing::Environment {
 public:
  void SetUp() override {
    log::Configure(log::Level::kWarn, log::Format::kText);
    const char* dsn = std::getenv("BATON_TEST_POSTGRES_DSN");
    if (dsn == nullptr || *dsn == '\0') {
      // Each test skips itself (see SkipUnlessConfigured), so that every one of them
      // reports SKIPPED with this message.
      std::fprintf(stderr, "%s\n", kNotConfigured);
      return;
    }
    admin_dsn() = dsn;
    std::string db = fmt::format("baton_test_{}_{}", ::getpid(), std::random_device{}() % 100000);
    std::string error = AdminExec(admin_dsn(), "CREATE DATABASE " + db);
    if (!error.empty()) {
      // Not fatal here: the tests then run against the configured DSN and fail one by one
      // (a fatal failure here would report them as skipped).
      ADD_FAILURE() << "cannot create a test database with BATON_TEST_POSTGRES_DSN=\""
                    << admin_dsn() << "\" (is the server running?): " << error;
      test_dsn() = admin_dsn();
      return;
    }
    database() = db;
    test_dsn() = WithDatabase(admin_dsn(), db);
  }
  void TearDown() override {
    if (database().empty()) return;
    std::string error =
        AdminExec(admin_dsn(), "DROP DATABASE IF EXISTS " + database() + " WITH (FORCE)");
    EXPECT_EQ(error, "") << "dropping " << database();
    for (const std::string& extra : extra_databases()) {
      (void)AdminExec(admin_dsn(), "DROP DATABASE IF EXISTS " + extra + " WITH (FORCE)");
    }
  }

  static bool Configured() { return !test_dsn().empty(); }
  static std::string& admin_dsn() {
    static std::string dsn;
    return dsn;
  }
  static std::string& test_dsn() {
    static std::string dsn;
    return dsn;
  }
  static std::string& database() {
    static std::string name;
    return name;
  }
  static std::vector<std::string>& extra_databases() {
    static std::vector<std::string> names;
    return names;
  }

  // Another empty database (dropped at the end), for tests of the schema itself.
  static std::string FreshDatabaseDsn() {
    static int next = 0;
    std::string db = fmt::format("{}_x{}", database(), ++next);
    std::string error = AdminExec(admin_dsn(), "CREATE DATABASE " + db);
    EXPECT_EQ(error, "");
    extra_databases().push_back(db);
    return WithDatabase(admin_dsn(), db);
  }
};
[[maybe_unused]] ::testing::Environment* const kServer =
    ::testing::AddGlobalTestEnvironment(new PostgresServer);

// Marks the running test skipped when no server is configured; true if it did. Called
// from the suites' factories (in the fixture's SetUp), which then return a placeholder:
// gtest does not run the body of a test skipped in SetUp.
bool SkipUnlessConfigured() {
  if (PostgresServer::Configured()) return false;
  []() { GTEST_SKIP() << kNotConfigured; }();
  return true;
}

#define BATON_SKIP_UNLESS_CONFIGURED() \
  if (!PostgresServer::Configured()) GTEST_SKIP() << kNotConfigured

// Stands in for the datastore of a skipped test; never called.
class NoDatastore final : public Datastore {
 public:
  static Status Fail() { return Unavailable(kNotConfigured); }
  Status Transact(const std::function<Status(Transaction&)>&) override { return Fail(); }
  Status CreateJob(const JobRecord&) override { return Fail(); }
  Result<JobRecord> GetJob(std::string_view) override { return Fail(); }
  Status UpdateJob(std::string_view, const std::function<Status(JobRecord&)>&) override {
    return Fail();
  }
  Result<Page<JobRecord>> ListJobs(const JobQuery&) override { return Fail(); }
  Result<std::vector<JobRecord>> JobsInState(const std::vector<JobState>&) override {
    return Fail();
  }
  Status DeleteJob(std::string_view) override { return Fail(); }
  Result<std::vector<std::string>> JobsDueForDeletion(TimePoint, int) override { return Fail(); }
  Status CreateTask(const TaskRecord&) override { return Fail(); }
  Status CreateTasks(const std::vector<TaskRecord>&) override { return Fail(); }
  Result<TaskRecord> GetTask(std::string_view) override { return Fail(); }
  Status UpdateTask(std::string_view, const std::function<Status(TaskRecord&)>&) override {
    return Fail();
  }
  Result<std::vector<TaskRecord>> JobTasks(std::string_view) override { return Fail(); }
  Result<std::vector<TaskRecord>> ChildTasks(std::string_view) override { return Fail(); }
  Result<std::vector<TaskRecord>> TasksInState(const std::vector<TaskState>&) override {
    return Fail();
  }
  Result<std::vector<std::string>> DroppedTasks(TimePoint, int) override { return Fail(); }
  Result<std::vector<std::string>> WithdrawnTasks(int) override { return Fail(); }

  Status UpdateJobState(std::string_view, const std::function<Status(JobRecord&)>&) override {
    return Fail();
  }
  Result<std::vector<CancelledTask>> CancelTasks(std::string_view, std::string_view,
                                                 TimePoint) override {
    return Fail();
  }
  Status MarkScheduled(const std::vector<std::string>&, TimePoint) override { return Fail(); }
  Status CreateLogPart(const LogPart&) override { return Fail(); }
  Result<Page<LogPart>> TaskLogParts(std::string_view, int, int) override { return Fail(); }
  Result<Page<LogPart>> JobLogParts(std::string_view, int, int) override { return Fail(); }
  Status UpsertNode(const NodeRecord&) override { return Fail(); }
  Result<std::vector<NodeRecord>> ActiveNodes(TimePoint) override { return Fail(); }
  Result<StateCounts> CountStates() override { return Fail(); }
  Result<EndedCounts> CountJobsEndedSince(TimePoint) override { return Fail(); }
  Result<RunningCounts> CountRunning() override { return Fail(); }
  Status Health() override { return Fail(); }
};

std::unique_ptr<PostgresDatastore> OpenStore(PostgresOptions options) {
  Result<std::unique_ptr<PostgresDatastore>> store = PostgresDatastore::Open(std::move(options));
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

std::unique_ptr<PostgresDatastore> OpenStore() {
  return OpenStore(PostgresOptions{.dsn = PostgresServer::test_dsn()});
}

std::shared_ptr<const crypto::Keyring> TestKeyring() {
  static const auto keys =
      std::make_shared<const crypto::Keyring>(*crypto::Keyring::Make({*crypto::GenerateKey()}));
  return keys;
}

// The conformance suites' factory: a store on the test database, or (skipping the test)
// a placeholder. A store with a keyring has a database of its own (made once per
// process): rows it encrypted cannot be read by the others, whose queries across the
// database (jobs in a state, tasks in a state) would fail on them when the whole binary
// runs in one process.
std::unique_ptr<Datastore> MakeStore(PostgresOptions options) {
  if (SkipUnlessConfigured()) return std::make_unique<NoDatastore>();
  if (options.keyring) {
    static const std::string encrypted_dsn = PostgresServer::FreshDatabaseDsn();
    options.dsn = encrypted_dsn;
  } else {
    options.dsn = PostgresServer::test_dsn();
  }
  return OpenStore(std::move(options));
}

// The text of every row of the tables that hold secrets, in the database at `dsn`.
std::string TablesText(const std::string& dsn) {
  PGconn* conn = PQconnectdb(dsn.c_str());
  std::string out;
  if (PQstatus(conn) != CONNECTION_OK) {
    ADD_FAILURE() << PQerrorMessage(conn);
  } else {
    for (const char* table : {"jobs", "tasks", "webhook_deliveries"}) {
      PGresult* res = PQexec(conn, fmt::format("SELECT t::text FROM {} t", table).c_str());
      EXPECT_EQ(PQresultStatus(res), PGRES_TUPLES_OK) << PQresultErrorMessage(res);
      for (int r = 0; r < PQntuples(res); ++r) {
        out += PQgetvalue(res, r, 0);
        out += '\n';
      }
      PQclear(res);
    }
  }
  PQfinish(conn);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Postgres, SecretsAtRestConformanceTest,
                         ::testing::Values(SecretsFactory{
                             "tables",
                             []() -> std::string {
                               if (SkipUnlessConfigured()) return "";
                               return PostgresServer::FreshDatabaseDsn();
                             },
                             [](const std::string& dsn, std::shared_ptr<const crypto::Keyring> keys)
                                 -> std::unique_ptr<Datastore> {
                               if (dsn.empty()) return std::make_unique<NoDatastore>();
                               return OpenStore(
                                   PostgresOptions{.dsn = dsn, .keyring = std::move(keys)});
                             },
                             [](const std::string& dsn) { return TablesText(dsn); }}),
                         testing::SecretsFactoryName);

INSTANTIATE_TEST_SUITE_P(
    Postgres, DatastoreConformanceTest,
    ::testing::Values(
        DatastoreFactory{"pooled", [] { return MakeStore({}); }, nullptr},
        DatastoreFactory{"reopened", [] { return MakeStore({}); },
                         [](std::unique_ptr<Datastore> store) {
                           store.reset();  // closes every connection
                           return MakeStore({});
                         }},
        // Every case again with secrets encrypted at rest.
        DatastoreFactory{"encrypted",
                         [] { return MakeStore({.dsn = "", .keyring = TestKeyring()}); }, nullptr},
        DatastoreFactory{"one_connection", [] { return MakeStore({.dsn = "", .pool_size = 1}); },
                         nullptr,
                         /*one_writer=*/true}),
    testing::DatastoreFactoryName);

std::string LockerFactoryName(const ::testing::TestParamInfo<conformance::LockerFactory>& param) {
  return param.param.name;
}

INSTANTIATE_TEST_SUITE_P(Postgres, LockerConformanceTest,
                         ::testing::Values(conformance::LockerFactory{
                             "two_lockers",
                             []() -> std::pair<std::shared_ptr<Locker>, std::shared_ptr<Locker>> {
                               if (SkipUnlessConfigured()) {
                                 std::shared_ptr<Locker> none = NewInProcessLocker();
                                 return {none, none};
                               }
                               return std::make_pair(
                                   std::shared_ptr<Locker>(std::make_shared<PostgresLocker>(
                                       PostgresServer::test_dsn())),
                                   std::shared_ptr<Locker>(std::make_shared<PostgresLocker>(
                                       PostgresServer::test_dsn())));
                             }}),
                         LockerFactoryName);

// ---- Beyond the conformance suite ---------------------------------------------------

// A commit is acknowledged only once flushed, even on a database whose default is not to
// wait (README: "every commit is fsync'd").
TEST(PostgresDatastoreTest, SessionsCommitSynchronouslyWhateverTheDatabasesDefault) {
  BATON_SKIP_UNLESS_CONFIGURED();
  std::string dsn = PostgresServer::FreshDatabaseDsn();
  std::string db = dsn.substr(dsn.rfind("dbname='") + 8);
  db.pop_back();
  ASSERT_EQ(AdminExec(PostgresServer::test_dsn(),
                      "ALTER DATABASE " + db + " SET synchronous_commit = off"),
            "");
  auto store = OpenStore(PostgresOptions{.dsn = dsn, .pool_size = 2});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SessionSetting("synchronous_commit"), "on");
  EXPECT_EQ(*store->SessionSetting("TimeZone"), "UTC");
}

TEST(PostgresDatastoreTest, MigrateIsIdempotent) {
  BATON_SKIP_UNLESS_CONFIGURED();
  std::string dsn = PostgresServer::FreshDatabaseDsn();
  auto store = OpenStore(PostgresOptions{.dsn = dsn, .auto_migrate = false});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), 0);
  ASSERT_TRUE(IsOk(store->Migrate()));
  EXPECT_EQ(*store->SchemaVersion(), sql::LatestSchemaVersion());
  ASSERT_TRUE(IsOk(store->Migrate()));
  EXPECT_EQ(*store->SchemaVersion(), sql::LatestSchemaVersion());
  store.reset();
  store = OpenStore(PostgresOptions{.dsn = dsn});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), sql::LatestSchemaVersion());
}

TEST(PostgresDatastoreTest, ConcurrentMigratorsTakeTurns) {
  BATON_SKIP_UNLESS_CONFIGURED();
  std::string dsn = PostgresServer::FreshDatabaseDsn();
  std::vector<Status> results(4);
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < results.size(); ++i) {
      threads.emplace_back([&, i] {
        auto store = PostgresDatastore::Open(PostgresOptions{.dsn = dsn});
        results[i] = store.ok() ? Status::Ok() : store.status();
      });
    }
  }
  for (const Status& s : results) EXPECT_TRUE(IsOk(s));
  auto store = OpenStore(PostgresOptions{.dsn = dsn});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), sql::LatestSchemaVersion());
}

TEST(PostgresDatastoreTest, ANewerSchemaIsRefused) {
  BATON_SKIP_UNLESS_CONFIGURED();
  std::string dsn = PostgresServer::FreshDatabaseDsn();
  ASSERT_NE(OpenStore(PostgresOptions{.dsn = dsn}), nullptr);
  ASSERT_EQ(AdminExec(dsn, fmt::format("INSERT INTO schema_migrations (version, name, applied_at) "
                                       "VALUES ({}, 'from the future', 0)",
                                       sql::LatestSchemaVersion() + 1)),
            "");
  auto store = PostgresDatastore::Open(PostgresOptions{.dsn = dsn});
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  store = PostgresDatastore::Open(PostgresOptions{.dsn = dsn, .auto_migrate = false});
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
}

TEST(PostgresDatastoreTest, AnUnreachableServerIsUnavailable) {
  BATON_SKIP_UNLESS_CONFIGURED();
  auto store = PostgresDatastore::Open(
      PostgresOptions{.dsn = "host=127.0.0.1 port=1 user=postgres dbname=x connect_timeout=2"});
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status().ToString();
  PostgresLocker locker("host=127.0.0.1 port=1 user=postgres dbname=x connect_timeout=2");
  EXPECT_EQ(locker.TryAcquire("x").status().code(), StatusCode::kUnavailable);
}

TEST(PostgresDatastoreTest, ATaskOfAnUnknownJobFailsPrecondition) {
  BATON_SKIP_UNLESS_CONFIGURED();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  TaskRecord orphan = NewTask(NewId(), 1, At(0));
  EXPECT_EQ(store->CreateTask(orphan).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->CreateTasks({orphan, NewTask(NewId(), 2, At(0))}).code(),
            StatusCode::kFailedPrecondition);
  LogPart part = NewLogPart(orphan, 1, At(0));
  EXPECT_EQ(store->CreateLogPart(part).code(), StatusCode::kFailedPrecondition);
}

TEST(PostgresDatastoreTest, AModifierThatThrowsIsAnError) {
  BATON_SKIP_UNLESS_CONFIGURED();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  JobRecord job = NewJob(SimpleJob("throws"), At(0));
  ASSERT_TRUE(IsOk(store->CreateJob(job)));
  Status s =
      store->UpdateJob(job.id, [](JobRecord&) -> Status { throw std::runtime_error("boom"); });
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(*store->GetJob(job.id), job);
  EXPECT_TRUE(IsOk(store->Health()));  // the connection went back to the pool usable
}

// A read-modify-write sends BEGIN with its read and COMMIT with its write (one round trip
// each): a write the server refuses must leave the row as it was and the one connection
// usable for what follows, in and out of transactions.
TEST(PostgresDatastoreTest, AWriteTheServerRefusesRollsBackAndTheConnectionGoesOn) {
  BATON_SKIP_UNLESS_CONFIGURED();
  auto store = OpenStore(PostgresOptions{.dsn = PostgresServer::test_dsn(), .pool_size = 1});
  ASSERT_NE(store, nullptr);
  JobRecord job = NewJob(SimpleJob("refused"), At(0));
  ASSERT_TRUE(IsOk(store->CreateJob(job)));
  TaskRecord task = NewTask(job.id, 0, At(0));
  ASSERT_TRUE(IsOk(store->CreateTask(task)));
  for (int round = 0; round < 3; ++round) {
    // Not UTF-8: PostgreSQL refuses the UPDATE itself, after the SELECT ... FOR UPDATE.
    Status s = store->UpdateTask(task.id, [](TaskRecord& t) {
      t.error = "bad \xff byte";
      t.error[4] = static_cast<char>(0xff);
      return Status::Ok();
    });
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("postgres"), std::string::npos) << s.ToString();
    EXPECT_EQ(*store->GetTask(task.id), task);
    s = store->UpdateJob(job.id, [](JobRecord& j) {
      j.error = "x";
      j.error[0] = static_cast<char>(0xc3);  // a lone lead byte
      return Status::Ok();
    });
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(*store->GetJob(job.id), job);
  }
  // And then good writes go through on the same connection.
  ASSERT_TRUE(IsOk(store->UpdateTask(task.id, [](TaskRecord& t) {
    t.error = "fine";
    return Status::Ok();
  })));
  EXPECT_EQ(store->GetTask(task.id)->error, "fine");
  ASSERT_TRUE(IsOk(store->UpdateJob(job.id, [](JobRecord& j) {
    j.error = "fine too";
    return Status::Ok();
  })));
  EXPECT_EQ(store->GetJob(job.id)->error, "fine too");
  // A modifier's own error rolls back without any write being sent.
  EXPECT_EQ(store
                ->UpdateTask(task.id,
                             [](TaskRecord& t) {
                               t.error = "not kept";
                               return InvalidArgument("no");
                             })
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store->GetTask(task.id)->error, "fine");
  EXPECT_TRUE(IsOk(store->Health()));
}

TEST(PostgresDatastoreTest, StoredTextSurvivesQuotesAndBackslashes) {
  BATON_SKIP_UNLESS_CONFIGURED();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  JobRecord job = NewJob(SimpleJob("q"), At(0));
  ASSERT_TRUE(IsOk(store->CreateJob(job)));
  std::vector<TaskRecord> tasks;
  for (int i = 0; i < 3; ++i) {
    TaskRecord t = NewTask(job.id, i, At(i));
    t.error = "a \"quoted\" \\ back{slash}, comma\nNULL";
    t.result = i == 0 ? "" : "NULL";
    t.progress = 0.1 * i;
    t.scheduled_at = i == 1 ? std::optional<TimePoint>(At(7)) : std::nullopt;
    tasks.push_back(t);
  }
  ASSERT_TRUE(IsOk(store->CreateTasks(tasks)));
  EXPECT_EQ(*store->JobTasks(job.id), tasks);
}

}  // namespace
}  // namespace baton

// ---- Over TLS -----------------------------------------------------------------------

namespace baton {
namespace {

// The test server's TLS connection (postgres.sh): role `baton`, which pg_hba admits only
// over TLS with its client certificate, sslmode=verify-full, on this process's database.
class PostgresTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BATON_SKIP_UNLESS_CONFIGURED();
    const char* dsn = std::getenv("BATON_TEST_POSTGRES_TLS_DSN");
    if (dsn == nullptr || *dsn == '\0') GTEST_SKIP() << "BATON_TEST_POSTGRES_TLS_DSN not set";
    dsn_ = WithDatabase(dsn, PostgresServer::database());
    auto made = testing::MakeTestCertificates(::testing::TempDir() + "/pg_tls_test");
    ASSERT_TRUE(made.has_value()) << "openssl could not make the test certificates";
    other_ca_ = made->other_ca;
  }
  std::string dsn_;
  std::string other_ca_;  // a CA that signed nothing here
};

TEST_F(PostgresTlsTest, WithVerifyFullAStoreWorksOverAnEncryptedSession) {
  auto store = OpenStore(PostgresOptions{.dsn = dsn_});
  ASSERT_NE(store, nullptr);
  JobRecord job = NewJob(SimpleJob("over tls"), At(0));
  ASSERT_TRUE(IsOk(store->CreateJob(job)));
  auto read = store->GetJob(job.id);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->job.name, "over tls");
  PGconn* conn = PQconnectdb(dsn_.c_str());
  ASSERT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
  PGresult* res = PQexec(conn,
                         "SELECT ssl::text || ' ' || version FROM pg_stat_ssl "
                         "WHERE pid = pg_backend_pid()");
  ASSERT_EQ(PQresultStatus(res), PGRES_TUPLES_OK) << PQresultErrorMessage(res);
  EXPECT_TRUE(std::string(PQgetvalue(res, 0, 0)).starts_with("true TLSv1."))
      << PQgetvalue(res, 0, 0);
  PQclear(res);
  PQfinish(conn);
}

TEST_F(PostgresTlsTest, AServerCertificateFromAnotherCaIsRefusedSayingWhichConnectionAndWhy) {
  std::string dsn = dsn_;
  dsn += " sslrootcert=" + other_ca_;  // the last one counts
  auto store = PostgresDatastore::Open(PostgresOptions{.dsn = dsn});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  const std::string& message = store.status().message();
  EXPECT_NE(message.find("postgres: connecting: connection to server at \"localhost\""),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("certificate verify failed"), std::string::npos) << message;
}

TEST_F(PostgresTlsTest, AHostNameTheServersCertificateDoesNotNameIsRefused) {
  // The same server at 127.0.0.1, asked for by a name its certificate does not carry.
  std::string dsn = dsn_ + " host=not-the-server.test hostaddr=127.0.0.1";
  auto store = PostgresDatastore::Open(PostgresOptions{.dsn = dsn});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  const std::string& message = store.status().message();
  EXPECT_NE(message.find("does not match host name \"not-the-server.test\""), std::string::npos)
      << message;
}

TEST_F(PostgresTlsTest, WithoutTlsTheRoleIsRefused) {
  std::string dsn = dsn_ + " sslmode=disable";
  auto store = PostgresDatastore::Open(PostgresOptions{.dsn = dsn});
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("no encryption"), std::string::npos)
      << store.status().message();
}

}  // namespace
}  // namespace baton

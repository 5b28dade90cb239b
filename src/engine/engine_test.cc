// The standalone engine with its real parts: SQLite in a data directory, the in-memory
// broker, the shell runtime running real processes.
#include "engine/engine.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/job_decode.h"
#include "crypto/keyring.h"
#include "datastore/sqlite/sqlite_datastore.h"
#include "testing/wait_for.h"

namespace baton {
namespace {

using std::chrono::seconds;

Job ParseOrDie(const std::string& yaml) {
  auto result = ParseJob(yaml, DocumentFormat::kYaml);
  EXPECT_TRUE(result.ok()) << result.Message();
  return result.ok() ? *result.job : Job{};
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("baton-engine-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    config_.data_dir = dir_.string();
    config_.worker_queues = {{"default", 2}};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  Config config_;
};

TEST_F(EngineTest, RunsAJobOfRealProcesses) {
  auto engine = Engine::Standalone(config_);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  ASSERT_TRUE((*engine)->Start().ok());
  auto job = (*engine)->Submit(ParseOrDie(R"(
name: hello
inputs: {who: world}
output: "{{ tasks.greeting }}"
tasks:
  - name: greet
    var: greeting
    env: {WHO: "{{ inputs.who }}"}
    run: echo -n "hello $WHO" > $TORK_OUTPUT
  - name: fan out
    each:
      list: "{{ sequence(1, 4) }}"
      concurrency: 2
      task:
        name: square {{ item.value }}
        env: {N: "{{ item.value }}"}
        run: echo $((N * N)) > $BATON_OUTPUT
)"));
  ASSERT_TRUE(job.ok()) << job.status().message();
  auto done = (*engine)->Wait(job->id, seconds(30));
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(done->state, JobState::kCompleted) << done->error;
  EXPECT_EQ(done->result, "hello world");
  auto rows = (*engine)->datastore().JobTasks(job->id);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 5u);
}

// The default data directory is relative (.baton); a task runs in its own directory, so
// $BATON_OUTPUT and $TORK_OUTPUT must be absolute for the task to write its result.
TEST_F(EngineTest, RelativeDataDirGivesTasksAbsolutePaths) {
  std::filesystem::path relative = std::filesystem::relative(dir_, std::filesystem::current_path());
  ASSERT_TRUE(relative.is_relative()) << relative;
  config_.data_dir = relative.string();
  auto engine = Engine::Standalone(config_);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  ASSERT_TRUE((*engine)->Start().ok());
  auto job = (*engine)->Submit(ParseOrDie(R"(
name: paths
output: "{{ tasks.baton }} {{ tasks.tork }}"
tasks:
  - name: baton
    var: baton
    run: printf '%s' "$BATON_OUTPUT" > "$BATON_OUTPUT"; echo 50 > "$BATON_PROGRESS"
  - name: tork
    var: tork
    run: printf '%s' "$TORK_OUTPUT" > "$TORK_OUTPUT"; echo 50 > "$TORK_PROGRESS"
)"));
  ASSERT_TRUE(job.ok()) << job.status().message();
  auto done = (*engine)->Wait(job->id, seconds(30));
  ASSERT_TRUE(done.ok()) << done.status().message();
  ASSERT_EQ(done->state, JobState::kCompleted) << done->error;
  std::string tasks = (dir_ / "tasks").string() + "/";
  std::size_t space = done->result.find(' ');
  ASSERT_NE(space, std::string::npos) << done->result;
  EXPECT_EQ(done->result.rfind(tasks, 0), 0u) << done->result;
  EXPECT_EQ(done->result.substr(space + 1).rfind(tasks, 0), 0u) << done->result;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "baton.db"));
}

TEST_F(EngineTest, TimeoutFailsTheTaskAndTheJob) {
  auto engine = Engine::Standalone(config_);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->Start().ok());
  auto job = (*engine)->Submit(
      ParseOrDie("name: slow\ntasks:\n  - {name: s, run: sleep 10, timeout: 1s}\n"));
  ASSERT_TRUE(job.ok());
  auto start = std::chrono::steady_clock::now();
  auto done = (*engine)->Wait(job->id, seconds(30));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, JobState::kFailed);
  EXPECT_NE(done->error.find("timed out"), std::string::npos) << done->error;
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
}

// A job of sequential `sleep 1` tasks; the process running it is killed with SIGKILL
// while a task runs (its start recorded, most of its second still ahead); a new engine on
// the same data directory finishes the job. Every task completes exactly once, and the
// one that was running is re-run: its row is FAILED ("the engine stopped while the task
// ran") and a new attempt completes. The crash was the engine's, not the task's: the new
// attempt spends no redelivery (redelivered 0).
TEST_F(EngineTest, SurvivesSigkillMidJob) {
  constexpr int kTasks = 8;
  std::string yaml = "name: eight\ntasks:\n";
  for (int i = 0; i < kTasks; ++i) {
    yaml += "  - {name: t" + std::to_string(i) + ", run: sleep 1}\n";
  }
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    auto engine = Engine::Standalone(config_);
    if (!engine.ok() || !(*engine)->Start().ok()) _exit(3);
    auto job = (*engine)->Submit(ParseOrDie(yaml));
    if (!job.ok()) _exit(4);
    (void)!write(pipe_fds[1], job->id.data(), job->id.size());
    close(pipe_fds[1]);
    pause();  // until killed
    _exit(0);
  }
  close(pipe_fds[1]);
  char id_buf[33] = {};
  ASSERT_EQ(read(pipe_fds[0], id_buf, 32), 32);
  close(pipe_fds[0]);
  std::string job_id(id_buf, 32);

  std::string running;  // the task killed mid-run
  {
    // Watch the data directory from outside until two tasks are done and the third has
    // just been recorded RUNNING (at most 400 ms of its second gone), then kill.
    auto watcher = SqliteDatastore::Open(SqliteOptions{.path = config_.data_dir + "/baton.db"});
    ASSERT_TRUE(watcher.ok()) << watcher.status().message();
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          auto rows = (*watcher)->JobTasks(job_id);
          if (!rows.ok()) return false;
          int completed = 0;
          running.clear();
          for (const auto& r : *rows) {
            completed += r.state == TaskState::kCompleted;
            if (r.state == TaskState::kRunning && r.started_at &&
                Now() - *r.started_at < std::chrono::milliseconds(400)) {
              running = r.task.name;
            }
          }
          return completed >= 2 && !running.empty();
        },
        seconds(60)));
  }
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto engine = Engine::Standalone(config_);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  ASSERT_TRUE((*engine)->Start().ok());
  auto done = (*engine)->Wait(job_id, seconds(60));
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(done->state, JobState::kCompleted) << done->error;

  auto rows = (*engine)->datastore().JobTasks(job_id);
  ASSERT_TRUE(rows.ok());
  std::map<std::string, int> completed;
  std::map<std::string, int> lost;
  int rerun = 0;
  for (const auto& r : *rows) {
    if (r.state == TaskState::kCompleted) ++completed[r.task.name];
    if (r.state == TaskState::kFailed) ++lost[r.task.name];
    if (r.task.name == running && r.state == TaskState::kFailed) {
      EXPECT_NE(r.error.find("the engine stopped while the task ran"), std::string::npos)
          << r.error;
    }
    if (r.task.name == running && r.state == TaskState::kCompleted && r.redelivered == 0) ++rerun;
  }
  for (int i = 0; i < kTasks; ++i) {
    EXPECT_EQ(completed["t" + std::to_string(i)], 1) << "t" << i;
  }
  // The task that was running, and only it, was re-run as a new attempt.
  EXPECT_EQ(lost, (std::map<std::string, int>{{running, 1}}));
  EXPECT_EQ(rerun, 1) << running;
  EXPECT_EQ(rows->size(), static_cast<std::size_t>(kTasks) + 1);
}

// A real process writes a secret in two writes, 200 ms apart, and again across a 32 KiB
// read: its stored log, joined, shows the line with the secret hidden whole.
TEST_F(EngineTest, ASecretWrittenInPiecesIsHiddenInTheJoinedLog) {
  auto engine = Engine::Standalone(config_);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  ASSERT_TRUE((*engine)->Start().ok());
  auto job = (*engine)->Submit(ParseOrDie(R"(
name: split
secrets: {s: e2e-split-2b9d61c0f7e4a5}
tasks:
  - name: split write
    env: {S: "{{ secrets.s }}"}
    run: |
      printf '%s' "${S:0:5}"; sleep 0.2; printf '%s\n' "${S:5}"
      head -c 32763 /dev/zero | tr '\0' .; printf '%s\n' "$S"
)"));
  ASSERT_TRUE(job.ok()) << job.status().message();
  auto done = (*engine)->Wait(job->id, seconds(30));
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(done->state, JobState::kCompleted) << done->error;
  std::string log;
  auto joined = [&] {
    auto parts = (*engine)->datastore().JobLogParts(job->id, 1, 100);
    log.clear();
    if (!parts.ok()) return false;
    for (auto it = parts->items.rbegin(); it != parts->items.rend(); ++it) log += it->contents;
    return log.ends_with("[REDACTED]\n") && log.size() > 32 * 1024;
  };
  EXPECT_TRUE(testing::WaitFor(joined)) << log.substr(0, 200);
  EXPECT_EQ(log.find("e2e-split-2b9d61c0f7e4a5"), std::string::npos) << log.substr(0, 200);
  EXPECT_TRUE(log.starts_with("[REDACTED]\n...")) << log.substr(0, 200);
}

std::string FileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Secure by default: with no key configured, the first start makes one (0600) in the data
// directory, a job's secrets are stored encrypted under it, and the next start reads them.
TEST_F(EngineTest, StandaloneMakesAKeyFileOnFirstStartAndKeepsSecretsEncryptedWithIt) {
  const std::string secret = "plain-engine-secret-" + NewId().substr(20);
  std::string job_id;
  {
    auto engine = Engine::Standalone(config_);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    ASSERT_TRUE((*engine)->Start().ok());
    auto job = (*engine)->Submit(
        ParseOrDie("name: secretive\nsecrets: {pw: " + secret +
                   "}\ntasks:\n  - name: use\n    env: {DB_PASSWORD: \"{{ secrets.pw }}\"}\n"
                   // The value's digest, not the value: the script is stored as written.
                   "    run: test \"$(printf %s \"$DB_PASSWORD\" | sha256sum | cut -c1-64)\" = " +
                   crypto::Sha256Hex(secret) + "\n"));
    ASSERT_TRUE(job.ok()) << job.status().message();
    job_id = job->id;
    auto done = (*engine)->Wait(job_id, seconds(30));
    ASSERT_TRUE(done.ok()) << done.status().message();
    EXPECT_EQ(done->state, JobState::kCompleted) << done->error;
  }
  const auto key_file = dir_ / "secrets.key";
  struct stat st {};
  ASSERT_EQ(::stat(key_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  const std::string raw = FileBytes(dir_ / "baton.db") + FileBytes(dir_ / "baton.db-wal");
  ASSERT_FALSE(raw.empty());
  EXPECT_EQ(raw.find(secret), std::string::npos);
  auto keys = crypto::ReadKeyFile(key_file.string());
  ASSERT_TRUE(keys.ok());
  EXPECT_NE(raw.find(std::string(crypto::kEnvelopePrefix) + crypto::KeyId((*keys)[0])),
            std::string::npos);

  auto again = Engine::Standalone(config_);
  ASSERT_TRUE(again.ok()) << again.status().message();
  auto job = (*again)->datastore().GetJob(job_id);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->job.secrets.at("pw"), secret);
  EXPECT_EQ(FileBytes(key_file), FileBytes(key_file));  // not replaced
}

// Every delivery signed by default: the first start makes the webhooks' key (0600) in the
// data directory and keeps it; a configured webhooks.secret wins and no file is made.
TEST_F(EngineTest, StandaloneMakesAWebhookKeyOnFirstStartUnlessOneIsConfigured) {
  const auto key_file = dir_ / "webhooks.key";
  {
    Config configured = config_;
    configured.webhooks.secret = "configured-key";
    auto engine = Engine::Standalone(configured);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    EXPECT_FALSE(std::filesystem::exists(key_file));
  }
  std::string first;
  {
    auto engine = Engine::Standalone(config_);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    struct stat st {};
    ASSERT_EQ(::stat(key_file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600);
    first = FileBytes(key_file);
  }
  auto again = Engine::Standalone(config_);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(FileBytes(key_file), first);  // not replaced
}

// The permission bits of `path`, or -1 when it does not exist.
int ModeOf(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

TEST_F(EngineTest, StandaloneKeepsItsDataDirectoryPrivateToItsUser) {
  // A data directory left readable by others (an older Baton, or a umask of 022).
  std::filesystem::create_directories(dir_ / "tasks");
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((dir_ / "tasks").c_str(), 0755), 0);
  const mode_t old_umask = ::umask(022);
  {
    auto engine = Engine::Standalone(config_);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    ASSERT_TRUE((*engine)->Start().ok());
    auto job = (*engine)->Submit(ParseOrDie("name: private\ntasks:\n  - name: a\n    run: true\n"));
    ASSERT_TRUE(job.ok()) << job.status().message();
    auto done = (*engine)->Wait(job->id, seconds(30));
    ASSERT_TRUE(done.ok()) << done.status().message();
    EXPECT_EQ(done->state, JobState::kCompleted) << done->error;
    EXPECT_EQ(ModeOf(dir_), 0700);
    EXPECT_EQ(ModeOf(dir_ / "tasks"), 0700);
    for (const char* file : {"baton.db", "baton.db-wal", "baton.db-shm", "secrets.key"}) {
      EXPECT_EQ(ModeOf(dir_ / file), 0600) << file;
    }
  }
  ::umask(old_umask);
}

TEST_F(EngineTest, RotationMovesEverySecretToANewKeyAndTheOldKeyCanThenGo) {
  const crypto::Key old_key = *crypto::GenerateKey(), new_key = *crypto::GenerateKey();
  config_.encryption_key = crypto::EncodeKey(old_key);
  std::string job_id;
  {
    auto engine = Engine::Standalone(config_);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    auto job = (*engine)->Submit(
        ParseOrDie("name: s\nsecrets: {pw: hunter2-rotating}\ntasks: [{name: t, run: 'true'}]\n"));
    ASSERT_TRUE(job.ok()) << job.status().message();
    job_id = job->id;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "secrets.key"));  // a configured key is used
  // The new key alone cannot read what the old one wrote: a clear error naming the key.
  Config only_new = config_;
  only_new.encryption_key = crypto::EncodeKey(new_key);
  auto refused = Engine::RotateSecrets(only_new, 10);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(crypto::KeyId(old_key)), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("hunter2"), std::string::npos);

  Config rotating = only_new;
  rotating.encryption_old_keys = {crypto::EncodeKey(old_key)};
  auto report = Engine::RotateSecrets(rotating, 10);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_GE(report->rewritten, 1);
  auto engine = Engine::Standalone(only_new);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  auto job = (*engine)->datastore().GetJob(job_id);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->job.secrets.at("pw"), "hunter2-rotating");
}

TEST_F(EngineTest, KeyAndKeyFileTogetherOrABadKeyFileAreStartUpErrors) {
  config_.encryption_key = crypto::EncodeKey(*crypto::GenerateKey());
  config_.encryption_key_file = (dir_ / "keys").string();
  auto both = Engine::Standalone(config_);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("both set"), std::string::npos);
  config_.encryption_key.clear();
  auto missing = Engine::Standalone(config_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("datastore.encryption.key_file"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "keys"));  // a configured file is never made
}

TEST_F(EngineTest, AnAdminPasswordCreatesTheFirstAdminOnceAndNeverChangesIt) {
  config_.api_auth_enabled = true;
  config_.api_auth_admin_user = "boss";
  config_.api_auth_admin_password = "first-password";
  config_.api_auth_bcrypt_cost = 4;
  std::string hash;
  {
    auto engine = Engine::Standalone(config_);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    ASSERT_TRUE((*engine)->ServeApi("127.0.0.1:0", "test", config_).ok());
    auto admin = (*engine)->datastore().GetUser("boss");
    ASSERT_TRUE(admin.ok()) << admin.status().message();
    EXPECT_EQ(admin->roles, std::vector<std::string>{"admin"});
    EXPECT_TRUE(admin->password_hash.starts_with("$2b$04$"));
    hash = admin->password_hash;
  }
  // A restart with another password leaves the user as it was.
  config_.api_auth_admin_password = "second-password";
  auto engine = Engine::Standalone(config_);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  ASSERT_TRUE((*engine)->ServeApi("127.0.0.1:0", "test", config_).ok());
  EXPECT_EQ((*engine)->datastore().GetUser("boss")->password_hash, hash);
}

}  // namespace
}  // namespace baton

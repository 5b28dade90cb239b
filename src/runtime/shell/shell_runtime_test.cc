#include "runtime/shell/shell_runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "conformance/runtime_conformance.h"
#include "runtime/shell/cgroup.h"

namespace baton {
namespace {

namespace fs = std::filesystem;
using conformance::RecordingObserver;
using State = RunOutcome::State;
using Clock = std::chrono::steady_clock;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// A directory of the test's own, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "baton-shell-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Every test runtime puts its task directories in one directory of the test binary's
// own, so that tests can check nothing is left; removed when the tests end.
class BaseDirEnvironment : public ::testing::Environment {
 public:
  static std::string Path() {
    static const std::string path =
        (fs::temp_directory_path() / ("baton-shell-test-" + std::to_string(getpid())) / "tasks")
            .string();
    return path;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::path(Path()).parent_path(), ec);
  }
};
const ::testing::Environment* const kBaseDirEnvironment =
    ::testing::AddGlobalTestEnvironment(new BaseDirEnvironment);

std::string TestBaseDir() { return BaseDirEnvironment::Path(); }

conformance::RuntimeFactory ShellFactory() {
  return {"shell", [] {
            ShellRuntimeOptions options;
            options.base_dir = TestBaseDir();
            return std::make_unique<ShellRuntime>(options);
          }};
}

using conformance::RuntimeConformanceTest;
INSTANTIATE_TEST_SUITE_P(Shell, RuntimeConformanceTest, ::testing::Values(ShellFactory()),
                         conformance::RuntimeFactoryName);

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<pid_t> ReadPids(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path);
  pid_t pid;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

bool ProcessIsGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

std::size_t CountOccurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + 1)) {
    ++count;
  }
  return count;
}

// The v1 mount holding `controller`, or "".
std::string V1Mount(const std::string& controller) {
  for (const CgroupMount& mount : ParseCgroupMounts(ReadText("/proc/self/mountinfo"))) {
    if (mount.v2) continue;
    for (const std::string& c : mount.controllers) {
      if (c == controller) return mount.mount_point;
    }
  }
  return "";
}

std::string V2Mount() {
  for (const CgroupMount& mount : ParseCgroupMounts(ReadText("/proc/self/mountinfo"))) {
    if (mount.v2) return mount.mount_point;
  }
  return "";
}

// The cgroup directories a /proc/<pid>/cgroup text names under the "baton" parent.
std::vector<std::string> BatonCgroupDirs(const std::string& proc_cgroup) {
  std::vector<std::string> dirs;
  std::istringstream lines(proc_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // hierarchy-id:controllers:path
    std::size_t first = line.find(':');
    std::size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (path.rfind("/baton/", 0) != 0) continue;
    std::string mount;
    if (controllers.empty()) {
      mount = V2Mount();
    } else {
      std::string first_controller = controllers.substr(0, controllers.find(','));
      mount = V1Mount(first_controller);
    }
    if (!mount.empty()) dirs.push_back(mount + path);
  }
  return dirs;
}

class ShellRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override { options_.base_dir = TestBaseDir(); }

  ShellRuntime& Runtime() {
    if (!runtime_) runtime_ = std::make_unique<ShellRuntime>(options_);
    return *runtime_;
  }

  RunOutcome RunTask(Task task, std::stop_token cancel = {}, std::string job_id = "job-1") {
    RunRequest request;
    request.task_id = "shell-task";
    request.job_id = std::move(job_id);
    request.task = std::move(task);
    Result<RunOutcome> outcome = Runtime().Run(request, observer_, std::move(cancel));
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    if (!outcome.ok()) return {State::kFailed, "", outcome.status().ToString(), std::nullopt};
    return std::move(outcome).value();
  }

  static Task Script(std::string run) {
    Task task;
    task.run = std::move(run);
    return task;
  }

  // Once the runtime is gone (it keeps empty directories of finished tasks for reuse).
  bool BaseDirIsEmpty() {
    runtime_.reset();
    std::error_code ec;
    return fs::is_empty(options_.base_dir, ec) || !fs::exists(options_.base_dir);
  }

  ShellRuntimeOptions options_;
  std::unique_ptr<ShellRuntime> runtime_;
  RecordingObserver observer_;
  TempDir scratch_;  // for files the test and the task share (pid lists)
};

// ---- Environment ----

TEST_F(ShellRuntimeTest, WorkerEnvironmentDoesNotLeakIntoTasks) {
  setenv("BATON_SHELL_TEST_SECRET", "leaked", 1);
  RunOutcome outcome =
      RunTask(Script("printf '%s' \"${BATON_SHELL_TEST_SECRET-unset}\" > \"$BATON_OUTPUT\""));
  unsetenv("BATON_SHELL_TEST_SECRET");
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "unset");
}

TEST_F(ShellRuntimeTest, TaskEnvironmentHoldsOnlyTheDocumentedVariables) {
  Task task = Script("env | cut -d= -f1 | sort | tr '\\n' ' ' > \"$BATON_OUTPUT\"");
  task.env = {{"MINE", "1"}};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  // PWD, SHLVL and _ are bash's own.
  EXPECT_EQ(
      outcome.result,
      "BATON_OUTPUT BATON_PROGRESS HOME MINE PATH PWD SHELL SHLVL TORK_OUTPUT TORK_PROGRESS _ ");
}

TEST_F(ShellRuntimeTest, PassEnvCopiesNamedWorkerVariables) {
  setenv("BATON_SHELL_TEST_PASSED", "passed", 1);
  options_.pass_env = {"BATON_SHELL_TEST_PASSED", "BATON_SHELL_TEST_UNSET"};
  Runtime();  // reads the environment now
  unsetenv("BATON_SHELL_TEST_PASSED");
  RunOutcome outcome = RunTask(
      Script("printf '%s|%s' \"$BATON_SHELL_TEST_PASSED\" \"${BATON_SHELL_TEST_UNSET-unset}\" "
             "> \"$BATON_OUTPUT\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "passed|unset");
}

TEST_F(ShellRuntimeTest, PathAndHomeComeFromTheWorker) {
  RunOutcome outcome = RunTask(Script("printf '%s|%s' \"$PATH\" \"$HOME\" > \"$BATON_OUTPUT\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  const char* path = getenv("PATH");
  const char* home = getenv("HOME");
  ASSERT_NE(path, nullptr);
  ASSERT_NE(home, nullptr);
  EXPECT_EQ(outcome.result, std::string(path) + "|" + home);
}

TEST_F(ShellRuntimeTest, TaskEnvCannotReplaceTheOutputVariables) {
  Task task = Script("printf x > \"$BATON_OUTPUT\"");
  task.env = {{"BATON_OUTPUT", "/tmp/elsewhere"}};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "x");
}

TEST_F(ShellRuntimeTest, InvalidEnvNameFailsTheTask) {
  Task task = Script("echo ran");
  task.env = {{"A=B", "1"}};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr("A=B"));
  EXPECT_EQ(observer_.logs(), "");
}

TEST_F(ShellRuntimeTest, FileNamesOfTheRuntimeAreRefused) {
  Task task = Script("echo ran");
  task.files = {{".baton-output", "forged result"}};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr(".baton-output"));
  EXPECT_EQ(observer_.logs(), "");
}

// ---- Processes and directories ----

TEST_F(ShellRuntimeTest, TaskRunsInItsOwnSessionAndProcessGroup) {
  RunOutcome outcome =
      RunTask(Script("read -r pid comm state ppid pgrp sid rest < /proc/$$/stat\n"
                     "echo \"$pid $pgrp $sid\" > \"$BATON_OUTPUT\""));
  ASSERT_EQ(outcome.state, State::kCompleted) << outcome.error;
  std::istringstream in(outcome.result);
  pid_t pid = 0, pgrp = 0, sid = 0;
  in >> pid >> pgrp >> sid;
  EXPECT_EQ(pgrp, pid);
  EXPECT_EQ(sid, pid);
  EXPECT_NE(pgrp, getpgrp());
}

TEST_F(ShellRuntimeTest, WorkingDirectoryIsFreshAndRemovedAfterwards) {
  Task task = Script("pwd > \"$BATON_OUTPUT\"; ls -A >> \"$BATON_OUTPUT\"");
  task.files = {{"input.txt", "x"}};
  RunOutcome outcome = RunTask(std::move(task));
  ASSERT_EQ(outcome.state, State::kCompleted) << outcome.error;
  std::string dir = outcome.result.substr(0, outcome.result.find('\n'));
  EXPECT_EQ(dir.rfind(options_.base_dir + "/shell-task-", 0), 0u) << dir;
  EXPECT_EQ(outcome.result, dir + "\n.baton-output\ninput.txt\n");
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(BaseDirIsEmpty());
}

TEST_F(ShellRuntimeTest, WorkdirBecomesTheCurrentDirectoryAndHoldsTheFiles) {
  TempDir workdir;
  Task task = Script("pwd > \"$BATON_OUTPUT\"; cat input.txt >> \"$BATON_OUTPUT\"");
  task.workdir = workdir.path();
  task.files = {{"input.txt", "from-files"}};
  RunOutcome outcome = RunTask(std::move(task));
  ASSERT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, workdir.path() + "\nfrom-files");
  // The files are the task's, in the directory it chose: they stay. The runtime's own
  // files do not go there.
  EXPECT_EQ(ReadText(workdir.path() + "/input.txt"), "from-files");
  EXPECT_FALSE(fs::exists(workdir.path() + "/.baton-output"));
  EXPECT_TRUE(BaseDirIsEmpty());
}

TEST_F(ShellRuntimeTest, MissingWorkdirIsCreated) {
  Task task = Script("pwd > \"$BATON_OUTPUT\"; cat input.txt >> \"$BATON_OUTPUT\"");
  task.workdir = scratch_.path() + "/does-not-exist/yet";
  task.files = {{"input.txt", "x"}};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, scratch_.path() + "/does-not-exist/yet\nx");
}

TEST_F(ShellRuntimeTest, RelativeOrUnusableWorkdirFailsTheTask) {
  Task relative = Script("echo ran");
  relative.workdir = "some/dir";
  RunOutcome outcome = RunTask(std::move(relative));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("workdir"), HasSubstr("some/dir"),
                                   HasSubstr("not an absolute path")));

  std::ofstream(scratch_.path() + "/a-file") << "x";
  Task on_a_file = Script("echo ran");
  on_a_file.workdir = scratch_.path() + "/a-file";
  outcome = RunTask(std::move(on_a_file));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("workdir"), HasSubstr("a-file")));
  EXPECT_EQ(observer_.logs(), "");
}

TEST_F(ShellRuntimeTest, CmdWithoutRunFailsTheTask) {
  Task task;
  task.cmd = {"echo", "hi"};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr("run"));
}

TEST_F(ShellRuntimeTest, KilledBySignalIsReported) {
  RunOutcome outcome = RunTask(Script("echo about-to-die; kill -9 $$"));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("killed by signal 9"), HasSubstr("about-to-die")));
  EXPECT_EQ(outcome.exit_code, 128 + 9);
  EXPECT_EQ(outcome.reason, FailReason::kExit);
}

TEST_F(ShellRuntimeTest, StepNamesInErrorsFallBackToTheirPosition) {
  Task task = Script("true");
  AuxTask unnamed;
  unnamed.run = "exit 5";
  task.post = {AuxTask{}, unnamed};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr("post step 2 failed: exit code 5"));
}

TEST_F(ShellRuntimeTest, AuxTimeoutLimitsItsStep) {
  Task task = Script("echo main-ran");
  AuxTask pre;
  pre.name = "slow";
  pre.run = "sleep 30";
  pre.timeout = std::chrono::milliseconds(300);
  task.pre = {pre};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr("pre \"slow\" failed: timed out after 300ms"));
}

TEST_F(ShellRuntimeTest, ScriptsLargerThanAnArgumentRun) {
  // One exec argument is capped at 128 KiB; scripts go through a file.
  Task task = Script("# " + std::string(300 * 1024, 'x') + "\nprintf ok > \"$BATON_OUTPUT\"");
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "ok");
}

TEST_F(ShellRuntimeTest, ScriptsStartingWithADashAreNotBashOptions) {
  RunOutcome outcome = RunTask(Script("--version"));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_EQ(outcome.exit_code, 127);
  EXPECT_THAT(outcome.error, HasSubstr("--version: command not found"));
}

TEST_F(ShellRuntimeTest, ClosingStdoutEarlyDoesNotEndTheTask) {
  RunOutcome outcome = RunTask(
      Script("echo before; exec >/dev/null 2>&1; sleep 0.3; printf ok > \"$BATON_OUTPUT\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "ok");
  EXPECT_EQ(observer_.logs(), "before\n");
}

TEST_F(ShellRuntimeTest, OutputThatIsNotARegularFileFailsTheTask) {
  for (const char* script : {"mkfifo \"$BATON_OUTPUT\" \"$BATON_PROGRESS\"",
                             "ln -s /etc/hostname \"$BATON_OUTPUT\"", "mkdir \"$BATON_OUTPUT\""}) {
    RunOutcome outcome = RunTask(Script(script));
    EXPECT_EQ(outcome.state, State::kFailed) << script;
    EXPECT_THAT(outcome.error, HasSubstr("not a regular file")) << script;
  }
  EXPECT_TRUE(BaseDirIsEmpty());
}

TEST_F(ShellRuntimeTest, ProgressThatIsNotANumberIsIgnored) {
  RunOutcome outcome = RunTask(Script("echo 'about half' > \"$BATON_PROGRESS\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_TRUE(observer_.progress().empty());
}

// ---- No process survives its task ----

// The script starts background processes (one in a subshell, whose parent then dies)
// and records their pids in $PIDS; all of them must be gone once Run returns.
constexpr const char* kBackgroundTree =
    "sleep 1000 & echo $! >> \"$PIDS\"\n"
    "( sleep 1000 & echo $! >> \"$PIDS\" ) \n"
    "( trap '' TERM HUP; sleep 1000 ) & echo $! >> \"$PIDS\"\n";

// This process's children, zombies included (the runtime makes it their reaper).
std::vector<pid_t> ChildrenOfThisProcess() {
  std::vector<pid_t> children;
  for (const auto& thread : fs::directory_iterator("/proc/self/task")) {
    for (pid_t pid : ReadPids((thread.path() / "children").string())) children.push_back(pid);
  }
  return children;
}

void ExpectAllGone(const std::string& pid_file, std::size_t expected) {
  std::vector<pid_t> pids = ReadPids(pid_file);
  EXPECT_EQ(pids.size(), expected);
  for (pid_t pid : pids) EXPECT_TRUE(ProcessIsGone(pid)) << "pid " << pid << " survived";
  EXPECT_THAT(ChildrenOfThisProcess(), ::testing::IsEmpty()) << "unreaped children";
}

TEST_F(ShellRuntimeTest, TimeoutKillsTheWholeProcessTree) {
  std::string pids = scratch_.path() + "/pids";
  Task task = Script(std::string(kBackgroundTree) + "echo started; sleep 1000");
  task.env = {{"PIDS", pids}};
  task.timeout = std::chrono::milliseconds(800);
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("timed out after 800ms"), HasSubstr("started")));
  EXPECT_EQ(outcome.reason, FailReason::kTimeout);
  ExpectAllGone(pids, 3);
  EXPECT_TRUE(BaseDirIsEmpty());
}

TEST_F(ShellRuntimeTest, TimeoutKillsTheWholeProcessTreeWithoutCgroups) {
  options_.enable_cgroups = false;
  std::string pids = scratch_.path() + "/pids";
  Task task = Script(std::string(kBackgroundTree) + "sleep 1000");
  task.env = {{"PIDS", pids}};
  task.timeout = std::chrono::milliseconds(500);
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr("timed out"));
  ExpectAllGone(pids, 3);
}

TEST_F(ShellRuntimeTest, CancelKillsTheWholeProcessTree) {
  std::string pids = scratch_.path() + "/pids";
  Task task = Script(std::string(kBackgroundTree) + "echo started; sleep 1000");
  task.env = {{"PIDS", pids}};
  std::stop_source source;
  std::thread canceller([&] {
    testing::WaitFor([&] { return observer_.logs().find("started") != std::string::npos; },
                     std::chrono::seconds(20));
    source.request_stop();
  });
  RunOutcome outcome = RunTask(std::move(task), source.get_token());
  canceller.join();
  EXPECT_EQ(outcome.state, State::kCancelled);
  ExpectAllGone(pids, 3);
}

TEST_F(ShellRuntimeTest, BackgroundProcessesDieWhenTheStepEnds) {
  // The background sleeps hold the output pipe open: Run must not wait for them.
  std::string pids = scratch_.path() + "/pids";
  Task task = Script(std::string(kBackgroundTree) + "printf done > \"$BATON_OUTPUT\"");
  task.env = {{"PIDS", pids}};
  auto start = Clock::now();
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "done");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  ExpectAllGone(pids, 3);
}

TEST_F(ShellRuntimeTest, CgroupKillReachesProcessesThatLeftTheSession) {
  if (!Runtime().cgroups().tracks_processes()) {
    GTEST_SKIP() << "no writable cgroup hierarchy here (needs root): "
                 << Runtime().cgroups().Describe();
  }
  std::string pids = scratch_.path() + "/pids";
  Task task = Script(
      "setsid sleep 1000 >/dev/null 2>&1 < /dev/null & echo $! >> \"$PIDS\"\n"
      "sleep 0.1\n"
      "read -r p c s pp pgrp sid rest < /proc/$(cat \"$PIDS\")/stat; echo \"$sid\" > "
      "\"$BATON_OUTPUT\"\n"
      "echo $$ >> \"$BATON_OUTPUT\"");
  task.env = {{"PIDS", pids}};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  std::istringstream in(outcome.result);
  pid_t escaped_sid = 0, bash_pid = 0;
  in >> escaped_sid >> bash_pid;
  EXPECT_NE(escaped_sid, bash_pid) << "the sleep did not leave the task's session";
  ExpectAllGone(pids, 1);
}

// ---- Limits ----

TEST_F(ShellRuntimeTest, MemoryLimitKillsTheTaskWithAnOutOfMemoryError) {
  if (!Runtime().cgroups().limits_memory()) {
    GTEST_SKIP() << "no writable memory cgroup here (needs root): "
                 << Runtime().cgroups().Describe();
  }
  Task task = Script("echo allocating; head -c 200m /dev/zero | tail");
  task.limits = Limits{std::nullopt, 32 * 1024 * 1024};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr("out of memory: exceeded the memory limit of 32m"));
  EXPECT_EQ(outcome.reason, FailReason::kOutOfMemory);
  std::cout << "[ observed ] " << outcome.error << "\n";
}

TEST_F(ShellRuntimeTest, MemoryLimitFallsBackToAnAddressSpaceLimitWithoutCgroups) {
  options_.enable_cgroups = false;
  Task task = Script("head -c 200m /dev/zero | tail");
  task.limits = Limits{std::nullopt, 64 * 1024 * 1024};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("exit code"), HasSubstr("memory exhausted")));
  std::cout << "[ observed ] " << outcome.error << "\n";
}

TEST_F(ShellRuntimeTest, TaskJoinsCgroupsWithItsLimitsAndTheyAreRemovedAfterwards) {
  if (!Runtime().cgroups().limits_memory() || !Runtime().cgroups().limits_cpu() ||
      !Runtime().cgroups().limits_pids()) {
    GTEST_SKIP() << "cgroup controllers not all writable here: " << Runtime().cgroups().Describe();
  }
  std::string memory_mount = V1Mount("memory");
  std::string cpu_mount = V1Mount("cpu");
  std::string pids_mount = V1Mount("pids");
  if (memory_mount.empty() || cpu_mount.empty() || pids_mount.empty()) {
    GTEST_SKIP() << "the limit files checked here are cgroup v1's";
  }
  options_.pids_max = 77;
  runtime_.reset();
  Task task = Script(
      "cat /proc/self/cgroup > \"$BATON_OUTPUT\"\n"
      "path() { awk -F: -v c=\"$1\" '{n=split($2,a,\",\"); for(i=1;i<=n;i++) if(a[i]==c) print "
      "$3}' /proc/self/cgroup; }\n"
      "echo \"limits $(cat \"$MEM$(path memory)/memory.limit_in_bytes\")"
      " $(cat \"$CPU$(path cpu)/cpu.cfs_quota_us\") $(cat \"$PIDSCG$(path pids)/pids.max\")\"\n"
      "timeout 0.4 sh -c 'while :; do :; done'\n"
      "echo \"$(grep nr_throttled \"$CPU$(path cpu)/cpu.stat\")\"");
  task.env = {{"MEM", memory_mount}, {"CPU", cpu_mount}, {"PIDSCG", pids_mount}};
  task.limits = Limits{0.1, 256 * 1024 * 1024};
  RunOutcome outcome = RunTask(std::move(task));
  ASSERT_EQ(outcome.state, State::kCompleted) << outcome.error;
  std::string logs = observer_.logs();
  EXPECT_THAT(logs, HasSubstr("limits 268435456 10000 77\n"));
  std::size_t throttled_at = logs.find("nr_throttled ");
  ASSERT_NE(throttled_at, std::string::npos) << logs;
  EXPECT_GT(std::stoll(logs.substr(throttled_at + 13)), 0)
      << "a busy loop at 0.1 cpus was never throttled";
  std::cout << "[ observed ] " << logs;

  std::vector<std::string> dirs = BatonCgroupDirs(outcome.result);
  EXPECT_GE(dirs.size(), 3u) << outcome.result;
  for (const std::string& dir : dirs) EXPECT_FALSE(fs::exists(dir)) << dir << " was left behind";
}

TEST_F(ShellRuntimeTest, EveryTaskGetsAPidsCgroupByDefault) {
  if (!Runtime().cgroups().limits_pids()) {
    GTEST_SKIP() << "no writable pids cgroup here: " << Runtime().cgroups().Describe();
  }
  RunOutcome outcome = RunTask(Script("cat /proc/self/cgroup > \"$BATON_OUTPUT\""));
  ASSERT_EQ(outcome.state, State::kCompleted) << outcome.error;
  std::vector<std::string> dirs = BatonCgroupDirs(outcome.result);
  EXPECT_FALSE(dirs.empty()) << outcome.result;
  // Kept, empty, for the next task while the runtime lives; removed with it.
  for (const std::string& dir : dirs) EXPECT_EQ(ReadText(dir + "/cgroup.procs"), "") << dir;
  runtime_.reset();
  for (const std::string& dir : dirs) EXPECT_FALSE(fs::exists(dir)) << dir << " was left behind";
}

TEST_F(ShellRuntimeTest, ReusedCgroupHoldsNothingOfTheTaskBefore) {
  if (!Runtime().cgroups().tracks_processes()) {
    GTEST_SKIP() << "no writable cgroup hierarchy here (needs root): "
                 << Runtime().cgroups().Describe();
  }
  std::string pids = scratch_.path() + "/pids";
  // The first task leaves a process outside its session behind.
  Task first = Script(
      "setsid sleep 1000 >/dev/null 2>&1 < /dev/null & echo $! >> \"$PIDS\"\n"
      "cat /proc/self/cgroup > \"$BATON_OUTPUT\"");
  first.env = {{"PIDS", pids}};
  RunOutcome a = RunTask(std::move(first));
  ASSERT_EQ(a.state, State::kCompleted) << a.error;
  ExpectAllGone(pids, 1);
  // Its cgroups are emptied, or gone.
  for (const std::string& dir : BatonCgroupDirs(a.result)) {
    if (fs::exists(dir)) EXPECT_EQ(ReadText(dir + "/cgroup.procs"), "") << dir;
  }
  // A clean task's cgroups go to the next task, which finds only itself there (`read` is
  // a builtin: listing forks nothing).
  RunOutcome b = RunTask(Script("cat /proc/self/cgroup > \"$BATON_OUTPUT\""));
  ASSERT_EQ(b.state, State::kCompleted) << b.error;
  std::vector<std::string> dirs = BatonCgroupDirs(b.result);
  ASSERT_FALSE(dirs.empty()) << b.result;
  std::string dir_list;
  for (const std::string& dir : dirs) dir_list += dir + " ";
  Task third = Script(
      "cat /proc/self/cgroup > \"$BATON_OUTPUT\"\n"
      "for d in $DIRS; do printf 'in %s:' \"$d\"; while read -r p; do printf ' %s' \"$p\"; "
      "done < \"$d/cgroup.procs\"; echo; done; echo \"self $$\"");
  third.env = {{"DIRS", dir_list}};
  RunOutcome c = RunTask(std::move(third));
  ASSERT_EQ(c.state, State::kCompleted) << c.error;
  EXPECT_EQ(BatonCgroupDirs(c.result), dirs) << "the cgroups were not reused";
  std::string logs = observer_.logs();
  std::size_t self_at = logs.find("self ");
  ASSERT_NE(self_at, std::string::npos) << logs;
  std::string self = logs.substr(self_at + 5, logs.find('\n', self_at) - self_at - 5);
  for (const std::string& dir : dirs) {
    EXPECT_THAT(logs, HasSubstr("in " + dir + ": " + self + "\n")) << logs;
  }
}

TEST_F(ShellRuntimeTest, EmptyTaskCgroupsOfAGoneProcessAreRemovedAtStart) {
  if (!Runtime().cgroups().tracks_processes()) {
    GTEST_SKIP() << "no writable cgroup hierarchy here (needs root): "
                 << Runtime().cgroups().Describe();
  }
  RunOutcome outcome = RunTask(Script("cat /proc/self/cgroup > \"$BATON_OUTPUT\""));
  ASSERT_EQ(outcome.state, State::kCompleted) << outcome.error;
  std::vector<std::string> dirs = BatonCgroupDirs(outcome.result);
  ASSERT_FALSE(dirs.empty()) << outcome.result;
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  // Named "<pid namespace>-<pid>-<n>": ours is in the runtime's own prefix.
  const std::string& prefix = Runtime().cgroups().task_name_prefix();
  std::string pid_namespace = prefix.substr(0, prefix.find('-'));
  std::vector<std::string> stale, kept;
  for (const std::string& dir : dirs) {
    std::string parent = fs::path(dir).parent_path().string();
    stale.push_back(parent + "/" + pid_namespace + "-" + std::to_string(gone) + "-1");
    // A live process's, and one of another pid namespace (its pids mean nothing here).
    kept.push_back(parent + "/" + pid_namespace + "-" + std::to_string(getppid()) + "-1");
    kept.push_back(parent + "/1" + pid_namespace + "-" + std::to_string(gone) + "-1");
    ASSERT_TRUE(fs::create_directory(stale.back())) << stale.back();
    ASSERT_TRUE(fs::create_directory(kept[kept.size() - 2])) << kept[kept.size() - 2];
    ASSERT_TRUE(fs::create_directory(kept.back())) << kept.back();
  }
  runtime_.reset();
  Runtime();  // finds the hierarchies again
  for (const std::string& dir : stale) EXPECT_FALSE(fs::exists(dir)) << dir;
  for (const std::string& dir : kept) {
    EXPECT_TRUE(fs::exists(dir)) << dir;
    rmdir(dir.c_str());
  }
}

TEST_F(ShellRuntimeTest, TaskAfterAnOutOfMemoryTaskIsNotLimited) {
  if (!Runtime().cgroups().limits_memory()) {
    GTEST_SKIP() << "no writable memory cgroup here (needs root): "
                 << Runtime().cgroups().Describe();
  }
  Task limited = Script("head -c 200m /dev/zero | tail");
  limited.limits = Limits{0.5, 32 * 1024 * 1024};
  RunOutcome a = RunTask(limited);
  EXPECT_EQ(a.state, State::kFailed);
  EXPECT_THAT(a.error, HasSubstr("out of memory"));
  for (int i = 0; i < 2; ++i) {
    RunOutcome b = RunTask(Script("head -c 200m /dev/zero | tail; echo fine"));
    EXPECT_EQ(b.state, State::kCompleted) << b.error;
  }
  // And a limited task after unlimited ones is limited again.
  RunOutcome c = RunTask(limited);
  EXPECT_EQ(c.state, State::kFailed);
  EXPECT_THAT(c.error, HasSubstr("out of memory"));
}

TEST_F(ShellRuntimeTest, TaskDirectoryIsReusedOnlyOnceEmpty) {
  if (!Runtime().cgroups().tracks_processes()) {
    GTEST_SKIP() << "directories are reused only where cgroups track the processes: "
                 << Runtime().cgroups().Describe();
  }
  auto run = [this](const std::string& script) {
    RunOutcome outcome =
        RunTask(Script("pwd > \"$BATON_OUTPUT\"; ls -A >> \"$BATON_OUTPUT\"; " + script));
    EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
    return outcome.result;
  };
  // A file of the task's own: its directory is removed, not reused.
  std::string a = run("echo x > left-behind; echo p > \"$BATON_PROGRESS\"");
  std::string a_dir = a.substr(0, a.find('\n'));
  EXPECT_EQ(a, a_dir + "\n.baton-output\n");
  EXPECT_FALSE(fs::exists(a_dir));
  // Only the runtime's own files: reused, and the next task finds it empty.
  std::string b = run("echo 50 > \"$BATON_PROGRESS\"");
  std::string b_dir = b.substr(0, b.find('\n'));
  EXPECT_NE(b_dir, a_dir);
  std::string c = run("");
  EXPECT_EQ(c, b_dir + "\n.baton-output\n") << "not reused, or not empty";
  // Something written there while it was idle: not reused.
  std::ofstream(b_dir + "/intruder") << "x";
  std::string d = run("");
  std::string d_dir = d.substr(0, d.find('\n'));
  EXPECT_NE(d_dir, b_dir);
  EXPECT_EQ(d, d_dir + "\n.baton-output\n");
  EXPECT_FALSE(fs::exists(b_dir));
  EXPECT_TRUE(BaseDirIsEmpty());
}

// ---- Warnings and health ----

TEST_F(ShellRuntimeTest, DisabledCgroupsAreReportedOnceAtConstruction) {
  options_.enable_cgroups = false;
  ::testing::internal::CaptureStderr();
  Runtime();
  std::string at_construction = ::testing::internal::GetCapturedStderr();
  ::testing::internal::CaptureStderr();
  Task task = Script("true");
  task.limits = Limits{0.5, 64 * 1024 * 1024};
  RunOutcome first = RunTask(task);
  RunOutcome second = RunTask(task);
  std::string at_run = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(first.state, State::kCompleted) << first.error;
  EXPECT_EQ(second.state, State::kCompleted) << second.error;
  EXPECT_EQ(CountOccurrences(at_construction, "No usable cgroups"), 1u) << at_construction;
  EXPECT_EQ(at_run, "");
}

TEST_F(ShellRuntimeTest, ImageIsIgnoredWithOneWarningPerJob) {
  Runtime();
  Task task = Script("printf ran > \"$BATON_OUTPUT\"");
  task.image = "alpine:3";
  ::testing::internal::CaptureStderr();
  RunOutcome a1 = RunTask(task, {}, "job-a");
  RunOutcome a2 = RunTask(task, {}, "job-a");
  RunOutcome b1 = RunTask(task, {}, "job-b");
  std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(a1.result, "ran");
  EXPECT_EQ(b1.result, "ran");
  EXPECT_EQ(CountOccurrences(logged, "ignores `image`"), 2u) << logged;
}

// ---- What only a container runtime can do ----

// Each field the shell runtime cannot honour fails the task before anything runs, with
// an error naming the field and the runtime that would honour it.
TEST_F(ShellRuntimeTest, ContainerOnlyFieldsFailTheTaskNamingTheField) {
  struct Case {
    std::string field;
    std::function<void(Task&)> set;
  };
  std::vector<Case> cases = {
      {"mounts",
       [](Task& t) {
         t.mounts = {Mount{MountType::kVolume, "", "/data", {}}};
       }},
      {"networks", [](Task& t) { t.networks = {"bridge"}; }},
      {"sidecars",
       [](Task& t) {
         AuxTask sidecar;
         sidecar.name = "web";
         sidecar.run = "echo sidecar-ran";
         t.sidecars = {sidecar};
       }},
      {"gpus", [](Task& t) { t.gpus = "all"; }},
      {"registry",
       [](Task& t) {
         t.registry = Registry{"user", "hunter2"};
       }},
  };
  for (const Case& c : cases) {
    Task task = Script("echo main-ran");
    task.pre = {AuxTask{.name = "prepare", .run = "echo pre-ran"}};
    c.set(task);
    RunOutcome outcome = RunTask(std::move(task));
    EXPECT_EQ(outcome.state, State::kFailed) << c.field;
    EXPECT_THAT(outcome.error, AllOf(HasSubstr(c.field + ": the shell runtime cannot"),
                                     HasSubstr("runtime.type = \"docker\"")));
    EXPECT_THAT(outcome.error, Not(HasSubstr("hunter2")));
  }
  EXPECT_EQ(observer_.logs(), "");
  EXPECT_TRUE(BaseDirIsEmpty());
}

TEST_F(ShellRuntimeTest, MountsErrorSaysTheShellRuntimeCannotMountVolumes) {
  Task task = Script("echo ran");
  task.mounts = {Mount{MountType::kBind, "/srv", "/data", {}}};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_EQ(outcome.error,
            "mounts: the shell runtime cannot mount volumes; run this task with runtime.type = "
            "\"docker\"");
}

TEST_F(ShellRuntimeTest, ContainerOnlyFieldsOfPreAndPostStepsFailTheTaskNamingTheStep) {
  Task with_registry = Script("echo main-ran");
  AuxTask pre{.name = "fetch", .run = "echo pre-ran"};
  pre.registry = Registry{"user", "hunter2"};
  with_registry.pre = {pre};
  RunOutcome outcome = RunTask(std::move(with_registry));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error,
              AllOf(HasSubstr("pre \"fetch\": registry:"), HasSubstr("runtime.type = \"docker\""),
                    Not(HasSubstr("hunter2"))));

  Task with_cmd = Script("echo main-ran");
  AuxTask post;
  post.cmd = {"echo", "post-ran"};
  with_cmd.post = {post};
  outcome = RunTask(std::move(with_cmd));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("post step 1: cmd, entrypoint:"),
                                   HasSubstr("runtime.type = \"docker\"")));
  EXPECT_EQ(observer_.logs(), "");
}

TEST_F(ShellRuntimeTest, ImageOnAPreStepIsIgnoredLikeTheTasksImage) {
  Task task = Script("printf ran > \"$BATON_OUTPUT\"");
  AuxTask pre{.name = "prepare", .run = "echo pre-ran"};
  pre.image = "alpine:3";
  task.pre = {pre};
  ::testing::internal::CaptureStderr();
  RunOutcome outcome = RunTask(std::move(task));
  std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "ran");
  EXPECT_EQ(observer_.logs(), "pre-ran\n");
  EXPECT_EQ(CountOccurrences(logged, "ignores `image`"), 1u) << logged;
}

// ---- The task directory's paths ----

// A library user may pass a relative base_dir; the task runs elsewhere, so the paths it
// is given must not be relative.
TEST_F(ShellRuntimeTest, RelativeBaseDirStillGivesTasksAbsolutePaths) {
  fs::path relative =
      fs::relative(fs::path(scratch_.path()) / "relative-tasks", fs::current_path());
  ASSERT_TRUE(relative.is_relative()) << relative;
  options_.base_dir = relative.string();
  RunOutcome baton = RunTask(
      Script("printf '%s' \"$BATON_OUTPUT\" > \"$BATON_OUTPUT\"; echo 50 > \"$BATON_PROGRESS\""));
  EXPECT_EQ(baton.state, State::kCompleted) << baton.error;
  EXPECT_EQ(baton.result.rfind(scratch_.path() + "/relative-tasks/", 0), 0u) << baton.result;
  RunOutcome tork = RunTask(
      Script("printf '%s' \"$TORK_OUTPUT\" > \"$TORK_OUTPUT\"; echo 60 > \"$TORK_PROGRESS\""));
  EXPECT_EQ(tork.state, State::kCompleted) << tork.error;
  EXPECT_EQ(tork.result.rfind(scratch_.path() + "/relative-tasks/", 0), 0u) << tork.result;
  EXPECT_THAT(observer_.progress(), ::testing::ElementsAre(50.0, 60.0));
  EXPECT_EQ(Runtime().options().base_dir, scratch_.path() + "/relative-tasks");
}

TEST_F(ShellRuntimeTest, MissingBashFailsHealthAndRun) {
  options_.bash = "/nonexistent/bash";
  EXPECT_EQ(Runtime().Health().code(), StatusCode::kFailedPrecondition);
  RunRequest request;
  request.task_id = "t";
  request.task = Script("true");
  Result<RunOutcome> outcome = Runtime().Run(request, observer_, {});
  EXPECT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("/nonexistent/bash"));
  EXPECT_TRUE(BaseDirIsEmpty());
}

TEST_F(ShellRuntimeTest, UnwritableBaseDirFailsHealth) {
  options_.base_dir = "/dev/null/tasks";
  Status health = Runtime().Health();
  EXPECT_EQ(health.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(health.message(), HasSubstr("/dev/null/tasks"));
}

// ---- The sandbox: what a task cannot see ----

// A data directory as the engine keeps it: a key, a database, and the task directories
// (another job's among them) under tasks/.
class SandboxTest : public ShellRuntimeTest {
 protected:
  void SetUp() override {
    data_ = scratch_.path() + "/data";
    fs::create_directories(data_ + "/tasks/other-job-dir");
    std::ofstream(data_ + "/secrets.key") << "the-key\n";
    std::ofstream(data_ + "/baton.db") << "the-database\n";
    std::ofstream(data_ + "/tasks/other-job-dir/result") << "another-jobs-file\n";
    options_.base_dir = data_ + "/tasks";
    options_.hidden_dirs = {data_};
  }

  // A script that tries each way in and prints what it got, one word per attempt.
  std::string Probe() const {
    return "try() { if out=$(\"$@\" 2>/dev/null) && [ -n \"$out\" ]; then printf '%s ' \"$out\"; "
           "else printf 'refused '; fi; }\n"
           "try cat " +
           data_ +
           "/secrets.key\n"
           "try cat " +
           data_ +
           "/baton.db\n"
           "try cat " +
           data_ +
           "/tasks/other-job-dir/result\n"
           "try ls " +
           data_ +
           "/tasks/other-job-dir\n"
           // Through this process's own /proc entries, past any namespace.
           "try cat /proc/" +
           std::to_string(getpid()) + "/root" + data_ +
           "/secrets.key\n"
           "try sh -c 'readlink /proc/" +
           std::to_string(getpid()) +
           "/fd/*'\n"
           // The task's own directory is writable; the system is readable.
           "echo mine > own && try cat own\n"
           "try head -c 4 /etc/passwd\n"
           "try ls -d /usr/bin\n";
  }

  std::string data_;
};

TEST_F(SandboxTest, TaskSeesNeitherTheKeyNorTheDatabaseNorAnotherJobsDirectory) {
  ASSERT_TRUE(Runtime().sandboxed()) << Runtime().sandbox_unavailable();
  RunOutcome outcome = RunTask(Script(Probe() + "printf done > \"$BATON_OUTPUT\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "done");
  EXPECT_EQ(observer_.logs(),
            "refused refused refused refused refused refused mine root /usr/bin ");
  // Only the task's view changed: the files are still there for Baton.
  EXPECT_EQ(ReadText(data_ + "/secrets.key"), "the-key\n");
}

TEST_F(SandboxTest, ARootTaskCannotUnmountTheEmptyStandIn) {
  if (!Runtime().landlocked()) {
    FAIL() << "this kernel has no Landlock (ABI " << Runtime().sandbox_host().landlock_abi
           << "): the mount namespace alone does not stop a root task from unmounting";
  }
  RunOutcome outcome = RunTask(Script("umount " + data_ + " 2>&1 || umount -l " + data_ +
                                      " 2>&1; cat " + data_ + "/secrets.key 2>&1 || true"));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_THAT(observer_.logs(), Not(HasSubstr("the-key")));
}

TEST_F(SandboxTest, ATaskCannotSignalBaton) {
  if (Runtime().sandbox_host().landlock_abi < 6) {
    FAIL() << "Landlock ABI " << Runtime().sandbox_host().landlock_abi
           << " has no signal scoping (ABI 6, Linux 6.12): a task of Baton's user can signal it";
  }
  RunOutcome outcome = RunTask(Script("kill -0 " + std::to_string(getpid()) +
                                      " 2>/dev/null && echo signalled || echo refused"));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(observer_.logs(), "refused\n");
}

TEST_F(SandboxTest, ATaskWhoseDirectoryIsOutsideTheHiddenOnesRunsToo) {
  options_.base_dir = scratch_.path() + "/elsewhere";
  RunOutcome outcome = RunTask(Script("cat " + data_ +
                                      "/secrets.key 2>/dev/null || "
                                      "printf hidden > \"$BATON_OUTPUT\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "hidden");
}

TEST_F(SandboxTest, TasksRunAsTheConfiguredUserAndGroupInADirectoryOfTheirs) {
  // The directories above the data directory must let the task's user search them.
  ASSERT_EQ(chmod(scratch_.path().c_str(), 0711), 0);
  options_.uid = 65534;
  options_.gid = 65534;
  Task task = Script("id -u; id -g; id -G; stat -c %u input.txt; echo mine > own && cat own; " +
                     Probe() + "printf ok > \"$BATON_OUTPUT\"");
  task.files = {{"input.txt", "x"}};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "ok");
  EXPECT_EQ(observer_.logs(),
            "65534\n65534\n65534\n65534\nmine\n"
            "refused refused refused refused refused refused mine root /usr/bin ");
}

TEST_F(SandboxTest, AWorkdirTheRuntimeCreatesBelongsToTheTasksUser) {
  ASSERT_EQ(chmod(scratch_.path().c_str(), 0711), 0);
  options_.uid = 65534;
  options_.gid = 65534;
  Task task = Script("echo written > made-here && cat made-here");
  task.workdir = scratch_.path() + "/work/dir";
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(observer_.logs(), "written\n");
}

TEST_F(ShellRuntimeTest, WithoutASandboxAnotherUserStillCannotReadBatonsFiles) {
  // The data directory's modes alone (0700 / 0600), on a host without mount namespaces.
  const std::string secret = scratch_.path() + "/secret";
  std::ofstream(secret) << "the-key\n";
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  options_.uid = 65534;
  options_.gid = 65534;
  RunOutcome outcome = RunTask(Script("id -u; cat " + secret + " 2>&1 || true"));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_THAT(observer_.logs(),
              AllOf(HasSubstr("65534"), HasSubstr("Permission denied"), Not(HasSubstr("the-key"))));
}

// ---- Cost ----

TEST_F(ShellRuntimeTest, TrivialTasksAreCheap) {
  constexpr int kTasks = 100;
  Runtime();
  auto start = Clock::now();
  for (int i = 0; i < kTasks; ++i) {
    RunOutcome outcome = RunTask(Script("true"));
    ASSERT_EQ(outcome.state, State::kCompleted) << outcome.error;
  }
  auto per_task =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start) / kTasks;
  std::cout << "[ observed ] " << per_task.count() << " us per `true` task\n";
  // Generous: sanitizer builds on a loaded machine. A release build is ~1-2 ms.
  EXPECT_LT(per_task, std::chrono::milliseconds(100));
}

// ---- A crashed runtime's tasks ----

// Whether `pid` no longer runs: gone, or a zombie (reaped here when it is our child: this
// process is the subreaper of the crashed runtime's orphans).
bool ProcessIsDead(pid_t pid) {
  waitpid(pid, nullptr, WNOHANG);
  if (ProcessIsGone(pid)) return true;
  std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  std::size_t close = stat.rfind(')');
  return close == std::string::npos || (close + 2 < stat.size() && stat[close + 2] == 'Z');
}

// Runs `script` as a task of a runtime made in a child process, waits until the script
// has written `lines` lines to $PIDS, then SIGKILLs the child, as `kill -9` of a worker:
// the runtime gets no chance to stop the task. Returns the pids the script wrote.
std::vector<pid_t> CrashRuntimeWhileItRuns(const ShellRuntimeOptions& options,
                                           const std::string& script, const std::string& pid_file,
                                           std::size_t lines) {
  pid_t child = fork();
  if (child == 0) {
    ShellRuntime runtime(options);
    RunRequest request;
    request.task_id = "crashed-task";
    request.job_id = "crashed-job";
    request.task.run = script;
    request.task.env = {{"PIDS", pid_file}};
    RecordingObserver observer;
    (void)runtime.Run(request, observer, {});
    _exit(1);  // not reached: the script never ends
  }
  EXPECT_GT(child, 0);
  // Killed once the step is recorded (the microseconds between a step's start and its
  // record are a documented gap without cgroups).
  auto recorded = [&] {
    std::error_code ec;
    for (const auto& entry :
         fs::recursive_directory_iterator(options.base_dir + "/.baton-runtimes", ec)) {
      if (ReadText(entry.path().string()).find("group ") != std::string::npos) return true;
    }
    return false;
  };
  bool started = testing::WaitFor([&] { return ReadPids(pid_file).size() >= lines && recorded(); },
                                  std::chrono::seconds(20));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(started) << "the task did not start";
  std::vector<pid_t> pids = ReadPids(pid_file);
  for (pid_t pid : pids)
    EXPECT_FALSE(ProcessIsDead(pid)) << "pid " << pid << " died with the runtime";
  return pids;
}

// The task's own shell, a background process in its process group and a loop: what a
// task left running when its worker was killed.
constexpr const char* kCrashedTask =
    "echo $$ >> \"$PIDS\"\n"
    "sleep 1000 & echo $! >> \"$PIDS\"\n"
    "while :; do sleep 0.05; done\n";

TEST_F(ShellRuntimeTest, KillLeftoversKillsTheTasksOfACrashedRuntimeBeforeReturning) {
  std::string pids_file = scratch_.path() + "/pids";
  std::string script = kCrashedTask;
  bool tracks = Runtime().cgroups().tracks_processes();
  runtime_.reset();
  if (tracks) {
    // One that left the task's session: only its cgroup finds it.
    script = "setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $! >> \"$PIDS\"\n" + script;
  }
  std::size_t lines = tracks ? 3 : 2;
  std::vector<pid_t> pids = CrashRuntimeWhileItRuns(options_, script, pids_file, lines);

  ShellRuntime next(options_);
  Status killed = next.KillLeftovers();
  EXPECT_TRUE(killed.ok()) << killed.ToString();
  // Right away: KillLeftovers returns only once they are gone.
  for (pid_t pid : pids) EXPECT_TRUE(ProcessIsDead(pid)) << "pid " << pid << " survived";
  for (pid_t pid : pids) kill(pid, SIGKILL);  // the test leaves nothing behind either way
  for (pid_t pid : pids) testing::WaitFor([&] { return ProcessIsDead(pid); });
}

TEST_F(ShellRuntimeTest, KillLeftoversKillsTheTasksOfACrashedRuntimeWithoutCgroups) {
  options_.enable_cgroups = false;
  std::string pids_file = scratch_.path() + "/pids";
  std::vector<pid_t> pids = CrashRuntimeWhileItRuns(options_, kCrashedTask, pids_file, 2);

  ShellRuntime next(options_);
  Status killed = next.KillLeftovers();
  EXPECT_TRUE(killed.ok()) << killed.ToString();
  for (pid_t pid : pids) EXPECT_TRUE(ProcessIsDead(pid)) << "pid " << pid << " survived";
  for (pid_t pid : pids) kill(pid, SIGKILL);
  for (pid_t pid : pids) testing::WaitFor([&] { return ProcessIsDead(pid); });
}

TEST_F(ShellRuntimeTest, KillLeftoversSparesTheTasksOfALiveRuntimeOnTheSameBaseDir) {
  std::string pids_file = scratch_.path() + "/pids";
  Task task = Script("echo $$ >> \"$PIDS\"; echo started; sleep 1000");
  task.env = {{"PIDS", pids_file}};
  std::stop_source source;
  std::thread running([&] {
    RunOutcome outcome = RunTask(task, source.get_token());
    EXPECT_EQ(outcome.state, State::kCancelled) << outcome.error;
  });
  ASSERT_TRUE(
      testing::WaitFor([&] { return ReadPids(pids_file).size() == 1; }, std::chrono::seconds(20)));
  pid_t pid = ReadPids(pids_file).front();

  ShellRuntime other(options_);  // a second worker sharing the data directory
  Status killed = other.KillLeftovers();
  EXPECT_TRUE(killed.ok()) << killed.ToString();
  EXPECT_FALSE(ProcessIsDead(pid)) << "a live runtime's task was killed";
  source.request_stop();
  running.join();
  EXPECT_TRUE(ProcessIsGone(pid));
}

TEST_F(ShellRuntimeTest, FinishedTasksLeaveNothingForKillLeftovers) {
  // A task that ended normally is not a leftover: the next runtime's cleanup finds
  // nothing of it, and the base directory holds nothing once both are gone.
  RunOutcome outcome = RunTask(Script("true"));
  ASSERT_EQ(outcome.state, State::kCompleted) << outcome.error;
  runtime_.reset();
  auto next = std::make_unique<ShellRuntime>(options_);
  Status killed = next->KillLeftovers();
  EXPECT_TRUE(killed.ok()) << killed.ToString();
  next.reset();
  std::string left;
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(options_.base_dir, ec)) {
    left += entry.path().string() + " ";
  }
  EXPECT_TRUE(BaseDirIsEmpty()) << "left behind: " << left;
}

// ---- cgroup helpers ----

TEST(CgroupMountsTest, ParsesV1ControllersAndTheV2Mount) {
  const char* mountinfo =
      "25 1 0:23 / /sys rw,nosuid - sysfs sysfs rw\n"
      "30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
      "31 30 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup "
      "rw,cpu,cpuacct\n"
      "32 30 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "33 30 0:29 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
      "34 30 0:30 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n"
      "35 30 0:31 / /mnt/with\\040space rw - cgroup cgroup rw,pids\n";
  std::vector<CgroupMount> mounts = ParseCgroupMounts(mountinfo);
  ASSERT_EQ(mounts.size(), 5u);
  EXPECT_EQ(mounts[0].mount_point, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_FALSE(mounts[0].v2);
  EXPECT_EQ(mounts[0].controllers, (std::vector<std::string>{"cpu", "cpuacct"}));
  EXPECT_EQ(mounts[1].controllers, (std::vector<std::string>{"memory"}));
  EXPECT_TRUE(mounts[2].v2);
  EXPECT_EQ(mounts[2].mount_point, "/sys/fs/cgroup/unified");
  EXPECT_TRUE(mounts[3].controllers.empty());
  EXPECT_EQ(mounts[4].mount_point, "/mnt/with space");
  EXPECT_EQ(mounts[4].controllers, (std::vector<std::string>{"pids"}));
}

TEST(CgroupHostTest, EmptyHostLimitsNothing) {
  CgroupHost host;
  EXPECT_FALSE(host.limits_memory());
  EXPECT_FALSE(host.limits_cpu());
  EXPECT_FALSE(host.limits_pids());
  EXPECT_FALSE(host.tracks_processes());
}

}  // namespace
}  // namespace baton

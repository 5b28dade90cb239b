// The Runtime contract (src/runtime/runtime.h) as tests: what every runtime must do with a
// task that has `run` and no image (a container runtime runs these in its default image,
// so the scripts use POSIX sh and basic utilities only).
//
// Include this header in exactly one test source of a binary and instantiate the suite:
//
//   using conformance::RuntimeConformanceTest;  // the macro needs the bare name
//   INSTANTIATE_TEST_SUITE_P(Shell, RuntimeConformanceTest,
//                            ::testing::Values(conformance::RuntimeFactory{
//                                "shell", [] { return std::make_unique<ShellRuntime>(); }}),
//                            conformance::RuntimeFactoryName);
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/runtime.h"
#include "testing/wait_for.h"

namespace baton::conformance {

struct RuntimeFactory {
  RuntimeFactory(std::string name_in, std::function<std::unique_ptr<Runtime>()> make_in,
                 std::function<std::string()> skip_reason_in = {},
                 std::function<void()> verify_clean_in = {})
      : name(std::move(name_in)),
        make(std::move(make_in)),
        skip_reason(std::move(skip_reason_in)),
        verify_clean(std::move(verify_clean_in)) {}

  std::string name;  // the instantiation's name: letters, digits and '_' only
  std::function<std::unique_ptr<Runtime>()> make;
  // Optional: why the runtime cannot be tested here (e.g. no container engine); a
  // non-empty answer skips the test, visibly.
  std::function<std::string()> skip_reason;
  // Optional: checks after each test that the runtime left nothing behind that the
  // suite cannot see (e.g. containers); report failures with gtest's EXPECT_*.
  std::function<void()> verify_clean;
};

inline std::string RuntimeFactoryName(const ::testing::TestParamInfo<RuntimeFactory>& info) {
  return info.param.name;
}

inline void PrintTo(const RuntimeFactory& factory, std::ostream* os) { *os << factory.name; }

// Records what a task produced. Thread-safe: a runtime may call it from its own threads,
// and tests read it while Run is still going.
class RecordingObserver : public RunObserver {
 public:
  void OnLog(std::string_view chunk) override {
    std::lock_guard lock(mu_);
    logs_.append(chunk);
  }
  void OnProgress(double percent) override {
    std::lock_guard lock(mu_);
    progress_.push_back(percent);
  }
  std::string logs() const {
    std::lock_guard lock(mu_);
    return logs_;
  }
  std::vector<double> progress() const {
    std::lock_guard lock(mu_);
    return progress_;
  }

 private:
  mutable std::mutex mu_;
  std::string logs_;
  std::vector<double> progress_;
};

class RuntimeConformanceTest : public ::testing::TestWithParam<RuntimeFactory> {
 protected:
  using State = RunOutcome::State;
  using Clock = std::chrono::steady_clock;

  void SetUp() override {
    if (GetParam().skip_reason) {
      std::string reason = GetParam().skip_reason();
      if (!reason.empty()) GTEST_SKIP() << reason;
    }
    runtime_ = GetParam().make();
    ASSERT_NE(runtime_, nullptr);
  }

  void TearDown() override {
    runtime_.reset();
    if (GetParam().verify_clean && !IsSkipped()) GetParam().verify_clean();
  }

  static Task Script(std::string run) {
    Task task;
    task.name = "conformance";
    task.run = std::move(run);
    return task;
  }

  static AuxTask Aux(std::string name, std::string run) {
    AuxTask aux;
    aux.name = std::move(name);
    aux.run = std::move(run);
    return aux;
  }

  // Runs `task` to the end; a runtime error fails the test and comes back as kFailed.
  RunOutcome RunTask(Task task, std::stop_token cancel = {},
                     std::size_t max_result_bytes = 64 * 1024) {
    return RunTaskWith(observer_, std::move(task), std::move(cancel), max_result_bytes);
  }

  RunOutcome RunTaskWith(RecordingObserver& observer, Task task, std::stop_token cancel = {},
                         std::size_t max_result_bytes = 64 * 1024) {
    RunRequest request;
    request.task_id = "task-" + std::to_string(next_task_++);
    request.job_id = "conformance-job";
    request.task = std::move(task);
    request.max_result_bytes = max_result_bytes;
    Result<RunOutcome> outcome = runtime_->Run(request, observer, std::move(cancel));
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    if (!outcome.ok()) {
      RunOutcome failed;
      failed.state = State::kFailed;
      failed.error = "runtime error: " + outcome.status().ToString();
      return failed;
    }
    return std::move(outcome).value();
  }

  // Cancels `source` once the observer has seen `text` in the logs.
  std::thread CancelWhenLogged(std::stop_source source, std::string text) {
    return std::thread([this, source, text = std::move(text)]() mutable {
      bool seen = testing::WaitFor([&] { return observer_.logs().find(text) != std::string::npos; },
                                   std::chrono::seconds(20));
      seen_before_cancel_ = seen;
      source.request_stop();
    });
  }

  std::unique_ptr<Runtime> runtime_;
  RecordingObserver observer_;
  std::atomic<bool> seen_before_cancel_{false};
  int next_task_ = 1;
};

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_P(RuntimeConformanceTest, HealthIsOk) {
  Status health = runtime_->Health();
  EXPECT_TRUE(health.ok()) << health.ToString();
}

TEST_P(RuntimeConformanceTest, ResultIsWhatTheTaskWroteToBatonOutput) {
  RunOutcome outcome = RunTask(Script("printf 'hello world' > \"$BATON_OUTPUT\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "hello world");
  EXPECT_EQ(outcome.exit_code, 0);
}

TEST_P(RuntimeConformanceTest, TorkOutputIsTheSameFileAsBatonOutput) {
  RunOutcome outcome =
      RunTask(Script("printf 'from tork' > \"$TORK_OUTPUT\"\n"
                     "test \"$TORK_OUTPUT\" = \"$BATON_OUTPUT\" || exit 9"));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "from tork");
}

TEST_P(RuntimeConformanceTest, ResultIsEmptyWhenTheTaskWritesNone) {
  RunOutcome outcome = RunTask(Script("true"));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "");
}

TEST_P(RuntimeConformanceTest, StdoutAndStderrReachTheObserverInOrder) {
  RunOutcome outcome = RunTask(Script("echo one; echo two >&2; echo three"));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(observer_.logs(), "one\ntwo\nthree\n");
}

TEST_P(RuntimeConformanceTest, LargeOutputReachesTheObserverCompletely) {
  // More than a pipe buffer (64 KiB) and more than one read.
  RunOutcome outcome =
      RunTask(Script("i=0; while [ $i -lt 2000 ]; do "
                     "echo \"line $i ........................................................\"; "
                     "i=$((i+1)); done"));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  std::string logs = observer_.logs();
  EXPECT_EQ(std::count(logs.begin(), logs.end(), '\n'), 2000);
  EXPECT_THAT(logs, HasSubstr("line 0 ...."));
  EXPECT_THAT(logs, HasSubstr("line 1999 ...."));
}

TEST_P(RuntimeConformanceTest, LogsArriveWhileTheTaskIsStillRunning) {
  std::stop_source source;
  std::thread canceller = CancelWhenLogged(source, "started");
  RunOutcome outcome = RunTask(Script("echo started; sleep 30"), source.get_token());
  canceller.join();
  EXPECT_TRUE(seen_before_cancel_) << "the first line never arrived while the task ran";
  EXPECT_EQ(outcome.state, State::kCancelled) << outcome.error;
}

TEST_P(RuntimeConformanceTest, TaskEnvIsVisibleToTheScript) {
  Task task = Script("printf '%s|%s' \"$GREETING\" \"$EMPTY\" > \"$BATON_OUTPUT\"");
  task.env = {{"GREETING", "hello there"}, {"EMPTY", ""}};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "hello there|");
}

TEST_P(RuntimeConformanceTest, NonZeroExitFailsWithTheExitCodeAndTheLastLines) {
  RunOutcome outcome = RunTask(Script("echo preparing; echo 'it broke' >&2; exit 3"));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_EQ(outcome.exit_code, 3);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("exit code 3"), HasSubstr("it broke")));
}

TEST_P(RuntimeConformanceTest, FailureQuotesOnlyTheLastLinesOfOutput) {
  RunOutcome outcome =
      RunTask(Script("i=1; while [ $i -le 100 ]; do echo \"line$i\"; i=$((i+1)); done; exit 1"));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("exit code 1"), HasSubstr("line100"),
                                   HasSubstr("line95"), Not(HasSubstr("line50\n"))));
  EXPECT_LT(outcome.error.size(), 4096u);
}

TEST_P(RuntimeConformanceTest, FilesAreWrittenBeforeTheScriptRuns) {
  Task task = Script("cat data.txt > \"$BATON_OUTPUT\"; sh ./script.sh >> \"$BATON_OUTPUT\"");
  task.files = {{"data.txt", "payload\n"}, {"script.sh", "echo from-script"}};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "payload\nfrom-script\n");
}

TEST_P(RuntimeConformanceTest, FileNamesThatLeaveTheDirectoryAreRefused) {
  for (const char* name : {"../escape.txt", "sub/file.txt", "..", "/etc/evil"}) {
    Task task = Script("echo should-not-run");
    task.files = {{name, "x"}};
    RunOutcome outcome = RunTask(std::move(task));
    EXPECT_EQ(outcome.state, State::kFailed) << name;
    EXPECT_THAT(outcome.error, HasSubstr(name));
  }
  EXPECT_THAT(observer_.logs(), Not(HasSubstr("should-not-run")));
}

TEST_P(RuntimeConformanceTest, PreAndPostRunAroundMainInTheSameDirectory) {
  Task task = Script("echo main; cat from-pre.txt > \"$BATON_OUTPUT\"; echo main > from-main.txt");
  task.pre = {Aux("prepare", "echo pre; echo prepared > from-pre.txt")};
  task.post = {Aux("check", "echo post; cat from-main.txt")};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "prepared\n");
  EXPECT_EQ(observer_.logs(), "pre\nmain\npost\nmain\n");
}

TEST_P(RuntimeConformanceTest, PreAndPostFilesAreWrittenBeforeTheirStepRuns) {
  // The main step sees the pre step's files but not yet the post step's.
  Task task = Script(
      "test ! -e post-file.txt || exit 7\n"
      "cat pre-file.txt > \"$BATON_OUTPUT\"");
  AuxTask pre = Aux("prepare", "cat pre-file.txt");
  pre.files = {{"pre-file.txt", "from pre files\n"}};
  AuxTask post = Aux("check", "cat post-file.txt");
  post.files = {{"post-file.txt", "from post files\n"}};
  task.pre = {pre};
  task.post = {post};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "from pre files\n");
  EXPECT_EQ(observer_.logs(), "from pre files\nfrom post files\n");
}

TEST_P(RuntimeConformanceTest, InvalidPreFileNamesAreRefused) {
  Task task = Script("echo main-ran");
  AuxTask pre = Aux("prepare", "echo pre-ran");
  pre.files = {{"../escape.txt", "x"}};
  task.pre = {pre};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr("../escape.txt"));
  EXPECT_THAT(observer_.logs(), AllOf(Not(HasSubstr("pre-ran")), Not(HasSubstr("main-ran"))));
}

// `workdir` names a directory that does not exist yet: on a host (shell runtime) and in a
// container alike, it is made, every step runs there, and every step's `files` are there.
TEST_P(RuntimeConformanceTest, WorkdirIsTheWorkingDirectoryOfEveryStepAndHoldsTheFiles) {
  std::string workdir =
      (std::filesystem::temp_directory_path() /
       ("baton-conformance-workdir-" + std::to_string(getpid()) + "-" + GetParam().name))
          .string();
  std::error_code ec;
  std::filesystem::remove_all(workdir, ec);
  Task task = Script(
      "pwd; cat data.txt pre.txt\n"
      "test ! -e post.txt || exit 7\n"
      "printf done > \"$BATON_OUTPUT\"");
  task.workdir = workdir;
  task.files = {{"data.txt", "task file\n"}};
  AuxTask pre = Aux("prepare", "pwd; cat data.txt pre.txt");
  pre.files = {{"pre.txt", "pre file\n"}};
  AuxTask post = Aux("check", "pwd; cat post.txt");
  post.files = {{"post.txt", "post file\n"}};
  task.pre = {pre};
  task.post = {post};
  RunOutcome outcome = RunTask(std::move(task));
  std::filesystem::remove_all(workdir, ec);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "done");
  EXPECT_EQ(observer_.logs(), workdir + "\ntask file\npre file\n" +      // pre
                                  workdir + "\ntask file\npre file\n" +  // main
                                  workdir + "\npost file\n");            // post
}

TEST_P(RuntimeConformanceTest, FailedPreFailsTheTaskNamingTheStepAndSkipsMain) {
  Task task = Script("echo main-ran");
  task.pre = {Aux("prepare", "echo 'cannot prepare'; exit 1")};
  task.post = {Aux("cleanup", "echo post-ran")};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("pre \"prepare\" failed"), HasSubstr("exit code 1"),
                                   HasSubstr("cannot prepare")));
  EXPECT_THAT(observer_.logs(), AllOf(Not(HasSubstr("main-ran")), Not(HasSubstr("post-ran"))));
}

TEST_P(RuntimeConformanceTest, PostDoesNotRunWhenMainFails) {
  Task task = Script("exit 4");
  task.post = {Aux("cleanup", "echo post-ran")};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_EQ(outcome.exit_code, 4);
  EXPECT_THAT(observer_.logs(), Not(HasSubstr("post-ran")));
}

TEST_P(RuntimeConformanceTest, FailedPostFailsTheTask) {
  Task task = Script("printf done > \"$BATON_OUTPUT\"");
  task.post = {Aux("publish", "exit 2")};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("post \"publish\" failed"), HasSubstr("exit code 2")));
}

TEST_P(RuntimeConformanceTest, AuxEnvOverridesTheTaskEnv) {
  Task task = Script("echo \"main:$WHO:$SHARED\"");
  task.env = {{"WHO", "task"}, {"SHARED", "yes"}};
  AuxTask pre = Aux("prepare", "echo \"pre:$WHO:$SHARED\"");
  pre.env = {{"WHO", "pre"}};
  task.pre = {pre};
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(observer_.logs(), "pre:pre:yes\nmain:task:yes\n");
}

TEST_P(RuntimeConformanceTest, TimeoutFailsTheTaskWithTimedOut) {
  Task task = Script("echo waiting; sleep 30");
  task.timeout = std::chrono::seconds(1);
  auto start = Clock::now();
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr("timed out"));
  EXPECT_THAT(outcome.error, HasSubstr("1s"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

TEST_P(RuntimeConformanceTest, TimeoutCoversPreMainAndPost) {
  // Each step alone is within the timeout; together they are not.
  Task task = Script("sleep 0.5");
  task.pre = {Aux("first", "sleep 0.5")};
  task.post = {Aux("last", "sleep 0.5; echo post-finished")};
  task.timeout = std::chrono::milliseconds(1000);
  RunOutcome outcome = RunTask(std::move(task));
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr("timed out"));
  EXPECT_THAT(observer_.logs(), Not(HasSubstr("post-finished")));
}

TEST_P(RuntimeConformanceTest, CancelEndsTheTaskAsCancelled) {
  std::stop_source source;
  std::thread canceller = CancelWhenLogged(source, "running");
  auto start = Clock::now();
  RunOutcome outcome =
      RunTask(Script("echo running; sleep 30; echo not-reached"), source.get_token());
  canceller.join();
  EXPECT_EQ(outcome.state, State::kCancelled) << outcome.error;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_THAT(observer_.logs(), Not(HasSubstr("not-reached")));
}

TEST_P(RuntimeConformanceTest, AlreadyCancelledTaskDoesNotRun) {
  std::stop_source source;
  source.request_stop();
  RunOutcome outcome = RunTask(Script("echo ran"), source.get_token());
  EXPECT_EQ(outcome.state, State::kCancelled);
  EXPECT_EQ(observer_.logs(), "");
}

TEST_P(RuntimeConformanceTest, ResultOverTheCapFailsTheTask) {
  RunOutcome outcome =
      RunTask(Script("head -c 2000 /dev/zero | tr '\\0' x > \"$BATON_OUTPUT\""), {}, 1000);
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("2000"), HasSubstr("1000")));
  EXPECT_EQ(outcome.result, "");
}

TEST_P(RuntimeConformanceTest, ResultAtTheCapIsAccepted) {
  RunOutcome outcome =
      RunTask(Script("head -c 1000 /dev/zero | tr '\\0' x > \"$BATON_OUTPUT\""), {}, 1000);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, std::string(1000, 'x'));
}

TEST_P(RuntimeConformanceTest, ProgressWrittenByTheTaskIsReported) {
  RunOutcome outcome =
      RunTask(Script("echo 50 > \"$BATON_PROGRESS\"; sleep 1.2; echo 100 > \"$BATON_PROGRESS\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  std::vector<double> progress = observer_.progress();
  EXPECT_THAT(progress, Contains(50.0));
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), 100.0);
}

TEST_P(RuntimeConformanceTest, TorkProgressIsTheSameFileAsBatonProgress) {
  RunOutcome outcome = RunTask(Script("echo 42.5 > \"$TORK_PROGRESS\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_THAT(observer_.progress(), Contains(42.5));
}

TEST_P(RuntimeConformanceTest, ProgressIsClampedToTheRange) {
  RunOutcome outcome = RunTask(Script("echo 150 > \"$BATON_PROGRESS\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_THAT(observer_.progress(), ::testing::ElementsAre(100.0));
}

TEST_P(RuntimeConformanceTest, EachTaskStartsInAFreshDirectory) {
  RunOutcome first = RunTask(Script("echo x > marker.txt"));
  EXPECT_EQ(first.state, State::kCompleted) << first.error;
  RunOutcome second = RunTask(Script("test ! -e marker.txt"));
  EXPECT_EQ(second.state, State::kCompleted) << second.error;
}

TEST_P(RuntimeConformanceTest, ConcurrentRunsDoNotInterfere) {
  constexpr int kRuns = 4;
  std::vector<RunOutcome> outcomes(kRuns);
  std::vector<RecordingObserver> observers(kRuns);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      Task task = Script("echo \"log $ID\"; sleep 0.2; printf '%s' \"$ID\" > \"$BATON_OUTPUT\"");
      task.env = {{"ID", std::to_string(i)}};
      RunRequest request;
      request.task_id = "concurrent-" + std::to_string(i);
      request.job_id = "conformance-job";
      request.task = std::move(task);
      Result<RunOutcome> outcome =
          runtime_->Run(request, observers[static_cast<std::size_t>(i)], {});
      if (outcome.ok()) outcomes[static_cast<std::size_t>(i)] = *outcome;
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < kRuns; ++i) {
    const auto index = static_cast<std::size_t>(i);
    EXPECT_EQ(outcomes[index].state, State::kCompleted) << outcomes[index].error;
    EXPECT_EQ(outcomes[index].result, std::to_string(i));
    EXPECT_EQ(observers[index].logs(), "log " + std::to_string(i) + "\n");
  }
}

}  // namespace baton::conformance

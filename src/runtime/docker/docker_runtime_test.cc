// The Docker runtime against a real engine: Podman's Docker-compatible service, which
// scripts/test-services/podman.sh starts and names in BATON_TEST_DOCKER_HOST. Without it
// every test here skips, saying so. Every test checks that no container (or volume) with
// the test label is left behind.
#include "runtime/docker/docker_runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "conformance/runtime_conformance.h"
#include "runtime/docker/docker_client.h"

namespace baton {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using State = RunOutcome::State;
using Clock = std::chrono::steady_clock;

constexpr const char* kBusybox = "localhost/busybox:latest";
constexpr const char* kDebian = "localhost/debian:bookworm";
constexpr const char* kTestLabel = "baton.test";

// CTest runs each test as its own process, several at once: each process labels its
// containers with its own pid and looks only for those.
std::string TestLabelValue() { return std::to_string(getpid()); }

std::string DockerHost() {
  const char* host = std::getenv("BATON_TEST_DOCKER_HOST");
  return host != nullptr ? host : "";
}

// Why these tests cannot run here; empty when they can.
std::string SkipReason() {
  static const std::string reason = [] {
    std::string host = DockerHost();
    if (host.empty()) {
      return std::string(
          "BATON_TEST_DOCKER_HOST is not set: no container engine "
          "(run under scripts/test-services/with-services.sh)");
    }
    DockerClient client(host);
    Status ping = client.Ping();
    if (!ping.ok()) return "the container engine does not answer: " + ping.ToString();
    Result<HttpResponse> image = client.Call("GET", std::string("/images/") + kBusybox + "/json");
    if (!image.ok() || image->status != 200) {
      return std::string("the test image ") + kBusybox +
             " is missing (scripts/build-test-images.sh builds it)";
    }
    return std::string();
  }();
  return reason;
}

DockerRuntimeOptions TestOptions() {
  DockerRuntimeOptions options;
  options.host = DockerHost();
  options.default_image = kBusybox;
  options.labels = {{kTestLabel, TestLabelValue()}};
  return options;
}

std::string LabelFilter() {
  return UrlEncode(json{{"label", {std::string(kTestLabel) + "=" + TestLabelValue()}}}.dump());
}

// Containers and volumes carrying the test label.
std::vector<std::string> Leftovers() {
  DockerClient client(DockerHost());
  std::vector<std::string> found;
  Result<HttpResponse> containers =
      client.Call("GET", "/containers/json?all=1&filters=" + LabelFilter());
  EXPECT_TRUE(containers.ok() && containers->status == 200);
  if (containers.ok()) {
    for (const json& c : json::parse(containers->body, nullptr, false)) {
      found.push_back("container " + c.value("Id", "?") + " " + c["Names"].dump());
    }
  }
  Result<HttpResponse> volumes = client.Call("GET", "/volumes?filters=" + LabelFilter());
  if (volumes.ok() && volumes->status == 200) {
    json parsed = json::parse(volumes->body, nullptr, false);
    if (parsed.is_object() && parsed["Volumes"].is_array()) {
      for (const json& v : parsed["Volumes"]) found.push_back("volume " + v.value("Name", "?"));
    }
  }
  return found;
}

void ExpectNothingLeftBehind() {
  EXPECT_THAT(Leftovers(), ::testing::IsEmpty()) << "containers or volumes left behind";
}

// ---- The runtime contract ----

using conformance::RuntimeConformanceTest;
INSTANTIATE_TEST_SUITE_P(Docker, RuntimeConformanceTest,
                         ::testing::Values(conformance::RuntimeFactory{
                             "docker",
                             [] { return std::make_unique<DockerRuntime>(TestOptions()); },
                             SkipReason, ExpectNothingLeftBehind}),
                         conformance::RuntimeFactoryName);

// ---- What only containers do ----

class DockerRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason = SkipReason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    runtime_ = std::make_unique<DockerRuntime>(TestOptions());
  }

  void TearDown() override {
    if (!IsSkipped()) ExpectNothingLeftBehind();
  }

  static Task Script(std::string run) {
    Task task;
    task.name = "docker";
    task.image = kBusybox;
    task.run = std::move(run);
    return task;
  }

  RunOutcome RunTask(const Task& task, std::stop_token cancel = {},
                     DockerRuntime* runtime = nullptr) {
    RunRequest request;
    request.task_id = "docker-test-" + std::to_string(next_++);
    request.job_id = "docker-job";
    request.task = task;
    Result<RunOutcome> outcome =
        (runtime != nullptr ? runtime : runtime_.get())->Run(request, observer_, std::move(cancel));
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    if (!outcome.ok()) {
      RunOutcome failed;
      failed.state = State::kFailed;
      failed.error = "runtime error: " + outcome.status().ToString();
      return failed;
    }
    return *outcome;
  }

  std::unique_ptr<DockerRuntime> runtime_;
  conformance::RecordingObserver observer_;
  int next_ = 1;
};

TEST_F(DockerRuntimeTest, ResultAndLogsComeFromTheContainer) {
  RunOutcome outcome =
      RunTask(Script("echo to-stdout; echo to-stderr >&2; cat /etc/hostname >/dev/null; "
                     "printf '%s' \"$(pwd)\" > \"$BATON_OUTPUT\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "/baton");
  EXPECT_EQ(observer_.logs(), "to-stdout\nto-stderr\n");
}

TEST_F(DockerRuntimeTest, TorkPathsAreMountedToo) {
  RunOutcome outcome = RunTask(Script("printf tork > /tork/.baton-output"));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "tork");
}

TEST_F(DockerRuntimeTest, EnvReachesTheContainerWithTheImagePath) {
  Task task = Script("printf '%s|%s' \"$GREETING\" \"$PATH\" > \"$BATON_OUTPUT\"");
  task.env = {{"GREETING", "hello container"}};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "hello container|/bin");
}

TEST_F(DockerRuntimeTest, CmdOverridesTheImageCommand) {
  Task task;
  task.name = "cmd";
  task.image = kBusybox;
  task.cmd = {"echo", "from cmd"};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(observer_.logs(), "from cmd\n");
}

TEST_F(DockerRuntimeTest, EntrypointAndCmdRunAsInDocker) {
  Task task;
  task.name = "entrypoint";
  task.image = kBusybox;
  task.entrypoint = {"/bin/sh", "-c"};
  task.cmd = {"echo \"entry $0\"; printf ok > \"$BATON_OUTPUT\"", "zero"};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(observer_.logs(), "entry zero\n");
  EXPECT_EQ(outcome.result, "ok");
}

TEST_F(DockerRuntimeTest, RunWithAnEntrypointRunsTheScriptThroughIt) {
  Task task = Script("echo \"$0\"");
  task.entrypoint = {"/bin/sh", "-c"};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_THAT(observer_.logs(), HasSubstr("/baton/.baton-main.sh"));
}

TEST_F(DockerRuntimeTest, WorkdirIsTheWorkingDirectoryAndHoldsTheFiles) {
  Task task = Script("pwd; cat data.txt; printf done > \"$BATON_OUTPUT\"");
  task.workdir = "/work/dir";
  task.files = {{"data.txt", "payload"}};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(observer_.logs(), "/work/dir\npayload");
  EXPECT_EQ(outcome.result, "done");
}

TEST_F(DockerRuntimeTest, AVolumeIsSharedByPreMainAndPost) {
  Task task = Script("cat /data/log > \"$BATON_OUTPUT\"; echo main >> /data/log");
  task.mounts = {Mount{MountType::kVolume, "", "/data", {}}};
  AuxTask pre;
  pre.name = "fill";
  pre.run = "echo pre > /data/log";
  AuxTask post;
  post.name = "check";
  post.run = "grep -q main /data/log && echo post-saw-main";
  task.pre = {pre};
  task.post = {post};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "pre\n");
  EXPECT_THAT(observer_.logs(), HasSubstr("post-saw-main"));
}

TEST_F(DockerRuntimeTest, EachTaskGetsItsOwnVolume) {
  Task first = Script("echo x > /data/marker");
  first.mounts = {Mount{MountType::kVolume, "", "/data", {}}};
  EXPECT_EQ(RunTask(first).state, State::kCompleted);
  Task second = Script("test ! -e /data/marker");
  second.mounts = first.mounts;
  RunOutcome outcome = RunTask(second);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
}

TEST_F(DockerRuntimeTest, AnAllowedBindMountReachesTheHostDirectory) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("baton-bind-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir + "/inside");
  std::ofstream(dir + "/inside/in.txt") << "from the host";
  DockerRuntimeOptions options = TestOptions();
  options.allow_binds = true;
  options.bind_sources = {dir};
  DockerRuntime runtime(options);

  Task task = Script("cat /host/in.txt > \"$BATON_OUTPUT\"; echo back > /host/out.txt");
  task.mounts = {Mount{MountType::kBind, dir + "/inside", "/host", {}}};
  RunOutcome outcome = RunTask(task, {}, &runtime);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "from the host");
  std::ifstream back(dir + "/inside/out.txt");
  std::string line;
  std::getline(back, line);
  EXPECT_EQ(line, "back");

  Task read_only = Script("echo no > /host/out.txt");
  read_only.mounts = {Mount{MountType::kBind, dir + "/inside", "/host", {{"readonly", "true"}}}};
  EXPECT_EQ(RunTask(read_only, {}, &runtime).state, State::kFailed);
  std::filesystem::remove_all(dir);
}

TEST_F(DockerRuntimeTest, BindMountsAreRefusedWhereNotAllowed) {
  Task task = Script("echo should-not-run");
  task.mounts = {Mount{MountType::kBind, "/etc", "/host-etc", {}}};
  RunOutcome refused = RunTask(task);
  EXPECT_EQ(refused.state, State::kFailed);
  EXPECT_THAT(refused.error, AllOf(HasSubstr("/etc"), HasSubstr("refused")));

  DockerRuntimeOptions options = TestOptions();
  options.allow_binds = true;
  options.bind_sources = {"/srv/baton-allowed"};
  DockerRuntime runtime(options);
  RunOutcome outside = RunTask(task, {}, &runtime);
  EXPECT_EQ(outside.state, State::kFailed);
  EXPECT_THAT(outside.error, AllOf(HasSubstr("/etc"), HasSubstr("not under an allowed source")));
  EXPECT_THAT(observer_.logs(), Not(HasSubstr("should-not-run")));
}

TEST_F(DockerRuntimeTest, TmpfsMountIsATmpfs) {
  Task task = Script("grep ' /scratch ' /proc/mounts > \"$BATON_OUTPUT\"; echo x > /scratch/f");
  task.mounts = {Mount{MountType::kTmpfs, "", "/scratch", {{"size", "8m"}}}};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_THAT(outcome.result, AllOf(HasSubstr("tmpfs /scratch tmpfs"), HasSubstr("size=8192k")));
}

TEST_F(DockerRuntimeTest, MemoryLimitKillsAnAllocatingTaskWithTheRightError) {
  // awk doubles a string until the limit stops it.
  Task task = Script("echo allocating; awk 'BEGIN { s = \"x\"; while (1) s = s s }'");
  task.limits = Limits{std::nullopt, 32 * 1024 * 1024};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_EQ(outcome.exit_code, 137);
  EXPECT_EQ(outcome.reason, FailReason::kOutOfMemory);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("out of memory"), HasSubstr("memory limit of 32m"),
                                   HasSubstr("allocating")));
}

TEST_F(DockerRuntimeTest, WithinTheMemoryLimitATaskRuns) {
  Task task = Script("printf ok > \"$BATON_OUTPUT\"");
  task.limits = Limits{std::nullopt, 32 * 1024 * 1024};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
}

TEST_F(DockerRuntimeTest, CpuLimitThrottlesTheContainer) {
  // A busy loop for about a second of CPU; with 0.2 CPUs the kernel throttles it, which
  // the container's own cpu.stat counts (cgroup v1: cpu,cpuacct; v2: the root).
  Task task = Script(
      "end=$(( $(date +%s) + 2 )); while [ $(date +%s) -lt $end ]; do :; done; "
      "for f in /sys/fs/cgroup/cpu,cpuacct/cpu.stat /sys/fs/cgroup/cpu/cpu.stat "
      "/sys/fs/cgroup/cpu.stat; do [ -r $f ] && { cat $f > \"$BATON_OUTPUT\"; break; }; done");
  task.limits = Limits{0.2, std::nullopt};
  RunOutcome outcome = RunTask(task);
  ASSERT_EQ(outcome.state, State::kCompleted) << outcome.error;
  std::istringstream stat(outcome.result);
  std::string key;
  long long value = 0;
  long long throttled = -1;
  while (stat >> key >> value) {
    if (key == "nr_throttled") throttled = value;
  }
  EXPECT_GT(throttled, 5) << outcome.result;
}

TEST_F(DockerRuntimeTest, NoNetworkUnlessTheJobNamesOne) {
  RunOutcome outcome = RunTask(Script("ls /sys/class/net | tr '\\n' ' ' > \"$BATON_OUTPUT\""));
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "lo ");

  Task bridged = Script("ls /sys/class/net | tr '\\n' ' ' > \"$BATON_OUTPUT\"");
  bridged.networks = {"bridge"};
  RunOutcome with_network = RunTask(bridged);
  EXPECT_EQ(with_network.state, State::kCompleted) << with_network.error;
  EXPECT_THAT(with_network.result, HasSubstr("eth0"));
}

TEST_F(DockerRuntimeTest, TimeoutKillsAndRemovesTheContainer) {
  Task task = Script("echo waiting; sleep 60");
  task.timeout = std::chrono::seconds(1);
  auto start = Clock::now();
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("timed out after 1s"), HasSubstr("waiting")));
  EXPECT_EQ(outcome.reason, FailReason::kTimeout);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(8));
  EXPECT_THAT(Leftovers(), ::testing::IsEmpty());
}

TEST_F(DockerRuntimeTest, CancelKillsAndRemovesTheContainer) {
  std::stop_source source;
  std::thread canceller([&] {
    testing::WaitFor([&] { return observer_.logs().find("running") != std::string::npos; },
                     std::chrono::seconds(20));
    source.request_stop();
  });
  auto start = Clock::now();
  RunOutcome outcome = RunTask(Script("echo running; sleep 60"), source.get_token());
  canceller.join();
  EXPECT_EQ(outcome.state, State::kCancelled) << outcome.error;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
  EXPECT_THAT(Leftovers(), ::testing::IsEmpty());
}

AuxTask WebSidecar() {
  AuxTask web;
  web.name = "web";
  web.run =
      "mkdir -p /www && echo ready-from-sidecar > /www/index.html && exec httpd -f -p 8080 -h /www";
  web.probe = Probe{"/index.html", 8080, std::chrono::seconds(20)};
  return web;
}

TEST_F(DockerRuntimeTest, SidecarIsReadyBeforeTheTaskAndServesIt) {
  Task task = Script("wget -q -O \"$BATON_OUTPUT\" http://127.0.0.1:8080/");
  task.sidecars = {WebSidecar()};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "ready-from-sidecar\n");
}

TEST_F(DockerRuntimeTest, SidecarThatExitsBeforeItIsReadyFailsTheTask) {
  Task task = Script("echo main-ran");
  AuxTask broken = WebSidecar();
  broken.run = "echo cannot serve; exit 3";
  task.sidecars = {broken};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, AllOf(HasSubstr("sidecar \"web\""), HasSubstr("exit code 3"),
                                   HasSubstr("cannot serve")));
  EXPECT_THAT(observer_.logs(), Not(HasSubstr("main-ran")));
}

TEST_F(DockerRuntimeTest, SidecarNeverReadyFailsAfterItsProbeTimeout) {
  Task task = Script("echo main-ran");
  AuxTask silent = WebSidecar();
  silent.run = "sleep 60";
  silent.probe->timeout = std::chrono::seconds(1);
  task.sidecars = {silent};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error,
              AllOf(HasSubstr("not ready within 1s"), HasSubstr(":8080/index.html")));
}

TEST_F(DockerRuntimeTest, MissingImageIsAClearError) {
  Task task = Script("echo never");
  task.image = "localhost/baton-no-such-image:latest";
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error,
              AllOf(HasSubstr("cannot pull image \"localhost/baton-no-such-image:latest\""),
                    Not(HasSubstr("exit code"))));
}

TEST_F(DockerRuntimeTest, RegistryPasswordsNeverAppearInErrors) {
  Task task = Script("echo never");
  task.image = "127.0.0.1:1/private/app:1";
  task.registry = Registry{"someone", "hunter2-secret"};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error,
              AllOf(HasSubstr("127.0.0.1:1/private/app:1"), Not(HasSubstr("hunter2-secret"))));
}

TEST_F(DockerRuntimeTest, InvalidImageNamesAreRefusedBeforeAnyRequest) {
  Task task = Script("true");
  task.image = "busybox/../../containers/json?";
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kFailed);
  EXPECT_THAT(outcome.error, HasSubstr("invalid image name"));
}

TEST_F(DockerRuntimeTest, PreAndPostMayUseTheirOwnImage) {
  DockerClient client(DockerHost());
  Result<HttpResponse> debian = client.Call("GET", std::string("/images/") + kDebian + "/json");
  if (!debian.ok() || debian->status != 200) {
    GTEST_SKIP() << kDebian << " is not built (scripts/build-test-images.sh debian)";
  }
  Task task = Script("cat from-pre.txt > \"$BATON_OUTPUT\"");
  AuxTask pre;
  pre.name = "debian";
  pre.image = kDebian;
  pre.run =
      "bash -c 'echo \"bash ${BASH_VERSINFO[0]}\"' > from-pre.txt; . /etc/os-release; echo $ID >> "
      "from-pre.txt";
  task.pre = {pre};
  RunOutcome outcome = RunTask(task);
  EXPECT_EQ(outcome.state, State::kCompleted) << outcome.error;
  EXPECT_EQ(outcome.result, "bash 5\ndebian\n");
}

TEST_F(DockerRuntimeTest, HealthFailsClearlyWithoutAnEngine) {
  DockerRuntimeOptions options = TestOptions();
  options.host = "unix:///nonexistent/docker.sock";
  DockerRuntime runtime(options);
  Status health = runtime.Health();
  EXPECT_FALSE(health.ok());
  EXPECT_THAT(health.message(), HasSubstr("/nonexistent/docker.sock"));
}

}  // namespace
}  // namespace baton

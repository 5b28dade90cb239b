#include "runtime/docker/docker_runtime.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "base/log.h"
#include "core/duration.h"
#include "runtime/common/incarnation.h"
#include "runtime/common/task_files.h"
#include "runtime/docker/docker_client.h"
#include "runtime/docker/docker_spec.h"

namespace baton {
namespace {

using runtime::BadEnvName;
using runtime::BadFileName;
using runtime::ErrnoText;
using runtime::FailedOutcome;
using runtime::kReservedPrefix;
using runtime::LastLines;
using runtime::NamePart;
using runtime::ReadProgressFile;
using runtime::ReadResultFile;
using runtime::StepError;
using runtime::ValidEnvName;
using runtime::ValidFileName;
using runtime::WriteWholeFile;

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Every container and volume carries the id of the runtime instance that made it, so
// that a restarted worker finds those of its dead predecessors (KillLeftovers).
constexpr std::string_view kRuntimeLabel = "baton.runtime";

// Output kept for quoting the last lines of a failed step.
constexpr std::size_t kTailBytes = 8 * 1024;
constexpr std::string_view kMountDir = "/baton";
constexpr std::string_view kTorkMountDir = "/tork";
// How often a sidecar's probe is retried.
constexpr auto kProbeInterval = std::chrono::milliseconds(200);
// How often a followed container is looked at, and how long after it exited its log
// stream may still take to end.
constexpr auto kExitCheckInterval = std::chrono::seconds(1);
constexpr auto kExitGrace = std::chrono::seconds(3);
// Removing a container is never skipped, but it may not hang a worker forever.
constexpr auto kCleanupTimeout = std::chrono::seconds(30);

// Image references as Docker takes them; anything else could change the request path.
bool ValidImage(std::string_view image) {
  if (image.empty() || image.size() > 512 || image.front() == '-' || image.front() == '/') {
    return false;
  }
  return std::all_of(image.begin(), image.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || c == '/' || c == ':' || c == '@';
  });
}

std::string RandomSuffix() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  std::uint64_t n = rng();
  for (int i = 0; i < 8; ++i) out.push_back(kHex[(n >> (4 * i)) & 15]);
  return out;
}

// "image" → ("image", "latest"); "repo:tag" and "repo@digest" keep theirs.
std::pair<std::string, std::string> SplitTag(const std::string& image) {
  std::size_t slash = image.rfind('/');
  std::size_t last = slash == std::string::npos ? 0 : slash + 1;
  if (image.find('@', last) != std::string::npos) return {image, ""};
  std::size_t colon = image.find(':', last);
  if (colon != std::string::npos) return {image.substr(0, colon), image.substr(colon + 1)};
  return {image, "latest"};
}

std::string DefaultDockerConfig() {
  if (const char* dir = std::getenv("DOCKER_CONFIG"); dir != nullptr && *dir != '\0') {
    return std::string(dir) + "/config.json";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.docker/config.json";
  }
  return "";
}

}  // namespace

// ---- One task ----

class DockerRuntime::TaskRun {
 public:
  TaskRun(DockerRuntime& rt, const RunRequest& request, RunObserver& observer,
          std::stop_token cancel)
      : rt_(rt),
        client_(*rt.client_),
        request_(request),
        task_(request.task),
        observer_(observer),
        cancel_(std::move(cancel)) {}

  TaskRun(const TaskRun&) = delete;
  TaskRun& operator=(const TaskRun&) = delete;
  ~TaskRun() { Cleanup(); }

  Result<RunOutcome> Execute();

 private:
  struct Step {
    std::string_view kind;  // "pre", "main", "post", "sidecar"
    std::string label;      // `pre "prepare"`, for errors; empty for main
    std::string script;     // the run script's file name in the task directory
    std::size_t index = 0;
    const AuxTask* aux = nullptr;  // null for main
    std::optional<Duration> timeout;
  };

  enum class End { kExited, kStepTimedOut, kTaskTimedOut, kCancelled, kNotStarted };
  struct StepEnd {
    End end = End::kExited;
    int code = 0;
    bool out_of_memory = false;
    std::string failure;  // kNotStarted: why
  };

  Status Prepare();
  Result<std::string> CreateVolumes();
  // Returns a failure text for the task, or nothing when the image is there.
  Result<std::optional<std::string>> EnsureImage(const std::string& image,
                                                 const std::optional<Registry>& registry,
                                                 Clock::time_point deadline);
  docker::ContainerSpec SpecFor(const Step& step, const std::string& image);
  // Creates and starts a container; returns its id, or a failure text in `failure`.
  Result<std::string> StartContainer(const Step& step, std::string& failure,
                                     Clock::time_point deadline);
  Result<StepEnd> RunStep(const Step& step);
  Result<std::optional<RunOutcome>> StartSidecars();
  Result<std::optional<RunOutcome>> Probe(const Step& step, const std::string& id);
  // Whether the step may go on; otherwise sets stop_ (cancel or timeout).
  bool KeepGoing(Clock::time_point step_deadline, bool step_deadline_is_task);
  void OnOutput(std::string_view chunk);
  void CheckProgress();
  // `running`: SIGKILL first (a forced remove may otherwise wait out a stop timeout).
  void KillAndRemove(const std::string& id, bool running = true);
  void Cleanup();
  Result<RunOutcome> ReadResult();
  std::string ContainerLogs(const std::string& id);
  std::string Describe(const Step& step, const StepEnd& end) const;
  RunOutcome Fail(std::string error, std::optional<int> exit_code = std::nullopt,
                  FailReason reason = FailReason::kNone) const;
  // Why a step that did not exit 0 failed (retry.on).
  static FailReason ReasonOf(const StepEnd& end);
  RunOutcome CancelledOutcome() const;
  // Sleeps for `d` unless cancelled first; false when cancelled.
  bool SleepFor(std::chrono::milliseconds d);

  DockerRuntime& rt_;
  const DockerClient& client_;
  const RunRequest& request_;
  const Task& task_;
  RunObserver& observer_;
  std::stop_token cancel_;

  std::string dir_;
  std::string output_path_;
  std::string progress_path_;
  std::string image_;  // the main step's image
  std::vector<docker::MountSpec> mounts_;
  // Names of the `files` written so far (the task's, then each step's before it starts):
  // with a workdir, each is mounted there in this and every later container, as the shell
  // runtime's steps find them in the directory they share.
  std::set<std::string> files_;
  std::optional<docker::GpuRequest> gpus_;
  std::vector<std::string> volumes_;     // per-task volumes to remove
  std::vector<std::string> containers_;  // every container created, to remove
  std::set<std::string> images_ready_;
  std::string network_owner_;  // the first sidecar, whose network the others join
  Clock::time_point deadline_ = Clock::time_point::max();
  std::optional<End> stop_;
  Clock::time_point next_progress_;
  std::string tail_;
  std::optional<double> last_progress_;
  docker::LogDemuxer demux_;
};

bool DockerRuntime::TaskRun::SleepFor(std::chrono::milliseconds d) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  return !cv.wait_for(lock, cancel_, d, [] { return false; }) && !cancel_.stop_requested();
}

Status DockerRuntime::TaskRun::Prepare() {
  const std::string& base = rt_.options_.base_dir;
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  std::string tmpl = base + "/" + NamePart(request_.task_id, 40) + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    return Internal("cannot create a directory in " + base + ": " + ErrnoText(errno));
  }
  dir_ = std::move(tmpl);
  // Containers may run as any user: they must be able to write their output here.
  chmod(dir_.c_str(), 0777);
  output_path_ = dir_ + "/" + std::string(kReservedPrefix) + "output";
  progress_path_ = dir_ + "/" + std::string(kReservedPrefix) + "progress";
  for (const auto& [name, contents] : task_.files) {
    BATON_RETURN_IF_ERROR(WriteWholeFile(dir_ + "/" + name, contents, 0755));
    files_.insert(name);
  }
  return Status::Ok();
}

Result<std::string> DockerRuntime::TaskRun::CreateVolumes() {
  for (const docker::MountSpec& mount : mounts_) {
    if (mount.type != "volume") continue;
    if (std::find(volumes_.begin(), volumes_.end(), mount.source) == volumes_.end() &&
        mount.source.starts_with("baton-")) {
      json labels = rt_.options_.labels;
      if (rt_.incarnation_) labels[std::string(kRuntimeLabel)] = rt_.incarnation_->id();
      labels["baton.task"] = request_.task_id;
      labels["baton.job"] = request_.job_id;
      json body{{"Name", mount.source}, {"Labels", labels}};
      Result<HttpResponse> created =
          client_.Call("POST", "/volumes/create", body.dump(), rt_.options_.api_timeout);
      if (!created.ok()) return created.status();
      if (created->status >= 300) {
        return std::string("cannot create volume for " + mount.target + ": " +
                           ApiErrorMessage(*created));
      }
      volumes_.push_back(mount.source);
    }
  }
  return std::string();
}

Result<std::optional<std::string>> DockerRuntime::TaskRun::EnsureImage(
    const std::string& image, const std::optional<Registry>& registry, Clock::time_point deadline) {
  if (images_ready_.count(image) != 0) return std::optional<std::string>();
  Result<HttpResponse> inspect =
      client_.Call("GET", "/images/" + image + "/json", "", rt_.options_.api_timeout);
  if (!inspect.ok()) return inspect.status();
  if (inspect->status == 200) {
    images_ready_.insert(image);
    return std::optional<std::string>();
  }

  // Pull it, with the task's credentials or the Docker config file's.
  std::string server = docker::RegistryServer(image);
  std::optional<Registry> credentials = registry;
  if (!credentials) {
    std::string path =
        rt_.options_.docker_config.empty() ? DefaultDockerConfig() : rt_.options_.docker_config;
    if (!path.empty()) {
      std::ifstream in(path);
      if (in) {
        std::stringstream text;
        text << in.rdbuf();
        credentials = docker::CredentialsFromDockerConfig(text.str(), server);
      }
    }
  }
  std::vector<std::string> headers;
  if (credentials) headers.push_back(docker::RegistryAuthHeader(*credentials, server));
  auto [name, tag] = SplitTag(image);
  std::string path = "/images/create?fromImage=" + UrlEncode(name);
  if (!tag.empty()) path += "&tag=" + UrlEncode(tag);

  std::string last_error;
  std::string pending;
  std::string raw;
  auto on_data = [&](std::string_view chunk) {
    if (raw.size() < 4096) raw.append(chunk.substr(0, 4096 - raw.size()));
    pending.append(chunk);
    std::size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      json line = json::parse(pending.substr(0, nl), nullptr, false);
      pending.erase(0, nl + 1);
      if (line.is_object() && line.contains("error")) {
        last_error =
            line["error"].is_string() ? line["error"].get<std::string>() : line["error"].dump();
      }
    }
  };
  Clock::time_point pull_deadline = std::min(deadline, Clock::now() + rt_.options_.pull_timeout);
  log::Info("Pulling an image.", {{"task_id", request_.task_id}, {"image", image}});
  Result<long> status = client_.Stream(
      "POST", path, "", on_data, [&] { return KeepGoing(pull_deadline, false); },
      Clock::time_point::max(), headers);
  std::string secret = credentials ? credentials->password : "";
  if (!status.ok()) {
    if (status.status().code() == StatusCode::kCancelled) {
      if (stop_ == End::kStepTimedOut && pull_deadline < deadline) {
        stop_.reset();
        return std::optional<std::string>(
            "cannot pull image \"" + image + "\": no answer within " +
            FormatDuration(std::chrono::duration_cast<Duration>(rt_.options_.pull_timeout)));
      }
      return std::optional<std::string>();  // stop_ says why
    }
    return Status(status.status().code(), docker::Redact(status.status().message(), secret));
  }
  if (!pending.empty()) on_data("\n");
  if (*status >= 300 && last_error.empty()) {
    last_error = ApiErrorMessage(HttpResponse{*status, raw});
  }
  if (!last_error.empty()) {
    return std::optional<std::string>("cannot pull image \"" + image +
                                      "\": " + docker::Redact(last_error, secret));
  }
  images_ready_.insert(image);
  return std::optional<std::string>();
}

docker::ContainerSpec DockerRuntime::TaskRun::SpecFor(const Step& step, const std::string& image) {
  docker::ContainerSpec spec;
  spec.image = image;
  const std::string& run = step.aux != nullptr ? step.aux->run : task_.run;
  const std::vector<std::string>& cmd = step.aux != nullptr ? step.aux->cmd : task_.cmd;
  const std::vector<std::string>& entrypoint =
      step.aux != nullptr ? step.aux->entrypoint : task_.entrypoint;
  if (!run.empty()) {
    // As Tork: the script is a file run by `sh -c`, unless the entrypoint says otherwise.
    // With the default `sh -c`, stderr joins stdout: the engine reads the two through
    // separate pipes and would interleave them out of order.
    std::string script = std::string(kMountDir) + "/" + step.script;
    if (entrypoint.empty()) {
      spec.entrypoint = std::vector<std::string>{"sh", "-c"};
      spec.cmd = std::vector<std::string>{script + " 2>&1"};
    } else {
      spec.entrypoint = entrypoint;
      spec.cmd = std::vector<std::string>{script};
    }
  } else {
    if (!entrypoint.empty()) spec.entrypoint = entrypoint;
    if (!cmd.empty()) spec.cmd = cmd;
  }
  std::map<std::string, std::string> env(task_.env.begin(), task_.env.end());
  if (step.aux != nullptr) {
    for (const auto& [name, value] : step.aux->env) env[name] = value;
  }
  std::string output = std::string(kMountDir) + "/" + std::string(kReservedPrefix) + "output";
  std::string progress = std::string(kMountDir) + "/" + std::string(kReservedPrefix) + "progress";
  env["BATON_OUTPUT"] = output;
  env["BATON_PROGRESS"] = progress;
  env["TORK_OUTPUT"] = output;
  env["TORK_PROGRESS"] = progress;
  for (const auto& [name, value] : env) spec.env.push_back(name + "=" + value);

  spec.binds.push_back(dir_ + ":" + std::string(kMountDir));
  spec.binds.push_back(dir_ + ":" + std::string(kTorkMountDir));
  if (task_.workdir.empty()) {
    spec.workdir = std::string(kMountDir);
  } else {
    spec.workdir = task_.workdir;
    std::string target = task_.workdir;
    while (target.size() > 1 && target.back() == '/') target.pop_back();
    for (const std::string& name : files_) {
      spec.binds.push_back(dir_ + "/" + name + ":" + target + "/" + name);
    }
  }
  spec.mounts = mounts_;
  spec.labels = rt_.options_.labels;
  if (rt_.incarnation_) spec.labels[std::string(kRuntimeLabel)] = rt_.incarnation_->id();
  spec.labels["baton.task"] = request_.task_id;
  spec.labels["baton.job"] = request_.job_id;
  spec.labels["baton.step"] = std::string(step.kind);

  if (!network_owner_.empty()) {
    spec.network_mode = "container:" + network_owner_;
  } else if (!task_.networks.empty()) {
    spec.network_mode = task_.networks.front();
    spec.networks = task_.networks;
  }
  if (task_.limits) {
    spec.memory = task_.limits->memory;
    spec.cpus = task_.limits->cpus;
  }
  spec.gpus = gpus_;
  return spec;
}

Result<std::string> DockerRuntime::TaskRun::StartContainer(const Step& step, std::string& failure,
                                                           Clock::time_point deadline) {
  const std::string& image =
      step.aux != nullptr && !step.aux->image.empty() ? step.aux->image : image_;
  const std::optional<Registry>& registry =
      step.aux != nullptr && step.aux->registry ? step.aux->registry : task_.registry;
  Result<std::optional<std::string>> ready = EnsureImage(image, registry, deadline);
  if (!ready.ok()) return ready.status();
  if (*ready) {
    failure = **ready;
    return std::string();
  }
  if (stop_) return std::string();

  const AuxTask* aux = step.aux;
  const std::string& run = aux != nullptr ? aux->run : task_.run;
  if (!run.empty()) {
    BATON_RETURN_IF_ERROR(WriteWholeFile(dir_ + "/" + step.script, run, 0755));
  }
  if (aux != nullptr) {
    for (const auto& [name, contents] : aux->files) {
      BATON_RETURN_IF_ERROR(WriteWholeFile(dir_ + "/" + name, contents, 0755));
      files_.insert(name);
    }
  }
  std::string name = "baton-" + NamePart(request_.task_id, 40) + "-" + std::string(step.kind) +
                     std::to_string(step.index + 1) + "-" + RandomSuffix();
  std::string body = docker::CreateBody(SpecFor(step, image));
  Result<HttpResponse> created =
      client_.Call("POST", "/containers/create?name=" + name, body, rt_.options_.api_timeout);
  if (!created.ok()) return created.status();
  if (created->status != 201 && created->status != 200) {
    failure = "cannot create the container (image \"" + image + "\"): " + ApiErrorMessage(*created);
    return std::string();
  }
  json parsed = json::parse(created->body, nullptr, false);
  if (!parsed.is_object() || !parsed.contains("Id") || !parsed["Id"].is_string()) {
    // It may exist all the same: remove it by name.
    containers_.push_back(name);
    return Internal("container create answered without an Id: " + created->body.substr(0, 200));
  }
  std::string id = parsed["Id"].get<std::string>();
  containers_.push_back(id);
  Result<HttpResponse> started =
      client_.Call("POST", "/containers/" + id + "/start", "", rt_.options_.api_timeout);
  if (!started.ok()) return started.status();
  if (started->status != 204 && started->status != 304) {
    failure = "cannot start the container: " + ApiErrorMessage(*started);
    return std::string();
  }
  return id;
}

bool DockerRuntime::TaskRun::KeepGoing(Clock::time_point step_deadline,
                                       bool step_deadline_is_task) {
  if (cancel_.stop_requested()) {
    stop_ = End::kCancelled;
    return false;
  }
  Clock::time_point now = Clock::now();
  if (now >= deadline_) {
    stop_ = End::kTaskTimedOut;
    return false;
  }
  if (now >= step_deadline) {
    stop_ = step_deadline_is_task ? End::kTaskTimedOut : End::kStepTimedOut;
    return false;
  }
  if (now >= next_progress_) {
    CheckProgress();
    next_progress_ = now + rt_.options_.progress_interval;
  }
  return true;
}

void DockerRuntime::TaskRun::OnOutput(std::string_view chunk) {
  tail_.append(chunk);
  if (tail_.size() > 2 * kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
  observer_.OnLog(chunk);
}

Result<DockerRuntime::TaskRun::StepEnd> DockerRuntime::TaskRun::RunStep(const Step& step) {
  StepEnd end;
  auto now = Clock::now();
  if (cancel_.stop_requested()) {
    end.end = End::kCancelled;
    return end;
  }
  if (now >= deadline_) {
    end.end = End::kTaskTimedOut;
    return end;
  }
  Clock::time_point step_deadline = deadline_;
  bool step_deadline_is_task = true;
  if (step.timeout && step.timeout->count() > 0 && now + *step.timeout < deadline_) {
    step_deadline = now + *step.timeout;
    step_deadline_is_task = false;
  }
  tail_.clear();
  stop_.reset();
  demux_ = docker::LogDemuxer();

  std::string failure;
  Result<std::string> id = StartContainer(step, failure, step_deadline);
  if (!id.ok()) return id.status();
  if (stop_) {
    end.end = *stop_;
    return end;
  }
  if (!failure.empty()) {
    end.end = End::kNotStarted;
    end.failure = std::move(failure);
    return end;
  }

  auto keep_going = [&] { return KeepGoing(step_deadline, step_deadline_is_task); };
  next_progress_ = Clock::now() + rt_.options_.progress_interval;
  std::function<void(std::string_view)> on_log = [this](std::string_view data) {
    demux_.Feed(data, [this](std::string_view chunk) { OnOutput(chunk); });
  };
  // Podman does not always end a followed log stream (or a wait) when the container
  // exits: look at the container now and then, and stop waiting for the stream once the
  // container has been gone for a while.
  Clock::time_point next_look = Clock::now() + kExitCheckInterval;
  std::optional<Clock::time_point> exited_at;
  std::optional<int> exit_code_seen;
  auto watching = [&] {
    if (!keep_going()) return false;
    Clock::time_point now = Clock::now();
    if (exited_at) return now - *exited_at < kExitGrace;
    if (now < next_look) return true;
    next_look = now + kExitCheckInterval;
    auto inspect =
        client_.Call("GET", "/containers/" + *id + "/json", "", rt_.options_.api_timeout);
    if (!inspect.ok() || inspect->status != 200) return true;
    json state = json::parse(inspect->body, nullptr, false);
    if (!state.is_object() || !state.contains("State") || !state["State"].is_object()) return true;
    const json& st = state["State"];
    if (st.value("Running", true) || st.value("Status", "") == "created") return true;
    exited_at = now;
    if (st.contains("ExitCode") && st["ExitCode"].is_number_integer()) {
      exit_code_seen = st["ExitCode"].get<int>();
    }
    return true;
  };
  Result<long> logs =
      client_.Stream("GET", "/containers/" + *id + "/logs?follow=1&stdout=1&stderr=1", "", on_log,
                     watching, Clock::time_point::max());
  if (!logs.ok() && logs.status().code() != StatusCode::kCancelled) {
    log::Warn("Could not follow a container's logs.",
              {{"task_id", request_.task_id}, {"error", logs.status().message()}});
  }
  if (!stop_) {
    std::string waited;
    Result<long> wait = client_.Stream(
        "POST", "/containers/" + *id + "/wait", "",
        [&waited](std::string_view chunk) { waited.append(chunk); }, watching,
        Clock::time_point::max());
    if (!wait.ok() && !stop_ && exited_at && exit_code_seen) {
      log::Warn("The engine did not answer a wait for an exited container; using its exit code.",
                {{"task_id", request_.task_id}, {"container", *id}});
      wait = 200;
      waited = json{{"StatusCode", *exit_code_seen}}.dump();
    }
    if (!wait.ok() && !stop_) return wait.status();
    if (!stop_) {
      json parsed = json::parse(waited, nullptr, false);
      if (*wait != 200 || !parsed.is_object() || !parsed.contains("StatusCode") ||
          !parsed["StatusCode"].is_number_integer()) {
        return Internal("waiting for container " + *id +
                        " failed: " + ApiErrorMessage(HttpResponse{*wait, waited}));
      }
      end.code = parsed["StatusCode"].get<int>();
    }
  }
  CheckProgress();
  if (stop_) {
    end.end = *stop_;
    KillAndRemove(*id);
    return end;
  }
  if (end.code != 0 && task_.limits && task_.limits->memory) {
    // Podman reports OOMKilled false: a SIGKILL (137) with a memory limit, which this
    // runtime did not send, is the kernel's OOM killer.
    bool oom = end.code == 137;
    if (!oom) {
      Result<HttpResponse> inspect =
          client_.Call("GET", "/containers/" + *id + "/json", "", rt_.options_.api_timeout);
      if (inspect.ok() && inspect->status == 200) {
        json state = json::parse(inspect->body, nullptr, false);
        oom = state.is_object() && state.contains("State") && state["State"].is_object() &&
              state["State"].contains("OOMKilled") && state["State"]["OOMKilled"].is_boolean() &&
              state["State"]["OOMKilled"].get<bool>();
      }
    }
    end.out_of_memory = oom;
  }
  KillAndRemove(*id, /*running=*/false);
  return end;
}

Result<std::optional<RunOutcome>> DockerRuntime::TaskRun::StartSidecars() {
  for (std::size_t i = 0; i < task_.sidecars.size(); ++i) {
    const AuxTask& sidecar = task_.sidecars[i];
    Step step;
    step.kind = "sidecar";
    step.index = i;
    step.aux = &sidecar;
    step.label = "sidecar " +
                 (sidecar.name.empty() ? "#" + std::to_string(i + 1) : "\"" + sidecar.name + "\"");
    step.script = std::string(kReservedPrefix) + "sidecar-" + std::to_string(i + 1) + ".sh";
    std::string failure;
    Result<std::string> id = StartContainer(step, failure, deadline_);
    if (!id.ok()) return id.status();
    if (stop_ == End::kCancelled) return std::optional<RunOutcome>(CancelledOutcome());
    if (stop_) {
      return std::optional<RunOutcome>(
          Fail(step.label + " failed: timed out after " + FormatDuration(*task_.timeout)));
    }
    if (!failure.empty())
      return std::optional<RunOutcome>(Fail(step.label + " failed: " + failure));
    if (network_owner_.empty()) network_owner_ = *id;
    if (sidecar.probe) {
      Result<std::optional<RunOutcome>> probed = Probe(step, *id);
      if (!probed.ok() || *probed) return probed;
    }
  }
  return std::optional<RunOutcome>();
}

Result<std::optional<RunOutcome>> DockerRuntime::TaskRun::Probe(const Step& step,
                                                                const std::string& id) {
  const baton::Probe& probe = *step.aux->probe;
  std::string path = probe.path.empty() ? "/" : probe.path;
  if (path.front() != '/') path = "/" + path;
  std::string url = "http://127.0.0.1:" + std::to_string(probe.port) + path;
  std::string what = "probe GET " + url;
  if (probe.port <= 0 || probe.port > 65535) {
    return std::optional<RunOutcome>(
        Fail(step.label + " failed: probe port " + std::to_string(probe.port) + " is not a port"));
  }
  // Only the path goes into a shell word: quote it.
  std::string quoted = "'";
  for (char c : url) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  std::string script = "if command -v wget >/dev/null 2>&1; then wget -q -O /dev/null " + quoted +
                       "; else curl -fsS -o /dev/null " + quoted + "; fi";
  auto timeout = probe.timeout
                     ? std::chrono::duration_cast<std::chrono::milliseconds>(*probe.timeout)
                     : rt_.options_.default_probe_timeout;
  Clock::time_point give_up = std::min(deadline_, Clock::now() + timeout);
  while (true) {
    if (cancel_.stop_requested()) return std::optional<RunOutcome>(CancelledOutcome());
    if (Clock::now() >= give_up) {
      if (Clock::now() >= deadline_) {
        return std::optional<RunOutcome>(
            Fail(step.label + " failed: timed out after " + FormatDuration(*task_.timeout)));
      }
      return std::optional<RunOutcome>(
          Fail(step.label + " was not ready within " +
               FormatDuration(std::chrono::duration_cast<Duration>(timeout)) + " (" + what + ")"));
    }
    json body{{"Cmd", {"sh", "-c", script}}, {"AttachStdout", true}, {"AttachStderr", true}};
    Result<HttpResponse> exec =
        client_.Call("POST", "/containers/" + id + "/exec", body.dump(), rt_.options_.api_timeout);
    if (!exec.ok()) return exec.status();
    std::optional<int> exit_code;
    if (exec->status == 201 || exec->status == 200) {
      json created = json::parse(exec->body, nullptr, false);
      std::string exec_id =
          created.is_object() && created.contains("Id") && created["Id"].is_string()
              ? created["Id"].get<std::string>()
              : "";
      if (exec_id.empty()) return Internal("exec create answered without an Id");
      // Attached: the answer ends when the probe command does (Podman does not update a
      // detached exec's state).
      Result<long> started = client_.Stream(
          "POST", "/exec/" + exec_id + "/start", R"({"Detach":false,"Tty":false})",
          [](std::string_view) {}, [this] { return !cancel_.stop_requested(); },
          std::min(give_up, Clock::now() + std::chrono::seconds(5)));
      if (!started.ok() && started.status().code() == StatusCode::kUnavailable) {
        return started.status();
      }
      if (started.ok()) {
        Result<HttpResponse> state =
            client_.Call("GET", "/exec/" + exec_id + "/json", "", rt_.options_.api_timeout);
        if (!state.ok()) return state.status();
        json parsed = json::parse(state->body, nullptr, false);
        if (state->status == 200 && parsed.is_object() && parsed.contains("Running") &&
            parsed["Running"].is_boolean() && !parsed["Running"].get<bool>() &&
            parsed.contains("ExitCode") && parsed["ExitCode"].is_number_integer()) {
          exit_code = parsed["ExitCode"].get<int>();
        }
      }
    }
    // Whatever the probe said, a sidecar that is gone is not ready (Podman may report an
    // exec interrupted by the container's exit as exit code 0).
    {
      // Perhaps the sidecar is gone.
      Result<HttpResponse> inspect =
          client_.Call("GET", "/containers/" + id + "/json", "", rt_.options_.api_timeout);
      if (!inspect.ok()) return inspect.status();
      json parsed = json::parse(inspect->body, nullptr, false);
      const json* state =
          parsed.is_object() && parsed.contains("State") && parsed["State"].is_object()
              ? &parsed["State"]
              : nullptr;
      if (state != nullptr && state->contains("Running") && (*state)["Running"].is_boolean() &&
          !(*state)["Running"].get<bool>()) {
        int code = state->contains("ExitCode") && (*state)["ExitCode"].is_number_integer()
                       ? (*state)["ExitCode"].get<int>()
                       : -1;
        std::string error = step.label + " failed: it exited (exit code " + std::to_string(code) +
                            ") before it was ready";
        std::string lines = LastLines(ContainerLogs(id), rt_.options_.output_tail_lines);
        if (!lines.empty()) error += "\n" + lines;
        return std::optional<RunOutcome>(Fail(error));
      }
      if (exit_code == 0) return std::optional<RunOutcome>();
    }
    SleepFor(std::chrono::duration_cast<std::chrono::milliseconds>(std::min<Clock::duration>(
        kProbeInterval, std::max<Clock::duration>(give_up - Clock::now(), Clock::duration(0)))));
  }
}

std::string DockerRuntime::TaskRun::ContainerLogs(const std::string& id) {
  Result<HttpResponse> logs = client_.Call("GET", "/containers/" + id + "/logs?stdout=1&stderr=1",
                                           "", rt_.options_.api_timeout);
  if (!logs.ok() || logs->status != 200) return "";
  std::string out;
  docker::LogDemuxer demux;
  demux.Feed(logs->body, [&out](std::string_view chunk) { out.append(chunk); });
  return out;
}

void DockerRuntime::TaskRun::KillAndRemove(const std::string& id, bool running) {
  auto erase = [this, &id] {
    containers_.erase(std::remove(containers_.begin(), containers_.end(), id), containers_.end());
  };
  if (running) {
    // A shell as PID 1 ignores SIGTERM: kill outright.
    Result<HttpResponse> killed =
        client_.Call("POST", "/containers/" + id + "/kill?signal=SIGKILL", "", kCleanupTimeout);
    (void)killed;  // an exited container answers 409: fine
  }
  Result<HttpResponse> removed =
      client_.Call("DELETE", "/containers/" + id + "?force=1&v=1", "", kCleanupTimeout);
  if (removed.ok() && (removed->status < 300 || removed->status == 404)) {
    erase();
    return;
  }
  log::Warn("Could not remove a task's container.",
            {{"task_id", request_.task_id},
             {"container", id},
             {"error", removed.ok() ? ApiErrorMessage(*removed) : removed.status().message()}});
  erase();
}

void DockerRuntime::TaskRun::Cleanup() {
  // Steps first, then the sidecars whose network they joined.
  std::vector<std::string> left = containers_;
  std::reverse(left.begin(), left.end());
  for (const std::string& id : left) KillAndRemove(id);
  for (const std::string& volume : volumes_) {
    Result<HttpResponse> removed =
        client_.Call("DELETE", "/volumes/" + volume + "?force=1", "", kCleanupTimeout);
    if (!removed.ok() || (removed->status >= 300 && removed->status != 404)) {
      log::Warn("Could not remove a task's volume.",
                {{"task_id", request_.task_id},
                 {"volume", volume},
                 {"error", removed.ok() ? ApiErrorMessage(*removed) : removed.status().message()}});
    }
  }
  volumes_.clear();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    if (ec) {
      log::Warn("Could not remove a task's working directory.",
                {{"task_id", request_.task_id}, {"dir", dir_}, {"error", ec.message()}});
    }
    dir_.clear();
  }
}

void DockerRuntime::TaskRun::CheckProgress() {
  std::optional<double> value = ReadProgressFile(progress_path_);
  if (!value || value == last_progress_) return;
  last_progress_ = value;
  observer_.OnProgress(*value);
}

Result<RunOutcome> DockerRuntime::TaskRun::ReadResult() {
  return ReadResultFile(output_path_, request_.max_result_bytes);
}

std::string DockerRuntime::TaskRun::Describe(const Step& step, const StepEnd& end) const {
  std::string what;
  switch (end.end) {
    case End::kExited:
      what = "exit code " + std::to_string(end.code);
      break;
    case End::kStepTimedOut:
      what = "timed out after " + FormatDuration(*step.timeout);
      break;
    case End::kTaskTimedOut:
      what = "timed out after " + FormatDuration(*task_.timeout);
      break;
    case End::kCancelled:
      what = "cancelled";
      break;
    case End::kNotStarted:
      what = end.failure;
      break;
  }
  if (end.out_of_memory) {
    what = "out of memory: exceeded the memory limit of " + FormatMemory(*task_.limits->memory);
  }
  return StepError(step.label, what, tail_, rt_.options_.output_tail_lines,
                   /*with_output=*/end.end != End::kNotStarted);
}

RunOutcome DockerRuntime::TaskRun::Fail(std::string error, std::optional<int> exit_code,
                                        FailReason reason) const {
  return FailedOutcome(std::move(error), exit_code, reason);
}

FailReason DockerRuntime::TaskRun::ReasonOf(const StepEnd& end) {
  return runtime::StepFailReason(end.out_of_memory,
                                 end.end == End::kStepTimedOut || end.end == End::kTaskTimedOut,
                                 end.end == End::kExited);
}

RunOutcome DockerRuntime::TaskRun::CancelledOutcome() const { return runtime::CancelledOutcome(); }

Result<RunOutcome> DockerRuntime::TaskRun::Execute() {
  if (cancel_.stop_requested()) return CancelledOutcome();

  // Mistakes in the task fail it before anything runs.
  image_ = task_.image.empty() ? rt_.options_.default_image : task_.image;
  if (image_.empty()) {
    return Fail("the task names no image and runtime.docker.image is empty");
  }
  auto check_image = [](const std::string& image) -> std::optional<std::string> {
    if (image.empty() || ValidImage(image)) return std::nullopt;
    return "invalid image name \"" + image + "\"";
  };
  if (auto error = check_image(image_)) return Fail(*error);
  if (auto error = BadFileName(task_.files)) return Fail(*error);
  if (auto error = BadEnvName(task_.env)) return Fail(*error);
  for (const auto* list : {&task_.pre, &task_.post, &task_.sidecars}) {
    for (const AuxTask& aux : *list) {
      if (auto error = BadEnvName(aux.env)) return Fail(*error);
      if (auto error = BadFileName(aux.files)) return Fail(*error);
      if (auto error = check_image(aux.image)) return Fail(*error);
    }
  }
  if (!task_.workdir.empty() && task_.workdir.front() != '/') {
    return Fail("workdir \"" + task_.workdir + "\" is not an absolute path");
  }
  for (const std::string& network : task_.networks) {
    if (network.empty() || network.starts_with("container:")) {
      return Fail("invalid network \"" + network + "\"");
    }
  }
  std::string volume_prefix =
      "baton-" + NamePart(request_.task_id, 40) + "-" + RandomSuffix() + "-";
  docker::BindPolicy binds{rt_.options_.allow_binds, rt_.options_.bind_sources,
                           rt_.options_.hidden_dirs};
  Result<std::vector<docker::MountSpec>> mounts = docker::ResolveMounts(
      task_.mounts, binds, [&](std::size_t i) { return volume_prefix + std::to_string(i + 1); });
  if (!mounts.ok()) return Fail(mounts.status().message());
  mounts_ = std::move(*mounts);
  if (!task_.gpus.empty()) {
    Result<docker::GpuRequest> gpus = docker::ParseGpus(task_.gpus);
    if (!gpus.ok()) return Fail(gpus.status().message());
    gpus_ = *gpus;
  }
  if (task_.limits && task_.limits->cpus && *task_.limits->cpus <= 0) {
    return Fail("limits.cpus must be more than 0");
  }

  BATON_RETURN_IF_ERROR(Prepare());
  if (task_.timeout && task_.timeout->count() > 0) deadline_ = Clock::now() + *task_.timeout;

  Result<std::string> volumes = CreateVolumes();
  if (!volumes.ok()) return volumes.status();
  if (!volumes->empty()) return Fail(*volumes);

  Result<std::optional<RunOutcome>> sidecars = StartSidecars();
  if (!sidecars.ok()) return sidecars.status();
  if (*sidecars) return std::move(**sidecars);

  std::vector<Step> steps;
  auto add_aux = [&steps](std::string_view kind, const std::vector<AuxTask>& list) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      const AuxTask& aux = list[i];
      Step step;
      step.kind = kind;
      step.index = i;
      step.label = std::string(kind) + " " +
                   (aux.name.empty() ? "step " + std::to_string(i + 1) : "\"" + aux.name + "\"");
      step.script =
          std::string(kReservedPrefix) + std::string(kind) + "-" + std::to_string(i + 1) + ".sh";
      step.aux = &aux;
      step.timeout = aux.timeout;
      steps.push_back(std::move(step));
    }
  };
  add_aux("pre", task_.pre);
  Step main_step;
  main_step.kind = "main";
  main_step.script = std::string(kReservedPrefix) + "main.sh";
  steps.push_back(std::move(main_step));
  add_aux("post", task_.post);

  RunOutcome completed;
  for (const Step& step : steps) {
    Result<StepEnd> end = RunStep(step);
    if (!end.ok()) return end.status();
    if (end->end == End::kCancelled) return CancelledOutcome();
    if (end->end != End::kExited || end->code != 0) {
      std::optional<int> code;
      if (end->end == End::kExited) code = end->code;
      return Fail(Describe(step, *end), code, ReasonOf(*end));
    }
    if (step.kind == "main") {
      Result<RunOutcome> result = ReadResult();
      if (!result.ok()) return result.status();
      if (result->state != RunOutcome::State::kCompleted) return result;
      completed = std::move(*result);
    }
  }
  return completed;
}

// ---- DockerRuntime ----

DockerRuntime::DockerRuntime(DockerRuntimeOptions options)
    : options_(std::move(options)), client_(std::make_unique<DockerClient>(options_.host)) {
  if (options_.base_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    options_.base_dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/baton-tasks";
  }
  // Containers are given host paths: they must be absolute.
  std::error_code ec;
  std::filesystem::create_directories(options_.base_dir, ec);
  std::filesystem::path absolute = std::filesystem::absolute(options_.base_dir, ec);
  if (!ec) options_.base_dir = absolute.lexically_normal().string();
  while (options_.base_dir.size() > 1 && options_.base_dir.back() == '/')
    options_.base_dir.pop_back();
  Result<std::unique_ptr<runtime::Incarnation>> incarnation =
      runtime::Incarnation::Open(options_.base_dir);
  if (incarnation.ok()) {
    incarnation_ = std::move(*incarnation);
  } else {
    incarnation_status_ = incarnation.status();  // Run and KillLeftovers return it
  }
}

DockerRuntime::~DockerRuntime() = default;

Status DockerRuntime::KillLeftovers() {
  if (!incarnation_) return incarnation_status_;
  std::vector<std::string> failures;
  std::size_t removed = 0;
  for (runtime::DeadIncarnation& dead : incarnation_->FindDead()) {
    bool clean = true;
    auto filter = UrlEncode(
        json{{"label", json::array({std::string(kRuntimeLabel) + "=" + dead.id()})}}.dump());
    // Containers first (a volume in use cannot go), each removed with force: a running
    // one is killed.
    Result<HttpResponse> listed =
        client_->Call("GET", "/containers/json?all=1&filters=" + filter, "", options_.api_timeout);
    if (!listed.ok() || listed->status >= 300) {
      failures.push_back("cannot list the containers of an earlier run: " +
                         (listed.ok() ? ApiErrorMessage(*listed) : listed.status().message()));
      continue;
    }
    json containers = json::parse(listed->body, nullptr, /*allow_exceptions=*/false);
    for (const json& container : containers.is_array() ? containers : json::array()) {
      std::string id = container.value("Id", "");
      if (id.empty()) continue;
      Result<HttpResponse> deleted =
          client_->Call("DELETE", "/containers/" + id + "?force=1&v=1", "", options_.api_timeout);
      if (deleted.ok() && (deleted->status < 300 || deleted->status == 404)) {
        ++removed;
        continue;
      }
      clean = false;
      failures.push_back("cannot remove container " + id + ": " +
                         (deleted.ok() ? ApiErrorMessage(*deleted) : deleted.status().message()));
    }
    Result<HttpResponse> volumes =
        client_->Call("GET", "/volumes?filters=" + filter, "", options_.api_timeout);
    if (volumes.ok() && volumes->status < 300) {
      json body = json::parse(volumes->body, nullptr, /*allow_exceptions=*/false);
      const json* list = body.is_object() && body.contains("Volumes") ? &body["Volumes"] : nullptr;
      for (const json& volume : list != nullptr && list->is_array() ? *list : json::array()) {
        std::string name = volume.value("Name", "");
        if (name.empty()) continue;
        Result<HttpResponse> deleted = client_->Call(
            "DELETE", "/volumes/" + UrlEncode(name) + "?force=1", "", options_.api_timeout);
        if (!deleted.ok() || (deleted->status >= 300 && deleted->status != 404)) clean = false;
      }
    } else {
      clean = false;
    }
    if (clean) dead.Forget();  // else kept: the next start tries again
  }
  if (removed > 0) {
    log::Warn("Removed the containers of tasks that an earlier run left running.",
              {{"containers", std::to_string(removed)}, {"base_dir", options_.base_dir}});
  }
  if (failures.empty()) return Status::Ok();
  std::string text;
  for (const std::string& failure : failures) text += (text.empty() ? "" : "; ") + failure;
  return Unavailable("cannot remove the containers an earlier run left: " + text);
}

Result<RunOutcome> DockerRuntime::Run(const RunRequest& request, RunObserver& observer,
                                      std::stop_token cancel) {
  // nlohmann::json and the standard library may throw; nothing crosses this boundary (the
  // TaskRun's destructor still removes what was created).
  // An unlabelled container would be out of KillLeftovers' reach.
  if (!incarnation_) return incarnation_status_;
  try {
    TaskRun run(*this, request, observer, std::move(cancel));
    return run.Execute();
  } catch (const std::exception& e) {
    return Internal(std::string("docker runtime: ") + e.what());
  }
}

Status DockerRuntime::Health() { return client_->Ping(); }

}  // namespace baton

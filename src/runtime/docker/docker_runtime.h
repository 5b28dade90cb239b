// DockerRuntime: runs each task in containers through the Docker Engine API over a unix
// socket (Docker Engine, or Podman's Docker-compatible service).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace baton {

class DockerClient;
namespace runtime {
class Incarnation;
}  // namespace runtime

struct DockerRuntimeOptions {
  // The engine's API: unix:///path/to/docker.sock (or tcp://host:port).
  std::string host = "unix:///var/run/docker.sock";
  // The image of tasks (and steps) that name none.
  std::string default_image = "busybox:latest";
  // Where the per-task directories (mounted at /baton and /tork) go; empty means
  // $TMPDIR/baton-tasks (or /tmp/baton-tasks). Must be a path the engine can mount, i.e.
  // on the engine's host.
  std::string base_dir;
  // Bind mounts in jobs: refused unless allowed; when `bind_sources` is not empty, only
  // from those directories (or below them).
  bool allow_binds = false;
  std::vector<std::string> bind_sources;
  // Never bound into a container, whatever the two above say (docker::BindPolicy::forbidden):
  // the engine passes Baton's data directory. The runtime's own mounts are the task's
  // directory only.
  std::vector<std::string> hidden_dirs;
  // A Docker config file whose `auths` give registry credentials for pulls (a task's own
  // `registry` wins). Empty: $DOCKER_CONFIG/config.json, else ~/.docker/config.json.
  std::string docker_config;
  // Extra labels on every container and volume (tests use them to find leftovers).
  std::map<std::string, std::string> labels;
  // Lines of output quoted in a failed task's error.
  int output_tail_lines = 10;
  // How often $BATON_PROGRESS is read while a step runs.
  std::chrono::milliseconds progress_interval{200};
  // How long an image pull may take (the task's timeout also applies).
  std::chrono::milliseconds pull_timeout = std::chrono::minutes(10);
  // How long one API call (create, start, remove, ...) may take.
  std::chrono::milliseconds api_timeout = std::chrono::seconds(60);
  // How long a sidecar probe waits when the probe names no timeout.
  std::chrono::milliseconds default_probe_timeout = std::chrono::minutes(1);
};

// Each step of a task (pre steps, the main step, post steps) runs in its own container,
// created → started → its logs streamed (stdout and stderr demultiplexed, in order) →
// waited for → removed; sidecars start first and are removed with the task. Every
// container is removed, also on timeout, cancel or an engine error, and carries the labels
// baton.task=<task id> and baton.runtime=<this instance's id>: the instance holds a lock
// under `base_dir` while it lives (runtime/common/incarnation.h), and KillLeftovers
// removes, with force, the containers and volumes labelled with the id of an instance on
// the same `base_dir` whose lock is free (its process died).
//
// Each task gets a fresh host directory under `base_dir`, mounted at /baton and /tork in
// all its containers and removed afterwards: its `files` and `run` scripts go there, and
// so do $BATON_OUTPUT and $BATON_PROGRESS (/baton/.baton-output, /baton/.baton-progress;
// TORK_OUTPUT and TORK_PROGRESS name the same files). A step's own `files` (pre, post,
// sidecar) are written there before its container is created. It is the working directory
// unless the task sets `workdir`; then every file written so far is also mounted into the
// workdir one by one. A
// `run` script runs as Tork's do: `sh -c /baton/.baton-<step>.sh` (the entrypoint can be
// overridden); without `run`, `cmd` and `entrypoint` override the image's as in Docker.
//
// Containers have no network unless the task names `networks`. With sidecars, the first
// sidecar owns the network namespace (with the task's networks) and every other container
// of the task joins it, so the task reaches its sidecars on localhost; a sidecar's probe
// (HTTP GET of path on port) runs inside the sidecar (wget, else curl) until it answers.
//
// Thread-safety: Run and Health may be called concurrently from any threads; each Run
// uses only the calling thread.
class DockerRuntime final : public Runtime {
 public:
  explicit DockerRuntime(DockerRuntimeOptions options = {});
  ~DockerRuntime() override;

  DockerRuntime(const DockerRuntime&) = delete;
  DockerRuntime& operator=(const DockerRuntime&) = delete;

  Result<RunOutcome> Run(const RunRequest& request, RunObserver& observer,
                         std::stop_token cancel) override;
  // Whether the API answers (GET /_ping).
  Status Health() override;
  // Removes (force: running ones are killed) the containers and volumes of dead
  // instances on the same base_dir.
  Status KillLeftovers() override;

  const DockerRuntimeOptions& options() const { return options_; }

 private:
  class TaskRun;

  DockerRuntimeOptions options_;
  std::unique_ptr<DockerClient> client_;
  std::unique_ptr<runtime::Incarnation> incarnation_;
  Status incarnation_status_;  // why there is no incarnation_
};

}  // namespace baton

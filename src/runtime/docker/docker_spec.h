// The pure parts of the Docker runtime: what a task's fields become in Docker Engine API
// requests (container bodies, mounts, GPU requests, registry credentials) and the
// demultiplexing of container logs. No I/O, so unit tests cover them without an engine.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/job.h"

namespace baton::docker {

// Which host paths tasks may bind-mount.
struct BindPolicy {
  bool allowed = false;
  // When not empty, a bind's source must be one of these directories or inside one.
  std::vector<std::string> sources;
  // Never a bind's source, whatever `allowed` and `sources` say: these directories
  // (Baton's data directory), anything inside them, or a directory that holds one; the
  // source is compared as written (normalised) and with its symbolic links resolved.
  std::vector<std::string> forbidden;
};

struct MountSpec {
  std::string type;  // volume | bind | tmpfs
  std::string source;
  std::string target;
  bool read_only = false;
  std::optional<std::int64_t> tmpfs_size;
  std::optional<std::int64_t> tmpfs_mode;
};

// The task's mounts as API mounts, or InvalidArgument naming what is wrong (a refused
// bind, a reserved target, an unknown option). Volumes without a source get
// `volume_name(index)`: the per-task volume the runtime creates and removes.
Result<std::vector<MountSpec>> ResolveMounts(
    const std::vector<Mount>& mounts, const BindPolicy& binds,
    const std::function<std::string(std::size_t)>& volume_name);

struct GpuRequest {
  int count = 0;  // -1: all
  std::vector<std::string> device_ids;
  std::string driver;
  std::vector<std::string> capabilities;  // default: gpu
};

// Docker's --gpus syntax: "all", "2", "count=2", "device=0,1", "driver=nvidia",
// "capabilities=compute,utility", comma-separated key=value pairs.
Result<GpuRequest> ParseGpus(std::string_view text);

struct ContainerSpec {
  std::string image;
  std::optional<std::vector<std::string>> entrypoint;
  std::optional<std::vector<std::string>> cmd;
  std::vector<std::string> env;  // NAME=value
  std::string workdir;
  std::map<std::string, std::string> labels;
  std::vector<std::string> binds;  // host:container[:options]
  std::vector<MountSpec> mounts;
  // "none", a network name, or "container:<id>" (share another container's network).
  std::string network_mode = "none";
  std::vector<std::string> networks;  // every network to attach, at creation
  std::optional<std::int64_t> memory;
  std::optional<double> cpus;
  std::optional<GpuRequest> gpus;
};

// The body of POST /containers/create.
std::string CreateBody(const ContainerSpec& spec);

// The registry host an image reference pulls from ("docker.io" for short names).
std::string RegistryServer(std::string_view image);

// Credentials for `server` from a Docker config file's text (auths.<server>.auth, or
// username/password); nothing when absent or unreadable. docker.io also matches
// https://index.docker.io/v1/.
std::optional<Registry> CredentialsFromDockerConfig(std::string_view config_json,
                                                    std::string_view server);

// The X-Registry-Auth header value for these credentials.
std::string RegistryAuthHeader(const Registry& registry, std::string_view server);

std::string Base64Encode(std::string_view data, bool url_safe = false);
std::optional<std::string> Base64Decode(std::string_view data);

// Splits Docker's multiplexed log stream (8-byte frame headers: stream, 0, 0, 0, size
// big-endian) into payloads, whatever the chunking. A stream that does not start with a
// frame header (a TTY container) passes through as is.
class LogDemuxer {
 public:
  void Feed(std::string_view data, const std::function<void(std::string_view)>& out);

 private:
  std::string pending_;
  std::size_t remaining_ = 0;  // payload bytes left in the current frame
  bool raw_ = false;
  bool decided_ = false;
};

// Replaces every occurrence of `secret` in `text` with [REDACTED].
std::string Redact(std::string text, std::string_view secret);

}  // namespace baton::docker

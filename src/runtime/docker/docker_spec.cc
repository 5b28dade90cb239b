#include "runtime/docker/docker_spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/duration.h"

namespace baton::docker {
namespace {

using nlohmann::json;

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t end = text.find(sep, start);
    out.emplace_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

bool IsTrue(std::string_view value) { return value == "true" || value == "1" || value == "yes"; }

// Whether `path` is `dir` or inside it, comparing normalised absolute paths by component.
bool IsWithin(const std::filesystem::path& path, const std::filesystem::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d) {
    if (d->empty()) continue;  // the trailing "" of "/dir/"
    if (p == path.end() || *p != *d) return false;
    ++p;
  }
  return true;
}

// Refuses a bind source that is, is inside, or holds one of `forbidden` (as written and
// with its symbolic links resolved).
Status RefuseHidden(const std::string& written, const std::filesystem::path& source,
                    const std::vector<std::string>& forbidden) {
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(source, ec);
  for (const std::string& dir : forbidden) {
    const std::filesystem::path hidden = std::filesystem::path(dir).lexically_normal();
    for (const std::filesystem::path& candidate : {source, resolved}) {
      if (candidate.empty()) continue;
      if (IsWithin(candidate, hidden) || IsWithin(hidden, candidate)) {
        return InvalidArgument("bind mount of \"" + written +
                               "\" refused: it would give the container Baton's data directory (" +
                               hidden.string() + ")");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<MountSpec>> ResolveMounts(
    const std::vector<Mount>& mounts, const BindPolicy& binds,
    const std::function<std::string(std::size_t)>& volume_name) {
  std::vector<MountSpec> out;
  for (std::size_t i = 0; i < mounts.size(); ++i) {
    const Mount& mount = mounts[i];
    MountSpec spec;
    spec.target = mount.target;
    if (mount.target.empty() || mount.target.front() != '/') {
      return InvalidArgument("mount target \"" + mount.target + "\" is not an absolute path");
    }
    if (IsReservedMountTarget(mount.target)) {
      return InvalidArgument("mount target \"" + mount.target +
                             "\" is reserved for the engine's own files");
    }
    for (const auto& [key, value] : mount.opts) {
      bool known = false;
      if ((key == "readonly" || key == "ro") && mount.type != MountType::kTmpfs) {
        spec.read_only = IsTrue(value);
        known = true;
      } else if (mount.type == MountType::kTmpfs && key == "size") {
        Result<std::int64_t> size = ParseMemory(value);
        if (!size.ok() || *size <= 0) {
          return InvalidArgument("tmpfs mount \"" + mount.target + "\": size \"" + value +
                                 "\" is not a memory size such as 64m");
        }
        spec.tmpfs_size = *size;
        known = true;
      } else if (mount.type == MountType::kTmpfs && key == "mode") {
        char* end = nullptr;
        long mode = std::strtol(value.c_str(), &end, 8);
        if (value.empty() || *end != '\0' || mode < 0 || mode > 07777) {
          return InvalidArgument("tmpfs mount \"" + mount.target + "\": mode \"" + value +
                                 "\" is not an octal mode such as 1777");
        }
        spec.tmpfs_mode = mode;
        known = true;
      }
      if (!known) {
        return InvalidArgument("mount \"" + mount.target + "\": unknown option \"" + key +
                               "\" for a " + std::string(ToString(mount.type)) + " mount");
      }
    }
    switch (mount.type) {
      case MountType::kVolume:
        spec.type = "volume";
        spec.source = mount.source.empty() ? volume_name(i) : mount.source;
        break;
      case MountType::kTmpfs:
        spec.type = "tmpfs";
        if (!mount.source.empty()) {
          return InvalidArgument("tmpfs mount \"" + mount.target + "\" takes no source");
        }
        break;
      case MountType::kBind: {
        spec.type = "bind";
        spec.source = mount.source;
        if (!binds.allowed) {
          return InvalidArgument("bind mount of \"" + mount.source +
                                 "\" refused: this worker does not allow bind mounts "
                                 "(runtime.docker.binds.allowed)");
        }
        if (mount.source.empty() || mount.source.front() != '/') {
          return InvalidArgument("bind mount source \"" + mount.source +
                                 "\" is not an absolute path");
        }
        std::filesystem::path source = std::filesystem::path(mount.source).lexically_normal();
        if (!binds.sources.empty()) {
          bool inside =
              std::any_of(binds.sources.begin(), binds.sources.end(), [&](const std::string& dir) {
                return IsWithin(source, std::filesystem::path(dir).lexically_normal());
              });
          if (!inside) {
            return InvalidArgument("bind mount of \"" + mount.source +
                                   "\" refused: not under an allowed source "
                                   "(runtime.docker.binds.sources)");
          }
        }
        BATON_RETURN_IF_ERROR(RefuseHidden(mount.source, source, binds.forbidden));
        spec.source = source.string();
        break;
      }
    }
    out.push_back(std::move(spec));
  }
  return out;
}

Result<GpuRequest> ParseGpus(std::string_view text) {
  GpuRequest request;
  if (text == "all") {
    request.count = -1;
    return request;
  }
  auto bad = [&] {
    return InvalidArgument("gpus \"" + std::string(text) +
                           "\": expected all, a count, or count=/device=/driver=/capabilities=");
  };
  if (text.empty()) return bad();
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    request.count = std::stoi(std::string(text.substr(0, 6)));
    return request;
  }
  // "device=0,1" has commas inside a value: a part without '=' continues the last value.
  std::string last_key;
  for (const std::string& part : Split(text, ',')) {
    std::size_t eq = part.find('=');
    std::string key = eq == std::string::npos ? last_key : part.substr(0, eq);
    std::string value = eq == std::string::npos ? part : part.substr(eq + 1);
    if (key == "count") {
      if (value == "all") {
        request.count = -1;
      } else if (!value.empty() && value.size() < 6 &&
                 std::all_of(value.begin(), value.end(),
                             [](char c) { return c >= '0' && c <= '9'; })) {
        request.count = std::stoi(value);
      } else {
        return bad();
      }
    } else if (key == "device") {
      if (value.empty()) return bad();
      request.device_ids.push_back(value);
    } else if (key == "driver") {
      request.driver = value;
    } else if (key == "capabilities") {
      request.capabilities.push_back(value);
    } else {
      return bad();
    }
    last_key = key;
  }
  return request;
}

std::string CreateBody(const ContainerSpec& spec) {
  json body;
  body["Image"] = spec.image;
  if (spec.entrypoint) body["Entrypoint"] = *spec.entrypoint;
  if (spec.cmd) body["Cmd"] = *spec.cmd;
  body["Env"] = spec.env;
  if (!spec.workdir.empty()) body["WorkingDir"] = spec.workdir;
  body["Labels"] = spec.labels;
  body["AttachStdout"] = true;
  body["AttachStderr"] = true;
  body["Tty"] = false;
  json host;
  host["Binds"] = spec.binds;
  json mounts = json::array();
  for (const MountSpec& m : spec.mounts) {
    json mount{{"Type", m.type}, {"Target", m.target}, {"ReadOnly", m.read_only}};
    if (!m.source.empty()) mount["Source"] = m.source;
    if (m.type == "tmpfs" && (m.tmpfs_size || m.tmpfs_mode)) {
      json options = json::object();
      if (m.tmpfs_size) options["SizeBytes"] = *m.tmpfs_size;
      if (m.tmpfs_mode) options["Mode"] = *m.tmpfs_mode;
      mount["TmpfsOptions"] = options;
    }
    mounts.push_back(std::move(mount));
  }
  host["Mounts"] = mounts;
  host["NetworkMode"] = spec.network_mode;
  if (spec.memory) {
    host["Memory"] = *spec.memory;
    host["MemorySwap"] = *spec.memory;  // no swap: the limit is the limit
  }
  if (spec.cpus) host["NanoCpus"] = static_cast<std::int64_t>(std::llround(*spec.cpus * 1e9));
  if (spec.gpus) {
    json request{{"Driver", spec.gpus->driver}, {"Count", spec.gpus->count}};
    if (!spec.gpus->device_ids.empty()) request["DeviceIDs"] = spec.gpus->device_ids;
    std::vector<std::string> caps = spec.gpus->capabilities;
    if (caps.empty()) caps.emplace_back("gpu");
    request["Capabilities"] = json::array({caps});
    host["DeviceRequests"] = json::array({request});
  }
  body["HostConfig"] = host;
  if (!spec.networks.empty()) {
    json endpoints = json::object();
    for (const std::string& network : spec.networks) {
      // "bridge" is the default network by its Docker name; Podman knows it only as the
      // network mode, not as an endpoint.
      if (network != "bridge") endpoints[network] = json::object();
    }
    if (!endpoints.empty()) body["NetworkingConfig"] = {{"EndpointsConfig", endpoints}};
  }
  return body.dump();
}

std::string RegistryServer(std::string_view image) {
  std::size_t slash = image.find('/');
  if (slash == std::string_view::npos) return "docker.io";
  std::string_view first = image.substr(0, slash);
  if (first.find('.') != std::string_view::npos || first.find(':') != std::string_view::npos ||
      first == "localhost") {
    return std::string(first);
  }
  return "docker.io";
}

std::optional<Registry> CredentialsFromDockerConfig(std::string_view config_json,
                                                    std::string_view server) {
  json config = json::parse(config_json, nullptr, false);
  if (!config.is_object() || !config.contains("auths") || !config["auths"].is_object()) {
    return std::nullopt;
  }
  const json& auths = config["auths"];
  std::vector<std::string> keys = {std::string(server), "https://" + std::string(server),
                                   "http://" + std::string(server)};
  if (server == "docker.io") {
    keys.emplace_back("https://index.docker.io/v1/");
    keys.emplace_back("index.docker.io");
  }
  for (const std::string& key : keys) {
    auto it = auths.find(key);
    if (it == auths.end() || !it->is_object()) continue;
    Registry registry;
    if (it->contains("auth") && (*it)["auth"].is_string()) {
      std::optional<std::string> decoded = Base64Decode((*it)["auth"].get<std::string>());
      if (!decoded) continue;
      std::size_t colon = decoded->find(':');
      if (colon == std::string::npos) continue;
      registry.username = decoded->substr(0, colon);
      registry.password = decoded->substr(colon + 1);
      return registry;
    }
    if (it->contains("username") && (*it)["username"].is_string()) {
      registry.username = (*it)["username"].get<std::string>();
      if (it->contains("password") && (*it)["password"].is_string()) {
        registry.password = (*it)["password"].get<std::string>();
      }
      return registry;
    }
  }
  return std::nullopt;
}

std::string RegistryAuthHeader(const Registry& registry, std::string_view server) {
  json auth{{"username", registry.username},
            {"password", registry.password},
            {"serveraddress", std::string(server)}};
  return "X-Registry-Auth: " + Base64Encode(auth.dump(), /*url_safe=*/true);
}

std::string Base64Encode(std::string_view data, bool url_safe) {
  const char* table = url_safe ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                               : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  while (i + 2 < data.size()) {
    auto n = (static_cast<unsigned char>(data[i]) << 16) |
             (static_cast<unsigned char>(data[i + 1]) << 8) |
             static_cast<unsigned char>(data[i + 2]);
    out += table[(n >> 18) & 63];
    out += table[(n >> 12) & 63];
    out += table[(n >> 6) & 63];
    out += table[n & 63];
    i += 3;
  }
  if (i + 1 == data.size()) {
    auto n = static_cast<unsigned char>(data[i]) << 16;
    out += table[(n >> 18) & 63];
    out += table[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == data.size()) {
    auto n = (static_cast<unsigned char>(data[i]) << 16) |
             (static_cast<unsigned char>(data[i + 1]) << 8);
    out += table[(n >> 18) & 63];
    out += table[(n >> 12) & 63];
    out += table[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view data) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  unsigned bits = 0;
  int count = 0;
  for (char c : data) {
    if (c == '=' || c == '\n' || c == '\r') continue;
    int v = value(c);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<unsigned>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  return out;
}

void LogDemuxer::Feed(std::string_view data, const std::function<void(std::string_view)>& out) {
  if (!decided_) {
    pending_.append(data);
    if (pending_.empty()) return;
    unsigned char first = static_cast<unsigned char>(pending_[0]);
    if (first > 2) {
      raw_ = true;
    } else if (pending_.size() < 4) {
      return;  // cannot tell yet
    } else {
      raw_ = pending_[1] != 0 || pending_[2] != 0 || pending_[3] != 0;
    }
    decided_ = true;
    data = {};
    std::string buffered = std::move(pending_);
    pending_.clear();
    Feed(buffered, out);
    return;
  }
  if (raw_) {
    if (!data.empty()) out(data);
    return;
  }
  while (!data.empty()) {
    if (remaining_ > 0) {
      std::size_t n = std::min(remaining_, data.size());
      out(data.substr(0, n));
      data.remove_prefix(n);
      remaining_ -= n;
      continue;
    }
    std::size_t need = 8 - pending_.size();
    std::size_t n = std::min(need, data.size());
    pending_.append(data.substr(0, n));
    data.remove_prefix(n);
    if (pending_.size() == 8) {
      remaining_ = (static_cast<std::size_t>(static_cast<unsigned char>(pending_[4])) << 24) |
                   (static_cast<std::size_t>(static_cast<unsigned char>(pending_[5])) << 16) |
                   (static_cast<std::size_t>(static_cast<unsigned char>(pending_[6])) << 8) |
                   static_cast<std::size_t>(static_cast<unsigned char>(pending_[7]));
      pending_.clear();
    }
  }
}

std::string Redact(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  std::size_t pos = 0;
  while ((pos = text.find(secret, pos)) != std::string::npos) {
    text.replace(pos, secret.size(), "[REDACTED]");
    pos += 10;
  }
  return text;
}

}  // namespace baton::docker

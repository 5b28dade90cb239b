#include "engine/task_user.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>

#include <charconv>
#include <filesystem>
#include <string>
#include <vector>

namespace baton {
namespace {

std::optional<std::uint32_t> Number(const std::string& text) {
  std::uint32_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return n;
}

// A user by name: its uid and primary gid.
std::optional<TaskUser> UserNamed(const std::string& name) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwnam_r(name.c_str(), &entry, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return TaskUser{found->pw_uid, found->pw_gid};
}

std::optional<std::uint32_t> GroupNamed(const std::string& name) {
  group entry{};
  group* found = nullptr;
  std::vector<char> buf(16384);
  if (getgrnam_r(name.c_str(), &entry, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return found->gr_gid;
}

}  // namespace

Result<std::optional<TaskUser>> ResolveTaskUser(const Config& config, uid_t self, bool can_switch) {
  const bool auth = config.AuthEnabled();
  if (config.shell_uid.empty() && !config.shell_gid.empty()) {
    return InvalidArgument("runtime.shell.gid is set without runtime.shell.uid: set both");
  }
  if (config.shell_uid.empty() && !auth) return std::optional<TaskUser>();

  TaskUser user;
  std::string uid_key = "runtime.shell.uid";
  if (config.shell_uid.empty()) {
    // Authentication on, no user configured: the host's unprivileged user.
    std::optional<TaskUser> nobody = UserNamed("nobody");
    if (!nobody) {
      return FailedPrecondition(
          "api.auth.enabled is on, so tasks may not run as Baton's own user, and this host has "
          "no user `nobody` to run them as: set runtime.shell.uid (and runtime.shell.gid)");
    }
    user = *nobody;
    uid_key = "api.auth.enabled (tasks run as nobody)";
  } else if (std::optional<std::uint32_t> uid = Number(config.shell_uid)) {
    user.uid = *uid;
    if (config.shell_gid.empty()) {
      return InvalidArgument(fmt::format(
          "runtime.shell.uid is the number {}: set runtime.shell.gid too", config.shell_uid));
    }
  } else if (std::optional<TaskUser> named = UserNamed(config.shell_uid)) {
    user = *named;
  } else {
    return InvalidArgument(
        fmt::format("runtime.shell.uid: no user \"{}\" on this host", config.shell_uid));
  }
  if (!config.shell_gid.empty()) {
    if (std::optional<std::uint32_t> gid = Number(config.shell_gid)) {
      user.gid = *gid;
    } else if (std::optional<std::uint32_t> named = GroupNamed(config.shell_gid)) {
      user.gid = *named;
    } else {
      return InvalidArgument(
          fmt::format("runtime.shell.gid: no group \"{}\" on this host", config.shell_gid));
    }
  }
  if (auth && user.uid == self) {
    return FailedPrecondition(fmt::format(
        "runtime.shell.uid is {}, Baton's own user: with api.auth.enabled on, tasks may not run "
        "as Baton's user (they could read its data directory); give another user",
        config.shell_uid));
  }
  if (user.uid != self && !can_switch) {
    return FailedPrecondition(fmt::format(
        "{}: tasks would run as uid {}, but Baton (uid {}) cannot switch users (that needs "
        "root's CAP_SETUID and CAP_SETGID): run Baton as root, or use runtime.type = \"docker\"",
        uid_key, user.uid, self));
  }
  return std::optional<TaskUser>(user);
}

Status CheckTaskUserCanReach(const std::string& data_dir, const TaskUser& user) {
  std::filesystem::path dir = std::filesystem::path(data_dir).lexically_normal();
  while (dir.has_relative_path() && dir.filename().empty()) dir = dir.parent_path();
  for (dir = dir.parent_path();; dir = dir.parent_path()) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
      mode_t bit = S_IXOTH;
      if (st.st_uid == user.uid) {
        bit = S_IXUSR;
      } else if (st.st_gid == user.gid) {
        bit = S_IXGRP;
      }
      if ((st.st_mode & bit) == 0) {
        return FailedPrecondition(fmt::format(
            "tasks run as uid {} gid {} (runtime.shell.uid / gid, or api.auth.enabled) cannot "
            "reach their directories in the data directory {}: {} (mode {:o}, uid {}) does not "
            "let them search it; allow it (chmod o+x {}) or choose a data_dir they can reach",
            user.uid, user.gid, data_dir, dir.string(), st.st_mode & 07777, st.st_uid,
            dir.string()));
      }
    }
    if (!dir.has_relative_path()) break;
  }
  return Status::Ok();
}

}  // namespace baton

// Which user shell tasks run as (runtime.shell.uid / gid, and the rule with authentication on).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "engine/config.h"

namespace baton {

struct TaskUser {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
};

// The user and group shell tasks run as; nullopt: Baton's own (`self`, its effective uid).
//
// - runtime.shell.uid / gid, each a number or a name; a uid given by name without a gid
//   takes that user's primary group; by number, the gid must be given too.
// - With authentication on (Config::AuthEnabled) whoever has an account may submit code,
//   so tasks never run as Baton's own user: with no uid configured they run as `nobody`
//   (and its primary group), and a uid that is Baton's own is refused.
// - Only a process that may switch users can run tasks as another (`can_switch`: root's
//   CAP_SETUID and CAP_SETGID): otherwise a configured uid, or authentication on, is a
//   start-up error naming the keys.
Result<std::optional<TaskUser>> ResolveTaskUser(const Config& config, uid_t self, bool can_switch);

// Whether `user` can reach a task directory inside `data_dir`: the data directory itself is
// private (0700) but covered, in each task's mount namespace, by a stand-in it may search;
// every directory above it must let the user search it (x for its owner, its group or
// others, as it applies to the user and its one group). An error names the first that
// does not.
Status CheckTaskUserCanReach(const std::string& data_dir, const TaskUser& user);

}  // namespace baton

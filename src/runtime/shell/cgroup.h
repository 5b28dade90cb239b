// Cgroups for the shell runtime: which hierarchies this host lets us use (CgroupHost,
// found once), and one task's set of cgroups (TaskCgroup: created per task, joined by the
// task's first process before it execs, killed and removed at the end).
//
// Hosts differ: cgroup v1 (one mount per controller, e.g. /sys/fs/cgroup/memory), cgroup
// v2 (one unified mount whose controllers must be enabled in cgroup.subtree_control), or
// both (v1 controllers plus a controller-less v2 mount that still offers cgroup.kill). For
// each of memory, cpu and pids we pick v2 when its controller is enabled there, else v1;
// a v2 cgroup is used even without controllers, to track and kill the process tree.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace baton {

// A cgroup filesystem mount, as /proc/self/mountinfo lists it.
struct CgroupMount {
  std::string mount_point;
  bool v2 = false;
  std::vector<std::string> controllers;  // v1 only: e.g. {"cpu", "cpuacct"}
};

// Parses the cgroup and cgroup2 mounts out of /proc/self/mountinfo text.
std::vector<CgroupMount> ParseCgroupMounts(std::string_view mountinfo);

// The limits one task's cgroups enforce; unset means unlimited.
struct CgroupLimits {
  std::optional<std::int64_t> memory_bytes;
  std::optional<double> cpus;
  std::int64_t pids_max = 0;  // 0: no cap
};

class TaskCgroup;

// Kills every process in the cgroup directory `dir` (through cgroup.kill where there is
// one, else SIGKILL to each until none is left), waits (bounded) until it is empty and
// removes it: for the cgroups of a task whose runtime died. An error when processes
// survive; Ok when the directory is already gone.
Status KillAndRemoveCgroup(const std::string& dir);

// What the host allows. Immutable after Detect, so safe to share between threads.
class CgroupHost {
 public:
  // No cgroups at all.
  CgroupHost() = default;

  // Finds the mounts and, in each usable hierarchy, creates the directory `parent` (e.g.
  // "baton") under which the task cgroups go; a hierarchy where that fails (not root, a
  // read-only mount) is left out.
  static CgroupHost Detect(const std::string& parent);

  bool limits_memory() const { return memory_.where != Where::kNone; }
  bool limits_cpu() const { return cpu_.where != Where::kNone; }
  bool limits_pids() const { return pids_.where != Where::kNone; }
  // Whether a task's processes can be tracked (and killed) through a cgroup.
  bool tracks_processes() const { return !v2_parent_.empty() || limits_pids(); }

  // What the names of this process's task cgroups start with: "<pid namespace>-<pid>-".
  // Detect removes empty ones of a process of this namespace that is gone.
  const std::string& task_name_prefix() const { return task_name_prefix_; }

  // Whether `dir` is a task cgroup of this host's hierarchies (directly under a parent):
  // what a record of a dead runtime names is checked with it before anything is killed.
  bool IsTaskCgroupDir(const std::string& dir) const;

  // One line for logs: where each controller lives.
  std::string Describe() const;

  // Creates the task's cgroups, named `name` under the parent in each hierarchy that is
  // needed: the v2 one (when usable) and the v1 ones whose limit is set.
  Result<std::unique_ptr<TaskCgroup>> Create(const std::string& name,
                                             const CgroupLimits& limits) const;

 private:
  enum class Where { kNone, kV1, kV2 };
  struct Controller {
    Where where = Where::kNone;
    std::string v1_parent;  // <v1 mount>/<parent>, when where == kV1
  };

  std::string task_name_prefix_;
  std::string v2_parent_;  // <v2 mount>/<parent>; empty when v2 is unusable
  bool v2_kill_ = false;   // cgroup.kill exists (Linux 5.14+)
  Controller memory_;
  Controller cpu_;
  Controller pids_;
};

// One task's cgroups. Used by the thread running the task only.
class TaskCgroup {
 public:
  TaskCgroup(const TaskCgroup&) = delete;
  TaskCgroup& operator=(const TaskCgroup&) = delete;
  // Kills what is left and removes the directories.
  ~TaskCgroup();

  // The v2 cgroup directory (O_CLOEXEC), for clone3(CLONE_INTO_CGROUP); -1 without one.
  int v2_dir_fd() const { return v2_dir_fd_; }
  // Its cgroup.procs, for when clone3 cannot place the child; -1 without one.
  int v2_procs_fd() const { return v2_procs_fd_; }
  // The v1 cgroups' `tasks` files (O_CLOEXEC): the task's first process writes "0" to
  // each after fork and before exec, so everything it starts is inside from the
  // beginning. `tasks` moves one thread (the child has only one), which unlike
  // cgroup.procs does not take the global threadgroup lock: that lock can cost an RCU
  // grace period, milliseconds, per task.
  const std::vector<int>& v1_tasks_fds() const { return v1_tasks_fds_; }

  // The processes currently in the cgroup.
  std::vector<pid_t> Pids() const;

  // Kills every process in the cgroup, including ones that left the task's process group
  // or session, and waits (bounded) until they are gone. Returns the pids it killed.
  std::vector<pid_t> KillAll();

  // How many processes the OOM killer has killed in the memory cgroup; nullopt without a
  // memory cgroup.
  std::optional<std::int64_t> OomKills() const;

  // Whether another task may use these cgroups: they were created without a memory or cpu
  // limit (nothing to reset: the pids cap is the runtime's, the same for every task, and
  // an unlimited memory cgroup has no OOM state to carry over), and every one of them is
  // verified empty now, after a KillAll that emptied the tracking one. Reads each other
  // directory's process list.
  bool Reusable() const;
  // Whether the last KillAll saw the tracking cgroup empty, and nothing was started in it
  // since (MarkInUse).
  bool emptied() const { return emptied_; }
  // Called before a process is started in the cgroup.
  void MarkInUse() { emptied_ = false; }

  // Closes the fds and removes the directories (kill first). Idempotent.
  Status Remove();

  // The directories, for tests and logs.
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  friend class CgroupHost;
  TaskCgroup() = default;

  std::vector<std::string> dirs_;  // created, in creation order
  int v2_dir_fd_ = -1;
  int v2_procs_fd_ = -1;
  std::vector<int> v1_tasks_fds_;
  std::string track_dir_;   // where to list processes: the v2 dir, else a v1 one
  bool kill_file_ = false;  // track_dir_ has cgroup.kill
  std::string memory_dir_;  // empty without a memory limit
  bool memory_v2_ = false;
  bool limited_ = false;       // created with a memory or cpu limit
  bool emptied_ = false;       // the last KillAll saw track_dir_ empty
  bool kill_written_ = false;  // cgroup.kill was used (see Reusable)
};

}  // namespace baton

// ShellRuntime: runs a task's `run` scripts with bash as local processes, in a fresh
// working directory, with limits enforced through cgroups where the host allows.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "runtime/runtime.h"
#include "runtime/shell/cgroup.h"
#include "runtime/shell/sandbox.h"

namespace baton {

namespace runtime {
class Incarnation;
class Record;
}  // namespace runtime

struct ShellRuntimeOptions {
  // Where the per-task working directories go; empty means $TMPDIR/baton-tasks (or
  // /tmp/baton-tasks). A relative path is made absolute (against the current directory)
  // at construction. Also where the runtime records its running tasks (.baton-runtimes/),
  // for KillLeftovers.
  std::string base_dir;
  std::string bash = "/bin/bash";
  // PATH for tasks when the worker has none.
  std::string default_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  // Variables copied from the worker's environment (read at construction); nothing else
  // from it reaches a task except PATH and HOME.
  std::vector<std::string> pass_env;
  // Use cgroups for limits and for killing whole process trees, where the host allows.
  bool enable_cgroups = true;
  // The directory, in each cgroup hierarchy's root, that holds the task cgroups.
  std::string cgroup_parent = "baton";
  // Processes (and threads) a task may have at once, through the pids cgroup; 0: no cap.
  std::int64_t pids_max = 4096;
  // Lines of output quoted in a failed task's error.
  int output_tail_lines = 10;
  // How often $BATON_PROGRESS is read while a step runs.
  std::chrono::milliseconds progress_interval{200};
  // Make this process a child subreaper (PR_SET_CHILD_SUBREAPER, process-wide) so that a
  // task's leftover processes, once killed, are reaped by Run instead of lingering as
  // zombies until init gets to them. Only the task's own process group (and with cgroups
  // its cgroup) is reaped: other code in the process that starts children sees no change
  // unless its children orphan grandchildren, which then become zombies of this process.
  bool reap_orphans = true;
  // Directories no task may see (the engine passes Baton's data directory). Where the host
  // allows a mount namespace per task (CAP_SYS_ADMIN), each step runs in one of its own in
  // which each of these is an empty read-only directory, but for the task's own directory
  // (bound back at its path, writable); Landlock, where the kernel has it, keeps the task
  // from undoing that or reaching past it through another process's /proc entries
  // (sandbox.h). Where the host does not allow it, tasks run unsandboxed and
  // sandbox_unavailable() says why. Empty: no sandbox.
  std::vector<std::string> hidden_dirs;
  // Run every step as this user and group, with no supplementary groups (Tork's
  // runtime.shell.uid / gid; both or neither), the task's directory and the files the
  // runtime writes there owned by them. Needs CAP_SETUID and CAP_SETGID (root), else each
  // task fails saying so.
  std::optional<std::uint32_t> uid;
  std::optional<std::uint32_t> gid;
};

// Runs each step of a task (pre steps, `run`, post steps) as `bash -c <script>` in its
// own session and process group, and all of a task's steps in the task's own cgroups
// where the host allows: limits.memory, limits.cpus and the pids cap apply to the whole
// task, and killing the cgroup reaches processes that left the process group. When a
// step ends, whatever it left running is killed (as when a container's main process
// exits).
//
// Each task gets an empty directory under `base_dir`: a new one, or one an earlier task
// left empty (kept, with that task's cgroups, when its processes are verifiably gone; see
// TaskRun's destructor and TaskCgroup::Reusable). $BATON_OUTPUT and $BATON_PROGRESS
// (.baton-output, .baton-progress) go there, always by absolute path (`base_dir` is made
// absolute). It is the steps' working directory unless the task sets `workdir` (absolute;
// created when missing). The task's `files` are written into the working directory before
// the first step, and a pre or post step's own `files` just before that step; files
// written into a `workdir` stay there, as anything else the task writes there.
//
// Each running task is recorded under `base_dir` (see runtime/common/incarnation.h): one
// small file per task, rewritten at each step's start and emptied once its processes are
// gone, naming its cgroups (path and inode) and its step's process group (the leader's pid
// and its start time from /proc/<pid>/stat). KillLeftovers reads what dead instances on
// the same `base_dir` left there and kills those cgroups and process groups; a pid that
// now belongs to another process (start time differs) and a cgroup that is another one
// (inode differs) are left alone.
//
// What only a container runtime can honour (`mounts`, `networks`, `sidecars`, `gpus`,
// `registry`, `cmd`/`entrypoint` without `run`, on the task or a step) fails the task
// before anything runs, naming the field; `image` is ignored with one warning per job.
//
// The environment is the
// task's `env` (under a step's own), PATH, HOME and SHELL, the `pass_env` variables, and the
// output and progress paths (also as TORK_OUTPUT and TORK_PROGRESS); nothing else.
//
// Thread-safety: Run and Health may be called concurrently from any threads; each Run
// uses only the calling thread.
class ShellRuntime final : public Runtime {
 public:
  explicit ShellRuntime(ShellRuntimeOptions options = {});
  ~ShellRuntime() override;

  ShellRuntime(const ShellRuntime&) = delete;
  ShellRuntime& operator=(const ShellRuntime&) = delete;

  Result<RunOutcome> Run(const RunRequest& request, RunObserver& observer,
                         std::stop_token cancel) override;
  Status Health() override;
  // Kills the processes of the tasks that dead instances on the same base_dir left
  // running (their recorded cgroups, then their process groups) and waits until they are
  // gone (at most about 5 s per task before it gives up with an error naming them).
  Status KillLeftovers() override;

  const ShellRuntimeOptions& options() const { return options_; }
  // What the host's cgroups allow (nothing when disabled).
  const CgroupHost& cgroups() const { return cgroups_; }
  // Whether tasks run sandboxed (options().hidden_dirs hidden from them), and with what.
  bool sandboxed() const { return sandboxed_; }
  bool landlocked() const { return landlock_fd_ >= 0; }
  const SandboxHost& sandbox_host() const { return sandbox_host_; }
  // Why tasks are not sandboxed though hidden_dirs is set; empty otherwise.
  const std::string& sandbox_unavailable() const { return sandbox_unavailable_; }

 private:
  class TaskRun;

  // A task directory kept for reuse: its path and an open descriptor of it.
  struct IdleDir {
    std::string path;
    int fd = -1;
  };

  void WarnImageIgnoredOnce(const RunRequest& request);
  // Idle task cgroups and directories: taken by a starting task, given back by a finished
  // one whose processes are verifiably gone (more than kMaxIdle are removed instead).
  // Creating and removing them is most of a trivial task's cost in this process.
  std::unique_ptr<TaskCgroup> TakeIdleCgroup();
  void GiveBackCgroup(std::unique_ptr<TaskCgroup> cgroup);
  std::optional<IdleDir> TakeIdleDir();
  void GiveBackDir(IdleDir dir);
  // Record files of finished tasks, kept open for the next ones (or a new one); an error
  // without an incarnation.
  Result<std::unique_ptr<runtime::Record>> TakeRecord();
  void GiveBackRecord(std::unique_ptr<runtime::Record> record);
  // Kills what one record of a dead instance names.
  Status KillRecorded(const std::string& record);
  // Probes the host and prepares the sandbox for options_.hidden_dirs.
  void SetUpSandbox();

  ShellRuntimeOptions options_;
  CgroupHost cgroups_;
  // Captured at construction: later changes to the worker's environment do not matter,
  // and Run never reads the environment (getenv is not safe beside setenv).
  std::string path_;
  std::string home_;
  std::vector<std::pair<std::string, std::string>> passed_env_;
  int dev_null_ = -1;
  // Orphaned task processes are reparented to this process (subreaper, or pid 1).
  bool is_reaper_ = false;
  // Cleared when the kernel lacks clone3 or CLONE_INTO_CGROUP; then children are forked.
  std::atomic<bool> clone3_usable_{true};

  std::atomic<std::uint64_t> next_cgroup_{0};  // names task cgroups <prefix><n>
  Mutex idle_mu_;
  std::vector<std::unique_ptr<TaskCgroup>> idle_cgroups_ BATON_GUARDED_BY(idle_mu_);
  std::vector<IdleDir> idle_dirs_ BATON_GUARDED_BY(idle_mu_);
  std::vector<std::unique_ptr<runtime::Record>> idle_records_ BATON_GUARDED_BY(idle_mu_);

  // Set at construction (SetUpSandbox), read-only after.
  SandboxHost sandbox_host_;
  bool sandboxed_ = false;
  int landlock_fd_ = -1;
  std::vector<const char*> hidden_;  // options_.hidden_dirs, for the child
  std::string uid_map_;              // for a user namespace (sandbox_host_.in_user_namespace)
  std::string gid_map_;
  std::string sandbox_unavailable_;

  std::unique_ptr<runtime::Incarnation> incarnation_;
  Status incarnation_status_;  // why there is no incarnation_
  std::atomic<std::uint64_t> next_record_{0};

  Mutex warned_mu_;
  std::unordered_set<std::string> warned_jobs_ BATON_GUARDED_BY(warned_mu_);
  std::deque<std::string> warned_order_ BATON_GUARDED_BY(warned_mu_);  // oldest first
};

}  // namespace baton

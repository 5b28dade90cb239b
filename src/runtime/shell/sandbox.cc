#include "runtime/shell/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

#include "runtime/common/task_files.h"

namespace baton {
namespace {

// <linux/landlock.h> as of Linux 6.12, spelled out so that older headers build it: the
// kernel tells which parts it knows (its ABI version), and only those are used.
struct LandlockRulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;  // ABI 4
  std::uint64_t scoped;              // ABI 6
};
struct __attribute__((packed)) LandlockPathBeneathAttr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};
constexpr unsigned kLandlockCreateRulesetVersion = 1U << 0;
constexpr int kLandlockRulePathBeneath = 1;
constexpr std::uint64_t kLandlockScopeSignal = 1ULL << 1;

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

// Every file-system access right ABI `abi` knows: 13 in ABI 1, then REFER (2), TRUNCATE
// (3), IOCTL_DEV (5).
std::uint64_t AllFsAccess(int abi) {
  int bits = 13;
  if (abi >= 2) bits = 14;
  if (abi >= 3) bits = 15;
  if (abi >= 5) bits = 16;
  return (1ULL << bits) - 1;
}

bool HasCapabilities(std::initializer_list<int> caps) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  for (int cap : caps) {
    if ((data[cap / 32].effective & (1U << (cap % 32))) == 0) return false;
  }
  return true;
}

// Writes `text` (NUL-terminated) to `path` in one write.
BATON_CHILD_CODE int WriteProcFile(const char* path, const char* text) {
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  std::size_t size = 0;
  while (text[size] != '\0') ++size;
  long written = syscall(SYS_write, fd, text, size);
  int err = written == static_cast<long>(size) ? 0 : (written < 0 ? errno : EIO);
  syscall(SYS_close, fd);
  return err;
}

BATON_CHILD_CODE int MountStage(const ChildSandbox& sandbox) {
  if (sandbox.user_namespace) {
    if (syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNS) != 0) return errno;
    // An unprivileged process may map only its own ids, and its gid only once setgroups
    // is denied.
    if (int err = WriteProcFile("/proc/self/setgroups", "deny"); err != 0) return err;
    if (int err = WriteProcFile("/proc/self/uid_map", sandbox.uid_map); err != 0) return err;
    if (int err = WriteProcFile("/proc/self/gid_map", sandbox.gid_map); err != 0) return err;
  } else if (syscall(SYS_unshare, CLONE_NEWNS) != 0) {
    return errno;
  }
  // Nothing mounted here may reach the host's namespace.
  if (syscall(SYS_mount, "none", "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return errno;
  // The task's directory, opened in this namespace before it is covered (a bind mount's
  // source must be a mount of the caller's namespace), as `bind_fd`, which bind_source
  // names through /proc/self/fd.
  if (sandbox.bind_target != nullptr) {
    long fd = syscall(SYS_openat, AT_FDCWD, sandbox.bind_target, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    if (fd != sandbox.bind_fd) {
      if (syscall(SYS_dup3, fd, sandbox.bind_fd, O_CLOEXEC) < 0) return errno;
      syscall(SYS_close, fd);
    }
  }
  constexpr unsigned long kFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  for (std::size_t i = 0; i < sandbox.hidden_count; ++i) {
    if (syscall(SYS_mount, "baton-hidden", sandbox.hidden[i], "tmpfs", kFlags,
                "mode=0755,size=16k") != 0) {
      return errno;
    }
  }
  for (std::size_t i = 0; i < sandbox.make_dirs_count; ++i) {
    if (syscall(SYS_mkdir, sandbox.make_dirs[i], 0755) != 0 && errno != EEXIST) return errno;
  }
  if (sandbox.bind_target != nullptr && syscall(SYS_mount, sandbox.bind_source, sandbox.bind_target,
                                                nullptr, MS_BIND, nullptr) != 0) {
    return errno;
  }
  for (std::size_t i = 0; i < sandbox.hidden_count; ++i) {
    if (syscall(SYS_mount, nullptr, sandbox.hidden[i], nullptr,
                MS_REMOUNT | MS_BIND | MS_RDONLY | kFlags, nullptr) != 0) {
      return errno;
    }
  }
  return 0;
}

}  // namespace

std::string UserNamespaceMap(std::uint32_t id) {
  return std::to_string(id) + " " + std::to_string(id) + " 1";
}

SandboxHost ProbeSandboxHost(const std::string& probe_dir) {
  SandboxHost host;
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, kLandlockCreateRulesetVersion);
  host.landlock_abi = abi > 0 ? static_cast<int>(abi) : 0;
  host.can_change_user = HasCapabilities({CAP_SETUID, CAP_SETGID});
  if (probe_dir.empty()) {
    host.mount_namespaces_error = "not probed";
    return host;
  }
  // The child only makes raw system calls before _exit: safe in a multi-threaded process.
  const char* hidden[] = {probe_dir.c_str()};
  ChildSandbox probe;
  probe.hidden = hidden;
  probe.hidden_count = 1;
  host.in_user_namespace = !HasCapabilities({CAP_SYS_ADMIN});
  const std::string uid_map = UserNamespaceMap(geteuid());
  const std::string gid_map = UserNamespaceMap(getegid());
  probe.user_namespace = host.in_user_namespace;
  probe.uid_map = uid_map.c_str();
  probe.gid_map = gid_map.c_str();
  pid_t pid = fork();
  if (pid == 0) syscall(SYS_exit_group, MountStage(probe));
  if (pid < 0) {
    host.mount_namespaces_error = "cannot start a probe process: " + runtime::ErrnoText(errno);
    return host;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int err = WIFEXITED(status) ? WEXITSTATUS(status) : EINVAL;
  host.mount_namespaces = err == 0;
  if (err != 0) host.mount_namespaces_error = runtime::ErrnoText(err);
  return host;
}

Result<int> MakeLandlockRuleset(int abi) {
  if (abi <= 0) return FailedPrecondition("Landlock is not available");
  LandlockRulesetAttr attr{};
  attr.handled_access_fs = AllFsAccess(abi);
  std::size_t size = sizeof attr.handled_access_fs;
  if (abi >= 6) {
    attr.scoped = kLandlockScopeSignal;
    size = sizeof attr;
  }
  int fd = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, size, 0));
  if (fd < 0) return runtime::ErrnoStatus("landlock_create_ruleset", errno);
  int root = open("/", O_PATH | O_CLOEXEC);
  if (root < 0) {
    int err = errno;
    close(fd);
    return runtime::ErrnoStatus("open /", err);
  }
  LandlockPathBeneathAttr rule{attr.handled_access_fs, root};
  long added = syscall(SYS_landlock_add_rule, fd, kLandlockRulePathBeneath, &rule, 0);
  int err = errno;
  close(root);
  if (added != 0) {
    close(fd);
    return runtime::ErrnoStatus("landlock_add_rule", err);
  }
  return fd;
}

BATON_CHILD_CODE int EnterSandbox(const ChildSandbox& sandbox, SandboxStage* stage) {
  if (sandbox.hidden_count > 0) {
    *stage = SandboxStage::kMountNamespace;
    if (int err = MountStage(sandbox); err != 0) return err;
  }
  if (sandbox.landlock_fd >= 0) {
    *stage = SandboxStage::kLandlock;
    // Without CAP_SYS_ADMIN Landlock needs no_new_privs; with it, setuid programs keep
    // working for the task.
    if (syscall(SYS_landlock_restrict_self, sandbox.landlock_fd, 0) != 0) {
      if (errno != EPERM) return errno;
      if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
      if (syscall(SYS_landlock_restrict_self, sandbox.landlock_fd, 0) != 0) return errno;
    }
  }
  if (sandbox.set_ids) {
    *stage = SandboxStage::kChangeUser;
    // The raw calls change this process only (libc's would signal every thread of the
    // process this child was copied from).
    gid_t groups[1] = {sandbox.gid};
    if (syscall(SYS_setgroups, 1, groups) != 0) return errno;
    if (syscall(SYS_setresgid, sandbox.gid, sandbox.gid, sandbox.gid) != 0) return errno;
    if (syscall(SYS_setresuid, sandbox.uid, sandbox.uid, sandbox.uid) != 0) return errno;
  }
  *stage = SandboxStage::kNone;
  return 0;
}

std::string SandboxStageText(SandboxStage stage) {
  switch (stage) {
    case SandboxStage::kMountNamespace:
      return "cannot hide the data directory from the task (mount namespace)";
    case SandboxStage::kLandlock:
      return "cannot restrict the task with Landlock";
    case SandboxStage::kChangeUser:
      return "cannot run the task as the configured user (runtime.shell.uid / gid)";
    case SandboxStage::kNone:
      break;
  }
  return "cannot start the task in its sandbox";
}

}  // namespace baton

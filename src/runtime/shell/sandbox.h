// Hiding Baton's data directory from shell tasks: a private mount namespace per task in
// which the hidden directories are empty (the task's own directory bound back in), locked
// by a Landlock domain, and optionally another user and group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

// Code that runs in the child between its creation and exec: a copy of a multi-threaded
// process (or one sharing its memory), where only raw system calls are safe; not
// instrumented by sanitizers (their runtimes hold locks other threads may have owned).
#if defined(__clang__) || defined(__GNUC__)
#define BATON_CHILD_CODE __attribute__((no_sanitize("address", "thread", "undefined"), noinline))
#else
#define BATON_CHILD_CODE
#endif

namespace baton {

// What the host offers for sandboxing tasks, found by trying it (ProbeSandboxHost).
struct SandboxHost {
  // The Landlock ABI version (Linux >= 5.13 with Landlock enabled), 0 without.
  int landlock_abi = 0;
  // Whether a process can make a mount namespace of its own and mount in it: with
  // CAP_SYS_ADMIN (root), or in a user namespace of its own (`in_user_namespace`) where the
  // kernel lets unprivileged processes make one.
  bool mount_namespaces = false;
  bool in_user_namespace = false;
  // Why mount namespaces are unavailable (empty when they are).
  std::string mount_namespaces_error;
  // Whether this process may switch users (CAP_SETUID and CAP_SETGID).
  bool can_change_user = false;
};

// Tries what the kernel allows, in a short-lived child process (so nothing of this
// process changes): Landlock's ABI version, and unshare(CLONE_NEWNS) with a tmpfs mounted
// on `probe_dir` (an existing directory) in that namespace (inside a user namespace when
// this process lacks CAP_SYS_ADMIN); an empty `probe_dir` skips
// that probe (mount_namespaces stays false).
SandboxHost ProbeSandboxHost(const std::string& probe_dir);

// A Landlock ruleset that handles every file-system access right of `abi` (and signals,
// from ABI 6) and allows all of them beneath "/": within the task's own mount namespace it
// denies nothing on files, but the task can then neither change its mounts (mount, umount:
// Landlock forbids both to a sandboxed process, root included) nor reach into processes
// outside its domain (ptrace, /proc/<pid>/root, /proc/<pid>/fd, /proc/<pid>/ns/*, and
// from ABI 6 signals): Baton's own /proc entries would otherwise lead past the namespace
// to the hidden files. Returns the ruleset's descriptor (close-on-exec), or an error.
Result<int> MakeLandlockRuleset(int abi);

// What the child does before exec, prepared by the parent: only pointers into memory that
// outlives the spawn.
struct ChildSandbox {
  // Directories covered by an empty, read-only tmpfs in the child's own mount namespace;
  // none: no namespace.
  const char* const* hidden = nullptr;
  std::size_t hidden_count = 0;
  // Make the mount namespace inside a user namespace of the child's own (a process
  // without CAP_SYS_ADMIN: Baton as an ordinary user), mapping only its own uid and gid
  // (`uid_map`, `gid_map`: "<id> <id> 1").
  bool user_namespace = false;
  const char* uid_map = nullptr;
  const char* gid_map = nullptr;
  // Directories made in those tmpfs (in order) down to `bind_target`.
  const char* const* make_dirs = nullptr;
  std::size_t make_dirs_count = 0;
  // The task's own directory bound back at its path; null when it is not inside a hidden
  // directory. The child opens it in its new namespace as descriptor `bind_fd` (one it may
  // replace: the parent's descriptor of the directory), which `bind_source` names
  // (/proc/self/fd/<bind_fd>).
  const char* bind_source = nullptr;
  const char* bind_target = nullptr;
  int bind_fd = -1;
  // A ruleset from MakeLandlockRuleset to restrict the child with; -1: none.
  int landlock_fd = -1;
  // Switch to this user and group (and no supplementary groups) before exec.
  bool set_ids = false;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
};

enum class SandboxStage : int { kNone = 0, kMountNamespace, kLandlock, kChangeUser };

// In the child: enters the sandbox `sandbox` describes. Returns 0, or an errno value with
// `*stage` set to where it failed. Raw system calls only.
BATON_CHILD_CODE int EnterSandbox(const ChildSandbox& sandbox, SandboxStage* stage);

// A uid_map / gid_map line that maps `id` to itself.
std::string UserNamespaceMap(std::uint32_t id);

// The text a failed stage's error starts with.
std::string SandboxStageText(SandboxStage stage);

}  // namespace baton

#include "runtime/shell/shell_runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

#include "base/log.h"
#include "core/duration.h"
#include "runtime/common/incarnation.h"
#include "runtime/common/task_files.h"
#include "runtime/shell/sandbox.h"

namespace baton {
namespace {

using runtime::BadEnvName;
using runtime::BadFileName;
using runtime::ErrnoStatus;
using runtime::ErrnoText;
using runtime::FailedOutcome;
using runtime::kReservedPrefix;
using runtime::NamePart;
using runtime::ReadProgressFile;
using runtime::ReadResultFile;
using runtime::StepError;
using runtime::ValidEnvName;
using runtime::ValidFileName;
using runtime::WriteWholeFile;

using Clock = std::chrono::steady_clock;

// Output kept for quoting the last lines of a failed step.
constexpr std::size_t kTailBytes = 8 * 1024;
// The quoted lines, at most (a line may be long).
constexpr std::size_t kReadChunk = 32 * 1024;
// Reads per wakeup before checking the clock again, so a chatty task cannot starve the
// timeout.
constexpr int kReadsPerWakeup = 8;
// After a step's processes are killed the output pipe reaches EOF at once, unless a
// process outside the process group (no cgroup to find it) still holds it: wait that long.
constexpr auto kDrainWait = std::chrono::milliseconds(300);
// Without pidfd_open (Linux < 5.3) the exit is noticed by polling this often.
constexpr int kExitPollMillis = 50;
constexpr std::size_t kMaxWarnedJobs = 1024;
// Idle task cgroups (and directories) kept for reuse, at most: more than the tasks that
// run at once on any worker we know of.
constexpr std::size_t kMaxIdle = 64;
// Scripts up to this size go to bash as an argument (one argument may be 128 KiB); longer
// ones through a file. Every file costs: on some disks creating and deleting one takes
// milliseconds.
constexpr std::size_t kMaxInlineScript = 64 * 1024;

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// Moves fd above the standard descriptors (a worker started with 0-2 closed would
// otherwise hand out pipes there, and the child's dup2 onto 0-2 would clobber them).
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return moved;
}

// Whether the directory open as `fd` holds nothing but "." and "..": one getdents64 from
// its start (a removed directory reads as an error, so not as empty).
bool DirIsEmpty(int fd) {
  if (lseek(fd, 0, SEEK_SET) != 0) return false;
  alignas(8) char buf[512];
  long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
  if (n <= 0) return false;
  int entries = 0;
  for (long pos = 0; pos < n;) {
    unsigned short reclen = 0;
    std::memcpy(&reclen, buf + pos + 16, sizeof reclen);  // d_ino(8) d_off(8) d_reclen(2)
    const char* name = buf + pos + 19;                    // d_type(1), then the name
    if (std::strcmp(name, ".") != 0 && std::strcmp(name, "..") != 0) return false;
    ++entries;
    if (reclen == 0) return false;
    pos += reclen;
  }
  // "." and ".." fit in one read; if more followed they were not read, so read again.
  return entries == 2 && syscall(SYS_getdents64, fd, buf, sizeof buf) == 0;
}

std::int64_t RoundUpMillis(Clock::duration d) {
  return std::chrono::ceil<std::chrono::milliseconds>(d).count();
}

// "pre \"prepare\"", or "pre step 2" for a step without a name: how errors name a step.
std::string AuxLabel(std::string_view kind, std::size_t index, const AuxTask& aux) {
  return std::string(kind) + " " +
         (aux.name.empty() ? "step " + std::to_string(index + 1) : "\"" + aux.name + "\"");
}

// Why the shell runtime cannot run `task` as written, naming the field: what only a
// container runtime honours fails the task instead of being dropped (a job that needs its
// volume or sidecar must not run without it). `image` is not among them: it is ignored with
// one warning per job, so that Tork's jobs run on the host.
std::optional<std::string> Unsupported(const Task& task) {
  constexpr std::string_view kUseDocker = "; run this task with runtime.type = \"docker\"";
  auto refuse = [&](std::string_view what) { return std::string(what) + std::string(kUseDocker); };
  if (!task.mounts.empty()) return refuse("mounts: the shell runtime cannot mount volumes");
  if (!task.networks.empty()) {
    return refuse("networks: the shell runtime cannot attach container networks");
  }
  if (!task.sidecars.empty()) {
    return refuse("sidecars: the shell runtime cannot run sidecar containers");
  }
  if (!task.gpus.empty()) return refuse("gpus: the shell runtime cannot give a task GPUs");
  constexpr std::string_view kRegistry =
      "registry: the shell runtime cannot pull images, so it has no use for registry credentials";
  if (task.registry) return refuse(kRegistry);
  if (task.run.empty() && (!task.cmd.empty() || !task.entrypoint.empty())) {
    return refuse(
        "cmd, entrypoint: the shell runtime runs `run` scripts; cmd and entrypoint need an image");
  }
  for (std::string_view kind : {"pre", "post"}) {
    const std::vector<AuxTask>& list = kind == "pre" ? task.pre : task.post;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const AuxTask& aux = list[i];
      std::string label = AuxLabel(kind, i, aux) + ": ";
      if (aux.registry) return label + refuse(kRegistry);
      if (aux.run.empty() && (!aux.cmd.empty() || !aux.entrypoint.empty())) {
        return label + refuse(
                           "cmd, entrypoint: the shell runtime runs `run` scripts; cmd and "
                           "entrypoint need an image");
      }
    }
  }
  return std::nullopt;
}

// ---- Starting the task's process ----
//
// The child is made with clone3 (placing it in the v2 cgroup as it is created, which is
// much cheaper than moving it there afterwards, and returning a pidfd), or with fork
// where clone3 is unavailable. Either way it is a copy of this multi-threaded process in
// which only raw system calls are safe: the child side below uses nothing else, on data
// prepared before the copy, and is not instrumented by sanitizers (their runtimes hold
// locks that other threads may have owned at the moment of the copy).

// (BATON_CHILD_CODE, in sandbox.h, marks such code.)

enum ChildStage : int {
  kJoinCgroup = 1,
  kNewSession,
  kLimitMemory,
  kRedirect,
  kChdir,
  kExec,
  // EnterSandbox's stages, in SandboxStage's order.
  kSandboxMount,
  kSandboxLandlock,
  kSandboxUser,
};

struct ChildError {
  int stage;
  int err;
};

struct ChildSpec {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
  int stdin_fd = -1;
  int output_fd = -1;
  // How a failure before exec reaches the parent: through `shared_error` when the child
  // shares the parent's memory (the parent sleeps until the child has exec'd or exited,
  // then reads it), else by writing a ChildError to `report_fd`.
  ChildError* shared_error = nullptr;
  int report_fd = -1;
  // cgroup files to write "0" (this process) into.
  const int* procs_fds = nullptr;
  std::size_t procs_fd_count = 0;
  bool limit_address_space = false;
  std::uint64_t address_space = 0;
  // Entered after the redirections, before the working directory (which is then looked up
  // in the task's own mount namespace, as its user); null: none.
  const ChildSandbox* sandbox = nullptr;
};

// The kernel's struct sigaction, all zero: SIG_DFL, no flags, empty mask (32 bytes cover
// every architecture's layout).
struct KernelSigaction {
  std::uint64_t words[4];
};

struct KernelRlimit {
  std::uint64_t cur;
  std::uint64_t max;
};

// struct clone_args up to `cgroup` (CLONE_ARGS_SIZE_VER2).
struct CloneArgs {
  std::uint64_t flags;
  std::uint64_t pidfd;
  std::uint64_t child_tid;
  std::uint64_t parent_tid;
  std::uint64_t exit_signal;
  std::uint64_t stack;
  std::uint64_t stack_size;
  std::uint64_t tls;
  std::uint64_t set_tid;
  std::uint64_t set_tid_size;
  std::uint64_t cgroup;
};
constexpr std::uint64_t kClonePidfd = 0x00001000;
constexpr std::uint64_t kCloneIntoCgroup = 0x200000000ULL;
constexpr unsigned kCloseRangeCloexec = 1U << 2;
constexpr int kKernelSigsetBytes = 8;

[[noreturn]] BATON_CHILD_CODE void ChildFail(const ChildSpec& spec, int stage, long err) {
  ChildError error{stage, static_cast<int>(err)};
  if (spec.shared_error != nullptr) {
    volatile ChildError* shared = spec.shared_error;
    shared->stage = error.stage;
    shared->err = error.err;
  } else {
    syscall(SYS_write, spec.report_fd, &error, sizeof error);
  }
  syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

[[noreturn]] BATON_CHILD_CODE void ChildMain(const ChildSpec& spec) {
  // Handlers revert to the default on exec but ignored signals stay ignored: reset them
  // all while every signal is still blocked (the parent blocked them around the copy), so
  // that no handler of the parent runs here.
  KernelSigaction dfl{};
  for (int sig = 1; sig <= kKernelSigsetBytes * 8; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) {
      syscall(SYS_rt_sigaction, sig, &dfl, nullptr, kKernelSigsetBytes);
    }
  }
  for (std::size_t i = 0; i < spec.procs_fd_count; ++i) {
    if (syscall(SYS_write, spec.procs_fds[i], "0", 1) != 1) ChildFail(spec, kJoinCgroup, errno);
  }
  if (syscall(SYS_setsid) < 0) ChildFail(spec, kNewSession, errno);
  if (spec.limit_address_space) {
    KernelRlimit limit{spec.address_space, spec.address_space};
    if (syscall(SYS_prlimit64, 0, RLIMIT_AS, &limit, nullptr) != 0) {
      ChildFail(spec, kLimitMemory, errno);
    }
  }
  // The descriptors are all above 2 (AboveStdio), so dup3 never sees equal numbers.
  if (syscall(SYS_dup3, spec.stdin_fd, 0, 0) < 0 || syscall(SYS_dup3, spec.output_fd, 1, 0) < 0 ||
      syscall(SYS_dup3, spec.output_fd, 2, 0) < 0) {
    ChildFail(spec, kRedirect, errno);
  }
  if (spec.sandbox != nullptr) {
    SandboxStage stage = SandboxStage::kNone;
    if (int err = EnterSandbox(*spec.sandbox, &stage); err != 0) {
      ChildFail(spec, kSandboxMount + static_cast<int>(stage) - 1, err);
    }
  }
  if (syscall(SYS_chdir, spec.cwd) != 0) ChildFail(spec, kChdir, errno);
  // Descriptors another thread opened without O_CLOEXEC must not reach the task: mark
  // everything above stdio close-on-exec (the report pipe stays usable until exec).
  // Best effort: Linux < 5.11 lacks the flag.
  syscall(SYS_close_range, 3U, ~0U, kCloseRangeCloexec);
  std::uint64_t no_signals = 0;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &no_signals, nullptr, kKernelSigsetBytes);
  syscall(SYS_execve, spec.path, spec.argv, spec.envp);
  ChildFail(spec, kExec, errno);
}

constexpr std::uint64_t kCloneVm = 0x00000100;
constexpr std::uint64_t kCloneVfork = 0x00004000;

#if defined(__x86_64__)
// clone3 with CLONE_VM | CLONE_VFORK: the child shares this process's memory on its own
// small stack and the calling thread sleeps until it has exec'd or exited, as with
// posix_spawn. A copy of the address space (fork) costs page-table copies and then
// copy-on-write faults and TLB shoot-downs across this multi-threaded process, for every
// task. The child runs `ChildMain(spec)` and never returns here; the parent gets the
// child's pid or -errno. libc's syscall() cannot be used: the child would return
// through a stack it does not have.
BATON_CHILD_CODE long Clone3Vfork(CloneArgs* args, const ChildSpec* spec) {
  long ret;
  register const ChildSpec* child_arg asm("r12") = spec;
  register void (*child_fn)(const ChildSpec&) asm("r13") = &ChildMain;
  asm volatile(
      "syscall\n\t"
      "test %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      // Child: on the new stack (16-byte aligned top), no frame to return to.
      "xor %%ebp, %%ebp\n\t"
      "mov %%r12, %%rdi\n\t"
      "call *%%r13\n\t"
      "hlt\n\t"
      "1:\n\t"
      : "=a"(ret)
      : "a"(static_cast<long>(SYS_clone3)), "D"(args), "S"(sizeof *args), "r"(child_arg),
        "r"(child_fn)
      : "rcx", "r11", "memory");
  return ret;
}
constexpr bool kHaveClone3Vfork = true;
#else
long Clone3Vfork(CloneArgs*, const ChildSpec*) { return -ENOSYS; }
constexpr bool kHaveClone3Vfork = false;
#endif

struct Spawned {
  pid_t pid = -1;
  Fd pidfd;              // may be invalid (Linux < 5.3)
  int failed_stage = 0;  // a ChildStage when the child failed before exec
  int err = 0;
};

int PidfdOpen(pid_t pid) {
#if defined(SYS_pidfd_open)
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// Starts the child as the leader of a new session, in the task's cgroups; returns once it
// has exec'd (or failed to). `v1_procs` are the files (`tasks`) the child joins by
// writing; `v2_dir`/`v2_procs` the v2 cgroup, joined through clone3 where it works (then
// `clone3_usable` stays true), else by writing too.
Result<Spawned> Spawn(ChildSpec spec, const std::vector<int>& v1_procs, int v2_dir, int v2_procs,
                      std::atomic<bool>& clone3_usable) {
  Spawned spawned;
  int pidfd = -1;
  CloneArgs args{};
  args.flags = kClonePidfd | (v2_dir >= 0 ? kCloneIntoCgroup : 0);
  args.pidfd = reinterpret_cast<std::uintptr_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  args.cgroup = v2_dir >= 0 ? static_cast<std::uint64_t>(v2_dir) : 0;

  // Block every signal across the copy so that no handler of this process runs in the
  // child before it has reset them.
  sigset_t all, old;
  sigfillset(&all);
  pid_t pid = -1;
  int spawn_err = 0;

  if (kHaveClone3Vfork && clone3_usable.load(std::memory_order_relaxed)) {
    // The child shares our memory until exec: it reports a failure in `error`, no pipe.
    // Its stack: this thread sleeps meanwhile, so one per thread is enough.
    constexpr std::size_t kChildStackBytes = 64 * 1024;
    thread_local std::unique_ptr<std::uint64_t[]> child_stack;
    if (!child_stack) child_stack = std::make_unique<std::uint64_t[]>(kChildStackBytes / 8);
    ChildError error{0, 0};
    ChildSpec cloned = spec;
    cloned.procs_fds = v1_procs.data();
    cloned.procs_fd_count = v1_procs.size();
    cloned.shared_error = &error;
    CloneArgs vfork_args = args;
    vfork_args.flags |= kCloneVm | kCloneVfork;
    vfork_args.stack = reinterpret_cast<std::uintptr_t>(child_stack.get());
    vfork_args.stack_size = kChildStackBytes;
    pthread_sigmask(SIG_SETMASK, &all, &old);
    long r = Clone3Vfork(&vfork_args, &cloned);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (r > 0) {
      pid = static_cast<pid_t>(r);
      spawned.pid = pid;
      spawned.pidfd = Fd(pidfd >= 0 ? pidfd : PidfdOpen(pid));
      const volatile ChildError* shared = &error;
      ChildError seen{shared->stage, shared->err};
      if (seen.stage != 0) {
        siginfo_t info{};
        while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED) != 0 && errno == EINTR) {
        }
        spawned.pid = -1;
        spawned.pidfd.Reset();
        spawned.failed_stage = seen.stage;
        spawned.err = seen.err;
      }
      return spawned;
    }
    if (r == -ENOSYS || r == -E2BIG || r == -EINVAL) {
      // Too old a kernel for clone3 or CLONE_INTO_CGROUP: fork from now on.
      clone3_usable.store(false, std::memory_order_relaxed);
    }
  }

  // A copy of this process (clone3 without CLONE_VM, or fork): failures come through a pipe.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  Fd report_read(AboveStdio(report[0]));
  Fd report_write(AboveStdio(report[1]));
  if (!report_read.valid() || !report_write.valid()) return ErrnoStatus("pipe", errno);
  spec.report_fd = report_write.get();

  // Both variants of the list are prepared before the copy.
  std::vector<int> all_procs = v1_procs;
  if (v2_procs >= 0) all_procs.push_back(v2_procs);
  ChildSpec cloned = spec;
  cloned.procs_fds = v1_procs.data();
  cloned.procs_fd_count = v1_procs.size();
  ChildSpec forked = spec;
  forked.procs_fds = all_procs.data();
  forked.procs_fd_count = all_procs.size();

  pthread_sigmask(SIG_SETMASK, &all, &old);
  if (!kHaveClone3Vfork && clone3_usable.load(std::memory_order_relaxed)) {
    long r = syscall(SYS_clone3, &args, sizeof args);
    if (r == 0) ChildMain(cloned);
    if (r > 0) {
      pid = static_cast<pid_t>(r);
    } else {
      spawn_err = errno;
      // Too old a kernel for clone3 or CLONE_INTO_CGROUP: fork from now on.
      if (spawn_err == ENOSYS || spawn_err == E2BIG || spawn_err == EINVAL) {
        clone3_usable.store(false, std::memory_order_relaxed);
      }
    }
  }
  if (pid < 0) {
    pid = fork();
    if (pid == 0) ChildMain(forked);
    spawn_err = errno;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  report_write.Reset();
  if (pid < 0) return ErrnoStatus("cannot start a process", spawn_err);
  spawned.pid = pid;
  spawned.pidfd = Fd(pidfd >= 0 ? pidfd : PidfdOpen(pid));

  ChildError error{};
  ssize_t n;
  do {
    n = read(report_read.get(), &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof error)) {
    siginfo_t info{};
    while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED) != 0 && errno == EINTR) {
    }
    spawned.pid = -1;
    spawned.pidfd.Reset();
    spawned.failed_stage = error.stage;
    spawned.err = error.err;
  }
  return spawned;
}

// What KillLeftovers needs of /proc/<pid>/stat.
struct ProcStat {
  char state = '?';
  pid_t pgrp = 0;
  std::uint64_t start_time = 0;  // clock ticks after boot: with the pid, names a process
};

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[1024];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return std::nullopt;
  std::string_view text(buf, static_cast<std::size_t>(n));
  // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
  // stime cutime cstime priority nice threads itrealvalue starttime ...": comm may hold
  // spaces and parentheses, so fields are counted from the last ')'.
  std::size_t close_paren = text.rfind(')');
  if (close_paren == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close_paren + 1);
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < rest.size() && fields.size() < 20) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    std::size_t start = i;
    while (i < rest.size() && rest[i] != ' ') ++i;
    if (i > start) fields.push_back(rest.substr(start, i - start));
  }
  if (fields.size() < 20) return std::nullopt;
  ProcStat stat;
  stat.state = fields[0].front();
  auto number = [](std::string_view field, auto& out) {
    auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), out);
    return ec == std::errc() && end == field.data() + field.size();
  };
  if (!number(fields[2], stat.pgrp) || !number(fields[19], stat.start_time)) return std::nullopt;
  return stat;
}

// The processes in process group `pgid` that still run (zombies do not).
std::vector<pid_t> LiveMembersOf(pid_t pgid) {
  std::vector<pid_t> members;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return members;
  while (const dirent* entry = readdir(proc)) {
    pid_t pid = 0;
    std::string_view name = entry->d_name;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc() || end != name.data() + name.size() || pid <= 0) continue;
    std::optional<ProcStat> stat = ReadProcStat(pid);
    if (stat && stat->pgrp == pgid && stat->state != 'Z' && stat->state != 'X') {
      members.push_back(pid);
    }
  }
  closedir(proc);
  return members;
}

// Kills the process group a dead runtime recorded, and waits until none of it runs.
// While any member lives the kernel does not hand its pid out again, so when the leader
// is gone every process still in the group is one of the task's; when the pid names a
// process with another start time, the task's group is long gone and that process (and
// its group) is someone else's. Orphans of ours (this process a subreaper) are reaped.
Status KillRecordedGroup(pid_t pgid, std::uint64_t start_time, bool reaper) {
  if (pgid <= 1) return Status::Ok();
  std::optional<ProcStat> leader = ReadProcStat(pgid);
  if (leader && leader->start_time != start_time) return Status::Ok();
  std::vector<pid_t> killed{pgid};
  auto reap = [&] {
    if (!reaper) return;
    for (pid_t pid : killed) waitpid(pid, nullptr, WNOHANG);
  };
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (true) {
    if (kill(-pgid, SIGKILL) != 0 && errno == ESRCH) {
      reap();
      return Status::Ok();
    }
    std::vector<pid_t> members = LiveMembersOf(pgid);
    killed.insert(killed.end(), members.begin(), members.end());
    if (members.empty()) {
      reap();
      return Status::Ok();
    }
    if (Clock::now() >= deadline) {
      return Internal("processes of group " + std::to_string(pgid) + " survived SIGKILL (" +
                      std::to_string(members.size()) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

// ---- One Run: its directory, cgroups and steps. ----

class ShellRuntime::TaskRun {
 public:
  TaskRun(ShellRuntime& runtime, const RunRequest& request, RunObserver& observer,
          std::stop_token cancel)
      : rt_(runtime),
        request_(request),
        task_(request.task),
        observer_(observer),
        cancel_(std::move(cancel)) {}

  TaskRun(const TaskRun&) = delete;
  TaskRun& operator=(const TaskRun&) = delete;

  ~TaskRun() {
    // Processes first, then their directory. The cgroups and the directory are kept for
    // another task when every process of this one is verifiably gone (the cgroup says so:
    // without one, a process that left the process group could still write there).
    bool processes_gone = false;
    bool listing_current = false;  // nothing can have written there since the last listing
    if (cgroup_) {
      listing_current = cgroup_->emptied();
      if (!cgroup_->emptied()) cgroup_->KillAll();
      processes_gone = cgroup_->emptied();
      if (cgroup_->Reusable()) {
        rt_.GiveBackCgroup(std::move(cgroup_));
      } else {
        cgroup_.reset();  // kills and removes
      }
    }
    // Each step's process group was killed when the step ended (Finish): nothing of this
    // task is left for a restarted worker to kill.
    if (record_) {
      record_->Clear();
      rt_.GiveBackRecord(std::move(record_));
    }
    if (dir_.empty()) return;
    if (processes_gone && dir_fd_.valid() && ((listing_current && dir_empty_) || EmptyForReuse())) {
      rt_.GiveBackDir({std::move(dir_), dir_fd_.Release()});
      return;
    }
    dir_fd_.Reset();
    // Most tasks leave their directory empty: one rmdir then. (remove_all opens and
    // lists it, then tries unlink before rmdir: three more calls, two of them taking the
    // lock of the directory every task's directory is made in.)
    if (rmdir(dir_.c_str()) != 0) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      if (ec) {
        log::Warn("Could not remove a task's working directory.",
                  {{"task_id", request_.task_id}, {"dir", dir_}, {"error", ec.message()}});
      }
    }
  }

  Result<RunOutcome> Execute();

 private:
  struct Step {
    std::string_view kind;  // "pre", "main", "post"
    std::string label;      // `pre "prepare"`, for errors; empty for main
    std::string script;     // file name, for a script too long to be an argument
    const std::string* run = nullptr;
    const StringMap* aux_env = nullptr;
    const StringMap* aux_files = nullptr;  // written into the working directory first
    std::optional<Duration> timeout;
  };

  enum class End { kExited, kSignaled, kStepTimedOut, kTaskTimedOut, kCancelled };
  struct StepEnd {
    End end = End::kExited;
    int code = 0;  // exit code or signal number
    bool out_of_memory = false;
  };

  Status Prepare();
  Status MakeDir();
  // Fills sandbox_ for the runtime's sandbox and user (dir_ and dir_fd_ set).
  Status PrepareSandbox();
  // Gives a file the runtime wrote for the task to the task's user (runtime.shell.uid).
  Status GiveToTaskUser(const std::string& path) const;
  // Writes `files` into the working directory. Where the task's `workdir` refuses them,
  // a failure text naming `what` (the workdir is the task's choice); where the runtime's
  // own directory does, an error.
  Result<std::optional<std::string>> WriteFiles(const StringMap& files, std::string_view what);
  // Removes the runtime's own files from the directory; whether it is then empty.
  bool EmptyForReuse();
  Result<StepEnd> RunStep(const Step& step);
  void Supervise(pid_t pid, int pidfd, Fd& output, Clock::time_point step_deadline,
                 bool step_deadline_is_task, StepEnd& end, siginfo_t& exit_info);
  // Kills what is left of a step, reaps it, and returns the step's exit information.
  siginfo_t Finish(pid_t pid, bool exited, const siginfo_t& exit_info);
  bool ReadOutput(int fd);  // false at EOF
  void Drain(Fd& output);
  void CheckProgress();
  std::vector<std::string> StepEnv(const Step& step) const;
  std::string Describe(const Step& step, const StepEnd& end) const;
  RunOutcome Fail(std::string error, std::optional<int> exit_code = std::nullopt,
                  FailReason reason = FailReason::kNone) const;
  // Why a step that did not exit 0 failed (retry.on).
  static FailReason ReasonOf(const StepEnd& end);
  RunOutcome CancelledOutcome() const;
  Result<RunOutcome> ReadResult();

  ShellRuntime& rt_;
  const RunRequest& request_;
  const Task& task_;
  RunObserver& observer_;
  std::stop_token cancel_;

  std::string dir_;  // the per-task directory (removed or kept for reuse afterwards)
  Fd dir_fd_;        // open on dir_ (for the emptiness check that allows reuse)
  // dir_ was seen empty once the last step's processes were gone: no output, no progress.
  bool dir_empty_ = false;
  std::string output_path_;
  std::string progress_path_;
  std::string cwd_;
  std::unique_ptr<TaskCgroup> cgroup_;
  // What a restarted worker needs to kill this task should this process die: its record,
  // and the lines that name its cgroups (see KillRecorded).
  std::unique_ptr<runtime::Record> record_;
  std::string cgroup_record_;
  // What the child enters before exec (null when nothing: no sandbox, no other user), and
  // the strings it points into.
  const ChildSandbox* child_sandbox_ = nullptr;
  ChildSandbox sandbox_;
  std::vector<std::string> sandbox_dirs_;
  std::vector<const char*> sandbox_dir_ptrs_;
  std::string bind_source_;
  std::optional<rlim_t> address_space_;  // RLIMIT_AS fallback for limits.memory
  Fd wakeup_;                            // eventfd written on cancel
  Clock::time_point deadline_ = Clock::time_point::max();
  std::string tail_;  // the current step's last output
  std::optional<double> last_progress_;
};

Status ShellRuntime::TaskRun::Prepare() {
  // An idle directory of an earlier task (verified empty), else a fresh one:
  // <base>/<task id>-XXXXXX.
  if (std::optional<IdleDir> idle = rt_.TakeIdleDir()) {
    dir_ = std::move(idle->path);
    dir_fd_ = Fd(idle->fd);
  } else {
    BATON_RETURN_IF_ERROR(MakeDir());
  }
  output_path_ = dir_ + "/" + std::string(kReservedPrefix) + "output";
  progress_path_ = dir_ + "/" + std::string(kReservedPrefix) + "progress";
  cwd_ = task_.workdir.empty() ? dir_ : task_.workdir;
  BATON_RETURN_IF_ERROR(PrepareSandbox());

  const std::optional<Limits>& limits = task_.limits;
  const CgroupHost& host = rt_.cgroups_;
  CgroupLimits wanted;
  if (limits && limits->memory && host.limits_memory()) wanted.memory_bytes = limits->memory;
  if (limits && limits->cpus && host.limits_cpu()) wanted.cpus = limits->cpus;
  if (host.limits_pids()) wanted.pids_max = rt_.options_.pids_max;
  if (host.tracks_processes() || wanted.memory_bytes || wanted.cpus || wanted.pids_max > 0) {
    // Cgroups without memory or cpu limits are alike: an idle one will do.
    if (!wanted.memory_bytes && !wanted.cpus) cgroup_ = rt_.TakeIdleCgroup();
    if (!cgroup_) {
      std::string name = host.task_name_prefix() + std::to_string(++rt_.next_cgroup_);
      BATON_ASSIGN_OR_RETURN(cgroup_, host.Create(name, wanted));
    }
  }
  if (limits && limits->memory && !host.limits_memory()) {
    address_space_ = static_cast<rlim_t>(*limits->memory);
  }
  // Recorded before any process starts: with a cgroup, a crash at any moment after this
  // leaves the task findable.
  BATON_ASSIGN_OR_RETURN(record_, rt_.TakeRecord());
  cgroup_record_ = "dir 0 " + dir_ + "\n";  // removed by KillLeftovers after the kill
  if (cgroup_) {
    for (const std::string& dir : cgroup_->dirs()) {
      struct stat st {};
      if (stat(dir.c_str(), &st) != 0) continue;
      cgroup_record_ +=
          "cgroup " + std::to_string(static_cast<std::uint64_t>(st.st_ino)) + " " + dir + "\n";
    }
  }
  BATON_RETURN_IF_ERROR(record_->Write(cgroup_record_));
  return Status::Ok();
}

Status ShellRuntime::TaskRun::PrepareSandbox() {
  const ShellRuntimeOptions& options = rt_.options_;
  if (options.uid) {
    const std::string user = std::to_string(*options.uid) + ":" + std::to_string(*options.gid);
    if (!rt_.sandbox_host_.can_change_user) {
      return FailedPrecondition("runtime.shell.uid / gid are " + user +
                                ", but Baton cannot switch users (that needs CAP_SETUID and "
                                "CAP_SETGID: run Baton as root)");
    }
    if (!dir_fd_.valid() || fchown(dir_fd_.get(), *options.uid, *options.gid) != 0) {
      return ErrnoStatus("cannot give the task's directory to " + user, errno);
    }
    sandbox_.set_ids = true;
    sandbox_.uid = *options.uid;
    sandbox_.gid = *options.gid;
    child_sandbox_ = &sandbox_;
  }
  if (!rt_.sandboxed_) return Status::Ok();
  child_sandbox_ = &sandbox_;
  sandbox_.hidden = rt_.hidden_.data();
  sandbox_.hidden_count = rt_.hidden_.size();
  sandbox_.user_namespace = rt_.sandbox_host_.in_user_namespace;
  sandbox_.uid_map = rt_.uid_map_.c_str();
  sandbox_.gid_map = rt_.gid_map_.c_str();
  sandbox_.landlock_fd = rt_.landlock_fd_;
  for (const std::string& hidden : options.hidden_dirs) {
    if (dir_.size() <= hidden.size() + 1 || dir_.compare(0, hidden.size(), hidden) != 0 ||
        dir_[hidden.size()] != '/') {
      continue;
    }
    if (!dir_fd_.valid()) return Internal("the task's directory " + dir_ + " is not open");
    // The directories from the hidden one down to the task's, made in its empty stand-in.
    std::string_view rest = std::string_view(dir_).substr(hidden.size() + 1);
    std::string path = hidden;
    while (!rest.empty()) {
      const std::size_t slash = rest.find('/');
      path += "/" + std::string(rest.substr(0, slash));
      sandbox_dirs_.push_back(path);
      if (slash == std::string_view::npos) break;
      rest.remove_prefix(slash + 1);
    }
    bind_source_ = "/proc/self/fd/" + std::to_string(dir_fd_.get());
    sandbox_.bind_source = bind_source_.c_str();
    sandbox_.bind_target = dir_.c_str();
    sandbox_.bind_fd = dir_fd_.get();
    break;
  }
  for (const std::string& dir : sandbox_dirs_) sandbox_dir_ptrs_.push_back(dir.c_str());
  sandbox_.make_dirs = sandbox_dir_ptrs_.data();
  sandbox_.make_dirs_count = sandbox_dir_ptrs_.size();
  return Status::Ok();
}

Status ShellRuntime::TaskRun::GiveToTaskUser(const std::string& path) const {
  const ShellRuntimeOptions& options = rt_.options_;
  if (!options.uid) return Status::Ok();
  if (lchown(path.c_str(), *options.uid, *options.gid) != 0) {
    return ErrnoStatus("cannot give " + path + " to the task's user", errno);
  }
  return Status::Ok();
}

Result<std::optional<std::string>> ShellRuntime::TaskRun::WriteFiles(const StringMap& files,
                                                                     std::string_view what) {
  // Tork writes files with mode 0777 & ~umask; scripts among them stay executable.
  for (const auto& [name, contents] : files) {
    Status written = WriteWholeFile(cwd_ + "/" + name, contents, 0755);
    if (written.ok()) written = GiveToTaskUser(cwd_ + "/" + name);
    if (written.ok()) continue;
    if (task_.workdir.empty()) return written;  // the runtime's own directory
    return std::optional<std::string>(std::string(what) + ": " + written.message());
  }
  return std::optional<std::string>();
}

Status ShellRuntime::TaskRun::MakeDir() {
  std::string tmpl = rt_.options_.base_dir + "/" + NamePart(request_.task_id, 64) + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    int err = errno;
    if (err != ENOENT)
      return ErrnoStatus("cannot create a directory in " + rt_.options_.base_dir, err);
    std::error_code ec;  // the base directory was removed since construction
    std::filesystem::create_directories(rt_.options_.base_dir, ec);
    tmpl = rt_.options_.base_dir + "/" + NamePart(request_.task_id, 64) + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      return ErrnoStatus("cannot create a directory in " + rt_.options_.base_dir, errno);
    }
  }
  dir_ = std::move(tmpl);
  // Only for reuse: without it the directory is simply removed afterwards.
  dir_fd_ = Fd(AboveStdio(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)));
  return Status::Ok();
}

bool ShellRuntime::TaskRun::EmptyForReuse() {
  if (DirIsEmpty(dir_fd_.get())) return true;
  const std::string output = std::string(kReservedPrefix) + "output";
  const std::string progress = std::string(kReservedPrefix) + "progress";
  // Not a directory's (flags 0): one the task made there leaves it non-empty.
  unlinkat(dir_fd_.get(), output.c_str(), 0);
  unlinkat(dir_fd_.get(), progress.c_str(), 0);
  return DirIsEmpty(dir_fd_.get());
}

Result<RunOutcome> ShellRuntime::TaskRun::Execute() {
  if (cancel_.stop_requested()) return CancelledOutcome();

  // Mistakes in the task, and what this runtime cannot do, fail it before anything runs.
  if (std::optional<std::string> unsupported = Unsupported(task_)) return Fail(*unsupported);
  if (auto error = BadFileName(task_.files)) return Fail(*error);
  if (auto error = BadEnvName(task_.env)) return Fail(*error);
  for (const auto* list : {&task_.pre, &task_.post}) {
    for (const AuxTask& aux : *list) {
      if (auto error = BadEnvName(aux.env)) return Fail(*error);
      if (auto error = BadFileName(aux.files)) return Fail(*error);
    }
  }
  if (!task_.workdir.empty()) {
    // As a container's working directory: absolute, and made when missing.
    if (task_.workdir.front() != '/') {
      return Fail("workdir \"" + task_.workdir + "\" is not an absolute path");
    }
    // The directories made here belong to the task's user (runtime.shell.uid), as its own
    // directory does.
    std::vector<std::filesystem::path> made;
    std::error_code ec;
    for (std::filesystem::path p = task_.workdir;
         p.has_relative_path() && !std::filesystem::exists(p, ec); p = p.parent_path()) {
      made.push_back(p);
    }
    std::filesystem::create_directories(task_.workdir, ec);
    if (rt_.options_.uid) {
      for (const std::filesystem::path& dir : made) {
        if (lchown(dir.c_str(), *rt_.options_.uid, *rt_.options_.gid) != 0) {
          return Fail("workdir \"" + task_.workdir + "\": cannot give " + dir.string() +
                      " to the task's user: " + ErrnoText(errno));
        }
      }
    }
    struct stat st {};
    if (stat(task_.workdir.c_str(), &st) != 0) {
      return Fail("workdir \"" + task_.workdir + "\": " + (ec ? ec.message() : ErrnoText(errno)));
    }
    if (!S_ISDIR(st.st_mode)) return Fail("workdir \"" + task_.workdir + "\" is not a directory");
  }

  BATON_RETURN_IF_ERROR(Prepare());
  BATON_ASSIGN_OR_RETURN(std::optional<std::string> written, WriteFiles(task_.files, "files"));
  if (written) return Fail(*written);

  // Cancellation wakes the poll loop through an eventfd. The callback is destroyed before
  // the fd (declared after it; the destructor waits for a running callback).
  if (cancel_.stop_possible()) {
    wakeup_ = Fd(AboveStdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)));
    if (!wakeup_.valid()) return ErrnoStatus("eventfd", errno);
  }
  int wakeup_fd = wakeup_.get();
  std::stop_callback on_cancel(cancel_, [wakeup_fd] {
    if (wakeup_fd >= 0) {
      std::uint64_t one = 1;
      ssize_t ignored = write(wakeup_fd, &one, sizeof one);
      (void)ignored;
    }
  });

  if (task_.timeout && task_.timeout->count() > 0) deadline_ = Clock::now() + *task_.timeout;

  std::vector<Step> steps;
  steps.reserve(task_.pre.size() + 1 + task_.post.size());
  auto add_aux = [&steps](std::string_view kind, const std::vector<AuxTask>& list) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      const AuxTask& aux = list[i];
      Step step;
      step.kind = kind;
      step.label = AuxLabel(kind, i, aux);
      step.script = std::string(kind) + "-" + std::to_string(i + 1) + ".sh";
      step.run = &aux.run;
      step.aux_env = &aux.env;
      step.aux_files = &aux.files;
      step.timeout = aux.timeout;
      steps.push_back(std::move(step));
    }
  };
  add_aux("pre", task_.pre);
  Step main_step;
  main_step.kind = "main";
  main_step.script = "main.sh";
  main_step.run = &task_.run;
  steps.push_back(std::move(main_step));
  add_aux("post", task_.post);

  RunOutcome completed;
  for (const Step& step : steps) {
    if (step.aux_files != nullptr) {
      BATON_ASSIGN_OR_RETURN(std::optional<std::string> aux_written,
                             WriteFiles(*step.aux_files, step.label + ": files"));
      if (aux_written) return Fail(*aux_written);
    }
    Result<StepEnd> end = RunStep(step);
    if (!end.ok()) return end.status();
    if (end->end == End::kCancelled) return CancelledOutcome();
    if (end->end != End::kExited || end->code != 0) {
      std::optional<int> code;
      if (end->end == End::kExited) code = end->code;
      if (end->end == End::kSignaled) code = 128 + end->code;
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

std::vector<std::string> ShellRuntime::TaskRun::StepEnv(const Step& step) const {
  // Later layers win: PATH, HOME and SHELL, passed-through variables, the task's env, the
  // step's env, and the runtime's own variables.
  std::map<std::string_view, std::string_view> env;
  env["PATH"] = rt_.path_;
  env["HOME"] = rt_.home_.empty() ? std::string_view(dir_) : std::string_view(rt_.home_);
  // The shell running the step, as a login sets it. Without it bash looks the user up in
  // the password database (nsswitch.conf, /etc/passwd) at every start, for a value nothing
  // here uses: ~0.1 ms of each task's start.
  env["SHELL"] = rt_.options_.bash;
  for (const auto& [name, value] : rt_.passed_env_) env[name] = value;
  for (const auto& [name, value] : task_.env) env[name] = value;
  if (step.aux_env != nullptr) {
    for (const auto& [name, value] : *step.aux_env) env[name] = value;
  }
  env["BATON_OUTPUT"] = output_path_;
  env["BATON_PROGRESS"] = progress_path_;
  env["TORK_OUTPUT"] = output_path_;
  env["TORK_PROGRESS"] = progress_path_;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) {
    std::string entry;
    entry.reserve(name.size() + 1 + value.size());
    entry.append(name).append("=").append(value);
    out.push_back(std::move(entry));
  }
  return out;
}

Result<ShellRuntime::TaskRun::StepEnd> ShellRuntime::TaskRun::RunStep(const Step& step) {
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

  // `bash -c -- script`: the "--" keeps a script that starts with '-' from being read as
  // options. execve does not write to argv; the const_cast only fits its signature.
  std::string argv0 = "bash";
  std::string dash_c = "-c";
  std::string end_of_options = "--";
  std::string script_file;
  std::array<char*, 5> argv{};
  if (step.run->size() <= kMaxInlineScript) {
    argv = {argv0.data(), dash_c.data(), end_of_options.data(),
            const_cast<char*>(step.run->c_str()), nullptr};
  } else {
    script_file = dir_ + "/" + std::string(kReservedPrefix) + step.script;
    BATON_RETURN_IF_ERROR(WriteWholeFile(script_file, *step.run, 0600));
    BATON_RETURN_IF_ERROR(GiveToTaskUser(script_file));
    argv = {argv0.data(), script_file.data(), nullptr, nullptr, nullptr};
  }

  // Everything the child needs, prepared before fork.
  std::vector<std::string> env = StepEnv(step);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  Fd output(AboveStdio(out[0]));
  Fd output_write(AboveStdio(out[1]));
  if (!output.valid() || !output_write.valid()) return ErrnoStatus("pipe", errno);
  // Only our end is non-blocking: the task's stdout must stay an ordinary blocking pipe.
  fcntl(output.get(), F_SETFL, O_RDONLY | O_NONBLOCK);  // a fresh pipe end has no other flag

  ChildSpec spec;
  spec.path = rt_.options_.bash.c_str();
  spec.argv = argv.data();
  spec.envp = envp.data();
  spec.cwd = cwd_.c_str();
  spec.stdin_fd = rt_.dev_null_;
  spec.output_fd = output_write.get();
  spec.sandbox = child_sandbox_;
  if (address_space_) {
    spec.limit_address_space = true;
    spec.address_space = *address_space_;
  }
  const std::vector<int> no_fds;

  std::optional<std::int64_t> oom_before = cgroup_ ? cgroup_->OomKills() : std::nullopt;
  if (cgroup_) cgroup_->MarkInUse();
  dir_empty_ = false;
  tail_.clear();
  Result<Spawned> spawned =
      Spawn(spec, cgroup_ ? cgroup_->v1_tasks_fds() : no_fds, cgroup_ ? cgroup_->v2_dir_fd() : -1,
            cgroup_ ? cgroup_->v2_procs_fd() : -1, rt_.clone3_usable_);
  output_write.Reset();  // the child has its copy; EOF must be possible
  if (!spawned.ok()) return spawned.status();
  if (spawned->pid < 0) {
    switch (spawned->failed_stage) {
      case kChdir:
        end.end = End::kExited;
        end.code = 127;
        tail_ = "cannot enter workdir " + cwd_ + ": " + ErrnoText(spawned->err);
        return end;
      case kJoinCgroup:
        return ErrnoStatus("cannot join the task's cgroup", spawned->err);
      case kExec:
        return ErrnoStatus("cannot run " + rt_.options_.bash, spawned->err);
      case kSandboxMount:
      case kSandboxLandlock:
      case kSandboxUser:
        return ErrnoStatus(
            SandboxStageText(static_cast<SandboxStage>(spawned->failed_stage - kSandboxMount + 1)),
            spawned->err);
      default:
        return ErrnoStatus(
            "cannot start the task process (stage " + std::to_string(spawned->failed_stage) + ")",
            spawned->err);
    }
  }
  pid_t pid = spawned->pid;
  Fd pidfd = std::move(spawned->pidfd);
  // The step's process group, by its leader's pid and start time (so that a restarted
  // worker never kills another process that got the pid later). Without a cgroup, a crash
  // between the start and this write leaves the step unrecorded.
  if (std::optional<ProcStat> stat = ReadProcStat(pid)) {
    Status recorded = record_->Write("group " + std::to_string(pid) + " " +
                                     std::to_string(stat->start_time) + "\n" + cgroup_record_);
    if (!recorded.ok()) {
      log::Warn("Could not record a running task.",
                {{"task_id", request_.task_id}, {"error", recorded.message()}});
    }
  }

  siginfo_t exit_info{};
  Supervise(pid, pidfd.get(), output, step_deadline, step_deadline_is_task, end, exit_info);
  bool exited = end.end == End::kExited;
  siginfo_t info = Finish(pid, exited, exit_info);
  Drain(output);
  // One directory read tells whether there is any output or progress file to open.
  dir_empty_ = dir_fd_.valid() && DirIsEmpty(dir_fd_.get());
  if (!dir_empty_) CheckProgress();

  if (exited) {
    if (info.si_code == CLD_EXITED) {
      end.code = info.si_status;
    } else {
      end.end = End::kSignaled;
      end.code = info.si_status;
    }
    bool failed = end.end != End::kExited || end.code != 0;
    if (failed && cgroup_) {
      std::optional<std::int64_t> oom_after = cgroup_->OomKills();
      end.out_of_memory = oom_after && oom_before && *oom_after > *oom_before;
    }
  }
  return end;
}

void ShellRuntime::TaskRun::Supervise(pid_t pid, int pidfd, Fd& output,
                                      Clock::time_point step_deadline, bool step_deadline_is_task,
                                      StepEnd& end, siginfo_t& exit_info) {
  const auto interval = rt_.options_.progress_interval;
  Clock::time_point next_progress = Clock::now() + interval;
  while (true) {
    if (cancel_.stop_requested()) {
      end.end = End::kCancelled;
      return;
    }
    Clock::time_point now = Clock::now();
    if (now >= step_deadline) {
      end.end = step_deadline_is_task ? End::kTaskTimedOut : End::kStepTimedOut;
      return;
    }
    if (now >= next_progress) {
      CheckProgress();
      next_progress = now + interval;
    }
    std::int64_t wait_ms = RoundUpMillis(std::min(step_deadline, next_progress) - now);
    if (pidfd < 0) wait_ms = std::min<std::int64_t>(wait_ms, kExitPollMillis);
    wait_ms = std::clamp<std::int64_t>(wait_ms, 0, std::numeric_limits<int>::max());

    std::array<pollfd, 3> fds{};
    nfds_t count = 0;
    int output_index = -1;
    if (output.valid()) {
      output_index = static_cast<int>(count);
      fds[count++] = {output.get(), POLLIN, 0};
    }
    int pidfd_index = -1;
    if (pidfd >= 0) {
      pidfd_index = static_cast<int>(count);
      fds[count++] = {pidfd, POLLIN, 0};
    }
    if (wakeup_.valid()) fds[count++] = {wakeup_.get(), POLLIN, 0};
    int ready = poll(fds.data(), count, static_cast<int>(wait_ms));
    if (ready < 0 && errno != EINTR) {
      log::Warn("poll failed while a task ran.", {{"error", ErrnoText(errno)}});
    }
    if (output_index >= 0 && fds[static_cast<std::size_t>(output_index)].revents != 0) {
      // The task may close its stdout and go on running; then only the exit matters.
      if (!ReadOutput(output.get())) output.Reset();
    }
    // The pidfd turns readable once the process has exited: until then waitid would
    // find nothing (its output closing usually comes first).
    if (pidfd_index >= 0 && fds[static_cast<std::size_t>(pidfd_index)].revents == 0) continue;
    // WNOWAIT: the exited process stays a zombie, so its pid (and process group id) cannot
    // be reused before Finish has killed the rest of the group.
    exit_info = {};
    if (waitid(P_PID, static_cast<id_t>(pid), &exit_info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        exit_info.si_pid == pid) {
      end.end = End::kExited;
      return;
    }
  }
}

siginfo_t ShellRuntime::TaskRun::Finish(pid_t pid, bool exited, const siginfo_t& exit_info) {
  // The step's session is its process group (setsid): kill it, whether the step timed out
  // or left background processes behind after exiting. With cgroups, also everything that
  // left the group.
  kill(-pid, SIGKILL);
  std::vector<pid_t> stragglers;
  if (cgroup_) stragglers = cgroup_->KillAll();

  // Reap the step's process and, where this process is their reaper, the rest of its group.
  siginfo_t info = exit_info;
  while (true) {
    siginfo_t reaped{};
    if (waitid(P_PGID, static_cast<id_t>(pid), &reaped, WEXITED) != 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: none of our children are left in the group
    }
    if (reaped.si_pid == pid && !exited) info = reaped;
  }
  if (rt_.is_reaper_) {
    // Killed processes that had left the group were reparented to us; they leave the
    // cgroup slightly before their parent's exit hands them over, so allow a moment.
    auto give_up = Clock::now() + std::chrono::milliseconds(100);
    for (pid_t straggler : stragglers) {
      if (straggler == pid) continue;
      while (true) {
        if (waitpid(straggler, nullptr, WNOHANG) == straggler) break;
        if (kill(straggler, 0) != 0 && errno == ESRCH) break;
        if (Clock::now() >= give_up) break;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  }
  return info;
}

bool ShellRuntime::TaskRun::ReadOutput(int fd) {
  char buf[kReadChunk];
  for (int i = 0; i < kReadsPerWakeup; ++i) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    if (n == 0) return false;
    std::string_view chunk(buf, static_cast<std::size_t>(n));
    tail_.append(chunk);
    if (tail_.size() > 2 * kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
    observer_.OnLog(chunk);
  }
  return true;
}

void ShellRuntime::TaskRun::Drain(Fd& output) {
  auto give_up = Clock::now() + kDrainWait;
  while (output.valid()) {
    std::int64_t wait_ms = RoundUpMillis(give_up - Clock::now());
    if (wait_ms <= 0) break;
    pollfd fd{output.get(), POLLIN, 0};
    int ready = poll(&fd, 1, static_cast<int>(wait_ms));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    if (!ReadOutput(output.get())) break;
  }
  output.Reset();
}

void ShellRuntime::TaskRun::CheckProgress() {
  std::optional<double> value = ReadProgressFile(progress_path_);
  if (!value || value == last_progress_) return;
  last_progress_ = value;
  observer_.OnProgress(*value);
}

Result<RunOutcome> ShellRuntime::TaskRun::ReadResult() {
  if (dir_empty_) {  // nothing written: an empty result
    RunOutcome outcome;
    outcome.exit_code = 0;
    return outcome;
  }
  return ReadResultFile(output_path_, request_.max_result_bytes);
}

std::string ShellRuntime::TaskRun::Describe(const Step& step, const StepEnd& end) const {
  std::string what;
  switch (end.end) {
    case End::kExited:
      what = "exit code " + std::to_string(end.code);
      break;
    case End::kSignaled:
      what = "killed by signal " + std::to_string(end.code);
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
  }
  if (end.out_of_memory) {
    what = "out of memory: exceeded the memory limit of " + FormatMemory(*task_.limits->memory);
  }
  return StepError(step.label, what, tail_, rt_.options_.output_tail_lines);
}

RunOutcome ShellRuntime::TaskRun::Fail(std::string error, std::optional<int> exit_code,
                                       FailReason reason) const {
  return FailedOutcome(std::move(error), exit_code, reason);
}

FailReason ShellRuntime::TaskRun::ReasonOf(const StepEnd& end) {
  return runtime::StepFailReason(end.out_of_memory,
                                 end.end == End::kStepTimedOut || end.end == End::kTaskTimedOut,
                                 end.end == End::kExited || end.end == End::kSignaled);
}

RunOutcome ShellRuntime::TaskRun::CancelledOutcome() const { return runtime::CancelledOutcome(); }

// ---- ShellRuntime ----

ShellRuntime::ShellRuntime(ShellRuntimeOptions options) : options_(std::move(options)) {
  if (options_.base_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    options_.base_dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/baton-tasks";
  }
  // Steps run in their own directories: a relative base would make $BATON_OUTPUT (and the
  // task directory) name something else there.
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(options_.base_dir, ec);
  if (!ec) options_.base_dir = absolute.lexically_normal().string();
  while (options_.base_dir.size() > 1 && options_.base_dir.back() == '/') {
    options_.base_dir.pop_back();
  }
  std::filesystem::create_directories(options_.base_dir, ec);  // Health reports failures
  if (!options_.hidden_dirs.empty()) {
    // Without symbolic links, as the hidden directories are (SetUpSandbox).
    std::filesystem::path canonical = std::filesystem::weakly_canonical(options_.base_dir, ec);
    if (!ec) options_.base_dir = canonical.string();
  }
  // Private to Baton's user: the tasks' directories are theirs, not every local user's. A
  // task of another user reaches its own directory through its mount namespace, or
  // without one through a parent it may only traverse.
  const bool traversable = options_.uid && options_.hidden_dirs.empty();
  chmod(options_.base_dir.c_str(), traversable ? 0711 : 0700);
  Result<std::unique_ptr<runtime::Incarnation>> incarnation =
      runtime::Incarnation::Open(options_.base_dir);
  if (incarnation.ok()) {
    incarnation_ = std::move(*incarnation);
  } else {
    incarnation_status_ = incarnation.status();  // Run and KillLeftovers return it
  }

  const char* path = std::getenv("PATH");
  path_ = path != nullptr && *path != '\0' ? path : options_.default_path;
  const char* home = std::getenv("HOME");
  if (home != nullptr) home_ = home;
  for (const std::string& name : options_.pass_env) {
    if (const char* value = std::getenv(name.c_str())) passed_env_.emplace_back(name, value);
  }
  dev_null_ = AboveStdio(open("/dev/null", O_RDONLY | O_CLOEXEC));
  SetUpSandbox();

  if (options_.enable_cgroups) {
    cgroups_ = CgroupHost::Detect(options_.cgroup_parent);
    log::Debug("Shell runtime cgroups.", {{"cgroups", cgroups_.Describe()}});
  }
  // Once, here: what the host's cgroups cannot do for tasks.
  std::vector<std::string_view> gaps;
  if (!cgroups_.limits_memory())
    gaps.push_back("limits.memory falls back to RLIMIT_AS per process");
  if (!cgroups_.limits_cpu()) gaps.push_back("limits.cpus is not enforced");
  if (!cgroups_.limits_pids() && options_.pids_max > 0) {
    gaps.push_back("the pids cap is not enforced");
  }
  if (!cgroups_.tracks_processes()) {
    gaps.push_back("processes that leave a task's process group are not killed with it");
  }
  if (!gaps.empty()) {
    bool none = !cgroups_.limits_memory() && !cgroups_.limits_cpu() && !cgroups_.limits_pids() &&
                !cgroups_.tracks_processes();
    std::string message = none ? "No usable cgroups: " : "Some cgroup features are unusable: ";
    for (std::size_t i = 0; i < gaps.size(); ++i) {
      message.append(i == 0 ? "" : "; ").append(gaps[i]);
    }
    message += ".";
    log::Warn(message, {{"cgroups", options_.enable_cgroups ? cgroups_.Describe() : "disabled"}});
  }

  if (options_.reap_orphans) prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  int reaper = 0;
  prctl(PR_GET_CHILD_SUBREAPER, &reaper, 0, 0, 0);
  is_reaper_ = reaper != 0 || getpid() == 1;
}

void ShellRuntime::SetUpSandbox() {
  sandbox_host_ = ProbeSandboxHost(options_.hidden_dirs.empty() ? "" : options_.base_dir);
  if (options_.hidden_dirs.empty()) return;
  // Canonical, as the task's directory is (mount follows symbolic links; the prefix test
  // in Prepare must see the same spelling).
  for (std::string& dir : options_.hidden_dirs) {
    std::error_code ec;
    std::filesystem::path canonical = std::filesystem::weakly_canonical(dir, ec);
    if (!ec) dir = canonical.string();
  }
  if (!sandbox_host_.mount_namespaces) {
    sandbox_unavailable_ =
        std::string("this process cannot make a mount namespace of its own (") +
        (sandbox_host_.in_user_namespace
             ? "without CAP_SYS_ADMIN it needs a user namespace, which the kernel refused: "
             : "") +
        sandbox_host_.mount_namespaces_error + ")";
    return;
  }
  for (const std::string& dir : options_.hidden_dirs) hidden_.push_back(dir.c_str());
  sandboxed_ = true;
  uid_map_ = UserNamespaceMap(geteuid());
  gid_map_ = UserNamespaceMap(getegid());
  if (sandbox_host_.landlock_abi > 0) {
    Result<int> ruleset = MakeLandlockRuleset(sandbox_host_.landlock_abi);
    if (ruleset.ok()) {
      landlock_fd_ = AboveStdio(*ruleset);
    } else {
      log::Warn("Landlock is unavailable for tasks.", {{"error", ruleset.status().message()}});
    }
  }
}

ShellRuntime::~ShellRuntime() {
  idle_cgroups_.clear();  // each removes itself
  for (IdleDir& dir : idle_dirs_) {
    close(dir.fd);
    if (rmdir(dir.path.c_str()) != 0 && errno != ENOENT) {
      log::Warn("Could not remove a task's working directory.",
                {{"dir", dir.path}, {"error", ErrnoText(errno)}});
    }
  }
  if (dev_null_ >= 0) close(dev_null_);
  if (landlock_fd_ >= 0) close(landlock_fd_);
  idle_records_.clear();  // before the incarnation's directory goes
  incarnation_.reset();
}

Result<std::unique_ptr<runtime::Record>> ShellRuntime::TakeRecord() {
  if (!incarnation_) return incarnation_status_;
  {
    MutexLock lock(idle_mu_);
    if (!idle_records_.empty()) {
      std::unique_ptr<runtime::Record> record = std::move(idle_records_.back());
      idle_records_.pop_back();
      return record;
    }
  }
  return incarnation_->NewRecord("task-" + std::to_string(++next_record_));
}

void ShellRuntime::GiveBackRecord(std::unique_ptr<runtime::Record> record) {
  MutexLock lock(idle_mu_);
  if (idle_records_.size() < kMaxIdle) idle_records_.push_back(std::move(record));
  // else it is closed and removed as it goes
}

Status ShellRuntime::KillRecorded(const std::string& record) {
  // Lines: "dir 0 <task directory>", "cgroup <inode> <path>" for each of the task's
  // cgroups, then "group <pgid> <leader start time>" once a step has started.
  std::vector<std::string> failures;
  std::optional<std::pair<pid_t, std::uint64_t>> group;
  std::string task_dir;
  std::size_t pos = 0;
  while (pos < record.size()) {
    std::size_t end = record.find('\n', pos);
    if (end == std::string::npos) end = record.size();
    std::string_view line(record.data() + pos, end - pos);
    pos = end + 1;
    std::size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    std::string_view kind = line.substr(0, space);
    std::string_view rest = line.substr(space + 1);
    std::size_t second = rest.find(' ');
    if (second == std::string_view::npos) continue;
    std::string_view first_value = rest.substr(0, second);
    std::string_view second_value = rest.substr(second + 1);
    if (kind == "cgroup") {
      std::uint64_t inode = 0;
      std::from_chars(first_value.data(), first_value.data() + first_value.size(), inode);
      std::string dir(second_value);
      // Only a task cgroup under our parent that is still the one recorded (a cgroup of
      // the same name made later has another inode).
      std::filesystem::path path(dir);
      struct stat st {};
      if (path.parent_path().filename() != options_.cgroup_parent ||
          stat((dir + "/cgroup.procs").c_str(), &st) != 0 || stat(dir.c_str(), &st) != 0 ||
          static_cast<std::uint64_t>(st.st_ino) != inode) {
        continue;
      }
      Status killed = KillAndRemoveCgroup(dir);
      if (!killed.ok()) failures.push_back(killed.message());
    } else if (kind == "dir") {
      std::filesystem::path path(second_value);
      if (path.parent_path() == options_.base_dir) task_dir = path.string();
    } else if (kind == "group") {
      pid_t pgid = 0;
      std::uint64_t start = 0;
      std::from_chars(first_value.data(), first_value.data() + first_value.size(), pgid);
      std::from_chars(second_value.data(), second_value.data() + second_value.size(), start);
      group = {pgid, start};
    }
  }
  // After the cgroups (which hold the group too, where there are any): what is left of the
  // group is what no cgroup tracked.
  if (group) {
    Status killed = KillRecordedGroup(group->first, group->second, is_reaper_);
    if (!killed.ok()) failures.push_back(killed.message());
  }
  if (!failures.empty()) {
    std::string text;
    for (const std::string& failure : failures) text += (text.empty() ? "" : "; ") + failure;
    return Internal(text);
  }
  if (!task_dir.empty()) {  // only once nothing can write there any more
    std::error_code ec;
    std::filesystem::remove_all(task_dir, ec);
  }
  return Status::Ok();
}

Status ShellRuntime::KillLeftovers() {
  if (!incarnation_) return incarnation_status_;
  std::vector<std::string> failures;
  std::size_t tasks = 0;
  for (runtime::DeadIncarnation& dead : incarnation_->FindDead()) {
    bool clean = true;
    for (const std::string& record : dead.Records()) {
      ++tasks;
      Status killed = KillRecorded(record);
      if (!killed.ok()) {
        clean = false;
        failures.push_back(killed.message());
      }
    }
    if (clean) dead.Forget();  // else kept: the next start tries again
  }
  if (tasks > 0) {
    log::Warn("Killed the processes of tasks that an earlier run left running.",
              {{"tasks", std::to_string(tasks)}, {"base_dir", options_.base_dir}});
  }
  if (failures.empty()) return Status::Ok();
  std::string text;
  for (const std::string& failure : failures) text += (text.empty() ? "" : "; ") + failure;
  return Internal("cannot kill the tasks an earlier run left running: " + text);
}

std::unique_ptr<TaskCgroup> ShellRuntime::TakeIdleCgroup() {
  MutexLock lock(idle_mu_);
  if (idle_cgroups_.empty()) return nullptr;
  std::unique_ptr<TaskCgroup> cgroup = std::move(idle_cgroups_.back());
  idle_cgroups_.pop_back();
  return cgroup;
}

void ShellRuntime::GiveBackCgroup(std::unique_ptr<TaskCgroup> cgroup) {
  {
    MutexLock lock(idle_mu_);
    if (idle_cgroups_.size() < kMaxIdle) {
      idle_cgroups_.push_back(std::move(cgroup));
      return;
    }
  }
  cgroup.reset();  // removed outside the lock
}

std::optional<ShellRuntime::IdleDir> ShellRuntime::TakeIdleDir() {
  while (true) {
    IdleDir dir;
    {
      MutexLock lock(idle_mu_);
      if (idle_dirs_.empty()) return std::nullopt;
      dir = std::move(idle_dirs_.back());
      idle_dirs_.pop_back();
    }
    // Verified again now: it was empty when given back, but any process of the same user
    // can write there meanwhile. Still ours (mode 0700, nothing below it) and still empty;
    // else it is removed and the next one tried.
    struct stat st {};
    if (fstat(dir.fd, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700 &&
        st.st_uid == geteuid() && st.st_nlink == 2 && DirIsEmpty(dir.fd)) {
      return dir;
    }
    close(dir.fd);
    std::error_code ec;
    std::filesystem::remove_all(dir.path, ec);
  }
}

void ShellRuntime::GiveBackDir(IdleDir dir) {
  {
    MutexLock lock(idle_mu_);
    if (idle_dirs_.size() < kMaxIdle) {
      idle_dirs_.push_back(std::move(dir));
      return;
    }
  }
  close(dir.fd);
  rmdir(dir.path.c_str());
}

void ShellRuntime::WarnImageIgnoredOnce(const RunRequest& request) {
  bool has_image = !request.task.image.empty();
  for (const auto& aux : request.task.pre) has_image = has_image || !aux.image.empty();
  for (const auto& aux : request.task.post) has_image = has_image || !aux.image.empty();
  if (!has_image) return;
  {
    MutexLock lock(warned_mu_);
    if (!warned_jobs_.insert(request.job_id).second) return;
    warned_order_.push_back(request.job_id);
    if (warned_order_.size() > kMaxWarnedJobs) {
      warned_jobs_.erase(warned_order_.front());
      warned_order_.pop_front();
    }
  }
  log::Warn("The shell runtime ignores `image`: tasks run on the worker's host.",
            {{"job_id", request.job_id}, {"task_id", request.task_id}});
}

Result<RunOutcome> ShellRuntime::Run(const RunRequest& request, RunObserver& observer,
                                     std::stop_token cancel) {
  WarnImageIgnoredOnce(request);
  TaskRun run(*this, request, observer, std::move(cancel));
  return run.Execute();
}

Status ShellRuntime::Health() {
  if (access(options_.bash.c_str(), X_OK) != 0) {
    return FailedPrecondition("bash is not executable at " + options_.bash + ": " +
                              ErrnoText(errno));
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.base_dir, ec);
  if (access(options_.base_dir.c_str(), W_OK | X_OK) != 0) {
    return FailedPrecondition("the task directory " + options_.base_dir +
                              " is not writable: " + ErrnoText(errno));
  }
  if (dev_null_ < 0) return FailedPrecondition("cannot open /dev/null");
  return Status::Ok();
}

}  // namespace baton

#include "runtime/shell/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <utility>

#include "base/log.h"
#include "runtime/common/task_files.h"

namespace baton {
namespace {

constexpr std::int64_t kCpuPeriodMicros = 100000;
// How long to wait for killed processes to leave the cgroup before giving up (a process
// stuck in uninterruptible sleep can take this long; normally it is a millisecond).
constexpr auto kKillWait = std::chrono::seconds(5);

using runtime::ErrnoText;

// Reads a small pseudo-file (cgroup and proc files are a page or so).
std::optional<std::string> ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

Status WriteSmallFile(const std::string& path, std::string_view text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Internal("open " + path + ": " + ErrnoText(errno));
  ssize_t n;
  do {
    n = write(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  int err = errno;
  close(fd);
  if (n < 0) return Internal("write " + std::string(text) + " to " + path + ": " + ErrnoText(err));
  return Status::Ok();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

bool Contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::vector<std::string> SplitWords(std::string_view text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
    std::size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\n' && text[i] != '\t') ++i;
    if (i > start) words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

// Mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountField(std::string_view field) {
  auto is_octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && is_octal(field[i + 1]) &&
        is_octal(field[i + 2]) && is_octal(field[i + 3])) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
      continue;
    }
    out.push_back(field[i]);
  }
  return out;
}

// Mount options that appear among a v1 mount's controllers.
bool IsMountOption(std::string_view option) {
  for (std::string_view known : {"rw", "ro", "xattr", "noprefix", "clone_children",
                                 "cpuset_v2_mode", "favordynmods", "nsdelegate"}) {
    if (option == known) return true;
  }
  return false;
}

// This process's pid namespace (its nsfs inode): pids in cgroup names mean something
// only within it (workers in containers share the host's cgroup hierarchy).
std::string PidNamespace() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0) return "0";
  return std::to_string(static_cast<std::uint64_t>(st.st_ino));
}

// Removes the task cgroups "<pid namespace>-<pid>-<n>" in `dir` left by a process of this
// pid namespace that is gone (one that crashed with idle ones kept for reuse, or with
// tasks running). rmdir fails on a cgroup that holds processes, so only empty ones go.
void RemoveStaleTaskCgroups(const std::string& dir, const std::string& pid_namespace) {
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return;
  const std::string ours = pid_namespace + "-";
  std::vector<std::string> stale;
  while (const dirent* entry = readdir(listing)) {
    std::string_view name = entry->d_name;
    if (name.substr(0, ours.size()) != ours) continue;
    std::string_view rest = name.substr(ours.size());
    std::size_t dash = rest.find('-');
    if (dash == std::string_view::npos || dash == 0) continue;
    pid_t pid = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + dash, pid);
    if (ec != std::errc() || end != rest.data() + dash || pid <= 0) continue;
    if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive
    stale.emplace_back(name);
  }
  closedir(listing);
  for (const std::string& name : stale) rmdir((dir + "/" + name).c_str());
}

// Creates `dir` if needed and checks that a child cgroup can be created in it.
bool PrepareParent(const std::string& dir, const std::string& pid_namespace) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  RemoveStaleTaskCgroups(dir, pid_namespace);
  std::string probe = dir + "/.probe-" + std::to_string(getpid());
  if (mkdir(probe.c_str(), 0755) != 0) return false;
  rmdir(probe.c_str());
  return true;
}

// "key value" lines (memory.events, memory.oom_control): the value of `key`.
std::optional<std::int64_t> FindCounter(std::string_view text, std::string_view key) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      std::string_view num = line.substr(key.size() + 1);
      std::int64_t value = 0;
      auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
      if (ec == std::errc()) return value;
    }
    pos = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::vector<CgroupMount> ParseCgroupMounts(std::string_view mountinfo) {
  std::vector<CgroupMount> mounts;
  std::size_t pos = 0;
  while (pos < mountinfo.size()) {
    std::size_t end = mountinfo.find('\n', pos);
    if (end == std::string_view::npos) end = mountinfo.size();
    std::vector<std::string> fields = SplitWords(mountinfo.substr(pos, end - pos));
    pos = end + 1;
    // id parent major:minor root mount-point options [optional...] - fstype source super
    auto sep = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || sep == fields.end() || fields.end() - sep < 4) continue;
    const std::string& fstype = sep[1];
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    CgroupMount mount;
    mount.mount_point = UnescapeMountField(fields[4]);
    mount.v2 = fstype == "cgroup2";
    if (!mount.v2) {
      std::string_view options = sep[3];
      std::size_t i = 0;
      while (i <= options.size()) {
        std::size_t comma = options.find(',', i);
        if (comma == std::string_view::npos) comma = options.size();
        std::string_view option = options.substr(i, comma - i);
        if (!option.empty() && option.find('=') == std::string_view::npos &&
            !IsMountOption(option)) {
          mount.controllers.emplace_back(option);
        }
        i = comma + 1;
      }
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

CgroupHost CgroupHost::Detect(const std::string& parent) {
  CgroupHost host;
  const std::string pid_namespace = PidNamespace();
  host.task_name_prefix_ = pid_namespace + "-" + std::to_string(getpid()) + "-";
  std::optional<std::string> mountinfo = ReadSmallFile("/proc/self/mountinfo");
  if (!mountinfo) return host;
  std::vector<CgroupMount> mounts = ParseCgroupMounts(*mountinfo);

  std::vector<std::string> v2_enabled;
  for (const CgroupMount& mount : mounts) {
    if (!mount.v2) continue;
    std::string dir = mount.mount_point + "/" + parent;
    if (!PrepareParent(dir, pid_namespace)) break;
    // Controllers reach our parent only when enabled in the mount root's subtree_control;
    // enable the ones we want that are available but off (allowed at the root; where the
    // mount root is not the real root this may fail, and then they stay off).
    std::vector<std::string> root_available =
        SplitWords(ReadSmallFile(mount.mount_point + "/cgroup.controllers").value_or(""));
    std::vector<std::string> root_enabled =
        SplitWords(ReadSmallFile(mount.mount_point + "/cgroup.subtree_control").value_or(""));
    for (const char* c : {"memory", "cpu", "pids"}) {
      if (Contains(root_available, c) && !Contains(root_enabled, c)) {
        (void)WriteSmallFile(mount.mount_point + "/cgroup.subtree_control", std::string("+") + c);
      }
    }
    std::vector<std::string> available =
        SplitWords(ReadSmallFile(dir + "/cgroup.controllers").value_or(""));
    for (const char* c : {"memory", "cpu", "pids"}) {
      if (Contains(available, c)) {
        (void)WriteSmallFile(dir + "/cgroup.subtree_control", std::string("+") + c);
      }
    }
    v2_enabled = SplitWords(ReadSmallFile(dir + "/cgroup.subtree_control").value_or(""));
    host.v2_parent_ = dir;
    host.v2_kill_ = Exists(dir + "/cgroup.kill");
    break;
  }

  auto pick = [&](const char* controller, const char* v1_probe_file) {
    Controller c;
    if (Contains(v2_enabled, controller)) {
      c.where = Where::kV2;
      return c;
    }
    for (const CgroupMount& mount : mounts) {
      if (mount.v2 || !Contains(mount.controllers, controller)) continue;
      std::string dir = mount.mount_point + "/" + parent;
      if (PrepareParent(dir, pid_namespace) && Exists(dir + "/" + v1_probe_file)) {
        c.where = Where::kV1;
        c.v1_parent = dir;
      }
      break;
    }
    return c;
  };
  host.memory_ = pick("memory", "memory.limit_in_bytes");
  host.cpu_ = pick("cpu", "cpu.cfs_quota_us");
  host.pids_ = pick("pids", "pids.max");
  return host;
}

bool CgroupHost::IsTaskCgroupDir(const std::string& dir) const {
  std::string parent = dir.substr(0, dir.rfind('/'));
  if (parent.empty() || parent == dir) return false;
  if (parent == v2_parent_) return true;
  for (const Controller* c : {&memory_, &cpu_, &pids_}) {
    if (c->where == Where::kV1 && parent == c->v1_parent) return true;
  }
  return false;
}

std::string CgroupHost::Describe() const {
  auto where = [this](const Controller& c) -> std::string {
    switch (c.where) {
      case Where::kNone:
        return "none";
      case Where::kV1:
        return "v1 " + c.v1_parent;
      case Where::kV2:
        return "v2 " + v2_parent_;
    }
    return "none";
  };
  return "memory: " + where(memory_) + ", cpu: " + where(cpu_) + ", pids: " + where(pids_) +
         ", tracking: " +
         (v2_parent_.empty() ? (limits_pids() ? "pids cgroup" : "none")
                             : "v2 " + v2_parent_ + (v2_kill_ ? " (cgroup.kill)" : ""));
}

Result<std::unique_ptr<TaskCgroup>> CgroupHost::Create(const std::string& name,
                                                       const CgroupLimits& limits) const {
  std::unique_ptr<TaskCgroup> cg(new TaskCgroup());
  cg->limited_ = (limits.memory_bytes && memory_.where != Where::kNone) ||
                 (limits.cpus && cpu_.where != Where::kNone);
  auto make = [&cg, &name](const std::string& parent, bool v2) -> Result<std::string> {
    std::string dir = parent + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0) {
      return Unavailable("cannot create cgroup " + dir + ": " + ErrnoText(errno));
    }
    cg->dirs_.push_back(dir);
    std::string join_file = dir + (v2 ? "/cgroup.procs" : "/tasks");
    int fd = open(join_file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Unavailable("cannot open " + join_file + ": " + ErrnoText(errno));
    if (v2) {
      cg->v2_procs_fd_ = fd;
      cg->v2_dir_fd_ = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (cg->v2_dir_fd_ < 0) return Unavailable("cannot open " + dir + ": " + ErrnoText(errno));
    } else {
      cg->v1_tasks_fds_.push_back(fd);
    }
    return dir;
  };
  std::string quota;
  if (limits.cpus) {
    auto micros = static_cast<std::int64_t>(std::llround(*limits.cpus * kCpuPeriodMicros));
    quota = std::to_string(std::max<std::int64_t>(micros, 1000));  // the kernel's minimum
  }

  if (!v2_parent_.empty()) {
    BATON_ASSIGN_OR_RETURN(std::string dir, make(v2_parent_, true));
    cg->track_dir_ = dir;
    cg->kill_file_ = v2_kill_;
    if (memory_.where == Where::kV2 && limits.memory_bytes) {
      BATON_RETURN_IF_ERROR(
          WriteSmallFile(dir + "/memory.max", std::to_string(*limits.memory_bytes)));
      (void)WriteSmallFile(dir + "/memory.swap.max", "0");  // absent without swap accounting
      cg->memory_dir_ = dir;
      cg->memory_v2_ = true;
    }
    if (cpu_.where == Where::kV2 && limits.cpus) {
      BATON_RETURN_IF_ERROR(
          WriteSmallFile(dir + "/cpu.max", quota + " " + std::to_string(kCpuPeriodMicros)));
    }
    if (pids_.where == Where::kV2 && limits.pids_max > 0) {
      BATON_RETURN_IF_ERROR(WriteSmallFile(dir + "/pids.max", std::to_string(limits.pids_max)));
    }
  }
  if (pids_.where == Where::kV1 && limits.pids_max > 0) {
    BATON_ASSIGN_OR_RETURN(std::string dir, make(pids_.v1_parent, false));
    BATON_RETURN_IF_ERROR(WriteSmallFile(dir + "/pids.max", std::to_string(limits.pids_max)));
  }
  if (memory_.where == Where::kV1 && limits.memory_bytes) {
    BATON_ASSIGN_OR_RETURN(std::string dir, make(memory_.v1_parent, false));
    BATON_RETURN_IF_ERROR(
        WriteSmallFile(dir + "/memory.limit_in_bytes", std::to_string(*limits.memory_bytes)));
    // Memory+swap must be at least the memory limit, so it goes second; absent when swap
    // accounting is off.
    (void)WriteSmallFile(dir + "/memory.memsw.limit_in_bytes",
                         std::to_string(*limits.memory_bytes));
    cg->memory_dir_ = dir;
  }
  if (cpu_.where == Where::kV1 && limits.cpus) {
    BATON_ASSIGN_OR_RETURN(std::string dir, make(cpu_.v1_parent, false));
    BATON_RETURN_IF_ERROR(
        WriteSmallFile(dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodMicros)));
    BATON_RETURN_IF_ERROR(WriteSmallFile(dir + "/cpu.cfs_quota_us", quota));
  }
  // Every directory holds the same processes (the first one joins them all), so any of
  // them tracks the tree; prefer v2 (cgroup.kill), then pids (it is there by default).
  if (cg->track_dir_.empty() && !cg->dirs_.empty()) cg->track_dir_ = cg->dirs_.front();
  return cg;
}

TaskCgroup::~TaskCgroup() {
  KillAll();
  Status status = Remove();
  if (!status.ok()) log::Warn("Could not remove a task cgroup.", {{"error", status.message()}});
}

namespace {

// The processes in the cgroup `dir`; nullopt when its list cannot be read.
std::optional<std::vector<pid_t>> ReadPids(const std::string& dir) {
  std::vector<pid_t> pids;
  std::optional<std::string> text = ReadSmallFile(dir + "/cgroup.procs");
  if (!text) return std::nullopt;
  const char* p = text->data();
  const char* end = p + text->size();
  while (p < end) {
    pid_t pid = 0;
    auto [next, ec] = std::from_chars(p, end, pid);
    if (ec == std::errc() && pid > 0) pids.push_back(pid);
    p = next;
    while (p < end && (*p < '0' || *p > '9')) ++p;
  }
  return pids;
}

}  // namespace

std::vector<pid_t> TaskCgroup::Pids() const {
  if (track_dir_.empty()) return {};
  return ReadPids(track_dir_).value_or(std::vector<pid_t>{});
}

bool TaskCgroup::Reusable() const {
  // Not after cgroup.kill: Linux 6.18 compares a CLONE_INTO_CGROUP child's kill sequence
  // number with the one of its parent's cgroup instead of the target's, so every later
  // process started into a killed cgroup is killed at birth.
  if (limited_ || !emptied_ || kill_written_ || dirs_.empty()) return false;
  for (const std::string& dir : dirs_) {
    if (dir == track_dir_) continue;  // KillAll saw it empty
    std::optional<std::vector<pid_t>> pids = ReadPids(dir);
    if (!pids || !pids->empty()) return false;  // unreadable counts as not empty
  }
  return true;
}

std::vector<pid_t> TaskCgroup::KillAll() {
  emptied_ = false;
  if (track_dir_.empty()) return {};
  std::optional<std::vector<pid_t>> listed = ReadPids(track_dir_);
  if (!listed) return {};  // an unreadable list proves nothing: emptied_ stays false
  std::vector<pid_t> pids = std::move(*listed);
  if (pids.empty()) {
    emptied_ = true;
    return pids;
  }
  std::vector<pid_t> killed = pids;
  if (kill_file_) {
    kill_written_ = true;
    Status status = WriteSmallFile(track_dir_ + "/cgroup.kill", "1");
    if (!status.ok()) kill_file_ = false;  // fall back to killing one by one
  }
  auto deadline = std::chrono::steady_clock::now() + kKillWait;
  for (int round = 0;; ++round) {
    // Without cgroup.kill, a process may fork between listing and killing: repeat until
    // the list is empty (the pids cap bounds how many there can be).
    if (!kill_file_) {
      for (pid_t pid : pids) kill(pid, SIGKILL);
    }
    listed = ReadPids(track_dir_);
    if (!listed) break;  // the cgroup is gone
    pids = std::move(*listed);
    if (pids.empty()) {
      emptied_ = true;
      break;
    }
    for (pid_t pid : pids) {
      if (std::find(killed.begin(), killed.end(), pid) == killed.end()) killed.push_back(pid);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      log::Warn("Processes survived SIGKILL in a task cgroup.",
                {{"cgroup", track_dir_}, {"count", std::to_string(pids.size())}});
      break;
    }
    // Dying takes microseconds to a few milliseconds; yield first, then sleep briefly.
    if (round < 10) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return killed;
}

Status KillAndRemoveCgroup(const std::string& dir) {
  std::optional<std::vector<pid_t>> pids = ReadPids(dir);
  if (!pids) return Status::Ok();  // gone already (or not a cgroup)
  bool kill_file = !pids->empty() && Exists(dir + "/cgroup.kill") &&
                   WriteSmallFile(dir + "/cgroup.kill", "1").ok();
  auto deadline = std::chrono::steady_clock::now() + kKillWait;
  while (!pids->empty()) {
    if (!kill_file) {
      for (pid_t pid : *pids) kill(pid, SIGKILL);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Internal("processes survived SIGKILL in the cgroup " + dir + " (" +
                      std::to_string(pids->size()) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    pids = ReadPids(dir);
    if (!pids) return Status::Ok();
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return Status::Ok();
    if (errno != EBUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the last ones are exiting
  }
  return Internal("rmdir " + dir + ": " + ErrnoText(errno));
}

std::optional<std::int64_t> TaskCgroup::OomKills() const {
  if (memory_dir_.empty()) return std::nullopt;
  if (memory_v2_) {
    return FindCounter(ReadSmallFile(memory_dir_ + "/memory.events").value_or(""), "oom_kill")
        .value_or(0);
  }
  std::optional<std::int64_t> count =
      FindCounter(ReadSmallFile(memory_dir_ + "/memory.oom_control").value_or(""), "oom_kill");
  if (count) return count;
  // Kernels before 4.13 have no oom_kill counter: the limit having been hit is the best
  // available sign (callers only ask after the task was killed).
  std::optional<std::string> failcnt = ReadSmallFile(memory_dir_ + "/memory.failcnt");
  std::int64_t hits = 0;
  if (failcnt) std::from_chars(failcnt->data(), failcnt->data() + failcnt->size(), hits);
  return hits > 0 ? 1 : 0;
}

Status TaskCgroup::Remove() {
  for (int fd : v1_tasks_fds_) close(fd);
  v1_tasks_fds_.clear();
  for (int* fd : {&v2_dir_fd_, &v2_procs_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  std::string failures;
  // Children of the parent, removed leaf-first (they are all leaves; order is cosmetic).
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    int err = 0;
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (rmdir(it->c_str()) == 0 || errno == ENOENT) {
        err = 0;
        break;
      }
      err = errno;
      if (err != EBUSY) break;
      // The last processes are still exiting.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (err != 0) {
      if (!failures.empty()) failures += "; ";
      failures += "rmdir " + *it + ": " + ErrnoText(err);
    }
  }
  dirs_.clear();
  track_dir_.clear();
  memory_dir_.clear();
  if (!failures.empty()) return Internal(failures);
  return Status::Ok();
}

}  // namespace baton

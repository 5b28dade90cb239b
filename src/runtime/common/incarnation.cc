#include "runtime/common/incarnation.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "runtime/common/task_files.h"

namespace baton::runtime {
namespace {

constexpr std::string_view kRoot = "/.baton-runtimes";
constexpr std::string_view kLock = "lock";
// A directory being set up: renamed to its id once its lock is held, so that no other
// instance ever sees an unlocked directory of a live one.
constexpr std::string_view kNewPrefix = ".new-";

std::string NewId() {
  std::random_device random;
  std::uint64_t high = (static_cast<std::uint64_t>(random()) << 32) | random();
  std::uint64_t low = (static_cast<std::uint64_t>(random()) << 32) | random();
  char text[33];
  snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(high),
           static_cast<unsigned long long>(low));
  return text;
}

std::optional<std::string> ReadAll(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

}  // namespace

Record::~Record() {
  if (fd_ >= 0) close(fd_);
  unlink(path_.c_str());
}

Status Record::Write(std::string_view text) {
  ssize_t n;
  do {
    n = pwrite(fd_, text.data(), text.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(text.size())) {
    return ErrnoStatus("cannot record a running task in " + path_, n < 0 ? errno : EIO);
  }
  if (ftruncate(fd_, static_cast<off_t>(text.size())) != 0) {
    return ErrnoStatus("cannot record a running task in " + path_, errno);
  }
  return Status::Ok();
}

void Record::Clear() {
  if (ftruncate(fd_, 0) != 0) {
    // Harmless: what the stale text names is verified (start times, inodes) before use.
  }
}

DeadIncarnation::~DeadIncarnation() {
  if (lock_fd_ >= 0) close(lock_fd_);
}

std::vector<std::string> DeadIncarnation::Records() const {
  std::vector<std::string> records;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (entry.path().filename() == kLock) continue;
    std::optional<std::string> text = ReadAll(entry.path().string());
    if (text && !text->empty()) records.push_back(std::move(*text));
  }
  return records;
}

void DeadIncarnation::Forget() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Result<std::unique_ptr<Incarnation>> Incarnation::Open(const std::string& base_dir) {
  std::string root = base_dir + std::string(kRoot);
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) return Unavailable("cannot create " + root + ": " + ec.message());
  std::string id = NewId();
  std::string staging = root + "/" + std::string(kNewPrefix) + id;
  if (mkdir(staging.c_str(), 0700) != 0) return ErrnoStatus("cannot create " + staging, errno);
  std::string lock = staging + "/" + std::string(kLock);
  int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    std::filesystem::remove_all(staging, ec);
    return ErrnoStatus("cannot lock " + lock, err);
  }
  std::string dir = root + "/" + id;
  if (rename(staging.c_str(), dir.c_str()) != 0) {
    int err = errno;
    close(fd);
    std::filesystem::remove_all(staging, ec);
    return ErrnoStatus("cannot create " + dir, err);
  }
  return std::unique_ptr<Incarnation>(new Incarnation(root, std::move(id), fd));
}

Incarnation::~Incarnation() {
  std::error_code ec;
  std::filesystem::remove_all(root_ + "/" + id_, ec);
  close(lock_fd_);
  rmdir(root_.c_str());  // the last instance out removes the root too (fails when not empty)
}

Result<std::unique_ptr<Record>> Incarnation::NewRecord(const std::string& name) const {
  std::string path = root_ + "/" + id_ + "/" + name;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus("cannot create " + path, errno);
  return std::make_unique<Record>(std::move(path), fd);
}

std::vector<DeadIncarnation> Incarnation::FindDead() const {
  std::vector<DeadIncarnation> dead;
  DIR* listing = opendir(root_.c_str());
  if (listing == nullptr) return dead;
  std::vector<std::string> names;
  while (const dirent* entry = readdir(listing)) {
    std::string_view name = entry->d_name;
    if (name.empty() || name.front() == '.' || name == id_) continue;
    names.emplace_back(name);
  }
  closedir(listing);
  for (const std::string& name : names) {
    std::string dir = root_ + "/" + name;
    int fd = open((dir + "/" + std::string(kLock)).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;                     // removed meanwhile
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {  // alive
      close(fd);
      continue;
    }
    dead.emplace_back(name, std::move(dir), fd);
  }
  return dead;
}

}  // namespace baton::runtime

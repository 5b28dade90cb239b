#include "engine/data_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace baton {
namespace {

// Chmods `fd` (what `path` names) to `mode` when its permissions are looser.
Status Tighten(int fd, const std::string& path, const struct stat& st, mode_t mode,
               std::vector<std::string>* tightened) {
  if ((st.st_mode & 07777 & ~mode) == 0) return Status::Ok();
  if (::fchmod(fd, mode) != 0) {
    return FailedPrecondition(
        fmt::format("{} is readable by others (mode {:o}) and cannot be made "
                    "private to Baton's user: {}",
                    path, st.st_mode & 07777, std::strerror(errno)));
  }
  if (tightened != nullptr) tightened->push_back(path);
  return Status::Ok();
}

}  // namespace

Status SecureDataDir(const std::string& dir, std::vector<std::string>* tightened) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(dir, ec);
  if (!existed) {
    // Created with the umask's mode and tightened below, before anything is stored in it.
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return FailedPrecondition(
          fmt::format("cannot create the data directory {}: {}", dir, ec.message()));
    }
  }
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) {
    return FailedPrecondition(
        fmt::format("the data directory {} cannot be opened as a "
                    "directory: {}",
                    dir, std::strerror(errno)));
  }
  DIR* entries = ::fdopendir(dir_fd);
  if (entries == nullptr) {
    ::close(dir_fd);
    return FailedPrecondition(fmt::format("cannot read the data directory {}", dir));
  }
  struct stat st {};
  Status status;
  if (::fstat(dir_fd, &st) != 0) {
    status = FailedPrecondition(fmt::format("cannot stat the data directory {}", dir));
  } else if (st.st_uid != ::geteuid()) {
    status = FailedPrecondition(fmt::format(
        "the data directory {} belongs to uid {}, not to Baton's user (uid {}): give Baton a "
        "directory of its own (data_dir, --data-dir)",
        dir, st.st_uid, ::geteuid()));
  } else {
    // A directory made just now is not reported: it held nothing yet.
    status = Tighten(dir_fd, dir, st, 0700, existed ? tightened : nullptr);
  }
  while (status.ok()) {
    errno = 0;
    const dirent* entry = ::readdir(entries);
    if (entry == nullptr) break;
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;  // a symbolic link, or gone: nothing of Baton's to tighten
    struct stat entry_st {};
    if (::fstat(fd, &entry_st) == 0 && entry_st.st_uid == ::geteuid()) {
      if (S_ISREG(entry_st.st_mode)) status = Tighten(fd, path, entry_st, 0600, tightened);
      if (S_ISDIR(entry_st.st_mode)) status = Tighten(fd, path, entry_st, 0700, tightened);
    }
    ::close(fd);
  }
  ::closedir(entries);
  return status;
}

}  // namespace baton

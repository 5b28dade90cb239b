// Incarnation: tells apart the runtime instances (live and dead) that used one base
// directory, so that a restarted worker can find what a dead one left running.
//
// Each instance holds, for its lifetime, an exclusive flock(2) on a lock file of its own,
// <base_dir>/.baton-runtimes/<id>/lock. The kernel releases the lock when the process
// dies, however it dies (`kill -9` included), so a directory there whose lock can be
// taken belongs to an instance that is gone, and the records it kept beside the lock are
// its leftovers. A lock that cannot be taken is a live instance's (another worker sharing
// the data directory, or another runtime in this process): it is left alone.
//
// Thread-safety: an Incarnation is immutable after Open, and Record's methods may be
// called from any thread, one Record per thread at a time.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace baton::runtime {

// A small file in the incarnation's directory that says what one running task holds
// (its process group, its cgroups; the runtime decides the text). Kept open and
// rewritten in place, so recording costs no file creation per task.
class Record {
 public:
  Record(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~Record();
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;

  // Replaces the contents (not synced: only a crash of the process, not of the machine,
  // needs to find it, and after a reboot nothing of the task runs anyway).
  Status Write(std::string_view text);
  // Empties it: the task holds nothing any more.
  void Clear();

 private:
  std::string path_;
  int fd_;
};

// A dead instance's directory, locked by us while this object lives.
class DeadIncarnation {
 public:
  DeadIncarnation(std::string id, std::string dir, int lock_fd)
      : id_(std::move(id)), dir_(std::move(dir)), lock_fd_(lock_fd) {}
  ~DeadIncarnation();
  DeadIncarnation(DeadIncarnation&& other) noexcept
      : id_(std::move(other.id_)),
        dir_(std::move(other.dir_)),
        lock_fd_(std::exchange(other.lock_fd_, -1)) {}
  DeadIncarnation(const DeadIncarnation&) = delete;
  DeadIncarnation& operator=(const DeadIncarnation&) = delete;

  const std::string& id() const { return id_; }
  // The contents of its non-empty records.
  std::vector<std::string> Records() const;
  // Removes its directory: everything it left is dealt with.
  void Forget();

 private:
  std::string id_;
  std::string dir_;
  int lock_fd_;
};

class Incarnation {
 public:
  // Creates <base_dir>/.baton-runtimes/<new id>/ and takes its lock.
  static Result<std::unique_ptr<Incarnation>> Open(const std::string& base_dir);
  // Removes the directory: an instance that ends normally leaves nothing to clean.
  ~Incarnation();
  Incarnation(const Incarnation&) = delete;
  Incarnation& operator=(const Incarnation&) = delete;

  // Random, unique across hosts: also the label of a container runtime's containers.
  const std::string& id() const { return id_; }

  // A new record file (named `name`, unique within this incarnation).
  Result<std::unique_ptr<Record>> NewRecord(const std::string& name) const;

  // The instances on this base directory that are gone, each locked (by a new open file
  // description, so this instance never counts as dead) until its object is destroyed:
  // two instances starting at once do not both clean up the same one.
  std::vector<DeadIncarnation> FindDead() const;

 private:
  Incarnation(std::string root, std::string id, int lock_fd)
      : root_(std::move(root)), id_(std::move(id)), lock_fd_(lock_fd) {}

  std::string root_;  // <base_dir>/.baton-runtimes
  std::string id_;
  int lock_fd_;
};

}  // namespace baton::runtime

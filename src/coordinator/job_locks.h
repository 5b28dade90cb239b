// JobLocks: the lock of a job's tree, "baton.job:<id of its top-level job>" of the Locker
// (in process the keyed in-process locker, across coordinators the shared one), so each
// step of a tree is decided once and different trees never wait for each other. A job's
// top-level ancestor never changes, so it is cached (bounded; refilled on demand).
//
// Thread-safety: thread-safe. An annotated mutex guards the cache of roots; it is never
// held across a datastore call or while waiting for a lock.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "base/mutex.h"
#include "base/status.h"
#include "datastore/datastore.h"
#include "locker/locker.h"

namespace baton {

class JobLocks {
 public:
  // `locker` null: an in-process locker of its own (a single coordinator).
  JobLocks(Datastore& datastore, Locker* locker, std::chrono::milliseconds timeout);

  // Waits at most the timeout for the tree's lock (Unavailable / DeadlineExceeded).
  Result<std::unique_ptr<Lock>> Acquire(const std::string& job_id);
  Result<std::string> RootOf(const std::string& job_id) BATON_EXCLUDES(mu_);
  // `job_id` is a top-level job (just created).
  void TopLevel(const std::string& job_id) BATON_EXCLUDES(mu_);

 private:
  void Remember(const std::string& job_id, const std::string& root) BATON_EXCLUDES(mu_);

  static constexpr std::size_t kMaxRoots = 100000;
  Datastore& datastore_;
  std::unique_ptr<Locker> own_;
  Locker& locker_;
  const std::chrono::milliseconds timeout_;
  Mutex mu_;
  std::map<std::string, std::string> roots_ BATON_GUARDED_BY(mu_);  // job → top-level
};

}  // namespace baton

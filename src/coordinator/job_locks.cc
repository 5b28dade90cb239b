#include "coordinator/job_locks.h"

namespace baton {

JobLocks::JobLocks(Datastore& datastore, Locker* locker, std::chrono::milliseconds timeout)
    : datastore_(datastore),
      own_(locker == nullptr ? NewInProcessLocker() : nullptr),
      locker_(locker == nullptr ? *own_ : *locker),
      timeout_(timeout) {}

Result<std::unique_ptr<Lock>> JobLocks::Acquire(const std::string& job_id) {
  auto root = RootOf(job_id);
  if (!root.ok()) return root.status();
  return locker_.Acquire("baton.job:" + *root, timeout_);
}

Result<std::string> JobLocks::RootOf(const std::string& job_id) {
  // The reads are outside the mutex: a job's top-level ancestor never changes.
  std::string id = job_id;
  for (int depth = 0;; ++depth) {
    if (depth > 100) return Internal("job " + job_id + ": its sub-jobs nest too deeply");
    {
      MutexLock lock(mu_);
      if (auto it = roots_.find(id); it != roots_.end()) {
        id = it->second;
        break;
      }
    }
    auto job = datastore_.GetJob(id);
    if (!job.ok()) return job.status();
    if (job->parent_id.empty()) break;
    auto parent = datastore_.GetTask(job->parent_id);
    if (!parent.ok()) return parent.status();
    id = parent->job_id;
  }
  Remember(job_id, id);
  return id;
}

void JobLocks::TopLevel(const std::string& job_id) { Remember(job_id, job_id); }

void JobLocks::Remember(const std::string& job_id, const std::string& root) {
  MutexLock lock(mu_);
  if (roots_.size() >= kMaxRoots) roots_.clear();  // bounded; refilled on demand
  roots_[job_id] = root;
}

}  // namespace baton

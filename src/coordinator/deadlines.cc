#include "coordinator/deadlines.h"

#include <memory>
#include <optional>
#include <utility>

namespace baton {

Deadlines::~Deadlines() {
  std::set<TimerId> armed;
  {
    MutexLock lock(mu_);
    closing_ = true;
    armed.swap(armed_);
    job_timers_.clear();
  }
  for (TimerId id : armed) timers_.Cancel(id);
}

void Deadlines::Arm(TimePoint at, const std::string& job_id, std::function<void()> callback) {
  if (closing_) return;
  auto id = std::make_shared<TimerId>(0);
  // The callback waits for mu_, so it sees its id stored.
  *id = timers_.Schedule(at, [this, id, job_id, callback = std::move(callback)] {
    {
      MutexLock inner(mu_);
      armed_.erase(*id);
      if (!job_id.empty()) {
        if (auto it = job_timers_.find(job_id); it != job_timers_.end() && it->second == *id) {
          job_timers_.erase(it);
        }
      }
    }
    callback();
  });
  armed_.insert(*id);
  if (!job_id.empty()) job_timers_[job_id] = *id;
}

void Deadlines::At(TimePoint at, std::function<void()> callback) {
  MutexLock lock(mu_);
  Arm(at, "", std::move(callback));
}

void Deadlines::ArmJobTimeout(const std::string& job_id, TimePoint at, std::function<void()> fire) {
  DisarmJobTimeout(job_id);  // arming again replaces the timer
  MutexLock lock(mu_);
  Arm(at, job_id, std::move(fire));
}

void Deadlines::DisarmJobTimeout(const std::string& job_id) {
  std::optional<TimerId> id;
  {
    MutexLock lock(mu_);
    auto it = job_timers_.find(job_id);
    if (it == job_timers_.end()) return;
    id = it->second;
    armed_.erase(it->second);
    job_timers_.erase(it);
  }
  timers_.Cancel(*id);
}

std::size_t Deadlines::Armed() const {
  MutexLock lock(mu_);
  return armed_.size();
}

}  // namespace baton

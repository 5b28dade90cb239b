#include "base/clock.h"

#include <condition_variable>
#include <map>
#include <stop_token>
#include <thread>

#include "base/mutex.h"

namespace baton {
namespace {

// One thread sleeps until the earliest deadline (or a change) and runs what is due.
// State is guarded by mu_; callbacks run with mu_ released.
class ThreadTimers : public Timers {
 public:
  ThreadTimers() : thread_([this](std::stop_token stop) { Loop(stop); }) {}

  ~ThreadTimers() override {
    {
      MutexLock lock(mu_);
      timers_.clear();
    }
    thread_.request_stop();
    cv_.notify_all();
  }

  TimerId Schedule(TimePoint when, std::function<void()> callback) override BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    TimerId id = ++next_id_;
    timers_.emplace(std::pair{when, id}, std::move(callback));
    cv_.notify_all();
    return id;
  }

  void Cancel(TimerId id) override BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    for (auto it = timers_.begin(); it != timers_.end(); ++it) {
      if (it->first.second == id) {
        timers_.erase(it);
        return;
      }
    }
  }

 private:
  void Loop(const std::stop_token& stop) BATON_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    while (!stop.stop_requested()) {
      if (timers_.empty()) {
        cv_.wait(lock, stop, [&]() BATON_REQUIRES(mu_) { return !timers_.empty(); });
        continue;
      }
      auto first = timers_.begin();
      auto now = std::chrono::system_clock::now();
      // A copy: Cancel may erase the entry (and its key) while this thread waits.
      TimePoint deadline = first->first.first;
      if (deadline > now) {
        cv_.wait_until(lock, stop, deadline, [] { return false; });
        continue;
      }
      std::function<void()> callback = std::move(first->second);
      timers_.erase(first);
      lock.unlock();
      callback();
      lock.lock();
    }
  }

  Mutex mu_;
  std::condition_variable_any cv_;
  std::map<std::pair<TimePoint, TimerId>, std::function<void()>> timers_ BATON_GUARDED_BY(mu_);
  TimerId next_id_ BATON_GUARDED_BY(mu_) = 0;
  std::jthread thread_;  // last: starts after the members it uses exist
};

}  // namespace

std::unique_ptr<Timers> NewThreadTimers() { return std::make_unique<ThreadTimers>(); }

}  // namespace baton

// A fake Clock + Timers: time moves only when a test calls Advance, which runs the due
// callbacks on the calling thread, in deadline order.
#pragma once

#include <map>
#include <mutex>

#include "base/clock.h"

namespace baton::testing {

class FakeClock : public Clock, public Timers {
 public:
  explicit FakeClock(TimePoint start = TimePoint(std::chrono::milliseconds(1'800'000'000'000)))
      : now_(start) {}

  TimePoint Now() override {
    std::lock_guard lock(mu_);
    return now_;
  }

  TimerId Schedule(TimePoint when, std::function<void()> callback) override {
    std::lock_guard lock(mu_);
    TimerId id = ++next_id_;
    timers_.emplace(std::pair{when, id}, std::move(callback));
    return id;
  }

  void Cancel(TimerId id) override {
    std::lock_guard lock(mu_);
    std::erase_if(timers_, [id](const auto& entry) { return entry.first.second == id; });
  }

  // Moves time forward by `d`, running every callback that falls due, in order.
  void Advance(std::chrono::milliseconds d) {
    TimePoint target;
    {
      std::lock_guard lock(mu_);
      target = now_ + d;
    }
    for (;;) {
      std::function<void()> callback;
      {
        std::lock_guard lock(mu_);
        auto first = timers_.begin();
        if (first == timers_.end() || first->first.first > target) {
          now_ = target;
          return;
        }
        now_ = std::max(now_, first->first.first);
        callback = std::move(first->second);
        timers_.erase(first);
      }
      callback();
    }
  }

  std::size_t PendingTimers() {
    std::lock_guard lock(mu_);
    return timers_.size();
  }

 private:
  std::mutex mu_;
  TimePoint now_;
  std::map<std::pair<TimePoint, TimerId>, std::function<void()>> timers_;
  TimerId next_id_ = 0;
};

}  // namespace baton::testing

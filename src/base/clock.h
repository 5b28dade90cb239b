// Time, injected: the engine reads the time and sets timers only through these
// interfaces, so tests can use a fake clock and never sleep.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace baton {

// Wall-clock time at millisecond precision, as stored and shown.
using TimePoint = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;

// Thread-safety: implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() = 0;
};

using TimerId = std::uint64_t;

// Runs callbacks at given times (backoff delays, job timeouts, leases): one place for
// every timer, instead of sleeping threads.
//
// Contract: a callback runs at most once, on a thread the implementation owns, never
// under the implementation's lock; Cancel before it runs prevents it. Destroying the
// Timers cancels what has not run and waits for a running callback to return.
// Thread-safety: all methods may be called from any thread, also from a callback.
class Timers {
 public:
  virtual ~Timers() = default;
  virtual TimerId Schedule(TimePoint when, std::function<void()> callback) = 0;
  virtual void Cancel(TimerId id) = 0;
};

// The system clock.
class SystemClock : public Clock {
 public:
  TimePoint Now() override {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now());
  }
};

// Timers on one thread with a min-heap, for production.
std::unique_ptr<Timers> NewThreadTimers();

}  // namespace baton

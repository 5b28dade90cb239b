// Deadlines: the scheduler's timers over Timers. One-shot callbacks (a retry's backoff,
// republishing a refused row, trying a start again) and one timeout per job (arming it again
// replaces it; disarming cancels it). Destroying it cancels every timer still armed, and
// nothing is armed after that.
//
// Thread-safety: thread-safe. An annotated mutex guards the armed timers; it is held while
// a timer is handed to Timers (whose callback waits for it, so it sees its id stored) and
// never while a callback runs.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "base/clock.h"
#include "base/mutex.h"

namespace baton {

class Deadlines {
 public:
  explicit Deadlines(Timers& timers) : timers_(timers) {}
  ~Deadlines();
  Deadlines(const Deadlines&) = delete;
  Deadlines& operator=(const Deadlines&) = delete;

  // Runs `callback` at `at` (on the timers' thread).
  void At(TimePoint at, std::function<void()> callback) BATON_EXCLUDES(mu_);
  // Runs `fire` at `at` unless disarmed or armed again first.
  void ArmJobTimeout(const std::string& job_id, TimePoint at, std::function<void()> fire)
      BATON_EXCLUDES(mu_);
  void DisarmJobTimeout(const std::string& job_id) BATON_EXCLUDES(mu_);
  // How many timers are armed (tests).
  std::size_t Armed() const BATON_EXCLUDES(mu_);

 private:
  // Arms `callback` at `at`; with `job_id`, as that job's timeout.
  void Arm(TimePoint at, const std::string& job_id, std::function<void()> callback)
      BATON_REQUIRES(mu_);

  Timers& timers_;
  mutable Mutex mu_;
  std::map<std::string, TimerId> job_timers_ BATON_GUARDED_BY(mu_);
  std::set<TimerId> armed_ BATON_GUARDED_BY(mu_);
  bool closing_ BATON_GUARDED_BY(mu_) = false;
};

}  // namespace baton

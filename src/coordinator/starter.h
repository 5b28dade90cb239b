// Starter: one background thread that starts stored PENDING jobs (Scheduler::Submit with
// start_in_background), so concurrent submissions share commits instead of queueing behind
// the scheduler's decisions. What is still queued when it stops stays PENDING, for
// reconciling.
//
// Thread-safety: thread-safe. Add may be called from any thread; `start` runs on the
// starter's own thread, with no lock of the starter held.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <stop_token>
#include <string>
#include <thread>

#include "base/mutex.h"

namespace baton {

class Starter {
 public:
  explicit Starter(std::function<void(const std::string& job_id)> start);
  // Stops the thread (a start under way finishes first).
  ~Starter();
  Starter(const Starter&) = delete;
  Starter& operator=(const Starter&) = delete;

  void Add(const std::string& job_id) BATON_EXCLUDES(mu_);

 private:
  void Loop(std::stop_token stop) BATON_EXCLUDES(mu_);

  const std::function<void(const std::string&)> start_;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::string> queue_ BATON_GUARDED_BY(mu_);
  std::jthread thread_;  // last: stopped before the members above go
};

}  // namespace baton

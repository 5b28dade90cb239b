// The bounded pool of threads that run complete requests. Reads (GET, HEAD) go first, and
// at most half the threads write at once: a burst of submissions (datastore writes,
// serialised) must not hold GET /health back, in this queue or on the datastore's lock.
//
// Thread-safety: Submit from any thread; Start and Stop from one.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace baton::http {

class HandlerPool {
 public:
  explicit HandlerPool(int threads) : threads_(std::max(1, threads)) {}
  ~HandlerPool() { Stop(); }
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  void Start();
  void Submit(bool read, std::function<void()> task) BATON_EXCLUDES(mu_);
  // Lets the running tasks finish and drops the queued ones.
  void Stop() BATON_EXCLUDES(mu_);

 private:
  void Run() BATON_EXCLUDES(mu_);
  // The next task, and whether it writes; an empty task once stopping.
  std::pair<std::function<void()>, bool> Next() BATON_EXCLUDES(mu_);

  const int threads_;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::function<void()>> reads_ BATON_GUARDED_BY(mu_);
  std::deque<std::function<void()>> writes_ BATON_GUARDED_BY(mu_);
  int writing_ BATON_GUARDED_BY(mu_) = 0;
  bool stop_ BATON_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace baton::http

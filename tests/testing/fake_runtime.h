// A Runtime for tests of the engine above it: a task's `run` says what happens.
//   "ok VALUE"    completes with result VALUE (also "ok" alone: empty result)
//   "fail TEXT"   fails with error TEXT
//   "hang"        runs until cancelled (or Release(name))
//   "flaky N"     fails the first N runs of this task name, then completes with "ok"
//   "progress P"  reports progress P, then runs until cancelled (or Release(name))
// It records what ran, and the most tasks that ran at once.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace baton::testing {

class FakeRuntime : public Runtime {
 public:
  Result<RunOutcome> Run(const RunRequest& request, RunObserver& observer,
                         std::stop_token cancel) override {
    const Task& task = request.task;
    {
      std::lock_guard lock(mu_);
      ran_.push_back(task.name);
      ++running_;
      max_running_ = std::max(max_running_, running_);
      envs_[task.name] = task.env;
    }
    cv_.notify_all();
    observer.OnLog("running " + task.name + "\n");
    RunOutcome out;
    const std::string& run = task.run;
    if (run.starts_with("ok")) {
      out.result = run.size() > 3 ? run.substr(3) : "";
    } else if (run.starts_with("fail")) {
      out.state = RunOutcome::State::kFailed;
      out.error = run.size() > 5 ? run.substr(5) : "failed";
    } else if (run.starts_with("flaky")) {
      int failures = std::stoi(run.substr(6));
      std::lock_guard lock(mu_);
      if (attempts_[task.name]++ < failures) {
        out.state = RunOutcome::State::kFailed;
        out.error = "flaky failure";
      }
    } else if (run == "hang" || run.starts_with("progress")) {
      if (run.starts_with("progress")) observer.OnProgress(std::stod(run.substr(9)));
      std::unique_lock lock(mu_);
      std::stop_callback wake(cancel, [this] { cv_.notify_all(); });
      cv_.wait(lock, [&] { return cancel.stop_requested() || released_.contains(task.name); });
      if (cancel.stop_requested()) {
        out.state = RunOutcome::State::kCancelled;
        out.error = "cancelled";
      }
    }
    {
      std::lock_guard lock(mu_);
      --running_;
    }
    cv_.notify_all();
    return out;
  }

  Status Health() override { return Status::Ok(); }

  void Release(const std::string& name) {
    {
      std::lock_guard lock(mu_);
      released_.insert(name);
    }
    cv_.notify_all();
  }

  std::vector<std::string> ran() {
    std::lock_guard lock(mu_);
    return ran_;
  }
  int max_running() {
    std::lock_guard lock(mu_);
    return max_running_;
  }
  int running() {
    std::lock_guard lock(mu_);
    return running_;
  }
  StringMap env_of(const std::string& name) {
    std::lock_guard lock(mu_);
    return envs_[name];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> ran_;
  std::map<std::string, StringMap> envs_;
  std::map<std::string, int> attempts_;
  std::set<std::string> released_;
  int running_ = 0;
  int max_running_ = 0;
};

}  // namespace baton::testing

#include "coordinator/starter.h"

#include <utility>

namespace baton {

Starter::Starter(std::function<void(const std::string&)> start)
    : start_(std::move(start)), thread_([this](std::stop_token stop) { Loop(std::move(stop)); }) {}

Starter::~Starter() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void Starter::Add(const std::string& job_id) {
  {
    MutexLock lock(mu_);
    queue_.push_back(job_id);
  }
  cv_.notify_one();
}

void Starter::Loop(std::stop_token stop) {
  for (;;) {
    std::deque<std::string> batch;
    {
      MutexLock lock(mu_);
      cv_.wait(lock, stop, [&]() BATON_REQUIRES(mu_) { return !queue_.empty(); });
      if (stop.stop_requested()) return;  // what is left stays PENDING, for reconciling
      batch.swap(queue_);
    }
    for (const std::string& id : batch) start_(id);
  }
}

}  // namespace baton

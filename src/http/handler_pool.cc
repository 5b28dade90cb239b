#include "http/handler_pool.h"

namespace baton::http {

void HandlerPool::Start() {
  for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { Run(); });
}

void HandlerPool::Submit(bool read, std::function<void()> task) {
  {
    MutexLock lock(mu_);
    if (stop_) return;
    (read ? reads_ : writes_).push_back(std::move(task));
  }
  cv_.notify_one();
}

void HandlerPool::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    reads_.clear();
    writes_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

std::pair<std::function<void()>, bool> HandlerPool::Next() {
  MutexLock lock(mu_);
  const int max_writing = std::max(1, threads_ / 2);
  auto can_write = [&] {
    mu_.AssertHeld();
    return !writes_.empty() && writing_ < max_writing;
  };
  cv_.wait(lock, [&] {
    mu_.AssertHeld();
    return stop_ || !reads_.empty() || can_write();
  });
  if (stop_) return {};
  bool read = !reads_.empty();
  std::deque<std::function<void()>>& from = read ? reads_ : writes_;
  std::function<void()> task = std::move(from.front());
  from.pop_front();
  if (!read) ++writing_;
  return {std::move(task), !read};
}

void HandlerPool::Run() {
  for (;;) {
    auto [task, writes] = Next();
    if (!task) return;
    task();
    if (!writes) continue;
    {
      MutexLock lock(mu_);
      --writing_;
    }
    cv_.notify_all();
  }
}

}  // namespace baton::http

#include "coordinator/events.h"

#include <nlohmann/json.hpp>

namespace baton {

std::string FormatEvent(const Change& change) {
  nlohmann::json data = {{"jobId", change.job_id}};
  const char* name = "job";
  switch (change.kind) {
    case Change::Kind::kJob:
      data["state"] = change.state;
      data["position"] = change.position;
      data["taskCount"] = change.task_count;
      data["progress"] = change.progress;
      break;
    case Change::Kind::kTask:
      name = "task";
      data["taskId"] = change.task_id;
      if (!change.parent_id.empty()) data["parentId"] = change.parent_id;
      data["state"] = change.state;
      data["position"] = change.position;
      data["progress"] = change.progress;
      if (!change.node_id.empty()) data["nodeId"] = change.node_id;
      break;
    case Change::Kind::kLog:
      name = "log";
      data["taskId"] = change.task_id;
      data["number"] = change.number;
      data["contents"] = change.contents;
      break;
  }
  // dump() escapes newlines, so the data is one line, as the format needs; bytes that
  // are not UTF-8 are replaced rather than refused.
  return std::string("event: ") + name +
         "\ndata: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

EventStream::~EventStream() { Close(); }

void EventStream::SetWake(std::function<void()> wake) {
  MutexLock lock(mu_);
  wake_ = std::move(wake);
}

void EventStream::Append(std::string_view text) {
  MutexLock lock(mu_);
  if (resync_) return;  // the client reads everything afresh anyway
  if (pending_.size() + text.size() > kMaxPendingBytes) {
    pending_.clear();
    pending_.shrink_to_fit();
    resync_ = true;
    return;
  }
  pending_.append(text);
}

void EventStream::Wake() {
  std::function<void()> wake;
  {
    MutexLock lock(mu_);
    if (pending_.empty() && !resync_) return;
    wake = wake_;
  }
  if (wake) wake();
}

std::string EventStream::Take() {
  MutexLock lock(mu_);
  std::string out = std::move(pending_);
  pending_.clear();
  if (resync_) {
    out += "event: resync\ndata: {}\n\n";
    resync_ = false;
  }
  return out;
}

void EventStream::Close() {
  if (closed_.exchange(true)) return;
  {
    MutexLock lock(mu_);
    wake_ = nullptr;
  }
  interest_->streams -= 1;
  interest_->wanted -= 1;
}

EventHub::~EventHub() {
  if (thread_.joinable()) {
    thread_.request_stop();
    { MutexLock lock(mu_); }
    cv_.notify_all();
    thread_.join();
  }
}

void EventHub::Publish(std::vector<Change> changes) {
  if (changes.empty()) return;
  Enqueue({.changes = std::move(changes), .own = true});
}

void EventHub::Deliver(std::vector<Change> changes) {
  if (changes.empty() || LocalStreams() == 0) return;
  Enqueue({.changes = std::move(changes)});
}

void EventHub::Enqueue(Batch batch) {
  {
    MutexLock lock(mu_);
    if (!started_) return;  // nobody ever subscribed, here or elsewhere
    queue_.push_back(std::move(batch));
  }
  cv_.notify_one();
}

void EventHub::SetRemoteWanted(bool wanted) {
  MutexLock lock(mu_);
  if (remote_wanted_ == wanted) return;
  remote_wanted_ = wanted;
  interest_->wanted += wanted ? 1 : -1;
  if (wanted) StartLocked();
}

void EventHub::SetHooks(Hooks hooks) {
  MutexLock lock(mu_);
  hooks_ = std::move(hooks);
  hooks_idle_.wait(lock, [&] {
    mu_.AssertHeld();
    return hook_calls_ == 0;
  });
}

void EventHub::StartLocked() {
  if (started_) return;
  started_ = true;
  thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
}

std::shared_ptr<EventStream> EventHub::Subscribe(Filter filter) {
  auto stream = std::make_shared<EventStream>(interest_);
  interest_->streams += 1;
  interest_->wanted += 1;
  {
    MutexLock lock(mu_);
    std::erase_if(subscribers_, [](const Subscriber& s) { return s.stream.expired(); });
    subscribers_.push_back({stream, std::move(filter)});
    StartLocked();
    queue_.push_back({.stream_opened = true});
  }
  cv_.notify_one();
  return stream;
}

void EventHub::Run(std::stop_token stop) {
  for (;;) {
    std::vector<Batch> batches;
    std::vector<Subscriber> subscribers;
    Hooks hooks;
    {
      MutexLock lock(mu_);
      cv_.wait(lock, stop, [&] {
        mu_.AssertHeld();
        return !queue_.empty();
      });
      if (stop.stop_requested()) return;
      batches.swap(queue_);
      std::erase_if(subscribers_, [](const Subscriber& s) {
        auto stream = s.stream.lock();
        return stream == nullptr || stream->closed();
      });
      subscribers = subscribers_;  // filters are called without the lock
      hooks = hooks_;
      ++hook_calls_;
    }
    std::vector<std::shared_ptr<EventStream>> streams;
    streams.reserve(subscribers.size());
    for (Subscriber& s : subscribers) streams.push_back(s.stream.lock());
    for (const Batch& batch : batches) {
      if (batch.stream_opened) {
        if (hooks.stream_opened) hooks.stream_opened();
        continue;
      }
      if (batch.own && hooks.forward && remote_wanted_) hooks.forward(batch.changes);
      for (const Change& change : batch.changes) {
        std::string text;
        for (std::size_t i = 0; i < subscribers.size(); ++i) {
          if (streams[i] == nullptr) continue;
          const Filter& f = subscribers[i].filter;
          if (!f.job_id.empty() && f.job_id != change.job_id) continue;
          if (change.kind == Change::Kind::kLog && (f.job_id.empty() || !f.logs)) continue;
          if (f.visible && !f.visible(change.job_id)) continue;
          if (text.empty()) text = FormatEvent(change);
          streams[i]->Append(text);
        }
      }
    }
    {
      MutexLock lock(mu_);
      --hook_calls_;
    }
    hooks_idle_.notify_all();
    for (auto& stream : streams) {
      if (stream != nullptr) stream->Wake();
    }
  }
}

}  // namespace baton

#include "http/server.h"

namespace baton::http {

void LongPoll::Answer(Response response) {
  {
    MutexLock lock(mu_);
    if (answer_ || ended_ || gone_) return;
    answer_ = std::move(response);
  }
  Notify();
}

void LongPoll::Send(std::string bytes) {
  if (bytes.empty()) return;
  {
    MutexLock lock(mu_);
    if (ended_ || gone_) return;
    bytes_ += bytes;
  }
  Notify();
}

void LongPoll::End() {
  {
    MutexLock lock(mu_);
    if (ended_ || gone_) return;
    ended_ = true;
  }
  Notify();
}

bool LongPoll::gone() const {
  MutexLock lock(mu_);
  return gone_;
}

void LongPoll::OnGone(std::function<void()> gone) {
  {
    MutexLock lock(mu_);
    if (!gone_) {
      on_gone_ = std::move(gone);
      return;
    }
  }
  gone();
}

void LongPoll::Attach(std::function<void()> ready) {
  bool pending = false;
  {
    MutexLock lock(mu_);
    ready_ = std::move(ready);
    pending = answer_ || ended_ || !bytes_.empty();
  }
  // What was given before the server attached is taken at once.
  if (pending) Notify();
}

LongPoll::Taken LongPoll::Take() {
  MutexLock lock(mu_);
  Taken taken;
  taken.answer = std::move(answer_);
  answer_.reset();
  taken.bytes = std::move(bytes_);
  bytes_.clear();
  taken.ended = ended_;
  return taken;
}

void LongPoll::Detach() {
  std::function<void()> gone;
  {
    MutexLock lock(mu_);
    if (gone_) return;
    gone_ = true;
    ready_ = nullptr;
    gone = std::move(on_gone_);
    on_gone_ = nullptr;
  }
  if (gone) gone();
}

void LongPoll::Notify() {
  std::function<void()> ready;
  {
    MutexLock lock(mu_);
    ready = ready_;
  }
  if (ready) ready();
}

}  // namespace baton::http

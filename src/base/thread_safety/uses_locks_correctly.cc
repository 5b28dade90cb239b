// Must compile cleanly under -Wthread-safety -Werror=thread-safety: the patterns the
// engine uses (a scoped lock, a condition variable wait with an annotated predicate,
// dropping the lock around a call and taking it back, a REQUIRES helper) raise no
// warning. Checked by the CTest test thread_safety_accepts_correct_locking.
#include <condition_variable>

#include "base/mutex.h"

namespace {

class Queue {
 public:
  void Put(int v) BATON_EXCLUDES(mu_) {
    {
      baton::MutexLock lock(mu_);
      AddLocked(v);
    }
    cv_.notify_one();
  }

  int TakeAndCall() BATON_EXCLUDES(mu_) {
    baton::MutexLock lock(mu_);
    cv_.wait(lock, [&]() BATON_REQUIRES(mu_) { return count_ > 0; });
    int v = --count_;
    lock.unlock();
    Callback();  // never under the lock
    lock.lock();
    return v + count_;
  }

 private:
  void AddLocked(int v) BATON_REQUIRES(mu_) { count_ += v; }
  void Callback() BATON_EXCLUDES(mu_) {}

  baton::Mutex mu_;
  std::condition_variable_any cv_;
  int count_ BATON_GUARDED_BY(mu_) = 0;
};

}  // namespace

int main() {
  Queue q;
  q.Put(1);
  return q.TakeAndCall();
}

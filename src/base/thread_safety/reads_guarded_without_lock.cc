// Must NOT compile under -Wthread-safety -Werror=thread-safety: the CTest test
// thread_safety_catches_unlocked_read expects the compiler to name the missing lock.
// It proves that the `thread-safety` preset's check bites.
#include "base/mutex.h"

namespace {

class Counter {
 public:
  int Peek() const { return value_; }  // reads a guarded member without mu_

 private:
  mutable baton::Mutex mu_;
  int value_ BATON_GUARDED_BY(mu_) = 0;
};

}  // namespace

int main() { return Counter().Peek(); }

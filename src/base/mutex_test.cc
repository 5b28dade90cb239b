#include "base/mutex.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <optional>
#include <thread>

namespace baton {
namespace {

TEST(MutexTest, MutexLockExcludesOtherThreadsUntilItEnds) {
  Mutex mu;
  std::optional<MutexLock> held(std::in_place, mu);
  EXPECT_FALSE(mu.try_lock());  // held by `held`
  held.reset();
  ASSERT_TRUE(mu.try_lock());
  mu.unlock();
}

TEST(MutexTest, MutexLockUnlockAndLockReleaseAndRetake) {
  Mutex mu;
  MutexLock lock(mu);
  lock.unlock();
  ASSERT_TRUE(mu.try_lock());  // released
  mu.unlock();
  lock.lock();
  EXPECT_FALSE(mu.try_lock());  // taken again; the destructor releases it
}

TEST(MutexTest, DestructorDoesNotUnlockWhatUnlockReleased) {
  Mutex mu;
  {
    MutexLock lock(mu);
    lock.unlock();
  }  // must not unlock a second time
  ASSERT_TRUE(mu.try_lock());
  mu.unlock();
}

TEST(MutexTest, ConditionVariableAnyWaitsOnAMutexLock) {
  Mutex mu;
  std::condition_variable_any cv;
  bool ready = false;
  bool woke = false;
  std::thread waiter([&] {
    MutexLock lock(mu);
    cv.wait(lock, [&] { return ready; });
    woke = true;
  });
  {
    MutexLock lock(mu);
    ready = true;
  }
  cv.notify_all();
  waiter.join();
  EXPECT_TRUE(woke);
}

}  // namespace
}  // namespace baton

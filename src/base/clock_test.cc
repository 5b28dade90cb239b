#include "base/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "testing/fake_clock.h"
#include "testing/wait_for.h"

namespace baton {
namespace {

using std::chrono::milliseconds;

TEST(ThreadTimersTest, RunsCallbacksInDeadlineOrder) {
  auto timers = NewThreadTimers();
  SystemClock clock;
  std::mutex mu;
  std::vector<int> order;
  auto now = clock.Now();
  timers->Schedule(now + milliseconds(60), [&] {
    std::lock_guard l(mu);
    order.push_back(2);
  });
  timers->Schedule(now + milliseconds(20), [&] {
    std::lock_guard l(mu);
    order.push_back(1);
  });
  ASSERT_TRUE(testing::WaitFor([&] {
    std::lock_guard l(mu);
    return order.size() == 2;
  }));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(ThreadTimersTest, CancelledTimersDoNotRun) {
  auto timers = NewThreadTimers();
  SystemClock clock;
  std::atomic<int> runs{0};
  TimerId id = timers->Schedule(clock.Now() + milliseconds(30), [&] { ++runs; });
  timers->Cancel(id);
  timers->Schedule(clock.Now() + milliseconds(60), [&] { runs += 10; });
  ASSERT_TRUE(testing::WaitFor([&] { return runs.load() >= 10; }));
  EXPECT_EQ(runs.load(), 10);
}

// Regression: the timer thread waited on a reference to the deadline of the earliest
// timer; cancelling that timer freed it under the waiting thread.
TEST(ThreadTimersTest, CancellingTheTimerBeingWaitedOnIsSafe) {
  auto timers = NewThreadTimers();
  SystemClock clock;
  std::atomic<int> runs{0};
  TimerId first = timers->Schedule(clock.Now() + milliseconds(150), [&] { runs += 100; });
  std::this_thread::sleep_for(milliseconds(20));  // let the thread start waiting on it
  timers->Cancel(first);
  timers->Schedule(clock.Now() + milliseconds(10), [&] { ++runs; });
  ASSERT_TRUE(testing::WaitFor([&] { return runs.load() == 1; }));
  std::this_thread::sleep_for(milliseconds(200));  // past the cancelled deadline
  EXPECT_EQ(runs.load(), 1);
}

TEST(ThreadTimersTest, DestroyingDropsPendingTimers) {
  std::atomic<int> runs{0};
  {
    auto timers = NewThreadTimers();
    SystemClock clock;
    timers->Schedule(clock.Now() + std::chrono::hours(1), [&] { ++runs; });
  }
  EXPECT_EQ(runs.load(), 0);
}

TEST(FakeClockTest, AdvanceRunsWhatFallsDue) {
  testing::FakeClock clock;
  auto start = clock.Now();
  std::vector<int> ran;
  clock.Schedule(start + milliseconds(100), [&] { ran.push_back(1); });
  clock.Schedule(start + milliseconds(300), [&] { ran.push_back(3); });
  clock.Advance(milliseconds(150));
  EXPECT_EQ(ran, (std::vector<int>{1}));
  EXPECT_EQ(clock.Now(), start + milliseconds(150));
  clock.Advance(milliseconds(150));
  EXPECT_EQ(ran, (std::vector<int>{1, 3}));
}

}  // namespace
}  // namespace baton

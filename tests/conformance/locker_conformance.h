// The Locker contract as tests. Instantiate with a factory of lockers that share one
// lock space (for a distributed locker: two clients of the same database), e.g.
//   INSTANTIATE_TEST_SUITE_P(InProcess, LockerConformanceTest, ::testing::Values(...));
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "locker/locker.h"

namespace baton::conformance {

struct LockerFactory {
  std::string name;
  // Returns two lockers over the same lock space (they may be the same object).
  std::function<std::pair<std::shared_ptr<Locker>, std::shared_ptr<Locker>>()> make;
};

inline std::string PrintToString(const LockerFactory& f) { return f.name; }

class LockerConformanceTest : public ::testing::TestWithParam<LockerFactory> {
 protected:
  void SetUp() override { std::tie(a_, b_) = GetParam().make(); }
  std::string Name(const std::string& suffix) {
    static std::atomic<int> counter{0};
    return std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "." +
           std::to_string(std::random_device{}()) + "." + std::to_string(++counter) + suffix;
  }
  std::shared_ptr<Locker> a_, b_;
};

TEST_P(LockerConformanceTest, AcquiresAFreeLock) {
  auto lock = a_->TryAcquire(Name("x"));
  EXPECT_TRUE(lock.ok()) << lock.status().message();
}

TEST_P(LockerConformanceTest, AHeldLockCannotBeTakenAgain) {
  std::string name = Name("x");
  auto first = a_->TryAcquire(name);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(b_->TryAcquire(name).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(a_->TryAcquire(name).status().code(), StatusCode::kFailedPrecondition);
}

TEST_P(LockerConformanceTest, ReleasingMakesItFreeAgain) {
  std::string name = Name("x");
  {
    auto first = a_->TryAcquire(name);
    ASSERT_TRUE(first.ok());
  }
  EXPECT_TRUE(b_->TryAcquire(name).ok());
}

TEST_P(LockerConformanceTest, NamesAreIndependent) {
  auto x = a_->TryAcquire(Name("x"));
  auto y = b_->TryAcquire(Name("y"));
  EXPECT_TRUE(x.ok());
  EXPECT_TRUE(y.ok());
}

TEST_P(LockerConformanceTest, OnlyOneOfManyContendersWins) {
  std::string name = Name("x");
  std::atomic<int> winners{0};
  std::vector<std::unique_ptr<Lock>> held(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto lock = (i % 2 ? a_ : b_)->TryAcquire(name);
      if (lock.ok()) {
        ++winners;
        held[static_cast<std::size_t>(i)] = std::move(*lock);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST_P(LockerConformanceTest, EmptyNameIsRefused) {
  EXPECT_EQ(a_->TryAcquire("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a_->Acquire("", std::chrono::milliseconds(10)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_P(LockerConformanceTest, AcquireTakesAFreeLockAtOnce) {
  std::string name = Name("x");
  auto lock = a_->Acquire(name, std::chrono::seconds(5));
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  EXPECT_EQ(b_->TryAcquire(name).status().code(), StatusCode::kFailedPrecondition);
}

TEST_P(LockerConformanceTest, AcquireTimesOutWhileHeld) {
  std::string name = Name("x");
  auto held = a_->TryAcquire(name);
  ASSERT_TRUE(held.ok());
  auto start = std::chrono::steady_clock::now();
  auto waited = b_->Acquire(name, std::chrono::milliseconds(200));
  EXPECT_EQ(waited.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
}

TEST_P(LockerConformanceTest, AcquireWaitsForTheRelease) {
  std::string name = Name("x");
  auto held = a_->TryAcquire(name);
  ASSERT_TRUE(held.ok());
  std::atomic<bool> released{false};
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    released = true;
    held->reset();
  });
  auto waited = b_->Acquire(name, std::chrono::seconds(10));
  EXPECT_TRUE(waited.ok()) << waited.status().message();
  EXPECT_TRUE(released.load());
  releaser.join();
}

TEST_P(LockerConformanceTest, AcquireSerialisesCriticalSections) {
  // Many threads increment a plain counter under the lock: with mutual exclusion no
  // increment is lost and no two sections overlap.
  std::string name = Name("x");
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  int counter = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < 25; ++n) {
        auto lock = (i % 2 ? a_ : b_)->Acquire(name, std::chrono::seconds(30));
        ASSERT_TRUE(lock.ok()) << lock.status().message();
        if (inside.fetch_add(1) != 0) ++overlaps;
        int seen = counter;
        std::this_thread::yield();
        counter = seen + 1;
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 100);
  EXPECT_EQ(overlaps.load(), 0);
}

}  // namespace baton::conformance

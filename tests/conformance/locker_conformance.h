// The Locker contract as tests. Instantiate with a factory of lockers that share one
// lock space (for a distributed locker: two clients of the same database), e.g.
//   INSTANTIATE_TEST_SUITE_P(InProcess, LockerConformanceTest, ::testing::Values(...));
#pragma once

#include <gtest/gtest.h>

#include <atomic>
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
}

}  // namespace baton::conformance

#include <gtest/gtest.h>

#include "conformance/locker_conformance.h"

namespace baton {
namespace {

using conformance::LockerConformanceTest;

INSTANTIATE_TEST_SUITE_P(InProcess, LockerConformanceTest,
                         ::testing::Values(conformance::LockerFactory{
                             "InProcess",
                             [] {
                               std::shared_ptr<Locker> locker = NewInProcessLocker();
                               return std::pair{locker, locker};
                             }}),
                         [](const auto& info) { return info.param.name; });

TEST(InProcessLockerTest, ALockMayOutliveItsLocker) {
  std::unique_ptr<Lock> lock;
  {
    auto locker = NewInProcessLocker();
    auto acquired = locker->TryAcquire("x");
    ASSERT_TRUE(acquired.ok());
    lock = std::move(*acquired);
  }
  lock.reset();  // must not touch freed memory
}

}  // namespace
}  // namespace baton

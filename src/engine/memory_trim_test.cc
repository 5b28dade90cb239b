#include "engine/memory_trim.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

constexpr std::size_t kMB = 1 << 20;

TEST(TrimPolicyTest, TrimsOnceABurstOfFreesPassesTheThreshold) {
  TrimPolicy policy(8 * kMB);
  EXPECT_FALSE(policy.ShouldTrim(2 * kMB));  // idle
  EXPECT_FALSE(policy.ShouldTrim(7 * kMB));
  EXPECT_TRUE(policy.ShouldTrim(60 * kMB));  // a big job's memory freed
  policy.Trimmed(58 * kMB);                  // given back, still counted as free
  // The same heap at the next looks: nothing new to give back.
  EXPECT_FALSE(policy.ShouldTrim(58 * kMB));
  EXPECT_FALSE(policy.ShouldTrim(60 * kMB));
}

TEST(TrimPolicyTest, MemoryReusedThenFreedAgainIsTrimmedAgain) {
  TrimPolicy policy(8 * kMB);
  ASSERT_TRUE(policy.ShouldTrim(60 * kMB));
  policy.Trimmed(60 * kMB);
  EXPECT_FALSE(policy.ShouldTrim(10 * kMB));  // the next big job took it back
  EXPECT_FALSE(policy.ShouldTrim(17 * kMB));
  EXPECT_TRUE(policy.ShouldTrim(50 * kMB));  // and freed it when it ended
}

TEST(MemoryTrimmerTest, StartsStopsAndStartsAgain) {
  MemoryTrimmer trimmer;
  trimmer.Start();
  trimmer.Start();  // a no-op while it runs
  trimmer.Stop();   // returns at once: the thread waits on the stop token, not a sleep
  trimmer.Start();
  trimmer.Stop();
  trimmer.Stop();
}

}  // namespace
}  // namespace baton

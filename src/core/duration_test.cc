#include "core/duration.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(DurationTest, ParsesGoStyleDurations) {
  EXPECT_EQ(*ParseDuration("500ms"), milliseconds(500));
  EXPECT_EQ(*ParseDuration("5s"), seconds(5));
  EXPECT_EQ(*ParseDuration("1m30s"), seconds(90));
  EXPECT_EQ(*ParseDuration("2h"), hours(2));
  EXPECT_EQ(*ParseDuration("1.5h"), minutes(90));
  EXPECT_EQ(*ParseDuration("2h45m10s"), hours(2) + minutes(45) + seconds(10));
  EXPECT_EQ(*ParseDuration("0"), milliseconds(0));
  EXPECT_EQ(*ParseDuration("1500us"), milliseconds(2));  // rounds up to whole ms
  EXPECT_EQ(*ParseDuration("+3s"), seconds(3));
}

TEST(DurationTest, RejectsMalformedDurationsWithAReason) {
  EXPECT_EQ(ParseDuration("10").status().message(),
            "invalid duration \"10\": missing unit (use e.g. 500ms, 30s, 1m30s, 2h)");
  EXPECT_EQ(ParseDuration("5 minutes").status().message(),
            "invalid duration \"5 minutes\": unknown unit \" minutes\" (use e.g. 500ms, 30s, "
            "1m30s, 2h)");
  EXPECT_EQ(ParseDuration("-1s").status().message(),
            "invalid duration \"-1s\": must not be negative (use e.g. 500ms, 30s, 1m30s, 2h)");
  EXPECT_FALSE(ParseDuration("").ok());
  EXPECT_FALSE(ParseDuration("s").ok());
  EXPECT_FALSE(ParseDuration("1..5s").ok());
  EXPECT_FALSE(ParseDuration("99999999999999h").ok());
}

TEST(DurationTest, FormatsLikeGo) {
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  EXPECT_EQ(FormatDuration(milliseconds(500)), "500ms");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(FormatDuration(seconds(90)), "1m30s");
  EXPECT_EQ(FormatDuration(hours(2)), "2h0m0s");
}

TEST(DurationTest, FormatThenParseIsIdentity) {
  for (std::int64_t ms : {1LL, 999LL, 1000LL, 1001LL, 61'000LL, 3'600'001LL, 90'061'250LL}) {
    EXPECT_EQ(ParseDuration(FormatDuration(milliseconds(ms)))->count(), ms) << ms;
  }
}

TEST(MemoryTest, ParsesDockerAndKubernetesUnits) {
  EXPECT_EQ(*ParseMemory("512k"), 512 * 1024);
  EXPECT_EQ(*ParseMemory("64m"), 64LL << 20);
  EXPECT_EQ(*ParseMemory("64M"), 64LL << 20);
  EXPECT_EQ(*ParseMemory("64mb"), 64LL << 20);
  EXPECT_EQ(*ParseMemory("64Mi"), 64LL << 20);
  EXPECT_EQ(*ParseMemory("1g"), 1LL << 30);
  EXPECT_EQ(*ParseMemory("1Gi"), 1LL << 30);
  EXPECT_EQ(*ParseMemory("1.5g"), 3LL << 29);
  EXPECT_EQ(*ParseMemory("1048576"), 1LL << 20);
}

TEST(MemoryTest, RejectsMalformedSizesWithAReason) {
  EXPECT_EQ(ParseMemory("64x").status().message(),
            "invalid memory size \"64x\": unknown unit \"x\" (use e.g. 512k, 64m, 1g, 64Mi)");
  EXPECT_EQ(ParseMemory("lots").status().message(),
            "invalid memory size \"lots\": expected a number (use e.g. 512k, 64m, 1g, 64Mi)");
  EXPECT_FALSE(ParseMemory("0").ok());
  EXPECT_FALSE(ParseMemory("").ok());
  EXPECT_FALSE(ParseMemory("99999999999t").ok());
}

TEST(MemoryTest, FormatsWithTheLargestExactUnit) {
  EXPECT_EQ(FormatMemory(64LL << 20), "64m");
  EXPECT_EQ(FormatMemory(1LL << 30), "1g");
  EXPECT_EQ(FormatMemory(1536 * 1024), "1536k");
  EXPECT_EQ(FormatMemory(100), "100");
  EXPECT_EQ(*ParseMemory(FormatMemory(3LL << 29)), 3LL << 29);
}

}  // namespace
}  // namespace baton

#include "base/process.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace baton {
namespace {

TEST(ProcessTest, ResidentBytesGrowsWhenMemoryIsTouched) {
  std::int64_t before = ResidentBytes();
  ASSERT_GT(before, 0);
  constexpr std::size_t kBytes = 64 << 20;
  auto block = std::make_unique<char[]>(kBytes);
  std::memset(block.get(), 1, kBytes);
  std::int64_t after = ResidentBytes();
  EXPECT_GE(after - before, static_cast<std::int64_t>(kBytes) / 2)
      << "before " << before << ", after " << after;
  EXPECT_EQ(block[kBytes - 1], 1);
}

}  // namespace
}  // namespace baton

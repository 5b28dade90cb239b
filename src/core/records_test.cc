#include "core/records.h"

#include <gtest/gtest.h>

#include <set>

#include <sys/wait.h>
#include <unistd.h>

namespace baton {
namespace {

TEST(RecordsTest, TimesFormatAsRfc3339UtcWithMilliseconds) {
  TimePoint t{std::chrono::milliseconds(1'796'071'831'123)};
  EXPECT_EQ(FormatTime(t), "2026-11-30T20:50:31.123Z");
  EXPECT_EQ(FormatTime(TimePoint{}), "1970-01-01T00:00:00.000Z");
}

TEST(RecordsTest, TimesParseBack) {
  TimePoint now = Now();
  EXPECT_EQ(ParseTime(FormatTime(now)), now);
  EXPECT_EQ(ParseTime("2026-11-30T20:50:31Z"), TimePoint{std::chrono::milliseconds(1'796'071'831'000)});
  EXPECT_EQ(ParseTime("2026-11-30T20:50:31.5Z"), TimePoint{std::chrono::milliseconds(1'796'071'831'500)});
  EXPECT_FALSE(ParseTime("2026-11-30 21:17:11").has_value());
  EXPECT_FALSE(ParseTime("2026-13-30T21:17:11Z").has_value());
  EXPECT_FALSE(ParseTime("yesterday").has_value());
}

TEST(RecordsTest, IdsAre32HexCharactersAndUnique) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    std::string id = NewId();
    ASSERT_EQ(id.size(), 32u);
    ASSERT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1000u);
}

// A forked child draws other ids than its parent, even when the parent drew some before
// the fork (the generator's state is copied into the child).
TEST(RecordsTest, AForkedChildDrawsOtherIdsThanItsParent) {
  (void)NewId();  // the parent's generator is in use before the fork
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string id = NewId();
    (void)!write(fds[1], id.data(), id.size());
    _exit(0);
  }
  close(fds[1]);
  char buf[33] = {};
  ASSERT_EQ(read(fds[0], buf, 32), 32);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_NE(std::string(buf, 32), NewId());
}

}  // namespace
}  // namespace baton

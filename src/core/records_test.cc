#include "core/records.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>

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
  EXPECT_EQ(ParseTime("2026-11-30T20:50:31Z"),
            TimePoint{std::chrono::milliseconds(1'796'071'831'000)});
  EXPECT_EQ(ParseTime("2026-11-30T20:50:31.5Z"),
            TimePoint{std::chrono::milliseconds(1'796'071'831'500)});
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
  // The random part: the time part may differ anyway.
  EXPECT_NE(std::string(buf + 12, 20), NewId().substr(12));
}

// Ids sort in the order they were made (rows keyed by them are appended to their
// indexes): the first twelve characters are the time in milliseconds.
TEST(RecordsTest, IdsMadeLaterSortAfterEarlierOnes) {
  std::string first = NewId();
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  std::uint64_t stamp = std::stoull(first.substr(0, 12), nullptr, 16);
  EXPECT_LE(static_cast<std::int64_t>(stamp), now_ms);
  EXPECT_GE(static_cast<std::int64_t>(stamp), now_ms - 60'000);
  std::string previous = first;
  for (int i = 0; i < 5; ++i) {
    std::string next;
    do {
      next = NewId();
    } while (next.compare(0, 12, previous, 0, 12) == 0);  // until the next millisecond
    EXPECT_LT(previous, next);
    previous = next;
  }
}

}  // namespace
}  // namespace baton

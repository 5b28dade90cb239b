#include "core/cron.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/records.h"

namespace baton {
namespace {

using ::testing::HasSubstr;

TimePoint At(std::string_view text) {
  std::optional<TimePoint> t = ParseTime(text);
  EXPECT_TRUE(t.has_value()) << text;
  return t.value_or(TimePoint{});
}

CronSchedule Cron(std::string_view text) {
  Result<CronSchedule> cron = CronSchedule::Parse(text);
  EXPECT_TRUE(cron.ok()) << text << ": " << cron.status().ToString();
  return cron.ok() ? *cron : *CronSchedule::Parse("* * * * *");
}

TimeZone Zone(std::string_view name) {
  Result<TimeZone> zone = TimeZone::Find(name);
  EXPECT_TRUE(zone.ok()) << name << ": " << zone.status().ToString();
  return zone.ok() ? *zone : TimeZone();
}

// The next `n` ticks after `from`, as RFC 3339 UTC.
std::vector<std::string> Ticks(const CronSchedule& cron, const TimeZone& zone,
                               std::string_view from, int n) {
  std::vector<std::string> out;
  TimePoint t = At(from);
  for (int i = 0; i < n; ++i) {
    std::optional<TimePoint> next = cron.Next(t, zone);
    if (!next) break;
    out.push_back(FormatTime(*next));
    t = *next;
  }
  return out;
}

TEST(CronTest, EveryMinuteTicksAtTheNextWholeMinute) {
  EXPECT_THAT(Ticks(Cron("* * * * *"), TimeZone(), "2026-05-01T12:00:30.500Z", 3),
              ::testing::ElementsAre("2026-05-01T12:01:00.000Z", "2026-05-01T12:02:00.000Z",
                                     "2026-05-01T12:03:00.000Z"));
}

TEST(CronTest, TickExactlyAtAfterIsNotRepeated) {
  EXPECT_EQ(FormatTime(*Cron("*/5 * * * *").Next(At("2026-05-01T12:05:00Z"), TimeZone())),
            "2026-05-01T12:10:00.000Z");
}

TEST(CronTest, StepsRangesListsAndNames) {
  // 2026-05-01 is a Friday.
  EXPECT_THAT(Ticks(Cron("0,30 9-10 * * mon-FRI"), TimeZone(), "2026-05-01T09:10:00Z", 4),
              ::testing::ElementsAre("2026-05-01T09:30:00.000Z", "2026-05-01T10:00:00.000Z",
                                     "2026-05-01T10:30:00.000Z", "2026-05-04T09:00:00.000Z"));
  EXPECT_THAT(Ticks(Cron("10/20 * * * *"), TimeZone(), "2026-05-01T09:00:00Z", 4),
              ::testing::ElementsAre("2026-05-01T09:10:00.000Z", "2026-05-01T09:30:00.000Z",
                                     "2026-05-01T09:50:00.000Z", "2026-05-01T10:10:00.000Z"));
  EXPECT_THAT(Ticks(Cron("0 0 1 jan,Jul *"), TimeZone(), "2026-05-01T00:00:00Z", 2),
              ::testing::ElementsAre("2026-07-01T00:00:00.000Z", "2027-01-01T00:00:00.000Z"));
  EXPECT_THAT(Ticks(Cron("0 12 * * ?"), TimeZone(), "2026-05-01T13:00:00Z", 1),
              ::testing::ElementsAre("2026-05-02T12:00:00.000Z"));
}

TEST(CronTest, SundayIsZeroAndSeven) {
  // 2026-05-03 is a Sunday.
  EXPECT_EQ(FormatTime(*Cron("0 8 * * 0").Next(At("2026-05-01T00:00:00Z"), TimeZone())),
            "2026-05-03T08:00:00.000Z");
  EXPECT_EQ(FormatTime(*Cron("0 8 * * 7").Next(At("2026-05-01T00:00:00Z"), TimeZone())),
            "2026-05-03T08:00:00.000Z");
}

TEST(CronTest, RestrictedDayOfMonthAndDayOfWeekMatchEither) {
  // The 15th, or any Monday: Monday 2026-05-04, Monday 05-11, Friday 05-15.
  EXPECT_THAT(Ticks(Cron("0 0 15 * 1"), TimeZone(), "2026-05-01T00:00:00Z", 3),
              ::testing::ElementsAre("2026-05-04T00:00:00.000Z", "2026-05-11T00:00:00.000Z",
                                     "2026-05-15T00:00:00.000Z"));
  // With a star in day of week, both must match: only the 15th of every month (any day).
  EXPECT_THAT(Ticks(Cron("0 0 15 * *"), TimeZone(), "2026-05-01T00:00:00Z", 2),
              ::testing::ElementsAre("2026-05-15T00:00:00.000Z", "2026-06-15T00:00:00.000Z"));
}

// As robfig/cron v3 (Tork's): a star with a step above 1 restricts its field, so a
// stepped day of month with a restricted day of week still matches either.
TEST(CronTest, AStarWithAStepRestrictsItsDayFieldAndAStarInAListDoesNot) {
  // Days 1, 8, 15, 22, 29 of March, or a Sunday of March. The fuzzer found this one: read
  // as a star it fired only when March 1 is a Sunday (2026, then 2037), and Next gave up
  // after kSearchYears.
  EXPECT_THAT(Ticks(Cron("0 0 ?/7 3 0"), TimeZone(), "2026-03-08T05:00:00Z", 5),
              ::testing::ElementsAre("2026-03-15T00:00:00.000Z", "2026-03-22T00:00:00.000Z",
                                     "2026-03-29T00:00:00.000Z", "2027-03-01T00:00:00.000Z",
                                     "2027-03-07T00:00:00.000Z"));
  // `*/1` is a star: the 15th only, whatever its weekday.
  EXPECT_THAT(Ticks(Cron("0 0 15 * */1"), TimeZone(), "2026-05-01T00:00:00Z", 2),
              ::testing::ElementsAre("2026-05-15T00:00:00.000Z", "2026-06-15T00:00:00.000Z"));
  // A star anywhere in a list makes the field a star: Mondays only (2026-05-04, 05-11).
  EXPECT_THAT(Ticks(Cron("0 0 3,* * 1"), TimeZone(), "2026-05-01T00:00:00Z", 2),
              ::testing::ElementsAre("2026-05-04T00:00:00.000Z", "2026-05-11T00:00:00.000Z"));
}

TEST(CronTest, DescriptorsAreTheirFiveFieldForms) {
  const std::pair<std::string_view, std::string_view> pairs[] = {
      {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
      {"@HOURLY", "0 * * * *"}};
  for (auto [descriptor, fields] : pairs) {
    EXPECT_EQ(Ticks(Cron(descriptor), TimeZone(), "2026-05-01T10:20:00Z", 3),
              Ticks(Cron(fields), TimeZone(), "2026-05-01T10:20:00Z", 3))
        << descriptor;
  }
  EXPECT_EQ(Cron("  @daily ").text(), "@daily");
}

TEST(CronTest, LeapDayFiresOnlyInLeapYears) {
  EXPECT_EQ(FormatTime(*Cron("0 0 29 2 *").Next(At("2026-05-01T00:00:00Z"), TimeZone())),
            "2028-02-29T00:00:00.000Z");
}

TEST(CronTest, RefusesMalformedExpressionsNamingWhatIsWrong) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"", "expected 5 fields"},
      {"* * * *", "expected 5 fields"},
      {"* * * * * *", "expected 5 fields"},
      {"60 * * * *", "minute: 60 is out of range 0-59"},
      {"* 24 * * *", "hour: 24 is out of range 0-23"},
      {"* * 0 * *", "day of month: 0 is out of range 1-31"},
      {"* * * 13 *", "month: 13 is out of range 1-12"},
      {"* * * * 8", "day of week: 8 is out of range 0-7"},
      {"* * * foo *", "month: \"foo\" is not a number or a name"},
      {"*/0 * * * *", "minute: step \"0\" must be a number from 1 to 60"},
      {"*/x * * * *", "minute: step \"x\""},
      {"5-2 * * * *", "minute: range 5-2 starts after it ends"},
      {"1-2-3 * * * *", "has more than one -"},
      {"*/2/3 * * * *", "has more than one /"},
      {"1,,2 * * * *", "minute: a value is missing"},
      {"0 0 30 2 *", "never fires"},
      {"0 0 31 4,6 *", "never fires"},
      {"@every 1h", "@every is not supported"},
      {"@often", "unknown descriptor"},
  };
  for (auto [text, message] : cases) {
    Result<CronSchedule> cron = CronSchedule::Parse(text);
    ASSERT_FALSE(cron.ok()) << text;
    EXPECT_EQ(cron.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(cron.status().message(), HasSubstr(message)) << text;
    EXPECT_THAT(cron.status().message(), ::testing::StartsWith("cron: ")) << text;
  }
}

TEST(CronTest, ZoneShiftsTicksToLocalWallClock) {
  // 09:00 in Paris is 08:00 UTC in winter (CET) and 07:00 UTC in summer (CEST).
  TimeZone paris = Zone("Europe/Paris");
  EXPECT_EQ(paris.name(), "Europe/Paris");
  EXPECT_EQ(FormatTime(*Cron("0 9 * * *").Next(At("2026-01-10T12:00:00Z"), paris)),
            "2026-01-11T08:00:00.000Z");
  EXPECT_EQ(FormatTime(*Cron("0 9 * * *").Next(At("2026-07-10T12:00:00Z"), paris)),
            "2026-07-11T07:00:00.000Z");
  EXPECT_EQ(paris.LocalText(At("2026-07-11T07:00:00Z")), "2026-07-11 09:00");
}

TEST(CronTest, LocalTimeSkippedBySpringForwardFiresOnceWhenTheGapEnds) {
  // New York, 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00 UTC); 02:30 never happens.
  TimeZone ny = Zone("America/New_York");
  EXPECT_THAT(Ticks(Cron("30 2 * * *"), ny, "2026-03-07T12:00:00Z", 2),
              ::testing::ElementsAre("2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z"));
  // Every quarter hour: the ticks of the missing hour and 03:00 itself are one tick.
  EXPECT_THAT(Ticks(Cron("*/15 * * * *"), ny, "2026-03-08T06:40:00Z", 3),
              ::testing::ElementsAre("2026-03-08T06:45:00.000Z", "2026-03-08T07:00:00.000Z",
                                     "2026-03-08T07:15:00.000Z"));
}

TEST(CronTest, LocalTimeRepeatedByFallBackFiresOnce) {
  // New York, 2026-11-01: 02:00 EDT becomes 01:00 EST (06:00 UTC); 01:30 happens twice.
  TimeZone ny = Zone("America/New_York");
  EXPECT_THAT(Ticks(Cron("30 1 * * *"), ny, "2026-10-31T12:00:00Z", 2),
              ::testing::ElementsAre("2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"));
  // Hourly: 01:00 EDT, then not 01:00 EST again, then 02:00 EST.
  EXPECT_THAT(Ticks(Cron("0 * * * *"), ny, "2026-11-01T04:30:00Z", 2),
              ::testing::ElementsAre("2026-11-01T05:00:00.000Z", "2026-11-01T07:00:00.000Z"));
}

TEST(CronTest, UnknownZoneIsRefusedWithItsName) {
  Result<TimeZone> zone = TimeZone::Find("Mars/Olympus");
  ASSERT_FALSE(zone.ok());
  EXPECT_EQ(zone.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(zone.status().message(), HasSubstr("Mars/Olympus"));
  EXPECT_EQ(TimeZone::Find("UTC")->name(), "UTC");
  EXPECT_EQ(TimeZone::Find("")->name(), "UTC");
}

}  // namespace
}  // namespace baton

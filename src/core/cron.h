// Cron schedules: Tork's 5-field cron (robfig/cron's standard parser) and the ticks it
// gives in an IANA time zone. Hand-written: no Debian package parses cron.
//
// Syntax: "minute hour day-of-month month day-of-week", fields separated by blanks. A
// field is a comma list of `*` (or `?`), `N`, `N-M`, each optionally followed by `/STEP`
// (`N/STEP` is N to the field's maximum). Months accept JAN..DEC and days of the week
// SUN..SAT (any case); day of week 0 and 7 are Sunday. When both day of month and day
// of week are restricted (neither starts with `*` or `?`), a day matching either fires
// (Vixie cron and robfig/cron agree). Descriptors: @yearly (@annually), @monthly,
// @weekly, @daily (@midnight), @hourly. `@every` is refused: it is not a cron.
//
// Time zones (Next): ticks are local wall-clock times of the zone. A local time the zone
// skips (spring forward) fires once, at the instant the gap ends; a local time the zone
// repeats (fall back) fires once, at its first occurrence.
//
// Thread-safety: values; const methods may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"

namespace date {
class time_zone;
}

namespace baton {

// An IANA zone read from the system's tz database (the tzdata package), or UTC.
class TimeZone {
 public:
  TimeZone() = default;  // UTC
  // "" and "UTC" are UTC; otherwise an IANA name ("Europe/Paris"). kInvalidArgument for a
  // name the tz database does not know.
  static Result<TimeZone> Find(std::string_view name);
  // The name as given to Find ("UTC" for the default).
  const std::string& name() const { return name_; }
  // Minutes east of UTC at `at`.
  std::chrono::minutes OffsetAt(TimePoint at) const;
  // `at` as the zone's local wall-clock time, "YYYY-MM-DD HH:MM" (for messages and tests).
  std::string LocalText(TimePoint at) const;

 private:
  const date::time_zone* zone_ = nullptr;  // null: UTC
  std::string name_ = "UTC";
  friend class CronSchedule;
};

class CronSchedule {
 public:
  // kInvalidArgument naming the field and what is wrong with it. A schedule that never
  // fires (`0 0 30 2 *`) is refused too.
  static Result<CronSchedule> Parse(std::string_view text);

  // The first tick strictly after `after` in `zone`; nullopt when there is none within
  // kSearchYears (only for schedules Parse refuses).
  std::optional<TimePoint> Next(TimePoint after, const TimeZone& zone) const;

  // The expression as written (trimmed).
  const std::string& text() const { return text_; }

  // Whether the local wall-clock time matches (fields as in struct tm: month 1..12,
  // day_of_week 0..6 with 0 Sunday).
  bool Matches(int month, int day, int day_of_week, int hour, int minute) const;

  static constexpr int kSearchYears = 9;

 private:
  std::uint64_t minutes_ = 0;  // bit i: minute i
  std::uint32_t hours_ = 0;
  std::uint32_t days_ = 0;     // bits 1..31
  std::uint16_t months_ = 0;   // bits 1..12
  std::uint8_t weekdays_ = 0;  // bits 0..6
  bool day_star_ = false;      // day of month written as * or ?
  bool weekday_star_ = false;
  std::string text_;
};

}  // namespace baton

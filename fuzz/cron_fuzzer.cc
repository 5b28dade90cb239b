// libFuzzer target for the cron parser. Each input is parsed; a schedule that parses must
// give ticks that are strictly increasing, each matching the expression in UTC, and
// strictly after the previous one in a zone with daylight saving time too. Errors must be
// INVALID_ARGUMENT with a message starting "cron: ".
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/cron.h"

namespace {

using baton::CronSchedule;
using baton::StatusCode;
using baton::TimePoint;
using baton::TimeZone;

const TimeZone& NewYork() {
  static const TimeZone* zone = new TimeZone(*TimeZone::Find("America/New_York"));
  return *zone;
}

// The fields of `at` in UTC, as Matches takes them.
bool MatchesUtc(const CronSchedule& cron, TimePoint at) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(at);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return tm.tm_sec == 0 &&
         cron.Matches(tm.tm_mon + 1, tm.tm_mday, tm.tm_wday, tm.tm_hour, tm.tm_min);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  baton::Result<CronSchedule> cron = CronSchedule::Parse(text);
  if (!cron.ok()) {
    if (cron.status().code() != StatusCode::kInvalidArgument) std::abort();
    if (cron.status().message().rfind("cron: ", 0) != 0) std::abort();
    return 0;
  }
  // 2026-03-08 05:00 UTC: hours before New York springs forward.
  const TimePoint start{std::chrono::milliseconds(1772946000000)};
  for (const TimeZone* zone : {static_cast<const TimeZone*>(nullptr), &NewYork()}) {
    TimeZone utc;
    const TimeZone& z = zone == nullptr ? utc : *zone;
    TimePoint t = start;
    for (int i = 0; i < 4; ++i) {
      std::optional<TimePoint> next = cron->Next(t, z);
      if (!next) std::abort();  // Parse refuses schedules that never fire
      if (*next <= t) std::abort();
      if (zone == nullptr && !MatchesUtc(*cron, *next)) std::abort();
      t = *next;
    }
  }
  return 0;
}

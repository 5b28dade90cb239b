#include "core/cron.h"

#include <date/date.h>
#include <date/tz.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <exception>
#include <vector>

namespace baton {
namespace {

using LocalMinutes = date::local_time<std::chrono::minutes>;

struct FieldSpec {
  std::string_view name;
  int min;
  int max;
  const std::string_view* names;  // names[i] is the value min + i; null for none
  int name_count;
};

constexpr std::string_view kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                            "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::string_view kDayNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

constexpr FieldSpec kFields[] = {
    {"minute", 0, 59, nullptr, 0},       {"hour", 0, 23, nullptr, 0},
    {"day of month", 1, 31, nullptr, 0}, {"month", 1, 12, kMonthNames, 12},
    {"day of week", 0, 7, kDayNames, 7},
};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    std::size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && IsBlank(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !IsBlank(text[i])) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

// A value of the field: a number or (months, days of week) a name.
Result<int> Value(std::string_view text, const FieldSpec& spec) {
  if (text.empty()) return InvalidArgument(fmt::format("{}: a value is missing", spec.name));
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && end == text.data() + text.size()) {
    if (value < spec.min || value > spec.max) {
      return InvalidArgument(
          fmt::format("{}: {} is out of range {}-{}", spec.name, value, spec.min, spec.max));
    }
    return value;
  }
  std::string lower = Lower(text);
  for (int i = 0; i < spec.name_count; ++i) {
    if (lower == spec.names[i]) return spec.min + i;
  }
  std::string shown(text.substr(0, 20));
  return InvalidArgument(fmt::format("{}: \"{}\" is not a number{}", spec.name, shown,
                                     spec.names != nullptr ? " or a name" : ""));
}

// The bits of one field; `star` is set when an item of it is `*` or `?` with no step
// above 1 (as robfig/cron v3: `*/7` restricts the field, `*` and `*/1` do not).
Result<std::uint64_t> ParseField(std::string_view text, const FieldSpec& spec, bool* star) {
  std::uint64_t bits = 0;
  *star = false;
  for (std::string_view item : Split(text, ',')) {
    std::vector<std::string_view> slash = Split(item, '/');
    if (slash.size() > 2) {
      return InvalidArgument(fmt::format("{}: \"{}\" has more than one /", spec.name, item));
    }
    std::string_view range = slash[0];
    int low = 0;
    int high = 0;
    if (range == "*" || range == "?") {
      low = spec.min;
      high = spec.max;
    } else {
      std::vector<std::string_view> dash = Split(range, '-');
      if (dash.size() > 2) {
        return InvalidArgument(fmt::format("{}: \"{}\" has more than one -", spec.name, item));
      }
      BATON_ASSIGN_OR_RETURN(low, Value(dash[0], spec));
      if (dash.size() == 2) {
        BATON_ASSIGN_OR_RETURN(high, Value(dash[1], spec));
        if (high < low) {
          return InvalidArgument(
              fmt::format("{}: range {} starts after it ends", spec.name, range));
        }
      } else {
        high = slash.size() == 2 ? spec.max : low;  // N/STEP runs to the maximum
      }
    }
    int step = 1;
    if (slash.size() == 2) {
      std::string_view s = slash[1];
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
      if (s.empty() || ec != std::errc() || end != s.data() + s.size() || step < 1 ||
          step > spec.max - spec.min + 1) {
        return InvalidArgument(fmt::format("{}: step \"{}\" must be a number from 1 to {}",
                                           spec.name, s.substr(0, 20), spec.max - spec.min + 1));
      }
    }
    if ((range == "*" || range == "?") && step == 1) *star = true;
    for (int v = low; v <= high; v += step) bits |= std::uint64_t{1} << v;
  }
  return bits;
}

std::string_view Descriptor(std::string_view text) {
  std::string lower = Lower(text);
  if (lower == "@yearly" || lower == "@annually") return "0 0 1 1 *";
  if (lower == "@monthly") return "0 0 1 * *";
  if (lower == "@weekly") return "0 0 * * 0";
  if (lower == "@daily" || lower == "@midnight") return "0 0 * * *";
  if (lower == "@hourly") return "0 * * * *";
  return {};
}

}  // namespace

Result<TimeZone> TimeZone::Find(std::string_view name) {
  TimeZone zone;
  if (name.empty() || name == "UTC") return zone;
  try {
    zone.zone_ = date::locate_zone(name);
  } catch (const std::exception&) {
    std::string shown(name.substr(0, 64));
    return InvalidArgument(
        fmt::format("unknown time zone \"{}\" (an IANA name such as "
                    "Europe/Paris is expected)",
                    shown));
  }
  zone.name_ = std::string(name);
  return zone;
}

std::chrono::minutes TimeZone::OffsetAt(TimePoint at) const {
  if (zone_ == nullptr) return std::chrono::minutes(0);
  return std::chrono::duration_cast<std::chrono::minutes>(zone_->get_info(at).offset);
}

std::string TimeZone::LocalText(TimePoint at) const {
  auto local = date::local_time<std::chrono::minutes>(
      std::chrono::floor<std::chrono::minutes>(at.time_since_epoch() + OffsetAt(at)));
  return date::format("%Y-%m-%d %H:%M", local);
}

Result<CronSchedule> CronSchedule::Parse(std::string_view text) {
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  CronSchedule cron;
  cron.text_ = std::string(text);
  std::string_view fields_text = text;
  if (!text.empty() && text[0] == '@') {
    if (Lower(text.substr(0, 6)) == "@every") {
      return InvalidArgument("cron: @every is not supported; write a 5-field cron expression");
    }
    fields_text = Descriptor(text);
    if (fields_text.empty()) {
      return InvalidArgument(fmt::format(
          "cron: unknown descriptor \"{}\" (expected @yearly, @annually, @monthly, @weekly, "
          "@daily, @midnight or @hourly)",
          text.substr(0, 20)));
    }
  }
  std::vector<std::string_view> words = Words(fields_text);
  if (words.size() != 5) {
    return InvalidArgument(
        fmt::format("cron: expected 5 fields (minute hour day-of-month month day-of-week), "
                    "got {}",
                    words.size()));
  }
  std::uint64_t bits[5];
  bool stars[5];
  for (int i = 0; i < 5; ++i) {
    Result<std::uint64_t> field = ParseField(words[i], kFields[i], &stars[i]);
    if (!field.ok()) return InvalidArgument("cron: " + field.status().message());
    bits[i] = *field;
  }
  cron.minutes_ = bits[0];
  cron.hours_ = static_cast<std::uint32_t>(bits[1]);
  cron.days_ = static_cast<std::uint32_t>(bits[2]);
  cron.months_ = static_cast<std::uint16_t>(bits[3]);
  std::uint64_t weekdays = bits[4];
  if (weekdays & (std::uint64_t{1} << 7)) weekdays |= 1;  // 7 is Sunday too
  cron.weekdays_ = static_cast<std::uint8_t>(weekdays & 0x7f);
  cron.day_star_ = stars[2];
  cron.weekday_star_ = stars[4];
  // 2000-01-01 is followed by every calendar day within kSearchYears (a 29 February too).
  const TimePoint from = date::sys_days(date::year{2000} / 1 / 1);
  if (!cron.Next(from, TimeZone()).has_value()) {
    return InvalidArgument(fmt::format("cron: \"{}\" never fires", cron.text_));
  }
  return cron;
}

bool CronSchedule::Matches(int month, int day, int day_of_week, int hour, int minute) const {
  if (!(months_ & (1u << month)) || !(hours_ & (1u << hour)) ||
      !(minutes_ & (std::uint64_t{1} << minute))) {
    return false;
  }
  bool day_match = (days_ & (1u << day)) != 0;
  bool weekday_match = (weekdays_ & (1u << day_of_week)) != 0;
  if (day_star_ || weekday_star_) return day_match && weekday_match;
  return day_match || weekday_match;
}

std::optional<TimePoint> CronSchedule::Next(TimePoint after, const TimeZone& zone) const {
  using std::chrono::days;
  using std::chrono::hours;
  using std::chrono::minutes;
  const auto after_minute = std::chrono::floor<minutes>(after);
  const date::time_zone* tz = zone.zone_;
  LocalMinutes local{(after_minute + zone.OffsetAt(after)).time_since_epoch() + minutes(1)};
  const date::year last_year =
      date::year_month_day(std::chrono::floor<days>(local)).year() + date::years(kSearchYears);
  for (;;) {
    const auto day_start = std::chrono::floor<days>(local);
    const date::year_month_day ymd(day_start);
    if (ymd.year() > last_year) return std::nullopt;
    const int month = static_cast<int>(static_cast<unsigned>(ymd.month()));
    const int day = static_cast<int>(static_cast<unsigned>(ymd.day()));
    const int weekday = static_cast<int>(date::weekday(day_start).c_encoding());
    if (!(months_ & (1u << month))) {
      const date::year_month next_month =
          date::year_month(ymd.year(), ymd.month()) + date::months(1);
      local = LocalMinutes(date::local_days(next_month / 1));
      continue;
    }
    bool day_match = (days_ & (1u << day)) != 0;
    bool weekday_match = (weekdays_ & (1u << weekday)) != 0;
    bool day_ok =
        (day_star_ || weekday_star_) ? day_match && weekday_match : day_match || weekday_match;
    if (!day_ok) {
      local = LocalMinutes(day_start + days(1));
      continue;
    }
    const auto in_day = local - LocalMinutes(day_start);
    const int hour = static_cast<int>(std::chrono::floor<hours>(in_day).count());
    const int minute = static_cast<int>((in_day - hours(hour)).count());
    if (!(hours_ & (1u << hour))) {
      local = LocalMinutes(day_start + hours(hour + 1));
      continue;
    }
    if (!(minutes_ & (std::uint64_t{1} << minute))) {
      local += minutes(1);
      continue;
    }
    // A matching local time: the instant it is in the zone.
    std::optional<TimePoint> at;
    if (tz == nullptr) {
      at = TimePoint(local.time_since_epoch());
    } else {
      const date::local_info info = tz->get_info(local);
      if (info.result == date::local_info::unique) {
        at = TimePoint(local.time_since_epoch() - info.first.offset);
      } else if (info.result == date::local_info::nonexistent) {
        // Skipped by the zone: fires when the gap ends (several skipped ticks are one).
        at = std::chrono::time_point_cast<std::chrono::milliseconds>(info.first.end);
      } else {
        // Repeated: the first occurrence, unless `after` is already past it.
        TimePoint first(local.time_since_epoch() - info.first.offset);
        at = first > after ? first : TimePoint(local.time_since_epoch() - info.second.offset);
      }
    }
    if (*at > after) return at;
    local += minutes(1);
  }
}

}  // namespace baton

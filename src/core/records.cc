#include "core/records.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <random>
#include <tuple>

#include "core/job_json.h"
#include "core/states.h"

namespace baton {

Result<std::size_t> StoredJobBytes(const JobRecord& job) {
  try {
    return ToJson(job.job).dump().size() + nlohmann::json(job.job.tags).dump().size() +
           job.context.dump().size();
  } catch (const std::exception& e) {  // a string that is not UTF-8
    return InvalidArgument(fmt::format("the job cannot be stored: {}", e.what()));
  }
}

Status CheckStoredJobSize(std::size_t bytes, std::size_t limit) {
  if (bytes <= limit) return Status::Ok();
  return InvalidArgument(fmt::format(
      "the job is {} bytes as stored (its definition, tags and context as JSON); the limit is "
      "{} (datastore.max_job_bytes)",
      bytes, limit));
}

TimePoint Now() {
  return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
}

std::string FormatTime(TimePoint t) {
  std::int64_t ms = t.time_since_epoch().count();
  std::int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  int millis = static_cast<int>(ms - secs * 1000);
  std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

std::optional<TimePoint> ParseTime(std::string_view text) {
  std::tm tm{};
  int millis = 0;
  int consumed = 0;
  std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  std::string_view rest = std::string_view(s).substr(static_cast<std::size_t>(consumed));
  if (rest.starts_with(".")) {
    int digits = 0;
    std::size_t i = 1;
    for (; i < rest.size() && rest[i] >= '0' && rest[i] <= '9'; ++i) {
      if (digits < 3) millis = millis * 10 + (rest[i] - '0'), ++digits;
    }
    while (digits < 3) millis *= 10, ++digits;
    rest.remove_prefix(i);
  }
  if (rest != "Z") return std::nullopt;
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::time_t secs = timegm(&tm);
  return TimePoint(std::chrono::milliseconds(static_cast<std::int64_t>(secs) * 1000 + millis));
}

std::string NewId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  // A forked child inherits the generator's state: without a new seed it would repeat
  // its parent's ids (an engine restarted by the process that forked the one it replaces
  // took the dead worker's node id, and so left that worker's RUNNING task alone).
  thread_local pid_t seeded_in = getpid();
  if (const pid_t pid = getpid(); pid != seeded_in) {
    rng.seed(std::random_device{}());
    seeded_in = pid;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  auto put = [](std::string& id, std::size_t from, std::size_t count, std::uint64_t bits) {
    for (std::size_t i = from + count; i-- > from;) {
      id[i] = kHex[bits & 0xF];
      bits >>= 4;
    }
  };
  // The time first: ids made one after the other sort one after the other, so the rows
  // they key go to the end of each index on them (one page shared by the rows of a
  // commit) instead of a random page each (SQLite wrote every such page to its log at
  // every commit, and again at checkpoints). Eighty random bits keep ids of the same
  // millisecond apart. Not a timestamp anyone may rely on: the clock may step back.
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  std::string id(32, '0');
  put(id, 0, 12, static_cast<std::uint64_t>(ms.count()));  // 48 bits: until the year 10889
  put(id, 12, 16, rng());
  put(id, 28, 4, rng());
  return id;
}

bool IsOptionalFailureLetGo(const TaskRecord& row) {
  if (!row.task.optional || row.state != TaskState::kFailed) return false;
  const bool ran = !row.node_id.empty() || row.started_at.has_value();
  return !ran || !row.task.retry || row.task.retry->attempts >= row.task.retry->limit ||
         !RetryIsFor(row);
}

bool RetryIsFor(const TaskRecord& failed) {
  if (!failed.task.retry) return false;
  const std::optional<RetryOn>& on = failed.task.retry->on;
  if (!on) return failed.reason != FailReason::kLost;
  if (failed.reason == FailReason::kExit) {
    return failed.exit_code && std::find(on->exit_codes.begin(), on->exit_codes.end(),
                                         *failed.exit_code) != on->exit_codes.end();
  }
  return std::find(on->errors.begin(), on->errors.end(), failed.reason) != on->errors.end();
}

const TaskRecord* LatestAttempt(const TaskRecord* latest, const TaskRecord& row) {
  if (latest == nullptr || row.created_at > latest->created_at) return &row;
  if (row.created_at < latest->created_at) return latest;
  auto rank = [](const TaskRecord& r) {
    return std::make_tuple(r.task.handles == Handles::kTaskFailure, !IsTerminal(r.state),
                           std::string_view(r.id));
  };
  return rank(row) > rank(*latest) ? &row : latest;
}

}  // namespace baton

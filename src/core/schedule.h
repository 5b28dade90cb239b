// Scheduled jobs (Tork's /scheduled-jobs): a job definition fired on a cron schedule,
// with what Baton adds to Tork's — a time zone, an overlap policy and a catch-up window.
// The model, its wire strings, its parsing (a job document plus `schedule`) and its JSON
// shapes. No I/O beyond the tz database that TimeZone::Find reads.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "core/cron.h"
#include "core/document.h"
#include "core/duration.h"
#include "core/job.h"
#include "core/job_decode.h"

namespace baton {

// Tork's states: only an ACTIVE schedule fires.
enum class ScheduleState { kActive, kPaused };
std::string_view ToString(ScheduleState state);
std::optional<ScheduleState> ParseScheduleState(std::string_view text);

// What a tick does while the job the schedule fired last is still active (PENDING,
// SCHEDULED or RUNNING): fire anyway (Tork's behaviour), drop the tick, keep one tick to
// fire as soon as that job ends, or cancel that job and fire.
enum class OverlapPolicy { kAllow, kSkip, kBufferOne, kCancelOther };
std::string_view ToString(OverlapPolicy policy);  // "allow", "skip", "buffer_one", "cancel_other"
std::optional<OverlapPolicy> ParseOverlapPolicy(std::string_view text);

// Of the ticks due at once (missed while no coordinator ran), within the catch-up window:
// fire each, or only the latest.
enum class CatchUpFire { kAll, kLatest };
std::string_view ToString(CatchUpFire fire);  // "all", "latest"
std::optional<CatchUpFire> ParseCatchUpFire(std::string_view text);

// The `schedule` of a scheduled job.
struct ScheduleSpec {
  std::string cron;      // as written; CronSchedule::Parse accepts it
  std::string timezone;  // an IANA name; empty for UTC
  OverlapPolicy overlap = OverlapPolicy::kAllow;
  // A tick more than this far in the past when a coordinator gets to it is not fired.
  Duration catch_up_window = std::chrono::minutes(1);
  CatchUpFire catch_up = CatchUpFire::kAll;
  friend bool operator==(const ScheduleSpec&, const ScheduleSpec&) = default;
};

inline constexpr Duration kDefaultCatchUpWindow = std::chrono::minutes(1);
// The longest catch-up window: a day of missed minutes is 1,440 jobs already.
inline constexpr Duration kMaxCatchUpWindow = std::chrono::hours(24 * 7);

// A stored scheduled job.
struct ScheduledJobRecord {
  std::string id;
  ScheduleState state = ScheduleState::kActive;
  ScheduleSpec schedule;
  Job job;                 // the definition each tick fires (validated as a submission)
  std::string created_by;  // empty until users exist
  TimePoint created_at{};
  TimePoint updated_at{};
  // Every tick at or before last_tick_at has been handled (fired, skipped or buffered);
  // next_tick_at is the first tick after it, what the firing loop looks for.
  TimePoint last_tick_at{};
  TimePoint next_tick_at{};
  // buffer_one: a tick held while the last job was active, fired once it ends.
  std::optional<TimePoint> buffered_tick_at;
  std::string last_job_id;  // the job the schedule fired last; empty before the first
  friend bool operator==(const ScheduledJobRecord&, const ScheduledJobRecord&) = default;
};

// The schedule's cron and zone, checked. kInvalidArgument naming `schedule.cron` or
// `schedule.timezone`.
struct CompiledSchedule {
  CronSchedule cron;
  TimeZone zone;
};
Result<CompiledSchedule> CompileSchedule(const ScheduleSpec& spec);

struct ScheduledJobParseResult {
  std::optional<Job> job;  // set, with schedule, only when there are no problems
  std::optional<ScheduleSpec> schedule;
  std::vector<Diagnostic> problems;  // in document order
  bool too_large = false;
  bool ok() const { return problems.empty(); }
  std::string Message() const;
};

// A POST /scheduled-jobs body: a job document (JSON or YAML) with a `schedule` map:
// `cron` (required), `timezone`, `overlap`, `catchUp: {window, fire}`. The job is
// validated as a submission; a scheduled job cannot `wait`.
ScheduledJobParseResult ParseScheduledJob(std::string_view text, DocumentFormat format,
                                          std::size_t max_bytes = kMaxDocumentBytes,
                                          int max_loop_iterations = kMaxLoopIterations);

// `{cron, timezone, overlap, catchUp: {window, fire}}`.
nlohmann::json ToJson(const ScheduleSpec& spec);
// The API's shapes. Full: the definition's fields, Tork's `cron` and `state`, `schedule`,
// `createdAt`, `updatedAt`, `createdBy`, `nextRunAt` (when ACTIVE) and `lastJobId`.
// Summary (lists, POST, PUT): without tasks, secrets, defaults, webhooks, permissions.
nlohmann::json ToJson(const ScheduledJobRecord& record, bool summary);

// The job a tick fires: PENDING's definition with `schedule: {id, cron}`.
Job FiredJob(const ScheduledJobRecord& record);

}  // namespace baton

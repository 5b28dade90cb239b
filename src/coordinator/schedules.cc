#include "coordinator/schedules.h"

#include <fmt/format.h>

#include <utility>

#include "base/log.h"
#include "core/states.h"
#include "flow/flow.h"

namespace baton {
namespace {

// The first tick after `after`; kInvalidArgument for a schedule with none (Parse refuses
// such expressions, so only a schedule stored by hand gets here).
Result<TimePoint> NextTick(const CompiledSchedule& compiled, TimePoint after,
                           const std::string& cron) {
  std::optional<TimePoint> next = compiled.cron.Next(after, compiled.zone);
  if (!next) return InvalidArgument(fmt::format("schedule.cron: \"{}\" never fires", cron));
  return *next;
}

// Runs `body` on the row of scheduled job `id`, locked, and stores what it leaves in it.
Result<ScheduledJobRecord> Modify(Datastore& datastore, const std::string& id,
                                  const std::function<Status(ScheduledJobRecord&)>& body) {
  ScheduledJobRecord out;
  BATON_RETURN_IF_ERROR(datastore.Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN(out, tx.GetScheduledJob(id));
    BATON_RETURN_IF_ERROR(body(out));
    return tx.UpdateScheduledJob(out);
  }));
  return out;
}

}  // namespace

Schedules::Schedules(Datastore& datastore, Scheduler& scheduler, Clock& clock,
                     ScheduleOptions options)
    : datastore_(datastore), scheduler_(scheduler), clock_(clock), options_(options) {}

Result<ScheduledJobRecord> Schedules::Create(const Job& job, const ScheduleSpec& schedule) {
  BATON_ASSIGN_OR_RETURN(CompiledSchedule compiled, CompileSchedule(schedule));
  ScheduledJobRecord record;
  record.id = NewId();
  record.state = ScheduleState::kActive;
  record.schedule = schedule;
  record.job = job;
  record.created_by = job.created_by;
  record.created_at = clock_.Now();
  record.updated_at = record.created_at;
  record.last_tick_at = record.created_at;
  BATON_ASSIGN_OR_RETURN(record.next_tick_at,
                         NextTick(compiled, record.last_tick_at, schedule.cron));
  BATON_RETURN_IF_ERROR(
      datastore_.Transact([&](Transaction& tx) { return tx.CreateScheduledJob(record); }));
  if (on_next_tick_) on_next_tick_(record.next_tick_at);
  log::Info("scheduled job created", {{"scheduled_job_id", record.id},
                                      {"cron", schedule.cron},
                                      {"next", FormatTime(record.next_tick_at)}});
  return record;
}

Result<ScheduledJobRecord> Schedules::Update(const std::string& id, const Job& job,
                                             const ScheduleSpec& schedule) {
  BATON_ASSIGN_OR_RETURN(CompiledSchedule compiled, CompileSchedule(schedule));
  const TimePoint now = clock_.Now();
  auto updated = Modify(datastore_, id, [&](ScheduledJobRecord& s) -> Status {
    // Its creator stays (the jobs it fires are theirs); only a row stored before creators
    // were kept takes the one who replaces it.
    if (s.created_by.empty()) s.created_by = job.created_by;
    s.job = job;
    s.job.created_by = s.created_by;
    s.schedule = schedule;
    s.updated_at = now;
    s.last_tick_at = now;
    BATON_ASSIGN_OR_RETURN(s.next_tick_at, NextTick(compiled, now, schedule.cron));
    return Status::Ok();
  });
  if (updated.ok() && updated->state == ScheduleState::kActive && on_next_tick_) {
    on_next_tick_(updated->next_tick_at);
  }
  return updated;
}

Result<ScheduledJobRecord> Schedules::Get(const std::string& id) {
  ScheduledJobRecord out;
  BATON_RETURN_IF_ERROR(datastore_.Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN(out, tx.GetScheduledJob(id));
    return Status::Ok();
  }));
  return out;
}

Result<Page<ScheduledJobRecord>> Schedules::List(int page, int size,
                                                 const std::optional<Principal>& viewer) {
  Page<ScheduledJobRecord> out;
  BATON_RETURN_IF_ERROR(datastore_.Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN(out, tx.ListScheduledJobs(page, size, viewer));
    return Status::Ok();
  }));
  return out;
}

Status Schedules::Pause(const std::string& id) {
  const TimePoint now = clock_.Now();
  return Modify(datastore_, id,
                [&](ScheduledJobRecord& s) -> Status {
                  if (s.state != ScheduleState::kActive) {
                    return FailedPrecondition(
                        fmt::format("scheduled job {} is {}: only an ACTIVE one can be paused", id,
                                    ToString(s.state)));
                  }
                  s.state = ScheduleState::kPaused;
                  s.updated_at = now;
                  s.buffered_tick_at.reset();
                  return Status::Ok();
                })
      .status();
}

Status Schedules::Resume(const std::string& id) {
  const TimePoint now = clock_.Now();
  auto resumed = Modify(datastore_, id, [&](ScheduledJobRecord& s) -> Status {
    if (s.state != ScheduleState::kPaused) {
      return FailedPrecondition(fmt::format(
          "scheduled job {} is {}: only a PAUSED one can be resumed", id, ToString(s.state)));
    }
    BATON_ASSIGN_OR_RETURN(CompiledSchedule compiled, CompileSchedule(s.schedule));
    s.state = ScheduleState::kActive;
    s.updated_at = now;
    s.last_tick_at = now;
    BATON_ASSIGN_OR_RETURN(s.next_tick_at, NextTick(compiled, now, s.schedule.cron));
    return Status::Ok();
  });
  if (!resumed.ok()) return resumed.status();
  if (on_next_tick_) on_next_tick_(resumed->next_tick_at);
  return Status::Ok();
}

Status Schedules::Delete(const std::string& id) {
  BATON_RETURN_IF_ERROR(
      datastore_.Transact([&](Transaction& tx) { return tx.DeleteScheduledJob(id); }));
  log::Info("scheduled job deleted", {{"scheduled_job_id", id}});
  return Status::Ok();
}

Result<Schedules::Look> Schedules::FireDue() {
  const TimePoint now = clock_.Now();
  std::vector<std::string> due;
  Look look;
  // Usually nothing is due: then one scope finds that and when the next look is needed.
  BATON_RETURN_IF_ERROR(datastore_.Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN(due, tx.DueScheduledJobs(now, options_.batch));
    if (due.empty()) {
      BATON_ASSIGN_OR_RETURN(look.next, tx.NextScheduledTick(now));
    }
    return Status::Ok();
  }));
  if (due.empty()) return look;
  for (const std::string& id : due) {
    for (int i = 0; i < options_.ticks_per_look; ++i) {
      Result<Fired> fired = FireNext(id, now);
      if (!fired.ok()) {
        log::Warn("firing a scheduled job failed; trying again at the next look",
                  {{"scheduled_job_id", id}, {"error", fired.status().message()}});
        break;
      }
      look.fired += fired->jobs;
      if (!fired->more) break;
    }
  }
  BATON_RETURN_IF_ERROR(datastore_.Transact([&](Transaction& tx) -> Status {
    BATON_ASSIGN_OR_RETURN(look.next, tx.NextScheduledTick(clock_.Now()));
    return Status::Ok();
  }));
  return look;
}

namespace {

// The tick of `s` to fire at `now` by its catch-up rules (a tick missed beyond the window
// is not fired; kLatest fires only the latest due one); after `now` when none is due.
Result<TimePoint> DueTick(const ScheduledJobRecord& s, const CompiledSchedule& compiled,
                          TimePoint now) {
  TimePoint tick = s.next_tick_at;
  const TimePoint cutoff = now - s.schedule.catch_up_window;
  if (tick < cutoff) {
    // Missed while no coordinator ran, beyond the window: not fired.
    log::Warn(
        "scheduled job missed ticks beyond its catch-up window",
        {{"scheduled_job_id", s.id}, {"from", FormatTime(tick)}, {"before", FormatTime(cutoff)}});
    BATON_ASSIGN_OR_RETURN(
        tick, NextTick(compiled, cutoff - std::chrono::milliseconds(1), s.schedule.cron));
  }
  if (tick <= now && s.schedule.catch_up == CatchUpFire::kLatest) {
    for (;;) {
      BATON_ASSIGN_OR_RETURN(TimePoint next, NextTick(compiled, tick, s.schedule.cron));
      if (next > now) break;
      tick = next;
    }
  }
  return tick;
}

}  // namespace

Result<bool> Schedules::PreviousActive(Transaction& tx, const ScheduledJobRecord& s) {
  if (s.last_job_id.empty()) return false;
  int version = 0;
  Result<JobRecord> previous = tx.GetJobState(s.last_job_id, &version);
  if (previous.ok()) return !IsTerminal(previous->state);
  if (previous.status().code() == StatusCode::kNotFound) return false;
  return previous.status();
}

Result<std::vector<JobRecord>> Schedules::TickIn(Transaction& tx, const std::string& id,
                                                 TimePoint now, Fired& fired,
                                                 std::string& to_cancel) {
  std::vector<JobRecord> out;
  Result<ScheduledJobRecord> row = tx.GetScheduledJob(id);
  if (!row.ok() && row.status().code() == StatusCode::kNotFound) return out;  // deleted
  if (!row.ok()) return row.status();
  ScheduledJobRecord& s = *row;
  if (s.state != ScheduleState::kActive) return out;
  BATON_ASSIGN_OR_RETURN(const bool previous_active, PreviousActive(tx, s));
  auto fire = [&](TimePoint tick) {
    JobRecord job = flow::NewJobRecord(FiredJob(s), "", NewId(), now);
    log::Info("scheduled job fired",
              {{"scheduled_job_id", s.id}, {"job_id", job.id}, {"tick", FormatTime(tick)}});
    if (previous_active && s.schedule.overlap == OverlapPolicy::kCancelOther) {
      to_cancel = s.last_job_id;
    }
    s.last_job_id = job.id;
    out.push_back(std::move(job));
    fired.jobs = 1;
  };
  // A held tick (buffer_one) fires once the job it waited for has ended.
  if (s.buffered_tick_at && !previous_active) {
    TimePoint tick = *s.buffered_tick_at;
    s.buffered_tick_at.reset();
    fire(tick);
    fired.more = s.next_tick_at <= now;
    BATON_RETURN_IF_ERROR(tx.UpdateScheduledJob(s));
    return out;
  }
  if (s.next_tick_at > now) return out;  // only a held tick, still waiting
  BATON_ASSIGN_OR_RETURN(CompiledSchedule compiled, CompileSchedule(s.schedule));
  BATON_ASSIGN_OR_RETURN(TimePoint tick, DueTick(s, compiled, now));
  if (tick > now) {
    // Every due tick was beyond the window: count from now.
    s.last_tick_at = now;
    BATON_ASSIGN_OR_RETURN(s.next_tick_at, NextTick(compiled, now, s.schedule.cron));
    BATON_RETURN_IF_ERROR(tx.UpdateScheduledJob(s));
    return out;
  }
  s.last_tick_at = tick;
  BATON_ASSIGN_OR_RETURN(s.next_tick_at, NextTick(compiled, tick, s.schedule.cron));
  fired.more = s.next_tick_at <= now;
  if (!previous_active || s.schedule.overlap == OverlapPolicy::kAllow ||
      s.schedule.overlap == OverlapPolicy::kCancelOther) {
    fire(tick);
  } else {
    const bool hold = s.schedule.overlap == OverlapPolicy::kBufferOne && !s.buffered_tick_at;
    if (hold) s.buffered_tick_at = tick;
    log::Info(hold ? "scheduled job tick held until its last job ends"
                   : "scheduled job tick skipped: its last job is still running",
              {{"scheduled_job_id", s.id}, {"job_id", s.last_job_id}, {"tick", FormatTime(tick)}});
  }
  BATON_RETURN_IF_ERROR(tx.UpdateScheduledJob(s));
  return out;
}

Result<Schedules::Fired> Schedules::FireNext(const std::string& id, TimePoint now) {
  Fired fired;
  std::string to_cancel;  // cancel_other: the job the new one replaces
  auto jobs = scheduler_.CreateJobsWith([&](Transaction& tx) {
    fired = Fired{};
    to_cancel.clear();
    return TickIn(tx, id, now, fired, to_cancel);
  });
  if (!jobs.ok()) return jobs.status();
  if (!to_cancel.empty()) {
    Status s = scheduler_.Cancel(to_cancel);
    if (!s.ok() && s.code() != StatusCode::kFailedPrecondition) {
      log::Warn("cancelling the job a scheduled job replaced failed",
                {{"scheduled_job_id", id}, {"job_id", to_cancel}, {"error", s.message()}});
    }
  }
  return fired;
}

}  // namespace baton

// Scheduled jobs: the operations of /scheduled-jobs and the firing of their ticks.
//
// Each tick fires exactly once across any number of coordinators and across crashes: a
// tick is handled in one datastore scope that reads the scheduled job's row (locked until
// the scope ends), creates the tick's job, and advances the row's last_tick_at past the
// tick (Scheduler::CreateJobsWith). A second coordinator reading the row after the commit
// sees the tick taken; a crash before the commit stores neither the job nor the tick, and
// the tick is fired by the next look (within its catch-up window).
//
// A due tick is one at or before now. Handling one, in order:
// - ticks older than now - catchUp.window are not fired (missed while no coordinator ran);
// - with catchUp.fire = latest only the latest due tick is handled, the others dropped;
// - when the job the schedule fired last is still active (PENDING, SCHEDULED, RUNNING),
//   the overlap policy decides: allow fires, skip drops the tick, buffer_one holds it (one
//   at most; later ticks are dropped while one is held) and fires it once that job has
//   ended, cancel_other fires and then cancels that job.
//
// Thread-safety: thread-safe (the datastore serialises what matters); FireDue runs on the
// coordinator's timer thread, the rest on the API's threads.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "base/clock.h"
#include "coordinator/scheduler.h"
#include "core/schedule.h"
#include "datastore/datastore.h"

namespace baton {

struct ScheduleOptions {
  // The coordinator looks for due ticks at the next tick of any ACTIVE scheduled job (and,
  // while one holds a buffered tick, every `interval`), at least `interval` apart and at
  // most `max_idle` apart: scheduled jobs another coordinator created are seen within
  // max_idle. Ticks of the ones this coordinator creates, updates or resumes are looked
  // for at their time.
  std::chrono::milliseconds interval = std::chrono::seconds(1);
  std::chrono::milliseconds max_idle = std::chrono::seconds(30);
  // Scheduled jobs handled per look, and ticks per scheduled job per look; the rest wait
  // for the next look.
  int batch = 100;
  int ticks_per_look = 100;
};

class Schedules {
 public:
  Schedules(Datastore& datastore, Scheduler& scheduler, Clock& clock, ScheduleOptions options = {});

  // POST /scheduled-jobs: stored ACTIVE; its first tick is the first after now.
  // kInvalidArgument naming schedule.cron or schedule.timezone.
  Result<ScheduledJobRecord> Create(const Job& job, const ScheduleSpec& schedule);
  // PUT /scheduled-jobs/{id}: a new definition and schedule; the state, id and creation
  // are kept, and ticks count again from now (none of the new schedule is owed).
  Result<ScheduledJobRecord> Update(const std::string& id, const Job& job,
                                    const ScheduleSpec& schedule);
  Result<ScheduledJobRecord> Get(const std::string& id);
  // With a `viewer`, only the scheduled jobs they may see (Datastore::ListScheduledJobs).
  Result<Page<ScheduledJobRecord>> List(int page, int size,
                                        const std::optional<Principal>& viewer = std::nullopt);
  // kFailedPrecondition unless ACTIVE (Pause) / PAUSED (Resume). A paused schedule's
  // ticks are not owed: Resume counts ticks from now, and Pause drops a held tick.
  Status Pause(const std::string& id);
  Status Resume(const std::string& id);
  // The jobs it fired stay.
  Status Delete(const std::string& id);

  // One look: handles the due ticks of up to `batch` scheduled jobs. Returns the number
  // of jobs it created and when the next look is needed (NextScheduledTick after it).
  struct Look {
    int fired = 0;
    std::optional<TimePoint> next;
  };
  Result<Look> FireDue();

  // Called with the first tick of a scheduled job created, updated or resumed here, after
  // its commit (the coordinator moves its next look earlier). Set before use.
  void SetNextTickListener(std::function<void(TimePoint)> listener) {
    on_next_tick_ = std::move(listener);
  }

 private:
  struct Fired {
    int jobs = 0;
    bool more = false;  // another tick of it is due now
  };
  // Handles the next due tick (or the held one) of scheduled job `id`, in one scope.
  Result<Fired> FireNext(const std::string& id, TimePoint now);
  // FireNext's scope: the jobs to create for the tick; `to_cancel` the one a new job
  // replaces (cancel_other).
  Result<std::vector<JobRecord>> TickIn(Transaction& tx, const std::string& id, TimePoint now,
                                        Fired& fired, std::string& to_cancel);
  // Whether the job the schedule fired last is still active.
  static Result<bool> PreviousActive(Transaction& tx, const ScheduledJobRecord& s);

  Datastore& datastore_;
  Scheduler& scheduler_;
  Clock& clock_;
  const ScheduleOptions options_;
  std::function<void(TimePoint)> on_next_tick_;
};

}  // namespace baton

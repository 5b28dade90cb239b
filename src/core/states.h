// The state machines of jobs and tasks: which state may follow which, in one table per
// machine, and the predicates derived from it. The moves are those the engine makes
// today (src/coordinator/scheduler.cc); a move not in the table is a bug in whoever
// makes it. No I/O.
//
// Jobs:  PENDING -> SCHEDULED (started: its first task dispatched) -> RUNNING (one of its
//        tasks started) -> COMPLETED, as Tork's; SCHEDULED -> COMPLETED when no task ran
//        (all skipped, or none); any active state -> FAILED or CANCELLED (a task failed, a
//        timeout, a cancel); FAILED or CANCELLED -> SCHEDULED (restart). PENDING ->
//        RUNNING and a restart to RUNNING are kept for rows older engines stored.
//        COMPLETED moves only to SCHEDULED, by a rerun (beyond Tork; a FAILED or
//        CANCELLED job may be rerun too). Beyond Tork: SCHEDULED or RUNNING -> PAUSED (a pause, or
//        a task's pauseBefore) -> SCHEDULED or RUNNING (resumed); a paused job's decisions go on
//        (its running tasks end, what is in it moves on, it may end) but nothing of it is started
//        (flow: Decider::Held), its cleanup's tasks included, until it is resumed; a cancel leaves
//        PAUSED first (its cleanup runs).
// Tasks: CREATED (a child stored before its turn) -> PENDING (to be published) ->
//        SCHEDULED (published) -> RUNNING -> COMPLETED / FAILED / CANCELLED. An outcome
//        may come before its start (a short task reports once), so every active state
//        may end directly; a failed publish moves SCHEDULED back to PENDING; CREATED may
//        become SKIPPED (its `if` is false), and PENDING or SCHEDULED too (a user skips it). Every
//        terminal task state is final: a retry, a redelivery and a restart create new rows.
#pragma once

#include "core/names.h"

namespace baton {

// No work of it is left to do: COMPLETED, FAILED or CANCELLED. (A FAILED or CANCELLED job
// may still be restarted: CanMove says so.)
bool IsTerminal(JobState state);
// Not terminal: PENDING, SCHEDULED, RUNNING or PAUSED; what a cancel may stop.
bool IsActive(JobState state);
// Started, its tasks being run: SCHEDULED until one of them starts, RUNNING after (as
// Tork's jobs), or PAUSED (its running tasks run on; nothing new starts).
bool IsGoing(JobState state);
// Whether a job in `from` may move to `to`. A state never "moves" to itself.
bool CanMove(JobState from, JobState to);
// Whether `to` follows `from` through one or more moves CanMove allows (a decision may
// take a row through several: PENDING -> SCHEDULED -> COMPLETED for a job without tasks).
bool CanReach(JobState from, JobState to);

// Final: COMPLETED, FAILED, CANCELLED or SKIPPED.
bool IsTerminal(TaskState state);
// Not terminal: CREATED, PENDING, SCHEDULED or RUNNING.
bool IsActive(TaskState state);
// Ended well: COMPLETED, or SKIPPED (its `if` was false). What a parent counts.
bool IsDone(TaskState state);
// Whether a task row in `from` may move to `to`. A state never "moves" to itself.
bool CanMove(TaskState from, TaskState to);
// As CanReach for jobs.
bool CanReach(TaskState from, TaskState to);

}  // namespace baton

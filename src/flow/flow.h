// flow: the rules of the engine as pure functions. Given an event, the stored rows the
// event is about and the time, Decide says what happens: which rows to write and, once
// they are committed, what to start, arm, tell and notify. Frontier says, from a job's
// rows alone, what must be in flight (reconciling after a crash).
//
// Pure: no I/O, no clock, no threads, no randomness (new ids are derived from
// View::id_seed; templates' now() is the decision's `now`, their randomInt() is seeded
// by View::random_seed or id_seed). The same input gives the same effects. Deciding is idempotent:
// an event that the rows show to be a duplicate or late (a finished task, a report from another
// node than the one running it, a cancel of a finished job) decides nothing, so applying a
// decision's effects and then deciding the same event again changes nothing more.
//
// How a shell uses it (the scheduler, or the simulator in tests), per event:
//   1. take the lock of the event's job tree;
//   2. in one transaction, read the View that the event names (ReadsOf),
//      call Decide, and apply the row effects in their order (a CancelActive returns the
//      rows it cancelled: pass them to AfterCancel and keep its effects with the rest),
//      writing what each Notify calls for in the same transaction;
//   3. commit; then run the after-commit effects in their order;
//   4. decide every FollowUp event the same way, still under the tree's lock.
// A crash before the commit loses the decision and nothing else (the event is delivered
// again, or Frontier finds what it would have done); a crash after the commit loses at
// most after-commit effects, which Frontier gives again.
//
// Thread-safety: every function is a pure function of its arguments.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flow/types.h"

namespace baton::flow {

// How many of an each's next CREATED children a view holds, given `running` (its
// running_children): its free slots and one more, for the slot the event may free (a
// child's completion), at most kMaxNextCreated (an each without a concurrency starts
// every child as it starts, so it has CREATED ones only when a crash interrupted that:
// FillEach takes them in batches).
inline constexpr int kMaxNextCreated = 64;
int NextCreatedWanted(const TaskRecord& each, int running);

// The row's share of its retry's `jitter` (Retry::jitter), added to its backoff: from its
// id, so the same after a crash.
Duration RetryJitter(const TaskRecord& row);
// When a RUNNING wait row (core/job.h: Wait) ends, from its row alone: none for a signal
// wait without a timeout.
std::optional<TimePoint> WaitDueAt(const TaskRecord& row);

// What a decision about `event` reads (see Reads).
Reads ReadsOf(const Event& event);

// Row effects come first (Changed and Notify after the rows they are about, before the
// CancelActives), then the after-commit ones, then follow-ups.
bool IsRowEffect(const Effect& effect);
// Changed and Notify: taken in the scope, though they write no row.
bool IsNotice(const Effect& effect);

// The event's name ("Submit", "Completed", ...): for metrics and logs, one table.
std::string_view NameOf(const Event& event);

// Checked mode: the first UpdateJob or UpdateTask of `effects` whose state change
// core/states.h does not allow (CanReach: a decision may take a row through several
// moves) from the row as `before` holds it, described; nullopt when there is none.
// Decide checks the same on every row effect in debug builds, and stops at a violation.
std::optional<std::string> BadMove(const View& before, const std::vector<Effect>& effects);

// ------------------------------------------------------------------------- rules

// Takes the view's rows into the effects without copying them: what a shell that reads a
// fresh view per event calls (the const overload copies the view first).
std::vector<Effect> Decide(const Event& event, View&& view, TimePoint now);
std::vector<Effect> Decide(const Event& event, const View& view, TimePoint now);

// What a CancelActive's cancelled rows need after the commit: a running one is killed on
// its node, one that may wait in a queue is dropped everywhere, a sub-job is cancelled
// (a FollowUp Cancel).
std::vector<Effect> AfterCancel(const std::vector<CancelledRow>& rows, const Policy& policy);
// The same for the rows `cancel` cancelled, preceded by what they tell: each row's
// Changed (with Policy::live_events) and, with the cancel's `hook`, its Notify (for each
// row given with its `row`).
std::vector<Effect> AfterCancel(const CancelActive& cancel, const std::vector<CancelledRow>& rows,
                                const Policy& policy);

// From a job's rows alone (`rows`: every task row of the job), what must be in flight:
// a PENDING job started; queued runnable rows started again (a retry in its backoff at
// the rest of it); the job's timeout armed; RUNNING rows whose node is not in
// `live_nodes` (when given) lost with the engine; composites recounted from their
// children (the new attempts counting), finished or refilled; the current top-level step
// created or acted on. Effects as Decide's; applying them and calling Frontier again
// gives only after-commit effects (starts and timers), never a row write.
// `live_nodes` are the nodes that may still run a task: a node not in it stopped with the
// engine (an earlier run of the standalone engine, whose worker it was), so its RUNNING
// rows end FAILED ("the engine stopped while the task ran") and run again as new attempts
// that spend neither a redelivery nor a retry: the crash is the engine's, not the task's.
// (A node that dies on its own is judged by its lease: LeaseExpired spends a redelivery.)
// (`rows` by value: pass them moved when they are not needed after.)
std::vector<Effect> Frontier(const JobRecord& job, std::vector<TaskRecord> rows, TimePoint now,
                             const Policy& policy,
                             const std::set<std::string>* live_nodes = nullptr,
                             const std::string& id_seed = "");

// New jobs stored as they are, without a decision (a background submission, a schedule's
// fire): their CreateJob effects, with what they tell (Changed, Notify).
std::vector<Effect> StoreJobs(std::vector<JobRecord> jobs, const Policy& policy);

// The row a new job is stored with (PENDING, its context built), as Submit expects it.
JobRecord NewJobRecord(const Job& job, const std::string& parent_task_id, std::string id,
                       TimePoint now);

}  // namespace baton::flow

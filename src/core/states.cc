#include "core/states.h"

#include <array>
#include <cstddef>

namespace baton {
namespace {

constexpr std::size_t kJobStates = 7;   // JobState::kPending .. kPaused
constexpr std::size_t kTaskStates = 8;  // TaskState::kCreated .. kSkipped

// kJobMoves[from][to]; rows and columns in JobState order:
// PENDING, SCHEDULED, RUNNING, COMPLETED, FAILED, CANCELLED, PAUSED.
constexpr std::array<std::array<bool, kJobStates>, kJobStates> kJobMoves = {{
    // P      S      R      C      F      X      Pa
    {false, true, true, false, true, true, false},  // PENDING: started, or failed/cancelled first
    // SCHEDULED: a task started; every task skipped (or none); failed/cancelled first; paused.
    {false, false, true, true, true, true, true},
    {false, false, false, true, true, true, true},     // RUNNING: ended; paused
    {false, true, false, false, false, false, false},  // COMPLETED: rerun (SCHEDULED)
    // FAILED: restart (SCHEDULED; RUNNING as before)
    {false, true, true, false, false, false, false},
    {false, true, true, false, false, false, false},  // CANCELLED: restart
    // PAUSED: resumed (SCHEDULED when none of its tasks ran yet); ended (its last running
    // task, a failure, its timeout, a cancel).
    {false, true, true, true, true, true, false},
}};

// kTaskMoves[from][to]; rows and columns in TaskState order:
// CREATED, PENDING, SCHEDULED, RUNNING, COMPLETED, FAILED, CANCELLED, SKIPPED.
constexpr std::array<std::array<bool, kTaskStates>, kTaskStates> kTaskMoves = {{
    // Cr     P      S      R      C      F      X      Sk
    // CREATED: its turn comes (published, or a composite that runs at once, or an empty
    // one that completes at once), its `if` is false, its evaluation fails, or cancelled.
    {false, true, true, true, true, true, true, true},
    // PENDING: published, started, or an outcome before the start; cancelled; skipped by
    // a user (PUT /tasks/{id}/skip).
    {false, false, true, true, true, true, true, true},
    // SCHEDULED: back to PENDING when the publish failed; started; ended; skipped by a user.
    {false, true, false, true, true, true, true, true},
    // RUNNING: ended.
    {false, false, false, false, true, true, true, false},
    {false, false, false, false, false, false, false, false},  // COMPLETED: final
    {false, false, false, false, false, false, false, false},  // FAILED: final
    {false, false, false, false, false, false, false, false},  // CANCELLED: final
    {false, false, false, false, false, false, false, false},  // SKIPPED: final
}};

// Whether `to` follows `from` through allowed moves in `moves` (a breadth-first walk).
template <std::size_t N>
bool Reachable(const std::array<std::array<bool, N>, N>& moves, std::size_t from, std::size_t to) {
  if (from >= N || to >= N) return false;
  std::array<bool, N> seen{};
  std::array<std::size_t, N> queue{};
  std::size_t head = 0;
  std::size_t tail = 0;
  queue[tail++] = from;
  seen[from] = true;
  while (head < tail) {
    std::size_t at = queue[head++];
    for (std::size_t next = 0; next < N; ++next) {
      if (!moves[at][next] || seen[next]) continue;
      if (next == to) return true;
      seen[next] = true;
      queue[tail++] = next;
    }
  }
  return false;
}

constexpr std::size_t Index(JobState s) { return static_cast<std::size_t>(s); }
constexpr std::size_t Index(TaskState s) { return static_cast<std::size_t>(s); }

static_assert(Index(JobState::kPaused) + 1 == kJobStates, "a JobState is missing from the table");
static_assert(Index(TaskState::kSkipped) + 1 == kTaskStates,
              "a TaskState is missing from the table");

}  // namespace

bool IsTerminal(JobState state) {
  return state == JobState::kCompleted || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

bool IsActive(JobState state) { return !IsTerminal(state); }

bool IsGoing(JobState state) {
  return state == JobState::kScheduled || state == JobState::kRunning || state == JobState::kPaused;
}

bool CanReach(JobState from, JobState to) { return Reachable(kJobMoves, Index(from), Index(to)); }

bool CanMove(JobState from, JobState to) {
  if (Index(from) >= kJobStates || Index(to) >= kJobStates) return false;
  return kJobMoves[Index(from)][Index(to)];
}

bool IsTerminal(TaskState state) {
  if (Index(state) >= kTaskStates) return false;
  // Final: nothing may follow it.
  for (bool allowed : kTaskMoves[Index(state)]) {
    if (allowed) return false;
  }
  return true;
}

bool IsActive(TaskState state) { return Index(state) < kTaskStates && !IsTerminal(state); }

bool IsDone(TaskState state) {
  return state == TaskState::kCompleted || state == TaskState::kSkipped;
}

bool CanReach(TaskState from, TaskState to) {
  return Reachable(kTaskMoves, Index(from), Index(to));
}

bool CanMove(TaskState from, TaskState to) {
  if (Index(from) >= kTaskStates || Index(to) >= kTaskStates) return false;
  return kTaskMoves[Index(from)][Index(to)];
}

}  // namespace baton

#include "core/states.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace baton {
namespace {

const std::vector<JobState> kAllJobStates = {
    JobState::kPending, JobState::kScheduled, JobState::kRunning, JobState::kCompleted,
    JobState::kFailed,  JobState::kCancelled, JobState::kPaused};
const std::vector<TaskState> kAllTaskStates = {
    TaskState::kCreated,   TaskState::kPending, TaskState::kScheduled, TaskState::kRunning,
    TaskState::kCompleted, TaskState::kFailed,  TaskState::kCancelled, TaskState::kSkipped};

// Every move the engine makes, written out pair by pair (independently of the table in
// states.cc): every other pair of states must be refused.
const std::set<std::pair<JobState, JobState>> kJobMoves = {
    {JobState::kPending, JobState::kScheduled},    // the scheduler starts a submitted job
    {JobState::kPending, JobState::kRunning},      // rows of engines before SCHEDULED
    {JobState::kPending, JobState::kFailed},       // failed before it started
    {JobState::kPending, JobState::kCancelled},    // cancelled before it started
    {JobState::kScheduled, JobState::kRunning},    // one of its tasks started
    {JobState::kScheduled, JobState::kCompleted},  // no task ran: all skipped, or none
    {JobState::kScheduled, JobState::kFailed},     //
    {JobState::kScheduled, JobState::kCancelled},  //
    {JobState::kRunning, JobState::kCompleted},    // its last step completed
    {JobState::kRunning, JobState::kFailed},       // a task failed, or the job timed out
    {JobState::kRunning, JobState::kCancelled},    // POST /jobs/{id}/cancel
    {JobState::kFailed, JobState::kScheduled},     // restart
    {JobState::kCancelled, JobState::kScheduled},  // restart
    {JobState::kFailed, JobState::kRunning},       // restart, by engines before SCHEDULED
    {JobState::kCancelled, JobState::kRunning},    // restart, by engines before SCHEDULED
    {JobState::kCompleted, JobState::kScheduled},  // PUT /jobs/{id}/rerun
    {JobState::kScheduled, JobState::kPaused},     // PUT /jobs/{id}/pause, or pauseBefore
    {JobState::kRunning, JobState::kPaused},       //
    {JobState::kPaused, JobState::kScheduled},     // resumed before any task ran
    {JobState::kPaused, JobState::kRunning},       // resumed; cancelled (then CANCELLED)
    {JobState::kPaused, JobState::kCompleted},     // its last running task completed it
    {JobState::kPaused, JobState::kFailed},        // a failure, or its timeout
    {JobState::kPaused, JobState::kCancelled},     // a sub-job's, cancelled with its parent
};

const std::set<std::pair<TaskState, TaskState>> kTaskMoves = {
    // A child stored CREATED before its turn (parallel, each): published, a composite
    // started at once, an empty composite completed at once, an evaluation error, `if`
    // false, cancelled with its parent, or an outcome of a message a durable broker
    // delivered before the row was marked.
    {TaskState::kCreated, TaskState::kPending},
    {TaskState::kCreated, TaskState::kScheduled},
    {TaskState::kCreated, TaskState::kRunning},
    {TaskState::kCreated, TaskState::kCompleted},
    {TaskState::kCreated, TaskState::kFailed},
    {TaskState::kCreated, TaskState::kCancelled},
    {TaskState::kCreated, TaskState::kSkipped},
    // PENDING: published (SCHEDULED), started, or an outcome that carries its start (a
    // short task), cancelled, lost.
    {TaskState::kPending, TaskState::kScheduled},
    {TaskState::kPending, TaskState::kRunning},
    {TaskState::kPending, TaskState::kCompleted},
    {TaskState::kPending, TaskState::kFailed},
    {TaskState::kPending, TaskState::kCancelled},
    {TaskState::kPending, TaskState::kSkipped},  // PUT /tasks/{id}/skip
    // SCHEDULED: the publish failed (back to PENDING), started, ended.
    {TaskState::kScheduled, TaskState::kPending},
    {TaskState::kScheduled, TaskState::kRunning},
    {TaskState::kScheduled, TaskState::kCompleted},
    {TaskState::kScheduled, TaskState::kFailed},
    {TaskState::kScheduled, TaskState::kCancelled},
    {TaskState::kScheduled, TaskState::kSkipped},  // PUT /tasks/{id}/skip
    // RUNNING: ended (a lost worker's task fails; its redelivery is a new row).
    {TaskState::kRunning, TaskState::kCompleted},
    {TaskState::kRunning, TaskState::kFailed},
    {TaskState::kRunning, TaskState::kCancelled},
};

std::string Name(TaskState s) { return std::string(ToString(s)); }
std::string Name(JobState s) { return std::string(ToString(s)); }

TEST(StatesTest, EveryJobStatePairIsAllowedExactlyWhenTheEngineMakesThatMove) {
  for (JobState from : kAllJobStates) {
    for (JobState to : kAllJobStates) {
      EXPECT_EQ(CanMove(from, to), kJobMoves.contains({from, to}))
          << Name(from) << " -> " << Name(to);
    }
  }
}

TEST(StatesTest, EveryTaskStatePairIsAllowedExactlyWhenTheEngineMakesThatMove) {
  for (TaskState from : kAllTaskStates) {
    for (TaskState to : kAllTaskStates) {
      EXPECT_EQ(CanMove(from, to), kTaskMoves.contains({from, to}))
          << Name(from) << " -> " << Name(to);
    }
  }
}

TEST(StatesTest, TerminalJobStatesAreCompletedFailedAndCancelled) {
  const std::set<JobState> terminal = {JobState::kCompleted, JobState::kFailed,
                                       JobState::kCancelled};
  for (JobState s : kAllJobStates) {
    EXPECT_EQ(IsTerminal(s), terminal.contains(s)) << Name(s);
    EXPECT_EQ(IsActive(s), !terminal.contains(s)) << Name(s);
  }
}

TEST(StatesTest, TerminalTaskStatesAreCompletedFailedCancelledAndSkipped) {
  const std::set<TaskState> terminal = {TaskState::kCompleted, TaskState::kFailed,
                                        TaskState::kCancelled, TaskState::kSkipped};
  for (TaskState s : kAllTaskStates) {
    EXPECT_EQ(IsTerminal(s), terminal.contains(s)) << Name(s);
    EXPECT_EQ(IsActive(s), !terminal.contains(s)) << Name(s);
  }
}

TEST(StatesTest, ATerminalTaskStateIsFinal) {
  for (TaskState from : kAllTaskStates) {
    if (!IsTerminal(from)) continue;
    for (TaskState to : kAllTaskStates) EXPECT_FALSE(CanMove(from, to)) << Name(from);
  }
}

TEST(StatesTest, ATerminalJobMovesOnlyByARestartOrARerunToScheduledOrRunning) {
  for (JobState from : kAllJobStates) {
    if (!IsTerminal(from)) continue;
    for (JobState to : kAllJobStates) {
      if (CanMove(from, to)) {
        EXPECT_TRUE(to == JobState::kScheduled || to == JobState::kRunning) << Name(from);
      }
    }
  }
  EXPECT_TRUE(CanMove(JobState::kCompleted, JobState::kScheduled));  // a rerun
  EXPECT_FALSE(CanMove(JobState::kCompleted, JobState::kRunning));   // no restart
}

TEST(StatesTest, EveryActiveStateCanEnd) {
  for (JobState s : kAllJobStates) {
    if (IsActive(s)) {
      EXPECT_TRUE(CanMove(s, JobState::kFailed)) << Name(s);
      EXPECT_TRUE(CanMove(s, JobState::kCancelled)) << Name(s);
    }
  }
  for (TaskState s : kAllTaskStates) {
    if (!IsActive(s)) continue;
    for (TaskState end : {TaskState::kCompleted, TaskState::kFailed, TaskState::kCancelled}) {
      EXPECT_TRUE(CanMove(s, end)) << Name(s) << " -> " << Name(end);
    }
  }
}

TEST(StatesTest, AStateReachesWhatAChainOfAllowedMovesLeadsTo) {
  // A decision may take a row through several moves: a job without tasks starts and
  // completes at once, a new task is queued and reported done in one decision.
  EXPECT_FALSE(CanMove(JobState::kPending, JobState::kCompleted));
  EXPECT_TRUE(CanReach(JobState::kPending, JobState::kCompleted));
  EXPECT_TRUE(CanReach(JobState::kFailed, JobState::kCompleted));   // restarted, then done
  EXPECT_TRUE(CanReach(JobState::kCompleted, JobState::kRunning));  // rerun, then a start
  EXPECT_FALSE(CanReach(JobState::kCompleted, JobState::kPending));
  EXPECT_FALSE(CanReach(JobState::kRunning, JobState::kPending));
  EXPECT_TRUE(CanReach(TaskState::kCreated, TaskState::kCompleted));
  EXPECT_FALSE(CanReach(TaskState::kRunning, TaskState::kPending));
  EXPECT_FALSE(CanReach(TaskState::kCompleted, TaskState::kRunning));
  for (JobState from : kAllJobStates) {
    for (JobState to : kAllJobStates) {
      if (CanMove(from, to)) EXPECT_TRUE(CanReach(from, to)) << Name(from) << " -> " << Name(to);
    }
  }
  for (TaskState from : kAllTaskStates) {
    for (TaskState to : kAllTaskStates) {
      if (CanMove(from, to)) EXPECT_TRUE(CanReach(from, to)) << Name(from) << " -> " << Name(to);
    }
  }
}

TEST(StatesTest, DoneIsCompletedOrSkippedAndGoingIsScheduledRunningOrPaused) {
  for (TaskState s : kAllTaskStates) {
    EXPECT_EQ(IsDone(s), s == TaskState::kCompleted || s == TaskState::kSkipped) << Name(s);
  }
  for (JobState s : kAllJobStates) {
    EXPECT_EQ(IsGoing(s),
              s == JobState::kScheduled || s == JobState::kRunning || s == JobState::kPaused)
        << Name(s);
  }
}

}  // namespace
}  // namespace baton

// The checks of RUNNING rows a coordinator makes with its lease check: which rows are
// candidates for flow's LeaseExpired (a runnable whose node looks silent for longer than
// the lease) and TaskOverdue (a runnable past its `timeout` plus the grace). Only
// candidates are picked here, from one read of the RUNNING rows; flow judges each again
// when the Scheduler decides it under its job's lock.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "core/records.h"
#include "flow/flow.h"

namespace baton {

// An event to decide about a job's row.
struct RunningCheck {
  std::string job_id;
  flow::Event event;
};

// The TaskOverdue events (with `grace`) for the rows of `running` past their timeout plus
// `grace` at `now`.
std::vector<RunningCheck> OverdueChecks(const std::vector<TaskRecord>& running, TimePoint now,
                                        Duration grace);
// The LeaseExpired events (with `lease` and the node's last heartbeat) for the rows of
// `running` whose node was not seen within `lease` at `now` (`last_seen`: the nodes seen
// within it, by id).
std::vector<RunningCheck> LeaseChecks(const std::vector<TaskRecord>& running,
                                      const std::map<std::string, TimePoint>& last_seen,
                                      TimePoint now, Duration lease);

}  // namespace baton

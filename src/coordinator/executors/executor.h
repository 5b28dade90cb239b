// Executor: what runs a leaf task row once the decision that made it queued has been
// committed. One executor per leaf kind (core/task_kind.h): today every leaf kind is
// runnable and the broker executor hands it to the workers; later kinds (an HTTP call, an
// approval) run in the coordinator and report their outcomes as the events a worker sends.
//
// Contract: Start is called after the commit, with rows stored queued (PENDING, or
// SCHEDULED when the broker keeps nothing). It never blocks on another job's lock. A row it
// could not hand on now is returned: the caller tries it again later (a row started twice
// runs once: workers and the Started decision see to it).
//
// Thread-safety: implementations are thread-safe.
#pragma once

#include <vector>

#include "core/records.h"

namespace baton {

class Executor {
 public:
  virtual ~Executor() = default;
  // Starts `rows` (all of this executor's kind); returns those to start again later.
  virtual std::vector<TaskRecord> Start(std::vector<TaskRecord> rows) = 0;
};

}  // namespace baton

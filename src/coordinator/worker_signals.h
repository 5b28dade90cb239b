// WorkerSignals: tells workers of cancelled tasks after a decision's commit. A task that
// may wait in a queue is dropped: every worker heard from within the node lease (and every
// worker about to be told to kill a task) is told not to start it. A running task is
// killed on its node. Drops go first, so the slot a kill frees cannot take a dropped task
// before its worker heard of the drop. The drops sent in the last node lease are kept, so
// that a worker whose heartbeat was not stored yet when they were sent hears of them
// later (TellMissedDrops), once per drop.
//
// Thread-safety: thread-safe. An annotated mutex guards the kept drops; it is never held
// across a broker publish or a datastore call.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "broker/broker.h"
#include "datastore/datastore.h"

namespace baton {

class WorkerSignals {
 public:
  WorkerSignals(Broker& broker, Datastore& datastore, Clock& clock, Duration node_lease)
      : broker_(broker), datastore_(datastore), clock_(clock), node_lease_(node_lease) {}

  // `drops`: tasks to drop everywhere; `kills`: node → tasks to kill there.
  void Tell(const std::vector<std::string>& drops,
            const std::map<std::string, std::vector<std::string>>& kills) BATON_EXCLUDES(mu_);
  // Tells every live worker not to start these tasks (a paused job's queued ones), and to
  // let one it runs already run on.
  void Withdraw(const std::vector<std::string>& ids);
  // Tells worker `node_id` the drops of the last node lease it was not told of.
  void TellMissedDrops(const std::string& node_id) BATON_EXCLUDES(mu_);
  // A worker's heartbeat was stored: TellMissedDrops, and, the first time this
  // coordinator hears of it, every drop the datastore holds from the last kDropWindow
  // (what any coordinator decided, before a restart too), and before them the tasks of
  // paused jobs still queued (withdrawn: a worker started during a pause must not start
  // them), the last message marked `complete` (a starting worker awaits it before it
  // takes a task).
  void WorkerHeard(const std::string& node_id) BATON_EXCLUDES(mu_);

  // How far back a starting worker is told of drops: how long a cancelled task's message
  // may wait in a queue and still be dropped, not run, by a worker that starts later.
  static constexpr Duration kDropWindow = std::chrono::hours(24 * 7);

 private:
  // The workers to tell of drops now: those heard from within the lease, and `kills`'.
  std::set<std::string> NodesToTell(const std::map<std::string, std::vector<std::string>>& kills);
  // Publishes CancelTask messages of `ids` to `node`'s cancel queue; with `complete`, the
  // last one (an empty one for no ids) says so; with `withdraw`, they are withdrawals.
  void TellNode(const std::string& node, const std::vector<std::string>& ids, bool complete = false,
                bool withdraw = false);

  struct SentDrops {
    TimePoint at;
    std::vector<std::string> ids;
    std::set<std::string> told;
  };
  static constexpr std::size_t kMaxKeptDrops = 100000;

  Broker& broker_;
  Datastore& datastore_;
  Clock& clock_;
  const Duration node_lease_;
  Mutex mu_;
  std::deque<SentDrops> recent_ BATON_GUARDED_BY(mu_);
  std::size_t recent_ids_ BATON_GUARDED_BY(mu_) = 0;
  // The workers told of the stored drops (WorkerHeard); forgotten past kMaxHeard, after
  // which each is told again (a drop told twice is harmless).
  static constexpr std::size_t kMaxHeard = 10000;
  std::set<std::string> heard_ BATON_GUARDED_BY(mu_);
};

}  // namespace baton

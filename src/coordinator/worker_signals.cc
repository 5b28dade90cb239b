#include "coordinator/worker_signals.h"

#include <algorithm>
#include <cstddef>

#include "base/log.h"
#include "core/messages.h"
#include "core/names.h"

namespace baton {

void WorkerSignals::TellNode(const std::string& node, const std::vector<std::string>& ids,
                             bool complete, bool withdraw) {
  constexpr std::size_t kPerMessage = 1000;
  for (std::size_t i = 0; i < ids.size() || (complete && i == 0); i += kPerMessage) {
    CancelTask message;
    message.task_ids.assign(
        ids.begin() + static_cast<std::ptrdiff_t>(i),
        ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), i + kPerMessage)));
    message.complete = complete && i + kPerMessage >= ids.size();
    message.withdraw = withdraw;
    Status s = broker_.Publish(CancelQueueFor(node), Encode(message));
    if (!s.ok()) {
      log::Error("telling a worker of cancelled tasks failed",
                 {{"node", node}, {"error", s.message()}});
    }
  }
}

std::set<std::string> WorkerSignals::NodesToTell(
    const std::map<std::string, std::vector<std::string>>& kills) {
  // Every worker heard from within the lease, and every worker about to be told to kill
  // a task (its heartbeat may not be stored yet).
  std::set<std::string> told;
  auto nodes = datastore_.ActiveNodes(clock_.Now() - node_lease_);
  if (!nodes.ok()) {
    log::Error("listing workers to tell of cancelled tasks failed",
               {{"error", nodes.status().message()}});
  } else {
    for (const NodeRecord& node : *nodes) {
      if (!node.queue.empty()) told.insert(node.id);  // a coordinator takes no tasks
    }
  }
  for (const auto& [node, ids] : kills) told.insert(node);
  return told;
}

void WorkerSignals::Withdraw(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  for (const std::string& node : NodesToTell({})) {
    TellNode(node, ids, /*complete=*/false, /*withdraw=*/true);
  }
}

void WorkerSignals::Tell(const std::vector<std::string>& drops,
                         const std::map<std::string, std::vector<std::string>>& kills) {
  if (!drops.empty()) {
    // The tree's lock, held by the caller, keeps a later decision's kill of this tree
    // behind these drops.
    std::set<std::string> told = NodesToTell(kills);
    {
      // Kept for the workers not told now (TellMissedDrops); bounded by age and count.
      MutexLock lock(mu_);
      recent_.push_back({clock_.Now(), drops, told});
      recent_ids_ += drops.size();
      while (recent_ids_ > kMaxKeptDrops && recent_.size() > 1) {
        recent_ids_ -= recent_.front().ids.size();
        recent_.pop_front();
      }
    }
    for (const std::string& node : told) TellNode(node, drops);
  }
  for (const auto& [node, ids] : kills) {
    // A worker whose heartbeat was not stored when tasks were dropped hears of them now,
    // before the kill frees one of its slots: a task of a job cancelled while this one
    // was starting there (a late start is killed) must not take that slot.
    TellMissedDrops(node);
    TellNode(node, ids);
  }
}

void WorkerSignals::TellMissedDrops(const std::string& node_id) {
  std::vector<std::string> missed;
  {
    MutexLock lock(mu_);
    const TimePoint oldest = clock_.Now() - node_lease_;
    while (!recent_.empty() && recent_.front().at < oldest) {
      recent_ids_ -= recent_.front().ids.size();
      recent_.pop_front();
    }
    for (SentDrops& sent : recent_) {
      if (!sent.told.insert(node_id).second) continue;
      missed.insert(missed.end(), sent.ids.begin(), sent.ids.end());
    }
  }
  if (!missed.empty()) TellNode(node_id, missed);
}

void WorkerSignals::WorkerHeard(const std::string& node_id) {
  TellMissedDrops(node_id);
  {
    MutexLock lock(mu_);
    if (heard_.size() >= kMaxHeard) heard_.clear();
    if (!heard_.insert(node_id).second) return;
  }
  // After the heartbeat was stored: a drop decided after this read is told to the node by
  // whoever decided it (it is among the nodes heard from).
  // And of the tasks of paused jobs, queued still (withdrawn while it was not heard of).
  auto drops = datastore_.DroppedTasks(clock_.Now() - kDropWindow, kMaxKeptDrops);
  auto withdrawn = drops.ok() ? datastore_.WithdrawnTasks(static_cast<int>(kMaxKeptDrops))
                              : Result<std::vector<std::string>>(drops.status());
  if (!withdrawn.ok()) {
    log::Error("reading the cancelled and the withdrawn tasks to tell a worker failed",
               {{"node", node_id}, {"error", withdrawn.status().message()}});
    MutexLock lock(mu_);
    heard_.erase(node_id);  // tried again at its next heartbeat
    return;
  }
  if (drops->size() >= kMaxKeptDrops) {
    log::Warn("a worker is told only of the latest cancelled tasks",
              {{"node", node_id}, {"tasks", std::to_string(drops->size())}});
  }
  // The withdrawn before the drops' last message, after which a starting worker takes
  // tasks.
  TellNode(node_id, *withdrawn, /*complete=*/false, /*withdraw=*/true);
  TellNode(node_id, *drops, /*complete=*/true);
}

}  // namespace baton

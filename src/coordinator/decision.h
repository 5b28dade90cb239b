// Decision: one decision's scope (a Datastore::Transact body) as the scheduler writes it.
// Row effects are written in the scope (the Outbox counts what they wrote); flow's notices
// (Notify, Changed) go to the Outbox as they come; a CancelActive's cancelled rows go
// through flow::AfterCancel (read first, only when the cancel's `hook` asks for its rows:
// CancelTasks does not return them); after-commit effects are kept in their order and
// follow-up events queued, for the scheduler to decide against the rows as they now are.
//
// Thread-safety: not thread-safe; one per decision scope, used by the thread taking it.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "base/status.h"
#include "coordinator/job_cache.h"
#include "coordinator/outbox.h"
#include "datastore/datastore.h"
#include "flow/flow.h"

namespace baton {

class Decision {
 public:
  Decision(Transaction& tx, JobCache::Scope& contexts, Outbox& outbox, flow::Policy policy)
      : tx_(tx), contexts_(contexts), outbox_(outbox), policy_(std::move(policy)) {}

  Status Apply(std::vector<flow::Effect> effects);
  // The next follow-up to decide; none when all were. Internal after 100,000 of them: a
  // follow-up never asks for itself again, but a bug must not spin.
  Result<std::optional<flow::Event>> NextFollowUp();

  bool wrote() const { return wrote_; }  // it wrote at least one row effect
  std::vector<JobRecord>& created() { return created_; }
  std::vector<flow::Effect>& after() { return after_; }

 private:
  Status Write(flow::CreateJob& e);
  Status Write(flow::UpdateJob& e);
  Status Write(flow::CreateTask& e);
  Status Write(flow::UpdateTask& e);
  Status Write(flow::CancelActive& e);

  Transaction& tx_;
  JobCache::Scope& contexts_;
  Outbox& outbox_;
  const flow::Policy policy_;
  bool wrote_ = false;
  std::vector<JobRecord> created_;
  std::vector<flow::Effect> after_;
  std::vector<flow::Event> follow_;
  std::size_t next_follow_ = 0;
};

}  // namespace baton

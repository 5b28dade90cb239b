#include "coordinator/decision.h"

#include <utility>
#include <variant>

namespace baton {

Status Decision::Apply(std::vector<flow::Effect> effects) {
  for (flow::Effect& effect : effects) {
    Status s = std::visit(
        [&](auto& e) -> Status {
          using E = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<E, flow::FollowUp>) {
            follow_.push_back(std::move(e.event));
            return Status::Ok();
          } else if constexpr (std::is_same_v<E, flow::Notify>) {
            outbox_.Hook(e);
            return Status::Ok();
          } else if constexpr (std::is_same_v<E, flow::Changed>) {
            outbox_.Changed(e);
            return Status::Ok();
          } else if constexpr (requires { Write(e); }) {
            wrote_ = true;
            return Write(e);
          } else {
            after_.push_back(std::move(e));
            return Status::Ok();
          }
        },
        effect);
    BATON_RETURN_IF_ERROR(s);
  }
  return Status::Ok();
}

Result<std::optional<flow::Event>> Decision::NextFollowUp() {
  if (next_follow_ >= follow_.size()) return std::optional<flow::Event>();
  if (next_follow_ >= 100000) return Internal("a decision asked for more than 100,000 follow-ups");
  return std::optional<flow::Event>(follow_[next_follow_++]);
}

Status Decision::Write(flow::CreateJob& e) {
  created_.push_back(e.row);
  BATON_RETURN_IF_ERROR(tx_.CreateJob(e.row));
  JobCache::Created(contexts_, e.row);
  return Status::Ok();
}

Status Decision::Write(flow::UpdateJob& e) {
  // A job's definition is never rewritten (flow changes a stored job's state and context
  // only), and the view's row may not hold it.
  if (!e.context) return tx_.UpdateJobState(e.row);
  BATON_RETURN_IF_ERROR(tx_.UpdateJobStateAndContext(e.row));
  JobCache::Wrote(contexts_, e.row.id, std::move(e.row.context));
  return Status::Ok();
}

Status Decision::Write(flow::CreateTask& e) {
  outbox_.TaskCreated(e.row);
  // Moved out and freed once written: an each of 20,000 children does not hold every row
  // twice until the end of its decision.
  std::vector<TaskRecord> row;
  row.push_back(std::move(e.row));
  return tx_.CreateTasks(row);
}

Status Decision::Write(flow::UpdateTask& e) {
  outbox_.TaskUpdated(e);
  return tx_.UpdateTask(e.row);
}

Status Decision::Write(flow::CancelActive& e) {
  auto cancelled = tx_.CancelTasks(e.job_id, e.under, e.at);
  if (!cancelled.ok()) return cancelled.status();
  std::vector<flow::CancelledRow> rows;
  rows.reserve(cancelled->size());
  for (CancelledTask& c : *cancelled) {
    rows.push_back({std::move(c.id), c.was, std::move(c.node_id), std::move(c.subjob_id), {}});
    // Its job calls webhooks on a task's state: the hook reports the row as cancelled,
    // which CancelTasks does not return.
    if (e.hook) {
      auto row = tx_.GetTask(rows.back().id);
      if (!row.ok()) return row.status();
      rows.back().row = std::move(*row);
    }
  }
  // The rows' notices in the scope (in order, as Apply takes them), the rest after it.
  for (flow::Effect& more : flow::AfterCancel(e, rows, policy_)) {
    if (auto* f = std::get_if<flow::FollowUp>(&more)) {
      follow_.push_back(std::move(f->event));
    } else if (auto* n = std::get_if<flow::Notify>(&more)) {
      outbox_.Hook(*n);
    } else if (auto* c = std::get_if<flow::Changed>(&more)) {
      outbox_.Changed(*c);
    } else {
      after_.push_back(std::move(more));
    }
  }
  return Status::Ok();
}

}  // namespace baton

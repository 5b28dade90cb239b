#include "coordinator/after_commit.h"

#include <chrono>
#include <map>
#include <type_traits>
#include <utility>
#include <variant>

#include "base/log.h"
#include "coordinator/worker_events.h"
#include "core/task_kind.h"

namespace baton {

AfterCommit::AfterCommit(Executors executors, Deadlines& deadlines, WorkerSignals& signals,
                         Clock& clock, bool durable_broker, Duration republish_delay,
                         Decisions decisions)
    : executors_(executors),
      deadlines_(deadlines),
      signals_(signals),
      clock_(clock),
      durable_broker_(durable_broker),
      republish_delay_(republish_delay),
      decisions_(std::move(decisions)) {}

Status AfterCommit::Run(std::vector<flow::Effect>&& after) {
  Status result;
  std::vector<TaskRecord> starts;
  std::vector<std::string> drops;
  std::vector<std::string> withdrawn;
  std::map<std::string, std::vector<std::string>> kills;
  for (flow::Effect& effect : after) {
    std::visit(
        [&](auto& e) {
          using E = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<E, flow::Start>) {
            starts.push_back(std::move(e.row));
          } else if constexpr (std::is_same_v<E, flow::StartAt>) {
            RetryLater(e.task_id, "", e.at);
          } else if constexpr (std::is_same_v<E, flow::Kill>) {
            kills[e.node_id].push_back(e.task_id);
          } else if constexpr (std::is_same_v<E, flow::Drop>) {
            drops.push_back(e.task_id);
          } else if constexpr (std::is_same_v<E, flow::Withdraw>) {
            withdrawn.push_back(e.task_id);
          } else if constexpr (std::is_same_v<E, flow::ArmJobTimeout>) {
            ArmJobTimeout(e.job_id, e.timeout, e.at);
          } else if constexpr (std::is_same_v<E, flow::DisarmJobTimeout>) {
            deadlines_.DisarmJobTimeout(e.job_id);
          } else if constexpr (std::is_same_v<E, flow::Refused>) {
            if (result.ok()) result = FailedPrecondition(e.reason);
          }
          // Row effects and follow-ups were taken in the scope; JobFinished is told by the
          // scheduler once the tree's lock is released.
        },
        effect);
  }
  StartRows(std::move(starts));
  signals_.Tell(drops, kills);
  signals_.Withdraw(withdrawn);
  return result;
}

void AfterCommit::StartRows(std::vector<TaskRecord> rows) {
  // One batch per executor: a parallel's children go out with one wait for confirms.
  std::map<TaskKind, std::vector<TaskRecord>> by_kind;
  for (TaskRecord& row : rows) by_kind[KindOf(row.task)].push_back(std::move(row));
  for (auto& [kind, batch] : by_kind) {
    Executor* executor = executors_.For(kind);
    if (executor == nullptr) {
      // flow starts leaf rows only; a composite here would "run" as an empty script.
      for (const TaskRecord& row : batch) {
        log::Error("a composite row was to be started; it is not",
                   {{"task_id", row.id}, {"kind", std::string(ToString(kind))}});
      }
      continue;
    }
    Reported(executor->Start(std::move(batch)));
  }
}

void AfterCommit::Reported(StartReport report) {
  // Decided as events, in one scope, under the tree's lock still held: a row marked
  // SCHEDULED or set back to PENDING sends its hook and change like any other move.
  const std::vector<flow::Event> events = FromExecutor(report, durable_broker_);
  if (events.empty()) return;
  const Status s = decisions_.reported(events);
  if (s.ok()) return;
  // Published rows left PENDING are published again by reconciling (a duplicate runs
  // once); refused ones are tried again all the same.
  log::Error("recording what an executor reported failed", {{"error", s.message()}});
  for (const StartReport::Refusal& r : report.refused) {
    RetryLater(r.task_id, r.job_id, clock_.Now() + republish_delay_);
  }
}

void AfterCommit::RetryLater(const std::string& task_id, const std::string& job_id, TimePoint at) {
  deadlines_.At(at, [this, task_id, job_id] {
    Status s = decisions_.task(task_id, job_id, flow::RetryDue{task_id});
    if (!s.ok() && s.code() != StatusCode::kNotFound) {
      log::Error("starting a task again failed", {{"task_id", task_id}, {"error", s.message()}});
    }
  });
}

void AfterCommit::ArmJobTimeout(const std::string& job_id, Duration timeout, TimePoint at) {
  deadlines_.ArmJobTimeout(job_id, at, [this, job_id, timeout] {
    Status s = decisions_.job(job_id, flow::JobTimedOut{job_id, timeout});
    if (MayPass(s)) {
      log::Warn("a job timed out but its lock cannot be taken; trying again in a second",
                {{"job_id", job_id}, {"error", s.message()}});
      ArmJobTimeout(job_id, timeout, clock_.Now() + std::chrono::seconds(1));
    } else if (!s.ok() && s.code() != StatusCode::kNotFound) {
      log::Error("failing a timed-out job failed", {{"job_id", job_id}, {"error", s.message()}});
    }
  });
}

}  // namespace baton

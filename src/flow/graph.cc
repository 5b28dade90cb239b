// A graph's steps: the top-level tasks of a job whose definition is a graph, or the tasks
// of a parallel whose tasks are one (core/graph.h). The job row's `steps` (the parallel
// row's) holds each task's state; a task starts when its trigger rule over the tasks it
// needs says so, or is SKIPPED (a row with the reason as its error) when the rule can no
// longer be met. A failure does not end the graph at once: the tasks it does not stop go
// on, and the job (the parallel) ends when every step has ended, FAILED (with the first
// failure's error) if a step failed, else COMPLETED. A parallel's child i is its row of
// each_index i (its retries and fallback share it), at the parallel's position.
#include "core/graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/evaluate.h"
#include "core/messages.h"
#include "core/task_kind.h"
#include "flow/decider.h"

namespace baton::flow {
namespace {

std::string_view StepName(char state) {
  switch (state) {
    case step::kCompleted:
      return "COMPLETED";
    case step::kPassed:
    case step::kSkipped:
      return "SKIPPED";
    case step::kFailed:
      return "FAILED";
    case step::kCancelled:
      return "CANCELLED";
    case step::kRunning:
      return "RUNNING";
    default:
      return "PENDING";
  }
}

}  // namespace

// A graph's host: a job (its top-level tasks, `parallel` null) or a graph parallel's row
// (its children). Null when its graph cannot go on: the job is not going or its cleanup
// runs, or the parallel ended.
std::optional<Decider::GraphHost> Decider::HostOf(const std::string& key) {
  if (JobRecord* job = J(key); job != nullptr) {
    if (!IsGoing(job->state) || job->ending || job->steps.empty()) return std::nullopt;
    return GraphHost{&job->steps, &Def(*job).tasks, job, nullptr};
  }
  TaskRecord* p = T(key);
  if (p == nullptr || IsTerminal(p->state) || p->steps.empty() || !p->task.parallel) {
    return std::nullopt;
  }
  JobRecord* job = J(p->job_id);
  if (job == nullptr || !IsGoing(job->state)) return std::nullopt;
  return GraphHost{&p->steps, &p->task.parallel->tasks, job, p};
}

// The graph a step's row is in, and its index there: its parallel's (by its each_index)
// when its parent is a graph parallel, else its job's (by its position), if a graph.
std::optional<std::pair<std::string, std::size_t>> Decider::GraphSlot(const TaskRecord& t) {
  if (t.parent_id.empty()) {
    const JobRecord* job = J(t.job_id);
    if (job == nullptr || job->steps.empty()) return std::nullopt;
    return std::pair{t.job_id, static_cast<std::size_t>(t.position - 1)};
  }
  const TaskRecord* p = T(t.parent_id);
  if (p == nullptr || p->steps.empty()) return std::nullopt;
  return std::pair{t.parent_id, static_cast<std::size_t>(t.each_index)};
}

const TaskGraph& Decider::GraphFor(const std::string& key) {
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    const JobRecord* job = J(key);
    it = graphs_
             .emplace(key, job != nullptr ? GraphOf(Def(*job).mode, Def(*job).tasks)
                                          : GraphOf(TaskOrder::kDag, T(key)->task.parallel->tasks))
             .first;
  }
  return it->second;
}

void Decider::StartGraph(const std::string& job_id) {
  JobRecord& job = *J(job_id);
  job.steps.assign(Def(job).tasks.size(), step::kWaiting);
  StepGraph(job_id);
}

// Starts or skips every waiting step whose rule is decided, until none changes, then
// ends the graph when every step has ended. A step that ends within this (a task skipped
// by its `if`, a template that fails) steps the graph again from inside: that call only
// asks the outer one for another round.
void Decider::StepGraph(const std::string& key) {
  if (stepping_.contains(key)) {
    restep_.insert(key);
    return;
  }
  stepping_.insert(key);
  bool again = true;
  while (again) {
    again = false;
    restep_.erase(key);
    std::optional<GraphHost> host = HostOf(key);
    if (!host) break;
    const TaskGraph& graph = GraphFor(key);
    const std::vector<Task>& tasks = *host->tasks;
    const std::string job_id = host->job->id;
    // Where a step's row goes: the job's top level (position i + 1), or the parallel's
    // child i (at its position), seeing the parallel's scope.
    const std::string parent_id = host->parallel != nullptr ? key : "";
    const json extra = host->parallel != nullptr ? host->parallel->scope : json::object();
    const int parallel_position = host->parallel != nullptr ? host->parallel->position : 0;
    auto position_of = [&](std::size_t i) {
      return host->parallel != nullptr ? parallel_position : static_cast<int>(i) + 1;
    };
    auto index_of = [&](std::size_t i) {
      return host->parallel != nullptr ? static_cast<int>(i) : 0;
    };
    auto row_at = [&](std::size_t i, TaskState state) {
      return MakeRow(job_id, parent_id, position_of(i), index_of(i), state);
    };
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      // A step that ended within this round may have ended the graph (a failure of it
      // fails the job) or moved the rows: read the host again.
      host = HostOf(key);
      if (!host) break;
      std::string& steps = *host->steps;
      if (i >= steps.size() || steps[i] != step::kWaiting) continue;
      // An edge with a `when` is taken once its task succeeded and the condition holds;
      // not taken, it counts as skipped for this task.
      std::vector<char> upstream;
      std::string when_error;
      for (std::size_t k = 0; k < graph.needs[i].size(); ++k) {
        char state = steps[static_cast<std::size_t>(graph.needs[i][k])];
        const std::string& when = graph.when[i][k];
        if (!when.empty() && (state == step::kCompleted || state == step::kPassed)) {
          auto taken = EvaluateCondition(when, VarsFor(*host->job, extra), options_);
          if (!taken.ok()) {
            when_error = fmt::format("needs[{}].when: {}", k, taken.status().message());
            break;
          }
          if (!*taken) state = step::kSkipped;
        }
        upstream.push_back(state);
      }
      if (!when_error.empty()) {
        // The condition cannot be evaluated: the task fails, as one whose `if` fails.
        again = true;
        steps[i] = step::kRunning;
        TaskRecord row = row_at(i, TaskState::kPending);
        row.task = tasks[i];
        FailNow(NewTask(std::move(row)), when_error);
        continue;
      }
      Verdict verdict = Judge(graph.rules[i], upstream);
      if (verdict == Verdict::kWait) continue;
      again = true;
      if (verdict == Verdict::kRun) {
        steps[i] = step::kRunning;
        DispatchNew(tasks[i], job_id, parent_id, position_of(i), extra, index_of(i));
        continue;
      }
      steps[i] = step::kSkipped;
      std::string why;
      for (std::size_t k = 0; k < upstream.size(); ++k) {
        const std::size_t n = static_cast<std::size_t>(graph.needs[i][k]);
        if (!why.empty()) why += ", ";
        why += fmt::format("\"{}\" {}", tasks[n].name, StepName(steps[n]));
        if (upstream[k] == step::kSkipped && steps[n] != step::kSkipped) {
          why += " but its when is false";
        }
      }
      TaskRecord row = row_at(i, TaskState::kSkipped);
      row.task = tasks[i];
      row.completed_at = now_;
      row.error = fmt::format("not run: its trigger rule {} cannot be met ({})",
                              ToString(graph.rules[i]), why);
      NewTask(std::move(row));
    }
    again = again || restep_.contains(key);
  }
  stepping_.erase(key);
  restep_.erase(key);
  EndGraph(key);
}

void Decider::GraphTaskEnded(const TaskRecord& t) {
  if (t.state == TaskState::kCompleted) return EndStep(t, step::kCompleted, "");
  // An optional task's failure, and a skip by its own `if`, count as a success.
  if (t.state == TaskState::kFailed || t.error.empty()) return EndStep(t, step::kPassed, "");
  EndStep(t, step::kSkipped, "");
}

void Decider::GraphTaskFailed(const TaskRecord& t, const std::string& error) {
  EndStep(t, step::kFailed, error);
}

// The RUNNING step whose row `t` is ends as `state`; the graph is stepped on.
void Decider::EndStep(const TaskRecord& t, char state, const std::string& error) {
  auto slot = GraphSlot(t);
  if (!slot) return;
  std::optional<GraphHost> host = HostOf(slot->first);
  if (!host) return;
  std::string& steps = *host->steps;
  const std::size_t i = slot->second;
  if (i >= steps.size() || steps[i] != step::kRunning) return;
  steps[i] = state;
  if (state == step::kFailed) {
    // The graph's error is its first failure's, set as it happens (the graph goes on).
    std::string& own = host->parallel != nullptr ? host->parallel->error : host->job->error;
    if (own.empty()) own = SanitizeUtf8(error);
  }
  StepGraph(slot->first);
}

// Once every step has ended: FAILED if one failed, else COMPLETED. Until then a job's
// progress is the share of steps ended, and its position one past their count; a
// parallel's completions count them.
void Decider::EndGraph(const std::string& key) {
  std::optional<GraphHost> host = HostOf(key);
  if (!host) return;
  const std::string& steps = *host->steps;
  const int count = static_cast<int>(steps.size());
  const int ended = static_cast<int>(std::count_if(steps.begin(), steps.end(), IsEndedStep));
  const bool failed = steps.find(step::kFailed) != std::string::npos;
  if (TaskRecord* p = host->parallel; p != nullptr) {
    p->completions = ended;
    if (ended < count) return;
    if (!failed) {
      if (Finish(*p, TaskState::kCompleted, "", "", "", std::nullopt)) TaskDone(key);
      return;
    }
    const std::string error = p->error;
    if (Finish(*p, TaskState::kFailed, "", error, "", std::nullopt)) TaskFailed(key);
    return;
  }
  JobRecord* job = host->job;
  if (ended < count) {
    job->position = ended + 1;
    job->progress = 100.0 * ended / count;
    return;
  }
  job->position = count + 1;
  if (failed) {
    std::string error = job->error;
    FailJob(key, error, JobState::kFailed);
    return;
  }
  CompleteJob(key);
}

// A restart runs again the steps that failed, were cancelled or were skipped by their
// rules; the completed ones keep their results.
void Decider::RestartGraph(JobRecord& job) {
  bool any = false;
  for (char& s : job.steps) {
    if (s == step::kFailed || s == step::kCancelled || s == step::kSkipped || s == step::kRunning) {
      s = step::kWaiting;
      any = true;
    }
  }
  if (!any) {
    after_.push_back(Refused{"the job has no more tasks to run"});
    return;
  }
  RunAgain(job);
  StepGraph(job.id);
}

// After a crash: a running step whose latest row ended and was not acted on is acted on
// now; then the graph is stepped (a graph whose steps all ended ends). `rows` are the
// host's: a job's every row (its top-level ones count), a parallel's children.
void Decider::ReconcileGraph(const std::string& key, const std::vector<std::string>& rows) {
  std::map<std::size_t, const TaskRecord*> latest;
  for (const std::string& id : rows) {
    const TaskRecord* row = T(id);
    auto slot = GraphSlot(*row);
    if (!slot || slot->first != key || IsJobHandler(row->task)) continue;
    latest[slot->second] = LatestAttempt(latest[slot->second], *row);
  }
  std::optional<GraphHost> host = HostOf(key);
  if (!host) return;
  // The steps running as stored (acting on one may start others, whose rows are new).
  std::vector<std::size_t> running;
  for (std::size_t i = 0; i < host->steps->size(); ++i) {
    if ((*host->steps)[i] == step::kRunning) running.push_back(i);
  }
  for (std::size_t i : running) {
    host = HostOf(key);
    if (!host) return;
    if ((*host->steps)[i] != step::kRunning) continue;
    auto it = latest.find(i);
    if (it == latest.end()) {
      (*host->steps)[i] = step::kWaiting;  // never created: started again below
      continue;
    }
    const TaskRecord& row = *it->second;
    if (IsDone(row.state)) {
      TaskDone(row.id);
    } else if (row.state == TaskState::kFailed) {
      RetryOrFail(row.id);
    } else if (row.state == TaskState::kCancelled) {
      GraphTaskFailed(row, row.error.empty() ? "cancelled" : row.error);
    }
  }
  StepGraph(key);
}

}  // namespace baton::flow

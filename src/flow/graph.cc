// A graph's steps: the top-level tasks of a job whose definition is a graph
// (core/graph.h). The job row's `steps` holds each task's state; a task starts when its
// trigger rule over the tasks it needs says so, or is SKIPPED (a row with the reason as
// its error) when the rule can no longer be met. A failure does not end the job at once:
// the tasks it does not stop go on, and the job ends when every step has ended, FAILED
// (with the first failure's error) if a step failed, else COMPLETED.
#include "core/graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/evaluate.h"
#include "core/messages.h"
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

const TaskGraph& Decider::GraphFor(const JobRecord& job) {
  auto it = graphs_.find(job.id);
  if (it == graphs_.end()) {
    it = graphs_.emplace(job.id, GraphOf(Def(job).mode, Def(job).tasks)).first;
  }
  return it->second;
}

void Decider::StartGraph(const std::string& job_id) {
  JobRecord& job = *J(job_id);
  job.steps.assign(Def(job).tasks.size(), step::kWaiting);
  StepGraph(job_id);
}

// Starts or skips every waiting step whose rule is decided, until none changes, then
// ends the job when every step has ended. A step that ends within this (a task skipped
// by its `if`, a template that fails) steps the graph again from inside: that call only
// asks the outer one for another round.
void Decider::StepGraph(const std::string& job_id) {
  if (stepping_.contains(job_id)) {
    restep_.insert(job_id);
    return;
  }
  stepping_.insert(job_id);
  bool again = true;
  while (again) {
    again = false;
    restep_.erase(job_id);
    JobRecord* job = J(job_id);
    if (job == nullptr || !IsGoing(job->state) || job->ending) break;
    const TaskGraph& graph = GraphFor(*job);
    const std::vector<Task>& tasks = Def(*job).tasks;
    for (std::size_t i = 0; i < job->steps.size() && i < tasks.size(); ++i) {
      if (!IsGoing(job->state)) break;
      if (job->steps[i] != step::kWaiting) continue;
      // An edge with a `when` is taken once its task succeeded and the condition holds;
      // not taken, it counts as skipped for this task.
      std::vector<char> upstream;
      std::string when_error;
      for (std::size_t k = 0; k < graph.needs[i].size(); ++k) {
        char state = job->steps[static_cast<std::size_t>(graph.needs[i][k])];
        const std::string& when = graph.when[i][k];
        if (!when.empty() && (state == step::kCompleted || state == step::kPassed)) {
          auto taken = EvaluateCondition(when, VarsFor(*job, json::object()), options_);
          if (!taken.ok()) {
            when_error = fmt::format("needs[{}].when: {}", k, taken.status().message());
            break;
          }
          if (!*taken) state = step::kSkipped;
        }
        upstream.push_back(state);
      }
      const int position = static_cast<int>(i) + 1;
      if (!when_error.empty()) {
        // The condition cannot be evaluated: the task fails, as one whose `if` fails.
        again = true;
        job->steps[i] = step::kRunning;
        TaskRecord row = MakeRow(job_id, "", position, 0, TaskState::kPending);
        row.task = tasks[i];
        FailNow(NewTask(std::move(row)), when_error);
        continue;
      }
      Verdict verdict = Judge(graph.rules[i], upstream);
      if (verdict == Verdict::kWait) continue;
      again = true;
      if (verdict == Verdict::kRun) {
        job->steps[i] = step::kRunning;
        DispatchNew(tasks[i], job_id, "", position, json::object(), 0);
        continue;
      }
      job->steps[i] = step::kSkipped;
      std::string why;
      for (std::size_t k = 0; k < upstream.size(); ++k) {
        const std::size_t n = static_cast<std::size_t>(graph.needs[i][k]);
        if (!why.empty()) why += ", ";
        why += fmt::format("\"{}\" {}", tasks[n].name, StepName(job->steps[n]));
        if (upstream[k] == step::kSkipped && job->steps[n] != step::kSkipped) {
          why += " but its when is false";
        }
      }
      TaskRecord row = MakeRow(job_id, "", position, 0, TaskState::kSkipped);
      row.task = tasks[i];
      row.completed_at = now_;
      row.error = fmt::format("not run: its trigger rule {} cannot be met ({})",
                              ToString(graph.rules[i]), why);
      NewTask(std::move(row));
    }
    again = again || restep_.contains(job_id);
  }
  stepping_.erase(job_id);
  restep_.erase(job_id);
  EndGraph(job_id);
}

void Decider::GraphTaskEnded(const TaskRecord& t) {
  JobRecord* job = J(t.job_id);
  if (job == nullptr || !IsGoing(job->state)) return;
  const std::size_t i = static_cast<std::size_t>(t.position - 1);
  if (i >= job->steps.size() || job->steps[i] != step::kRunning) return;
  if (t.state == TaskState::kCompleted) {
    job->steps[i] = step::kCompleted;
  } else if (t.state == TaskState::kFailed) {
    job->steps[i] = step::kPassed;  // an optional task's failure counts as a success
  } else {
    job->steps[i] = t.error.empty() ? step::kPassed : step::kSkipped;
  }
  StepGraph(t.job_id);
}

void Decider::GraphTaskFailed(const TaskRecord& t, const std::string& error) {
  JobRecord* job = J(t.job_id);
  if (job == nullptr || !IsGoing(job->state)) return;
  const std::size_t i = static_cast<std::size_t>(t.position - 1);
  if (i >= job->steps.size() || job->steps[i] != step::kRunning) return;
  job->steps[i] = step::kFailed;
  // The job's error is its first failure's, set as it happens (the job goes on).
  if (job->error.empty()) job->error = SanitizeUtf8(error);
  StepGraph(t.job_id);
}

// Once every step has ended: FAILED if one failed, else COMPLETED. Until then the
// progress is the share of steps ended, and the position one past their count.
void Decider::EndGraph(const std::string& job_id) {
  JobRecord* job = J(job_id);
  if (job == nullptr || !IsGoing(job->state) || job->ending || job->steps.empty()) return;
  const int count = static_cast<int>(job->steps.size());
  const int ended =
      static_cast<int>(std::count_if(job->steps.begin(), job->steps.end(), IsEndedStep));
  if (ended < count) {
    job->position = ended + 1;
    job->progress = 100.0 * ended / count;
    return;
  }
  job->position = count + 1;
  if (job->steps.find(step::kFailed) != std::string::npos) {
    std::string error = job->error;
    FailJob(job_id, error, JobState::kFailed);
    return;
  }
  CompleteJob(job_id);
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
// now; then the graph is stepped (a job whose steps all ended ends).
void Decider::ReconcileGraph(const std::string& job_id, const std::vector<std::string>& rows) {
  JobRecord* job = J(job_id);
  std::map<int, const TaskRecord*> latest;
  for (const std::string& id : rows) {
    const TaskRecord* row = T(id);
    if (row->parent_id.empty()) latest[row->position] = LatestAttempt(latest[row->position], *row);
  }
  // The steps running as stored (acting on one may start others, whose rows are new).
  std::vector<std::size_t> running;
  for (std::size_t i = 0; i < job->steps.size(); ++i) {
    if (job->steps[i] == step::kRunning) running.push_back(i);
  }
  for (std::size_t i : running) {
    if (!IsGoing(job->state)) return;
    if (job->steps[i] != step::kRunning) continue;
    auto it = latest.find(static_cast<int>(i) + 1);
    if (it == latest.end()) {
      job->steps[i] = step::kWaiting;  // never created: started again below
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
  StepGraph(job_id);
}

}  // namespace baton::flow

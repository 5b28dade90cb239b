#include "testing/simulator/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <variant>

#include "core/evaluate.h"
#include "core/graph.h"
#include "core/job_json.h"
#include "core/names.h"
#include "core/task_kind.h"
#include "core/webhook.h"
#include "expr/expr.h"
#include "flow/flow.h"

namespace baton::flow::sim {
namespace {

using nlohmann::json;

std::uint64_t Mix(std::uint64_t h, std::string_view text) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// ----------------------------------------------------------------------- the oracle

// What a worker's run of task `name`, attempt `attempt`, comes to: the same in flow and
// in the interpreter.
enum class Outcome { kOk, kFail, kTimeout };
Outcome OutcomeOf(std::uint64_t seed, const std::string& name, int attempt) {
  std::uint64_t h = Mix(seed ^ 0x9e3779b97f4a7c15ULL, fmt::format("{}#{}", name, attempt));
  h ^= h >> 29;
  switch (h % 20) {
    case 0:
    case 1:
      return Outcome::kFail;
    case 2:
      return Outcome::kTimeout;
    default:
      return Outcome::kOk;
  }
}
std::string ResultOf(const std::string& name, int attempt) {
  return fmt::format("r:{}:{}", name, attempt);
}
std::string RunKey(const std::string& name, int attempt) {
  return fmt::format("{}#{}", name, attempt);
}
int AttemptOf(const Task& t) { return t.retry ? t.retry->attempts : 0; }

// ----------------------------------------------------------------------- the generator

class Generator {
 public:
  explicit Generator(Choices& c) : c_(c) {}

  Job MakeJob() {
    Job job;
    job.name = "sim";
    job.inputs = {{"on", c_.Percent(70) ? "true" : "false"}, {"p", "t"}};
    if (c_.Percent(20)) job.defaults = Defaults{.retry = Retry{.limit = 1}};
    // A job timeout that cannot come before the end (the fake clock moves 1 ms per
    // delivery), or one that may: 2 to 21 ms.
    if (c_.Percent(10)) job.timeout = std::chrono::seconds(60);
    if (c_.Percent(10)) job.timeout = std::chrono::milliseconds(2 + c_.Below(20));
    int n = 1 + static_cast<int>(c_.Below(3));
    for (int i = 0; i < n; ++i) job.tasks.push_back(MakeTask(0, "{{ inputs.p }}", false));
    if (!vars_.empty() && c_.Percent(50)) {
      job.output = fmt::format("{{{{ tasks.{} }}}}", vars_[c_.Below(vars_.size())]);
    }
    job.webhooks = Hooks(next_);
    // A third of the jobs are graphs: more top-level tasks, needs and trigger rules
    // (drawn last: the rest of a job is as it was drawn before graphs were).
    if (c_.Percent(33)) {
      int more = static_cast<int>(c_.Below(3));
      for (int i = 0; i < more; ++i) job.tasks.push_back(MakeTask(0, "{{ inputs.p }}", false));
      MakeGraph(job.mode, job.tasks, /*dag=*/c_.Percent(60));
    }
    SubJobGraphs(job.tasks);
    Cleanups(job.on_failure, job.finally, "{{ inputs.p }}");
    ParallelGraphs(job.tasks);
    ParallelGraphs(job.on_failure);
    ParallelGraphs(job.finally);
    return job;
  }

  // Some parallels' tasks are graphs (drawn last: the rest of a job is as it was drawn
  // before they were), wherever they are.
  void ParallelGraphs(std::vector<Task>& tasks) {
    for (Task& t : tasks) {
      if (t.parallel) {
        ParallelGraphs(t.parallel->tasks);
        if (t.parallel->tasks.size() >= 2 && c_.Percent(40)) {
          TaskOrder mode = TaskOrder::kDag;
          MakeGraph(mode, t.parallel->tasks, /*dag=*/true);
          // A parallel is a graph by its needs and rules alone.
          if (!IsGraph(*t.parallel)) t.parallel->tasks.back().trigger_rule = TriggerRule::kAllDone;
        }
      }
      if (t.each) {
        std::vector<Task> one{*t.each->task};
        ParallelGraphs(one);
        *t.each->task = std::move(one[0]);
      }
      if (t.switch_) {
        for (SwitchCase& c : t.switch_->cases) ParallelGraphs(c.tasks);
        ParallelGraphs(t.switch_->default_tasks);
      }
      if (t.loop) ParallelGraphs(t.loop->tasks);
      if (t.on_failure) ParallelGraphs(t.on_failure->tasks);
      if (t.subjob) {
        ParallelGraphs(t.subjob->tasks);
        ParallelGraphs(t.subjob->on_failure);
        ParallelGraphs(t.subjob->finally);
      }
    }
  }

  // A job's (or a sub-job's) onFailure and finally, on some of them (drawn last).
  void Cleanups(std::vector<Task>& on_failure, std::vector<Task>& finally,
                const std::string& prefix) {
    for (std::vector<Task>* list : {&on_failure, &finally}) {
      if (!c_.Percent(25)) continue;
      int n = 1 + static_cast<int>(c_.Below(2));
      for (int i = 0; i < n; ++i) list->push_back(MakeTask(2, prefix, false));
    }
  }

  // Some sub-jobs' tasks are graphs too.
  void SubJobGraphs(std::vector<Task>& tasks) {
    for (Task& t : tasks) {
      if (t.parallel) SubJobGraphs(t.parallel->tasks);
      if (t.each) {
        std::vector<Task> one{*t.each->task};
        SubJobGraphs(one);
        *t.each->task = std::move(one[0]);
      }
      if (t.switch_) {
        for (SwitchCase& c : t.switch_->cases) SubJobGraphs(c.tasks);
        SubJobGraphs(t.switch_->default_tasks);
      }
      if (t.loop) SubJobGraphs(t.loop->tasks);
      if (t.on_failure) SubJobGraphs(t.on_failure->tasks);
      if (t.subjob) {
        SubJobGraphs(t.subjob->tasks);
        if (c_.Percent(30)) MakeGraph(t.subjob->mode, t.subjob->tasks, c_.Percent(60));
        Cleanups(t.subjob->on_failure, t.subjob->finally, "{{ inputs.p }}");
      }
    }
  }

 private:
  // Webhooks on some of the jobs, by their count of tasks (no choice is drawn: a given
  // input makes the same job as before webhooks were given): what flow's Notify are
  // checked against.
  static std::vector<Webhook> Hooks(int k) {
    static constexpr const char* kEvents[] = {"", "job.StateChange", "job.Progress",
                                              "task.StateChange", "task.Progress"};
    if (k % 4 == 0) return {};
    std::vector<Webhook> hooks;
    hooks.push_back({.url = "http://hook/a", .event = kEvents[k % 5]});
    if (k % 3 == 0) hooks.push_back({.url = "http://hook/b", .event = kEvents[(k / 5) % 5]});
    return hooks;
  }

  // Needs on earlier tasks (never a cycle) and trigger rules, on the tasks of a list.
  void MakeGraph(TaskOrder& mode, std::vector<Task>& tasks, bool dag) {
    static constexpr TriggerRule kRules[] = {TriggerRule::kAllSuccess,
                                             TriggerRule::kAllDone,
                                             TriggerRule::kAllFailed,
                                             TriggerRule::kOneSuccess,
                                             TriggerRule::kOneFailed,
                                             TriggerRule::kNoneFailed,
                                             TriggerRule::kNoneFailedMinOneSuccess};
    mode = dag ? TaskOrder::kDag : TaskOrder::kSequence;
    for (std::size_t i = 1; i < tasks.size(); ++i) {
      if (c_.Percent(60)) {
        // Some edges are taken only when a condition holds. (Not one that cannot be
        // evaluated: when it is judged depends on which need ends first; flow_test has it.)
        static constexpr const char* kWhen[] = {"{{ inputs.on }}", "{{ false }}", "{{ true }}"};
        for (std::size_t j = 0; j < i; ++j) {
          if (!c_.Percent(50)) continue;
          std::uint32_t w = c_.Below(12);
          tasks[i].needs.push_back({tasks[j].name, w < 3 ? kWhen[w] : ""});
        }
      }
      if (c_.Percent(50)) tasks[i].trigger_rule = kRules[c_.Below(7)];
    }
    // A sequence without a need or a rule is no graph: give its last task a rule.
    if (!IsGraph(mode, tasks)) tasks.back().trigger_rule = TriggerRule::kAllDone;
  }

  // `prefix`: the template that makes this task's name unique (the indices of the
  // eaches around it). `in_each`: a `var` would be written by every iteration.
  Task MakeTask(int depth, const std::string& prefix, bool in_each, bool in_loop = false) {
    Task t;
    int k = ++next_;
    t.name = fmt::format("{}-n{}", prefix, k);
    std::uint32_t r = c_.Below(100);
    // Switches and loops (drawn after the other kinds, from a choice of their own, so a
    // given input makes the jobs it made before them only when that choice says so).
    if (depth < 4 && r >= 45 && r < 53) {
      if (r < 49) {
        t.switch_ = MakeSwitch(depth, prefix, in_each, in_loop);
      } else if (!in_loop) {
        t.loop = MakeLoop(depth, prefix, in_each);
      }
    }
    if (t.switch_ || t.loop) {
      // Composite: none of a runnable's fields.
    } else if (depth < 4 && r < 45) {
      std::uint32_t kind = c_.Below(3);
      if (kind == 0) {
        Parallel p;
        int n = 1 + static_cast<int>(c_.Below(3));
        for (int i = 0; i < n; ++i) {
          p.tasks.push_back(MakeTask(depth + 1, prefix, in_each, in_loop));
        }
        t.parallel = std::move(p);
      } else if (kind == 1) {
        Each e;
        e.var = fmt::format("e{}", k);
        e.list = fmt::format("{{{{ sequence(0, {}) }}}}", c_.Below(4));
        e.concurrency = static_cast<int>(c_.Below(3));
        *e.task =
            MakeTask(depth + 1, fmt::format("{}-{{{{ e{}.index }}}}", prefix, k), true, in_loop);
        t.each = std::move(e);
      } else {
        SubJob s;
        s.name = fmt::format("sub{}", k);
        s.inputs = {{"p", prefix + fmt::format("-s{}", k)}, {"on", "true"}};
        s.detached = c_.Percent(15);
        int n = 1 + static_cast<int>(c_.Below(2));
        for (int i = 0; i < n; ++i) s.tasks.push_back(MakeTask(depth + 1, "{{ inputs.p }}", false));
        if (c_.Percent(50)) s.output = "{{ inputs.p }}";
        s.webhooks = Hooks(k + 1);
        t.subjob = std::move(s);
      }
    } else if (k % 13 == 6) {
      // Some leaves are waits of 1 to 4 ms (not drawn from the choices): a timer of the
      // shell's, kept with the row, that a crash neither loses nor fires early.
      t.wait = Wait{.for_ = std::chrono::milliseconds(1 + k % 4)};
    } else if (k % 17 == 9) {
      // And some wait for a signal that never comes, failing at a timeout of 1 to 3 ms.
      t.wait =
          Wait{.signal = fmt::format("s{}", k), .timeout = std::chrono::milliseconds(1 + k % 3)};
    } else {
      t.run = "true";
      // Some runnables have a timeout that the coordinator checks (TaskOverdue): a run
      // that times out may hang on its worker instead of reporting (not drawn from the
      // choices, so a given input makes the same job as before).
      if (k % 3 == 0) t.timeout = std::chrono::milliseconds(1);
      if (c_.Percent(30)) t.retry = Retry{.limit = 1 + static_cast<int>(c_.Below(2))};
      if (c_.Percent(10)) {
        t.retry = Retry{.limit = 1, .initial_delay = std::chrono::milliseconds(5)};
      }
      // Some retries are for some failures only, some with a jitter (not drawn from the
      // choices: a given input makes the same job as before, these fields aside).
      if (t.retry && k % 4 == 1) {
        static const RetryOn kOn[] = {{.exit_codes = {1}},
                                      {.errors = {FailReason::kTimeout}},
                                      {.exit_codes = {2}, .errors = {FailReason::kOutOfMemory}}};
        t.retry->on = kOn[(k / 4) % 3];
      }
      if (t.retry && k % 5 == 2) t.retry->jitter = std::chrono::milliseconds(3);
    }
    // Some tasks are optional (not drawn from the choices either).
    t.optional = k % 9 == 4;
    // Some are pause points (not drawn either): their job pauses, the simulator resumes it.
    t.pause_before = k % 23 == 7;
    std::uint32_t cond = c_.Below(100);
    if (cond < 8) {
      t.if_expr = "false";
    } else if (cond < 14) {
      t.if_expr = "{{ inputs.on }}";
    } else if (cond < 16) {
      t.if_expr = "{{ nosuch }}";  // an evaluation error fails the task
    }
    if (!in_each && depth == 0 && c_.Percent(40)) {
      t.var = fmt::format("v{}", k);
      vars_.push_back(t.var);
    } else if (!in_each && c_.Percent(15)) {
      t.var = fmt::format("v{}", k);
    }
    // Some tasks have a fallback: one or two tasks that run when it finally fails, then
    // go on or fail (drawn last, from a choice of their own).
    if (depth < 4 && c_.Percent(12)) {
      OnFailure f;
      f.then = c_.Percent(50) ? Then::kContinue : Then::kFail;
      int n = 1 + static_cast<int>(c_.Below(2));
      for (int i = 0; i < n; ++i) {
        f.tasks.push_back(MakeTask(depth + 1, prefix, in_each, in_loop));
      }
      t.on_failure = std::move(f);
    }
    return t;
  }

  // A switch on a value that picks a case, the default, nothing, or cannot be evaluated.
  Switch MakeSwitch(int depth, const std::string& prefix, bool in_each, bool in_loop) {
    static constexpr const char* kValues[] = {"{{ inputs.on }}", "{{ 'b' }}", "{{ 'zz' }}",
                                              "{{ nosuch() }}"};
    Switch sw;
    std::uint32_t v = c_.Below(10);
    sw.value = kValues[v < 5 ? 0 : v < 7 ? 1 : v < 9 ? 2 : 3];
    auto branch = [&] {
      std::vector<Task> tasks;
      int n = static_cast<int>(c_.Below(3));
      for (int i = 0; i < n; ++i) tasks.push_back(MakeTask(depth + 1, prefix, in_each, in_loop));
      return tasks;
    };
    for (const char* key : {"b", "false", "true"}) {
      if (c_.Percent(70)) sw.cases.push_back({key, branch()});
    }
    if (c_.Percent(60) || sw.cases.empty()) sw.default_tasks = branch();
    return sw;
  }

  // A loop of one or two tasks, named by its iteration, that stops by its condition or
  // its max. (Not inside another loop: both would name their tasks by `loop.iteration`.)
  Loop MakeLoop(int depth, const std::string& prefix, bool in_each) {
    static constexpr const char* kUntil[] = {"{{ loop.iteration >= 1 }}", "{{ false }}",
                                             "{{ loop.iteration >= 0 }}", "{{ nosuch() }}"};
    Loop loop;
    loop.max = 1 + static_cast<int>(c_.Below(3));
    std::uint32_t cond = c_.Below(10);
    if (cond < 6) {
      loop.until_expr = kUntil[cond < 2 ? 0 : cond < 4 ? 1 : cond < 5 ? 2 : 3];
    } else if (cond < 8) {
      loop.while_expr = "{{ loop.iteration < 1 }}";
    }
    int n = 1 + static_cast<int>(c_.Below(2));
    std::string inner = prefix + "-{{ loop.iteration }}";
    for (int i = 0; i < n; ++i) loop.tasks.push_back(MakeTask(depth + 1, inner, in_each, true));
    return loop;
  }

  Choices& c_;
  int next_ = 0;
  std::vector<std::string> vars_;
};

// ----------------------------------------------------------------------- the reference

// A deliberately plain recursive interpreter of the job format: tasks in order, one at a
// time, each to its end. It keeps what it ran by job and step, so that any ending of the
// simulated job can be held against it: a job (the top-level one or a sub-job) runs its
// steps in order, so whatever ran of it is every run of its first steps, exactly as
// here, and some of one step more; a job that completes ran exactly these runs. Inside a
// step (a parallel, an each) what ran before a failure or a cancel depends on timing, so
// the interpreter runs every child: what may run.
class Interpreter {
 public:
  explicit Interpreter(std::uint64_t seed) : seed_(seed) {}

  struct Step {
    // Exactly what runs when the step completes, in it and in the sub-jobs it waits
    // for (a detached sub-job's runs are its own).
    std::multiset<std::string> runs;
    bool completes = false;
    // A graph's step (a task of the list, by its index) that its trigger rule skips:
    // nothing of it runs.
    bool skipped = false;
    // An optional composite failed in it: what ran inside that composite before its
    // failure cancelled the rest depends on timing, though the step completes. Its runs
    // are what may run.
    bool inexact = false;
  };
  struct JobOutcome {
    JobState state = JobState::kCompleted;
    std::string result;
    json tasks = json::object();
    // Every step the interpreter reached: up to the failing one when the job fails.
    std::vector<Step> steps;
    // Outputs set inside an optional composite that failed: its failure may have
    // cancelled them first (a completed job may lack them, or hold a value they had
    // before, among `values`).
    std::set<std::string> maybe_tasks;
    // Every value each output took (a loop's tasks set theirs once per iteration): what a
    // job that did not complete may hold.
    std::map<std::string, std::set<std::string>> values;
    // Its cleanup (kOnFailure, kFinally): what runs in each when it runs, and whether it
    // does with the job's outcome here (the onFailure of a job that completes here is run
    // too, aside: a timeout may fail the job, which then runs it).
    std::array<Step, 2> cleanup;
    std::array<bool, 2> cleanup_runs{};
  };
  // chain_'s step of a job's cleanup: kCleanup + kOnFailure or kFinally.
  static constexpr int kCleanup = 1 << 20;
  static constexpr int kOnFailure = 0;
  static constexpr int kFinally = 1;

  // Runs `job`, which jobs()[0] then holds.
  const JobOutcome& RunTop(const Job& job) { return jobs_[RunJob(job)]; }

  const std::vector<JobOutcome>& jobs() const { return jobs_; }
  // A runnable task's name → the (job, step) pairs it runs in: its job's, then, while
  // that job is a sub-job its parent waits for, the parent's, up to the top or a
  // detached job.
  const std::vector<std::pair<int, int>>* Where(const std::string& name) const {
    auto it = where_.find(name);
    return it == where_.end() ? nullptr : &it->second;
  }
  // A sub-job task's name → its job in jobs().
  std::optional<int> SubJobOf(const std::string& name) const {
    auto it = subjob_of_.find(name);
    return it == subjob_of_.end() ? std::nullopt : std::optional<int>(it->second);
  }
  // A composite task's name → its result, when it completes.
  const std::string* ResultOfComposite(const std::string& name) const {
    auto it = results_.find(name);
    return it == results_.end() ? nullptr : &it->second;
  }
  // A task's name → the results its fallbacks (onFailure, then: continue) completed with
  // (one, but for a task that failed before its name was evaluated: then one per run).
  const std::set<std::string>* ResultsOfFallback(const std::string& name) const {
    auto it = fallbacks_.find(name);
    return it == fallbacks_.end() ? nullptr : &it->second;
  }
  bool Possible(const std::string& run) const { return possible_.contains(run); }

 private:
  int RunJob(const Job& job) {
    int index = static_cast<int>(jobs_.size());
    jobs_.emplace_back();
    json context = {{"inputs", job.inputs},
                    {"secrets", job.secrets},
                    {"tasks", json::object()},
                    {"job", {{"name", job.name}}}};
    JobState state = JobState::kCompleted;
    std::string result;
    if (IsGraph(job.mode, job.tasks)) {
      state = RunGraph(job, index, context);
    } else {
      state = RunSequence(job, index, context);
    }
    if (state == JobState::kCompleted && !job.output.empty()) {
      auto value = expr::EvaluateTemplateValue(job.output, context);
      if (value.ok()) {
        result = expr::ToText(*value);
      } else {
        state = JobState::kFailed;
      }
    }
    // Its cleanup: onFailure if it failed, then finally, whose failure fails a job that
    // completed.
    Cleanup(job, index, kOnFailure, state, context, state == JobState::kFailed);
    if (!Cleanup(job, index, kFinally, state, context, true) && state == JobState::kCompleted) {
      state = JobState::kFailed;
      result.clear();
    }
    JobOutcome& out = jobs_[index];
    out.state = state;
    out.result = std::move(result);
    out.tasks = std::move(context["tasks"]);
    return index;
  }

  // A graph, read from the job format's words alone: every task whose needs have all
  // been decided is decided in turn (in the order of the list, again and again until
  // none is left); it runs when its rule holds over its needs' ends and is skipped when
  // the rule cannot hold any more. The job fails when a task of it failed.
  JobState RunGraph(const Job& job, int index, json& context) {
    jobs_[index].steps.resize(job.tasks.size());
    const bool failed = DecideGraph(
        job.tasks, job.mode, context, json::object(),
        [&](std::size_t i) {
          chain_.emplace_back(index, static_cast<int>(i));
          Task t = job.tasks[i];
          ApplyDefaults(job.defaults, t);
          bool ok = RunTask(std::move(t), job.defaults, context, json::object(), false);
          chain_.pop_back();
          jobs_[index].steps[i].completes = ok;
          return ok;
        },
        [&](std::size_t i) { jobs_[index].steps[i].skipped = true; });
    return failed ? JobState::kFailed : JobState::kCompleted;
  }

  // The graph of `tasks` (a job's, `mode` its; a parallel's, kDag), its edges' conditions
  // seeing `scope`: `run(i)` runs task i (true when it succeeded), `skip(i)` is told of
  // one its rule skips. True when a task failed.
  template <typename Run, typename Skip>
  bool DecideGraph(const std::vector<Task>& tasks, TaskOrder mode, const json& context,
                   const json& scope, Run run, Skip skip) {
    const std::size_t n = tasks.size();
    std::map<std::string, std::size_t> by_name;
    for (std::size_t i = 0; i < n; ++i) by_name.try_emplace(tasks[i].name, i);
    // Each task's needs: those named, or in a sequence the task before it.
    std::vector<std::vector<std::size_t>> needs(n);
    std::vector<std::vector<std::string>> when(n);  // each edge's condition ("": none)
    for (std::size_t i = 0; i < n; ++i) {
      for (const Need& need : tasks[i].needs) {
        std::size_t j = by_name.at(need.task);
        if (std::find(needs[i].begin(), needs[i].end(), j) == needs[i].end()) {
          needs[i].push_back(j);
          when[i].push_back(need.when);
        }
      }
      if (tasks[i].needs.empty() && mode == TaskOrder::kSequence && i > 0) {
        needs[i].push_back(i - 1);
        when[i].emplace_back();
      }
    }
    enum class End { kNone, kSucceeded, kFailed, kSkipped };
    std::vector<End> ends(n, End::kNone);
    bool any_failed = false;
    for (bool progress = true; progress;) {
      progress = false;
      for (std::size_t i = 0; i < n; ++i) {
        if (ends[i] != End::kNone) continue;
        bool decided = std::all_of(needs[i].begin(), needs[i].end(),
                                   [&](std::size_t j) { return ends[j] != End::kNone; });
        if (!decided) continue;
        // A need skipped by its rule is neither a success nor a failure; so is a
        // succeeded one whose edge's condition is false. (A condition that cannot be
        // evaluated fails the task.)
        int succeeded = 0, failed = 0;
        bool broken = false;
        for (std::size_t k = 0; k < needs[i].size(); ++k) {
          End end = ends[needs[i][k]];
          if (end == End::kSucceeded && !when[i][k].empty()) {
            auto taken = EvaluateCondition(when[i][k], expr::Vars(context, scope));
            if (!taken.ok()) broken = true;
            if (taken.ok() && !*taken) end = End::kSkipped;
          }
          succeeded += end == End::kSucceeded;
          failed += end == End::kFailed;
        }
        if (broken) {
          progress = true;
          ends[i] = End::kFailed;
          any_failed = true;
          continue;
        }
        const int all = static_cast<int>(needs[i].size());
        bool runs = true;
        switch (tasks[i].trigger_rule.value_or(TriggerRule::kAllSuccess)) {
          case TriggerRule::kAllSuccess:
            runs = succeeded == all;
            break;
          case TriggerRule::kAllDone:
            runs = true;
            break;
          case TriggerRule::kAllFailed:
            runs = failed == all;
            break;
          case TriggerRule::kOneSuccess:
            runs = all == 0 || succeeded > 0;
            break;
          case TriggerRule::kOneFailed:
            runs = all == 0 || failed > 0;
            break;
          case TriggerRule::kNoneFailed:
            runs = failed == 0;
            break;
          case TriggerRule::kNoneFailedMinOneSuccess:
            runs = all == 0 || (failed == 0 && succeeded > 0);
            break;
        }
        progress = true;
        if (!runs) {
          ends[i] = End::kSkipped;
          skip(i);
          continue;
        }
        bool ok = run(i);
        ends[i] = ok ? End::kSucceeded : End::kFailed;
        any_failed = any_failed || !ok;
      }
    }
    return any_failed;
  }

  JobState RunSequence(const Job& job, int index, json& context) {
    JobState state = JobState::kCompleted;
    for (std::size_t i = 0; i < job.tasks.size(); ++i) {
      jobs_[index].steps.emplace_back();
      chain_.emplace_back(index, static_cast<int>(i));
      Task t = job.tasks[i];
      ApplyDefaults(job.defaults, t);
      bool ok = RunTask(std::move(t), job.defaults, context, json::object(), false);
      chain_.pop_back();
      jobs_[index].steps.back().completes = ok;
      if (!ok) {
        state = JobState::kFailed;
        break;
      }
    }
    return state;
  }

  // True when the task completed or was skipped, or failed and is optional. `evaluated`:
  // its `if` and fields were evaluated already (an each's child).
  // `completed`: set to the task's result when it completed.
  bool RunTask(Task t, const std::optional<Defaults>& defaults, json& context, const json& scope,
               bool evaluated, std::optional<std::string>* completed = nullptr) {
    const json outputs_before = context["tasks"];
    std::optional<std::string> result;
    if (!evaluated) {
      const expr::Vars vars(context, scope);
      if (!t.if_expr.empty()) {
        auto runs_now = EvaluateCondition(t.if_expr, vars);
        if (runs_now.ok() && !*runs_now) return true;
        if (!runs_now.ok()) return Failed(t, defaults, context, scope, outputs_before, completed);
      }
      if (!EvaluateTask(t, vars).ok()) {
        return Failed(t, defaults, context, scope, outputs_before, completed);
      }
    }
    switch (KindOf(t)) {
      case TaskKind::kRunnable: {
        int limit = t.retry ? t.retry->limit : 0;
        for (int attempt = 0; attempt <= limit; ++attempt) {
          Record(t.name, attempt);
          const Outcome outcome = OutcomeOf(seed_, t.name, attempt);
          if (outcome == Outcome::kOk) {
            result = ResultOf(t.name, attempt);
            break;
          }
          // A retry with `on` is for the failures it names: a failure exits 1, or times out.
          if (t.retry && t.retry->on) {
            const RetryOn& on = *t.retry->on;
            const bool retried =
                outcome == Outcome::kFail
                    ? std::count(on.exit_codes.begin(), on.exit_codes.end(), 1) > 0
                    : std::count(on.errors.begin(), on.errors.end(), FailReason::kTimeout) > 0;
            if (!retried) break;
          }
        }
        break;
      }
      case TaskKind::kParallel: {
        bool ok = true;
        if (IsGraph(*t.parallel)) {
          // Its tasks by their needs and rules; a failure stops only what needs it.
          const std::vector<Task>& tasks = t.parallel->tasks;
          ok = !DecideGraph(
              tasks, TaskOrder::kDag, context, scope,
              [&](std::size_t i) {
                Task c = tasks[i];
                ApplyDefaults(defaults, c);
                return RunTask(std::move(c), defaults, context, scope, false);
              },
              [](std::size_t) {});
          if (ok) result = "";
          break;
        }
        for (const Task& child : t.parallel->tasks) {
          Task c = child;
          ApplyDefaults(defaults, c);
          // Every child, also after one failed: all may run.
          ok = RunTask(std::move(c), defaults, context, scope, false) && ok;
        }
        if (ok) result = "";
        break;
      }
      case TaskKind::kEach: {
        auto list = EvaluateEachList(t.each->list, expr::Vars(context, scope));
        if (!list.ok() || !list->is_array())
          return Failed(t, defaults, context, scope, outputs_before, completed);
        std::string var = t.each->var.empty() ? "item" : t.each->var;
        std::vector<std::pair<Task, json>> children;
        for (std::size_t i = 0; i < list->size(); ++i) {
          json child_scope = scope;
          child_scope[var] = {{"index", i}, {"value", (*list)[i]}};
          const expr::Vars vars(context, child_scope);
          Task c = *t.each->task;
          ApplyDefaults(defaults, c);
          if (!c.if_expr.empty()) {
            auto runs_now = EvaluateCondition(c.if_expr, vars);
            if (!runs_now.ok())
              return Failed(t, defaults, context, scope, outputs_before, completed);
            if (!*runs_now) continue;
            c.if_expr.clear();
          }
          if (!EvaluateTask(c, vars).ok())
            return Failed(t, defaults, context, scope, outputs_before, completed);
          children.emplace_back(std::move(c), std::move(child_scope));
        }
        bool ok = true;
        for (auto& [c, child_scope] : children) {
          ok = RunTask(std::move(c), defaults, context, child_scope, true) && ok;
        }
        if (ok) result = "";
        break;
      }
      case TaskKind::kSwitch: {
        // The case its value picks (else the default), one task after another; a failure
        // stops it there.
        auto value = EvaluateEachList(t.switch_->value, expr::Vars(context, scope));
        if (!value.ok() || !IsUtf8(*value))
          return Failed(t, defaults, context, scope, outputs_before, completed);
        const std::string text = expr::ToText(*value);
        bool ok = true;
        for (const Task& child : SwitchBranch(*t.switch_, text)) {
          Task c = child;
          ApplyDefaults(defaults, c);
          if (!RunTask(std::move(c), defaults, context, scope, false)) {
            ok = false;
            break;
          }
        }
        if (ok) result = text;
        break;
      }
      case TaskKind::kLoop: {
        // Its tasks again and again: after each iteration its condition (until: stop once
        // true; while: stop once false), and never more than max iterations. Its result:
        // per iteration, what its tasks that completed gave, by var.
        json iterations = json::array();
        bool ok = true;
        for (int it = 0; ok; ++it) {
          iterations.push_back(json::object());
          for (const Task& child : t.loop->tasks) {
            json child_scope = scope;
            child_scope["loop"] = {{"iteration", it}, {"iterations", iterations}};
            Task c = child;
            ApplyDefaults(defaults, c);
            std::optional<std::string> got;
            if (!RunTask(std::move(c), defaults, context, child_scope, false, &got)) {
              ok = false;
              break;
            }
            if (got && !child.var.empty())
              iterations[static_cast<std::size_t>(it)][child.var] = *got;
          }
          if (!ok || it + 1 >= t.loop->max) break;
          const std::string& cond =
              t.loop->until_expr.empty() ? t.loop->while_expr : t.loop->until_expr;
          if (cond.empty()) continue;
          json cond_scope = scope;
          cond_scope["loop"] = {{"iteration", it}, {"iterations", iterations}};
          auto holds = EvaluateCondition(cond, expr::Vars(context, cond_scope));
          if (!holds.ok()) {
            ok = false;
          } else if (t.loop->until_expr.empty() ? !*holds : *holds) {
            break;
          }
        }
        if (ok) result = iterations.dump();
        break;
      }
      case TaskKind::kHandler:  // a row flow makes, never in a definition
        break;
      case TaskKind::kWait:  // its time passes: it completes, with no result; a signal
                             // wait fails at its timeout (no signal is sent here)
        if (t.wait->signal.empty()) result = "";
        break;
      case TaskKind::kSubJob: {
        Job child;
        child.name = t.subjob->name;
        child.mode = t.subjob->mode;
        child.tasks = t.subjob->tasks;
        child.inputs = t.subjob->inputs;
        child.secrets = t.subjob->secrets;
        child.output = t.subjob->output;
        child.on_failure = t.subjob->on_failure;
        child.finally = t.subjob->finally;
        // A detached job runs on its own: its runs are no step's of its parent.
        std::vector<std::pair<int, int>> outer;
        if (t.subjob->detached) outer.swap(chain_);
        int sub = RunJob(child);
        if (t.subjob->detached) outer.swap(chain_);
        subjob_of_[t.name] = sub;
        if (t.subjob->detached) {
          result = "";
        } else if (jobs_[sub].state == JobState::kCompleted) {
          result = jobs_[sub].result;
        }
        break;
      }
    }
    if (!result) return Failed(t, defaults, context, scope, outputs_before, completed);
    return Completed(t, *result, context, completed);
  }

  bool Completed(const Task& t, const std::string& result, json& context,
                 std::optional<std::string>* completed) {
    if (KindOf(t) != TaskKind::kRunnable) results_[t.name] = result;
    if (!t.var.empty()) {
      context["tasks"][t.var] = result;
      if (!chain_.empty()) jobs_[chain_.back().first].values[t.var].insert(result);
    }
    if (completed != nullptr) *completed = result;
    return true;
  }

  // Task `t` finally failed: its onFailure runs in its place (its tasks one after another;
  // then: continue completes the task with the last one's result, then: fail fails it; a
  // failure among them fails it), then an optional task's failure lets what it is in go on.
  bool Failed(const Task& t, const std::optional<Defaults>& defaults, json& context,
              const json& scope, const json& outputs_before,
              std::optional<std::string>* completed) {
    std::optional<std::string> recovered;
    bool fallback_failed = false;
    if (t.on_failure) {
      json failure_scope = scope;
      failure_scope["failure"] = {{"task", t.name}, {"error", ""}};
      bool ok = true;
      std::string last;
      for (const Task& child : t.on_failure->tasks) {
        Task c = child;
        ApplyDefaults(defaults, c);
        std::optional<std::string> got;
        if (!RunTask(std::move(c), defaults, context, failure_scope, false, &got)) {
          ok = false;
          break;
        }
        if (got) last = *got;
      }
      if (ok && t.on_failure->then == Then::kContinue) recovered = last;
      fallback_failed = !ok;
    }
    // A composite that failed (or a fallback whose task failed: maybe a composite) and
    // what it is in goes on: what ran inside it before its failure cancelled the rest
    // depends on timing. Its runs are what may run.
    if ((KindOf(t) != TaskKind::kRunnable || fallback_failed) && (recovered || t.optional)) {
      for (std::size_t i = OutsideAside(); i < chain_.size(); ++i) {
        StepAt(chain_[i].first, chain_[i].second).inexact = true;
      }
      for (auto it = context["tasks"].begin(); it != context["tasks"].end(); ++it) {
        // Set or changed inside it (a loop's output changes per iteration).
        auto was = outputs_before.find(it.key());
        // (Not in a job whose cleanup runs aside: its context is put back after.)
        const bool put_back =
            aside_from_ >= 0 && !chain_.empty() &&
            chain_[static_cast<std::size_t>(aside_from_)].first == chain_.back().first;
        if ((was == outputs_before.end() || *was != it.value()) && !chain_.empty() && !put_back) {
          jobs_[chain_.back().first].maybe_tasks.insert(it.key());
        }
      }
    }
    if (recovered) {
      fallbacks_[t.name].insert(*recovered);
      // Its result stands for the task's, as a fallback's row (not a composite's result).
      if (!t.var.empty()) {
        context["tasks"][t.var] = *recovered;
        if (!chain_.empty()) jobs_[chain_.back().first].values[t.var].insert(*recovered);
      }
      if (completed != nullptr) *completed = *recovered;
      return true;
    }
    return t.optional;  // an optional task's failure: what it is in goes on
  }

  // The first of chain_'s steps a run counts in: past the jobs around a cleanup run aside.
  std::size_t OutsideAside() const {
    return aside_from_ < 0 ? 0 : static_cast<std::size_t>(aside_from_);
  }

  Step& StepAt(int job, int step) {
    JobOutcome& j = jobs_[static_cast<std::size_t>(job)];
    return step >= kCleanup ? j.cleanup[static_cast<std::size_t>(step - kCleanup)]
                            : j.steps[static_cast<std::size_t>(step)];
  }

  // A job's cleanup `which`, its tasks one after another, seeing the outcome; `really`:
  // the outcome calls for it (else it runs aside, on a copy of the context). Whether it
  // completed.
  bool Cleanup(const Job& job, int index, int which, JobState state, json& context, bool really) {
    const std::vector<Task>& tasks = which == kOnFailure ? job.on_failure : job.finally;
    if (tasks.empty()) return true;
    json saved;
    const int aside_was = aside_from_;
    if (!really) {
      saved = context;
      if (aside_from_ < 0) aside_from_ = static_cast<int>(chain_.size());
    }
    chain_.emplace_back(index, kCleanup + which);
    const json scope = {{"job", {{"name", job.name}, {"state", ToString(state)}, {"error", ""}}}};
    bool ok = true;
    for (const Task& child : tasks) {
      Task c = child;
      ApplyDefaults(job.defaults, c);
      if (!RunTask(std::move(c), job.defaults, context, scope, false)) {
        ok = false;
        break;
      }
    }
    chain_.pop_back();
    if (!really) context = std::move(saved);
    aside_from_ = aside_was;
    JobOutcome& out = jobs_[static_cast<std::size_t>(index)];
    out.cleanup[static_cast<std::size_t>(which)].completes = ok;
    out.cleanup_runs[static_cast<std::size_t>(which)] = really;
    return ok;
  }

  void Record(const std::string& name, int attempt) {
    std::string run = RunKey(name, attempt);
    // A run aside (in a cleanup the outcome here does not call for) is possible, and the
    // aside cleanup's and its sub-jobs', not a step's of the jobs around.
    for (std::size_t i = OutsideAside(); i < chain_.size(); ++i) {
      StepAt(chain_[i].first, chain_[i].second).runs.insert(run);
    }
    possible_.insert(run);
    std::vector<std::pair<int, int>>& where = where_[name];
    if (where.empty()) where.assign(chain_.rbegin(), chain_.rend());
  }

  std::uint64_t seed_;
  std::vector<JobOutcome> jobs_;
  std::vector<std::pair<int, int>> chain_;  // the (job, step) pairs now running, outermost first
  std::map<std::string, std::vector<std::pair<int, int>>> where_;
  std::map<std::string, int> subjob_of_;
  std::map<std::string, std::string> results_;
  std::map<std::string, std::set<std::string>> fallbacks_;
  std::set<std::string> possible_;
  int aside_from_ = -1;  // chain_'s index of the cleanup run aside we are in (Cleanup)
};

// ----------------------------------------------------------------------- the shell

struct Store {
  // As the shell keeps them: a job's row without its definition, and the definition
  // shared by every view of the job (View::definitions).
  std::map<std::string, JobRecord> jobs;
  std::map<std::string, std::shared_ptr<const Job>> definitions;
  // And its context, shared the same way (View::contexts).
  std::map<std::string, std::shared_ptr<const nlohmann::json>> contexts;
  std::map<std::string, TaskRecord> tasks;
  std::map<std::string, std::vector<std::string>> children;  // parent task → rows
  std::map<std::string, std::vector<std::string>> of_job;    // job → rows
};

bool Terminal(TaskState s) {
  return s == TaskState::kCompleted || s == TaskState::kFailed || s == TaskState::kCancelled ||
         s == TaskState::kSkipped;
}
bool ActiveJob(JobState s) {
  return s == JobState::kPending || s == JobState::kScheduled || s == JobState::kRunning ||
         s == JobState::kPaused;
}

// A message a worker takes: a task to run (a Start), or a worker's report.
struct Delivery {
  std::variant<TaskRecord, Event> what;
  int incarnation = 0;  // reports of a worker that died since are lost with it
  std::string node;
};

// A branch of a visitor no effect may reach (a new effect fails to compile there).
template <typename>
[[maybe_unused]] constexpr bool kNotHandled = false;

bool IsBrokerEvent(const Event& e) {
  return std::holds_alternative<Started>(e) || std::holds_alternative<Completed>(e) ||
         std::holds_alternative<Failed>(e) || std::holds_alternative<TaskTimedOut>(e) ||
         std::holds_alternative<WorkerCancelled>(e) || std::holds_alternative<Progress>(e) ||
         std::holds_alternative<Cancel>(e) || std::holds_alternative<Restart>(e) ||
         std::holds_alternative<Pause>(e) || std::holds_alternative<Resume>(e) ||
         std::holds_alternative<Rerun>(e);
}

class Sim {
 public:
  Sim(Choices& c, std::uint64_t outcome_seed) : c_(c), seed_(outcome_seed) {
    policy_.durable_broker = c_.Percent(30);
    policy_.max_redeliveries = 3;
    // Not drawn from the choices (the same input makes the same run as before).
    policy_.live_events = outcome_seed % 4 != 0;
    // One seed in five crashes the whole engine (a standalone one: its workers and its
    // in-memory broker die with it) one to four times, 12 deliveries apart (the next
    // crash comes during the recovery from the last). Not drawn from the choices either.
    if (!policy_.durable_broker && outcome_seed % 5 == 2) {
      engine_crash_at_ = static_cast<int>(outcome_seed / 5 % 40) + 1;
      engine_crashes_ = static_cast<int>(outcome_seed / 200 % 4) + 1;
    }
    // One seed in seven pauses the job, and resumes it 5 to 24 deliveries later (or once
    // nothing is left to deliver). Not drawn from the choices either.
    if (outcome_seed % 7 == 3) {
      pause_at_ = static_cast<int>(outcome_seed / 7 % 40) + 1;
      resume_at_ = pause_at_ + 5 + static_cast<int>(outcome_seed / 280 % 20);
    }
  }

  Result Run() {
    Job def = Generator(c_).MakeJob();
    // The job drawn, for reading a failing seed (BATON_SIM_SEED=n BATON_SIM_PRINT_JOB=1).
    if (std::getenv("BATON_SIM_PRINT_JOB") != nullptr) {
      std::fprintf(stderr, "%s\n", ToJson(def).dump(2).c_str());
    }
    Interpreter ref(seed_);
    ref.RunTop(def);

    JobRecord row = NewJobRecord(def, "", NextSeed(), Now());
    top_ = row.id;
    Step(Submit{row});
    // Disturbances: a cancel, a cancel then a restart, a node death. (A job timeout fires
    // from the fake clock at its deadline.)
    std::uint32_t d = c_.Below(100);
    enum { kNone, kCancel, kCancelRestart } disturbance = kNone;
    if (d < 8) {
      disturbance = kCancel;
    } else if (d < 16) {
      disturbance = kCancelRestart;
    }
    int at = static_cast<int>(c_.Below(40));
    bool death = c_.Percent(10);
    int death_at = static_cast<int>(c_.Below(40));
    bool restarted = false;

    for (int round = 0; round < 400 && failure_.empty(); ++round) {
      while (!queue_.empty() && failure_.empty()) {
        if (++steps_ > 20000) {
          Fail("more than 20,000 deliveries: the job does not end");
          break;
        }
        ++clock_;  // a delivery takes a millisecond
        FireDue();
        if (disturbance != kNone && steps_ == at) queue_.push_back({Event{Cancel{top_}}, 0, ""});
        if (disturbance == kCancelRestart && !restarted && steps_ == at + 15) {
          restarted = true;
          queue_.push_back({RestartEvent(), 0, ""});
        }
        if (death && steps_ == death_at) KillNode("w1");
        if (pause_at_ > 0 && steps_ == pause_at_) queue_.push_back({Event{Pause{top_}}, 0, ""});
        if (pause_at_ > 0 && steps_ == resume_at_) {
          queue_.push_back({Event{Resume{top_}}, 0, ""});
        }
        if (engine_crashes_ > 0 && steps_ == engine_crash_at_) {
          CrashEngine();
          if (queue_.empty()) continue;  // the crash lost every message, nothing restarted
        }
        Deliver();
      }
      if (!failure_.empty()) break;
      // Quiet: what Frontier finds still to do (lost starts, timers, fills).
      ReconcileAll();
      // A job paused (a pause point, a pause not yet resumed) waits: resumed now, as a
      // user resumes a top-level job (the top one, or a detached sub-job).
      if (queue_.empty()) {
        for (const auto& [id, j] : store_.jobs) {
          auto parent = store_.tasks.find(j.parent_id);
          const bool on_its_own = parent == store_.tasks.end() || Terminal(parent->second.state);
          if (j.state == JobState::kPaused && on_its_own) {
            queue_.push_back({Event{Resume{id}}, 0, ""});
          }
        }
        if (!queue_.empty()) continue;
      }
      if (disturbance == kCancelRestart && !restarted) {
        restarted = true;
        queue_.push_back({RestartEvent(), 0, ""});
      }
      if (!queue_.empty()) continue;
      // Nothing to deliver: time jumps to the next timer.
      std::optional<TimePoint> next;
      if (!timers_.empty()) next = timers_.begin()->first;
      for (const auto& [job, timer] : job_timers_) {
        if (!next || timer.first < *next) next = timer.first;
      }
      if (!next) break;
      if (*next > Now()) clock_ = (*next - Epoch()).count();
      FireDue();
      if (queue_.empty()) ReconcileAll();
    }
    if (failure_.empty()) CheckEnd(def, ref);
    Result r;
    r.ok = failure_.empty();
    r.decisions = decisions_;
    r.deliveries = steps_;
    r.rows = static_cast<int>(store_.tasks.size());
    r.timers = timers_fired_;
    r.timed_out = store_.jobs.at(top_).error.starts_with("job timed out");
    r.ending = store_.jobs.at(top_).state;
    r.restarted = !restarts_.empty();
    // Every job and row as it ended, for reading a failing seed (BATON_SIM_PRINT_ROWS=1);
    // the whole history with BATON_SIM_ALL_HISTORY=1.
    if (!r.ok && std::getenv("BATON_SIM_PRINT_ROWS") != nullptr) {
      for (const auto& [id, j] : store_.jobs) {
        std::fprintf(stderr, "job %s parent=%s %s%s\n", id.substr(20).c_str(),
                     j.parent_id.empty() ? "-" : j.parent_id.substr(20).c_str(),
                     std::string(ToString(j.state)).c_str(),
                     j.ending ? (" ending " + std::string(ToString(*j.ending))).c_str() : "");
      }
      for (const auto& [id, t] : store_.tasks) {
        std::fprintf(stderr, "%s %s parent=%s pos=%d idx=%d %s %s%s %s\n", id.substr(20).c_str(),
                     t.job_id.substr(20).c_str(),
                     t.parent_id.empty() ? "-" : t.parent_id.substr(20).c_str(), t.position,
                     t.each_index, t.task.name.c_str(), std::string(ToString(t.state)).c_str(),
                     t.task.handles != Handles::kNone ? " (handler)" : "", t.error.c_str());
      }
    }
    if (!r.ok) {
      r.failure = failure_ + "\nhistory (last 40):\n";
      std::size_t from = std::getenv("BATON_SIM_ALL_HISTORY") != nullptr ? 0
                         : history_.size() > 40                          ? history_.size() - 40
                                                                         : 0;
      for (std::size_t i = from; i < history_.size(); ++i) r.failure += "  " + history_[i] + "\n";
    }
    return r;
  }

 private:
  static TimePoint Epoch() { return TimePoint(std::chrono::milliseconds(1'700'000'000'000LL)); }
  TimePoint Now() const { return Epoch() + std::chrono::milliseconds(clock_); }
  std::string NextSeed() {
    return fmt::format("{:012x}{:020x}", 1'700'000'000'000LL + clock_, ++seeds_);
  }
  // What restarts the job after its cancel: Tork's restart, or (beyond it) a rerun of its
  // failed tasks, from its failed tasks, of all of them, or of all from one of its tasks
  // (one seed in five each; not drawn from the choices). A rerun is asked for once:
  // delivered again (a crash, a duplicate), it reruns the run it was asked for only.
  Event RestartEvent() const {
    const JobRecord& job = store_.jobs.at(top_);
    const std::optional<TimePoint> run = job.started_at;
    Rerun rerun{.job_id = top_, .once = true, .of_run = run};
    switch (seed_ % 5) {
      case 1:
        rerun.mode = RerunMode::kFailedOnly;
        return rerun;
      case 2:
        rerun.mode = RerunMode::kAll;
        return rerun;
      case 3:
        rerun.mode = RerunMode::kFromFailed;
        return rerun;
      case 4: {
        const std::vector<Task>& tasks = store_.definitions.at(top_)->tasks;
        rerun.mode = RerunMode::kAll;
        rerun.from = tasks[(seed_ / 5) % tasks.size()].name;
        return rerun;
      }
      default:
        return Restart{top_};
    }
  }
  // Decides every timer due by now, in the order of their times (a retry's backoff, a
  // job's deadline), each as the shell's deadlines component would.
  void FireDue() {
    for (;;) {
      std::optional<TimePoint> at;
      Event event = RetryDue{};
      auto retry = timers_.begin();
      if (retry != timers_.end() && retry->first <= Now()) {
        at = retry->first;
        event = retry->second;
      }
      auto job = job_timers_.end();
      for (auto it = job_timers_.begin(); it != job_timers_.end(); ++it) {
        if (it->second.first <= Now() && (!at || it->second.first < *at) &&
            (job == job_timers_.end() || it->second.first < job->second.first)) {
          job = it;
        }
      }
      if (job != job_timers_.end()) {
        event = job->second.second;
        job_timers_.erase(job);
      } else if (at) {
        timers_.erase(retry);
      } else {
        return;
      }
      history_.push_back(fmt::format("  (timer at +{} ms)", clock_));
      ++timers_fired_;
      Step(event);
      if (!failure_.empty()) return;
    }
  }
  void Fail(std::string what) {
    if (failure_.empty()) failure_ = std::move(what);
  }
  static std::string Name(const Event& e) {
    std::string kind(NameOf(e));
    return std::visit(
        [&](const auto& v) -> std::string {
          using E = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<E, Submit>) {
            return "Submit " + v.job.id.substr(20);
          } else if constexpr (std::is_same_v<E, Published>) {
            std::string text = kind;
            for (const std::string& id : v.task_ids) text += " " + id.substr(20);
            return text;
          } else if constexpr (requires { v.task_id; }) {
            return kind + " " + v.task_id.substr(20);
          } else {
            return kind + " " + v.job_id.substr(20);
          }
        },
        e);
  }

  // ---- views, as the scheduler's shell reads them: exactly what flow::ReadsOf says (a
  // rule that needs a row ReadsOf does not name finds it absent here too).
  View ViewFor(const Event& e) {
    const Reads reads = ReadsOf(e);
    View view;
    view.policy = policy_;
    view.id_seed = NextSeed();
    std::string task_id = reads.task ? reads.task_id : "";
    std::string job_id = reads.job_id;
    if (reads.all_tasks) {
      for (const std::string& id : store_.of_job[job_id]) view.tasks[id] = store_.tasks.at(id);
    }
    for (int depth = 0; depth < 100; ++depth) {
      // The task rows of a job: the event's task (or the one that started the job below
      // as a sub-job) and, when read, its ancestors. The first one names the job.
      for (bool first = true; !task_id.empty(); first = false) {
        auto t = store_.tasks.find(task_id);
        if (t == store_.tasks.end() && first) return view;
        if (t == store_.tasks.end()) break;
        const TaskRecord& row = t->second;
        if (first) job_id = row.job_id;
        if (reads.each_children && KindOf(row.task) == TaskKind::kEach) {
          AddNextCreated(row.id, view);
        }
        task_id = reads.ancestors ? row.parent_id : "";
        view.tasks[row.id] = row;
      }
      if (depth == 0) {
        for (const std::string& id : reads.more_tasks) {
          if (auto t = store_.tasks.find(id); t != store_.tasks.end()) view.tasks[id] = t->second;
        }
      }
      if (!reads.job) {
        if (reads.hooks) HookJob(job_id, view);
        break;
      }
      auto j = store_.jobs.find(job_id);
      if (j == store_.jobs.end()) break;
      const bool hooks = reads.hooks && !store_.definitions.at(job_id)->webhooks.empty();
      if (reads.job_whole || reads.hooks) view.definitions[job_id] = store_.definitions.at(job_id);
      if (reads.job_whole || hooks) view.contexts[job_id] = store_.contexts.at(job_id);
      const bool up =
          reads.ancestors || (reads.scheduled_parents && j->second.state == JobState::kScheduled);
      view.jobs[job_id] = j->second;
      if (j->second.parent_id.empty() || !up) break;
      task_id = j->second.parent_id;
    }
    return view;
  }
  // Reads::hooks without Reads::job: the definition, and with webhooks the state row and
  // context.
  void HookJob(const std::string& job_id, View& view) {
    auto j = store_.jobs.find(job_id);
    if (j == store_.jobs.end()) return;
    view.definitions[job_id] = store_.definitions.at(job_id);
    if (store_.definitions.at(job_id)->webhooks.empty()) return;
    view.contexts[job_id] = store_.contexts.at(job_id);
    view.jobs[job_id] = j->second;
  }
  void AddNextCreated(const std::string& each_id, View& view) {
    int running = 0;
    std::vector<const TaskRecord*> created;
    for (const std::string& id : store_.children[each_id]) {
      const TaskRecord& c = store_.tasks.at(id);
      if (c.state == TaskState::kCreated) {
        created.push_back(&c);
      } else if (!Terminal(c.state)) {
        ++running;
      }
    }
    // As the shell gives it: counted only for an each with a concurrency (flow.h).
    const TaskRecord& each = store_.tasks.at(each_id);
    bool limited = each.task.each && each.task.each->concurrency > 0;
    view.running_children[each_id] = limited ? running : 0;
    if (created.empty()) return;
    // As the shell reads them (flow.h): the lowest indexes, as many as may start.
    std::size_t n = std::min<std::size_t>(
        created.size(),
        static_cast<std::size_t>(NextCreatedWanted(store_.tasks.at(each_id), running)));
    std::partial_sort(
        created.begin(), created.begin() + static_cast<std::ptrdiff_t>(n), created.end(),
        [](const TaskRecord* a, const TaskRecord* b) { return a->each_index < b->each_index; });
    std::vector<TaskRecord>& next = view.next_created[each_id];
    next.reserve(n);
    for (std::size_t i = 0; i < n; ++i) next.push_back(*created[i]);
  }

  // ---- one event: decide, with its follow-ups, in one "transaction"
  void Step(const Event& first, bool crash_before = false, bool lose_after = false) {
    std::vector<Effect> after;
    std::vector<Event> pending{first};
    std::vector<std::pair<std::string, std::vector<Effect>>> decided;
    // Decided in order, each against the rows as the ones before left them. A crash
    // before the commit loses all of it: nothing is applied.
    Store before = crash_before ? store_ : Store{};
    std::size_t ends = ends_.size();
    std::size_t restarts = restarts_.size();
    std::map<std::string, int> run_of = crash_before ? run_of_ : std::map<std::string, int>{};
    for (std::size_t i = 0; i < pending.size() && i < 10000; ++i) {
      Event e = pending[i];
      std::vector<Effect> effects = Decide(e, ViewFor(e), Now());
      ++decisions_;
      history_.push_back(Name(e));
      Apply(std::move(effects), after, pending, e);
    }
    if (crash_before) {
      store_ = std::move(before);
      ends_.resize(ends);
      restarts_.resize(restarts);
      run_of_ = std::move(run_of);
      history_.push_back("  (crashed before commit)");
      return;
    }
    if (lose_after) {
      for (const Effect& e : after) {
        if (const auto* drop = std::get_if<Drop>(&e)) drop_lost_.insert(drop->task_id);
        if (const auto* w = std::get_if<Withdraw>(&e)) withdraw_lost_.insert(w->task_id);
      }
      history_.push_back("  (crashed after commit: after-commit effects lost)");
      return;
    }
    RunAfter(after);
  }

  // What a decision's rows must tell (types.h): every row written one Changed (with
  // Policy::live_events), every new row or state or progress change of a job whose
  // definition calls webhooks on it one Notify, and nothing else: keys of those wanted
  // and of those given, compared once the decision is applied.
  struct Told {
    std::multiset<std::string> changed_wanted, changed_given, notify_wanted, notify_given;
    std::vector<Notify> notify;
  };
  static std::string ChangedKey(const Changed& c) {
    return fmt::format("{} job={} task={} parent={} {} node={} progress={} position={} count={}",
                       c.of == Changed::Row::kJob ? "job" : "task", c.job_id.substr(20),
                       c.task_id.empty() ? "" : c.task_id.substr(20),
                       c.parent_id.empty() ? "" : c.parent_id.substr(20), c.state, c.node_id,
                       c.progress, c.position, c.task_count);
  }
  static std::string NotifyKey(std::string_view event, const std::string& job_id,
                               const std::string& task_id) {
    return fmt::format("{} job={} task={}", event, job_id.substr(20),
                       task_id.empty() ? "" : task_id.substr(20));
  }
  void WantJob(Told& told, const JobRecord& row, const JobState* was) {
    if (policy_.live_events) {
      told.changed_wanted.insert(ChangedKey({.of = Changed::Row::kJob,
                                             .job_id = row.id,
                                             .state = std::string(ToString(row.state)),
                                             .progress = row.progress,
                                             .position = row.position,
                                             .task_count = row.task_count}));
    }
    const JobRecord& stored = store_.jobs.at(row.id);
    std::string_view event;
    if (was == nullptr || *was != row.state) {
      event = kEventJobStateChange;
    } else if (stored.progress != row.progress) {
      event = kEventJobProgress;
    }
    if (!event.empty() && CallsWebhooks(*store_.definitions.at(row.id), event)) {
      told.notify_wanted.insert(NotifyKey(event, row.id, ""));
    }
  }
  void WantTask(Told& told, const TaskRecord& row, const TaskRecord* was) {
    if (policy_.live_events) {
      told.changed_wanted.insert(ChangedKey({.of = Changed::Row::kTask,
                                             .job_id = row.job_id,
                                             .task_id = row.id,
                                             .parent_id = row.parent_id,
                                             .state = std::string(ToString(row.state)),
                                             .node_id = row.node_id,
                                             .progress = row.progress,
                                             .position = row.position}));
    }
    std::string_view event;
    if (was == nullptr || was->state != row.state) {
      event = kEventTaskStateChange;
    } else if (was->progress != row.progress) {
      event = kEventTaskProgress;
    }
    if (!event.empty() && CallsWebhooks(*store_.definitions.at(row.job_id), event)) {
      told.notify_wanted.insert(NotifyKey(event, row.job_id, row.id));
    }
  }
  void Given(Told& told, Effect&& e) {
    if (auto* c = std::get_if<Changed>(&e)) {
      if (!policy_.live_events) Fail("a Changed without Policy::live_events");
      told.changed_given.insert(ChangedKey(*c));
    } else if (auto* n = std::get_if<Notify>(&e)) {
      told.notify_given.insert(NotifyKey(n->event, n->job.id, n->task ? n->task->id : ""));
      told.notify.push_back(std::move(*n));
    }
  }
  // Once the decision is applied: what was told is what its rows call for, each Notify
  // with its job and task as they are now stored.
  void CheckTold(const Told& told, const Event& cause) {
    auto diff = [&](const std::multiset<std::string>& wanted,
                    const std::multiset<std::string>& given, const char* what) {
      if (wanted == given) return;
      std::string text = fmt::format("{}: {} wanted, {} given:", Name(cause), what, what);
      for (const std::string& k : wanted) {
        if (!given.contains(k)) text += "\n    missing " + k;
      }
      for (const std::string& k : given) {
        if (!wanted.contains(k)) text += "\n    not wanted " + k;
      }
      if (wanted.size() != given.size()) text += "\n    (a duplicate)";
      Fail(text);
    };
    diff(told.changed_wanted, told.changed_given, "Changed");
    diff(told.notify_wanted, told.notify_given, "Notify");
    for (const Notify& n : told.notify) {
      const std::string& id = n.job.id;
      if (!store_.jobs.contains(id)) return Fail("a Notify about a job not stored");
      if (!(n.job == store_.jobs.at(id))) return Fail("a Notify's job row is not as stored");
      if (n.definition == nullptr || !(*n.definition == *store_.definitions.at(id))) {
        return Fail("a Notify's definition is not its job's");
      }
      if (n.context == nullptr || !(*n.context == *store_.contexts.at(id))) {
        return Fail("a Notify's context is not its job's as stored");
      }
      if (n.task && !(*n.task == store_.tasks.at(n.task->id))) {
        return Fail("a Notify's task row is not as stored");
      }
    }
  }

  void Apply(std::vector<Effect>&& effects, std::vector<Effect>& after, std::vector<Event>& pending,
             const Event& cause) {
    bool in_scope = true;
    Told told;
    for (Effect& effect : effects) {
      bool scope = IsRowEffect(effect) || IsNotice(effect);
      if (scope && !in_scope) Fail("a row effect after an after-commit one: " + Name(cause));
      if (!scope) in_scope = false;
      std::visit(
          [&](auto& e) {
            using E = std::decay_t<decltype(e)>;
            if constexpr (std::is_same_v<E, CreateJob>) {
              if (store_.jobs.contains(e.row.id)) Fail("job created twice");
              if (e.row.id == top_) NoteTop(JobState::kPending, e.row);
              store_.definitions[e.row.id] = std::make_shared<const Job>(std::move(e.row.job));
              store_.contexts[e.row.id] =
                  std::make_shared<const nlohmann::json>(std::move(e.row.context));
              e.row.job = Job{};
              e.row.context = nlohmann::json::object();
              store_.jobs[e.row.id] = e.row;
              WantJob(told, e.row, nullptr);
            } else if constexpr (std::is_same_v<E, UpdateJob>) {
              auto it = store_.jobs.find(e.row.id);
              if (it == store_.jobs.end()) return Fail("update of a job not stored");
              if (e.state_changed != (it->second.state != e.row.state) ||
                  e.progress_changed != (it->second.progress != e.row.progress)) {
                Fail("a job update's state_changed or progress_changed is wrong");
              }
              WantJob(told, e.row, &it->second.state);
              // A state-only update carries no context, or (Frontier's) the stored one.
              if (e.context) {
                store_.contexts[e.row.id] =
                    std::make_shared<const nlohmann::json>(std::move(e.row.context));
              } else if (!e.row.context.empty() &&
                         !(e.row.context == *store_.contexts.at(e.row.id))) {
                Fail("a state-only job update changed the context");
              }
              e.row.context = nlohmann::json::object();
              // A decision's row is as its view gave it: without the definition, or
              // (Frontier's) with the stored one.
              if (!(e.row.job == Job{}) && !(e.row.job == *store_.definitions.at(e.row.id))) {
                Fail("a job update changed the definition");
              }
              e.row.job = Job{};
              if (e.row.id == top_) NoteTop(it->second.state, e.row);
              it->second = std::move(e.row);
            } else if constexpr (std::is_same_v<E, CreateTask>) {
              if (store_.tasks.contains(e.row.id)) return Fail("task created twice");
              store_.of_job[e.row.job_id].push_back(e.row.id);
              if (!e.row.parent_id.empty()) store_.children[e.row.parent_id].push_back(e.row.id);
              WantTask(told, e.row, nullptr);
              std::string id = e.row.id;
              store_.tasks[id] = std::move(e.row);
            } else if constexpr (std::is_same_v<E, UpdateTask>) {
              auto it = store_.tasks.find(e.row.id);
              if (it == store_.tasks.end()) return Fail("update of a task not stored");
              // flow writes a stored row's state columns only (what a shell may rely on).
              const TaskRecord& was = it->second;
              if (!(was.task == e.row.task) || !(was.scope == e.row.scope) ||
                  was.parent_id != e.row.parent_id || was.job_id != e.row.job_id ||
                  was.position != e.row.position || was.created_at != e.row.created_at) {
                Fail("a task update changed more than the row's state: " + was.task.name);
              }
              if (e.state_changed != (was.state != e.row.state) ||
                  e.progress_changed != (was.progress != e.row.progress)) {
                Fail("a task update's state_changed or progress_changed is wrong");
              }
              WantTask(told, e.row, &was);
              it->second = std::move(e.row);
            } else if constexpr (std::is_same_v<E, CancelActive>) {
              ApplyCancel(e, told, after, pending);
            } else if constexpr (std::is_same_v<E, Changed> || std::is_same_v<E, Notify>) {
              Given(told, std::move(effect));
            } else if constexpr (std::is_same_v<E, FollowUp>) {
              pending.push_back(e.event);
            } else if constexpr (std::is_same_v<E, Start>) {
              // Checked against the rows as committed: only a queued leaf row starts.
              auto it = store_.tasks.find(e.row.id);
              if (it == store_.tasks.end()) return Fail("start of a row not stored");
              if (KindOf(it->second.task) != TaskKind::kRunnable) {
                Fail(fmt::format("a {} row ({}) was started through the runnable executor",
                                 ToString(KindOf(it->second.task)), it->second.task.name));
              }
              if (it->second.state != TaskState::kPending &&
                  it->second.state != TaskState::kScheduled) {
                Fail(fmt::format("a {} row was started", ToString(it->second.state)));
              }
              if (PausedAbove(it->second.job_id)) {
                Fail(fmt::format("a row of a paused job was started: {}", it->second.task.name));
              }
              after.push_back(std::move(e));
            } else if constexpr (std::is_same_v<E, StartAt> || std::is_same_v<E, Kill> ||
                                 std::is_same_v<E, Drop> || std::is_same_v<E, Withdraw> ||
                                 std::is_same_v<E, ArmJobTimeout> ||
                                 std::is_same_v<E, DisarmJobTimeout> ||
                                 std::is_same_v<E, JobFinished> || std::is_same_v<E, Refused>) {
              after.push_back(std::move(e));
            } else {
              static_assert(kNotHandled<E>, "a new effect must be handled by the simulator");
            }
          },
          effect);
    }
    CheckTold(told, cause);
  }

  // The stored rows a CancelActive cancels, as a shell does, with their notices checked.
  void ApplyCancel(const CancelActive& e, Told& told, std::vector<Effect>& after,
                   std::vector<Event>& pending) {
    std::vector<CancelledRow> cancelled;
    for (const std::string& id : store_.of_job[e.job_id]) {
      TaskRecord& t = store_.tasks.at(id);
      if (Terminal(t.state) || (!e.under.empty() && !Below(t, e.under))) continue;
      cancelled.push_back({t.id, t.state, t.node_id, t.subjob_id, {}});
      t.state = TaskState::kCancelled;
      t.completed_at = e.at;
      if (e.hook) cancelled.back().row = t;
      if (policy_.live_events) {
        told.changed_wanted.insert(ChangedKey({.of = Changed::Row::kTask,
                                               .job_id = e.job_id,
                                               .task_id = t.id,
                                               .state = "CANCELLED"}));
      }
      if (CallsWebhooks(*store_.definitions.at(e.job_id), kEventTaskStateChange)) {
        told.notify_wanted.insert(NotifyKey(kEventTaskStateChange, e.job_id, t.id));
      }
    }
    for (Effect& more : AfterCancel(e, cancelled, policy_)) {
      if (auto* f = std::get_if<FollowUp>(&more)) {
        pending.push_back(f->event);
      } else if (IsNotice(more)) {
        Given(told, std::move(more));
      } else {
        after.push_back(std::move(more));
      }
    }
  }

  // Whether job `job_id`, or a job above it (through sub-jobs still running), is PAUSED as
  // stored.
  bool PausedAbove(std::string job_id) const {
    for (int depth = 0; depth < 100 && !job_id.empty(); ++depth) {
      auto j = store_.jobs.find(job_id);
      if (j == store_.jobs.end()) return false;
      if (j->second.state == JobState::kPaused) return true;
      // Up only through a task that still runs the job (flow: Decider::Held).
      auto parent = store_.tasks.find(j->second.parent_id);
      if (parent == store_.tasks.end() || Terminal(parent->second.state)) return false;
      job_id = parent->second.job_id;
    }
    return false;
  }

  bool Below(const TaskRecord& row, const std::string& ancestor) {
    std::string p = row.parent_id;
    while (!p.empty()) {
      if (p == ancestor) return true;
      auto it = store_.tasks.find(p);
      if (it == store_.tasks.end()) return false;
      p = it->second.parent_id;
    }
    return false;
  }

  void RunAfter(const std::vector<Effect>& after) {
    // A durable broker confirms what it took: one Published per job (as the shell
    // decides an executor's report), delivered like any event (possibly after a worker
    // took a row, or twice).
    std::map<std::string, std::vector<std::string>> confirmed;
    for (const Effect& effect : after) {
      std::visit(
          [&](const auto& e) {
            using E = std::decay_t<decltype(e)>;
            if constexpr (std::is_same_v<E, Start>) {
              queue_.push_back({e.row, 0, ""});
              if (policy_.durable_broker) confirmed[e.row.job_id].push_back(e.row.id);
            } else if constexpr (std::is_same_v<E, StartAt>) {
              timers_.emplace(e.at, RetryDue{e.task_id});
            } else if constexpr (std::is_same_v<E, ArmJobTimeout>) {
              job_timers_[e.job_id] = {e.at, JobTimedOut{e.job_id, e.timeout}};
            } else if constexpr (std::is_same_v<E, DisarmJobTimeout>) {
              job_timers_.erase(e.job_id);
            } else if constexpr (std::is_same_v<E, Kill>) {
              KillTask(e.node_id, e.task_id);
            } else if constexpr (std::is_same_v<E, Drop>) {
              dropped_.insert(e.task_id);
            } else if constexpr (std::is_same_v<E, Withdraw>) {
              // A worker that took it lets it run on; none takes it after (also a message
              // of it delivered again, its worker dead).
              withdrawn_.insert(e.task_id);
            } else if constexpr (std::is_same_v<E, Refused>) {
              history_.push_back("  refused: " + e.reason);
            } else if constexpr (std::is_same_v<E, JobFinished>) {
              // The ending was noted from the job's row (NoteTop).
            } else if constexpr (std::is_same_v<E, CreateJob> || std::is_same_v<E, UpdateJob> ||
                                 std::is_same_v<E, CreateTask> || std::is_same_v<E, UpdateTask> ||
                                 std::is_same_v<E, CancelActive> || std::is_same_v<E, Changed> ||
                                 std::is_same_v<E, Notify> || std::is_same_v<E, FollowUp>) {
              Fail("an effect of the scope was kept for after the commit");
            } else {
              static_assert(kNotHandled<E>, "an after-commit effect the simulator does not run");
            }
          },
          effect);
    }
    for (auto& [job_id, ids] : confirmed)
      queue_.push_back({Event{Published{std::move(ids)}}, 0, ""});
  }

  // ---- workers
  void Deliver() {
    std::size_t i = c_.Below(static_cast<std::uint32_t>(queue_.size()));  // reordered
    Delivery d = queue_[i];
    bool duplicate = c_.Percent(8);
    if (!duplicate) queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    if (auto* row = std::get_if<TaskRecord>(&d.what)) {
      return Take(*row);
    }
    Event e = std::get<Event>(d.what);
    if (!d.node.empty() && incarnation_[d.node] != d.incarnation) return;  // died with it
    bool outcome = std::holds_alternative<Completed>(e) || std::holds_alternative<Failed>(e) ||
                   std::holds_alternative<TaskTimedOut>(e);
    if (outcome && took_cancelled_.contains(
                       fmt::format("{}/{}/{}", d.node, d.incarnation, ReadsOf(e).task_id))) {
      const TaskRecord& t = store_.tasks.at(ReadsOf(e).task_id);
      return Fail(fmt::format("a task cancelled while queued ran to its end: {}", t.task.name));
    }
    bool crash_before = c_.Percent(4);
    bool lose_after = !crash_before && c_.Percent(4);
    // Not acknowledged: delivered again. (A lease expiry is found again by the next
    // coordinator's lease check: the row is still RUNNING on the dead node.)
    bool again = IsBrokerEvent(e) || std::holds_alternative<LeaseExpired>(e) ||
                 std::holds_alternative<TaskOverdue>(e);
    if (crash_before && again && duplicate == false) queue_.push_back(d);
    if (auto* s = std::get_if<Started>(&e); s != nullptr && !crash_before) {
      auto before = store_.tasks.find(s->task_id);
      TaskState was = before == store_.tasks.end() ? TaskState::kPending : before->second.state;
      std::string was_node = before == store_.tasks.end() ? "" : before->second.node_id;
      Step(e, false, lose_after);
      auto now = store_.tasks.find(s->task_id);
      if (now != store_.tasks.end() && now->second.state == TaskState::kRunning &&
          now->second.node_id == s->node_id &&
          !(was == TaskState::kRunning && was_node == s->node_id)) {
        if (Terminal(was)) {
          Fail(fmt::format("a {} task ({}) was started", ToString(was), now->second.task.name));
        }
        if (++accepted_[s->task_id] > 1) Fail("an attempt ran twice: " + now->second.task.name);
        // A hung run: the coordinator's timeout check will find it RUNNING there.
        if (hung_.contains(s->task_id)) {
          queue_.push_back({Event{TaskOverdue{s->task_id, s->node_id, Duration::zero()}}, 0, ""});
        }
      }
    } else {
      Step(e, crash_before, lose_after);
      // Not yet past its timeout by the fake clock: the next check finds it again.
      if (auto* o = std::get_if<TaskOverdue>(&e); o != nullptr && !crash_before) {
        auto row = store_.tasks.find(o->task_id);
        if (row != store_.tasks.end() && row->second.state == TaskState::kRunning &&
            row->second.node_id == o->node_id) {
          queue_.push_back(d);
        }
      }
    }
    if (crash_before || (c_.Percent(2))) ReconcileAll();
  }

  void Take(const TaskRecord& row) {
    std::string node = c_.Percent(50) ? "w1" : "w2";
    int inc = incarnation_[node];
    std::string key = fmt::format("{}/{}", node, inc);
    if (dropped_.contains(row.id) || withdrawn_.contains(row.id)) return;
    if (!taken_[key].insert(row.id).second) return;  // this worker has it already
    // A row cancelled before any worker took it must never run: its drop was told (or
    // lost with the coordinator that decided the cancel, below).
    auto stored = store_.tasks.find(row.id);
    if (stored != store_.tasks.end() && stored->second.state == TaskState::kCancelled &&
        !ever_taken_.contains(row.id) && !drop_lost_.contains(row.id)) {
      took_cancelled_.insert(key + "/" + row.id);
    }
    // A row of a paused job waiting in a queue was withdrawn: no worker takes it (unless
    // a crash lost the withdrawal). (A running one delivered again is the duplicate it
    // always was.)
    if (stored != store_.tasks.end() && !withdraw_lost_.contains(row.id) &&
        (stored->second.state == TaskState::kPending ||
         stored->second.state == TaskState::kScheduled) &&
        PausedAbove(row.job_id)) {
      return Fail("a worker took a queued task of a paused job: " + row.task.name);
    }
    ever_taken_.insert(row.id);
    running_[node].insert(row.id);
    queue_.push_back({Event{Started{row.id, node, Now()}}, inc, node});
    if (c_.Percent(10)) queue_.push_back({Event{Progress{row.id, 50}}, inc, node});
    if (KindOf(row.task) != TaskKind::kRunnable) {
      // A worker "runs" a composite row as an empty script: it completes at once.
      queue_.push_back({Event{Completed{row.id, node, "", Now()}}, inc, node});
      return;
    }
    int attempt = AttemptOf(row.task);
    switch (OutcomeOf(seed_, row.task.name, attempt)) {
      case Outcome::kOk:
        queue_.push_back(
            {Event{Completed{row.id, node, ResultOf(row.task.name, attempt), Now()}}, inc, node});
        break;
      case Outcome::kFail:
        queue_.push_back(
            {Event{Failed{row.id, node, "exit status 1", Now(), FailReason::kExit, 1}}, inc, node});
        break;
      case Outcome::kTimeout:
        // A run with a timeout hangs on its worker half the time (by its name, no choice
        // drawn): nothing is reported, and the coordinator's check finds it once started.
        if (row.task.timeout && Mix(seed_, row.task.name) % 2 == 0) {
          hung_.insert(row.id);
          break;
        }
        queue_.push_back({Event{TaskTimedOut{row.id, node, std::chrono::seconds(1)}}, inc, node});
        break;
    }
  }

  void KillTask(const std::string& node, const std::string& task_id) {
    // Its outcome not reported yet: the worker stops it and says so.
    int inc = incarnation_[node];
    bool pending = false;
    for (auto it = queue_.begin(); it != queue_.end();) {
      const Event* e = std::get_if<Event>(&it->what);
      bool outcome = e != nullptr && it->node == node && it->incarnation == inc &&
                     ReadsOf(*e).task_id == task_id && !std::holds_alternative<Started>(*e) &&
                     !std::holds_alternative<Progress>(*e);
      if (outcome) {
        it = queue_.erase(it);
        pending = true;
      } else {
        ++it;
      }
    }
    if (pending) queue_.push_back({Event{WorkerCancelled{task_id, node, "cancelled"}}, inc, node});
  }

  void KillNode(const std::string& node) {
    history_.push_back("  (node " + node + " died)");
    ++incarnation_[node];
    // A durable broker keeps a message until a worker acknowledges it: what the dead one
    // took and never started is delivered again (a row marked SCHEDULED has no other
    // message, and reconciling leaves it to the broker).
    if (policy_.durable_broker) {
      for (const std::string& id : running_[node]) {
        auto t = store_.tasks.find(id);
        if (t != store_.tasks.end() &&
            (t->second.state == TaskState::kPending || t->second.state == TaskState::kScheduled)) {
          queue_.push_back({t->second, 0, ""});
        }
      }
    }
    // Its lease expires: every row it ran that is still RUNNING there.
    for (const auto& [id, t] : store_.tasks) {
      if (t.state == TaskState::kRunning && t.node_id == node) {
        queue_.push_back({Event{LeaseExpired{id, node}}, 0, ""});
      }
    }
  }

  // The standalone engine is killed and started again: its workers die with it, the
  // in-memory broker's messages are lost, and the restart reconciles with no node live
  // (the rows RUNNING on w1 or w2 were the engine's own: lost with it, run again without
  // spending a redelivery or a retry, so the job still ends as the interpreter says).
  void CrashEngine() {
    history_.push_back("  (the engine crashed, its workers with it)");
    for (const char* node : {"w1", "w2"}) ++incarnation_[node];
    withdrawn_.clear();
    std::erase_if(queue_,
                  [](const Delivery& d) { return std::holds_alternative<TaskRecord>(d.what); });
    if (--engine_crashes_ > 0) engine_crash_at_ += 12;
    const std::set<std::string> none;
    ReconcileAll(&none);
  }

  // A job's row with its definition, as Frontier reads it.
  JobRecord FullJob(const std::string& id) const {
    JobRecord job = store_.jobs.at(id);
    job.job = *store_.definitions.at(id);
    job.context = *store_.contexts.at(id);
    return job;
  }
  // `live`: as Frontier's live_nodes (null: every node is).
  void ReconcileAll(const std::set<std::string>* live = nullptr) {
    std::vector<std::string> active;
    for (const auto& [id, j] : store_.jobs) {
      if (ActiveJob(j.state)) active.push_back(id);
    }
    for (const std::string& id : active) {
      std::vector<TaskRecord> rows;
      for (const std::string& t : store_.of_job[id]) rows.push_back(store_.tasks.at(t));
      std::vector<Effect> effects =
          Frontier(FullJob(id), std::move(rows), Now(), policy_, live, NextSeed());
      history_.push_back("Frontier " + id.substr(20));
      ++decisions_;
      std::vector<Effect> after;
      std::vector<Event> pending;
      Apply(std::move(effects), after, pending, Event{StartJob{id}});
      for (std::size_t i = 0; i < pending.size() && i < 10000; ++i) {
        Event e = pending[i];
        std::vector<Effect> more = Decide(e, ViewFor(e), Now());
        ++decisions_;
        history_.push_back("  " + Name(e));
        Apply(std::move(more), after, pending, e);
      }
      RunAfter(after);
      // Applied, Frontier finds no row left to write.
      std::vector<TaskRecord> again;
      for (const std::string& t : store_.of_job[id]) again.push_back(store_.tasks.at(t));
      for (const Effect& e :
           Frontier(FullJob(id), std::move(again), Now(), policy_, live, NextSeed())) {
        if (IsRowEffect(e) && ActiveJob(store_.jobs.at(id).state)) {
          std::string what = std::visit(
              [](const auto& v) -> std::string {
                using V = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<V, UpdateTask> || std::is_same_v<V, CreateTask>) {
                  return fmt::format("task {} {} {} completions={} each_index={} size={}",
                                     v.row.id.substr(20), v.row.task.name, ToString(v.row.state),
                                     v.row.completions, v.row.each_index, v.row.each_size);
                } else if constexpr (std::is_same_v<V, UpdateJob> || std::is_same_v<V, CreateJob>) {
                  return fmt::format("job {} {}", v.row.id.substr(20), ToString(v.row.state));
                } else {
                  return "cancel";
                }
              },
              e);
          if (const auto* u = std::get_if<UpdateTask>(&e)) {
            const TaskRecord& st = store_.tasks.at(u->row.id);
            what += fmt::format(" (stored completions={} each_index={})", st.completions,
                                st.each_index);
            for (const std::string& c : store_.children[st.id]) {
              const TaskRecord& ch = store_.tasks.at(c);
              what += fmt::format("\n   child {} idx={} {} {}", c.substr(20), ch.each_index,
                                  ToString(ch.state), ToString(KindOf(ch.task)));
            }
          }
          Fail("Frontier applied twice writes rows again: " + what);
        }
      }
    }
  }

  // ---- the end
  // The top-level job's row is about to become `row`: note when it ends (each time: a
  // restart, maybe delivered twice, makes it active again) and when it restarts (the
  // rows it had then are of the runs before).
  void NoteTop(JobState was, const JobRecord& row) {
    if (ActiveJob(was) && !ActiveJob(row.state)) {
      ends_.push_back({Now(), row.state, row.error.starts_with("job timed out")});
    } else if (!ActiveJob(was) && ActiveJob(row.state)) {
      int run = static_cast<int>(restarts_.size());
      for (const auto& [id, t] : store_.tasks) run_of_.try_emplace(id, run);
      restarts_.push_back(row.position);
    }
  }

  // The reported outcome's time of a row a worker ran, if one was accepted.
  static std::optional<TimePoint> Reported(const TaskRecord& t) {
    if (KindOf(t.task) != TaskKind::kRunnable || t.node_id.empty()) return std::nullopt;
    if (t.state == TaskState::kCompleted) return t.completed_at;
    if (t.state == TaskState::kFailed &&
        (t.error == "exit status 1" || t.error.starts_with("task timed out"))) {
      return t.failed_at;
    }
    return std::nullopt;
  }

  struct Ending {
    TimePoint at{};
    JobState state = JobState::kCompleted;
    bool timed_out = false;
  };

  // What a run of job `ref_job` ran, by the interpreter's step (its `ran`), and the last
  // step a task started in (`last`, not lowered), once its ending (a completed or failed
  // job, not at its deadline, ends as the interpreter's) and each run are checked: a run
  // the interpreter has, in this job, not in a step before `from` (a restart's), not
  // accepted after the job ended. False (with the failure) when a check fails.
  bool RanBySteps(const std::string& what, const Interpreter& ref, int ref_job,
                  const std::vector<const TaskRecord*>& rows, int from, const Ending& end,
                  std::optional<TimePoint> ended_at, std::map<int, std::multiset<std::string>>& ran,
                  int& last) {
    const Interpreter::JobOutcome& expected = ref.jobs()[static_cast<std::size_t>(ref_job)];
    bool completed = end.state == JobState::kCompleted;
    bool failed = end.state == JobState::kFailed && !end.timed_out;
    auto fail = [&](std::string text) {
      Fail(std::move(text));
      return false;
    };
    if ((completed || failed) && end.state != expected.state) {
      return fail(fmt::format("{} is {}, the interpreter's {}", what, ToString(end.state),
                              ToString(expected.state)));
    }
    for (const TaskRecord* t : rows) {
      if (!t->started_at) continue;
      const auto* where = ref.Where(t->task.name);
      std::string run = RunKey(t->task.name, AttemptOf(t->task));
      if (where == nullptr || !ref.Possible(run)) {
        return fail(fmt::format("{}: ran what the interpreter never runs: {}", what, run));
      }
      auto at = std::find_if(where->begin(), where->end(),
                             [&](const auto& w) { return w.first == ref_job; });
      if (at == where->end()) return fail(fmt::format("{}: {} ran in another job", what, run));
      if (at->second < from) {
        return fail(fmt::format("{}: {} ran again in step {}, before the restart's {}", what, run,
                                at->second + 1, from + 1));
      }
      last = std::max(last, at->second);
      std::optional<TimePoint> reported = Reported(*t);
      if (!reported) continue;
      if (ended_at && *reported > *ended_at) {
        return fail(fmt::format("{}: {} was accepted {} ms after the job ended", what, run,
                                (*reported - *ended_at).count()));
      }
      ran[at->second].insert(std::move(run));
    }
    return true;
  }

  // One run of a job (`rows`: the runnable rows of it and of the sub-jobs it waits for)
  // against the interpreter's job `ref_job`, from its step `from` (0, or where a restart
  // took it up), ended as `end` says at `position` (the job row's, 1-based). A job that
  // completed or failed (not at its deadline) ends as the interpreter's; whatever ran,
  // however it ended, is every run of its first steps exactly as the interpreter's, up
  // to the step it was at, and of that step only runs the interpreter has there, once;
  // no outcome was accepted after the job ended.
  void CheckJob(const std::string& what, const Interpreter& ref, int ref_job,
                const std::vector<const TaskRecord*>& rows, int from, int position,
                const Ending& end, std::optional<TimePoint> ended_at) {
    const Interpreter::JobOutcome& expected = ref.jobs()[static_cast<std::size_t>(ref_job)];
    bool completed = end.state == JobState::kCompleted;
    std::map<int, std::multiset<std::string>> ran;
    int last = from - 1;  // the last step a task started in
    if (!RanBySteps(what, ref, ref_job, rows, from, end, ended_at, ran, last)) return;
    int steps = static_cast<int>(expected.steps.size());
    int exact = completed ? steps : std::max(last, std::min(position - 1, steps));
    auto diff = [&](int step) {
      std::string text;
      const std::multiset<std::string>& want = expected.steps[static_cast<std::size_t>(step)].runs;
      const std::multiset<std::string>& got = ran[step];
      std::set<std::string> keys(want.begin(), want.end());
      keys.insert(got.begin(), got.end());
      for (const std::string& k : keys) {
        if (got.count(k) != want.count(k))
          text += fmt::format(" {}(x{} vs x{})", k, got.count(k), want.count(k));
      }
      return text;
    };
    for (int step = from; step < exact; ++step) {
      if (step >= steps || !expected.steps[static_cast<std::size_t>(step)].completes) {
        return Fail(
            fmt::format("{} went past step {}, where the interpreter's fails", what, step + 1));
      }
      if (expected.steps[static_cast<std::size_t>(step)].inexact) {
        const std::multiset<std::string>& want =
            expected.steps[static_cast<std::size_t>(step)].runs;
        for (const std::string& k : ran[step]) {
          if (ran[step].count(k) > want.count(k)) {
            return Fail(fmt::format("{}: in step {}, {} ran {} times, the interpreter's {}", what,
                                    step + 1, k, ran[step].count(k), want.count(k)));
          }
        }
      } else if (std::string d = diff(step); !d.empty()) {
        return Fail(
            fmt::format("{}: the tasks that ran in step {} differ from the "
                        "interpreter's:{}",
                        what, step + 1, d));
      }
    }
    // The step it was at: some of the interpreter's runs there, each once.
    if (last >= exact && last < steps) {
      const std::multiset<std::string>& want = expected.steps[static_cast<std::size_t>(last)].runs;
      for (const std::string& k : ran[last]) {
        if (ran[last].count(k) > want.count(k)) {
          return Fail(fmt::format("{}: in step {}, {} ran {} times, the interpreter's {}", what,
                                  last + 1, k, ran[last].count(k), want.count(k)));
        }
      }
    }
  }

  // The same for a graph's run: its steps are its tasks (by index), not a sequence. A
  // graph that completed or failed (not at its deadline, not restarted) ran exactly the
  // interpreter's runs in every step that completes there, some of them in a step that
  // fails there (a failing parallel cancels the rest), and nothing of a step its rule
  // skips; however it ended, no step ran a run the interpreter's does not, or twice.
  void CheckGraphJob(const std::string& what, const Interpreter& ref, int ref_job,
                     const std::vector<const TaskRecord*>& rows, bool whole, const Ending& end,
                     std::optional<TimePoint> ended_at) {
    const Interpreter::JobOutcome& expected = ref.jobs()[static_cast<std::size_t>(ref_job)];
    bool completed = end.state == JobState::kCompleted;
    bool failed = end.state == JobState::kFailed && !end.timed_out;
    std::map<int, std::multiset<std::string>> ran;
    int last = -1;
    if (!RanBySteps(what, ref, ref_job, rows, 0, end, ended_at, ran, last)) return;
    for (std::size_t i = 0; i < expected.steps.size(); ++i) {
      const Interpreter::Step& step = expected.steps[i];
      const std::multiset<std::string>& got = ran[static_cast<int>(i)];
      if (step.skipped && !got.empty()) {
        return Fail(fmt::format("{}: step {} ran {}, which the interpreter's rule skips", what,
                                i + 1, *got.begin()));
      }
      for (const std::string& k : got) {
        if (got.count(k) > step.runs.count(k)) {
          return Fail(fmt::format("{}: in step {}, {} ran {} times, the interpreter's {}", what,
                                  i + 1, k, got.count(k), step.runs.count(k)));
        }
      }
      if (whole && (completed || failed) && step.completes && !step.inexact && got != step.runs) {
        return Fail(fmt::format("{}: step {} ran {} runs, the interpreter's {}", what, i + 1,
                                got.size(), step.runs.size()));
      }
    }
  }

  // A job's cleanup: every run in it is one the interpreter has in that cleanup, each at
  // most once per cleanup row; a job that ended as the interpreter's (`whole`: not timed
  // out, not restarted) ran exactly its runs in a cleanup that completed; a job that
  // completed or was cancelled ran its finally, one that failed its onFailure.
  void CheckCleanup(const std::string& what, const Interpreter& ref, int ref_job,
                    const JobRecord& j, const Job& definition,
                    const std::map<std::string, std::vector<const TaskRecord*>>& rows_by_handler,
                    bool whole) {
    const Interpreter::JobOutcome& expected = ref.jobs()[static_cast<std::size_t>(ref_job)];
    std::set<Handles> seen;
    for (const auto& [id, t] : store_.tasks) {
      if (t.job_id == j.id && t.parent_id.empty() && IsJobHandler(t.task))
        seen.insert(t.task.handles);
    }
    if (j.state == JobState::kCompleted && !definition.finally.empty() &&
        !seen.contains(Handles::kJobFinally)) {
      return Fail(fmt::format("{} completed without its finally", what));
    }
    // (A job that completed and whose finally failed fails without its onFailure.)
    if (j.state == JobState::kFailed && !definition.on_failure.empty() &&
        !seen.contains(Handles::kJobFailure) && !j.error.starts_with("finally: ")) {
      return Fail(fmt::format("{} failed without its onFailure", what));
    }
    // A cancelled job ran its finally, unless the cancel stopped its onFailure.
    if (j.state == JobState::kCancelled && !definition.finally.empty() &&
        !seen.contains(Handles::kJobFinally) && !seen.contains(Handles::kJobFailure)) {
      return Fail(fmt::format("{} was cancelled without its finally", what));
    }
    if (!definition.on_failure.empty() && seen.contains(Handles::kJobFailure) &&
        j.state == JobState::kCompleted && restarts_.empty()) {
      return Fail(fmt::format("{} ran its onFailure and completed", what));
    }
    for (const auto& [handler_id, rows] : rows_by_handler) {
      const TaskRecord& h = store_.tasks.at(handler_id);
      const int which =
          h.task.handles == Handles::kJobFailure ? Interpreter::kOnFailure : Interpreter::kFinally;
      const Interpreter::Step& want = expected.cleanup[static_cast<std::size_t>(which)];
      std::multiset<std::string> got;
      for (const TaskRecord* t : rows) {
        if (!t->started_at) continue;
        std::string run = RunKey(t->task.name, AttemptOf(t->task));
        const auto* where = ref.Where(t->task.name);
        if (where == nullptr || !ref.Possible(run)) {
          return Fail(fmt::format("{}: its {} ran what the interpreter never runs: {}", what,
                                  h.task.name, run));
        }
        const bool there = std::any_of(where->begin(), where->end(), [&](const auto& w) {
          return w.first == ref_job && w.second == Interpreter::kCleanup + which;
        });
        if (!there) return Fail(fmt::format("{}: {} ran in its {}", what, run, h.task.name));
        if (Reported(*t)) got.insert(std::move(run));
      }
      for (const std::string& k : got) {
        if (got.count(k) > want.runs.count(k)) {
          return Fail(fmt::format("{}: in its {}, {} ran {} times, the interpreter's {}", what,
                                  h.task.name, k, got.count(k), want.runs.count(k)));
        }
      }
      const bool as_here = j.state == expected.state && whole;
      if (as_here && h.state == TaskState::kCompleted &&
          expected.cleanup_runs[static_cast<std::size_t>(which)] && !want.inexact &&
          got != want.runs) {
        return Fail(fmt::format("{}: its {} ran {} runs, the interpreter's {}", what, h.task.name,
                                got.size(), want.runs.size()));
      }
    }
  }

  // The rows' results, every job's runs and outputs, against the interpreter's, however
  // each job ended (completed, failed, cancelled, timed out, restarted, after crashes).
  void CheckEnd(const Job& def, const Interpreter& ref) {
    for (const auto& [id, j] : store_.jobs) {
      if (ActiveJob(j.state)) {
        return Fail(fmt::format("job {} ({}) never ended: {}", id.substr(20),
                                store_.definitions.at(id)->name, ToString(j.state)));
      }
    }
    std::map<std::string, const TaskRecord*> parent_of;  // job → the task that started it
    for (const auto& [id, t] : store_.tasks) {
      if (!Terminal(t.state)) {
        return Fail(fmt::format("task {} ({}) of a finished job is {}", id.substr(20), t.task.name,
                                ToString(t.state)));
      }
      if (!t.subjob_id.empty()) parent_of[t.subjob_id] = &t;
      // A result as the interpreter's.
      if (t.state != TaskState::kCompleted) continue;
      if (KindOf(t.task) == TaskKind::kRunnable) {
        if (t.result != ResultOf(t.task.name, AttemptOf(t.task))) {
          return Fail(fmt::format("{} completed with '{}'", t.task.name, t.result));
        }
      } else if (t.task.handles == Handles::kTaskFailure) {
        const std::set<std::string>* want = ref.ResultsOfFallback(t.task.name);
        if (want == nullptr) {
          return Fail(
              fmt::format("{}'s fallback completed where the interpreter's does not", t.task.name));
        }
        if (!want->contains(t.result)) {
          return Fail(fmt::format("{}'s fallback completed with '{}', the interpreter's '{}'",
                                  t.task.name, t.result, *want->begin()));
        }
      } else if (KindOf(t.task) == TaskKind::kHandler) {
        // A job's cleanup: no result.
      } else if (const std::string* want = ref.ResultOfComposite(t.task.name); want == nullptr) {
        return Fail(fmt::format("{} ({}) completed where the interpreter's does not", t.task.name,
                                ToString(KindOf(t.task))));
      } else if (t.result != *want) {
        return Fail(fmt::format("{} completed with '{}', the interpreter's '{}'", t.task.name,
                                t.result, *want));
      }
    }
    // Every job: the interpreter's that its task started, and the runnable rows of it
    // and of the sub-jobs it waits for.
    // A row in a job's cleanup (under its onFailure or finally row) is that cleanup's,
    // not a step's (in the jobs above, it is the step that waits for that job).
    std::map<std::string, std::vector<const TaskRecord*>> rows_of;
    std::map<std::string, std::map<std::string, std::vector<const TaskRecord*>>> cleanup_of;
    for (const auto& [id, t] : store_.tasks) {
      if (KindOf(t.task) != TaskKind::kRunnable) continue;
      const TaskRecord* row = &t;
      bool in_cleanup = false;
      for (std::string job = t.job_id;;) {
        const TaskRecord* top = row;
        while (!top->parent_id.empty()) top = &store_.tasks.at(top->parent_id);
        if (IsJobHandler(top->task)) {
          cleanup_of[job][top->id].push_back(&t);
          in_cleanup = true;
        } else {
          rows_of[job].push_back(&t);
        }
        const std::string& parent = store_.jobs.at(job).parent_id;
        if (parent.empty()) break;
        row = &store_.tasks.at(parent);
        job = row->job_id;
        // A sub-job cancelled with its task runs its cleanup on its own: the job above
        // does not wait for it.
        if (in_cleanup && row->state == TaskState::kCancelled) break;
      }
    }
    for (const auto& [id, j] : store_.jobs) {
      int ref_job = 0;
      if (id != top_) {
        auto parent = parent_of.find(id);
        std::optional<int> sub;
        if (parent != parent_of.end()) sub = ref.SubJobOf(parent->second->task.name);
        if (!sub) return Fail("a sub-job the interpreter never starts: " + j.job.name);
        ref_job = *sub;
      }
      const std::vector<const TaskRecord*>& rows = rows_of[id];
      std::string what = id == top_ ? "the job" : "sub-job " + parent_of[id]->task.name;
      Ending end{TimePoint{}, j.state, j.error.starts_with("job timed out")};
      std::optional<TimePoint> ended_at;
      if (id == top_) {
        if (ends_.empty()) return Fail("the job's end was not seen");
        end = ends_.back();
        ended_at = end.at;
      }
      const Job& definition = *store_.definitions.at(id);
      if (IsGraph(definition.mode, definition.tasks)) {
        // A restart runs again what failed or was skipped, afresh: each run is checked
        // for what it may have run.
        bool whole = id != top_ || restarts_.empty();
        if (id == top_ && !whole && ends_.size() != restarts_.size() + 1) {
          return Fail("the job's restarts were not seen");
        }
        if (whole) {
          CheckGraphJob(what, ref, ref_job, rows, true, end, ended_at);
        } else {
          std::vector<std::vector<const TaskRecord*>> runs(restarts_.size() + 1);
          for (const TaskRecord* t : rows) {
            auto run = run_of_.find(t->id);
            runs[run == run_of_.end() ? restarts_.size() : static_cast<std::size_t>(run->second)]
                .push_back(t);
          }
          for (std::size_t i = 0; i < runs.size() && failure_.empty(); ++i) {
            CheckGraphJob(fmt::format("the job's run {} (of {})", i + 1, runs.size()), ref, 0,
                          runs[i], false, ends_[i], ends_[i].at);
          }
        }
      } else if (id == top_ && !restarts_.empty()) {
        // Each run (a restart, maybe delivered twice, starts another): cut short or failed
        // where it was, the last to its end; each restarted from the step it was at.
        if (ends_.size() != restarts_.size() + 1) return Fail("the job's restarts were not seen");
        std::vector<std::vector<const TaskRecord*>> runs(restarts_.size() + 1);
        for (const TaskRecord* t : rows) {
          auto run = run_of_.find(t->id);
          runs[run == run_of_.end() ? restarts_.size() : static_cast<std::size_t>(run->second)]
              .push_back(t);
        }
        for (std::size_t i = 0; i < runs.size() && failure_.empty(); ++i) {
          int from = i == 0 ? 0 : restarts_[i - 1] - 1;
          int position = i < restarts_.size() ? restarts_[i] : j.position;
          CheckJob(fmt::format("the job's run {} (of {})", i + 1, runs.size()), ref, 0, runs[i],
                   from, position, ends_[i], ends_[i].at);
        }
      } else {
        CheckJob(what, ref, ref_job, rows, 0, j.position, end, ended_at);
      }
      if (!failure_.empty()) return;
      const bool whole = (id != top_ || restarts_.empty()) && !end.timed_out;
      CheckCleanup(what, ref, ref_job, j, definition, cleanup_of[id], whole);
      if (!failure_.empty()) return;
      // Its outputs: what it has, as the interpreter's; all of them when it completed. One
      // that did not complete may hold any value its output took in the interpreter's run
      // (a loop's task sets its output once per iteration).
      const Interpreter::JobOutcome& expected = ref.jobs()[static_cast<std::size_t>(ref_job)];
      const json& outputs = store_.contexts.at(id)->value("tasks", json::object());
      // A job restarted keeps what an earlier run's cleanup set (which a run that
      // completes here does not run): outputs beyond the interpreter's.
      std::size_t earlier = 0;
      for (auto it = outputs.begin(); it != outputs.end(); ++it) {
        auto took = expected.values.find(it.key());
        const bool seen = took != expected.values.end() && it.value().is_string() &&
                          took->second.contains(it.value().get<std::string>());
        if (seen && (j.state != JobState::kCompleted || expected.maybe_tasks.contains(it.key()))) {
          continue;
        }
        if (seen && id == top_ && !restarts_.empty() && !expected.tasks.contains(it.key())) {
          ++earlier;
          continue;
        }
        if (!expected.tasks.contains(it.key()) || expected.tasks[it.key()] != it.value()) {
          return Fail(fmt::format("{}: output {} is {}, the interpreter's {}", what, it.key(),
                                  it.value().dump(),
                                  expected.tasks.value(it.key(), json()).dump()));
        }
      }
      if (j.state == JobState::kCompleted) {
        std::size_t may_lack = 0;
        for (const std::string& key : expected.maybe_tasks) may_lack += !outputs.contains(key);
        if (outputs.size() - earlier + may_lack != expected.tasks.size()) {
          return Fail(fmt::format("{}: outputs {}, the interpreter's {}", what, outputs.dump(),
                                  expected.tasks.dump()));
        }
        if (j.result != expected.result) {
          return Fail(fmt::format("{}: result '{}', the interpreter's '{}'", what, j.result,
                                  expected.result));
        }
      }
    }
    const JobRecord& top = store_.jobs.at(top_);
    // Time: a retry never starts before its backoff is over. (A row re-queued after its
    // node was lost, redelivered, starts at once: its attempt waited out its backoff; so
    // does the new row of an attempt lost with the engine, which keeps its attempt and its
    // redeliveries: its slot holds a row that ended "the engine stopped while the task
    // ran" with the same attempt.)
    std::set<std::tuple<std::string, std::string, int, int, int>> lost;
    for (const auto& [id, t] : store_.tasks) {
      if (t.state == TaskState::kFailed && t.task.retry &&
          t.error.starts_with("the engine stopped while the task ran")) {
        lost.insert({t.job_id, t.parent_id, t.position, t.each_index, t.task.retry->attempts});
      }
    }
    for (const auto& [id, t] : store_.tasks) {
      if (!t.task.retry || t.task.retry->attempts < 1 || !t.started_at || t.redelivered > 0 ||
          lost.contains(
              {t.job_id, t.parent_id, t.position, t.each_index, t.task.retry->attempts})) {
        continue;
      }
      TimePoint due =
          t.created_at + RetryDelay(*t.task.retry, t.task.retry->attempts) + RetryJitter(t);
      if (*t.started_at < due) {
        return Fail(fmt::format("{} started {} ms before its backoff was over", t.task.name,
                                (due - *t.started_at).count()));
      }
    }
    // A wait completes once, never before its time (its row's started_at + for); a signal
    // wait times out (no signal comes) never before its timeout.
    for (const auto& [id, t] : store_.tasks) {
      if (!t.task.wait) continue;
      std::optional<TimePoint> due = WaitDueAt(t);
      if (t.state == TaskState::kCompleted && (!due || !t.completed_at || *t.completed_at < *due)) {
        return Fail(fmt::format("wait {} completed before its time", t.task.name));
      }
      if (t.state == TaskState::kFailed && t.error.starts_with("no signal") &&
          (!due || !t.failed_at || *t.failed_at < *due)) {
        return Fail(fmt::format("signal wait {} failed before its timeout", t.task.name));
      }
    }
    // A job with a deadline times out at it exactly when it is still running then; before
    // its deadline it ends as the interpreter says.
    bool timed_out = top.state == JobState::kFailed && top.error.starts_with("job timed out");
    if (def.timeout && top.started_at) {
      TimePoint deadline = *top.started_at + *def.timeout;
      std::optional<TimePoint> ended =
          top.state == JobState::kCompleted ? top.completed_at : top.failed_at;
      // A job with cleanup had its outcome when its first cleanup row of this run was
      // made (its deadline no longer counts then). A row of an earlier run (run_of_) is
      // not this run's, also when made in the millisecond this run started (seed 109407:
      // a rerun at the time of the last run's timeout, whose finally row it made).
      for (const auto& [id, t] : store_.tasks) {
        if (t.job_id == top_ && t.parent_id.empty() && IsJobHandler(t.task) &&
            !run_of_.contains(id) && t.created_at >= *top.started_at && ended &&
            t.created_at < *ended) {
          ended = t.created_at;
        }
      }
      if (timed_out && ended && *ended < deadline) {
        return Fail(
            fmt::format("timed out {} ms before its deadline", (deadline - *ended).count()));
      }
      if (!timed_out && ended && *ended > deadline) {
        return Fail(fmt::format("{} {} ms after its deadline, not timed out", ToString(top.state),
                                (*ended - deadline).count()));
      }
    }
  }

  Choices& c_;
  std::uint64_t seed_;
  Policy policy_;
  Store store_;
  std::string top_;
  std::vector<Delivery> queue_;
  std::set<std::string> dropped_;
  std::set<std::string> hung_;           // rows whose run hangs on its worker (no report)
  std::set<std::string> drop_lost_;      // rows whose drop a crash lost
  std::set<std::string> withdraw_lost_;  // rows whose withdrawal a crash lost
  // Rows withdrawn from the queues (a paused job's): the workers' memory, which dies with
  // a standalone engine (the drops are stored; withdrawals are not).
  std::set<std::string> withdrawn_;
  std::set<std::string> ever_taken_;      // rows some worker took
  std::set<std::string> took_cancelled_;  // "node/incarnation/row": took it cancelled
  std::map<std::string, int> incarnation_;
  std::map<std::string, std::set<std::string>> taken_;
  std::map<std::string, std::set<std::string>> running_;
  std::map<std::string, int> accepted_;
  std::vector<std::string> history_;
  std::string failure_;
  std::int64_t clock_ = 0;                                         // ms since Epoch()
  std::multimap<TimePoint, Event> timers_;                         // retries' backoffs
  std::map<std::string, std::pair<TimePoint, Event>> job_timers_;  // job → deadline
  std::uint64_t seeds_ = 0;
  std::vector<Ending> ends_;           // the top-level job's endings
  std::vector<int> restarts_;          // at each restart of it, its step (1-based)
  std::map<std::string, int> run_of_;  // a row there was at a restart → the run before
  int steps_ = 0;
  int engine_crash_at_ = -1;  // the delivery the next engine crash comes before
  int engine_crashes_ = 0;    // engine crashes still to come
  int pause_at_ = 0;          // the delivery a pause of the job comes before (0: none)
  int resume_at_ = 0;         // ...and its resume
  int timers_fired_ = 0;
  int decisions_ = 0;
};

}  // namespace

Choices::Choices(const std::uint8_t* data, std::size_t size)
    : data_(data),
      size_(size),
      rng_(Mix(1469598103934665603ULL,
               std::string_view(reinterpret_cast<const char*>(data), size))) {}

std::uint32_t Choices::Below(std::uint32_t n) {
  if (n <= 1) return 0;
  if (at_ < size_) return data_[at_++] % n;
  return static_cast<std::uint32_t>(rng_() % n);
}

Result RunOne(Choices& choices, std::uint64_t outcome_seed) {
  return Sim(choices, outcome_seed).Run();
}

}  // namespace baton::flow::sim

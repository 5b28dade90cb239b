#include "core/graph.h"

#include <algorithm>
#include <array>
#include <map>

namespace baton {
namespace {

constexpr std::array<std::pair<TriggerRule, std::string_view>, 7> kRuleNames = {{
    {TriggerRule::kAllSuccess, "all_success"},
    {TriggerRule::kAllDone, "all_done"},
    {TriggerRule::kAllFailed, "all_failed"},
    {TriggerRule::kOneSuccess, "one_success"},
    {TriggerRule::kOneFailed, "one_failed"},
    {TriggerRule::kNoneFailed, "none_failed"},
    {TriggerRule::kNoneFailedMinOneSuccess, "none_failed_min_one_success"},
}};

bool Succeeded(char s) { return s == step::kCompleted || s == step::kPassed; }
bool FailedStep(char s) { return s == step::kFailed || s == step::kCancelled; }

}  // namespace

bool IsEndedStep(char state) { return state != step::kWaiting && state != step::kRunning; }

bool IsGraph(TaskOrder mode, const std::vector<Task>& tasks) {
  if (mode == TaskOrder::kDag) return true;
  return std::any_of(tasks.begin(), tasks.end(),
                     [](const Task& t) { return !t.needs.empty() || t.trigger_rule; });
}

bool IsGraph(const Parallel& parallel) { return IsGraph(TaskOrder::kSequence, parallel.tasks); }

TaskGraph GraphOf(TaskOrder mode, const std::vector<Task>& tasks) {
  std::map<std::string_view, int> index;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    index.try_emplace(tasks[i].name, static_cast<int>(i));
  }
  TaskGraph graph;
  graph.needs.resize(tasks.size());
  graph.when.resize(tasks.size());
  graph.rules.resize(tasks.size(), TriggerRule::kAllSuccess);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    if (t.trigger_rule) graph.rules[i] = *t.trigger_rule;
    if (t.needs.empty()) {
      if (mode == TaskOrder::kSequence && i > 0) {
        graph.needs[i].push_back(static_cast<int>(i) - 1);
        graph.when[i].emplace_back();
      }
      continue;
    }
    for (const Need& need : t.needs) {
      auto it = index.find(need.task);
      if (it == index.end()) continue;
      std::vector<int>& needs = graph.needs[i];
      if (std::find(needs.begin(), needs.end(), it->second) == needs.end()) {
        needs.push_back(it->second);
        graph.when[i].push_back(need.when);
      }
    }
  }
  return graph;
}

std::optional<std::vector<int>> FindCycle(const TaskGraph& graph) {
  // Depth-first, iterative (a chain of thousands of tasks must not exhaust the stack).
  const int n = static_cast<int>(graph.needs.size());
  std::vector<int> color(static_cast<std::size_t>(n), 0);  // 0 new, 1 on the path, 2 done
  for (int root = 0; root < n; ++root) {
    if (color[static_cast<std::size_t>(root)] != 0) continue;
    std::vector<std::pair<int, std::size_t>> path = {{root, 0}};
    color[static_cast<std::size_t>(root)] = 1;
    while (!path.empty()) {
      auto& [node, next] = path.back();
      const std::vector<int>& needs = graph.needs[static_cast<std::size_t>(node)];
      if (next == needs.size()) {
        color[static_cast<std::size_t>(node)] = 2;
        path.pop_back();
        continue;
      }
      int up = needs[next++];
      if (color[static_cast<std::size_t>(up)] == 1) {
        std::vector<int> cycle;
        auto from =
            std::find_if(path.begin(), path.end(), [up](const auto& p) { return p.first == up; });
        for (auto it = from; it != path.end(); ++it) cycle.push_back(it->first);
        cycle.push_back(up);
        return cycle;
      }
      if (color[static_cast<std::size_t>(up)] == 0) {
        color[static_cast<std::size_t>(up)] = 1;
        path.emplace_back(up, 0);
      }
    }
  }
  return std::nullopt;
}

Verdict Judge(TriggerRule rule, const std::vector<char>& upstream) {
  if (upstream.empty()) return Verdict::kRun;
  int success = 0;
  int failed = 0;
  int skipped = 0;
  int ended = 0;
  for (char s : upstream) {
    if (Succeeded(s)) ++success;
    if (FailedStep(s)) ++failed;
    if (s == step::kSkipped) ++skipped;
    if (IsEndedStep(s)) ++ended;
  }
  const bool all_ended = ended == static_cast<int>(upstream.size());
  switch (rule) {
    case TriggerRule::kAllSuccess:
      if (failed > 0 || skipped > 0) return Verdict::kSkip;
      return all_ended ? Verdict::kRun : Verdict::kWait;
    case TriggerRule::kAllDone:
      return all_ended ? Verdict::kRun : Verdict::kWait;
    case TriggerRule::kAllFailed:
      if (success > 0 || skipped > 0) return Verdict::kSkip;
      return all_ended ? Verdict::kRun : Verdict::kWait;
    case TriggerRule::kOneSuccess:
      if (success > 0) return Verdict::kRun;
      return all_ended ? Verdict::kSkip : Verdict::kWait;
    case TriggerRule::kOneFailed:
      if (failed > 0) return Verdict::kRun;
      return all_ended ? Verdict::kSkip : Verdict::kWait;
    case TriggerRule::kNoneFailed:
      if (failed > 0) return Verdict::kSkip;
      return all_ended ? Verdict::kRun : Verdict::kWait;
    case TriggerRule::kNoneFailedMinOneSuccess:
      if (failed > 0) return Verdict::kSkip;
      if (!all_ended) return Verdict::kWait;
      return success > 0 ? Verdict::kRun : Verdict::kSkip;
  }
  return Verdict::kWait;
}

std::string_view ToString(TriggerRule rule) {
  for (const auto& [r, name] : kRuleNames) {
    if (r == rule) return name;
  }
  return "all_success";
}

std::optional<TriggerRule> ParseTriggerRule(std::string_view text) {
  for (const auto& [r, name] : kRuleNames) {
    if (name == text) return r;
  }
  return std::nullopt;
}

std::string TriggerRuleNames() {
  std::string out;
  for (const auto& [r, name] : kRuleNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string_view ToString(TaskOrder mode) { return mode == TaskOrder::kDag ? "dag" : "sequence"; }

}  // namespace baton

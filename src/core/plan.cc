#include "core/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/graph.h"
#include "core/job_json.h"
#include "core/task_kind.h"

namespace baton {
namespace {

using nlohmann::json;

json PlanTasks(TaskOrder mode, const std::vector<Task>& tasks, json* stages_out);

// The tasks skipped when task `failed` alone fails (-1: none fails) and every other
// task that runs succeeds.
std::vector<int> SkippedWhenFailing(const TaskGraph& graph, int failed) {
  const std::size_t n = graph.needs.size();
  std::string steps(n, step::kWaiting);
  if (failed >= 0) steps[static_cast<std::size_t>(failed)] = step::kFailed;
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (steps[i] != step::kWaiting) continue;
      std::vector<char> upstream;
      for (int need : graph.needs[i]) upstream.push_back(steps[static_cast<std::size_t>(need)]);
      Verdict verdict = Judge(graph.rules[i], upstream);
      if (verdict == Verdict::kWait) continue;
      steps[i] = verdict == Verdict::kRun ? step::kCompleted : step::kSkipped;
      changed = true;
    }
  }
  std::vector<int> skipped;
  for (std::size_t i = 0; i < n; ++i) {
    if (steps[i] == step::kSkipped) skipped.push_back(static_cast<int>(i));
  }
  return skipped;
}

// What the failure of task `failed` alone skips that would run if nothing failed.
std::vector<int> FailureSkips(const TaskGraph& graph, int failed) {
  std::vector<int> always = SkippedWhenFailing(graph, -1);
  std::vector<int> out;
  for (int i : SkippedWhenFailing(graph, failed)) {
    if (std::find(always.begin(), always.end(), i) == always.end()) out.push_back(i);
  }
  return out;
}

json PlanTask(const Task& t);

json PlanList(const std::vector<Task>& tasks) {
  json out = json::array();
  for (const Task& child : tasks) out.push_back(PlanTask(child));
  return out;
}

json PlanTask(const Task& t) {
  json out = {{"name", t.name}, {"kind", std::string(ToString(KindOf(t)))}};
  if (!t.if_expr.empty()) out["if"] = t.if_expr;
  if (t.retry) out["retry"] = t.retry->limit;
  if (t.optional) out["optional"] = true;
  if (t.pause_before) out["pauseBefore"] = true;
  if (t.on_failure) {
    out["onFailure"] = {{"tasks", PlanList(t.on_failure->tasks)},
                        {"then", std::string(ToString(t.on_failure->then))}};
  }
  switch (KindOf(t)) {
    case TaskKind::kRunnable:
    case TaskKind::kHandler:  // a row the engine makes, never in a definition's plan
      break;
    case TaskKind::kWait:
      out["wait"] = ToJson(t)["wait"];  // as the job file says it
      break;
    case TaskKind::kParallel: {
      if (IsGraph(*t.parallel)) {
        // Its tasks as a graph of their own: stages, needs, rules and skips.
        json stages = json::array();
        out["tasks"] = PlanTasks(TaskOrder::kDag, t.parallel->tasks, &stages);
        out["stages"] = std::move(stages);
        out["graph"] = true;
        break;
      }
      json tasks = json::array();
      for (const Task& child : t.parallel->tasks) tasks.push_back(PlanTask(child));
      out["tasks"] = std::move(tasks);
      break;
    }
    case TaskKind::kEach:
      out["each"] = {{"list", t.each->list},
                     {"concurrency", t.each->concurrency},
                     {"task", PlanTask(*t.each->task)}};
      break;
    case TaskKind::kSubJob: {
      json stages = json::array();
      json sub = {{"name", t.subjob->name},
                  {"mode", std::string(ToString(t.subjob->mode))},
                  {"graph", IsGraph(t.subjob->mode, t.subjob->tasks)},
                  {"detached", t.subjob->detached}};
      sub["tasks"] = PlanTasks(t.subjob->mode, t.subjob->tasks, &stages);
      sub["stages"] = std::move(stages);
      sub["onFailure"] = PlanList(t.subjob->on_failure);
      sub["finally"] = PlanList(t.subjob->finally);
      out["subjob"] = std::move(sub);
      break;
    }
    case TaskKind::kSwitch: {
      json cases = json::object();
      for (const SwitchCase& c : t.switch_->cases) cases[c.key] = PlanList(c.tasks);
      out["switch"] = {{"value", t.switch_->value},
                       {"cases", std::move(cases)},
                       {"default", PlanList(t.switch_->default_tasks)}};
      break;
    }
    case TaskKind::kLoop: {
      json loop = {{"tasks", PlanList(t.loop->tasks)}, {"max", t.loop->max}};
      if (!t.loop->while_expr.empty()) loop["while"] = t.loop->while_expr;
      if (!t.loop->until_expr.empty()) loop["until"] = t.loop->until_expr;
      out["loop"] = std::move(loop);
      break;
    }
  }
  return out;
}

// A list's tasks, planned; its stages into *stages_out.
json PlanTasks(TaskOrder mode, const std::vector<Task>& tasks, json* stages_out) {
  const bool graph = IsGraph(mode, tasks);
  const TaskGraph g = GraphOf(mode, tasks);
  const std::size_t n = tasks.size();
  // A task's stage: one past the latest of what it needs (a valid job has no cycle).
  std::vector<int> stage(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < n; ++i) {
      int s = 1;
      for (int need : g.needs[i]) s = std::max(s, stage[static_cast<std::size_t>(need)] + 1);
      if (s != stage[i]) {
        stage[i] = s;
        changed = true;
      }
    }
  }
  json out = json::array();
  int last = 0;
  for (std::size_t i = 0; i < n; ++i) {
    json task = PlanTask(tasks[i]);
    task["stage"] = stage[i];
    last = std::max(last, stage[i]);
    json needs = json::array();
    json when = json::object();
    for (std::size_t k = 0; k < g.needs[i].size(); ++k) {
      const std::string& name = tasks[static_cast<std::size_t>(g.needs[i][k])].name;
      needs.push_back(name);
      if (!g.when[i][k].empty()) when[name] = g.when[i][k];
    }
    task["needs"] = std::move(needs);
    if (!when.empty()) task["when"] = std::move(when);
    task["triggerRule"] = std::string(ToString(g.rules[i]));
    if (graph) {
      json skips = json::array();
      for (int s : FailureSkips(g, static_cast<int>(i))) {
        skips.push_back(tasks[static_cast<std::size_t>(s)].name);
      }
      task["failureSkips"] = std::move(skips);
    } else {
      task["failureFailsTheJob"] = true;
    }
    out.push_back(std::move(task));
  }
  json stages = json::array();
  for (int s = 1; s <= last; ++s) {
    json names = json::array();
    for (std::size_t i = 0; i < n; ++i) {
      if (stage[i] == s) names.push_back(tasks[i].name);
    }
    stages.push_back(std::move(names));
  }
  *stages_out = std::move(stages);
  return out;
}

// Tasks run one after another: "a, then b".
std::string ChainOf(const json& tasks) {
  std::vector<std::string> names;
  for (const json& child : tasks) names.push_back(child["name"].get<std::string>());
  return names.empty() ? "nothing" : fmt::format("{}", fmt::join(names, ", then "));
}

// A job's (or a sub-job's) cleanup, as the text plan says it.
void CleanupText(const json& plan, const std::string& indent, std::string& out) {
  if (plan.contains("onFailure") && !plan["onFailure"].empty()) {
    out += fmt::format("{}if the job fails: {}\n", indent, ChainOf(plan["onFailure"]));
  }
  if (plan.contains("finally") && !plan["finally"].empty()) {
    out += fmt::format("{}finally, however it ends: {}\n", indent, ChainOf(plan["finally"]));
  }
}

std::string Names(const json& names) {
  std::string out;
  for (const json& n : names) {
    if (!out.empty()) out += ", ";
    out += n.get<std::string>();
  }
  return out;
}

void TextOf(const json& plan, const std::string& indent, std::string& out) {
  const json& stages = plan["stages"];
  for (std::size_t s = 0; s < stages.size(); ++s) {
    out += fmt::format("{}stage {}: {}{}\n", indent, s + 1, Names(stages[s]),
                       stages[s].size() > 1 ? "  (at once)" : "");
  }
  for (const json& t : plan["tasks"]) {
    std::string line = fmt::format("{}- {} ({})", indent, t["name"].get<std::string>(),
                                   t["kind"].get<std::string>());
    if (!t["needs"].empty()) {
      line +=
          fmt::format(": needs {} ({})", Names(t["needs"]), t["triggerRule"].get<std::string>());
    } else if (t["triggerRule"] != "all_success") {
      line += fmt::format(": {}", t["triggerRule"].get<std::string>());
    }
    if (t.contains("when")) {
      for (auto it = t["when"].begin(); it != t["when"].end(); ++it) {
        line += fmt::format("; after {} only when {}", it.key(), it.value().get<std::string>());
      }
    }
    if (t.contains("if")) line += fmt::format("; if {}", t["if"].get<std::string>());
    if (t.contains("retry")) line += fmt::format("; retried up to {} times", t["retry"].get<int>());
    if (t.contains("onFailure")) {
      line += fmt::format("; on failure runs {}, then {}", ChainOf(t["onFailure"]["tasks"]),
                          t["onFailure"]["then"] == "continue" ? "goes on" : "fails");
    }
    if (t.value("optional", false)) {
      line += "; optional: its failure is a warning";
    } else if (t.contains("onFailure") && t["onFailure"]["then"] == "continue") {
      // a failure recovered from: nothing skipped, nothing failed
    } else if (t.value("failureFailsTheJob", false)) {
      line += "; its failure fails the job";
    } else if (t.contains("failureSkips") && !t["failureSkips"].empty()) {
      line += fmt::format("; its failure skips {}", Names(t["failureSkips"]));
    } else if (t.contains("failureSkips")) {
      line += "; its failure skips nothing";
    }
    out += line + "\n";
    if (t.contains("tasks") && t.value("graph", false)) {
      out += fmt::format("{}    its tasks by their needs:\n", indent);
      TextOf(t, indent + "      ", out);
    } else if (t.contains("tasks")) {
      for (const json& child : t["tasks"]) {
        out += fmt::format("{}    at once: {} ({})\n", indent, child["name"].get<std::string>(),
                           child["kind"].get<std::string>());
      }
    }
    if (t.contains("each")) {
      out +=
          fmt::format("{}    for each of {}{}: {}\n", indent, t["each"]["list"].get<std::string>(),
                      t["each"]["concurrency"].get<int>() > 0
                          ? fmt::format(", {} at a time", t["each"]["concurrency"].get<int>())
                          : "",
                      t["each"]["task"]["name"].get<std::string>());
    }
    if (t.contains("switch")) {
      const json& sw = t["switch"];
      auto branch = [&](const std::string& head, const json& tasks) {
        std::vector<std::string> names;
        for (const json& child : tasks) names.push_back(child["name"].get<std::string>());
        out +=
            fmt::format("{}    {}: {}\n", indent, head,
                        names.empty() ? "nothing" : fmt::format("{}", fmt::join(names, ", then ")));
      };
      out += fmt::format("{}    on the value of {}:\n", indent, sw["value"].get<std::string>());
      for (auto it = sw["cases"].begin(); it != sw["cases"].end(); ++it) {
        branch(fmt::format("  \"{}\"", it.key()), it.value());
      }
      branch("  otherwise", sw["default"]);
    }
    if (t.contains("loop")) {
      const json& loop = t["loop"];
      std::vector<std::string> names;
      for (const json& child : loop["tasks"]) names.push_back(child["name"].get<std::string>());
      std::string stop = fmt::format("at most {} times", loop["max"].get<int>());
      if (loop.contains("until")) stop = "until " + loop["until"].get<std::string>() + ", " + stop;
      if (loop.contains("while")) stop = "while " + loop["while"].get<std::string>() + ", " + stop;
      out += fmt::format("{}    repeat {} ({})\n", indent, fmt::join(names, ", then "), stop);
    }
    if (t.contains("subjob")) {
      const json& sub = t["subjob"];
      out += fmt::format("{}    subjob {} ({}{}):\n", indent, sub["name"].get<std::string>(),
                         sub["mode"].get<std::string>(),
                         sub["detached"].get<bool>() ? ", detached" : "");
      TextOf(sub, indent + "      ", out);
      CleanupText(sub, indent + "      ", out);
    }
  }
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

// Node ids are the path of names, so that nested lists may reuse a name.
void DotOf(const json& plan, const std::string& prefix, std::string& out, int& clusters) {
  for (const json& t : plan["tasks"]) {
    const std::string name = t["name"].get<std::string>();
    const std::string id = prefix + name;
    std::string label = name;
    if (t["kind"] != "runnable") label += " [" + t["kind"].get<std::string>() + "]";
    out += fmt::format("  {} [label={}];\n", Quote(id), Quote(label));
    for (const json& need : t["needs"]) {
      std::string edge;
      if (t["triggerRule"] != "all_success") edge = t["triggerRule"].get<std::string>();
      if (t.contains("when") && t["when"].contains(need.get<std::string>())) {
        if (!edge.empty()) edge += ", ";
        edge += "when " + t["when"][need.get<std::string>()].get<std::string>();
      }
      std::string attr;
      if (!edge.empty()) attr = fmt::format(" [label={}]", Quote(edge));
      out +=
          fmt::format("  {} -> {}{};\n", Quote(prefix + need.get<std::string>()), Quote(id), attr);
    }
    if (t.contains("subjob")) {
      out += fmt::format("  subgraph cluster_{} {{\n  label={};\n", ++clusters,
                         Quote("subjob " + t["subjob"]["name"].get<std::string>()));
      DotOf(t["subjob"], id + "/", out, clusters);
      out += "  }\n";
    }
    auto chain = [&](const json& tasks, const std::string& from, const std::string& branch) {
      std::string prev = from;
      std::string edge = branch.empty() ? "" : fmt::format(" [label={}]", Quote(branch));
      for (const json& child : tasks) {
        const std::string child_id = id + "/" + branch + "/" + child["name"].get<std::string>();
        out += fmt::format("  {} [label={}];\n", Quote(child_id),
                           Quote(child["name"].get<std::string>()));
        out += fmt::format("  {} -> {}{};\n", Quote(prev), Quote(child_id), edge);
        prev = child_id;
        edge.clear();
      }
      return prev;
    };
    if (t.contains("switch")) {
      out +=
          fmt::format("  subgraph cluster_{} {{\n  label={};\n", ++clusters,
                      Quote(name + " (switch on " + t["switch"]["value"].get<std::string>() + ")"));
      for (auto it = t["switch"]["cases"].begin(); it != t["switch"]["cases"].end(); ++it) {
        chain(it.value(), id, it.key());
      }
      chain(t["switch"]["default"], id, "default");
      out += "  }\n";
    }
    if (t.contains("loop")) {
      out += fmt::format(
          "  subgraph cluster_{} {{\n  label={};\n", ++clusters,
          Quote(name + " (loop, at most " + std::to_string(t["loop"]["max"].get<int>()) + ")"));
      std::string last = chain(t["loop"]["tasks"], id, "each iteration");
      out += fmt::format("  {} -> {} [label=\"again\", style=dashed];\n", Quote(last), Quote(id));
      out += "  }\n";
    }
    if (t.contains("tasks") && t.value("graph", false)) {
      out += fmt::format("  subgraph cluster_{} {{\n  label={};\n", ++clusters,
                         Quote(name + " (by needs)"));
      DotOf(t, id + "/", out, clusters);
      out += "  }\n";
    } else if (t.contains("tasks")) {
      out += fmt::format("  subgraph cluster_{} {{\n  label={};\n", ++clusters,
                         Quote(name + " (at once)"));
      for (const json& child : t["tasks"]) {
        out += fmt::format("  {} [label={}];\n", Quote(id + "/" + child["name"].get<std::string>()),
                           Quote(child["name"].get<std::string>()));
      }
      out += "  }\n";
    }
  }
}

}  // namespace

json PlanOf(const Job& job) {
  json stages = json::array();
  json plan = {{"name", job.name},
               {"mode", std::string(ToString(job.mode))},
               {"graph", IsGraph(job.mode, job.tasks)}};
  plan["tasks"] = PlanTasks(job.mode, job.tasks, &stages);
  plan["stages"] = std::move(stages);
  plan["onFailure"] = PlanList(job.on_failure);
  plan["finally"] = PlanList(job.finally);
  return plan;
}

std::string PlanText(const json& plan) {
  std::string out = fmt::format(
      "plan of {} ({}, {} tasks in {} stages)\n", plan["name"].get<std::string>(),
      plan["graph"].get<bool>() ? plan["mode"].get<std::string>() + " graph" : "sequence",
      plan["tasks"].size(), plan["stages"].size());
  TextOf(plan, "", out);
  CleanupText(plan, "", out);
  return out;
}

std::string PlanDot(const json& plan) {
  std::string out = fmt::format("digraph {} {{\n  rankdir=LR;\n  node [shape=box];\n",
                                Quote(plan["name"].get<std::string>()));
  int clusters = 0;
  DotOf(plan, "", out, clusters);
  for (const char* key : {"onFailure", "finally"}) {
    if (!plan.contains(key) || plan[key].empty()) continue;
    out += fmt::format("  subgraph cluster_{} {{\n  label={};\n", ++clusters,
                       Quote(std::string(key) == "finally" ? "finally" : "if the job fails"));
    std::string prev;
    for (const json& t : plan[key]) {
      const std::string id = std::string(key) + "/" + t["name"].get<std::string>();
      out += fmt::format("  {} [label={}];\n", Quote(id), Quote(t["name"].get<std::string>()));
      if (!prev.empty()) out += fmt::format("  {} -> {};\n", Quote(prev), Quote(id));
      prev = id;
    }
    out += "  }\n";
  }
  return out + "}\n";
}

}  // namespace baton

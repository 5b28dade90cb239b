#include "core/job_json.h"

#include <fmt/format.h>

#include "core/graph.h"
#include "core/task_kind.h"

namespace baton {

using nlohmann::json;

namespace {

// Setters that leave out empty values, as Tork's `omitempty` does.
void Put(json& out, const char* key, const std::string& value) {
  if (!value.empty()) out[key] = value;
}
void Put(json& out, const char* key, const std::vector<std::string>& value) {
  if (!value.empty()) out[key] = value;
}
void Put(json& out, const char* key, const StringMap& value) {
  if (!value.empty()) out[key] = value;
}
void Put(json& out, const char* key, const std::optional<Duration>& value) {
  if (value) out[key] = FormatDuration(*value);
}
void Put(json& out, const char* key, const std::optional<int>& value) {
  if (value) out[key] = *value;
}
}  // namespace

template <typename T>
static void PutList(json& out, const char* key, const std::vector<T>& items) {
  if (items.empty()) return;
  json list = json::array();
  for (const T& item : items) list.push_back(ToJson(item));
  out[key] = std::move(list);
}

static json ToJson(const RetryOn& on) {
  json out = json::object();
  if (!on.exit_codes.empty()) out["exitCodes"] = on.exit_codes;
  if (!on.errors.empty()) {
    json errors = json::array();
    for (FailReason r : on.errors) errors.push_back(std::string(ToString(r)));
    out["errors"] = std::move(errors);
  }
  return out;
}

static json ToJson(const Retry& retry) {
  json out = {{"limit", retry.limit}};
  if (retry.attempts > 0) out["attempts"] = retry.attempts;
  Put(out, "initialDelay", retry.initial_delay);
  if (retry.scaling_factor) out["scalingFactor"] = *retry.scaling_factor;
  Put(out, "maxDelay", retry.max_delay);
  if (retry.on) out["on"] = ToJson(*retry.on);
  Put(out, "jitter", retry.jitter);
  return out;
}

static json ToJson(const Limits& limits) {
  json out = json::object();
  if (limits.cpus) out["cpus"] = fmt::format("{}", *limits.cpus);
  if (limits.memory) out["memory"] = FormatMemory(*limits.memory);
  return out;
}

static json ToJson(const Mount& mount) {
  json out = {{"type", ToString(mount.type)}};
  Put(out, "source", mount.source);
  Put(out, "target", mount.target);
  Put(out, "opts", mount.opts);
  return out;
}

static json ToJson(const Registry& registry) {
  json out = json::object();
  Put(out, "username", registry.username);
  Put(out, "password", registry.password);
  return out;
}

static json ToJson(const Probe& probe) {
  json out = json::object();
  Put(out, "path", probe.path);
  if (probe.port != 0) out["port"] = probe.port;
  Put(out, "timeout", probe.timeout);
  return out;
}

static json ToJson(const Webhook& hook) {
  json out = json::object();
  Put(out, "url", hook.url);
  Put(out, "headers", hook.headers);
  Put(out, "event", hook.event);
  Put(out, "if", hook.if_expr);
  Put(out, "secret", hook.secret);
  return out;
}

static json ToJson(const Permission& perm) {
  json out = json::object();
  Put(out, "role", perm.role);
  Put(out, "user", perm.user);
  return out;
}

static json ToJson(const AutoDelete& auto_delete) {
  return {{"after", FormatDuration(auto_delete.after)}};
}

static json ToJson(const Defaults& defaults) {
  json out = json::object();
  if (defaults.retry) out["retry"] = ToJson(*defaults.retry);
  if (defaults.limits) out["limits"] = ToJson(*defaults.limits);
  Put(out, "timeout", defaults.timeout);
  Put(out, "queue", defaults.queue);
  Put(out, "priority", defaults.priority);
  return out;
}

static json ToJson(const SubJob& sub) {
  json out = json::object();
  Put(out, "name", sub.name);
  if (sub.mode == TaskOrder::kDag) out["mode"] = "dag";
  Put(out, "description", sub.description);
  PutList(out, "tasks", sub.tasks);
  Put(out, "inputs", sub.inputs);
  Put(out, "secrets", sub.secrets);
  Put(out, "output", sub.output);
  if (sub.auto_delete) out["autoDelete"] = ToJson(*sub.auto_delete);
  PutList(out, "webhooks", sub.webhooks);
  if (sub.detached) out["detached"] = true;
  PutList(out, "onFailure", sub.on_failure);
  PutList(out, "finally", sub.finally);
  return out;
}

json ToJson(const AuxTask& aux) {
  json out = json::object();
  Put(out, "name", aux.name);
  Put(out, "description", aux.description);
  Put(out, "run", aux.run);
  Put(out, "image", aux.image);
  Put(out, "cmd", aux.cmd);
  Put(out, "entrypoint", aux.entrypoint);
  Put(out, "env", aux.env);
  Put(out, "files", aux.files);
  Put(out, "timeout", aux.timeout);
  if (aux.registry) out["registry"] = ToJson(*aux.registry);
  if (aux.probe) out["probe"] = ToJson(*aux.probe);
  return out;
}

json ToJson(const Task& task) {
  json out = json::object();
  Put(out, "name", task.name);
  Put(out, "description", task.description);
  Put(out, "var", task.var);
  Put(out, "if", task.if_expr);
  Put(out, "run", task.run);
  Put(out, "image", task.image);
  Put(out, "cmd", task.cmd);
  Put(out, "entrypoint", task.entrypoint);
  Put(out, "env", task.env);
  Put(out, "files", task.files);
  Put(out, "workdir", task.workdir);
  Put(out, "queue", task.queue);
  Put(out, "priority", task.priority);
  PutList(out, "pre", task.pre);
  PutList(out, "post", task.post);
  PutList(out, "sidecars", task.sidecars);
  PutList(out, "mounts", task.mounts);
  Put(out, "networks", task.networks);
  if (task.limits) out["limits"] = ToJson(*task.limits);
  Put(out, "gpus", task.gpus);
  if (task.registry) out["registry"] = ToJson(*task.registry);
  Put(out, "tags", task.tags);
  Put(out, "timeout", task.timeout);
  if (task.retry) out["retry"] = ToJson(*task.retry);
  if (!task.needs.empty()) {
    json needs = json::array();
    for (const Need& need : task.needs) {
      if (need.when.empty()) {
        needs.push_back(need.task);
      } else {
        needs.push_back({{"task", need.task}, {"when", need.when}});
      }
    }
    out["needs"] = std::move(needs);
  }
  if (task.trigger_rule) out["triggerRule"] = std::string(ToString(*task.trigger_rule));
  if (task.optional) out["optional"] = true;
  if (task.pause_before) out["pauseBefore"] = true;
  if (task.parallel) {
    json tasks = json::array();
    for (const Task& t : task.parallel->tasks) tasks.push_back(ToJson(t));
    out["parallel"] = {{"tasks", std::move(tasks)}};
  }
  if (task.each) {
    json each = {{"list", task.each->list}, {"task", ToJson(*task.each->task)}};
    Put(each, "var", task.each->var);
    if (task.each->concurrency > 0) each["concurrency"] = task.each->concurrency;
    out["each"] = std::move(each);
  }
  if (task.subjob) out["subjob"] = ToJson(*task.subjob);
  auto list = [](const std::vector<Task>& tasks) {
    json out = json::array();
    for (const Task& t : tasks) out.push_back(ToJson(t));
    return out;
  };
  if (task.switch_) {
    json sw = {{"value", task.switch_->value}};
    // The decoder keeps cases sorted by key, as a JSON object does: a round trip is equal.
    json cases = json::object();
    for (const SwitchCase& c : task.switch_->cases) cases[c.key] = list(c.tasks);
    if (!task.switch_->cases.empty()) sw["cases"] = std::move(cases);
    if (!task.switch_->default_tasks.empty() || task.switch_->cases.empty()) {
      sw["default"] = list(task.switch_->default_tasks);
    }
    out["switch"] = std::move(sw);
  }
  if (task.wait) {
    json wait = json::object();
    if (task.wait->for_) wait["for"] = FormatDuration(*task.wait->for_);
    Put(wait, "until", task.wait->until);
    Put(wait, "signal", task.wait->signal);
    if (task.wait->timeout) wait["timeout"] = FormatDuration(*task.wait->timeout);
    out["wait"] = std::move(wait);
  }
  if (task.loop) {
    json loop = {{"tasks", list(task.loop->tasks)}, {"max", task.loop->max}};
    Put(loop, "while", task.loop->while_expr);
    Put(loop, "until", task.loop->until_expr);
    out["loop"] = std::move(loop);
  }
  if (task.on_failure) {
    out["onFailure"] = {{"tasks", list(task.on_failure->tasks)},
                        {"then", std::string(ToString(task.on_failure->then))}};
  }
  if (task.handles != Handles::kNone) out["handles"] = std::string(ToString(task.handles));
  return out;
}

json ToJson(const Job& job) {
  json out = json::object();
  Put(out, "name", job.name);
  if (job.mode == TaskOrder::kDag) out["mode"] = "dag";
  Put(out, "description", job.description);
  Put(out, "tags", job.tags);
  Put(out, "inputs", job.inputs);
  Put(out, "secrets", job.secrets);
  if (job.defaults) out["defaults"] = ToJson(*job.defaults);
  Put(out, "output", job.output);
  PutList(out, "webhooks", job.webhooks);
  if (job.auto_delete) out["autoDelete"] = ToJson(*job.auto_delete);
  if (job.wait_timeout) out["wait"] = {{"timeout", FormatDuration(*job.wait_timeout)}};
  Put(out, "timeout", job.timeout);
  PutList(out, "permissions", job.permissions);
  if (job.schedule) out["schedule"] = {{"id", job.schedule->id}, {"cron", job.schedule->cron}};
  Put(out, "createdBy", job.created_by);
  PutList(out, "tasks", job.tasks);
  PutList(out, "onFailure", job.on_failure);
  PutList(out, "finally", job.finally);
  return out;
}

}  // namespace baton

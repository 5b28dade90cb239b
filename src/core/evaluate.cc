#include "core/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/document.h"
#include "core/job_decode.h"
#include "core/names.h"
#include "core/records.h"
#include "core/task_kind.h"
#include "expr/expr.h"

namespace baton {
namespace {

using nlohmann::json;

std::string TrimCopy(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// Evaluates a field's templates in place; the value must pass what a literal one would.
// `required`: a literal would need to be non-empty (a name).
Status EvaluateField(std::string& field, const expr::Vars& vars, const expr::EvalOptions& options,
                     std::string_view name, bool required = false) {
  if (!expr::HasTemplate(field)) return Status::Ok();
  auto value = expr::EvaluateTemplate(field, vars, options);
  if (!value.ok()) return InvalidArgument(fmt::format("{}: {}", name, value.status().message()));
  if (InvalidUtf8At(*value) != std::string_view::npos) {
    return InvalidArgument(fmt::format("{}: {}", name, kNotUtf8));
  }
  if (required && value->empty()) {
    return InvalidArgument(
        fmt::format("{}: is required, but its template evaluated to \"\"", name));
  }
  field = std::move(*value);
  return Status::Ok();
}

Status EvaluateList(std::vector<std::string>& list, const expr::Vars& vars,
                    const expr::EvalOptions& options, std::string_view name) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    BATON_RETURN_IF_ERROR(EvaluateField(list[i], vars, options, fmt::format("{}[{}]", name, i)));
  }
  return Status::Ok();
}

Status EvaluateMap(StringMap& map, const expr::Vars& vars, const expr::EvalOptions& options,
                   std::string_view name) {
  for (auto& [key, value] : map) {
    BATON_RETURN_IF_ERROR(EvaluateField(value, vars, options, fmt::format("{}.{}", name, key)));
  }
  return Status::Ok();
}

Status EvaluateAux(std::vector<AuxTask>& steps, const expr::Vars& vars,
                   const expr::EvalOptions& options, std::string_view name) {
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::string prefix = fmt::format("{}[{}]", name, i);
    BATON_RETURN_IF_ERROR(EvaluateField(steps[i].name, vars, options, prefix + ".name", true));
    BATON_RETURN_IF_ERROR(EvaluateField(steps[i].image, vars, options, prefix + ".image"));
    BATON_RETURN_IF_ERROR(EvaluateList(steps[i].cmd, vars, options, prefix + ".cmd"));
    BATON_RETURN_IF_ERROR(EvaluateList(steps[i].entrypoint, vars, options, prefix + ".entrypoint"));
    BATON_RETURN_IF_ERROR(EvaluateMap(steps[i].env, vars, options, prefix + ".env"));
  }
  return Status::Ok();
}

}  // namespace

bool IsUtf8(const json& value) {
  if (value.is_string()) {
    return InvalidUtf8At(value.get_ref<const std::string&>()) == std::string_view::npos;
  }
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (InvalidUtf8At(it.key()) != std::string_view::npos || !IsUtf8(it.value())) return false;
    }
  } else if (value.is_array()) {
    for (const json& item : value) {
      if (!IsUtf8(item)) return false;
    }
  }
  return true;
}

Result<bool> EvaluateCondition(const std::string& if_expr, const expr::Vars& vars,
                               const expr::EvalOptions& options, std::string_view field) {
  auto cond = expr::EvaluateTemplateValue(if_expr, vars, options);
  if (!cond.ok()) return InvalidArgument(fmt::format("{}: {}", field, cond.status().message()));
  if (!IsUtf8(*cond)) return InvalidArgument(fmt::format("{}: {}", field, kNotUtf8));
  return TrimCopy(expr::ToText(*cond)) != "false";
}

void ApplyDefaults(const std::optional<Defaults>& defaults, Task& task) {
  if (!defaults || task.IsComposite()) return;
  if (!task.retry && defaults->retry) task.retry = defaults->retry;
  if (!task.limits && defaults->limits) task.limits = defaults->limits;
  if (!task.timeout && defaults->timeout) task.timeout = defaults->timeout;
  if (task.queue.empty()) task.queue = defaults->queue;
  if (!task.priority && defaults->priority) task.priority = defaults->priority;
}

Status EvaluateTask(Task& task, const expr::Vars& vars, const expr::EvalOptions& options) {
  // The checks validation makes on literals, made again on what templates gave.
  BATON_RETURN_IF_ERROR(EvaluateField(task.name, vars, options, "name", true));
  BATON_RETURN_IF_ERROR(EvaluateField(task.var, vars, options, "var"));
  if (auto problem = VarProblem(task.var)) return InvalidArgument("var: " + *problem);
  BATON_RETURN_IF_ERROR(EvaluateField(task.image, vars, options, "image"));
  BATON_RETURN_IF_ERROR(EvaluateField(task.queue, vars, options, "queue"));
  // The engine's own queues would swallow the task (and its job would never end).
  if (auto problem = QueueProblem(task.queue)) return InvalidArgument("queue: " + *problem);
  // A runnable row says where it goes, as Tork's do.
  if (task.queue.empty() && KindOf(task) == TaskKind::kRunnable) task.queue = kQueueDefault;
  BATON_RETURN_IF_ERROR(EvaluateField(task.workdir, vars, options, "workdir"));
  BATON_RETURN_IF_ERROR(EvaluateList(task.cmd, vars, options, "cmd"));
  BATON_RETURN_IF_ERROR(EvaluateList(task.entrypoint, vars, options, "entrypoint"));
  BATON_RETURN_IF_ERROR(EvaluateMap(task.env, vars, options, "env"));
  BATON_RETURN_IF_ERROR(EvaluateAux(task.pre, vars, options, "pre"));
  BATON_RETURN_IF_ERROR(EvaluateAux(task.post, vars, options, "post"));
  BATON_RETURN_IF_ERROR(EvaluateAux(task.sidecars, vars, options, "sidecars"));
  if (task.wait && !task.wait->until.empty()) {
    BATON_RETURN_IF_ERROR(EvaluateField(task.wait->until, vars, options, "wait.until"));
    if (!ParseTime(task.wait->until)) {
      return InvalidArgument(
          fmt::format("wait.until: expected a time (RFC 3339, as 2026-01-02T15:04:05Z), got \"{}\"",
                      task.wait->until));
    }
  }
  if (task.subjob) {
    BATON_RETURN_IF_ERROR(EvaluateField(task.subjob->name, vars, options, "subjob.name", true));
    BATON_RETURN_IF_ERROR(EvaluateMap(task.subjob->inputs, vars, options, "subjob.inputs"));
    BATON_RETURN_IF_ERROR(EvaluateMap(task.subjob->secrets, vars, options, "subjob.secrets"));
  }
  return Status::Ok();
}

Result<expr::Value> EvaluateEachList(std::string_view list, const expr::Vars& vars,
                                     const expr::EvalOptions& options) {
  if (expr::HasTemplate(list)) return expr::EvaluateTemplateValue(list, vars, options);
  return expr::Evaluate(list, vars, options);
}

Duration RetryDelay(const Retry& retry, int attempt) {
  if (!retry.initial_delay || attempt < 1) return Duration::zero();
  double factor = retry.scaling_factor.value_or(2.0);
  double ms = static_cast<double>(retry.initial_delay->count()) * std::pow(factor, attempt - 1);
  if (retry.max_delay) ms = std::min(ms, static_cast<double>(retry.max_delay->count()));
  ms = std::min(ms, 1e12);
  return Duration(static_cast<std::int64_t>(ms));
}

}  // namespace baton

#include "core/webhook.h"

#include <fmt/format.h>

#include <cctype>

#include "core/document.h"
#include "core/evaluate.h"
#include "core/record_json.h"
#include "expr/expr.h"

namespace baton {
namespace {

using nlohmann::json;

// `summary` with each field also under the name Tork's Go struct gives it (state: State,
// id: ID, jobId: JobID, parentId: ParentID): Tork evaluates a webhook's `if` over its
// structs, so Tork's webhooks say `job.State == 'COMPLETED'`.
json WithGoNames(json summary) {
  json out = summary;
  for (const auto& [key, value] : summary.items()) {
    if (key.empty()) continue;
    std::string go = key;
    go[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(go[0])));
    if (go.ends_with("Id")) go.back() = 'D';
    if (!out.contains(go)) out[go] = value;
  }
  return out;
}

// What a webhook's templates see besides the context: `job`, and `task` for a task event,
// each with Tork's Go names besides its own; `body` is the event's summary with its JSON
// names only.
json Summaries(const JobRecord& job, const Job& definition, const TaskRecord* task,
               std::string& body) {
  json job_summary = JobSummaryJson(job, definition);
  json over = json::object();
  if (task != nullptr) {
    json task_summary = TaskSummaryJson(*task);
    body = task_summary.dump(-1, ' ', false, json::error_handler_t::replace);
    over["task"] = WithGoNames(std::move(task_summary));
  } else {
    body = job_summary.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  over["job"] = WithGoNames(std::move(job_summary));
  return over;
}

}  // namespace

std::string_view EventOf(const Webhook& hook) {
  return hook.event.empty() ? kEventJobStateChange : std::string_view(hook.event);
}

bool CallsWebhooks(const Job& definition, std::string_view event) {
  for (const Webhook& hook : definition.webhooks) {
    if (EventOf(hook) == event) return true;
  }
  return false;
}

std::vector<WebhookDelivery> WebhookDeliveriesFor(std::string_view event, const JobRecord& job,
                                                  const Job& definition, const json& context,
                                                  const TaskRecord* task, TimePoint now,
                                                  const std::function<std::string()>& new_id) {
  std::vector<WebhookDelivery> out;
  if (!CallsWebhooks(definition, event)) return out;
  const bool task_event = event.starts_with("task.");
  if (task_event && task == nullptr) return out;
  std::string body;
  const json over = Summaries(job, definition, task_event ? task : nullptr, body);
  const expr::Vars vars(context, over);
  for (std::size_t i = 0; i < definition.webhooks.size(); ++i) {
    const Webhook& hook = definition.webhooks[i];
    if (EventOf(hook) != event) continue;
    const std::string path = fmt::format("webhooks[{}]", i);
    WebhookDelivery d;
    d.job_id = job.id;
    if (task_event) d.task_id = task->id;
    d.event = std::string(event);
    d.created_at = now;
    d.next_attempt_at = now;
    // Evaluated in this order; the first failure gives the delivery's error.
    std::string error;
    if (!hook.if_expr.empty()) {
      auto runs = EvaluateCondition(hook.if_expr, vars);
      if (!runs.ok()) {
        error = fmt::format("{}.if: {}", path, runs.status().message());
      } else if (!*runs) {
        continue;
      }
    }
    auto eval = [&](const std::string& text, const std::string& field) -> std::string {
      if (!error.empty()) return {};
      auto value = expr::EvaluateTemplate(text, vars);
      if (!value.ok()) {
        error = fmt::format("{}.{}: {}", path, field, value.status().message());
        return {};
      }
      if (InvalidUtf8At(*value) != std::string_view::npos) {
        error = fmt::format("{}.{}: {}", path, field, kNotUtf8);
        return {};
      }
      return std::move(*value);
    };
    d.url = eval(hook.url, "url");
    if (error.empty() && !d.url.starts_with("http://") && !d.url.starts_with("https://")) {
      error =
          fmt::format("{}.url: evaluates to something other than an http:// or https:// URL", path);
    }
    for (const auto& [name, value] : hook.headers) {
      std::string header = eval(value, fmt::format("headers.{}", name));
      if (header.find_first_of("\r\n") != std::string::npos && error.empty()) {
        error = fmt::format("{}.headers.{}: evaluates to a value with a line break", path, name);
      }
      d.headers[name] = std::move(header);
    }
    d.secret = eval(hook.secret, "secret");
    d.body = body;
    if (!error.empty()) {
      // Nothing to send: kept, failed, for the API to show.
      d.state = DeliveryState::kFailed;
      d.error = std::move(error);
      d.completed_at = now;
      d.headers.clear();
      d.secret.clear();
    }
    d.id = new_id();
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace baton

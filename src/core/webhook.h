// Webhooks: which of a job's `webhooks` an event calls, evaluated as the event happens
// (Tork's semantics: `event` picks job.StateChange, job.Progress, task.StateChange or
// task.Progress, an empty one meaning job.StateChange; `if` is a condition over `job`
// and, for task events, `task`; `headers` are templates over the job's context). Pure:
// no I/O, no clock; the shell writes what it returns in the transaction of the change.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "core/records.h"

namespace baton {

// The event a webhook is called on (its `event`, or job.StateChange when empty).
std::string_view EventOf(const Webhook& hook);

// True when one of `definition`'s webhooks is called on `event`: the shell's quick test
// before it reads what evaluating them needs.
bool CallsWebhooks(const Job& definition, std::string_view event);

// The deliveries `event` calls for: one per webhook of `definition` on that event whose
// `if` holds, PENDING and due at `now`, with its url, headers and secret evaluated (over
// the job's `context`, and `job` and `task`: the summaries) and its body the job's
// summary (job events) or `task`'s (task events; `task` is null for job events). A
// webhook whose templates fail to evaluate gives a FAILED delivery that says which field
// and why, without a value: it is visible in the API, and the job goes on. `new_id`
// names each delivery: the idempotency id its every attempt carries.
std::vector<WebhookDelivery> WebhookDeliveriesFor(std::string_view event, const JobRecord& job,
                                                  const Job& definition,
                                                  const nlohmann::json& context,
                                                  const TaskRecord* task, TimePoint now,
                                                  const std::function<std::string()>& new_id);

}  // namespace baton

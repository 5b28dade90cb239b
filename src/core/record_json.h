// The API's JSON shapes of stored records (api.md: "Task JSON", "Job JSON"), also the
// body of task messages on the broker. Definitions come from job_json.h; these add ids,
// states, times and results.
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "core/records.h"

namespace baton {

nlohmann::json ToJson(const TaskRecord& task);
Result<TaskRecord> TaskRecordFromJson(const nlohmann::json& json);

// The full job, or (summary) without tasks, execution, context, secrets, defaults and
// webhooks. `execution` is added by the caller, who has the task rows.
nlohmann::json ToJson(const JobRecord& job, bool summary);

// The job's summary (ToJson(job, true)) with its definition given apart (a decision holds
// the row without it), built from the few fields a summary shows.
nlohmann::json JobSummaryJson(const JobRecord& job, const Job& definition);
// A task's summary, a webhook's body for task events (Tork's TaskSummary): ids, name,
// state, times, result, error, progress and node, not the definition.
nlohmann::json TaskSummaryJson(const TaskRecord& task);

// One attempt of a webhook delivery ({at, statusCode, durationMs, error}): as stored in a
// delivery's history and as GET /jobs/{id}/webhooks shows it.
nlohmann::json ToJson(const WebhookAttempt& attempt);
Result<WebhookAttempt> WebhookAttemptFromJson(const nlohmann::json& json);
// A delivery as GET /jobs/{id}/webhooks shows it: what was sent and how it went, never its
// headers, key or body.
nlohmann::json ToJson(const WebhookDelivery& delivery);

}  // namespace baton

// Template evaluation of task definitions, as the engine does it when a task is
// scheduled: the job's defaults, the `if`, every templated field (checked as a literal
// would be), and the wait before a retry. Pure: no I/O, no clock, when `options` pin
// now() and randomInt() (flow gives the decision's time and a seeded source).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "core/duration.h"
#include "core/job.h"
#include "expr/expr.h"

namespace baton {

// What an evaluated value must be, as a literal is (a document that is not UTF-8 is
// refused): else it can be neither stored nor sent. The value itself is never quoted in
// an error: it may hold a secret.
inline constexpr std::string_view kNotUtf8 = "the value of its template is not valid UTF-8";

// True when every string in `value` (and every key) is valid UTF-8.
bool IsUtf8(const nlohmann::json& value);

// Applies the job's defaults to a runnable task that leaves those fields empty.
void ApplyDefaults(const std::optional<Defaults>& defaults, Task& task);

// An `if` (or another condition, named by `field`): false when it evaluates to "false";
// an error names the field.
Result<bool> EvaluateCondition(const std::string& if_expr, const expr::Vars& vars,
                               const expr::EvalOptions& options = {},
                               std::string_view field = "if");

// Evaluates the templates of a task definition in place (not its children, which are
// evaluated when they are scheduled). Every evaluated field passes the checks a literal
// one would (UTF-8, a non-empty name, no engine queue, a valid var). Errors name the
// field, never its value. A runnable task without a queue gets the default one.
Status EvaluateTask(Task& task, const expr::Vars& vars, const expr::EvalOptions& options = {});

// An each's list: a template ("{{ sequence(1, 3) }}"), or, as Tork takes it, a bare
// expression without braces ("[1, 2, 3]", "inputs.items").
Result<expr::Value> EvaluateEachList(std::string_view list, const expr::Vars& vars,
                                     const expr::EvalOptions& options = {});

// The wait before retry attempt `attempt` (1-based): none without initialDelay.
Duration RetryDelay(const Retry& retry, int attempt);

}  // namespace baton

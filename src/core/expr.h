// The expression language of job files: `{{ expr }}` templates in expr-lang syntax
// (the language Tork uses), evaluated over a JSON-like value.
//
// Every function here is total: for any input it returns a value or an error Status
// (kInvalidArgument) whose message quotes the expression and says what is wrong, e.g.
//   unknown name bad_function in "{{ bad_function() }}"
// Nothing here throws, crashes, or runs unbounded: nesting depth, sizes of produced
// strings and lists, and regex complexity are capped.
//
// Thread-safety: all functions are reentrant; they share no mutable state.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace baton::expr {

// Values are JSON values; integers and floats are kept apart as expr-lang does.
using Value = nlohmann::json;

// Limits that keep evaluation bounded.
inline constexpr int kMaxDepth = 128;                     // nesting of the syntax tree
inline constexpr std::size_t kMaxSequence = 1'000'000;    // elements `sequence` may make
inline constexpr std::size_t kMaxStringBytes = 16 << 20;  // bytes a string may grow to
inline constexpr std::size_t kMaxExpressionBytes = 64 << 10;

// Hooks for the non-deterministic functions, so tests can pin them.
struct EvalOptions {
  // Returns a uniformly random integer in [0, n). Default: a thread-local PRNG.
  std::function<std::int64_t(std::int64_t n)> random;
  // Returns the current time as RFC 3339 UTC text, for now(). Default: the system clock.
  std::function<std::string()> now;
};

// Evaluates one expression, without braces ("1 + 2", "inputs.who"). `vars` is an object
// whose members are the variables (inputs, secrets, tasks, job, item, ...).
Result<Value> Evaluate(std::string_view expression, const Value& vars,
                       const EvalOptions& options = {});

// Checks that `expression` is well-formed (lexes and parses) without evaluating it.
Status CheckExpression(std::string_view expression);

// True when `text` contains a `{{`.
bool HasTemplate(std::string_view text);

// Checks that every `{{` in `text` is closed by `}}`, no `}}` is unopened, and each
// enclosed expression is well-formed. The message says what is wrong and where (the
// 0-based byte offset in `text`).
Status CheckTemplate(std::string_view text);

// Evaluates a template to a string: text outside the braces is kept, each `{{ e }}` is
// replaced by its value rendered as text (strings as is, numbers in shortest form,
// true/false, nil as empty, lists and maps as compact JSON).
Result<std::string> EvaluateTemplate(std::string_view text, const Value& vars,
                                     const EvalOptions& options = {});

// Evaluates a template to a native value: when `text`, trimmed, is exactly one
// `{{ e }}`, the value of e; otherwise the string EvaluateTemplate would return.
// Used for `if`, `each.list` and job `output`.
Result<Value> EvaluateTemplateValue(std::string_view text, const Value& vars,
                                    const EvalOptions& options = {});

// Renders a value as EvaluateTemplate does.
std::string ToText(const Value& value);

}  // namespace baton::expr

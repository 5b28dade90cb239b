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

// The variables an expression sees: the members of an object (inputs, secrets, tasks,
// job, item, ...), or of two, `over` first and then `base`, so that an each's loop
// variables join a job's context without a copy of it (a context may hold 100,000
// inputs). Made implicitly from one object (a temporary one too, in a call's argument).
// It refers to its objects: they must outlive it.
class Vars {
 public:
  Vars(const Value& base) : base_(&base) {}  // NOLINT(google-explicit-constructor)
  Vars(const Value& base, const Value& over) : base_(&base), over_(&over) {}
  // The variable `name`, or null when neither object has it.
  const Value* Find(const std::string& name) const {
    for (const Value* layer : {over_, base_}) {
      if (layer == nullptr || !layer->is_object()) continue;
      if (auto it = layer->find(name); it != layer->end()) return &*it;
    }
    return nullptr;
  }

 private:
  const Value* base_;
  const Value* over_ = nullptr;
};

// Evaluates one expression, without braces ("1 + 2", "inputs.who").
Result<Value> Evaluate(std::string_view expression, const Vars& vars,
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
Result<std::string> EvaluateTemplate(std::string_view text, const Vars& vars,
                                     const EvalOptions& options = {});

// Evaluates a template to a native value: when `text`, trimmed, is exactly one
// `{{ e }}`, the value of e; otherwise the string EvaluateTemplate would return.
// Used for `if`, `each.list` and job `output`.
Result<Value> EvaluateTemplateValue(std::string_view text, const Vars& vars,
                                    const EvalOptions& options = {});

// Renders a value as EvaluateTemplate does.
std::string ToText(const Value& value);

}  // namespace baton::expr

// libFuzzer target for the expression language. It feeds each input to every entry
// point, as a template and as a bare expression, and checks that they agree: nothing may
// crash, hang, throw or leak, and every error is an INVALID_ARGUMENT with a message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "expr/expr.h"

namespace {

using baton::Status;
using baton::StatusCode;
using baton::expr::EvalOptions;
using baton::expr::Value;

const Value& Vars() {
  static const Value* vars = new Value(Value::parse(R"({
    "inputs": {"who": "world"},
    "secrets": {"token": "s3cret"},
    "tasks": {"greeting": "hello"},
    "item": {"index": 0, "value": 1},
    "job": {"id": "job-1", "name": "fuzz"}
  })"));
  return *vars;
}

// Pinned, so that a crash reproduces.
const EvalOptions& Options() {
  static const EvalOptions* options = [] {
    auto* o = new EvalOptions;
    o->random = [](std::int64_t n) { return n / 2; };
    o->now = [] { return std::string("2024-01-01T00:00:00Z"); };
    return o;
  }();
  return *options;
}

void Require(bool condition) {
  if (!condition) std::abort();
}

void RequireWellFormedError(const Status& status) {
  Require(status.code() == StatusCode::kInvalidArgument && !status.message().empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > baton::expr::kMaxExpressionBytes) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  namespace expr = baton::expr;

  const Status checked = expr::CheckTemplate(text);
  const baton::Result<std::string> rendered = expr::EvaluateTemplate(text, Vars(), Options());
  const baton::Result<Value> native = expr::EvaluateTemplateValue(text, Vars(), Options());
  if (!checked.ok()) {
    RequireWellFormedError(checked);
    Require(!rendered.ok());  // a template that does not parse cannot evaluate
  }
  if (!rendered.ok()) RequireWellFormedError(rendered.status());
  if (!native.ok()) RequireWellFormedError(native.status());
  // Both evaluate the same expressions with the same pinned hooks; rendering also turns
  // the values into text (which has a size cap), so it can fail where the value does not.
  Require(!rendered.ok() || native.ok());
  Require(expr::HasTemplate(text) == (text.find("{{") != std::string_view::npos));

  const Status parsed = expr::CheckExpression(text);
  const baton::Result<Value> value = expr::Evaluate(text, Vars(), Options());
  if (!parsed.ok()) {
    RequireWellFormedError(parsed);
    Require(!value.ok() && value.status() == parsed);
  }
  if (value.ok()) {
    (void)expr::ToText(*value);
  } else {
    RequireWellFormedError(value.status());
  }
  return 0;
}
